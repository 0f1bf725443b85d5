/*
 * sampler.h — internal: the sampler chain that turns one step's logits into the next token id,
 * with the probabilities reported per token (wlm_token.prob / logprob / prob_sampled / top).
 * It does not evaluate the model, track stop strings or own the history: the caller passes the
 * sequence so far at every step.
 *
 * Notation: z = the logits (vocab_size floats), T = temperature, "alive" = z_t > -inf (not banned
 * or biased away), "candidates" = the tokens still allowed after the filters so far, p = softmax
 * over the candidates, renormalised after every filter. "By probability" means p descending,
 * then z descending, then id ascending (a total order: ties go to the lower id at every stage).
 *
 * Stages (the public contract and order are in wasmlm.h, above wlm_gen_params):
 *  1. Repetition penalty — CTRL (Keskar et al. 2019, arXiv:1909.05858, §4.1), as llama.cpp's
 *     llama_sampler_penalties applies it: for each distinct token t among the last repeat_last_n
 *     of history, z_t = z_t / r if z_t > 0, else z_t × r.
 *  2. Presence / frequency penalties — OpenAI API reference ("frequency and presence
 *     penalties"), same window: z_t -= c_t × frequency_penalty + [c_t > 0] × presence_penalty,
 *     c_t = occurrences of t in the window (llama.cpp computes the same, after stage 1).
 *  3. Logit bias z_t += b_t (b_t = -inf bans t; several entries for one token add up), then
 *     banned tokens z_t = -inf. A finite logit stays finite (clamped to ±FLT_MAX). Nothing
 *     alive: WLM_ERR_INVALID_ARG.
 *  4. T = 0: greedy, the first argmax of z (no RNG draw).
 *  Otherwise the filters see p = softmax(z / T') with T' = T in WLM_ORDER_RUNC (run.c's order,
 *  temperature first) and T' = 1 in WLM_ORDER_LLAMACPP. ONE float u = wlm_rng_f32() is drawn
 *  per step, after the softmax and before the filters (where run.c draws its coin).
 *  5. top-k (Fan et al. 2018, arXiv:1805.04833): the k largest z (ties: lower id); a heap of k
 *     over the vocabulary, O(V log k), no exp.
 *  6. typical-p (Meister et al. 2022, arXiv:2202.00666): H = -Σ p log p over the candidates;
 *     by |-log p_t - H| ascending (ties: lower id) the shortest prefix with Σ p >= typical_p.
 *     Entropy and log p in double from the logits (no log 0 for underflowed p).
 *  7. top-p (Holtzman et al. 2019, arXiv:1904.09751): by probability, the shortest prefix whose
 *     sum exceeds top_p × (mass of the candidates), summed in float as run.c. As the first
 *     filter it uses run.c's shortcut on the full softmax: a token with p < (1 - top_p) / (V - 1)
 *     cannot be in the nucleus (all alive tokens are kept when none passes, on a near-flat p).
 *  8. min-p (Nguyen et al. 2024, arXiv:2407.01082): keep p_t >= min_p × max p; a linear pass
 *     (as the first filter, on the logits: z_t >= z_max + T' ln min_p).
 *  9. WLM_ORDER_LLAMACPP with T != 1: the survivors' weights become exp((z_t - z_max) / T).
 * 10. Draw (run.c's inverse CDF): r = u × Σ w over the survivors, the first survivor whose
 *     running sum exceeds r, walking the candidate list in its current order (by probability
 *     after top-k / top-p, by typicality after typical-p, by id when only min-p ran). With no
 *     filter active: run.c's sample_mult, u against the running sum of p in id order.
 * Stages 6 and 7 take their prefix from a heap, one token at a time, O(n + m log n) for m kept
 * of n: no full sort unless (nearly) everything is kept.
 * The softmax over the whole vocabulary is computed only without filters or with top-p first.
 *
 * run.c equivalence (llama2.c run.c sample / sample_mult / sample_topp): with only temperature
 * and top-p in WLM_ORDER_RUNC (or WLM_ORDER_LLAMACPP at T = 1), every float operation and the
 * RNG draw are run.c's, so a seed reproduces run.c's tokens. Two deliberate differences, both
 * where run.c misbehaves: when the cut-off keeps no token (run.c reads out of bounds) all tokens
 * are kept, and when rounding leaves the coin above the last running sum the walk ends on the
 * last token of positive probability (run.c: the last token, possibly of probability 0).
 *
 * Grammar (optional, wlm_sampler_set_grammar): the draw is restricted to the tokens the matcher
 * allows. The constrained distribution is the chain's final distribution q (after every stage
 * above) renormalised over the allowed tokens, q(t) / Σ_allowed q. It is sampled by rejection,
 * as llama.cpp's common sampler does: draw t from q; if the grammar allows t, done (one token
 * check, no mask); otherwise build the full mask and draw again, with a second coin, from q
 * restricted to the allowed tokens — P(t) = q(t) + (1 - Q) q(t) / Q = q(t) / Q exactly, Q the
 * allowed mass. When no allowed token survived the filters (Q = 0; always so for greedy when
 * the argmax is refused) the chain is run again with the refused tokens banned at stage 3
 * (llama.cpp's "grammar first"), so top-k, top-p... then choose among allowed tokens only.
 * With n_probs > 0 the mask is always built and the draw always restricted (same distribution),
 * so prob_sampled and top[] report q / Q exactly; with n_probs = 0 a token accepted at the
 * first check reports prob_sampled = q(t) (the mass Q is not known without the mask).
 *
 * Report: prob = softmax of the raw logits (sanitised: NaN as -inf, +inf as FLT_MAX), its
 * normaliser summed in double; logprob = z_t - logsumexp(z) in double; prob_sampled = w / Σ w
 * of the drawn distribution (1 for greedy); top[] by (prob_sampled, prob, id) from an
 * insertion list of n_probs entries, O(V). At T' = 1 with no penalty, bias or ban, the
 * sampling softmax reuses the report's expf values (the same floats), saving a pass.
 */
