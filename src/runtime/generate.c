/*
 * generate.c — the step-wise generation API for one sequence or a batch: begin (validate,
 * prefill every distinct prompt in one batch, fork sequences whose prompt repeats an earlier
 * one), next (evaluate every sequence's previous token in one batched forward pass, sample each
 * with its own sampler, check each one's stop conditions), abort; and continuous batching: add
 * a sequence to the running batch (its prompt is prefilled in the next step's forward pass,
 * beside the other sequences' decode tokens) and end one sequence (its slot and KV blocks
 * freed). Text that might be the start
 * of a stop string is held back until it is known not to be one, so a stop string is never
 * emitted. When a sequence fills the context it stops, or shifts (wlm_seq_shift) if asked.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "sampling/grammar.h"

void wlm_gen_params_default(wlm_gen_params *p) {
    if (!p) return;
    memset(p, 0, sizeof *p);
    p->temperature = 1.0f;
    p->top_k = 0;
    p->top_p = 0.9f;
    p->min_p = 0.0f;
    p->typical_p = 1.0f;
    p->repeat_penalty = 1.0f;
    p->repeat_last_n = 64;
    p->order = WLM_ORDER_LLAMACPP;
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

/* Validates the non-sampler fields of one sequence's parameters and prompt and prepares its
 * generation state (stop strings, sampler). `who` prefixes messages ("" or "sequence 3: "). */
/* The model's tokenizer.ggml.suppress_tokens (Gemma 4) added to a sampler's banned tokens: they
 * are never sampled, while their raw logits (and so the reported probabilities, llama.cpp's
 * n_probs) stay as computed — what llama.cpp b12211 does. WLM_ERR_NOMEM or WLM_OK. */
static int ban_suppressed(wlm_sampler *s, const wlm_model *m) {
    if (m->n_suppress == 0) return WLM_OK;
    int32_t *b = realloc(s->banned, sizeof(int32_t) * (size_t)(s->n_banned + m->n_suppress));
    if (!b) return WLM_ERR_NOMEM;
    memcpy(b + s->n_banned, m->suppress, sizeof(int32_t) * (size_t)m->n_suppress);
    s->banned = b;
    s->n_banned += m->n_suppress;
    return WLM_OK;
}

static int setup_seq(wlm_context *c, int32_t i, const int32_t *tokens, int32_t n,
                     const wlm_gen_params *params, const char *who, int32_t embd_before) {
    const wlm_hparams *hp = &c->model->hp;
    char msg[WLM_ERRMSG_SIZE];
    if (!tokens || n < 1)
        return wlm_set_error(c->errmsg, WLM_ERR_INVALID_ARG,
                             "%sthe prompt is empty: give at least one token (BOS)", who);
    for (int32_t j = 0; j < n; j++)
        if ((tokens[j] < 0 || tokens[j] >= hp->vocab_size) &&
            !(tokens[j] == WLM_TOKEN_EMBD && j < embd_before)) /* image rows already in the cache */
            return wlm_set_error(c->errmsg, WLM_ERR_INVALID_ARG,
                                 "%sprompt token %d at index %d is outside the vocabulary 0..%d",
                                 who, (int)tokens[j], (int)j, (int)hp->vocab_size - 1);
    int rc = wlm_sampler_check(params, hp->vocab_size, msg, sizeof msg);
    if (rc == WLM_OK) rc = wlm_grammar_lazy_check(params, hp->vocab_size, msg, sizeof msg);
    if (rc != WLM_OK) return wlm_set_error(c->errmsg, rc, "%s%s", who, msg);
    if (params->max_tokens < 0)
        return wlm_set_error(c->errmsg, WLM_ERR_INVALID_ARG,
                             "%smax_tokens must be >= 0, 0 = no limit (got %d)", who,
                             (int)params->max_tokens);
    if (params->context_shift != 0 && params->context_shift != 1)
        return wlm_set_error(c->errmsg, WLM_ERR_INVALID_ARG,
                             "%scontext_shift must be 0 or 1 (got %d)", who,
                             (int)params->context_shift);
    if (params->n_keep < 0 || (params->context_shift && params->n_keep >= c->n_ctx - 1))
        return wlm_set_error(c->errmsg, WLM_ERR_INVALID_ARG,
                             "%sn_keep must be in 0..%d for a context of %d (got %d)", who,
                             (int)c->n_ctx - 2, (int)c->n_ctx, (int)params->n_keep);
    if (params->context_shift && !c->kv_cache)
        return wlm_set_error(c->errmsg, WLM_ERR_INVALID_ARG,
                             "%scontext_shift needs a context with a KV cache", who);
    if (params->context_shift) { /* refused up front where the model cannot shift */
        char why[WLM_ERRMSG_SIZE];
        if ((rc = wlm_shift_supported(c->model, why)) != WLM_OK)
            return wlm_set_error(c->errmsg, rc, "%s%s", who, why);
    }
    if (params->checkpoint < 0)
        return wlm_set_error(c->errmsg, WLM_ERR_INVALID_ARG,
                             "%scheckpoint must be >= 0 (got %d)", who, (int)params->checkpoint);
    if (params->cache_prompt != 0 && params->cache_prompt != 1)
        return wlm_set_error(c->errmsg, WLM_ERR_INVALID_ARG,
                             "%scache_prompt must be 0 or 1 (got %d)", who,
                             (int)params->cache_prompt);
    if (params->n_stop < 0 || params->n_stop > WLM_MAX_STOP_STRINGS)
        return wlm_set_error(c->errmsg, WLM_ERR_INVALID_ARG, "%sn_stop must be in 0..%d (got %d)",
                             who, WLM_MAX_STOP_STRINGS, (int)params->n_stop);
    wlm_generation *g = &c->gens[i];
    for (int s = 0; s < params->n_stop; s++) {
        const char *str = params->stop[s];
        const char *nul = memchr(str, '\0', WLM_MAX_STOP_LEN);
        size_t len = nul ? (size_t)(nul - str) : WLM_MAX_STOP_LEN;
        if (len == 0 || len == WLM_MAX_STOP_LEN)
            return wlm_set_error(c->errmsg, WLM_ERR_INVALID_ARG,
                                 "%sstop string %d is empty or not NUL-terminated within %d bytes",
                                 who, s, WLM_MAX_STOP_LEN);
        memcpy(g->stop[s], str, len + 1);
        g->stop_len[s] = len;
    }
    if (n > c->n_ctx)
        return wlm_set_error(c->errmsg, WLM_ERR_CONTEXT_FULL,
                             "%sthe prompt is %d tokens; the context holds %d", who, (int)n,
                             (int)c->n_ctx);
    rc = wlm_sampler_init(&g->sampler, hp->vocab_size, params);
    if (rc == WLM_OK) rc = ban_suppressed(&g->sampler, c->model);
    if (rc != WLM_OK) return wlm_set_error(c->errmsg, rc, "%sout of memory for the sampler", who);
    if (params->grammar) { /* compiled here, owned by the sampler (grammar_vocab.c) */
        wlm_gram *gram;
        wlm_gram_matcher *gm;
        rc = wlm_grammar_setup(c, params->grammar, params->grammar_len, tokens[n - 1], who,
                               &gram, &gm);
        if (rc != WLM_OK) return rc;
        wlm_sampler_set_grammar(&g->sampler, gram, gm);
        rc = wlm_sampler_set_lazy(&g->sampler, params);
        if (rc != WLM_OK) return wlm_set_error(c->errmsg, rc, "%sout of memory", who);
    }
    g->n_stop = params->n_stop;
    g->max_tokens = params->max_tokens;
    g->context_shift = params->context_shift;
    g->n_keep = params->n_keep;
    g->n_prompt = n;
    g->n_generated = 0;
    g->prev = tokens[n - 1];
    g->pending = -1;
    g->held_len = 0;
    g->stop_reason = WLM_STOP_NONE;
    g->done = 0;
    g->active = 0;
    g->join_from = 0;
    return WLM_OK;
}

