// cache.d.ts — hand-written types for js/models/cache.js ('wasmlm/cache'): model downloads with
// progress, sha256 checks, and the browser's Cache Storage.
//
//   import { createWorkerEngine } from 'wasmlm';
//   import { fetchModel } from 'wasmlm/cache';
//   const m = await fetchModel('https://…/stories260K.gguf', {
//     sha256: '270c…', onProgress: ({ loaded, total, bytesPerSec }) => {} });
//   const engine = await createWorkerEngine();
//   await engine.load({ model: m.blob });   // m.fromCache: loaded without a request
//   await m.save();                         // keep it only once the engine accepted it
//
// Errors are the library's WasmlmError: 'WLM_ERR_IO' (httpStatus set for an HTTP error status;
// partial: true when the transfer broke off midway; neither when the network failed or the
// browser refused a cross-origin response, which browsers do not tell apart) and 'WLM_ERR_CHECKSUM' (expected / actual, and mismatch: 'partial' for a
// transfer that broke off, 'size' for a server file of another size, 'sha256' for other bytes of
// the same size). Aborts reject with a DOMException named 'AbortError'.

/** The Cache Storage bucket used by default: 'wasmlm-models-v1'. */
export const CACHE_NAME: string;

/** Progress of a download, reported per chunk received (and once at the start). */
export interface DownloadProgress {
  /** Bytes received so far. */
  loaded: number;
  /** The size from Content-Length; 0 while unknown (no length, or a compressed response). */
  total: number;
  /** Mean rate since the response started, in bytes per second (0 for a cache hit). */
  bytesPerSec: number;
}

/** Unknown keys are rejected: WasmlmError WLM_ERR_INVALID_ARG naming the key and the known
 *  ones (js/options.js). */
export interface DownloadOptions {
  onProgress?: (progress: DownloadProgress) => void;
  signal?: AbortSignal;
  /** Expected sha256 (hex): checked with crypto.subtle before the Blob is returned. */
  sha256?: string | null;
  /** Expected size in bytes: checked against Content-Length before the body is read, then
   *  against the bytes received (before the sha256). */
  size?: number | null;
  /** fetch()'s cache mode for the request. */
  httpCache?: RequestCache;
  /**
   * 'blob' (default): the file as a Blob. 'bytes': as one Uint8Array instead, without making a
   * Blob (a browser copies a Blob's bytes to its own process: for a small file handed on to an
   * engine at once, that copy and the worker's read of it back cost more than the bytes).
   */
  as?: 'blob' | 'bytes';
}

/**
 * Downloads a file into a Blob (or, with `as: 'bytes'`, a Uint8Array).
 * @throws WasmlmError 'WLM_ERR_IO' | 'WLM_ERR_CHECKSUM'; DOMException 'AbortError'.
 */
export function download(url: string | URL, options: DownloadOptions & { as: 'bytes' }): Promise<Uint8Array>;
export function download(url: string | URL, options?: DownloadOptions): Promise<Blob>;

/** What put() did. 'quota': the origin's storage quota is exhausted (QuotaExceededError);
 *  'unavailable': no Cache Storage here. */
export type PutResult =
  | { stored: true }
  | { stored: false; reason: 'unavailable' | 'quota' | 'error'; error?: Error };

/** A stored file, as list() describes it. */
export interface CachedFile {
  /** The absolute URL it is stored under. */
  url: string;
  /** A readable name (the file name from the URL unless put() was given one). */
  name: string;
  /** Bytes. */
  size: number;
  /** The sha256 it was checked against when stored, or null. */
  sha256: string | null;
  /** When it was stored (ISO 8601), or null. */
  storedAt: string | null;
}

/**
 * Model files in one Cache Storage bucket, keyed by absolute URL (relative URLs resolve against
 * the page). Cache Storage exists in secure contexts only (https, localhost); elsewhere, and in
 * Node, `available` is false and every method does nothing.
 */
export class ModelCache {
  constructor(name?: string, options?: ModelCacheOptions);
  readonly name: string;
  readonly available: boolean;
  /** The stored file, or null. With `sha256`, an entry stored under another checksum is
   *  deleted and counts as a miss. */
  match(url: string | URL, options?: CacheMatchOptions): Promise<Blob | null>;
  /** Stores a file; never throws for a full quota (see PutResult). */
  put(url: string | URL, blob: Blob, options?: CachePutOptions): Promise<PutResult>;
  list(): Promise<CachedFile[]>;
  /** true if a file was stored under `url`. */
  delete(url: string | URL): Promise<boolean>;
  /** Deletes the bucket; resolves with the number of files it held. */
  clear(): Promise<number>;
}

