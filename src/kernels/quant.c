/*
 * quant.c — the type-traits table and the conversions of each element type: binary16, bfloat16,
 * and the ggml block formats (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, and Q8_K
 * for activations). The scalar reference kernels live here; their SIMD128 twins in quant_simd.c.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/quant.h"
#include "wasmlm.h"

static inline float bits_to_float(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint32_t float_to_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

float wlm_fp16_to_fp32(wlm_fp16 h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t em = (uint32_t)(h & 0x7fffu) << 13; /* exponent and mantissa, in place */
    const uint32_t exp = em & 0x0f800000u;
    uint32_t bits;
    if (exp == 0x0f800000u) {
        bits = em | 0x7f800000u; /* Inf / NaN, payload kept */
    } else if (exp != 0) {
        bits = em + 0x38000000u; /* normal: rebias the exponent from 15 to 127 */
    } else { /* zero or subnormal m * 2^-24, exactly: (2^-14 + m * 2^-24) - 2^-14 */
        bits = float_to_bits(bits_to_float(em + 0x38800000u) - bits_to_float(0x38800000u));
    }
    return bits_to_float(bits | sign);
}

wlm_fp16 wlm_fp32_to_fp16(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    const uint32_t sign = (x >> 16) & 0x8000u;
    const uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u) /* Inf or NaN (keep a quiet NaN) */
        return (wlm_fp16)(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0));
    if (absx >= 0x477ff000u) return (wlm_fp16)(sign | 0x7c00u); /* rounds to >= 65520: Inf */
    if (absx < 0x38800000u) { /* below the smallest normal half: subnormal or zero */
        if (absx < 0x33000000u) return (wlm_fp16)sign;           /* < 2^-25: rounds to 0 */
        uint32_t mant = (absx & 0x7fffffu) | 0x800000u;
        int shift = 126 - (int)(absx >> 23);                       /* 14..24 */
        uint32_t half = mant >> shift, rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1u))) half++;
        return (wlm_fp16)(sign | half);
    }
    uint32_t h = ((absx >> 13) - (112u << 10)); /* rebias exponent, truncate mantissa */
    uint32_t rem = absx & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++; /* round to nearest even */
    return (wlm_fp16)(sign | h);
}

/* ---- F32 ---------------------------------------------------------------------------------- */

