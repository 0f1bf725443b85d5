// tools/synth/describe_gptoss.mjs — describeGptOss, the model description of gpt-oss (attention
// sinks, sliding windows, YaRN, a mixture of experts with biases in every block).

import { LOGIT_STD, BLOCK_GAIN, commonKeys } from './describe_common.mjs';
import { vocabulary, partialUtf8Tokens } from './vocab.mjs';

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
export function describeGptOss(s, shapeName, seed) {
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
