/*
 * test_embed.c — embeddings and reranking (src/runtime/embed.c, the encoder rows of arch.c and
 * forward.c's non-causal pass) on synthetic models written by tools/synth_gguf.mjs into
 * $WASMLM_SYNTH_DIR (a CTest fixture): BERT tiny (mean pooling), its reranker shape, nomic-bert
 * tiny, Qwen3-Embedding tiny (last-token pooling, causal) and EmbeddingGemma tiny (symmetric
 * sliding windows, dense_2 / dense_3 after pooling). Agreement with llama.cpp itself is
 * tests/js/embed.test.mjs's (the records in tests/reference/oracle/embed/); this test checks what must
 * hold whatever the weights:
 *  - the model facts (wlm_model_embed_info) and that an encoder refuses to generate;
 *  - pooling: MEAN is the average of the per-token vectors (NONE), CLS the first, LAST the last;
 *  - attention: bidirectional for encoders (the last token changes the first token's vector),
 *    causal for Qwen3 (it does not, bitwise);
 *  - texts embedded together equal each alone, and 2 threads equal 1, bitwise;
 *  - normalization: L2 norm 1, taxicab 1, max |x| 32760, raw untouched;
 *  - errors: empty text, id outside the vocabulary, rank without a head, too long, small cap.
 */
#include "wasmlm.h"
#include "test_util.h"

static wlm_model *load(const char *dir, const char *name) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) {
        CHECKF(0, "cannot open %s", path);
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *buf = malloc((size_t)n);
    size_t got = buf ? fread(buf, 1, (size_t)n, f) : 0;
    fclose(f);
    wlm_model *m = NULL;
    int rc = got == (size_t)n ? wlm_model_load(buf, (size_t)n, WLM_LOAD_OWN_BUFFER, &m) : WLM_ERR_TRUNCATED;
    CHECKF(rc == WLM_OK, "%s: %s %s", name, wlm_status_name(rc), wlm_model_errmsg(m));
    if (rc != WLM_OK) {
        if (!m) free(buf);
        wlm_model_free(m);
        return NULL;
    }
    return m;
}

static int32_t tok(const wlm_model *m, const char *text, int32_t *ids, int32_t cap) {
    int32_t n = wlm_tokenize(m, text, strlen(text), 1, ids, cap);
    CHECKF(n > 0 && n <= cap, "tokenize \"%s\": %d", text, (int)n);
    return n;
}

/* Embeds one token sequence; returns the floats written. */
static int32_t embed1(wlm_context *c, const int32_t *ids, int32_t n, int32_t pooling, int32_t norm,
                      float *out, size_t cap) {
    int32_t r = wlm_embed(c, ids, &n, 1, pooling, norm, out, cap);
    CHECKF(r > 0, "wlm_embed: %s %s", wlm_status_name(r), wlm_context_errmsg(c));
    return r;
}

static float max_abs_diff(const float *a, const float *b, int32_t n) {
    float d = 0.0f;
    for (int32_t i = 0; i < n; i++) d = fmaxf(d, fabsf(a[i] - b[i]));
    return d;
}

static void test_info_and_refusals(wlm_model *bert, wlm_model *rr, wlm_model *qw) {
    tu_section("model facts; an encoder does not generate");
    wlm_embed_info e;
    CHECK_STATUS(wlm_model_embed_info(bert, &e), WLM_OK);
    CHECK_EQ_INT(e.n_embd, 64);
    CHECK_EQ_INT(e.pooling, WLM_POOLING_MEAN);
    CHECK_EQ_INT(e.causal, 0);
    CHECK_EQ_INT(e.generative, 0);
    CHECK_EQ_INT(e.n_rank_out, 0);
    CHECK_STATUS(wlm_model_embed_info(rr, &e), WLM_OK);
    CHECK_EQ_INT(e.pooling, WLM_POOLING_RANK);
    CHECK_EQ_INT(e.n_rank_out, 1);
    CHECK_STATUS(wlm_model_embed_info(qw, &e), WLM_OK);
    CHECK_EQ_INT(e.pooling, WLM_POOLING_LAST);
    CHECK_EQ_INT(e.causal, 1);
    CHECK_EQ_INT(e.generative, 1);
    CHECK_STATUS(wlm_model_embed_info(NULL, &e), WLM_ERR_INVALID_ARG);

    wlm_context *c = tu_context(bert, 0, 1, 1, WLM_KV_F16);
    if (!c) return;
    wlm_gen_params gp;
    wlm_gen_params_default(&gp);
    int rc = wlm_generate_begin_text(c, "Hello world", &gp);
    CHECK_STATUS(rc, WLM_ERR_UNSUPPORTED);
    CHECKF(strstr(wlm_context_errmsg(c), "embedding model") != NULL, "message: %s",
           wlm_context_errmsg(c));
    int32_t ids[4] = {101, 7592, 2088, 102};
    CHECK_STATUS(wlm_eval(c, ids, 4), WLM_ERR_UNSUPPORTED);
    wlm_context_free(c);
}

