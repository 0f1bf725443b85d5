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

typedef struct wlm_weights {
    const float *token_embedding; /* (vocab_size, dim) */
    const float *rms_att;         /* (n_layers, dim) */
    const float *wq;              /* (n_layers, dim, dim): rows = n_heads * head_size */
    const float *wk;              /* (n_layers, kv_dim, dim) */
    const float *wv;              /* (n_layers, kv_dim, dim) */
    const float *wo;              /* (n_layers, dim, dim) */
    const float *rms_ffn;         /* (n_layers, dim) */
    const float *w1;              /* (n_layers, hidden_dim, dim): gate */
    const float *w2;              /* (n_layers, dim, hidden_dim): down */
    const float *w3;              /* (n_layers, hidden_dim, dim): up */
    const float *rms_final;       /* (dim) */
    const float *wcls;            /* (vocab_size, dim); == token_embedding when shared */
} wlm_weights;

struct wlm_model {
    int loaded;                   /* 1 after a successful wlm_model_load */
    wlm_hparams hp;
    wlm_weights w;
    int shared_classifier;
    size_t weight_bytes;
    void *owned_buffer;           /* freed with the model (WLM_LOAD_OWN_BUFFER) */
    int has_tokenizer;
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

/* llama2c.c: parses a legacy checkpoint into m (hp, w); message in m->errmsg on error. */
int wlm_llama2c_load(wlm_model *m, const unsigned char *data, size_t size);

#endif
