/*
 * quantize.c — a loaded model out as a GGUF file of one weight type (see quantize.h): the
 * tensor plan (names, shapes, each matrix's type with fallbacks), the llama.* and tokenizer
 * key/values, and the row-by-row conversion through the type traits. It does not parse files
 * (model.c / gguf.c did) nor know the container's bytes (gguf_write.c does).
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/errors.h"
#include "kernels/quantize.h"

#define fail wlm_errorf /* errors.h */

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void say(const wlm_quantize_params *p, const char *fmt, ...) {
    if (!p->log) return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    p->log(p->user, msg);
}

/* The writer's message, or ours when the writer has none. */
static int writer_fail(const wlm_gguf_writer *w, char *err, size_t errlen) {
    return fail(err, errlen, w->status != WLM_OK ? w->status : WLM_ERR_STATE, "%s",
                w->err[0] ? w->err : "GGUF writer failed");
}

/* ---- types --------------------------------------------------------------------------------- */

static const int32_t targets[] = {WLM_TYPE_F32,  WLM_TYPE_F16,  WLM_TYPE_BF16, WLM_TYPE_Q8_0,
                                  WLM_TYPE_Q4_0, WLM_TYPE_Q4_1, WLM_TYPE_Q5_0, WLM_TYPE_Q5_1,
                                  WLM_TYPE_Q2_K, WLM_TYPE_Q3_K, WLM_TYPE_Q4_K, WLM_TYPE_Q5_K,
                                  WLM_TYPE_Q6_K};

/* llama.cpp's mixes: name, llama_ftype, and the type of the matrices no rule singles out. */
static const struct {
    const char *name;
    int32_t mix, base;
} mixes[] = {
    {"Q3_K_M", WLM_QUANT_MIX_Q3_K_M, WLM_TYPE_Q3_K},
    {"Q4_K_M", WLM_QUANT_MIX_Q4_K_M, WLM_TYPE_Q4_K},
    {"Q5_K_M", WLM_QUANT_MIX_Q5_K_M, WLM_TYPE_Q5_K},
};

void wlm_quantize_params_default(wlm_quantize_params *p) {
    memset(p, 0, sizeof *p);
    p->type = WLM_TYPE_F32;
}

static int same_name(const char *a, const char *b) {
    size_t k = 0;
    while (a[k] && b[k] && toupper((unsigned char)a[k]) == toupper((unsigned char)b[k])) k++;
    return !a[k] && !b[k];
}

int32_t wlm_quantize_type_from_name(const char *name) {
    if (!name) return -1;
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++)
        if (same_name(wlm_type_get(targets[i])->name, name)) return targets[i];
    return -1;
}

int32_t wlm_quantize_mix_from_name(const char *name) {
    if (!name) return -1;
    for (size_t i = 0; i < sizeof mixes / sizeof mixes[0]; i++)
        if (same_name(mixes[i].name, name)) return mixes[i].mix;
    return -1;
}

/* The entry of a mix, or NULL. */
static int mix_index(int32_t mix) {
    for (size_t i = 0; i < sizeof mixes / sizeof mixes[0]; i++)
        if (mixes[i].mix == mix) return (int)i;
    return -1;
}

const char *wlm_quantize_mix_name(int32_t mix) {
    const int i = mix_index(mix);
    return i < 0 ? NULL : mixes[i].name;
}

static int is_target(int32_t type) {
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++)
        if (targets[i] == type) return 1;
    return 0;
}

/* llama.cpp's fallbacks for rows that are not whole blocks (tensor_type_fallback in
 * src/llama-quant.cpp), then F16 when the fallback does not fit either; F32 and the float types
 * fit any row. For the 32-element types (Q8_0, Q4_0, ...) llama.cpp has no fallback and refuses
 * the file; here they fall back to F16. */
int32_t wlm_quantize_tensor_type(int32_t target, int64_t cols) {
    const wlm_type_traits *t = wlm_type_get(target);
    if (t->block_size <= 1 || cols % t->block_size == 0) return target;
    int32_t fb;
    switch (target) {
    case WLM_TYPE_Q2_K:
    case WLM_TYPE_Q3_K: fb = WLM_TYPE_Q4_0; break;
    case WLM_TYPE_Q4_K: fb = WLM_TYPE_Q5_0; break;
    case WLM_TYPE_Q5_K: fb = WLM_TYPE_Q5_1; break;
    case WLM_TYPE_Q6_K: fb = WLM_TYPE_Q8_0; break;
    default: return WLM_TYPE_F16;
    }
    return cols % wlm_type_get(fb)->block_size == 0 ? fb : WLM_TYPE_F16;
}

/* llama.cpp's use_more_bits: the first and last eighth of the layers and every third between. */
static int use_more_bits(int layer, int n_layers) {
    return layer < n_layers / 8 || layer >= 7 * n_layers / 8 || (layer - n_layers / 8) % 3 == 2;
}

