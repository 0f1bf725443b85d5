/*
 * generate.c — the step-wise generation API: begin (validate, prefill), next (decode the
 * previous token, sample, check stop conditions), abort. Text that might be the start of a stop
 * string is held back until it is known not to be one, so a stop string is never emitted.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

void wlm_gen_params_default(wlm_gen_params *p) {
    if (!p) return;
    memset(p, 0, sizeof *p);
    p->temperature = 1.0f;
    p->top_k = 0;
    p->top_p = 0.9f;
    p->repeat_penalty = 1.0f;
    p->repeat_last_n = 64;
    p->seed = 0;
    p->max_tokens = 256;
    p->add_bos = 1;
    p->n_stop = 0;
}

/* Grows *buf to hold at least `need` bytes. */
static int reserve(char **buf, size_t *cap, size_t need) {
    if (need <= *cap) return WLM_OK;
    size_t n = *cap ? *cap : 64;
    while (n < need) n *= 2;
    char *p = realloc(*buf, n);
    if (!p) return WLM_ERR_NOMEM;
    *buf = p;
    *cap = n;
    return WLM_OK;
}

int wlm_generate_begin(wlm_context *ctx, const int32_t *tokens, int32_t n,
                       const wlm_gen_params *params) {
    if (!ctx) return WLM_ERR_INVALID_ARG;
    ctx->errmsg[0] = '\0';
    wlm_context_reset(ctx);
    if (!ctx->model) return wlm_set_error(ctx->errmsg, WLM_ERR_STATE, "context has no model");
    if (!params) return wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG, "params is NULL");
    if (!tokens || n < 1)
        return wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG,
                             "the prompt is empty: give at least one token (BOS)");
    int rc = wlm_sampler_check(params, ctx->errmsg, WLM_ERRMSG_SIZE);
    if (rc != WLM_OK) return rc;
    if (params->max_tokens < 0)
        return wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG,
                             "max_tokens must be >= 0, 0 = until the context is full (got %d)",
                             (int)params->max_tokens);
    if (params->n_stop < 0 || params->n_stop > WLM_MAX_STOP_STRINGS)
        return wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG, "n_stop must be in 0..%d (got %d)",
                             WLM_MAX_STOP_STRINGS, (int)params->n_stop);
    wlm_generation *g = &ctx->gen;
    for (int i = 0; i < params->n_stop; i++) {
        const char *s = params->stop[i];
        const char *nul = memchr(s, '\0', WLM_MAX_STOP_LEN);
        size_t len = nul ? (size_t)(nul - s) : WLM_MAX_STOP_LEN;
        if (len == 0 || len == WLM_MAX_STOP_LEN)
            return wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG,
                                 "stop string %d is empty or not NUL-terminated within %d bytes",
                                 i, WLM_MAX_STOP_LEN);
        memcpy(g->stop[i], s, len + 1);
        g->stop_len[i] = len;
    }
    if (n > ctx->n_ctx)
        return wlm_set_error(ctx->errmsg, WLM_ERR_CONTEXT_FULL,
                             "the prompt is %d tokens; the context holds %d", (int)n,
                             (int)ctx->n_ctx);
    rc = wlm_sampler_init(&ctx->sampler, ctx->model->hp.vocab_size, params);
    if (rc != WLM_OK) return wlm_set_error(ctx->errmsg, rc, "out of memory for the sampler");
    rc = wlm_eval(ctx, tokens, n); /* prefill */
    if (rc != WLM_OK) return rc;
    g->n_stop = params->n_stop;
    g->max_tokens = params->max_tokens;
    g->n_prompt = n;
    g->n_generated = 0;
    g->prev = tokens[n - 1];
    g->pending = -1;
    g->held_len = 0;
    g->aborted = 0;
    g->stop_reason = WLM_STOP_NONE;
    g->done = 0;
    g->active = 1;
    return WLM_OK;
}

int wlm_generate_begin_text(wlm_context *ctx, const char *prompt, const wlm_gen_params *params) {
    if (!ctx) return WLM_ERR_INVALID_ARG;
    ctx->errmsg[0] = '\0';
    if (!ctx->model) return wlm_set_error(ctx->errmsg, WLM_ERR_STATE, "context has no model");
    if (!prompt || !params)
        return wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG, "prompt or params is NULL");
    if (!ctx->model->has_tokenizer)
        return wlm_set_error(ctx->errmsg, WLM_ERR_TOKENIZER, "the model has no tokenizer loaded");
    size_t len = strlen(prompt);
    int32_t need = wlm_tokenize(ctx->model, prompt, len, params->add_bos, NULL, 0);
    if (need < 0) return wlm_set_error(ctx->errmsg, need, "cannot tokenize the prompt");
    if (need == 0)
        return wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG,
                             "the prompt is empty and add_bos is off: nothing to start from");
    int32_t *tokens = malloc(sizeof(int32_t) * (size_t)need);
    if (!tokens) return wlm_set_error(ctx->errmsg, WLM_ERR_NOMEM, "out of memory for the prompt");
    wlm_tokenize(ctx->model, prompt, len, params->add_bos, tokens, need);
    int rc = wlm_generate_begin(ctx, tokens, need, params);
    free(tokens);
    return rc;
}

void wlm_generate_abort(wlm_context *ctx) {
    if (ctx && ctx->gen.active) ctx->gen.aborted = 1;
}

