// cache.js — downloads model files with progress and a transfer rate, checks them against a
// sha256, and keeps them in the browser's Cache Storage so a page loads them again without a
// request. It hands back Blobs, which engine.load() takes as they are (a worker engine gets them
// by reference). It does not parse models: a file that is not a model is the engine's to refuse.
//
//   import { fetchModel } from 'wasmlm/cache';        // or './js/models/cache.js'
//   const m = await fetchModel(url, { sha256, onProgress: ({ loaded, total, bytesPerSec }) => {} });
//   await engine.load({ model: m.blob });              // m.fromCache: no request was made
//   await m.save();                                     // after the engine accepted the file
//
// Without Cache Storage (Node; a page served over plain http from a host other than localhost)
// every file is downloaded and nothing is kept: ModelCache.available is false and save() says so.
//
// The model store (js/models/storage/: OPFS, else Cache Storage; resumable, verified while it streams,
// shared between tabs) is the path for large files; this module re-exports it:
//
//   import { downloadModel, listModels, deleteModel } from 'wasmlm/cache';
//   const m = await downloadModel(url, { sha256, size, onProgress: ({ loaded, total, secondsLeft }) => {} });
//   await engine.load({ model: m.blob });              // stored, complete and verified

import { WasmlmError } from '../runtime/errors.js';
import { checkOptions } from '../options.js';
import { ModelStore } from './storage/store.js';

export { ModelStore } from './storage/store.js';

/** The Cache Storage bucket this module uses unless told otherwise. */
export const CACHE_NAME = 'wasmlm-models-v1';

// Metadata kept in the headers of each stored response (the response is built here, so they
// are readable; Content-Length is the size the cache list shows).
const H_SHA256 = 'X-Wasmlm-Sha256';
const H_NAME = 'X-Wasmlm-Name';
const H_STORED = 'X-Wasmlm-Stored-At';

/** The base URL relative strings resolve against (none in Node). */
function baseURI() {
  return globalThis.document?.baseURI ?? globalThis.location?.href;
}

/** Absolute form of a URL (the cache key); relative strings resolve against the page. */
export function absoluteUrl(url) {
  return new URL(String(url), baseURI()).href;
}

/** The last path segment of a URL, decoded: a readable name for a file. */
export function fileName(url) {
  try {
    const segments = new URL(String(url), baseURI() ?? 'http://x/').pathname.split('/');
    return decodeURIComponent(segments.filter(Boolean).pop() ?? '') || String(url);
  } catch {
    return String(url);
  }
}

/** Hex sha256 of bytes or a Blob, with crypto.subtle (browsers in secure contexts, Node 20). */
export async function sha256Hex(data) {
  if (!globalThis.crypto?.subtle) {
    throw new WasmlmError('cannot check the sha256: crypto.subtle is unavailable (it needs https or localhost)',
      'WLM_ERR_UNSUPPORTED');
  }
  const bytes = typeof Blob !== 'undefined' && data instanceof Blob ? await data.arrayBuffer() : data;
  const digest = await crypto.subtle.digest('SHA-256', bytes);
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, '0')).join('');
}

function abortError() {
  return new DOMException('The download was aborted.', 'AbortError');
}

/**
 * Downloads `url` into a Blob, reporting progress per chunk received.
 *
 * @param {string|URL} url
 * @param {object} [options]
 * @param {(p: {loaded: number, total: number, bytesPerSec: number}) => void} [options.onProgress]
 *   total is 0 while unknown (no Content-Length, or a compressed response); bytesPerSec is the
 *   mean rate since the response started.
 * @param {AbortSignal} [options.signal]
 * @param {string|null} [options.sha256]  expected hex digest: checked before the Blob is returned
 * @param {number|null} [options.size]    expected byte count: checked against Content-Length
 *   before the body is read (a different published file is refused without downloading it), then
 *   against the bytes received (before the sha256, so a cut-off transfer says so)
 * @param {RequestCache} [options.httpCache]  fetch()'s `cache` mode (fetchModel passes 'no-store'
 *   when it keeps its own copy, so a large file is not stored twice)
 * @param {'blob'|'bytes'} [options.as]  'bytes': resolve with one Uint8Array instead of a Blob
 *   (no copy into the browser's blob storage: for a small file handed to an engine at once)
 * @returns {Promise<Blob|Uint8Array>}
 * @throws WasmlmError 'WLM_ERR_IO' (url; httpStatus for an HTTP error status; partial: true when
 *   the transfer broke off midway; otherwise the network failed or the browser refused a
 *   cross-origin response: browsers do not say which), 'WLM_ERR_CHECKSUM' (expected, actual: sha256 hex or byte counts; mismatch: 'partial'
 *   — fewer bytes arrived than the file has, a broken-off transfer; 'size' — the server's file has
 *   another size, it is not the published file the caller pins; 'sha256' — same size, other
 *   bytes: replaced upstream or damaged on the way); DOMException 'AbortError'.
 */
