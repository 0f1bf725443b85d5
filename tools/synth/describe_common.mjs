// tools/synth/describe_common.mjs — what the describe_* files share: the weight scales (LOGIT_STD,
// BLOCK_GAIN) and commonKeys, the general.* and size keys a decoder file starts with.

/**
 * Weight scales (standard deviations of uniform random values, or norm weights' means), chosen
 * so the next-token distributions are peaked but context-dependent: each block adds to the
 * residual stream a few times the embedding's magnitude (with tied embeddings the last token
 * would otherwise predict itself), attention scores have a spread of a few units, and the
 * logits a spread of ~LOGIT_STD nats. Measured on the tiny shapes by tools/oracle.mjs (see
 * tests/reference/oracle/README.md).
 */
export const LOGIT_STD = 6;
export const BLOCK_GAIN = 3;

/** The keys every decoder file starts with: general.*, then <arch>.vocab_size … block_count. */
export function commonKeys(arch, s, shapeName, seed, V) {
  const kv = [];
  kv.push(['general.architecture', 'str', arch]);
  kv.push(['general.name', 'str', `synthetic ${arch} ${shapeName} (seed ${seed})`]);
  kv.push(['general.file_type', 'u32', 0]); // LLAMA_FTYPE_ALL_F32
  for (const [k, v] of [['vocab_size', V], ['context_length', s.ctx], ['embedding_length', s.D],
    ['feed_forward_length', s.F], ['block_count', s.L], ['attention.head_count', s.H]]) kv.push([`${arch}.${k}`, 'u32', v]);
  return kv;
}
