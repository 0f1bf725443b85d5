/*
 * gguf_model.c — maps a parsed GGUF file of architecture "llama" onto a wlm_model:
 * hyperparameters from the llama.* keys, llama.cpp's tensor names onto the weight views (no
 * copy; only F16 norm vectors are converted into m->owned_floats), every shape and type checked
 * against the hyperparameters, and the vocabulary through tokenizer.c. It does not parse bytes
 * itself (gguf.c does) and does not know other architectures.
 *
 * RoPE: llama.cpp's converters store the Q and K weights of "llama" models so that rotary
 * embeddings apply to adjacent pairs (2i, 2i+1) of each head — llama2.c's layout, which
 * forward.c implements — so the weights are used as stored, with no permutation. (Hugging Face
 * checkpoints rotate halves instead; convert_hf_to_gguf permutes their rows into pair order.)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "model/model.h"

/* Bounds on hyperparameters: far above any real Llama, low enough that products of them fit
 * in 64 bits and each matrix dimension in int32. */
#define MAX_DIM 65536
#define MAX_HIDDEN 262144
#define MAX_LAYERS 1024
#define MAX_HEADS 1024
#define MAX_VOCAB (1 << 24)
#define MAX_SEQ (1 << 24)

/* ---- tensors --------------------------------------------------------------------------------- */

/* Formats a tensor type for messages: "Q5_K (13)" or "99 (unknown)". */
static const char *type_desc(int32_t type, char *buf, size_t n) {
    const wlm_type_traits *tr = wlm_type_get(type);
    if (tr->name) snprintf(buf, n, "%s (%d)", tr->name, (int)type);
    else snprintf(buf, n, "%d (unknown)", (int)type);
    return buf;
}

/* Looks up `name` and checks it is a matrix of `rows` × `cols` (GGUF: ne[0] = cols, ne[1] =
 * rows) of a supported type, aligned, with finite values when F32/F16. */
static int get_matrix(wlm_model *m, const wlm_gguf *g, const char *name, int64_t rows,
                      int64_t cols, wlm_tensor *out) {
    char tbuf[48];
    const wlm_gguf_tensor *t = wlm_gguf_find_tensor(g, name);
    if (!t) return wlm_set_error(m->errmsg, WLM_ERR_FORMAT, "GGUF model lacks tensor %s", name);
    if (t->ne[0] != cols || t->ne[1] != rows || t->ne[2] != 1 || t->ne[3] != 1)
        return wlm_set_error(m->errmsg, WLM_ERR_FORMAT,
                             "tensor %s has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld] "
                             "(GGUF order: columns, rows)",
                             name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                             (long long)t->ne[3], (long long)cols, (long long)rows);
    const wlm_type_traits *tr = wlm_type_get(t->type);
    if (!tr->name || !tr->supported || !tr->to_float || !tr->matvec_ref || !tr->matvec_simd ||
        !t->data)
        return wlm_set_error(m->errmsg, WLM_ERR_UNSUPPORTED,
                             "tensor %s has type %s, which is not supported", name,
                             type_desc(t->type, tbuf, sizeof tbuf));
    if (tr->vec_dot_type != WLM_TYPE_F32 && !wlm_type_get(tr->vec_dot_type)->from_float)
        return wlm_set_error(m->errmsg, WLM_ERR_UNSUPPORTED,
                             "tensor %s has type %s, whose activation type cannot be produced",
                             name, tr->name);
    const size_t row_bytes = wlm_row_bytes(t->type, cols);
    if (row_bytes == 0 || (uint64_t)row_bytes * (uint64_t)rows != t->nbytes)
        return wlm_set_error(m->errmsg, WLM_ERR_FORMAT,
                             "tensor %s: %lld columns are not whole %s blocks of %d", name,
                             (long long)cols, tr->name, (int)tr->block_size);
    /* F32 rows are read as float*, block types through 16-bit fields. */
    const uintptr_t align = t->type == WLM_TYPE_F32 ? 4 : 2;
    if ((uintptr_t)t->data % align != 0)
        return wlm_set_error(m->errmsg, WLM_ERR_FORMAT,
                             "tensor %s at file offset %zu is not %u-byte aligned (general."
                             "alignment %u, or a misaligned buffer)",
                             name, (size_t)((const unsigned char *)t->data - g->base),
                             (unsigned)align, g->alignment);
    /* A NaN or Inf in a float weight poisons every logit; catch it at load, as llama2c.c does. */
    if (t->type == WLM_TYPE_F32 || t->type == WLM_TYPE_F16) {
        const uint64_t n = t->n_elements;
        const unsigned char *p = t->data;
        for (uint64_t i = 0; i < n; i++) {
            int bad;
            if (t->type == WLM_TYPE_F32) {
                uint32_t u;
                memcpy(&u, p + 4 * i, 4);
                bad = (u & 0x7f800000u) == 0x7f800000u;
            } else {
                uint16_t h;
                memcpy(&h, p + 2 * i, 2);
                bad = (h & 0x7c00u) == 0x7c00u;
            }
            if (bad)
                return wlm_set_error(m->errmsg, WLM_ERR_FORMAT,
                                     "corrupt model: tensor %s has a non-finite value (NaN or "
                                     "Inf) at element %llu", name, (unsigned long long)i);
        }
    }
    out->type = t->type;
    out->rows = (int32_t)rows;
    out->cols = (int32_t)cols;
    out->row_bytes = row_bytes;
    out->data = t->data;
    return WLM_OK;
}

