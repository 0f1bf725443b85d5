/*
 * gguf_model.c — maps a parsed GGUF file onto a wlm_model by its architecture's row of arch.c:
 * hyperparameters from the <arch>.* keys, llama.cpp's tensor names onto the weight views (no
 * copy; only F16 vectors are converted into m->owned_floats), every shape and type checked
 * against the hyperparameters (a missing or misshapen tensor or key is an error naming it), and
 * the vocabulary through tokenizer/vocab_gguf.c. It does not parse bytes itself (gguf.c does)
 * and does no arithmetic on weights (forward.c does).
 *
 * RoPE: rope.freq_base, rope.dimension_count (partial rotation), linear scaling, the attention
 * factor, the Llama 3.1+ frequency factors (rope_freqs.weight) and Phi-3's LongRoPE factors are
 * read here; forward.c turns them into per-pair frequencies. llama.cpp's converters store the Q
 * and K weights of "llama" models so that rotary embeddings apply to adjacent pairs (2i, 2i+1)
 * of each head (llama2.c's layout, ggml's normal mode); the NEOX-style architectures (Qwen,
 * Gemma, Phi-3) keep Hugging Face's order and rotate pairs (i, i + n_rot/2). Either way the
 * weights are used as stored, with no permutation.
 */
#include <math.h>
#include <stdint.h>
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
 * rows) of a supported type, aligned, with finite values when F32/F16/BF16. */
