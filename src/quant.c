/*
 * quant.c — the type-traits table and the conversions of each element type: binary16, and the
 * ggml block formats (Q8_0, Q4_0, Q4_K, Q6_K, and Q8_K for activations). The scalar reference
 * kernels live here; their SIMD128 twins in quant_simd.c.
 */
#include <math.h>
#include <string.h>

#include "kernels.h"
#include "quant.h"

float wlm_fp16_to_fp32(wlm_fp16 h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (mant << 13); /* Inf / NaN */
    } else if (exp != 0) {
        bits = sign | ((exp + 112u) << 23) | (mant << 13);
    } else if (mant == 0) {
        bits = sign;
    } else { /* subnormal: normalise */
        exp = 113;
        while (!(mant & 0x400u)) {
            mant <<= 1;
            exp--;
        }
        bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
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

static void f16_matvec_ref(float *out, const void *w, size_t row_bytes, const void *xv, int n,
                           int r0, int r1) {
    const float *x = xv;
    for (int r = r0; r < r1; r++) {
        const wlm_fp16 *row = (const wlm_fp16 *)(const void *)((const char *)w + (size_t)r * row_bytes);
        float s = 0.0f;
        for (int j = 0; j < n; j++) s += wlm_fp16_to_fp32(row[j]) * x[j];
        out[r] = s;
    }
}

/* ---- the table ---------------------------------------------------------------------------- */

static const wlm_type_traits traits[WLM_TYPE_COUNT] = {
    [WLM_TYPE_F32] = {"F32", 1, 4, 1, WLM_TYPE_F32, f32_to_float, f32_from_float,
                      f32_matvec_ref, f32_matvec_simd},
    [WLM_TYPE_F16] = {"F16", 1, 2, 1, WLM_TYPE_F32, f16_to_float, f16_from_float, f16_matvec_ref,
                      f16_matvec_ref},
    [WLM_TYPE_Q4_0] = {"Q4_0", 32, 18, 0, WLM_TYPE_Q8_0, NULL, NULL, NULL, NULL},
    [WLM_TYPE_Q4_1] = {"Q4_1", 32, 20, 0, 0, NULL, NULL, NULL, NULL},
    [WLM_TYPE_Q5_0] = {"Q5_0", 32, 22, 0, 0, NULL, NULL, NULL, NULL},
    [WLM_TYPE_Q5_1] = {"Q5_1", 32, 24, 0, 0, NULL, NULL, NULL, NULL},
    [WLM_TYPE_Q8_0] = {"Q8_0", 32, 34, 0, WLM_TYPE_Q8_0, NULL, NULL, NULL, NULL},
    [WLM_TYPE_Q8_1] = {"Q8_1", 32, 36, 0, 0, NULL, NULL, NULL, NULL},
    [WLM_TYPE_Q2_K] = {"Q2_K", 256, 84, 0, 0, NULL, NULL, NULL, NULL},
    [WLM_TYPE_Q3_K] = {"Q3_K", 256, 110, 0, 0, NULL, NULL, NULL, NULL},
    [WLM_TYPE_Q4_K] = {"Q4_K", 256, 144, 0, WLM_TYPE_Q8_K, NULL, NULL, NULL, NULL},
    [WLM_TYPE_Q5_K] = {"Q5_K", 256, 176, 0, 0, NULL, NULL, NULL, NULL},
    [WLM_TYPE_Q6_K] = {"Q6_K", 256, 210, 0, WLM_TYPE_Q8_K, NULL, NULL, NULL, NULL},
    [WLM_TYPE_Q8_K] = {"Q8_K", 256, 292, 0, 0, NULL, NULL, NULL, NULL},
    [WLM_TYPE_BF16] = {"BF16", 1, 2, 0, 0, NULL, NULL, NULL, NULL},
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
