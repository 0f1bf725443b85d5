// tools/synth/fixtures.mjs — files of published shapes made in seconds, with the real header but
// not a model: writeHeaderOnly (the large tensors' bytes zero, a sparse file: loader tests) and
// writeRandomCodes (quantized blocks of random codes under the seeded values' scales: speed and
// memory benchmarks).

import fs from 'node:fs';
import path from 'node:path';
import { ggufHeader } from '../vocab_gguf.mjs';
import { splitmix32 } from '../synth.mjs';
import { describe } from './describe.mjs';
import { loadQuantizer, quantizedPlan } from './quantize.mjs';
import { fnv1a, uniformStream } from './random.mjs';
import { f32Tensors, writeGguf } from './write.mjs';

/**
 * The file of writeQuantized (or writeF32 for F32) with its real header and the data of its
 * vectors (norms, biases, RoPE factors: every tensor of at most `small` bytes), every byte of
 * the larger tensors 0 (a valid all-zero weight matrix in each type), as a sparse file (no disk
 * for those, written in a moment): for tests of what a loader does with a file of that size
 * and header (e.g. Phi-3.5-mini Q8_0, beyond wasm32's memory). Returns { size }.
 */
export function writeHeaderOnly(arch, shape, out, { seed = 1, type = 'F32', small = 1 << 20 } = {}) {
  let kv, tensors;
  if (type === 'F32') {
    const m = describe(arch, shape, { seed });
    kv = m.kv;
    tensors = f32Tensors(m, seed);
  } else ({ kv, tensors } = quantizedPlan(arch, shape, { seed, type }));
  const head = ggufHeader(kv, tensors);
  let off = head.length;
  fs.mkdirSync(path.dirname(path.resolve(out)), { recursive: true });
  const fd = fs.openSync(out, 'w');
  try {
    fs.writeSync(fd, head, 0, head.length, 0);
    for (const t of tensors) {
      if (t.nbytes <= small) {
        let pos = off;
        t.fill((b) => {
          const buf = Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.byteLength);
          fs.writeSync(fd, buf, 0, buf.length, pos);
          pos += buf.length;
        });
      }
      off += Math.ceil(t.nbytes / 32) * 32;
    }
    fs.ftruncateSync(fd, off);
  } finally { fs.closeSync(fd); }
  return { size: off };
}

/**
 * The blocks of the quantized types writeRandomCodes fills (ggml's layouts, src/kernels/quant.h):
 * type → [bytes per block, elements per block, [[from, to) byte ranges of the block's scales]].
 * Every other byte of a block is a quant code, any value of which is valid and finite.
 */
const CODE_BLOCKS = new Map([
  [2, [18, 32, [[0, 2]]]], // Q4_0: d, qs
  [3, [20, 32, [[0, 4]]]], // Q4_1: d, m, qs
  [6, [22, 32, [[0, 2]]]], // Q5_0: d, qh, qs
  [7, [24, 32, [[0, 4]]]], // Q5_1: d, m, qh, qs
  [8, [34, 32, [[0, 2]]]], // Q8_0: d, qs
  [10, [84, 256, [[0, 16], [80, 84]]]], // Q2_K: scales, qs, d, dmin
  [11, [110, 256, [[96, 110]]]], // Q3_K: hmask, qs, scales, d
  [12, [144, 256, [[0, 16]]]], // Q4_K: d, dmin, scales, qs
  [13, [176, 256, [[0, 16]]]], // Q5_K: d, dmin, scales, qh, qs
  [14, [210, 256, [[192, 210]]]], // Q6_K: ql, qh, scales, d
  [39, [17, 32, [[0, 1]]]], // MXFP4: e, qs
]);
/** What writeRandomCodes' files say about themselves (general.description and wasmlm.fixture). */
export const RANDOM_CODES_NOTE = 'speed/memory fixture: quantized blocks of random codes with the scales of the '
  + 'seeded random values, not a model; its outputs are noise (tools/synth_gguf.mjs writeRandomCodes)';

/**
 * A speed and memory fixture of a published shape, fast: the header, tensor types and vectors of
 * writeQuantized's file (the same llama.cpp mix rules, `type` a target name such as Q3_K_M or
 * MXFP4_MOE), but each quantized matrix filled with random codes instead of quantized values.
 * Per matrix, a template of up to 8 rows of its seeded random values (describe()'s scale) is
 * quantized by the project's quantizer; every block of the matrix then takes the scale bytes
 * (d, dmin, sub-block scales, MXFP4's exponent: CODE_BLOCKS) of a template block picked at random
 * and random bytes for its codes, so values have the magnitudes writeQuantized's would (random
 * uniform codes under the scales of uniform values) and every value is finite. F32/F16 tensors
 * (norms, biases, routers) are generated as writeQuantized writes them. Streamed 4 MB at a
 * time: gpt-oss-20b's 12.1 GB took 2–3 min on a busy 2-vCPU machine, 20 s of it CPU (the
 * quantizing writer does ~10 MB/s), with a peak RSS of 0.5 GB (the vocabulary's tables). The file says what it is (RANDOM_CODES_NOTE in general.description
 * and wasmlm.fixture, "random codes" in general.name). Same arguments → same bytes.
 * Returns { m: the description, size: file bytes, tensors: [{ name, ne, type, nbytes }] }.
 */
