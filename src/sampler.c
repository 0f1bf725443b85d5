/*
 * sampler.c — logits → next token. Order: repetition penalty → (temperature 0: argmax) →
 * temperature → softmax → top-k → top-p → draw. With top_k = 0 and no penalty every float
 * operation and RNG draw is run.c's sample(), sample_mult() and sample_topp() (including
 * its probability cut-off before sorting), so the same seed gives the same tokens as run.c.
 * Ties between equal probabilities resolve to the lower token id.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "sampler.h"

#define DEFAULT_SEED 0x5DEECE66DULL /* replaces seed 0, a fixed point of xorshift */

uint32_t wlm_rng_u32(uint64_t *state) {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return (uint32_t)((*state * 0x2545F4914F6CDD1DULL) >> 32);
}

float wlm_rng_f32(uint64_t *state) { return (float)(wlm_rng_u32(state) >> 8) / 16777216.0f; }

int32_t wlm_argmax(const float *x, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

int wlm_sampler_check(const wlm_gen_params *p, char *err, size_t errlen) {
    const char *what = NULL;
    char buf[96];
    if (!(p->temperature >= 0.0f) || isinf(p->temperature)) {
        snprintf(buf, sizeof buf, "temperature must be a finite number >= 0 (got %g)",
                 (double)p->temperature);
        what = buf;
    } else if (p->top_k < 0) {
        snprintf(buf, sizeof buf, "top_k must be >= 0, 0 = off (got %d)", (int)p->top_k);
        what = buf;
    } else if (!(p->top_p > 0.0f && p->top_p <= 1.0f)) {
        snprintf(buf, sizeof buf, "top_p must be in (0, 1], 1 = off (got %g)", (double)p->top_p);
        what = buf;
    } else if (!(p->repeat_penalty > 0.0f) || isinf(p->repeat_penalty)) {
        snprintf(buf, sizeof buf, "repeat_penalty must be a finite number > 0, 1 = off (got %g)",
                 (double)p->repeat_penalty);
        what = buf;
    } else if (p->repeat_last_n < 0) {
        snprintf(buf, sizeof buf, "repeat_last_n must be >= 0 (got %d)", (int)p->repeat_last_n);
        what = buf;
    }
    if (!what) return WLM_OK;
    if (err && errlen) snprintf(err, errlen, "%s", what);
    return WLM_ERR_INVALID_ARG;
}

int wlm_sampler_init(wlm_sampler *s, int32_t vocab_size, const wlm_gen_params *p) {
    if (s->vocab_size != vocab_size || !s->candidates) {
        wlm_sampler_free(s);
        s->candidates = malloc(sizeof(wlm_prob_index) * (size_t)vocab_size);
        s->probs = malloc(sizeof(float) * (size_t)vocab_size);
        s->seen = calloc((size_t)vocab_size, 1);
        if (!s->candidates || !s->probs || !s->seen) {
            wlm_sampler_free(s);
            return WLM_ERR_NOMEM;
        }
        s->vocab_size = vocab_size;
    }
    s->temperature = p->temperature;
    s->top_k = p->top_k;
    s->top_p = p->top_p;
    s->repeat_penalty = p->repeat_penalty;
    s->repeat_last_n = p->repeat_last_n;
    s->rng_state = p->seed ? p->seed : DEFAULT_SEED;
    return WLM_OK;
}

void wlm_sampler_free(wlm_sampler *s) {
    free(s->candidates);
    free(s->probs);
    free(s->seen);
    s->candidates = NULL;
    s->probs = NULL;
    s->seen = NULL;
    s->vocab_size = 0;
}

/* Descending probability, then ascending id: a total order, so any sort is deterministic. */
static int cmp_desc(const void *pa, const void *pb) {
    const wlm_prob_index *a = pa, *b = pb;
    if (a->prob > b->prob) return -1;
    if (a->prob < b->prob) return 1;
    return (a->index > b->index) - (a->index < b->index);
}

/* "a ranks below b" in cmp_desc's order. */
static int ranks_below(const wlm_prob_index *a, const wlm_prob_index *b) {
    return a->prob < b->prob || (a->prob == b->prob && a->index > b->index);
}

static void sift_down(wlm_prob_index *h, int32_t n, int32_t i) {
    for (;;) {
        int32_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && ranks_below(&h[l], &h[m])) m = l;
        if (r < n && ranks_below(&h[r], &h[m])) m = r;
        if (m == i) return;
        wlm_prob_index tmp = h[i];
        h[i] = h[m];
        h[m] = tmp;
        i = m;
    }
}

/* The k best of probs[0..n) into c[0..k), sorted by cmp_desc: a heap of the k best, O(n log k). */
static void top_k_sorted(const float *probs, int32_t n, int32_t k, wlm_prob_index *c) {
    for (int32_t i = 0; i < k; i++) c[i] = (wlm_prob_index){probs[i], i};
    for (int32_t i = k / 2 - 1; i >= 0; i--) sift_down(c, k, i);
    for (int32_t i = k; i < n; i++) {
        wlm_prob_index e = {probs[i], i};
        if (ranks_below(&c[0], &e)) {
            c[0] = e;
            sift_down(c, k, 0);
        }
    }
    qsort(c, (size_t)k, sizeof *c, cmp_desc);
}