static void f32_to_float(const void *src, float *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

static void f32_from_float(const float *src, void *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

static void f32_matvec_ref(float *out, const void *w, size_t row_bytes, const void *x, int n,
                           int r0, int r1) {
    (void)row_bytes; /* rows are contiguous: n floats */
    wlm_matvec_ref(out, w, x, n, r0, r1);
}

static void f32_matvec_simd(float *out, const void *w, size_t row_bytes, const void *x, int n,
                            int r0, int r1) {
    (void)row_bytes;
    wlm_matvec_simd(out, w, x, n, r0, r1);
}

/* ---- F16 ---------------------------------------------------------------------------------- */

static void f16_to_float(const void *src, float *dst, int64_t n) {
    const wlm_fp16 *h = src;
    for (int64_t i = 0; i < n; i++) dst[i] = wlm_fp16_to_fp32(h[i]);
}

static void f16_from_float(const float *src, void *dst, int64_t n) {
    wlm_fp16 *h = dst;
    for (int64_t i = 0; i < n; i++) h[i] = wlm_fp32_to_fp16(src[i]);
}

void wlm_f16_matvec_ref(float *out, const void *w, size_t row_bytes, const void *xv, int n, int r0,
                        int r1) {
    const float *x = xv;
    for (int r = r0; r < r1; r++) {
        const wlm_fp16 *row =
            (const wlm_fp16 *)(const void *)((const char *)w + (size_t)r * row_bytes);
        float s = 0.0f;
        for (int j = 0; j < n; j++) s += wlm_fp16_to_fp32(row[j]) * x[j];
        out[r] = s;
    }
}

/* ---- rounding helpers ---------------------------------------------------------------------- */

/* Round half to even, like ggml's nearest_int (it adds 1.5 * 2^23 and reads the mantissa), so
 * quantizers pick the same integers whatever the FPU rounding mode. Out-of-range input is
 * clamped and NaN gives 0, so no input reaches an undefined float-to-int conversion. */
static inline int nearest_int(float v) {
    if (v != v) return 0;
    if (v > 4194303.0f) v = 4194303.0f;
    if (v < -4194303.0f) v = -4194303.0f;
    const uint32_t u = float_to_bits(v + 12582912.0f);
    return (int)(u & 0x007fffffu) - 0x00400000;
}

static inline int clamp_int(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* roundf() to int8 (half away from zero), NaN to 0, saturating. */
static inline int8_t round_i8(float v) {
    const float r = roundf(v);
    if (r != r) return 0;
    if (r >= 127.0f) return 127;
    if (r <= -128.0f) return -128;
    return (int8_t)r;
}

/* ---- Q8_0 ---------------------------------------------------------------------------------- */

static void q8_0_to_float(const void *src, float *dst, int64_t n) {
    const wlm_block_q8_0 *b = src;
    for (int64_t i = 0; i < n / WLM_QK8_0; i++, dst += WLM_QK8_0) {
        const float d = wlm_fp16_to_fp32(b[i].d);
        for (int j = 0; j < WLM_QK8_0; j++) dst[j] = (float)b[i].qs[j] * d;
    }
}

/* One 32-element block of Q8_0 / Q8_1: qs[j] = round(x[j] / d), d = max |x| / 127 (the unrounded
 * float scale is returned; ggml's quantize_row_q8_0_ref / q8_1_ref). */
static float quantize_block_q8(const float *x, int8_t *qs) {
    float amax = 0.0f;
    for (int j = 0; j < WLM_QK8_0; j++) {
        const float a = fabsf(x[j]);
        if (a > amax) amax = a;
    }
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < WLM_QK8_0; j++) qs[j] = round_i8(x[j] * id);
    return d;
}

void wlm_quantize_q8_0_ref(const float *x, void *dst, int64_t n) {
    wlm_block_q8_0 *y = dst;
    for (int64_t i = 0; i < n / WLM_QK8_0; i++, x += WLM_QK8_0)
        y[i].d = wlm_fp32_to_fp16(quantize_block_q8(x, y[i].qs));
}

/* Per block, in block order: sum += (float)isum * (dw * dx), ggml's ggml_vec_dot_q8_0_q8_0 (C
 * fallback, which llama.cpp's wasm build runs) operation for operation; the SIMD kernels give
 * these bits too. */
void wlm_q8_0_matvec_ref(float *out, const void *w, size_t row_bytes, const void *xq, int n, int r0,
                         int r1) {
    const wlm_block_q8_0 *x = xq;
    const int nb = n / WLM_QK8_0;
    for (int r = r0; r < r1; r++) {
        const wlm_block_q8_0 *row =
            (const wlm_block_q8_0 *)(const void *)((const char *)w + (size_t)r * row_bytes);
        float sum = 0.0f;
        for (int b = 0; b < nb; b++) {
            int32_t isum = 0;
            for (int j = 0; j < WLM_QK8_0; j++) isum += (int32_t)row[b].qs[j] * x[b].qs[j];
            sum += (float)isum * (wlm_fp16_to_fp32(row[b].d) * wlm_fp16_to_fp32(x[b].d));
        }
        out[r] = sum;
    }
}

/* ---- Q4_0 ---------------------------------------------------------------------------------- */

static void q4_0_to_float(const void *src, float *dst, int64_t n) {
    const wlm_block_q4_0 *b = src;
    for (int64_t i = 0; i < n / WLM_QK4_0; i++, dst += WLM_QK4_0) {
        const float d = wlm_fp16_to_fp32(b[i].d);
        for (int j = 0; j < WLM_QK4_0 / 2; j++) {
            dst[j] = (float)((b[i].qs[j] & 0xF) - 8) * d;
            dst[j + WLM_QK4_0 / 2] = (float)((b[i].qs[j] >> 4) - 8) * d;
        }
    }
}

/* ggml truncates v + 8.5 (v = x / d in [-8, 8]) and caps the result at 15. */
static inline uint8_t q4_0_level(float v) {
    const float t = v + 8.5f;
    if (!(t >= 0.0f)) return 0; /* NaN */
    if (t >= 15.0f) return 15;
    return (uint8_t)t;
}

static void q4_0_from_float(const float *x, void *dst, int64_t n) {
    wlm_block_q4_0 *y = dst;
    for (int64_t i = 0; i < n / WLM_QK4_0; i++, x += WLM_QK4_0) {
        float amax = 0.0f, max = 0.0f; /* the value of largest magnitude, with its sign */
        for (int j = 0; j < WLM_QK4_0; j++) {
            if (amax < fabsf(x[j])) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        }
        const float d = max / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = wlm_fp32_to_fp16(d);
        for (int j = 0; j < WLM_QK4_0 / 2; j++) {
            const float v0 = x[j] * id, v1 = x[j + WLM_QK4_0 / 2] * id;
            y[i].qs[j] = (uint8_t)(q4_0_level(v0) | (q4_0_level(v1) << 4));
        }
    }
}

/* Per block, in block order: sum += ((float)isum * dw) * dx (left to right: not the Q8_0 and
 * Q5_0 association), ggml's ggml_vec_dot_q4_0_q8_0 (C fallback) operation for operation. */
void wlm_q4_0_matvec_ref(float *out, const void *w, size_t row_bytes, const void *xq, int n, int r0,
                         int r1) {
    const wlm_block_q8_0 *x = xq;
    const int nb = n / WLM_QK4_0;
    for (int r = r0; r < r1; r++) {
        const wlm_block_q4_0 *row =
            (const wlm_block_q4_0 *)(const void *)((const char *)w + (size_t)r * row_bytes);
        float sum = 0.0f;
        for (int b = 0; b < nb; b++) {
            int32_t isum = 0;
            for (int j = 0; j < WLM_QK4_0 / 2; j++) {
                isum += ((row[b].qs[j] & 0xF) - 8) * x[b].qs[j];
                isum += ((row[b].qs[j] >> 4) - 8) * x[b].qs[j + WLM_QK4_0 / 2];
            }
            sum += (float)isum * wlm_fp16_to_fp32(row[b].d) * wlm_fp16_to_fp32(x[b].d);
        }
        out[r] = sum;
    }
}

/* ---- Q8_K (activations of the K-quants) ---------------------------------------------------- */

static void q8_K_to_float(const void *src, float *dst, int64_t n) {
    const wlm_block_q8_K *b = src;
    for (int64_t i = 0; i < n / WLM_QK_K; i++, dst += WLM_QK_K)
        for (int j = 0; j < WLM_QK_K; j++) dst[j] = b[i].d * (float)b[i].qs[j];
}

void wlm_quantize_q8_K_ref(const float *x, void *dst, int64_t n) {
    wlm_block_q8_K *y = dst;
    for (int64_t i = 0; i < n / WLM_QK_K; i++, x += WLM_QK_K) {
        float amax = 0.0f, max = 0.0f; /* the first element of largest magnitude */
        for (int j = 0; j < WLM_QK_K; j++) {
            const float a = fabsf(x[j]);
            if (a > amax) {
                amax = a;
                max = x[j];
            }
        }
        if (amax == 0.0f) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        /* -127/max maps the extreme element to -127: every quant lies in [-127, 127]. */
        const float iscale = -127.0f / max;
        for (int j = 0; j < WLM_QK_K; j++)
            y[i].qs[j] = (int8_t)clamp_int(nearest_int(iscale * x[j]), -128, 127);
        for (int g = 0; g < WLM_QK_K / 16; g++) {
            int sum = 0;
            for (int j = 0; j < 16; j++) sum += y[i].qs[16 * g + j];
            y[i].bsums[g] = (int16_t)sum;
        }
        y[i].d = 1.0f / iscale;
    }
}

/* ---- Q4_K ---------------------------------------------------------------------------------- */

static void q4_K_to_float(const void *src, float *dst, int64_t n) {
    const wlm_block_q4_K *b = src;
    for (int64_t i = 0; i < n / WLM_QK_K; i++) {
        const float d = wlm_fp16_to_fp32(b[i].d), dmin = wlm_fp16_to_fp32(b[i].dmin);
        const uint8_t *q = b[i].qs;
        for (int j = 0; j < WLM_QK_K / 64; j++, q += 32) { /* 64 elements: 2 sub-blocks */
            uint8_t sc, m;
            wlm_q4_K_scale_min(b[i].scales, 2 * j, &sc, &m);
            const float d1 = d * sc, m1 = dmin * m;
            wlm_q4_K_scale_min(b[i].scales, 2 * j + 1, &sc, &m);
            const float d2 = d * sc, m2 = dmin * m;
            for (int l = 0; l < 32; l++) *dst++ = d1 * (float)(q[l] & 0xF) - m1;
            for (int l = 0; l < 32; l++) *dst++ = d2 * (float)(q[l] >> 4) - m2;
        }
    }
}

/*
 * Fits x[i] ~ scale * L[i] + min over L[i] in 0..nmax with min <= 0, minimising the weighted
 * squared error: first the plain min/max grid, then nstep+1 candidate step sizes around it
 * (nmax + rmin + rdelta*k levels over the range), each refined by a weighted least-squares
 * solve for (scale, min); use_mad weighs absolute instead of squared errors (Q2_K). Returns
 * the scale and stores -min in *neg_min. This is the algorithm
 * of ggml's reference Q4_K quantizer (make_qkx2_quants), written out again with the same
 * arithmetic so that our files match llama.cpp's byte for byte.
 */
static float fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L,
                           float *neg_min, uint8_t *Laux, float rmin, float rdelta, int nstep,
                           int use_mad) {
    float lo = x[0], hi = x[0];
    float sum_w = w[0], sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < lo) lo = x[i];
        if (x[i] > hi) hi = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (lo > 0) lo = 0;
    if (hi == lo) {
        memset(L, 0, (size_t)n);
        *neg_min = -lo;
        return 0.0f;
    }
    float iscale = (float)nmax / (hi - lo);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)clamp_int(nearest_int(iscale * (x[i] - lo)), 0, nmax);
        float diff = scale * L[i] + lo - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        best_error += w[i] * diff;
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * (float)is + (float)nmax) / (hi - lo);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            const int l = clamp_int(nearest_int(iscale * (x[i] - lo)), 0, nmax);
            Laux[i] = (uint8_t)l;
            sum_l += w[i] * (float)l;
            sum_l2 += w[i] * (float)l * (float)l;
            sum_xl += w[i] * (float)l * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; i++) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                diff = use_mad ? fabsf(diff) : diff * diff;
                cur_error += w[i] * diff;
            }
            if (cur_error < best_error) {
                memcpy(L, Laux, (size_t)n);
                best_error = cur_error;
                scale = this_scale;
                lo = this_min;
            }
        }
    }
    *neg_min = -lo;
    return scale;
}

/*
 * The 6-bit scales and mins of a Q4_K / Q5_K block against the super-block's d and dmin (fp16,
 * max / 63), packed: sub-blocks 0..3 in the low 6 bits of bytes 0..3 (scales) and 4..7 (mins);
 * sub-blocks 4..7 as nibbles in bytes 8..11 with their top two bits in bits 6..7 of bytes 0..7.
 */
