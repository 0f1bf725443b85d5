/*
 * test_kernels.c — every kernel of kernels.h: the SIMD128 set against the scalar reference on
 * odd lengths, misaligned pointers and row ranges, and both against exact math (double
 * precision, or cases where float arithmetic is exact). Natively the SIMD set forwards to the
 * reference, so the comparison that matters runs in the Emscripten build (-msimd128, node).
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/quant.h"
#include "test_util.h"

/* Lengths around every vector width and unroll factor (4, 8, 16) and the model sizes
 * (dim 64 / 288, hidden 172 / 768). */
static const int LENGTHS[] = {1,   2,   3,   4,   5,   7,   8,   9,   12,  15,  16,   17,   31,  32,
                              33,  63,  64,  65,  127, 128, 129, 172, 255, 256, 257,  288,  289, 511,
                              512, 513, 768, 769, 1023, 1025, 4097};
#define N_LENGTHS ((int)(sizeof LENGTHS / sizeof LENGTHS[0]))
#define MAXN 4097
#define PAD 4 /* floats before each array, so a pointer can be offset to break 16-byte alignment */

static tu_rng rng = {20240601u};

static void fill(float *x, int n, float lo, float hi) {
    for (int i = 0; i < n; i++) x[i] = tu_rng_uniform(&rng, lo, hi);
}

static float *alloc_f(size_t n) { return (float *)calloc(n + 2 * PAD, sizeof(float)); }

/* ------------------------------------------------------------------------------------------ */

static void test_tables(void) {
    tu_section("tables");
    printf("kernel set under test: wlm_kernels_have_simd() = %d, simd table name \"%s\", "
           "reference table name \"%s\"\n",
           wlm_kernels_have_simd(), wlm_kernels_simd.name ? wlm_kernels_simd.name : "(null)",
           wlm_kernels_ref.name ? wlm_kernels_ref.name : "(null)");
    if (!wlm_kernels_have_simd())
        printf("note: no SIMD128 in this build; the SIMD-vs-reference comparisons are trivial "
               "here and meaningful in the wasm build\n");
    CHECK(wlm_kernels_ref.name != NULL && strcmp(wlm_kernels_ref.name, "scalar") == 0);
    CHECK(wlm_kernels_simd.name != NULL);
    if (wlm_kernels_have_simd()) CHECK(strcmp(wlm_kernels_simd.name, "simd128") == 0);
    CHECK(wlm_kernels_ref.matvec == wlm_matvec_ref);
    CHECK(wlm_kernels_ref.rmsnorm == wlm_rmsnorm_ref);
    CHECK(wlm_kernels_ref.softmax == wlm_softmax_ref);
    CHECK(wlm_kernels_ref.rope == wlm_rope_ref);
    CHECK(wlm_kernels_ref.attention_f16 == wlm_attention_f16_ref);
    CHECK(wlm_kernels_ref.swiglu == wlm_swiglu_ref);
    CHECK(wlm_kernels_ref.dot == wlm_dot_ref);
    CHECK(wlm_kernels_ref.axpy == wlm_axpy_ref);
    CHECK(wlm_kernels_simd.matvec == wlm_matvec_simd);
    CHECK(wlm_kernels_simd.matmat == wlm_matmat_simd);
    CHECK(wlm_kernels_ref.matmat == wlm_matmat_ref);
    CHECK(wlm_kernels_simd.rmsnorm == wlm_rmsnorm_simd);
    CHECK(wlm_kernels_simd.softmax == wlm_softmax_simd);
    CHECK(wlm_kernels_simd.rope == wlm_rope_simd);
    CHECK(wlm_kernels_simd.attention_f16 == wlm_attention_f16_simd);
    CHECK(wlm_kernels_simd.swiglu == wlm_swiglu_simd);
    CHECK(wlm_kernels_simd.dot == wlm_dot_simd);
    CHECK(wlm_kernels_simd.axpy == wlm_axpy_simd);
    CHECK(wlm_kernels_ref.rope_neox == wlm_rope_neox_ref);
    CHECK(wlm_kernels_ref.layernorm == wlm_layernorm_ref);
    CHECK(wlm_kernels_ref.gelu == wlm_gelu_ref);
    CHECK(wlm_kernels_simd.rope_neox == wlm_rope_neox_simd);
    CHECK(wlm_kernels_simd.layernorm == wlm_layernorm_simd);
    CHECK(wlm_kernels_simd.gelu == wlm_gelu_simd);
}

/* ------------------------------------------------------------------------------------------ */
/* dot: both sets within 1e-5 of the exact (double) sum, relative to sum |a_i b_i|.            */

static void test_dot(void) {
    float *a = alloc_f(MAXN), *b = alloc_f(MAXN);
    tu_section("dot");
    for (int li = 0; li < N_LENGTHS; li++) {
        int n = LENGTHS[li];
        for (int off = 0; off < 2; off++) {
            float *pa = a + PAD + off, *pb = b + PAD + (off ? 3 : 0);
            fill(pa, n, -1.0f, 1.0f);
            fill(pb, n, -1.0f, 1.0f);
            double exact = 0, mag = 0;
            for (int i = 0; i < n; i++) {
                exact += (double)pa[i] * pb[i];
                mag += fabs((double)pa[i] * pb[i]);
            }
            double tol = 1e-5 * mag + 1e-30;
            float r = wlm_dot_ref(pa, pb, n), s = wlm_dot_simd(pa, pb, n);
            CHECKF(fabs(r - exact) <= tol, "n=%d off=%d ref %.9g exact %.9g", n, off, r, exact);
            CHECKF(fabs(s - exact) <= tol, "n=%d off=%d simd %.9g exact %.9g", n, off, s, exact);
            CHECKF(fabs(s - r) <= tol, "n=%d off=%d simd %.9g ref %.9g", n, off, s, r);
        }
    }
    /* Small integers: every partial sum is exact in float32, so every order gives the same. */
    for (int li = 0; li < N_LENGTHS; li++) {
        int n = LENGTHS[li];
        float *pa = a + PAD, *pb = b + PAD;
        long long exact = 0;
        for (int i = 0; i < n; i++) {
            pa[i] = (float)((i * 7) % 11 - 5);
            pb[i] = (float)((i * 3) % 5 - 2);
            exact += (long long)pa[i] * (long long)pb[i];
        }
        CHECKF(wlm_dot_ref(pa, pb, n) == (float)exact, "n=%d", n);
        CHECKF(wlm_dot_simd(pa, pb, n) == (float)exact, "n=%d", n);
    }
    free(a);
    free(b);
}

/* ------------------------------------------------------------------------------------------ */
/* matvec: row ranges [r0, r1), rows outside untouched, against double and reference.          */

