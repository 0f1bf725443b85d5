/*
 * kernels_simd.c — WASM SIMD128 kernels (wasm_simd128.h), one function per operation with a
 * scalar tail shared in spirit with kernels_ref.c. Several independent accumulators hide the
 * add latency; no -ffast-math is needed. In a build without -msimd128 every function forwards
 * to its scalar reference, so the table is always complete.
 */
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/quant.h"

#if defined(__wasm_simd128__)
#include <wasm_simd128.h>

/* The multiply-add of the F32 matrix kernels (wlm_matvec_simd, wlm_matmat_simd): acc + a * b.
 * Compiled with -mrelaxed-simd (the relaxed modules, CMakeLists.txt) it is f32x4.relaxed_madd,
 * which the engine may fuse (one rounding: V8 on x64 emits vfmadd231ps where the CPU has FMA3) or
 * not (a rounded multiply, then the add); the choice is the engine's, the same for every call in
 * one process, so matvec and matmat (the same MADDs in the same order for every (row, entry))
 * stay bitwise equal, and tests/c/test_kernels.c bounds the difference from SIMD128. Otherwise
 * it is SIMD128's rounded multiply then add. The attention kernels keep mul + add in every build
 * (the relaxed build's quantized models give SIMD128's bits: tests/js/build.test.mjs). */
#if defined(__wasm_relaxed_simd__)
#define MADD(acc, a, b) wasm_f32x4_relaxed_madd((a), (b), (acc))
#else
#define MADD(acc, a, b) wasm_f32x4_add((acc), wasm_f32x4_mul((a), (b)))
#endif
/* The attention kernels' multiply-add: a rounded multiply, then the add, in every build. */
#define MULADD(acc, a, b) wasm_f32x4_add((acc), wasm_f32x4_mul((a), (b)))

static inline float hsum(v128_t v) {
    return (wasm_f32x4_extract_lane(v, 0) + wasm_f32x4_extract_lane(v, 1)) +
           (wasm_f32x4_extract_lane(v, 2) + wasm_f32x4_extract_lane(v, 3));
}

/* exp(x) for 4 lanes: Cephes' expf (range reduction by ln 2 in two parts, degree-6
 * polynomial, scale by 2^n through the exponent bits). Relative error ~2 ulp on the clamped
 * range [-87.3, 88.0]; below it the result is ~1e-38 instead of a denormal or 0. */
static inline v128_t exp4(v128_t x) {
    x = wasm_f32x4_min(x, wasm_f32x4_splat(88.0f));
    x = wasm_f32x4_max(x, wasm_f32x4_splat(-87.3f));
    v128_t n = wasm_f32x4_nearest(wasm_f32x4_mul(x, wasm_f32x4_splat(1.44269504088896341f)));
    v128_t r = wasm_f32x4_sub(x, wasm_f32x4_mul(n, wasm_f32x4_splat(0.693359375f)));
    r = wasm_f32x4_sub(r, wasm_f32x4_mul(n, wasm_f32x4_splat(-2.12194440e-4f)));
    v128_t p = wasm_f32x4_splat(1.9875691500e-4f);
    p = wasm_f32x4_add(wasm_f32x4_mul(p, r), wasm_f32x4_splat(1.3981999507e-3f));
    p = wasm_f32x4_add(wasm_f32x4_mul(p, r), wasm_f32x4_splat(8.3334519073e-3f));
    p = wasm_f32x4_add(wasm_f32x4_mul(p, r), wasm_f32x4_splat(4.1665795894e-2f));
    p = wasm_f32x4_add(wasm_f32x4_mul(p, r), wasm_f32x4_splat(1.6666665459e-1f));
    p = wasm_f32x4_add(wasm_f32x4_mul(p, r), wasm_f32x4_splat(5.0000001201e-1f));
    p = wasm_f32x4_mul(p, wasm_f32x4_mul(r, r));
    p = wasm_f32x4_add(wasm_f32x4_add(p, r), wasm_f32x4_splat(1.0f));
    v128_t e = wasm_i32x4_shl(wasm_i32x4_add(wasm_i32x4_trunc_sat_f32x4(n), wasm_i32x4_splat(127)), 23);
    return wasm_f32x4_mul(p, e);
}

static inline float exp1(float x) {
    return wasm_f32x4_extract_lane(exp4(wasm_f32x4_splat(x)), 0);
}

/* acc + a * b: MADD where `fused` (the matrix kernels), MULADD otherwise (attention); fused is a
 * constant at every call, so each caller gets one straight-line kernel. */
#define MADD_IF(fused, acc, a, b) ((fused) ? MADD(acc, a, b) : MULADD(acc, a, b))

/* One row: 2 accumulators over 8 floats per iteration, then 4 floats into the first, then a
 * scalar tail. The batched kernel below repeats exactly this order for every (row, token), so
 * a token's result never depends on the batch it is in. (Four accumulators measured no faster:
 * a single row's dot product is bound by memory bandwidth, not by the add latency.) */
static inline __attribute__((always_inline)) float row_dot_k(const float *w, const float *x, int n,
                                                             const int fused) {
    v128_t a0 = wasm_f32x4_splat(0), a1 = a0;
    int j = 0;
    for (; j + 8 <= n; j += 8) {
        a0 = MADD_IF(fused, a0, wasm_v128_load(w + j), wasm_v128_load(x + j));
        a1 = MADD_IF(fused, a1, wasm_v128_load(w + j + 4), wasm_v128_load(x + j + 4));
    }
    for (; j + 4 <= n; j += 4) a0 = MADD_IF(fused, a0, wasm_v128_load(w + j), wasm_v128_load(x + j));
    float s = hsum(wasm_f32x4_add(a0, a1));
    for (; j < n; j++) s += w[j] * x[j];
    return s;
}

/* row_dot_k of four rows at once, each summed in exactly row_dot_k's order (same result bits):
 * 8 accumulators, 2 activation vectors and the weight loads fit V8's 16 vector registers. */
