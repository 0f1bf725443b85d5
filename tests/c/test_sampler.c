/*
 * test_sampler.c — the sampler chain (sampler.h): greedy and its ties, top-k, top-p, temperature
 * and plain multinomial draws checked against exact probabilities with a chi-square test, the
 * CTRL repetition penalty on the modified logits, parameter validation, and llama2.c's xorshift
 * RNG and sample() re-implemented here from run.c so that a seed must give run.c's tokens.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sampler.h"
#include "wasmlm.h"
#include "test_util.h"

#define MAXV 64

/* ------------------------------------------------------------------------------------------ */
/* Independent references                                                                      */

/* llama2.c run.c's random_u32 / random_f32, written out from the formula. */
static uint32_t ref_u32(uint64_t *state) {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return (uint32_t)((*state * 0x2545F4914F6CDD1DULL) >> 32);
}
static float ref_f32(uint64_t *state) { return (float)(ref_u32(state) >> 8) / 16777216.0f; }

/* Exact softmax of logits / temperature, in double. */
static void exact_probs(const float *logits, int n, double temperature, double *p) {
    double m = -INFINITY, s = 0;
    for (int i = 0; i < n; i++) m = fmax(m, logits[i] / temperature);
    for (int i = 0; i < n; i++) s += (p[i] = exp(logits[i] / temperature - m));
    for (int i = 0; i < n; i++) p[i] /= s;
}

/*
 * Pearson's chi-square of `counts` (n_draws in all) against probabilities `p`; categories with
 * p == 0 must have no draws (counted in *impossible); categories expecting fewer than 5
 * draws are pooled into one. The threshold is the 0.999 quantile of
 * chi-square with df = (categories with p > 0) - 1, by the Wilson–Hilferty approximation
 * (z = 3.0902): a correct sampler would fail with probability 0.1% for a random seed; the
 * seeds here are fixed, so the outcome is reproducible. A sampler off by a percent in one
 * category's probability exceeds it by far at 200000 draws.
 */
static int chi_square_ok(const long *counts, const double *p, int n, long n_draws, double *stat_out,
                         double *limit_out, int *impossible) {
    double stat = 0, pooled_e = 0;
    long pooled_c = 0;
    int df = -1;
    *impossible = 0;
    for (int i = 0; i < n; i++) {
        if (p[i] == 0) {
            if (counts[i]) (*impossible)++;
            continue;
        }
        double e = p[i] * (double)n_draws;
        if (e < 5.0) { /* the usual rule: categories expecting fewer than 5 draws are pooled */
            pooled_e += e;
            pooled_c += counts[i];
            continue;
        }
        stat += (counts[i] - e) * (counts[i] - e) / e;
        df++;
    }
    if (pooled_e > 0) {
        stat += (pooled_c - pooled_e) * (pooled_c - pooled_e) / pooled_e;
        df++;
    }
    double limit = 0;
    if (df > 0) {
        double a = 2.0 / (9.0 * df);
        limit = df * pow(1.0 - a + 3.0902 * sqrt(a), 3.0);
    }
    *stat_out = stat;
    *limit_out = limit;
    return df <= 0 ? stat == 0 : stat <= limit;
}

static void init_sampler(wlm_sampler *s, int vocab, float temperature, int top_k, float top_p,
                         float penalty, int last_n, uint64_t seed) {
    wlm_gen_params p;
    wlm_gen_params_default(&p);
    p.temperature = temperature;
    p.top_k = top_k;
    p.top_p = top_p;
    p.repeat_penalty = penalty;
    p.repeat_last_n = last_n;
    p.seed = seed;
    char err[128] = "";
    CHECKF(wlm_sampler_check(&p, err, sizeof err) == WLM_OK, "valid parameters rejected: %s", err);
    CHECK_STATUS(wlm_sampler_init(s, vocab, &p), WLM_OK);
}

/*
 * Draws n_draws tokens from fresh copies of `logits` and compares the frequencies with the
 * probabilities `want` (0 = never drawn). Also checks that prob_sampled equals want[token] and
 * prob equals the temperature-1 softmax `model` of the token, each within 2e-6.
 */
