// web/demo/generate.js — a run: a streamed generation into #output (with live statistics) or a
// beam search listing its beams, and Stop.

import { fmtBytes, fmtMs, fmtRate, describeError } from './format.js';
import { $, app, setState, showError, clearError } from './state.js';
import { beamWidth, syncStopError, readParams, showApplied } from './controls.js';
import { clearChart } from './chart.js';
import { appendStreamed, revealOutput, resetOutputState } from './output.js';
import { setStat, showPrefill } from './stats.js';
import { formatParams } from './output-format.js';

/** Generates from the prompt with the current controls, streaming tokens into #output. */
export async function generate() {
  const engine = app.engine;
  if (!engine || !app.info || ['generating', 'loading'].includes(document.body.dataset.state)) return;
  if (syncStopError()) {
    $('stop-strings').focus();
    return;
  }
  clearError();

  const { params: sampling, seedRandom } = readParams();
  const format = formatParams('generate');
  const params = { ...sampling, ...format.params };
  document.body.dataset.runs = String(Number(document.body.dataset.runs || 0) + 1);
  const width = beamWidth();
  if (width >= 2) {
    revealOutput();
    await beamSearch(engine, width, params.maxTokens, format);
    return;
  }
  const prompt = $('prompt').value;
  const nCtx = app.info.nCtx;
  // The request goes to the worker first (the first next() posts it), and the page updates
  // itself (a layout, a frame) while the worker prefills: the first token is not kept waiting.
  const controller = new AbortController();
  const t0 = performance.now();
  const tokens = engine.generate(prompt, params, { signal: controller.signal })[Symbol.asyncIterator]();
  let step = tokens.next();
  step.catch(() => {}); // awaited in the loop below

  revealOutput();
  showApplied(params, seedRandom, format.label);
  app.lastParams = params;

  const output = $('output');
  const promptSpan = document.createElement('span');
  promptSpan.className = 'prompt';
  promptSpan.append(document.createTextNode(prompt));
  output.replaceChildren(promptSpan);
  resetOutputState();
  for (const id of ['ttft', 'prefill', 'decode']) setStat(id, '…');
  $('stat-prefill').title = '';
  $('stat-decode').title = '';
  setStat('tokens', '0');
  setStat('context', `0 / ${nCtx}`);
  setStat('stop', '—');

  app.genController = controller;
  setState('generating');

  let tFirst = 0;
  let n = 0;
  let nPast = 0;
  let frame = 0;
  let stickToBottom = true;
  const refresh = () => {
    frame = 0;
    const secs = (performance.now() - tFirst) / 1000;
    if (n > 1 && secs > 0) setStat('decode', fmtRate((n - 1) / secs));
    setStat('tokens', String(n));
    if (nPast) setStat('context', `${nPast} / ${nCtx}`);
    if (stickToBottom) output.scrollTop = output.scrollHeight;
  };
  const onScroll = () => {
    stickToBottom = output.scrollHeight - output.scrollTop - output.clientHeight < 24;
  };
  output.addEventListener('scroll', onScroll, { passive: true });

  const previousResult = engine.lastResult;
  let stopReason = null;
  let result = null;
  let failure = null;
  let ended = false;
  try {
    for (;;) {
      const { value: tok, done } = await step;
      if (done) {
        ended = true;
        break;
      }
      if (controller.signal.aborted) break;
      nPast = tok.nPast;
      if (tok.id >= 0 && n++ === 0) {
        tFirst = performance.now();
        setStat('ttft', fmtMs(tFirst - t0));
      }
      appendStreamed(output, tok, n);
      if (tok.id >= 0 && !frame) frame = requestAnimationFrame(refresh);
      step = tokens.next();
    }
    if (controller.signal.aborted) stopReason = 'aborted';
    else {
      result = engine.lastResult;
      stopReason = result?.stopReason ?? 'done';
    }
  } catch (err) {
    ended = true;
    if (err?.name === 'AbortError') stopReason = 'aborted';
    else failure = err;
  } finally {
    if (!ended) await tokens.return?.(); // left early: ends the worker's generation
    // An aborted generation may still leave its timings (stopReason 'aborted') in lastResult.
    if (!result && !failure && engine.lastResult !== previousResult) result = engine.lastResult;
    app.genController = null;
    output.removeEventListener('scroll', onScroll);
    if (frame) cancelAnimationFrame(frame);
  }

  refresh();
  if (n === 0) setStat('ttft', '—');
  if (result) {
    showPrefill(result.nPrompt, result.prefillMs, result.prefillTokensPerSec);
    setStat('decode', fmtRate(result.decodeTokensPerSec));
    const memory = engine.wasmMemoryBytes ?? result.wasmMemoryBytes;
    if (memory) setStat('memory', fmtBytes(memory));
  } else {
    setStat('prefill', '—');
    if (n <= 1) setStat('decode', '—');
  }
  const stopStat = $('stat-stop');
  stopStat.textContent = failure ? 'error' : stopReason.replace('_', ' ');
  stopStat.dataset.reason = failure ? 'error' : stopReason;
  if (failure) showError(`Generation failed: ${describeError(failure)}`, 'generation');
  else setState('ready');
}

