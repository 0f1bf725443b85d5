// vision.js — the vision encoder of an mmproj (llama.cpp's "clip" GGUF: a SigLIP tower and its
// projector) on the GPU: one preprocessed piece's pixels in, the piece's rows of the text model
// out, the same computation as src/vision/encoder.c (its SigLIP branch) and in its order:
//   patches (3·P·P floats each, (c, ky, kx) order, unfolded here) × v.patch_embd + bias, + the
//   learned positions; per block: LayerNorm → Q, K, V (+ biases) → attention of every patch over
//   all patches (no mask) → attn_out (+ bias) added to the stream → LayerNorm → ffn_up (+ bias) →
//   GELU (tanh, binary16 values) / SiLU / quick GELU → ffn_down (+ bias) added; v.post_ln; then
//   the projector: gemma3 — k×k average pooling, RMSNorm × mm.soft_emb_norm (eps of the tower),
//   mm.input_projection (stored [D_text, W], transposed here once); idefics3 — s×s pixel
//   shuffle, mm.model.fc.
// Weight products are the text model's tiled kernel (wgsl_matmat.js) for every weight type it
// has (F32, F16, BF16, Q8_0, the K-quants ...), norms and GELU / SiLU its norm and glu kernels
// (wgsl_ops.js); attention, the merge and quick GELU are wgsl_vision.js's. Every step of a piece
// is one compute pass over one activation buffer, recorded once at creation.
// It does not preprocess (C does: wlmjs_vision_preprocess, src/vision/preprocess.c), decode images,
// or run LFM2's or Qwen2.5-VL's towers (dynamic sizes, 2-D RoPE: the CPU encoder has them), and
// the engine does not call it yet (js/engine/engine.js encodes images on the CPU).
// Source of the math: llama.cpp tools/mtmd (clip.cpp, models/siglip.cpp), as
// /work/shared/reference/vision-mmproj.md §5-6 writes it down.

import { jsError, STATUS, WasmlmError } from '../../runtime/errors.js';
import { readGgufLayout } from '../../models/split.js';
import { makePipeline, Pipelines } from './forward.js';
import { TILE } from './wgsl_matmat.js';
import { NONE, WG } from './wgsl_ops.js';
import { GPU_TYPES, typeName } from './wgsl_quant.js';
import { checkFits, USAGE } from './weights.js';
import { attentionFullWgsl, geluQuickWgsl, mergeWgsl, VISION_MAX_HEAD } from './wgsl_vision.js';

/** The projector types this encoder runs (clip.projector_type). */
export const GPU_VISION_PROJECTORS = Object.freeze(['gemma3', 'idefics3']);
const DEFAULT_SCALE = { gemma3: 4, idefics3: 0 }; // 0: the key is required
const MAX_PATCHES = 16384; // WLM_VISION_MAX_PATCHES (src/vision/vision.h): N = (S/P)²
const PARAM_SLOT = 256; // bytes between parameter blocks (minUniformBufferOffsetAlignment)
const bad = (msg) => jsError('WLM_ERR_FORMAT', `mmproj: ${msg}`);

/** A float's bits as u32, for the parameter words. */
const fbits = (() => {
  const f = new Float32Array(1);
  const u = new Uint32Array(f.buffer);
  return (v) => { f[0] = v; return u[0]; };
})();

/** binary16 bits → number (exact, subnormals included). */
function f16(h) {
  const e = (h >> 10) & 0x1f, m = h & 0x3ff, s = h & 0x8000 ? -1 : 1;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 31) return m ? NaN : s * Infinity;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}

/**
 * The n first elements of tensor `t` ({type, data}) as floats, as C's to_float gives them: F32,
 * F16, BF16 and Q8_0 (d · q, one float product). Throws WLM_ERR_UNSUPPORTED for other types.
 */
