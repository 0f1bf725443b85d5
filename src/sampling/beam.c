/*
 * beam.c — beam search over the context's sequences (Hugging Face transformers'
 * BeamSearchScorer with early_stopping=True; length normalisation score = logprob / len^alpha
 * as in its length_penalty). Live beams occupy one bank of `width` sequences; each step forks
 * the chosen continuations into the other bank (sharing KV blocks, copy-on-write), releases the
 * old bank and evaluates all continuations in one batch.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "sampling/grammar.h"

void wlm_beam_params_default(wlm_beam_params *params) {
    if (!params) return;
    params->width = 4;
    params->max_tokens = 64;
    params->length_penalty = 1.0f;
    params->grammar = NULL;
    params->grammar_len = 0;
}

void wlm_beam_release(wlm_context *c) {
    wlm_beam_state *b = &c->beam;
    free(b->cand_tok);
    free(b->cand_beam);
    free(b->cand_lp);
    free(b->cand_order);
    free(b->lsm);
    free(b->tokbuf);
    free(b->gmask);
    for (int32_t i = 0; i < WLM_MAX_SEQ / 2; i++) wlm_gram_matcher_free(b->gm_live[i]);
    wlm_gram_free(b->gram);
    memset(b, 0, sizeof *b);
}

static double hyp_score(const wlm_beam_state *b, double logprob, int32_t len) {
    if (len < 1) len = 1;
    return b->length_penalty == 0.0f ? logprob : logprob / pow((double)len, b->length_penalty);
}

/* Adds a finished hypothesis (tokens + its length) to the pool of the `width` best by score. */
static void add_finished(wlm_beam_state *b, const int32_t *tokens, int32_t n_tokens,
                         double logprob, int32_t scored_len, int32_t reason) {
    double score = hyp_score(b, logprob, scored_len);
    int32_t slot;
    if (b->n_fin < b->width) {
        slot = b->n_fin++;
    } else { /* replace the worst if this one is better */
        slot = 0;
        for (int32_t i = 1; i < b->n_fin; i++)
            if (b->fin[i].score < b->fin[slot].score) slot = i;
        if (!(score > b->fin[slot].score)) return;
    }
    wlm_beam_hyp *h = &b->fin[slot];
    memcpy(h->tokens, tokens, sizeof(int32_t) * (size_t)n_tokens);
    h->n_tokens = n_tokens;
    h->logprob = logprob;
    h->score = score;
    h->stop_reason = reason;
}

static void finish_search(wlm_context *c, int aborted) {
    wlm_beam_state *b = &c->beam;
    if (aborted) /* live beams count as results when there is room */
        for (int32_t i = 0; i < b->n_live; i++)
            add_finished(b, b->live[i].tokens, b->live[i].n_tokens, b->live[i].logprob,
                         b->live[i].n_tokens, WLM_STOP_ABORTED);
    /* best score first (insertion sort; at most 32 entries); ties keep the earlier one */
    for (int32_t i = 1; i < b->n_fin; i++) {
        wlm_beam_hyp h = b->fin[i];
        int32_t j = i;
        for (; j > 0 && b->fin[j - 1].score < h.score; j--) b->fin[j] = b->fin[j - 1];
        b->fin[j] = h;
    }
    for (int32_t s = 0; s < c->n_seq_max; s++) wlm_seq_clear(c, s);
    b->n_live = 0;
    b->active = 0;
    b->done = 1;
}

