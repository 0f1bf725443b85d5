/*
 * bench_matmat_ab.c — tools/bench_matmat_ab.sh's harness (issue 25): the split-form
 * matrix-matrix kernel of one quantized type at a prefill's shape, a git revision's (names
 * prefixed old_) against the work tree's, in one module, alternating, process CPU time. First the
 * two must give the same bits (the same products in the same order, only faster); then ITERS
 * rounds of both, each a whole ROWS x COLS product for NE entries split into the row tiles of
 * src/model/forward.c (64 KiB of weights each). Prints the medians, GMAC/s and the median of the
 * per-round ratios with its quartiles. Not a test.
 *
 *   args: TYPE (ggml id: 2 Q4_0, 3 Q4_1, 6 Q5_0, 7 Q5_1, 8 Q8_0, 12 Q4_K, 14 Q6_K, ...) ROWS COLS
 *         NE ITERS [nocheck]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/quant.h"

wlm_qmatmat_fn old_wlm_quant_matmat_split(int32_t type);

#include "bench_ab.h"

/* forward.c's tile_rows: 64 KiB of weight rows per call, an even count */
static int tile_rows(size_t rb, int rows) {
    size_t r = (65536 / rb) & ~(size_t)1;
    if (r < 2) r = 2;
    return r > (size_t)rows ? rows : (int)r;
}

static void product(wlm_qmatmat_fn f, float *out, const void *w, size_t rb, const void *xq,
                    size_t xs, int n, int rows, int ne) {
    const int R = tile_rows(rb, rows);
    for (int a = 0; a < rows; a += R) f(out, rows, w, rb, xq, xs, n, a, rows - a < R ? rows : a + R, ne);
}

int main(int argc, char **argv) {
    const int type = argc > 1 ? atoi(argv[1]) : WLM_TYPE_Q5_0;
    const int rows = argc > 2 ? atoi(argv[2]) : 4864, n = argc > 3 ? atoi(argv[3]) : 896;
    const int ne = argc > 4 ? atoi(argv[4]) : 64;
    int iters = argc > 5 ? atoi(argv[5]) : 9;
    if (iters < 1 || iters > 64) iters = 9;
    const wlm_type_traits *t = wlm_type_get(type);
    const wlm_qmatmat_fn f[2] = {old_wlm_quant_matmat_split(type), wlm_quant_matmat_split(type)};
    if (!t->name || !f[0] || !f[1] || rows < 2 || ne < 1 || n % t->block_size) {
        printf("no split-form matrix-matrix kernel for type %d in both revisions, or a bad shape\n", type);
        return 1;
    }
    const wlm_type_traits *vt = wlm_type_get(t->vec_dot_type);
    const size_t rb = wlm_row_bytes(type, n), xs = wlm_row_bytes(t->vec_dot_type, n);
    uint32_t rng = 1;
    float *tmp = malloc(sizeof(float) * (size_t)rows * n);
    void *w = malloc(rb * rows);
    char *xq = malloc(xs * ne);
    float *o1 = malloc(sizeof(float) * rows * ne), *o2 = malloc(sizeof(float) * rows * ne);
    for (size_t i = 0; i < (size_t)rows * n; i++) tmp[i] = frand(&rng);
    t->from_float(tmp, w, (int64_t)rows * n);
    for (int e = 0; e < ne; e++) {
        for (int j = 0; j < n; j++) tmp[j] = 3 * frand(&rng);
        vt->from_float(tmp, xq + (size_t)e * xs, n);
    }
    product(f[0], o1, w, rb, xq, xs, n, rows, ne);
    product(f[1], o2, w, rb, xq, xs, n, rows, ne);
    if (memcmp(o1, o2, sizeof(float) * rows * ne)) {
        printf("MISMATCH: the work tree's bits differ from the revision's\n");
        if (argc <= 6) return 1;
    }
    double ms[2][64], ratio[64];
    for (int i = 0; i < iters; i++)
        for (int k0 = 0; k0 < 2; k0++) {
            const int k = (i & 1) ? 1 - k0 : k0;
            const double t0 = now();
            product(f[k], o1, w, rb, xq, xs, n, rows, ne);
            ms[k][i] = (now() - t0) * 1e3;
        }
    for (int i = 0; i < iters; i++) ratio[i] = ms[0][i] / ms[1][i];
    qsort(ms[0], iters, sizeof(double), cmpd);
    qsort(ms[1], iters, sizeof(double), cmpd);
    qsort(ratio, iters, sizeof(double), cmpd);
    const double macs = (double)rows * n * ne;
    printf("%s %dx%d x%d: rev %.2f ms (%.1f GMAC/s)  work tree %.2f ms (%.1f GMAC/s)  "
           "work tree/rev %.3fx [%.3f..%.3f]\n",
           t->name, rows, n, ne, ms[0][iters / 2], macs / ms[0][iters / 2] / 1e6, ms[1][iters / 2],
           macs / ms[1][iters / 2] / 1e6, ratio[iters / 2], ratio[iters / 4], ratio[3 * iters / 4]);
    free(tmp), free(w), free(xq), free(o1), free(o2);
    return 0;
}
