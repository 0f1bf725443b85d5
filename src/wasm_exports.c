/*
 * wasm_exports.c — the wasm module's ABI for js/wasmlm.js: the public C API plus small
 * accessors so JS never depends on struct layouts. Every export takes and returns scalars and
 * pointers (i32 in wasm32). The list of exports lives in tools/exports.txt; a test checks it
 * against this file and the header. This is the only file that includes <emscripten.h>.
 */
#include <emscripten.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/bench_probe.h"
#include "runtime/warmup.h"
#include "kernels/quant.h"
#include "kernels/quantize.h" /* internal: the quantizing writer of tools/synth_gguf.mjs */
#include "model/model.h"        /* internal: the deferred forward pass of js/backend/webgpu/ */
#include "wasmlm.h"
#include "sampling/grammar.h" /* internal: the grammar probe for the benchmark */
#include "runtime/errors.h"
#include "vision/vision.h"      /* internal: one piece's pixels and rows, for js/backend/webgpu/vision.js */

#define API EMSCRIPTEN_KEEPALIVE

/* ---- memory ---- */
/* dlmalloc grows the heap by less than 2 GB per sbrk (HALF_MAX_SIZE_T on wasm32), so a larger
 * block (a 2.4 GB model file) fails on a fresh heap, and after that failure it fails for good.
 * For such a block, a block of half its size is taken and freed first: the heap's free top chunk
 * is then that large (emscripten's dlmalloc never trims: MORECORE_CANNOT_TRIM) and the block
 * needs less than 2 GB more. */
API void *wlmjs_malloc(size_t n) {
    if (n > ((size_t)1 << 31) - ((size_t)1 << 20)) {
        void *half = malloc(n / 2);
        if (!half) return NULL;
        *(volatile char *)half = 0; /* else the compiler drops the malloc/free pair */
        free(half);
    }
    return malloc(n ? n : 1);
}
API void wlmjs_free(void *p) { free(p); }

/* ---- model ---- */
/* Loads and takes ownership of `data` (malloc'd by wlmjs_malloc). Returns the status; the
 * handle (possibly NULL) is written to *out, a 4-byte slot the caller provides. */
API int wlmjs_model_load(void *data, size_t size, wlm_model **out) {
    return wlm_model_load(data, size, WLM_LOAD_OWN_BUFFER, out);
}
/* The same with WLM_LOAD_TENSORS_EXTERNAL: header + resident area, matrices on the GPU
 * (js/backend/webgpu/stream.js); wlm_model_commit_external once the vectors are in. */
API int wlmjs_model_load_external(void *data, size_t size, wlm_model **out) {
    return wlm_model_load(data, size, WLM_LOAD_OWN_BUFFER | WLM_LOAD_TENSORS_EXTERNAL, out);
}

/* One field of wlm_model_info by number: 0 dim, 1 hidden_dim, 2 n_layers, 3 n_heads,
 * 4 n_kv_heads, 5 vocab_size, 6 seq_len, 7 shared_classifier, 8 has_tokenizer, 9 bos_id,
 * 10 eos_id, 11 weight_bytes, 12 has_chat_template, 13 n_attn_layers, 14 state_bytes,
 * 15 n_expert, 16 n_expert_used. Returns
 * -1 for an unknown field or an unloaded model. */
API double wlmjs_model_info(const wlm_model *m, int field) {
    wlm_model_info info;
    if (wlm_model_get_info(m, &info) != WLM_OK) return -1;
    switch (field) {
    case 0: return info.dim;
    case 1: return info.hidden_dim;
    case 2: return info.n_layers;
    case 3: return info.n_heads;
    case 4: return info.n_kv_heads;
    case 5: return info.vocab_size;
    case 6: return info.seq_len;
    case 7: return info.shared_classifier;
    case 8: return info.has_tokenizer;
    case 9: return info.bos_id;
    case 10: return info.eos_id;
    case 11: return (double)info.weight_bytes;
    case 12: return info.has_chat_template;
    case 13: return info.n_attn_layers;
    case 14: return (double)info.state_bytes;
    case 15: return info.n_expert;
    case 16: return info.n_expert_used;
    default: return -1;
    }
}

/* ---- threads ---- */
/* A pool of n threads (wlm_threadpool_new), or NULL with the status in *status (a 4-byte slot). */
API wlm_threadpool *wlmjs_threadpool_new(int n, int *status) {
    wlm_threadpool *p = NULL;
    *status = wlm_threadpool_new(n, &p);
    return p;
}

/* ---- context ---- */
/* Creates a context; writes the handle to *out (see wlm_context_new). */
API int wlmjs_context_new(const wlm_model *m, int n_ctx, int kv_cache, int use_simd,
                          int n_seq_max, int kv_type, int dot_form, int dot_form_batch,
                          wlm_context **out) {
    wlm_context_params p;
    wlm_context_params_default(&p);
    p.n_ctx = n_ctx;
    p.kv_cache = kv_cache;
    p.use_simd = use_simd;
    p.n_seq_max = n_seq_max;
    p.kv_type = kv_type;
    p.dot_form = dot_form;
    p.dot_form_batch = dot_form_batch;
    return wlm_context_new(m, &p, out);
}

/* One field of wlm_kv_stats: 0 block_bytes, 1 blocks_allocated, 2 blocks_used,
 * (5 state_bytes, 6 states, 7 state_bytes_allocated: hybrids' recurrent state) 
 * 3 blocks_shared, 4 block_refs; -1 for an unknown field or a bad handle. */
API double wlmjs_kv_stat(const wlm_context *c, int field) {
    wlm_kv_stats st;
    if (wlm_kv_stats_get(c, &st) != WLM_OK) return -1;
    switch (field) {
    case 0: return (double)st.block_bytes;
    case 1: return st.blocks_allocated;
    case 2: return st.blocks_used;
    case 3: return st.blocks_shared;
    case 4: return st.block_refs;
    case 5: return (double)st.state_bytes;
    case 6: return st.states;
    case 7: return (double)st.state_bytes_allocated;
    default: return -1;
    }
}

/* ---- generation parameters ---- */
/* wlm_gen_params with room for its logit-bias and ban lists (which it points into). */
typedef struct jsparams {
    wlm_gen_params p; /* first member: the address is the wlm_gen_params pointer */
    wlm_logit_bias bias[WLM_MAX_LOGIT_BIAS];
    int32_t banned[WLM_MAX_LOGIT_BIAS];
} jsparams;

/* A heap-allocated wlm_gen_params with the defaults; free with wlmjs_free. */
API wlm_gen_params *wlmjs_gen_params_new(void) {
    jsparams *j = malloc(sizeof *j);
    if (!j) return NULL;
    wlm_gen_params_default(&j->p);
    j->p.logit_bias = j->bias;
    j->p.banned = j->banned;
    return &j->p;
}

