// kv_cache.js — the KV cache in GPU memory, and what moves its rows without a forward pass.
// Per attention layer one buffer (a hybrid's by kv_slot; its recurrent state in one more buffer,
// hp.state_floats floats a sequence, laid out as read_hybrid's): for each of nSeq sequences a block of nCtx K rows, then nCtx V rows
// (the writing layer's kv_dim elements a row — per_layer.js kvSlots: Gemma 4's sliding and full
// layers differ, and its KV-shared layers have no buffer of their own, reading their source
// layer's —: F16 two to a word, rounded as wlm_kv_store, or F32), written and read
// by forward.js's kv_store and attention kernels. shift() applies a context shift C has recorded
// (wlm_seq_shift_internal): a sequence's rows keep + discard .. end − 1 move down to keep .., K
// re-rotated by the RoPE of −discard positions (kvShiftWgsl); fork() applies beam search's
// forks (wlm_seq_fork_internal): rows 0..n − 1 of one sequence copied to another. Both go
// through one scratch buffer of one sequence's rows of one layer — WebGPU copies only between two
// buffers, and a shift's source and destination rows overlap — made at the first use, with the
// shift's own small buffers (its cos/sin and arguments), so nothing here depends on the forward
// pass's activation layout.

import { jsError } from '../../runtime/errors.js';
import { ropeCosSin, WG } from './wgsl_ops.js';
import { checkFits, USAGE } from './weights.js';
import { kvSlots, ropeHalf, ropeSetRot } from './per_layer.js';

const PARAM_SLOT = 256; // bytes between parameter blocks (minUniformBufferOffsetAlignment)

export class GpuKvCache {
  layers = [];   // GPUBuffer per attention layer, by its kv_slot
  state = null;  // a hybrid's recurrent state: nSeq blocks of hp.state_floats floats (else null)
  #stateScratch = null;
  bytes = 0;     // GPU bytes held: the layers, then the scratch and the shift's buffers once made
  #device;
  #desc;
  #nCtx;
  #nSeq;
  #f16;
  #slots;        // per buffer: {kvDim, hs, nRot, set, noRope} of the layer writing it (kvSlots)
  #rowBytes;     // per buffer: bytes of one row (its kvDim elements)
  #ropeFreq;     // Float32Array (ropeSets × the context's rope_half: per_layer.js ropeHalf)
  #ropeSets;
  #pipelines;
  #scratch = null;
  #shift = null; // {params, cs, args, pipeline, binds[]}: the shift's kernel, made at the first