/* Positions of sequence 0's KV cache that a single prompt can keep (cache_prompt): the common
 * prefix of the cached tokens and the prompt, within the exact part of the cache, leaving at
 * least the prompt's last token to evaluate (its logits start the generation). */
static int32_t reusable_prefix(const wlm_context *c, int32_t n_seqs, const int32_t *const *prompts,
                               const int32_t *n_tokens, const wlm_gen_params *params) {
    if (n_seqs != 1 || !params || params->cache_prompt != 1 || !c->kv_cache || !c->seqs ||
        !prompts || !prompts[0] || !n_tokens || n_tokens[0] < 2)
        return 0;
    const wlm_seq *s = &c->seqs[0];
    int32_t n = s->n_past < n_tokens[0] - 1 ? s->n_past : n_tokens[0] - 1;
    if (n > s->exact) n = s->exact;
    int32_t k = 0;
    while (k < n && s->tokens[k] == prompts[0][k]) k++;
    return k;
}

int wlm_batch_begin_check(wlm_context *ctx, int32_t n_seqs, int args_ok, const char *bad_args) {
    if (!ctx->model || !ctx->seqs)
        return wlm_set_error(ctx->errmsg, WLM_ERR_STATE, "context has no model");
    if (!args_ok) return wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG, "%s", bad_args);
    if (n_seqs < 1 || n_seqs > ctx->n_seq_max)
        return wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG,
                             "n_seqs %d is outside 1..%d (the context's n_seq_max)", (int)n_seqs,
                             (int)ctx->n_seq_max);
    if (n_seqs > 1 && !ctx->kv_cache)
        return wlm_set_error(ctx->errmsg, WLM_ERR_STATE,
                             "a context without KV cache generates one sequence at a time");
    return WLM_OK;
}

