/*
 * test_models.h — small GGUF models written in memory for the architecture tests (test_arch.c,
 * test_hybrid.c, test_moe.c), and what they check them with: a list of tensors (name, shape,
 * how its values are drawn) written with the library's GGUF writer in a weight type (matrices
 * quantized, vectors F32), one tensor left out or given one row too many for the error cases;
 * the same values as the file holds them for a double-precision reference; the logits of a
 * context one token at a time or in one batch; the checks every model gets (against the
 * reference, on threads, two sequences in one batch); and the double-precision pieces the
 * references share (a product, RMSNorm, causal attention, top k, which test_speculative.c's
 * sampler reference uses too). Header-only, as test_util.h: each test is one translation unit.
 */
#ifndef WASMLM_TEST_MODELS_H
#define WASMLM_TEST_MODELS_H

#include "formats/gguf_write.h"
#include "kernels/quant.h"
#include "runtime/threadpool.h"
#include "wasmlm.h"
#include "test_util.h"
#include "pool_malloc.h"

/* One tensor: its name, shape (cols, rows: GGUF's ne[0], ne[1]) and `kind`, the test's own
 * code for how its values are drawn; `mat` 1 for a weight matrix (written in the model's type). */
typedef struct tm_tensor {
    char name[64];
    int64_t cols, rows;
    int kind;
    int mat;
    int64_t experts; /* > 1: a 3-D tensor [cols, rows / experts, experts] (a mixture of
                        experts' stacked matrices); 0 or 1: 2-D */
} tm_tensor;

/* The float values of tensor i (malloc'd, cols × rows), as written before any quantization. */
typedef float *(*tm_values_fn)(const tm_tensor *t, int i);

/* Rows of tensor t as written: one more per matrix when it is the misshapen one. */
static inline int64_t tm_rows_written(const tm_tensor *t, const char *misshape) {
    const int64_t ex = t->experts > 1 ? t->experts : 1;
    return t->rows + (misshape && strcmp(misshape, t->name) == 0 ? ex : 0);
}
/* Adds the tensors' infos, writes the header and then their data: matrices in `type`, vectors
 * F32; `omit` (a name, or NULL) is left out, `misshape` gets one row too many (per expert). */
static inline void tm_write_tensors(wlm_gguf_writer *w, const tm_tensor *t, int nt, int32_t type,
                                    const char *omit, const char *misshape, tm_values_fn values) {
    for (int i = 0; i < nt; i++) {
        if (omit && strcmp(omit, t[i].name) == 0) continue;
        const int64_t rows = tm_rows_written(&t[i], misshape);
        const int64_t ex = t[i].experts > 1 ? t[i].experts : 1;
        const int64_t ne[3] = {t[i].cols, rows / ex, ex};
        wlm_gguf_add_tensor(w, t[i].name, ex > 1 ? 3 : rows == 1 ? 1 : 2, ne,
                            t[i].mat ? type : WLM_TYPE_F32);
    }
    wlm_gguf_write_header(w);
    for (int i = 0; i < nt; i++) {
        if (omit && strcmp(omit, t[i].name) == 0) continue;
        tm_tensor tt = t[i];
        tt.rows = tm_rows_written(&t[i], misshape);
        float *v = values(&tt, i);
        if (t[i].mat && type != WLM_TYPE_F32) {
            const size_t rb = wlm_row_bytes(type, tt.cols);
            unsigned char *q = malloc(rb * (size_t)tt.rows);
            for (int64_t r = 0; r < tt.rows; r++)
                wlm_type_get(type)->from_float(v + r * tt.cols, q + r * rb, (int)tt.cols);
            wlm_gguf_write_data(w, q, rb * (size_t)tt.rows);
            free(q);
        } else {
            wlm_gguf_write_data(w, v, sizeof(float) * (size_t)(tt.cols * tt.rows));
        }
        free(v);
    }
}

/* The writer's file (malloc'd) into *size, or NULL with the writer's message printed. */
static inline unsigned char *tm_finish(wlm_gguf_writer *w, size_t *size) {
    unsigned char *file = NULL;
    if (wlm_gguf_writer_finish(w) == WLM_OK) file = wlm_gguf_writer_take(w, size);
    else printf("writer: %s\n", wlm_gguf_writer_errmsg(w));
    wlm_gguf_writer_free(w);
    return file;
}

