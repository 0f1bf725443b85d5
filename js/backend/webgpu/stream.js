// stream.js — a GGUF model's weights from its source straight to GPU buffers, never whole in
// wasm memory. The file is read once, in order (js/models/source.js: a download, a Blob, a Node file;
// js/models/split.js: a split GGUF's parts as one stream); its bytes are routed as they pass: the
// header is already in the heap (peeked), each one-row tensor (norms, biases, RoPE factors) goes
// to the heap's "resident area" the C model reads (WLM_LOAD_TENSORS_EXTERNAL, src/wasmlm.h), and
// each weight matrix to its own GPU storage buffer, in bounded queue.writeBuffer() chunks. It
// does not parse the file (js/models/split.js's readGgufLayout does) or decide which backend runs.
//
// Offsets are Numbers (exact below 2^53; readGgufLayout refuses larger ones): nothing here is
// 32-bit, so a model past 4 GB streams like a small one.

import { abortError, jsError } from '../../runtime/errors.js';
import { GPU_TYPES, typeName } from './wgsl_quant.js';
import { checkFits, matrices, USAGE } from './weights.js';

/** Bytes per queue.writeBuffer() call (a multiple of 4). */
export const WRITE_CHUNK = 8 << 20;
/** Bytes written between waits for the queue (Dawn copies every write into staging memory until
 *  the queue runs it: this bounds that copy). */
export const QUEUE_WINDOW = 64 << 20;

const roundUp = (n, a) => Math.ceil(n / a) * a;

/** A tensor's byte size from its GGUF type and shape, or -1 for a type without a GPU kernel. */
export function tensorBytes(t) {
  const ty = GPU_TYPES[t.type];
  if (!ty) return -1;
  const n = t.ne.reduce((a, b) => a * b, 1);
  return n / ty.blk * ty.bytes;
}

/** Tensors that stay in wasm memory, src/formats/gguf.c's rule (wlm_gguf_tensor_resident and
 *  wlm_gguf_tensor_host_lookup): one row (ne[1..3] all 1), an F32/F16 tensor of two dimensions
 *  whose rows are at most RESIDENT_TAPS long (a hybrid's conv kernels), an F32 one named
 *  *_exps.bias (a mixture of experts' bias rows, one per expert: gpt-oss's), or Gemma 4's
 *  per-layer embedding table (per_layer_token_embd.weight, whose rows the host gathers:
 *  per_layer.js pleHostTable). */
const RESIDENT_TAPS = 16;
const resident = (t) => t.ne.slice(2).every((d) => d === 1) &&
  ((t.ne[1] ?? 1) === 1 || ((t.type === 0 || t.type === 1) && t.ne[0] <= RESIDENT_TAPS) ||
    (t.type === 0 && t.name.endsWith('_exps.bias')) || t.name === 'per_layer_token_embd.weight');

/**
 * The heap buffer WLM_LOAD_TENSORS_EXTERNAL takes for a GGUF of `layout` (readGgufLayout):
 * {heapBytes, dataOffset, resident: [{name, start, end, at}], byName: Map(name → {type, ne,
 * start, end}), last: the tensor that ends last ({name, start, end})}: start/end the tensor's bytes in the file (absolute), `at` its place in the
 * heap buffer (from the buffer's start: the header, then each resident tensor at the next
 * multiple of the alignment in tensor-info order). Throws WLM_ERR_UNSUPPORTED for a tensor whose
 * size this cannot know (a type without GPU kernels), WLM_ERR_FORMAT for a bad size.
 */
export function residentPlan(layout) {
  const { dataOffset, alignment } = layout;
  const out = [];
  const byName = new Map();
  let at = 0;
  let last = { name: '', end: dataOffset }; // the tensor that ends last: where the file must reach
  for (const t of layout.tensors) {
    const bytes = tensorBytes(t);
    if (bytes < 0 && !resident(t)) { byName.set(t.name, { type: t.type, ne: t.ne, start: -1, end: -1 }); continue; }
    if (bytes < 0) throw jsError('WLM_ERR_UNSUPPORTED', `tensor ${t.name} (${typeName(t.type)}) has a type the GPU load does not read`);
    if (!Number.isSafeInteger(bytes)) throw jsError('WLM_ERR_FORMAT', `tensor ${t.name}: ${t.ne[0]} columns are not whole ${typeName(t.type)} blocks`);
    const start = dataOffset + t.offset;
    if (!Number.isSafeInteger(start + bytes)) throw jsError('WLM_ERR_FORMAT', `tensor ${t.name}: its offset is past 2^53 bytes`);
    const info = { type: t.type, ne: t.ne, start, end: start + bytes };
    byName.set(t.name, info);
    if (info.end > last.end) last = { name: t.name, start, end: info.end };
    if (resident(t)) {
      out.push({ name: t.name, start, end: start + bytes, at: dataOffset + at });
      at = roundUp(at + bytes, alignment);
    }
  }
  return { heapBytes: dataOffset + at, dataOffset, resident: out, byName, last };
}

