// storage/opfs.js — the Origin Private File System backend of the model store (js/storage/store.js):
// one directory per stored file, holding meta.json (what is known of the file: see store.js) and
// its bytes as numbered segment files (000000.bin, 000001.bin, …). Each segment is written with
// one createWritable() stream from the network and committed by close(): what a reload or a
// closed tab keeps is every committed segment, and the metadata written after each commit says
// how many bytes that is. Segments, not one file, because a writable stream commits only on
// close() and reopening one with keepExistingData copies the whole file (Chromium) — O(n²) for
// checkpoints of a multi-GB file. The stored file is read back as one Blob of the segment Files
// (never in memory).

const DIR = 'wasmlm-models';
const META = 'meta.json';

const segName = (i) => `${String(i).padStart(6, '0')}.bin`;

/** Whether this realm has OPFS with writable streams (Chromium 86+, Firefox 111+, Safari 26+). */
export function opfsAvailable(storage = globalThis.navigator?.storage) {
  return typeof storage?.getDirectory === 'function' &&
    typeof globalThis.FileSystemFileHandle?.prototype?.createWritable === 'function';
}

export class OpfsBackend {
  kind = 'opfs';
  #root;
  #dir = null;

  /** @param {{getDirectory: () => Promise<FileSystemDirectoryHandle>}} storage */
  constructor(storage = globalThis.navigator.storage) {
    this.#root = storage;
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

  /** A writer for segment `index`: {write(bytes), close() (commits), abort() (discards)}. */
  async openSegment(key, index) {
    const dir = await this.#entry(key, true);
    const w = await (await dir.getFileHandle(segName(index), { create: true })).createWritable();
    return {
      write: (bytes) => w.write(bytes),
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
