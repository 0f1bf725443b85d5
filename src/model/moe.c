/*
 * moe.c — the mixture-of-experts feed-forward, a layer's ffn_kind (WLM_FFN_KIND_MOE) consumed by
 * forward.c's one pass. As llama.cpp's build_moe_ffn (src/llama-graph.cpp) computes it, for
 * each entry's normed input u:
 *   z = router · u (+ router bias) (Gemma 4: router · (RMSNorm(x) / sqrt(dim) ⊙
 *   ffn_gate_inp.scale) of the stream x, the norm without gain); scores s = softmax(z), sigmoid(z), or z itself (gating);
 *   the k best of s (+ exp_probs_b, which steers the choice only), best first, ties to the lower
 *   expert; weights w_j = s of the chosen (a softmax over the k chosen logits for gpt-oss's
 *   gating), divided by their sum (clamped below at 2^-14) when the architecture normalizes,
 *   times expert_weights_scale;
 *   y_j = (down_j · act(gate_j · u + gb_j, up_j · u + ub_j) + db_j) · s_j (s_j the expert's
 *   ffn_down_exps.scale, 1 without);  out = Σ_j w_j y_j, added in slot order (best first).
 * The gate and up matrices are separate 3-D tensors or one fused ffn_gate_up_exps (each
 * expert's gate rows, then its up rows).
 * Cost follows the active parameters: only the chosen experts' rows are read. A batch's
 * (entry, slot) pairs are grouped by expert (llama.cpp's MUL_MAT_ID), so each chosen expert's
 * matrices are read once for all of its entries; every expert of the batch goes to the pool as
 * one job split by rows (wlm_matmul_segs), the gate and up products of all experts in one, the
 * down products in another. Each row of each entry is the same matrix-vector product whatever
 * the grouping and the threads, and the sum runs in slot order per entry, so batches and
 * threads give the bits of one token on one thread.
 */
#include <math.h>
#include <string.h>

#include "model/model.h"

/* The router of one entry: scores from its logits z (n_expert, overwritten), the chosen
 * experts ids[k] best first and their weights w[k]. */
static void route(const wlm_hparams *p, const wlm_layer_weights *lw, float *z, int32_t *ids,
                  float *w) {
    const int E = p->n_expert, K = p->n_expert_used;
    if (lw->moe_router_b)
        for (int e = 0; e < E; e++) z[e] += lw->moe_router_b[e];
    if (p->moe_gating == WLM_MOE_SOFTMAX) {
        wlm_softmax_ggml(z, E);
    } else if (p->moe_gating == WLM_MOE_SIGMOID) {
        for (int e = 0; e < E; e++) z[e] = 1.0f / (1.0f + expf(-z[e]));
    }
    /* top k of the (biased) scores; a chosen expert is marked by its id in ids[] */
    for (int j = 0; j < K; j++) {
        int best = -1;
        float bv = 0.0f;
        for (int e = 0; e < E; e++) {
            int taken = 0;
            for (int i = 0; i < j && !taken; i++) taken = ids[i] == e;
            if (taken) continue;
            const float v = lw->moe_probs_b ? z[e] + lw->moe_probs_b[e] : z[e];
            if (best < 0 || v > bv) {
                best = e;
                bv = v;
            }
        }
        ids[j] = best;
        w[j] = z[best];
    }
    if (p->moe_gating == WLM_MOE_SOFTMAX_CHOSEN) wlm_softmax_ggml(w, K);
    if (p->moe_norm_w) {
        float sum = 0.0f;
        for (int j = 0; j < K; j++) sum += w[j];
        if (sum < 6.103515625e-5f) sum = 6.103515625e-5f; /* llama.cpp: F16's smallest normal */
        for (int j = 0; j < K; j++) w[j] /= sum;
    }
    if (p->moe_w_scale != 0.0f && p->moe_w_scale != 1.0f)
        for (int j = 0; j < K; j++) w[j] *= p->moe_w_scale;
}

/* An expert's activation over n rows of F: act(g, u) into g. */
static void expert_act(const wlm_context *c, float *g, const float *u, int F, int act) {
    if (act == WLM_MOE_ACT_SILU) {
        c->k->swiglu(g, u, F);
        return;
    }
    if (act == WLM_MOE_ACT_GELU) {
        c->k->gelu(g, u, F);
        return;
    }
    /* gpt-oss (ggml's swiglu_oai, α 1.702, limit 7): min(g, 7) · σ(α min(g, 7)) · (clamp(u) + 1) */
    for (int i = 0; i < F; i++) {
        const float x = g[i] < 7.0f ? g[i] : 7.0f;
        const float y = u[i] < -7.0f ? -7.0f : u[i] > 7.0f ? 7.0f : u[i];
        g[i] = x / (1.0f + expf(-1.702f * x)) * (y + 1.0f);
    }
}

/* The view of expert e's matrix in a stacked tensor whose experts lie stride bytes apart (0:
 * back to back). */
static wlm_tensor expert(const wlm_tensor *t, int32_t e, size_t stride) {
    wlm_tensor v = *t;
    v.data = (const char *)t->data +
             (size_t)e * (stride ? stride : (size_t)t->rows * t->row_bytes);
    return v;
}

