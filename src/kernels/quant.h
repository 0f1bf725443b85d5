/*
 * quant.h — internal: tensor element types with ggml's ids and block layouts, so GGUF tensor
 * data is used in place, and the type-traits table (block size, bytes per block, dequantize,
 * quantize, and the matrix-vector kernels of each kernel set). A matrix-vector product with a
 * quantized weight first quantizes the activation vector once into the type's `vec_dot_type`
 * (Q8_0 blocks for Q4_0/Q5_0/Q8_0/MXFP4, Q8_1 for Q4_1/Q5_1, Q8_K for the K-quants; F16 and BF16
 * take the float vector) and then runs integer dot products. Q8_1 is Q8_0 plus s = fp16(d * sum
 * of the quants), d the unrounded scale: the min term of Q4_1/Q5_1 is m * s, as ggml computes it.
 * Layouts follow ggml (ggml-common.h); the static_asserts pin them.
 */
#ifndef WASMLM_QUANT_H
#define WASMLM_QUANT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

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
    WLM_TYPE_MXFP4 = 39,
    WLM_TYPE_COUNT = 40
};

#define WLM_QK8_0 32
#define WLM_QK4_0 32
#define WLM_QK_K 256
#define WLM_QK_MXFP4 32

typedef uint16_t wlm_fp16; /* IEEE 754 binary16 bits */

typedef struct {
    wlm_fp16 d;                 /* scale */
    int8_t qs[WLM_QK8_0];       /* value = qs[i] * d */
} wlm_block_q8_0;

typedef struct {
    wlm_fp16 d;                 /* scale */
    wlm_fp16 s;                 /* fp16(d * sum of qs), d before its rounding to fp16 */
    int8_t qs[WLM_QK8_0];       /* value = qs[i] * d */
} wlm_block_q8_1;

typedef struct {
    wlm_fp16 d;                 /* scale */
    uint8_t qs[WLM_QK4_0 / 2];  /* element j: low nibble of qs[j]; element j+16: high nibble;
                                   value = (nibble - 8) * d */
} wlm_block_q4_0;

typedef struct {
    wlm_fp16 d;                 /* scale */
    wlm_fp16 m;                 /* min */
    uint8_t qs[WLM_QK4_0 / 2];  /* nibbles as in Q4_0; value = nibble * d + m */
} wlm_block_q4_1;

typedef struct {
    wlm_fp16 d;                 /* scale */
    uint8_t qh[4];              /* bit j of the little-endian uint32: bit 4 of element j */
    uint8_t qs[WLM_QK4_0 / 2];  /* low 4 bits, nibbles as in Q4_0; value = (q5 - 16) * d */
} wlm_block_q5_0;

typedef struct {
    wlm_fp16 d;                 /* scale */
    wlm_fp16 m;                 /* min */
    uint8_t qh[4];              /* as in Q5_0 */
    uint8_t qs[WLM_QK4_0 / 2];  /* as in Q5_0; value = q5 * d + m */
} wlm_block_q5_1;

typedef struct {
    uint8_t scales[WLM_QK_K / 16]; /* 16 sub-blocks of 16: scale (low nibble), min (high) */
    uint8_t qs[WLM_QK_K / 4];   /* 2-bit quants: element 32j + l of each 128-element half h is
                                   bits 2j..2j+1 of qs[32h + l]; value = d*sc*q - dmin*m */
    wlm_fp16 d;                 /* super-block scale for the scales */
    wlm_fp16 dmin;              /* super-block scale for the mins */
} wlm_block_q2_K;

typedef struct {
    uint8_t hmask[WLM_QK_K / 8]; /* bit 4h + j of hmask[l]: high bit of element 128h + 32j + l */
    uint8_t qs[WLM_QK_K / 4];   /* low 2 bits, placed as in Q2_K */
    uint8_t scales[12];         /* 16 6-bit scales, offset 32, packed (wlm_q3_K_scale) */
    wlm_fp16 d;                 /* super-block scale; value = d * (sc - 32) * (q3 - 4) where
                                   q3 = low2 + 4 * high bit */
} wlm_block_q3_K;

