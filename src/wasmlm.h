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
 * - Not thread-safe per handle: one context is used by one thread at a time (a context may
 *   itself split its matrix products over a wlm_threadpool).
 *
 * Algorithms and their sources:
 * - The transformer is Llama 2 (Touvron et al. 2023, arXiv:2307.09288): RMSNorm (Zhang &
 *   Sennrich 2019), rotary position embeddings in the interleaved-pair form of llama2.c /
 *   Meta's reference (Su et al. 2021, arXiv:2104.09864), grouped-query attention (Ainslie et al.
 *   2023, arXiv:2305.13245), SwiGLU feed-forward (Shazeer 2020, arXiv:2002.05202).
 * - File formats: llama2.c's legacy (version 0) checkpoint and tokenizer.bin, as written by
 *   karpathy/llama2.c export.py / tokenizer.py and read by run.c.
 * - Tokenizer: SentencePiece BPE (Kudo & Richardson 2018) as llama2.c's run.c implements it.
 * - Sampling (see wlm_gen_params): temperature, top-k (Fan et al. 2018), typical-p (Meister et
 *   al. 2022), top-p / nucleus (Holtzman et al. 2019), min-p (Nguyen et al. 2024), the CTRL
 *   repetition penalty (Keskar et al. 2019), OpenAI's presence and frequency penalties, logit
 *   bias and bans, in llama.cpp's order or run.c's; llama2.c's xorshift RNG (Marsaglia 2003)
 *   with its float draw, so that temperature + top-p with a seed reproduce run.c exactly.
 * - Speculative decoding with a draft model or prompt lookup, greedy and with the rejection
 *   rule that keeps the target's distribution (Leviathan et al. 2023; Chen et al. 2023).
 * - Batches, beams, KV cache: paged KV blocks shared copy-on-write (Kwon et al. 2023), beam
 *   search with length normalisation (as Hugging Face transformers), context shift with RoPE
 *   re-rotation (as llama.cpp).
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
#define WLM_LOAD_TENSORS_EXTERNAL 4u /* GGUF only: the weight matrices live elsewhere (another
                                    backend's memory: js/backend/webgpu/ streams them to the
                                    GPU). `data` is the file's header followed, in place of its
                                    data section, by the "resident area": every one-row tensor
                                    (ne[1..3] all 1: norms, biases, RoPE factors; the exact rule
                                    is src/formats/gguf.h's, which adds conv kernels, expert
                                    biases and Gemma 4's per_layer_token_embd, whose rows the
                                    host gathers) in tensor-info
                                    order, each at the next multiple of general.alignment, the
                                    first where the data section starts; it may hold zeros until
                                    wlm_model_commit_external(). What needs no weights works
                                    after the load (tokenizer, metadata, info,
                                    wlm_model_describe); wlm_context_new refuses
                                    (WLM_ERR_STATE) until the commit, and then any context but a
                                    deferred one (kv_cache 2: the forward pass runs elsewhere),
                                    so the CPU never reads a matrix. */

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
 * Or GGUF v2/v3 (magic "GGUF"), general.architecture one of "llama", "qwen2", "qwen3",
 * "gemma3", "phi3", "gpt2" (src/model/arch.c says how each differs; each computes what
 * llama.cpp computes for it): hyperparameters from the <arch>.* keys (context_length,
 * embedding_length, block_count, feed_forward_length, attention.head_count,
 * attention.head_count_kv, attention.key_length / value_length, rope.freq_base,
 * rope.dimension_count, rope.scaling.*, attention.layer_norm_rms_epsilon or
 * layer_norm_epsilon, attention.sliding_window, ...), llama.cpp's tensor names (token_embd,
 * blk.N.attn_norm / attn_q / attn_k / attn_v or attn_qkv / attn_output / ffn_norm / ffn_gate /
 * ffn_up / ffn_down and the architecture's biases and extra norms, output_norm, output —
 * absent: the embedding is the classifier), weights of any supported type (F32, F16,
 * quantized blocks) used in place. When the file holds a vocabulary (tokenizer.ggml.*), the
 * tokenizer is loaded with it and wlm_model_load_tokenizer is not needed (it returns
 * WLM_ERR_STATE). A missing or misshapen tensor or key: WLM_ERR_FORMAT naming it. Other
 * architectures, types, MoE or RoPE scaling types: WLM_ERR_UNSUPPORTED with a message naming
 * the architecture, tensor and type.
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
 * For a model loaded with WLM_LOAD_TENSORS_EXTERNAL, once its resident area (see there) holds
 * the file's vectors: maps them (F16 ones converted to F32) and checks them (finite values,
 * positive RoPE factors). Errors: WLM_ERR_STATE (not such a model, or committed already),
 * WLM_ERR_FORMAT / WLM_ERR_UNSUPPORTED naming the tensor, WLM_ERR_NOMEM; after an error the
 * model can only be freed.
 */
int wlm_model_commit_external(wlm_model *model);

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
    int32_t has_chat_template; /* 1: the GGUF file has tokenizer.chat_template (see
                                  wlm_model_meta_string) */
    size_t weight_bytes;  /* bytes of weights read per token (all matrices and vectors; of a
                             mixture of experts, the router and the k chosen experts' matrices) */
    int32_t n_attn_layers; /* layers with a KV cache: n_layers, or fewer in a hybrid (Qwen3.5,
                              LFM2), whose other layers are recurrent */
    size_t state_bytes;   /* a hybrid's recurrent state per sequence (conv rows, DeltaNet
                              matrices), whatever the context length; 0 for a transformer */
    int32_t n_expert;      /* a mixture of experts' experts per MoE layer (0: none) */
    int32_t n_expert_used; /* and how many each token uses (k) */
} wlm_model_info;

/* Fills *info. Errors: WLM_ERR_INVALID_ARG, WLM_ERR_STATE (model did not load). */
int wlm_model_get_info(const wlm_model *model, wlm_model_info *info);

/* ------------------------------------------------------------------------------------------ */
/* Tokenizer (a GGUF vocabulary, or wlm_model_load_tokenizer)                                  */

/*
 * Encodes UTF-8 `text` (len bytes, need not be NUL-terminated) into token ids. The algorithm is
 * chosen by where the vocabulary came from (byte-level BPE, tokenizer.ggml.model "gpt2": see
 * wlm_tokenize_ex):
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

/* Flags for wlm_tokenize_ex. */
#define WLM_TOKENIZE_ADD_SPECIAL 1u   /* what wlm_tokenize's add_bos does: BOS (GGUF: when the
                                         vocabulary's add_bos_token says so; and EOS when its
                                         add_eos_token does), llama.cpp's add_special */
#define WLM_TOKENIZE_PARSE_SPECIAL 2u /* control tokens written in the text ("<|im_start|>",
                                         "<|eot_id|>", "<s>") become their ids, llama.cpp's
                                         parse_special. Without it they are plain text.
                                         User-defined tokens are split out either way. */

/*
 * wlm_tokenize with flags (WLM_TOKENIZE_*; other bits: WLM_ERR_INVALID_ARG). A third algorithm:
 * - GGUF, tokenizer.ggml.model "gpt2": byte-level BPE as llama.cpp's llm_tokenizer_bpe (GPT-2,
 *   Llama 3, Qwen 2, SmolLM, StarCoder, Falcon, DeepSeek...): the pre-tokenizer named by
 *   tokenizer.ggml.pre cuts the text with that model's regexes (absent: llama.cpp's "default";
 *   unknown names fail at load), each piece's bytes are written as GPT-2's printable stand-ins
 *   (bytes_to_unicode), and adjacent symbols merge lowest rank first (rank = position in
 *   tokenizer.ggml.merges). Llama 3-style vocabularies take a piece that is a whole token as is
 *   (llama.cpp's ignore_merges). Invalid UTF-8 is read as U+FFFD, as llama.cpp does.
 * Returns the count needed (may exceed cap) or a negative status (WLM_ERR_UNSUPPORTED when a
 * pre-tokenizer regex exceeds its step budget on adversarial input: thousands of backtracking
 * positions, e.g. deepseek-llm's \s+$ over a long run of spaces).
 */
int32_t wlm_tokenize_ex(const wlm_model *model, const char *text, size_t len, unsigned flags,
                        int32_t *tokens, int32_t cap);

/*
 * 1 when `token` ends a generation, else 0 (also for bad ids or no tokenizer): llama.cpp's
 * end-of-generation set — EOS, EOT, EOM (tokenizer.ggml.*_token_id, or found by their pieces),
 * the FIM pad / repo / file-separator tokens, and the pieces that close a turn: <|eot_id|>,
 * <|im_end|>, <|end|>, <end_of_turn>, <|endoftext|>, <|eom_id|>, <|end_of_text|>, </s>, ...
 * For a llama2.c tokenizer.bin: EOS and BOS (run.c's rule). Generation (wlm_generate_*, beam
 * search) stops at any of them (and at BOS, run.c's rule).
 */
int wlm_token_is_eog(const wlm_model *model, int32_t token);

/*
 * The value of a GGUF metadata key of type STRING, e.g. "tokenizer.chat_template",
 * "general.name", "general.architecture" (the model copies every string key at load: the
 * pointer stays valid until wlm_model_free, NUL-terminated, *len set when len is not NULL).
 * NULL when the key is absent, not a string, or the model did not come from a GGUF file.
 */
const char *wlm_model_meta_string(const wlm_model *model, const char *key, size_t *len);

/*
 * The bytes that token `token` adds to text when it follows token `prev` (-1 if none):
 * the vocabulary piece (GGUF SPM: with U+2581 turned back into spaces, the leading space
 * removed after BOS as run.c's rule; byte-level BPE: GPT-2's stand-in characters mapped back to
 * their bytes, so one piece may be part of a UTF-8 character), <0xNN> pieces turned into the
 * single raw byte, user-defined tokens verbatim, and control / unknown / unused tokens of a
 * GGUF vocabulary decoding to nothing. Returns a pointer owned by the model (valid
 * until wlm_model_free), NUL-terminated, and sets *len (which counts a <0x00> piece's NUL
 * byte); NULL for an out-of-range id or a model without tokenizer.
 */
const char *wlm_token_piece(const wlm_model *model, int32_t prev, int32_t token, size_t *len);

/*
 * Token `token`'s vocabulary entry as the file writes it, control tokens included ("<s>",
 * "<|begin_of_text|>", "<|im_end|>"; byte-level BPE entries in GPT-2's printable stand-ins,
 * "Ġthe"): the text a chat template writes for a special token (bos_token, eos_token). Pointer
 * owned by the model, valid until wlm_model_free, NUL-terminated; *len set when len is not
 * NULL. NULL for an out-of-range id or a model without tokenizer.
 */
const char *wlm_token_text(const wlm_model *model, int32_t token, size_t *len);