/**
 * Routes a stream's bytes to byte ranges of it. `targets`: [{start, end, write(bytes, offset)}]
 * (absolute file offsets, end excluded; write(bytes, offset) receives consecutive pieces, offset
 * counted from the target's start); push(chunk) takes the stream's next chunk. Ranges may
 * overlap (each gets its bytes); bytes outside every range are dropped. `pos` is where the next
 * chunk starts; missing() lists the targets not whole.
 */
export class Router {
  #t;
  #cur = 0;
  pos;

  constructor(targets, pos = 0) {
    this.#t = [...targets].sort((a, b) => a.start - b.start);
    for (const t of this.#t) t.done = 0;
    this.pos = pos;
  }

  async push(chunk) {
    const pos = this.pos, end = pos + chunk.byteLength;
    const T = this.#t;
    for (let i = this.#cur; i < T.length && T[i].start < end; i++) {
      const t = T[i];
      const a = Math.max(t.start, pos), b = Math.min(t.end, end);
      if (a < b) {
        if (a - t.start !== t.done) throw jsError('WLM_ERR_STATE', `internal: bytes out of order for ${t.name ?? 'a tensor'}`);
        await t.write(chunk.subarray(a - pos, b - pos), a - t.start);
        t.done += b - a;
      }
    }
    while (this.#cur < T.length && T[this.#cur].end <= end) this.#cur++;
    this.pos = end;
  }

  missing() {
    return this.#t.filter((t) => t.done < t.end - t.start);
  }
}

/** Index of the first non-finite element of F32 (0), F16 (1) or BF16 (30) bytes, or -1. */
export function firstNonFinite(type, bytes) {
  if (type === 0) {
    const u = new Uint32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength >>> 2);
    for (let i = 0; i < u.length; i++) if ((u[i] & 0x7f800000) === 0x7f800000) return i;
  } else if (type === 1 || type === 30) {
    const h = new Uint16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength >>> 1);
    const e = type === 1 ? 0x7c00 : 0x7f80;
    for (let i = 0; i < h.length; i++) if ((h[i] & e) === e) return i;
  }
  return -1;
}

/**
 * A GPU buffer filled by consecutive pieces: staged into WRITE_CHUNK bytes, written with
 * queue.writeBuffer at multiples of 4, the last write padded to 4 with zeros. Float types are
 * checked for NaN / Inf as they pass (as C checks a CPU load's). `pace()` is awaited after each
 * write (the queue window).
 */
class BufferWriter {
  constructor(device, buffer, name, type, size, pace, base = 0) {
    Object.assign(this, { device, buffer, name, type, size, pace, base });
    this.stage = new Uint8Array(Math.min(WRITE_CHUNK, roundUp(size, 4)));
    this.len = 0;     // bytes staged
    this.at = 0;      // offset of stage[0] in the tensor (at `base` in the buffer: a 4-aligned
                      // part of a joined matrix, fuseMatrices, whose size is a multiple of 4)
  }

  async write(bytes, offset) {
    for (let i = 0; i < bytes.byteLength;) {
      const n = Math.min(bytes.byteLength - i, this.stage.byteLength - this.len);
      this.stage.set(bytes.subarray(i, i + n), this.len);
      this.len += n;
      i += n;
      const last = offset + i === this.size;
      if (this.len === this.stage.byteLength || last) await this.#flush(last);
    }
  }

  async #flush(last) {
    let n = this.len;
    const bad = firstNonFinite(this.type, this.stage.subarray(0, n));
    if (bad >= 0) {
      const per = this.type === 0 ? 4 : 2;
      throw jsError('WLM_ERR_FORMAT', `corrupt model: tensor ${this.name} has a non-finite value (NaN or Inf) at element ${this.at / per + bad}`);
    }
    if (last && n % 4) { this.stage.fill(0, n, roundUp(n, 4)); n = roundUp(n, 4); }
    this.device.queue.writeBuffer(this.buffer, this.base + this.at, this.stage, 0, n);
    this.at += n;
    this.len = 0;
    if (last) this.stage = null;
    await this.pace(n);
  }
}

/**
 * The GPU buffers of every weight matrix of `desc` (describeModel of the external model, perhaps
 * through fuseMatrices), one per matrix (a tied classifier shares the embedding's; a joined
 * matrix's parts lie end to end in one), created and checked before any byte is read:
 * {matrix: Map(addr → GPUBuffer), targets: [{name, start, end, type, size, buffer, base}], bytes}
 * (a target per tensor of the file; base: its offset in the buffer). `plan`: residentPlan().
 * Throws WLM_ERR_UNSUPPORTED (a buffer above the adapter's limits, naming the tensor and the
 * limit; a matrix the file does not hold as the description says), WLM_ERR_NOMEM (GPU memory),
 * having destroyed what it made.
 */
