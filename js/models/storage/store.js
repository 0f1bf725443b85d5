// storage/store.js — the model store: verified model files kept in the browser, resumable
// downloads into it, and what a page needs to manage it (list, check, delete, space used and left,
// persistence). Where the bytes live is a backend: the Origin Private File System (opfs.js) where
// it exists, else Cache Storage (cache_storage.js), else memory (memory.js: Node; nothing
// persists); a file pinned by sha256 is also looked up in, and offered to, the Cross-Origin
// Storage API where the browser exposes it (cross_origin.js). Two tabs that want the same file
// share one download (locks.js); the download itself, its checks and its resume are download.js's.
// A stored file is handed back as a Blob of its segments — engine.load() takes it as it is, and a
// split GGUF is a list of them — and only once complete and verified: a partial file is never
// returned.

import { WasmlmError } from '../../runtime/errors.js';
import { OpfsBackend, opfsAvailable } from './opfs.js';
import { CacheStorageBackend, cacheStorageAvailable } from './cache_storage.js';
import { MemoryBackend } from './memory.js';
import { crossOriginGet, crossOriginPut } from './cross_origin.js';
import { withFileLock } from './locks.js';
import { DOWNLOAD_DEFAULTS, downloadInto, newMeta, quotaError } from './download.js';
import { createHasher } from './integrity.js';
import { KNOWN, checkOptions } from '../../options.js';

const OPTIONS = KNOWN.StoreOptions;
const DOWNLOAD_OPTIONS = KNOWN.StoreDownloadOptions;

function checkKeys(obj, allowed, where) {
  checkOptions(where, obj, allowed, { keepUndefined: true });
}

function baseURI() {
  return globalThis.document?.baseURI ?? globalThis.location?.href;
}

function absolute(url) {
  return new URL(String(url), baseURI()).href;
}

function lastSegment(url) {
  try {
    return decodeURIComponent(new URL(url).pathname.split('/').filter(Boolean).pop() ?? '') || url;
  } catch {
    return String(url);
  }
}

/** The storage key of a URL: its sha256 (hex, 32 digits), a safe file name of fixed length. */
async function keyOf(href) {
  const h = await createHasher();
  h.update(new TextEncoder().encode(href));
  return h.hex().slice(0, 32);
}

/** Downloads in flight in this realm, by key (Web Locks share them across tabs; this, within one). */
const inFlight = new Map();

// A page being unloaded can run on for a moment after its Web Locks are released (Firefox: a
// reload's new page took a file over while the old one still retried). From 'pagehide' on, this
// realm's downloads stop and write nothing more (download.js's `live`); what they committed
// before stays, and the next page resumes from it.
let unloading = false;
const running = new Set(); // AbortControllers of this realm's downloads
if (typeof globalThis.addEventListener === 'function' && typeof globalThis.document !== 'undefined') {
  globalThis.addEventListener('pagehide', () => {
    unloading = true;
    for (const c of running) c.abort(new DOMException('The page is being unloaded.', 'AbortError'));
  });
  globalThis.addEventListener('pageshow', () => { unloading = false; }); // back from the bfcache
}

export class ModelStore {
  #opts;
  #backend = null;
  #nav;
  #persistAsked = false;