/* ------------------------------------------------------------------------------------------ */
/* Context: KV cache and evaluation                                                            */

typedef struct wlm_context wlm_context;

typedef struct wlm_context_params {
    int32_t n_ctx;        /* context length in tokens; 0 = the model's seq_len (default) */
    int32_t kv_cache;     /* 1 (default): keep K/V per position. 0: recompute the whole
                             sequence at every step (a baseline for benchmarks, O(n^2)).
                             2: another backend keeps K/V and runs the forward pass (the
                             WebGPU backend of js/backend/webgpu/, through the wasm exports of
                             src/runtime/deferred.c): no KV memory here; wlm_generate_* then
                             waits for logits that backend supplies */
    int32_t use_simd;     /* 1 (default): SIMD128 kernels where built; 0: scalar reference */
    int32_t n_seq_max;    /* sequences that may exist at once (batched generation, beams):
                             1..WLM_MAX_SEQ, default 1. The KV cache of one full sequence is
                             allocated up front; more blocks are allocated when used. */
    int32_t kv_type;      /* element type of the KV cache: WLM_KV_F16 (default; half the
                             memory) or WLM_KV_F32 (exact: what llama2.c's run.c keeps) */
    int32_t dot_form;     /* the relaxed-SIMD build's int8 dot products (enum wlm_dot_form):
                             WLM_DOT_FUSED (default) or WLM_DOT_SPLIT; the same results, only
                             the speed differs by machine. Other builds check it and ignore it. */
    int32_t dot_form_batch; /* the same for the matrix-matrix products (prefill, batches,
                             beams), whose split form also keeps the level types' (Q4_0, Q4_1,
                             Q5_0, Q5_1) sums in int16: WLM_DOT_FUSED, WLM_DOT_SPLIT, or -1
                             (default): dot_form's. The same results either way. */
    int32_t read_ahead;   /* 1 (default): the quantized matrix-vector kernels (decode) touch
                             each row stream some blocks ahead of what they compute (wasm has no
                             prefetch instruction), which the Intel Xeon measured gained from;
                             0: they do not, faster on an AMD Zen 4 (2-16 %, bench/README.md
                             2026-11-28). The same results either way; wlm_context_set_read_ahead
                             changes it between calls. */
} wlm_context_params;

/* How the relaxed-SIMD build (dist/wasmlm-relaxed*.wasm) computes its int8 dot products.
 * WLM_DOT_FUSED: i32x4.relaxed_dot_i8x16_i7x16_add_s, one instruction where the CPU has an int8
 * dot (x64 with AVX-VNNI: Intel from Alder Lake, AMD from Zen 5; arm64 with sdot: every Apple M
 * chip) but 5-6 on other x64 CPUs. WLM_DOT_SPLIT: i16x8.relaxed_dot_i8x16_i7x16_s, then
 * i32x4.dot_i16x8_s by ones, then an add: 3 instructions everywhere. Which is faster depends on
 * the CPU and the engine's code generator: on an AMD Zen 4, split decodes 1.08-1.23x faster in
 * Chromium 156 and 0.86-0.90x as fast in Node 24. Bitwise the same results (bench/README.md,
 * issue 14). js/wasmlm.js picks the faster one at an engine's first load by timing both
 * (EngineOptions.dotForm 'auto'), for the matrix-vector kernels and apart from them for the
 * matrix-matrix ones (dot_form_batch: on that Zen 4 in Node 24 split batches run 1.1-1.34x
 * faster while fused decodes faster). */
enum wlm_dot_form {
    WLM_DOT_FUSED = 0,
    WLM_DOT_SPLIT = 1,
};

/* KV cache element types (the values are ggml's type ids). WLM_KV_F16 stores each key and value
 * as IEEE 754 binary16, rounded to nearest even (as llama.cpp's default F16 cache): magnitudes
 * above 65504 become infinite, and logits move by about 1e-3 relative to WLM_KV_F32. */
enum wlm_kv_type {
    WLM_KV_F32 = 0,
    WLM_KV_F16 = 1,
};

#define WLM_MAX_SEQ 64        /* sequences per context */
#define WLM_KV_BLOCK 16       /* positions per KV cache block */

void wlm_context_params_default(wlm_context_params *params);

/*
 * Creates a context for `model`. The KV cache is paged (as in vLLM's PagedAttention, Kwon et
 * al. 2023, arXiv:2309.06180): blocks of WLM_KV_BLOCK positions, each holding K and V of every
 * attention layer (2 × n_layers × WLM_KV_BLOCK × kv_dim elements of params->kv_type: 2 bytes for
 * F16, 4 for F32; kv_dim = dim × n_kv_heads / n_heads; a hybrid's recurrent layers have none;
 * Gemma 4's layers have their own kv_dim, and its KV-shared layers none).
 * Each sequence has a table of blocks; sequences forked from one another share the blocks of
 * their common prefix (reference-counted; a shared block is copied only when a sequence
 * writes into it). The blocks of one full sequence (n_ctx positions) are allocated here; more
 * are allocated when other sequences need them, and freed blocks are reused.
 * *out receives a handle even on failure when possible (read wlm_context_errmsg, then free).
 * Errors: WLM_ERR_INVALID_ARG (n_ctx < 0 or > seq_len, n_seq_max outside 1..WLM_MAX_SEQ,
 * kv_type not a wlm_kv_type),
 * WLM_ERR_STATE (model not loaded), WLM_ERR_NOMEM.
 */
int wlm_context_new(const wlm_model *model, const wlm_context_params *params,
                    wlm_context **out);

void wlm_context_free(wlm_context *ctx);                /* NULL is a no-op */
const char *wlm_context_errmsg(const wlm_context *ctx); /* "" when none */

/* Bytes the context has allocated now (KV cache blocks + scratch); grows when more sequences
 * are used (see wlm_kv_stats). */
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

/*
 * Appends n embedding rows (embd: n × n_embd floats, row-major; n_embd must be the model's dim)
 * to sequence `seq` in place of tokens: positions n_past .. n_past+n-1, each row taken as the
 * input of the first layer as it is (no token lookup, no Gemma sqrt(dim) scaling: llama.cpp's
 * embeddings input), and computes the logits of the last row. An image's rows from
 * wlm_image_encode go here, between the tokens around them. non_causal 1: the rows attend to
 * each other both ways (and to everything before them; a sliding-window layer looks back its
 * window from each row and forward to the image's end), as llama.cpp decodes a Gemma 3 image;
 * then n <= 64 (one batch). non_causal 0: causal like tokens (Idefics3 / SmolVLM, LFM2-VL; the
 * only kind a recurrent hybrid such as LFM2 takes). On an M-RoPE model (qwen2vl) the rows take
 * consecutive positions as text does; an image's 2-D positions come with wlm_eval_image. The sequence
 * records no token for these positions, so a later wlm_generate_begin's prompt-cache match stops
 * before them. The rows are read during the call only.
 * Errors: WLM_ERR_INVALID_ARG (NULL embd, n < 1, n_embd != dim, a non-finite value, bad seq),
 * WLM_ERR_UNSUPPORTED (an embedding model, a context without KV cache or deferred, non-causal
 * rows on a recurrent hybrid, a non-causal image over 64 rows), WLM_ERR_CONTEXT_FULL (nothing evaluated),
 * WLM_ERR_STATE (a generation in progress), WLM_ERR_NOMEM.
 */
int wlm_eval_embd(wlm_context *ctx, int32_t seq, const float *embd, int32_t n, int32_t n_embd,
                  int32_t non_causal);

/* The logits after the last wlm_eval: vocab_size float32, owned by the context, valid until the
 * next call that evaluates or resets. NULL before any evaluation. The sampler never modifies
 * them (penalties and filters work on a copy). */
const float *wlm_logits(const wlm_context *ctx);

/* ------------------------------------------------------------------------------------------ */
/* Sequences and batches                                                                       */
/*
 * A context holds up to n_seq_max sequences, numbered 0..n_seq_max-1; wlm_eval and the
 * single-sequence generation use sequence 0. wlm_context_reset clears them all.
 */

/*
 * Evaluates a batch of `n` tokens in one forward pass: entry i appends tokens[i] to sequence
 * seq_ids[i] (every entry to sequence 0 when seq_ids is NULL), at that sequence's next
 * position; entries of one sequence are taken in order, so a prompt is a batch of consecutive
 * positions. Every weight matrix is read once per call for
 * all entries (matrix-matrix products); each entry's arithmetic is the same as evaluating it
 * alone, so results are bitwise identical to one-at-a-time evaluation. Logits are computed for
 * the entries with want_logits[i] != 0 (want_logits NULL: the last entry only) and read with
 * wlm_logits_ith. Errors (nothing is evaluated): WLM_ERR_INVALID_ARG (bad id, seq outside
 * 0..n_seq_max-1, n < 1), WLM_ERR_CONTEXT_FULL (a sequence would pass n_ctx), WLM_ERR_NOMEM
 * (no memory for KV blocks), WLM_ERR_STATE (a generation or beam search is in progress).
 */
int wlm_eval_batch(wlm_context *ctx, const int32_t *tokens, const int32_t *seq_ids,
                   const uint8_t *want_logits, int32_t n);

/* Logits (vocab_size float32, owned by the context) of entry i of the last wlm_eval_batch (or
 * of the last token of wlm_eval, i = n - 1); NULL when entry i did not ask for logits. Valid
 * until the next evaluation. */
const float *wlm_logits_ith(const wlm_context *ctx, int32_t i);

/* Number of tokens in sequence `seq` (its next position); 0 for an empty or invalid one. */
int32_t wlm_seq_n_past(const wlm_context *ctx, int32_t seq);

/* Makes `dst` a copy of `src` (tokens and KV cache) without copying the cache: dst shares
 * src's blocks (copy-on-write). dst's previous content is dropped. Errors: INVALID_ARG, STATE. */
int wlm_seq_fork(wlm_context *ctx, int32_t src, int32_t dst);

/* Empties sequence `seq`, releasing its blocks. Errors: INVALID_ARG, STATE. */
int wlm_seq_clear(wlm_context *ctx, int32_t seq);

/* Keeps the first n tokens of sequence `seq` and forgets the rest (llama.cpp's
 * llama_memory_seq_rm(mem, seq, n, -1)): positions n.. are free to be evaluated again, blocks
 * past the last kept position are released (a kept block shared with another sequence is
 * copied on its next write). n >= the sequence's length changes nothing. Speculative decoding
 * drops rejected drafts this way. The logits of the last evaluation stay readable.
 * Errors: INVALID_ARG (seq, n < 0), STATE (a generation or beam search is in progress). */
int wlm_seq_truncate(wlm_context *ctx, int32_t seq, int32_t n);

