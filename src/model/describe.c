/*
 * describe.c — a loaded model as JSON, for a forward pass that runs outside this library (the
 * WebGPU backend, js/backend/webgpu/): the architecture's row of arch.c, the resolved
 * hyperparameters, and every weight's type, shape and place in memory. The other backend reads
 * these instead of re-deriving them from the file, so both passes follow the same row. It does
 * not copy or convert weights.
 */
#include <stdarg.h>
#include <stdio.h>

#include "model/model.h"

typedef struct out_buf {
    char *buf;
    size_t cap, len;
} out_buf;

static void put(out_buf *o, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Appends formatted text; counts it when the buffer is full (snprintf's contract). */
static void put(out_buf *o, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *at = o->len < o->cap ? o->buf + o->len : NULL;
    int n = vsnprintf(at, at ? o->cap - o->len : 0, fmt, ap);
    va_end(ap);
    if (n > 0) o->len += (size_t)n;
}

/* "name":[type,rows,cols,row_bytes,address] of a matrix, or null when absent. */
static void put_tensor(out_buf *o, const char *name, const wlm_tensor *t) {
    if (!t->data) {
        put(o, "\"%s\":null", name);
        return;
    }
    put(o, "\"%s\":[%d,%d,%d,%zu,%lu]", name, (int)t->type, (int)t->rows, (int)t->cols,
        t->row_bytes, (unsigned long)(uintptr_t)t->data);
}

/* A float vector of n elements as an F32 tensor of one row, or null. */
static void put_vec(out_buf *o, const char *name, const float *v, int32_t n) {
    wlm_tensor t = {WLM_TYPE_F32, 1, n, (size_t)n * sizeof(float), v};
    put_tensor(o, name, &t);
}

int64_t wlm_model_describe(const wlm_model *m, char *buf, size_t cap) {
    if (!m || !m->loaded || m->vocab_only) return -1;
    out_buf o = {buf, cap, 0};
    const wlm_hparams *p = &m->hp;
    const wlm_arch *a = p->arch;
    static const char *norms[] = {"rms", "layer"}, *acts[] = {"silu", "gelu"};
    static const char *ffns[] = {"gated", "fused_gate_up", "plain"};
    static const char *ropes[] = {"none", "norm", "neox"};
    static const char *moe_acts[] = {"silu", "swiglu_oai", "gelu"};
    put(&o, "{\"arch\":{\"name\":\"%s\",\"norm\":\"%s\",\"act\":\"%s\",\"ffn\":\"%s\","
            "\"rope\":\"%s\",\"pos_embd\":%d,\"swa\":%d,\"encoder\":%d,\"attn_gate\":%d,"
            "\"per_layer\":%d,\"moe_act\":\"%s\",\"moe_stream_in\":%d,\"moe_dense_branch\":%d},",
        a->name, norms[a->norm], acts[a->act], ffns[a->ffn], ropes[a->rope], a->pos_embd, a->swa,
        (int)a->encoder, (int)a->attn_gate, (int)a->per_layer, moe_acts[a->moe_act],
        (int)(a->moe_router_in == WLM_MOE_IN_STREAM_SCALED), (int)a->moe_dense_branch);
    put(&o, "\"hp\":{\"dim\":%d,\"hidden_dim\":%d,\"n_layers\":%d,\"n_heads\":%d,"
            "\"n_kv_heads\":%d,\"vocab_size\":%d,\"seq_len\":%d,\"head_size\":%d,\"q_dim\":%d,"
            "\"kv_dim\":%d,\"n_rot\":%d,\"n_swa\":%d,\"n_ctx_orig\":%d,\"bidirectional\":%d,"
            "\"n_rec_layers\":%d,\"n_attn_layers\":%d,\"ssm_conv\":%d,\"ssm_d\":%d,"
            "\"ssm_hk\":%d,\"ssm_hv\":%d,\"ssm_channels\":%d,\"state_floats\":%zu,",
        (int)p->dim, (int)p->hidden_dim, (int)p->n_layers, (int)p->n_heads, (int)p->n_kv_heads,
        (int)p->vocab_size, (int)p->seq_len, (int)p->head_size, (int)p->q_dim, (int)p->kv_dim,
        (int)p->n_rot, (int)p->n_swa, (int)p->n_ctx_orig, (int)p->bidirectional,
        (int)p->n_rec_layers, (int)p->n_attn_layers, (int)p->ssm_conv, (int)p->ssm_d,
        (int)p->ssm_hk, (int)p->ssm_hv, (int)p->ssm_channels, p->state_floats);
    /* %.9g: every float32 value round-trips */
    put(&o, "\"norm_eps\":%.9g,\"rope_theta\":%.9g,\"rope_freq_scale\":%.9g,"
            "\"rope_theta_swa\":%.9g,\"rope_attn_factor\":%.9g,\"q_scale\":%.9g,"
            "\"embd_scale\":%.9g,\"final_softcap\":%.9g,",
        (double)p->norm_eps, (double)p->rope_theta, (double)p->rope_freq_scale,
        (double)p->rope_theta_swa, (double)p->rope_attn_factor, (double)p->q_scale,
        (double)p->embd_scale, (double)p->final_softcap);
    /* a mixture of experts (moe.c; zeros without) */
    /* per-layer shapes (Gemma 4; the hp fields above are then each layer's largest) */
    put(&o, "\"head_size_swa\":%d,\"n_rot_swa\":%d,\"n_shared_kv\":%d,\"n_ple\":%d,",
        (int)p->head_size_swa, (int)p->n_rot_swa, (int)p->n_shared_kv, (int)p->n_ple);
    put(&o, "\"n_expert\":%d,\"n_expert_used\":%d,\"expert_ff\":%d,\"n_dense_lead\":%d,"
            "\"moe_gating\":%d,\"moe_norm_w\":%d,\"moe_w_scale\":%.9g},",
        (int)p->n_expert, (int)p->n_expert_used, (int)p->expert_ff, (int)p->n_dense_lead,
        (int)p->moe_gating, (int)p->moe_norm_w, (double)p->moe_w_scale);
    const wlm_weights *w = &m->w;
    const int32_t D = p->dim, H = p->hidden_dim, hs = p->head_size;
    put(&o, "\"tensors\":{");
    put_tensor(&o, "token_embd", &w->token_embedding);
    put(&o, ",");
    put_tensor(&o, "position_embd", &w->pos_embedding);
    put(&o, ",");
    put_vec(&o, "output_norm", w->rms_final, D);
    put(&o, ",");
    put_vec(&o, "output_norm_b", w->final_norm_b, D);
    put(&o, ",");
    put_tensor(&o, "output", &w->wcls);
    /* Gemma 4's per-layer embeddings (null without): the table (vocab_size, n_ple n_layers),
     * its projection of the embedding (n_ple n_layers, dim) and that projection's norm (n_ple) */
    put(&o, ",");
    put_tensor(&o, "ple_embd", &w->ple_embd);
    put(&o, ",");
    put_tensor(&o, "ple_model_proj", &w->ple_model_proj);
    put(&o, ",");
    put_vec(&o, "ple_proj_norm", w->ple_proj_norm, p->n_ple);
    put(&o, "},\"layers\":[");
    for (int32_t l = 0; l < p->n_layers; l++) {
        const wlm_layer_weights *lw = &w->layers[l];
        static const char *mixers[] = {"attn", "deltanet", "shortconv"};
        put(&o, "%s{\"swa\":%d,\"no_rope\":%d,\"mixer\":\"%s\",\"kv_slot\":%d,\"state_off\":%zu,",
            l ? "," : "", (int)lw->swa, (int)lw->no_rope, mixers[lw->mixer], (int)lw->kv_slot,
            lw->state_off);
        /* this layer's shapes (the model's but in Gemma 4): head size, KV heads, Q and KV
         * widths, rotated width, feed-forward width, Q's scale; whether it keeps K/V of its own
         * (else it reads layer kv_src's cache, kv_slot), and whether V is K's projection. Its
         * V norm (head_size ones), output scale (one float) and per-layer embedding's gate
         * (n_ple, dim), projection (dim, n_ple) and norm (dim), null when absent */
        put(&o, "\"head_size\":%d,\"n_kv_heads\":%d,\"q_dim\":%d,\"kv_dim\":%d,\"n_rot\":%d,"
                "\"hidden\":%d,\"q_scale\":%.9g,\"kv_own\":%d,\"kv_src\":%d,\"v_is_k\":%d,",
            (int)lw->head_size, (int)lw->n_kv_heads, (int)lw->q_dim, (int)lw->kv_dim,
            (int)lw->n_rot, (int)lw->hidden, (double)lw->q_scale, (int)lw->kv_own,
            (int)lw->kv_src, (int)lw->v_is_k);
        put_vec(&o, "v_norm", lw->v_norm, lw->head_size);
        put(&o, ",");
        put_vec(&o, "out_scale", lw->out_scale, 1);
        put(&o, ",");
        put_tensor(&o, "ple_gate", &lw->ple_gate);
        put(&o, ",");
        put_tensor(&o, "ple_proj", &lw->ple_proj);
        put(&o, ",");
        put_vec(&o, "ple_norm", lw->ple_norm, D);
        put(&o, ",");
        /* a recurrent layer's (recurrent.c; null elsewhere): projections, conv kernel (channels
         * × ssm_conv taps, one row here), DeltaNet's dt bias, A and head norm */
        put_tensor(&o, "ssm_in", &lw->ssm_in);
        put(&o, ",");
        put_tensor(&o, "ssm_gate", &lw->ssm_gate);
        put(&o, ",");
        put_tensor(&o, "ssm_beta", &lw->ssm_beta);
        put(&o, ",");
        put_tensor(&o, "ssm_alpha", &lw->ssm_alpha);
        put(&o, ",");
        put_tensor(&o, "ssm_out", &lw->ssm_out);
        put(&o, ",");
        put_vec(&o, "conv_w", lw->conv_w, p->ssm_channels * p->ssm_conv);
        put(&o, ",");
        put_vec(&o, "ssm_dt", lw->ssm_dt, p->ssm_hv);
        put(&o, ",");
        put_vec(&o, "ssm_a", lw->ssm_a, p->ssm_hv);
        put(&o, ",");
        put_vec(&o, "ssm_norm", lw->ssm_norm, p->ssm_d);
        put(&o, ",");
        put_vec(&o, "attn_norm", lw->rms_att, D);
        put(&o, ",");
        put_vec(&o, "attn_norm_b", lw->att_norm_b, D);
        put(&o, ",");
        put_tensor(&o, "wq", &lw->wq);
        put(&o, ",");
        put_tensor(&o, "wk", &lw->wk);
        put(&o, ",");
        put_tensor(&o, "wv", &lw->wv);
        put(&o, ",");
        put_tensor(&o, "wqkv", &lw->wqkv);
        put(&o, ",");
        if (lw->wqkv.data) { /* fused: the biases are views into attn_qkv.bias */
            put_vec(&o, "bqkv", lw->bq, p->q_dim + 2 * p->kv_dim);
            put(&o, ",\"bq\":null,\"bk\":null,\"bv\":null,");
        } else {
            put(&o, "\"bqkv\":null,");
            put_vec(&o, "bq", lw->bq, p->q_dim);
            put(&o, ",");
            put_vec(&o, "bk", lw->bk, p->kv_dim);
            put(&o, ",");
            put_vec(&o, "bv", lw->bv, p->kv_dim);
            put(&o, ",");
        }
        put_vec(&o, "attn_sinks", lw->attn_sinks, p->n_heads);
        put(&o, ",");
        put_vec(&o, "q_norm", lw->q_norm, lw->head_size ? lw->head_size : hs);
        put(&o, ",");
        put_vec(&o, "k_norm", lw->k_norm, lw->head_size ? lw->head_size : hs);
        put(&o, ",");
        put_tensor(&o, "wo", &lw->wo);
        put(&o, ",");
        put_vec(&o, "bo", lw->bo, D);
        put(&o, ",");
        put_vec(&o, "post_attn_norm", lw->post_att_norm, D);
        put(&o, ",");
        put_vec(&o, "ffn_norm", lw->rms_ffn, D);
        put(&o, ",");
        put_vec(&o, "ffn_norm_b", lw->ffn_norm_b, D);
        put(&o, ",");
        put_tensor(&o, "w1", &lw->w1);
        put(&o, ",");
        put_tensor(&o, "w2", &lw->w2);
        put(&o, ",");
        put_tensor(&o, "w3", &lw->w3);
        put(&o, ",");
        put_vec(&o, "b_up", lw->b_up, H);
        put(&o, ",");
        put_vec(&o, "b_down", lw->b_down, D);
        put(&o, ",");
        put_vec(&o, "post_ffn_norm", lw->post_ffn_norm, D);
        /* a mixture of experts' (null elsewhere): the router, and each stacked expert tensor as
         * one matrix of n_expert × its rows (expert e's rows from e × rows) */
        put(&o, ",\"ffn_kind\":\"%s\",", lw->ffn_kind == WLM_FFN_KIND_MOE ? "moe" : "dense");
        put_tensor(&o, "moe_router", &lw->moe_router);
        put(&o, ",");
        put_vec(&o, "moe_router_b", lw->moe_router_b, p->n_expert);
        put(&o, ",");
        put_vec(&o, "moe_probs_b", lw->moe_probs_b, p->n_expert);
        /* fused gate/up experts (exp_gu_stride: Gemma 4's ffn_gate_up_exps) are one matrix
         * exp_gate_up of n_expert × 2 expert_ff rows (expert e's gate rows, then its up rows),
         * and exp_gate / exp_up null; else exp_gate_up is null */
        const int fused = lw->exp_gu_stride != 0;
        const wlm_tensor none = {0};
        const wlm_tensor *ex[] = {fused ? &none : &lw->exp_gate, fused ? &none : &lw->exp_up,
                                  &lw->exp_down, fused ? &lw->exp_gate : &none};
        static const char *ex_names[] = {"exp_gate", "exp_up", "exp_down", "exp_gate_up"};
        for (int i = 0; i < 4; i++) {
            wlm_tensor all = *ex[i];
            all.rows *= p->n_expert * (i == 3 ? 2 : 1);
            put(&o, ",");
            put_tensor(&o, ex_names[i], &all);
        }
        /* Gemma 4's (null elsewhere): the experts' output scales (n_expert), the router's input
         * norm (dim ones) and scale (dim), the experts' input norm and the two branches'
         * output norms (dim each) */
        put(&o, ",\"exp_gu_fused\":%d,", fused);
        put_vec(&o, "exp_out_scale", lw->exp_out_scale, p->n_expert);
        put(&o, ",");
        put_vec(&o, "moe_in_norm", lw->moe_in_norm, D);
        put(&o, ",");
        put_vec(&o, "moe_in_scale", lw->moe_in_scale, D);
        put(&o, ",");
        put_vec(&o, "moe_pre_norm", lw->moe_pre_norm, D);
        put(&o, ",");
        put_vec(&o, "moe_post_norm_1", lw->moe_post_norm_1, D);
        put(&o, ",");
        put_vec(&o, "moe_post_norm_2", lw->moe_post_norm_2, D);
        put(&o, ",");
        put_vec(&o, "exp_gate_b", lw->exp_gate_b, p->n_expert * p->expert_ff);
        put(&o, ",");
        put_vec(&o, "exp_up_b", lw->exp_up_b, p->n_expert * p->expert_ff);
        put(&o, ",");
        put_vec(&o, "exp_down_b", lw->exp_down_b, p->n_expert * D);
        put(&o, "}");
    }
    put(&o, "],\"rope_factors\":{");
    put_vec(&o, "freqs", w->rope_freqs, p->n_rot / 2);
    put(&o, ",");
    put_vec(&o, "long", w->rope_long, p->n_rot / 2);
    put(&o, ",");
    put_vec(&o, "short", w->rope_short, p->n_rot / 2);
    put(&o, "}}");
    if (o.len < o.cap) o.buf[o.len] = '\0';
    else if (o.cap) o.buf[o.cap - 1] = '\0';
    return (int64_t)o.len;
}