#ifndef WASMLM_SAMPLER_H
#define WASMLM_SAMPLER_H

#include <stddef.h>
#include <stdint.h>
#include "wasmlm.h"
#include "sampling/grammar.h"

/* One candidate token of the filter stages. */
typedef struct wlm_candidate {
    float z;      /* logit after penalties and bias (before temperature) */
    float prob;   /* weight ∝ p: the full softmax's p, or exp((z - z_max) / T') computed for
                     the candidates alone; the draw weight after stage 9 */
    float key;    /* typical-p's |-log p - H| */
    int32_t id;
} wlm_candidate;

typedef struct wlm_sampler {
    int32_t vocab_size;
    /* parameters, copied by init */
    float temperature, top_p, min_p, typical_p;
    float repeat_penalty, presence_penalty, frequency_penalty;
    int32_t top_k, repeat_last_n, order, n_probs;
    int32_t n_logit_bias;
    wlm_logit_bias *logit_bias;  /* (n_logit_bias) own copy */
    int32_t n_banned;
    int32_t *banned;             /* (n_banned) own copy */
    uint64_t rng_state;
    /* scratch: 28 bytes per vocabulary entry (+4 when n_probs > 0), allocated by init */
    float *z;                    /* (vocab_size) logits after penalties, bias and bans */
    float *probs;                /* (vocab_size) softmax(z / T') */
    float *model_probs;          /* (vocab_size) softmax of the raw logits; only if n_probs > 0 */
    wlm_candidate *cand;         /* (vocab_size) candidate list */
    int32_t *counts;             /* (vocab_size) zero at rest: window counts, survivor marks */
    /* grammar (NULL: none), owned: freed by wlm_sampler_free and by init */
    wlm_gram *gram;
    wlm_gram_matcher *matcher;
    uint8_t *allowed;            /* (vocab_size) the last mask, allocated on first use */
    int32_t n_allowed;           /* tokens allowed by the last mask; -1 when none was built */
    /* lazy grammar (grammar_lazy.c): while `dormant` the matcher is kept but not applied */
    int dormant;                 /* 1 while the grammar waits for a trigger */
    int32_t n_triggers;
    wlm_grammar_trigger triggers[WLM_MAX_GRAMMAR_TRIGGERS]; /* copied by wlm_sampler_set_lazy */
    size_t max_word;             /* longest trigger word, bytes */
    int32_t n_arms, n_disarms;   /* arming (wasmlm.h, "Arming"): 0 arms, always armed */
    wlm_grammar_trigger arms[WLM_MAX_GRAMMAR_ARMS], disarms[WLM_MAX_GRAMMAR_ARMS];
    size_t max_arm, max_disarm;  /* longest arming / disarming word, bytes */
    int armed;                   /* 1 while triggers count */
    int lead_disarm;             /* grammar_start_armed 2: disarms count only at the start */
    int seen_text;               /* (lead_disarm) the start is past: text or a disarm seen */
    char *recent;                /* the generated text's last bytes that may begin a trigger
                                    word (< max_word of them) plus the latest piece; owned */
    size_t recent_len, recent_cap;
} wlm_sampler;

/*
 * Validates every sampling field of p against the ranges in wasmlm.h: temperature (finite,
 * >= 0), top_k (>= 0), top_p (0, 1], min_p [0, 1], typical_p (0, 1], repeat_penalty (finite,
 * > 0), repeat_last_n (>= 0), presence / frequency penalty (finite), n_logit_bias and n_banned
 * (0..WLM_MAX_LOGIT_BIAS, array non-NULL when the count is > 0, token ids in 0..vocab_size-1,
 * biases finite or -INFINITY), order (0 or 1), n_probs (0..WLM_MAX_PROBS). NaN anywhere is an
 * error. On error returns WLM_ERR_INVALID_ARG and writes a message naming the field and the
 * value into err (when err and errlen are non-zero).
 */