static void pack_k4_scales(const float *scales, const float *mins, float max_scale, float max_min,
                           uint8_t *s, wlm_fp16 *d, wlm_fp16 *dmin) {
    const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
    for (int j = 0; j < 8; j++) {
        uint8_t ls = (uint8_t)(unsigned)nearest_int(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)(unsigned)nearest_int(inv_min * mins[j]);
        if (ls > 63) ls = 63;
        if (lm > 63) lm = 63;
        if (j < 4) {
            s[j] = ls;
            s[j + 4] = lm;
        } else {
            s[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
            s[j - 4] |= (uint8_t)((ls >> 4) << 6);
            s[j] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    *d = wlm_fp32_to_fp16(max_scale / 63.0f);
    *dmin = wlm_fp32_to_fp16(max_min / 63.0f);
}

static void q4_K_from_float(const float *x, void *dst, int64_t n) {
    wlm_block_q4_K *y = dst;
    for (int64_t i = 0; i < n / WLM_QK_K; i++, x += WLM_QK_K) {
        uint8_t L[WLM_QK_K], Laux[32];
        float w[32], scales[8], mins[8];
        float max_scale = 0, max_min = 0; /* scales and mins come out >= 0 */
        for (int j = 0; j < 8; j++) {
            const float *xs = x + 32 * j;
            float sum_x2 = 0;
            for (int l = 0; l < 32; l++) sum_x2 += xs[l] * xs[l];
            const float av_x = sqrtf(sum_x2 / 32);
            for (int l = 0; l < 32; l++) w[l] = av_x + fabsf(xs[l]);
            scales[j] =
                fit_scale_min(32, 15, xs, w, L + 32 * j, &mins[j], Laux, -1.0f, 0.1f, 20, 0);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        pack_k4_scales(scales, mins, max_scale, max_min, y[i].scales, &y[i].d, &y[i].dmin);
        const uint8_t *s = y[i].scales;
        /* Requantize against the rounded scales (sub-blocks whose scale rounds to 0 keep the
         * levels of the fit, as ggml's do: they dequantize to -dmin*m whatever they are). */
        const float d = wlm_fp16_to_fp32(y[i].d), dmin = wlm_fp16_to_fp32(y[i].dmin);
        for (int j = 0; j < 8; j++) {
            uint8_t sc, m;
            wlm_q4_K_scale_min(s, j, &sc, &m);
            const float dj = d * sc;
            if (dj == 0.0f) continue;
            const float dm = dmin * m;
            for (int l = 0; l < 32; l++)
                L[32 * j + l] = (uint8_t)clamp_int(nearest_int((x[32 * j + l] + dm) / dj), 0, 15);
        }
        /* each 32 bytes hold 64 elements: the first 32 in the low nibbles, the next 32 high */
        uint8_t *q = y[i].qs;
        for (int j = 0; j < WLM_QK_K; j += 64, q += 32)
            for (int l = 0; l < 32; l++) q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
    }
}

void wlm_q4_K_matvec_ref(float *out, const void *w, size_t row_bytes, const void *xq, int n, int r0,
                         int r1) {
    const wlm_block_q8_K *x = xq;
    const int nb = n / WLM_QK_K;
    for (int r = r0; r < r1; r++) {
        const wlm_block_q4_K *row =
            (const wlm_block_q4_K *)(const void *)((const char *)w + (size_t)r * row_bytes);
        float sum = 0.0f;
        for (int b = 0; b < nb; b++) {
            const uint8_t *q = row[b].qs;
            const int8_t *y = x[b].qs;
            int32_t isum = 0, msum = 0;
            for (int j = 0; j < 4; j++, q += 32, y += 64) {
                uint8_t sc1, m1, sc2, m2;
                wlm_q4_K_scale_min(row[b].scales, 2 * j, &sc1, &m1);
                wlm_q4_K_scale_min(row[b].scales, 2 * j + 1, &sc2, &m2);
                int32_t s1 = 0, s2 = 0;
                for (int l = 0; l < 32; l++) {
                    s1 += (q[l] & 0xF) * y[l];
                    s2 += (q[l] >> 4) * y[l + 32];
                }
                isum += sc1 * s1 + sc2 * s2;
                msum += m1 * (x[b].bsums[4 * j] + x[b].bsums[4 * j + 1]) +
                        m2 * (x[b].bsums[4 * j + 2] + x[b].bsums[4 * j + 3]);
            }
            sum += x[b].d * (wlm_fp16_to_fp32(row[b].d) * (float)isum -
                             wlm_fp16_to_fp32(row[b].dmin) * (float)msum);
        }
        out[r] = sum;
    }
}

/* ---- Q6_K ---------------------------------------------------------------------------------- */

/* Element l + 32k (l < 32, k < 4) of a 128-element half: 4 low bits from ql (bytes l for k even,
 * l + 32 for k odd; low nibble for k < 2, high for k >= 2), 2 high bits from bits 2k..2k+1 of
 * qh[l]; value 0..63, offset by 32. */
static inline int q6_K_level(const uint8_t *ql, const uint8_t *qh, int l, int k) {
    const int lo = (ql[l + 32 * (k & 1)] >> (4 * (k >> 1))) & 0xF;
    return lo | (((qh[l] >> (2 * k)) & 3) << 4);
}

static void q6_K_to_float(const void *src, float *dst, int64_t n) {
    const wlm_block_q6_K *b = src;
    for (int64_t i = 0; i < n / WLM_QK_K; i++) {
        const float d = wlm_fp16_to_fp32(b[i].d);
        for (int h = 0; h < 2; h++, dst += 128) {
            const uint8_t *ql = b[i].ql + 64 * h, *qh = b[i].qh + 32 * h;
            const int8_t *sc = b[i].scales + 8 * h;
            for (int k = 0; k < 4; k++)
                for (int l = 0; l < 32; l++)
                    dst[32 * k + l] =
                        d * (float)sc[2 * k + l / 16] * (float)(q6_K_level(ql, qh, l, k) - 32);
        }
    }
}

/*
 * Fits x[i] ~ scale * L[i] with L[i] in -nmax..nmax-1, minimising the error weighted by x[i]^2:
 * the step that maps the extreme element to -nmax, then 18 nearby steps (nmax +- 0.1k levels),
 * keeping the best least-squares scale. Stores L + nmax. ggml's make_qx_quants (rmse_type 1).
 */
static float fit_scale_sym(int n, int nmax, const float *x, int8_t *L) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++) {
        const float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < 1e-15f) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    float iscale = (float)-nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)(l + nmax);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -((float)nmax + 0.1f * (float)is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
            const float w = x[i] * x[i];
            sumlx += w * x[i] * (float)l;
            suml2 += w * (float)l * (float)l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++)
                L[i] = (int8_t)(nmax + clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

static void q6_K_from_float(const float *x, void *dst, int64_t n) {
    wlm_block_q6_K *y = dst;
    for (int64_t i = 0; i < n / WLM_QK_K; i++, x += WLM_QK_K) {
        int8_t L[WLM_QK_K];
        float scales[16];
        float max_scale = 0, max_abs_scale = 0;
        for (int g = 0; g < 16; g++) {
            scales[g] = fit_scale_sym(16, 32, x + 16 * g, L + 16 * g);
            if (fabsf(scales[g]) > max_abs_scale) {
                max_abs_scale = fabsf(scales[g]);
                max_scale = scales[g];
            }
        }
        memset(&y[i], 0, sizeof y[i]);
        if (max_abs_scale < 1e-15f) continue; /* all (near) zero: d = 0 */
        const float iscale = -128.0f / max_scale;
        y[i].d = wlm_fp32_to_fp16(1 / iscale);
        for (int g = 0; g < 16; g++)
            y[i].scales[g] = (int8_t)clamp_int(nearest_int(iscale * scales[g]), -128, 127);
        const float d = wlm_fp16_to_fp32(y[i].d);
        for (int g = 0; g < 16; g++) {
            const float dg = d * (float)y[i].scales[g];
            if (dg == 0.0f) continue;
            for (int l = 0; l < 16; l++)
                L[16 * g + l] = (int8_t)(32 + clamp_int(nearest_int(x[16 * g + l] / dg), -32, 31));
        }
        for (int h = 0; h < 2; h++) {
            uint8_t *ql = y[i].ql + 64 * h, *qh = y[i].qh + 32 * h;
            const int8_t *Lh = L + 128 * h;
            for (int l = 0; l < 32; l++) {
                ql[l] = (uint8_t)((Lh[l] & 0xF) | ((Lh[l + 64] & 0xF) << 4));
                ql[l + 32] = (uint8_t)((Lh[l + 32] & 0xF) | ((Lh[l + 96] & 0xF) << 4));
                qh[l] = (uint8_t)((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) |
                                  ((Lh[l + 64] >> 4) << 4) | ((Lh[l + 96] >> 4) << 6));
            }
        }
    }
}

void wlm_q6_K_matvec_ref(float *out, const void *w, size_t row_bytes, const void *xq, int n, int r0,
                         int r1) {
    const wlm_block_q8_K *x = xq;
    const int nb = n / WLM_QK_K;
    for (int r = r0; r < r1; r++) {
        const wlm_block_q6_K *row =
            (const wlm_block_q6_K *)(const void *)((const char *)w + (size_t)r * row_bytes);
        float sum = 0.0f;
        for (int b = 0; b < nb; b++) {
            int32_t isum = 0;
            for (int h = 0; h < 2; h++) {
                const uint8_t *ql = row[b].ql + 64 * h, *qh = row[b].qh + 32 * h;
                const int8_t *sc = row[b].scales + 8 * h, *y = x[b].qs + 128 * h;
                for (int k = 0; k < 4; k++) {
                    int32_t s0 = 0, s1 = 0; /* the two 16-element sub-blocks of this quarter */
                    for (int l = 0; l < 16; l++) {
                        s0 += (q6_K_level(ql, qh, l, k) - 32) * y[32 * k + l];
                        s1 += (q6_K_level(ql, qh, l + 16, k) - 32) * y[32 * k + l + 16];
                    }
                    isum += sc[2 * k] * s0 + sc[2 * k + 1] * s1;
                }
            }
            sum += (wlm_fp16_to_fp32(row[b].d) * x[b].d) * (float)isum;
        }
        out[r] = sum;
    }
}

/* ---- BF16 ---------------------------------------------------------------------------------- */

static void bf16_to_float(const void *src, float *dst, int64_t n) {
    const uint16_t *h = src;
    for (int64_t i = 0; i < n; i++) dst[i] = wlm_bf16_to_fp32(h[i]);
}

/* Round to nearest even on the high 16 bits; NaN stays a (quiet) NaN, as ggml does. */
static void bf16_from_float(const float *src, void *dst, int64_t n) {
    uint16_t *h = dst;
    for (int64_t i = 0; i < n; i++) {
        const uint32_t u = float_to_bits(src[i]);
        if ((u & 0x7fffffffu) > 0x7f800000u) h[i] = (uint16_t)((u >> 16) | 64);
        else h[i] = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    }
}

void wlm_bf16_matvec_ref(float *out, const void *w, size_t row_bytes, const void *xv, int n,
                         int r0, int r1) {
    const float *x = xv;
    for (int r = r0; r < r1; r++) {
        const uint16_t *row =
            (const uint16_t *)(const void *)((const char *)w + (size_t)r * row_bytes);
        float s = 0.0f;
        for (int j = 0; j < n; j++) s += wlm_bf16_to_fp32(row[j]) * x[j];
        out[r] = s;
    }
}

/* ---- Q8_1 (activations of Q4_1 and Q5_1) ----------------------------------------------------
 * Q8_0 plus s = fp16((float)(sum of the quants) * d), d the unrounded float scale: the min term
 * m * sum(x) of Q4_1 / Q5_1 is taken as m * s, with s's fp16 rounding, as ggml does
 * (quantize_row_q8_1_ref; llama.cpp's wasm build runs it). */

void wlm_quantize_q8_1_ref(const float *x, void *dst, int64_t n) {
    wlm_block_q8_1 *y = dst;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        const float d = quantize_block_q8(x, y[i].qs);
        int32_t sum = 0;
        for (int j = 0; j < 32; j++) sum += y[i].qs[j];
        y[i].d = wlm_fp32_to_fp16(d);
        y[i].s = wlm_fp32_to_fp16((float)sum * d);
    }
}

static void q8_1_to_float(const void *src, float *dst, int64_t n) {
    const wlm_block_q8_1 *b = src;
    for (int64_t i = 0; i < n / 32; i++, dst += 32) {
        const float d = wlm_fp16_to_fp32(b[i].d);
        for (int j = 0; j < 32; j++) dst[j] = (float)b[i].qs[j] * d;
    }
}

/* ---- Q4_1, Q5_0, Q5_1 (activations: Q8_1, Q8_0, Q8_1) ----------------------------------------
 * Q4_1 / Q5_1 per block, in block order: sum += (dw * dx) * (float)isum + m * s, ggml's
 * ggml_vec_dot_q4_1_q8_1 / q5_1_q8_1 (C fallbacks) operation for operation; the SIMD kernels
 * give these bits too. */

/* trunc(t) capped to 0..maxv (NaN -> 0): ggml's (int8_t)(v + 0.5f) style rounding, defined for
 * every float. */
static inline uint8_t trunc_level(float t, int maxv) {
    if (!(t >= 0.0f)) return 0;
    if (t >= (float)maxv) return (uint8_t)maxv;
    return (uint8_t)t;
}

/* The 5-bit level of element j (0..31) of a Q5_0 / Q5_1 block. */
static inline int q5_level(const uint8_t *qs, const uint8_t *qh, int j) {
    const uint32_t h = (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 |
                       (uint32_t)qh[3] << 24;
    const int lo = j < 16 ? qs[j] & 0xF : qs[j - 16] >> 4;
    return lo | (int)((h >> j) & 1u) << 4;
}

/* Smallest and largest element of a block of n. */
static inline void block_min_max(const float *x, int n, float *lo, float *hi) {
    float a = x[0], b = x[0];
    for (int j = 1; j < n; j++) {
        if (x[j] < a) a = x[j];
        if (x[j] > b) b = x[j];
    }
    *lo = a;
    *hi = b;
}

static void q4_1_to_float(const void *src, float *dst, int64_t n) {
    const wlm_block_q4_1 *b = src;
    for (int64_t i = 0; i < n / 32; i++, dst += 32) {
        const float d = wlm_fp16_to_fp32(b[i].d), m = wlm_fp16_to_fp32(b[i].m);
        for (int j = 0; j < 16; j++) {
            dst[j] = (float)(b[i].qs[j] & 0xF) * d + m;
            dst[j + 16] = (float)(b[i].qs[j] >> 4) * d + m;
        }
    }
}

/* ggml's reference: d = (max - min) / 15, m = min, level = trunc((x - min) / d + 0.5). */
static void q4_1_from_float(const float *x, void *dst, int64_t n) {
    wlm_block_q4_1 *y = dst;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float lo, hi;
        block_min_max(x, 32, &lo, &hi);
        const float d = (hi - lo) / 15.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = wlm_fp32_to_fp16(d);
        y[i].m = wlm_fp32_to_fp16(lo);
        for (int j = 0; j < 16; j++)
            y[i].qs[j] = (uint8_t)(trunc_level((x[j] - lo) * id + 0.5f, 15) |
                                   trunc_level((x[j + 16] - lo) * id + 0.5f, 15) << 4);
    }
}

void wlm_q4_1_matvec_ref(float *out, const void *w, size_t row_bytes, const void *xq, int n,
                         int r0, int r1) {
    const wlm_block_q8_1 *x = xq;
    const int nb = n / 32;
    for (int r = r0; r < r1; r++) {
        const wlm_block_q4_1 *row =
            (const wlm_block_q4_1 *)(const void *)((const char *)w + (size_t)r * row_bytes);
        float sum = 0.0f;
        for (int b = 0; b < nb; b++) {
            int32_t isum = 0;
            for (int j = 0; j < 16; j++)
                isum += (row[b].qs[j] & 0xF) * x[b].qs[j] + (row[b].qs[j] >> 4) * x[b].qs[j + 16];
            sum += (wlm_fp16_to_fp32(row[b].d) * wlm_fp16_to_fp32(x[b].d)) * (float)isum +
                   wlm_fp16_to_fp32(row[b].m) * wlm_fp16_to_fp32(x[b].s);
        }
        out[r] = sum;
    }
}

static void q5_0_to_float(const void *src, float *dst, int64_t n) {
    const wlm_block_q5_0 *b = src;
    for (int64_t i = 0; i < n / 32; i++, dst += 32) {
        const float d = wlm_fp16_to_fp32(b[i].d);
        for (int j = 0; j < 32; j++) dst[j] = (float)(q5_level(b[i].qs, b[i].qh, j) - 16) * d;
    }
}

/* Levels to nibbles and the 32 high bits (little-endian) of a Q5_0 / Q5_1 block. */
static void q5_pack(const uint8_t *L, uint8_t *qs, uint8_t *qh) {
    uint32_t h = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t)((L[j] & 0xF) | (L[j + 16] & 0xF) << 4);
        h |= (uint32_t)(L[j] >> 4) << j | (uint32_t)(L[j + 16] >> 4) << (j + 16);
    }
    for (int k = 0; k < 4; k++) qh[k] = (uint8_t)(h >> (8 * k));
}

