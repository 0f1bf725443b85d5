// dot_form.js — which form of the relaxed build's int8 dot product an engine uses: the fused
// relaxed_dot_i8x16_i7x16_add_s or the split i16x8 dot + dot_i16x8_s (bitwise the same lanes;
// which is faster depends on the CPU and the JS engine), chosen twice: for the matrix-vector
// kernels (decode) and for the matrix-matrix ones (prefill, batches), whose split form also keeps
// the level types' sums in int16 (AMD Zen 4, Node 24: split 1.1-1.34x faster for batches, and
// since 2026-11-28, its widening constant kept in a register, ~1.08x in the decode probe too,
// where fused won before; bench/README.md). EngineOptions
// .dotForm 'auto' warms the kernels at engine start and times them at the first load()
// (wlmjs_dot_probe). It does not run models: js/engine/engine.js passes the choice to each context.

import { jsError } from './errors.js';

/** enum wlm_dot_form (src/wasmlm.h). */
export const DOT_FORMS = Object.freeze({ fused: 0, split: 1 });

/** Iterations of one timed wlmjs_dot_probe run (about 0.25 ms on an AMD Zen 4 core), the most
 *  rounds (one run of each form), and the untimed iterations first. */
const DOT_PROBE_ITERS = 200;
const DOT_PROBE_MAX_ROUNDS = 10;
const DOT_PROBE_WARMUP = 60;
/** The split form must be this much faster (time ratio) to be picked: ties go to the fused
 *  form, one instruction on CPUs with an int8 dot (where the split costs 3). 2 %, not more: the
 *  probe's ratio is about half the end-to-end one (docs/how-it-works.md, dotform: Chromium
 *  156 probe 1.04-1.07, decode 1.09-1.14; Node 24 probe 0.94, decode 0.86-0.90). */
const DOT_SPLIT_MARGIN = 1.02;

/**
 * At engine start, the relaxed build's int8 dot form for the exports `x` (EngineOptions.dotForm,
 * checked by startEngine): {form: 'fused' | 'split' | 'none' | 'auto', probe: null}. 'none' for
 * the other builds (and modules without the probe). For 'auto' it runs both forms' kernels once,
 * untimed, so that V8 compiles them and starts tiering them up in the background while the
 * model is fetched; the first load() then times them (pickDotForm). Timed at once, the first
 * engine of a page saw the split kernels still in baseline code (Chromium 156 on a busy
 * machine: 0.57 ms a run against 0.23 ms tiered up) and picked the other form.
 */
export function dotFormAtStart(x, dotForm) {
  if (typeof x.wlmjs_dot_probe !== 'function' || x.wlmjs_dot_probe(DOT_FORMS.split, 0, 0) < 0) {
    return { form: 'none', formBatch: 'none', probe: null };
  }
  if (dotForm === 'auto') {
    for (const batch of [0, 1]) {
      x.wlmjs_dot_probe(DOT_FORMS.fused, batch, DOT_PROBE_WARMUP >> batch);
      x.wlmjs_dot_probe(DOT_FORMS.split, batch, DOT_PROBE_WARMUP >> batch);
    }
  }
  return { form: dotForm, formBatch: dotForm, probe: null };
}

/** Iterations of one timed batch probe run (a 32 x 512 Q8_0 and a 128 x 512 Q5_0 matrix by 4
 *  entries: about 0.4 ms on an AMD Zen 4 core). */
const DOT_PROBE_BATCH_ITERS = 16;

/**
 * Times both forms' kernels of one kind with wlmjs_dot_probe (src/kernels/quant.h: `batch` 0,
 * Q8_0 matrix-vector products on a 17 KiB matrix; 1, Q8_0 and Q5_0 matrix-matrix products by
 * four entries, 62 KiB of weights), alternating, until the fastest run of each is stable (3 to
 * DOT_PROBE_MAX_ROUNDS runs each): {form, fusedMs, splitMs, rounds}, form 'split' when its
 * fastest run beats the fused form's fastest by DOT_SPLIT_MARGIN.
 */
function timeForms(x, batch) {
  const iters = batch ? DOT_PROBE_BATCH_ITERS : DOT_PROBE_ITERS;
  const run = (form) => {
    const t = performance.now();
    if (x.wlmjs_dot_probe(form, batch, iters) < 0) throw jsError('WLM_ERR_NOMEM', 'the dot-form probe could not allocate 66 KiB');
    return performance.now() - t;
  };
  // Until two rounds in a row improve neither minimum by 2 %: a kernel's first runs may still
  // be baseline code (a browser tiers it up in the background, later on a busy machine).
  let fusedMs = Infinity, splitMs = Infinity, rounds = 0;
  for (let stable = 0; rounds < DOT_PROBE_MAX_ROUNDS && stable < 2; rounds++) {
    const f = run(DOT_FORMS.fused), s = run(DOT_FORMS.split);
    stable = f < fusedMs * 0.98 || s < splitMs * 0.98 ? 0 : stable + 1;
    fusedMs = Math.min(fusedMs, f);
    splitMs = Math.min(splitMs, s);
  }
  return { form: splitMs * DOT_SPLIT_MARGIN < fusedMs ? 'split' : 'fused', fusedMs, splitMs, rounds };
}

/**
 * 'auto': the form of the matrix-vector kernels and, timed apart, of the matrix-matrix ones
 * (timeForms): {form, formBatch, probe: {fusedMs, splitMs, rounds, batchFusedMs, batchSplitMs,
 * batchRounds, ms}} (the minima and rounds of each, the whole probe's time).
 */
export function pickDotForm(x) {
  const t0 = performance.now();
  const mv = timeForms(x, 0), mm = timeForms(x, 1);
  return {
    form: mv.form, formBatch: mm.form,
    probe: { fusedMs: mv.fusedMs, splitMs: mv.splitMs, rounds: mv.rounds, batchFusedMs: mm.fusedMs,
      batchSplitMs: mm.splitMs, batchRounds: mm.rounds, ms: performance.now() - t0 },
  };
}
