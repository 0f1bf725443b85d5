// weights.js — a loaded model's weights into GPU buffers. Reads the model's description
// (wlmjs_model_describe: the architecture row, hyperparameters, each weight's type, shape and
// heap address) and copies each weight matrix, as its bytes are (quantized blocks stay
// quantized), into its own storage buffer, and every float vector (norms, biases) into one
// shared buffer. It checks first that every type has GPU kernels and that every buffer fits the
// adapter's limits, and names what does not. This is the heap-copy form (the weights read from
// the wasm heap after a whole-file CPU load: llama2.c files, EngineOptions gpuWeights 'heap');
// a GGUF's matrices are streamed from the file to the GPU instead (stream.js, load.js), and only
// its vectors come from the heap (uploadVectors).

import { jsError } from '../../runtime/errors.js';
import { GPU_TYPES, typeName } from './wgsl_quant.js';
import { MAX_SSM_HEAD } from './wgsl_recurrent.js';
import { MAX_EXPERT_USED } from './wgsl_moe.js';

export const USAGE = Object.freeze({ MAP_READ: 1, COPY_SRC: 4, COPY_DST: 8, UNIFORM: 64, STORAGE: 128, QUERY_RESOLVE: 512 });

const MATRICES = ['wq', 'wk', 'wv', 'wqkv', 'wo', 'w1', 'w2', 'w3', 'w13', 'ssm_in', 'ssm_gate', 'ssm_beta', 'ssm_alpha', 'ssm_out',
  'ple_gate', 'ple_proj', 'moe_router'];
const VECTORS = ['attn_norm', 'attn_norm_b', 'bqkv', 'bq', 'bk', 'bv', 'q_norm', 'k_norm', 'bo', 'attn_sinks',
  'post_attn_norm', 'ffn_norm', 'ffn_norm_b', 'b_up', 'b_down', 'post_ffn_norm', 'conv_w', 'ssm_dt', 'ssm_a', 'ssm_norm',
  'v_norm', 'out_scale', 'ple_norm', 'moe_router_b', 'moe_probs_b', 'exp_gate_b', 'exp_up_b', 'exp_down_b',
  'exp_out_scale', 'moe_in_norm', 'moe_in_scale', 'moe_pre_norm', 'moe_post_norm_1', 'moe_post_norm_2'];
const GGUF_NAMES = { wq: 'attn_q', wk: 'attn_k', wv: 'attn_v', wqkv: 'attn_qkv', wo: 'attn_output', w1: 'ffn_gate', w2: 'ffn_down', w3: 'ffn_up', w13: 'ffn_gate_up',
  ple_gate: 'inp_gate', ple_proj: 'proj', moe_router: 'ffn_gate_inp' };
/** The model's matrices outside the layers: description key → GGUF name (without .weight).
 *  (Gemma 4's per-layer embedding table, ple_embd, is not one: it stays in wasm memory, read on
 *  the host, per_layer.js pleHostTable, and neither uploaded nor held to the adapter's limits.) */
const GLOBAL_MATRICES = { token_embd: 'token_embd', position_embd: 'position_embd', output: 'output',
  ple_model_proj: 'per_layer_model_proj' };
/** A mixture of experts' stacked matrices (one GGUF tensor holding every expert's) by GGUF name
 *  (exp_gate_up: Gemma 4's fused one, each expert's gate rows then its up rows). */
const EXPERTS = { exp_gate: 'ffn_gate_exps', exp_up: 'ffn_up_exps', exp_down: 'ffn_down_exps', exp_gate_up: 'ffn_gate_up_exps' };
/** A recurrent layer's matrices by mixer (src/model/gguf_weights.c map_recurrent). */
const SSM_NAMES = {
  deltanet: { ssm_in: 'attn_qkv', ssm_gate: 'attn_gate', ssm_beta: 'ssm_beta', ssm_alpha: 'ssm_alpha', ssm_out: 'ssm_out' },
  shortconv: { ssm_in: 'shortconv.in_proj', ssm_out: 'shortconv.out_proj' },
};
/** The GGUF name (without .weight) of matrix `k` of layer `l`. */
const ggufName = (l, k) => SSM_NAMES[l.mixer]?.[k] ?? GGUF_NAMES[k];

