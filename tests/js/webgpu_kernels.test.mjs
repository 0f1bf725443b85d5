// The WGSL kernels of js/backend/webgpu/ one by one, on Dawn (lavapipe or SwiftShader, tests/js/_webgpu.mjs), against their
// references: the weight decoders and matvec against the C library's own dequantization
// (wlmjs_dequantize: the type table's to_float, the blocks made by its quantizers) with the dot taken
// in double; the F16 KV store against C's wlm_fp32_to_fp16 bit for bit; norm, RoPE, attention
// and the element-wise kernels against transcriptions of kernels_ref.c in double precision.
// Tolerances are relative to the sum of the absolute terms (a float32 sum of n terms is within
// ~n·2⁻²⁴ of it); each is stated where it is asserted.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { dawn, kernelKit, rng, wasmReference } from './_webgpu.mjs';
import { ATT_HEAD, attentionCombineWgsl, attentionSplit, attentionWgsl, eltwiseWgsl, HEADER, MAX_HEAD, embedWgsl, kvShiftWgsl, kvStoreWgsl, matvecThreadsPerRow, matvecWgsl, mropeCosSin, NONE, normWgsl, ropeWgsl, WG } from '../../js/backend/webgpu/wgsl_ops.js';
import { F16X2, GPU_TYPES } from '../../js/backend/webgpu/wgsl_quant.js';

const { adapter, skip: why } = await dawn();
const skip = why || false;
const device = adapter ? await adapter.requestDevice({ requiredFeatures: adapter.features.has('subgroups') ? ['subgroups'] : [] }) : null;
const x = wasmReference();
const { run, weights } = kernelKit(device, x);
const fbits = (v) => new Uint32Array(new Float32Array([v]).buffer)[0];

const typeIds = Object.keys(GPU_TYPES).map(Number);

test('embed: every type decodes its rows as C\'s to_float (|diff| ≤ 1e-6 · max|w|: contraction may fuse d·q − m)', { skip }, async () => {
  for (const type of typeIds) {
    const blk = GPU_TYPES[type].blk;
    const rows = 3, cols = blk === 256 ? 512 : 96;
    const { bytes, deq, rowBytes } = weights(type, rows, cols, 10 + type);
    const ids = new Uint32Array([2, 0, 1]);
    const A = new Float32Array(3 * cols);
    const [out] = await run(embedWgsl(type), { A, params: [cols, rowBytes, 0, 0, cols, 0, fbits(1)], extra: [bytes, ids], grid: [Math.ceil(cols / WG), 1, 3] });
    const got = new Float32Array(out);
    let amax = 0;
    for (const v of deq) amax = Math.max(amax, Math.abs(v));
    for (let e = 0; e < 3; e++) {
      for (let i = 0; i < cols; i++) {
        const want = deq[ids[e] * cols + i];
        assert.ok(Math.abs(got[e * cols + i] - want) <= 1e-6 * amax, `${GPU_TYPES[type].name} entry ${e} [${i}]: ${got[e * cols + i]} vs ${want}`);
      }
    }
  }
  // an entry whose id is NONE (an image row: its input written by the caller) is left as it is
  const { bytes, rowBytes } = weights(0, 2, 8, 3);
  const A = new Float32Array(16).map((_, i) => i + 0.5);
  const [out] = await run(embedWgsl(0), { A, params: [8, rowBytes, 0, 0, 8, 0, fbits(2)], extra: [bytes, new Uint32Array([NONE, 1])], grid: [1, 1, 2] });
  assert.deepEqual(Array.from(new Float32Array(out).subarray(0, 8)), Array.from(A.subarray(0, 8)));
  assert.notDeepEqual(Array.from(new Float32Array(out).subarray(8)), Array.from(A.subarray(8)));
});

// MXFP4: every 4-bit code under every exponent byte, one 32-element row per exponent (row e:
// exponent e, element j code j or 31 - j), through the embed kernel (w_get; the matrix-matrix
// tile loader's w_get4 is compared with C's to_float in webgpu_matmat.test.mjs): against the E2M1 definition
// (sign bit 3, exponent bits 2..1 with bias 1, mantissa bit 0) times 2^(e - 127), computed here
// in double and independent of both the C table and the WGSL arithmetic. Exact where the value
// is a normal float; e = 0 / 1 (values below 2^-124, subnormal) may read as 0 on a GPU that
// flushes subnormals, which WGSL allows; where the value overflows f32 (8 · 2^125 and up) the
// CPU's is ±Infinity, and the GPU's must be too or at least out of the finite range's top.
test('MXFP4: every code × every exponent decoded on the GPU against the E2M1 definition', { skip }, async () => {
  const rows = 256, cols = 32;
  const bytes = new Uint8Array(rows * 17);
  for (let e = 0; e < rows; e++) {
    bytes[e * 17] = e;
    for (let j = 0; j < 16; j++) bytes[e * 17 + 1 + j] = j | ((15 - j) << 4);
  }
  const e2m1 = (c) => {
    const ex = (c >> 1) & 3, m = c & 1, v = ex === 0 ? 0.5 * m : 2 ** (ex - 1) * (1 + 0.5 * m);
    return c & 8 ? -v : v;
  };
  const ids = new Uint32Array(rows).map((_, i) => i);
  const A = new Float32Array(rows * cols);
  const [out] = await run(embedWgsl(39), { A, params: [cols, 17, 0, 0, cols, 0, fbits(1)], extra: [bytes, ids], grid: [1, 1, rows] });
  const got = new Float32Array(out);
  let flushed = 0;
  for (let e = 0; e < rows; e++) {
    for (let j = 0; j < cols; j++) {
      const code = j < 16 ? j : 15 - (j - 16);
      const want = Math.fround(e2m1(code) * 2 ** (e - 127)); // ±Infinity past f32's range
      const g = got[e * cols + j];
      const what = `e ${e} code ${code}: ${g} vs ${want}`;
      if (e < 2 && g === 0 && want !== 0) { flushed++; continue; }
      if (!Number.isFinite(want)) assert.ok(!Number.isFinite(g) || Math.abs(g) >= 2 ** 127, what);
      else assert.ok(g === want, what); // === : code 8 (-0) reads as 0 on both sides
    }
  }
  assert.ok(flushed <= 2 * 28, `at most the subnormal rows flushed (${flushed})`);
});

