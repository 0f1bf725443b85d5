/*
 * quantize.h — internal: writes a loaded model (llama2.c checkpoint or GGUF) as a GGUF v3 file
 * of architecture "llama", its weight matrices converted to one type (F32, F16, BF16, Q8_0,
 * Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, MXFP4) or to one of llama.cpp's
 * per-tensor mixes (Q3_K_M, Q4_K_M, Q5_K_M, MXFP4_MOE): each row is dequantized to float with the source type's
 * to_float, then encoded with the target's from_float (rows already of the target type are
 * copied as they are). Norm vectors stay F32. Used by the CLI's `wasmlm quantize`
 * (cli_quantize.c) and the tests; the container itself is gguf_write.c's.
 *
 * What the file holds:
 * - general.architecture "llama", general.name, general.alignment 32, general.file_type
 *   (llama.cpp's llama_ftype: 0 F32, 1 F16, 2 Q4_0, 3 Q4_1, 7 Q8_0, 8 Q5_0, 9 Q5_1, 10 Q2_K,
 *   11 Q3_K_S (pure Q3_K), 14 Q4_K_S (pure Q4_K), 16 Q5_K_S (pure Q5_K), 18 Q6_K, 32 BF16,
 *   38 MOSTLY_MXFP4_MOE for MXFP4; the mixes 12 Q3_K_M, 15 Q4_K_M, 17 Q5_K_M, 38 MXFP4_MOE),
 *   general.quantization_version 2;
 * - llama.context_length, embedding_length, block_count, feed_forward_length,
 *   attention.head_count, attention.head_count_kv, rope.dimension_count, rope.freq_base,
 *   attention.layer_norm_rms_epsilon, vocab_size;
 * - the vocabulary (tokenizer.ggml.model "llama", tokens, scores, token_type, unknown / bos /
 *   eos ids, add_bos_token, add_eos_token). From a llama2.c tokenizer.bin the pieces are made
 *   SentencePiece's again: ' ' becomes U+2581 "▁", BOS/EOS ("\n<s>\n", "\n</s>\n" in
 *   tokenizer.bin) become "<s>" and "</s>"; types: <0xNN> pieces BYTE, id 0 "<unk>" UNKNOWN,
 *   ids 1 and 2 CONTROL, the rest NORMAL — as in ggml-org's stories260K.gguf;
 * - with a source GGUF (params.src), every other key/value of the source that the file does
 *   not already hold (chat template, extra token ids, ...), except nested arrays and split.*;
 * - tensors token_embd, blk.N.{attn_norm, attn_q, attn_k, attn_v, attn_output, ffn_norm,
 *   ffn_gate, ffn_up, ffn_down}, output_norm, and output when the classifier is separate.
 *
 * The Q and K rows are written as stored: GGUF "llama" files use llama2.c's adjacent-pair RoPE
 * layout (see gguf_weights.c), so no permutation either way.
 *
 * MXFP4 as a type means every weight matrix MXFP4 (for tests and dense models; general.file_type
 * 38 all the same). The mix MXFP4_MOE is llama.cpp's own rule (llama-quant.cpp, MOSTLY_MXFP4_MOE):
 * the stacked expert matrices (3-D, ne[2] > 1; wlm_quantize_gguf only) MXFP4, every other
 * matrix Q8_0, the classifier included (so a dense model comes out all Q8_0, as llama.cpp's).
 *
 * Block types need rows whose length is a multiple of the block (32 for Q8_0/Q4_0/Q4_1/Q5_0/
 * Q5_1/MXFP4, 256 for the K-quants). A matrix whose rows are not falls back as llama.cpp's
 * tensor_type_fallback does: Q2_K and Q3_K to Q4_0, Q4_K to Q5_0, Q5_K to Q5_1, Q6_K to Q8_0;
 * when that does not fit either (and for the 32-element types, which llama.cpp refuses), to
 * F16. The params' log callback is told which tensors.
 *
 * The mixes follow llama.cpp's llama_tensor_get_type (src/llama-quant.cpp) for a dense llama
 * model (no experts, not Falcon, not 70B), with use_more_bits(i, n) = i < n/8 || i >= 7n/8 ||
 * (i - n/8) % 3 == 2 over the layer index i of n:
 * - output.weight, and token_embd.weight when the classifier is tied to it: Q6_K (Q8_0 when the
 *   rows are not whole 256-element blocks);
 * - Q4_K_M / Q5_K_M: the base type Q4_K / Q5_K; attn_v and ffn_down Q6_K in use_more_bits
 *   layers;
 * - Q3_K_M: base Q3_K; attn_v Q5_K in layers 0 and 1, else Q4_K; ffn_down Q5_K in the first
 *   n/16 layers, else Q4_K; attn_output Q4_K;
 * - a fused attn_qkv (wlm_quantize_gguf only): Q4_K in Q3_K_M, Q5_K in Q4_K_M, Q6_K in Q5_K_M;
 * then the row-length fallback above (so in Q4_K_M a 576-column matrix, SmolLM2-135M's width,
 * comes out Q5_0, or Q8_0 where the rule says Q6_K).
 *
 * Hybrid architectures (wlm_quantize_gguf only), as llama.cpp b12211 quantizes them: the
 * attn_v rule's layer i of n counts llama.cpp's "attn_v-like" matrices (attn_v, attn_qkv,
 * attn_kv_b; in block order), not blocks: the same where every block has one (qwen35: attn_qkv
 * in the DeltaNet blocks, attn_v in the attention blocks), the attention block's rank among the
 * attention blocks in lfm2 (its conv blocks have none). qwen35's attn_qkv (the DeltaNet input
 * projection) takes the attn_v rule (llama.cpp groups it with attn_v since its tensor
 * categories; the fused-QKV rule above is kept for phi3 and gpt2, whose recorded files were
 * made with it). The depthwise conv kernels ssm_conv1d and shortconv.conv stay as they are, as
 * do ssm_a, ssm_dt.bias and every norm (1-D); attn_gate, ssm_alpha, ssm_beta, ssm_out,
 * shortconv.in_proj/out_proj and attn_q get the mix's base type.
 */
