/*
 * test_llama3.c — the RoPE variants of Llama 3.x / SmolLM2-style GGUFs on tiny synthetic models
 * written here with the library's GGUF writer: partial rotation (llama.rope.dimension_count
 * smaller than the head size), per-pair frequency factors (rope_freqs.weight, which Llama 3.1+
 * converters fill with the "llama3" scaling), freq_base 500000, linear scaling
 * (llama.rope.scaling.factor), tied and separate classifiers.
 * - Logits against an independent double-precision forward pass written in this file (the
 *   textbook Llama computation with ggml_rope_ext's angle p * freq_scale * base^(-2i/n_rot) /
 *   factor_i on the first n_rot dimensions), with the F32 and the F16 KV cache, both kernel sets.
 * - A batched prefill and multi-threaded evaluation give logits bitwise equal to one token at a
 *   time on one thread (F32 and F16 caches).
 * - Context shift re-rotates cached keys with the same frequencies: layer-0 keys after a shift
 *   equal the keys computed at the new positions (and the double reference's).
 * - Missing or misshapen tensors and keys are refused with messages naming them.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf_write.h"
#include "kernels/quant.h"
#include "model/model.h"
#include "runtime/threadpool.h"
#include "wasmlm.h"
#include "test_util.h"

#if !defined(__EMSCRIPTEN__) || defined(__wasm_atomics__)
#define HAVE_THREADS 1
#else
#define HAVE_THREADS 0
#endif

/* head size 32, 16 of its dimensions rotated; GQA 4 query heads on 2 KV heads */
enum { DIM = 128, HID = 96, LAYERS = 2, HEADS = 4, KV_HEADS = 2, HS = DIM / HEADS,
       KVD = HS * KV_HEADS, VOCAB = 61, SEQ = 320, NROT = 16 };
#define BASE 500000.0f

static const float FACTORS[NROT / 2] = {1.0f, 2.0f, 0.25f, 4.0f, 0.05f, 8.0f, 0.01f, 1.5f};

/* ---- the synthetic model ------------------------------------------------------------------- */

typedef struct weights {
    float *emb;                   /* (VOCAB, DIM) */
    float *out;                   /* (VOCAB, DIM) separate classifier */
    float *norm_final;            /* (DIM) */
    float *att_norm[LAYERS], *ffn_norm[LAYERS];
    float *wq[LAYERS], *wk[LAYERS], *wv[LAYERS], *wo[LAYERS];
    float *w1[LAYERS], *w2[LAYERS], *w3[LAYERS];
} weights;

static weights W;
static tu_rng rng = {20261123};

static float *rand_mat(int rows, int cols, float scale) {
    float *p = malloc(sizeof(float) * (size_t)rows * cols);
    for (size_t i = 0; i < (size_t)rows * cols; i++) p[i] = tu_rng_uniform(&rng, -scale, scale);
    return p;
}

static float *rand_norm(void) {
    float *p = malloc(sizeof(float) * DIM);
    for (int i = 0; i < DIM; i++) p[i] = tu_rng_uniform(&rng, 0.8f, 1.2f);
    return p;
}

static void make_weights(void) {
    const float a = 1.7f / sqrtf(DIM), b = 1.7f / sqrtf(HID);
    W.emb = rand_mat(VOCAB, DIM, 1.0f);
    W.out = rand_mat(VOCAB, DIM, a);
    W.norm_final = rand_norm();
    for (int l = 0; l < LAYERS; l++) {
        W.att_norm[l] = rand_norm(), W.ffn_norm[l] = rand_norm();
        W.wq[l] = rand_mat(DIM, DIM, a), W.wk[l] = rand_mat(KVD, DIM, a);
        W.wv[l] = rand_mat(KVD, DIM, a), W.wo[l] = rand_mat(DIM, DIM, a);
        W.w1[l] = rand_mat(HID, DIM, a), W.w2[l] = rand_mat(DIM, HID, b);
        W.w3[l] = rand_mat(HID, DIM, a);
    }
}