static inline __attribute__((always_inline)) void
row_dot4_k(const float *w0, const float *w1, const float *w2, const float *w3, const float *x,
           int n, float *o0, float *o1, float *o2, float *o3, const int fused) {
    v128_t a0 = wasm_f32x4_splat(0), a1 = a0, b0 = a0, b1 = a0, c0 = a0, c1 = a0, d0 = a0,
           d1 = a0;
    int j = 0;
    for (; j + 8 <= n; j += 8) {
        const v128_t x0 = wasm_v128_load(x + j), x1 = wasm_v128_load(x + j + 4);
        a0 = MADD_IF(fused, a0, wasm_v128_load(w0 + j), x0);
        a1 = MADD_IF(fused, a1, wasm_v128_load(w0 + j + 4), x1);
        b0 = MADD_IF(fused, b0, wasm_v128_load(w1 + j), x0);
        b1 = MADD_IF(fused, b1, wasm_v128_load(w1 + j + 4), x1);
        c0 = MADD_IF(fused, c0, wasm_v128_load(w2 + j), x0);
        c1 = MADD_IF(fused, c1, wasm_v128_load(w2 + j + 4), x1);
        d0 = MADD_IF(fused, d0, wasm_v128_load(w3 + j), x0);
        d1 = MADD_IF(fused, d1, wasm_v128_load(w3 + j + 4), x1);
    }
    for (; j + 4 <= n; j += 4) {
        const v128_t x0 = wasm_v128_load(x + j);
        a0 = MADD_IF(fused, a0, wasm_v128_load(w0 + j), x0);
        b0 = MADD_IF(fused, b0, wasm_v128_load(w1 + j), x0);
        c0 = MADD_IF(fused, c0, wasm_v128_load(w2 + j), x0);
        d0 = MADD_IF(fused, d0, wasm_v128_load(w3 + j), x0);
    }
    float s0 = hsum(wasm_f32x4_add(a0, a1)), s1 = hsum(wasm_f32x4_add(b0, b1));
    float s2 = hsum(wasm_f32x4_add(c0, c1)), s3 = hsum(wasm_f32x4_add(d0, d1));
    for (; j < n; j++) {
        s0 += w0[j] * x[j];
        s1 += w1[j] * x[j];
        s2 += w2[j] * x[j];
        s3 += w3[j] * x[j];
    }
    *o0 = s0, *o1 = s1, *o2 = s2, *o3 = s3;
}

/* The attention's scores (mul + add in every build) and the matrix kernels' rows (MADD). */
static inline float row_dot(const float *w, const float *x, int n) { return row_dot_k(w, x, n, 0); }
static void row_dot4(const float *w0, const float *w1, const float *w2, const float *w3,
                     const float *x, int n, float *o0, float *o1, float *o2, float *o3) {
    row_dot4_k(w0, w1, w2, w3, x, n, o0, o1, o2, o3, 0);
}
static inline float mat_dot(const float *w, const float *x, int n) { return row_dot_k(w, x, n, 1); }
static void mat_dot4(const float *w0, const float *w1, const float *w2, const float *w3,
                     const float *x, int n, float *o0, float *o1, float *o2, float *o3) {
    row_dot4_k(w0, w1, w2, w3, x, n, o0, o1, o2, o3, 1);
}

/* Four rows at a time, rows r0 + i + k * quarter for k = 0..3 (the few rows left over one at a
 * time): four long sequential weight streams, which the hardware prefetcher follows. Measured
 * in node 20 on 768-column rows streamed from memory (GB/s): one row at a time 7.3, neighbouring
 * pairs 10.3, pairs half the matrix apart 9.5-12.0, four streams 11.8; a plain read of one
 * stream 8.3, of four 12.2. stories110M F32 decode: 18.6 tok/s one row at a time, 26.6 this way.
 * (rows_dot4 below is the transposed case: one row against four activation vectors.) */
void wlm_matvec_simd(float *out, const float *w, const float *x, int n, int r0, int r1) {
    const int q = (r1 - r0) / 4;
    const size_t qs = (size_t)q * (size_t)n;
    for (int r = r0; r < r0 + q; r++) {
        const float *wr = w + (size_t)r * (size_t)n;
        mat_dot4(wr, wr + qs, wr + 2 * qs, wr + 3 * qs, x, n, &out[r], &out[r + q],
                 &out[r + 2 * q], &out[r + 3 * q]);
    }
    for (int r = r0 + 4 * q; r < r1; r++) out[r] = mat_dot(w + (size_t)r * (size_t)n, x, n);
}

/* Four vectors against rows r0..r1: each weight vector is loaded once for four products (8
 * live accumulators, no spills in V8), every product in mat_dot's order (MADD). Measured with
 * relaxed_madd (tools/bench_f32_ab.sh, stories110M's layers, batch 16 in forward.c's tiles, Node
 * 24): 1.05-1.08x SIMD128's mul + add, ~16.5 G multiply-adds/s, ~60 % of this CPU's 128-bit peak
 * (two FMA pipes x 4 lanes x 3.5 GHz = 28 G/s). Tried and dropped: two rows x two vectors (the
 * same 8 accumulators; 1.05x), and, in an order with one accumulator per (row, vector), two rows x
 * four vectors (1.06x) and three rows x four (0.58x: 12 accumulators + 4 activations spill). */
static void rows_dot4(float *out, size_t os, const float *w, const float *x, size_t xs, int n,
                      int r0, int r1) {
    const float *x0 = x, *x1 = x + xs, *x2 = x + 2 * xs, *x3 = x + 3 * xs;
    for (int r = r0; r < r1; r++) {
        const float *wr = w + (size_t)r * (size_t)n;
        v128_t a0 = wasm_f32x4_splat(0), a1 = a0, b0 = a0, b1 = a0, c0 = a0, c1 = a0, d0 = a0,
               d1 = a0;
        int j = 0;
        for (; j + 8 <= n; j += 8) {
            const v128_t w0 = wasm_v128_load(wr + j), w1 = wasm_v128_load(wr + j + 4);
            a0 = MADD(a0, w0, wasm_v128_load(x0 + j));
            a1 = MADD(a1, w1, wasm_v128_load(x0 + j + 4));
            b0 = MADD(b0, w0, wasm_v128_load(x1 + j));
            b1 = MADD(b1, w1, wasm_v128_load(x1 + j + 4));
            c0 = MADD(c0, w0, wasm_v128_load(x2 + j));
            c1 = MADD(c1, w1, wasm_v128_load(x2 + j + 4));
            d0 = MADD(d0, w0, wasm_v128_load(x3 + j));
            d1 = MADD(d1, w1, wasm_v128_load(x3 + j + 4));
        }
        for (; j + 4 <= n; j += 4) {
            const v128_t w0 = wasm_v128_load(wr + j);
            a0 = MADD(a0, w0, wasm_v128_load(x0 + j));
            b0 = MADD(b0, w0, wasm_v128_load(x1 + j));
            c0 = MADD(c0, w0, wasm_v128_load(x2 + j));
            d0 = MADD(d0, w0, wasm_v128_load(x3 + j));
        }
        float s0 = hsum(wasm_f32x4_add(a0, a1)), s1 = hsum(wasm_f32x4_add(b0, b1));
        float s2 = hsum(wasm_f32x4_add(c0, c1)), s3 = hsum(wasm_f32x4_add(d0, d1));
        for (; j < n; j++) {
            s0 += wr[j] * x0[j];
            s1 += wr[j] * x1[j];
            s2 += wr[j] * x2[j];
            s3 += wr[j] * x3[j];
        }
        out[r] = s0;
        out[os + r] = s1;
        out[2 * os + r] = s2;
        out[3 * os + r] = s3;
    }
}

