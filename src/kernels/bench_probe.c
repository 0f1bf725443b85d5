/*
 * bench_probe.c — the ceilings next to the benchmark's numbers: sequential read bandwidth and
 * multiply-add peak, as this module's compiler and flags achieve them (see bench_probe.h).
 * Compute only; the caller times the calls. Not used by the engine.
 */
#include "kernels/bench_probe.h"

#if defined(__wasm_simd128__)
#include <wasm_simd128.h>
#endif

void wlm_probe_fill(uint8_t *buf, size_t bytes) {
    if (!buf) return;
    uint32_t x = 0x9E3779B9u;
    size_t i = 0;
    for (; i + 4 <= bytes; i += 4) {
        x ^= x << 13; x ^= x >> 17; x ^= x << 5; /* xorshift32: distinct, cheap */
        buf[i] = (uint8_t)x;
        buf[i + 1] = (uint8_t)(x >> 8);
        buf[i + 2] = (uint8_t)(x >> 16);
        buf[i + 3] = (uint8_t)(x >> 24);
    }
    for (; i < bytes; i++) buf[i] = (uint8_t)i;
}

#if defined(__wasm_simd128__)
/* One pass over four quarters of the buffer at once, 32 bytes of each per iteration into 8
 * accumulators (the adds never wait on each other). Four streams, because that is what this
 * machine's memory delivers and what the matvec kernels read: one stream measured 8.3 GB/s,
 * two 11.1, four 12.2 (node 20, 256 MiB); a one-stream probe understated the ceiling. */
__attribute__((noinline)) static v128_t read_pass(const uint8_t *p, size_t bytes) {
    const size_t q = bytes / 4;
    const uint8_t *p1 = p + q, *p2 = p + 2 * q, *p3 = p + 3 * q;
    v128_t a0 = wasm_i32x4_splat(0), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    for (size_t i = 0; i < q; i += 32) {
        a0 = wasm_i32x4_add(a0, wasm_v128_load(p + i));
        a1 = wasm_i32x4_add(a1, wasm_v128_load(p + i + 16));
        a2 = wasm_i32x4_add(a2, wasm_v128_load(p1 + i));
        a3 = wasm_i32x4_add(a3, wasm_v128_load(p1 + i + 16));
        a4 = wasm_i32x4_add(a4, wasm_v128_load(p2 + i));
        a5 = wasm_i32x4_add(a5, wasm_v128_load(p2 + i + 16));
        a6 = wasm_i32x4_add(a6, wasm_v128_load(p3 + i));
        a7 = wasm_i32x4_add(a7, wasm_v128_load(p3 + i + 16));
    }
    return wasm_i32x4_add(wasm_i32x4_add(wasm_i32x4_add(a0, a1), wasm_i32x4_add(a2, a3)),
                          wasm_i32x4_add(wasm_i32x4_add(a4, a5), wasm_i32x4_add(a6, a7)));
}

uint32_t wlm_probe_read(const uint8_t *buf, size_t bytes, int32_t reps) {
    if (!buf || reps < 1) return 0;
    bytes &= ~(size_t)127;
    v128_t s = wasm_i32x4_splat(0);
    for (int32_t r = 0; r < reps; r++) {
        /* Through a volatile, so the compiler cannot see that every pass reads the same bytes
         * and fold `reps` calls into one (it did: the rate then scaled with reps). */
        const uint8_t *volatile p = buf;
        s = wasm_i32x4_add(s, read_pass(p, bytes));
    }
    return (uint32_t)(wasm_i32x4_extract_lane(s, 0) ^ wasm_i32x4_extract_lane(s, 1) ^
                      wasm_i32x4_extract_lane(s, 2) ^ wasm_i32x4_extract_lane(s, 3));
}

float wlm_probe_fma(int32_t iters) {
    /* acc -> acc * m + c converges to c / (1 - m) = 1: values stay normal, never denormal. */
    const v128_t m = wasm_f32x4_splat(0.999f), c = wasm_f32x4_splat(0.001f);
    v128_t a[WLM_PROBE_FMA_ACC];
    for (int k = 0; k < WLM_PROBE_FMA_ACC; k++) a[k] = wasm_f32x4_splat(0.5f + 0.01f * (float)k);
    for (int32_t i = 0; i < iters; i++) {
        /* fully unrolled by the compiler: the array lives in registers */
        for (int k = 0; k < WLM_PROBE_FMA_ACC; k++) a[k] = wasm_f32x4_add(wasm_f32x4_mul(a[k], m), c);
    }
    v128_t s = a[0];
    for (int k = 1; k < WLM_PROBE_FMA_ACC; k++) s = wasm_f32x4_add(s, a[k]);
    return wasm_f32x4_extract_lane(s, 0) + wasm_f32x4_extract_lane(s, 3);
}

double wlm_probe_fma_flops(int32_t iters) {
    return iters < 0 ? 0 : (double)iters * WLM_PROBE_FMA_ACC * 4 * 2;
}
#else
/* Scalar builds (the native library, dist/wasmlm-scalar.wasm): the same loops on scalars. */
__attribute__((noinline)) static uint32_t read_pass(const uint8_t *p, size_t bytes) {
    uint32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
    for (size_t i = 0; i < bytes; i += 32) {
        const uint32_t *q = (const uint32_t *)(const void *)(p + i);
        a0 += q[0]; a1 += q[1]; a2 += q[2]; a3 += q[3];
        a4 += q[4]; a5 += q[5]; a6 += q[6]; a7 += q[7];
    }
    return (a0 + a1) ^ (a2 + a3) ^ (a4 + a5) ^ (a6 + a7);
}

uint32_t wlm_probe_read(const uint8_t *buf, size_t bytes, int32_t reps) {
    if (!buf || reps < 1) return 0;
    bytes &= ~(size_t)127;
    uint32_t s = 0;
    for (int32_t r = 0; r < reps; r++) {
        const uint8_t *volatile p = buf; /* see the SIMD128 version */
        s += read_pass(p, bytes);
    }
    return s;
}

float wlm_probe_fma(int32_t iters) {
    const float m = 0.999f, c = 0.001f;
    float a[WLM_PROBE_FMA_ACC];
    for (int k = 0; k < WLM_PROBE_FMA_ACC; k++) a[k] = 0.5f + 0.01f * (float)k;
    for (int32_t i = 0; i < iters; i++)
        for (int k = 0; k < WLM_PROBE_FMA_ACC; k++) a[k] = a[k] * m + c;
    float s = 0;
    for (int k = 0; k < WLM_PROBE_FMA_ACC; k++) s += a[k];
    return s;
}

double wlm_probe_fma_flops(int32_t iters) {
    return iters < 0 ? 0 : (double)iters * WLM_PROBE_FMA_ACC * 2;
}
#endif
