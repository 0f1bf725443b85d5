// tools/synth/write.mjs — writing a description in F32: generate (a tensor's seeded values, a
// chunk of rows at a time), writeGguf (a GGUF streamed through ggufWrite), writeF32 and
// f32Tensors (a description's tensors as ggufWrite's F32 entries).

import fs from 'node:fs';
import path from 'node:path';
import { ggufWrite } from '../vocab_gguf.mjs';
import { describe } from './describe.mjs';
import { uniformStream } from './random.mjs';

export const CHUNK = 1 << 20; // floats per chunk

/**
 * The values of tensor `t` of a description, in order, in chunks of whole rows of ne[0] (at most
 * CHUNK floats, or one row): calls emit(Float32Array view, rows) per chunk; the view is reused.
 */
export function generate(seed, t, emit, buf = null) {
  const { name, ne, gen } = t;
  const row = ne[0], count = ne.reduce((a, b) => a * b, 1), nRows = count / row;
  if (gen.values) { emit(gen.values, nRows); return; }
  if (gen.halfOf) { // half h of each expert's rows of the fused tensor gen.halfOf (same values)
    const [cols, F, E] = ne, all = new Float32Array(cols * 2 * F * E), out = new Float32Array(count);
    uniformStream(seed, gen.halfOf)(all, all.length, gen.mean || 0, gen.std * Math.sqrt(3));
    for (let e = 0; e < E; e++) out.set(all.subarray((2 * e + gen.half) * F * cols, (2 * e + gen.half + 1) * F * cols), e * F * cols);
    emit(out, nRows);
    return;
  }
  const fill = uniformStream(seed, name);
  const a = gen.std * Math.sqrt(3), mean = gen.mean || 0;
  const per = Math.max(1, Math.floor(CHUNK / row));
  buf ??= new Float32Array(Math.min(per, nRows) * row);
  for (let r0 = 0; r0 < nRows;) {
    const rows = Math.min(per, nRows - r0), n = rows * row;
    fill(buf, n, mean, a);
    if (gen.zeroRows) for (let r = 0; r < rows; r++) if (gen.zeroRows[r0 + r]) buf.fill(0, r * row, (r + 1) * row);
    emit(n === buf.length ? buf : buf.subarray(0, n), rows);
    r0 += rows;
  }
}

/** Streams a GGUF through ggufWrite into `out` (via out.tmp, renamed when complete). */
export function writeGguf(out, kv, tensors) {
  fs.mkdirSync(path.dirname(path.resolve(out)), { recursive: true });
  const tmp = `${out}.tmp`;
  const fd = fs.openSync(tmp, 'w');
  try {
    ggufWrite((b) => { for (let o = 0; o < b.length;) o += fs.writeSync(fd, b, o, b.length - o); }, kv, tensors);
  } catch (e) {
    fs.closeSync(fd);
    fs.rmSync(tmp, { force: true });
    throw e;
  }
  fs.closeSync(fd);
  fs.renameSync(tmp, out);
}

/**
 * Writes the F32 GGUF of `describe(arch, shape, {seed})` to `out` (streamed); returns its info.
 * `edit(m)`, when given, may change the description's kv and tensors first (malformed files for
 * the loader's tests).
 */
export function writeF32(arch, shape, out, { seed = 1, edit = null } = {}) {
  const m = describe(arch, shape, { seed });
  edit?.(m);
  writeGguf(out, m.kv, f32Tensors(m, seed));
  return m;
}
export function f32Tensors(m, seed) {
  return m.tensors.map((t) => {
    const count = t.ne.reduce((a, b) => a * b, 1);
    return { name: t.name, ne: t.ne, type: 0, nbytes: count * 4, fill: (emit) => generate(seed, t, (v) => emit(v)) };
  });
}
