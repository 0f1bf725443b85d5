/*
 * test_batch.c — sequences, batches, beams and context shift on stories260K: batched prefill
 * and multi-sequence batches give logits bitwise equal to one-token-at-a-time evaluation;
 * forked sequences share KV blocks and copy on write; batched generation equals each sequence
 * generated alone, and so does a sequence added to a running batch or ended in it (continuous
 * batching); beam search (W = 1 is greedy; W = 4 finds a total log-probability at least
 * greedy's; every reported log-probability equals a recomputation); context full and context
 * shift (the shifted keys equal keys computed at the new positions). Everything runs with the
 * default F16 KV cache, and the bitwise and shift checks again with the F32 cache.
 * Uses wasmlm.h, plus model.h for the KV rows in the shift test.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "wasmlm.h"
#include "test_util.h"

static unsigned char *model_bytes, *tok_bytes;
static size_t model_size, tok_size;
static int32_t kv_type = WLM_KV_F16; /* of every context new_ctx creates */

static wlm_model *load_model(void) {
    wlm_model *m = NULL;
    int rc = wlm_model_load(model_bytes, model_size, 0, &m);
    if (rc == WLM_OK) rc = wlm_model_load_tokenizer(m, tok_bytes, tok_size);
    CHECKF(rc == WLM_OK, "load: %s %s", wlm_status_name(rc), m ? wlm_model_errmsg(m) : "");
    if (rc != WLM_OK) {
        wlm_model_free(m);
        return NULL;
    }
    return m;
}

static wlm_context *new_ctx(const wlm_model *m, int n_ctx, int n_seq, int simd) {
    return tu_context(m, n_ctx, n_seq, simd, kv_type);
}

static int32_t tokenize(const wlm_model *m, const char *text, int32_t *out, int32_t cap) {
    int32_t n = wlm_tokenize(m, text, strlen(text), 1, out, cap);
    CHECKF(n > 0 && n <= cap, "tokenize '%s': %d", text, (int)n);
    return n;
}

static const char *PROMPTS[] = {"Once upon a time", "The cat", "Lily wanted to play with her ball",
                                "One day, a little dog"};
#define N_PROMPTS 4

/* ------------------------------------------------------------------------------------------ */

static void test_batched_prefill(const wlm_model *m, int simd) {
    tu_section(simd ? "batched prefill == token by token (simd)" : "batched prefill (scalar)");
    int32_t toks[64];
    int32_t n = tokenize(m, "Lily wanted to play with her ball in the park", toks, 64);
    wlm_context *a = new_ctx(m, 128, 1, simd), *b = new_ctx(m, 128, 1, simd);
    if (!a || !b) goto out;
    for (int32_t i = 0; i < n; i++) CHECK_STATUS(wlm_eval(a, &toks[i], 1), WLM_OK);
    CHECK_STATUS(wlm_eval(b, toks, n), WLM_OK);
    CHECK(wlm_logits(a) && wlm_logits(b) && memcmp(wlm_logits(a), wlm_logits(b), 512 * 4) == 0);
    /* then one more token on each: the caches written by the two paths are identical */
    int32_t t = 42;
    CHECK_STATUS(wlm_eval(a, &t, 1), WLM_OK);
    CHECK_STATUS(wlm_eval(b, &t, 1), WLM_OK);
    CHECK(memcmp(wlm_logits(a), wlm_logits(b), 512 * 4) == 0);
    CHECK_EQ_INT(wlm_context_n_past(b), n + 1);
out:
    wlm_context_free(a);
    wlm_context_free(b);
}

/* Several sequences interleaved in one batch, every entry asking for logits. */
static void test_multi_sequence(const wlm_model *m) {
    tu_section("multi-sequence batch == separate contexts");
    int32_t toks[N_PROMPTS][64], n[N_PROMPTS];
    for (int i = 0; i < N_PROMPTS; i++) n[i] = tokenize(m, PROMPTS[i], toks[i], 64);
    wlm_context *batch = new_ctx(m, 96, N_PROMPTS, 1);
    if (!batch) return;
    /* interleave: round-robin over the prompts */
    int32_t bt[256], bs[256], pos[N_PROMPTS] = {0}, nb = 0, more = 1;
    uint8_t want[256];
    while (more) {
        more = 0;
        for (int i = 0; i < N_PROMPTS; i++)
            if (pos[i] < n[i]) {
                bt[nb] = toks[i][pos[i]++];
                bs[nb] = i;
                want[nb] = 1;
                nb++;
                more = 1;
            }
    }
    CHECK_STATUS(wlm_eval_batch(batch, bt, bs, want, nb), WLM_OK);
    int bad = 0;
    for (int i = 0; i < N_PROMPTS; i++) {
        CHECK_EQ_INT(wlm_seq_n_past(batch, i), n[i]);
        wlm_context *one = new_ctx(m, 96, 1, 1);
        if (!one) continue;
        int seen = 0;
        for (int e = 0; e < nb; e++) {
            if (bs[e] != i) continue;
            CHECK_STATUS(wlm_eval(one, &bt[e], 1), WLM_OK);
            const float *l = wlm_logits_ith(batch, e);
            bad += !l || memcmp(l, wlm_logits(one), 512 * 4) != 0;
            seen++;
        }
        CHECK_EQ_INT(seen, n[i]);
        wlm_context_free(one);
    }
    CHECKF(bad == 0, "%d entries differ from one-at-a-time evaluation", bad);
    /* errors leave everything as it was */
    int32_t t = 5, s = N_PROMPTS;
    CHECK_STATUS(wlm_eval_batch(batch, &t, &s, NULL, 1), WLM_ERR_INVALID_ARG);
    CHECK(strstr(wlm_context_errmsg(batch), "sequence id") != NULL);
    int32_t many[100], zeros[100] = {0};
    for (int i = 0; i < 100; i++) many[i] = 7;
    CHECK_STATUS(wlm_eval_batch(batch, many, zeros, NULL, 100), WLM_ERR_CONTEXT_FULL);
    CHECK_EQ_INT(wlm_seq_n_past(batch, 0), n[0]);
    wlm_context_free(batch);
}

