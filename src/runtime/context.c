/*
 * context.c — the context handle: scratch for a chunk of batch entries, the paged KV cache
 * (a pool of reference-counted blocks, copy-on-write), sequences (fork, clear, shift) and
 * evaluation (wlm_eval, wlm_eval_batch). In no-cache mode every evaluation recomputes the whole
 * sequence from position 0, the baseline the KV cache is measured against.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"

#define BLOCK WLM_KV_BLOCK

void wlm_context_params_default(wlm_context_params *params) {
    if (!params) return;
    params->n_ctx = 0;
    params->kv_cache = 1;
    params->use_simd = 1;
    params->n_seq_max = 1;
    params->kv_type = WLM_KV_F16;
    params->dot_form = WLM_DOT_FUSED;
    params->dot_form_batch = -1;
    params->read_ahead = 1;
}

/* ---- KV block pool ------------------------------------------------------------------------ */

/* Adds `n` fresh blocks (one allocation) to the free list. */
static int pool_grow(wlm_kv_pool *p, int32_t n) {
    if (n < 1) n = 1;
    if ((uint64_t)p->n_alloc + (uint64_t)n > (uint64_t)INT32_MAX / 2) return WLM_ERR_NOMEM;
    if ((uint64_t)n * p->block_bytes > (uint64_t)SIZE_MAX) return WLM_ERR_NOMEM;
    if (p->n_alloc + n > p->cap) {
        int32_t cap = p->cap ? p->cap : 16;
        while (cap < p->n_alloc + n) cap *= 2;
        unsigned char **base = realloc(p->base, sizeof *base * (size_t)cap);
        if (base) p->base = base;
        int32_t *ref = realloc(p->ref, sizeof *ref * (size_t)cap);
        if (ref) p->ref = ref;
        int32_t *free_ids = realloc(p->free_ids, sizeof *free_ids * (size_t)cap);
        if (free_ids) p->free_ids = free_ids;
        if (!base || !ref || !free_ids) return WLM_ERR_NOMEM;
        p->cap = cap;
    }
    if (p->n_chunks == p->chunk_cap) {
        int32_t cap = p->chunk_cap ? p->chunk_cap * 2 : 8;
        unsigned char **chunks = realloc(p->chunks, sizeof *chunks * (size_t)cap);
        if (!chunks) return WLM_ERR_NOMEM;
        p->chunks = chunks;
        p->chunk_cap = cap;
    }
    unsigned char *mem = calloc((size_t)n, p->block_bytes);
    if (!mem) return WLM_ERR_NOMEM;
    p->chunks[p->n_chunks++] = mem;
    for (int32_t i = 0; i < n; i++) {
        int32_t id = p->n_alloc++;
        p->base[id] = mem + (size_t)i * p->block_bytes;
        p->ref[id] = 0;
    }
    /* push in reverse so that the lowest new id is taken first */
    for (int32_t id = p->n_alloc - 1; id >= p->n_alloc - n; id--) p->free_ids[p->n_free++] = id;
    return WLM_OK;
}

/* A block with reference count 1, or -1 when memory runs out. */
static int32_t pool_take(wlm_context *c) {
    wlm_kv_pool *p = &c->kv;
    if (p->n_free == 0) {
        int32_t grow = c->max_blocks / 4 > 4 ? c->max_blocks / 4 : 4;
        if (pool_grow(p, grow) != WLM_OK && pool_grow(p, 1) != WLM_OK) return -1;
    }
    int32_t id = p->free_ids[--p->n_free];
    p->ref[id] = 1;
    return id;
}

static void pool_drop(wlm_kv_pool *p, int32_t id) {
    if (--p->ref[id] == 0) p->free_ids[p->n_free++] = id;
}

static void pool_release(wlm_kv_pool *p) {
    for (int32_t i = 0; i < p->n_chunks; i++) free(p->chunks[i]);
    free(p->chunks);
    free(p->base);
    free(p->ref);
    free(p->free_ids);
    memset(p, 0, sizeof *p);
}

void *wlm_kv_row(wlm_context *c, int32_t seq, int32_t layer, int32_t pos) {
    const wlm_seq *s = &c->seqs[seq];
    const wlm_layer_weights *lw = &c->model->w.layers[layer]; /* attention layers only */
    return c->kv.base[s->blocks[pos / BLOCK]] +
           (lw->kv_off + (size_t)(pos % BLOCK) * (size_t)lw->kv_dim) * c->kv.elem_bytes;
}

void wlm_kv_store(const wlm_context *c, void *row, const float *x, int32_t n) {
    if (c->kv.type == WLM_KV_F32) memcpy(row, x, (size_t)n * sizeof(float));
    else wlm_type_get(WLM_TYPE_F16)->from_float(x, row, n); /* quant.c: round to nearest even */
}

/* Widens a KV row of c->kv.type into n floats. */
static void kv_load(const wlm_context *c, float *x, const void *row, int32_t n) {
    if (c->kv.type == WLM_KV_F32) memcpy(x, row, (size_t)n * sizeof(float));
    else wlm_type_get(WLM_TYPE_F16)->to_float(row, x, n);
}

int wlm_kv_reserve(wlm_context *c, int32_t seq, int32_t from, int32_t to) {
    wlm_seq *s = &c->seqs[seq];
    wlm_kv_pool *p = &c->kv;
    if (to <= from) return WLM_OK;
    for (int32_t bi = from / BLOCK; bi <= (to - 1) / BLOCK; bi++) {
        if (bi >= s->n_blocks) { /* a new block at the end of the table */
            int32_t id = pool_take(c);
            if (id < 0) goto nomem;
            s->blocks[s->n_blocks++] = id;
        } else if (p->ref[s->blocks[bi]] > 1) { /* shared with another sequence: copy on write */
            int32_t id = pool_take(c);
            if (id < 0) goto nomem;
            memcpy(p->base[id], p->base[s->blocks[bi]], p->block_bytes);
            pool_drop(p, s->blocks[bi]);
            s->blocks[bi] = id;
        }
    }
    return WLM_OK;
nomem:
    return wlm_set_error(c->errmsg, WLM_ERR_NOMEM,
                         "out of memory for the KV cache: %d blocks of %zu bytes in use",
                         (int)(p->n_alloc - p->n_free), p->block_bytes);
}

/* Drops the blocks of sequence s past position n_past. */
static void seq_trim(wlm_context *c, wlm_seq *s) {
    int32_t keep = (s->n_past + BLOCK - 1) / BLOCK;
    while (s->n_blocks > keep) pool_drop(&c->kv, s->blocks[--s->n_blocks]);
}

/* ---- recurrent state (hybrid models) ------------------------------------------------------
 * A sequence's recurrent state is that of the layers after its last token: it cannot be cut
 * back to an earlier position as the KV cache can. So a sequence keeps snapshots (the state at
 * the end of its last prompt, and before its last speculative verification), and a truncation
 * restores the latest snapshot at or before the cut, then replays the tokens between it and
 * the cut (the tokens are still in s->tokens): every truncation is exact, and the snapshots
 * only shorten the replay. */

static size_t state_bytes(const wlm_context *c) {
    return c->model->hp.state_floats * sizeof(float);
}

/* Sequence s's state, allocated (zeroed) on first use; WLM_ERR_NOMEM with a message. */
static int state_alloc(wlm_context *c, wlm_seq *s) {
    if (s->state || !c->model->hp.state_floats) return WLM_OK;
    s->state = calloc(1, state_bytes(c));
    if (!s->state)
        return wlm_set_error(c->errmsg, WLM_ERR_NOMEM,
                             "out of memory for a sequence's recurrent state (%zu bytes)",
                             state_bytes(c));
    c->state_bytes += state_bytes(c);
    return WLM_OK;
}

int wlm_state_reset(wlm_context *c, int32_t seq) {
    wlm_seq *s = &c->seqs[seq];
    int rc = state_alloc(c, s);
    if (rc != WLM_OK || !s->state) return rc;
    memset(s->state, 0, state_bytes(c));
    for (int j = 0; j < WLM_STATE_SNAPS; j++) s->snap_pos[j] = -1;
    return WLM_OK;
}

