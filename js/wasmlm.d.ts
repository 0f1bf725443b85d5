// wasmlm.d.ts — hand-written types for js/wasmlm.js, the public API of wasmlm: inference of
// small language models (Llama, Qwen, Gemma, Phi, GPT-2 architectures) in WebAssembly, on the
// CPU, in browsers and Node 20.
//
// Usage:
//
//   import { createEngine } from 'wasmlm';
//   const engine = await createEngine();                     // or createWorkerEngine() in a page
//   await engine.load({ model: 'stories260K.bin', tokenizer: 'tok512.bin',
//                       onProgress: ({ stage, loaded, total }) => {} });
//   for await (const token of engine.generate('Once upon a time',
//                                             { temperature: 0.8, topP: 0.9, seed: 42, nProbs: 5 }))
//     process.stdout.write(token.text);                      // token.top: 5 alternatives
//   console.log(engine.lastResult);                          // stop reason, timings
//
//   const batch = await engine.completeBatch('Once upon a time', { nSamples: 4, seed: 1 });
//   const { beams } = await engine.beamSearch('Once upon a time', { width: 4 });
//   await engine.free();
//
// Everything runs on the CPU in one wasm instance per engine; the C engine (src/wasmlm.h) does
// the parsing, the forward pass, tokenization, sampling, batching and beam search, and is the
// reference for their details (and for the ranges of every parameter: JS checks names and
// types, C checks values and its message names the option as you spelled it, e.g. topP).
// Algorithms and sources:
// - Transformer: Llama 2 (Touvron et al. 2023, arXiv:2307.09288): RMSNorm, rotary position
//   embeddings (Su et al. 2021, arXiv:2104.09864), grouped-query attention (Ainslie et al. 2023,
//   arXiv:2305.13245), SwiGLU feed-forward (Shazeer 2020, arXiv:2002.05202).
// - File formats: llama2.c's legacy (version 0) checkpoint and tokenizer.bin (karpathy/llama2.c);
//   GGUF v2/v3 (ggml's gguf.md), architecture "llama", F32/F16/Q8_0/Q4_0/Q4_K/Q6_K tensors.
// - Tokenizer: SentencePiece BPE (Kudo & Richardson 2018) as llama2.c's run.c implements it,
//   with byte fallback (<0xNN> tokens); GGUF vocabularies as llama.cpp's SPM tokenizer.
// - Sampling chain (GenerateParams): CTRL repetition penalty (Keskar et al. 2019,
//   arXiv:1909.05858), OpenAI's presence / frequency penalties, logit bias, top-k (Fan et al.
//   2018), locally typical sampling (Meister et al. 2022, arXiv:2202.00666), nucleus / top-p
//   (Holtzman et al. 2019, arXiv:1904.09751), min-p (Nguyen et al. 2024, arXiv:2407.01082),
//   temperature, drawn with llama2.c's xorshift RNG (Marsaglia 2003).
// - KV cache: paged blocks shared copy-on-write between sequences (vLLM's PagedAttention, Kwon
//   et al. 2023, arXiv:2309.06180); context shift as llama.cpp's (RoPE re-rotation of kept keys).
// - Beam search: Hugging Face transformers' BeamSearchScorer with early stopping.

import type { ChatCompletion, ChatCompletionChunk, ChatCompletionRequest } from './chat/chat_completion.js';
// Engine.chatCompletion's types: OpenAI's request, response and stream chunk (chat_completion.d.ts).
export type * from './chat/chat_completion.js';

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
  | 'WLM_ERR_UNSUPPORTED'   // -5: a valid file using something not implemented
  | 'WLM_ERR_TOKENIZER'     // -6: no tokenizer, or one that does not match the model
  | 'WLM_ERR_CONTEXT_FULL'  // -7: the prompt does not fit in the context window
  | 'WLM_ERR_STATE'         // -8: call out of order (no model, engine busy or freed)
  | 'WLM_ERR_IO'            // JS only (status null): a download or file read failed
  | 'WLM_ERR_CHECKSUM'      // js/models/cache.js only (status null): sha256 or size differs from the expected one
  | 'WLM_ERR_QUOTA';        // js/models/cache.js's model store only (status null): the file does not fit the storage quota

/**
 * An error reported by the engine.
 * - C errors: `code` is the C status name, `status` its (negative) number, and `message` the C
 *   handle's message (e.g. "truncated model: file is 100000 bytes, its header … needs 1056540";
 *   for an option out of range it names the option as the caller spelled it and the value,
 *   e.g. "topP must be in (0, 1], 1 = off (got 1.5)", "nCtx 9000 is outside 0..512"; in a
 *   batch it starts with "sequence N: ").
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
  /** A grammar, JSON Schema or JSON syntax error: the line (from 1) of the text it is in (the
   *  GBNF text, or the schema's JSON text — an object schema is written with
   *  JSON.stringify(schema, null, 1)); the message says which ("grammar line 3, column 7: ..."). */
  readonly line?: number;
  /** With `line`: the column, in bytes of UTF-8 from 1. */
  readonly column?: number;
}

