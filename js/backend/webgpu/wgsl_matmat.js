// wgsl_matmat.js — the tiled matrix-matrix kernel (GEMM) of the forward pass: a weight matrix
// times the activations of many entries at once (a prefill chunk), for any weight type of
// wgsl_quant.js. The matrix-vector kernel (wgsl_ops.js) reads each weight once per entry (once
// per 4 in its batch form) and decodes it each time; here a workgroup owns an output tile of
// TM weight rows × TN entries, and for each slice of TK columns it
//   1. decodes the TM × TK weights once into workgroup memory (each type's w_get4: a block's
//      scales read once, its quants a 32-bit word at a time; the ragged end of a row through
//      w_get, element by element, zeros past it),
//   2. copies the TN × TK activations into workgroup memory (zeros past the row and past the
//      entry count),
//   3. and each of its THREADS invocations adds the products of that slice to its own 4 rows ×
//      4 entries of outputs, held in registers (16 fused multiply-adds per column per invocation,
//      from two 4-wide reads of workgroup memory).
// So each weight is decoded once per TN entries and each activation read once per TM rows. Every
// output is one running float sum over its columns in order 0 .. cols − 1 (the C reference
// kernels_ref.c's wlm_matmul_ref order); the matrix-vector kernel adds in another order (lanes,
// then a tree), so a prefill through this kernel and the same tokens one by one agree to float
// rounding, not bit for bit. One kernel body serves every type: only w_get / w_get4 differ.
//
// Bindings and parameters are the matrix-vector batch form's (wgsl_ops.js matvecWgsl): A at 0,
// the 16 parameter words at 1, the weights W at 2, the step buffer S at 3. Params: 0 rows, 1 cols,
// 2 row_bytes, 3 x_off, 4 x_estride, 5 y_off, 6 y_estride, 7 accumulate (1: add to out),
// 8 count_slot (the entry count is S[count_slot]), 9 bias (0: none; else 1 + the offset in A of
// a bias vector added to each sum before it is stored or accumulated: out (+)= (Σ + bias)). Grid: x, y the row tiles (tile g = y · nx + x,
// rows g·TM ..), z the entry tiles (entries z·TN ..).

import { HEADER } from './wgsl_ops.js';
import { GPU_TYPES, WGSL_BYTES, WGSL_WORDS } from './wgsl_quant.js';

/** The tile: TM rows × TN entries per workgroup, TK columns per slice, THREADS invocations (each
 *  4 rows × 4 entries). Workgroup memory: (TM + TN) · TK floats = 12 KiB, under WebGPU's 16 KiB
 *  default maxComputeWorkgroupStorageSize. */
export const TILE = Object.freeze({ TM: 64, TN: 32, TK: 32, THREADS: 128 });

/** Entries from which forward.js multiplies with this kernel rather than the matrix-vector batch
 *  form: below it a 32-entry tile is mostly empty. Not tuned on a real GPU (none here). */
export const MATMAT_MIN_ENT = 8;

/**
 * WGSL of the tiled kernel for weight type `type` (a GGUF type id of GPU_TYPES):
 * out[e][row] (+)= Σ_k W[row][k] · A[x_off + e·x_estride + k] for rows < rows, k < cols and the
 * entries e < S[count_slot] of workgroup z's tile.
 */