/** Checks matvec of `type` on rows × cols for 2 entries, accumulate off, one thread layout. */
async function checkMatvec(type, rows, cols, { subgroups = false, tpr = matvecThreadsPerRow(cols), wide = true } = {}) {
  const { bytes, deq, rowBytes } = weights(type, rows, cols, 100 + type + cols);
  const r = rng(7);
  const n = 2, xOff = 8, yOff = xOff + n * cols + 4;
  const A = new Float32Array(yOff + n * rows);
  for (let i = 0; i < n * cols; i++) A[xOff + i] = r();
  const per = WG / tpr;
  const [out] = await run(matvecWgsl(type, { subgroups, tpr, wide }), {
    A, params: [rows, cols, rowBytes, xOff, cols, yOff, rows, 0], extra: [bytes], grid: [Math.ceil(rows / per), 1, n],
  });
  const got = new Float32Array(out);
  for (let e = 0; e < n; e++) {
    for (let row = 0; row < rows; row++) {
      let want = 0, abs = 0;
      for (let i = 0; i < cols; i++) {
        const t = deq[row * cols + i] * A[xOff + e * cols + i];
        want += t;
        abs += Math.abs(t);
      }
      const g = got[yOff + e * rows + row];
      assert.ok(Math.abs(g - want) <= 1e-6 * abs * Math.log2(cols) + 1e-30,
        `${GPU_TYPES[type].name} tpr ${tpr}${subgroups ? ' subgroups' : ''}${wide ? '' : ' narrow'} entry ${e} row ${row}: ${g} vs ${want} (Σ|terms| ${abs})`);
    }
  }
  return got;
}

test('matvec: every type against C\'s dequantization, dot in double (≤ 1e-6 · log2(cols) · Σ|w·x|), by sub-blocks and one element a step', { skip }, async () => {
  for (const type of typeIds) {
    const cols = GPU_TYPES[type].blk === 256 ? 512 : 544;
    const wide = await checkMatvec(type, 7, cols);
    const narrow = await checkMatvec(type, 7, cols, { wide: false });
    // the two orders differ in rounding: equal everywhere would mean the wide path never ran
    if (GPU_TYPES[type].blk === 256 || type === 8) assert.ok(wide.some((v, i) => v !== narrow[i]), `${GPU_TYPES[type].name}: the wide and narrow sums are not two computations`);
  }
  // rows of 100, 200, 6 and 66 elements (not multiples of 32): the wide kernel's one-element path
  await checkMatvec(0, 4, 100, { tpr: 1 });
  await checkMatvec(1, 3, 200, { tpr: 16 });
  await checkMatvec(0, 5, 6, { tpr: 1 });
  await checkMatvec(0, 3, 66, { tpr: 16 });
});

test('matvec: one invocation per row, a workgroup per row, and subgroupAdd give the same products', { skip }, async () => {
  await checkMatvec(8, 70, 96, { tpr: 1 });          // short rows: WG rows a workgroup, the last one partial
  await checkMatvec(0, 5, 64, { tpr: 1 });
  await checkMatvec(12, 3, 2048, { tpr: WG });       // long rows, shared-memory tree
  if (adapter.features.has('subgroups')) await checkMatvec(14, 3, 2048, { tpr: WG, subgroups: true });
});

test('matvec: the batch form (4 entries a workgroup, weights read once) gives each entry the one-entry form\'s bits', { skip }, async () => {
  for (const [type, rows, cols, tpr, subgroups] of [[8, 70, 96, 1, false], [12, 5, 512, 16, false], [14, 3, 2048, WG, false], [2, 3, 2048, WG, true]]) {
    if (subgroups && !adapter.features.has('subgroups')) continue;
    const { bytes, rowBytes } = weights(type, rows, cols, 300 + type);
    const r = rng(17);
    const n = 7, yOff = n * cols;
    const A = new Float32Array(yOff + n * rows);
    for (let i = 0; i < n * cols; i++) A[i] = r();
    const params = [rows, cols, rowBytes, 0, cols, yOff, rows, 0, 2];
    const grid = (z) => [Math.ceil(rows / (WG / tpr)), 1, z];
    const [one] = await run(matvecWgsl(type, { tpr, subgroups }), { A, params, extra: [bytes], grid: grid(n) });
    const [four] = await run(matvecWgsl(type, { tpr, subgroups, ent: 4 }), { A, params, extra: [bytes, new Uint32Array([0, 0, n, 0])], grid: grid(2) });
    assert.deepEqual(new Float32Array(four).subarray(yOff), new Float32Array(one).subarray(yOff), `${GPU_TYPES[type].name} tpr ${tpr}`);
    assert.ok(new Float32Array(four).subarray(yOff).every((v) => v !== 0), 'every entry written');
  }
});