/* Ends the generation: releases any held text in out->piece. */
static int finish(wlm_context *ctx, wlm_token *out, int32_t reason) {
    wlm_generation *g = &ctx->gen;
    g->active = 0;
    g->done = 1;
    g->stop_reason = reason;
    out->id = -1;
    out->prob = 0.0f;
    out->prob_sampled = 0.0f;
    out->stop_reason = reason;
    out->n_past = ctx->n_past;
    if (reserve(&g->out, &g->out_cap, g->held_len + 1) != WLM_OK) g->held_len = 0;
    if (g->held_len) memcpy(g->out, g->held, g->held_len);
    if (g->out) g->out[g->held_len] = '\0';
    out->piece = g->out ? g->out : "";
    out->piece_len = g->held_len;
    g->held_len = 0;
    return WLM_DONE;
}

/* Moves `piece` through the stop-string filter: appends it to the held text, then either finds
 * a complete stop string (returns 1; the text before it is released) or releases everything
 * except the longest tail that could still begin a stop string. Released bytes go to g->out. */
static int filter_stop(wlm_generation *g, const char *piece, size_t len, size_t *released) {
    *released = 0;
    if (reserve(&g->held, &g->held_cap, g->held_len + len + 1) != WLM_OK) return -1;
    memcpy(g->held + g->held_len, piece, len);
    g->held_len += len;
    size_t keep = 0, cut = g->held_len; /* cut: where a complete stop string starts */
    int found = 0;
    for (int i = 0; i < g->n_stop; i++) {
        size_t sl = g->stop_len[i];
        for (size_t at = 0; at + sl <= g->held_len; at++) {
            if (memcmp(g->held + at, g->stop[i], sl) == 0) {
                if (at < cut) cut = at;
                found = 1;
                break;
            }
        }
        /* longest proper prefix of stop[i] that ends the held text */
        for (size_t k = sl - 1; k > keep; k--) {
            if (k <= g->held_len && memcmp(g->held + g->held_len - k, g->stop[i], k) == 0) {
                keep = k;
                break;
            }
        }
    }
    size_t n_out = found ? cut : g->held_len - keep;
    if (reserve(&g->out, &g->out_cap, n_out + 1) != WLM_OK) return -1;
    memcpy(g->out, g->held, n_out);
    g->out[n_out] = '\0';
    *released = n_out;
    if (found) {
        g->held_len = 0;
    } else {
        memmove(g->held, g->held + n_out, keep);
        g->held_len = keep;
    }
    return found;
}

int wlm_generate_next(wlm_context *ctx, wlm_token *out) {
    if (!ctx || !out) return WLM_ERR_INVALID_ARG;
    ctx->errmsg[0] = '\0';
    wlm_generation *g = &ctx->gen;
    memset(out, 0, sizeof *out);
    out->piece = "";
    if (g->done) {
        out->id = -1;
        out->stop_reason = g->stop_reason;
        out->n_past = ctx->n_past;
        return WLM_DONE;
    }
    if (!g->active)
        return wlm_set_error(ctx->errmsg, WLM_ERR_STATE,
                             "no generation in progress: call wlm_generate_begin first");
    if (g->aborted) return finish(ctx, out, WLM_STOP_ABORTED);
    if (g->max_tokens > 0 && g->n_generated >= g->max_tokens)
        return finish(ctx, out, WLM_STOP_MAX_TOKENS);
    if (g->pending >= 0) { /* decode: feed the token emitted by the previous step */
        if (ctx->n_past >= ctx->n_ctx) return finish(ctx, out, WLM_STOP_CONTEXT_FULL);
        int32_t t = g->pending;
        g->pending = -1;
        int rc = wlm_eval(ctx, &t, 1);
        if (rc != WLM_OK) {
            g->active = 0;
            return rc;
        }
    }
    const wlm_model *m = ctx->model;
    float prob = 0.0f, prob_sampled = 0.0f;
    int32_t next = wlm_sampler_sample(&ctx->sampler, ctx->logits, ctx->tokens, ctx->n_past,
                                      &prob, &prob_sampled);
    const int32_t bos = m->has_tokenizer ? m->tok.bos_id : 1;
    const int32_t eos = m->has_tokenizer ? m->tok.eos_id : 2;
    if (next == eos || next == bos) return finish(ctx, out, WLM_STOP_EOS);

    size_t plen = 0;
    const char *piece = wlm_token_piece(m, g->prev, next, &plen);
    if (!piece) piece = "", plen = 0;
    size_t released = 0;
    int hit = filter_stop(g, piece, plen, &released);
    if (hit < 0) {
        g->active = 0;
        return wlm_set_error(ctx->errmsg, WLM_ERR_NOMEM, "out of memory for generated text");
    }
    g->n_generated++;
    g->prev = next;
    g->pending = next;
    if (hit) { /* the stop string itself is dropped; text before it goes out with DONE */
        g->active = 0;
        g->done = 1;
        g->stop_reason = WLM_STOP_STRING;
        out->id = -1;
        out->piece = g->out;
        out->piece_len = released;
        out->stop_reason = WLM_STOP_STRING;
        out->n_past = ctx->n_past;
        return WLM_DONE;
    }
    out->id = next;
    out->piece = g->out;
    out->piece_len = released;
    out->prob = prob;
    out->prob_sampled = prob_sampled;
    out->n_past = ctx->n_past + 1;
    out->stop_reason = WLM_STOP_NONE;
    return WLM_OK;
}
