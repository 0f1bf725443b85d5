/*
 * quant_simd.c — WASM SIMD128 kernels for the quantized weight types (wasm_simd128.h): the
 * F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K and Q6_K matrix-vector
 * products and the Q8_0 / Q8_K activation quantizers. Without -msimd128 every function forwards
 * to its scalar twin in quant.c.
 *
 * How the integer products go: the activation vector, already quantized to 8 bits, is widened
 * once per call to int16 on the stack (2 bytes a column), in the lane order that the
 * weights' unpacking produces; each weight row is then unpacked to int16 with and/shift only
 * and multiplied with i32x4.dot_i16x8, giving exact int32 sums per block, and the block's float
 * scale is applied once per block. Two rows go through each call (they share the activation
 * loads); the hot loops sit in functions called once per row pair, which V8 tiers up quickly.
 *
 * Shaped by V8 (node 20, x64), measured with tools/bench_kernels.c: TurboFan hoists all the loads
 * of a loop iteration to its top and rematerialises constants, so loops stay at one block per
 * iteration (unrolling spilled registers and ran slower); shuffles are written in the lane
 * patterns it maps to single punpck instructions.
 */
#include <math.h>
#include <string.h>

#include "kernels/quant.h"

#if defined(__wasm_simd128__)
#include <wasm_simd128.h>

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
 * 2026-11-23 it gained; a context picks (wlm_context_params.read_ahead, js/engine.js times both
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

static inline float hsum_f32(v128_t v) {
    return (wasm_f32x4_extract_lane(v, 0) + wasm_f32x4_extract_lane(v, 1)) +
           (wasm_f32x4_extract_lane(v, 2) + wasm_f32x4_extract_lane(v, 3));
}

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


/* ---- F16 --------------------------------------------------------------------------------- */

/* Eight halves to float, fast path for normal numbers only: (h << 16) >> 3 (arithmetic) puts
 * exponent and mantissa in place and keeps the sign; the mask drops the copies of the sign and
 * adding 112 << 23 rebiases the exponent. The shuffles with zero are punpck{l,h}wd. */
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

static inline v128_t f16_lo(v128_t h) {
    return wasm_i16x8_shuffle(wasm_i32x4_splat(0), h, 0, 8, 1, 9, 2, 10, 3, 11);
}
static inline v128_t f16_hi(v128_t h) {
    return wasm_i16x8_shuffle(wasm_i32x4_splat(0), h, 4, 12, 5, 13, 6, 14, 7, 15);
}

/* 16 halves with a zero, subnormal, Inf or NaN among them: the exact conversion, out of line so
 * that the hot loop stays small. Returns the four-lane partial dot product. */
__attribute__((noinline)) static v128_t f16_dot16_any(v128_t h0, v128_t h1, const float *x) {
    /* widened with extend + shift rather than the fast path's shuffles: the linker inlines this
     * function and V8 would otherwise hoist the shared shuffles out of the branch and spill them */
#define F16_WIDE(v, half) wasm_i32x4_shl(wasm_u32x4_extend_##half##_u16x8(v), 16)
    const v128_t p0 = wasm_f32x4_mul(f16_hi_to_f32(F16_WIDE(h0, low)), wasm_v128_load(x));
    const v128_t p1 = wasm_f32x4_mul(f16_hi_to_f32(F16_WIDE(h0, high)), wasm_v128_load(x + 4));
    const v128_t p2 = wasm_f32x4_mul(f16_hi_to_f32(F16_WIDE(h1, low)), wasm_v128_load(x + 8));
    const v128_t p3 = wasm_f32x4_mul(f16_hi_to_f32(F16_WIDE(h1, high)), wasm_v128_load(x + 12));
#undef F16_WIDE
    return wasm_f32x4_add(wasm_f32x4_add(p0, p1), wasm_f32x4_add(p2, p3));
}

__attribute__((noinline)) static float f16_row(const wlm_fp16 *w, const float *x, int n) {
    const v128_t emask = wasm_i16x8_splat(0x7c00);
    v128_t a0 = wasm_f32x4_splat(0), a1 = a0, a2 = a0, a3 = a0;
    int j = 0;
    for (; j + 16 <= n; j += 16) {
        const v128_t h0 = wasm_v128_load(w + j), h1 = wasm_v128_load(w + j + 8);
        const v128_t e0 = wasm_v128_and(h0, emask), e1 = wasm_v128_and(h1, emask);
        /* any zero / subnormal (exponent 0) or Inf / NaN (exponent 31) among the 16? */
        const v128_t odd = wasm_v128_or(wasm_i16x8_eq(wasm_u16x8_min(e0, e1), wasm_i16x8_splat(0)),
                                        wasm_i16x8_eq(wasm_u16x8_max(e0, e1), emask));
        if (wasm_v128_any_true(odd)) {
            a0 = wasm_f32x4_add(a0, f16_dot16_any(h0, h1, x + j));
            continue;
        }
        a0 = wasm_f32x4_add(a0, wasm_f32x4_mul(f16_normal(f16_lo(h0)), wasm_v128_load(x + j)));
        a1 = wasm_f32x4_add(a1, wasm_f32x4_mul(f16_normal(f16_hi(h0)), wasm_v128_load(x + j + 4)));
        a2 = wasm_f32x4_add(a2, wasm_f32x4_mul(f16_normal(f16_lo(h1)), wasm_v128_load(x + j + 8)));
        a3 = wasm_f32x4_add(a3, wasm_f32x4_mul(f16_normal(f16_hi(h1)), wasm_v128_load(x + j + 12)));
    }
    float s = hsum_f32(wasm_f32x4_add(wasm_f32x4_add(a0, a1), wasm_f32x4_add(a2, a3)));
    for (; j < n; j++) s += wlm_fp16_to_fp32(w[j]) * x[j];
    return s;
}

/* Rows in the order r0, r0 + half, r0 + 1, r0 + half + 1, ...: the weights come from two
 * sequential streams that alternate row by row (see ROWS2_LOOP). */
void wlm_f16_matvec_simd(float *out, const void *w, size_t row_bytes, const void *x, int n, int r0,
                         int r1) {
    const char *rows = w;
    const int half = (r1 - r0 + 1) / 2;
    for (int r = r0; r < r0 + half; r++) {
        const int r2 = r + half < r1 ? r + half : r;
        out[r] = f16_row((const wlm_fp16 *)(const void *)(rows + (size_t)r * row_bytes), x, n);
        if (r2 != r)
            out[r2] = f16_row((const wlm_fp16 *)(const void *)(rows + (size_t)r2 * row_bytes), x, n);
    }
}

/* ---- Q8_0 activations: quantizer and widening -------------------------------------------- */

/* roundf() for four lanes: truncate, then step away from zero when the dropped part is >= 1/2
 * (both steps exact for |v| < 2^23). */
static inline v128_t round_away(v128_t v) {
    const v128_t t = wasm_f32x4_trunc(v);
    const v128_t big = wasm_f32x4_ge(wasm_f32x4_abs(wasm_f32x4_sub(v, t)), wasm_f32x4_splat(0.5f));
    const v128_t one = wasm_v128_or(wasm_v128_and(v, wasm_i32x4_splat((int32_t)0x80000000u)),
                                    wasm_f32x4_splat(1.0f));
    return wasm_f32x4_add(t, wasm_v128_and(one, big));
}

/* 16 floats to 16 saturated int8 (NaN -> 0). */
static inline v128_t f32x16_to_i8(v128_t a, v128_t b, v128_t c, v128_t d) {
    const v128_t ab =
        wasm_i16x8_narrow_i32x4(wasm_i32x4_trunc_sat_f32x4(a), wasm_i32x4_trunc_sat_f32x4(b));
    const v128_t cd =
        wasm_i16x8_narrow_i32x4(wasm_i32x4_trunc_sat_f32x4(c), wasm_i32x4_trunc_sat_f32x4(d));
    return wasm_i8x16_narrow_i16x8(ab, cd);
}

/* Lane maximum that ignores NaN lanes, like the scalar `if (a > m) m = a`. */
static inline float hmax_f32(v128_t v, float m) {
    const float a0 = wasm_f32x4_extract_lane(v, 0), a1 = wasm_f32x4_extract_lane(v, 1);
    const float a2 = wasm_f32x4_extract_lane(v, 2), a3 = wasm_f32x4_extract_lane(v, 3);
    if (a0 > m) m = a0;
    if (a1 > m) m = a1;
    if (a2 > m) m = a2;
    if (a3 > m) m = a3;
    return m;
}

void wlm_quantize_q8_0_simd(const float *x, void *dst, int64_t n) {
    wlm_block_q8_0 *y = dst;
    for (int64_t i = 0; i < n / WLM_QK8_0; i++, x += WLM_QK8_0) {
        v128_t v[8];
        /* pmax with the accumulator first keeps it when the new lane is NaN */
        v128_t m = wasm_f32x4_splat(0);
        for (int k = 0; k < 8; k++) {
            v[k] = wasm_v128_load(x + 4 * k);
            m = wasm_f32x4_pmax(m, wasm_f32x4_abs(v[k]));
        }
        const float amax = hmax_f32(m, 0.0f);
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = wlm_fp32_to_fp16(d);
        const v128_t idv = wasm_f32x4_splat(id);
        for (int k = 0; k < 8; k++) v[k] = round_away(wasm_f32x4_mul(v[k], idv));
        wasm_v128_store(y[i].qs, f32x16_to_i8(v[0], v[1], v[2], v[3]));
        wasm_v128_store(y[i].qs + 16, f32x16_to_i8(v[4], v[5], v[6], v[7]));
    }
}

/*
 * The widened activation for the 32-element types: per block, 32 int16 in the order
 * [even elements 0..14, odd 1..15, even 16..30, odd 17..31] — the order in which an int8 or
 * nibble vector splits into 16-bit lanes — plus the block's scale as a float and 8 x the sum of
 * its quants (Q4_0's offset of 8).
 */
static void widen_q8_0(const wlm_block_q8_0 *x, int nb, int16_t *xs, float *xd, int32_t *xsum8) {
    for (int b = 0; b < nb; b++, xs += 32) {
        const v128_t v0 = wasm_v128_load(x[b].qs), v1 = wasm_v128_load(x[b].qs + 16);
        const v128_t e0 = even_i8(v0), o0 = odd_i8(v0), e1 = even_i8(v1), o1 = odd_i8(v1);
        wasm_v128_store(xs, e0);
        wasm_v128_store(xs + 8, o0);
        wasm_v128_store(xs + 16, e1);
        wasm_v128_store(xs + 24, o1);
        xd[b] = wlm_fp16_to_fp32(x[b].d);
        const v128_t s = wasm_i16x8_add(wasm_i16x8_add(e0, o0), wasm_i16x8_add(e1, o1));
        xsum8[b] = 8 * hsum_i32(wasm_i32x4_extadd_pairwise_i16x8(s));
    }
}

/* ---- Q8_0, Q4_0 and Q5_0 weights (Q8_0 activations) ---------------------------------------
 *
 * ggml's arithmetic exactly (ggml_vec_dot_q8_0_q8_0 / q4_0_q8_0 / q5_0_q8_0, the C fallbacks
 * that llama.cpp's wasm build runs): per block one exact int32 sum isum, then the block's float
 * step, blocks added in order to one running sum per row, carried across the column chunks —
 *   Q8_0  sum += (float)isum * (dw * dx)
 *   Q4_0  sum += ((float)isum * dw) * dx
 *   Q5_0  sum += (dw * dx) * (float)isum
 * — the scalar references' bits in every build. Four rows per call: each row's block dot gives
 * four int32 lane partials; the partials of the four rows are transposed and added (exact) into
 * one vector of four block sums, and one vector convert / multiply / add does the float step of
 * the four rows, lane by lane (IEEE single operations, no FMA: each lane is the scalar
 * computation). The activation loads are shared by the four rows.
 * Loops are kept at one block per iteration on purpose: TurboFan hoists every load of an
 * iteration to its top, so unrolling by hand or by clang multiplies the live vectors past the
 * sixteen x86 registers and the spills cost more than the loop overhead saved.
 */

/* The blocks' float scales of one row, for the row's blocks [0, nb) (the fp16 scale first in each
 * block, blocks `stride` bytes apart): dw * dx, or dw alone when xd is NULL. */
static void block_scales(const void *w, size_t stride, const float *xd, int nb, float *sc) {
    const uint8_t *p = w;
    int b = 0;
    for (; b + 4 <= nb; b += 4, p += 4 * stride) {
        const v128_t d = load_f16x4(p, stride);
        wasm_v128_store(sc + b, xd ? wasm_f32x4_mul(d, wasm_v128_load(xd + b)) : d);
    }
    for (; b < nb; b++, p += stride) {
        wlm_fp16 h;
        memcpy(&h, p, sizeof h);
        sc[b] = xd ? wlm_fp16_to_fp32(h) * xd[b] : wlm_fp16_to_fp32(h);
    }
}

/* o[g]: lane g of a, b, c, d (a 4 x 4 transpose of int32 lanes; the batch kernels' panels) */
static inline void transpose4_i32(v128_t a, v128_t b, v128_t c, v128_t d, v128_t *o) {
    const v128_t t0 = wasm_i32x4_shuffle(a, b, 0, 4, 1, 5), t1 = wasm_i32x4_shuffle(c, d, 0, 4, 1, 5);
    const v128_t t2 = wasm_i32x4_shuffle(a, b, 2, 6, 3, 7), t3 = wasm_i32x4_shuffle(c, d, 2, 6, 3, 7);
    o[0] = wasm_i64x2_shuffle(t0, t1, 0, 2);
    o[1] = wasm_i64x2_shuffle(t0, t1, 1, 3);
    o[2] = wasm_i64x2_shuffle(t2, t3, 0, 2);
    o[3] = wasm_i64x2_shuffle(t2, t3, 1, 3);
}

/* Lanes (p0 + p2, q0 + q2, p1 + p3, q1 + q3) of two int32 vectors, and of two such pairs a =
 * pair(p0, p1), b = pair(p2, p3) the four totals: lane k the sum of pk's four lanes (exact). */
static inline v128_t hpair_i32(v128_t p, v128_t q) {
    return wasm_i32x4_add(wasm_i32x4_shuffle(p, q, 0, 4, 1, 5), wasm_i32x4_shuffle(p, q, 2, 6, 3, 7));
}
static inline v128_t hquad_i32(v128_t a, v128_t b) {
    return wasm_i32x4_add(wasm_i64x2_shuffle(a, b, 0, 2), wasm_i64x2_shuffle(a, b, 1, 3));
}
static inline v128_t hsum4_i32(v128_t p0, v128_t p1, v128_t p2, v128_t p3) {
    return hquad_i32(hpair_i32(p0, p1), hpair_i32(p2, p3));
}

/* The fp16 scales dw of four rows' blocks [0, nb) as floats, block-major: d4[4b + k] is row
 * k's; with `xd`, the products dw * dx instead. */
static void block_scales4(const void *w0, const void *w1, const void *w2, const void *w3,
                          size_t stride, const float *xd, int nb, float *d4) {
    const uint8_t *p0 = w0, *p1 = w1, *p2 = w2, *p3 = w3;
    for (int b = 0; b < nb; b++, p0 += stride, p1 += stride, p2 += stride, p3 += stride) {
        v128_t d = f16_scales_to_f32(gather_f16x4(p0, p1, p2, p3));
        if (xd) d = wasm_f32x4_mul(d, wasm_f32x4_splat(xd[b]));
        wasm_v128_store(d4 + 4 * b, d);
    }
}

/* The running sums of four rows (in and out, lane k row k) after the float step of one block:
 * the block sums isum4 and the scales of Q8_0 / Q5_0 (s4 = dw * dx) or of Q4_0 (s4 = dw, then
 * dx): the orders of the scalar references. */
static inline v128_t step4_dd(v128_t acc, v128_t isum4, const float *s4) {
    return wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(isum4), wasm_v128_load(s4)));
}
static inline v128_t step4_q4_0(v128_t acc, v128_t isum4, const float *d4, const float *xd) {
    return wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_mul(wasm_f32x4_convert_i32x4(isum4),
                                                             wasm_v128_load(d4)),
                                              wasm_v128_load32_splat(xd)));
}