static void draw_and_compare(wlm_sampler *s, const float *logits, int n, const double *want,
                             const double *model, long n_draws, const char *what) {
    long counts[MAXV] = {0};
    float work[MAXV];
    int bad_ps = 0, bad_p = 0, bad_id = 0;
    for (long d = 0; d < n_draws; d++) {
        float prob = -1, ps = -1;
        memcpy(work, logits, sizeof(float) * n);
        int32_t t = wlm_sampler_sample(s, work, NULL, 0, &prob, &ps);
        if (t < 0 || t >= n) {
            bad_id++;
            continue;
        }
        counts[t]++;
        if (fabs(ps - want[t]) > 2e-6 + 2e-6 * want[t]) bad_ps++;
        if (fabs(prob - model[t]) > 2e-6 + 2e-6 * model[t]) bad_p++;
    }
    double stat, limit;
    int impossible;
    CHECKF(bad_id == 0, "%s: %d draws out of range", what, bad_id);
    int ok = chi_square_ok(counts, want, n, n_draws, &stat, &limit, &impossible);
    printf("   %s: chi-square %.2f (limit %.2f)\n", what, stat, limit);
    CHECKF(impossible == 0, "%s: %d tokens outside the allowed set were drawn", what, impossible);
    CHECKF(ok, "%s: chi-square %.2f above the limit %.2f", what, stat, limit);
    CHECKF(bad_ps == 0, "%s: prob_sampled differs from the expected sampling probability in %d "
           "draws", what, bad_ps);
    CHECKF(bad_p == 0, "%s: prob differs from the temperature-1 softmax in %d draws", what, bad_p);
}

/* ------------------------------------------------------------------------------------------ */

static void test_rng(void) {
    tu_section("rng");
    /* the first draws from seed 42, computed separately (Python, 64-bit wrap-around) */
    static const uint32_t FIRST[5] = {0x56ce4ab7u, 0xc841eb53u, 0xca466be0u, 0xf1acc733u, 0xc3af4dd7u};
    uint64_t a = 42, b = 42;
    for (int i = 0; i < 5; i++) {
        uint32_t r = wlm_rng_u32(&a);
        CHECKF(r == FIRST[i], "draw %d from seed 42: 0x%08x, want 0x%08x", i, r, FIRST[i]);
        CHECK(ref_u32(&b) == FIRST[i]);
    }
    a = b = 42;
    int bad = 0;
    for (int i = 0; i < 100000; i++) bad += wlm_rng_u32(&a) != ref_u32(&b) || a != b;
    CHECKF(bad == 0, "wlm_rng_u32 departs from xorshift64* in %d of 100000 draws", bad);
    a = b = 0x123456789abcdefULL;
    bad = 0;
    for (int i = 0; i < 100000; i++) {
        float x = wlm_rng_f32(&a), y = ref_f32(&b);
        bad += x != y || !(x >= 0.0f && x < 1.0f);
    }
    CHECKF(bad == 0, "wlm_rng_f32 departs from (u32 >> 8) / 2^24 in %d draws", bad);
    a = 42;
    CHECK(wlm_rng_f32(&a) == (float)(0x56ce4ab7u >> 8) / 16777216.0f);

    /* the sampler takes the seed as the state; seed 0 is replaced (0 is a fixed point) */
    wlm_sampler s;
    memset(&s, 0, sizeof s);
    init_sampler(&s, 8, 1.0f, 0, 1.0f, 1.0f, 64, 42);
    CHECK(s.rng_state == 42);
    init_sampler(&s, 8, 1.0f, 0, 1.0f, 1.0f, 64, 0);
    CHECK(s.rng_state != 0);
    float flat[8] = {0};
    int seen[8] = {0}, distinct = 0;
    for (int i = 0; i < 200; i++) {
        float w[8];
        memcpy(w, flat, sizeof w);
        int32_t t = wlm_sampler_sample(&s, w, NULL, 0, NULL, NULL);
        if (t >= 0 && t < 8 && !seen[t]++) distinct++;
    }
    CHECKF(distinct == 8, "seed 0: only %d distinct tokens in 200 uniform draws", distinct);
    wlm_sampler_free(&s);
}