/**
 * `desc` with each layer's Q, K and V matrices joined into one `wqkv`, and its gate and up
 * matrices into one `w13` (rows [gate; up], as Phi-3's fused ffn_up), where the parts share the
 * weight type and row length and the joined matrix fits `maxBytes` (the device's binding limit):
 * one matrix-vector dispatch instead of three (Q, K, V) and two (gate, up) in every forward
 * pass. Every row is summed as it was (the kernels treat rows alike), so the logits keep their
 * bits. A joined tensor is [type, rows, cols, row_bytes, the first part's address, parts], parts
 * [{name, addr, bytes}] in row order, placed end to end in one buffer (createMatrixBuffers,
 * uploadWeights); Q/K/V biases become `bqkv: [bq, bk, bv]`, which the forward pass copies end to
 * end (so each but the last must be a multiple of 4 floats long). Layers that do not qualify are
 * left as they are; the description is not modified.
 */
export function fuseMatrices(desc, maxBytes) {
  const bytesOf = (t) => t[1] * t[3];
  const join = (li, keys) => {
    const ts = keys.map((k) => desc.layers[li][k]);
    if (ts.some((t) => !t || !GPU_TYPES[t[0]] || t[5])) return null;
    const [t0] = ts;
    if (ts.some((t) => t[0] !== t0[0] || t[2] !== t0[2] || t[3] !== t0[3] || bytesOf(t) % 4)) return null;
    const total = ts.reduce((a, t) => a + bytesOf(t), 0);
    if (total > maxBytes) return null;
    const parts = keys.map((k, j) => ({ name: `blk.${li}.${GGUF_NAMES[k]}`, addr: ts[j][4], bytes: bytesOf(ts[j]) }));
    return [t0[0], ts.reduce((a, t) => a + t[1], 0), t0[2], t0[3], t0[4], parts];
  };
  const layers = desc.layers.map((l, li) => {
    const out = { ...l };
    const qkv = l.wqkv || desc.arch.attn_gate ? null : join(li, ['wq', 'wk', 'wv']); // (a gated attn_q holds gate rows too)
    const biases = [l.bq, l.bk, l.bv];
    const nb = biases.filter(Boolean).length;
    if (qkv && (nb === 0 || (nb === 3 && l.bq[2] % 4 === 0 && l.bk[2] % 4 === 0))) {
      out.wqkv = qkv;
      delete out.wq; delete out.wk; delete out.wv;
      if (nb) { out.bqkv = biases; delete out.bq; delete out.bk; delete out.bv; }
    }
    const gu = desc.arch.ffn === 'gated' ? join(li, ['w1', 'w3']) : null;
    if (gu) { out.w13 = gu; delete out.w1; delete out.w3; }
    for (const k of Object.keys(EXPERTS)) if (l[k]) out[k] = expertPieces(l[k], desc.hp.n_expert, maxBytes, `blk.${li}.${EXPERTS[k]}`);
    return out;
  });
  return { ...desc, layers };
}

/**
 * A stacked expert tensor `t` ([type, n_expert × rows, cols, row_bytes, addr]: describe.c's) as
 * the pieces that get a GPU buffer each: as many whole experts as `maxBytes` holds (at least one:
 * a piece above the limit is then refused by checkFits, naming it), each piece [type, its rows,
 * cols, row_bytes, key, parts, e0, e1] for experts e0 .. e1 − 1, its key `addr:e0` (an external
 * model's addresses are placeholders a byte apart, so an offset would name another tensor) and
 * one part {name (the GGUF tensor's), addr (of its first byte in the heap), bytes, skip (its
 * offset in the file's tensor)}. One piece for a tensor that fits.
 */
export function expertPieces(t, nExpert, maxBytes, name) {
  const rows = t[1] / nExpert, per = rows * t[3];
  const n = Math.max(1, Math.min(nExpert, Math.floor(maxBytes / per)));
  const out = [];
  for (let e0 = 0; e0 < nExpert; e0 += n) {
    const e1 = Math.min(nExpert, e0 + n), bytes = (e1 - e0) * per;
    out.push([t[0], (e1 - e0) * rows, t[2], t[3], `${t[4]}:${e0}`, [{ name, addr: t[4] + e0 * per, bytes, skip: e0 * per }], e0, e1]);
  }
  return out;
}

