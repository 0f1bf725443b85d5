/*
 * encoder.c — one normalised S×S piece through the SigLIP vision tower and the projector of the
 * mmproj's row (vision.h), as llama.cpp's clip graph computes it (tools/mtmd/models/siglip.cpp
 * and the gemma3 / idefics3 projector branches): patch convolution as a matrix product, learned
 * positions, pre-norm blocks (LayerNorm → Q/K/V with biases → bidirectional softmax attention
 * over all patches → output projection → residual; LayerNorm → up → GELU (tanh, fp16-table
 * values, as ggml's CPU backend) / quick GELU / SiLU → down → residual), the final LayerNorm,
 * then average pooling + RMS norm + projection (gemma3) or pixel shuffle + projection
 * (idefics3). Matrix products use the library's weight kernels (kernels/quant.h: every weight
 * type, activations quantized once per product to the type's vec_dot_type) split by rows over
 * the thread pool; per-token work (norms, biases, activations, attention) is split by tokens.
 * Threads never change a result: every row and token is computed as on one thread.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/quant.h"
#include "runtime/errors.h"
#include "runtime/threadpool.h"
#include "vision/vision.h"

typedef struct venc {
    wlm_vision *v;
    const wlm_kernels *k;
    wlm_threadpool *pool;
    int use_simd;
    int32_t threads;
    char *xq;          /* quantized activations */
    size_t xq_cap;
} venc;

/* ---- matrix products ----------------------------------------------------------------------- */

typedef struct mm_job {
    const venc *e;
    float *out;        /* (n, rows) */
    const wlm_tensor *t;
    const void *x;     /* floats (n, cols) or quantized rows xs bytes apart */
    size_t xs;
    int32_t n;
    wlm_qmatvec_fn qmv;
    wlm_qmatmat_fn qmm;
} mm_job;

#define MM_ENTRIES 64 /* entries per pass over a tile of rows: their activations stay in cache */

static void mm_rows(const mm_job *j, int r0, int r1) {
    const wlm_tensor *t = j->t;
    const size_t os = (size_t)t->rows;
    size_t R = t->row_bytes ? 65536 / t->row_bytes : 2;
    if (R < 2) R = 2;
    R &= ~(size_t)1;
    for (int a = r0; a < r1; a += (int)R) {
        const int b = (size_t)(r1 - a) <= R ? r1 : a + (int)R;
        for (int32_t e0 = 0; e0 < j->n; e0 += MM_ENTRIES) {
            const int32_t ne = j->n - e0 < MM_ENTRIES ? j->n - e0 : MM_ENTRIES;
            float *out = j->out + (size_t)e0 * os;
            if (!j->qmv) {
                j->e->k->matmat(out, os, t->data, (const float *)j->x + (size_t)e0 * t->cols,
                                (size_t)t->cols, t->cols, a, b, ne);
                continue;
            }
            const char *x = (const char *)j->x + (size_t)e0 * j->xs;
            if (j->qmm) {
                j->qmm(out, os, t->data, t->row_bytes, x, j->xs, t->cols, a, b, ne);
                continue;
            }
            for (int32_t i = 0; i < ne; i++)
                j->qmv(out + (size_t)i * os, t->data, t->row_bytes, x + (size_t)i * j->xs, t->cols,
                       a, b);
        }
    }
}

static void mm_chunk(void *arg, int32_t i, int32_t n) {
    const mm_job *j = arg;
    const int rows = j->t->rows;
    const int r0 = (int)(((int64_t)rows * i / n) & ~(int64_t)1);
    const int r1 = i + 1 == n ? rows : (int)(((int64_t)rows * (i + 1) / n) & ~(int64_t)1);
    if (r1 > r0) mm_rows(j, r0, r1);
}

typedef struct q_job {
    const wlm_type_traits *vt;
    const float *x;
    int32_t cols;
    char *xq;
    size_t xs;
    int32_t n;
} q_job;

