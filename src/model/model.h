/*
 * model.h — internal: the model and context handles. A model is hyperparameters plus weight
 * views into the caller's buffer (nothing is copied); a context owns the KV cache, activation
 * buffers, the sampler and the generation state. Shapes are (rows, cols), row-major float32.
 */
#ifndef WASMLM_MODEL_H
#define WASMLM_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "wasmlm.h"
#include "kernels/kernels.h"
#include "kernels/quant.h"
#include "sampling/sampler.h"
#include "tokenizer/tokenizer.h"

#define WLM_ERRMSG_SIZE 256

/* ---- architectures (arch.c) ------------------------------------------------------------------
 * An architecture is data: which norm, activation, feed-forward and attention layout, RoPE style
 * and optional tensors it has. The loader picks the row of arch.c's table named by the GGUF's
 * general.architecture and maps the tensors it lists; forward.c reads the same row. */
enum { WLM_NORM_RMS, WLM_NORM_LAYER };          /* RMSNorm (x / rms · w) or LayerNorm (+ bias) */
enum { WLM_ACT_SILU, WLM_ACT_GELU };            /* SiLU, or GELU with the tanh approximation */
enum { WLM_FFN_GATED, WLM_FFN_FUSED_GATE_UP, WLM_FFN_PLAIN }; /* act(gate)·up; phi3's ffn_up
                                                   holding gate then up; act(up) alone */
enum { WLM_QKV_SEPARATE, WLM_QKV_FUSED, WLM_QKV_EITHER }; /* attn_q/k/v or one attn_qkv */
enum { WLM_ROPE_NONE, WLM_ROPE_NORM, WLM_ROPE_NEOX }; /* no RoPE; pairs (2i, 2i+1); pairs
                                                   (i, i + n_rot/2) (ggml's GGML_ROPE_TYPE_NEOX) */
/* Multi-section RoPE (wlm_arch.rope_sections): none; ggml's GGML_ROPE_TYPE_IMROPE (Qwen3.5: pair
 * i's section is i mod the sum, interleaved t, h, w); GGML_ROPE_TYPE_MROPE (Qwen2-VL: the sections
 * one after another, t then h then w then the fourth). Rotation is NEOX's in both. */
enum { WLM_SECTIONS_NONE, WLM_SECTIONS_IMROPE, WLM_SECTIONS_MROPE };
enum { WLM_T_NO, WLM_T_OPT, WLM_T_REQ };        /* an optional tensor: absent, may be, must be */
/* How the layers' mixers are chosen (wlm_arch.layers): every layer attention; Qwen3.5's Gated
 * DeltaNet layers with gated attention every full_attention_interval-th layer (or as
 * attention.recurrent_layers says); LFM2's short convolutions where the per-layer
 * attention.head_count_kv is 0. */
enum { WLM_LAYERS_ATTN, WLM_LAYERS_DELTANET, WLM_LAYERS_SHORTCONV };
/* The mixer of one layer (wlm_layer_weights.mixer): softmax attention over the KV cache, or a
 * recurrence with a fixed-size state per sequence (wlm_context's recurrent state). */
enum { WLM_MIX_ATTN, WLM_MIX_DELTANET, WLM_MIX_SHORTCONV };
/* The feed-forward of one layer (wlm_layer_weights.ffn_kind): the architecture's dense one
 * (wlm_arch.ffn), or a mixture of experts (moe.c). */
enum { WLM_FFN_KIND_DENSE, WLM_FFN_KIND_MOE };
/* How a mixture of experts turns its router's logits z into expert weights (llama.cpp's
 * llama_expert_gating_func_type, same values): softmax over all experts, sigmoid of each, or
 * (gpt-oss) the top k of the raw logits with a softmax over those k. */
enum { WLM_MOE_SOFTMAX = 1, WLM_MOE_SIGMOID = 2, WLM_MOE_SOFTMAX_CHOSEN = 3 };
/* An expert's activation: SiLU(gate) · up, gpt-oss's clamped SwiGLU (α 1.702, limit 7), or
 * GELU(gate) · up with ggml's GELU (the kernels' gelu; Gemma 4). */
enum { WLM_MOE_ACT_SILU, WLM_MOE_ACT_SWIGLU_OAI, WLM_MOE_ACT_GELU };
/* What the router of a mixture of experts reads: the feed-forward's normed input, or (Gemma 4)
 * RMSNorm of the stream without gain, times 1/sqrt(dim), times ffn_gate_inp.scale. */
enum { WLM_MOE_IN_FFN, WLM_MOE_IN_STREAM_SCALED };

typedef struct wlm_arch {
    const char *name;         /* general.architecture, and the prefix of its hyperparameter keys */
    int8_t norm;              /* WLM_NORM_*, for every norm of the model */
    int8_t act;               /* WLM_ACT_* of the feed-forward */
    int8_t ffn;               /* WLM_FFN_* */
    int8_t qkv;               /* WLM_QKV_* */
    int8_t rope;              /* WLM_ROPE_* */
    int8_t qkv_bias;          /* WLM_T_*: attn_q/k/v.bias (attn_qkv.bias when fused) */
    int8_t out_bias;          /* WLM_T_*: attn_output.bias */
    int8_t ffn_bias;          /* WLM_T_*: ffn_up.bias and ffn_down.bias */
    int8_t qk_norm;           /* WLM_T_*: attn_q_norm / attn_k_norm, RMSNorm of each head before RoPE */
    int8_t post_norms;        /* WLM_T_*: post_attention_norm / post_ffw_norm on each branch's
                                 output before its residual add */
    int8_t pos_embd;          /* 1: learned absolute positions (position_embd.weight) */
    int8_t embd_scale;        /* 1: embeddings scaled by sqrt(dim) (Gemma) */
    int8_t swa;               /* 1: sliding-window layers when attention.sliding_window > 0 (the
                                 Gemma 3 pattern: every 6th layer global) */
    int8_t rope_factors;      /* 1: LongRoPE rope_factors_long / _short (Phi-3) */
    int8_t rope_freqs;        /* 1: rope_freqs.weight frequency factors (Llama 3.1+) */
    int8_t gemma_attn_scale;  /* 1: Gemma 3's query scale (1/sqrt(dim/heads) for its 62-layer
                                 27B, else 1/sqrt(head size)) */
    int8_t softcap;           /* 1: final_logit_softcapping applies (Gemma 3 without SWA) */
    int8_t encoder;           /* 1: a BERT-family encoder (llama.cpp's llm_build_bert): bidirectional
                                 attention unless <arch>.attention.causal says otherwise, token_types
                                 row 0 added to the embedding, token_embd_norm after it, no norm
                                 before attention or the feed-forward but LayerNorms after each
                                 residual add (attn_output_norm, layer_output_norm), no output norm
                                 or classifier (hidden states out; cls / cls.output for ranking) */
    int8_t bidirectional;     /* 1: bidirectional attention unless <arch>.attention.causal says
                                 otherwise (an encoder row implies it); its sliding-window layers
                                 are symmetric (llama.cpp's LLAMA_SWA_TYPE_SYMMETRIC: positions
                                 within n_swa / 2 either side) */
    int8_t dense_out;         /* 1: optional dense_2 / dense_3 projections applied after pooling
                                 (Sentence Transformers' Dense modules, EmbeddingGemma) */
    int8_t layers;            /* WLM_LAYERS_*: which mixer each layer has (hybrids) */
    int8_t attn_gate;         /* 1: attn_q holds, per head, the query then as many gate rows;
                                 the attention output is multiplied by sigmoid(gate) (Qwen3.5) */
    int8_t rope_sections;     /* WLM_SECTIONS_*: rope.dimension_sections (multi-section RoPE)
                                 is required and says which position each rotated pair turns by
                                 (ggml's IMROPE interleaves the sections, MROPE lays them out one
                                 after another); for text the first three positions are the
                                 token's and the fourth is 0 */
    const char *ffn_norm_name;   /* the pre-feed-forward norm, default "ffn_norm" (Qwen3.5:
                                    "post_attention_norm") */
    const char *final_norm_name; /* the final norm, default "output_norm" (LFM2:
                                    "token_embd_norm") */
    int8_t per_layer;         /* 1: Gemma 4's per-layer shapes (llama.cpp: src/models/gemma4-iswa.cpp):
                                 sliding and full layers with their own head size, KV heads, RoPE
                                 width and base (rope_freqs on the full layers only), n_ff per
                                 layer, the last shared_kv_layers layers reading an earlier
                                 layer's KV cache, V = K where attn_v is absent, RMSNorm (no gain)
                                 of V, attention scale 1, per-layer embeddings and
                                 layer_output_scale, and the logit soft-cap always */
    int8_t nope_step;         /* n > 0: layer l applies no RoPE to Q and K when (l + 1) % n == 0
                                 (SmolLM3's NoPE layers: llama.cpp's n_no_rope_layer_step, 4,
                                 hard-coded, no GGUF key); 0: every layer rotates */
    int8_t attn_sinks;        /* WLM_T_*: attn_sinks.weight, one logit per head added to each
                                 softmax's normaliser, with no value (gpt-oss) */
    int8_t swa_period;        /* attention.sliding_window_pattern's default (0: 6, Gemma 3's;
                                 gpt-oss: 2, even layers windowed) */
    int8_t swa_rope_same;     /* 1: window layers turn as the others do (their base defaults to
                                 rope.freq_base, with the same scaling; gpt-oss), else by their
                                 own unscaled base (default 10000, Gemma 3) */
    /* mixture of experts (moe.c): the feed-forward of every layer from hp.n_dense_lead on */
    int8_t moe;               /* WLM_T_*: expert_count > 1 allowed (OPT) or required (REQ) */
    int8_t moe_gating;        /* WLM_MOE_* (the default when <arch>.expert_gating_func is absent) */
    int8_t moe_norm_w;        /* 1: the k chosen weights are divided by their sum (norm_topk_prob) */
    int8_t moe_act;           /* WLM_MOE_ACT_* */
    int8_t moe_router_bias;   /* WLM_T_*: ffn_gate_inp.bias added to the router's logits */
    int8_t moe_probs_bias;    /* WLM_T_*: exp_probs_b.bias added to the scores for the choice only */
    int8_t moe_exp_bias;      /* WLM_T_*: ffn_{gate,up,down}_exps.bias per expert */
    int8_t moe_router_in;     /* WLM_MOE_IN_*: the router's input (ffn_gate_inp.scale [dim]
                                 required with WLM_MOE_IN_STREAM_SCALED) */
    int8_t moe_gate_up;       /* 1: the experts' gate and up may instead be one fused
                                 ffn_gate_up_exps [dim, 2 F_exp, E] (each expert's first F_exp
                                 rows the gate, the next F_exp the up) */
    int8_t moe_out_scale;     /* WLM_T_*: ffn_down_exps.scale [E], each expert's output
                                 multiplied by its entry before the weighting */
    int8_t moe_dense_branch;  /* 1: a MoE layer keeps its dense feed-forward beside the experts:
                                 f = RMSNorm(dense(u), post_ffw_norm_1) + RMSNorm(moe(e),
                                 post_ffw_norm_2), u = RMSNorm(x, ffn_norm), e = RMSNorm(x,
                                 pre_ffw_norm_2) (Gemma 4's 26B-A4B) */
    int8_t rank_last_softmax; /* 1: a decoder reranker (Qwen3-Reranker: cls.output holds the
                                 lm_head rows of "yes" and "no"): rank pooling reads the last
                                 token and the scores are a softmax over cls.output's rows, as
                                 llama.cpp's build_pooling / llm_graph_input_cls for qwen3 */
} wlm_arch;