/* A mix's type for a matrix before the fallback for its row length (-1: no such mix). */
static int32_t mix_rule_type(int32_t mix, int kind, int layer, int n_layers, int64_t cols,
                             int tied) {
    const int mi = mix_index(mix);
    if (mi < 0) return -1;
    int32_t t = mixes[mi].base;
    if (kind == WLM_QUANT_OUTPUT || (kind == WLM_QUANT_TOKEN_EMBD && tied)) {
        /* the classifier: Q6_K when its rows are whole K blocks, else Q8_0 (no fallback) */
        return cols % WLM_QK_K == 0 ? WLM_TYPE_Q6_K : WLM_TYPE_Q8_0;
    }
    switch (kind) {
    case WLM_QUANT_ATTN_V:
        if (mix == WLM_QUANT_MIX_Q3_K_M) t = layer < 2 ? WLM_TYPE_Q5_K : WLM_TYPE_Q4_K;
        else if (use_more_bits(layer, n_layers)) t = WLM_TYPE_Q6_K;
        break;
    case WLM_QUANT_FFN_DOWN:
        if (mix == WLM_QUANT_MIX_Q3_K_M)
            t = layer < n_layers / 16 ? WLM_TYPE_Q5_K : WLM_TYPE_Q4_K;
        else if (use_more_bits(layer, n_layers)) t = WLM_TYPE_Q6_K;
        break;
    case WLM_QUANT_ATTN_OUTPUT:
        if (mix == WLM_QUANT_MIX_Q3_K_M) t = WLM_TYPE_Q4_K;
        break;
    case WLM_QUANT_ATTN_QKV:
        t = mix == WLM_QUANT_MIX_Q3_K_M ? WLM_TYPE_Q4_K
            : mix == WLM_QUANT_MIX_Q4_K_M ? WLM_TYPE_Q5_K
                                          : WLM_TYPE_Q6_K;
        break;
    default: break;
    }
    return t;
}

int32_t wlm_quantize_mix_tensor_type(int32_t mix, int kind, int layer, int n_layers, int64_t cols,
                                     int tied) {
    const int32_t t = mix_rule_type(mix, kind, layer, n_layers, cols, tied);
    return t < 0 ? -1 : wlm_quantize_tensor_type(t, cols);
}

/* llama.cpp's llama_ftype for a file of mostly `type` (or of a mix). */
static uint32_t file_type(int32_t type, int32_t mix) {
    if (mix) return (uint32_t)mix;
    switch (type) {
    case WLM_TYPE_F16: return 1;
    case WLM_TYPE_Q4_0: return 2;
    case WLM_TYPE_Q4_1: return 3;
    case WLM_TYPE_Q8_0: return 7;
    case WLM_TYPE_Q5_0: return 8;
    case WLM_TYPE_Q5_1: return 9;
    case WLM_TYPE_Q2_K: return 10; /* MOSTLY_Q2_K */
    case WLM_TYPE_Q3_K: return 11; /* MOSTLY_Q3_K_S */
    case WLM_TYPE_Q4_K: return 14; /* MOSTLY_Q4_K_S: Q4_K throughout */
    case WLM_TYPE_Q5_K: return 16; /* MOSTLY_Q5_K_S */
    case WLM_TYPE_Q6_K: return 18;
    case WLM_TYPE_BF16: return 32;
    default: return 0;
    }
}

static int check_one(int32_t type, char *err, size_t errlen) {
    const wlm_type_traits *t = wlm_type_get(type);
    if (!t->from_float)
        return fail(err, errlen, WLM_ERR_UNSUPPORTED,
                    "quantizing to %s is not available yet (its quantizer is missing)",
                    t->name ? t->name : "?");
    return WLM_OK;
}

int wlm_quantize_check_type(int32_t target, char *err, size_t errlen) {
    if (!is_target(target))
        return fail(err, errlen, WLM_ERR_INVALID_ARG,
                    "type %d is not a quantize target (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, "
                    "Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K)",
                    (int)target);
    return check_one(target, err, errlen);
}

/* The mix, or the single type, of p is one that can be written. */
static int check_params(const wlm_quantize_params *p, char *err, size_t errlen) {
    if (p->mix && mix_index(p->mix) < 0)
        return fail(err, errlen, WLM_ERR_INVALID_ARG,
                    "mix %d is not one of llama.cpp's Q3_K_M (12), Q4_K_M (15), Q5_K_M (17)",
                    (int)p->mix);
    return p->mix ? WLM_OK : wlm_quantize_check_type(p->type, err, errlen);
}

/* ---- the tensor plan ----------------------------------------------------------------------- */

typedef struct plan_entry {
    char name[48];
    const wlm_tensor *mat;     /* a weight matrix, or NULL for a norm vector */
    const float *norm;         /* (ne0) */
    int64_t ne0, ne1;          /* columns, rows (ne1 = 1 and n_dims 1 for norms) */
    int32_t type;              /* output type */
    int32_t wanted;            /* the type asked for, before the fallback for the row length */
} plan_entry;

/* Fills plan (capacity 4 + 9 * n_layers) in file order; returns the count. Each matrix gets
 * p->type (or its fallback), or with a mix its type by llama.cpp's rules. */
