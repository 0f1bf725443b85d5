/*
 * quant_simd.c — the SIMD kernels of the quantized weight types, one compilation unit per build:
 * the matrix-vector products (decode) of F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, MXFP4, Q2_K,
 * Q3_K, Q4_K, Q5_K and Q6_K, the matrix-matrix products (prefill, batches) where they pay, and the
 * Q8_0 / Q8_1 / Q8_K activation quantizers; this file composes them from quant_simd/ and picks,
 * per type, what the public names of quant.h return. Without -msimd128 every function forwards to
 * its scalar twin in quant_blocks32.c / quant_kquants.c (the float types': quant.c).
 *
 * The parts, by noun, in the order they build on each other:
 *   quant_simd/common.h            chunk sizes, read-ahead distances, horizontal sums, fp16
 *                                  conversions, the constants' table access (SIMD_K)
 *   quant_simd/float.inc           F16 and BF16 weights (float activations)
 *   quant_simd/activations.inc     the Q8_0 / Q8_1 / Q8_K quantizers and SIMD128's int16 copies
 *   quant_simd/blocks32.inc        SIMD128: Q8_0, Q4_0, Q5_0, MXFP4, Q4_1, Q5_1 (32-element), and
 *                                  the row loops every quantized kernel drives its rows with
 *   quant_simd/kquants.inc         SIMD128: Q2_K .. Q6_K (256-element super-blocks)
 *   quant_simd/blocks32_panel.inc  SIMD128 modules only: the matrix-matrix panels of Q8_0 / Q4_0
 *                                  / Q5_0
 *   quant_simd/relaxed*.{h,inc}    relaxed-SIMD modules only (-mrelaxed-simd): int8 dot products
 *                                  for every quantized type, matrix-vector and matrix-matrix,
 *                                  bitwise the SIMD128 results; quant_relaxed_split.c compiles
 *                                  this unit a second time with their split dot form
 * They are one unit, not several, because the relaxed kernels reuse the SIMD128 ones' inline
 * helpers and loop macros, and because tools/bench_relaxed_ab.sh and bench_matmat_ab.sh link
 * another revision's unit beside the work tree's under renamed public names.
 *
 * How the SIMD128 integer products go: the activation vector, already quantized to 8 bits, is
 * widened once per call to int16 on the stack (2 bytes a column), in the lane order that the
 * weights' unpacking produces; each weight row is then unpacked to int16 with and/shift only and
 * multiplied with i32x4.dot_i16x8, giving exact int32 sums per block, and the block's float scale
 * is applied once per block. Two or four rows go through each call (they share the activation
 * loads); the hot loops sit in functions called once per row group, which V8 tiers up quickly.
 *
 * Shaped by V8 (x64), measured with tools/bench_kernels.c and tools/bench_relaxed_ab.sh: TurboFan
 * hoists all the loads of a loop iteration to its top and rematerialises constants, so loops stay
 * at one block per iteration (unrolling spilled registers and ran slower); shuffles are written in
 * the lane patterns it maps to single punpck instructions.
 */
#include <math.h>
#include <string.h>

#include "kernels/quant.h"

#if defined(__wasm_simd128__)
#include <wasm_simd128.h>

#include "kernels/quant_simd/common.h"
#include "kernels/quant_simd/float.inc"
#include "kernels/quant_simd/activations.inc"
#include "kernels/quant_simd/blocks32.inc"
#include "kernels/quant_simd/kquants.inc"

/* ---- the public quantized kernels: SIMD128 or, in the relaxed-SIMD build (-mrelaxed-simd,
 * dist/wasmlm-relaxed*.wasm), quant_simd/relaxed_*.inc's twins, bitwise the same results ----- */

#if defined(__wasm_relaxed_simd__)
#define WLM_QUANT_RELAXED 1
#include "kernels/quant_simd/relaxed.h"
#include "kernels/quant_simd/relaxed_blocks32.inc"
#include "kernels/quant_simd/relaxed_kquants.inc"
#define PICK(t) rx_##t##_matvec
#define PICK_NEAR(t) rx_##t##_matvec_near
#else
#define WLM_QUANT_RELAXED 0
#include "kernels/quant_simd/blocks32_panel.inc"
#define PICK(t) s128_##t##_matvec
#define PICK_NEAR(t) s128_##t##_matvec_near
#endif

