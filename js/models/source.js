// source.js — reading a model or tokenizer source into the wasm heap: bytes, a Blob, a Node file
// path or a URL, copied chunk by chunk into one malloc'd buffer (grown by doubling when the size
// is not known ahead), with {stage, loaded, total} progress and an AbortSignal checked between
// chunks. The buffer is handed to the engine, which passes its ownership to C. A source can be
// opened first and its first bytes peeked (js/runtime/memory64.js reads the model's header from them to
// size it) without reading anything twice: a download's first chunks are kept and then copied in.
// It does not parse anything: the C side checks the format (js/engine/engine.js calls it).

import { WasmlmError, abortError, jsError } from '../runtime/errors.js';
import { fetchOk, locate } from '../runtime/platform.js';

// Bytes read per step from a file or a Blob: few enough steps (awaits, progress reports, and in a
// worker engine progress messages to the page) that a small model is one or two, while a
// multi-GB model still never needs a second copy of itself in JS memory.
const FILE_CHUNK = 16 << 20;
/** wasm32's whole address space (the modules are linked with MAXIMUM_MEMORY=4GB), and the
 *  memory64 modules' (16 GiB, V8's limit). */
const WASM32_BYTES = 2 ** 32;
const WASM64_BYTES = 2 ** 34;

/** A malloc'd buffer in wasm memory that grows (by copying) while bytes are appended. */
class HeapBuffer {
  /**
   * `lowBytes` (memory64 modules only): heap to keep below the buffer — a block of that size is
   * allocated first and freed once the buffer is, so that the allocations which follow (the
   * model's tables, the context) come from below it and every pointer JS sees stays below 4 GB
   * (js/runtime/memory64.js).
   */
  constructor(x, capacity, what, lowBytes = 0) {
    this.x = x; // wlmjs_malloc returns an unsigned Number in both builds (wasm32: >>> 0 below)
    this.what = what;
    this.cap = Math.max(1, capacity);
    this.ptr = 0;
    this.len = 0;
    this.limit = x.memory64 ? WASM64_BYTES : WASM32_BYTES;
    if (this.cap >= this.limit) this.#nomem(this.cap); // would wrap around as a size_t
    const low = x.memory64 && lowBytes > 0 ? x.wlmjs_malloc(lowBytes) : 0;
    if (x.memory64 && lowBytes > 0 && !low) this.#nomem(lowBytes);
    this.ptr = this.#malloc(this.cap);
    if (low) x.wlmjs_free(low);
    if (!this.ptr) this.#nomem(this.cap);
  }

