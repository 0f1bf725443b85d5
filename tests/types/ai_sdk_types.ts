// ai_sdk_types.ts — compiled by tests/js/ai_sdk.test.mjs (tsc --noEmit): wasmlm/ai-sdk's models
// are the AI SDK's (ai's LanguageModel / EmbeddingModel accept them, @ai-sdk/provider's V4 types
// too), and wasmlm/server's createServer takes an Engine.
import type { LanguageModel, EmbeddingModel } from 'ai';
import type { LanguageModelV4, EmbeddingModelV4, ProviderV4 } from '@ai-sdk/provider';
import { wasmlm } from 'wasmlm/ai-sdk';
import { createServer } from 'wasmlm/server';
import { createEngine } from 'wasmlm';

const lm = wasmlm('model.gguf', { engine: { threads: 2 }, load: { nCtx: 2048 }, modelId: 'm' });
export const a: LanguageModel = lm;
export const b: LanguageModelV4 = wasmlm.languageModel(new Uint8Array(8));
export const c: EmbeddingModel = wasmlm.textEmbeddingModel('embed.gguf');
export const d: EmbeddingModelV4 = wasmlm.embeddingModel('embed.gguf');
export const e: Pick<ProviderV4, 'specificationVersion' | 'imageModel'> = wasmlm;
export async function serve() {
  const engine = await createEngine();
  const app = createServer({ engine, parallel: 4, apiKey: 'k' });
  const url: string = await app.listen(0);
  await app.close();
  return url;
}
// @ts-expect-error: unknown options are refused
wasmlm('model.gguf', { nCtx: 4 });
