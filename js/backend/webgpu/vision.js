// vision.js — the vision encoder of an mmproj (llama.cpp's "clip" GGUF: a SigLIP tower and its
// projector) on the GPU: one preprocessed piece's pixels in, the piece's rows of the text model
// out, the same computation as src/vision/encoder.c (its SigLIP branch) and in its order:
//   patches (3·P·P floats each, (c, ky, kx) order, unfolded here) × v.patch_embd + bias, + the
//   learned positions; per block: LayerNorm → Q, K, V (+ biases) → attention of every patch over
//   all patches (no mask) → attn_out (+ bias) added to the stream → LayerNorm → ffn_up (+ bias) →
//   GELU (tanh, binary16 values) / SiLU / quick GELU → ffn_down (+ bias) added; v.post_ln; then
//   the projector: gemma3 — k×k average pooling, RMSNorm × mm.soft_emb_norm (eps of the tower),
//   mm.input_projection (stored [D_text, W], transposed here once); idefics3 — s×s pixel
//   shuffle, mm.model.fc; lfm2 — s×s pixel unshuffle, LayerNorm (eps 1e-5) × mm.input_norm,
//   mm.1 (+ bias) → GELU → mm.2 (+ bias).
// LFM2-VL (SigLIP2 NaFlex) takes pieces of any size in multiples of P·s: its learned (S/P)²
// positions are resized to each piece's patch grid (resizePositions, encoder.c's
// wlm_resize_positions) and each grid gets its own recorded program, built on first use (a few
// kept, the least recently used given back).
// Weight products are the text model's tiled kernel (wgsl_matmat.js) for every weight type it
// has (F32, F16, BF16, Q8_0, the K-quants ...), norms and GELU / SiLU its norm and glu kernels
// (wgsl_ops.js); attention (full or windowed), the merge, quick GELU and the RoPE table kernel are
// wgsl_vision.js's. Every step of a piece
// is one compute pass over one activation buffer, recorded once at creation.
// Qwen2.5-VL (qwen2.5vl_merger) runs encoder.c's qwen_tower: the patches in the tower's order
// (2×2 groups, window by window: qwenLayout), the two patch kernels added, per block RMSNorm →
// Q, K, V (+ biases) → 2-D RoPE (rope_table, from a cos / sin table per piece size:
// qwenRopeTable) → attention over the whole piece or, on the blocks n_wa_pattern leaves
// windowed, over the patch's window → attn_out added → RMSNorm → SiLU(gate) ⊙ up → down added;
// the final RMSNorm; each group's four rows as one token through mm.0 → GELU → mm.2; the rows
// put back in raster order on readback. Pieces of any size in multiples of 2P, as LFM2's.
// The weights come checked from vision_weights.js (readMmproj, towerWeights). It does not
// preprocess (C does: wlmjs_vision_preprocess, src/vision/preprocess.c) or decode images; the
// engine calls it (encodeImageOnGpu) when the text model runs on the GPU and the adapter's
// limits take the tower (js/engine/engine.js).
// Source of the math: llama.cpp tools/mtmd (clip.cpp, models/siglip.cpp, models/lfm2.cpp,
// models/qwen2vl.cpp), as
// /work/shared/reference/vision-mmproj.md §5-6 writes it down.

import { jsError, STATUS, WasmlmError } from '../../runtime/errors.js';
import { makePipeline, Pipelines } from './forward.js';
import { TILE } from './wgsl_matmat.js';
import { NONE, WG } from './wgsl_ops.js';
import { typeName } from './wgsl_quant.js';
import { checkFits, USAGE } from './weights.js';
import { qwenLayout, qwenRopeTable, resizePositions } from './vision_grid.js';
import { MAX_PATCHES, towerWeights } from './vision_weights.js';
import { attentionFullWgsl, geluQuickWgsl, mergeWgsl, ropeTableWgsl } from './wgsl_vision.js';

export { GPU_VISION_PROJECTORS, readMmproj, tensorFloats } from './vision_weights.js';

const GRIDS_KEPT = 4; // LFM2: the piece sizes whose programs stay built (the S × S one besides)
const PARAM_SLOT = 256; // bytes between parameter blocks (minUniformBufferOffsetAlignment)