/* ggml's reference: as Q4_0 with d = max / -16 and level = min(31, trunc(x / d + 16.5)). */
static void q5_0_from_float(const float *x, void *dst, int64_t n) {
    wlm_block_q5_0 *y = dst;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < 32; j++)
            if (amax < fabsf(x[j])) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        const float d = max / -16.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = wlm_fp32_to_fp16(d);
        uint8_t L[32];
        for (int j = 0; j < 32; j++) L[j] = trunc_level(x[j] * id + 16.5f, 31);
        q5_pack(L, y[i].qs, y[i].qh);
    }
}

/* Per block, in block order: sum += (dw * dx) * (float)isum, ggml's ggml_vec_dot_q5_0_q8_0 (C
 * fallback) operation for operation. */
void wlm_q5_0_matvec_ref(float *out, const void *w, size_t row_bytes, const void *xq, int n,
                         int r0, int r1) {
    const wlm_block_q8_0 *x = xq;
    const int nb = n / 32;
    for (int r = r0; r < r1; r++) {
        const wlm_block_q5_0 *row =
            (const wlm_block_q5_0 *)(const void *)((const char *)w + (size_t)r * row_bytes);
        float sum = 0.0f;
        for (int b = 0; b < nb; b++) {
            int32_t isum = 0;
            for (int j = 0; j < 32; j++)
                isum += (q5_level(row[b].qs, row[b].qh, j) - 16) * x[b].qs[j];
            sum += (wlm_fp16_to_fp32(row[b].d) * wlm_fp16_to_fp32(x[b].d)) * (float)isum;
        }
        out[r] = sum;
    }
}