void wlm_state_snapshot(wlm_context *c, int32_t seq, int slot) {
    wlm_seq *s = &c->seqs[seq];
    if (c->deferred) { /* the backend copies it when the sequence's state reaches n_past */
        wlm_deferred_snapshot(c, seq, slot, s->n_past);
        return;
    }
    if (!c->model->hp.state_floats || !s->state) return;
    if (!s->snap[slot]) {
        s->snap[slot] = malloc(state_bytes(c));
        if (!s->snap[slot]) return;
        c->state_bytes += state_bytes(c);
    }
    memcpy(s->snap[slot], s->state, state_bytes(c));
    s->snap_pos[slot] = s->n_past;
}

/* ---- rollback of a speculative verification ----------------------------------------------
 * A verification of n entries (the pending token and n - 1 drafts) moves the state n positions;
 * a rejection keeps the pending token and the j accepted drafts, so the state wanted is the one
 * after its entry j < n - 1. Two ways (model.h's WLM_ROLL_*): the snapshot before the pass, then
 * the j + 1 kept tokens replayed (one more forward pass, reading every weight once), or a copy
 * of the state after each entry but the last, written by the pass itself, taken as it is (n - 1
 * state copies a round, whatever is accepted). The record is what llama.cpp's current recurrent
 * memory does (n_rs_seq per-token state rows a sequence, written by the graph; a partial seq_rm
 * picks one: src/llama-memory-recurrent.cpp); here the copies are whole-state buffers swapped
 * in, so taking one costs a pointer swap. */

int wlm_state_roll_choose(const wlm_context *c, int32_t n) {
    if (c->roll_mode != WLM_ROLL_AUTO) return c->roll_mode;
    const uint64_t copies = (uint64_t)(n > 1 ? n - 1 : 0) * state_bytes(c);
    return copies <= (uint64_t)WLM_ROLL_MAX_BYTES &&
                   copies * WLM_ROLL_WEIGHT_RATIO <= (uint64_t)c->model->weight_bytes
               ? WLM_ROLL_POSITIONS
               : WLM_ROLL_REPLAY;
}

int wlm_state_roll_begin(wlm_context *c, int32_t seq, int32_t n) {
    wlm_seq *s = &c->seqs[seq];
    c->roll_rec = 0;
    c->roll_n = 0;
    c->roll_seq = -1;
    if (!c->model->hp.state_floats || n < 2) return WLM_ROLL_AUTO;
    if (c->deferred) { /* the backend's state: a snapshot of the round's start, replayed from */
        wlm_state_snapshot(c, seq, WLM_SNAP_SPEC);
        return WLM_ROLL_REPLAY;
    }
    if (!s->state) return WLM_ROLL_AUTO;
    if (wlm_state_roll_choose(c, n) == WLM_ROLL_POSITIONS) {
        const int32_t need = n - 1;
        if (need > c->roll_cap) {
            float **grown = realloc(c->roll_slot, sizeof(float *) * (size_t)need);
            if (grown) {
                for (int32_t i = c->roll_cap; i < need; i++) grown[i] = NULL;
                c->roll_slot = grown;
                c->roll_cap = need;
            }
        }
        int32_t have = 0;
        while (have < need && have < c->roll_cap) {
            if (!c->roll_slot[have]) {
                c->roll_slot[have] = malloc(state_bytes(c));
                if (!c->roll_slot[have]) break;
                c->state_bytes += state_bytes(c);
            }
            have++;
        }
        if (have == need) {
            c->roll_seq = seq;
            c->roll_pos0 = s->n_past;
            c->roll_n = need;
            c->roll_end = s->n_past + n;
            c->roll_rec = 1;
            return WLM_ROLL_POSITIONS;
        }
        /* out of memory for the copies: the snapshot instead */
    }
    wlm_state_snapshot(c, seq, WLM_SNAP_SPEC);
    return WLM_ROLL_REPLAY;
}

void wlm_state_roll_recorded(wlm_context *c) {
    c->roll_rec = 0;
    c->roll_stamp = c->n_passes;
}

void wlm_state_roll_drop(wlm_context *c) {
    c->roll_rec = 0;
    c->roll_n = 0;
    c->roll_seq = -1;
}

/* Sequence seq cut back to n from the record, when it holds the state after position n - 1 and
 * the sequence is where the record left it (no forward pass since, the same length): the copy
 * swapped in. Returns 1 when done. */
static int roll_take(wlm_context *c, int32_t seq, int32_t n) {
    wlm_seq *s = &c->seqs[seq];
    const int32_t i = n - 1 - c->roll_pos0;
    if (c->roll_rec || c->roll_n < 1 || c->roll_seq != seq || c->roll_stamp != c->n_passes ||
        s->n_past != c->roll_end || i < 0 || i >= c->roll_n)
        return 0;
    float *t = s->state;
    s->state = c->roll_slot[i];
    c->roll_slot[i] = t;
    s->n_past = n;
    c->last_restore = n;
    wlm_state_roll_drop(c); /* the other copies are of positions no longer the sequence's */
    return 1;
}

void wlm_mrope_pos(wlm_context *c, int32_t *r, int32_t seq, int32_t slot) {
    wlm_seq *s = &c->seqs[seq];
    if (!s->rnext) return;
    if (c->in_embd && c->in_img_gw > 0) {
        const int32_t k = c->in_img_row++, gw = c->in_img_gw, gh = c->in_img_gh;
        const int32_t span = gw > gh ? gw : gh;
        /* the image's first row starts where a text token would; the others keep that base
         * (the row before them set base + span) */
        const int32_t base = k == 0 ? (slot ? s->rnext[slot - 1] : 0) : s->rnext[slot - 1] - span;
        r[0] = base;
        r[1] = base + k / gw;
        r[2] = base + k % gw;
        s->rnext[slot] = base + span;
        return;
    }
    const int32_t p = slot ? s->rnext[slot - 1] : 0;
    r[0] = r[1] = r[2] = p;
    s->rnext[slot] = p + 1;
}

/* Entry j of the pass at slot `slot` of sequence seq: its M-RoPE positions into c->ent_rpos
 * (wlm_mrope_pos), on an M-RoPE model. */
static void mrope_entry(wlm_context *c, int32_t j, int32_t seq, int32_t slot) {
    if (c->seqs[seq].rnext) wlm_mrope_pos(c, c->ent_rpos + 3 * (size_t)j, seq, slot);
}

/* Recomputes sequence seq's state from position `from` (its state, at n_past == from) up to
 * `to`, over its stored tokens, without logits (c->logits and the entries' rows untouched). */
static int state_replay(wlm_context *c, int32_t seq, int32_t from, int32_t to) {
    int32_t no_logits[WLM_BATCH_CHUNK_MOE];
    for (int32_t i = 0; i < WLM_BATCH_CHUNK_MOE; i++) no_logits[i] = -1;
    wlm_seq *s = &c->seqs[seq];
    int rc = wlm_kv_reserve(c, seq, from, to); /* rows shared with a fork are copied first */
    if (rc != WLM_OK) return rc;
    s->n_past = from;
    for (int32_t i0 = from; i0 < to; i0 += c->chunk) {
        const int32_t m = to - i0 < c->chunk ? to - i0 : c->chunk;
        for (int32_t j = 0; j < m; j++) {
            c->ent_seq[j] = seq;
            c->ent_pos[j] = i0 + j;
            mrope_entry(c, j, seq, i0 + j);
        }
        wlm_forward_batch(c, s->tokens + i0, m, no_logits);
        s->n_past = i0 + m;
    }
    return WLM_OK;
}

/* Cuts recurrent sequence s back to n < n_past: the rollback record's copy of the state after
 * position n - 1 where it has one (no replay), else the latest snapshot at or before n, then the
 * tokens up to n replayed; from position 0 without one. On failure (out of memory), or where
 * image rows lie between the snapshot and n (they are not kept, so not replayable), the
 * sequence stops earlier, where its state is right: callers read n_past. */