void wlm_matmat_simd(float *out, size_t out_stride, const float *w, const float *x,
                     size_t x_stride, int n, int r0, int r1, int nb) {
    int b = 0;
    for (; b + 4 <= nb; b += 4)
        rows_dot4(out + (size_t)b * out_stride, out_stride, w, x + (size_t)b * x_stride, x_stride,
                  n, r0, r1);
    for (; b < nb; b++)
        wlm_matvec_simd(out + (size_t)b * out_stride, w, x + (size_t)b * x_stride, n, r0, r1);
}

float wlm_dot_simd(const float *a, const float *b, int n) { return row_dot(a, b, n); }

/* The reference's bits (ggml's order): the squares summed one by one in double (the sum is
 * ~n adds; the scaling below is the vector part). */
void wlm_rmsnorm_simd(float *out, const float *x, const float *weight, int n, float eps) {
    double sum = 0.0;
    for (int j = 0; j < n; j++) sum += (double)(x[j] * x[j]);
    const float mean = (float)(sum / (double)n);
    const float ss = 1.0f / sqrtf(mean + eps);
    v128_t s = wasm_f32x4_splat(ss);
    int j = 0;
    for (; j + 4 <= n; j += 4)
        wasm_v128_store(out + j, wasm_f32x4_mul(wasm_v128_load(weight + j),
                                                wasm_f32x4_mul(s, wasm_v128_load(x + j))));
    for (; j < n; j++) out[j] = weight[j] * (ss * x[j]);
}

void wlm_softmax_simd(float *x, int n) {
    float max_val = x[0];
    int i = 0;
    if (n >= 4) {
        v128_t m = wasm_v128_load(x);
        for (i = 4; i + 4 <= n; i += 4) m = wasm_f32x4_pmax(m, wasm_v128_load(x + i));
        float m01 = fmaxf(wasm_f32x4_extract_lane(m, 0), wasm_f32x4_extract_lane(m, 1));
        float m23 = fmaxf(wasm_f32x4_extract_lane(m, 2), wasm_f32x4_extract_lane(m, 3));
        max_val = fmaxf(m01, m23);
    }
    for (; i < n; i++)
        if (x[i] > max_val) max_val = x[i];
    v128_t mv = wasm_f32x4_splat(max_val), acc = wasm_f32x4_splat(0);
    i = 0;
    for (; i + 4 <= n; i += 4) {
        v128_t e = exp4(wasm_f32x4_sub(wasm_v128_load(x + i), mv));
        wasm_v128_store(x + i, e);
        acc = wasm_f32x4_add(acc, e);
    }
    float sum = hsum(acc);
    for (; i < n; i++) {
        x[i] = exp1(x[i] - max_val);
        sum += x[i];
    }
    v128_t sv = wasm_f32x4_splat(sum);
    i = 0;
    for (; i + 4 <= n; i += 4) wasm_v128_store(x + i, wasm_f32x4_div(wasm_v128_load(x + i), sv));
    for (; i < n; i++) x[i] /= sum;
}

void wlm_rope_simd(float *x, int n_heads, int head_size, int n_rot, const float *cos_t,
                   const float *sin_t) {
    const int half = n_rot / 2;
    /* sign pattern for the swapped vector: (a, b) -> (a c - b s, a s + b c) */
    const v128_t sign = wasm_f32x4_make(-1.0f, 1.0f, -1.0f, 1.0f);
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * (size_t)head_size;
        int i = 0;
        for (; i + 2 <= half; i += 2) {
            v128_t xv = wasm_v128_load(v + 2 * i);
            v128_t c = wasm_f32x4_make(cos_t[i], cos_t[i], cos_t[i + 1], cos_t[i + 1]);
            v128_t s = wasm_f32x4_make(sin_t[i], sin_t[i], sin_t[i + 1], sin_t[i + 1]);
            v128_t sw = wasm_i32x4_shuffle(xv, xv, 1, 0, 3, 2);
            v128_t r = wasm_f32x4_add(wasm_f32x4_mul(xv, c), wasm_f32x4_mul(wasm_f32x4_mul(sw, s), sign));
            wasm_v128_store(v + 2 * i, r);
        }
        for (; i < half; i++) {
            float a = v[2 * i], b = v[2 * i + 1];
            v[2 * i] = a * cos_t[i] - b * sin_t[i];
            v[2 * i + 1] = a * sin_t[i] + b * cos_t[i];
        }
    }
}

void wlm_swiglu_simd(float *h, const float *g, int n) {
    const v128_t one = wasm_f32x4_splat(1.0f);
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        v128_t v = wasm_v128_load(h + i);
        v128_t sig = wasm_f32x4_div(one, wasm_f32x4_add(one, exp4(wasm_f32x4_neg(v))));
        wasm_v128_store(h + i, wasm_f32x4_mul(wasm_f32x4_mul(v, sig), wasm_v128_load(g + i)));
    }
    for (; i < n; i++) {
        float val = h[i];
        val *= 1.0f / (1.0f + exp1(-val));
        h[i] = val * g[i];
    }
}

void wlm_axpy_simd(float *out, float s, const float *x, int n) {
    v128_t sv = wasm_f32x4_splat(s);
    int i = 0;
    for (; i + 4 <= n; i += 4)
        wasm_v128_store(out + i, wasm_f32x4_add(wasm_v128_load(out + i),
                                                wasm_f32x4_mul(sv, wasm_v128_load(x + i))));
    for (; i < n; i++) out[i] += s * x[i];
}