/* A norm vector of `dim` weights: F32 used in place, F16 converted into *spare (advanced by
 * dim). Other types are refused. GGUF stores norms with n_dims 1, whose ne[1] reads as 1, so
 * get_matrix checks them as 1 × dim. */
static int get_norm(wlm_model *m, const wlm_gguf *g, const char *name, int32_t dim,
                    float **spare, const float **out) {
    wlm_tensor t = {0};
    int rc = get_matrix(m, g, name, 1, dim, &t);
    if (rc != WLM_OK) return rc;
    if (t.type == WLM_TYPE_F32) {
        *out = t.data;
        return WLM_OK;
    }
    if (t.type != WLM_TYPE_F16) {
        char tbuf[48];
        return wlm_set_error(m->errmsg, WLM_ERR_UNSUPPORTED,
                             "norm tensor %s has type %s; only F32 and F16 norms are supported",
                             name, type_desc(t.type, tbuf, sizeof tbuf));
    }
    wlm_type_get(WLM_TYPE_F16)->to_float(t.data, *spare, dim);
    *out = *spare;
    *spare += dim;
    return WLM_OK;
}

/* ---- hyperparameters ------------------------------------------------------------------------- */

static int get_dim(wlm_model *m, const wlm_gguf *g, const char *key, int required, int32_t def,
                   int32_t lo, int32_t hi, int32_t *out) {
    uint32_t v = (uint32_t)def;
    int rc = required ? wlm_gguf_get_u32(g, key, &v, m->errmsg, WLM_ERRMSG_SIZE)
                      : wlm_gguf_get_u32_or(g, key, v, &v, m->errmsg, WLM_ERRMSG_SIZE);
    if (rc != WLM_OK) return rc;
    if (v < (uint32_t)lo || v > (uint32_t)hi)
        return wlm_set_error(m->errmsg, WLM_ERR_FORMAT, "%s = %u is outside %d..%d", key, v,
                             (int)lo, (int)hi);
    *out = (int32_t)v;
    return WLM_OK;
}