void wlm_moe_ffn(wlm_context *c, const wlm_layer_weights *lw, float *x, const float *stream,
                 float *out, int32_t n) {
    const wlm_hparams *p = &c->model->hp;
    const int E = p->n_expert, K = p->n_expert_used, F = p->expert_ff;
    const size_t D = (size_t)p->dim, FS = (size_t)F;

    /* route every entry; count each expert's rows. Gemma 4's router reads RMSNorm(stream)
     * (gain of ones) / sqrt(dim) ⊙ ffn_gate_inp.scale, as llama.cpp's rms_norm, scale, mul;
     * it is built in moe_x, free until the gathering below */
    const float *rin = x;
    if (lw->moe_in_norm) {
        const float inv = 1.0f / sqrtf((float)D);
        for (int32_t b = 0; b < n; b++) {
            float *r = c->moe_x + (size_t)b * D;
            c->k->rmsnorm(r, stream + (size_t)b * D, lw->moe_in_norm, (int)D, p->norm_eps);
            for (size_t i = 0; i < D; i++) r[i] = r[i] * inv * lw->moe_in_scale[i];
        }
        rin = c->moe_x;
    }
    wlm_matmul(c, c->moe_logits, (size_t)E, &lw->moe_router, rin, D, n);
    int32_t *first = c->moe_first;
    memset(first, 0, sizeof(int32_t) * (size_t)(E + 1));
    for (int32_t b = 0; b < n; b++) {
        route(p, lw, c->moe_logits + (size_t)b * E, c->moe_ids + (size_t)b * K,
              c->moe_w + (size_t)b * K);
        for (int j = 0; j < K; j++) first[c->moe_ids[(size_t)b * K + j] + 1]++;
    }
    for (int e = 0; e < E; e++) first[e + 1] += first[e];
    /* group: expert e's rows are first[e]..first[e+1]-1, its entries in order */
    int32_t *fill = c->moe_row; /* (reused below as each pair's row) */
    for (int32_t b = 0; b < n; b++)
        for (int j = 0; j < K; j++) {
            const int32_t e = c->moe_ids[(size_t)b * K + j];
            const int32_t r = first[e]++;
            fill[(size_t)b * K + j] = r;
            memcpy(c->moe_x + (size_t)r * D, x + (size_t)b * D, D * sizeof(float));
        }
    for (int e = E; e > 0; e--) first[e] = first[e - 1]; /* back to each expert's first row */
    first[0] = 0;

    /* gate and up of every chosen expert, one job; then the activation; then down */
    wlm_matmul_seg seg[2 * 64];
    int32_t ns = 0;
    for (int e = 0; e < E; e++) {
        const int32_t r0 = first[e], m = first[e + 1] - r0;
        if (m == 0) continue;
        seg[ns++] = (wlm_matmul_seg){c->moe_h + (size_t)r0 * FS, FS,
                                     expert(&lw->exp_gate, e, lw->exp_gu_stride),
                                     c->moe_x + (size_t)r0 * D, D, m};
        seg[ns++] = (wlm_matmul_seg){c->moe_h2 + (size_t)r0 * FS, FS,
                                     expert(&lw->exp_up, e, lw->exp_gu_stride),
                                     c->moe_x + (size_t)r0 * D, D, m};
        if (ns == (int32_t)(sizeof seg / sizeof seg[0])) {
            wlm_matmul_segs(c, seg, ns, c->moe_xq, c->xq_stride);
            ns = 0;
        }
    }
    if (ns) wlm_matmul_segs(c, seg, ns, c->moe_xq, c->xq_stride);
    for (int e = 0; e < E; e++)
        for (int32_t r = first[e]; r < first[e + 1]; r++) {
            float *g = c->moe_h + (size_t)r * FS, *u = c->moe_h2 + (size_t)r * FS;
            if (lw->exp_gate_b) c->k->axpy(g, 1.0f, lw->exp_gate_b + (size_t)e * FS, F);
            if (lw->exp_up_b) c->k->axpy(u, 1.0f, lw->exp_up_b + (size_t)e * FS, F);
            expert_act(c, g, u, F, p->arch->moe_act);
        }
    ns = 0;
    for (int e = 0; e < E; e++) {
        const int32_t r0 = first[e], m = first[e + 1] - r0;
        if (m == 0) continue;
        seg[ns++] = (wlm_matmul_seg){c->moe_y + (size_t)r0 * D, D, expert(&lw->exp_down, e, 0),
                                     c->moe_h + (size_t)r0 * FS, FS, m};
        if (ns == (int32_t)(sizeof seg / sizeof seg[0])) {
            wlm_matmul_segs(c, seg, ns, c->moe_xq, c->xq_stride);
            ns = 0;
        }
    }
    if (ns) wlm_matmul_segs(c, seg, ns, c->moe_xq, c->xq_stride);
    if (lw->exp_down_b)
        for (int e = 0; e < E; e++)
            for (int32_t r = first[e]; r < first[e + 1]; r++)
                c->k->axpy(c->moe_y + (size_t)r * D, 1.0f, lw->exp_down_b + (size_t)e * D, (int)D);
    if (lw->exp_out_scale) /* llama.cpp: the down product times the expert's scale */
        for (int e = 0; e < E; e++)
            for (int32_t r = first[e]; r < first[e + 1]; r++) {
                float *y = c->moe_y + (size_t)r * D;
                const float s = lw->exp_out_scale[e];
                for (size_t i = 0; i < D; i++) y[i] *= s;
            }

    /* out = Σ_j w_j y_j in slot order: y_0 w_0 first, then each further term added */
    for (int32_t b = 0; b < n; b++) {
        float *o = out + (size_t)b * D;
        const float *w = c->moe_w + (size_t)b * K;
        const int32_t *row = c->moe_row + (size_t)b * K;
        const float *y0 = c->moe_y + (size_t)row[0] * D;
        for (size_t i = 0; i < D; i++) o[i] = y0[i] * w[0];
        for (int j = 1; j < K; j++) {
            const float *y = c->moe_y + (size_t)row[j] * D;
            for (size_t i = 0; i < D; i++) o[i] += y[i] * w[j];
        }
    }
}
