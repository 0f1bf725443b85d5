/*
 * test_arch.c — every architecture of arch.c (qwen2, qwen3, gemma3, phi3 fused and separate,
 * gpt2, and llama through the same path) on small random GGUF models written here in memory
 * with the library's GGUF writer, in F32, F16, Q8_0 and Q4_0:
 * - the logits of every position equal those of a naive double-precision transformer written
 *   independently below from the architectures' definitions (llama.cpp's graphs): NEOX vs
 *   interleaved RoPE, biases, Q/K norms, post-norms, GeGLU, LayerNorm, learned positions, fused
 *   QKV and gate/up, LongRoPE factors and attention factor, sliding windows, embedding scale,
 *   Gemma's query scale and logit soft-cap;
 * - a batched prefill and 2 and 3 threads give logits bitwise equal to one token at a time on
 *   one thread (positions past 256 split attention by heads too);
 * - context shift re-rotates K in the model's RoPE style (the shifted cache predicts what a
 *   fresh evaluation of the kept tokens predicts), and is refused with a message for learned
 *   positions and sliding windows; beam search and sampling run;
 * - a missing or misshapen tensor or key is an error naming it;
 * - WLM_LOAD_TENSORS_EXTERNAL (the WebGPU backend's streamed load): from the header alone the
 *   model describes itself as the whole file does, refuses every context until committed and
 *   then any but a deferred one; committed, its vectors equal the whole file's; a non-finite
 *   vector or a zero RoPE factor fails the commit naming the tensor.
 * The llama.cpp oracle (tests/js/oracle.test.mjs) checks the same architectures against
 * llama.cpp itself on the synthesizer's files.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "formats/gguf_write.h"
#include "kernels/quant.h"
#include "model/model.h"
#include "runtime/threadpool.h"
#include "wasmlm.h"
#include "test_util.h"
#include "test_models.h"


/* ---- the models ------------------------------------------------------------------------------ */

typedef struct spec {
    const char *arch;
    int dim, hidden, layers, heads, kv_heads, key_len, vocab, seq;
    int fused_qkv;              /* phi3: attn_qkv instead of attn_q/k/v */
    int n_swa;                  /* gemma3: attention.sliding_window (0: key absent) */
    float softcap;              /* gemma3: final_logit_softcapping (0: absent) */
    int rope_factors;           /* phi3: rope_factors_long/short */
    float attn_factor;          /* rope.scaling.attn_factor (0: absent) */
    int n_ctx_orig;             /* rope.scaling.original_context_length (0: absent) */
    int tied;                   /* no output.weight */
    int32_t type;               /* type of the matrices */
    const char *omit;           /* leave this tensor out */
    const char *misshape;       /* give this tensor one row too many */
    const char *omit_key;       /* leave this key out */
} spec;

/* WASMLM_TEST_TYPES=quick (tools/test.sh, under ASan/UBSan): a smaller sweep */
static int quick_run(void) {
    const char *q = getenv("WASMLM_TEST_TYPES");
    return q && strcmp(q, "quick") == 0;
}

static int has(const char *arch, const char *a) { return strcmp(arch, a) == 0; }

/* One tensor to write: name, shape (cols, rows), and how its values are drawn. */
enum { K_MAT, K_NORM, K_BIAS, K_FACT };
typedef tm_tensor tdesc;
/* room for every tensor of spec s */
#define TENSORS_MAX(s) (64 + 32 * (size_t)(s)->layers)

static int list_tensors(const spec *s, tdesc *t) {
    const int D = s->dim, H = s->hidden, hs = s->key_len ? s->key_len : s->dim / s->heads;
    const int Q = hs * s->heads, KV = hs * s->kv_heads;
    const int gpt2 = has(s->arch, "gpt2"), gemma = has(s->arch, "gemma3"), phi3 = has(s->arch, "phi3");
    const int qwen2 = has(s->arch, "qwen2"), qwen3 = has(s->arch, "qwen3");
    int n = 0;
#define T(nm, c, r, k) (snprintf(t[n].name, sizeof t[n].name, "%s", nm), t[n].cols = (c), t[n].rows = (r), t[n].kind = (k), t[n].mat = (k) == K_MAT, n++)
#define TL(l, nm, c, r, k) (snprintf(t[n].name, sizeof t[n].name, "blk.%d.%s", l, nm), t[n].cols = (c), t[n].rows = (r), t[n].kind = (k), t[n].mat = (k) == K_MAT, n++)
    T("token_embd.weight", D, s->vocab, K_MAT);
    if (gpt2) T("position_embd.weight", D, s->seq, K_MAT);
    T("output_norm.weight", D, 1, K_NORM);
    if (gpt2) T("output_norm.bias", D, 1, K_BIAS);
    if (!s->tied) T("output.weight", D, s->vocab, K_MAT);
    if (s->rope_factors) {
        T("rope_factors_long.weight", hs / 2, 1, K_FACT);
        T("rope_factors_short.weight", hs / 2, 1, K_FACT);
    }
    for (int l = 0; l < s->layers; l++) {
        TL(l, "attn_norm.weight", D, 1, K_NORM);
        if (gpt2) TL(l, "attn_norm.bias", D, 1, K_BIAS);
        if (s->fused_qkv) {
            TL(l, "attn_qkv.weight", D, Q + 2 * KV, K_MAT);
            if (gpt2) TL(l, "attn_qkv.bias", Q + 2 * KV, 1, K_BIAS);
        } else {
            TL(l, "attn_q.weight", D, Q, K_MAT);
            TL(l, "attn_k.weight", D, KV, K_MAT);
            TL(l, "attn_v.weight", D, KV, K_MAT);
            if (qwen2) {
                TL(l, "attn_q.bias", Q, 1, K_BIAS);
                TL(l, "attn_k.bias", KV, 1, K_BIAS);
                TL(l, "attn_v.bias", KV, 1, K_BIAS);
            }
        }
        if (qwen3 || gemma) {
            TL(l, "attn_q_norm.weight", hs, 1, K_NORM);
            TL(l, "attn_k_norm.weight", hs, 1, K_NORM);
        }
        TL(l, "attn_output.weight", Q, D, K_MAT);
        if (gpt2) TL(l, "attn_output.bias", D, 1, K_BIAS);
        if (gemma) TL(l, "post_attention_norm.weight", D, 1, K_NORM);
        TL(l, "ffn_norm.weight", D, 1, K_NORM);
        if (gpt2) TL(l, "ffn_norm.bias", D, 1, K_BIAS);
        if (!gpt2 && !phi3) TL(l, "ffn_gate.weight", D, H, K_MAT);
        TL(l, "ffn_up.weight", D, phi3 ? 2 * H : H, K_MAT);
        if (gpt2) TL(l, "ffn_up.bias", H, 1, K_BIAS);
        TL(l, "ffn_down.weight", H, D, K_MAT);
        if (gpt2) TL(l, "ffn_down.bias", D, 1, K_BIAS);
        if (gemma) TL(l, "post_ffw_norm.weight", D, 1, K_NORM);
    }
#undef T
#undef TL
    return n;
}