/* Appends a logit bias (-Infinity bans) / a banned token to params from wlmjs_gen_params_new.
 * WLM_ERR_INVALID_ARG when the list is full; values are checked by the begin functions. */
API int wlmjs_gen_params_add_bias(wlm_gen_params *p, int token, float bias) {
    jsparams *j = (jsparams *)p;
    if (!p || p->n_logit_bias >= WLM_MAX_LOGIT_BIAS) return WLM_ERR_INVALID_ARG;
    j->bias[p->n_logit_bias].token = token;
    j->bias[p->n_logit_bias].bias = bias;
    p->n_logit_bias++;
    return WLM_OK;
}
API int wlmjs_gen_params_add_ban(wlm_gen_params *p, int token) {
    jsparams *j = (jsparams *)p;
    if (!p || p->n_banned >= WLM_MAX_LOGIT_BIAS) return WLM_ERR_INVALID_ARG;
    j->banned[p->n_banned++] = token;
    return WLM_OK;
}

/* Sets one field by number: 0 temperature, 1 top_k, 2 top_p, 3 repeat_penalty,
 * 4 repeat_last_n, 5 seed (an integer below 2^53), 6 max_tokens, 7 add_bos, 8 min_p,
 * 9 typical_p, 10 presence_penalty, 11 frequency_penalty, 12 order, 13 n_probs,
 * 14 context_shift, 15 n_keep, 16 cache_prompt, 17 parse_special, 18 grammar_lazy,
 * 19 checkpoint, 20 grammar_start_armed. Values are checked by wlm_generate_begin, not here (integers
 * outside ±1e9 and NaN become -1, which the checks refuse). Returns WLM_ERR_INVALID_ARG for an
 * unknown field. */
#define INT_FIELD(v) (((v) != (v) || (v) < -1e9 || (v) > 1e9) ? -1 : (int32_t)(v))
API int wlmjs_gen_params_set(wlm_gen_params *p, int field, double v) {
    if (!p) return WLM_ERR_INVALID_ARG;
    switch (field) {
    case 0: p->temperature = (float)v; break;
    case 1: p->top_k = (v != v || v < -1e9 || v > 1e9) ? -1 : (int32_t)v; break;
    case 2: p->top_p = (float)v; break;
    case 3: p->repeat_penalty = (float)v; break;
    case 4: p->repeat_last_n = (v != v || v < -1e9 || v > 1e9) ? -1 : (int32_t)v; break;
    case 5: p->seed = (v >= 0 && v < 18446744073709551616.0) ? (uint64_t)v : 0; break;
    case 6: p->max_tokens = (v != v || v < -1e9 || v > 1e9) ? -1 : (int32_t)v; break;
    case 7: p->add_bos = v != 0; break;
    case 8: p->min_p = (float)v; break;
    case 9: p->typical_p = (float)v; break;
    case 10: p->presence_penalty = (float)v; break;
    case 11: p->frequency_penalty = (float)v; break;
    case 12: p->order = INT_FIELD(v); break;
    case 13: p->n_probs = INT_FIELD(v); break;
    case 14: p->context_shift = INT_FIELD(v); break;
    case 15: p->n_keep = INT_FIELD(v); break;
    case 16: p->cache_prompt = INT_FIELD(v); break;
    case 17: p->parse_special = INT_FIELD(v); break;
    case 18: p->grammar_lazy = INT_FIELD(v); break;
    case 19: p->checkpoint = INT_FIELD(v); break;
    case 20: p->grammar_start_armed = INT_FIELD(v); break;
    default: return WLM_ERR_INVALID_ARG;
    }
    return WLM_OK;
}

/* Appends a NUL-terminated stop string. WLM_ERR_INVALID_ARG when there are already 8 or it is
 * empty or 64 bytes or longer. */
API int wlmjs_gen_params_add_stop(wlm_gen_params *p, const char *s) {
    if (!p || !s) return WLM_ERR_INVALID_ARG;
    size_t n = strlen(s);
    if (p->n_stop >= WLM_MAX_STOP_STRINGS || n == 0 || n >= WLM_MAX_STOP_LEN)
        return WLM_ERR_INVALID_ARG;
    memcpy(p->stop[p->n_stop], s, n + 1);
    p->n_stop++;
    return WLM_OK;
}

/* Points params at GBNF grammar text (len bytes in the heap; NULL or len 0 with NULL: no
 * grammar). The text is only read by the begin functions, which compile their own copy: keep
 * it alive until begin returns, then free it. */
API int wlmjs_gen_params_set_grammar(wlm_gen_params *p, const char *text, size_t len) {
    if (!p) return WLM_ERR_INVALID_ARG;
    p->grammar = text;
    p->grammar_len = text ? len : 0;
    return WLM_OK;
}

/* Appends a lazy grammar's trigger (wasmlm.h, "Lazy grammars"): token >= 0 a token id, or
 * token -1 and a NUL-terminated word. WLM_ERR_INVALID_ARG when there are already 8, or the
 * word is missing, empty or 64 bytes or longer; ids are checked by begin. */
API int wlmjs_gen_params_add_trigger(wlm_gen_params *p, int token, const char *word) {
    if (!p || p->n_grammar_triggers >= WLM_MAX_GRAMMAR_TRIGGERS) return WLM_ERR_INVALID_ARG;
    wlm_grammar_trigger *t = &p->grammar_triggers[p->n_grammar_triggers];
    memset(t, 0, sizeof *t);
    if (token < 0) {
        size_t n = word ? strlen(word) : 0;
        if (n == 0 || n >= WLM_MAX_STOP_LEN) return WLM_ERR_INVALID_ARG;
        memcpy(t->word, word, n + 1);
    }
    t->token = token < 0 ? -1 : token;
    p->n_grammar_triggers++;
    return WLM_OK;
}

/* Appends a lazy grammar's arming marker (disarm 0: to grammar_arms) or disarming marker
 * (disarm 1: to grammar_disarms) (wasmlm.h, "Arming"): token >= 0 a token id, or token -1 and a
 * NUL-terminated word. WLM_ERR_INVALID_ARG when that list has 4 already, or the word is
 * missing, empty or 64 bytes or longer; ids are checked by begin. */
