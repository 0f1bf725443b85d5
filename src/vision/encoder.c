/*
 * encoder.c — one normalised S×S piece through the SigLIP vision tower and the projector of the
 * mmproj's row (vision.h), as llama.cpp's clip graph computes it (tools/mtmd/models/siglip.cpp
 * and the gemma3 / idefics3 projector branches): patch convolution as a matrix product, learned
 * positions, pre-norm blocks (LayerNorm → Q/K/V with biases → bidirectional softmax attention
 * over all patches → output projection → residual; LayerNorm → up → GELU (tanh, fp16-table
 * values, as ggml's CPU backend) / quick GELU / SiLU → down → residual), the final LayerNorm,
 * then average pooling + RMS norm + projection (gemma3) or pixel shuffle + projection
 * (idefics3); or Qwen2.5-VL's tower (tools/mtmd/models/qwen2vl.cpp: two patch kernels,
 * RMSNorm blocks with 2-D RoPE and window attention, a SwiGLU MLP) and its 2×2 merger. Matrix
 * products use the library's weight kernels (kernels/quant.h: every weight type, activations
 * quantized once per product to the type's vec_dot_type) split by rows over the thread pool; per-token work (norms, biases, activations, attention) is split by tokens.
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
    float *wide;       /* per chunk of a product: F16 / BF16 rows widened to floats */
    size_t wide_cap;   /* floats */
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
    float *wide;       /* NULL, or per chunk wide_per floats (mm_widens): chunk i's at i */
    size_t wide_per;
} mm_job;

#define MM_ENTRIES 64 /* entries per pass over a tile of rows: their activations stay in cache */

/* Rows of t a tile holds (about 64 KiB of its bytes, an even count). */
static size_t mm_tile_rows(const wlm_tensor *t) {
    size_t R = t->row_bytes ? 65536 / t->row_bytes : 2;
    if (R < 2) R = 2;
    return R & ~(size_t)1;
}

/* Whether a product widens tiles: F16 / BF16 weights (float activations, no batched kernel)
 * against several entries — a tile of rows widened to floats once, then the F32 batched kernel
 * over every entry, instead of each entry's matvec widening the same rows again (published
 * mmproj files are mostly F16). Else the per-entry matvec path runs. */
static int mm_widens(const venc *e, const wlm_tensor *t, wlm_qmatvec_fn qmv, wlm_qmatmat_fn qmm,
                     int32_t n) {
    if (!qmv || qmm || n < 2 || !e->use_simd) return 0;
    const wlm_type_traits *tr = wlm_type_get(t->type);
    return tr->vec_dot_type == WLM_TYPE_F32 && tr->to_float && tr->block_size == 1;
}

/* Rows [r0, r1) of the product; `wide`: this chunk's widening tile, or NULL. Runs on pool
 * threads: allocates nothing (threadpool.h). */
static void mm_rows(const mm_job *j, int r0, int r1, float *wide) {
    const wlm_tensor *t = j->t;
    const size_t os = (size_t)t->rows;
    const size_t R = mm_tile_rows(t);
    for (int a = r0; a < r1; a += (int)R) {
        const int b = (size_t)(r1 - a) <= R ? r1 : a + (int)R;
        if (wide) {
            wlm_type_get(t->type)->to_float((const char *)t->data + (size_t)a * t->row_bytes, wide,
                                            (int64_t)(b - a) * t->cols);
            for (int32_t e0 = 0; e0 < j->n; e0 += MM_ENTRIES) {
                const int32_t ne = j->n - e0 < MM_ENTRIES ? j->n - e0 : MM_ENTRIES;
                j->e->k->matmat(j->out + (size_t)e0 * os + (size_t)a, os, wide,
                                (const float *)j->x + (size_t)e0 * t->cols, (size_t)t->cols, t->cols,
                                0, b - a, ne);
            }
            continue;
        }
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
    if (r1 > r0) mm_rows(j, r0, r1, j->wide ? j->wide + (size_t)i * j->wide_per : NULL);
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
    mm_job j = {e, out, t, x, 0, n, NULL, NULL, NULL, 0};
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
    const int split = e->threads > 1 && t->rows >= 2 * e->threads;
    if (mm_widens(e, t, j.qmv, j.qmm, n)) {
        /* the chunks' tiles, allocated here: pool threads must not call malloc (threadpool.h) */
        j.wide_per = mm_tile_rows(t) * (size_t)t->cols;
        const size_t need = j.wide_per * (size_t)(split ? e->threads : 1);
        if (need > e->wide_cap) {
            free(e->wide);
            e->wide = malloc(need * sizeof *e->wide);
            e->wide_cap = e->wide ? need : 0;
        }
        j.wide = e->wide; /* NULL (no memory): the per-entry path */
    }
    if (split)
        wlm_pool_run(e->pool, mm_chunk, &j, e->threads);
    else
        mm_rows(&j, 0, t->rows, j.wide);
    return WLM_OK;
}

/* ---- per-token work ----------------------------------------------------------------------- */

enum { OP_LN, OP_LN_EPS5, OP_BIAS, OP_BIAS_ACT, OP_BIAS_GELU, OP_RESID, OP_RMS, OP_SWIGLU, OP_ADD };

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
        case OP_RMS: /* Qwen's norms: RMSNorm × w (+ b when the file has one) */
            j->e->k->rmsnorm(x, j->y + (size_t)b * j->len, j->w, j->len, j->e->v->eps);
            if (j->b)
                for (int32_t c = 0; c < j->len; c++) x[c] += j->b[c];
            break;
        case OP_SWIGLU: { /* x = silu(x + b) ⊙ (y + w): the gate and up projections' biases */
            float *y = (float *)j->y + (size_t)b * j->len;
            for (int32_t c = 0; c < j->len; c++) x[c] += j->b[c], y[c] += j->w[c];
            j->e->k->swiglu(x, y, j->len);
            break;
        }
        case OP_ADD: {
            const float *y = j->y + (size_t)b * j->len;
            for (int32_t c = 0; c < j->len; c++) x[c] += y[c];
            break;
        }
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
    const int32_t *win; /* (n, 2) or NULL: token t attends to tokens win[2t] ..
                           win[2t] + win[2t+1] - 1 (its window) */
} att_job;