static int get_matrices(wlm_model *m, const wlm_gguf *g, const char *name, int64_t n_mat,
                        int64_t rows, int64_t cols, wlm_tensor *out) {
    char tbuf[48];
    const wlm_gguf_tensor *t = wlm_gguf_find_tensor(g, name);
    if (!t) return wlm_set_error(m->errmsg, WLM_ERR_FORMAT, "GGUF model lacks tensor %s", name);
    if (t->ne[0] != cols || t->ne[1] != rows || t->ne[2] != n_mat || t->ne[3] != 1) {
        if (n_mat > 1)
            return wlm_set_error(m->errmsg, WLM_ERR_FORMAT,
                                 "tensor %s has shape [%lld, %lld, %lld, %lld], expected [%lld, "
                                 "%lld, %lld] (GGUF order: columns, rows, experts)",
                                 name, (long long)t->ne[0], (long long)t->ne[1],
                                 (long long)t->ne[2], (long long)t->ne[3], (long long)cols,
                                 (long long)rows, (long long)n_mat);
        return wlm_set_error(m->errmsg, WLM_ERR_FORMAT,
                             "tensor %s has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld] "
                             "(GGUF order: columns, rows)",
                             name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                             (long long)t->ne[3], (long long)cols, (long long)rows);
    }
    const wlm_type_traits *tr = wlm_type_get(t->type);
    if (!tr->name || !tr->supported || !tr->to_float || !tr->matvec_ref || !tr->matvec_simd ||
        (!t->data && !t->external))
        return wlm_set_error(m->errmsg, WLM_ERR_UNSUPPORTED,
                             "tensor %s has type %s, which is not supported", name,
                             type_desc(t->type, tbuf, sizeof tbuf));
    if (tr->vec_dot_type != WLM_TYPE_F32 && !wlm_type_get(tr->vec_dot_type)->from_float)
        return wlm_set_error(m->errmsg, WLM_ERR_UNSUPPORTED,
                             "tensor %s has type %s, whose activation type cannot be produced",
                             name, tr->name);
    const size_t row_bytes = wlm_row_bytes(t->type, cols);
    if (row_bytes == 0 || (uint64_t)row_bytes * (uint64_t)rows * (uint64_t)n_mat != t->nbytes)
        return wlm_set_error(m->errmsg, WLM_ERR_FORMAT,
                             "tensor %s: %lld columns are not whole %s blocks of %d", name,
                             (long long)cols, tr->name, (int)tr->block_size);
    if (t->external) { /* held by another backend: a placeholder view, never read here */
        out->type = t->type;
        out->rows = (int32_t)rows;
        out->cols = (int32_t)cols;
        out->row_bytes = row_bytes;
        out->data = m->external_marks + (t - g->tensors);
        return WLM_OK;
    }
    /* F32 rows are read as float*, block types through 16-bit fields. */
    const uintptr_t align = t->type == WLM_TYPE_F32 ? 4 : 2;
    if ((uintptr_t)t->data % align != 0)
        return wlm_set_error(m->errmsg, WLM_ERR_FORMAT,
                             "tensor %s at file offset %zu is not %u-byte aligned (general."
                             "alignment %u, or a misaligned buffer)",
                             name, (size_t)((const unsigned char *)t->data - g->base),
                             (unsigned)align, g->alignment);
    /* A NaN or Inf in a float weight poisons every logit; catch it at load, as llama2c.c does. */
    if (t->type == WLM_TYPE_F32 || t->type == WLM_TYPE_F16 || t->type == WLM_TYPE_BF16) {
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
                const uint16_t e = t->type == WLM_TYPE_F16 ? 0x7c00u : 0x7f80u; /* exponent */
                bad = (h & e) == e;
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

/* A matrix `name` of rows × cols (get_matrices' checks, one matrix). */
static int get_matrix(wlm_model *m, const wlm_gguf *g, const char *name, int64_t rows,
                      int64_t cols, wlm_tensor *out) {
    return get_matrices(m, g, name, 1, rows, cols, out);
}

/* A (rows × cols) tensor of floats — a norm or bias vector (rows 1), a conv kernel: F32 used in
 * place, F16 converted into *spare (advanced by rows × cols). Other types are refused. GGUF stores
 * vectors with n_dims 1, whose ne[1] reads as 1, so get_matrix checks them as 1 × cols. */
static int get_floats(wlm_model *m, const wlm_gguf *g, const char *name, int32_t rows,
                      int32_t cols, float **spare, const float **out) {
    wlm_tensor t = {0};
    int rc = get_matrix(m, g, name, rows, cols, &t);
    if (rc != WLM_OK) return rc;
    if (wlm_gguf_find_tensor(g, name)->external) /* (wlm_gguf_tensor_resident's rule) */
        return wlm_set_error(m->errmsg, WLM_ERR_UNSUPPORTED,
                             "float tensor %s (%d × %d) is held outside the model's memory, where "
                             "it cannot be read as floats", name, (int)rows, (int)cols);
    if (t.type == WLM_TYPE_F32) {
        *out = t.data;
        return WLM_OK;
    }
    if (t.type != WLM_TYPE_F16) {
        char tbuf[48];
        return wlm_set_error(m->errmsg, WLM_ERR_UNSUPPORTED,
                             "%s tensor %s has type %s; only F32 and F16 are supported",
                             rows == 1 ? "vector" : "float", name,
                             type_desc(t.type, tbuf, sizeof tbuf));
    }
    wlm_type_get(WLM_TYPE_F16)->to_float(t.data, *spare, rows * cols);
    *out = *spare;
    *spare += (size_t)rows * (size_t)cols;
    return WLM_OK;
}

/* A norm (or bias) vector of `dim` weights (get_floats). */
static int get_norm(wlm_model *m, const wlm_gguf *g, const char *name, int32_t dim,
                    float **spare, const float **out) {
    return get_floats(m, g, name, 1, dim, spare, out);
}

/* ---- hyperparameters ------------------------------------------------------------------------- */

/* The key "<arch>.<suffix>" in buf. */
static const char *akey(char *buf, size_t n, const wlm_arch *a, const char *suffix) {
    snprintf(buf, n, "%s.%s", a->name, suffix);
    return buf;
}

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

/* A dimension key that may be (arch->per_layer) one number per layer: its largest value, each
 * checked within lo..hi; into per[n_layers] when per is not NULL (a number: every layer's). */
static int get_layer_dims(wlm_model *m, const wlm_gguf *g, const char *key, int required,
                          int32_t def, int32_t lo, int32_t hi, int32_t *max, int32_t *per) {
    const wlm_hparams *hp = &m->hp;
    const wlm_gguf_kv *kv = wlm_gguf_find_kv(g, key);
    if (!kv || kv->type != WLM_GGUF_ARRAY || !hp->arch->per_layer) {
        int rc = get_dim(m, g, key, required, def, lo, hi, max);
        for (int32_t l = 0; rc == WLM_OK && per && l < hp->n_layers; l++) per[l] = *max;
        return rc;
    }
    if (hp->n_layers <= 0 || kv->arr.n != (uint64_t)hp->n_layers)
        return wlm_set_error(m->errmsg, WLM_ERR_FORMAT, "%s has %llu entries, expected %d "
                             "(block_count)", key, (unsigned long long)kv->arr.n,
                             (int)hp->n_layers);
    *max = lo;
    for (int32_t l = 0; l < hp->n_layers; l++) {
        int64_t v;
        if (wlm_gguf_arr_i64(kv, (uint64_t)l, &v) != WLM_OK || v < lo || v > hi)
            return wlm_set_error(m->errmsg, WLM_ERR_FORMAT, "%s[%d] is not a number within %d..%d",
                                 key, (int)l, (int)lo, (int)hi);
        if (per) per[l] = (int32_t)v;
        if (v > *max) *max = (int32_t)v;
    }
    return WLM_OK;
}

/* WLM_OK unless `key` is an array (get_layer_dims checked it) with an entry other than v:
 * query heads may not vary by layer (no published Gemma 4 does it). */
static int same_per_layer(wlm_model *m, const wlm_gguf *g, const char *key, int32_t v) {
    const wlm_gguf_kv *kv = wlm_gguf_find_kv(g, key);
    for (uint64_t l = 0; kv && kv->type == WLM_GGUF_ARRAY && l < kv->arr.n; l++) {
        int64_t x = v;
        wlm_gguf_arr_i64(kv, l, &x);
        if (x != v)
            return wlm_set_error(m->errmsg, WLM_ERR_UNSUPPORTED,
                                 "%s differs between layers (%lld and %d), which is not supported",
                                 key, (long long)x, (int)v);
    }
    return WLM_OK;
}

/* An optional float key within (lo, hi) (lo excluded unless lo_ok). */
static int get_float(wlm_model *m, const wlm_gguf *g, const char *key, float def, float lo,
                     int lo_ok, float hi, float *out) {
    int rc = wlm_gguf_get_f32_or(g, key, def, out, m->errmsg, WLM_ERRMSG_SIZE);
    if (rc != WLM_OK) return rc;
    if (!(*out < hi) || !(lo_ok ? *out >= lo : *out > lo))
        return wlm_set_error(m->errmsg, WLM_ERR_FORMAT, "%s = %g is outside %s%g, %g)", key,
                             (double)*out, lo_ok ? "[" : "(", (double)lo, (double)hi);
    return WLM_OK;
}

/* Sliding-window layers, as llama.cpp derives them: with attention.sliding_window > 0, layer l
 * is a window layer unless l % P == P - 1 (P = attention.sliding_window_pattern, default the
 * row's swa_period: Gemma 3's 6, gpt-oss's 2; an array of per-layer flags instead of P is taken
 * as it is). */
static int read_swa(wlm_model *m, const wlm_gguf *g, int32_t *layer_swa) {
    const wlm_arch *a = m->hp.arch;
    wlm_hparams *hp = &m->hp;
    char k[96];
    int rc;
    if ((rc = get_dim(m, g, akey(k, sizeof k, a, "attention.sliding_window"), 0, 0, 0, MAX_SEQ,
                      &hp->n_swa)))
        return rc;
    if (hp->n_swa == 0) return WLM_OK;
    const wlm_gguf_kv *pat = wlm_gguf_find_kv(g, akey(k, sizeof k, a, "attention.sliding_window_pattern"));
    if (pat && pat->type == WLM_GGUF_ARRAY) {
        if (pat->arr.n != (uint64_t)hp->n_layers)
            return wlm_set_error(m->errmsg, WLM_ERR_FORMAT, "%s has %llu entries, expected %d "
                                 "(block_count)", k, (unsigned long long)pat->arr.n,
                                 (int)hp->n_layers);
        for (int32_t l = 0; l < hp->n_layers; l++) {
            int64_t v;
            if (wlm_gguf_arr_i64(pat, (uint64_t)l, &v) != WLM_OK)
                return wlm_set_error(m->errmsg, WLM_ERR_FORMAT,
                                     "%s is not an array of booleans or integers", k);
            layer_swa[l] = v != 0;
        }
    } else {
        const int32_t def = a->swa_period ? a->swa_period : 6;
        int32_t period = def;
        if ((rc = get_dim(m, g, k, 0, def, 1, MAX_LAYERS, &period))) return rc;
        for (int32_t l = 0; l < hp->n_layers; l++) layer_swa[l] = l % period < period - 1;
    }
    return get_float(m, g, akey(k, sizeof k, a, "rope.freq_base_swa"),
                     a->swa_rope_same ? hp->rope_theta : 10000.0f, 0.0f, 0, 1e30f,
                     &hp->rope_theta_swa);
}

/* attention.head_count_kv: a number, or (LFM2) one per layer, 0 marking a layer without
 * attention; the attention layers must then agree on one count (n_kv_heads). */
static int read_kv_heads(wlm_model *m, const wlm_gguf *g, wlm_hparams *hp) {
    char k[96];
    const wlm_gguf_kv *kv = wlm_gguf_find_kv(g, akey(k, sizeof k, hp->arch, "attention.head_count_kv"));
    if (!kv || kv->type != WLM_GGUF_ARRAY)
        return get_dim(m, g, k, 0, hp->n_heads, 1, MAX_HEADS, &hp->n_kv_heads);
    if (hp->arch->per_layer) /* Gemma 4: per layer (read_per_layer), the largest here */
        return get_layer_dims(m, g, k, 0, hp->n_heads, 1, MAX_HEADS, &hp->n_kv_heads, NULL);
    if (hp->arch->layers != WLM_LAYERS_SHORTCONV)
        return wlm_set_error(m->errmsg, WLM_ERR_UNSUPPORTED,
                             "%s is an array (per-layer KV head counts), which %s does not take",
                             k, hp->arch->name);
    if (kv->arr.n != (uint64_t)hp->n_layers)
        return wlm_set_error(m->errmsg, WLM_ERR_FORMAT, "%s has %llu entries, expected %d "
                             "(block_count)", k, (unsigned long long)kv->arr.n, (int)hp->n_layers);
    hp->n_kv_heads = 0;
    for (int32_t l = 0; l < hp->n_layers; l++) {
        int64_t v;
        if (wlm_gguf_arr_i64(kv, (uint64_t)l, &v) != WLM_OK || v < 0 || v > MAX_HEADS)
            return wlm_set_error(m->errmsg, WLM_ERR_FORMAT,
                                 "%s[%d] is not a KV head count within 0..%d", k, (int)l, MAX_HEADS);
        if (v == 0) continue;
        if (hp->n_kv_heads && v != hp->n_kv_heads)
            return wlm_set_error(m->errmsg, WLM_ERR_UNSUPPORTED,
                                 "%s gives attention layers different KV head counts (%d and "
                                 "%lld), which is not supported", k, (int)hp->n_kv_heads,
                                 (long long)v);
        hp->n_kv_heads = (int32_t)v;
    }
    if (hp->n_kv_heads == 0) hp->n_kv_heads = hp->n_heads; /* no attention layer at all */
    return WLM_OK;
}

/* Multi-section RoPE (arch.c's rope_sections: Qwen3.5's IMROPE, Qwen2-VL's MROPE):
 * rope.dimension_sections, 3 or 4 widths of rotated pairs (llama.cpp requires the key). */
static int read_rope_sections(wlm_model *m, const wlm_gguf *g) {
    wlm_hparams *hp = &m->hp;
    const wlm_arch *a = hp->arch;
    char k[96];
    if (a->rope_sections) {
        const wlm_gguf_kv *sec = wlm_gguf_find_kv(g, akey(k, sizeof k, a, "rope.dimension_sections"));
        if (!sec || sec->type != WLM_GGUF_ARRAY || sec->arr.n < 3 || sec->arr.n > 4)
            return wlm_set_error(m->errmsg, WLM_ERR_FORMAT,
                                 "%s must be an array of 3 or 4 section widths", k);
        int64_t sum = 0;
        for (uint64_t i = 0; i < sec->arr.n; i++) {
            int64_t v;
            if (wlm_gguf_arr_i64(sec, i, &v) != WLM_OK || v < 0 || v > MAX_DIM)
                return wlm_set_error(m->errmsg, WLM_ERR_FORMAT, "%s[%d] is not a width in 0..%d",
                                     k, (int)i, MAX_DIM);
            hp->rope_sections[i] = (int32_t)v;
            sum += v;
        }
        if (sum == 0)
            return wlm_set_error(m->errmsg, WLM_ERR_FORMAT, "%s adds up to 0", k);
    }
    return WLM_OK;
}

/* The hybrids' layer kinds and recurrent shapes (arch.c's `layers`), into mixer[n_layers]:
 * - Qwen3.5: block_count counts nextn_predict_layers multi-token-prediction blocks at the end,
 *   which plain decoding never runs (dropped here); attention.recurrent_layers (one flag per
 *   layer, true = DeltaNet) when present, else layer l is attention when (l + 1) %
 *   full_attention_interval == 0 (default 4); ssm.conv_kernel K, ssm.state_size D,
 *   ssm.group_count HK, ssm.time_step_rank HV (a multiple of HK), ssm.inner_size = HV D;
 *   rope.dimension_sections, 4 numbers (llama.cpp requires them).
 * - LFM2: attention where the per-layer head_count_kv is not 0 (read_kv_heads), short
 *   convolutions of shortconv.l_cache taps elsewhere.
 * State per sequence: each recurrent layer keeps its conv's last K - 1 inputs, and DeltaNet
 * its HV matrices of D × D. */
#define MAX_CONV WLM_GGUF_RESIDENT_TAPS /* a conv kernel must stay resident (gguf.h) */
#define MAX_SSM_D 256 /* kernels' scratch (wlm_deltanet_fn) */
static int read_hybrid(wlm_model *m, const wlm_gguf *g, int32_t *mixer) {
    wlm_hparams *hp = &m->hp;
    const wlm_arch *a = hp->arch;
    char k[96];
    int rc;
    for (int32_t l = 0; l < hp->n_layers; l++) mixer[l] = WLM_MIX_ATTN;
    if (a->layers == WLM_LAYERS_ATTN) {
        hp->n_attn_layers = hp->n_layers;
        return WLM_OK;
    }
    if (hp->bidirectional) /* LFM2's ColBERT variants: a centred conv, not implemented */
        return wlm_set_error(m->errmsg, WLM_ERR_UNSUPPORTED,
                             "%s with bidirectional attention (%s.attention.causal false) is not "
                             "supported", a->name, a->name);
    if (a->layers == WLM_LAYERS_DELTANET) {
        int32_t nextn = 0, interval = 4;
        if ((rc = get_dim(m, g, akey(k, sizeof k, a, "nextn_predict_layers"), 0, 0, 0,
                          hp->n_layers - 1, &nextn)) ||
            (rc = get_dim(m, g, akey(k, sizeof k, a, "full_attention_interval"), 0, 4, 1,
                          MAX_LAYERS, &interval)))
            return rc;
        const wlm_gguf_kv *rl = wlm_gguf_find_kv(g, akey(k, sizeof k, a, "attention.recurrent_layers"));
        if (rl) { /* one flag per block, the MTP blocks included */
            if (rl->type != WLM_GGUF_ARRAY || rl->arr.n != (uint64_t)hp->n_layers)
                return wlm_set_error(m->errmsg, WLM_ERR_FORMAT,
                                     "%s must be an array of %d flags (block_count)", k,
                                     (int)hp->n_layers);
        }
        hp->n_layers -= nextn;
        for (int32_t l = 0; l < hp->n_layers; l++) {
            int64_t v = (l + 1) % interval != 0;
            if (rl && wlm_gguf_arr_i64(rl, (uint64_t)l, &v) != WLM_OK)
                return wlm_set_error(m->errmsg, WLM_ERR_FORMAT,
                                     "%s is not an array of booleans or integers", k);
            mixer[l] = v ? WLM_MIX_DELTANET : WLM_MIX_ATTN;
        }
        int32_t inner = 0;
        if ((rc = get_dim(m, g, akey(k, sizeof k, a, "ssm.conv_kernel"), 1, 0, 2, MAX_CONV,
                          &hp->ssm_conv)) ||
            (rc = get_dim(m, g, akey(k, sizeof k, a, "ssm.state_size"), 1, 0, 1, MAX_SSM_D,
                          &hp->ssm_d)) ||
            (rc = get_dim(m, g, akey(k, sizeof k, a, "ssm.group_count"), 1, 0, 1, MAX_HEADS,
                          &hp->ssm_hk)) ||
            (rc = get_dim(m, g, akey(k, sizeof k, a, "ssm.time_step_rank"), 1, 0, 1, MAX_HEADS,
                          &hp->ssm_hv)) ||
            (rc = get_dim(m, g, akey(k, sizeof k, a, "ssm.inner_size"), 0,
                          hp->ssm_hv * hp->ssm_d, 1, MAX_HIDDEN, &inner)))
            return rc;
        if (hp->ssm_hv % hp->ssm_hk != 0 || inner != hp->ssm_hv * hp->ssm_d)
            return wlm_set_error(m->errmsg, WLM_ERR_FORMAT,
                                 "%s.ssm: time_step_rank %d must be a multiple of group_count %d "
                                 "and inner_size %d equal time_step_rank × state_size %d",
                                 a->name, (int)hp->ssm_hv, (int)hp->ssm_hk, (int)inner,
                                 (int)hp->ssm_d);
        hp->ssm_channels = 2 * hp->ssm_hk * hp->ssm_d + hp->ssm_hv * hp->ssm_d;
        if (hp->ssm_channels > MAX_HIDDEN)
            return wlm_set_error(m->errmsg, WLM_ERR_FORMAT,
                                 "%s.ssm: %d conv channels exceed %d", a->name,
                                 (int)hp->ssm_channels, MAX_HIDDEN);
    } else { /* WLM_LAYERS_SHORTCONV: head_count_kv's zeros (read_kv_heads) */
        const wlm_gguf_kv *kv = wlm_gguf_find_kv(g, akey(k, sizeof k, a, "attention.head_count_kv"));
        for (int32_t l = 0; kv && kv->type == WLM_GGUF_ARRAY && l < hp->n_layers; l++) {
            int64_t v = 1;
            wlm_gguf_arr_i64(kv, (uint64_t)l, &v); /* checked by read_kv_heads */
            mixer[l] = v == 0 ? WLM_MIX_SHORTCONV : WLM_MIX_ATTN;
        }
        if ((rc = get_dim(m, g, akey(k, sizeof k, a, "shortconv.l_cache"), 1, 0, 2, MAX_CONV,
                          &hp->ssm_conv)))
            return rc;
        hp->ssm_channels = hp->dim;
        /* Some third-party files keep LFM2's unadjusted feed_forward_length (12288 for a 1.2B
         * whose feed-forward is 8192 wide): the width of the tensors is the one computed. */
        const wlm_gguf_tensor *gate = wlm_gguf_find_tensor(g, "blk.0.ffn_gate.weight");
        if (gate && gate->ne[1] >= 1 && gate->ne[1] <= MAX_HIDDEN) hp->hidden_dim = (int32_t)gate->ne[1];
    }
    for (int32_t l = 0; l < hp->n_layers; l++) { /* (map_weights lays out KV slots and state) */
        if (mixer[l] == WLM_MIX_ATTN) hp->n_attn_layers++;
        else hp->n_rec_layers++;
    }
    return WLM_OK;
}

/* Gemma 4's per-layer shapes (arch->per_layer; llama.cpp's LLM_ARCH_GEMMA4 hparams), after
 * read_swa: n_ff[l] and n_kvh[l] from feed_forward_length and attention.head_count_kv (numbers
 * or per-layer arrays); the sliding layers' head size attention.key_length_swa (=
 * value_length_swa) and rotated width rope.dimension_count_swa; attention.shared_kv_layers S
 * (the last S layers read the cache of layer L - S - 2 when sliding, L - S - 1 when full, which
 * must be of the same kind); embedding_length_per_layer_input P (required, 0: none). head[l]:
 * each layer's head size. hp's head_size, q_dim, kv_dim become the largest of any layer. */
static int read_per_layer(wlm_model *m, const wlm_gguf *g, const int32_t *layer_swa,
                          int32_t *n_ff, int32_t *n_kvh, int32_t *head) {
    wlm_hparams *hp = &m->hp;
    const wlm_arch *a = hp->arch;
    const int32_t L = hp->n_layers;
    char k[96];
    int rc;
    int32_t mx = 0, hs = hp->head_size, vs = 0;
    if ((rc = get_layer_dims(m, g, akey(k, sizeof k, a, "feed_forward_length"), 1, 0, 1, MAX_HIDDEN,
                             &mx, n_ff)) ||
        (rc = get_layer_dims(m, g, akey(k, sizeof k, a, "attention.head_count_kv"), 0, hp->n_heads,
                             1, MAX_HEADS, &mx, n_kvh)))
        return rc;
    for (int32_t l = 0; l < L; l++)
        if (hp->n_heads % n_kvh[l] != 0)
            return wlm_set_error(m->errmsg, WLM_ERR_FORMAT,
                                 "%s[%d] = %d does not divide attention.head_count %d", k, (int)l,
                                 (int)n_kvh[l], (int)hp->n_heads);
    if (hp->n_swa <= 0)
        return wlm_set_error(m->errmsg, WLM_ERR_FORMAT, "%s needs %s.attention.sliding_window > 0",
                             a->name, a->name);
    if ((rc = get_dim(m, g, akey(k, sizeof k, a, "attention.key_length_swa"), 0, hp->head_size, 2,
                      MAX_DIM, &hs)) ||
        (rc = get_dim(m, g, akey(k, sizeof k, a, "attention.value_length_swa"), 0, hs, 2, MAX_DIM,
                      &vs)) ||
        (rc = get_dim(m, g, akey(k, sizeof k, a, "rope.dimension_count_swa"), 0, hs, 2, MAX_DIM,
                      &hp->n_rot_swa)) ||
        (rc = get_dim(m, g, akey(k, sizeof k, a, "attention.shared_kv_layers"), 0, 0, 0, L - 1,
                      &hp->n_shared_kv)) ||
        (rc = get_dim(m, g, akey(k, sizeof k, a, "embedding_length_per_layer_input"), 1, 0, 0,
                      MAX_DIM, &hp->n_ple)) ||
        (rc = get_float(m, g, akey(k, sizeof k, a, "final_logit_softcapping"), 0.0f, 0.0f, 1,
                        1e30f, &hp->final_softcap)))
        return rc;
    if (vs != hs || hs % 2 != 0 || (uint64_t)hs * (uint64_t)hp->n_heads > MAX_HIDDEN)
        return wlm_set_error(m->errmsg, WLM_ERR_FORMAT,
                             "%s.attention.key_length_swa %d and value_length_swa %d must be equal, "
                             "even, and head_count × it at most %d", a->name, (int)hs, (int)vs,
                             MAX_HIDDEN);
    if (hp->n_rot_swa % 2 != 0 || hp->n_rot_swa > hs)
        return wlm_set_error(m->errmsg, WLM_ERR_FORMAT,
                             "%s.rope.dimension_count_swa %d must be even and within 2..%d (the "
                             "sliding layers' head size)", a->name, (int)hp->n_rot_swa, (int)hs);
    if ((uint64_t)hp->n_ple * (uint64_t)L > MAX_HIDDEN)
        return wlm_set_error(m->errmsg, WLM_ERR_FORMAT,
                             "%s.embedding_length_per_layer_input %d × %d layers exceeds %d",
                             a->name, (int)hp->n_ple, (int)L, MAX_HIDDEN);
    const int32_t first_shared = L - hp->n_shared_kv;
    for (int32_t l = first_shared; l < L; l++) { /* llama.cpp's fixed rule */
        const int32_t src = first_shared - (layer_swa[l] ? 2 : 1);
        if (src < 0 || layer_swa[src] != layer_swa[l])
            return wlm_set_error(m->errmsg, WLM_ERR_FORMAT,
                                 "%s.attention.shared_kv_layers %d: layer %d (%s) would read the "
                                 "KV cache of layer %d, which is not a %s layer", a->name,
                                 (int)hp->n_shared_kv, (int)l, layer_swa[l] ? "sliding" : "full",
                                 (int)src, layer_swa[l] ? "sliding" : "full");
        if (n_kvh[l] != n_kvh[src])
            return wlm_set_error(m->errmsg, WLM_ERR_FORMAT,
                                 "%s.attention.head_count_kv: layer %d has %d KV heads but reads "
                                 "the KV cache of layer %d, which has %d", a->name, (int)l,
                                 (int)n_kvh[l], (int)src, (int)n_kvh[src]);
    }
    hp->head_size_swa = hs;
    int32_t hmax = hp->head_size > hs ? hp->head_size : hs, kvmax = 0;
    for (int32_t l = 0; l < L; l++) {
        head[l] = layer_swa[l] ? hs : hp->head_size;
        if (n_kvh[l] * head[l] > kvmax) kvmax = n_kvh[l] * head[l];
    }
    hp->head_size = hmax;
    hp->q_dim = hmax * hp->n_heads;
    hp->kv_dim = kvmax;
    return WLM_OK;
}

/* Floats of one layer's recurrent state: its conv's last K - 1 inputs, and DeltaNet's HV
 * matrices of D × D; 0 for attention. */
static size_t layer_state_floats(const wlm_hparams *hp, int32_t mixer) {
    if (mixer == WLM_MIX_ATTN) return 0;
    size_t n = (size_t)(hp->ssm_conv - 1) * (size_t)hp->ssm_channels;
    if (mixer == WLM_MIX_DELTANET) n += (size_t)hp->ssm_hv * (size_t)hp->ssm_d * (size_t)hp->ssm_d;
    return n;
}

/* A mixture of experts (arch.c's moe): expert_count E, expert_used_count k (1..E),
 * expert_feed_forward_length (default feed_forward_length / k, as llama.cpp's qwen3moe),
 * leading_dense_block_count (layers before it keep a dense feed-forward), expert_gating_func
 * (llama.cpp's values; default the architecture's), expert_weights_scale (default 1),
 * expert_weights_norm (default the architecture's). */
#define MAX_EXPERTS 512 /* llama.cpp's LLAMA_MAX_EXPERTS */
static int read_moe(wlm_model *m, const wlm_gguf *g, uint32_t experts) {
    wlm_hparams *hp = &m->hp;
    const wlm_arch *a = hp->arch;
    char k[96];
    int rc;
    if (experts <= 1) {
        if (a->moe == WLM_T_REQ)
            return wlm_set_error(m->errmsg, WLM_ERR_FORMAT,
                                 "%s.expert_count must be 2..%d (%s is a mixture of experts)",
                                 a->name, MAX_EXPERTS, a->name);
        return WLM_OK;
    }
    if (a->moe == WLM_T_NO)
        return wlm_set_error(m->errmsg, WLM_ERR_UNSUPPORTED,
                             "mixture-of-experts %s models (%s.expert_count %u) are not supported",
                             a->name, a->name, experts);
    if (experts > MAX_EXPERTS)
        return wlm_set_error(m->errmsg, WLM_ERR_FORMAT, "%s.expert_count = %u is outside 2..%d",
                             a->name, experts, MAX_EXPERTS);
    hp->n_expert = (int32_t)experts;
    int32_t gating = a->moe_gating, norm_w = a->moe_norm_w;
    if ((rc = get_dim(m, g, akey(k, sizeof k, a, "expert_used_count"), 1, 0, 1, hp->n_expert,
                      &hp->n_expert_used)) ||
        (rc = get_dim(m, g, akey(k, sizeof k, a, "expert_feed_forward_length"), 0,
                      hp->hidden_dim / hp->n_expert_used, 1, MAX_HIDDEN, &hp->expert_ff)) ||
        (rc = get_dim(m, g, akey(k, sizeof k, a, "leading_dense_block_count"), 0, 0, 0,
                      hp->n_layers, &hp->n_dense_lead)) ||
        (rc = get_dim(m, g, akey(k, sizeof k, a, "expert_gating_func"), 0, gating, 1, 3,
                      &gating)) ||
        (rc = wlm_gguf_get_bool_or(g, akey(k, sizeof k, a, "expert_weights_norm"), norm_w,
                                   &norm_w, m->errmsg, WLM_ERRMSG_SIZE)) ||
        (rc = get_float(m, g, akey(k, sizeof k, a, "expert_weights_scale"), 1.0f, 0.0f, 1, 1e6f,
                        &hp->moe_w_scale)))
        return rc;
    /* the products split experts by pairs of rows (wlm_matmul_segs) */
    if (hp->expert_ff % 2 != 0 || hp->dim % 2 != 0)
        return wlm_set_error(m->errmsg, WLM_ERR_UNSUPPORTED,
                             "%s: an expert's width %d and embedding_length %d must be even",
                             a->name, (int)hp->expert_ff, (int)hp->dim);
    hp->moe_gating = gating;
    hp->moe_norm_w = norm_w != 0;
    return WLM_OK;
}

static int read_hparams(wlm_model *m, const wlm_gguf *g, wlm_hparams *hp) {
    const wlm_arch *a = hp->arch;
    char k[96];
    int rc;
    uint32_t experts = 0;
    if ((rc = get_dim(m, g, akey(k, sizeof k, a, "embedding_length"), 1, 0, 1, MAX_DIM, &hp->dim)) ||
        (rc = get_dim(m, g, akey(k, sizeof k, a, "block_count"), 1, 0, 1, MAX_LAYERS, &hp->n_layers)) ||
        (rc = get_layer_dims(m, g, akey(k, sizeof k, a, "feed_forward_length"), 1, 0, 1, MAX_HIDDEN,
                             &hp->hidden_dim, NULL)) ||
        (rc = get_layer_dims(m, g, akey(k, sizeof k, a, "attention.head_count"), 1, 0, 1,
                             MAX_HEADS, &hp->n_heads, NULL)) ||
        (rc = same_per_layer(m, g, k, hp->n_heads)) ||
        (rc = read_kv_heads(m, g, hp)) ||
        (rc = get_dim(m, g, akey(k, sizeof k, a, "context_length"), 1, 0, 1, MAX_SEQ, &hp->seq_len)) ||
        (rc = get_float(m, g, akey(k, sizeof k, a, "rope.freq_base"), 10000.0f, 0.0f, 0, 1e30f,
                        &hp->rope_theta)) ||
        (rc = get_float(m, g, akey(k, sizeof k, a, a->norm == WLM_NORM_LAYER
                                                       ? "attention.layer_norm_epsilon"
                                                       : "attention.layer_norm_rms_epsilon"),
                        1e-5f, 0.0f, 1, 1.0f, &hp->norm_eps)) ||
        (rc = wlm_gguf_get_u32_or(g, akey(k, sizeof k, a, "expert_count"), 0, &experts, m->errmsg,
                                  WLM_ERRMSG_SIZE)))
        return rc;
    if (hp->n_kv_heads > hp->n_heads || hp->n_heads % hp->n_kv_heads != 0)
        return wlm_set_error(m->errmsg, WLM_ERR_FORMAT,
                             "attention.head_count %d is not a multiple of head_count_kv %d",
                             (int)hp->n_heads, (int)hp->n_kv_heads);
    if ((rc = read_moe(m, g, experts))) return rc;

    /* Embeddings: causal attention (encoders default to bidirectional) and the pooling the
     * file asks for (llama.cpp's enum llama_pooling_type: none, mean, cls, last, rank). */
    int causal = !a->encoder && !a->bidirectional;
    uint32_t pooling = WLM_POOLING_NONE;
    if ((rc = wlm_gguf_get_bool_or(g, akey(k, sizeof k, a, "attention.causal"), causal, &causal,
                                   m->errmsg, WLM_ERRMSG_SIZE)) ||
        (rc = wlm_gguf_get_u32_or(g, akey(k, sizeof k, a, "pooling_type"), pooling, &pooling,
                                  m->errmsg, WLM_ERRMSG_SIZE)))
        return rc;
    if (pooling > WLM_POOLING_RANK)
        return wlm_set_error(m->errmsg, WLM_ERR_UNSUPPORTED,
                             "%s = %u is not a pooling type this engine knows (0 none, 1 mean, "
                             "2 cls, 3 last, 4 rank)", k, pooling);
    hp->bidirectional = !causal;
    hp->pooling = (int32_t)pooling;

    /* Head size: attention.key_length (Qwen3, Gemma 3 set it), else dim / head_count. */
    const int32_t def_hs = hp->dim % hp->n_heads == 0 ? hp->dim / hp->n_heads : 0;
    int32_t key_len = 0, value_len = 0;
    if ((rc = get_dim(m, g, akey(k, sizeof k, a, "attention.key_length"), def_hs == 0, def_hs, 1,
                      MAX_DIM, &key_len)) ||
        (rc = get_dim(m, g, akey(k, sizeof k, a, "attention.value_length"), 0, key_len, 1,
                      MAX_DIM, &value_len)))
        return rc;
    if (value_len != key_len)
        return wlm_set_error(m->errmsg, WLM_ERR_UNSUPPORTED,
                             "attention.key_length %d differs from value_length %d, which is not "
                             "supported", (int)key_len, (int)value_len);
    if (key_len % 2 != 0 || (uint64_t)key_len * (uint64_t)hp->n_heads > MAX_HIDDEN)
        return wlm_set_error(m->errmsg, WLM_ERR_FORMAT,
                             "the head size %d (attention.key_length, or embedding_length / "
                             "head_count) must be even and head_count × head size at most %d",
                             (int)key_len, MAX_HIDDEN);
    hp->head_size = key_len;
    hp->q_dim = hp->head_size * hp->n_heads;
    hp->kv_dim = hp->head_size * hp->n_kv_heads;

    hp->rope_freq_scale = 1.0f;
    hp->rope_attn_factor = 1.0f;
    hp->rope_theta_swa = hp->rope_theta;
    hp->q_scale = 1.0f;
    hp->embd_scale = a->embd_scale ? sqrtf((float)hp->dim) : 1.0f;
    hp->n_ctx_orig = hp->seq_len;
    if (a->gemma_attn_scale && hp->n_layers == 62) /* llama.cpp: Gemma 3 27B's query scale */
        hp->q_scale = sqrtf((float)hp->head_size) / sqrtf((float)(hp->dim / hp->n_heads));
    if (a->rope == WLM_ROPE_NONE) {
        hp->n_rot = 2; /* unused; keeps the context's RoPE tables non-empty */
        return WLM_OK;
    }
    if ((rc = get_dim(m, g, akey(k, sizeof k, a, "rope.dimension_count"), 0, hp->head_size, 0,
                      MAX_DIM, &hp->n_rot)))
        return rc;
    /* Partial rotary embeddings: the first n_rot dimensions of each head rotate, with the
     * frequencies of an n_rot-wide head (ggml_rope's n_dims); the others pass through. */
    if (hp->n_rot < 2 || hp->n_rot > hp->head_size || hp->n_rot % 2 != 0)
        return wlm_set_error(m->errmsg, WLM_ERR_FORMAT,
                             "%s.rope.dimension_count %d must be even and within 2..%d (the "
                             "head size)", a->name, (int)hp->n_rot, (int)hp->head_size);
    /* RoPE scaling, as llama.cpp reads it: rope.scaling.factor (or the older rope.scale_linear)
     * f; 0 means unset. Type "linear" (the default when the type key is absent) divides
     * positions by f; "none" ignores f; other types (yarn, ...) change the angles otherwise and
     * are refused unless f is 1. Llama 3.1+ "llama3" scaling and Phi-3's LongRoPE are not
     * types: the converters store frequency factors (see map_weights). rope.scaling.attn_factor
     * multiplies cos and sin (ggml_rope_ext's attn_factor, which llama.cpp multiplies by it). */
    float factor = 0.0f;
    if (wlm_gguf_find_kv(g, akey(k, sizeof k, a, "rope.scaling.factor")))
        rc = get_float(m, g, k, 0.0f, 0.0f, 1, 1e30f, &factor);
    else
        rc = get_float(m, g, akey(k, sizeof k, a, "rope.scale_linear"), 0.0f, 0.0f, 1, 1e30f,
                       &factor);
    if (rc != WLM_OK) return rc;
    if (factor == 0.0f) factor = 1.0f;
    hp->rope_freq_scale = 1.0f / factor;
    const wlm_gguf_kv *scaling = wlm_gguf_find_kv(g, akey(k, sizeof k, a, "rope.scaling.type"));
    if (scaling) {
        if (scaling->type != WLM_GGUF_STRING)
            return wlm_set_error(m->errmsg, WLM_ERR_FORMAT, "%s is not a string", k);
        if (wlm_gguf_str_eq(scaling->str, "none")) {
            hp->rope_freq_scale = 1.0f;
        } else if (wlm_gguf_str_eq(scaling->str, "yarn")) { /* YaRN: see wlm_hparams.rope_yarn */
            hp->rope_yarn = factor != 1.0f;
            if ((rc = get_float(m, g, akey(k, sizeof k, a, "rope.scaling.yarn_beta_fast"), 32.0f,
                                0.0f, 0, 1e6f, &hp->yarn_beta_fast)) ||
                (rc = get_float(m, g, akey(k, sizeof k, a, "rope.scaling.yarn_beta_slow"), 1.0f,
                                0.0f, 0, 1e6f, &hp->yarn_beta_slow)))
                return rc;
        } else if (!wlm_gguf_str_eq(scaling->str, "linear") && factor != 1.0f) {
            char t[24];
            size_t n = scaling->str.len < sizeof t - 1 ? scaling->str.len : sizeof t - 1;
            for (size_t i = 0; i < n; i++)
                t[i] = scaling->str.ptr[i] >= 0x20 && scaling->str.ptr[i] < 0x7f ? scaling->str.ptr[i]
                                                                                 : '?';
            t[n] = '\0';
            return wlm_set_error(m->errmsg, WLM_ERR_UNSUPPORTED,
                                 "RoPE scaling type \"%s\" (%s.rope.scaling.factor %g) is not "
                                 "supported (only none, linear and yarn)", t, a->name,
                                 (double)factor);
        }
    }
    if ((rc = get_float(m, g, akey(k, sizeof k, a, "rope.scaling.attn_factor"), 1.0f, 0.0f, 0,
                        1e6f, &hp->rope_attn_factor)) ||
        (rc = get_dim(m, g, akey(k, sizeof k, a, "rope.scaling.original_context_length"), 0,
                      hp->seq_len, 1, MAX_SEQ, &hp->n_ctx_orig)))
        return rc;
    return WLM_OK;
}

/* ---- weights --------------------------------------------------------------------------------- */

/* An optional vector `name` of n floats (WLM_T_REQ: required), into *out (NULL when absent). */
static int get_vec(wlm_model *m, const wlm_gguf *g, const char *name, int32_t n, int need,
                   float **spare, const float **out) {
    *out = NULL;
    if (need == WLM_T_NO) return WLM_OK;
    if (need == WLM_T_OPT && !wlm_gguf_find_tensor(g, name)) return WLM_OK;
    return get_norm(m, g, name, n, spare, out);
}

/* blk.<l>.<suffix> into buf. */
static const char *blk(char *buf, size_t n, int32_t l, const char *suffix) {
    snprintf(buf, n, "blk.%d.%s", (int)l, suffix);
    return buf;
}

static uint64_t mat_bytes(const wlm_tensor *t) {
    return t->data ? (uint64_t)t->row_bytes * (uint64_t)t->rows : 0;
}

/* A recurrent layer's tensors (read_hybrid's shapes):
 * - DeltaNet: attn_qkv [dim, C] (C = 2 HK D + HV D), attn_gate [dim, HV D], ssm_beta and
 *   ssm_alpha [dim, HV], ssm_out [HV D, dim], ssm_conv1d [K, C], ssm_dt.bias [HV], ssm_a [HV],
 *   ssm_norm [D];
 * - short conv: shortconv.in_proj [dim, 3 dim], shortconv.conv [L, dim],
 *   shortconv.out_proj [dim, dim]. */
static int map_recurrent(wlm_model *m, const wlm_gguf *g, int32_t l, float **spare) {
    const wlm_hparams *hp = &m->hp;
    wlm_layer_weights *lw = &m->w.layers[l];
    const int32_t D = hp->dim, C = hp->ssm_channels, K = hp->ssm_conv;
    char name[80];
    int rc;
    if (lw->mixer == WLM_MIX_SHORTCONV)
        return (rc = get_matrix(m, g, blk(name, sizeof name, l, "shortconv.in_proj.weight"), 3 * D,
                                D, &lw->ssm_in)) ||
                       (rc = get_floats(m, g, blk(name, sizeof name, l, "shortconv.conv.weight"),
                                        D, K, spare, &lw->conv_w)) ||
                       (rc = get_matrix(m, g, blk(name, sizeof name, l, "shortconv.out_proj.weight"),
                                        D, D, &lw->ssm_out))
                   ? rc
                   : WLM_OK;
    const int32_t HV = hp->ssm_hv, VD = hp->ssm_hv * hp->ssm_d;
    if ((rc = get_matrix(m, g, blk(name, sizeof name, l, "attn_qkv.weight"), C, D, &lw->ssm_in)) ||
        (rc = get_matrix(m, g, blk(name, sizeof name, l, "attn_gate.weight"), VD, D,
                         &lw->ssm_gate)) ||
        (rc = get_matrix(m, g, blk(name, sizeof name, l, "ssm_beta.weight"), HV, D,
                         &lw->ssm_beta)) ||
        (rc = get_matrix(m, g, blk(name, sizeof name, l, "ssm_alpha.weight"), HV, D,
                         &lw->ssm_alpha)) ||
        (rc = get_matrix(m, g, blk(name, sizeof name, l, "ssm_out.weight"), D, VD, &lw->ssm_out)) ||
        (rc = get_floats(m, g, blk(name, sizeof name, l, "ssm_conv1d.weight"), C, K, spare,
                         &lw->conv_w)) ||
        (rc = get_norm(m, g, blk(name, sizeof name, l, "ssm_dt.bias"), HV, spare, &lw->ssm_dt)) ||
        (rc = get_norm(m, g, blk(name, sizeof name, l, "ssm_a"), HV, spare, &lw->ssm_a)) ||
        (rc = get_norm(m, g, blk(name, sizeof name, l, "ssm_norm.weight"), hp->ssm_d, spare,
                       &lw->ssm_norm)))
        return rc;
    return WLM_OK;
}

static int map_ffn(wlm_model *m, const wlm_gguf *g, int32_t l, float **spare);

/* Gemma 4's attention projections of layer l (map_weights set its shapes): attn_q [E, H·hd];
 * where the layer has its own KV, attn_k [E, kv·hd] with attn_k_norm [hd] and attn_v (absent:
 * V = K); a shared-KV layer uses none of the three (llama.cpp loads them as optional: their
 * shapes are checked when present). Then the per-layer embedding's inp_gate [E, P], proj [P, E],
 * post_norm [E] (P > 0) and the optional layer_output_scale [1]. */
static int map_per_layer_attn(wlm_model *m, const wlm_gguf *g, int32_t l, float **spare) {
    const wlm_hparams *hp = &m->hp;
    wlm_layer_weights *lw = &m->w.layers[l];
    const int32_t D = hp->dim, P = hp->n_ple;
    char name[80];
    int rc;
    if ((rc = get_matrix(m, g, blk(name, sizeof name, l, "attn_q.weight"), lw->q_dim, D, &lw->wq)))
        return rc;
    if (!lw->kv_own) { /* a file may still carry them: checked as llama.cpp does, then unused */
        wlm_tensor unused = {0};
        const float *unused_norm = NULL;
        if ((wlm_gguf_find_tensor(g, blk(name, sizeof name, l, "attn_k.weight")) &&
             (rc = get_matrix(m, g, name, lw->kv_dim, D, &unused))) ||
            (wlm_gguf_find_tensor(g, blk(name, sizeof name, l, "attn_v.weight")) &&
             (rc = get_matrix(m, g, name, lw->kv_dim, D, &unused))) ||
            (wlm_gguf_find_tensor(g, blk(name, sizeof name, l, "attn_k_norm.weight")) &&
             (rc = get_norm(m, g, name, lw->head_size, spare, &unused_norm))))
            return rc;
    } else {
        if ((rc = get_matrix(m, g, blk(name, sizeof name, l, "attn_k.weight"), lw->kv_dim, D,
                             &lw->wk)) ||
            (rc = get_norm(m, g, blk(name, sizeof name, l, "attn_k_norm.weight"), lw->head_size,
                           spare, &lw->k_norm)))
            return rc;
        lw->v_is_k = !wlm_gguf_find_tensor(g, blk(name, sizeof name, l, "attn_v.weight"));
        if (!lw->v_is_k &&
            (rc = get_matrix(m, g, name, lw->kv_dim, D, &lw->wv)))
            return rc;
    }
    if (wlm_gguf_find_tensor(g, blk(name, sizeof name, l, "layer_output_scale.weight")) &&
        (rc = get_norm(m, g, name, 1, spare, &lw->out_scale)))
        return rc;
    if (P == 0) {
        if (wlm_gguf_find_tensor(g, blk(name, sizeof name, l, "inp_gate.weight")))
            return wlm_set_error(m->errmsg, WLM_ERR_FORMAT,
                                 "tensor %s: per-layer embeddings need %s."
                                 "embedding_length_per_layer_input > 0", name, hp->arch->name);
        return WLM_OK;
    }
    if ((rc = get_matrix(m, g, blk(name, sizeof name, l, "inp_gate.weight"), P, D, &lw->ple_gate)) ||
        (rc = get_matrix(m, g, blk(name, sizeof name, l, "proj.weight"), D, P, &lw->ple_proj)) ||
        (rc = get_norm(m, g, blk(name, sizeof name, l, "post_norm.weight"), D, spare,
                       &lw->ple_norm)))
        return rc;
    return WLM_OK;
}

static int map_layer(wlm_model *m, const wlm_gguf *g, int32_t l, float **spare) {
    const wlm_hparams *hp = &m->hp;
    const wlm_arch *a = hp->arch;
    wlm_layer_weights *lw = &m->w.layers[l];
    const int32_t D = hp->dim; /* this layer's widths: Gemma 4's own, else the model's */
    const int32_t Q = lw->q_dim ? lw->q_dim : hp->q_dim, KV = lw->kv_dim ? lw->kv_dim : hp->kv_dim;
    const int32_t HS = lw->head_size ? lw->head_size : hp->head_size;
    const int layer_bias = a->norm == WLM_NORM_LAYER ? WLM_T_REQ : WLM_T_NO;
    char name[80], ffn_norm[48];
    int rc;
    snprintf(ffn_norm, sizeof ffn_norm, "%s.weight", a->ffn_norm_name ? a->ffn_norm_name : "ffn_norm");

    if (a->encoder) { /* LayerNorms after the residual adds instead of before each branch */
        if ((rc = get_norm(m, g, blk(name, sizeof name, l, "attn_output_norm.weight"), D, spare,
                           &lw->attn_out_norm)) ||
            (rc = get_norm(m, g, blk(name, sizeof name, l, "attn_output_norm.bias"), D, spare,
                           &lw->attn_out_norm_b)) ||
            (rc = get_norm(m, g, blk(name, sizeof name, l, "layer_output_norm.weight"), D, spare,
                           &lw->layer_out_norm)) ||
            (rc = get_norm(m, g, blk(name, sizeof name, l, "layer_output_norm.bias"), D, spare,
                           &lw->layer_out_norm_b)))
            return rc;
    } else if ((rc = get_norm(m, g, blk(name, sizeof name, l, "attn_norm.weight"), D, spare,
                              &lw->rms_att)) ||
               (rc = get_vec(m, g, blk(name, sizeof name, l, "attn_norm.bias"), D, layer_bias,
                             spare, &lw->att_norm_b)) ||
               (rc = get_norm(m, g, blk(name, sizeof name, l, ffn_norm), D, spare,
                              &lw->rms_ffn)) ||
               (rc = get_vec(m, g, blk(name, sizeof name, l, "ffn_norm.bias"), D, layer_bias,
                             spare, &lw->ffn_norm_b))) {
        return rc;
    }

    if (lw->mixer != WLM_MIX_ATTN) {
        if ((rc = map_recurrent(m, g, l, spare))) return rc;
        return map_ffn(m, g, l, spare);
    }

    /* attention: one fused attn_qkv (Q rows, then K, then V) or three matrices; a gated
     * attention's attn_q holds each head's query then its gate */
    const int32_t QR = a->attn_gate ? 2 * Q : Q;
    const int fused = a->qkv == WLM_QKV_FUSED ||
                      (a->qkv == WLM_QKV_EITHER &&
                       wlm_gguf_find_tensor(g, blk(name, sizeof name, l, "attn_qkv.weight")));
    if (fused) {
        const float *b = NULL;
        if ((rc = get_matrix(m, g, blk(name, sizeof name, l, "attn_qkv.weight"), Q + 2 * KV, D,
                             &lw->wqkv)) ||
            (rc = get_vec(m, g, blk(name, sizeof name, l, "attn_qkv.bias"), Q + 2 * KV,
                          a->qkv_bias, spare, &b)))
            return rc;
        if (b) {
            lw->bq = b;
            lw->bk = b + Q;
            lw->bv = b + Q + KV;
        }
    } else if (a->per_layer) {
        if ((rc = map_per_layer_attn(m, g, l, spare))) return rc;
    } else {
        if ((rc = get_matrix(m, g, blk(name, sizeof name, l, "attn_q.weight"), QR, D, &lw->wq)) ||
            (rc = get_matrix(m, g, blk(name, sizeof name, l, "attn_k.weight"), KV, D, &lw->wk)) ||
            (rc = get_matrix(m, g, blk(name, sizeof name, l, "attn_v.weight"), KV, D, &lw->wv)) ||
            (rc = get_vec(m, g, blk(name, sizeof name, l, "attn_q.bias"), Q, a->qkv_bias, spare,
                          &lw->bq)) ||
            (rc = get_vec(m, g, blk(name, sizeof name, l, "attn_k.bias"), KV, a->qkv_bias, spare,
                          &lw->bk)) ||
            (rc = get_vec(m, g, blk(name, sizeof name, l, "attn_v.bias"), KV, a->qkv_bias, spare,
                          &lw->bv)))
            return rc;
    }
    if ((rc = get_vec(m, g, blk(name, sizeof name, l, "attn_q_norm.weight"), HS, a->qk_norm,
                      spare, &lw->q_norm)) ||
        (!a->per_layer && /* (map_per_layer_attn reads it where the layer has K) */
         (rc = get_vec(m, g, blk(name, sizeof name, l, "attn_k_norm.weight"), HS, a->qk_norm,
                       spare, &lw->k_norm))) ||
        (rc = get_matrix(m, g, blk(name, sizeof name, l, "attn_output.weight"), D, Q, &lw->wo)) ||
        (rc = get_vec(m, g, blk(name, sizeof name, l, "attn_output.bias"), D, a->out_bias, spare,
                      &lw->bo)) ||
        (rc = get_vec(m, g, blk(name, sizeof name, l, "post_attention_norm.weight"), D,
                      a->post_norms, spare, &lw->post_att_norm)) ||
        (rc = get_vec(m, g, blk(name, sizeof name, l, "post_ffw_norm.weight"), D, a->post_norms,
                      spare, &lw->post_ffn_norm)) ||
        (rc = get_vec(m, g, blk(name, sizeof name, l, "attn_sinks.weight"), hp->n_heads,
                      a->attn_sinks, spare, &lw->attn_sinks)))
        return rc;
    if ((!a->per_layer && (lw->q_norm == NULL) != (lw->k_norm == NULL)) ||
        (lw->post_att_norm == NULL) != (lw->post_ffn_norm == NULL))
        return wlm_set_error(m->errmsg, WLM_ERR_FORMAT,
                             "layer %d has only one of attn_q_norm / attn_k_norm or of "
                             "post_attention_norm / post_ffw_norm", (int)l);

    return map_ffn(m, g, l, spare);
}

/* The feed-forward of layer l. */
/* Per-expert bias rows `name` [cols, E], F32 only (the F16 spare holds vectors and taps, not
 * these), into *out (NULL when absent and optional). */
static int get_expert_bias(wlm_model *m, const wlm_gguf *g, const char *name, int32_t cols,
                           int need, float **spare, const float **out) {
    *out = NULL;
    if (need == WLM_T_NO || (need == WLM_T_OPT && !wlm_gguf_find_tensor(g, name))) return WLM_OK;
    const wlm_gguf_tensor *t = wlm_gguf_find_tensor(g, name);
    if (t && t->type != WLM_TYPE_F32) {
        char tbuf[48];
        return wlm_set_error(m->errmsg, WLM_ERR_UNSUPPORTED,
                             "expert bias %s has type %s; only F32 is supported", name,
                             type_desc(t->type, tbuf, sizeof tbuf));
    }
    return get_floats(m, g, name, m->hp.n_expert, cols, spare, out);
}

static int map_dense_ffn(wlm_model *m, const wlm_gguf *g, int32_t l, float **spare);

/* A mixture-of-experts feed-forward (read_moe's shapes): ffn_gate_inp [dim, E] (+ bias),
 * exp_probs_b.bias [E], ffn_gate_exps / ffn_up_exps [dim, F_exp, E], ffn_down_exps
 * [F_exp, dim, E] (+ biases [F_exp, E], [dim, E]), as the architecture's row says. */
static int map_moe(wlm_model *m, const wlm_gguf *g, int32_t l, float **spare) {
    const wlm_hparams *hp = &m->hp;
    const wlm_arch *a = hp->arch;
    wlm_layer_weights *lw = &m->w.layers[l];
    const int32_t D = hp->dim, E = hp->n_expert, F = hp->expert_ff;
    char name[80];
    int rc;
    lw->ffn_kind = WLM_FFN_KIND_MOE;
    if ((rc = get_matrix(m, g, blk(name, sizeof name, l, "ffn_gate_inp.weight"), E, D,
                         &lw->moe_router)) ||
        (rc = get_vec(m, g, blk(name, sizeof name, l, "ffn_gate_inp.bias"), E,
                      a->moe_router_bias, spare, &lw->moe_router_b)) ||
        (rc = get_vec(m, g, blk(name, sizeof name, l, "exp_probs_b.bias"), E, a->moe_probs_bias,
                      spare, &lw->moe_probs_b)) ||
        (rc = get_vec(m, g, blk(name, sizeof name, l, "ffn_gate_inp.scale"), D,
                      a->moe_router_in == WLM_MOE_IN_STREAM_SCALED ? WLM_T_REQ : WLM_T_NO,
                      spare, &lw->moe_in_scale)) ||
        (rc = get_vec(m, g, blk(name, sizeof name, l, "ffn_down_exps.scale"), E,
                      a->moe_out_scale, spare, &lw->exp_out_scale)))
        return rc;
    const wlm_gguf_tensor *gu =
        a->moe_gate_up
            ? wlm_gguf_find_tensor(g, blk(name, sizeof name, l, "ffn_gate_up_exps.weight"))
            : NULL;
    if (a->moe_gate_up && !gu &&
        !wlm_gguf_find_tensor(g, blk(name, sizeof name, l, "ffn_gate_exps.weight")))
        return wlm_set_error(m->errmsg, WLM_ERR_FORMAT,
                             "GGUF model lacks tensor blk.%d.ffn_gate_up_exps.weight (or "
                             "ffn_gate_exps + ffn_up_exps)", (int)l);
    if (gu) { /* fused: expert e's gate rows, then its up rows; both views of the one tensor */
        if ((rc = get_matrices(m, g, name, E, 2 * (int64_t)F, D, &lw->exp_gate))) return rc;
        lw->exp_gu_stride = 2 * (size_t)F * lw->exp_gate.row_bytes;
        lw->exp_gate.rows = F;
        lw->exp_up = lw->exp_gate;
        if (!gu->external) /* (an external tensor's view is a placeholder, never read here) */
            lw->exp_up.data = (const char *)lw->exp_gate.data + (size_t)F * lw->exp_gate.row_bytes;
    } else if ((rc = get_matrices(m, g, blk(name, sizeof name, l, "ffn_gate_exps.weight"), E, F,
                                  D, &lw->exp_gate)) ||
               (rc = get_matrices(m, g, blk(name, sizeof name, l, "ffn_up_exps.weight"), E, F, D,
                                  &lw->exp_up)))
        return rc;
    if (a->moe_dense_branch && /* the dense feed-forward beside the experts, and their norms */
        ((rc = get_vec(m, g, blk(name, sizeof name, l, "pre_ffw_norm_2.weight"), D, WLM_T_REQ,
                       spare, &lw->moe_pre_norm)) ||
         (rc = get_vec(m, g, blk(name, sizeof name, l, "post_ffw_norm_1.weight"), D, WLM_T_REQ,
                       spare, &lw->moe_post_norm_1)) ||
         (rc = get_vec(m, g, blk(name, sizeof name, l, "post_ffw_norm_2.weight"), D, WLM_T_REQ,
                       spare, &lw->moe_post_norm_2))))
        return rc;
    if ((rc = get_matrices(m, g, blk(name, sizeof name, l, "ffn_down_exps.weight"), E, D, F,
                           &lw->exp_down)) ||
        (rc = get_expert_bias(m, g, blk(name, sizeof name, l, "ffn_gate_exps.bias"), F,
                              a->moe_exp_bias, spare, &lw->exp_gate_b)) ||
        (rc = get_expert_bias(m, g, blk(name, sizeof name, l, "ffn_up_exps.bias"), F,
                              a->moe_exp_bias, spare, &lw->exp_up_b)) ||
        (rc = get_expert_bias(m, g, blk(name, sizeof name, l, "ffn_down_exps.bias"), D,
                              a->moe_exp_bias, spare, &lw->exp_down_b)))
        return rc;
    return a->moe_dense_branch ? map_dense_ffn(m, g, l, spare) : WLM_OK;
}

static int map_ffn(wlm_model *m, const wlm_gguf *g, int32_t l, float **spare) {
    const wlm_hparams *hp = &m->hp;
    char name[80];
    if (hp->n_expert > 0 && l >= hp->n_dense_lead) return map_moe(m, g, l, spare);
    if (hp->n_expert == 0 && hp->arch->moe != WLM_T_NO &&
        wlm_gguf_find_tensor(g, blk(name, sizeof name, l, "ffn_gate_inp.weight")))
        return wlm_set_error(m->errmsg, WLM_ERR_FORMAT,
                             "%s layer %d has a router (%s) but %s.expert_count is absent or "
                             "below 2", hp->arch->name, (int)l, name, hp->arch->name);
    return map_dense_ffn(m, g, l, spare);
}

/* A layer's dense feed-forward: ffn_gate, ffn_up, ffn_down (+ biases) of its width. */
static int map_dense_ffn(wlm_model *m, const wlm_gguf *g, int32_t l, float **spare) {
    const wlm_hparams *hp = &m->hp;
    const wlm_arch *a = hp->arch;
    wlm_layer_weights *lw = &m->w.layers[l];
    const int32_t D = hp->dim, H = lw->hidden ? lw->hidden : hp->hidden_dim;
    char name[80];
    int rc;
    const int32_t up_rows = a->ffn == WLM_FFN_FUSED_GATE_UP ? 2 * H : H;
    if (a->ffn == WLM_FFN_GATED &&
        (rc = get_matrix(m, g, blk(name, sizeof name, l, "ffn_gate.weight"), H, D, &lw->w1)))
        return rc;
    if ((rc = get_matrix(m, g, blk(name, sizeof name, l, "ffn_up.weight"), up_rows, D, &lw->w3)) ||
        (rc = get_matrix(m, g, blk(name, sizeof name, l, "ffn_down.weight"), D, H, &lw->w2)) ||
        (rc = get_vec(m, g, blk(name, sizeof name, l, "ffn_up.bias"), H, a->ffn_bias, spare,
                      &lw->b_up)) ||
        (rc = get_vec(m, g, blk(name, sizeof name, l, "ffn_down.bias"), D, a->ffn_bias, spare,
                      &lw->b_down)))
        return rc;
    return WLM_OK;
}

/* n_rot / 2 positive F32 factors `name`, optional. */
static int get_rope_factors(wlm_model *m, const wlm_gguf *g, const char *name, const float **out) {
    const wlm_gguf_tensor *rf = wlm_gguf_find_tensor(g, name);
    *out = NULL;
    if (!rf) return WLM_OK;
    const int32_t n = m->hp.n_rot / 2;
    if (rf->type != WLM_TYPE_F32) {
        char tbuf[48];
        return wlm_set_error(m->errmsg, WLM_ERR_UNSUPPORTED,
                             "tensor %s has type %s; only F32 is supported", name,
                             type_desc(rf->type, tbuf, sizeof tbuf));
    }
    wlm_tensor t = {0};
    int rc = get_matrix(m, g, name, 1, n, &t);
    if (rc != WLM_OK) {
        if (rc == WLM_ERR_FORMAT && rf->ne[0] != n)
            return wlm_set_error(m->errmsg, WLM_ERR_FORMAT,
                                 "tensor %s has %lld entries, expected %d (%s.rope.dimension_count "
                                 "%d / 2)", name, (long long)rf->ne[0], (int)n,
                                 m->hp.arch->name, (int)m->hp.n_rot);
        return rc;
    }
    const float *f = t.data;
    for (int32_t i = 0; i < n && !m->tensors_pending; i++) /* (pending: not read in yet) */
        if (!(f[i] > 0.0f))
            return wlm_set_error(m->errmsg, WLM_ERR_FORMAT,
                                 "tensor %s: factor %d is %g, not positive", name, (int)i,
                                 (double)f[i]);
    *out = f;
    return WLM_OK;
}

/* A reranker's optional heads (llama.cpp's build_pooling, LLAMA_POOLING_TYPE_RANK): cls
 * (dim × dim, + bias, then tanh) and cls.output (labels × dim, + bias) — an encoder's
 * cross-encoder head, or a decoder's (Qwen3-Reranker: cls.output alone, the "yes"/"no" rows). */
static int map_rank_head(wlm_model *m, const wlm_gguf *g, float **spare) {
    wlm_weights *w = &m->w;
    const int32_t D = m->hp.dim;
    const wlm_gguf_tensor *t;
    int rc;
    if (wlm_gguf_find_tensor(g, "cls.weight") &&
        ((rc = get_matrix(m, g, "cls.weight", D, D, &w->cls)) ||
         (rc = get_vec(m, g, "cls.bias", D, WLM_T_OPT, spare, &w->cls_b))))
        return rc;
    if ((t = wlm_gguf_find_tensor(g, "cls.output.weight"))) {
        const int64_t n = t->ne[1] >= 1 && t->ne[1] <= 65536 ? t->ne[1] : 1;
        if ((rc = get_matrix(m, g, "cls.output.weight", n, D, &w->cls_out)) ||
            (rc = get_vec(m, g, "cls.output.bias", (int32_t)n, WLM_T_OPT, spare, &w->cls_out_b)))
            return rc;
        m->hp.n_cls_out = (int32_t)n;
    }
    return WLM_OK;
}

/* An encoder's tensors outside the layers (llama.cpp's LLM_ARCH_BERT / NOMIC_BERT): optional
 * token_types (tokenizer.ggml.token_type_count rows when the key is there; row 0 is used),
 * token_embd_norm with its bias, and optional reranking heads: cls
 * (dim × dim, + bias, then tanh) and cls.output (labels × dim, + bias). */
static int map_encoder(wlm_model *m, const wlm_gguf *g, float **spare) {
    wlm_weights *w = &m->w;
    const int32_t D = m->hp.dim;
    const wlm_gguf_tensor *t;
    int rc;
    /* tokenizer.ggml.token_type_count (llama.cpp's n_token_types) gives token_types' rows */
    uint32_t n_types = 0;
    if ((rc = wlm_gguf_get_u32_or(g, "tokenizer.ggml.token_type_count", 0, &n_types, m->errmsg,
                                  WLM_ERRMSG_SIZE)))
        return rc;
    if ((t = wlm_gguf_find_tensor(g, "token_types.weight")) &&
        (rc = get_matrix(m, g, "token_types.weight",
                         n_types ? (int64_t)n_types : t->ne[1] >= 1 && t->ne[1] <= 64 ? t->ne[1] : 1,
                         D, &w->type_embd)))
        return rc;
    if ((rc = get_norm(m, g, "token_embd_norm.weight", D, spare, &w->embd_norm)) ||
        (rc = get_norm(m, g, "token_embd_norm.bias", D, spare, &w->embd_norm_b)))
        return rc;
    return map_rank_head(m, g, spare);
}

static int map_weights(wlm_model *m, const wlm_gguf *g, const int32_t *layer_swa,
                       const int32_t *mixer, const int32_t *shape) {
    wlm_hparams *hp = &m->hp;
    wlm_weights *w = &m->w;
    const wlm_arch *a = hp->arch;
    const int32_t D = hp->dim, L = hp->n_layers;
    char k[96], final_norm[48];
    int rc;
    snprintf(final_norm, sizeof final_norm, "%s.weight",
             a->final_norm_name ? a->final_norm_name : "output_norm");

    /* The vocabulary size comes from the embedding's row count. */
    const wlm_gguf_tensor *emb = wlm_gguf_find_tensor(g, "token_embd.weight");
    if (!emb) return wlm_set_error(m->errmsg, WLM_ERR_FORMAT, "GGUF model lacks tensor token_embd.weight");
    if (emb->ne[1] < 1 || emb->ne[1] > MAX_VOCAB)
        return wlm_set_error(m->errmsg, WLM_ERR_FORMAT,
                             "tensor token_embd.weight has %lld rows; the vocabulary must be "
                             "1..%d", (long long)emb->ne[1], MAX_VOCAB);
    hp->vocab_size = (int32_t)emb->ne[1];
    uint32_t vocab_key = 0;
    if (wlm_gguf_find_kv(g, akey(k, sizeof k, a, "vocab_size"))) {
        rc = wlm_gguf_get_u32(g, k, &vocab_key, m->errmsg, WLM_ERRMSG_SIZE);
        if (rc != WLM_OK) return rc;
        if (vocab_key != (uint32_t)hp->vocab_size)
            return wlm_set_error(m->errmsg, WLM_ERR_FORMAT,
                                 "%s %u differs from token_embd.weight's %d rows", k,
                                 vocab_key, (int)hp->vocab_size);
    }
    const int32_t V = hp->vocab_size;
    if ((rc = get_matrix(m, g, "token_embd.weight", V, D, &w->token_embedding))) return rc;
    if (a->pos_embd &&
        (rc = get_matrix(m, g, "position_embd.weight", hp->seq_len, D, &w->pos_embedding)))
        return rc;

    /* F16 vectors (norms, biases) and conv kernels are converted once; one allocation holds
     * them all: count the elements of every F16 tensor of their shape (gguf.c's resident rule:
     * one row, or rows of a few taps). */
    uint64_t n_f16 = 0;
    for (size_t i = 0; i < g->n_tensors; i++)
        if (g->tensors[i].type == WLM_TYPE_F16 && wlm_gguf_tensor_resident(&g->tensors[i]))
            n_f16 += g->tensors[i].n_elements;
    /* + a gain of ones: Gemma 4's for V's norm (head_size) and its router's input (dim) */
    const int32_t n_unit = shape || (hp->n_expert && a->moe_router_in == WLM_MOE_IN_STREAM_SCALED)
                               ? (hp->head_size > D ? hp->head_size : D) : 0;
    n_f16 += (uint64_t)n_unit;
    float *spare = NULL, *unit = NULL;
    if (n_f16) {
        if (n_f16 > SIZE_MAX / sizeof(float) ||
            !(m->owned_floats = calloc((size_t)n_f16, sizeof(float))))
            return wlm_set_error(m->errmsg, WLM_ERR_NOMEM, "out of memory for the norm weights");
        spare = m->owned_floats;
    }
    if (n_unit) {
        unit = spare;
        for (int32_t i = 0; i < n_unit; i++) unit[i] = 1.0f;
        spare += n_unit;
    }

    w->layers = calloc((size_t)(uint32_t)L, sizeof *w->layers);
    if (!w->layers) return wlm_set_error(m->errmsg, WLM_ERR_NOMEM, "out of memory for %d layers", (int)L);
    size_t state_off = 0;
    const int32_t first_shared = L - hp->n_shared_kv;
    for (int32_t l = 0, slot = 0; l < L; l++) {
        wlm_layer_weights *lw = &w->layers[l];
        lw->mixer = mixer[l];
        lw->swa = layer_swa[l];
        if (shape) { /* Gemma 4 (read_per_layer): this layer's own shapes and KV source */
            lw->head_size = shape[2 * L + l];
            lw->n_kv_heads = shape[L + l];
            lw->q_dim = lw->head_size * hp->n_heads;
            lw->kv_dim = lw->head_size * lw->n_kv_heads;
            lw->n_rot = lw->swa ? hp->n_rot_swa : hp->n_rot;
            lw->hidden = shape[l];
            lw->q_scale = sqrtf((float)lw->head_size); /* the kernel's 1/sqrt(hs): scale 1 */
            lw->kv_own = l < first_shared;
            lw->kv_src = lw->kv_own ? l : first_shared - (lw->swa ? 2 : 1);
            lw->v_norm = lw->kv_own ? unit : NULL;
        }
        if (mixer[l] != WLM_MIX_ATTN) lw->kv_slot = -1;
        else if (shape && !lw->kv_own) lw->kv_slot = w->layers[lw->kv_src].kv_slot;
        else lw->kv_slot = slot++;
        lw->state_off = state_off;
        state_off += layer_state_floats(hp, mixer[l]);
        if ((rc = map_layer(m, g, l, &spare))) return rc;
        if (lw->ffn_kind == WLM_FFN_KIND_MOE && a->moe_router_in == WLM_MOE_IN_STREAM_SCALED)
            lw->moe_in_norm = unit;
        lw->no_rope = a->nope_step > 0 && (l + 1) % a->nope_step == 0;
    }
    if (shape) hp->n_attn_layers = first_shared; /* the layers with a KV cache of their own */
    hp->state_floats = state_off; /* one sequence's, all layers */
    if (a->encoder) {
        if ((rc = map_encoder(m, g, &spare))) return rc;
    } else if ((rc = get_norm(m, g, final_norm, D, &spare, &w->rms_final)) ||
               (rc = get_vec(m, g, "output_norm.bias", D,
                             a->norm == WLM_NORM_LAYER ? WLM_T_REQ : WLM_T_NO, &spare,
                             &w->final_norm_b)) ||
               (rc = map_rank_head(m, g, &spare))) {
        return rc;
    }

    /* Gemma 4's per-layer embeddings: per_layer_token_embd [P·L, V], per_layer_model_proj
     * [E, P·L], per_layer_proj_norm [P]. */
    if (shape && hp->n_ple > 0) {
        const int32_t PL = hp->n_ple * L;
        if ((rc = get_matrix(m, g, "per_layer_token_embd.weight", V, PL, &w->ple_embd)) ||
            (rc = get_matrix(m, g, "per_layer_model_proj.weight", PL, D, &w->ple_model_proj)) ||
            (rc = get_norm(m, g, "per_layer_proj_norm.weight", hp->n_ple, &spare,
                           &w->ple_proj_norm)))
            return rc;
    } else if (shape && wlm_gguf_find_tensor(g, "per_layer_token_embd.weight")) {
        return wlm_set_error(m->errmsg, WLM_ERR_FORMAT,
                             "tensor per_layer_token_embd.weight: per-layer embeddings need "
                             "%s.embedding_length_per_layer_input > 0", a->name);
    }

    /* RoPE frequency factors: Llama 3.1+ (rope_freqs.weight), Phi-3's LongRoPE pair. */
    if (a->rope_freqs && (rc = get_rope_factors(m, g, "rope_freqs.weight", &w->rope_freqs)))
        return rc;
    if (a->rope_factors) {
        if ((rc = get_rope_factors(m, g, "rope_factors_long.weight", &w->rope_long)) ||
            (rc = get_rope_factors(m, g, "rope_factors_short.weight", &w->rope_short)))
            return rc;
        if ((w->rope_long == NULL) != (w->rope_short == NULL))
            return wlm_set_error(m->errmsg, WLM_ERR_FORMAT,
                                 "GGUF model has only one of rope_factors_long.weight and "
                                 "rope_factors_short.weight");
    }

    /* Sentence Transformers' Dense modules after pooling (EmbeddingGemma): dense_2 (d2 × dim)
     * then dense_3 (dim × d2), both or neither. */
    if (a->dense_out && wlm_gguf_find_tensor(g, "dense_2.weight")) {
        const wlm_gguf_tensor *t2 = wlm_gguf_find_tensor(g, "dense_2.weight");
        const int64_t d2 = t2->ne[1] >= 1 && t2->ne[1] <= MAX_HIDDEN ? t2->ne[1] : 1;
        if ((rc = get_matrix(m, g, "dense_2.weight", d2, D, &w->dense2)) ||
            (rc = get_matrix(m, g, "dense_3.weight", D, d2, &w->dense3)))
            return rc;
    } else if (a->dense_out && wlm_gguf_find_tensor(g, "dense_3.weight")) {
        return wlm_set_error(m->errmsg, WLM_ERR_FORMAT,
                             "GGUF model has dense_3.weight without dense_2.weight");
    }

    m->shared_classifier = !a->encoder && wlm_gguf_find_tensor(g, "output.weight") == NULL;
    if (m->shared_classifier) w->wcls = w->token_embedding;
    else if (!a->encoder && (rc = get_matrix(m, g, "output.weight", V, D, &w->wcls))) return rc;

    /* Bytes read per token: every layer matrix and vector, the final norm, the classifier and
     * one embedding row (the whole table is already counted when it is the classifier); of a
     * mixture of experts, the router and k experts (the active weights). */
    uint64_t bytes = 0;
    const uint64_t vec = (uint64_t)D * sizeof(float);
    for (int32_t l = 0; l < L; l++) {
        const wlm_layer_weights *lw = &w->layers[l];
        const wlm_tensor *t[] = {&lw->wq,      &lw->wk,       &lw->wv,        &lw->wqkv,
                                 &lw->wo,      &lw->w1,       &lw->w2,        &lw->w3,
                                 &lw->ssm_in,  &lw->ssm_gate, &lw->ssm_beta,  &lw->ssm_alpha,
                                 &lw->ssm_out,  &lw->ple_gate, &lw->ple_proj};
        for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) bytes += mat_bytes(t[i]);
        if (lw->ple_norm) bytes += vec;
        if (lw->ffn_kind == WLM_FFN_KIND_MOE) { /* the router and k experts' matrices */
            const uint64_t k = (uint64_t)hp->n_expert_used;
            bytes += mat_bytes(&lw->moe_router) +
                     k * (mat_bytes(&lw->exp_gate) + mat_bytes(&lw->exp_up) +
                          mat_bytes(&lw->exp_down));
            if (lw->exp_gate_b) bytes += k * (uint64_t)(2 * hp->expert_ff + D) * sizeof(float);
        }
        bytes += 2 * vec;
        if (lw->att_norm_b) bytes += 2 * vec;
        if (lw->post_att_norm) bytes += 2 * vec;
        if (lw->bq) bytes += (uint64_t)(hp->q_dim + 2 * hp->kv_dim) * sizeof(float);
        if (lw->bo) bytes += vec;
        if (lw->b_up) bytes += (uint64_t)hp->hidden_dim * sizeof(float) + vec;
        if (lw->q_norm) bytes += 2 * (uint64_t)hp->head_size * sizeof(float);
        if (lw->attn_out_norm) bytes += 4 * vec;
        if (lw->conv_w)
            bytes += (uint64_t)hp->ssm_channels * (uint64_t)hp->ssm_conv * sizeof(float);
        if (lw->ssm_norm) bytes += (uint64_t)(2 * hp->ssm_hv + hp->ssm_d) * sizeof(float);
    }
    if (w->embd_norm) bytes += 2 * vec;
    bytes += mat_bytes(&w->ple_model_proj) + (w->ple_embd.data ? w->ple_embd.row_bytes : 0);
    if (w->type_embd.data) bytes += w->type_embd.row_bytes;
    bytes += vec * (w->final_norm_b ? 2 : 1);
    bytes += mat_bytes(&w->wcls);
    if (!m->shared_classifier) bytes += w->token_embedding.row_bytes;
    if (w->pos_embedding.data) bytes += w->pos_embedding.row_bytes;
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
    if ((rc = read_hparams(m, g, &m->hp))) return rc;
    const size_t L = (size_t)m->hp.n_layers;
    int32_t *layer_swa = calloc(L, sizeof *layer_swa);
    int32_t *mixer = calloc(L, sizeof *mixer);
    int32_t *shape = m->hp.arch->per_layer ? calloc(3 * L, sizeof *shape) : NULL;
    if (!layer_swa || !mixer || (m->hp.arch->per_layer && !shape)) {
        free(layer_swa);
        free(mixer);
        free(shape);
        return wlm_set_error(m->errmsg, WLM_ERR_NOMEM, "out of memory");
    }
    rc = read_hybrid(m, g, mixer);
    if (rc == WLM_OK) rc = read_rope_sections(m, g);
    if (rc == WLM_OK && m->hp.arch->swa) rc = read_swa(m, g, layer_swa);
    if (rc == WLM_OK && shape) rc = read_per_layer(m, g, layer_swa, shape, shape + L, shape + 2 * L);
    /* llama.cpp caps the logits of a Gemma 3 without sliding windows (final_logit_softcapping) */
    if (rc == WLM_OK && m->hp.arch->softcap && m->hp.n_swa == 0 && !shape) {
        char k[96];
        rc = get_float(m, g, akey(k, sizeof k, m->hp.arch, "final_logit_softcapping"), 0.0f, 0.0f,
                       1, 1e30f, &m->hp.final_softcap);
    }
    if (rc == WLM_OK) rc = map_weights(m, g, layer_swa, mixer, shape);
    free(layer_swa);
    free(mixer);
    free(shape);
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