API int wlmjs_gen_params_add_arm(wlm_gen_params *p, int disarm, int token, const char *word) {
    if (!p) return WLM_ERR_INVALID_ARG;
    int32_t *n = disarm ? &p->n_grammar_disarms : &p->n_grammar_arms;
    if (*n < 0 || *n >= WLM_MAX_GRAMMAR_ARMS) return WLM_ERR_INVALID_ARG;
    wlm_grammar_trigger *t = disarm ? &p->grammar_disarms[*n] : &p->grammar_arms[*n];
    memset(t, 0, sizeof *t);
    if (token < 0) {
        size_t len = word ? strlen(word) : 0;
        if (len == 0 || len >= WLM_MAX_STOP_LEN) return WLM_ERR_INVALID_ARG;
        memcpy(t->word, word, len + 1);
    }
    t->token = token < 0 ? -1 : token;
    (*n)++;
    return WLM_OK;
}

/* ---- tokens ---- */
API wlm_token *wlmjs_token_new(void) { return calloc(1, sizeof(wlm_token)); }
API int wlmjs_token_id(const wlm_token *t) { return t->id; }
API const char *wlmjs_token_piece(const wlm_token *t) { return t->piece; }
API size_t wlmjs_token_piece_len(const wlm_token *t) { return t->piece_len; }
API float wlmjs_token_prob(const wlm_token *t) { return t->prob; }
API float wlmjs_token_prob_sampled(const wlm_token *t) { return t->prob_sampled; }
API int wlmjs_token_n_past(const wlm_token *t) { return t->n_past; }
API int wlmjs_token_stop_reason(const wlm_token *t) { return t->stop_reason; }
API float wlmjs_token_logprob(const wlm_token *t) { return t->logprob; }
API int wlmjs_token_seq(const wlm_token *t) { return t->seq; }
API int wlmjs_token_status(const wlm_token *t) { return t->status; }
API int wlmjs_token_n_probs(const wlm_token *t) { return t->n_probs; }
/* Alternative i (< n_probs) of a token: its id, prob, logprob and prob_sampled. */
API int wlmjs_token_top_id(const wlm_token *t, int i) { return t->top[i].id; }
API float wlmjs_token_top_prob(const wlm_token *t, int i) { return t->top[i].prob; }
API float wlmjs_token_top_logprob(const wlm_token *t, int i) { return t->top[i].logprob; }
API float wlmjs_token_top_prob_sampled(const wlm_token *t, int i) {
    return t->top[i].prob_sampled;
}
/* An array of n wlm_token (for wlm_generate_batch_next), and element i of it. */
API wlm_token *wlmjs_tokens_new(int n) { return calloc(n > 0 ? (size_t)n : 1, sizeof(wlm_token)); }
API wlm_token *wlmjs_token_at(wlm_token *arr, int i) { return arr + i; }

/* ---- batched generation ---- */
/* Begins a batch: the prompts are concatenated in `tokens` (n_tokens[i] each) and params is
 * an array of n_seqs wlm_gen_params pointers. */
API int wlmjs_generate_batch_begin(wlm_context *c, int n_seqs, const int32_t *tokens,
                                   const int32_t *n_tokens, wlm_gen_params *const *params) {
    if (!c || n_seqs < 1 || n_seqs > WLM_MAX_SEQ || !tokens || !n_tokens || !params)
        return wlm_generate_batch_begin(c, n_seqs, NULL, NULL, NULL);
    const int32_t *prompts[WLM_MAX_SEQ];
    wlm_gen_params *gp = malloc(sizeof *gp * (size_t)n_seqs);
    if (!gp) return WLM_ERR_NOMEM;
    size_t off = 0;
    for (int i = 0; i < n_seqs; i++) {
        prompts[i] = tokens + off;
        off += n_tokens[i] > 0 ? (size_t)n_tokens[i] : 0;
        gp[i] = *params[i];
    }
    int rc = wlm_generate_batch_begin(c, n_seqs, prompts, n_tokens, gp);
    free(gp);
    return rc;
}

/* wlm_generate_batch_begin_media: sequence i's prompt is n_tokens[i] ids from `tokens`
 * (concatenated) when n_tokens[i] > 0, else (n_tokens[i] <= 0) lens[i] bytes from `text`
 * (the media prompts concatenated) with n_images[i] images; ptrs holds n_ptrs pointers: the
 * n_seqs wlm_gen_params, then the images in order (one array, so the memory64 adapter widens
 * it). Returns the status. */