int wlm_generate_batch_begin(wlm_context *ctx, int32_t n_seqs, const int32_t *const *prompts,
                             const int32_t *n_tokens, const wlm_gen_params *params) {
    if (!ctx) return WLM_ERR_INVALID_ARG;
    ctx->errmsg[0] = '\0';
    wlm_deferred_drop(ctx); /* positions recorded but never computed are not a cache */
    int32_t keep = reusable_prefix(ctx, n_seqs, prompts, n_tokens, params);
    ctx->last_restore = -1;
    wlm_context_reset_keep(ctx, keep);
    if (keep > 0) keep = ctx->seqs[0].n_past; /* a recurrent state may restart earlier */
    /* a recurrent state restored from a snapshot before `keep` recomputed the tokens after it */
    ctx->n_cached = ctx->last_restore >= 0 && ctx->last_restore < keep ? ctx->last_restore : keep;
    int rc = wlm_batch_begin_check(ctx, n_seqs, params && prompts && n_tokens,
                                   "prompts or params is NULL");
    if (rc != WLM_OK) return rc;
    int64_t total = 0;
    for (int32_t i = 0; i < n_seqs; i++) {
        char who[32] = "";
        if (n_seqs > 1) snprintf(who, sizeof who, "sequence %d: ", (int)i);
        rc = setup_seq(ctx, i, prompts[i], n_tokens[i], &params[i], who, i == 0 ? ctx->n_cached : 0);
        if (rc != WLM_OK) return rc;
        total += n_tokens[i];
    }
    /* Prefill every distinct prompt in one batch; a repeated prompt forks its first copy (not in
     * a deferred context, whose backend keeps each sequence's rows: every prompt is evaluated). */
    int32_t src[WLM_MAX_SEQ], entry[WLM_MAX_SEQ];
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)total * 2);
    uint8_t *want = calloc((size_t)total, 1);
    if (!tok || !want) {
        free(tok);
        free(want);
        return wlm_set_error(ctx->errmsg, WLM_ERR_NOMEM, "out of memory for the prompts");
    }
    int32_t m = 0;
    for (int32_t i = 0; i < n_seqs; i++) {
        src[i] = i;
        for (int32_t j = 0; j < i && !ctx->deferred; j++)
            if (src[j] == j && n_tokens[j] == n_tokens[i] &&
                memcmp(prompts[j], prompts[i], sizeof(int32_t) * (size_t)n_tokens[i]) == 0) {
                src[i] = j;
                break;
            }
        if (src[i] != i) continue;
        for (int32_t t = i == 0 ? keep : 0; t < n_tokens[i]; t++) {
            tok[m] = prompts[i][t];
            tok[total + m] = i;
            m++;
        }
        want[m - 1] = 1;
        entry[i] = m - 1;
    }
    /* a recurrent state's checkpoint inside the part to prefill: two batches, the state
     * copied between them (the same results: a batch computes each entry as alone); in a
     * deferred context one batch, the backend copying the state when it reaches cp */
    int32_t first = 0, dfr_cp = 0;
    const int32_t cp = params[0].checkpoint;
    if (n_seqs == 1 && ctx->model->hp.n_rec_layers > 0 && cp > keep && cp < n_tokens[0]) {
        if (ctx->deferred) dfr_cp = cp;
        else first = cp - keep;
    }
    rc = WLM_OK;
    if (first > 0) {
        rc = wlm_eval_entries(ctx, tok, tok + total, want, first);
        if (rc == WLM_OK) wlm_state_snapshot(ctx, 0, WLM_SNAP_CHECKPOINT);
    }
    if (rc == WLM_OK) rc = wlm_eval_entries(ctx, tok + first, tok + total + first, want + first, m - first);
    if (rc == WLM_OK && first > 0) /* the logits' entry numbers are those of the second batch */
        for (int32_t i = 0; i < n_seqs; i++) entry[i] -= first;
    free(tok);
    free(want);
    if (rc != WLM_OK) return rc;
    if (dfr_cp > 0) wlm_deferred_snapshot(ctx, 0, WLM_SNAP_CHECKPOINT, dfr_cp);
    /* a recurrent state cannot be cut back: keep it at the prompt's end, where the next
     * request of a conversation is likely to resume (llama.cpp's context checkpoints) */
    if (n_seqs == 1) wlm_state_snapshot(ctx, 0, WLM_SNAP_PROMPT);
    for (int32_t i = 0; i < n_seqs; i++) {
        if (src[i] != i) {
            wlm_seq_fork_internal(ctx, src[i], i);
            entry[i] = entry[src[i]];
        }
        ctx->gens[i].active = 1;
        ctx->gens[i].logit_entry = entry[i];
    }
    ctx->n_gen = n_seqs;
    return WLM_OK;
}

int wlm_generate_begin(wlm_context *ctx, const int32_t *tokens, int32_t n,
                       const wlm_gen_params *params) {
    return wlm_generate_batch_begin(ctx, 1, &tokens, &n, params);
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
    if (params->parse_special != 0 && params->parse_special != 1)
        return wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG,
                             "parse_special must be 0 or 1 (got %d)", (int)params->parse_special);
    const unsigned flags = (params->add_bos ? WLM_TOKENIZE_ADD_SPECIAL : 0u) |
                           (params->parse_special ? WLM_TOKENIZE_PARSE_SPECIAL : 0u);
    int32_t need = wlm_tokenize_ex(ctx->model, prompt, len, flags, NULL, 0);
    if (need < 0) return wlm_set_error(ctx->errmsg, need, "cannot tokenize the prompt");
    if (need == 0)
        return wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG,
                             "the prompt is empty and add_bos is off: nothing to start from");
    int32_t *tokens = malloc(sizeof(int32_t) * (size_t)need);
    if (!tokens) return wlm_set_error(ctx->errmsg, WLM_ERR_NOMEM, "out of memory for the prompt");
    wlm_tokenize_ex(ctx->model, prompt, len, flags, tokens, need);
    int rc = wlm_generate_begin(ctx, tokens, need, params);
    free(tokens);
    return rc;
}

int32_t wlm_generate_n_cached(const wlm_context *ctx) { return ctx ? ctx->n_cached : 0; }

void wlm_generate_abort(wlm_context *ctx) {
    if (ctx && (ctx->n_gen > 0 || ctx->beam.active)) ctx->gen_aborted = 1;
}