export function tensorFloats(t, n, name) {
  const dv = new DataView(t.data.buffer, t.data.byteOffset, t.data.byteLength);
  const need = (bytes) => { if (t.data.byteLength < bytes) throw bad(`tensor '${name}' is cut short`); };
  need({ 0: 4, 1: 2, 30: 2, 8: 34 / 32 }[t.type] * n || 0); // before the allocation
  const out = new Float32Array(n);
  if (t.type === 0) { need(4 * n); for (let i = 0; i < n; i++) out[i] = dv.getFloat32(4 * i, true); return out; }
  if (t.type === 1) { need(2 * n); for (let i = 0; i < n; i++) out[i] = f16(dv.getUint16(2 * i, true)); return out; }
  if (t.type === 30) {
    need(2 * n);
    const bits = new Uint32Array(out.buffer);
    for (let i = 0; i < n; i++) bits[i] = dv.getUint16(2 * i, true) << 16;
    return out;
  }
  if (t.type === 8 && n % 32 === 0) {
    need((n / 32) * 34);
    for (let b = 0; b < n / 32; b++) {
      const d = f16(dv.getUint16(34 * b, true));
      for (let i = 0; i < 32; i++) out[32 * b + i] = Math.fround(d * dv.getInt8(34 * b + 2 + i));
    }
    return out;
  }
  throw jsError('WLM_ERR_UNSUPPORTED', `mmproj: tensor '${name}' has ${typeName(t.type)}, which the GPU encoder reads only as F32, F16, BF16 or Q8_0`);
}

/**
 * An mmproj GGUF's hyperparameters and tensors, read from its bytes (a Uint8Array of the whole
 * file; the tensors are views into it, not copies): {info, tensors}. info: {projector, imageSize,
 * patchSize, nEmbd, nFf, nLayers, nHeads, eps, scaleFactor, act ('gelu' | 'silu' |
 * 'gelu_quick')} as src/vision/mmproj.c reads them (clip.* keys); tensors: Map name → {type, ne,
 * data}. Throws WLM_ERR_FORMAT for a file that is not a readable mmproj (naming the key or
 * tensor), WLM_ERR_UNSUPPORTED for a projector other than GPU_VISION_PROJECTORS.
 */
export function readMmproj(bytes) {
  let layout;
  try {
    layout = readGgufLayout(bytes, 'mmproj');
  } catch (e) {
    if (e?.code) throw e;
    throw bad('the GGUF header is cut short');
  }
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const kv = new Map(layout.kvs.map((k) => [k.key, k]));
  // a scalar by its GGUF type (after the key: u64 length, the name, u32 type)
  const scalar = (key) => {
    const k = kv.get(key);
    if (!k) return undefined;
    const at = k.start + 8 + new TextEncoder().encode(key).length;
    const type = dv.getUint32(at, true), v = at + 4;
    switch (type) {
      case 0: return dv.getUint8(v);
      case 1: return dv.getInt8(v);
      case 2: return dv.getUint16(v, true);
      case 3: return dv.getInt16(v, true);
      case 4: return dv.getUint32(v, true);
      case 5: return dv.getInt32(v, true);
      case 6: return dv.getFloat32(v, true);
      case 7: return dv.getUint8(v) !== 0;
      case 8: return k.value;
      case 10: return Number(dv.getBigUint64(v, true));
      case 11: return Number(dv.getBigInt64(v, true));
      case 12: return dv.getFloat64(v, true);
      default: return null; // an array
    }
  };
  const u32 = (key, lo, hi) => {
    const v = scalar(key);
    if (!Number.isInteger(v)) throw bad(`key '${key}' is missing or not an integer`);
    if (v < lo || v > hi) throw bad(`key '${key}' = ${v} is outside ${lo}..${hi}`);
    return v;
  };
  if (scalar('general.architecture') !== 'clip') throw bad('general.architecture is not "clip": not an mmproj file');
  const projector = scalar('clip.projector_type') ?? scalar('clip.vision.projector_type');
  if (typeof projector !== 'string') throw bad('clip.projector_type is missing');
  if (!GPU_VISION_PROJECTORS.includes(projector)) {
    throw jsError('WLM_ERR_UNSUPPORTED', `mmproj: the GPU encoder runs the projectors ${GPU_VISION_PROJECTORS.join(', ')}, not '${projector}'`);
  }
  const info = {
    projector,
    imageSize: u32('clip.vision.image_size', 1, 4096),
    patchSize: u32('clip.vision.patch_size', 1, 4096),
    nEmbd: u32('clip.vision.embedding_length', 1, 16384),
    nFf: u32('clip.vision.feed_forward_length', 1, 16384),
    nLayers: u32('clip.vision.block_count', 1, 256),
    nHeads: u32('clip.vision.attention.head_count', 1, 16384),
    eps: scalar('clip.vision.attention.layer_norm_epsilon'),
    scaleFactor: kv.has('clip.vision.projector.scale_factor') ? u32('clip.vision.projector.scale_factor', 1, 64) : DEFAULT_SCALE[projector],
    act: scalar('clip.use_gelu') === true ? 'gelu' : scalar('clip.use_silu') === true ? 'silu' : 'gelu_quick',
  };
  if (!(typeof info.eps === 'number' && info.eps > 0 && Number.isFinite(info.eps))) {
    throw bad('clip.vision.attention.layer_norm_epsilon is missing or not positive');
  }
  if (!info.scaleFactor) throw bad(`clip.vision.projector.scale_factor is missing (projector '${projector}' needs it)`);
  const tensors = new Map();
  const ends = layout.tensors.map((t) => t.offset).sort((a, b) => a - b);
  for (const t of layout.tensors) {
    const at = layout.dataOffset + t.offset;
    const next = ends.find((o) => o > t.offset);
    const end = next === undefined ? bytes.byteLength : layout.dataOffset + next;
    if (at > bytes.byteLength || end > bytes.byteLength) throw bad(`tensor '${t.name}' lies past the end of the file`);
    tensors.set(t.name, { type: t.type, ne: t.ne, data: bytes.subarray(at, end) });
  }
  return { info, tensors };
}

