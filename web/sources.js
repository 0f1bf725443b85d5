// web/sources.js — where the demo's model files come from, as "plans" the page loads: a published
// model from models/manifest.json (the page's own models/files/ copy first, then the published
// URL), URLs typed in, or local files (a GGUF alone; a llama2.c checkpoint with its tokenizer; a
// text GGUF with its vision projector, an mmproj GGUF: general.architecture "clip").
// Downloads, checksums and Cache Storage are js/models/cache.js's; this file only chooses and names.
// Files larger than BYTES_MAX go to the model store (js/models/storage/: OPFS, resumable, verified while
// they stream) where it persists; smaller ones into memory and then Cache Storage, as before.
//
// A plan is { label, parts: [Part], verified, entryId? (a manifest entry's id), and for an entry
// memory64, refused (memoryPlan()) and nCtx }, one Part per
// file, model first:
//   Part = { stage: 'model'|'tokenizer'|'mmproj', name, candidates: [url], sha256, size, verified }
//        | { stage, name, file: File }

import { ModelCache, download, fileName, listModels, deleteModel, modelStore } from '../js/models/cache.js';
import { WASM32_BYTES, WASM32_FIT, modelBytes, memory64Support } from '../js/runtime/memory64.js';
import { IMAGE_MAX_PIXELS, IMAGE_MAX_SIDE, imageHeader } from '../js/vision/vision.js';

/** The demo's model cache (js/models/cache.js's default bucket, 'wasmlm-models-v1'). */
export const cache = new ModelCache();

/** The demo's model store (js/models/cache.js's default ModelStore). */
export const store = modelStore();

/** Whether the model store keeps files here (OPFS or Cache Storage, not memory). */
export async function storePersists() {
  try {
    return (await store.kind()) !== 'memory';
  } catch {
    return false;
  }
}

/** Every stored file: the store's (complete or partial), then Cache Storage's. */
export function listStored() {
  return listModels({ store, cache });
}

/** Deletes a stored file (store and Cache Storage); true if there was one. */
export function deleteStored(url) {
  return deleteModel(url, { store, cache });
}

/** Deletes every stored file; resolves with how many there were. */
export async function clearStored() {
  let n = 0;
  for (const e of await store.list()) if (await store.delete(e.url)) n++;
  return n + await cache.clear();
}

/**
 * Resumes a partial download of the store (the list's Resume button) with the pin it started
 * with. onProgress as the store's.
 */
export function resumeStored(entry, { onProgress, signal } = {}) {
  return store.download(entry.url, { sha256: entry.complete ? null : entry.sha256, size: entry.size ?? null,
    id: entry.id, name: entry.name, onProgress, signal });
}

/** Whether a part goes to the model store (a large file, where the store persists). */
async function useStore(part) {
  return part.size != null && part.size > BYTES_MAX && await storePersists();
}

/**
 * Opens the cache's Cache Storage bucket without waiting: the first open of a browser profile's
 * Cache Storage takes tens of milliseconds, which then overlap with other work (the page calls it
 * while the model list downloads). Never throws.
 */
export function warmCache() {
  if (cache.available) globalThis.caches.open(cache.name).catch(() => {});
}

/** Where this page's server keeps model files (tools/serve.mjs maps it; see models/README.md). */
function localCopy(file) {
  return new URL(`../models/files/${encodeURIComponent(file)}`, import.meta.url).href;
}

/** "this server" for same-origin URLs, else the host name. */
export function describeOrigin(url) {
  const u = new URL(url, document.baseURI);
  return u.origin === location.origin ? 'this server' : u.host;
}

/**
 * Whether a manifest entry needs the memory64 modules, before anything is downloaded: its file
 * (the pinned `size`, else the publisher's `listedSize`) with what js/runtime/memory64.js modelBytes()
 * counts for a model whose header is not read yet, against the engine's own threshold
 * (chooseMemory: WASM32_FIT of wasm32's 4 GB). The KV cache is not known before the header: a
 * model just under the threshold may still need memory64 at load, where the engine decides with
 * the header. `support`: memory64Support() (tests pass another).
 * @returns {{memory64: boolean, bytes: number|null, refused: string|null}} refused: why this
 *   runtime cannot load it (no memory64), or null.
 */