/* The float values of tensor i (seeded by its index), as written before any quantization. */
static float *tensor_values(const tdesc *t, int i) {
    const size_t n = (size_t)t->cols * (size_t)t->rows;
    float *v = malloc(n * sizeof(float));
    tu_rng rng = {1000u + (uint32_t)i * 7919u};
    const float amp = t->kind == K_MAT ? 2.2f / sqrtf((float)t->cols) : 0.0f;
    for (size_t j = 0; j < n; j++) {
        switch (t->kind) {
        case K_MAT: v[j] = tu_rng_uniform(&rng, -amp, amp); break;
        case K_NORM: v[j] = 1.0f + tu_rng_uniform(&rng, -0.2f, 0.2f); break;
        case K_BIAS: v[j] = tu_rng_uniform(&rng, -0.3f, 0.3f); break;
        default: v[j] = 1.0f + tu_rng_uniform(&rng, 0.0f, 3.0f); break;
        }
    }
    return v;
}

static void key_u32(wlm_gguf_writer *w, const spec *s, const char *suffix, uint32_t v) {
    char k[96];
    snprintf(k, sizeof k, "%s.%s", s->arch, suffix);
    if (s->omit_key && strcmp(s->omit_key, k) == 0) return;
    wlm_gguf_add_u32(w, k, v);
}
static void key_f32(wlm_gguf_writer *w, const spec *s, const char *suffix, float v) {
    char k[96];
    snprintf(k, sizeof k, "%s.%s", s->arch, suffix);
    if (s->omit_key && strcmp(s->omit_key, k) == 0) return;
    wlm_gguf_add_f32(w, k, v);
}

/* The GGUF file of spec s, in memory (malloc'd), or NULL. */
static unsigned char *build_model(const spec *s, size_t *size) {
    tdesc *t = calloc(TENSORS_MAX(s), sizeof *t);
    const int nt = list_tensors(s, t);
    wlm_gguf_writer w;
    wlm_gguf_writer_init(&w, NULL);
    wlm_gguf_add_str(&w, "general.architecture", s->arch);
    key_u32(&w, s, "embedding_length", (uint32_t)s->dim);
    key_u32(&w, s, "feed_forward_length", (uint32_t)s->hidden);
    key_u32(&w, s, "block_count", (uint32_t)s->layers);
    key_u32(&w, s, "attention.head_count", (uint32_t)s->heads);
    key_u32(&w, s, "attention.head_count_kv", (uint32_t)s->kv_heads);
    key_u32(&w, s, "context_length", (uint32_t)s->seq);
    if (s->key_len) {
        key_u32(&w, s, "attention.key_length", (uint32_t)s->key_len);
        key_u32(&w, s, "attention.value_length", (uint32_t)s->key_len);
    }
    if (has(s->arch, "gpt2")) {
        key_f32(&w, s, "attention.layer_norm_epsilon", 1e-5f);
    } else {
        key_f32(&w, s, "attention.layer_norm_rms_epsilon", 1e-6f);
        key_f32(&w, s, "rope.freq_base", has(s->arch, "gemma3") ? 1e6f : 1e4f);
    }
    if (s->n_swa) key_u32(&w, s, "attention.sliding_window", (uint32_t)s->n_swa);
    if (s->softcap > 0) key_f32(&w, s, "final_logit_softcapping", s->softcap);
    if (s->attn_factor > 0) key_f32(&w, s, "rope.scaling.attn_factor", s->attn_factor);
    if (s->n_ctx_orig) key_u32(&w, s, "rope.scaling.original_context_length", (uint32_t)s->n_ctx_orig);
    tm_write_tensors(&w, t, nt, s->type, s->omit, s->misshape, tensor_values);
    unsigned char *file = tm_finish(&w, size);
    free(t);
    return file;
}

/* ---- an independent reference: the transformer in double, straight from the definitions ---- */

typedef struct ref_model {
    const spec *s;
    tm_ref m;                     /* each tensor's values, as the file holds them */
} ref_model;

static const float *rv(const ref_model *r, const char *name) { return tm_rv(&r->m, name); }
static const float *rvl(const ref_model *r, int l, const char *name) {
    return tm_rvl(&r->m, l, name);
}

