// tools/synth/describe_encoders.mjs — the model descriptions of the embedding-only architectures:
// describeEncoder (bert, nomic-bert) and describeGemmaEmbedding (EmbeddingGemma: gemma3's
// description renamed, with its Dense modules).

import { describeShape } from './describe_dense.mjs';
import { resolveShape } from './shapes.mjs';
import { vocabulary } from './vocab.mjs';

/**
 * EmbeddingGemma (llama.cpp's LLM_ARCH_GEMMA_EMBEDDING, src/models/gemma-embedding.cpp): Gemma
 * 3's tensors and keys under the name gemma-embedding (bidirectional attention is implied by the
 * architecture; its window layers are symmetric), pooling_type, and the Sentence Transformers
 * Dense modules dense_2 [D, d2] and dense_3 [d2, D] with their dense_*_feat_in/out keys.
 */
export function describeGemmaEmbedding(shapeName, { seed }) {
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
export function describeEncoder(arch, shapeName, { seed }) {
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
