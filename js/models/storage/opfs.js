// storage/opfs.js — the Origin Private File System backend of the model store (js/models/storage/store.js):
// one directory per stored file, holding meta.json (what is known of the file: see store.js) and
// its bytes as numbered segment files (000000.bin, 000001.bin, …). Each segment is written with
// one createWritable() stream from the network and committed by close(): what a reload or a
// closed tab keeps is every committed segment, and the metadata written after each commit says
// how many bytes that is. Segments, not one file, because a writable stream commits only on
// close() and reopening one with keepExistingData copies the whole file (Chromium) — O(n²) for
// checkpoints of a multi-GB file. The stored file is read back as one Blob of the segment Files
// (never in memory).
//
// Where a worker can be started and has createSyncAccessHandle() (Chromium 102+, Firefox 111+,
// Safari 15.2+), segments are written there instead (opfs_worker.js): in place, without
// createWritable()'s swap file and commit, each chunk copied once into a buffer that travels to
// the worker and back. `sync: false` keeps createWritable().

const DIR = 'wasmlm-models';
const META = 'meta.json';

const segName = (i) => `${String(i).padStart(6, '0')}.bin`;

/**
 * `bytes` as a view that spans its whole buffer (a copy when it does not). WebKit's
 * FileSystemWritableFileStream.write() writes a view's whole backing ArrayBuffer, ignoring its
 * byteOffset and byteLength (Safari, WebKitGTK 2.50: a store's file became every step buffer in
 * full; the same bug reported by mediabunny#459 and wa-sqlite#344, 2026): every write in OPFS is
 * handed a buffer that holds exactly its bytes.
 */
export function exactBytes(bytes) {
  return bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength ? bytes : bytes.slice();
}

/** Whether this realm has OPFS with writable streams (Chromium 86+, Firefox 111+, Safari 26+). */
export function opfsAvailable(storage = globalThis.navigator?.storage) {
  return typeof storage?.getDirectory === 'function' &&
    typeof globalThis.FileSystemFileHandle?.prototype?.createWritable === 'function';
}

/** The page's side of opfs_worker.js: one worker, started on first use; null where it cannot
 *  start or has no createSyncAccessHandle. */
let syncWorker = null;

function startSyncWorker() {
  syncWorker ??= (async () => {
    if (typeof Worker !== 'function') return null;
    let worker;
    try {
      worker = new Worker(new URL('./opfs_worker.js', import.meta.url), { type: 'module', name: 'wasmlm-opfs' });
    } catch {
      return null;
    }
    const pending = new Map();
    let next = 1;
    let dead = null;
    const fail = (why) => {
      dead = why;
      for (const { reject } of pending.values()) reject(why);
      pending.clear();
    };
    worker.onmessage = ({ data }) => {
      const p = pending.get(data.id);
      if (!p) return;
      pending.delete(data.id);
      if (data.ok === false && data.name) p.reject(new DOMException(data.message, data.name));
      else p.resolve(data);
    };
    worker.onerror = (e) => { e.preventDefault?.(); fail(new Error(`the OPFS worker failed: ${e.message ?? 'it did not start'}`)); };
    const call = (msg, transfer = []) => new Promise((resolve, reject) => {
      if (dead) { reject(dead); return; }
      const id = next++;
      pending.set(id, { resolve, reject });
      worker.postMessage({ ...msg, id }, transfer);
    });
    const probe = await Promise.race([call({ op: 'probe' }).then((d) => d.ok, () => false),
      new Promise((r) => setTimeout(() => r(false), 10_000))]);
    if (!probe) { worker.terminate(); return null; }
    const buffers = []; // spare buffers, back from the worker
    let handles = 0;
    return {
      async open(key, name) {
        const handle = ++handles;
        await call({ op: 'open', handle, key, name });
        return {
          copies: true, // write() copies the bytes before it returns its promise
          async write(bytes) {
            let buf = buffers.pop();
            if (!buf || buf.byteLength < bytes.byteLength) buf = new ArrayBuffer(Math.max(bytes.byteLength, 1 << 20));
            new Uint8Array(buf, 0, bytes.byteLength).set(bytes);
            const back = await call({ op: 'write', handle, buffer: buf, length: bytes.byteLength }, [buf]);
            if (buffers.length < 4) buffers.push(back.buffer);
          },
          close: () => call({ op: 'close', handle }).then(() => {}),
          abort: () => call({ op: 'abort', handle }).then(() => {}, () => {}),
        };
      },
    };
  })();
  return syncWorker;
}