test('matvec: accumulate adds to what the output holds', { skip }, async () => {
  const rows = 3, cols = 64;
  const { bytes, deq } = weights(0, rows, cols, 5);
  const A = new Float32Array(cols + rows).fill(1);
  const [out] = await run(matvecWgsl(0, { tpr: 1 }), { A, params: [rows, cols, cols * 4, 0, 0, cols, 0, 1], extra: [bytes], grid: [1, 1, 1] });
  const got = new Float32Array(out);
  for (let row = 0; row < rows; row++) {
    let want = 1;
    for (let i = 0; i < cols; i++) want += deq[row * cols + i];
    assert.ok(Math.abs(got[cols + row] - want) < 1e-4, `${got[cols + row]} vs ${want}`);
  }
});

test('kv_shift: a sequence\'s rows keep + discard .. end − 1 into OUT, K rotated as forward.c\'s rope_apply (pairs and NEOX halves, a partial n_rot; F32 and F16 as C rounds), V as it was', { skip }, async () => {
  const hs = 8, nHeads = 2, kvDim = hs * nHeads, nRot = 4, half = nRot / 2, nCtx = 12;
  const keep = 2, discard = 3, end = 11, moved = end - keep - discard;
  const r = rng(21);
  const cs = new Float32Array(2 * half);
  for (let i = 0; i < half; i++) { // the angles of −discard positions
    const ang = Math.fround(-discard * Math.fround(10000 ** (-2 * i / nRot)));
    cs[i] = Math.fround(Math.cos(ang));
    cs[half + i] = Math.fround(Math.sin(ang));
  }
  const f = Math.fround;
  for (const f16 of [false, true]) {
    for (const neox of [false, true]) {
      const what = `${f16 ? 'F16' : 'F32'} ${neox ? 'NEOX' : 'pairs'}`;
      const vals = Float32Array.from({ length: 4 * nCtx * kvDim }, () => r() * 4); // 2 sequences
      let kv, cache; // the cache's bits, and its elements as floats
      if (f16) {
        const src = x.wlmjs_malloc(vals.byteLength) >>> 0, dst = x.wlmjs_malloc(vals.length * 2) >>> 0, back = x.wlmjs_malloc(vals.byteLength) >>> 0;
        new Float32Array(x.memory.buffer, src, vals.length).set(vals);
        x.wlmjs_quantize_rows(1, src, dst, 1, vals.length);
        kv = new Uint32Array(new Uint16Array(x.memory.buffer, dst, vals.length).slice().buffer);
        x.wlmjs_dequantize(1, dst, back, vals.length);
        cache = new Float32Array(x.memory.buffer, back, vals.length).slice();
        for (const p of [src, dst, back]) x.wlmjs_free(p);
      } else {
        kv = new Uint32Array(vals.buffer.slice(0));
        cache = vals;
      }
      const words = f16 ? kvDim / 2 : kvDim;
      const A = new Float32Array(8 + 2 * half);
      A.set(cs, 8);
      const S = new Uint32Array([0, 0, keep, discard, end, 1]); // sequence 1's rows
      const sb = 2 * nCtx * kvDim;
      const out = new Uint32Array(2 * moved * words);
      const [, , got] = await run(kvShiftWgsl(f16), { A, params: [kvDim, nCtx, hs, nRot, neox ? 1 : 0, 8, 2], extra: [kv, out, S], grid: [1, 2, 1] });
      const g = f16 ? new Uint16Array(got) : new Float32Array(got);
      const want = new Float32Array(2 * moved * kvDim);
      for (let row = 0; row < moved; row++) {
        const k0 = sb + (keep + discard + row) * kvDim;
        for (let e = 0; e < kvDim; e++) {
          const j = e % hs, h0 = e - j;
          let v = cache[k0 + e];
          if (j < nRot) {
            const first = neox ? j < half : (j & 1) === 0;
            const i = neox ? (first ? j : j - half) : j >> 1;
            const ia = h0 + (neox ? i : 2 * i), ib = ia + (neox ? half : 1);
            const a = cache[k0 + ia], b = cache[k0 + ib], c = cs[i], s = cs[half + i];
            v = first ? f(f(a * c) - f(b * s)) : f(f(a * s) + f(b * c));
          }
          want[row * kvDim + e] = v;
          want[(moved + row) * kvDim + e] = cache[sb + (nCtx + keep + discard + row) * kvDim + e];
        }
      }
      if (f16) { // C's rounding of the reference; a fused multiply-add on the GPU may move one
        // product's last bit, so one step of binary16 is allowed on rotated K elements only
        const src = x.wlmjs_malloc(want.byteLength) >>> 0, dst = x.wlmjs_malloc(want.length * 2) >>> 0;
        new Float32Array(x.memory.buffer, src, want.length).set(want);
        x.wlmjs_quantize_rows(1, src, dst, 1, want.length);
        const wh = new Uint16Array(x.memory.buffer, dst, want.length).slice();
        x.wlmjs_free(src);
        x.wlmjs_free(dst);
        for (let i = 0; i < wh.length; i++) {
          const rotated = i < moved * kvDim && i % hs < nRot;
          assert.ok(g[i] === wh[i] || (rotated && Math.abs(g[i] - wh[i]) === 1), `${what} [${i}]: ${g[i].toString(16)} vs ${wh[i].toString(16)}`);
        }
      } else {
        for (let i = 0; i < want.length; i++) {
          assert.ok(Math.abs(g[i] - want[i]) <= 2 ** -21 * Math.abs(want[i]) + 1e-30, `${what} [${i}]: ${g[i]} vs ${want[i]}`);
          if (i >= moved * kvDim || i % hs >= nRot) assert.equal(g[i], want[i], `${what} [${i}] moved as it was`);
        }
      }
    }
  }
});