static void free_weights(void) {
    free(W.emb), free(W.out), free(W.norm_final);
    for (int l = 0; l < LAYERS; l++) {
        free(W.att_norm[l]), free(W.ffn_norm[l]), free(W.wq[l]), free(W.wk[l]), free(W.wv[l]);
        free(W.wo[l]), free(W.w1[l]), free(W.w2[l]), free(W.w3[l]);
    }
}

/* What to write: the defaults are a Llama 3.2-style file (tied classifier, rope_freqs,
 * dimension_count < head size, freq_base 500000, no scaling keys). */
typedef struct opts {
    int separate_classifier;
    int no_rope_freqs;
    int rope_dims;                /* 0: NROT */
    float factor;                 /* nonzero: llama.rope.scaling.factor */
    const char *scaling_type;     /* non-NULL: llama.rope.scaling.type */
    int scaling_type_u32;         /* write llama.rope.scaling.type as a number */
    int freqs_len;                /* 0: NROT / 2 */
    int freqs_f16;                /* rope_freqs.weight as F16 */
    float bad_factor;             /* nonzero: the first frequency factor */
    const char *omit;             /* leave this tensor out */
} opts;

static void add_mat(wlm_gguf_writer *w, const char *name, int rows, int cols) {
    const int64_t ne[2] = {cols, rows};
    wlm_gguf_add_tensor(w, name, rows == 1 ? 1 : 2, ne, WLM_TYPE_F32);
}

/* The model as a GGUF file in memory (malloc'ed; *size bytes). */
static unsigned char *build(const opts *o, size_t *size) {
    wlm_gguf_writer w;
    wlm_gguf_writer_init(&w, NULL);
    wlm_gguf_add_str(&w, "general.architecture", "llama");
    wlm_gguf_add_u32(&w, "llama.context_length", SEQ);
    wlm_gguf_add_u32(&w, "llama.embedding_length", DIM);
    wlm_gguf_add_u32(&w, "llama.feed_forward_length", HID);
    wlm_gguf_add_u32(&w, "llama.block_count", LAYERS);
    wlm_gguf_add_u32(&w, "llama.attention.head_count", HEADS);
    wlm_gguf_add_u32(&w, "llama.attention.head_count_kv", KV_HEADS);
    wlm_gguf_add_u32(&w, "llama.rope.dimension_count", o->rope_dims ? (uint32_t)o->rope_dims : NROT);
    wlm_gguf_add_f32(&w, "llama.rope.freq_base", BASE);
    wlm_gguf_add_f32(&w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    if (o->factor != 0.0f) wlm_gguf_add_f32(&w, "llama.rope.scaling.factor", o->factor);
    if (o->scaling_type) wlm_gguf_add_str(&w, "llama.rope.scaling.type", o->scaling_type);
    if (o->scaling_type_u32) wlm_gguf_add_u32(&w, "llama.rope.scaling.type", 1);

    /* tensors, in the order their data is written below */
    struct { char name[48]; const float *data; int rows, cols; } t[64];
    int nt = 0;
#define T(nm, d, r, c) (snprintf(t[nt].name, sizeof t[nt].name, "%s", nm), t[nt].data = (d), \
                        t[nt].rows = (r), t[nt].cols = (c), nt++)
    T("token_embd.weight", W.emb, VOCAB, DIM);
    T("output_norm.weight", W.norm_final, 1, DIM);
    if (o->separate_classifier) T("output.weight", W.out, VOCAB, DIM);
    for (int l = 0; l < LAYERS; l++) {
        char nm[48];
#define TL(suffix, d, r, c) (snprintf(nm, sizeof nm, "blk.%d." suffix ".weight", l), T(nm, d, r, c))
        TL("attn_norm", W.att_norm[l], 1, DIM);
        TL("attn_q", W.wq[l], DIM, DIM);
        TL("attn_k", W.wk[l], KVD, DIM);
        TL("attn_v", W.wv[l], KVD, DIM);
        TL("attn_output", W.wo[l], DIM, DIM);
        TL("ffn_norm", W.ffn_norm[l], 1, DIM);
        TL("ffn_gate", W.w1[l], HID, DIM);
        TL("ffn_down", W.w2[l], DIM, HID);
        TL("ffn_up", W.w3[l], HID, DIM);
#undef TL
    }
#undef T
    for (int i = 0; i < nt; i++)
        if (!o->omit || strcmp(o->omit, t[i].name) != 0) add_mat(&w, t[i].name, t[i].rows, t[i].cols);
    const int nf = o->freqs_len ? o->freqs_len : NROT / 2;
    float freqs[64];
    uint16_t freqs16[64];
    for (int i = 0; i < nf; i++) {
        freqs[i] = FACTORS[i % (NROT / 2)];
        freqs16[i] = wlm_fp32_to_fp16(freqs[i]);
    }
    if (o->bad_factor != 0.0f) freqs[0] = o->bad_factor;
    if (!o->no_rope_freqs) {
        const int64_t ne[1] = {nf};
        wlm_gguf_add_tensor(&w, "rope_freqs.weight", 1, ne, o->freqs_f16 ? WLM_TYPE_F16 : WLM_TYPE_F32);
    }
    wlm_gguf_write_header(&w);
    for (int i = 0; i < nt; i++)
        if (!o->omit || strcmp(o->omit, t[i].name) != 0)
            wlm_gguf_write_data(&w, t[i].data, sizeof(float) * (size_t)t[i].rows * t[i].cols);
    if (!o->no_rope_freqs) {
        if (o->freqs_f16) wlm_gguf_write_data(&w, freqs16, 2 * (size_t)nf);
        else wlm_gguf_write_data(&w, freqs, 4 * (size_t)nf);
    }
    int rc = wlm_gguf_writer_finish(&w);
    CHECKF(rc == WLM_OK, "GGUF writer: %s", wlm_gguf_writer_errmsg(&w));
    unsigned char *p = rc == WLM_OK ? wlm_gguf_writer_take(&w, size) : NULL;
    wlm_gguf_writer_free(&w);
    return p;
}