  /**
   * The cache of `desc` (wlmjs_model_describe) on `device`: nCtx positions of nSeq sequences, F16
   * or F32 elements; ropeFreq / ropeSets as forward.c's (the shift re-rotates with them);
   * `pipelines` (forward.js Pipelines) compiles the shift's kernel. Throws WLM_ERR_UNSUPPORTED
   * when a layer's buffer is above the adapter's limits, WLM_ERR_NOMEM when it does not fit.
   */
  static async create(device, desc, opts) {
    const c = new GpuKvCache(device, desc, opts);
    const nAttn = c.#slots.length;
    const layerBytes = (s) => c.#nSeq * 2 * c.#nCtx * c.#rowBytes[s];
    const widest = c.#rowBytes.reduce((a, r, s) => (r > c.#rowBytes[a] ? s : a), 0);
    if (nAttn) checkFits(device, `the KV cache of one layer (nCtx ${c.#nCtx}${c.#nSeq > 1 ? `, ${c.#nSeq} sequences` : ''})`, layerBytes(widest));
    const stateBytes = c.#nSeq * (desc.hp.state_floats ?? 0) * 4;
    if (stateBytes) checkFits(device, `the recurrent state${c.#nSeq > 1 ? ` of ${c.#nSeq} sequences` : ''}`, stateBytes);
    device.pushErrorScope('out-of-memory');
    for (let l = 0; l < nAttn; l++) {
      c.layers.push(device.createBuffer({ label: `kv.${l}`, size: (layerBytes(l) + 3) & ~3, usage: USAGE.STORAGE | USAGE.COPY_SRC | USAGE.COPY_DST }));
      c.bytes += layerBytes(l);
    }
    if (stateBytes) c.state = device.createBuffer({ label: 'recurrent state', size: stateBytes, usage: USAGE.STORAGE | USAGE.COPY_SRC | USAGE.COPY_DST });
    c.bytes += stateBytes;
    const oom = await device.popErrorScope();
    if (oom) {
      c.destroy();
      throw jsError('WLM_ERR_NOMEM', `WebGPU: out of GPU memory for the KV cache (${c.bytes} bytes; a smaller nCtx may fit): ${oom.message}`);
    }
    return c;
  }

  constructor(device, desc, { nCtx, nSeq = 1, f16, ropeFreq, ropeSets, pipelines }) {
    this.#device = device;
    this.#desc = desc;
    this.#nCtx = nCtx;
    this.#nSeq = nSeq;
    this.#f16 = f16;
    this.#slots = kvSlots(desc, ropeSets);
    this.#rowBytes = this.#slots.map((s) => s.kvDim * (f16 ? 2 : 4));
    this.#ropeFreq = ropeFreq;
    this.#ropeSets = ropeSets;
    this.#pipelines = pipelines;
  }

  /** Byte offsets of sequence `seq`'s first K row and first V row in buffer `l`. */
  #block(seq, l) {
    const r = this.#rowBytes[l], k = seq * 2 * this.#nCtx * r;
    return [k, k + this.#nCtx * r];
  }

  /** The scratch buffer (one sequence's K and V rows of the widest layer), made once. */
  async #scratchBuffer() {
    if (this.#scratch) return this.#scratch;
    const bytes = 2 * this.#nCtx * Math.max(4, ...this.#rowBytes);
    this.#device.pushErrorScope('out-of-memory');
    const b = this.#device.createBuffer({ label: 'kv scratch', size: (bytes + 3) & ~3, usage: USAGE.STORAGE | USAGE.COPY_SRC | USAGE.COPY_DST });
    const oom = await this.#device.popErrorScope();
    if (oom) {
      b.destroy();
      throw jsError('WLM_ERR_NOMEM', `WebGPU: out of GPU memory for ${bytes} bytes of KV scratch (a context shift or beam search): ${oom.message}`);
    }
    this.bytes += b.size;
    return (this.#scratch = b);
  }

  /** The shift kernel's buffers and bind groups (one per layer), made once. */
  async #shiftOps() {
    if (this.#shift) return this.#shift;
    const device = this.#device, h = this.#desc.hp;
    const scratch = await this.#scratchBuffer();
    device.pushErrorScope('out-of-memory');
    const CS = 2 * ropeHalf(h); // one set's cos/sin
    const params = device.createBuffer({ label: 'kv shift params', size: Math.max(1, this.#slots.length) * PARAM_SLOT, usage: USAGE.UNIFORM | USAGE.COPY_DST });
    const cs = device.createBuffer({ label: 'kv shift cos/sin', size: Math.max(16, this.#ropeSets * CS * 4), usage: USAGE.STORAGE | USAGE.COPY_DST });
    const args = device.createBuffer({ label: 'kv shift args', size: 16, usage: USAGE.STORAGE | USAGE.COPY_DST });
    const oom = await device.popErrorScope();
    if (oom) {
      for (const b of [params, cs, args]) b.destroy();
      throw jsError('WLM_ERR_NOMEM', `WebGPU: out of GPU memory for a context shift's parameters: ${oom.message}`);
    }
    const pipeline = await this.#pipelines.get('kv_shift', this.#f16);
    const words = new Uint32Array(Math.max(1, this.#slots.length) * PARAM_SLOT / 4);
    const binds = this.#slots.map((sl, li) => { // li: the kv_slot
      // (n_rot 0 on a NoPE layer: its K rows move without turning)
      words.set([sl.kvDim, this.#nCtx, sl.hs, sl.noRope ? 0 : sl.nRot, this.#desc.arch.rope === 'neox' ? 1 : 0, sl.set * CS, 0], li * PARAM_SLOT / 4);
      return device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries: [
        { binding: 0, resource: { buffer: cs } }, // kvShiftWgsl reads its cos/sin as "A"
        { binding: 1, resource: { buffer: params, offset: li * PARAM_SLOT, size: 64 } },
        { binding: 2, resource: { buffer: this.layers[li] } },
        { binding: 3, resource: { buffer: scratch } },
        { binding: 4, resource: { buffer: args } }] });
    });
    device.queue.writeBuffer(params, 0, words);
    this.bytes += params.size + cs.size + args.size;
    return (this.#shift = { params, cs, args, pipeline, binds, scratch });
  }

  /**
   * A context shift of sequence `seq` (C has shifted its bookkeeping): rows keep + discard ..
   * end − 1 move to keep .., K re-rotated by −discard positions, every layer in one submission,
   * ordered before the next forward pass's.
   */
  async shift(seq, keep, discard, end) {
    const moved = end - keep - discard;
    if (discard < 1 || moved < 1) return;
    const device = this.#device, h = this.#desc.hp, CS = 2 * ropeHalf(h);
    const { cs, args, pipeline, binds, scratch } = await this.#shiftOps();
    // cos/sin of −discard positions in each set (forward.c's wlm_rope_shift_prepare: the
    // attention factor is already in K), each set its own rotated width, CS floats apart
    const v = new Float32Array(this.#ropeSets * CS);
    for (let s = 0; s < this.#ropeSets; s++) ropeCosSin(v, s * CS, -discard, this.#ropeFreq, s, ropeSetRot(h, s) / 2, 1, CS / 2);
    device.queue.writeBuffer(cs, 0, v);
    device.queue.writeBuffer(args, 0, Uint32Array.of(keep, discard, end, seq));
    const gy = Math.min(moved, device.limits.maxComputeWorkgroupsPerDimension);
    const enc = device.createCommandEncoder();
    binds.forEach((bind, l) => {
      const kvDim = this.#slots[l].kvDim, words = this.#f16 ? kvDim / 2 : kvDim;
      const [k0, v0] = this.#block(seq, l), r = this.#rowBytes[l];
      const pass = enc.beginComputePass();
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, bind);
      pass.dispatchWorkgroups(Math.ceil(words / WG), gy, 1);
      pass.end();
      enc.copyBufferToBuffer(scratch, 0, this.layers[l], k0 + keep * r, moved * r);
      enc.copyBufferToBuffer(scratch, moved * r, this.layers[l], v0 + keep * r, moved * r);
    });
    device.queue.submit([enc.finish()]);
  }

  /**
   * Forks, in order (beam search; C has forked its bookkeeping): each [src, dst, n] copies rows
   * 0..n − 1 of sequence src's K and V to sequence dst in every layer; one submission, ordered
   * before the next forward pass's.
   */
  async fork(forks) {
    if (!forks.some(([src, dst, n]) => n > 0 && src !== dst)) return;
    const scratch = await this.#scratchBuffer();
    const stBytes = (this.#desc.hp.state_floats ?? 0) * 4;
    if (this.state && !this.#stateScratch) {
      this.#stateScratch = this.#device.createBuffer({ label: 'state scratch', size: stBytes, usage: USAGE.COPY_SRC | USAGE.COPY_DST });
      this.bytes += stBytes;
    }
    const enc = this.#device.createCommandEncoder();
    for (const [src, dst, n] of forks) {
      if (n < 1 || src === dst) continue;
      this.layers.forEach((kv, l) => {
        const bytes = n * this.#rowBytes[l], [sk, sv] = this.#block(src, l), [dk, dv] = this.#block(dst, l);
        enc.copyBufferToBuffer(kv, sk, scratch, 0, bytes);
        enc.copyBufferToBuffer(kv, sv, scratch, bytes, bytes);
        enc.copyBufferToBuffer(scratch, 0, kv, dk, bytes);
        enc.copyBufferToBuffer(scratch, bytes, kv, dv, bytes);
      });
      if (this.state) { // the recurrent state is copied, as C's fork copies it
        enc.copyBufferToBuffer(this.state, src * stBytes, this.#stateScratch, 0, stBytes);
        enc.copyBufferToBuffer(this.#stateScratch, 0, this.state, dst * stBytes, stBytes);
      }
    }
    this.#device.queue.submit([enc.finish()]);
  }

  /** Empties the recurrent state of each sequence of `seqs` (a hybrid's sequence starting at
   *  position 0), ordered before the next forward pass's. */
  zeroState(seqs) {
    if (!this.state || !seqs.length) return;
    const stBytes = this.#desc.hp.state_floats * 4;
    const enc = this.#device.createCommandEncoder();
    for (const s of seqs) enc.clearBuffer(this.state, s * stBytes, stBytes);
    this.#device.queue.submit([enc.finish()]);
  }

  destroy() {
    for (const b of this.layers) b.destroy();
    this.layers = [];
    this.state?.destroy();
    this.#stateScratch?.destroy();
    this.state = this.#stateScratch = null;
    this.#scratch?.destroy();
    if (this.#shift) for (const b of [this.#shift.params, this.#shift.cs, this.#shift.args]) b.destroy();
    this.#scratch = this.#shift = null;
  }
}