static size_t make_plan(const wlm_model *m, const wlm_quantize_params *p, plan_entry *plan) {
    size_t n = 0;
    const wlm_weights *w = &m->w;
    const int tied = m->shared_classifier, nl = (int)m->hp.n_layers;
    int layer = 0;
#define MAT_KIND(t, kind, ...)                                                              \
    do {                                                                                    \
        plan_entry *e = &plan[n++];                                                         \
        snprintf(e->name, sizeof e->name, __VA_ARGS__);                                     \
        e->mat = (t);                                                                       \
        e->norm = NULL;                                                                     \
        e->ne0 = (t)->cols;                                                                 \
        e->ne1 = (t)->rows;                                                                 \
        e->wanted = p->mix ? mix_rule_type(p->mix, kind, layer, nl, e->ne0, tied) : p->type; \
        e->type = wlm_quantize_tensor_type(e->wanted, e->ne0);                              \
    } while (0)
#define NORM(v, ...)                                                                        \
    do {                                                                                    \
        plan_entry *e = &plan[n++];                                                         \
        snprintf(e->name, sizeof e->name, __VA_ARGS__);                                     \
        e->mat = NULL;                                                                      \
        e->norm = (v);                                                                      \
        e->ne0 = m->hp.dim;                                                                 \
        e->ne1 = 1;                                                                         \
        e->type = e->wanted = WLM_TYPE_F32;                                                 \
    } while (0)
    MAT_KIND(&w->token_embedding, WLM_QUANT_TOKEN_EMBD, "token_embd.weight");
    if (w->rope_freqs) { /* Llama 3.1+ frequency factors, kept as F32 (llama.cpp's rope_freqs) */
        NORM(w->rope_freqs, "rope_freqs.weight");
        plan[n - 1].ne0 = m->hp.n_rot / 2;
    }
    for (layer = 0; layer < nl; layer++) {
        const wlm_layer_weights *lw = &w->layers[layer];
        const int l = layer;
        NORM(lw->rms_att, "blk.%d.attn_norm.weight", l);
        MAT_KIND(&lw->wq, WLM_QUANT_ATTN_Q, "blk.%d.attn_q.weight", l);
        MAT_KIND(&lw->wk, WLM_QUANT_ATTN_K, "blk.%d.attn_k.weight", l);
        MAT_KIND(&lw->wv, WLM_QUANT_ATTN_V, "blk.%d.attn_v.weight", l);
        MAT_KIND(&lw->wo, WLM_QUANT_ATTN_OUTPUT, "blk.%d.attn_output.weight", l);
        NORM(lw->rms_ffn, "blk.%d.ffn_norm.weight", l);
        MAT_KIND(&lw->w1, WLM_QUANT_FFN_GATE, "blk.%d.ffn_gate.weight", l);
        MAT_KIND(&lw->w3, WLM_QUANT_FFN_UP, "blk.%d.ffn_up.weight", l);
        MAT_KIND(&lw->w2, WLM_QUANT_FFN_DOWN, "blk.%d.ffn_down.weight", l);
    }
    NORM(w->rms_final, "output_norm.weight");
    if (!tied) MAT_KIND(&w->wcls, WLM_QUANT_OUTPUT, "output.weight");
#undef MAT_KIND
#undef NORM
    return n;
}

/* One message per (row length, type asked for, fallback type): which tensors did not get the
 * type asked for. */
static void report_fallbacks(const plan_entry *plan, size_t n, const wlm_quantize_params *p) {
    struct { int64_t cols; int32_t wanted, type; size_t count, first; } g[16];
    size_t ng = 0;
    for (size_t i = 0; i < n; i++) {
        if (!plan[i].mat || plan[i].type == plan[i].wanted) continue;
        size_t k = 0;
        while (k < ng && !(g[k].cols == plan[i].ne0 && g[k].type == plan[i].type &&
                           g[k].wanted == plan[i].wanted))
            k++;
        if (k == ng) {
            if (ng == sizeof g / sizeof g[0]) continue; /* cannot happen: 3 row lengths */
            g[ng].cols = plan[i].ne0;
            g[ng].wanted = plan[i].wanted;
            g[ng].type = plan[i].type;
            g[ng].count = 0;
            g[ng].first = i;
            ng++;
        }
        g[k].count++;
    }
    for (size_t k = 0; k < ng; k++) {
        const wlm_type_traits *t = wlm_type_get(g[k].wanted);
        say(p, "%s needs rows in blocks of %d: %zu matri%s with rows of %lld (%s%s) written as %s",
            t->name, (int)t->block_size, g[k].count, g[k].count == 1 ? "x" : "ces",
            (long long)g[k].cols, plan[g[k].first].name, g[k].count > 1 ? ", ..." : "",
            wlm_type_get(g[k].type)->name);
    }
}

/* ---- key/values ---------------------------------------------------------------------------- */

static int is_byte_piece(const char *s, size_t n) {
    return n == 6 && s[0] == '<' && s[1] == '0' && s[2] == 'x' && isxdigit((unsigned char)s[3]) &&
           isxdigit((unsigned char)s[4]) && s[5] == '>';
}

/* tokenizer.bin's vocabulary as SentencePiece pieces (see quantize.h). */
static int add_vocab_llama2c(wlm_gguf_writer *w, const wlm_tokenizer *t) {
    const size_t n = (size_t)t->vocab_size;
    static const char space[] = "\xe2\x96\x81"; /* U+2581 */
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++) {
        const char *s = t->blob + t->offset[i];
        for (uint32_t k = 0; k < t->length[i]; k++) bytes += s[k] == ' ' ? 3 : 1;
    }
    char *blob = malloc(bytes ? bytes : 1);
    const char **str = malloc(n * sizeof *str);
    size_t *len = malloc(n * sizeof *len);
    int32_t *type = malloc(n * sizeof *type);
    int rc = WLM_ERR_NOMEM;
    if (!blob || !str || !len || !type) goto out;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        const char *s = t->blob + t->offset[i];
        const size_t sl = t->length[i];
        const int32_t id = (int32_t)i;
        if (id == t->bos_id && sl == 5 && memcmp(s, "\n<s>\n", 5) == 0) {
            str[i] = "<s>", len[i] = 3;
        } else if (id == t->eos_id && sl == 6 && memcmp(s, "\n</s>\n", 6) == 0) {
            str[i] = "</s>", len[i] = 4;
        } else {
            str[i] = blob + at;
            for (size_t k = 0; k < sl; k++) {
                if (s[k] == ' ') memcpy(blob + at, space, 3), at += 3;
                else blob[at++] = s[k];
            }
            len[i] = (size_t)(blob + at - str[i]);
        }
        if (i == 0 && sl == 5 && memcmp(s, "<unk>", 5) == 0) type[i] = WLM_TOKEN_UNKNOWN;
        else if (id == t->bos_id || id == t->eos_id) type[i] = WLM_TOKEN_CONTROL;
        else if (is_byte_piece(s, sl)) type[i] = WLM_TOKEN_BYTE;
        else type[i] = WLM_TOKEN_NORMAL;
    }
    wlm_gguf_add_str(w, "tokenizer.ggml.model", "llama");
    wlm_gguf_add_arr_str(w, "tokenizer.ggml.tokens", str, len, n);
    wlm_gguf_add_arr(w, "tokenizer.ggml.scores", WLM_GGUF_FLOAT32, t->scores, n);
    wlm_gguf_add_arr(w, "tokenizer.ggml.token_type", WLM_GGUF_INT32, type, n);
    if (type[0] == WLM_TOKEN_UNKNOWN) wlm_gguf_add_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    if (t->bos_id >= 0) wlm_gguf_add_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)t->bos_id);
    if (t->eos_id >= 0) wlm_gguf_add_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)t->eos_id);
    wlm_gguf_add_bool(w, "tokenizer.ggml.add_bos_token", 1);
    wlm_gguf_add_bool(w, "tokenizer.ggml.add_eos_token", 0);
    rc = w->status;