/* The values of every tensor as the file holds them (matrices through `type` and back). */
typedef struct tm_ref {
    const tm_tensor *t;
    int nt;
    float **v;
    tm_tensor *owned; /* the list t when the ref owns it (tm_ref_load_owned), else NULL */
} tm_ref;

static inline void tm_ref_load(tm_ref *r, const tm_tensor *t, int nt, int32_t type,
                               tm_values_fn values) {
    r->t = t;
    r->nt = nt;
    r->owned = NULL;
    r->v = calloc((size_t)nt, sizeof *r->v);
    for (int i = 0; i < nt; i++) {
        r->v[i] = values(&t[i], i);
        if (!t[i].mat || type == WLM_TYPE_F32) continue;
        const size_t rb = wlm_row_bytes(type, t[i].cols);
        unsigned char *q = malloc(rb);
        for (int64_t j = 0; j < t[i].rows; j++) {
            float *row = r->v[i] + j * t[i].cols;
            wlm_type_get(type)->from_float(row, q, (int)t[i].cols);
            wlm_type_get(type)->to_float(q, row, (int)t[i].cols);
        }
        free(q);
    }
}

/* The same for a malloc'd list t, which the ref then owns (tm_ref_free frees it). */
static inline void tm_ref_load_owned(tm_ref *r, tm_tensor *t, int nt, int32_t type,
                                     tm_values_fn values) {
    tm_ref_load(r, t, nt, type, values);
    r->owned = t;
}

static inline void tm_ref_free(tm_ref *r) {
    for (int i = 0; i < r->nt; i++) free(r->v[i]);
    free(r->v);
    free(r->owned);
}

/* Tensor `name`'s values, or NULL; tm_rvl: blk.<l>.<name>. */
static inline const float *tm_rv(const tm_ref *r, const char *name) {
    for (int i = 0; i < r->nt; i++)
        if (strcmp(r->t[i].name, name) == 0) return r->v[i];
    return NULL;
}
static inline const float *tm_rvl(const tm_ref *r, int l, const char *name) {
    char b[64];
    snprintf(b, sizeof b, "blk.%d.%s", l, name);
    return tm_rv(r, b);
}

/* Loads `file` (ownership passes to the model); checks the status is `want` and, with a
 * needle, that the message holds it. The model, or NULL when it did not load. */
static inline wlm_model *tm_load(unsigned char *file, size_t size, int want, const char *needle,
                                 const char *what) {
    if (!CHECKF(file != NULL, "%s: no file", what)) return NULL;
    wlm_model *m = NULL;
    int rc = wlm_model_load(file, size, WLM_LOAD_OWN_BUFFER, &m);
    CHECKF(rc == want, "%s: got %s (%s), want %s", what, wlm_status_name(rc), wlm_model_errmsg(m),
           wlm_status_name(want));
    if (needle)
        CHECKF(strstr(wlm_model_errmsg(m), needle) != NULL, "%s: message \"%s\" lacks \"%s\"", what,
               wlm_model_errmsg(m), needle);
    if (rc != WLM_OK) {
        wlm_model_free(m);
        return NULL;
    }
    return m;
}

/* The logits of every position of t[0..n), one token per call (malloc'd, n × vocab). */
static inline float *tm_logits_one_by_one(wlm_context *c, const int32_t *t, int n, int vocab) {
    float *out = malloc(sizeof(float) * (size_t)n * vocab);
    wlm_context_reset(c);
    for (int i = 0; i < n; i++) {
        int rc = wlm_eval(c, t + i, 1);
        if (!CHECKF(rc == WLM_OK, "eval %d: %s", i, wlm_context_errmsg(c))) break;
        memcpy(out + (size_t)i * vocab, wlm_logits(c), sizeof(float) * vocab);
    }
    return out;
}