static int read_hparams(wlm_model *m, const wlm_gguf *g, wlm_hparams *hp) {
    int rc;
    uint32_t experts = 0;
    if ((rc = get_dim(m, g, "llama.embedding_length", 1, 0, 1, MAX_DIM, &hp->dim)) ||
        (rc = get_dim(m, g, "llama.feed_forward_length", 1, 0, 1, MAX_HIDDEN, &hp->hidden_dim)) ||
        (rc = get_dim(m, g, "llama.block_count", 1, 0, 1, MAX_LAYERS, &hp->n_layers)) ||
        (rc = get_dim(m, g, "llama.attention.head_count", 1, 0, 1, MAX_HEADS, &hp->n_heads)) ||
        (rc = get_dim(m, g, "llama.attention.head_count_kv", 0, hp->n_heads, 1, MAX_HEADS,
                      &hp->n_kv_heads)) ||
        (rc = get_dim(m, g, "llama.context_length", 1, 0, 1, MAX_SEQ, &hp->seq_len)) ||
        (rc = wlm_gguf_get_f32_or(g, "llama.rope.freq_base", 10000.0f, &hp->rope_theta,
                                  m->errmsg, WLM_ERRMSG_SIZE)) ||
        (rc = wlm_gguf_get_f32_or(g, "llama.attention.layer_norm_rms_epsilon", 1e-5f,
                                  &hp->norm_eps, m->errmsg, WLM_ERRMSG_SIZE)) ||
        (rc = wlm_gguf_get_u32_or(g, "llama.expert_count", 0, &experts, m->errmsg,
                                  WLM_ERRMSG_SIZE)))
        return rc;
    if (hp->dim % hp->n_heads != 0 || (hp->dim / hp->n_heads) % 2 != 0)
        return wlm_set_error(m->errmsg, WLM_ERR_FORMAT,
                             "llama.embedding_length %d is not head_count %d times an even head "
                             "size", (int)hp->dim, (int)hp->n_heads);
    if (hp->n_kv_heads > hp->n_heads || hp->n_heads % hp->n_kv_heads != 0)
        return wlm_set_error(m->errmsg, WLM_ERR_FORMAT,
                             "attention.head_count %d is not a multiple of head_count_kv %d",
                             (int)hp->n_heads, (int)hp->n_kv_heads);
    if (!(hp->rope_theta > 0.0f) || !(hp->rope_theta < 1e30f))
        return wlm_set_error(m->errmsg, WLM_ERR_FORMAT, "llama.rope.freq_base %g is not positive",
                             (double)hp->rope_theta);
    if (!(hp->norm_eps >= 0.0f) || !(hp->norm_eps < 1.0f))
        return wlm_set_error(m->errmsg, WLM_ERR_FORMAT,
                             "llama.attention.layer_norm_rms_epsilon %g is outside [0, 1)",
                             (double)hp->norm_eps);
    hp->head_size = hp->dim / hp->n_heads;
    hp->kv_dim = hp->head_size * hp->n_kv_heads;

    /* Variants of the llama architecture that forward.c does not implement. */
    if (experts > 1)
        return wlm_set_error(m->errmsg, WLM_ERR_UNSUPPORTED,
                             "mixture-of-experts models (llama.expert_count %u) are not supported",
                             experts);
    int32_t rope_dims = 0, key_len = 0, value_len = 0;
    if ((rc = get_dim(m, g, "llama.rope.dimension_count", 0, hp->head_size, 0, MAX_DIM,
                      &rope_dims)) ||
        (rc = get_dim(m, g, "llama.attention.key_length", 0, hp->head_size, 0, MAX_DIM,
                      &key_len)) ||
        (rc = get_dim(m, g, "llama.attention.value_length", 0, hp->head_size, 0, MAX_DIM,
                      &value_len)))
        return rc;
    if (rope_dims != hp->head_size)
        return wlm_set_error(m->errmsg, WLM_ERR_UNSUPPORTED,
                             "llama.rope.dimension_count %d differs from the head size %d (partial "
                             "rotary embeddings are not supported)", (int)rope_dims,
                             (int)hp->head_size);
    if (key_len != hp->head_size || value_len != hp->head_size)
        return wlm_set_error(m->errmsg, WLM_ERR_UNSUPPORTED,
                             "attention.key_length %d / value_length %d differ from the head size "
                             "%d, which is not supported", (int)key_len, (int)value_len,
                             (int)hp->head_size);
    /* RoPE scaling (linear, YaRN, ...) changes the angles; a factor of 1 (or 0, "unset") is
     * plain RoPE whatever scaling.type says. */
    const wlm_gguf_kv *scaling = wlm_gguf_find_kv(g, "llama.rope.scaling.type");
    if (scaling && !(scaling->type == WLM_GGUF_STRING && wlm_gguf_str_eq(scaling->str, "none"))) {
        float factor = 1.0f;
        rc = wlm_gguf_get_f32_or(g, "llama.rope.scaling.factor", 1.0f, &factor, m->errmsg,
                                 WLM_ERRMSG_SIZE);
        if (rc != WLM_OK) return rc;
        if (factor != 1.0f && factor != 0.0f)
            return wlm_set_error(m->errmsg, WLM_ERR_UNSUPPORTED,
                                 "RoPE scaling (llama.rope.scaling.factor %g) is not supported",
                                 (double)factor);
    }
    if (wlm_gguf_find_tensor(g, "rope_freqs.weight"))
        return wlm_set_error(m->errmsg, WLM_ERR_UNSUPPORTED,
                             "tensor rope_freqs.weight (Llama 3.1 RoPE frequency scaling) is not "
                             "supported");
    return WLM_OK;
}