/**
 * Options of createEngine().
 * Unknown keys are rejected: WasmlmError WLM_ERR_INVALID_ARG naming the key, the known ones
 * and a near miss (js/options.js); a key whose value is undefined counts as absent.
 */
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
  /**
   * Which build (kernels) to run. 'auto' (default): 'relaxed' (dist/wasmlm-relaxed.wasm, or
   * wasmlm-relaxed-mt.wasm with threads: integer kernels on
   * i32x4.relaxed_dot_i8x16_i7x16_add_s) where WebAssembly.validate accepts a relaxed-SIMD probe
   * AND the probe computes that instruction's known answer (Chromium, Node >= 22; this rejects
   * Node 20's --experimental-wasm-relaxed-simd, whose baseline compiler gets it wrong), else
   * 'simd128' (dist/wasmlm.wasm / wasmlm-mt.wasm; Safari, Node 20), else 'scalar'
   * (dist/wasmlm-scalar.wasm). The relaxed build gives bitwise the SIMD128 build's results on
   * quantized weights; its F32/F16 matrix products use f32x4.relaxed_madd (fused where the CPU
   * has FMA), within 1e-6 x sum|w*x| of SIMD128's per product (tests/c/test_kernels.c), so F32
   * models' logits differ from SIMD128's in the last bits. Where its file is missing (built
   * without LLVM 19) 'auto' falls back to 'simd128'.
   * A name forces that build: WLM_ERR_UNSUPPORTED where the runtime cannot run it,
   * WLM_ERR_INVALID_ARG for another string or with `simd: false` (which means 'scalar').
   * ModelInfo.build says which build runs. Ignored for the file when `wasm` is given.
   */
  build?: 'auto' | 'relaxed' | 'simd128' | 'scalar';
  /**
   * How the relaxed build computes its int8 dot products (the quantized matrix products), for
   * this engine; the results are bitwise the same, only the speed differs by CPU.
   * 'fused': i32x4.relaxed_dot_i8x16_i7x16_add_s, one instruction where the CPU has an int8 dot
   * (x64 with AVX-VNNI: Intel from Alder Lake, AMD from Zen 5; arm64, e.g. every Apple M chip),
   * 5-6 on other x64 CPUs. 'split': an i16x8 relaxed dot, i32x4.dot_i16x8_s by ones and an add,
   * 3 instructions everywhere (which is faster depends on the CPU and the JS engine: on an AMD
   * Zen 4, split in Chromium 156, fused in Node 24). 'fused' and 'split' set the form of every
   * kernel. 'auto' (default): at the first load(), both forms are timed twice, alternating runs
   * until the fastest of each is stable: the matrix-vector kernels (decode) on a 17 KiB Q8_0
   * matrix, and apart from them the matrix-matrix kernels (prefill, batches, beams; their split
   * form also keeps the Q4_0 / Q4_1 / Q5_0 / Q5_1 sums in int16, so it can win where the
   * matrix-vector one loses: AMD Zen 4 in Node 24, 1.1-1.34x) on a 32 x 512 Q8_0 and a 128 x 512
   * Q5_0 matrix by four entries; 'split' is taken for each where it is over 2 % faster, else 'fused'
   * (4-15 ms in all on an AMD Zen 4 core). ModelInfo.dotForm and dotFormBatch say which run,
   * ModelInfo.dotProbe what the timing measured. Accepted and ignored by the other builds
   * (ModelInfo.dotForm 'none'); another value is WLM_ERR_INVALID_ARG.
   */
  dotForm?: 'auto' | 'fused' | 'split';
  /**
   * Whether the quantized matrix-vector kernels (decode) read their rows ahead of what they
   * compute (wasm has no prefetch instruction: they touch one byte of each row stream some
   * blocks ahead; src/kernels/quant_simd/common.h). The same results bit for bit either way; which is
   * faster depends on the CPU (an Intel Xeon gained from it, an AMD Zen 4 lost 2-16 % of decode:
   * bench/README.md 2026-11-28). 'auto' (default): after each load() the first CPU decode steps
   * of generate() alternate the two (4 untimed, then 8 timed of each) and the faster is kept
   * (off only when its median step is 2 % faster); true / false: always on / off.
   * LastResult.readAhead says what was chosen. Another value is
   * WLM_ERR_INVALID_ARG.
   */
  readAhead?: 'auto' | boolean;
  /**
   * Which backend runs the forward pass of the models this engine loads (preview; README,
   * "WebGPU backend"). 'cpu': the wasm engine's own (src/model/forward.c). 'webgpu': the GPU
   * through WebGPU (js/backend/webgpu/): a GGUF's weight matrices stream from the source (URL,
   * Blob, file path, split parts) to GPU buffers chunk by chunk, one buffer per matrix, quantized
   * types staying quantized; the wasm heap receives only the header (key/values, vocabulary,
   * tensor directory) and the float vectors (norms, biases, RoPE factors), so a model on the GPU
   * is bounded by the adapter's limits, not by wasm32's 4 GB (see gpuWeights). The KV cache
   * lives in GPU memory, and each step's logits come back to the wasm engine, which keeps
   * tokenizing, sampling, grammars, stop strings and the prompt cache.
   * load() rejects with WasmlmError WLM_ERR_UNSUPPORTED naming what is missing (no WebGPU in the
   * runtime, no adapter, a weight type without GPU kernels, a buffer above the adapter's
   * maxStorageBufferBindingSize / maxBufferSize, naming the tensor and the limit) or
   * WLM_ERR_NOMEM (GPU memory), decided before any weight is read: never a silent fall-back.
   * Once the weights stream, a failure is an error for either choice, with the engine left
   * without a model and able to load again: WLM_ERR_TRUNCATED naming the tensor the file ends
   * in, WLM_ERR_FORMAT (a NaN / Inf in a float weight, named), WLM_ERR_STATE (the device lost
   * while streaming), an AbortError. 'auto' (default): WebGPU only on a real adapter (not the fallback adapter, not a
   * software rasterizer such as SwiftShader) for a model it can run, else the CPU; ModelInfo.backend
   * says which runs and ModelInfo.backendReason why; the choice is made from the file's header,
   * before its weights are read, so the CPU then reads the file as usual (a download is not
   * fetched twice). LoadOptions.backend overrides it per load.
   * Not yet on the GPU (WLM_ERR_UNSUPPORTED there, a later step): embeddings, kvCache: false
   * ('auto' takes the CPU for the last). generateBatch() and beamSearch() (nSeqMax sequences),
   * contextShift and speculative decoding (GenerateParams.draft) run there too. A GGUF that needs more than wasm32's 4 GB on the
   * CPU goes with 'auto' to a real adapter in the wasm32 module (its weights and KV cache on the
   * GPU); only when the GPU refuses it (before its weights are read) does load() move to the
   * memory64 module, or, in a runtime without memory64, fail with WLM_ERR_NOMEM naming both.
   * The GPU device lost mid-generation ends that generation with WLM_ERR_STATE ("the GPU device
   * was lost"), as does a GPU command that failed ("a GPU command failed": its results are never
   * used); load() again (either backend) to go on. Another value is WLM_ERR_INVALID_ARG.
   */
  backend?: 'auto' | 'webgpu' | 'cpu';
  /**
   * The WebGPU entry point (a GPU object): default navigator.gpu; in Node, where there is none,
   * with backend 'webgpu' the optional `webgpu` package's create([]) when it is installed
   * ('auto' in Node uses the GPU only when given `gpu`: it never starts Dawn by itself). Not for
   * createWorkerEngine(), whose worker uses its own navigator.gpu.
   */
  gpu?: { requestAdapter(options?: object): Promise<unknown> };
  /** false: the WebGPU kernels do not use the adapter's subgroups feature even when it has
   *  one (the shared-memory reduction instead; for tests and comparisons). Default true. */
  gpuSubgroups?: boolean;
  /**
   * How a GGUF's weights reach the GPU with the WebGPU backend. 'stream' (default): from the
   * source straight to GPU buffers (writeBuffer calls of at most 8 MB, a wait for the queue
   * every 64 MB); the wasm heap holds the header, vocabulary and vectors, not the file. 'heap':
   * the whole file is read into the wasm heap and the CPU model loaded first, then the weights
   * copied to the GPU (the first form of the backend; for comparisons, and what a llama2.c
   * checkpoint or a load with `tokenizer` always uses). Another value is WLM_ERR_INVALID_ARG.
   */
  gpuWeights?: 'stream' | 'heap';
  /**
   * Whether the engine runs a memory64 (wasm64) module, for models past wasm32's 4 GB of wasm
   * memory. 'auto' (default): load() reads the model's header first (GGUF key/values, or a
   * llama2.c checkpoint's 28 bytes; a download's first chunks are kept, not fetched again) and estimates what the model will
   * take: the file (weights) + the KV cache of one sequence of nCtx positions in kvType + the
   * activations, logits and vocabulary tables (js/runtime/memory64.js, modelBytes: within 1 % of
   * ModelInfo.contextBytes), plus load()'s mmproj (its file and its encoder's scratch, from its
   * header: visionBytes), plus the most the context can allocate later: a hybrid's recurrent
   * states, their snapshots and speculative decoding's per-position copies (recurrentBytes), the
   * logits rows of a speculative verification or a batch, and the pass buffers an mmproj's
   * non-causal image grows (Gemma 3's 256 rows). While that fits 97 % of 4 GB the engine runs wasm32's build;
   * otherwise it moves to that build's memory64 twin (dist/wasmlm64.wasm, wasmlm64-mt.wasm,
   * wasmlm64-relaxed.wasm, wasmlm64-relaxed-mt.wasm), re-instantiating the module and its
   * helper threads before reading the model, and back for a later model that fits. Runtimes
   * with memory64: Chromium >= 133, Firefox >= 134, Node >= 24, up to 16 GiB of wasm memory
   * (V8's limit); where the runtime has none (Safari, Node 20) a model that does not fit is
   * WLM_ERR_NOMEM before anything is read, naming the sizes (weights, KV cache, scratch, the
   * mmproj), the files (with an mmproj: both) and the reason. `true`: the memory64 build from the start (WLM_ERR_UNSUPPORTED without
   * memory64 or with `build: 'scalar'`); `false`: always wasm32 (a model that does not fit
   * fails in C, with its sizes). In the memory64 modules the weights lie above the heap the
   * model's tables, the scratch and JS's blocks come from, which is sized from the estimate
   * and stays below 4 GB (a KV cache too large for it goes above the weights). The results
   * are bitwise those of the wasm32 build; it
   * runs 2-10 % slower (bench/README.md, 2026-11-27: stories110M decode Q4_K 0.98, Q8_0
   * 0.91). ModelInfo.memory64 says which ran. With `wasm` given, its module is kept whichever
   * it is (a memory64 one is recognised by its `wasmlm.abi` section). A draft model
   * (Engine.loadDraft) is not counted here — load() has no option for one — and later fits
   * beside the model in the module load() chose, or is refused: `true` leaves it room past 4 GB.
   */
  memory64?: 'auto' | boolean;
  /**
   * Threads that run the matrix products (wlm_threadpool, src/wasmlm.h): every weight-matrix
   * product of the forward pass is split into `threads` row ranges, one per thread, the
   * engine's own thread included, and each token's attention by heads; norms, RoPE and
   * sampling stay on the engine's thread.
   * Results are bitwise identical for every thread count. With more than one thread the engine
   * loads the threaded build (dist/wasmlm-mt.wasm: SIMD128, atomics, a shared memory of up to
   * 4 GiB) and starts `threads - 1` helpers running js/runtime/thread.js (Node worker_threads, or
   * module Workers in a browser) on the same memory; free() stops them. Idle helpers spin for
   * about a millisecond after each product, then sleep.
   *
   * Browsers allow shared memory only on cross-origin isolated pages (served with
   * `Cross-Origin-Opener-Policy: same-origin` and `Cross-Origin-Embedder-Policy: require-corp`,
   * as `npm start` does).
   *
   * 'auto' (default): every core the runtime reports, up to 16 (WLM_MAX_THREADS); in a browser
   * with more than 4 cores one fewer, left to the page's main thread — where threads can run
   * (Node; isolated pages) with the SIMD build; 1 elsewhere (no error). Prefill is bound by
   * arithmetic and gains from every core; decode by memory bandwidth, which a few cores
   * saturate. (Until 2026-11-27: at most 4. Above 2 cores the rule is reasoned, not measured:
   * bench/README.md.) A number: that many, clamped to the cores the runtime
   * reports (Node: os.availableParallelism(); browsers: navigator.hardwareConcurrency) and to
   * 16 (WLM_MAX_THREADS): more threads than cores only wait for each other. The number used is
   * engine.threads (and ModelInfo.threads); e.g. `threads: 8` on a 2-core machine gives 2.
   * The helpers start in the background: the engine is returned at once, and every forward
   * pass (a generation, batch, beam search, evalTokens) that begins once they all run uses them;
   * one that begins earlier, e.g. a first generation right after a quick load, runs on one
   * thread (bitwise the same results; `threads` already says the final number). If they cannot
   * start (the pool cannot be allocated, a helper fails or is not running within 30 s), load()
   * and those calls reject with that error from then on: free the engine, create another.
   * Errors: WLM_ERR_INVALID_ARG (not 'auto' or an integer >= 1), WLM_ERR_UNSUPPORTED (more
   * than 1 after clamping where threads cannot run: the page is not cross-origin isolated,
   * `simd: false`, or a `wasm` module other than the threaded build), WLM_ERR_NOMEM.
   */
  threads?: number | 'auto';
}

/**
 * Options of createWorkerEngine().
 * Unknown keys are rejected in the page, before the worker starts: WasmlmError
 * WLM_ERR_INVALID_ARG 'createWorkerEngine(): unknown option "x" (known: …)' (js/options.js).
 * The engine's methods reject unknown keys with the same messages as the in-thread engine's
 * (checked in the page, or in the worker and carried back).
 */
