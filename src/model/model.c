/*
 * model.c — the model handle: format detection, loading (llama2c.c), the tokenizer, info,
 * and the status/stop-reason names shared by every handle. Nothing here allocates weights.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/errors.h"
#include "model/model.h"

int wlm_errorf(char *err, size_t errlen, int status, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return status;
}

int wlm_verrorf_at(char *err, size_t errlen, int status, const char *what, const char *text,
                   size_t n, size_t at, const char *fmt, va_list ap) {
    if (!err || !errlen) return status;
    size_t line = 1, col = 1;
    if (at > n) at = n;
    for (size_t k = 0; k < at; k++) {
        if (text[k] == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    int k = snprintf(err, errlen, "%s line %zu, column %zu: ", what, line, col);
    if (k >= 0 && (size_t)k < errlen) vsnprintf(err + k, errlen - (size_t)k, fmt, ap);
    return status;
}

int wlm_set_error(char *buf, int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, WLM_ERRMSG_SIZE, fmt, ap);
    va_end(ap);
    return status;
}

const char *wlm_status_name(int status) {
    switch (status) {
    case WLM_OK: return "WLM_OK";
    case WLM_DONE: return "WLM_DONE";
    case WLM_ERR_INVALID_ARG: return "WLM_ERR_INVALID_ARG";
    case WLM_ERR_NOMEM: return "WLM_ERR_NOMEM";
    case WLM_ERR_FORMAT: return "WLM_ERR_FORMAT";
    case WLM_ERR_TRUNCATED: return "WLM_ERR_TRUNCATED";
    case WLM_ERR_UNSUPPORTED: return "WLM_ERR_UNSUPPORTED";
    case WLM_ERR_TOKENIZER: return "WLM_ERR_TOKENIZER";
    case WLM_ERR_CONTEXT_FULL: return "WLM_ERR_CONTEXT_FULL";
    case WLM_ERR_STATE: return "WLM_ERR_STATE";
    default: return "WLM_ERR_UNKNOWN";
    }
}

const char *wlm_stop_reason_name(int reason) {
    switch (reason) {
    case WLM_STOP_NONE: return "WLM_STOP_NONE";
    case WLM_STOP_MAX_TOKENS: return "WLM_STOP_MAX_TOKENS";
    case WLM_STOP_EOS: return "WLM_STOP_EOS";
    case WLM_STOP_STRING: return "WLM_STOP_STRING";
    case WLM_STOP_CONTEXT_FULL: return "WLM_STOP_CONTEXT_FULL";
    case WLM_STOP_ABORTED: return "WLM_STOP_ABORTED";
    default: return "WLM_STOP_UNKNOWN";
    }
}

void wlm_layer_shapes_finish(wlm_model *m) {
    wlm_hparams *p = &m->hp;
    size_t off = 0;
    for (int32_t l = 0; m->w.layers && l < p->n_layers; l++) {
        wlm_layer_weights *lw = &m->w.layers[l];
        if (lw->head_size == 0) { /* a loader without per-layer shapes: the model's */
            lw->head_size = p->head_size;
            lw->n_kv_heads = p->n_kv_heads;
            lw->q_dim = p->q_dim;
            lw->kv_dim = p->kv_dim;
            lw->n_rot = p->n_rot;
            lw->hidden = p->hidden_dim;
            lw->q_scale = p->q_scale;
            lw->kv_own = lw->mixer == WLM_MIX_ATTN;
            lw->kv_src = l;
        }
        if (lw->mixer != WLM_MIX_ATTN) continue;
        if (lw->kv_own) {
            lw->kv_off = off;
            off += 2 * (size_t)WLM_KV_BLOCK * (size_t)lw->kv_dim;
        } else { /* an earlier layer's cache (the loader checked that it owns one) */
            lw->kv_off = m->w.layers[lw->kv_src].kv_off;
            lw->kv_slot = m->w.layers[lw->kv_src].kv_slot;
        }
    }
    p->kv_elems = off / WLM_KV_BLOCK;
}