int wlm_beam_begin(wlm_context *ctx, const int32_t *prompt, int32_t n, const wlm_beam_params *p) {
    if (!ctx) return WLM_ERR_INVALID_ARG;
    ctx->errmsg[0] = '\0';
    wlm_context_reset(ctx);
    if (!ctx->model || !ctx->seqs)
        return wlm_set_error(ctx->errmsg, WLM_ERR_STATE, "context has no model");
    if (!p) return wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG, "params is NULL");
    if (p->width < 1 || p->width > WLM_MAX_SEQ / 2)
        return wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG, "beam width %d is outside 1..%d",
                             (int)p->width, WLM_MAX_SEQ / 2);
    if (2 * p->width > ctx->n_seq_max)
        return wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG,
                             "beam width %d needs a context with n_seq_max >= %d (it has %d)",
                             (int)p->width, 2 * (int)p->width, (int)ctx->n_seq_max);
    if (p->max_tokens < 1)
        return wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG,
                             "beam max_tokens must be >= 1 (got %d)", (int)p->max_tokens);
    if (!(p->length_penalty >= 0.0f) || isinf(p->length_penalty))
        return wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG,
                             "length_penalty must be a finite number >= 0 (got %g)",
                             (double)p->length_penalty);
    if (!ctx->kv_cache)
        return wlm_set_error(ctx->errmsg, WLM_ERR_STATE, "beam search needs a KV cache");
    if (!prompt || n < 1)
        return wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG,
                             "the prompt is empty: give at least one token (BOS)");
    if (n > ctx->n_ctx)
        return wlm_set_error(ctx->errmsg, WLM_ERR_CONTEXT_FULL,
                             "the prompt is %d tokens; the context holds %d", (int)n,
                             (int)ctx->n_ctx);
    wlm_beam_state *b = &ctx->beam;
    wlm_beam_release(ctx);
    const int32_t W = p->width, vocab = ctx->model->hp.vocab_size;
    const int32_t max_new = p->max_tokens < ctx->n_ctx - n + 1 ? p->max_tokens : ctx->n_ctx - n + 1;
    const size_t ncand = (size_t)W * 2 * (size_t)W;
    b->cand_tok = malloc(sizeof(int32_t) * ncand);
    b->cand_beam = malloc(sizeof(int32_t) * ncand);
    b->cand_lp = malloc(sizeof(double) * ncand);
    b->cand_order = malloc(sizeof(int32_t) * ncand);
    b->lsm = malloc(sizeof(float) * (size_t)vocab);
    b->tokbuf = malloc(sizeof(int32_t) * (size_t)max_new * 3 * (size_t)W);
    if (!b->cand_tok || !b->cand_beam || !b->cand_lp || !b->cand_order || !b->lsm || !b->tokbuf) {
        wlm_beam_release(ctx);
        return wlm_set_error(ctx->errmsg, WLM_ERR_NOMEM, "out of memory for the beam search");
    }
    for (int32_t i = 0; i < W; i++) {
        b->live[i].tokens = b->tokbuf + (size_t)max_new * (size_t)i;
        b->next[i].tokens = b->tokbuf + (size_t)max_new * (size_t)(W + i);
        b->fin[i].tokens = b->tokbuf + (size_t)max_new * (size_t)(2 * W + i);
    }
    if (p->grammar) { /* beam 0 starts the parse; each beam's state forks with it */
        int rc = wlm_grammar_setup(ctx, p->grammar, p->grammar_len, prompt[n - 1], "", &b->gram,
                                   &b->gm_live[0]);
        if (rc == WLM_OK && !(b->gmask = malloc((size_t)vocab)))
            rc = wlm_set_error(ctx->errmsg, WLM_ERR_NOMEM, "out of memory for the beam search");
        if (rc != WLM_OK) {
            wlm_beam_release(ctx);
            return rc;
        }
    }
    b->width = W;
    b->max_tokens = max_new;
    b->length_penalty = p->length_penalty;
    b->n_prompt = n;
    int rc = wlm_eval_entries(ctx, prompt, NULL, NULL, n); /* the prompt on sequence 0 */
    if (rc != WLM_OK) {
        wlm_beam_release(ctx);
        return rc;
    }
    b->bank = 0;
    b->n_live = 1;
    b->live_seq[0] = 0;
    b->live_entry[0] = n - 1;
    b->live[0].n_tokens = 0;
    b->live[0].logprob = 0.0;
    b->n_fin = 0;
    b->n_steps = 0;
    b->kv_peak = b->kv_unshared_peak = 0;
    b->active = 1;
    b->done = 0;
    return WLM_OK;
}

/* ln softmax(z) into out (z - logsumexp(z), the sum in double). */
static void log_softmax(const float *z, int32_t n, float *out) {
    float mx = z[0];
    for (int32_t i = 1; i < n; i++)
        if (z[i] > mx) mx = z[i];
    double sum = 0.0;
    for (int32_t i = 0; i < n; i++) sum += exp((double)z[i] - mx);
    const double lse = (double)mx + log(sum);
    for (int32_t i = 0; i < n; i++) out[i] = (float)((double)z[i] - lse);
}

/* Indices of the k largest values of x (ties: lower index first) into idx[0..k), sorted. */
static void top_k_indices(const float *x, int32_t n, int32_t k, int32_t *idx) {
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++) {
        if (m == k && !(x[i] > x[idx[m - 1]])) continue;
        int32_t j = m < k ? m++ : k - 1; /* insertion into the sorted list */
        while (j > 0 && x[i] > x[idx[j - 1]]) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = i;
    }
}