test('kv_store F16: the bits of C\'s wlm_fp32_to_fp16 (nearest even, overflow to inf, subnormals, NaN)', { skip }, async () => {
  const special = [0, -0, 1, -1, 65504, 65519.99, 65520, -65520, 1e9, Infinity, -Infinity, 6.1e-5, 5.96e-8, 2.98e-8, 2.99e-8, 3e-6, -3e-6, 1 + 2 ** -11, 1 + 3 * 2 ** -11, 0.1, 1 / 3];
  const r = rng(3);
  const vals = [...special];
  while (vals.length < 256) vals.push(r() * 2 ** Math.floor(r() * 40 - 20));
  const kvDim = 128, nCtx = 4;
  const A = new Float32Array(2 * kvDim);
  A.set(vals);
  const kv = new Uint32Array(2 * nCtx * kvDim); // 2 sequences of 2 nCtx rows of kvDim halves
  const pos = new Uint32Array([2, 1]); // position 2 of sequence 1
  const [, kvOut] = await run(kvStoreWgsl(true), { A, params: [0, kvDim, 0, kvDim, nCtx, 0, 1], extra: [kv, pos], grid: [1, 1, 1] });
  const halves = new Uint16Array(kvOut);
  const src = x.wlmjs_malloc(A.byteLength) >>> 0, dst = x.wlmjs_malloc(A.length * 2) >>> 0;
  new Float32Array(x.memory.buffer, src, A.length).set(A);
  x.wlmjs_quantize_rows(1, src, dst, 1, A.length); // F16 from_float: wlm_fp32_to_fp16
  const want = new Uint16Array(x.memory.buffer, dst, A.length).slice();
  x.wlmjs_free(src);
  x.wlmjs_free(dst);
  for (let i = 0; i < kvDim; i++) {
    assert.equal(halves[(2 * nCtx + 2) * kvDim + i], want[i], `K ${A[i]}`);
    assert.equal(halves[(3 * nCtx + 2) * kvDim + i], want[kvDim + i], `V ${A[kvDim + i]}`);
  }
  assert.ok(halves.subarray(0, 2 * nCtx * kvDim).every((v) => v === 0), 'sequence 0 untouched');
  // NaN stays NaN (C keeps the payload's top bits; any quiet NaN is fine for attention)
  const [, nanKv] = await run(kvStoreWgsl(true), { A: new Float32Array(2 * kvDim).fill(NaN), params: [0, kvDim, 0, kvDim, nCtx, 0, 1], extra: [kv, new Uint32Array([0, 0])], grid: [1, 1, 1] });
  const h = new Uint16Array(nanKv)[0];
  assert.ok((h & 0x7c00) === 0x7c00 && (h & 0x3ff) !== 0, `NaN → ${h.toString(16)}`);
});

test('f16x2 (the attention\'s F16 cache reads): all 65 536 halves decode as C\'s wlm_fp16_to_fp32, bit for bit (subnormals, ±0, ±∞; NaN as NaN)', { skip }, async () => {
  const words = new Uint32Array(32768);
  for (let i = 0; i < words.length; i++) words[i] = (2 * i) | ((2 * i + 1) << 16);
  const code = `${HEADER}
@group(0) @binding(2) var<storage, read> KV: array<u32>;
${F16X2}
@compute @workgroup_size(${WG})
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let i = pu(0u) + g.x; // (the parameters bound, as the kit binds them)
  if (i >= arrayLength(&KV)) { return; }
  let v = f16x2(KV[i]);
  A[2u * i] = v.x;
  A[2u * i + 1u] = v.y;
}`;
  const [out] = await run(code, { A: new Float32Array(65536), params: [0], extra: [words], grid: [words.length / WG, 1, 1] });
  const got = new Uint32Array(out);
  const src = x.wlmjs_malloc(2 * 65536) >>> 0, dst = x.wlmjs_malloc(4 * 65536) >>> 0;
  new Uint16Array(x.memory.buffer, src, 65536).set(Uint16Array.from({ length: 65536 }, (_, i) => i));
  x.wlmjs_dequantize(1, src, dst, 65536); // F16 to_float: wlm_fp16_to_fp32
  const want = new Uint32Array(x.memory.buffer, dst, 65536).slice();
  const wantF = new Float32Array(want.buffer);
  x.wlmjs_free(src);
  x.wlmjs_free(dst);
  for (let h = 0; h < 65536; h++) {
    if (Number.isNaN(wantF[h])) assert.ok(Number.isNaN(new Float32Array(got.buffer)[h]), `half ${h.toString(16)}: NaN`);
    else assert.equal(got[h], want[h], `half ${h.toString(16)}: ${new Float32Array(got.buffer)[h]} vs ${wantF[h]}`);
  }
});

/** kernels_ref.c's rmsnorm / layernorm in double. */
function normRef(xs, w, b, eps, layer) {
  const n = xs.length;
  if (!layer) {
    let ss = 0;
    for (const v of xs) ss += v * v;
    const sc = 1 / Math.sqrt(ss / n + eps);
    return xs.map((v, i) => w[i] * sc * v);
  }
  const mean = xs.reduce((a, v) => a + v, 0) / n;
  let s2 = 0;
  for (const v of xs) s2 += (v - mean) ** 2;
  const sc = 1 / Math.sqrt(s2 / n + eps);
  return xs.map((v, i) => (v - mean) * sc * w[i] + (b ? b[i] : 0));
}

