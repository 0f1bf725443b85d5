/*
 * bench_kernels.c — micro-benchmark of the matrix-vector kernels of every weight type (F32, F16,
 * BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, MXFP4) on the stories110M /
 * Llama matrix shapes, as wlm_matmul runs them:
 * quantize the activation once, then the product over all rows. Prints GB/s of weight bytes
 * for the scalar reference and the SIMD128 kernel, and the F32 SIMD kernel's time over this
 * type's (how much faster than F32 the same matrix goes), plus a sequential-read baseline.
 * Not a test. Build and run both variants (SIMD128 and scalar) with
 *
 *     tools/bench_kernels.sh [--quick] [--hot] [--wall] [--only=Q8_0,Q4_K,attention]
 *
 * "cold" (default): the matrix is replicated to fill a pool of at least 192 MB and the calls walk
 * through the copies, so weights stream from memory as in decode (every layer's weights are
 * read once per token). --hot repeats one copy (cache-resident for the small matrices).
 * Times are process CPU time (process.cpuUsage under node), the fastest of 15 samples after a
 * warm-up that lets V8 tier the kernels up; --wall uses wall-clock time instead.
 *
 * Then the attention kernel (--only=attention for it alone) on stories110M's shape: 12 layers of
 * 12 heads of 64 over a paged KV cache laid out as the engine's (blocks of WLM_KV_BLOCK positions
 * holding every layer), ms per token and GB/s of K and V bytes. "cold": 64 MB are read between
 * two layers (untimed), as the layer's weights do in decode, so K and V come from memory.
 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/kernels.h"
#include "kernels/quant.h"
#include "wasmlm.h"

/* CPU time of the process under node (process.cpuUsage, microseconds), so that other processes
 * on a shared machine do not stretch the numbers; wall time elsewhere or with --wall. */
#if defined(__EMSCRIPTEN__)
#include <emscripten.h>
/* clang-format off */
EM_JS(double, cpu_seconds, (void), {
    if (typeof process === 'undefined' || !process.cpuUsage) return -1;
    const u = process.cpuUsage();
    return (u.user + u.system) / 1e6;
});
/* clang-format on */
#else
static double cpu_seconds(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) return -1;
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
#endif
static int use_wall;

