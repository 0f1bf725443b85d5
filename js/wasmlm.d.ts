// wasmlm.d.ts — hand-written types for js/wasmlm.js, the public API of wasmlm: Llama-family
// language-model inference in WebAssembly, on the CPU, in browsers and Node 20.
//
// Usage:
//
//   import { createEngine } from 'wasmlm';
//   const engine = await createEngine();                     // or createWorkerEngine() in a page
//   await engine.load({ model: 'stories260K.bin', tokenizer: 'tok512.bin',
//                       onProgress: ({ stage, loaded, total }) => {} });
//   for await (const token of engine.generate('Once upon a time', { temperature: 0.8, seed: 42 }))
//     process.stdout.write(token.text);
//   console.log(engine.lastResult);                          // stop reason, timings
//   await engine.free();
//
// Everything runs on the CPU in one wasm instance per engine; the C engine (src/wasmlm.h) does
// the parsing, the forward pass, tokenization and sampling, and is the reference for their
// details. Algorithms and their sources:
// - Transformer: Llama 2 (Touvron et al. 2023, arXiv:2307.09288): RMSNorm, rotary position
//   embeddings (Su et al. 2021, arXiv:2104.09864), grouped-query attention (Ainslie et al. 2023,
//   arXiv:2305.13245), SwiGLU feed-forward (Shazeer 2020, arXiv:2002.05202).
// - File formats: llama2.c's legacy (version 0) checkpoint and tokenizer.bin (karpathy/llama2.c);
//   GGUF v2/v3 (ggml's gguf.md), architecture "llama", F32/F16/Q8_0/Q4_0/Q4_K/Q6_K tensors.
// - Tokenizer: SentencePiece BPE (Kudo & Richardson 2018) as llama2.c's run.c implements it,
//   with byte fallback (<0xNN> tokens).
// - Sampling: temperature, top-k (Fan et al. 2018), top-p / nucleus (Holtzman et al. 2019), the
//   CTRL repetition penalty (Keskar et al. 2019), llama2.c's xorshift RNG (Marsaglia 2003):
//   temperature + top-p with a seed reproduce run.c's sampling.

/** A place to load bytes from. */
export type Source =
  /** A URL (absolute, or relative to the page / worker script in browsers), or, in Node, a
   *  file path (relative to the working directory) or a file: URL. */
  | string
  | URL
  /** Bytes in memory; they are copied into the wasm heap (the caller keeps its buffer). */
  | ArrayBuffer
  | Uint8Array
  /** A Blob or File, e.g. from <input type="file">; streamed. */
  | Blob;

/** The stable part of a status name of enum wlm_status (src/wasmlm.h). */
export type WasmlmErrorCode =
  | 'WLM_ERR_INVALID_ARG'   // -1: NULL pointer, out-of-range parameter, bad token id
  | 'WLM_ERR_NOMEM'         // -2: an allocation in wasm memory failed
  | 'WLM_ERR_FORMAT'        // -3: the bytes are not a model / tokenizer this library reads
  | 'WLM_ERR_TRUNCATED'     // -4: the file ends before the data its header announces
  | 'WLM_ERR_UNSUPPORTED'   // -5: a valid file using something not implemented (e.g. GGUF)
  | 'WLM_ERR_TOKENIZER'     // -6: no tokenizer, or one that does not match the model
  | 'WLM_ERR_CONTEXT_FULL'  // -7: the prompt does not fit in the context window
  | 'WLM_ERR_STATE'         // -8: call out of order (no model, engine busy or freed)
  | 'WLM_ERR_IO';           // JS only (status null): a download or file read failed

/**
 * An error reported by the engine.
 * - C errors: `code` is the C status name, `status` its (negative) number, and `message` the C
 *   handle's message (e.g. "truncated model: file is 100000 bytes, its header … needs 1056540").
 * - Errors detected in JS before reaching C use the C code that fits (bad parameter names or
 *   types: WLM_ERR_INVALID_ARG; engine busy, no model, freed: WLM_ERR_STATE).
 * - I/O failures: code 'WLM_ERR_IO', status null, `url` set; `httpStatus` for an HTTP error
 *   status (the message names the URL and the status, e.g. "HTTP 404 Not Found").
 * Aborts are not WasmlmErrors: they reject with a DOMException named 'AbortError'.
 */
