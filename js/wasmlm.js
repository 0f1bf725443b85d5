// wasmlm.js — the public ES module: createEngine() runs the engine in this thread on the
// standalone wasm module (dist/wasmlm.wasm), createWorkerEngine() runs the same engine in
// js/worker.js behind the same interface. Identical in Node 20 and browsers, no build step.
// It does not parse model files or sample tokens: the C side (src/wasmlm.h) does all that;
// this file moves bytes and strings across the boundary and turns statuses into errors.
//
// Memory rule: any call into wasm may grow memory, which detaches memory.buffer. Views of
// wasm memory are created right before use and never kept across such a call. With threads the
// memory is a SharedArrayBuffer, which TextDecoder refuses in browsers: bytes handed to it go
// through unshared() first.

import { PROTOCOL_VERSION, Req, Reply } from './protocol.js';
import { MAX_THREADS, coreCount, importsMemory, sharedMemory, startThreads, stopThreads, threadsUnavailable } from './threads.js';

// ------------------------------------------------------------------------------------------
// Errors

/** Status codes of enum wlm_status (src/wasmlm.h), by name. */
const STATUS = Object.freeze({
  WLM_OK: 0,
  WLM_DONE: 1,
  WLM_ERR_INVALID_ARG: -1,
  WLM_ERR_NOMEM: -2,
  WLM_ERR_FORMAT: -3,
  WLM_ERR_TRUNCATED: -4,
  WLM_ERR_UNSUPPORTED: -5,
  WLM_ERR_TOKENIZER: -6,
  WLM_ERR_CONTEXT_FULL: -7,
  WLM_ERR_STATE: -8,
});

/** enum wlm_stop_reason → LastResult.stopReason. */
const STOP_REASONS = ['none', 'max_tokens', 'eos', 'stop_string', 'context_full', 'aborted'];

/**
 * An error reported by the engine. `code` is the C status name ('WLM_ERR_FORMAT', …) and
 * `status` its number (-3); errors raised on the JS side before reaching C use the C code that
 * fits (e.g. WLM_ERR_INVALID_ARG, WLM_ERR_STATE), except I/O failures (download or file read),
 * which have code 'WLM_ERR_IO', status null, and carry `url` (and `httpStatus` for HTTP errors).
 */
export class WasmlmError extends Error {
  /**
   * @param {string} message  human-readable; for C errors, the handle's message
   * @param {string} code     'WLM_ERR_…'
   * @param {number|null} [status]  the C status number (null for WLM_ERR_IO)
   * @param {{url?: string, httpStatus?: number, cause?: unknown}} [extra]
   */
  constructor(message, code, status = STATUS[code] ?? null, extra = {}) {
    super(message, extra.cause !== undefined ? { cause: extra.cause } : undefined);
    this.name = 'WasmlmError';
    this.code = code;
    this.status = status;
    if (extra.url !== undefined) this.url = extra.url;
    if (extra.httpStatus !== undefined) this.httpStatus = extra.httpStatus;
  }
}

function jsError(code, message) {
  return new WasmlmError(message, code, STATUS[code]);
}

function abortError(what = 'The operation') {
  return new DOMException(`${what} was aborted.`, 'AbortError');
}

/** Rebuilds an error that crossed postMessage (see protocol.serializeError). */
function deserializeError(data) {
  let err;
  if (data.name === 'AbortError') {
    err = new DOMException(data.message, 'AbortError');
  } else if (data.name === 'WasmlmError') {
    err = new WasmlmError(data.message, data.code, data.status ?? null, {
      url: data.url, httpStatus: data.httpStatus,
    });
  } else {
    err = new Error(data.message);
    err.name = data.name;
  }
  if (data.stack && !(err instanceof DOMException)) {
    err.stack = `${err.stack}\n    --- in the worker ---\n${data.stack}`;
  }
  return err;
}

// ------------------------------------------------------------------------------------------
// Environment

const IS_NODE = typeof process === 'object' && process !== null &&
  typeof process.versions?.node === 'string' && typeof window === 'undefined';

/** The base URL relative strings resolve against outside Node (page, or worker script). */
function baseURI() {
  return globalThis.document?.baseURI ?? globalThis.location?.href;
}

/**
 * Where a string or URL source points: {url} (fetch) or {path} (Node file system).
 * In Node, a string without a URL scheme is a file path (relative to the working directory);
 * in browsers, it is a URL relative to the document (or the worker script).
 */
async function locate(source) {
  if (source instanceof URL || (typeof source === 'string' &&
      /^[a-zA-Z][a-zA-Z\d+.-]+:/.test(source))) { // 2+ letter scheme: "C:\x" stays a path
    const url = new URL(source);
    if (url.protocol === 'file:') {
      if (!IS_NODE) throw jsError('WLM_ERR_INVALID_ARG', `file: URLs need Node: ${url.href}`);
      const { fileURLToPath } = await import('node:url');
      return { path: fileURLToPath(url), name: url.href };
    }
    return { url, name: url.href };
  }
  if (typeof source !== 'string') {
    throw jsError('WLM_ERR_INVALID_ARG', `cannot load from ${Object.prototype.toString.call(source)}`);
  }
  if (IS_NODE) return { path: source, name: source };
  const url = new URL(source, baseURI());
  return { url, name: url.href };
}

/** Yields to the event loop (a macrotask, so timers, messages and UI events run). */
const macrotask = (() => {
  if (typeof setImmediate === 'function') return () => new Promise((r) => setImmediate(r));
  let channel = null;
  const waiting = [];
  return () => new Promise((resolve) => {
    if (!channel) {
      channel = new MessageChannel();
      channel.port1.onmessage = () => waiting.shift()();
    }
    waiting.push(resolve);
    channel.port2.postMessage(0);
  });
})();

// Smallest module using a v128 instruction (from wasm-feature-detect): validates iff SIMD128.
const SIMD_PROBE = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1,
  0, 10, 10, 1, 8, 0, 65, 0, 253, 15, 253, 98, 11]);

// ------------------------------------------------------------------------------------------
// The wasm module

/** Exports js/wasmlm.js calls (tools/exports.txt lists what the build keeps). */
const REQUIRED_EXPORTS = [
  'memory', 'wlm_status_name', 'wlm_model_load_tokenizer', 'wlm_model_free', 'wlm_model_errmsg',
  'wlm_tokenize', 'wlm_token_piece', 'wlm_context_free', 'wlm_context_errmsg', 'wlm_context_reset',
  'wlm_context_n_past', 'wlm_context_memory', 'wlm_eval', 'wlm_logits', 'wlm_generate_begin_text',
  'wlm_generate_next', 'wlm_generate_abort', 'wlm_generate_batch_next', 'wlm_beam_step',
  'wlm_beam_count', 'wlmjs_malloc', 'wlmjs_free', 'wlmjs_model_load', 'wlmjs_model_info',
  'wlmjs_context_new', 'wlmjs_kv_stat', 'wlmjs_gen_params_new', 'wlmjs_gen_params_set',
  'wlmjs_gen_params_add_stop', 'wlmjs_gen_params_add_bias', 'wlmjs_gen_params_add_ban',
  'wlmjs_token_new', 'wlmjs_token_id', 'wlmjs_token_piece', 'wlmjs_token_piece_len',
  'wlmjs_token_prob', 'wlmjs_token_prob_sampled', 'wlmjs_token_n_past', 'wlmjs_token_stop_reason',
  'wlmjs_token_logprob', 'wlmjs_token_seq', 'wlmjs_token_status', 'wlmjs_token_n_probs',
  'wlmjs_token_top_id', 'wlmjs_token_top_prob', 'wlmjs_token_top_logprob',
  'wlmjs_token_top_prob_sampled', 'wlmjs_tokens_new', 'wlmjs_token_at',
  'wlmjs_generate_batch_begin', 'wlmjs_beam_begin', 'wlmjs_beam_field', 'wlmjs_beam_memory',
  'wlm_sampler_preview', 'wlmjs_threadpool_new', 'wlm_threadpool_free', 'wlm_threadpool_running',
  'wlm_context_set_threadpool',
];

async function compileWasm(source) {
  if (source instanceof WebAssembly.Module) return { module: source, name: 'WebAssembly.Module' };
  if (source instanceof ArrayBuffer || ArrayBuffer.isView(source)) {
    return { module: await WebAssembly.compile(source), name: 'bytes' };
  }
  const loc = await locate(source);
  let module;
  try {
    if (loc.path) {
      const fs = await import('node:fs/promises');
      let bytes;
      try {
        bytes = await fs.readFile(loc.path);
      } catch (e) {
        throw new WasmlmError(`cannot read the wasm module ${loc.name}: ${e.message}`,
          'WLM_ERR_IO', null, { url: loc.name, cause: e });
      }
      module = await WebAssembly.compile(bytes);
    } else {
      const res = await fetchOk(loc.url);
      const type = res.headers.get('content-type') || '';
      module = typeof WebAssembly.compileStreaming === 'function' && type.startsWith('application/wasm')
        ? await WebAssembly.compileStreaming(res)
        : await WebAssembly.compile(await res.arrayBuffer());
    }
  } catch (e) {
    if (e instanceof WebAssembly.CompileError) {
      throw new Error(`wasmlm: cannot compile ${loc.name}: ${e.message}` +
        ' (a runtime without WebAssembly SIMD needs createEngine({simd: false}))', { cause: e });
    }
    throw e;
  }
  return { module, name: loc.name };
}

/**
 * Instantiates the standalone module: imports from its own import list, then _initialize.
 * `sharedMemory` is the memory of the threaded build (which imports it), else null. The
 * returned exports object always has `memory`.
 */