#if defined(WLM_QUANT_DOT_SPLIT)
/* quant_relaxed_split.c: this file again, with the relaxed kernels in the split dot
 * form; it defines only the two getters of those kernels (the same lists as the fused ones). */
#define wlm_quant_matmat_simd wlm_quant_matmat_split
wlm_qmatvec_fn wlm_quant_matvec_split(int32_t type) {
    switch (type) {
    case WLM_TYPE_Q8_0: return rx_q8_0_matvec;
    case WLM_TYPE_Q4_0: return rx_q4_0_matvec;
    case WLM_TYPE_Q4_1: return rx_q4_1_matvec;
    case WLM_TYPE_Q5_0: return rx_q5_0_matvec;
    case WLM_TYPE_Q5_1: return rx_q5_1_matvec;
    case WLM_TYPE_Q2_K: return rx_q2_K_matvec;
    case WLM_TYPE_Q3_K: return rx_q3_K_matvec;
    case WLM_TYPE_Q4_K: return rx_q4_K_matvec;
    case WLM_TYPE_Q5_K: return rx_q5_K_matvec;
    case WLM_TYPE_Q6_K: return rx_q6_K_matvec;
    case WLM_TYPE_MXFP4: return rx_mxfp4_matvec;
    default: return NULL;
    }
}
wlm_qmatvec_fn wlm_quant_matvec_split_near(int32_t type) {
    switch (type) {
    case WLM_TYPE_Q8_0: return rx_q8_0_matvec_near;
    case WLM_TYPE_Q4_0: return rx_q4_0_matvec_near;
    case WLM_TYPE_Q4_1: return rx_q4_1_matvec_near;
    case WLM_TYPE_Q5_0: return rx_q5_0_matvec_near;
    case WLM_TYPE_Q5_1: return rx_q5_1_matvec_near;
    case WLM_TYPE_Q2_K: return rx_q2_K_matvec_near;
    case WLM_TYPE_Q3_K: return rx_q3_K_matvec_near;
    case WLM_TYPE_Q4_K: return rx_q4_K_matvec_near;
    case WLM_TYPE_Q5_K: return rx_q5_K_matvec_near;
    case WLM_TYPE_Q6_K: return rx_q6_K_matvec_near;
    case WLM_TYPE_MXFP4: return rx_mxfp4_matvec_near;
    default: return NULL;
    }
}
#else
#define QUANT_ENTRY(t)                                                                             \
    void wlm_##t##_matvec_simd(float *out, const void *w, size_t row_bytes, const void *xq, int n, \
                               int r0, int r1) {                                                   \
        PICK(t)(out, w, row_bytes, xq, n, r0, r1);                                                 \
    }
QUANT_ENTRY(q8_0)
QUANT_ENTRY(q4_0)
QUANT_ENTRY(q4_1)
QUANT_ENTRY(q5_0)
QUANT_ENTRY(q5_1)
QUANT_ENTRY(q2_K)
QUANT_ENTRY(q3_K)
QUANT_ENTRY(q4_K)
QUANT_ENTRY(q5_K)
QUANT_ENTRY(q6_K)
QUANT_ENTRY(mxfp4)
#undef QUANT_ENTRY

wlm_qmatvec_fn wlm_quant_matvec_near(int32_t type) {
    switch (type) {
    case WLM_TYPE_Q8_0: return PICK_NEAR(q8_0);
    case WLM_TYPE_Q4_0: return PICK_NEAR(q4_0);
    case WLM_TYPE_Q4_1: return PICK_NEAR(q4_1);
    case WLM_TYPE_Q5_0: return PICK_NEAR(q5_0);
    case WLM_TYPE_Q5_1: return PICK_NEAR(q5_1);
    case WLM_TYPE_Q2_K: return PICK_NEAR(q2_K);
    case WLM_TYPE_Q3_K: return PICK_NEAR(q3_K);
    case WLM_TYPE_Q4_K: return PICK_NEAR(q4_K);
    case WLM_TYPE_Q5_K: return PICK_NEAR(q5_K);
    case WLM_TYPE_Q6_K: return PICK_NEAR(q6_K);
    case WLM_TYPE_MXFP4: return PICK_NEAR(mxfp4);
    default: return NULL;
    }
}
#undef PICK
#undef PICK_NEAR