#ifndef WASMLM_QUANTIZE_H
#define WASMLM_QUANTIZE_H

#include <stddef.h>
#include <stdint.h>

#include "formats/gguf.h"
#include "formats/gguf_write.h"
#include "model/model.h"

/* llama.cpp's mixes, by their llama_ftype ids (what general.file_type gets). */
enum wlm_quant_mix {
    WLM_QUANT_MIX_NONE = 0,
    WLM_QUANT_MIX_Q3_K_M = 12,
    WLM_QUANT_MIX_Q4_K_M = 15,
    WLM_QUANT_MIX_Q5_K_M = 17,
    WLM_QUANT_MIX_MXFP4_MOE = 38 /* experts (3-D, ne[2] > 1) MXFP4, every other matrix Q8_0 */
};

/* The roles of the weight matrices, which the mixes' rules tell apart. */
enum wlm_quant_kind {
    WLM_QUANT_TOKEN_EMBD,
    WLM_QUANT_ATTN_Q,
    WLM_QUANT_ATTN_K,
    WLM_QUANT_ATTN_V,
    WLM_QUANT_ATTN_OUTPUT,
    WLM_QUANT_FFN_GATE,
    WLM_QUANT_FFN_UP,
    WLM_QUANT_FFN_DOWN,
    WLM_QUANT_OUTPUT,
    WLM_QUANT_ATTN_QKV, /* a fused Q/K/V matrix (phi3, gpt2) */
    WLM_QUANT_OTHER     /* any other matrix: the mix's base type */
};

typedef struct wlm_quantize_params {
    int32_t type;              /* target type of the weight matrices (enum wlm_type) */
    int32_t mix;               /* WLM_QUANT_MIX_*: per-tensor types by llama.cpp's rules (type is
                                  then not used); 0: every matrix `type` */
    const char *name;          /* general.name; NULL: the source GGUF's, else "llama" */
    const wlm_gguf *src;       /* the parsed source file when it is a GGUF, else NULL */
    /* Optional callbacks: a message per notable decision (fallbacks, skipped keys), and the
     * bytes written so far after each tensor. */
    void (*log)(void *user, const char *msg);
    void (*progress)(void *user, uint64_t written, uint64_t total);
    void *user;
} wlm_quantize_params;

/* type F32, nothing else set. */
void wlm_quantize_params_default(wlm_quantize_params *p);

/* The type id of a name ("Q8_0", case-insensitive) among the quantize targets, or -1. */
int32_t wlm_quantize_type_from_name(const char *name);

/* The mix id (WLM_QUANT_MIX_*) of a name ("Q4_K_M", case-insensitive), or -1; and back (NULL
 * for ids that are not mixes). */
int32_t wlm_quantize_mix_from_name(const char *name);
const char *wlm_quantize_mix_name(int32_t mix);

/* The type a weight matrix with rows of `cols` elements is written in when `target` is asked
 * for (the target itself, or its fallback). */
int32_t wlm_quantize_tensor_type(int32_t target, int64_t cols);

/* The type a mix gives a matrix of role `kind` (enum wlm_quant_kind) in layer `layer` of
 * `n_layers` (0 for token_embd / output), rows of `cols`, `tied`: the classifier is the token
 * embedding. -1 if mix is not a mix. */
int32_t wlm_quantize_mix_tensor_type(int32_t mix, int kind, int layer, int n_layers, int64_t cols,
                                     int tied);