static void test_argmax(void) {
    tu_section("argmax and greedy");
    float x[6] = {1.0f, 5.0f, 3.0f, 5.0f, -2.0f, 5.0f};
    CHECK_EQ_INT(wlm_argmax(x, 6), 1);
    CHECK_EQ_INT(wlm_argmax(x, 1), 0);
    float y[4] = {-INFINITY, -3.0f, -1.0f, -1.0f};
    CHECK_EQ_INT(wlm_argmax(y, 4), 2);
    float z[3] = {7.0f, 7.0f, 7.0f};
    CHECK_EQ_INT(wlm_argmax(z, 3), 0);

    /* temperature 0: argmax, first on ties; prob is the temperature-1 softmax; prob_sampled 1 */
    wlm_sampler s;
    memset(&s, 0, sizeof s);
    init_sampler(&s, 6, 0.0f, 0, 0.9f, 1.0f, 64, 7);
    double p[6];
    exact_probs(x, 6, 1.0, p);
    for (int i = 0; i < 20; i++) {
        float w[6], prob = -1, ps = -1;
        memcpy(w, x, sizeof w);
        int32_t t = wlm_sampler_sample(&s, w, NULL, 0, &prob, &ps);
        CHECK_EQ_INT(t, 1);
        CHECK_NEAR(prob, p[1], 1e-6);
        CHECK(ps == 1.0f);
    }
    /* top_k 1: argmax whatever the temperature, ties to the first */
    static const float TEMPS[] = {0.1f, 0.5f, 1.0f, 2.0f, 10.0f, 100.0f};
    for (unsigned ti = 0; ti < sizeof TEMPS / sizeof TEMPS[0]; ti++) {
        int bad = 0;
        init_sampler(&s, 6, TEMPS[ti], 1, 1.0f, 1.0f, 64, 1000 + ti);
        for (int i = 0; i < 2000; i++) {
            float w[6], ps = -1;
            memcpy(w, x, sizeof w);
            bad += wlm_sampler_sample(&s, w, NULL, 0, NULL, &ps) != 1 || ps != 1.0f;
        }
        CHECKF(bad == 0, "top_k 1 at temperature %g: %d of 2000 draws not the first argmax",
               TEMPS[ti], bad);
        init_sampler(&s, 6, TEMPS[ti], 1, 0.9f, 1.0f, 64, 2000 + ti);
        bad = 0;
        for (int i = 0; i < 2000; i++) {
            float w[6];
            memcpy(w, x, sizeof w);
            bad += wlm_sampler_sample(&s, w, NULL, 0, NULL, NULL) != 1;
        }
        CHECKF(bad == 0, "top_k 1 + top_p 0.9 at temperature %g: %d draws not the argmax",
               TEMPS[ti], bad);
    }
    /* a tiny top_p keeps only the most probable token: on a peaked distribution, and on a
     * nearly flat one where every probability is below run.c's cut-off (1 - p) / (n - 1)
     * (run.c itself would index out of bounds there) */
    float peaked[8] = {0.0f, 1.0f, 4.0f, 2.0f, -1.0f, 0.5f, 3.9f, 0.0f};
    float flat[8] = {0.0f, 0.1f, 0.05f, 0.02f, 0.0f, 0.01f, 0.12f, 0.04f};
    for (int k = 0; k < 2; k++) {
        const float *l = k ? flat : peaked;
        int want = k ? 6 : 2, bad = 0;
        for (int ti = 0; ti < 3; ti++) {
            init_sampler(&s, 8, ti == 0 ? 0.5f : ti == 1 ? 1.0f : 3.0f, 0, 1e-6f, 1.0f, 64, 99 + ti);
            for (int i = 0; i < 2000; i++) {
                float w[8], ps = -1;
                memcpy(w, l, sizeof w);
                int32_t t = wlm_sampler_sample(&s, w, NULL, 0, NULL, &ps);
                bad += t != want || fabsf(ps - 1.0f) > 1e-6f;
            }
        }
        CHECKF(bad == 0, "top_p 1e-6 on the %s distribution: %d of 6000 draws not the argmax "
               "(or prob_sampled != 1)", k ? "flat" : "peaked", bad);
    }
    wlm_sampler_free(&s);
}