/* Ends sequence i's generation: releases any held text in out->piece. */
void wlm_gen_finish(wlm_context *c, int32_t i, wlm_token *out, int32_t reason) {
    wlm_generation *g = &c->gens[i];
    g->active = 0;
    g->done = 1;
    g->stop_reason = reason;
    out->id = -1;
    out->status = WLM_DONE;
    out->stop_reason = reason;
    out->n_past = c->seqs[i].n_past;
    if (reserve(&g->out, &g->out_cap, g->held_len + 1) != WLM_OK) g->held_len = 0;
    if (g->held_len) memcpy(g->out, g->held, g->held_len);
    if (g->out) g->out[g->held_len] = '\0';
    out->piece = g->out ? g->out : "";
    out->piece_len = g->held_len;
    g->held_len = 0;
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

/* Samples sequence i's next token from its logits and runs the stop checks into *out. */
static int sample_seq(wlm_context *c, int32_t i, wlm_token *out) {
    wlm_generation *g = &c->gens[i];
    const wlm_seq *s = &c->seqs[i];
    const wlm_model *m = c->model;
    const float *logits = wlm_logits_ith(c, g->logit_entry);
    if (!logits) {
        g->active = 0;
        return wlm_set_error(c->errmsg, WLM_ERR_STATE, "sequence %d has no logits", (int)i);
    }
    int32_t next = wlm_sampler_sample(&g->sampler, logits, s->tokens, s->n_past, out);
    if (next < 0 && g->sampler.matcher && (next != WLM_ERR_INVALID_ARG || !g->sampler.n_allowed)) {
        g->active = 0;
        return wlm_set_error(c->errmsg, next,
                             next == WLM_ERR_INVALID_ARG
                                 ? "sequence %d: the grammar allows no token (nor the end) here"
                             : next == WLM_ERR_NOMEM ? "sequence %d: out of memory in the grammar"
                                                     : "sequence %d: the grammar is too ambiguous "
                                                       "(more than 8192 parse stacks at once)",
                             (int)i);
    }
    if (next < 0) {
        g->active = 0;
        int32_t finite = 0;
        for (int32_t t = 0; t < m->hp.vocab_size && !finite; t++)
            finite = logits[t] > -INFINITY && logits[t] == logits[t];
        if (!finite) /* the weights overflow float32 somewhere: report, never sample garbage */
            return wlm_set_error(c->errmsg, WLM_ERR_FORMAT,
                                 "sequence %d: every logit is NaN or -inf at this step (the "
                                 "model's weights overflow float32)",
                                 (int)i);
        return wlm_set_error(c->errmsg, next,
                             "sequence %d: the logit bias and banned tokens leave no token to "
                             "sample",
                             (int)i);
    }
    return wlm_gen_emit(c, i, next, out);
}

int wlm_gen_emit(wlm_context *c, int32_t i, int32_t next, wlm_token *out) {
    wlm_generation *g = &c->gens[i];
    const wlm_seq *s = &c->seqs[i];
    const wlm_model *m = c->model;
    const int32_t bos = m->has_tokenizer ? m->tok.bos_id : 1;
    const int32_t eos = m->has_tokenizer ? m->tok.eos_id : 2;
    if (next == eos || next == bos || wlm_token_is_eog(m, next)) { /* EOG set, and run.c's BOS */
        wlm_gen_finish(c, i, out, WLM_STOP_EOS);
        return WLM_OK;
    }
    size_t plen = 0;
    const char *piece = wlm_token_piece(m, g->prev, next, &plen);
    if (!piece) piece = "", plen = 0;
    if (g->sampler.matcher) { /* the sampler allowed it: advance the parse over its bytes (a
                                 dormant lazy grammar: look for its triggers) */
        int rc = wlm_sampler_accept(&g->sampler, next, piece, plen);
        if (rc != WLM_OK) {
            g->active = 0;
            return wlm_set_error(c->errmsg, rc == WLM_ERR_NOMEM ? rc : WLM_ERR_STATE,
                                 "sequence %d: the grammar refused token %d after allowing it",
                                 (int)i, (int)next);
        }
    }
    size_t released = 0;
    int hit = filter_stop(g, piece, plen, &released);
    if (hit < 0) {
        g->active = 0;
        return wlm_set_error(c->errmsg, WLM_ERR_NOMEM, "out of memory for generated text");
    }
    g->n_generated++;
    g->prev = next;
    g->pending = next;
    out->piece = g->out;
    out->piece_len = released;
    out->n_past = s->n_past + 1;
    if (hit) { /* the stop string itself is dropped; text before it goes out with DONE */
        g->active = 0;
        g->done = 1;
        g->stop_reason = WLM_STOP_STRING;
        out->id = -1;
        out->status = WLM_DONE;
        out->stop_reason = WLM_STOP_STRING;
        out->n_past = s->n_past;
        return WLM_OK;
    }
    out->id = next;
    out->status = WLM_OK;
    out->stop_reason = WLM_STOP_NONE;
    return WLM_OK;
}

static int sample_phase(wlm_context *ctx, wlm_token *out, const int *want);

/* Sequence i was added to the running batch and its prompt (in its token array, n_prompt ids)
 * awaits the next step's prefill. */
static int joined(const wlm_context *c, int32_t i) {
    const wlm_generation *g = &c->gens[i];
    return g->active && g->pending < 0 && g->n_generated == 0 && c->seqs[i].n_past == g->join_from &&
           g->logit_entry < 0;
}

/* Checks shared by wlm_generate_batch_add and _end: a batch runs and no step waits. */
static int batch_running(wlm_context *c, const char *what) {
    if (!c->model || !c->seqs)
        return wlm_set_error(c->errmsg, WLM_ERR_STATE, "%s: context has no model", what);
    if (c->n_gen == 0 || c->beam.active)
        return wlm_set_error(c->errmsg, WLM_ERR_STATE,
                             "%s: no batch is running (begin one with wlm_generate_batch_begin)",
                             what);
    if (c->dfr_resume || c->dfr_n > 0)
        return wlm_set_error(c->errmsg, WLM_ERR_STATE,
                             "%s: a step is waiting for its logits (supply them and resume first)",
                             what);
    if (c->dfr_join)
        return wlm_set_error(c->errmsg, WLM_ERR_STATE,
                             "%s: a media sequence is joining (run its recorded prompt, then "
                             "wlm_generate_batch_add_media_finish)",
                             what);
    return WLM_OK;
}

/* Frees sequence i's cache: its KV blocks go back to the pool, its recurrent state restarts. */
void wlm_seq_release(wlm_context *c, int32_t i) {
    wlm_seq *s = &c->seqs[i];
    wlm_seq_truncate_internal(c, i, 0);
    for (int j = 0; j < WLM_STATE_SNAPS; j++) s->snap_pos[j] = -1;
    memset(c->dfr_shift[i], 0, sizeof c->dfr_shift[i]); /* a shift of the sequence that left */
}

/* The slot a sequence joining the running batch takes: the lowest one not generating, else a
 * new one; WLM_ERR_STATE (the message after `prefix`) when all n_seq_max are generating. */
static int32_t free_slot(wlm_context *ctx, const char *prefix) {
    int32_t slot = 0;
    while (slot < ctx->n_gen && ctx->gens[slot].active) slot++;
    if (slot == ctx->n_seq_max)
        return wlm_set_error(ctx->errmsg, WLM_ERR_STATE,
                             "%sno slot is free: all %d sequences of the context (n_seq_max) are "
                             "generating",
                             prefix, (int)ctx->n_seq_max);
    return slot;
}

int32_t wlm_generate_batch_add(wlm_context *ctx, const int32_t *tokens, int32_t n,
                               const wlm_gen_params *params) {
    if (!ctx) return WLM_ERR_INVALID_ARG;
    ctx->errmsg[0] = '\0';
    int rc = batch_running(ctx, "wlm_generate_batch_add");
    if (rc != WLM_OK) return rc;
    if (ctx->gen_aborted)
        return wlm_set_error(ctx->errmsg, WLM_ERR_STATE,
                             "wlm_generate_batch_add: the batch was aborted (wlm_generate_abort)");
    if (!ctx->kv_cache)
        return wlm_set_error(ctx->errmsg, WLM_ERR_STATE,
                             "a context without KV cache generates one sequence at a time");
    if (!params) return wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG, "params is NULL");
    const int32_t slot = free_slot(ctx, "wlm_generate_batch_add: ");
    if (slot < 0) return slot;
    char who[48];
    snprintf(who, sizeof who, "sequence %d: ", (int)slot);
    rc = setup_seq(ctx, slot, tokens, n, params, who, 0);
    if (rc != WLM_OK) return rc;
    wlm_seq_release(ctx, slot);
    memcpy(ctx->seqs[slot].tokens, tokens, sizeof(int32_t) * (size_t)n); /* the next step's */
    wlm_generation *g = &ctx->gens[slot];
    g->active = 1;
    g->logit_entry = -1;
    g->join_from = 0;
    if (slot == ctx->n_gen) ctx->n_gen++;
    return slot;
}

