// vision_weights.js — an mmproj's vision tower for the GPU encoder (vision.js), read and checked:
// the GGUF's hyperparameters and tensors (readMmproj: the clip.* keys as src/vision/mmproj.c
// reads them), floats out of F32 / F16 / BF16 / Q8_0 tensors (tensorFloats), and every weight the
// tower and its projector use, by name and shape, for the four projectors (towerWeights: the
// same tensors and the same checks as mmproj.c, llama.cpp's clip.cpp names). Nothing here
// touches a GPU.

import { jsError } from '../../runtime/errors.js';
import { readGgufLayout } from '../../models/split.js';
import { GPU_TYPES, typeName } from './wgsl_quant.js';
import { VISION_MAX_HEAD } from './wgsl_vision.js';

/** The projector types this encoder runs (clip.projector_type). */
export const GPU_VISION_PROJECTORS = Object.freeze(['gemma3', 'idefics3', 'lfm2', 'qwen2.5vl_merger']);
const DEFAULT_SCALE = { gemma3: 4, idefics3: 0, lfm2: 2, 'qwen2.5vl_merger': 2 }; // 0: the key is required
const QWEN = 'qwen2.5vl_merger';
export const MAX_PATCHES = 16384; // WLM_VISION_MAX_PATCHES (src/vision/vision.h): N = (S/P)²
const bad = (msg) => jsError('WLM_ERR_FORMAT', `mmproj: ${msg}`);

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
  const scaleKey = projector === QWEN ? 'clip.vision.spatial_merge_size' : 'clip.vision.projector.scale_factor';
  const info = {
    projector,
    imageSize: u32('clip.vision.image_size', 1, 4096),
    patchSize: u32('clip.vision.patch_size', 1, 4096),
    nEmbd: u32('clip.vision.embedding_length', 1, 16384),
    nFf: u32('clip.vision.feed_forward_length', 1, 16384),
    nLayers: u32('clip.vision.block_count', 1, 256),
    nHeads: u32('clip.vision.attention.head_count', 1, 16384),
    eps: scalar('clip.vision.attention.layer_norm_epsilon'),
    scaleFactor: kv.has(scaleKey) ? u32(scaleKey, 1, 64) : DEFAULT_SCALE[projector],
    act: scalar('clip.use_gelu') === true ? 'gelu' : scalar('clip.use_silu') === true ? 'silu' : 'gelu_quick',
  };
  if (projector === QWEN) { // mmproj.c: the merge is 2×2, n_wa_pattern required, window 112 by default
    if (info.scaleFactor !== 2) throw jsError('WLM_ERR_UNSUPPORTED', `mmproj: spatial_merge_size ${info.scaleFactor} is not supported (qwen2.5vl merges 2×2 patches)`);
    info.nWaPattern = u32('clip.vision.n_wa_pattern', 0, 256);
    info.window = kv.has('clip.vision.window_size') ? u32('clip.vision.window_size', 1, 4096) : 112;
    if (Math.floor(info.window / info.patchSize / 2) < 1) throw bad(`window_size ${info.window} is smaller than one 2×2 group of ${info.patchSize}-pixel patches`);
    const hd = info.nEmbd / info.nHeads;
    if (!Number.isInteger(hd) || hd % 4) throw bad(`head size ${hd} is not a multiple of 4 (2-D RoPE turns a quarter of each head's pairs by each axis)`);
  }
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

/** Bytes of a row of `cols` elements of GPU type `type`, or 0 when cols is not whole blocks. */
function rowBytes(type, cols) {
  const g = GPU_TYPES[type];
  return g && cols % g.blk === 0 ? (cols / g.blk) * g.bytes : 0;
}

/**
 * The tower's weights out of `tensors` (readMmproj's: a Map or an object of name → {type, ne
 * (ggml order), data: Uint8Array}) for `info`, checked: the grid (G × G patches of K = 3·P·P
 * pixels, N of them), head size hd, the matrices ({name, type, rows, cols, rowBytes, data}, all
 * of them in `mats`, in upload order) and vectors (Float32Array) of the patch embedding, the
 * blocks (`layers`), the final norm and the projector (proj, and proj2 for the 2-layer MLPs; IN
 * its input width, D the text width); plus the shape fields. Throws WLM_ERR_FORMAT for a missing
 * or misshapen tensor or a bad hyperparameter (named), WLM_ERR_UNSUPPORTED for a projector,
 * weight type or head size the GPU encoder does not take.
 */