typedef struct {
    wlm_fp16 d;                 /* super-block scale for the 6-bit scales */
    wlm_fp16 dmin;              /* super-block scale for the 6-bit mins */
    uint8_t scales[12];         /* packed as in Q4_K */
    uint8_t qh[WLM_QK_K / 8];   /* bit s of qh[l]: bit 4 of element 32s + l */
    uint8_t qs[WLM_QK_K / 2];   /* low 4 bits, placed as in Q4_K; value = d*sc*q5 - dmin*m */
} wlm_block_q5_K;

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

/* MXFP4 (OCP Microscaling FP4, E2M1 elements with a shared E8M0 exponent; ggml's block_mxfp4):
 * value of element j = wlm_mxfp4_kvalues[code] * wlm_e8m0_to_fp32_half(e), code the low nibble
 * of qs[j] (j < 16) or the high nibble of qs[j - 16]. */
typedef struct {
    uint8_t e;                  /* E8M0 shared exponent: 2^(e - 127) */
    uint8_t qs[WLM_QK_MXFP4 / 2]; /* element j: low nibble of qs[j]; element j+16: high nibble */
} wlm_block_mxfp4;

typedef struct {
    float d;                    /* scale */
    int8_t qs[WLM_QK_K];        /* quants */
    int16_t bsums[WLM_QK_K / 16]; /* sums of groups of 16 quants */
} wlm_block_q8_K;

_Static_assert(sizeof(wlm_block_q8_0) == 34, "ggml block_q8_0 layout");
_Static_assert(sizeof(wlm_block_q8_1) == 36, "ggml block_q8_1 layout");
_Static_assert(sizeof(wlm_block_q4_0) == 18, "ggml block_q4_0 layout");
_Static_assert(sizeof(wlm_block_q4_K) == 144, "ggml block_q4_K layout");
_Static_assert(sizeof(wlm_block_q6_K) == 210, "ggml block_q6_K layout");
_Static_assert(sizeof(wlm_block_q8_K) == 292, "ggml block_q8_K layout");
_Static_assert(sizeof(wlm_block_q4_1) == 20, "ggml block_q4_1 layout");
_Static_assert(sizeof(wlm_block_q5_0) == 22, "ggml block_q5_0 layout");
_Static_assert(sizeof(wlm_block_q5_1) == 24, "ggml block_q5_1 layout");
_Static_assert(sizeof(wlm_block_q2_K) == 84, "ggml block_q2_K layout");
_Static_assert(sizeof(wlm_block_q3_K) == 110, "ggml block_q3_K layout");
_Static_assert(sizeof(wlm_block_q5_K) == 176, "ggml block_q5_K layout");
_Static_assert(sizeof(wlm_block_mxfp4) == 17, "ggml block_mxfp4 layout");

/* The E2M1 values doubled, by 4-bit code (ggml's kvalues_mxfp4): 0, 0.5, 1, 1.5, 2, 3, 4, 6 and
 * their negatives, times 2, so that they are integers (the int8 dot products take them as they
 * are) and the block scale is halved to match (wlm_e8m0_to_fp32_half). */
extern const int8_t wlm_mxfp4_kvalues[16];

/* Half the E8M0 scale 2^(e - 127), i.e. 2^(e - 128), as ggml's ggml_e8m0_to_fp32_half: the
 * float with bits (e - 1) << 23 for e >= 2, and for e = 0 and 1 the subnormals 2^-128 and 2^-127
 * (bits 0x00200000 << e). e = 255 gives 2^127 (ggml reads no NaN code). Exact. */