int wlm_model_load(const void *data, size_t size, unsigned flags, wlm_model **out) {
    if (!out) {
        if (flags & WLM_LOAD_OWN_BUFFER) free((void *)data);
        return WLM_ERR_INVALID_ARG;
    }
    wlm_model *m = calloc(1, sizeof *m);
    *out = m;
    if (!m) {
        if (flags & WLM_LOAD_OWN_BUFFER) free((void *)data);
        return WLM_ERR_NOMEM;
    }
    if (flags & WLM_LOAD_OWN_BUFFER) m->owned_buffer = (void *)data;
    if (!data) return wlm_set_error(m->errmsg, WLM_ERR_INVALID_ARG, "model data is NULL");
    if (flags & ~(WLM_LOAD_OWN_BUFFER | WLM_LOAD_VOCAB_ONLY | WLM_LOAD_TENSORS_EXTERNAL))
        return wlm_set_error(m->errmsg, WLM_ERR_INVALID_ARG, "unknown flags 0x%x", flags);
    const int gguf = size >= 4 && memcmp(data, "GGUF", 4) == 0;
    const int vocab_only = (flags & WLM_LOAD_VOCAB_ONLY) != 0;
    if (vocab_only && !gguf)
        return wlm_set_error(m->errmsg, WLM_ERR_UNSUPPORTED,
                             "WLM_LOAD_VOCAB_ONLY needs a GGUF file");
    const int external = (flags & WLM_LOAD_TENSORS_EXTERNAL) != 0;
    if (external && !gguf)
        return wlm_set_error(m->errmsg, WLM_ERR_UNSUPPORTED,
                             "WLM_LOAD_TENSORS_EXTERNAL needs a GGUF file");
    int rc = gguf ? wlm_gguf_load_model(m, data, size, vocab_only, external)
                  : wlm_llama2c_load(m, data, size);
    if (rc != WLM_OK) {
        /* Keep the message, drop any partial views. */
        free(m->w.layers);
        free(m->owned_floats);
        m->owned_floats = NULL;
        free(m->suppress);
        m->suppress = NULL;
        m->n_suppress = 0;
        memset(&m->w, 0, sizeof m->w);
        memset(&m->hp, 0, sizeof m->hp);
        return rc;
    }
    wlm_layer_shapes_finish(m);
    m->loaded = 1;
    return WLM_OK;
}

int wlm_model_commit_external(wlm_model *model) {
    if (!model) return WLM_ERR_INVALID_ARG;
    model->errmsg[0] = '\0';
    if (!model->loaded || !model->tensors_external || !model->tensors_pending)
        return wlm_set_error(model->errmsg, WLM_ERR_STATE,
                             "wlm_model_commit_external: the model was not loaded with "
                             "WLM_LOAD_TENSORS_EXTERNAL, or is committed already");
    int rc = wlm_gguf_commit_external(model);
    if (rc != WLM_OK) model->loaded = 0; /* its vectors are bad: nothing may use it */
    else wlm_layer_shapes_finish(model);
    return rc;
}

int wlm_model_load_tokenizer(wlm_model *model, const void *data, size_t size) {
    if (!model) return WLM_ERR_INVALID_ARG;
    model->errmsg[0] = '\0';
    if (!model->loaded)
        return wlm_set_error(model->errmsg, WLM_ERR_STATE, "the model did not load");
    if (model->has_tokenizer)
        return wlm_set_error(model->errmsg, WLM_ERR_STATE, "a tokenizer is already loaded");
    if (!data) return wlm_set_error(model->errmsg, WLM_ERR_INVALID_ARG, "tokenizer data is NULL");
    int rc = wlm_tokenizer_load_llama2c(&model->tok, data, size, model->hp.vocab_size,
                                        model->errmsg, WLM_ERRMSG_SIZE);
    if (rc == WLM_OK) model->has_tokenizer = 1;
    return rc;
}