static void att_chunk(void *arg, int32_t i, int32_t n) {
    const att_job *j = arg;
    const wlm_vision *v = j->e->v;
    const int32_t W = v->n_embd, hd = W / v->n_heads;
    const int32_t b0 = (int32_t)((int64_t)j->n * i / n), b1 = (int32_t)((int64_t)j->n * (i + 1) / n);
    for (int32_t t = b0; t < b1; t++) {
        const int32_t k0 = j->win ? j->win[2 * t] : 0, nk = j->win ? j->win[2 * t + 1] : j->n;
        const float *kb[1] = {j->k + (size_t)k0 * W}, *vb[1] = {j->v + (size_t)k0 * W};
        j->e->k->attention(j->out + (size_t)t * W, j->q + (size_t)t * W, kb, vb, nk, nk, 0,
                           v->n_heads, 1, hd, W, j->scratch + (size_t)i * j->per);
    }
}

/* ---- Qwen2.5-VL's tower -------------------------------------------------------------------- */

/* 2-D RoPE of Q and K (ggml's rope_multi, GGML_ROPE_TYPE_VISION, base 10000, n_dims = hd/2,
 * sections hd/4 each): pair i of a head (dimensions i and i + hd/2) turns by the patch's row
 * times 10000^(-2i/(hd/2)) for i < hd/4 and by its column times 10000^(-2(i-hd/4)/(hd/2)) for the
 * second quarter; the frequencies as ggml forms them, a running product of powf(10000,
 * -2/(hd/2)) from the position. */
typedef struct rope_job {
    const venc *e;
    float *q, *k;
    const int32_t *pos; /* (n, 2): row, column */
    int32_t n;
} rope_job;

static void rope_chunk(void *arg, int32_t i, int32_t n) {
    const rope_job *j = arg;
    const wlm_vision *v = j->e->v;
    const int32_t W = v->n_embd, hd = W / v->n_heads, half = hd / 2, quarter = hd / 4;
    const int32_t b0 = (int32_t)((int64_t)j->n * i / n), b1 = (int32_t)((int64_t)j->n * (i + 1) / n);
    const float scale = powf(10000.0f, -2.0f / (float)half);
    float cs[WLM_VISION_MAX_HEAD / 2], sn[WLM_VISION_MAX_HEAD / 2];
    for (int32_t t = b0; t < b1; t++) {
        for (int a = 0; a < 2; a++) {
            float theta = (float)j->pos[2 * t + a];
            for (int32_t p = 0; p < quarter; p++) {
                cs[a * quarter + p] = cosf(theta);
                sn[a * quarter + p] = sinf(theta);
                theta *= scale;
            }
        }
        j->e->k->rope_neox(j->q + (size_t)t * W, v->n_heads, hd, hd, cs, sn);
        j->e->k->rope_neox(j->k + (size_t)t * W, v->n_heads, hd, hd, cs, sn);
    }
}

/* The order of the patches through the tower: 2×2 merge groups in raster order of the groups
 * (each group's patches row by row), the groups then reordered window by window (windows of
 * g = window / P / 2 groups a side, raster order; each window's groups raster order), as
 * clip.cpp's window_idx / inv_window_idx. perm[i] = the raster index (over the GW/2 × GH/2 group
 * grid) of the i-th group; pos (N, 2) = each patch's row and column; win (N, 2) = each patch's
 * window (first patch, count), as the window mask allows. */
