/*
 * test_sampler.c — the sampler chain (sampler.h) checked for exactness. A reference written here
 * in double precision, independently of sampler.c (plain sorts, no shortcuts), gives the exact
 * probability every configuration leaves on every token; 100 000 draws per configuration must
 * pass Pearson's chi-square test against it (p >= 1e-4), and every reported prob_sampled, prob,
 * logprob and top[] entry must match it. Negative controls show the test can fail. Also: the
 * xorshift RNG, greedy and its ties, penalties seen through the report, run.c's sample()
 * transcribed so that a seed must give run.c's tokens (and llama.cpp's order at T = 1 the same),
 * parameter validation, edge cases and the cost per token on a 32000-token vocabulary.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sampling/sampler.h"
#include "wasmlm.h"
#include "test_util.h"

#define MAXV 64
#define N_DRAWS 100000L
#define P_MIN 1e-4 /* chi-square p-value below which a distribution is rejected */

static double seconds(void) { return (double)clock() / CLOCKS_PER_SEC; }

/* ------------------------------------------------------------------------------------------ */
/* Statistics                                                                                  */

/* Q(a, x) = Γ(a, x) / Γ(a), the regularised upper incomplete gamma function: the series for
 * P(a, x) when x < a + 1, else the continued fraction for Q (modified Lentz). */
static double gamma_q(double a, double x) {
    if (x <= 0) return 1.0;
    const double front = exp(-x + a * log(x) - lgamma(a));
    if (x < a + 1.0) {
        double term = 1.0 / a, sum = term;
        for (int n = 1; n < 10000; n++) {
            term *= x / (a + n);
            sum += term;
            if (fabs(term) < fabs(sum) * 1e-16) break;
        }
        return fmax(0.0, 1.0 - front * sum);
    }
    const double tiny = 1e-300;
    double b = x + 1.0 - a, c = 1.0 / tiny, d = 1.0 / b, h = d;
    for (int i = 1; i < 10000; i++) {
        const double an = -i * (i - a);
        b += 2.0;
        d = an * d + b;
        if (fabs(d) < tiny) d = tiny;
        c = b + an / c;
        if (fabs(c) < tiny) c = tiny;
        d = 1.0 / d;
        const double delta = d * c;
        h *= delta;
        if (fabs(delta - 1.0) < 1e-16) break;
    }
    return front * h;
}

typedef struct chi_result {
    double stat, pvalue;
    int df, impossible; /* impossible: draws of tokens the expectation gives probability 0 */
    int pass;
} chi_result;

/*
 * Pearson's chi-square of counts (n_draws in all) against probabilities p. Cells expecting
 * fewer than 5 draws are pooled into one (itself merged into the smallest cell if it still
 * expects fewer than 5); df = cells - 1. A draw of a token with p = 0 fails outright.
 */
static chi_result chi_square(const long *counts, const double *p, int n, long n_draws) {
    chi_result r = {0, 1.0, 0, 0, 0};
    double e[MAXV + 1], pooled_e = 0;
    long c[MAXV + 1], pooled_c = 0;
    int cells = 0;
    for (int i = 0; i < n; i++) {
        if (p[i] == 0) {
            if (counts[i]) r.impossible++;
            continue;
        }
        const double ei = p[i] * (double)n_draws;
        if (ei < 5.0) {
            pooled_e += ei;
            pooled_c += counts[i];
        } else {
            e[cells] = ei;
            c[cells++] = counts[i];
        }
    }
    if (pooled_e > 0) {
        if (pooled_e < 5.0 && cells > 0) {
            int s = 0;
            for (int i = 1; i < cells; i++)
                if (e[i] < e[s]) s = i;
            e[s] += pooled_e;
            c[s] += pooled_c;
        } else {
            e[cells] = pooled_e;
            c[cells++] = pooled_c;
        }
    }
    for (int i = 0; i < cells; i++) r.stat += ((double)c[i] - e[i]) * ((double)c[i] - e[i]) / e[i];
    r.df = cells - 1;
    r.pvalue = r.df > 0 ? gamma_q(r.df / 2.0, r.stat / 2.0) : 1.0;
    r.pass = r.impossible == 0 && r.pvalue >= P_MIN;
    return r;
}

static void test_statistics(void) {
    tu_section("chi-square machinery");
    /* textbook critical values: P(chi2_df > x) */
    CHECK_NEAR(gamma_q(0.5, 3.841459 / 2), 0.05, 1e-6);
    CHECK_NEAR(gamma_q(5.0, 18.307038 / 2), 0.05, 1e-6);
    CHECK_NEAR(gamma_q(10.0, 37.566235 / 2), 0.01, 1e-6);
    CHECK_NEAR(gamma_q(1.0, 13.815511 / 2), 0.001, 1e-7); /* df 2: Q = exp(-x/2) */
    CHECK_NEAR(gamma_q(15.0, 59.703058 / 2), 0.001, 1e-8); /* Simpson in Python */
    CHECK_NEAR(gamma_q(15.0, 67.632630 / 2), 1e-4, 1e-9);
    CHECK_NEAR(gamma_q(3.0, 0.0), 1.0, 0);
    /* pooling and impossible draws */
    const double p[4] = {0.5, 0.49998, 0.00002, 0.0};
    long ok[4] = {50100, 49898, 2, 0}, bad[4] = {50100, 49897, 2, 1};
    chi_result r = chi_square(ok, p, 4, 100000);
    CHECK(r.pass && r.df == 1 && r.impossible == 0);
    r = chi_square(bad, p, 4, 100000);
    CHECK(!r.pass && r.impossible == 1);
    long skew[4] = {51000, 48998, 2, 0};
    r = chi_square(skew, p, 4, 100000);
    CHECKF(!r.pass, "a 1%% shift at 100000 draws must be rejected (p = %g)", r.pvalue);
}

/* ------------------------------------------------------------------------------------------ */
/* The reference chain, in double, straight from the definitions in wasmlm.h                   */

/* Sorts idx[0..m) by key ascending, then id ascending (insertion sort: m is small). */
static void sort_by_key(int *idx, int m, const double *key) {
    for (int i = 1; i < m; i++) {
        int v = idx[i], j = i;
        for (; j > 0 && (key[idx[j - 1]] > key[v] || (key[idx[j - 1]] == key[v] && idx[j - 1] > v));
             j--)
            idx[j] = idx[j - 1];
        idx[j] = v;
    }
}

/* Renormalised softmax(z / t) over the kept tokens. */
static void dist_over(const double *z, const int *keep, int n, double t, double *q) {
    double m = -INFINITY, s = 0;
    for (int i = 0; i < n; i++)
        if (keep[i]) m = fmax(m, z[i] / t);
    for (int i = 0; i < n; i++) s += (q[i] = keep[i] ? exp(z[i] / t - m) : 0.0);
    for (int i = 0; i < n; i++) q[i] /= s;
}

/* For a threshold crossed at sorted position j: the distance of the decision from flipping
 * (the running sums on both sides of the cut, and the key gap to the next token unless tied). */
static double cut_margin(const int *idx, int m, int j, const double *cum, double limit,
                         const double *key, const double *z) {
    double mg = fabs(cum[j] - limit);
    if (j > 0) mg = fmin(mg, fabs(limit - cum[j - 1]));
    if (j + 1 < m && z[idx[j]] != z[idx[j + 1]]) mg = fmin(mg, fabs(key[idx[j + 1]] - key[idx[j]]));
    return mg;
}

/*
 * The exact distribution q[0..n) the chain leaves (stages of wasmlm.h, in p->order), and the
 * smallest margin by which any threshold decision could flip (*margin, +inf when none).
 */
