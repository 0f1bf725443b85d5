/*
 * llama2c.c — reads karpathy/llama2.c's legacy (version 0) checkpoint from a memory buffer:
 * a 28-byte header, then float32 tensors in run.c's order. Every tensor becomes a view into the
 * buffer; the header is bounded and the size checked before any pointer is formed. The newer
 * "ak42" exports and GGUF are recognised and refused with WLM_ERR_UNSUPPORTED.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"

static int32_t read_i32(const unsigned char *p) {
    uint32_t v = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    int32_t r;
    memcpy(&r, &v, sizeof r);
    return r;
}

/* First non-finite float32 (exponent bits all ones) in a[0..n), or -1. */
static int64_t find_non_finite(const float *a, uint64_t n) {
    const uint32_t *u = (const uint32_t *)(const void *)a;
    for (uint64_t i = 0; i < n; i++)
        if ((u[i] & 0x7f800000u) == 0x7f800000u) return (int64_t)i;
    return -1;
}

static wlm_tensor f32_tensor(const float *data, int32_t rows, int32_t cols) {
    wlm_tensor t = {WLM_TYPE_F32, rows, cols, (size_t)cols * sizeof(float), data};
    return t;
}

int wlm_llama2c_load(wlm_model *m, const unsigned char *data, size_t size) {
    char *err = m->errmsg;
    if (size >= 4 && read_i32(data) == 0x616b3432)
        return wlm_set_error(err, WLM_ERR_UNSUPPORTED,
                             "llama2.c version-1/2 export (magic \"ak42\") is not supported; "
                             "export with --version 0 (legacy)");
    if (size < 28)
        return wlm_set_error(err, WLM_ERR_TRUNCATED,
                             "truncated model: %zu bytes, a llama2.c header needs 28", size);
    if (((uintptr_t)data & 3u) != 0)
        return wlm_set_error(err, WLM_ERR_INVALID_ARG, "model buffer must be 4-byte aligned");

    int32_t h[7];
    for (int i = 0; i < 7; i++) h[i] = read_i32(data + 4 * i);
    int32_t dim = h[0], hidden = h[1], n_layers = h[2], n_heads = h[3], n_kv_heads = h[4];
    int32_t vocab = h[5], seq_len = h[6];
    int shared = vocab > 0;
    if (vocab < 0) vocab = vocab == INT32_MIN ? 0 : -vocab;

    if (dim <= 0 || dim > 65536 || hidden <= 0 || hidden > 262144 || n_layers <= 0 ||
        n_layers > 1024 || n_heads <= 0 || n_heads > 1024 || n_kv_heads <= 0 ||
        vocab <= 0 || vocab > (1 << 24) || seq_len <= 0 || seq_len > (1 << 20))
        return wlm_set_error(err, WLM_ERR_FORMAT,
                             "not a llama2.c checkpoint: implausible header (dim %d, hidden_dim "
                             "%d, n_layers %d, n_heads %d, n_kv_heads %d, vocab_size %d, "
                             "seq_len %d)", h[0], h[1], h[2], h[3], h[4], h[5], h[6]);
    if (dim % n_heads != 0 || (dim / n_heads) % 2 != 0)
        return wlm_set_error(err, WLM_ERR_FORMAT,
                             "bad header: dim %d is not n_heads %d times an even head size",
                             dim, n_heads);
    if (n_kv_heads > n_heads || n_heads % n_kv_heads != 0)
        return wlm_set_error(err, WLM_ERR_FORMAT,
                             "bad header: n_heads %d is not a multiple of n_kv_heads %d",
                             n_heads, n_kv_heads);

    const uint64_t D = (uint64_t)dim, H = (uint64_t)hidden, L = (uint64_t)n_layers;
    const uint64_t V = (uint64_t)vocab, S = (uint64_t)seq_len;
    const uint64_t head_size = D / (uint64_t)n_heads;
    const uint64_t kv_dim = head_size * (uint64_t)n_kv_heads;
    /* Counts in floats, run.c's order; every term is below 2^45, the sum cannot overflow. */
    const uint64_t n_emb = V * D, n_rms = L * D, n_wq = L * D * D, n_wk = L * kv_dim * D;
    const uint64_t n_wo = L * D * D, n_w1 = L * H * D, n_freq = S * head_size / 2;
    const uint64_t total = n_emb + n_rms + n_wq + 2 * n_wk + n_wo + n_rms + 3 * n_w1 + D +
                           2 * n_freq + (shared ? 0 : n_emb);
    const uint64_t need = 28 + 4 * total;
    if ((uint64_t)size < need)
        return wlm_set_error(err, WLM_ERR_TRUNCATED,
                             "truncated model: file is %zu bytes, its header (dim %d, %d layers, "
                             "vocab %d) needs %llu",
                             size, dim, n_layers, vocab, (unsigned long long)need);
    if ((uint64_t)size > need)
        return wlm_set_error(err, WLM_ERR_FORMAT,
                             "not a llama2.c version-0 checkpoint: %llu bytes follow the weights "
                             "its header describes (%llu bytes expected in all)",
                             (unsigned long long)((uint64_t)size - need), (unsigned long long)need);

    const float *p = (const float *)(const void *)(data + 28);
    /* Arrays in file order; each stacks all layers. */
    const float *emb, *rms_att, *wq, *wk, *wv, *wo, *rms_ffn, *w1, *w2, *w3, *rms_final, *wcls;
    struct { const char *name; const float **dst; uint64_t n; } t[] = {
        {"token_embedding", &emb, n_emb},
        {"rms_att", &rms_att, n_rms},
        {"wq", &wq, n_wq},
        {"wk", &wk, n_wk},
        {"wv", &wv, n_wk},
        {"wo", &wo, n_wo},
        {"rms_ffn", &rms_ffn, n_rms},
        {"w1", &w1, n_w1},
        {"w2", &w2, n_w1},
        {"w3", &w3, n_w1},
        {"rms_final", &rms_final, D},
        {"freq_cis_real", NULL, n_freq},  /* legacy RoPE tables: recomputed, unused */
        {"freq_cis_imag", NULL, n_freq},
        {"wcls", &wcls, shared ? 0 : n_emb},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        if (t[i].dst) {
            *t[i].dst = p;
            int64_t bad = find_non_finite(p, t[i].n);
            if (bad >= 0)
                return wlm_set_error(err, WLM_ERR_FORMAT,
                                     "corrupt model: tensor %s has a non-finite value (NaN or "
                                     "Inf) at element %lld", t[i].name, (long long)bad);
        }
        p += t[i].n;
    }
    if (shared) wcls = emb;

    wlm_weights *w = &m->w;
    w->layers = calloc((size_t)n_layers, sizeof *w->layers);
    if (!w->layers) return wlm_set_error(err, WLM_ERR_NOMEM, "out of memory for %d layers", n_layers);
    w->token_embedding = f32_tensor(emb, vocab, dim);
    w->wcls = f32_tensor(wcls, vocab, dim);
    w->rms_final = rms_final;
    for (uint64_t l = 0; l < L; l++) {
        wlm_layer_weights *lw = &w->layers[l];
        lw->mixer = WLM_MIX_ATTN;
        lw->kv_slot = (int32_t)l; /* every layer has its KV cache */
        lw->rms_att = rms_att + l * D;
        lw->rms_ffn = rms_ffn + l * D;
        lw->wq = f32_tensor(wq + l * D * D, dim, dim);
        lw->wk = f32_tensor(wk + l * kv_dim * D, (int32_t)kv_dim, dim);
        lw->wv = f32_tensor(wv + l * kv_dim * D, (int32_t)kv_dim, dim);
        lw->wo = f32_tensor(wo + l * D * D, dim, dim);
        lw->w1 = f32_tensor(w1 + l * H * D, hidden, dim);
        lw->w2 = f32_tensor(w2 + l * D * H, dim, hidden);
        lw->w3 = f32_tensor(w3 + l * H * D, hidden, dim);
    }

    wlm_hparams *hp = &m->hp;
    hp->dim = dim;
    hp->hidden_dim = hidden;
    hp->n_layers = n_layers;
    hp->n_attn_layers = n_layers;
    hp->n_heads = n_heads;
    hp->n_kv_heads = n_kv_heads;
    hp->vocab_size = vocab;
    hp->seq_len = seq_len;
    hp->head_size = (int32_t)head_size;
    hp->kv_dim = (int32_t)kv_dim;
    hp->norm_eps = 1e-5f;
    hp->rope_theta = 10000.0f;
    hp->n_rot = (int32_t)head_size;
    hp->rope_freq_scale = 1.0f;
    hp->q_dim = dim;
    hp->rope_theta_swa = hp->rope_theta;
    hp->rope_attn_factor = 1.0f;
    hp->n_ctx_orig = seq_len;
    hp->q_scale = 1.0f;
    hp->embd_scale = 1.0f;
    hp->arch = wlm_arch_find("llama", 5);
    m->shared_classifier = shared;
    /* Bytes read per token: every layer tensor, the final norm, the classifier, and one
     * embedding row (the whole table when it is also the classifier). */
    m->weight_bytes = (size_t)(4 * (2 * n_rms + n_wq + 2 * n_wk + n_wo + 3 * n_w1 + D + n_emb +
                                    (shared ? 0 : D)));
    return WLM_OK;
}
