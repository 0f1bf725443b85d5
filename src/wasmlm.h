/*
 * wasmlm.h — the only public header of wasmlm, a Llama-family inference runtime for
 * WebAssembly (and native builds, for tests and tooling).
 *
 * Usage, start to finish (error checks shortened):
 *
 *     wlm_model *model = NULL;
 *     int rc = wlm_model_load(file_bytes, file_size, 0, &model);     // weights: views, no copy
 *     if (rc == WLM_OK) rc = wlm_model_load_tokenizer(model, tok_bytes, tok_size);
 *     if (rc != WLM_OK) { fprintf(stderr, "%s\n", wlm_model_errmsg(model)); ... }
 *
 *     wlm_context_params cp; wlm_context_params_default(&cp);
 *     wlm_context *ctx = NULL;
 *     rc = wlm_context_new(model, &cp, &ctx);                         // owns the KV cache
 *
 *     wlm_gen_params gp; wlm_gen_params_default(&gp);
 *     gp.temperature = 0.8f; gp.top_p = 0.9f; gp.seed = 42;
 *     rc = wlm_generate_begin_text(ctx, "Once upon a time", &gp);     // tokenize + prefill
 *     wlm_token tok;
 *     while ((rc = wlm_generate_next(ctx, &tok)) == WLM_OK)           // one decode step each
 *         fwrite(tok.piece, 1, tok.piece_len, stdout);
 *     // rc == WLM_DONE: tok.stop_reason says why (WLM_STOP_EOS, WLM_STOP_MAX_TOKENS, ...)
 *
 *     wlm_context_free(ctx);
 *     wlm_model_free(model);
 *     free(file_bytes);                                              // after the model, not before
 *
 * Contracts that hold for every function below:
 * - Status codes: WLM_OK (0) is success, WLM_DONE (1) ends a generation, negative values are
 *   errors (enum wlm_status). After an error the handle keeps a human-readable message,
 *   wlm_model_errmsg() / wlm_context_errmsg(), valid until the next call on that handle.
 * - No function aborts, exits or asserts on user input: a truncated or corrupt file, a mismatched
 *   tokenizer, out-of-range parameters or a full context return an error and leave the handle
 *   usable (a context in error can begin a new generation).
 * - Handles: a model is immutable once its tokenizer is loaded and may be shared by any number
 *   of contexts; a context owns the KV cache, scratch buffers, sampler state, RNG and its last
 *   error. Nothing is global: two models or contexts never interfere. `_free(NULL)` is a no-op.
 * - Not thread-safe per handle: one context is used by one thread at a time.
 *
 * Algorithms and their sources:
 * - The transformer is Llama 2 (Touvron et al. 2023, arXiv:2307.09288): RMSNorm (Zhang &
 *   Sennrich 2019), rotary position embeddings in the interleaved-pair form of llama2.c /
 *   Meta's reference (Su et al. 2021, arXiv:2104.09864), grouped-query attention (Ainslie et al.
 *   2023, arXiv:2305.13245), SwiGLU feed-forward (Shazeer 2020, arXiv:2002.05202).
 * - File formats: llama2.c's legacy (version 0) checkpoint and tokenizer.bin, as written by
 *   karpathy/llama2.c export.py / tokenizer.py and read by run.c.
 * - Tokenizer: SentencePiece BPE (Kudo & Richardson 2018) as llama2.c's run.c implements it.
 * - Sampling: temperature, top-k (Fan et al. 2018), top-p / nucleus (Holtzman et al. 2019),
 *   the CTRL repetition penalty (Keskar et al. 2019), and llama2.c's xorshift RNG (Marsaglia
 *   2003) with its float draw, so that temperature + top-p with a seed reproduce run.c exactly.
 */
#ifndef WASMLM_H
#define WASMLM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------ */
/* Status codes                                                                                */