static void q5_1_to_float(const void *src, float *dst, int64_t n) {
    const wlm_block_q5_1 *b = src;
    for (int64_t i = 0; i < n / 32; i++, dst += 32) {
        const float d = wlm_fp16_to_fp32(b[i].d), m = wlm_fp16_to_fp32(b[i].m);
        for (int j = 0; j < 32; j++) dst[j] = (float)q5_level(b[i].qs, b[i].qh, j) * d + m;
    }
}

/* ggml's reference: d = (max - min) / 31, m = min, level = trunc((x - min) / d + 0.5). */
static void q5_1_from_float(const float *x, void *dst, int64_t n) {
    wlm_block_q5_1 *y = dst;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float lo, hi;
        block_min_max(x, 32, &lo, &hi);
        const float d = (hi - lo) / 31.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = wlm_fp32_to_fp16(d);
        y[i].m = wlm_fp32_to_fp16(lo);
        uint8_t L[32];
        for (int j = 0; j < 32; j++) L[j] = trunc_level((x[j] - lo) * id + 0.5f, 31);
        q5_pack(L, y[i].qs, y[i].qh);
    }
}

void wlm_q5_1_matvec_ref(float *out, const void *w, size_t row_bytes, const void *xq, int n,
                         int r0, int r1) {
    const wlm_block_q8_1 *x = xq;
    const int nb = n / 32;
    for (int r = r0; r < r1; r++) {
        const wlm_block_q5_1 *row =
            (const wlm_block_q5_1 *)(const void *)((const char *)w + (size_t)r * row_bytes);
        float sum = 0.0f;
        for (int b = 0; b < nb; b++) {
            int32_t isum = 0;
            for (int j = 0; j < 32; j++) isum += q5_level(row[b].qs, row[b].qh, j) * x[b].qs[j];
            sum += (wlm_fp16_to_fp32(row[b].d) * wlm_fp16_to_fp32(x[b].d)) * (float)isum +
                   wlm_fp16_to_fp32(row[b].m) * wlm_fp16_to_fp32(x[b].s);
        }
        out[r] = sum;
    }
}

/* ---- Q2_K ---------------------------------------------------------------------------------- */

/* The 2-bit level of element e (0..255) of a Q2_K / Q3_K qs array. */
static inline int k2_level(const uint8_t *qs, int e) {
    return (qs[32 * (e / 128) + e % 32] >> (2 * (e % 128 / 32))) & 3;
}

/* Levels L (0..3) of a super-block into the qs layout shared by Q2_K and Q3_K. */
static void k2_pack(const uint8_t *L, uint8_t *qs) {
    for (int h = 0; h < 2; h++, L += 128)
        for (int l = 0; l < 32; l++)
            qs[32 * h + l] =
                (uint8_t)(L[l] | L[l + 32] << 2 | L[l + 64] << 4 | L[l + 96] << 6);
}

static void q2_K_to_float(const void *src, float *dst, int64_t n) {
    const wlm_block_q2_K *b = src;
    for (int64_t i = 0; i < n / WLM_QK_K; i++, dst += WLM_QK_K) {
        const float d = wlm_fp16_to_fp32(b[i].d), dmin = wlm_fp16_to_fp32(b[i].dmin);
        for (int e = 0; e < WLM_QK_K; e++) {
            const uint8_t sc = b[i].scales[e / 16];
            dst[e] = d * (float)(sc & 0xF) * (float)k2_level(b[i].qs, e) - dmin * (float)(sc >> 4);
        }
    }
}

/* ggml's reference Q2_K: per 16-element sub-block a (scale, min) fit over levels 0..3 weighted
 * by |x| with absolute errors, both quantized to 4 bits against fp16 d = max scale / 15 and
 * dmin = max min / 15, then the levels again against the rounded scales. */