out:
    free(blob);
    free(str);
    free(len);
    free(type);
    return rc;
}

/* A GGUF vocabulary (WLM_TOKENIZER_SPM) back from the tokenizer's tables, for a GGUF source
 * that is not at hand (normally its keys are copied instead). */
static int add_vocab_spm(wlm_gguf_writer *w, const wlm_tokenizer *t) {
    const size_t n = (size_t)t->vocab_size;
    const char **str = malloc(n * sizeof *str);
    size_t *len = malloc(n * sizeof *len);
    int32_t *type = malloc(n * sizeof *type);
    int rc = WLM_ERR_NOMEM;
    if (!str || !len || !type) goto out;
    for (size_t i = 0; i < n; i++) {
        str[i] = t->blob + t->offset[i];
        len[i] = t->length[i];
        type[i] = t->type ? t->type[i] : WLM_TOKEN_NORMAL;
    }
    wlm_gguf_add_str(w, "tokenizer.ggml.model", "llama");
    wlm_gguf_add_arr_str(w, "tokenizer.ggml.tokens", str, len, n);
    wlm_gguf_add_arr(w, "tokenizer.ggml.scores", WLM_GGUF_FLOAT32, t->scores, n);
    wlm_gguf_add_arr(w, "tokenizer.ggml.token_type", WLM_GGUF_INT32, type, n);
    if (t->unk_id >= 0) wlm_gguf_add_u32(w, "tokenizer.ggml.unknown_token_id", (uint32_t)t->unk_id);
    if (t->bos_id >= 0) wlm_gguf_add_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)t->bos_id);
    if (t->eos_id >= 0) wlm_gguf_add_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)t->eos_id);
    wlm_gguf_add_bool(w, "tokenizer.ggml.add_bos_token", t->add_bos);
    wlm_gguf_add_bool(w, "tokenizer.ggml.add_eos_token", t->add_eos);
    wlm_gguf_add_bool(w, "tokenizer.ggml.add_space_prefix", t->add_space_prefix);
    rc = w->status;
out:
    free(str);
    free(len);
    free(type);
    return rc;
}

/* Copies every key/value of `src` that `w` does not hold yet, in the source's order; split.*
 * keys (one file is written), keys that are not C strings and nested arrays are left out
 * (nested arrays said through p->log). */
static void copy_source_kvs(wlm_gguf_writer *w, const wlm_gguf *src,
                            const wlm_quantize_params *p) {
    for (size_t i = 0; i < src->n_kv && w->status == WLM_OK; i++) {
        const wlm_gguf_kv *kv = &src->kv[i];
        char key[256];
        if (kv->key.len >= sizeof key) {
            say(p, "a key of %zu bytes is not copied", kv->key.len);
            continue;
        }
        memcpy(key, kv->key.ptr, kv->key.len);
        key[kv->key.len] = '\0';
        if (strlen(key) != kv->key.len || wlm_gguf_writer_has_key(w, key)) continue;
        if (strncmp(key, "split.", 6) == 0) continue;
        if (kv->type == WLM_GGUF_ARRAY && kv->arr.type == WLM_GGUF_ARRAY) {
            say(p, "key %s (nested arrays) is not copied", key);
            continue;
        }
        wlm_gguf_add_kv_copy(w, kv);
    }
}

