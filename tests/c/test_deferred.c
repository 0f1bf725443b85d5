/*
 * test_deferred.c — the seam of the WebGPU backend (runtime/deferred.c) without a GPU: a
 * deferred context's recorded batches are evaluated by a second, ordinary context on the same
 * model (standing in for the other backend) and their logits copied in; generation must then
 * equal the ordinary context's token for token (greedy and sampled, stop strings, the prompt
 * cache), a step dropped while it waits for logits must leave the sequence where it was, logits
 * must be unreadable until supplied, the context must hold no KV memory, context shift and
 * speculative decoding, batches of sequences and beam search must equal an ordinary context's,
 * and what the deferred mode does not support (wlm_seq_fork called directly) must be refused;
 * image rows must be recorded with their inputs and non-causal spans (one batch for a media
 * prompt: tests/js/webgpu_images.test.mjs runs it on the GPU against the CPU), on an M-RoPE
 * model with their (t, h, w) positions (a synthetic qwen2vl, WASMLM_SYNTH_DIR). Also checks
 * wlm_model_describe's JSON (length contract, key fields) on stories260K.
 * Uses wasmlm.h plus model.h (the deferred fields are internal).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "wasmlm.h"
#include "test_util.h"

static unsigned char *model_bytes, *tok_bytes;
static size_t model_size, tok_size;

/* A deferred context (kv_cache 2: another backend keeps K/V), or NULL after a failed check. */
static wlm_context *deferred_ctx(const wlm_model *m, int n_ctx, int n_seq) {
    wlm_context_params cp;
    wlm_context_params_default(&cp);
    cp.n_ctx = n_ctx;
    cp.n_seq_max = n_seq;
    cp.kv_cache = 2;
    wlm_context *c = NULL;
    int rc = wlm_context_new(m, &cp, &c);
    CHECK_STATUS(rc, WLM_OK);
    if (rc != WLM_OK) {
        wlm_context_free(c);
        return NULL;
    }
    return c;
}

/* An ordinary context, a deferred one and the deferred one's stand-in backend (ref: supply()),
 * each of n_ctx positions and n_seq sequences; NULL members after a failed check. */
typedef struct trio {
    wlm_context *plain, *d, *ref;
} trio;

static trio trio_new(const wlm_model *m, int n_ctx, int n_seq) {
    trio t = {tu_context(m, n_ctx, n_seq, 1, WLM_KV_F16), deferred_ctx(m, n_ctx, n_seq),
              tu_context(m, n_ctx, n_seq, 1, WLM_KV_F16)};
    return t;
}

static void trio_free(trio *t) {
    wlm_context_free(t->plain);
    wlm_context_free(t->d);
    wlm_context_free(t->ref);
}

/* Evaluates d's recorded batch on `ref` (an ordinary context kept at the same positions) and
 * copies the logits in: what js/backend/webgpu/backend.js's supply() does with the GPU. */
static int supply(wlm_context *d, wlm_context *ref) {
    const int32_t n = d->dfr_n;
    if (n <= 0) return WLM_OK;
    for (int32_t i = 0; i < d->dfr_n_fork; i++) { /* forks first, then shifts, as the GPU */
        const int32_t *fk = d->dfr_fork[i];
        CHECKF(ref->seqs[fk[0]].n_past >= fk[2], "ref sequence %d at %d, fork of %d rows",
               (int)fk[0], (int)ref->seqs[fk[0]].n_past, (int)fk[2]);
        int rc = wlm_seq_fork(ref, fk[0], fk[1]);
        if (rc == WLM_OK) rc = wlm_seq_truncate(ref, fk[1], fk[2]);
        if (rc != WLM_OK) return rc;
    }
    d->dfr_n_fork = 0;
    for (int32_t sq = 0; sq < d->n_seq_max; sq++) { /* shifts, as the GPU moves its rows */
        int32_t *sh = d->dfr_shift[sq];
        if (sh[1] <= 0) continue;
        if (ref->seqs[sq].n_past > sh[2]) wlm_seq_truncate(ref, sq, sh[2]);
        CHECKF(ref->seqs[sq].n_past == sh[2], "ref sequence %d at %d, shift of %d", (int)sq,
               (int)ref->seqs[sq].n_past, (int)sh[2]);
        int rc = wlm_seq_shift(ref, sq, sh[0], sh[1]);
        if (rc != WLM_OK) return rc;
        sh[0] = sh[1] = sh[2] = 0;
    }
    /* each sequence of the batch where its first entry is (ref computed the same tokens) */
    for (int32_t i = n - 1; i >= 0; i--) {
        const int32_t sq = d->dfr_seq[i], p = d->dfr_pos[i];
        if (ref->seqs[sq].n_past > p) wlm_seq_truncate(ref, sq, p);
    }
    for (int32_t i = 0; i < n; i++) {
        const int32_t sq = d->dfr_seq[i];
        int first = 1;
        for (int32_t j = 0; j < i; j++) first &= d->dfr_seq[j] != sq;
        if (first)
            CHECKF(ref->seqs[sq].n_past == d->dfr_pos[i], "ref sequence %d at %d, batch at %d",
                   (int)sq, (int)ref->seqs[sq].n_past, (int)d->dfr_pos[i]);
    }
    uint8_t *want = calloc((size_t)n, 1);
    for (int32_t i = 0; i < n; i++) want[i] = d->logit_row[i] >= 0;
    int rc = wlm_eval_entries(ref, d->dfr_tok, d->dfr_seq, want, n);
    free(want);
    if (rc != WLM_OK) return rc;
    const size_t V = (size_t)d->model->hp.vocab_size;
    for (int32_t i = 0; i < n; i++)
        if (d->logit_row[i] >= 0)
            memcpy(d->logits + (size_t)d->logit_row[i] * V, wlm_logits_ith(ref, i), V * sizeof(float));
    d->dfr_n = 0;
    return WLM_OK;
}

