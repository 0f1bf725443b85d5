/*
 * forward.c — a batch of tokens through the Llama transformer (llama2.c's forward(), one
 * entry per row): RMSNorm → Q/K/V projections → RoPE → grouped-query attention over the
 * paged KV cache (F32 or F16 elements) → output projection → residual → RMSNorm → SwiGLU feed-forward → residual, for
 * every layer; then the final RMSNorm and the classifier for the entries that want logits.
 * Entries may belong to different sequences at different positions. The projections are
 * matrix-matrix products that read each weight tile once for the whole batch; every entry's
 * arithmetic is exactly the one-token computation, so batching never changes a result. With a
 * thread pool, each matrix product is split by rows and each entry's attention by heads; every
 * row and head is computed as on one thread, so threads never change a result either.
 * All arithmetic goes through the context's kernel table (scalar or SIMD128).
 */
#include <math.h>
#include <string.h>

#include "model/model.h"
#include "runtime/threadpool.h"

/* Rows per tile of a matrix-matrix product: about 64 KiB of weights, which stay in the L2
 * cache while every group of four entries streams through them (each group's activations stay
 * in L1; 16 KiB tiles re-read the activations from L2 for every few rows and measured ~10%
 * slower on the stories110M shape); even, so that kernels that pair rows see the same pairs
 * as one whole-matrix call. */
static int tile_rows(size_t row_bytes, int rows) {
    size_t r = row_bytes ? (65536 / row_bytes) & ~(size_t)1 : 2;
    if (r < 2) r = 2;
    return r > (size_t)rows ? rows : (int)r;
}

/* One matrix product, as the pool's chunks see it. */
typedef struct matmul_job {
    wlm_context *c;
    float *out;
    size_t out_stride;
    const wlm_tensor *t;
    const void *x;                /* float activations (F32 weights) or quantized ones */
    size_t x_stride;              /* in floats (F32) or bytes (quantized) */
    int32_t n;
    wlm_qmatvec_fn qmv;           /* NULL for F32 weights */
    wlm_qmatmat_fn qmm;           /* a quantized batch kernel (relaxed SIMD), else NULL */
} matmul_job;

/* Rows [r0, r1) of the product for every entry. r0 is even (see tile_rows). */
static void matmul_rows(const matmul_job *j, int r0, int r1) {
    const wlm_tensor *t = j->t;
    const int cols = t->cols;
    if (!j->qmv) {
        const wlm_kernels *k = j->c->k;
        if (j->n == 1) {
            k->matvec(j->out, t->data, j->x, cols, r0, r1);
            return;
        }
        const int R = tile_rows(t->row_bytes, r1 - r0);
        for (int a = r0; a < r1; a += R) {
            const int b = r1 - a < R ? r1 : a + R;
            k->matmat(j->out, j->out_stride, t->data, j->x, j->x_stride, cols, a, b, j->n);
        }
        return;
    }
    const char *xq = j->x;
    if (j->n == 1) {
        j->qmv(j->out, t->data, t->row_bytes, xq, cols, r0, r1);
        return;
    }
    const int R = tile_rows(t->row_bytes, r1 - r0);
    for (int a = r0; a < r1; a += R) {
        const int b = r1 - a < R ? r1 : a + R;
        if (j->qmm) { /* bitwise the per-entry products below */
            j->qmm(j->out, j->out_stride, t->data, t->row_bytes, xq, j->x_stride, cols, a, b, j->n);
            continue;
        }
        for (int32_t e = 0; e < j->n; e++)
            j->qmv(j->out + (size_t)e * j->out_stride, t->data, t->row_bytes,
                   xq + (size_t)e * j->x_stride, cols, a, b);
    }
}

/* Chunk i of n: an even-aligned 1/n of the rows. */
static void matmul_chunk(void *arg, int32_t i, int32_t n) {
    const matmul_job *j = arg;
    const int rows = j->t->rows;
    const int r0 = (int)(((int64_t)rows * i / n) & ~(int64_t)1);
    const int r1 = i + 1 == n ? rows : (int)(((int64_t)rows * (i + 1) / n) & ~(int64_t)1);
    if (r1 > r0) matmul_rows(j, r0, r1);
}

/* Products below this many multiply-adds stay on the calling thread. */
#define PARALLEL_MIN_MACS (1u << 16)