/** Every weight matrix of the description as [name, tensor] (tensor: [type, rows, cols, row_bytes, addr]). */
export function matrices(desc) {
  const out = [];
  for (const [k, name] of Object.entries(GLOBAL_MATRICES)) if (desc.tensors[k]) out.push([name, desc.tensors[k]]);
  desc.layers.forEach((l, i) => {
    for (const k of MATRICES) if (l[k]) out.push([`blk.${i}.${ggufName(l, k)}`, l[k]]);
    for (const [k, g] of Object.entries(EXPERTS)) { // whole, or in pieces (expertPieces)
      if (!l[k]) continue;
      if (Array.isArray(l[k][0])) for (const p of l[k]) out.push([`blk.${i}.${g} (experts ${p[6]}..${p[7] - 1})`, p]);
      else out.push([`blk.${i}.${g}`, l[k]]);
    }
  });
  return out;
}

/**
 * Why this model cannot run on the GPU, or '' when it can: an encoder, a weight type without
 * kernels, more experts a token than the route kernel keeps, a description without what a
 * Gemma 4 mixture-of-experts layer needs (a wasm module older than this file), or a head size
 * (the largest of any layer's) above the attention kernel's limit.
 */
export function unsupportedReason(desc, { maxHead }) {
  if (desc.arch?.encoder || desc.hp?.bidirectional) {
    return `the GPU forward pass is causal only: ${desc.arch?.encoder ? 'an encoder' : 'bidirectional attention'} (${desc.arch?.name}) runs on the CPU`;
  }
  if (desc.hp?.n_expert > 1) {
    const a = desc.arch ?? {};
    const lacks = (l) => { // what a MoE layer's description misses for Gemma 4's steps, or ''
      if (l.ffn_kind !== 'moe') return '';
      if (a.moe_dense_branch && !(l.moe_pre_norm && l.moe_post_norm_1 && l.moe_post_norm_2)) return 'the dense branch\'s norms';
      if (a.moe_stream_in && !l.moe_in_norm) return 'the router\'s input norm';
      return l.exp_gu_fused && !l.exp_gate_up ? 'the fused gate/up experts' : '';
    };
    const bad = desc.layers.map(lacks).find((why) => why);
    if (bad) return `the model's description lacks ${bad} (${a.name}'s mixture of experts): the wasm module is older than the WebGPU backend`;
    if (desc.hp.n_expert_used > MAX_EXPERT_USED) {
      return `${desc.hp.n_expert_used} experts used per token is above the GPU route kernel's ${MAX_EXPERT_USED}`;
    }
  }
  if (desc.hp?.n_rec_layers > 0 && desc.hp.ssm_d > MAX_SSM_HEAD) {
    return `${desc.arch?.name}'s DeltaNet head size ${desc.hp.ssm_d} is above the GPU kernel's ${MAX_SSM_HEAD}`;
  }
  const missing = new Map();
  for (const [name, t] of matrices(desc)) if (!GPU_TYPES[t[0]] && !missing.has(t[0])) missing.set(t[0], name);
  if (missing.size) {
    return `no GPU kernels for weight type ${[...missing].map(([ty, name]) => `${typeName(ty)} (${name})`).join(', ')}`;
  }
  if (desc.hp.head_size > maxHead) return `head size ${desc.hp.head_size} is above the GPU attention kernel's ${maxHead}`;
  return '';
}

/** Throws WLM_ERR_UNSUPPORTED when a buffer of `bytes` does not fit the device's limits. */
export function checkFits(device, what, bytes) {
  const l = device.limits;
  const cap = Math.min(l.maxStorageBufferBindingSize, l.maxBufferSize);
  if (bytes > cap) {
    throw jsError('WLM_ERR_UNSUPPORTED', `WebGPU: ${what} needs a buffer of ${bytes} bytes; the adapter allows ` +
      `${cap} (maxStorageBufferBindingSize ${l.maxStorageBufferBindingSize}, maxBufferSize ${l.maxBufferSize})`);
  }
}

/** A storage buffer of `size` bytes (padded to 4) holding the `ranges` [addr, bytes] of `heap`
 *  (a Uint8Array) end to end. */
