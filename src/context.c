/*
 * context.c — the context handle: one allocation pass for the KV cache and activations,
 * sequence bookkeeping, and wlm_eval (prefill and decode). In no-cache mode every evaluation
 * recomputes the whole sequence from position 0, the baseline the KV cache is measured against.
 */
#include <stdlib.h>
#include <string.h>

#include "model.h"

void wlm_context_params_default(wlm_context_params *params) {
    if (!params) return;
    params->n_ctx = 0;
    params->kv_cache = 1;
    params->use_simd = 1;
}

static void context_release(wlm_context *c) {
    free(c->tokens);
    free(c->x);
    free(c->xb);
    free(c->xb2);
    free(c->hb);
    free(c->hb2);
    free(c->q);
    free(c->att);
    free(c->logits);
    free(c->xq);
    free(c->rope_cos);
    free(c->rope_sin);
    free(c->key_cache);
    free(c->value_cache);
    free(c->gen.held);
    free(c->gen.out);
    wlm_sampler_free(&c->sampler);
}

/* calloc of n floats with the byte count checked against size_t and added to *total. */
static float *alloc_floats(uint64_t n, size_t *total) {
    if (n == 0) n = 1;
    if (n > (uint64_t)(SIZE_MAX / sizeof(float))) return NULL;
    *total += (size_t)n * sizeof(float);
    return calloc((size_t)n, sizeof(float));
}

int wlm_context_new(const wlm_model *model, const wlm_context_params *params, wlm_context **out) {
    if (!out) return WLM_ERR_INVALID_ARG;
    wlm_context *c = calloc(1, sizeof *c);
    *out = c;
    if (!c) return WLM_ERR_NOMEM;
    if (!model) return wlm_set_error(c->errmsg, WLM_ERR_INVALID_ARG, "model is NULL");
    if (!model->loaded) return wlm_set_error(c->errmsg, WLM_ERR_STATE, "the model did not load");
    if (model->vocab_only)
        return wlm_set_error(c->errmsg, WLM_ERR_STATE,
                             "the model was loaded with WLM_LOAD_VOCAB_ONLY: it has no weights");
    wlm_context_params defaults;
    wlm_context_params_default(&defaults);
    if (!params) params = &defaults;
    const wlm_hparams *p = &model->hp;
    if (params->n_ctx < 0 || params->n_ctx > p->seq_len)
        return wlm_set_error(c->errmsg, WLM_ERR_INVALID_ARG,
                             "n_ctx %d is outside 0..%d (0 = the model's seq_len)",
                             (int)params->n_ctx, (int)p->seq_len);
    c->model = model;
    c->n_ctx = params->n_ctx ? params->n_ctx : p->seq_len;
    c->kv_cache = params->kv_cache != 0;
    c->use_simd = params->use_simd != 0;
    c->k = c->use_simd ? &wlm_kernels_simd : &wlm_kernels_ref;

    const uint64_t cache = (uint64_t)p->n_layers * (uint64_t)c->n_ctx * (uint64_t)p->kv_dim;
    size_t total = 0;
    c->x = alloc_floats((uint64_t)p->dim, &total);
    c->xb = alloc_floats((uint64_t)p->dim, &total);
    c->xb2 = alloc_floats((uint64_t)p->dim, &total);
    c->hb = alloc_floats((uint64_t)p->hidden_dim, &total);
    c->hb2 = alloc_floats((uint64_t)p->hidden_dim, &total);
    c->q = alloc_floats((uint64_t)p->dim, &total);
    c->att = alloc_floats((uint64_t)p->n_heads * (uint64_t)c->n_ctx, &total);
    c->logits = alloc_floats((uint64_t)p->vocab_size, &total);
    c->rope_cos = alloc_floats((uint64_t)p->head_size / 2, &total);
    c->rope_sin = alloc_floats((uint64_t)p->head_size / 2, &total);
    c->key_cache = alloc_floats(cache, &total);
    c->value_cache = alloc_floats(cache, &total);
    /* Quantized activations take fewer bytes than floats: room for the widest input + slack. */
    const int32_t widest = p->hidden_dim > p->dim ? p->hidden_dim : p->dim;
    c->xq = alloc_floats((uint64_t)widest + 256, &total);
    c->tokens = calloc((size_t)c->n_ctx, sizeof(int32_t));
    total += (size_t)c->n_ctx * sizeof(int32_t);
    if (!c->x || !c->xb || !c->xb2 || !c->hb || !c->hb2 || !c->q || !c->att || !c->logits || !c->xq ||
        !c->rope_cos || !c->rope_sin || !c->key_cache || !c->value_cache || !c->tokens) {
        context_release(c);
        memset(c, 0, sizeof *c);
        return wlm_set_error(c->errmsg, WLM_ERR_NOMEM,
                             "out of memory: the context needs %zu bytes (KV cache %llu)", total,
                             (unsigned long long)(2 * cache * sizeof(float)));
    }
    c->bytes = total;
    c->gen.pending = -1;
    return WLM_OK;
}

void wlm_context_free(wlm_context *ctx) {
    if (!ctx) return;
    context_release(ctx);
    free(ctx);
}

const char *wlm_context_errmsg(const wlm_context *ctx) {
    return ctx ? ctx->errmsg : "no context (NULL handle)";
}

size_t wlm_context_memory(const wlm_context *ctx) { return ctx ? ctx->bytes : 0; }

void wlm_context_reset(wlm_context *ctx) {
    if (!ctx) return;
    ctx->n_past = 0;
    ctx->has_logits = 0;
    ctx->gen.active = 0;
    ctx->gen.done = 0;
    ctx->gen.pending = -1;
    ctx->gen.held_len = 0;
}

int32_t wlm_context_n_past(const wlm_context *ctx) { return ctx ? ctx->n_past : 0; }

int wlm_eval(wlm_context *ctx, const int32_t *tokens, int32_t n) {
    if (!ctx) return WLM_ERR_INVALID_ARG;
    ctx->errmsg[0] = '\0';
    if (!ctx->model) return wlm_set_error(ctx->errmsg, WLM_ERR_STATE, "context has no model");
    if (!tokens || n < 1)
        return wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG, "no tokens to evaluate");
    const int32_t vocab = ctx->model->hp.vocab_size;
    for (int32_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= vocab)
            return wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG,
                                 "token id %d at index %d is outside the vocabulary 0..%d",
                                 (int)tokens[i], (int)i, (int)vocab - 1);
    if (n > ctx->n_ctx - ctx->n_past)
        return wlm_set_error(ctx->errmsg, WLM_ERR_CONTEXT_FULL,
                             "%d tokens do not fit: %d of the context's %d positions are used",
                             (int)n, (int)ctx->n_past, (int)ctx->n_ctx);
    memcpy(ctx->tokens + ctx->n_past, tokens, sizeof(int32_t) * (size_t)n);
    const int32_t end = ctx->n_past + n;
    /* With the cache, only the new positions run; without it, the whole sequence again. */
    for (int32_t pos = ctx->kv_cache ? ctx->n_past : 0; pos < end; pos++)
        wlm_forward(ctx, ctx->tokens[pos], pos, pos == end - 1);
    ctx->n_past = end;
    ctx->has_logits = 1;
    return WLM_OK;
}

const float *wlm_logits(const wlm_context *ctx) {
    return ctx && ctx->has_logits ? ctx->logits : NULL;
}