/* The row of arch.c's table named `name` (len bytes), or NULL. */
const wlm_arch *wlm_arch_find(const char *name, size_t len);
/* The names of the supported architectures, comma separated, for messages. */
const char *wlm_arch_list(void);

typedef struct wlm_hparams {
    int32_t dim;          /* transformer width */
    int32_t hidden_dim;   /* feed-forward width */
    int32_t n_layers;
    int32_t n_heads;
    int32_t n_kv_heads;
    int32_t vocab_size;
    int32_t seq_len;
    int32_t head_size;    /* attention.key_length (= value_length), default dim / n_heads */
    int32_t q_dim;        /* head_size * n_heads: the width of Q and of the attention output */
    int32_t kv_dim;       /* head_size * n_kv_heads */
    float norm_eps;       /* RMSNorm or LayerNorm epsilon: 1e-5 as in llama2.c */
    float rope_theta;     /* RoPE base frequency: 10000 (Llama 3: 500000) */
    int32_t n_rot;        /* RoPE: the first n_rot dimensions of each head rotate (even,
                             2..head_size); the rest pass through (llama.rope.dimension_count) */
    float rope_freq_scale; /* RoPE: 1 / the linear scaling factor (positions are divided by the
                             factor); 1 when unscaled */
    float rope_theta_swa; /* RoPE base of the sliding-window layers (Gemma 3: 10000) */
    float rope_attn_factor; /* rope.scaling.attn_factor: cos and sin are multiplied by it (ggml's
                             attn_factor; Phi-3.5's LongRoPE), 1 when absent */
    int32_t rope_yarn;    /* 1: YaRN (rope.scaling.type yarn): each pair's frequency blends the
                             scaled and the unscaled one by its ramp between the correction
                             dims of yarn_beta_fast / _slow, and cos and sin are multiplied by
                             1 + 0.1 ln(factor) (ggml's rope_yarn, ext_factor 1) */
    float yarn_beta_fast, yarn_beta_slow;
    int32_t n_ctx_orig;   /* rope.scaling.original_context_length: LongRoPE uses its long
                             factors when a context is longer (default seq_len) */
    int32_t n_swa;        /* sliding window: a window layer attends to positions pos - n_swa + 1
                             .. pos (llama.cpp's LLAMA_SWA_TYPE_STANDARD); 0 = none */
    float q_scale;        /* Q is multiplied by it before attention (whose kernel divides by
                             sqrt(head_size)); 1 = plain scaled dot-product */
    float embd_scale;     /* embeddings multiplied by it; 1 = none */
    float final_softcap;  /* logits = c · tanh(logits / c); 0 = none */
    int32_t bidirectional; /* 0: each position attends to itself and earlier ones (causal, the
                             default of every loader); 1: to every position of its sequence
                             (<arch>.attention.causal false; an encoder row's default) */
    int32_t pooling;      /* enum wlm_pooling from <arch>.pooling_type (llama.cpp's values);
                             WLM_POOLING_NONE when absent */
    int32_t n_cls_out;    /* rows of cls.output (a reranker's scores per text), 0 when absent */
    const wlm_arch *arch; /* the architecture's row of arch.c (llama2.c checkpoints: llama's) */
    /* hybrids: the recurrent layers' shapes (0 when the model has none) */
    int32_t n_attn_layers; /* layers with a KV cache (all of them in a plain transformer) */
    int32_t n_rec_layers;  /* layers with a recurrent state */
    int32_t ssm_conv;      /* DeltaNet: K, taps of the causal depthwise conv (ssm.conv_kernel);
                              short conv: L (shortconv.l_cache) */
    int32_t ssm_d;         /* DeltaNet: D, head size of its keys and values (ssm.state_size) */
    int32_t ssm_hk;        /* DeltaNet: HK key heads (ssm.group_count) */
    int32_t ssm_hv;        /* DeltaNet: HV value heads (ssm.time_step_rank), a multiple of HK */
    int32_t ssm_channels;  /* conv channels: DeltaNet 2 HK D + HV D; short conv dim */
    size_t state_floats;   /* recurrent state of one sequence, all layers: conv rows and
                              DeltaNet matrices (floats) */
    int32_t rope_sections[4]; /* rope.dimension_sections (IMROPE), zeros when absent */
    /* per-layer shapes (arch->per_layer, Gemma 4): head_size, q_dim, kv_dim, n_kv_heads and
     * hidden_dim above are then the largest of any layer (buffers are sized by them); each
     * layer's own are in its wlm_layer_weights */
    int32_t head_size_swa; /* head size of the sliding layers (attention.key_length_swa; = head_size
                              otherwise) */
    int32_t n_rot_swa;     /* rotated width of the sliding layers (rope.dimension_count_swa; =
                              n_rot otherwise); RoPE set 1's */
    int32_t n_shared_kv;   /* the last n_shared_kv layers keep no K/V of their own */
    int32_t n_ple;         /* per-layer-embedding width P (embedding_length_per_layer_input), 0:
                              none */
    size_t kv_elems;       /* K and V elements of one position over every layer owning a cache:
                              sum of 2 kv_dim (a KV block is WLM_KV_BLOCK of these) */
    /* mixture of experts (0 when the model has none) */
    int32_t n_expert;      /* experts per MoE layer (expert_count) */
    int32_t n_expert_used; /* k, experts chosen per token (expert_used_count) */
    int32_t expert_ff;     /* F_exp, each expert's hidden width (expert_feed_forward_length) */
    int32_t n_dense_lead;  /* leading layers with a dense feed-forward (leading_dense_block_count) */
    int32_t moe_gating;    /* WLM_MOE_* (expert_gating_func, else the architecture's) */
    int32_t moe_norm_w;    /* 1: the chosen weights divided by their sum (expert_weights_norm,
                              else the architecture's) */
    float moe_w_scale;     /* expert weights multiplied by it (expert_weights_scale), 1 = none */
} wlm_hparams;

