/*
 * test_threads.c — the thread pool: argument errors; a stress run of the fork-join protocol
 * (every chunk of every job runs exactly once, with the caller and helpers racing for them);
 * and the forward pass split over 2 and 3 threads gives logits bitwise equal to one thread, for
 * every weight type (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, MXFP4, Q2_K..Q6_K) and the
 * Q4_K_M and Q3_K_M mixes, in prefill, decode and multi-sequence
 * batches, at positions where attention is split by heads as well as the matrix products by rows,
 * once with every chunk left to the helpers (the pool's counters prove it).
 * The model is a random llama2.c checkpoint built here, big enough (dim 256, hidden 768, GQA)
 * for its products to pass the pool's size threshold; the quantized ones are written from it
 * by the library's GGUF quantizer in memory. In wasm without atomics (the CTest build), only
 * the single-thread contract and the UNSUPPORTED error are checked.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf_write.h"
#include "model/model.h"
#include "kernels/quantize.h"
#include "runtime/threadpool.h"
#include "wasmlm.h"
#include "test_util.h"

#if !defined(__EMSCRIPTEN__) || defined(__wasm_atomics__)
#define HAVE_THREADS 1
#else
#define HAVE_THREADS 0
#endif

enum { DIM = 256, HID = 768, LAYERS = 2, HEADS = 8, KV_HEADS = 4, VOCAB = 512, SEQ = 256 };

/* Prompt length: attention at positions >= 128 passes the split threshold (2 x 8 heads x 32 x
 * positions >= 2^16 multiply-adds), so prefill and decode split attention by heads too. */
#define PROMPT 150

#if HAVE_THREADS
/* A llama2.c version-0 checkpoint with random weights scaled by 1/sqrt(columns). */
static unsigned char *random_checkpoint(size_t *size) {
    const size_t D = DIM, H = HID, L = LAYERS, V = VOCAB, S = SEQ;
    const size_t hs = D / HEADS, kv = hs * KV_HEADS;
    const size_t counts[] = {V * D, L * D, L * D * D, L * kv * D, L * kv * D, L * D * D, L * D,
                             L * H * D, L * D * H, L * H * D, D, S * hs / 2, S * hs / 2};
    const size_t cols[] = {D, 0, D, D, D, D, 0, D, H, D, 0, 1, 1}; /* 0: a norm vector */
    size_t n = 0;
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) n += counts[i];
    *size = 28 + 4 * n;
    unsigned char *p = malloc(*size);
    if (!p) return NULL;
    const int32_t hdr[7] = {DIM, HID, LAYERS, HEADS, KV_HEADS, VOCAB, SEQ};
    memcpy(p, hdr, sizeof hdr);
    float *f = (float *)(void *)(p + 28);
    tu_rng rng = {42};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        const float amp = cols[i] ? 1.7f / sqrtf((float)cols[i]) : 0.25f;
        for (size_t j = 0; j < counts[i]; j++)
            *f++ = (cols[i] ? 0.0f : 1.0f) + tu_rng_uniform(&rng, -amp, amp);
    }
    return p;
}
#endif

/* ------------------------------------------------------------------------------------------ */

static void test_errors(void) {
    tu_section("argument errors");
    wlm_threadpool *p = (wlm_threadpool *)1;
    CHECK_STATUS(wlm_threadpool_new(0, &p), WLM_ERR_INVALID_ARG);
    CHECK(p == NULL);
    CHECK_STATUS(wlm_threadpool_new(WLM_MAX_THREADS + 1, &p), WLM_ERR_INVALID_ARG);
    CHECK_STATUS(wlm_threadpool_new(2, NULL), WLM_ERR_INVALID_ARG);
    CHECK_STATUS(wlm_threadpool_work(NULL), WLM_ERR_INVALID_ARG);
    CHECK_STATUS(wlm_context_set_threadpool(NULL, NULL), WLM_ERR_INVALID_ARG);
    CHECK_EQ_INT(wlm_threadpool_size(NULL), 1);
    wlm_threadpool_free(NULL);
    CHECK_STATUS(wlm_threadpool_new(1, &p), WLM_OK);
    CHECK_EQ_INT(wlm_threadpool_size(p), 1);
    wlm_threadpool_free(p);
#if !HAVE_THREADS
    CHECK_STATUS(wlm_threadpool_new(2, &p), WLM_ERR_UNSUPPORTED);
#endif
}

