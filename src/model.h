/*
 * model.h — internal: the model and context handles. A model is hyperparameters plus weight
 * views into the caller's buffer (nothing is copied); a context owns the KV cache, activation
 * buffers, the sampler and the generation state. Shapes are (rows, cols), row-major float32.
 */
#ifndef WASMLM_MODEL_H
#define WASMLM_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "wasmlm.h"
#include "kernels.h"
#include "quant.h"
#include "sampler.h"
#include "tokenizer.h"

#define WLM_ERRMSG_SIZE 256

typedef struct wlm_hparams {
    int32_t dim;          /* transformer width */
    int32_t hidden_dim;   /* feed-forward width */
    int32_t n_layers;
    int32_t n_heads;
    int32_t n_kv_heads;
    int32_t vocab_size;
    int32_t seq_len;
    int32_t head_size;    /* dim / n_heads */
    int32_t kv_dim;       /* head_size * n_kv_heads */
    float norm_eps;       /* RMSNorm epsilon: 1e-5 as in llama2.c */
    float rope_theta;     /* RoPE base frequency: 10000 */
} wlm_hparams;

/* A weight matrix: `rows` output features × `cols` input features, row-major, each row
 * `row_bytes` long in `type`'s encoding (ggml's ne[1] = rows, ne[0] = cols). A view: `data`
 * points into the model file's buffer. */
typedef struct wlm_tensor {
    int32_t type;                 /* enum wlm_type */
    int32_t rows;
    int32_t cols;
    size_t row_bytes;
    const void *data;
} wlm_tensor;

typedef struct wlm_layer_weights {
    const float *rms_att;         /* (dim) */
    const float *rms_ffn;         /* (dim) */
    wlm_tensor wq;                /* (n_heads * head_size, dim) */
    wlm_tensor wk;                /* (kv_dim, dim) */
    wlm_tensor wv;                /* (kv_dim, dim) */
    wlm_tensor wo;                /* (dim, n_heads * head_size) */
    wlm_tensor w1;                /* (hidden_dim, dim): gate */
    wlm_tensor w2;                /* (dim, hidden_dim): down */
    wlm_tensor w3;                /* (hidden_dim, dim): up */
} wlm_layer_weights;

typedef struct wlm_weights {
    wlm_tensor token_embedding;   /* (vocab_size, dim) */
    const float *rms_final;       /* (dim) */
    wlm_tensor wcls;              /* (vocab_size, dim); the embedding itself when shared */
    wlm_layer_weights *layers;    /* (n_layers), allocated by the loader, owned by the model */
} wlm_weights;

struct wlm_model {
    int loaded;                   /* 1 after a successful wlm_model_load */
    wlm_hparams hp;
    wlm_weights w;
    int shared_classifier;
    size_t weight_bytes;
    void *owned_buffer;           /* freed with the model (WLM_LOAD_OWN_BUFFER) */
    float *owned_floats;          /* norm weights converted to F32 by a loader, or NULL */
    int has_tokenizer;
    int vocab_only;               /* WLM_LOAD_VOCAB_ONLY: a tokenizer and no weights (hp zero
                                     except vocab_size, so a context has n_ctx 0) */
    wlm_tokenizer tok;
    char errmsg[WLM_ERRMSG_SIZE];
};

/* Generation state inside a context. */
typedef struct wlm_generation {
    int active;                   /* begun and not finished */
    int done;                     /* WLM_DONE reported (or pending) */
    int32_t stop_reason;
    int32_t pending;              /* emitted token not yet evaluated, -1 if none */
    int32_t n_generated;
    int32_t max_tokens;
    int32_t n_prompt;
    int32_t prev;                 /* previous token, for piece decoding */
    int aborted;
    int n_stop;
    char stop[WLM_MAX_STOP_STRINGS][WLM_MAX_STOP_LEN];
    size_t stop_len[WLM_MAX_STOP_STRINGS];
    char *held;                   /* text held back while it may begin a stop string */
    size_t held_len;
    size_t held_cap;
    char *out;                    /* text released by the current step */
    size_t out_cap;
} wlm_generation;

struct wlm_context {
    const wlm_model *model;
    int32_t n_ctx;
    int kv_cache;
    const wlm_kernels *k;
    int use_simd;                 /* pick traits' matvec_simd over matvec_ref */
    int32_t n_past;               /* tokens evaluated so far */
    int32_t *tokens;              /* (n_ctx) the sequence, needed for no-cache mode and penalties */
    int has_logits;
    /* activations */
    float *x;                     /* (dim) residual stream */
    float *xb;                    /* (dim) */
    float *xb2;                   /* (dim) */
    float *hb;                    /* (hidden_dim) */
    float *hb2;                   /* (hidden_dim) */
    float *q;                     /* (dim) */
    float *att;                   /* (n_heads, n_ctx) attention scores */
    float *logits;                /* (vocab_size) */
    void *xq;                     /* activations converted to a weight's vec_dot_type */
    float *rope_cos, *rope_sin;   /* (head_size / 2) for the current position */
    float *key_cache;             /* (n_layers, n_ctx, kv_dim) */
    float *value_cache;           /* (n_layers, n_ctx, kv_dim) */
    size_t bytes;
    wlm_sampler sampler;
    wlm_generation gen;
    char errmsg[WLM_ERRMSG_SIZE];
};

/* Formats an error into a handle's message buffer; returns `status` for tail calls. */
int wlm_set_error(char *buf, int status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* forward.c: runs the transformer for `token` at position `pos` (< n_ctx), filling the KV
 * cache row pos; computes logits when `want_logits`. */
void wlm_forward(wlm_context *ctx, int32_t token, int32_t pos, int want_logits);

/* forward.c: out = t · x through t's type traits (x: t->cols floats, out: t->rows floats). */
void wlm_matmul(wlm_context *ctx, float *out, const wlm_tensor *t, const float *x);

/* gguf_model.c: maps a GGUF file (architecture "llama") to m (hp, w, tokenizer); message in
 * m->errmsg on error. With vocab_only, reads the tokenizer alone (vocab-only GGUFs). */
int wlm_gguf_load_model(wlm_model *m, const unsigned char *data, size_t size, int vocab_only);

/* llama2c.c: parses a legacy checkpoint into m (hp, w); message in m->errmsg on error. */
int wlm_llama2c_load(wlm_model *m, const unsigned char *data, size_t size);

#endif