export function towerWeights(tensors, info) {
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
  const qwen = projector === QWEN;
  const dyn = projector === 'lfm2' || qwen; // pieces of any size in multiples of P·s
  if (qwen) { // what readMmproj checks, for an info made by hand
    if (!(Number.isInteger(info.nWaPattern) && info.nWaPattern >= 0)) throw bad('clip.vision.n_wa_pattern (info.nWaPattern) is missing or negative');
    if (!(Number.isInteger(info.window) && Math.floor(info.window / P / 2) >= 1)) throw bad(`window_size ${info.window} is smaller than one 2×2 group of ${P}-pixel patches`);
    if (hd % 4) throw bad(`head size ${hd} is not a multiple of 4 (2-D RoPE turns a quarter of each head's pairs by each axis)`);
    if (s !== 2) throw jsError('WLM_ERR_UNSUPPORTED', `mmproj: spatial_merge_size ${s} is not supported (qwen2.5vl merges 2×2 patches)`);
  }

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
  const opt = (name, n) => (get(name) ? vector(name, n) : null);
  const patch = matrix('v.patch_embd.weight', K, W, tensor('v.patch_embd.weight', P, P, 3, W));
  // Qwen2.5-VL: the temporal patch's second kernel, no bias, no learned positions
  const patch1 = qwen ? matrix('v.patch_embd.weight.1', K, W, tensor('v.patch_embd.weight.1', P, P, 3, W)) : null;
  const patchB = qwen ? null : vector('v.patch_embd.bias', W);
  const pos = qwen ? null : tensorFloats(tensor('v.position_embd.weight', W, N), N * W, 'v.position_embd.weight');
  const preW = qwen ? opt('v.pre_ln.weight', W) : null, preB = qwen ? opt('v.pre_ln.bias', W) : null;
  const layers = [];
  for (let l = 0; l < L && qwen; l++) { // RMSNorms (biases optional), SwiGLU MLP with biases
    const n = (k) => `v.blk.${l}.${k}`;
    layers.push({
      ln1w: vector(n('ln1.weight'), W), ln1b: opt(n('ln1.bias'), W), ln2w: vector(n('ln2.weight'), W), ln2b: opt(n('ln2.bias'), W),
      q: matrix(n('attn_q.weight'), W, W), k: matrix(n('attn_k.weight'), W, W), v: matrix(n('attn_v.weight'), W, W),
      o: matrix(n('attn_out.weight'), W, W),
      qb: vector(n('attn_q.bias'), W), kb: vector(n('attn_k.bias'), W), vb: vector(n('attn_v.bias'), W), ob: vector(n('attn_out.bias'), W),
      gate: matrix(n('ffn_gate.weight'), W, F), up: matrix(n('ffn_up.weight'), W, F), down: matrix(n('ffn_down.weight'), F, W),
      gateb: vector(n('ffn_gate.bias'), F), upb: vector(n('ffn_up.bias'), F), downb: vector(n('ffn_down.bias'), W),
    });
  }
  for (let l = 0; l < L && !qwen; l++) {
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
  const postW = vector('v.post_ln.weight', W), postB = qwen ? opt('v.post_ln.bias', W) : vector('v.post_ln.bias', W);
  let mmNorm = null, proj, proj2 = null, projB = null, proj2B = null, inNormW = null, inNormB = null;
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
  } else if (dyn) {
    // mm.1 (lfm2; Qwen: mm.0) (IN → hidden) and mm.2 (hidden → D_text), both with biases; LFM2's
    // input LayerNorm's weight and bias each optional (mmproj.c load_vec_opt)
    if (!qwen) inNormW = opt('mm.input_norm.weight', IN), inNormB = opt('mm.input_norm.bias', IN);
    const m1 = qwen ? 'mm.0' : 'mm.1';
    const t1 = get(`${m1}.weight`), t2 = get('mm.2.weight');
    if (!t1) throw bad(`tensor '${m1}.weight' is missing`);
    if (!(t1.ne[1] >= 1 && t1.ne[1] <= 16384)) throw bad(`tensor '${m1}.weight' gives a hidden width of ${t1.ne[1]}`);
    proj = matrix(`${m1}.weight`, IN, t1.ne[1]);
    projB = vector(`${m1}.bias`, proj.rows);
    if (!t2) throw bad("tensor 'mm.2.weight' is missing");
    if (!(t2.ne[1] >= 1 && t2.ne[1] <= 16384)) throw bad(`tensor 'mm.2.weight' gives a text width of ${t2.ne[1]}`);
    proj2 = matrix('mm.2.weight', proj.rows, t2.ne[1]);
    proj2B = vector('mm.2.bias', proj2.rows);
  } else {
    const t = get('mm.model.fc.weight');
    if (!t) throw bad("tensor 'mm.model.fc.weight' is missing");
    if (!(t.ne[1] >= 1 && t.ne[1] <= 16384)) throw bad(`tensor 'mm.model.fc.weight' gives a text width of ${t.ne[1]}`);
    proj = matrix('mm.model.fc.weight', IN, t.ne[1]);
  }
  const D = proj2 ? proj2.rows : proj.rows;
  return { projector, S, P, W, F, L, H, eps, s, G, N, K, hd, qwen, dyn, mats, patch, patch1, patchB, pos, preW, preB,
    layers, postW, postB, mmNorm, proj, proj2, projB, proj2B, inNormW, inNormB, IN, D };
}
