/*
 * deferred.c — the seam for a forward pass that runs elsewhere (the WebGPU backend in
 * js/backend/webgpu/, which cannot answer synchronously): a deferred context's evaluation
 * records the batch (token, sequence, position per entry) and advances the sequences' token
 * bookkeeping, and the caller writes the logits of the wanted entries before anything samples.
 * Everything after the logits (sampler chain, grammars, stop strings, prompt-cache reuse) stays
 * this library's. It does not run any arithmetic, and it keeps no KV cache: the other backend
 * does (positions 0..n_past-1 of each sequence, overwritten from n_past on).
 *
 * A hybrid's recurrent state lives there too, with its snapshots (the CPU's WLM_SNAP_* slots,
 * context.c): this side keeps their positions (snap_pos) and tells the backend what to do with
 * the state before a sequence's next entries run. dfr_snap asks it to copy the state into a
 * slot when the sequence reaches a position (the end of a prompt, a chat checkpoint inside
 * it, the start of a speculative round); dfr_restore, after a cut back, to restore a slot it
 * took (or empty the state) and replay the stored tokens from there, as context.c's
 * state_truncate does on the CPU. The backend marks what it did (-1), so a slot whose copy was
 * not taken is never restored.
 *
 * Image rows (WLM_TOKEN_EMBD entries, wlm_eval_embd_grid) are recorded with their inputs
 * copied (dfr_embd, dfr_erow) and the positions each attends to (dfr_len: a non-causal
 * image's entries see the whole image); on an M-RoPE model (qwen2vl) every entry's (t, h, w)
 * RoPE positions too (dfr_rpos: a text token's three equal, an image row's from its grid, and
 * the text after an image where the image's span ends, not at its slot); a media prompt (vision/sequence.c) is recorded as one
 * batch (dfr_accum: its text pieces and images appended, no logits wanted), which the backend
 * runs before the generation begins on it. The rows live in the backend's KV cache only: a
 * cut back into an image needs its rows again (a transformer's cache is cut, not replayed, so
 * only a hybrid's state replay meets them, and that is refused).
 */
#include <stdlib.h>
#include <string.h>

#include "model/model.h"

int wlm_deferred_record(wlm_context *c, const int32_t *tokens, const int32_t *seq_ids, int32_t n) {
    const int32_t base = c->dfr_accum ? c->dfr_n : 0; /* a media prompt's pieces: appended */
    const int32_t total = base + n;
    if (total > c->dfr_cap) { /* tok, seq, pos, len, erow: cap entries each, then rpos: 3 cap;
                                 the old ones kept */
        const int32_t cap = total > 2 * c->dfr_cap ? total : 2 * c->dfr_cap;
        int32_t *t = malloc(sizeof(int32_t) * (size_t)cap * 8);
        if (!t) return wlm_set_error(c->errmsg, WLM_ERR_NOMEM, "out of memory for the batch");
        if (base > 0) {
            const int32_t *old[5] = {c->dfr_tok, c->dfr_seq, c->dfr_pos, c->dfr_len, c->dfr_erow};
            for (int k = 0; k < 5; k++) memcpy(t + (size_t)k * cap, old[k], sizeof(int32_t) * (size_t)base);
            memcpy(t + 5 * (size_t)cap, c->dfr_rpos, sizeof(int32_t) * 3 * (size_t)base);
        }
        free(c->dfr_tok);
        c->dfr_tok = t;
        c->dfr_seq = t + cap;
        c->dfr_pos = t + 2 * (size_t)cap;
        c->dfr_len = t + 3 * (size_t)cap;
        c->dfr_erow = t + 4 * (size_t)cap;
        c->dfr_rpos = t + 5 * (size_t)cap;
        c->dfr_cap = cap;
    }
    if (!base) c->dfr_embd_n = 0;
    const int32_t D = c->model->hp.dim;
    if (c->in_embd) { /* image rows (wlm_eval_embd_grid): their inputs copied */
        const int32_t need = c->dfr_embd_n + n;
        if (need > c->dfr_embd_cap) {
            const int32_t cap = need > 2 * c->dfr_embd_cap ? need : 2 * c->dfr_embd_cap;
            float *e = realloc(c->dfr_embd, sizeof(float) * (size_t)cap * (size_t)D);
            if (!e) return wlm_set_error(c->errmsg, WLM_ERR_NOMEM, "out of memory for the image rows");
            c->dfr_embd = e;
            c->dfr_embd_cap = cap;
        }
        memcpy(c->dfr_embd + (size_t)c->dfr_embd_n * (size_t)D, c->in_embd, sizeof(float) * (size_t)n * (size_t)D);
    }
    for (int32_t i = 0; i < n; i++) {
        const int32_t sq = seq_ids ? seq_ids[i] : 0, e = base + i;
        wlm_seq *s = &c->seqs[sq];
        wlm_deferred_state_forget(c, sq, s->n_past); /* snapshots of the tokens replaced */
        c->dfr_tok[e] = tokens[i];
        c->dfr_seq[e] = sq;
        c->dfr_pos[e] = s->n_past;
        c->dfr_len[e] = c->ent_len ? c->ent_len[i] : 0;
        c->dfr_erow[e] = c->in_embd ? c->dfr_embd_n + i : -1;
        /* M-RoPE: the entry's (t, h, w) positions, an image row's from its grid, and rnext */
        if (s->rnext) wlm_mrope_pos(c, c->dfr_rpos + 3 * (size_t)e, sq, s->n_past);
        s->tokens[s->n_past++] = tokens[i];
    }
    if (c->in_embd) c->dfr_embd_n += n;
    c->dfr_n = total;
    c->dfr_exact = 0;
    return WLM_OK;
}