export async function download(url, options = {}) {
  const { onProgress, signal, sha256 = null, size = null, httpCache, as = 'blob' } = checkOptions('download()', options, 'DownloadOptions') ?? {};
  if (as !== 'blob' && as !== 'bytes') {
    throw new WasmlmError(`download(): as must be 'blob' or 'bytes', not ${JSON.stringify(as)}`, 'WLM_ERR_INVALID_ARG');
  }
  const href = absoluteUrl(url);
  if (signal?.aborted) throw abortError();
  let res;
  try {
    res = await fetch(href, { signal, ...(httpCache ? { cache: httpCache } : {}) });
  } catch (e) {
    if (e?.name === 'AbortError' || signal?.aborted) throw abortError();
    const detail = e?.cause?.code || e?.cause?.message || e?.message || String(e);
    throw new WasmlmError(`cannot download ${href}: the network failed or the server refused ` +
      `cross-origin access (CORS) [${detail}]`, 'WLM_ERR_IO', null, { url: href, cause: e });
  }
  if (!res.ok) {
    res.body?.cancel().catch(() => {});
    throw new WasmlmError(`cannot download ${href}: HTTP ${res.status}${res.statusText ? ` ${res.statusText}` : ''}`,
      'WLM_ERR_IO', null, { url: href, httpStatus: res.status });
  }
  const encoding = res.headers.get('content-encoding');
  const length = Number(res.headers.get('content-length'));
  const total = (!encoding || encoding === 'identity') && Number.isSafeInteger(length) && length > 0 ? length : 0;
  if (size != null && total && total !== size) {
    res.body?.cancel().catch(() => {});
    throw checksumError(`${fileName(href)} is ${total} bytes on the server, expected ${size}: not the ` +
      'published file (it changed, or the address points elsewhere); nothing was downloaded',
    href, size, total, 'size');
  }

  // To be hashed, the bytes go into one preallocated buffer when the size is known (digested in
  // place, then copied once into the Blob). Otherwise the chunks are kept as they come and joined
  // by the Blob: no single large allocation, which a phone may refuse for a 1 GB model.
  let whole = total && sha256 ? new Uint8Array(total) : null;
  const chunks = [];
  let loaded = 0;
  const t0 = performance.now();
  const report = () => {
    const secs = (performance.now() - t0) / 1000;
    onProgress?.({ loaded, total, bytesPerSec: secs > 0 ? loaded / secs : 0 });
  };
  report();
  if (res.body) {
    const reader = res.body.getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        if (signal?.aborted) throw abortError();
        if (whole && loaded + value.byteLength <= whole.byteLength) {
          whole.set(value, loaded);
        } else {
          if (whole) { chunks.push(whole.subarray(0, loaded)); whole = null; } // longer than announced
          chunks.push(value);
        }
        loaded += value.byteLength;
        report();
      }
    } catch (e) {
      reader.cancel().catch(() => {});
      if (e?.name === 'AbortError' || signal?.aborted) throw abortError();
      if (e instanceof WasmlmError) throw e;
      const of = size ?? total;
      const err = new WasmlmError(`the download of ${href} broke off after ${loaded}${of ? ` of ${of}` : ''} ` +
        `bytes (a partial download; try again): ${e?.message ?? e}`, 'WLM_ERR_IO', null, { url: href, cause: e });
      err.partial = true; // the transfer started and stopped: not a refused request
      throw err;
    }
  }
  const bytes = whole ? whole.subarray(0, loaded) : null;
  const parts = bytes ? [bytes] : chunks;

  if (size != null && loaded < size) {
    throw checksumError(`${fileName(href)}: the download stopped after ${loaded} of ${size} bytes (a partial ` +
      'download: the connection broke off or the server sent less); try again', href, size, loaded, 'partial');
  }
  if (size != null && loaded > size) {
    throw checksumError(`${fileName(href)} has ${loaded} bytes, expected ${size}: not the published file ` +
      '(it changed, or the address points elsewhere)', href, size, loaded, 'size');
  }
  if (sha256) {
    const actual = await sha256Hex(bytes ?? await new Blob(parts).arrayBuffer());
    if (actual !== sha256.toLowerCase()) {
      throw checksumError(`${fileName(href)} does not match its checksum: expected sha256 ${sha256}, got ${actual} ` +
        '(the file was replaced at the source, or damaged on the way)', href, sha256.toLowerCase(), actual, 'sha256');
    }
  }
  if (as === 'bytes') return bytes ?? concat(chunks, loaded);
  return new Blob(parts, { type: 'application/octet-stream' });
}