/* 256 x the dot product of a 32-int8 block with its widened activation: an int16 lane holds
 * an even element in its low byte and an odd one in its high byte, so (v << 8) is 256 x the even
 * elements and (v & 0xFF00) 256 x the odd ones, one op each. |sum| <= 32 * 128 * 127 * 256 <
 * 2^31, so the block sum is exact and an arithmetic shift by 8 gives the dot product. */
static inline v128_t q8_0_dot256(v128_t v, v128_t u, v128_t x0, v128_t x1, v128_t x2, v128_t x3,
                                 v128_t hi /* int16 0xFF00 */) {
    return wasm_i32x4_add(wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_i16x8_shl(v, 8), x0),
                                         wasm_i32x4_dot_i16x8(wasm_v128_and(v, hi), x1)),
                          wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_i16x8_shl(u, 8), x2),
                                         wasm_i32x4_dot_i16x8(wasm_v128_and(u, hi), x3)));
}

/* The dot product of 16 bytes of nibbles with the widened activation: per 16-bit lane k, the low
 * nibbles of bytes 2k and 2k+1 are elements 2k and 2k+1, the high nibbles elements 2k+16 and
 * 2k+17 — the widened order. Levels 0..15, without Q4_0's offset of 8. */
static inline v128_t q4_dot(v128_t v, v128_t x0, v128_t x1, v128_t x2, v128_t x3,
                            v128_t m /* int16 0x000F */) {
    return wasm_i32x4_add(
        wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_v128_and(v, m), x0),
                       wasm_i32x4_dot_i16x8(wasm_v128_and(wasm_u16x8_shr(v, 8), m), x1)),
        wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_v128_and(wasm_u16x8_shr(v, 4), m), x2),
                       wasm_i32x4_dot_i16x8(wasm_u16x8_shr(v, 12), x3)));
}

/* Touches the four rows' blocks pf ahead (see ROWS4_LOOP); returns the sum for the empty asm. */
static inline unsigned touch4(const void *w0, const void *w1, const void *w2, const void *w3,
                              size_t bytes) {
    return touch_block(w0, bytes) + touch_block(w1, bytes) + touch_block(w2, bytes) +
           touch_block(w3, bytes);
}

/* Four rows over nb blocks: v[k] holds row k's running sum in and out. The body computes
 * `isum` (four block sums) for block b from w0..w3 (advanced per block) and the widened
 * activation block xs. */
