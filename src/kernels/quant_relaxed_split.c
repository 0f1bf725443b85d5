/*
 * quant_relaxed_split.c — the relaxed-SIMD integer kernels (quant_simd/relaxed_*.inc) a second
 * time, with each int8 dot product in the split form, for the machines where V8 lowers the fused
 * instruction to several (issue 14). Compiled only into the relaxed-SIMD modules
 * (dist/wasmlm-relaxed*.wasm, CMakeLists.txt), beside quant_simd.c, whose kernels keep the fused
 * form; a context picks one of the two (wlm_context_params.dot_form, src/model/forward.c).
 *
 * The two forms (RX_DOT in quant_simd/relaxed.h; a: 16 int8, b: 16 int8 in 0..127, c: 4 int32):
 *   fused  i32x4.relaxed_dot_i8x16_i7x16_add_s(a, b, c): one instruction where the CPU has an
 *          int8 dot (x64 AVX-VNNI vpdpbusd, arm64 sdot); on x64 without it, V8 emits pmaddubsw,
 *          pmaddwd by a ones vector it builds each time, and paddd (5-6 instructions).
 *   split  i32x4.add(i32x4.dot_i16x8_s(i16x8.relaxed_dot_i8x16_i7x16_s(a, b), ones), c), ones
 *          the int16 splat of 1, loaded from wlm_simd_k (a v128.const would be rebuilt at each
 *          dot: LLVM places one beside each use): 3 instructions everywhere.
 * Bitwise the same lanes: each int16 lane of the inner dot is a sum of two products of an int8
 * and an int8 in 0..127, at most 2 x 128 x 127 = 32512 in magnitude, so it neither saturates nor
 * wraps (the instruction's result is deterministic there), and the outer sums are exact int32.
 *
 * How: this file includes quant_simd.c, so the relaxed kernels see the same static helpers,
 * with WLM_QUANT_DOT_SPLIT set:
 * quant_simd.c then defines only the split kernels' getters, wlm_quant_matvec_split and
 * wlm_quant_matmat_split (quant.h). Its five other public functions are compiled here again
 * under the names below, which nothing calls (the linker drops them), and its SIMD128 kernels,
 * unused here, are not warned about. Outside the relaxed build the file is empty (the sanitizer
 * builds of tools/test.sh compile every C file under src/).
 */
#if defined(__wasm_relaxed_simd__) /* elsewhere (native, SIMD128 modules) an empty unit */
#define WLM_QUANT_DOT_SPLIT 1
#define RX_DOT(a, b, c)                                                                            \
    wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_i16x8_relaxed_dot_i8x16_i7x16((a), (b)),              \
                                        SIMD_K(i16_one)),                                          \
                   (c))
/* RX_DOT twice, the two inner dots added in int16 first (relaxed.h: 5-bit levels only) */
#define RX_DOT2(a0, b0, a1, b1, c)                                                                 \
    wasm_i32x4_add(                                                                                \
        wasm_i32x4_dot_i16x8(wasm_i16x8_add(wasm_i16x8_relaxed_dot_i8x16_i7x16((a0), (b0)),        \
                                            wasm_i16x8_relaxed_dot_i8x16_i7x16((a1), (b1))),       \
                             SIMD_K(i16_one)),                                                     \
        (c))

#define wlm_f16_matvec_simd wlm_split_unused_f16_matvec
#define wlm_bf16_matvec_simd wlm_split_unused_bf16_matvec
#define wlm_quantize_q8_0_simd wlm_split_unused_quantize_q8_0
#define wlm_quantize_q8_1_simd wlm_split_unused_quantize_q8_1
#define wlm_quantize_q8_K_simd wlm_split_unused_quantize_q8_K

#pragma clang diagnostic ignored "-Wunused-function"
#include "kernels/quant_simd.c"
#else
typedef int wlm_quant_relaxed_split_unused; /* ISO C: a unit declares something */
#endif
