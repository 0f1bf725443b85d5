/*
 * gguf_weights.c — every weight of a GGUF model onto m->w by its architecture's row of arch.c and
 * llama.cpp's tensor names: the embeddings, each layer's sequence mixer (attention, DeltaNet,
 * short convolution) and feed-forward (dense, or a mixture of experts), the per-layer embeddings,
 * the final norm and the classifier or encoder heads; every shape from the hyperparameters and the
 * per-layer tables (gguf_hparams.c), and the bytes of weights a token reads (m->weight_bytes).
 *
 * llama.cpp's converters store the Q and K weights of "llama" models so that rotary embeddings
 * apply to adjacent pairs (2i, 2i+1) of each head (llama2.c's layout, ggml's normal mode); the
 * NEOX-style architectures (Qwen, Gemma, Phi-3) keep Hugging Face's order and rotate pairs
 * (i, i + n_rot/2). Either way the weights are used as stored, with no permutation.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "model/gguf_load.h"
#include "model/model.h"

/* An optional vector `name` of n floats (WLM_T_REQ: required), into *out (NULL when absent). */
static int get_vec(wlm_model *m, const wlm_gguf *g, const char *name, int32_t n, int need,
                   float **spare, const float **out) {
    *out = NULL;
    if (need == WLM_T_NO) return WLM_OK;
    if (need == WLM_T_OPT && !wlm_gguf_find_tensor(g, name)) return WLM_OK;
    return gguf_get_norm(m, g, name, n, spare, out);
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
        return (rc = gguf_get_matrix(m, g, blk(name, sizeof name, l, "shortconv.in_proj.weight"),
                                     3 * D, D, &lw->ssm_in)) ||
                       (rc = gguf_get_floats(m, g,
                                             blk(name, sizeof name, l, "shortconv.conv.weight"), D,
                                             K, spare, &lw->conv_w)) ||
                       (rc = gguf_get_matrix(m, g,
                                             blk(name, sizeof name, l, "shortconv.out_proj.weight"),
                                             D, D, &lw->ssm_out))
                   ? rc
                   : WLM_OK;
    const int32_t HV = hp->ssm_hv, VD = hp->ssm_hv * hp->ssm_d;
    if ((rc = gguf_get_matrix(m, g, blk(name, sizeof name, l, "attn_qkv.weight"), C, D,
                              &lw->ssm_in)) ||
        (rc = gguf_get_matrix(m, g, blk(name, sizeof name, l, "attn_gate.weight"), VD, D,
                              &lw->ssm_gate)) ||
        (rc = gguf_get_matrix(m, g, blk(name, sizeof name, l, "ssm_beta.weight"), HV, D,
                              &lw->ssm_beta)) ||
        (rc = gguf_get_matrix(m, g, blk(name, sizeof name, l, "ssm_alpha.weight"), HV, D,
                              &lw->ssm_alpha)) ||
        (rc = gguf_get_matrix(m, g, blk(name, sizeof name, l, "ssm_out.weight"), D, VD,
                              &lw->ssm_out)) ||
        (rc = gguf_get_floats(m, g, blk(name, sizeof name, l, "ssm_conv1d.weight"), C, K, spare,
                              &lw->conv_w)) ||
        (rc = gguf_get_norm(m, g, blk(name, sizeof name, l, "ssm_dt.bias"), HV, spare,
                            &lw->ssm_dt)) ||
        (rc = gguf_get_norm(m, g, blk(name, sizeof name, l, "ssm_a"), HV, spare, &lw->ssm_a)) ||
        (rc = gguf_get_norm(m, g, blk(name, sizeof name, l, "ssm_norm.weight"), hp->ssm_d, spare,
                            &lw->ssm_norm)))
        return rc;
    return WLM_OK;
}

static int map_ffn(wlm_model *m, const wlm_gguf *g, int32_t l, float **spare);

