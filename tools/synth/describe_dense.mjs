// tools/synth/describe_dense.mjs — describeShape, the model description of the architectures of
// one block kind: llama, qwen2, qwen2vl, qwen3 (with its embedding and reranker shapes), gemma3,
// phi3, gpt2, smollm3, and qwen3moe (qwen3 with every feed-forward a mixture); with the
// Llama 3 RoPE divisors (llama3RopeFreqs) and the Qwen3-Reranker template it writes.

import { LOGIT_STD, BLOCK_GAIN } from './describe_common.mjs';
import { rng } from './random.mjs';
import { vocabulary, partialUtf8Tokens } from './vocab.mjs';

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

/** The "rerank" template llama.cpp's converter stores for Qwen3-Reranker ({query}, {document}). */
export const QWEN3_RERANK_TEMPLATE = '<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct provided. Note that the answer can only be "yes" or "no".<|im_end|>\n'
  + '<|im_start|>user\n<Instruct>: Given a web search query, retrieve relevant passages that answer the query\n<Query>: {query}\n<Document>: {document}<|im_end|>\n'
  + '<|im_start|>assistant\n<think>\n\n</think>\n\n';

/** The description (see describe()) of one of the architectures above; `s` is resolveShape's. */
export function describeShape(arch, s, shapeName, seed) {
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

  // scales (LOGIT_STD, BLOCK_GAIN: describe_common.mjs)
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