static void test_fork(const wlm_model *m) {
    tu_section("fork shares blocks, copy on write");
    int32_t toks[64];
    int32_t n = tokenize(m, "Once upon a time, there was a little girl named Lily", toks, 64);
    wlm_context *c = new_ctx(m, 128, 3, 1), *ref = new_ctx(m, 128, 1, 1);
    if (!c || !ref) goto out;
    CHECK_STATUS(wlm_eval(c, toks, n), WLM_OK);
    CHECK_STATUS(wlm_seq_fork(c, 0, 1), WLM_OK);
    CHECK_STATUS(wlm_seq_fork(c, 0, 2), WLM_OK);
    wlm_kv_stats st;
    CHECK_STATUS(wlm_kv_stats_get(c, &st), WLM_OK);
    const int32_t nblk = (n + WLM_KV_BLOCK - 1) / WLM_KV_BLOCK;
    /* stories260K: 5 layers, kv_dim 32; 2 bytes an element in F16, 4 in F32 */
    CHECK_EQ_INT(st.block_bytes, 5u * 2 * WLM_KV_BLOCK * 32 * (kv_type == WLM_KV_F16 ? 2 : 4));
    CHECK_EQ_INT(st.blocks_used, nblk);
    CHECK_EQ_INT(st.blocks_shared, nblk);
    CHECK_EQ_INT(st.block_refs, 3 * nblk);
    /* each sequence continues differently */
    int32_t next[3] = {10, 20, 30}, seqs[3] = {0, 1, 2};
    uint8_t want[3] = {1, 1, 1};
    CHECK_STATUS(wlm_eval_batch(c, next, seqs, want, 3), WLM_OK);
    CHECK_STATUS(wlm_kv_stats_get(c, &st), WLM_OK);
    /* the full blocks stay shared; only a partly filled last block is copied */
    const int partial = n % WLM_KV_BLOCK != 0;
    CHECK_EQ_INT(st.blocks_used, nblk + (partial ? 2 : 0) + (n % WLM_KV_BLOCK == 0 ? 3 : 0));
    CHECK_STATUS(wlm_eval(ref, toks, n), WLM_OK);
    int bad = 0;
    for (int s = 0; s < 3; s++) {
        wlm_context_reset(ref);
        CHECK_STATUS(wlm_eval(ref, toks, n), WLM_OK);
        CHECK_STATUS(wlm_eval(ref, &next[s], 1), WLM_OK);
        bad += memcmp(wlm_logits_ith(c, s), wlm_logits(ref), 512 * 4) != 0;
    }
    CHECKF(bad == 0, "%d forked sequences differ", bad);
    CHECK_STATUS(wlm_seq_clear(c, 1), WLM_OK);
    CHECK_STATUS(wlm_seq_clear(c, 2), WLM_OK);
    CHECK_EQ_INT(wlm_seq_n_past(c, 1), 0);
    CHECK_STATUS(wlm_kv_stats_get(c, &st), WLM_OK);
    CHECK_EQ_INT(st.blocks_shared, 0);
    CHECK_EQ_INT(st.blocks_used, (n + 1 + WLM_KV_BLOCK - 1) / WLM_KV_BLOCK);
    CHECK_STATUS(wlm_seq_fork(c, 0, 9), WLM_ERR_INVALID_ARG);
out:
    wlm_context_free(c);
    wlm_context_free(ref);
}

/* Collects a generation's ids; returns the count. */
static int run_single(wlm_context *c, const int32_t *toks, int32_t n, const wlm_gen_params *gp,
                      int32_t *out, int cap, int32_t *reason) {
    int k = 0, rc;
    wlm_token t;
    if (wlm_generate_begin(c, toks, n, gp) != WLM_OK) return -1;
    while ((rc = wlm_generate_next(c, &t)) == WLM_OK)
        if (k < cap) out[k++] = t.id;
    *reason = t.stop_reason;
    return rc == WLM_DONE ? k : -1;
}

