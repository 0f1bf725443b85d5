/*
 * kernels.h — internal: the numeric building blocks of the forward pass. Every kernel exists
 * twice: a scalar reference (`*_ref`, kernels_ref.c, the oracle for tests) and a WASM SIMD128
 * version (`*_simd`, kernels_simd.c; in a build without -msimd128 it forwards to the reference).
 * A wlm_kernels table picks one set per context. Kernels take row ranges so that a thread pool
 * can split the work later. Arrays are row-major float32; shapes are given as (rows, cols).
 */
#ifndef WASMLM_KERNELS_H
#define WASMLM_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* out[r] = sum_j w[r*n + j] * x[j] for r in [r0, r1). w: (d, n), x: (n), out: (d). */
typedef void (*wlm_matvec_fn)(float *out, const float *w, const float *x, int n, int r0, int r1);
/* out[i] = x[i] * weight[i] / sqrt(mean(x^2) + eps), i < n. out may alias x. */
typedef void (*wlm_rmsnorm_fn)(float *out, const float *x, const float *weight, int n, float eps);
/* x[i] = exp(x[i] - max) / sum, in place, i < n (n >= 1). */
typedef void (*wlm_softmax_fn)(float *x, int n);
/* Rotates the interleaved pairs (x[2i], x[2i+1]), i < n_rot/2, of each head of size head_size
 * in x (n_heads heads, contiguous) by the angles whose cos/sin are cos_t[i], sin_t[i]; the
 * dimensions n_rot..head_size-1 of each head are left as they are (partial rotary embeddings,
 * ggml_rope's n_dims < ne0). n_rot even, 0 < n_rot <= head_size. */
typedef void (*wlm_rope_fn)(float *x, int n_heads, int head_size, int n_rot, const float *cos_t,
                            const float *sin_t);
/* SwiGLU gate: h[i] = silu(h[i]) * g[i] = h[i] / (1 + exp(-h[i])) * g[i], i < n. */
typedef void (*wlm_swiglu_fn)(float *h, const float *g, int n);
/* LayerNorm (Ba et al. 2016): out[i] = (x[i] - mean) / sqrt(var + eps) * weight[i] + bias[i],
 * mean and (biased) variance over i < n; bias may be NULL (no bias). out may alias x. */
typedef void (*wlm_layernorm_fn)(float *out, const float *x, const float *weight,
                                 const float *bias, int n, float eps);
/* GELU, tanh approximation (Hendrycks & Gimpel 2016), as ggml's CPU backend evaluates it
 * (wlm_gelu1_ref): h[i] = gelu(h[i]) * g[i] (GeGLU), or gelu(h[i]) when g is NULL; i < n. */
typedef void (*wlm_gelu_fn)(float *h, const float *g, int n);
/* Returns sum_i a[i] * b[i], i < n. */
typedef float (*wlm_dot_fn)(const float *a, const float *b, int n);
/* out[i] += s * x[i], i < n. */
typedef void (*wlm_axpy_fn)(float *out, float s, const float *x, int n);

/* Attention of the query heads [h0, h1) over positions 0..n-1 (scaled dot-product attention,
 * Vaswani et al. 2017, with grouped-query attention, Ainslie et al. 2023): for each head h,
 * att[t] = dot(q_h, k_t) / sqrt(head_size), softmax over t, out_h = sum_t att[t] v_t, where q_h
 * = q + h * head_size, out_h = out + h * head_size, and k_t / v_t are the head_size floats of KV
 * head h / kv_mul in position t's row. The cache is paged: position t's key row is
 * kb[t / block] + (t % block) * stride (its value row likewise in vb), so a sequence's positions
 * may live in scattered blocks of `block` positions; a contiguous cache is one block
 * (block >= n). Only out's heads [h0, h1) are written, and each head's result does not depend
 * on h0 and h1 (a thread split by heads changes nothing). scratch: at least
 * wlm_attention_scratch(h1 - h0, n, head_size) floats; head h's attention weights are left at
 * scratch + (h - h0) * n. */
typedef void (*wlm_attention_fn)(float *out, const float *q, const float *const *kb,
                                 const float *const *vb, int block, int n, int h0, int h1,
                                 int kv_mul, int head_size, int stride, float *scratch);

/* The same attention over a KV cache stored as IEEE binary16 (K and V rows of uint16_t bits,
 * `stride` halves apart): each K/V element is widened exactly to float32 and the arithmetic is
 * the float kernel's, so the result equals wlm_attention_fn's over the widened rows (the scalar
 * reference: bitwise). */
typedef void (*wlm_attention_f16_fn)(float *out, const float *q, const uint16_t *const *kb,
                                     const uint16_t *const *vb, int block, int n, int h0, int h1,
                                     int kv_mul, int head_size, int stride, float *scratch);

/* Floats of scratch the attention kernels need for `heads` heads over n positions. */
static inline size_t wlm_attention_scratch(int heads, int n, int head_size) {
    return (size_t)heads * ((size_t)n + 2 * (size_t)head_size);
}

/* A batch of nb vectors against the same rows: out[b * out_stride + r] = sum_j w[r*n + j] *
 * x[b * x_stride + j] for r in [r0, r1), b < nb. Every result is bitwise equal to the matvec
 * kernel's of the same set for that vector alone (same operations in the same order), so
 * batching never changes a result; the weights are read once for several vectors. */