/* ---- attention -------------------------------------------------------------------------
 *
 * Decode reads every cached K and V row once per layer, and by then the layer's weights have
 * pushed them out of the caches. Read head by head (256 bytes of each row, rows 3 KiB apart at
 * stories110M's shape), that memory came in at under 4 GB/s: in the engine, each position cost
 * 25 us of a stories110M decode step (2.6 ms of a 17 ms Q8_0 step at 104 positions). Here each
 * row is read whole, for every head of the range, and from several places at once:
 * - scores four positions at a time, a quarter of the sequence apart (four read streams), the
 *   four dot products of a head sharing the loads of q (row_dot4, as the F32 matvec);
 * - the weighted sum of V over the first half of the positions and over the second half in
 *   two partial sums (two streams, two positions per pass over the partial sums), added at the
 *   end.
 * Measured on that shape with the caches flushed between layers, head by head -> this: 2.0 ->
 * 0.94 ms a token at 104 positions, 10.0 -> 4.1 ms at 512 (tools/bench_kernels.sh
 * --only=attention has the cold case); in the engine 25 -> 7 us per position.
 * The scores are the matrix-vector kernel's dot products (row_dot4 / row_dot, the same bits
 * either way); only the order of the sum over positions differs from the reference
 * (tests/c/test_kernels.c bounds the difference). */

#define KV_ROW(b, t) ((b)[(t) / block] + (size_t)((t) % block) * (size_t)stride)

/* p[i] += a * x[i], i < hs (a multiple of 4). */
static inline void axpy_head(float *p, float a, const float *x, int hs) {
    const v128_t av = wasm_f32x4_splat(a);
    for (int i = 0; i < hs; i += 4)
        wasm_v128_store(p + i, wasm_f32x4_add(wasm_v128_load(p + i),
                                              wasm_f32x4_mul(av, wasm_v128_load(x + i))));
}

void wlm_attention_simd(float *out, const float *q, const float *const *kb,
                        const float *const *vb, int block, int n, int h0, int h1, int kv_mul,
                        int head_size, int stride, float *scratch) {
    if (head_size % 4) { /* no published model has such heads; the reference does them */
        wlm_attention_ref(out, q, kb, vb, block, n, h0, h1, kv_mul, head_size, stride, scratch);
        return;
    }
    const int hs = head_size, nh = h1 - h0;
    const float scale = sqrtf((float)hs); /* divided by, as in the reference */
    const size_t N = (size_t)n, HS = (size_t)hs;

    /* scores: positions t, t + qn, t + 2 qn, t + 3 qn together, then the last n % 4 alone */
    const int qn = n / 4;
    for (int t = 0; t < qn; t++) {
        const float *k0 = KV_ROW(kb, t), *k1 = KV_ROW(kb, t + qn), *k2 = KV_ROW(kb, t + 2 * qn),
                    *k3 = KV_ROW(kb, t + 3 * qn);
        for (int h = h0; h < h1; h++) {
            const size_t off = (size_t)(h / kv_mul) * HS;
            float *att = scratch + (size_t)(h - h0) * N, s0, s1, s2, s3;
            row_dot4(k0 + off, k1 + off, k2 + off, k3 + off, q + (size_t)h * HS, hs, &s0, &s1, &s2,
                     &s3);
            att[t] = s0 / scale;
            att[t + qn] = s1 / scale;
            att[t + 2 * qn] = s2 / scale;
            att[t + 3 * qn] = s3 / scale;
        }
    }
    for (int t = 4 * qn; t < n; t++) {
        const float *kt = KV_ROW(kb, t);
        for (int h = h0; h < h1; h++)
            scratch[(size_t)(h - h0) * N + (size_t)t] =
                row_dot(kt + (size_t)(h / kv_mul) * HS, q + (size_t)h * HS, hs) / scale;
    }
    for (int h = 0; h < nh; h++) wlm_softmax_simd(scratch + (size_t)h * N, n);

    /* values: p0 sums positions [0, half), p1 positions [half, n), two of each per pass */
    float *p0 = scratch + (size_t)nh * N, *p1 = p0 + (size_t)nh * HS;
    memset(p0, 0, 2 * (size_t)nh * HS * sizeof(float));
    const int half = n / 2, pairs = half / 2;
    for (int t = 0; t < 2 * pairs; t += 2) {
        const float *v0 = KV_ROW(vb, t), *v1 = KV_ROW(vb, t + 1), *v2 = KV_ROW(vb, half + t),
                    *v3 = KV_ROW(vb, half + t + 1);
        for (int h = h0; h < h1; h++) {
            const size_t off = (size_t)(h / kv_mul) * HS;
            const float *att = scratch + (size_t)(h - h0) * N;
            const v128_t a0 = wasm_f32x4_splat(att[t]), a1 = wasm_f32x4_splat(att[t + 1]);
            const v128_t a2 = wasm_f32x4_splat(att[half + t]);
            const v128_t a3 = wasm_f32x4_splat(att[half + t + 1]);
            float *s0 = p0 + (size_t)(h - h0) * HS, *s1 = p1 + (size_t)(h - h0) * HS;
            for (int i = 0; i < hs; i += 4) {
                v128_t x = wasm_v128_load(s0 + i), y = wasm_v128_load(s1 + i);
                x = wasm_f32x4_add(x, wasm_f32x4_mul(a0, wasm_v128_load(v0 + off + i)));
                y = wasm_f32x4_add(y, wasm_f32x4_mul(a2, wasm_v128_load(v2 + off + i)));
                x = wasm_f32x4_add(x, wasm_f32x4_mul(a1, wasm_v128_load(v1 + off + i)));
                y = wasm_f32x4_add(y, wasm_f32x4_mul(a3, wasm_v128_load(v3 + off + i)));
                wasm_v128_store(s0 + i, x);
                wasm_v128_store(s1 + i, y);
            }
        }
    }
    /* what is left of each half, in order: [2 pairs, half) into p0, [half + 2 pairs, n) into p1 */
    for (int part = 0; part < 2; part++) {
        float *p = part ? p1 : p0;
        for (int t = part * half + 2 * pairs; t < (part ? n : half); t++) {
            const float *vt = KV_ROW(vb, t);
            for (int h = h0; h < h1; h++)
                axpy_head(p + (size_t)(h - h0) * HS, scratch[(size_t)(h - h0) * N + (size_t)t],
                          vt + (size_t)(h / kv_mul) * HS, hs);
        }
    }
    for (int h = h0; h < h1; h++) {
        const float *s0 = p0 + (size_t)(h - h0) * HS, *s1 = p1 + (size_t)(h - h0) * HS;
        float *o = out + (size_t)h * HS;
        for (int i = 0; i < hs; i += 4)
            wasm_v128_store(o + i, wasm_f32x4_add(wasm_v128_load(s0 + i), wasm_v128_load(s1 + i)));
    }
}

#undef KV_ROW