/* ---- weights --------------------------------------------------------------------------------- */

static int map_weights(wlm_model *m, const wlm_gguf *g) {
    wlm_hparams *hp = &m->hp;
    wlm_weights *w = &m->w;
    const int32_t D = hp->dim, H = hp->hidden_dim, KV = hp->kv_dim, L = hp->n_layers;
    int rc;

    /* The vocabulary size comes from the embedding's row count. */
    const wlm_gguf_tensor *emb = wlm_gguf_find_tensor(g, "token_embd.weight");
    if (!emb) return wlm_set_error(m->errmsg, WLM_ERR_FORMAT, "GGUF model lacks tensor token_embd.weight");
    if (emb->ne[1] < 1 || emb->ne[1] > MAX_VOCAB)
        return wlm_set_error(m->errmsg, WLM_ERR_FORMAT,
                             "tensor token_embd.weight has %lld rows; the vocabulary must be "
                             "1..%d", (long long)emb->ne[1], MAX_VOCAB);
    hp->vocab_size = (int32_t)emb->ne[1];
    uint32_t vocab_key = 0;
    if (wlm_gguf_find_kv(g, "llama.vocab_size")) {
        rc = wlm_gguf_get_u32(g, "llama.vocab_size", &vocab_key, m->errmsg, WLM_ERRMSG_SIZE);
        if (rc != WLM_OK) return rc;
        if (vocab_key != (uint32_t)hp->vocab_size)
            return wlm_set_error(m->errmsg, WLM_ERR_FORMAT,
                                 "llama.vocab_size %u differs from token_embd.weight's %d rows",
                                 vocab_key, (int)hp->vocab_size);
    }
    const int32_t V = hp->vocab_size;
    if ((rc = get_matrix(m, g, "token_embd.weight", V, D, &w->token_embedding))) return rc;

    /* F16 norms are converted once; count them first so one allocation holds them all. */
    size_t n_f16_norms = 0; /* at most 2 * 1024 + 1 */
    char name[64];
    for (int32_t l = 0; l <= L; l++) {
        for (int k = 0; k < 2; k++) {
            if (l == L && k == 1) break;
            if (l == L) snprintf(name, sizeof name, "output_norm.weight");
            else snprintf(name, sizeof name, "blk.%d.%s.weight", (int)l, k ? "ffn_norm" : "attn_norm");
            const wlm_gguf_tensor *t = wlm_gguf_find_tensor(g, name);
            if (t && t->type == WLM_TYPE_F16) n_f16_norms++;
        }
    }
    float *spare = NULL;
    if (n_f16_norms) {
        m->owned_floats = calloc(n_f16_norms * (size_t)D, sizeof(float));
        if (!m->owned_floats)
            return wlm_set_error(m->errmsg, WLM_ERR_NOMEM, "out of memory for the norm weights");
        spare = m->owned_floats;
    }

    w->layers = calloc((size_t)(uint32_t)L, sizeof *w->layers);
    if (!w->layers) return wlm_set_error(m->errmsg, WLM_ERR_NOMEM, "out of memory for %d layers", (int)L);
    for (int32_t l = 0; l < L; l++) {
        wlm_layer_weights *lw = &w->layers[l];
        struct { const char *suffix; wlm_tensor *dst; int32_t rows, cols; } mats[] = {
            {"attn_q", &lw->wq, D, D},
            {"attn_k", &lw->wk, KV, D},
            {"attn_v", &lw->wv, KV, D},
            {"attn_output", &lw->wo, D, D},
            {"ffn_gate", &lw->w1, H, D},
            {"ffn_down", &lw->w2, D, H},
            {"ffn_up", &lw->w3, H, D},
        };
        for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++) {
            snprintf(name, sizeof name, "blk.%d.%s.weight", (int)l, mats[i].suffix);
            if ((rc = get_matrix(m, g, name, mats[i].rows, mats[i].cols, mats[i].dst))) return rc;
        }
        snprintf(name, sizeof name, "blk.%d.attn_norm.weight", (int)l);
        if ((rc = get_norm(m, g, name, D, &spare, &lw->rms_att))) return rc;
        snprintf(name, sizeof name, "blk.%d.ffn_norm.weight", (int)l);
        if ((rc = get_norm(m, g, name, D, &spare, &lw->rms_ffn))) return rc;
    }
    if ((rc = get_norm(m, g, "output_norm.weight", D, &spare, &w->rms_final))) return rc;

    m->shared_classifier = wlm_gguf_find_tensor(g, "output.weight") == NULL;
    if (m->shared_classifier) w->wcls = w->token_embedding;
    else if ((rc = get_matrix(m, g, "output.weight", V, D, &w->wcls))) return rc;

    /* Bytes read per token: every layer matrix and norm, the final norm, the classifier and one
     * embedding row (the whole table is already counted when it is the classifier). */
    uint64_t bytes = 0;
    for (int32_t l = 0; l < L; l++) {
        const wlm_layer_weights *lw = &w->layers[l];
        const wlm_tensor *t[] = {&lw->wq, &lw->wk, &lw->wv, &lw->wo, &lw->w1, &lw->w2, &lw->w3};
        for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
            bytes += (uint64_t)t[i]->row_bytes * (uint64_t)t[i]->rows;
        bytes += 2 * (uint64_t)D * sizeof(float);
    }
    bytes += (uint64_t)D * sizeof(float);
    bytes += (uint64_t)w->wcls.row_bytes * (uint64_t)w->wcls.rows;
    if (!m->shared_classifier) bytes += w->token_embedding.row_bytes;
    m->weight_bytes = bytes > SIZE_MAX ? SIZE_MAX : (size_t)bytes;
    return WLM_OK;
}