static void ref_chain(const wlm_gen_params *p, const float *logits, int n, const int32_t *hist,
                      int nh, double *q, double *margin) {
    double z[MAXV], qq[MAXV], key[MAXV], cum[MAXV];
    int keep[MAXV], cnt[MAXV] = {0}, idx[MAXV], m;
    *margin = INFINITY;
    for (int i = 0; i < n; i++) z[i] = logits[i], keep[i] = 1;
    if (p->repeat_last_n > 0)
        for (int i = nh > p->repeat_last_n ? nh - p->repeat_last_n : 0; i < nh; i++)
            if (hist[i] >= 0 && hist[i] < n) cnt[hist[i]]++;
    for (int t = 0; t < n; t++) {
        if (!cnt[t]) continue;
        if (z[t] > 0)
            z[t] /= p->repeat_penalty;
        else
            z[t] *= p->repeat_penalty;
        z[t] -= cnt[t] * (double)p->frequency_penalty + p->presence_penalty;
    }
    for (int i = 0; i < p->n_logit_bias; i++) {
        const wlm_logit_bias *b = &p->logit_bias[i];
        if (isinf(b->bias))
            keep[b->token] = 0;
        else
            z[b->token] += b->bias;
    }
    for (int i = 0; i < p->n_banned; i++) keep[p->banned[i]] = 0;
    for (int i = 0; i < n; i++) q[i] = 0;
    if (p->temperature == 0) {
        int best = -1;
        for (int i = 0; i < n; i++)
            if (keep[i] && (best < 0 || z[i] > z[best])) best = i;
        q[best] = 1;
        return;
    }
    const double T = p->temperature, tp = p->order == WLM_ORDER_RUNC ? T : 1.0;
    if (p->top_k > 0 && p->top_k < n) { /* the k largest logits */
        m = 0;
        for (int i = 0; i < n; i++)
            if (keep[i]) idx[m++] = i, key[i] = -z[i];
        sort_by_key(idx, m, key);
        for (int j = p->top_k; j < m; j++) keep[idx[j]] = 0;
    }
    if (p->typical_p < 1) { /* by |-log q - H| ascending, shortest prefix with mass >= tau */
        dist_over(z, keep, n, tp, qq);
        double H = 0;
        for (int i = 0; i < n; i++)
            if (keep[i] && qq[i] > 0) H -= qq[i] * log(qq[i]);
        m = 0;
        for (int i = 0; i < n; i++)
            if (keep[i]) idx[m++] = i, key[i] = fabs(-log(qq[i]) - H);
        sort_by_key(idx, m, key);
        int j = 0;
        double c = 0;
        for (; j < m; j++) {
            cum[j] = c += qq[idx[j]];
            if (c >= p->typical_p) break;
        }
        if (j == m) j = m - 1;
        *margin = fmin(*margin, cut_margin(idx, m, j, cum, p->typical_p, key, z));
        for (int k = j + 1; k < m; k++) keep[idx[k]] = 0;
    }
    if (p->top_p < 1) { /* by q descending, shortest prefix with mass > top_p */
        dist_over(z, keep, n, tp, qq);
        m = 0;
        for (int i = 0; i < n; i++)
            if (keep[i]) idx[m++] = i, key[i] = -qq[i];
        sort_by_key(idx, m, key);
        int j = 0;
        double c = 0;
        for (; j < m; j++) {
            cum[j] = c += qq[idx[j]];
            if (c > p->top_p) break;
        }
        if (j == m) j = m - 1;
        *margin = fmin(*margin, cut_margin(idx, m, j, cum, p->top_p, key, z));
        for (int k = j + 1; k < m; k++) keep[idx[k]] = 0;
    }
    if (p->min_p > 0) { /* q >= min_p * max q */
        dist_over(z, keep, n, tp, qq);
        double mx = 0;
        for (int i = 0; i < n; i++) mx = fmax(mx, qq[i]);
        for (int i = 0; i < n; i++) {
            if (!keep[i]) continue;
            *margin = fmin(*margin, fabs(qq[i] - p->min_p * mx));
            if (qq[i] < p->min_p * mx) keep[i] = 0;
        }
    }
    dist_over(z, keep, n, T, q); /* both orders end in exp(z / T) over the survivors */
}

static void model_dist(const float *logits, int n, double *p) {
    double m = -INFINITY, s = 0;
    for (int i = 0; i < n; i++) m = fmax(m, logits[i]);
    for (int i = 0; i < n; i++) s += (p[i] = exp(logits[i] - m));
    for (int i = 0; i < n; i++) p[i] /= s;
}