/* ---- attention over an F16 KV cache ----------------------------------------------------
 *
 * The same loops as above (four score streams, two value streams, the same accumulators in the
 * same order), each K/V element widened exactly to float32 as it is loaded, so the result is
 * bitwise the F32 kernel's on the widened rows (tests/c/test_kernels.c checks it). SIMD128 has
 * no f16 arithmetic. Widening 8 halves: each goes into the top of a 32-bit lane (an unpack),
 * an arithmetic shift by 3 puts exponent and mantissa in float position (the sign stays in bit
 * 31; its copies in bits 28..30 are masked off), and one exact multiplication by 2^112 rebiases
 * the exponent, normal and subnormal halves alike (subnormals pass through float subnormals,
 * which wasm keeps): 4 operations per 4 values. Inf and NaN halves (exponent 31) would come out
 * finite, so each group of 8 is tested first (2 operations per 8, one branch, never taken for
 * finite caches) and such a group takes the general conversion. Measured (tools/bench_kernels.sh
 * --only=attention, stories110M shape, cold, on a heavily loaded 2-core machine: ratios of the
 * same run only): the general conversion on every value ran at 0.3x the F32 kernel's speed,
 * this way at 0.45-0.6x (64..960 positions). Without f16 instructions the widening costs more
 * than the halved memory traffic saves at these sizes; the F16 cache buys memory, not speed. */

static inline v128_t f16_top(v128_t x) { /* x: halves in the top 16 bits of each lane */
    const v128_t em = wasm_v128_and(wasm_i32x4_shr(x, 3), wasm_i32x4_splat((int32_t)0x8fffffff));
    return wasm_f32x4_mul(em, wasm_f32x4_splat(0x1p112f));
}
static inline v128_t f16_lo4(v128_t h) {
    return f16_top(wasm_i16x8_shuffle(wasm_i32x4_splat(0), h, 0, 8, 0, 9, 0, 10, 0, 11));
}
static inline v128_t f16_hi4(v128_t h) {
    return f16_top(wasm_i16x8_shuffle(wasm_i32x4_splat(0), h, 0, 12, 0, 13, 0, 14, 0, 15));
}
/* Lanes of 8 halves that are Inf or NaN (all ones there). */
static inline v128_t f16_special(v128_t h) {
    return wasm_i16x8_gt(wasm_v128_and(h, wasm_i16x8_splat(0x7fff)), wasm_i16x8_splat(0x7bff));
}
/* The general conversion of 4 halves (zero-extended into 32-bit lanes), Inf and NaN included:
 * wlm_fp16_to_fp32's bits. */
static inline v128_t f16_any(v128_t u) {
    const v128_t em = wasm_i32x4_shl(wasm_v128_and(u, wasm_i32x4_splat(0x7fff)), 13);
    const v128_t sign = wasm_i32x4_shl(wasm_v128_and(u, wasm_i32x4_splat(0x8000)), 16);
    const v128_t f = wasm_f32x4_mul(em, wasm_f32x4_splat(0x1p112f));
    const v128_t special = wasm_i32x4_ge(em, wasm_i32x4_splat(0x0f800000));
    return wasm_v128_or(
        wasm_v128_bitselect(wasm_v128_or(em, wasm_i32x4_splat(0x7f800000)), f, special), sign);
}
/* 8 halves at p as two float vectors. */
static inline void f16x8_load(const uint16_t *p, v128_t *lo, v128_t *hi) {
    const v128_t h = wasm_v128_load(p);
    if (__builtin_expect(wasm_v128_any_true(f16_special(h)), 0)) {
        *lo = f16_any(wasm_u32x4_extend_low_u16x8(h));
        *hi = f16_any(wasm_u32x4_extend_high_u16x8(h));
    } else {
        *lo = f16_lo4(h);
        *hi = f16_hi4(h);
    }
}
/* 4 halves at p (the general conversion: only head sizes that are not multiples of 8). */
static inline v128_t f16x4_load(const uint16_t *p) { return f16_any(wasm_u32x4_load16x4(p)); }

/* row_dot's order for a row of n halves (n a multiple of 4). */
static inline float row_dot_f16(const uint16_t *w, const float *x, int n) {
    v128_t a0 = wasm_f32x4_splat(0), a1 = a0;
    int j = 0;
    for (; j + 8 <= n; j += 8) {
        v128_t lo, hi;
        f16x8_load(w + j, &lo, &hi);
        a0 = wasm_f32x4_add(a0, wasm_f32x4_mul(lo, wasm_v128_load(x + j)));
        a1 = wasm_f32x4_add(a1, wasm_f32x4_mul(hi, wasm_v128_load(x + j + 4)));
    }
    if (j < n) a0 = wasm_f32x4_add(a0, wasm_f32x4_mul(f16x4_load(w + j), wasm_v128_load(x + j)));
    return hsum(wasm_f32x4_add(a0, a1));
}

/* row_dot4's order for four rows of halves. */
static void row_dot4_f16(const uint16_t *w0, const uint16_t *w1, const uint16_t *w2,
                         const uint16_t *w3, const float *x, int n, float *o0, float *o1,
                         float *o2, float *o3) {
    v128_t a0 = wasm_f32x4_splat(0), a1 = a0, b0 = a0, b1 = a0, c0 = a0, c1 = a0, d0 = a0,
           d1 = a0;
    int j = 0;
    for (; j + 8 <= n; j += 8) {
        const v128_t x0 = wasm_v128_load(x + j), x1 = wasm_v128_load(x + j + 4);
        const v128_t h0 = wasm_v128_load(w0 + j), h1 = wasm_v128_load(w1 + j);
        const v128_t h2 = wasm_v128_load(w2 + j), h3 = wasm_v128_load(w3 + j);
        const v128_t sp = wasm_v128_or(wasm_v128_or(f16_special(h0), f16_special(h1)),
                                       wasm_v128_or(f16_special(h2), f16_special(h3)));
        v128_t l0, l1, l2, l3, u0, u1, u2, u3;
        if (__builtin_expect(wasm_v128_any_true(sp), 0)) {
            f16x8_load(w0 + j, &l0, &u0), f16x8_load(w1 + j, &l1, &u1);
            f16x8_load(w2 + j, &l2, &u2), f16x8_load(w3 + j, &l3, &u3);
        } else {
            l0 = f16_lo4(h0), u0 = f16_hi4(h0), l1 = f16_lo4(h1), u1 = f16_hi4(h1);
            l2 = f16_lo4(h2), u2 = f16_hi4(h2), l3 = f16_lo4(h3), u3 = f16_hi4(h3);
        }
        a0 = wasm_f32x4_add(a0, wasm_f32x4_mul(l0, x0));
        a1 = wasm_f32x4_add(a1, wasm_f32x4_mul(u0, x1));
        b0 = wasm_f32x4_add(b0, wasm_f32x4_mul(l1, x0));
        b1 = wasm_f32x4_add(b1, wasm_f32x4_mul(u1, x1));
        c0 = wasm_f32x4_add(c0, wasm_f32x4_mul(l2, x0));
        c1 = wasm_f32x4_add(c1, wasm_f32x4_mul(u2, x1));
        d0 = wasm_f32x4_add(d0, wasm_f32x4_mul(l3, x0));
        d1 = wasm_f32x4_add(d1, wasm_f32x4_mul(u3, x1));
    }
    if (j < n) {
        const v128_t x0 = wasm_v128_load(x + j);
        a0 = wasm_f32x4_add(a0, wasm_f32x4_mul(f16x4_load(w0 + j), x0));
        b0 = wasm_f32x4_add(b0, wasm_f32x4_mul(f16x4_load(w1 + j), x0));
        c0 = wasm_f32x4_add(c0, wasm_f32x4_mul(f16x4_load(w2 + j), x0));
        d0 = wasm_f32x4_add(d0, wasm_f32x4_mul(f16x4_load(w3 + j), x0));
    }
    *o0 = hsum(wasm_f32x4_add(a0, a1)), *o1 = hsum(wasm_f32x4_add(b0, b1));
    *o2 = hsum(wasm_f32x4_add(c0, c1)), *o3 = hsum(wasm_f32x4_add(d0, d1));
}