#define S128_ROWS4_BODY(BLOCK, XD, ISUM, STEP)                                                     \
    do {                                                                                           \
        float d4[4 * (XCHUNK / 32)] __attribute__((aligned(16)));                                  \
        block_scales4(w0, w1, w2, w3, sizeof(BLOCK), XD, nb, d4);                                  \
        v128_t acc = wasm_v128_load(v);                                                            \
        unsigned touched = 0;                                                                      \
        _Pragma("clang loop unroll(disable)") for (int b = 0; b < nb;                              \
                                                   b++, w0++, w1++, w2++, w3++, xs += 32) {        \
            touched += touch4(w0 + pf, w1 + pf, w2 + pf, w3 + pf, sizeof(BLOCK));                  \
            const v128_t x0 = wasm_v128_load(xs), x1 = wasm_v128_load(xs + 8);                     \
            const v128_t x2 = wasm_v128_load(xs + 16), x3 = wasm_v128_load(xs + 24);               \
            const v128_t isum = ISUM;                                                              \
            acc = STEP;                                                                            \
        }                                                                                          \
        __asm__ volatile("" : : "r"(touched));                                                     \
        wasm_v128_store(v, acc);                                                                   \
    } while (0)

#define S128_Q8_0_P(w) q8_0_dot256(wasm_v128_load((w)->qs), wasm_v128_load((w)->qs + 16), x0, x1, x2, x3, k_hi8)
__attribute__((noinline)) static void q8_0_rows4(const wlm_block_q8_0 *w0, const wlm_block_q8_0 *w1,
                                                 const wlm_block_q8_0 *w2, const wlm_block_q8_0 *w3,
                                                 const int16_t *xs, const float *xd,
                                                 const int32_t *xsum8, int nb, int pf, float *v) {
    (void)xsum8;
    const v128_t k_hi8 = SIMD_K(u16_ff00);
    S128_ROWS4_BODY(wlm_block_q8_0, xd,
                    wasm_i32x4_shr(hsum4_i32(S128_Q8_0_P(w0), S128_Q8_0_P(w1), S128_Q8_0_P(w2),
                                             S128_Q8_0_P(w3)), 8),
                    step4_dd(acc, isum, d4 + 4 * b));
}
#undef S128_Q8_0_P

/* sum (q - 8) x = sum q x - 8 sum x */
#define S128_Q4_0_P(w) q4_dot(wasm_v128_load((w)->qs), x0, x1, x2, x3, k_m4w)
__attribute__((noinline)) static void q4_0_rows4(const wlm_block_q4_0 *w0, const wlm_block_q4_0 *w1,
                                                 const wlm_block_q4_0 *w2, const wlm_block_q4_0 *w3,
                                                 const int16_t *xs, const float *xd,
                                                 const int32_t *xsum8, int nb, int pf, float *v) {
    const v128_t k_m4w = SIMD_K(u16_000f);
    S128_ROWS4_BODY(wlm_block_q4_0, NULL,
                    wasm_i32x4_sub(hsum4_i32(S128_Q4_0_P(w0), S128_Q4_0_P(w1), S128_Q4_0_P(w2),
                                             S128_Q4_0_P(w3)),
                                   wasm_v128_load32_splat(xsum8 + b)),
                    step4_q4_0(acc, isum, d4 + 4 * b, xd + b));
}
#undef S128_Q4_0_P

/* ROWS2_LOOP: rows r0..r1 in pairs (r, r + half) over column chunks of XCHUNK, PREP preparing a
 * chunk's activation blocks (XBLOCK *x); CALL continues each row's running sum through every
 * block in order (ggml's accumulation order; Q8_1 activations). A pair is row r0 + i with row
 * r0 + half + i (half the rows, rounded up; an odd middle row is paired with itself), not two
 * neighbours: the weights are then read as two long sequential streams, which the hardware
 * prefetcher follows, instead of hopping between two rows of one page. Measured in node 20 on
 * 768-column Q8_0 rows streamed from memory: 8.2 GB/s against 6.0 GB/s for neighbouring rows
 * (the same 13.5 GB/s from cache).
 * The kernels also read one byte of each stream PREFETCH_BLOCKS blocks ahead per block (wasm has
 * no prefetch instruction; the empty asm keeps the loads), so the next rows are on their way
 * while these are computed: Q8_0 8.3 -> 9.1 GB/s (6.7 -> 9.0 on 2048-column rows), Q4_0 5.7 ->
 * 6.0, nothing lost from cache; stories110M Q8_0 decode 65.6 -> 75 tok/s. Nothing past the last
 * row of the range is touched (pf = 0 near the end): it may be the end of linear memory
 * (tests/c/test_quant.c places a matrix there). */