static void state_truncate(wlm_context *c, int32_t seq, int32_t n) {
    if (c->deferred) { /* the state and its snapshots are the backend's: it restores, replays */
        wlm_deferred_state_truncate(c, seq, n);
        return;
    }
    wlm_seq *s = &c->seqs[seq];
    for (int i = 0; i < WLM_STATE_SNAPS; i++) /* snapshots past the cut are of other tokens */
        if (s->snap_pos[i] > n) s->snap_pos[i] = -1;
    if (roll_take(c, seq, n)) return;
    int best = -1;
    for (int i = 0; i < WLM_STATE_SNAPS; i++)
        if (s->snap[i] && s->snap_pos[i] >= 0 && s->snap_pos[i] <= n &&
            (best < 0 || s->snap_pos[i] > s->snap_pos[best]))
            best = i;
    int32_t from = 0;
    c->last_restore = 0;
    if (best >= 0) {
        memcpy(s->state, s->snap[best], state_bytes(c));
        from = s->snap_pos[best];
        c->last_restore = from;
    } else if (s->state) {
        memset(s->state, 0, state_bytes(c));
    }
    s->n_past = from;
    /* image rows (WLM_TOKEN_EMBD) cannot be replayed: the state stops before the first one */
    for (int32_t i = from; i < n; i++)
        if (s->tokens[i] < 0) {
            n = i;
            break;
        }
    if (from < n && state_replay(c, seq, from, n) != WLM_OK) {
        /* n_past stays where the replay stopped: the state there is right */
    }
}

/* Whether sequence s has a recurrent state to cut back (here, or a deferred hybrid's backend). */
static int has_state(const wlm_context *c, const wlm_seq *s) {
    return s->state || (c->deferred && c->model->hp.state_floats);
}

/* ---- handle ------------------------------------------------------------------------------- */

/* Frees the buffers of one pass's entries (pass_buffers) and sets them NULL. */
static void pass_buffers_free(wlm_context *c) {
    void **bufs[] = {(void **)&c->x, (void **)&c->xb, (void **)&c->xb2, (void **)&c->hb,
                     (void **)&c->hb2, (void **)&c->q, (void **)&c->qg, (void **)&c->gate,
                     (void **)&c->rs_in, (void **)&c->rs_z, (void **)&c->rs_ba, (void **)&c->rs_o,
                     (void **)&c->ple, (void **)&c->ple_h, (void **)&c->qkv, (void **)&c->kt,
                     (void **)&c->vt, (void **)&c->xq, (void **)&c->moe_logits, (void **)&c->moe_ids,
                     (void **)&c->moe_w, (void **)&c->moe_row, (void **)&c->moe_first,
                     (void **)&c->moe_x, (void **)&c->moe_h, (void **)&c->moe_h2, (void **)&c->moe_y,
                     (void **)&c->moe_xq, (void **)&c->rope_cos, (void **)&c->rope_sin,
                     (void **)&c->kb, (void **)&c->vb, (void **)&c->ent_seq, (void **)&c->ent_pos,
                     (void **)&c->ent_rpos};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        free(*bufs[i]);
        *bufs[i] = NULL;
    }
}

static void context_release(wlm_context *c) {
    if (c->seqs)
        for (int32_t i = 0; i < c->n_seq_max; i++) {
            free(c->seqs[i].blocks);
            free(c->seqs[i].tokens);
            free(c->seqs[i].rnext);
            free(c->seqs[i].state);
            for (int j = 0; j < WLM_STATE_SNAPS; j++) free(c->seqs[i].snap[j]);
        }
    free(c->seqs);
    for (int32_t i = 0; i < c->roll_cap; i++) free(c->roll_slot[i]);
    free(c->roll_slot);
    pool_release(&c->kv);
    pass_buffers_free(c);
    free(c->att);
    free(c->rope_freq);
    wlm_deferred_release(c);
    free(c->logits);
    free(c->logit_row);
    if (c->gens)
        for (int32_t i = 0; i < c->n_seq_max; i++) {
            free(c->gens[i].held);
            free(c->gens[i].out);
            wlm_sampler_free(&c->gens[i].sampler);
        }
    free(c->gens);
    wlm_beam_release(c);
}

/* calloc of n elements of `size` bytes with the byte count checked and added to *total. */
static void *alloc_n(uint64_t n, size_t size, size_t *total) {
    if (n == 0) n = 1;
    if (n > (uint64_t)(SIZE_MAX / size)) return NULL;
    *total += (size_t)n * size;
    return calloc((size_t)n, size);
}

/* Allocates, for B entries, the buffers of one pass (wlm_forward_batch): the activations and
 * their quantized copies, the experts' rows, the entries' RoPE rows and positions, and the block
 * pointers a pass reaches (a sliding window reaches n_swa back and, in an image pass, forward to
 * the pass's end). Frees those it replaces (their contents are a pass's, never kept); sets
 * c->batch_cap = B and adds the bytes to *total. WLM_OK, or WLM_ERR_NOMEM with every pass buffer
 * freed. Called when a context is made (B = its chunk, n_ctx for a bidirectional model) and by
 * wlm_eval_embd for a non-causal image longer than that (its rows must pass together). */