static void q_chunk(void *arg, int32_t i, int32_t n) {
    const q_job *j = arg;
    const int32_t b0 = (int32_t)((int64_t)j->n * i / n), b1 = (int32_t)((int64_t)j->n * (i + 1) / n);
    for (int32_t b = b0; b < b1; b++)
        j->vt->from_float(j->x + (size_t)b * j->cols, j->xq + (size_t)b * j->xs, j->cols);
}

/* out (n × t->rows) = x (n × t->cols) · tᵀ. WLM_OK or NOMEM. */
static int matmul(venc *e, float *out, const wlm_tensor *t, const float *x, int32_t n) {
    mm_job j = {e, out, t, x, 0, n, NULL, NULL};
    if (t->type != WLM_TYPE_F32) {
        const wlm_type_traits *tr = wlm_type_get(t->type);
        j.qmv = e->use_simd ? tr->matvec_simd : tr->matvec_ref;
        j.qmm = e->use_simd ? wlm_quant_matmat_simd(t->type) : NULL;
        j.xs = (size_t)t->cols * sizeof(float);
        if (tr->vec_dot_type != WLM_TYPE_F32) {
            const size_t xs = wlm_row_bytes(tr->vec_dot_type, t->cols);
            if (!xs) return WLM_ERR_UNSUPPORTED;
            if (xs * (size_t)n > e->xq_cap) {
                free(e->xq);
                e->xq = malloc(xs * (size_t)n);
                e->xq_cap = e->xq ? xs * (size_t)n : 0;
                if (!e->xq) return WLM_ERR_NOMEM;
            }
            q_job q = {wlm_type_get(tr->vec_dot_type), x, t->cols, e->xq, xs, n};
            wlm_pool_run(e->pool, q_chunk, &q, e->threads < n ? e->threads : n);
            j.x = e->xq;
            j.xs = xs;
        }
    }
    if (e->threads > 1 && t->rows >= 2 * e->threads)
        wlm_pool_run(e->pool, mm_chunk, &j, e->threads);
    else
        mm_rows(&j, 0, t->rows);
    return WLM_OK;
}

/* ---- per-token work ----------------------------------------------------------------------- */

enum { OP_LN, OP_LN_EPS5, OP_BIAS, OP_BIAS_ACT, OP_BIAS_GELU, OP_RESID };

typedef struct tok_job {
    const venc *e;
    int op;
    float *x;          /* (n, len) in/out */
    const float *y;    /* OP_LN: input; OP_RESID: added with the bias */
    const float *w, *b;
    int32_t len, n;
} tok_job;

static float gelu_quick1(float x) { /* ggml's quick GELU, read from its fp16 table */
    const float v = wlm_fp16_to_fp32(wlm_fp32_to_fp16(x));
    return wlm_fp16_to_fp32(wlm_fp32_to_fp16(v * (1.0f / (1.0f + expf(-1.702f * v)))));
}

static void tok_chunk(void *arg, int32_t i, int32_t n) {
    const tok_job *j = arg;
    const int32_t b0 = (int32_t)((int64_t)j->n * i / n), b1 = (int32_t)((int64_t)j->n * (i + 1) / n);
    const int act = j->e->v->act;
    for (int32_t b = b0; b < b1; b++) {
        float *x = j->x + (size_t)b * j->len;
        switch (j->op) {
        case OP_LN:
            j->e->k->layernorm(x, j->y + (size_t)b * j->len, j->w, j->b, j->len, j->e->v->eps);
            break;
        case OP_LN_EPS5: /* the projector's nn.LayerNorm default (llama.cpp: ggml_norm 1e-5) */
            j->e->k->layernorm(x, j->y + (size_t)b * j->len, j->w, j->b, j->len, 1e-5f);
            break;
        case OP_BIAS_GELU: /* the projector's MLP: always GELU, whatever the tower uses */
            if (j->b)
                for (int32_t c = 0; c < j->len; c++) x[c] += j->b[c];
            j->e->k->gelu(x, NULL, j->len);
            break;
        case OP_BIAS:
            if (j->b)
                for (int32_t c = 0; c < j->len; c++) x[c] += j->b[c];
            break;
        case OP_BIAS_ACT:
            for (int32_t c = 0; c < j->len; c++) x[c] += j->b[c];
            if (act == WLM_VACT_GELU) {
                j->e->k->gelu(x, NULL, j->len);
            } else if (act == WLM_VACT_GELU_QUICK) {
                for (int32_t c = 0; c < j->len; c++) x[c] = gelu_quick1(x[c]);
            } else {
                for (int32_t c = 0; c < j->len; c++) x[c] = x[c] / (1.0f + expf(-x[c]));
            }
            break;
        default: { /* OP_RESID: x += y + b */
            const float *y = j->y + (size_t)b * j->len;
            for (int32_t c = 0; c < j->len; c++) x[c] += y[c] + j->b[c];
        }
        }
    }
}

