/*
 * quant_simd/common.h — what every part of quant_simd.c builds on: the column chunks and
 * read-ahead distances, the kernels' two entry points (MATVEC_ENTRIES), the constants' table
 * (SIMD_K), integer horizontal sums, touching rows ahead, and the exact fp16 -> fp32 conversions
 * of block scales. Included by quant_simd.c alone, inside its SIMD128 branch.
 */
#ifndef WLM_KERNELS_QUANT_SIMD_COMMON_H
#define WLM_KERNELS_QUANT_SIMD_COMMON_H

/* Columns of a row that a matrix-vector kernel takes in one pass: the activation is prepared
 * (widened, or its sums and signs taken) this many columns at a time, in a scratch on the stack
 * (the SIMD128 kernels' int16 copy: 32 KB), and longer rows are done in column chunks (the
 * 32-element types carry each row's running sum from chunk to chunk, the K-quants add the
 * chunks' sums). Wide enough for the rows of the models people run (ffn_down of 7B-class models:
 * 11008-14336 columns) to go in one pass: a chunked row is read in pieces, one pass over the
 * matrix per chunk, which the CPU's prefetchers follow badly — with 4096, a Qwen2.5-0.5B
 * ffn_down (896 x 4864, Q6_K) ran at a third of the speed of a 4096-column one per element
 * (bench/README.md, 2026-11-28). A multiple of 256 (the K-quant block). */
#define XCHUNK WLM_QUANT_XCHUNK
/* The column chunk of the matrix-matrix kernels (batches, prefill), whose scratch holds the
 * activations of several entries (a panel's group of 64: 256 KB of it at 4096 columns) and
 * should stay in L2 while a row group's weights pass by. A multiple of 256, at most XCHUNK. */
#define MM_XCHUNK 4096
/* How far ahead (in blocks) the two-row loops (Q4_1 / Q5_1, and in super-blocks the K-quants)
 * touch their rows (a few KiB): see ROWS2_LOOP. */
#define PREFETCH_BLOCKS 64
/* ... and the four-row Q8_0 / Q4_0 / Q5_0 loops (four streams): 32 blocks. Measured with
 * tools/bench_relaxed_ab.sh (Q8_0, all of a stories110M token's matrices streamed, 21 paired
 * runs): relaxed 1.12x against 64, SIMD128 1.02x; Q4_0 1.02x / 1.01x. */
#define PREFETCH_BLOCKS4 32
#define PREFETCH_SUPER_BLOCKS 4
/* Each quantized matrix-vector kernel NAME_at(..., ahead) has two entry points of the
 * wlm_qmatvec_fn shape: NAME, which reads its rows ahead as above, and NAME_near, which does not
 * (ahead 0: the same arithmetic, bit for bit). Which is faster depends on the CPU: on an AMD Zen 4
 * every distance lost against none (2-16 %, bench/README.md 2026-11-28), on the Intel Xeon of
 * 2026-11-23 it gained; a context picks (wlm_context_params.read_ahead, js/engine/engine.js times both
 * on the first decode steps). */
#define MATVEC_ENTRIES(NAME) /* (unused: the relaxed build picks the SIMD128 ones by name only) */ \
    __attribute__((unused)) static void NAME(float *out, const void *w, size_t row_bytes,          \
                                             const void *xq, int n, int r0, int r1) {              \
        NAME##_at(out, w, row_bytes, xq, n, r0, r1, 1);                                            \
    }                                                                                              \
    __attribute__((unused)) static void NAME##_near(float *out, const void *w, size_t row_bytes,   \
                                                    const void *xq, int n, int r0, int r1) {       \
        NAME##_at(out, w, row_bytes, xq, n, r0, r1, 0);                                            \
    }

/* One vector of wlm_simd_k (quant.h): a constant loaded from memory rather than built in place. */
#define SIMD_K(field) wasm_v128_load(wlm_simd_k.field)

static inline int32_t hsum_i32(v128_t v) {
    v = wasm_i32x4_add(v, wasm_i32x4_shuffle(v, v, 2, 3, 0, 1));
    v = wasm_i32x4_add(v, wasm_i32x4_shuffle(v, v, 1, 0, 3, 2));
    return wasm_i32x4_extract_lane(v, 0);
}

/* Reads one byte of every 64-byte line of [p, p + bytes) and returns their sum: wasm has no
 * prefetch instruction, so the kernels touch the blocks they will need a little later this way
 * (see ROWS2_LOOP) and hand the sums to an empty asm, which keeps the loads. */
static inline unsigned touch_block(const void *p, size_t bytes) {
    const unsigned char *c = p;
    unsigned s = 0;
    for (size_t i = 0; i < bytes; i += 64) s += c[i];
    return s;
}

/* How many blocks ahead a row pair's loop may touch: `ahead`, unless that would read past `end`
 * (the end of the range's last row, perhaps the end of linear memory), then 0. row: the later
 * row of the pair at the current column chunk, nb blocks of block_bytes long. */