static int pass_buffers(wlm_context *c, uint64_t B, size_t *total) {
    const wlm_model *model = c->model;
    const wlm_hparams *p = &model->hp;
    pass_buffers_free(c);
    c->batch_cap = (int32_t)B;
    const size_t total0 = *total;
    const uint64_t dim = (uint64_t)p->dim, hid = (uint64_t)p->hidden_dim, kvd = (uint64_t)p->kv_dim;
    const uint64_t half = (uint64_t)c->rope_half;
    const uint64_t qd = (uint64_t)p->q_dim, xs = qd > dim ? qd : dim;
    const uint64_t hs = p->arch->ffn == WLM_FFN_FUSED_GATE_UP ? 2 * hid : hid;
    uint64_t widest = hid > dim ? hid : dim;
    if (qd > widest) widest = qd;
    /* hybrids: recurrent layers' projections and gated attention */
    const uint64_t vd = (uint64_t)p->ssm_hv * (uint64_t)p->ssm_d; /* DeltaNet's HV D */
    const int deltanet = p->ssm_hv > 0, shortconv = p->n_rec_layers > 0 && !deltanet;
    const uint64_t rs_in = deltanet ? (uint64_t)p->ssm_channels : shortconv ? 3 * dim : 0;
    if (vd > widest) widest = vd;
    if ((uint64_t)model->w.dense2.rows > widest) widest = (uint64_t)model->w.dense2.rows; /* dense_3's input */
    int fused_qkv = 0;
    for (int32_t l = 0; l < p->n_layers; l++) fused_qkv |= model->w.layers[l].wqkv.data != NULL;
    /* block pointers: one per block of a full sequence, or one per position of a window */
    c->kb_cap = c->max_blocks;
    /* symmetric: ± n_swa / 2; an image pass (wlm_eval_embd) reaches forward to its end */
    const int64_t win = p->bidirectional ? (int64_t)p->n_swa + 1 : (int64_t)p->n_swa + (int64_t)B - 1;
    if (c->n_rope_sets > 1 && win > c->kb_cap) c->kb_cap = win < c->n_ctx ? (int32_t)win : c->n_ctx;
    /* mixture of experts (moe.c): one row per (entry, chosen expert) */
    const uint64_t n_exp = (uint64_t)p->n_expert, R = B * (uint64_t)p->n_expert_used;
    const uint64_t ff_exp = (uint64_t)p->expert_ff;
    if (ff_exp > widest) widest = ff_exp;
    if (n_exp) {
        c->moe_logits = alloc_n(B * n_exp, sizeof(float), total);
        c->moe_ids = alloc_n(R, sizeof(int32_t), total);
        c->moe_w = alloc_n(R, sizeof(float), total);
        c->moe_row = alloc_n(R, sizeof(int32_t), total);
        c->moe_first = alloc_n(n_exp + 1, sizeof(int32_t), total);
        c->moe_x = alloc_n(R * dim, sizeof(float), total);
        c->moe_h = alloc_n(R * ff_exp, sizeof(float), total);
        c->moe_h2 = alloc_n(R * ff_exp, sizeof(float), total);
        c->moe_y = alloc_n(R * dim, sizeof(float), total);
    }
    c->x = alloc_n(B * dim, sizeof(float), total);
    c->xb = alloc_n(B * xs, sizeof(float), total);
    c->xb2 = alloc_n(B * dim, sizeof(float), total);
    c->hb = alloc_n(B * hs, sizeof(float), total);
    c->hb2 = alloc_n(B * hid, sizeof(float), total);
    c->q = alloc_n(B * qd, sizeof(float), total);
    c->qkv = fused_qkv ? alloc_n(B * (qd + 2 * kvd), sizeof(float), total) : NULL;
    if (p->arch->attn_gate) {
        c->qg = alloc_n(B * 2 * qd, sizeof(float), total);
        c->gate = alloc_n(B * qd, sizeof(float), total);
    }
    if (p->n_rec_layers) {
        c->rs_in = alloc_n(B * rs_in, sizeof(float), total);
        c->rs_z = alloc_n(B * vd, sizeof(float), total);
        c->rs_ba = alloc_n(B * 2 * (uint64_t)p->ssm_hv, sizeof(float), total);
        c->rs_o = alloc_n(B * (vd > dim ? vd : dim), sizeof(float), total);
    }
    if (p->n_ple) { /* Gemma 4's per-layer inputs */
        c->ple = alloc_n(B * (uint64_t)p->n_ple * (uint64_t)p->n_layers, sizeof(float), total);
        const uint64_t pl = (uint64_t)p->n_ple * (uint64_t)p->n_layers;
        c->ple_h = alloc_n(B * (uint64_t)p->n_ple > pl ? B * (uint64_t)p->n_ple : pl,
                           sizeof(float), total);
    }
    c->kt = alloc_n(B * kvd, sizeof(float), total);
    c->vt = alloc_n(B * kvd, sizeof(float), total);
    /* Quantized activations take fewer bytes than floats: the widest input + slack per row,
     * rounded to 16 bytes so every row stays aligned. */
    c->xq_stride = (size_t)((widest + 256) * sizeof(float) + 15) & ~(size_t)15;
    c->xq = alloc_n(B * c->xq_stride, 1, total);
    if (n_exp) c->moe_xq = alloc_n(2 * R * c->xq_stride, 1, total);
    c->rope_cos = alloc_n((uint64_t)c->n_rope_sets * B * half, sizeof(float), total);
    c->rope_sin = alloc_n((uint64_t)c->n_rope_sets * B * half, sizeof(float), total);
    c->kb = alloc_n((uint64_t)c->kb_cap, sizeof(void *), total);
    c->vb = alloc_n((uint64_t)c->kb_cap, sizeof(void *), total);
    c->ent_seq = alloc_n(B, sizeof(int32_t), total);
    c->ent_pos = alloc_n(B, sizeof(int32_t), total);
    const int mrope = p->arch->rope_sections == WLM_SECTIONS_MROPE;
    if (mrope) c->ent_rpos = alloc_n(B * 3, sizeof(int32_t), total);
    const int ok = c->x && c->xb && c->xb2 && c->hb && c->hb2 && c->q && c->kt && c->vt &&
                   (c->qkv || !fused_qkv) && ((c->qg && c->gate) || !p->arch->attn_gate) &&
                   ((c->rs_in && c->rs_z && c->rs_ba && c->rs_o) || !p->n_rec_layers) &&
                   ((c->ple && c->ple_h) || !p->n_ple) && c->xq && c->rope_cos && c->rope_sin &&
                   c->kb && c->vb && c->ent_seq && c->ent_pos && (c->ent_rpos || !mrope) &&
                   (!n_exp || (c->moe_logits && c->moe_ids && c->moe_w && c->moe_row &&
                               c->moe_first && c->moe_x && c->moe_h && c->moe_h2 && c->moe_y &&
                               c->moe_xq));
    c->pass_bytes = *total - total0;
    if (ok) return WLM_OK;
    pass_buffers_free(c);
    c->pass_bytes = 0;
    return WLM_ERR_NOMEM;
}

int wlm_context_new(const wlm_model *model, const wlm_context_params *params, wlm_context **out) {
    if (!out) return WLM_ERR_INVALID_ARG;
    wlm_context *c = calloc(1, sizeof *c);
    *out = c;
    if (!c) return WLM_ERR_NOMEM;
    c->roll_seq = -1;
    if (!model) return wlm_set_error(c->errmsg, WLM_ERR_INVALID_ARG, "model is NULL");
    if (!model->loaded) return wlm_set_error(c->errmsg, WLM_ERR_STATE, "the model did not load");
    if (model->vocab_only)
        return wlm_set_error(c->errmsg, WLM_ERR_STATE,
                             "the model was loaded with WLM_LOAD_VOCAB_ONLY: it has no weights");
    if (model->tensors_external && (model->tensors_pending || !params || params->kv_cache != 2))
        return wlm_set_error(c->errmsg, WLM_ERR_STATE,
                             model->tensors_pending
                                 ? "the model's weights are not read in yet "
                                   "(WLM_LOAD_TENSORS_EXTERNAL without wlm_model_commit_external)"
                                 : "the model's weight matrices are held by another backend "
                                   "(WLM_LOAD_TENSORS_EXTERNAL): only a deferred context "
                                   "(kv_cache 2) can use it, never the CPU forward pass");
    wlm_context_params defaults;
    wlm_context_params_default(&defaults);
    if (!params) params = &defaults;
    const wlm_hparams *p = &model->hp;
    if (params->n_ctx < 0 || params->n_ctx > p->seq_len)
        return wlm_set_error(c->errmsg, WLM_ERR_INVALID_ARG,
                             "n_ctx %d is outside 0..%d (0 = the model's seq_len)",
                             (int)params->n_ctx, (int)p->seq_len);
    if (params->n_seq_max < 1 || params->n_seq_max > WLM_MAX_SEQ)
        return wlm_set_error(c->errmsg, WLM_ERR_INVALID_ARG, "n_seq_max %d is outside 1..%d",
                             (int)params->n_seq_max, WLM_MAX_SEQ);
    if (params->kv_type != WLM_KV_F32 && params->kv_type != WLM_KV_F16)
        return wlm_set_error(c->errmsg, WLM_ERR_INVALID_ARG,
                             "kv_type %d is neither WLM_KV_F16 (%d) nor WLM_KV_F32 (%d)",
                             (int)params->kv_type, WLM_KV_F16, WLM_KV_F32);
    if (params->dot_form != WLM_DOT_FUSED && params->dot_form != WLM_DOT_SPLIT)
        return wlm_set_error(c->errmsg, WLM_ERR_INVALID_ARG,
                             "dot_form %d is neither WLM_DOT_FUSED (%d) nor WLM_DOT_SPLIT (%d)",
                             (int)params->dot_form, WLM_DOT_FUSED, WLM_DOT_SPLIT);
    if (params->dot_form_batch != -1 && params->dot_form_batch != WLM_DOT_FUSED &&
        params->dot_form_batch != WLM_DOT_SPLIT)
        return wlm_set_error(c->errmsg, WLM_ERR_INVALID_ARG,
                             "dot_form_batch %d is neither -1 (dot_form's), WLM_DOT_FUSED (%d) "
                             "nor WLM_DOT_SPLIT (%d)",
                             (int)params->dot_form_batch, WLM_DOT_FUSED, WLM_DOT_SPLIT);
    c->model = model;
    c->n_ctx = params->n_ctx ? params->n_ctx : p->seq_len;
    c->kv_cache = params->kv_cache != 0;
    c->deferred = params->kv_cache == 2; /* another backend keeps K/V (runtime/deferred.c) */
    wlm_deferred_state_init(c);
    c->use_simd = params->use_simd != 0;
    c->k = c->use_simd ? &wlm_kernels_simd : &wlm_kernels_ref;
    c->dot_split = c->use_simd && params->dot_form == WLM_DOT_SPLIT && wlm_quant_have_relaxed();
    c->dot_split_batch = c->use_simd && wlm_quant_have_relaxed() &&
                         (params->dot_form_batch == -1 ? params->dot_form : params->dot_form_batch) ==
                             WLM_DOT_SPLIT;
    c->read_ahead = params->read_ahead != 0;
    c->n_seq_max = params->n_seq_max;
    c->max_blocks = (c->n_ctx + BLOCK - 1) / BLOCK;
    c->last_logits = -1;

    /* A non-causal model's sequences pass whole (every token attends to every other), so its
     * activations hold n_ctx entries. */
    c->chunk = p->n_expert > 1 ? WLM_BATCH_CHUNK_MOE : WLM_BATCH_CHUNK;
    const uint64_t half = (uint64_t)(p->n_rot_swa > p->n_rot ? p->n_rot_swa : p->n_rot) / 2;
    c->rope_half = (int32_t)half;
    int any_swa = 0;
    for (int32_t l = 0; l < p->n_layers; l++) any_swa |= model->w.layers[l].swa;
    c->n_rope_sets = any_swa && p->n_swa > 0 ? 2 : 1;
    size_t total = 0;
    const int pass_ok =
        pass_buffers(c, p->bidirectional && c->n_ctx > c->chunk ? c->n_ctx : c->chunk, &total) == WLM_OK;
    c->att = alloc_n(wlm_attention_scratch(p->n_heads, c->n_ctx, p->head_size), sizeof(float),
                     &total);
    c->rope_freq = alloc_n((uint64_t)c->n_rope_sets * half, sizeof(float), &total);
    const int mrope = p->arch->rope_sections == WLM_SECTIONS_MROPE;
    c->logits_cap = 1;
    c->logits = alloc_n((uint64_t)p->vocab_size, sizeof(float), &total);
    c->n_entries_cap = 1;
    c->logit_row = alloc_n(1, sizeof(int32_t), &total);
    c->seqs = alloc_n((uint64_t)c->n_seq_max, sizeof(wlm_seq), &total);
    c->gens = alloc_n((uint64_t)c->n_seq_max, sizeof(wlm_generation), &total);
    int ok = pass_ok && c->att && c->rope_freq && c->logits && c->logit_row && c->seqs && c->gens;
    for (int32_t i = 0; ok && i < c->n_seq_max; i++) {
        c->seqs[i].blocks = alloc_n((uint64_t)c->max_blocks, sizeof(int32_t), &total);
        c->seqs[i].tokens = alloc_n((uint64_t)c->n_ctx, sizeof(int32_t), &total);
        if (mrope) c->seqs[i].rnext = alloc_n((uint64_t)c->n_ctx, sizeof(int32_t), &total);
        c->seqs[i].exact = c->n_ctx;
        for (int j = 0; j < WLM_STATE_SNAPS; j++) c->seqs[i].snap_pos[j] = -1;
        ok = c->seqs[i].blocks && c->seqs[i].tokens && (c->seqs[i].rnext || !mrope) &&
             (c->ent_rpos || !mrope);
        c->gens[i].pending = -1;
    }
    /* Non-causal: K and V live for one pass only (llama.cpp keeps no cache for encoders and
     * computes them in F32), so kv_type does not apply. */
    c->kv.type = p->bidirectional ? WLM_KV_F32 : params->kv_type;
    c->kv.elem_bytes = c->kv.type == WLM_KV_F16 ? 2 : 4;
    /* K and V rows for the attention layers owning a cache only (a hybrid's other layers keep
     * a state; Gemma 4's shared-KV layers read an earlier layer's) */
    c->kv.block_bytes = (size_t)BLOCK * p->kv_elems * c->kv.elem_bytes;
    if (c->kv.block_bytes == 0) c->kv.block_bytes = 1; /* no attention layer: blocks of nothing */
    if (ok && !c->deferred) ok = pool_grow(&c->kv, c->max_blocks) == WLM_OK; /* one full sequence up front */
    if (!ok) {
        uint64_t kv_bytes = c->deferred ? 0 : (uint64_t)c->max_blocks * c->kv.block_bytes;
        context_release(c);
        memset(c, 0, sizeof *c);
        return wlm_set_error(c->errmsg, WLM_ERR_NOMEM,
                             "out of memory: the context needs %zu bytes of scratch and a KV "
                             "cache of %llu bytes",
                             total, (unsigned long long)kv_bytes);
    }
    wlm_rope_init(c); /* forward.c: the RoPE frequencies of every set */
    c->bytes = total;
    return WLM_OK;
}