static void test_batch_generation(const wlm_model *m) {
    tu_section("batched generation == each sequence alone");
    int32_t toks[N_PROMPTS + 2][64], n[N_PROMPTS + 2];
    const int32_t *pp[N_PROMPTS + 2];
    wlm_gen_params gp[N_PROMPTS + 2];
    for (int i = 0; i < N_PROMPTS + 2; i++) {
        /* the last two repeat prompt 0: n samples of one prompt, forked not re-evaluated */
        n[i] = tokenize(m, PROMPTS[i < N_PROMPTS ? i : 0], toks[i], 64);
        pp[i] = toks[i];
        wlm_gen_params_default(&gp[i]);
        gp[i].max_tokens = 30 + 7 * i;
        gp[i].seed = 1000 + (uint64_t)i;
        gp[i].temperature = i == 1 ? 0.0f : 0.9f;
        gp[i].top_k = i == 2 ? 20 : 0;
        gp[i].n_probs = 3;
    }
    snprintf(gp[3].stop[0], WLM_MAX_STOP_LEN, "%s", ".");
    gp[3].n_stop = 1;
    enum { NS = N_PROMPTS + 2 };
    wlm_context *c = new_ctx(m, 256, NS, 1);
    if (!c) return;
    CHECK_STATUS(wlm_generate_batch_begin(c, NS, pp, n, gp), WLM_OK);
    wlm_kv_stats st;
    wlm_kv_stats_get(c, &st);
    CHECKF(st.blocks_shared >= 1, "repeated prompts share blocks (%d shared)", (int)st.blocks_shared);
    int32_t got[NS][400];
    int cnt[NS], ended[NS];
    int32_t reason[NS];
    memset(cnt, 0, sizeof cnt);
    memset(ended, 0, sizeof ended);
    wlm_token out[NS];
    int rc, steps = 0;
    while ((rc = wlm_generate_batch_next(c, out)) == WLM_OK && steps < 1000) {
        steps++;
        for (int i = 0; i < NS; i++) {
            CHECK_EQ_INT(out[i].seq, i);
            if (out[i].status == WLM_OK) {
                if (cnt[i] < 400) got[i][cnt[i]++] = out[i].id;
                CHECK(!ended[i]);
            } else if (!ended[i]) {
                ended[i] = 1;
                reason[i] = out[i].stop_reason;
            }
        }
    }
    CHECK_STATUS(rc, WLM_DONE);
    for (int i = 0; i < NS; i++)
        if (!ended[i]) reason[i] = out[i].stop_reason, ended[i] = 1;
    wlm_context *one = new_ctx(m, 256, 1, 1);
    for (int i = 0; one && i < NS; i++) {
        int32_t ids[400], r = -1;
        int k = run_single(one, toks[i], n[i], &gp[i], ids, 400, &r);
        CHECKF(k == cnt[i] && memcmp(ids, got[i], sizeof(int32_t) * (size_t)k) == 0,
               "sequence %d: batch gave %d tokens, alone %d (or different ids)", i, cnt[i], k);
        CHECK_EQ_INT(reason[i], r);
    }
    CHECKF(cnt[4] != cnt[5] || memcmp(got[4], got[5], sizeof(int32_t) * (size_t)cnt[4]) != 0,
           "two samples of one prompt with different seeds are identical");
    /* parameter errors name the sequence */
    gp[2].top_p = 2.0f;
    CHECK_STATUS(wlm_generate_batch_begin(c, NS, pp, n, gp), WLM_ERR_INVALID_ARG);
    CHECKF(strstr(wlm_context_errmsg(c), "sequence 2") != NULL, "message: %s",
           wlm_context_errmsg(c));
    CHECK_STATUS(wlm_generate_batch_begin(c, NS + 1, pp, n, gp), WLM_ERR_INVALID_ARG);
    wlm_context_free(one);
    wlm_context_free(c);
}


/* Continuous batching: sequences added to a running batch (wlm_generate_batch_add) and ended
 * in it (wlm_generate_batch_end) generate bitwise what they generate alone. */
enum { JOIN_CAP = 400 };
typedef struct {
    int32_t ids[JOIN_CAP];
    int cnt, ended;
    int32_t reason;
} join_seq;

/* One batch step into the per-slot records of `who` (slot -> record, NULL: untracked). */
static int join_step(wlm_context *c, wlm_token *out, join_seq **who, int n_slots) {
    int rc = wlm_generate_batch_next(c, out);
    if (rc < 0) return rc;
    for (int i = 0; i < n_slots; i++) {
        join_seq *r = who[i];
        if (!r || r->ended) continue;
        CHECK_EQ_INT(out[i].seq, i);
        if (out[i].status == WLM_OK) {
            if (r->cnt < JOIN_CAP) r->ids[r->cnt++] = out[i].id;
        } else {
            r->ended = 1;
            r->reason = out[i].stop_reason;
        }
    }
    return rc;
}