static void check_matvec(int d, int n, int r0, int r1, int off) {
    float *w = alloc_f((size_t)d * n), *x = alloc_f(n), *o1 = alloc_f(d), *o2 = alloc_f(d);
    float *pw = w + PAD + off, *px = x + PAD + off;
    const float sentinel = -12345.5f;
    fill(pw, d * n, -1.0f, 1.0f);
    fill(px, n, -1.0f, 1.0f);
    for (int r = 0; r < d + 2 * PAD; r++) o1[r] = o2[r] = sentinel;
    wlm_matvec_ref(o1 + PAD, pw, px, n, r0, r1);
    wlm_matvec_simd(o2 + PAD, pw, px, n, r0, r1);
    int bad_range = 0, bad_outside = 0, first_bad = -1;
    double worst = 0;
    for (int r = -PAD; r < d + PAD; r++) {
        float a = o1[PAD + r], b = o2[PAD + r];
        if (r < r0 || r >= r1) {
            if (a != sentinel || b != sentinel) bad_outside++;
            continue;
        }
        double exact = 0, mag = 0;
        for (int j = 0; j < n; j++) {
            exact += (double)pw[(size_t)r * n + j] * px[j];
            mag += fabs((double)pw[(size_t)r * n + j] * px[j]);
        }
        double tol = 1e-5 * mag + 1e-30;
        double e = fmax(fabs(a - exact), fmax(fabs(b - exact), fabs(a - b)));
        if (e > tol) {
            bad_range++;
            if (first_bad < 0) first_bad = r;
        }
        if (mag > 0 && e / mag > worst) worst = e / mag;
    }
    CHECKF(bad_range == 0, "d=%d n=%d rows [%d,%d) off=%d: %d rows off, first %d, worst rel %.3g",
           d, n, r0, r1, off, bad_range, first_bad, worst);
    CHECKF(bad_outside == 0, "d=%d n=%d rows [%d,%d): %d rows outside the range were written", d,
           n, r0, r1, bad_outside);
    free(w);
    free(x);
    free(o1);
    free(o2);
}

