// storage/integrity.js — sha256 computed while a download streams, with hash-wasm's incremental
// SHA-256 (https://github.com/Daninet/hash-wasm, FIPS 180-4): its state can be saved beside a
// partial file and loaded again, so a resumed download goes on hashing from where it stopped
// without reading the stored bytes back. Where a saved state cannot be loaded (another build of
// hash-wasm wrote it), rehash() reads the stored prefix back in chunks.

import { WasmlmError } from '../../runtime/errors.js';

/** Candidate URLs of hash-wasm's ES module when the bare specifier does not resolve (a page
 *  without an import map): this repository served as is, then an installed package. */
const FALLBACKS = [
  '../../../node_modules/hash-wasm/dist/index.esm.js',
  '../../../../hash-wasm/dist/index.esm.js',
];

let hashWasm = null;

/** Loads hash-wasm once per realm. @returns {Promise<{createSHA256: Function}>} */
export function loadHashWasm() {
  if (!hashWasm) {
    hashWasm = (async () => {
      try {
        return await import('hash-wasm');
      } catch (first) {
        for (const rel of FALLBACKS) {
          try {
            return await import(new URL(rel, import.meta.url).href);
          } catch { /* the next place */ }
        }
        hashWasm = null;
        throw new WasmlmError('downloads into storage need the package hash-wasm (npm install hash-wasm; ' +
          'in a page without a bundler, map it in an import map)', 'WLM_ERR_UNSUPPORTED', null, { cause: first });
      }
    })();
  }
  return hashWasm;
}

/** Bytes as base64 (a saved hash state in JSON metadata). */
export function toBase64(bytes) {
  let s = '';
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

/** base64 back to bytes. */
export function fromBase64(text) {
  const s = atob(text);
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
}

/**
 * An incremental SHA-256: update(bytes), state() (base64, for the metadata of a partial file),
 * hex() (the digest; ends the hasher), reset(). `state`: a saved state to resume; if it cannot be
 * loaded the hasher starts fresh and `resumed` is false (the caller then rehashes its prefix).
 */
export async function createHasher(state = null) {
  const { createSHA256 } = await loadHashWasm();
  const h = await createSHA256();
  h.init();
  let resumed = false;
  if (state) {
    try {
      h.load(fromBase64(state));
      resumed = true;
    } catch {
      h.init();
    }
  }
  return {
    resumed,
    update(bytes) { h.update(bytes); },
    state() { return toBase64(h.save()); },
    hex() { return h.digest('hex'); },
    reset() { h.init(); },
  };
}

/** Feeds the first `n` bytes of `blob` to `hasher`, 8 MB at a time (never the whole file in memory). */
export async function rehash(hasher, blob, n = blob.size) {
  const STEP = 8 << 20;
  for (let at = 0; at < n; at += STEP) {
    hasher.update(new Uint8Array(await blob.slice(at, Math.min(n, at + STEP)).arrayBuffer()));
  }
}

/** Hex sha256 of a Blob, read in chunks. */
export async function sha256OfBlob(blob) {
  const h = await createHasher();
  await rehash(h, blob);
  return h.hex();
}