wlm_qmatvec_fn wlm_quant_matvec_simd128(int32_t type) {
    switch (type) {
    case WLM_TYPE_Q8_0: return s128_q8_0_matvec;
    case WLM_TYPE_Q4_0: return s128_q4_0_matvec;
    case WLM_TYPE_Q4_1: return s128_q4_1_matvec;
    case WLM_TYPE_Q5_0: return s128_q5_0_matvec;
    case WLM_TYPE_Q5_1: return s128_q5_1_matvec;
    case WLM_TYPE_Q2_K: return s128_q2_K_matvec;
    case WLM_TYPE_Q3_K: return s128_q3_K_matvec;
    case WLM_TYPE_Q4_K: return s128_q4_K_matvec;
    case WLM_TYPE_Q5_K: return s128_q5_K_matvec;
    case WLM_TYPE_Q6_K: return s128_q6_K_matvec;
    case WLM_TYPE_MXFP4: return s128_mxfp4_matvec;
    default: return wlm_type_get(type)->matvec_simd;
    }
}

#endif /* WLM_QUANT_DOT_SPLIT */

wlm_qmatmat_fn wlm_quant_matmat_simd(int32_t type) {
#if !WLM_QUANT_RELAXED
    if (type == WLM_TYPE_Q8_0) return s128_q8_0_matmat;
    if (type == WLM_TYPE_Q4_0) return s128_q4_0_matmat;
    if (type == WLM_TYPE_Q5_0) return s128_q5_0_matmat;
    if (type == WLM_TYPE_MXFP4) return s128_mxfp4_matmat;
#else
    if (type == WLM_TYPE_Q8_0) return rx_q8_0_matmat;
    if (type == WLM_TYPE_Q4_0) return rx_q4_0_matmat;
    if (type == WLM_TYPE_Q5_0) return rx_q5_0_matmat;
    if (type == WLM_TYPE_Q4_K) return rx_q4_K_matmat;
    if (type == WLM_TYPE_Q6_K) return rx_q6_K_matmat;
    if (type == WLM_TYPE_Q4_1) return rx_q4_1_matmat;
    if (type == WLM_TYPE_Q5_1) return rx_q5_1_matmat;
    if (type == WLM_TYPE_Q2_K) return rx_q2_K_matmat;
    if (type == WLM_TYPE_Q3_K) return rx_q3_K_matmat;
    if (type == WLM_TYPE_Q5_K) return rx_q5_K_matmat;
    if (type == WLM_TYPE_MXFP4) return rx_mxfp4_matmat;
#endif
    (void)type;
    return NULL;
}

#if !defined(WLM_QUANT_DOT_SPLIT)
int wlm_quant_have_simd(void) { return 1; }

int wlm_quant_have_relaxed(void) { return WLM_QUANT_RELAXED; }

int wlm_quant_matmat_group(int32_t type) {
#if WLM_QUANT_RELAXED
    if (type != WLM_TYPE_Q4_0 && type != WLM_TYPE_Q5_0 && type != WLM_TYPE_Q8_0) return 0;
    return RX_PANEL_G;
#else
    if (type != WLM_TYPE_Q4_0 && type != WLM_TYPE_Q5_0 && type != WLM_TYPE_Q8_0 &&
        type != WLM_TYPE_MXFP4)
        return 0;
    return S128_PANEL_G;
#endif
}
#endif /* !WLM_QUANT_DOT_SPLIT */

#else /* no SIMD128: the scalar references */

