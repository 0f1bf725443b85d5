/*
 * quant.h — internal: tensor element types with ggml's ids and block layouts, so GGUF tensor
 * data is used in place, and the type-traits table (block size, bytes per block, dequantize,
 * quantize, and the matrix-vector kernels of each kernel set). A matrix-vector product with a
 * quantized weight first quantizes the activation vector once into the type's `vec_dot_type`
 * (Q8_0 blocks for Q4_0/Q8_0, Q8_K for the K-quants) and then runs integer dot products.
 * Layouts follow ggml (ggml-common.h); the static_asserts pin them.
 */
#ifndef WASMLM_QUANT_H
#define WASMLM_QUANT_H

#include <stddef.h>
#include <stdint.h>

/* Element types; the values are ggml's (GGML_TYPE_*), as stored in GGUF tensor infos. */
enum wlm_type {
    WLM_TYPE_F32 = 0,
    WLM_TYPE_F16 = 1,
    WLM_TYPE_Q4_0 = 2,
    WLM_TYPE_Q4_1 = 3,
    WLM_TYPE_Q5_0 = 6,
    WLM_TYPE_Q5_1 = 7,
    WLM_TYPE_Q8_0 = 8,
    WLM_TYPE_Q8_1 = 9,
    WLM_TYPE_Q2_K = 10,
    WLM_TYPE_Q3_K = 11,
    WLM_TYPE_Q4_K = 12,
    WLM_TYPE_Q5_K = 13,
    WLM_TYPE_Q6_K = 14,
    WLM_TYPE_Q8_K = 15,
    WLM_TYPE_BF16 = 30,
    WLM_TYPE_COUNT = 40
};

#define WLM_QK8_0 32
#define WLM_QK4_0 32
#define WLM_QK_K 256

typedef uint16_t wlm_fp16; /* IEEE 754 binary16 bits */

typedef struct {
    wlm_fp16 d;                 /* scale */
    int8_t qs[WLM_QK8_0];       /* value = qs[i] * d */
} wlm_block_q8_0;

typedef struct {
    wlm_fp16 d;                 /* scale */
    uint8_t qs[WLM_QK4_0 / 2];  /* element j: low nibble of qs[j]; element j+16: high nibble;
                                   value = (nibble - 8) * d */
} wlm_block_q4_0;

typedef struct {
    wlm_fp16 d;                 /* super-block scale for the 6-bit scales */
    wlm_fp16 dmin;              /* super-block scale for the 6-bit mins */
    uint8_t scales[12];         /* 8 sub-blocks of 32: 6-bit scale and min each, packed */
    uint8_t qs[WLM_QK_K / 2];   /* 4-bit quants */
} wlm_block_q4_K;

typedef struct {
    uint8_t ql[WLM_QK_K / 2];   /* low 4 bits of the 6-bit quants */
    uint8_t qh[WLM_QK_K / 4];   /* high 2 bits */
    int8_t scales[WLM_QK_K / 16]; /* 16 sub-blocks of 16: 8-bit scales */
    wlm_fp16 d;                 /* super-block scale */
} wlm_block_q6_K;

typedef struct {
    float d;                    /* scale */
    int8_t qs[WLM_QK_K];        /* quants */
    int16_t bsums[WLM_QK_K / 16]; /* sums of groups of 16 quants */
} wlm_block_q8_K;

_Static_assert(sizeof(wlm_block_q8_0) == 34, "ggml block_q8_0 layout");
_Static_assert(sizeof(wlm_block_q4_0) == 18, "ggml block_q4_0 layout");
_Static_assert(sizeof(wlm_block_q4_K) == 144, "ggml block_q4_K layout");
_Static_assert(sizeof(wlm_block_q6_K) == 210, "ggml block_q6_K layout");
_Static_assert(sizeof(wlm_block_q8_K) == 292, "ggml block_q8_K layout");

/*
 * A weight matrix-vector product for one weight type: out[r] = dot(row r of w, x) for r in
 * [r0, r1). `w` points at row 0; rows are `row_bytes` apart. `xq` is the activation vector
 * already converted to the type's vec_dot_type (for F32/F16 weights: the float vector itself);
 * n is the row length in elements.
 */
typedef void (*wlm_qmatvec_fn)(float *out, const void *w, size_t row_bytes, const void *xq, int n,
                               int r0, int r1);

