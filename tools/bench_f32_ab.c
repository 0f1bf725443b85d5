/*
 * bench_f32_ab.c — tools/bench_f32_ab.sh's harness: the F32 matrix kernels (kernels_simd.c's
 * wlm_matvec_simd / wlm_matmat_simd) of a git revision's SIMD128 build (names prefixed old_)
 * against the work tree's SIMD128 build (prefixed s128_) and its relaxed-SIMD build (unprefixed),
 * in one module, one Node, alternating per iteration. Weights: stories110M's per-token matrices
 * (12 layers x wq, wk, wv, wo 768x768, w1, w3 2048x768, w2 768x2048, and the 32000x768
 * classifier), uniform random floats.
 *   - bits: the work tree's SIMD128 matvec and matmat equal REV's; within each build the matmat
 *     of 16 entries equals 16 matvecs; the relaxed build's largest difference from SIMD128's
 *     (relative to sum |w x|) is printed;
 *   - per iteration, for each variant: one decode token (every matrix, matvec, weights streamed
 *     from memory) and a batch of 16 entries through the 84 layer matrices in forward.c's tiles
 *     of 64 KiB of rows (matmat).
 * Times are process CPU time (process.cpuUsage). Printed: medians, and per-iteration ratios'
 * medians [quartiles]. Not a test.   args: ITERS (<= 64)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"

#define DECL(p)                                                                                   \
    void p##wlm_matvec_simd(float *, const float *, const float *, int, int, int);               \
    void p##wlm_matmat_simd(float *, size_t, const float *, const float *, size_t, int, int, int, \
                            int);
DECL(old_)
DECL(s128_)

#include "bench_ab.h"
static uint32_t rng = 12345; /* frand's state: the weights, then the activations */

#define NMAT 85
#define NB 16
typedef struct mat {
    int rows, cols;
    float *w;
} mat;

static wlm_matvec_fn mv[3] = {old_wlm_matvec_simd, s128_wlm_matvec_simd, wlm_matvec_simd};
static wlm_matmat_fn mm[3] = {old_wlm_matmat_simd, s128_wlm_matmat_simd, wlm_matmat_simd};
static const char *vn[3] = {"s128(rev)", "s128(new)", "rx(new)"};

/* forward.c's matmul_rows for F32 weights and nb > 1 */
static void tiled(int v, float *out, const mat *m, const float *x) {
    int R = (int)(65536 / ((size_t)m->cols * 4)) & ~1;
    if (R < 2) R = 2;
    if (R > m->rows) R = m->rows;
    for (int a = 0; a < m->rows; a += R) {
        const int b = m->rows - a < R ? m->rows : a + R;
        mm[v](out, 32000, m->w, x, 2048, m->cols, a, b, NB);
    }
}