export interface WorkerEngineOptions extends EngineOptions {
  /**
   * A Worker running js/worker/worker.js (default: `new Worker(new URL('./worker/worker.js',
   * import.meta.url), {type: 'module'})`). Anything with postMessage, addEventListener
   * ('message' | 'error') and terminate works, e.g. an adapter around a Node worker_threads
   * Worker. Relative `wasm`, `model` and `tokenizer` strings are resolved against
   * document.baseURI in the page before they are posted.
   */
  worker?: Pick<Worker, 'postMessage' | 'addEventListener' | 'terminate'>;
  /**
   * Warm up the worker's engine (default false): right after it starts, the worker runs
   * InThreadEngine.warmUp() once, a throw-away generation on a tiny built-in model, so that
   * the browser compiles the code of a first generation while the page is still downloading
   * the model rather than when the user waits for the first token. A load() that arrives
   * meanwhile waits for it, so it pays off only when the download takes longer than the
   * warm-up (a model from the network, not from localhost or the cache: bench/README.md, "Time
   * to first token"). engine.warmup says what it did.
   */
  warmup?: boolean;
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

/**
 * Arguments of load().
 * Unknown keys are rejected: WasmlmError WLM_ERR_INVALID_ARG naming the key, the known ones
 * and a near miss (js/options.js); a key whose value is undefined counts as absent.
 */
export interface LoadOptions {
  /** The model file: a llama2.c checkpoint or a GGUF file (detected from its bytes). A split
   *  GGUF (llama.cpp's gguf-split: NAME-00001-of-0000N.gguf, …) is a list of its parts (paths,
   *  URLs, Blobs or bytes, in any order: each part's split.no decides), or the first part's path
   *  or URL alone (the others are named beside it); the parts are streamed into one buffer
   *  behind a merged header (js/models/split.js), each downloaded once. A set that is not one whole split
   *  model (a part missing, repeated, or of another split) is WLM_ERR_INVALID_ARG; a part
   *  that cannot be read, WLM_ERR_IO. The model is streamed into wasm memory chunk by chunk
   *  after its header was read (to size it: EngineOptions.memory64; a download's first chunks
   *  are kept for that, not fetched again), with no whole copy of it in JS memory. */
  model: Source | Source[];
  /** The llama2.c tokenizer.bin matching the model's vocabulary: required with a llama2.c
   *  checkpoint; must be omitted with a GGUF file, which carries its vocabulary (else
   *  WLM_ERR_STATE). */
  tokenizer?: Source;
  /** The model's vision encoder + projector: llama.cpp's "mmproj" GGUF (general.architecture
   *  "clip"), any Source. Projectors: 'gemma3' (Gemma 3), 'idefics3' (SmolVLM), 'lfm2'
   *  (LFM2-VL) and 'qwen2.5vl_merger' (Qwen2.5-VL, with a 'qwen2vl' text model); another is
   *  refused naming it (WLM_ERR_UNSUPPORTED), a file whose projector width is not the model's
   *  (an mmproj of another model) is WLM_ERR_INVALID_ARG. With the WebGPU backend the text model
   *  takes the image rows of all four on the GPU (Qwen2.5-VL's at their M-RoPE grid
   *  positions), encoded there too (VisionInfo.encoder). Then generate(prompt, {images}), chat() and
   *  chatCompletion() take images; see ModelInfo.vision. Counted with the model when the
   *  engine picks wasm32 or memory64 (EngineOptions.memory64). */
  mmproj?: Source;
  /** Context length in tokens; 0 (default) = the model's seqLen. At most seqLen. */
  nCtx?: number;
  /** Keep keys/values per position (default true). false recomputes the whole sequence at every
   *  step: O(n²), only a baseline for benchmarks; batches and beam search need the cache. */
  kvCache?: boolean;
  /**
   * Sequences the context holds at once, 1..64 (default 1). generateBatch() needs one per
   * sequence and beamSearch() 2 × width; when a call needs more, the context is recreated
   * with exactly that many (between calls, so nothing is lost), so this only saves that
   * recreation. Costs little up front: the KV cache is paged, blocks of 16 positions are
   * allocated when a sequence first uses them (one full sequence is allocated at load) and kept
   * for reuse afterwards. On the WebGPU backend the GPU cache holds nSeqMax full sequences.
   */
  nSeqMax?: number;
  /**
   * Element type of the KV cache: 'f16' (default, as llama.cpp: half the memory; logits differ
   * from an F32 cache by ~1e-2 on stories260K, greedy text unchanged there) or 'f32' (exact
   * float32 keys and values; faster attention on long contexts, as wasm has no f16 arithmetic).
   */
  kvType?: 'f16' | 'f32';
  /** The backend for this model (EngineOptions.backend), overriding the engine's option: e.g.
   *  'cpu' after the GPU device was lost. */
  backend?: 'auto' | 'webgpu' | 'cpu';
  /** Called per chunk received. */
  onProgress?: (progress: LoadProgress) => void;
  /** Aborts the download / read: load() rejects with an AbortError. */
  signal?: AbortSignal;
}

/** The loaded model's hyperparameters and the context's settings (as of load()). */
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
  /** Bytes of weights read per forward pass (all matrices and vectors; of a mixture of experts,
   *  the router and the nExpertUsed chosen experts' matrices: its active weights). */
  weightBytes: number;
  /** A mixture of experts' experts per MoE layer (0 for a dense model). */
  nExpert: number;
  /** Experts each token uses (top k), 0 for a dense model. */
  nExpertUsed: number;
  /** Layers with a KV cache: nLayers, or fewer in a hybrid (Qwen3.5's Gated DeltaNet layers,
   *  LFM2's short convolutions keep a recurrent state instead). */
  attnLayers: number;
  /** A hybrid's recurrent state per sequence, in bytes, whatever the context length (0 for a
   *  transformer). The state cannot be cut back to an earlier position: the engine keeps a
   *  copy at the end of each prompt for the next turn of a chat. */
  stateBytes: number;
  /** The context length in use, in tokens. */
  nCtx: number;
  /** The SIMD build and kernels are in use. */
  simd: boolean;
  /** The build's kernels (EngineOptions.build resolved; from the module itself). */
  build: 'relaxed' | 'simd128' | 'scalar';
  /** The model runs in a memory64 (wasm64) module (EngineOptions.memory64 resolved for this
   *  model: the model did not fit wasm32's 4 GB, or `memory64: true`). */
  memory64: boolean;
  /** The relaxed build's int8 dot form in use (EngineOptions.dotForm resolved); 'none' in the
   *  other builds. */
  dotForm: 'fused' | 'split' | 'none';
  /** The same for the matrix-matrix kernels (prefill, batches, beams). */
  dotFormBatch: 'fused' | 'split' | 'none';
  /** What EngineOptions.dotForm 'auto' measured at the first load(): the fastest run of each form
   *  (ms) and the rounds run (one run of each; 3 to 10, until both minima are stable), for the
   *  matrix-vector kernels and (batch*) the matrix-matrix ones, and the probe's whole time (ms);
   *  null when no probe ran (a form was given, or not the relaxed build). */
  dotProbe: { fusedMs: number; splitMs: number; rounds: number; batchFusedMs: number;
    batchSplitMs: number; batchRounds: number; ms: number } | null;
  /** The KV cache's element type (LoadOptions.kvType). */
  kvType: 'f16' | 'f32';
  /** The backend running the forward pass (EngineOptions.backend resolved). */
  backend: 'cpu' | 'webgpu';
  /** Why: "backend 'cpu' was asked for", "auto: a WebGPU adapter (NAME)", "auto: the WebGPU
   *  adapter is a fallback one (SwiftShader driver 5.0.0), slower than the CPU path", "auto: this
   *  runtime has no WebGPU …", … */
  backendReason: string;
  /** The WebGPU adapter's name (its description, or vendor and architecture) when one was
   *  found, else null. */
  gpuAdapter: string | null;
  /** Bytes of GPU memory the model holds with the WebGPU backend (weights, KV cache of nCtx
   *  positions, activations), else 0. */
  gpuBytes: number;
  /** Threads running the matrix products (EngineOptions.threads resolved and clamped to the
   *  cores: what the engine uses). */
  threads: number;
  /** Bytes the context had allocated in wasm memory after load(): the KV cache blocks of one
   *  full sequence (2 × nLayers × nCtx × kv_dim elements of kvType, kv_dim = dim × nKvHeads / nHeads,
   *  rounded up to whole blocks) and activation buffers. kvStats() gives the current figure. */
  contextBytes: number;
  /** Size of the module's linear memory after loading, in bytes (model buffer, context, heap). */
  wasmMemoryBytes: number;
  /** GGUF general.name, or null (llama2.c checkpoints have no metadata). */
  name: string | null;
  /** GGUF general.architecture ('llama', ...), or null. */
  architecture: string | null;
  /** The file's chat template (GGUF tokenizer.chat_template, Jinja source), or null: chat()
   *  renders it. */
  chatTemplate: string | null;
  /** BOS and EOS token ids (-1 when the vocabulary has none). */
  bosId: number;
  eosId: number;
  /** The BOS and EOS tokens as the vocabulary writes them ('<s>', '<|begin_of_text|>',
   *  '<|im_end|>'): what chat templates receive as bos_token / eos_token. */
  bosToken: string;
  eosToken: string;
  /** Tokenizing with bos: true adds BOS (the vocabulary's add_bos_token). */
  addBos: boolean;
  /** Floats of one embedding (the model's width): the length of embed()'s vectors. */
  embeddingLength: number;
  /** How the model file says to pool hidden states into one embedding (<arch>.pooling_type,
   *  llama.cpp's values): 'none' when it says nothing (not an embedding model: embed() then
   *  needs options.pooling), 'mean' (all-MiniLM), 'cls' (bge), 'last' (Qwen3-Embedding),
   *  'rank' (a reranker: use rerank()). */
  pooling: Pooling;
  /** false for an encoder (BERT, nomic-bert: bidirectional attention, no next-token classifier):
   *  generate(), chat() and beamSearch() reject it with WLM_ERR_UNSUPPORTED. */
  generative: boolean;
  /** Scores per (query, document) pair with a reranker's head (tensors cls / cls.output);
   *  0 when the model has none (rerank() then rejects). */
  rankOutputs: number;
  /** The vision model of load()'s mmproj, or null. */
  vision: VisionInfo | null;
}

/** The loaded mmproj (src/wasmlm.h wlm_vision_info). */
export interface VisionInfo {
  /** 'gemma3', 'idefics3', 'lfm2' or 'qwen2.5vl_merger'. */
  projector: string;
  /** The encoder's square side S in pixels (lfm2, qwen2.5vl_merger: the file's value; their
   *  pieces take the image's own aspect), and its patch side. */
  imageSize: number;
  patchSize: number;
  /** Encoder width, blocks, heads. */
  nEmbd: number;
  nLayers: number;
  nHeads: number;
  /** Width of the image rows: the text model's dim. */
  projDim: number;
  /** Pooling kernel (gemma3) or pixel-shuffle factor (idefics3, lfm2). */
  scaleFactor: number;
  /** idefics3: the resized image's longest edge (tiles of S); 0 without tiles. */
  longestEdge: number;
  /** Rows per S×S piece (Gemma 3: 256 for the real model; lfm2's one piece per image has its
   *  own size: 64..256 rows, depending on the image). */
  pieceTokens: number;
  /** Bytes of the mmproj file. */
  bytes: number;
  /** Where images are encoded: 'webgpu' when the text model runs on the GPU and the GPU encoder
   *  (js/backend/webgpu/vision.js) takes this mmproj, else 'cpu'. */
  encoder: 'cpu' | 'webgpu';
  /** Why the encoder is the CPU's ('' on the GPU): the text model's backend, or the GPU
   *  encoder's refusal (an adapter limit, a weight type it does not read). */
  encoderReason: string;
}

/**
 * An image, in any of these forms: encoded bytes (PNG or JPEG in Node; in a page any format the
 * browser decodes), a Blob / File, an ImageBitmap (pages), raw pixels {width, height, data}
 * (8-bit RGB or RGBA, row-major: an ImageData), or a URL string: data:, blob:, http(s):, and in
 * Node a file path. Decoded to 8-bit RGB as llama.cpp's stb_image gives it: grey replicated,
 * alpha dropped (not composited onto a background), 16-bit samples cut to their high byte.
 * Node decodes with pngjs / jpeg-js, pages with createImageBitmap + OffscreenCanvas (JPEG
 * decoders differ from stb_image's by small amounts). Refused with WLM_ERR_INVALID_ARG naming
 * it: undecodable bytes, and before decoding a declared size over 16384 pixels a side or 2^26
 * pixels in all (the limits of wlm_image_encode).
 */
export type ImageInput = Uint8Array | ArrayBuffer | ArrayBufferView | Blob | ImageBitmap | string |
  { width: number; height: number; data: Uint8Array | Uint8ClampedArray };

/** How a text's hidden states become one vector (llama.cpp's pooling types): 'none' one vector
 *  per token, 'mean' their average, 'cls' the first token's, 'last' the last token's, 'rank' a
 *  reranker's classifier head on the first token (a decoder reranker's, Qwen3-Reranker: the
 *  last token's). */
export type Pooling = 'none' | 'mean' | 'cls' | 'last' | 'rank';

/**
 * Options of Engine.embed.
 * Unknown keys are rejected: WasmlmError WLM_ERR_INVALID_ARG naming the key, the known ones
 * and a near miss (js/options.js); a key whose value is undefined counts as absent.
 */
export interface EmbedOptions {
  /** Overrides the model's pooling (ModelInfo.pooling). 'rank' is rerank()'s. */
  pooling?: 'none' | 'mean' | 'cls' | 'last';
  /** true (default): each vector scaled to unit Euclidean length, so a dot product is the
   *  cosine similarity; false: raw; a number: llama.cpp's --embd-normalize (-1 none, 0 max
   *  absolute value 32760, 1 taxicab, 2 Euclidean, p > 2 the p-norm). */
  normalize?: boolean | number;
  /** Aborts between batches of 16 texts: the promise rejects with an AbortError. */
  signal?: AbortSignal;
}

/** One document's score from Engine.rerank. */
export interface RerankResult {
  /** The document's position in the array given to rerank(). */
  index: number;
  /** The reranker's score, higher is more relevant: a cross-encoder's cls.output, unnormalized;
   *  Qwen3-Reranker's probability of "yes" (a softmax over its "yes" / "no" rows, 0..1). */
  score: number;
}

/** Why a generation (or one sequence of a batch, or a beam) ended. */
export type StopReason =
  /** maxTokens new tokens were produced. */
  | 'max_tokens'
  /** The model sampled EOS (or BOS, as run.c stops); that token is not emitted. */
  | 'eos'
  /** The text produced one of `stop`; the stop string is not emitted (text before it is). */
  | 'stop_string'
  /** The sequence reached nCtx (without contextShift). */
  | 'context_full'
  /** An AbortSignal, or the consumer stopped iterating early. */
  | 'aborted';

/**
 * Order of the sampler stages (enum wlm_sampler_order):
 * - 'llamacpp' (default): penalties → logit bias / bans → top-k → typical-p → top-p → min-p →
 *   temperature → draw (llama.cpp's default chain: the filters see the untempered distribution).
 * - 'runc': penalties → logit bias / bans → temperature → top-k → typical-p → top-p → min-p →
 *   draw: llama2.c run.c's order; with topP alone and a seed it reproduces run.c's tokens.
 */
export type SamplerOrder = 'llamacpp' | 'runc';

