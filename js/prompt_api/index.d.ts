// index.d.ts — the types of 'wasmlm/prompt-api' (js/prompt_api/index.js): the Prompt API's
// LanguageModel (W3C Web Machine Learning CG, webmachinelearning/prompt-api, spec index.bs and
// explainer README.md as of commit 2e27365), implemented on a wasmlm engine, and configure(),
// which chooses the model.
//
//   import { configure, LanguageModel } from 'wasmlm/prompt-api';
//   await configure({ model: 'https://…/Qwen2.5-0.5B-Instruct-Q4_K_M.gguf' }); // or a manifest id
//   const session = await LanguageModel.create({ initialPrompts: [{ role: 'system', content: 'Be brief.' }] });
//   console.log(await session.prompt('Write me a poem.'));
//
// Errors are the spec's: TypeError / RangeError for arguments, and DOMExceptions named
// SyntaxError, NotSupportedError, InvalidStateError, AbortError, QuotaExceededError (with
// `requested` and `quota`), NetworkError and OperationError (create(): the download, the load),
// UnknownError (other engine failures: `cause` holds the WasmlmError).

import type { EngineOptions, Engine, LoadOptions, Source } from '../wasmlm.js';

/** Availability of the model for some options (the spec's Availability enum). */
export type Availability = 'unavailable' | 'downloadable' | 'downloading' | 'available';
export type LanguageModelMessageRole = 'system' | 'user' | 'assistant';
export type LanguageModelMessageType = 'text' | 'image' | 'audio' | 'tool-call' | 'tool-response';
/** Presets of temperature and top-k: most-predictable 0 / 1 (greedy), predictable 0.4 / 3,
 *  balanced 1 / 3 (the default), creative 1.2 / 40, most-creative 1.5 / 128. */
export type LanguageModelSamplingMode = 'most-predictable' | 'predictable' | 'balanced' | 'creative' | 'most-creative';

export interface LanguageModelExpected {
  type: LanguageModelMessageType;
  /** BCP 47 tags, canonicalized (RangeError for an invalid one). Any language is accepted: the
   *  model's own abilities decide. */
  languages?: string[];
}

export interface LanguageModelMessageContent {
  type: LanguageModelMessageType;
  /**
   * A string for text. An image (type 'image', in a session created with expectedInputs
   * [{type: 'image'}] on a model loaded with an mmproj: configure({ load: { mmproj } })): a
   * Blob, ImageBitmap, ImageData, canvas / OffscreenCanvas, <img> / <video> / SVG <image> /
   * VideoFrame (drawn and read back as pixels), an ArrayBuffer or a view of one (encoded bytes:
   * PNG / JPEG in Node, any format the browser decodes in a page) — snapshotted when the call
   * is made. It counts in contextUsage as its positions (Engine.imageTokens). Errors: an image in
   * a session without the image input, in an assistant message, or audio: NotSupportedError;
   * a value that is no image: TypeError; bytes that do not decode: DataError; a text holding
   * the media marker `<__media__>` in a conversation with images: NotSupportedError.
   */
  value: unknown;
}

export interface LanguageModelMessage {
  role: LanguageModelMessageRole;
  /** A string is shorthand for [{ type: 'text', value }]; text parts are joined. */
  content: string | LanguageModelMessageContent[];
  /** On the last message, an assistant one: the response continues this text (SyntaxError
   *  anywhere else). */
  prefix?: boolean;
}

/** A string is a user message. */
export type LanguageModelPrompt = string | LanguageModelMessage[];

/** A function the model may call. */
export interface LanguageModelTool {
  name: string;
  description: string;
  /** JSON Schema of the arguments object; the call's arguments are held to it by a grammar. */
  inputSchema: object;
  /** Called with the parsed arguments; its result (a string) goes back to the model. Calls of
   *  one turn run concurrently. A throw rejects the prompt with that error. */
  execute(args: any): Promise<string> | string;
}

export interface LanguageModelCreateCoreOptions {
  /** Clamped to maxTopK; RangeError below 1; rounded down. Not with samplingMode. */
  topK?: number;
  /** Clamped to maxTemperature; RangeError below 0. Not with samplingMode. */
  temperature?: number;
  samplingMode?: LanguageModelSamplingMode;
  /** Audio makes the options "unavailable" (create(): NotSupportedError); so does image unless
   *  the model has an mmproj (loaded, or given to configure()'s load before it loads). */
  expectedInputs?: LanguageModelExpected[];
  /** Anything but text and tool-call makes the options "unavailable". */
  expectedOutputs?: LanguageModelExpected[];
  tools?: LanguageModelTool[];
}

/** The object create()'s monitor receives: 'downloadprogress' ProgressEvents, loaded 0 first and
 *  1 last (also when nothing was downloaded), total 1. */
export interface CreateMonitor extends EventTarget {
  ondownloadprogress: ((this: CreateMonitor, ev: ProgressEvent) => any) | null;
}

export interface LanguageModelCreateOptions extends LanguageModelCreateCoreOptions {
  /** Aborts create() (rejects with its reason) and, later, destroys the session. */
  signal?: AbortSignal;
  monitor?: (monitor: CreateMonitor) => void;
  /** The first messages of the session (a system message first, if any); never evicted. */
  initialPrompts?: LanguageModelMessage[];
}