void wlm_deferred_release(wlm_context *c) {
    free(c->dfr_tok);
    free(c->dfr_embd);
    c->dfr_tok = c->dfr_seq = c->dfr_pos = c->dfr_len = c->dfr_erow = c->dfr_rpos = NULL;
    c->dfr_embd = NULL;
    c->dfr_cap = c->dfr_n = c->dfr_embd_n = c->dfr_embd_cap = 0;
}

void wlm_deferred_drop(wlm_context *c) {
    if (c->dfr_n > 0) /* the recorded positions were never computed: forget them */
        for (int32_t i = 0; i < c->dfr_n; i++) {
            wlm_seq *s = &c->seqs[c->dfr_seq[i]];
            if (s->n_past > c->dfr_pos[i]) s->n_past = c->dfr_pos[i];
            wlm_deferred_state_forget(c, c->dfr_seq[i], s->n_past);
        }
    c->dfr_n = 0;
    c->dfr_resume = 0;
}

void wlm_deferred_state_init(wlm_context *c) {
    memset(c->dfr_restore, 0xff, sizeof c->dfr_restore); /* -1: none */
    memset(c->dfr_snap, 0xff, sizeof c->dfr_snap);
}

void wlm_deferred_snapshot(wlm_context *c, int32_t seq, int slot, int32_t pos) {
    if (!c->model->hp.state_floats) return;
    c->seqs[seq].snap_pos[slot] = pos;
    c->dfr_snap[seq][slot] = pos;
}

void wlm_deferred_state_forget(wlm_context *c, int32_t seq, int32_t n) {
    if (!c->model->hp.state_floats) return;
    wlm_seq *s = &c->seqs[seq];
    for (int j = 0; j < WLM_STATE_SNAPS; j++) {
        if (s->snap_pos[j] > n) s->snap_pos[j] = -1;
        if (c->dfr_snap[seq][j] > n) c->dfr_snap[seq][j] = -1;
    }
    if (c->dfr_restore[seq][1] > n) c->dfr_restore[seq][0] = c->dfr_restore[seq][1] = -1;
}

void wlm_deferred_state_truncate(wlm_context *c, int32_t seq, int32_t n) {
    wlm_seq *s = &c->seqs[seq];
    int best = -1; /* the latest snapshot at or before n that the backend has taken */
    for (int j = 0; j < WLM_STATE_SNAPS; j++)
        if (s->snap_pos[j] >= 0 && s->snap_pos[j] <= n && c->dfr_snap[seq][j] < 0 &&
            (best < 0 || s->snap_pos[j] > s->snap_pos[best]))
            best = j;
    const int32_t from = best >= 0 ? s->snap_pos[best] : 0;
    wlm_deferred_state_forget(c, seq, n); /* snapshots past the cut are of other tokens */
    /* image rows (WLM_TOKEN_EMBD) cannot be replayed: the state stops before the first one */
    for (int32_t i = from; i < n; i++)
        if (s->tokens[i] < 0) {
            n = i;
            break;
        }
    c->dfr_restore[seq][0] = best;
    c->dfr_restore[seq][1] = from;
    c->last_restore = from;
    s->n_past = n;
}