#define ROWS2_LOOP(BLOCK, XBLOCK, PREP, CALL)                                                      \
    do {                                                                                           \
        const XBLOCK *x = xq;                                                                      \
        const char *end = (const char *)w + (size_t)r1 * row_bytes; /* touch nothing past it */    \
        for (int c0 = 0; c0 < n; c0 += XCHUNK) {                                                   \
            const int nb = (n - c0 < XCHUNK ? n - c0 : XCHUNK) / 32;                               \
            PREP;                                                                                  \
            const char *wc = (const char *)w + (size_t)(c0 / 32) * sizeof(BLOCK);                  \
            const int half = (r1 - r0 + 1) / 2;                                                    \
            for (int r = r0; r < r0 + half; r++) {                                                 \
                const int r2 = r + half < r1 ? r + half : r;                                       \
                const BLOCK *w0 = (const BLOCK *)(const void *)(wc + (size_t)r * row_bytes);       \
                const BLOCK *w1 = (const BLOCK *)(const void *)(wc + (size_t)r2 * row_bytes);      \
                const int pf = touch_distance(end, w1, nb, sizeof(BLOCK), ahead ? PREFETCH_BLOCKS : 0);        \
                float v0 = c0 ? out[r] : 0.0f, v1 = c0 ? out[r2] : 0.0f;                           \
                CALL;                                                                              \
                out[r] = v0;                                                                       \
                if (r2 != r) out[r2] = v1;                                                         \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* ROWS4_LOOP: rows r0..r1 four at a time, as ROWS2_LOOP with four streams: rows r, r + q,
 * r + 2q, r + 3q for r in [r0, r0 + q), q a quarter of the range rounded down; the last
 * (r1 - r0) % 4 rows go in one more call with the last row repeated (its lanes compute the
 * same bits and write the same value). CALL(w0, w1, w2, w3, nb, pf, v) continues the running
 * sums v[4] of the rows through every block in order. */
#define ROWS4_LOOP(BLOCK, PREP, CALL)                                                              \
    do {                                                                                           \
        const wlm_block_q8_0 *x = xq;                                                              \
        const char *end = (const char *)w + (size_t)r1 * row_bytes; /* touch nothing past it */    \
        const int q = (r1 - r0) / 4, rt = r0 + 4 * q, calls = q + (rt < r1);                       \
        for (int c0 = 0; c0 < n; c0 += XCHUNK) {                                                   \
            const int nb = (n - c0 < XCHUNK ? n - c0 : XCHUNK) / 32;                               \
            PREP;                                                                                  \
            const char *wc = (const char *)w + (size_t)(c0 / 32) * sizeof(BLOCK);                  \
            for (int i = 0; i < calls; i++) {                                                      \
                int rr[4];                                                                         \
                for (int k = 0; k < 4; k++)                                                        \
                    rr[k] = i < q ? r0 + i + k * q : (rt + k < r1 ? rt + k : r1 - 1);              \
                const BLOCK *w0 = (const BLOCK *)(const void *)(wc + (size_t)rr[0] * row_bytes);   \
                const BLOCK *w1 = (const BLOCK *)(const void *)(wc + (size_t)rr[1] * row_bytes);   \
                const BLOCK *w2 = (const BLOCK *)(const void *)(wc + (size_t)rr[2] * row_bytes);   \
                const BLOCK *w3 = (const BLOCK *)(const void *)(wc + (size_t)rr[3] * row_bytes);   \
                const int pf = touch_distance(end, w3, nb, sizeof(BLOCK), ahead ? PREFETCH_BLOCKS4 : 0);        \
                float v[4] __attribute__((aligned(16)));                                           \
                for (int k = 0; k < 4; k++) v[k] = c0 ? out[rr[k]] : 0.0f;                         \
                CALL;                                                                              \
                for (int k = 0; k < 4; k++) out[rr[k]] = v[k];                                     \
            }                                                                                      \
        }                                                                                          \
    } while (0)

#define ROWS4_DRIVER(BLOCK, FN)                                                                    \
    do {                                                                                           \
        int16_t xs[XCHUNK] __attribute__((aligned(16)));                                           \
        float xd[XCHUNK / 32] __attribute__((aligned(16)));                                        \
        int32_t xsum8[XCHUNK / 32] __attribute__((aligned(16)));                                   \
        ROWS4_LOOP(BLOCK, widen_q8_0(x + c0 / 32, nb, xs, xd, xsum8),                              \
                   FN(w0, w1, w2, w3, xs, xd, xsum8, nb, pf, v));                                  \
    } while (0)

static void s128_q8_0_matvec_at(float *out, const void *w, size_t row_bytes, const void *xq,
                                int n, int r0, int r1, int ahead) {
    ROWS4_DRIVER(wlm_block_q8_0, q8_0_rows4);
}
MATVEC_ENTRIES(s128_q8_0_matvec)

static void s128_q4_0_matvec_at(float *out, const void *w, size_t row_bytes, const void *xq,
                                int n, int r0, int r1, int ahead) {
    ROWS4_DRIVER(wlm_block_q4_0, q4_0_rows4);
}
MATVEC_ENTRIES(s128_q4_0_matvec)

/* ---- BF16 --------------------------------------------------------------------------------
 * A bfloat16 is the high half of a float: eight of them widen to two float vectors with one
 * interleave each (zeros in the low halves), exactly. Rows as for F16: two far-apart streams. */

__attribute__((noinline)) static float bf16_row(const uint16_t *w, const float *x, int n) {
    const v128_t z = wasm_i32x4_splat(0);
    v128_t a0 = z, a1 = z;
    int j = 0;
    for (; j + 8 <= n; j += 8) {
        const v128_t h = wasm_v128_load(w + j);
        a0 = wasm_f32x4_add(a0, wasm_f32x4_mul(wasm_i16x8_shuffle(z, h, 0, 8, 1, 9, 2, 10, 3, 11),
                                               wasm_v128_load(x + j)));
        a1 = wasm_f32x4_add(a1, wasm_f32x4_mul(wasm_i16x8_shuffle(z, h, 4, 12, 5, 13, 6, 14, 7, 15),
                                               wasm_v128_load(x + j + 4)));
    }
    float s = hsum_f32(wasm_f32x4_add(a0, a1));
    for (; j < n; j++) s += wlm_bf16_to_fp32(w[j]) * x[j];
    return s;
}

void wlm_bf16_matvec_simd(float *out, const void *w, size_t row_bytes, const void *x, int n,
                          int r0, int r1) {
    const char *rows = w;
    const int half = (r1 - r0 + 1) / 2;
    for (int r = r0; r < r0 + half; r++) {
        const int r2 = r + half < r1 ? r + half : r;
        out[r] = bf16_row((const uint16_t *)(const void *)(rows + (size_t)r * row_bytes), x, n);
        if (r2 != r)
            out[r2] =
                bf16_row((const uint16_t *)(const void *)(rows + (size_t)r2 * row_bytes), x, n);
    }
}

/* ---- Q5_0 weights (Q8_0 activations); the Q4 / Q5 level dot products ----------------------
 * As Q4_0: four rows per call, the block's int32 dot products in i32x4 and ggml's float step per
 * block (Q4_1 / Q5_1: below, with Q8_1 activations). Q5_0 / Q5_1 levels are built as bytes: the
 * nibbles of the 16 bytes (elements 0..15 low, 16..31 high) with bit 4 from qh, which a swizzle
 * spreads to one byte per element. */

/* Dot of a Q5 block's 32 levels (nibbles qs, high bits qh: bit j as 0x10 on element j, spread by
 * a swizzle) with the widened activation, the loop constants passed in (wlm_simd_k's; the
 * swizzle indices stay constants: V8 skips its out-of-range fix-up for constant in-range ones). */
static inline v128_t q5_dot_k(const uint8_t *qs, const uint8_t *qh, v128_t x0, v128_t x1,
                              v128_t x2, v128_t x3, v128_t m4, v128_t bit, v128_t b16, v128_t ff) {
    const v128_t h = wasm_v128_load32_splat(qh), v = wasm_v128_load(qs);
    const v128_t i0 = wasm_i8x16_make(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    const v128_t i1 = wasm_i8x16_make(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const v128_t hl = wasm_v128_and(wasm_i8x16_eq(wasm_v128_and(wasm_i8x16_swizzle(h, i0), bit), bit), b16);
    const v128_t hh = wasm_v128_and(wasm_i8x16_eq(wasm_v128_and(wasm_i8x16_swizzle(h, i1), bit), bit), b16);
    const v128_t lo = wasm_v128_or(wasm_v128_and(v, m4), hl);
    const v128_t hi = wasm_v128_or(wasm_v128_and(wasm_u16x8_shr(v, 4), m4), hh);
    return wasm_i32x4_add(q6_dot_m(lo, x0, x1, ff), q6_dot_m(hi, x2, x3, ff));
}

/* sum (q - 16) x = sum q x - 16 sum x = ... - 2 xsum8 */
#define S128_Q5_0_P(w) q5_dot_k((w)->qs, (w)->qh, x0, x1, x2, x3, k_m4, k_bit, k_b16, k_ff)
__attribute__((noinline)) static void q5_0_rows4(const wlm_block_q5_0 *w0, const wlm_block_q5_0 *w1,
                                                 const wlm_block_q5_0 *w2, const wlm_block_q5_0 *w3,
                                                 const int16_t *xs, const float *xd,
                                                 const int32_t *xsum8, int nb, int pf, float *v) {
    const v128_t k_m4 = SIMD_K(u8_0f), k_bit = SIMD_K(u8_bit), k_b16 = SIMD_K(u8_10);
    const v128_t k_ff = SIMD_K(u16_00ff);
    S128_ROWS4_BODY(wlm_block_q5_0, xd,
                    wasm_i32x4_sub(hsum4_i32(S128_Q5_0_P(w0), S128_Q5_0_P(w1), S128_Q5_0_P(w2),
                                             S128_Q5_0_P(w3)),
                                   wasm_i32x4_shl(wasm_v128_load32_splat(xsum8 + b), 1)),
                    step4_dd(acc, isum, d4 + 4 * b));
}
#undef S128_Q5_0_P

static void s128_q5_0_matvec_at(float *out, const void *w, size_t row_bytes, const void *xq,
                                int n, int r0, int r1, int ahead) {
    ROWS4_DRIVER(wlm_block_q5_0, q5_0_rows4);
}
MATVEC_ENTRIES(s128_q5_0_matvec)


/* ---- Q8_1 activations; Q4_1 and Q5_1 weights ---------------------------------------------
 * The reference's (and ggml's) float arithmetic exactly: per block the exact integer dot product
 * (i32x4 lane partials summed as integers), then sum += (dw * dx) * (float)isum + m * s in
 * block order, the running sum carried across column chunks — so every build gives the
 * reference's bits. The quantizer writes the reference's bytes for finite input. */

void wlm_quantize_q8_1_simd(const float *x, void *dst, int64_t n) {
    wlm_block_q8_1 *y = dst;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        v128_t v[8];
        v128_t m = wasm_f32x4_splat(0);
        for (int k = 0; k < 8; k++) {
            v[k] = wasm_v128_load(x + 4 * k);
            m = wasm_f32x4_pmax(m, wasm_f32x4_abs(v[k]));
        }
        const float d = hmax_f32(m, 0.0f) / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        const v128_t idv = wasm_f32x4_splat(id);
        for (int k = 0; k < 8; k++) v[k] = round_away(wasm_f32x4_mul(v[k], idv));
        const v128_t q0 = f32x16_to_i8(v[0], v[1], v[2], v[3]);
        const v128_t q1 = f32x16_to_i8(v[4], v[5], v[6], v[7]);
        wasm_v128_store(y[i].qs, q0);
        wasm_v128_store(y[i].qs + 16, q1);
        const v128_t s16 = wasm_i16x8_add(wasm_i16x8_extadd_pairwise_i8x16(q0),
                                          wasm_i16x8_extadd_pairwise_i8x16(q1));
        const int32_t sum = hsum_i32(wasm_i32x4_extadd_pairwise_i16x8(s16));
        y[i].d = wlm_fp32_to_fp16(d);
        y[i].s = wlm_fp32_to_fp16((float)sum * d);
    }
}

/* The widened Q8_1 activation of nb blocks (widen_q8_0's order) and per block dx and s. */
static void widen_q8_1(const wlm_block_q8_1 *x, int nb, int16_t *xs, float *xd, float *xsm) {
    for (int b = 0; b < nb; b++, xs += 32) {
        const v128_t v0 = wasm_v128_load(x[b].qs), v1 = wasm_v128_load(x[b].qs + 16);
        wasm_v128_store(xs, even_i8(v0));
        wasm_v128_store(xs + 8, odd_i8(v0));
        wasm_v128_store(xs + 16, even_i8(v1));
        wasm_v128_store(xs + 24, odd_i8(v1));
        xd[b] = wlm_fp16_to_fp32(x[b].d);
        xsm[b] = wlm_fp16_to_fp32(x[b].s);
    }
}

/* Two rows of Q4_1 or Q5_1 over nb blocks; *o0 / *o1 hold the running sums in and out.
 * DOT(w) is the block's int32 lane partials. Shared with quant_relaxed.inc. */
#define ROWS2_Q8_1_BODY(DOT, XD, XSM)                                                              \
    do {                                                                                           \
        float sc0[XCHUNK / 32] __attribute__((aligned(16)));                                       \
        float sc1[XCHUNK / 32] __attribute__((aligned(16)));                                       \
        float mc0[XCHUNK / 32] __attribute__((aligned(16)));                                       \
        float mc1[XCHUNK / 32] __attribute__((aligned(16)));                                       \
        block_scales(&w0->d, sizeof *w0, XD, nb, sc0);                                             \
        block_scales(&w1->d, sizeof *w1, XD, nb, sc1);                                             \
        block_scales(&w0->m, sizeof *w0, XSM, nb, mc0);                                            \
        block_scales(&w1->m, sizeof *w1, XSM, nb, mc1);                                            \
        float a0 = *o0, a1 = *o1;                                                                  \
        unsigned touched = 0;                                                                      \
        _Pragma("clang loop unroll(disable)") for (int b = 0; b < nb; b++, w0++, w1++) {           \
            touched += touch_block(w0 + pf, sizeof *w0) + touch_block(w1 + pf, sizeof *w1);        \
            const int32_t i0 = hsum_i32(DOT(w0, b)), i1 = hsum_i32(DOT(w1, b));                    \
            a0 += sc0[b] * (float)i0 + mc0[b];                                                     \
            a1 += sc1[b] * (float)i1 + mc1[b];                                                     \
        }                                                                                          \
        __asm__ volatile("" : : "r"(touched));                                                     \
        *o0 = a0;                                                                                  \
        *o1 = a1;                                                                                  \
    } while (0)

/* Rows r0..r1 in ROWS2_LOOP's pairs and column chunks, with PREP(x, nb) preparing a chunk's
 * activation and the running sums carried from chunk to chunk. */
#define ROWS2_Q8_1_DRIVER(BLOCK, PREP, CALL) ROWS2_LOOP(BLOCK, wlm_block_q8_1, PREP, CALL)

/* Block lane partials of a Q4_1 / Q5_1 weight block with the widened activation block at xs. */
static inline v128_t q4_1_dot_at(const wlm_block_q4_1 *w, const int16_t *xs) {
    const v128_t x0 = wasm_v128_load(xs), x1 = wasm_v128_load(xs + 8);
    const v128_t x2 = wasm_v128_load(xs + 16), x3 = wasm_v128_load(xs + 24);
    return q4_dot(wasm_v128_load(w->qs), x0, x1, x2, x3, SIMD_K(u16_000f));
}

static inline v128_t q5_1_dot_at(const wlm_block_q5_1 *w, const int16_t *xs, v128_t m4, v128_t bit,
                                 v128_t b16, v128_t ff) {
    const v128_t x0 = wasm_v128_load(xs), x1 = wasm_v128_load(xs + 8);
    const v128_t x2 = wasm_v128_load(xs + 16), x3 = wasm_v128_load(xs + 24);
    return q5_dot_k(w->qs, w->qh, x0, x1, x2, x3, m4, bit, b16, ff);
}

#define Q4_1_DOT(w, b) q4_1_dot_at((w), xs + 32 * (b))
#define Q5_1_DOT(w, b) q5_1_dot_at((w), xs + 32 * (b), k_m4, k_bit, k_b16, k_ff)

__attribute__((noinline)) static void q4_1_rows2(const wlm_block_q4_1 *w0, const wlm_block_q4_1 *w1,
                                                 const int16_t *xs, const float *xd,
                                                 const float *xsm, int nb, int pf, float *o0,
                                                 float *o1) {
    ROWS2_Q8_1_BODY(Q4_1_DOT, xd, xsm);
}

__attribute__((noinline)) static void q5_1_rows2(const wlm_block_q5_1 *w0, const wlm_block_q5_1 *w1,
                                                 const int16_t *xs, const float *xd,
                                                 const float *xsm, int nb, int pf, float *o0,
                                                 float *o1) {
    const v128_t k_m4 = SIMD_K(u8_0f), k_bit = SIMD_K(u8_bit), k_b16 = SIMD_K(u8_10);
    const v128_t k_ff = SIMD_K(u16_00ff);
    ROWS2_Q8_1_BODY(Q5_1_DOT, xd, xsm);
}
#undef Q4_1_DOT
#undef Q5_1_DOT

/* Scratch of one column chunk of the widened Q8_1 activation. */
typedef struct q8_1_wide {
    int16_t xs[XCHUNK] __attribute__((aligned(16)));
    float xd[XCHUNK / 32] __attribute__((aligned(16)));
    float xsm[XCHUNK / 32] __attribute__((aligned(16)));
} q8_1_wide;

static void s128_q4_1_matvec_at(float *out, const void *w, size_t row_bytes, const void *xq,
                                int n, int r0, int r1, int ahead) {
    q8_1_wide a;
    ROWS2_Q8_1_DRIVER(wlm_block_q4_1, widen_q8_1(x + c0 / 32, nb, a.xs, a.xd, a.xsm),
                      q4_1_rows2(w0, w1, a.xs, a.xd, a.xsm, nb, pf, &v0, &v1));
}
MATVEC_ENTRIES(s128_q4_1_matvec)

static void s128_q5_1_matvec_at(float *out, const void *w, size_t row_bytes, const void *xq,
                                int n, int r0, int r1, int ahead) {
    q8_1_wide a;
    ROWS2_Q8_1_DRIVER(wlm_block_q5_1, widen_q8_1(x + c0 / 32, nb, a.xs, a.xd, a.xsm),
                      q5_1_rows2(w0, w1, a.xs, a.xd, a.xsm, nb, pf, &v0, &v1));
}
MATVEC_ENTRIES(s128_q5_1_matvec)

/* ---- Q8_K activations: quantizer and widening -------------------------------------------- */

void wlm_quantize_q8_K_simd(const float *x, void *dst, int64_t n) {
    wlm_block_q8_K *y = dst;
    for (int64_t i = 0; i < n / WLM_QK_K; i++, x += WLM_QK_K) {
        /* largest and smallest element, NaN lanes ignored (accumulator first) */
        v128_t mx = wasm_f32x4_splat(0), mn = mx;
        for (int j = 0; j < WLM_QK_K; j += 4) {
            const v128_t v = wasm_v128_load(x + j);
            mx = wasm_f32x4_pmax(mx, v);
            mn = wasm_f32x4_pmin(mn, v);
        }
        const float hi = hmax_f32(mx, 0.0f);
        const float lo = -hmax_f32(wasm_f32x4_neg(mn), 0.0f);
        /* the reference takes the first element of largest magnitude: only a tie between a
         * positive and a negative extreme needs a look at the order */
        float max;
        if (hi > -lo)
            max = hi;
        else if (-lo > hi)
            max = lo;
        else {
            max = hi;
            for (int j = 0; j < WLM_QK_K; j++)
                if (fabsf(x[j]) == hi) {
                    max = x[j];
                    break;
                }
        }
        if (max == 0.0f) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        const float iscale = -127.0f / max;
        const v128_t is = wasm_f32x4_splat(iscale);
        for (int g = 0; g < WLM_QK_K / 16; g++) {
            const float *xg = x + 16 * g;
            v128_t q[4];
            for (int k = 0; k < 4; k++)
                q[k] = wasm_i32x4_trunc_sat_f32x4(
                    wasm_f32x4_nearest(wasm_f32x4_mul(wasm_v128_load(xg + 4 * k), is)));
            const v128_t a = wasm_i16x8_narrow_i32x4(q[0], q[1]),
                         b = wasm_i16x8_narrow_i32x4(q[2], q[3]);
            const v128_t q8 = wasm_i8x16_narrow_i16x8(a, b);
            wasm_v128_store(y[i].qs + 16 * g, q8);
            /* sum of the stored (saturated) quants */
            const v128_t s = wasm_i16x8_add(even_i8(q8), odd_i8(q8));
            y[i].bsums[g] = (int16_t)hsum_i32(wasm_i32x4_extadd_pairwise_i16x8(s));
        }
        y[i].d = 1.0f / iscale;
    }
}

/* The widened Q8_K activation: per super-block 256 int16 in groups of 16 (even lanes, then odd),
 * as for Q8_0, and the sums of its eight 32-element sub-blocks (for Q4_K's mins). The scales and
 * 16-element sums are read from the blocks themselves. */
static void widen_q8_K(const wlm_block_q8_K *x, int nb, int16_t *xs, int16_t *xsub) {
    for (int b = 0; b < nb; b++, xsub += 8) {
        for (int g = 0; g < WLM_QK_K / 16; g++, xs += 16) {
            const v128_t v = wasm_v128_load(x[b].qs + 16 * g);
            wasm_v128_store(xs, even_i8(v));
            wasm_v128_store(xs + 8, odd_i8(v));
        }
        /* pairs of 16-element sums; |sum| <= 32 * 128 fits int16 */
        const v128_t s0 = wasm_v128_load(x[b].bsums), s1 = wasm_v128_load(x[b].bsums + 8);
        const v128_t ones = SIMD_K(i16_one);
        wasm_v128_store(xsub, wasm_i16x8_narrow_i32x4(wasm_i32x4_dot_i16x8(s0, ones),
                                                      wasm_i32x4_dot_i16x8(s1, ones)));
    }
}

/* ---- Q4_K weights ------------------------------------------------------------------------
 * Two rows per call, as for Q8_0. Per 64 elements (32 bytes of a row): the low nibbles are
 * sub-block 2j, the high ones sub-block 2j+1; each sub-block's int32 sums are multiplied by its
 * 6-bit scale in i32x4 and the mins are applied once per block through the activation's group
 * sums. */

/* The 6-bit scales (sc) and mins (m) of a Q4_K block, unpacked to bytes 0..7. */
static inline void q4_K_unpack(const uint8_t *s, uint8_t sc[8], uint8_t m[8]) {
    uint32_t a, b, c;
    memcpy(&a, s, 4);
    memcpy(&b, s + 4, 4);
    memcpy(&c, s + 8, 4);
    const uint32_t u[4] = {a & 0x3f3f3f3fu, (c & 0x0f0f0f0fu) | (((a >> 6) & 0x03030303u) << 4),
                           b & 0x3f3f3f3fu,
                           ((c >> 4) & 0x0f0f0f0fu) | (((b >> 6) & 0x03030303u) << 4)};
    memcpy(sc, u, 8);
    memcpy(m, u + 2, 8);
}

/* int16 pair sums p times the int16 scale at sp: i32x4 (one pmaddwd) */
#define SCALE16(p, sp) wasm_i32x4_dot_i16x8((p), wasm_v128_load16_splat(sp))

/* [sum of a's lanes, sum of b's, the same two again] */
static inline v128_t hsum2_i32(v128_t a, v128_t b) {
    const v128_t r = hpair_i32(a, b);
    return wasm_i32x4_add(r, wasm_i64x2_shuffle(r, r, 1, 0));
}

/* sum over a block of m[j] * (activation sum of sub-block j) */
static inline int32_t q4_K_minsum(const uint8_t m[8], const int16_t *xsub) {
    const v128_t m16 = wasm_u16x8_extend_low_u8x16(wasm_v128_load64_zero(m));
    return hsum_i32(wasm_i32x4_dot_i16x8(m16, wasm_v128_load(xsub)));
}

/* Tried here and dropped: Q6_K's int16 form (i16x8.mul, four products added in int16, the scale
 * through one dot_i16x8 from int16), the vector scale unpack (q4_K_scales_v, in
 * quant_relaxed.inc) and the two rows' float step in lanes: with them this kernel ran
 * 1.11-1.22x faster in Node 24 but 0.90-0.93x in Node 20 (tools/bench_relaxed_ab.sh; the
 * classifier's three-block rows lost most), and Node 20 is where the SIMD128 module runs. */
__attribute__((noinline)) static void q4_K_rows2(const wlm_block_q4_K *w0, const wlm_block_q4_K *w1,
                                                 const wlm_block_q8_K *x, const int16_t *xs,
                                                 const int16_t *xsub, int nb, int pf,
                                                 float *o0, float *o1) {
    const v128_t m = SIMD_K(u16_000f);
    float s0 = 0.0f, s1 = 0.0f;
    unsigned touched = 0;
    for (int b = 0; b < nb; b++, w0++, w1++, x++, xs += WLM_QK_K, xsub += 8) {
        touched += touch_block(w0 + pf, sizeof *w0) + touch_block(w1 + pf, sizeof *w1);
        uint8_t sc0[8], m0[8], sc1[8], m1[8];
        q4_K_unpack(w0->scales, sc0, m0);
        q4_K_unpack(w1->scales, sc1, m1);
        v128_t a0 = wasm_i32x4_splat(0), a1 = a0;
        const uint8_t *q0 = w0->qs, *q1 = w1->qs;
        const int16_t *xj = xs;
#pragma clang loop unroll(disable)
        for (int j = 0; j < 4; j++, q0 += 32, q1 += 32, xj += 64) {
            /* groups 4j, 4j+1 (low nibbles of the 32 bytes), 4j+2, 4j+3 (high nibbles) */
            const v128_t x0 = wasm_v128_load(xj), x1 = wasm_v128_load(xj + 8);
            const v128_t x2 = wasm_v128_load(xj + 16), x3 = wasm_v128_load(xj + 24);
            const v128_t x4 = wasm_v128_load(xj + 32), x5 = wasm_v128_load(xj + 40);
            const v128_t x6 = wasm_v128_load(xj + 48), x7 = wasm_v128_load(xj + 56);
#define Q4K_ROW(q, a, sc)                                                                          \
    do {                                                                                           \
        const v128_t v = wasm_v128_load(q), u = wasm_v128_load((q) + 16);                          \
        const v128_t lo = wasm_i32x4_add(                                                          \
            wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_v128_and(v, m), x0),                          \
                           wasm_i32x4_dot_i16x8(wasm_v128_and(wasm_u16x8_shr(v, 8), m), x1)),      \
            wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_v128_and(u, m), x2),                          \
                           wasm_i32x4_dot_i16x8(wasm_v128_and(wasm_u16x8_shr(u, 8), m), x3)));     \
        const v128_t hi = wasm_i32x4_add(                                                          \
            wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_v128_and(wasm_u16x8_shr(v, 4), m), x4),       \
                           wasm_i32x4_dot_i16x8(wasm_u16x8_shr(v, 12), x5)),                       \
            wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_v128_and(wasm_u16x8_shr(u, 4), m), x6),       \
                           wasm_i32x4_dot_i16x8(wasm_u16x8_shr(u, 12), x7)));                      \
        a = wasm_i32x4_add(a,                                                                      \
                           wasm_i32x4_add(wasm_i32x4_mul(lo, wasm_i32x4_splat(sc[2 * j])),         \
                                          wasm_i32x4_mul(hi, wasm_i32x4_splat(sc[2 * j + 1]))));   \
    } while (0)
            Q4K_ROW(q0, a0, sc0);
            Q4K_ROW(q1, a1, sc1);