enum wlm_status {
    WLM_OK = 0,                  /* success */
    WLM_DONE = 1,                /* wlm_generate_next: the generation has ended (see stop_reason) */
    WLM_ERR_INVALID_ARG = -1,    /* NULL pointer, out-of-range parameter, bad token id */
    WLM_ERR_NOMEM = -2,          /* an allocation failed */
    WLM_ERR_FORMAT = -3,         /* the bytes are not a model / tokenizer this library reads */
    WLM_ERR_TRUNCATED = -4,      /* the file ends before the data its header announces */
    WLM_ERR_UNSUPPORTED = -5,    /* a valid file using something not implemented (yet) */
    WLM_ERR_TOKENIZER = -6,      /* no tokenizer loaded, or it does not match the model */
    WLM_ERR_CONTEXT_FULL = -7,   /* the prompt does not fit in the context window */
    WLM_ERR_STATE = -8           /* call out of order (e.g. next without begin) */
};

/* The enum name of a status code ("WLM_ERR_FORMAT"); a static string, never NULL. */
const char *wlm_status_name(int status);

/* Why a generation ended; reported in wlm_token.stop_reason with WLM_DONE. */
enum wlm_stop_reason {
    WLM_STOP_NONE = 0,           /* still generating */
    WLM_STOP_MAX_TOKENS = 1,     /* gen_params.max_tokens new tokens were produced */
    WLM_STOP_EOS = 2,            /* the model sampled EOS (or BOS, as llama2.c's run.c stops) */
    WLM_STOP_STRING = 3,         /* the text produced one of gen_params.stop (not emitted) */
    WLM_STOP_CONTEXT_FULL = 4,   /* the sequence reached the context length n_ctx */
    WLM_STOP_ABORTED = 5         /* wlm_generate_abort() was called */
};

/* The enum name of a stop reason ("WLM_STOP_EOS"); a static string, never NULL. */
const char *wlm_stop_reason_name(int reason);

/* ------------------------------------------------------------------------------------------ */
/* Model                                                                                       */

typedef struct wlm_model wlm_model;

/* Flags for wlm_model_load. */
#define WLM_LOAD_OWN_BUFFER 1u   /* the model takes ownership of `data` and free()s it */
#define WLM_LOAD_VOCAB_ONLY 2u   /* GGUF only: load the vocabulary alone (no weights, any
                                    architecture), e.g. llama.cpp's ggml-vocab-*.gguf files.
                                    Tokenize / wlm_token_piece / wlm_model_get_info work
                                    (info: vocab_size, has_tokenizer, bos/eos; other sizes 0).
                                    Without weights nothing can be evaluated:
                                    wlm_context_new gives WLM_ERR_STATE. A llama2.c file gives
                                    WLM_ERR_UNSUPPORTED. */

/*
 * Loads a model from a memory buffer (in wasm: bytes already placed in linear memory).
 *
 * Format (detected from the bytes): llama2.c legacy checkpoint — seven little-endian int32
 * (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len; a negative vocab_size
 * means a separate classifier follows) then float32 arrays in run.c's order: token embedding
 * (vocab, dim), rms_att (layer, dim), wq (layer, dim, dim), wk (layer, kv_dim, dim), wv (layer,
 * kv_dim, dim), wo (layer, dim, dim), rms_ffn (layer, dim), w1 (layer, hidden, dim), w2 (layer,
 * dim, hidden), w3 (layer, hidden, dim), rms_final (dim), two legacy RoPE tables (seq_len,
 * head_size/2) each, then wcls (vocab, dim) if separate.
 *
 * Or GGUF v2/v3 (magic "GGUF"), general.architecture "llama": hyperparameters from the llama.*
 * keys (context_length, embedding_length, block_count, feed_forward_length,
 * attention.head_count, attention.head_count_kv, rope.freq_base, rope.dimension_count (must
 * equal the head size), attention.layer_norm_rms_epsilon), llama.cpp's tensor names
 * (token_embd, blk.N.attn_norm / attn_q / attn_k / attn_v / attn_output / ffn_norm / ffn_gate /
 * ffn_up / ffn_down, output_norm, output — absent: the embedding is the classifier), weights
 * of any supported type (F32, F16, quantized blocks) used in place. When the file holds a
 * vocabulary (tokenizer.ggml.*), the tokenizer is loaded with it and wlm_model_load_tokenizer
 * is not needed (it returns WLM_ERR_STATE). Other architectures, types, MoE or RoPE scaling:
 * WLM_ERR_UNSUPPORTED with a message naming the architecture, tensor and type.
 *
 * `data` must be 4-byte aligned (malloc'd memory is), else WLM_ERR_INVALID_ARG.
 * The weights are views into `data`: the buffer must stay alive and unchanged until
 * wlm_model_free(), which also frees it when `flags` has WLM_LOAD_OWN_BUFFER (the buffer must
 * then come from malloc; with ownership it is freed on failure too).
 *
 * *out receives a handle even on failure (unless allocation of the handle itself fails, then
 * NULL), so that wlm_model_errmsg() can say what went wrong; free it either way.
 * Errors: WLM_ERR_INVALID_ARG, WLM_ERR_FORMAT (implausible header), WLM_ERR_TRUNCATED (file
 * shorter than the header implies; the message gives both sizes), WLM_ERR_UNSUPPORTED, NOMEM.
 */