/** The chunks as one Uint8Array of `n` bytes. */
function concat(chunks, n) {
  if (chunks.length === 1) return chunks[0];
  const out = new Uint8Array(n);
  let at = 0;
  for (const c of chunks) { out.set(c, at); at += c.byteLength; }
  return out;
}

/** WLM_ERR_CHECKSUM; mismatch: 'partial' | 'size' | 'sha256' (see download()). */
function checksumError(message, url, expected, actual, mismatch) {
  const err = new WasmlmError(message, 'WLM_ERR_CHECKSUM', null, { url });
  err.expected = expected;
  err.actual = actual;
  err.mismatch = mismatch;
  return err;
}

/**
 * Model files in one Cache Storage bucket, keyed by absolute URL. Every method works (and does
 * nothing) where Cache Storage is missing.
 */
export class ModelCache {
  #name;
  #storage;

  /**
   * @param {string} [name]  the bucket (default CACHE_NAME)
   * @param {{caches?: CacheStorage}} [options]  another CacheStorage (tests)
   */
  constructor(name = CACHE_NAME, options = {}) {
    const { caches: storage = globalThis.caches } = checkOptions('new ModelCache()', options, 'ModelCacheOptions') ?? {};
    this.#name = name;
    this.#storage = storage ?? null;
  }