/*
 * Context shift (llama.cpp's --keep / context shifting): keeps the first n_keep tokens of
 * sequence `seq`, drops the n_discard after them and moves the rest down by n_discard
 * positions. The moved keys are rotated by RoPE through -n_discard positions (rotations
 * compose: R(p - d) = R(-d) R(p)), so the cache stays valid without recomputation; the kept
 * entries still carry what the dropped tokens contributed to them in the deeper layers, as in
 * llama.cpp. The rotation uses the model's RoPE style (interleaved pairs or NEOX halves) and
 * each layer's frequencies (factors, scaling, a sliding-window layer's own base); in an F16
 * cache each moved key is widened, rotated in float32 and rounded back to binary16.
 * Errors: INVALID_ARG (n_keep < 0, n_discard < 1, n_keep + n_discard > n_past),
 * UNSUPPORTED (learned positions, as GPT-2's, are baked into K and V; sliding-window layers,
 * as Gemma 3's, would attend again to tokens that had left their window; an M-RoPE sequence
 * (qwen2vl) holding an image, whose rows turn by 2-D positions; the message says which),
 * STATE, NOMEM.
 */
int wlm_seq_shift(wlm_context *ctx, int32_t seq, int32_t n_keep, int32_t n_discard);

/* KV cache occupancy. */
typedef struct wlm_kv_stats {
    size_t block_bytes;       /* bytes of one block (all layers, K and V) */
    int32_t blocks_allocated; /* blocks in memory (in use + free for reuse) */
    int32_t blocks_used;      /* blocks referenced by at least one sequence */
    int32_t blocks_shared;    /* blocks referenced by two or more sequences */
    int32_t block_refs;       /* sum over sequences of their block-table lengths: the blocks
                                 that copies without sharing would need */
    /* hybrid models (Qwen3.5, LFM2): the recurrent layers' fixed-size state beside the cache */
    size_t state_bytes;       /* one sequence's recurrent state (conv rows, DeltaNet matrices),
                                 whatever its length; 0 for a plain transformer */
    int32_t states;           /* sequences holding a state now */
    size_t state_bytes_allocated; /* states and their snapshots in memory (bytes) */
} wlm_kv_stats;

/* Fills *out. Errors: WLM_ERR_INVALID_ARG. */
int wlm_kv_stats_get(const wlm_context *ctx, wlm_kv_stats *out);

/* ------------------------------------------------------------------------------------------ */
/* Generation                                                                                  */

#define WLM_MAX_STOP_STRINGS 8
#define WLM_MAX_STOP_LEN 64
#define WLM_MAX_PROBS 20          /* most alternatives reported per token (n_probs) */
#define WLM_MAX_LOGIT_BIAS 1024   /* most logit-bias / banned entries per generation */
#define WLM_MAX_GRAMMAR_TRIGGERS 8 /* most triggers of a lazy grammar (grammar_lazy) */
#define WLM_MAX_GRAMMAR_ARMS 4     /* most arming / disarming markers of a lazy grammar */

/* A trigger of a lazy grammar (wlm_gen_params.grammar_lazy): a token id, or a text. The same
 * form names the markers that arm and disarm its trigger search (grammar_arms, grammar_disarms). */
typedef struct wlm_grammar_trigger {
    int32_t token;                 /* a token id that wakes the grammar, or -1: `word` does */
    char word[WLM_MAX_STOP_LEN];   /* (token -1) NUL-terminated text, 1..63 bytes, that wakes
                                      the grammar where the generated text contains it */
} wlm_grammar_trigger;

/* Order of the sampler stages (see wlm_gen_params). */
enum wlm_sampler_order {
    WLM_ORDER_LLAMACPP = 0,      /* penalties → bias/bans → top-k → typical → top-p → min-p →
                                    temperature → draw (llama.cpp's default chain) */
    WLM_ORDER_RUNC = 1           /* penalties → bias/bans → temperature → top-k → typical →
                                    top-p → min-p → draw: llama2.c run.c's order (temperature
                                    before the nucleus); with top-p alone and a seed this
                                    reproduces run.c's tokens exactly */
};

typedef struct wlm_logit_bias {
    int32_t token;
    float bias;                  /* added to the logit; -INFINITY bans the token */
} wlm_logit_bias;

/*
 * Sampling chain. Stages run in the order of `order`; each is off at its neutral value.
 * z = logits, p = softmax(z) over the tokens still in the candidate set, renormalised after
 * every filter. Ties in probability resolve to the lower token id at every stage.
 *  1. repetition penalty (CTRL, Keskar et al. 2019, arXiv:1909.05858, as llama.cpp applies
 *     it): for each distinct token t among the last repeat_last_n tokens (prompt included),
 *     z_t = z_t / r if z_t > 0 else z_t × r.
 *  2. presence and frequency penalties (OpenAI API definitions, same window): with c_t the
 *     count of t in the window, z_t -= c_t × frequency_penalty + (c_t > 0) × presence_penalty.
 *  3. logit bias: z_t += bias_t for each logit_bias entry (entries for one token add up; a
 *     finite logit stays finite, clamped to ±FLT_MAX); banned tokens are removed (z_t = -inf).
 *     If every token is removed: WLM_ERR_INVALID_ARG at the step. NaN logits count as -inf.
 *  4. temperature 0: greedy, the argmax of z after 1–3 (stages 5–9 skipped).
 *  5. top-k (Fan et al. 2018): keep the k most probable.
 *  6. typical-p (locally typical sampling, Meister et al. 2022, arXiv:2202.00666): sort by
 *     |−log p_t − H(p)| ascending and keep the shortest prefix whose mass is >= typical_p
 *     (the paper's definition; llama.cpp uses >).
 *  7. top-p / nucleus (Holtzman et al. 2019, arXiv:1904.09751): sort by p descending and keep
 *     the shortest prefix whose mass exceeds top_p (at least one token).
 *  8. min-p (Nguyen et al. 2024, arXiv:2407.01082): keep t with p_t >= min_p × max p.
 *  9. temperature T: p ∝ exp(z / T) over the survivors (in WLM_ORDER_RUNC, applied first).
 * 10. draw with llama2.c's xorshift RNG (one float per sampled step, none for greedy, as in
 *     run.c; run.c's inverse-CDF walk).
 */
typedef struct wlm_gen_params {
    float temperature;       /* >= 0; 0 = greedy (argmax). Default 1.0 */
    int32_t top_k;           /* keep the k most probable tokens; 0 = off (default) */
    float top_p;             /* nucleus, (0, 1]; 1 = off. Default 0.9 (run.c's) */
    float min_p;             /* [0, 1]; 0 = off (default) */
    float typical_p;         /* (0, 1]; 1 = off (default) */
    float repeat_penalty;    /* > 0; 1 = off (default) */
    int32_t repeat_last_n;   /* window of the three penalties, in tokens (prompt included);
                                >= 0, default 64 */
    float presence_penalty;  /* finite, 0 = off (default); OpenAI's range is -2..2 */
    float frequency_penalty; /* finite, 0 = off (default) */
    int32_t n_logit_bias;    /* entries in logit_bias, 0..WLM_MAX_LOGIT_BIAS */
    const wlm_logit_bias *logit_bias; /* caller's array, copied by begin; finite biases or
                                         -INFINITY; token ids must be in the vocabulary */
    int32_t n_banned;        /* entries in banned, 0..WLM_MAX_LOGIT_BIAS */
    const int32_t *banned;   /* token ids never sampled; copied by begin */
    int32_t order;           /* enum wlm_sampler_order; default WLM_ORDER_LLAMACPP */
    int32_t n_probs;         /* alternatives reported per token in wlm_token.top,
                                0..WLM_MAX_PROBS; default 0 */
    uint64_t seed;           /* RNG seed; 0 is replaced by a fixed non-zero constant */
    int32_t max_tokens;      /* new tokens to produce at most; 0 = no limit (until EOS, a stop
                                string or a full context). Default 256 */
    int32_t add_bos;         /* wlm_generate_begin_text: prepend BOS (default 1) */
    int32_t parse_special;   /* wlm_generate_begin_text: 1 = control tokens written in the
                                prompt become their ids (WLM_TOKENIZE_PARSE_SPECIAL; chat
                                templates need it); 0 (default) = plain text */
    int32_t context_shift;   /* 0 (default): stop with WLM_STOP_CONTEXT_FULL when the sequence
                                fills n_ctx. 1: shift instead (wlm_seq_shift with n_keep and
                                n_discard = (n_past - n_keep) / 2) and go on */
    int32_t n_keep;          /* tokens kept at the start by a context shift (default 0; the
                                prompt's BOS is worth keeping: 1) */
    int32_t cache_prompt;    /* 0 (default) or 1: wlm_generate_begin keeps the KV cache of the
                                longest common prefix of the previous sequence 0 (its prompt
                                and generated tokens) and this prompt, and prefills only the
                                rest (llama.cpp server's cache_prompt). The result is bitwise
                                the same as a full prefill; a context shift limits the reusable
                                part to its n_keep. Single-sequence generation only. */
    int32_t checkpoint;      /* hybrid models (a recurrent state, which cannot be cut back):
                                a prompt position, 0 < checkpoint < n_tokens, where the state is
                                also copied during the prefill (beside the copy at the prompt's
                                end), so that a later prompt that diverges after it resumes
                                there instead of prefilling from 0 — chat templates that
                                re-render the last answer differently (Qwen3.5 drops its
                                reasoning) diverge right after the conversation's last turn.
                                0 (default): none; ignored by transformers and outside
                                (n_cached, n_tokens). Single-sequence generation only. */
    int32_t n_stop;          /* number of stop strings used from `stop` (<= 8) */
    char stop[WLM_MAX_STOP_STRINGS][WLM_MAX_STOP_LEN]; /* NUL-terminated, each < 64 bytes */
    const char *grammar;     /* GBNF text constraining the output (see "Grammars" below), or
                                NULL (default): none. Compiled by begin, which keeps its own
                                copy: the caller's text may be freed after begin returns */
    size_t grammar_len;      /* bytes of grammar (need not be NUL-terminated) */
    int32_t grammar_lazy;    /* 0 (default): the grammar constrains from the first token. 1:
                                lazy (see "Lazy grammars" below): dormant until a trigger */
    int32_t n_grammar_triggers; /* entries used in grammar_triggers, 0..8 */
    wlm_grammar_trigger grammar_triggers[WLM_MAX_GRAMMAR_TRIGGERS];
    int32_t n_grammar_arms;  /* entries used in grammar_arms, 0 (default: the triggers count
                                everywhere) ..4; see "Arming" under "Lazy grammars" below */
    wlm_grammar_trigger grammar_arms[WLM_MAX_GRAMMAR_ARMS];       /* e.g. "</think>" */
    int32_t n_grammar_disarms; /* entries used in grammar_disarms, 0..4 (0: once armed, armed) */
    wlm_grammar_trigger grammar_disarms[WLM_MAX_GRAMMAR_ARMS];    /* e.g. "<think>" */
    int32_t grammar_start_armed; /* with arms: 0 (default) the search starts disarmed (the
                                    prompt leaves the reasoning open), 1 armed, 2 armed and
                                    the disarms count only as the generated text's first
                                    non-whitespace (a reasoning the model may open itself) */
} wlm_gen_params;