/* One generation on `c` (deferred when ref != NULL): ids into out (cap), returns the count;
 * *stop gets the stop reason, text appended to buf. */
static int generate_spec(wlm_context *c, wlm_context *ref, const char *prompt,
                         const wlm_gen_params *p, const wlm_spec_params *sp, int32_t *out,
                         int cap, int32_t *stop, char *buf, size_t buf_cap) {
    int rc = wlm_generate_begin_text(c, prompt, p);
    CHECK_STATUS(rc, WLM_OK);
    if (rc != WLM_OK) return 0;
    if (sp) { /* as js/engine/engine.js: speculation on before the prefill's logits come */
        rc = wlm_generate_speculate(c, sp);
        CHECK_STATUS(rc, WLM_OK);
        if (rc != WLM_OK) return 0;
    }
    if (ref) CHECK_STATUS(supply(c, ref), WLM_OK);
    int n = 0;
    buf[0] = '\0';
    for (;;) {
        wlm_token t;
        rc = wlm_generate_next(c, &t);
        if (ref && rc == WLM_NEED_LOGITS) {
            CHECK(wlm_logits(c) == NULL); /* not readable before they are supplied */
            CHECK_STATUS(supply(c, ref), WLM_OK);
            rc = wlm_generate_batch_resume(c, &t);
            if (rc >= 0) rc = t.status;
        }
        if (t.piece_len && strlen(buf) + t.piece_len < buf_cap) strncat(buf, t.piece, t.piece_len);
        if (rc != WLM_OK) {
            *stop = t.stop_reason;
            CHECK_STATUS(rc, WLM_DONE);
            return n;
        }
        if (n < cap) out[n++] = t.id;
    }
}

static int generate(wlm_context *c, wlm_context *ref, const char *prompt, const wlm_gen_params *p,
                    int32_t *out, int cap, int32_t *stop, char *buf, size_t buf_cap) {
    return generate_spec(c, ref, prompt, p, NULL, out, cap, stop, buf, buf_cap);
}

static void test_generation_equal(const wlm_model *m) {
    tu_section("deferred generation equals the ordinary context's");
    trio ctxs = trio_new(m, 128, 1);
    wlm_context *plain = ctxs.plain, *d = ctxs.d, *ref = ctxs.ref;
    if (!plain || !d || !ref) goto out;
    CHECK(d->deferred && d->kv.n_alloc == 0); /* no CPU KV blocks */
    CHECKF(wlm_context_memory(d) + 8 * d->kv.block_bytes <= wlm_context_memory(plain), /* 8 blocks */
           "deferred %zu bytes, plain %zu", wlm_context_memory(d), wlm_context_memory(plain));
    for (int sampled = 0; sampled < 2; sampled++) {
        wlm_gen_params p;
        wlm_gen_params_default(&p);
        p.max_tokens = 40;
        p.seed = 11;
        if (!sampled) p.temperature = 0.0f;
        p.cache_prompt = 1;
        int32_t a[64], b[64], sa = -1, sb = -1;
        char ta[2048], tb[2048];
        const char *prompts[] = {"Once upon a time", "Once upon a time, there was a dog"};
        for (int k = 0; k < 2; k++) {
            int na = generate(plain, NULL, prompts[k], &p, a, 64, &sa, ta, sizeof ta);
            int nb = generate(d, ref, prompts[k], &p, b, 64, &sb, tb, sizeof tb);
            CHECKF(na == nb && na > 0 && memcmp(a, b, sizeof(int32_t) * (size_t)na) == 0,
                   "%s, prompt %d: %d vs %d tokens", sampled ? "sampled" : "greedy", k, na, nb);
            CHECK(sa == sb);
            CHECK(strcmp(ta, tb) == 0);
            CHECKF(wlm_generate_n_cached(plain) == wlm_generate_n_cached(d), "cached %d vs %d",
                   (int)wlm_generate_n_cached(plain), (int)wlm_generate_n_cached(d));
            if (k == 1) CHECK(wlm_generate_n_cached(d) > 0);
        }
        /* a stop string cut from the text is never emitted, on both */
        char stop[8];
        if (strlen(ta) > 6) {
            memcpy(stop, ta + 3, 3);
            stop[3] = '\0';
            memcpy(p.stop[0], stop, 4);
            p.n_stop = 1;
            int na = generate(plain, NULL, prompts[0], &p, a, 64, &sa, ta, sizeof ta);
            int nb = generate(d, ref, prompts[0], &p, b, 64, &sb, tb, sizeof tb);
            CHECK(na == nb && sa == WLM_STOP_STRING && sb == WLM_STOP_STRING && strcmp(ta, tb) == 0);
            p.n_stop = 0;
        }
    }
out:
    trio_free(&ctxs);
}

