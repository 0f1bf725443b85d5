// tools/synth/describe.mjs — describe(), the model description of an architecture and shape: the
// entry that picks the describe_* function of the architecture.

import { describeShape } from './describe_dense.mjs';
import { describeEncoder, describeGemmaEmbedding } from './describe_encoders.mjs';
import { describeGemma4 } from './describe_gemma4.mjs';
import { describeGptOss } from './describe_gptoss.mjs';
import { describeLfm2, describeQwen35 } from './describe_hybrid.mjs';
import { EMBED_ARCHS, resolveShape } from './shapes.mjs';

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