/* Defaults as commented above (run.c's temperature 1.0 and top-p 0.9; every other stage off). */
void wlm_gen_params_default(wlm_gen_params *params);

/*
 * Grammars (structured output). gen_params.grammar (and wlm_beam_params.grammar) hold a
 * grammar in llama.cpp's GBNF (its grammars/README.md): rules `name ::= alternatives`, the
 * start rule `root`; alternation `|`, grouping `( )`, repetition `*` `+` `?` `{m}` `{m,}`
 * `{m,n}` `{,n}`; "string literals" and [character classes] with ranges `a-z` and negation
 * `[^...]`, escapes \n \t \r \\ \" \[ \] \xHH \uHHHH \UHHHHHHHH; `.` any character;
 * `# comments`. A rule ends at the end of its line unless inside ( ) or after `|` / `::=`.
 * The text generated (token pieces as wlm_token.piece gives them, byte tokens as bytes, a
 * character may span tokens) is then always a prefix of a sentence of the grammar: at every
 * step the tokens whose bytes cannot continue it are refused; EOS (and BOS, which also stops)
 * are allowed exactly when the text is a complete sentence; once it is complete and nothing
 * can follow, the generation ends with WLM_STOP_EOS without another decode step. Other stop
 * conditions (max_tokens, stop strings, a full context) may still cut the sentence short.
 * Distribution: the chain's final distribution renormalised over the allowed tokens (the
 * algorithm, and the fallback when the filters left no allowed token, are in
 * src/sampling/sampler.h); with n_probs > 0, top[] and prob_sampled report that renormalised
 * distribution, with n_probs = 0 prob_sampled may be the chain's value before renormalising
 * (the token was accepted at its first check). Batches: each sequence has its own grammar and parse state. Beams:
 * each beam's parse state forks with it; refused tokens are never expanded; scores stay the
 * model's log-probabilities. wlm_sampler_preview: params->grammar is parsed and advanced over
 * the tokens sequence `seq` has generated so far (from the start outside a generation).
 * Errors (from begin / wlm_beam_begin / preview): WLM_ERR_INVALID_ARG with the message
 * "grammar line L, column C: ..." for a syntax error, an undefined or twice-defined rule, no
 * `root`, left recursion (direct, indirect or through rules that can be empty), an empty
 * grammar, groups nested deeper than 64, a repetition count above 10000, more than 2^20
 * elements once repetitions are expanded, or text above 1 MiB; WLM_ERR_TOKENIZER (no
 * tokenizer); during a generation, WLM_ERR_INVALID_ARG when the grammar allows no token (nor
 * end) at some step, WLM_ERR_UNSUPPORTED when a parse needs more than 8192 stacks at once.
 * Cost: a decoded token is checked against the grammar first (a few microseconds); the full
 * mask over the vocabulary (a walk of its prefix tree, cached by parser state) is built only
 * when the sampled token is refused. The first grammar of a context builds the vocabulary's
 * prefix tree (kept until the context is freed).
 *
 * Lazy grammars (grammar_lazy = 1, for tool calls: text stays free until the model starts a
 * call, then the call follows the grammar; llama.cpp's "lazy grammar" with trigger words and
 * tokens, our own code). The grammar is dormant: tokens are sampled without it. After each
 * generated token the triggers are checked, tokens first: a trigger token wakes the grammar,
 * which is advanced over that token's text (its piece: empty for a control token, so the
 * grammar then starts after it); a trigger word found in the generated text (it may span
 * tokens; the earliest match wins) wakes it, advanced over the text from the word's first byte
 * to the end of the current token. From the next token on the grammar constrains as above (and
 * the generation ends when it is complete and nothing can follow). The grammar should
 * therefore begin with the trigger word (or the trigger token's text). If that text does not
 * follow the grammar, the grammar stays dormant and the search goes on after it: the text is
 * then free, never an error. Triggers are searched in generated text only, never the prompt.
 * Arming (n_grammar_arms > 0: a trigger written inside the reasoning is not a call, as
 * llama.cpp's trigger patterns anchored after "</think>" when the prompt forces thinking open):
 * the triggers count only while the search is armed. It starts disarmed (grammar_start_armed
 * 1: armed); one of grammar_arms generated (a token, or a word in the generated text, as
 * triggers are found) arms it, one of grammar_disarms disarms it. The generated text is read in
 * order: a trigger word counts only when it begins after the end of the word that armed the
 * search, and while armed the earliest of a trigger and a disarming word (by first byte; a
 * trigger on a tie) is taken. Uses: a prompt ending in an open <think>: arms "</think>" (and
 * its token when it is a control token, whose piece is empty); a model that may open <think>
 * itself: the same, disarms "<think>", grammar_start_armed 2 (llama.cpp's optional leading
 * "<think>…</think>": a <think> later in the answer is text); gpt-oss's harmony: arms "<|channel|>",
 * disarms "<|message|>", so that only a message header, never a message's text, holds a call.
 * Errors (from begin): WLM_ERR_INVALID_ARG when grammar_lazy is not 0 or 1, when it is 1
 * without a grammar or without triggers, n_grammar_triggers outside 0..8, a trigger token
 * outside the vocabulary, a trigger word empty or not NUL-terminated within 64 bytes; the same
 * for arms and disarms (n_grammar_arms / n_grammar_disarms outside 0..4), arms or disarms or
 * grammar_start_armed 1 or 2 without grammar_lazy, grammar_start_armed not 0, 1 or 2,
 * disarms without arms.
 * Batches: per sequence. Beam search has no lazy grammars; wlm_sampler_preview replays the
 * triggers over the tokens the sequence generated.
 */

/* wlm_json_schema_to_grammar flag: ignore unsupported keywords (listed in msg) instead of
 * failing with WLM_ERR_UNSUPPORTED. The grammar may then admit values the schema refuses. */
#define WLM_SCHEMA_LENIENT 1u

/*
 * JSON Schema → GBNF, for gen_params.grammar (structured output: the model's text is then a
 * JSON value the schema accepts). `schema` is len bytes of JSON text (strict RFC 8259, at most
 * 16 MiB, nesting at most 128). On success *grammar is a NUL-terminated GBNF text of
 * *grammar_len bytes (grammar_len may be NULL), malloc'ed: the caller free()s it (JS:
 * wlmjs_free); it always compiles (the converter parses it before returning). The grammar's
 * root rule is the whole value, without whitespace before or after it.
 *
 * Supported (JSON Schema 2020-12 and draft 7 names): `type` (a name or a list: object, array,
 * string, number, integer, boolean, null; absent: inferred from the keywords below, else any
 * JSON value), `properties` + `required` (properties generated in the schema's order, optional
 * ones skippable), `additionalProperties` (false, or absent: no key beyond `properties`; a
 * schema or true when there are no `properties`: free keys with such values), `items` (one
 * schema), `minItems` / `maxItems`, `minLength` / `maxLength` (in code points), `pattern`
 * (subset below), `enum` and `const` (any JSON values, written compactly; `type` filters
 * `enum`), `anyOf` and `oneOf` (both as alternatives: oneOf's exclusivity is not enforced),
 * `$ref` to "#" or a JSON pointer "#/$defs/name" (recursion allowed; a cycle that never
 * reaches a value is an error), the schemas `true` / `{}` (any JSON value). Ignored as
 * annotations: $schema $id $comment $anchor $defs definitions title description default
 * examples deprecated readOnly writeOnly contentEncoding contentMediaType.
 * `pattern` subset (ECMA-262 syntax, matched against the decoded string): literals and
 * escaped punctuation, `.` (any character but newline), classes [a-z] [^...] with \d \w \s
 * inside, \d \w \s \D \W \S \n \t \r \f \v \uHHHH, groups ( ) and (?: ), `|`, quantifiers
 * * + ? {m} {m,} {m,n} (lazy forms accepted: same language), `^` first and `$` last (without
 * them the match may be surrounded by any text). Not: backreferences, lookaround, \b, named
 * groups, `|` at the top level beside an anchor.
 * The generated JSON: whitespace between tokens is at most one space or a newline with up to
 * 20 spaces or tabs; numbers have at most 16 integer and 16 fraction digits and a two-digit
 * exponent; strings never use \u escapes of UTF-16 surrogates (characters beyond U+FFFF are
 * written as UTF-8). The ideas follow llama.cpp's json-schema-to-grammar (the code is ours).
 *
 * Errors (msg: "schema line L, column C (at '/json/pointer'): ..." or "the schema is not
 * JSON: JSON line L, column C: ..."): WLM_ERR_INVALID_ARG (not JSON, a malformed keyword, a
 * `$ref` to nothing, the schema false, `required` naming a property not in `properties`),
 * WLM_ERR_UNSUPPORTED (a keyword outside the list above, e.g. minimum, format, allOf, not,
 * patternProperties, prefixItems, uniqueItems; additionalProperties other than false beside
 * properties; keywords beside $ref / anyOf / oneOf; pattern with min/maxLength; counts above
 * 10000; a pattern outside the subset — unless flags has WLM_SCHEMA_LENIENT, which then
 * ignores the keyword and lists each in msg, "; "-separated), WLM_ERR_NOMEM. msg (msg_size
 * bytes, may be NULL / 0) is "" on a success without warnings.
 */
int wlm_json_schema_to_grammar(const char *schema, size_t len, unsigned flags, char **grammar,
                               size_t *grammar_len, char *msg, size_t msg_size);

/* One candidate token in wlm_token.top. */
typedef struct wlm_token_prob {
    int32_t id;
    float prob;              /* model probability: softmax of the raw logits at temperature 1,
                                before penalties, bias and filters */
    float logprob;           /* its natural logarithm, computed as z_t - logsumexp(z) */
    float prob_sampled;      /* probability in the distribution the token was drawn from, after
                                every stage (0 when a filter removed it; greedy: 1 for the
                                argmax, 0 for the others) */
} wlm_token_prob;