static void test_drop_and_refusals(const wlm_model *m) {
    tu_section("a step dropped while waiting; what deferred contexts refuse");
    wlm_context *d = deferred_ctx(m, 64, 2);
    wlm_context *ref = tu_context(m, 64, 0, 1, WLM_KV_F16);
    if (!d || !ref) goto out;
    wlm_gen_params p;
    wlm_gen_params_default(&p);
    p.temperature = 0.0f;
    p.max_tokens = 10;
    CHECK_STATUS(wlm_generate_begin_text(d, "Once upon", &p), WLM_OK);
    const int32_t n_prompt = wlm_context_n_past(d);
    CHECK(d->dfr_n == n_prompt && wlm_logits(d) == NULL);
    wlm_token t;
    CHECK_STATUS(wlm_generate_batch_resume(d, &t), WLM_ERR_STATE); /* nothing waits yet */
    CHECK_STATUS(supply(d, ref), WLM_OK);
    CHECK_STATUS(wlm_generate_next(d, &t), WLM_OK); /* sampled from the prefill's logits */
    CHECK_STATUS(wlm_generate_next(d, &t), WLM_NEED_LOGITS);
    CHECK(wlm_context_n_past(d) == n_prompt + 1);
    CHECK_STATUS(wlm_generate_batch_resume(d, &t), WLM_ERR_STATE); /* logits not supplied */
    wlm_generate_abort(d);
    CHECK_STATUS(wlm_generate_next(d, &t), WLM_DONE);
    CHECK(t.stop_reason == WLM_STOP_ABORTED);
    CHECKF(wlm_context_n_past(d) == n_prompt, "n_past %d after the dropped step, want %d",
           (int)wlm_context_n_past(d), (int)n_prompt);
    /* a prefill whose logits never came is no prompt cache (from an empty cache: positions
     * computed by an earlier generation stay a cache, rightly) */
    wlm_context_reset(d);
    p.cache_prompt = 1;
    CHECK_STATUS(wlm_generate_begin_text(d, "Once upon a time", &p), WLM_OK);
    wlm_generate_abort(d);
    CHECK_STATUS(wlm_generate_next(d, &t), WLM_DONE);
    CHECK_STATUS(wlm_generate_begin_text(d, "Once upon a time there", &p), WLM_OK);
    CHECK(wlm_generate_n_cached(d) == 0);
    wlm_context_reset(d);
    CHECK(wlm_context_n_past(d) == 0 && d->dfr_n == 0);

    CHECK_STATUS(wlm_seq_fork(d, 0, 1), WLM_ERR_UNSUPPORTED);
out:
    wlm_context_free(d);
    wlm_context_free(ref);
}

/* Image rows on a deferred context (wlm_eval_embd): recorded as WLM_TOKEN_EMBD entries with
 * their inputs copied and, for a non-causal image, the end each row attends to; with dfr_accum
 * (a media prompt, vision/sequence.c) appended after the text into one batch wanting no logits;
 * dropped by a reset as any batch whose logits never came. */
static void test_image_rows(const wlm_model *m) {
    tu_section("image rows recorded with their inputs and spans (WLM_TOKEN_EMBD entries)");
    wlm_context *d = deferred_ctx(m, 64, 1);
    const int32_t D = m->hp.dim, n = 3;
    float *rows = malloc(sizeof(float) * (size_t)n * (size_t)D);
    if (!d || !rows) goto out;
    for (int32_t i = 0; i < n * D; i++) rows[i] = 0.01f * (float)(i % 97) - 0.3f;
    const int32_t text[2] = {1, 5};
    d->dfr_accum = 1;
    CHECK_STATUS(wlm_eval_batch(d, text, NULL, NULL, 2), WLM_OK);
    CHECK_STATUS(wlm_eval_embd(d, 0, rows, n, D, 1), WLM_OK); /* non-causal: each sees 0..4 */
    CHECK_STATUS(wlm_eval_embd(d, 0, rows + D, n - 1, D, 0), WLM_OK); /* causal */
    d->dfr_accum = 0;
    const int32_t total = 2 + n + n - 1;
    CHECKF(d->dfr_n == total && wlm_context_n_past(d) == total, "dfr_n %d, n_past %d, want %d",
           (int)d->dfr_n, (int)wlm_context_n_past(d), (int)total);
    for (int32_t i = 0; i < d->dfr_n && i < total; i++) {
        const int img = i >= 2, first = i < 2 + n;
        CHECKF(d->dfr_tok[i] == (img ? WLM_TOKEN_EMBD : text[i]) && d->dfr_pos[i] == i && d->dfr_seq[i] == 0 &&
                   d->dfr_len[i] == (img && first ? 2 + n : 0) && d->dfr_erow[i] == (img ? i - 2 : -1) &&
                   d->logit_row[i] == -1,
               "entry %d: token %d, position %d, end %d, row %d, logits row %d", (int)i, (int)d->dfr_tok[i],
               (int)d->dfr_pos[i], (int)d->dfr_len[i], (int)d->dfr_erow[i], (int)d->logit_row[i]);
    }
    CHECK(d->dfr_embd_n == 2 * n - 1 && !memcmp(d->dfr_embd, rows, sizeof(float) * (size_t)n * (size_t)D) &&
          !memcmp(d->dfr_embd + (size_t)n * (size_t)D, rows + D, sizeof(float) * (size_t)(n - 1) * (size_t)D));
    CHECK(wlm_logits(d) == NULL); /* the backend has not run it */
    wlm_context_reset(d);
    CHECK(wlm_context_n_past(d) == 0 && d->dfr_n == 0);
out:
    free(rows);
    wlm_context_free(d);
}