int wlm_model_load(const void *data, size_t size, unsigned flags, wlm_model **out);

/*
 * Loads llama2.c's tokenizer.bin format into a loaded model: int32 max_token_length, then for
 * each of the model's vocab_size tokens: float32 score, int32 length, `length` bytes. The bytes
 * are copied; `data` may be freed after the call.
 * Errors: WLM_ERR_TRUNCATED when the file holds fewer tokens than the model's vocabulary,
 * WLM_ERR_TOKENIZER when it holds more (a tokenizer for another model), WLM_ERR_FORMAT for
 * negative or oversized lengths, WLM_ERR_STATE if a tokenizer is already loaded or the model
 * failed to load. On error the model stays as it was.
 */
int wlm_model_load_tokenizer(wlm_model *model, const void *data, size_t size);

/* Frees the model (and its buffer when loaded with WLM_LOAD_OWN_BUFFER). NULL is a no-op.
 * Every context created from it must be freed first. */
void wlm_model_free(wlm_model *model);

/* The last error message of this model handle ("" when none); valid until the next call. */
const char *wlm_model_errmsg(const wlm_model *model);

/* Hyperparameters of a loaded model. */
typedef struct wlm_model_info {
    int32_t dim;          /* embedding width */
    int32_t hidden_dim;   /* feed-forward width */
    int32_t n_layers;
    int32_t n_heads;      /* query heads */
    int32_t n_kv_heads;   /* key/value heads (GQA when < n_heads) */
    int32_t vocab_size;
    int32_t seq_len;      /* maximum context the model was trained for */
    int32_t shared_classifier; /* 1: the output layer reuses the token embedding */
    int32_t has_tokenizer;
    int32_t bos_id, eos_id;
    size_t weight_bytes;  /* bytes of weights read per token (all matrices and vectors) */
} wlm_model_info;

/* Fills *info. Errors: WLM_ERR_INVALID_ARG, WLM_ERR_STATE (model did not load). */
int wlm_model_get_info(const wlm_model *model, wlm_model_info *info);

/* ------------------------------------------------------------------------------------------ */
/* Tokenizer (needs wlm_model_load_tokenizer)                                                  */

/*
 * Encodes UTF-8 `text` (len bytes, need not be NUL-terminated) into token ids. Two algorithms,
 * chosen by where the vocabulary came from:
 * - llama2.c tokenizer.bin: run.c's encode(): optional BOS, SentencePiece's dummy-prefix space
 *   for non-empty text, each UTF-8 character looked up (unknown ones become byte tokens <0xNN>),
 *   then the best-scoring adjacent pair is merged repeatedly while the merge is in the
 *   vocabulary (leftmost on ties).
 * - GGUF, tokenizer.ggml.model "llama": llama.cpp's SentencePiece BPE (llm_tokenizer_spm):
 *   spaces escaped as U+2581, a dummy prefix when add_space_prefix, user-defined tokens split
 *   out first, merges by score through a priority queue, byte fallback. add_bos means llama.cpp's
 *   add_special: BOS when the file's add_bos_token says so (default yes), EOS when add_eos_token.
 *   Special tokens written in the text are not parsed (they are plain text).
 * Writes at most `cap` ids to `tokens`; returns the number of tokens the text needs (>= 0,
 * may exceed cap: call again with a larger buffer) or a negative status.
 */