/* CTRL repetition penalty (Keskar et al. 2019, as llama.cpp applies it): each distinct token
 * among the last `window` of history has its logit divided by `penalty` when positive and
 * multiplied by it when negative. */
static void apply_penalty(wlm_sampler *s, float *logits, const int32_t *history, int32_t n) {
    if (s->repeat_penalty == 1.0f || s->repeat_last_n == 0 || n == 0) return;
    int32_t from = n > s->repeat_last_n ? n - s->repeat_last_n : 0;
    for (int32_t i = from; i < n; i++) {
        int32_t t = history[i];
        if (t < 0 || t >= s->vocab_size || s->seen[t]) continue;
        s->seen[t] = 1;
        logits[t] = logits[t] > 0.0f ? logits[t] / s->repeat_penalty : logits[t] * s->repeat_penalty;
    }
    for (int32_t i = from; i < n; i++)
        if (history[i] >= 0 && history[i] < s->vocab_size) s->seen[history[i]] = 0;
}

int32_t wlm_sampler_sample(wlm_sampler *s, float *logits, const int32_t *history,
                           int32_t n_history, float *prob, float *prob_sampled) {
    const int32_t n = s->vocab_size;
    apply_penalty(s, logits, history, n_history);

    float *probs = s->probs;
    int32_t next;
    float p_sampled = 1.0f;
    if (s->temperature == 0.0f) {
        next = wlm_argmax(logits, n);
    } else {
        /* run.c divides the logits in place; dividing into `probs` gives the same floats and
         * keeps the logits for the model probability below. */
        if (s->temperature != 1.0f)
            for (int32_t q = 0; q < n; q++) probs[q] = logits[q] / s->temperature;
        else
            memcpy(probs, logits, sizeof(float) * (size_t)n);
        wlm_softmax_ref(probs, n);
        const float coin = wlm_rng_f32(&s->rng_state);
        const float topp = s->top_p;
        wlm_prob_index *c = s->candidates;
        int32_t n0;
        float mass = 1.0f; /* probability mass of the candidates before top-p */
        if (s->top_k > 0 && s->top_k < n) {
            n0 = s->top_k;
            top_k_sorted(probs, n, n0, c);
            mass = 0.0f;
            for (int32_t i = 0; i < n0; i++) mass += c[i].prob;
        } else if (topp < 1.0f) {
            /* run.c's shortcut: a token below (1 - p) / (n - 1) cannot be in the nucleus. */
            const float cutoff = n > 1 ? (1.0f - topp) / (float)(n - 1) : 0.0f;
            n0 = 0;
            for (int32_t i = 0; i < n; i++)
                if (probs[i] >= cutoff) c[n0++] = (wlm_prob_index){probs[i], i};
            if (n0 == 0) /* the shortcut fails on a near-flat distribution (run.c reads out of
                            bounds there): keep every token */
                for (int32_t i = 0; i < n; i++) c[n0++] = (wlm_prob_index){probs[i], i};
            qsort(c, (size_t)n0, sizeof *c, cmp_desc);
        } else {
            n0 = 0; /* plain multinomial, run.c's sample_mult */
        }

        if (n0 == 0) {
            float cdf = 0.0f;
            next = n - 1;
            for (int32_t i = 0; i < n; i++) {
                cdf += probs[i];
                if (coin < cdf) {
                    next = i;
                    break;
                }
            }
            p_sampled = probs[next];
        } else {
            /* Nucleus over the candidates: the smallest prefix whose share of `mass` exceeds
             * top_p (all of them when top_p is 1), then draw within it. */
            float cumulative = 0.0f;
            int32_t last = n0 - 1;
            if (topp < 1.0f) {
                const float limit = topp * mass;
                for (int32_t i = 0; i < n0; i++) {
                    cumulative += c[i].prob;
                    if (cumulative > limit) {
                        last = i;
                        break;
                    }
                }
            } else {
                for (int32_t i = 0; i < n0; i++) cumulative += c[i].prob;
            }
            const float r = coin * cumulative;
            float cdf = 0.0f;
            int32_t pick = last;
            for (int32_t i = 0; i <= last; i++) {
                cdf += c[i].prob;
                if (r < cdf) {
                    pick = i;
                    break;
                }
            }
            next = c[pick].index;
            p_sampled = cumulative > 0.0f ? c[pick].prob / cumulative : 1.0f;
        }
    }
    if (prob) {
        if (s->temperature == 1.0f) {
            *prob = probs[next];
        } else { /* softmax of the (penalised) logits at temperature 1, for `next` only */
            float max_val = logits[0], sum = 0.0f;
            for (int32_t i = 1; i < n; i++)
                if (logits[i] > max_val) max_val = logits[i];
            for (int32_t i = 0; i < n; i++) sum += expf(logits[i] - max_val);
            *prob = expf(logits[next] - max_val) / sum;
        }
    }
    if (prob_sampled) *prob_sampled = p_sampled;
    return next;
}