/* ------------------------------------------------------------------------------------------ */

#if HAVE_THREADS
typedef struct stress_job {
    int32_t *hits;  /* (n) how often each chunk ran in this job */
    int32_t n;
    int bad;        /* a chunk saw the wrong chunk count */
} stress_job;

static void stress_chunk(void *arg, int32_t i, int32_t n) {
    stress_job *j = arg;
    if (n != j->n || i < 0 || i >= n) {
        j->bad = 1;
        return;
    }
    j->hits[i]++; /* each chunk is claimed by exactly one thread */
}

/* 20000 jobs of 1..7 chunks; the first half with the caller racing the helpers for chunks,
 * the second with the helpers alone (so that they certainly run, whatever the scheduler). */
static void test_stress(void) {
    tu_section("fork-join stress: 20000 jobs on 3 threads");
    wlm_threadpool *p = NULL;
    CHECK_STATUS(wlm_threadpool_new(3, &p), WLM_OK);
    if (!p) return;
    int32_t hits[7];
    int wrong = 0;
    int64_t chunks = 0;
    for (int it = 0; it < 20000; it++) {
        stress_job j = {hits, 1 + it % 7, 0};
        memset(hits, 0, sizeof hits);
        if (it == 10000) wlm_threadpool_helpers_only(p, 1);
        wlm_pool_run(p, stress_chunk, &j, j.n);
        for (int32_t i = 0; i < j.n; i++) wrong += hits[i] != 1;
        wrong += j.bad;
        if (it >= 10000 && j.n > 1) chunks += j.n;
    }
    CHECKF(wrong == 0, "%d chunks ran other than once", wrong);
    int64_t jobs, helper;
    wlm_threadpool_stats(p, &jobs, &helper);
    CHECKF(jobs == 17142 && helper >= chunks, "jobs %lld, chunks run by helpers %lld (>= %lld)",
           (long long)jobs, (long long)helper, (long long)chunks);
    wlm_threadpool_free(p);
}

/* ------------------------------------------------------------------------------------------ */

/* Logits of: a PROMPT-token prefill, 3 decode steps, then a batch of two sequences (3 + 2 tokens),
 * written one after another into out (N_ROWS rows of VOCAB). */
#define N_ROWS 6
static int run_model(const wlm_model *m, wlm_threadpool *pool, float *out) {
    wlm_context_params cp;
    wlm_context_params_default(&cp);
    cp.n_seq_max = 2;
    wlm_context *c = NULL;
    int rc = wlm_context_new(m, &cp, &c);
    if (rc == WLM_OK) rc = wlm_context_set_threadpool(c, pool);
    int32_t prompt[PROMPT];
    for (int32_t i = 0; i < PROMPT; i++) prompt[i] = i == 0 ? 1 : (int32_t)((i * 7919) % VOCAB);
    int row = 0;
    if (rc == WLM_OK) rc = wlm_eval(c, prompt, PROMPT);
    if (rc == WLM_OK) memcpy(out + (size_t)row++ * VOCAB, wlm_logits(c), VOCAB * sizeof(float));
    for (int32_t t = 0; t < 3 && rc == WLM_OK; t++) {
        const int32_t tok = 30 + 100 * t;
        rc = wlm_eval(c, &tok, 1);
        if (rc == WLM_OK) memcpy(out + (size_t)row++ * VOCAB, wlm_logits(c), VOCAB * sizeof(float));
    }
    if (rc == WLM_OK) rc = wlm_seq_fork(c, 0, 1);
    const int32_t toks[5] = {5, 6, 7, 8, 9}, seqs[5] = {0, 1, 0, 1, 0};
    const uint8_t want[5] = {0, 0, 0, 1, 1};
    if (rc == WLM_OK) rc = wlm_eval_batch(c, toks, seqs, want, 5);
    for (int32_t i = 0; i < 2 && rc == WLM_OK; i++)
        memcpy(out + (size_t)row++ * VOCAB, wlm_logits_ith(c, 3 + i), VOCAB * sizeof(float));
    if (rc != WLM_OK) printf("run_model: %s %s\n", wlm_status_name(rc), wlm_context_errmsg(c));
    wlm_context_free(c);
    return rc;
}