  /** malloc as an unsigned Number; in a memory64 module also above 4 GB (the one block that may
   *  be there: js/runtime/memory64.js). */
  #malloc(n) {
    return this.x.memory64 ? this.x.mallocHigh(n) : this.x.wlmjs_malloc(n) >>> 0;
  }

  #nomem(n) {
    this.ptr = 0;
    const gb = (b) => `${(b / 1e9).toFixed(2)} GB`;
    // A file near the limit: say why (a file, its KV cache and scratch share wasm32's 4 GB).
    const why = this.x.memory64
      ? `: the ${this.what} (${gb(n)}) is too large for the memory64 module's 16 GiB, or for this machine's memory`
      : n >= WASM32_BYTES / 4 ? `: the ${this.what} (${gb(n)}) is too large for the 4 GB wasm32 memory, ` +
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
    if (cap >= this.limit) { this.dispose(); this.#nomem(cap); }
    const p = this.#malloc(cap); // may grow memory: no view is alive here
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
 * Opens a model or tokenizer source without reading it: {name, size, peek(n), chunks(), close()}.
 * `size` is the byte count, 0 when unknown (a download without Content-Length, or compressed).
 * `peek(n)` resolves to the first min(n, size) bytes (a download keeps what it read for
 * chunks()); `chunks()` yields the whole source from its first byte, in order, once; `close()`
 * releases a file handle or cancels a download (safe to call twice). Throws WasmlmError
 * WLM_ERR_IO (a file that cannot be opened, an HTTP error) and WLM_ERR_INVALID_ARG.
 */
export async function openSource(source, stage, signal) {
  if (source == null) throw jsError('WLM_ERR_INVALID_ARG', `load(): no ${stage} given`);
  if (source instanceof ArrayBuffer || ArrayBuffer.isView(source)) {
    const bytes = source instanceof ArrayBuffer ? new Uint8Array(source)
      : new Uint8Array(source.buffer, source.byteOffset, source.byteLength);
    return {
      name: 'bytes', size: bytes.byteLength, known: true,
      peek: async (n) => bytes.subarray(0, n),
      async *chunks() { yield bytes; },
      close: async () => {},
    };
  }
  if (typeof Blob !== 'undefined' && source instanceof Blob) {
    // Slices read whole, not Blob.stream(): its chunks are 64 KB (Node, Chromium), i.e. an await
    // and a progress report per 64 KB.
    const size = source.size;
    return {
      name: source.name ?? 'Blob', size, known: true,
      peek: async (n) => new Uint8Array(await source.slice(0, n).arrayBuffer()),
      async *chunks() {
        for (let at = 0; at < size;) {
          const chunk = new Uint8Array(await source.slice(at, at + FILE_CHUNK).arrayBuffer());
          if (!chunk.byteLength) break; // cannot happen for an immutable Blob; never loop forever
          at += chunk.byteLength;
          yield chunk;
        }
      },
      close: async () => {},
    };
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
    const { size } = await fh.stat();
    let closed = false;
    return {
      name: loc.name, size, known: true,
      async peek(n) {
        const buf = new Uint8Array(Math.min(n, size));
        const { bytesRead } = await fh.read(buf, 0, buf.byteLength, 0);
        return buf.subarray(0, bytesRead);
      },
      async *chunks() {
        // One byte more than the file's size: a file read whole ends with a short read, without a
        // last read that returns nothing (a file that grows meanwhile is read to its end).
        const chunk = new Uint8Array(Math.min(size + 1, FILE_CHUNK));
        for (let at = 0; ;) {
          // Read into a JS buffer, then copy: wasm memory may be detached during the await.
          const { bytesRead } = await fh.read(chunk, 0, chunk.byteLength, at);
          if (bytesRead === 0) break;
          at += bytesRead;
          yield chunk.subarray(0, bytesRead);
          if (bytesRead < chunk.byteLength && at >= size) break;
        }
      },
      async close() { if (!closed) { closed = true; await fh.close(); } },
    };
  }

  const res = await fetchOk(loc.url, signal);
  const encoding = res.headers.get('content-encoding');
  const length = res.headers.get('content-length');
  // With a content-encoding, Content-Length counts the compressed bytes: treat as unknown.
  const total = length !== null && (!encoding || encoding === 'identity') &&
    Number.isSafeInteger(Number(length)) ? Number(length) : 0;
  const reader = res.body ? res.body.getReader() : null; // no body (e.g. a 204): an empty file
  const head = []; // chunks read by peek(), not yet given to chunks()
  let headBytes = 0;
  let done = !reader;
  const next = async () => {
    const r = await reader.read();
    if (r.done) done = true;
    return r;
  };
  return {
    name: loc.name, size: total, known: total > 0 || !reader,
    async peek(n) {
      while (headBytes < n && !done) {
        const { value } = await next();
        if (value) { head.push(value); headBytes += value.byteLength; }
      }
      const out = new Uint8Array(Math.min(n, headBytes));
      let at = 0;
      for (const c of head) {
        if (at >= out.byteLength) break;
        const take = c.subarray(0, out.byteLength - at);
        out.set(take, at);
        at += take.byteLength;
      }
      return out;
    },
    async *chunks() {
      while (head.length) { headBytes -= head[0].byteLength; yield head.shift(); }
      while (!done) {
        const { value } = await next();
        if (value) yield value;
      }
    },
    async close() { if (!done) { done = true; await reader.cancel().catch(() => {}); } },
  };
}

/**
 * Copies a source (as load() takes it, or an openSource() result, which this closes) into a
 * malloc'd heap buffer, chunk by chunk, reporting progress. `lowBytes`: see HeapBuffer.
 * Returns {ptr, size}; the caller owns ptr. On any failure nothing stays allocated.
 */
export async function readIntoHeap(x, source, stage, onProgress, signal, lowBytes = 0) {
  const report = (loaded, total) => onProgress?.({ stage, loaded, total });
  const checkAbort = () => { if (signal?.aborted) throw abortError(`Loading the ${stage}`); };
  checkAbort();
  const src = source?.chunks && source?.peek ? source : await openSource(source, stage, signal);
  let buf = null;
  try {
    checkAbort();
    const total = src.size;
    // src.expected: a size without Content-Length, from the model's header (js/engine/engine.js)
    buf = new HeapBuffer(x, src.known ? total : total || src.expected || FILE_CHUNK, stage, lowBytes);
    report(0, total);
    for await (const chunk of src.chunks()) {
      checkAbort();
      buf.write(chunk);
      report(buf.len, total);
    }
    checkAbort();
    if (!total) report(buf.len, buf.len); // the size is known now
    return buf.release();
  } finally {
    buf?.dispose();
    await src.close();
  }
}
