/*
 * quant_blocks32.c — the 32-element block formats: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, MXFP4
 * (weights) and Q8_1 (the activations of Q4_1 and Q5_1): their conversions (quant_formats.h)
 * and scalar reference kernels (quant.h); the SIMD twins are in quant_simd/ (blocks32*.inc,
 * relaxed_blocks32.inc). The type table is quant.c's.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/quant.h"
#include "kernels/quant_formats.h"
#include "wasmlm.h"

/* ---- Q8_0 ---------------------------------------------------------------------------------- */

void wlm_q8_0_to_float(const void *src, float *dst, int64_t n) {
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

void wlm_q4_0_to_float(const void *src, float *dst, int64_t n) {
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

void wlm_q4_0_from_float(const float *x, void *dst, int64_t n) {
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

void wlm_q8_1_to_float(const void *src, float *dst, int64_t n) {
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

void wlm_q4_1_to_float(const void *src, float *dst, int64_t n) {
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
void wlm_q4_1_from_float(const float *x, void *dst, int64_t n) {
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

void wlm_q5_0_to_float(const void *src, float *dst, int64_t n) {
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
void wlm_q5_0_from_float(const float *x, void *dst, int64_t n) {
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

void wlm_q5_1_to_float(const void *src, float *dst, int64_t n) {
    const wlm_block_q5_1 *b = src;
    for (int64_t i = 0; i < n / 32; i++, dst += 32) {
        const float d = wlm_fp16_to_fp32(b[i].d), m = wlm_fp16_to_fp32(b[i].m);
        for (int j = 0; j < 32; j++) dst[j] = (float)q5_level(b[i].qs, b[i].qh, j) * d + m;
    }
}

/* ggml's reference: d = (max - min) / 31, m = min, level = trunc((x - min) / d + 0.5). */
void wlm_q5_1_from_float(const float *x, void *dst, int64_t n) {
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

/* ---- MXFP4 --------------------------------------------------------------------------------- */

const int8_t wlm_mxfp4_kvalues[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

void wlm_mxfp4_to_float(const void *src, float *dst, int64_t n) {
    const wlm_block_mxfp4 *b = src;
    for (int64_t i = 0; i < n / WLM_QK_MXFP4; i++, dst += WLM_QK_MXFP4) {
        const float d = wlm_e8m0_to_fp32_half(b[i].e);
        for (int j = 0; j < WLM_QK_MXFP4 / 2; j++) {
            dst[j] = (float)wlm_mxfp4_kvalues[b[i].qs[j] & 0xF] * d;
            dst[j + WLM_QK_MXFP4 / 2] = (float)wlm_mxfp4_kvalues[b[i].qs[j] >> 4] * d;
        }
    }
}

/* The code whose value K[code] * d is nearest to v, the lowest code on a tie (ggml's
 * best_index_mxfp4: a strict < over the codes in order; NaN gives code 0). */
static uint8_t mxfp4_best_code(float v, float d) {
    uint8_t best = 0;
    float best_err = fabsf((float)wlm_mxfp4_kvalues[0] * d - v);
    for (uint8_t i = 1; i < 16; i++) {
        const float err = fabsf((float)wlm_mxfp4_kvalues[i] * d - v);
        if (err < best_err) {
            best = i;
            best_err = err;
        }
    }
    return best;
}

/* ggml's quantize_row_mxfp4_ref: e = floor(log2(amax)) - 2 + 127, so that the block's largest
 * magnitude is 8 to 16 steps 2^(e - 128) (the top codes are 8 and 12). ggml converts that float to
 * uint8_t directly (undefined outside 0..255: amax below 2^-125 or, never for finite floats,
 * above); here it is clamped to 0..254 first. Inf gives 254 and its codes +-12 (NaN: 0). */
void wlm_mxfp4_from_float(const float *x, void *dst, int64_t n) {
    wlm_block_mxfp4 *y = dst;
    for (int64_t i = 0; i < n / WLM_QK_MXFP4; i++, x += WLM_QK_MXFP4) {
        float amax = 0.0f;
        for (int j = 0; j < WLM_QK_MXFP4; j++)
            if (amax < fabsf(x[j])) amax = fabsf(x[j]);
        int e = 0;
        if (amax > 0.0f) {
            const float l = floorf(log2f(amax)) - 2.0f + 127.0f;
            e = l >= 254.0f ? 254 : l <= 0.0f ? 0 : (int)l;
        }
        y[i].e = (uint8_t)e;
        const float d = wlm_e8m0_to_fp32_half(y[i].e);
        for (int j = 0; j < WLM_QK_MXFP4 / 2; j++)
            y[i].qs[j] = (uint8_t)(mxfp4_best_code(x[j], d) |
                                   (mxfp4_best_code(x[j + WLM_QK_MXFP4 / 2], d) << 4));
    }
}

/* Per block, in block order: sum += (dx * dw) * (float)isum with dw = 2^(e - 128) and isum the
 * exact sum of K[code] * q over the block, ggml's ggml_vec_dot_mxfp4_q8_0 (C fallback, which
 * llama.cpp's wasm build runs) operation for operation; the SIMD kernels give these bits too. */
void wlm_mxfp4_matvec_ref(float *out, const void *w, size_t row_bytes, const void *xq, int n,
                          int r0, int r1) {
    const wlm_block_q8_0 *x = xq;
    const int nb = n / WLM_QK_MXFP4;
    for (int r = r0; r < r1; r++) {
        const wlm_block_mxfp4 *row =
            (const wlm_block_mxfp4 *)(const void *)((const char *)w + (size_t)r * row_bytes);
        float sum = 0.0f;
        for (int b = 0; b < nb; b++) {
            const float d = wlm_fp16_to_fp32(x[b].d) * wlm_e8m0_to_fp32_half(row[b].e);
            int32_t isum = 0;
            for (int j = 0; j < WLM_QK_MXFP4 / 2; j++) {
                isum += wlm_mxfp4_kvalues[row[b].qs[j] & 0xF] * x[b].qs[j];
                isum += wlm_mxfp4_kvalues[row[b].qs[j] >> 4] * x[b].qs[j + WLM_QK_MXFP4 / 2];
            }
            sum += d * (float)isum;
        }
        out[r] = sum;
    }
}