/* A weight matrix: `rows` output features × `cols` input features, row-major, each row
 * `row_bytes` long in `type`'s encoding (ggml's ne[1] = rows, ne[0] = cols). A view: `data`
 * points into the model file's buffer. */
typedef struct wlm_tensor {
    int32_t type;                 /* enum wlm_type */
    int32_t rows;
    int32_t cols;
    size_t row_bytes;
    const void *data;
} wlm_tensor;

typedef struct wlm_layer_weights {
    const float *rms_att;         /* (dim) attention input norm */
    const float *rms_ffn;         /* (dim) feed-forward input norm */
    const float *att_norm_b;      /* (dim) LayerNorm biases, or NULL */
    const float *ffn_norm_b;      /* (dim) */
    wlm_tensor wq;                /* (q_dim, dim) */
    wlm_tensor wk;                /* (kv_dim, dim) */
    wlm_tensor wv;                /* (kv_dim, dim) */
    wlm_tensor wqkv;              /* (q_dim + 2 kv_dim, dim) fused Q, K, V rows (data NULL when
                                     the projections are separate) */
    const float *bq, *bk, *bv;    /* (q_dim), (kv_dim), (kv_dim) biases or NULL (fused: views
                                     into attn_qkv.bias) */
    const float *q_norm, *k_norm; /* (head_size) per-head RMSNorm weights, or NULL */
    wlm_tensor wo;                /* (dim, q_dim) */
    const float *bo;              /* (dim) or NULL */
    const float *post_att_norm;   /* (dim) or NULL */
    wlm_tensor w1;                /* (hidden_dim, dim): gate (data NULL when not gated) */
    wlm_tensor w2;                /* (dim, hidden_dim): down */
    wlm_tensor w3;                /* (hidden_dim, dim): up; (2 hidden_dim, dim) gate then up
                                     with WLM_FFN_FUSED_GATE_UP */
    const float *b_up, *b_down;   /* (hidden_dim), (dim) or NULL */
    const float *post_ffn_norm;   /* (dim) or NULL */
    int32_t swa;                  /* 1: a sliding-window layer (window n_swa, RoPE set 1) */
    int32_t no_rope;              /* 1: Q and K of this layer are not rotated (a NoPE layer,
                                     wlm_arch.nope_step) */
    const float *attn_out_norm, *attn_out_norm_b;   /* (dim) encoders: LayerNorm of the stream
                                                       after the attention's residual add */
    const float *layer_out_norm, *layer_out_norm_b; /* (dim) and after the feed-forward's */
    /* hybrids (the mixer is WLM_MIX_ATTN in every plain transformer) */
    int32_t mixer;                /* WLM_MIX_* */
    int32_t kv_slot;              /* attention: its index among the KV cache's layers; else -1 */
    size_t state_off;             /* recurrent: its state's offset in a sequence's state
                                     (floats): the conv rows ((ssm_conv - 1), ssm_channels), then
                                     for DeltaNet HV matrices of (D, D) */
    wlm_tensor ssm_in;            /* DeltaNet attn_qkv (2 HK D + HV D, dim): Q heads, K heads,
                                     V heads; short conv in_proj (3 dim, dim): B, C, x */
    wlm_tensor ssm_gate;          /* DeltaNet attn_gate (HV D, dim): the output gate z */
    wlm_tensor ssm_beta;          /* DeltaNet (HV, dim) */
    wlm_tensor ssm_alpha;         /* DeltaNet (HV, dim) */
    wlm_tensor ssm_out;           /* DeltaNet (dim, HV D); short conv out_proj (dim, dim) */
    const float *conv_w;          /* (ssm_channels, ssm_conv) taps per channel, the last one
                                     weighing the current token */
    const float *ssm_dt;          /* DeltaNet (HV) time-step bias */
    const float *ssm_a;           /* DeltaNet (HV) A = -exp(A_log) */
    const float *ssm_norm;        /* DeltaNet (D) gated RMSNorm weight, shared by the heads */
    /* this layer's shapes: the model's (hp) in every architecture but Gemma 4's */
    int32_t head_size, n_kv_heads; /* its head size and KV heads (n_heads query heads) */
    int32_t q_dim, kv_dim;        /* n_heads × head_size, n_kv_heads × head_size */
    int32_t n_rot;                /* its rotated width (RoPE set 1's on sliding layers) */
    int32_t hidden;               /* its feed-forward width (rows of w1 / w3) */
    float q_scale;                /* Q multiplied by it before attention (hp q_scale; Gemma 4:
                                     sqrt(head_size), for an attention scale of 1) */
    int32_t kv_own;               /* 1: computes and stores its own K and V; 0 (shared KV): only
                                     Q, attending to the cache of the layer kv_src */
    int32_t kv_src;               /* the layer whose cache it reads (itself when kv_own) */
    size_t kv_off;                /* elements into a KV block where its K rows begin (position
                                     slot s at + s kv_dim; V WLM_KV_BLOCK kv_dim further): kv_src's */
    int32_t v_is_k;               /* 1: no attn_v; V is K's projection, before K's norm (Gemma 4) */
    const float *v_norm;          /* (head_size) all ones: RMSNorm of each V head without gain
                                     (Gemma 4), or NULL */
    const float *out_scale;       /* (1) layer_output_scale: the stream is multiplied by it after
                                     the layer, or NULL */
    wlm_tensor ple_gate;          /* (n_ple, dim) per-layer embedding's inp_gate, data NULL when none */
    wlm_tensor ple_proj;          /* (dim, n_ple) its proj */
    const float *ple_norm;        /* (dim) its post_norm */
    const float *attn_sinks;      /* (n_heads) attention sink logits, or NULL */
    /* the feed-forward's kind; a mixture of experts (moe.c) reads the fields below instead of
     * w1 / w2 / w3. Each exp_* tensor describes expert 0's matrix; expert e's is the same view
     * e · rows · row_bytes bytes further (GGUF's 3-D [cols, rows, n_expert] tensors hold the
     * experts back to back, each row quantized on its own). */
    int32_t ffn_kind;             /* WLM_FFN_KIND_* */
    wlm_tensor moe_router;        /* (n_expert, dim) ffn_gate_inp */
    const float *moe_router_b;    /* (n_expert) or NULL */
    const float *moe_probs_b;     /* (n_expert) exp_probs_b: added to the scores for the choice */
    wlm_tensor exp_gate, exp_up;  /* (expert_ff, dim) per expert; with a fused
                                     ffn_gate_up_exps both are views of it (up F_exp rows
                                     further) and experts lie exp_gu_stride bytes apart */
    size_t exp_gu_stride;         /* bytes from one expert's gate (and up) to the next's */
    const float *moe_in_norm;     /* (dim) all ones: the router reads RMSNorm(stream) without
                                     gain (WLM_MOE_IN_STREAM_SCALED), or NULL */
    const float *moe_in_scale;    /* (dim) ffn_gate_inp.scale, or NULL */
    const float *exp_out_scale;   /* (n_expert) ffn_down_exps.scale, or NULL */
    const float *moe_pre_norm;    /* (dim) pre_ffw_norm_2: the experts' input norm (dense
                                     branch layers), or NULL */
    const float *moe_post_norm_1; /* (dim) post_ffw_norm_1: the dense branch's output norm */
    const float *moe_post_norm_2; /* (dim) post_ffw_norm_2: the experts' output norm */
    wlm_tensor exp_down;          /* (dim, expert_ff) per expert */
    const float *exp_gate_b, *exp_up_b; /* (n_expert, expert_ff) or NULL */
    const float *exp_down_b;      /* (n_expert, dim) or NULL */
} wlm_layer_weights;