function uploadBytes(device, heap, ranges, size, label) {
  const buf = device.createBuffer({ label, size: Math.max(4, Math.ceil(size / 4) * 4), usage: USAGE.STORAGE | USAGE.COPY_DST, mappedAtCreation: true });
  const view = new Uint8Array(buf.getMappedRange(), 0, size);
  let at = 0;
  for (const [addr, n] of ranges) { view.set(heap.subarray(addr, addr + n), at); at += n; }
  buf.unmap();
  return buf;
}

/**
 * Uploads the weights of `desc` from `memory` (the wasm memory): {matrix: Map(addr → GPUBuffer),
 * vec: GPUBuffer, vecOff: Map(addr → float offset in vec), bytes}. A matrix shared by two names
 * (a classifier tied to the embedding) is uploaded once. Throws WLM_ERR_UNSUPPORTED when a
 * buffer is above the adapter's limits, WLM_ERR_NOMEM when the GPU runs out of memory.
 */
export async function uploadWeights(device, desc, memory) {
  const matrix = new Map();
  let bytes = 0;
  for (const [name, t] of matrices(desc)) {
    const size = t[1] * t[3];
    if (!matrix.has(t[4])) checkFits(device, `tensor ${name} (${typeName(t[0])}, ${t[1]}×${t[2]})`, size);
  }
  device.pushErrorScope('out-of-memory');
  const heap = new Uint8Array(memory.buffer);
  for (const [name, t] of matrices(desc)) {
    if (matrix.has(t[4])) continue;
    const size = t[1] * t[3];
    // a joined matrix (fuseMatrices): its parts end to end
    matrix.set(t[4], uploadBytes(device, heap, t[5] ? t[5].map((p) => [p.addr, p.bytes]) : [[t[4], size]], size, name));
    bytes += size;
  }
  let vectors = null;
  try {
    vectors = await uploadVectors(device, desc, memory);
  } finally {
    const oom = await device.popErrorScope();
    if (oom || !vectors) {
      for (const b of matrix.values()) b.destroy();
      vectors?.vec.destroy();
      if (oom) throw jsError('WLM_ERR_NOMEM', `WebGPU: out of GPU memory for the weights (${bytes} bytes): ${oom.message}`);
    }
  }
  return { matrix, vec: vectors.vec, vecOff: vectors.vecOff, bytes: bytes + vectors.bytes };
}

/**
 * Every float vector of `desc` (norms, biases; F32 in the wasm heap, F16 ones converted by C)
 * packed into one storage buffer, each at a multiple of 4 floats: {vec: GPUBuffer, vecOff:
 * Map(addr → float offset in vec), bytes}. Throws WLM_ERR_NOMEM when the GPU runs out of memory.
 */
export async function uploadVectors(device, desc, memory) {
  const vecs = [];
  const addVec = (v) => { if (v && Array.isArray(v[0])) v.forEach(addVec); else if (v) vecs.push(v); }; // bqkv: [bq, bk, bv] once joined
  for (const k of ['output_norm', 'output_norm_b', 'ple_proj_norm']) addVec(desc.tensors[k]);
  for (const l of desc.layers) for (const k of VECTORS) addVec(l[k]);
  // one copy per address, as long as its longest view (Gemma 4's V-norm ones serve head sizes
  // of 256 and 512)
  const len = new Map();
  for (const v of vecs) len.set(v[4], Math.max(len.get(v[4]) ?? 0, v[2]));
  const vecOff = new Map();
  let nf = 0;
  for (const [addr, n] of len) { vecOff.set(addr, nf); nf += (n + 3) & ~3; }
  device.pushErrorScope('out-of-memory');
  const vec = device.createBuffer({ label: 'vectors', size: Math.max(16, nf * 4), usage: USAGE.STORAGE | USAGE.COPY_SRC | USAGE.COPY_DST, mappedAtCreation: true });
  const vf = new Float32Array(vec.getMappedRange());
  for (const [addr, n] of len) vf.set(new Float32Array(memory.buffer, addr, n), vecOff.get(addr));
  vec.unmap();
  const oom = await device.popErrorScope();
  if (oom) {
    vec.destroy();
    throw jsError('WLM_ERR_NOMEM', `WebGPU: out of GPU memory for the weight vectors (${nf * 4} bytes): ${oom.message}`);
  }
  return { vec, vecOff, bytes: nf * 4 };
}
