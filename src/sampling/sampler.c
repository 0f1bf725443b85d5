/*
 * sampler.c — logits → next token: penalties, logit bias and bans, then greedy or the filter
 * chain (top-k, typical-p, top-p, min-p, temperature) and one draw with llama2.c's RNG, plus
 * the per-token report (model probability, log-probability, top-N alternatives). The stages,
 * their formulas and sources are in sampler.h; the user-facing contract in wasmlm.h.
 * Nothing here allocates per token: the scratch is sized once per vocabulary.
 */
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sampling/sampler.h"

#define DEFAULT_SEED 0x5DEECE66DULL /* replaces seed 0, a fixed point of xorshift */

/* ------------------------------------------------------------------------------------------ */
/* RNG and argmax                                                                              */

uint32_t wlm_rng_u32(uint64_t *state) {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return (uint32_t)((*state * 0x2545F4914F6CDD1DULL) >> 32);
}

float wlm_rng_f32(uint64_t *state) { return (float)(wlm_rng_u32(state) >> 8) / 16777216.0f; }

int32_t wlm_argmax(const float *x, int32_t n) {
    int32_t best = 0;
    float v = x[0]; /* in a register: 3-4x faster in wasm than re-reading x[best] */
    for (int32_t i = 1; i < n; i++)
        if (x[i] > v) {
            v = x[i];
            best = i;
        }
    return best;
}

/* ------------------------------------------------------------------------------------------ */
/* Parameters                                                                                  */

#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 3, 4)))
#endif
static int invalid(char *err, size_t errlen, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return WLM_ERR_INVALID_ARG;
}

int wlm_sampler_check(const wlm_gen_params *p, int32_t vocab_size, char *err, size_t errlen) {
    if (!p) return invalid(err, errlen, "params is NULL");
    if (vocab_size < 1)
        return invalid(err, errlen, "vocab_size must be >= 1 (got %d)", (int)vocab_size);
    if (!(p->temperature >= 0.0f) || isinf(p->temperature))
        return invalid(err, errlen, "temperature must be a finite number >= 0, 0 = greedy (got %g)",
                       (double)p->temperature);
    if (p->top_k < 0)
        return invalid(err, errlen, "top_k must be >= 0, 0 = off (got %d)", (int)p->top_k);
    if (!(p->top_p > 0.0f && p->top_p <= 1.0f))
        return invalid(err, errlen, "top_p must be in (0, 1], 1 = off (got %g)", (double)p->top_p);
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f))
        return invalid(err, errlen, "min_p must be in [0, 1], 0 = off (got %g)", (double)p->min_p);
    if (!(p->typical_p > 0.0f && p->typical_p <= 1.0f))
        return invalid(err, errlen, "typical_p must be in (0, 1], 1 = off (got %g)",
                       (double)p->typical_p);
    if (!(p->repeat_penalty > 0.0f) || isinf(p->repeat_penalty))
        return invalid(err, errlen, "repeat_penalty must be a finite number > 0, 1 = off (got %g)",
                       (double)p->repeat_penalty);
    if (p->repeat_last_n < 0)
        return invalid(err, errlen, "repeat_last_n must be >= 0 (got %d)", (int)p->repeat_last_n);
    if (!isfinite(p->presence_penalty))
        return invalid(err, errlen, "presence_penalty must be finite, 0 = off (got %g)",
                       (double)p->presence_penalty);
    if (!isfinite(p->frequency_penalty))
        return invalid(err, errlen, "frequency_penalty must be finite, 0 = off (got %g)",
                       (double)p->frequency_penalty);
    if (p->n_logit_bias < 0 || p->n_logit_bias > WLM_MAX_LOGIT_BIAS)
        return invalid(err, errlen, "n_logit_bias must be in 0..%d (got %d)", WLM_MAX_LOGIT_BIAS,
                       (int)p->n_logit_bias);
    if (p->n_logit_bias > 0 && !p->logit_bias)
        return invalid(err, errlen, "logit_bias is NULL with n_logit_bias %d",
                       (int)p->n_logit_bias);
    for (int32_t i = 0; i < p->n_logit_bias; i++) {
        const wlm_logit_bias *b = &p->logit_bias[i];
        if (b->token < 0 || b->token >= vocab_size)
            return invalid(err, errlen, "logit_bias[%d].token %d is outside the vocabulary 0..%d",
                           (int)i, (int)b->token, (int)vocab_size - 1);
        if (isnan(b->bias) || (isinf(b->bias) && b->bias > 0))
            return invalid(err, errlen,
                           "logit_bias[%d].bias must be finite or -INFINITY (got %g for token %d)",
                           (int)i, (double)b->bias, (int)b->token);
    }
    if (p->n_banned < 0 || p->n_banned > WLM_MAX_LOGIT_BIAS)
        return invalid(err, errlen, "n_banned must be in 0..%d (got %d)", WLM_MAX_LOGIT_BIAS,
                       (int)p->n_banned);
    if (p->n_banned > 0 && !p->banned)
        return invalid(err, errlen, "banned is NULL with n_banned %d", (int)p->n_banned);
    for (int32_t i = 0; i < p->n_banned; i++)
        if (p->banned[i] < 0 || p->banned[i] >= vocab_size)
            return invalid(err, errlen, "banned[%d] = %d is outside the vocabulary 0..%d", (int)i,
                           (int)p->banned[i], (int)vocab_size - 1);
    if (p->order != WLM_ORDER_LLAMACPP && p->order != WLM_ORDER_RUNC)
        return invalid(err, errlen,
                       "order must be %d (WLM_ORDER_LLAMACPP) or %d (WLM_ORDER_RUNC) (got %d)",
                       WLM_ORDER_LLAMACPP, WLM_ORDER_RUNC, (int)p->order);
    if (p->n_probs < 0 || p->n_probs > WLM_MAX_PROBS)
        return invalid(err, errlen, "n_probs must be in 0..%d (got %d)", WLM_MAX_PROBS,
                       (int)p->n_probs);
    return WLM_OK;
}