static inline float wlm_e8m0_to_fp32_half(uint8_t e) {
    const uint32_t u = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

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

/* Vector constants of the SIMD kernels (quant_simd.c), in memory (quant.c): LLVM cannot fold a
 * constant defined in another unit, so it loads one once per function and keeps it in a
 * register, where a v128.const of the kernel's own would be rebuilt by V8 at every use (a 64-bit
 * immediate, vmovq and an unpack: three x64 instructions; `node --print-wasm-code`). Each field
 * is one 16-byte vector, named by its lanes, aligned (no load splits a cache line). */
typedef struct wlm_simd_consts {
    _Alignas(16) int16_t i16_one[8]; /* int16 1s: the split int8 dot's widening */
    uint32_t f32_sign[4];     /* 0x80000000 */
    uint32_t f16_rebias[4];   /* 0x70000000: (h << 17 >> 4) + this = the float's bits x 2^112 */
    float f32_2m112[4];       /* 2^-112 */
    uint32_t f32_half_bits[4]; /* 0x3f000000: 0.5's bits, the subnormals' base */
    float f32_half[4];        /* 0.5 */
    int32_t f16_min_normal[4]; /* 0x400: the smallest normal half's magnitude */
    uint32_t f16_exp_hi[4];   /* 0x7C000000: a half's exponent in the high half of a lane */
    uint32_t f16_normal_mask[4]; /* 0x8FFFE000: f16_normal's sign and payload after >> 3 */
    uint32_t f16_normal_bias[4]; /* 0x38000000: 112 << 23 */
    uint8_t u8_0f[16];        /* 0x0F: a low nibble */
    uint8_t u8_10[16];        /* 0x10: Q5's fifth bit */
    uint8_t u8_80[16];        /* 0x80: Q8_0's offset in the batch panels */
    uint8_t u8_30[16];        /* 0x30: Q6_K's top two bits */
    uint8_t u8_03[16];        /* 0x03: Q2_K's and Q3_K's low two bits */
    uint8_t u8_04[16];        /* 0x04: Q3_K's top bit */
    uint8_t u8_bit[16];       /* 1, 2, 4, ..., 128, twice: bit j of a byte on lane j % 8 */
    uint8_t u8_q5_s0[16];     /* byte indices 0 x 8, 1 x 8: a Q5 qh's bytes 0..1 spread */
    uint8_t u8_q5_s1[16];     /* byte indices 2 x 8, 3 x 8: its bytes 2..3 */
    uint16_t u16_000f[8];     /* 0x000F */
    uint16_t u16_00ff[8];     /* 0x00FF: the even bytes */
    uint16_t u16_ff00[8];     /* 0xFF00: the odd bytes */
    int8_t i8_mxfp4[16];      /* wlm_mxfp4_kvalues: an MXFP4 code's int8 value, by swizzle */
    uint8_t u8_mxfp4_12[16];  /* the same plus 12 (0..24): the relaxed dots' unsigned operand */
} wlm_simd_consts;
extern const wlm_simd_consts wlm_simd_k;

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
 * - BF16: the float's high 16 bits rounded to nearest even (NaN kept quiet), as ggml.
 * - Q4_1 / Q5_1: per block of 32 d = (max - min) / 15 (31), m = min, q = trunc((x - min) / d +
 *   0.5) capped at 15 (31); value = q * d + m. ggml's reference.
 * - Q5_0: d = m / -16 where m is the block's value of largest magnitude, q = min(31, trunc(x / d
 *   + 16.5)); value = (q - 16) * d. ggml's reference.
 * - Q5_K: Q4_K's algorithm with levels 0..31 (ggml's reference search grid for Q5_K).
 * - Q3_K: per 16-element sub-block a signed scale over levels -4..3 fitted by weighted least
 *   squares (weights x^2) with ggml's make_q3_quants refinement, quantized to 6 bits (-32..31)
 *   against the super-block's fp16 d; value = d * sc * (q - 4).
 * - Q2_K: per 16-element sub-block a (scale, min) fit over levels 0..3 weighted by |x| with
 *   absolute errors (ggml's make_qkx2_quants with its mad option), both quantized to 4 bits
 *   against fp16 d and dmin; value = d*sc*q - dmin*m. These follow the algorithms of ggml's
 *   reference quantizers (quantize_row_*_ref; byte-identity with llama.cpp's output is not
 *   checked here), not its importance-matrix variants; measured rms error of
 *   quantize-then-dequantize on Gaussian data (tests/c/test_quant.c): Q2_K 0.297, Q3_K 0.152,
 *   Q4_K 0.070, Q5_K 0.036, Q6_K 0.018, Q4_0 0.088, Q4_1 0.078, Q5_0 0.043, Q5_1 0.039, of
 *   the rms value.
 * - Q8_1 (activations for Q4_1 / Q5_1): Q8_0's d and quants, plus s = fp16((float)(sum of the
 *   quants) * d) with d = max|x| / 127 before its rounding to fp16 (ggml's quantize_row_q8_1_ref,
 *   which llama.cpp's wasm build runs).
 * - MXFP4: per block of 32 e = floor(log2(max |x|)) - 2 + 127 (0 for an all-zero block; clamped
 *   to 0..254), then each element the code whose value K[code] * 2^(e - 128) is nearest (the
 *   lowest code on a tie), ggml's quantize_row_mxfp4_ref.
 * - Q8_K (activations for the K-quants): d = -max/127 in float where max is the element of
 *   largest magnitude, q = round(x / d) (half to even), plus the sums of each 16 quants.
 * The SIMD quantizers of Q8_0 and Q8_K write exactly the reference's bytes for finite input.
 *
 * Matrix-vector kernels (wlm_qmatvec_fn): per block an exact integer dot product of the weight
 * quants with the activation quants, then the block's float step. Q8_0, Q4_0, Q5_0 (Q8_0
 * activations) and Q4_1 / Q5_1 (Q8_1 activations) do ggml's generic arithmetic exactly, in every
 * build (the same bits for any row length): per block, in block order over the whole row,
 *   Q8_0       sum += (float)isum * (dw * dx)
 *   Q4_0       sum += ((float)isum * dw) * dx
 *   Q5_0       sum += (dw * dx) * (float)isum
 *   Q4_1/Q5_1  sum += (dw * dx) * (float)isum + m * s
 *   MXFP4      sum += (dx * dw) * (float)isum, dw = 2^(e - 128), isum over K[code] * q
 * (ggml_vec_dot_q8_0_q8_0, q4_0_q8_0, q5_0_q8_0, q4_1_q8_1, q5_1_q8_1, mxfp4_q8_0: the functions
 * llama.cpp's wasm build runs — it compiles ggml's C fallbacks, not its wasm intrinsics). The K-quant SIMD
 * kernels give the references' bits for rows of up to WLM_QUANT_XCHUNK columns (longer rows:
 * column chunks' sums added, the order of those additions differs). F16 / BF16: float dot
 * products, the SIMD versions with four-lane partial sums.
 */