static void q2_K_from_float(const float *x, void *dst, int64_t n) {
    wlm_block_q2_K *y = dst;
    for (int64_t i = 0; i < n / WLM_QK_K; i++, x += WLM_QK_K) {
        uint8_t L[WLM_QK_K], Laux[16];
        float w[16], scales[16], mins[16], max_scale = 0, max_min = 0;
        for (int g = 0; g < 16; g++) {
            for (int l = 0; l < 16; l++) w[l] = fabsf(x[16 * g + l]);
            scales[g] = fit_scale_min(16, 3, x + 16 * g, w, L + 16 * g, &mins[g], Laux, -0.5f,
                                      0.1f, 15, 1);
            if (scales[g] > max_scale) max_scale = scales[g];
            if (mins[g] > max_min) max_min = mins[g];
        }
        memset(&y[i], 0, sizeof y[i]);
        if (max_scale > 0) {
            const float is = 15.0f / max_scale;
            for (int g = 0; g < 16; g++)
                y[i].scales[g] = (uint8_t)clamp_int(nearest_int(is * scales[g]), 0, 15);
            y[i].d = wlm_fp32_to_fp16(max_scale / 15.0f);
        }
        if (max_min > 0) {
            const float is = 15.0f / max_min;
            for (int g = 0; g < 16; g++)
                y[i].scales[g] |= (uint8_t)(clamp_int(nearest_int(is * mins[g]), 0, 15) << 4);
            y[i].dmin = wlm_fp32_to_fp16(max_min / 15.0f);
        }
        const float d = wlm_fp16_to_fp32(y[i].d), dmin = wlm_fp16_to_fp32(y[i].dmin);
        for (int g = 0; g < 16; g++) {
            const float dg = d * (float)(y[i].scales[g] & 0xF);
            if (dg == 0.0f) continue;
            const float dm = dmin * (float)(y[i].scales[g] >> 4);
            for (int l = 0; l < 16; l++)
                L[16 * g + l] = (uint8_t)clamp_int(nearest_int((x[16 * g + l] + dm) / dg), 0, 3);
        }
        k2_pack(L, y[i].qs);
    }
}

void wlm_q2_K_matvec_ref(float *out, const void *w, size_t row_bytes, const void *xq, int n,
                         int r0, int r1) {
    const wlm_block_q8_K *x = xq;
    const int nb = n / WLM_QK_K;
    for (int r = r0; r < r1; r++) {
        const wlm_block_q2_K *row =
            (const wlm_block_q2_K *)(const void *)((const char *)w + (size_t)r * row_bytes);
        float sum = 0.0f;
        for (int b = 0; b < nb; b++) {
            int32_t isum = 0, msum = 0;
            for (int g = 0; g < 16; g++) {
                int32_t s = 0;
                for (int l = 0; l < 16; l++)
                    s += k2_level(row[b].qs, 16 * g + l) * x[b].qs[16 * g + l];
                isum += (row[b].scales[g] & 0xF) * s;
                msum += (row[b].scales[g] >> 4) * x[b].bsums[g];
            }
            sum += x[b].d * (wlm_fp16_to_fp32(row[b].d) * (float)isum -
                             wlm_fp16_to_fp32(row[b].dmin) * (float)msum);
        }
        out[r] = sum;
    }
}

/* ---- Q3_K ---------------------------------------------------------------------------------- */

/* The level (-4..3) of element e of a Q3_K block. */
static inline int q3_K_level(const wlm_block_q3_K *b, int e) {
    const int hbit = (b->hmask[e % 32] >> (e / 32)) & 1;
    return k2_level(b->qs, e) + 4 * hbit - 4;
}

static void q3_K_to_float(const void *src, float *dst, int64_t n) {
    const wlm_block_q3_K *b = src;
    for (int64_t i = 0; i < n / WLM_QK_K; i++, dst += WLM_QK_K) {
        const float d = wlm_fp16_to_fp32(b[i].d);
        for (int e = 0; e < WLM_QK_K; e++)
            dst[e] = d * (float)wlm_q3_K_scale(b[i].scales, e / 16) * (float)q3_K_level(&b[i], e);
    }
}

/*
 * Fits x[i] ~ scale * L[i] with L[i] in -nmax..nmax-1, errors weighted by x[i]^2: the step that
 * maps the extreme element to -nmax, then up to five passes that move single elements to the
 * level the least-squares scale of the others asks for, when that improves the fit. Stores
 * L + nmax. The algorithm of ggml's make_q3_quants (with its rmse option), for Q3_K.
 */
static float fit_scale_sym_iter(int n, int nmax, const float *x, uint8_t *Lout) {
    int L[16];
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    if (amax < 1e-15f) {
        memset(Lout, 0, (size_t)n);
        return 0.0f;
    }
    const float iscale = (float)-nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        L[i] = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * (float)L[i];
        suml2 += w * (float)L[i] * (float)L[i];
    }
    for (int pass = 0; pass < 5; pass++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            const float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * (float)L[i];
            if (!(slx > 0)) continue;
            float sl2 = suml2 - w * (float)L[i] * (float)L[i];
            const int nl = clamp_int(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
            if (nl == L[i]) continue;
            slx += w * x[i] * (float)nl;
            sl2 += w * (float)nl * (float)nl;
            if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                L[i] = nl;
                sumlx = slx;
                suml2 = sl2;
                changed++;
            }
        }
        if (!changed) break;
    }
    for (int i = 0; i < n; i++) Lout[i] = (uint8_t)(L[i] + nmax);
    return suml2 > 0 ? sumlx / suml2 : 0.0f;
}

/* ggml's reference Q3_K: per 16-element sub-block a signed scale (fit_scale_sym_iter over levels
 * -4..3), quantized to 6 bits (-32..31) against fp16 d = -(max |scale|, signed) / 32, then the
 * levels again against the rounded scales; high bits to hmask, low 2 bits as in Q2_K. */
static void q3_K_from_float(const float *x, void *dst, int64_t n) {
    wlm_block_q3_K *y = dst;
    for (int64_t i = 0; i < n / WLM_QK_K; i++, x += WLM_QK_K) {
        uint8_t L[WLM_QK_K];
        float scales[16], max_scale = 0, amax = 0;
        for (int g = 0; g < 16; g++) {
            scales[g] = fit_scale_sym_iter(16, 4, x + 16 * g, L + 16 * g);
            if (fabsf(scales[g]) > amax) {
                amax = fabsf(scales[g]);
                max_scale = scales[g];
            }
        }
        memset(&y[i], 0, sizeof y[i]);
        if (max_scale != 0.0f) {
            const float iscale = -32.0f / max_scale;
            for (int g = 0; g < 16; g++) {
                const int l = clamp_int(nearest_int(iscale * scales[g]), -32, 31) + 32;
                if (g < 8) y[i].scales[g] = (uint8_t)(l & 0xF);
                else y[i].scales[g - 8] |= (uint8_t)((l & 0xF) << 4);
                y[i].scales[8 + g % 4] |= (uint8_t)((l >> 4) << (2 * (g / 4)));
            }
            y[i].d = wlm_fp32_to_fp16(1.0f / iscale);
        }
        const float d = wlm_fp16_to_fp32(y[i].d);
        for (int g = 0; g < 16; g++) {
            const float dg = d * (float)wlm_q3_K_scale(y[i].scales, g);
            if (dg == 0.0f) continue;
            for (int l = 0; l < 16; l++)
                L[16 * g + l] = (uint8_t)(clamp_int(nearest_int(x[16 * g + l] / dg), -4, 3) + 4);
        }
        for (int e = 0; e < WLM_QK_K; e++)
            if (L[e] > 3) {
                y[i].hmask[e % 32] |= (uint8_t)(1u << (e / 32));
                L[e] -= 4;
            }
        k2_pack(L, y[i].qs);
    }
}