#undef Q4K_ROW
        }
        /* d, dmin of both rows in one conversion */
        const v128_t dd = f16_hi_to_f32(gather_f16x4(&w0->d, &w0->dmin, &w1->d, &w1->dmin));
        s0 += x->d * (wasm_f32x4_extract_lane(dd, 0) * (float)hsum_i32(a0) -
                      wasm_f32x4_extract_lane(dd, 1) * (float)q4_K_minsum(m0, xsub));
        s1 += x->d * (wasm_f32x4_extract_lane(dd, 2) * (float)hsum_i32(a1) -
                      wasm_f32x4_extract_lane(dd, 3) * (float)q4_K_minsum(m1, xsub));
    }
    __asm__ volatile("" : : "r"(touched));
    *o0 = s0;
    *o1 = s1;
}

/* ---- Q6_K weights ------------------------------------------------------------------------
 * Per step t (0..7, 32 elements of a row): ql bytes 16t..16t+15 hold the low 4 bits of group
 * g = 8(t/4) + t%4 (low nibbles) and of group g+4 (high nibbles); the matching qh bytes
 * (32(t/4) + 16(t%2)) hold their top 2 bits at bit 2*((t/2)%2) and 4 + that. The levels 0..63
 * go into the dot products as they are and the offset of 32 comes off once per block through
 * the activation's group sums. */