static void test_distributions(void) {
    wlm_sampler s;
    memset(&s, 0, sizeof s);
    const long N = 200000;
    /* ten logits: every probability large enough for the chi-square (>= 0.5% here) */
    const float L[10] = {1.0f, 2.5f, 0.3f, -0.5f, 1.8f, 2.2f, 0.0f, -1.2f, 1.1f, 0.7f};
    double p[MAXV], model[MAXV];
    exact_probs(L, 10, 1.0, model);

    tu_section("plain multinomial (top_k 0, top_p 1)");
    init_sampler(&s, 10, 1.0f, 0, 1.0f, 1.0f, 64, 12345);
    draw_and_compare(&s, L, 10, model, model, N, "temperature 1");

    tu_section("temperature");
    static const float TEMPS[] = {0.7f, 1.6f, 0.35f};
    for (int ti = 0; ti < 3; ti++) {
        char what[64];
        exact_probs(L, 10, TEMPS[ti], p);
        init_sampler(&s, 10, TEMPS[ti], 0, 1.0f, 1.0f, 64, 777 + ti);
        snprintf(what, sizeof what, "temperature %g", TEMPS[ti]);
        /* at 0.35 the smallest probabilities are ~1e-5: chi_square_ok pools them */
        draw_and_compare(&s, L, 10, p, model, N, what);
    }

    tu_section("top-k");
    /* top_k 3: only the three largest (ids 1, 5, 4), in proportion to their probabilities */
    {
        double q[10] = {0}, mass = model[1] + model[5] + model[4];
        q[1] = model[1] / mass;
        q[5] = model[5] / mass;
        q[4] = model[4] / mass;
        init_sampler(&s, 10, 1.0f, 3, 1.0f, 1.0f, 64, 4242);
        draw_and_compare(&s, L, 10, q, model, N, "top_k 3");
        /* with temperature 2: the same three, flatter */
        double t2[10];
        exact_probs(L, 10, 2.0, t2);
        mass = t2[1] + t2[5] + t2[4];
        memset(q, 0, sizeof q);
        q[1] = t2[1] / mass;
        q[5] = t2[5] / mass;
        q[4] = t2[4] / mass;
        init_sampler(&s, 10, 2.0f, 3, 1.0f, 1.0f, 64, 4343);
        draw_and_compare(&s, L, 10, q, model, N, "top_k 3, temperature 2");
        /* top_k >= vocab is no filter */
        init_sampler(&s, 10, 1.0f, 10, 1.0f, 1.0f, 64, 4444);
        draw_and_compare(&s, L, 10, model, model, N / 2, "top_k 10 of 10");
        init_sampler(&s, 10, 1.0f, 50, 1.0f, 1.0f, 64, 4545);
        draw_and_compare(&s, L, 10, model, model, N / 2, "top_k 50 of 10");
    }

    tu_section("top-p");
    /* top_p 0.5 over 12 tokens: the nucleus is computed here, from the exact probabilities:
     * sort descending, keep the shortest prefix whose sum exceeds 0.5 (the token that crosses
     * it included); the logits were chosen so no prefix sum is within 0.01 of 0.5. */
    {
        const float M[12] = {0.2f, 1.9f, -0.4f, 1.4f, 0.9f, 2.3f, -1.0f, 0.5f, 1.2f, 0.0f, 0.8f, -0.3f};
        double pm[12], q[12] = {0};
        int order[12];
        exact_probs(M, 12, 1.0, pm);
        for (int i = 0; i < 12; i++) order[i] = i;
        for (int i = 0; i < 12; i++) /* selection sort, descending */
            for (int j = i + 1; j < 12; j++)
                if (pm[order[j]] > pm[order[i]]) {
                    int t = order[i];
                    order[i] = order[j];
                    order[j] = t;
                }
        double cum = 0, margin = 1;
        int kept = 0;
        for (int i = 0; i < 12; i++) {
            cum += pm[order[i]];
            margin = fmin(margin, fabs(cum - 0.5));
            kept++;
            if (cum > 0.5) break;
        }
        CHECKF(margin > 0.01, "test setup: a prefix sum is within %.4f of 0.5", margin);
        for (int i = 0; i < kept; i++) q[order[i]] = pm[order[i]] / cum;
        printf("   top_p 0.5 nucleus: %d tokens holding %.4f\n", kept, cum);
        CHECK(kept >= 2 && kept <= 4);
        init_sampler(&s, 12, 1.0f, 0, 0.5f, 1.0f, 64, 5050);
        draw_and_compare(&s, M, 12, q, pm, N, "top_p 0.5");
        /* top_p 0.999999: everything (nothing is cut below the last token) */
        init_sampler(&s, 12, 1.0f, 0, 0.999999f, 1.0f, 64, 5151);
        draw_and_compare(&s, M, 12, pm, pm, N / 2, "top_p 0.999999");
    }
    wlm_sampler_free(&s);
}

/* ------------------------------------------------------------------------------------------ */
/* Repetition penalty, seen in the logits the greedy path leaves behind.                       */