typedef struct wlm_type_traits {
    const char *name;          /* "Q8_0"; NULL for ids this library does not know */
    int32_t block_size;        /* elements per block (1 for F32/F16) */
    size_t type_size;          /* bytes per block */
    int supported;             /* 1 when tensors of this type can be used as weights */
    int32_t vec_dot_type;      /* what x is converted to before the product */
    /* dequantize n elements (a multiple of block_size) to float */
    void (*to_float)(const void *src, float *dst, int64_t n);
    /* quantize n elements (a multiple of block_size) from float; NULL if not offered */
    void (*from_float)(const float *src, void *dst, int64_t n);
    wlm_qmatvec_fn matvec_ref;  /* scalar reference */
    wlm_qmatvec_fn matvec_simd; /* SIMD128 version (== matvec_ref without SIMD) */
} wlm_type_traits;

/* Traits of a type id; a zeroed entry (name NULL) for unknown ids, including out-of-range. */
const wlm_type_traits *wlm_type_get(int32_t type);

/* Bytes of a row of n elements of `type` (n must be a multiple of the block size), 0 if not. */
size_t wlm_row_bytes(int32_t type, int64_t n);

/* binary16 <-> binary32, exact (round to nearest even on the way down). */
float wlm_fp16_to_fp32(wlm_fp16 h);
wlm_fp16 wlm_fp32_to_fp16(float f);

/*
 * The kernels behind the table, by name, for the tests and the benchmark. Every
 * `*_simd` function exists in every build: without -msimd128 it is its `*_ref` twin.
 *
 * Quantizers (from_float), n a multiple of the block size:
 * - Q8_0 (activations and weights): d = max|x| / 127 per block of 32, q = round(x / d) (half
 *   away from zero), d stored as fp16.
 * - Q4_0: d = m / -8 where m is the block's value of largest magnitude, q = min(15, (int)(x/d +
 *   8.5)), stored as nibbles (element j low, j+16 high); value = (q - 8) * d.
 * - Q4_K: per 32-element sub-block a scale and a min fitted by weighted least squares over a
 *   small grid of candidate steps (ggml's reference algorithm), both quantized to 6 bits against
 *   the super-block's fp16 d and dmin; q in 0..15; value = d*sc*q - dmin*m.
 * - Q6_K: per 16-element sub-block a signed scale fitted by weighted least squares (weights x^2)
 *   over candidate steps, quantized to int8 against the super-block's fp16 d; q in 0..63;
 *   value = d * sc * (q - 32).
 * - Q8_K (activations for the K-quants): d = -max/127 in float where max is the element of
 *   largest magnitude, q = round(x / d) (half to even), plus the sums of each 16 quants.
 * The SIMD quantizers of Q8_0 and Q8_K write exactly the reference's bytes for finite input.
 *
 * Matrix-vector kernels (wlm_qmatvec_fn): per block an exact integer dot product of the weight
 * quants with the activation quants, then one float multiply by the block's scales; the SIMD
 * versions differ from the references only in the order of the float additions.
 */
void wlm_quantize_q8_0_ref(const float *x, void *dst, int64_t n);
void wlm_quantize_q8_0_simd(const float *x, void *dst, int64_t n);
void wlm_quantize_q8_K_ref(const float *x, void *dst, int64_t n);
void wlm_quantize_q8_K_simd(const float *x, void *dst, int64_t n);

void wlm_f16_matvec_ref(float *out, const void *w, size_t row_bytes, const void *x, int n, int r0,
                        int r1);
void wlm_q8_0_matvec_ref(float *out, const void *w, size_t row_bytes, const void *xq, int n,
                         int r0, int r1);
void wlm_q4_0_matvec_ref(float *out, const void *w, size_t row_bytes, const void *xq, int n,
                         int r0, int r1);
void wlm_q4_K_matvec_ref(float *out, const void *w, size_t row_bytes, const void *xq, int n,
                         int r0, int r1);
void wlm_q6_K_matvec_ref(float *out, const void *w, size_t row_bytes, const void *xq, int n,
                         int r0, int r1);

void wlm_f16_matvec_simd(float *out, const void *w, size_t row_bytes, const void *x, int n,
                         int r0, int r1);
void wlm_q8_0_matvec_simd(float *out, const void *w, size_t row_bytes, const void *xq, int n,
                          int r0, int r1);
void wlm_q4_0_matvec_simd(float *out, const void *w, size_t row_bytes, const void *xq, int n,
                          int r0, int r1);
void wlm_q4_K_matvec_simd(float *out, const void *w, size_t row_bytes, const void *xq, int n,
                          int r0, int r1);
void wlm_q6_K_matvec_simd(float *out, const void *w, size_t row_bytes, const void *xq, int n,
                          int r0, int r1);

/* 1 when quant_simd.c was compiled with SIMD128, else 0 (the *_simd names are the refs). */
int wlm_quant_have_simd(void);

/* The 6-bit scale and min of sub-block j (0..7) of a Q4_K block's 12 packed bytes. */
static inline void wlm_q4_K_scale_min(const uint8_t *s, int j, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (uint8_t)((s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4));
        *m = (uint8_t)((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
    }
}

#endif