static void test_batch_join(const wlm_model *m) {
    tu_section("continuous batching: added and ended sequences == each alone");
    enum { NP = N_PROMPTS, SLOTS = 3 };
    int32_t toks[NP][64], n[NP];
    wlm_gen_params gp[NP];
    for (int i = 0; i < NP; i++) {
        n[i] = tokenize(m, PROMPTS[i], toks[i], 64);
        wlm_gen_params_default(&gp[i]);
        gp[i].max_tokens = 25 + 6 * i;
        gp[i].seed = 77 + (uint64_t)i;
        gp[i].temperature = i == 1 ? 0.0f : 0.8f; /* greedy and seeded sampling */
        gp[i].top_k = i == 2 ? 12 : 0;
    }
    snprintf(gp[3].stop[0], WLM_MAX_STOP_LEN, "%s", "and");
    gp[3].n_stop = 1;
    /* each alone */
    join_seq alone[NP];
    wlm_context *one = new_ctx(m, 256, 1, 1);
    wlm_context *c = new_ctx(m, 256, SLOTS, 1);
    if (!one || !c) goto out;
    for (int i = 0; i < NP; i++) {
        alone[i].cnt =
            run_single(one, toks[i], n[i], &gp[i], alone[i].ids, JOIN_CAP, &alone[i].reason);
        CHECK(alone[i].cnt > 3);
    }
    /* errors before any batch */
    wlm_token out[SLOTS];
    CHECK_STATUS(wlm_generate_batch_add(c, toks[0], n[0], &gp[0]), WLM_ERR_STATE);
    CHECKF(strstr(wlm_context_errmsg(c), "no batch") != NULL, "message: %s", wlm_context_errmsg(c));
    CHECK_STATUS(wlm_generate_batch_end(c, 0), WLM_ERR_STATE);

    join_seq got[NP + 1];
    memset(got, 0, sizeof got);
    join_seq *who[SLOTS] = {NULL, NULL, NULL};
    const int32_t *p0 = toks[0];
    CHECK_STATUS(wlm_generate_batch_begin(c, 1, &p0, &n[0], &gp[0]), WLM_OK);
    who[0] = &got[0];
    for (int k = 0; k < 2; k++) CHECK_STATUS(join_step(c, out, who, 1), WLM_OK);
    /* prompt 1 joins at slot 1: its first token comes with the next step */
    CHECK_STATUS(wlm_generate_batch_add(c, toks[1], n[1], &gp[1]), 1);
    who[1] = &got[1];
    CHECK_STATUS(join_step(c, out, who, 2), WLM_OK);
    CHECK_EQ_INT(got[1].cnt, 1);
    CHECK_EQ_INT(got[0].cnt, 3);
    CHECK_EQ_INT(wlm_seq_n_past(c, 1), n[1]); /* prefilled; its token is evaluated next step */
    for (int k = 0; k < 2; k++) CHECK_STATUS(join_step(c, out, who, 2), WLM_OK);
    /* prompt 2 at slot 2; then the context is full */
    CHECK_STATUS(wlm_generate_batch_add(c, toks[2], n[2], &gp[2]), 2);
    who[2] = &got[2];
    CHECK_STATUS(wlm_generate_batch_add(c, toks[3], n[3], &gp[3]), WLM_ERR_STATE);
    CHECKF(strstr(wlm_context_errmsg(c), "no slot") != NULL, "message: %s", wlm_context_errmsg(c));
    /* bad input names the slot and changes nothing */
    gp[3].top_p = 3.0f;
    wlm_generate_batch_end(c, 2); /* (frees slot 2 for the check; prompt 2 joins again below) */
    CHECK_STATUS(wlm_generate_batch_add(c, toks[3], n[3], &gp[3]), WLM_ERR_INVALID_ARG);
    CHECKF(strstr(wlm_context_errmsg(c), "sequence 2") != NULL, "message: %s",
           wlm_context_errmsg(c));
    gp[3].top_p = 0.9f;
    CHECK_STATUS(wlm_generate_batch_add(c, toks[3], 0, &gp[3]), WLM_ERR_INVALID_ARG);
    CHECK_STATUS(wlm_generate_batch_add(c, toks[2], n[2], &gp[2]), 2);
    CHECK_STATUS(wlm_generate_batch_end(c, 3), WLM_ERR_INVALID_ARG);
    CHECK_STATUS(wlm_generate_batch_end(c, -1), WLM_ERR_INVALID_ARG);
    for (int k = 0; k < 3; k++) CHECK_STATUS(join_step(c, out, who, 3), WLM_OK);
    /* slot 1 leaves mid-way: its cache is freed at once, and prompt 3 takes its slot */
    wlm_kv_stats before, after;
    wlm_kv_stats_get(c, &before);
    CHECK(!got[1].ended && got[1].cnt == 6);
    CHECK_STATUS(wlm_generate_batch_end(c, 1), WLM_OK);
    wlm_kv_stats_get(c, &after);
    CHECK_EQ_INT(wlm_seq_n_past(c, 1), 0);
    CHECKF(after.block_refs < before.block_refs, "block refs %d -> %d", (int)before.block_refs,
           (int)after.block_refs);
    CHECK_STATUS(join_step(c, out, who, 3), WLM_OK); /* slot 1 reports its end */
    CHECK(got[1].ended && got[1].reason == WLM_STOP_ABORTED && got[1].cnt == 6);
    CHECK(memcmp(got[1].ids, alone[1].ids, sizeof(int32_t) * 6) == 0); /* alone's, so far */
    CHECK_STATUS(wlm_generate_batch_add(c, toks[3], n[3], &gp[3]), 1);
    who[1] = &got[3];
    int rc, steps = 0;
    while ((rc = join_step(c, out, who, 3)) == WLM_OK && steps++ < 1000) {
        if (got[0].ended && who[0] == &got[0]) { /* a finished slot is reused: prompt 0 again */
            CHECK_STATUS(wlm_generate_batch_add(c, toks[0], n[0], &gp[0]), 0);
            who[0] = &got[NP];
        }
    }
    CHECK_STATUS(rc, WLM_DONE);
    CHECK(who[0] == &got[NP]);
    /* after the batch's WLM_DONE it still runs: one more joins */
    memset(&got[1], 0, sizeof got[1]);
    CHECK_STATUS(wlm_generate_batch_add(c, toks[1], n[1], &gp[1]), 0);
    who[0] = &got[1];
    who[1] = who[2] = NULL;
    steps = 0;
    while ((rc = join_step(c, out, who, 1)) == WLM_OK && steps++ < 1000) {}
    CHECK_STATUS(rc, WLM_DONE);
    /* everything equals the sequence alone (the one ended early: a prefix of it) */
    for (int i = 0; i <= NP; i++) {
        const join_seq *a = &alone[i < NP ? i : 0], *g = &got[i];
        CHECKF(g->ended && g->cnt == a->cnt &&
                   memcmp(g->ids, a->ids, sizeof(int32_t) * (size_t)a->cnt) == 0,
               "joined sequence %d: %d tokens, alone %d (or different ids)", i, g->cnt, a->cnt);
        CHECK_EQ_INT(g->reason, a->reason);
    }
    /* added right after begin, before any step: begin's sequence samples from its prefill's
     * logits, which the joining prompt's evaluation replaces */
    memset(got, 0, sizeof got);
    const int32_t *p2 = toks[2];
    CHECK_STATUS(wlm_generate_batch_begin(c, 1, &p2, &n[2], &gp[2]), WLM_OK);
    CHECK_STATUS(wlm_generate_batch_add(c, toks[3], n[3], &gp[3]), 1);
    who[0] = &got[2];
    who[1] = &got[3];
    steps = 0;
    while ((rc = join_step(c, out, who, 2)) == WLM_OK && steps++ < 1000) {}
    CHECK_STATUS(rc, WLM_DONE);
    for (int i = 2; i < 4; i++)
        CHECKF(got[i].cnt == alone[i].cnt &&
                   memcmp(got[i].ids, alone[i].ids, sizeof(int32_t) * (size_t)alone[i].cnt) == 0,
               "sequence %d added before the first step: %d tokens, alone %d", i, got[i].cnt,
               alone[i].cnt);
    wlm_generate_abort(c);
    CHECK_STATUS(wlm_generate_batch_next(c, out), WLM_DONE);
    CHECK_STATUS(wlm_generate_batch_add(c, toks[0], n[0], &gp[0]), WLM_ERR_STATE);
out:
    wlm_context_free(one);
    wlm_context_free(c);
}

