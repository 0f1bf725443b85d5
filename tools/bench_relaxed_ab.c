/*
 * bench_relaxed_ab.c — tools/bench_relaxed_ab.sh's harness: the quantized kernels of a git
 * revision (names prefixed old_) against the work tree's, in one module, one Node, alternating.
 * Weights: stories110M's per-token matrices (12 layers x wq, wk, wv, wo 768x768, w1, w3
 * 2048x768, w2 768x2048, and the 32000x768 classifier) of one type, from uniform random floats.
 *   - first the bitwise check: every matrix-vector kernel (SIMD128 of REV, relaxed of REV and of
 *     the work tree) gives the same bits, and both matrix-matrix kernels (or REV's per-entry
 *     matvec where it has none) give the per-entry SIMD128 bits for 16 entries;
 *   - then per iteration, in turn: one decode token through all matrices with each variant
 *     (SIMD128 of REV, relaxed new, relaxed REV, optionally F32), and a batch of 16 entries
 *     through the layers (REV's batch path, the work tree's, 16 SIMD128 matvecs).
 * Times are process CPU time (process.cpuUsage), so other jobs on the machine do not stretch
 * them (they still share caches and memory bandwidth). Printed: medians per variant and the
 * medians of the per-iteration ratios with their quartiles. Not a test.
 *
 *   args: TYPE (q8_0 q4_0 q5_0 q4_1 q5_1 q2_K q3_K q4_K q5_K q6_K) ITERS (<= 64) F32 (0/1) MODE (0 cold, 1 one layer
 *   repeated, 2 one 768x768 matrix repeated)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/quant.h"

wlm_qmatvec_fn old_wlm_quant_matvec_simd128(int32_t type);
wlm_qmatmat_fn old_wlm_quant_matmat_simd(int32_t type);
void old_wlm_q8_0_matvec_simd(float *, const void *, size_t, const void *, int, int, int);
void old_wlm_q4_0_matvec_simd(float *, const void *, size_t, const void *, int, int, int);
void old_wlm_q5_0_matvec_simd(float *, const void *, size_t, const void *, int, int, int);
void old_wlm_q4_K_matvec_simd(float *, const void *, size_t, const void *, int, int, int);
void old_wlm_q6_K_matvec_simd(float *, const void *, size_t, const void *, int, int, int);
void old_wlm_q4_1_matvec_simd(float *, const void *, size_t, const void *, int, int, int);
void old_wlm_q5_1_matvec_simd(float *, const void *, size_t, const void *, int, int, int);
void old_wlm_q2_K_matvec_simd(float *, const void *, size_t, const void *, int, int, int);
void old_wlm_q3_K_matvec_simd(float *, const void *, size_t, const void *, int, int, int);
void old_wlm_q5_K_matvec_simd(float *, const void *, size_t, const void *, int, int, int);

#include "bench_ab.h"
static uint32_t rng = 12345; /* frand's state: the weights, then the activations */

#define NMAT 85
typedef struct mat {
    int rows, cols;
    void *w;
    size_t rb;
} mat;