export function memoryPlan(entry, support = memory64Support()) {
  const bytes = entry.size ?? entry.listedSize ?? null;
  const extra = (entry.tokenizer?.size ?? 0) + (entry.mmproj?.size ?? entry.mmproj?.listedSize ?? 0);
  const memory64 = bytes !== null && modelBytes(bytes + extra, null).total > WASM32_BYTES * WASM32_FIT;
  const refused = memory64 && !support.ok
    ? `${entry.id} needs 64-bit memory (WebAssembly memory64: its ${(bytes / 1e9).toFixed(1)} GB file is more than ` +
      `the 4 GB a wasm32 instance holds), and ${support.why.replace(/^this runtime/, 'this browser')}. ` +
      'Nothing was downloaded: choose a model under 4 GB, or open this page in a browser with memory64.'
    : null;
  return { memory64, bytes, refused };
}

/** The plan for a manifest entry; `memory64` and `refused` as memoryPlan() says; `nCtx` the
 *  entry's context length for the page (null: the model's own). */
export function planFromEntry(entry) {
  const part = (spec, stage) => ({
    stage,
    name: spec.file,
    candidates: [localCopy(spec.file), spec.url].filter(Boolean),
    sha256: spec.sha256 || null,
    size: spec.size ?? null,
    verified: Boolean(spec.sha256) && spec.verified !== false,
  });
  const parts = [part(entry, 'model')];
  if (entry.tokenizer) parts.push(part(entry.tokenizer, 'tokenizer'));
  if (entry.mmproj) parts.push(part(entry.mmproj, 'mmproj')); // a vision model's projector
  const { memory64, refused } = memoryPlan(entry);
  return { label: entry.id, entryId: entry.id, parts, verified: parts.every((p) => p.verified), memory64, refused,
    nCtx: entry.nCtx ?? null };
}

/** llama.cpp's split GGUF part names (gguf-split): PREFIX-00001-of-00003.gguf. */
const SPLIT_NAME = /-(\d{5})-of-(\d{5})\.gguf$/;

/** A split GGUF's parts are stages 'model', 'model 2', 'model 3', …: one progress line each,
 *  handed to engine.load() as one list (js/models/split.js merges them). */
const modelStage = (i) => (i ? `model ${i + 1}` : 'model');

/** The plan for URLs typed into the page (no checksum to check). Several model URLs (separated
 *  by spaces), or the first part of a split GGUF (…-00001-of-0000N.gguf: the others are beside
 *  it), are the parts of one split model. */
export function planFromUrls(modelUrl, tokenizerUrl) {
  const part = (url, stage) => ({
    stage, name: fileName(url), candidates: [new URL(url, document.baseURI).href], sha256: null, size: null, verified: false,
  });
  let urls = String(modelUrl).trim().split(/\s+/);
  const m = urls.length === 1 && SPLIT_NAME.exec(new URL(urls[0], document.baseURI).pathname);
  if (m && Number(m[1]) === 1 && Number(m[2]) > 1) {
    urls = Array.from({ length: Number(m[2]) }, (_, i) =>
      urls[0].replace(/-00001-of-(\d{5})\.gguf/, `-${String(i + 1).padStart(5, '0')}-of-$1.gguf`));
  }
  const parts = urls.map((u, i) => part(u, modelStage(i)));
  if (tokenizerUrl) parts.push(part(tokenizerUrl, 'tokenizer'));
  return { label: fileName(urls[0]) + (urls.length > 1 ? ` (+${urls.length - 1} parts)` : ''), parts, verified: false, fromUrl: true };
}

/** The plan for local files: the model (a File, or a split GGUF's parts), a tokenizer when
 *  the model needs one, and a vision model's mmproj GGUF (or null). */