static wlm_model *load(const opts *o, unsigned char **file) {
    size_t size = 0;
    *file = build(o, &size);
    wlm_model *m = NULL;
    int rc = *file ? wlm_model_load(*file, size, 0, &m) : WLM_ERR_NOMEM;
    CHECKF(rc == WLM_OK, "load: %s %s", wlm_status_name(rc), m ? wlm_model_errmsg(m) : "");
    if (rc != WLM_OK) {
        wlm_model_free(m);
        free(*file);
        *file = NULL;
        return NULL;
    }
    return m;
}

/* ---- the double-precision reference --------------------------------------------------------- */

typedef struct ref_cfg {
    int freqs;                    /* divide by FACTORS */
    double freq_scale;            /* 1 / linear factor */
    int separate_classifier;
} ref_cfg;

static void rmsnorm_d(double *out, const double *x, const float *w) {
    double ss = 0.0;
    for (int i = 0; i < DIM; i++) ss += x[i] * x[i];
    ss = 1.0 / sqrt(ss / DIM + 1e-5);
    for (int i = 0; i < DIM; i++) out[i] = w[i] * (x[i] * ss);
}

static void matvec_d(double *out, const float *w, const double *x, int rows, int cols) {
    for (int r = 0; r < rows; r++) {
        double s = 0.0;
        for (int j = 0; j < cols; j++) s += (double)w[(size_t)r * cols + j] * x[j];
        out[r] = s;
    }
}

/* Rotates the first NROT dimensions of each head of v (n heads) to position pos. */
static void rope_d(double *v, int n, int pos, const ref_cfg *cfg) {
    for (int h = 0; h < n; h++)
        for (int i = 0; i < NROT / 2; i++) {
            double theta = cfg->freq_scale * pow(BASE, -2.0 * i / NROT);
            if (cfg->freqs) theta /= FACTORS[i];
            const double c = cos(pos * theta), s = sin(pos * theta);
            double *p = v + h * HS + 2 * i, a = p[0], b = p[1];
            p[0] = a * c - b * s;
            p[1] = a * s + b * c;
        }
}