async function instantiateWasm(module, name, sharedMemory = null) {
  let memory = sharedMemory; // else set after instantiation; the imports below only run later
  const provided = {
    env: {
      memory: sharedMemory,
      emscripten_notify_memory_growth() {},
      // Older Emscripten releases import this for large copies.
      emscripten_memcpy_big(dest, src, n) {
        new Uint8Array(memory.buffer).copyWithin(dest >>> 0, src >>> 0, (src >>> 0) + (n >>> 0));
        return dest;
      },
    },
  };
  const imports = {};
  const missing = [];
  for (const imp of WebAssembly.Module.imports(module)) {
    const fn = provided[imp.module]?.[imp.name];
    if ((imp.kind === 'function' || imp.kind === 'memory') && fn) {
      (imports[imp.module] ??= {})[imp.name] = fn;
    } else {
      missing.push(`${imp.module}.${imp.name} (${imp.kind})`);
    }
  }
  if (missing.length) {
    throw new Error(`wasmlm: ${name} imports ${missing.join(', ')}, which js/wasmlm.js does not ` +
      'provide; the module was built with other flags than tools/build.sh uses');
  }
  const instance = await WebAssembly.instantiate(module, imports);
  const x = sharedMemory ? { ...instance.exports, memory: sharedMemory } : instance.exports;
  const absent = REQUIRED_EXPORTS.filter((n) => !(n in x));
  if (absent.length) {
    throw new Error(`wasmlm: ${name} lacks the exports ${absent.join(', ')}; ` +
      'it does not match this version of js/wasmlm.js');
  }
  memory = x.memory;
  if (typeof x._initialize === 'function') x._initialize();
  return x;
}

// ------------------------------------------------------------------------------------------
// Reading sources into the wasm heap

const FILE_CHUNK = 1 << 20;

/** A malloc'd buffer in wasm memory that grows (by copying) while bytes are appended. */
class HeapBuffer {
  constructor(x, capacity, what) {
    this.x = x;
    this.what = what;
    this.cap = Math.max(1, capacity);
    this.ptr = x.wlmjs_malloc(this.cap) >>> 0;
    this.len = 0;
    if (!this.ptr) this.#nomem(this.cap);
  }

  #nomem(n) {
    this.ptr = 0;
    throw jsError('WLM_ERR_NOMEM', `cannot allocate ${n} bytes of wasm memory for the ${this.what}`);
  }

  write(chunk) {
    const n = chunk.byteLength;
    if (this.len + n > this.cap) this.#grow(Math.max(this.cap * 2, this.len + n));
    new Uint8Array(this.x.memory.buffer, this.ptr + this.len, n).set(chunk);
    this.len += n;
  }

  #grow(cap) {
    const p = this.x.wlmjs_malloc(cap) >>> 0; // may grow memory: no view is alive here
    if (!p) { this.dispose(); this.#nomem(cap); }
    new Uint8Array(this.x.memory.buffer).copyWithin(p, this.ptr, this.ptr + this.len);
    this.x.wlmjs_free(this.ptr);
    this.ptr = p;
    this.cap = cap;
  }

  /** Gives up ownership: the caller frees (or hands over) ptr. */
  release() {
    const out = { ptr: this.ptr, size: this.len };
    this.ptr = 0;
    return out;
  }

  dispose() {
    if (this.ptr) this.x.wlmjs_free(this.ptr);
    this.ptr = 0;
  }
}

/** fetch() that turns network and HTTP failures into WasmlmError('WLM_ERR_IO'). */
async function fetchOk(url, signal) {
  let res;
  try {
    res = await fetch(url, signal ? { signal } : undefined);
  } catch (e) {
    if (e?.name === 'AbortError') throw e;
    const why = e?.cause?.code || e?.cause?.message || e?.message || String(e);
    throw new WasmlmError(`failed to fetch ${url}: ${why}`, 'WLM_ERR_IO', null,
      { url: String(url), cause: e });
  }
  if (!res.ok) {
    throw new WasmlmError(
      `failed to fetch ${url}: HTTP ${res.status}${res.statusText ? ` ${res.statusText}` : ''}`,
      'WLM_ERR_IO', null, { url: String(url), httpStatus: res.status });
  }
  return res;
}

/**
 * Copies a source into a malloc'd heap buffer, chunk by chunk, reporting progress.
 * Returns {ptr, size}; the caller owns ptr. On any failure nothing stays allocated.
 */
async function readIntoHeap(x, source, stage, onProgress, signal) {
  const report = (loaded, total) => onProgress?.({ stage, loaded, total });
  const checkAbort = () => { if (signal?.aborted) throw abortError(`Loading the ${stage}`); };
  checkAbort();
  if (source == null) throw jsError('WLM_ERR_INVALID_ARG', `load(): no ${stage} given`);

  if (source instanceof ArrayBuffer || ArrayBuffer.isView(source)) {
    const bytes = source instanceof ArrayBuffer ? new Uint8Array(source)
      : new Uint8Array(source.buffer, source.byteOffset, source.byteLength);
    const buf = new HeapBuffer(x, bytes.byteLength, stage);
    buf.write(bytes);
    report(bytes.byteLength, bytes.byteLength);
    return buf.release();
  }

  if (typeof Blob !== 'undefined' && source instanceof Blob) {
    return streamIntoHeap(x, source.stream().getReader(), source.size, stage, report, checkAbort);
  }

  const loc = await locate(source);
  if (loc.path) {
    const fs = await import('node:fs/promises');
    let fh;
    try {
      fh = await fs.open(loc.path, 'r');
    } catch (e) {
      throw new WasmlmError(`cannot read the ${stage} file ${loc.path}: ${e.message}`,
        'WLM_ERR_IO', null, { url: loc.name, cause: e });
    }
    let buf = null;
    try {
      const { size } = await fh.stat();
      buf = new HeapBuffer(x, size, stage);
      const chunk = new Uint8Array(Math.min(Math.max(size, 1), FILE_CHUNK));
      report(0, size);
      for (;;) {
        checkAbort();
        // Read into a JS buffer, then copy: wasm memory may be detached during the await.
        const { bytesRead } = await fh.read(chunk, 0, chunk.byteLength, null);
        if (bytesRead === 0) break;
        buf.write(chunk.subarray(0, bytesRead));
        report(buf.len, size);
      }
      return buf.release();
    } finally {
      buf?.dispose();
      await fh.close();
    }
  }

  const res = await fetchOk(loc.url, signal);
  const encoding = res.headers.get('content-encoding');
  const length = res.headers.get('content-length');
  // With a content-encoding, Content-Length counts the compressed bytes: treat as unknown.
  const total = length !== null && (!encoding || encoding === 'identity') &&
    Number.isSafeInteger(Number(length)) ? Number(length) : 0;
  if (!res.body) { // e.g. a 204: an empty file
    const buf = new HeapBuffer(x, 0, stage);
    report(0, 0);
    return buf.release();
  }
  return streamIntoHeap(x, res.body.getReader(), total, stage, report, checkAbort);
}

async function streamIntoHeap(x, reader, total, stage, report, checkAbort) {
  let buf = null;
  try {
    buf = new HeapBuffer(x, total || FILE_CHUNK, stage);
    report(0, total);
    for (;;) {
      checkAbort();
      const { done, value } = await reader.read();
      if (done) break;
      buf.write(value);
      report(buf.len, total);
    }
    if (!total) report(buf.len, buf.len); // the size is known now
    return buf.release();
  } catch (e) {
    reader.cancel(e).catch(() => {});
    throw e;
  } finally {
    buf?.dispose();
  }
}

// ------------------------------------------------------------------------------------------
// In-thread engine

/** Generation parameters: JS name → wlmjs_gen_params_set field number. The list-valued ones
 *  (stop, logitBias, bannedTokens) are appended through their own accessors. */
const PARAM_FIELDS = {
  temperature: 0, topK: 1, topP: 2, repeatPenalty: 3, repeatLastN: 4, seed: 5, maxTokens: 6,
  addBos: 7, minP: 8, typicalP: 9, presencePenalty: 10, frequencyPenalty: 11, samplerOrder: 12,
  nProbs: 13, contextShift: 14, nKeep: 15,
};
const LIST_PARAMS = ['stop', 'logitBias', 'bannedTokens'];
/** Parameters that are C integers: a finite non-integer is a type error (NaN and ±Infinity go
 *  through to C, which names the field in its refusal). */
const INT_PARAMS = new Set(['topK', 'repeatLastN', 'maxTokens', 'nProbs', 'nKeep']);
const BOOL_PARAMS = new Set(['addBos', 'contextShift']);
/** enum wlm_sampler_order by name. */
const SAMPLER_ORDERS = Object.freeze({ llamacpp: 0, runc: 1 });
const MAX_SEQ = 64;        // WLM_MAX_SEQ: sequences per context (batch size, 2 × beam width)
const MAX_STOP = 8;        // WLM_MAX_STOP_STRINGS
const MAX_LOGIT_BIAS = 1024; // WLM_MAX_LOGIT_BIAS

/** A token id given by the caller: any integer that fits an int32 (C checks the vocabulary). */
function tokenIdArg(v, what) {
  if (!Number.isInteger(v) || v < -(2 ** 31) || v >= 2 ** 31) {
    throw jsError('WLM_ERR_INVALID_ARG', `${what}: ${String(v)} is not a token id (an integer)`);
  }
  return v;
}

/** logitBias as [[id, bias], …] from an object {id: bias}, a Map or an array of pairs. */
function logitBiasEntries(v) {
  if (v == null) return [];
  let entries;
  if (v instanceof Map) {
    entries = [...v];
  } else if (Array.isArray(v)) {
    entries = v.map((e) => {
      if (!Array.isArray(e) || e.length !== 2) {
        throw jsError('WLM_ERR_INVALID_ARG', 'logitBias: an array must hold [tokenId, bias] pairs');
      }
      return e;
    });
  } else if (typeof v === 'object') {
    entries = Object.entries(v).map(([k, b]) => {
      const id = /^-?\d+$/.test(k) ? Number(k) : NaN;
      if (Number.isNaN(id)) throw jsError('WLM_ERR_INVALID_ARG', `logitBias: ${JSON.stringify(k)} is not a token id`);
      return [id, b];
    });
  } else {
    throw jsError('WLM_ERR_INVALID_ARG',
      `logitBias must be an object {tokenId: bias}, a Map or an array of pairs, got ${typeof v}`);
  }
  return entries.map(([id, bias]) => {
    tokenIdArg(id, 'logitBias');
    if (typeof bias !== 'number') {
      throw jsError('WLM_ERR_INVALID_ARG', `logitBias[${id}] must be a number, got ${typeof bias}`);
    }
    return [id, bias];
  });
}