static void qwen_layout(const wlm_vision *v, int32_t GW, int32_t GH, int32_t *perm, int32_t *pos,
                        int32_t *win) {
    const int32_t pw = GW / 2, ph = GH / 2, g = v->window / v->patch_size / 2;
    int32_t dst = 0;
    for (int32_t y = 0; y < ph; y += g)
        for (int32_t x = 0; x < pw; x += g) {
            const int32_t wh = g < ph - y ? g : ph - y, ww = g < pw - x ? g : pw - x, d0 = dst;
            for (int32_t dy = 0; dy < wh; dy++)
                for (int32_t dx = 0; dx < ww; dx++) perm[dst++] = (y + dy) * pw + (x + dx);
            for (int32_t t = 4 * d0; t < 4 * dst; t++)
                win[2 * t] = 4 * d0, win[2 * t + 1] = 4 * (dst - d0);
        }
    for (int32_t i = 0; i < pw * ph; i++)
        for (int32_t k = 0; k < 4; k++) {
            pos[2 * (4 * i + k)] = 2 * (perm[i] / pw) + k / 2;
            pos[2 * (4 * i + k) + 1] = 2 * (perm[i] % pw) + k % 2;
        }
}

/* Qwen2.5-VL's tower over one piece: the final-normed patches in the tower's order into h (N, W)
 * (x, q, kk, vv: (N, W) scratch; f, g: (N, max(F, 3·P·P)) scratch). perm: as qwen_layout. */
static int qwen_tower(venc *e, const float *pixels, int pw, int ph, float *x, float *h, float *q,
                      float *kk, float *vv, float *f, float *g, float *scratch, size_t per,
                      int32_t *perm) {
    wlm_vision *v = e->v;
    const int32_t P = v->patch_size, GW = pw / P, GH = ph / P, N = GW * GH, W = v->n_embd;
    const int32_t F = v->n_ff, K = 3 * P * P;
    int32_t *pos = malloc((size_t)N * 2 * sizeof *pos), *win = malloc((size_t)N * 2 * sizeof *win);
    int rc = WLM_ERR_NOMEM;
    if (!pos || !win) goto done;
    qwen_layout(v, GW, GH, perm, pos, win);
    for (int32_t t = 0; t < N; t++) { /* patch rows (c, ky, kx), in the tower's order */
        float *row = f + (size_t)t * K;
        const int32_t py = pos[2 * t], px = pos[2 * t + 1];
        for (int c = 0; c < 3; c++)
            for (int32_t ky = 0; ky < P; ky++)
                for (int32_t kx = 0; kx < P; kx++)
                    *row++ = pixels[((size_t)c * ph + (size_t)(py * P + ky)) * pw + (size_t)(px * P + kx)];
    }
    /* the two kernels of the temporal patch, each over the same still image, added */
    if ((rc = matmul(e, x, &v->patch, f, N)) || (rc = matmul(e, q, &v->patch1, f, N))) goto done;
    per_token(e, OP_ADD, x, q, NULL, NULL, W, N);
    if (v->pre_w) per_token(e, OP_RMS, x, x, v->pre_w, v->pre_b, W, N);
    for (int32_t l = 0; l < v->n_layers; l++) {
        const wlm_vision_layer *L = &v->layers[l];
        const int full = v->n_wa_pattern <= 0 || (l + 1) % v->n_wa_pattern == 0;
        per_token(e, OP_RMS, h, x, L->ln1_w, L->ln1_b, W, N);
        if ((rc = matmul(e, q, &L->q, h, N)) || (rc = matmul(e, kk, &L->k, h, N)) ||
            (rc = matmul(e, vv, &L->v, h, N)))
            goto done;
        per_token(e, OP_BIAS, q, NULL, NULL, L->q_b, W, N);
        per_token(e, OP_BIAS, kk, NULL, NULL, L->k_b, W, N);
        per_token(e, OP_BIAS, vv, NULL, NULL, L->v_b, W, N);
        rope_job r = {e, q, kk, pos, N};
        wlm_pool_run(e->pool, rope_chunk, &r, e->threads < N ? e->threads : N);
        att_job a = {e, h, q, kk, vv, scratch, per, N, full ? NULL : win};
        wlm_pool_run(e->pool, att_chunk, &a, e->threads < N ? e->threads : N);
        if ((rc = matmul(e, q, &L->o, h, N))) goto done;
        per_token(e, OP_RESID, x, q, NULL, L->o_b, W, N);
        per_token(e, OP_RMS, h, x, L->ln2_w, L->ln2_b, W, N);
        if ((rc = matmul(e, f, &L->gate, h, N)) || (rc = matmul(e, g, &L->up, h, N))) goto done;
        per_token(e, OP_SWIGLU, f, g, L->up_b, L->gate_b, F, N);
        if ((rc = matmul(e, q, &L->down, f, N))) goto done;
        per_token(e, OP_RESID, x, q, NULL, L->down_b, W, N);
    }
    per_token(e, OP_RMS, h, x, v->post_w, v->post_b, W, N);
done:
    free(pos), free(win);
    return rc;
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
              wlm_threadpool_size(pool), NULL, 0, NULL, 0};
    if (e.threads < 1) e.threads = 1;
    const int32_t P = v->patch_size, GW = pw / P, GH = ph / P, N = GW * GH, W = v->n_embd;
    const int32_t F = v->n_ff, K = 3 * P * P;
    const int32_t s = v->scale, Hd = v->proj2.rows ? v->proj.rows : 0;
    const size_t nw = (size_t)N * W;
    size_t widest = (size_t)(F > K ? (F > W ? F : W) : (K > W ? K : W));
    if ((size_t)Hd > widest * (size_t)(s * s)) widest = ((size_t)Hd + (size_t)(s * s) - 1) / (size_t)(s * s);
    const size_t big = (size_t)N * widest;
    const size_t per = wlm_attention_scratch(v->n_heads, N, W / v->n_heads);
    const int qwen = v->row->tower == WLM_TOWER_QWEN25;
    const int G0 = v->image_size / P; /* the learned positions' side */
    const int resize_pos = !qwen && v->row->dyn_min_tokens && (GW != G0 || GH != G0);
    float *x = malloc(nw * sizeof *x), *h = malloc(nw * sizeof *h), *q = malloc(nw * sizeof *q);
    float *kk = malloc(nw * sizeof *kk), *vv = malloc(nw * sizeof *vv);
    float *f = malloc(big * sizeof *f);
    float *scratch = malloc((size_t)e.threads * per * sizeof *scratch);
    float *pos = resize_pos ? malloc(nw * sizeof *pos) : NULL;
    float *g = qwen ? malloc((size_t)N * (size_t)F * sizeof *g) : NULL; /* the MLP's up rows */
    int32_t *perm = qwen ? malloc((size_t)(N / 4) * sizeof *perm) : NULL;
    int rc = WLM_ERR_NOMEM;
    if (!x || !h || !q || !kk || !vv || !f || !scratch || (resize_pos && !pos) ||
        (qwen && (!g || !perm)))
        goto done;
    if (resize_pos) wlm_resize_positions(v->pos, G0, W, pos, GW, GH);
    if (qwen) {
        rc = qwen_tower(&e, pixels, pw, ph, x, h, q, kk, vv, f, g, scratch, per, perm);
        if (rc) goto done;
        goto project;
    }

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
        att_job a = {&e, h, q, kk, vv, scratch, per, N, NULL};
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