/** wgsl_vision.js's pipelines, compiled once per device (a device's pipelines are immutable;
 *  the entry goes with the device). */
const OWN_PIPELINES = new WeakMap();
function ownPipelines(device) {
  let p = OWN_PIPELINES.get(device);
  if (!p) {
    p = Promise.all([makePipeline(device, attentionFullWgsl(), 'vision attention'),
      makePipeline(device, mergeWgsl(), 'vision merge'), makePipeline(device, geluQuickWgsl(), 'vision gelu_quick')]);
    p.catch(() => OWN_PIPELINES.delete(device));
    OWN_PIPELINES.set(device, p);
  }
  return p;
}

/** Bytes of a row of `cols` elements of GPU type `type`, or 0 when cols is not whole blocks. */
function rowBytes(type, cols) {
  const g = GPU_TYPES[type];
  return g && cols % g.blk === 0 ? (cols / g.blk) * g.bytes : 0;
}

/**
 * A GPU vision encoder for one mmproj on `device`: `tensors` and `info` as readMmproj returns them
 * (tensors: a Map or an object of name → {type, ne (ggml order), data: Uint8Array}; every byte is
 * copied to the GPU before the first await, so views into wasm memory may be passed). Options:
 * `pipelines` (forward.js Pipelines, to share compiled kernels with the text model's backend;
 * this module's own three are compiled once per device).
 * Returns {info, tokens (rows per piece), width (floats per row: D_text), bytes (GPU memory held),
 * encodePiece(pixels, w, h) → Promise<Float32Array> (tokens × width rows of the piece; pixels:
 * 3 × h × w floats, planes R, G, B, row-major, normalised, as wlmjs_vision_preprocess gives them;
 * w = h = the encoder's image size), destroy()}. One encodePiece at a time (the calls queue on
 * the device in order; each one's result is its own array). Throws WLM_ERR_FORMAT for a missing
 * or misshapen tensor (named), WLM_ERR_UNSUPPORTED for a weight type without GPU kernels, a head
 * size above VISION_MAX_HEAD or buffers above the device's limits, WLM_ERR_NOMEM when the GPU is
 * out of memory.
 */