/* Layer-0 key of token `tok` at position pos (layer 0 sees only the token and the position). */
static void key0_d(double *k, int32_t tok, int pos, const ref_cfg *cfg) {
    double x[DIM], xb[DIM];
    for (int i = 0; i < DIM; i++) x[i] = W.emb[(size_t)tok * DIM + i];
    rmsnorm_d(xb, x, W.att_norm[0]);
    matvec_d(k, W.wk[0], xb, KVD, DIM);
    rope_d(k, KV_HEADS, pos, cfg);
}

/* Logits (n, VOCAB) of tokens[0..n) at positions 0..n-1. */
static void forward_d(const int32_t *tokens, int n, const ref_cfg *cfg, double *logits) {
    double *kc = malloc(sizeof(double) * (size_t)LAYERS * n * KVD);
    double *vc = malloc(sizeof(double) * (size_t)LAYERS * n * KVD);
    double *att = malloc(sizeof(double) * (size_t)n);
    double x[DIM], xb[DIM], q[DIM], o[DIM], h1[HID], h3[HID];
    for (int pos = 0; pos < n; pos++) {
        for (int i = 0; i < DIM; i++) x[i] = W.emb[(size_t)tokens[pos] * DIM + i];
        for (int l = 0; l < LAYERS; l++) {
            double *k = kc + ((size_t)l * n + pos) * KVD, *v = vc + ((size_t)l * n + pos) * KVD;
            rmsnorm_d(xb, x, W.att_norm[l]);
            matvec_d(q, W.wq[l], xb, DIM, DIM);
            matvec_d(k, W.wk[l], xb, KVD, DIM);
            matvec_d(v, W.wv[l], xb, KVD, DIM);
            rope_d(q, HEADS, pos, cfg);
            rope_d(k, KV_HEADS, pos, cfg);
            for (int h = 0; h < HEADS; h++) {
                const int kvh = h / (HEADS / KV_HEADS);
                double mx = -1e300, sum = 0.0;
                for (int t = 0; t <= pos; t++) {
                    const double *kt = kc + ((size_t)l * n + t) * KVD + kvh * HS;
                    double s = 0.0;
                    for (int i = 0; i < HS; i++) s += q[h * HS + i] * kt[i];
                    att[t] = s / sqrt((double)HS);
                    if (att[t] > mx) mx = att[t];
                }
                for (int t = 0; t <= pos; t++) sum += (att[t] = exp(att[t] - mx));
                for (int i = 0; i < HS; i++) {
                    double s = 0.0;
                    for (int t = 0; t <= pos; t++)
                        s += att[t] / sum * vc[((size_t)l * n + t) * KVD + kvh * HS + i];
                    xb[h * HS + i] = s;
                }
            }
            matvec_d(o, W.wo[l], xb, DIM, DIM);
            for (int i = 0; i < DIM; i++) x[i] += o[i];
            rmsnorm_d(xb, x, W.ffn_norm[l]);
            matvec_d(h1, W.w1[l], xb, HID, DIM);
            matvec_d(h3, W.w3[l], xb, HID, DIM);
            for (int i = 0; i < HID; i++) h1[i] = h1[i] / (1.0 + exp(-h1[i])) * h3[i];
            matvec_d(o, W.w2[l], h1, DIM, HID);
            for (int i = 0; i < DIM; i++) x[i] += o[i];
        }
        rmsnorm_d(xb, x, W.norm_final);
        matvec_d(logits + (size_t)pos * VOCAB, cfg->separate_classifier ? W.out : W.emb, xb,
                 VOCAB, DIM);
    }
    free(kc), free(vc), free(att);
}

/* ---- helpers ---------------------------------------------------------------------------------- */

static wlm_context *new_ctx(const wlm_model *m, int n_ctx, int simd, int32_t kv_type) {
    return tu_context(m, n_ctx, 0, simd, kv_type);
}

static int32_t TOKENS[SEQ];

