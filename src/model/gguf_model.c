/*
 * gguf_model.c — maps a parsed GGUF file onto a wlm_model (model.h's wlm_gguf_load_model and
 * wlm_gguf_commit_external): the metadata strings, the architecture's row of arch.c, then
 * gguf_hparams.c (hyperparameters and per-layer tables), gguf_weights.c (the weight views, no
 * copy) and the vocabulary through tokenizer/vocab_gguf.c. It does not parse bytes itself
 * (gguf.c does) and does no arithmetic on weights (forward.c does).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "model/gguf_load.h"
#include "model/model.h"

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

static int load_weights(wlm_model *m, const wlm_gguf *g) {
    int rc;
    wlm_gguf_str arch;
    rc = wlm_gguf_get_str(g, "general.architecture", &arch, m->errmsg, WLM_ERRMSG_SIZE);
    if (rc != WLM_OK) return rc;
    m->hp.arch = wlm_arch_find(arch.ptr, arch.len);
    if (!m->hp.arch) {
        char a[40];
        size_t n = arch.len < sizeof a - 1 ? arch.len : sizeof a - 1;
        for (size_t i = 0; i < n; i++)
            a[i] = arch.ptr[i] >= 0x20 && arch.ptr[i] < 0x7f ? arch.ptr[i] : '?';
        a[n] = '\0';
        return wlm_set_error(m->errmsg, WLM_ERR_UNSUPPORTED,
                             "GGUF architecture \"%s\" is not supported (only %s)", a,
                             wlm_arch_list());
    }
    gguf_layers t;
    rc = gguf_read_hparams(m, g, &t);
    if (rc == WLM_OK) rc = gguf_map_weights(m, g, &t);
    gguf_layers_free(&t);
    return rc;
}

/* tokenizer.ggml.suppress_tokens (an array of token ids, Gemma 4): their logits are -inf, as
 * llama.cpp's; ids outside the vocabulary are skipped, as there. */
static int read_suppress(wlm_model *m, const wlm_gguf *g) {
    const char *key = "tokenizer.ggml.suppress_tokens";
    const wlm_gguf_kv *kv = wlm_gguf_find_kv(g, key);
    if (!kv) return WLM_OK;
    if (kv->type != WLM_GGUF_ARRAY)
        return wlm_set_error(m->errmsg, WLM_ERR_FORMAT, "%s is not an array of token ids", key);
    if (kv->arr.n == 0) return WLM_OK;
    if (kv->arr.n > (uint64_t)m->hp.vocab_size)
        return wlm_set_error(m->errmsg, WLM_ERR_FORMAT, "%s holds %llu ids, more than the %d tokens",
                             key, (unsigned long long)kv->arr.n, (int)m->hp.vocab_size);
    if (!(m->suppress = malloc(sizeof(int32_t) * (size_t)kv->arr.n)))
        return wlm_set_error(m->errmsg, WLM_ERR_NOMEM, "out of memory");
    for (uint64_t i = 0; i < kv->arr.n; i++) {
        int64_t id;
        if (wlm_gguf_arr_i64(kv, i, &id) != WLM_OK)
            return wlm_set_error(m->errmsg, WLM_ERR_FORMAT, "%s is not an array of token ids", key);
        if (id >= 0 && id < m->hp.vocab_size) m->suppress[m->n_suppress++] = (int32_t)id;
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

    if ((rc = load_weights(m, g)) != WLM_OK) return rc;

    /* tokenizer/vocab_gguf.c reads the vocabulary through gguf.h and copies it. A file without
     * one can still take a llama2.c tokenizer.bin afterwards (wlm_model_load_tokenizer). */
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
    return read_suppress(m, g);
}

int wlm_gguf_load_model(wlm_model *m, const unsigned char *data, size_t size, int vocab_only,
                        int external) {
    if (!vocab_only && ((uintptr_t)data & 3u) != 0)
        return wlm_set_error(m->errmsg, WLM_ERR_INVALID_ARG, "model buffer must be 4-byte aligned");
    wlm_gguf g;
    int rc = wlm_gguf_parse_ex(&g, data, size, external ? WLM_GGUF_MATRICES_EXTERNAL : 0,
                               m->errmsg, WLM_ERRMSG_SIZE);
    if (rc != WLM_OK) return rc;
    if (external && !vocab_only) {
        m->tensors_external = 1;
        m->tensors_pending = 1;
        m->external_buf = data;
        m->external_size = size;
        if (!(m->external_marks = calloc(g.n_tensors ? g.n_tensors : 1, 1))) {
            wlm_gguf_free(&g);
            return wlm_set_error(m->errmsg, WLM_ERR_NOMEM, "out of memory");
        }
    }
    rc = load(m, &g, vocab_only);
    if (rc != WLM_OK && m->has_tokenizer) {
        wlm_tokenizer_free(&m->tok);
        m->has_tokenizer = 0;
    }
    /* The weights and the tokenizer keep pointers into `data` only, never into g's tables. */
    wlm_gguf_free(&g);
    return rc;
}

int wlm_gguf_commit_external(wlm_model *m) {
    wlm_gguf g;
    int rc = wlm_gguf_parse_ex(&g, m->external_buf, m->external_size, WLM_GGUF_MATRICES_EXTERNAL,
                               m->errmsg, WLM_ERRMSG_SIZE);
    if (rc != WLM_OK) return rc;
    /* map again, now reading the vectors: F16 ones converted, every value checked */
    free(m->w.layers);
    free(m->owned_floats);
    m->owned_floats = NULL;
    memset(&m->w, 0, sizeof m->w);
    const wlm_arch *arch = m->hp.arch;
    const int32_t vocab = m->hp.vocab_size;
    memset(&m->hp, 0, sizeof m->hp);
    m->hp.arch = arch;
    m->tensors_pending = 0;
    rc = load_weights(m, &g);
    if (rc == WLM_OK && m->hp.vocab_size != vocab)
        rc = wlm_set_error(m->errmsg, WLM_ERR_STATE, "the model changed while its tensors were read");
    wlm_gguf_free(&g);
    return rc;
}
