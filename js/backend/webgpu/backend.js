// backend.js — the WebGPU backend as the engine sees it: attach() takes a model the wasm engine
// has loaded and its deferred context (kv_cache 2, src/runtime/deferred.c), uploads the
// weights and builds the forward pass, so that the C engine keeps tokenizing, sampling,
// grammars, stop strings and prompt-cache reuse while every evaluation it records runs here;
// supply() runs the recorded batch and writes its logits into the context. Device loss ends the
// step with an error and marks the backend lost (the engine then refuses to use it until the
// model is loaded again). Speculative decoding runs here too (C records each round's
// verification; its logits come from the batch matvec, bit for bit the one-token ones), and
// context shift (C shifts its bookkeeping and records the shift; the cache rows move here before
// the next batch). Batches of sequences and beam search are refused by C with
// WLM_ERR_UNSUPPORTED in a deferred context (a later step).

import { jsError } from '../../errors.js';
import { requestDevice } from './device.js';
import { GpuForward, Pipelines } from './forward.js';
import { MAX_HEAD } from './wgsl_ops.js';
import { unsupportedReason, uploadWeights } from './weights.js';

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
      await b.start({ x, ctx, desc, kvType, weights: await uploadWeights(b.device, desc, x.memory) });
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
      onLost: (info) => { if (!b.#released) b.#lost = `${info.reason}: ${info.message}`; },
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
    this.#ctx = ctx;
    this.#weights = weights;
    this.weightBytes = weights.bytes;
    const f = (i) => x.wlmjs_deferred_field(ctx, i);
    const sets = f(7), half = desc.hp.n_rot / 2;
    const ropeFreq = new Float32Array(x.memory.buffer, f(6) >>> 0, sets * half).slice();
    this.#fwd = await GpuForward.create(this.#device, desc, weights, {
      kvF16: kvType !== 'f32', nCtx: f(9), ropeFreq, ropeSets: sets, mscale: f(8),
      pipelines: new Pipelines(this.#device, { subgroups: this.subgroups }), profile: this.#profile,
    });
  }

  #weights = null;

  /** GPU memory held: weights, KV cache, activations (bytes). */
  get gpuBytes() { return this.weightBytes + (this.#fwd?.bytes ?? 0); }

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
    const tokens = new Int32Array(x.memory.buffer, f(1) >>> 0, n).slice();
    const seqs = new Int32Array(x.memory.buffer, f(2) >>> 0, n).slice();
    const positions = new Int32Array(x.memory.buffer, f(3) >>> 0, n).slice();
    const rows = new Int32Array(x.memory.buffer, f(4) >>> 0, n).slice();
    if (seqs.some((s) => s !== 0)) throw jsError('WLM_ERR_UNSUPPORTED', 'WebGPU: only sequence 0 runs on the GPU yet');
    const want = Array.from(rows, (r) => r >= 0);
    const exact = f(10) === 1; // a speculative verification: logits as one token at a time's
    let logits;
    try {
      if (f(11) > 0) await this.#fwd.shift(f(12), f(11), f(13)); // a context shift first
      logits = await this.#fwd.run(tokens, positions, want, { exact });
    } catch (e) {
      if (this.#lost || /lost|destroyed/i.test(String(e?.message))) {
        this.#lost ??= String(e?.message ?? e);
        throw this.#lostError();
      }
      throw e;
    }
    if (this.#lost) throw this.#lostError();
    const V = this.#fwd.desc.hp.vocab_size;
    const base = f(5) >>> 0; // context logits: row r at base + r * V floats
    const heap = new Float32Array(x.memory.buffer);
    let k = 0;
    for (let i = 0; i < n; i++) {
      if (rows[i] < 0) continue;
      heap.set(logits.subarray(k * V, (k + 1) * V), (base >>> 2) + rows[i] * V);
      k++;
    }
    x.wlmjs_deferred_supplied(ctx);
  }

  #lostError() {
    return jsError('WLM_ERR_STATE', `WebGPU: the GPU device was lost (${this.#lost}); load() the model again ` +
      "(backend 'webgpu' for a new device, or 'cpu')");
  }

  /** Frees the GPU buffers and the device. */
  release() {
    if (this.#released) return;
    this.#released = true;
    this.#fwd?.destroy();
    if (this.#weights) {
      for (const b of this.#weights.matrix.values()) b.destroy();
      this.#weights.vec.destroy();
    }
    this.#device?.destroy();
  }
}