static void ref_load(ref_model *r, const spec *s) {
    tdesc *t = calloc(TENSORS_MAX(s), sizeof *t);
    r->s = s;
    tm_ref_load_owned(&r->m, t, list_tensors(s, t), s->type, tensor_values);
}

/* y = W x, W (rows, cols) */
static void dmat(double *y, const float *W, const double *x, int rows, int cols) {
    tm_dmat(y, W, x, rows, cols, WLM_TYPE_F32);
}
static void dnorm(double *y, const double *x, int n, const float *w, const float *b, int layer,
                  double eps) {
    double mean = 0, ss = 0;
    if (layer) {
        for (int i = 0; i < n; i++) mean += x[i];
        mean /= n;
    }
    for (int i = 0; i < n; i++) ss += (x[i] - mean) * (x[i] - mean);
    const double sc = 1.0 / sqrt(ss / n + eps);
    for (int i = 0; i < n; i++) y[i] = (x[i] - mean) * sc * w[i] + (b ? b[i] : 0.0);
}
/* GELU (tanh form) with ggml's CPU rounding of its input and output to binary16
 * (GGML_GELU_FP16, see wlm_gelu1_ref), so that F32 models compare tightly. */
static double f16r(double x) { return wlm_fp16_to_fp32(wlm_fp32_to_fp16((float)x)); }
static double dgelu(double x) {
    if (x <= -10.0) return 0.0;
    if (x >= 10.0) return x;
    x = f16r(x);
    return f16r(0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))));
}
static double dsilu(double x) { return x / (1.0 + exp(-x)); }

/* Rotates one head (hs values, the first n_rot rotating) to position pos. */
static void drope(double *h, int hs, int n_rot, double pos, double base, const float *ff,
                  double mscale, int neox) {
    (void)hs;
    for (int i = 0; i < n_rot / 2; i++) {
        double theta = pos * pow(base, -2.0 * i / n_rot) / (ff ? ff[i] : 1.0);
        double c = cos(theta) * mscale, s = sin(theta) * mscale;
        int a = neox ? i : 2 * i, b = neox ? i + n_rot / 2 : 2 * i + 1;
        double x0 = h[a], x1 = h[b];
        h[a] = x0 * c - x1 * s;
        h[b] = x0 * s + x1 * c;
    }
}

/* Logits (vocab) after each of the n tokens, into out (n, vocab); n_ctx: the context size
 * (LongRoPE's choice). */
