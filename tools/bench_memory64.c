/*
 * bench_memory64.c — tools/bench_memory64.sh's harness: the quantized matrix-vector (decode) and
 * matrix-matrix (batch 16) kernels, built once as wasm32 and once as wasm64 from the same C by
 * the same LLVM 19, so tools/bench_memory64.mjs can time the two side by side in one Node 24
 * and say how much of the memory64 modules' loss is in the kernels. Weights: stories110M's
 * per-token matrices (12 layers x wq, wk, wv, wo 768x768, w1, w3 2048x768, w2 768x2048, and the
 * 32000x768 classifier) of one type, from the same seeded uniform floats in both builds.
 * Exports take and return 32-bit ints and doubles only, so JS calls both builds alike. No libc
 * output, no timing: the caller times the calls. Not a test, not part of the library.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/quant.h"

#define NMAT 85
#define NE 16

typedef struct mat {
    int rows, cols;
    void *w;
    size_t rb;
} mat;

/* One benchmark's matrices and activations: allocated by mb_setup, owned until the module goes. */
static struct {
    int type;
    mat m[NMAT];
    char *xq;      /* NE activations, xstride bytes apart, in the type's vec_dot_type */
    size_t xstride;
    float *out;    /* NE x 32000 */
} S;

static float frand(uint32_t *state) {
    *state = *state * 1664525u + 1013904223u;
    return ((*state >> 8) / 16777216.0f) * 2 - 1;
}

/* FNV-1a over the bits of out[0..n): what both builds must agree on. */
static uint32_t hash_f32(const float *out, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, out + i, 4);
        h = (h ^ u) * 16777619u;
    }
    return h;
}

/* Builds the matrices of `type` (ggml's id); returns 0, or -1 for a type without a quantizer or
 * out of memory. */
int mb_setup(int type) {
    const wlm_type_traits *tr = wlm_type_get(type);
    if (!tr || !tr->from_float) return -1;
    uint32_t rng = 12345;
    int k = 0;
    for (int l = 0; l < 12; l++) {
        static const int sh[7][2] = {{768, 768},  {768, 768},  {768, 768}, {768, 768},
                                     {2048, 768}, {2048, 768}, {768, 2048}};
        for (int i = 0; i < 7; i++) S.m[k].rows = sh[i][0], S.m[k++].cols = sh[i][1];
    }
    S.m[k].rows = 32000, S.m[k].cols = 768;
    float *tmp = malloc(sizeof(float) * 32000 * 768);
    if (!tmp) return -1;
    for (int i = 0; i < NMAT; i++) {
        const size_t ne = (size_t)S.m[i].rows * S.m[i].cols;
        for (size_t j = 0; j < ne; j++) tmp[j] = frand(&rng);
        S.m[i].rb = wlm_row_bytes(type, S.m[i].cols);
        S.m[i].w = malloc(S.m[i].rb * S.m[i].rows);
        if (!S.m[i].w) return -1;
        tr->from_float(tmp, S.m[i].w, (int64_t)ne);
    }
    S.xstride = 2048 / 256 * 292 + 64;
    S.xq = malloc(S.xstride * NE);
    S.out = malloc(sizeof(float) * NE * 32000);
    if (!S.xq || !S.out) return -1;
    for (int e = 0; e < NE; e++) {
        for (int j = 0; j < 2048; j++) tmp[j] = frand(&rng);
        wlm_type_get(tr->vec_dot_type)->from_float(tmp, S.xq + e * S.xstride, 2048);
    }
    free(tmp);
    S.type = type;
    return 0;
}

/* One decode token through every matrix (variant 0 the SIMD128 kernel, 1 the build's default:
 * relaxed in a relaxed build); `hot` 1 repeats layer 0's seven matrices instead (from cache).
 * Returns the hash of the last matrix's output (as a double, exact). */
double mb_decode(int variant, int hot) {
    const wlm_qmatvec_fn f =
        variant ? wlm_type_get(S.type)->matvec_simd : wlm_quant_matvec_simd128(S.type);
    for (int ii = 0; ii < NMAT; ii++) {
        const mat *m = &S.m[hot ? ii % 7 : ii];
        f(S.out, m->w, m->rb, S.xq, m->cols, 0, m->rows);
    }
    const mat *last = &S.m[hot ? (NMAT - 1) % 7 : NMAT - 1];
    return hash_f32(S.out, last->rows);
}

/* A batch of NE entries through the layers (no classifier) with the build's matrix-matrix
 * kernel, or NE matrix-vector products where the type has none. Returns the output's hash. */
double mb_prefill(void) {
    const wlm_qmatmat_fn mm = wlm_quant_matmat_simd(S.type);
    const wlm_qmatvec_fn f = wlm_type_get(S.type)->matvec_simd;
    for (int i = 0; i < NMAT - 1; i++) {
        const mat *m = &S.m[i];
        if (mm)
            mm(S.out, 32000, m->w, m->rb, S.xq, S.xstride, m->cols, 0, m->rows, NE);
        else
            for (int e = 0; e < NE; e++)
                f(S.out + e * 32000, m->w, m->rb, S.xq + e * S.xstride, m->cols, 0, m->rows);
    }
    uint32_t h = 0;
    for (int e = 0; e < NE; e++) h = h * 31u + hash_f32(S.out + e * 32000, S.m[NMAT - 2].rows);
    return h;
}
