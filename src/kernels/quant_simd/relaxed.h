/*
 * quant_simd/relaxed.h — the dot products of the relaxed-SIMD integer kernels (issue 14:
 * relaxed_blocks32.inc, relaxed_kquants.inc), which quant_simd.c includes only when it is
 * compiled with -mrelaxed-simd (dist/wasmlm-relaxed*.wasm): every quantized matrix-vector and
 * matrix-matrix product of that unit, with the block's integer dot products done by
 * i32x4.relaxed_dot_i8x16_i7x16_add_s (16 int8 x int8 products and their sums per instruction,
 * against eight products for the widened int16 path) on the raw activation bytes, so the
 * activation is never widened.
 *
 * The instruction's second operand must lie in 0..127 for a deterministic result (x86 runs it as
 * pmaddubsw, which reads that operand unsigned; others signed): the 2- to 6-bit levels of
 * Q4_0, Q4_1, Q5_0, Q5_1 and the K-quants are that operand as they are, the signed activation
 * the first. For Q8_0 x Q8_0 the activation's sign moves onto the weight: with m = x >> 7 (0 or
 * -1 per byte), w * x = (w ^ m) * |x| + (m ? |x| : 0), and w ^ m never overflows int8 (unlike
 * -w for w = -128); the second term depends on the activation only and is the accumulator's
 * start. |x| <= 127 holds for every activation the Q8_0 quantizer writes.
 *
 * Bitwise the SIMD128 results (and the scalar references'): integer sums are exact, and every
 * kernel does the float arithmetic of its SIMD128 twin. Q8_0, Q4_0 and Q5_0 (as Q4_1 / Q5_1)
 * do ggml's: one exact int32 sum per (row, block), then the block's float step, blocks in order
 * (see blocks32.inc), so how a block's products are split into lanes does not matter; the
 * K-quants sum their lanes as integers too. tests/c/test_quant.c checks every kernel against
 * its reference, and the relaxed build's results against the SIMD128 module's bits.
 */

#ifndef WLM_KERNELS_QUANT_SIMD_RELAXED_H
#define WLM_KERNELS_QUANT_SIMD_RELAXED_H

/* The fused form; quant_relaxed_split.c defines the split one (same bits) before including. */
#ifndef RX_DOT
#define RX_DOT(a, b, c) wasm_i32x4_relaxed_dot_i8x16_i7x16_add((a), (b), (c))
#endif
/* Two products into c: RX_DOT twice. Only where b0 and b1 are levels of at most 5 bits (Q4_0,
 * Q4_1, Q5_0, Q5_1): the split form then adds the two products' pair sums in int16 before its
 * one widening (|2 x 2 x 128 x 31| = 15872 < 2^15: exact). */
#ifndef RX_DOT2
#define RX_DOT2(a0, b0, a1, b1, c) RX_DOT((a1), (b1), RX_DOT((a0), (b0), (c)))
#endif
/* Eight int16 lanes, each the sum of two int8 x int8-in-0..127 products (x86: one pmaddubsw; at
 * most 2 x 128 x 127 in magnitude, so it neither saturates nor wraps): the Q6_K steps and the
 * panels, which widen the pairs themselves. The same in both forms. */
#define RX_DOT16(a, b) wasm_i16x8_relaxed_dot_i8x16_i7x16((a), (b))

#endif /* WLM_KERNELS_QUANT_SIMD_RELAXED_H */