function randomSeed() {
  // An integer in [1, 2^53): representable exactly as the double wlmjs_gen_params_set takes.
  return Math.floor(Math.random() * (2 ** 53 - 1)) + 1;
}

function utf8(text) {
  return new TextEncoder().encode(text);
}

/** `view`, or a copy of it when it views shared memory (TextDecoder rejects those). */
function unshared(view) {
  return typeof SharedArrayBuffer === 'function' && view.buffer instanceof SharedArrayBuffer
    ? view.slice() : view;
}

class Engine {
  #x;            // wasm exports; null once freed
  #simd;
  #threads;      // {n, pool, helpers, stacks} from startThreads, or null
  #model = 0;    // wlm_model*
  #ctx = 0;      // wlm_context*
  #busy = null;  // 'load' | 'generate' | 'batch generation' | 'beam search' while one runs
  #gen = null;   // the generation in progress (identity token)
  #info = null;
  #bos = -1;     // token ids from the model, for detokenize()
  #eos = -1;
  #ctxParams = null; // {nCtx, kvCache, nSeqMax} of the current context (recreated when a batch
                     // or a beam search needs more sequences)
  #pieces = null;    // token id → standalone text of its piece, filled lazily (top alternatives)
  #piecesAfterBos = null;
  #lenSlot = 0;      // a 4-byte slot for wlm_token_piece's length
  #previewPrev;      // the token before the last one sequence 0 drew (for the alternatives'
                     // text), or undefined when no generation has drawn one on this context

  /** The result of the last generation, or null. See LastResult in wasmlm.d.ts. */
  lastResult = null;

  /** The result of the last batch generation, or null. See BatchResult in wasmlm.d.ts. */
  lastBatchResult = null;

  /** The result of the last beam search, or null. See BeamResult in wasmlm.d.ts. */
  lastBeamResult = null;

  constructor(x, simd, threads) {
    this.#x = x;
    this.#simd = simd;
    this.#threads = threads;
  }

  /** The loaded model's info, or null. */
  get info() { return this.#info; }

  /** Threads that run the matrix products (1: this thread only). */
  get threads() { return this.#threads?.n ?? 1; }

  /** Current size of the module's linear memory in bytes (0 once freed). */
  get wasmMemoryBytes() { return this.#x ? this.#x.memory.buffer.byteLength : 0; }

  // ---- helpers ----

  #exports() {
    if (!this.#x) throw jsError('WLM_ERR_STATE', 'the engine has been freed');
    return this.#x;
  }

  #u8() { return new Uint8Array(this.#x.memory.buffer); }

  #readCString(ptr) {
    ptr >>>= 0;
    if (!ptr) return '';
    const mem = this.#u8();
    const end = mem.indexOf(0, ptr);
    return new TextDecoder().decode(unshared(mem.subarray(ptr, end < 0 ? mem.length : end)));
  }

  #i32(ptr) { return new DataView(this.#x.memory.buffer).getInt32(ptr, true); }

  /** malloc'd, NUL-terminated UTF-8 copy of `text`; the caller frees it. */
  #cstring(text) {
    const bytes = utf8(text);
    const p = this.#x.wlmjs_malloc(bytes.length + 1) >>> 0;
    if (!p) throw jsError('WLM_ERR_NOMEM', 'cannot allocate a string in wasm memory');
    const mem = this.#u8();
    mem.set(bytes, p);
    mem[p + bytes.length] = 0;
    return p;
  }

  /** A C error as WasmlmError: the handle's message, or the status name when it has none. */
  #error(rc, message) {
    const code = this.#readCString(this.#x.wlm_status_name(rc)) || `status ${rc}`;
    return new WasmlmError(message || code, code, rc);
  }

  #ctxError(rc) { return this.#error(rc, this.#readCString(this.#x.wlm_context_errmsg(this.#ctx))); }

  #needModel() {
    this.#exports();
    if (!this.#model) throw jsError('WLM_ERR_STATE', 'no model loaded: call load() first');
  }