export interface LanguageModelPromptOptions {
  /** A JSON Schema (the engine's converter; keywords it lacks are a NotSupportedError, except
   *  number bounds, checked on the finished response: a SyntaxError when broken) or a RegExp
   *  (the whole response matches it; back references, lookaround, \b and the m / v flags are a
   *  NotSupportedError). A response cut short before it is complete is a SyntaxError. */
  responseConstraint?: object | RegExp;
  /** Leave the constraint's description out of the prompt (TypeError without a constraint). */
  omitResponseConstraintInput?: boolean;
  signal?: AbortSignal;
}

export interface LanguageModelAppendOptions { signal?: AbortSignal }
export interface LanguageModelCloneOptions { signal?: AbortSignal }

/** The sampler's defaults and limits: { defaultTopK: 3, maxTopK: 128, defaultTemperature: 1,
 *  maxTemperature: 2 }. */
export interface LanguageModelParams {
  readonly defaultTopK: number;
  readonly maxTopK: number;
  readonly defaultTemperature: number;
  readonly maxTemperature: number;
}

/**
 * A session with the model (the spec's LanguageModel). Operations of all sessions run one at a
 * time in call order (one engine); each prompt renders the conversation with the model's chat
 * template and reuses the KV cache of the common prefix.
 */
export declare class LanguageModel extends EventTarget {
  private constructor();
  static create(options?: LanguageModelCreateOptions): Promise<LanguageModel>;
  static availability(options?: LanguageModelCreateCoreOptions): Promise<Availability>;
  static params(): Promise<LanguageModelParams | null>;

  /** The response, whole. */
  prompt(input: LanguageModelPrompt, options?: LanguageModelPromptOptions): Promise<string>;
  /** The response as text chunks (each a new piece; async-iterable in every browser).
   *  Cancelling the stream stops the generation. */
  promptStreaming(input: LanguageModelPrompt, options?: LanguageModelPromptOptions): ReadableStream<string> & AsyncIterable<string>;
  /** Stores messages without a response (they are prefilled with the next prompt). */
  append(input: LanguageModelPrompt, options?: LanguageModelAppendOptions): Promise<undefined>;
  /** Tokens `input` would add (the constraint's description included unless omitted). */
  measureContextUsage(input: LanguageModelPrompt, options?: LanguageModelPromptOptions): Promise<number>;
  /** @deprecated measureContextUsage(). */
  measureInputUsage(input: LanguageModelPrompt, options?: LanguageModelPromptOptions): Promise<number>;
  /** Tokens of the conversation as the template renders it. */
  readonly contextUsage: number;
  /** The context length in tokens (ModelInfo.nCtx). */
  readonly contextWindow: number;
  /** Fired when a prompt or append evicted the oldest prompt/response pairs to fit. */
  oncontextoverflow: ((this: LanguageModel, ev: Event) => any) | null;
  /** @deprecated contextUsage. */
  readonly inputUsage: number;
  /** @deprecated contextWindow. */
  readonly inputQuota: number;
  /** @deprecated 'quotaoverflow', fired with 'contextoverflow'. */
  onquotaoverflow: ((this: LanguageModel, ev: Event) => any) | null;
  readonly topK: number;
  readonly temperature: number;
  readonly samplingMode: LanguageModelSamplingMode;
  /** A session with this one's conversation and settings. */
  clone(options?: LanguageModelCloneOptions): Promise<LanguageModel>;
  /** Rejects the session's running and queued operations with an AbortError (or `reason`), and
   *  every later call. */
  destroy(reason?: unknown): void;
}

/**
 * configure() options: ours and, for an engine made here, EngineOptions (threads, backend, …).
 * Unlike the spec's dictionaries above (WebIDL: unknown members are ignored, as in Chrome),
 * unknown keys here, in `load` and in `params` are a TypeError naming the key and the known ones
 * (js/options.js).
 */
export interface ConfigureOptions extends EngineOptions {
  /**
   * The model, as engine.load() takes it: a URL (in a page: through the model cache, js/models/cache.js,
   * kept in Cache Storage once loaded), a path (Node), a Blob or bytes, a split GGUF's parts, or
   * the id of a published model in MODELS (its sha256 checked in a page). Default DEFAULT_MODEL,
   * unless `engine` is given (then its loaded model). Node has no model cache: a URL or id is
   * downloaded at every first create() of a process (give a path to keep it on disk).
   */
  model?: Source | Source[];
  /** An engine the page made (createEngine / createWorkerEngine); not freed by configure(). */
  engine?: Engine;
  /** Run the engine in a worker (default: true in a page, false in Node). */
  worker?: boolean;
  /** More LoadOptions: nCtx, kvType, nSeqMax, backend. */
  load?: Omit<LoadOptions, 'model' | 'tokenizer' | 'onProgress' | 'signal'>;
  /** Generation settings for every prompt (ours; the API has none): maxTokens (default 0: until
   *  the end of the turn or of the context), seed, topP (default 1), minP, repeatPenalty. */
  params?: { maxTokens?: number; seed?: number; topP?: number; minP?: number; repeatPenalty?: number };
}

/**
 * Chooses the model (and the engine) every LanguageModel runs on; call it before the first
 * create(). A later call replaces the model: the engine made here before is freed, and the
 * sessions made on it reject with InvalidStateError.
 * @throws TypeError for options of the wrong type or unknown names of ours
 */
export declare function configure(options?: ConfigureOptions): Promise<void>;

/** The published models known by id (entries of models/manifest.json). */
export declare const MODELS: Readonly<Record<string, { url: string; size: number; sha256: string }>>;
/** The model when configure() names none: 'qwen2.5-0.5b-instruct-q4_k_m' (Qwen2.5 0.5B Instruct,
 *  Q4_K_M, 491 MB). */
export declare const DEFAULT_MODEL: string;
