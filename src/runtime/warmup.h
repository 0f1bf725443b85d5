/*
 * warmup.h — a throw-away generation on a tiny built-in model, run once by the web worker while
 * the real model downloads (wlmjs_warmup in src/wasm_exports.c), so that the code the first
 * real generation needs is compiled before the user waits for it. Internal.
 */
#ifndef WASMLM_WARMUP_H
#define WASMLM_WARMUP_H

#include <stdint.h>

/*
 * Builds a llama2.c checkpoint (dim 64, hidden 172, 1 layer, 8 heads, 4 KV heads: stories260K's
 * shapes, small made-up weights) and a byte-level tokenizer.bin for it in memory, loads them with
 * wlm_model_load / wlm_model_load_tokenizer, and generates `n_tokens` tokens (1..8) from a short
 * prompt through wlm_generate_begin_text / wlm_generate_next with the page's sampler defaults
 * (top-p 0.9, ten alternatives per token), in an F16 KV cache: every function the first
 * generation of a model calls is thereby called once. Everything it allocates is freed before
 * it returns; it has no other effect.
 * Returns the number of tokens generated (n_tokens on success) or a negative status (WLM_ERR_*).
 */
int32_t wlm_warmup_run(int32_t n_tokens);

#endif