export interface FetchedModel {
  blob: Blob;
  /** The absolute URL. */
  url: string;
  /** true when the file came from the cache (no request was made). */
  fromCache: boolean;
  /** Stores a downloaded file in the cache ({stored: true} at once for a cache hit). */
  save(): Promise<PutResult>;
}

/**
 * A file from the cache, or else downloaded (with the cache's own copy in mind: the request
 * uses fetch's 'no-store' mode where Cache Storage exists). Nothing is stored until save().
 * @throws as download().
 */
export function fetchModel(url: string | URL,
  options?: FetchModelOptions): Promise<FetchedModel>;

/** Hex sha256 of bytes or a Blob (crypto.subtle). */
export function sha256Hex(data: Blob | ArrayBuffer | ArrayBufferView): Promise<string>;

/** The absolute form of a URL (relative to the page). */
export function absoluteUrl(url: string | URL): string;

/** The decoded last path segment of a URL. */
export function fileName(url: string | URL): string;

// ---- The model store (js/models/storage/): resumable, verified downloads into the Origin Private File
// System (else Cache Storage, else memory), shared between tabs.
//
//   import { downloadModel, listModels, deleteModel, storageEstimate } from 'wasmlm/cache';
//   const m = await downloadModel(url, { sha256, size, onProgress: ({ loaded, total, secondsLeft }) => {} });
//   await engine.load({ model: m.blob });   // a split GGUF: a list of such Blobs
//
// How a download goes: Range requests continue the stored bytes after a dropped connection (at
// once, with exponential backoff), a reload or a closed tab; every response is checked before
// its bytes are written (a 206 must start at the byte asked for, ETag / Last-Modified and the size
// must be the ones recorded when the file started, a body past the end is refused; a 200 to a
// Range request starts over from byte 0), so a stored file is never a mix of two versions. The
// sha256 is computed while the bytes arrive (hash-wasm's SHA-256, its state saved with each
// committed segment) and compared with the pin before the file is marked complete. A stored file
// is handed out only complete (and, when pinned, verified).

/** Progress of a store download (also reported once for a stored file, with loaded = total). */
export interface StoreProgress {
  /** Bytes stored so far (including those of an earlier, resumed session). */
  loaded: number;
  /** The file's size; 0 while unknown. */
  total: number;
  /** Mean rate of this session's transfer, bytes per second. */
  bytesPerSec: number;
  /** (total − loaded) / bytesPerSec, or null while unknown. */
  secondsLeft: number | null;
  /** Bytes that were already stored when this download started (0: a fresh one). */
  resumedFrom: number;
  /** Requests made so far (retries and restarts included). */
  attempt: number;
}

/** Unknown keys are rejected: WasmlmError WLM_ERR_INVALID_ARG naming the key and the known
 *  ones (js/options.js). */
export interface StoreOptions {
  /** 'auto' (default): OPFS where navigator.storage.getDirectory() works, else Cache Storage,
   *  else memory (Node: nothing persists). */
  backend?: 'auto' | 'opfs' | 'cache' | 'memory';
  /** Bytes per stored segment (default 16 MiB): a reload or closed tab loses at most the segment
   *  being written; the Cache Storage backend holds one segment in memory. */
  segmentBytes?: number;
  /** OPFS: write segments in a worker through createSyncAccessHandle() (in place, no swap file;
   *  js/models/storage/opfs_worker.js, dist/opfs_worker.js in the page's bundles) where one starts.
   *  Default true; false: createWritable() on this thread. */
  syncWrites?: boolean;
  /** Bytes asked for per HTTP request (Range: bytes=N-M; the next request is sent while one is
   *  read). Default 8 MiB in a browser, 0 in Node. Bounds what the browser holds of a download
   *  that the disk and the hash have not taken yet (Chromium's fetch() reads a body ahead without
   *  limit): about two requests' worth. 0: one open-ended request (bytes=N-) per attempt. */
  requestBytes?: number;
  /** Look files pinned by sha256 up in, and offer verified ones to, the Cross-Origin Storage API
   *  (navigator.crossOriginStorage) where the browser has it. Default true. */
  crossOrigin?: boolean;
  /** Failed attempts in a row (without a byte of progress) before failing. Default 6. */
  retries?: number;
  /** A response that sends nothing for this long is abandoned and retried, ms. Default 30000. */
  stallMs?: number;
  /** Times a file that changed on the server (or broke HTTP's rules) starts over. Default 2. */
  maxRestarts?: number;
  /** Retry delay: backoffMs·2^(n−1), at most backoffMaxMs, times a random 0.5–1. Defaults 500, 15000. */
  backoffMs?: number;
  backoffMaxMs?: number;
  /** Other implementations, for tests. */
  storage?: StorageManager;
  caches?: CacheStorage;
  locks?: LockManager;
  navigator?: Navigator;
  fetch?: typeof fetch;
}