static void test_forward(const unsigned char *ckpt, size_t ckpt_size) {
    /* every weight type, and llama.cpp's mixes (mix != 0: several types in one model) */
    static const struct { int32_t type, mix; } types[] = {
        {WLM_TYPE_F32, 0},  {WLM_TYPE_F16, 0},  {WLM_TYPE_Q8_0, 0}, {WLM_TYPE_Q4_0, 0},
        {WLM_TYPE_Q4_K, 0}, {WLM_TYPE_Q6_K, 0}, {WLM_TYPE_BF16, 0}, {WLM_TYPE_Q4_1, 0},
        {WLM_TYPE_Q5_0, 0}, {WLM_TYPE_Q5_1, 0}, {WLM_TYPE_Q2_K, 0}, {WLM_TYPE_Q3_K, 0},
        {WLM_TYPE_Q5_K, 0}, {WLM_TYPE_MXFP4, 0}, {0, WLM_QUANT_MIX_Q4_K_M},
        {0, WLM_QUANT_MIX_Q3_K_M}};
    /* Under the sanitizers (tools/test.sh sets WASMLM_TEST_TYPES=quick) one type of each kind is
     * enough to find races and memory errors — float, 32-element blocks, K-quant super-blocks,
     * a mix — and takes a few seconds instead of minutes; the plain run covers every type. */
    const char *which = getenv("WASMLM_TEST_TYPES");
    const int quick = which && strcmp(which, "quick") == 0;
    wlm_model *src = NULL;
    int rc = wlm_model_load(ckpt, ckpt_size, 0, &src);
    CHECKF(rc == WLM_OK, "checkpoint: %s", wlm_model_errmsg(src));
    float *ref = malloc((size_t)N_ROWS * VOCAB * sizeof(float));
    float *got = malloc((size_t)N_ROWS * VOCAB * sizeof(float));
    for (size_t ti = 0; rc == WLM_OK && ti < sizeof types / sizeof types[0]; ti++) {
        if (quick && !(types[ti].mix == WLM_QUANT_MIX_Q4_K_M ||
                       (!types[ti].mix && (types[ti].type == WLM_TYPE_F32 ||
                                           types[ti].type == WLM_TYPE_Q8_0 ||
                                           types[ti].type == WLM_TYPE_Q4_K))))
            continue;
        char name[64];
        snprintf(name, sizeof name, "threads 1/2/3(/16) bitwise equal: %s",
                 types[ti].mix ? wlm_quantize_mix_name(types[ti].mix)
                               : wlm_type_get(types[ti].type)->name);
        tu_section(name);
        /* the F32 checkpoint itself, the others through the quantizer */
        unsigned char *file = NULL;
        size_t size = 0;
        wlm_model *m = src;
        if (types[ti].mix || types[ti].type != WLM_TYPE_F32) {
            wlm_gguf_writer w;
            wlm_gguf_writer_init(&w, NULL);
            wlm_quantize_params qp;
            wlm_quantize_params_default(&qp);
            qp.type = types[ti].type;
            qp.mix = types[ti].mix;
            char err[256] = "";
            int qrc = wlm_quantize_write(src, &w, &qp, err, sizeof err);
            CHECKF(qrc == WLM_OK, "quantize: %s", err);
            if (qrc == WLM_OK) file = wlm_gguf_writer_take(&w, &size);
            wlm_gguf_writer_free(&w);
            m = NULL;
            qrc = file ? wlm_model_load(file, size, 0, &m) : WLM_ERR_NOMEM;
            CHECKF(qrc == WLM_OK, "load: %s", m ? wlm_model_errmsg(m) : "");
            if (qrc != WLM_OK) {
                wlm_model_free(m);
                free(file);
                continue;
            }
        }
        CHECK_STATUS(run_model(m, NULL, ref), WLM_OK);
        /* 2 and 3 threads as they run, then 2 threads with every chunk left to the helpers (so
         * that rows computed on another thread are certainly part of the comparison); for F32
         * and Q8_0 also WLM_MAX_THREADS (16: the pool's largest split, oversubscribed on a small
         * machine, which is what a race detector wants) */
        const int wide = !types[ti].mix && (types[ti].type == WLM_TYPE_F32 || types[ti].type == WLM_TYPE_Q8_0);
        for (int32_t run = 0; run < (wide ? 4 : 3); run++) {
            const int32_t nt = run == 1 ? 3 : run == 3 ? WLM_MAX_THREADS : 2;
            wlm_threadpool *p = NULL;
            CHECK_STATUS(wlm_threadpool_new(nt, &p), WLM_OK);
            if (!p) continue;
            wlm_threadpool_helpers_only(p, run == 2);
            memset(got, 0xff, (size_t)N_ROWS * VOCAB * sizeof(float));
            CHECK_STATUS(run_model(m, p, got), WLM_OK);
            int first = -1;
            for (size_t i = 0; i < (size_t)N_ROWS * VOCAB && first < 0; i++)
                if (memcmp(&ref[i], &got[i], sizeof(float)) != 0) first = (int)i;
            CHECKF(first < 0, "%d threads: logit %d (row %d) differs: %.9g vs %.9g", (int)nt,
                   first, first / VOCAB, first >= 0 ? ref[first] : 0.0, first >= 0 ? got[first] : 0.0);
            int64_t jobs, helper;
            wlm_threadpool_stats(p, &jobs, &helper);
            /* at least wq, wo, w1, w2, w3 per layer and the classifier (wk and wv of one
             * token are under the size threshold) in each of the 5 evaluations, and the
             * attention of the entries past position 128 per layer */
            CHECKF(jobs >= 5 * (5 * LAYERS + 1) + (PROMPT - 128 + 3 + 5) * LAYERS &&
                       (run != 2 || helper == jobs * nt),
                   "%d threads%s: %lld parallel products, %lld chunks run by helpers", (int)nt,
                   run == 2 ? " (helpers only)" : "", (long long)jobs, (long long)helper);
            wlm_threadpool_free(p);
        }
        if (m != src) wlm_model_free(m);
        free(file);
    }
    free(ref);
    free(got);
    wlm_model_free(src);
}