/* M-RoPE (qwen2vl, tools/synth_gguf.mjs's tiny one from the synth_embed fixture): a deferred
 * context records each entry's (t, h, w) RoPE positions (dfr_rpos, which the GPU's RoPE reads)
 * and keeps the sequence's rnext as an ordinary context does; against llama.cpp's layout
 * (mtmd's set_position_mrope_2d) written out here: two tokens, an image of 3 × 2 merged tokens
 * placed at t = 2 (row k at (2, 2 + k / 3, 2 + k % 3)), and the text after it resuming at
 * 2 + max(3, 2) = 5, not at its slot 8. */
static void test_mrope_rows(const char *dir) {
    tu_section("M-RoPE: image rows recorded with their grid positions, the text after them past the image's span");
    char path[1200];
    snprintf(path, sizeof path, "%s/qwen2vl-tiny.gguf", dir);
    FILE *f = fopen(path, "rb");
    CHECKF(f != NULL, "cannot open %s", path);
    if (!f) return;
    fseek(f, 0, SEEK_END);
    const long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)size);
    const size_t got = buf ? fread(buf, 1, (size_t)size, f) : 0;
    fclose(f);
    wlm_model *m = NULL;
    int rc = got == (size_t)size ? wlm_model_load(buf, (size_t)size, WLM_LOAD_OWN_BUFFER, &m) : WLM_ERR_TRUNCATED;
    CHECK_STATUS(rc, WLM_OK);
    if (rc != WLM_OK) {
        if (!m) free(buf);
        wlm_model_free(m);
        return;
    }
    enum { GW = 3, GH = 2, N = GW * GH, TOTAL = 2 + N + 2 };
    wlm_context *d = deferred_ctx(m, 64, 1), *plain = tu_context(m, 64, 1, 1, WLM_KV_F32);
    const int32_t D = m->hp.dim;
    float *rows = malloc(sizeof(float) * N * (size_t)D);
    if (!d || !plain || !rows) goto out;
    for (int32_t i = 0; i < N * D; i++) rows[i] = 0.01f * (float)(i % 89) - 0.4f;
    const int32_t text[2] = {1, 5}, after[2] = {7, 9};
    for (int k = 0; k < 2; k++) {
        wlm_context *c = k ? plain : d;
        c->dfr_accum = !k; /* the deferred one: one batch, as a media prompt */
        CHECK_STATUS(wlm_eval_batch(c, text, NULL, NULL, 2), WLM_OK);
        CHECK_STATUS(wlm_eval_embd_grid(c, 0, rows, N, D, 0, GW, GH), WLM_OK);
        CHECK_STATUS(wlm_eval_batch(c, after, NULL, NULL, 2), WLM_OK);
        c->dfr_accum = 0;
    }
    CHECKF(d->dfr_n == TOTAL && d->dfr_rpos, "dfr_n %d, want %d", (int)d->dfr_n, (int)TOTAL);
    for (int32_t i = 0; d->dfr_rpos && i < d->dfr_n && i < TOTAL; i++) {
        int32_t want[3], next;
        if (i < 2 || i >= 2 + N) {
            const int32_t p = i < 2 ? i : 5 + (i - 2 - N);
            want[0] = want[1] = want[2] = p;
            next = p + 1;
        } else {
            const int32_t k = i - 2;
            want[0] = 2, want[1] = 2 + k / GW, want[2] = 2 + k % GW;
            next = 5;
        }
        const int32_t *r = d->dfr_rpos + 3 * i;
        CHECKF(r[0] == want[0] && r[1] == want[1] && r[2] == want[2] && d->dfr_pos[i] == i,
               "entry %d: (t, h, w) (%d, %d, %d) at slot %d, want (%d, %d, %d) at %d", (int)i, (int)r[0],
               (int)r[1], (int)r[2], (int)d->dfr_pos[i], (int)want[0], (int)want[1], (int)want[2], (int)i);
        CHECKF(d->seqs[0].rnext[i] == next && plain->seqs[0].rnext[i] == next,
               "slot %d: rnext %d (the CPU's %d), want %d", (int)i, (int)d->seqs[0].rnext[i],
               (int)plain->seqs[0].rnext[i], (int)next);
    }
out:
    free(rows);
    wlm_context_free(d);
    wlm_context_free(plain);
    wlm_model_free(m);
}

/* tok512's end of text, banned where a run must reach its max_tokens */
static const int32_t EOS_BAN[] = {2};

/* A batch of NS sequences from `prompts` (the last repeats the first: not forked in a deferred
 * context) on c (deferred when ref != NULL): each sequence's ids into out[s] (cap 64), counts
 * into n[s]. */
#define NS 4
static void batch_run(wlm_context *c, wlm_context *ref, const char *const *prompts,
                      const wlm_gen_params *gp, int32_t out[NS][64], int *n) {
    int32_t toks[NS][64], counts[NS];
    const int32_t *pp[NS];
    for (int s = 0; s < NS; s++) {
        counts[s] = wlm_tokenize(c->model, prompts[s], strlen(prompts[s]), 1, toks[s], 64);
        pp[s] = toks[s];
        n[s] = 0;
    }
    CHECK_STATUS(wlm_generate_batch_begin(c, NS, pp, counts, gp), WLM_OK);
    if (ref) CHECK_STATUS(supply(c, ref), WLM_OK);
    wlm_token t[NS];
    for (int step = 0; step < 200; step++) {
        int rc = wlm_generate_batch_next(c, t);
        if (ref && rc == WLM_NEED_LOGITS) {
            CHECK_STATUS(supply(c, ref), WLM_OK);
            rc = wlm_generate_batch_resume(c, t);
        }
        if (rc < 0) {
            CHECK_STATUS(rc, WLM_OK);
            return;
        }
        for (int s = 0; s < NS; s++)
            if (t[s].status == WLM_OK && n[s] < 64) out[s][n[s]++] = t[s].id;
        if (rc == WLM_DONE) return;
    }
}