typedef struct wlm_weights {
    wlm_tensor token_embedding;   /* (vocab_size, dim) */
    wlm_tensor pos_embedding;     /* (seq_len, dim) learned positions, data NULL when none */
    const float *rms_final;       /* (dim) */
    const float *final_norm_b;    /* (dim) or NULL */
    wlm_tensor wcls;              /* (vocab_size, dim); the embedding itself when shared */
    const float *rope_freqs;      /* (n_rot / 2) RoPE frequency factors (rope_freqs.weight: Llama
                                     3.1+ bakes its "llama3" scaling into them): frequency i is
                                     divided by rope_freqs[i]; NULL = all 1 */
    const float *rope_long;       /* (n_rot / 2) LongRoPE factors for contexts longer than
                                     n_ctx_orig, or NULL */
    const float *rope_short;      /* (n_rot / 2) LongRoPE factors otherwise, or NULL */
    wlm_layer_weights *layers;    /* (n_layers), allocated by the loader, owned by the model */
    wlm_tensor type_embd;         /* (token types, dim) encoders: row 0 is added to every
                                     embedding (llama.cpp: all tokens are type 0); data NULL when none */
    const float *embd_norm, *embd_norm_b; /* (dim) encoders: LayerNorm of the embedding, or NULL */
    wlm_tensor cls;               /* (dim, dim) a reranker's head: tanh(cls·x + cls_b), data NULL
                                     when none */
    const float *cls_b;           /* (dim) or NULL */
    wlm_tensor cls_out;           /* (n_cls_out, dim): scores = cls_out·h + cls_out_b, or NULL */
    const float *cls_out_b;       /* (n_cls_out) or NULL */
    wlm_tensor dense2;            /* (d2, dim) after pooling: h = dense3 · (dense2 · h), no bias or
                                     activation (llama.cpp's build_dense_out); data NULL when none */
    wlm_tensor dense3;            /* (dim, d2) */
    /* per-layer embeddings (Gemma 4, hp n_ple P > 0; data NULL otherwise) */
    wlm_tensor ple_embd;          /* (vocab_size, P n_layers) per_layer_token_embd */
    wlm_tensor ple_model_proj;    /* (P n_layers, dim) per_layer_model_proj */
    const float *ple_proj_norm;   /* (P) per_layer_proj_norm */
} wlm_weights;

struct wlm_model {
    int loaded;                   /* 1 after a successful wlm_model_load */
    wlm_hparams hp;
    wlm_weights w;
    int shared_classifier;
    size_t weight_bytes;
    void *owned_buffer;           /* freed with the model (WLM_LOAD_OWN_BUFFER) */
    float *owned_floats;          /* norm weights converted to F32 by a loader, or NULL */
    int has_tokenizer;
    int vocab_only;               /* WLM_LOAD_VOCAB_ONLY: a tokenizer and no weights (hp zero
                                     except vocab_size, so a context has n_ctx 0) */
    int tensors_external;         /* WLM_LOAD_TENSORS_EXTERNAL: the matrices are held by another
                                     backend; their views point at external_marks (one byte per
                                     tensor, never read) and only deferred contexts are made */
    int tensors_pending;          /* ... and the resident vectors are not read in yet
                                     (wlm_model_commit_external clears it) */
    unsigned char *external_marks;
    const unsigned char *external_buf; /* the header + resident area buffer, and its size */
    size_t external_size;
    wlm_tokenizer tok;
    int32_t *suppress;            /* (n_suppress) tokenizer.ggml.suppress_tokens: ids whose logits
                                     are always -inf (Gemma 4), or NULL */
    int32_t n_suppress;
    /* The GGUF file's STRING key/values, copied at load (the GGUF tables do not outlive the
     * loader, and a vocab-only load may not keep the buffer): n_meta pairs of NUL-terminated
     * key and value in meta_blob, at meta_off[2i] and meta_off[2i+1]; value i is meta_len[i]
     * bytes (values may hold NUL bytes). */
    int32_t n_meta;
    char *meta_blob;
    size_t *meta_off;             /* (2 × n_meta) */
    size_t *meta_len;             /* (n_meta) */
    char errmsg[WLM_ERRMSG_SIZE];
};

/* model.c, after a loader: fills each layer's shapes the loader left 0 with the model's (every
 * architecture but Gemma 4's), lays out the KV cache (kv_off of each layer owning one; a
 * shared-KV layer takes its source's kv_off and kv_slot) and sets hp kv_elems. */
void wlm_layer_shapes_finish(wlm_model *m);

/* Copies every STRING key/value of g into the model (gguf_model.c). */
int wlm_model_copy_meta(wlm_model *m, const wlm_gguf *g);

/* Paged KV cache: a pool of blocks of WLM_KV_BLOCK positions, elements of `type` (F32 or F16,
 * elem_bytes each). Block b holds, for each layer l owning a cache, K rows then V rows, counted
 * in elements: base(b) + layer l's kv_off (K, position slot s at + s * kv_dim) and + BLOCK *
 * kv_dim further (V), kv_dim being that layer's. Blocks are reference-counted; ref 0 = on the
 * free list. */
typedef struct wlm_kv_pool {
    int32_t type;                 /* enum wlm_kv_type */
    size_t elem_bytes;            /* 4 (F32) or 2 (F16) */
    size_t block_bytes;           /* WLM_KV_BLOCK * hp kv_elems * elem_bytes */
    unsigned char **base;         /* (cap) block memory */
    int32_t *ref;                 /* (cap) sequences referencing the block */
    int32_t *free_ids;            /* (cap) stack of free block ids */
    int32_t n_free;
    int32_t n_alloc;              /* blocks created so far (ids 0..n_alloc-1) */
    int32_t cap;                  /* capacity of the arrays above */
    unsigned char **chunks;       /* allocations holding the blocks */
    int32_t n_chunks, chunk_cap;
} wlm_kv_pool;

/* Snapshots of a recurrent state kept per sequence: at the end of the last prompt, at its
 * checkpoint (wlm_gen_params.checkpoint: where a chat's last turn ends), and before the last
 * speculative verification. */
#define WLM_STATE_SNAPS 3
enum { WLM_SNAP_PROMPT, WLM_SNAP_CHECKPOINT, WLM_SNAP_SPEC };

/* One sequence: its tokens and its table of KV blocks (position p is in blocks[p / BLOCK]). */
typedef struct wlm_seq {
    int32_t n_past;               /* tokens with K/V in the cache */
    int32_t n_blocks;             /* entries of `blocks` in use */
    int32_t *blocks;              /* (max_blocks) */
    int32_t *tokens;              /* (n_ctx) */
    float *state;                 /* recurrent models: (state_floats) the layers' state after
                                     position n_past - 1 (zero at n_past 0); allocated on first
                                     use, NULL before */
    float *snap[WLM_STATE_SNAPS]; /* copies of the state taken at positions snap_pos[i] (-1:
                                     none), where a later request may resume (the end of a
                                     prompt, the start of a speculative round): a state cannot be
                                     cut back, so truncation restores the latest snapshot at or
                                     before the cut and replays the tokens after it */
    int32_t snap_pos[WLM_STATE_SNAPS];
    int32_t *rnext;               /* M-RoPE models only (arch rope_sections MROPE), else NULL:
                                     (n_ctx) the temporal RoPE position the token after slot i
                                     takes. A text token at slot i turns by p = rnext[i - 1] (0
                                     at slot 0) in every section and sets rnext[i] = p + 1; the
                                     rows of an image of gw × gh merged tokens placed at p turn
                                     by (p, p + row, p + column) and set p + max(gw, gh), as
                                     llama.cpp's mtmd (so slot i and RoPE position part ways
                                     after an image) */
    int32_t exact;                /* K/V of positions < exact equal a fresh prefill of tokens[]:
                                     n_ctx until a context shift lowers it to its n_keep (later
                                     rows were computed over the discarded tokens) */
} wlm_seq;