static void test_pooling(wlm_model *bert) {
    tu_section("pooling: mean, cls and last from the per-token vectors");
    wlm_context *c = tu_context(bert, 0, 1, 1, WLM_KV_F16);
    if (!c) return;
    int32_t ids[64];
    const int32_t n = tok(bert, "The quick brown fox jumps over the lazy dog.", ids, 64);
    const int32_t D = 64;
    float *none = malloc(sizeof(float) * (size_t)n * D), v[64], mean[64] = {0};
    CHECK_EQ_INT(embed1(c, ids, n, WLM_POOLING_NONE, -1, none, (size_t)n * D), n * D);
    for (int32_t t = 0; t < n; t++)
        for (int32_t i = 0; i < D; i++) mean[i] += none[t * D + i] * (1.0f / (float)n);
    CHECK_EQ_INT(embed1(c, ids, n, WLM_POOLING_MEAN, -1, v, 64), D);
    CHECKF(max_abs_diff(v, mean, D) == 0.0f, "mean differs by %g", (double)max_abs_diff(v, mean, D));
    CHECK_EQ_INT(embed1(c, ids, n, WLM_POOLING_UNSPECIFIED, -1, v, 64), D); /* the file's: mean */
    CHECK(max_abs_diff(v, mean, D) == 0.0f);
    CHECK_EQ_INT(embed1(c, ids, n, WLM_POOLING_CLS, -1, v, 64), D);
    CHECK(memcmp(v, none, sizeof v) == 0);
    CHECK_EQ_INT(embed1(c, ids, n, WLM_POOLING_LAST, -1, v, 64), D);
    CHECK(memcmp(v, none + (size_t)(n - 1) * D, sizeof v) == 0);
    /* the per-token vectors are not all alike (a broken mask or a constant output shows) */
    CHECK(max_abs_diff(none, none + D, D) > 1e-3f);
    free(none);
    wlm_context_free(c);
}

/* Bidirectional: changing the second-to-last token changes the first token's vector; causal:
 * it does not (bitwise). */
static void test_attention_direction(wlm_model *m, int bidirectional, const char *what) {
    tu_section(what);
    wlm_context *c = tu_context(m, 0, 1, 1, WLM_KV_F32);
    if (!c) return;
    int32_t a[32], b[32];
    const int32_t n = tok(m, "one two three four", a, 32);
    tok(m, "one two three five", b, 32);
    float ea[64 * 32], eb[64 * 32];
    wlm_embed_info e;
    wlm_model_embed_info(m, &e);
    const int32_t D = e.n_embd;
    CHECK_EQ_INT(embed1(c, a, n, WLM_POOLING_NONE, -1, ea, sizeof ea / 4), n * D);
    CHECK_EQ_INT(embed1(c, b, n, WLM_POOLING_NONE, -1, eb, sizeof eb / 4), n * D);
    const float d0 = max_abs_diff(ea, eb, D);
    if (bidirectional) CHECKF(d0 > 1e-4f, "the first token did not see the last: %g", (double)d0);
    else CHECKF(d0 == 0.0f, "a causal first token changed by %g", (double)d0);
    wlm_context_free(c);
}