/* p[i] += a * x[i], i < hs (a multiple of 4), x in halves. */
static inline void axpy_head_f16(float *p, float a, const uint16_t *x, int hs) {
    const v128_t av = wasm_f32x4_splat(a);
    int i = 0;
    for (; i + 8 <= hs; i += 8) {
        v128_t lo, hi;
        f16x8_load(x + i, &lo, &hi);
        wasm_v128_store(p + i, wasm_f32x4_add(wasm_v128_load(p + i), wasm_f32x4_mul(av, lo)));
        wasm_v128_store(p + i + 4, wasm_f32x4_add(wasm_v128_load(p + i + 4), wasm_f32x4_mul(av, hi)));
    }
    if (i < hs)
        wasm_v128_store(p + i, wasm_f32x4_add(wasm_v128_load(p + i),
                                              wasm_f32x4_mul(av, f16x4_load(x + i))));
}

#define KV_ROW16(b, t) ((b)[(t) / block] + (size_t)((t) % block) * (size_t)stride)

void wlm_attention_f16_simd(float *out, const float *q, const uint16_t *const *kb,
                            const uint16_t *const *vb, int block, int n, int h0, int h1,
                            int kv_mul, int head_size, int stride, float *scratch) {
    if (head_size % 4) {
        wlm_attention_f16_ref(out, q, kb, vb, block, n, h0, h1, kv_mul, head_size, stride,
                              scratch);
        return;
    }
    const int hs = head_size, nh = h1 - h0;
    const float scale = sqrtf((float)hs);
    const size_t N = (size_t)n, HS = (size_t)hs;

    const int qn = n / 4;
    for (int t = 0; t < qn; t++) {
        const uint16_t *k0 = KV_ROW16(kb, t), *k1 = KV_ROW16(kb, t + qn),
                       *k2 = KV_ROW16(kb, t + 2 * qn), *k3 = KV_ROW16(kb, t + 3 * qn);
        for (int h = h0; h < h1; h++) {
            const size_t off = (size_t)(h / kv_mul) * HS;
            float *att = scratch + (size_t)(h - h0) * N, s0, s1, s2, s3;
            row_dot4_f16(k0 + off, k1 + off, k2 + off, k3 + off, q + (size_t)h * HS, hs, &s0,
                         &s1, &s2, &s3);
            att[t] = s0 / scale;
            att[t + qn] = s1 / scale;
            att[t + 2 * qn] = s2 / scale;
            att[t + 3 * qn] = s3 / scale;
        }
    }
    for (int t = 4 * qn; t < n; t++) {
        const uint16_t *kt = KV_ROW16(kb, t);
        for (int h = h0; h < h1; h++)
            scratch[(size_t)(h - h0) * N + (size_t)t] =
                row_dot_f16(kt + (size_t)(h / kv_mul) * HS, q + (size_t)h * HS, hs) / scale;
    }
    for (int h = 0; h < nh; h++) wlm_softmax_simd(scratch + (size_t)h * N, n);

    float *p0 = scratch + (size_t)nh * N, *p1 = p0 + (size_t)nh * HS;
    memset(p0, 0, 2 * (size_t)nh * HS * sizeof(float));
    const int half = n / 2, pairs = half / 2;
    for (int t = 0; t < 2 * pairs; t += 2) {
        const uint16_t *v0 = KV_ROW16(vb, t), *v1 = KV_ROW16(vb, t + 1),
                       *v2 = KV_ROW16(vb, half + t), *v3 = KV_ROW16(vb, half + t + 1);
        for (int h = h0; h < h1; h++) {
            const size_t off = (size_t)(h / kv_mul) * HS;
            const float *att = scratch + (size_t)(h - h0) * N;
            const v128_t a0 = wasm_f32x4_splat(att[t]), a1 = wasm_f32x4_splat(att[t + 1]);
            const v128_t a2 = wasm_f32x4_splat(att[half + t]);
            const v128_t a3 = wasm_f32x4_splat(att[half + t + 1]);
            float *s0 = p0 + (size_t)(h - h0) * HS, *s1 = p1 + (size_t)(h - h0) * HS;
            int i = 0;
            for (; i + 8 <= hs; i += 8) { /* the F32 kernel's per-lane order, 8 lanes a pass */
                v128_t l0, u0, l1, u1, l2, u2, l3, u3;
                f16x8_load(v0 + off + i, &l0, &u0), f16x8_load(v1 + off + i, &l1, &u1);
                f16x8_load(v2 + off + i, &l2, &u2), f16x8_load(v3 + off + i, &l3, &u3);
                v128_t x = wasm_v128_load(s0 + i), y = wasm_v128_load(s1 + i);
                v128_t xx = wasm_v128_load(s0 + i + 4), yy = wasm_v128_load(s1 + i + 4);
                x = wasm_f32x4_add(x, wasm_f32x4_mul(a0, l0));
                xx = wasm_f32x4_add(xx, wasm_f32x4_mul(a0, u0));
                y = wasm_f32x4_add(y, wasm_f32x4_mul(a2, l2));
                yy = wasm_f32x4_add(yy, wasm_f32x4_mul(a2, u2));
                x = wasm_f32x4_add(x, wasm_f32x4_mul(a1, l1));
                xx = wasm_f32x4_add(xx, wasm_f32x4_mul(a1, u1));
                y = wasm_f32x4_add(y, wasm_f32x4_mul(a3, l3));
                yy = wasm_f32x4_add(yy, wasm_f32x4_mul(a3, u3));
                wasm_v128_store(s0 + i, x), wasm_v128_store(s0 + i + 4, xx);
                wasm_v128_store(s1 + i, y), wasm_v128_store(s1 + i + 4, yy);
            }
            if (i < hs) {
                v128_t x = wasm_v128_load(s0 + i), y = wasm_v128_load(s1 + i);
                x = wasm_f32x4_add(x, wasm_f32x4_mul(a0, f16x4_load(v0 + off + i)));
                y = wasm_f32x4_add(y, wasm_f32x4_mul(a2, f16x4_load(v2 + off + i)));
                x = wasm_f32x4_add(x, wasm_f32x4_mul(a1, f16x4_load(v1 + off + i)));
                y = wasm_f32x4_add(y, wasm_f32x4_mul(a3, f16x4_load(v3 + off + i)));
                wasm_v128_store(s0 + i, x);
                wasm_v128_store(s1 + i, y);
            }
        }
    }
    for (int part = 0; part < 2; part++) {
        float *p = part ? p1 : p0;
        for (int t = part * half + 2 * pairs; t < (part ? n : half); t++) {
            const uint16_t *vt = KV_ROW16(vb, t);
            for (int h = h0; h < h1; h++)
                axpy_head_f16(p + (size_t)(h - h0) * HS, scratch[(size_t)(h - h0) * N + (size_t)t],
                              vt + (size_t)(h / kv_mul) * HS, hs);
        }
    }
    for (int h = h0; h < h1; h++) {
        const float *s0 = p0 + (size_t)(h - h0) * HS, *s1 = p1 + (size_t)(h - h0) * HS;
        float *o = out + (size_t)h * HS;
        for (int i = 0; i < hs; i += 4)
            wasm_v128_store(o + i, wasm_f32x4_add(wasm_v128_load(s0 + i), wasm_v128_load(s1 + i)));
    }
}

