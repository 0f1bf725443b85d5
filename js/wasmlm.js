// wasmlm.js — the public ES module: createEngine() runs the engine in this thread on the
// standalone wasm module (dist/wasmlm.wasm), createWorkerEngine() runs the same engine in
// js/worker.js behind the same interface. Identical in Node 20 and browsers, no build step.
// It does not parse model files or sample tokens: the C side (src/wasmlm.h) does all that;
// this file moves bytes and strings across the boundary and turns statuses into errors.
//
// Memory rule: any call into wasm may grow memory, which detaches memory.buffer. Views of
// wasm memory are created right before use and never kept across such a call.

import { PROTOCOL_VERSION, Req, Reply } from './protocol.js';

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
  'wlm_context_n_past', 'wlm_eval', 'wlm_logits', 'wlm_generate_begin_text', 'wlm_generate_next',
  'wlm_generate_abort', 'wlmjs_malloc', 'wlmjs_free', 'wlmjs_model_load', 'wlmjs_model_info',
  'wlmjs_context_new', 'wlmjs_gen_params_new', 'wlmjs_gen_params_set', 'wlmjs_gen_params_add_stop',
  'wlmjs_token_new', 'wlmjs_token_id', 'wlmjs_token_piece', 'wlmjs_token_piece_len',
  'wlmjs_token_prob', 'wlmjs_token_prob_sampled', 'wlmjs_token_n_past', 'wlmjs_token_stop_reason',
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

