/*
 * sampler.h — internal: turns logits into the next token id. Stages, in order: repetition
 * penalty (CTRL) over a window of past tokens → greedy argmax when temperature is 0, else
 * temperature → softmax → top-k → top-p (nucleus) → draw with llama2.c's xorshift RNG.
 * With top_k off and no penalty the arithmetic and the RNG draws are exactly run.c's sample(),
 * so a seed reproduces run.c's output.
 */
#ifndef WASMLM_SAMPLER_H
#define WASMLM_SAMPLER_H

#include <stdint.h>
#include "wasmlm.h"

typedef struct wlm_prob_index {
    float prob;
    int32_t index;
} wlm_prob_index;

typedef struct wlm_sampler {
    int32_t vocab_size;
    float temperature;
    int32_t top_k;
    float top_p;
    float repeat_penalty;
    int32_t repeat_last_n;
    uint64_t rng_state;
    wlm_prob_index *candidates; /* (vocab_size) scratch */
    float *probs;               /* (vocab_size) scratch */
    unsigned char *seen;        /* (vocab_size) scratch for the penalty window */
} wlm_sampler;

/* Validates the sampling fields of `p` (temperature, top_k, top_p, repeat_penalty,
 * repeat_last_n); on error returns WLM_ERR_INVALID_ARG with a message in err. */
int wlm_sampler_check(const wlm_gen_params *p, char *err, size_t errlen);

/* Allocates the scratch for vocab_size tokens (once) and sets parameters and seed. */
int wlm_sampler_init(wlm_sampler *s, int32_t vocab_size, const wlm_gen_params *p);
void wlm_sampler_free(wlm_sampler *s);

/*
 * Samples from `logits` (vocab_size values; the repetition penalty is applied in place).
 * `history` holds the sequence so far (n_history ids); the last repeat_last_n are penalised,
 * each distinct token once. Writes the model probability (softmax at temperature 1 after the
 * penalty) to *prob and the sampling probability to *prob_sampled (either may be NULL).
 */
int32_t wlm_sampler_sample(wlm_sampler *s, float *logits, const int32_t *history,
                           int32_t n_history, float *prob, float *prob_sampled);

/* llama2.c's RNG: xorshift64* (Marsaglia 2003; Vigna's multiplier) returning the high 32 bits,
 * and a float in [0, 1) built from its top 24 bits. */
uint32_t wlm_rng_u32(uint64_t *state);
float wlm_rng_f32(uint64_t *state);

/* Index of the largest value; the first on ties. */
int32_t wlm_argmax(const float *x, int32_t n);

#endif