/* The same from one batch. */
static inline float *tm_logits_batched(wlm_context *c, const int32_t *t, int n, int vocab) {
    float *out = malloc(sizeof(float) * (size_t)n * vocab);
    uint8_t *want = malloc((size_t)n);
    memset(want, 1, (size_t)n);
    wlm_context_reset(c);
    int rc = wlm_eval_batch(c, t, NULL, want, n);
    CHECKF(rc == WLM_OK, "batch: %s", wlm_context_errmsg(c));
    for (int i = 0; rc == WLM_OK && i < n; i++)
        memcpy(out + (size_t)i * vocab, wlm_logits_ith(c, i), sizeof(float) * vocab);
    free(want);
    return out;
}

/* 1 when a and b hold the same bits; else 0 with the first differing index in *first. */
static inline int tm_same(const float *a, const float *b, size_t n, size_t *first) {
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof(float)) != 0) {
            *first = i;
            return 0;
        }
    return 1;
}

/* y = W x in double, W (rows, cols) row-major; x first rounded through the block type `act`
 * (Q8_0: the engine, as llama.cpp, quantizes the activations of a product with a quantized
 * matrix) unless act is WLM_TYPE_F32 or cols is not a multiple of 32 up to 1024. */
static inline void tm_dmat(double *y, const float *W, const double *x0, int rows, int cols,
                           int32_t act) {
    double xr[1024];
    const double *x = x0;
    if (act != WLM_TYPE_F32 && cols <= 1024 && cols % 32 == 0) {
        float f[1024];
        unsigned char q[1200];
        for (int j = 0; j < cols; j++) f[j] = (float)x0[j];
        wlm_type_get(act)->from_float(f, q, cols);
        wlm_type_get(act)->to_float(q, f, cols);
        for (int j = 0; j < cols; j++) xr[j] = f[j];
        x = xr;
    }
    for (int i = 0; i < rows; i++) {
        double a = 0;
        for (int j = 0; j < cols; j++) a += (double)W[(size_t)i * cols + j] * x[j];
        y[i] = a;
    }
}

/* RMSNorm in double: y = x / sqrt(mean(x²) + eps), times w when w is not NULL. */
static inline void tm_drms(double *y, const double *x, int n, const float *w, double eps) {
    double ss = 0;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    const double inv = 1.0 / sqrt(ss / n + eps);
    for (int i = 0; i < n; i++) y[i] = x[i] * inv * (w ? (double)w[i] : 1.0);
}

/* Causal attention in double of position p: o (H heads × hs) from the queries q (H × hs) and
 * the cached keys and values kl, vl (positions 0..p, each KVH heads × hs), softmax of q·k /
 * sqrt(hs); query head h reads KV head h / (H / KVH) (grouped-query attention). p < 1024. */
static inline void tm_dattend(double *o, const double *q, const double *kl, const double *vl, int p,
                              int H, int KVH, int hs) {
    const int KV = KVH * hs;
    double att[1024];
    for (int hh = 0; hh < H; hh++) {
        const int kvh = hh / (H / KVH);
        double mx = -1e300, sum = 0;
        for (int t = 0; t <= p; t++) {
            double a = 0;
            for (int i = 0; i < hs; i++) a += q[hh * hs + i] * kl[(size_t)t * KV + kvh * hs + i];
            att[t] = a / sqrt((double)hs);
            if (att[t] > mx) mx = att[t];
        }
        for (int t = 0; t <= p; t++) sum += att[t] = exp(att[t] - mx);
        for (int i = 0; i < hs; i++) {
            double a = 0;
            for (int t = 0; t <= p; t++) a += att[t] / sum * vl[(size_t)t * KV + kvh * hs + i];
            o[hh * hs + i] = a;
        }
    }
}

/* The largest difference between got and ref (n positions × vocab logits) relative to the
 * largest |logit| of the reference's position, over all positions. */
static inline double tm_worst_diff(const double *ref, const float *got, int n, int vocab) {
    double worst = 0;
    for (int p = 0; p < n; p++) {
        double big = 0, d = 0;
        for (int i = 0; i < vocab; i++) {
            const double v = ref[(size_t)p * vocab + i];
            if (fabs(v) > big) big = fabs(v);
            const double e = fabs(v - got[(size_t)p * vocab + i]);
            if (e > d) d = e;
        }
        if (d / big > worst) worst = d / big;
    }
    return worst;
}