static int add_metadata(const wlm_model *m, wlm_gguf_writer *w, const wlm_quantize_params *p) {
    const wlm_hparams *hp = &m->hp;
    const wlm_gguf *src = p->src;
    wlm_gguf_add_str(w, "general.architecture", "llama");
    if (p->name) wlm_gguf_add_str(w, "general.name", p->name);
    else if (!src || !wlm_gguf_find_kv(src, "general.name")) wlm_gguf_add_str(w, "general.name", "llama");
    wlm_gguf_add_u32(w, "general.alignment", WLM_GGUF_DEFAULT_ALIGNMENT);
    wlm_gguf_add_u32(w, "general.file_type", file_type(p->type, p->mix));
    wlm_gguf_add_u32(w, "general.quantization_version", 2);
    wlm_gguf_add_u32(w, "llama.context_length", (uint32_t)hp->seq_len);
    wlm_gguf_add_u32(w, "llama.embedding_length", (uint32_t)hp->dim);
    wlm_gguf_add_u32(w, "llama.block_count", (uint32_t)hp->n_layers);
    wlm_gguf_add_u32(w, "llama.feed_forward_length", (uint32_t)hp->hidden_dim);
    wlm_gguf_add_u32(w, "llama.rope.dimension_count", (uint32_t)hp->n_rot);
    wlm_gguf_add_u32(w, "llama.attention.head_count", (uint32_t)hp->n_heads);
    wlm_gguf_add_u32(w, "llama.attention.head_count_kv", (uint32_t)hp->n_kv_heads);
    wlm_gguf_add_f32(w, "llama.attention.layer_norm_rms_epsilon", hp->norm_eps);
    wlm_gguf_add_f32(w, "llama.rope.freq_base", hp->rope_theta);
    if (hp->rope_freq_scale != 1.0f) { /* linear scaling: positions divided by the factor */
        wlm_gguf_add_str(w, "llama.rope.scaling.type", "linear");
        wlm_gguf_add_f32(w, "llama.rope.scaling.factor", 1.0f / hp->rope_freq_scale);
    }
    wlm_gguf_add_u32(w, "llama.vocab_size", (uint32_t)hp->vocab_size);
    if (w->status != WLM_OK) return w->status;

    const int src_vocab = src && wlm_gguf_find_kv(src, "tokenizer.ggml.tokens");
    if (m->has_tokenizer && !src_vocab) {
        int rc = m->tok.kind == WLM_TOKENIZER_LLAMA2C ? add_vocab_llama2c(w, &m->tok)
                                                      : add_vocab_spm(w, &m->tok);
        if (rc != WLM_OK) return rc;
    }
    if (src) {
        copy_source_kvs(w, src, p);
    }
    return w->status;
}

/* ---- tensor data --------------------------------------------------------------------------- */

/* Streams one matrix, converted to `type`, through a chunk buffer of `cap` bytes (at least one
 * output row) and a float row. */
static int write_matrix(wlm_gguf_writer *w, const wlm_tensor *src, int32_t type, float *row,
                        unsigned char *chunk, size_t cap) {
    const wlm_type_traits *st = wlm_type_get(src->type), *dt = wlm_type_get(type);
    const unsigned char *in = src->data;
    if (src->type == type) /* already in the target encoding: the bytes as they are */
        return wlm_gguf_write_data(w, in, src->row_bytes * (size_t)src->rows);
    const size_t out_row = wlm_row_bytes(type, src->cols);
    const size_t per_chunk = cap / out_row;
    size_t used = 0;
    for (int32_t r = 0; r < src->rows; r++) {
        st->to_float(in + (size_t)r * src->row_bytes, row, src->cols);
        dt->from_float(row, chunk + used * out_row, src->cols);
        if (++used == per_chunk || r == src->rows - 1) {
            if (wlm_gguf_write_data(w, chunk, used * out_row) != WLM_OK) return w->status;
            used = 0;
        }
    }
    return w->status;
}

int wlm_quantize_write(const wlm_model *m, wlm_gguf_writer *w, const wlm_quantize_params *p,
                       char *err, size_t errlen) {
    if (!m || !w || !p) return fail(err, errlen, WLM_ERR_INVALID_ARG, "NULL argument");
    if (!m->loaded || m->vocab_only || !m->w.layers || m->tensors_external)
        return fail(err, errlen, WLM_ERR_STATE, "the model has no weights loaded (or holds them "
                    "elsewhere: WLM_LOAD_TENSORS_EXTERNAL)");
    int rc = check_params(p, err, errlen);
    if (rc != WLM_OK) return rc;

    const size_t cap_entries = 4 + 9 * (size_t)m->hp.n_layers;
    plan_entry *plan = calloc(cap_entries, sizeof *plan);
    if (!plan) return fail(err, errlen, WLM_ERR_NOMEM, "out of memory for the tensor plan");
    const size_t n = make_plan(m, p, plan);

    /* Every type the plan needs can be read and produced. */
    int64_t max_cols = m->hp.dim;
    for (size_t i = 0; i < n; i++) {
        if (!plan[i].mat) continue;
        if (plan[i].ne0 > max_cols) max_cols = plan[i].ne0;
        if (plan[i].type != plan[i].mat->type && (rc = check_one(plan[i].type, err, errlen))) {
            free(plan);
            return rc;
        }
        if (!wlm_type_get(plan[i].mat->type)->to_float) {
            rc = fail(err, errlen, WLM_ERR_UNSUPPORTED, "tensor %s: type %s cannot be read",
                      plan[i].name, wlm_type_get(plan[i].mat->type)->name);
            free(plan);
            return rc;
        }
    }
    report_fallbacks(plan, n, p);

    rc = add_metadata(m, w, p);
    for (size_t i = 0; i < n && rc == WLM_OK; i++) {
        const int64_t ne[2] = {plan[i].ne0, plan[i].ne1};
        rc = wlm_gguf_add_tensor(w, plan[i].name, plan[i].mat ? 2 : 1, ne, plan[i].type);
    }
    if (rc == WLM_OK) rc = wlm_gguf_write_header(w);
    if (rc != WLM_OK) {
        free(plan);
        return w->status != WLM_OK ? writer_fail(w, err, errlen)
                                   : fail(err, errlen, rc, "out of memory for the vocabulary");
    }

    /* Scratch: one float row, and a chunk of output rows (1 MiB, or one F32 row if larger). */
    const size_t chunk_cap = (size_t)max_cols * 4 > ((size_t)1 << 20) ? (size_t)max_cols * 4
                                                                       : ((size_t)1 << 20);
    float *row = malloc((size_t)max_cols * sizeof *row);
    unsigned char *chunk = malloc(chunk_cap);
    const uint64_t total = wlm_gguf_writer_total_bytes(w);
    if (!row || !chunk) {
        rc = fail(err, errlen, WLM_ERR_NOMEM, "out of memory for the conversion buffers");
    } else {
        for (size_t i = 0; i < n && rc == WLM_OK; i++) {
            if (plan[i].mat)
                rc = write_matrix(w, plan[i].mat, plan[i].type, row, chunk, chunk_cap);
            else /* F32 norms: host floats, little-endian like the rest */
                rc = wlm_gguf_write_data(w, plan[i].norm, (size_t)plan[i].ne0 * sizeof(float));
            if (rc == WLM_OK && p->progress) p->progress(p->user, w->written, total);
        }
        if (rc == WLM_OK) rc = wlm_gguf_writer_finish(w);
        if (rc != WLM_OK) writer_fail(w, err, errlen);
    }
    free(row);
    free(chunk);
    free(plan);
    return rc;
}