project:;
    /* the projector: merge the GW×GH grid into gx×gy tokens, then project */
    const int32_t gx = GW / s, gy = GH / s, T = gx * gy;
    if (qwen) { /* the tower's order already holds each 2×2 group's patches together */
        memcpy(x, h, nw * sizeof *x);
    } else if (v->row->merge == WLM_MERGE_AVG_POOL) {
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
    if (!qwen) {
        if ((rc = matmul(&e, out, &v->proj2, f, T))) goto done;
        per_token(&e, OP_BIAS, out, NULL, NULL, v->proj2_b, v->proj_dim, T);
    } else { /* the groups back from the windows' order to raster order */
        float *o = malloc((size_t)T * (size_t)v->proj_dim * sizeof *o);
        rc = o ? matmul(&e, o, &v->proj2, f, T) : WLM_ERR_NOMEM;
        if (!rc) {
            per_token(&e, OP_BIAS, o, NULL, NULL, v->proj2_b, v->proj_dim, T);
            for (int32_t i = 0; i < T; i++)
                memcpy(out + (size_t)perm[i] * v->proj_dim, o + (size_t)i * v->proj_dim,
                       (size_t)v->proj_dim * sizeof *out);
        }
        free(o);
    }
done:
    if (rc == WLM_ERR_NOMEM)
        wlm_errorf(v->errmsg, sizeof v->errmsg, rc, "image: out of memory in the vision encoder");
    else if (rc)
        wlm_errorf(v->errmsg, sizeof v->errmsg, rc, "image: a weight type the encoder cannot use");
    free(x), free(h), free(q), free(kk), free(vv), free(f), free(scratch), free(pos), free(e.xq);
    free(e.wide);
    free(g), free(perm);
    return rc;
}