/** Instantiates the standalone module: imports from its own import list, then _initialize. */
async function instantiateWasm(module, name) {
  let memory = null; // set after instantiation; the imports below only run later
  const provided = {
    env: {
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
    if (imp.kind === 'function' && fn) {
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
  const x = instance.exports;
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

/** Generation parameters: JS name → wlmjs_gen_params_set field number (stop, seed: special). */
const PARAM_FIELDS = {
  temperature: 0, topK: 1, topP: 2, repeatPenalty: 3, repeatLastN: 4, seed: 5, maxTokens: 6,
  addBos: 7,
};

function randomSeed() {
  // An integer in [1, 2^53): representable exactly as the double wlmjs_gen_params_set takes.
  return Math.floor(Math.random() * (2 ** 53 - 1)) + 1;
}

function utf8(text) {
  return new TextEncoder().encode(text);
}

class Engine {
  #x;            // wasm exports; null once freed
  #simd;
  #model = 0;    // wlm_model*
  #ctx = 0;      // wlm_context*
  #busy = null;  // 'load' | 'generate' while one runs
  #gen = null;   // the generation in progress (identity token)
  #info = null;
  #bos = -1;     // token ids from the model, for detokenize()
  #eos = -1;

  /** The result of the last generation, or null. See LastResult in wasmlm.d.ts. */
  lastResult = null;

  constructor(x, simd) {
    this.#x = x;
    this.#simd = simd;
  }

  /** The loaded model's info, or null. */
  get info() { return this.#info; }

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
    return new TextDecoder().decode(mem.subarray(ptr, end < 0 ? mem.length : end));
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
        (this.#busy === 'generate' ? ' (finish, abort or break out of it first)' : ''));
    }
  }

  #unload() {
    const x = this.#x;
    if (this.#ctx) x.wlm_context_free(this.#ctx);
    if (this.#model) x.wlm_model_free(this.#model);
    this.#ctx = 0;
    this.#model = 0;
    this.#info = null;
  }

  // ---- public API ----

  /**
   * Loads a model and its tokenizer, replacing (first freeing) any model loaded before.
   * Model bytes are streamed straight into a wasm heap buffer the model then owns.
   * On error nothing stays allocated and the engine can load again.
   * @param {import('./wasmlm.d.ts').LoadOptions} options
   * @returns {Promise<import('./wasmlm.d.ts').ModelInfo>}
   */
  async load({ model, tokenizer, nCtx = 0, kvCache = true, onProgress, signal } = {}) {
    const x = this.#exports();
    this.#needIdle('load a model');
    if (model == null) throw jsError('WLM_ERR_INVALID_ARG', 'load(): `model` is required');
    if (!Number.isInteger(nCtx) || nCtx < 0) {
      throw jsError('WLM_ERR_INVALID_ARG', `load(): nCtx must be an integer >= 0, got ${nCtx}`);
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

      new DataView(x.memory.buffer).setInt32(slot, 0, true);
      rc = x.wlmjs_context_new(model_, nCtx, kvCache ? 1 : 0, this.#simd ? 1 : 0, slot);
      const ctx = this.#i32(slot) >>> 0;
      if (rc !== 0) {
        const err = this.#error(rc, this.#readCString(x.wlm_context_errmsg(ctx)));
        x.wlm_context_free(ctx);
        throw err;
      }
      this.#model = model_;
      this.#ctx = ctx;
      model_ = 0; // owned by the engine now
      const f = (i) => x.wlmjs_model_info(this.#model, i);
      this.#info = Object.freeze({
        dim: f(0), hiddenDim: f(1), nLayers: f(2), nHeads: f(3), nKvHeads: f(4), vocabSize: f(5),
        seqLen: f(6), sharedClassifier: f(7) === 1, weightBytes: f(11), nCtx: nCtx || f(6),
        simd: this.#simd, contextBytes: x.wlm_context_memory(ctx) >>> 0,
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
    const x = this.#x;
    const lenSlot = x.wlmjs_malloc(4) >>> 0;
    if (!lenSlot) throw jsError('WLM_ERR_NOMEM', 'cannot allocate 4 bytes');
    try {
      const decoder = new TextDecoder();
      let out = '';
      let prev = -1;
      for (const id of Array.from(ids)) {
        if (!Number.isInteger(id)) throw jsError('WLM_ERR_INVALID_ARG', `token id ${id} is not an integer`);
        const p = x.wlm_token_piece(this.#model, prev, id, lenSlot) >>> 0;
        if (!p) {
          throw jsError('WLM_ERR_INVALID_ARG',
            `token id ${id} is outside the vocabulary (0..${this.#info.vocabSize - 1})`);
        }
        if (id !== this.#bos && id !== this.#eos) {
          const len = this.#i32(lenSlot) >>> 0;
          out += decoder.decode(new Uint8Array(x.memory.buffer, p, len), { stream: true });
        }
        prev = id;
      }
      return out + decoder.decode();
    } finally {
      x.wlmjs_free(lenSlot);
    }
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

  /** Sets the fields of a fresh wlm_gen_params; returns its pointer (the caller frees it). */
  #genParams(params) {
    const x = this.#x;
    for (const key of Object.keys(params)) {
      if (!(key in PARAM_FIELDS) && key !== 'stop') {
        throw jsError('WLM_ERR_INVALID_ARG', `unknown generation parameter '${key}' ` +
          `(known: ${Object.keys(PARAM_FIELDS).join(', ')}, stop)`);
      }
    }
    const p = x.wlmjs_gen_params_new() >>> 0;
    if (!p) throw jsError('WLM_ERR_NOMEM', 'cannot allocate the generation parameters');
    try {
      // Unset fields keep wlm_gen_params_default's values (the defaults live in C only),
      // except the seed: random unless given.
      const values = { seed: randomSeed() };
      for (const [k, v] of Object.entries(params)) if (v !== undefined && k !== 'stop') values[k] = v;
      for (const [key, value] of Object.entries(values)) {
        const field = PARAM_FIELDS[key];
        let v = value;
        if (key === 'addBos') v = v ? 1 : 0;
        else if (typeof v !== 'number') {
          throw jsError('WLM_ERR_INVALID_ARG', `${key} must be a number, got ${typeof v}`);
        }
        if (key === 'seed' && !(Number.isSafeInteger(v) && v >= 0)) {
          throw jsError('WLM_ERR_INVALID_ARG', `seed must be an integer in 0..2^53-1, got ${v}`);
        }
        x.wlmjs_gen_params_set(p, field, v);
      }
      const stops = params.stop == null ? [] : typeof params.stop === 'string' ? [params.stop] : [...params.stop];
      if (stops.length > 8) throw jsError('WLM_ERR_INVALID_ARG', `at most 8 stop strings (got ${stops.length})`);
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
      stopReason: 'aborted', text: '', nPrompt: 0, nGenerated: 0, prefillMs: 0, decodeMs: 0,
      prefillTokensPerSec: 0, decodeTokensPerSec: 0, wasmMemoryBytes: 0,
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

      for (;;) {
        await macrotask(); // let timers, messages and abort signals run between tokens
        if (this.#gen !== gen) throw jsError('WLM_ERR_STATE', 'the engine was freed during generation');
        if (signal?.aborted) throw abortError('The generation');

        const t1 = performance.now();
        rc = x.wlm_generate_next(ctx, tok);
        result.decodeMs += performance.now() - t1;
        if (rc < 0) throw this.#ctxError(rc);

        const piecePtr = x.wlmjs_token_piece(tok) >>> 0;
        const pieceLen = x.wlmjs_token_piece_len(tok) >>> 0;
        let text = pieceLen ? decoder.decode(new Uint8Array(x.memory.buffer, piecePtr, pieceLen),
          { stream: true }) : '';
        const nPast = x.wlmjs_token_n_past(tok);
        if (rc === STATUS.WLM_DONE) {
          text += decoder.decode(); // flush an incomplete UTF-8 tail
          result.stopReason = STOP_REASONS[x.wlmjs_token_stop_reason(tok)] ?? 'none';
          finished = true;
          if (text) {
            // Text released at the end (held back for a stop string that did not complete):
            // not a token, but consumers building the text need it.
            result.text += text;
            yield { id: -1, text, prob: 0, probSampled: 0, nPast };
          }
          break;
        }
        result.text += text;
        result.nGenerated++;
        yield {
          id: x.wlmjs_token_id(tok),
          text,
          prob: x.wlmjs_token_prob(tok),
          probSampled: x.wlmjs_token_prob_sampled(tok),
          nPast,
        };
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
    this.#gen = null;
    this.#busy = null;
    this.#x = null;
  }
}

async function complete(engine, prompt, params, signal, onToken) {
  for await (const token of engine.generate(prompt, params, { signal })) onToken?.(token);
  return { ...engine.lastResult };
}

/**
 * Creates an engine that runs in this thread.
 * @param {import('./wasmlm.d.ts').EngineOptions} [options]
 * @returns {Promise<import('./wasmlm.d.ts').Engine>}
 */
export async function createEngine(options = {}) {
  let { wasm, simd } = options;
  if (simd === undefined) simd = wasm !== undefined || WebAssembly.validate(SIMD_PROBE);
  if (wasm === undefined) {
    wasm = new URL(simd ? '../dist/wasmlm.wasm' : '../dist/wasmlm-scalar.wasm', import.meta.url);
  }
  const { module, name } = await compileWasm(wasm);
  const x = await instantiateWasm(module, name);
  return new Engine(x, !!simd);
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

  /** The result of the last generation, or null. */
  lastResult = null;

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

  /** Starts the engine in `worker` (the 'init' request); terminates the worker on failure. */
  static async create(worker, options) {
    const engine = new WorkerEngine(worker);
    let wasm = options.wasm;
    if (wasm !== undefined && !(wasm instanceof WebAssembly.Module)) wasm = toTransferableSource(wasm);
    try {
      const ready = await engine.#request(Req.INIT, { options: { wasm, simd: options.simd } }).promise;
      if (ready?.protocol !== PROTOCOL_VERSION) {
        throw new Error(`wasmlm: js/worker.js speaks protocol ${ready?.protocol}, ` +
          `js/wasmlm.js ${PROTOCOL_VERSION}; serve both from the same version`);
      }
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
      case Reply.RESULT: this.#pending.delete(msg.id); p.resolve(msg.value); break;
      case Reply.ERROR:
        this.#pending.delete(msg.id);
        if (msg.lastResult) this.lastResult = msg.lastResult;
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
  async load({ model, tokenizer, nCtx = 0, kvCache = true, onProgress, signal } = {}) {
    if (signal?.aborted) throw abortError('Loading');
    this.#info = null;
    const { id, promise } = this.#request(Req.LOAD, {
      model: toTransferableSource(model), tokenizer: toTransferableSource(tokenizer), nCtx, kvCache,
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
    return this.#generate(String(prompt), params ?? {}, signal);
  }

  async *#generate(prompt, params, signal) {
    if (signal?.aborted) throw abortError('The generation');
    const queue = [];
    let wake = null;
    let settled = false;
    let value;
    let error;
    const { id, promise } = this.#request(Req.GENERATE, { prompt, params }, {
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
      this.lastResult = value;
    } finally {
      signal?.removeEventListener('abort', onAbort);
      if (settled && value) this.lastResult = value; // ended in the worker; consumer left early
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