/**
 * Parameters of generate() and complete(): the sampler chain of src/wasmlm.h (wlm_gen_params),
 * each stage off at its neutral value. With z the logits and p = softmax(z) over the tokens
 * still candidates (renormalised after every filter; ties resolve to the lower token id):
 *  1. repeatPenalty r: z_t / r if z_t > 0 else z_t × r, once per distinct token of the window;
 *  2. presencePenalty, frequencyPenalty: z_t -= c_t × frequency + (c_t > 0) × presence, c_t the
 *     count of t in the window (OpenAI's definitions);
 *  3. logitBias, bannedTokens;
 *  4. temperature 0: greedy (argmax after 1–3; the filters are skipped);
 *  5. topK, 6. typicalP, 7. topP, 8. minP, 9. temperature, 10. the draw — in samplerOrder.
 * Unknown names are rejected ('generate(): unknown option "x" (known: …)', the call's name
 * first: complete(), chat(), …), as are values of the wrong type (a string
 * for a number, a fraction for an integer field) and, by C, values out of range or NaN (the
 * message names the C field, e.g. min_p). The unknown-key check is js/options.js's (the key,
 * the known ones, a near miss); a key whose value is undefined counts as absent.
 */
export interface GenerateParams {
  /** >= 0, finite; 0 = greedy (argmax). Default 1.0. */
  temperature?: number;
  /** Keep the k most probable tokens; integer >= 0, 0 = off (default). */
  topK?: number;
  /** Nucleus: keep the shortest prefix (by p descending) whose mass exceeds p (at least one
   *  token). In (0, 1]; 1 = off. Default 0.9 (run.c's). */
  topP?: number;
  /** Keep t with p_t >= minP × max p. In [0, 1]; 0 = off (default). */
  minP?: number;
  /** Locally typical sampling: sort by |−ln p_t − H(p)| ascending, keep the shortest prefix of
   *  mass >= typicalP. In (0, 1]; 1 = off (default). */
  typicalP?: number;
  /** CTRL repetition penalty over the last repeatLastN tokens (prompt included): positive
   *  logits divided by it, negative ones multiplied. > 0; 1 = off (default). */
  repeatPenalty?: number;
  /** Window of the three penalties, in tokens (prompt included). Integer >= 0, default 64. */
  repeatLastN?: number;
  /** Subtracted once from the logit of every token present in the window. Finite; 0 = off
   *  (default); OpenAI's range is -2..2. */
  presencePenalty?: number;
  /** Subtracted from a token's logit per occurrence in the window. Finite; 0 = off (default). */
  frequencyPenalty?: number;
  /**
   * Added to the logits of the given token ids before the filters: an object {tokenId: bias},
   * a Map, or an array of [tokenId, bias] pairs (at most 1024 entries). -Infinity bans the
   * token; other biases must be finite. Ids must be in the vocabulary. If bias and bans leave
   * no token, the step fails with WLM_ERR_INVALID_ARG.
   */
  logitBias?: Record<number, number> | Map<number, number> | Array<[number, number]>;
  /** Token ids never sampled (at most 1024; ids in the vocabulary). */
  bannedTokens?: ArrayLike<number> | Iterable<number>;
  /** Order of the stages; default 'llamacpp'. See SamplerOrder. */
  samplerOrder?: SamplerOrder;
  /** Alternatives reported per token in Token.top: integer 0..20, default 0 (no `top`). */
  nProbs?: number;
  /** RNG seed, an integer in 0..2^53-1 (0 means a fixed non-zero constant). Default: random.
   *  The same seed, parameters, prompt and model give the same tokens. */
  seed?: number;
  /** New tokens to produce at most; integer >= 0, 0 = no limit (until EOS, a stop string or a
   *  full context). Default 256. */
  maxTokens?: number;
  /** Strings that end the generation when the text produces them, also across token
   *  boundaries; the stop string itself is not emitted (text before it is). At most 8, each 1
   *  to 63 bytes of UTF-8. Text that could still begin a stop string is held back until it
   *  cannot. Default []. */
  stop?: string[] | string;
  /** Prepend the BOS token to the prompt (default true). An empty prompt needs it. */
  addBos?: boolean;
  /**
   * When the sequence fills nCtx: false (default) ends with stopReason 'context_full'; true
   * shifts the context instead (keeps the first nKeep tokens, drops half of the rest, re-rotates
   * the kept keys, as llama.cpp's context shift) and goes on. Needs kvCache. On the WebGPU
   * backend the cache's rows move on the GPU (the keys re-rotated there) before the next step.
   */
  contextShift?: boolean;
  /** Tokens kept at the start by a context shift: integer 0..nCtx-2, default 0 (1 keeps BOS). */
  nKeep?: number;
  /**
   * Reuse the KV cache of the previous generation (its prompt and generated tokens) for the
   * longest common prefix with this prompt, and prefill only the rest (llama.cpp server's
   * cache_prompt). Results are bitwise the same as without it; lastResult.nCached says how many
   * prompt tokens were reused. Default false for generate(), true for chat().
   * A hybrid model's recurrent state (Qwen3.5, LFM2) cannot be cut back: it is resumed from a
   * copy kept at the previous prompt's end or its stateCheckpoint (the latest at or before
   * where the prompts diverge), the tokens after it prefilled again.
   */
  cachePrompt?: boolean;
  /**
   * Hybrid models: a prompt position (tokens, 0 < n < the prompt's length) where the recurrent
   * state is copied during the prefill, beside the copy at the prompt's end, for a later prompt
   * that diverges after it. chat() and chatCompletion() set it to where the conversation's last
   * turn ends (templates that re-render an answer, dropping its reasoning, diverge right
   * there). Default 0: none; ignored by transformers.
   */
  stateCheckpoint?: number;
  /** Control tokens written in the prompt ('<|im_start|>') become their ids (llama.cpp's
   *  parse_special); default false: plain text. chat() sets it. */
  parseSpecial?: boolean;
  /**
   * Structured output: a grammar in llama.cpp's GBNF (rules `name ::= ...`, start rule `root`;
   * src/wasmlm.h "Grammars" lists the syntax). Every token whose text cannot continue a sentence
   * of the grammar is refused; end of generation is allowed exactly when the text is a complete
   * sentence, and the generation ends by itself when nothing else can follow. The distribution
   * is the sampler chain's, renormalised over the allowed tokens. Other stops (maxTokens, stop
   * strings) can still cut a sentence short: check stopReason === 'eos'. A grammar that does not
   * compile rejects with WLM_ERR_INVALID_ARG and the error's line / column. Not with jsonSchema.
   */
  grammar?: string;
  /**
   * Structured output: a JSON Schema (an object, true, or its JSON text) the output must be a
   * JSON value of, converted to a grammar in C (Engine.jsonSchemaToGrammar shows the grammar;
   * src/wasmlm.h wlm_json_schema_to_grammar lists the supported keywords: type, properties,
   * required, additionalProperties: false, items, enum, const, anyOf, oneOf, minItems,
   * maxItems, minLength, maxLength, pattern (a subset), $ref to $defs). Unsupported keywords
   * reject with WLM_ERR_UNSUPPORTED naming the keyword, its line / column and JSON pointer,
   * unless jsonSchemaStrict is false. Not with grammar.
   */
  jsonSchema?: object | boolean | string;
  /** false: ignore the schema's unsupported keywords (the output may then violate them)
   *  instead of rejecting. Default true. */
  jsonSchemaStrict?: boolean;
  /**
   * A lazy grammar (src/wasmlm.h "Lazy grammars"; llama.cpp's idea): `grammar` / `jsonSchema`
   * stays dormant, the text free, until one of grammarTriggers is generated — a token id, or a
   * word (1..63 bytes) found in the generated text, possibly across tokens. The grammar then
   * holds from the trigger on: it is advanced over the trigger token's text, or over the text
   * from the word's first byte, so it should begin with that text (a control token writes
   * none). If that text does not follow the grammar, it stays dormant (no error). Default
   * false. Needs a grammar and at least one trigger. chatCompletion uses it for tool calls.
   */
  grammarLazy?: boolean;
  /** The triggers of a lazy grammar: token ids and words, at most 8. */
  grammarTriggers?: (number | string)[];
  /**
   * Arming a lazy grammar (src/wasmlm.h "Arming"; llama.cpp anchors its trigger patterns after
   * "</think>" for the same reason): with grammarArms, the triggers count only once one of them
   * (a token id, or a word in the generated text, possibly across tokens) has been generated,
   * and until one of grammarDisarms is; a trigger word counts only when it begins after the
   * arming word ends. So a call marker the model writes inside its reasoning does not wake the
   * grammar. At most 4 each (words 1..63 bytes); grammarDisarms needs grammarArms; all need
   * grammarLazy. chatCompletion sets them: "</think>" (and its control token) when the prompt
   * ends inside an open <think>; also disarmed by a leading "<think>" (grammarStartArmed
   * 'lead') when the model may open one itself; gpt-oss: armed by "<|channel|>", disarmed by
   * "<|message|>" (a call's recipient is in a message's header, never its text).
   */
  grammarArms?: (number | string)[];
  /** Markers that disarm a lazy grammar's trigger search (see grammarArms), at most 4. */
  grammarDisarms?: (number | string)[];
  /** With grammarArms: true starts the search armed (default false: disarmed, the prompt
   *  leaves the reasoning open); 'lead' armed, grammarDisarms then counting only as the
   *  generated text's first non-whitespace (a reasoning block the model may open itself, as
   *  llama.cpp's optional leading "<think>…</think>"). */
  grammarStartArmed?: boolean | 'lead';
  /** Speculative decoding (generate(), complete() and chat() only): see DraftParams. */
  draft?: DraftParams;
  /**
   * Images in a raw prompt (generate() and complete(); needs load()'s mmproj): each media
   * marker `<__media__>` (llama.cpp's default) in the prompt is replaced by the next image,
   * wrapped in the model's own image tokens (Gemma 3: <start_of_image> … <end_of_image>;
   * Idefics3: tiles and overview with their <fake_token_around_image>/<row_r_col_c>/<global-img>
   * tokens), one position per image row. The prompt is tokenized with special tokens parsed and
   * the vocabulary's BOS first, as llama.cpp's mtmd does (addBos and parseSpecial do not apply;
   * a BOS the text starts with while addBos is false is that BOS). Errors: a marker count that
   * differs from images.length (WLM_ERR_INVALID_ARG, naming both), no mmproj loaded
   * (WLM_ERR_STATE), an image that does not decode (see ImageInput). An image is encoded once
   * and kept (the 8 most recent; keyed by a SHA-256 of its pixels): asking again about it
   * does not encode it again (LastResult.imagesEncoded / imagesReused). With cachePrompt
   * (chat()'s default) the KV cache of the last prompt with images is kept through the images
   * this one shares with it (the same text before them and the same pixels): only the rest is
   * evaluated (LastResult.nCached). chat() and chatCompletion() take images as content parts.
   * In generateBatch() / completeBatch() (per prompt: BatchParams[]) and openBatch().add(),
   * each sequence takes its own images for its own markers (counted per sequence; an error
   * names the prompt); its tokens are bitwise those of generate() with the same images (every
   * prompt with images is evaluated on its own sequence — a repeated one is not forked —, then
   * the last tokens of all together; BatchResult.sequences[i].nPrompt counts image rows). In
   * openBatch() a sequence with images is prefilled when admitted, between two steps (the
   * others wait for it; on the WebGPU backend it runs there), and joins after the batch's
   * first step. With draft (speculative decoding) the model sees the images and the drafters the
   * text around them (a draft model without an mmproj; prompt lookup never proposes an image
   * row), so greedy output stays plain greedy decoding's; llama.cpp's server turns speculative
   * decoding off when an mmproj is loaded instead.
   */
  images?: ImageInput[];
}