test('norm: RMSNorm, LayerNorm with bias, per head in place, and gathered rows (≤ 2e-6 relative)', { skip }, async () => {
  const r = rng(11);
  const len = 80, rows = 3;
  const V = new Float32Array(2 * len).map(() => 1 + r() * 0.5);
  const S = new Uint32Array([2, 0]);
  for (const [layer, bias, idx] of [[0, NONE, NONE], [1, len, NONE], [0, NONE, 0]]) {
    const A = new Float32Array(2 * rows * len).map(() => r() * 3 + 0.5);
    const z = idx === NONE ? rows : 2;
    const [out] = await run(normWgsl(), { A, params: [len, 0, len, 0, rows * len, len, 0, 0, bias, layer, fbits(1e-5), idx], extra: [V, S], grid: [1, 1, z] });
    const got = new Float32Array(out);
    for (let e = 0; e < z; e++) {
      const src = idx === NONE ? e : S[e];
      const want = normRef(Array.from(A.subarray(src * len, src * len + len)), V, bias === NONE ? null : V.subarray(len), 1e-5, layer);
      for (let i = 0; i < len; i++) {
        const g = got[rows * len + e * len + i];
        assert.ok(Math.abs(g - want[i]) <= 2e-6 * (Math.abs(want[i]) + 1), `layer ${layer} entry ${e} [${i}]: ${g} vs ${want[i]}`);
      }
    }
  }
  // per head, in place: 4 heads of 16 of one entry
  const A = new Float32Array(64).map(() => r());
  const [out] = await run(normWgsl(), { A, params: [16, 0, 64, 16, 0, 64, 16, 0, NONE, 0, fbits(1e-6), NONE], extra: [V, S], grid: [4, 1, 1] });
  const got = new Float32Array(out);
  for (let h = 0; h < 4; h++) {
    const want = normRef(Array.from(A.subarray(h * 16, h * 16 + 16)), V, null, 1e-6, 0);
    for (let i = 0; i < 16; i++) assert.ok(Math.abs(got[h * 16 + i] - want[i]) <= 2e-6 * (Math.abs(want[i]) + 1));
  }
});

test('matvec: a bias (param 9) joins each sum before it is stored or accumulated: fround(Σ + b), x + that; one entry and the batch form', { skip }, async () => {
  const rows = 70, cols = 96, type = 8;
  const { bytes, rowBytes } = weights(type, rows, cols, 41);
  const r = rng(43);
  const n = 5, xOff = 0, yOff = n * cols, bOff = yOff + n * rows;
  const A = new Float32Array(bOff + rows);
  for (let i = 0; i < n * cols; i++) A[i] = r();
  for (let i = 0; i < rows; i++) A[bOff + i] = r() * 3;
  for (let i = 0; i < n * rows; i++) A[yOff + i] = r(); // what accumulate adds to
  const grid = (z) => [Math.ceil(rows / (WG / 1)), 1, z];
  const S = new Uint32Array([0, 0, n, 0]);
  for (const acc of [0, 1]) {
    const plain = [rows, cols, rowBytes, xOff, cols, yOff, rows, 0, 2, 0];
    const [p0] = await run(matvecWgsl(type, { tpr: 1 }), { A, params: plain, extra: [bytes], grid: grid(n) });
    const sums = new Float32Array(p0).subarray(yOff, yOff + n * rows);
    const withBias = [rows, cols, rowBytes, xOff, cols, yOff, rows, acc, 2, bOff + 1];
    const [one] = await run(matvecWgsl(type, { tpr: 1 }), { A, params: withBias, extra: [bytes], grid: grid(n) });
    const [four] = await run(matvecWgsl(type, { tpr: 1, ent: 4 }), { A, params: withBias, extra: [bytes, S], grid: grid(2) });
    for (const [what, out] of [['one entry', one], ['batch form', four]]) {
      const got = new Float32Array(out);
      for (let e = 0; e < n; e++) {
        for (let row = 0; row < rows; row++) {
          const v = Math.fround(sums[e * rows + row] + A[bOff + row]);
          const want = acc ? Math.fround(A[yOff + e * rows + row] + v) : v;
          assert.equal(got[yOff + e * rows + row], want, `${what} accumulate ${acc} entry ${e} row ${row}`);
        }
      }
    }
  }
});

test('rope: Q\'s and K\'s heads in one dispatch (params 7–9) equal two dispatches bit for bit', { skip }, async () => {
  const r = rng(51);
  const hs = 16, nRot = 16, half = nRot / 2, nq = 4, nk = 2, n = 3, qE = nq * hs + 4, kE = nk * hs;
  const qOff = 0, kOff = n * qE, cs = kOff + n * kE;
  for (const neox of [0, 1]) {
    const A = new Float32Array(cs + n * nRot).map(() => r());
    for (let e = 0; e < n; e++) for (let i = 0; i < half; i++) { const a = 0.2 * i + e; A[cs + e * nRot + i] = Math.cos(a); A[cs + e * nRot + half + i] = Math.sin(a); }
    const [q1] = await run(ropeWgsl(), { A, params: [qOff, qE, hs, nRot, neox, cs, nRot], grid: [nq, 1, n] });
    const [both1] = await run(ropeWgsl(), { A: new Float32Array(q1), params: [kOff, kE, hs, nRot, neox, cs, nRot], grid: [nk, 1, n] });
    const [both2] = await run(ropeWgsl(), { A, params: [qOff, qE, hs, nRot, neox, cs, nRot, kOff, nq, kE], grid: [nq + nk, 1, n] });
    assert.deepEqual(new Float32Array(both2), new Float32Array(both1), `neox ${neox}`);
    assert.ok(new Float32Array(both2).some((v, i) => v !== A[i] && i >= kOff && i < cs), 'K rotated');
  }
});