static void ref_forward(const ref_model *r, const int32_t *tok, int n, int n_ctx, double *out) {
    const spec *s = r->s;
    const int D = s->dim, H = s->hidden, L = s->layers, nh = s->heads, nkv = s->kv_heads;
    const int hs = s->key_len ? s->key_len : D / nh, Q = hs * nh, KV = hs * nkv;
    const int gpt2 = has(s->arch, "gpt2"), gemma = has(s->arch, "gemma3"), phi3 = has(s->arch, "phi3");
    const int neox = !has(s->arch, "llama") && !gpt2;
    const double eps = gpt2 ? 1e-5 : 1e-6;
    const double base = gemma ? 1e6 : 1e4;
    double *K = calloc((size_t)L * n * KV, sizeof(double)), *Vc = calloc((size_t)L * n * KV, sizeof(double));
    double *x = calloc((size_t)D, sizeof(double)), *xn = calloc((size_t)(Q > D ? Q : D), sizeof(double));
    double *q = calloc((size_t)Q + 2 * KV, sizeof(double)), *att = calloc((size_t)Q, sizeof(double));
    double *o = calloc((size_t)D, sizeof(double)), *g = calloc((size_t)2 * H, sizeof(double));
    double *u = calloc((size_t)H, sizeof(double)), *sc = calloc((size_t)n, sizeof(double));
    const float *ff = NULL;
    if (s->rope_factors)
        ff = rv(r, n_ctx > (s->n_ctx_orig ? s->n_ctx_orig : s->seq) ? "rope_factors_long.weight"
                                                                     : "rope_factors_short.weight");
    const double mscale = s->attn_factor > 0 ? s->attn_factor : 1.0;
    for (int p = 0; p < n; p++) {
        const float *e = rv(r, "token_embd.weight") + (size_t)tok[p] * D;
        for (int i = 0; i < D; i++) x[i] = e[i];
        if (gpt2)
            for (int i = 0; i < D; i++) x[i] += rv(r, "position_embd.weight")[(size_t)p * D + i];
        if (gemma)
            for (int i = 0; i < D; i++) x[i] *= sqrt((double)D);
        for (int l = 0; l < L; l++) {
            const int swa = gemma && s->n_swa > 0 && l % 6 < 5;
            dnorm(xn, x, D, rvl(r, l, "attn_norm.weight"), rvl(r, l, "attn_norm.bias"), gpt2, eps);
            if (s->fused_qkv) {
                dmat(q, rvl(r, l, "attn_qkv.weight"), xn, Q + 2 * KV, D);
                const float *b = rvl(r, l, "attn_qkv.bias");
                if (b) for (int i = 0; i < Q + 2 * KV; i++) q[i] += b[i];
            } else {
                dmat(q, rvl(r, l, "attn_q.weight"), xn, Q, D);
                dmat(q + Q, rvl(r, l, "attn_k.weight"), xn, KV, D);
                dmat(q + Q + KV, rvl(r, l, "attn_v.weight"), xn, KV, D);
                const float *bq = rvl(r, l, "attn_q.bias"), *bk = rvl(r, l, "attn_k.bias"), *bv = rvl(r, l, "attn_v.bias");
                if (bq) for (int i = 0; i < Q; i++) q[i] += bq[i];
                if (bk) for (int i = 0; i < KV; i++) q[Q + i] += bk[i];
                if (bv) for (int i = 0; i < KV; i++) q[Q + KV + i] += bv[i];
            }
            const float *qn = rvl(r, l, "attn_q_norm.weight"), *kn = rvl(r, l, "attn_k_norm.weight");
            for (int h = 0; h < nh + nkv; h++) {
                double *hd = q + (size_t)h * hs;
                if (qn) dnorm(hd, hd, hs, h < nh ? qn : kn, NULL, 0, eps);
                if (!gpt2) drope(hd, hs, hs, p, swa ? 1e4 : base, swa ? NULL : ff, mscale, neox);
            }
            memcpy(K + ((size_t)l * n + p) * KV, q + Q, sizeof(double) * KV);
            memcpy(Vc + ((size_t)l * n + p) * KV, q + Q + KV, sizeof(double) * KV);
            const int t0 = swa && p + 1 > s->n_swa ? p + 1 - s->n_swa : 0;
            const double scale = 1.0 / sqrt((double)hs);
            for (int h = 0; h < nh; h++) {
                const int kh = h / (nh / nkv);
                double mx = -1e300, sum = 0;
                for (int t = t0; t <= p; t++) {
                    double a = 0;
                    for (int i = 0; i < hs; i++) a += q[h * hs + i] * K[((size_t)l * n + t) * KV + kh * hs + i];
                    sc[t] = a * scale;
                    if (sc[t] > mx) mx = sc[t];
                }
                for (int t = t0; t <= p; t++) sum += (sc[t] = exp(sc[t] - mx));
                for (int i = 0; i < hs; i++) {
                    double a = 0;
                    for (int t = t0; t <= p; t++) a += sc[t] / sum * Vc[((size_t)l * n + t) * KV + kh * hs + i];
                    att[h * hs + i] = a;
                }
            }
            dmat(o, rvl(r, l, "attn_output.weight"), att, D, Q);
            const float *bo = rvl(r, l, "attn_output.bias");
            if (bo) for (int i = 0; i < D; i++) o[i] += bo[i];
            if (gemma) dnorm(o, o, D, rvl(r, l, "post_attention_norm.weight"), NULL, 0, eps);
            for (int i = 0; i < D; i++) x[i] += o[i];
            dnorm(xn, x, D, rvl(r, l, "ffn_norm.weight"), rvl(r, l, "ffn_norm.bias"), gpt2, eps);
            if (phi3) {
                dmat(g, rvl(r, l, "ffn_up.weight"), xn, 2 * H, D);
                for (int i = 0; i < H; i++) u[i] = dsilu(g[i]) * g[H + i];
            } else if (gpt2) {
                dmat(u, rvl(r, l, "ffn_up.weight"), xn, H, D);
                for (int i = 0; i < H; i++) u[i] = dgelu(u[i] + rvl(r, l, "ffn_up.bias")[i]);
            } else {
                dmat(g, rvl(r, l, "ffn_gate.weight"), xn, H, D);
                dmat(u, rvl(r, l, "ffn_up.weight"), xn, H, D);
                for (int i = 0; i < H; i++) u[i] *= gemma ? dgelu(g[i]) : dsilu(g[i]);
            }
            dmat(o, rvl(r, l, "ffn_down.weight"), u, D, H);
            const float *bd = rvl(r, l, "ffn_down.bias");
            if (bd) for (int i = 0; i < D; i++) o[i] += bd[i];
            if (gemma) dnorm(o, o, D, rvl(r, l, "post_ffw_norm.weight"), NULL, 0, eps);
            for (int i = 0; i < D; i++) x[i] += o[i];
        }
        dnorm(xn, x, D, rv(r, "output_norm.weight"), rv(r, "output_norm.bias"), gpt2, eps);
        const float *W = s->tied ? rv(r, "token_embd.weight") : rv(r, "output.weight");
        dmat(out + (size_t)p * s->vocab, W, xn, s->vocab, D);
        if (s->softcap > 0 && s->n_swa == 0)
            for (int i = 0; i < s->vocab; i++)
                out[(size_t)p * s->vocab + i] = s->softcap * tanh(out[(size_t)p * s->vocab + i] / s->softcap);
    }
    free(K); free(Vc); free(x); free(xn); free(q); free(att); free(o); free(g); free(u); free(sc);
}

/* ---- the tests ------------------------------------------------------------------------------- */

static spec base_spec(const char *arch) {
    spec s = {0};
    s.arch = arch;
    s.dim = 128;
    s.hidden = 256;
    s.layers = 2;
    s.heads = 4;
    s.kv_heads = 2;
    s.vocab = 512;
    s.seq = 320;
    s.type = WLM_TYPE_F32;
    if (has(arch, "qwen3")) s.key_len = 48;               /* q_dim 192 != dim */
    if (has(arch, "gemma3")) {
        s.key_len = 48;
        s.layers = 7;                                     /* layers 5: global; 0-4, 6: windows */
        s.n_swa = 24;
        s.tied = 1;
    }
    if (has(arch, "phi3")) {
        s.fused_qkv = 1;
        s.rope_factors = 1;
        s.attn_factor = 1.19f;
        s.n_ctx_orig = 64;
    }
    if (has(arch, "gpt2")) {
        s.fused_qkv = 1;
        s.tied = 1;
    }
    return s;
}

static wlm_model *load_spec(const spec *s, int want, const char *needle, const char *what) {
    size_t size = 0;
    unsigned char *file = build_model(s, &size);
    return tm_load(file, size, want, needle, what);
}