/**
 * Speculative decoding (Leviathan et al. 2023, arXiv:2211.17192; Chen et al. 2023,
 * arXiv:2302.01318; src/wasmlm.h wlm_generate_speculate): a drafter proposes up to maxTokens
 * tokens, the model verifies them all in one batched forward pass, and the accepted ones plus
 * one more come out of that one pass. Either a draft model — `{ model?, maxTokens?, pMin?,
 * nCtx? }`: a smaller model with the same vocabulary (same size and token texts, checked at
 * load: WLM_ERR_TOKENIZER naming the first token that differs), e.g. SmolLM2-135M for
 * SmolLM2-1.7B, Qwen2.5-0.5B for Qwen2.5-1.5B — or prompt lookup, `{ ngram: n, maxTokens? }`:
 * the tokens that followed the latest earlier occurrence of the last n..1 tokens, free, and
 * right where the output copies the prompt.
 * Output: greedy (temperature 0) gives exactly the tokens of plain greedy decoding. Sampling
 * keeps the model's distribution exactly (the standard rejection rule, applied to the
 * distributions after the whole sampler chain: temperature, topK, topP, minP, typicalP,
 * repeat/presence/frequency penalties over the text including earlier drafts, logitBias,
 * bannedTokens), but the same seed gives other tokens than without a draft. Refused
 * (WLM_ERR_UNSUPPORTED): grammar / jsonSchema (the parse state would have to follow each
 * draft and back), nProbs > 0. Not a parameter of generateBatch() or beamSearch().
 * On the WebGPU backend the model verifies on the GPU (its verification passes keep the
 * one-token kernels, so greedy output is still plain greedy decoding's bit for bit) and a
 * draft model runs on the CPU in the same wasm memory; prompt lookup costs nothing there, and
 * the GPU's decode step, bound by per-step overheads rather than by the weights it reads,
 * verifies several positions for about the price of one.
 * engine.lastResult reports drafted, accepted and rounds.
 * Unknown keys are rejected: WasmlmError WLM_ERR_INVALID_ARG naming the key, the known ones
 * and a near miss (js/options.js); a key whose value is undefined counts as absent.
 */
export interface DraftParams {
  /** The draft model: a source as LoadOptions.model, loaded on first use (and kept: the same
   *  string, or the same bytes / Blob object, is not loaded again); omitted: the model
   *  loadDraft() loaded. Not with ngram. */
  model?: string | URL | ArrayBuffer | ArrayBufferView | Blob;
  /** Tokens drafted per round at most, 1..32 (default 8; llama.cpp's --draft-max). */
  maxTokens?: number;
  /** Prompt lookup instead of a draft model: the longest n-gram to match, 1..8. */
  ngram?: number;
  /** Draft model: stop a round's drafting when the draft's most probable token is below this
   *  probability, [0, 1] (default 0 = off; llama.cpp's --draft-p-min). */
  pMin?: number;
  /** Draft model loaded here: its context length (default: the model's nCtx, as far as the
   *  draft model's own context reaches). */
  nCtx?: number;
}

/**
 * Engine.loadDraft() options.
 * Unknown keys are rejected: WasmlmError WLM_ERR_INVALID_ARG naming the key, the known ones
 * and a near miss (js/options.js); a key whose value is undefined counts as absent.
 */
export interface DraftLoadOptions {
  /** The draft model file (as LoadOptions.model). */
  model: string | URL | ArrayBuffer | ArrayBufferView | Blob;
  /** A llama2.c tokenizer.bin when the draft file has no vocabulary. */
  tokenizer?: string | URL | ArrayBuffer | ArrayBufferView | Blob;
  /** Its context length (default: the model's nCtx, as far as the draft model's reaches). */
  nCtx?: number;
  onProgress?: (progress: LoadProgress) => void;
  signal?: AbortSignal;
}

/** What loadDraft() loaded. Memory: the draft's weights plus contextBytes (its KV cache and
 *  scratch) in the same wasm memory as the model; generating with it adds
 *  (maxTokens + 2) × vocabSize × 4 bytes in the model's context (distributions, logits: the
 *  model's estimate at load counts them, for the longest draft). */
export interface DraftInfo {
  dim: number;
  nLayers: number;
  vocabSize: number;
  weightBytes: number;
  nCtx: number;
  contextBytes: number;
  name: string | null;
}

/** One message of a conversation, OpenAI-style. Extra fields (tool_calls, reasoning_content,
 *  name...) are passed to the template as they are. */
export interface ChatMessage {
  /** 'system', 'user', 'assistant', 'tool', or whatever the template knows. */
  role: string;
  /** The message's text, or content parts: {type: 'text', text}, and with load()'s mmproj
   *  {type: 'image_url', image_url: {url} | url} (data:, blob:, http(s): URLs) and
   *  {type: 'image', image: ImageInput}. Each image part becomes the media marker in the text
   *  the template renders (as llama.cpp's server does), the text parts are joined. */
  content: string | ({ type: 'text'; text: string } | { type: 'image_url'; image_url: { url: string; detail?: string } | string } |
    { type: 'image'; image: ImageInput })[];
  [field: string]: unknown;
}

/**
 * chat() parameters: generation parameters plus how the prompt is made.
 * Unknown keys are rejected: WasmlmError WLM_ERR_INVALID_ARG naming the key, the known ones
 * and a near miss (js/options.js); a key whose value is undefined counts as absent.
 */
export interface ChatParams extends GenerateParams {
  /** Jinja source to use instead of the file's tokenizer.chat_template (required when the file
   *  has none). */
  chatTemplate?: string;
  /** More template variables, e.g. { enable_thinking: false } for Qwen3, or tools. */
  templateVariables?: Record<string, unknown>;
  /** End the prompt with the assistant turn's header (default true; the template decides what
   *  that is). */
  addGenerationPrompt?: boolean;
  /**
   * OpenAI's response_format: {type: 'text'} (default: free text), {type: 'json_object'} (any
   * JSON object), or {type: 'json_schema', json_schema: {schema, name?, strict?}} (a JSON value
   * valid for `schema`, as jsonSchema; strict: false → jsonSchemaStrict false). Not together
   * with grammar or jsonSchema.
   */
  responseFormat?:
    | { type: 'text' }
    | { type: 'json_object' }
    | { type: 'json_schema'; json_schema: ResponseFormatJsonSchema };
}

/**
 * responseFormat's json_schema (OpenAI's): the schema, and name / description (accepted,
 * unused). Unknown keys are rejected, as are responseFormat's own other than type and
 * json_schema (js/options.js).
 */
export interface ResponseFormatJsonSchema {
  schema: object | boolean | string;
  name?: string;
  description?: string;
  strict?: boolean;
}

/** One candidate of Token.top. */
export interface TokenAlternative {
  /** Token id. */
  id: number;
  /** The token's piece decoded on its own (after BOS without its leading space); a piece that
   *  is part of a UTF-8 character shows U+FFFD. For display only. */
  text: string;
  /** Model probability: softmax of the raw logits at temperature 1, before penalties, bias
   *  and filters (0..1). */
  prob: number;
  /** ln(prob), computed exactly as z_t − logsumexp(z) (finite even when prob underflows). */
  logprob: number;
  /** Probability in the distribution the token was drawn from, after every stage: 0 when a
   *  filter removed it; greedy: 1 for the argmax, 0 for the others. The survivors' values sum
   *  to at most 1. */
  probSampled: number;
}

/** One step of a generation. */
export interface Token {
  /** The sampled token id, or -1 for a last item that only releases text held back at the end
   *  (for a stop string that did not complete, or an incomplete UTF-8 tail); that item is not a
   *  token, is not counted in nGenerated, and carries prob, logprob and probSampled 0. */
  id: number;
  /** Text released at this step, decoded with one streaming TextDecoder per sequence: a
   *  character whose UTF-8 bytes span several tokens arrives whole, with the token holding its
   *  last byte; earlier tokens may have empty text (so may tokens held back for a stop string).
   *  Concatenated, the texts are the full text. */
  text: string;
  /** The model's probability of this token: softmax of the raw logits at temperature 1, before
   *  penalties, bias and filters (0..1). */
  prob: number;
  /** ln(prob), exact (z − logsumexp(z)). */
  logprob: number;
  /** The probability with which the sampler drew it, after every stage (1 for greedy). */
  probSampled: number;
  /** Tokens in the sequence including this one (prompt + generated so far; after a context
   *  shift, counted from the shifted start). */
  nPast: number;
  /**
   * Present when params.nProbs > 0: the nProbs most probable candidates after every stage,
   * sorted by probSampled descending, then prob descending, then id — the survivors of the
   * filters first, then the best of the removed ones. The sampled token is among them when it
   * ranks in the first nProbs (always at temperature 0: it is top[0]).
   */
  top?: TokenAlternative[];
}

/**
 * A token of chat(): a Token plus, where the template has a reasoning syntax (js/chat/reasoning.js:
 * <think>…</think> for Qwen3 / Qwen3.5 / SmolLM3 / DeepSeek-R1, <|channel>thought…<channel|> for
 * Gemma 4, harmony channels for gpt-oss),
 * the parts of the text released at this step that are reasoning and answer. The parser holds
 * text that may be a tag (or whitespace next to one) until the text decides it, so these can be
 * '' on a token and released on a later one; a last item with id -1 releases what it held at
 * the end. Concatenated over the turn they equal lastResult.reasoning and lastResult.content:
 * the reasoning without its tags and surrounding whitespace, the answer after it. Without a
 * reasoning syntax in the template, chat() yields plain Tokens (neither field).
 */
export interface ChatToken extends Token {
  reasoning?: string;
  content?: string;
}

/**
 * What previewDistribution() returns: the sampler chain of the given parameters applied again
 * to the logits the last generated token was drawn from (wlm_sampler_preview).
 */
export interface PreviewResult {
  /** The token one draw with params.seed picks from the previewed distribution. */
  id: number;
  /** Its model probability (softmax at temperature 1, before every stage). */
  prob: number;
  /** ln(prob). */
  logprob: number;
  /** Its probability after every stage of the previewed chain. */
  probSampled: number;
  /** The params.nProbs (default 10) most probable candidates, ordered as Token.top: `prob`
   *  before the filters, `probSampled` after them (the probSampled values sum to at most 1). */
  top: TokenAlternative[];
}

/** Summary of a generation (engine.lastResult, and what complete() returns). */
export interface LastResult {
  /** Why it ended. */
  stopReason: StopReason;
  /** The generated text (without the prompt). */
  text: string;
  /** Prompt tokens, BOS included. */
  nPrompt: number;
  /** Prompt tokens whose KV cache was reused (cachePrompt); the prefill evaluated the others. */
  nCached: number;
  /** Tokens generated (yielded with id >= 0). */
  nGenerated: number;
  /** Sum of the generated tokens' logprob (the sequence's log-probability under the model at
   *  temperature 1; natural log). */
  logprob: number;
  /** Milliseconds spent tokenizing and evaluating the prompt (one wasm call). */
  prefillMs: number;
  /** Milliseconds spent in the decode steps (wasm calls only; time the consumer and the event
   *  loop take between tokens is excluded). */
  decodeMs: number;
  /** (nPrompt − nCached) / prefill seconds (0 when not measurable). */
  prefillTokensPerSec: number;
  /** nGenerated / decode seconds (0 when not measurable). */
  decodeTokensPerSec: number;
  /** Size of the module's linear memory when the generation ended, in bytes. */
  wasmMemoryBytes: number;
  /** The CPU backend's read-ahead of the matrix-vector kernels after this generation
   *  (EngineOptions.readAhead): chosen null while 'auto' is still timing decode steps; onMs /
   *  offMs the median step of each once 'auto' chose. Absent on the WebGPU backend. */
  readAhead?: { mode: 'auto' | boolean; chosen: boolean | null; onMs: number | null; offMs: number | null };
  /** chat() with a template that has a reasoning syntax (see ChatToken): the turn's reasoning
   *  and its answer apart (text keeps the whole output). */
  reasoning?: string;
  content?: string;
  /** Speculative decoding (params.draft) only: tokens drafted and verified, how many of them
   *  were accepted (acceptance rate = accepted / drafted), and the verifying forward passes. */
  drafted?: number;
  accepted?: number;
  rounds?: number;
  /** With images (GenerateParams.images): those encoded for this prompt, those taken from the
   *  engine's encoded images, and the milliseconds decoding and encoding took (in prefillMs). */
  imagesEncoded?: number;
  imagesReused?: number;
  imageMs?: number;
}