static void test_batch_and_threads(wlm_model *m, const char *what) {
    tu_section(what);
    static const char *const texts[] = {"Hello world", "The quick brown fox jumps over the lazy dog.",
                                        "a", "Café, naïve, résumé: déjà vu.", "1, 2, 3, 4, 5, 6,"};
    enum { N = 5 };
    int32_t ids[512], len[N], n = 0;
    for (int t = 0; t < N; t++) n += len[t] = tok(m, texts[t], ids + n, 512 - n);
    wlm_embed_info e;
    wlm_model_embed_info(m, &e);
    const int32_t D = e.n_embd;
    float *alone = calloc((size_t)N * D, sizeof(float)), *together = calloc((size_t)N * D, sizeof(float));
    float *threads = calloc((size_t)N * D, sizeof(float));
    wlm_context *c1 = tu_context(m, 256, 1, 1, WLM_KV_F16), *c4 = tu_context(m, 256, 4, 1, WLM_KV_F16);
    wlm_threadpool *pool = NULL;
    const int prc = wlm_threadpool_new(2, &pool); /* UNSUPPORTED in a build without threads */
    CHECKF(prc == WLM_OK || prc == WLM_ERR_UNSUPPORTED, "wlm_threadpool_new: %s", wlm_status_name(prc));
    if (c1 && c4) {
        for (int t = 0, o = 0; t < N; o += len[t++])
            embed1(c1, ids + o, len[t], WLM_POOLING_MEAN, 2, alone + (size_t)t * D, (size_t)D);
        CHECK_EQ_INT(wlm_embed(c4, ids, len, N, WLM_POOLING_MEAN, 2, together, (size_t)N * D), N * D);
        CHECKF(memcmp(alone, together, sizeof(float) * (size_t)N * D) == 0,
               "together differs from alone by %g", (double)max_abs_diff(alone, together, N * D));
        if (pool) {
            CHECK_STATUS(wlm_context_set_threadpool(c4, pool), WLM_OK);
            CHECK_EQ_INT(wlm_embed(c4, ids, len, N, WLM_POOLING_MEAN, 2, threads, (size_t)N * D), N * D);
            CHECKF(memcmp(alone, threads, sizeof(float) * (size_t)N * D) == 0,
                   "2 threads differ from 1 by %g", (double)max_abs_diff(alone, threads, N * D));
        }
        /* distinct texts, distinct vectors */
        CHECK(max_abs_diff(alone, alone + D, D) > 1e-3f);
    }
    wlm_context_free(c1);
    wlm_context_free(c4);
    wlm_threadpool_free(pool);
    free(alone), free(together), free(threads);
}

/* EmbeddingGemma: facts, and the dense layers after pooling: NONE gives per-token vectors
 * through dense_2 and dense_3, so the mean of the raw per-token hidden states (not of the projected
 * ones) is what MEAN projects — checked by the projections being linear: MEAN equals the mean of
 * the per-token projected vectors. */
static void test_gemma_embedding(wlm_model *gem) {
    tu_section("gemma-embedding: facts; dense projections are linear after pooling");
    wlm_embed_info e;
    CHECK_STATUS(wlm_model_embed_info(gem, &e), WLM_OK);
    CHECK_EQ_INT(e.n_embd, 64);
    CHECK_EQ_INT(e.pooling, WLM_POOLING_MEAN);
    CHECK_EQ_INT(e.causal, 0);
    CHECK_EQ_INT(e.generative, 0);
    wlm_context *c = tu_context(gem, 0, 1, 1, WLM_KV_F16);
    if (!c) return;
    int32_t ids[64];
    const int32_t n = tok(gem, "The quick brown fox jumps over the lazy dog.", ids, 64);
    float *none = malloc(sizeof(float) * (size_t)n * 64), v[64], mean[64] = {0};
    CHECK_EQ_INT(embed1(c, ids, n, WLM_POOLING_NONE, -1, none, (size_t)n * 64), n * 64);
    for (int32_t t = 0; t < n; t++)
        for (int i = 0; i < 64; i++) mean[i] += none[t * 64 + i] / (float)n;
    CHECK_EQ_INT(embed1(c, ids, n, WLM_POOLING_MEAN, -1, v, 64), 64);
    CHECKF(max_abs_diff(v, mean, 64) < 1e-4f, "mean of projections vs projected mean: %g",
           (double)max_abs_diff(v, mean, 64));
    free(none);
    wlm_context_free(c);
}

