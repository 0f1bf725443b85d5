/*
 * bench_probe.h — two machine microbenchmarks compiled into the module itself, so the benchmark
 * measures the ceilings of the very code it runs (same compiler, flags and runtime): a
 * sequential memory read and a SIMD multiply-add peak. Not part of the public API (wasmlm.h);
 * exported to JS as wlmjs_probe_* by wasm_exports.c. Timing is the caller's: they only compute.
 */
#ifndef WLM_BENCH_PROBE_H
#define WLM_BENCH_PROBE_H

#include <stddef.h>
#include <stdint.h>

/* Writes a pattern over buf[0..bytes) so every page is committed and distinct (a never-written
 * page may be the shared zero page, which would stay in cache). */
void wlm_probe_fill(uint8_t *buf, size_t bytes);

/* Reads buf[0..bytes) `reps` times from start to end with 16-byte loads (SIMD128 build) or
 * 4-byte loads (scalar build), 8 independent integer adds in flight; returns a checksum so the
 * loads cannot be dropped. `bytes` is rounded down to a multiple of 128. */
uint32_t wlm_probe_read(const uint8_t *buf, size_t bytes, int32_t reps);

/* WLM_PROBE_FMA_ACC independent accumulators (registers), each updated `iters` times with
 * acc = acc * m + c: in the SIMD128 build an f32x4 multiply and an f32x4 add (wasm SIMD128 has
 * no fused multiply-add), so one call does iters * WLM_PROBE_FMA_ACC * 4 lanes * 2 FLOPs
 * (wlm_probe_fma_flops). The scalar build does the same arithmetic on floats, one lane. */
float wlm_probe_fma(int32_t iters);
double wlm_probe_fma_flops(int32_t iters);

#define WLM_PROBE_FMA_ACC 12

#endif