static double now_s(void) {
    if (!use_wall) {
        const double c = cpu_seconds();
        if (c >= 0) return c;
        use_wall = 1;
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static float frand(void) { /* roughly Gaussian: sum of 4 uniforms, centred */
    float s = 0;
    for (int i = 0; i < 4; i++) {
        rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
        s += (float)(rng_state >> 40) * (1.0f / 16777216.0f);
    }
    return (s - 2.0f) * 1.7f;
}

/* Sequential read of `bytes` (a multiple of 64), as wasm does it best: 4 independent i32x4 adds
 * per 64 bytes (or plain loops in the scalar build). Returns a checksum so nothing is skipped. */
#if defined(__wasm_simd128__)
#include <wasm_simd128.h>
__attribute__((noinline)) static uint32_t read_all(const uint8_t *p, size_t bytes) {
    v128_t a0 = wasm_i32x4_splat(0), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i < bytes; i += 64) {
        a0 = wasm_i32x4_add(a0, wasm_v128_load(p + i));
        a1 = wasm_i32x4_add(a1, wasm_v128_load(p + i + 16));
        a2 = wasm_i32x4_add(a2, wasm_v128_load(p + i + 32));
        a3 = wasm_i32x4_add(a3, wasm_v128_load(p + i + 48));
    }
    const v128_t s = wasm_i32x4_add(wasm_i32x4_add(a0, a1), wasm_i32x4_add(a2, a3));
    return (uint32_t)(wasm_i32x4_extract_lane(s, 0) + wasm_i32x4_extract_lane(s, 3));
}
#else
__attribute__((noinline)) static uint32_t read_all(const uint8_t *p, size_t bytes) {
    const uint32_t *q = (const uint32_t *)(const void *)p;
    uint32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    for (size_t i = 0; i < bytes / 4; i += 4) {
        a0 += q[i];
        a1 += q[i + 1];
        a2 += q[i + 2];
        a3 += q[i + 3];
    }
    return a0 + a1 + a2 + a3;
}
#endif

/* One matmul the way wlm_matmul does it. */
static void matmul(const wlm_type_traits *t, int simd, float *out, const void *w, size_t row_bytes,
                   const float *x, void *xq, int rows, int cols) {
    const void *xv = x;
    if (t->vec_dot_type != WLM_TYPE_F32) {
        wlm_type_get(t->vec_dot_type)->from_float(x, xq, cols);
        xv = xq;
    }
    (simd ? t->matvec_simd : t->matvec_ref)(out, w, row_bytes, xv, cols, 0, rows);
}

typedef struct {
    double gbs, ms; /* GB/s of weight bytes and ms per matmul, best sample */
} result;

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static result run(const wlm_type_traits *t, int simd, uint8_t *pool, int copies, size_t mat_bytes,
                  size_t row_bytes, const float *x, void *xq, float *out, int rows, int cols,
                  double budget) {
    /* warm-up: long enough for V8 to tier the kernels up */
    int c = 0;
    double t0 = now_s();
    while (now_s() - t0 < budget * 0.4) {
        matmul(t, simd, out, pool + (size_t)c * mat_bytes, row_bytes, x, xq, rows, cols);
        c = (c + 1) % copies;
    }
    /* the fastest of many short samples: the least disturbed by other processes */
    enum { NS = 15 };
    double samples[NS];
    for (int s = 0; s < NS; s++) {
        int calls = 0;
        const double start = now_s();
        double el;
        do {
            matmul(t, simd, out, pool + (size_t)c * mat_bytes, row_bytes, x, xq, rows, cols);
            c = (c + 1) % copies;
            calls++;
            el = now_s() - start;
        } while (el < budget / NS);
        samples[s] = el / calls;
    }
    qsort(samples, NS, sizeof samples[0], cmp_double);
    result r = {(double)mat_bytes / samples[0] * 1e-9, samples[0] * 1e3};
    return r;
}

/* The attention section: ms per token over all layers at n positions: the scalar reference and
 * SIMD over an F32 cache, and SIMD over an F16 cache (the default; same run, interleaved). */
static void bench_attention(int hot, int quick) {
    enum { LAYERS = 12, HEADS = 12, HS = 64, KV = HEADS * HS, B = WLM_KV_BLOCK };
    static const int lens[] = {64, 104, 512, 960};
    const size_t flush_bytes = hot ? 0 : (size_t)64 << 20;
    uint8_t *flush = flush_bytes ? malloc(flush_bytes) : NULL;
    if (flush) memset(flush, 1, flush_bytes);
    printf("attention, stories110M shape (%d layers x %d heads of %d), %s K/V\n", LAYERS, HEADS,
           HS, hot ? "hot" : "cold");
    printf("%-10s %12s %12s %12s %12s %9s %12s %9s\n", "positions", "ref ms", "simd ms",
           "ref GB/s", "simd GB/s", "simd/ref", "f16 simd ms", "f32/f16");
    uint32_t sink = 0;
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        const int n = lens[li], nb = (n + B - 1) / B;
        const size_t block_floats = (size_t)LAYERS * 2 * B * KV;
        float *pool = malloc((size_t)nb * block_floats * sizeof(float));
        uint16_t *pool16 = malloc((size_t)nb * block_floats * sizeof(uint16_t));
        float *q = malloc(KV * sizeof(float)), *out = malloc(KV * sizeof(float));
        float *scratch = malloc(wlm_attention_scratch(HEADS, n, HS) * sizeof(float));
        const float **kb = malloc((size_t)nb * sizeof *kb), **vb = malloc((size_t)nb * sizeof *vb);
        const uint16_t **kh = malloc((size_t)nb * sizeof *kh), **vh = malloc((size_t)nb * sizeof *vh);
        if (!pool || !pool16 || !q || !out || !scratch || !kb || !vb || !kh || !vh) {
            printf("%-10d out of memory\n", n);
            free(pool), free(pool16), free(q), free(out), free(scratch), free(kb), free(vb);
            free(kh), free(vh);
            continue;
        }
        for (size_t i = 0; i < (size_t)nb * block_floats; i++) {
            pool[i] = frand();
            pool16[i] = wlm_fp32_to_fp16(pool[i]);
        }
        for (int i = 0; i < KV; i++) q[i] = frand();
        double best[3] = {1e30, 1e30, 1e30};
        for (int rep = 0; rep < (quick ? 3 : 10); rep++) {
            for (int kind = 0; kind < 3; kind++) { /* 0 ref F32, 1 SIMD F32, 2 SIMD F16 */
                double el = 0;
                for (int l = 0; l < LAYERS; l++) {
                    if (flush) sink += read_all(flush, flush_bytes);
                    for (int b = 0; b < nb; b++) {
                        const size_t at = (size_t)b * block_floats + (size_t)l * 2 * B * KV;
                        kb[b] = pool + at, vb[b] = kb[b] + (size_t)B * KV;
                        kh[b] = pool16 + at, vh[b] = kh[b] + (size_t)B * KV;
                    }
                    const double s0 = now_s();
                    if (kind == 2) wlm_attention_f16_simd(out, q, kh, vh, B, n, 0, HEADS, 1, HS, KV, scratch);
                    else (kind ? wlm_attention_simd : wlm_attention_ref)(out, q, kb, vb, B, n, 0, HEADS, 1, HS, KV, scratch);
                    el += now_s() - s0;
                    sink += (uint32_t)(out[0] > 0);
                }
                if (el < best[kind]) best[kind] = el;
            }
        }
        const double kv_bytes = (double)LAYERS * 2 * n * KV * sizeof(float);
        printf("%-10d %12.3f %12.3f %12.2f %12.2f %8.2fx %12.3f %8.2fx\n", n, best[0] * 1e3,
               best[1] * 1e3, kv_bytes / best[0] * 1e-9, kv_bytes / best[1] * 1e-9,
               best[0] / best[1], best[2] * 1e3, best[1] / best[2]);
        fflush(stdout);
        free(pool), free(pool16), free(q), free(out), free(scratch), free(kb), free(vb);
        free(kh), free(vh);
    }
    printf("(checksum %u)\n", (unsigned)sink);
    free(flush);
}