export async function createMatrixBuffers(device, desc, plan) {
  const list = [];  // [{addr, label, size, parts: targets}]
  const seen = new Set();
  for (const [name, t] of matrices(desc)) {
    if (seen.has(t[4])) continue;
    seen.add(t[4]);
    const size = t[1] * t[3];
    checkFits(device, `tensor ${name} (${typeName(t[0])}, ${t[1]}×${t[2]})`, size);
    const parts = [];
    let base = 0;
    for (const p of t[5] ?? [{ name, bytes: size }]) {
      const file = plan.byName.get(`${p.name}.weight`);
      const skip = p.skip ?? 0; // (a piece of an expert tensor: expertPieces)
      if (!file || file.start < 0 || file.type !== t[0] || (p.skip === undefined ? file.end - file.start !== p.bytes : skip + p.bytes > file.end - file.start)) {
        throw jsError('WLM_ERR_UNSUPPORTED', `WebGPU: tensor ${p.name}.weight is not in the file as the model describes it (${typeName(t[0])}, ${p.bytes} bytes)`);
      }
      parts.push({ name: `${p.name}.weight`, start: file.start + skip, end: file.start + skip + p.bytes, type: t[0], size: p.bytes, base });
      base += p.bytes;
    }
    list.push({ addr: t[4], label: `${name}.weight`, size, parts });
  }
  const matrix = new Map();
  const targets = [];
  device.pushErrorScope('out-of-memory');
  let bytes = 0;
  for (const m of list) {
    const buffer = device.createBuffer({ label: m.label, size: Math.max(4, roundUp(m.size, 4)), usage: USAGE.STORAGE | USAGE.COPY_DST });
    matrix.set(m.addr, buffer);
    for (const p of m.parts) targets.push({ ...p, buffer });
    bytes += m.size;
  }
  const oom = await device.popErrorScope();
  if (oom) {
    for (const b of matrix.values()) b.destroy();
    throw jsError('WLM_ERR_NOMEM', `WebGPU: out of GPU memory for the weights (${bytes} bytes): ${oom.message}`);
  }
  return { matrix, targets, bytes };
}

/**
 * Reads `src` (an openSource() / openModel() result, from its first byte) once: the resident
 * tensors of `plan` into wasm memory at `heapPtr` + their `at`, the matrices of `gpuTargets`
 * (createMatrixBuffers().targets) into their GPU buffers. Reports {stage, loaded, total} and
 * checks `signal` between chunks; `lost()` returns why the device was lost (or null). Throws
 * WLM_ERR_TRUNCATED naming the first tensor the stream did not hold whole, WLM_ERR_FORMAT for a
 * non-finite float weight, WLM_ERR_STATE when the device is lost or a write fails, an AbortError;
 * what was written stays for the caller to free.
 */
export async function streamTensors({ x, device, src, plan, heapPtr, gpuTargets, onProgress, signal, lost, stage = 'model' }) {
  const total = src.size;
  const report = (loaded) => onProgress?.({ stage, loaded, total });
  let since = 0;
  const pace = async (n) => {
    since += n;
    if (since < QUEUE_WINDOW) return;
    since = 0;
    await device.queue.onSubmittedWorkDone();
  };
  const targets = [];
  for (const r of plan.resident) {
    targets.push({ name: r.name, start: r.start, end: r.end, write: (bytes, offset) => {
      // a fresh view each time: nothing here grows memory, but a view is never held across awaits
      new Uint8Array(x.memory.buffer, heapPtr + r.at + offset, bytes.byteLength).set(bytes);
    } });
  }
  for (const g of gpuTargets) {
    const w = new BufferWriter(device, g.buffer, g.name, g.type, g.size, pace, g.base);
    targets.push({ name: g.name, start: g.start, end: g.end, write: (bytes, offset) => w.write(bytes, offset) });
  }
  const router = new Router(targets);
  const checkLost = () => {
    const why = lost();
    if (why) throw jsError('WLM_ERR_STATE', `WebGPU: the GPU device was lost while the weights were streamed (${why}); load() the model again`);
  };
  device.pushErrorScope('validation');
  let scoped = true;
  try {
    report(0);
    for await (const chunk of src.chunks()) {
      if (signal?.aborted) throw abortError(`Loading the ${stage}`);
      checkLost();
      await router.push(chunk);
      report(router.pos);
    }
    if (signal?.aborted) throw abortError(`Loading the ${stage}`);
    const miss = router.missing();
    if (!miss.length && router.pos < plan.last.end) miss.push(plan.last); // (one the model does not use)
    if (miss.length) {
      const t = miss[0];
      throw jsError('WLM_ERR_TRUNCATED', `truncated GGUF: tensor ${t.name} (${t.end - t.start} bytes at file offset ${t.start}) ` +
        `ends past the end of the file (${router.pos} bytes read)`);
    }
    await device.queue.onSubmittedWorkDone();
    checkLost();
    scoped = false;
    const err = await device.popErrorScope();
    if (err) throw jsError('WLM_ERR_STATE', `WebGPU: writing the weights failed: ${err.message}`);
    if (!total) report(router.pos);
  } finally {
    if (scoped) device.popErrorScope().catch(() => {});
  }
}