static void test_penalty(void) {
    tu_section("repetition penalty");
    wlm_sampler s;
    memset(&s, 0, sizeof s);
    const float L[8] = {2.0f, -1.0f, 0.5f, -0.5f, 3.0f, 0.0f, 1.0f, -2.0f};
    float w[8], prob = -1;
    double p[8];

    /* window 3 over history [0 7 1 2 2]: tokens 1 and 2 are in it (2 twice: penalised once);
     * 0 and 7 were seen earlier, outside the window: untouched */
    const int32_t H1[5] = {0, 7, 1, 2, 2};
    init_sampler(&s, 8, 0.0f, 0, 1.0f, 2.0f, 3, 1);
    memcpy(w, L, sizeof w);
    int32_t t = wlm_sampler_sample(&s, w, H1, 5, &prob, NULL);
    const float E1[8] = {2.0f, -2.0f, 0.25f, -0.5f, 3.0f, 0.0f, 1.0f, -2.0f};
    CHECK_EQ_INT(t, 4);
    for (int i = 0; i < 8; i++) CHECKF(w[i] == E1[i], "logit %d: %g, want %g", i, w[i], E1[i]);
    exact_probs(E1, 8, 1.0, p);
    CHECK_NEAR(prob, p[4], 1e-6);

    /* the penalty changes the argmax: 4 in the window, 3.0 -> 1.5 < 2.0 */
    const int32_t H2[3] = {4, 6, 4};
    memcpy(w, L, sizeof w);
    t = wlm_sampler_sample(&s, w, H2, 3, &prob, NULL);
    const float E2[8] = {2.0f, -1.0f, 0.5f, -0.5f, 1.5f, 0.0f, 0.5f, -2.0f};
    CHECK_EQ_INT(t, 0);
    for (int i = 0; i < 8; i++) CHECKF(w[i] == E2[i], "logit %d: %g, want %g", i, w[i], E2[i]);
    exact_probs(E2, 8, 1.0, p);
    CHECK_NEAR(prob, p[0], 1e-6);

    /* a window longer than the history covers all of it */
    init_sampler(&s, 8, 0.0f, 0, 1.0f, 1.25f, 64, 1);
    const int32_t H3[4] = {0, 7, 3, 0};
    memcpy(w, L, sizeof w);
    t = wlm_sampler_sample(&s, w, H3, 4, NULL, NULL);
    CHECK_EQ_INT(t, 4);
    CHECK(w[0] == 2.0f / 1.25f && w[7] == -2.0f * 1.25f && w[3] == -0.5f * 1.25f);
    CHECK(w[1] == L[1] && w[2] == L[2] && w[4] == L[4] && w[5] == L[5] && w[6] == L[6]);

    /* window 0 and penalty 1: no change */
    init_sampler(&s, 8, 0.0f, 0, 1.0f, 2.0f, 0, 1);
    memcpy(w, L, sizeof w);
    wlm_sampler_sample(&s, w, H3, 4, NULL, NULL);
    CHECK(memcmp(w, L, sizeof w) == 0);
    init_sampler(&s, 8, 0.0f, 0, 1.0f, 1.0f, 64, 1);
    memcpy(w, L, sizeof w);
    wlm_sampler_sample(&s, w, H3, 4, NULL, NULL);
    CHECK(memcmp(w, L, sizeof w) == 0);
    /* no history */
    init_sampler(&s, 8, 0.0f, 0, 1.0f, 2.0f, 64, 1);
    memcpy(w, L, sizeof w);
    wlm_sampler_sample(&s, w, NULL, 0, NULL, NULL);
    CHECK(memcmp(w, L, sizeof w) == 0);
    /* a penalty below 1 rewards repeats: positive logits grow, negative ones shrink */
    init_sampler(&s, 8, 0.0f, 0, 1.0f, 0.5f, 64, 1);
    const int32_t H4[2] = {6, 1};
    memcpy(w, L, sizeof w);
    t = wlm_sampler_sample(&s, w, H4, 2, NULL, NULL);
    CHECK(w[6] == 2.0f && w[1] == -0.5f);
    CHECK_EQ_INT(t, 4);
    /* the same history twice in a row is penalised the same way both times (no state left) */
    init_sampler(&s, 8, 0.0f, 0, 1.0f, 2.0f, 3, 1);
    for (int rep = 0; rep < 2; rep++) {
        memcpy(w, L, sizeof w);
        wlm_sampler_sample(&s, w, H1, 5, NULL, NULL);
        CHECKF(memcmp(w, E1, sizeof w) == 0, "repeat %d differs", rep);
    }
    /* with temperature > 0: the draws follow the penalised distribution, and prob reports it */
    {
        double q[8];
        long counts[8] = {0};
        exact_probs(E1, 8, 1.0, q);
        init_sampler(&s, 8, 1.0f, 0, 1.0f, 2.0f, 3, 31337);
        int bad_p = 0;
        for (long d = 0; d < 100000; d++) {
            memcpy(w, L, sizeof w);
            float pr = -1;
            t = wlm_sampler_sample(&s, w, H1, 5, &pr, NULL);
            if (t < 0 || t >= 8) {
                bad_p++;
                continue;
            }
            counts[t]++;
            bad_p += fabs(pr - q[t]) > 2e-6;
        }
        double stat, limit;
        int impossible;
        int ok = chi_square_ok(counts, q, 8, 100000, &stat, &limit, &impossible);
        CHECKF(ok && impossible == 0, "penalised draws: chi-square %.2f above %.2f", stat, limit);
        CHECKF(bad_p == 0, "penalised draws: prob wrong in %d draws", bad_p);
    }
    wlm_sampler_free(&s);
}

