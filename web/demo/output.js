// web/demo/output.js — the output text: one coloured span per token, and the token inspector
// (hover or arrow keys: probability, alternatives; a roving tabindex).

import { fmtPercent, showPiece } from './format.js';
import { $, app } from './state.js';
import { clearChart, drawChart } from './chart.js';

/** Token probability → colour bin (the legend under the output lists the same bounds). */
export const PROB_BINS = [0.1, 0.3, 0.6, 0.9];

export const probBin = (p) => PROB_BINS.filter((bound) => p >= bound).length;

/** Describes a token span in the inspector line under the output. */
export function showTokenDetail(span) {
  const tokens = $('output').getElementsByClassName('tok');
  const index = Array.prototype.indexOf.call(tokens, span) + 1;
  const prob = Number(span.dataset.prob);
  const sampled = Number(span.dataset.probSampled);
  $('token-detail').textContent = `Token ${index} of ${tokens.length}: ${showPiece(span.textContent)} · ` +
    `id ${span.dataset.id} · p = ${fmtPercent(prob)}` +
    (Number.isFinite(sampled) ? ` · drawn with p = ${fmtPercent(sampled)} after the penalties and filters` : '');
  showAlternatives(span, index);
}

/** Lists a token's alternatives (its top candidates) under the inspector line. */
export function showAlternatives(span, index) {
  const top = app.tokenTops.get(span);
  const box = $('token-alternatives');
  if (!top || top.length === 0) {
    box.hidden = true;
    return;
  }
  $('token-alternatives-title').textContent = `Alternatives for token ${index} (${showPiece(span.textContent)}), ` +
    'probability from the model → after the penalties and filters:';
  const chosen = Number(span.dataset.id);
  $('token-alternatives-list').replaceChildren(...top.map((alt) => {
    const li = document.createElement('li');
    li.dataset.id = String(alt.id);
    if (alt.id === chosen) li.className = 'chosen';
    li.textContent = `${showPiece(alt.text)} ${fmtPercent(alt.prob)} → ${fmtPercent(alt.probSampled)}` +
      (alt.id === chosen ? ' (drawn)' : '');
    return li;
  }));
  box.hidden = false;
}

/** Makes `span` the output's one Tab stop (roving tabindex) and optionally focuses it. */
export function activateToken(span, focus) {
  if (app.activeToken && app.activeToken !== span) {
    app.activeToken.removeAttribute('tabindex');
    app.activeToken.removeAttribute('aria-describedby');
  }
  app.activeToken = span;
  span.tabIndex = 0;
  span.setAttribute('aria-describedby', 'token-detail'); // read out with the token on focus
  if (focus) {
    span.focus();
    span.scrollIntoView({ block: 'nearest' });
  }
}

/** Arrow keys move between tokens (empty ones, parts of a character, are skipped). */
export function onOutputKey(event) {
  const span = event.target.closest?.('.tok');
  if (!span) return;
  const tokens = [...$('output').getElementsByClassName('tok')].filter((t) => t.textContent !== '');
  const i = tokens.indexOf(span);
  let j = -1;
  switch (event.key) {
    case 'ArrowRight': case 'ArrowDown': j = Math.min(i + 1, tokens.length - 1); break;
    case 'ArrowLeft': case 'ArrowUp': j = Math.max(i - 1, 0); break;
    case 'Home': j = 0; break;
    case 'End': j = tokens.length - 1; break;
    default: return;
  }
  event.preventDefault();
  if (j >= 0) activateToken(tokens[j], true);
}

export function tokenSpan(tok) {
  const span = document.createElement('span');
  span.className = `tok p${probBin(tok.prob)}`;
  span.dataset.prob = String(tok.prob);
  span.dataset.probSampled = String(tok.probSampled);
  span.dataset.id = String(tok.id);
  span.title = `p = ${fmtPercent(tok.prob)}`;
  span.append(document.createTextNode(tok.text));
  return span;
}

/**
 * Brings the output into view when it starts low on the screen or above it (on a phone, under
 * the prompt): the Generate / Stop buttons go to the top, the output right under them.
 */
/**
 * Appends one streamed item of a generation or chat turn to `container`: a token span (its
 * alternatives kept for hover and the chart, which is redrawn for it; the first non-empty token
 * becomes the active one), or, for id -1, the text held back for a stop string that did not
 * complete (not a token). `index` is the token's 1-based number in its turn.
 */
export function appendStreamed(container, tok, index) {
  if (tok.id < 0) {
    const tail = document.createElement('span');
    tail.className = 'tail';
    tail.append(document.createTextNode(tok.text));
    container.append(tail);
    return;
  }
  const span = tokenSpan(tok);
  container.append(span);
  if (tok.top) {
    app.tokenTops.set(span, tok.top);
    app.previewSeq++; // a preview still running describes the previous token
    drawChart(tok.top, 'generation', index, tok.text);
  }
  if (!app.activeToken && tok.text !== '') activateToken(span, false);
}

export function revealOutput() {
  const box = $('output').getBoundingClientRect();
  if (box.top < 0 || box.top > 0.6 * window.innerHeight) {
    document.querySelector('#gen-form .buttons').scrollIntoView({ block: 'start' });
  }
}

/** Forgets the previous run's tokens: inspector, alternatives, chart. */
export function resetOutputState() {
  app.activeToken = null;
  app.previewSeq++;
  clearTimeout(app.previewTimer);
  $('token-detail').textContent = 'Hover over a token, or tab into the text and use ← →, to see its probability.';
  $('token-alternatives').hidden = true;
  clearChart('Generate to see the top 10 candidates for each token.');
}
