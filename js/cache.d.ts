// cache.d.ts — hand-written types for js/cache.js ('wasmlm/cache'): model downloads with
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
  constructor(name?: string, options?: { caches?: CacheStorage });
  readonly name: string;
  readonly available: boolean;
  /** The stored file, or null. With `sha256`, an entry stored under another checksum is
   *  deleted and counts as a miss. */
  match(url: string | URL, options?: { sha256?: string | null }): Promise<Blob | null>;
  /** Stores a file; never throws for a full quota (see PutResult). */
  put(url: string | URL, blob: Blob, options?: { sha256?: string | null; name?: string | null }): Promise<PutResult>;
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
  options?: Omit<DownloadOptions, 'httpCache'> & { cache?: ModelCache }): Promise<FetchedModel>;

/** Hex sha256 of bytes or a Blob (crypto.subtle). */
export function sha256Hex(data: Blob | ArrayBuffer | ArrayBufferView): Promise<string>;

/** The absolute form of a URL (relative to the page). */
export function absoluteUrl(url: string | URL): string;

/** The decoded last path segment of a URL. */
export function fileName(url: string | URL): string;
