// backend.js — the WebGPU backend as the engine sees it: attach() takes a model the wasm engine
// has loaded and its deferred context (kv_cache 2, src/runtime/deferred.c), uploads the
// weights and builds the forward pass, so that the C engine keeps tokenizing, sampling,
// grammars, stop strings and prompt-cache reuse while every evaluation it records runs here;
// supply() runs the recorded batch and writes its logits into the context. Device loss ends the
// step with an error and marks the backend lost (the engine then refuses to use it until the
// model is loaded again). Speculative decoding runs here too (C records each round's
// verification; its logits come from the batch matvec, bit for bit the one-token ones), and
// context shift (C shifts its bookkeeping and records the shift; the cache rows move here before
// the next batch), and batches of sequences (each sequence's block of the GPU cache; resize()
// when the engine needs more of them), and beam search (its forks copied between the
// sequences' blocks of the GPU cache before the step's batch). A hybrid's recurrent state
// snapshots (state_snapshots.js) are taken and restored as C asks (src/runtime/deferred.c).
// Images: the mmproj encoder runs in wasm (the CPU); C records a media prompt as one batch whose
// image entries carry their rows (deferred.c), written into the pass's input in place of the
// token embeddings, a non-causal image's rows seeing each other (forward.js run()).

import { jsError } from '../../runtime/errors.js';
import { requestDevice } from './device.js';
import { GpuForward, Pipelines } from './forward.js';
import { GpuStateSnapshots } from './state_snapshots.js';
import { MAX_HEAD } from './wgsl_ops.js';
import { pleHostTable, ropeHalf } from './per_layer.js';
import { fuseMatrices, unsupportedReason, uploadWeights } from './weights.js';

/** The model's description (wlmjs_model_describe) as an object. */
export function describeModel(x, model) {
  const n = x.wlmjs_model_describe(model, 0, 0);
  if (n < 0) throw jsError('WLM_ERR_STATE', 'the model has no weights to describe');
  const p = x.wlmjs_malloc(n + 1) >>> 0;
  if (!p) throw jsError('WLM_ERR_NOMEM', `cannot allocate ${n + 1} bytes for the model description`);
  try {
    x.wlmjs_model_describe(model, p, n + 1);
    const bytes = new Uint8Array(x.memory.buffer, p, n).slice();
    return JSON.parse(new TextDecoder().decode(bytes));
  } finally {
    x.wlmjs_free(p);
  }
}

/** Why `desc` cannot run on the GPU ('' when it can). */
export function modelUnsupported(desc) {
  return unsupportedReason(desc, { maxHead: MAX_HEAD });
}

export class WebGpuBackend {
  #x;
  #ctx;
  #fwd;
  #device;
  #lost = null;      // why the device was lost, or null
  #failed = null;    // the first GPU error no scope caught (a command that failed), or null
  #released = false;
  #profile = null;   // GPU_PROFILE's Map (forward.js), or null
  adapterInfo;
  weightBytes = 0;

  /**
   * Uploads the model `desc` (describeModel) of the engine's exports `x` to a device of
   * `adapter`, for the deferred context `ctx` (created with kv_cache 2). kvType: 'f16' | 'f32'.
   * Throws WasmlmError (UNSUPPORTED: a limit or kernel; NOMEM: GPU memory), having released
   * the device.
   */
  static async attach({ x, ctx, desc, adapter, adapterInfo, kvType, useSubgroups = true, profile = null }) {
    const b = await WebGpuBackend.open({ adapter, adapterInfo, useSubgroups, profile });
    try {
      const l = b.device.limits;
      const fused = fuseMatrices(desc, Math.min(l.maxStorageBufferBindingSize, l.maxBufferSize));
      await b.start({ x, ctx, desc: fused, kvType, weights: await uploadWeights(b.device, fused, x.memory) });
    } catch (e) {
      b.release();
      throw e;
    }
    return b;
  }