void wlm_context_free(wlm_context *ctx) {
    if (!ctx) return;
    context_release(ctx);
    wlm_gram_vocab_free(ctx->gram_vocab);
    wlm_spec_free(ctx->spec);
    free(ctx);
}

const char *wlm_context_errmsg(const wlm_context *ctx) {
    return ctx ? ctx->errmsg : "no context (NULL handle)";
}

int wlm_context_set_threadpool(wlm_context *ctx, wlm_threadpool *pool) {
    if (!ctx) return WLM_ERR_INVALID_ARG;
    ctx->errmsg[0] = '\0';
    ctx->pool = pool;
    return WLM_OK;
}

int wlm_context_set_read_ahead(wlm_context *ctx, int32_t on) {
    if (!ctx) return WLM_ERR_INVALID_ARG;
    ctx->errmsg[0] = '\0';
    if (on != 0 && on != 1)
        return wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG,
                             "read_ahead must be 0 or 1 (got %d)", (int)on);
    ctx->read_ahead = on;
    return WLM_OK;
}

size_t wlm_context_memory(const wlm_context *ctx) {
    if (!ctx) return 0;
    return ctx->bytes + ctx->state_bytes + (size_t)ctx->kv.n_alloc * ctx->kv.block_bytes +
           (size_t)(ctx->logits_cap - 1) * (size_t)ctx->model->hp.vocab_size * sizeof(float);
}

int wlm_kv_stats_get(const wlm_context *ctx, wlm_kv_stats *out) {
    if (!ctx || !out || !ctx->model) return WLM_ERR_INVALID_ARG;
    memset(out, 0, sizeof *out);
    out->block_bytes = ctx->kv.block_bytes;
    out->blocks_allocated = ctx->kv.n_alloc;
    for (int32_t i = 0; i < ctx->kv.n_alloc; i++) {
        out->blocks_used += ctx->kv.ref[i] > 0;
        out->blocks_shared += ctx->kv.ref[i] > 1;
    }
    for (int32_t i = 0; i < ctx->n_seq_max; i++) {
        out->block_refs += ctx->seqs[i].n_blocks;
        out->states += ctx->seqs[i].state != NULL;
    }
    out->state_bytes = ctx->model->hp.state_floats * sizeof(float);
    out->state_bytes_allocated = ctx->state_bytes;
    return WLM_OK;
}

void wlm_context_reset(wlm_context *ctx) { wlm_context_reset_keep(ctx, 0); }

void wlm_context_reset_keep(wlm_context *ctx, int32_t keep) {
    if (!ctx || !ctx->seqs) return;
    wlm_deferred_drop(ctx);
    /* what is kept is within the exact prefix, before any shifted position: a shift the backend
     * has not applied no longer matters */
    memset(ctx->dfr_shift, 0, sizeof ctx->dfr_shift);
    ctx->dfr_n_fork = 0;
    ctx->dfr_last_n = 0; /* a batch of media prompts no longer begins */
    ctx->dfr_join = 0;   /* nor does a media sequence join */
    for (int32_t i = 0; i < ctx->n_seq_max; i++) {
        wlm_seq *s = &ctx->seqs[i];
        int32_t k = i == 0 && keep > 0 ? keep : 0;
        if (k > s->n_past) k = s->n_past;
        if (k > s->exact) k = s->exact;
        if (has_state(ctx, s) && k > 0 && k < s->n_past) state_truncate(ctx, i, k); /* may stop short */
        else s->n_past = k;
        k = s->n_past;
        if (k == 0) s->exact = ctx->n_ctx;
        seq_trim(ctx, s);
        wlm_generation *g = &ctx->gens[i];
        g->active = 0;
        g->done = 0;
        g->pending = -1;
        g->held_len = 0;
    }
    ctx->n_gen = 0;
    ctx->gen_aborted = 0;
    wlm_spec_end(ctx);
    ctx->beam.active = 0;
    ctx->beam.done = 0;
    ctx->n_entries = 0;
    ctx->last_logits = -1;
}

int32_t wlm_context_n_past(const wlm_context *ctx) { return wlm_seq_n_past(ctx, 0); }

int32_t wlm_seq_n_past(const wlm_context *ctx, int32_t seq) {
    if (!ctx || !ctx->seqs || seq < 0 || seq >= ctx->n_seq_max) return 0;
    return ctx->seqs[seq].n_past;
}

/* ---- sequences ---------------------------------------------------------------------------- */