static wlm_context *new_ctx_kv(const wlm_model *m, int n_ctx, int simd, int32_t kv_type) {
    return tu_context(m, n_ctx, 0, simd, kv_type);
}

static wlm_context *new_ctx(const wlm_model *m, int n_ctx, int simd) {
    return new_ctx_kv(m, n_ctx, simd, WLM_KV_F32);
}

static void prompt_tokens(int32_t *t, int n, int vocab) {
    tu_rng rng = {77};
    for (int i = 0; i < n; i++) t[i] = (int32_t)(tu_rng_u64(&rng) % (uint64_t)vocab);
}




/* Our logits against the double reference: the largest difference relative to the largest
 * |logit| of the position. */
static double compare_ref(const spec *s, const float *ours, int n, int n_ctx) {
    ref_model r;
    ref_load(&r, s);
    int32_t *t = malloc(sizeof(int32_t) * (size_t)n);
    prompt_tokens(t, n, s->vocab);
    double *ref = malloc(sizeof(double) * (size_t)n * s->vocab);
    ref_forward(&r, t, n, n_ctx, ref);
    const double worst = tm_worst_diff(ref, ours, n, s->vocab);
    free(t);
    free(ref);
    tm_ref_free(&r.m);
    return worst;
}

/* variant 1: the base spec; 0: phi3 with separate Q/K/V and its short RoPE factors (context
 * within original_context_length), gemma3 without sliding windows and with the logit soft-cap. */
static void test_arch(const char *arch, int variant, int32_t type) {
    spec s = base_spec(arch);
    const char *vname = "";
    if (has(arch, "phi3") && !variant) {
        s.fused_qkv = 0;
        s.n_ctx_orig = s.seq;
        vname = " (separate Q/K/V, short factors)";
    }
    if (has(arch, "gemma3") && !variant) {
        s.n_swa = 0;
        s.softcap = 3.0f;
        vname = " (no windows, soft-cap 3)";
    }
    s.type = type;
    char what[128];
    snprintf(what, sizeof what, "%s%s %s", arch, vname, wlm_type_get(type)->name);
    wlm_model *m = load_spec(&s, WLM_OK, NULL, what);
    if (!m) return;
    wlm_model_info info;
    CHECK_STATUS(wlm_model_get_info(m, &info), WLM_OK);
    CHECK_EQ_INT(info.dim, s.dim);
    CHECK_EQ_INT(info.n_layers, s.layers);
    CHECK(strcmp(m->hp.arch->name, arch) == 0);

    /* against the double-precision reference: 40 positions (past gemma3's window of 24) */
    const int NR = 40;
    int32_t t[300];
    prompt_tokens(t, 300, s.vocab);
    wlm_context *c = new_ctx(m, 0, 1);
    if (c) {
        float *got = tm_logits_batched(c, t, NR, s.vocab);
        const double d = compare_ref(&s, got, NR, s.seq);
        /* F32/F16: float vs double rounding (a GELU input near a binary16 rounding boundary may
         * round the other way); quantized types: the engine also quantizes the activations to
         * Q8_0 for the products (as llama.cpp), the reference does not */
        const int gelu = has(arch, "gemma3") || has(arch, "gpt2");
        const double tol = type == WLM_TYPE_F32 || type == WLM_TYPE_F16 ? (gelu ? 5e-4 : 2e-5) : 0.1;
        CHECKF(d <= tol, "%s: logits differ from the reference by %.3g of the largest (tol %.3g)",
               what, d, tol);
        printf("   %s: max |logit - reference| %.2e of the largest logit over %d positions\n", what,
               d, NR);
        free(got);
    }

    /* batch and threads: bitwise equal to one token at a time on one thread (the scalar
     * kernels with an F32 KV cache, the SIMD ones with an F16 cache) */
    /* 270 positions: five batch chunks (WLM_BATCH_CHUNK 64) and a partial one; under the
     * sanitizers (WASMLM_TEST_TYPES=quick, tools/test.sh) 130, still three chunks */
    const int N = quick_run() ? 130 : 270;
    for (int simd = 0; c && simd <= 1; simd++) {
        wlm_context *cs = new_ctx_kv(m, 0, simd, simd ? WLM_KV_F16 : WLM_KV_F32);
        if (!cs) break;
        float *one = tm_logits_one_by_one(cs, t, N, s.vocab);
        float *bat = tm_logits_batched(cs, t, N, s.vocab);
        size_t at = 0;
        CHECKF(tm_same(one, bat, (size_t)N * s.vocab, &at),
               "%s simd %d: batched logits differ from one-by-one at position %zu", what, simd,
               at / (size_t)s.vocab);
        char what_simd[160];
        snprintf(what_simd, sizeof what_simd, "%s simd %d", what, simd);
        tm_check_threads(cs, t, N, s.vocab, one, 8, what_simd);
        /* the matrix-vector kernels without read-ahead (read_ahead 0): the same bits */
        CHECK_STATUS(wlm_context_set_read_ahead(cs, 0), WLM_OK);
        float *near = tm_logits_one_by_one(cs, t, 8, s.vocab);
        CHECKF(tm_same(one, near, (size_t)8 * s.vocab, &at),
               "%s simd %d: read_ahead 0 differs at position %zu", what, simd, at / (size_t)s.vocab);
        CHECK_STATUS(wlm_context_set_read_ahead(cs, 2), WLM_ERR_INVALID_ARG);
        CHECK_STATUS(wlm_context_set_read_ahead(cs, 1), WLM_OK);
        free(near);
        free(one);
        free(bat);
        wlm_context_free(cs);
    }
    wlm_context_free(c);
    wlm_model_free(m);
}

