/*
 * gguf_hparams.c — the hyperparameters of a GGUF model from its <arch>.* keys (llama.cpp's
 * names, read as llama.cpp's llama-model.cpp reads them, every value range-checked: a missing
 * or out-of-range key is an error naming it) into wlm_hparams, and the per-layer tables they
 * give (gguf_layers: sliding windows, sequence mixers, Gemma 4's per-layer shapes).
 *
 * RoPE: rope.freq_base, rope.dimension_count (partial rotation), linear scaling, YaRN, the
 * attention factor and M-RoPE sections are read here; the frequency factors (rope_freqs.weight:
 * Llama 3.1+, Phi-3's LongRoPE) are tensors (gguf_weights.c); forward.c turns them all into
 * per-pair frequencies.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "model/gguf_load.h"
#include "model/model.h"

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
    for (int32_t l = 0; l < hp->n_layers;
         l++) { /* (gguf_map_weights lays out KV slots and state) */
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
size_t gguf_layer_state_floats(const wlm_hparams *hp, int32_t mixer) {
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
        (rc =
             get_dim(m, g, akey(k, sizeof k, a, "expert_gating_func"), 0, gating, 1, 3, &gating)) ||
        (rc = wlm_gguf_get_bool_or(g, akey(k, sizeof k, a, "expert_weights_norm"), norm_w, &norm_w,
                                   m->errmsg, WLM_ERRMSG_SIZE)) ||
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
    if ((rc =
             get_dim(m, g, akey(k, sizeof k, a, "embedding_length"), 1, 0, 1, MAX_DIM, &hp->dim)) ||
        (rc = get_dim(m, g, akey(k, sizeof k, a, "block_count"), 1, 0, 1, MAX_LAYERS,
                      &hp->n_layers)) ||
        (rc = get_layer_dims(m, g, akey(k, sizeof k, a, "feed_forward_length"), 1, 0, 1, MAX_HIDDEN,
                             &hp->hidden_dim, NULL)) ||
        (rc = get_layer_dims(m, g, akey(k, sizeof k, a, "attention.head_count"), 1, 0, 1, MAX_HEADS,
                             &hp->n_heads, NULL)) ||
        (rc = same_per_layer(m, g, k, hp->n_heads)) || (rc = read_kv_heads(m, g, hp)) ||
        (rc = get_dim(m, g, akey(k, sizeof k, a, "context_length"), 1, 0, 1, MAX_SEQ,
                      &hp->seq_len)) ||
        (rc = get_float(m, g, akey(k, sizeof k, a, "rope.freq_base"), 10000.0f, 0.0f, 0, 1e30f,
                        &hp->rope_theta)) ||
        (rc = get_float(m, g,
                        akey(k, sizeof k, a,
                             a->norm == WLM_NORM_LAYER ? "attention.layer_norm_epsilon"
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
     * types: the converters store frequency factors (see gguf_map_weights).
     * rope.scaling.attn_factor multiplies cos and sin (ggml_rope_ext's attn_factor, which llama.cpp
     * multiplies by it). */
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

void gguf_layers_free(gguf_layers *t) {
    free(t->swa);
    free(t->mixer);
    free(t->n_ff);
    memset(t, 0, sizeof *t);
}

int gguf_read_hparams(wlm_model *m, const wlm_gguf *g, gguf_layers *t) {
    memset(t, 0, sizeof *t);
    int rc = read_hparams(m, g, &m->hp);
    if (rc != WLM_OK) return rc;
    const size_t L = (size_t)m->hp.n_layers;
    t->swa = calloc(L, sizeof *t->swa);
    t->mixer = calloc(L, sizeof *t->mixer);
    if (m->hp.arch->per_layer && (t->n_ff = calloc(3 * L, sizeof *t->n_ff))) {
        t->n_kvh = t->n_ff + L;
        t->head = t->n_ff + 2 * L;
    }
    if (!t->swa || !t->mixer || (m->hp.arch->per_layer && !t->n_ff))
        return wlm_set_error(m->errmsg, WLM_ERR_NOMEM, "out of memory");
    rc = read_hybrid(m, g, t->mixer);
    if (rc == WLM_OK) rc = read_rope_sections(m, g);
    if (rc == WLM_OK && m->hp.arch->swa) rc = read_swa(m, g, t->swa);
    if (rc == WLM_OK && t->head) rc = read_per_layer(m, g, t->swa, t->n_ff, t->n_kvh, t->head);
    /* llama.cpp caps the logits of a Gemma 3 without sliding windows (final_logit_softcapping) */
    if (rc == WLM_OK && m->hp.arch->softcap && m->hp.n_swa == 0 && !t->head) {
        char k[96];
        rc = get_float(m, g, akey(k, sizeof k, m->hp.arch, "final_logit_softcapping"), 0.0f, 0.0f,
                       1, 1e30f, &m->hp.final_softcap);
    }
    return rc;
}