#undef KV_ROW16

/* ---- architecture variants: NEOX RoPE, LayerNorm, GELU ----------------------------------- */

/* Four pairs (i, i + half) at a time; the same products and sums as the reference, so the
 * result is bitwise the reference's. */
void wlm_rope_neox_simd(float *x, int n_heads, int head_size, int n_rot, const float *cos_t,
                        const float *sin_t) {
    const int half = n_rot / 2;
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * (size_t)head_size;
        int i = 0;
        for (; i + 4 <= half; i += 4) {
            v128_t a = wasm_v128_load(v + i), b = wasm_v128_load(v + i + half);
            v128_t c = wasm_v128_load(cos_t + i), sn = wasm_v128_load(sin_t + i);
            wasm_v128_store(v + i, wasm_f32x4_sub(wasm_f32x4_mul(a, c), wasm_f32x4_mul(b, sn)));
            wasm_v128_store(v + i + half, wasm_f32x4_add(wasm_f32x4_mul(a, sn), wasm_f32x4_mul(b, c)));
        }
        for (; i < half; i++) {
            float a = v[i], b = v[i + half];
            v[i] = a * cos_t[i] - b * sin_t[i];
            v[i + half] = a * sin_t[i] + b * cos_t[i];
        }
    }
}

/* The sums in float lanes (the reference sums in double): results agree to a few ulp. */
void wlm_layernorm_simd(float *out, const float *x, const float *weight, const float *bias, int n,
                        float eps) {
    v128_t a0 = wasm_f32x4_splat(0), a1 = a0;
    int j = 0;
    for (; j + 8 <= n; j += 8) {
        a0 = wasm_f32x4_add(a0, wasm_v128_load(x + j));
        a1 = wasm_f32x4_add(a1, wasm_v128_load(x + j + 4));
    }
    float sum = hsum(wasm_f32x4_add(a0, a1));
    for (; j < n; j++) sum += x[j];
    const float mean = sum / (float)n;
    const v128_t mv = wasm_f32x4_splat(mean);
    a0 = a1 = wasm_f32x4_splat(0);
    j = 0;
    for (; j + 8 <= n; j += 8) {
        v128_t v0 = wasm_f32x4_sub(wasm_v128_load(x + j), mv);
        v128_t v1 = wasm_f32x4_sub(wasm_v128_load(x + j + 4), mv);
        wasm_v128_store(out + j, v0);
        wasm_v128_store(out + j + 4, v1);
        a0 = wasm_f32x4_add(a0, wasm_f32x4_mul(v0, v0));
        a1 = wasm_f32x4_add(a1, wasm_f32x4_mul(v1, v1));
    }
    float sum2 = hsum(wasm_f32x4_add(a0, a1));
    for (; j < n; j++) {
        const float v = x[j] - mean;
        out[j] = v;
        sum2 += v * v;
    }
    const float scale = 1.0f / sqrtf(sum2 / (float)n + eps);
    const v128_t sv = wasm_f32x4_splat(scale);
    j = 0;
    for (; j + 4 <= n; j += 4) {
        v128_t v = wasm_f32x4_mul(wasm_f32x4_mul(wasm_v128_load(out + j), sv), wasm_v128_load(weight + j));
        if (bias) v = wasm_f32x4_add(v, wasm_v128_load(bias + j));
        wasm_v128_store(out + j, v);
    }
    for (; j < n; j++) {
        const float v = (out[j] * scale) * weight[j];
        out[j] = bias ? v + bias[j] : v;
    }
}

/* The reference's binary16 roundings, with tanh(u) = 1 - 2 / (exp(2u) + 1) on four lanes
 * (exp4): the float result differs from tanhf by a few ulp, so after the final rounding to
 * binary16 a value differs from the reference's by at most one binary16 step, rarely. */