/* Indices of the k largest of score[0..n) into ids, largest first, ties to the lower index
 * (a selection sort: for the references, which want the plain definition). */
static inline void tm_top_k(const double *score, int n, int k, int32_t *ids) {
    for (int j = 0; j < k; j++) {
        int32_t best = -1;
        for (int32_t i = 0; i < n; i++) {
            int taken = 0;
            for (int q = 0; q < j; q++) taken |= ids[q] == i;
            if (!taken && (best < 0 || score[i] > score[best])) best = i;
        }
        ids[j] = best;
    }
}

/* On 2 and 3 threads, t[0..n) in one batch, and (n_one > 0) its first n_one positions one
 * token at a time, give the bits of `one` (the logits one token at a time on one thread, n ×
 * vocab); on 3 threads every chunk runs on a helper, which allocates nothing (pool_malloc.h).
 * No-op in a wasm build without threads. */
static inline void tm_check_threads(wlm_context *c, const int32_t *t, int n, int vocab,
                                    const float *one, int n_one, const char *what) {
#if !defined(__EMSCRIPTEN__) || defined(__wasm_atomics__)
    size_t at = 0;
    for (int th = 2; th <= 3; th++) {
        wlm_threadpool *pool = NULL;
        if (wlm_threadpool_new(th, &pool) != WLM_OK) continue;
        wlm_context_set_threadpool(c, pool);
#if !defined(__EMSCRIPTEN__)
        wlm_threadpool_helpers_only(pool, th == 3);
#endif
        pm_arm();
        float *tb = tm_logits_batched(c, t, n, vocab);
        CHECKF(tm_same(one, tb, (size_t)n * vocab, &at), "%s: %d threads differ at position %zu",
               what, th, at / (size_t)vocab);
        if (n_one > 0) {
            float *t1 = tm_logits_one_by_one(c, t, n_one, vocab);
            CHECKF(tm_same(one, t1, (size_t)n_one * vocab, &at),
                   "%s: %d threads one by one differ at position %zu", what, th,
                   at / (size_t)vocab);
            free(t1);
        }
        const long calls = pm_disarm();
        CHECKF(calls == 0, "%s: %ld heap calls on the pool's helper threads at %d threads", what,
               calls, th);
        wlm_context_set_threadpool(c, NULL);
        wlm_threadpool_free(pool);
        free(tb);
    }
#else
    (void)c, (void)t, (void)n, (void)vocab, (void)one, (void)n_one, (void)what;
#endif
}

/* Sequences 0 (t, whose logits one token at a time are `one`) and 1 (u) interleaved in one
 * batch of 2n entries give the bits of each evaluated alone. n <= 256. */
static inline void tm_check_interleaved(wlm_context *c, const int32_t *t, const int32_t *u, int n,
                                        int vocab, const float *one, const char *what) {
    int32_t tok[512], seq[512];
    uint8_t want[512];
    if (!CHECKF(n <= 256, "%s: %d positions, at most 256", what, n)) return;
    float *ou = tm_logits_one_by_one(c, u, n, vocab);
    for (int i = 0; i < n; i++) {
        tok[2 * i] = t[i], seq[2 * i] = 0;
        tok[2 * i + 1] = u[i], seq[2 * i + 1] = 1;
    }
    memset(want, 1, sizeof want);
    wlm_context_reset(c);
    CHECK_STATUS(wlm_eval_batch(c, tok, seq, want, 2 * n), WLM_OK);
    int ok = 1;
    for (int i = 0; i < n && ok; i++)
        ok = memcmp(wlm_logits_ith(c, 2 * i), one + (size_t)i * vocab,
                    sizeof(float) * vocab) == 0 &&
             memcmp(wlm_logits_ith(c, 2 * i + 1), ou + (size_t)i * vocab,
                    sizeof(float) * vocab) == 0;
    CHECKF(ok, "%s: two interleaved sequences differ from each alone", what);
    free(ou);
}

#endif