int32_t wlm_batch_add_slot(wlm_context *ctx) {
    int rc = batch_running(ctx, "adding a prefilled sequence");
    if (rc != WLM_OK) return rc;
    if (ctx->gen_aborted)
        return wlm_set_error(ctx->errmsg, WLM_ERR_STATE, "the batch was aborted (wlm_generate_abort)");
    if (!ctx->kv_cache)
        return wlm_set_error(ctx->errmsg, WLM_ERR_STATE,
                             "a context without KV cache generates one sequence at a time");
    for (int32_t i = 0; i < ctx->n_gen; i++) {
        const wlm_generation *g = &ctx->gens[i];
        if (g->active && !g->done && g->pending < 0 && !joined(ctx, i))
            return wlm_set_error(ctx->errmsg, WLM_ERR_STATE,
                                 "sequence %d has not sampled its first token yet: a prefilled "
                                 "(media) sequence joins after the next step (its prefill would "
                                 "replace the logits that sequence samples from)",
                                 (int)i);
    }
    const int32_t slot = free_slot(ctx, "");
    if (slot < 0) return slot;
    wlm_seq_release(ctx, slot);
    return slot;
}

/* Sequence i holding a prompt but its last token `last` (the caller evaluated the rest: text, or
 * a media prompt's text and image rows) made a generation's prompt: `last` recorded after it
 * (the next evaluation computes it, for the logits that start the generation), the sampler and
 * stop strings set (setup_seq; image rows allowed before it). Returns the status. */
static int prefilled_seq(wlm_context *c, int32_t i, int32_t last, const wlm_gen_params *params,
                         const char *who) {
    wlm_seq *s = &c->seqs[i];
    const int32_t n = s->n_past + 1;
    if (n > c->n_ctx)
        return wlm_set_error(c->errmsg, WLM_ERR_CONTEXT_FULL,
                             "%sthe prompt is %d positions; the context holds %d", who, (int)n,
                             (int)c->n_ctx);
    s->tokens[n - 1] = last;
    return setup_seq(c, i, s->tokens, n, params, who, n - 1);
}