/* Two groups of 6-bit levels as bytes: the low and high nibbles of l with bits 0..1 / 4..5 of
 * h (already shifted for the step) on top. */
static inline void q6_levels_m(v128_t l, v128_t h, v128_t m4 /* 0x0F bytes */,
                               v128_t m30 /* 0x30 bytes */, v128_t *lo, v128_t *hi) {
    *lo = wasm_v128_or(wasm_v128_and(l, m4), wasm_v128_and(wasm_i16x8_shl(h, 4), m30));
    *hi = wasm_v128_or(wasm_v128_and(wasm_u16x8_shr(l, 4), m4), wasm_v128_and(h, m30));
}
static inline void q6_levels(v128_t l, v128_t h, v128_t *lo, v128_t *hi) {
    q6_levels_m(l, h, SIMD_K(u8_0f), SIMD_K(u8_30), lo, hi);
}


/* The 16 scales of a Q6_K block widened to int16 into sc (for q6_K_step16 / rx_q6_K_step), and
 * the start of its accumulator: -32 x (sum over groups of scale x activation group sum), the
 * levels' offset, in lanes to be summed with the rest. */
static inline v128_t q6_K_scales16(const wlm_block_q6_K *w, const int16_t *bsums, int16_t *sc) {
    const v128_t s = wasm_v128_load(w->scales);
    const v128_t s0 = wasm_i16x8_extend_low_i8x16(s), s1 = wasm_i16x8_extend_high_i8x16(s);
    wasm_v128_store(sc, s0);
    wasm_v128_store(sc + 8, s1);
    const v128_t b = wasm_i32x4_add(wasm_i32x4_dot_i16x8(s0, wasm_v128_load(bsums)),
                                    wasm_i32x4_dot_i16x8(s1, wasm_v128_load(bsums + 8)));
    return wasm_i32x4_sub(wasm_i32x4_splat(0), wasm_i32x4_shl(b, 5));
}


/* Step t (see above) of one row: its two groups' scaled dot products, summed. Per group the
 * products of level (0..63) and widened activation (|x| <= 128) by i16x8.mul, even and odd lanes
 * added in int16 (|2 * 63 * 128| < 2^15), then the group's scale through i32x4.dot_i16x8_s with
 * it splat from int16 (one pmaddwd for the pair sums and the scale, where two dot_i16x8, a
 * splat from a byte and an i32x4.mul were). sc: the block's scales in int16 (q6_K_scales16). */
static inline v128_t q6_K_step16(const wlm_block_q6_K *w, const int16_t *sc, int t, int shift,
                                 v128_t xe, v128_t xo, v128_t ye, v128_t yo) {
    const int g = 8 * (t >> 2) + (t & 3), hoff = 32 * (t >> 2) + 16 * (t & 1);
    const v128_t ff = SIMD_K(u16_00ff);
    v128_t lo, hi;
    q6_levels(wasm_v128_load(w->ql + 16 * t), wasm_u16x8_shr(wasm_v128_load(w->qh + hoff), shift),
              &lo, &hi);
    const v128_t pl = wasm_i16x8_add(wasm_i16x8_mul(wasm_v128_and(lo, ff), xe),
                                     wasm_i16x8_mul(wasm_u16x8_shr(lo, 8), xo));
    const v128_t ph = wasm_i16x8_add(wasm_i16x8_mul(wasm_v128_and(hi, ff), ye),
                                     wasm_i16x8_mul(wasm_u16x8_shr(hi, 8), yo));
    return wasm_i32x4_add(SCALE16(pl, sc + g), SCALE16(ph, sc + g + 4));
}

/* Both rows' step t, added to a0 and a1. */
#define Q6K_STEPS(t, shift)                                                                        \
    do {                                                                                           \
        const int16_t *xg = xs + 16 * (8 * ((t) >> 2) + ((t) & 3));                                \
        const v128_t xe = wasm_v128_load(xg), xo = wasm_v128_load(xg + 8);                         \
        const v128_t ye = wasm_v128_load(xg + 64), yo = wasm_v128_load(xg + 72);                   \
        a0 = wasm_i32x4_add(a0, q6_K_step16(w0, sc0, t, shift, xe, xo, ye, yo));                   \
        a1 = wasm_i32x4_add(a1, q6_K_step16(w1, sc1, t, shift, xe, xo, ye, yo));                   \
    } while (0)