static void test_normalize(wlm_model *bert) {
    tu_section("normalization: raw, max-abs, taxicab, Euclidean, p-norm");
    wlm_context *c = tu_context(bert, 0, 1, 1, WLM_KV_F16);
    if (!c) return;
    int32_t ids[32];
    const int32_t n = tok(bert, "Hello world", ids, 32);
    float raw[64], v[64];
    embed1(c, ids, n, WLM_POOLING_MEAN, -1, raw, 64);
    double l2 = 0, l1 = 0, mx = 0, l3 = 0;
    for (int i = 0; i < 64; i++) l2 += (double)raw[i] * raw[i], l1 += fabs(raw[i]), mx = fmax(mx, fabs(raw[i])), l3 += pow(fabs(raw[i]), 3);
    CHECKF(fabs(sqrt(l2) - 1.0) > 1e-2, "raw vector already unit length (%g)", sqrt(l2));
    embed1(c, ids, n, WLM_POOLING_MEAN, 2, v, 64);
    double s = 0;
    for (int i = 0; i < 64; i++) s += (double)v[i] * v[i];
    CHECK_NEAR(sqrt(s), 1.0, 1e-6);
    CHECK_NEAR(v[7], raw[7] / sqrt(l2), 1e-6);
    embed1(c, ids, n, WLM_POOLING_MEAN, 1, v, 64);
    s = 0;
    for (int i = 0; i < 64; i++) s += fabs(v[i]);
    CHECK_NEAR(s, 1.0, 1e-5);
    embed1(c, ids, n, WLM_POOLING_MEAN, 0, v, 64);
    s = 0;
    for (int i = 0; i < 64; i++) s = fmax(s, fabs(v[i]));
    CHECK_NEAR(s, 32760.0, 0.02);
    embed1(c, ids, n, WLM_POOLING_MEAN, 3, v, 64);
    CHECK_NEAR(v[3], raw[3] / cbrt(l3), 1e-6);
    wlm_context_free(c);
}

static void test_rerank(wlm_model *rr) {
    tu_section("rerank: [CLS] query [SEP] document, one score per pair");
    const char *q = "what is a fox", *d = "the quick brown fox";
    int32_t ids[64], qi[32], di[32];
    int32_t n = wlm_tokenize_pair(rr, q, strlen(q), d, strlen(d), ids, 64);
    int32_t nq = wlm_tokenize(rr, q, strlen(q), 0, qi, 32), nd = wlm_tokenize(rr, d, strlen(d), 0, di, 32);
    CHECK_EQ_INT(n, 1 + nq + 1 + nd);
    CHECK_EQ_INT(ids[0], 101);
    CHECK_EQ_INT(ids[1 + nq], 102);
    CHECK(memcmp(ids + 1, qi, sizeof(int32_t) * (size_t)nq) == 0);
    CHECK(memcmp(ids + 2 + nq, di, sizeof(int32_t) * (size_t)nd) == 0);
    CHECK_EQ_INT(wlm_tokenize_pair(rr, q, strlen(q), d, strlen(d), NULL, 0), n);
    wlm_context *c = tu_context(rr, 0, 1, 1, WLM_KV_F16);
    if (!c) return;
    float score = 0, again = 0, h[64];
    CHECK_EQ_INT(embed1(c, ids, n, WLM_POOLING_RANK, 2, &score, 1), 1); /* never normalized */
    CHECK_EQ_INT(embed1(c, ids, n, WLM_POOLING_RANK, -1, &again, 1), 1);
    CHECK(score == again && score != 0.0f && fabsf(score) != 1.0f);
    CHECK_EQ_INT(embed1(c, ids, n, WLM_POOLING_CLS, -1, h, 64), 64);
    wlm_context_free(c);
}