static void test_matvec(void) {
    static const int ROWS[] = {1, 2, 3, 4, 5, 7, 8, 9, 13, 17, 64};
    tu_section("matvec");
    for (unsigned ri = 0; ri < sizeof ROWS / sizeof ROWS[0]; ri++) {
        int d = ROWS[ri];
        for (int li = 0; li < N_LENGTHS; li++) {
            int n = LENGTHS[li];
            if ((long)d * n > 300000) continue;
            check_matvec(d, n, 0, d, 0);
            check_matvec(d, n, 0, d, 1);
            if (d > 1) check_matvec(d, n, 1, d, li & 1);       /* r0 > 0 */
            if (d > 2) check_matvec(d, n, 1, d - 1, 0);        /* both ends inside */
            if (d > 4) check_matvec(d, n, 3, d, 2);            /* r0 not a multiple of 4 */
            check_matvec(d, n, d / 2, d / 2 + 1, 1);           /* one row */
            check_matvec(d, n, d / 2, d / 2, 0);               /* empty range: nothing written */
        }
    }
    /* The model's shapes: wq (288, 288), w1 (768, 288), w2 (288, 768), split in two halves. */
    check_matvec(288, 288, 0, 288, 0);
    check_matvec(768, 288, 0, 384, 0);
    check_matvec(768, 288, 384, 768, 0);
    check_matvec(288, 768, 0, 288, 1);
    check_matvec(172, 64, 0, 172, 0);
    check_matvec(64, 172, 5, 63, 0);

    /* Identity: out == x exactly (one product by 1, the rest exact zeros). */
    for (int li = 0; li < N_LENGTHS; li++) {
        int n = LENGTHS[li];
        if (n > 600) continue;
        float *w = alloc_f((size_t)n * n), *x = alloc_f(n), *o1 = alloc_f(n), *o2 = alloc_f(n);
        float *pw = w + PAD, *px = x + PAD;
        fill(px, n, -3.0f, 3.0f);
        for (int i = 0; i < n; i++) pw[(size_t)i * n + i] = 1.0f;
        wlm_matvec_ref(o1 + PAD, pw, px, n, 0, n);
        wlm_matvec_simd(o2 + PAD, pw, px, n, 0, n);
        int bad = 0;
        for (int i = 0; i < n; i++) bad += o1[PAD + i] != px[i] || o2[PAD + i] != px[i];
        CHECKF(bad == 0, "identity n=%d: %d rows differ from x", n, bad);
        free(w);
        free(x);
        free(o1);
        free(o2);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* rmsnorm                                                                                     */

static void test_rmsnorm(void) {
    float *x = alloc_f(MAXN), *w = alloc_f(MAXN), *o1 = alloc_f(MAXN), *o2 = alloc_f(MAXN);
    float *ax = alloc_f(MAXN);
    tu_section("rmsnorm");
    for (int li = 0; li < N_LENGTHS; li++) {
        int n = LENGTHS[li];
        for (int off = 0; off < 2; off++) {
            float *px = x + PAD + off, *pw = w + PAD + (off ? 2 : 0);
            float *p1 = o1 + PAD + off, *p2 = o2 + PAD + (off ? 3 : 0);
            const float eps = 1e-5f;
            fill(px, n, -2.0f, 2.0f);
            fill(pw, n, 0.5f, 1.5f);
            wlm_rmsnorm_ref(p1, px, pw, n, eps);
            wlm_rmsnorm_simd(p2, px, pw, n, eps);
            double ss = 0;
            for (int i = 0; i < n; i++) ss += (double)px[i] * px[i];
            double inv = 1.0 / sqrt(ss / n + eps);
            int bad = 0, first = -1;
            for (int i = 0; i < n; i++) {
                double exact = (double)px[i] * pw[i] * inv;
                double tol = 1e-5 * fabs(exact) + 1e-7;
                if (fabs(p1[i] - exact) > tol || fabs(p2[i] - exact) > tol ||
                    fabs(p1[i] - p2[i]) > tol) {
                    if (first < 0) first = i;
                    bad++;
                }
            }
            CHECKF(bad == 0, "n=%d off=%d: %d elements off, first %d", n, off, bad, first);
            /* bitwise ggml's arithmetic (ggml_compute_forward_rms_norm_f32, then ggml_mul): the
             * float squares added in order to a double, mean and scale in float, y = x * scale,
             * then y * w; the SIMD kernel gives the same bits */
            double gsum = 0.0;
            for (int i = 0; i < n; i++) gsum += (double)(float)(px[i] * px[i]);
            const float gmean = (float)(gsum / (double)n), gscale = 1.0f / sqrtf(gmean + eps);
            int nbits = 0;
            for (int i = 0; i < n; i++) {
                float y = px[i] * gscale;
                y = y * pw[i];
                nbits += memcmp(&y, &p1[i], sizeof y) != 0;
            }
            CHECKF(nbits == 0, "n=%d off=%d: %d elements not ggml's bits", n, off, nbits);
            CHECKF(memcmp(p1, p2, sizeof(float) * n) == 0, "n=%d off=%d: simd != ref bits", n, off);
            /* out may alias x: same result in place. */
            memcpy(ax + PAD, px, sizeof(float) * n);
            wlm_rmsnorm_ref(ax + PAD, ax + PAD, pw, n, eps);
            CHECKF(memcmp(ax + PAD, p1, sizeof(float) * n) == 0, "ref in place n=%d", n);
            memcpy(ax + PAD, px, sizeof(float) * n);
            wlm_rmsnorm_simd(ax + PAD, ax + PAD, pw, n, eps);
            CHECKF(memcmp(ax + PAD, p2, sizeof(float) * n) == 0, "simd in place n=%d", n);
        }
    }
    /* A constant vector c: out[i] = w[i] * c / sqrt(c^2 + eps). */
    static const float CONSTS[] = {2.0f, -0.75f, 1e-3f, 30.0f};
    for (int li = 0; li < N_LENGTHS; li++) {
        int n = LENGTHS[li];
        for (unsigned ci = 0; ci < 4; ci++) {
            float c = CONSTS[ci];
            const float eps = ci == 2 ? 1e-6f : 1e-5f;
            for (int i = 0; i < n; i++) x[PAD + i] = c;
            fill(w + PAD, n, -1.0f, 1.0f);
            wlm_rmsnorm_ref(o1 + PAD, x + PAD, w + PAD, n, eps);
            wlm_rmsnorm_simd(o2 + PAD, x + PAD, w + PAD, n, eps);
            double scale = (double)c / sqrt((double)c * c + eps);
            int bad = 0;
            for (int i = 0; i < n; i++) {
                double exact = w[PAD + i] * scale;
                double tol = 2e-6 * fabs(exact) + 1e-7;
                bad += fabs(o1[PAD + i] - exact) > tol || fabs(o2[PAD + i] - exact) > tol;
            }
            CHECKF(bad == 0, "constant %g, n=%d: %d elements off", c, n, bad);
        }
    }
    free(x);
    free(w);
    free(o1);
    free(o2);
    free(ax);
}

/* ------------------------------------------------------------------------------------------ */
/* softmax. The SIMD version uses a polynomial exp (a few ulp); the tolerance is 2e-6 relative
 * per element plus the rounding of an n-term float sum (~sqrt(n) ulp on random data).        */

static void softmax_exact(const float *in, double *out, int n) {
    double m = in[0], s = 0;
    for (int i = 1; i < n; i++)
        if (in[i] > m) m = in[i];
    for (int i = 0; i < n; i++) s += (out[i] = exp((double)in[i] - m));
    for (int i = 0; i < n; i++) out[i] /= s;
}

static void test_softmax(void) {
    float *in = alloc_f(MAXN), *a = alloc_f(MAXN), *b = alloc_f(MAXN);
    double *ex = (double *)calloc(MAXN, sizeof(double));
    tu_section("softmax");
    for (int range = 0; range < 3; range++) {
        /* logits-like, wide (some terms underflow toward 0), large offsets (overflow if the max
         * were not subtracted) */
        float lo = range == 0 ? -8.0f : range == 1 ? -100.0f : 950.0f;
        float hi = range == 0 ? 8.0f : range == 1 ? 100.0f : 1000.0f;
        for (int li = 0; li < N_LENGTHS; li++) {
            int n = LENGTHS[li];
            for (int off = 0; off < 2; off++) {
                float *pa = a + PAD + off, *pb = b + PAD + (off ? 1 : 0);
                fill(in, n, lo, hi);
                if (n > 2 && off) in[n - 1] = hi + 1.0f; /* max in the scalar tail */
                memcpy(pa, in, sizeof(float) * n);
                memcpy(pb, in, sizeof(float) * n);
                wlm_softmax_ref(pa, n);
                wlm_softmax_simd(pb, n);
                softmax_exact(in, ex, n);
                double rel = 2e-6 + 2.0 * sqrt((double)n) * FLT_EPSILON;
                double abs_floor = range == 1 ? 1e-30 : 0.0; /* clamped exp tails (~1e-38) */
                int bad = 0, first = -1;
                double sa = 0, sb = 0;
                for (int i = 0; i < n; i++) {
                    double tol = rel * ex[i] + abs_floor;
                    if (fabs(pa[i] - ex[i]) > tol || fabs(pb[i] - ex[i]) > tol ||
                        fabs(pa[i] - pb[i]) > tol) {
                        if (first < 0) first = i;
                        bad++;
                    }
                    sa += pa[i];
                    sb += pb[i];
                }
                CHECKF(bad == 0, "range [%g,%g] n=%d off=%d: %d elements off, first %d (ref %.9g "
                       "simd %.9g exact %.9g)", lo, hi, n, off, bad, first,
                       first >= 0 ? pa[first] : 0.0, first >= 0 ? pb[first] : 0.0,
                       first >= 0 ? ex[first] : 0.0);
                /* Sums to 1 within 1e-6, plus the relative rounding error of the float32 sum
                 * that normalises every element (~sqrt(n) ulp: 1.3e-6 seen at n = 768). */
                double stol = 1e-6 + sqrt((double)n) * FLT_EPSILON;
                CHECKF(fabs(sa - 1.0) <= stol, "ref sum %.9g n=%d", sa, n);
                CHECKF(fabs(sb - 1.0) <= stol, "simd sum %.9g n=%d", sb, n);
            }
        }
    }
    /* Exact cases: one element is 1; equal elements are 1/n. */
    a[0] = -3.5f;
    b[0] = 1e30f;
    wlm_softmax_ref(a, 1);
    wlm_softmax_simd(b, 1);
    CHECK(a[0] == 1.0f);
    CHECK(b[0] == 1.0f);
    for (int li = 0; li < N_LENGTHS; li++) {
        int n = LENGTHS[li];
        for (int i = 0; i < n; i++) a[i] = b[i] = 0.25f;
        wlm_softmax_ref(a, n);
        wlm_softmax_simd(b, n);
        int bad = 0;
        for (int i = 0; i < n; i++)
            bad += fabs(a[i] - 1.0 / n) > 1e-6 / n || fabs(b[i] - 1.0 / n) > 1e-6 / n;
        CHECKF(bad == 0, "uniform n=%d: %d elements differ from 1/n", n, bad);
    }
    free(in);
    free(a);
    free(b);
    free(ex);
}

/* ------------------------------------------------------------------------------------------ */
/* rope                                                                                        */

static void test_rope(void) {
    static const int HEAD_SIZES[] = {2, 4, 6, 8, 10, 12, 14, 16, 18, 32, 34, 36, 48, 64, 128};
    static const int N_HEADS[] = {1, 2, 3, 4, 5, 8, 12};
    float *x = alloc_f(12 * 128), *a = alloc_f(12 * 128), *b = alloc_f(12 * 128);
    float *ct = alloc_f(64), *st = alloc_f(64);
    tu_section("rope");
    for (unsigned hi = 0; hi < sizeof HEAD_SIZES / sizeof HEAD_SIZES[0]; hi++) {
        int hs = HEAD_SIZES[hi], half = hs / 2;
        for (unsigned ni = 0; ni < sizeof N_HEADS / sizeof N_HEADS[0]; ni++) {
            int nh = N_HEADS[ni], n = nh * hs;
            int pos = (int)(hi * 7 + ni * 13);
            /* llama2.c's angles: pos * 10000^(-2i/head_size) */
            for (int i = 0; i < half; i++) {
                double ang = pos * pow(10000.0, -2.0 * i / hs);
                ct[PAD + i] = (float)cos(ang);
                st[PAD + i] = (float)sin(ang);
            }
            fill(x, n, -2.0f, 2.0f);
            /* off 0: every pair rotates; off 1: partial rotation (the first n_rot dimensions of
             * each head, the others bitwise unchanged), at an unaligned address */
            for (int off = 0; off < 2; off++) {
                const int rot = off == 0 ? hs : (hs / 2 < 2 ? 2 : (hs / 2) & ~1);
                float *pa = a + PAD + off, *pb = b + PAD + (off ? 3 : 0);
                memcpy(pa, x, sizeof(float) * n);
                memcpy(pb, x, sizeof(float) * n);
                wlm_rope_ref(pa, nh, hs, rot, ct + PAD, st + PAD);
                wlm_rope_simd(pb, nh, hs, rot, ct + PAD, st + PAD);
                int bad = 0, first = -1;
                for (int h = 0; h < nh; h++)
                    for (int i = 0; i < half; i++) {
                        int k = h * hs + 2 * i;
                        double c = ct[PAD + i], s = st[PAD + i], x0 = x[k], x1 = x[k + 1];
                        double e0 = x0 * c - x1 * s, e1 = x0 * s + x1 * c;
                        if (2 * i >= rot) e0 = x0, e1 = x1; /* not rotated: exact */
                        double tol = 2 * i >= rot ? 0.0 : 1e-6 * (fabs(x0) + fabs(x1)) + 1e-30;
                        if (fabs(pa[k] - e0) > tol || fabs(pa[k + 1] - e1) > tol ||
                            fabs(pb[k] - e0) > tol || fabs(pb[k + 1] - e1) > tol) {
                            if (first < 0) first = k;
                            bad++;
                        }
                    }
                CHECKF(bad == 0, "head_size %d heads %d n_rot %d: %d pairs off, first at %d", hs,
                       nh, rot, bad, first);
            }
            /* angle 0 is the identity; pi/2 maps (a, b) to (-b, a); both exact */
            for (int i = 0; i < half; i++) ct[PAD + i] = 1.0f, st[PAD + i] = 0.0f;
            memcpy(a, x, sizeof(float) * n);
            memcpy(b, x, sizeof(float) * n);
            wlm_rope_ref(a, nh, hs, hs, ct + PAD, st + PAD);
            wlm_rope_simd(b, nh, hs, hs, ct + PAD, st + PAD);
            int bad0 = 0, bad90 = 0;
            for (int k = 0; k < n; k++) bad0 += a[k] != x[k] || b[k] != x[k];
            for (int i = 0; i < half; i++) ct[PAD + i] = 0.0f, st[PAD + i] = 1.0f;
            memcpy(a, x, sizeof(float) * n);
            memcpy(b, x, sizeof(float) * n);
            wlm_rope_ref(a, nh, hs, hs, ct + PAD, st + PAD);
            wlm_rope_simd(b, nh, hs, hs, ct + PAD, st + PAD);
            for (int k = 0; k < n; k += 2) {
                bad90 += a[k] != -x[k + 1] || a[k + 1] != x[k];
                bad90 += b[k] != -x[k + 1] || b[k + 1] != x[k];
            }
            CHECKF(bad0 == 0, "angle 0 not identity: head_size %d heads %d", hs, nh);
            CHECKF(bad90 == 0, "angle pi/2 not a signed swap: head_size %d heads %d", hs, nh);
        }
    }
    free(x);
    free(a);
    free(b);
    free(ct);
    free(st);
}

/* ------------------------------------------------------------------------------------------ */
/* swiglu                                                                                      */

static void test_swiglu(void) {
    float *h = alloc_f(MAXN), *g = alloc_f(MAXN), *a = alloc_f(MAXN), *b = alloc_f(MAXN);
    tu_section("swiglu");
    for (int range = 0; range < 2; range++) {
        float lim = range == 0 ? 8.0f : 120.0f; /* the second range saturates exp */
        for (int li = 0; li < N_LENGTHS; li++) {
            int n = LENGTHS[li];
            for (int off = 0; off < 2; off++) {
                float *pa = a + PAD + off, *pb = b + PAD + (off ? 2 : 0), *pg = g + PAD + off;
                fill(h, n, -lim, lim);
                fill(pg, n, -2.0f, 2.0f);
                if (n > 3) h[0] = 0.0f, h[1] = -0.0f, h[2] = 1e-20f;
                memcpy(pa, h, sizeof(float) * n);
                memcpy(pb, h, sizeof(float) * n);
                wlm_swiglu_ref(pa, pg, n);
                wlm_swiglu_simd(pb, pg, n);
                int bad = 0, first = -1;
                for (int i = 0; i < n; i++) {
                    double v = h[i], ex = v / (1.0 + exp(-v)) * pg[i];
                    double tol = 2e-6 * fabs(ex) + 1e-30;
                    if (fabs(pa[i] - ex) > tol || fabs(pb[i] - ex) > tol ||
                        fabs(pa[i] - pb[i]) > tol) {
                        if (first < 0) first = i;
                        bad++;
                    }
                }
                CHECKF(bad == 0, "|h|<=%g n=%d off=%d: %d elements off, first %d (h %.9g ref "
                       "%.9g simd %.9g)", lim, n, off, bad, first, first >= 0 ? h[first] : 0.0,
                       first >= 0 ? pa[first] : 0.0, first >= 0 ? pb[first] : 0.0);
            }
        }
    }
    free(h);
    free(g);
    free(a);
    free(b);
}

/* ------------------------------------------------------------------------------------------ */
/* rope_neox: pairs (i, i + n_rot/2) of each head against the rotation in double; the SIMD twin
 * does the reference's operations, so both are bitwise equal; dimensions past n_rot unchanged. */

static void test_rope_neox(void) {
    static const int HEAD_SIZES[] = {2, 4, 6, 8, 10, 16, 18, 32, 36, 48, 64, 128};
    static const int N_HEADS[] = {1, 2, 3, 5, 8};
    float *x = alloc_f(8 * 128), *a = alloc_f(8 * 128), *b = alloc_f(8 * 128);
    float *ct = alloc_f(64), *st = alloc_f(64);
    tu_section("rope_neox");
    for (unsigned hi = 0; hi < sizeof HEAD_SIZES / sizeof HEAD_SIZES[0]; hi++) {
        const int hs = HEAD_SIZES[hi];
        for (unsigned ni = 0; ni < sizeof N_HEADS / sizeof N_HEADS[0]; ni++) {
            const int nh = N_HEADS[ni], n = nh * hs, pos = (int)(hi * 5 + ni * 11 + 1);
            for (int off = 0; off < 2; off++) {
                const int rot = off == 0 ? hs : (hs / 2 < 2 ? 2 : (hs / 2) & ~1), half = rot / 2;
                for (int i = 0; i < half; i++) {
                    double ang = pos * pow(10000.0, -2.0 * i / rot);
                    ct[PAD + i] = (float)cos(ang);
                    st[PAD + i] = (float)sin(ang);
                }
                fill(x, n, -2.0f, 2.0f);
                float *pa = a + PAD + off, *pb = b + PAD + (off ? 3 : 0);
                memcpy(pa, x, sizeof(float) * n);
                memcpy(pb, x, sizeof(float) * n);
                wlm_rope_neox_ref(pa, nh, hs, rot, ct + PAD, st + PAD);
                wlm_rope_neox_simd(pb, nh, hs, rot, ct + PAD, st + PAD);
                int bad = 0, first = -1;
                for (int h = 0; h < nh; h++)
                    for (int i = 0; i < hs; i++) {
                        const int k = h * hs + i;
                        double e = x[k], tol = 0.0;
                        if (i < rot) {
                            const int j = i < half ? i : i - half; /* the pair's frequency */
                            const double c = ct[PAD + j], sn = st[PAD + j];
                            const double x0 = x[h * hs + j], x1 = x[h * hs + j + half];
                            e = i < half ? x0 * c - x1 * sn : x0 * sn + x1 * c;
                            tol = 1e-6 * (fabs(x0) + fabs(x1)) + 1e-30;
                        }
                        if (fabs(pa[k] - e) > tol || memcmp(&pa[k], &pb[k], sizeof(float)) != 0) {
                            if (first < 0) first = k;
                            bad++;
                        }
                    }
                CHECKF(bad == 0, "head_size %d heads %d n_rot %d: %d values off, first at %d",
                       hs, nh, rot, bad, first);
            }
        }
    }
    free(x);
    free(a);
    free(b);
    free(ct);
    free(st);
}

/* ------------------------------------------------------------------------------------------ */
/* layernorm: both sets against (x - mean) / sqrt(var + eps) * w + b in double; a constant row
 * becomes the bias exactly; no bias (NULL) is w times the normalized row. */

static void test_layernorm(void) {
    float *x = alloc_f(MAXN), *w = alloc_f(MAXN), *bb = alloc_f(MAXN), *a = alloc_f(MAXN),
          *b = alloc_f(MAXN);
    tu_section("layernorm");
    for (int li = 0; li < N_LENGTHS; li++) {
        const int n = LENGTHS[li];
        for (int variant = 0; variant < 3; variant++) {
            fill(x, n, -3.0f, 5.0f);
            if (variant == 2)
                for (int i = 0; i < n; i++) x[i] = 0.75f;
            fill(w, n, 0.5f, 1.5f);
            fill(bb, n, -0.5f, 0.5f);
            const float *bias = variant == 1 ? NULL : bb;
            wlm_layernorm_ref(a, x, w, bias, n, 1e-5f);
            wlm_layernorm_simd(b, x, w, bias, n, 1e-5f);
            double mean = 0, var = 0;
            for (int i = 0; i < n; i++) mean += x[i];
            mean /= n;
            for (int i = 0; i < n; i++) var += (x[i] - mean) * (x[i] - mean);
            var /= n;
            int bad = 0, first = -1;
            for (int i = 0; i < n; i++) {
                const double e = (x[i] - mean) / sqrt(var + 1e-5) * w[i] + (bias ? bias[i] : 0.0);
                const double tol = 2e-5 * (fabs(e) + 1.0);
                if (fabs(a[i] - e) > tol || fabs(b[i] - e) > tol) {
                    if (first < 0) first = i;
                    bad++;
                }
            }
            CHECKF(bad == 0, "n=%d variant %d: %d values off, first %d (ref %.9g simd %.9g)", n,
                   variant, bad, first, first >= 0 ? a[first] : 0.0, first >= 0 ? b[first] : 0.0);
            /* in place */
            memcpy(b, x, sizeof(float) * n);
            wlm_layernorm_simd(b, b, w, bias, n, 1e-5f);
            wlm_layernorm_ref(x, x, w, bias, n, 1e-5f);
            int bad2 = 0;
            for (int i = 0; i < n; i++) bad2 += x[i] != a[i];
            CHECKF(bad2 == 0, "n=%d: the in-place reference differs in %d values", n, bad2);
        }
    }
    free(x);
    free(w);
    free(bb);
    free(a);
    free(b);
}

/* ------------------------------------------------------------------------------------------ */
/* gelu: the reference is ggml's binary16 GELU: exactly ggml_gelu_f32's float formula on the
 * binary16-rounded input, rounded to binary16 (the table ggml's CPU backend reads); the SIMD
 * twin within one binary16 step of it (or 3e-7 where 1 + tanh cancels, x near -5 and below);
 * the clamps at -10 and 10; the GeGLU product with a gate. */

static void test_gelu(void) {
    float *h = alloc_f(MAXN), *g = alloc_f(MAXN), *a = alloc_f(MAXN), *b = alloc_f(MAXN);
    tu_section("gelu");
    int off_steps = 0, total = 0;
    for (int li = 0; li < N_LENGTHS; li++) {
        const int n = LENGTHS[li];
        for (int gated = 0; gated < 2; gated++) {
            fill(h, n, -12.0f, 12.0f);
            if (n > 4) h[0] = -10.0f, h[1] = 10.0f, h[2] = 0.0f, h[3] = 1e-6f;
            fill(g, n, -2.0f, 2.0f);
            memcpy(a, h, sizeof(float) * n);
            memcpy(b, h, sizeof(float) * n);
            wlm_gelu_ref(a, gated ? g : NULL, n);
            wlm_gelu_simd(b, gated ? g : NULL, n);
            int bad = 0, first = -1;
            for (int i = 0; i < n; i++) {
                double e;
                if (h[i] <= -10.0f) e = 0.0;
                else if (h[i] >= 10.0f) e = h[i];
                else {
                    const float v = wlm_fp16_to_fp32(wlm_fp32_to_fp16(h[i]));
                    const float gv = 0.5f * v * (1.0f + tanhf(0.79788456080286535587989211986876f * v *
                                                              (1.0f + 0.044715f * v * v)));
                    e = wlm_fp16_to_fp32(wlm_fp32_to_fp16(gv));
                }
                if (gated) e = (float)e * g[i];
                const double step = fabs(e) * (1.0 / 1024) + 3e-7 * (gated ? fabs(g[i]) : 1.0);
                total++;
                if (a[i] != (float)e) off_steps++;
                if (fabs(b[i] - a[i]) > step) {
                    if (first < 0) first = i;
                    bad++;
                }
            }
            CHECKF(bad == 0, "n=%d gated %d: %d values off, first %d (h %.9g ref %.9g simd %.9g)",
                   n, gated, bad, first, first >= 0 ? h[first] : 0.0, first >= 0 ? a[first] : 0.0,
                   first >= 0 ? b[first] : 0.0);
        }
    }
    CHECKF(off_steps == 0, "%d of %d reference values differ from ggml's formula", off_steps,
           total);
    CHECK(wlm_gelu1_ref(-10.0f) == 0.0f && wlm_gelu1_ref(10.0f) == 10.0f && wlm_gelu1_ref(0.0f) == 0.0f);
    CHECK(wlm_gelu1_ref(1.0f) == wlm_fp16_to_fp32(wlm_fp32_to_fp16(0.841192f)));
    free(h);
    free(g);
    free(a);
    free(b);
}

/* ------------------------------------------------------------------------------------------ */
/* axpy                                                                                        */

static void test_axpy(void) {
    float *x = alloc_f(MAXN), *o = alloc_f(MAXN), *a = alloc_f(MAXN), *b = alloc_f(MAXN);
    tu_section("axpy");
    for (int li = 0; li < N_LENGTHS; li++) {
        int n = LENGTHS[li];
        for (int off = 0; off < 2; off++) {
            float *px = x + PAD + off, *pa = a + PAD + (off ? 3 : 0), *pb = b + PAD + off;
            float s = tu_rng_uniform(&rng, -2.0f, 2.0f);
            fill(px, n, -1.0f, 1.0f);
            fill(o + PAD, n, -1.0f, 1.0f);
            memcpy(pa, o + PAD, sizeof(float) * n);
            memcpy(pb, o + PAD, sizeof(float) * n);
            pa[n] = pb[n] = 777.0f; /* one past the end stays */
            wlm_axpy_ref(pa, s, px, n);
            wlm_axpy_simd(pb, s, px, n);
            int bad = 0;
            for (int i = 0; i < n; i++) {
                double ex = o[PAD + i] + (double)s * px[i];
                double tol = 1e-6 * (fabs(o[PAD + i]) + fabs(s * px[i])) + 1e-30;
                bad += fabs(pa[i] - ex) > tol || fabs(pb[i] - ex) > tol;
            }
            CHECKF(bad == 0, "n=%d off=%d: %d elements off", n, off, bad);
            CHECKF(pa[n] == 777.0f && pb[n] == 777.0f, "n=%d: wrote past the end", n);
        }
        /* small integers: exact */
        for (int i = 0; i < n; i++) {
            x[i] = (float)(i % 9 - 4);
            a[i] = b[i] = (float)(i % 5);
        }
        wlm_axpy_ref(a, 2.0f, x, n);
        wlm_axpy_simd(b, 2.0f, x, n);
        int bad = 0;
        for (int i = 0; i < n; i++) {
            float ex = (float)(i % 5 + 2 * (i % 9 - 4));
            bad += a[i] != ex || b[i] != ex;
        }
        CHECKF(bad == 0, "integer axpy n=%d", n);
    }
    free(x);
    free(o);
    free(a);
    free(b);
}

/* ------------------------------------------------------------------------------------------ */
/* the delta rule (Gated DeltaNet's recurrence): SIMD vs scalar bitwise over several steps, and
 * the scalar kernel against the definition in double                                          */

static void test_deltanet(void) {
    tu_section("deltanet");
    const int dims[] = {4, 16, 12, 128, 6};
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++) {
        const int d = dims[di];
        float *Sa = alloc_f((size_t)d * d), *Sb = alloc_f((size_t)d * d);
        double *Sd = calloc((size_t)d * d, sizeof *Sd);
        float *q = alloc_f(d), *k = alloc_f(d), *v = alloc_f(d), *oa = alloc_f(d + 1), *ob = alloc_f(d + 1);
        memset(Sa, 0, sizeof(float) * (size_t)d * d);
        memset(Sb, 0, sizeof(float) * (size_t)d * d);
        int same = 1;
        double worst = 0;
        for (int step = 0; step < 6; step++) {
            fill(q, d, -0.5f, 0.5f);
            fill(k, d, -0.5f, 0.5f);
            fill(v, d, -1.0f, 1.0f);
            const float decay = tu_rng_uniform(&rng, 0.3f, 1.0f);
            const float beta = tu_rng_uniform(&rng, 0.0f, 1.0f);
            oa[d] = ob[d] = 777.0f;
            wlm_deltanet_ref(Sa, q, k, v, decay, beta, oa, d);
            wlm_deltanet_simd(Sb, q, k, v, decay, beta, ob, d);
            same &= memcmp(oa, ob, sizeof(float) * (size_t)d) == 0 &&
                    memcmp(Sa, Sb, sizeof(float) * (size_t)d * d) == 0;
            CHECKF(oa[d] == 777.0f && ob[d] == 777.0f, "d=%d: wrote past the output", d);
            /* the definition: S <- decay S; r = S^T k; S += k (beta (v - r))^T; o = S^T q */
            double r[128], o[128];
            for (int b = 0; b < d; b++) r[b] = 0;
            for (int a = 0; a < d; a++)
                for (int b = 0; b < d; b++) {
                    Sd[a * d + b] *= decay;
                    r[b] += Sd[a * d + b] * k[a];
                }
            for (int b = 0; b < d; b++) o[b] = 0;
            for (int a = 0; a < d; a++)
                for (int b = 0; b < d; b++) {
                    Sd[a * d + b] += (double)k[a] * beta * (v[b] - r[b]);
                    o[b] += Sd[a * d + b] * q[a];
                }
            for (int b = 0; b < d; b++)
                if (fabs(o[b] - oa[b]) > worst) worst = fabs(o[b] - oa[b]);
        }
        CHECKF(same, "d=%d: SIMD state or output differs from the scalar kernel's bits", d);
        CHECKF(worst < 1e-5, "d=%d: output off the definition by %.3g", d, worst);
        free(Sa);
        free(Sb);
        free(Sd);
        free(q);
        free(k);
        free(v);
        free(oa);
        free(ob);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* attention (heads h0..h1 of a GQA layer, paged cache): SIMD vs scalar, against a
 * double-precision computation, and independent of the head range                              */

/* Runs one kernel on heads [h0, h1) with a scratch of exactly the documented size, followed by
 * a sentinel the kernel must not touch. */
static int run_attention(wlm_attention_fn fn, float *out, const float *q, const float *const *kb,
                         const float *const *vb, int blk, int n, int h0, int h1, int kv_mul,
                         int hs, int stride) {
    const size_t ns = wlm_attention_scratch(h1 - h0, n, hs);
    float *scratch = alloc_f(ns + 1);
    scratch[ns] = 555.0f;
    fn(out, q, kb, vb, blk, n, h0, h1, kv_mul, hs, stride, scratch);
    const int ok = scratch[ns] == 555.0f;
    free(scratch);
    return ok;
}

static void test_attention(void) {
    tu_section("attention");
    static const int heads[] = {1, 3, 4, 8, 12, 33, 48, 64, 100, 128};
    static const int lens[] = {1, 2, 3, 5, 7, 17, 64, 129, 130};
    static const int blocks[] = {1000, 16, 1, 7}; /* positions per cache block */
    enum { NH = 4, KV_MUL = 2, NKV = NH / KV_MUL }; /* query heads 0,1 read KV head 0; 2,3 head 1 */
    const float *kb[200], *vb[200];
    for (size_t hi = 0; hi < sizeof heads / sizeof heads[0]; hi++) {
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
            const int hs = heads[hi], n = lens[li], stride = NKV * hs + 5; /* rows padded */
            const size_t od = (size_t)NH * hs; /* the output, then a sentinel */
            float *q = alloc_f(od), *k = alloc_f((size_t)n * stride);
            float *v = alloc_f((size_t)n * stride);
            float *oa = alloc_f(od + 1), *ob = alloc_f(od + 1), *oc = alloc_f(od + 1);
            double *w = calloc((size_t)n, sizeof(double));
            fill(q, (int)od, -1.0f, 1.0f);
            fill(k, n * stride, -1.0f, 1.0f);
            fill(v, n * stride, -1.0f, 1.0f);
            for (size_t i = 0; i <= od; i++) oa[i] = ob[i] = oc[i] = 777.0f;
            /* Paged: the same rows seen as blocks of `blk` positions through pointer tables. */
            const int blk = blocks[(hi + li) % (sizeof blocks / sizeof blocks[0])];
            for (int b = 0; b * blk < n; b++) {
                kb[b] = k + (size_t)b * blk * stride;
                vb[b] = v + (size_t)b * blk * stride;
            }
            const int m = KV_MUL;
            int ok = run_attention(wlm_attention_ref, oa, q, kb, vb, blk, n, 0, NH, m, hs, stride);
            ok &= run_attention(wlm_attention_simd, ob, q, kb, vb, blk, n, 0, NH, m, hs, stride);
            /* the middle heads alone: the same bits, the other heads untouched */
            ok &= run_attention(wlm_attention_simd, oc, q, kb, vb, blk, n, 1, 3, m, hs, stride);
            CHECKF(ok, "head %d, %d positions: wrote past the scratch", hs, n);
            int bad = 0, split = 0;
            for (int h = 0; h < NH; h++) {
                const float *qh = q + (size_t)h * hs, *kh = k + (size_t)(h / KV_MUL) * hs,
                            *vh = v + (size_t)(h / KV_MUL) * hs;
                double mx = -1e300, sum = 0.0;
                for (int t = 0; t < n; t++) {
                    double d = 0.0;
                    for (int i = 0; i < hs; i++) d += (double)qh[i] * kh[(size_t)t * stride + i];
                    w[t] = d / sqrt((double)hs);
                    if (w[t] > mx) mx = w[t];
                }
                for (int t = 0; t < n; t++) sum += (w[t] = exp(w[t] - mx));
                for (int i = 0; i < hs; i++) {
                    const size_t o = (size_t)h * hs + i;
                    double ex = 0.0;
                    for (int t = 0; t < n; t++) ex += w[t] / sum * vh[(size_t)t * stride + i];
                    bad += fabs(oa[o] - ex) > 1e-5 || fabs(ob[o] - ex) > 1e-5 ||
                           fabs(oa[o] - ob[o]) > 2e-6;
                    split += (h == 1 || h == 2) ? memcmp(&oc[o], &ob[o], sizeof(float)) != 0
                                                : oc[o] != 777.0f;
                }
            }
            CHECKF(bad == 0, "head %d, %d positions, blocks of %d: %d outputs off", hs, n, blk,
                   bad);
            CHECKF(split == 0, "head %d, %d positions: heads 1..2 alone differ in %d outputs", hs,
                   n, split);
            CHECKF(oa[od] == 777.0f && ob[od] == 777.0f, "head %d: wrote past the heads", hs);
            free(q), free(k), free(v), free(oa), free(ob), free(oc), free(w);
        }
    }
}


/* The F16 cache: the same cases with K and V stored as binary16. The scalar kernel equals the
 * float kernel on the exactly widened rows bit for bit; the SIMD kernel is close to it and to a
 * double-precision computation on those rows, and independent of the head range. */
static int run_attention_f16(wlm_attention_f16_fn fn, float *out, const float *q,
                             const uint16_t *const *kb, const uint16_t *const *vb, int blk, int n,
                             int h0, int h1, int kv_mul, int hs, int stride) {
    const size_t ns = wlm_attention_scratch(h1 - h0, n, hs);
    float *scratch = alloc_f(ns + 1);
    scratch[ns] = 555.0f;
    fn(out, q, kb, vb, blk, n, h0, h1, kv_mul, hs, stride, scratch);
    const int ok = scratch[ns] == 555.0f;
    free(scratch);
    return ok;
}

static void test_attention_f16(void) {
    tu_section("attention over an F16 KV cache");
    static const int heads[] = {1, 3, 4, 8, 12, 33, 48, 64, 100, 128};
    static const int lens[] = {1, 2, 3, 5, 7, 17, 64, 129, 130};
    static const int blocks[] = {16, 1000, 7, 1};
    enum { NH = 4, KV_MUL = 2, NKV = NH / KV_MUL };
    const uint16_t *kb[200], *vb[200];
    const float *kbf[200], *vbf[200];
    for (size_t hi = 0; hi < sizeof heads / sizeof heads[0]; hi++) {
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
            const int hs = heads[hi], n = lens[li], stride = NKV * hs + 3;
            const size_t od = (size_t)NH * hs, cells = (size_t)n * stride;
            float *q = alloc_f(od), *k = alloc_f(cells), *v = alloc_f(cells);
            uint16_t *kh = malloc(cells * 2), *vh = malloc(cells * 2);
            float *oa = alloc_f(od + 1), *ob = alloc_f(od + 1), *oc = alloc_f(od + 1);
            float *ow = alloc_f(od + 1), *os = alloc_f(od + 1);
            double *w = calloc((size_t)n, sizeof(double));
            fill(q, (int)od, -1.0f, 1.0f);
            fill(k, (int)cells, -3.0f, 3.0f);
            fill(v, (int)cells, -3.0f, 3.0f);
            /* binary16 rows (with a few subnormals), and their exact float32 values */
            for (size_t i = 0; i < cells; i++) {
                if (i % 97 == 5) k[i] *= 1e-5f, v[i] *= 1e-6f;
                kh[i] = wlm_fp32_to_fp16(k[i]), vh[i] = wlm_fp32_to_fp16(v[i]);
                k[i] = wlm_fp16_to_fp32(kh[i]), v[i] = wlm_fp16_to_fp32(vh[i]);
            }
            for (size_t i = 0; i <= od; i++) oa[i] = ob[i] = oc[i] = ow[i] = os[i] = 777.0f;
            const int blk = blocks[(hi + li) % (sizeof blocks / sizeof blocks[0])];
            for (int b = 0; b * blk < n; b++) {
                kb[b] = kh + (size_t)b * blk * stride, vb[b] = vh + (size_t)b * blk * stride;
                kbf[b] = k + (size_t)b * blk * stride, vbf[b] = v + (size_t)b * blk * stride;
            }
            const int m = KV_MUL;
            int ok = run_attention_f16(wlm_attention_f16_ref, oa, q, kb, vb, blk, n, 0, NH, m, hs,
                                       stride);
            ok &= run_attention_f16(wlm_attention_f16_simd, ob, q, kb, vb, blk, n, 0, NH, m, hs,
                                    stride);
            ok &= run_attention_f16(wlm_attention_f16_simd, oc, q, kb, vb, blk, n, 1, 3, m, hs,
                                    stride);
            ok &= run_attention(wlm_attention_ref, ow, q, kbf, vbf, blk, n, 0, NH, m, hs, stride);
            ok &= run_attention(wlm_attention_simd, os, q, kbf, vbf, blk, n, 0, NH, m, hs, stride);
            CHECKF(ok, "F16 head %d, %d positions: wrote past the scratch", hs, n);
            CHECKF(memcmp(ob, os, (od + 1) * sizeof(float)) == 0,
                   "F16 head %d, %d positions: the SIMD kernel differs from the float SIMD kernel "
                   "on the widened rows", hs, n);
            CHECKF(memcmp(oa, ow, (od + 1) * sizeof(float)) == 0,
                   "F16 head %d, %d positions: the scalar kernel differs from the float kernel on "
                   "the widened rows", hs, n);
            int bad = 0, split = 0;
            for (int h = 0; h < NH; h++) {
                const float *qh = q + (size_t)h * hs, *kk = k + (size_t)(h / KV_MUL) * hs,
                            *vv = v + (size_t)(h / KV_MUL) * hs;
                double mx = -1e300, sum = 0.0;
                for (int t = 0; t < n; t++) {
                    double d = 0.0;
                    for (int i = 0; i < hs; i++) d += (double)qh[i] * kk[(size_t)t * stride + i];
                    w[t] = d / sqrt((double)hs);
                    if (w[t] > mx) mx = w[t];
                }
                for (int t = 0; t < n; t++) sum += (w[t] = exp(w[t] - mx));
                for (int i = 0; i < hs; i++) {
                    const size_t o = (size_t)h * hs + i;
                    double ex = 0.0;
                    for (int t = 0; t < n; t++) ex += w[t] / sum * vv[(size_t)t * stride + i];
                    bad += fabs(oa[o] - ex) > 3e-5 || fabs(ob[o] - ex) > 3e-5 ||
                           fabs(oa[o] - ob[o]) > 1e-5;
                    split += (h == 1 || h == 2) ? memcmp(&oc[o], &ob[o], sizeof(float)) != 0
                                                : oc[o] != 777.0f;
                }
            }
            CHECKF(bad == 0, "F16 head %d, %d positions, blocks of %d: %d outputs off", hs, n,
                   blk, bad);
            CHECKF(split == 0, "F16 head %d, %d positions: heads 1..2 alone differ in %d outputs",
                   hs, n, split);
            CHECKF(oa[od] == 777.0f && ob[od] == 777.0f, "F16 head %d: wrote past the heads", hs);
            free(q), free(k), free(v), free(kh), free(vh), free(oa), free(ob), free(oc), free(ow);
            free(os);
            free(w);
        }
    }
    /* Inf and NaN halves widen to Inf and NaN (an overflowing key poisons its head, as in
     * llama.cpp's F16 cache; a NaN value row propagates) */
    {
        float q[8] = {1, 0, 0, 0, 0, 0, 0, 0}, out[8], scratch[64];
        uint16_t krow[2][8] = {{0}}, vrow[2][8] = {{0}};
        krow[1][0] = 0x7c00; /* +Inf: the score of position 1 is +Inf, the softmax NaN */
        vrow[0][3] = 0x7e00;
        const uint16_t *kp[1] = {krow[0]}, *vp[1] = {vrow[0]};
        wlm_attention_f16_simd(out, q, kp, vp, 2, 2, 0, 1, 1, 8, 8, scratch);
        CHECK(isnan(out[0]) && isnan(out[3]));
        krow[1][0] = 0;
        wlm_attention_f16_simd(out, q, kp, vp, 2, 2, 0, 1, 1, 8, 8, scratch);
        CHECK(out[0] == 0.0f && isnan(out[3]));
        /* -Inf value: the output is -Inf where its weight is not 0 */
        vrow[0][3] = 0xfc00;
        wlm_attention_f16_simd(out, q, kp, vp, 2, 2, 0, 1, 1, 8, 8, scratch);
        CHECK(out[3] == -INFINITY && out[2] == 0.0f);
        /* 4 positions: the four-row score and two-stream value loops */
        uint16_t k4[4][8] = {{0}}, v4[4][8] = {{0}};
        const uint16_t *kp4[1] = {k4[0]}, *vp4[1] = {v4[0]};
        float scratch4[64];
        v4[3][5] = 0x7e01; /* NaN */
        wlm_attention_f16_simd(out, q, kp4, vp4, 4, 4, 0, 1, 1, 8, 8, scratch4);
        CHECK(isnan(out[5]) && out[4] == 0.0f && out[6] == 0.0f);
        k4[2][0] = 0x7c00; /* +Inf key */
        wlm_attention_f16_simd(out, q, kp4, vp4, 4, 4, 0, 1, 1, 8, 8, scratch4);
        CHECK(isnan(out[0]) && isnan(out[7]));
    }
}

/* ------------------------------------------------------------------------------------------ */
/* The F32 matrix kernels' summation order, written out: per row, two lane accumulators (a0 over
 * the first 4 floats of every 8, a1 over the second 4; a last 4 into a0), then
 * (v0 + v1) + (v2 + v3) of a0 + a1, then the scalar tail. Each lane step is acc + w * x, rounded
 * twice (SIMD128) or fused with one rounding (fmaf: the relaxed build's f32x4.relaxed_madd where
 * the engine fuses it; an engine may also leave it unfused).                                   */

static float f32_row_order(const float *w, const float *x, int n, int fused) {
    float a0[4] = {0}, a1[4] = {0};
    int j = 0;
    for (; j + 4 <= n; j += 4) {
        float *a = (j % 8 == 4) ? a1 : a0; /* a row's last 4 after 8k floats: a0 */
        for (int l = 0; l < 4; l++) {
            if (fused) {
                a[l] = fmaf(w[j + l], x[j + l], a[l]);
            } else {
                const float p = w[j + l] * x[j + l];
                a[l] = a[l] + p;
            }
        }
    }
    float v[4];
    for (int l = 0; l < 4; l++) v[l] = a0[l] + a1[l];
    float s = (v[0] + v[1]) + (v[2] + v[3]);
    for (; j < n; j++) {
        const float p = w[j] * x[j];
        s += p;
    }
    return s;
}

/* Every row of wlm_matvec_simd is bitwise that order with SIMD128's multiply-add (a build without
 * relaxed SIMD) or with the relaxed build's (fused or not: the engine's choice, one choice per
 * run), and the relaxed build stays within 1e-6 * sum_j |w_j x_j| of SIMD128's result (stated
 * bound; measured 4e-8 on stories110M's matrices, tools/bench_f32_ab.sh; the reference's bound
 * against exact math above is 1e-5). */
static void test_matvec_order(void) {
    tu_section("matvec order (SIMD128 / relaxed_madd)");
    if (!wlm_kernels_have_simd()) {
        printf("note: no SIMD in this build; skipped\n");
        return;
    }
    const int relaxed = wlm_quant_have_relaxed();
    static const int ns[] = {1, 3, 4, 7, 8, 12, 13, 16, 20, 64, 77, 288, 773};
    int rows_fused = 0, rows_plain = 0, rows_both = 0, rows_none = 0, far = 0;
    for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
        const int n = ns[ni], d = 9;
        float *w = alloc_f((size_t)d * n), *x = alloc_f(n), *o = alloc_f(d);
        fill(w, d * n, -1.0f, 1.0f);
        fill(x, n, -1.0f, 1.0f);
        for (int i = 0; i < n; i += 3) x[i] *= 1000.0f; /* products of mixed size: roundings differ */
        wlm_matvec_simd(o, w, x, n, 0, d);
        for (int r = 0; r < d; r++) {
            const float *wr = w + (size_t)r * n;
            const float f = f32_row_order(wr, x, n, 1), p = f32_row_order(wr, x, n, 0);
            const int is_f = memcmp(&o[r], &f, sizeof f) == 0, is_p = memcmp(&o[r], &p, sizeof p) == 0;
            rows_both += is_f && is_p;
            rows_fused += is_f && !is_p;
            rows_plain += is_p && !is_f;
            rows_none += !is_f && !is_p;
            double mag = 0;
            for (int j = 0; j < n; j++) mag += fabs((double)wr[j] * x[j]);
            far += fabs((double)o[r] - p) > 1e-6 * mag;
        }
        free(w), free(x), free(o);
    }
    printf("rows bitwise the fused order %d, the plain order %d, both %d, neither %d (relaxed "
           "build: %d)\n", rows_fused, rows_plain, rows_both, rows_none, relaxed);
    CHECKF(rows_none == 0, "%d rows follow neither order", rows_none);
    CHECKF(rows_fused + rows_plain > 0, "no row tells the orders apart");
    if (!relaxed) CHECKF(rows_fused == 0, "SIMD128 build: %d rows fused", rows_fused);
    else CHECKF(rows_fused == 0 || rows_plain == 0, "fused %d and plain %d rows in one run",
                rows_fused, rows_plain);
    CHECKF(far == 0, "%d rows beyond 1e-6 * sum |w x| of SIMD128's order", far);
}

