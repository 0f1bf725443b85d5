// The tiled matrix-matrix kernel (js/backend/webgpu/wgsl_matmat.js) and its tile loaders (each
// type's w_get4 in wgsl_quant.js), on Dawn (lavapipe or SwiftShader, tests/js/_webgpu.mjs), against the C library: the weights are
// made by C's quantizers and the reference is C's dequantization (wlmjs_dequantize: the type
// table's to_float) times the activations, summed in double, for every weight type, on ragged sizes —
// rows not a multiple of the tile's 64, entries not a multiple of its 32, columns not a multiple
// of 256 (32-element blocks) nor of the 32-column slice (F32 / F16 / BF16), rows that start
// 2 bytes into a word (18-, 22-, 34-, 110- and 210-byte blocks), strides unlike the row length.
//
// Tolerance of one output y = Σ_k w_k·x_k over K columns, against the double sum: the kernel
// adds K products in one running float32 sum (order k = 0 .. K−1, as kernels_ref.c's
// wlm_matmat_ref), within γ_K·Σ|w_k·x_k| of the exact sum, γ_K = K·u/(1 − K·u), u = 2⁻²⁴
// (Higham, Accuracy and Stability of Numerical Algorithms, §4.2: K − 1 additions, one rounding
// per product); its decoder may differ from C's to_float where the compiler contracts d·q − m
// into one fused multiply-add, by at most one rounding of the larger term, ≤ 2⁻²⁴ · 2·max|w|
// per weight (the embed test's 1e-6 · max|w| holds it), so + 2⁻²³·max|w|·Σ|x_k|. The bound is
// worst-case; a wrong weight (a bit of a nibble, a scale) moves y by about |w·x| ≫ it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { dawn, kernelKit, rng, wasmReference } from './_webgpu.mjs';
import { matmatWgsl, TILE } from '../../js/backend/webgpu/wgsl_matmat.js';
import { GPU_TYPES, W_SUB_GENERIC, WGSL_BYTES, WGSL_WORDS } from '../../js/backend/webgpu/wgsl_quant.js';
import { HEADER } from '../../js/backend/webgpu/wgsl_ops.js';

const { adapter, skip: why } = await dawn();
const skip = why || false;
const device = adapter ? await adapter.requestDevice() : null;
const x = wasmReference();
const { run, weights } = kernelKit(device, x);
const typeIds = Object.keys(GPU_TYPES).map(Number);
const U = 2 ** -24;

/** Columns for `type`: a whole number of blocks, neither a multiple of 256 nor (blk 1) of 32. */
const colsOf = (type) => ({ 1: 99, 256: 768 })[GPU_TYPES[type].blk] ?? 288;
const colsOfF32 = 100; // F32 rows must stay 4-byte aligned: 100, not 99

/** The weight binding W and the decoders of `type` (w_get, w_get4), for a test kernel. */
const decoders = (type) => `${HEADER}
@group(0) @binding(2) var<storage, read> W: array<u32>;
${WGSL_BYTES}
${WGSL_WORDS}
${GPU_TYPES[type].wgsl}
${GPU_TYPES[type].wgsl4}`;

test('w_get4: every type decodes each group of 4 as C\'s to_float (|diff| ≤ 1e-6 · max|w|), rows at odd 2-byte offsets included', { skip }, async () => {
  for (const type of typeIds) {
    const rows = 3, cols = type === 0 ? colsOfF32 : colsOf(type);
    const { bytes, deq, rowBytes } = weights(type, rows, cols, 40 + type);
    const code = `${decoders(type)}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let k = 4u * (wg.x * 64u + t);
  if (k + 3u >= pu(0u)) { return; }
  let v = w_get4(wg.z * pu(1u), k);
  for (var c = 0u; c < 4u; c++) { A[wg.z * pu(0u) + k + c] = v[c]; }
}`;
    const [out] = await run(code, { A: new Float32Array(rows * cols), params: [cols, rowBytes], extra: [bytes], grid: [Math.ceil(cols / 256), 1, rows] });
    const got = new Float32Array(out);
    let amax = 0;
    for (const v of deq) amax = Math.max(amax, Math.abs(v));
    for (let r = 0; r < rows; r++) {
      for (let k = 0; k < cols - cols % 4; k++) {
        const i = r * cols + k;
        assert.ok(Math.abs(got[i] - deq[i]) <= 1e-6 * amax, `${GPU_TYPES[type].name} row ${r} [${k}]: ${got[i]} vs ${deq[i]}`);
      }
    }
  }
});

/**
 * Runs the tiled kernel of `type` on rows × cols weights for `n` entries (count in S[2]) with
 * strides unlike the row length and outputs between other data, and checks every output against
 * the double reference within the bound above, and that nothing outside the outputs changed.
 * Returns the largest |error| / bound seen.
 */