void wlm_gelu_simd(float *h, const float *g, int n) {
    const v128_t one = wasm_f32x4_splat(1.0f), two = wasm_f32x4_splat(2.0f);
    const v128_t half = wasm_f32x4_splat(0.5f), c0 = wasm_f32x4_splat(0.79788456080286535587989211986876f);
    const v128_t c1 = wasm_f32x4_splat(0.044715f);
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        float in[4], r[4];
        int plain = 1;
        for (int k = 0; k < 4; k++) {
            const float x = h[i + k];
            if (!(x > -10.0f && x < 10.0f)) plain = 0;
            in[k] = wlm_fp16_to_fp32(wlm_fp32_to_fp16(x));
        }
        if (!plain) {
            for (int k = 0; k < 4; k++) r[k] = wlm_gelu1_ref(h[i + k]);
        } else {
            v128_t v = wasm_v128_load(in);
            v128_t u = wasm_f32x4_mul(c0, wasm_f32x4_mul(v, wasm_f32x4_add(one, wasm_f32x4_mul(c1, wasm_f32x4_mul(v, v)))));
            v128_t t = wasm_f32x4_sub(one, wasm_f32x4_div(two, wasm_f32x4_add(exp4(wasm_f32x4_mul(two, u)), one)));
            wasm_v128_store(r, wasm_f32x4_mul(wasm_f32x4_mul(half, v), wasm_f32x4_add(one, t)));
            for (int k = 0; k < 4; k++) r[k] = wlm_fp16_to_fp32(wlm_fp32_to_fp16(r[k]));
        }
        v128_t y = wasm_v128_load(r);
        if (g) y = wasm_f32x4_mul(y, wasm_v128_load(g + i));
        wasm_v128_store(h + i, y);
    }
    for (; i < n; i++) {
        const float y = wlm_gelu1_ref(h[i]);
        h[i] = g ? y * g[i] : y;
    }
}

/* The delta rule, four value dimensions a vector: the reference's operations lane by lane
 * (a rounded multiply, then the add), so the same bits. d a multiple of 4 takes the vector
 * loops; any other d the reference. */
void wlm_deltanet_simd(float *S, const float *q, const float *k, const float *v, float decay,
                       float beta, float *out, int d) {
    if (d % 4 != 0) {
        wlm_deltanet_ref(S, q, k, v, decay, beta, out, d);
        return;
    }
    float dv[256];
    const v128_t dc = wasm_f32x4_splat(decay), bt = wasm_f32x4_splat(beta);
    for (int b = 0; b < d; b += 4) wasm_v128_store(out + b, wasm_f32x4_splat(0.0f));
    for (int a = 0; a < d; a++) {
        float *row = S + (size_t)a * (size_t)d;
        const v128_t ka = wasm_f32x4_splat(k[a]);
        for (int b = 0; b < d; b += 4) {
            const v128_t sv = wasm_f32x4_mul(wasm_v128_load(row + b), dc);
            wasm_v128_store(row + b, sv);
            wasm_v128_store(out + b, MULADD(wasm_v128_load(out + b), sv, ka));
        }
    }
    for (int b = 0; b < d; b += 4) {
        const v128_t r = wasm_v128_load(out + b);
        wasm_v128_store(dv + b, wasm_f32x4_mul(bt, wasm_f32x4_sub(wasm_v128_load(v + b), r)));
        wasm_v128_store(out + b, wasm_f32x4_splat(0.0f));
    }
    for (int a = 0; a < d; a++) {
        float *row = S + (size_t)a * (size_t)d;
        const v128_t ka = wasm_f32x4_splat(k[a]), qa = wasm_f32x4_splat(q[a]);
        for (int b = 0; b < d; b += 4) {
            const v128_t sv = MULADD(wasm_v128_load(row + b), ka, wasm_v128_load(dv + b));
            wasm_v128_store(row + b, sv);
            wasm_v128_store(out + b, MULADD(wasm_v128_load(out + b), sv, qa));
        }
    }
}

int wlm_kernels_have_simd(void) { return 1; }

#else /* no SIMD128: forward to the reference kernels */

void wlm_matvec_simd(float *out, const float *w, const float *x, int n, int r0, int r1) {
    wlm_matvec_ref(out, w, x, n, r0, r1);
}
void wlm_matmat_simd(float *out, size_t out_stride, const float *w, const float *x,
                     size_t x_stride, int n, int r0, int r1, int nb) {
    wlm_matmat_ref(out, out_stride, w, x, x_stride, n, r0, r1, nb);
}
void wlm_rmsnorm_simd(float *out, const float *x, const float *weight, int n, float eps) {
    wlm_rmsnorm_ref(out, x, weight, n, eps);
}
void wlm_softmax_simd(float *x, int n) { wlm_softmax_ref(x, n); }
void wlm_rope_simd(float *x, int n_heads, int head_size, int n_rot, const float *cos_t,
                   const float *sin_t) {
    wlm_rope_ref(x, n_heads, head_size, n_rot, cos_t, sin_t);
}
void wlm_swiglu_simd(float *h, const float *g, int n) { wlm_swiglu_ref(h, g, n); }
float wlm_dot_simd(const float *a, const float *b, int n) { return wlm_dot_ref(a, b, n); }
void wlm_axpy_simd(float *out, float s, const float *x, int n) { wlm_axpy_ref(out, s, x, n); }
void wlm_attention_simd(float *out, const float *q, const float *const *kb,
                        const float *const *vb, int block, int n, int h0, int h1, int kv_mul,
                        int head_size, int stride, float *scratch) {
    wlm_attention_ref(out, q, kb, vb, block, n, h0, h1, kv_mul, head_size, stride, scratch);
}
void wlm_attention_f16_simd(float *out, const float *q, const uint16_t *const *kb,
                            const uint16_t *const *vb, int block, int n, int h0, int h1,
                            int kv_mul, int head_size, int stride, float *scratch) {
    wlm_attention_f16_ref(out, q, kb, vb, block, n, h0, h1, kv_mul, head_size, stride, scratch);
}
void wlm_rope_neox_simd(float *x, int n_heads, int head_size, int n_rot, const float *cos_t,
                        const float *sin_t) {
    wlm_rope_neox_ref(x, n_heads, head_size, n_rot, cos_t, sin_t);
}
void wlm_layernorm_simd(float *out, const float *x, const float *weight, const float *bias, int n,
                        float eps) {
    wlm_layernorm_ref(out, x, weight, bias, n, eps);
}
void wlm_gelu_simd(float *h, const float *g, int n) { wlm_gelu_ref(h, g, n); }
void wlm_deltanet_simd(float *S, const float *q, const float *k, const float *v, float decay,
                       float beta, float *out, int d) {
    wlm_deltanet_ref(S, q, k, v, decay, beta, out, d);
}
int wlm_kernels_have_simd(void) { return 0; }

#endif

const wlm_kernels wlm_kernels_simd = {
#if defined(__wasm_simd128__)
    "simd128",
#else
    "scalar",
#endif
    wlm_matvec_simd, wlm_rmsnorm_simd, wlm_softmax_simd, wlm_rope_simd,
    wlm_swiglu_simd, wlm_dot_simd, wlm_axpy_simd, wlm_attention_simd, wlm_matmat_simd,
    wlm_attention_f16_simd, wlm_rope_neox_simd, wlm_layernorm_simd, wlm_gelu_simd,
    wlm_deltanet_simd,
};