static void per_token(venc *e, int op, float *x, const float *y, const float *w, const float *b,
                      int32_t len, int32_t n) {
    tok_job j = {e, op, x, y, w, b, len, n};
    wlm_pool_run(e->pool, tok_chunk, &j, e->threads < n ? e->threads : n);
}

typedef struct att_job {
    const venc *e;
    float *out;
    const float *q, *k, *v;
    float *scratch;    /* (threads, per) */
    size_t per;
    int32_t n;
} att_job;

static void att_chunk(void *arg, int32_t i, int32_t n) {
    const att_job *j = arg;
    const wlm_vision *v = j->e->v;
    const int32_t W = v->n_embd, hd = W / v->n_heads;
    const int32_t b0 = (int32_t)((int64_t)j->n * i / n), b1 = (int32_t)((int64_t)j->n * (i + 1) / n);
    const float *kb[1] = {j->k}, *vb[1] = {j->v};
    for (int32_t t = b0; t < b1; t++)
        j->e->k->attention(j->out + (size_t)t * W, j->q + (size_t)t * W, kb, vb, j->n, j->n, 0,
                           v->n_heads, 1, hd, W, j->scratch + (size_t)i * j->per);
}

/* ---- the pass ----------------------------------------------------------------------------- */

int32_t wlm_vision_piece_tokens(const wlm_vision *v) {
    const int32_t g = v->image_size / v->patch_size / v->scale;
    return g * g;
}

void wlm_resize_positions(const float *src, int n, int c, float *dst, int gw, int gh) {
    /* ggml_compute_forward_upscale_f32, bilinear | antialias: float arithmetic in its order */
    const float sf0 = (float)gw / (float)n, sf1 = (float)gh / (float)n, off = 0.5f;
    const float support0 = fmaxf(1.0f, 1.0f / sf0), inv0 = 1.0f / support0;
    const float support1 = fmaxf(1.0f, 1.0f / sf1), inv1 = 1.0f / support1;
    for (int i1 = 0; i1 < gh; i1++) {
        const float y = ((float)i1 + off) / sf1;
        int64_t y0 = (int64_t)(y - support1 + off), y1 = (int64_t)(y + support1 + off);
        if (y0 < 0) y0 = 0;
        if (y1 > n) y1 = n;
        for (int i0 = 0; i0 < gw; i0++) {
            const float x = ((float)i0 + off) / sf0;
            int64_t x0 = (int64_t)(x - support0 + off), x1 = (int64_t)(x + support0 + off);
            if (x0 < 0) x0 = 0;
            if (x1 > n) x1 = n;
            float *o = dst + ((size_t)i1 * gw + (size_t)i0) * (size_t)c;
            for (int ch = 0; ch < c; ch++) {
                float val = 0.0f, total = 0.0f;
                for (int64_t sy = y0; sy < y1; sy++) {
                    const float wy = fmaxf(1.0f - fabsf(((float)sy - y + off) * inv1), 0.0f);
                    for (int64_t sx = x0; sx < x1; sx++) {
                        const float wx = fmaxf(1.0f - fabsf(((float)sx - x + off) * inv0), 0.0f);
                        const float wgt = wx * wy;
                        if (wgt <= 0.0f) continue;
                        val += src[((size_t)sy * (size_t)n + (size_t)sx) * (size_t)c + (size_t)ch] * wgt;
                        total += wgt;
                    }
                }
                o[ch] = total > 0.0f ? val / total : val;
            }
        }
    }
}

