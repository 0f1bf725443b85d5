// bench/webgpu_gemm.mjs — the prefill rows of bench/webgpu.mjs: one layer's weight matrices of a
// published shape (attn_q D×D, ffn_up F×D, ffn_down D×F) times a prefill chunk of `entries`
// activations, through the tiled matrix-matrix kernel (js/backend/webgpu/wgsl_matmat.js, what
// the forward pass runs for batches of MATMAT_MIN_ENT entries and more) and through the
// matrix-vector kernel's batch form (4 entries per workgroup: the prefill path before it), side
// by side on one device. Each row: milliseconds per product (median of `runs`, each timing
// `reps` dispatches in one submission, wall clock: no timestamp queries needed), GFLOP/s
// (2·rows·cols·entries per product) and the tiled kernel's speed-up. Decode rows (decodeRows): the
// same matrices times one entry through the matrix-vector kernel, a 32-element sub-block an
// invocation step (w_sub, what the forward pass runs) against one element (w_get), ms and weight
// GB/s. The weight bytes are a fixed pattern with finite scales (their values do not change the
// work).

import { makePipeline } from '../js/backend/webgpu/forward.js';
import { matvecThreadsPerRow, matvecWgsl, WG } from '../js/backend/webgpu/wgsl_ops.js';
import { matmatWgsl, TILE } from '../js/backend/webgpu/wgsl_matmat.js';
import { GPU_TYPES } from '../js/backend/webgpu/wgsl_quant.js';

/** The GGUF weight types a file type's layer matrices hold (Q4_K_M: Q4_K and Q6_K). */
export const MATRIX_TYPES = Object.freeze({ Q4_K_M: [12, 14], Q5_K_M: [13, 14], Q8_0: [8], Q4_0: [2], F16: [1], F32: [0], BF16: [30] });

const median = (v) => { const s = [...v].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };

/** Milliseconds per dispatch of `pipe` with `bind` on `grid` (median of runs of reps). */
async function timeKernel(device, pipe, bind, grid, { runs, reps }) {
  const once = async (n) => {
    const t0 = performance.now();
    const enc = device.createCommandEncoder();
    const pass = enc.beginComputePass();
    pass.setPipeline(pipe);
    pass.setBindGroup(0, bind);
    for (let i = 0; i < n; i++) pass.dispatchWorkgroups(...grid);
    pass.end();
    device.queue.submit([enc.finish()]);
    await device.queue.onSubmittedWorkDone();
    return (performance.now() - t0) / n;
  };
  await once(1); // warm-up: pipeline creation and first-use costs
  const t = [];
  for (let r = 0; r < runs; r++) t.push(await once(reps));
  return median(t);
}

/**
 * The buffers of one product of a rows × cols matrix of type `wt` with `entries` activations:
 * {W, A, S, P, rowBytes, wBytes, bindFor(pipe), destroy()}, or null when a buffer would pass the
 * device's limits.
 */
function productBuffers(device, wt, rows, cols, entries) {
  const t = GPU_TYPES[wt];
  const limit = Math.min(device.limits.maxStorageBufferBindingSize, device.limits.maxBufferSize);
  const rowBytes = (cols / t.blk) * t.bytes;
  const wBytes = (rows * rowBytes + 3) & ~3;
  const aFloats = entries * (cols + rows);
  if (wBytes > limit || aFloats * 4 > limit) return null;
  const W = device.createBuffer({ size: wBytes, usage: 128, mappedAtCreation: true });
  const wb = new Uint8Array(W.getMappedRange());
  for (let i = 0; i < wb.length; i++) wb[i] = (i * 37) & 0x3b; // f16 / bf16 scales finite
  W.unmap();
  const A = device.createBuffer({ size: aFloats * 4, usage: 128 | 8, mappedAtCreation: true });
  new Float32Array(A.getMappedRange()).fill(0.5);
  A.unmap();
  const S = device.createBuffer({ size: 16, usage: 128 | 8, mappedAtCreation: true });
  new Uint32Array(S.getMappedRange()).set([entries, 0, 0, 0]);
  S.unmap();
  const P = device.createBuffer({ size: 64, usage: 64 | 8, mappedAtCreation: true });
  new Uint32Array(P.getMappedRange()).set([rows, cols, rowBytes, 0, cols, entries * cols, rows, 0, 0]);
  P.unmap();
  const bindFor = (pipe, withS = true) => device.createBindGroup({ layout: pipe.getBindGroupLayout(0), entries: [
    { binding: 0, resource: { buffer: A } }, { binding: 1, resource: { buffer: P } },
    { binding: 2, resource: { buffer: W } }, ...(withS ? [{ binding: 3, resource: { buffer: S } }] : [])] });
  return { rowBytes, wBytes, bindFor, destroy: () => { for (const b of [W, A, S, P]) b.destroy(); } };
}

