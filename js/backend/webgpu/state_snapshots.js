// state_snapshots.js — a hybrid's recurrent-state snapshots on the GPU. A recurrent state cannot
// be cut back as the KV cache can, so C keeps snapshot slots per sequence (src/model/model.h
// WLM_SNAP_*: the end of the last prompt, a chat checkpoint inside it, the start of a
// speculative round) and, in a deferred context, tells the backend when to take one and which
// one to restore after a cut back (src/runtime/deferred.c). This holds their copies: one GPU
// buffer per sequence and slot, made at its first use, filled and read back into the
// sequence's block of the cache's state buffer (kv_cache.js `state`) by copyBufferToBuffer —
// nothing is read back to the CPU. It also remembers which position each copy holds, so that a
// restore of anything else (which C never asks for) is refused and the caller replays from 0.

import { USAGE } from './weights.js';

export class GpuStateSnapshots {
  #device;
  #state;        // the cache's state buffer: nSeq blocks of stateBytes
  #stateBytes;
  #slots;        // snapshot slots per sequence (C's WLM_STATE_SNAPS)
  #buffers = new Map(); // seq * slots + slot → GPUBuffer
  #pos = new Map();     // seq * slots + slot → the position its copy holds
  bytes = 0;            // GPU bytes of the copies made so far

  /** Snapshots of `state` (GPUBuffer of nSeq blocks of stateBytes) in `slots` slots a sequence. */
  constructor(device, state, stateBytes, slots) {
    this.#device = device;
    this.#state = state;
    this.#stateBytes = stateBytes;
    this.#slots = slots;
  }

  /** Copies made so far (buffers held). */
  get count() { return this.#buffers.size; }

  /**
   * Makes the buffers of the snapshots [seq, slot] not yet made (each stateBytes). Returns the
   * keys it could not make (out of GPU memory: those snapshots are not taken, and C, told
   * nothing, never restores them).
   */
  async reserve(pairs) {
    const missing = pairs.filter(([seq, slot]) => !this.#buffers.has(seq * this.#slots + slot));
    if (!missing.length) return [];
    const failed = [];
    for (const [seq, slot] of missing) {
      this.#device.pushErrorScope('out-of-memory');
      const b = this.#device.createBuffer({ label: `state snapshot ${seq}.${slot}`, size: this.#stateBytes, usage: USAGE.COPY_SRC | USAGE.COPY_DST });
      if (await this.#device.popErrorScope()) {
        b.destroy();
        failed.push([seq, slot]);
        continue;
      }
      this.#buffers.set(seq * this.#slots + slot, b);
      this.bytes += this.#stateBytes;
    }
    return failed;
  }

  /** Encodes a copy of sequence seq's state (at position pos) into its slot `slot` (reserved). */
  take(enc, seq, slot, pos) {
    const k = seq * this.#slots + slot;
    enc.copyBufferToBuffer(this.#state, seq * this.#stateBytes, this.#buffers.get(k), 0, this.#stateBytes);
    this.#pos.set(k, pos);
  }

  /** Whether slot `slot` of sequence seq holds the state at position pos. */
  holds(seq, slot, pos) { return this.#pos.get(seq * this.#slots + slot) === pos; }

  /** Encodes the copy of slot `slot` (holds() it) back into sequence seq's state. */
  restore(enc, seq, slot) {
    enc.copyBufferToBuffer(this.#buffers.get(seq * this.#slots + slot), 0, this.#state, seq * this.#stateBytes, this.#stateBytes);
  }

  destroy() {
    for (const b of this.#buffers.values()) b.destroy();
    this.#buffers.clear();
    this.#pos.clear();
    this.bytes = 0;
  }
}