/* Logits of tokens[0..n) evaluated one at a time, into out (n, VOCAB). */
static int eval_one_by_one(wlm_context *c, const int32_t *tokens, int n, float *out) {
    for (int i = 0; i < n; i++) {
        int rc = wlm_eval(c, &tokens[i], 1);
        if (rc != WLM_OK || !wlm_logits(c)) {
            CHECKF(0, "eval at %d: %s %s", i, wlm_status_name(rc), wlm_context_errmsg(c));
            return rc ? rc : WLM_ERR_STATE;
        }
        memcpy(out + (size_t)i * VOCAB, wlm_logits(c), sizeof(float) * VOCAB);
    }
    return WLM_OK;
}

static double max_diff_d(const float *a, const double *b, size_t n) {
    double d = 0.0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]);
        if (!(e <= d)) d = e; /* NaN sticks */
    }
    return d;
}

static const char *kv_name(int32_t t) { return t == WLM_KV_F16 ? "F16" : "F32"; }

/* ---- tests ------------------------------------------------------------------------------------ */

/* Positions compared with the double reference (three KV blocks and a bit). */
#define NREF 52

static void check_against_reference(const opts *o, const ref_cfg *cfg, const char *what) {
    unsigned char *file;
    wlm_model *m = load(o, &file);
    if (!m) return;
    double *ref = malloc(sizeof(double) * NREF * VOCAB);
    float *got = malloc(sizeof(float) * NREF * VOCAB);
    forward_d(TOKENS, NREF, cfg, ref);
    double spread = 0.0;
    for (size_t i = 0; i < (size_t)NREF * VOCAB; i++) spread = fmax(spread, fabs(ref[i]));
    for (int kv = 0; kv < 2; kv++) {
        const int32_t kvt = kv ? WLM_KV_F16 : WLM_KV_F32;
        for (int simd = 1; simd >= 0; simd--) {
            wlm_context *c = new_ctx(m, 0, simd, kvt);
            if (!c) continue;
            if (eval_one_by_one(c, TOKENS, NREF, got) == WLM_OK) {
                const double d = max_diff_d(got, ref, (size_t)NREF * VOCAB);
                /* F32: float rounding only. F16: keys and values rounded to 11 bits. */
                const double tol = kvt == WLM_KV_F16 ? 2e-2 : 2e-4;
                CHECKF(d < tol, "%s, %s cache, %s kernels: logits differ from the double "
                       "reference by %.3g (logits up to %.3g)", what, kv_name(kvt),
                       simd ? "SIMD" : "scalar", d, spread);
                if (simd) printf("   %s, %s cache: max |logit - reference| %.3g (logits up to %.2g)\n",
                                 what, kv_name(kvt), d, spread);
            }
            wlm_context_free(c);
        }
    }
    free(ref), free(got);
    wlm_model_free(m);
    free(file);
}

static void test_reference(void) {
    tu_section("logits against a double-precision forward pass");
    opts o = {0};
    ref_cfg cfg = {1, 1.0, 0};
    check_against_reference(&o, &cfg, "rope_freqs, n_rot 16 of 32, tied classifier");
    o.separate_classifier = 1, cfg.separate_classifier = 1;
    check_against_reference(&o, &cfg, "rope_freqs, separate classifier");
    opts lin = {0};
    lin.no_rope_freqs = 1, lin.factor = 4.0f;
    ref_cfg lcfg = {0, 0.25, 0};
    check_against_reference(&lin, &lcfg, "linear scaling 4 (no scaling.type key)");
    lin.scaling_type = "linear";
    check_against_reference(&lin, &lcfg, "linear scaling 4");
    lin.scaling_type = "none"; /* llama.cpp: type none never scales */
    lcfg.freq_scale = 1.0;
    check_against_reference(&lin, &lcfg, "scaling.type none, factor 4");
    opts yarn1 = {0};
    yarn1.scaling_type = "yarn", yarn1.factor = 1.0f; /* a factor of 1 is plain RoPE */
    ref_cfg plain = {1, 1.0, 0};
    check_against_reference(&yarn1, &plain, "scaling.type yarn, factor 1");

    /* the model reports what it read */
    unsigned char *file;
    wlm_model *m = load(&o, &file);
    if (m) {
        wlm_model_info info;
        CHECK_STATUS(wlm_model_get_info(m, &info), WLM_OK);
        CHECK(info.dim == DIM && info.n_heads == HEADS && info.n_kv_heads == KV_HEADS &&
              info.vocab_size == VOCAB && info.shared_classifier == 0);
        CHECK(m->hp.n_rot == NROT && m->hp.head_size == HS && m->w.rope_freqs != NULL &&
              m->hp.rope_theta == BASE);
        wlm_model_free(m);
        free(file);
    }
    opts t = {0};
    m = load(&t, &file);
    if (m) {
        wlm_model_info info;
        CHECK_STATUS(wlm_model_get_info(m, &info), WLM_OK);
        CHECK(info.shared_classifier == 1);
        wlm_model_free(m);
        free(file);
    }
}