/* The steps go in two loops, t = 0, 1, 4, 5 (qh shifted by 0) and t = 2, 3, 6, 7 (by 2), so that
 * the shift is a constant (a variable one costs V8 three instructions per row and step); the
 * sums are integers, so the order changes nothing. Per block the two rows' integer sums (the
 * levels' offset included, see q6_K_scales16) are added up together and scaled in lanes 0 and
 * 1, each lane the reference's float operations in its order: s += (d * x->d) * (float)isum. */
__attribute__((noinline)) static void q6_K_rows2(const wlm_block_q6_K *w0, const wlm_block_q6_K *w1,
                                                 const wlm_block_q8_K *x, const int16_t *xs, int nb,
                                                 int pf, float *o0, float *o1) {
    v128_t s = wasm_f32x4_splat(0.0f);
    unsigned touched = 0;
    for (int b = 0; b < nb; b++, w0++, w1++, x++, xs += WLM_QK_K) {
        touched += touch_block(w0 + pf, sizeof *w0) + touch_block(w1 + pf, sizeof *w1);
        int16_t sc0[16] __attribute__((aligned(16))), sc1[16] __attribute__((aligned(16)));
        v128_t a0 = q6_K_scales16(w0, x->bsums, sc0), a1 = q6_K_scales16(w1, x->bsums, sc1);
#pragma clang loop unroll(disable)
        for (int k = 0; k < 4; k++) Q6K_STEPS(4 * (k >> 1) + (k & 1), 0);
#pragma clang loop unroll(disable)
        for (int k = 0; k < 4; k++) Q6K_STEPS(4 * (k >> 1) + (k & 1) + 2, 2);
        v128_t h = wasm_i32x4_splat(0);
        h = wasm_v128_load16_lane(&w0->d, h, 1);
        h = wasm_v128_load16_lane(&w1->d, h, 3);
        const v128_t d = wasm_f32x4_mul(f16_hi_to_f32(h), wasm_f32x4_splat(x->d));
        s = wasm_f32x4_add(s, wasm_f32x4_mul(d, wasm_f32x4_convert_i32x4(hsum2_i32(a0, a1))));
    }
    __asm__ volatile("" : : "r"(touched));
    *o0 = wasm_f32x4_extract_lane(s, 0);
    *o1 = wasm_f32x4_extract_lane(s, 1);
}
#undef Q6K_STEPS

/* Rows two at a time (paired and touched ahead as in ROWS2_LOOP) with the Q8_K activation
 * widened XCHUNK columns at a time. Touching ahead replaced a sweep over each row pair before
 * its product: Q6_K 3.5 -> 5.3 GB/s on 768-column rows, 4.2 -> 5.3 on 2048-column rows, Q4_K
 * 4.9 -> 5.3; the large matrices as before (5.4). */
#define ROWS2_K_DRIVER(BLOCK, CALL)                                                                \
    do {                                                                                           \
        const wlm_block_q8_K *x = xq;                                                              \
        int16_t xs[XCHUNK] __attribute__((aligned(16)));                                           \
        int16_t xsub[XCHUNK / 32] __attribute__((aligned(16)));                                    \
        const char *end = (const char *)w + (size_t)r1 * row_bytes;                                \
        for (int c0 = 0; c0 < n; c0 += XCHUNK) {                                                   \
            const int nb = (n - c0 < XCHUNK ? n - c0 : XCHUNK) / WLM_QK_K;                         \
            const wlm_block_q8_K *xc = x + c0 / WLM_QK_K;                                          \
            widen_q8_K(xc, nb, xs, xsub);                                                          \
            const char *wc = (const char *)w + (size_t)(c0 / WLM_QK_K) * sizeof(BLOCK);            \
            const int half = (r1 - r0 + 1) / 2;                                                    \
            for (int r = r0; r < r0 + half; r++) {                                                 \
                const int r2 = r + half < r1 ? r + half : r;                                       \
                const BLOCK *w0 = (const BLOCK *)(const void *)(wc + (size_t)r * row_bytes);       \
                const BLOCK *w1 = (const BLOCK *)(const void *)(wc + (size_t)r2 * row_bytes);      \
                const int pf = touch_distance(end, w1, nb, sizeof(BLOCK), ahead ? PREFETCH_SUPER_BLOCKS : 0);  \
                float v0, v1;                                                                      \
                CALL;                                                                              \
                out[r] = c0 ? out[r] + v0 : v0;                                                    \
                if (r2 != r) out[r2] = c0 ? out[r2] + v1 : v1;                                     \
            }                                                                                      \
        }                                                                                          \
    } while (0)

static void s128_q4_K_matvec_at(float *out, const void *w, size_t row_bytes, const void *xq,
                                int n, int r0, int r1, int ahead) {
    ROWS2_K_DRIVER(wlm_block_q4_K, q4_K_rows2(w0, w1, xc, xs, xsub, nb, pf, &v0, &v1));
}
MATVEC_ENTRIES(s128_q4_K_matvec)

static void s128_q6_K_matvec_at(float *out, const void *w, size_t row_bytes, const void *xq,
                                int n, int r0, int r1, int ahead) {
    ROWS2_K_DRIVER(wlm_block_q6_K, q6_K_rows2(w0, w1, xc, xs, nb, pf, &v0, &v1));
}
MATVEC_ENTRIES(s128_q6_K_matvec)

/* ---- Q2_K, Q3_K, Q5_K weights (Q8_K activations) ------------------------------------------
 * Each 16-element group's levels are built as 16 bytes (and/shift on the packed bits) and go
 * through q6_dot with the widened group; the integer sums are scaled per group (Q2_K, Q3_K) or
 * per 32-element sub-block (Q5_K) in i32x4, and the block's float arithmetic is the
 * reference's, so these kernels give the reference's bits (per column chunk). Two rows per
 * call and the drivers as for Q4_K. Written for correctness first: not tuned for V8 yet (the
 * variable shifts and per-group scale splats are the obvious costs). */

/* u16 lanes shifted left by k (right when k < 0). */
static inline v128_t shift_u16(v128_t v, int k) {
    return k >= 0 ? wasm_i16x8_shl(v, (uint32_t)k) : wasm_u16x8_shr(v, (uint32_t)-k);
}

/* sum over 16 groups of f(scale byte) * bsums: scale bytes (as int16 after `conv`) dot the
 * 16 group sums. */
static inline int32_t scale_dot_bsums(v128_t s_lo16, v128_t s_hi16, const int16_t *bsums) {
    return hsum_i32(wasm_i32x4_add(wasm_i32x4_dot_i16x8(s_lo16, wasm_v128_load(bsums)),
                                   wasm_i32x4_dot_i16x8(s_hi16, wasm_v128_load(bsums + 8))));
}

/* The scaled level sums of one Q2_K block: sum over groups of (scale & 0xF) * dot. */
static inline int32_t q2_K_block(const wlm_block_q2_K *w, const int16_t *xs) {
    const v128_t m2 = SIMD_K(u8_03);
    v128_t a = wasm_i32x4_splat(0);
    for (int h = 0; h < 2; h++)
        for (int t = 0; t < 2; t++) {
            const v128_t v = wasm_v128_load(w->qs + 32 * h + 16 * t);
#pragma clang loop unroll(disable)
            for (int j = 0; j < 4; j++) {
                const int g = 8 * h + 2 * j + t;
                const v128_t lev = wasm_v128_and(wasm_u16x8_shr(v, (uint32_t)(2 * j)), m2);
                a = wasm_i32x4_add(a, wasm_i32x4_mul(q6_dot(lev, wasm_v128_load(xs + 16 * g),
                                                            wasm_v128_load(xs + 16 * g + 8)),
                                                     wasm_i32x4_splat(w->scales[g] & 0xF)));
            }
        }
    return hsum_i32(a);
}

__attribute__((noinline)) static void q2_K_rows2(const wlm_block_q2_K *w0, const wlm_block_q2_K *w1,
                                                 const wlm_block_q8_K *x, const int16_t *xs, int nb,
                                                 int pf, float *o0, float *o1) {
    float s0 = 0.0f, s1 = 0.0f;
    unsigned touched = 0;
    for (int b = 0; b < nb; b++, w0++, w1++, x++, xs += WLM_QK_K) {
        touched += touch_block(w0 + pf, sizeof *w0) + touch_block(w1 + pf, sizeof *w1);
        const int32_t i0 = q2_K_block(w0, xs), i1 = q2_K_block(w1, xs);
        const v128_t sc0 = wasm_u8x16_shr(wasm_v128_load(w0->scales), 4);
        const v128_t sc1 = wasm_u8x16_shr(wasm_v128_load(w1->scales), 4);
        const int32_t m0 = scale_dot_bsums(wasm_u16x8_extend_low_u8x16(sc0),
                                           wasm_u16x8_extend_high_u8x16(sc0), x->bsums);
        const int32_t m1 = scale_dot_bsums(wasm_u16x8_extend_low_u8x16(sc1),
                                           wasm_u16x8_extend_high_u8x16(sc1), x->bsums);
        s0 += x->d *
              (wlm_fp16_to_fp32(w0->d) * (float)i0 - wlm_fp16_to_fp32(w0->dmin) * (float)m0);
        s1 += x->d *
              (wlm_fp16_to_fp32(w1->d) * (float)i1 - wlm_fp16_to_fp32(w1->dmin) * (float)m1);
    }
    __asm__ volatile("" : : "r"(touched));
    *o0 = s0;
    *o1 = s1;
}