/* Batches of sequences on a deferred context (each sequence's rows kept by the backend, a
 * repeated prompt evaluated again instead of forked) equal an ordinary context's, greedy and
 * sampled, with context shifts of several sequences in one step. */
static void test_batch(const wlm_model *m) {
    tu_section("batches of sequences on a deferred context equal an ordinary one");
    trio ctxs = trio_new(m, 48, NS);
    wlm_context *plain = ctxs.plain, *d = ctxs.d, *ref = ctxs.ref;
    if (!plain || !d || !ref) goto out;
    const char *prompts[NS] = {"Once upon a time", "The little dog", "Lily and Ben were", "Once upon a time"};
    for (int mode = 0; mode < 3; mode++) {
        wlm_gen_params gp[NS];
        for (int s = 0; s < NS; s++) {
            wlm_gen_params_default(&gp[s]);
            gp[s].max_tokens = mode == 2 ? 70 : 30; /* mode 2: past n_ctx 48, shifting */
            gp[s].seed = 100 + (uint64_t)s;
            gp[s].temperature = mode == 0 ? 0.0f : 0.9f;
            gp[s].context_shift = mode == 2;
            gp[s].n_keep = 3;
            gp[s].banned = EOS_BAN;
            gp[s].n_banned = 1;
        }
        int32_t a[NS][64], b[NS][64];
        int na[NS], nb[NS];
        batch_run(plain, NULL, prompts, gp, a, na);
        batch_run(d, ref, prompts, gp, b, nb);
        for (int s = 0; s < NS; s++)
            CHECKF(na[s] == nb[s] && na[s] >= 30 && memcmp(a[s], b[s], sizeof(int32_t) * (size_t)na[s]) == 0,
                   "mode %d sequence %d: %d vs %d tokens", mode, s, na[s], nb[s]);
        if (mode == 0) /* greedy: the repeated prompt gives the first one's tokens */
            CHECK(na[3] == na[0] && memcmp(b[3], b[0], sizeof(int32_t) * (size_t)na[0]) == 0);
    }
out:
    trio_free(&ctxs);
}

/* A media sequence joining a running batch on a deferred context: wlm_generate_batch_add_media
 * records its prompt into the free slot and returns WLM_NEED_LOGITS, the backend runs it, then
 * wlm_generate_batch_add_media_finish joins it (cut before its last token, which the next
 * step evaluates); both sequences' tokens must equal an ordinary context's doing the same
 * joins (a prompt without images takes the same path: tests/js/webgpu_images.test.mjs joins
 * images on the GPU). In between, the batch refuses its other calls; a finish before the run
 * drops the sequence; an abort with one joining ends the batch, the slot freed. */
static void test_media_join(const wlm_model *m) {
    tu_section("a media sequence joins a running batch on a deferred context");
    trio ctxs = trio_new(m, 64, 3);
    wlm_context *plain = ctxs.plain, *d = ctxs.d, *ref = ctxs.ref;
    if (!plain || !d || !ref) goto out;
    wlm_gen_params gp;
    wlm_gen_params_default(&gp);
    gp.temperature = 0.0f;
    gp.max_tokens = 16;
    gp.banned = EOS_BAN;
    gp.n_banned = 1;
    int32_t toks[64];
    const int32_t n = wlm_tokenize(m, "Once upon a time", 16, 1, toks, 64);
    const char *jp[2] = {"The little dog", "Lily and Ben were"};
    int32_t out[2][3][32];
    int cnt[2][3] = {{0}};
    for (int k = 0; k < 2; k++) {
        wlm_context *c = k ? d : plain, *r = k ? ref : NULL;
        CHECK_STATUS(wlm_generate_begin(c, toks, n, &gp), WLM_OK);
        if (r) CHECK_STATUS(supply(c, r), WLM_OK);
        wlm_token t[3];
        for (int step = 0; step < 40; step++) {
            int rc = wlm_generate_batch_next(c, t);
            if (r && rc == WLM_NEED_LOGITS) {
                CHECK_STATUS(supply(c, r), WLM_OK);
                rc = wlm_generate_batch_resume(c, t);
            }
            if (rc < 0) {
                CHECK_STATUS(rc, WLM_OK);
                break;
            }
            for (int s = 0; s < c->n_gen; s++)
                if (t[s].status == WLM_OK && cnt[k][s] < 32) out[k][s][cnt[k][s]++] = t[s].id;
            if (rc == WLM_DONE) break;
            if (step != 0 && step != 3) continue; /* joins after steps 0 and 3 */
            const char *q = jp[step != 0];
            int32_t slot = wlm_generate_batch_add_media(c, NULL, q, strlen(q), NULL, 0, &gp);
            if (r) {
                CHECK_STATUS(slot, WLM_NEED_LOGITS);
                CHECK(c->dfr_n > 0 && c->dfr_join == (step ? 3 : 2));
                CHECK_STATUS(wlm_generate_batch_next(c, t), WLM_ERR_STATE);
                CHECK_STATUS(wlm_generate_batch_add(c, toks, n, &gp), WLM_ERR_STATE);
                CHECK_STATUS(wlm_generate_batch_end(c, 0), WLM_ERR_STATE);
                CHECK_STATUS(supply(c, r), WLM_OK);
                slot = wlm_generate_batch_add_media_finish(c, &gp);
            }
            CHECK_STATUS(slot, step ? 2 : 1);
        }
    }
    for (int s = 0; s < 3; s++)
        CHECKF(cnt[0][s] == cnt[1][s] && cnt[0][s] >= 10 &&
                   memcmp(out[0][s], out[1][s], sizeof(int32_t) * (size_t)cnt[0][s]) == 0,
               "sequence %d: %d vs %d tokens", s, cnt[0][s], cnt[1][s]);
    /* a finish before the backend ran the prompt drops it; an abort ends the batch */
    wlm_token t[3];
    CHECK_STATUS(wlm_generate_begin(d, toks, n, &gp), WLM_OK);
    CHECK_STATUS(supply(d, ref), WLM_OK);
    CHECK_STATUS(wlm_generate_batch_next(d, t), WLM_OK);
    CHECK_STATUS(wlm_generate_batch_add_media_finish(d, &gp), WLM_ERR_STATE); /* none joining */
    CHECK_STATUS(wlm_generate_batch_add_media(d, NULL, jp[0], strlen(jp[0]), NULL, 0, &gp), WLM_NEED_LOGITS);
    CHECK_STATUS(wlm_generate_batch_add_media_finish(d, &gp), WLM_ERR_STATE);
    CHECK(d->dfr_n == 0 && d->dfr_join == 0 && d->seqs[1].n_past == 0 && d->n_gen == 1);
    CHECK_STATUS(wlm_generate_batch_add_media(d, NULL, jp[0], strlen(jp[0]), NULL, 0, &gp), WLM_NEED_LOGITS);
    wlm_generate_abort(d);
    CHECK_STATUS(wlm_generate_batch_next(d, t), WLM_DONE);
    CHECK(t[0].stop_reason == WLM_STOP_ABORTED);
    CHECK(d->dfr_n == 0 && d->dfr_join == 0 && d->seqs[1].n_past == 0);
out:
    trio_free(&ctxs);
}