/* Generation state of one sequence. */
typedef struct wlm_generation {
    int active;                   /* begun and not finished */
    int done;                     /* WLM_DONE reported (or pending) */
    int32_t stop_reason;
    int32_t pending;              /* emitted token not yet evaluated, -1 if none */
    int32_t n_generated;
    int32_t max_tokens;
    int32_t n_prompt;
    int32_t prev;                 /* previous token, for piece decoding */
    int32_t logit_entry;          /* entry of the last evaluation holding this one's logits */
    int32_t join_from;            /* a sequence joining a running batch: the positions its slot
                                     already holds (a prefilled media prompt's), 0 for a text one */
    int context_shift;
    int32_t n_keep;
    int n_stop;
    char stop[WLM_MAX_STOP_STRINGS][WLM_MAX_STOP_LEN];
    size_t stop_len[WLM_MAX_STOP_STRINGS];
    char *held;                   /* text held back while it may begin a stop string */
    size_t held_len;
    size_t held_cap;
    char *out;                    /* text released by the current step */
    size_t out_cap;
    wlm_sampler sampler;
} wlm_generation;

/* Beam search state (beam.c). */
typedef struct wlm_beam_hyp {
    int32_t *tokens;              /* (max_tokens) */
    int32_t n_tokens;
    double logprob;
    double score;
    int32_t stop_reason;
} wlm_beam_hyp;

typedef struct wlm_beam_state {
    int active, done;
    int32_t width, max_tokens;
    float length_penalty;
    int32_t n_prompt;
    int32_t n_live;               /* live beams: sequences live_seq[i] */
    int32_t live_seq[WLM_MAX_SEQ / 2];
    int32_t live_entry[WLM_MAX_SEQ / 2]; /* their logits in the last evaluation */
    int32_t bank;                 /* live beams use sequences bank*W .. bank*W + W-1 */
    int32_t n_steps;
    size_t kv_peak, kv_unshared_peak; /* bytes: blocks in use, and sum of block tables */
    wlm_beam_hyp live[WLM_MAX_SEQ / 2];
    wlm_beam_hyp next[WLM_MAX_SEQ / 2];
    int32_t n_fin;
    wlm_beam_hyp fin[WLM_MAX_SEQ / 2];
    int32_t *cand_tok;            /* scratch (width * 2 * width) */
    int32_t *cand_beam;
    double *cand_lp;
    int32_t *cand_order;
    float *lsm;                   /* (vocab) log-softmax scratch */
    int32_t *tokbuf;              /* backing store of every hypothesis' tokens */
    wlm_gram *gram;               /* the grammar of the search (NULL: none), owned */
    wlm_gram_matcher *gm_live[WLM_MAX_SEQ / 2]; /* each live beam's parse state, owned */
    uint8_t *gmask;               /* (vocab) allowed tokens of one beam, with a grammar */
} wlm_beam_state;

/* Largest number of batch entries one forward pass computes; longer batches run in chunks
 * (a non-causal model's context holds n_ctx entries instead: see batch_cap). */
#define WLM_BATCH_CHUNK 64
/* The same for a model with mixture-of-experts layers: each expert sees about n k / n_expert of
 * a pass's n entries, and its matrix products amortize unpacking and reading its weights over
 * those (8 of 64 for gpt-oss-20b's 32 experts, k 4); larger passes give each expert more. 256
 * gained a little more than 128 but doubled the activations again, which took a 3.8 GB file
 * (Gemma 4 26B-A4B, 6 of 30 blocks) out of wasm32. */
#define WLM_BATCH_CHUNK_MOE 128
/* context.c: wlm_eval_embd for an image of gw × gh merged tokens (n = gw·gh rows, raster
 * order): on an M-RoPE model (qwen2vl) its rows turn by llama.cpp's 2-D positions (see
 * wlm_seq.rnext); gw = gh = 0, or another model: wlm_eval_embd. */
int wlm_eval_embd_grid(wlm_context *ctx, int32_t seq, const float *embd, int32_t n,
                       int32_t n_embd, int32_t non_causal, int32_t gw, int32_t gh);

/* The id a sequence records for a position whose input was an embedding row (wlm_eval_embd):
 * no token, so prompt-cache matching never reuses it. */
#define WLM_TOKEN_EMBD (-1)

