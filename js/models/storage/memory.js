// storage/memory.js — the model store's backend where nothing persists (Node; a browser without
// OPFS or Cache Storage): segments are Blobs in a Map, so the download logic is the same
// everywhere and a file still never sits in one JS buffer.

export class MemoryBackend {
  kind = 'memory';
  #entries = new Map(); // key → {meta, segs: Blob[]}

  #get(key) {
    let e = this.#entries.get(key);
    if (!e) { e = { meta: null, segs: [] }; this.#entries.set(key, e); }
    return e;
  }

  async readMeta(key) { const m = this.#entries.get(key)?.meta; return m ? structuredClone(m) : null; }
  async writeMeta(key, meta) { this.#get(key).meta = structuredClone(meta); }
  async keys() { return [...this.#entries.keys()].filter((k) => this.#entries.get(k).meta); }

  async openSegment(key, index) {
    const chunks = [];
    return {
      copies: true, // write() takes its copy before it returns
      write: async (bytes) => { chunks.push(bytes.slice()); },
      close: async () => { this.#get(key).segs[index] = new Blob(chunks); },
      abort: async () => {},
    };
  }

  async segmentSizes(key, n) {
    const segs = this.#entries.get(key)?.segs ?? [];
    return Array.from({ length: n }, (_, i) => segs[i]?.size ?? -1);
  }

  async blob(key, n) { return new Blob(this.#get(key).segs.slice(0, n), { type: 'application/octet-stream' }); }
  async truncate(key, index) { const e = this.#entries.get(key); if (e) e.segs.length = Math.min(e.segs.length, index); }
  async remove(key) { return this.#entries.delete(key); }
}
