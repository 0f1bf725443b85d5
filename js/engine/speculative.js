// speculative.js — speculative decoding for js/engine/engine.js: the `draft` generation parameter
// checked and converted, the C call that turns it on after a generation begins, and the
// statistics for lastResult. C does the work (src/runtime/speculative.c; wlm_generate_speculate
// in src/wasmlm.h: Leviathan et al. 2023, Chen et al. 2023, prompt lookup): a draft model (a
// second model and context in the same wasm instance, loaded by Engine.loadDraft) or prompt
// lookup proposes up to maxTokens tokens, which the target verifies in one batched forward pass.
// This file touches no model bytes and keeps no state.

import { jsError } from '../runtime/errors.js';
import { checkOptions } from '../options.js';

const MAX_DRAFT = 32; // WLM_MAX_DRAFT
const MAX_NGRAM = 8;  // WLM_MAX_NGRAM

function intIn(v, lo, hi, what) {
  if (!Number.isInteger(v) || v < lo || v > hi) {
    throw jsError('WLM_ERR_INVALID_ARG', `draft.${what} must be an integer in ${lo}..${hi} (got ${String(v)})`);
  }
  return v;
}

/**
 * GenerateParams.draft (DraftParams in wasmlm.d.ts) checked: {model, nDraft, ngram, pMin, nCtx}.
 * `{ ngram: n, maxTokens? }`: prompt lookup; otherwise the draft model (`model`: a source to
 * load, or undefined for the one Engine.loadDraft loaded). Throws WLM_ERR_INVALID_ARG naming
 * the field.
 */
export function draftSpec(draft) {
  if (draft === null || typeof draft !== 'object' || Array.isArray(draft)) {
    throw jsError('WLM_ERR_INVALID_ARG', `draft must be an object ({model, maxTokens} or {ngram}), got ${String(draft)}`);
  }
  checkOptions('draft', draft, 'DraftParams');
  const nDraft = draft.maxTokens === undefined ? 8 : intIn(draft.maxTokens, 1, MAX_DRAFT, 'maxTokens');
  const ngram = draft.ngram === undefined ? 0 : intIn(draft.ngram, 1, MAX_NGRAM, 'ngram');
  if (ngram && (draft.model !== undefined || draft.pMin !== undefined || draft.nCtx !== undefined)) {
    throw jsError('WLM_ERR_INVALID_ARG', 'draft: give either ngram (prompt lookup) or a draft model, not both');
  }
  const pMin = draft.pMin === undefined ? 0 : draft.pMin;
  if (typeof pMin !== 'number' || !(pMin >= 0 && pMin <= 1)) {
    throw jsError('WLM_ERR_INVALID_ARG', `draft.pMin must be a number in [0, 1] (got ${String(draft.pMin)})`);
  }
  const nCtx = draft.nCtx === undefined ? 0 : intIn(draft.nCtx, 0, 2 ** 31 - 1, 'nCtx');
  return { model: draft.model, nDraft, ngram, pMin, nCtx };
}

/** A key that says whether `source` is the draft model already loaded: the string itself (a
 *  path or URL), the object for bytes or a Blob (the same object is the same model). */
export function draftKey(source) {
  return typeof source === 'string' ? `s:${source}` : source;
}

/**
 * Turns speculative decoding on for the generation begun on `ctx` (wlmjs_generate_speculate):
 * `draftCtx` the draft model's context (0 for prompt lookup). Returns the C status.
 */
export function speculate(x, ctx, draftCtx, spec) {
  return x.wlmjs_generate_speculate(ctx, spec.ngram ? 0 : draftCtx, spec.nDraft, spec.ngram, spec.pMin);
}

/** {drafted, accepted, rounds} of the generation on ctx (wlm_spec_stats). */
export function specStats(x, ctx) {
  return { rounds: x.wlmjs_spec_stat(ctx, 0), drafted: x.wlmjs_spec_stat(ctx, 1), accepted: x.wlmjs_spec_stat(ctx, 2) };
}
