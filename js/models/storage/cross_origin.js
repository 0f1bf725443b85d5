// storage/cross_origin.js — the Cross-Origin Storage API (explainer: github.com/WICG/cross-origin-storage,
// navigator.crossOriginStorage.requestFileHandles([{algorithm: 'SHA-256', value}], {create})),
// where a browser exposes it: a published file pinned by its sha256 is stored once and serves
// every site that pins the same hash. The browser checks the hash itself; the user may be asked,
// and a refusal is a miss, never an error.

/** The API object, or null. */
export function crossOriginStorage(nav = globalThis.navigator) {
  const cos = nav?.crossOriginStorage;
  return typeof cos?.requestFileHandles === 'function' ? cos : null;
}

const hashOf = (sha256) => [{ algorithm: 'SHA-256', value: sha256.toLowerCase() }];

/** The file with this sha256 from cross-origin storage, or null (absent, refused, unsupported). */
export async function crossOriginGet(sha256, nav) {
  const cos = crossOriginStorage(nav);
  if (!cos || !sha256) return null;
  try {
    const [handle] = await cos.requestFileHandles(hashOf(sha256));
    return handle ? await handle.getFile() : null;
  } catch {
    return null;
  }
}

/** Stores a verified file under its sha256; resolves true if stored (never throws). */
export async function crossOriginPut(sha256, blob, nav) {
  const cos = crossOriginStorage(nav);
  if (!cos || !sha256) return false;
  try {
    const [handle] = await cos.requestFileHandles(hashOf(sha256), { create: true });
    const w = await handle.createWritable();
    await w.write(blob);
    await w.close();
    return true;
  } catch {
    return false;
  }
}