API int wlmjs_generate_batch_begin_media(wlm_context *c, const wlm_vision *v, int n_seqs,
                                         const int32_t *tokens, const int32_t *n_tokens,
                                         const char *text, const int32_t *lens,
                                         const int32_t *n_images, void *const *ptrs, int n_ptrs) {
    if (!c || n_seqs < 1 || n_seqs > WLM_MAX_SEQ || !n_tokens || !lens || !n_images || !ptrs ||
        n_ptrs < n_seqs)
        return wlm_generate_batch_begin_media(c, v, n_seqs, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
    const int32_t *toks[WLM_MAX_SEQ];
    const char *prompts[WLM_MAX_SEQ];
    size_t len[WLM_MAX_SEQ];
    int32_t n_img[WLM_MAX_SEQ];
    wlm_gen_params *gp = malloc(sizeof *gp * (size_t)n_seqs);
    if (!gp) return WLM_ERR_NOMEM;
    size_t tok_off = 0, text_off = 0;
    int64_t images = 0;
    for (int i = 0; i < n_seqs; i++) {
        toks[i] = n_tokens[i] > 0 ? tokens + tok_off : NULL;
        tok_off += n_tokens[i] > 0 ? (size_t)n_tokens[i] : 0;
        prompts[i] = n_tokens[i] > 0 ? NULL : text + text_off;
        len[i] = n_tokens[i] > 0 || lens[i] < 0 ? 0 : (size_t)lens[i];
        text_off += len[i];
        n_img[i] = n_tokens[i] > 0 ? 0 : n_images[i];
        images += n_img[i] > 0 ? n_img[i] : 0;
        gp[i] = *(const wlm_gen_params *)ptrs[i];
    }
    int rc = images > n_ptrs - n_seqs
                 ? wlm_generate_batch_begin_media(c, v, n_seqs, NULL, NULL, NULL, NULL, NULL, NULL, NULL)
                 : wlm_generate_batch_begin_media(c, v, n_seqs, toks, n_tokens, prompts, len,
                                                  (const wlm_image_embd *const *)(ptrs + n_seqs),
                                                  n_img, gp);
    free(gp);
    return rc;
}

/* After wlmjs_generate_batch_begin_media on a deferred context returned WLM_NEED_LOGITS (2) and
 * the backend ran the prompts it recorded: begins the batch (each sequence's last token
 * evaluated together, recorded for the logits); ptrs holds the same n_seqs wlm_gen_params
 * pointers as there. Returns the status. */
API int wlmjs_generate_batch_begin_media_finish(wlm_context *c, int n_seqs, void *const *ptrs) {
    if (!c || n_seqs < 1 || n_seqs > WLM_MAX_SEQ || !ptrs)
        return wlm_generate_batch_begin_media_finish(c, 0, NULL);
    wlm_gen_params *gp = malloc(sizeof *gp * (size_t)n_seqs);
    if (!gp) return WLM_ERR_NOMEM;
    for (int i = 0; i < n_seqs; i++) gp[i] = *(const wlm_gen_params *)ptrs[i];
    int rc = wlm_generate_batch_begin_media_finish(c, n_seqs, gp);
    free(gp);
    return rc;
}

/* wlm_generate_batch_add_media (the images an array of n pointers). Returns the slot or the
 * status. */
API int wlmjs_generate_batch_add_media(wlm_context *c, const wlm_vision *v, const char *prompt,
                                       size_t len, const wlm_image_embd *const *images, int32_t n,
                                       const wlm_gen_params *p) {
    return wlm_generate_batch_add_media(c, v, prompt, len, images, n, p);
}

/* ---- beam search ---- */
API int wlmjs_beam_begin(wlm_context *c, const int32_t *prompt, int n, int width, int max_tokens,
                         float length_penalty) {
    wlm_beam_params p;
    wlm_beam_params_default(&p);
    p.width = width;
    p.max_tokens = max_tokens;
    p.length_penalty = length_penalty;
    return wlm_beam_begin(c, prompt, n, &p);
}
/* wlmjs_beam_begin with a GBNF grammar every beam follows (text: len bytes, read by begin
 * only; NULL: none). */
API int wlmjs_beam_begin_grammar(wlm_context *c, const int32_t *prompt, int n, int width,
                                 int max_tokens, float length_penalty, const char *text,
                                 size_t len) {
    wlm_beam_params p;
    wlm_beam_params_default(&p);
    p.width = width;
    p.max_tokens = max_tokens;
    p.length_penalty = length_penalty;
    p.grammar = text;
    p.grammar_len = text ? len : 0;
    return wlm_beam_begin(c, prompt, n, &p);
}
/* Field of result i: 0 n_tokens, 1 logprob, 2 score, 3 stop_reason, 4 the tokens pointer;
 * NaN for a bad index. */
API double wlmjs_beam_field(const wlm_context *c, int i, int field) {
    wlm_beam b;
    if (wlm_beam_get(c, i, &b) != WLM_OK) return 0.0 / 0.0;
    switch (field) {
    case 0: return b.n_tokens;
    case 1: return b.logprob;
    case 2: return b.score;
    case 3: return b.stop_reason;
    case 4: return (double)(uintptr_t)b.tokens;
    default: return 0.0 / 0.0;
    }
}
/* 0: peak KV bytes in use during the last beam search; 1: without sharing. */
API double wlmjs_beam_memory(const wlm_context *c, int which) {
    size_t a = 0, b = 0;
    wlm_beam_memory(c, &a, &b);
    return (double)(which ? b : a);
}

/* ---- grammar probe for the benchmark (bench/grammar.mjs; not used by js/wasmlm.js) ---- */
typedef struct grammar_probe {
    wlm_gram *gram;
    wlm_gram_matcher *matcher;
    uint8_t *mask; /* vocabulary size */
} grammar_probe;

/* A parse of GBNF text (len bytes) over context c's vocabulary (n_vocab tokens), as a
 * generation would start it (the vocabulary's prefix tree is built on first use). NULL on
 * error (wlm_context_errmsg). */
API grammar_probe *wlmjs_probe_grammar_new(wlm_context *c, const char *text, size_t len,
                                           int n_vocab) {
    grammar_probe *p = calloc(1, sizeof *p);
    if (!p || n_vocab < 1) {
        free(p);
        return NULL;
    }
    if (wlm_grammar_setup(c, text, len, -1, "", &p->gram, &p->matcher) != WLM_OK ||
        !(p->mask = malloc((size_t)n_vocab))) {
        wlm_gram_matcher_free(p->matcher);
        wlm_gram_free(p->gram);
        free(p);
        return NULL;
    }
    return p;
}
/* The full mask at the current state (what a generation builds when its sampled token is
 * refused; cached by parser state); returns the number of allowed tokens or a negative status. */
API int wlmjs_probe_grammar_mask(grammar_probe *p) { return wlm_gram_mask(p->matcher, p->mask); }
/* The check of one token (what a generation does first): 1 allowed, 0 not, negative: error. */
API int wlmjs_probe_grammar_allows(grammar_probe *p, int token) {
    return wlm_gram_allows(p->matcher, token);
}
/* Advances the parse over a token; WLM_ERR_INVALID_ARG when it cannot continue it. */
API int wlmjs_probe_grammar_accept(grammar_probe *p, int token) {
    return wlm_gram_accept_token(p->matcher, token);
}
API void wlmjs_probe_grammar_free(grammar_probe *p) {
    if (!p) return;
    wlm_gram_matcher_free(p->matcher);
    wlm_gram_free(p->gram);
    free(p->mask);
    free(p);
}

/* Public API functions exported as they are (the linker keeps them via tools/exports.txt). */

/* Which kernels this module runs (js/runtime/wasm.js reports it as ModelInfo.build): 2 relaxed SIMD
 * (dist/wasmlm-relaxed*.wasm), 1 SIMD128, 0 scalar. */
API int wlmjs_kernels(void) { return wlm_quant_have_relaxed() ? 2 : wlm_quant_have_simd(); }

/* The relaxed build's dot-form probe (wlm_quant_dot_probe, kernels/quant.h): `iters` Q8_0
 * matrix-vector products (with `batch`: Q8_0 and Q5_0 matrix-matrix products) in the form `form`
 * (enum wlm_dot_form), timed by js/runtime/dot_form.js; -1 where that form does not exist. */
API double wlmjs_dot_probe(int form, int batch, int iters) {
    return wlm_quant_dot_probe(form, batch, iters);
}

/* ---- machine probes for the benchmark (bench_probe.h; not used by js/wasmlm.js) ---- */
/* Fills buf[0..bytes) with a pattern, committing every page. */
API void wlmjs_probe_fill(void *buf, size_t bytes) { wlm_probe_fill(buf, bytes); }
/* Reads buf[0..bytes) `reps` times (bytes rounded down to 128); returns a checksum. */
API uint32_t wlmjs_probe_read(const void *buf, size_t bytes, int reps) {
    return wlm_probe_read(buf, bytes, reps);
}
/* `iters` rounds of multiply+add on WLM_PROBE_FMA_ACC register-resident accumulators. */
API float wlmjs_probe_fma(int iters) { return wlm_probe_fma(iters); }
/* FLOPs that wlmjs_probe_fma(iters) performs in this build (SIMD128: 4 lanes). */
API double wlmjs_probe_fma_flops(int iters) { return wlm_probe_fma_flops(iters); }

/* ---- start-up ---- */
/* A throw-away generation of n_tokens (1..8) on a tiny built-in model (src/runtime/warmup.h),
 * so the functions a first generation calls are compiled before it. Returns the tokens made or
 * a negative status. */
API int wlmjs_warmup(int n_tokens) { return wlm_warmup_run(n_tokens); }

/* ---- the quantizing writer of tools/synth_gguf.mjs (quantize.h; not used by js/wasmlm.js) ---- */
/* A quantize target by name ("Q8_0", "Q4_K_M"; NUL-terminated, case-insensitive) into out[0] the
 * single type (F32 for a mix), out[1] the mix id (0: a single type), out[2] general.file_type —
 * as `wasmlm quantize` reads its TYPE argument. Returns 0, or -1 for a name that is not a target
 * or a type whose quantizer is missing. */
API int wlmjs_quantize_target(const char *name, int32_t *out) {
    const int32_t mix = wlm_quantize_mix_from_name(name);
    const int32_t type = mix > 0 ? WLM_TYPE_F32 : wlm_quantize_type_from_name(name);
    char err[160];
    if (type < 0 || (mix <= 0 && wlm_quantize_check_type(type, err, sizeof err) != WLM_OK))
        return -1;
    out[0] = type;
    out[1] = mix > 0 ? mix : WLM_QUANT_MIX_NONE;
    out[2] = (int32_t)wlm_quantize_file_type(out[0], out[1]);
    return 0;
}
/* The type `wasmlm quantize` (wlm_quantize_gguf) writes a tensor in: its name (len bytes),
 * n_dims (1 or 2; 3 or more: stacked matrices, taken as ne[2] > 1 as expert tensors have it,
 * which MXFP4_MOE's rule reads), ne0 elements per row and n_elements in all, its source type, in a file of
 * n_layers layers, tied when it has no output.weight, with n_attn_v attn_v-like tensors of which
 * attn_v_index come before this one (wlm_quantize_gguf_tensor_type), of architecture `arch`
 * (arch_len bytes); target from wlmjs_quantize_target. */
API int32_t wlmjs_quantize_tensor_type(int32_t type, int32_t mix, const char *name, size_t len,
                                       int32_t n_dims, double ne0, double n_elements,
                                       int32_t src_type, int32_t n_layers, int32_t tied,
                                       int32_t n_attn_v, int32_t attn_v_index, const char *arch,
                                       size_t arch_len) {
    wlm_quantize_params p;
    wlm_quantize_params_default(&p);
    p.type = type;
    p.mix = mix;
    wlm_gguf_tensor t;
    memset(&t, 0, sizeof t);
    t.name.ptr = name;
    t.name.len = len;
    t.n_dims = (uint32_t)n_dims;
    for (int i = 0; i < WLM_GGUF_MAX_DIMS; i++) t.ne[i] = 1;
    t.ne[0] = (int64_t)ne0;
    if (n_dims > 1 && ne0 > 0) t.ne[1] = (int64_t)(n_elements / ne0);
    if (n_dims > 2) t.ne[2] = 2; /* stacked matrices; only MXFP4_MOE's ne[2] > 1 reads it */
    t.n_elements = (uint64_t)n_elements;
    t.type = src_type;
    const wlm_quantize_file f = {n_layers, tied != 0, n_attn_v, wlm_quantize_qkv_as_v(arch, arch_len)};
    return wlm_quantize_gguf_tensor_type(&t, &p, &f, attn_v_index);
}
/* Quantizes `rows` rows of `cols` floats at src into dst with the type's quantizer (the
 * from_float that wlm_quantize_gguf uses): rows × wlm_row_bytes(type, cols) bytes, returned;
 * src NULL: only that size. 0 when the type has no quantizer or cols is not a whole number of
 * its blocks. */
API double wlmjs_quantize_rows(int32_t type, const float *src, void *dst, int32_t rows,
                               int32_t cols) {
    const wlm_type_traits *t = wlm_type_get(type);
    if (!t->from_float || rows < 0 || cols <= 0 || (t->block_size > 1 && cols % t->block_size))
        return 0;
    const size_t rb = wlm_row_bytes(type, cols);
    if (!src) return (double)rb * (double)rows;
    for (int32_t r = 0; r < rows; r++)
        t->from_float(src + (size_t)r * (size_t)cols, (unsigned char *)dst + (size_t)r * rb, cols);
    return (double)rb * (double)rows;
}

/* ---- deferred forward pass (js/backend/webgpu/: the transformer runs on the GPU) ----
 * A context created with kv_cache 2 (wlmjs_context_new) records each batch it evaluates; the
 * caller reads it (wlmjs_deferred_field), writes the logits and calls wlmjs_deferred_supplied. */
/* The model as JSON (src/model/describe.c: architecture row, hyperparameters, each weight's
 * [type, rows, cols, row_bytes, heap address]) into buf (cap bytes); returns the full length, or
 * -1 for a model without weights. */
API double wlmjs_model_describe(const wlm_model *m, char *buf, size_t cap) {
    return (double)wlm_model_describe(m, buf, cap);
}
/* One field of a deferred context: 0 entries waiting for logits, 1 their token ids (int32
 * array address), 2 their sequences, 3 their positions, 4 each entry's logits row (-1: none),
 * 5 the logits (rows of vocab_size floats), 6 the RoPE frequencies (n_rope_sets × n_rot/2
 * floats: forward.c's, LongRoPE factors chosen by n_ctx), 7 n_rope_sets, 8 the RoPE attention
 * factor, 9 n_ctx, 10 1 when the batch's logits must equal one-token evaluations bit for bit (a
 * speculative round's verification), else 0; 11 the context shifts to apply to the cache before
 * the batch runs (int32 array address: for each of the n_seq_max sequences n_keep, n_discard
 * (0: none), the length before it; rows n_keep + n_discard .. that length − 1 move down by
 * n_discard, K re-rotated by −n_discard positions), 12 n_seq_max, 13 the forks to apply before
 * the shifts (int32 array address: source, destination, rows 0..n−1, per fork, in order), 14
 * their count; 15 a hybrid's restores (int32 array address: for each of the n_seq_max
 * sequences a snapshot slot (-1: the empty state) and the position it holds (-1: none pending):
 * before the sequence's next entries its state is restored and the stored tokens
 * (wlmjs_seq_tokens) from that position up to the entries' first replayed; the backend writes
 * -1 over the position once done), 16 its snapshots to take (int32 array address: for each
 * sequence, field 17 slots: the position at which its state is copied into the slot, -1: none;
 * the backend writes -1 over each it took), 17 the slots per sequence; 18 the positions each
 * entry attends to (int32 array address: 0 causal, its position + 1; else the end of its
 * non-causal image, whose rows see each other both ways), 19 each entry's input (int32 array
 * address: -1 a token, whose embedding row is gathered; else a row of field 20), 20 the image
 * rows (float array address: rows of the model's width, the inputs of image entries, given in
 * place of an embedding and not scaled), 21 on an M-RoPE model (qwen2vl) each entry's RoPE
 * positions (int32 array address: temporal, height, width per entry; a text token's three equal,
 * an image row's from its grid, src/runtime/deferred.c), else 0, 22 on an M-RoPE model its
 * rope.dimension_sections (int32 array address: 4 widths in rotary pairs; pair i turns by the
 * position of section k where (i mod their sum) falls, the fourth's pairs having frequency 0),
 * else 0. -1 for a bad handle or field. */
API double wlmjs_deferred_field(const wlm_context *c, int field) {
    if (!c || !c->model) return -1;
    switch (field) {
    case 0: return c->dfr_n;
    case 1: return (double)(uintptr_t)c->dfr_tok;
    case 2: return (double)(uintptr_t)c->dfr_seq;
    case 3: return (double)(uintptr_t)c->dfr_pos;
    case 4: return (double)(uintptr_t)c->logit_row;
    case 5: return (double)(uintptr_t)c->logits;
    case 6: return (double)(uintptr_t)c->rope_freq;
    case 7: return c->n_rope_sets;
    case 8: return (double)c->rope_mscale;
    case 9: return c->n_ctx;
    case 10: return c->dfr_exact;
    case 11: return (double)(uintptr_t)c->dfr_shift;
    case 12: return c->n_seq_max;
    case 13: return (double)(uintptr_t)c->dfr_fork;
    case 14: return c->dfr_n_fork;
    case 15: return (double)(uintptr_t)c->dfr_restore;
    case 16: return (double)(uintptr_t)c->dfr_snap;
    case 17: return WLM_STATE_SNAPS;
    case 18: return (double)(uintptr_t)c->dfr_len;
    case 19: return (double)(uintptr_t)c->dfr_erow;
    case 20: return (double)(uintptr_t)c->dfr_embd;
    case 21:
    case 22: {
        const wlm_hparams *p = &c->model->hp;
        if (p->arch->rope_sections != WLM_SECTIONS_MROPE) return 0;
        return field == 21 ? (double)(uintptr_t)c->dfr_rpos : (double)(uintptr_t)p->rope_sections;
    }
    default: return -1;
    }
}
/* The recorded batch's logits are written (and the shift before it applied): sampling may read
 * them. */
API void wlmjs_deferred_supplied(wlm_context *c) {
    if (!c) return;
    c->dfr_n = 0;
    memset(c->dfr_shift, 0, sizeof c->dfr_shift);
    c->dfr_n_fork = 0;
}
/* The token ids of sequence `seq` of a context (int32 array address: positions 0..n_past − 1,
 * the recorded batch's included), valid until the next call on the context; 0 for a bad handle
 * or sequence. A deferred hybrid's backend replays them to rebuild a recurrent state it cannot
 * cut back (js/backend/webgpu/backend.js). */
API double wlmjs_seq_tokens(const wlm_context *c, int32_t seq) {
    if (!c || !c->model || seq < 0 || seq >= c->n_seq_max) return 0;
    return (double)(uintptr_t)c->seqs[seq].tokens;
}
/* After wlm_generate_next / wlm_generate_batch_next returned WLM_NEED_LOGITS (2) and the logits
 * were supplied: the step's sampling (wlm_generate_batch_resume), then wlm_generate_next's
 * return value (the status of out[0]) when `single`, else wlm_generate_batch_next's. */
API int wlmjs_generate_resume(wlm_context *c, wlm_token *out, int single) {
    int rc = wlm_generate_batch_resume(c, out);
    return rc >= 0 && single ? out->status : rc;
}
/* Dequantizes n elements (whole blocks) of `type` at src into n floats at dst with the type's
 * to_float (the reference the GPU kernels are tested against). Returns n, or -1 for an unknown
 * type or a partial block. */
API double wlmjs_dequantize(int32_t type, const void *src, float *dst, double n) {
    if (type < 0 || type >= WLM_TYPE_COUNT || n < 0) return -1;
    const wlm_type_traits *t = wlm_type_get(type);
    if (!t->to_float || (t->block_size > 1 && (int64_t)n % t->block_size)) return -1;
    t->to_float(src, dst, (int64_t)n);
    return n;
}

/* One token of the gated delta rule on one head's d × d state S (in place) with the scalar
 * kernel, wlm_deltanet_ref: the reference js/backend/webgpu/'s DeltaNet kernel is tested
 * against. out: d floats; d <= 256. Returns 0, or -1 for d outside 1..256. */
API int wlmjs_deltanet_ref(float *S, const float *q, const float *k, const float *v, float decay,
                           float beta, float *out, int d) {
    if (d < 1 || d > 256) return -1;
    wlm_deltanet_ref(S, q, k, v, decay, beta, out, d);
    return 0;
}

/* ---- speculative decoding (js/engine/speculative.js) ---- */
/* wlm_generate_speculate with its parameters as scalars: draft a context or NULL, n_draft,
 * ngram (0 = off), p_min. */
API int wlmjs_generate_speculate(wlm_context *c, wlm_context *draft, int n_draft, int ngram,
                                 float p_min) {
    wlm_spec_params p;
    wlm_spec_params_default(&p);
    p.draft = draft;
    p.n_draft = n_draft;
    p.ngram = ngram;
    p.p_min = p_min;
    return wlm_generate_speculate(c, &p);
}
/* One field of wlm_spec_stats: 0 n_rounds, 1 n_drafted, 2 n_accepted; -1 for a bad field. */
API int wlmjs_spec_stat(const wlm_context *c, int field) {
    wlm_spec_stats st;
    if (wlm_spec_stats_get(c, &st) != WLM_OK) return -1;
    return field == 0 ? st.n_rounds : field == 1 ? st.n_drafted : field == 2 ? st.n_accepted : -1;
}

/* The rollback strategy of a recurrent target's speculative verifications (context.c's
 * WLM_ROLL_*: 0 auto, 1 snapshot and replay, 2 a copy per verified position), for
 * bench/speculative.mjs --rollback only (not an API: the default is auto): mode 0..2 sets it,
 * -1 leaves it. Returns the strategy a verification of n entries takes now (1 or 2; 0 for a
 * model without a recurrent state), or WLM_ERR_INVALID_ARG. */
API int wlmjs_spec_rollback(wlm_context *c, int mode, int n) {
    if (!c || !c->model || mode < -1 || mode > WLM_ROLL_POSITIONS || n < 1)
        return WLM_ERR_INVALID_ARG;
    if (mode >= 0) c->roll_mode = mode;
    return c->model->hp.state_floats ? wlm_state_roll_choose(c, n) : 0;
}
/* One speculative round's verification and rollback as speculative.c runs them, without the
 * drafting and the decision, for bench/speculative.mjs --rollback: sequence 0's n tokens tok
 * evaluated with logits at every position (the rollback prepared by its strategy), then the
 * sequence cut to keep of them (1..n: the pending token and keep - 1 accepted drafts). Returns
 * the strategy taken (as wlmjs_spec_rollback; 0 for no recurrent state), or a negative status. */
API int wlmjs_spec_round(wlm_context *c, const int32_t *tok, int n, int keep) {
    if (!c || !c->seqs || !tok || n < 1 || n > WLM_MAX_DRAFT + 1 || keep < 1 || keep > n)
        return WLM_ERR_INVALID_ARG;
    uint8_t want[WLM_MAX_DRAFT + 1];
    memset(want, 1, sizeof want);
    const int32_t n0 = c->seqs[0].n_past;
    const int took = wlm_state_roll_begin(c, 0, n);
    int rc = wlm_eval_batch(c, tok, NULL, want, n);
    wlm_state_roll_recorded(c);
    if (rc == WLM_OK) wlm_seq_truncate_internal(c, 0, n0 + keep);
    wlm_state_roll_drop(c);
    return rc == WLM_OK ? took : rc;
}

/* ---- embeddings ---- */
/* One field of wlm_embed_info by number: 0 n_embd, 1 pooling, 2 causal, 3 generative,
 * 4 n_rank_out. Returns -1 for an unknown field or an unloaded model. wlm_embed and
 * wlm_tokenize_pair are exported as they are. */
API int wlmjs_embed_info(const wlm_model *m, int field) {
    wlm_embed_info info;
    if (wlm_model_embed_info(m, &info) != WLM_OK) return -1;
    switch (field) {
    case 0: return info.n_embd;
    case 1: return info.pooling;
    case 2: return info.causal;
    case 3: return info.generative;
    case 4: return info.n_rank_out;
    default: return -1;
    }
}

/* ---- images in (src/vision/) ---- */
/* Loads an mmproj GGUF (wlm_vision_load with WLM_LOAD_OWN_BUFFER: data malloc'd by wlmjs_malloc,
 * freed by the handle, on failure too). Returns the handle (NULL only when its own allocation
 * failed) and writes the status to *status (an int slot). Free the handle either way. */
API wlm_vision *wlmjs_vision_load(void *data, size_t size, int *status) {
    wlm_vision *v = NULL;
    *status = wlm_vision_load(data, size, WLM_LOAD_OWN_BUFFER, &v);
    return v;
}
/* One field of wlm_vision_info by number: 0 image_size, 1 patch_size, 2 n_embd, 3 n_ff,
 * 4 n_layers, 5 n_heads, 6 proj_dim, 7 scale_factor, 8 longest_edge, 9 piece_tokens; -1 for an
 * unknown field or a handle that did not load. */
API double wlmjs_vision_info(const wlm_vision *v, int field) {
    wlm_vision_info i;
    if (wlm_vision_get_info(v, &i) != WLM_OK) return -1;
    switch (field) {
    case 0: return i.image_size;
    case 1: return i.patch_size;
    case 2: return i.n_embd;
    case 3: return i.n_ff;
    case 4: return i.n_layers;
    case 5: return i.n_heads;
    case 6: return i.proj_dim;
    case 7: return i.scale_factor;
    case 8: return i.longest_edge;
    case 9: return i.piece_tokens;
    default: return -1;
    }
}
/* The projector's name (static string), or "" for a handle that did not load. */
API const char *wlmjs_vision_projector(const wlm_vision *v) {
    wlm_vision_info i;
    return wlm_vision_get_info(v, &i) == WLM_OK ? i.projector : "";
}
/* Encodes an image (wlm_image_encode) into a malloc'd wlm_image_embd. Returns it (NULL on
 * error) and writes the status to *status (an int slot); the message is wlm_vision_errmsg's.
 * Release with wlmjs_image_embd_free. */
API wlm_image_embd *wlmjs_image_encode(wlm_vision *v, const uint8_t *rgb, int32_t width, int32_t height,
                                       wlm_threadpool *pool, int32_t use_simd, int *status) {
    wlm_image_embd *e = calloc(1, sizeof *e);
    if (!e) {
        *status = WLM_ERR_NOMEM;
        return NULL;
    }
    *status = wlm_image_encode(v, rgb, width, height, pool, use_simd, e);
    if (*status != WLM_OK) {
        free(e);
        return NULL;
    }
    return e;
}
/* One field of an encoded image: 0 n_tokens, 1 n_embd, 2 n_pieces, 3 tokens_per_piece,
 * 4 grid_cols, 5 grid_rows, 6 last_tokens; -1 for NULL or an unknown field. */
API int wlmjs_image_embd_field(const wlm_image_embd *e, int field) {
    if (!e) return -1;
    switch (field) {
    case 0: return e->n_tokens;
    case 1: return e->n_embd;
    case 2: return e->n_pieces;
    case 3: return e->tokens_per_piece;
    case 4: return e->grid_cols;
    case 5: return e->grid_rows;
    case 6: return e->last_tokens;
    default: return -1;
    }
}
/* The positions an image of wlmjs_image_encode takes in ctx's model (wlm_image_positions), or a
 * negative status. */
API int32_t wlmjs_image_positions(const wlm_context *c, const wlm_vision *v, const wlm_image_embd *e) {
    return c ? wlm_image_positions(c->model, v, e) : WLM_ERR_INVALID_ARG;
}
/* The normalised pixels of an image's pieces as wlm_image_encode feeds its encoder
 * (wlm_vision_preprocess: tiles row-major, then the overview / the only piece), for the GPU
 * encoder (js/backend/webgpu/vision.js) and its test. dims (5 int32): the piece count, a tile's
 * width and height, the last piece's width and height; each piece is 3 × width × height floats
 * (planes R, G, B, row-major), the pieces end to end. Returns the floats (release with
 * wlmjs_free), or NULL with the status in *status (INVALID_ARG: no loaded vision model, an image
 * outside the limits; NOMEM) and the message in wlm_vision_errmsg. */
API float *wlmjs_vision_preprocess(wlm_vision *v, const uint8_t *rgb, int32_t width, int32_t height,
                                   int32_t *dims, int *status) {
    if (!v || !v->loaded || !rgb || !dims) {
        *status = WLM_ERR_INVALID_ARG;
        return NULL;
    }
    if (width < 1 || height < 1 || width > WLM_IMAGE_MAX_SIDE || height > WLM_IMAGE_MAX_SIDE ||
        (int64_t)width * height > WLM_IMAGE_MAX_PIXELS) {
        *status = wlm_errorf(v->errmsg, sizeof v->errmsg, WLM_ERR_INVALID_ARG,
                             "image: %d×%d pixels is outside 1..%d a side and %d in all", (int)width,
                             (int)height, WLM_IMAGE_MAX_SIDE, WLM_IMAGE_MAX_PIXELS);
        return NULL;
    }
    int cols, rows, tw, th, lw, lh;
    wlm_vision_grid(v, width, height, &cols, &rows);
    const int pieces = cols * rows + 1;
    wlm_vision_piece_dims(v, width, height, cols, rows, 0, &tw, &th);
    wlm_vision_piece_dims(v, width, height, cols, rows, pieces - 1, &lw, &lh);
    float *pix = malloc(((size_t)(pieces - 1) * 3 * tw * th + (size_t)3 * lw * lh) * sizeof *pix);
    if (!pix) {
        *status = wlm_errorf(v->errmsg, sizeof v->errmsg, WLM_ERR_NOMEM, "image: out of memory");
        return NULL;
    }
    *status = wlm_vision_preprocess(v, rgb, width, height, pix);
    if (*status != WLM_OK) {
        free(pix);
        return NULL;
    }
    dims[0] = pieces, dims[1] = tw, dims[2] = th, dims[3] = lw, dims[4] = lh;
    return pix;
}
/* An image encoded elsewhere (wlm_image_embd_from_rows: the GPU encoder's rows of every piece of
 * a width × height image, n_floats of them) as wlmjs_image_encode's result: a malloc'd
 * wlm_image_embd (NULL on error, the status in *status, the message in wlm_vision_errmsg).
 * Release with wlmjs_image_embd_free. */
API wlm_image_embd *wlmjs_image_embd_from_rows(wlm_vision *v, int32_t width, int32_t height,
                                               const float *rows, int32_t n_floats, int *status) {
    wlm_image_embd *e = calloc(1, sizeof *e);
    if (!e) {
        *status = WLM_ERR_NOMEM;
        return NULL;
    }
    *status = n_floats < 0 ? WLM_ERR_INVALID_ARG
                           : wlm_image_embd_from_rows(v, width, height, rows, (size_t)n_floats, e);
    if (*status != WLM_OK) {
        free(e);
        return NULL;
    }
    return e;
}
/* One piece (3 × pw × ph floats from wlmjs_vision_preprocess) through the CPU encoder and
 * projector (wlm_vision_encode_piece): out receives (pw/P/scale)·(ph/P/scale) × proj_dim floats.
 * pw, ph: the image size S each, or for a dynamic-size projector (lfm2) positive multiples of
 * P·scale within the loader's patch limit. Returns the status (INVALID_ARG for another size). */
API int wlmjs_vision_encode_piece(wlm_vision *v, const float *pixels, int32_t pw, int32_t ph, float *out,
                                  wlm_threadpool *pool, int32_t use_simd) {
    if (!v || !v->loaded || !pixels || !out) return WLM_ERR_INVALID_ARG;
    const int32_t m = v->patch_size * v->scale;
    const int ok = v->row->dyn_min_tokens
                       ? pw > 0 && ph > 0 && pw % m == 0 && ph % m == 0 &&
                             (int64_t)(pw / v->patch_size) * (ph / v->patch_size) <= WLM_VISION_MAX_PATCHES
                       : pw == v->image_size && ph == v->image_size;
    if (!ok)
        return wlm_errorf(v->errmsg, sizeof v->errmsg, WLM_ERR_INVALID_ARG,
                          "image: a piece of %d×%d pixels does not fit this encoder", (int)pw, (int)ph);
    return wlm_vision_encode_piece(v, pixels, pw, ph, out, pool, use_simd);
}
/* Frees an image of wlmjs_image_encode (its rows and the struct). NULL is a no-op. */
API void wlmjs_image_embd_free(wlm_image_embd *e) {
    if (!e) return;
    wlm_image_embd_free(e);
    free(e);
}
/* wlm_generate_begin_media with the images given as an array of n pointers (from
 * wlmjs_image_encode; the same image may appear twice). Returns the status. */
API int wlmjs_generate_begin_media(wlm_context *c, const wlm_vision *v, const char *prompt, size_t len,
                                   const wlm_image_embd *const *images, int32_t n, const wlm_gen_params *p) {
    if (n < 0 || n > 1024 || (n > 0 && !images)) return wlm_generate_begin_media(c, v, prompt, len, NULL, -1, p);
    wlm_image_embd *arr = n ? malloc((size_t)n * sizeof *arr) : NULL;
    if (n && !arr) return WLM_ERR_NOMEM;
    for (int32_t i = 0; i < n; i++) {
        if (!images[i]) {
            free(arr);
            return wlm_generate_begin_media(c, v, prompt, len, NULL, -1, p);
        }
        arr[i] = *images[i]; /* shallow: the rows stay the caller's */
    }
    int rc = wlm_generate_begin_media(c, v, prompt, len, arr, n, p);
    free(arr);
    return rc;
}

/* wlm_generate_begin_media_cached (the images an array of n pointers from wlmjs_image_encode;
 * keep, skip, ends and *kept as it documents). Returns the status. */
API int wlmjs_generate_begin_media_cached(wlm_context *c, const wlm_vision *v, const char *prompt, size_t len,
                                          const wlm_image_embd *const *images, int32_t n, const wlm_gen_params *p,
                                          int32_t keep, int32_t skip, int32_t *ends, int32_t *kept) {
    return wlm_generate_begin_media_cached(c, v, prompt, len, images, n, p, keep, skip, ends, kept);
}
/* After wlmjs_generate_begin_media_cached on a deferred context returned WLM_NEED_LOGITS (2):
 * the prompt it recorded (text and image rows, one batch wanting no logits) has run on the
 * backend (wlmjs_deferred_supplied); begins the generation on it as wlm_generate_begin_media
 * does (the prompt's last token evaluated again, recorded for its logits). Returns the status. */
API int wlmjs_generate_begin_media_finish(wlm_context *c, const wlm_gen_params *p) {
    return wlm_generate_begin_media_finish(c, p);
}