static int check_seq(wlm_context *c, int32_t seq, const char *what) {
    if (!c->model || !c->seqs) return wlm_set_error(c->errmsg, WLM_ERR_STATE, "context has no model");
    if (seq < 0 || seq >= c->n_seq_max)
        return wlm_set_error(c->errmsg, WLM_ERR_INVALID_ARG,
                             "%s: sequence %d is outside 0..%d (n_seq_max %d)", what, (int)seq,
                             (int)c->n_seq_max - 1, (int)c->n_seq_max);
    return WLM_OK;
}

static int busy(wlm_context *c) {
    if (c->prefilling) return WLM_OK; /* a joining sequence's own slot (vision/sequence.c) */
    int active = c->beam.active;
    for (int32_t i = 0; i < c->n_gen; i++) active |= c->gens[i].active;
    if (active)
        return wlm_set_error(c->errmsg, WLM_ERR_STATE,
                             "a generation or beam search is in progress (reset the context)");
    return WLM_OK;
}

int wlm_seq_clear(wlm_context *ctx, int32_t seq) {
    if (!ctx) return WLM_ERR_INVALID_ARG;
    ctx->errmsg[0] = '\0';
    int rc = check_seq(ctx, seq, "wlm_seq_clear");
    if (rc != WLM_OK) return rc;
    ctx->seqs[seq].n_past = 0;
    ctx->seqs[seq].exact = ctx->n_ctx;
    seq_trim(ctx, &ctx->seqs[seq]);
    return WLM_OK;
}

/* Internal fork without the busy check (used by generation and beam search). */
void wlm_seq_fork_internal(wlm_context *c, int32_t src, int32_t dst) {
    if (src == dst) return;
    wlm_seq *s = &c->seqs[src], *d = &c->seqs[dst];
    if (c->deferred) { /* the backend copies the rows; one pending fork per destination */
        int32_t i = 0;
        while (i < c->dfr_n_fork && c->dfr_fork[i][1] != dst) i++;
        if (i == c->dfr_n_fork) c->dfr_n_fork++;
        c->dfr_fork[i][0] = src;
        c->dfr_fork[i][1] = dst;
        c->dfr_fork[i][2] = s->n_past;
        wlm_deferred_state_forget(c, dst, -1); /* the copy keeps no snapshot, as below */
    }
    d->n_past = 0;
    seq_trim(c, d);
    for (int32_t i = 0; i < s->n_blocks; i++) {
        d->blocks[i] = s->blocks[i];
        c->kv.ref[s->blocks[i]]++;
    }
    d->n_blocks = s->n_blocks;
    d->n_past = s->n_past;
    d->exact = s->exact;
    memcpy(d->tokens, s->tokens, sizeof(int32_t) * (size_t)s->n_past);
    if (s->rnext) memcpy(d->rnext, s->rnext, sizeof(int32_t) * (size_t)s->n_past);
    for (int j = 0; j < WLM_STATE_SNAPS; j++) d->snap_pos[j] = -1;
    if (s->state && s->n_past > 0) { /* the state is copied, not shared */
        if (state_alloc(c, d) == WLM_OK) memcpy(d->state, s->state, state_bytes(c));
        else d->n_past = 0; /* out of memory: the copy starts over (its tokens are kept) */
    }
}

int wlm_seq_fork(wlm_context *ctx, int32_t src, int32_t dst) {
    if (!ctx) return WLM_ERR_INVALID_ARG;
    ctx->errmsg[0] = '\0';
    int rc = check_seq(ctx, src, "wlm_seq_fork");
    if (rc == WLM_OK) rc = check_seq(ctx, dst, "wlm_seq_fork");
    if (rc == WLM_OK) rc = busy(ctx);
    if (rc != WLM_OK) return rc;
    if (ctx->deferred)
        return wlm_set_error(ctx->errmsg, WLM_ERR_UNSUPPORTED,
                             "wlm_seq_fork: not supported by this context's backend yet");
    wlm_seq_fork_internal(ctx, src, dst);
    return WLM_OK;
}

void wlm_seq_truncate_internal(wlm_context *c, int32_t seq, int32_t n) {
    wlm_seq *s = &c->seqs[seq];
    if (n >= s->n_past) return;
    if (has_state(c, s) && n > 0) state_truncate(c, seq, n); /* restore + replay: may stop short */
    else s->n_past = n < 0 ? 0 : n;
    if (s->n_past == 0) s->exact = c->n_ctx;
    seq_trim(c, s); /* a kept block shared with another sequence is copied on its next write */
}

int wlm_seq_truncate(wlm_context *ctx, int32_t seq, int32_t n) {
    if (!ctx) return WLM_ERR_INVALID_ARG;
    ctx->errmsg[0] = '\0';
    int rc = check_seq(ctx, seq, "wlm_seq_truncate");
    if (rc == WLM_OK) rc = busy(ctx);
    if (rc != WLM_OK) return rc;
    if (n < 0)
        return wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG,
                             "wlm_seq_truncate: n must be >= 0 (got %d)", (int)n);
    wlm_seq_truncate_internal(ctx, seq, n);
    return WLM_OK;
}

int wlm_seq_shift_internal(wlm_context *c, int32_t seq, int32_t n_keep, int32_t n_discard) {
    wlm_seq *s = &c->seqs[seq];
    if (n_keep < 0 || n_discard < 1 || (int64_t)n_keep + n_discard > s->n_past)
        return wlm_set_error(c->errmsg, WLM_ERR_INVALID_ARG,
                             "context shift: n_keep %d and n_discard %d do not fit in the %d "
                             "tokens of sequence %d (need n_keep >= 0, n_discard >= 1)",
                             (int)n_keep, (int)n_discard, (int)s->n_past, (int)seq);
    /* Learned positions and sliding windows cannot be shifted (forward.c says why). */
    int rc = wlm_shift_supported(c->model, c->errmsg);
    if (rc != WLM_OK) return rc;
    if (s->rnext) /* M-RoPE: text alone turns as NEOX RoPE; an image's rows do not */
        for (int32_t i = 0; i < s->n_past; i++)
            if (s->rnext[i] != i + 1)
                return wlm_set_error(c->errmsg, WLM_ERR_UNSUPPORTED,
                                     "context shift is not supported on sequence %d: it holds an "
                                     "image, whose rows turn by M-RoPE's 2-D positions (llama.cpp "
                                     "cannot shift M-RoPE models either)", (int)seq);
    if (c->deferred) { /* the backend moves and re-rotates its rows before the next batch */
        int32_t *sh = c->dfr_shift[seq];
        if (sh[1] > 0)
            return wlm_set_error(c->errmsg, WLM_ERR_STATE,
                                 "context shift: sequence %d's previous shift has not reached the "
                                 "backend yet (evaluate a batch first)",
                                 (int)seq);
        sh[0] = n_keep;
        sh[1] = n_discard;
        sh[2] = s->n_past;
    } else {
        /* The moved rows are written in place: the sequence must own its blocks. */
        rc = wlm_kv_reserve(c, seq, n_keep, s->n_past);
        if (rc != WLM_OK) return rc;
        const wlm_hparams *p = &c->model->hp;
        wlm_rope_shift_prepare(c, n_discard); /* forward.c: cos/sin of -n_discard positions */
        for (int32_t pos = n_keep + n_discard; pos < s->n_past; pos++) {
            for (int32_t l = 0; l < p->n_layers; l++) {
                const wlm_layer_weights *lw = &c->model->w.layers[l];
                if (lw->kv_slot < 0 || !lw->kv_own) continue; /* no KV cache of its own */
                const int kv_dim = lw->kv_dim;
                const size_t row_bytes = (size_t)kv_dim * c->kv.elem_bytes;
                const size_t v_off = (size_t)BLOCK * row_bytes;
                unsigned char *src = wlm_kv_row(c, seq, l, pos);
                unsigned char *dst = wlm_kv_row(c, seq, l, pos - n_discard);
                memcpy(dst + v_off, src + v_off, row_bytes); /* V as it is */
                kv_load(c, c->kt, src, kv_dim);              /* K rotated in float32 */
                wlm_rope_shift_k(c, l, c->kt);               /* forward.c: the layer's RoPE */
                wlm_kv_store(c, dst, c->kt, kv_dim);
            }
        }
    }
    memmove(s->tokens + n_keep, s->tokens + n_keep + n_discard,
            sizeof(int32_t) * (size_t)(s->n_past - n_keep - n_discard));
    s->n_past -= n_discard;
    if (s->exact > n_keep) s->exact = n_keep;
    seq_trim(c, s); /* (a deferred context holds no blocks: nothing to trim) */
    return WLM_OK;
}