void wlm_model_free(wlm_model *model) {
    if (!model) return;
    wlm_tokenizer_free(&model->tok);
    free(model->meta_blob);
    free(model->meta_off);
    free(model->meta_len);
    free(model->w.layers);
    free(model->owned_floats);
    free(model->suppress);
    free(model->owned_buffer);
    free(model->external_marks);
    free(model);
}

const char *wlm_model_errmsg(const wlm_model *model) {
    return model ? model->errmsg : "no model (NULL handle)";
}

int wlm_model_get_info(const wlm_model *model, wlm_model_info *info) {
    if (!model || !info) return WLM_ERR_INVALID_ARG;
    if (!model->loaded) return WLM_ERR_STATE;
    memset(info, 0, sizeof *info);
    info->dim = model->hp.dim;
    info->hidden_dim = model->hp.hidden_dim;
    info->n_layers = model->hp.n_layers;
    info->n_heads = model->hp.n_heads;
    info->n_kv_heads = model->hp.n_kv_heads;
    info->vocab_size = model->hp.vocab_size;
    info->seq_len = model->hp.seq_len;
    info->shared_classifier = model->shared_classifier;
    info->has_tokenizer = model->has_tokenizer;
    info->bos_id = model->has_tokenizer ? model->tok.bos_id : 1;
    info->eos_id = model->has_tokenizer ? model->tok.eos_id : 2;
    info->has_chat_template = wlm_model_meta_string(model, "tokenizer.chat_template", NULL) != NULL;
    info->weight_bytes = model->weight_bytes;
    info->n_attn_layers = model->hp.n_attn_layers;
    info->state_bytes = model->hp.state_floats * sizeof(float);
    info->n_expert = model->hp.n_expert;
    info->n_expert_used = model->hp.n_expert_used;
    return WLM_OK;
}

int32_t wlm_tokenize(const wlm_model *model, const char *text, size_t len, int add_bos,
                     int32_t *tokens, int32_t cap) {
    if (!model || (!text && len) || cap < 0 || (!tokens && cap)) return WLM_ERR_INVALID_ARG;
    if (!model->has_tokenizer) return WLM_ERR_TOKENIZER;
    return wlm_tokenizer_encode(&model->tok, text ? text : "", len,
                                add_bos ? WLM_TOKENIZE_ADD_SPECIAL : 0, tokens, cap);
}

int32_t wlm_tokenize_ex(const wlm_model *model, const char *text, size_t len, unsigned flags,
                        int32_t *tokens, int32_t cap) {
    if (!model || (!text && len) || cap < 0 || (!tokens && cap)) return WLM_ERR_INVALID_ARG;
    if (!model->has_tokenizer) return WLM_ERR_TOKENIZER;
    return wlm_tokenizer_encode(&model->tok, text ? text : "", len, flags, tokens, cap);
}

int wlm_token_is_eog(const wlm_model *model, int32_t token) {
    if (!model || !model->has_tokenizer) return 0;
    return wlm_tokenizer_is_eog(&model->tok, token);
}

const char *wlm_model_meta_string(const wlm_model *model, const char *key, size_t *len) {
    if (len) *len = 0;
    if (!model || !key) return NULL;
    for (int32_t i = 0; i < model->n_meta; i++) {
        if (strcmp(model->meta_blob + model->meta_off[2 * i], key) != 0) continue;
        if (len) *len = model->meta_len[i];
        return model->meta_blob + model->meta_off[2 * i + 1];
    }
    return NULL;
}

const char *wlm_token_text(const wlm_model *model, int32_t token, size_t *len) {
    if (len) *len = 0;
    if (!model || !model->has_tokenizer || token < 0 || token >= model->tok.vocab_size) return NULL;
    if (len) *len = model->tok.length[token];
    return model->tok.blob + model->tok.offset[token];
}

const char *wlm_token_piece(const wlm_model *model, int32_t prev, int32_t token, size_t *len) {
    if (len) *len = 0;
    if (!model || !model->has_tokenizer) return NULL;
    return wlm_tokenizer_piece(&model->tok, prev, token, len);
}
