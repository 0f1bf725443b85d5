// web/demo.js — the demo page: picks a model from models/manifest.json, loads it into a worker
// engine with a progress bar, and streams a generation token by token with live statistics.
// It holds no inference logic (that is js/wasmlm.js) and builds no HTML from strings: generated
// text goes into the page as text nodes only.
//
// For tests the page exposes document.body.dataset.state ('loading' | 'ready' | 'generating' |
// 'error'), one <span class="tok" data-prob> per streamed token in #output, and the parameters
// of the last generation in #applied.

const MANIFEST_URL = new URL('../models/manifest.json', import.meta.url);
const DEFAULT_MODEL = 'stories260K';
const MAX_SEED = 2 ** 32 - 1;

// A 30-byte module that uses SIMD128 (i8x16.popcnt), from wasm-feature-detect: browsers without
// SIMD get the scalar build instead of a failed instantiation.
const SIMD_PROBE = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0,
  10, 10, 1, 8, 0, 65, 0, 253, 15, 253, 98, 11]);
const SIMD = typeof WebAssembly === 'object' && WebAssembly.validate(SIMD_PROBE);

const $ = (id) => document.getElementById(id);

/**
 * The sampling sliders: element id, the generate() parameter it sets, how its value reads
 * next to the slider, and how it reads in the "applied" line.
 */
const SLIDERS = [
  { id: 'temperature', param: 'temperature', name: 'temperature',
    show: (v) => (v === 0 ? 'greedy' : v.toFixed(2)), applied: (v) => v.toFixed(2) },
  { id: 'top-k', param: 'topK', name: 'top-k',
    show: (v) => (v === 0 ? 'off' : String(v)), applied: String },
  { id: 'top-p', param: 'topP', name: 'top-p', show: (v) => v.toFixed(2), applied: (v) => v.toFixed(2) },
  { id: 'repeat-penalty', param: 'repeatPenalty', name: 'repetition penalty',
    show: (v) => v.toFixed(2), applied: (v) => v.toFixed(2) },
  { id: 'max-tokens', param: 'maxTokens', name: 'max tokens', show: String, applied: String },
];

/** Page state; the engine and model info belong to the current load only. */
const app = {
  createWorkerEngine: null,
  entries: [],
  engine: null,
  info: null,
  loadSeq: 0,
  loadController: null,
  genController: null,
};

// ------------------------------------------------------------------------------------------------
// Formatting

function fmtBytes(n) {
  if (n >= 1e9) return `${(n / 1e9).toFixed(2)} GB`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(1)} MB`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(1)} kB`;
  return `${n} B`;
}