/* Beam search on a deferred context: each step's forks are recorded for the backend (applied
 * by supply() before the step's batch, as the GPU copies the rows); the beams must equal an
 * ordinary context's, token for token and score for score. */
static void test_beam(const wlm_model *m) {
    tu_section("beam search on a deferred context equals an ordinary one");
    trio ctxs = trio_new(m, 64, 8);
    wlm_context *plain = ctxs.plain, *d = ctxs.d, *ref = ctxs.ref;
    if (!plain || !d || !ref) goto out;
    int32_t prompt[16];
    const int32_t n = wlm_tokenize(m, "Once upon a time", 16, 1, prompt, 16);
    for (int width = 1; width <= 4; width += 3) {
        wlm_beam_params bp;
        wlm_beam_params_default(&bp);
        bp.width = width;
        bp.max_tokens = 24;
        CHECK_STATUS(wlm_beam_begin(plain, prompt, n, &bp), WLM_OK);
        while (wlm_beam_step(plain) == WLM_OK) {}
        CHECK_STATUS(wlm_beam_begin(d, prompt, n, &bp), WLM_OK);
        CHECK_STATUS(supply(d, ref), WLM_OK);
        int steps = 0, rc;
        while ((rc = wlm_beam_step(d)) == WLM_OK) {
            CHECK(width == 1 || steps == 0 || d->dfr_n_fork > 0 || d->dfr_n == 0);
            CHECK_STATUS(supply(d, ref), WLM_OK);
            steps++;
        }
        CHECK_STATUS(rc, WLM_DONE);
        CHECK(steps > 10);
        CHECKF(wlm_beam_count(plain) == wlm_beam_count(d) && wlm_beam_count(d) == width,
               "width %d: %d vs %d beams", width, (int)wlm_beam_count(plain), (int)wlm_beam_count(d));
        for (int32_t i = 0; i < wlm_beam_count(d); i++) {
            wlm_beam a, b;
            CHECK_STATUS(wlm_beam_get(plain, i, &a), WLM_OK);
            CHECK_STATUS(wlm_beam_get(d, i, &b), WLM_OK);
            CHECKF(a.n_tokens == b.n_tokens && a.logprob == b.logprob && a.stop_reason == b.stop_reason &&
                       memcmp(a.tokens, b.tokens, sizeof(int32_t) * (size_t)a.n_tokens) == 0,
                   "width %d beam %d: %d tokens %g vs %d tokens %g", width, (int)i, (int)a.n_tokens,
                   (double)a.logprob, (int)b.n_tokens, (double)b.logprob);
        }
    }
out:
    trio_free(&ctxs);
}

/* Context shift on a deferred context: C shifts its bookkeeping and leaves the rows to the
 * backend (dfr_shift, applied by supply() before the next batch, as the GPU does); generation
 * past n_ctx must equal an ordinary context's, and the prompt cache must trust only the kept
 * prefix afterwards. */