/* ------------------------------------------------------------------------------------------ */
/* run.c's sample(), transcribed (llama2.c, run.c: softmax, sample_mult, sample_topp, sample). */

typedef struct {
    float prob;
    int index;
} runc_prob_index;

static int runc_compare(const void *a, const void *b) {
    const runc_prob_index *a_ = (const runc_prob_index *)a, *b_ = (const runc_prob_index *)b;
    if (a_->prob > b_->prob) return -1;
    if (a_->prob < b_->prob) return 1;
    return 0;
}

static void runc_softmax(float *x, int size) {
    float max_val = x[0];
    for (int i = 1; i < size; i++)
        if (x[i] > max_val) max_val = x[i];
    float sum = 0.0f;
    for (int i = 0; i < size; i++) {
        x[i] = expf(x[i] - max_val);
        sum += x[i];
    }
    for (int i = 0; i < size; i++) x[i] /= sum;
}

static int runc_sample_mult(const float *probabilities, int n, float coin) {
    float cdf = 0.0f;
    for (int i = 0; i < n; i++) {
        cdf += probabilities[i];
        if (coin < cdf) return i;
    }
    return n - 1;
}

static int runc_sample_topp(const float *probabilities, int n, float topp,
                            runc_prob_index *probindex, float coin) {
    int n0 = 0;
    const float cutoff = (1.0f - topp) / (n - 1);
    for (int i = 0; i < n; i++)
        if (probabilities[i] >= cutoff) {
            probindex[n0].index = i;
            probindex[n0].prob = probabilities[i];
            n0++;
        }
    qsort(probindex, n0, sizeof(runc_prob_index), runc_compare);
    float cumulative_prob = 0.0f;
    int last_idx = n0 - 1;
    for (int i = 0; i < n0; i++) {
        cumulative_prob += probindex[i].prob;
        if (cumulative_prob > topp) {
            last_idx = i;
            break;
        }
    }
    float r = coin * cumulative_prob;
    float cdf = 0.0f;
    for (int i = 0; i <= last_idx; i++) {
        cdf += probindex[i].prob;
        if (r < cdf) return probindex[i].index;
    }
    return probindex[last_idx].index;
}

static int runc_sample(float *logits, int n, float temperature, float topp, uint64_t *rng,
                       runc_prob_index *probindex) {
    if (temperature == 0.0f) return wlm_argmax(logits, n);
    for (int q = 0; q < n; q++) logits[q] /= temperature;
    runc_softmax(logits, n);
    float coin = ref_f32(rng);
    if (topp <= 0 || topp >= 1) return runc_sample_mult(logits, n, coin);
    return runc_sample_topp(logits, n, topp, probindex, coin);
}

