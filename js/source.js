// source.js — reading a model or tokenizer source into the wasm heap: bytes, a Blob, a Node file
// path or a URL, copied chunk by chunk into one malloc'd buffer (grown by doubling when the size
// is not known ahead), with {stage, loaded, total} progress and an AbortSignal checked between
// chunks. The buffer is handed to the engine, which passes its ownership to C. It does not parse
// anything: the C side checks the format (js/engine.js calls it).

import { WasmlmError, abortError, jsError } from './errors.js';
import { fetchOk, locate } from './platform.js';

// Bytes read per step from a file or a Blob: few enough steps (awaits, progress reports, and in a
// worker engine progress messages to the page) that a small model is one or two, while a
// multi-GB model still never needs a second copy of itself in JS memory.
const FILE_CHUNK = 16 << 20;
/** wasm32's whole address space (the modules are linked with MAXIMUM_MEMORY=4GB). */
const WASM32_BYTES = 2 ** 32;

/** A malloc'd buffer in wasm memory that grows (by copying) while bytes are appended. */
class HeapBuffer {
  constructor(x, capacity, what) {
    this.x = x;
    this.what = what;
    this.cap = Math.max(1, capacity);
    this.ptr = 0;
    this.len = 0;
    if (this.cap >= WASM32_BYTES) this.#nomem(this.cap); // would wrap around as a size_t
    this.ptr = x.wlmjs_malloc(this.cap) >>> 0;
    if (!this.ptr) this.#nomem(this.cap);
  }

  #nomem(n) {
    this.ptr = 0;
    const gb = (b) => `${(b / 1e9).toFixed(2)} GB`;
    // A file near the limit: say why (a file, its KV cache and scratch share wasm32's 4 GB).
    const why = n >= WASM32_BYTES / 4 ? `: the ${this.what} (${gb(n)}) is too large for the 4 GB wasm32 memory, ` +
      'which must also hold the KV cache and scratch buffers (a smaller quantization may fit)' : '';
    throw jsError('WLM_ERR_NOMEM', `cannot allocate ${n} bytes of wasm memory for the ${this.what}${why}`);
  }

  write(chunk) {
    const n = chunk.byteLength;
    if (this.len + n > this.cap) this.#grow(Math.max(this.cap * 2, this.len + n));
    new Uint8Array(this.x.memory.buffer, this.ptr + this.len, n).set(chunk);
    this.len += n;
  }

  #grow(cap) {
    if (cap >= WASM32_BYTES) { this.dispose(); this.#nomem(cap); }
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

/**
 * Copies a source into a malloc'd heap buffer, chunk by chunk, reporting progress.
 * Returns {ptr, size}; the caller owns ptr. On any failure nothing stays allocated.
 */
export async function readIntoHeap(x, source, stage, onProgress, signal) {
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
    // Slices read whole, not Blob.stream(): its chunks are 64 KB (Node, Chromium), i.e. an await
    // and a progress report per 64 KB.
    const size = source.size;
    const buf = new HeapBuffer(x, size, stage);
    try {
      report(0, size);
      for (let at = 0; at < size;) {
        checkAbort();
        const chunk = new Uint8Array(await source.slice(at, at + FILE_CHUNK).arrayBuffer());
        if (!chunk.byteLength) break; // cannot happen for an immutable Blob; never loop forever
        buf.write(chunk);
        at += chunk.byteLength;
        report(buf.len, size);
      }
      checkAbort();
      return buf.release();
    } finally {
      buf.dispose();
    }
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
      // One byte more than the file's size: a file read whole ends with a short read, without a
      // last read that returns nothing (a file that grows meanwhile is read to its end).
      const chunk = new Uint8Array(Math.min(size + 1, FILE_CHUNK));
      report(0, size);
      for (;;) {
        checkAbort();
        // Read into a JS buffer, then copy: wasm memory may be detached during the await.
        const { bytesRead } = await fh.read(chunk, 0, chunk.byteLength, null);
        if (bytesRead === 0) break;
        buf.write(chunk.subarray(0, bytesRead));
        report(buf.len, size);
        if (bytesRead < chunk.byteLength && buf.len >= size) break;
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