/* Gemma 4's attention projections of layer l (gguf_map_weights set its shapes): attn_q [E, H·hd];
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
    if ((rc = gguf_get_matrix(m, g, blk(name, sizeof name, l, "attn_q.weight"), lw->q_dim, D,
                              &lw->wq)))
        return rc;
    if (!lw->kv_own) { /* a file may still carry them: checked as llama.cpp does, then unused */
        wlm_tensor unused = {0};
        const float *unused_norm = NULL;
        if ((wlm_gguf_find_tensor(g, blk(name, sizeof name, l, "attn_k.weight")) &&
             (rc = gguf_get_matrix(m, g, name, lw->kv_dim, D, &unused))) ||
            (wlm_gguf_find_tensor(g, blk(name, sizeof name, l, "attn_v.weight")) &&
             (rc = gguf_get_matrix(m, g, name, lw->kv_dim, D, &unused))) ||
            (wlm_gguf_find_tensor(g, blk(name, sizeof name, l, "attn_k_norm.weight")) &&
             (rc = gguf_get_norm(m, g, name, lw->head_size, spare, &unused_norm))))
            return rc;
    } else {
        if ((rc = gguf_get_matrix(m, g, blk(name, sizeof name, l, "attn_k.weight"), lw->kv_dim, D,
                                  &lw->wk)) ||
            (rc = gguf_get_norm(m, g, blk(name, sizeof name, l, "attn_k_norm.weight"),
                                lw->head_size, spare, &lw->k_norm)))
            return rc;
        lw->v_is_k = !wlm_gguf_find_tensor(g, blk(name, sizeof name, l, "attn_v.weight"));
        if (!lw->v_is_k &&
            (rc = gguf_get_matrix(m, g, name, lw->kv_dim, D, &lw->wv)))
            return rc;
    }
    if (wlm_gguf_find_tensor(g, blk(name, sizeof name, l, "layer_output_scale.weight")) &&
        (rc = gguf_get_norm(m, g, name, 1, spare, &lw->out_scale)))
        return rc;
    if (P == 0) {
        if (wlm_gguf_find_tensor(g, blk(name, sizeof name, l, "inp_gate.weight")))
            return wlm_set_error(m->errmsg, WLM_ERR_FORMAT,
                                 "tensor %s: per-layer embeddings need %s."
                                 "embedding_length_per_layer_input > 0", name, hp->arch->name);
        return WLM_OK;
    }
    if ((rc = gguf_get_matrix(m, g, blk(name, sizeof name, l, "inp_gate.weight"), P, D,
                              &lw->ple_gate)) ||
        (rc = gguf_get_matrix(m, g, blk(name, sizeof name, l, "proj.weight"), D, P,
                              &lw->ple_proj)) ||
        (rc = gguf_get_norm(m, g, blk(name, sizeof name, l, "post_norm.weight"), D, spare,
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
        if ((rc = gguf_get_norm(m, g, blk(name, sizeof name, l, "attn_output_norm.weight"), D,
                                spare, &lw->attn_out_norm)) ||
            (rc = gguf_get_norm(m, g, blk(name, sizeof name, l, "attn_output_norm.bias"), D, spare,
                                &lw->attn_out_norm_b)) ||
            (rc = gguf_get_norm(m, g, blk(name, sizeof name, l, "layer_output_norm.weight"), D,
                                spare, &lw->layer_out_norm)) ||
            (rc = gguf_get_norm(m, g, blk(name, sizeof name, l, "layer_output_norm.bias"), D, spare,
                                &lw->layer_out_norm_b)))
            return rc;
    } else if ((rc = gguf_get_norm(m, g, blk(name, sizeof name, l, "attn_norm.weight"), D, spare,
                                   &lw->rms_att)) ||
               (rc = get_vec(m, g, blk(name, sizeof name, l, "attn_norm.bias"), D, layer_bias,
                             spare, &lw->att_norm_b)) ||
               (rc = gguf_get_norm(m, g, blk(name, sizeof name, l, ffn_norm), D, spare,
                                   &lw->rms_ffn)) ||
               (rc = get_vec(m, g, blk(name, sizeof name, l, "ffn_norm.bias"), D, layer_bias, spare,
                             &lw->ffn_norm_b))) {
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
        if ((rc = gguf_get_matrix(m, g, blk(name, sizeof name, l, "attn_qkv.weight"), Q + 2 * KV, D,
                                  &lw->wqkv)) ||
            (rc = get_vec(m, g, blk(name, sizeof name, l, "attn_qkv.bias"), Q + 2 * KV, a->qkv_bias,
                          spare, &b)))
            return rc;
        if (b) {
            lw->bq = b;
            lw->bk = b + Q;
            lw->bv = b + Q + KV;
        }
    } else if (a->per_layer) {
        if ((rc = map_per_layer_attn(m, g, l, spare))) return rc;
    } else {
        if ((rc = gguf_get_matrix(m, g, blk(name, sizeof name, l, "attn_q.weight"), QR, D,
                                  &lw->wq)) ||
            (rc = gguf_get_matrix(m, g, blk(name, sizeof name, l, "attn_k.weight"), KV, D,
                                  &lw->wk)) ||
            (rc = gguf_get_matrix(m, g, blk(name, sizeof name, l, "attn_v.weight"), KV, D,
                                  &lw->wv)) ||
            (rc = get_vec(m, g, blk(name, sizeof name, l, "attn_q.bias"), Q, a->qkv_bias, spare,
                          &lw->bq)) ||
            (rc = get_vec(m, g, blk(name, sizeof name, l, "attn_k.bias"), KV, a->qkv_bias, spare,
                          &lw->bk)) ||
            (rc = get_vec(m, g, blk(name, sizeof name, l, "attn_v.bias"), KV, a->qkv_bias, spare,
                          &lw->bv)))
            return rc;
    }
    if ((rc = get_vec(m, g, blk(name, sizeof name, l, "attn_q_norm.weight"), HS, a->qk_norm, spare,
                      &lw->q_norm)) ||
        (!a->per_layer && /* (map_per_layer_attn reads it where the layer has K) */
         (rc = get_vec(m, g, blk(name, sizeof name, l, "attn_k_norm.weight"), HS, a->qk_norm, spare,
                       &lw->k_norm))) ||
        (rc = gguf_get_matrix(m, g, blk(name, sizeof name, l, "attn_output.weight"), D, Q,
                              &lw->wo)) ||
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
                             gguf_type_desc(t->type, tbuf, sizeof tbuf));
    }
    return gguf_get_floats(m, g, name, m->hp.n_expert, cols, spare, out);
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
    if ((rc = gguf_get_matrix(m, g, blk(name, sizeof name, l, "ffn_gate_inp.weight"), E, D,
                              &lw->moe_router)) ||
        (rc = get_vec(m, g, blk(name, sizeof name, l, "ffn_gate_inp.bias"), E, a->moe_router_bias,
                      spare, &lw->moe_router_b)) ||
        (rc = get_vec(m, g, blk(name, sizeof name, l, "exp_probs_b.bias"), E, a->moe_probs_bias,
                      spare, &lw->moe_probs_b)) ||
        (rc = get_vec(m, g, blk(name, sizeof name, l, "ffn_gate_inp.scale"), D,
                      a->moe_router_in == WLM_MOE_IN_STREAM_SCALED ? WLM_T_REQ : WLM_T_NO, spare,
                      &lw->moe_in_scale)) ||
        (rc = get_vec(m, g, blk(name, sizeof name, l, "ffn_down_exps.scale"), E, a->moe_out_scale,
                      spare, &lw->exp_out_scale)))
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
        if ((rc = gguf_get_matrices(m, g, name, E, 2 * (int64_t)F, D, &lw->exp_gate))) return rc;
        lw->exp_gu_stride = 2 * (size_t)F * lw->exp_gate.row_bytes;
        lw->exp_gate.rows = F;
        lw->exp_up = lw->exp_gate;
        if (!gu->external) /* (an external tensor's view is a placeholder, never read here) */
            lw->exp_up.data = (const char *)lw->exp_gate.data + (size_t)F * lw->exp_gate.row_bytes;
    } else if ((rc = gguf_get_matrices(m, g, blk(name, sizeof name, l, "ffn_gate_exps.weight"), E,
                                       F, D, &lw->exp_gate)) ||
               (rc = gguf_get_matrices(m, g, blk(name, sizeof name, l, "ffn_up_exps.weight"), E, F,
                                       D, &lw->exp_up)))
        return rc;
    if (a->moe_dense_branch && /* the dense feed-forward beside the experts, and their norms */
        ((rc = get_vec(m, g, blk(name, sizeof name, l, "pre_ffw_norm_2.weight"), D, WLM_T_REQ,
                       spare, &lw->moe_pre_norm)) ||
         (rc = get_vec(m, g, blk(name, sizeof name, l, "post_ffw_norm_1.weight"), D, WLM_T_REQ,
                       spare, &lw->moe_post_norm_1)) ||
         (rc = get_vec(m, g, blk(name, sizeof name, l, "post_ffw_norm_2.weight"), D, WLM_T_REQ,
                       spare, &lw->moe_post_norm_2))))
        return rc;
    if ((rc = gguf_get_matrices(m, g, blk(name, sizeof name, l, "ffn_down_exps.weight"), E, D, F,
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
        (rc = gguf_get_matrix(m, g, blk(name, sizeof name, l, "ffn_gate.weight"), H, D, &lw->w1)))
        return rc;
    if ((rc = gguf_get_matrix(m, g, blk(name, sizeof name, l, "ffn_up.weight"), up_rows, D,
                              &lw->w3)) ||
        (rc = gguf_get_matrix(m, g, blk(name, sizeof name, l, "ffn_down.weight"), D, H, &lw->w2)) ||
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
                             gguf_type_desc(rf->type, tbuf, sizeof tbuf));
    }
    wlm_tensor t = {0};
    int rc = gguf_get_matrix(m, g, name, 1, n, &t);
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
        ((rc = gguf_get_matrix(m, g, "cls.weight", D, D, &w->cls)) ||
         (rc = get_vec(m, g, "cls.bias", D, WLM_T_OPT, spare, &w->cls_b))))
        return rc;
    if ((t = wlm_gguf_find_tensor(g, "cls.output.weight"))) {
        const int64_t n = t->ne[1] >= 1 && t->ne[1] <= 65536 ? t->ne[1] : 1;
        if ((rc = gguf_get_matrix(m, g, "cls.output.weight", n, D, &w->cls_out)) ||
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
        (rc = gguf_get_matrix(m, g, "token_types.weight",
                              n_types                           ? (int64_t)n_types
                              : t->ne[1] >= 1 && t->ne[1] <= 64 ? t->ne[1]
                                                                : 1,
                              D, &w->type_embd)))
        return rc;
    if ((rc = gguf_get_norm(m, g, "token_embd_norm.weight", D, spare, &w->embd_norm)) ||
        (rc = gguf_get_norm(m, g, "token_embd_norm.bias", D, spare, &w->embd_norm_b)))
        return rc;
    return map_rank_head(m, g, spare);
}