static void track_memory(wlm_context *c) {
    wlm_kv_stats st;
    wlm_kv_stats_get(c, &st);
    size_t used = (size_t)st.blocks_used * st.block_bytes;
    size_t unshared = (size_t)st.block_refs * st.block_bytes;
    if (used > c->beam.kv_peak) c->beam.kv_peak = used;
    if (unshared > c->beam.kv_unshared_peak) c->beam.kv_unshared_peak = unshared;
}

int wlm_beam_step(wlm_context *ctx) {
    if (!ctx) return WLM_ERR_INVALID_ARG;
    ctx->errmsg[0] = '\0';
    wlm_beam_state *b = &ctx->beam;
    if (b->done) return WLM_DONE;
    if (!b->active)
        return wlm_set_error(ctx->errmsg, WLM_ERR_STATE,
                             "no beam search in progress: call wlm_beam_begin first");
    track_memory(ctx);
    if (ctx->gen_aborted) {
        finish_search(ctx, 1);
        return WLM_DONE;
    }
    const wlm_model *m = ctx->model;
    const int32_t W = b->width, K = 2 * W, vocab = m->hp.vocab_size;
    const int32_t eos = m->has_tokenizer ? m->tok.eos_id : 2;
    const int32_t bos = m->has_tokenizer ? m->tok.bos_id : 1;
    const int32_t k = K < vocab ? K : vocab;
    /* a beam ends at any end-of-generation token (wlm_token_is_eog), at EOS and, as in run.c,
     * at BOS */
    /* candidates: the 2W best continuations of every live beam */
    int32_t nc = 0, top[2 * (WLM_MAX_SEQ / 2)];
    for (int32_t i = 0; i < b->n_live; i++) {
        const float *z = wlm_logits_ith(ctx, b->live_entry[i]);
        if (!z) return wlm_set_error(ctx->errmsg, WLM_ERR_STATE, "beam %d has no logits", (int)i);
        log_softmax(z, vocab, b->lsm);
        if (b->gram) { /* refused tokens are never expanded */
            const int32_t na = wlm_gram_mask(b->gm_live[i], b->gmask);
            if (na < 0) {
                b->active = 0;
                return wlm_set_error(ctx->errmsg, na, "beam %d: the grammar failed (%s)", (int)i,
                                     wlm_status_name(na));
            }
            for (int32_t t = 0; t < vocab; t++)
                if (!b->gmask[t]) b->lsm[t] = -INFINITY;
        }
        top_k_indices(b->lsm, vocab, k, top);
        for (int32_t j = 0; j < k; j++) {
            if (b->gram && !(b->lsm[top[j]] > -INFINITY)) break; /* fewer allowed than k */
            b->cand_tok[nc] = top[j];
            b->cand_beam[nc] = i;
            b->cand_lp[nc] = b->live[i].logprob + (double)b->lsm[top[j]];
            b->cand_order[nc] = nc;
            nc++;
        }
    }
    /* by total log-probability, descending; ties: earlier beam, then lower token id */
    for (int32_t i = 1; i < nc; i++) {
        int32_t v = b->cand_order[i], j = i;
        for (; j > 0 && b->cand_lp[b->cand_order[j - 1]] < b->cand_lp[v]; j--)
            b->cand_order[j] = b->cand_order[j - 1];
        b->cand_order[j] = v;
    }
    int32_t n_next = 0, parent[WLM_MAX_SEQ / 2], ntok[WLM_MAX_SEQ / 2];
    for (int32_t r = 0; r < nc && n_next < W; r++) {
        const int32_t ci = b->cand_order[r], t = b->cand_tok[ci];
        const wlm_beam_hyp *h = &b->live[b->cand_beam[ci]];
        if (t == eos || t == bos || wlm_token_is_eog(m, t)) {
            /* as in transformers: an ending only counts when it ranks among the W best */
            if (r < W)
                add_finished(b, h->tokens, h->n_tokens, b->cand_lp[ci], h->n_tokens + 1,
                             WLM_STOP_EOS);
            continue;
        }
        wlm_beam_hyp *nh = &b->next[n_next];
        memcpy(nh->tokens, h->tokens, sizeof(int32_t) * (size_t)h->n_tokens);
        nh->tokens[h->n_tokens] = t;
        nh->n_tokens = h->n_tokens + 1;
        nh->logprob = b->cand_lp[ci];
        parent[n_next] = b->cand_beam[ci];
        ntok[n_next] = t;
        n_next++;
    }
    b->n_steps++;
    if (b->n_fin >= W || n_next == 0) { /* early stopping: W hypotheses have ended */
        finish_search(ctx, 0);
        return WLM_DONE;
    }
    /* continuations that reached the length limit end here; the others get a sequence */
    const int32_t other = 1 - b->bank;
    int32_t tok[WLM_MAX_SEQ / 2], seq[WLM_MAX_SEQ / 2], n_eval = 0, n_live = 0;
    int32_t new_seq[WLM_MAX_SEQ / 2], from[WLM_MAX_SEQ / 2];
    wlm_gram_matcher *gm_new[WLM_MAX_SEQ / 2] = {NULL};
    for (int32_t j = 0; j < n_next; j++) {
        const int32_t ps = b->live_seq[parent[j]];
        const int full = ctx->seqs[ps].n_past >= ctx->n_ctx;
        if (b->next[j].n_tokens >= b->max_tokens || full) {
            add_finished(b, b->next[j].tokens, b->next[j].n_tokens, b->next[j].logprob,
                         b->next[j].n_tokens, full ? WLM_STOP_CONTEXT_FULL : WLM_STOP_MAX_TOKENS);
            continue;
        }
        if (b->gram) { /* the parent's parse state, forked, advanced over the new token */
            int rc = wlm_gram_matcher_clone(b->gm_live[parent[j]], &gm_new[n_live]);
            if (rc == WLM_OK) rc = wlm_gram_accept_token(gm_new[n_live], ntok[j]);
            if (rc != WLM_OK) {
                for (int32_t q = 0; q <= n_live; q++) wlm_gram_matcher_free(gm_new[q]);
                b->active = 0;
                return wlm_set_error(ctx->errmsg, rc, "beam search: the grammar failed (%s)",
                                     wlm_status_name(rc));
            }
        }
        const int32_t dst = other * W + n_live;
        wlm_seq_fork_internal(ctx, ps, dst);
        new_seq[n_live] = dst;
        tok[n_eval] = ntok[j];
        seq[n_eval] = dst;
        from[n_live] = j;
        n_live++;
        n_eval++;
    }
    /* release the old bank before evaluating: the last child of each parent then owns its
     * block and writes in place instead of copying it */
    for (int32_t i = 0; i < W; i++) wlm_seq_clear(ctx, b->bank * W + i);
    for (int32_t i = 0; i < n_live; i++) {
        const wlm_beam_hyp *src = &b->next[from[i]];
        memcpy(b->live[i].tokens, src->tokens, sizeof(int32_t) * (size_t)src->n_tokens);
        b->live[i].n_tokens = src->n_tokens;
        b->live[i].logprob = src->logprob;
        b->live_seq[i] = new_seq[i];
        b->live_entry[i] = i;
    }
    if (b->gram)
        for (int32_t i = 0; i < W; i++) {
            wlm_gram_matcher_free(b->gm_live[i]);
            b->gm_live[i] = i < n_live ? gm_new[i] : NULL;
        }
    b->n_live = n_live;
    b->bank = other;
    if (n_live == 0) {
        finish_search(ctx, 0);
        return WLM_DONE;
    }
    uint8_t want[WLM_MAX_SEQ / 2];
    memset(want, 1, sizeof want);
    int rc = wlm_eval_entries(ctx, tok, seq, want, n_eval);
    if (rc != WLM_OK) {
        b->active = 0;
        return rc;
    }
    track_memory(ctx);
    return WLM_OK;
}

int32_t wlm_beam_count(const wlm_context *ctx) {
    return ctx && ctx->beam.done ? ctx->beam.n_fin : 0;
}

int wlm_beam_get(const wlm_context *ctx, int32_t i, wlm_beam *out) {
    if (!ctx || !out) return WLM_ERR_INVALID_ARG;
    if (!ctx->beam.done) return WLM_ERR_STATE;
    if (i < 0 || i >= ctx->beam.n_fin) return WLM_ERR_INVALID_ARG;
    const wlm_beam_hyp *h = &ctx->beam.fin[i];
    out->tokens = h->tokens;
    out->n_tokens = h->n_tokens;
    out->logprob = (float)h->logprob;
    out->score = (float)h->score;
    out->stop_reason = h->stop_reason;
    return WLM_OK;
}

int wlm_beam_memory(const wlm_context *ctx, size_t *kv_bytes, size_t *kv_bytes_unshared) {
    if (!ctx) return WLM_ERR_INVALID_ARG;
    if (kv_bytes) *kv_bytes = ctx->beam.kv_peak;
    if (kv_bytes_unshared) *kv_bytes_unshared = ctx->beam.kv_unshared_peak;
    return WLM_OK;
}