void wlm_quantize_q8_0_ref(const float *x, void *dst, int64_t n);
void wlm_quantize_q8_0_simd(const float *x, void *dst, int64_t n);
void wlm_quantize_q8_K_ref(const float *x, void *dst, int64_t n);
void wlm_quantize_q8_1_ref(const float *x, void *dst, int64_t n);
void wlm_quantize_q8_1_simd(const float *x, void *dst, int64_t n);
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
void wlm_bf16_matvec_ref(float *out, const void *w, size_t row_bytes, const void *x, int n,
                         int r0, int r1);
void wlm_q4_1_matvec_ref(float *out, const void *w, size_t row_bytes, const void *xq, int n,
                         int r0, int r1);
void wlm_q5_0_matvec_ref(float *out, const void *w, size_t row_bytes, const void *xq, int n,
                         int r0, int r1);
void wlm_q5_1_matvec_ref(float *out, const void *w, size_t row_bytes, const void *xq, int n,
                         int r0, int r1);
void wlm_q2_K_matvec_ref(float *out, const void *w, size_t row_bytes, const void *xq, int n,
                         int r0, int r1);
void wlm_q3_K_matvec_ref(float *out, const void *w, size_t row_bytes, const void *xq, int n,
                         int r0, int r1);
void wlm_q5_K_matvec_ref(float *out, const void *w, size_t row_bytes, const void *xq, int n,
                         int r0, int r1);