/* The same protocol with WLM_MAX_THREADS threads: 15 helpers racing the caller for chunks
 * (oversubscribed here; correctness, not speed), jobs of 1..40 chunks. */
static void test_stress_wide(void) {
    tu_section("fork-join stress: 4000 jobs on 16 threads");
    wlm_threadpool *p = NULL;
    CHECK_STATUS(wlm_threadpool_new(WLM_MAX_THREADS, &p), WLM_OK);
    if (!p) return;
    int32_t hits[40];
    int wrong = 0;
    for (int it = 0; it < 4000; it++) {
        stress_job j = {hits, 1 + it % 40, 0};
        memset(hits, 0, sizeof hits);
        if (it == 2000) wlm_threadpool_helpers_only(p, 1);
        wlm_pool_run(p, stress_chunk, &j, j.n);
        for (int32_t i = 0; i < j.n; i++) wrong += hits[i] != 1;
        wrong += j.bad;
    }
    CHECKF(wrong == 0, "%d chunks ran other than once", wrong);
    wlm_threadpool_free(p);
}
#endif /* HAVE_THREADS */

int main(int argc, char **argv) {
    (void)argc, (void)argv;
    test_errors();
#if HAVE_THREADS
    test_stress();
    test_stress_wide();
    size_t size = 0;
    unsigned char *ckpt = random_checkpoint(&size);
    CHECK(ckpt != NULL);
    if (ckpt) test_forward(ckpt, size);
    free(ckpt);
#endif
    return TEST_FINISH();
}