/* ------------------------------------------------------------------------------------------ */

/* Sum of ln p along `gen` after the prompt, recomputed with a fresh context. */
static double recompute_logprob(const wlm_model *m, const int32_t *prompt, int32_t n,
                                const int32_t *gen, int32_t ng, int eos_end) {
    wlm_context *c = new_ctx(m, 512, 1, 1);
    if (!c) return NAN;
    double lp = 0.0;
    wlm_eval(c, prompt, n);
    for (int32_t i = 0; i <= ng; i++) {
        int32_t t = i < ng ? gen[i] : 2; /* EOS scored at the end when the beam ended on it */
        if (i == ng && !eos_end) break;
        const float *z = wlm_logits(c);
        double mx = z[0], s = 0.0;
        for (int v = 1; v < 512; v++) mx = z[v] > mx ? z[v] : mx;
        for (int v = 0; v < 512; v++) s += exp(z[v] - mx);
        lp += z[t] - mx - log(s);
        if (i < ng) wlm_eval(c, &t, 1);
    }
    wlm_context_free(c);
    return lp;
}

static void run_beam(wlm_context *c, const int32_t *toks, int32_t n, int W, int max_tokens,
                     float alpha) {
    wlm_beam_params bp;
    wlm_beam_params_default(&bp);
    bp.width = W;
    bp.max_tokens = max_tokens;
    bp.length_penalty = alpha;
    CHECK_STATUS(wlm_beam_begin(c, toks, n, &bp), WLM_OK);
    int rc, steps = 0;
    while ((rc = wlm_beam_step(c)) == WLM_OK && steps < 10000) steps++;
    CHECK_STATUS(rc, WLM_DONE);
}