/** A float's bits as u32, for the parameter words. */
const fbits = (() => {
  const f = new Float32Array(1);
  const u = new Uint32Array(f.buffer);
  return (v) => { f[0] = v; return u[0]; };
})();

/** wgsl_vision.js's pipelines, compiled once per device (a device's pipelines are immutable;
 *  the entry goes with the device). */
const OWN_PIPELINES = new WeakMap();
function ownPipelines(device) {
  let p = OWN_PIPELINES.get(device);
  if (!p) {
    p = Promise.all([makePipeline(device, attentionFullWgsl(), 'vision attention'),
      makePipeline(device, mergeWgsl(), 'vision merge'), makePipeline(device, geluQuickWgsl(), 'vision gelu_quick'),
      makePipeline(device, ropeTableWgsl(), 'vision rope')]);
    p.catch(() => OWN_PIPELINES.delete(device));
    OWN_PIPELINES.set(device, p);
  }
  return p;
}

/**
 * A GPU vision encoder for one mmproj on `device`: `tensors` and `info` as readMmproj returns them
 * (tensors: a Map or an object of name → {type, ne (ggml order), data: Uint8Array}; every byte is
 * copied to the GPU before the first await, so views into wasm memory may be passed). Options:
 * `pipelines` (forward.js Pipelines, to share compiled kernels with the text model's backend;
 * this module's own three are compiled once per device).
 * Returns {info, tokens (rows of an S × S piece), width (floats per row: D_text), bytes (GPU
 * memory held now), tokensOf(w, h) (rows of a w × h piece, 0 for a size it does not take),
 * encodePiece(pixels, w, h) → Promise<Float32Array> (tokensOf(w, h) × width rows of the piece;
 * pixels: 3 × h × w floats, planes R, G, B, row-major, normalised, as wlmjs_vision_preprocess
 * gives them; w = h = the encoder's image size S, or for lfm2 and qwen2.5vl_merger any sides
 * that are multiples of P·s with at most 16384 patches — a new size builds its program first, the GRIDS_KEPT latest
 * kept besides S × S's), destroy()}. One encodePiece at a time (the calls queue on
 * the device in order; each one's result is its own array); an error in one (a bad size, out of
 * GPU memory for a new size's buffers) leaves the queue going. Throws WLM_ERR_FORMAT for a missing
 * or misshapen tensor (named), WLM_ERR_UNSUPPORTED for a weight type without GPU kernels, a head
 * size above VISION_MAX_HEAD or buffers above the device's limits, WLM_ERR_NOMEM when the GPU is
 * out of memory.
 */