/* Batched prefill (chunks of WLM_BATCH_CHUNK, two sequences interleaved) and threads: logits
 * bitwise equal to one token at a time on one thread. */
static void test_bitwise(void) {
    tu_section("batches and threads bitwise equal to one token at a time");
    opts o = {0};
    unsigned char *file;
    wlm_model *m = load(&o, &file);
    if (!m) return;
    /* 300 positions: attention past 256 positions is split by heads over threads */
    enum { N = 300 };
    float *one = malloc(sizeof(float) * N * VOCAB), *got = malloc(sizeof(float) * N * VOCAB);
    int32_t seqs[2 * N];
    int32_t toks[2 * N];
    uint8_t want[2 * N];
    for (int kv = 0; kv < 2; kv++) {
        const int32_t kvt = kv ? WLM_KV_F16 : WLM_KV_F32;
        wlm_context *c = new_ctx(m, 0, 1, kvt);
        if (!c || eval_one_by_one(c, TOKENS, N, one) != WLM_OK) {
            wlm_context_free(c);
            continue;
        }
        wlm_context_free(c);
        /* one batch of N: every entry's logits */
        c = new_ctx(m, 0, 1, kvt);
        memset(want, 1, sizeof want);
        if (c) {
            CHECK_STATUS(wlm_eval_batch(c, TOKENS, NULL, want, N), WLM_OK);
            int bad = 0;
            for (int i = 0; i < N; i++) {
                const float *lg = wlm_logits_ith(c, i);
                bad += !lg || memcmp(lg, one + (size_t)i * VOCAB, sizeof(float) * VOCAB) != 0;
            }
            CHECKF(bad == 0, "%s cache: %d of %d batched positions differ", kv_name(kvt), bad, N);
            wlm_context_free(c);
        }
        /* two sequences interleaved in one batch */
        wlm_context_params cp;
        wlm_context_params_default(&cp);
        cp.n_seq_max = 2;
        cp.kv_type = kvt;
        c = NULL;
        if (wlm_context_new(m, &cp, &c) == WLM_OK) {
            for (int i = 0; i < 2 * 80; i++) toks[i] = TOKENS[i / 2], seqs[i] = i % 2;
            CHECK_STATUS(wlm_eval_batch(c, toks, seqs, want, 2 * 80), WLM_OK);
            int bad = 0;
            for (int i = 0; i < 2 * 80; i++) {
                const float *lg = wlm_logits_ith(c, i);
                bad += !lg || memcmp(lg, one + (size_t)(i / 2) * VOCAB, sizeof(float) * VOCAB) != 0;
            }
            CHECKF(bad == 0, "%s cache: %d entries of two interleaved sequences differ",
                   kv_name(kvt), bad);
        }
        wlm_context_free(c);
#if HAVE_THREADS
        for (int nt = 2; nt <= 3; nt++) {
            wlm_threadpool *pool = NULL;
            CHECK_STATUS(wlm_threadpool_new(nt, &pool), WLM_OK);
            c = new_ctx(m, 0, 1, kvt);
            if (!pool || !c) {
                wlm_context_free(c), wlm_threadpool_free(pool);
                continue;
            }
            wlm_context_set_threadpool(c, pool);
            /* a prefill of N - 4, then 4 single tokens */
            CHECK_STATUS(wlm_eval_batch(c, TOKENS, NULL, want, N - 4), WLM_OK);
            for (int i = 0; i < N - 4; i++)
                memcpy(got + (size_t)i * VOCAB, wlm_logits_ith(c, i), sizeof(float) * VOCAB);
            if (eval_one_by_one(c, TOKENS + N - 4, 4, got + (size_t)(N - 4) * VOCAB) == WLM_OK) {
                int first = -1;
                for (size_t i = 0; i < (size_t)N * VOCAB && first < 0; i++)
                    if (memcmp(&got[i], &one[i], sizeof(float)) != 0) first = (int)i;
                CHECKF(first < 0, "%s cache, %d threads: logit %d (position %d) differs",
                       kv_name(kvt), nt, first, first / VOCAB);
            }
            int64_t jobs = 0, helper = 0;
            wlm_threadpool_stats(pool, &jobs, &helper);
            CHECKF(jobs > 0, "%d threads: no parallel work", nt);
            wlm_context_free(c);
            wlm_threadpool_free(pool);
        }
#endif
    }
    free(one), free(got);
    wlm_model_free(m);
    free(file);
}