  #needIdle(what) {
    if (this.#busy) {
      throw jsError('WLM_ERR_STATE', `cannot ${what} while a ${this.#busy} is in progress` +
        (this.#busy !== 'load' ? ' (finish, abort or break out of it first)' : ''));
    }
  }

  #unload() {
    const x = this.#x;
    if (this.#ctx) x.wlm_context_free(this.#ctx);
    if (this.#model) x.wlm_model_free(this.#model);
    this.#ctx = 0;
    this.#model = 0;
    this.#info = null;
    this.#ctxParams = null;
    this.#pieces = null;
    this.#piecesAfterBos = null;
    this.#previewPrev = undefined;
  }

  /** Creates a context for the loaded model (wlmjs_context_new); returns the handle. */
  #newContext(model, { nCtx, kvCache, nSeqMax }) {
    const x = this.#x;
    const slot = x.wlmjs_malloc(4) >>> 0;
    if (!slot) throw jsError('WLM_ERR_NOMEM', 'cannot allocate 4 bytes');
    try {
      new DataView(x.memory.buffer).setInt32(slot, 0, true);
      const rc = x.wlmjs_context_new(model, nCtx, kvCache ? 1 : 0, this.#simd ? 1 : 0, nSeqMax, slot);
      const ctx = this.#i32(slot) >>> 0;
      const rc2 = rc === 0 && this.#threads ? x.wlm_context_set_threadpool(ctx, this.#threads.pool) : 0;
      if (rc !== 0 || rc2 !== 0) { // (the pool's attention scratch may not fit)
        const err = this.#error(rc || rc2, this.#readCString(x.wlm_context_errmsg(ctx)));
        x.wlm_context_free(ctx);
        throw err;
      }
      return ctx;
    } finally {
      x.wlmjs_free(slot);
    }
  }

  /**
   * Makes sure the context holds at least `n` sequences, recreating it when it holds fewer
   * (the context is idle between generations, so nothing is lost). The old one is freed first,
   * so the KV cache never exists twice; if the new one cannot be made, the old size is restored
   * and the error thrown. Requests above WLM_MAX_SEQ are left for C to refuse.
   */
  #ensureSeqMax(n) {
    const cur = this.#ctxParams;
    if (!(n > cur.nSeqMax && n <= MAX_SEQ)) return;
    const x = this.#x;
    x.wlm_context_free(this.#ctx);
    this.#ctx = 0;
    this.#previewPrev = undefined;
    try {
      this.#ctx = this.#newContext(this.#model, { ...cur, nSeqMax: n });
      this.#ctxParams = { ...cur, nSeqMax: n };
    } catch (e) {
      this.#ctx = this.#newContext(this.#model, cur); // fits: it did a moment ago
      throw e;
    }
  }

  /** A malloc'd int32 array holding `ids`; the caller frees it. */
  #heapInt32(ids) {
    const p = this.#x.wlmjs_malloc(Math.max(1, ids.length) * 4) >>> 0;
    if (!p) throw jsError('WLM_ERR_NOMEM', `cannot allocate ${ids.length} int32 in wasm memory`);
    new Int32Array(this.#x.memory.buffer, p, ids.length).set(ids);
    return p;
  }

  /** The raw bytes of token `id`'s piece after token `prev` (wlm_token_piece), or null. */
  #pieceBytes(prev, id) {
    const x = this.#x;
    if (!this.#lenSlot) {
      this.#lenSlot = x.wlmjs_malloc(4) >>> 0;
      if (!this.#lenSlot) throw jsError('WLM_ERR_NOMEM', 'cannot allocate 4 bytes');
    }
    const p = x.wlm_token_piece(this.#model, prev, id, this.#lenSlot) >>> 0;
    if (!p) return null;
    return unshared(new Uint8Array(x.memory.buffer, p, this.#i32(this.#lenSlot) >>> 0));
  }

  /**
   * The text of token `id` alone, following `prev` (only BOS matters: it drops the piece's
   * leading space), for top alternatives: one non-streaming decode, so a piece holding part of
   * a UTF-8 character gives U+FFFD. BOS and EOS give ''. Cached per model.
   */
  #pieceText(prev, id) {
    const afterBos = prev === this.#bos;
    const vocab = this.#info.vocabSize;
    if (!this.#pieces) {
      this.#pieces = new Array(vocab);
      this.#piecesAfterBos = new Array(vocab);
    }
    const cache = afterBos ? this.#piecesAfterBos : this.#pieces;
    let text = cache[id];
    if (text === undefined) {
      const bytes = id === this.#bos || id === this.#eos ? null : this.#pieceBytes(prev, id);
      text = bytes ? new TextDecoder().decode(bytes) : '';
      if (id >= 0 && id < vocab) cache[id] = text;
    }
    return text;
  }

  /** The text of `ids` following token `prev` (-1: none), decoded as one UTF-8 stream. */
  #decodeIds(ids, prev = -1) {
    const decoder = new TextDecoder();
    let out = '';
    for (const id of ids) {
      if (!Number.isInteger(id)) throw jsError('WLM_ERR_INVALID_ARG', `token id ${id} is not an integer`);
      const bytes = this.#pieceBytes(prev, id);
      if (!bytes) {
        throw jsError('WLM_ERR_INVALID_ARG',
          `token id ${id} is outside the vocabulary (0..${this.#info.vocabSize - 1})`);
      }
      if (id !== this.#bos && id !== this.#eos) out += decoder.decode(bytes, { stream: true });
      prev = id;
    }
    return out + decoder.decode();
  }

  /**
   * Reads the wlm_token at `tok` into a Token object (see wasmlm.d.ts). `decoder` is the
   * sequence's streaming TextDecoder; `prev` the token before this one (for the alternatives'
   * text). Returns {status, token}; with WLM_DONE the token is the sequence's end item
   * (id -1, the text released at the end, stopReason).
   */
  #readToken(tok, decoder, prev) {
    const x = this.#x;
    const status = x.wlmjs_token_status(tok);
    const piecePtr = x.wlmjs_token_piece(tok) >>> 0;
    const pieceLen = x.wlmjs_token_piece_len(tok) >>> 0;
    let text = pieceLen ? decoder.decode(unshared(new Uint8Array(x.memory.buffer, piecePtr, pieceLen)),
      { stream: true }) : '';
    const nPast = x.wlmjs_token_n_past(tok);
    if (status === STATUS.WLM_DONE) {
      text += decoder.decode(); // flush an incomplete UTF-8 tail
      const stopReason = STOP_REASONS[x.wlmjs_token_stop_reason(tok)] ?? 'none';
      return { status, stopReason, token: { id: -1, text, prob: 0, logprob: 0, probSampled: 0, nPast } };
    }
    const token = {
      id: x.wlmjs_token_id(tok),
      text,
      prob: x.wlmjs_token_prob(tok),
      logprob: x.wlmjs_token_logprob(tok),
      probSampled: x.wlmjs_token_prob_sampled(tok),
      nPast,
    };
    const n = x.wlmjs_token_n_probs(tok);
    if (n > 0) {
      token.top = [];
      for (let i = 0; i < n; i++) {
        const id = x.wlmjs_token_top_id(tok, i);
        token.top.push({
          id,
          text: this.#pieceText(prev, id),
          prob: x.wlmjs_token_top_prob(tok, i),
          logprob: x.wlmjs_token_top_logprob(tok, i),
          probSampled: x.wlmjs_token_top_prob_sampled(tok, i),
        });
      }
    }
    return { status, stopReason: null, token };
  }

  // ---- public API ----

  /**
   * Loads a model and its tokenizer, replacing (first freeing) any model loaded before.
   * Model bytes are streamed straight into a wasm heap buffer the model then owns.
   * On error nothing stays allocated and the engine can load again.
   * @param {import('./wasmlm.d.ts').LoadOptions} options
   * @returns {Promise<import('./wasmlm.d.ts').ModelInfo>}
   */
  async load({ model, tokenizer, nCtx = 0, kvCache = true, nSeqMax = 1, onProgress, signal } = {}) {
    const x = this.#exports();
    this.#needIdle('load a model');
    if (model == null) throw jsError('WLM_ERR_INVALID_ARG', 'load(): `model` is required');
    if (!Number.isInteger(nCtx) || nCtx < 0) {
      throw jsError('WLM_ERR_INVALID_ARG', `load(): nCtx must be an integer >= 0, got ${nCtx}`);
    }
    if (!Number.isInteger(nSeqMax)) {
      throw jsError('WLM_ERR_INVALID_ARG', `load(): nSeqMax must be an integer, got ${nSeqMax}`);
    }
    this.#busy = 'load';
    this.#unload();
    let modelPtr = 0; // heap bytes not yet owned by a model
    let tokPtr = 0;
    let model_ = 0;
    let slot = 0;
    const read = async (source, stage) => {
      try {
        return await readIntoHeap(x, source, stage, onProgress, signal);
      } catch (e) {
        // fetch rejects with signal.reason, which may be anything: report an AbortError.
        if (signal?.aborted && e?.name !== 'AbortError') throw abortError(`Loading the ${stage}`);
        throw e;
      }
    };
    try {
      const m = await read(model, 'model');
      modelPtr = m.ptr;
      // GGUF files carry their vocabulary; llama2.c checkpoints need a tokenizer.bin.
      const t = tokenizer == null ? null : await read(tokenizer, 'tokenizer');
      tokPtr = t ? t.ptr : 0;
      if (!this.#x) throw jsError('WLM_ERR_STATE', 'the engine was freed during load()');

      slot = x.wlmjs_malloc(4) >>> 0;
      if (!slot) throw jsError('WLM_ERR_NOMEM', 'cannot allocate 4 bytes');
      new DataView(x.memory.buffer).setInt32(slot, 0, true);
      const ptr = modelPtr;
      modelPtr = 0; // owned by wlmjs_model_load from here, freed by it on failure too
      let rc = x.wlmjs_model_load(ptr, m.size, slot);
      model_ = this.#i32(slot) >>> 0;
      if (rc !== 0) throw this.#error(rc, this.#readCString(x.wlm_model_errmsg(model_)));

      if (t) { // refused (WLM_ERR_STATE) when the model file has its own vocabulary
        rc = x.wlm_model_load_tokenizer(model_, tokPtr, t.size);
        x.wlmjs_free(tokPtr);
        tokPtr = 0;
        if (rc !== 0) throw this.#error(rc, this.#readCString(x.wlm_model_errmsg(model_)));
      } else if (x.wlmjs_model_info(model_, 8) !== 1) {
        throw jsError('WLM_ERR_TOKENIZER',
          'load(): this model file has no vocabulary: pass `tokenizer` (a llama2.c tokenizer.bin)');
      }

      const ctxParams = { nCtx, kvCache: !!kvCache, nSeqMax: Math.max(-1, Math.min(nSeqMax, 2 ** 31 - 1)) };
      const ctx = this.#newContext(model_, ctxParams);
      this.#model = model_;
      this.#ctx = ctx;
      this.#ctxParams = ctxParams;
      model_ = 0; // owned by the engine now
      const f = (i) => x.wlmjs_model_info(this.#model, i);
      this.#info = Object.freeze({
        dim: f(0), hiddenDim: f(1), nLayers: f(2), nHeads: f(3), nKvHeads: f(4), vocabSize: f(5),
        seqLen: f(6), sharedClassifier: f(7) === 1, weightBytes: f(11), nCtx: nCtx || f(6),
        simd: this.#simd, threads: this.threads, contextBytes: x.wlm_context_memory(ctx) >>> 0,
        wasmMemoryBytes: x.memory.buffer.byteLength,
      });
      this.#bos = f(9);
      this.#eos = f(10);
      return this.#info;
    } finally {
      // x stays valid even if free() ran meanwhile: the instance lives while referenced.
      if (slot) x.wlmjs_free(slot);
      if (modelPtr) x.wlmjs_free(modelPtr);
      if (tokPtr) x.wlmjs_free(tokPtr);
      if (model_) x.wlm_model_free(model_);
      this.#busy = null;
    }
  }

  /**
   * Encodes text into token ids as llama2.c's run.c does (dummy-prefix space, byte fallback).
   * @param {string} text
   * @param {{bos?: boolean}} [options]  bos: prepend the BOS token (default true)
   * @returns {Promise<Int32Array>}
   */
  async tokenize(text, { bos = true } = {}) {
    this.#needModel();
    const x = this.#x;
    const bytes = utf8(String(text));
    let cap = bytes.length + 3; // one token per byte at most, plus BOS and the prefix space
    const textPtr = x.wlmjs_malloc(bytes.length + 1) >>> 0;
    let idsPtr = 0;
    try {
      if (!textPtr) throw jsError('WLM_ERR_NOMEM', 'cannot allocate the text in wasm memory');
      this.#u8().set(bytes, textPtr);
      for (;;) {
        idsPtr = x.wlmjs_malloc(cap * 4) >>> 0;
        if (!idsPtr) throw jsError('WLM_ERR_NOMEM', 'cannot allocate the token buffer');
        const n = x.wlm_tokenize(this.#model, textPtr, bytes.length, bos ? 1 : 0, idsPtr, cap);
        if (n < 0) throw this.#error(n, this.#readCString(x.wlm_model_errmsg(this.#model)));
        if (n <= cap) return new Int32Array(x.memory.buffer, idsPtr, n).slice();
        x.wlmjs_free(idsPtr);
        idsPtr = 0;
        cap = n;
      }
    } finally {
      if (idsPtr) x.wlmjs_free(idsPtr);
      if (textPtr) x.wlmjs_free(textPtr);
    }
  }

  /**
   * Turns token ids back into text: the pieces run.c would print (leading space dropped after
   * BOS, <0xNN> as raw bytes), decoded as one UTF-8 stream. BOS and EOS add no text.
   * @param {ArrayLike<number>} ids
   * @returns {Promise<string>}
   */
  async detokenize(ids) {
    this.#needModel();
    return this.#decodeIds(Array.from(ids));
  }

  /**
   * Generates text after `prompt`, one Token per step. See wasmlm.d.ts for the parameters,
   * the stop conditions, abort and lastResult.
   * @param {string} prompt
   * @param {import('./wasmlm.d.ts').GenerateParams} [params]
   * @param {{signal?: AbortSignal}} [options]
   * @returns {AsyncGenerator<import('./wasmlm.d.ts').Token, void, void>}
   */
  generate(prompt, params = {}, { signal } = {}) {
    return this.#generate(String(prompt), params ?? {}, signal);
  }

  /**
   * A fresh wlm_gen_params with `params` set (see GenerateParams in wasmlm.d.ts); returns its
   * pointer (the caller frees it). JS checks names and types only: ranges are C's to refuse,
   * at begin, with a message naming the field.
   */
  #genParams(params) {
    const x = this.#x;
    if (params === null || typeof params !== 'object') {
      throw jsError('WLM_ERR_INVALID_ARG', `generation parameters must be an object, got ${params}`);
    }
    for (const [key, v] of Object.entries(params)) {
      if (v !== undefined && !(key in PARAM_FIELDS) && !LIST_PARAMS.includes(key)) {
        const hint = key === 'nSamples' ? ' (nSamples is a generateBatch() parameter)' : '';
        throw jsError('WLM_ERR_INVALID_ARG', `unknown generation parameter '${key}'${hint} ` +
          `(known: ${[...Object.keys(PARAM_FIELDS), ...LIST_PARAMS].join(', ')})`);
      }
    }
    const p = x.wlmjs_gen_params_new() >>> 0;
    if (!p) throw jsError('WLM_ERR_NOMEM', 'cannot allocate the generation parameters');
    try {
      // Unset fields keep wlm_gen_params_default's values (the defaults live in C only),
      // except the seed: random unless given.
      const values = { seed: randomSeed() };
      for (const [k, v] of Object.entries(params)) {
        if (v !== undefined && !LIST_PARAMS.includes(k)) values[k] = v;
      }
      for (const [key, value] of Object.entries(values)) {
        let v = value;
        if (BOOL_PARAMS.has(key)) {
          v = v ? 1 : 0;
        } else if (key === 'samplerOrder') {
          v = SAMPLER_ORDERS[v];
          if (typeof value !== 'string' || v === undefined) {
            throw jsError('WLM_ERR_INVALID_ARG', `samplerOrder must be one of ` +
              `${Object.keys(SAMPLER_ORDERS).map((o) => `'${o}'`).join(', ')}, got ${JSON.stringify(value)}`);
          }
        } else if (typeof v !== 'number') {
          throw jsError('WLM_ERR_INVALID_ARG', `${key} must be a number, got ${typeof v}`);
        } else if (INT_PARAMS.has(key) && Number.isFinite(v) && !Number.isInteger(v)) {
          throw jsError('WLM_ERR_INVALID_ARG', `${key} must be an integer, got ${v}`);
        }
        if (key === 'seed' && !(Number.isSafeInteger(v) && v >= 0)) {
          throw jsError('WLM_ERR_INVALID_ARG', `seed must be an integer in 0..2^53-1, got ${v}`);
        }
        x.wlmjs_gen_params_set(p, PARAM_FIELDS[key], v);
      }

      const stops = params.stop == null ? [] : typeof params.stop === 'string' ? [params.stop] : [...params.stop];
      if (stops.length > MAX_STOP) {
        throw jsError('WLM_ERR_INVALID_ARG', `at most ${MAX_STOP} stop strings (got ${stops.length})`);
      }
      for (const s of stops) {
        const n = utf8(String(s)).length;
        if (n < 1 || n > 63 || String(s).includes('\0')) {
          throw jsError('WLM_ERR_INVALID_ARG', `stop string ${JSON.stringify(s)} is ${n} bytes of ` +
            'UTF-8; each must be 1 to 63 bytes, without NUL');
        }
        const sp = this.#cstring(String(s));
        const rc = x.wlmjs_gen_params_add_stop(p, sp);
        x.wlmjs_free(sp);
        if (rc !== 0) throw this.#error(rc, `stop string ${JSON.stringify(s)} rejected`);
      }

      const bias = logitBiasEntries(params.logitBias);
      const banned = params.bannedTokens == null ? [] : params.bannedTokens;
      if (typeof banned[Symbol.iterator] !== 'function' || typeof banned === 'string') {
        throw jsError('WLM_ERR_INVALID_ARG', 'bannedTokens must be an array of token ids');
      }
      const bannedIds = Array.from(banned, (id) => tokenIdArg(id, 'bannedTokens'));
      if (bias.length > MAX_LOGIT_BIAS || bannedIds.length > MAX_LOGIT_BIAS) {
        throw jsError('WLM_ERR_INVALID_ARG', `at most ${MAX_LOGIT_BIAS} logitBias entries and ` +
          `${MAX_LOGIT_BIAS} bannedTokens (got ${bias.length} and ${bannedIds.length})`);
      }
      for (const [id, b] of bias) x.wlmjs_gen_params_add_bias(p, id, b);
      for (const id of bannedIds) x.wlmjs_gen_params_add_ban(p, id);
      return p;
    } catch (e) {
      x.wlmjs_free(p);
      throw e;
    }
  }

  async *#generate(prompt, params, signal) {
    this.#needModel();
    this.#needIdle('generate');
    if (signal?.aborted) throw abortError('The generation');
    const x = this.#x;
    const ctx = this.#ctx;
    const gen = {};
    this.#busy = 'generate';
    this.#gen = gen;
    let paramsPtr = 0;
    let promptPtr = 0;
    let tok = 0;
    let begun = false;
    let finished = false;
    const result = {
      stopReason: 'aborted', text: '', nPrompt: 0, nGenerated: 0, logprob: 0, prefillMs: 0,
      decodeMs: 0, prefillTokensPerSec: 0, decodeTokensPerSec: 0, wasmMemoryBytes: 0,
    };
    const publish = () => {
      result.prefillTokensPerSec = result.prefillMs > 0 ? result.nPrompt / (result.prefillMs / 1e3) : 0;
      result.decodeTokensPerSec = result.decodeMs > 0 ? result.nGenerated / (result.decodeMs / 1e3) : 0;
      result.wasmMemoryBytes = x.memory.buffer.byteLength;
      this.lastResult = { ...result };
    };
    try {
      if (prompt.includes('\0')) {
        throw jsError('WLM_ERR_INVALID_ARG', 'the prompt contains a NUL character');
      }
      paramsPtr = this.#genParams(params);
      promptPtr = this.#cstring(prompt);
      tok = x.wlmjs_token_new() >>> 0;
      if (!tok) throw jsError('WLM_ERR_NOMEM', 'cannot allocate a token slot');

      const t0 = performance.now();
      let rc = x.wlm_generate_begin_text(ctx, promptPtr, paramsPtr);
      result.prefillMs = performance.now() - t0;
      if (rc < 0) throw this.#ctxError(rc);
      begun = true;
      result.nPrompt = x.wlm_context_n_past(ctx);
      const decoder = new TextDecoder();
      // The token before each step's token, for the alternatives' text: the prompt's last
      // token matters only when it is BOS (an empty prompt with addBos).
      let prev = prompt === '' && params.addBos !== false ? this.#bos : -1;

      for (;;) {
        await macrotask(); // let timers, messages and abort signals run between tokens
        if (this.#gen !== gen) throw jsError('WLM_ERR_STATE', 'the engine was freed during generation');
        if (signal?.aborted) throw abortError('The generation');

        const t1 = performance.now();
        rc = x.wlm_generate_next(ctx, tok);
        result.decodeMs += performance.now() - t1;
        if (rc < 0) throw this.#ctxError(rc);

        const { token, stopReason } = this.#readToken(tok, decoder, prev);
        if (rc === STATUS.WLM_DONE) {
          result.stopReason = stopReason;
          finished = true;
          if (token.text) {
            // Text released at the end (held back for a stop string that did not complete):
            // not a token, but consumers building the text need it.
            result.text += token.text;
            yield token;
          }
          break;
        }
        this.#previewPrev = prev;
        prev = token.id;
        result.text += token.text;
        result.nGenerated++;
        result.logprob += token.logprob;
        yield token;
      }
    } finally {
      if (this.#gen === gen) {
        // Ended early (abort, break, error): end the C generation so the context is idle
        // (after wlm_generate_abort, wlm_generate_next returns WLM_DONE without evaluating).
        if (begun && !finished) {
          x.wlm_generate_abort(ctx);
          x.wlm_generate_next(ctx, tok);
        }
        this.#gen = null;
        this.#busy = null;
      }
      if (begun) publish();
      if (tok) x.wlmjs_free(tok);
      if (promptPtr) x.wlmjs_free(promptPtr);
      if (paramsPtr) x.wlmjs_free(paramsPtr);
    }
  }

  /**
   * Runs generate() to the end and returns its LastResult (text included).
   * @param {string} prompt
   * @param {import('./wasmlm.d.ts').GenerateParams} [params]
   * @param {{signal?: AbortSignal, onToken?: (t: import('./wasmlm.d.ts').Token) => void}} [options]
   * @returns {Promise<import('./wasmlm.d.ts').LastResult>}
   */
  async complete(prompt, params = {}, { signal, onToken } = {}) {
    return complete(this, prompt, params, signal, onToken);
  }

  /**
   * Generates after several prompts (or several samples of one prompt) together: one forward
   * pass per step for every sequence still running (wlm_generate_batch_next). Yields BatchTokens
   * (a Token with `seq` and `stopReason`), in sequence order within a step; each sequence ends
   * with one item whose stopReason is set (id -1, carrying any text released at the end).
   * When the iterator ends, engine.lastBatchResult is set. See wasmlm.d.ts.
   * @param {string|string[]} prompts
   * @param {import('./wasmlm.d.ts').BatchParams|import('./wasmlm.d.ts').BatchParams[]} [params]
   * @param {{signal?: AbortSignal}} [options]
   * @returns {AsyncGenerator<import('./wasmlm.d.ts').BatchToken, void, void>}
   */
  generateBatch(prompts, params = {}, { signal } = {}) {
    return this.#generateBatch(prompts, params ?? {}, signal);
  }

  /**
   * The sequences of a batch: for each prompt, nSamples copies (seed, seed + 1, …).
   * Returns [{prompt, promptIndex, sample, params}] with params ready for #genParams.
   */
  #batchSequences(prompts, params) {
    const list = typeof prompts === 'string' ? [prompts] : Array.from(prompts ?? [], String);
    if (list.length === 0) throw jsError('WLM_ERR_INVALID_ARG', 'generateBatch(): no prompts');
    if (Array.isArray(params) && params.length !== list.length) {
      throw jsError('WLM_ERR_INVALID_ARG', `generateBatch(): ${list.length} prompts but ` +
        `${params.length} parameter objects (give one object, or one per prompt)`);
    }
    const seqs = [];
    list.forEach((prompt, promptIndex) => {
      const p = Array.isArray(params) ? params[promptIndex] ?? {} : params;
      if (p === null || typeof p !== 'object') {
        throw jsError('WLM_ERR_INVALID_ARG', `generation parameters must be an object, got ${p}`);
      }
      const { nSamples = 1, ...rest } = p;
      if (!Number.isInteger(nSamples) || nSamples < 1) {
        throw jsError('WLM_ERR_INVALID_ARG', `nSamples must be an integer >= 1, got ${nSamples}`);
      }
      const seed = rest.seed ?? randomSeed();
      if (nSamples > 1 && !(Number.isSafeInteger(seed) && seed >= 0 && seed + nSamples - 1 < 2 ** 53)) {
        throw jsError('WLM_ERR_INVALID_ARG', `seed must be an integer in 0..2^53-nSamples, got ${seed}`);
      }
      for (let sample = 0; sample < nSamples; sample++) {
        seqs.push({ prompt, promptIndex, sample, params: { ...rest, seed: nSamples > 1 ? seed + sample : seed } });
      }
    });
    if (seqs.length > MAX_SEQ) {
      throw jsError('WLM_ERR_INVALID_ARG', `a batch holds at most ${MAX_SEQ} sequences ` +
        `(WLM_MAX_SEQ); this one has ${seqs.length}`);
    }
    return seqs;
  }

  async *#generateBatch(prompts, params, signal) {
    this.#needModel();
    this.#needIdle('generate');
    if (signal?.aborted) throw abortError('The generation');
    const x = this.#x;
    const seqs = this.#batchSequences(prompts, params);
    const n = seqs.length;
    const gen = {};
    this.#busy = 'batch generation';
    this.#gen = gen;
    const ptrs = []; // every malloc'd block, freed at the end
    const alloc = (bytes) => {
      const p = x.wlmjs_malloc(bytes) >>> 0;
      if (!p) throw jsError('WLM_ERR_NOMEM', `cannot allocate ${bytes} bytes of wasm memory`);
      ptrs.push(p);
      return p;
    };
    let toks = 0;
    let begun = false;
    let finished = false;
    const result = {
      sequences: seqs.map(({ promptIndex, sample, params: p }, seq) => ({
        seq, promptIndex, sample, seed: p.seed, stopReason: 'aborted', text: '', nPrompt: 0,
        nGenerated: 0, logprob: 0,
      })),
      nPrompt: 0, nGenerated: 0, steps: 0, prefillMs: 0, decodeMs: 0, prefillTokensPerSec: 0,
      decodeTokensPerSec: 0, wasmMemoryBytes: 0,
    };
    const publish = () => {
      result.prefillTokensPerSec = result.prefillMs > 0 ? result.nPrompt / (result.prefillMs / 1e3) : 0;
      result.decodeTokensPerSec = result.decodeMs > 0 ? result.nGenerated / (result.decodeMs / 1e3) : 0;
      result.wasmMemoryBytes = x.memory.buffer.byteLength;
      this.lastBatchResult = { ...result, sequences: result.sequences.map((s) => ({ ...s })) };
    };
    try {
      // Tokenize in JS (the batch API takes ids): sequence i's prompt ids, concatenated.
      const ids = [];
      for (const s of seqs) {
        if (s.prompt.includes('\0')) {
          throw jsError('WLM_ERR_INVALID_ARG', `prompt ${s.promptIndex} contains a NUL character`);
        }
        ids.push(await this.tokenize(s.prompt, { bos: s.params.addBos ?? true }));
      }
      if (this.#gen !== gen) throw jsError('WLM_ERR_STATE', 'the engine was freed during generation');
      const paramPtrs = seqs.map((s) => { const p = this.#genParams(s.params); ptrs.push(p); return p; });
      this.#ensureSeqMax(n);
      const ctx = this.#ctx;
      const total = ids.reduce((a, t) => a + t.length, 0);
      const tokensPtr = alloc(Math.max(1, total) * 4);
      const countsPtr = alloc(n * 4);
      const paramsPtr = alloc(n * 4);
      {
        const mem = new Int32Array(x.memory.buffer);
        let off = tokensPtr >> 2;
        ids.forEach((t, i) => {
          mem.set(t, off);
          off += t.length;
          mem[(countsPtr >> 2) + i] = t.length;
          mem[(paramsPtr >> 2) + i] = paramPtrs[i];
        });
      }
      toks = x.wlmjs_tokens_new(n) >>> 0;
      if (!toks) throw jsError('WLM_ERR_NOMEM', 'cannot allocate the token slots');

      const t0 = performance.now();
      let rc = x.wlmjs_generate_batch_begin(ctx, n, tokensPtr, countsPtr, paramsPtr);
      result.prefillMs = performance.now() - t0;
      if (rc < 0) throw this.#ctxError(rc);
      begun = true;
      // Prompt tokens evaluated: a prompt equal to an earlier one is forked, not evaluated.
      const seen = new Set();
      ids.forEach((t, i) => {
        result.sequences[i].nPrompt = t.length;
        const key = t.join(',');
        if (!seen.has(key)) result.nPrompt += t.length;
        seen.add(key);
      });

      const decoders = seqs.map(() => new TextDecoder());
      const prev = ids.map((t) => t[t.length - 1]);
      const ended = new Array(n).fill(false);
      for (;;) {
        await macrotask();
        if (this.#gen !== gen) throw jsError('WLM_ERR_STATE', 'the engine was freed during generation');
        if (signal?.aborted) throw abortError('The generation');

        const t1 = performance.now();
        rc = x.wlm_generate_batch_next(ctx, toks);
        result.decodeMs += performance.now() - t1;
        if (rc < 0) throw this.#ctxError(rc);
        result.steps++;

        // Read the whole step before yielding: the consumer may call into the module.
        const items = [];
        for (let i = 0; i < n; i++) {
          if (ended[i]) continue;
          const { token, stopReason } = this.#readToken(x.wlmjs_token_at(toks, i) >>> 0,
            decoders[i], prev[i]);
          const s = result.sequences[i];
          s.text += token.text;
          if (stopReason) {
            ended[i] = true;
            s.stopReason = stopReason;
          } else {
            if (i === 0) this.#previewPrev = prev[i];
            prev[i] = token.id;
            s.nGenerated++;
            s.logprob += token.logprob;
            result.nGenerated++;
          }
          items.push({ ...token, seq: i, stopReason });
        }
        if (rc === STATUS.WLM_DONE) finished = true;
        for (const item of items) yield item;
        if (finished) break;
      }
    } finally {
      if (this.#gen === gen) {
        if (begun && !finished) { // ended early: end the C batch so the context is idle
          x.wlm_generate_abort(this.#ctx);
          x.wlm_generate_batch_next(this.#ctx, toks);
        }
        this.#gen = null;
        this.#busy = null;
      }
      if (begun) publish();
      if (toks) x.wlmjs_free(toks);
      for (const p of ptrs) x.wlmjs_free(p);
    }
  }

  /**
   * Runs generateBatch() to the end and returns its BatchResult.
   * @param {string|string[]} prompts
   * @param {import('./wasmlm.d.ts').BatchParams|import('./wasmlm.d.ts').BatchParams[]} [params]
   * @param {{signal?: AbortSignal, onToken?: (t: import('./wasmlm.d.ts').BatchToken) => void}} [options]
   * @returns {Promise<import('./wasmlm.d.ts').BatchResult>}
   */
  async completeBatch(prompts, params = {}, { signal, onToken } = {}) {
    return completeBatch(this, prompts, params, signal, onToken);
  }

  /**
   * Beam search after `prompt` (wlm_beam_begin / wlm_beam_step), one step per macrotask so an
   * AbortSignal lands between steps. Resolves with the beams, best score first, and the KV
   * cache memory the search used. See BeamParams and BeamResult in wasmlm.d.ts.
   * @param {string} prompt
   * @param {import('./wasmlm.d.ts').BeamParams} [params]
   * @param {{signal?: AbortSignal, onStep?: (s: import('./wasmlm.d.ts').BeamStep) => void}} [options]
   * @returns {Promise<import('./wasmlm.d.ts').BeamResult>}
   */
  async beamSearch(prompt, params = {}, { signal, onStep } = {}) {
    this.#needModel();
    this.#needIdle('start a beam search');
    if (signal?.aborted) throw abortError('The beam search');
    params ??= {};
    if (typeof params !== 'object') {
      throw jsError('WLM_ERR_INVALID_ARG', `beam search parameters must be an object, got ${params}`);
    }
    const known = ['width', 'maxTokens', 'lengthPenalty', 'addBos'];
    for (const key of Object.keys(params)) {
      if (!known.includes(key)) {
        throw jsError('WLM_ERR_INVALID_ARG', `unknown beam search parameter '${key}' (known: ${known.join(', ')})`);
      }
    }
    const { width = 4, maxTokens = 64, lengthPenalty = 1, addBos = true } = params;
    for (const [key, v] of [['width', width], ['maxTokens', maxTokens]]) {
      if (!Number.isInteger(v)) throw jsError('WLM_ERR_INVALID_ARG', `${key} must be an integer, got ${v}`);
    }
    if (typeof lengthPenalty !== 'number') {
      throw jsError('WLM_ERR_INVALID_ARG', `lengthPenalty must be a number, got ${typeof lengthPenalty}`);
    }
    prompt = String(prompt);
    if (prompt.includes('\0')) throw jsError('WLM_ERR_INVALID_ARG', 'the prompt contains a NUL character');
    const x = this.#x;
    const gen = {};
    this.#busy = 'beam search';
    this.#previewPrev = undefined; // the beams replace sequence 0's logits
    this.#gen = gen;
    let promptPtr = 0;
    let begun = false;
    let finished = false;
    const i32 = (v) => Math.max(-(2 ** 31), Math.min(v, 2 ** 31 - 1));
    const t0 = performance.now();
    let steps = 0;
    let ids;
    const collectResult = () => {
      const ctx = this.#ctx;
      const beams = [];
      const count = x.wlm_beam_count(ctx);
      for (let i = 0; i < count; i++) {
        const f = (k) => x.wlmjs_beam_field(ctx, i, k);
        const nTok = f(0);
        const ptr = f(4) >>> 0;
        const tokens = nTok > 0 ? new Int32Array(x.memory.buffer, ptr, nTok).slice() : new Int32Array(0);
        beams.push({
          text: this.#decodeIds(tokens, ids[ids.length - 1]), tokens, logprob: f(1), score: f(2),
          stopReason: STOP_REASONS[f(3)] ?? 'none',
        });
      }
      const kvBytes = x.wlmjs_beam_memory(ctx, 0);
      return {
        beams, kvBytes, kvBytesUnshared: x.wlmjs_beam_memory(ctx, 1), kvBytesPerBeam: kvBytes / width,
        width, nPrompt: ids.length, steps, ms: performance.now() - t0, aborted: false,
      };
    };
    try {
      ids = await this.tokenize(prompt, { bos: !!addBos });
      if (this.#gen !== gen) throw jsError('WLM_ERR_STATE', 'the engine was freed during the beam search');
      this.#ensureSeqMax(2 * width);
      promptPtr = this.#heapInt32(ids);
      let rc = x.wlmjs_beam_begin(this.#ctx, promptPtr, ids.length, i32(width), i32(maxTokens), lengthPenalty);
      if (rc < 0) throw this.#ctxError(rc);
      begun = true;
      for (;;) {
        await macrotask();
        if (this.#gen !== gen) throw jsError('WLM_ERR_STATE', 'the engine was freed during the beam search');
        if (signal?.aborted) throw abortError('The beam search');
        rc = x.wlm_beam_step(this.#ctx);
        if (rc < 0) throw this.#ctxError(rc);
        steps++;
        if (rc === STATUS.WLM_DONE) break;
        if (onStep) {
          const stat = (k) => x.wlmjs_kv_stat(this.#ctx, k);
          onStep({ step: steps, kvBytes: stat(2) * stat(0), kvBytesUnshared: stat(4) * stat(0) });
        }
      }
      finished = true;
      const result = collectResult();
      this.lastBeamResult = result;
      return result;
    } finally {
      if (this.#gen === gen) {
        if (begun && !finished) {
          // Aborted (or failed): end the search; the live beams become results marked
          // 'aborted', kept in lastBeamResult.
          x.wlm_generate_abort(this.#ctx);
          if (x.wlm_beam_step(this.#ctx) === STATUS.WLM_DONE) {
            this.lastBeamResult = { ...collectResult(), aborted: true };
          }
        }
        this.#gen = null;
        this.#busy = null;
      }
      if (promptPtr) x.wlmjs_free(promptPtr);
    }
  }

  /**
   * The distribution a sampler chain leaves on the logits the last generated token (of
   * sequence 0) was drawn from, without disturbing the generation (wlm_sampler_preview):
   * `params` as generate()'s (nProbs default 10). May be called between the tokens of a
   * generation or a batch, and after one ends. See PreviewResult in wasmlm.d.ts.
   * @param {import('./wasmlm.d.ts').GenerateParams} [params]
   * @returns {Promise<import('./wasmlm.d.ts').PreviewResult>}
   */
  async previewDistribution(params = {}) {
    this.#needModel();
    if (this.#busy === 'load' || this.#busy === 'beam search') {
      throw jsError('WLM_ERR_STATE', `cannot preview the sampler while a ${this.#busy} is in progress`);
    }
    if (this.#previewPrev === undefined) {
      throw jsError('WLM_ERR_STATE', 'previewDistribution(): no token generated yet ' +
        '(it shows the distribution the last generated token was drawn from)');
    }
    params ??= {};
    if (typeof params !== 'object') {
      throw jsError('WLM_ERR_INVALID_ARG', `generation parameters must be an object, got ${params}`);
    }
    const x = this.#x;
    let paramsPtr = 0;
    let tok = 0;
    try {
      paramsPtr = this.#genParams({ ...params, nProbs: params.nProbs ?? 10 });
      tok = x.wlmjs_token_new() >>> 0;
      if (!tok) throw jsError('WLM_ERR_NOMEM', 'cannot allocate a token slot');
      const rc = x.wlm_sampler_preview(this.#ctx, 0, paramsPtr, tok);
      if (rc < 0) throw this.#ctxError(rc);
      const { token } = this.#readToken(tok, new TextDecoder(), this.#previewPrev);
      return { id: token.id, prob: token.prob, logprob: token.logprob,
        probSampled: token.probSampled, top: token.top ?? [] };
    } finally {
      if (tok) x.wlmjs_free(tok);
      if (paramsPtr) x.wlmjs_free(paramsPtr);
    }
  }

  /**
   * The KV cache's occupancy now (wlm_kv_stats) and the context's memory. May be called at
   * any time, also while a generation runs.
   * @returns {Promise<import('./wasmlm.d.ts').KvStats>}
   */
  async kvStats() {
    this.#needModel();
    const x = this.#x;
    const f = (k) => x.wlmjs_kv_stat(this.#ctx, k);
    return {
      blockBytes: f(0), blocksAllocated: f(1), blocksUsed: f(2), blocksShared: f(3), blockRefs: f(4),
      nSeqMax: this.#ctxParams.nSeqMax, nCtx: this.#info.nCtx,
      contextBytes: x.wlm_context_memory(this.#ctx) >>> 0, wasmMemoryBytes: x.memory.buffer.byteLength,
    };
  }

  /**
   * Low level: appends `ids` to the context's sequence (wlm_eval) and returns a copy of the
   * logits (vocabSize float32) of the last one. Continues after whatever the context holds
   * (e.g. a finished generation); call reset() first to start at position 0. For tests and
   * tools that need the forward pass itself; generate() does not use it.
   * @param {ArrayLike<number>} ids
   * @returns {Promise<Float32Array>}
   */
  async evalTokens(ids) {
    this.#needModel();
    this.#needIdle('evaluate tokens');
    const x = this.#x;
    const arr = Int32Array.from(ids);
    if (arr.length < 1) throw jsError('WLM_ERR_INVALID_ARG', 'evalTokens(): no token ids');
    const p = x.wlmjs_malloc(arr.byteLength) >>> 0;
    if (!p) throw jsError('WLM_ERR_NOMEM', 'cannot allocate the token ids');
    try {
      new Int32Array(x.memory.buffer, p, arr.length).set(arr);
      this.#previewPrev = undefined; // new logits: not the ones a token was drawn from
      const rc = x.wlm_eval(this.#ctx, p, arr.length);
      if (rc !== 0) throw this.#ctxError(rc);
      const logits = x.wlm_logits(this.#ctx) >>> 0;
      if (!logits) throw jsError('WLM_ERR_STATE', 'wlm_logits returned NULL after wlm_eval');
      return new Float32Array(x.memory.buffer, logits, this.#info.vocabSize).slice();
    } finally {
      x.wlmjs_free(p);
    }
  }

  /**
   * Low level: forgets the sequence (the next evalTokens() starts at position 0).
   * @returns {Promise<void>}
   */
  async reset() {
    this.#needModel();
    this.#needIdle('reset');
    this.#x.wlm_context_reset(this.#ctx);
    this.#previewPrev = undefined;
  }

  /**
   * Frees the model, the context and the wasm instance. The engine cannot be used afterwards
   * (calls reject with WLM_ERR_STATE); a generation in progress fails on its next step.
   * Calling free() again does nothing.
   * @returns {Promise<void>}
   */
  async free() {
    if (!this.#x) return;
    this.#unload();
    if (this.#threads) stopThreads(this.#x, this.#threads); // after the context that used it
    this.#threads = null;
    this.#gen = null;
    this.#busy = null;
    this.#x = null;
  }
}

async function complete(engine, prompt, params, signal, onToken) {
  for await (const token of engine.generate(prompt, params, { signal })) onToken?.(token);
  return { ...engine.lastResult };
}

async function completeBatch(engine, prompts, params, signal, onToken) {
  for await (const token of engine.generateBatch(prompts, params, { signal })) onToken?.(token);
  return engine.lastBatchResult;
}

/**
 * Creates an engine that runs in this thread.
 * @param {import('./wasmlm.d.ts').EngineOptions} [options]
 * @returns {Promise<import('./wasmlm.d.ts').Engine>}
 */
export async function createEngine(options = {}) {
  let { wasm, simd, threads = 'auto' } = options;
  if (simd === undefined) simd = wasm !== undefined || WebAssembly.validate(SIMD_PROBE);
  if (threads !== 'auto' && !(Number.isInteger(threads) && threads >= 1 && threads <= MAX_THREADS)) {
    throw jsError('WLM_ERR_INVALID_ARG', `threads must be 'auto' or an integer 1..${MAX_THREADS}, got ${threads}`);
  }
  // 'auto': every core up to 4 where threads can run (Node; cross-origin isolated pages) with
  // the SIMD build; decode is bound by memory bandwidth, which a few cores already saturate.
  const why = !simd ? 'the scalar build has no threads' : threadsUnavailable();
  if (threads === 'auto') threads = why ? 1 : Math.max(1, Math.min(4, await coreCount()));
  else if (threads > 1 && why) throw jsError('WLM_ERR_UNSUPPORTED', `threads: ${threads}: ${why}`);
  if (wasm === undefined) {
    const file = !simd ? 'wasmlm-scalar.wasm' : threads > 1 ? 'wasmlm-mt.wasm' : 'wasmlm.wasm';
    wasm = new URL(`../dist/${file}`, import.meta.url);
  }
  const { module, name } = await compileWasm(wasm);
  let memory = null;
  if (importsMemory(module)) {
    memory = sharedMemory();
  } else if (threads > 1) {
    if (options.threads !== undefined && options.threads !== 'auto') {
      throw jsError('WLM_ERR_UNSUPPORTED', `threads: ${threads}: ${name} is not the threaded build (dist/wasmlm-mt.wasm)`);
    }
    threads = 1;
  }
  const x = await instantiateWasm(module, name, memory);
  const pool = threads > 1 ? await startThreads(x, module, threads, jsError) : null;
  return new Engine(x, !!simd, pool);
}

// ------------------------------------------------------------------------------------------
// Worker engine (client side of js/worker.js)

/** Makes a load source cloneable and absolute (the worker has another base URL). */
function toTransferableSource(source) {
  if (source instanceof URL) return source.href;
  if (typeof source === 'string') {
    const base = baseURI();
    return base && !IS_NODE ? new URL(source, base).href : source;
  }
  if (ArrayBuffer.isView(source) &&
      (source.byteOffset !== 0 || source.byteLength !== source.buffer.byteLength)) {
    return new Uint8Array(source.buffer, source.byteOffset, source.byteLength).slice();
  }
  return source; // ArrayBuffer, whole views and Blobs are cloned by postMessage
}

class WorkerEngine {
  #worker;
  #pending = new Map(); // id → {resolve, reject, onProgress, onToken}
  #nextId = 1;
  #failure = null;      // the Error that killed the worker, if any
  #freed = false;
  #info = null;
  #threads = 1;

  /** The result of the last generation, or null. */
  lastResult = null;

  /** The result of the last batch generation, or null. */
  lastBatchResult = null;

  /** The result of the last beam search, or null. */
  lastBeamResult = null;

  constructor(worker) {
    this.#worker = worker;
    worker.addEventListener('message', (e) => this.#onMessage(e.data));
    worker.addEventListener('error', (e) => {
      e.preventDefault?.();
      this.#fail(new Error(`wasmlm worker failed: ${e.message || e.error?.message || 'error event'}`));
    });
    worker.addEventListener('messageerror', () => {
      this.#fail(new Error('wasmlm worker: a message could not be deserialized'));
    });
  }

  /** The loaded model's info, or null. */
  get info() { return this.#info; }

  /** Threads that run the matrix products in the worker (1: the worker's thread only). */
  get threads() { return this.#threads; }

  /** Starts the engine in `worker` (the 'init' request); terminates the worker on failure. */
  static async create(worker, options) {
    const engine = new WorkerEngine(worker);
    let wasm = options.wasm;
    if (wasm !== undefined && !(wasm instanceof WebAssembly.Module)) wasm = toTransferableSource(wasm);
    try {
      const ready = await engine.#request(Req.INIT,
        { options: { wasm, simd: options.simd, threads: options.threads } }).promise;
      if (ready?.protocol !== PROTOCOL_VERSION) {
        throw new Error(`wasmlm: js/worker.js speaks protocol ${ready?.protocol}, ` +
          `js/wasmlm.js ${PROTOCOL_VERSION}; serve both from the same version`);
      }
      engine.#threads = ready.threads ?? 1;
    } catch (e) {
      worker.terminate();
      throw e;
    }
    return engine;
  }

  #fail(err) {
    this.#failure = err;
    for (const p of this.#pending.values()) p.reject(err);
    this.#pending.clear();
  }

  #onMessage(msg) {
    const p = this.#pending.get(msg?.id);
    if (!p) return;
    switch (msg.type) {
      case Reply.PROGRESS: p.onProgress?.(msg.progress); break;
      case Reply.TOKEN: p.onToken?.(msg.token); break;
      case Reply.STEP: p.onStep?.(msg.step); break;
      case Reply.RESULT: this.#pending.delete(msg.id); p.resolve(msg.value); break;
      case Reply.ERROR:
        this.#pending.delete(msg.id);
        // An aborted generation / batch / beam search still has a summary: keep it.
        if (msg.lastResult) this.lastResult = msg.lastResult;
        if (msg.lastBatchResult) this.lastBatchResult = msg.lastBatchResult;
        if (msg.lastBeamResult) this.lastBeamResult = msg.lastBeamResult;
        p.reject(deserializeError(msg.error));
        break;
      default: break;
    }
  }

  /** Posts a request; returns {id, promise} where promise settles with the terminal reply. */
  #request(type, payload = {}, handlers = {}, transfer = []) {
    if (this.#freed) throw jsError('WLM_ERR_STATE', 'the engine has been freed');
    if (this.#failure) throw this.#failure;
    const id = this.#nextId++;
    const promise = new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject, ...handlers });
    });
    this.#worker.postMessage({ id, type, ...payload }, transfer);
    return { id, promise };
  }

  #abort(target) {
    if (this.#freed || this.#failure) return;
    this.#request(Req.ABORT, { target }).promise.catch(() => {});
  }

  /** Same contract as the in-thread Engine.load (see wasmlm.d.ts). */
  async load({ model, tokenizer, nCtx = 0, kvCache = true, nSeqMax = 1, onProgress, signal } = {}) {
    if (signal?.aborted) throw abortError('Loading');
    this.#info = null;
    const { id, promise } = this.#request(Req.LOAD, {
      model: toTransferableSource(model), tokenizer: toTransferableSource(tokenizer), nCtx, kvCache,
      nSeqMax,
    }, { onProgress });
    const onAbort = () => this.#abort(id);
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      this.#info = await promise;
      return this.#info;
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
  }

  /** Same contract as Engine.tokenize. */
  async tokenize(text, { bos = true } = {}) {
    return this.#request(Req.TOKENIZE, { text: String(text), options: { bos } }).promise;
  }

  /** Same contract as Engine.detokenize. */
  async detokenize(ids) {
    return this.#request(Req.DETOKENIZE, { ids: Int32Array.from(ids) }).promise;
  }

  /** Same contract as Engine.generate: tokens arrive one message each from the worker. */
  generate(prompt, params = {}, { signal } = {}) {
    return this.#stream(Req.GENERATE, { prompt: String(prompt), params: params ?? {} }, signal,
      (v) => { this.lastResult = v; });
  }

  /** Same contract as Engine.generateBatch: one message per BatchToken. */
  generateBatch(prompts, params = {}, { signal } = {}) {
    const list = typeof prompts === 'string' ? prompts : Array.from(prompts ?? [], String);
    return this.#stream(Req.GENERATE_BATCH, { prompts: list, params: params ?? {} }, signal,
      (v) => { this.lastBatchResult = v; });
  }

  /**
   * A request whose 'token' replies are yielded as they arrive; `onResult` receives the value
   * of its 'result' reply.
   */
  async *#stream(type, payload, signal, onResult) {
    if (signal?.aborted) throw abortError('The generation');
    const queue = [];
    let wake = null;
    let settled = false;
    let value;
    let error;
    const { id, promise } = this.#request(type, payload, {
      onToken: (t) => { queue.push(t); wake?.(); },
    });
    promise.then((v) => { value = v; }, (e) => { error = e; })
      .finally(() => { settled = true; wake?.(); });
    const onAbort = () => { this.#abort(id); wake?.(); };
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      for (;;) {
        if (signal?.aborted) throw abortError('The generation');
        if (queue.length) { yield queue.shift(); continue; }
        if (settled) break;
        await new Promise((r) => { wake = r; });
        wake = null;
      }
      if (error) throw error;
      onResult(value);
    } finally {
      signal?.removeEventListener('abort', onAbort);
      if (settled && value) onResult(value); // ended in the worker; consumer left early
      if (!settled) {
        // Abort or early break: stop the worker's generation and wait for it to end, so the
        // next request does not find the worker engine busy.
        this.#abort(id);
        await promise.catch(() => {});
      }
    }
  }

  /** Same contract as Engine.complete. */
  async complete(prompt, params = {}, { signal, onToken } = {}) {
    return complete(this, prompt, params, signal, onToken);
  }

  /** Same contract as Engine.completeBatch. */
  async completeBatch(prompts, params = {}, { signal, onToken } = {}) {
    return completeBatch(this, prompts, params, signal, onToken);
  }

  /** Same contract as Engine.beamSearch; onStep is called per 'step' message. */
  async beamSearch(prompt, params = {}, { signal, onStep } = {}) {
    if (signal?.aborted) throw abortError('The beam search');
    const { id, promise } = this.#request(Req.BEAM_SEARCH, { prompt: String(prompt), params: params ?? {} },
      { onStep });
    const onAbort = () => this.#abort(id);
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      this.lastBeamResult = await promise;
      return this.lastBeamResult;
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
  }

  /** Same contract as Engine.kvStats. */
  async kvStats() {
    return this.#request(Req.KV_STATS).promise;
  }

  /** Same contract as Engine.previewDistribution. */
  async previewDistribution(params = {}) {
    return this.#request(Req.PREVIEW, { params: params ?? {} }).promise;
  }

  /** Frees the model in the worker and terminates the worker. Further calls reject. */
  async free() {
    if (this.#freed) return;
    try {
      if (!this.#failure) await this.#request(Req.FREE).promise;
    } finally {
      this.#freed = true;
      this.#info = null;
      this.#worker.terminate();
      this.#fail(jsError('WLM_ERR_STATE', 'the engine has been freed'));
    }
  }
}

/**
 * Creates an engine running in a module Web Worker (js/worker.js), with the same interface as
 * createEngine(). Needs Web Workers (browsers), unless options.worker provides a Worker-like
 * object (postMessage, addEventListener('message'|'error'), terminate) running js/worker.js.
 * @param {import('./wasmlm.d.ts').WorkerEngineOptions} [options]
 * @returns {Promise<import('./wasmlm.d.ts').Engine>}
 */
export async function createWorkerEngine(options = {}) {
  let worker = options.worker;
  if (!worker) {
    if (typeof Worker !== 'function') {
      throw new Error('wasmlm: createWorkerEngine() needs Web Workers (a browser); ' +
        'in Node use createEngine()');
    }
    worker = new Worker(new URL('./worker.js', import.meta.url), { type: 'module' });
  }
  return WorkerEngine.create(worker, options);
}
