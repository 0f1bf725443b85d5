// tools/synth/synthesize.mjs — synthesize (a file in any type: writeF32, writeQuantized, or the
// two-step route through the native CLI's `wasmlm quantize`), and the cache of synthesized files
// the tests use (SYNTH_CACHE, synthCached, synthArgs).

import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { writeQuantized } from './quantize.mjs';
import { writeF32 } from './write.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/**
 * Writes `out` in `type`: F32 directly; others by writeQuantized, or with `twoStep` as before
 * (the F32 file FILE.f32.tmp, then `wasmlm quantize` of the native CLI, the check of the direct
 * path).
 */
export function synthesize({ arch, shape = 'tiny', out, seed = 1, type = 'F32', twoStep = false, cli = process.env.WASMLM_CLI || path.join(ROOT, 'build/native/wasmlm') }) {
  if (type === 'F32') return writeF32(arch, shape, out, { seed });
  if (!twoStep) return writeQuantized(arch, shape, out, { seed, type });
  const src = `${out}.f32.tmp`;
  if (!fs.existsSync(cli)) throw new Error(`${cli} missing: build it (cmake --build build/native) or set WASMLM_CLI`);
  const m = writeF32(arch, shape, src, { seed });
  try {
    const r = spawnSync(cli, ['quantize', src, out, type], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`wasmlm quantize ${type} failed (exit ${r.status}):\n${r.stderr}`);
  } finally { fs.rmSync(src, { force: true }); }
  return m;
}

/** Where synthCached() keeps files (under build/, so `git clean` and CI caches see them). */
export const SYNTH_CACHE = path.join(ROOT, 'build/synth');

/**
 * The file for these arguments under `dir`, written if missing (or when `sha256` is given and
 * the cached file differs: a stale cache after a synthesizer change). Returns its path.
 */
export function synthCached({ arch, shape = 'tiny', seed = 1, type = 'F32', sha256 = null, cli, twoStep = false }, dir = SYNTH_CACHE) {
  const out = path.join(dir, `${arch}-${shape}-s${seed}-${type}.gguf`);
  const hash = (f) => { // in 64 MB slices: readFileSync stops at 2 GiB
    const h = createHash('sha256'), buf = Buffer.alloc(64 << 20), fd = fs.openSync(f, 'r');
    try { for (let n; (n = fs.readSync(fd, buf, 0, buf.length, null)) > 0;) h.update(buf.subarray(0, n)); } finally { fs.closeSync(fd); }
    return h.digest('hex');
  };
  if (fs.existsSync(out) && (!sha256 || hash(out) === sha256)) return out;
  synthesize({ arch, shape, seed, type, out, twoStep, ...(cli ? { cli } : {}) });
  return out;
}

/** The command line that re-creates a file (recorded with the oracle's outputs). */
export function synthArgs({ arch, shape = 'tiny', seed = 1, type = 'F32' }) {
  return ['--arch', arch, '--shape', shape, '--seed', String(seed), '--type', type];
}