int wlm_batch_add_prefilled(wlm_context *ctx, int32_t slot, int32_t last, const wlm_gen_params *params) {
    char who[48];
    snprintf(who, sizeof who, "sequence %d: ", (int)slot);
    int rc = params ? prefilled_seq(ctx, slot, last, params, who)
                    : wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG, "params is NULL");
    if (rc != WLM_OK) {
        wlm_seq_release(ctx, slot);
        return rc;
    }
    wlm_generation *g = &ctx->gens[slot];
    g->active = 1;
    g->logit_entry = -1;
    g->join_from = ctx->seqs[slot].n_past; /* the next step evaluates the last token */
    if (slot == ctx->n_gen) ctx->n_gen++;
    return slot;
}

int wlm_generate_batch_begin_prefilled(wlm_context *ctx, int32_t n_seqs, const int32_t *last,
                                       const wlm_gen_params *params) {
    if (n_seqs < 1 || n_seqs > ctx->n_seq_max)
        return wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG,
                             "n_seqs %d is outside 1..%d (the context's n_seq_max)", (int)n_seqs,
                             (int)ctx->n_seq_max);
    int32_t seq[WLM_MAX_SEQ];
    uint8_t want[WLM_MAX_SEQ];
    for (int32_t i = 0; i < n_seqs; i++) {
        char who[32] = "";
        if (n_seqs > 1) snprintf(who, sizeof who, "sequence %d: ", (int)i);
        int rc = prefilled_seq(ctx, i, last[i], &params[i], who);
        if (rc != WLM_OK) return rc;
        seq[i] = i;
        want[i] = 1;
    }
    ctx->n_cached = 0;
    ctx->last_restore = -1;
    int rc = wlm_eval_entries(ctx, last, seq, want, n_seqs); /* each entry as alone */
    if (rc != WLM_OK) return rc;
    for (int32_t i = 0; i < n_seqs; i++) {
        ctx->gens[i].active = 1;
        ctx->gens[i].logit_entry = i;
    }
    ctx->n_gen = n_seqs;
    return WLM_OK;
}

int wlm_generate_batch_end(wlm_context *ctx, int32_t seq) {
    if (!ctx) return WLM_ERR_INVALID_ARG;
    ctx->errmsg[0] = '\0';
    int rc = batch_running(ctx, "wlm_generate_batch_end");
    if (rc != WLM_OK) return rc;
    if (seq < 0 || seq >= ctx->n_gen)
        return wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG,
                             "wlm_generate_batch_end: sequence %d is not in the batch (0..%d)",
                             (int)seq, (int)ctx->n_gen - 1);
    wlm_generation *g = &ctx->gens[seq];
    if (g->active || !g->done) g->stop_reason = WLM_STOP_ABORTED;
    g->active = 0;
    g->done = 1;
    g->pending = -1;
    g->held_len = 0; /* text held back for a stop string is dropped with the sequence */
    wlm_seq_release(ctx, seq);
    return WLM_OK;
}