/* ---- any architecture: GGUF in, GGUF out ---------------------------------------------------- */

static int ends_with(const char *s, size_t n, const char *suffix) {
    const size_t k = strlen(suffix);
    return n >= k && memcmp(s + n - k, suffix, k) == 0;
}
static int contains(const char *s, size_t n, const char *needle) {
    const size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(s + i, needle, k) == 0) return 1;
    return 0;
}
static int eq(const wlm_gguf_str *a, const char *b) {
    return a->len == strlen(b) && memcmp(a->ptr, b, a->len) == 0;
}
/* llama.cpp's test for a tensor to convert (see quantize.h). The depthwise conv kernels of
 * the recurrent blocks (qwen35's ssm_conv1d [K, C], lfm2's shortconv.conv [L, D]) are 2-D but
 * tiny and stay as they are. */
static int is_quantizable(const wlm_gguf_tensor *t) {
    const char *s = t->name.ptr;
    const size_t n = t->name.len;
    return ends_with(s, n, "weight") && t->n_dims >= 2 && !contains(s, n, "_norm.weight") &&
           !eq(&t->name, "position_embd.weight") && !eq(&t->name, "token_types.weight") &&
           !contains(s, n, "ssm_conv1d") && !contains(s, n, "shortconv.conv.weight") &&
           !contains(s, n, "ffn_gate_inp.weight") &&
           t->ne[0] > 0 && t->n_elements > 0;
}
/* The block of "blk.N.…", or -1 (llama.cpp orders the tensors it quantizes by this, then by
 * name). */
static int block_of(const char *s, size_t n) {
    if (n < 5 || memcmp(s, "blk.", 4) != 0 || !isdigit((unsigned char)s[4])) return -1;
    int l = 0;
    for (size_t i = 4; i < n && isdigit((unsigned char)s[i]) && l < 1000000; i++)
        l = l * 10 + (s[i] - '0');
    return l;
}
/* The layer of "blk.N.…", or 0. */
static int layer_of(const wlm_gguf_str *name) {
    const int b = block_of(name->ptr, name->len);
    return b < 0 ? 0 : b;
}

int wlm_quantize_attn_v_like(const char *name, size_t len) {
    return name && (contains(name, len, "attn_v.weight") || contains(name, len, "attn_qkv.weight") ||
                    contains(name, len, "attn_kv_b.weight"));
}

int wlm_quantize_qkv_as_v(const char *arch, size_t len) {
    static const char *const archs[] = {"qwen35", "qwen35moe"};
    for (size_t i = 0; arch && i < sizeof archs / sizeof archs[0]; i++)
        if (len == strlen(archs[i]) && memcmp(arch, archs[i], len) == 0) return 1;
    return 0;
}

static int role_of(const wlm_gguf_str *name, int qkv_as_v) {
    const char *s = name->ptr;
    const size_t n = name->len;
    if (eq(name, "output.weight")) return WLM_QUANT_OUTPUT;
    if (eq(name, "token_embd.weight")) return WLM_QUANT_TOKEN_EMBD;
    if (ends_with(s, n, ".attn_v.weight")) return WLM_QUANT_ATTN_V;
    if (ends_with(s, n, ".attn_qkv.weight")) return qkv_as_v ? WLM_QUANT_ATTN_V : WLM_QUANT_ATTN_QKV;
    if (ends_with(s, n, ".attn_output.weight")) return WLM_QUANT_ATTN_OUTPUT;
    /* ffn_down and the experts' ffn_down_exps (llama.cpp: any name holding "ffn_down"; its
     * layer is the block's in both) */
    if (ends_with(s, n, ".ffn_down.weight") || ends_with(s, n, ".ffn_down_exps.weight"))
        return WLM_QUANT_FFN_DOWN;
    return WLM_QUANT_OTHER;
}

/* a before b in llama.cpp's order of a model's tensors: by block (none first), then by name */
static int tensor_before(const wlm_gguf_str *a, const wlm_gguf_str *b) {
    const int la = block_of(a->ptr, a->len), lb = block_of(b->ptr, b->len);
    if (la != lb) return la < lb;
    const size_t n = a->len < b->len ? a->len : b->len;
    const int c = memcmp(a->ptr, b->ptr, n);
    return c < 0 || (c == 0 && a->len < b->len);
}

