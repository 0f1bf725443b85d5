/*
 * bench_ab.h — what the A/B kernel harnesses (tools/bench_relaxed_ab.c, tools/bench_f32_ab.c)
 * share: process CPU time, a seeded uniform generator and a qsort comparator for the medians.
 * Header-only (static functions): each harness is its own wasm module. Not part of the library.
 */
#ifndef WASMLM_TOOLS_BENCH_AB_H
#define WASMLM_TOOLS_BENCH_AB_H

#include <stdint.h>
#include <emscripten.h>

/* Process CPU time in seconds (user + system, process.cpuUsage()): other jobs on the machine do
 * not stretch it (they still share caches and memory bandwidth). Node only. */
EM_JS(double, now, (void), {
    const u = process.cpuUsage();
    return (u.user + u.system) / 1e6;
});

/* Uniform in [-1, 1) from a linear congruential generator (Numerical Recipes' constants); the
 * state starts at the same seed in every harness, so their weights are the same. */
static float frand(uint32_t *state) {
    *state = *state * 1664525u + 1013904223u;
    return ((*state >> 8) / 16777216.0f) * 2 - 1;
}

/* qsort comparator for doubles, ascending. */
static int cmpd(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#endif