/* The 16 signed scales of a Q3_K block as int8. */
static inline v128_t q3_K_scales(const uint8_t *s) {
    int8_t sc[16];
    for (int j = 0; j < 16; j++) sc[j] = (int8_t)wlm_q3_K_scale(s, j);
    return wasm_v128_load(sc);
}

/* A Q3_K block's sum over groups of scale * sum((q3 - 4) * y): levels q3 = low2 | high bit << 2
 * in 0..7, the offset of 4 through the group sums. */
static inline int32_t q3_K_block(const wlm_block_q3_K *w, const wlm_block_q8_K *x,
                                 const int16_t *xs) {
    const v128_t m2 = SIMD_K(u8_03), m4 = SIMD_K(u8_04);
    const v128_t scv = q3_K_scales(w->scales);
    int8_t sc[16];
    wasm_v128_store(sc, scv);
    v128_t a = wasm_i32x4_splat(0);
    for (int h = 0; h < 2; h++)
        for (int t = 0; t < 2; t++) {
            const v128_t v = wasm_v128_load(w->qs + 32 * h + 16 * t);
            const v128_t hm = wasm_v128_load(w->hmask + 16 * t);
#pragma clang loop unroll(disable)
            for (int j = 0; j < 4; j++) {
                const int g = 8 * h + 2 * j + t;
                const v128_t lev =
                    wasm_v128_or(wasm_v128_and(wasm_u16x8_shr(v, (uint32_t)(2 * j)), m2),
                                 wasm_v128_and(shift_u16(hm, 2 - (4 * h + j)), m4));
                a = wasm_i32x4_add(a, wasm_i32x4_mul(q6_dot(lev, wasm_v128_load(xs + 16 * g),
                                                            wasm_v128_load(xs + 16 * g + 8)),
                                                     wasm_i32x4_splat(sc[g])));
            }
        }
    return hsum_i32(a) - 4 * scale_dot_bsums(wasm_i16x8_extend_low_i8x16(scv),
                                             wasm_i16x8_extend_high_i8x16(scv), x->bsums);
}

__attribute__((noinline)) static void q3_K_rows2(const wlm_block_q3_K *w0, const wlm_block_q3_K *w1,
                                                 const wlm_block_q8_K *x, const int16_t *xs, int nb,
                                                 int pf, float *o0, float *o1) {
    float s0 = 0.0f, s1 = 0.0f;
    unsigned touched = 0;
    for (int b = 0; b < nb; b++, w0++, w1++, x++, xs += WLM_QK_K) {
        touched += touch_block(w0 + pf, sizeof *w0) + touch_block(w1 + pf, sizeof *w1);
        const int32_t i0 = q3_K_block(w0, x, xs), i1 = q3_K_block(w1, x, xs);
        s0 += (wlm_fp16_to_fp32(w0->d) * x->d) * (float)i0;
        s1 += (wlm_fp16_to_fp32(w1->d) * x->d) * (float)i1;
    }
    __asm__ volatile("" : : "r"(touched));
    *o0 = s0;
    *o1 = s1;
}

/* A Q5_K block's sum over sub-blocks of scale * level dot (levels 0..31: nibble | bit << 4). */
static inline int32_t q5_K_block(const wlm_block_q5_K *w, const uint8_t sc[8],
                                 const int16_t *xs) {
    const v128_t m4 = SIMD_K(u8_0f), b4 = SIMD_K(u8_10);
    const v128_t h0 = wasm_v128_load(w->qh), h1 = wasm_v128_load(w->qh + 16);
    v128_t a = wasm_i32x4_splat(0);
#pragma clang loop unroll(disable)
    for (int c = 0; c < 4; c++, xs += 64) {
        const v128_t v0 = wasm_v128_load(w->qs + 32 * c), v1 = wasm_v128_load(w->qs + 32 * c + 16);
        const int klo = 4 - 2 * c, khi = 3 - 2 * c; /* bit 2c / 2c + 1 of qh to bit 4 */
        const v128_t l0 =
            wasm_v128_or(wasm_v128_and(v0, m4), wasm_v128_and(shift_u16(h0, klo), b4));
        const v128_t l1 =
            wasm_v128_or(wasm_v128_and(v1, m4), wasm_v128_and(shift_u16(h1, klo), b4));
        const v128_t u0 = wasm_v128_or(wasm_v128_and(wasm_u16x8_shr(v0, 4), m4),
                                       wasm_v128_and(shift_u16(h0, khi), b4));
        const v128_t u1 = wasm_v128_or(wasm_v128_and(wasm_u16x8_shr(v1, 4), m4),
                                       wasm_v128_and(shift_u16(h1, khi), b4));
        const v128_t lo =
            wasm_i32x4_add(q6_dot(l0, wasm_v128_load(xs), wasm_v128_load(xs + 8)),
                           q6_dot(l1, wasm_v128_load(xs + 16), wasm_v128_load(xs + 24)));
        const v128_t hi =
            wasm_i32x4_add(q6_dot(u0, wasm_v128_load(xs + 32), wasm_v128_load(xs + 40)),
                           q6_dot(u1, wasm_v128_load(xs + 48), wasm_v128_load(xs + 56)));
        a = wasm_i32x4_add(a, wasm_i32x4_add(wasm_i32x4_mul(lo, wasm_i32x4_splat(sc[2 * c])),
                                             wasm_i32x4_mul(hi, wasm_i32x4_splat(sc[2 * c + 1]))));
    }
    return hsum_i32(a);
}

__attribute__((noinline)) static void q5_K_rows2(const wlm_block_q5_K *w0, const wlm_block_q5_K *w1,
                                                 const wlm_block_q8_K *x, const int16_t *xs,
                                                 const int16_t *xsub, int nb, int pf, float *o0,
                                                 float *o1) {
    float s0 = 0.0f, s1 = 0.0f;
    unsigned touched = 0;
    for (int b = 0; b < nb; b++, w0++, w1++, x++, xs += WLM_QK_K, xsub += 8) {
        touched += touch_block(w0 + pf, sizeof *w0) + touch_block(w1 + pf, sizeof *w1);
        uint8_t sc0[8], m0[8], sc1[8], m1[8];
        q4_K_unpack(w0->scales, sc0, m0);
        q4_K_unpack(w1->scales, sc1, m1);
        const int32_t i0 = q5_K_block(w0, sc0, xs), i1 = q5_K_block(w1, sc1, xs);
        s0 += x->d * (wlm_fp16_to_fp32(w0->d) * (float)i0 -
                      wlm_fp16_to_fp32(w0->dmin) * (float)q4_K_minsum(m0, xsub));
        s1 += x->d * (wlm_fp16_to_fp32(w1->d) * (float)i1 -
                      wlm_fp16_to_fp32(w1->dmin) * (float)q4_K_minsum(m1, xsub));
    }
    __asm__ volatile("" : : "r"(touched));
    *o0 = s0;
    *o1 = s1;
}

static void s128_q2_K_matvec_at(float *out, const void *w, size_t row_bytes, const void *xq,
                                int n, int r0, int r1, int ahead) {
    ROWS2_K_DRIVER(wlm_block_q2_K, q2_K_rows2(w0, w1, xc, xs, nb, pf, &v0, &v1));
}
MATVEC_ENTRIES(s128_q2_K_matvec)

static void s128_q3_K_matvec_at(float *out, const void *w, size_t row_bytes, const void *xq,
                                int n, int r0, int r1, int ahead) {
    ROWS2_K_DRIVER(wlm_block_q3_K, q3_K_rows2(w0, w1, xc, xs, nb, pf, &v0, &v1));
}
MATVEC_ENTRIES(s128_q3_K_matvec)

static void s128_q5_K_matvec_at(float *out, const void *w, size_t row_bytes, const void *xq,
                                int n, int r0, int r1, int ahead) {
    ROWS2_K_DRIVER(wlm_block_q5_K, q5_K_rows2(w0, w1, xc, xs, xsub, nb, pf, &v0, &v1));
}
MATVEC_ENTRIES(s128_q5_K_matvec)


/* ---- the public quantized kernels: SIMD128 or, in the relaxed-SIMD build (-mrelaxed-simd,
 * dist/wasmlm-relaxed*.wasm), quant_relaxed.inc's twins, bitwise the same results ------------- */

#if defined(__wasm_relaxed_simd__)
#define WLM_QUANT_RELAXED 1
#include "kernels/quant_relaxed.inc"
#define PICK(t) rx_##t##_matvec
#define PICK_NEAR(t) rx_##t##_matvec_near
#else
#define WLM_QUANT_RELAXED 0
#include "kernels/quant_s128_panel.inc"
#define PICK(t) s128_##t##_matvec
#define PICK_NEAR(t) s128_##t##_matvec_near
#endif

#if defined(WLM_QUANT_DOT_SPLIT)
/* quant_relaxed_split.c: this file again, with quant_relaxed.inc's kernels in the split dot
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
    default: return wlm_type_get(type)->matvec_simd;
    }
}

#endif /* WLM_QUANT_DOT_SPLIT */

wlm_qmatmat_fn wlm_quant_matmat_simd(int32_t type) {
#if !WLM_QUANT_RELAXED
    if (type == WLM_TYPE_Q8_0) return s128_q8_0_matmat;
    if (type == WLM_TYPE_Q4_0) return s128_q4_0_matmat;
    if (type == WLM_TYPE_Q5_0) return s128_q5_0_matmat;
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
#endif
    (void)type;
    return NULL;
}

#if !defined(WLM_QUANT_DOT_SPLIT)
int wlm_quant_have_simd(void) { return 1; }

int wlm_quant_have_relaxed(void) { return WLM_QUANT_RELAXED; }
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