int main(int argc, char **argv) {
    int quick = 0, hot = 0;
    const char *only = NULL; /* --only=F32,Q8_0: a comma-separated subset of the types */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strcmp(argv[i], "--hot"))
            hot = 1;
        else if (!strncmp(argv[i], "--only=", 7))
            only = argv[i] + 7;
        else if (!strcmp(argv[i], "--wall"))
            use_wall = 1;
    }
    const double budget = quick ? 0.25 : 1.0; /* seconds per measurement */
    const size_t pool_min = hot ? 0 : (size_t)192 << 20;
    static const int32_t types[] = {WLM_TYPE_F32,  WLM_TYPE_F16,  WLM_TYPE_BF16, WLM_TYPE_Q8_0,
                                    WLM_TYPE_Q4_0, WLM_TYPE_Q4_1, WLM_TYPE_Q5_0, WLM_TYPE_Q5_1,
                                    WLM_TYPE_Q2_K, WLM_TYPE_Q3_K, WLM_TYPE_Q4_K, WLM_TYPE_Q5_K,
                                    WLM_TYPE_Q6_K, WLM_TYPE_MXFP4};
    static const int shapes[][2] = {{768, 768}, {2048, 768}, {768, 2048}, {32000, 768}};
    const int ntypes = (int)(sizeof types / sizeof types[0]), nshapes = 4;

    now_s();
    printf("wasmlm kernel benchmark (%s kernels compiled in, %s weights, %s time)\n",
           wlm_quant_have_simd() ? "SIMD128" : "no SIMD128; both columns scalar",
           hot ? "hot: one copy, cache-resident when small"
               : "cold: streamed from a >= 192 MB pool",
           use_wall ? "wall" : "CPU");

    { /* sequential-read baseline */
        const size_t bytes = (size_t)256 << 20;
        uint8_t *buf = malloc(bytes);
        if (!buf) return 1;
        for (size_t i = 0; i < bytes; i += 4096) buf[i] = (uint8_t)i;
        memset(buf, 1, bytes);
        uint32_t sink = 0;
        double best = 1e30;
        for (int rep = 0; rep < (quick ? 3 : 8); rep++) {
            const double s = now_s();
            sink += read_all(buf, bytes);
            const double e = now_s() - s;
            if (e < best) best = e;
        }
        printf("sequential read: %.2f GB/s (best of runs over 256 MB; checksum %u)\n\n",
               (double)bytes / best * 1e-9, (unsigned)sink);
        free(buf);
    }

    const int attention_only = only && !strcmp(only, "attention");
    if (!attention_only) {
        printf("%-6s %-12s %10s %12s %12s %9s %11s\n", "type", "rows x cols", "MB", "ref GB/s",
               "simd GB/s", "simd/ref", "F32 time /");
        printf("%-6s %-12s %10s %12s %12s %9s %11s\n", "", "", "", "", "", "", "this time");
    }
    for (int si = 0; si < (attention_only ? 0 : nshapes); si++) {
        const int rows = shapes[si][0], cols = shapes[si][1];
        double f32_ms = 0;
        float *x = malloc((size_t)cols * sizeof(float)),
              *out = malloc((size_t)rows * sizeof(float));
        void *xq = malloc((size_t)cols * sizeof(float) + 1024);
        float *src = malloc((size_t)cols * sizeof(float) * 64);
        for (int j = 0; j < cols; j++) x[j] = frand();
        for (int j = 0; j < cols * 64; j++) src[j] = frand() * 0.02f;
        for (int ti = 0; ti < ntypes; ti++) {
            const wlm_type_traits *t = wlm_type_get(types[ti]);
            if (only && types[ti] != WLM_TYPE_F32) { /* F32 always runs: it is the yardstick */
                const char *p = strstr(only, t->name);
                const size_t len = strlen(t->name);
                if (!p || (p[len] != 0 && p[len] != ',')) continue;
            }
            const size_t row_bytes = wlm_row_bytes(types[ti], cols);
            const size_t mat_bytes = row_bytes * (size_t)rows;
            int copies = (int)((pool_min + mat_bytes - 1) / mat_bytes);
            if (copies < 1) copies = 1;
            uint8_t *pool = malloc(mat_bytes * (size_t)copies);
            if (!pool) {
                printf("%-6s %5dx%-6d out of memory\n", t->name, rows, cols);
                continue;
            }
            /* 64 distinct quantized rows, repeated: realistic values, quick to make */
            uint8_t *proto = malloc(row_bytes * 64);
            for (int r = 0; r < 64; r++)
                t->from_float(src + (size_t)r * cols, proto + (size_t)r * row_bytes, cols);
            for (int c = 0; c < copies; c++)
                for (int r = 0; r < rows; r++)
                    memcpy(pool + (size_t)c * mat_bytes + (size_t)r * row_bytes,
                           proto + (size_t)(r % 64) * row_bytes, row_bytes);
            free(proto);
            const result rr = run(t, 0, pool, copies, mat_bytes, row_bytes, x, xq, out, rows, cols,
                                  budget * (types[ti] == WLM_TYPE_F32 ? 1 : 0.6));
            const result rs =
                run(t, 1, pool, copies, mat_bytes, row_bytes, x, xq, out, rows, cols, budget);
            if (types[ti] == WLM_TYPE_F32) f32_ms = rs.ms;
            char shape[32];
            snprintf(shape, sizeof shape, "%dx%d", rows, cols);
            printf("%-6s %-12s %10.2f %12.2f %12.2f %8.2fx %10.2fx\n", t->name, shape,
                   (double)mat_bytes / 1e6, rr.gbs, rs.gbs, rs.gbs / rr.gbs, f32_ms / rs.ms);
            fflush(stdout);
            free(pool);
        }
        printf("\n");
        free(x), free(out), free(xq), free(src);
    }
    if (!only || strstr(only, "attention")) bench_attention(hot, quick);
    return 0;
}