/* ---- entry point ----------------------------------------------------------------------------- */

int wlm_model_copy_meta(wlm_model *m, const wlm_gguf *g) {
    size_t bytes = 0;
    int32_t n = 0;
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const wlm_gguf_kv *kv = &g->kv[i];
        if (kv->type != WLM_GGUF_STRING) continue;
        bytes += kv->key.len + kv->str.len + 2;
        n++;
    }
    if (n == 0) return WLM_OK;
    m->meta_blob = malloc(bytes);
    m->meta_off = malloc(sizeof(size_t) * 2 * (size_t)n);
    m->meta_len = malloc(sizeof(size_t) * (size_t)n);
    if (!m->meta_blob || !m->meta_off || !m->meta_len)
        return wlm_set_error(m->errmsg, WLM_ERR_NOMEM, "out of memory for the metadata strings");
    size_t b = 0;
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const wlm_gguf_kv *kv = &g->kv[i];
        if (kv->type != WLM_GGUF_STRING) continue;
        int32_t k = m->n_meta++;
        m->meta_off[2 * k] = b;
        if (kv->key.len) memcpy(m->meta_blob + b, kv->key.ptr, kv->key.len);
        b += kv->key.len;
        m->meta_blob[b++] = '\0';
        m->meta_off[2 * k + 1] = b;
        m->meta_len[k] = kv->str.len;
        if (kv->str.len) memcpy(m->meta_blob + b, kv->str.ptr, kv->str.len);
        b += kv->str.len;
        m->meta_blob[b++] = '\0';
    }
    return WLM_OK;
}

