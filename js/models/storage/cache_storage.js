// storage/cache_storage.js — the model store's backend where OPFS is missing but Cache Storage
// exists: the same layout as storage/opfs.js (metadata and numbered segments), as entries of one
// Cache Storage bucket under synthetic URLs. A segment is kept in memory until it is complete
// (Cache.put takes a whole Response): that bounds the page's memory at one segment.

export const STORE_BUCKET = 'wasmlm-store-v1';
const BASE = 'https://wasmlm.store/';

const metaUrl = (key) => `${BASE}${key}/meta.json`;
const segUrl = (key, i) => `${BASE}${key}/${String(i).padStart(6, '0')}.bin`;

export function cacheStorageAvailable(caches = globalThis.caches) {
  return typeof caches?.open === 'function';
}

export class CacheStorageBackend {
  kind = 'cache';
  #caches;
  #name;

  constructor(caches = globalThis.caches, name = STORE_BUCKET) {
    this.#caches = caches;
    this.#name = name;
  }

  #open() { return this.#caches.open(this.#name); }

  async readMeta(key) {
    const res = await (await this.#open()).match(metaUrl(key));
    if (!res) return null;
    try { return JSON.parse(await res.text()); } catch { return null; }
  }

  async writeMeta(key, meta) {
    await (await this.#open()).put(metaUrl(key), new Response(JSON.stringify(meta), { headers: { 'Content-Type': 'application/json' } }));
  }

  async keys() {
    const out = [];
    for (const req of await (await this.#open()).keys()) {
      const m = /^https:\/\/wasmlm\.store\/([^/]+)\/meta\.json$/.exec(req.url);
      if (m) out.push(m[1]);
    }
    return out;
  }

  async openSegment(key, index) {
    const chunks = [];
    return {
      write: async (bytes) => { chunks.push(bytes.slice()); },
      close: async () => {
        const blob = new Blob(chunks);
        chunks.length = 0;
        await (await this.#open()).put(segUrl(key, index),
          new Response(blob, { headers: { 'Content-Length': String(blob.size) } }));
      },
      abort: async () => { chunks.length = 0; },
    };
  }

  async segmentSizes(key, n) {
    const cache = await this.#open();
    const out = [];
    for (let i = 0; i < n; i++) {
      const res = await cache.match(segUrl(key, i));
      const len = Number(res?.headers.get('content-length'));
      out.push(!res ? -1 : Number.isSafeInteger(len) ? len : (await res.blob()).size);
    }
    return out;
  }

  async blob(key, n) {
    const cache = await this.#open();
    const parts = [];
    for (let i = 0; i < n; i++) parts.push(await (await cache.match(segUrl(key, i))).blob());
    return new Blob(parts, { type: 'application/octet-stream' });
  }

  async truncate(key, index) {
    const cache = await this.#open();
    for (const req of await cache.keys()) {
      const m = new RegExp(`^${BASE.replace(/[.]/g, '\\.')}${key}/(\\d{6})\\.bin$`).exec(req.url);
      if (m && Number(m[1]) >= index) await cache.delete(req);
    }
  }

  async remove(key) {
    const cache = await this.#open();
    let any = false;
    for (const req of await cache.keys()) {
      if (req.url.startsWith(`${BASE}${key}/`)) any = (await cache.delete(req)) || any;
    }
    return any;
  }
}