export async function createGpuVisionEncoder(device, tensors, info, { pipelines = null } = {}) {
  const { projector, S, P, W, F, H, eps, s, G, N, K, hd, qwen, dyn, mats, patch, patch1, patchB, pos, preW, preB,
    layers, postW, postB, mmNorm, proj, proj2, projB, proj2B, inNormW, inNormB, IN, D } = towerWeights(tensors, info);
  const maxZ = device.limits.maxComputeWorkgroupsPerDimension;

  // the vectors the norm and add_vec kernels read (V), shared by every piece size
  const pad = (n) => (n + 3) & ~3;
  const vecAt = new Map();
  let nv = 0;
  const norms = [...layers.flatMap((l) => [l.ln1w, l.ln1b, l.ln2w, l.ln2b]), postW, postB, mmNorm, inNormW, inNormB, preW, preB]
    .filter((v) => v);
  for (const v of norms) { vecAt.set(v, nv); nv += pad(v.length); }
  const biases = [patchB, ...layers.flatMap((l) => [l.qb, l.kb, l.vb, l.ob, l.gateb, l.upb, l.downb]), projB, proj2B].filter((v) => v);
  for (const m of mats) checkFits(device, `tensor ${m.name} (${typeName(m.type)}, ${m.rows}×${m.cols})`, m.rows * m.rowBytes);

  const shared = [];
  let sharedBytes = 0;
  const upload = (label, size, usage, data = null, into = shared) => {
    const b = device.createBuffer({ label, size: Math.max(16, pad(size)), usage, mappedAtCreation: !!data });
    if (data) {
      new Uint8Array(b.getMappedRange(), 0, data.byteLength).set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
      b.unmap();
    }
    into.push(b);
    return b;
  };
  device.pushErrorScope('out-of-memory');
  let wbuf, V;
  try {
    wbuf = new Map(mats.map((m) => [m, upload(`vision ${m.name}`, m.data.byteLength, USAGE.STORAGE, m.data)]));
    const vf = new Float32Array(Math.max(4, nv));
    for (const v of norms) vf.set(v, vecAt.get(v));
    V = upload('vision vectors', vf.byteLength, USAGE.STORAGE, vf);
  } finally {
    const oom = await device.popErrorScope();
    sharedBytes = shared.reduce((a, b) => a + b.size, 0);
    if (oom || !V) for (const b of shared) b.destroy();
    if (oom) throw jsError('WLM_ERR_NOMEM', `WebGPU: out of GPU memory for the vision encoder's weights (${sharedBytes} bytes): ${oom.message}`);
  }
  // (every byte of `tensors` is copied by now: they may be views into a wasm memory that grows
  // while the kernels compile)

  /**
   * The program of one piece size: a GW × GH patch grid (N patches, T rows out) — its activation
   * buffer A (floats: the stream x, the normed / attention rows h, q, k, v, the MLP's rows f (also
   * the unfolded patches and the projector's hidden rows), the positions (resized for this grid
   * where the tower's are), the biases, the piece's rows out), its parameters and bind groups.
   */
  const buildGrid = async (GW, GH) => {
    const N = GW * GH, T = (GW / s) * (GH / s);
    if (N > maxZ) throw jsError('WLM_ERR_UNSUPPORTED', `mmproj: ${N} patches a piece is above the device's ${maxZ} workgroups a dimension`);
    const off = {};
    let at = 0;
    const half = hd / 2;
    for (const [k, n] of [['x', N * W], ['h', N * W], ['q', Math.max(N * W, T * IN)], ['k', N * W], ['v', N * W],
      ['f', Math.max(N * Math.max(F, K), T * (proj2 ? proj.rows : 0))], ['g', qwen ? N * F : 0], ['out', T * D],
      ['pos', qwen ? N * half * 2 + N * 2 : N * W]]) { off[k] = at; at += pad(n); }
    // Qwen: the patches' order through the tower (2×2 groups, window by window), the RoPE table
    // (cos then sin, hd/2 a patch) and each patch's window (first, count) where pos is
    const lay = qwen ? qwenLayout(GW, GH, Math.floor(info.window / P / 2)) : null;
    const biasAt = new Map();
    for (const b of biases) { biasAt.set(b, at); at += pad(b.length); }
    const aFloats = at;
    checkFits(device, `the vision encoder's activations (${N} patches of ${W})`, aFloats * 4);
    const own = [];
    const mk = (label, size, usage, data = null) => upload(label, size, usage, data, own);
    const ops = []; // [pipeline, params words, extra bindings, grid]
    device.pushErrorScope('out-of-memory');
    let popped = false;
    try {
      const A = mk('vision activations', aFloats * 4, USAGE.STORAGE | USAGE.COPY_DST | USAGE.COPY_SRC);
      const init = new Float32Array(aFloats - off.pos);
      if (qwen) init.set(qwenRopeTable(lay.pos, hd), 0), init.set(lay.win, 2 * N * half);
      else init.set(GW === G && GH === G ? pos : resizePositions(pos, G, W, GW, GH), 0);
      for (const b of biases) init.set(b, biasAt.get(b) - off.pos);
      device.queue.writeBuffer(A, off.pos * 4, init);
      const Sb = mk('vision counts', 16, USAGE.STORAGE, new Uint32Array([N, T, 0, 0]));
      const staging = mk('vision rows', T * D * 4, USAGE.MAP_READ | USAGE.COPY_DST);
      const pipes = pipelines ?? new Pipelines(device);
      const [attPipe, mergePipe, quickPipe, ropePipe] = await ownPipelines(device);

      const tiles = (rows) => { const n = Math.ceil(rows / TILE.TM), x = Math.min(n, maxZ); return [x, Math.ceil(n / x)]; };
      const wgs = (n) => Math.ceil(n / WG);
      // y (n rows of m.rows at yOff) (+)= x (n rows of m.cols at xOff) · mᵀ (+ bias)
      const matmul = async (m, xOff, yOff, n, { acc = false, bias = null } = {}) => {
        const [tx, ty] = tiles(m.rows);
        ops.push([await pipes.get('matmat', m.type), [m.rows, m.cols, m.rowBytes, xOff, m.cols, yOff, m.rows, acc ? 1 : 0,
          n === N ? 0 : 1, bias ? biasAt.get(bias) + 1 : 0], [{ buffer: wbuf.get(m) }, { buffer: Sb }], [tx, ty, Math.ceil(n / TILE.TN)]]);
      };
      const norm = async (len, xOff, yOff, n, w, b, layer, e = eps) => {
        ops.push([await pipes.get('norm', ''), [len, xOff, len, 0, yOff, len, 0, vecAt.get(w), b ? vecAt.get(b) : NONE,
          layer ? 1 : 0, fbits(e), NONE], [{ buffer: V }, { buffer: Sb }], [1, 1, n]]);
      };
      const gelu = async (o, len, n) => {
        ops.push([await pipes.get('eltwise', 'glu'), [o, len, 0, 0, len, 1, 0], [], [wgs(len), 1, n]]);
      };
      const addVec = async (o, len, n, vec) => {
        ops.push([await pipes.get('eltwise', 'add_vec'), [o, len, vecAt.get(vec), len], [{ buffer: V }], [wgs(len), 1, n]]);
      };
      const rms = async (xOff, yOff, w, b) => { // encoder.c OP_RMS: RMSNorm × w, + b where the file has one
        await norm(W, xOff, yOff, N, w, null, false);
        if (b) await addVec(yOff, W, N, b);
      };
      if (qwen) {
        // the two kernels of the temporal patch over the same still image, added; then the blocks
        await matmul(patch, off.f, off.x, N);
        await matmul(patch1, off.f, off.x, N, { acc: true });
        if (preW) await rms(off.x, off.x, preW, preB);
        const cosOff = off.pos, sinOff = off.pos + N * half, winOff = off.pos + 2 * N * half;
        for (const [i, l] of layers.entries()) {
          const full = info.nWaPattern <= 0 || (i + 1) % info.nWaPattern === 0;
          await rms(off.x, off.h, l.ln1w, l.ln1b);
          await matmul(l.q, off.h, off.q, N, { bias: l.qb });
          await matmul(l.k, off.h, off.k, N, { bias: l.kb });
          await matmul(l.v, off.h, off.v, N, { bias: l.vb });
          ops.push([ropePipe, [off.q, W, hd, cosOff, sinOff], [], [H, 1, N]]);
          ops.push([ropePipe, [off.k, W, hd, cosOff, sinOff], [], [H, 1, N]]);
          ops.push([attPipe, [N, W, hd, off.q, off.k, off.v, off.h, fbits(1 / Math.sqrt(hd)), full ? NONE : winOff], [], [H, 1, N]]);
          await matmul(l.o, off.h, off.x, N, { acc: true, bias: l.ob });
          await rms(off.x, off.h, l.ln2w, l.ln2b);
          await matmul(l.gate, off.h, off.f, N, { bias: l.gateb });
          await matmul(l.up, off.h, off.g, N, { bias: l.upb });
          ops.push([await pipes.get('eltwise', 'glu'), [off.f, F, off.g, F, F, 0, 1], [], [wgs(F), 1, N]]);
          await matmul(l.down, off.f, off.x, N, { acc: true, bias: l.downb });
        }
        await rms(off.x, off.h, postW, postB);
        // each 2×2 group's four patches are consecutive rows of h: a token's 4W inputs as they lie
        await matmul(proj, off.h, off.f, T, { bias: projB });
        await gelu(off.f, proj.rows, T);
        await matmul(proj2, off.f, off.out, T, { bias: proj2B });
      } else {
      await matmul(patch, off.f, off.x, N, { bias: patchB });
      ops.push([await pipes.get('eltwise', 'add'), [off.x, W, off.pos, W, W], [], [wgs(W), 1, N]]);
      for (const l of layers) {
        await norm(W, off.x, off.h, N, l.ln1w, l.ln1b, true);
        await matmul(l.q, off.h, off.q, N, { bias: l.qb });
        await matmul(l.k, off.h, off.k, N, { bias: l.kb });
        await matmul(l.v, off.h, off.v, N, { bias: l.vb });
        ops.push([attPipe, [N, W, hd, off.q, off.k, off.v, off.h, fbits(1 / Math.sqrt(hd)), NONE], [], [H, 1, N]]);
        await matmul(l.o, off.h, off.x, N, { acc: true, bias: l.ob });
        await norm(W, off.x, off.h, N, l.ln2w, l.ln2b, true);
        await matmul(l.up, off.h, off.f, N, { bias: l.upb });
        if (info.act === 'gelu_quick') ops.push([quickPipe, [off.f, F, F], [], [wgs(F), 1, N]]);
        else if (info.act === 'gelu') await gelu(off.f, F, N);
        else ops.push([await pipes.get('eltwise', 'glu'), [off.f, F, 0, 0, F, 0, 0], [], [wgs(F), 1, N]]);
        await matmul(l.down, off.f, off.x, N, { acc: true, bias: l.downb });
      }
      await norm(W, off.x, off.h, N, postW, postB, true);
      if (projector === 'gemma3') {
        ops.push([mergePipe, [off.h, off.q, GW, s, W, 0], [], [wgs(W), 1, T]]);
        await norm(W, off.q, off.q, T, mmNorm, null, false);
      } else {
        ops.push([mergePipe, [off.h, off.q, GW, s, W, 1], [], [wgs(IN), 1, T]]);
      }
      if (!proj2) {
        await matmul(proj, off.q, off.out, T);
      } else { // lfm2: the input LayerNorm (eps 1e-5, or its bias alone), mm.1 + bias → GELU → mm.2 + bias
        if (inNormW) await norm(IN, off.q, off.q, T, inNormW, inNormB, true, 1e-5);
        else if (inNormB) ops.push([await pipes.get('eltwise', 'add_vec'), [off.q, IN, vecAt.get(inNormB), IN], [{ buffer: V }], [wgs(IN), 1, T]]);
        await matmul(proj, off.q, off.f, T, { bias: projB });
        await gelu(off.f, proj.rows, T);
        await matmul(proj2, off.f, off.out, T, { bias: proj2B });
      }
      }

      const params = mk('vision params', ops.length * PARAM_SLOT, USAGE.UNIFORM | USAGE.COPY_DST);
      const words = new Uint32Array((ops.length * PARAM_SLOT) / 4);
      ops.forEach(([, p], i) => words.set(p.map((v) => v >>> 0), (i * PARAM_SLOT) / 4));
      device.queue.writeBuffer(params, 0, words);
      const program = ops.map(([pipe, , extra, grid], i) => ({
        pipe, grid,
        bind: device.createBindGroup({ layout: pipe.getBindGroupLayout(0), entries: [
          { binding: 0, resource: { buffer: A } }, { binding: 1, resource: { buffer: params, offset: i * PARAM_SLOT, size: 64 } },
          ...extra.map((r, j) => ({ binding: 2 + j, resource: r }))] }),
      }));
      const grid = { GW, GH, N, T, A, off, staging, program, perm: lay?.perm, buffers: own, bytes: own.reduce((a, b) => a + b.size, 0) };
      popped = true;
      const oom = await device.popErrorScope();
      if (oom) throw jsError('WLM_ERR_NOMEM', `WebGPU: out of GPU memory for the vision encoder (${sharedBytes + grid.bytes} bytes): ${oom.message}`);
      return grid;
    } catch (e) {
      if (!popped) await device.popErrorScope().catch(() => {});
      for (const b of own) b.destroy();
      throw e;
    }
  };

  // the programs by piece size: the S × S one built now; LFM2's other sizes when a piece has
  // them, the GRIDS_KEPT most recently used kept (the others' buffers given back)
  const grids = new Map();
  try {
    grids.set(`${G}x${G}`, await buildGrid(G, G));
  } catch (e) {
    for (const b of shared) b.destroy();
    throw e;
  }
  const gridFor = async (GW, GH) => {
    const key = `${GW}x${GH}`;
    let g = grids.get(key);
    if (g) { grids.delete(key); grids.set(key, g); return g; }
    g = await buildGrid(GW, GH);
    grids.set(key, g);
    for (const [k, old] of grids) {
      if (grids.size <= GRIDS_KEPT + 1) break;
      if (k === `${G}x${G}` || old === g) continue;
      for (const b of old.buffers) b.destroy();
      grids.delete(k);
    }
    return g;
  };

  let destroyed = false;
  let queue = Promise.resolve();
  const m = P * s;
  const fits = (w, h) => (dyn
    ? Number.isInteger(w) && Number.isInteger(h) && w > 0 && h > 0 && w % m === 0 && h % m === 0 && (w / P) * (h / P) <= MAX_PATCHES
    : w === S && h === S);
  const run = async (pixels, w, h) => {
    if (destroyed) throw jsError('WLM_ERR_STATE', 'the GPU vision encoder was destroyed');
    if (!fits(w, h)) {
      throw jsError('WLM_ERR_INVALID_ARG', dyn
        ? `a piece of ${w}×${h} pixels: this encoder takes sides that are multiples of ${m}, at most ${MAX_PATCHES} patches of ${P}×${P}`
        : `a piece of ${w}×${h} pixels: this encoder takes ${S}×${S}`);
    }
    if (!(pixels instanceof Float32Array) || pixels.length !== 3 * w * h) {
      throw jsError('WLM_ERR_INVALID_ARG', `a piece's pixels must be a Float32Array of 3 × ${w} × ${h} = ${3 * w * h} floats`);
    }
    const GW = w / P, GH = h / P;
    const g = await gridFor(GW, GH);
    if (destroyed) throw jsError('WLM_ERR_STATE', 'the GPU vision encoder was destroyed');
    // the patches: row p = (c, ky, kx) of patch p, raster order (encoder.c's unfolding)
    const rows = new Float32Array(g.N * K);
    let r = 0;
    if (qwen) { // in the tower's order: group perm[i]'s four patches, row by row
      const gw2 = GW / 2;
      for (const grp of g.perm) {
        for (let k = 0; k < 4; k++) {
          const py = 2 * Math.floor(grp / gw2) + (k >> 1), px = 2 * (grp % gw2) + (k & 1);
          for (let c = 0; c < 3; c++) {
            for (let ky = 0; ky < P; ky++) {
              const src = (c * h + py * P + ky) * w + px * P;
              rows.set(pixels.subarray(src, src + P), r);
              r += P;
            }
          }
        }
      }
    }
    for (let py = 0; py < GH && !qwen; py++) {
      for (let px = 0; px < GW; px++) {
        for (let c = 0; c < 3; c++) {
          for (let ky = 0; ky < P; ky++) {
            const src = (c * h + py * P + ky) * w + px * P;
            rows.set(pixels.subarray(src, src + P), r);
            r += P;
          }
        }
      }
    }
    device.queue.writeBuffer(g.A, g.off.f * 4, rows);
    const enc = device.createCommandEncoder({ label: 'vision piece' });
    const pass = enc.beginComputePass();
    for (const op of g.program) {
      pass.setPipeline(op.pipe);
      pass.setBindGroup(0, op.bind);
      pass.dispatchWorkgroups(...op.grid);
    }
    pass.end();
    enc.copyBufferToBuffer(g.A, g.off.out * 4, g.staging, 0, g.T * D * 4);
    device.queue.submit([enc.finish()]);
    await g.staging.mapAsync(USAGE.MAP_READ);
    let out = new Float32Array(g.staging.getMappedRange(0, g.T * D * 4).slice(0));
    g.staging.unmap();
    if (qwen) { // the groups back from the windows' order to raster order
      const o = new Float32Array(out.length);
      g.perm.forEach((grp, i) => o.set(out.subarray(i * D, (i + 1) * D), grp * D));
      out = o;
    }
    return out;
  };
  return {
    info: Object.freeze({ ...info }), tokens: (G / s) ** 2, width: D,
    get bytes() { let n = sharedBytes; for (const g of grids.values()) n += g.bytes; return n; },
    tokensOf(w, h) { return fits(w, h) ? (w / P / s) * (h / P / s) : 0; },
    encodePiece(pixels, w, h) {
      const p = queue.then(() => run(pixels, w, h));
      queue = p.catch(() => {});
      return p;
    },
    destroy() {
      if (destroyed) return;
      destroyed = true;
      for (const b of shared) b.destroy();
      for (const g of grids.values()) for (const b of g.buffers) b.destroy();
      grids.clear();
    },
  };
}