struct wlm_context {
    const wlm_model *model;
    int32_t n_ctx;
    int kv_cache;
    const wlm_kernels *k;
    int use_simd;                 /* pick traits' matvec_simd over matvec_ref */
    int dot_split;                /* relaxed build, WLM_DOT_SPLIT: wlm_quant_matvec_split's kernels */
    int dot_split_batch;          /* the same for the matrix-matrix ones (dot_form_batch) */
    int read_ahead;               /* wlm_context_params.read_ahead: 0 picks the matrix-vector
                                     kernels without read-ahead (wlm_quant_matvec_near) */
    wlm_threadpool *pool;         /* borrowed; NULL: matrix products on the calling thread */
    int32_t n_seq_max;
    int32_t max_blocks;           /* blocks per full sequence: ceil(n_ctx / BLOCK) */
    wlm_seq *seqs;                /* (n_seq_max) */
    wlm_kv_pool kv;
    /* activations for a chunk of up to WLM_BATCH_CHUNK entries, row-major (entry, feature) */
    float *x;                     /* (B, dim) residual stream */
    float *xb;                    /* (B, max(dim, q_dim)) */
    float *xb2;                   /* (B, dim) */
    float *hb;                    /* (B, hidden_dim); (B, 2 hidden_dim) with a fused gate/up */
    float *hb2;                   /* (B, hidden_dim) */
    float *q;                     /* (B, q_dim) */
    float *qkv;                   /* (B, q_dim + 2 kv_dim) fused projections, or NULL */
    float *kt;                    /* (B, kv_dim) new keys */
    float *vt;                    /* (B, kv_dim) new values */
    float *att;                   /* wlm_attention_scratch(n_heads, n_ctx, head_size): the
                                     attention kernel's scratch, split by heads among threads */
    float *qg;                    /* (B, 2 q_dim) gated attention's projection (query and gate
                                     rows of each head), or NULL */
    float *gate;                  /* (B, q_dim) its gates, or NULL */
    float *rs_in;                 /* (B, ssm_in rows) a recurrent layer's input projection */
    float *rs_z;                  /* (B, HV D) DeltaNet's output gate */
    float *rs_ba;                 /* (B, 2 HV) DeltaNet's beta, then alpha (decay) per head */
    float *rs_o;                  /* (B, max(HV D, dim)) the recurrence's output */
    float *ple;                   /* (B, n_ple n_layers) each entry's per-layer inputs (Gemma 4),
                                     or NULL */
    float *ple_h;                 /* (B, n_ple) a layer's gated per-layer input, and (n_ple
                                     n_layers) a token's per_layer_token_embd row; or NULL */
    /* mixture of experts (moe.c), NULL without: R = B · n_expert_used rows, one per (entry,
     * chosen expert), grouped by expert */
    float *moe_logits;            /* (B, n_expert) router logits, then scores */
    int32_t *moe_ids;             /* (B, k) chosen experts, best first */
    float *moe_w;                 /* (B, k) their weights */
    int32_t *moe_row;             /* (B, k) the grouped row of each (entry, slot) */
    int32_t *moe_first;           /* (n_expert + 1) each expert's first grouped row */
    float *moe_x;                 /* (R, dim) inputs gathered by expert */
    float *moe_h, *moe_h2;        /* (R, expert_ff) gate, up activations */
    float *moe_y;                 /* (R, dim) expert outputs */
    void *moe_xq;                 /* (2 R, xq_stride bytes) their quantized inputs */
    void *xq;                     /* (B, xq_stride bytes) activations in a vec_dot_type */
    size_t xq_stride;
    int32_t xq_type;              /* the vec_dot_type xq holds the last product's input in
                                     (forward.c's matmul_ex), WLM_TYPE_F32: none */
    int32_t n_rope_sets;          /* 1, or 2 with sliding-window layers (their own base) */
    float *rope_cos, *rope_sin;   /* (n_rope_sets, B, rope_half) angles of each entry's position */
    float *rope_freq;             /* (n_rope_sets, rope_half) radians per position of each pair */
    int32_t rope_half;            /* max(n_rot, n_rot_swa) / 2: the tables' row length */
    float rope_mscale;            /* cos and sin are multiplied by it (rope_attn_factor) */
    const void **kb, **vb;        /* (kb_cap) block pointers of one sequence and layer (to float
                                     or uint16_t elements, as kv.type); a sliding-window layer
                                     lists one row per position of its window instead */
    int32_t kb_cap;
    int32_t *ent_seq, *ent_pos;   /* (B) */
    int32_t *ent_rpos;            /* (B, 3) M-RoPE models only: each entry's temporal, height and
                                     width positions (wlm_seq.rnext), else NULL */
    int32_t in_img_gw, in_img_gh; /* wlm_eval_embd on an M-RoPE model: the image's merged grid
                                     (0: its rows are placed as text tokens are) */
    int32_t in_img_row;           /* ... and the image row of the next entry */
    int32_t batch_cap;            /* B: entries one forward pass holds (chunk; n_ctx for a
                                     non-causal model, whose sequences pass whole) */
    int32_t chunk;                /* entries per pass of a longer causal batch: WLM_BATCH_CHUNK,
                                     or WLM_BATCH_CHUNK_MOE with experts (<= batch_cap) */
    int32_t *ent_len;             /* (B) non-causal passes (embed.c): positions entry i attends to
                                     (its whole sequence); NULL: causal, pos + 1 */
    const float *in_embd;         /* wlm_eval_embd: when set, entry i's input is row i of this
                                     (n, dim) array instead of its token's embedding (no Gemma
                                     sqrt(dim) scale: llama.cpp scales token embeddings only) */
    int32_t image_batch;          /* wlm_eval_embd's non-causal image: with ent_len, a window
                                     layer looks back n_swa from each entry's own position (as a
                                     causal pass) and forward to ent_len (llama.cpp's SWA mask
                                     with causal attention off), not the symmetric window */
    float *hidden;                /* embed.c: when set, wlm_forward_batch writes every entry's
                                     final hidden state here ((n, dim), after the output norm when
                                     the model has one) instead of logits */
    /* logits of the last evaluation: one row per entry that asked for them */
    float *logits;                /* (logits_cap, vocab) */
    int32_t logits_cap;
    int32_t *logit_row;           /* (n_entries_cap) row of entry i, -1 for none */
    int32_t n_entries_cap, n_entries;
    int32_t last_logits;          /* entry whose logits wlm_logits returns, -1 before any */
    size_t bytes;                 /* scratch bytes (KV blocks counted separately) */
    size_t pass_bytes;            /* of which one pass's buffers (context.c pass_buffers) */
    size_t state_bytes;           /* recurrent states and their snapshots allocated so far */
    int32_t last_restore;         /* the position the last truncation of a recurrent state
                                     restored (a snapshot's, or 0), before its replay; -1: none */
    /* a speculative verification's rollback of a recurrent state (context.c's "rollback"):
     * WLM_ROLL_POSITIONS keeps the state after each verified position, so a rejection picks one
     * with no replay; WLM_ROLL_REPLAY restores the snapshot taken before and replays */
    int32_t roll_mode;            /* WLM_ROLL_*: WLM_ROLL_AUTO (0) unless a benchmark sets it */
    int32_t roll_seq;             /* the sequence with a record, -1: none */
    int32_t roll_pos0;            /* roll_slot[i] holds the state after position roll_pos0 + i */
    int32_t roll_n;               /* recorded positions (the verified entries but the last) */
    int32_t roll_end;             /* the sequence's n_past when the record was complete */
    uint32_t roll_stamp;          /* n_passes then: the record holds only while no pass ran */
    uint32_t n_passes;            /* forward passes run (forward.c counts them) */
    int roll_rec;                 /* 1 while the verification's forward pass records */
    float **roll_slot;            /* (roll_cap) states of state_floats each, allocated on use */
    int32_t roll_cap;
    /* generation: one state per sequence */
    wlm_generation *gens;         /* (n_seq_max) */
    int32_t n_gen;                /* sequences in the current generation (0 = none) */
    int32_t n_cached;             /* prompt tokens the last begin kept in the KV cache */
    int prefilling;               /* vision/sequence.c evaluates a sequence joining a running
                                     batch (wlm_generate_batch_add_media): evaluation allowed */
    int gen_aborted;
    wlm_beam_state beam;
    wlm_gram_vocab *gram_vocab;   /* the vocabulary's token trie for grammars, built on first
                                     use (grammar_vocab.c), freed with the context */
    /* deferred forward pass (runtime/deferred.c): another backend (js/backend/webgpu/) runs the
     * transformer and keeps the KV cache; evaluation records the batch and the caller supplies
     * the logits before anything reads them */
    int deferred;                 /* 1 (wlm_context_params.kv_cache 2): run_entries records
                                     instead of running forward.c; no KV blocks here */
    int32_t *dfr_tok, *dfr_seq, *dfr_pos; /* (dfr_cap) the recorded batch, in entry order */
    int32_t *dfr_len;             /* (dfr_cap) positions each entry attends to: 0 causal (its
                                     position + 1), else the end of its non-causal image */
    int32_t *dfr_erow;            /* (dfr_cap) an image row's input: its row in dfr_embd; -1 a
                                     token (its embedding gathered) */
    int32_t *dfr_rpos;            /* (3 dfr_cap) M-RoPE models only (wlm_seq.rnext): each
                                     entry's temporal, height and width RoPE positions
                                     (wlm_mrope_pos), an image row's grid ones included */
    int32_t dfr_cap;
    int32_t dfr_n;                /* entries waiting for their logits (0: none) */
    float *dfr_embd;              /* (dfr_embd_cap rows of dim) the recorded image rows, copied
                                     (the encoding may be freed before the batch runs) */
    int32_t dfr_embd_n, dfr_embd_cap;
    int32_t dfr_last[WLM_MAX_SEQ]; /* a batch of media prompts recorded (vision/sequence.c):
                                     each sequence's last token, evaluated by the batch's
                                     begin once the backend ran the prompts (dfr_last_n of
                                     them; 0: none pending); -1: a media prompt recorded whole,
                                     cut before its last token once the backend ran it (a
                                     hybrid's state snapshot there taken by then) */
    int32_t dfr_last_n;
    int32_t dfr_join;             /* a media sequence joining a running batch, recorded
                                     (wlm_generate_batch_add_media on a deferred context): its
                                     slot + 1, waiting for the backend to run its prompt and for
                                     wlm_generate_batch_add_media_finish; 0: none */
    int dfr_accum;                /* 1: each record appends to the pending batch, wanting no
                                     logits (vision/sequence.c: a whole media prompt, its text
                                     and image rows, becomes one batch for the backend) */
    int32_t dfr_shift[WLM_MAX_SEQ][3]; /* per sequence, a context shift the backend has yet to
                                     apply to its cache (wlm_seq_shift_internal): n_keep,
                                     n_discard (0: none), and the sequence's length before it;
                                     applied before the next recorded batch runs, cleared with
                                     its logits */
    int32_t dfr_fork[WLM_MAX_SEQ][3]; /* forks the backend has yet to apply (beam search,
                                     wlm_seq_fork_internal): source, destination, the rows
                                     0..n-1 to copy; at most one per destination (a later one
                                     replaces it), applied in order before the shifts and the
                                     next recorded batch, cleared with its logits */
    int32_t dfr_n_fork;
    int32_t dfr_restore[WLM_MAX_SEQ][2]; /* a hybrid's sequences (deferred.c): a recurrent state
                                     the backend restores before the sequence's next entries:
                                     snapshot slot (-1: the empty state) and the position it
                                     holds (-1: none pending); the backend replays the stored
                                     tokens from there up to the entries' first position, and
                                     marks it applied (position -1) */
    int32_t dfr_snap[WLM_MAX_SEQ][WLM_STATE_SNAPS]; /* per sequence and snapshot slot, the
                                     position whose state the backend copies into that slot
                                     when its sequence reaches it (-1: none pending; the backend
                                     marks a copy it took -1): a slot restores only once taken */
    int dfr_exact;                /* 1: the recorded batch's logits must equal one-token
                                     evaluations bit for bit (a speculative round's
                                     verification, whose greedy tokens must be plain greedy
                                     decoding's); 0 after each record */
    int dfr_resume;               /* 1: wlm_generate_batch_next returned WLM_NEED_LOGITS */
    uint8_t dfr_want[WLM_MAX_SEQ];/* the sequences its sampling phase will draw for */
    struct wlm_spec_state *spec;  /* speculative decoding (speculative.c): NULL until the first
                                     wlm_generate_speculate, then kept (its buffers reused) */
    char errmsg[WLM_ERRMSG_SIZE];
};

