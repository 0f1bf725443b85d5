// web/demo/chart.js — the probability chart: the last token's top candidates from the model and
// after the penalties and filters, and its preview redrawn when a slider moves.

import { fmtPercent, showPiece, describeError } from './format.js';
import { $, app } from './state.js';
import { N_PROBS, sliderValues } from './controls.js';

/** Wait after the last slider movement before previewing the distribution again. */
export const PREVIEW_DEBOUNCE_MS = 50;

/** A bar (a CSS width) with its value as text, for one chart cell. */
export function barCell(p, kind) {
  const td = document.createElement('td');
  td.className = `bar-cell ${kind}`;
  const track = document.createElement('span');
  track.className = 'bar-track';
  track.setAttribute('aria-hidden', 'true');
  const bar = document.createElement('span');
  bar.className = `bar ${kind}`;
  bar.style.width = `${Math.max(0, Math.min(1, p)) * 100}%`;
  track.append(bar);
  const value = document.createElement('span');
  value.className = 'bar-value';
  value.textContent = fmtPercent(p);
  const line = document.createElement('span');
  line.className = 'bar-line';
  line.append(track, value);
  td.append(line);
  return td;
}

/**
 * Draws `top` (Token.top / PreviewResult.top) into #prob-chart. `source` is 'generation' (the
 * settings the token was drawn with) or 'preview' (the sliders' settings now).
 */
export function drawChart(top, source, tokenIndex, tokenText) {
  const rows = top.map((alt, i) => {
    const tr = document.createElement('tr');
    tr.dataset.id = String(alt.id);
    tr.dataset.prob = String(alt.prob);
    tr.dataset.probSampled = String(alt.probSampled);
    if (alt.probSampled === 0) tr.classList.add('removed');
    const th = document.createElement('th');
    th.scope = 'row';
    th.className = 'cand';
    th.textContent = `${i + 1}. ${showPiece(alt.text)}`;
    th.title = `token id ${alt.id}`;
    tr.append(th, barCell(alt.prob, 'before'), barCell(alt.probSampled, 'after'));
    if (alt.probSampled === 0) th.title += ' · removed by the penalties or the filters';
    tr.setAttribute('aria-label', `${showPiece(alt.text)}: ${fmtPercent(alt.prob)} from the model, ` +
      `${fmtPercent(alt.probSampled)} after the penalties and filters`);
    return tr;
  });
  $('prob-rows').replaceChildren(...rows);
  const chart = $('prob-chart');
  chart.dataset.source = source;
  const which = `token ${tokenIndex} (${showPiece(tokenText)})`;
  $('chart-caption').textContent = source === 'preview'
    ? `Top ${top.length} candidates for ${which}, with the settings of the sliders now (preview, nothing generated)`
    : `Top ${top.length} candidates for ${which}, with the settings it was drawn with`;
}

/** Empties the chart and says why. */
export function clearChart(caption) {
  $('prob-rows').replaceChildren();
  $('prob-chart').dataset.source = 'none';
  $('chart-caption').textContent = caption;
}

/** The last generated token span (the one the chart describes), or null. */
export function lastTokenSpan() {
  const tokens = $('output').getElementsByClassName('tok');
  return tokens.length ? tokens[tokens.length - 1] : null;
}

/** Redraws the chart with the sliders' values, ~50 ms after the last movement. */
export function schedulePreview() {
  clearTimeout(app.previewTimer);
  app.previewTimer = setTimeout(previewNow, PREVIEW_DEBOUNCE_MS);
}

export async function previewNow() {
  app.previewTimer = 0;
  const attempt = () => {
    app.previewAttempts++;
    $('prob-chart').dataset.previewAttempts = String(app.previewAttempts);
  };
  const engine = app.engine;
  const span = lastTokenSpan();
  if (!engine || !app.lastParams || !span || typeof engine.previewDistribution !== 'function') {
    attempt();
    return;
  }
  const seq = ++app.previewSeq;
  // The last generation's seed and stop strings, the sliders' sampler settings.
  const params = { ...app.lastParams, ...sliderValues(), samplerOrder: $('sampler-order').value, nProbs: N_PROBS };
  delete params.maxTokens;
  let preview;
  try {
    preview = await engine.previewDistribution(params);
  } catch (err) {
    // While generating, the next token redraws the chart anyway; after a beam search or a
    // failed run there is no distribution to preview. Neither is worth an error.
    if (seq === app.previewSeq && document.body.dataset.state !== 'generating') {
      clearChart(`No distribution to preview: ${describeError(err)}`);
    }
    attempt();
    return;
  }
  if (seq !== app.previewSeq || engine !== app.engine || lastTokenSpan() !== span) {
    attempt();
    return;
  }
  const tokens = $('output').getElementsByClassName('tok');
  drawChart(preview.top, 'preview', tokens.length, span.textContent);
  app.previews++;
  $('prob-chart').dataset.previews = String(app.previews);
  attempt();
}