static void test_context_shift(const wlm_model *m) {
    tu_section("context shift on a deferred context equals an ordinary one");
    trio ctxs = trio_new(m, 40, 1);
    wlm_context *plain = ctxs.plain, *d = ctxs.d, *ref = ctxs.ref;
    if (!plain || !d || !ref) goto out;
    for (int sampled = 0; sampled < 2; sampled++) {
        wlm_gen_params p;
        wlm_gen_params_default(&p);
        p.max_tokens = 100; /* past n_ctx 40 several times */
        p.seed = 9;
        p.context_shift = 1;
        p.n_keep = 5;
        p.cache_prompt = 1;
        if (!sampled) p.temperature = 0.0f;
        p.banned = EOS_BAN; /* no end of text: every run reaches its 100 tokens */
        p.n_banned = 1;
        int32_t a[128], b[128], sa = -1, sb = -1;
        char ta[4096], tb[4096];
        int na = generate(plain, NULL, "Once upon a time", &p, a, 128, &sa, ta, sizeof ta);
        int nb = generate(d, ref, "Once upon a time", &p, b, 128, &sb, tb, sizeof tb);
        CHECKF(na == 100 && na == nb && memcmp(a, b, sizeof(int32_t) * (size_t)na) == 0,
               "%s: %d vs %d tokens", sampled ? "sampled" : "greedy", na, nb);
        CHECK(sa == sb && strcmp(ta, tb) == 0);
        CHECK(wlm_context_n_past(plain) == wlm_context_n_past(d));
        /* the next prompt may reuse only the kept prefix (at most n_keep) */
        na = generate(plain, NULL, "Once upon a time there", &p, a, 8, &sa, ta, sizeof ta);
        nb = generate(d, ref, "Once upon a time there", &p, b, 8, &sb, tb, sizeof tb);
        CHECK(na == nb && memcmp(a, b, sizeof(int32_t) * (size_t)na) == 0);
        CHECKF(wlm_generate_n_cached(d) == wlm_generate_n_cached(plain) &&
                   wlm_generate_n_cached(d) <= 5,
               "cached %d vs %d", (int)wlm_generate_n_cached(d), (int)wlm_generate_n_cached(plain));
    }
    /* the public call: recorded, not applied; a second one before a batch is refused; a reset
     * forgets it */
    wlm_context_reset(d);
    const int32_t toks[] = {1, 403, 407, 261, 378, 300, 302, 303};
    CHECK_STATUS(wlm_eval(d, toks, 8), WLM_OK);
    CHECK_STATUS(supply(d, ref), WLM_OK);
    CHECK_STATUS(wlm_seq_shift(d, 0, 2, 3), WLM_OK);
    CHECK(d->dfr_shift[0][0] == 2 && d->dfr_shift[0][1] == 3 && d->dfr_shift[0][2] == 8);
    CHECK(wlm_context_n_past(d) == 5);
    CHECK_STATUS(wlm_seq_shift(d, 0, 1, 1), WLM_ERR_STATE);
    wlm_context_reset(d);
    CHECK(d->dfr_shift[0][1] == 0);
out:
    trio_free(&ctxs);
}

/* Speculative decoding with a deferred target (the GPU backend's case): each round's
 * verification is recorded, waits for its logits, then is decided. With the same logits it
 * must give what an ordinary context's speculative decoding gives, token for token and round
 * for round: prompt lookup (rejections: drafts copied from the prompt) and a draft model (an
 * ordinary context of the same model: every draft accepted), greedy and sampled. */