export class WasmlmError extends Error {
  constructor(message: string, code: string, status?: number | null,
              extra?: { url?: string; httpStatus?: number; cause?: unknown });
  readonly name: 'WasmlmError';
  /** 'WLM_ERR_FORMAT' etc. */
  readonly code: WasmlmErrorCode;
  /** The C status number (-3 for WLM_ERR_FORMAT); null for WLM_ERR_IO. */
  readonly status: number | null;
  /** WLM_ERR_IO: the URL or path that failed. */
  readonly url?: string;
  /** WLM_ERR_IO from an HTTP response: its status (404, …). */
  readonly httpStatus?: number;
}

/** Options of createEngine(). */
export interface EngineOptions {
  /**
   * The wasm module: a URL / path, its bytes, or a compiled WebAssembly.Module.
   * Default: `new URL('../dist/wasmlm.wasm', import.meta.url)` (SIMD build), or
   * `../dist/wasmlm-scalar.wasm` when `simd` is false.
   */
  wasm?: string | URL | Uint8Array | ArrayBuffer | WebAssembly.Module;
  /**
   * Use the SIMD128 build and kernels (default: true when the runtime supports WebAssembly
   * SIMD, else false). false selects the scalar build, which gives the same results.
   */
  simd?: boolean;
}

/** Options of createWorkerEngine(). */
export interface WorkerEngineOptions extends EngineOptions {
  /**
   * A Worker running js/worker.js (default: `new Worker(new URL('./worker.js',
   * import.meta.url), {type: 'module'})`). Anything with postMessage, addEventListener
   * ('message' | 'error') and terminate works, e.g. an adapter around a Node worker_threads
   * Worker. Relative `wasm`, `model` and `tokenizer` strings are resolved against
   * document.baseURI in the page before they are posted.
   */
  worker?: Pick<Worker, 'postMessage' | 'addEventListener' | 'terminate'>;
}

/** Progress of load(), reported per chunk received. */
export interface LoadProgress {
  /** Which file: the model first, then the tokenizer. */
  stage: 'model' | 'tokenizer';
  /** Bytes received so far. */
  loaded: number;
  /** Size in bytes (Content-Length, file or Blob size); 0 while unknown (then, at the end, a
   *  last report gives total = loaded). */
  total: number;
}

/** Arguments of load(). */
export interface LoadOptions {
  /** The model file: llama2.c checkpoint (GGUF is recognised and rejected, WLM_ERR_UNSUPPORTED). */
  model: Source;
  /** The llama2.c tokenizer.bin matching the model's vocabulary: required with a llama2.c
   *  checkpoint; must be omitted with a GGUF file, which carries its vocabulary (else
   *  WLM_ERR_STATE). The format of `model` is detected from its bytes ("GGUF" magic). */
  tokenizer?: Source;
  /** Context length in tokens (KV cache size); 0 (default) = the model's seqLen. At most seqLen. */
  nCtx?: number;
  /** Keep keys/values per position (default true). false recomputes the whole sequence at every
   *  step: O(n²), only a baseline for benchmarks. */
  kvCache?: boolean;
  /** Called per chunk received. */
  onProgress?: (progress: LoadProgress) => void;
  /** Aborts the download / read: load() rejects with an AbortError. */
  signal?: AbortSignal;
}

/** The loaded model's hyperparameters and the context's settings. */
export interface ModelInfo {
  /** Embedding width. */
  dim: number;
  /** Feed-forward width. */
  hiddenDim: number;
  nLayers: number;
  /** Query heads. */
  nHeads: number;
  /** Key/value heads (grouped-query attention when < nHeads). */
  nKvHeads: number;
  /** Tokens in the vocabulary. */
  vocabSize: number;
  /** Longest context the model was trained for, in tokens. */
  seqLen: number;
  /** The output layer reuses the token embedding. */
  sharedClassifier: boolean;
  /** Bytes of weights read per generated token (all matrices and vectors). */
  weightBytes: number;
  /** The context length in use, in tokens. */
  nCtx: number;
  /** The SIMD build and kernels are in use. */
  simd: boolean;
  /** Bytes the context allocated in wasm memory: KV cache (2 × nLayers × nCtx × kv_dim float32)
   *  and activation buffers. */
  contextBytes: number;
  /** Size of the module's linear memory after loading, in bytes (model buffer, context, heap). */
  wasmMemoryBytes: number;
}