/* Internal status: wlm_generate_batch_next (deferred context) recorded a batch; the caller
 * writes its logits (wlm_deferred_logits), then calls wlm_generate_batch_resume. */
#define WLM_NEED_LOGITS 2

/* Formats an error into a handle's message buffer; returns `status` for tail calls. */
int wlm_set_error(char *buf, int status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* forward.c: runs the transformer for n <= c->batch_cap entries (c->ent_seq/ent_pos set,
 * KV blocks for every position already owned by its sequence); writes K/V rows and, for
 * entries with logit_rows[i] >= 0, the logits into that row of c->logits. */
void wlm_forward_batch(wlm_context *c, const int32_t *tokens, int32_t n,
                       const int32_t *logit_rows);

/* forward.c: fills c->rope_freq (every RoPE set) and c->rope_mscale from the model and the
 * context's n_ctx (LongRoPE picks its factors by it). Called once by wlm_context_new. */
void wlm_rope_init(wlm_context *c);

/* forward.c: WLM_OK when a context shift can be right for this model, else WLM_ERR_UNSUPPORTED
 * with a message in err (WLM_ERRMSG_SIZE): learned positions are baked into K and V, and
 * sliding-window layers would see again tokens that had left their window. */
int wlm_shift_supported(const wlm_model *m, char *err);

/* forward.c: a context shift's rotation: wlm_rope_shift_prepare puts the cos/sin of -n
 * positions of every RoPE set into c->rope_cos/sin; wlm_rope_shift_k then rotates the K row `k`
 * (kv_dim floats) of layer l by them, in the model's RoPE style and that layer's set. */
void wlm_rope_shift_prepare(wlm_context *c, int32_t n);
void wlm_rope_shift_k(wlm_context *c, int32_t layer, float *k);

/* forward.c: out(n, t->rows) = x(n, t->cols) · tᵀ through t's type traits; rows of out and x are
 * out_stride / x_stride floats apart. Each entry's result equals a matrix-vector product. */
void wlm_matmul(wlm_context *c, float *out, size_t out_stride, const wlm_tensor *t,
                const float *x, size_t x_stride, int32_t n);

/* forward.c: wlm_matmul, where `same_input` says x is the previous product's input, unchanged
 * (its quantized form in c->xq is then reused). */
void wlm_matmul_ex(wlm_context *c, float *out, size_t out_stride, const wlm_tensor *t,
                   const float *x, size_t x_stride, int32_t n, int same_input);

/* forward.c: several products at once, split by rows over the pool as one job (moe.c: every
 * expert a batch needs, each on its own rows): seg[i].out(n, t.rows) = seg[i].x(n, t.cols) ·
 * seg[i].tᵀ, each row computed exactly as wlm_matmul would. Inputs are quantized to each
 * weight's vec_dot_type into xq (rows xq_stride bytes apart, one row per input row of every
 * segment, twice that at most: a segment whose x and vec_dot_type equal the previous one's
 * reuses its rows). Every t.rows must be even. */
typedef struct wlm_matmul_seg {
    float *out;
    size_t out_stride;
    wlm_tensor t;
    const float *x;
    size_t x_stride;
    int32_t n;
} wlm_matmul_seg;
void wlm_matmul_segs(wlm_context *c, const wlm_matmul_seg *seg, int32_t n_seg, void *xq,
                     size_t xq_stride);

/* moe.c: the mixture-of-experts feed-forward of layer lw for the batch's n entries:
 * out(n, dim) from the normed input x(n, dim) (rows dim floats apart; out may be x); stream
 * (n, dim), the residual stream, is the router's input under WLM_MOE_IN_STREAM_SCALED. */
void wlm_moe_ffn(wlm_context *c, const wlm_layer_weights *lw, float *x, const float *stream,
                 float *out, int32_t n);

/* recurrent.c: a recurrent layer's mixer (lw->mixer DeltaNet or short conv) for the batch's n
 * entries (c->ent_seq set; each sequence's state allocated): out(n, dim) from the normed input
 * xb(n, ·), rows os / xs floats apart; advances each entry's sequence state by its token. */
void wlm_recurrent_mix(wlm_context *c, const wlm_layer_weights *lw, const float *xb, size_t xs,
                       float *out, size_t os, int32_t n);

/* context.c: the K row of position `pos` of sequence `seq` in layer l (of the layer whose
 * cache it reads), the layer's kv_dim elements of c->kv.type (V is WLM_KV_BLOCK * kv_dim
 * elements further). */
void *wlm_kv_row(wlm_context *c, int32_t seq, int32_t layer, int32_t pos);

/* context.c: stores n floats into a KV row of c->kv.type (F16: rounded to nearest even). */
void wlm_kv_store(const wlm_context *c, void *row, const float *x, int32_t n);

/* context.c (recurrent models): sequence seq's state allocated and empty (position 0), its
 * snapshots dropped; WLM_ERR_NOMEM with a message. Nothing for a transformer. */
int wlm_state_reset(wlm_context *c, int32_t seq);

/* context.c (recurrent models): a copy of sequence seq's state at its n_past into snapshot
 * `slot` (WLM_SNAP_*); out of memory leaves no snapshot (truncation then replays further). */
void wlm_state_snapshot(wlm_context *c, int32_t seq, int slot);

/* The rollback of a speculative verification on a recurrent state (context.c). WLM_ROLL_REPLAY:
 * a snapshot before the verification (WLM_SNAP_SPEC); a rejection restores it and replays the
 * accepted tokens. WLM_ROLL_POSITIONS: the verification's forward pass keeps a copy of the state
 * after each of its positions but the last (recurrent.c writes them), and a rejection takes the
 * copy of the last kept position: no replay. WLM_ROLL_AUTO picks by wlm_state_roll_choose. */
enum { WLM_ROLL_AUTO, WLM_ROLL_REPLAY, WLM_ROLL_POSITIONS };
/* The strategy WLM_ROLL_AUTO takes for a verification of n entries: WLM_ROLL_POSITIONS when its
 * n - 1 copies of the state take at most 1 / WLM_ROLL_WEIGHT_RATIO of the model's weight bytes
 * (copying them then costs less than the replay's pass over the weights) and at most
 * WLM_ROLL_MAX_BYTES, else WLM_ROLL_REPLAY; c->roll_mode when it is not AUTO. */
#define WLM_ROLL_WEIGHT_RATIO 2
#define WLM_ROLL_MAX_BYTES ((size_t)256 << 20)
int wlm_state_roll_choose(const wlm_context *c, int32_t n);
/* Before a verification of n entries of sequence seq from its n_past: the snapshot, or the
 * record armed (its copies allocated; out of memory falls back to the snapshot). Nothing for a
 * transformer or a deferred context. Returns the strategy taken (WLM_ROLL_*; AUTO: nothing). */
int wlm_state_roll_begin(wlm_context *c, int32_t seq, int32_t n);
/* After the verification's forward pass: recording stops (the record stays until dropped). */
void wlm_state_roll_recorded(wlm_context *c);
/* The record dropped (after the round's truncation, or a failed pass). */
void wlm_state_roll_drop(wlm_context *c);
/* recurrent.c: where entry b's state copy of the layer at state offset `off` goes, or NULL when
 * the pass records none for it. */
static inline float *wlm_roll_dst(const wlm_context *c, int32_t b, size_t off) {
    if (!c->roll_rec || c->ent_seq[b] != c->roll_seq) return NULL;
    const int32_t i = c->ent_pos[b] - c->roll_pos0;
    return i >= 0 && i < c->roll_n ? c->roll_slot[i] + off : NULL;
}

/* context.c: makes sure sequence `seq` owns (unshared) blocks for positions [from, to);
 * copies shared blocks (copy-on-write). WLM_ERR_NOMEM with a message on failure. */
int wlm_kv_reserve(wlm_context *c, int32_t seq, int32_t from, int32_t to);

/* context.c: internal versions without the "generation in progress" check. */
void wlm_seq_fork_internal(wlm_context *c, int32_t src, int32_t dst);
/* wlm_context_reset, except that sequence 0 keeps its first `keep` positions (at most its
 * n_past and its exact prefix): the KV cache a new prompt with that prefix can reuse. */
void wlm_context_reset_keep(wlm_context *ctx, int32_t keep);
int wlm_seq_shift_internal(wlm_context *c, int32_t seq, int32_t n_keep, int32_t n_discard);
/* wlm_seq_truncate without the checks (n may exceed n_past: nothing happens). */
void wlm_seq_truncate_internal(wlm_context *c, int32_t seq, int32_t n);
/* Empties sequence i's cache and snapshots (generate.c). */
void wlm_seq_release(wlm_context *c, int32_t i);
/* Batches whose prompts the caller evaluates into the sequences (vision/sequence.c's media
 * prompts; generate.c), all of each prompt but its last token, which must be a token:
 * wlm_generate_batch_begin_prefilled begins a batch on sequences 0..n_seqs-1 as they stand,
 * last[i] and params[i] each, the last tokens evaluated together in one pass.
 * wlm_batch_add_slot checks that a running batch can take a prefilled sequence (none waits to
 * sample its first token from the logits the prefill would replace) and returns a free slot,
 * emptied, to evaluate the prompt into; wlm_batch_add_prefilled then joins it (its last token
 * evaluated in the next step's pass) and returns the slot, or on error empties it. */
int wlm_generate_batch_begin_prefilled(wlm_context *ctx, int32_t n_seqs, const int32_t *last,
                                       const wlm_gen_params *params);
/* The checks wlm_generate_batch_begin and wlm_generate_batch_begin_media make first, in this
 * order: ctx has a model; args_ok (their pointers are there, else WLM_ERR_INVALID_ARG with the
 * message bad_args); n_seqs in 1..n_seq_max; more than one sequence only with a KV cache.
 * Returns WLM_OK, or the status with ctx's message set. */
int wlm_batch_begin_check(wlm_context *ctx, int32_t n_seqs, int args_ok, const char *bad_args);
int32_t wlm_batch_add_slot(wlm_context *ctx);
int wlm_batch_add_prefilled(wlm_context *ctx, int32_t slot, int32_t last, const wlm_gen_params *params);

/* generate.c, for speculative.c: ends sequence i's generation with `reason` (held text
 * released into *out); and emits token `next` of sequence i as wlm_generate_next does after
 * sampling it (end-of-generation check, piece, stop strings, out->id / piece / status; the
 * caller fills prob, logprob, prob_sampled), leaving it pending: to be evaluated next step. */
void wlm_gen_finish(wlm_context *c, int32_t i, wlm_token *out, int32_t reason);
int wlm_gen_emit(wlm_context *c, int32_t i, int32_t next, wlm_token *out);

/* speculative.c: frees the state (NULL is fine); ends speculation (a new generation begins
 * without it); and wlm_generate_next's body while speculation is on, which in a deferred
 * context returns WLM_NEED_LOGITS when it recorded a round's verification; wlm_spec_awaiting
 * says so, and wlm_spec_resume (called by wlm_generate_batch_resume once the logits are
 * supplied) decides the round and emits its first token: wlm_generate_next's return value. */
void wlm_spec_free(struct wlm_spec_state *s);
void wlm_spec_end(wlm_context *c);
int wlm_spec_next(wlm_context *c, wlm_token *out);
int wlm_spec_awaiting(const wlm_context *c);
int wlm_spec_resume(wlm_context *c, wlm_token *out);

/* describe.c: the model as JSON (architecture row, hyperparameters, each weight as
 * [type, rows, cols, row_bytes, address]) into buf (cap bytes, NUL-terminated, truncated when
 * short); returns the full length without the NUL, or -1 for a model without weights. */
int64_t wlm_model_describe(const wlm_model *m, char *buf, size_t cap);
/* deferred.c: records n entries (tokens[i] on sequence seq_ids[i], or 0) at each sequence's
 * next positions and advances the sequences; c->logit_row is set by the caller. */
int wlm_deferred_record(wlm_context *c, const int32_t *tokens, const int32_t *seq_ids, int32_t n);
/* context.c: on an M-RoPE model, the (t, h, w) RoPE positions r[0..2] of the entry at slot
 * `slot` of sequence seq, and the sequence's rnext[slot] set (wlm_seq.rnext): a text token's, or
 * the next row of the image being evaluated (wlm_eval_embd_grid: c->in_embd with
 * c->in_img_gw > 0, its row counter advanced). Nothing for a sequence without rnext. */
void wlm_mrope_pos(wlm_context *c, int32_t *r, int32_t seq, int32_t slot);
/* vision/sequence.c: begins the generation of a media prompt whose batch a deferred context
 * recorded (wlm_generate_begin_media_cached returned WLM_NEED_LOGITS) and the backend ran. */
int wlm_generate_begin_media_finish(wlm_context *ctx, const wlm_gen_params *params);
/* vision/sequence.c: the same for wlm_generate_batch_begin_media (params: n_seqs of them, as
 * given there). */
int wlm_generate_batch_begin_media_finish(wlm_context *ctx, int32_t n_seqs, const wlm_gen_params *params);
/* deferred.c: forgets a recorded batch whose logits never came (reset, abort): its sequences
 * go back to their positions before it. */
void wlm_deferred_drop(wlm_context *c);
/* deferred.c (a deferred hybrid, whose states and their snapshots live in the backend): no
 * restore or snapshot pending (context creation). */
void wlm_deferred_state_init(wlm_context *c);
/* deferred.c: asks the backend for a copy of sequence seq's state at position pos (its n_past,
 * or a position of the batch just recorded) in snapshot `slot`; snap_pos says it from now on. */
void wlm_deferred_snapshot(wlm_context *c, int32_t seq, int slot, int32_t pos);
/* deferred.c: forgets sequence seq's snapshots past position n and a restore pending from past
 * n (n -1: all of them; a fork's destination). */
void wlm_deferred_state_forget(wlm_context *c, int32_t seq, int32_t n);
/* deferred.c: cuts recurrent sequence seq back to n < n_past (state_truncate's deferred half):
 * the latest snapshot the backend holds at or before n (or the empty state) restored and the
 * tokens from there to n replayed by the backend before the sequence's next entries; n_past
 * becomes n (earlier where image rows lie between, which are not replayable), last_restore the
 * snapshot's position. */
void wlm_deferred_state_truncate(wlm_context *c, int32_t seq, int32_t n);
/* deferred.c: frees the recorded batch's arrays (context_release). */
void wlm_deferred_release(wlm_context *c);
/* generate.c: the sampling phase of a wlm_generate_batch_next that returned WLM_NEED_LOGITS,
 * once the logits are written (out: the same array). */
int wlm_generate_batch_resume(wlm_context *ctx, wlm_token *out);

/* beam.c: frees the beam search scratch. */
void wlm_beam_release(wlm_context *c);

/* context.c: validates and evaluates a batch (see wlm_eval_batch) without the busy check;
 * seq_ids NULL puts every entry on sequence 0. */
int wlm_eval_entries(wlm_context *c, const int32_t *tokens, const int32_t *seq_ids,
                     const uint8_t *want_logits, int32_t n);

/* gguf_model.c (its parts: gguf_load.h): maps a GGUF file (any architecture of arch.c's table) to
 * m (hp, w, tokenizer); message in m->errmsg on error. With vocab_only, reads the tokenizer alone
 * (vocab-only GGUFs). */
int wlm_gguf_load_model(wlm_model *m, const unsigned char *data, size_t size, int vocab_only,
                        int external);
/* WLM_LOAD_TENSORS_EXTERNAL's second step (wlm_model_commit_external): maps the weights again,
 * reading the resident vectors now in the buffer. */
int wlm_gguf_commit_external(wlm_model *m);

/* llama2c.c: parses a legacy checkpoint into m (hp, w); message in m->errmsg on error. */
int wlm_llama2c_load(wlm_model *m, const unsigned char *data, size_t size);

#endif