void wlm_matmul(wlm_context *c, float *out, size_t out_stride, const wlm_tensor *t,
                const float *x, size_t x_stride, int32_t n) {
    matmul_job j = {c, out, out_stride, t, x, x_stride, n, NULL, NULL};
    if (t->type != WLM_TYPE_F32) {
        const wlm_type_traits *tr = wlm_type_get(t->type);
        j.qmv = c->use_simd ? tr->matvec_simd : tr->matvec_ref;
        j.qmm = c->use_simd ? wlm_quant_matmat_simd(t->type) : NULL;
        j.x_stride = x_stride * sizeof(float);
        if (tr->vec_dot_type != WLM_TYPE_F32) { /* quantize each entry's activations once */
            const wlm_type_traits *vt = wlm_type_get(tr->vec_dot_type);
            for (int32_t b = 0; b < n; b++)
                vt->from_float(x + (size_t)b * x_stride, (char *)c->xq + (size_t)b * c->xq_stride,
                               t->cols);
            j.x = c->xq;
            j.x_stride = c->xq_stride;
        }
    }
    const int32_t threads = wlm_threadpool_size(c->pool);
    const uint64_t macs = (uint64_t)t->rows * (uint64_t)t->cols * (uint64_t)n;
    if (threads > 1 && macs >= PARALLEL_MIN_MACS && t->rows >= 2 * threads)
        wlm_pool_run(c->pool, matmul_chunk, &j, threads);
    else
        matmul_rows(&j, 0, t->rows);
}

/* The heads of one entry's attention, as the pool's chunks see them. */
typedef struct attention_job {
    wlm_context *c;
    float *out;                   /* (n_heads * head_size) */
    const float *q;               /* (n_heads * head_size) */
    int len;                      /* positions attended to */
} attention_job;

/* Chunk i of n: heads [n_heads * i / n, n_heads * (i + 1) / n), with its own part of the
 * scratch. */
static void attention_chunk(void *arg, int32_t i, int32_t n) {
    const attention_job *j = arg;
    const wlm_context *c = j->c;
    const wlm_hparams *p = &c->model->hp;
    const int hs = p->head_size;
    const int h0 = (int)((int64_t)p->n_heads * i / n), h1 = (int)((int64_t)p->n_heads * (i + 1) / n);
    float *scratch = c->att + wlm_attention_scratch(h0, j->len, hs);
    if (c->kv.type == WLM_KV_F16)
        c->k->attention_f16(j->out, j->q, (const uint16_t *const *)c->kb,
                            (const uint16_t *const *)c->vb, WLM_KV_BLOCK, j->len, h0, h1,
                            p->n_heads / p->n_kv_heads, hs, p->kv_dim, scratch);
    else
        c->k->attention(j->out, j->q, (const float *const *)c->kb, (const float *const *)c->vb,
                        WLM_KV_BLOCK, j->len, h0, h1, p->n_heads / p->n_kv_heads, hs, p->kv_dim,
                        scratch);
}

/* Every head of one entry over positions 0..len-1 (c->kb / c->vb set), split over the pool's
 * threads by heads when there is enough work: each head is computed exactly as alone. */
static void attention_heads(wlm_context *c, float *out, const float *q, int len) {
    const wlm_hparams *p = &c->model->hp;
    attention_job j = {c, out, q, len};
    const int32_t threads = wlm_threadpool_size(c->pool);
    const uint64_t macs = 2 * (uint64_t)p->n_heads * (uint64_t)p->head_size * (uint64_t)len;
    if (threads > 1 && p->n_heads >= threads && macs >= PARALLEL_MIN_MACS)
        wlm_pool_run(c->pool, attention_chunk, &j, threads);
    else
        attention_chunk(&j, 0, 1);
}

