// ai_sdk/index.d.ts — the types of `wasmlm/ai-sdk` (js/ai_sdk/index.js): a provider of the
// Vercel AI SDK. The model types are @ai-sdk/provider's own (a peer dependency), specification v4.
//
//   import { generateText, embedMany } from 'ai';
//   import { wasmlm } from 'wasmlm/ai-sdk';
//   const { text } = await generateText({ model: wasmlm('model.gguf'), prompt: 'Hello' });
//   const { embeddings } = await embedMany({ model: wasmlm.textEmbeddingModel('embed.gguf'), values: ['a', 'b'] });

import type { EmbeddingModelV4, LanguageModelV4 } from '@ai-sdk/provider';
import type { Engine, EngineOptions, LoadOptions, Source } from '../wasmlm.js';

/** Options of wasmlm() and wasmlm.textEmbeddingModel(); unknown keys are a TypeError naming them
 *  (js/options.js's message: 'wasmlm(): unknown option "x" (known: engine, load, modelId)'). */
export interface WasmlmModelOptions {
  /** createEngine()'s options (the engine is created on the first call), or an Engine to use
   *  (created by the caller; the model is loaded into it on the first call). */
  engine?: EngineOptions | Engine;
  /** load()'s options but `model` (nCtx, kvType, backend, onProgress, …). */
  load?: Omit<LoadOptions, 'model'>;
  /** The modelId reported to the AI SDK (default: the model's file name). */
  modelId?: string;
}

/**
 * A language model on a wasmlm engine. Each call is an Engine.chatCompletion request:
 * prompt → messages (system, user text, assistant text and tool calls, tool results as text
 * or JSON); maxOutputTokens, temperature (0..2), topP, topK, presencePenalty,
 * frequencyPenalty, stopSequences (up to 8), seed; tools (function tools; provider tools are
 * warned about and left out) with toolChoice auto / none / required / a named tool, the calls
 * held to the tools' JSON Schemas by a grammar; responseFormat json (with a schema: the
 * grammar of Engine.jsonSchemaToGrammar, lenient — keywords it cannot hold are left to the
 * caller's validation; without one: any JSON object; with tools the model may call: warned and
 * ignored); reasoning other than 'provider-default' is warned about. providerOptions.wasmlm: more
 * request fields by their chat-completions names (min_p, repeat_penalty, chat_template_kwargs, …;
 * see ChatCompletionRequest). abortSignal aborts the generation. Finish reasons: 'stop',
 * 'length', 'tool-calls' (raw: OpenAI's name). Usage: prompt tokens (cacheRead: reused from the
 * KV cache), completion tokens. Calls on one engine run one at a time (a stream holds the
 * engine until it ends or is cancelled). Images: user file parts of an image media type (ai's
 * `{type: 'image', image}` and `{type: 'file', mediaType: 'image/png', data}`: bytes, base64, a
 * data: or http(s) URL — supportedUrls declares data: and http(s) image URLs, which the engine
 * decodes or fetches itself) become the request's image parts, for a model loaded with its
 * mmproj (`load: {mmproj}`); without one, and for other files, UnsupportedFunctionalityError.
 */
export interface WasmlmLanguageModel extends LanguageModelV4 {
  readonly specificationVersion: 'v4';
  readonly provider: 'wasmlm';
  /** The engine, created and loaded on first use. */
  engine(): Promise<Engine>;
}

/**
 * An embedding model on a wasmlm engine (Engine.embed: the model's pooling, L2-normalized).
 * maxEmbeddingsPerCall 256; supportsParallelCalls false (one engine). usage.tokens: the texts'
 * tokens. dimensions other than the model's are warned about and ignored.
 */
export interface WasmlmEmbeddingModel extends EmbeddingModelV4 {
  readonly specificationVersion: 'v4';
  readonly provider: 'wasmlm';
  engine(): Promise<Engine>;
}

export interface WasmlmProvider {
  /**
   * A language model. `model` is what Engine.load() takes as `model` (a path, URL, bytes, Blob,
   * or a split GGUF's parts); null when options.engine is an Engine with a model loaded.
   */
  (model: Source | Source[] | null, options?: WasmlmModelOptions): WasmlmLanguageModel;
  readonly specificationVersion: 'v4';
  languageModel(model: Source | Source[] | null, options?: WasmlmModelOptions): WasmlmLanguageModel;
  /** An embedding model (for ai's embed and embedMany). */
  textEmbeddingModel(model: Source | Source[] | null, options?: WasmlmModelOptions): WasmlmEmbeddingModel;
  /** The same as textEmbeddingModel. */
  embeddingModel(model: Source | Source[] | null, options?: WasmlmModelOptions): WasmlmEmbeddingModel;
  /** Throws NoSuchModelError: wasmlm has no image models. */
  imageModel(modelId: string): never;
}

export declare const wasmlm: WasmlmProvider;
