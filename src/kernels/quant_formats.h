/*
 * quant_formats.h — internal to src/kernels/: the element conversions of the ggml block formats
 * (to_float / from_float of wlm_type_traits) that quant_blocks32.c and quant_kquants.c define
 * for the type table in quant.c, and the bit and rounding helpers the three share. Each
 * conversion takes n elements, a multiple of its block size (32 or WLM_QK_K); from_float rounds
 * as ggml's quantize_row_*_ref, to_float is ggml's dequantize_row_* (the formats:
 * ggml/src/ggml-common.h and ggml-quants.c).
 */
#ifndef WLM_QUANT_FORMATS_H
#define WLM_QUANT_FORMATS_H

#include <math.h>
#include <stdint.h>
#include <string.h>

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

/* 32-element blocks (quant_blocks32.c; MXFP4 included) */
void wlm_q8_0_to_float(const void *src, float *dst, int64_t n);
void wlm_q8_1_to_float(const void *src, float *dst, int64_t n);
void wlm_q4_0_to_float(const void *src, float *dst, int64_t n);
void wlm_q4_0_from_float(const float *x, void *dst, int64_t n);
void wlm_q4_1_to_float(const void *src, float *dst, int64_t n);
void wlm_q4_1_from_float(const float *x, void *dst, int64_t n);
void wlm_q5_0_to_float(const void *src, float *dst, int64_t n);
void wlm_q5_0_from_float(const float *x, void *dst, int64_t n);
void wlm_q5_1_to_float(const void *src, float *dst, int64_t n);
void wlm_q5_1_from_float(const float *x, void *dst, int64_t n);
void wlm_mxfp4_to_float(const void *src, float *dst, int64_t n);
void wlm_mxfp4_from_float(const float *x, void *dst, int64_t n);

/* K-quants, 256-element super-blocks (quant_kquants.c) */
void wlm_q8_K_to_float(const void *src, float *dst, int64_t n);
void wlm_q2_K_to_float(const void *src, float *dst, int64_t n);
void wlm_q2_K_from_float(const float *x, void *dst, int64_t n);
void wlm_q3_K_to_float(const void *src, float *dst, int64_t n);
void wlm_q3_K_from_float(const float *x, void *dst, int64_t n);
void wlm_q4_K_to_float(const void *src, float *dst, int64_t n);
void wlm_q4_K_from_float(const float *x, void *dst, int64_t n);
void wlm_q5_K_to_float(const void *src, float *dst, int64_t n);
void wlm_q5_K_from_float(const float *x, void *dst, int64_t n);
void wlm_q6_K_to_float(const void *src, float *dst, int64_t n);
void wlm_q6_K_from_float(const float *x, void *dst, int64_t n);

#endif