static void test_errors(wlm_model *bert) {
    tu_section("errors");
    wlm_context *c = tu_context(bert, 16, 1, 1, WLM_KV_F16);
    if (!c) return;
    int32_t ids[32], zero = 0, n = tok(bert, "Hello world", ids, 32);
    float v[64];
    CHECK_STATUS(wlm_embed(c, ids, &zero, 1, WLM_POOLING_MEAN, 2, v, 64), WLM_ERR_INVALID_ARG);
    CHECK_STATUS(wlm_embed(c, ids, &n, 0, WLM_POOLING_MEAN, 2, v, 64), WLM_ERR_INVALID_ARG);
    CHECK_STATUS(wlm_embed(c, ids, &n, 1, 7, 2, v, 64), WLM_ERR_INVALID_ARG);
    CHECK_STATUS(wlm_embed(c, ids, &n, 1, WLM_POOLING_RANK, 2, v, 64), WLM_ERR_INVALID_ARG);
    CHECKF(strstr(wlm_context_errmsg(c), "cls") != NULL, "%s", wlm_context_errmsg(c));
    int32_t bad[3] = {101, 30522, 102}, three = 3;
    CHECK_STATUS(wlm_embed(c, bad, &three, 1, WLM_POOLING_MEAN, 2, v, 64), WLM_ERR_INVALID_ARG);
    int32_t lng[20], twenty = 20;
    for (int i = 0; i < 20; i++) lng[i] = 1000 + i;
    CHECK_STATUS(wlm_embed(c, lng, &twenty, 1, WLM_POOLING_MEAN, 2, v, 64), WLM_ERR_CONTEXT_FULL);
    /* a small cap: the count needed, nothing written */
    v[0] = 42.0f;
    CHECK_EQ_INT(wlm_embed(c, ids, &n, 1, WLM_POOLING_MEAN, 2, v, 10), 64);
    CHECK(v[0] == 42.0f);
    CHECK_EQ_INT(wlm_embed(c, ids, &n, 1, WLM_POOLING_NONE, 2, NULL, 0), n * 64);
    CHECK_STATUS(wlm_embed(NULL, ids, &n, 1, WLM_POOLING_MEAN, 2, v, 64), WLM_ERR_INVALID_ARG);
    /* still usable after the errors */
    CHECK_EQ_INT(wlm_embed(c, ids, &n, 1, WLM_POOLING_MEAN, 2, v, 64), 64);
    wlm_context_free(c);
}

int main(void) {
    const char *dir = getenv("WASMLM_SYNTH_DIR");
    if (!dir || !dir[0]) {
        printf("skipped: WASMLM_SYNTH_DIR is not set (CTest's synth_embed fixture writes the models)\n");
        return 0;
    }
    wlm_model *bert = load(dir, "bert-tiny.gguf"), *rr = load(dir, "bert-rerank-tiny.gguf");
    wlm_model *nomic = load(dir, "nomic-bert-tiny.gguf"), *qw = load(dir, "qwen3-embedding-tiny.gguf");
    wlm_model *gem = load(dir, "gemma-embedding-tiny.gguf");
    if (bert && rr && nomic && qw && gem) {
        test_info_and_refusals(bert, rr, qw);
        test_pooling(bert);
        test_attention_direction(bert, 1, "bert: bidirectional attention");
        test_attention_direction(nomic, 1, "nomic-bert: bidirectional attention");
        test_attention_direction(qw, 0, "qwen3 embedding: causal attention");
        test_attention_direction(gem, 1, "gemma-embedding: bidirectional attention");
        test_gemma_embedding(gem);
        test_batch_and_threads(bert, "bert: texts together = alone, 2 threads = 1, bitwise");
        test_batch_and_threads(nomic, "nomic-bert: texts together = alone, 2 threads = 1, bitwise");
        test_batch_and_threads(qw, "qwen3 embedding: texts together = alone, 2 threads = 1");
        test_batch_and_threads(gem, "gemma-embedding: texts together = alone, 2 threads = 1");
        test_normalize(bert);
        test_rerank(rr);
        test_errors(bert);
    }
    wlm_model_free(bert), wlm_model_free(rr), wlm_model_free(nomic), wlm_model_free(qw);
    wlm_model_free(gem);
    return TEST_FINISH();
}
