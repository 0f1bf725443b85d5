// web/demo/stats.js — the statistics panel: one cell per measure, and the prefill speed shown
// only for prompts long enough to time.

import { fmtMs, fmtRate } from './format.js';
import { $ } from './state.js';

/** Prompts shorter than this (in tokens) get no prefill speed: fixed costs dominate their time. */
export const MIN_PREFILL_TOKENS = 32;

/** Writes one statistic: the text of #stat-<id>. */
export function setStat(id, text) {
  $(`stat-${id}`).textContent = text;
}

/**
 * The prefill speed, only when the prompt is long enough for it to mean something: a few tokens
 * take about as long as one decode step plus the call's fixed costs, so "tokens per second" of
 * a 5-token prompt says nothing about prefill.
 */
export function showPrefill(nPrompt, ms, tokensPerSec) {
  const unit = `token${nPrompt === 1 ? '' : 's'}`;
  setStat('prefill', nPrompt >= MIN_PREFILL_TOKENS ? fmtRate(tokensPerSec)
    : `${nPrompt} ${unit}: too short to time`);
  $('stat-prefill').title = `${nPrompt} prompt ${unit} (BOS included) in ${fmtMs(ms)}; a speed is shown ` +
    `from ${MIN_PREFILL_TOKENS} tokens`;
}
