/*
 * arch.c — the table of supported architectures: one row per GGUF general.architecture, saying
 * how its forward pass differs from Llama's (norm, activation, feed-forward and Q/K/V layout,
 * RoPE style, which optional tensors exist). gguf_weights.c maps tensors by it and forward.c
 * computes by it; nothing here reads a file or does arithmetic. Each row follows what llama.cpp
 * (src/llama-arch.cpp, src/models/<arch>.cpp, ggml's RoPE modes) computes for that name.
 */
#include <string.h>

#include "model/model.h"

static const wlm_arch ARCHS[] = {
    /* Llama (and llama2.c checkpoints): RMSNorm, SwiGLU, interleaved-pair RoPE; Q/K/V/output
     * biases are optional in llama.cpp's loader, so they are here too. */
    {.name = "llama", .norm = WLM_NORM_RMS, .act = WLM_ACT_SILU, .ffn = WLM_FFN_GATED,
     .qkv = WLM_QKV_SEPARATE, .rope = WLM_ROPE_NORM, .qkv_bias = WLM_T_OPT,
     .out_bias = WLM_T_OPT, .rope_freqs = 1},
    /* SmolLM3: Llama's block, except that every 4th layer (l + 1 = 4, 8, ...) applies no RoPE
     * (NoPE); llama.cpp: src/models/smollm3.cpp, hparams.n_no_rope_layer_step = 4. */
    {.name = "smollm3", .norm = WLM_NORM_RMS, .act = WLM_ACT_SILU, .ffn = WLM_FFN_GATED,
     .qkv = WLM_QKV_SEPARATE, .rope = WLM_ROPE_NORM, .qkv_bias = WLM_T_OPT,
     .out_bias = WLM_T_OPT, .nope_step = 4},
    /* Qwen2 / Qwen2.5: biases on Q, K and V; NEOX RoPE (rotate halves). */
    {.name = "qwen2", .norm = WLM_NORM_RMS, .act = WLM_ACT_SILU, .ffn = WLM_FFN_GATED,
     .qkv = WLM_QKV_SEPARATE, .rope = WLM_ROPE_NEOX, .qkv_bias = WLM_T_REQ},
    /* Qwen2-VL / Qwen2.5-VL's text model (qwen2vl): Qwen2's block with M-RoPE (ggml's
     * GGML_ROPE_TYPE_MROPE): rope.dimension_sections splits the rotated pairs into runs turned by
     * the temporal, height and width positions (and a fourth); a text token has all three equal
     * to its position, so text alone turns as NEOX RoPE. llama.cpp: src/models/qwen2vl.cpp. */
    {.name = "qwen2vl", .norm = WLM_NORM_RMS, .act = WLM_ACT_SILU, .ffn = WLM_FFN_GATED,
     .qkv = WLM_QKV_SEPARATE, .rope = WLM_ROPE_NEOX, .qkv_bias = WLM_T_REQ,
     .rope_sections = WLM_SECTIONS_MROPE},
    /* Qwen3: no biases; RMSNorm of each Q and K head before RoPE; head size from key_length.
     * Qwen3-Reranker: cls.output's two rows over the last token, softmax. */
    {.name = "qwen3", .norm = WLM_NORM_RMS, .act = WLM_ACT_SILU, .ffn = WLM_FFN_GATED,
     .qkv = WLM_QKV_EITHER, .rope = WLM_ROPE_NEOX, .qkv_bias = WLM_T_OPT,
     .qk_norm = WLM_T_REQ, .rank_last_softmax = 1},
    /* Qwen3 MoE (Qwen3-30B-A3B, 235B-A22B): qwen3's attention; every feed-forward a mixture
     * of experts: softmax router, top k, weights renormalised to sum 1, SwiGLU experts, no
     * biases, no shared expert. llama.cpp: src/models/qwen3moe.cpp. */
    {.name = "qwen3moe", .norm = WLM_NORM_RMS, .act = WLM_ACT_SILU, .ffn = WLM_FFN_GATED,
     .qkv = WLM_QKV_EITHER, .rope = WLM_ROPE_NEOX, .qkv_bias = WLM_T_OPT,
     .qk_norm = WLM_T_REQ, .moe = WLM_T_REQ, .moe_gating = WLM_MOE_SOFTMAX, .moe_norm_w = 1},
    /* gpt-oss (OpenAI gpt-oss-20b / 120b; llama.cpp's LLM_ARCH_OPENAI_MOE, src/models/openai-moe):
     * Q/K/V/O biases, NEOX RoPE with YaRN, attention sinks, sliding-window layers on even blocks
     * (sliding_window_pattern 2) turning as the others; every feed-forward a mixture after
     * post_attention_norm: router with a bias, top k of the raw logits, a softmax over those k,
     * experts with biases and the clamped SwiGLU (α 1.702, limit 7). */
    {.name = "gpt-oss", .norm = WLM_NORM_RMS, .act = WLM_ACT_SILU, .ffn = WLM_FFN_GATED,
     .qkv = WLM_QKV_SEPARATE, .rope = WLM_ROPE_NEOX, .qkv_bias = WLM_T_REQ,
     .out_bias = WLM_T_REQ, .swa = 1, .swa_period = 2, .swa_rope_same = 1,
     .attn_sinks = WLM_T_REQ, .ffn_norm_name = "post_attention_norm", .moe = WLM_T_REQ,
     .moe_gating = WLM_MOE_SOFTMAX_CHOSEN, .moe_act = WLM_MOE_ACT_SWIGLU_OAI,
     .moe_router_bias = WLM_T_REQ, .moe_exp_bias = WLM_T_REQ},
    /* Gemma 3: GeGLU (tanh GELU), embeddings × sqrt(dim), norms after attention and after the
     * feed-forward, Q/K norms, sliding-window layers with their own RoPE base. Its converter
     * stores every RMSNorm weight as 1 + w, so the norms are applied as stored. */
    {.name = "gemma3", .norm = WLM_NORM_RMS, .act = WLM_ACT_GELU, .ffn = WLM_FFN_GATED,
     .qkv = WLM_QKV_SEPARATE, .rope = WLM_ROPE_NEOX, .qk_norm = WLM_T_REQ,
     .post_norms = WLM_T_REQ, .embd_scale = 1, .swa = 1, .gemma_attn_scale = 1, .softcap = 1},
    /* Gemma 4 (llama.cpp: src/models/gemma4-iswa.cpp): Gemma 3's block with
     * per-layer shapes (arch.per_layer: sliding and full layers with their own head sizes, KV
     * heads, RoPE widths and bases, proportional RoPE through rope_freqs on the full layers,
     * per-layer n_ff, shared-KV layers, V = K without attn_v, V's RMSNorm, attention scale 1,
     * per-layer embeddings, layer_output_scale), norms applied as stored (its converter keeps
     * Hugging Face's w) and the logit soft-cap. With expert_count (26B-A4B) every layer is a
     * mixture of experts beside its dense feed-forward (moe_dense_branch): the router reads
     * RMSNorm(x) / sqrt(dim) ⊙ ffn_gate_inp.scale, a softmax over all experts, the k best
     * renormalised, GELU experts (fused ffn_gate_up_exps or separate), each expert's output
     * times ffn_down_exps.scale, no biases. */
    {.name = "gemma4", .norm = WLM_NORM_RMS, .act = WLM_ACT_GELU, .ffn = WLM_FFN_GATED,
     .qkv = WLM_QKV_SEPARATE, .rope = WLM_ROPE_NEOX, .qk_norm = WLM_T_REQ,
     .post_norms = WLM_T_REQ, .embd_scale = 1, .swa = 1, .softcap = 1, .rope_freqs = 1,
     .per_layer = 1, .moe = WLM_T_OPT, .moe_gating = WLM_MOE_SOFTMAX, .moe_norm_w = 1,
     .moe_act = WLM_MOE_ACT_GELU, .moe_router_in = WLM_MOE_IN_STREAM_SCALED, .moe_gate_up = 1,
     .moe_out_scale = WLM_T_OPT, .moe_dense_branch = 1},
    /* Phi-3 / 3.5: fused attn_qkv (or separate), ffn_up holding gate and up, NEOX RoPE with
     * LongRoPE factors. */
    {.name = "phi3", .norm = WLM_NORM_RMS, .act = WLM_ACT_SILU, .ffn = WLM_FFN_FUSED_GATE_UP,
     .qkv = WLM_QKV_EITHER, .rope = WLM_ROPE_NEOX, .qkv_bias = WLM_T_OPT, .rope_factors = 1},
    /* GPT-2: LayerNorm with biases, learned positions, GELU MLP with biases, fused QKV with
     * bias, output bias, no RoPE. */
    {.name = "gpt2", .norm = WLM_NORM_LAYER, .act = WLM_ACT_GELU, .ffn = WLM_FFN_PLAIN,
     .qkv = WLM_QKV_FUSED, .rope = WLM_ROPE_NONE, .qkv_bias = WLM_T_REQ, .out_bias = WLM_T_REQ,
     .ffn_bias = WLM_T_REQ, .pos_embd = 1},
    /* Qwen3.5 / 3.6 (dense): Gated DeltaNet layers (a causal conv, then the delta rule on a
     * matrix state per head, a gated RMSNorm) with gated attention every
     * full_attention_interval-th layer (attn_q holds each head's query and its sigmoid gate;
     * per-head Q/K norms; partial NEOX RoPE through multi-section IMROPE); the pre-feed-forward
     * norm is named post_attention_norm. llama.cpp: src/models/qwen35.cpp. */
    {.name = "qwen35", .norm = WLM_NORM_RMS, .act = WLM_ACT_SILU, .ffn = WLM_FFN_GATED,
     .qkv = WLM_QKV_SEPARATE, .rope = WLM_ROPE_NEOX, .qk_norm = WLM_T_REQ,
     .layers = WLM_LAYERS_DELTANET, .attn_gate = 1, .rope_sections = WLM_SECTIONS_IMROPE,
     .ffn_norm_name = "post_attention_norm"},
    /* LFM2 / LFM2.5 (Liquid): gated short convolutions (B·x through a depthwise causal conv,
     * times C) where the per-layer head_count_kv is 0, GQA attention with Q/K norms and NEOX
     * RoPE elsewhere; the final norm is named token_embd_norm. llama.cpp: src/models/lfm2.cpp. */
    {.name = "lfm2", .norm = WLM_NORM_RMS, .act = WLM_ACT_SILU, .ffn = WLM_FFN_GATED,
     .qkv = WLM_QKV_SEPARATE, .rope = WLM_ROPE_NEOX, .qk_norm = WLM_T_REQ,
     .layers = WLM_LAYERS_SHORTCONV, .final_norm_name = "token_embd_norm"},
    /* LFM2-8B-A1B, LFM2-24B-A2B (lfm2moe): LFM2's layers; the feed-forwards from
     * leading_dense_block_count on are mixtures of experts: sigmoid router scores, the top k of
     * the scores plus exp_probs_b (the bias steers the choice only), the k unbiased scores
     * renormalised, SwiGLU experts (gating from expert_gating_func, llama.cpp's 2 = sigmoid).
     * llama.cpp: src/models/lfm2.cpp, llama_model_lfm2moe. */
    {.name = "lfm2moe", .norm = WLM_NORM_RMS, .act = WLM_ACT_SILU, .ffn = WLM_FFN_GATED,
     .qkv = WLM_QKV_SEPARATE, .rope = WLM_ROPE_NEOX, .qk_norm = WLM_T_REQ,
     .layers = WLM_LAYERS_SHORTCONV, .final_norm_name = "token_embd_norm", .moe = WLM_T_REQ,
     .moe_gating = WLM_MOE_SIGMOID, .moe_norm_w = 1, .moe_probs_bias = WLM_T_REQ},
    /* EmbeddingGemma (gemma-embedding): Gemma 3's layers with bidirectional attention (its
     * sliding-window layers see n_swa / 2 positions either side), mean pooling, and optional
     * dense_2 / dense_3 projections of the pooled vector. */
    {.name = "gemma-embedding", .norm = WLM_NORM_RMS, .act = WLM_ACT_GELU, .ffn = WLM_FFN_GATED,
     .qkv = WLM_QKV_SEPARATE, .rope = WLM_ROPE_NEOX, .qk_norm = WLM_T_REQ,
     .post_norms = WLM_T_REQ, .embd_scale = 1, .swa = 1, .bidirectional = 1, .dense_out = 1},
    /* BERT (all-MiniLM, bge, e5): an encoder (see wlm_arch.encoder) with learned positions,
     * separate or fused Q/K/V, optional biases, a GELU MLP; no RoPE. */
    {.name = "bert", .norm = WLM_NORM_LAYER, .act = WLM_ACT_GELU, .ffn = WLM_FFN_PLAIN,
     .qkv = WLM_QKV_EITHER, .rope = WLM_ROPE_NONE, .qkv_bias = WLM_T_OPT, .out_bias = WLM_T_OPT,
     .ffn_bias = WLM_T_OPT, .pos_embd = 1, .encoder = 1},
    /* nomic-bert (nomic-embed-text): the same encoder with NEOX RoPE instead of learned
     * positions and a SwiGLU feed-forward (ffn_gate, ffn_up, ffn_down). */
    {.name = "nomic-bert", .norm = WLM_NORM_LAYER, .act = WLM_ACT_SILU, .ffn = WLM_FFN_GATED,
     .qkv = WLM_QKV_EITHER, .rope = WLM_ROPE_NEOX, .qkv_bias = WLM_T_OPT, .out_bias = WLM_T_OPT,
     .encoder = 1},
};

const wlm_arch *wlm_arch_find(const char *name, size_t len) {
    for (size_t i = 0; i < sizeof ARCHS / sizeof ARCHS[0]; i++)
        if (strlen(ARCHS[i].name) == len && memcmp(ARCHS[i].name, name, len) == 0)
            return &ARCHS[i];
    return NULL;
}

const char *wlm_arch_list(void) {
    return "llama, smollm3, qwen2, qwen2vl, qwen3, qwen3moe, gpt-oss, qwen35, lfm2, lfm2moe, gemma3, gemma4, "
           "phi3, gpt2, gemma-embedding, bert, nomic-bert";
}
