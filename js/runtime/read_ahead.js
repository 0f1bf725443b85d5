// read_ahead.js — whether the quantized matrix-vector kernels (decode) read their rows ahead of
// what they compute (wlm_context_params.read_ahead, src/kernels/quant_simd/common.h: wasm has no
// prefetch instruction, so the loops touch one byte of each row stream some blocks ahead). The
// results are bit for bit the same either way; the speed is not, and which is faster depends on
// the CPU: an Intel Xeon gained from it, an AMD Zen 4 lost 2-16 % of decode (bench/README.md,
// 2026-11-28). EngineOptions.readAhead 'auto' (the default) decides per machine by timing: the
// first decode steps after each load() alternate the two settings, and after READ_AHEAD_SAMPLES
// timed steps of each (the first READ_AHEAD_WARMUP not counted: V8 is still compiling the
// kernels) the faster is kept — read-ahead off only when its median step is READ_AHEAD_MARGIN
// faster. js/engine/engine.js drives it; this file touches no wasm.

import { jsError } from './errors.js';

export const READ_AHEAD_WARMUP = 4;
export const READ_AHEAD_SAMPLES = 8;
export const READ_AHEAD_MARGIN = 1.02;

/** EngineOptions.readAhead checked: 'auto', true or false; else WLM_ERR_INVALID_ARG. */
export function checkReadAhead(v = 'auto') {
  if (v !== 'auto' && v !== true && v !== false) {
    throw jsError('WLM_ERR_INVALID_ARG', `readAhead must be 'auto', true or false, got ${String(v)}`);
  }
  return v;
}

const median = (v) => { const s = [...v].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };

/** The choice for one engine: mode 'auto' | true | false; reset() at each load(). */
export class ReadAheadTuner {
  #mode;
  #chosen = null;
  #on = [];
  #off = [];
  #steps = 0;

  constructor(mode) {
    this.#mode = mode;
    this.reset();
  }

  /** Forgets what was measured (a new model: its weights may fit the caches or not). */
  reset() {
    this.#chosen = this.#mode === 'auto' ? null : this.#mode;
    this.#on = [];
    this.#off = [];
    this.#steps = 0;
  }

  /** Whether steps are still being timed. */
  get tuning() { return this.#chosen === null; }

  /** The setting for contexts made now, and for the next decode step while tuning. */
  get current() { return this.#chosen ?? this.#steps % 2 === 0; }

  /**
   * Records a decode step run with read-ahead `on` that took `ms`; returns true when this step
   * made the choice (the caller then applies `current` to its contexts).
   */
  record(on, ms) {
    if (this.#chosen !== null) return false;
    this.#steps++;
    if (this.#steps <= READ_AHEAD_WARMUP) return false;
    (on ? this.#on : this.#off).push(ms);
    if (this.#on.length < READ_AHEAD_SAMPLES || this.#off.length < READ_AHEAD_SAMPLES) return false;
    this.#chosen = !(median(this.#off) * READ_AHEAD_MARGIN < median(this.#on));
    return true;
  }

  /** {mode, chosen (null while timing), onMs, offMs (median step times, once chosen by timing)}. */
  get state() {
    const timed = this.#mode === 'auto' && this.#chosen !== null;
    return {
      mode: this.#mode, chosen: this.#chosen,
      onMs: timed ? median(this.#on) : null, offMs: timed ? median(this.#off) : null,
    };
  }
}
