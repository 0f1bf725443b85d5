/*
 * forward.c — a batch of tokens through the transformer described by the model's architecture
 * row (arch.c), one entry per row: embedding (+ learned position, × scale) → for every layer:
 * norm → Q/K/V projections (+ biases, fused or not) → per-head Q/K norms → RoPE (interleaved
 * pairs or NEOX halves, one frequency set per kind of layer) → grouped-query attention over the
 * paged KV cache (F32 or F16 elements; a sliding window on window layers) → output projection
 * (+ bias) → optional post-norm → residual → norm → feed-forward (SwiGLU, GeGLU, or a GELU MLP
 * with biases; or a mixture of experts, moe.c, alone or beside the dense one as Gemma 4's) →
 * optional post-norm → residual; then the final norm, the classifier and the
 * optional logit soft-cap for the entries that want logits. llama2.c's forward() is the special
 * case "llama". Encoders (BERT, nomic-bert; arch.c's `encoder`) take token type 0 and a
 * LayerNorm after the embedding, no norm before each branch but one after each residual add,
 * and give their hidden states (c->hidden) to embed.c instead of logits; a non-causal pass
 * (c->ent_len) lets every entry attend to its whole sequence. Entries may belong to different
 * sequences at different positions. The
 * projections are matrix-matrix products that read each weight tile once for the whole batch;
 * every entry's arithmetic is exactly the one-token computation, so batching never changes a
 * result. With a thread pool, each matrix product is split by rows, attention by heads (a
 * prefill's entries in one job), and the per-entry work between the products (activation
 * quantization, Q/K norms, RoPE, KV rows, the feed-forward's activation) by entries; every row,
 * head and entry is computed as on one thread, so threads never change a result either. All
 * arithmetic goes through the context's kernel table (scalar or SIMD).
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
    /* panel kernels up to their group of entries: the whole range in one call (their panel
     * stays in L1 whatever the range; each call prepares the entries' sums and scales again) */
    const int group = j->qmm ? wlm_quant_matmat_group(t->type) : 0;
    const int R = group && j->n <= group ? r1 - r0 : tile_rows(t->row_bytes, r1 - r0);
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
/* Per-entry work below this many elements (in all entries together) stays on it too. */
#define PARALLEL_MIN_ELEMS (1u << 14)

/* Work done entry by entry between the products (the activations quantized, the feed-forward's
 * activation function, Q/K norms, RoPE and the KV cache's rows): fn(arg, b0, b1) for entries
 * [b0, b1). In a prefill it is a few per cent of the work on one thread, and on many threads it
 * would be what bounds the speed-up (Amdahl), so a batch of at least PARALLEL_MIN_ELEMS elements
 * (`elems`) is split over the pool in contiguous ranges of entries. Each entry is computed
 * exactly as alone, so threads change no result. */
typedef void (*entries_fn)(const void *arg, int32_t b0, int32_t b1);
typedef struct entries_job {
    entries_fn fn;
    const void *arg;
    int32_t n;
} entries_job;

static void entries_chunk(void *arg, int32_t i, int32_t n) {
    const entries_job *j = arg;
    const int32_t b0 = (int32_t)((int64_t)j->n * i / n);
    const int32_t b1 = (int32_t)((int64_t)j->n * (i + 1) / n);
    if (b1 > b0) j->fn(j->arg, b0, b1);
}

static void for_entries(wlm_context *c, int32_t n, uint64_t elems, entries_fn fn, const void *arg) {
    const int32_t threads = wlm_threadpool_size(c->pool);
    if (threads > 1 && n > 1 && elems >= PARALLEL_MIN_ELEMS) {
        entries_job j = {fn, arg, n};
        wlm_pool_run(c->pool, entries_chunk, &j, threads < n ? threads : n);
    } else {
        fn(arg, 0, n);
    }
}

/* The activations of entries [b0, b1) quantized to a product's vec_dot_type. */
typedef struct quantize_job {
    const wlm_type_traits *vt;
    const float *x;
    size_t x_stride; /* floats */
    char *xq;
    size_t xq_stride; /* bytes */
    int32_t cols;
} quantize_job;

static void quantize_entries(const void *arg, int32_t b0, int32_t b1) {
    const quantize_job *j = arg;
    for (int32_t b = b0; b < b1; b++)
        j->vt->from_float(j->x + (size_t)b * j->x_stride, j->xq + (size_t)b * j->xq_stride, j->cols);
}

/* The quantized kernels of a product with j->t (not F32): matrix-vector and, where there is
 * one, matrix-matrix; every choice gives the same bits. */
static void matmul_kernels(const wlm_context *c, matmul_job *j) {
    const int32_t type = j->t->type;
    const wlm_type_traits *tr = wlm_type_get(type);
    j->qmv = c->use_simd ? tr->matvec_simd : tr->matvec_ref;
    j->qmm = c->use_simd ? wlm_quant_matmat_simd(type) : NULL;
    if (c->dot_split) { /* the same bits: types without split kernels keep matvec_simd */
        const wlm_qmatvec_fn mv = wlm_quant_matvec_split(type);
        if (mv) j->qmv = mv;
    }
    if (c->use_simd && !c->read_ahead) { /* the same bits, no rows touched ahead */
        const wlm_qmatvec_fn mv = c->dot_split ? wlm_quant_matvec_split_near(type)
                                               : wlm_quant_matvec_near(type);
        if (mv) j->qmv = mv;
    }
    if (c->dot_split_batch && wlm_quant_matvec_split(type))
        j->qmm = wlm_quant_matmat_split(type); /* (its leftover entries: split matvec) */
}

/* wlm_matmul, where `same_input` says that x is the input of the previous product of this pass,
 * unchanged (Q, K and V; the gate and up projections): if that product left x quantized to the
 * vec_dot_type this one needs, c->xq is used as it is rather than quantized again. */