int32_t wlm_tokenize(const wlm_model *model, const char *text, size_t len, int add_bos,
                     int32_t *tokens, int32_t cap);

/*
 * The bytes that token `token` adds to text when it follows token `prev` (-1 if none):
 * the vocabulary piece (GGUF: with U+2581 turned back into spaces), with the leading space
 * removed after BOS (run.c's rule), <0xNN> pieces turned into the single raw byte, and control
 * tokens of a GGUF vocabulary decoding to nothing. Returns a pointer owned by the model (valid
 * until wlm_model_free), NUL-terminated, and sets *len (which counts a <0x00> piece's NUL
 * byte); NULL for an out-of-range id or a model without tokenizer.
 */
const char *wlm_token_piece(const wlm_model *model, int32_t prev, int32_t token, size_t *len);

/* ------------------------------------------------------------------------------------------ */
/* Context: KV cache and evaluation                                                            */

typedef struct wlm_context wlm_context;

typedef struct wlm_context_params {
    int32_t n_ctx;        /* context length in tokens; 0 = the model's seq_len (default) */
    int32_t kv_cache;     /* 1 (default): keep K/V per position. 0: recompute the whole
                             sequence at every step (a baseline for benchmarks, O(n^2)) */
    int32_t use_simd;     /* 1 (default): SIMD128 kernels where built; 0: scalar reference */
} wlm_context_params;

void wlm_context_params_default(wlm_context_params *params);

/*
 * Creates a context for `model`: allocates the KV cache once, 2 × n_layers × n_ctx × kv_dim
 * float32 (kv_dim = dim × n_kv_heads / n_heads), and the activation buffers.
 * *out receives a handle even on failure when possible (read wlm_context_errmsg, then free).
 * Errors: WLM_ERR_INVALID_ARG (n_ctx < 0 or > seq_len), WLM_ERR_STATE (model not loaded),
 * WLM_ERR_NOMEM.
 */
int wlm_context_new(const wlm_model *model, const wlm_context_params *params,
                    wlm_context **out);

void wlm_context_free(wlm_context *ctx);                /* NULL is a no-op */
const char *wlm_context_errmsg(const wlm_context *ctx); /* "" when none */

/* Bytes the context allocated (KV cache + scratch). */
size_t wlm_context_memory(const wlm_context *ctx);

/* Forgets the sequence (position 0 next); ends any generation in progress. */
void wlm_context_reset(wlm_context *ctx);

/* Number of tokens currently in the sequence (the next position). */
int32_t wlm_context_n_past(const wlm_context *ctx);

/*
 * Appends `n` tokens to the sequence (positions n_past .. n_past+n-1), running the forward pass
 * for each, and computes the logits of the last one (prefill when n > 1, decode when n == 1).
 * Errors: WLM_ERR_INVALID_ARG (bad id, n < 1), WLM_ERR_CONTEXT_FULL (n_past + n > n_ctx; nothing
 * is evaluated).
 */
int wlm_eval(wlm_context *ctx, const int32_t *tokens, int32_t n);

/* The logits after the last wlm_eval: vocab_size float32, owned by the context, valid until the
 * next call that evaluates or resets. NULL before any evaluation. During a generation,
 * wlm_generate_next applies the repetition penalty to them in place before sampling. */
const float *wlm_logits(const wlm_context *ctx);

/* ------------------------------------------------------------------------------------------ */
/* Generation                                                                                  */

#define WLM_MAX_STOP_STRINGS 8
#define WLM_MAX_STOP_LEN 64