  /**
   * @param {object} [options]
   * @param {'auto'|'opfs'|'cache'|'memory'} [options.backend]  'auto' (default): OPFS, else Cache
   *   Storage, else memory
   * @param {number} [options.segmentBytes]  bytes per stored segment (default 16 MiB): what a
   *   reload may lose, and what the Cache Storage backend holds in memory
   * @param {boolean} [options.syncWrites]  OPFS: write segments in a worker through
   *   createSyncAccessHandle() where one starts (default true); false: createWritable()
   * @param {number} [options.requestBytes]  bytes asked for per HTTP request (default 8 MiB in a
   *   browser, the next one sent while one is read; 0 in Node): bounds what the browser reads
   *   ahead of the disk; 0: one open-ended request per attempt (download.js)
   * @param {boolean} [options.crossOrigin]  use the Cross-Origin Storage API where it exists
   *   (default true)
   * @param {number} [options.retries]  attempts in a row without progress before failing (6)
   * @param {number} [options.stallMs]  a response that sends nothing this long is retried (30000)
   * @param {number} [options.maxRestarts]  times a file that changed on the server starts over (2)
   * @param {number} [options.backoffMs] @param {number} [options.backoffMaxMs]  retry delays:
   *   backoffMs·2^(n−1), at most backoffMaxMs, times a random 0.5–1 (500, 15000)
   * storage, caches, locks, navigator, fetch: other implementations (tests).
   */
  constructor(options = {}) {
    checkKeys(options, OPTIONS, 'new ModelStore()');
    const nav = options.navigator ?? globalThis.navigator;
    this.#nav = nav;
    this.#opts = {
      backend: 'auto', segmentBytes: DOWNLOAD_DEFAULTS.segmentBytes, requestBytes: DOWNLOAD_DEFAULTS.requestBytes,
      syncWrites: true, crossOrigin: true,
      storage: nav?.storage, caches: globalThis.caches, locks: nav?.locks, fetch: (...a) => globalThis.fetch(...a),
      retries: DOWNLOAD_DEFAULTS.retries, stallMs: DOWNLOAD_DEFAULTS.stallMs, maxRestarts: DOWNLOAD_DEFAULTS.maxRestarts,
      backoffMs: DOWNLOAD_DEFAULTS.backoffMs, backoffMaxMs: DOWNLOAD_DEFAULTS.backoffMaxMs, ...options,
    };
    if (!['auto', 'opfs', 'cache', 'memory'].includes(this.#opts.backend) && typeof this.#opts.backend?.readMeta !== 'function') {
      throw new WasmlmError(`new ModelStore(): backend must be 'auto', 'opfs', 'cache' or 'memory', not ${JSON.stringify(this.#opts.backend)}`,
        'WLM_ERR_INVALID_ARG');
    }
    if (!(Number.isSafeInteger(this.#opts.segmentBytes) && this.#opts.segmentBytes > 0)) {
      throw new WasmlmError('new ModelStore(): segmentBytes must be a positive integer', 'WLM_ERR_INVALID_ARG');
    }
    if (!(Number.isSafeInteger(this.#opts.requestBytes) && this.#opts.requestBytes >= 0)) {
      throw new WasmlmError('new ModelStore(): requestBytes must be an integer ≥ 0 (0: one open-ended request)', 'WLM_ERR_INVALID_ARG');
    }
  }

  /** The backend, chosen on first use: OPFS where getDirectory() works (it throws in some private
   *  windows), else Cache Storage, else memory. */
  async #store() {
    this.#backend ??= (async () => {
      const { backend, storage, caches } = this.#opts;
      if (typeof backend === 'object' && backend) return backend; // a backend object (tests)
      if ((backend === 'auto' || backend === 'opfs') && opfsAvailable(storage)) {
        try {
          await storage.getDirectory();
          return new OpfsBackend(storage, { sync: this.#opts.syncWrites });
        } catch (e) {
          if (backend === 'opfs') throw new WasmlmError(`the Origin Private File System is unavailable here: ${e?.message ?? e}`, 'WLM_ERR_UNSUPPORTED');
        }
      } else if (backend === 'opfs') {
        throw new WasmlmError('the Origin Private File System (with createWritable) is unavailable here', 'WLM_ERR_UNSUPPORTED');
      }
      if ((backend === 'auto' || backend === 'cache') && cacheStorageAvailable(caches)) return new CacheStorageBackend(caches);
      if (backend === 'cache') throw new WasmlmError('Cache Storage is unavailable here (it needs https or localhost)', 'WLM_ERR_UNSUPPORTED');
      return new MemoryBackend();
    })();
    return this.#backend;
  }

  /** Where files are kept: 'opfs' | 'cache' | 'memory' (resolves once the backend is chosen). */
  async kind() { return (await this.#store()).kind; }

  /** How OPFS segments are written: 'sync' (a worker's sync access handles) or 'stream'
   *  (createWritable()); null for the other backends. */
  async writer() {
    const b = await this.#store();
    return typeof b.writer === 'function' ? b.writer() : null;
  }

  /** The key of a URL or manifest id: the URL's, else that of a stored file with this id. */
  async #find(urlOrId) {
    const b = await this.#store();
    let key = null;
    try { key = await keyOf(absolute(urlOrId)); } catch { /* not a URL (an id, in Node) */ }
    const meta = key && await b.readMeta(key);
    if (meta) return { key, meta };
    for (const k of await b.keys()) {
      const m = await b.readMeta(k);
      if (m?.id != null && m.id === String(urlOrId)) return { key: k, meta: m };
    }
    return { key, meta: null };
  }

  #result(meta, blob, from, extra = {}) {
    return {
      blob, url: meta.url, id: meta.id, name: meta.name, size: blob.size, sha256: meta.actualSha256,
      verified: meta.verified, storedAt: meta.storedAt, from, fromCache: true, resumedFrom: 0, ...extra,
    };
  }

  /**
   * The stored file for a URL or manifest id, complete and verified, or null (never a partial
   * file). With `sha256`, a file stored under another checksum is deleted and counts as a miss.
   */
  async get(urlOrId, options = {}) {
    const { sha256 = null } = checkOptions('get()', options, 'CacheMatchOptions') ?? {};
    const b = await this.#store();
    const { key, meta } = await this.#find(urlOrId);
    if (meta?.complete) {
      if (sha256 && meta.actualSha256 !== sha256.toLowerCase()) {
        await b.remove(key);
      } else {
        const sizes = await b.segmentSizes(key, meta.segments.length);
        const blob = sizes.every((s, i) => s === meta.segments[i]) ? await b.blob(key, meta.segments.length) : null;
        if (blob && blob.size === meta.size) return this.#result(meta, blob, b.kind);
        await b.remove(key); // a segment went missing (the browser evicted part of it): not stored
      }
    }
    if (sha256 && this.#opts.crossOrigin) {
      const file = await crossOriginGet(sha256, this.#nav);
      if (file) {
        let href = String(urlOrId);
        try { href = absolute(urlOrId); } catch { /* an id */ }
        return { blob: file, url: href, id: null, name: lastSegment(href), size: file.size, sha256: sha256.toLowerCase(),
          verified: true, storedAt: null, from: 'cross-origin', fromCache: true, resumedFrom: 0 };
      }
    }
    return null;
  }

  /** Whether a complete file is stored for this URL or manifest id. */
  async has(urlOrId) {
    const { meta } = await this.#find(urlOrId);
    return Boolean(meta?.complete);
  }

  /**
   * Every stored file, complete or not: {url, id, name, size (bytes; null while unknown), done
   * (bytes stored), complete, verified, sha256 (the digest of a complete file, else the pin),
   * storedAt, updatedAt, store}.
   */
  async list() {
    const b = await this.#store();
    const out = [];
    for (const key of await b.keys()) {
      const m = await b.readMeta(key);
      if (!m) continue;
      out.push({ url: m.url, id: m.id, name: m.name, size: m.size, done: m.complete ? m.size : m.done,
        complete: m.complete, verified: m.verified, sha256: m.actualSha256 ?? m.sha256, storedAt: m.storedAt,
        updatedAt: m.updatedAt, store: b.kind });
    }
    return out.sort((x, y) => String(x.updatedAt).localeCompare(String(y.updatedAt)));
  }

  /** Deletes the file (complete or partial) of a URL or manifest id; true if there was one. */
  async delete(urlOrId) {
    const b = await this.#store();
    const { key, meta } = await this.#find(urlOrId);
    if (!meta) return false;
    return withFileLock(key, () => b.remove(key), { locks: this.#opts.locks });
  }

  /** {usage, quota, available} in bytes from navigator.storage.estimate() (nulls where missing). */
  async estimate() {
    try {
      const { usage, quota } = await this.#opts.storage.estimate();
      const ok = Number.isFinite(usage) && Number.isFinite(quota);
      return { usage: ok ? usage : null, quota: ok ? quota : null, available: ok ? Math.max(0, quota - usage) : null };
    } catch {
      return { usage: null, quota: null, available: null };
    }
  }

  /**
   * Asks the browser once (per store) to keep this origin's storage when space runs low
   * (navigator.storage.persist()). `reason` is for the caller to show first: browsers take none.
   * @returns {Promise<{persisted: boolean, asked: boolean, reason: string|null}>}
   */
  async persist(options = {}) {
    const { reason = null } = checkOptions('persist()', options, 'PersistOptions') ?? {};
    const s = this.#opts.storage;
    if (typeof s?.persist !== 'function') return { persisted: false, asked: false, reason };
    if (await s.persisted?.()) return { persisted: true, asked: false, reason };
    if (this.#persistAsked) return { persisted: false, asked: false, reason };
    this.#persistAsked = true;
    return { persisted: Boolean(await s.persist().catch(() => false)), asked: true, reason };
  }

  /**
   * The file at `url` from the store, else downloaded into it (resuming a partial one), checked,
   * and then returned. See ModelStore in js/models/cache.d.ts for the result, the progress and the errors.
   */
  async download(url, options = {}) {
    checkKeys(options, DOWNLOAD_OPTIONS, 'download()');
    const { sha256 = null, size = null, id = null, name = null, onProgress, signal } = options;
    if (signal?.aborted) throw signal.reason instanceof Error ? signal.reason : new DOMException('The download was aborted.', 'AbortError');
    const href = absolute(url);
    const hit = await this.get(href, { sha256 });
    if (hit) {
      onProgress?.({ loaded: hit.size, total: hit.size, bytesPerSec: 0, secondsLeft: 0, resumedFrom: hit.size, attempt: 0 });
      return hit;
    }
    const b = await this.#store();
    const key = await keyOf(href);
    // Calls for the same file with the same pin share one download; another pin waits its turn
    // (the lock) and then finds, checks or replaces what the first stored.
    const share = `${key}\n${sha256?.toLowerCase() ?? ''}\n${size ?? ''}`;
    let run = inFlight.get(share);
    if (!run) {
      const listeners = new Set();
      const emit = (p) => { for (const l of listeners) l(p); };
      run = { listeners, promise: null };
      run.promise = withFileLock(key, (broadcast) => this.#downloadLocked(b, key, href,
        { sha256, size, id, name: name ?? lastSegment(href), signal, onProgress: (p) => { emit(p); broadcast?.(p); } }),
      { signal, onWaitProgress: emit, locks: this.#opts.locks });
      if (onProgress) listeners.add(onProgress);
      inFlight.set(share, run);
      run.promise.then(() => inFlight.delete(share), () => inFlight.delete(share));
      return run.promise;
    }
    // Another call of this realm downloads it: share, and let this signal stop only this wait.
    if (onProgress) run.listeners.add(onProgress);
    return new Promise((resolve, reject) => {
      const onAbort = () => { run.listeners.delete(onProgress); reject(signal.reason); };
      signal?.addEventListener('abort', onAbort, { once: true });
      run.promise.then(resolve, reject).finally(() => signal?.removeEventListener('abort', onAbort));
    });
  }

  async #downloadLocked(b, key, href, { sha256, size, id, name, signal, onProgress }) {
    let meta = await b.readMeta(key);
    const pin = sha256?.toLowerCase() ?? null;
    if (meta?.complete && (!pin || meta.actualSha256 === pin)) {
      // Another tab finished it while this one waited.
      const blob = await b.blob(key, meta.segments.length);
      if (blob.size === meta.size) {
        onProgress?.({ loaded: blob.size, total: blob.size, bytesPerSec: 0, secondsLeft: 0, resumedFrom: blob.size, attempt: 0 });
        return this.#result(meta, blob, b.kind, { shared: true });
      }
    }
    // A partial file is continued unless the caller's pin or size contradicts what it was started
    // with (or learnt); a pin or size the caller adds is adopted.
    if (meta && (meta.complete || meta.url !== href || (pin && meta.sha256 && meta.sha256 !== pin) ||
        (size != null && meta.size != null && meta.size !== size))) {
      await b.remove(key);
      meta = null;
    }
    if (meta) {
      Object.assign(meta, { id: id ?? meta.id, name });
      if (pin) meta.sha256 = pin;
      if (size != null) Object.assign(meta, { size, pinnedSize: size });
    }
    else meta = newMeta({ key, url: href, id, name, sha256: pin, size, segmentBytes: this.#opts.segmentBytes });
    const o = this.#opts;
    const resumedFrom = meta.done;
    const started = meta;
    const stop = new AbortController();
    const onAbort = () => stop.abort(signal.reason);
    if (signal?.aborted) onAbort(); else signal?.addEventListener('abort', onAbort, { once: true });
    running.add(stop);
    meta = await downloadInto({
      backend: b, meta, onProgress, signal: stop.signal, fetch: o.fetch, live: () => !unloading, retries: o.retries, stallMs: o.stallMs,
      maxRestarts: o.maxRestarts, backoffMs: o.backoffMs, backoffMaxMs: o.backoffMaxMs, requestBytes: o.requestBytes,
      checkQuota: async (needed) => {
        const { available } = await this.estimate();
        if (available != null && needed > available) throw quotaError(href, needed, available);
      },
    }).catch(async (e) => {
      if (started.done === 0 && !unloading) await b.remove(key).catch(() => {}); // nothing stored: no entry either
      throw e;
    }).finally(() => {
      running.delete(stop);
      signal?.removeEventListener('abort', onAbort);
    });
    const blob = await b.blob(key, meta.segments.length);
    if (meta.verified && o.crossOrigin) crossOriginPut(meta.actualSha256, blob, this.#nav); // in the background; never throws
    return this.#result(meta, blob, b.kind, { fromCache: false, resumedFrom });
  }
}