  /** The bucket's name. */
  get name() { return this.#name; }

  /** Whether Cache Storage exists here (browsers: secure contexts only, i.e. https or localhost). */
  get available() { return this.#storage !== null && typeof this.#storage?.open === 'function'; }

  async #open() {
    return this.#storage.open(this.#name);
  }

  /**
   * The stored file for `url`, or null. With `sha256`, an entry stored under another checksum
   * (the published file changed) is deleted and counts as a miss.
   * @returns {Promise<Blob|null>}
   */
  async match(url, options = {}) {
    const { sha256 = null } = checkOptions('match()', options, 'CacheMatchOptions') ?? {};
    if (!this.available) return null;
    const key = absoluteUrl(url);
    const cache = await this.#open();
    const res = await cache.match(key);
    if (!res) return null;
    const stored = res.headers.get(H_SHA256);
    if (sha256 && stored !== sha256.toLowerCase()) {
      await cache.delete(key);
      return null;
    }
    return res.blob();
  }

  /**
   * Stores `blob` under `url`. Never throws for a full disk: the result says why nothing was
   * stored, so a caller can use the file anyway.
   * @returns {Promise<{stored: true} | {stored: false, reason: 'unavailable'|'quota'|'error', error?: Error}>}
   *   'quota': the origin's storage quota is exhausted (QuotaExceededError).
   */
  async put(url, blob, options = {}) {
    const { sha256 = null, name = null } = checkOptions('put()', options, 'CachePutOptions') ?? {};
    if (!this.available) return { stored: false, reason: 'unavailable' };
    const key = absoluteUrl(url);
    const headers = {
      'Content-Type': 'application/octet-stream',
      'Content-Length': String(blob.size),
      [H_NAME]: name ?? fileName(key),
      [H_STORED]: new Date().toISOString(),
    };
    if (sha256) headers[H_SHA256] = sha256.toLowerCase();
    try {
      const cache = await this.#open();
      await cache.put(key, new Response(blob, { headers }));
      return { stored: true };
    } catch (error) {
      const quota = error?.name === 'QuotaExceededError';
      return { stored: false, reason: quota ? 'quota' : 'error', error };
    }
  }

  /**
   * The stored files, in insertion order.
   * @returns {Promise<{url: string, name: string, size: number, sha256: string|null, storedAt: string|null}[]>}
   */
  async list() {
    if (!this.available || !(await this.#storage.has(this.#name))) return [];
    const cache = await this.#open();
    const out = [];
    for (const req of await cache.keys()) {
      const res = await cache.match(req);
      if (!res) continue;
      let size = Number(res.headers.get('content-length'));
      if (!Number.isSafeInteger(size) || size < 0) size = (await res.blob()).size;
      out.push({
        url: req.url,
        name: res.headers.get(H_NAME) || fileName(req.url),
        size,
        sha256: res.headers.get(H_SHA256),
        storedAt: res.headers.get(H_STORED),
      });
    }
    return out;
  }

  /** Removes the file stored under `url`; true if there was one. */
  async delete(url) {
    if (!this.available || !(await this.#storage.has(this.#name))) return false;
    return (await this.#open()).delete(absoluteUrl(url));
  }

  /** Removes every stored file (the whole bucket); returns how many there were. */
  async clear() {
    if (!this.available || !(await this.#storage.has(this.#name))) return 0;
    const n = (await (await this.#open()).keys()).length;
    await this.#storage.delete(this.#name);
    return n;
  }
}

/**
 * A model file from the cache, or else downloaded (see download() for the options and errors).
 * Nothing is stored until save() is called, so a caller can first let the engine check that
 * the file is a model.
 *
 * @param {string|URL} url
 * @param {object} [options]  download()'s options, plus:
 * @param {ModelCache} [options.cache]  default: a ModelCache on CACHE_NAME
 * @returns {Promise<{blob: Blob, url: string, fromCache: boolean,
 *   save: () => Promise<{stored: boolean, reason?: string, error?: Error}>}>}
 *   save() resolves {stored: true} at once for a file that came from the cache.
 */
export async function fetchModel(url, options = {}) {
  checkOptions('fetchModel()', options, 'FetchModelOptions');
  const { cache = new ModelCache(), sha256 = null, size = null, onProgress, signal } = options ?? {};
  const href = absoluteUrl(url);
  const hit = await cache.match(href, { sha256 });
  if (hit) {
    onProgress?.({ loaded: hit.size, total: hit.size, bytesPerSec: 0 });
    return { blob: hit, url: href, fromCache: true, save: async () => ({ stored: true }) };
  }
  const blob = await download(href, {
    sha256, size, onProgress, signal, httpCache: cache.available ? 'no-store' : undefined,
  });
  return { blob, url: href, fromCache: false, save: () => cache.put(href, blob, { sha256 }) };
}

// ---- The model store (js/models/storage/): resumable downloads into OPFS, verified, managed, shared
// between tabs. The functions below use one default ModelStore; a page that wants other options
// makes its own.


let defaultStore = null;
/** The ModelStore the functions below use (created on first use with the default options). */
export function modelStore() {
  defaultStore ??= new ModelStore();
  return defaultStore;
}

/**
 * A model file from the store, else downloaded into it (resuming a partial download, Range
 * requests, retries with backoff), its sha256 checked while it streams; resolves once it is
 * stored complete and verified. See ModelStore.download() in cache.d.ts.
 */
export function downloadModel(url, options) {
  return modelStore().download(url, options);
}

/**
 * Every stored model file: the store's (complete or partial), then the files an older version
 * kept in Cache Storage (ModelCache, `store: 'cache-v1'`).
 */
export async function listModels(options = {}) {
  checkOptions('listModels()', options, 'StoreLookupOptions');
  const { store = modelStore(), cache = new ModelCache() } = options ?? {};
  const legacy = (await cache.list().catch(() => [])).map((e) => ({
    url: e.url, id: null, name: e.name, size: e.size, done: e.size, complete: true, verified: Boolean(e.sha256),
    sha256: e.sha256, storedAt: e.storedAt, updatedAt: e.storedAt, store: 'cache-v1',
  }));
  return [...await store.list(), ...legacy];
}

/** Whether a complete file is stored for a URL or manifest id (the store, or the older cache). */
export async function isCached(urlOrId, options = {}) {
  checkOptions('isCached()', options, 'StoreLookupOptions');
  const { store = modelStore(), cache = new ModelCache() } = options ?? {};
  if (await store.has(urlOrId)) return true;
  try { return Boolean(await cache.match(urlOrId)); } catch { return false; }
}

/** Deletes a stored file (complete or partial; also an older Cache Storage copy); true if any. */
export async function deleteModel(urlOrId, options = {}) {
  checkOptions('deleteModel()', options, 'StoreLookupOptions');
  const { store = modelStore(), cache = new ModelCache() } = options ?? {};
  const a = await store.delete(urlOrId);
  let b = false;
  try { b = await cache.delete(urlOrId); } catch { /* not a URL */ }
  return a || b;
}

/** {usage, quota, available} in bytes (navigator.storage.estimate(); nulls where unknown). */
export function storageEstimate() {
  return modelStore().estimate();
}

/** Asks once for persistent storage (navigator.storage.persist()); see ModelStore.persist(). */
export function persistStorage(options) {
  return modelStore().persist(options);
}