/* ------------------------------------------------------------------------------------------ */
/* matmat (a batch of vectors against the same rows): each result bitwise equal to the matvec
 * of the same kernel set for that vector alone, and close to the scalar reference             */

static void test_matmat(void) {
    tu_section("matmat");
    static const int lens[] = {1, 3, 4, 7, 8, 12, 16, 33, 288, 301};
    static const int batches[] = {1, 2, 3, 4, 5, 8, 9, 16};
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        for (size_t bi = 0; bi < sizeof batches / sizeof batches[0]; bi++) {
            const int n = lens[li], nb = batches[bi], rows = 7, r0 = 1, r1 = 6;
            const size_t xs = (size_t)n + 3, os = (size_t)rows + 2; /* strides wider than rows */
            float *w = alloc_f((size_t)rows * n), *x = alloc_f(xs * nb);
            float *o_simd = alloc_f(os * nb), *o_ref = alloc_f(os * nb), *one = alloc_f(os);
            fill(w, rows * n, -1.0f, 1.0f);
            fill(x, (int)(xs * nb), -1.0f, 1.0f);
            for (size_t i = 0; i < os * nb; i++) o_simd[i] = o_ref[i] = 777.0f;
            wlm_matmat_simd(o_simd, os, w, x, xs, n, r0, r1, nb);
            wlm_matmat_ref(o_ref, os, w, x, xs, n, r0, r1, nb);
            int not_bitwise = 0, far = 0, clobbered = 0;
            for (int b = 0; b < nb; b++) {
                for (int r = 0; r < (int)os; r++) one[r] = 777.0f;
                wlm_matvec_simd(one, w, x + (size_t)b * xs, n, r0, r1);
                for (int r = 0; r < (int)os; r++) {
                    float v = o_simd[(size_t)b * os + r];
                    if (r < r0 || r >= r1) {
                        clobbered += v != 777.0f || o_ref[(size_t)b * os + r] != 777.0f;
                        continue;
                    }
                    not_bitwise += memcmp(&v, &one[r], sizeof v) != 0;
                    far += fabsf(v - o_ref[(size_t)b * os + r]) > 1e-5f * (float)n;
                }
            }
            CHECKF(not_bitwise == 0, "n %d, batch %d: %d results differ from matvec", n, nb, not_bitwise);
            CHECKF(far == 0, "n %d, batch %d: %d results far from the reference", n, nb, far);
            CHECKF(clobbered == 0, "n %d, batch %d: wrote outside rows r0..r1", n, nb);
            free(w), free(x), free(o_simd), free(o_ref), free(one);
        }
    }
}

int main(void) {
    test_tables();
    test_attention();
    test_attention_f16();
    test_matmat();
    test_matvec_order();
    test_dot();
    test_matvec();
    test_rmsnorm();
    test_softmax();
    test_rope();
    test_swiglu();
    test_rope_neox();
    test_layernorm();
    test_gelu();
    test_axpy();
    test_deltanet();
    return TEST_FINISH();
}