void wlm_matmul_ex(wlm_context *c, float *out, size_t out_stride, const wlm_tensor *t,
                   const float *x, size_t x_stride, int32_t n, int same_input) {
    if (!same_input) c->xq_type = WLM_TYPE_F32;
    matmul_job j = {c, out, out_stride, t, x, x_stride, n, NULL, NULL};
    if (t->type != WLM_TYPE_F32) {
        const wlm_type_traits *tr = wlm_type_get(t->type);
        matmul_kernels(c, &j);
        j.x_stride = x_stride * sizeof(float);
        if (tr->vec_dot_type != WLM_TYPE_F32) { /* quantize each entry's activations once */
            if (c->xq_type != tr->vec_dot_type) {
                const quantize_job q = {wlm_type_get(tr->vec_dot_type), x, x_stride,
                                        (char *)c->xq, c->xq_stride, t->cols};
                for_entries(c, n, (uint64_t)n * (uint64_t)t->cols, quantize_entries, &q);
                c->xq_type = tr->vec_dot_type;
            }
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

void wlm_matmul(wlm_context *c, float *out, size_t out_stride, const wlm_tensor *t,
                const float *x, size_t x_stride, int32_t n) {
    wlm_matmul_ex(c, out, out_stride, t, x, x_stride, n, 0);
}

/* wlm_matmul_segs: the products as one list of rows, segment after segment; chunk i of n takes
 * an even-aligned 1/n of them (every segment has an even row count, so each piece of a segment
 * starts on an even row, as matmul_rows needs). */
#define SEG_GROUP 64
typedef struct segs_job {
    matmul_job j[SEG_GROUP];
    int64_t first[SEG_GROUP + 1]; /* each segment's first row in the list */
    int32_t n;
} segs_job;

static void segs_chunk(void *arg, int32_t i, int32_t n) {
    const segs_job *s = arg;
    const int64_t rows = s->first[s->n];
    const int64_t r0 = (rows * i / n) & ~(int64_t)1;
    const int64_t r1 = i + 1 == n ? rows : (rows * (i + 1) / n) & ~(int64_t)1;
    for (int32_t k = 0; k < s->n; k++) {
        const int64_t a = r0 > s->first[k] ? r0 : s->first[k];
        const int64_t b = r1 < s->first[k + 1] ? r1 : s->first[k + 1];
        if (b > a) matmul_rows(&s->j[k], (int)(a - s->first[k]), (int)(b - s->first[k]));
    }
}

void wlm_matmul_segs(wlm_context *c, const wlm_matmul_seg *seg, int32_t n_seg, void *xq,
                     size_t xq_stride) {
    segs_job s;
    /* the rows of xq last quantized: their input, type and count (n 0: none yet) */
    const float *qx = NULL;
    int32_t qvt = WLM_TYPE_F32, qn = 0;
    size_t xq_row = 0;
    const int32_t threads = wlm_threadpool_size(c->pool);
    c->xq_type = WLM_TYPE_F32; /* the next wlm_matmul_ex quantizes its input again */
    for (int32_t g = 0; g < n_seg; g += SEG_GROUP) {
        s.n = n_seg - g < SEG_GROUP ? n_seg - g : SEG_GROUP;
        s.first[0] = 0;
        uint64_t macs = 0;
        for (int32_t k = 0; k < s.n; k++) {
            const wlm_matmul_seg *q = &seg[g + k];
            matmul_job *j = &s.j[k];
            *j = (matmul_job){c, q->out, q->out_stride, &q->t, q->x, q->x_stride, q->n, NULL, NULL};
            s.first[k + 1] = s.first[k] + q->t.rows;
            macs += (uint64_t)q->t.rows * (uint64_t)q->t.cols * (uint64_t)q->n;
            if (q->t.type == WLM_TYPE_F32) continue;
            matmul_kernels(c, j);
            j->x_stride = q->x_stride * sizeof(float);
            const int32_t vt = wlm_type_get(q->t.type)->vec_dot_type;
            if (vt == WLM_TYPE_F32) continue;
            if (!(qn && qx == q->x && qvt == vt)) { /* quantized into the next free rows */
                xq_row += (size_t)qn;
                const quantize_job qj = {wlm_type_get(vt), q->x, q->x_stride,
                                         (char *)xq + xq_row * xq_stride, xq_stride, q->t.cols};
                for_entries(c, q->n, (uint64_t)q->n * (uint64_t)q->t.cols, quantize_entries, &qj);
                qx = q->x;
                qvt = vt;
                qn = q->n;
            }
            j->x = (const char *)xq + xq_row * xq_stride;
            j->x_stride = xq_stride;
        }
        if (threads > 1 && macs >= PARALLEL_MIN_MACS && s.first[s.n] >= 2 * threads)
            wlm_pool_run(c->pool, segs_chunk, &s, threads);
        else
            segs_chunk(&s, 0, 1);
    }
}

/* Positions entry b attends to outside a window: its sequence's 0..pos (entries of the same
 * sequence earlier in the batch are in the cache already: causal within the batch), or with
 * ent_len (a non-causal pass holding whole sequences) all of them. */
static int entry_len(const wlm_context *c, int32_t b) {
    return c->ent_len ? c->ent_len[b] : c->ent_pos[b] + 1;
}

/* The attention of n entries of one sequence over one layer's KV cache (c->kb / c->vb set,
 * `block` positions each), as the pool's chunks see it: entry e0 + b reads its query at q + b *
 * q_stride and writes out + b * out_stride, over `len` positions, or entry_len's when len is 0. */
typedef struct attention_job {
    wlm_context *c;
    const wlm_layer_weights *lw;  /* the layer: its head size, KV heads and cache rows */
    float *out;                   /* (n, n_heads * head_size) */
    size_t out_stride;
    const float *q;               /* (n, n_heads * head_size) */
    size_t q_stride;
    int32_t e0, n;
    int len;
    int max_len;                  /* the longest entry's: lays out the scratch */
    int block;                    /* positions per pointer of c->kb / c->vb */
    const float *sinks;           /* (n_heads) attention sink logits, or NULL */
} attention_job;

/* Attention sinks (gpt-oss): head h's softmax has one more logit, sinks[h], in its normaliser
 * and no value, so its output is the plain attention's times Z / (Z + e^sink) = 1 / (1 +
 * e^(sink - lse)), lse = log Σ_t e^(s_t) over the head's scores. The kernel leaves each head's
 * softmax weights p_t = e^(s_t - lse) in its scratch (kernels.h), so lse = s_t - log p_t at
 * the heaviest position t, whose score is computed again here (one dot product a head). Every
 * head of every entry alone, so batches and threads keep their bits. */
static void apply_sinks(const wlm_context *c, const attention_job *j, float *out, const float *q,
                        int len, int h0, int h1, const float *scratch) {
    const wlm_hparams *p = &c->model->hp;
    const int hs = p->head_size, kv_mul = p->n_heads / p->n_kv_heads;
    const float scale = sqrtf((float)hs); /* as the kernels divide by it */
    for (int h = h0; h < h1; h++) {
        const float *pr = scratch + (size_t)(h - h0) * (size_t)len;
        int t = 0;
        for (int u = 1; u < len; u++) t = pr[u] > pr[t] ? u : t;
        const size_t row = (size_t)(t % j->block) * (size_t)p->kv_dim + (size_t)(h / kv_mul) * hs;
        const float *qh = q + (size_t)h * hs;
        float s = 0.0f;
        if (c->kv.type == WLM_KV_F16) {
            const uint16_t *k = (const uint16_t *)c->kb[t / j->block] + row;
            for (int i = 0; i < hs; i++) s += qh[i] * wlm_fp16_to_fp32(k[i]);
        } else {
            const float *k = (const float *)c->kb[t / j->block] + row;
            for (int i = 0; i < hs; i++) s += qh[i] * k[i];
        }
        const float lse = s / scale - logf(pr[t]);
        const float f = 1.0f / (1.0f + expf(j->sinks[h] - lse));
        float *oh = out + (size_t)h * hs;
        for (int i = 0; i < hs; i++) oh[i] *= f;
    }
}

/* Chunk i of n: heads [n_heads * i / n, n_heads * (i + 1) / n) of every entry, in entry order,
 * with its own part of the scratch (laid out for max_len, so no two chunks share a float). */
static void attention_chunk(void *arg, int32_t i, int32_t n) {
    const attention_job *j = arg;
    const wlm_context *c = j->c;
    const wlm_hparams *p = &c->model->hp;
    const wlm_layer_weights *lw = j->lw;
    const int hs = lw->head_size;
    const int h0 = (int)((int64_t)p->n_heads * i / n), h1 = (int)((int64_t)p->n_heads * (i + 1) / n);
    float *scratch = c->att + wlm_attention_scratch(h0, j->max_len, hs);
    for (int32_t b = 0; b < j->n; b++) {
        const int len = j->len ? j->len : entry_len(c, j->e0 + b);
        float *out = j->out + (size_t)b * j->out_stride;
        const float *q = j->q + (size_t)b * j->q_stride;
        if (c->kv.type == WLM_KV_F16)
            c->k->attention_f16(out, q, (const uint16_t *const *)c->kb,
                                (const uint16_t *const *)c->vb, j->block, len, h0, h1,
                                p->n_heads / lw->n_kv_heads, hs, lw->kv_dim, scratch);
        else
            c->k->attention(out, q, (const float *const *)c->kb, (const float *const *)c->vb,
                            j->block, len, h0, h1, p->n_heads / lw->n_kv_heads, hs, lw->kv_dim,
                            scratch);
        if (j->sinks) apply_sinks(c, j, out, q, len, h0, h1, scratch);
    }
}

/* Every head of the job's entries, split over the pool's threads by heads when there is enough
 * work (`positions`: the entries' lengths added up): each head of each entry is computed exactly
 * as alone. One job for a whole prefill rather than one per entry: each job costs the pool a
 * wake-up and a join, which on many threads outweighed a short entry's work. */
static void attention_run(wlm_context *c, const attention_job *j, uint64_t positions) {
    const wlm_hparams *p = &c->model->hp;
    const int32_t threads = wlm_threadpool_size(c->pool);
    /* one chunk per thread, or per head when there are fewer heads than threads (12 heads on
     * 16 threads: 12 chunks, 4 threads idle, rather than all heads on one thread) */
    const int32_t chunks = threads < p->n_heads ? threads : p->n_heads;
    const uint64_t macs = 2 * (uint64_t)p->n_heads * (uint64_t)j->lw->head_size * positions;
    if (chunks > 1 && macs >= PARALLEL_MIN_MACS)
        wlm_pool_run(c->pool, attention_chunk, (void *)j, chunks);
    else
        attention_chunk((void *)j, 0, 1);
}

/* ---- RoPE ------------------------------------------------------------------------------------ */

/* Frequencies of RoPE set s (0: every layer, or the global layers; 1: sliding-window layers):
 * theta_i = base^(-2i / n_rot) (the float expression of run.c, where n_rot = head_size),
 * divided by frequency factor i (rope_freqs.weight, or LongRoPE's long factors when the context
 * is longer than rope.scaling.original_context_length and its short ones otherwise, as
 * llama.cpp's get_rope_factors) and multiplied by the linear scaling's 1/factor: angle = pos *
 * theta_i, as ggml_rope_ext with freq_factors and freq_scale; with YaRN (hp.rope_yarn) the
 * scaled and unscaled frequencies blended by ggml's ramp. Window layers use their own base,
 * unscaled and without factors (llama.cpp's rope_freq_base_train_swa), unless the architecture
 * turns them as the others (swa_rope_same: gpt-oss). */
/* Multi-section RoPE: pair i belongs to sector s = i mod (sum of the four widths). IMROPE
 * (ggml's, Qwen3.5): it turns by the time, height or width position when s % 3 is 0, 1 or 2 and
 * s is below three times that section's width, else by the fourth position. MROPE (Qwen2-VL):
 * sectors [0, w0) by time, the next w1 by height, the next w2 by width, the rest by the fourth.
 * For text the first three are the token's position and the fourth is 0: such a pair does not
 * turn (1 here). */
static int rope_section_still(const wlm_hparams *p, int i) {
    const int32_t *sec = p->rope_sections;
    const int32_t sum = sec[0] + sec[1] + sec[2] + sec[3];
    if (p->arch->rope_sections == WLM_SECTIONS_NONE || sum <= 0) return 0;
    const int32_t s = i % sum;
    if (p->arch->rope_sections == WLM_SECTIONS_MROPE) return s >= sec[0] + sec[1] + sec[2];
    return !((s % 3 == 0 && s < 3 * sec[0]) || (s % 3 == 1 && s < 3 * sec[1]) ||
             (s % 3 == 2 && s < 3 * sec[2]));
}

/* The rotated width of RoPE set s: the sliding layers' own (Gemma 4) for set 1, else n_rot. */
static int rope_set_n_rot(const wlm_hparams *p, int32_t s) {
    return s == 1 && p->n_rot_swa ? p->n_rot_swa : p->n_rot;
}

void wlm_rope_init(wlm_context *c) {
    const wlm_model *m = c->model;
    const wlm_hparams *p = &m->hp;
    const float *ff = m->w.rope_freqs;
    if (m->w.rope_long) ff = c->n_ctx > p->n_ctx_orig ? m->w.rope_long : m->w.rope_short;
    for (int32_t s = 0; s < c->n_rope_sets; s++) {
        const float base = s == 0 ? p->rope_theta : p->rope_theta_swa;
        const int n_rot = rope_set_n_rot(p, s), half = n_rot / 2;
        const int scaled = s == 0 || p->arch->swa_rope_same;
        /* YaRN's correction dims (ggml_rope_yarn_corr_dims): pairs below lo keep the unscaled
         * frequency, above hi the scaled one, a linear ramp between */
        float lo = 0.0f, hi = 0.0f;
        if (p->rope_yarn) {
            const float n = (float)n_rot, two_log_base = 2.0f * logf(base);
            const float orig = (float)p->n_ctx_orig, two_pi = 6.28318530717958647692f;
            lo = floorf(n * logf(orig / (p->yarn_beta_fast * two_pi)) / two_log_base);
            hi = ceilf(n * logf(orig / (p->yarn_beta_slow * two_pi)) / two_log_base);
            if (lo < 0.0f) lo = 0.0f;
            if (hi > n - 1.0f) hi = n - 1.0f;
        }
        for (int i = 0; i < half; i++) {
            float theta = 1.0f / powf(base, (float)(2 * i) / (float)n_rot);
            if (rope_section_still(p, i)) theta = 0.0f;
            if (scaled) {
                if (ff) theta /= ff[i];
                if (p->rope_yarn) { /* ramp 1: unscaled (extrapolated), 0: scaled */
                    const float y = ((float)i - lo) / fmaxf(0.001f, hi - lo);
                    const float ramp = 1.0f - fminf(1.0f, fmaxf(0.0f, y));
                    theta = theta * p->rope_freq_scale * (1.0f - ramp) + theta * ramp;
                } else if (p->rope_freq_scale != 1.0f) {
                    theta *= p->rope_freq_scale;
                }
            }
            c->rope_freq[(size_t)s * (size_t)c->rope_half + i] = theta;
        }
    }
    c->rope_mscale = p->rope_attn_factor;
    if (p->rope_yarn) c->rope_mscale *= 1.0f + 0.1f * logf(1.0f / p->rope_freq_scale);
}

/* The cos/sin of `pos` for every RoPE set, into entry slot b of c->rope_cos / rope_sin. With
 * rpos (M-RoPE: the entry's temporal, height and width positions) pair i turns by the position
 * of its section (rope_section_still's sectors: t, h, w, then the fourth, whose pairs have
 * frequency 0), as ggml's rope_multi with GGML_ROPE_TYPE_MROPE. */
static void rope_angles(wlm_context *c, int32_t b, float pos, float mscale, const int32_t *rpos) {
    const size_t stride = (size_t)c->rope_half;
    const int32_t *sec = c->model->hp.rope_sections;
    const int32_t s01 = sec[0] + sec[1], s012 = s01 + sec[2], sum = s012 + sec[3];
    for (int32_t s = 0; s < c->n_rope_sets; s++) {
        const int half = rope_set_n_rot(&c->model->hp, s) / 2;
        const float *fr = c->rope_freq + (size_t)s * stride;
        float *cs = c->rope_cos + ((size_t)s * (size_t)c->batch_cap + b) * stride;
        float *sn = c->rope_sin + ((size_t)s * (size_t)c->batch_cap + b) * stride;
        for (int i = 0; i < half; i++) {
            float at = pos;
            if (rpos && sum > 0) {
                const int32_t k = i % sum;
                at = (float)(k < sec[0] ? rpos[0] : k < s01 ? rpos[1] : k < s012 ? rpos[2] : 0);
            }
            float val = at * fr[i];
            cs[i] = cosf(val);
            sn[i] = sinf(val);
            if (mscale != 1.0f) {
                cs[i] *= mscale;
                sn[i] *= mscale;
            }
        }
    }
}

/* Rotates n_heads heads of x (layer lw's head size and rotated width) by entry slot b's angles
 * of RoPE set s, in the model's style. */
static void rope_apply(wlm_context *c, const wlm_layer_weights *lw, float *x, int n_heads,
                       int32_t b, int32_t s) {
    const wlm_hparams *p = &c->model->hp;
    const size_t stride = (size_t)c->rope_half;
    const float *cs = c->rope_cos + ((size_t)s * (size_t)c->batch_cap + b) * stride;
    const float *sn = c->rope_sin + ((size_t)s * (size_t)c->batch_cap + b) * stride;
    if (p->arch->rope == WLM_ROPE_NEOX) c->k->rope_neox(x, n_heads, lw->head_size, lw->n_rot, cs, sn);
    else if (p->arch->rope == WLM_ROPE_NORM) c->k->rope(x, n_heads, lw->head_size, lw->n_rot, cs, sn);
}

int wlm_shift_supported(const wlm_model *m, char *err) {
    const wlm_hparams *p = &m->hp;
    if (p->n_rec_layers > 0)
        return wlm_set_error(err, WLM_ERR_UNSUPPORTED,
                             "context shift is not possible with %s: its recurrent layers keep a "
                             "state that summarises every token so far, which cannot drop the "
                             "discarded ones", p->arch->name);
    if (p->arch->pos_embd || p->arch->rope == WLM_ROPE_NONE)
        return wlm_set_error(err, WLM_ERR_UNSUPPORTED,
                             "context shift is not possible with %s: its positions are learned "
                             "embeddings, part of every cached K and V row", p->arch->name);
    if (p->n_swa > 0)
        return wlm_set_error(err, WLM_ERR_UNSUPPORTED,
                             "context shift is not supported with %s's sliding-window layers "
                             "(window %d): after a shift they would attend again to tokens that "
                             "had left their window", p->arch->name, (int)p->n_swa);
    return WLM_OK;
}

void wlm_rope_shift_prepare(wlm_context *c, int32_t n) {
    rope_angles(c, 0, -(float)n, 1.0f, NULL); /* K already carries the attention factor */
}

void wlm_rope_shift_k(wlm_context *c, int32_t layer, float *k) {
    const wlm_layer_weights *lw = &c->model->w.layers[layer];
    if (lw->no_rope) return; /* a NoPE layer's K holds no position */
    const int32_t s = c->n_rope_sets > 1 && lw->swa ? 1 : 0;
    rope_apply(c, lw, k, lw->n_kv_heads, 0, s);
}

/* ---- the pass -------------------------------------------------------------------------------- */

/* out = norm(x) for n entries of `dim` floats (rows os / xs floats apart): RMSNorm or
 * LayerNorm (with bias) as the architecture says. */
static void norm_rows(wlm_context *c, float *out, size_t os, const float *x, size_t xs,
                      const float *w, const float *bias, int32_t n) {
    const wlm_hparams *p = &c->model->hp;
    for (int32_t b = 0; b < n; b++) {
        if (p->arch->norm == WLM_NORM_LAYER)
            c->k->layernorm(out + b * os, x + b * xs, w, bias, p->dim, p->norm_eps);
        else
            c->k->rmsnorm(out + b * os, x + b * xs, w, p->dim, p->norm_eps);
    }
}

/* x[b] += bias, for n entries of len floats `stride` apart (bias NULL: nothing). */
static void add_bias(wlm_context *c, float *x, size_t stride, const float *bias, int len, int32_t n) {
    if (!bias) return;
    for (int32_t b = 0; b < n; b++) c->k->axpy(x + b * stride, 1.0f, bias, len);
}

/* Per-head Q/K norms, RoPE, the query scale and the two KV cache rows of entries [b0, b1) at
 * one layer (each entry its own rows: the blocks were reserved before the pass). */
typedef struct qk_job {
    wlm_context *c;
    const wlm_layer_weights *lw;
    int32_t layer, rset;
} qk_job;

static void qk_entries(const void *arg, int32_t b0, int32_t b1) {
    const qk_job *j = arg;
    wlm_context *c = j->c;
    const wlm_hparams *p = &c->model->hp;
    const wlm_layer_weights *lw = j->lw;
    const size_t Q = (size_t)p->q_dim, KV = (size_t)p->kv_dim; /* strides of q, kt, vt */
    const int hs = lw->head_size;
    for (int32_t b = b0; b < b1; b++) {
        float *qb = c->q + b * Q, *kb = c->kt + b * KV, *vb = c->vt + b * KV;
        if (lw->q_norm) /* RMSNorm of every head of Q (Qwen3, Gemma 3) */
            for (int h = 0; h < p->n_heads; h++)
                c->k->rmsnorm(qb + (size_t)h * hs, qb + (size_t)h * hs, lw->q_norm, hs, p->norm_eps);
        if (p->arch->rope != WLM_ROPE_NONE && !lw->no_rope)
            rope_apply(c, lw, qb, p->n_heads, b, j->rset);
        if (lw->q_scale != 1.0f)
            for (int i = 0; i < lw->q_dim; i++) qb[i] *= lw->q_scale;
        if (!lw->kv_own) continue; /* shared KV: the source layer wrote the rows */
        if (lw->k_norm) /* and of K */
            for (int h = 0; h < lw->n_kv_heads; h++)
                c->k->rmsnorm(kb + (size_t)h * hs, kb + (size_t)h * hs, lw->k_norm, hs, p->norm_eps);
        if (lw->v_norm) /* Gemma 4: RMSNorm of every V head, no gain */
            for (int h = 0; h < lw->n_kv_heads; h++)
                c->k->rmsnorm(vb + (size_t)h * hs, vb + (size_t)h * hs, lw->v_norm, hs, p->norm_eps);
        if (p->arch->rope != WLM_ROPE_NONE && !lw->no_rope)
            rope_apply(c, lw, kb, lw->n_kv_heads, b, j->rset);
        unsigned char *row = wlm_kv_row(c, c->ent_seq[b], j->layer, c->ent_pos[b]);
        wlm_kv_store(c, row, kb, lw->kv_dim);
        wlm_kv_store(c, row + WLM_KV_BLOCK * (size_t)lw->kv_dim * c->kv.elem_bytes, vb, lw->kv_dim);
    }
}

/* The feed-forward's activation of entries [b0, b1): act(g) * u in place of g (u NULL: act(g)),
 * g and u at g + b * stride and u + b * stride. */
typedef struct ffn_act_job {
    const wlm_kernels *k;
    float *g;
    const float *u;
    size_t stride;
    int hidden;
    int gelu;
} ffn_act_job;

static void ffn_act_entries(const void *arg, int32_t b0, int32_t b1) {
    const ffn_act_job *j = arg;
    for (int32_t b = b0; b < b1; b++) {
        float *g = j->g + (size_t)b * j->stride;
        const float *u = j->u ? j->u + (size_t)b * j->stride : NULL;
        if (j->gelu) j->k->gelu(g, u, j->hidden);
        else j->k->swiglu(g, u, j->hidden);
    }
}

/* c->kb / c->vb: the K and V rows of sequence s's blocks at one layer (layer_off bytes into
 * each block) that cover positions 0..len-1, one pointer per block of WLM_KV_BLOCK positions. */
static void layer_blocks(wlm_context *c, const wlm_seq *s, int len, size_t layer_off,
                         int32_t kv_dim) {
    const size_t v_off = WLM_KV_BLOCK * (size_t)kv_dim * c->kv.elem_bytes;
    const int nb = (len + WLM_KV_BLOCK - 1) / WLM_KV_BLOCK;
    for (int i = 0; i < nb; i++) {
        c->kb[i] = c->kv.base[s->blocks[i]] + layer_off;
        c->vb[i] = (const unsigned char *)c->kb[i] + v_off;
    }
}

/* An attention layer's mixer for the batch's n entries: Q/K/V from the normed input c->xb (+
 * biases; a gated attention's query and gate rows), per-head norms, RoPE and the KV rows
 * (qk_entries), attention over each entry's sequence (a window on window layers), the optional
 * output gate, the output projection (+ bias, + post-norm) into c->xb2. */
static void attention_mix(wlm_context *c, const wlm_layer_weights *lw, int l, int32_t n) {
    const wlm_hparams *p = &c->model->hp;
    const wlm_arch *a = p->arch;
    const int dim = p->dim, kv_dim = lw->kv_dim, q_dim = lw->q_dim; /* this layer's widths */
    const size_t D = (size_t)dim, Q = (size_t)p->q_dim, KV = (size_t)p->kv_dim; /* strides */
    const size_t XS = Q > D ? Q : D; /* stride of xb */
    const size_t QKV = Q + 2 * KV;
    const size_t elem = c->kv.elem_bytes;
    const size_t layer_off = lw->kv_off * elem;
    const size_t LKV = (size_t)kv_dim; /* the cache's row length at this layer */
    const int32_t rset = c->n_rope_sets > 1 && lw->swa ? 1 : 0;
    if (a->attn_gate) { /* each head's query rows, then its gate rows */
        wlm_matmul_ex(c, c->qg, 2 * Q, &lw->wq, c->xb, XS, n, 0);
        const size_t hs = (size_t)p->head_size;
        for (int32_t b = 0; b < n; b++)
            for (int h = 0; h < p->n_heads; h++) {
                const float *r = c->qg + b * 2 * Q + 2 * hs * (size_t)h;
                memcpy(c->q + b * Q + hs * (size_t)h, r, hs * sizeof(float));
                memcpy(c->gate + b * Q + hs * (size_t)h, r + hs, hs * sizeof(float));
            }
        wlm_matmul_ex(c, c->kt, KV, &lw->wk, c->xb, XS, n, 1);
        wlm_matmul_ex(c, c->vt, KV, &lw->wv, c->xb, XS, n, 1);
    } else if (lw->wqkv.data) {
        wlm_matmul(c, c->qkv, QKV, &lw->wqkv, c->xb, XS, n);
        for (int32_t b = 0; b < n; b++) {
            const float *r = c->qkv + b * QKV;
            memcpy(c->q + b * Q, r, Q * sizeof(float));
            memcpy(c->kt + b * KV, r + Q, KV * sizeof(float));
            memcpy(c->vt + b * KV, r + Q + KV, KV * sizeof(float));
        }
    } else {
        wlm_matmul_ex(c, c->q, Q, &lw->wq, c->xb, XS, n, 0);
        if (lw->kv_own) wlm_matmul_ex(c, c->kt, KV, &lw->wk, c->xb, XS, n, 1);
        if (lw->v_is_k) /* Gemma 4 without attn_v: V is K's projection, before K's norm */
            for (int32_t b = 0; b < n; b++)
                memcpy(c->vt + b * KV, c->kt + b * KV, LKV * sizeof(float));
        else if (lw->kv_own) wlm_matmul_ex(c, c->vt, KV, &lw->wv, c->xb, XS, n, 1);
    }
    add_bias(c, c->q, Q, lw->bq, q_dim, n);
    add_bias(c, c->kt, KV, lw->bk, kv_dim, n);
    add_bias(c, c->vt, KV, lw->bv, kv_dim, n);
    const qk_job qk = {c, lw, l, rset};
    for_entries(c, n, (uint64_t)n * (Q + 2 * KV), qk_entries, &qk);
    /* every entry attends to its own sequence's positions (entry_len); a window layer to
     * the last n_swa, or around it in a non-causal pass. Entries of one sequence outside a
     * window (a prefill) share the block pointers: one job for all of them. */
    const int windowed = lw->swa && p->n_swa > 0;
    int32_t one_seq = !windowed;
    for (int32_t b = 1; b < n && one_seq; b++) one_seq = c->ent_seq[b] == c->ent_seq[0];
    if (one_seq) {
        const wlm_seq *s = &c->seqs[c->ent_seq[0]];
        int max_len = 0;
        uint64_t positions = 0;
        for (int32_t b = 0; b < n; b++) {
            const int len = entry_len(c, b);
            if (len > max_len) max_len = len;
            positions += (uint64_t)len;
        }
        layer_blocks(c, s, max_len, layer_off, kv_dim);
        const attention_job j = {c, lw, c->xb, XS, c->q, Q, 0, n, 0, max_len, WLM_KV_BLOCK,
                                 lw->attn_sinks};
        attention_run(c, &j, positions);
    }
    for (int32_t b = 0; b < n && !one_seq; b++) {
        const wlm_seq *s = &c->seqs[c->ent_seq[b]];
        int len = entry_len(c, b);
        int start = windowed && len > p->n_swa ? len - p->n_swa : 0;
        if (c->ent_len && windowed && c->image_batch) { /* back n_swa, forward to ent_len */
            const int lo = c->ent_pos[b] + 1 - p->n_swa;
            start = lo > 0 ? lo : 0;
        } else if (c->ent_len && windowed) { /* symmetric: pos ± n_swa / 2 */
            const int half = p->n_swa / 2, pos = c->ent_pos[b];
            start = pos > half ? pos - half : 0;
            if (len > pos + half + 1) len = pos + half + 1;
        }
        int block = WLM_KV_BLOCK;
        if (start == 0) {
            layer_blocks(c, s, len, layer_off, kv_dim);
        } else { /* one pointer per position of the window (blocks of one position) */
            for (int t = start; t < len; t++) {
                const unsigned char *r = c->kv.base[s->blocks[t / WLM_KV_BLOCK]] + layer_off +
                                         (size_t)(t % WLM_KV_BLOCK) * LKV * elem;
                c->kb[t - start] = r;
                c->vb[t - start] = r + WLM_KV_BLOCK * LKV * elem;
            }
            block = 1;
            len -= start;
        }
        const attention_job j = {c, lw, c->xb + b * XS, XS, c->q + b * Q, Q, b, 1, len, len, block,
                                 lw->attn_sinks};
        attention_run(c, &j, (uint64_t)len);
    }
    if (a->attn_gate) /* o ⊙ sigmoid(gate), per head */
        for (int32_t b = 0; b < n; b++) {
            float *o = c->xb + b * XS;
            const float *gt = c->gate + b * Q;
            for (int i = 0; i < q_dim; i++) o[i] *= 1.0f / (1.0f + expf(-gt[i]));
        }
    wlm_matmul(c, c->xb2, D, &lw->wo, c->xb, XS, n);
    add_bias(c, c->xb2, D, lw->bo, dim, n);
    if (lw->post_att_norm) norm_rows(c, c->xb2, D, c->xb2, D, lw->post_att_norm, NULL, n);
}

/* Gemma 4's per-layer inputs of n entries into c->ple (L rows of P per entry), as llama.cpp's
 * build_inp_per_layer and project_per_layer_inputs: A = per_layer_token_embd[token] · sqrt(P),
 * B = per_layer_model_proj · x · (1 / sqrt(dim)) with each of its L rows RMSNorm'ed by
 * per_layer_proj_norm, then (B + A) · (1 / sqrt(2)). x is the scaled embedding (c->x). */
static void ple_inputs(wlm_context *c, const int32_t *tokens, int32_t n) {
    const wlm_hparams *p = &c->model->hp;
    const wlm_weights *w = &c->model->w;
    const int P = p->n_ple;
    const size_t PL = (size_t)P * (size_t)p->n_layers, D = (size_t)p->dim;
    wlm_matmul(c, c->ple, PL, &w->ple_model_proj, c->x, D, n);
    const float proj_scale = 1.0f / sqrtf((float)p->dim), tok_scale = sqrtf((float)P);
    const float in_scale = 1.0f / sqrtf(2.0f);
    const wlm_type_traits *tr = wlm_type_get(w->ple_embd.type);
    float *A = c->ple_h; /* the token's whole table row (P·L floats) */
    for (int32_t b = 0; b < n; b++) {
        float *row = c->ple + (size_t)b * PL;
        tr->to_float((const char *)w->ple_embd.data + (size_t)tokens[b] * w->ple_embd.row_bytes, A,
                     (int)PL);
        for (int32_t l = 0; l < p->n_layers; l++) {
            float *bl = row + (size_t)l * (size_t)P;
            for (int i = 0; i < P; i++) bl[i] *= proj_scale;
            c->k->rmsnorm(bl, bl, w->ple_proj_norm, P, p->norm_eps);
        }
        for (size_t i = 0; i < PL; i++) row[i] = (row[i] + A[i] * tok_scale) * in_scale;
    }
}

/* Gemma 4's per-layer embedding at layer l, for n entries: x += RMSNorm(proj · (gelu(inp_gate
 * · x) ⊙ ple_l), post_norm), with ggml's GELU (wlm_gelu_fn). */
static void ple_layer(wlm_context *c, const wlm_layer_weights *lw, int32_t l, int32_t n) {
    const wlm_hparams *p = &c->model->hp;
    const int P = p->n_ple;
    const size_t PL = (size_t)P * (size_t)p->n_layers, D = (size_t)p->dim;
    wlm_matmul(c, c->ple_h, (size_t)P, &lw->ple_gate, c->x, D, n);
    for (int32_t b = 0; b < n; b++)
        c->k->gelu(c->ple_h + (size_t)b * P, c->ple + (size_t)b * PL + (size_t)l * P, P);
    wlm_matmul(c, c->xb, D, &lw->ple_proj, c->ple_h, (size_t)P, n);
    norm_rows(c, c->xb, D, c->xb, D, lw->ple_norm, NULL, n);
    for (size_t i = 0; i < (size_t)n * D; i++) c->x[i] += c->xb[i];
}

void wlm_forward_batch(wlm_context *c, const int32_t *tokens, int32_t n,
                       const int32_t *logit_rows) {
    c->n_passes++; /* a speculative rollback record is of the passes before this one */
    const wlm_hparams *p = &c->model->hp;
    const wlm_arch *a = p->arch;
    const wlm_weights *w = &c->model->w;
    const wlm_kernels *k = c->k;
    const int dim = p->dim;
    const size_t D = (size_t)dim, H = (size_t)p->hidden_dim, Q = (size_t)p->q_dim;
    const size_t XS = Q > D ? Q : D;                          /* stride of xb */
    const size_t HS = a->ffn == WLM_FFN_FUSED_GATE_UP ? 2 * H : H; /* stride of hb */
    float *x = c->x;

    const wlm_tensor *emb = &w->token_embedding, *pe = &w->pos_embedding;
    const wlm_type_traits *emb_tr = wlm_type_get(emb->type);
    for (int32_t b = 0; b < n; b++) {
        float *xr = x + (size_t)b * D;
        if (c->in_embd) /* rows given in place of tokens (an image: wlm_eval_embd) */
            memcpy(xr, c->in_embd + (size_t)b * D, D * sizeof(float));
        else
            emb_tr->to_float((const char *)emb->data + (size_t)tokens[b] * emb->row_bytes, xr, dim);
        if (w->type_embd.data) { /* BERT: + token type 0's row, then the position's (llama.cpp) */
            float *tmp = c->xb2 + (size_t)b * D;
            wlm_type_get(w->type_embd.type)->to_float(w->type_embd.data, tmp, dim);
            for (int i = 0; i < dim; i++) xr[i] += tmp[i];
        }
        if (pe->data) { /* GPT-2, BERT: + the learned embedding of the position */
            float *tmp = c->xb2 + (size_t)b * D;
            wlm_type_get(pe->type)->to_float((const char *)pe->data +
                                                 (size_t)c->ent_pos[b] * pe->row_bytes, tmp, dim);
            for (int i = 0; i < dim; i++) xr[i] += tmp[i];
        }
        if (p->embd_scale != 1.0f && !c->in_embd)
            for (int i = 0; i < dim; i++) xr[i] *= p->embd_scale;
        /* RoPE angles of this entry's position, shared by every layer and head of a set */
        if (a->rope != WLM_ROPE_NONE)
            rope_angles(c, b, (float)c->ent_pos[b], c->rope_mscale,
                        c->ent_rpos ? c->ent_rpos + 3 * (size_t)b : NULL);
    }
    if (w->embd_norm) norm_rows(c, x, D, x, D, w->embd_norm, w->embd_norm_b, n);
    if (p->n_ple) ple_inputs(c, tokens, n);

    for (int l = 0; l < p->n_layers; l++) {
        const wlm_layer_weights *lw = &w->layers[l];

        /* the mixer: projections for the whole batch (an encoder's input is not normed) */
        if (lw->rms_att) norm_rows(c, c->xb, XS, x, D, lw->rms_att, lw->att_norm_b, n);
        else
            for (int32_t b = 0; b < n; b++) memcpy(c->xb + b * XS, x + b * D, D * sizeof(float));
        if (lw->mixer == WLM_MIX_ATTN) attention_mix(c, lw, l, n);
        else wlm_recurrent_mix(c, lw, c->xb, XS, c->xb2, D, n); /* recurrent.c */
        for (size_t i = 0; i < (size_t)n * D; i++) x[i] += c->xb2[i];
        if (lw->attn_out_norm) /* encoders: LayerNorm of the stream after the residual add */
            norm_rows(c, x, D, x, D, lw->attn_out_norm, lw->attn_out_norm_b, n);

        /* feed-forward (of this layer's width) */
        const int hidden = lw->hidden;
        if (lw->rms_ffn) norm_rows(c, c->xb, D, x, D, lw->rms_ffn, lw->ffn_norm_b, n);
        else memcpy(c->xb, x, (size_t)n * D * sizeof(float));
        /* a MoE layer: the experts alone, or (moe_dense_branch) beside the dense feed-forward */
        const int experts_only = lw->ffn_kind == WLM_FFN_KIND_MOE && !lw->moe_post_norm_1;
        if (experts_only) { /* moe.c: the chosen experts, grouped */
            wlm_moe_ffn(c, lw, c->xb, x, c->xb, n);
        } else if (a->ffn == WLM_FFN_GATED) { /* w2(act(w1 x) * w3 x) */
            wlm_matmul_ex(c, c->hb, H, &lw->w1, c->xb, D, n, 0);
            wlm_matmul_ex(c, c->hb2, H, &lw->w3, c->xb, D, n, 1);
            const ffn_act_job act = {k, c->hb, c->hb2, H, hidden, a->act == WLM_ACT_GELU};
            for_entries(c, n, (uint64_t)n * H, ffn_act_entries, &act);
        } else if (a->ffn == WLM_FFN_FUSED_GATE_UP) { /* w3 rows: gate, then up */
            wlm_matmul(c, c->hb, HS, &lw->w3, c->xb, D, n);
            const ffn_act_job act = {k, c->hb, c->hb + H, HS, hidden, a->act == WLM_ACT_GELU};
            for_entries(c, n, (uint64_t)n * H, ffn_act_entries, &act);
        } else { /* w2(act(w3 x + b_up)) + b_down */
            wlm_matmul(c, c->hb, H, &lw->w3, c->xb, D, n);
            add_bias(c, c->hb, H, lw->b_up, hidden, n);
            const ffn_act_job act = {k, c->hb, NULL, H, hidden, 1};
            for_entries(c, n, (uint64_t)n * H, ffn_act_entries, &act);
        }
        if (!experts_only) {
            wlm_matmul(c, c->xb, D, &lw->w2, c->hb, HS, n);
            add_bias(c, c->xb, D, lw->b_down, dim, n);
        }
        if (lw->ffn_kind == WLM_FFN_KIND_MOE && !experts_only) {
            /* Gemma 4: RMSNorm(dense, post_ffw_norm_1) + RMSNorm(moe(RMSNorm(x,
             * pre_ffw_norm_2)), post_ffw_norm_2); c->xb2 is free after the mixer's add */
            norm_rows(c, c->xb, D, c->xb, D, lw->moe_post_norm_1, NULL, n);
            norm_rows(c, c->xb2, D, x, D, lw->moe_pre_norm, NULL, n);
            wlm_moe_ffn(c, lw, c->xb2, x, c->xb2, n);
            norm_rows(c, c->xb2, D, c->xb2, D, lw->moe_post_norm_2, NULL, n);
            for (size_t i = 0; i < (size_t)n * D; i++) c->xb[i] += c->xb2[i];
        }
        if (lw->post_ffn_norm) norm_rows(c, c->xb, D, c->xb, D, lw->post_ffn_norm, NULL, n);
        for (size_t i = 0; i < (size_t)n * D; i++) x[i] += c->xb[i];
        if (lw->layer_out_norm)
            norm_rows(c, x, D, x, D, lw->layer_out_norm, lw->layer_out_norm_b, n);
        if (lw->ple_gate.data) ple_layer(c, lw, l, n);
        if (lw->out_scale) /* Gemma 4: the whole stream scaled */
            for (size_t i = 0; i < (size_t)n * D; i++) x[i] *= lw->out_scale[0];
    }

    /* embeddings (embed.c): every entry's final hidden state, after the output norm if any */
    if (c->hidden) {
        for (int32_t b = 0; b < n; b++) {
            if (w->rms_final)
                norm_rows(c, c->hidden + b * D, D, x + b * D, D, w->rms_final, w->final_norm_b, 1);
            else
                memcpy(c->hidden + b * D, x + b * D, D * sizeof(float));
        }
        return;
    }

    /* classifier for the entries that want logits: their rows are consecutive in c->logits,
     * so the wanted entries are gathered and multiplied in one product */
    int32_t m = 0, first_row = -1;
    for (int32_t b = 0; b < n; b++) {
        if (logit_rows[b] < 0) continue;
        if (first_row < 0) first_row = logit_rows[b];
        norm_rows(c, c->xb + (size_t)m * D, D, x + b * D, D, w->rms_final, w->final_norm_b, 1);
        m++;
    }
    if (m == 0) return;
    const size_t V = (size_t)p->vocab_size;
    float *lg = c->logits + (size_t)first_row * V;
    wlm_matmul(c, lg, V, &w->wcls, c->xb, D, m);
    if (p->final_softcap > 0.0f) { /* logits = cap · tanh(logits / cap), as llama.cpp */
        const float cap = p->final_softcap, inv = 1.0f / cap;
        for (size_t i = 0; i < (size_t)m * V; i++) lg[i] = cap * tanhf(lg[i] * inv);
    }
}
