/*
 * forward.c — one token through the Llama transformer (llama2.c's forward()): RMSNorm →
 * Q/K/V projections → RoPE → grouped-query attention over the KV cache → output projection →
 * residual → RMSNorm → SwiGLU feed-forward → residual, for every layer; then the final RMSNorm
 * and the classifier. K and V for position `pos` are written into the cache rows in place.
 * All arithmetic goes through the context's kernel table (scalar or SIMD128).
 */
#include <math.h>
#include <string.h>

#include "model.h"

void wlm_matmul(wlm_context *c, float *out, const wlm_tensor *t, const float *x) {
    if (t->type == WLM_TYPE_F32) { /* the common case, through the context's kernel table */
        c->k->matvec(out, t->data, x, t->cols, 0, t->rows);
        return;
    }
    const wlm_type_traits *tr = wlm_type_get(t->type);
    const void *xq = x;
    if (tr->vec_dot_type != WLM_TYPE_F32) {
        wlm_type_get(tr->vec_dot_type)->from_float(x, c->xq, t->cols);
        xq = c->xq;
    }
    (c->use_simd ? tr->matvec_simd : tr->matvec_ref)(out, t->data, t->row_bytes, xq, t->cols, 0,
                                                     t->rows);
}

void wlm_forward(wlm_context *c, int32_t token, int32_t pos, int want_logits) {
    const wlm_hparams *p = &c->model->hp;
    const wlm_weights *w = &c->model->w;
    const wlm_kernels *k = c->k;
    const int dim = p->dim, hidden = p->hidden_dim, hs = p->head_size, kv_dim = p->kv_dim;
    const int n_heads = p->n_heads, kv_mul = p->n_heads / p->n_kv_heads;
    const size_t KV = (size_t)kv_dim;
    float *x = c->x;

    const wlm_tensor *emb = &w->token_embedding;
    wlm_type_get(emb->type)->to_float((const char *)emb->data + (size_t)token * emb->row_bytes, x,
                                      dim);

    /* RoPE angles for this position, shared by every layer and head: theta_i = pos /
     * base^(2i / head_size), the same float expressions as run.c. */
    for (int i = 0; i < hs / 2; i++) {
        float freq = 1.0f / powf(p->rope_theta, (float)(2 * i) / (float)hs);
        float val = (float)pos * freq;
        c->rope_cos[i] = cosf(val);
        c->rope_sin[i] = sinf(val);
    }

    for (int l = 0; l < p->n_layers; l++) {
        const wlm_layer_weights *lw = &w->layers[l];
        const size_t loff = (size_t)l * (size_t)c->n_ctx * KV; /* this layer's cache block */
        float *key_row = c->key_cache + loff + (size_t)pos * KV;
        float *value_row = c->value_cache + loff + (size_t)pos * KV;

        /* attention */
        k->rmsnorm(c->xb, x, lw->rms_att, dim, p->norm_eps);
        wlm_matmul(c, c->q, &lw->wq, c->xb);
        wlm_matmul(c, key_row, &lw->wk, c->xb);
        wlm_matmul(c, value_row, &lw->wv, c->xb);
        k->rope(c->q, n_heads, hs, c->rope_cos, c->rope_sin);
        k->rope(key_row, p->n_kv_heads, hs, c->rope_cos, c->rope_sin);

        for (int h = 0; h < n_heads; h++) {
            const size_t kv_off = loff + (size_t)(h / kv_mul) * (size_t)hs; /* GQA: shared head */
            k->attention(c->xb + (size_t)h * (size_t)hs, c->q + (size_t)h * (size_t)hs,
                         c->key_cache + kv_off, c->value_cache + kv_off, pos + 1, hs, kv_dim,
                         c->att + (size_t)h * (size_t)c->n_ctx);
        }
        wlm_matmul(c, c->xb2, &lw->wo, c->xb);
        for (int i = 0; i < dim; i++) x[i] += c->xb2[i];

        /* feed-forward: w2(silu(w1 x) * w3 x) */
        k->rmsnorm(c->xb, x, lw->rms_ffn, dim, p->norm_eps);
        wlm_matmul(c, c->hb, &lw->w1, c->xb);
        wlm_matmul(c, c->hb2, &lw->w3, c->xb);
        k->swiglu(c->hb, c->hb2, hidden);
        wlm_matmul(c, c->xb, &lw->w2, c->hb);
        for (int i = 0; i < dim; i++) x[i] += c->xb[i];
    }

    if (want_logits) {
        k->rmsnorm(x, x, w->rms_final, dim, p->norm_eps);
        wlm_matmul(c, c->logits, &w->wcls, x);
    }
}