void wlm_forward_batch(wlm_context *c, const int32_t *tokens, int32_t n,
                       const int32_t *logit_rows) {
    const wlm_hparams *p = &c->model->hp;
    const wlm_weights *w = &c->model->w;
    const wlm_kernels *k = c->k;
    const int dim = p->dim, hidden = p->hidden_dim, hs = p->head_size, kv_dim = p->kv_dim;
    const int n_heads = p->n_heads, n_rot = p->n_rot, half = n_rot / 2;
    const size_t D = (size_t)dim, H = (size_t)hidden, KV = (size_t)kv_dim;
    float *x = c->x;

    const wlm_tensor *emb = &w->token_embedding;
    const wlm_type_traits *emb_tr = wlm_type_get(emb->type);
    for (int32_t b = 0; b < n; b++) {
        emb_tr->to_float((const char *)emb->data + (size_t)tokens[b] * emb->row_bytes,
                         x + (size_t)b * D, dim);
        /* RoPE angles of this entry's position, shared by every layer and head: the same
         * float expressions as run.c (pos * theta_i; theta_i from context.c). */
        for (int i = 0; i < half; i++) {
            float val = (float)c->ent_pos[b] * c->rope_freq[i];
            c->rope_cos[(size_t)b * half + i] = cosf(val);
            c->rope_sin[(size_t)b * half + i] = sinf(val);
        }
    }

    for (int l = 0; l < p->n_layers; l++) {
        const wlm_layer_weights *lw = &w->layers[l];
        const size_t layer_off = (size_t)l * 2 * WLM_KV_BLOCK * KV * c->kv.elem_bytes;

        /* attention: projections for the whole batch */
        for (int32_t b = 0; b < n; b++)
            k->rmsnorm(c->xb + b * D, x + b * D, lw->rms_att, dim, p->norm_eps);
        wlm_matmul(c, c->q, D, &lw->wq, c->xb, D, n);
        wlm_matmul(c, c->kt, KV, &lw->wk, c->xb, D, n);
        wlm_matmul(c, c->vt, KV, &lw->wv, c->xb, D, n);
        for (int32_t b = 0; b < n; b++) {
            const float *cs = c->rope_cos + (size_t)b * half, *sn = c->rope_sin + (size_t)b * half;
            k->rope(c->q + b * D, n_heads, hs, n_rot, cs, sn);
            k->rope(c->kt + b * KV, p->n_kv_heads, hs, n_rot, cs, sn);
            unsigned char *row = wlm_kv_row(c, c->ent_seq[b], l, c->ent_pos[b]);
            wlm_kv_store(c, row, c->kt + b * KV, kv_dim);
            wlm_kv_store(c, row + WLM_KV_BLOCK * KV * c->kv.elem_bytes, c->vt + b * KV, kv_dim);
        }
        /* every entry attends to its own sequence's positions 0..pos (entries of the same
         * sequence earlier in the batch were written above: causal within the batch) */
        for (int32_t b = 0; b < n; b++) {
            const wlm_seq *s = &c->seqs[c->ent_seq[b]];
            const int len = c->ent_pos[b] + 1;
            const int nb = (len + WLM_KV_BLOCK - 1) / WLM_KV_BLOCK;
            for (int i = 0; i < nb; i++) {
                c->kb[i] = c->kv.base[s->blocks[i]] + layer_off;
                c->vb[i] = (const unsigned char *)c->kb[i] + WLM_KV_BLOCK * KV * c->kv.elem_bytes;
            }
            attention_heads(c, c->xb + b * D, c->q + b * D, len);
        }
        wlm_matmul(c, c->xb2, D, &lw->wo, c->xb, D, n);
        for (size_t i = 0; i < (size_t)n * D; i++) x[i] += c->xb2[i];

        /* feed-forward: w2(silu(w1 x) * w3 x) */
        for (int32_t b = 0; b < n; b++)
            k->rmsnorm(c->xb + b * D, x + b * D, lw->rms_ffn, dim, p->norm_eps);
        wlm_matmul(c, c->hb, H, &lw->w1, c->xb, D, n);
        wlm_matmul(c, c->hb2, H, &lw->w3, c->xb, D, n);
        for (int32_t b = 0; b < n; b++) k->swiglu(c->hb + b * H, c->hb2 + b * H, hidden);
        wlm_matmul(c, c->xb, D, &lw->w2, c->hb, H, n);
        for (size_t i = 0; i < (size_t)n * D; i++) x[i] += c->xb[i];
    }

    /* classifier for the entries that want logits: their rows are consecutive in c->logits,
     * so the wanted entries are gathered and multiplied in one product */
    int32_t m = 0, first_row = -1;
    for (int32_t b = 0; b < n; b++) {
        if (logit_rows[b] < 0) continue;
        if (first_row < 0) first_row = logit_rows[b];
        k->rmsnorm(c->xb + (size_t)m * D, x + b * D, w->rms_final, dim, p->norm_eps);
        m++;
    }
    if (m > 0)
        wlm_matmul(c, c->logits + (size_t)first_row * (size_t)p->vocab_size,
                   (size_t)p->vocab_size, &w->wcls, c->xb, D, m);
}
