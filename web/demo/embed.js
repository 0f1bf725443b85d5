// web/demo/embed.js — the Embeddings mode: sentences (one a line) → engine.embed() → their
// cosine similarity matrix as a heat map in #output; with a query, the sentences ranked against
// it (by cosine similarity, or by the model's own scores when it is a reranker: engine.rerank()).
// Any loaded model can embed (a model without pooling_type is pooled by its last token, as
// Qwen3-Embedding); an encoder (BERT, nomic-bert) can only embed, so the page switches to this
// mode for it.
//
// For tests: #output holds <table class="sim-matrix"> with a <td data-sim> per pair, or
// <ol class="ranking"> with <li data-index data-score>; #embed-form[data-status] is 'done' or
// 'error' after a run.

import { describeError, fmtMs } from './format.js';
import { $, app, setState, showError, clearError } from './state.js';

/** Sentences of the textarea: its non-empty lines, trimmed. */
function sentences() {
  return $('embed-texts').value.split('\n').map((s) => s.trim()).filter(Boolean);
}

/** Background of a similarity: from white (the matrix's lowest, `lo`) to the accent colour (1),
 *  so that the contrast shows even when every pair is alike (as with an untrained model). */
function heat(sim, lo) {
  const t = lo < 1 ? Math.max(0, Math.min(1, (sim - lo) / (1 - lo))) : 1;
  return `hsl(210 80% ${Math.round(97 - 50 * t)}%)`;
}

function cosine(a, b) {
  let d = 0, x = 0, y = 0;
  for (let i = 0; i < a.length; i++) { d += a[i] * b[i]; x += a[i] * a[i]; y += b[i] * b[i]; }
  return x && y ? d / Math.sqrt(x * y) : 0;
}

/** The matrix of pairwise cosine similarities as a table, rows and columns numbered. */
function matrix(texts, vecs) {
  const table = document.createElement('table');
  table.className = 'sim-matrix';
  const cap = document.createElement('caption');
  cap.textContent = 'Cosine similarity of every pair of sentences';
  const head = table.createTHead().insertRow();
  head.append(document.createElement('th'));
  texts.forEach((_, j) => {
    const th = document.createElement('th');
    th.scope = 'col';
    th.textContent = String(j + 1);
    head.append(th);
  });
  const body = table.createTBody();
  const sims = vecs.map((a) => vecs.map((b) => cosine(a, b)));
  const lo = Math.min(...sims.flat());
  texts.forEach((t, i) => {
    const row = body.insertRow();
    const th = document.createElement('th');
    th.scope = 'row';
    th.textContent = `${i + 1}. ${t}`;
    row.append(th);
    texts.forEach((_, j) => {
      const sim = sims[i][j];
      const td = row.insertCell();
      td.dataset.sim = sim.toFixed(4);
      td.textContent = sim.toFixed(2);
      td.title = `${i + 1} · ${j + 1}: ${sim.toFixed(4)}`;
      td.style.background = heat(sim, lo);
    });
  });
  table.prepend(cap);
  return table;
}

/** The sentences ranked against the query, best first, with their scores as bars. */
function ranking(texts, results, what) {
  const wrap = document.createElement('div');
  const p = document.createElement('p');
  p.className = 'hint';
  p.textContent = what;
  const ol = document.createElement('ol');
  ol.className = 'ranking';
  const top = Math.max(...results.map((r) => Math.abs(r.score)), 1e-9);
  for (const r of results) {
    const li = document.createElement('li');
    li.dataset.index = String(r.index);
    li.dataset.score = r.score.toFixed(4);
    const bar = document.createElement('span');
    bar.className = 'bar';
    bar.style.width = `${Math.round(100 * Math.max(0, r.score) / top)}%`;
    const label = document.createElement('span');
    label.textContent = `${r.score.toFixed(3)} — ${texts[r.index]}`;
    li.append(bar, label);
    ol.append(li);
  }
  wrap.append(p, ol);
  return wrap;
}

/** Runs the Embeddings form: the matrix, or the ranking when a query is given. */
export async function runEmbed() {
  const engine = app.engine;
  if (!engine || !app.info || app.genController) return;
  const texts = sentences();
  const query = $('embed-query').value.trim();
  const form = $('embed-form');
  if (texts.length === 0) {
    $('embed-texts').focus();
    return;
  }
  clearError();
  app.genController = new AbortController();
  setState('generating');
  const t0 = performance.now();
  try {
    // a model without a pooling type (a plain decoder) is pooled by its last token
    const pooling = app.info.pooling === 'none' ? 'last' : undefined;
    let out;
    if (query && app.info.pooling === 'rank') {
      const r = await engine.rerank(query, texts, { signal: app.genController.signal });
      out = ranking(texts, r, `Ranked by ${app.info.name || 'the model'}'s reranking scores`);
    } else if (query) {
      const [q, ...vecs] = await engine.embed([query, ...texts], { pooling, signal: app.genController.signal });
      const r = vecs.map((v, index) => ({ index, score: cosine(q, v) })).sort((a, b) => b.score - a.score);
      out = ranking(texts, r, 'Ranked by cosine similarity to the query');
    } else if (app.info.pooling === 'rank') {
      throw new Error('this model is a reranker: give a query to rank the sentences against');
    } else {
      out = matrix(texts, await engine.embed(texts, { pooling, signal: app.genController.signal }));
    }
    $('output').replaceChildren(out);
    $('embed-stats').textContent = `${texts.length + (query ? 1 : 0)} texts in ${fmtMs(performance.now() - t0)}` +
      ` · ${app.info.embeddingLength} dimensions · pooling ${pooling ?? app.info.pooling}`;
    form.dataset.status = 'done';
  } catch (err) {
    form.dataset.status = 'error';
    if (err?.name !== 'AbortError') showError(`Embedding failed: ${describeError(err)}`);
  } finally {
    app.genController = null;
    if (document.body.dataset.state === 'generating') setState('ready');
  }
}