function fmtMs(ms) {
  return ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(ms < 10 ? 1 : 0)} ms`;
}

function fmtRate(tokensPerSec) {
  if (!Number.isFinite(tokensPerSec) || tokensPerSec <= 0) return '—';
  return `${tokensPerSec >= 100 ? Math.round(tokensPerSec) : tokensPerSec.toFixed(1)} tok/s`;
}

/** A one-line description of an error, with the C status name when the engine gave one. */
function describeError(err) {
  if (!err) return 'unknown error';
  const message = err.message || String(err);
  return err.code && !message.includes(err.code) ? `${message} (${err.code})` : message;
}

// ------------------------------------------------------------------------------------------------
// State and controls

/** Sets body[data-state] and enables the controls that make sense in that state. */
function setState(state) {
  document.body.dataset.state = state;
  const busy = state === 'generating';
  $('generate').disabled = busy || state === 'loading' || !app.info;
  $('stop').disabled = !busy;
  $('model').disabled = busy || app.entries.length === 0;
  $('output').setAttribute('aria-busy', String(busy));
}

function setStatus(text) {
  $('load-status').textContent = text;
}

function showError(text) {
  setStatus(text);
  setState('error');
}

function setStat(id, text) {
  $(`stat-${id}`).textContent = text;
}

/** Shows each slider's value next to it (also after the browser restores form values). */
function syncSliderOutputs() {
  for (const s of SLIDERS) {
    $(`${s.id}-value`).textContent = s.show(Number($(s.id).value));
  }
}

/**
 * Reads the controls into generate() parameters. An empty or invalid seed draws a random one
 * here, so the applied line can show it and a run can be repeated.
 */
function readParams() {
  const params = {};
  for (const s of SLIDERS) params[s.param] = Number($(s.id).value);
  const seedText = $('seed').value.trim();
  const seed = seedText === '' ? NaN : Math.trunc(Number(seedText));
  const seedRandom = !Number.isFinite(seed);
  params.seed = seedRandom ? crypto.getRandomValues(new Uint32Array(1))[0] : Math.min(Math.max(seed, 0), MAX_SEED);
  return { params, seedRandom };
}

function showApplied(params, seedRandom) {
  const parts = SLIDERS.map((s) => `${s.name} ${s.applied(params[s.param])}`);
  parts.push(`seed ${params.seed}${seedRandom ? ' (random)' : ''}`);
  $('applied').textContent = `applied: ${parts.join(' · ')}`;
}

// ------------------------------------------------------------------------------------------------
// Models

/** Fetches the manifest and fills the model <select>; picks ?model=ID or stories260K. */
async function loadManifest() {
  const res = await fetch(MANIFEST_URL, { cache: 'no-cache' });
  if (!res.ok) throw new Error(`cannot read ${MANIFEST_URL.pathname}: HTTP ${res.status}`);
  const { models } = await res.json();
  if (!Array.isArray(models) || models.length === 0) throw new Error('the model manifest is empty');
  app.entries = models;

  const select = $('model');
  select.replaceChildren(...models.map((m) => {
    const size = m.size ? fmtBytes(m.size) : 'size unknown';
    const option = new Option(`${m.id} · ${size}${m.verified === false ? ' · unverified' : ''}`, m.id);
    option.title = m.name;
    return option;
  }));
  const wanted = new URLSearchParams(location.search).get('model');
  select.value = models.some((m) => m.id === wanted) ? wanted : DEFAULT_MODEL;
  if (!select.value) select.value = models[0].id;
}

/**
 * Where to read a file from: the same-origin copy in models/files/ if the server has it (the
 * dev server maps ../shared/models there; models/fetch.mjs downloads into it), else the
 * published URL from the manifest.
 */
async function resolveSource(spec, signal) {
  const local = new URL(`../models/files/${encodeURIComponent(spec.file)}`, import.meta.url);
  try {
    const res = await fetch(local, { method: 'HEAD', cache: 'no-cache', signal });
    if (res.ok) {
      return { url: local.href, size: Number(res.headers.get('content-length')) || spec.size || 0, from: 'this server' };
    }
  } catch (err) {
    if (err.name === 'AbortError') throw err;
  }
  if (!spec.url) throw new Error(`${spec.file} is not on this server and has no published URL`);
  return { url: spec.url, size: spec.size || 0, from: new URL(spec.url).host };
}

/** Loads the selected model into a fresh worker engine; a newer call supersedes an older one. */
async function loadModel(entry) {
  const seq = ++app.loadSeq;
  app.loadController?.abort();
  const controller = new AbortController();
  app.loadController = controller;
  const old = app.engine;
  app.engine = null;
  app.info = null;
  old?.free().catch(() => {});

  setState('loading');
  setStatus(`Loading ${entry.id}…`);
  $('model-info').textContent = '';
  setStat('load', '…');
  const bar = $('load-progress');
  bar.value = 0;
  const t0 = performance.now();

  let engine = null;
  try {
    // GGUF files carry their vocabulary; llama2.c checkpoints come with a tokenizer.bin.
    const [model, tokenizer] = await Promise.all([
      resolveSource(entry, controller.signal),
      entry.tokenizer ? resolveSource(entry.tokenizer, controller.signal) : null,
    ]);
    engine = await app.createWorkerEngine({ simd: SIMD });
    if (seq !== app.loadSeq) { engine.free().catch(() => {}); return; }
    app.engine = engine;

    const parts = { model: { ...model, loaded: 0 }, tokenizer: { size: 0, ...tokenizer, loaded: 0 } };
    const info = await engine.load({
      model: model.url,
      tokenizer: tokenizer?.url,
      signal: controller.signal,
      onProgress: ({ stage, loaded, total }) => {
        if (seq !== app.loadSeq) return;
        const part = parts[stage] || parts.model;
        part.loaded = loaded;
        if (total) part.size = total;
        const all = parts.model.size + parts.tokenizer.size;
        const done = parts.model.loaded + parts.tokenizer.loaded;
        if (all) { bar.max = all; bar.value = Math.min(done, all); } else bar.removeAttribute('value');
        const of = all ? ` / ${fmtBytes(all)}` : '';
        setStatus(`Loading ${entry.id} from ${part.from}: ${stage} · ${fmtBytes(done)}${of}`);
      },
    });
    if (seq !== app.loadSeq) return;

    const ms = performance.now() - t0;
    app.info = info;
    bar.max = 1;
    bar.value = 1;
    setStat('load', fmtMs(ms));
    const total = parts.model.size + parts.tokenizer.size;
    setStatus(`${entry.id} ready · ${fmtBytes(total)} from ${parts.model.from} in ${fmtMs(ms)}`);
    $('model-info').textContent = [
      `dim ${info.dim}`, `${info.nLayers} layers`,
      `${info.nHeads} heads${info.nKvHeads !== info.nHeads ? ` (${info.nKvHeads} KV)` : ''}`,
      `vocab ${info.vocabSize}`, `context ${info.nCtx}`,
      info.simd ? 'SIMD128' : 'scalar',
    ].join(' · ');
    setStat('context', `0 / ${info.nCtx}`);
    setState('ready');
  } catch (err) {
    if (seq !== app.loadSeq) return;
    setStat('load', '—');
    showError(`Could not load ${entry.id}: ${describeError(err)}`);
  }
}

// ------------------------------------------------------------------------------------------------
// Generation

/** Generates from the prompt with the current controls, streaming tokens into #output. */
async function generate() {
  const engine = app.engine;
  if (!engine || !app.info || document.body.dataset.state === 'generating') return;

  const { params, seedRandom } = readParams();
  showApplied(params, seedRandom);
  const prompt = $('prompt').value;
  const nCtx = app.info.nCtx;

  const output = $('output');
  const promptSpan = document.createElement('span');
  promptSpan.className = 'prompt';
  promptSpan.append(document.createTextNode(prompt));
  output.replaceChildren(promptSpan);
  for (const id of ['ttft', 'prefill', 'decode']) setStat(id, '…');
  $('stat-prefill').title = '';
  setStat('tokens', '0');
  setStat('context', `0 / ${nCtx}`);
  setStat('stop', '—');

  const controller = new AbortController();
  app.genController = controller;
  setState('generating');

  const t0 = performance.now();
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
  try {
    for await (const tok of engine.generate(prompt, params, { signal: controller.signal })) {
      if (controller.signal.aborted) break;
      if (n === 0) {
        tFirst = performance.now();
        setStat('ttft', fmtMs(tFirst - t0));
      }
      n++;
      nPast = tok.nPast;
      const span = document.createElement('span');
      span.className = 'tok';
      span.dataset.prob = String(tok.prob);
      span.title = `p = ${(tok.prob * 100).toFixed(1)} %`;
      span.append(document.createTextNode(tok.text));
      output.append(span);
      if (!frame) frame = requestAnimationFrame(refresh);
    }
    if (controller.signal.aborted) stopReason = 'aborted';
    else {
      result = engine.lastResult;
      stopReason = result?.stopReason ?? 'done';
    }
  } catch (err) {
    if (err?.name === 'AbortError') stopReason = 'aborted';
    else failure = err;
  } finally {
    // An aborted generation may still leave its timings (stopReason 'aborted') in lastResult.
    if (!result && !failure && engine.lastResult !== previousResult) result = engine.lastResult;
    app.genController = null;
    output.removeEventListener('scroll', onScroll);
    if (frame) cancelAnimationFrame(frame);
  }

  refresh();
  if (n === 0) setStat('ttft', '—');
  if (result) {
    setStat('prefill', fmtRate(result.prefillTokensPerSec));
    $('stat-prefill').title = `${result.nPrompt} prompt tokens in ${fmtMs(result.prefillMs)}`;
    setStat('decode', fmtRate(result.decodeTokensPerSec));
  } else {
    setStat('prefill', '—');
    if (n <= 1) setStat('decode', '—');
  }
  const stopStat = $('stat-stop');
  stopStat.textContent = failure ? 'error' : stopReason.replace('_', ' ');
  stopStat.dataset.reason = failure ? 'error' : stopReason;
  if (failure) showError(`Generation failed: ${describeError(failure)}`);
  else setState('ready');
}

function stop() {
  app.genController?.abort();
}

// ------------------------------------------------------------------------------------------------
// Wiring

function wireControls() {
  for (const s of SLIDERS) $(s.id).addEventListener('input', syncSliderOutputs);
  syncSliderOutputs();

  $('gen-form').addEventListener('submit', (event) => {
    event.preventDefault();
    generate();
  });
  $('stop').addEventListener('click', stop);
  document.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      generate();
    } else if (event.key === 'Escape' && app.genController) {
      event.preventDefault();
      stop();
    }
  });
  $('model').addEventListener('change', () => {
    const entry = app.entries.find((m) => m.id === $('model').value);
    if (entry) {
      const url = new URL(location.href);
      url.searchParams.set('model', entry.id);
      history.replaceState(null, '', url);
      loadModel(entry);
    }
  });
}

async function main() {
  wireControls();
  setState('loading');
  try {
    ({ createWorkerEngine: app.createWorkerEngine } = await import('../js/wasmlm.js'));
  } catch (err) {
    showError(`Could not load the wasmlm library (js/wasmlm.js): ${describeError(err)}`);
    return;
  }
  try {
    await loadManifest();
  } catch (err) {
    showError(`Could not read the model list: ${describeError(err)}`);
    return;
  }
  setState('loading');
  await loadModel(app.entries.find((m) => m.id === $('model').value));
}

main();