/** Unknown keys are rejected: WasmlmError WLM_ERR_INVALID_ARG naming the key and the known
 *  ones (js/options.js). */
export interface StoreDownloadOptions {
  /** Expected sha256 (hex). Checked before the file is marked complete; a mismatch deletes it. */
  sha256?: string | null;
  /** Expected size in bytes: checked against the server's before any byte is stored, and against
   *  the quota left before any request. */
  size?: number | null;
  /** A manifest id: isCached / deleteModel / get accept it in place of the URL. */
  id?: string | null;
  /** A readable name (default: the URL's file name). */
  name?: string | null;
  /** Called as bytes are stored: after each 4 MiB, or what arrived in 100 ms on a slower
   *  transfer (the reads are written in such steps), and at the end. */
  onProgress?: (progress: StoreProgress) => void;
  /** Aborts this caller's download or wait; the bytes stored so far are kept for a resume. */
  signal?: AbortSignal;
}

/** A stored file, complete (and verified when it was pinned). */
export interface StoredModel {
  /** The file: a Blob of its stored segments (OPFS Files; never read into memory here). */
  blob: Blob;
  url: string;
  id: string | null;
  name: string;
  size: number;
  /** The file's sha256 (hex), computed while it downloaded. */
  sha256: string;
  /** true when it matched a pinned sha256. */
  verified: boolean;
  /** When it was completed (ISO 8601), or null (Cross-Origin Storage). */
  storedAt: string | null;
  /** Where it came from: the store's backend, or 'cross-origin'. */
  from: 'opfs' | 'cache' | 'memory' | 'cross-origin';
  /** false when this call downloaded (some of) it. */
  fromCache: boolean;
  /** Bytes that were already stored when this call started (a resumed download). */
  resumedFrom: number;
  /** true when another tab downloaded it while this one waited. */
  shared?: boolean;
}

/** A stored file as list() describes it, complete or partial. */
export interface StoreEntry {
  url: string;
  id: string | null;
  name: string;
  /** Bytes; null while unknown. */
  size: number | null;
  /** Bytes stored (= size when complete): what a resume starts from. */
  done: number;
  complete: boolean;
  verified: boolean;
  /** The digest of a complete file, else the pin (or null). */
  sha256: string | null;
  storedAt: string | null;
  updatedAt: string | null;
  /** The backend; 'cache-v1': a file ModelCache stored (listModels() only). */
  store: 'opfs' | 'cache' | 'memory' | 'cache-v1';
}

/**
 * Verified model files kept in the browser. Downloads of the same file are shared between the
 * tabs of an origin (Web Locks: one downloads, the others wait and get the stored file, or resume
 * it if that tab closed) and between the calls of one tab.
 *
 * Errors (WasmlmError): 'WLM_ERR_IO' (an HTTP error status: httpStatus; retries exhausted, or a
 * server that cannot resume: partial true — the stored part is kept for the next try unless the
 * server ignores Range), 'WLM_ERR_CHECKSUM' (mismatch 'sha256': other bytes than the pin;
 * 'changed' / 'size': the file changed on the server more than maxRestarts times; 'protocol':
 * responses that do not fit together; the stored part is deleted), 'WLM_ERR_QUOTA' (needed and
 * available, bytes: before any request when the size is known, else before the first body is
 * read; or the storage filled up, the part kept), 'WLM_ERR_INVALID_ARG' (an unknown option,
 * named), 'WLM_ERR_UNSUPPORTED' (a backend asked for by name is missing; hash-wasm missing);
 * DOMException 'AbortError'.
 */