test('rope with the cache store (params 10–14): A and the cache bit for bit as RoPE then kv_store, F16 and F32, both styles, partial rotation', { skip }, async () => {
  const r = rng(57);
  const hs = 16, nq = 4, nk = 2, n = 3, kvDim = nk * hs, nCtx = 8;
  const qE = nq * hs + 4, kE = 2 * kvDim; // K and V rows interleaved per entry, as a joined QKV's are
  const qOff = 0, kOff = n * qE, vOff = kOff + kvDim, cs = kOff + n * kE;
  for (const [neox, nRot, f16] of [[0, 16, true], [1, 16, false], [1, 8, true], [0, 12, false]]) {
    const half = nRot / 2;
    const A = new Float32Array(cs + n * nRot + 16).map(() => r());
    for (let e = 0; e < n; e++) for (let i = 0; i < half; i++) { const a = 0.3 * i + e; A[cs + e * nRot + i] = Math.cos(a); A[cs + e * nRot + half + i] = Math.sin(a); }
    const S = new Uint32Array([5, 2, 7, 0, 1, 0]); // positions, then sequences (of two)
    const kv = new Uint32Array(2 * 2 * nCtx * kvDim / (f16 ? 2 : 1));
    const rope = [qOff, qE, hs, nRot, neox, cs, nRot, kOff, nq, kE];
    const [a1] = await run(ropeWgsl(), { A, params: rope, grid: [nq + nk, 1, n] });
    const [, kv1] = await run(kvStoreWgsl(f16), { A: new Float32Array(a1), params: [kOff, vOff, kE, kvDim, nCtx, 0, 3], extra: [kv, S], grid: [Math.ceil(kvDim / 64), 1, n] });
    const [a2, kv2] = await run(ropeWgsl(f16 ? 'f16' : 'f32'), { A, params: [...rope, vOff, kvDim, nCtx, 0, 3], extra: [kv, S], grid: [nq + nk, 1, n] });
    assert.deepEqual(new Float32Array(a2), new Float32Array(a1), `A: neox ${neox} n_rot ${nRot}`);
    assert.deepEqual(new Uint32Array(kv2), new Uint32Array(kv1), `cache: neox ${neox} n_rot ${nRot} f16 ${f16}`);
    assert.ok(new Uint32Array(kv2).some((v) => v !== 0), 'something stored');
  }
});

test('rope: interleaved pairs and NEOX halves with partial rotation (≤ 1e-6)', { skip }, async () => {
  const r = rng(5);
  const hs = 32, nRot = 24, heads = 3, half = nRot / 2;
  for (const neox of [0, 1]) {
    const A = new Float32Array(heads * hs + nRot).map(() => r());
    const cs = heads * hs;
    for (let i = 0; i < half; i++) { const a = 0.3 * i + 0.1; A[cs + i] = Math.cos(a); A[cs + half + i] = Math.sin(a); }
    const [out] = await run(ropeWgsl(), { A, params: [0, 0, hs, nRot, neox, cs, 0], grid: [heads, 1, 1] });
    const got = new Float32Array(out);
    for (let h = 0; h < heads; h++) {
      const v = Array.from(A.subarray(h * hs, h * hs + hs));
      for (let i = 0; i < half; i++) { // wlm_rope_ref / wlm_rope_neox_ref
        const [ia, ib] = neox ? [i, i + half] : [2 * i, 2 * i + 1];
        const a = A[h * hs + ia], b = A[h * hs + ib], c = A[cs + i], s = A[cs + half + i];
        v[ia] = a * c - b * s;
        v[ib] = a * s + b * c;
      }
      for (let i = 0; i < hs; i++) assert.ok(Math.abs(got[h * hs + i] - v[i]) <= 1e-6, `neox ${neox} head ${h} [${i}]`);
    }
  }
});

