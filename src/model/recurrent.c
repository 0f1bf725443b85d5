/*
 * recurrent.c — the mixers of hybrid models' recurrent layers, for a batch of entries: Qwen3.5's
 * Gated DeltaNet and LFM2's gated short convolution. Each reads the layer's normed input and
 * writes the mixer's output (before the residual add); forward.c runs everything around them
 * (norms, residuals, the feed-forward, the attention layers). The projections are the same
 * batched matrix products as attention's; the recurrence runs entry by entry in batch order (a
 * sequence's entries are in position order), on each entry's sequence state, so a batch gives
 * each entry exactly what it would alone. DeltaNet's recurrence is split over the pool by value
 * heads, each head computed as on one thread. A speculative verification may ask for a copy of
 * the state after each of its entries (wlm_roll_dst, context.c's rollback): each part is copied
 * where it was updated (the conv rows in the entry loop, a thread's heads by that thread). What
 * llama.cpp computes is written out in ../shared/reference/archs-2026.md (sections 1.3 and 2.3);
 * src/models/qwen35.cpp and lfm2.cpp of llama.cpp are the authority.
 */
#include <math.h>
#include <string.h>

#include "model/model.h"
#include "runtime/threadpool.h"

static float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }
static float siluf(float x) { return x / (1.0f + expf(-x)); }
/* ln(1 + e^x), as ggml_softplus: x itself above 20 (where the two agree in float) */
static float softplusf(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

/* The depthwise causal conv of one entry over `ch` channels: out[c] = Σ_k w[c K + k] ·
 * u_{t−K+1+k}[c], the K − 1 previous inputs from `rows` ((K − 1) × ch, oldest first), which
 * then shift by one and take u. out may alias u. */
static void conv_step(float *out, const float *u, float *rows, const float *w, int K, int ch) {
    for (int c = 0; c < ch; c++) {
        const float *wc = w + (size_t)c * (size_t)K;
        float acc = 0.0f;
        for (int k = 0; k < K - 1; k++) acc += wc[k] * rows[(size_t)k * (size_t)ch + c];
        acc += wc[K - 1] * u[c];
        for (int k = 0; k + 1 < K - 1; k++)
            rows[(size_t)k * (size_t)ch + c] = rows[(size_t)(k + 1) * (size_t)ch + c];
        rows[(size_t)(K - 2) * (size_t)ch + c] = u[c];
        out[c] = acc;
    }
}

/* u / max(|u|, eps) over n floats, in place (ggml_l2_norm: the squares summed in double),
 * then times `scale` (1: none). */
static void l2norm(float *u, int n, float eps, float scale) {
    double ss = 0.0;
    for (int i = 0; i < n; i++) ss += (double)(u[i] * u[i]);
    const float norm = sqrtf((float)ss);
    const float inv = 1.0f / (norm > eps ? norm : eps);
    for (int i = 0; i < n; i++) u[i] *= inv;
    if (scale != 1.0f)
        for (int i = 0; i < n; i++) u[i] *= scale;
}

/* ---- Gated DeltaNet ---------------------------------------------------------------------- */

typedef struct deltanet_job {
    wlm_context *c;
    const wlm_layer_weights *lw;
    int32_t n;
} deltanet_job;

/* Value heads [HV i / n, HV (i + 1) / n) of every entry, in entry order: the delta rule on the
 * entry's sequence state, then the gated RMSNorm of the head's output. */
static void deltanet_heads(void *arg, int32_t i, int32_t nchunks) {
    const deltanet_job *j = arg;
    wlm_context *c = j->c;
    const wlm_hparams *p = &c->model->hp;
    const wlm_layer_weights *lw = j->lw;
    const int D = p->ssm_d, HK = p->ssm_hk, HV = p->ssm_hv, C = p->ssm_channels;
    const int h0 = (int)((int64_t)HV * i / nchunks), h1 = (int)((int64_t)HV * (i + 1) / nchunks);
    const size_t VD = (size_t)HV * (size_t)D;
    const size_t conv_floats = (size_t)(p->ssm_conv - 1) * (size_t)C;
    for (int32_t b = 0; b < j->n; b++) {
        const float *m = c->rs_in + (size_t)b * (size_t)C; /* q heads, k heads, v heads */
        const float *beta = c->rs_ba + (size_t)b * 2 * (size_t)HV, *decay = beta + HV;
        float *state = c->seqs[c->ent_seq[b]].state + lw->state_off + conv_floats;
        float *o = c->rs_o + (size_t)b * VD;
        const float *z = c->rs_z + (size_t)b * VD;
        for (int h = h0; h < h1; h++) {
            const int kh = h % HK; /* the converter tiled the value heads over the key heads */
            float *oh = o + (size_t)h * (size_t)D;
            c->k->deltanet(state + (size_t)h * (size_t)D * (size_t)D, m + (size_t)kh * D,
                           m + (size_t)(HK + kh) * D, m + (size_t)(2 * HK) * D + (size_t)h * D,
                           decay[h], beta[h], oh, D);
            c->k->rmsnorm(oh, oh, lw->ssm_norm, D, p->norm_eps);
            const float *zh = z + (size_t)h * (size_t)D;
            for (int e = 0; e < D; e++) oh[e] *= siluf(zh[e]);
        }
        float *keep = wlm_roll_dst(c, b, lw->state_off + conv_floats); /* a verified position */
        if (keep)
            memcpy(keep + (size_t)h0 * D * D, state + (size_t)h0 * D * D,
                   sizeof(float) * (size_t)(h1 - h0) * D * D);
    }
}

static void deltanet(wlm_context *c, const wlm_layer_weights *lw, const float *xb, size_t xs,
                     float *out, size_t os, int32_t n) {
    const wlm_hparams *p = &c->model->hp;
    const int D = p->ssm_d, HK = p->ssm_hk, HV = p->ssm_hv, C = p->ssm_channels;
    const size_t VD = (size_t)HV * (size_t)D, BA = 2 * (size_t)HV;
    wlm_matmul_ex(c, c->rs_in, (size_t)C, &lw->ssm_in, xb, xs, n, 0);
    wlm_matmul_ex(c, c->rs_z, VD, &lw->ssm_gate, xb, xs, n, 1);
    wlm_matmul_ex(c, c->rs_ba, BA, &lw->ssm_beta, xb, xs, n, 1);
    wlm_matmul_ex(c, c->rs_ba + HV, BA, &lw->ssm_alpha, xb, xs, n, 1);
    const float qscale = 1.0f / sqrtf((float)D);
    for (int32_t b = 0; b < n; b++) { /* the conv, in entry order over each sequence's rows */
        float *m = c->rs_in + (size_t)b * (size_t)C;
        float *rows = c->seqs[c->ent_seq[b]].state + lw->state_off;
        conv_step(m, m, rows, lw->conv_w, p->ssm_conv, C);
        float *keep = wlm_roll_dst(c, b, lw->state_off); /* a verified position's conv rows */
        if (keep) memcpy(keep, rows, sizeof(float) * (size_t)(p->ssm_conv - 1) * (size_t)C);
        for (int i = 0; i < C; i++) m[i] = siluf(m[i]);
        for (int h = 0; h < HK; h++) {
            l2norm(m + (size_t)h * D, D, p->norm_eps, qscale);        /* q, scaled */
            l2norm(m + (size_t)(HK + h) * D, D, p->norm_eps, 1.0f); /* k */
        }
        float *beta = c->rs_ba + (size_t)b * BA, *decay = beta + HV;
        for (int h = 0; h < HV; h++) {
            beta[h] = sigmoidf(beta[h]);
            decay[h] = expf(softplusf(decay[h] + lw->ssm_dt[h]) * lw->ssm_a[h]);
        }
    }
    deltanet_job j = {c, lw, n};
    const int32_t threads = wlm_threadpool_size(c->pool);
    const int32_t chunks = threads < HV ? threads : HV;
    if (chunks > 1 && (uint64_t)n * VD * (uint64_t)D >= (1u << 16))
        wlm_pool_run(c->pool, deltanet_heads, &j, chunks);
    else
        deltanet_heads(&j, 0, 1);
    wlm_matmul_ex(c, out, os, &lw->ssm_out, c->rs_o, VD, n, 0);
}

/* ---- LFM2's gated short convolution ------------------------------------------------------- */

static void shortconv(wlm_context *c, const wlm_layer_weights *lw, const float *xb, size_t xs,
                      float *out, size_t os, int32_t n) {
    const wlm_hparams *p = &c->model->hp;
    const int D = p->dim;
    const size_t D3 = 3 * (size_t)D;
    wlm_matmul_ex(c, c->rs_in, D3, &lw->ssm_in, xb, xs, n, 0);
    for (int32_t b = 0; b < n; b++) { /* [B, C, x] = in_proj · h; y = C ⊙ conv(B ⊙ x) */
        float *bcx = c->rs_in + (size_t)b * D3;
        float *u = c->rs_o + (size_t)b * (size_t)D;
        for (int i = 0; i < D; i++) u[i] = bcx[i] * bcx[2 * (size_t)D + i];
        float *rows = c->seqs[c->ent_seq[b]].state + lw->state_off;
        conv_step(u, u, rows, lw->conv_w, p->ssm_conv, D);
        float *keep = wlm_roll_dst(c, b, lw->state_off); /* a verified position's conv rows */
        if (keep) memcpy(keep, rows, sizeof(float) * (size_t)(p->ssm_conv - 1) * (size_t)D);
        for (int i = 0; i < D; i++) u[i] *= bcx[(size_t)D + i];
    }
    wlm_matmul_ex(c, out, os, &lw->ssm_out, c->rs_o, (size_t)D, n, 0);
}

void wlm_recurrent_mix(wlm_context *c, const wlm_layer_weights *lw, const float *xb, size_t xs,
                       float *out, size_t os, int32_t n) {
    if (lw->mixer == WLM_MIX_DELTANET) deltanet(c, lw, xb, xs, out, os, n);
    else shortconv(c, lw, xb, xs, out, os, n);
}