/* Context shift with partial rotation and frequency factors: layer-0 keys after a shift equal
 * the keys computed at the new positions, and the double reference's keys there. */
static void test_shift(void) {
    tu_section("context shift re-rotates with the model's frequencies");
    opts o = {0};
    ref_cfg cfg = {1, 1.0, 0};
    unsigned char *file;
    wlm_model *m = load(&o, &file);
    if (!m) return;
    for (int kv = 0; kv < 2; kv++) {
        const int32_t kvt = kv ? WLM_KV_F16 : WLM_KV_F32;
        wlm_context *a = new_ctx(m, 96, 1, kvt), *b = new_ctx(m, 96, 1, kvt);
        if (!a || !b) {
            wlm_context_free(a), wlm_context_free(b);
            continue;
        }
        /* 90 tokens; keep 5, drop 37 (past ~2 blocks, not block-aligned): 53 left */
        enum { N = 90, KEEP = 5, DROP = 37, LEFT = N - DROP };
        CHECK_STATUS(wlm_eval(a, TOKENS, N), WLM_OK);
        CHECK_STATUS(wlm_seq_shift(a, 0, KEEP, DROP), WLM_OK);
        CHECK_EQ_INT(wlm_context_n_past(a), LEFT);
        int32_t kept[LEFT];
        for (int i = 0; i < LEFT; i++) kept[i] = i < KEEP ? TOKENS[i] : TOKENS[i + DROP];
        CHECK_STATUS(wlm_eval(b, kept, LEFT), WLM_OK);
        double dk = 0.0, dref = 0.0, dv = 0.0, big = 0.0;
        for (int pos = 0; pos < LEFT; pos++) {
            const void *ra = wlm_kv_row(a, 0, 0, pos), *rb = wlm_kv_row(b, 0, 0, pos);
            double k[KVD];
            key0_d(k, kept[pos], pos, &cfg);
            for (int j = 0; j < 2 * KVD; j++) {
                /* j < KVD: the key; then the value (WLM_KV_BLOCK rows further) */
                const size_t at = j < KVD ? (size_t)j : (size_t)WLM_KV_BLOCK * KVD + (j - KVD);
                double x, y;
                if (kvt == WLM_KV_F16)
                    x = wlm_fp16_to_fp32(((const uint16_t *)ra)[at]),
                    y = wlm_fp16_to_fp32(((const uint16_t *)rb)[at]);
                else
                    x = ((const float *)ra)[at], y = ((const float *)rb)[at];
                if (j < KVD) {
                    dk = fmax(dk, fabs(x - y));
                    dref = fmax(dref, fabs(x - k[j]));
                    big = fmax(big, fabs(k[j]));
                } else {
                    dv = fmax(dv, fabs(x - y));
                }
            }
        }
        /* F16: each key rounded to binary16 once (2^-11 relative), after float32 rotations */
        const double tol = kvt == WLM_KV_F16 ? big / 1024.0 : 1e-4 * big;
        CHECKF(dk <= tol && dref <= tol, "%s cache: shifted layer-0 keys differ by %.3g from "
               "fresh ones and by %.3g from the reference (largest key %.3g)", kv_name(kvt), dk,
               dref, big);
        CHECKF(dv == 0.0, "%s cache: values changed by %.3g", kv_name(kvt), dv);
        /* evaluation goes on from the shifted cache */
        int32_t t = 7;
        CHECK_STATUS(wlm_eval(a, &t, 1), WLM_OK);
        CHECK_EQ_INT(wlm_context_n_past(a), LEFT + 1);
        wlm_context_free(a), wlm_context_free(b);
    }
    wlm_model_free(m);
    free(file);
}