// M-RoPE (qwen2vl's image rows, src/runtime/deferred.c's dfr_rpos): each entry's (t, h, w)
// positions, mropeCosSin's table, through the rope kernel (NEOX halves), against ggml's
// rope_multi with GGML_ROPE_TYPE_MROPE written out in double: pair i of n_dims/2 at angle
// p_s · base^(−2i / n_dims), s the section where i mod (the sections' sum) falls — t, h, w,
// and the fourth, whose position is 0 (llama.cpp's image and text positions give it 0). The
// entries' slots (0, 1, 2) are not their positions: a table of the slots (a pass that used the
// cache rows, not the grid) must miss the reference, which the last check asserts.
test('rope: M-RoPE sections turned by each entry\'s own (t, h, w) positions, as ggml\'s rope_multi MROPE (≤ 2e-5 · (1 + |x|))', { skip }, async () => {
  const r = rng(11);
  for (const [hs, nRot, sections, base] of [[16, 16, [2, 2, 2, 2], 1e6], [32, 24, [3, 4, 5, 0], 1e4], [24, 24, [1, 2, 1, 1], 1e6]]) {
    const half = nRot / 2, heads = 3;
    const rpos = [[7, 7, 7], [9, 10, 12], [9, 13, 9], [20, 20, 20]]; // text, two image rows, text after
    const n = rpos.length, CS = nRot;
    const sum = sections.reduce((a, b) => a + b, 0);
    const still = (i) => i % sum >= sections[0] + sections[1] + sections[2];
    // forward.c's wlm_rope_init: the fourth section's pairs frequency 0
    const freq = new Float32Array(half).map((_, i) => (still(i) ? 0 : Math.fround(1 / Math.pow(base, (2 * i) / nRot))));
    const x0 = Array.from({ length: n * heads * hs }, () => r());
    const table = (pos) => {
      const A = new Float32Array(n * heads * hs + n * CS);
      A.set(x0);
      for (let z = 0; z < n; z++) mropeCosSin(A, n * heads * hs + z * CS, pos[z], sections, freq, 0, half, 1, half);
      return A;
    };
    const gpuRope = async (A) => new Float32Array((await run(ropeWgsl(), { A, params: [0, heads * hs, hs, nRot, 1, n * heads * hs, CS], grid: [heads, 1, n] }))[0]);
    const got = await gpuRope(table(rpos));
    const ref = (z, h) => { // ggml's rope_multi (MROPE): sector = pair mod sum, NEOX rotation
      const v = x0.slice((z * heads + h) * hs, (z * heads + h + 1) * hs);
      const p = [...rpos[z], 0];
      for (let i = 0; i < half; i++) {
        const sector = i % sum;
        const sec = sector < sections[0] ? 0 : sector < sections[0] + sections[1] ? 1 : sector < sections[0] + sections[1] + sections[2] ? 2 : 3;
        const theta = p[sec] * Math.pow(base, -2 * i / nRot);
        const a = v[i], b = v[i + half];
        v[i] = a * Math.cos(theta) - b * Math.sin(theta);
        v[i + half] = a * Math.sin(theta) + b * Math.cos(theta);
      }
      return v;
    };
    let slotsMiss = 0;
    const bySlot = await gpuRope(table(rpos.map((_, z) => [z, z, z])));
    for (let z = 0; z < n; z++) {
      for (let h = 0; h < heads; h++) {
        const want = ref(z, h);
        for (let i = 0; i < hs; i++) {
          const g = got[(z * heads + h) * hs + i];
          assert.ok(Math.abs(g - want[i]) <= 2e-5 * (1 + Math.abs(want[i])), `sections ${sections} entry ${z} head ${h} [${i}]: ${g} vs ${want[i]}`);
          slotsMiss = Math.max(slotsMiss, Math.abs(bySlot[(z * heads + h) * hs + i] - want[i]));
        }
      }
    }
    assert.ok(slotsMiss > 1e-2, `sections ${sections}: the slots' table is as close as ${slotsMiss}: the check cannot fail`);
  }
});

test('attention: GQA over F32 and F16 caches, head sizes 40, 64 and 256, and 40, 250 and 512 in the wide form (16-wide score slices, Gemma 4\'s full layers), a sliding window, more positions than a tile, split over the cache and combined, an image row seeing past its position to its image\'s end (≤ 1e-5)', { skip }, async () => {
  const r = rng(9);
  // [head size, F16 cache, position, window, wide form, end of a non-causal image (or none)]
  for (const [hs, f16, pos, swa, wide, end] of [[40, false, 137, 0], [40, true, 137, 0], [40, false, 100, 30], [40, false, 0, 0],
    [64, true, 137, 0], [64, false, 66, 0], [256, false, 137, 0], [256, true, 70, 40],
    [512, false, 137, 0, true], [512, true, 70, 40, true], [250, true, 100, 0, true], [40, false, 66, 0, true],
    [40, false, 60, 0, false, 137], [64, true, 10, 0, false, 70], [40, false, 100, 30, false, 140], [256, true, 3, 0, true, 66]]) {
  const nHeads = 4, nKv = 2, gqa = 2, kvDim = nKv * hs, nCtx = 150;
  const kf = new Float32Array(2 * nCtx * kvDim).map(() => r());
    let kv;
    let deq = kf;
    if (f16) { // the cache's halves by C's rounding, and what they decode to
      const src = x.wlmjs_malloc(kf.byteLength) >>> 0, dst = x.wlmjs_malloc(kf.length * 2) >>> 0;
      new Float32Array(x.memory.buffer, src, kf.length).set(kf);
      x.wlmjs_quantize_rows(1, src, dst, 1, kf.length);
      kv = new Uint32Array(new Uint16Array(x.memory.buffer, dst, kf.length).slice().buffer);
      x.wlmjs_dequantize(1, dst, src, kf.length);
      deq = new Float32Array(x.memory.buffer, src, kf.length).slice();
      x.wlmjs_free(src);
      x.wlmjs_free(dst);
    } else {
      kv = new Uint32Array(kf.buffer.slice(0));
    }
    const q = new Float32Array(nHeads * hs).map(() => r());
    const scale = 1 / Math.sqrt(hs);
    const len = end ?? pos + 1, start = swa && pos + 1 > swa ? pos + 1 - swa : 0;
    // at most 3 splits (of 64 positions for these lengths: some empty under the window), and one
    const results = [];
    for (const maxSplit of [3, 1]) {
      const { chunk, splits: ns } = attentionSplit(len, maxSplit), partOff = 2 * nHeads * hs;
      assert.ok(ns <= maxSplit && chunk % 64 === 0 && (maxSplit === 1 || len <= 64 || ns > 1));
      const A = new Float32Array(partOff + nHeads * maxSplit * (hs + 2));
      A.set(q);
      const S = new Uint32Array([pos, ns, 1, end ?? 0]); // the cache as sequence 1 of two (0: other values)
      const kv2 = new Uint32Array(2 * kv.length);
      kv2.fill(0x3c003c00, 0, kv.length); // 1.0 in F16 halves, a tiny float in F32
      kv2.set(kv, kv.length);
      const [part] = await run(attentionWgsl(f16, wide ? MAX_HEAD : ATT_HEAD), {
        A, params: [0, 0, 0, 0, hs, kvDim, nCtx, gqa, 0, swa, fbits(scale), end ? 4 : 0, partOff, 0, maxSplit, 2], extra: [kv2, S], grid: [nHeads, ns, 1],
      });
      const [out] = await run(attentionCombineWgsl(), {
        A: new Float32Array(part), params: [nHeads * hs, 0, hs, partOff, 0, maxSplit, 1], extra: [S], grid: [nHeads, 1, 1],
      });
      results.push(new Float32Array(out));
      if (ns === 1) { // one split: the combine returns acc / l of that split, bit for bit
        const p = new Float32Array(part);
        for (let h = 0; h < nHeads; h++) {
          const b = partOff + h * maxSplit * (hs + 2);
          for (let i = 0; i < hs; i++) assert.equal(results.at(-1)[nHeads * hs + h * hs + i], Math.fround(p[b + i] / p[b + hs + 1]));
        }
      }
    }
    for (const got of results) {
      for (let h = 0; h < nHeads; h++) { // wlm_attention_ref in double
        const kh = Math.floor(h / gqa) * hs;
        const sc = [];
        for (let t = start; t < len; t++) {
          let d = 0;
          for (let i = 0; i < hs; i++) d += q[h * hs + i] * deq[t * kvDim + kh + i];
          sc.push(d * scale);
        }
        const m = Math.max(...sc);
        const p = sc.map((v) => Math.exp(v - m));
        const sum = p.reduce((a, b) => a + b, 0);
        for (let i = 0; i < hs; i++) {
          let o = 0;
          for (let t = start; t < len; t++) o += (p[t - start] / sum) * deq[(nCtx + t) * kvDim + kh + i];
          const g = got[nHeads * hs + h * hs + i];
          assert.ok(Math.abs(g - o) <= 1e-5, `hs ${hs}${wide ? ' (wide)' : ''} f16 ${f16} pos ${pos} window ${swa} end ${end} head ${h} [${i}]: ${g} vs ${o}`);
        }
      }
    }
  }
});