void wlm_q3_K_matvec_ref(float *out, const void *w, size_t row_bytes, const void *xq, int n,
                         int r0, int r1) {
    const wlm_block_q8_K *x = xq;
    const int nb = n / WLM_QK_K;
    for (int r = r0; r < r1; r++) {
        const wlm_block_q3_K *row =
            (const wlm_block_q3_K *)(const void *)((const char *)w + (size_t)r * row_bytes);
        float sum = 0.0f;
        for (int b = 0; b < nb; b++) {
            int32_t isum = 0;
            for (int g = 0; g < 16; g++) {
                int32_t s = 0;
                for (int l = 0; l < 16; l++)
                    s += q3_K_level(&row[b], 16 * g + l) * x[b].qs[16 * g + l];
                isum += wlm_q3_K_scale(row[b].scales, g) * s;
            }
            sum += (wlm_fp16_to_fp32(row[b].d) * x[b].d) * (float)isum;
        }
        out[r] = sum;
    }
}

/* ---- Q5_K ---------------------------------------------------------------------------------- */

/* The 5-bit level of element e of a Q5_K block. */
static inline int q5_K_level(const wlm_block_q5_K *b, int e) {
    const int lo = (b->qs[32 * (e / 64) + e % 32] >> (4 * (e / 32 % 2))) & 0xF;
    return lo | ((b->qh[e % 32] >> (e / 32)) & 1) << 4;
}

static void q5_K_to_float(const void *src, float *dst, int64_t n) {
    const wlm_block_q5_K *b = src;
    for (int64_t i = 0; i < n / WLM_QK_K; i++, dst += WLM_QK_K) {
        const float d = wlm_fp16_to_fp32(b[i].d), dmin = wlm_fp16_to_fp32(b[i].dmin);
        for (int e = 0; e < WLM_QK_K; e++) {
            uint8_t sc, m;
            wlm_q4_K_scale_min(b[i].scales, e / 32, &sc, &m);
            dst[e] = d * (float)sc * (float)q5_K_level(&b[i], e) - dmin * (float)m;
        }
    }
}

/* ggml's reference Q5_K: Q4_K's algorithm with levels 0..31 (fit_scale_min with its Q5_K
 * search grid), the 6-bit scales and mins packed as in Q4_K, bit 4 of each level in qh. */
static void q5_K_from_float(const float *x, void *dst, int64_t n) {
    wlm_block_q5_K *y = dst;
    for (int64_t i = 0; i < n / WLM_QK_K; i++, x += WLM_QK_K) {
        uint8_t L[WLM_QK_K], Laux[32];
        float w[32], scales[8], mins[8], max_scale = 0, max_min = 0;
        for (int j = 0; j < 8; j++) {
            const float *xs = x + 32 * j;
            float sum_x2 = 0;
            for (int l = 0; l < 32; l++) sum_x2 += xs[l] * xs[l];
            const float av_x = sqrtf(sum_x2 / 32);
            for (int l = 0; l < 32; l++) w[l] = av_x + fabsf(xs[l]);
            scales[j] =
                fit_scale_min(32, 31, xs, w, L + 32 * j, &mins[j], Laux, -0.5f, 0.1f, 15, 0);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        memset(&y[i], 0, sizeof y[i]);
        pack_k4_scales(scales, mins, max_scale, max_min, y[i].scales, &y[i].d, &y[i].dmin);
        const float d = wlm_fp16_to_fp32(y[i].d), dmin = wlm_fp16_to_fp32(y[i].dmin);
        for (int j = 0; j < 8; j++) {
            uint8_t sc, m;
            wlm_q4_K_scale_min(y[i].scales, j, &sc, &m);
            const float dj = d * sc;
            if (dj == 0.0f) continue;
            const float dm = dmin * m;
            for (int l = 0; l < 32; l++)
                L[32 * j + l] = (uint8_t)clamp_int(nearest_int((x[32 * j + l] + dm) / dj), 0, 31);
        }
        for (int e = 0; e < WLM_QK_K; e++) {
            y[i].qs[32 * (e / 64) + e % 32] |= (uint8_t)((L[e] & 0xF) << (4 * (e / 32 % 2)));
            y[i].qh[e % 32] |= (uint8_t)((L[e] >> 4) << (e / 32));
        }
    }
}

void wlm_q5_K_matvec_ref(float *out, const void *w, size_t row_bytes, const void *xq, int n,
                         int r0, int r1) {
    const wlm_block_q8_K *x = xq;
    const int nb = n / WLM_QK_K;
    for (int r = r0; r < r1; r++) {
        const wlm_block_q5_K *row =
            (const wlm_block_q5_K *)(const void *)((const char *)w + (size_t)r * row_bytes);
        float sum = 0.0f;
        for (int b = 0; b < nb; b++) {
            int32_t isum = 0, msum = 0;
            for (int j = 0; j < 8; j++) {
                uint8_t sc, m;
                wlm_q4_K_scale_min(row[b].scales, j, &sc, &m);
                int32_t s = 0;
                for (int l = 0; l < 32; l++)
                    s += q5_K_level(&row[b], 32 * j + l) * x[b].qs[32 * j + l];
                isum += sc * s;
                msum += m * (x[b].bsums[2 * j] + x[b].bsums[2 * j + 1]);
            }
            sum += x[b].d * (wlm_fp16_to_fp32(row[b].d) * (float)isum -
                             wlm_fp16_to_fp32(row[b].dmin) * (float)msum);
        }
        out[r] = sum;
    }
}

#define WLM_X4(v) {v, v, v, v}
#define WLM_X16(v) {v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v}
const wlm_simd_consts wlm_simd_k = {
    .i16_one = {1, 1, 1, 1, 1, 1, 1, 1},
    .f32_sign = WLM_X4(0x80000000u),
    .f16_rebias = WLM_X4(0x70000000u),
    .f32_2m112 = WLM_X4(0x1p-112f),
    .f32_half_bits = WLM_X4(0x3f000000u),
    .f32_half = WLM_X4(0.5f),
    .f16_min_normal = WLM_X4(0x400),
    .f16_exp_hi = WLM_X4(0x7C000000u),
    .f16_normal_mask = WLM_X4(0x8FFFE000u),
    .f16_normal_bias = WLM_X4(0x38000000u),
    .u8_0f = WLM_X16(0x0F),
    .u8_10 = WLM_X16(0x10),
    .u8_80 = WLM_X16(0x80),
    .u8_30 = WLM_X16(0x30),
    .u8_03 = WLM_X16(0x03),
    .u8_04 = WLM_X16(0x04),
    .u8_bit = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128},
    .u8_q5_s0 = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1},
    .u8_q5_s1 = {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3},
    .u16_000f = {0x000F, 0x000F, 0x000F, 0x000F, 0x000F, 0x000F, 0x000F, 0x000F},
    .u16_00ff = {0x00FF, 0x00FF, 0x00FF, 0x00FF, 0x00FF, 0x00FF, 0x00FF, 0x00FF},
    .u16_ff00 = {0xFF00, 0xFF00, 0xFF00, 0xFF00, 0xFF00, 0xFF00, 0xFF00, 0xFF00},
};
#undef WLM_X16
#undef WLM_X4

/* ---- the table ---------------------------------------------------------------------------- */

