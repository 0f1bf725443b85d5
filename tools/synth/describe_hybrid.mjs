// tools/synth/describe_hybrid.mjs — the model descriptions of the hybrids: describeQwen35 (Gated
// DeltaNet and gated attention blocks) and describeLfm2 (short-conv and attention blocks; lfm2moe
// too, with experts).

import { LOGIT_STD, BLOCK_GAIN, commonKeys } from './describe_common.mjs';
import { rng } from './random.mjs';
import { vocabulary, partialUtf8Tokens } from './vocab.mjs';

/**
 * Qwen3.5 (llama.cpp's LLM_ARCH_QWEN35, src/models/qwen35.cpp; archs-2026.md §1): see the list at
 * the top of tools/synth_gguf.mjs. Scales: as describeShape's, plus the DeltaNet's. Its readout is RMS-normed per head
 * (ssm_norm ≈ 1) and gated by silu(z) (RMS ≈ 0.6 for z ~ N(0, 1)), so ssm_out is scaled like
 * attn_output over HV·S inputs of RMS 0.6; the attention output is gated by sigmoid(g) (≈ 0.5),
 * so attn_output gets twice qwen3's scale. ssm_a = −exp(u), u uniform in [−2, 0] (A in
 * [−1, −0.14]), ssm_dt.bias ~ 0 ± 0.5 and alpha·h ~ ±0.5: per-token decays exp(g) of roughly
 * 0.5–0.95, so the state remembers several tokens; beta = sigmoid(≈ N(0, 1)). The conv kernel
 * has 1/√K-scale taps. Norms are the values llama.cpp multiplies by (the converter already
 * added Qwen's 1), near 1; attn_q_norm/attn_k_norm 1.5 as qwen3's.
 */
export function describeQwen35(s, shapeName, seed) {
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
 * top of tools/synth_gguf.mjs. Scales as describeShape's (attn_q_norm/attn_k_norm 1.5 as qwen3's); the short conv's
 * in_proj gives B, C and x of unit scale, its taps are 1/√L-scale, so out_proj is scaled like
 * attn_output over D inputs of unit RMS.
 */
export function describeLfm2(s, shapeName, seed, arch = 'lfm2') {
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