void wlm_quantize_file_of(const wlm_gguf *src, wlm_quantize_file *f) {
    memset(f, 0, sizeof *f);
    f->tied = 1;
    for (size_t i = 0; i < src->n_tensors; i++) {
        const wlm_gguf_str *name = &src->tensors[i].name;
        const int l = block_of(name->ptr, name->len);
        if (l + 1 > f->n_layers) f->n_layers = l + 1;
        if (eq(name, "output.weight")) f->tied = 0;
        f->n_attn_v += wlm_quantize_attn_v_like(name->ptr, name->len);
    }
    wlm_gguf_str arch = {NULL, 0};
    char err[64];
    if (wlm_gguf_get_str(src, "general.architecture", &arch, err, sizeof err) == WLM_OK)
        f->qkv_as_v = wlm_quantize_qkv_as_v(arch.ptr, arch.len);
}

/* The place of tensor i of src among its attn_v-like tensors, in llama.cpp's order. */
static int attn_v_index(const wlm_gguf *src, size_t i) {
    int k = 0;
    for (size_t j = 0; j < src->n_tensors; j++) {
        const wlm_gguf_str *b = &src->tensors[j].name;
        k += j != i && wlm_quantize_attn_v_like(b->ptr, b->len) &&
             tensor_before(b, &src->tensors[i].name);
    }
    return k;
}

/* The type wlm_quantize_gguf_write writes tensor t in (its own type when it is not converted);
 * *wanted gets the type asked for before the row-length fallback. The attn_v rule's layer is
 * the tensor's place among the attn_v-like ones (llama.cpp's i_attention_wv of n_attention_wv:
 * the block index where every block has one, the attention block's rank in lfm2); ffn_down's
 * is the block. */
static int32_t gguf_tensor_type(const wlm_gguf_tensor *t, const wlm_quantize_params *p,
                                const wlm_quantize_file *f, int v_index, int32_t *wanted) {
    *wanted = t->type;
    if (!is_quantizable(t)) return t->type;
    if (p->mix) {
        const int role = role_of(&t->name, f->qkv_as_v);
        const int v = role == WLM_QUANT_ATTN_V;
        *wanted = mix_rule_type(p->mix, role, v ? v_index : layer_of(&t->name),
                                v ? f->n_attn_v : f->n_layers, t->ne[0], f->tied);
    } else {
        *wanted = p->type;
    }
    return wlm_quantize_tensor_type(*wanted, t->ne[0]);
}

int32_t wlm_quantize_gguf_tensor_type(const wlm_gguf_tensor *t, const wlm_quantize_params *p,
                                      const wlm_quantize_file *f, int attn_v_index) {
    int32_t wanted;
    return gguf_tensor_type(t, p, f, attn_v_index, &wanted);
}

uint32_t wlm_quantize_file_type(int32_t type, int32_t mix) { return file_type(type, mix); }

int wlm_quantize_gguf_write(const wlm_gguf *src, wlm_gguf_writer *w, const wlm_quantize_params *p,
                            char *err, size_t errlen) {
    if (!src || !w || !p) return fail(err, errlen, WLM_ERR_INVALID_ARG, "NULL argument");
    int rc = check_params(p, err, errlen);
    if (rc != WLM_OK) return rc;
    const size_t n = src->n_tensors;
    int32_t *types = calloc(n ? n : 1, sizeof *types);
    if (!types) return fail(err, errlen, WLM_ERR_NOMEM, "out of memory for the tensor plan");
    wlm_quantize_file f;
    wlm_quantize_file_of(src, &f);
    /* The plan: each tensor's output type; check what must be read and produced. */
    int64_t max_cols = 1;
    size_t n_conv = 0, n_fallback = 0;
    for (size_t i = 0; i < n && rc == WLM_OK; i++) {
        const wlm_gguf_tensor *t = &src->tensors[i];
        int32_t wanted;
        types[i] = gguf_tensor_type(t, p, &f, attn_v_index(src, i), &wanted);
        if (!is_quantizable(t)) continue;
        if (types[i] != wanted) n_fallback++;
        if (types[i] == t->type) continue;
        n_conv++;
        if (t->ne[0] > max_cols) max_cols = t->ne[0];
        if (t->n_elements / (uint64_t)t->ne[0] > (uint64_t)INT32_MAX || t->ne[0] > INT32_MAX)
            rc = fail(err, errlen, WLM_ERR_UNSUPPORTED, "tensor %.*s: too many rows or columns",
                      (int)t->name.len, t->name.ptr);
        else if (!t->data || !wlm_type_get(t->type)->to_float)
            rc = fail(err, errlen, WLM_ERR_UNSUPPORTED, "tensor %.*s: type %s cannot be read",
                      (int)t->name.len, t->name.ptr, wlm_gguf_type_name(t->type));
        else
            rc = check_one(types[i], err, errlen);
    }
    if (rc != WLM_OK) {
        free(types);
        return rc;
    }
    if (n_fallback)
        say(p, "%zu matri%s with rows that are not whole blocks of the type asked for got its "
               "fallback (Q4_K: Q5_0, Q6_K: Q8_0, ...; see quantize.h)",
            n_fallback, n_fallback == 1 ? "x" : "ces");

    /* Key/values: ours first, then every other key of the source in its order. */
    if (p->name) wlm_gguf_add_str(w, "general.name", p->name);
    wlm_gguf_add_u32(w, "general.alignment", WLM_GGUF_DEFAULT_ALIGNMENT);
    wlm_gguf_add_u32(w, "general.file_type", file_type(p->type, p->mix));
    wlm_gguf_add_u32(w, "general.quantization_version", 2);
    copy_source_kvs(w, src, p);
    char name[256];
    for (size_t i = 0; i < n && w->status == WLM_OK; i++) {
        const wlm_gguf_tensor *t = &src->tensors[i];
        const size_t len = t->name.len < sizeof name - 1 ? t->name.len : sizeof name - 1;
        memcpy(name, t->name.ptr, len);
        name[len] = '\0';
        if (!t->data) {
            rc = fail(err, errlen, WLM_ERR_UNSUPPORTED, "tensor %s: type %s cannot be copied",
                      name, wlm_gguf_type_name(t->type));
            break;
        }
        wlm_gguf_add_tensor(w, name, t->n_dims, t->ne, types[i]);
    }
    if (rc == WLM_OK && w->status == WLM_OK) wlm_gguf_write_header(w);
    if (rc == WLM_OK && w->status != WLM_OK) rc = writer_fail(w, err, errlen);
    if (rc != WLM_OK) {
        free(types);
        return rc;
    }

    const size_t chunk_cap = (size_t)max_cols * 4 > ((size_t)1 << 20) ? (size_t)max_cols * 4
                                                                       : ((size_t)1 << 20);
    float *row = n_conv ? malloc((size_t)max_cols * sizeof *row) : NULL;
    unsigned char *chunk = n_conv ? malloc(chunk_cap) : NULL;
    const uint64_t total = wlm_gguf_writer_total_bytes(w);
    if (n_conv && (!row || !chunk)) {
        rc = fail(err, errlen, WLM_ERR_NOMEM, "out of memory for the conversion buffers");
    } else {
        for (size_t i = 0; i < n && rc == WLM_OK; i++) {
            const wlm_gguf_tensor *t = &src->tensors[i];
            if (types[i] == t->type) {
                rc = wlm_gguf_write_data(w, t->data, t->nbytes);
            } else {
                wlm_tensor m;
                memset(&m, 0, sizeof m);
                m.data = t->data;
                m.type = t->type;
                m.cols = (int32_t)t->ne[0];
                m.rows = (int32_t)(t->n_elements / (uint64_t)t->ne[0]);
                m.row_bytes = wlm_row_bytes(t->type, t->ne[0]);
                rc = write_matrix(w, &m, types[i], row, chunk, chunk_cap);
            }
            if (rc == WLM_OK && p->progress) p->progress(p->user, w->written, total);
        }
        if (rc == WLM_OK) rc = wlm_gguf_writer_finish(w);
        if (rc != WLM_OK) writer_fail(w, err, errlen);
    }
    free(row);
    free(chunk);
    free(types);
    return rc;
}