int wlm_generate_batch_next(wlm_context *ctx, wlm_token *out) {
    if (!ctx || !out) return WLM_ERR_INVALID_ARG;
    ctx->errmsg[0] = '\0';
    if (ctx->n_gen == 0)
        return wlm_set_error(ctx->errmsg, WLM_ERR_STATE,
                             "no generation in progress: call wlm_generate_begin first");
    if (ctx->dfr_join) { /* a media sequence recorded to join (vision/sequence.c) */
        const int32_t slot = ctx->dfr_join - 1;
        if (!ctx->gen_aborted)
            return wlm_set_error(ctx->errmsg, WLM_ERR_STATE,
                                 "a media sequence is joining the batch: run its recorded prompt "
                                 "and call wlm_generate_batch_add_media_finish first");
        ctx->dfr_join = 0; /* the batch ends: the sequence never joined */
        wlm_deferred_drop(ctx);
        wlm_seq_release(ctx, slot);
    }
    const int32_t n = ctx->n_gen;
    if (ctx->dfr_resume) wlm_deferred_drop(ctx); /* the step that waited for logits is dropped */
    int32_t tok[WLM_MAX_SEQ], seq[WLM_MAX_SEQ], m = 0;
    int want[WLM_MAX_SEQ] = {0};
    int32_t joining[WLM_MAX_SEQ], n_join = 0, n_join_tok = 0; /* sequences added since the last
                                                                 step: their prompts go too */
    int32_t carried[WLM_MAX_SEQ], n_carried = 0; /* sequences that sample from the logits of
                                                    wlm_generate_batch_begin's prefill */
    /* Phase 1: stop conditions known before evaluating; collect the tokens to evaluate. */
    for (int32_t i = 0; i < n; i++) {
        wlm_generation *g = &ctx->gens[i];
        wlm_token *o = &out[i];
        memset(o, 0, sizeof *o);
        o->piece = "";
        o->seq = i;
        if (g->done) {
            o->id = -1;
            o->status = WLM_DONE;
            o->stop_reason = g->stop_reason;
            o->n_past = ctx->seqs[i].n_past;
            continue;
        }
        if (!g->active) { /* ended by an error */
            o->id = -1;
            o->status = WLM_DONE;
            continue;
        }
        if (ctx->gen_aborted) {
            wlm_gen_finish(ctx, i, o, WLM_STOP_ABORTED);
            continue;
        }
        if (g->max_tokens > 0 && g->n_generated >= g->max_tokens) {
            wlm_gen_finish(ctx, i, o, WLM_STOP_MAX_TOKENS);
            continue;
        }
        if (wlm_sampler_grammar_active(&g->sampler) && !wlm_gram_can_continue(g->sampler.matcher) &&
            wlm_gram_is_complete(g->sampler.matcher)) { /* only the end remains: no decode */
            wlm_gen_finish(ctx, i, o, WLM_STOP_EOS);
            continue;
        }
        if (joined(ctx, i)) { /* added by wlm_generate_batch_add: prefill its prompt */
            joining[n_join++] = i;
            n_join_tok += g->n_prompt - g->join_from;
        } else if (g->pending < 0) { /* begun: samples its first token from begin's logits */
            carried[n_carried++] = i;
        } else { /* decode: feed the token emitted by the previous step */
            if (ctx->seqs[i].n_past >= ctx->n_ctx) {
                const int32_t n_past = ctx->seqs[i].n_past;
                const int32_t n_discard = (n_past - g->n_keep) / 2;
                if (!g->context_shift || n_discard < 1) {
                    wlm_gen_finish(ctx, i, o, WLM_STOP_CONTEXT_FULL);
                    continue;
                }
                int rc = wlm_seq_shift_internal(ctx, i, g->n_keep, n_discard);
                if (rc != WLM_OK) {
                    g->active = 0;
                    return rc;
                }
            }
            tok[m] = g->pending;
            seq[m] = i;
            g->logit_entry = m;
            g->pending = -1;
            m++;
        }
        want[i] = 1;
    }
    if (n_join > 0) /* this step's evaluation replaces the logits begin left: sample from them
                       first (each sequence's draw depends only on its own logits and sampler) */
        for (int32_t k = 0; k < n_carried; k++) {
            const int32_t i = carried[k];
            int rc = sample_seq(ctx, i, &out[i]);
            if (rc != WLM_OK) return rc;
            want[i] = 0;
        }
    if (n_join > 0) { /* one pass: the decode tokens, then each joining prompt (logits at its
                         last token); every entry's result is what it would be alone */
        const int32_t total = m + n_join_tok;
        int32_t *all = malloc(sizeof(int32_t) * (size_t)total * 2);
        uint8_t *w = malloc((size_t)total);
        if (!all || !w) {
            free(all);
            free(w);
            return wlm_set_error(ctx->errmsg, WLM_ERR_NOMEM,
                                 "out of memory for the joining prompts");
        }
        memcpy(all, tok, sizeof(int32_t) * (size_t)m);
        memcpy(all + total, seq, sizeof(int32_t) * (size_t)m);
        memset(w, 1, (size_t)m);
        int32_t e = m;
        for (int32_t k = 0; k < n_join; k++) {
            const int32_t i = joining[k], from = ctx->gens[i].join_from;
            const int32_t np = ctx->gens[i].n_prompt - from; /* a prefilled one: its last token */
            memcpy(all + e, ctx->seqs[i].tokens + from, sizeof(int32_t) * (size_t)np);
            for (int32_t t = 0; t < np; t++) {
                all[total + e + t] = i;
                w[e + t] = t == np - 1;
            }
            e += np;
            ctx->gens[i].logit_entry = e - 1;
        }
        int rc = wlm_eval_entries(ctx, all, all + total, w, total);
        free(all);
        free(w);
        m = 0; /* evaluated */
        if (rc != WLM_OK) {
            for (int32_t i = 0; i < n; i++) ctx->gens[i].active = 0;
            return rc;
        }
        if (ctx->deferred) {
            for (int32_t i = 0; i < n; i++) ctx->dfr_want[i] = (uint8_t)want[i];
            ctx->dfr_resume = 1;
            return WLM_NEED_LOGITS;
        }
    }
    if (m > 0) {
        uint8_t w[WLM_MAX_SEQ];
        memset(w, 1, sizeof w);
        int rc = wlm_eval_entries(ctx, tok, seq, w, m);
        if (rc != WLM_OK) {
            for (int32_t i = 0; i < n; i++) ctx->gens[i].active = 0;
            return rc;
        }
        if (ctx->deferred) { /* the logits come later: phase 2 runs in wlm_generate_batch_resume */
            for (int32_t i = 0; i < n; i++) ctx->dfr_want[i] = (uint8_t)want[i];
            ctx->dfr_resume = 1;
            return WLM_NEED_LOGITS;
        }
    }
    return sample_phase(ctx, out, want);
}

int wlm_generate_batch_resume(wlm_context *ctx, wlm_token *out) {
    if (!ctx || !out) return WLM_ERR_INVALID_ARG;
    ctx->errmsg[0] = '\0';
    if (wlm_spec_awaiting(ctx)) return wlm_spec_resume(ctx, out); /* a speculative round */
    if (!ctx->dfr_resume || ctx->n_gen == 0)
        return wlm_set_error(ctx->errmsg, WLM_ERR_STATE, "no step is waiting for its logits");
    if (ctx->dfr_n > 0)
        return wlm_set_error(ctx->errmsg, WLM_ERR_STATE, "the step's logits were not supplied");
    ctx->dfr_resume = 0;
    int want[WLM_MAX_SEQ];
    for (int32_t i = 0; i < ctx->n_gen; i++) want[i] = ctx->dfr_want[i];
    return sample_phase(ctx, out, want);
}

/* Phase 2 of a step: samples every sequence i with want[i] (still generating). Every other
 * out[i] was filled by phase 1 (WLM_DONE, or a token sampled before a joining prompt's
 * evaluation: the deferred path's resume is given next's out array). */