static void test_runc_equivalence(void) {
    tu_section("same tokens as run.c's sample() for a seed");
    static const struct {
        float temperature, top_p;
    } CFG[] = {{1.0f, 0.9f}, {0.8f, 0.9f}, {1.0f, 1.0f}, {1.3f, 0.95f}, {0.5f, 0.5f}, {1.0f, 0.3f}};
    runc_prob_index probindex[MAXV];
    wlm_sampler s;
    memset(&s, 0, sizeof s);
    for (unsigned c = 0; c < sizeof CFG / sizeof CFG[0]; c++) {
        const int n = 48;
        uint64_t rs = 42 + c;
        tu_rng data = {77 + c};
        init_sampler(&s, n, CFG[c].temperature, 0, CFG[c].top_p, 1.0f, 64, 42 + c);
        int mismatches = 0, first = -1;
        for (int step = 0; step < 3000; step++) {
            float l1[MAXV], l2[MAXV];
            /* distinct random logits (no probability ties, so qsort's order is defined) */
            for (int i = 0; i < n; i++) l1[i] = l2[i] = tu_rng_uniform(&data, -4.0f, 4.0f);
            int a = wlm_sampler_sample(&s, l1, NULL, 0, NULL, NULL);
            int b = runc_sample(l2, n, CFG[c].temperature, CFG[c].top_p, &rs, probindex);
            if (a != b) {
                if (first < 0) first = step;
                mismatches++;
            }
        }
        CHECKF(mismatches == 0, "temperature %g top_p %g: %d of 3000 tokens differ from run.c's "
               "(first at step %d)", CFG[c].temperature, CFG[c].top_p, mismatches, first);
        CHECKF(s.rng_state == rs, "temperature %g top_p %g: RNG state differs from run.c's",
               CFG[c].temperature, CFG[c].top_p);
    }
    wlm_sampler_free(&s);
}

/* ------------------------------------------------------------------------------------------ */

static void expect_invalid(wlm_gen_params p, const char *what) {
    char err[160];
    memset(err, 0, sizeof err);
    int rc = wlm_sampler_check(&p, err, sizeof err);
    CHECKF(rc == WLM_ERR_INVALID_ARG, "%s: got %d (%s)", what, rc, wlm_status_name(rc));
    CHECKF(err[0] != 0, "%s: no message", what);
}

static void test_check(void) {
    tu_section("parameter validation");
    wlm_gen_params d, p;
    char err[160] = "";
    wlm_gen_params_default(&d);
    CHECK(d.temperature == 1.0f && d.top_k == 0 && d.top_p == 0.9f && d.repeat_penalty == 1.0f &&
          d.repeat_last_n == 64 && d.max_tokens == 256 && d.add_bos == 1 && d.n_stop == 0);
    CHECK_STATUS(wlm_sampler_check(&d, err, sizeof err), WLM_OK);
    p = d, p.temperature = 0.0f, p.top_p = 1.0f, p.top_k = 0, p.repeat_penalty = 1.0f;
    CHECK_STATUS(wlm_sampler_check(&p, err, sizeof err), WLM_OK);
    p = d, p.top_p = 1e-6f, p.top_k = 100000, p.repeat_penalty = 0.01f, p.repeat_last_n = 0;
    CHECK_STATUS(wlm_sampler_check(&p, err, sizeof err), WLM_OK);
    p = d, p.temperature = 1000.0f;
    CHECK_STATUS(wlm_sampler_check(&p, err, sizeof err), WLM_OK);

    p = d, p.temperature = -1.0f;
    expect_invalid(p, "temperature -1");
    p = d, p.temperature = -1e-30f;
    expect_invalid(p, "temperature -1e-30");
    p = d, p.temperature = NAN;
    expect_invalid(p, "temperature NaN");
    p = d, p.top_p = 0.0f;
    expect_invalid(p, "top_p 0");
    p = d, p.top_p = -0.5f;
    expect_invalid(p, "top_p -0.5");
    p = d, p.top_p = 1.5f;
    expect_invalid(p, "top_p 1.5");
    p = d, p.top_p = NAN;
    expect_invalid(p, "top_p NaN");
    p = d, p.top_k = -1;
    expect_invalid(p, "top_k -1");
    p = d, p.repeat_penalty = 0.0f;
    expect_invalid(p, "repeat_penalty 0");
    p = d, p.repeat_penalty = -1.0f;
    expect_invalid(p, "repeat_penalty -1");
    p = d, p.repeat_penalty = NAN;
    expect_invalid(p, "repeat_penalty NaN");
    p = d, p.repeat_last_n = -1;
    expect_invalid(p, "repeat_last_n -1");
}

int main(void) {
    test_rng();
    test_argmax();
    test_distributions();
    test_penalty();
    test_runc_equivalence();
    test_check();
    return TEST_FINISH();
}
