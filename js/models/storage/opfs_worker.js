// storage/opfs_worker.js — the worker behind storage/opfs.js's synchronous writer: OPFS files
// written through createSyncAccessHandle(), which only workers have. Writes go straight into the
// file (no swap file and no commit on close, as with createWritable()), so a segment costs no
// copy and its buffers come back to the page to be reused. Messages: {id, op: 'open', handle,
// key, name} | {id, op: 'write', handle, buffer, length} (the buffer is transferred and sent back)
// | {id, op: 'close' | 'abort', handle} | {id, op: 'probe'}; each is answered {id, ok, buffer?} or
// {id, ok: false, name, message}.

const DIR = 'wasmlm-models';
const handles = new Map(); // handle id → {h: FileSystemSyncAccessHandle, at}
let top = null;

async function open({ handle, key, name }) {
  top ??= await (await navigator.storage.getDirectory()).getDirectoryHandle(DIR, { create: true });
  const file = await (await top.getDirectoryHandle(key, { create: true })).getFileHandle(name, { create: true });
  // Exclusive: a page that is going away may still hold it for a moment.
  let h;
  for (let tries = 0; ; tries++) {
    try {
      h = await file.createSyncAccessHandle();
      break;
    } catch (e) {
      if (e?.name !== 'NoModificationAllowedError' || tries >= 30) throw e;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  h.truncate(0);
  handles.set(handle, { h, at: 0 });
}

/** Whether a sync access handle opens here: the method can exist and still refuse (WebKitGTK
 *  with OPFS switched on: NotSupportedError), and then the page writes with createWritable(). */
async function probe() {
  if (typeof FileSystemFileHandle?.prototype?.createSyncAccessHandle !== 'function') return false;
  try {
    top ??= await (await navigator.storage.getDirectory()).getDirectoryHandle(DIR, { create: true });
    const name = `.probe-${Math.random().toString(36).slice(2)}`;
    const file = await top.getFileHandle(name, { create: true });
    try {
      (await file.createSyncAccessHandle()).close();
    } finally {
      await top.removeEntry(name).catch(() => {});
    }
    return true;
  } catch {
    return false;
  }
}

self.onmessage = async ({ data }) => {
  const { id, op, handle } = data;
  try {
    if (op === 'probe') {
      self.postMessage({ id, ok: await probe() });
      return;
    }
    if (op === 'open') {
      await open(data);
      self.postMessage({ id, ok: true });
      return;
    }
    const e = handles.get(handle);
    if (!e) throw new Error(`no open file ${handle}`);
    if (op === 'write') {
      // A view that spans its buffer, a copy when shorter (storage/opfs.js's exactBytes: WebKit
      // writes a view's whole buffer).
      const bytes = data.length === data.buffer.byteLength ? new Uint8Array(data.buffer) : new Uint8Array(data.buffer).slice(0, data.length);
      for (let done = 0; done < bytes.byteLength;) {
        const n = e.h.write(bytes.subarray(done), { at: e.at });
        if (n <= 0) throw new Error('the file took no bytes');
        done += n;
        e.at += n;
      }
      self.postMessage({ id, ok: true, buffer: data.buffer }, [data.buffer]);
      return;
    }
    if (op === 'close' || op === 'abort') {
      handles.delete(handle);
      if (op === 'close') e.h.flush();
      e.h.close();
      self.postMessage({ id, ok: true });
      return;
    }
    throw new Error(`unknown op ${op}`);
  } catch (err) {
    self.postMessage({ id, ok: false, name: err?.name ?? 'Error', message: String(err?.message ?? err) });
  }
};