async function checkMatmat(type, rows, cols, n, { accumulate = false } = {}) {
  const { bytes, deq, rowBytes } = weights(type, rows, cols, 500 + type + cols);
  const r = rng(31 + type);
  const xOff = 5, xStride = cols + 3, yOff = xOff + n * xStride + 7, yStride = rows + 2;
  const A = new Float32Array(yOff + n * yStride + 9);
  for (let i = 0; i < A.length; i++) A[i] = r() * 2;
  const S = new Uint32Array([0, 0, n, 0]);
  const [tx, tz] = [Math.ceil(rows / TILE.TM), Math.ceil(n / TILE.TN)];
  const [out] = await run(matmatWgsl(type), {
    A, params: [rows, cols, rowBytes, xOff, xStride, yOff, yStride, accumulate ? 1 : 0, 2], extra: [bytes, S], grid: [tx, 1, tz],
  });
  const got = new Float32Array(out);
  let amax = 0;
  for (const v of deq) amax = Math.max(amax, Math.abs(v));
  const written = new Set();
  let worst = 0;
  for (let e = 0; e < n; e++) {
    let xabs = 0;
    for (let k = 0; k < cols; k++) xabs += Math.abs(A[xOff + e * xStride + k]);
    for (let row = 0; row < rows; row++) {
      const o = yOff + e * yStride + row;
      let want = accumulate ? A[o] : 0, abs = accumulate ? Math.abs(A[o]) : 0;
      for (let k = 0; k < cols; k++) {
        const t = deq[row * cols + k] * A[xOff + e * xStride + k];
        want += t;
        abs += Math.abs(t);
      }
      const K = cols + (accumulate ? 1 : 0);
      const bound = (K * U / (1 - K * U)) * abs + 2 * U * amax * xabs;
      const err = Math.abs(got[o] - want);
      worst = Math.max(worst, err / bound);
      assert.ok(err <= bound, `${GPU_TYPES[type].name} ${rows}×${cols}, ${n} entries: entry ${e} row ${row}: ${got[o]} vs ${want} (bound ${bound})`);
      written.add(o);
    }
  }
  for (let i = 0; i < A.length; i++) if (!written.has(i)) assert.equal(got[i], A[i], `A[${i}] outside the outputs changed`);
  return worst;
}

test('w_sub (the matrix-vector kernel\'s 32-element sub-blocks): each vec4 the bits of w_get4 for every type, Q4_K, Q6_K and Q8_0 by their own code', { skip }, async () => {
  const own = typeIds.filter((t) => GPU_TYPES[t].wgsl32);
  assert.deepEqual(own.map((t) => GPU_TYPES[t].name).sort(), ['Q4_K', 'Q6_K', 'Q8_0']);
  for (const type of typeIds) {
    const rows = 3, cols = GPU_TYPES[type].blk === 256 ? 768 : 288; // whole sub-blocks
    const { bytes, rowBytes } = weights(type, rows, cols, 60 + type);
    const code = `${decoders(type)}
${GPU_TYPES[type].wgsl32 ?? W_SUB_GENERIC}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let sb = wg.x * 64u + t;
  if (32u * sb >= pu(0u)) { return; }
  let r0 = wg.z * pu(1u);
  let w = w_sub(r0, sb);
  let o = 2u * (wg.z * pu(0u) + 32u * sb);
  for (var i = 0u; i < 8u; i++) {
    let v = w_get4(r0, 32u * sb + 4u * i);
    for (var c = 0u; c < 4u; c++) { A[o + 8u * i + c] = w[i][c]; A[o + 8u * i + 4u + c] = v[c]; }
  }
}`;
    const [out] = await run(code, { A: new Float32Array(2 * rows * cols), params: [cols, rowBytes], extra: [bytes], grid: [Math.ceil(cols / 32 / 64), 1, rows] });
    const got = new Uint32Array(out);
    let nonzero = 0;
    for (let g = 0; g < rows * cols / 4; g++) {
      for (let c = 0; c < 4; c++) {
        assert.equal(got[8 * g + c], got[8 * g + 4 + c], `${GPU_TYPES[type].name} element ${4 * g + c}: w_sub ${got[8 * g + c]} vs w_get4 ${got[8 * g + 4 + c]}`);
        if (got[8 * g + c] !== 0) nonzero++;
      }
    }
    assert.ok(nonzero > rows * cols / 2, `${GPU_TYPES[type].name}: ${nonzero} of ${rows * cols} elements written`);
  }
});

test('matmat: every type against C\'s dequantization, sums in double, ragged rows (70), entries (37), columns', { skip }, async (t) => {
  let worst = 0;
  for (const type of typeIds) worst = Math.max(worst, await checkMatmat(type, 70, type === 0 ? colsOfF32 : colsOf(type), 37));
  t.diagnostic(`largest |error| / bound: ${worst.toExponential(2)}`);
});

test('matmat: tile edges — one row, one entry, exactly one tile, a row of 32 columns; accumulate adds to the output', { skip }, async () => {
  await checkMatmat(8, 1, 32, 1);
  await checkMatmat(12, TILE.TM, 256, TILE.TN);
  await checkMatmat(14, TILE.TM + 1, 256, TILE.TN + 1);
  await checkMatmat(0, 3, 4, 9);
  await checkMatmat(2, 65, 64, 8, { accumulate: true });
});

test('matmat: a bias (param 9) joins each sum before it is stored or accumulated: fround(Σ + b), x + that', { skip }, async () => {
  const type = 12, rows = 70, cols = 256, n = 37;
  const { bytes, rowBytes } = weights(type, rows, cols, 61);
  const r = rng(63);
  const yOff = n * cols, bOff = yOff + n * rows;
  const A = new Float32Array(bOff + rows).map(() => r());
  const S = new Uint32Array([0, 0, n, 0]);
  const grid = [Math.ceil(rows / TILE.TM), 1, Math.ceil(n / TILE.TN)];
  const [p0] = await run(matmatWgsl(type), { A, params: [rows, cols, rowBytes, 0, cols, yOff, rows, 0, 2, 0], extra: [bytes, S], grid });
  const sums = new Float32Array(p0);
  for (const acc of [0, 1]) {
    const [out] = await run(matmatWgsl(type), { A, params: [rows, cols, rowBytes, 0, cols, yOff, rows, acc, 2, bOff + 1], extra: [bytes, S], grid });
    const got = new Float32Array(out);
    for (let i = 0; i < n * rows; i++) {
      const v = Math.fround(sums[yOff + i] + A[bOff + (i % rows)]);
      assert.equal(got[yOff + i], acc ? Math.fround(A[yOff + i] + v) : v, `accumulate ${acc} output ${i}`);
    }
  }
});