static void free_lists(wlm_sampler *s) {
    free(s->logit_bias);
    free(s->banned);
    s->logit_bias = NULL;
    s->banned = NULL;
    s->n_logit_bias = s->n_banned = 0;
}

void wlm_sampler_free(wlm_sampler *s) {
    if (!s) return;
    free_lists(s);
    free(s->z);
    free(s->probs);
    free(s->model_probs);
    free(s->cand);
    free(s->counts);
    free(s->allowed);
    s->allowed = NULL;
    free(s->recent);
    s->recent = NULL;
    s->recent_cap = 0;
    wlm_sampler_set_grammar(s, NULL, NULL);
    s->z = s->probs = s->model_probs = NULL;
    s->cand = NULL;
    s->counts = NULL;
    s->vocab_size = 0;
}

static int32_t clamp_count(int32_t n, int32_t hi) { return n < 0 ? 0 : n > hi ? hi : n; }

int wlm_sampler_init(wlm_sampler *s, int32_t vocab_size, const wlm_gen_params *p) {
    if (!s || !p || vocab_size < 1) return WLM_ERR_INVALID_ARG;
    const size_t n = (size_t)vocab_size;
    if (s->vocab_size != vocab_size || !s->z) {
        wlm_sampler_free(s);
        s->z = malloc(sizeof(float) * n);
        s->probs = malloc(sizeof(float) * n);
        s->cand = malloc(sizeof(wlm_candidate) * n);
        s->counts = calloc(n, sizeof(int32_t));
        if (!s->z || !s->probs || !s->cand || !s->counts) {
            wlm_sampler_free(s);
            return WLM_ERR_NOMEM;
        }
        s->vocab_size = vocab_size;
    }
    s->n_probs = clamp_count(p->n_probs, WLM_MAX_PROBS);
    if (s->n_probs > 0 && !s->model_probs) {
        s->model_probs = malloc(sizeof(float) * n);
        if (!s->model_probs) {
            wlm_sampler_free(s);
            return WLM_ERR_NOMEM;
        }
    }
    free_lists(s);
    wlm_sampler_set_grammar(s, NULL, NULL);
    const int32_t nb = p->logit_bias ? clamp_count(p->n_logit_bias, WLM_MAX_LOGIT_BIAS) : 0;
    const int32_t nx = p->banned ? clamp_count(p->n_banned, WLM_MAX_LOGIT_BIAS) : 0;
    if (nb > 0) {
        s->logit_bias = malloc(sizeof(wlm_logit_bias) * (size_t)nb);
        if (!s->logit_bias) {
            wlm_sampler_free(s);
            return WLM_ERR_NOMEM;
        }
        memcpy(s->logit_bias, p->logit_bias, sizeof(wlm_logit_bias) * (size_t)nb);
        s->n_logit_bias = nb;
    }
    if (nx > 0) {
        s->banned = malloc(sizeof(int32_t) * (size_t)nx);
        if (!s->banned) {
            wlm_sampler_free(s);
            return WLM_ERR_NOMEM;
        }
        memcpy(s->banned, p->banned, sizeof(int32_t) * (size_t)nx);
        s->n_banned = nx;
    }
    s->temperature = p->temperature;
    s->top_k = p->top_k;
    s->top_p = p->top_p;
    s->min_p = p->min_p;
    s->typical_p = p->typical_p;
    s->repeat_penalty = p->repeat_penalty;
    s->repeat_last_n = p->repeat_last_n;
    s->presence_penalty = p->presence_penalty;
    s->frequency_penalty = p->frequency_penalty;
    s->order = p->order == WLM_ORDER_RUNC ? WLM_ORDER_RUNC : WLM_ORDER_LLAMACPP;
    s->rng_state = p->seed ? p->seed : DEFAULT_SEED;
    return WLM_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Stages 1-3: penalties, bias, bans (on s->z)                                                 */

/* Keeps a finite logit finite (a penalty or bias must not turn it into ±inf: +inf would make
 * the softmax NaN, -inf would silently ban the token). */
static float keep_finite(float x) { return x > FLT_MAX ? FLT_MAX : x < -FLT_MAX ? -FLT_MAX : x; }

/* Returns 1 when it may have changed z. */
static int apply_penalties(wlm_sampler *s, const int32_t *history, int32_t n_history) {
    const float r = s->repeat_penalty, fp = s->frequency_penalty, pp = s->presence_penalty;
    if (!history || n_history <= 0 || s->repeat_last_n == 0) return 0;
    if (r == 1.0f && fp == 0.0f && pp == 0.0f) return 0;
    const int32_t n = s->vocab_size;
    const int32_t from = n_history > s->repeat_last_n ? n_history - s->repeat_last_n : 0;
    int32_t *counts = s->counts;
    float *z = s->z;
    for (int32_t i = from; i < n_history; i++)
        if (history[i] >= 0 && history[i] < n) counts[history[i]]++;
    /* each distinct token once; clearing its count as it goes leaves the scratch zeroed */
    for (int32_t i = from; i < n_history; i++) {
        const int32_t t = history[i];
        if (t < 0 || t >= n || counts[t] == 0) continue;
        const int32_t c = counts[t];
        counts[t] = 0;
        float x = z[t];
        if (!(x > -INFINITY)) continue;
        if (r != 1.0f) x = x > 0.0f ? x / r : x * r;
        if (fp != 0.0f || pp != 0.0f) x -= (float)c * fp + pp; /* c > 0 here */
        z[t] = keep_finite(x);
    }
    return 1;
}

/* Returns 1 when it may have changed z. */
static int apply_bias_and_bans(wlm_sampler *s) {
    float *z = s->z;
    for (int32_t i = 0; i < s->n_logit_bias; i++) {
        const int32_t t = s->logit_bias[i].token;
        const float b = s->logit_bias[i].bias;
        if (t < 0 || t >= s->vocab_size || isnan(b)) continue;
        if (b == -INFINITY)
            z[t] = -INFINITY;
        else if (z[t] > -INFINITY)
            z[t] = keep_finite(z[t] + b);
    }
    for (int32_t i = 0; i < s->n_banned; i++)
        if (s->banned[i] >= 0 && s->banned[i] < s->vocab_size) z[s->banned[i]] = -INFINITY;
    return s->n_logit_bias > 0 || s->n_banned > 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Softmax and the candidate list                                                              */

/* out = softmax(z / t) with run.c's float operations (divide, max, expf(x - max), sum, divide);
 * only when z / t overflows (a tiny t) is it taken from (z - z_max) / t instead. have_exp: out
 * already holds expf(z - max z) and t is 1 (the report's pass computed the same floats). */
static void softmax_t(const float *z, float *out, int32_t n, float t, int have_exp) {
    float sum = 0.0f;
    if (have_exp) {
        for (int32_t i = 0; i < n; i++) sum += out[i];
    } else {
        if (t != 1.0f)
            for (int32_t i = 0; i < n; i++) out[i] = z[i] / t;
        else
            memcpy(out, z, sizeof(float) * (size_t)n);
        float max_val = out[0];
        for (int32_t i = 1; i < n; i++)
            if (out[i] > max_val) max_val = out[i];
        if (!isfinite(max_val)) {
            const float zmax = z[wlm_argmax(z, n)];
            for (int32_t i = 0; i < n; i++) out[i] = (z[i] - zmax) / t;
            max_val = 0.0f;
        }
        for (int32_t i = 0; i < n; i++) {
            out[i] = expf(out[i] - max_val);
            sum += out[i];
        }
    }
    for (int32_t i = 0; i < n; i++) out[i] /= sum;
}

/* The ranking by probability: p descending, then logit descending (p can tie by underflow or
 * rounding where z does not), then id ascending. A total order, so the result of any sort is
 * determined. */
static int ranks_before(const wlm_candidate *a, const wlm_candidate *b) {
    if (a->prob != b->prob) return a->prob > b->prob;
    if (a->z != b->z) return a->z > b->z;
    return a->id < b->id;
}

/* Typical-p's order: key ascending, then id. */
static int typical_before(const wlm_candidate *a, const wlm_candidate *b) {
    if (a->key != b->key) return a->key < b->key;
    return a->id < b->id;
}

/* Top-k's order, on logits alone: z descending, then id. */
static int logit_before(const wlm_candidate *a, const wlm_candidate *b) {
    if (a->z != b->z) return a->z > b->z;
    return a->id < b->id;
}

typedef int (*cand_order)(const wlm_candidate *a, const wlm_candidate *b);

/* Binary heap on h[0..n) whose root comes first in `first`'s order. */
static void sift_down(wlm_candidate *h, int32_t n, int32_t i, cand_order first) {
    for (;;) {
        int32_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && first(&h[l], &h[m])) m = l;
        if (r < n && first(&h[r], &h[m])) m = r;
        if (m == i) return;
        wlm_candidate tmp = h[i];
        h[i] = h[m];
        h[m] = tmp;
        i = m;
    }
}

/* A running sum that says when a prefix is long enough: top-p sums prob in float (run.c's
 * arithmetic) until it exceeds limit; typical-p sums in double until it reaches limit. */
typedef struct prefix_sum {
    int typical;
    float fsum, flimit;
    double dsum, dlimit;
} prefix_sum;

static int prefix_done(prefix_sum *ps, const wlm_candidate *e) {
    if (!ps->typical) {
        ps->fsum += e->prob;
        return ps->fsum > ps->flimit;
    }
    ps->dsum += e->prob;
    return ps->dsum >= ps->dlimit;
}

/*
 * The shortest prefix of c[0..n), in `first`'s order, at whose end ps is done (all n if
 * never): moved to c[0..m) in order, m returned; the rest is dropped. A heap yields the prefix
 * one element at a time, O(n + m log n): cheap when the prefix is short (a peaked
 * distribution), a heapsort at worst (measured faster than glibc's qsort on these records).
 */
static int32_t ordered_prefix(wlm_candidate *c, int32_t n, cand_order first, prefix_sum *ps) {
    for (int32_t i = n / 2 - 1; i >= 0; i--) sift_down(c, n, i, first);
    int32_t size = n;
    while (size > 0) { /* the taken elements collect at the end: c[n-1] first */
        const wlm_candidate top = c[0];
        c[0] = c[--size];
        sift_down(c, size, 0, first);
        c[size] = top;
        if (prefix_done(ps, &top)) break;
    }
    const int32_t m = n - size;
    for (int32_t i = size, j = n - 1; i < j; i++, j--) {
        const wlm_candidate tmp = c[i];
        c[i] = c[j];
        c[j] = tmp;
    }
    memmove(c, c + size, sizeof *c * (size_t)m);
    return m;
}

/* Sorts c[0..n) in `first`'s order. */
static void sort_all(wlm_candidate *c, int32_t n, cand_order first) {
    prefix_sum never = {0, 0.0f, INFINITY, 0.0, 0.0};
    ordered_prefix(c, n, first, &never);
}

static wlm_candidate make_cand(const wlm_sampler *s, int32_t i, float prob) {
    return (wlm_candidate){s->z[i], prob, 0.0f, i};
}

static int logit_after(const wlm_candidate *a, const wlm_candidate *b) {
    return logit_before(b, a);
}

/* Stage 5 on the whole vocabulary, by logits: the k best alive tokens (fewer if fewer are
 * alive) into cand[0..), sorted; a heap of the k best with the worst at the root, O(V log k). */
static int32_t select_top_k(wlm_sampler *s, int32_t k) {
    const int32_t n = s->vocab_size;
    const float *z = s->z;
    wlm_candidate *c = s->cand;
    int32_t m = 0, i = 0;
    for (; i < n && m < k; i++)
        if (z[i] > -INFINITY) c[m++] = make_cand(s, i, 0.0f);
    if (m == k) {
        for (int32_t j = k / 2 - 1; j >= 0; j--) sift_down(c, k, j, logit_after);
        for (; i < n; i++)
            if (z[i] > c[0].z) { /* later ids lose ties */
                c[0] = make_cand(s, i, 0.0f);
                sift_down(c, k, 0, logit_after);
            }
    }
    sort_all(c, m, logit_before);
    return m;
}

/* Every alive token with a logit >= zmin, in id order (weights not set). */
static int32_t alive_from(wlm_sampler *s, double zmin) {
    int32_t m = 0;
    for (int32_t i = 0; i < s->vocab_size; i++)
        if (s->z[i] > -INFINITY && (double)s->z[i] >= zmin) s->cand[m++] = make_cand(s, i, 0.0f);
    return m;
}

/* Weights of c[0..n) proportional to softmax(z / t): exp((z - z_max) / t), the best 1. */
static void weigh(wlm_candidate *c, int32_t n, float t) {
    float zmax = c[0].z;
    for (int32_t i = 1; i < n; i++)
        if (c[i].z > zmax) zmax = c[i].z;
    for (int32_t i = 0; i < n; i++) c[i].prob = expf((c[i].z - zmax) / t);
}

/* Stage 6 over c[0..n) in the distribution softmax(z / t) renormalised over them: the typical
 * set, moved to c[0..m) in typicality order, weighed (prob ∝ softmax(z / t)); m returned.
 * Entropy and log-probabilities in double from the logits (no log 0 for underflowed weights). */
static int32_t typical_filter(wlm_candidate *c, int32_t n, float t, double tau) {
    weigh(c, n, t);
    float zmax = c[0].z;
    for (int32_t i = 1; i < n; i++)
        if (c[i].z > zmax) zmax = c[i].z;
    double sum = 0.0;
    for (int32_t i = 0; i < n; i++) sum += c[i].prob;
    const double log_sum = log(sum);
    double entropy = 0.0;
    for (int32_t i = 0; i < n; i++) {
        const double lq = ((double)c[i].z - zmax) / t - log_sum; /* ln q_i */
        entropy -= (c[i].prob / sum) * lq;
    }
    for (int32_t i = 0; i < n; i++) {
        const double lq = ((double)c[i].z - zmax) / t - log_sum;
        c[i].key = (float)fmin(fabs(-lq - entropy), (double)FLT_MAX);
    }
    prefix_sum ps = {1, 0.0f, 0.0f, 0.0, tau * sum};
    return ordered_prefix(c, n, typical_before, &ps);
}

/* ------------------------------------------------------------------------------------------ */
/* Report                                                                                      */

/* The order of wlm_token.top: prob_sampled descending, prob descending, id ascending. */
static int comes_before(const wlm_token_prob *a, const wlm_token_prob *b) {
    if (a->prob_sampled != b->prob_sampled) return a->prob_sampled > b->prob_sampled;
    if (a->prob != b->prob) return a->prob > b->prob;
    return a->id < b->id;
}

/* Insertion into the sorted top[0..*n) of capacity cap (<= WLM_MAX_PROBS): O(cap) at worst,
 * one comparison for the many that do not enter. */
static void offer(wlm_token_prob *top, int32_t *n, int32_t cap, int32_t id, float ps, float prob) {
    const wlm_token_prob e = {id, prob, 0.0f, ps};
    if (*n == cap && !comes_before(&e, &top[cap - 1])) return;
    int32_t j = *n < cap ? (*n)++ : cap - 1;
    for (; j > 0 && comes_before(&e, &top[j - 1]); j--) top[j] = top[j - 1];
    top[j] = e;
}

/* A raw logit as the sampler reads it: NaN as -inf, +inf as FLT_MAX. */
static float sane(float x) { return x != x ? -INFINITY : x > FLT_MAX ? FLT_MAX : x; }

/* What the report needs from one step. */
typedef struct step_info {
    const float *logits;
    float raw_max;     /* max of the raw logits */
    double raw_sum;    /* sum of exp(raw - raw_max), in double */
    int32_t next;
    float ps_next;
    int kind;          /* 0: greedy, 1: plain multinomial (probs), 2: candidate list cand[0..nc) */
    int32_t nc;
    float total;       /* kind 2: sum of the survivors' weights */
} step_info;

/* The model probability of token t: the same arithmetic as model_probs[t]. */
static float model_prob(const step_info *st, int32_t t) {
    return expf(sane(st->logits[t]) - st->raw_max) * (float)(1.0 / st->raw_sum);
}

static void report(wlm_sampler *s, const step_info *st, wlm_token *info) {
    const double lse = (double)st->raw_max + log(st->raw_sum);
    const int32_t n = s->vocab_size;
    info->prob = s->model_probs ? s->model_probs[st->next] : model_prob(st, st->next);
    info->logprob = (float)((double)sane(st->logits[st->next]) - lse);
    info->prob_sampled = st->ps_next;
    const int32_t cap = s->n_probs < n ? s->n_probs : n;
    int32_t m = 0;
    if (cap > 0 && s->model_probs) {
        const float *mp = s->model_probs;
        wlm_token_prob *top = info->top;
        if (st->kind == 1) {
            const float *pr = s->probs;
            for (int32_t t = 0; t < n; t++) /* a full list rejects most tokens at once */
                if (m < cap || pr[t] >= top[cap - 1].prob_sampled)
                    offer(top, &m, cap, t, pr[t], mp[t]);
        } else {
            /* the survivors (marked), then the best removed tokens when they can still enter */
            int32_t *mark = s->counts;
            if (st->kind == 0) {
                offer(top, &m, cap, st->next, 1.0f, mp[st->next]);
                mark[st->next] = 1;
            } else {
                for (int32_t i = 0; i < st->nc; i++) {
                    const wlm_candidate *c = &s->cand[i];
                    offer(top, &m, cap, c->id, c->prob / st->total, mp[c->id]);
                    mark[c->id] = 1;
                }
            }
            if (m < cap || top[cap - 1].prob_sampled == 0.0f) /* then the last entry has ps 0 */
                for (int32_t t = 0; t < n; t++)
                    if ((m < cap || mp[t] >= top[cap - 1].prob) && !mark[t])
                        offer(top, &m, cap, t, 0.0f, mp[t]);
            if (st->kind == 0)
                mark[st->next] = 0;
            else
                for (int32_t i = 0; i < st->nc; i++) mark[s->cand[i].id] = 0;
        }
        for (int32_t i = 0; i < m; i++)
            top[i].logprob = (float)((double)sane(st->logits[top[i].id]) - lse);
    }
    info->n_probs = m;
}

/* ------------------------------------------------------------------------------------------ */
/* The chain                                                                                   */

/* Draws from the weights of c[0..nc) with coin u (run.c's walk: r = u × total, the first whose
 * running sum exceeds r); fills the step's pick. */
static void draw_candidate(const wlm_candidate *c, int32_t nc, float coin, step_info *st) {
    float total = 0.0f;
    for (int32_t i = 0; i < nc; i++) total += c[i].prob;
    int32_t pick = 0;
    if (total > 0.0f) {
        const float r = coin * total;
        float cdf = 0.0f;
        pick = -1;
        for (int32_t i = 0; i < nc; i++) {
            cdf += c[i].prob;
            if (r < cdf) {
                pick = i;
                break;
            }
        }
        if (pick < 0) { /* rounding: the last survivor of positive weight */
            pick = nc - 1;
            while (pick > 0 && !(c[pick].prob > 0.0f)) pick--;
        }
    }
    st->next = c[pick].id;
    st->ps_next = total > 0.0f ? c[pick].prob / total : 1.0f;
    st->kind = 2;
    st->nc = nc;
    st->total = total > 0.0f ? total : 1.0f;
}

/* Stages 1-10 into *out (the report is left to the caller). mask: the grammar's allowed tokens,
 * banning the others at stage 3 (NULL: none). */
static int32_t chain(wlm_sampler *s, const float *logits, const int32_t *history,
                     int32_t n_history, wlm_token *info, const uint8_t *mask, step_info *out) {
    const int32_t n = s->vocab_size;
    float *z = s->z, *probs = s->probs;
    const float T = s->temperature;
    step_info st = {logits, -INFINITY, 0.0, 0, 1.0f, 0, 0, 1.0f};

    /* copy (sanitised) and the model's softmax normaliser, before anything changes z */
    float raw_max = -INFINITY;
    for (int32_t i = 0; i < n; i++) {
        const float x = sane(logits[i]);
        z[i] = x;
        if (x > raw_max) raw_max = x;
    }
    if (!(raw_max > -INFINITY)) return WLM_ERR_INVALID_ARG;
    st.raw_max = raw_max;
    if (info) { /* e^(raw - max) into probs, summed in double; model_probs = their share */
        double sum = 0.0;
        for (int32_t i = 0; i < n; i++) sum += (double)(probs[i] = expf(z[i] - raw_max));
        st.raw_sum = sum;
        if (s->model_probs) {
            const float inv = (float)(1.0 / sum);
            for (int32_t i = 0; i < n; i++) s->model_probs[i] = probs[i] * inv;
        }
    }
    /* probs keeps expf(z - max z) for the softmax at T' = 1 while z is the raw logits */
    int changed = apply_penalties(s, history, n_history) | apply_bias_and_bans(s);
    if (mask) {
        for (int32_t i = 0; i < n; i++)
            if (!mask[i]) z[i] = -INFINITY;
        changed = 1;
    }
    const int have_exp = info != NULL && !changed;
    const int32_t best = wlm_argmax(z, n);
    if (!(z[best] > -INFINITY)) return WLM_ERR_INVALID_ARG; /* bias and bans removed all */

    if (T == 0.0f) {
        st.next = best;
        st.kind = 0;
        *out = st;
        return best;
    }

    const int top_k_on = s->top_k > 0 && s->top_k < n;
    const int typical_on = s->typical_p < 1.0f, top_p_on = s->top_p < 1.0f;
    const int min_p_on = s->min_p > 0.0f;
    const int any_filter = top_k_on || typical_on || top_p_on || min_p_on;
    /* The temperature of the distribution the filters see: T first in run.c's order; in
     * llama.cpp's order 1 (T comes after the filters), unless no filter runs. */
    const float t_pre = s->order == WLM_ORDER_RUNC || !any_filter ? T : 1.0f;
    /* The softmax over the whole vocabulary is needed only without filters and when top-p is
     * the first filter (run.c's path); other filters start from the logits. */
    const int full_softmax = !any_filter || (top_p_on && !top_k_on && !typical_on);
    if (full_softmax) softmax_t(z, probs, n, t_pre, have_exp && t_pre == 1.0f);
    const float coin = wlm_rng_f32(&s->rng_state); /* where run.c draws it: before the filters */

    if (!any_filter) { /* run.c's sample_mult */
        float cdf = 0.0f;
        int32_t next = -1;
        for (int32_t i = 0; i < n; i++) {
            cdf += probs[i];
            if (coin < cdf) {
                next = i;
                break;
            }
        }
        if (next < 0) { /* rounding: the last token of positive probability */
            next = best;
            for (int32_t i = n - 1; i >= 0; i--)
                if (probs[i] > 0.0f) {
                    next = i;
                    break;
                }
        }
        st.next = next;
        st.ps_next = probs[next];
        st.kind = 1;
        *out = st;
        return next;
    }

    wlm_candidate *c = s->cand;
    int32_t nc = 0;
    int listed = 0;   /* cand[0..nc) holds the candidates */
    int ranked = 0;   /* ... in ranks_before order */
    int weighted = 0; /* ... with prob ∝ softmax(z / t_pre) */
    if (top_k_on) {
        nc = select_top_k(s, s->top_k);
        listed = ranked = 1; /* logit order is rank order once weighed */
    }
    if (typical_on) {
        if (!listed) nc = alive_from(s, -INFINITY);
        nc = typical_filter(c, nc, t_pre, (double)s->typical_p);
        listed = weighted = 1;
        ranked = 0;
    }
    if (top_p_on) {
        prefix_sum ps = {0, 0.0f, s->top_p, 0.0, 0.0};
        if (!listed) {
            /* run.c's cut-off: p < (1 - top_p) / (V - 1) cannot be in the nucleus */
            const float cutoff = n > 1 ? (1.0f - s->top_p) / (float)(n - 1) : 0.0f;
            for (int32_t i = 0; i < n; i++)
                if (probs[i] >= cutoff && z[i] > -INFINITY) c[nc++] = make_cand(s, i, probs[i]);
            if (nc == 0) /* near-flat p: all below the cut-off */
                for (int32_t i = 0; i < n; i++)
                    if (z[i] > -INFINITY) c[nc++] = make_cand(s, i, probs[i]);
        } else {
            if (!weighted) weigh(c, nc, t_pre);
            float mass = 0.0f;
            for (int32_t i = 0; i < nc; i++) mass += c[i].prob;
            ps.flimit = s->top_p * mass;
        }
        if (ranked) { /* already in order: the nucleus is a prefix */
            int32_t m = nc;
            for (int32_t i = 0; i < nc; i++)
                if (prefix_done(&ps, &c[i])) {
                    m = i + 1;
                    break;
                }
            nc = m;
        } else {
            nc = ordered_prefix(c, nc, ranks_before, &ps);
        }
        listed = ranked = weighted = 1;
    }
    if (min_p_on) {
        if (!listed) { /* p_t >= min_p × p_max  <=>  z_t >= z_max + t_pre × ln(min_p) */
            nc = alive_from(s, (double)z[best] + (double)t_pre * log((double)s->min_p));
        } else {
            if (!weighted) weigh(c, nc, t_pre);
            float pmax = c[0].prob;
            for (int32_t i = 1; i < nc; i++)
                if (c[i].prob > pmax) pmax = c[i].prob;
            const float limit = s->min_p * pmax;
            int32_t m = 0;
            for (int32_t i = 0; i < nc; i++)
                if (c[i].prob >= limit) c[m++] = c[i];
            nc = m;
            weighted = 1;
        }
    }
    if (nc <= 0) { /* cannot happen (every stage keeps its best token); stay safe */
        c[0] = make_cand(s, best, 1.0f);
        nc = 1;
        weighted = 1;
    }
    /* stage 9: in llama.cpp's order the temperature comes last, over the survivors */
    if (s->order == WLM_ORDER_LLAMACPP && T != 1.0f)
        weigh(c, nc, T);
    else if (!weighted)
        weigh(c, nc, t_pre);
    draw_candidate(c, nc, coin, &st);
    *out = st;
    return st.next;
}

/* The draw from q restricted to the allowed tokens (see sampler.h), with a fresh coin; 0 when
 * no allowed token has weight (the caller then reruns the chain with the mask). */
static int restrict_draw(wlm_sampler *s, step_info *st) {
    const uint8_t *ok = s->allowed;
    wlm_candidate *c = s->cand;
    int32_t m = 0;
    if (st->kind == 0) return 0; /* greedy: the refused argmax was the only survivor */
    if (st->kind == 1) {         /* every token, weights p */
        for (int32_t t = 0; t < s->vocab_size; t++)
            if (ok[t] && s->probs[t] > 0.0f) c[m++] = make_cand(s, t, s->probs[t]);
    } else {
        for (int32_t i = 0; i < st->nc; i++)
            if (ok[c[i].id] && c[i].prob > 0.0f) c[m++] = c[i];
    }
    if (m == 0) return 0;
    draw_candidate(c, m, wlm_rng_f32(&s->rng_state), st);
    return 1;
}

void wlm_sampler_set_grammar(wlm_sampler *s, wlm_gram *g, wlm_gram_matcher *m) {
    if (!s) return;
    wlm_gram_matcher_free(s->matcher);
    wlm_gram_free(s->gram);
    s->gram = g;
    s->matcher = m;
    s->n_allowed = -1;
    s->dormant = 0; /* a new grammar is active until wlm_sampler_set_lazy says otherwise */
    s->n_triggers = 0;
    s->n_arms = s->n_disarms = 0;
    s->armed = 1;
    s->lead_disarm = s->seen_text = 0;
    s->recent_len = 0;
}

int32_t wlm_sampler_sample(wlm_sampler *s, const float *logits, const int32_t *history,
                           int32_t n_history, wlm_token *info) {
    if (!s || !s->z || !s->probs || !s->cand || !s->counts) return WLM_ERR_STATE;
    if (!logits) return WLM_ERR_INVALID_ARG;
    step_info st;
    int32_t next = chain(s, logits, history, n_history, info, NULL, &st);
    s->n_allowed = -1;
    if (next >= 0 && s->matcher && !s->dormant) {
        /* a report of the distribution (n_probs) needs the mask: the draw then always takes the
         * restricted path, so top[] and prob_sampled describe q / Q exactly */
        int ok = s->n_probs > 0 ? 0 : wlm_gram_allows(s->matcher, next);
        if (ok < 0) return ok;
        if (!ok) { /* rejected: the full mask, then the restricted draw or the masked chain */
            if (!s->allowed) {
                s->allowed = malloc((size_t)s->vocab_size);
                if (!s->allowed) return WLM_ERR_NOMEM;
            }
            int32_t na = wlm_gram_mask(s->matcher, s->allowed);
            if (na < 0) return na;
            s->n_allowed = na;
            if (na == 0) return WLM_ERR_INVALID_ARG;
            if (!restrict_draw(s, &st)) {
                next = chain(s, logits, history, n_history, info, s->allowed, &st);
                if (next < 0) return next;
            }
            next = st.next;
        }
    }
    if (next >= 0 && info) report(s, &st, info);
    return next;
}

int32_t wlm_sampler_distribution(wlm_sampler *s, const float *logits, const int32_t *history,
                                 int32_t n_history, float *out) {
    if (!s || !s->z || !s->probs || !s->cand || !s->counts) return WLM_ERR_STATE;
    if (!logits) return WLM_ERR_INVALID_ARG;
    const uint64_t rng = s->rng_state; /* chain draws one coin: this call must not move it */
    step_info st;
    const int32_t next = chain(s, logits, history, n_history, NULL, NULL, &st);
    s->rng_state = rng;
    if (next < 0 || !out) return next;
    const int32_t n = s->vocab_size;
    if (st.kind == 0) { /* greedy: all mass on the argmax */
        memset(out, 0, sizeof(float) * (size_t)n);
        out[next] = 1.0f;
    } else if (st.kind == 1) { /* no filter: the full softmax */
        memcpy(out, s->probs, sizeof(float) * (size_t)n);
    } else { /* the survivors' weights over their total, as draw_candidate divides them */
        memset(out, 0, sizeof(float) * (size_t)n);
        for (int32_t i = 0; i < st.nc; i++) out[s->cand[i].id] = s->cand[i].prob / st.total;
    }
    return next;
}