static const wlm_type_traits traits[WLM_TYPE_COUNT] = {
    [WLM_TYPE_F32] = {"F32", 1, 4, 1, WLM_TYPE_F32, f32_to_float, f32_from_float, f32_matvec_ref,
                      f32_matvec_simd},
    [WLM_TYPE_F16] = {"F16", 1, 2, 1, WLM_TYPE_F32, f16_to_float, f16_from_float,
                      wlm_f16_matvec_ref, wlm_f16_matvec_simd},
    [WLM_TYPE_Q4_0] = {"Q4_0", 32, 18, 1, WLM_TYPE_Q8_0, q4_0_to_float, q4_0_from_float,
                       wlm_q4_0_matvec_ref, wlm_q4_0_matvec_simd},
    [WLM_TYPE_Q4_1] = {"Q4_1", 32, 20, 1, WLM_TYPE_Q8_1, q4_1_to_float, q4_1_from_float,
                       wlm_q4_1_matvec_ref, wlm_q4_1_matvec_simd},
    [WLM_TYPE_Q5_0] = {"Q5_0", 32, 22, 1, WLM_TYPE_Q8_0, q5_0_to_float, q5_0_from_float,
                       wlm_q5_0_matvec_ref, wlm_q5_0_matvec_simd},
    [WLM_TYPE_Q5_1] = {"Q5_1", 32, 24, 1, WLM_TYPE_Q8_1, q5_1_to_float, q5_1_from_float,
                       wlm_q5_1_matvec_ref, wlm_q5_1_matvec_simd},
    [WLM_TYPE_Q8_0] = {"Q8_0", 32, 34, 1, WLM_TYPE_Q8_0, q8_0_to_float, wlm_quantize_q8_0_simd,
                       wlm_q8_0_matvec_ref, wlm_q8_0_matvec_simd},
    /* activations only (Q4_1, Q5_1) */
    [WLM_TYPE_Q8_1] = {"Q8_1", 32, 36, 0, 0, q8_1_to_float, wlm_quantize_q8_1_simd, NULL, NULL},
    [WLM_TYPE_Q2_K] = {"Q2_K", 256, 84, 1, WLM_TYPE_Q8_K, q2_K_to_float, q2_K_from_float,
                       wlm_q2_K_matvec_ref, wlm_q2_K_matvec_simd},
    [WLM_TYPE_Q3_K] = {"Q3_K", 256, 110, 1, WLM_TYPE_Q8_K, q3_K_to_float, q3_K_from_float,
                       wlm_q3_K_matvec_ref, wlm_q3_K_matvec_simd},
    [WLM_TYPE_Q4_K] = {"Q4_K", 256, 144, 1, WLM_TYPE_Q8_K, q4_K_to_float, q4_K_from_float,
                       wlm_q4_K_matvec_ref, wlm_q4_K_matvec_simd},
    [WLM_TYPE_Q5_K] = {"Q5_K", 256, 176, 1, WLM_TYPE_Q8_K, q5_K_to_float, q5_K_from_float,
                       wlm_q5_K_matvec_ref, wlm_q5_K_matvec_simd},
    [WLM_TYPE_Q6_K] = {"Q6_K", 256, 210, 1, WLM_TYPE_Q8_K, q6_K_to_float, q6_K_from_float,
                       wlm_q6_K_matvec_ref, wlm_q6_K_matvec_simd},
    /* activations only: no weight kernels */
    [WLM_TYPE_Q8_K] = {"Q8_K", 256, 292, 0, 0, q8_K_to_float, wlm_quantize_q8_K_simd, NULL, NULL},
    [WLM_TYPE_BF16] = {"BF16", 1, 2, 1, WLM_TYPE_F32, bf16_to_float, bf16_from_float,
                       wlm_bf16_matvec_ref, wlm_bf16_matvec_simd},
};

const wlm_type_traits *wlm_type_get(int32_t type) {
    static const wlm_type_traits unknown = {0};
    if (type < 0 || type >= WLM_TYPE_COUNT) return &unknown;
    return &traits[type];
}

size_t wlm_row_bytes(int32_t type, int64_t n) {
    const wlm_type_traits *t = wlm_type_get(type);
    if (!t->name || n < 0 || n % t->block_size) return 0;
    return (size_t)(n / t->block_size) * t->type_size;
}

/* ---- the dot-form probe (quant.h) ------------------------------------------------------------ */

enum { PROBE_ROWS = 32, PROBE_COLS = 512, PROBE_NB = PROBE_COLS / WLM_QK8_0, PROBE_ENT = 4,
       PROBE_ROWS5 = 128 };

double wlm_quant_dot_probe(int32_t form, int32_t batch, int32_t iters) {
    const int relaxed = wlm_quant_have_relaxed();
    wlm_qmatvec_fn mv = NULL;
    wlm_qmatmat_fn mm8 = NULL, mm5 = NULL;
    if (form == WLM_DOT_FUSED && relaxed) {
        mv = wlm_type_get(WLM_TYPE_Q8_0)->matvec_simd;
        mm8 = wlm_quant_matmat_simd(WLM_TYPE_Q8_0), mm5 = wlm_quant_matmat_simd(WLM_TYPE_Q5_0);
    } else if (form == WLM_DOT_SPLIT) {
        mv = wlm_quant_matvec_split(WLM_TYPE_Q8_0);
        mm8 = wlm_quant_matmat_split(WLM_TYPE_Q8_0), mm5 = wlm_quant_matmat_split(WLM_TYPE_Q5_0);
    }
    if (!mv || (batch && (!mm8 || !mm5))) return -1;
    /* the Q8_0 matrix and activations, the Q5_0 matrix, then the results (floats, 4-aligned) */
    const size_t row8 = PROBE_NB * sizeof(wlm_block_q8_0), row5 = PROBE_NB * sizeof(wlm_block_q5_0);
    const size_t w8 = (size_t)PROBE_ROWS * row8, xbytes = PROBE_ENT * row8;
    const size_t w5 = batch ? (size_t)PROBE_ROWS5 * row5 : 0;
    unsigned char *buf = malloc(w8 + xbytes + w5 + 4 + PROBE_ENT * PROBE_ROWS5 * sizeof(float));
    if (!buf) return -1;
    wlm_block_q8_0 *w = (wlm_block_q8_0 *)(void *)buf, *x = w + PROBE_ROWS * PROBE_NB;
    wlm_block_q5_0 *v = (wlm_block_q5_0 *)(void *)(buf + w8 + xbytes);
    float *out = (float *)(void *)(buf + ((w8 + xbytes + w5 + 3) & ~(size_t)3));
    for (int b = 0; b < (PROBE_ROWS + PROBE_ENT) * PROBE_NB; b++) { /* |quants| <= 127 */
        w[b].d = wlm_fp32_to_fp16(0.01f + 0.001f * (float)(b % 7));
        for (int i = 0; i < WLM_QK8_0; i++) w[b].qs[i] = (int8_t)((b * 37 + i * 11) % 255 - 127);
    }
    for (int b = 0; batch && b < PROBE_ROWS5 * PROBE_NB; b++) {
        v[b].d = wlm_fp32_to_fp16(0.02f + 0.001f * (float)(b % 5));
        for (int i = 0; i < 4; i++) v[b].qh[i] = (uint8_t)(b * 29 + i * 71);
        for (int i = 0; i < WLM_QK4_0 / 2; i++) v[b].qs[i] = (uint8_t)(b * 13 + i * 17);
    }
    double sum = 0;
    for (int32_t it = 0; it < iters; it++) {
        if (batch) {
            mm8(out, PROBE_ROWS, w, row8, x, row8, PROBE_COLS, 0, PROBE_ROWS, PROBE_ENT);
            sum += fabsf(out[it % (PROBE_ENT * PROBE_ROWS)]);
            mm5(out, PROBE_ROWS5, v, row5, x, row8, PROBE_COLS, 0, PROBE_ROWS5, PROBE_ENT);
        } else {
            mv(out, w, row8, x, PROBE_COLS, 0, PROBE_ROWS);
        }
        sum += fabsf(out[it % PROBE_ROWS]);
    }
    free(buf);
    return sum;
}