static int sample_phase(wlm_context *ctx, wlm_token *out, const int *want) {
    const int32_t n = ctx->n_gen;
    int any = 0;
    for (int32_t i = 0; i < n; i++) {
        if (want[i]) {
            int rc = sample_seq(ctx, i, &out[i]);
            if (rc != WLM_OK) return rc;
        }
        any |= out[i].status == WLM_OK;
    }
    return any ? WLM_OK : WLM_DONE;
}

int wlm_generate_next(wlm_context *ctx, wlm_token *out) {
    if (!ctx || !out) return WLM_ERR_INVALID_ARG;
    if (ctx->n_gen != 1) {
        memset(out, 0, sizeof *out);
        out->piece = "";
        out->id = -1;
        ctx->errmsg[0] = '\0';
        return wlm_set_error(ctx->errmsg, WLM_ERR_STATE,
                             ctx->n_gen == 0
                                 ? "no generation in progress: call wlm_generate_begin first"
                                 : "a batch is in progress: use wlm_generate_batch_next");
    }
    /* speculative.c: plain steps when it is off (a sequence added to the batch is prefilled
     * by a plain step; a media sequence recorded to join is refused there) */
    if (ctx->spec && !joined(ctx, 0) && !ctx->dfr_join)
        return wlm_spec_next(ctx, out);
    int rc = wlm_generate_batch_next(ctx, out);
    return rc < 0 || rc == WLM_NEED_LOGITS ? rc : out->status;
}

int wlm_sampler_preview(wlm_context *ctx, int32_t seq, const wlm_gen_params *params,
                        wlm_token *out) {
    if (!ctx) return WLM_ERR_INVALID_ARG;
    ctx->errmsg[0] = '\0';
    if (!ctx->model || !ctx->seqs)
        return wlm_set_error(ctx->errmsg, WLM_ERR_STATE, "context has no model");
    if (!params || !out)
        return wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG, "params or out is NULL");
    if (seq < 0 || seq >= ctx->n_seq_max)
        return wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG, "sequence %d is outside 0..%d",
                             (int)seq, (int)ctx->n_seq_max - 1);
    const int32_t vocab = ctx->model->hp.vocab_size;
    char msg[WLM_ERRMSG_SIZE];
    int rc = wlm_sampler_check(params, vocab, msg, sizeof msg);
    if (rc == WLM_OK) rc = wlm_grammar_lazy_check(params, vocab, msg, sizeof msg);
    if (rc != WLM_OK) return wlm_set_error(ctx->errmsg, rc, "%s", msg);
    const float *logits = seq < ctx->n_gen ? wlm_logits_ith(ctx, ctx->gens[seq].logit_entry)
                          : seq == 0       ? wlm_logits(ctx)
                                           : NULL;
    if (!logits)
        return wlm_set_error(ctx->errmsg, WLM_ERR_STATE,
                             "sequence %d has no logits to preview yet", (int)seq);
    wlm_sampler s;
    memset(&s, 0, sizeof s);
    rc = wlm_sampler_init(&s, vocab, params);
    if (rc == WLM_OK) rc = ban_suppressed(&s, ctx->model);
    if (rc != WLM_OK) {
        wlm_sampler_free(&s);
        return wlm_set_error(ctx->errmsg, rc, "out of memory for the sampler");
    }
    memset(out, 0, sizeof *out);
    out->piece = "";
    out->seq = seq;
    const wlm_seq *sq = &ctx->seqs[seq];
    if (params->grammar) { /* parsed afresh, advanced over what the sequence generated */
        int32_t n_gen = 0;
        if (seq < ctx->n_gen) {
            const wlm_generation *g = &ctx->gens[seq];
            n_gen = g->n_generated - (g->pending >= 0);
            if (n_gen > sq->n_past) n_gen = sq->n_past;
            if (n_gen < 0) n_gen = 0;
        }
        const int32_t from = sq->n_past - n_gen;
        wlm_gram *gram;
        wlm_gram_matcher *gm;
        rc = wlm_grammar_setup(ctx, params->grammar, params->grammar_len,
                               from > 0 ? sq->tokens[from - 1] : -1, "", &gram, &gm);
        if (rc != WLM_OK) {
            wlm_sampler_free(&s);
            return rc;
        }
        wlm_sampler_set_grammar(&s, gram, gm);
        rc = wlm_sampler_set_lazy(&s, params);
        for (int32_t k = from; k < sq->n_past && rc == WLM_OK; k++) {
            size_t plen = 0;
            const char *piece =
                wlm_token_piece(ctx->model, k > 0 ? sq->tokens[k - 1] : -1, sq->tokens[k], &plen);
            rc = wlm_sampler_accept(&s, sq->tokens[k], piece, piece ? plen : 0);
        }
        if (rc != WLM_OK) {
            wlm_sampler_free(&s);
            return wlm_set_error(ctx->errmsg, rc,
                                 "the text sequence %d generated does not follow the grammar",
                                 (int)seq);
        }
    }
    int32_t id = wlm_sampler_sample(&s, logits, sq->tokens, sq->n_past, out);
    const int32_t n_allowed = s.n_allowed;
    const int with_grammar = wlm_sampler_grammar_active(&s);
    wlm_sampler_free(&s);
    if (id < 0 && with_grammar && (id != WLM_ERR_INVALID_ARG || n_allowed == 0))
        return wlm_set_error(ctx->errmsg, id, "the grammar allows no token here (or failed)");
    if (id < 0)
        return wlm_set_error(ctx->errmsg, id,
                             "the logit bias and banned tokens leave no token to sample");
    out->id = id;
    out->n_past = sq->n_past;
    out->status = WLM_OK;
    return WLM_OK;
}