int wlm_sampler_check(const wlm_gen_params *p, int32_t vocab_size, char *err, size_t errlen);

/*
 * Prepares s (zeroed before its first init; calling init again restarts it with new
 * parameters). Allocates the scratch for vocab_size tokens (once: kept while the size stays
 * the same), copies the parameters and the bias and ban lists (the caller's arrays may be
 * freed after), and seeds the RNG (seed 0 is replaced by a fixed non-zero constant). Call
 * check first: init only clamps what would be unsafe. Errors: WLM_ERR_INVALID_ARG (NULL,
 * vocab_size < 1), WLM_ERR_NOMEM (the sampler is then freed).
 */
int wlm_sampler_init(wlm_sampler *s, int32_t vocab_size, const wlm_gen_params *p);

/* Gives s a grammar: the compiled grammar g and the parse state m (m borrows g), both owned
 * by s from now on (either may be NULL: no grammar). Any previous grammar is freed. */
void wlm_sampler_set_grammar(wlm_sampler *s, wlm_gram *g, wlm_gram_matcher *m);

/*
 * Lazy grammars (grammar_lazy.c; the rules are in wasmlm.h, "Lazy grammars").
 * wlm_grammar_lazy_check validates p's grammar_lazy, n_grammar_triggers and triggers (token ids
 * in 0..vocab_size-1), and the arming fields likewise: WLM_ERR_INVALID_ARG with a message in
 * err. wlm_sampler_set_lazy makes s's grammar (set first with wlm_sampler_set_grammar) dormant
 * until one of p's triggers (copied, with the arms and disarms) while armed; it does nothing
 * when p->grammar_lazy is 0. Errors: WLM_ERR_NOMEM.
 * wlm_sampler_accept advances s over the token it sampled: the active grammar's parse over t
 * (its status: WLM_ERR_INVALID_ARG if refused), or, while dormant, the trigger search over
 * piece (len bytes, the token's text), which may wake the grammar (WLM_OK either way; NOMEM).
 * wlm_sampler_grammar_active: 1 when s has a grammar that constrains now.
 */
int wlm_grammar_lazy_check(const wlm_gen_params *p, int32_t vocab_size, char *err, size_t errlen);
int wlm_sampler_set_lazy(wlm_sampler *s, const wlm_gen_params *p);
int wlm_sampler_accept(wlm_sampler *s, int32_t t, const char *piece, size_t len);
int wlm_sampler_grammar_active(const wlm_sampler *s);

/* Frees the scratch and lists; safe on a zeroed struct, and twice. */
void wlm_sampler_free(wlm_sampler *s);

/*
 * Samples the next token from `logits` (vocab_size floats; not modified: copied into scratch).
 * history: the sequence so far (n_history ids, prompt included; NULL when 0), for the
 * penalties; ids outside the vocabulary are ignored. NaN logits count as -inf, +inf as FLT_MAX.
 * Fills info->prob, ->logprob, ->prob_sampled, ->n_probs and ->top[] as documented for wlm_token
 * (other fields untouched; info may be NULL). Returns the token id, WLM_ERR_INVALID_ARG when
 * bias and bans removed every token (or logits is NULL; with a grammar also when it allows no
 * token: then s->n_allowed is 0), WLM_ERR_STATE before init, the matcher's NOMEM / UNSUPPORTED.
 * With a grammar the parse state is not advanced (the caller accepts the token).
 */
int32_t wlm_sampler_sample(wlm_sampler *s, const float *logits, const int32_t *history,
                           int32_t n_history, wlm_token *info);

/*
 * The distribution wlm_sampler_sample would draw the next token from, written densely: out
 * (vocab_size floats, may be NULL) receives q(t) for every token — the chain's stages 1-9 as
 * above (penalties over `history`, bias, bans, filters, temperature), zero for tokens a filter
 * removed, one-hot at the argmax for greedy. Without filters q is the full softmax; with them,
 * each survivor's weight over the survivors' sum (the same floats the draw walks). The RNG is
 * left where it was and the grammar is ignored (speculative decoding refuses grammars). For
 * speculative decoding's rejection rule (runtime/speculative.c). Returns the token greedy
 * decoding picks (temperature 0) or the token one draw of the chain would pick (any other
 * temperature; not a sample: the coin is put back), or a negative status as
 * wlm_sampler_sample.
 */
int32_t wlm_sampler_distribution(wlm_sampler *s, const float *logits, const int32_t *history,
                                 int32_t n_history, float *out);

/* llama2.c's RNG: xorshift64* (Marsaglia 2003; Vigna's multiplier) returning the high 32 bits,
 * and a float in [0, 1) built from its top 24 bits. */
uint32_t wlm_rng_u32(uint64_t *state);
float wlm_rng_f32(uint64_t *state);

/* Index of the largest value; the first on ties. */
int32_t wlm_argmax(const float *x, int32_t n);

#endif