/** [x, y] workgroups for n in a grid of at most maxComputeWorkgroupsPerDimension a side. */
function grid2(device, n) {
  const x = Math.min(n, device.limits.maxComputeWorkgroupsPerDimension);
  return [x, Math.ceil(n / x)];
}

/** One layer's matrices of shape `s`: [name, rows, cols]. */
const layerMatrices = (s) => [['attn_q', s.D, s.D], ['ffn_up', s.F, s.D], ['ffn_down', s.D, s.F]];

/**
 * Prefill rows for shape `s` (resolveShape's {D, F}) and the weight types of file type `type`:
 * [{shape, fileType, weightType, matrix, rows, cols, entries, tiledMs, matvecMs, tiledGflops,
 * matvecGflops, speedup}].
 */
export async function gemmRows(device, shape, s, type, { entries = 32, runs = 3, reps = 5 } = {}) {
  const out = [];
  for (const wt of MATRIX_TYPES[type] ?? []) {
    const t = GPU_TYPES[wt];
    for (const [matrix, rows, cols] of layerMatrices(s)) {
      if (cols % t.blk) continue;
      const b = productBuffers(device, wt, rows, cols, entries);
      if (!b) continue;
      const tiled = await makePipeline(device, matmatWgsl(wt), `bench matmat ${t.name}`);
      const tpr = matvecThreadsPerRow(cols);
      const mv = await makePipeline(device, matvecWgsl(wt, { tpr, ent: 4 }), `bench matvec ${t.name}`);
      const tiledMs = await timeKernel(device, tiled, b.bindFor(tiled), [...grid2(device, Math.ceil(rows / TILE.TM)), Math.ceil(entries / TILE.TN)], { runs, reps });
      const matvecMs = await timeKernel(device, mv, b.bindFor(mv), [...grid2(device, Math.ceil(rows / (WG / tpr))), Math.ceil(entries / 4)], { runs, reps });
      b.destroy();
      const flop = 2 * rows * cols * entries;
      out.push({ shape, fileType: type, weightType: t.name, matrix, rows, cols, entries, tiledMs, matvecMs,
        tiledGflops: flop / tiledMs / 1e6, matvecGflops: flop / matvecMs / 1e6, speedup: matvecMs / tiledMs });
    }
  }
  return out;
}

/**
 * Decode rows for shape `s` and the weight types of file type `type`: each layer matrix times one
 * entry through the matrix-vector kernel as the forward pass runs it (`wide`: a 32-element
 * sub-block an invocation step through w_sub) and through its one-element form (w_get), ms per product and
 * the weight bytes read per second: [{shape, fileType, weightType, matrix, rows, cols, wBytes,
 * wideMs, narrowMs, wideGBps, narrowGBps, speedup}].
 */
export async function decodeRows(device, shape, s, type, { runs = 3, reps = 20 } = {}) {
  const out = [];
  for (const wt of MATRIX_TYPES[type] ?? []) {
    const t = GPU_TYPES[wt];
    for (const [matrix, rows, cols] of layerMatrices(s)) {
      if (cols % t.blk) continue;
      const b = productBuffers(device, wt, rows, cols, 1);
      if (!b) continue;
      const tpr = matvecThreadsPerRow(cols);
      const grid = [...grid2(device, Math.ceil(rows / (WG / tpr))), 1];
      const ms = {};
      for (const wide of [false, true]) {
        const pipe = await makePipeline(device, matvecWgsl(wt, { tpr, wide }), `bench matvec ${t.name} ${wide ? 'wide' : 'narrow'}`);
        ms[wide] = await timeKernel(device, pipe, b.bindFor(pipe, false), grid, { runs, reps });
      }
      b.destroy();
      out.push({ shape, fileType: type, weightType: t.name, matrix, rows, cols, wBytes: b.wBytes, wideMs: ms.true, narrowMs: ms.false,
        wideGBps: b.wBytes / ms.true / 1e6, narrowGBps: b.wBytes / ms.false / 1e6, speedup: ms.false / ms.true });
    }
  }
  return out;
}