static void test_beam(const wlm_model *m) {
    tu_section("beam search");
    int32_t toks[64];
    int32_t n = tokenize(m, "Once upon a time", toks, 64);
    wlm_context *c = new_ctx(m, 512, 8, 1), *g = new_ctx(m, 512, 1, 1);
    if (!c || !g) goto out;
    enum { MAXT = 60 };
    /* greedy */
    wlm_gen_params gp;
    wlm_gen_params_default(&gp);
    gp.temperature = 0.0f;
    gp.max_tokens = MAXT;
    int32_t greedy[MAXT], reason = 0;
    int ng = run_single(g, toks, n, &gp, greedy, MAXT, &reason);
    CHECK(ng > 0);
    /* W = 1 is greedy, token for token */
    run_beam(c, toks, n, 1, MAXT, 1.0f);
    CHECK_EQ_INT(wlm_beam_count(c), 1);
    wlm_beam b1;
    CHECK_STATUS(wlm_beam_get(c, 0, &b1), WLM_OK);
    CHECKF(b1.n_tokens == ng && memcmp(b1.tokens, greedy, sizeof(int32_t) * (size_t)ng) == 0,
           "W=1 gave %d tokens, greedy %d", (int)b1.n_tokens, ng);
    const double greedy_lp = recompute_logprob(m, toks, n, greedy, ng, reason == WLM_STOP_EOS);
    CHECK_NEAR(b1.logprob, greedy_lp, 1e-3);
    /* W = 4, ranked by total log-probability: at least greedy's */
    run_beam(c, toks, n, 4, MAXT, 0.0f);
    const int32_t nb = wlm_beam_count(c);
    CHECK_EQ_INT(nb, 4);
    wlm_beam best;
    CHECK_STATUS(wlm_beam_get(c, 0, &best), WLM_OK);
    CHECKF(best.logprob >= greedy_lp - 1e-4, "best beam %.4f < greedy %.4f", (double)best.logprob,
           greedy_lp);
    printf("   greedy logprob %.4f (%d tokens), beam-4 best %.4f (%d tokens)\n", greedy_lp, ng,
           (double)best.logprob, (int)best.n_tokens);
    size_t kv = 0, kv_unshared = 0;
    CHECK_STATUS(wlm_beam_memory(c, &kv, &kv_unshared), WLM_OK);
    CHECKF(kv > 0 && kv < kv_unshared, "shared KV %zu bytes vs unshared %zu", kv, kv_unshared);
    printf("   KV peak %zu bytes shared vs %zu as private copies (%.2fx)\n", kv, kv_unshared,
           (double)kv_unshared / (double)(kv ? kv : 1));
    /* every result: sorted by score, its log-probability recomputed independently */
    float prev = INFINITY;
    for (int32_t i = 0; i < nb; i++) {
        wlm_beam b;
        CHECK_STATUS(wlm_beam_get(c, i, &b), WLM_OK);
        CHECK(b.score <= prev);
        prev = b.score;
        double lp = recompute_logprob(m, toks, n, b.tokens, b.n_tokens, b.stop_reason == WLM_STOP_EOS);
        CHECK_NEAR(b.logprob, lp, 1e-3);
        CHECK_NEAR(b.score, b.logprob, 1e-6); /* alpha 0 */
    }
    /* length normalisation: score = logprob / len */
    run_beam(c, toks, n, 3, 20, 1.0f);
    for (int32_t i = 0; i < wlm_beam_count(c); i++) {
        wlm_beam b;
        wlm_beam_get(c, i, &b);
        int len = b.n_tokens + (b.stop_reason == WLM_STOP_EOS);
        CHECK_NEAR(b.score, b.logprob / len, 1e-5);
        CHECK(b.n_tokens <= 20);
    }
    /* errors */
    wlm_beam_params bp;
    wlm_beam_params_default(&bp);
    bp.width = 5; /* needs n_seq_max 10 */
    CHECK_STATUS(wlm_beam_begin(c, toks, n, &bp), WLM_ERR_INVALID_ARG);
    CHECK(strstr(wlm_context_errmsg(c), "n_seq_max") != NULL);
    bp.width = 2;
    bp.length_penalty = NAN;
    CHECK_STATUS(wlm_beam_begin(c, toks, n, &bp), WLM_ERR_INVALID_ARG);
    bp.length_penalty = 1.0f;
    bp.max_tokens = 0;
    CHECK_STATUS(wlm_beam_begin(c, toks, n, &bp), WLM_ERR_INVALID_ARG);
    CHECK_STATUS(wlm_beam_step(c), WLM_ERR_STATE);
    /* abort: live beams are returned */
    bp.max_tokens = 100;
    CHECK_STATUS(wlm_beam_begin(c, toks, n, &bp), WLM_OK);
    CHECK_STATUS(wlm_beam_step(c), WLM_OK);
    wlm_generate_abort(c);
    CHECK_STATUS(wlm_beam_step(c), WLM_DONE);
    CHECK(wlm_beam_count(c) >= 1);
out:
    wlm_context_free(c);
    wlm_context_free(g);
}

/* ------------------------------------------------------------------------------------------ */

static void test_context_full_and_shift(const wlm_model *m) {
    tu_section("context full, context shift");
    int32_t toks[64];
    int32_t n = tokenize(m, "Once upon a time", toks, 64);
    wlm_context *c = new_ctx(m, 40, 1, 1);
    if (!c) return;
    wlm_gen_params gp;
    wlm_gen_params_default(&gp);
    gp.temperature = 0.8f;
    gp.seed = 7;
    gp.max_tokens = 0;
    int32_t ids[400], reason = 0;
    int k = run_single(c, toks, n, &gp, ids, 400, &reason);
    CHECK_EQ_INT(reason, WLM_STOP_CONTEXT_FULL);
    CHECK_EQ_INT(k + n, 41); /* n_ctx positions evaluated, and the last token emitted */
    /* with shifting: goes on past the context, never beyond n_ctx */
    gp.context_shift = 1;
    gp.n_keep = 1;
    gp.max_tokens = 150;
    wlm_token t;
    CHECK_STATUS(wlm_generate_begin(c, toks, n, &gp), WLM_OK);
    int got = 0, maxpast = 0, rc;
    while ((rc = wlm_generate_next(c, &t)) == WLM_OK) {
        got++;
        if (wlm_context_n_past(c) > maxpast) maxpast = wlm_context_n_past(c);
    }
    CHECK_STATUS(rc, WLM_DONE);
    CHECKF(got == 150 || t.stop_reason == WLM_STOP_EOS, "%d tokens, stop %s", got,
           wlm_stop_reason_name(t.stop_reason));
    CHECKF(got > 40, "only %d tokens with context shift", got);
    CHECK(maxpast <= 40);
    gp.n_keep = 39;
    CHECK_STATUS(wlm_generate_begin(c, toks, n, &gp), WLM_ERR_INVALID_ARG);
    wlm_context_free(c);

    /* exactness: after a shift, layer-0 keys equal keys computed at the new positions (layer 0
     * sees only the token embedding and the position) and layer-0 values are unchanged */
    int32_t seq[30];
    for (int i = 0; i < 30; i++) seq[i] = 1 + (i * 37) % 500;
    wlm_context *a = new_ctx(m, 64, 1, 1), *b = new_ctx(m, 64, 1, 1);
    if (!a || !b) goto out;
    CHECK_STATUS(wlm_eval(a, seq, 30), WLM_OK);
    CHECK_STATUS(wlm_seq_shift(a, 0, 3, 10), WLM_OK);
    CHECK_EQ_INT(wlm_context_n_past(a), 20);
    int32_t kept[20];
    for (int i = 0; i < 3; i++) kept[i] = seq[i];
    for (int i = 3; i < 20; i++) kept[i] = seq[i + 10];
    CHECK_STATUS(wlm_eval(b, kept, 20), WLM_OK);
    const int kvd = m->hp.kv_dim;
    double maxk = 0.0, maxv = 0.0, maxabs = 0.0;
    for (int pos = 0; pos < 20; pos++) {
        const void *ra = wlm_kv_row(a, 0, 0, pos), *rb = wlm_kv_row(b, 0, 0, pos);
        for (int j = 0; j < kvd; j++) {
            double ka, kb, va, vb;
            const size_t vj = (size_t)WLM_KV_BLOCK * kvd + j;
            if (kv_type == WLM_KV_F16) { /* widened exactly */
                const uint16_t *ha = ra, *hb = rb;
                ka = wlm_fp16_to_fp32(ha[j]), kb = wlm_fp16_to_fp32(hb[j]);
                va = wlm_fp16_to_fp32(ha[vj]), vb = wlm_fp16_to_fp32(hb[vj]);
            } else {
                const float *fa = ra, *fb = rb;
                ka = fa[j], kb = fb[j], va = fa[vj], vb = fb[vj];
            }
            maxk = fmax(maxk, fabs(ka - kb));
            maxv = fmax(maxv, fabs(va - vb));
            maxabs = fmax(maxabs, fabs(kb));
        }
    }
    /* F16: both keys are rounded to binary16 (11 significant bits) once, after rotations in
     * float32 that differ by ~1e-6: at most one unit of the last place apart */
    const double tol = kv_type == WLM_KV_F16 ? maxabs / 1024.0 : 1e-4;
    CHECKF(maxk < tol, "shifted keys differ by %g (largest key %g)", maxk, maxabs);
    CHECKF(maxv == 0.0, "values differ by %g", maxv);
    CHECK_STATUS(wlm_seq_shift(a, 0, 15, 10), WLM_ERR_INVALID_ARG);
    CHECK_STATUS(wlm_seq_shift(a, 0, 0, 0), WLM_ERR_INVALID_ARG);
    /* evaluation continues from the shifted cache */
    int32_t t1 = 9;
    CHECK_STATUS(wlm_eval(a, &t1, 1), WLM_OK);
    CHECK_EQ_INT(wlm_context_n_past(a), 21);
out:
    wlm_context_free(a);
    wlm_context_free(b);
}