export function planFromFiles(model, tokenizer, mmproj = null) {
  const files = Array.isArray(model) ? model : [model];
  const parts = files.map((f, i) => ({ stage: modelStage(i), name: f.name, file: f }));
  if (tokenizer) parts.push({ stage: 'tokenizer', name: tokenizer.name, file: tokenizer });
  if (mmproj) parts.push({ stage: 'mmproj', name: mmproj.name, file: mmproj });
  const label = files[0].name + (files.length > 1 ? ` (+${files.length - 1} parts)` : '') + (mmproj ? ` + ${mmproj.name}` : '');
  return { label, parts, verified: true, local: true };
}

/** The model data of a plan's fetched parts (fetchPart results, in the plan's order): one
 *  part's data, or the list of a split GGUF's. */
export function modelData(plan, fetched) {
  const data = fetched.filter((_, i) => plan.parts[i].stage.startsWith('model')).map((f) => f.data);
  return data.length === 1 ? data[0] : data;
}

/** The GGUF header's bytes read to find general.architecture: at most this much (a key that
 *  comes after a large vocabulary array is not looked for past it). */
const GGUF_HEAD_MAX = 64 << 20;

/**
 * general.architecture of a GGUF file (a File or Blob) from its header, or null when the
 * header is not a GGUF v2/v3 one, is malformed, or does not have the key (within
 * GGUF_HEAD_MAX bytes). Reads the key/value section as src/gguf.c does: after the magic, the
 * version (u32), the tensor count (u64) and the key count (u64), each key a u64-length string,
 * a u32 type and the value (arrays: an element type, a u64 count, the elements). Never throws.
 */
export async function ggufArchitecture(file) {
  const SIZES = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
  const STRING = 8, ARRAY = 9;
  class Short extends Error {}
  for (let want = 64 << 10; ; want *= 4) {
    const n = Math.min(want, file.size, GGUF_HEAD_MAX);
    const dv = new DataView(await file.slice(0, n).arrayBuffer());
    let o = 0;
    const need = (k) => { if (o + k > dv.byteLength) throw new Short(); };
    const u32 = () => { need(4); o += 4; return dv.getUint32(o - 4, true); };
    const u64 = () => { need(8); o += 8; const v = dv.getBigUint64(o - 8, true); if (v > BigInt(GGUF_HEAD_MAX)) throw new RangeError('length'); return Number(v); };
    const str = () => { const len = u64(); need(len); o += len; return new TextDecoder().decode(new Uint8Array(dv.buffer, o - len, len)); };
    const skip = (type) => {
      if (type === STRING) { const len = u64(); need(len); o += len; return; }
      if (type === ARRAY) {
        const t = u32();
        const count = u64();
        if (SIZES[t]) { need(count * SIZES[t]); o += count * SIZES[t]; } else for (let i = 0; i < count; i++) skip(t);
        return;
      }
      if (!SIZES[type]) throw new RangeError('type');
      need(SIZES[type]);
      o += SIZES[type];
    };
    try {
      if (u32() !== 0x46554747) return null; // "GGUF"
      const version = u32();
      if (version !== 2 && version !== 3) return null;
      u64(); // tensors
      const nKv = u64();
      for (let i = 0; i < nKv; i++) {
        const key = str();
        const type = u32();
        if (key === 'general.architecture') return type === STRING ? str() : null;
        skip(type);
      }
      return null;
    } catch (err) {
      if (!(err instanceof Short) || n >= file.size || n >= GGUF_HEAD_MAX) return null;
    }
  }
}

/**
 * What a local file looks like from its first 28 bytes: 'gguf' (GGUF magic; 'mmproj' when its
 * header's general.architecture is "clip": a vision model's projector, as src/vision/mmproj.c
 * recognises one), 'checkpoint' (a
 * plausible llama2.c header: dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size,
 * seq_len), 'tokenizer' (a llama2.c tokenizer.bin starts with a small max_token_length and a
 * float score), else 'unknown' (the engine will say what is wrong with it).
 */
