/*
 * deferred.c — the seam for a forward pass that runs elsewhere (the WebGPU backend in
 * js/backend/webgpu/, which cannot answer synchronously): a deferred context's evaluation
 * records the batch (token, sequence, position per entry) and advances the sequences' token
 * bookkeeping, and the caller writes the logits of the wanted entries before anything samples.
 * Everything after the logits (sampler chain, grammars, stop strings, prompt-cache reuse) stays
 * this library's. It does not run any arithmetic, and it keeps no KV cache: the other backend
 * does (positions 0..n_past-1 of each sequence, overwritten from n_past on).
 */
#include <stdlib.h>
#include <string.h>

#include "model/model.h"

int wlm_deferred_record(wlm_context *c, const int32_t *tokens, const int32_t *seq_ids, int32_t n) {
    if (n > c->dfr_cap) {
        int32_t *t = realloc(c->dfr_tok, sizeof(int32_t) * (size_t)n * 3);
        if (!t) return wlm_set_error(c->errmsg, WLM_ERR_NOMEM, "out of memory for the batch");
        c->dfr_tok = t;
        c->dfr_seq = t + n;
        c->dfr_pos = t + 2 * (size_t)n;
        c->dfr_cap = n;
    }
    for (int32_t i = 0; i < n; i++) {
        const int32_t sq = seq_ids ? seq_ids[i] : 0;
        wlm_seq *s = &c->seqs[sq];
        c->dfr_tok[i] = tokens[i];
        c->dfr_seq[i] = sq;
        c->dfr_pos[i] = s->n_past;
        /* M-RoPE (text only here: a deferred context takes no image rows) */
        if (s->rnext) s->rnext[s->n_past] = (s->n_past ? s->rnext[s->n_past - 1] : 0) + 1;
        s->tokens[s->n_past++] = tokens[i];
    }
    c->dfr_n = n;
    c->dfr_exact = 0;
    return WLM_OK;
}

void wlm_deferred_release(wlm_context *c) {
    free(c->dfr_tok);
    c->dfr_tok = c->dfr_seq = c->dfr_pos = NULL;
    c->dfr_cap = c->dfr_n = 0;
}

void wlm_deferred_drop(wlm_context *c) {
    if (c->dfr_n > 0) /* the recorded positions were never computed: forget them */
        for (int32_t i = 0; i < c->dfr_n; i++) {
            wlm_seq *s = &c->seqs[c->dfr_seq[i]];
            if (s->n_past > c->dfr_pos[i]) s->n_past = c->dfr_pos[i];
        }
    c->dfr_n = 0;
    c->dfr_resume = 0;
}