/* One step of a generation. */
typedef struct wlm_token {
    int32_t id;              /* the sampled token id (-1 with WLM_DONE) */
    const char *piece;       /* text released at this step (UTF-8 bytes, possibly partial
                                characters; may be empty while a stop string is pending, and
                                may include text held back earlier). Owned by the context,
                                valid until the next call on it. */
    size_t piece_len;
    float prob;              /* model probability of `id` (see wlm_token_prob.prob) */
    float logprob;           /* ln(prob), exact (z - logsumexp(z)) */
    float prob_sampled;      /* probability with which the sampler drew it (1 for greedy) */
    int32_t n_probs;         /* entries filled in top (gen_params.n_probs, or fewer when the
                                vocabulary is smaller) */
    wlm_token_prob top[WLM_MAX_PROBS]; /* the most probable candidates after every stage, by
                                prob_sampled descending, then prob descending, then id: the
                                survivors first, then the best of the removed ones */
    int32_t n_past;          /* length of the sequence including this token (prompt + tokens
                                emitted so far); the token itself is evaluated by the next
                                step, so this can reach n_ctx + 1 when the last one is emitted */
    int32_t stop_reason;     /* enum wlm_stop_reason; set with WLM_DONE */
    int32_t seq;             /* sequence (batch index) this token belongs to */
    int32_t status;          /* WLM_OK: a token; WLM_DONE: the sequence ended at this step or
                                earlier (id -1, stop_reason set) */
} wlm_token;

/*
 * Starts a generation: resets the context, evaluates the prompt tokens (prefill) and prepares
 * the sampler. `tokens` (n >= 1 ids; the caller decides about BOS) are copied.
 * Errors: WLM_ERR_INVALID_ARG (any parameter outside the ranges documented in wlm_gen_params,
 * NaN included; a bias or ban for a token outside the vocabulary; n_stop outside 0..8, an
 * unterminated stop string; the message names the field and the value),
 * WLM_ERR_CONTEXT_FULL (prompt longer than n_ctx).
 */
int wlm_generate_begin(wlm_context *ctx, const int32_t *tokens, int32_t n,
                       const wlm_gen_params *params);

/* Prompt tokens whose KV cache the last wlm_generate_begin reused (params.cache_prompt); the
 * prefill evaluated the other n - wlm_generate_n_cached() tokens. A hybrid model resumes from a
 * copy of its recurrent state (the previous prompt's end or checkpoint): the tokens between it
 * and the common prefix's end are evaluated again and not counted here. 0 for a NULL context. */
int32_t wlm_generate_n_cached(const wlm_context *ctx);

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

/* Ends the generation in progress (every sequence of a batch, or a beam search): the next
 * wlm_generate_next / wlm_generate_batch_next / wlm_beam_step returns WLM_DONE with
 * WLM_STOP_ABORTED. */
void wlm_generate_abort(wlm_context *ctx);

/*
 * Batched generation: n_seqs sequences decoded together, one forward pass per step for all
 * of them (wlm_eval_batch), each with its own parameters (sampler, seed, penalties, stop
 * strings, max_tokens), KV cache rows and stop condition. Sequence i uses prompts[i]
 * (n_tokens[i] >= 1 ids, copied) and params[i]. Prompts equal to an earlier one in the batch
 * are not evaluated again: the sequence is forked from the earlier one (shared KV blocks), so
 * n samples of one prompt cost one prefill. Needs n_seq_max >= n_seqs.
 * Errors: as wlm_generate_begin, for the first offending sequence (the message names it);
 * WLM_ERR_INVALID_ARG when n_seqs is outside 1..n_seq_max.
 */
int wlm_generate_batch_begin(wlm_context *ctx, int32_t n_seqs, const int32_t *const *prompts,
                             const int32_t *n_tokens, const wlm_gen_params *params);

/*
 * One step for every sequence still generating: out[0..n_seqs) receive one wlm_token each
 * (out[i].seq == i; status WLM_OK with a token, or WLM_DONE when sequence i has ended, at this
 * step or before — its text held back for a stop string is released with the first WLM_DONE).
 * n_seqs is the batch's size: that of wlm_generate_batch_begin, raised to s + 1 by each
 * wlm_generate_batch_add that returned a slot s past it (at most n_seq_max; give out
 * n_seq_max entries when sequences may be added). A sequence added since the previous step has
 * its prompt prefilled in this step's forward pass and its first token sampled.
 * Returns WLM_OK while any sequence produced a token, WLM_DONE once all have ended (the batch
 * still runs: a sequence added afterwards generates at the next step).
 * Errors: WLM_ERR_STATE (no batch begun), WLM_ERR_NOMEM.
 */
int wlm_generate_batch_next(wlm_context *ctx, wlm_token *out);

/*
 * Continuous batching (llama-server's): adds a sequence to the running batch between two steps.
 * Its prompt (n >= 1 ids, the caller decides about BOS; copied) and params (copied, as for
 * wlm_generate_batch_begin; the single-sequence options cache_prompt, checkpoint and speculative
 * decoding do not apply) start it; the next wlm_generate_batch_next evaluates the whole prompt in
 * the same forward pass as the other sequences' decode tokens (one pass, not a prefill pass of
 * its own that would stall them; each entry's result is independent of the others in a pass),
 * and samples its first token there. Its tokens are bitwise those it would generate alone
 * (wlm_generate_begin), or in a batch begun with it: the pass computes each entry as alone, the
 * sampler and its seed are its own, its KV cache and recurrent state start empty.
 * It takes the lowest slot not generating (never begun, ended by wlm_generate_batch_end, or
 * finished: that sequence's cache is dropped) and returns that slot, the sequence's index in
 * out[] of the following steps (out[slot].seq == slot).
 * Errors (negative; the context's message says which): WLM_ERR_STATE when no batch runs (none
 * begun, a beam search, wlm_generate_abort called), when a deferred context's step waits for
 * its logits, or when no slot is free (all n_seq_max sequences are generating);
 * WLM_ERR_INVALID_ARG / WLM_ERR_CONTEXT_FULL for the prompt and params, as
 * wlm_generate_batch_begin (the message names "sequence <slot>"). The batch is unchanged on error.
 */
int32_t wlm_generate_batch_add(wlm_context *ctx, const int32_t *tokens, int32_t n,
                               const wlm_gen_params *params);

/*
 * Ends sequence `seq` (0 .. the batch's size - 1) of the running batch now, between two steps:
 * it generates no more (it reports WLM_DONE with WLM_STOP_ABORTED if it was still generating,
 * else its own stop reason; text held back for a stop string is dropped), its KV blocks go
 * back to the pool and its recurrent state is emptied (the sequence's cache is gone), and its
 * slot is free for wlm_generate_batch_add. The other sequences are untouched. Ending an ended
 * sequence again only frees its cache.
 * Errors: WLM_ERR_STATE (no batch running, or a deferred step waits for its logits),
 * WLM_ERR_INVALID_ARG (seq is not a sequence of the batch).
 */
int wlm_generate_batch_end(wlm_context *ctx, int32_t seq);

/*
 * The distribution a sampler chain leaves on the logits sequence `seq` last sampled from (the
 * current step of a generation or batch; outside one, the logits of the last evaluation),
 * without changing the generation: for showing how each parameter reshapes the candidates.
 * Runs every stage of `params` (penalties over the sequence's tokens, bias, bans, filters,
 * temperature) exactly as wlm_generate_next would, then one draw with params->seed. Fills
 * out->top / out->n_probs (params->n_probs entries, prob and prob_sampled as documented for
 * wlm_token_prob), out->id (the token that draw picks) with its prob, logprob and
 * prob_sampled; out->piece is "". Errors: WLM_ERR_INVALID_ARG (parameters, seq), WLM_ERR_STATE
 * (no logits yet), WLM_ERR_NOMEM.
 */
int wlm_sampler_preview(wlm_context *ctx, int32_t seq, const wlm_gen_params *params,
                        wlm_token *out);

/* ------------------------------------------------------------------------------------------ */
/* Beam search                                                                                 */

typedef struct wlm_beam_params {
    int32_t width;           /* beams kept per step, 1..WLM_MAX_SEQ/2 (default 4) */
    int32_t max_tokens;      /* new tokens per beam at most, >= 1 (default 64); also bounded by
                                n_ctx */
    float length_penalty;    /* alpha >= 0 in score = logprob / len^alpha (default 1.0; 0 ranks
                                by total log-probability) */
    const char *grammar;     /* GBNF text every beam must follow (see "Grammars"), copied by
                                wlm_beam_begin; NULL (default): none */
    size_t grammar_len;      /* bytes of grammar */
} wlm_beam_params;

void wlm_beam_params_default(wlm_beam_params *params);

/* A finished hypothesis. */
typedef struct wlm_beam {
    const int32_t *tokens;   /* the generated ids (prompt excluded; EOS excluded), owned by the
                                context, valid until the next beam search or reset */
    int32_t n_tokens;
    float logprob;           /* sum of ln p(token | prefix) over the generated tokens (and the
                                EOS that ended it, if any), p the model's softmax at T = 1 */
    float score;             /* logprob / len^length_penalty, len = tokens scored (>= 1) */
    int32_t stop_reason;     /* WLM_STOP_EOS, WLM_STOP_MAX_TOKENS, WLM_STOP_CONTEXT_FULL, or
                                WLM_STOP_ABORTED for a beam still live when aborted */
} wlm_beam;

/*
 * Beam search (as in Hugging Face transformers' BeamSearchScorer with early_stopping=True):
 * the prompt is evaluated once; each step extends every live beam by its 2W most probable
 * tokens, evaluates the W best continuations by total log-probability in one batch; a
 * continuation ending in EOS becomes a finished hypothesis (the W best by score are kept).
 * The search ends when W hypotheses have finished, every beam reached max_tokens or the
 * context, or it is aborted. Beams are sequences of the context that share the KV blocks of
 * their common prefix (wlm_seq_fork): a step copies at most one block per beam.
 * Needs n_seq_max >= 2 × width.
 * Errors: as wlm_generate_begin (INVALID_ARG for width / max_tokens / length_penalty, and
 * CONTEXT_FULL).
 */
int wlm_beam_begin(wlm_context *ctx, const int32_t *prompt, int32_t n, const wlm_beam_params *p);

/* One step of the search. WLM_OK: still running; WLM_DONE: finished (read the results).
 * Errors: WLM_ERR_STATE, WLM_ERR_NOMEM. */
int wlm_beam_step(wlm_context *ctx);

/* After WLM_DONE: the number of results (<= width), best score first, and result i.
 * wlm_beam_get errors: WLM_ERR_INVALID_ARG (i out of range), WLM_ERR_STATE. */
int32_t wlm_beam_count(const wlm_context *ctx);
int wlm_beam_get(const wlm_context *ctx, int32_t i, wlm_beam *out);

/* KV cache memory of the current or last beam search, at its largest over the steps: bytes of
 * the blocks in use (shared prefix counted once) and the bytes the same beams would need with
 * a private copy each (their block tables summed). Either pointer may be NULL.
 * Errors: WLM_ERR_INVALID_ARG. */
int wlm_beam_memory(const wlm_context *ctx, size_t *kv_bytes, size_t *kv_bytes_unshared);