test('element-wise: add, add_vec, scale, scale_by, mul_vec, SwiGLU, GeGLU (GELU on binary16 as ggml), GELU alone, soft-cap', { skip }, async () => {
  const r = rng(21);
  const n = 100;
  const base = () => new Float32Array(2 * n).map(() => r() * 6);
  const cases = [
    ['add', [0, 0, n, 0, n], (a, i) => a[i] + a[n + i]],
    ['scale', [0, 0, n, fbits(0.375)], (a, i) => a[i] * 0.375],
    ['glu', [0, 0, n, 0, n, 0, 1], (a, i) => a[i] / (1 + Math.exp(-a[i])) * a[n + i]],
    ['softcap', [0, 0, n, fbits(5)], (a, i) => 5 * Math.tanh(a[i] / 5)],
  ];
  for (const [op, params, ref] of cases) {
    const A = base();
    const [out] = await run(eltwiseWgsl(op), { A, params, grid: [Math.ceil(n / WG), 1, 1] });
    const got = new Float32Array(out);
    for (let i = 0; i < n; i++) assert.ok(Math.abs(got[i] - ref(A, i)) <= 2e-6 * (1 + Math.abs(ref(A, i))), `${op} [${i}]: ${got[i]} vs ${ref(A, i)}`);
  }
  const A = base();
  const Vv = new Float32Array(n).map(() => r());
  const [av] = await run(eltwiseWgsl('add_vec'), { A, params: [0, 0, 0, n], extra: [Vv], grid: [2, 1, 1] });
  for (let i = 0; i < n; i++) assert.ok(Math.abs(new Float32Array(av)[i] - (A[i] + Vv[i])) < 1e-6);
  // scale_by (Gemma 4's layer_output_scale): two entries n apart times V[3], one float product
  // each, bit for bit forward.c's x[i] *= out_scale[0]
  const [sb] = await run(eltwiseWgsl('scale_by'), { A, params: [0, n, 3, n], extra: [Vv], grid: [2, 1, 2] });
  assert.deepEqual(new Float32Array(sb), A.map((a) => Math.fround(a * Vv[3])));
  // mul_vec (Gemma 4's router input scale): two entries n apart, element i times V[2 + i], one
  // float product each, bit for bit moe.c's r[i] · ffn_gate_inp.scale[i]
  const W = new Float32Array(n + 2).map(() => r() * 3);
  const [mv] = await run(eltwiseWgsl('mul_vec'), { A, params: [0, n, 2, n], extra: [W], grid: [2, 1, 2] });
  assert.deepEqual(new Float32Array(mv), A.map((a, i) => Math.fround(a * W[2 + (i % n)])));
  // GELU: wlm_gelu1_ref rounds its input and output to binary16: within one binary16 step
  const G = new Float32Array(2 * n).map((_, i) => (i < n ? (i - n / 2) / 4 : r()));
  for (const gated of [0, 1]) {
    const [og] = await run(eltwiseWgsl('glu'), { A: G, params: [0, 0, n, 0, n, 1, gated], grid: [2, 1, 1] });
    const got = new Float32Array(og);
    for (let i = 0; i < n; i++) {
      const v = G[i];
      let y = v <= -10 ? 0 : v >= 10 ? v : 0.5 * v * (1 + Math.tanh(0.7978845608028654 * v * (1 + 0.044715 * v * v)));
      if (gated) y *= G[n + i];
      assert.ok(Math.abs(got[i] - y) <= 2e-3 * (Math.abs(y) + 1e-3), `gelu${gated ? ' gated' : ''}(${v}): ${got[i]} vs ${y}`);
    }
  }
});