/* WLM_OK when `target` is one of the single types and can be produced: the quantizer (traits
 * from_float) of it and of its fallbacks exists; else WLM_ERR_INVALID_ARG (not a target) or
 * WLM_ERR_UNSUPPORTED ("not available yet"), with a message in err. */
int wlm_quantize_check_type(int32_t target, char *err, size_t errlen);

/* Adds the key/values and tensors of `m` to a fresh writer and writes the whole file through
 * it (header, data, finish). The model must be loaded with its weights (not vocab-only); a
 * model without tokenizer gives a file without vocabulary. err gets the message on error. */
int wlm_quantize_write(const wlm_model *m, wlm_gguf_writer *w, const wlm_quantize_params *p,
                       char *err, size_t errlen);

/* Any architecture: copies a parsed GGUF `src` into the writer, every key/value (general.
 * file_type, quantization_version and alignment rewritten; general.name replaced when p->name)
 * and every tensor in file order, converting only the weight matrices as llama.cpp's
 * llama_model_quantize does: a tensor is converted when its name ends in "weight", it has at
 * least 2 dimensions, and it is not a norm ("_norm.weight") nor learned positions or BERT's
 * token types (position_embd.weight, token_types.weight: llama.cpp adds them to the embedding
 * as they are) nor a mixture of experts' router (ffn_gate_inp.weight); everything else (norms,
 * biases, routers, rope_freqs / rope_factors_*, position embeddings, token types) keeps its type
 * and bytes. A 3-D expert tensor [cols, rows, n_expert] is converted row by row like a matrix of
 * rows · n_expert rows (each expert's rows in turn, as llama.cpp), and ffn_down_exps takes
 * ffn_down's rule. (llama.cpp's rules for exactly 8 experts, Mixtral's attn_k / attn_v in Q8_0
 * and attn_output in Q5_K, are not applied.) A mix picks types by role from the tensor name (
 * output.weight — or token_embd.weight when there is no output.weight — attn_v, attn_qkv,
 * attn_output, ffn_down; see wlm_quantize_mix_tensor_type) and the layer from "blk.N.". p->src
 * is not used. A tensor whose type cannot be read gives WLM_ERR_UNSUPPORTED naming it. */
int wlm_quantize_gguf_write(const wlm_gguf *src, wlm_gguf_writer *w, const wlm_quantize_params *p,
                            char *err, size_t errlen);

/* What the mixes read of a whole file besides one tensor's name and shape. */
typedef struct wlm_quantize_file {
    int n_layers; /* blocks: the largest N of "blk.N." names + 1 */
    int tied;     /* no output.weight: token_embd.weight is the classifier */
    int n_attn_v; /* attn_v-like matrices (wlm_quantize_attn_v_like): the attn_v rule's n */
    int qkv_as_v; /* attn_qkv takes the attn_v rule (wlm_quantize_qkv_as_v of the architecture) */
} wlm_quantize_file;

/* Fills f from src's tensor names and general.architecture. */
void wlm_quantize_file_of(const wlm_gguf *src, wlm_quantize_file *f);

/* 1 when a tensor name is one llama.cpp counts as attn_v-like (it contains attn_v.weight,
 * attn_qkv.weight or attn_kv_b.weight), else 0. */
int wlm_quantize_attn_v_like(const char *name, size_t len);

/* 1 for the architectures whose attn_qkv takes the attn_v rule (qwen35, qwen35moe: the Gated
 * DeltaNet input projection), 0 for the rest (the fused-QKV rule). */
int wlm_quantize_qkv_as_v(const char *arch, size_t len);

/* The type wlm_quantize_gguf_write gives tensor `t` of a file described by `f`: its own type
 * when it is not converted. attn_v_index: for an attn_v-like tensor, how many of the file's
 * attn_v-like tensors come before it in llama.cpp's order (by block, then by name); not read
 * for the others. Only t's name, n_dims, ne and type are read. For writers that produce the
 * same file without a source GGUF in memory (tools/synth_gguf.mjs through
 * wlmjs_quantize_tensor_type). */
int32_t wlm_quantize_gguf_tensor_type(const wlm_gguf_tensor *t, const wlm_quantize_params *p,
                                      const wlm_quantize_file *f, int attn_v_index);

/* llama.cpp's llama_ftype (general.file_type) of a file of `type`, or of `mix` when non-zero. */
uint32_t wlm_quantize_file_type(int32_t type, int32_t mix);

/* wlm_quantize_gguf_write into the file `out_path`, as wlm_quantize_model writes its file. */
int wlm_quantize_gguf(const wlm_gguf *src, const char *out_path, const wlm_quantize_params *p,
                      char *err, size_t errlen);

/* wlm_quantize_write into the file `out_path`: written as out_path + ".tmp", renamed over
 * out_path on success, removed on any error (no partial file is left). */
int wlm_quantize_model(const wlm_model *m, const char *out_path, const wlm_quantize_params *p,
                       char *err, size_t errlen);

#endif