/* ------------------------------------------------------------------------------------------ */
/* Speculative decoding                                                                        */
/*
 * Speculative decoding (Leviathan, Kalman & Matias 2023, "Fast Inference from Transformers via
 * Speculative Decoding", arXiv:2211.17192; Chen et al. 2023, "Accelerating Large Language Model
 * Decoding with Speculative Sampling", arXiv:2302.01318) makes a single-sequence generation
 * produce several tokens per forward pass of the model. Each round a drafter proposes up to
 * n_draft tokens d_1..d_k after the sequence:
 * - a draft model: a context of a second, smaller model with the same vocabulary (same size,
 *   same token texts, same BOS/EOS; wlm_vocab_match), which samples the drafts with the
 *   target's sampler chain one token at a time (its own KV cache, kept in step with the
 *   target's sequence: the longest common prefix is kept, the rest evaluated in one batch);
 * - or prompt lookup (Saxena 2023, "Prompt Lookup Decoding"; llama.cpp's n-gram drafting): the
 *   tokens that followed the latest earlier occurrence of the sequence's last n tokens, for n =
 *   ngram down to 1 — free, and right where the output copies the prompt (quotes, code edits,
 *   summaries, repeated structure).
 * The target evaluates its pending token and d_1..d_k in ONE forward pass (wlm_eval_batch with
 * logits at every position: the weights are read once for all k + 1 entries) and decides:
 * - greedy (temperature 0): d_i is accepted while it equals the target's argmax at its
 *   position; the first mismatch is replaced by the target's argmax, and when all k match, the
 *   target's argmax after d_k is added. The tokens are exactly those of plain greedy decoding
 *   (batched evaluation is bitwise equal to one token at a time, wlm_eval_batch).
 * - sampling: with p the target's distribution at a position (the whole sampler chain applied:
 *   penalties over the sequence including the earlier drafts, bias, bans, top-k, typical-p,
 *   top-p, min-p, temperature) and q the drafter's (the draft model's chain output; prompt
 *   lookup: all mass on its draft), d_i is accepted with probability min(1, p(d_i) / q(d_i));
 *   the first rejected one is replaced by a draw from the residual max(0, p - q) renormalised,
 *   and when all are accepted one more token is drawn from p after d_k. Every emitted token is
 *   then distributed exactly as plain sampling's (the papers' theorem; tests/c/
 *   test_speculative.c checks it with a chi-square test on joint frequencies), though the
 *   same seed gives other tokens than without speculation (the coins are used differently).
 * Rejected positions are removed from both KV caches (wlm_seq_truncate). Between rounds the
 * generation is the usual one: tokens come out one per wlm_generate_next, with stop strings,
 * end of generation, max_tokens (a round never drafts past it), context shift (a round needs
 * room for k + 1 positions; without it a plain step runs, which shifts when asked), abort.
 * When a drafter has nothing to propose (no n-gram match; the draft model's context is full;
 * p_min stopped it), the step is a plain decode step.
 * Not supported (wlm_generate_speculate refuses them with WLM_ERR_UNSUPPORTED): grammars (the
 * parse state would have to follow each draft and back), n_probs > 0 (the alternatives are not
 * reported). Batches and beam searches are single-sequence only: WLM_ERR_STATE.
 * Cost: a round evaluates k + 1 positions on the target in one pass plus k - 1 single-token
 * steps of the draft model; the speed-up is (accepted + 1) tokens per round over that cost
 * (bench/speculative.mjs). Memory: the draft model and its context (KV cache of its n_ctx),
 * plus in the target context 2 × vocab_size floats, and n_draft × vocab_size floats when a
 * draft model samples (its distributions), and the logits of n_draft + 1 positions.
 */

#define WLM_MAX_DRAFT 32         /* drafted tokens per round at most (n_draft) */
#define WLM_MAX_NGRAM 8          /* longest n-gram prompt lookup matches */

typedef struct wlm_spec_params {
    wlm_context *draft;      /* a context of the draft model (borrowed: it must outlive the
                                generation; its sequence 0 is used and overwritten; give it its
                                own thread pool or the target's), or NULL */
    int32_t n_draft;         /* tokens drafted per round at most, 1..WLM_MAX_DRAFT (default 8;
                                llama.cpp's --draft-max) */
    int32_t ngram;           /* prompt lookup: the longest n-gram to match, 1..WLM_MAX_NGRAM; 0
                                (default) = off. Exactly one of draft and ngram is given */
    float p_min;             /* draft model: stop drafting a round when the draft's most probable
                                token has probability below p_min (greedy: its softmax at T = 1;
                                sampling: the chain's q), [0, 1], 0 = off (default; llama.cpp's
                                --draft-p-min) */
} wlm_spec_params;

void wlm_spec_params_default(wlm_spec_params *params);

/*
 * WLM_OK when `draft` can draft for `target`: the same vocabulary size, and (when both have a
 * tokenizer) the same BOS and EOS ids and, for every token from id 5 on, the same bytes
 * (wlm_token_piece after no token: llama2.c's " t" is GGUF's "\u2581t") or the same entry
 * (wlm_token_text). The first ids are special tokens that file formats spell differently
 * (llama2.c's BOS "\n<s>\n", GGUF's "<s>"); llama.cpp's speculative decoding skips them too. Else
 * WLM_ERR_TOKENIZER with a message into msg (msg_size bytes, may be NULL / 0) naming the sizes
 * or the first token that differs; WLM_ERR_INVALID_ARG for a NULL or unloaded model.
 */
int wlm_vocab_match(const wlm_model *target, const wlm_model *draft, char *msg, size_t msg_size);

/*
 * Turns speculative decoding on for the single-sequence generation begun on ctx (call it after
 * wlm_generate_begin / _begin_text, before or between wlm_generate_next calls; the next begin
 * turns it off). With a draft context it evaluates the sequence so far into the draft's
 * sequence 0 here (the draft's prefill). Resets the statistics.
 * Errors: WLM_ERR_INVALID_ARG (params out of range, both or neither drafter, draft == ctx),
 * WLM_ERR_STATE (no single-sequence generation in progress, a context without KV cache, a
 * draft context without model or KV cache or in a generation), WLM_ERR_TOKENIZER (the
 * vocabularies differ: wlm_vocab_match's message), WLM_ERR_UNSUPPORTED (grammar, n_probs > 0,
 * a draft context with kv_cache 2), WLM_ERR_NOMEM, and the draft's evaluation errors.
 * The target may be a context with kv_cache 2 (another backend runs its forward pass): each
 * round's verification then waits for its logits as a plain step does (the backend is told to
 * make them equal one-token evaluations bit for bit, js/backend/webgpu/).
 */
int wlm_generate_speculate(wlm_context *ctx, const wlm_spec_params *params);

/* What speculative decoding did in the current or last generation of ctx. */
typedef struct wlm_spec_stats {
    int32_t n_rounds;        /* verification passes of the target */
    int32_t n_drafted;       /* drafted tokens verified */
    int32_t n_accepted;      /* of those, accepted (acceptance rate = n_accepted / n_drafted) */
} wlm_spec_stats;

/* Fills *out (zeros when speculation was never on). Errors: WLM_ERR_INVALID_ARG. */
int wlm_spec_stats_get(const wlm_context *ctx, wlm_spec_stats *out);

/* ------------------------------------------------------------------------------------------ */
/* Threads: a pool that splits each matrix product of the forward pass by rows                 */

typedef struct wlm_threadpool wlm_threadpool;

#define WLM_MAX_THREADS 16

/*
 * Creates a pool of n_threads (1..WLM_MAX_THREADS) threads, the calling thread counted: a
 * context given the pool (wlm_context_set_threadpool) splits every weight-matrix product
 * (projections, feed-forward, classifier; F32 and quantized, decode and batches) into n_threads
 * row ranges of equal size, one per thread, and returns when all are done. Each output row is
 * computed by exactly the same operations whichever thread runs it, so results are bitwise
 * identical for every thread count; likewise each entry's attention is split by heads (each
 * head computed as alone). Products and attentions smaller than 2^16 multiply-adds stay on the
 * calling thread (a wake-up costs more than they do), as do norms, RoPE and sampling.
 * Native builds start n_threads - 1 pthreads here. In wasm the module must be the threaded
 * build (dist/wasmlm-mt.wasm: shared memory, atomics), and the embedder starts the helpers:
 * n_threads - 1 workers that instantiate the same module on the same memory, each with its own
 * stack, and call wlm_threadpool_work(pool) — js/wasmlm.js does this (createEngine({threads})).
 * Helpers that are not running yet never block anything: the calling thread runs the chunks no
 * helper claimed. Idle helpers spin for about a millisecond, then sleep in a futex wait.
 * Errors: WLM_ERR_INVALID_ARG (out NULL, n_threads out of range), WLM_ERR_UNSUPPORTED (n_threads
 * > 1 in a wasm module built without atomics), WLM_ERR_NOMEM (also: a pthread did not start).
 */
int wlm_threadpool_new(int32_t n_threads, wlm_threadpool **out);

/* Stops the helpers, waits until each has returned from wlm_threadpool_work (natively: joins
 * them), and frees the pool. No context may be using it (detach or free those contexts
 * first). NULL is a no-op. */
void wlm_threadpool_free(wlm_threadpool *pool);

/* The pool's thread count (1 for NULL), and how many helpers are inside wlm_threadpool_work. */
int32_t wlm_threadpool_size(const wlm_threadpool *pool);
int32_t wlm_threadpool_running(const wlm_threadpool *pool);

/*
 * A helper thread's loop (wasm embedders only; native pools run it on their own pthreads):
 * runs the pool's chunks as they come until wlm_threadpool_free, then returns WLM_OK. Blocks
 * in memory.atomic.wait32, so it must run in a worker, never on a browser's main thread.
 * Errors: WLM_ERR_INVALID_ARG (pool NULL).
 */
int wlm_threadpool_work(wlm_threadpool *pool);

/*
 * Makes ctx run its matrix products on `pool` (NULL: on the calling thread only, the
 * default). The pool is borrowed: it must outlive its use by ctx. One pool may serve several
 * contexts as long as only one of them evaluates at a time. May be changed between any two
 * calls, in the middle of a generation too (results do not depend on it). Allocates nothing:
 * the context's attention scratch is split among threads by heads.
 * Errors: WLM_ERR_INVALID_ARG (ctx NULL).
 */
int wlm_context_set_threadpool(wlm_context *ctx, wlm_threadpool *pool);

/*
 * Sets ctx's read_ahead (wlm_context_params): 1, the quantized matrix-vector kernels touch each
 * row stream some blocks ahead; 0, they do not. May be changed between any two calls, in the
 * middle of a generation too: results are bit for bit the same, only the speed differs (which
 * is faster depends on the CPU; js/engine/engine.js times both on the first decode steps).
 * Errors: WLM_ERR_INVALID_ARG (ctx NULL, `on` not 0 or 1).
 */
int wlm_context_set_read_ahead(wlm_context *ctx, int32_t on);