int wlm_seq_shift(wlm_context *ctx, int32_t seq, int32_t n_keep, int32_t n_discard) {
    if (!ctx) return WLM_ERR_INVALID_ARG;
    ctx->errmsg[0] = '\0';
    int rc = check_seq(ctx, seq, "wlm_seq_shift");
    if (rc == WLM_OK) rc = busy(ctx);
    if (rc != WLM_OK) return rc;
    if (!ctx->kv_cache)
        return wlm_set_error(ctx->errmsg, WLM_ERR_STATE, "a context without KV cache cannot shift");
    rc = wlm_seq_shift_internal(ctx, seq, n_keep, n_discard);
    ctx->last_logits = -1;
    return rc;
}

/* ---- evaluation --------------------------------------------------------------------------- */

/* Evaluates entries (tokens[i] appended to sequence SEQ(i)) in chunks of c->chunk (a non-causal
 * image's rows in one). */
#define SEQ(i) (seq_ids ? seq_ids[i] : 0)
static int run_entries(wlm_context *c, const int32_t *tokens, const int32_t *seq_ids,
                       const uint8_t *want, int32_t n) {
    const int32_t vocab = c->model->hp.vocab_size;
    /* logits rows: one per wanted entry, in entry order */
    int32_t n_want = 0;
    for (int32_t i = 0; i < n; i++) n_want += want ? want[i] != 0 : i == n - 1;
    if (n > c->n_entries_cap) {
        int32_t *r = realloc(c->logit_row, sizeof(int32_t) * (size_t)n);
        if (!r) return wlm_set_error(c->errmsg, WLM_ERR_NOMEM, "out of memory for the batch");
        c->logit_row = r;
        c->n_entries_cap = n;
    }
    if (n_want > c->logits_cap) {
        if ((uint64_t)n_want * (uint64_t)vocab > (uint64_t)(SIZE_MAX / sizeof(float)))
            return wlm_set_error(c->errmsg, WLM_ERR_NOMEM, "out of memory for logits");
        float *l = realloc(c->logits, sizeof(float) * (size_t)n_want * (size_t)vocab);
        if (!l) return wlm_set_error(c->errmsg, WLM_ERR_NOMEM, "out of memory for logits");
        c->logits = l;
        c->logits_cap = n_want;
    }
    /* positions, and KV blocks owned by each sequence for its new positions */
    for (int32_t i = 0, row = 0; i < n; i++)
        c->logit_row[i] = (want ? want[i] != 0 : i == n - 1) ? row++ : -1;
    c->n_entries = 0; /* logits are invalid until the whole batch ran */
    c->last_logits = -1;
    if (c->deferred) { /* another backend runs it: record, and wait for its logits */
        int rc = wlm_deferred_record(c, tokens, seq_ids, n);
        if (rc != WLM_OK) return rc;
        if (c->dfr_accum) { /* a media prompt's piece appended: its batch wants no logits */
            const int32_t all = c->dfr_n;
            if (all > c->n_entries_cap) {
                int32_t *r = realloc(c->logit_row, sizeof(int32_t) * (size_t)all);
                if (!r) return wlm_set_error(c->errmsg, WLM_ERR_NOMEM, "out of memory for the batch");
                c->logit_row = r;
                c->n_entries_cap = all;
            }
            for (int32_t i = 0; i < all; i++) c->logit_row[i] = -1;
            n = all;
        }
        c->n_entries = n;
        c->last_logits = n - 1;
        return WLM_OK;
    }
    int32_t added[WLM_MAX_SEQ] = {0};
    for (int32_t i = 0; i < n; i++) added[SEQ(i)]++;
    for (int32_t sq = 0; sq < c->n_seq_max; sq++) {
        if (!added[sq]) continue;
        wlm_seq *s = &c->seqs[sq];
        int rc = wlm_kv_reserve(c, sq, s->n_past, s->n_past + added[sq]);
        if (rc == WLM_OK) rc = state_alloc(c, s);
        if (rc != WLM_OK) return rc;
        if (s->state) { /* a recurrent state: empty at position 0; snapshots past n_past are
                           of tokens about to be replaced */
            if (s->n_past == 0) memset(s->state, 0, state_bytes(c));
            for (int j = 0; j < WLM_STATE_SNAPS; j++)
                if (s->snap_pos[j] > s->n_past) s->snap_pos[j] = -1;
        }
    }
    int32_t next_pos[WLM_MAX_SEQ];
    for (int32_t sq = 0; sq < c->n_seq_max; sq++) next_pos[sq] = c->seqs[sq].n_past;
    /* a non-causal image's rows (wlm_eval_embd: batch_cap holds them) pass together */
    const int32_t step = c->image_batch ? n : c->chunk;
    for (int32_t i0 = 0; i0 < n; i0 += step) {
        const int32_t m = n - i0 < step ? n - i0 : step;
        for (int32_t j = 0; j < m; j++) {
            const int32_t sq = SEQ(i0 + j);
            c->ent_seq[j] = sq;
            c->ent_pos[j] = next_pos[sq];
            mrope_entry(c, j, sq, next_pos[sq]);
            c->seqs[sq].tokens[next_pos[sq]] = tokens[i0 + j];
            next_pos[sq]++;
        }
        wlm_forward_batch(c, tokens + i0, m, c->logit_row + i0);
        /* after each chunk the sequences include it (attention of the next chunk reads it) */
        for (int32_t j = 0; j < m; j++) c->seqs[c->ent_seq[j]].n_past = c->ent_pos[j] + 1;
    }
    c->n_entries = n;
    c->last_logits = n - 1;
    return WLM_OK;
}

int wlm_eval_entries(wlm_context *c, const int32_t *tokens, const int32_t *seq_ids,
                     const uint8_t *want, int32_t n) {
    if (!tokens || n < 1)
        return wlm_set_error(c->errmsg, WLM_ERR_INVALID_ARG, "no tokens to evaluate");
    if (c->model->hp.bidirectional || !c->model->w.wcls.data)
        return wlm_set_error(c->errmsg, WLM_ERR_UNSUPPORTED,
                             "%s is an embedding model (%s, no next-token classifier): it cannot "
                             "generate or give logits; use wlm_embed",
                             c->model->hp.arch->name,
                             c->model->hp.bidirectional ? "bidirectional attention" : "no output layer");
    const int32_t vocab = c->model->hp.vocab_size;
    int32_t added[WLM_MAX_SEQ] = {0};
    for (int32_t i = 0; i < n; i++) {
        if (tokens[i] < 0 || tokens[i] >= vocab)
            return wlm_set_error(c->errmsg, WLM_ERR_INVALID_ARG,
                                 "token id %d at index %d is outside the vocabulary 0..%d",
                                 (int)tokens[i], (int)i, (int)vocab - 1);
        if (SEQ(i) < 0 || SEQ(i) >= c->n_seq_max)
            return wlm_set_error(c->errmsg, WLM_ERR_INVALID_ARG,
                                 "sequence id %d at index %d is outside 0..%d (n_seq_max %d)",
                                 (int)SEQ(i), (int)i, (int)c->n_seq_max - 1,
                                 (int)c->n_seq_max);
        added[SEQ(i)]++;
    }
    for (int32_t sq = 0; sq < c->n_seq_max; sq++)
        if (added[sq] > c->n_ctx - c->seqs[sq].n_past)
            return wlm_set_error(c->errmsg, WLM_ERR_CONTEXT_FULL,
                                 "%d tokens do not fit: %d of the context's %d positions are "
                                 "used (sequence %d)",
                                 (int)added[sq], (int)c->seqs[sq].n_past, (int)c->n_ctx, (int)sq);
    if (c->kv_cache) return run_entries(c, tokens, seq_ids, want, n);

    /* No cache: recompute the whole sequence (one sequence only) from position 0. */
    const int32_t sq = SEQ(0);
    for (int32_t i = 1; i < n; i++)
        if (SEQ(i) != sq)
            return wlm_set_error(c->errmsg, WLM_ERR_STATE,
                                 "a context without KV cache evaluates one sequence at a time");
    wlm_seq *s = &c->seqs[sq];
    const int32_t old = s->n_past, total = old + n;
    int32_t *all = malloc(sizeof(int32_t) * (size_t)total * 2);
    uint8_t *w = calloc((size_t)total, 1);
    if (!all || !w) {
        free(all);
        free(w);
        return wlm_set_error(c->errmsg, WLM_ERR_NOMEM, "out of memory for the batch");
    }
    memcpy(all, s->tokens, sizeof(int32_t) * (size_t)old);
    memcpy(all + old, tokens, sizeof(int32_t) * (size_t)n);
    for (int32_t i = 0; i < total; i++) all[total + i] = sq;
    for (int32_t i = 0; i < n; i++) w[old + i] = want ? want[i] != 0 : i == n - 1;
    s->n_past = 0;
    int rc = run_entries(c, all, all + total, w, total);
    if (rc == WLM_OK) { /* report the rows under the caller's entry numbers */
        memmove(c->logit_row, c->logit_row + old, sizeof(int32_t) * (size_t)n);
        c->n_entries = n;
        c->last_logits = n - 1;
    } else {
        s->n_past = old;
    }
    free(all);
    free(w);
    return rc;
}

