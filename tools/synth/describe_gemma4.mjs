// tools/synth/describe_gemma4.mjs — describeGemma4, the model description of Gemma 4: head size,
// KV heads and n_ff per block, KV caches shared between blocks, per-layer embeddings (the E2B
// kind), and with experts the 26B-A4B kind's mixture beside each block's dense feed-forward.

import { LOGIT_STD, BLOCK_GAIN, commonKeys } from './describe_common.mjs';
import { rng } from './random.mjs';
import { vocabulary, partialUtf8Tokens } from './vocab.mjs';

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
export function describeGemma4(s, shapeName, seed) {
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
