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

#endif