export class OpfsBackend {
  kind = 'opfs';
  #root;
  #dir = null;
  #sync;

  /**
   * @param {{getDirectory: () => Promise<FileSystemDirectoryHandle>}} storage
   * @param {{sync?: boolean}} [options]  sync: write through the worker's sync access handles
   *   where possible (default true)
   */
  constructor(storage = globalThis.navigator.storage, { sync = true } = {}) {
    this.#root = storage;
    this.#sync = sync && typeof globalThis.document !== 'undefined'; // (a worker itself: createWritable)
  }

  /** Whether segments go through the sync-access-handle worker ('sync') or createWritable(). */
  async writer() {
    return this.#sync && await startSyncWorker() ? 'sync' : 'stream';
  }

  async #top() {
    this.#dir ??= (async () => (await this.#root.getDirectory()).getDirectoryHandle(DIR, { create: true }))();
    return this.#dir;
  }

  async #entry(key, create = false) {
    try {
      return await (await this.#top()).getDirectoryHandle(key, { create });
    } catch (e) {
      if (!create && e?.name === 'NotFoundError') return null;
      throw e;
    }
  }

  async readMeta(key) {
    const dir = await this.#entry(key);
    if (!dir) return null;
    try {
      const file = await (await dir.getFileHandle(META)).getFile();
      return JSON.parse(await file.text());
    } catch {
      return null; // no metadata (a crash before the first write) or unreadable: not stored
    }
  }

  async writeMeta(key, meta) {
    const dir = await this.#entry(key, true);
    const w = await (await dir.getFileHandle(META, { create: true })).createWritable();
    await w.write(JSON.stringify(meta));
    await w.close();
  }

  async keys() {
    const out = [];
    for await (const [name, handle] of (await this.#top()).entries()) if (handle.kind === 'directory') out.push(name);
    return out;
  }

  /** A writer for segment `index`: {write(bytes), close() (commits), abort() (discards),
   *  copies (whether write() is done with the bytes when it returns: the caller may reuse them
   *  before the promise settles)}. */
  async openSegment(key, index) {
    const worker = this.#sync ? await startSyncWorker() : null;
    if (worker) return worker.open(key, segName(index)); // (the worker makes the directory)
    const dir = await this.#entry(key, true);
    const w = await (await dir.getFileHandle(segName(index), { create: true })).createWritable();
    return {
      write: (bytes) => w.write(exactBytes(bytes)),
      close: () => w.close(),
      abort: () => w.abort().catch(() => {}),
    };
  }

  /** The committed sizes of segments 0 … n-1 (−1 for a missing one). */
  async segmentSizes(key, n) {
    const dir = await this.#entry(key);
    const out = [];
    for (let i = 0; i < n; i++) {
      try {
        out.push((await (await dir.getFileHandle(segName(i))).getFile()).size);
      } catch {
        out.push(-1);
      }
    }
    return out;
  }

  /** The file as one Blob of its `n` segments. */
  async blob(key, n) {
    const dir = await this.#entry(key);
    const parts = [];
    for (let i = 0; i < n; i++) parts.push(await (await dir.getFileHandle(segName(i))).getFile());
    return new Blob(parts, { type: 'application/octet-stream' });
  }

  /** Deletes segments from `index` on (a restart: index 0). */
  async truncate(key, index) {
    const dir = await this.#entry(key);
    if (!dir) return;
    for await (const name of dir.keys()) {
      const m = /^(\d{6})\.bin$/.exec(name);
      if (m && Number(m[1]) >= index) await dir.removeEntry(name).catch(() => {});
    }
  }

  async remove(key) {
    try {
      await (await this.#top()).removeEntry(key, { recursive: true });
      return true;
    } catch (e) {
      if (e?.name === 'NotFoundError') return false;
      throw e;
    }
  }
}