export function writeRandomCodes(arch, shape, out, { seed = 1, type = 'Q8_0' } = {}) {
  const { m, kv: kv0, tensors: plan } = quantizedPlan(arch, shape, { seed, type });
  const kv = kv0.map((e) => (e[0] === 'general.name' ? [e[0], e[1], `${e[2]} random codes ${type}`] : e));
  kv.splice(kv.findIndex((e) => e[0] === 'general.name') + 1, 0, ['general.description', 'str', RANDOM_CODES_NOTE],
    ['wasmlm.fixture', 'str', 'random-codes']);
  const Q = loadQuantizer();
  const desc = new Map(m.tensors.map((t) => [t.name, t]));
  const tensors = plan.map((p) => {
    const layout = CODE_BLOCKS.get(p.type);
    if (!layout) return p; // F32, F16, BF16: as writeQuantized writes them
    const t = desc.get(p.name);
    return { ...p, fill: (emit) => fillRandomCodes(Q, t, p.type, layout, seed, emit) };
  });
  writeGguf(out, kv, tensors);
  return { m, size: fs.statSync(out).size, tensors: tensors.map(({ name, ne, type: ty, nbytes }) => ({ name, ne, type: ty, nbytes })) };
}

const CODE_CHUNK = 4 << 20; // bytes of blocks per emitted chunk

function fillRandomCodes(Q, t, type, [bb, be, scaleRanges], seed, emit) {
  const cols = t.ne[0], rows = t.ne.reduce((a, b) => a * b, 1) / cols;
  if (cols % be) throw new Error(`${t.name}: rows of ${cols} are not whole blocks of ${be}`);
  // the template: the first rows of the tensor's own random values, quantized
  const tRows = Math.min(rows, 8);
  let vals = new Float32Array(tRows * cols);
  if (t.gen.values) vals = t.gen.values.subarray(0, vals.length);
  else uniformStream(seed, t.gen.halfOf ?? t.name)(vals, vals.length, t.gen.mean || 0, t.gen.std * Math.sqrt(3));
  const c = Q.converter(type, cols, vals.length);
  let tmpl;
  try { tmpl = Buffer.from(c.convert(vals, tRows)); } finally { c.free(); }
  const nTmpl = tmpl.length / bb;
  const rowBytes = (cols / be) * bb, perChunk = Math.max(1, Math.floor(CODE_CHUNK / rowBytes));
  const buf = Buffer.alloc(Math.min(perChunk, rows) * rowBytes);
  const words = new Uint32Array(buf.buffer, buf.byteOffset, buf.length >> 2); // Buffer.alloc: not pooled, offset 0
  const ranges = scaleRanges.flatMap(([from, to]) => Array.from({ length: to - from }, (_, k) => from + k));
  const sm = splitmix32((seed ^ fnv1a(`${t.name}#codes`)) >>> 0);
  let x = sm(), y = sm(), z = sm(), w = sm() || 1;
  for (let r0 = 0; r0 < rows;) {
    const n = Math.min(perChunk, rows - r0), bytes = n * rowBytes;
    const nw = (bytes + 3) >> 2;
    let X = x, Y = y, Z = z, W = w;
    for (let i = 0; i < nw && i < words.length; i++) { // xorshift128, as uniformStream
      const s = X ^ (X << 11);
      X = Y; Y = Z; Z = W;
      W = (W ^ (W >>> 19) ^ (s ^ (s >>> 8))) >>> 0;
      words[i] = W;
    }
    for (let i = words.length * 4; i < bytes; i++) { // a tail of < 4 bytes
      const s = X ^ (X << 11);
      X = Y; Y = Z; Z = W;
      W = (W ^ (W >>> 19) ^ (s ^ (s >>> 8))) >>> 0;
      buf[i] = W & 255;
    }
    // each block takes the scales of a template block, picked by two of its own random bytes
    for (let b = 0, nb = bytes / bb; b < nb; b++) {
      const o = b * bb, src = ((buf[o + bb - 1] * 251 + buf[o]) % nTmpl) * bb;
      for (let k = 0; k < ranges.length; k++) buf[o + ranges[k]] = tmpl[src + ranges[k]];
    }
    x = X; y = Y; z = Z; w = W;
    emit(bytes === buf.length ? buf : buf.subarray(0, bytes));
    r0 += n;
  }
}