void wlm_pixel_unshuffle(const float *src, int gw, int gh, int c, int s, float *dst) {
    const int gx = gw / s, gy = gh / s;
    for (int R = 0; R < gy; R++)
        for (int C = 0; C < gx; C++) {
            float *o = dst + ((size_t)R * gx + (size_t)C) * (size_t)c * (size_t)(s * s);
            for (int dy = 0; dy < s; dy++)
                for (int dx = 0; dx < s; dx++)
                    memcpy(o + (size_t)(dy * s + dx) * (size_t)c,
                           src + ((size_t)(R * s + dy) * (size_t)gw + (size_t)(C * s + dx)) * (size_t)c,
                           (size_t)c * sizeof *o);
        }
}

int wlm_vision_encode_piece(wlm_vision *v, const float *pixels, int pw, int ph, float *out,
                            wlm_threadpool *pool, int use_simd) {
    venc e = {v, use_simd ? &wlm_kernels_simd : &wlm_kernels_ref, pool, use_simd,
              wlm_threadpool_size(pool), NULL, 0};
    if (e.threads < 1) e.threads = 1;
    const int32_t P = v->patch_size, GW = pw / P, GH = ph / P, N = GW * GH, W = v->n_embd;
    const int32_t F = v->n_ff, K = 3 * P * P;
    const int32_t s = v->scale, Hd = v->proj2.rows ? v->proj.rows : 0;
    const size_t nw = (size_t)N * W;
    size_t widest = (size_t)(F > K ? (F > W ? F : W) : (K > W ? K : W));
    if ((size_t)Hd > widest * (size_t)(s * s)) widest = ((size_t)Hd + (size_t)(s * s) - 1) / (size_t)(s * s);
    const size_t big = (size_t)N * widest;
    const size_t per = wlm_attention_scratch(v->n_heads, N, W / v->n_heads);
    const int G0 = v->image_size / P; /* the learned positions' side */
    const int resize_pos = v->row->dyn_min_tokens && (GW != G0 || GH != G0);
    float *x = malloc(nw * sizeof *x), *h = malloc(nw * sizeof *h), *q = malloc(nw * sizeof *q);
    float *kk = malloc(nw * sizeof *kk), *vv = malloc(nw * sizeof *vv);
    float *f = malloc(big * sizeof *f);
    float *scratch = malloc((size_t)e.threads * per * sizeof *scratch);
    float *pos = resize_pos ? malloc(nw * sizeof *pos) : NULL;
    int rc = WLM_ERR_NOMEM;
    if (!x || !h || !q || !kk || !vv || !f || !scratch || (resize_pos && !pos)) goto done;
    if (resize_pos) wlm_resize_positions(v->pos, G0, W, pos, GW, GH);

    /* patches: row p = (c, ky, kx) of patch p, raster order */
    for (int32_t py = 0; py < GH; py++)
        for (int32_t px = 0; px < GW; px++) {
            float *row = f + ((size_t)py * GW + px) * K;
            for (int c = 0; c < 3; c++)
                for (int32_t ky = 0; ky < P; ky++)
                    for (int32_t kx = 0; kx < P; kx++)
                        *row++ = pixels[((size_t)c * ph + (size_t)(py * P + ky)) * pw + (size_t)(px * P + kx)];
        }
    if ((rc = matmul(&e, x, &v->patch, f, N))) goto done;
    per_token(&e, OP_RESID, x, resize_pos ? pos : v->pos, NULL, v->patch_b, W, N);

    for (int32_t l = 0; l < v->n_layers; l++) {
        const wlm_vision_layer *L = &v->layers[l];
        per_token(&e, OP_LN, h, x, L->ln1_w, L->ln1_b, W, N);
        if ((rc = matmul(&e, q, &L->q, h, N)) || (rc = matmul(&e, kk, &L->k, h, N)) ||
            (rc = matmul(&e, vv, &L->v, h, N)))
            goto done;
        per_token(&e, OP_BIAS, q, NULL, NULL, L->q_b, W, N);
        per_token(&e, OP_BIAS, kk, NULL, NULL, L->k_b, W, N);
        per_token(&e, OP_BIAS, vv, NULL, NULL, L->v_b, W, N);
        att_job a = {&e, h, q, kk, vv, scratch, per, N};
        wlm_pool_run(pool, att_chunk, &a, e.threads < N ? e.threads : N);
        if ((rc = matmul(&e, q, &L->o, h, N))) goto done;
        per_token(&e, OP_RESID, x, q, NULL, L->o_b, W, N);
        per_token(&e, OP_LN, h, x, L->ln2_w, L->ln2_b, W, N);
        if ((rc = matmul(&e, f, &L->up, h, N))) goto done;
        per_token(&e, OP_BIAS_ACT, f, NULL, NULL, L->up_b, F, N);
        if ((rc = matmul(&e, q, &L->down, f, N))) goto done;
        per_token(&e, OP_RESID, x, q, NULL, L->down_b, W, N);
    }
    per_token(&e, OP_LN, h, x, v->post_w, v->post_b, W, N);

    /* the projector: merge the GW×GH grid into gx×gy tokens, then project */
    const int32_t gx = GW / s, gy = GH / s, T = gx * gy;
    if (v->row->merge == WLM_MERGE_AVG_POOL) {
        for (int32_t R = 0; R < gy; R++)
            for (int32_t C = 0; C < gx; C++) {
                float *o = x + ((size_t)R * gx + C) * W;
                memset(o, 0, (size_t)W * sizeof *o);
                for (int32_t dy = 0; dy < s; dy++)
                    for (int32_t dx = 0; dx < s; dx++) {
                        const float *p = h + ((size_t)(R * s + dy) * GW + (size_t)(C * s + dx)) * W;
                        for (int32_t c = 0; c < W; c++) o[c] += p[c];
                    }
                for (int32_t c = 0; c < W; c++) o[c] /= (float)(s * s);
                if (v->mm_norm) e.k->rmsnorm(o, o, v->mm_norm, W, v->eps);
            }
    } else { /* pixel shuffle: token (R, C) = patches (R·s + dy, C·s + dx), dx fastest */
        wlm_pixel_unshuffle(h, GW, GH, W, s, x);
    }
    const int32_t in = v->row->merge == WLM_MERGE_AVG_POOL ? W : W * s * s;
    if (v->in_norm_w) {
        per_token(&e, OP_LN_EPS5, x, x, v->in_norm_w, v->in_norm_b, in, T);
    } else if (v->in_norm_b) {
        per_token(&e, OP_BIAS, x, NULL, NULL, v->in_norm_b, in, T);
    }
    if (!v->proj2.rows) {
        rc = matmul(&e, out, &v->proj, x, T);
        goto done;
    }
    /* 2-layer MLP: (in → hidden) + bias, GELU, (hidden → D) + bias */
    if ((rc = matmul(&e, f, &v->proj, x, T))) goto done;
    per_token(&e, OP_BIAS_GELU, f, NULL, NULL, v->proj_b, Hd, T);
    if ((rc = matmul(&e, out, &v->proj2, f, T))) goto done;
    per_token(&e, OP_BIAS, out, NULL, NULL, v->proj2_b, v->proj_dim, T);
done:
    if (rc == WLM_ERR_NOMEM)
        wlm_errorf(v->errmsg, sizeof v->errmsg, rc, "image: out of memory in the vision encoder");
    else if (rc)
        wlm_errorf(v->errmsg, sizeof v->errmsg, rc, "image: a weight type the encoder cannot use");
    free(x), free(h), free(q), free(kk), free(vv), free(f), free(scratch), free(pos), free(e.xq);
    return rc;
}