/**
 * Parameters of one prompt of generateBatch(): GenerateParams plus the number of samples.
 * Unknown keys are rejected: WasmlmError WLM_ERR_INVALID_ARG naming the key, the known ones
 * and a near miss (js/options.js); a key whose value is undefined counts as absent.
 */
export interface BatchParams extends GenerateParams {
  /**
   * Sequences generated from this prompt, integer >= 1 (default 1). Sample i uses seed
   * `seed + i` (seed random when not given), so sample i equals generate() with that seed.
   * The prompt is evaluated once; the samples share its KV cache blocks.
   */
  nSamples?: number;
}

/** One item of generateBatch(). */
export interface BatchToken extends Token {
  /** The sequence: prompts in order, each repeated nSamples times (prompt p, sample s is
   *  sequence Σ_{q<p} nSamples_q + s). */
  seq: number;
  /** null for a token; set on the sequence's last item, which has id -1 and carries any text
   *  released at the end (possibly ''). Every sequence gets exactly one such item. */
  stopReason: StopReason | null;
}

/** One sequence of a BatchResult. */
export interface SequenceResult {
  /** Index in BatchResult.sequences and BatchToken.seq. */
  seq: number;
  /** Which prompt (index into the prompts given). */
  promptIndex: number;
  /** Which sample of that prompt (0..nSamples-1). */
  sample: number;
  /** The seed this sequence used. */
  seed: number;
  stopReason: StopReason;
  /** Its generated text. */
  text: string;
  /** Its prompt tokens, BOS included (with images: its positions, image rows included). */
  nPrompt: number;
  /** Its generated tokens. */
  nGenerated: number;
  /** Sum of its tokens' logprob. */
  logprob: number;
}

/** Summary of a batch generation (engine.lastBatchResult, what completeBatch() returns). */
export interface BatchResult {
  /** One per sequence, in `seq` order. */
  sequences: SequenceResult[];
  /** Prompt tokens evaluated (a prompt equal to an earlier one is forked, not evaluated). */
  nPrompt: number;
  /** Tokens generated, all sequences together. */
  nGenerated: number;
  /** Decode steps (batched forward passes). */
  steps: number;
  /** Milliseconds of the prefill (all prompts in one batched pass). */
  prefillMs: number;
  /** Milliseconds spent in the decode steps (wasm calls only). */
  decodeMs: number;
  /** nPrompt / prefill seconds. */
  prefillTokensPerSec: number;
  /** nGenerated / decode seconds: the batch's throughput. */
  decodeTokensPerSec: number;
  /** Size of the module's linear memory at the end, in bytes. */
  wasmMemoryBytes: number;
  /** With images (BatchParams.images): the images of all sequences encoded now, and those taken
   *  from the engine's encoded images. */
  imagesEncoded?: number;
  imagesReused?: number;
}

/** A batch open for continuous batching (Engine.openBatch()). */
export interface ContinuousBatch {
  /**
   * Queues a sequence: `prompt` tokenized with params.addBos / parseSpecial, generated with
   * `params` (GenerateParams; cachePrompt, stateCheckpoint, contextShift's cache reuse and draft do
   * not apply to a batch). Never throws for the prompt or params: their errors (a prompt
   * past the context, a bad parameter: C's message starts with "sequence N: ") come from the
   * sequence's iterator alone. Throws WLM_ERR_STATE once the batch is closed (or the error
   * that ended it), and WLM_ERR_INVALID_ARG for an unknown key of `options` (js/options.js).
   * @param options.signal cancels this sequence (as cancel())
   */
  add(prompt: string, params?: GenerateParams, options?: CallOptions): BatchSequence;
  /** Ends every sequence (their iterators throw an AbortError) and the batch; resolves once
   *  the engine is idle. Idempotent. */
  close(): Promise<void>;
  /** Sequences in the batch now. */
  readonly live: number;
  /** Sequences added and waiting for a slot. */
  readonly waiting: number;
  /** The most sequences decoded together. */
  readonly maxSequences: number;
  /** Totals since openBatch(): sequences admitted, decode steps, the most sequences in one
   *  step, tokens generated. */
  readonly stats: { sequences: number; steps: number; maxLive: number; tokens: number };
}

/** One sequence of a ContinuousBatch: an async iterable of its BatchTokens (seq is its slot;
 *  the last item has stopReason set, as in generateBatch()). The iterator throws an AbortError
 *  when the sequence is cancelled, and the sequence's own error (WasmlmError) otherwise. */
export interface BatchSequence extends AsyncIterable<BatchToken> {
  /** Ends the sequence now: it leaves the batch before the next step, its KV cache freed. */
  cancel(): void;
  /** The slot it decodes in (BatchToken.seq), -1 before it joins. */
  readonly slot: number;
  /** Its summary so far; final once the iterator has ended. stopReason 'aborted' until it
   *  ends by itself. */
  readonly result: { stopReason: StopReason; text: string; nPrompt: number; nGenerated: number; logprob: number };
}

/**
 * Parameters of beamSearch() (wlm_beam_params).
 * Unknown keys are rejected: WasmlmError WLM_ERR_INVALID_ARG naming the key, the known ones
 * and a near miss (js/options.js); a key whose value is undefined counts as absent.
 */
export interface BeamParams {
  /** Beams kept per step: integer 1..32, default 4. Needs 2 × width sequences (the context is
   *  recreated with more when needed). */
  width?: number;
  /** New tokens per beam at most: integer >= 1, default 64; also bounded by nCtx. */
  maxTokens?: number;
  /** α >= 0 in score = logprob / len^α (len: tokens scored, EOS included); default 1.0;
   *  0 ranks by total log-probability. */
  lengthPenalty?: number;
  /** Prepend BOS to the prompt (default true). */
  addBos?: boolean;
  /** Every beam follows this GBNF grammar (as GenerateParams.grammar); refused tokens are never
   *  expanded, scores stay the model's log-probabilities. */
  grammar?: string;
  /** Every beam is JSON valid for this schema (as GenerateParams.jsonSchema). */
  jsonSchema?: object | boolean | string;
  /** As GenerateParams.jsonSchemaStrict. */
  jsonSchemaStrict?: boolean;
}

/** Reported after each beam search step (BeamSearchOptions.onStep). */
export interface BeamStep {
  /** Steps done (1, 2, …). */
  step: number;
  /** Bytes of KV cache blocks in use now (shared prefix counted once). */
  kvBytes: number;
  /** Bytes the same beams would use with a private copy of the cache each. */
  kvBytesUnshared: number;
}

/**
 * Options of beamSearch().
 * Unknown keys are rejected: WasmlmError WLM_ERR_INVALID_ARG naming the key, the known ones
 * and a near miss (js/options.js); a key whose value is undefined counts as absent.
 */
export interface BeamSearchOptions {
  /** Ends the search between two steps: beamSearch() rejects with an AbortError, and
   *  engine.lastBeamResult holds the hypotheses so far (aborted: true; beams still live when
   *  aborted have stopReason 'aborted'). */
  signal?: AbortSignal;
  /** Called after every step but the last. */
  onStep?: (step: BeamStep) => void;
}

/** A finished hypothesis of a beam search. */
export interface Beam {
  /** Its generated text (prompt excluded). */
  text: string;
  /** The generated token ids (prompt and the final EOS excluded). */
  tokens: Int32Array;
  /** Sum of ln p(token | prefix) over the tokens and the EOS that ended it, if any; p the
   *  model's softmax at temperature 1. */
  logprob: number;
  /** logprob / len^lengthPenalty, len = tokens scored (EOS included), at least 1. */
  score: number;
  /** 'eos', 'max_tokens', 'context_full', or 'aborted' for a beam still live when aborted. */
  stopReason: StopReason;
}

/** Result of beamSearch() (also engine.lastBeamResult). */
export interface BeamResult {
  /** At most `width` hypotheses, best score first. */
  beams: Beam[];
  /** Peak bytes of KV cache blocks in use during the search (the common prefix counted once:
   *  beams share it copy-on-write). */
  kvBytes: number;
  /** Peak bytes the same beams would have needed with a private cache each. */
  kvBytesUnshared: number;
  /** kvBytes / width. */
  kvBytesPerBeam: number;
  /** The width used. */
  width: number;
  /** Prompt tokens, BOS included. */
  nPrompt: number;
  /** Steps done (one batched forward pass each). */
  steps: number;
  /** Wall-clock milliseconds of the whole search, event-loop turns included. */
  ms: number;
  /** true when the search was aborted (only seen in lastBeamResult). */
  aborted: boolean;
}

/** KV cache occupancy now (wlm_kv_stats) and the context's memory. */
export interface KvStats {
  /** Bytes of one block (16 positions, K and V of every layer that owns a cache: a hybrid's
   *  attention layers, Gemma 4's layers before its KV-shared ones, each at its own width). */
  blockBytes: number;
  /** Blocks in memory (in use + free for reuse). */
  blocksAllocated: number;
  /** Blocks referenced by at least one sequence. */
  blocksUsed: number;
  /** Blocks referenced by two or more sequences (shared prefixes). */
  blocksShared: number;
  /** Sum of the sequences' block-table lengths: the blocks private copies would need. */
  blockRefs: number;
  /** A hybrid model's recurrent state per sequence, in bytes (0 for a transformer). */
  stateBytes: number;
  /** Sequences holding a recurrent state now. */
  states: number;
  /** Bytes of recurrent states and their snapshots (the prompt's end, a chat checkpoint, a
   *  speculative round's start) and speculative decoding's per-position copies in memory,
   *  counted in contextBytes (at most the load-time estimate's recurrentBytes); with the WebGPU backend
   *  in GPU memory (every sequence's state block, and each snapshot once taken), counted in
   *  gpuBytes. */
  stateBytesAllocated: number;
  /** Bytes of GPU memory the model holds now with the WebGPU backend (ModelInfo.gpuBytes plus
   *  what was made since: snapshots, scratch buffers), else 0. */
  gpuBytes: number;
  /** Sequences the context holds (see LoadOptions.nSeqMax). */
  nSeqMax: number;
  /** The context length, in tokens. */
  nCtx: number;
  /** Bytes the context has allocated (KV blocks + recurrent states + scratch). */
  contextBytes: number;
  /** Size of the module's linear memory, in bytes. */
  wasmMemoryBytes: number;
}

/**
 * The last argument of generate(), chat(), chatCompletion(), generateBatch(), rerank() and
 * ContinuousBatch.add(). Unknown keys are rejected (js/options.js).
 */
export interface CallOptions {
  /** Aborts the call: it rejects (or its iterator throws) with an AbortError. */
  signal?: AbortSignal;
}

