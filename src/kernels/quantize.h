/*
 * quantize.h — internal: writes a loaded model (llama2.c checkpoint or GGUF) as a GGUF v3 file
 * of architecture "llama", its weight matrices converted to one type (F32, F16, Q8_0, Q4_0,
 * Q4_K, Q6_K): each row is dequantized to float with the source type's to_float, then encoded
 * with the target's from_float (rows already of the target type are copied as they are). Norm
 * vectors stay F32. Used by the CLI's `wasmlm quantize` (cli_quantize.c) and the tests; the
 * container itself is gguf_write.c's.
 *
 * What the file holds:
 * - general.architecture "llama", general.name, general.alignment 32, general.file_type
 *   (llama.cpp's llama_ftype: 0 F32, 1 F16, 2 Q4_0, 7 Q8_0, 14 Q4_K_S, 18 Q6_K),
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
 * layout (see gguf_model.c), so no permutation either way.
 *
 * Block types need rows whose length is a multiple of the block (32 for Q8_0/Q4_0, 256 for the
 * K-quants). A matrix whose rows are not falls back to Q8_0, else F16 (F32 when F32 was asked);
 * the params' log callback is told which tensors.
 */
#ifndef WASMLM_QUANTIZE_H
#define WASMLM_QUANTIZE_H

#include <stddef.h>
#include <stdint.h>

#include "formats/gguf.h"
#include "formats/gguf_write.h"
#include "model/model.h"

typedef struct wlm_quantize_params {
    int32_t type;              /* target type of the weight matrices (enum wlm_type) */
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

/* The type a weight matrix with rows of `cols` elements is written in when `target` is asked
 * for (the target itself, or its fallback). */
int32_t wlm_quantize_tensor_type(int32_t target, int64_t cols);

/* WLM_OK when `target` is one of the six types and can be produced: the quantizer (traits
 * from_float) of it and of its fallbacks exists; else WLM_ERR_INVALID_ARG (not a target) or
 * WLM_ERR_UNSUPPORTED ("not available yet"), with a message in err. */
int wlm_quantize_check_type(int32_t target, char *err, size_t errlen);

/* Adds the key/values and tensors of `m` to a fresh writer and writes the whole file through
 * it (header, data, finish). The model must be loaded with its weights (not vocab-only); a
 * model without tokenizer gives a file without vocabulary. err gets the message on error. */
int wlm_quantize_write(const wlm_model *m, wlm_gguf_writer *w, const wlm_quantize_params *p,
                       char *err, size_t errlen);

/* wlm_quantize_write into the file `out_path`: written as out_path + ".tmp", renamed over
 * out_path on success, removed on any error (no partial file is left). */
int wlm_quantize_model(const wlm_model *m, const char *out_path, const wlm_quantize_params *p,
                       char *err, size_t errlen);

#endif