export class ModelStore {
  constructor(options?: StoreOptions);
  /** The backend in use, chosen on first use. */
  kind(): Promise<'opfs' | 'cache' | 'memory'>;
  /** How OPFS segments are written: 'sync' (the worker) or 'stream' (createWritable); null for
   *  the other backends. */
  writer(): Promise<'sync' | 'stream' | null>;
  /** A stored file from the store, else downloaded into it. */
  download(url: string | URL, options?: StoreDownloadOptions): Promise<StoredModel>;
  /** The complete stored file of a URL or manifest id, or null (never a partial file). With
   *  `sha256`, a file stored under another digest is deleted and counts as a miss. */
  get(urlOrId: string | URL, options?: CacheMatchOptions): Promise<StoredModel | null>;
  has(urlOrId: string | URL): Promise<boolean>;
  list(): Promise<StoreEntry[]>;
  /** Deletes a complete or partial file; true if there was one. */
  delete(urlOrId: string | URL): Promise<boolean>;
  /** navigator.storage.estimate() in bytes; nulls where unknown. */
  estimate(): Promise<{ usage: number | null; quota: number | null; available: number | null }>;
  /** Asks navigator.storage.persist() once per store (asked: whether it asked now). `reason` is
   *  returned for the page to show; browsers take none. */
  persist(options?: PersistOptions): Promise<{ persisted: boolean; asked: boolean; reason: string | null }>;
}

/** The ModelStore the functions below use (default options). */
export function modelStore(): ModelStore;
/** modelStore().download(). */
export function downloadModel(url: string | URL, options?: StoreDownloadOptions): Promise<StoredModel>;
/** The store's files (complete or partial), then those ModelCache kept ('cache-v1'). */
export function listModels(options?: StoreLookupOptions): Promise<StoreEntry[]>;
/** Whether a complete file is stored for a URL or manifest id (the store, or ModelCache). */
export function isCached(urlOrId: string | URL, options?: StoreLookupOptions): Promise<boolean>;
/** Deletes the file of a URL or manifest id from the store and from ModelCache; true if any. */
export function deleteModel(urlOrId: string | URL, options?: StoreLookupOptions): Promise<boolean>;
/** modelStore().estimate(). */
export function storageEstimate(): Promise<{ usage: number | null; quota: number | null; available: number | null }>;
/** modelStore().persist(). */
export function persistStorage(options?: PersistOptions): Promise<{ persisted: boolean; asked: boolean; reason: string | null }>;

/** ModelCache's constructor options. Unknown keys are rejected
 *  (WLM_ERR_INVALID_ARG naming the key and the known ones: js/options.js). */
export interface ModelCacheOptions {
  /** The CacheStorage to use (default globalThis.caches). */
  caches?: CacheStorage;
}

/** ModelCache.match() and ModelStore.get() options. Unknown keys are rejected
 *  (WLM_ERR_INVALID_ARG naming the key and the known ones: js/options.js). */
export interface CacheMatchOptions {
  /** The expected sha256 (hex): a stored file with another digest is not returned. */
  sha256?: string | null;
}

/** ModelCache.put() options. Unknown keys are rejected
 *  (WLM_ERR_INVALID_ARG naming the key and the known ones: js/options.js). */
export interface CachePutOptions {
  sha256?: string | null;
  name?: string | null;
}

/** fetchModel() options: download()'s but httpCache and as, plus the cache. Unknown keys are rejected
 *  (WLM_ERR_INVALID_ARG naming the key and the known ones: js/options.js). */
export interface FetchModelOptions {
  cache?: ModelCache;
  sha256?: string | null;
  size?: number | null;
  onProgress?: (progress: DownloadProgress) => void;
  signal?: AbortSignal;
}

/** listModels(), isCached() and deleteModel() options. Unknown keys are rejected
 *  (WLM_ERR_INVALID_ARG naming the key and the known ones: js/options.js). */
export interface StoreLookupOptions {
  store?: ModelStore;
  cache?: ModelCache;
}

/** ModelStore.persist() and persistStorage() options. Unknown keys are rejected
 *  (WLM_ERR_INVALID_ARG naming the key and the known ones: js/options.js). */
export interface PersistOptions {
  reason?: string | null;
}