/* ------------------------------------------------------------------------------------------ */
/* Embeddings and reranking (src/runtime/embed.c)                                              */

/* How a text's hidden states become one vector (llama.cpp's enum llama_pooling_type values, as
 * in <arch>.pooling_type). */
enum wlm_pooling {
    WLM_POOLING_UNSPECIFIED = -1, /* the model file's pooling_type */
    WLM_POOLING_NONE = 0,         /* one vector per token */
    WLM_POOLING_MEAN = 1,         /* the mean over the text's tokens */
    WLM_POOLING_CLS = 2,          /* the first token's ([CLS]) */
    WLM_POOLING_LAST = 3,         /* the last token's (Qwen3-Embedding) */
    WLM_POOLING_RANK = 4,         /* a reranker's head on the first token: tanh(cls·h + b), then
                                     cls.output (labels × dim) + bias: scores per text */
};

/* What a model offers for embeddings (wlm_model_embed_info). */
typedef struct wlm_embed_info {
    int32_t n_embd;       /* floats of a hidden state / of a pooled embedding (the width) */
    int32_t pooling;      /* the file's pooling type (<arch>.pooling_type; NONE when absent) */
    int32_t causal;       /* 1: causal attention (a decoder); 0: bidirectional (an encoder) */
    int32_t generative;   /* 1: it has a next-token classifier and can generate */
    int32_t n_rank_out;   /* floats per text with WLM_POOLING_RANK: cls.output's rows, else
                             n_embd when only cls exists, 0 when the model has no ranking head */
} wlm_embed_info;

/* Fills *info. Errors: WLM_ERR_INVALID_ARG, WLM_ERR_STATE (model did not load). */
int wlm_model_embed_info(const wlm_model *model, wlm_embed_info *info);

/*
 * Embeds n_texts tokenized texts with one context: text t is the next lengths[t] ids of
 * `tokens` (tokenize each with add_special, so BERT's get [CLS] ... [SEP]). Texts go through the
 * batched forward pass together, each as its own sequence with its own attention (causal or
 * bidirectional as the model is): at most the context's n_seq_max texts and, for a
 * bidirectional model, n_ctx tokens per pass. The context's KV cache is cleared before and after
 * (the call owns the context while it runs; a generation in progress is WLM_ERR_STATE).
 *
 * pooling: enum wlm_pooling (UNSPECIFIED: the model's; a model whose file says NONE needs an
 * explicit one unless per-token vectors are wanted). Hidden states are taken after the output
 * norm (decoders) or the last layer (encoders), as llama.cpp's t_embd; MEAN averages them, CLS
 * and LAST take one row (llama.cpp's build_pooling); RANK puts the first token's (a decoder
 * reranker's: the last token's) through the classifier head — cls then cls.output, and for
 * Qwen3-Reranker a softmax over cls.output's two rows, so its first score is P("yes").
 * normalize (llama.cpp's --embd-normalize, common_embd_normalize): -1 none, 0 max absolute value
 * scaled to 32760 (int16), 1 taxicab, 2 Euclidean (L2, the usual choice), p > 2 the p-norm; each
 * output vector on its own (every token's with NONE). RANK scores are never normalized.
 *
 * out: cap floats; receives, text after text, one vector of wlm_embed_info.n_embd floats per
 * text (n_rank_out with RANK), or one per token with NONE (sum of lengths × n_embd). Returns the
 * number of floats the result holds (nothing is written when it exceeds cap; call with cap 0 to
 * size out), or a negative status: WLM_ERR_INVALID_ARG (bad arguments, an id outside the
 * vocabulary, an empty text, an unknown pooling, RANK without a ranking head, LAST/CLS/MEAN asked
 * of an empty text), WLM_ERR_CONTEXT_FULL (a text longer than n_ctx), WLM_ERR_STATE,
 * WLM_ERR_NOMEM; message in wlm_context_errmsg.
 */
int32_t wlm_embed(wlm_context *ctx, const int32_t *tokens, const int32_t *lengths,
                  int32_t n_texts, int32_t pooling, int32_t normalize, float *out, size_t cap);

/*
 * The input of a reranker for one (query, document) pair, as llama.cpp's server builds it
 * (format_prompt_rerank). A model with a "rerank" template (tokenizer.chat_template.rerank:
 * Qwen3-Reranker) gets that text with "{query}" and then "{document}" replaced, tokenized with
 * its control tokens parsed and nothing added. Otherwise (a cross-encoder): BOS when the
 * vocabulary adds one, the query, EOS when it adds EOS, SEP for a WordPiece vocabulary, the
 * document, EOS when it adds EOS — for BERT, [CLS] query [SEP] document. Writes up to cap ids,
 * returns the count needed (may exceed cap) or a negative status (WLM_ERR_TOKENIZER: no
 * vocabulary, WLM_ERR_NOMEM). Pass the result to wlm_embed with WLM_POOLING_RANK.
 */
int32_t wlm_tokenize_pair(const wlm_model *model, const char *query, size_t query_len,
                          const char *doc, size_t doc_len, int32_t *tokens, int32_t cap);

/* ------------------------------------------------------------------------------------------ */
/* Images in (src/vision/): llama.cpp's mmproj files                                          */

/*
 * A vision encoder + projector: the second GGUF of a llama.cpp vision-language pair (the
 * "mmproj", general.architecture "clip"). It turns an image into rows of the text model's
 * embedding width, which take the place of tokens in the sequence. Supported projector types
 * (clip.projector_type): "gemma3" (Gemma 3: SigLIP, 4×4 average pooling, RMS norm, linear; one
 * letterboxed S×S piece, bilinear), "idefics3" (SmolVLM / Idefics3: SigLIP, pixel shuffle,
 * linear; tiles of the image refined to multiples of S plus an overview, Lanczos-3) and "lfm2"
 * (LFM2-VL: SigLIP2 NaFlex, one piece of the image's own aspect smart-resized with bilinear to
 * sides that are multiples of P·s within 64..256 tokens, the learned positions resized to each
 * piece's patch grid, pixel unshuffle, LayerNorm, a 2-layer GELU MLP; an image of more pixels
 * than twice 256 tokens' area (2·256·(P·s)²) is cut as llama.cpp does:
 * 512-pixel tiles of the image stretched to a grid of 2..10 (the closest aspect), then a
 * smart-resized thumbnail). The
 * arithmetic follows llama.cpp's tools/mtmd (clip.cpp, models/siglip.cpp, mtmd.cpp), the
 * resampling llama.cpp b12211's outputs (docs/how-it-works.md, "Images").
 */
typedef struct wlm_vision wlm_vision;

/*
 * Loads an mmproj GGUF from memory. flags: 0 or WLM_LOAD_OWN_BUFFER (then the handle frees
 * `data` with free(), on failure too). The matrices are views into `data`, which must stay alive
 * and unchanged until wlm_vision_free() and be 4-byte aligned; vectors are copied as floats.
 * *out receives a handle even on failure (unless its allocation fails: NULL) so that
 * wlm_vision_errmsg() says what went wrong; free it either way.
 * Errors: WLM_ERR_INVALID_ARG (out NULL, unknown flags, data NULL or unaligned), the GGUF
 * reader's WLM_ERR_FORMAT / WLM_ERR_TRUNCATED, WLM_ERR_FORMAT naming a missing or misshapen key
 * or tensor (general.architecture other than "clip": "is this the text model?"),
 * WLM_ERR_UNSUPPORTED naming the projector type when it is not one of the above (or the file has
 * no vision encoder, or a tensor has a type the kernels lack), WLM_ERR_NOMEM.
 */
int wlm_vision_load(const void *data, size_t size, unsigned flags, wlm_vision **out);

/* Frees the handle (and the buffer with WLM_LOAD_OWN_BUFFER). NULL is a no-op. */
void wlm_vision_free(wlm_vision *vision);

/* The last error message of this handle ("" when none); valid until the next call on it. */
const char *wlm_vision_errmsg(const wlm_vision *vision);

typedef struct wlm_vision_info {
    const char *projector; /* "gemma3", "idefics3", "lfm2", "qwen2.5vl_merger" (static string) */
    int32_t image_size;    /* S: the encoder's square side in pixels */
    int32_t patch_size;    /* P */
    int32_t n_embd;        /* encoder width */
    int32_t n_ff;          /* encoder MLP width */
    int32_t n_layers;
    int32_t n_heads;
    int32_t proj_dim;      /* width of the image embeddings: must equal the text model's dim */
    int32_t scale_factor;  /* pooling kernel (gemma3) or pixel-shuffle factor (idefics3) */
    int32_t longest_edge;  /* idefics3: the refined image's longest edge; 0: no tiles */
    int32_t piece_tokens;  /* embeddings per S×S piece: (S / P / scale_factor)^2 */
} wlm_vision_info;

/* Fills *info. Errors: WLM_ERR_INVALID_ARG, WLM_ERR_STATE (the handle did not load). */
int wlm_vision_get_info(const wlm_vision *vision, wlm_vision_info *info);

/* The largest image wlm_image_encode takes: each side, and pixels in all. */
#define WLM_IMAGE_MAX_SIDE 16384
#define WLM_IMAGE_MAX_PIXELS (1 << 26)

/* An encoded image: the rows that stand for it in the text model's sequence. */
typedef struct wlm_image_embd {
    int32_t n_tokens;      /* rows of embd: (n_pieces - 1) × tokens_per_piece + last_tokens */
    int32_t n_embd;        /* floats per row (the projector's width, wlm_vision_info.proj_dim) */
    int32_t n_pieces;      /* gemma3: 1; idefics3, lfm2: grid_cols × grid_rows tiles + 1
                              overview (lfm2 without tiles: 1) */
    int32_t tokens_per_piece; /* rows of each tile (of the one piece when there are no tiles) */
    int32_t grid_cols;     /* tiles per row and rows of tiles; 0 without tiles */
    int32_t grid_rows;
    int32_t last_tokens;   /* rows of the last piece (the overview / lfm2's thumbnail): equal
                              to tokens_per_piece except for lfm2's tiled images */
    float *embd;           /* (n_tokens, n_embd) row-major; pieces in order: tiles row by row,
                              then the overview. Owned: release with wlm_image_embd_free. */
    int32_t last_cols;     /* the last piece's rows as a grid: last_cols × last_rows merged */
    int32_t last_rows;     /* tokens in raster order (qwen2.5vl: each row's M-RoPE height and
                              width positions in the text model come from it) */
} wlm_image_embd;