void wlm_quantize_q8_0_simd(const float *x, void *dst, int64_t n) {
    wlm_quantize_q8_0_ref(x, dst, n);
}
void wlm_quantize_q8_K_simd(const float *x, void *dst, int64_t n) {
    wlm_quantize_q8_K_ref(x, dst, n);
}
void wlm_quantize_q8_1_simd(const float *x, void *dst, int64_t n) {
    wlm_quantize_q8_1_ref(x, dst, n);
}
void wlm_f16_matvec_simd(float *out, const void *w, size_t row_bytes, const void *x, int n, int r0,
                         int r1) {
    wlm_f16_matvec_ref(out, w, row_bytes, x, n, r0, r1);
}
void wlm_q8_0_matvec_simd(float *out, const void *w, size_t row_bytes, const void *xq, int n,
                          int r0, int r1) {
    wlm_q8_0_matvec_ref(out, w, row_bytes, xq, n, r0, r1);
}
void wlm_q4_0_matvec_simd(float *out, const void *w, size_t row_bytes, const void *xq, int n,
                          int r0, int r1) {
    wlm_q4_0_matvec_ref(out, w, row_bytes, xq, n, r0, r1);
}
void wlm_q4_K_matvec_simd(float *out, const void *w, size_t row_bytes, const void *xq, int n,
                          int r0, int r1) {
    wlm_q4_K_matvec_ref(out, w, row_bytes, xq, n, r0, r1);
}
void wlm_q6_K_matvec_simd(float *out, const void *w, size_t row_bytes, const void *xq, int n,
                          int r0, int r1) {
    wlm_q6_K_matvec_ref(out, w, row_bytes, xq, n, r0, r1);
}
void wlm_bf16_matvec_simd(float *out, const void *w, size_t row_bytes, const void *xq, int n,
                          int r0, int r1) {
    wlm_bf16_matvec_ref(out, w, row_bytes, xq, n, r0, r1);
}
void wlm_q4_1_matvec_simd(float *out, const void *w, size_t row_bytes, const void *xq, int n,
                          int r0, int r1) {
    wlm_q4_1_matvec_ref(out, w, row_bytes, xq, n, r0, r1);
}
void wlm_q5_0_matvec_simd(float *out, const void *w, size_t row_bytes, const void *xq, int n,
                          int r0, int r1) {
    wlm_q5_0_matvec_ref(out, w, row_bytes, xq, n, r0, r1);
}
void wlm_q5_1_matvec_simd(float *out, const void *w, size_t row_bytes, const void *xq, int n,
                          int r0, int r1) {
    wlm_q5_1_matvec_ref(out, w, row_bytes, xq, n, r0, r1);
}
void wlm_q2_K_matvec_simd(float *out, const void *w, size_t row_bytes, const void *xq, int n,
                          int r0, int r1) {
    wlm_q2_K_matvec_ref(out, w, row_bytes, xq, n, r0, r1);
}
void wlm_q3_K_matvec_simd(float *out, const void *w, size_t row_bytes, const void *xq, int n,
                          int r0, int r1) {
    wlm_q3_K_matvec_ref(out, w, row_bytes, xq, n, r0, r1);
}
void wlm_q5_K_matvec_simd(float *out, const void *w, size_t row_bytes, const void *xq, int n,
                          int r0, int r1) {
    wlm_q5_K_matvec_ref(out, w, row_bytes, xq, n, r0, r1);
}
void wlm_mxfp4_matvec_simd(float *out, const void *w, size_t row_bytes, const void *xq, int n,
                           int r0, int r1) {
    wlm_mxfp4_matvec_ref(out, w, row_bytes, xq, n, r0, r1);
}
int wlm_quant_have_simd(void) { return 0; }

wlm_qmatvec_fn wlm_quant_matvec_simd128(int32_t type) { return wlm_type_get(type)->matvec_simd; }

wlm_qmatvec_fn wlm_quant_matvec_near(int32_t type) {
    (void)type;
    return NULL;
}

wlm_qmatmat_fn wlm_quant_matmat_simd(int32_t type) {
    (void)type;
    return NULL;
}

int wlm_quant_have_relaxed(void) { return 0; }

int wlm_quant_matmat_group(int32_t type) {
    (void)type;
    return 0;
}

#endif

#if !defined(__wasm_relaxed_simd__) /* the relaxed build has them in quant_relaxed_split.c */
wlm_qmatvec_fn wlm_quant_matvec_split(int32_t type) {
    (void)type;
    return NULL;
}
wlm_qmatvec_fn wlm_quant_matvec_split_near(int32_t type) {
    (void)type;
    return NULL;
}
wlm_qmatmat_fn wlm_quant_matmat_split(int32_t type) {
    (void)type;
    return NULL;
}
#endif