/* Context shift: after discarding positions [keep, keep + d) the cache predicts what a fresh
 * evaluation of the remaining tokens predicts (up to the rounding of the re-rotation); refused
 * with a message where positions cannot be moved. */
static void test_shift(const char *arch) {
    spec s = base_spec(arch);
    /* one layer: K and V then depend on the token and its position only, so the shifted cache
     * must equal a fresh one (deeper layers' rows also saw the discarded tokens) */
    s.layers = has(arch, "gemma3") ? 7 : 1;
    wlm_model *m = load_spec(&s, WLM_OK, NULL, arch);
    if (!m) return;
    wlm_context *c = new_ctx(m, 0, 1), *f = new_ctx(m, 0, 1);
    if (c && f) {
        int32_t t[64], kept[64];
        prompt_tokens(t, 64, s.vocab);
        const int n = 40, keep = 4, d = 10;
        CHECK_STATUS(wlm_eval(c, t, n), WLM_OK);
        int rc = wlm_seq_shift(c, 0, keep, d);
        if (has(arch, "gpt2") || has(arch, "gemma3")) {
            CHECK_STATUS(rc, WLM_ERR_UNSUPPORTED);
            const char *want = has(arch, "gpt2") ? "learned" : "sliding-window";
            CHECKF(strstr(wlm_context_errmsg(c), want) != NULL, "%s: shift message \"%s\"", arch,
                   wlm_context_errmsg(c));
            CHECK_EQ_INT(wlm_context_n_past(c), n); /* nothing changed */
            /* a generation asking for context shifts is refused up front */
            wlm_gen_params gp;
            wlm_gen_params_default(&gp);
            gp.context_shift = 1;
            CHECK_STATUS(wlm_generate_begin(c, t, 4, &gp), WLM_ERR_UNSUPPORTED);
            CHECKF(strstr(wlm_context_errmsg(c), want) != NULL, "%s: begin message \"%s\"", arch,
                   wlm_context_errmsg(c));
        } else {
            CHECK_STATUS(rc, WLM_OK);
            CHECK_STATUS(wlm_eval(c, t + n, 1), WLM_OK);
            int k = 0;
            for (int i = 0; i < keep; i++) kept[k++] = t[i];
            for (int i = keep + d; i <= n; i++) kept[k++] = t[i];
            CHECK_STATUS(wlm_eval(f, kept, k), WLM_OK);
            const float *a = wlm_logits(c), *b = wlm_logits(f);
            double big = 0, diff = 0;
            for (int i = 0; i < s.vocab; i++) {
                if (fabs(b[i]) > big) big = fabs(b[i]);
                if (fabs(a[i] - b[i]) > diff) diff = fabs(a[i] - b[i]);
            }
            CHECKF(diff <= 1e-4 * big, "%s: shifted cache vs fresh: %.3g of the largest logit",
                   arch, diff / big);
        }
    }
    wlm_context_free(c);
    wlm_context_free(f);
    wlm_model_free(m);
}

/* Generation, log-probabilities and beam search run on every architecture. */
static void test_generate(const char *arch) {
    spec s = base_spec(arch);
    wlm_model *m = load_spec(&s, WLM_OK, NULL, arch);
    if (!m) return;
    wlm_context_params cp;
    wlm_context_params_default(&cp);
    cp.n_seq_max = 8;
    wlm_context *c = NULL;
    CHECK_STATUS(wlm_context_new(m, &cp, &c), WLM_OK);
    if (c) {
        int32_t t[8];
        prompt_tokens(t, 8, s.vocab);
        wlm_gen_params gp;
        wlm_gen_params_default(&gp);
        gp.temperature = 0;
        gp.max_tokens = 5;
        CHECK_STATUS(wlm_generate_begin(c, t, 8, &gp), WLM_OK);
        wlm_token tok;
        int n = 0, rc;
        while ((rc = wlm_generate_next(c, &tok)) == WLM_OK) n++;
        CHECKF(rc == WLM_DONE && n == 5, "%s: generated %d tokens, %s", arch, n, wlm_status_name(rc));
        wlm_beam_params bp;
        wlm_beam_params_default(&bp);
        bp.width = 3;
        bp.max_tokens = 4;
        CHECK_STATUS(wlm_beam_begin(c, t, 8, &bp), WLM_OK);
        while ((rc = wlm_beam_step(c)) == WLM_OK) {}
        CHECKF(rc == WLM_DONE && wlm_beam_count(c) >= 1, "%s: beam search %s", arch, wlm_status_name(rc));
    }
    wlm_context_free(c);
    wlm_model_free(m);
}