/*
 * Encodes one image given as 8-bit RGB pixels (width × height × 3 bytes, row-major, R G B; the
 * caller decodes the file and drops alpha) into *out: preprocessing as llama.cpp does it for the
 * projector (resampling, letterbox or tiles, mean / std normalisation), the vision tower and
 * the projector. pool: NULL or a thread pool that splits the matrix products by rows and the
 * per-token work by tokens (results do not depend on it). use_simd: 1 the SIMD kernels, 0 the
 * scalar references. These are the embeddings llama.cpp feeds the text model (no Gemma
 * sqrt(dim) scaling: that applies to token embeddings only).
 * Errors: WLM_ERR_INVALID_ARG (NULL arguments, width or height < 1 or > WLM_IMAGE_MAX_SIDE, more
 * than WLM_IMAGE_MAX_PIXELS pixels), WLM_ERR_STATE (the handle did not load), WLM_ERR_NOMEM;
 * message in wlm_vision_errmsg. On error *out is zeroed.
 */
int wlm_image_encode(wlm_vision *vision, const uint8_t *rgb, int32_t width, int32_t height,
                     wlm_threadpool *pool, int32_t use_simd, wlm_image_embd *out);

/* Frees e->embd and zeroes *e. NULL is a no-op. */
void wlm_image_embd_free(wlm_image_embd *e);

/* llama.cpp's default media marker: where an image goes in a raw prompt. */
#define WLM_MEDIA_MARKER "<__media__>"

/*
 * Appends an encoded image to sequence `seq` of ctx the way llama.cpp's mtmd lays it out for
 * the mmproj's projector: gemma3 — the text "<start_of_image>", the rows (non-causal among
 * themselves: wlm_eval_embd's non_causal 1), "<end_of_image>"; idefics3 — for each tile
 * "<fake_token_around_image><row_R_col_C>" then its rows, "\n" after each row of tiles but the
 * last, then (after "\n\n" when there are tiles) "<fake_token_around_image><global-img>", the
 * overview's rows, "<fake_token_around_image>"; lfm2 — "<|image_start|>", the rows (causal),
 * "<|image_end|>", or with tiles "<|image_start|>", per tile "<|img_row_R_col_C|>" and its rows,
 * "<|img_thumbnail|>" and the thumbnail's rows, "<|image_end|>"; qwen2.5vl_merger —
 * "<|vision_start|>", the rows (causal; on an M-RoPE text model such as qwen2vl each row at
 * temporal position t, height t + row, width t + column of the image's last_cols × last_rows
 * grid, and the text after it from t + max(last_cols, last_rows), as mtmd), "<|vision_end|>". Each wrapper text is tokenized with special
 * tokens parsed (a vocabulary without them spells them as text, as llama.cpp does). Logits: the
 * last position's. Errors: WLM_ERR_INVALID_ARG (no loaded vision model, no image, rows of
 * another width than the model's: an mmproj of another model), wlm_eval_embd's and
 * wlm_eval_batch's errors; message in wlm_context_errmsg. Positions already evaluated stay.
 */
int wlm_eval_image(wlm_context *ctx, int32_t seq, const wlm_vision *vision, const wlm_image_embd *image);

/*
 * The positions wlm_eval_image takes for `image` with `model`'s vocabulary: the wrapper texts'
 * tokens plus the rows, counted by the same layout without evaluating anything (for measuring a
 * prompt's context use before running it: the Prompt API's measureContextUsage). Returns the
 * count (>= 0), or WLM_ERR_INVALID_ARG (NULL or unloaded model or vision model, a model
 * without tokenizer, no image, rows of another width than the model's) or the tokenizer's error.
 */
int32_t wlm_image_positions(const wlm_model *model, const wlm_vision *vision, const wlm_image_embd *image);

/*
 * A batch (wlm_generate_batch_begin) whose sequences may hold images: sequence i is a text
 * prompt of token ids when tokens[i] is not NULL (n_tokens[i] >= 1 ids, the caller decides about
 * BOS), else the media prompt prompts[i] (lens[i] bytes, one WLM_MEDIA_MARKER per image, laid out
 * as wlm_generate_begin_media does) with n_images[i] images, taken in order from `images` (the
 * text sequences take none). Each sequence's prompt is evaluated on its own sequence (all but
 * its last token), then the last tokens of all of them in one pass: each sequence's tokens are
 * bitwise those it generates alone (wlm_generate_begin_media / wlm_generate_begin), greedy or
 * seeded, since each entry of a pass is computed as alone. Repeated prompts are evaluated again
 * (not forked). params[i] per sequence. Needs n_seq_max >= n_seqs. On a deferred context
 * (the WebGPU backend) every prompt is recorded into one batch and WLM_NEED_LOGITS (2,
 * internal) is returned: the backend runs it, then wlmjs_generate_batch_begin_media_finish
 * cuts each media prompt before its last token (a recurrent hybrid's state restored from the
 * snapshot the backend took there) and begins the batch.
 * Errors: those of wlm_generate_batch_begin and wlm_generate_begin_media, naming the sequence
 * ("sequence i: ") when n_seqs > 1; nothing is evaluated when an argument check fails (markers,
 * ids, counts); a prompt past the context (WLM_ERR_CONTEXT_FULL) or a failed evaluation leaves
 * the context reset.
 */
int wlm_generate_batch_begin_media(wlm_context *ctx, const wlm_vision *vision, int32_t n_seqs,
                                   const int32_t *const *tokens, const int32_t *n_tokens,
                                   const char *const *prompts, const size_t *lens,
                                   const wlm_image_embd *const *images, const int32_t *n_images,
                                   const wlm_gen_params *params);

/*
 * wlm_generate_batch_add with a media prompt (prompt, len bytes; n_images images in order): the
 * prompt is evaluated now into the free slot (a prefill of its own, between two steps: the
 * others wait for it), all but its last token, which the next step evaluates beside the other
 * sequences' decode tokens. Its tokens are bitwise those it generates alone. Returns the slot.
 * Errors: as wlm_generate_batch_add and wlm_generate_begin_media; WLM_ERR_STATE also while a
 * sequence begun by wlm_generate_batch_begin has not had its first step (its first token is
 * sampled from the logits this prefill would replace: add the media sequence after the next
 * wlm_generate_batch_next). The batch is unchanged on error.
 * On a deferred context (kv_cache 2: the WebGPU backend) the whole prompt is recorded into the
 * free slot as one batch and WLM_NEED_LOGITS (2) is returned instead of the slot: the backend
 * runs that batch (it wants no logits), then wlm_generate_batch_add_media_finish joins the
 * sequence and returns its slot. Until then the batch takes no other call (add, end, next:
 * WLM_ERR_STATE; after wlm_generate_abort, next drops the joining sequence and ends the batch).
 */
int32_t wlm_generate_batch_add_media(wlm_context *ctx, const wlm_vision *vision, const char *prompt,
                                     size_t len, const wlm_image_embd *const *images,
                                     int32_t n_images, const wlm_gen_params *params);

/*
 * The second half of wlm_generate_batch_add_media on a deferred context, once the backend ran
 * the recorded prompt: the sequence is cut before its prompt's last token (a recurrent
 * hybrid's state restored from the snapshot the backend took there, as the CPU path restores
 * its own) and joins the running batch, the next step evaluating that token beside the others'
 * decode tokens. params: the sequence's (as given to wlm_generate_batch_add_media). Returns the
 * slot. Errors: WLM_ERR_STATE when no media sequence is joining, or when its recorded batch has
 * not run (the recording is dropped); WLM_ERR_INVALID_ARG (params NULL); setup errors as
 * wlm_generate_batch_add's. On any error the sequence does not join, its slot is freed and the
 * running batch is unchanged.
 */
int32_t wlm_generate_batch_add_media_finish(wlm_context *ctx, const wlm_gen_params *params);

/*
 * Evaluates a raw prompt with images: the text is cut at each WLM_MEDIA_MARKER, each piece
 * tokenized on its own (special tokens parsed; BOS and the vocabulary's other add_special tokens
 * before the first piece only) and evaluated, and each marker replaced by the next image
 * (wlm_eval_image). Logits: the last position's. Errors: WLM_ERR_INVALID_ARG when the number
 * of markers differs from n_images (the message gives both), when there are images but no
 * loaded vision model, bad arguments; the evaluation's errors otherwise.
 */
int wlm_eval_media_prompt(wlm_context *ctx, int32_t seq, const wlm_vision *vision,
                          const char *prompt, size_t len, const wlm_image_embd *images,
                          int32_t n_images);

/*
 * Begins a generation (wlm_generate_next then runs it as usual) on sequence 0 of a raw prompt
 * with images: the context is reset, the prompt evaluated as wlm_eval_media_prompt does (its
 * text always with special tokens parsed and the vocabulary's BOS first, as llama.cpp's mtmd;
 * params' add_bos and parse_special are not used), then the generation starts from its last
 * position (cache_prompt is forced on: nothing but the last token is evaluated twice). Images
 * take one position per row; sampling penalties see only tokens. Errors: those of
 * wlm_eval_media_prompt and wlm_generate_begin; message in wlm_context_errmsg. On a deferred
 * context (kv_cache 2: the WebGPU backend, src/runtime/deferred.c) the prompt's text and image
 * rows are recorded as one batch and 2 (WLM_NEED_LOGITS, internal) is returned: the backend
 * runs that batch, then the generation begins (wlmjs_generate_begin_media_finish). The same
 * holds for wlm_generate_begin_media_cached and wlm_generate_batch_begin_media
 * (wlmjs_generate_batch_begin_media_finish).
 */
int wlm_generate_begin_media(wlm_context *ctx, const wlm_vision *vision, const char *prompt,
                             size_t len, const wlm_image_embd *images, int32_t n_images,
                             const wlm_gen_params *params);

/*
 * wlm_generate_begin_media that reuses the KV cache of an earlier media prompt (a second
 * question about the same images): sequence 0 keeps its first `keep` positions, which the caller
 * knows to hold this prompt's text up to and with its first `skip` images (js/engine/engine.js compares
 * the text pieces and the images' pixel hashes and checks the cached token ids); evaluation
 * resumes at the text after image skip - 1. When sequence 0 no longer holds `keep` positions
 * exactly, or skip is 0, the whole prompt is evaluated from position 0 (as
 * wlm_generate_begin_media). images: n_images pointers (the same image may appear twice; the rows
 * stay the caller's). ends: n_images ints; ends[j] receives the position after image j's last
 * token (those before `skip` are left as given). *kept receives the positions reused. Then the
 * generation begins on the whole sequence as a cached prompt. Errors: those of
 * wlm_generate_begin_media; WLM_ERR_INVALID_ARG for a NULL image, kept or ends, skip outside
 * 0..n_images; message in wlm_context_errmsg.
 */
int wlm_generate_begin_media_cached(wlm_context *ctx, const wlm_vision *vision, const char *prompt,
                                    size_t len, const wlm_image_embd *const *images,
                                    int32_t n_images, const wlm_gen_params *params, int32_t keep,
                                    int32_t skip, int32_t *ends, int32_t *kept);

#ifdef __cplusplus
}
#endif
#endif /* WASMLM_H */