/* Writes through a writer into out_path + ".tmp", renamed to out_path on success. */
static int write_file(const char *out_path, char *err, size_t errlen,
                      int (*body)(const void *, wlm_gguf_writer *, const wlm_quantize_params *,
                                  char *, size_t),
                      const void *what, const wlm_quantize_params *p);

static int body_gguf(const void *what, wlm_gguf_writer *w, const wlm_quantize_params *p,
                     char *err, size_t errlen) {
    return wlm_quantize_gguf_write(what, w, p, err, errlen);
}
static int body_model(const void *what, wlm_gguf_writer *w, const wlm_quantize_params *p,
                      char *err, size_t errlen) {
    return wlm_quantize_write(what, w, p, err, errlen);
}

int wlm_quantize_gguf(const wlm_gguf *src, const char *out_path, const wlm_quantize_params *p,
                      char *err, size_t errlen) {
    if (!src || !p) return fail(err, errlen, WLM_ERR_INVALID_ARG, "NULL argument");
    return write_file(out_path, err, errlen, body_gguf, src, p);
}

int wlm_quantize_model(const wlm_model *m, const char *out_path, const wlm_quantize_params *p,
                       char *err, size_t errlen) {
    if (!m || !p) return fail(err, errlen, WLM_ERR_INVALID_ARG, "NULL argument");
    return write_file(out_path, err, errlen, body_model, m, p);
}

static int write_file(const char *out_path, char *err, size_t errlen,
                      int (*body)(const void *, wlm_gguf_writer *, const wlm_quantize_params *,
                                  char *, size_t),
                      const void *what, const wlm_quantize_params *p) {
    if (!out_path || !out_path[0]) return fail(err, errlen, WLM_ERR_INVALID_ARG, "no output path");
    /* Check what can be checked before a file exists. */
    int rc = check_params(p, err, errlen);
    if (rc != WLM_OK) return rc;
    const size_t n = strlen(out_path);
    char *tmp = malloc(n + 5);
    if (!tmp) return fail(err, errlen, WLM_ERR_NOMEM, "out of memory");
    memcpy(tmp, out_path, n);
    memcpy(tmp + n, ".tmp", 5);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        rc = fail(err, errlen, WLM_ERR_INVALID_ARG, "cannot create %s: %s", tmp, strerror(errno));
        free(tmp);
        return rc;
    }
    wlm_gguf_writer w;
    wlm_gguf_writer_init(&w, f);
    rc = body(what, &w, p, err, errlen);
    wlm_gguf_writer_free(&w);
    if (fclose(f) != 0 && rc == WLM_OK)
        rc = fail(err, errlen, WLM_ERR_INVALID_ARG, "cannot write %s: %s", tmp, strerror(errno));
    if (rc == WLM_OK && rename(tmp, out_path) != 0)
        rc = fail(err, errlen, WLM_ERR_INVALID_ARG, "cannot rename %s to %s: %s", tmp, out_path,
                  strerror(errno));
    if (rc != WLM_OK) remove(tmp);
    free(tmp);
    return rc;
}