/* Missing or misshapen tensors and keys: an error naming them. */
static void test_errors(void) {
    struct { const char *arch, *omit, *misshape, *omit_key; int want; const char *needle; } cases[] = {
        {"qwen2", "blk.1.attn_k.bias", NULL, NULL, WLM_ERR_FORMAT, "blk.1.attn_k.bias"},
        {"qwen2", NULL, "blk.0.attn_q.weight", NULL, WLM_ERR_FORMAT, "blk.0.attn_q.weight"},
        {"qwen3", "blk.0.attn_k_norm.weight", NULL, NULL, WLM_ERR_FORMAT, "attn_k_norm"},
        {"qwen3", NULL, NULL, "qwen3.attention.head_count", WLM_ERR_FORMAT, "qwen3.attention.head_count"},
        {"gemma3", "blk.6.post_ffw_norm.weight", NULL, NULL, WLM_ERR_FORMAT, "blk.6.post_ffw_norm.weight"},
        {"gemma3", "blk.2.post_attention_norm.weight", NULL, NULL, WLM_ERR_FORMAT, "post_attention_norm"},
        {"gemma3", NULL, "blk.3.attn_q_norm.weight", NULL, WLM_ERR_FORMAT, "attn_q_norm"},
        {"phi3", NULL, "blk.1.ffn_up.weight", NULL, WLM_ERR_FORMAT, "blk.1.ffn_up.weight"},
        {"phi3", "rope_factors_short.weight", NULL, NULL, WLM_ERR_FORMAT, "rope_factors"},
        {"phi3", NULL, "blk.0.attn_qkv.weight", NULL, WLM_ERR_FORMAT, "attn_qkv"},
        {"gpt2", "position_embd.weight", NULL, NULL, WLM_ERR_FORMAT, "position_embd.weight"},
        {"gpt2", "blk.0.attn_qkv.bias", NULL, NULL, WLM_ERR_FORMAT, "blk.0.attn_qkv.bias"},
        {"gpt2", "output_norm.bias", NULL, NULL, WLM_ERR_FORMAT, "output_norm.bias"},
        {"gpt2", NULL, "blk.1.ffn_down.bias", NULL, WLM_ERR_FORMAT, "ffn_down.bias"},
        {"gpt2", NULL, NULL, "gpt2.context_length", WLM_ERR_FORMAT, "gpt2.context_length"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        spec s = base_spec(cases[i].arch);
        s.omit = cases[i].omit;
        s.misshape = cases[i].misshape;
        s.omit_key = cases[i].omit_key;
        char what[128];
        snprintf(what, sizeof what, "%s without %s", cases[i].arch,
                 cases[i].omit ? cases[i].omit : cases[i].misshape ? cases[i].misshape : cases[i].omit_key);
        wlm_model *m = load_spec(&s, cases[i].want, cases[i].needle, what);
        wlm_model_free(m);
    }
}

/* The buffer WLM_LOAD_TENSORS_EXTERNAL takes for `file`: its header, then every resident tensor
 * (gguf.h's rule: one-row tensors, conv kernels, expert biases, host lookup tables) in
 * tensor-info order at the next multiple of the alignment (zeros when !fill). */
static int in_resident_area(const wlm_gguf_tensor *t) {
    return wlm_gguf_tensor_resident(t) || wlm_gguf_tensor_host_lookup(t);
}
static unsigned char *external_buffer(const unsigned char *file, size_t size, int fill,
                                      size_t *out_size) {
    wlm_gguf g;
    if (!CHECK(wlm_gguf_parse(&g, file, size, NULL, 0) == WLM_OK)) return NULL;
    size_t at = 0;
    for (size_t i = 0; i < g.n_tensors; i++)
        if (in_resident_area(&g.tensors[i]))
            at = (at + g.tensors[i].nbytes + g.alignment - 1) / g.alignment * g.alignment;
    *out_size = g.data_offset + at;
    unsigned char *buf = calloc(*out_size, 1);
    memcpy(buf, file, g.data_offset);
    at = 0;
    for (size_t i = 0; i < g.n_tensors && fill; i++) {
        const wlm_gguf_tensor *t = &g.tensors[i];
        if (!in_resident_area(t)) continue;
        memcpy(buf + g.data_offset + at, t->data, t->nbytes);
        at = (at + t->nbytes + g.alignment - 1) / g.alignment * g.alignment;
    }
    wlm_gguf_free(&g);
    return buf;
}

/* A deferred (kv_cache 2) or CPU context's status on m. */
static int context_status(const wlm_model *m, int deferred, char *msg, size_t n) {
    wlm_context_params cp;
    wlm_context_params_default(&cp);
    cp.n_ctx = 32;
    cp.kv_cache = deferred ? 2 : 1;
    wlm_context *c = NULL;
    int rc = wlm_context_new(m, &cp, &c);
    snprintf(msg, n, "%s", wlm_context_errmsg(c));
    wlm_context_free(c);
    return rc;
}

static void test_external(const char *arch, int32_t type) {
    spec s = base_spec(arch);
    s.type = type;
    size_t size = 0, ext_size = 0;
    unsigned char *file = build_model(&s, &size);
    wlm_model *full = NULL, *m = NULL;
    CHECK_STATUS(wlm_model_load(file, size, 0, &full), WLM_OK);
    unsigned char *ext = external_buffer(file, size, 0, &ext_size);
    CHECKF(ext_size < size / 4, "%s: resident buffer %zu bytes of %zu", arch, ext_size, size);
    int rc = wlm_model_load(ext, ext_size, WLM_LOAD_TENSORS_EXTERNAL, &m);
    CHECKF(rc == WLM_OK, "%s external load: %s", arch, wlm_model_errmsg(m));
    char msg[WLM_ERRMSG_SIZE], a[1 << 14], b[1 << 14];
    if (rc == WLM_OK) {
        /* described as the whole file is, before any vector is read */
        CHECK(wlm_model_describe(full, a, sizeof a) < (int64_t)sizeof a);
        CHECK(wlm_model_describe(m, b, sizeof b) < (int64_t)sizeof b);
        const char *ta = strstr(a, "\"tensors\""), *tb = strstr(b, "\"tensors\"");
        CHECKF(ta && tb && ta - a == tb - b && memcmp(a, b, (size_t)(ta - a)) == 0,
               "%s: the external model's description differs", arch);
        CHECK_STATUS(context_status(m, 1, msg, sizeof msg), WLM_ERR_STATE);
        CHECKF(strstr(msg, "not read in yet") != NULL, "%s", msg);
        /* committed with the vectors in */
        unsigned char *filled = external_buffer(file, size, 1, &ext_size);
        memcpy(ext, filled, ext_size);
        free(filled);
        CHECK_STATUS(wlm_model_commit_external(m), WLM_OK);
        CHECK_STATUS(wlm_model_commit_external(m), WLM_ERR_STATE);
        CHECK_STATUS(context_status(m, 0, msg, sizeof msg), WLM_ERR_STATE);
        CHECKF(strstr(msg, "another backend") != NULL, "%s", msg);
        CHECK_STATUS(context_status(m, 1, msg, sizeof msg), WLM_OK);
        const int D = s.dim;
        for (int l = 0; l < s.layers; l++) {
            const wlm_layer_weights *x = &full->w.layers[l], *y = &m->w.layers[l];
            CHECKF(memcmp(x->rms_att, y->rms_att, sizeof(float) * (size_t)D) == 0 &&
                       memcmp(x->rms_ffn, y->rms_ffn, sizeof(float) * (size_t)D) == 0,
                   "%s layer %d: norms differ", arch, l);
            CHECK((x->bq == NULL) == (y->bq == NULL));
            if (x->bq) CHECK(memcmp(x->bq, y->bq, sizeof(float) * (size_t)s.heads * 4) == 0);
            const wlm_tensor *mx[] = {&x->wq, &x->wqkv, &x->wo, &x->w2, &x->w3};
            const wlm_tensor *my[] = {&y->wq, &y->wqkv, &y->wo, &y->w2, &y->w3};
            for (int k = 0; k < 5; k++) {
                CHECK((mx[k]->data == NULL) == (my[k]->data == NULL));
                CHECK(mx[k]->type == my[k]->type && mx[k]->rows == my[k]->rows &&
                      mx[k]->row_bytes == my[k]->row_bytes);
            }
            CHECK(y->wo.data != y->w2.data);
        }
        CHECK(memcmp(full->w.rms_final, m->w.rms_final, sizeof(float) * (size_t)D) == 0);
        CHECK((m->w.wcls.data == m->w.token_embedding.data) == (s.tied != 0));
        if (s.rope_factors)
            CHECK(memcmp(full->w.rope_long, m->w.rope_long, sizeof(float) * (size_t)(s.dim / s.heads / 2)) == 0);
        CHECK_EQ_INT(m->weight_bytes, full->weight_bytes);
    }
    wlm_model_free(m);
    m = NULL;
    /* a non-finite norm value, a zero RoPE factor: the commit names the tensor */
    for (int bad = 0; bad < 1 + s.rope_factors; bad++) {
        unsigned char *e = external_buffer(file, size, 0, &ext_size);
        CHECK_STATUS(wlm_model_load(e, ext_size, WLM_LOAD_OWN_BUFFER | WLM_LOAD_TENSORS_EXTERNAL, &m), WLM_OK);
        unsigned char *filled = external_buffer(file, size, 1, &ext_size);
        memcpy(e, filled, ext_size);
        free(filled);
        wlm_gguf g;
        CHECK(wlm_gguf_parse_ex(&g, e, ext_size, WLM_GGUF_MATRICES_EXTERNAL, NULL, 0) == WLM_OK);
        const wlm_gguf_tensor *t = wlm_gguf_find_tensor(&g, bad ? "rope_factors_long.weight"
                                                                 : "blk.1.ffn_norm.weight");
        if (CHECK(t && t->data && t->type == WLM_TYPE_F32)) {
            const float v = bad ? 0.0f : NAN;
            memcpy((unsigned char *)t->data + 4, &v, 4);
        }
        wlm_gguf_free(&g);
        rc = wlm_model_commit_external(m);
        CHECKF(rc == WLM_ERR_FORMAT && strstr(wlm_model_errmsg(m), bad ? "rope_factors_long" : "blk.1.ffn_norm"),
               "%s bad %d: %s %s", arch, bad, wlm_status_name(rc), wlm_model_errmsg(m));
        CHECK_STATUS(context_status(m, 1, msg, sizeof msg), WLM_ERR_STATE);
        wlm_model_free(m);
        m = NULL;
    }
    /* the header cut short: TRUNCATED, as for a whole file */
    rc = wlm_model_load(file, 64, WLM_LOAD_TENSORS_EXTERNAL, &m);
    CHECK_STATUS(rc, WLM_ERR_TRUNCATED);
    wlm_model_free(m);
    free(ext);
    wlm_model_free(full);
    free(file);
}

int main(void) {
    const char *archs[] = {"llama", "qwen2", "qwen3", "gemma3", "phi3", "gpt2"};
    const int32_t types[] = {WLM_TYPE_F32, WLM_TYPE_Q4_0, WLM_TYPE_F16, WLM_TYPE_Q8_0};
    /* under the sanitizers one float and one quantized type (the first two) */
    const size_t n_types = quick_run() ? 2 : sizeof types / sizeof types[0];
    for (size_t a = 0; a < sizeof archs / sizeof archs[0]; a++)
        for (size_t ti = 0; ti < n_types; ti++)
            test_arch(archs[a], 1, types[ti]);
    test_arch("phi3", 0, WLM_TYPE_F32);
    test_arch("gemma3", 0, WLM_TYPE_F32);
    for (size_t a = 0; a < sizeof archs / sizeof archs[0]; a++) {
        test_shift(archs[a]);
        test_generate(archs[a]);
    }
    test_errors();
    for (size_t a = 0; a < sizeof archs / sizeof archs[0]; a++)
        test_external(archs[a], a % 2 ? WLM_TYPE_F16 : WLM_TYPE_Q8_0);
    return TEST_FINISH();
}