export function matmatWgsl(type) {
  const t = GPU_TYPES[type];
  const { TM, TN, TK, THREADS } = TILE;
  return `${HEADER}
@group(0) @binding(2) var<storage, read> W: array<u32>;
@group(0) @binding(3) var<storage, read> S: array<u32>;
${WGSL_BYTES}
${WGSL_WORDS}
${t.wgsl}
${t.wgsl4}
const BLK = ${t.blk}u;
const BLK_BYTES = ${t.bytes}u;
const TM = ${TM}u;
const TN = ${TN}u;
const TK = ${TK}u;
var<workgroup> ws: array<vec4<f32>, ${(TK * TM) / 4}>; // [column][row / 4] of the weight slice
var<workgroup> xs: array<vec4<f32>, ${(TK * TN) / 4}>; // [column][entry / 4] of the activations
fn w_at(r0: u32, k: u32) -> f32 { return w_get(r0 + (k / BLK) * BLK_BYTES, k % BLK); }
@compute @workgroup_size(${THREADS})
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>,
        @builtin(local_invocation_index) t: u32) {
  let rows = pu(0u);
  let cols = pu(1u);
  let m0 = (wg.y * nw.x + wg.x) * TM;
  if (m0 >= rows) { return; }
  let e0 = wg.z * TN;
  let count = S[pu(8u)];
  let ne = select(0u, min(TN, count - e0), count > e0);
  let xstr = pu(4u);
  let x0 = pu(3u) + e0 * xstr;
  // decoding: row lr of the tile, columns lk .. lk + 15 of each slice
  let lr = t / 2u;
  let lk = (t % 2u) * 16u;
  let wlive = m0 + lr < rows;
  let r0 = (m0 + lr) * pu(2u);
  // copying: entry xe of the tile, columns xk .. xk + 7 of each slice
  let xe = t / 4u;
  let xk = (t % 4u) * 8u;
  let xlive = xe < ne;
  // adding: rows 4·tm .. 4·tm + 3, entries 4·tn .. 4·tn + 3 of the tile
  let tm = t % (TM / 4u);
  let tn = t / (TM / 4u);
  var acc: array<vec4<f32>, 4>; // acc[j][i]: entry 4·tn + j, row 4·tm + i
${tileLoopWgsl('A[x0 + xe * xstr + k]')}
  let ystr = pu(6u);
  for (var j = 0u; j < 4u; j++) {
    let e = 4u * tn + j;
    if (e >= ne) { break; }
    for (var i = 0u; i < 4u; i++) {
      let row = m0 + 4u * tm + i;
      if (row < rows) {
        let o = pu(5u) + (e0 + e) * ystr + row;
        var v = acc[j][i];
        if (pu(9u) != 0u) { v = v + A[pu(9u) - 1u + row]; }
        A[o] = select(0.0, A[o], pu(7u) != 0u) + v;
      }
    }
  }
}`;
}

/**
 * The k loop the tiled products share (matmatWgsl; wgsl_moe.js's moeMatmatWgsl, whose entries are
 * an expert's gathered pairs): each TK-column slice of the TM weight rows is decoded into `ws`
 * (thread t: row lr, columns lk .. lk + 15) and of the TN entries' activations into `xs` (entry xe,
 * columns xk .. xk + 7; `xAt` is the WGSL expression of column k of entry xe), then each thread
 * adds its 4 × 4 block into acc — summed in column order.
 */
export function tileLoopWgsl(xAt) {
  return `  for (var k0 = 0u; k0 < cols; k0 += TK) {
    for (var j = 0u; j < 16u; j += 4u) {
      let k = k0 + lk + j;
      var v = vec4<f32>(0.0);
      if (wlive) {
        if (k + 3u < cols) {
          v = w_get4(r0, k);
        } else {
          for (var c = 0u; c < 4u; c++) { if (k + c < cols) { v[c] = w_at(r0, k + c); } }
        }
      }
      for (var c = 0u; c < 4u; c++) { ws[(lk + j + c) * (TM / 4u) + lr / 4u][lr % 4u] = v[c]; }
    }
    for (var j = 0u; j < 8u; j++) {
      let k = k0 + xk + j;
      var xv = 0.0;
      if (xlive && k < cols) { xv = ${xAt}; }
      xs[(xk + j) * (TN / 4u) + xe / 4u][xe % 4u] = xv;
    }
    workgroupBarrier();
    for (var kk = 0u; kk < TK; kk++) {
      let w = ws[kk * (TM / 4u) + tm];
      let x = xs[kk * (TN / 4u) + tn];
      acc[0] += w * x.x;
      acc[1] += w * x.y;
      acc[2] += w * x.z;
      acc[3] += w * x.w;
    }
    workgroupBarrier();
  }`;
}