typedef struct wlm_gen_params {
    float temperature;       /* 0 = greedy (argmax); > 0 divides the logits. Default 1.0 */
    int32_t top_k;           /* keep the k most probable tokens; 0 = off (default) */
    float top_p;             /* nucleus: keep the smallest set whose probability exceeds p,
                                including the token that crosses it; 1 = off. Default 0.9 */
    float repeat_penalty;    /* CTRL penalty over the last repeat_last_n tokens: positive
                                logits / penalty, negative × penalty; 1 = off (default) */
    int32_t repeat_last_n;   /* window of the penalty, in tokens (prompt included); default 64 */
    uint64_t seed;           /* RNG seed; 0 is replaced by a fixed non-zero constant */
    int32_t max_tokens;      /* new tokens to produce at most; 0 = until the context is full.
                                Default 256 */
    int32_t add_bos;         /* wlm_generate_begin_text: prepend BOS (default 1) */
    int32_t n_stop;          /* number of stop strings used from `stop` (<= 8) */
    char stop[WLM_MAX_STOP_STRINGS][WLM_MAX_STOP_LEN]; /* NUL-terminated, each < 64 bytes */
} wlm_gen_params;

/* Defaults as commented above (run.c's: temperature 1.0, top-p 0.9). */
void wlm_gen_params_default(wlm_gen_params *params);

/* One step of a generation. */
typedef struct wlm_token {
    int32_t id;              /* the sampled token id (-1 with WLM_DONE) */
    const char *piece;       /* text released at this step (UTF-8 bytes, possibly partial
                                characters; may be empty while a stop string is pending, and
                                may include text held back earlier). Owned by the context,
                                valid until the next call on it. */
    size_t piece_len;
    float prob;              /* the model's probability of `id`: softmax of the logits after
                                the repetition penalty, at temperature 1, before any filter */
    float prob_sampled;      /* the probability with which the sampler drew it, after
                                temperature, top-k and top-p (1 for greedy) */
    int32_t n_past;          /* length of the sequence including this token (prompt + tokens
                                emitted so far); the token itself is evaluated by the next
                                step, so this can reach n_ctx + 1 when the last one is emitted */
    int32_t stop_reason;     /* enum wlm_stop_reason; set with WLM_DONE */
} wlm_token;

/*
 * Starts a generation: resets the context, evaluates the prompt tokens (prefill) and prepares
 * the sampler. `tokens` (n >= 1 ids; the caller decides about BOS) are copied.
 * Errors: WLM_ERR_INVALID_ARG (parameters out of range: temperature < 0 or NaN, top_p outside
 * (0, 1], top_k < 0, repeat_penalty <= 0, repeat_last_n < 0, max_tokens < 0, n_stop outside
 * 0..8, unterminated stop string), WLM_ERR_CONTEXT_FULL (prompt longer than n_ctx).
 */
int wlm_generate_begin(wlm_context *ctx, const int32_t *tokens, int32_t n,
                       const wlm_gen_params *params);

/* Tokenizes `prompt` (BOS per params->add_bos) and calls wlm_generate_begin. An empty prompt
 * without BOS is WLM_ERR_INVALID_ARG. */
int wlm_generate_begin_text(wlm_context *ctx, const char *prompt, const wlm_gen_params *params);

/*
 * Produces the next token: evaluates the previously emitted token (decode), samples, and
 * checks the stop conditions. Returns WLM_OK with *out filled, or WLM_DONE with
 * out->stop_reason (the token that triggered EOS or a stop string is not emitted; text held
 * back for a stop string that did not complete is released in out->piece). After WLM_DONE,
 * further calls keep returning WLM_DONE. Errors: WLM_ERR_STATE (no generation begun).
 */
int wlm_generate_next(wlm_context *ctx, wlm_token *out);

/* Ends the generation in progress: the next wlm_generate_next returns WLM_DONE with
 * WLM_STOP_ABORTED. */
void wlm_generate_abort(wlm_context *ctx);

#ifdef __cplusplus
}
#endif
#endif /* WASMLM_H */