export async function createGpuVisionEncoder(device, tensors, info, { pipelines = null } = {}) {
  const get = (name) => (tensors instanceof Map ? tensors.get(name) : tensors[name]);
  const { projector, imageSize: S, patchSize: P, nEmbd: W, nFf: F, nLayers: L, nHeads: H, eps, scaleFactor: s } = info;
  if (!GPU_VISION_PROJECTORS.includes(projector)) {
    throw jsError('WLM_ERR_UNSUPPORTED', `mmproj: the GPU encoder runs the projectors ${GPU_VISION_PROJECTORS.join(', ')}, not '${projector}'`);
  }
  if (!(S > 0 && P > 0 && S % P === 0)) throw bad(`image_size ${S} is not a multiple of patch_size ${P}`);
  const G = S / P, N = G * G, K = 3 * P * P;
  if (N > MAX_PATCHES) throw jsError('WLM_ERR_UNSUPPORTED', `mmproj: ${G}×${G} patches exceed the limit of ${MAX_PATCHES}`);
  if (G % s) throw bad(`the ${G}×${G} patch grid is not divisible by the projector's scale factor ${s}`);
  if (W % H) throw bad(`embedding_length ${W} is not a multiple of head_count ${H}`);
  const hd = W / H;
  if (hd > VISION_MAX_HEAD) throw jsError('WLM_ERR_UNSUPPORTED', `mmproj: head size ${hd} is above the GPU encoder's ${VISION_MAX_HEAD}`);
  const gx = G / s, T = gx * gx;
  const maxZ = device.limits.maxComputeWorkgroupsPerDimension;
  if (N > maxZ) throw jsError('WLM_ERR_UNSUPPORTED', `mmproj: ${N} patches a piece is above the device's ${maxZ} workgroups a dimension`);

  const tensor = (name, ne0, ne1, ne2 = 1, ne3 = 1) => {
    const t = get(name);
    if (!t) throw bad(`tensor '${name}' is missing`);
    const ne = [...t.ne, 1, 1, 1].slice(0, 4);
    if (ne[0] !== ne0 || ne[1] !== ne1 || ne[2] !== ne2 || ne[3] !== ne3) {
      throw bad(`tensor '${name}' has shape [${ne.join(', ')}], expected [${[ne0, ne1, ne2, ne3].join(', ')}]`);
    }
    return t;
  };
  // matrices: {name, type, rows, cols, rowBytes, data}; vectors: name → Float32Array
  const mats = [];
  const matrix = (name, cols, rows, t = tensor(name, cols, rows)) => {
    const rb = rowBytes(t.type, cols);
    if (!GPU_TYPES[t.type]) throw jsError('WLM_ERR_UNSUPPORTED', `mmproj: no GPU kernels for weight type ${typeName(t.type)} (${name})`);
    if (!rb) throw bad(`tensor '${name}': ${cols} columns are not whole ${typeName(t.type)} blocks`);
    if (t.data.byteLength < rb * rows) throw bad(`tensor '${name}' is cut short`);
    const m = { name, type: t.type, rows, cols, rowBytes: rb, data: t.data.subarray(0, rb * rows) };
    mats.push(m);
    return m;
  };
  const vector = (name, n) => {
    const f = tensorFloats(tensor(name, n, 1), n, name);
    for (let i = 0; i < n; i++) if (!Number.isFinite(f[i])) throw bad(`tensor '${name}' holds a non-finite value at ${i}`);
    return f;
  };
  const patch = matrix('v.patch_embd.weight', K, W, tensor('v.patch_embd.weight', P, P, 3, W));
  const patchB = vector('v.patch_embd.bias', W);
  const pos = tensorFloats(tensor('v.position_embd.weight', W, N), N * W, 'v.position_embd.weight');
  const layers = [];
  for (let l = 0; l < L; l++) {
    const n = (k) => `v.blk.${l}.${k}`;
    // llama.cpp swaps up and down in a file that has them exchanged (mmproj.c, the same test)
    const dn = get(n('ffn_down.weight'));
    const swapped = F !== W && dn && dn.ne[0] === W && dn.ne[1] === F;
    layers.push({
      ln1w: vector(n('ln1.weight'), W), ln1b: vector(n('ln1.bias'), W),
      ln2w: vector(n('ln2.weight'), W), ln2b: vector(n('ln2.bias'), W),
      q: matrix(n('attn_q.weight'), W, W), k: matrix(n('attn_k.weight'), W, W), v: matrix(n('attn_v.weight'), W, W),
      o: matrix(n('attn_out.weight'), W, W),
      qb: vector(n('attn_q.bias'), W), kb: vector(n('attn_k.bias'), W), vb: vector(n('attn_v.bias'), W), ob: vector(n('attn_out.bias'), W),
      up: swapped ? matrix(n('ffn_down.weight'), W, F) : matrix(n('ffn_up.weight'), W, F),
      down: swapped ? matrix(n('ffn_up.weight'), F, W) : matrix(n('ffn_down.weight'), F, W),
      upb: swapped ? vector(n('ffn_down.bias'), F) : vector(n('ffn_up.bias'), F),
      downb: swapped ? vector(n('ffn_up.bias'), W) : vector(n('ffn_down.bias'), W),
    });
  }
  const postW = vector('v.post_ln.weight', W), postB = vector('v.post_ln.bias', W);
  let mmNorm = null, proj;
  const IN = projector === 'gemma3' ? W : W * s * s;
  if (projector === 'gemma3') {
    mmNorm = vector('mm.soft_emb_norm.weight', W);
    // stored [D_text, W] (rows of D): transposed once to D rows of W, the element type kept where
    // it has one element a block (F32, F16, BF16), else as F32 (mmproj.c does the same)
    const name = 'mm.input_projection.weight';
    const t0 = get(name);
    if (!t0) throw bad(`tensor '${name}' is missing`);
    const D = t0.ne[0];
    if (!(D >= 1 && D <= 16384)) throw bad(`tensor '${name}' gives a text width of ${D}`);
    const t = tensor(name, D, W);
    const es = { 0: 4, 1: 2, 30: 2 }[t.type];
    let tt;
    if (es) {
      if (t.data.byteLength < D * W * es) throw bad(`tensor '${name}' is cut short`);
      const out = new Uint8Array(D * W * es);
      for (let i = 0; i < W; i++) {
        for (let d = 0; d < D; d++) out.set(t.data.subarray((i * D + d) * es, (i * D + d + 1) * es), (d * W + i) * es);
      }
      tt = { type: t.type, ne: [W, D], data: out };
    } else {
      const f = tensorFloats(t, D * W, name), out = new Float32Array(D * W);
      for (let i = 0; i < W; i++) for (let d = 0; d < D; d++) out[d * W + i] = f[i * D + d];
      tt = { type: 0, ne: [W, D], data: new Uint8Array(out.buffer) };
    }
    proj = matrix(name, W, D, tt);
  } else {
    const t = get('mm.model.fc.weight');
    if (!t) throw bad("tensor 'mm.model.fc.weight' is missing");
    if (!(t.ne[1] >= 1 && t.ne[1] <= 16384)) throw bad(`tensor 'mm.model.fc.weight' gives a text width of ${t.ne[1]}`);
    proj = matrix('mm.model.fc.weight', IN, t.ne[1]);
  }
  const D = proj.rows;

  // the activation buffer A (floats): the stream x, the normed / attention rows h, q, k, v, the
  // MLP's rows f (also the unfolded patches), the positions, the biases, the piece's rows out
  const pad = (n) => (n + 3) & ~3;
  const off = {};
  let at = 0;
  for (const [k, n] of [['x', N * W], ['h', N * W], ['q', Math.max(N * W, T * IN)], ['k', N * W], ['v', N * W],
    ['f', N * Math.max(F, K)], ['pos', N * W], ['out', T * D]]) { off[k] = at; at += pad(n); }
  const biasAt = new Map();
  const biases = [patchB, ...layers.flatMap((l) => [l.qb, l.kb, l.vb, l.ob, l.upb, l.downb])];
  for (const b of biases) { biasAt.set(b, at); at += pad(b.length); }
  const aFloats = at;
  checkFits(device, `the vision encoder's activations (${N} patches of ${W})`, aFloats * 4);
  for (const m of mats) checkFits(device, `tensor ${m.name} (${typeName(m.type)}, ${m.rows}×${m.cols})`, m.rows * m.rowBytes);
  // the vectors the norm kernel reads (V)
  const vecAt = new Map();
  let nv = 0;
  const norms = [...layers.flatMap((l) => [l.ln1w, l.ln1b, l.ln2w, l.ln2b]), postW, postB, ...(mmNorm ? [mmNorm] : [])];
  for (const v of norms) { vecAt.set(v, nv); nv += pad(v.length); }


  const buffers = [];
  let bytes = 0;
  const mk = (label, size, usage, data = null) => {
    const b = device.createBuffer({ label, size: Math.max(16, pad(size)), usage, mappedAtCreation: !!data });
    if (data) {
      new Uint8Array(b.getMappedRange(), 0, data.byteLength).set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
      b.unmap();
    }
    buffers.push(b);
    bytes += b.size;
    return b;
  };
  const ops = []; // [pipeline, params words, extra bindings, grid]
  device.pushErrorScope('out-of-memory');
  let built = false;
  try {
    const wbuf = new Map(mats.map((m) => [m, mk(`vision ${m.name}`, m.data.byteLength, USAGE.STORAGE, m.data)]));
    const A = mk('vision activations', aFloats * 4, USAGE.STORAGE | USAGE.COPY_DST | USAGE.COPY_SRC);
    const init = new Float32Array(aFloats - off.pos);
    init.set(pos, 0);
    for (const b of biases) init.set(b, biasAt.get(b) - off.pos);
    device.queue.writeBuffer(A, off.pos * 4, init);
    const vf = new Float32Array(Math.max(4, nv));
    for (const v of norms) vf.set(v, vecAt.get(v));
    const V = mk('vision vectors', vf.byteLength, USAGE.STORAGE, vf);
    const Sb = mk('vision counts', 16, USAGE.STORAGE, new Uint32Array([N, T, 0, 0]));
    const staging = mk('vision rows', T * D * 4, USAGE.MAP_READ | USAGE.COPY_DST);
    // (every byte of `tensors` is copied by now: they may be views into a wasm memory that grows
    // while the kernels compile)
    const pipes = pipelines ?? new Pipelines(device);
    const [attPipe, mergePipe, quickPipe] = await ownPipelines(device);

    const tiles = (rows) => { const n = Math.ceil(rows / TILE.TM), x = Math.min(n, maxZ); return [x, Math.ceil(n / x)]; };
    const wgs = (n) => Math.ceil(n / WG);
    // y (n rows of m.rows at yOff) (+)= x (n rows of m.cols at xOff) · mᵀ (+ bias)
    const matmul = async (m, xOff, yOff, n, { acc = false, bias = null } = {}) => {
      const [tx, ty] = tiles(m.rows);
      ops.push([await pipes.get('matmat', m.type), [m.rows, m.cols, m.rowBytes, xOff, m.cols, yOff, m.rows, acc ? 1 : 0,
        n === N ? 0 : 1, bias ? biasAt.get(bias) + 1 : 0], [{ buffer: wbuf.get(m) }, { buffer: Sb }], [tx, ty, Math.ceil(n / TILE.TN)]]);
    };
    const norm = async (len, xOff, yOff, n, w, b, layer) => {
      ops.push([await pipes.get('norm', ''), [len, xOff, len, 0, yOff, len, 0, vecAt.get(w), b ? vecAt.get(b) : NONE,
        layer ? 1 : 0, fbits(eps), NONE], [{ buffer: V }, { buffer: Sb }], [1, 1, n]]);
    };
    await matmul(patch, off.f, off.x, N, { bias: patchB });
    ops.push([await pipes.get('eltwise', 'add'), [off.x, W, off.pos, W, W], [], [wgs(W), 1, N]]);
    for (const l of layers) {
      await norm(W, off.x, off.h, N, l.ln1w, l.ln1b, true);
      await matmul(l.q, off.h, off.q, N, { bias: l.qb });
      await matmul(l.k, off.h, off.k, N, { bias: l.kb });
      await matmul(l.v, off.h, off.v, N, { bias: l.vb });
      ops.push([attPipe, [N, W, hd, off.q, off.k, off.v, off.h, fbits(1 / Math.sqrt(hd))], [], [H, 1, N]]);
      await matmul(l.o, off.h, off.x, N, { acc: true, bias: l.ob });
      await norm(W, off.x, off.h, N, l.ln2w, l.ln2b, true);
      await matmul(l.up, off.h, off.f, N, { bias: l.upb });
      if (info.act === 'gelu_quick') ops.push([quickPipe, [off.f, F, F], [], [wgs(F), 1, N]]);
      else ops.push([await pipes.get('eltwise', 'glu'), [off.f, F, 0, 0, F, info.act === 'gelu' ? 1 : 0, 0], [], [wgs(F), 1, N]]);
      await matmul(l.down, off.f, off.x, N, { acc: true, bias: l.downb });
    }
    await norm(W, off.x, off.h, N, postW, postB, true);
    if (projector === 'gemma3') {
      ops.push([mergePipe, [off.h, off.q, G, s, W, 0], [], [wgs(W), 1, T]]);
      await norm(W, off.q, off.q, T, mmNorm, null, false);
    } else {
      ops.push([mergePipe, [off.h, off.q, G, s, W, 1], [], [wgs(IN), 1, T]]);
    }
    await matmul(proj, off.q, off.out, T);

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
    const oom = await device.popErrorScope();
    built = true;
    if (oom) throw jsError('WLM_ERR_NOMEM', `WebGPU: out of GPU memory for the vision encoder (${bytes} bytes): ${oom.message}`);

    let destroyed = false;
    let queue = Promise.resolve();
    const run = async (pixels, w, h) => {
      if (destroyed) throw jsError('WLM_ERR_STATE', 'the GPU vision encoder was destroyed');
      if (w !== S || h !== S) throw jsError('WLM_ERR_INVALID_ARG', `a piece of ${w}×${h} pixels: this encoder takes ${S}×${S}`);
      if (!(pixels instanceof Float32Array) || pixels.length !== 3 * S * S) {
        throw jsError('WLM_ERR_INVALID_ARG', `a piece's pixels must be a Float32Array of 3 × ${S} × ${S} = ${3 * S * S} floats`);
      }
      // the patches: row p = (c, ky, kx) of patch p, raster order (encoder.c's unfolding)
      const rows = new Float32Array(N * K);
      let r = 0;
      for (let py = 0; py < G; py++) {
        for (let px = 0; px < G; px++) {
          for (let c = 0; c < 3; c++) {
            for (let ky = 0; ky < P; ky++) {
              const src = (c * S + py * P + ky) * S + px * P;
              rows.set(pixels.subarray(src, src + P), r);
              r += P;
            }
          }
        }
      }
      device.queue.writeBuffer(A, off.f * 4, rows);
      const enc = device.createCommandEncoder({ label: 'vision piece' });
      const pass = enc.beginComputePass();
      for (const op of program) {
        pass.setPipeline(op.pipe);
        pass.setBindGroup(0, op.bind);
        pass.dispatchWorkgroups(...op.grid);
      }
      pass.end();
      enc.copyBufferToBuffer(A, off.out * 4, staging, 0, T * D * 4);
      device.queue.submit([enc.finish()]);
      await staging.mapAsync(USAGE.MAP_READ);
      const out = new Float32Array(staging.getMappedRange(0, T * D * 4).slice(0));
      staging.unmap();
      return out;
    };
    return {
      info: Object.freeze({ ...info }), tokens: T, width: D, bytes,
      encodePiece(pixels, w, h) {
        const p = queue.then(() => run(pixels, w, h));
        queue = p.catch(() => {});
        return p;
      },
      destroy() {
        if (destroyed) return;
        destroyed = true;
        for (const b of buffers) b.destroy();
      },
    };
  } catch (e) {
    if (!built) await device.popErrorScope().catch(() => {});
    for (const b of buffers) b.destroy();
    throw e;
  }
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