static int load(wlm_model *m, const wlm_gguf *g, int vocab_only) {
    int rc;
    if ((rc = wlm_model_copy_meta(m, g)) != WLM_OK) return rc;
    const int has_vocab = wlm_gguf_find_kv(g, "tokenizer.ggml.tokens") != NULL;
    if (vocab_only) {
        if (!has_vocab)
            return wlm_set_error(m->errmsg, WLM_ERR_TOKENIZER,
                                 "this GGUF file has no vocabulary (tokenizer.ggml.tokens)");
        rc = wlm_tokenizer_load_gguf(&m->tok, g, m->errmsg, WLM_ERRMSG_SIZE);
        if (rc != WLM_OK) return rc;
        m->has_tokenizer = 1;
        m->vocab_only = 1;
        m->hp.vocab_size = m->tok.vocab_size;
        return WLM_OK;
    }

    wlm_gguf_str arch;
    rc = wlm_gguf_get_str(g, "general.architecture", &arch, m->errmsg, WLM_ERRMSG_SIZE);
    if (rc != WLM_OK) return rc;
    if (!wlm_gguf_str_eq(arch, "llama")) {
        char a[40];
        size_t n = arch.len < sizeof a - 1 ? arch.len : sizeof a - 1;
        for (size_t i = 0; i < n; i++)
            a[i] = arch.ptr[i] >= 0x20 && arch.ptr[i] < 0x7f ? arch.ptr[i] : '?';
        a[n] = '\0';
        return wlm_set_error(m->errmsg, WLM_ERR_UNSUPPORTED,
                             "GGUF architecture \"%s\" is not supported (only \"llama\")", a);
    }
    if ((rc = read_hparams(m, g, &m->hp))) return rc;
    if ((rc = map_weights(m, g))) return rc;

    /* tokenizer.c reads the vocabulary through gguf.h and copies it. A file without one can
     * still take a llama2.c tokenizer.bin afterwards (wlm_model_load_tokenizer). */
    if (has_vocab) {
        rc = wlm_tokenizer_load_gguf(&m->tok, g, m->errmsg, WLM_ERRMSG_SIZE);
        if (rc != WLM_OK) return rc;
        if (m->tok.vocab_size != m->hp.vocab_size) {
            int32_t n = m->tok.vocab_size;
            wlm_tokenizer_free(&m->tok);
            return wlm_set_error(m->errmsg, WLM_ERR_TOKENIZER,
                                 "the vocabulary has %d tokens, token_embd.weight has %d rows",
                                 (int)n, (int)m->hp.vocab_size);
        }
        m->has_tokenizer = 1;
    }
    return WLM_OK;
}

int wlm_gguf_load_model(wlm_model *m, const unsigned char *data, size_t size, int vocab_only) {
    if (!vocab_only && ((uintptr_t)data & 3u) != 0)
        return wlm_set_error(m->errmsg, WLM_ERR_INVALID_ARG, "model buffer must be 4-byte aligned");
    wlm_gguf g;
    int rc = wlm_gguf_parse(&g, data, size, m->errmsg, WLM_ERRMSG_SIZE);
    if (rc != WLM_OK) return rc;
    rc = load(m, &g, vocab_only);
    if (rc != WLM_OK && m->has_tokenizer) {
        wlm_tokenizer_free(&m->tok);
        m->has_tokenizer = 0;
    }
    /* The weights and the tokenizer keep pointers into `data` only, never into g's tables. */
    wlm_gguf_free(&g);
    return rc;
}