  /**
   * A backend with a device of `adapter` and no model yet (the streamed load, load.js, fills
   * its weights first, then start()s it). Throws WLM_ERR_UNSUPPORTED when no device is given.
   */
  static async open({ adapter, adapterInfo, useSubgroups = true, profile = null }) {
    const b = new WebGpuBackend();
    b.adapterInfo = adapterInfo;
    b.#profile = profile;
    const { device, subgroups } = await requestDevice(adapter, {
      useSubgroups,
      timestamps: !!profile,
      onLost: (info) => { if (!b.#released) b.#lost = `${info.reason}: ${info.message}`; },
      onError: (msg) => { if (!b.#released) b.#failed ??= msg; },
    });
    b.#device = device;
    b.subgroups = subgroups;
    return b;
  }

  /**
   * Builds the forward pass of `desc` over `weights` ({matrix, vec, vecOff, bytes}: uploadWeights
   * or the streamed load's), for the deferred context `ctx` of the exports `x`. The backend owns
   * the weights' buffers from here (release() destroys them), also when this throws.
   */
  async start({ x, ctx, desc, kvType, weights }) {
    this.#x = x;
    this.#weights = weights;
    this.#desc = desc;
    this.#kvType = kvType;
    this.weightBytes = weights.bytes;
    this.#pipelines = new Pipelines(this.#device, { subgroups: this.subgroups });
    this.#pleTable = pleHostTable(x, desc.tensors.ple_embd); // (Gemma 4's, in wasm memory)
    await this.resize(ctx);
  }

  /**
   * Takes the deferred context `ctx` (the first, or one the engine made with more sequences,
   * Engine.generateBatch) and builds the forward pass for its n_seq_max sequences: a KV cache
   * of that many sequences, the old pass (and its cache) released first. Throws as start().
   */
  async resize(ctx) {
    const x = this.#x;
    this.#ctx = ctx;
    this.#fwd?.destroy();
    this.#fwd = null;
    const f = (i) => x.wlmjs_deferred_field(ctx, i);
    const sets = f(7), half = ropeHalf(this.#desc.hp); // (the context's rope_half)
    const ropeFreq = new Float32Array(x.memory.buffer, f(6) >>> 0, sets * half).slice();
    // M-RoPE (qwen2vl): its sections, by which each entry's (t, h, w) positions turn (field 22)
    const sec = f(22) >>> 0;
    this.#mrope = sec !== 0;
    const ropeSections = this.#mrope ? new Int32Array(x.memory.buffer, sec, 4).slice() : null;
    this.#stateLen = [];
    this.#snaps?.destroy();
    this.#snaps = null;
    this.#fwd = await GpuForward.create(this.#device, this.#desc, this.#weights, {
      kvF16: this.#kvType !== 'f32', nCtx: f(9), nSeq: f(12), ropeFreq, ropeSets: sets, ropeSections, mscale: f(8),
      pipelines: this.#pipelines, profile: this.#profile, pleTable: this.#pleTable,
    });
    const st = this.#fwd.cache.state;
    if (st) this.#snaps = new GpuStateSnapshots(this.#device, st, this.#desc.hp.state_floats * 4, f(17));
  }

  #weights = null;
  #desc = null;
  #mrope = false;    // an M-RoPE model (qwen2vl): each entry comes with its (t, h, w) positions
  #stateLen = [];    // a hybrid's sequences: the positions their GPU state holds (-1 / none: unknown)
  #snaps = null;     // a hybrid's state snapshots (GpuStateSnapshots), else null
  #kvType = 'f16';
  #pipelines = null;
  #pleTable = null;  // Gemma 4's per-layer embedding table, read on the host (pleHostTable)

  /** GPU memory held: weights, KV cache, activations, a hybrid's state snapshots (bytes). */
  get gpuBytes() { return this.weightBytes + (this.#fwd?.bytes ?? 0) + (this.#snaps?.bytes ?? 0); }

  /**
   * A hybrid's recurrent states in GPU memory: {states: sequences with a state block,
   * bytes: their blocks and the snapshots taken so far}; zeros for a transformer.
   */
  get stateStats() {
    const st = this.#fwd?.cache.state;
    if (!st) return { states: 0, bytes: 0 };
    return { states: this.#x.wlmjs_deferred_field(this.#ctx, 12), bytes: st.size + (this.#snaps?.bytes ?? 0) };
  }

  /** Entries per compute pass. */
  get chunk() { return this.#fwd?.chunk ?? 0; }

  /** Why the device was lost, or null. */
  get lost() { return this.#lost; }

  /** The device (tests destroy it to simulate loss). */
  get device() { return this.#device; }

  /**
   * Runs the batch the context recorded (if any) and writes its logits into the context.
   * Throws WasmlmError WLM_ERR_STATE when the device is lost (the recorded batch is then
   * dropped by the engine's reset).
   */
  async supply() {
    const x = this.#x;
    const ctx = this.#ctx;
    const f = (i) => x.wlmjs_deferred_field(ctx, i);
    const n = f(0);
    if (n <= 0) return;
    if (this.#lost) throw this.#lostError();
    if (this.#failed) throw this.#failedError();
    let tokens = new Int32Array(x.memory.buffer, f(1) >>> 0, n).slice();
    let seqs = new Int32Array(x.memory.buffer, f(2) >>> 0, n).slice();
    let positions = new Int32Array(x.memory.buffer, f(3) >>> 0, n).slice();
    const rows = new Int32Array(x.memory.buffer, f(4) >>> 0, n).slice();
    // image rows (deferred.c): each entry's non-causal end (0 causal) and input row (-1 a token)
    const lens = new Int32Array(x.memory.buffer, f(18) >>> 0, n).slice();
    const erows = new Int32Array(x.memory.buffer, f(19) >>> 0, n).slice();
    let nRows = 0;
    for (const r of erows) nRows = Math.max(nRows, r + 1);
    const D = this.#desc.hp.dim;
    const image = nRows === 0 ? {} : { lens, erows, embd: new Float32Array(x.memory.buffer, f(20) >>> 0, nRows * D).slice() };
    // M-RoPE: 3 positions per entry (deferred.c's dfr_rpos; image rows' from their grid)
    const rpos = this.#mrope ? new Int32Array(x.memory.buffer, f(21) >>> 0, 3 * n).slice() : null;
    let want = Array.from(rows, (r) => r >= 0);
    const exact = f(10) === 1; // a speculative verification: logits as one token at a time's
    const shifts = new Int32Array(x.memory.buffer, f(11) >>> 0, 3 * f(12)).slice();
    const forkRows = new Int32Array(x.memory.buffer, f(13) >>> 0, 3 * f(14)).slice();
    const V = this.#fwd.desc.hp.vocab_size;
    // the wanted entries' rows, in entry order, copied from the mapped readback buffer into the
    // context's logits (unless the device was lost or a command failed meanwhile); a batch run
    // in parts (a snapshot taken between them) hands them over part by part
    const wanted = [];
    for (let i = 0; i < n; i++) if (rows[i] >= 0) wanted.push(rows[i]);
    let k = 0;
    const into = (got) => {
      if (this.#lost || this.#failed) return;
      const base = f(5) >>> 0; // context logits: row r at base + r * V floats
      const heap = new Float32Array(x.memory.buffer);
      for (let r = 0; (r + 1) * V <= got.length; r++, k++) heap.set(got.subarray(r * V, (r + 1) * V), (base >>> 2) + wanted[k] * V);
    };
    try {
      const forks = [];
      for (let i = 0; i < forkRows.length; i += 3) forks.push([forkRows[i], forkRows[i + 1], forkRows[i + 2]]);
      await this.#fwd.cache.fork(forks); // beam search's forks first, then the shifts
      for (const [src, dst, rows] of forks) if (src !== dst) this.#stateLen[dst] = this.#stateLen[src] === rows && !this.#restorePending(src) ? rows : -1;
      for (let s = 0; 3 * s < shifts.length; s++) { // context shifts: keep, discard, end
        if (shifts[3 * s + 1] > 0) await this.#fwd.cache.shift(s, shifts[3 * s], shifts[3 * s + 1], shifts[3 * s + 2]);
      }
      if (this.#fwd.cache.state) {
        let takes, pre;
        ({ tokens, positions, seqs, want, takes, pre } = await this.#statePlan(tokens, positions, seqs, want));
        if (nRows && pre) { // the replayed tokens first: no image row, causal
          image.lens = Int32Array.from([...new Array(pre).fill(0), ...image.lens]);
          image.erows = Int32Array.from([...new Array(pre).fill(-1), ...image.erows]);
        }
        if (rpos && pre) { // (no M-RoPE hybrid exists: a replay would need C's positions of the tokens replayed)
          throw jsError('WLM_ERR_UNSUPPORTED', 'WebGPU: a recurrent state replay on an M-RoPE model');
        }
        const sub = (a, i, j) => (a ? a.subarray(i, j) : undefined);
        let a = 0; // the batch in parts, each snapshot taken where its sequence's state reaches it
        for (let t = 0; t <= takes.length; t++) {
          const at = t < takes.length ? takes[t][0] : tokens.length;
          if (at > a) {
            await this.#fwd.run(tokens.subarray(a, at), positions.subarray(a, at), want.slice(a, at),
              { exact, seqs: seqs.subarray(a, at), into, lens: sub(image.lens, a, at), erows: sub(image.erows, a, at), embd: image.embd, rpos: sub(rpos, 3 * a, 3 * at) });
          }
          a = at;
          if (t < takes.length) this.#takeSnapshots(takes.filter((e) => e[0] === at));
          while (t + 1 < takes.length && takes[t + 1][0] === at) t++;
        }
      } else {
        await this.#fwd.run(tokens, positions, want, { exact, seqs, into, ...image, rpos });
      }
      for (let i = 0; i < tokens.length; i++) this.#stateLen[seqs[i]] = positions[i] + 1;
    } catch (e) {
      if (this.#lost || /lost|destroyed/i.test(String(e?.message))) {
        this.#lost ??= String(e?.message ?? e);
        throw this.#lostError();
      }
      throw e;
    }
    if (this.#lost) throw this.#lostError();
    if (this.#failed) throw this.#failedError();
    x.wlmjs_deferred_supplied(ctx);
  }

  /** Int32Array views of C's pending restores (2 per sequence: slot, position) and snapshots
   *  to take (WLM_STATE_SNAPS per sequence: position), over the current wasm memory, and the
   *  slots per sequence (wlmjs_deferred_field 15, 16, 17). */
  #stateOrders() {
    const x = this.#x, f = (i) => x.wlmjs_deferred_field(this.#ctx, i);
    const nSeq = f(12), slots = f(17);
    return { slots, restores: new Int32Array(x.memory.buffer, f(15) >>> 0, 2 * nSeq), snaps: new Int32Array(x.memory.buffer, f(16) >>> 0, slots * nSeq) };
  }

  /** Whether C asked for sequence s's state to be restored before its next entries. */
  #restorePending(s) { return this.#stateOrders().restores[2 * s + 1] >= 0; }

  /**
   * A hybrid's recurrent state cannot be cut back as the KV cache can: each sequence's GPU state
   * holds its first #stateLen[seq] positions, and C keeps snapshots of it (deferred.c). For each
   * sequence of the batch, at its first entry's position p: where C cut it back it names a
   * snapshot (or the empty state) to restore, and the stored tokens (wlmjs_seq_tokens) from the
   * snapshot's position to p are replayed, as entries that want no logits (their K/V rows are
   * written again with the same values); where the state holds p it goes on; otherwise (p 0, a
   * fork whose state did not follow, anything unknown) it is emptied and replayed from 0. The
   * snapshots C asks for are placed where their sequence's state reaches their position in
   * that batch: `takes`, [entry index, seq, slot, position], by index (the snapshot is taken
   * once the entries before that index ran). Returns the batch to run, and its takes.
   */
  async #statePlan(tokens, positions, seqs, want) {
    const x = this.#x, { slots, restores, snaps } = this.#stateOrders();
    const first = new Map(); // sequence → its first entry's position
    for (let i = 0; i < tokens.length; i++) if (!first.has(seqs[i])) first.set(seqs[i], positions[i]);
    const zero = [], back = [], start = new Map();
    const pre = { tokens: [], positions: [], seqs: [] };
    for (const [s, p] of first) {
      const slot = restores[2 * s], from = restores[2 * s + 1];
      let at = 0; // where the state starts for this batch
      if (from >= 0) { // C cut the sequence back
        restores[2 * s + 1] = -1; // done (a replay from 0 where the copy is not there)
        if (slot >= 0 && from <= p && this.#snaps.holds(s, slot, from)) { back.push([s, slot]); at = from; }
      } else if (p > 0 && p === (this.#stateLen[s] ?? -1)) {
        at = p;
      }
      if (at === 0) zero.push(s);
      start.set(s, at);
      if (at === p) continue;
      const addr = x.wlmjs_seq_tokens(this.#ctx, s) >>> 0;
      if (!addr) throw jsError('WLM_ERR_STATE', `WebGPU: sequence ${s}'s tokens are not readable for its recurrent state's replay`);
      const t = new Int32Array(x.memory.buffer, addr, p);
      for (let j = at; j < p; j++) {
        if (t[j] < 0) { // C cuts a state back before image rows (deferred.c); a fork's or a lost state would need them
          throw jsError('WLM_ERR_UNSUPPORTED', `WebGPU: sequence ${s}'s recurrent state would be rebuilt over image rows ` +
            `(position ${j}), which are not replayed: evaluate the prompt again (reset())`);
        }
        pre.tokens.push(t[j]); pre.positions.push(j); pre.seqs.push(s);
      }
    }
    for (const s of first.keys()) this.#stateLen[s] = -1; // until the batch has run
    this.#fwd.cache.zeroState(zero);
    if (back.length) {
      const enc = this.#device.createCommandEncoder();
      for (const [s, slot] of back) this.#snaps.restore(enc, s, slot);
      this.#device.queue.submit([enc.finish()]);
    }
    const out = !pre.tokens.length ? { tokens, positions, seqs, want } : {
      tokens: Int32Array.from([...pre.tokens, ...tokens]),
      positions: Int32Array.from([...pre.positions, ...positions]),
      seqs: Int32Array.from([...pre.seqs, ...seqs]),
      want: [...pre.tokens.map(() => false), ...want],
    };
    let takes = [];
    for (let s = 0; s * slots < snaps.length; s++) {
      for (let j = 0; j < slots; j++) {
        const pos = snaps[s * slots + j];
        if (pos < 0) continue;
        if (!first.has(s)) { // a sequence not in the batch: its state as it is now
          if (pos === (this.#stateLen[s] ?? -1) && restores[2 * s + 1] < 0) takes.push([0, s, j, pos]);
          continue;
        }
        if (pos === start.get(s)) { takes.push([0, s, j, pos]); continue; }
        for (let i = 0; i < out.tokens.length; i++) {
          if (out.seqs[i] === s && out.positions[i] === pos - 1) { takes.push([i + 1, s, j, pos]); break; }
        }
      }
    }
    const failed = await this.#snaps.reserve(takes.map(([, s, j]) => [s, j]));
    if (failed.length) takes = takes.filter(([, s, j]) => !failed.some(([fs, fj]) => fs === s && fj === j));
    takes.sort((a, b) => a[0] - b[0]);
    return { ...out, takes, pre: pre.tokens.length };
  }

  /** Takes the snapshots [index, seq, slot, position] (their sequences' states are there now)
   *  and marks them taken for C. */
  #takeSnapshots(takes) {
    const enc = this.#device.createCommandEncoder();
    for (const [, s, j, pos] of takes) this.#snaps.take(enc, s, j, pos);
    this.#device.queue.submit([enc.finish()]);
    const { slots, snaps } = this.#stateOrders();
    for (const [, s, j] of takes) snaps[s * slots + j] = -1;
  }

  #failedError() {
    return jsError('WLM_ERR_STATE', `WebGPU: a GPU command failed (${this.#failed}), so its results are not used; ` +
      "load() the model again (backend 'webgpu' or 'cpu')");
  }

  /** The first GPU error no error scope caught, or null (then every later step is refused). */
  get failed() { return this.#failed; }

  #lostError() {
    return jsError('WLM_ERR_STATE', `WebGPU: the GPU device was lost (${this.#lost}); load() the model again ` +
      "(backend 'webgpu' for a new device, or 'cpu')");
  }

  /** Frees the GPU buffers and the device. */
  release() {
    if (this.#released) return;
    this.#released = true;
    this.#fwd?.destroy();
    this.#snaps?.destroy();
    this.#pleTable?.free();
    if (this.#weights) {
      for (const b of this.#weights.matrix.values()) b.destroy();
      this.#weights.vec.destroy();
    }
    this.#device?.destroy();
  }
}