/** The last argument of complete() and completeBatch(). Unknown keys are rejected (js/options.js). */
export interface CompleteOptions<T extends Token = Token> {
  /** Aborts the call. */
  signal?: AbortSignal;
  /** Called with each token as it is generated. */
  onToken?: (token: T) => void;
}

/** openBatch() options. Unknown keys are rejected (js/options.js). */
export interface OpenBatchOptions {
  /** Sequences decoded together, 1..64 (default: the context's nSeqMax). */
  maxSequences?: number;
  /** Closes the batch when it aborts. */
  signal?: AbortSignal;
}

/** tokenize() options. Unknown keys are rejected (js/options.js). */
export interface TokenizeOptions {
  /** Add the vocabulary's BOS (and other leading special tokens it adds). Default true. */
  bos?: boolean;
  /** Control tokens written in the text become their ids. Default false. */
  parseSpecial?: boolean;
}

/** jsonSchemaToGrammar() options. Unknown keys are rejected (js/options.js). */
export interface GrammarOptions {
  /** false: keywords the grammar cannot hold are warnings, not errors. Default true. */
  strict?: boolean;
}

/** renderChatTemplate() options. Unknown keys are rejected (js/options.js). */
export interface RenderChatTemplateOptions {
  bosToken?: string;
  eosToken?: string;
  addGenerationPrompt?: boolean;
  variables?: Record<string, unknown>;
}

/**
 * An inference engine: one model and one context (KV cache, up to nSeqMax sequences). While a
 * generation, batch or beam search runs, only tokenize(), detokenize() and kvStats() may be
 * called; load(), generate(), generateBatch(), beamSearch(), evalTokens() and reset() reject
 * with WLM_ERR_STATE (finish, abort or break out first).
 */
export interface Engine {
  /**
   * Loads a model and its tokenizer, first freeing any model loaded before. Bytes are streamed
   * into a wasm heap buffer sized from Content-Length / the file or Blob size (grown while
   * receiving when unknown); the model keeps that buffer (weights are views into it).
   * On failure nothing stays allocated, `info` is null, and load() can be called again.
   * @throws WasmlmError WLM_ERR_IO (download / read; names the URL and HTTP status),
   *   WLM_ERR_FORMAT, WLM_ERR_TRUNCATED (message gives both sizes), WLM_ERR_UNSUPPORTED,
   *   WLM_ERR_TOKENIZER (tokenizer for another vocabulary), WLM_ERR_INVALID_ARG (nCtx > seqLen,
   *   nSeqMax outside 1..64), WLM_ERR_NOMEM; DOMException 'AbortError' when `signal` aborts.
   */
  load(options: LoadOptions): Promise<ModelInfo>;

  /**
   * Loads the draft model of speculative decoding (GenerateParams.draft) beside the model, in
   * the same wasm memory, replacing any earlier draft; null frees it. A new load() frees it too.
   * Before a byte past its header is read, the draft is sized as load() sizes a model (its
   * file + the KV cache of its nCtx in the model's kvType + its scratch and tables, from the
   * header: js/runtime/memory64.js draftBytes; within 1 % of DraftInfo.contextBytes) and
   * fitted beside the model's estimate at load (EngineOptions.memory64: the most its context
   * may grow to) in the module the model runs in, which cannot change while it is loaded (fitDraft):
   * wasm32: 97 % of 4 GB; memory64: 97 % of 16 GiB, its weights placed above 4 GB where they
   * must be and its scratch and tables in a block below 4 GB.
   * @throws WasmlmError WLM_ERR_NOMEM before the draft is read when it does not fit: the message
   *   names what it needs (weights, KV cache, scratch) and what is left (wasm32: of 4 GB beside
   *   the model; memory64: of 16 GiB, or the largest free block below 4 GB); WLM_ERR_TOKENIZER
   *   (another vocabulary: the message names the sizes or the first token that differs),
   *   WLM_ERR_STATE (no model loaded, or busy), and load()'s.
   */
  loadDraft(options: DraftLoadOptions | null): Promise<DraftInfo | null>;

  /** The loaded model's info, or null before load() / after a failed load. */
  readonly info: ModelInfo | null;

  /** Threads running the matrix products (EngineOptions.threads resolved: 'auto' becomes a
   *  number, a number above the cores becomes the cores). Known as soon as the engine exists. */
  readonly threads: number;

  /** Worker engines only (createWorkerEngine): what the worker's warm-up did
   *  (WorkerEngineOptions.warmup; `error` if it failed, which harms nothing), known once a
   *  load() has returned; null when it did not run. */
  readonly warmup?: { tokens: number; ms: number; error?: string } | null;

  /** The summary of the last generation that got past prefill (also set when it was aborted
   *  or broken out of, with stopReason 'aborted'), or null. */
  readonly lastResult: LastResult | null;

  /** The summary of the last batch generation that got past prefill (aborted sequences have
   *  stopReason 'aborted'), or null. */
  readonly lastBatchResult: BatchResult | null;

  /** The last beam search's result (also when aborted: see BeamSearchOptions.signal), or null. */
  readonly lastBeamResult: BeamResult | null;

  /** In-thread engines only: the current size of the module's linear memory in bytes (it only
   *  grows; 0 after free()). Worker engines report it in info, kvStats() and the results. */
  readonly wasmMemoryBytes?: number;

  /**
   * Encodes text with the model's tokenizer: for a llama2.c tokenizer.bin as run.c does
   * (optional BOS, SentencePiece's dummy-prefix space, <0xNN> byte tokens, BPE merges by
   * score); for GGUF vocabularies as llama.cpp does (SentencePiece, or byte-level BPE with the
   * pre-tokenizer named by tokenizer.ggml.pre).
   * @param options.bos add the special tokens the vocabulary asks for: BOS (default true)
   * @param options.parseSpecial control tokens written in the text ('<|im_start|>') become
   *   their ids (default false: they are plain text)
   * @throws WasmlmError WLM_ERR_STATE without a model.
   */
  tokenize(text: string, options?: TokenizeOptions): Promise<Int32Array>;

  /**
   * Embeddings of texts for semantic search, clustering and retrieval: each text is tokenized
   * with the special tokens ([CLS] text [SEP] for BERT) and the texts pass the batched forward
   * pass together (16 per pass), each attending to itself only; the final hidden states are
   * pooled as options.pooling or the model says and normalized (llama.cpp's llama-embedding and
   * server compute the same: checked to a cosine of 1 − 4e-7 or closer on F32 models,
   * docs/verification.md). Works with encoders (BERT / bge / all-MiniLM / e5, nomic-bert) and
   * decoders (Qwen3-Embedding: last-token pooling; EmbeddingGemma: bidirectional, mean pooling
   * then its dense layers; any model with an explicit pooling).
   * @returns one Float32Array of info.embeddingLength floats per text, in order; with pooling
   *   'none', tokens × embeddingLength floats per text (each token's vector normalized).
   * @throws WasmlmError WLM_ERR_INVALID_ARG (no pooling given for a model without one, an
   *   unknown pooling, 'rank'), WLM_ERR_CONTEXT_FULL (a text longer than nCtx), WLM_ERR_STATE
   *   (no model, or the engine busy), WLM_ERR_UNSUPPORTED (a model on the WebGPU backend:
   *   embeddings run on the CPU backend, which 'auto' picks for encoders and bidirectional
   *   models); DOMException 'AbortError' when options.signal aborts.
   */
  embed(texts: string | string[], options?: EmbedOptions): Promise<Float32Array[]>;

  /**
   * Scores documents against a query with a reranker (a model with rank pooling: tensors cls /
   * cls.output, as llama.cpp's): each pair is tokenized as llama.cpp's server does
   * (format_prompt_rerank: the file's tokenizer.chat_template.rerank with {query} and
   * {document} filled in when it has one, as Qwen3-Reranker does; else [CLS] query [SEP]
   * document for BERT) and scored by the classifier head.
   * @returns every document's {index, score}, highest score first (ties: lower index first).
   * @throws WasmlmError WLM_ERR_INVALID_ARG when the model has no ranking head; AbortError.
   */
  rerank(query: string, documents: string[], options?: CallOptions): Promise<RerankResult[]>;