/* cache_prompt: a later prompt that extends the previous sequence prefills only its new tokens,
 * and generates exactly (bitwise: ids and log-probabilities) what a fresh context generates. */
static int run_probs(wlm_context *c, const int32_t *toks, int32_t n, const wlm_gen_params *gp,
                     int32_t *ids, float *lp, int cap) {
    int k = 0, rc;
    wlm_token t;
    if (wlm_generate_begin(c, toks, n, gp) != WLM_OK) return -1;
    while ((rc = wlm_generate_next(c, &t)) == WLM_OK)
        if (k < cap) {
            ids[k] = t.id;
            lp[k++] = t.logprob;
        }
    return rc == WLM_DONE ? k : -1;
}

static void same_as_fresh(const wlm_model *m, wlm_context *cached, const int32_t *toks, int32_t n,
                          const wlm_gen_params *gp, int32_t want_cached, const char *what) {
    int32_t a[64], b[64];
    float la[64], lb[64];
    wlm_gen_params fresh = *gp;
    fresh.cache_prompt = 0;
    wlm_context *f = new_ctx(m, 256, 1, 1);
    if (!f) return;
    int ka = run_probs(cached, toks, n, gp, a, la, 64);
    CHECKF(wlm_generate_n_cached(cached) == want_cached, "%s: %d cached, expected %d", what,
           (int)wlm_generate_n_cached(cached), (int)want_cached);
    int kb = run_probs(f, toks, n, &fresh, b, lb, 64);
    CHECK_EQ_INT(wlm_generate_n_cached(f), 0);
    CHECKF(ka == kb && ka > 0, "%s: %d vs %d tokens", what, ka, kb);
    for (int i = 0; i < ka && i < kb; i++)
        if (a[i] != b[i] || memcmp(&la[i], &lb[i], sizeof(float)) != 0) {
            CHECKF(0, "%s: token %d: %d (%.9g) vs fresh %d (%.9g)", what, i, (int)a[i], la[i],
                   (int)b[i], lb[i]);
            break;
        }
    wlm_context_free(f);
}