typedef void (*wlm_matmat_fn)(float *out, size_t out_stride, const float *w, const float *x,
                              size_t x_stride, int n, int r0, int r1, int nb);

/* One token of the gated delta rule (Yang, Kautz & Hatamizadeh 2024, "Gated Delta Networks";
 * llama.cpp's Qwen3.5 recurrence) on one head's state S (d × d, row a for key dimension a,
 * column b for value dimension b): S ← decay · S; r = Sᵀ k; S ← S + k (beta (v − r))ᵀ;
 * out = Sᵀ q (the readout of the updated state). q, k, v, out: d floats; d <= 256. Every sum
 * over a runs in order a = 0, 1, … with a rounded multiply then an add, so the SIMD kernel
 * gives the reference's bits. */
typedef void (*wlm_deltanet_fn)(float *S, const float *q, const float *k, const float *v,
                                float decay, float beta, float *out, int d);

typedef struct wlm_kernels {
    const char *name;         /* "scalar" or "simd128" */
    wlm_matvec_fn matvec;
    wlm_rmsnorm_fn rmsnorm;
    wlm_softmax_fn softmax;
    wlm_rope_fn rope;
    wlm_swiglu_fn swiglu;
    wlm_dot_fn dot;
    wlm_axpy_fn axpy;
    wlm_attention_fn attention;
    wlm_matmat_fn matmat;
    wlm_attention_f16_fn attention_f16;
    wlm_rope_fn rope_neox;    /* RoPE on pairs (i, i + n_rot/2) of each head (GPT-NeoX style,
                                 ggml's GGML_ROPE_TYPE_NEOX); same arguments as rope */
    wlm_layernorm_fn layernorm;
    wlm_gelu_fn gelu;
    wlm_deltanet_fn deltanet;
} wlm_kernels;

void wlm_matvec_ref(float *out, const float *w, const float *x, int n, int r0, int r1);
void wlm_matmat_ref(float *out, size_t out_stride, const float *w, const float *x,
                    size_t x_stride, int n, int r0, int r1, int nb);
void wlm_rmsnorm_ref(float *out, const float *x, const float *weight, int n, float eps);
void wlm_softmax_ref(float *x, int n);
void wlm_softmax_ggml(float *x, int n);
void wlm_rope_ref(float *x, int n_heads, int head_size, int n_rot, const float *cos_t,
                  const float *sin_t);
void wlm_swiglu_ref(float *h, const float *g, int n);
float wlm_dot_ref(const float *a, const float *b, int n);
void wlm_axpy_ref(float *out, float s, const float *x, int n);
void wlm_attention_ref(float *out, const float *q, const float *const *kb,
                       const float *const *vb, int block, int n, int h0, int h1, int kv_mul,
                       int head_size, int stride, float *scratch);
void wlm_attention_f16_ref(float *out, const float *q, const uint16_t *const *kb,
                           const uint16_t *const *vb, int block, int n, int h0, int h1,
                           int kv_mul, int head_size, int stride, float *scratch);

void wlm_rope_neox_ref(float *x, int n_heads, int head_size, int n_rot, const float *cos_t,
                       const float *sin_t);
void wlm_layernorm_ref(float *out, const float *x, const float *weight, const float *bias, int n,
                       float eps);
void wlm_gelu_ref(float *h, const float *g, int n);
float wlm_gelu1_ref(float x);
void wlm_deltanet_ref(float *S, const float *q, const float *k, const float *v, float decay,
                      float beta, float *out, int d);
void wlm_deltanet_simd(float *S, const float *q, const float *k, const float *v, float decay,
                       float beta, float *out, int d);

void wlm_matvec_simd(float *out, const float *w, const float *x, int n, int r0, int r1);
void wlm_matmat_simd(float *out, size_t out_stride, const float *w, const float *x,
                     size_t x_stride, int n, int r0, int r1, int nb);
void wlm_rmsnorm_simd(float *out, const float *x, const float *weight, int n, float eps);
void wlm_softmax_simd(float *x, int n);
void wlm_rope_simd(float *x, int n_heads, int head_size, int n_rot, const float *cos_t,
                   const float *sin_t);
void wlm_swiglu_simd(float *h, const float *g, int n);
float wlm_dot_simd(const float *a, const float *b, int n);
void wlm_axpy_simd(float *out, float s, const float *x, int n);
void wlm_attention_simd(float *out, const float *q, const float *const *kb,
                        const float *const *vb, int block, int n, int h0, int h1, int kv_mul,
                        int head_size, int stride, float *scratch);
void wlm_attention_f16_simd(float *out, const float *q, const uint16_t *const *kb,
                            const uint16_t *const *vb, int block, int n, int h0, int h1,
                            int kv_mul, int head_size, int stride, float *scratch);

void wlm_rope_neox_simd(float *x, int n_heads, int head_size, int n_rot, const float *cos_t,
                        const float *sin_t);
void wlm_layernorm_simd(float *out, const float *x, const float *weight, const float *bias, int n,
                        float eps);
void wlm_gelu_simd(float *h, const float *g, int n);

/* The two kernel sets. wlm_kernels_simd == wlm_kernels_ref's functions when SIMD128 is not
 * compiled in; wlm_kernels_have_simd() tells which. */
extern const wlm_kernels wlm_kernels_ref;
extern const wlm_kernels wlm_kernels_simd;
int wlm_kernels_have_simd(void);

#endif