export async function classifyFile(file) {
  const head = new DataView(await file.slice(0, 28).arrayBuffer());
  if (head.byteLength >= 4 && head.getUint32(0, true) === 0x46554747) { // "GGUF"
    return await ggufArchitecture(file) === 'clip' ? 'mmproj' : 'gguf';
  }
  if (head.byteLength < 12) return 'unknown';
  const h = Array.from({ length: Math.floor(head.byteLength / 4) }, (_, i) => head.getInt32(i * 4, true));
  if (h.length === 7) {
    const [dim, hidden, layers, heads, kvHeads, vocab, seq] = h;
    if (dim > 0 && dim <= 65536 && hidden > 0 && layers > 0 && layers <= 1024 && heads > 0 &&
        dim % heads === 0 && kvHeads > 0 && heads % kvHeads === 0 && vocab !== 0 &&
        Math.abs(vocab) <= 1 << 20 && seq > 0 && seq <= 1 << 20) return 'checkpoint';
  }
  const maxLen = h[0];
  const firstLen = h[2];
  if (maxLen > 0 && maxLen <= 1024 && firstLen > 0 && firstLen <= maxLen) return 'tokenizer';
  return 'unknown';
}

/**
 * Fetches one part: a local file as it is; otherwise the first candidate URL found in the cache,
 * else a download from the candidates in order (an HTTP error moves on to the next one; the last
 * candidate's error is thrown). onProgress gets {loaded, total, bytesPerSec, from}.
 * A download of a file the manifest says is at most BYTES_MAX comes as a Uint8Array (no Blob:
 * the browser would copy it into its own process, and the worker engine read it back from
 * there, before the first token); the Blob that Cache Storage needs is made when it is saved.
 * @returns {Promise<{data: Blob|Uint8Array, size: number, url?: string, from: string,
 *   fromCache: boolean, save?: () => Promise<{stored: boolean, reason?: string, error?: Error}>}>}
 */
export function fetchPart(part, { onProgress, signal } = {}) {
  const early = !part.file && prefetched.get(partKey(part));
  if (early) {
    prefetched.delete(partKey(part)); // one caller adopts a prefetch
    return early.adopt({ onProgress, signal });
  }
  if (part.file) return fetchPartNow(part, { onProgress, signal });
  // Registered while it runs, so that a prefetch() of the same part started meanwhile (the page's
  // first script, when the page's own modules got here first) does not download it again.
  const key = partKey(part);
  const promise = fetchPartNow(part, { onProgress, signal });
  inFlight.add(key);
  promise.then(() => inFlight.delete(key), () => inFlight.delete(key));
  return promise;
}

/** Files up to this size (bytes, as the manifest gives it) are downloaded into memory, not a Blob. */
export const BYTES_MAX = 64 << 20;

/** The published model the page opens with: the page URL's ?model= when the manifest has it,
 *  else DEFAULT_MODEL, else the manifest's first entry. */
export const DEFAULT_MODEL = 'stories260K';
export function defaultEntry(models, search = globalThis.location?.search ?? '') {
  const wanted = new URLSearchParams(search).get('model');
  return models.find((m) => m.id === wanted) ?? models.find((m) => m.id === DEFAULT_MODEL) ?? models[0];
}

/** Prefetches started by prefetch() and not yet adopted, by part (first candidate, checksum). */
const prefetched = new Map();
const partKey = (part) => `${part.candidates?.[0]}\n${part.sha256 ?? ''}`;
/** Parts fetchPart() is fetching now without a prefetch (a prefetch of them is not started). */
const inFlight = new Set();

/**
 * Starts fetching a plan's parts now (Cache Storage lookup, else the download), before the
 * page asks for them: index.html's first script calls it for the default model, so the model
 * downloads while the page's own modules load. The first fetchPart() of the same part adopts
 * the fetch in flight: it gets the progress so far and from then on, and its signal aborts it.
 * A prefetch nobody adopts is simply dropped (never an unhandled rejection).
 */