  /**
   * The context positions `image` takes in a prompt with the loaded model and its mmproj: its
   * rows and the projector's wrapper tokens (<start_of_image> … <end_of_image>, Idefics3's tile
   * tags), counted by the layout generation evaluates (wlm_image_positions in src/wasmlm.h).
   * A media prompt's positions are its text pieces' tokens (each tokenized on its own, BOS
   * first) plus each image's count here: what the Prompt API's measureContextUsage adds up.
   * The image is decoded and encoded (kept in the image cache: a prompt about it afterwards
   * does not encode it again).
   * @throws WasmlmError WLM_ERR_STATE (no model, no mmproj loaded, the engine busy),
   *   WLM_ERR_INVALID_ARG (an image that does not decode); AbortError.
   */
  imageTokens(image: ImageInput, options?: CallOptions): Promise<number>;

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
   *   the C message naming the field; unknown names; wrong types; a prompt containing NUL),
   *   WLM_ERR_CONTEXT_FULL (prompt longer than nCtx), WLM_ERR_STATE (no model, or the engine
   *   busy).
   */
  generate(prompt: string, params?: GenerateParams,
           options?: CallOptions): AsyncIterableIterator<Token>;

  /**
   * One assistant turn of a conversation. Renders `messages` with the model's chat template
   * (info.chatTemplate, or params.chatTemplate) through @huggingface/jinja as Hugging Face's
   * apply_chat_template does (bos_token, eos_token, add_generation_prompt and
   * params.templateVariables), tokenizes the text with special tokens parsed (one BOS when the
   * vocabulary adds it, even if the template writes it too), and generates as generate() does
   * until an end-of-generation token (EOS, <|eot_id|>, <|im_end|>, <end_of_turn>...). The KV
   * cache of the previous turn is reused for the common prefix (cachePrompt, default true), so
   * a later turn prefills only its new tokens (lastResult.nCached). Append
   * {role: 'assistant', content: lastResult.text} and the next user message to continue.
   * A worker engine renders the template in the calling thread (a page without a bundler maps
   * '@huggingface/jinja' in an import map; see README). A thinking model's reasoning comes
   * apart from its answer (ChatToken's reasoning and content; lastResult.reasoning / .content).
   * @throws (from the iterator) WasmlmError WLM_ERR_UNSUPPORTED (no template), WLM_ERR_FORMAT
   *   (the template does not parse, or raises), WLM_ERR_INVALID_ARG (messages or parameters),
   *   and what generate() throws.
   */
  chat(messages: ChatMessage[], params?: ChatParams,
       options?: CallOptions): AsyncIterableIterator<ChatToken>;

  /**
   * OpenAI's chat completion (README "Tool calls and the OpenAI chat API"; the request's
   * supported and refused fields are in ChatCompletionRequest): renders `request.messages`
   * (with `tools`) through the model's chat template, generates as chat() does (the KV cache of
   * the conversation reused), reads the model's tool calls in its template's format, holding
   * them to the tools' JSON Schemas by a grammar, and resolves to OpenAI's ChatCompletion; with
   * `stream: true` to an async iterable of ChatCompletionChunk (iterate it once). The signal
   * aborts (an AbortError from the promise or the iterator). Works the same on a worker engine.
   * @throws WasmlmError WLM_ERR_INVALID_ARG naming the field (unknown or unsupported fields,
   *   wrong types or ranges, a tool_choice naming no tool), and what chat() throws.
   */
  chatCompletion(request: ChatCompletionRequest & { stream?: false },
                 options?: CallOptions): Promise<ChatCompletion>;
  chatCompletion(request: ChatCompletionRequest & { stream: true },
                 options?: CallOptions): Promise<AsyncIterableIterator<ChatCompletionChunk>>;

  /**
   * Runs generate() to the end; returns its LastResult (text included). onToken is called per
   * Token as it arrives. Rejects as generate()'s iterator throws.
   */
  complete(prompt: string, params?: GenerateParams,
           options?: CompleteOptions): Promise<LastResult>;

  /**
   * Generates after several prompts, or several samples of one prompt (params.nSamples), at
   * once: every step evaluates the last token of all running sequences in one batched forward
   * pass (each weight matrix read once for all of them), then samples each with its own sampler
   * (parameters, seed, penalties, stop strings, maxTokens); sequences finish independently.
   * Prompts are tokenized, then prefilled together; repeated prompts share their KV blocks (on
   * the CPU; the WebGPU backend evaluates each, its cache holding nSeqMax sequences' rows).
   * Yields BatchTokens in sequence order within a step; each sequence ends with one item whose
   * stopReason is set. Abort and early break behave as in generate(); engine.lastBatchResult
   * is set at the end. At temperature 0, or with the same seeds, each sequence's tokens equal
   * a generate() call with the same prompt and parameters.
   * @param prompts one prompt or an array of them (total sequences, nSamples included, at most
   *   64; the context is recreated with more sequences when needed)
   * @param params one BatchParams for every prompt, or an array with one per prompt
   * @throws (from the iterator) as generate(); C messages start with "sequence N: ";
   *   WLM_ERR_INVALID_ARG for an empty prompt list, more than 64 sequences, or a params array
   *   whose length differs from the prompts'; WLM_ERR_STATE when kvCache is false.
   */
  generateBatch(prompts: string | string[], params?: BatchParams | BatchParams[],
                options?: CallOptions): AsyncIterableIterator<BatchToken>;

  /**
   * Continuous batching (llama-server's; wlm_generate_batch_add / wlm_generate_batch_end):
   * opens a batch that sequences join and leave while it decodes. batch.add() queues a
   * sequence; it joins the running batch at the next step when fewer than maxSequences
   * decode (its prompt is prefilled in that step's forward pass beside the others' tokens),
   * else when a slot frees. A sequence that ends, is cancelled or whose signal aborts leaves at
   * once, its KV cache freed and its slot given to the next waiting one. Each sequence's tokens
   * equal generate()'s for its prompt and parameters without the prompt cache, bit for bit
   * (greedy and seeded sampling). One step per macrotask while any sequence runs. The engine
   * is busy (generate(), generateBatch(), … reject with WLM_ERR_STATE) until close().
   * @param options.maxSequences sequences decoded together, 1..64 (default: the context's
   *   nSeqMax; the context is recreated with more when needed)
   * @param options.signal closes the batch when it aborts
   * @throws WLM_ERR_INVALID_ARG (an unknown option, maxSequences out of range), WLM_ERR_STATE
   *   (the engine is busy or has no model)
   */
  openBatch(options?: OpenBatchOptions): Promise<ContinuousBatch>;

  /** Runs generateBatch() to the end and returns its BatchResult; onToken per item. */
  completeBatch(prompts: string | string[], params?: BatchParams | BatchParams[],
                options?: CompleteOptions<BatchToken>): Promise<BatchResult>;

  /**
   * Beam search: the prompt is evaluated once; each step extends every live beam by its 2W
   * most probable tokens, keeps the W best continuations by total log-probability and
   * evaluates them in one batch; a continuation ending in EOS becomes a finished hypothesis.
   * Ends when W hypotheses have finished (early stopping), every beam reached maxTokens or the
   * context, or on abort. Beams share the KV blocks of their common prefix (copy-on-write).
   * One step per macrotask, so an AbortSignal lands between steps.
   * Deterministic: the same prompt and parameters give the same beams in every runtime and
   * in the SIMD and scalar builds.
   * @throws WasmlmError WLM_ERR_INVALID_ARG (width, maxTokens or lengthPenalty out of range,
   *   unknown names, wrong types), WLM_ERR_CONTEXT_FULL (prompt longer than nCtx),
   *   WLM_ERR_STATE (no KV cache, busy); DOMException 'AbortError' (results so far in
   *   engine.lastBeamResult).
   */
  beamSearch(prompt: string, params?: BeamParams, options?: BeamSearchOptions): Promise<BeamResult>;

  /**
   * Re-applies a sampler chain to the logits the last generated token of sequence 0 was drawn
   * from (of the running generation or batch, or of the last one), without changing the
   * generation: to show how each parameter reshapes the candidates. `params` as generate()'s
   * (penalties count the sequence's tokens, as wlm_generate_next would); nProbs defaults to 10.
   * With the parameters of the generation, `top` equals the last Token's `top`. Allowed while
   * a generation or batch runs (it then previews the current step).
   * @throws WasmlmError WLM_ERR_STATE before any token was generated on this context (also
   *   after load(), reset(), evalTokens() and beamSearch(), or while a load or beam search
   *   runs), WLM_ERR_INVALID_ARG (parameters, as generate()).
   */
  previewDistribution(params?: GenerateParams): Promise<PreviewResult>;

  /**
   * The GBNF grammar `jsonSchema` becomes (the C converter, wlm_json_schema_to_grammar):
   * `grammar` is the text generate() would use, `warnings` what strict: false ignored (empty
   * when strict). Rejects as generate() does for the schema (WLM_ERR_INVALID_ARG,
   * WLM_ERR_UNSUPPORTED with line / column). Needs no model.
   */
  jsonSchemaToGrammar(schema: object | boolean | string,
                      options?: GrammarOptions): Promise<{ grammar: string; warnings: string[] }>;

  /** The KV cache's occupancy and the context's memory now; allowed while a generation runs.
   *  @throws WasmlmError WLM_ERR_STATE without a model. */
  kvStats(): Promise<KvStats>;

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
  readonly wasmMemoryBytes: number;

  /** Resolves once the helper threads run (at once with one thread); rejects with why they
   *  could not start (EngineOptions.threads: they start in the background). */
  readonly threadsReady: Promise<void>;

  /**
   * Appends `ids` to the context's sequence 0 (positions nPast…; wlm_eval) and returns a copy
   * of the logits of the last one: vocabSize float32, unnormalised. Continues after whatever
   * the context holds (e.g. a finished generation); call reset() first to start at position 0.
   * @throws WasmlmError WLM_ERR_INVALID_ARG (id out of range, empty ids),
   *   WLM_ERR_CONTEXT_FULL (the sequence would exceed nCtx; nothing is evaluated),
   *   WLM_ERR_STATE (no model, or a generation running).
   */
  evalTokens(ids: ArrayLike<number>): Promise<Float32Array>;

  /** Forgets every sequence: the next evalTokens() starts at position 0. */
  reset(): Promise<void>;

  /**
   * Compiles ahead: a throw-away generation of two tokens on a tiny model built into the wasm
   * module (a llama2.c checkpoint with stories260K's layer shapes, src/runtime/warmup.h), so
   * that a runtime which compiles each wasm function at its first call (V8's lazy compilation)
   * has compiled the loader, tokenizer, forward pass and sampler before the first real
   * generation. Leaves this engine's model, context and results as they were. Worker engines
   * run it in their worker (WorkerEngineOptions.warmup).
   * @returns the tokens generated (2; 0 for a module built before this function existed) and
   *   the time it took in ms
   * @throws WasmlmError WLM_ERR_STATE (freed, or a load / generation in progress), WLM_ERR_NOMEM
   */
  warmUp(): Promise<{ tokens: number; ms: number }>;
}

/**
 * Creates an engine that runs in the calling thread (Node, a page's main thread, or your own
 * worker). Picks the build first (SIMD128, threaded or scalar: see EngineOptions), then fetches
 * and compiles only that one (streaming, while it downloads, when served as application/wasm)
 * and instantiates it (its only import is env.emscripten_notify_memory_growth; any other
 * import is reported as an error).
 *
 * Timing marks (User Timing, performance.mark, where the runtime has it), for measuring the
 * time to the first token: 'wasmlm:engine-ready' when the engine exists, 'wasmlm:model-loaded'
 * after each load(), 'wasmlm:first-token' at the first token the engine generates (once per
 * engine). A worker engine sets them in the calling thread, when the worker's replies arrive.
 * @throws Error when the module cannot be fetched or compiled (a runtime without SIMD needs
 *   {simd: false}); WasmlmError WLM_ERR_IO for a failed download.
 */
export function createEngine(options?: EngineOptions): Promise<InThreadEngine>;

/**
 * Starts fetching and compiling the wasm build that createEngine(options) or
 * createWorkerEngine(options) will pick (the same choice: SIMD128, threaded or scalar), so that
 * a later call finds it compiled instead of waiting for it; each build is compiled once per
 * thread. Call it as early as the page knows it will run a model (e.g. right after importing
 * the library), with the options it will pass. Nothing else starts (no worker, no threads).
 * Resolves when the module is compiled; rejects as createEngine would (WLM_ERR_IO, a compile
 * error, WLM_ERR_INVALID_ARG / WLM_ERR_UNSUPPORTED for `threads`). With `wasm` given it only
 * compiles that source (nothing is kept).
 */
export function preload(options?: EngineOptions): Promise<void>;

/**
 * Hands the library a compile of one of its builds that the caller started before the library
 * was loaded: `file` is the build's name in dist/ (e.g. 'wasmlm-relaxed-mt.wasm', the file
 * createEngine / createWorkerEngine would pick: relaxed SIMD where it validates and computes its
 * known answer, else SIMD128 'wasmlm.wasm', else 'wasmlm-scalar.wasm'; '-mt' when threads run),
 * `module` the promise of its WebAssembly.Module (e.g. `WebAssembly.compileStreaming(fetch(
 * 'dist/wasmlm-relaxed-mt.wasm'))` in a page's first inline script, as web/index.html does). A
 * later createEngine / createWorkerEngine / preload that picks the same file uses it instead of
 * fetching the file again; one that picks another file ignores it (the library's own choice
 * always decides). If `module` rejects, the library fetches the file itself and reports its
 * errors as usual. Throws WasmlmError WLM_ERR_INVALID_ARG for an unknown file name.
 */
export function adoptCompiled(file: string, module: Promise<WebAssembly.Module> | WebAssembly.Module): void;

/**
 * Creates an engine whose work runs in a module Web Worker (js/worker/worker.js), so the page stays
 * responsive; same interface as createEngine() minus the low-level methods. Unless `wasm` is
 * given, the module is picked, fetched and compiled in the calling thread while the worker
 * script starts, and handed to the worker (a WebAssembly.Module crosses postMessage without
 * recompiling), so the worker's start and the compile overlap. Tokens arrive one
 * message each (with their `top` alternatives), beam search steps one message each. Model and
 * tokenizer bytes given as ArrayBuffer / Uint8Array are copied to the worker (the caller's
 * buffers stay usable); Blobs are passed by reference.
 * @throws Error in environments without Web Workers unless options.worker is given.
 */
export function createWorkerEngine(options?: WorkerEngineOptions): Promise<Engine>;

/**
 * Renders a chat template (Jinja source) for a conversation as Hugging Face's
 * tokenizer.apply_chat_template(messages, tokenize=False) does, with @huggingface/jinja.
 * @returns the prompt text, special tokens written as text
 * @throws Error when the template does not parse or raises; TypeError for bad messages
 */
export function renderChatTemplate(template: string, messages: ChatMessage[],
                                   options?: RenderChatTemplateOptions): Promise<string>;