int wlm_eval_batch(wlm_context *ctx, const int32_t *tokens, const int32_t *seq_ids,
                   const uint8_t *want_logits, int32_t n) {
    if (!ctx) return WLM_ERR_INVALID_ARG;
    ctx->errmsg[0] = '\0';
    if (!ctx->model) return wlm_set_error(ctx->errmsg, WLM_ERR_STATE, "context has no model");
    int rc = busy(ctx);
    if (rc != WLM_OK) return rc;
    return wlm_eval_entries(ctx, tokens, seq_ids, want_logits, n);
}

int wlm_eval(wlm_context *ctx, const int32_t *tokens, int32_t n) {
    if (!ctx) return WLM_ERR_INVALID_ARG;
    ctx->errmsg[0] = '\0';
    if (!ctx->model) return wlm_set_error(ctx->errmsg, WLM_ERR_STATE, "context has no model");
    return wlm_eval_entries(ctx, tokens, NULL, NULL, n); /* all on sequence 0 */
}

int wlm_eval_embd(wlm_context *ctx, int32_t seq, const float *embd, int32_t n, int32_t n_embd,
                  int32_t non_causal) {
    return wlm_eval_embd_grid(ctx, seq, embd, n, n_embd, non_causal, 0, 0);
}

int wlm_eval_embd_grid(wlm_context *ctx, int32_t seq, const float *embd, int32_t n,
                       int32_t n_embd, int32_t non_causal, int32_t gw, int32_t gh) {
    if (!ctx) return WLM_ERR_INVALID_ARG;
    ctx->errmsg[0] = '\0';
    wlm_context *c = ctx;
    int rc = check_seq(c, seq, "wlm_eval_embd");
    if (rc == WLM_OK) rc = busy(c);
    if (rc != WLM_OK) return rc;
    const wlm_hparams *p = &c->model->hp;
    if (!embd || n < 1 || n_embd != p->dim || (non_causal != 0 && non_causal != 1) || gw < 0 ||
        gh < 0 || (gw > 0 && (int64_t)gw * gh != n))
        return wlm_set_error(c->errmsg, WLM_ERR_INVALID_ARG,
                             "wlm_eval_embd: %s (rows %d of width %d; the model's width is %d, "
                             "non_causal %d)", !embd ? "embd is NULL" : "bad arguments", (int)n,
                             (int)n_embd, (int)p->dim, (int)non_causal);
    if (p->bidirectional || !c->model->w.wcls.data)
        return wlm_set_error(c->errmsg, WLM_ERR_UNSUPPORTED,
                             "%s is an embedding model: it takes no image rows", p->arch->name);
    /* a recurrent hybrid (LFM2) takes causal rows: its conv / recurrent state runs over them
     * as over tokens; rows that see each other both ways have no meaning there */
    if (!c->kv_cache || (p->state_floats && non_causal))
        return wlm_set_error(c->errmsg, WLM_ERR_UNSUPPORTED,
                             "image rows need a context with a KV cache%s",
                             p->state_floats ? " and, on a recurrent hybrid, causal rows" : "");
    wlm_seq *s = &c->seqs[seq];
    if (n > c->n_ctx - s->n_past)
        return wlm_set_error(c->errmsg, WLM_ERR_CONTEXT_FULL,
                             "%d image rows do not fit: %d of the context's %d positions are used",
                             (int)n, (int)s->n_past, (int)c->n_ctx);
    for (size_t i = 0; i < (size_t)n * (size_t)n_embd; i++)
        if (!isfinite(embd[i]))
            return wlm_set_error(c->errmsg, WLM_ERR_INVALID_ARG,
                                 "wlm_eval_embd: row %d holds a non-finite value", (int)(i / (size_t)n_embd));
    if (non_causal && n > c->batch_cap && !c->deferred) {
        /* rows that see each other both ways pass together (Gemma 3's 256): the pass buffers
         * grow to hold them, and stay grown for the next image */
        const int32_t old = c->batch_cap;
        const size_t before = c->pass_bytes;
        size_t grown = 0;
        if (pass_buffers(c, (uint64_t)n, &grown) != WLM_OK) {
            size_t back = 0;
            const int again = pass_buffers(c, (uint64_t)old, &back);
            c->bytes = c->bytes - before + (again == WLM_OK ? back : 0);
            return wlm_set_error(c->errmsg, WLM_ERR_NOMEM,
                                 "out of memory for one pass of the image's %d rows (they see each "
                                 "other both ways, so they pass together)%s", (int)n,
                                 again == WLM_OK ? "" : "; the context has no pass buffers left");
        }
        c->bytes = c->bytes - before + grown;
    }
    int32_t *len = non_causal ? malloc(sizeof(int32_t) * (size_t)n) : NULL;
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)n * 2); /* ids, then sequence ids */
    uint8_t *want = calloc((size_t)n, 1);
    if (!tok || !want || (non_causal && !len)) {
        free(len), free(tok), free(want);
        return wlm_set_error(c->errmsg, WLM_ERR_NOMEM, "out of memory for the image rows");
    }
    for (int32_t i = 0; i < n; i++) tok[i] = WLM_TOKEN_EMBD, tok[n + i] = seq;
    want[n - 1] = 1;
    /* run_entries in chunks of WLM_BATCH_CHUNK, a non-causal image in one pass of all its rows:
     * the rows of each chunk are the input; every row sees the image up to its end when
     * non-causal */
    const int32_t end = s->n_past + n;
    for (int32_t i = 0; non_causal && i < n; i++) len[i] = end;
    c->ent_len = len;
    c->image_batch = non_causal;
    c->in_img_gw = gw, c->in_img_gh = gh, c->in_img_row = 0;
    rc = WLM_OK;
    const int32_t step = non_causal ? n : WLM_BATCH_CHUNK;
    for (int32_t i0 = 0; i0 < n && rc == WLM_OK; i0 += step) {
        const int32_t m = n - i0 < step ? n - i0 : step;
        c->in_embd = embd + (size_t)i0 * (size_t)n_embd;
        rc = run_entries(c, tok + i0, tok + n + i0, want + i0, m);
    }
    c->in_embd = NULL;
    c->ent_len = NULL;
    c->image_batch = 0;
    c->in_img_gw = c->in_img_gh = c->in_img_row = 0;
    free(len), free(tok), free(want);
    return rc;
}

const float *wlm_logits_ith(const wlm_context *ctx, int32_t i) {
    if (!ctx || i < 0 || i >= ctx->n_entries || ctx->logit_row[i] < 0) return NULL;
    if (ctx->dfr_n > 0) return NULL; /* deferred: the logits have not arrived */
    return ctx->logits + (size_t)ctx->logit_row[i] * (size_t)ctx->model->hp.vocab_size;
}

const float *wlm_logits(const wlm_context *ctx) {
    return ctx ? wlm_logits_ith(ctx, ctx->last_logits) : NULL;
}