export function prefetch(plan) {
  if (plan.refused) return; // this browser cannot run it: nothing is downloaded
  for (const part of plan.parts) {
    if (part.file || prefetched.has(partKey(part)) || inFlight.has(partKey(part))) continue;
    const controller = new AbortController();
    let last = null;
    let listener = null;
    const promise = fetchPartNow(part, {
      signal: controller.signal,
      onProgress: (p) => { last = p; listener?.(p); },
    });
    promise.catch(() => {});
    prefetched.set(partKey(part), {
      adopt({ onProgress, signal }) {
        if (signal?.aborted) controller.abort(signal.reason);
        signal?.addEventListener('abort', () => controller.abort(signal.reason), { once: true });
        listener = onProgress ?? null;
        if (last) listener?.(last);
        return promise;
      },
    });
  }
}

async function fetchPartNow(part, { onProgress, signal }) {
  if (part.file) {
    onProgress?.({ loaded: part.file.size, total: part.file.size, bytesPerSec: 0, from: 'a local file' });
    return { data: part.file, size: part.file.size, from: 'a local file', fromCache: false };
  }
  if (await useStore(part)) {
    for (const url of part.candidates) {
      const hit = await store.get(url, { sha256: part.sha256 }).catch(() => null);
      if (hit) {
        onProgress?.({ loaded: hit.size, total: hit.size, bytesPerSec: 0, from: 'the browser cache' });
        return { data: hit.blob, size: hit.size, url, from: 'the browser cache', fromCache: true };
      }
    }
    return downloadPart(part, { onProgress, signal });
  }
  // The candidates are looked up together (the first found, in order, is taken). On a profile
  // where this page never stored a file (neverStored()) the download starts beside the lookup
  // instead of after it: a fresh profile's Cache Storage answers its first match ~100 ms late,
  // which was on the critical path of a cold load (docs/how-it-works.md, ttft5). Should the lookup
  // hit after all (another page of this origin stored it), the download is aborted.
  const lookup = Promise.all(part.candidates.map((url) => cache.match(url, { sha256: part.sha256 })));
  let early = null;
  if (cache.available && neverStored()) {
    const controller = new AbortController();
    const onAbort = () => controller.abort(signal.reason);
    if (signal?.aborted) onAbort(); else signal?.addEventListener('abort', onAbort, { once: true });
    early = { controller, promise: downloadPart(part, { onProgress, signal: controller.signal }) };
    early.promise.catch(() => {}).finally(() => signal?.removeEventListener('abort', onAbort));
  }
  let hits;
  try {
    hits = await lookup;
  } catch (err) {
    if (!early) throw err;
    hits = [];
  }
  for (let i = 0; i < hits.length; i++) {
    const hit = hits[i];
    const url = part.candidates[i];
    if (hit) {
      early?.controller.abort();
      onProgress?.({ loaded: hit.size, total: hit.size, bytesPerSec: 0, from: 'the browser cache' });
      return { data: hit, size: hit.size, url, from: 'the browser cache', fromCache: true };
    }
  }
  return early ? early.promise : downloadPart(part, { onProgress, signal });
}

/** localStorage's note that this page stored a model file in Cache Storage on this profile. */
const STORED_KEY = 'wasmlm-demo:stored';

/** True when this profile has no note that the page ever stored a file (see fetchPartNow). */
function neverStored() {
  try {
    return globalThis.localStorage?.getItem(STORED_KEY) === null;
  } catch {
    return false; // storage blocked: look up first, as before
  }
}

function noteStored() {
  try { globalThis.localStorage?.setItem(STORED_KEY, '1'); } catch { /* blocked: no hint */ }
}