/** Parameters of generate() and complete(). Unknown names are rejected (WLM_ERR_INVALID_ARG). */
export interface GenerateParams {
  /** 0 = greedy (argmax); > 0 divides the logits. Default 1.0. Must be finite and >= 0. */
  temperature?: number;
  /** Keep the k most probable tokens; 0 = off (default). Integer >= 0. */
  topK?: number;
  /** Nucleus sampling: keep the smallest set of tokens whose probability exceeds p (including
   *  the one crossing it); 1 = off. Default 0.9. In (0, 1]. */
  topP?: number;
  /** CTRL repetition penalty over the last repeatLastN tokens (prompt included): positive
   *  logits are divided by it, negative ones multiplied; 1 = off (default). > 0. */
  repeatPenalty?: number;
  /** Window of the penalty, in tokens. Default 64. >= 0. */
  repeatLastN?: number;
  /** RNG seed, an integer in 0..2^53-1 (0 means a fixed non-zero constant). Default: random.
   *  The same seed, parameters, prompt and model give the same tokens. */
  seed?: number;
  /** New tokens to produce at most; 0 = until the context is full. Default 256. */
  maxTokens?: number;
  /** Strings that end the generation when the text produces them; the stop string itself is
   *  not emitted (text before it is). At most 8, each 1 to 63 bytes of UTF-8. Text that could
   *  still begin a stop string is held back until it cannot. Default []. */
  stop?: string[] | string;
  /** Prepend the BOS token to the prompt (default true). An empty prompt needs it. */
  addBos?: boolean;
}

/** One step of a generation. */
export interface Token {
  /** The sampled token id, or -1 for a last item that only releases text held back at the end
   *  (for a stop string that did not complete, or an incomplete UTF-8 tail); that item is not a
   *  token and is not counted in nGenerated. */
  id: number;
  /** Text released at this step, decoded with one streaming TextDecoder per generation: a
   *  character whose UTF-8 bytes span several tokens arrives whole, with the token holding its
   *  last byte; earlier tokens may have empty text. Concatenated, the texts are the full text. */
  text: string;
  /** The model's probability of this token: softmax of the logits after the repetition
   *  penalty, at temperature 1, before top-k / top-p (0..1). */
  prob: number;
  /** The probability with which the sampler drew it, after temperature, top-k and top-p
   *  (1 for greedy). */
  probSampled: number;
  /** Tokens in the sequence including this one (prompt + generated so far). */
  nPast: number;
}

/** Summary of a generation (engine.lastResult, and what complete() returns). */
export interface LastResult {
  /**
   * Why it ended: 'max_tokens' (maxTokens produced), 'eos' (the model sampled EOS or BOS, as
   * run.c stops; that token is not emitted), 'stop_string', 'context_full' (nCtx reached),
   * 'aborted' (AbortSignal, or the consumer stopped iterating early).
   */
  stopReason: 'max_tokens' | 'eos' | 'stop_string' | 'context_full' | 'aborted';
  /** The generated text (without the prompt). */
  text: string;
  /** Prompt tokens, BOS included. */
  nPrompt: number;
  /** Tokens generated (yielded with id >= 0). */
  nGenerated: number;
  /** Milliseconds spent tokenizing and evaluating the prompt (one wasm call). */
  prefillMs: number;
  /** Milliseconds spent in the decode steps (wasm calls only; time the consumer and the event
   *  loop take between tokens is excluded). */
  decodeMs: number;
  /** nPrompt / prefill seconds (0 when not measurable). */
  prefillTokensPerSec: number;
  /** nGenerated / decode seconds (0 when not measurable). */
  decodeTokensPerSec: number;
  /** Size of the module's linear memory when the generation ended, in bytes. */
  wasmMemoryBytes: number;
}

/** In-thread engines only: the current size of the module's linear memory in bytes (it only
   *  grows; 0 after free()). Worker engines report it in info and lastResult instead. */
  readonly wasmMemoryBytes?: number;

  /**
 * An inference engine: one model and one context (KV cache). Methods may be called while a
 * generation is being iterated only for tokenize() and detokenize(); load(), generate(),
 * evalTokens() and reset() then reject with WLM_ERR_STATE (finish, abort or break out of the
 * generation first).
 */
export interface Engine {
  /**
   * Loads a model and its tokenizer, first freeing any model loaded before. Bytes are streamed
   * into a wasm heap buffer sized from Content-Length / the file or Blob size (grown while
   * receiving when unknown); the model keeps that buffer (weights are views into it).
   * On failure nothing stays allocated, `info` is null, and load() can be called again.
   * @throws WasmlmError WLM_ERR_IO (download / read; names the URL and HTTP status),
   *   WLM_ERR_FORMAT, WLM_ERR_TRUNCATED (message gives both sizes), WLM_ERR_UNSUPPORTED,
   *   WLM_ERR_TOKENIZER (tokenizer for another vocabulary), WLM_ERR_INVALID_ARG (nCtx > seqLen),
   *   WLM_ERR_NOMEM; DOMException 'AbortError' when `signal` aborts.
   */
  load(options: LoadOptions): Promise<ModelInfo>;

