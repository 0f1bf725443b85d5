/*
 * quant.c — the type-traits table (wlm_type_get, wlm_row_bytes), binary16 and bfloat16
 * conversions, the float types' rows of the table, the SIMD kernels' constant table
 * (wlm_simd_k) and the dot-form probe. The ggml block formats' conversions and scalar reference
 * kernels are in quant_blocks32.c (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, MXFP4, Q8_1) and quant_kquants.c
 * (Q2_K..Q6_K, Q8_K); their SIMD twins in quant_simd.c.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/quant.h"
#include "kernels/quant_formats.h"
#include "wasmlm.h"

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
    .i8_mxfp4 = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12},
    .u8_mxfp4_12 = {12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0},
};
#undef WLM_X16
#undef WLM_X4

/* ---- the table ---------------------------------------------------------------------------- */

static const wlm_type_traits traits[WLM_TYPE_COUNT] = {
    [WLM_TYPE_F32] = {"F32", 1, 4, 1, WLM_TYPE_F32, f32_to_float, f32_from_float, f32_matvec_ref,
                      f32_matvec_simd},
    [WLM_TYPE_F16] = {"F16", 1, 2, 1, WLM_TYPE_F32, f16_to_float, f16_from_float,
                      wlm_f16_matvec_ref, wlm_f16_matvec_simd},
    [WLM_TYPE_Q4_0] = {"Q4_0", 32, 18, 1, WLM_TYPE_Q8_0, wlm_q4_0_to_float, wlm_q4_0_from_float,
                       wlm_q4_0_matvec_ref, wlm_q4_0_matvec_simd},
    [WLM_TYPE_Q4_1] = {"Q4_1", 32, 20, 1, WLM_TYPE_Q8_1, wlm_q4_1_to_float, wlm_q4_1_from_float,
                       wlm_q4_1_matvec_ref, wlm_q4_1_matvec_simd},
    [WLM_TYPE_Q5_0] = {"Q5_0", 32, 22, 1, WLM_TYPE_Q8_0, wlm_q5_0_to_float, wlm_q5_0_from_float,
                       wlm_q5_0_matvec_ref, wlm_q5_0_matvec_simd},
    [WLM_TYPE_Q5_1] = {"Q5_1", 32, 24, 1, WLM_TYPE_Q8_1, wlm_q5_1_to_float, wlm_q5_1_from_float,
                       wlm_q5_1_matvec_ref, wlm_q5_1_matvec_simd},
    [WLM_TYPE_Q8_0] = {"Q8_0", 32, 34, 1, WLM_TYPE_Q8_0, wlm_q8_0_to_float, wlm_quantize_q8_0_simd,
                       wlm_q8_0_matvec_ref, wlm_q8_0_matvec_simd},
    /* activations only (Q4_1, Q5_1) */
    [WLM_TYPE_Q8_1] = {"Q8_1", 32, 36, 0, 0, wlm_q8_1_to_float, wlm_quantize_q8_1_simd, NULL, NULL},
    [WLM_TYPE_Q2_K] = {"Q2_K", 256, 84, 1, WLM_TYPE_Q8_K, wlm_q2_K_to_float, wlm_q2_K_from_float,
                       wlm_q2_K_matvec_ref, wlm_q2_K_matvec_simd},
    [WLM_TYPE_Q3_K] = {"Q3_K", 256, 110, 1, WLM_TYPE_Q8_K, wlm_q3_K_to_float, wlm_q3_K_from_float,
                       wlm_q3_K_matvec_ref, wlm_q3_K_matvec_simd},
    [WLM_TYPE_Q4_K] = {"Q4_K", 256, 144, 1, WLM_TYPE_Q8_K, wlm_q4_K_to_float, wlm_q4_K_from_float,
                       wlm_q4_K_matvec_ref, wlm_q4_K_matvec_simd},
    [WLM_TYPE_Q5_K] = {"Q5_K", 256, 176, 1, WLM_TYPE_Q8_K, wlm_q5_K_to_float, wlm_q5_K_from_float,
                       wlm_q5_K_matvec_ref, wlm_q5_K_matvec_simd},
    [WLM_TYPE_Q6_K] = {"Q6_K", 256, 210, 1, WLM_TYPE_Q8_K, wlm_q6_K_to_float, wlm_q6_K_from_float,
                       wlm_q6_K_matvec_ref, wlm_q6_K_matvec_simd},
    /* activations only: no weight kernels */
    [WLM_TYPE_Q8_K] = {"Q8_K", 256, 292, 0, 0, wlm_q8_K_to_float, wlm_quantize_q8_K_simd, NULL, NULL},
    [WLM_TYPE_BF16] = {"BF16", 1, 2, 1, WLM_TYPE_F32, bf16_to_float, bf16_from_float,
                       wlm_bf16_matvec_ref, wlm_bf16_matvec_simd},
    [WLM_TYPE_MXFP4] = {"MXFP4", 32, 17, 1, WLM_TYPE_Q8_0, wlm_mxfp4_to_float,
                        wlm_mxfp4_from_float, wlm_mxfp4_matvec_ref, wlm_mxfp4_matvec_simd},
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
