// platform.js — what differs between Node and browsers, in one place: whether this is Node,
// the base URL relative strings resolve against, where a source string points (a URL to fetch
// or a Node file path), fetch() with its failures as WasmlmError('WLM_ERR_IO'), and a yield to
// the event loop. It reads no model and compiles no module: js/models/source.js and js/runtime/wasm.js do.

import { WasmlmError, jsError } from './errors.js';

export const IS_NODE = typeof process === 'object' && process !== null &&
  typeof process.versions?.node === 'string' && typeof window === 'undefined';

/** The base URL relative strings resolve against outside Node (page, or worker script). */
export function baseURI() {
  return globalThis.document?.baseURI ?? globalThis.location?.href;
}

/**
 * Where a string or URL source points: {url} (fetch) or {path} (Node file system).
 * In Node, a string without a URL scheme is a file path (relative to the working directory);
 * in browsers, it is a URL relative to the document (or the worker script).
 */
export async function locate(source) {
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

/** fetch() that turns network and HTTP failures into WasmlmError('WLM_ERR_IO'). */
export async function fetchOk(url, signal) {
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

/** Yields to the event loop (a macrotask, so timers, messages and UI events run). */
export const macrotask = (() => {
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

/** A User Timing mark (performance.mark), where the runtime has one; never throws. The engines
 *  set 'wasmlm:engine-ready', 'wasmlm:model-loaded' and 'wasmlm:first-token' (see wasmlm.d.ts). */
export function mark(name) {
  try {
    globalThis.performance?.mark?.(name);
  } catch {
    // a runtime whose performance.mark refuses: timing marks are a convenience only
  }
}