  /** The loaded model's info, or null before load() / after a failed load. */
  readonly info: ModelInfo | null;

  /** The summary of the last generation that got past prefill (also set when it was aborted
   *  or broken out of, with stopReason 'aborted'), or null. */
  readonly lastResult: LastResult | null;

  /**
   * Encodes text as llama2.c's run.c does: optional BOS, SentencePiece's dummy-prefix space for
   * non-empty text, characters missing from the vocabulary as <0xNN> byte tokens, then BPE
   * merges by score.
   * @param options.bos prepend BOS (default true)
   * @throws WasmlmError WLM_ERR_STATE without a model.
   */
  tokenize(text: string, options?: { bos?: boolean }): Promise<Int32Array>;

  /**
   * The text of a token sequence: the pieces run.c prints (leading space dropped after BOS,
   * <0xNN> as raw bytes) decoded as one UTF-8 stream; BOS and EOS add no text.
   * detokenize(tokenize(s)) === s.
   * @throws WasmlmError WLM_ERR_INVALID_ARG for an id outside the vocabulary.
   */
  detokenize(ids: ArrayLike<number>): Promise<string>;

  /**
   * Generates text after `prompt` (tokenized with BOS per params.addBos, then evaluated in one
   * prefill call), yielding one Token per decode step. Lazy: nothing runs until iteration starts.
   * Between tokens the loop yields to the event loop (a macrotask), so an AbortSignal stops it
   * within one token: the iterator then throws a DOMException named 'AbortError'. Breaking out
   * of for-await ends the generation cleanly. When it ends, engine.lastResult is set.
   * @throws (from the iterator) WasmlmError WLM_ERR_INVALID_ARG (parameters out of range, with
   *   the C message naming the parameter; unknown parameter names; a prompt containing NUL), WLM_ERR_CONTEXT_FULL (prompt longer than nCtx),
   *   WLM_ERR_STATE (no model, or a generation already running).
   */
  generate(prompt: string, params?: GenerateParams,
           options?: { signal?: AbortSignal }): AsyncIterableIterator<Token>;

  /**
   * Runs generate() to the end; returns its LastResult (text included). onToken is called per
   * Token as it arrives. Rejects as generate()'s iterator throws.
   */
  complete(prompt: string, params?: GenerateParams,
           options?: { signal?: AbortSignal; onToken?: (token: Token) => void }): Promise<LastResult>;

  /**
   * Frees the model, the context and (worker engine) terminates the worker. The engine is
   * unusable afterwards (calls reject with WLM_ERR_STATE); a second free() does nothing. wasm
   * memory is returned to the JS engine once the engine object is unreachable.
   */
  free(): Promise<void>;
}

/**
 * The in-thread engine (createEngine()), with two low-level methods for tests and tools that
 * need the forward pass itself (the logits) rather than generated text.
 */
export interface InThreadEngine extends Engine {
  /**
   * Appends `ids` to the context's sequence (positions nPast…, one forward pass each; wlm_eval)
   * and returns a copy of the logits of the last one: vocabSize float32, unnormalised.
   * Continues after whatever the context holds (e.g. a finished generation); call reset()
   * first to start at position 0.
   * @throws WasmlmError WLM_ERR_INVALID_ARG (id out of range, empty ids),
   *   WLM_ERR_CONTEXT_FULL (the sequence would exceed nCtx; nothing is evaluated),
   *   WLM_ERR_STATE (no model, or a generation running).
   */
  evalTokens(ids: ArrayLike<number>): Promise<Float32Array>;

  /** Forgets the sequence: the next evalTokens() starts at position 0. */
  reset(): Promise<void>;
}

/**
 * Creates an engine that runs in the calling thread (Node, a page's main thread, or your own
 * worker). Compiles and instantiates the standalone wasm module (its only import is
 * env.emscripten_notify_memory_growth; any other import is reported as an error).
 * @throws Error when the module cannot be fetched or compiled (a runtime without SIMD needs
 *   {simd: false}); WasmlmError WLM_ERR_IO for a failed download.
 */
export function createEngine(options?: EngineOptions): Promise<InThreadEngine>;

/**
 * Creates an engine whose work runs in a module Web Worker (js/worker.js), so the page stays
 * responsive; same interface as createEngine() minus the low-level methods. Tokens arrive one
 * message each. Model and tokenizer bytes given as ArrayBuffer / Uint8Array are copied to the
 * worker (the caller's buffers stay usable); Blobs are passed by reference.
 * @throws Error in environments without Web Workers unless options.worker is given.
 */
export function createWorkerEngine(options?: WorkerEngineOptions): Promise<Engine>;