static void test_speculative(const wlm_model *m) {
    tu_section("speculative decoding on a deferred target equals an ordinary one");
    trio ctxs = trio_new(m, 256, 1);
    wlm_context *plain = ctxs.plain, *d = ctxs.d, *ref = ctxs.ref;
    wlm_context *draft_a = tu_context(m, 256, 0, 1, WLM_KV_F16);
    wlm_context *draft_b = tu_context(m, 256, 0, 1, WLM_KV_F16);
    if (!plain || !d || !ref || !draft_a || !draft_b) goto out;
    /* copy-heavy: the story twice, so that prompt lookup finds what follows */
    const char *prompt = "Once upon a time, there was a little girl named Lily. She loved to play "
                         "outside. Once upon a time, there was a little girl named Lily. She";
    for (int mode = 0; mode < 4; mode++) {
        const int sampled = mode & 1, use_draft = mode >> 1;
        wlm_gen_params p;
        wlm_gen_params_default(&p);
        p.max_tokens = 60;
        p.seed = 5;
        if (!sampled) p.temperature = 0.0f;
        wlm_spec_params sa, sb;
        wlm_spec_params_default(&sa);
        sa.n_draft = 4;
        if (use_draft) sa.draft = draft_a;
        else sa.ngram = 3;
        sb = sa;
        if (use_draft) sb.draft = draft_b;
        int32_t a[64], b[64], sta = -1, stb = -1;
        char ta[4096], tb[4096];
        int na = generate_spec(plain, NULL, prompt, &p, &sa, a, 64, &sta, ta, sizeof ta);
        wlm_spec_stats xa, xb;
        CHECK_STATUS(wlm_spec_stats_get(plain, &xa), WLM_OK);
        int nb = generate_spec(d, ref, prompt, &p, &sb, b, 64, &stb, tb, sizeof tb);
        CHECK_STATUS(wlm_spec_stats_get(d, &xb), WLM_OK);
        const char *what = use_draft ? (sampled ? "draft, sampled" : "draft, greedy")
                                     : (sampled ? "lookup, sampled" : "lookup, greedy");
        CHECKF(na == nb && na > 0 && memcmp(a, b, sizeof(int32_t) * (size_t)na) == 0,
               "%s: %d vs %d tokens", what, na, nb);
        CHECK(sta == stb && strcmp(ta, tb) == 0);
        CHECKF(xa.n_rounds == xb.n_rounds && xa.n_drafted == xb.n_drafted &&
                   xa.n_accepted == xb.n_accepted && xb.n_rounds > 0,
               "%s: rounds %d/%d drafted %d/%d accepted %d/%d", what, (int)xa.n_rounds,
               (int)xb.n_rounds, (int)xa.n_drafted, (int)xb.n_drafted, (int)xa.n_accepted,
               (int)xb.n_accepted);
        if (!use_draft && !sampled) /* the lookup's drafts are not all right: rejections ran */
            CHECKF(xb.n_accepted < xb.n_drafted, "accepted %d of %d", (int)xb.n_accepted,
                   (int)xb.n_drafted);
        CHECKF(wlm_context_n_past(plain) == wlm_context_n_past(d), "%s: n_past %d vs %d", what,
               (int)wlm_context_n_past(plain), (int)wlm_context_n_past(d));
    }
    /* a round waiting for its logits: resume refuses before they come; an abort then drops the
     * recorded positions (n_past back to the round's start), as for a plain step */
    wlm_gen_params p;
    wlm_gen_params_default(&p);
    p.temperature = 0.0f;
    p.max_tokens = 30;
    wlm_spec_params sp;
    wlm_spec_params_default(&sp);
    sp.ngram = 2;
    sp.n_draft = 4;
    CHECK_STATUS(wlm_generate_begin_text(d, prompt, &p), WLM_OK);
    CHECK_STATUS(wlm_generate_speculate(d, &sp), WLM_OK);
    CHECK_STATUS(supply(d, ref), WLM_OK);
    wlm_token t;
    int rc = WLM_OK;
    int32_t before = 0;
    for (int i = 0; i < 30 && rc == WLM_OK; i++) { /* until a round is recorded */
        before = wlm_context_n_past(d);
        rc = wlm_generate_next(d, &t);
        if (rc == WLM_NEED_LOGITS && d->dfr_n < 2) { /* a plain step: go on */
            CHECK(d->dfr_exact == 0);
            CHECK_STATUS(supply(d, ref), WLM_OK);
            rc = wlm_generate_batch_resume(d, &t);
            if (rc >= 0) rc = t.status;
        }
    }
    CHECK_STATUS(rc, WLM_NEED_LOGITS);
    CHECK(d->dfr_exact == 1); /* a verification: the GPU keeps its logits one-token exact */
    CHECKF(d->dfr_n >= 2 && wlm_context_n_past(d) == before + d->dfr_n, "recorded %d at %d of %d",
           (int)d->dfr_n, (int)before, (int)wlm_context_n_past(d));
    CHECK_STATUS(wlm_generate_batch_resume(d, &t), WLM_ERR_STATE); /* logits not supplied */
    wlm_generate_abort(d);
    CHECK_STATUS(wlm_generate_next(d, &t), WLM_DONE);
    CHECK(t.stop_reason == WLM_STOP_ABORTED);
    CHECKF(wlm_context_n_past(d) == before, "n_past %d after the dropped round, want %d",
           (int)wlm_context_n_past(d), (int)before);
    /* a deferred draft context is refused */
    wlm_context *d2 = deferred_ctx(m, 64, 1);
    if (d2) {
        CHECK_STATUS(wlm_generate_begin_text(plain, "Once", &p), WLM_OK);
        wlm_spec_params_default(&sp);
        sp.draft = d2;
        CHECK_STATUS(wlm_generate_speculate(plain, &sp), WLM_ERR_UNSUPPORTED);
        wlm_generate_abort(plain);
        wlm_context_free(d2);
    }
out:
    trio_free(&ctxs);
    wlm_context_free(draft_a);
    wlm_context_free(draft_b);
}

static void test_describe(const wlm_model *m) {
    tu_section("wlm_model_describe");
    int64_t n = wlm_model_describe(m, NULL, 0);
    CHECK(n > 100);
    char *buf = malloc((size_t)n + 1);
    CHECK(wlm_model_describe(m, buf, (size_t)n + 1) == n && (int64_t)strlen(buf) == n);
    CHECK(strstr(buf, "\"name\":\"llama\"") && strstr(buf, "\"rope\":\"norm\"") &&
          strstr(buf, "\"dim\":64,") && strstr(buf, "\"n_layers\":5,"));
    char small[16];
    CHECK(wlm_model_describe(m, small, sizeof small) == n && strlen(small) == sizeof small - 1);
    free(buf);
}

int main(int argc, char **argv) {
    tu_find_shared(argc, argv);
    model_bytes = tu_read_shared("models/stories260K.bin", &model_size);
    tok_bytes = tu_read_shared("models/tok512.bin", &tok_size);
    if (!model_bytes || !tok_bytes) return TEST_FINISH();
    wlm_model *m = NULL;
    int rc = wlm_model_load(model_bytes, model_size, 0, &m);
    if (rc == WLM_OK) rc = wlm_model_load_tokenizer(m, tok_bytes, tok_size);
    CHECK_STATUS(rc, WLM_OK);
    if (rc == WLM_OK) {
        test_generation_equal(m);
        test_drop_and_refusals(m);
        test_image_rows(m);
        test_speculative(m);
        test_context_shift(m);
        test_batch(m);
        test_media_join(m);
        test_beam(m);
        test_describe(m);
    }
    const char *synth = getenv("WASMLM_SYNTH_DIR");
    if (synth && synth[0]) test_mrope_rows(synth);
    else printf("M-RoPE rows skipped: WASMLM_SYNTH_DIR is not set (CTest's synth_embed fixture writes the model)\n");
    wlm_model_free(m);
    free(model_bytes);
    free(tok_bytes);
    return TEST_FINISH();
}