/* The expected top[]: by exact q descending, then model probability, then id. */
static void ref_top(const double *q, const double *model, int n, int *order) {
    for (int i = 0; i < n; i++) order[i] = i;
    for (int i = 1; i < n; i++) {
        int v = order[i], j = i;
        for (; j > 0; j--) {
            int u = order[j - 1];
            int before = q[v] != q[u]           ? q[v] > q[u]
                         : model[v] != model[u] ? model[v] > model[u]
                                                : v < u;
            if (!before) break;
            order[j] = u;
        }
        order[j] = v;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Drawing                                                                                     */

static wlm_gen_params neutral(int order, float temperature, uint64_t seed) {
    wlm_gen_params p;
    wlm_gen_params_default(&p);
    p.temperature = temperature;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.typical_p = 1.0f;
    p.repeat_penalty = 1.0f;
    p.repeat_last_n = 64;
    p.presence_penalty = p.frequency_penalty = 0.0f;
    p.n_logit_bias = p.n_banned = 0;
    p.logit_bias = NULL;
    p.banned = NULL;
    p.order = order;
    p.n_probs = 0;
    p.seed = seed;
    return p;
}

static int init_ok(wlm_sampler *s, int vocab, const wlm_gen_params *p) {
    char err[200] = "";
    int rc = wlm_sampler_check(p, vocab, err, sizeof err);
    CHECKF(rc == WLM_OK, "valid parameters rejected: %s", err);
    if (rc != WLM_OK) return 0;
    rc = wlm_sampler_init(s, vocab, p);
    CHECK_STATUS(rc, WLM_OK);
    return rc == WLM_OK;
}

/* Draws n_draws tokens into counts[] (zeroed here), checking each report against q / model:
 * prob_sampled == q[t] (1e-5), prob == model[t] (1e-6), logprob == ln model[t] (1e-5), and the
 * top[] list (which does not depend on the coin) against ref_top once and for identity after. */
static void draw(wlm_sampler *s, const float *logits, int n, const int32_t *hist, int nh,
                 long n_draws, long *counts, const double *q, const double *model,
                 const char *what) {
    int order[MAXV];
    ref_top(q, model, n, order);
    memset(counts, 0, sizeof(long) * MAXV);
    int bad_id = 0, bad_ps = 0, bad_p = 0, bad_lp = 0, bad_top = 0, top_changed = 0;
    wlm_token first;
    for (long d = 0; d < n_draws; d++) {
        wlm_token info;
        memset(&info, 0, sizeof info);
        int32_t t = wlm_sampler_sample(s, logits, hist, nh, &info);
        if (t < 0 || t >= n) {
            bad_id++;
            continue;
        }
        counts[t]++;
        bad_ps += !(fabs(info.prob_sampled - q[t]) <= 1e-5);
        bad_p += !(fabs(info.prob - model[t]) <= 1e-6);
        bad_lp += !(fabs(info.logprob - log(model[t])) <= 1e-5);
        if (d == 0) {
            first = info;
            const int want_n = s->n_probs < n ? s->n_probs : n;
            bad_top += info.n_probs != want_n;
            for (int i = 0; i < info.n_probs && i < want_n; i++) {
                const wlm_token_prob *e = &info.top[i];
                const int id = order[i];
                int ok = e->id == id && fabs(e->prob_sampled - q[id]) <= 1e-5 &&
                         fabs(e->prob - model[id]) <= 1e-6 &&
                         fabs(e->logprob - log(model[id])) <= 1e-5;
                if (!ok && bad_top++ < 3)
                    printf("   %s: top[%d] = {id %d, ps %.7f, p %.7f, lp %.5f}, "
                           "want {id %d, ps %.7f, p %.7f}\n",
                           what, i, (int)e->id, e->prob_sampled, e->prob, e->logprob, id, q[id],
                           model[id]);
            }
        } else if (info.n_probs != first.n_probs ||
                   memcmp(info.top, first.top, sizeof(wlm_token_prob) * (size_t)first.n_probs)) {
            top_changed++;
        }
    }
    CHECKF(bad_id == 0, "%s: %d draws out of range", what, bad_id);
    CHECKF(bad_ps == 0, "%s: prob_sampled differs from the exact probability in %d draws", what,
           bad_ps);
    CHECKF(bad_p == 0, "%s: prob differs from the model softmax in %d draws", what, bad_p);
    CHECKF(bad_lp == 0, "%s: logprob differs from ln(model softmax) in %d draws", what, bad_lp);
    CHECKF(bad_top == 0, "%s: top[] differs from the reference in %d entries", what, bad_top);
    CHECKF(top_changed == 0, "%s: top[] changed between draws %d times", what, top_changed);
}

/* The designed logits: exact binary fractions with ties (0 = 15 = 2.0; 3 = 8 = 11 = 1.5;
 * 1 = 23 = 1.0; 7 = 19 = 0.25; 9 = 14 = -1.0), 24 tokens. */
#define NV 24
static const float L[NV] = {2.0f, 1.0f,  0.5f, 1.5f, -0.5f, 2.75f, 0.0f,  0.25f,
                            1.5f, -1.0f, 3.0f, 1.5f, -2.0f, 0.75f, -1.0f, 2.0f,
                            -3.0f, 1.25f, -0.25f, 0.25f, 2.5f, -1.5f, -4.0f, 1.0f};
/* History: the window of 6 is {7, 3, 12, 5, 10, 10}; 20 and the early 3s lie outside it. */
static const int32_t HIST[10] = {20, 3, 3, 20, 7, 3, 12, 5, 10, 10};
#define LAST_N 6
static const wlm_logit_bias BIAS[4] = {{5, -1.0f}, {22, 5.125f}, {12, -INFINITY}, {6, 0.375f}};
static const int32_t BANS[3] = {10, 20, 3};

typedef struct config {
    const char *name;
    float temperature;
    int top_k;
    float typical_p, top_p, min_p;
    float repeat, presence, frequency;
    int bias, bans;
} config;

static wlm_gen_params make_params(const config *c, int order, uint64_t seed) {
    wlm_gen_params p = neutral(order, c->temperature, seed);
    p.top_k = c->top_k;
    p.typical_p = c->typical_p ? c->typical_p : 1.0f;
    p.top_p = c->top_p ? c->top_p : 1.0f;
    p.min_p = c->min_p;
    p.repeat_penalty = c->repeat ? c->repeat : 1.0f;
    p.presence_penalty = c->presence;
    p.frequency_penalty = c->frequency;
    p.repeat_last_n = LAST_N;
    if (c->bias) p.n_logit_bias = 4, p.logit_bias = BIAS;
    if (c->bans) p.n_banned = 3, p.banned = BANS;
    p.n_probs = WLM_MAX_PROBS;
    return p;
}

static double g_draw_seconds;

/* One configuration in one order: reference, margin check, draws, chi-square. */
static void exact_config(wlm_sampler *s, const config *c, int order, uint64_t seed) {
    char what[160];
    snprintf(what, sizeof what, "%s [%s]", c->name, order == WLM_ORDER_RUNC ? "runc" : "llama.cpp");
    wlm_gen_params p = make_params(c, order, seed);
    double q[MAXV], model[MAXV], margin;
    long counts[MAXV];
    ref_chain(&p, L, NV, HIST, 10, q, &margin);
    model_dist(L, NV, model);
    CHECKF(margin > 1e-3, "test setup, %s: a threshold decision is within %.2g of flipping", what,
           margin);
    if (!init_ok(s, NV, &p)) return;
    double t0 = seconds();
    draw(s, L, NV, HIST, 10, N_DRAWS, counts, q, model, what);
    g_draw_seconds += seconds() - t0;
    chi_result r = chi_square(counts, q, NV, N_DRAWS);
    int kept = 0;
    for (int i = 0; i < NV; i++) kept += q[i] > 0;
    printf("   %-44s %2d tokens  chi2 %7.2f df %2d  p %.4f\n", what, kept, r.stat, r.df, r.pvalue);
    CHECKF(r.impossible == 0, "%s: %d draws of tokens the chain must exclude", what, r.impossible);
    CHECKF(r.pass, "%s: chi-square %.2f with %d df, p = %.3g < %g", what, r.stat, r.df, r.pvalue,
           P_MIN);
}

/* ------------------------------------------------------------------------------------------ */

static void test_rng(void) {
    tu_section("rng");
    /* the first draws from seed 42, computed separately (Python, 64-bit wrap-around) */
    static const uint32_t FIRST[5] = {0x56ce4ab7u, 0xc841eb53u, 0xca466be0u, 0xf1acc733u,
                                      0xc3af4dd7u};
    uint64_t a = 42;
    for (int i = 0; i < 5; i++) {
        uint32_t r = wlm_rng_u32(&a);
        CHECKF(r == FIRST[i], "draw %d from seed 42: 0x%08x, want 0x%08x", i, r, FIRST[i]);
    }
    a = 42;
    CHECK(wlm_rng_f32(&a) == (float)(0x56ce4ab7u >> 8) / 16777216.0f);
    a = 0x123456789abcdefULL;
    int bad = 0;
    for (int i = 0; i < 100000; i++) {
        float x = wlm_rng_f32(&a);
        bad += !(x >= 0.0f && x < 1.0f);
    }
    CHECKF(bad == 0, "wlm_rng_f32 left [0, 1) in %d draws", bad);

    /* the sampler takes the seed as the state; seed 0 is replaced (0 is a fixed point); one
     * draw per sampled token, none for greedy */
    wlm_sampler s;
    memset(&s, 0, sizeof s);
    wlm_gen_params p = neutral(WLM_ORDER_LLAMACPP, 1.0f, 42);
    init_ok(&s, 8, &p);
    CHECK(s.rng_state == 42);
    float flat[8] = {0};
    wlm_sampler_sample(&s, flat, NULL, 0, NULL);
    a = 42;
    wlm_rng_u32(&a);
    CHECKF(s.rng_state == a, "one token must take exactly one RNG draw");
    p.top_k = 3, p.top_p = 0.5f, p.min_p = 0.1f, p.typical_p = 0.9f;
    init_ok(&s, 8, &p);
    wlm_sampler_sample(&s, flat, NULL, 0, NULL);
    CHECKF(s.rng_state == a, "one draw per token whatever the filters");
    p.temperature = 0.0f;
    init_ok(&s, 8, &p);
    wlm_sampler_sample(&s, flat, NULL, 0, NULL);
    CHECKF(s.rng_state == 42, "greedy must not draw");
    p = neutral(WLM_ORDER_LLAMACPP, 1.0f, 0);
    init_ok(&s, 8, &p);
    CHECK(s.rng_state != 0);
    int seen[8] = {0}, distinct = 0;
    for (int i = 0; i < 200; i++) {
        int32_t t = wlm_sampler_sample(&s, flat, NULL, 0, NULL);
        if (t >= 0 && t < 8 && !seen[t]++) distinct++;
    }
    CHECKF(distinct == 8, "seed 0: only %d distinct tokens in 200 uniform draws", distinct);
    /* the same seed gives the same sequence */
    int32_t seq[2][50];
    for (int r = 0; r < 2; r++) {
        p = neutral(WLM_ORDER_LLAMACPP, 0.8f, 777);
        p.top_p = 0.9f, p.top_k = 20;
        init_ok(&s, NV, &p);
        for (int i = 0; i < 50; i++) seq[r][i] = wlm_sampler_sample(&s, L, NULL, 0, NULL);
    }
    CHECK(memcmp(seq[0], seq[1], sizeof seq[0]) == 0);
    wlm_sampler_free(&s);
}

static void test_greedy(void) {
    tu_section("argmax and greedy");
    float x[6] = {1.0f, 5.0f, 3.0f, 5.0f, -2.0f, 5.0f};
    CHECK_EQ_INT(wlm_argmax(x, 6), 1);
    CHECK_EQ_INT(wlm_argmax(x, 1), 0);
    float y[4] = {-INFINITY, -3.0f, -1.0f, -1.0f};
    CHECK_EQ_INT(wlm_argmax(y, 4), 2);

    wlm_sampler s;
    memset(&s, 0, sizeof s);
    double model[6];
    model_dist(x, 6, model);
    /* temperature 0: the first argmax; prob the softmax; prob_sampled 1; top[] the argmax
     * (prob_sampled 1) then the others by probability, ties to the lower id */
    wlm_gen_params p = neutral(WLM_ORDER_LLAMACPP, 0.0f, 7);
    p.top_p = 0.9f, p.n_probs = 6;
    init_ok(&s, 6, &p);
    for (int i = 0; i < 3; i++) {
        wlm_token info;
        int32_t t = wlm_sampler_sample(&s, x, NULL, 0, &info);
        CHECK_EQ_INT(t, 1);
        CHECK_NEAR(info.prob, model[1], 1e-6);
        CHECK_NEAR(info.logprob, log(model[1]), 1e-6);
        CHECK(info.prob_sampled == 1.0f);
        CHECK_EQ_INT(info.n_probs, 6);
        static const int WANT[6] = {1, 3, 5, 2, 0, 4};
        for (int j = 0; j < 6; j++) {
            CHECKF(info.top[j].id == WANT[j], "greedy top[%d] = %d, want %d", j, info.top[j].id,
                   WANT[j]);
            CHECK(info.top[j].prob_sampled == (j == 0 ? 1.0f : 0.0f));
            CHECK_NEAR(info.top[j].prob, model[WANT[j]], 1e-6);
        }
    }
    /* greedy sees penalties, bias and bans: 1 banned, 3 biased down, 5 penalised by the window */
    const int32_t hist[2] = {5, 0};
    const wlm_logit_bias bias[2] = {{3, -0.5f}, {0, 1.75f}};
    const int32_t ban[1] = {1};
    p.repeat_penalty = 2.0f, p.repeat_last_n = 1;
    p.n_logit_bias = 2, p.logit_bias = bias, p.n_banned = 1, p.banned = ban;
    init_ok(&s, 6, &p);
    wlm_token info;
    /* 1 banned, 3 -> 4.5, 5 outside the window (last 1 = {0}), 0 -> 0.5 + 1.75 = 2.25: 5 wins */
    CHECK_EQ_INT(wlm_sampler_sample(&s, x, hist, 2, &info), 5);
    CHECK(info.top[0].id == 5 && info.top[0].prob_sampled == 1.0f);
    CHECK_NEAR(info.prob, model[5], 1e-6); /* prob stays the raw model probability */
    p.repeat_last_n = 2;                   /* now 5 -> 2.5: 3 wins with 4.5 */
    init_ok(&s, 6, &p);
    CHECK_EQ_INT(wlm_sampler_sample(&s, x, hist, 2, NULL), 3);
    /* top_k 1: the argmax at any temperature, in both orders */
    static const float TEMPS[] = {0.1f, 1.0f, 10.0f, 100.0f};
    for (int order = 0; order < 2; order++)
        for (unsigned ti = 0; ti < sizeof TEMPS / sizeof TEMPS[0]; ti++) {
            int bad = 0;
            p = neutral(order, TEMPS[ti], 1000 + ti);
            p.top_k = 1;
            init_ok(&s, 6, &p);
            for (int i = 0; i < 500; i++) {
                wlm_token in;
                bad += wlm_sampler_sample(&s, x, NULL, 0, &in) != 1 || in.prob_sampled != 1.0f;
            }
            CHECKF(bad == 0, "top_k 1 at T %g order %d: %d of 500 draws not the first argmax",
                   TEMPS[ti], order, bad);
        }
    /* a tiny top_p keeps the most probable token, on a peaked and on a nearly flat distribution
     * (every p below run.c's cut-off (1 - p) / (n - 1): run.c would read out of bounds) */
    float peaked[8] = {0.0f, 1.0f, 4.0f, 2.0f, -1.0f, 0.5f, 3.9f, 0.0f};
    float flat[8] = {0.0f, 0.1f, 0.05f, 0.02f, 0.0f, 0.01f, 0.12f, 0.04f};
    for (int k = 0; k < 2; k++) {
        const float *l = k ? flat : peaked;
        int want = k ? 6 : 2, bad = 0;
        for (int order = 0; order < 2; order++)
            for (int ti = 0; ti < 3; ti++) {
                p = neutral(order, ti == 0 ? 0.5f : ti == 1 ? 1.0f : 3.0f, 99 + ti);
                p.top_p = 1e-6f;
                init_ok(&s, 8, &p);
                for (int i = 0; i < 500; i++) {
                    wlm_token in;
                    int32_t t = wlm_sampler_sample(&s, l, NULL, 0, &in);
                    bad += t != want || fabsf(in.prob_sampled - 1.0f) > 1e-6f;
                }
            }
        CHECKF(bad == 0, "top_p 1e-6 on the %s distribution: %d of 3000 draws not the argmax",
               k ? "flat" : "peaked", bad);
    }
    /* a tiny temperature (z / T overflows) still gives the argmax, not NaN */
    const float u[6] = {1.0f, 5.0f, 3.0f, 4.999f, -2.0f, 0.0f};
    p = neutral(WLM_ORDER_RUNC, 1e-30f, 5);
    init_ok(&s, 6, &p);
    int32_t t = wlm_sampler_sample(&s, u, NULL, 0, &info);
    CHECK(t == 1 && info.prob_sampled == 1.0f);
    p.order = WLM_ORDER_LLAMACPP, p.min_p = 0.5f;
    init_ok(&s, 6, &p);
    t = wlm_sampler_sample(&s, u, NULL, 0, &info);
    CHECK(t == 1 && info.prob_sampled == 1.0f);
    wlm_sampler_free(&s);
}

/* Penalties, bias and bans seen exactly through top[] (prob_sampled of every token at T = 1,
 * no filter = softmax of the modified logits), deterministic. */
static void test_penalties_report(void) {
    tu_section("penalties, bias and bans through the report");
    wlm_sampler s;
    memset(&s, 0, sizeof s);
    const float X[8] = {2.0f, -1.0f, 0.5f, -0.5f, 3.0f, 0.0f, 1.0f, -2.0f};
    const int32_t H[7] = {0, 7, 1, -3, 2, 99, 2}; /* out-of-range ids are ignored */
    struct {
        const char *name;
        float r, pres, freq;
        int last_n;
        float want[8];
    } C[] = {
        /* window 5 = {1, -3, 2, 99, 2}: 1 and 2 (twice, penalised once); 0, 7 untouched */
        {"repeat 2, window 5", 2.0f, 0, 0, 5, {2.0f, -2.0f, 0.25f, -0.5f, 3.0f, 0.0f, 1.0f, -2.0f}},
        /* window 64 covers everything: 0 and 7 too */
        {"repeat 1.25, window 64", 1.25f, 0, 0, 64,
         {1.6f, -1.25f, 0.4f, -0.5f, 3.0f, 0.0f, 1.0f, -2.5f}},
        /* penalty below 1 rewards repeats */
        {"repeat 0.5", 0.5f, 0, 0, 5, {2.0f, -0.5f, 1.0f, -0.5f, 3.0f, 0.0f, 1.0f, -2.0f}},
        /* presence once per distinct token; frequency per occurrence (2 occurs twice) */
        {"presence 0.5", 1.0f, 0.5f, 0, 5, {2.0f, -1.5f, 0.0f, -0.5f, 3.0f, 0.0f, 1.0f, -2.0f}},
        {"frequency 0.75", 1.0f, 0, 0.75f, 5,
         {2.0f, -1.75f, -1.0f, -0.5f, 3.0f, 0.0f, 1.0f, -2.0f}},
        {"all three", 2.0f, 0.5f, 0.75f, 5, {2.0f, -3.25f, -1.75f, -0.5f, 3.0f, 0.0f, 1.0f, -2.0f}},
        {"window 0: off", 2.0f, 0.5f, 0.75f, 0,
         {2.0f, -1.0f, 0.5f, -0.5f, 3.0f, 0.0f, 1.0f, -2.0f}},
    };
    for (unsigned c = 0; c < sizeof C / sizeof C[0]; c++) {
        wlm_gen_params p = neutral(WLM_ORDER_LLAMACPP, 1.0f, 3);
        p.repeat_penalty = C[c].r, p.presence_penalty = C[c].pres, p.frequency_penalty = C[c].freq;
        p.repeat_last_n = C[c].last_n, p.n_probs = 8;
        init_ok(&s, 8, &p);
        double q[8];
        model_dist(C[c].want, 8, q);
        for (int rep = 0; rep < 2; rep++) { /* twice: no state may leak between steps */
            wlm_token info;
            wlm_sampler_sample(&s, X, H, 7, &info);
            int bad = info.n_probs != 8;
            for (int i = 0; i < info.n_probs; i++)
                bad += fabs(info.top[i].prob_sampled - q[info.top[i].id]) > 1e-6;
            CHECKF(bad == 0, "%s (step %d): %d entries differ from softmax of the penalised logits",
                   C[c].name, rep, bad);
        }
    }
    /* no history: no change */
    {
        wlm_gen_params p = neutral(WLM_ORDER_LLAMACPP, 1.0f, 3);
        p.repeat_penalty = 3.0f, p.presence_penalty = 1.0f, p.n_probs = 8;
        init_ok(&s, 8, &p);
        wlm_token info;
        double q[8];
        model_dist(X, 8, q);
        wlm_sampler_sample(&s, X, NULL, 0, &info);
        int bad = 0;
        for (int i = 0; i < info.n_probs; i++)
            bad += fabs(info.top[i].prob_sampled - q[info.top[i].id]) > 1e-6;
        CHECK(bad == 0 && info.n_probs == 8);
    }
    /* bias (several entries for one token add up) and bans; removed tokens report 0 and come
     * after every survivor, by model probability */
    {
        const wlm_logit_bias b[4] = {{4, -2.5f}, {7, 1.0f}, {7, 1.0f}, {2, -INFINITY}};
        const int32_t ban[2] = {0, 0};
        wlm_gen_params p = neutral(WLM_ORDER_LLAMACPP, 1.0f, 3);
        p.n_logit_bias = 4, p.logit_bias = b, p.n_banned = 2, p.banned = ban, p.n_probs = 8;
        init_ok(&s, 8, &p);
        const float want[8] = {-INFINITY, -1.0f, -INFINITY, -0.5f, 0.5f, 0.0f, 1.0f, 0.0f};
        double q[8], model[8];
        model_dist(want, 8, q);
        model_dist(X, 8, model);
        wlm_token info;
        for (int i = 0; i < 2000; i++) {
            int32_t t = wlm_sampler_sample(&s, X, NULL, 0, &info);
            CHECK(t != 0 && t != 2);
        }
        static const int ORDER[8] = {6, 4, 5, 7, 3, 1, 0, 2};
        for (int i = 0; i < 8; i++) {
            CHECKF(info.top[i].id == ORDER[i], "top[%d] = %d, want %d", i, info.top[i].id,
                   ORDER[i]);
            CHECK_NEAR(info.top[i].prob_sampled, q[ORDER[i]], 1e-6);
            CHECK_NEAR(info.top[i].prob, model[ORDER[i]], 1e-6);
        }
    }
    wlm_sampler_free(&s);
}

/* Ties resolve to the lower id at every stage: on equal logits each filter keeps the lowest
 * ids, which the report shows with equal shares and the draws never leave. */
static void test_ties(void) {
    tu_section("ties: lower token id first at every stage");
    wlm_sampler s;
    memset(&s, 0, sizeof s);
    float eq[10];
    for (int i = 0; i < 10; i++) eq[i] = 0.5f;
    eq[9] = -3.0f; /* one clearly worse token, last */
    static const struct {
        const char *name;
        int top_k;
        float typical_p, top_p, min_p;
        int kept; /* the survivors are ids 0..kept-1 */
    } C[] = {
        {"top-k 3", 3, 1.0f, 1.0f, 0.0f, 3},
        {"typical 0.3", 0, 0.3f, 1.0f, 0.0f, 3},   /* scores equal but id 9's: prefix 0,1,2 */
        {"top-p 0.3", 0, 1.0f, 0.3f, 0.0f, 3},     /* 3 x ~0.111 > 0.3 */
        {"top-k 5, top-p 0.5", 5, 1.0f, 0.5f, 0.0f, 3},
        {"min-p 0.5 (keeps the whole tie)", 0, 1.0f, 1.0f, 0.5f, 9},
    };
    for (unsigned c = 0; c < sizeof C / sizeof C[0]; c++)
        for (int order = 0; order < 2; order++) {
            wlm_gen_params p = neutral(order, order ? 0.8f : 1.3f, 70 + c);
            p.top_k = C[c].top_k, p.typical_p = C[c].typical_p, p.top_p = C[c].top_p;
            p.min_p = C[c].min_p, p.n_probs = 10;
            init_ok(&s, 10, &p);
            int bad = 0, seen[10] = {0};
            wlm_token info;
            for (int i = 0; i < 3000; i++) {
                int32_t t = wlm_sampler_sample(&s, eq, NULL, 0, &info);
                if (t < 0 || t >= C[c].kept) bad++;
                else seen[t]++;
            }
            for (int i = 0; i < C[c].kept; i++) bad += seen[i] == 0;
            for (int i = 0; i < 10; i++) {
                const double want = i < C[c].kept ? 1.0 / C[c].kept : 0.0;
                bad += info.top[i].id != i || fabs(info.top[i].prob_sampled - want) > 1e-6;
            }
            CHECKF(bad == 0, "%s [%s]: the survivors are not ids 0..%d with equal shares (%d bad)",
                   C[c].name, order ? "runc" : "llama.cpp", C[c].kept - 1, bad);
        }
    wlm_sampler_free(&s);
}

/* The report is optional and must not change the draws (the T = 1 softmax reuses the report's
 * exp values when it is asked for). */
static void test_report_neutral(void) {
    tu_section("the same tokens with and without a report");
    wlm_sampler a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    static const struct {
        float T, top_p;
        int top_k, n_probs;
        float rep;
    } C[] = {{1.0f, 0.9f, 0, 5, 1.0f}, {1.0f, 1.0f, 0, 0, 1.0f}, {0.7f, 0.9f, 0, 3, 1.0f},
             {1.0f, 0.9f, 0, 20, 1.3f}, {1.2f, 0.95f, 10, 2, 1.0f}};
    for (unsigned c = 0; c < sizeof C / sizeof C[0]; c++)
        for (int order = 0; order < 2; order++) {
            wlm_gen_params p = neutral(order, C[c].T, 123 + c);
            p.top_p = C[c].top_p, p.top_k = C[c].top_k, p.n_probs = C[c].n_probs;
            p.repeat_penalty = C[c].rep;
            init_ok(&a, 64, &p);
            init_ok(&b, 64, &p);
            tu_rng data = {500 + c};
            int32_t hist[8];
            int diff = 0;
            for (int step = 0; step < 2000; step++) {
                float l[64];
                for (int i = 0; i < 64; i++) l[i] = tu_rng_uniform(&data, -5.0f, 5.0f);
                for (int i = 0; i < 8; i++) hist[i] = (int32_t)(tu_rng_u64(&data) % 64);
                wlm_token info;
                const int32_t ta = wlm_sampler_sample(&a, l, hist, 8, &info);
                diff += ta != wlm_sampler_sample(&b, l, hist, 8, NULL);
            }
            CHECKF(diff == 0 && a.rng_state == b.rng_state,
                   "config %u order %d: %d of 2000 tokens depend on the report", c, order, diff);
        }
    wlm_sampler_free(&a);
    wlm_sampler_free(&b);
}

/* Every stage alone and in combinations, both orders, chi-square against the reference. */
static void test_exact(void) {
    tu_section("exact distributions: each stage alone (T = 1 unless the stage is T)");
    wlm_sampler s;
    memset(&s, 0, sizeof s);
    /* name, T, top_k, typical_p, top_p, min_p, repeat, presence, frequency, bias?, bans? */
    static const config ALONE[] = {
        {"temperature 0.6",                   0.6f, 0,  0,     0,    0,     0,    0,    0,    0, 0},
        {"temperature 1.7",                   1.7f, 0,  0,     0,    0,     0,    0,    0,    0, 0},
        {"plain multinomial (T 1)",           1.0f, 0,  0,     0,    0,     0,    0,    0,    0, 0},
        {"top-k 4 (cuts a tie)",              1.0f, 4,  0,     0,    0,     0,    0,    0,    0, 0},
        {"typical 0.5",                       1.0f, 0,  0.5f,  0,    0,     0,    0,    0,    0, 0},
        {"top-p 0.6",                         1.0f, 0,  0,     0.6f, 0,     0,    0,    0,    0, 0},
        {"min-p 0.15",                        1.0f, 0,  0,     0,    0.15f, 0,    0,    0,    0, 0},
        {"repetition 1.8 (window 6)",         1.0f, 0,  0,     0,    0,     1.8f, 0,    0,    0, 0},
        {"presence 1.2",                      1.0f, 0,  0,     0,    0,     0,    1.2f, 0,    0, 0},
        {"frequency 0.7",                     1.0f, 0,  0,     0,    0,     0,    0,    0.7f, 0, 0},
        {"logit bias (incl. -inf)",           1.0f, 0,  0,     0,    0,     0,    0,    0,    1, 0},
        {"bans",                              1.0f, 0,  0,     0,    0,     0,    0,    0,    0, 1},
    };
    static const config COMBOS[] = {
        {"top-k 6, T 1.6",                    1.6f, 6,  0,     0,    0,     0,    0,    0,    0, 0},
        {"typical 0.8, T 0.7",                0.7f, 0,  0.8f,  0,    0,     0,    0,    0,    0, 0},
        {"top-p 0.8, T 1.5",                  1.5f, 0,  0,     0.8f, 0,     0,    0,    0,    0, 0},
        {"top-p 0.5, T 0.6",                  0.6f, 0,  0,     0.5f, 0,     0,    0,    0,    0, 0},
        {"min-p 0.2, T 1.8",                  1.8f, 0,  0,     0,    0.2f,  0,    0,    0,    0, 0},
        {"penalties, top-k 8, top-p .9, T.8", 0.8f, 8,  0,     0.9f, 0,     1.8f, 1.2f, 0.7f, 0, 0},
        {"bias, bans, typ .9, min-p, T1.3",   1.3f, 0,  0.9f,  0,    0.05f, 0,    0,    0,    1, 1},
        {"top-k 10 + top-p 0.7, T 2",         2.0f, 10, 0,     0.7f, 0,     0,    0,    0,    0, 0},
        {"every stage, T 0.9",                0.9f, 12, 0.95f, 0.9f, 0.05f, 1.8f, 1.2f, 0.7f, 1, 1},
    };
    uint64_t seed = 1;
    for (unsigned i = 0; i < sizeof ALONE / sizeof ALONE[0]; i++)
        for (int order = 0; order < 2; order++) exact_config(&s, &ALONE[i], order, 1000 + seed++);
    tu_section("exact distributions: stages with temperature, and combinations");
    for (unsigned i = 0; i < sizeof COMBOS / sizeof COMBOS[0]; i++)
        for (int order = 0; order < 2; order++) exact_config(&s, &COMBOS[i], order, 1000 + seed++);
    printf("   (draws: %.2f s)\n", g_draw_seconds);
    wlm_sampler_free(&s);
}

/* The chi-square test must be able to fail: draws from one configuration against the
 * expectation of a nearby one. */
static void test_negative_controls(void) {
    tu_section("negative controls: the test rejects a wrong distribution");
    wlm_sampler s;
    memset(&s, 0, sizeof s);
    static const struct {
        config drawn, expected;
        int order_drawn, order_expected;
    } NEG[] = {
        {{"top-p 0.5", 1.0f, 0, 0, 0.5f, 0, 0, 0, 0, 0, 0},
         {"top-p 0.6", 1.0f, 0, 0, 0.6f, 0, 0, 0, 0, 0, 0}, 0, 0},
        {{"T 1", 1.0f, 0, 0, 0, 0, 0, 0, 0, 0, 0},
         {"T 1.05", 1.05f, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 0, 0},
        {{"min-p 0.2, T 1.8", 1.8f, 0, 0, 0, 0.2f, 0, 0, 0, 0, 0},
         {"min-p 0.2, T 1.8", 1.8f, 0, 0, 0, 0.2f, 0, 0, 0, 0, 0},
         WLM_ORDER_LLAMACPP, WLM_ORDER_RUNC},
        {{"presence 1.2", 1.0f, 0, 0, 0, 0, 0, 1.2f, 0, 0, 0},
         {"presence 1.1", 1.0f, 0, 0, 0, 0, 0, 1.1f, 0, 0, 0}, 0, 0},
    };
    for (unsigned i = 0; i < sizeof NEG / sizeof NEG[0]; i++) {
        wlm_gen_params pd = make_params(&NEG[i].drawn, NEG[i].order_drawn, 5000 + i);
        wlm_gen_params pe = make_params(&NEG[i].expected, NEG[i].order_expected, 5000 + i);
        double qd[MAXV], qe[MAXV], model[MAXV], margin;
        long counts[MAXV];
        ref_chain(&pd, L, NV, HIST, 10, qd, &margin);
        ref_chain(&pe, L, NV, HIST, 10, qe, &margin);
        model_dist(L, NV, model);
        if (!init_ok(&s, NV, &pd)) continue;
        char what[128];
        snprintf(what, sizeof what, "%s [%s] drawn", NEG[i].drawn.name,
                 NEG[i].order_drawn ? "runc" : "llama.cpp");
        draw(&s, L, NV, HIST, 10, N_DRAWS, counts, qd, model, what);
        chi_result right = chi_square(counts, qd, NV, N_DRAWS);
        chi_result wrong = chi_square(counts, qe, NV, N_DRAWS);
        printf("   %s vs %s [%s]: chi2 %.1f, p %.3g (own expectation: p %.3f)\n", what,
               NEG[i].expected.name, NEG[i].order_expected ? "runc" : "llama.cpp", wrong.stat,
               wrong.pvalue, right.pvalue);
        CHECKF(right.pass, "%s: fails against its own expectation (p %.3g)", what, right.pvalue);
        CHECKF(!wrong.pass, "%s: not rejected against %s (p %.3g)", what, NEG[i].expected.name,
               wrong.pvalue);
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

static uint32_t ref_u32(uint64_t *state) { /* run.c's random_u32 */
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return (uint32_t)((*state * 0x2545F4914F6CDD1DULL) >> 32);
}
static float ref_f32(uint64_t *state) { return (float)(ref_u32(state) >> 8) / 16777216.0f; }

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
    tu_section("WLM_ORDER_RUNC: the same tokens as run.c's sample() for a seed");
    static const struct {
        float temperature, top_p;
    } CFG[] = {{1.0f, 0.9f}, {0.8f, 0.9f}, {1.0f, 1.0f}, {1.3f, 0.95f}, {0.5f, 0.5f}, {1.0f, 0.3f},
               {0.0f, 0.9f}};
    runc_prob_index probindex[MAXV];
    wlm_sampler s;
    memset(&s, 0, sizeof s);
    for (unsigned c = 0; c < sizeof CFG / sizeof CFG[0]; c++) {
        const int n = 48;
        uint64_t rs = 42 + c;
        tu_rng data = {77 + c};
        wlm_gen_params p = neutral(WLM_ORDER_RUNC, CFG[c].temperature, 42 + c);
        p.top_p = CFG[c].top_p;
        init_ok(&s, n, &p);
        int mismatches = 0, first = -1;
        for (int step = 0; step < 3000; step++) {
            float l1[MAXV], l2[MAXV];
            /* distinct random logits (no probability ties, so qsort's order is defined) */
            for (int i = 0; i < n; i++) l1[i] = l2[i] = tu_rng_uniform(&data, -4.0f, 4.0f);
            /* with and without a report (with one, T = 1 reuses the report's exp values) */
            wlm_token info;
            int a = wlm_sampler_sample(&s, l1, NULL, 0, step % 2 ? &info : NULL);
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

    tu_section("WLM_ORDER_LLAMACPP at T 1 with top-p alone equals WLM_ORDER_RUNC");
    wlm_sampler r;
    memset(&r, 0, sizeof r);
    static const float TOPP[] = {0.9f, 0.5f, 0.95f, 1.0f};
    for (unsigned c = 0; c < sizeof TOPP / sizeof TOPP[0]; c++) {
        wlm_gen_params pl = neutral(WLM_ORDER_LLAMACPP, 1.0f, 9 + c);
        pl.top_p = TOPP[c], pl.n_probs = 5;
        wlm_gen_params pr = pl;
        pr.order = WLM_ORDER_RUNC;
        init_ok(&s, 64, &pl);
        init_ok(&r, 64, &pr);
        tu_rng data = {300 + c};
        int diff = 0;
        for (int step = 0; step < 3000; step++) {
            float l[64];
            for (int i = 0; i < 64; i++) l[i] = tu_rng_uniform(&data, -5.0f, 5.0f);
            wlm_token a, b;
            int32_t ta = wlm_sampler_sample(&s, l, NULL, 0, &a);
            int32_t tb = wlm_sampler_sample(&r, l, NULL, 0, &b);
            diff += ta != tb || a.prob_sampled != b.prob_sampled ||
                    memcmp(a.top, b.top, sizeof(wlm_token_prob) * 5) != 0;
        }
        CHECKF(diff == 0 && s.rng_state == r.rng_state,
               "top_p %g: %d of 3000 steps differ between the orders", TOPP[c], diff);
    }
    wlm_sampler_free(&s);
    wlm_sampler_free(&r);
}

/* ------------------------------------------------------------------------------------------ */

static void expect_invalid(wlm_gen_params p, int vocab, const char *what, const char *field) {
    char err[200];
    memset(err, 0, sizeof err);
    int rc = wlm_sampler_check(&p, vocab, err, sizeof err);
    CHECKF(rc == WLM_ERR_INVALID_ARG, "%s: got %d (%s)", what, rc, wlm_status_name(rc));
    CHECKF(strstr(err, field) != NULL, "%s: the message \"%s\" does not name %s", what, err, field);
}

static void test_check(void) {
    tu_section("parameter validation");
    wlm_gen_params d, p;
    char err[200] = "";
    wlm_gen_params_default(&d);
    CHECK(d.temperature == 1.0f && d.top_k == 0 && d.top_p == 0.9f && d.min_p == 0.0f &&
          d.typical_p == 1.0f && d.repeat_penalty == 1.0f && d.repeat_last_n == 64 &&
          d.presence_penalty == 0.0f && d.frequency_penalty == 0.0f && d.n_logit_bias == 0 &&
          d.n_banned == 0 && d.order == WLM_ORDER_LLAMACPP && d.n_probs == 0);
    CHECK_STATUS(wlm_sampler_check(&d, 32, err, sizeof err), WLM_OK);
    p = d, p.temperature = 0.0f, p.top_p = 1.0f, p.min_p = 1.0f, p.typical_p = 1e-6f;
    CHECK_STATUS(wlm_sampler_check(&p, 32, err, sizeof err), WLM_OK);
    p = d, p.top_p = 1e-6f, p.top_k = 100000, p.repeat_penalty = 0.01f, p.repeat_last_n = 0;
    p.presence_penalty = -2.0f, p.frequency_penalty = 1e30f, p.n_probs = WLM_MAX_PROBS;
    p.order = WLM_ORDER_RUNC, p.temperature = 1000.0f;
    CHECK_STATUS(wlm_sampler_check(&p, 32, err, sizeof err), WLM_OK);

    p = d, p.temperature = -1.0f;
    expect_invalid(p, 32, "temperature -1", "temperature");
    p = d, p.temperature = -1e-30f;
    expect_invalid(p, 32, "temperature -1e-30", "temperature");
    p = d, p.temperature = NAN;
    expect_invalid(p, 32, "temperature NaN", "temperature");
    p = d, p.temperature = INFINITY;
    expect_invalid(p, 32, "temperature inf", "temperature");
    p = d, p.top_k = -1;
    expect_invalid(p, 32, "top_k -1", "top_k");
    p = d, p.top_p = 0.0f;
    expect_invalid(p, 32, "top_p 0", "top_p");
    p = d, p.top_p = -0.5f;
    expect_invalid(p, 32, "top_p -0.5", "top_p");
    p = d, p.top_p = 1.0001f;
    expect_invalid(p, 32, "top_p 1.0001", "top_p");
    p = d, p.top_p = NAN;
    expect_invalid(p, 32, "top_p NaN", "top_p");
    p = d, p.min_p = -0.1f;
    expect_invalid(p, 32, "min_p -0.1", "min_p");
    p = d, p.min_p = 1.5f;
    expect_invalid(p, 32, "min_p 1.5", "min_p");
    p = d, p.min_p = NAN;
    expect_invalid(p, 32, "min_p NaN", "min_p");
    p = d, p.typical_p = 0.0f;
    expect_invalid(p, 32, "typical_p 0", "typical_p");
    p = d, p.typical_p = 1.5f;
    expect_invalid(p, 32, "typical_p 1.5", "typical_p");
    p = d, p.typical_p = NAN;
    expect_invalid(p, 32, "typical_p NaN", "typical_p");
    p = d, p.repeat_penalty = 0.0f;
    expect_invalid(p, 32, "repeat_penalty 0", "repeat_penalty");
    p = d, p.repeat_penalty = -1.0f;
    expect_invalid(p, 32, "repeat_penalty -1", "repeat_penalty");
    p = d, p.repeat_penalty = NAN;
    expect_invalid(p, 32, "repeat_penalty NaN", "repeat_penalty");
    p = d, p.repeat_penalty = INFINITY;
    expect_invalid(p, 32, "repeat_penalty inf", "repeat_penalty");
    p = d, p.repeat_last_n = -1;
    expect_invalid(p, 32, "repeat_last_n -1", "repeat_last_n");
    p = d, p.presence_penalty = NAN;
    expect_invalid(p, 32, "presence_penalty NaN", "presence_penalty");
    p = d, p.presence_penalty = -INFINITY;
    expect_invalid(p, 32, "presence_penalty -inf", "presence_penalty");
    p = d, p.frequency_penalty = NAN;
    expect_invalid(p, 32, "frequency_penalty NaN", "frequency_penalty");
    p = d, p.frequency_penalty = INFINITY;
    expect_invalid(p, 32, "frequency_penalty inf", "frequency_penalty");
    p = d, p.order = 2;
    expect_invalid(p, 32, "order 2", "order");
    p = d, p.order = -1;
    expect_invalid(p, 32, "order -1", "order");
    p = d, p.n_probs = WLM_MAX_PROBS + 1;
    expect_invalid(p, 32, "n_probs 21", "n_probs");
    p = d, p.n_probs = -1;
    expect_invalid(p, 32, "n_probs -1", "n_probs");

    /* bias and ban lists */
    static wlm_logit_bias many[WLM_MAX_LOGIT_BIAS + 1];
    static int32_t many_ids[WLM_MAX_LOGIT_BIAS + 1];
    for (int i = 0; i <= WLM_MAX_LOGIT_BIAS; i++)
        many[i] = (wlm_logit_bias){i % 32, 0.5f}, many_ids[i] = i % 32;
    p = d, p.n_logit_bias = WLM_MAX_LOGIT_BIAS, p.logit_bias = many;
    CHECK_STATUS(wlm_sampler_check(&p, 32, err, sizeof err), WLM_OK);
    p.n_logit_bias = WLM_MAX_LOGIT_BIAS + 1;
    expect_invalid(p, 32, "1025 biases", "n_logit_bias");
    p.n_logit_bias = -1;
    expect_invalid(p, 32, "n_logit_bias -1", "n_logit_bias");
    p.n_logit_bias = 2, p.logit_bias = NULL;
    expect_invalid(p, 32, "logit_bias NULL", "logit_bias");
    wlm_logit_bias b[3] = {{1, 1.0f}, {2, -INFINITY}, {31, -3.0f}};
    p.logit_bias = b, p.n_logit_bias = 3;
    CHECK_STATUS(wlm_sampler_check(&p, 32, err, sizeof err), WLM_OK);
    b[2].token = 32;
    expect_invalid(p, 32, "bias token 32 of 32", "logit_bias[2].token");
    b[2].token = -1;
    expect_invalid(p, 32, "bias token -1", "logit_bias[2].token");
    b[2].token = 3, b[1].bias = NAN;
    expect_invalid(p, 32, "NaN bias", "logit_bias[1].bias");
    b[1].bias = INFINITY;
    expect_invalid(p, 32, "+inf bias", "logit_bias[1].bias");
    p = d, p.n_banned = WLM_MAX_LOGIT_BIAS, p.banned = many_ids;
    CHECK_STATUS(wlm_sampler_check(&p, 32, err, sizeof err), WLM_OK);
    p.n_banned = WLM_MAX_LOGIT_BIAS + 1;
    expect_invalid(p, 32, "1025 bans", "n_banned");
    p.n_banned = -3;
    expect_invalid(p, 32, "n_banned -3", "n_banned");
    p.n_banned = 1, p.banned = NULL;
    expect_invalid(p, 32, "banned NULL", "banned");
    int32_t ban[2] = {0, 40};
    p.n_banned = 2, p.banned = ban;
    expect_invalid(p, 32, "ban 40 of 32", "banned[1]");
    CHECK_STATUS(wlm_sampler_check(&p, 41, err, sizeof err), WLM_OK);
    /* NULL params, bad vocabulary */
    CHECK_STATUS(wlm_sampler_check(NULL, 32, err, sizeof err), WLM_ERR_INVALID_ARG);
    CHECK_STATUS(wlm_sampler_check(&d, 0, err, sizeof err), WLM_ERR_INVALID_ARG);
    CHECK_STATUS(wlm_sampler_check(&d, 32, NULL, 0), WLM_OK);
    p = d, p.top_p = 2.0f;
    CHECK_STATUS(wlm_sampler_check(&p, 32, NULL, 0), WLM_ERR_INVALID_ARG); /* no buffer: fine */
}

static void test_edges(void) {
    tu_section("edge cases");
    wlm_sampler s;
    memset(&s, 0, sizeof s);
    wlm_sampler_free(&s); /* zeroed: fine */
    wlm_sampler_free(&s); /* twice: fine */
    float x[6] = {1.0f, 5.0f, 3.0f, 5.0f, -2.0f, 0.0f};
    const float x0[6] = {1.0f, 5.0f, 3.0f, 5.0f, -2.0f, 0.0f};
    /* before init */
    CHECK(wlm_sampler_sample(&s, x, NULL, 0, NULL) == WLM_ERR_STATE);
    wlm_gen_params p = neutral(WLM_ORDER_LLAMACPP, 0.9f, 11);
    CHECK_STATUS(wlm_sampler_init(&s, 0, &p), WLM_ERR_INVALID_ARG);
    CHECK_STATUS(wlm_sampler_init(&s, 6, NULL), WLM_ERR_INVALID_ARG);
    init_ok(&s, 6, &p);
    CHECK(wlm_sampler_sample(&s, NULL, NULL, 0, NULL) == WLM_ERR_INVALID_ARG);
    /* the logits are not modified, whatever the stages */
    const int32_t hist[4] = {1, 1, 3, 0};
    const wlm_logit_bias bias[1] = {{2, 1.0f}};
    p.repeat_penalty = 1.5f, p.presence_penalty = 0.5f, p.top_k = 3, p.top_p = 0.8f, p.n_probs = 4;
    p.n_logit_bias = 1, p.logit_bias = bias;
    init_ok(&s, 6, &p);
    for (int i = 0; i < 10; i++) wlm_sampler_sample(&s, x, hist, 4, NULL);
    CHECK(memcmp(x, x0, sizeof x) == 0);
    /* scratch reused for the same vocabulary */
    const float *z_before = s.z;
    init_ok(&s, 6, &p);
    CHECK(s.z == z_before);
    init_ok(&s, 7, &p);
    CHECK(s.vocab_size == 7);
    /* the lists are copied: changing or freeing the caller's arrays after init changes nothing */
    wlm_logit_bias *hb = malloc(sizeof *hb * 5);
    int32_t *hban = malloc(sizeof *hban * 5);
    for (int i = 0; i < 5; i++) hb[i] = (wlm_logit_bias){i, -INFINITY}, hban[i] = i;
    p = neutral(WLM_ORDER_LLAMACPP, 1.0f, 12);
    p.n_logit_bias = 3, p.logit_bias = hb, p.n_banned = 2, p.banned = hban + 3; /* only 5 left */
    init_ok(&s, 6, &p);
    for (int i = 0; i < 5; i++) hb[i].bias = 0.0f, hban[i] = 5;
    free(hb);
    free(hban);
    int bad = 0;
    for (int i = 0; i < 200; i++) {
        wlm_token info;
        bad += wlm_sampler_sample(&s, x, NULL, 0, &info) != 5 || info.prob_sampled != 1.0f;
    }
    CHECKF(bad == 0, "a single allowed token must always be drawn with prob_sampled 1 (%d bad)",
           bad);
    /* everything removed: an error, in both paths */
    const int32_t all[6] = {0, 1, 2, 3, 4, 5};
    for (int t = 0; t < 2; t++) {
        p = neutral(WLM_ORDER_LLAMACPP, t ? 1.0f : 0.0f, 13);
        p.n_banned = 6, p.banned = all;
        init_ok(&s, 6, &p);
        CHECK(wlm_sampler_sample(&s, x, NULL, 0, NULL) == WLM_ERR_INVALID_ARG);
    }
    /* NaN and infinite logits do not escape: the result stays in range */
    float weird[6] = {NAN, 1.0f, INFINITY, -INFINITY, NAN, 0.5f};
    for (int order = 0; order < 2; order++)
        for (int c = 0; c < 4; c++) {
            p = neutral(order, c == 0 ? 0.0f : 0.7f, 14);
            p.top_k = c == 2 ? 2 : 0, p.typical_p = c == 3 ? 0.5f : 1.0f;
            p.top_p = c == 1 ? 0.5f : 1.0f;
            p.n_probs = 6;
            init_ok(&s, 6, &p);
            wlm_token info;
            int32_t t = wlm_sampler_sample(&s, weird, NULL, 0, &info);
            CHECKF(t == 2, "order %d case %d: +inf logit must win, got %d", order, c, t);
            CHECK(info.n_probs == 6 && !isnan(info.prob_sampled));
        }
    float nans[3] = {NAN, NAN, NAN};
    p = neutral(WLM_ORDER_LLAMACPP, 1.0f, 15);
    init_ok(&s, 3, &p);
    CHECK(wlm_sampler_sample(&s, nans, NULL, 0, NULL) == WLM_ERR_INVALID_ARG);
    /* n_probs larger than the vocabulary: the whole vocabulary */
    p = neutral(WLM_ORDER_LLAMACPP, 1.0f, 16);
    p.n_probs = WLM_MAX_PROBS;
    init_ok(&s, 6, &p);
    wlm_token info;
    wlm_sampler_sample(&s, x, NULL, 0, &info);
    CHECK_EQ_INT(info.n_probs, 6);
    /* vocabulary of one */
    float one[1] = {0.25f};
    p = neutral(WLM_ORDER_RUNC, 1.0f, 17);
    p.top_p = 0.5f, p.top_k = 1, p.min_p = 0.5f, p.typical_p = 0.5f, p.n_probs = 3;
    init_ok(&s, 1, &p);
    CHECK(wlm_sampler_sample(&s, one, NULL, 0, &info) == 0 && info.prob_sampled == 1.0f &&
          info.n_probs == 1);
    wlm_sampler_free(&s);
    wlm_sampler_free(&s);
}

/* Cost per token on a 32000-token vocabulary (printed, not asserted: timings vary), on a
 * peaked distribution like a language model's (a normal bulk, sd 2, and a few tokens 10-16
 * above it) and on a flat one (uniform logits in [-6, 2]: the worst case for top-p and typical,
 * whose kept sets then hold thousands of tokens). */
static void test_speed(void) {
    tu_section("cost per token, vocabulary 32000");
    const int V = 32000, STEPS = 100;
    float *peaked = malloc(sizeof(float) * (size_t)V), *flat = malloc(sizeof(float) * (size_t)V);
    int32_t hist[64];
    tu_rng data = {2024};
    for (int i = 0; i < V; i++) {
        const double u1 = (tu_rng_u64(&data) >> 11) * (1.0 / 9007199254740992.0) + 1e-300;
        const double u2 = (tu_rng_u64(&data) >> 11) * (1.0 / 9007199254740992.0);
        peaked[i] = (float)(2.0 * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
        flat[i] = tu_rng_uniform(&data, -6.0f, 2.0f);
    }
    for (int i = 0; i < 20; i++)
        peaked[(int)(tu_rng_u64(&data) % (uint64_t)V)] += tu_rng_uniform(&data, 10.0f, 16.0f);
    for (int i = 0; i < 64; i++) hist[i] = (int32_t)(tu_rng_u64(&data) % (uint64_t)V);
    static const struct {
        const char *name;
        float T, top_p, min_p, typical_p, rep;
        int top_k, n_probs;
    } C[] = {
        {"greedy", 0.0f, 1.0f, 0, 1.0f, 1.0f, 0, 0},
        {"plain multinomial", 1.0f, 1.0f, 0, 1.0f, 1.0f, 0, 0},
        {"top-p 0.9 (run.c's default)", 1.0f, 0.9f, 0, 1.0f, 1.0f, 0, 0},
        {"top-p 0.9, n_probs 20", 1.0f, 0.9f, 0, 1.0f, 1.0f, 0, 20},
        {"top-k 40, top-p 0.95, min-p 0.05, T 0.8", 0.8f, 0.95f, 0.05f, 1.0f, 1.1f, 40, 0},
        {"min-p 0.05 alone, T 0.8", 0.8f, 1.0f, 0.05f, 1.0f, 1.0f, 0, 0},
        {"typical 0.95 over the whole vocabulary", 1.0f, 1.0f, 0, 0.95f, 1.0f, 0, 0},
    };
    printf("   %-42s %10s %10s\n", "us per token", "peaked", "flat");
    wlm_sampler s;
    memset(&s, 0, sizeof s);
    for (unsigned c = 0; c < sizeof C / sizeof C[0]; c++) {
        double us[2];
        for (int d = 0; d < 2; d++) {
            wlm_gen_params p = neutral(WLM_ORDER_LLAMACPP, C[c].T, 99);
            p.top_p = C[c].top_p, p.min_p = C[c].min_p, p.typical_p = C[c].typical_p;
            p.repeat_penalty = C[c].rep, p.top_k = C[c].top_k, p.n_probs = C[c].n_probs;
            init_ok(&s, V, &p);
            wlm_token info;
            long sum = 0;
            double t0 = seconds();
            for (int i = 0; i < STEPS; i++)
                sum += wlm_sampler_sample(&s, d ? flat : peaked, hist, 64, &info);
            us[d] = (seconds() - t0) / STEPS * 1e6;
            CHECK(sum >= 0);
        }
        printf("   %-42s %10.1f %10.1f\n", C[c].name, us[0], us[1]);
    }
    wlm_sampler_free(&s);
    free(peaked);
    free(flat);
}

int main(void) {
    double t0 = seconds();
    test_statistics();
    test_rng();
    test_greedy();
    test_penalties_report();
    test_check();
    test_edges();
    test_runc_equivalence();
    test_ties();
    test_report_neutral();
    test_exact();
    test_negative_controls();
    test_speed();
    printf("(total %.2f s)\n", seconds() - t0);
    return TEST_FINISH();
}