static void test_cache_prompt(const wlm_model *m) {
    tu_section("cache_prompt: a later turn prefills only its new tokens, bitwise as fresh");
    wlm_context *c = new_ctx(m, 256, 2, 1);
    if (!c) return;
    wlm_gen_params gp;
    wlm_gen_params_default(&gp);
    gp.temperature = 0.9f;
    gp.seed = 11;
    gp.max_tokens = 24;
    gp.cache_prompt = 1;
    int32_t p[256] = {0}; /* (the context-shift case below evaluates 40 of them: more than were written) */
    int32_t n = tokenize(m, "Lily wanted to play with her ball", p, 64);
    int32_t ids[64];
    float lp[64];
    int k = run_probs(c, p, n, &gp, ids, lp, 64);
    CHECK_EQ_INT(wlm_generate_n_cached(c), 0); /* nothing cached yet */
    CHECK_EQ_INT(k, 24);
    /* turn 2: the whole first turn (its last token was never evaluated) plus new text */
    for (int i = 0; i < k; i++) p[n + i] = ids[i];
    int32_t n2 = n + k;
    int32_t more[32];
    int32_t nm = wlm_tokenize(m, " The sun was", 12, 0, more, 32);
    for (int i = 0; i < nm; i++) p[n2 + i] = more[i];
    n2 += nm;
    same_as_fresh(m, c, p, n2, &gp, n + k - 1, "extended prompt");
    /* the same prompt again: all but its last token */
    same_as_fresh(m, c, p, n2, &gp, n2 - 1, "repeated prompt");
    /* a prompt that departs from the cache at position 5 */
    int32_t q[64];
    memcpy(q, p, sizeof(int32_t) * 12);
    q[5] = q[5] == 100 ? 101 : 100;
    same_as_fresh(m, c, q, 12, &gp, 5, "diverging prompt");
    /* off: nothing reused */
    gp.cache_prompt = 0;
    same_as_fresh(m, c, q, 12, &gp, 0, "cache_prompt off");
    gp.cache_prompt = 2;
    CHECK_STATUS(wlm_generate_begin(c, q, 12, &gp), WLM_ERR_INVALID_ARG);
    /* after a context shift only the kept prefix is exact */
    gp.cache_prompt = 1;
    CHECK_STATUS(wlm_eval(c, p, 40), WLM_OK);
    CHECK_STATUS(wlm_seq_shift(c, 0, 4, 10), WLM_OK);
    int32_t shifted[40];
    for (int i = 0; i < 4; i++) shifted[i] = p[i];
    for (int i = 4; i < 30; i++) shifted[i] = p[i + 10];
    same_as_fresh(m, c, shifted, 30, &gp, 4, "after a context shift");
    /* a batch of two never reuses */
    const int32_t *pr[2] = {p, p};
    int32_t nn[2] = {n2, n2};
    wlm_gen_params two[2] = {gp, gp};
    CHECK_STATUS(wlm_generate_batch_begin(c, 2, pr, nn, two), WLM_OK);
    CHECK_EQ_INT(wlm_generate_n_cached(c), 0);
    wlm_context_free(c);
}

/* The preview re-applies a chain to the logits of the current step without disturbing the
 * generation: with the generation's own parameters it reproduces the token's top list. */
static void test_preview(const wlm_model *m) {
    tu_section("sampler preview");
    int32_t toks[64];
    int32_t n = tokenize(m, "Once upon a time", toks, 64);
    wlm_context *a = new_ctx(m, 128, 1, 1), *b = new_ctx(m, 128, 1, 1);
    if (!a || !b) goto out;
    wlm_gen_params gp;
    wlm_gen_params_default(&gp);
    gp.seed = 99;
    gp.top_k = 12;
    gp.n_probs = 8;
    gp.max_tokens = 20;
    CHECK_STATUS(wlm_generate_begin(a, toks, n, &gp), WLM_OK);
    CHECK_STATUS(wlm_generate_begin(b, toks, n, &gp), WLM_OK);
    wlm_token ta, tb, pv;
    int steps = 0, same_top = 1, same_ids = 1, rc;
    wlm_gen_params hot = gp;
    hot.temperature = 2.0f;
    hot.top_k = 0;
    hot.top_p = 1.0f;
    while ((rc = wlm_generate_next(a, &ta)) == WLM_OK) {
        CHECK_STATUS(wlm_sampler_preview(a, 0, &gp, &pv), WLM_OK);
        same_top &= pv.n_probs == ta.n_probs;
        for (int i = 0; i < ta.n_probs && i < pv.n_probs; i++)
            same_top &= pv.top[i].id == ta.top[i].id && pv.top[i].prob == ta.top[i].prob &&
                        pv.top[i].prob_sampled == ta.top[i].prob_sampled;
        /* another chain reshapes the same candidates: more mass outside the top token */
        CHECK_STATUS(wlm_sampler_preview(a, 0, &hot, &pv), WLM_OK);
        CHECK(pv.top[0].prob == ta.top[0].prob || pv.top[0].prob_sampled <= ta.top[0].prob_sampled);
        CHECK_STATUS(wlm_generate_next(b, &tb), WLM_OK);
        same_ids &= ta.id == tb.id;
        steps++;
    }
    CHECK(steps > 5);
    CHECKF(same_top, "the preview with the generation's parameters differs from its top list");
    CHECKF(same_ids, "previews changed the generation");
    hot.top_p = 0.0f;
    CHECK_STATUS(wlm_sampler_preview(a, 0, &hot, &pv), WLM_ERR_INVALID_ARG);
    CHECK_STATUS(wlm_sampler_preview(a, 3, &gp, &pv), WLM_ERR_INVALID_ARG);
out:
    wlm_context_free(a);
    wlm_context_free(b);
}

int main(int argc, char **argv) {
    tu_find_shared(argc, argv);
    model_bytes = tu_read_shared("models/stories260K.bin", &model_size);
    tok_bytes = tu_read_shared("models/tok512.bin", &tok_size);
    if (!model_bytes || !tok_bytes) return TEST_FINISH();
    wlm_model *m = load_model();
    if (m) {
        test_batched_prefill(m, 1);
        test_batched_prefill(m, 0);
        test_multi_sequence(m);
        test_fork(m);
        test_batch_generation(m);
        test_batch_join(m);
        test_beam(m);
        test_context_full_and_shift(m);
        test_cache_prompt(m);
        test_preview(m);
        /* the F32 cache keeps the same guarantees */
        kv_type = WLM_KV_F32;
        tu_section("F32 KV cache:");
        test_batched_prefill(m, 1);
        test_multi_sequence(m);
        test_fork(m);
        test_context_full_and_shift(m);
        wlm_model_free(m);
    }
    free(model_bytes);
    free(tok_bytes);
    return TEST_FINISH();
}