static inline int touch_distance(const char *end, const void *row, int nb, size_t block_bytes,
                                 int ahead) {
    return (size_t)(end - (const char *)row) >= (size_t)(nb + ahead) * block_bytes ? ahead : 0;
}

/* binary16 -> binary32 for four halves held in the high 16 bits of each 32-bit lane; exact for
 * every input (zero, subnormal, normal, Inf, NaN) and without denormal float arithmetic, which
 * is slow on some x86 cores: normal numbers by rebiasing the exponent with a multiply by 2^-112,
 * subnormals as (0.5 + m * 2^-24) - 0.5. */
static inline v128_t f16_hi_to_f32(v128_t w) {
    const v128_t sign = wasm_v128_and(w, SIMD_K(f32_sign));
    const v128_t two_w = wasm_i32x4_add(w, w);
    const v128_t norm = wasm_f32x4_mul(wasm_i32x4_add(wasm_u32x4_shr(two_w, 4), SIMD_K(f16_rebias)),
                                       SIMD_K(f32_2m112));
    const v128_t habs = wasm_u32x4_shr(two_w, 17);
    const v128_t denorm =
        wasm_f32x4_sub(wasm_v128_or(habs, SIMD_K(f32_half_bits)), SIMD_K(f32_half));
    const v128_t is_denorm = wasm_i32x4_lt(habs, SIMD_K(f16_min_normal));
    return wasm_v128_or(wasm_v128_bitselect(denorm, norm, is_denorm), sign);
}


/* Even and odd int8 lanes of v, sign-extended to int16: elements 0,2,..,14 and 1,3,..,15. */
static inline v128_t even_i8(v128_t v) { return wasm_i16x8_shr(wasm_i16x8_shl(v, 8), 8); }
static inline v128_t odd_i8(v128_t v) { return wasm_i16x8_shr(v, 8); }

/* Dot of 16 levels (bytes, 0..255) with one widened group of 16 (even lanes, then odd): the
 * Q6_K, Q5_0/Q5_1 and Q2_K/Q3_K/Q5_K kernels build their levels as bytes for it. */
static inline v128_t q6_dot_m(v128_t q, v128_t xe, v128_t xo, v128_t ff /* int16 0x00FF */) {
    return wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_v128_and(q, ff), xe),
                          wasm_i32x4_dot_i16x8(wasm_u16x8_shr(q, 8), xo));
}
static inline v128_t q6_dot(v128_t q, v128_t xe, v128_t xo) {
    return q6_dot_m(q, xe, xo, SIMD_K(u16_00ff));
}

/* Eight halves to float, fast path for normal numbers only: (h << 16) >> 3 (arithmetic) puts
 * exponent and mantissa in place and keeps the sign; the mask drops the copies of the sign and
 * adding 112 << 23 rebiases the exponent. */
static inline v128_t f16_normal(v128_t w) {
    return wasm_i32x4_add(wasm_v128_and(wasm_i32x4_shr(w, 3), SIMD_K(f16_normal_mask)),
                          SIMD_K(f16_normal_bias));
}
/* f16_hi_to_f32 for block scales: normal halves (exponent neither 0 nor 31: nearly every scale)
 * by f16_normal's shift, mask and rebias, a vector with a zero, subnormal, Inf or NaN by the
 * exact conversion; the same floats, fewer operations. */
static inline v128_t f16_scales_to_f32(v128_t h) {
    const v128_t em = SIMD_K(f16_exp_hi);
    const v128_t e = wasm_v128_and(h, em);
    const v128_t odd = wasm_v128_or(wasm_i32x4_eq(e, wasm_i32x4_splat(0)), wasm_i32x4_eq(e, em));
    return wasm_v128_any_true(odd) ? f16_hi_to_f32(h) : f16_normal(h);
}

/* Four fp16 values at p0..p3 in the top halves of four 32-bit lanes (lane k from pk), the low
 * halves zero: the input of f16_hi_to_f32 / f16_scales_to_f32. */
static inline v128_t gather_f16x4(const void *p0, const void *p1, const void *p2, const void *p3) {
    v128_t h = wasm_i32x4_splat(0);
    h = wasm_v128_load16_lane(p0, h, 1);
    h = wasm_v128_load16_lane(p1, h, 3);
    h = wasm_v128_load16_lane(p2, h, 5);
    return wasm_v128_load16_lane(p3, h, 7);
}

/* The fp16 scales of four blocks `stride` bytes apart, as floats. */
static inline v128_t load_f16x4(const void *p, size_t stride) {
    const uint8_t *b = p;
    return f16_scales_to_f32(gather_f16x4(b, b + stride, b + 2 * stride, b + 3 * stride));
}

#endif /* WLM_KERNELS_QUANT_SIMD_COMMON_H */