/** Runs a beam search of `width` beams and lists them in #output, best first. */
export async function beamSearch(engine, width, maxTokens, format = { params: {}, label: '' }) {
  const prompt = $('prompt').value;
  const nCtx = app.info.nCtx;
  const output = $('output');
  output.replaceChildren();
  resetOutputState();
  app.lastParams = null; // a beam search leaves no distribution to preview
  clearChart('A beam search draws no samples: no candidates to show.');
  $('applied').textContent = `applied: beam search · width ${width} · max tokens ${maxTokens} · length penalty 1` +
    (format.label ? ` · ${format.label}` : '');
  for (const id of ['ttft', 'prefill', 'decode']) setStat(id, '—');
  $('stat-prefill').title = '';
  $('stat-decode').title = '';
  setStat('tokens', '…');
  setStat('stop', '—');

  const controller = new AbortController();
  app.genController = controller;
  setState('generating');
  let result = null;
  let failure = null;
  let aborted = false;
  const t0 = performance.now();
  try {
    result = await engine.beamSearch(prompt, { width, maxTokens, ...format.params }, { signal: controller.signal });
  } catch (err) {
    if (err?.name === 'AbortError') {
      aborted = true;
      result = engine.lastBeamResult;
    } else {
      failure = err;
    }
  } finally {
    app.genController = null;
  }
  const ms = performance.now() - t0;

  if (result) {
    const list = document.createElement('ol');
    list.className = 'beams';
    list.setAttribute('aria-label', `${result.beams.length} beams, best first`);
    result.beams.forEach((beam, i) => {
      const li = document.createElement('li');
      li.className = 'beam';
      li.dataset.score = String(beam.score);
      li.dataset.logprob = String(beam.logprob);
      li.dataset.tokens = String(beam.tokens.length);
      const text = document.createElement('p');
      text.className = 'beam-text';
      const promptSpan = document.createElement('span');
      promptSpan.className = 'prompt';
      promptSpan.textContent = prompt;
      const gen = document.createElement('span');
      gen.className = 'beam-gen';
      gen.textContent = beam.text;
      text.append(promptSpan, gen);
      const meta = document.createElement('p');
      meta.className = 'beam-meta';
      meta.textContent = `${i === 0 ? 'Best · ' : ''}score ${beam.score.toFixed(4)} · log-prob ` +
        `${beam.logprob.toFixed(3)} · ${beam.tokens.length} tokens · ${beam.stopReason.replace('_', ' ')}`;
      li.append(text, meta);
      list.append(li);
    });
    output.replaceChildren(list);
    const best = result.beams[0];
    setStat('tokens', best ? String(best.tokens.length) : '0');
    setStat('context', best ? `${result.nPrompt + best.tokens.length} / ${nCtx}` : `0 / ${nCtx}`);
    // Each step decodes one token for each live beam: at most width tokens. The time includes
    // the prompt's prefill (the search reports one duration).
    const evaluated = result.steps * result.width;
    setStat('decode', `${fmtRate(evaluated / (ms / 1000))} · ${result.width} beams`);
    $('stat-decode').title = `${result.steps} steps × ${result.width} beams (at most ${evaluated} tokens) in ` +
      `${fmtMs(ms)}, the ${result.nPrompt}-token prompt included · ${fmtBytes(result.kvBytes)} of KV cache ` +
      `(${fmtBytes(result.kvBytesPerBeam)} per beam)`;
    setStat('prefill', `${result.nPrompt} tokens: timed with the search`);
    $('stat-prefill').title = 'A beam search reports one duration, prefill included: see Decode.';
    if (engine.wasmMemoryBytes) setStat('memory', fmtBytes(engine.wasmMemoryBytes));
  } else {
    setStat('tokens', '0');
  }
  const reason = failure ? 'error' : aborted ? 'aborted' : (result?.beams[0]?.stopReason ?? 'done');
  const stopStat = $('stat-stop');
  stopStat.textContent = reason.replace('_', ' ');
  stopStat.dataset.reason = reason;
  if (failure) showError(`Beam search failed: ${describeError(failure)}`, 'generation');
  else setState('ready');
}

export function stop() {
  app.genController?.abort();
}