int main(int argc, char **argv) {
    static const struct {
        const char *name;
        int type;
        wlm_qmatvec_fn oldrx;
    } types[] = {
        {"q8_0", WLM_TYPE_Q8_0, old_wlm_q8_0_matvec_simd},
        {"q4_0", WLM_TYPE_Q4_0, old_wlm_q4_0_matvec_simd},
        {"q5_0", WLM_TYPE_Q5_0, old_wlm_q5_0_matvec_simd},
        {"q4_1", WLM_TYPE_Q4_1, old_wlm_q4_1_matvec_simd},
        {"q5_1", WLM_TYPE_Q5_1, old_wlm_q5_1_matvec_simd},
        {"q2_K", WLM_TYPE_Q2_K, old_wlm_q2_K_matvec_simd},
        {"q3_K", WLM_TYPE_Q3_K, old_wlm_q3_K_matvec_simd},
        {"q4_K", WLM_TYPE_Q4_K, old_wlm_q4_K_matvec_simd},
        {"q5_K", WLM_TYPE_Q5_K, old_wlm_q5_K_matvec_simd},
        {"q6_K", WLM_TYPE_Q6_K, old_wlm_q6_K_matvec_simd},
    };
    int type = WLM_TYPE_Q8_0; /* the default, and where TYPE is none of the table's */
    wlm_qmatvec_fn oldrx = old_wlm_q8_0_matvec_simd;
    for (size_t i = 0; argc > 1 && i < sizeof types / sizeof types[0]; i++)
        if (!strcmp(argv[1], types[i].name)) type = types[i].type, oldrx = types[i].oldrx;
    int iters = argc > 2 ? atoi(argv[2]) : 9;
    if (iters < 1 || iters > 64)
        iters = 9;
    int do_f32 = argc > 3 ? atoi(argv[3]) : 0;
    int hot = argc > 4 ? atoi(argv[4]) : 0;
    const wlm_type_traits *tr = wlm_type_get(type);
    mat m[NMAT];
    int k = 0;
    for (int l = 0; l < 12; l++) {
        int sh[7][2] = {{768, 768},  {768, 768},  {768, 768}, {768, 768},
                        {2048, 768}, {2048, 768}, {768, 2048}};
        for (int i = 0; i < 7; i++)
            m[k].rows = sh[i][0], m[k++].cols = sh[i][1];
    }
    m[k].rows = 32000, m[k++].cols = 768;
    float *tmp = malloc(sizeof(float) * 32000 * 768);
    float *f32[NMAT];
    for (int i = 0; i < NMAT; i++) {
        size_t ne = (size_t)m[i].rows * m[i].cols;
        for (size_t j = 0; j < ne; j++)
            tmp[j] = frand(&rng);
        m[i].rb = wlm_row_bytes(type, m[i].cols);
        m[i].w = malloc(m[i].rb * m[i].rows);
        tr->from_float(tmp, m[i].w, ne);
        f32[i] = NULL;
        if (do_f32) {
            f32[i] = malloc(ne * 4);
            memcpy(f32[i], tmp, ne * 4);
        }
    }
    float x[16][2048];
    for (int e = 0; e < 16; e++)
        for (int j = 0; j < 2048; j++)
            x[e][j] = frand(&rng);
    static char xq[16][2048 / 256 * 292 + 64];
    for (int e = 0; e < 16; e++)
        wlm_type_get(tr->vec_dot_type)->from_float(x[e], xq[e], 2048);
    float *outA = malloc(16 * 32000 * 4), *outB = malloc(16 * 32000 * 4);

    wlm_qmatvec_fn v[5] = {old_wlm_quant_matvec_simd128(type), tr->matvec_simd, oldrx, NULL,
                           wlm_quant_matvec_simd128(type)};
    const char *vn[5] = {"s128(main)", "rx(new)", "rx(main)", "f32", "s128(new)"};
    /* bitwise check, all matrices: each revision's relaxed kernel against its SIMD128 kernel (the
     * two revisions may differ from each other where the float order changed) */
    int order_changed = 0;
    for (int i = 0; i < NMAT; i++) {
        static const int pairs[2][2] = {{4, 1}, {0, 2}};
        for (int p = 0; p < 2; p++) {
            v[pairs[p][0]](outA, m[i].w, m[i].rb, xq[0], m[i].cols, 0, m[i].rows);
            v[pairs[p][1]](outB, m[i].w, m[i].rb, xq[0], m[i].cols, 0, m[i].rows);
            if (memcmp(outA, outB, 4 * m[i].rows)) {
                printf("MISMATCH matvec %s vs %s mat %d\n", vn[pairs[p][0]], vn[pairs[p][1]], i);
                return 1;
            }
        }
        v[1](outB, m[i].w, m[i].rb, xq[0], m[i].cols, 0, m[i].rows); /* outA: main's SIMD128 */
        order_changed += memcmp(outA, outB, 4 * m[i].rows) != 0;
    }
    if (order_changed) printf("(main's and the work tree's bits differ in %d of %d matrices)\n", order_changed, NMAT);
    wlm_qmatmat_fn mm[2] = {old_wlm_quant_matmat_simd(type), wlm_quant_matmat_simd(type)};
    for (int i = 0; i < 8; i++) {
        for (int t = 0; t < 2; t++) {
            memset(outB, 0, 16 * 32000 * 4);
            if (mm[t])
                mm[t](outB, 32000, m[i].w, m[i].rb, xq, sizeof xq[0], m[i].cols, 0, m[i].rows, 16);
            else
                for (int e = 0; e < 16; e++)
                    v[t ? 1 : 2](outB + e * 32000, m[i].w, m[i].rb, xq[e], m[i].cols, 0, m[i].rows);
            for (int e = 0; e < 16; e++) {
                v[t ? 4 : 0](outA, m[i].w, m[i].rb, xq[e], m[i].cols, 0, m[i].rows);
                if (memcmp(outA, outB + e * 32000, 4 * m[i].rows)) {
                    printf("MISMATCH matmat %d mat %d e %d\n", t, i, e);
                    return 1;
                }
            }
        }
    }
    printf("bitwise: ok\n");
    int nv = 5;
    double td[5][64], tm[3][64];
    for (int it = 0; it < iters; it++) {
        for (int t = 0; t < nv; t++) {
            if (t == 3 && !do_f32) continue;
            double t0 = now();
            for (int ii = 0; ii < NMAT; ii++) {
                const int i = hot == 2 ? 0 : hot ? ii % 7 : ii;
                if (t == 3)
                    wlm_matvec_simd(outA, f32[i], x[0], m[i].cols, 0, m[i].rows);
                else
                    v[t](outA, m[i].w, m[i].rb, xq[0], m[i].cols, 0, m[i].rows);
            }
            td[t][it] = now() - t0;
        }
        /* prefill: batch 16 over the layers (no classifier): old matmat, new matmat, s128 per entry
         */
        for (int t = 0; t < 3; t++) {
            double t0 = now();
            for (int ii = 0; ii < NMAT - 1; ii++) {
                const int i = hot == 2 ? 0 : hot ? ii % 7 : ii;
                if (t < 2 && mm[t])
                    mm[t](outA, 32000, m[i].w, m[i].rb, xq, sizeof xq[0], m[i].cols, 0, m[i].rows,
                          16);
                else if (t < 2)
                    for (int e = 0; e < 16; e++)
                        v[2](outA + e * 32000, m[i].w, m[i].rb, xq[e], m[i].cols, 0, m[i].rows);
                else
                    for (int e = 0; e < 16; e++)
                        v[0](outA + e * 32000, m[i].w, m[i].rb, xq[e], m[i].cols, 0, m[i].rows);
            }
            tm[t][it] = now() - t0;
        }
    }
    double rr[64], rs[64], rm[64], rn[64], rf[64];
    for (int it = 0; it < iters; it++)
        rr[it] = td[2][it] / td[1][it], rs[it] = td[0][it] / td[1][it],
        rm[it] = tm[0][it] / tm[1][it], rn[it] = td[0][it] / td[4][it],
        rf[it] = do_f32 ? td[3][it] / td[1][it] : 0;
    qsort(rr, iters, 8, cmpd);
    qsort(rs, iters, 8, cmpd);
    qsort(rm, iters, 8, cmpd);
    qsort(rn, iters, 8, cmpd);
    qsort(rf, iters, 8, cmpd);
    printf("paired medians: new/main(rx) %.3fx [%.3f..%.3f]  new/s128(main) %.3fx  "
           "s128 new/main %.3fx [%.3f..%.3f]  mm new/main %.3fx [%.3f..%.3f]",
           rr[iters / 2], rr[iters / 4], rr[3 * iters / 4], rs[iters / 2], rn[iters / 2],
           rn[iters / 4], rn[3 * iters / 4], rm[iters / 2], rm[iters / 4], rm[3 * iters / 4]);
    if (do_f32) printf("  rx(new)/f32 %.3fx [%.3f..%.3f]", rf[iters / 2], rf[iters / 4], rf[3 * iters / 4]);
    printf("\n");
    double med[5] = {0}, medm[3];
    for (int t = 0; t < nv; t++) {
        if (t == 3 && !do_f32) continue;
        qsort(td[t], iters, 8, cmpd);
        med[t] = td[t][iters / 2];
    }
    for (int t = 0; t < 3; t++) {
        qsort(tm[t], iters, 8, cmpd);
        medm[t] = tm[t][iters / 2];
    }
    printf("%s decode ms/token (median of %d):", tr->name, iters);
    for (int t = 0; t < nv; t++)
        if (t != 3 || do_f32) printf("  %s %.2f", vn[t], med[t] * 1e3);
    printf("\n  new/main(rx) speed %.3fx, new/s128 %.3fx", med[2] / med[1], med[0] / med[1]);
    if (do_f32)
        printf(", new/f32 %.3fx", med[3] / med[1]);
    printf("\n  batch16 ms (layers): mm(main) %.1f  mm(new) %.1f  s128x16 %.1f  new/main %.3fx "
           "new/s128x16 %.3fx\n",
           medm[0] * 1e3, medm[1] * 1e3, medm[2] * 1e3, medm[0] / medm[1], medm[2] / medm[1]);
    return 0;
}