static void expect_error(const opts *o, int want, const char *needle, const char *what) {
    size_t size = 0;
    unsigned char *p = build(o, &size);
    wlm_model *m = NULL;
    int rc = p ? wlm_model_load(p, size, 0, &m) : WLM_ERR_NOMEM;
    const char *msg = wlm_model_errmsg(m);
    CHECKF(rc == want, "%s: got %s (%s), want %s", what, wlm_status_name(rc), msg,
           wlm_status_name(want));
    CHECKF(strstr(msg, needle) != NULL, "%s: message \"%s\" lacks \"%s\"", what, msg, needle);
    wlm_model_free(m);
    free(p);
}

static void test_errors(void) {
    tu_section("missing and misshapen RoPE tensors and keys");
    opts o = {0};
    o.freqs_len = NROT / 2 + 1;
    expect_error(&o, WLM_ERR_FORMAT, "rope_freqs.weight has 9 entries, expected 8", "long rope_freqs");
    o.freqs_len = 16; /* head_size / 2: a converter that ignored dimension_count */
    expect_error(&o, WLM_ERR_FORMAT, "rope_freqs.weight", "rope_freqs for the whole head");
    o = (opts){0};
    o.freqs_f16 = 1;
    expect_error(&o, WLM_ERR_UNSUPPORTED, "rope_freqs.weight has type F16", "F16 rope_freqs");
    o = (opts){0};
    o.bad_factor = -1.0f;
    expect_error(&o, WLM_ERR_FORMAT, "rope_freqs.weight: factor 0 is -1", "negative factor");
    o.bad_factor = NAN;
    expect_error(&o, WLM_ERR_FORMAT, "rope_freqs.weight", "NaN factor");
    o = (opts){0};
    o.scaling_type = "dynamic", o.factor = 4.0f; /* (yarn is read since gpt-oss: test_moe, oracle) */
    expect_error(&o, WLM_ERR_UNSUPPORTED, "\"dynamic\"", "dynamic scaling");
    o.scaling_type = "longrope";
    expect_error(&o, WLM_ERR_UNSUPPORTED, "\"longrope\"", "longrope scaling");
    o = (opts){0};
    o.scaling_type_u32 = 1;
    expect_error(&o, WLM_ERR_FORMAT, "llama.rope.scaling.type", "numeric scaling.type");
    o = (opts){0};
    o.factor = -2.0f;
    expect_error(&o, WLM_ERR_FORMAT, "llama.rope.scaling.factor", "negative scaling factor");
    o = (opts){0};
    o.rope_dims = 15;
    expect_error(&o, WLM_ERR_FORMAT, "llama.rope.dimension_count 15", "odd dimension_count");
    o.rope_dims = 34;
    expect_error(&o, WLM_ERR_FORMAT, "llama.rope.dimension_count 34", "dimension_count > head");
    o = (opts){0};
    o.omit = "blk.1.attn_k.weight";
    expect_error(&o, WLM_ERR_FORMAT, "blk.1.attn_k.weight", "missing attn_k");
    o.omit = "output_norm.weight";
    expect_error(&o, WLM_ERR_FORMAT, "output_norm.weight", "missing output_norm");
}

int main(void) {
    make_weights();
    for (int i = 0; i < SEQ; i++) TOKENS[i] = (int32_t)(tu_rng_u64(&rng) % VOCAB);
    test_reference();
    test_bitwise();
    test_shift();
    test_errors();
    free_weights();
    return TEST_FINISH();
}