int main(int argc, char **argv) {
    int iters = argc > 1 ? atoi(argv[1]) : 9;
    if (iters < 1 || iters > 64) iters = 9;
    mat m[NMAT];
    int k = 0;
    for (int l = 0; l < 12; l++) {
        int sh[7][2] = {{768, 768},  {768, 768},  {768, 768}, {768, 768},
                        {2048, 768}, {2048, 768}, {768, 2048}};
        for (int i = 0; i < 7; i++) m[k].rows = sh[i][0], m[k++].cols = sh[i][1];
    }
    m[k].rows = 32000, m[k++].cols = 768;
    for (int i = 0; i < NMAT; i++) {
        size_t ne = (size_t)m[i].rows * m[i].cols;
        m[i].w = malloc(ne * 4);
        for (size_t j = 0; j < ne; j++) m[i].w[j] = frand(&rng);
    }
    static float x[NB][2048];
    for (int e = 0; e < NB; e++)
        for (int j = 0; j < 2048; j++) x[e][j] = frand(&rng);
    float *outA = malloc(NB * 32000 * 4), *outB = malloc(NB * 32000 * 4);
    double worst = 0;
    int bad = 0;
    for (int i = 0; i < NMAT; i++) {
        for (int v = 0; v < 3; v++) {
            if (i < 8) { /* matmat of 16 == 16 matvecs, each build */
                tiled(v, outB, &m[i], x[0]);
                for (int e = 0; e < NB; e++) {
                    mv[v](outA, m[i].w, x[e], m[i].cols, 0, m[i].rows);
                    if (memcmp(outA, outB + e * 32000, 4 * (size_t)m[i].rows)) {
                        printf("MISMATCH %s matmat vs matvec, matrix %d entry %d\n", vn[v], i, e);
                        bad = 1;
                        break;
                    }
                }
            }
        }
        mv[0](outA, m[i].w, x[0], m[i].cols, 0, m[i].rows);
        mv[1](outB, m[i].w, x[0], m[i].cols, 0, m[i].rows);
        if (memcmp(outA, outB, 4 * (size_t)m[i].rows)) {
            printf("MISMATCH s128 rev vs new, matrix %d\n", i);
            bad = 1;
        }
        mv[2](outB, m[i].w, x[0], m[i].cols, 0, m[i].rows);
        for (int r = 0; r < m[i].rows; r++) {
            double mag = 0;
            for (int j = 0; j < m[i].cols; j++)
                mag += fabs((double)m[i].w[(size_t)r * m[i].cols + j] * x[0][j]);
            const double d = fabs((double)outA[r] - outB[r]) / mag;
            if (d > worst) worst = d;
        }
    }
    if (!bad) printf("bitwise: ok (matmat = matvec in each build, SIMD128 rev = new); relaxed vs SIMD128: "
           "largest |diff| / sum|w x| %.3g\n", worst);
    double td[3][64], tm[3][64];
    for (int it = 0; it < iters; it++) {
        for (int t0i = 0; t0i < 3; t0i++) {
            const int v = (t0i + it) % 3; /* rotate the order */
            double t0 = now();
            for (int i = 0; i < NMAT; i++) mv[v](outA, m[i].w, x[0], m[i].cols, 0, m[i].rows);
            td[v][it] = now() - t0;
            t0 = now();
            for (int i = 0; i < NMAT - 1; i++) tiled(v, outA, &m[i], x[0]);
            tm[v][it] = now() - t0;
        }
    }
    double r[4][64];
    for (int it = 0; it < iters; it++) {
        r[0][it] = td[1][it] / td[2][it];  /* decode s128(new) / rx */
        r[1][it] = tm[1][it] / tm[2][it];  /* batch s128(new) / rx */
        r[2][it] = tm[0][it] / tm[1][it];  /* batch s128 rev / new */
        r[3][it] = td[0][it] / td[1][it];  /* decode s128 rev / new */
    }
    const char *rn[4] = {"decode s128(new)/rx", "batch16 s128(new)/rx", "batch16 s128 rev/new",
                         "decode s128 rev/new"};
    for (int q = 0; q < 4; q++) {
        qsort(r[q], iters, 8, cmpd);
        printf("  speed %s: %.3fx [%.3f..%.3f]\n", rn[q], r[q][iters / 2], r[q][iters / 4],
               r[q][3 * iters / 4]);
    }
    printf("medians of %d (ms): decode token (85 matrices) / batch 16 (84 layer matrices) / "
           "layer MACs per ns at batch 16\n", iters);
    for (int v = 0; v < 3; v++) {
        qsort(td[v], iters, 8, cmpd);
        qsort(tm[v], iters, 8, cmpd);
        const double macs = 16.0 * 12 * (4 * 768 * 768 + 3 * 2048 * 768);
        printf("  %-10s %7.2f  %7.1f  %.2f\n", vn[v], td[v][iters / 2] * 1e3, tm[v][iters / 2] * 1e3,
               macs / tm[v][iters / 2] * 1e-9);
    }
    return bad;
}