/**
 * One image's rows encoded on the GPU, as the wasm engine takes an encoded image: C cuts and
 * normalises the image into pieces (wlmjs_vision_preprocess, as wlm_image_encode does), each piece
 * runs through `encoder` (createGpuVisionEncoder's), and C wraps the rows
 * (wlmjs_image_embd_from_rows). `x`: the wasm exports; `vision`: the engine's wlm_vision pointer
 * (the same mmproj as `encoder`'s); `rgbPtr`: width × height × 3 bytes in x's memory. Returns the
 * wlm_image_embd pointer, what wlmjs_image_encode returns (release with wlmjs_image_embd_free).
 * Throws WasmlmError with C's message (an image outside the limits, out of memory), or the
 * encoder's.
 */
export async function encodeImageOnGpu(x, vision, encoder, rgbPtr, width, height) {
  const cError = (rc) => {
    const code = Object.keys(STATUS).find((k) => STATUS[k] === rc) ?? 'WLM_ERR_STATE';
    const at = x.wlm_vision_errmsg(vision) >>> 0;
    const bytes = new Uint8Array(x.memory.buffer, at, Math.min(512, x.memory.buffer.byteLength - at));
    const msg = new TextDecoder().decode(bytes.subarray(0, Math.max(0, bytes.indexOf(0))));
    return new WasmlmError(msg || `image: status ${rc}`, code, rc);
  };
  const slot = x.wlmjs_malloc(24) >>> 0; // status, then the 5 dims
  if (!slot) throw jsError('WLM_ERR_NOMEM', 'cannot allocate 24 bytes');
  let pix = 0, rows = 0;
  try {
    const i32 = () => new Int32Array(x.memory.buffer, slot, 6);
    pix = x.wlmjs_vision_preprocess(vision, rgbPtr, width, height, slot + 4, slot) >>> 0;
    if (!pix) throw cError(i32()[0]);
    const [, n, tw, th, lw, lh] = i32();
    const parts = [];
    let at = pix;
    for (let i = 0; i < n; i++) {
      const [pw, ph] = i === n - 1 ? [lw, lh] : [tw, th];
      const pixels = new Float32Array(x.memory.buffer, at, 3 * pw * ph).slice();
      parts.push(await encoder.encodePiece(pixels, pw, ph));
      at += 3 * pw * ph * 4;
    }
    x.wlmjs_free(pix);
    pix = 0;
    const total = parts.reduce((a, p) => a + p.length, 0);
    rows = x.wlmjs_malloc(Math.max(4, total * 4)) >>> 0;
    if (!rows) throw jsError('WLM_ERR_NOMEM', `cannot allocate ${total * 4} bytes for an image's rows`);
    let o = 0;
    for (const p of parts) { new Float32Array(x.memory.buffer, rows + 4 * o, p.length).set(p); o += p.length; }
    const e = x.wlmjs_image_embd_from_rows(vision, width, height, rows, total, slot) >>> 0;
    if (!e) throw cError(i32()[0]);
    return e;
  } finally {
    if (pix) x.wlmjs_free(pix);
    if (rows) x.wlmjs_free(rows);
    x.wlmjs_free(slot);
  }
}