/** Downloads a part from its candidates in order (an HTTP error moves on to the next). */
async function downloadPart(part, { onProgress, signal }) {
  for (let i = 0; i < part.candidates.length; i++) {
    const url = part.candidates[i];
    const from = describeOrigin(url);
    try {
      if (await useStore(part)) {
        // Stored while it streams (resumable, verified); a file the engine then refuses is
        // deleted again (discard()). The browser is asked once to keep the storage (Firefox shows
        // a prompt; Chromium decides by itself) — large files are costly to download again.
        store.persist({ reason: 'large model files stay when the disk runs low' }).catch(() => {});
        const m = await store.download(url, {
          sha256: part.sha256, size: part.size, name: part.name, signal,
          onProgress: (p) => onProgress?.({ ...p, total: p.total || part.size || 0, from }),
        });
        noteStored();
        return {
          data: m.blob, size: m.size, url, from, fromCache: m.fromCache,
          save: async () => ({ stored: true }),
          discard: m.fromCache ? undefined : () => store.delete(url),
        };
      }
      const data = await download(url, {
        sha256: part.sha256,
        size: part.size,
        signal,
        httpCache: cache.available ? 'no-store' : undefined,
        onProgress: (p) => onProgress?.({ ...p, total: p.total || part.size || 0, from }),
        as: part.size != null && part.size <= BYTES_MAX ? 'bytes' : 'blob',
      });
      return {
        data, size: data.size ?? data.byteLength, url, from, fromCache: false,
        save: async () => {
          const r = await cache.put(url, data instanceof Blob ? data : new Blob([data]), { sha256: part.sha256, name: part.name });
          if (r.stored) noteStored();
          return r;
        },
      };
    } catch (err) {
      const last = i === part.candidates.length - 1;
      if (last || !(err?.code === 'WLM_ERR_IO' && err.httpStatus)) throw err;
    }
  }
  throw new Error(`${part.name}: no URL to load it from`);
}

/** The largest image file the chat takes (bytes): its data: URL travels with every later turn. */
export const IMAGE_BYTES_MAX = 32 << 20;

/**
 * Checks an image file before it is attached to a chat message: at most IMAGE_BYTES_MAX bytes,
 * a declared size (PNG / JPEG header, js/vision/vision.js imageHeader) within the engine's limits
 * (IMAGE_MAX_SIDE a side, IMAGE_MAX_PIXELS in all), and decodable by this browser
 * (createImageBitmap, as the engine decodes it). Resolves to {width, height}; rejects with an
 * Error whose message says what is wrong, naming the file.
 */
export async function checkImageFile(file) {
  const name = file.name || 'the image';
  const tooBig = (w, h) => w > IMAGE_MAX_SIDE || h > IMAGE_MAX_SIDE || w * h > IMAGE_MAX_PIXELS;
  if (file.size > IMAGE_BYTES_MAX) {
    throw new Error(`${name} is too large: ${(file.size / 2 ** 20).toFixed(1)} MiB, over the ${IMAGE_BYTES_MAX / 2 ** 20} MiB an attached image may have`);
  }
  if (file.size === 0) throw new Error(`${name} is empty`);
  let head;
  try {
    head = imageHeader(new Uint8Array(await file.arrayBuffer()), name);
  } catch (err) {
    throw new Error(`${name} cannot be decoded: ${err.message.replace(`${name}: `, '')}`, { cause: err });
  }
  if (head.format && tooBig(head.width, head.height)) {
    throw new Error(`${name} is too large: ${head.width}×${head.height} pixels, over the limit of ${IMAGE_MAX_SIDE} a side and ${IMAGE_MAX_PIXELS} in all`);
  }
  let bitmap;
  try {
    bitmap = await createImageBitmap(file);
  } catch (err) {
    throw new Error(`${name} cannot be decoded as an image by this browser (${file.type || 'unknown type'})`, { cause: err });
  }
  const { width, height } = bitmap;
  bitmap.close();
  if (tooBig(width, height)) {
    throw new Error(`${name} is too large: ${width}×${height} pixels, over the limit of ${IMAGE_MAX_SIDE} a side and ${IMAGE_MAX_PIXELS} in all`);
  }
  return { width, height };
}

/** A file's bytes as a data: URL (an OpenAI image_url part's url). */
export function dataUrl(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => reject(reader.error ?? new Error(`cannot read ${file.name}`));
    reader.readAsDataURL(file);
  });
}