void wlm_mxfp4_matvec_ref(float *out, const void *w, size_t row_bytes, const void *xq, int n,
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
void wlm_bf16_matvec_simd(float *out, const void *w, size_t row_bytes, const void *x, int n,
                          int r0, int r1);
void wlm_q4_1_matvec_simd(float *out, const void *w, size_t row_bytes, const void *xq, int n,
                          int r0, int r1);
void wlm_q5_0_matvec_simd(float *out, const void *w, size_t row_bytes, const void *xq, int n,
                          int r0, int r1);
void wlm_q5_1_matvec_simd(float *out, const void *w, size_t row_bytes, const void *xq, int n,
                          int r0, int r1);
void wlm_q2_K_matvec_simd(float *out, const void *w, size_t row_bytes, const void *xq, int n,
                          int r0, int r1);
void wlm_q3_K_matvec_simd(float *out, const void *w, size_t row_bytes, const void *xq, int n,
                          int r0, int r1);
void wlm_q5_K_matvec_simd(float *out, const void *w, size_t row_bytes, const void *xq, int n,
                          int r0, int r1);
void wlm_mxfp4_matvec_simd(float *out, const void *w, size_t row_bytes, const void *xq, int n,
                           int r0, int r1);

/* 1 when quant_simd.c was compiled with SIMD128, else 0 (the *_simd names are the refs). */
int wlm_quant_have_simd(void);

/* Columns a SIMD matrix-vector kernel takes in one pass (XCHUNK of quant_simd/common.h): longer
 * rows go in chunks of this many, and a K-quant row's result is then the sum of its chunks' sums
 * (the scalar reference sums all blocks in one run), so the K-quant kernels give the reference's
 * bits for rows up to this long. The matrix-matrix kernels of the K-quants chunk their rows the
 * same way (their bits are the matrix-vector kernel's); the 32-element types carry one running sum
 * across chunks, so theirs do not depend on it. */
#define WLM_QUANT_XCHUNK 16384

/* 1 when quant_simd.c was compiled with relaxed SIMD (-mrelaxed-simd: the quantized kernels of
 * quant_simd/relaxed_*.inc, bitwise the SIMD128 results), else 0. */
int wlm_quant_have_relaxed(void);

/* The SIMD128 matrix-vector kernel of a weight type, in every build (in the relaxed-SIMD build
 * the traits' matvec_simd is its relaxed twin, which must give the same bits: the tests compare
 * the two); the traits' matvec_simd for types without a relaxed twin. */
wlm_qmatvec_fn wlm_quant_matvec_simd128(int32_t type);

/*
 * A weight matrix-matrix product for a batch of `ne` entries: for e in [0, ne) and r in [r0, r1),
 * out[e * out_stride + r] = dot(row r of w, entry e's activation at xq + e * x_stride bytes) —
 * bitwise what the type's matvec_simd gives for each entry alone. out_stride in floats.
 */
typedef void (*wlm_qmatmat_fn)(float *out, size_t out_stride, const void *w, size_t row_bytes,
                               const void *xq, size_t x_stride, int n, int r0, int r1, int ne);

/* The matrix-matrix kernel of a weight type in this build, or NULL where there is none (then a
 * batch runs matvec_simd per entry): the relaxed-SIMD build has Q8_0, Q4_0, Q5_0, Q4_1, Q5_1 and
 * MXFP4 ones (quant_simd/relaxed_blocks32.inc: panels of four rows, or two rows x four entries
 * per step, ggml's float steps four lanes at once) and Q2_K, Q3_K, Q4_K, Q5_K and Q6_K ones (one
 * row x four entries); the SIMD128 build has Q8_0, Q4_0, Q5_0 and MXFP4 panels
 * (blocks32_panel.inc); other types (F16, BF16) and the scalar build have none. */
wlm_qmatmat_fn wlm_quant_matmat_simd(int32_t type);

/* For a type whose matrix-matrix kernels (wlm_quant_matmat_simd and _split) work by panels
 * (Q4_0, Q5_0, Q8_0; MXFP4 in SIMD128): how many entries they prepare together (each entry's block sums and
 * scales, once per call and group) before they stream them past each four-row panel, which stays
 * in L1 — 64 in the relaxed build, 16 in SIMD128. A caller with at most that many entries gains
 * nothing from cutting the rows into tiles (forward.c's tile_rows) and pays a preparation per
 * tile. 0 for other types and in the scalar build. */
int wlm_quant_matmat_group(int32_t type);

/* The relaxed-SIMD build's kernels again with each int8 dot product in the split form
 * (quant_relaxed_split.c: i16x8 relaxed dot, then i32x4.dot_i16x8 by ones, then add — bitwise
 * the fused form's results, faster where V8 lowers the fused instruction to several, slower
 * where it is one): the matrix-vector kernel of a weight type and its matrix-matrix kernel, for
 * the same types as the traits' relaxed matvec_simd and wlm_quant_matmat_simd. NULL in the
 * other builds and for other types. A context picks them with dot_form WLM_DOT_SPLIT. */
wlm_qmatvec_fn wlm_quant_matvec_split(int32_t type);
wlm_qmatmat_fn wlm_quant_matmat_split(int32_t type);

/* The same matrix-vector kernels without their read-ahead (quant_simd.c: the quantized loops
 * touch each row stream some blocks ahead, which an Intel Xeon gained from and an AMD Zen 4 lost
 * by), bit for bit their results: the traits' matvec_simd of the build's form (relaxed or
 * SIMD128) and wlm_quant_matvec_split's. NULL in the scalar build and for types without one (F16,
 * BF16). A context picks them with read_ahead 0. */
wlm_qmatvec_fn wlm_quant_matvec_near(int32_t type);
wlm_qmatvec_fn wlm_quant_matvec_split_near(int32_t type);

/* The dot-form probe: `iters` matrix-vector products of a 32 x 512 Q8_0 matrix (17 KiB, in L1)
 * by one activation, with the relaxed kernels of the form `form` (WLM_DOT_FUSED, WLM_DOT_SPLIT);
 * with `batch`, instead `iters` times the matrix-matrix products of that matrix and of a
 * 128 x 512 Q5_0 one (44 KiB) by four activations (the batch kernels, whose split form also keeps
 * the level types' sums in int16: a form of its own, dot_form_batch). The caller times it
 * (js/runtime/dot_form.js: the faster form, at the first load). Returns a checksum of the results, >= 0
 * (so nothing is optimised away; the same for both forms), or -1 where that form does not exist
 * (not the relaxed build, or an unknown form) or the memory (at most 66 KiB) cannot be
 * allocated. */
double wlm_quant_dot_probe(int32_t form, int32_t batch, int32_t iters);

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

/* The signed scale (-32..31) of sub-block j (0..15) of a Q3_K block's 12 packed bytes: low 4
 * bits in the low (j < 8) or high (j >= 8) nibble of byte j % 8, high 2 bits at bits
 * 2 * (j / 4) of byte 8 + j % 4; stored with an offset of 32. */
static inline int wlm_q3_K_scale(const uint8_t *s, int j) {
    const int lo = j < 8 ? s[j] & 0xF : s[j - 8] >> 4;
    const int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (lo | (hi << 4)) - 32;
}

/* binary32 <-> bfloat16 (the high half of the float's bits): up exactly; down rounded to
 * nearest even, NaN kept quiet (ggml's rounding). */
static inline float wlm_bf16_to_fp32(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

#endif