int gguf_map_weights(wlm_model *m, const wlm_gguf *g, const gguf_layers *t) {
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
    if ((rc = gguf_get_matrix(m, g, "token_embd.weight", V, D, &w->token_embedding))) return rc;
    if (a->pos_embd &&
        (rc = gguf_get_matrix(m, g, "position_embd.weight", hp->seq_len, D, &w->pos_embedding)))
        return rc;

    /* F16 vectors (norms, biases) and conv kernels are converted once; one allocation holds
     * them all: count the elements of every F16 tensor of their shape (gguf.c's resident rule:
     * one row, or rows of a few taps). */
    uint64_t n_f16 = 0;
    for (size_t i = 0; i < g->n_tensors; i++)
        if (g->tensors[i].type == WLM_TYPE_F16 && wlm_gguf_tensor_resident(&g->tensors[i]))
            n_f16 += g->tensors[i].n_elements;
    /* + a gain of ones: Gemma 4's for V's norm (head_size) and its router's input (dim) */
    const int32_t n_unit = t->head || (hp->n_expert && a->moe_router_in == WLM_MOE_IN_STREAM_SCALED)
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
        lw->mixer = t->mixer[l];
        lw->swa = t->swa[l];
        if (t->head) { /* Gemma 4 (read_per_layer): this layer's own shapes and KV source */
            lw->head_size = t->head[l];
            lw->n_kv_heads = t->n_kvh[l];
            lw->q_dim = lw->head_size * hp->n_heads;
            lw->kv_dim = lw->head_size * lw->n_kv_heads;
            lw->n_rot = lw->swa ? hp->n_rot_swa : hp->n_rot;
            lw->hidden = t->n_ff[l];
            lw->q_scale = sqrtf((float)lw->head_size); /* the kernel's 1/sqrt(hs): scale 1 */
            lw->kv_own = l < first_shared;
            lw->kv_src = lw->kv_own ? l : first_shared - (lw->swa ? 2 : 1);
            lw->v_norm = lw->kv_own ? unit : NULL;
        }
        if (t->mixer[l] != WLM_MIX_ATTN) lw->kv_slot = -1;
        else if (t->head && !lw->kv_own) lw->kv_slot = w->layers[lw->kv_src].kv_slot;
        else lw->kv_slot = slot++;
        lw->state_off = state_off;
        state_off += gguf_layer_state_floats(hp, t->mixer[l]);
        if ((rc = map_layer(m, g, l, &spare))) return rc;
        if (lw->ffn_kind == WLM_FFN_KIND_MOE && a->moe_router_in == WLM_MOE_IN_STREAM_SCALED)
            lw->moe_in_norm = unit;
        lw->no_rope = a->nope_step > 0 && (l + 1) % a->nope_step == 0;
    }
    if (t->head) hp->n_attn_layers = first_shared; /* the layers with a KV cache of their own */
    hp->state_floats = state_off; /* one sequence's, all layers */
    if (a->encoder) {
        if ((rc = map_encoder(m, g, &spare))) return rc;
    } else if ((rc = gguf_get_norm(m, g, final_norm, D, &spare, &w->rms_final)) ||
               (rc = get_vec(m, g, "output_norm.bias", D,
                             a->norm == WLM_NORM_LAYER ? WLM_T_REQ : WLM_T_NO, &spare,
                             &w->final_norm_b)) ||
               (rc = map_rank_head(m, g, &spare))) {
        return rc;
    }

    /* Gemma 4's per-layer embeddings: per_layer_token_embd [P·L, V], per_layer_model_proj
     * [E, P·L], per_layer_proj_norm [P]. */
    if (t->head && hp->n_ple > 0) {
        const int32_t PL = hp->n_ple * L;
        if ((rc = gguf_get_matrix(m, g, "per_layer_token_embd.weight", V, PL, &w->ple_embd)) ||
            (rc =
                 gguf_get_matrix(m, g, "per_layer_model_proj.weight", PL, D, &w->ple_model_proj)) ||
            (rc = gguf_get_norm(m, g, "per_layer_proj_norm.weight", hp->n_ple, &spare,
                                &w->ple_proj_norm)))
            return rc;
    } else if (t->head && wlm_gguf_find_tensor(g, "per_layer_token_embd.weight")) {
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
        if ((rc = gguf_get_matrix(m, g, "dense_2.weight", d2, D, &w->dense2)) ||
            (rc = gguf_get_matrix(m, g, "dense_3.weight", D, d2, &w->dense3)))
            return rc;
    } else if (a->dense_out && wlm_gguf_find_tensor(g, "dense_3.weight")) {
        return wlm_set_error(m->errmsg, WLM_ERR_FORMAT,
                             "GGUF model has dense_3.weight without dense_2.weight");
    }

    m->shared_classifier = !a->encoder && wlm_gguf_find_tensor(g, "output.weight") == NULL;
    if (m->shared_classifier) w->wcls = w->token_embedding;
    else if (!a->encoder && (rc = gguf_get_matrix(m, g, "output.weight", V, D, &w->wcls)))
        return rc;

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
