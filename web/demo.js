// web/demo.js — the demo page: chooses a model (the manifest's published models, a URL, or local
// files), loads it into a worker engine with a download progress bar and the browser cache
// (js/cache.js via web/sources.js), and streams a generation token by token, each token coloured
// by its probability, with live statistics. It holds no inference logic (that is js/wasmlm.js)
// and builds no HTML from strings: generated text goes into the page as text nodes only.
//
// For tests the page exposes document.body.dataset.state ('loading' | 'ready' | 'generating' |
// 'error'); #load-status carries data-error (why a load failed: http-404, http, network,
// checksum, format, truncated, …) and data-cache (hit, stored, quota, unavailable, error,
// local), and #load-detail the bytes, total and rate during a load; #output holds one
// <span class="tok p0..p4" data-prob data-id> per streamed token (its colour bin); #applied
// lists the parameters of the last generation; body[data-runs] counts the generations and
// beam searches started. #prob-chart holds one <tr data-id data-prob data-prob-sampled> per
// candidate of the last token (data-source 'generation' or 'preview'; data-previews counts the
// previews drawn after slider moves, data-preview-attempts the debounced previews that ran to
// their end, drawn or not); #token-alternatives lists a hovered token's candidates;
// a beam search fills #output with <li class="beam" data-score data-logprob>, best first.
//
// The library (js/wasmlm.js, js/cache.js through ./sources.js) is imported dynamically, so a
// page that cannot load it still says why.

const MANIFEST_URL = new URL('../models/manifest.json', import.meta.url);
const DEFAULT_MODEL = 'stories260K';
const MAX_SEED = 2 ** 32 - 1;
const MAX_STOPS = 8;
const MAX_STOP_BYTES = 63;
/** Prompts shorter than this (in tokens) get no prefill speed: fixed costs dominate their time. */
const MIN_PREFILL_TOKENS = 32;

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
  { id: 'min-p', param: 'minP', name: 'min-p',
    show: (v) => (v === 0 ? 'off' : v.toFixed(2)), applied: (v) => v.toFixed(2) },
  { id: 'typical-p', param: 'typicalP', name: 'typical-p',
    show: (v) => (v === 1 ? 'off' : v.toFixed(2)), applied: (v) => v.toFixed(2) },
  { id: 'repeat-penalty', param: 'repeatPenalty', name: 'repetition penalty',
    show: (v) => (v === 1 ? 'off' : v.toFixed(2)), applied: (v) => v.toFixed(2) },
  { id: 'presence-penalty', param: 'presencePenalty', name: 'presence penalty',
    show: (v) => (v === 0 ? 'off' : v.toFixed(2)), applied: (v) => v.toFixed(2) },
  { id: 'frequency-penalty', param: 'frequencyPenalty', name: 'frequency penalty',
    show: (v) => (v === 0 ? 'off' : v.toFixed(2)), applied: (v) => v.toFixed(2) },
  { id: 'max-tokens', param: 'maxTokens', name: 'max tokens', show: String, applied: String },
];

/** Names of the sampler orders (the #sampler-order options), for the applied line. */
const ORDER_NAMES = { llamacpp: 'llama.cpp', runc: 'run.c' };

/** Candidates shown in the probability chart (and requested per token). */
const N_PROBS = 10;

/** Wait after the last slider movement before previewing the distribution again. */
const PREVIEW_DEBOUNCE_MS = 50;

/** Presets set the sliders (the seed and the stop strings stay as they are). */
const PRESETS = {
  precise: { name: 'Precise', temperature: 0.3, topK: 20, topP: 0.75, minP: 0.1, typicalP: 1,
    repeatPenalty: 1.15, presencePenalty: 0, frequencyPenalty: 0, maxTokens: 128 },
  balanced: { name: 'Balanced', temperature: 0.8, topK: 40, topP: 0.9, minP: 0.05, typicalP: 1,
    repeatPenalty: 1.1, presencePenalty: 0, frequencyPenalty: 0, maxTokens: 256 },
  creative: { name: 'Creative', temperature: 1.2, topK: 0, topP: 0.95, minP: 0.02, typicalP: 1,
    repeatPenalty: 1.0, presencePenalty: 0.3, frequencyPenalty: 0.2, maxTokens: 384 },
};

/** Token probability → colour bin (the legend under the output lists the same bounds). */
const PROB_BINS = [0.1, 0.3, 0.6, 0.9];
const probBin = (p) => PROB_BINS.filter((bound) => p >= bound).length;

/** Page state; the engine and model info belong to the current load only. */
const app = {
  createWorkerEngine: null,
  sources: null,     // ./sources.js
  entries: [],
  engine: null,      // the loaded model's engine (kept while another model loads)
  info: null,
  loaded: null,      // {label, entryId, local, status, loadTime} of the model app.engine holds
  loadSeq: 0,
  loadController: null,
  genController: null,
  localPending: { model: null, tokenizer: null, kind: null },
  activeToken: null, // the token span that takes the output's Tab stop (roving tabindex)
  tokenTops: new WeakMap(), // token span → its top alternatives (Token.top)
  lastParams: null,  // the parameters of the last generation (previews start from them)
  previewTimer: 0,
  previewSeq: 0,     // a newer preview (or a new token) supersedes an older one
  previews: 0,       // previews drawn, exposed as #prob-chart[data-previews] for tests
  previewAttempts: 0, // previews run to their end, drawn or not: #prob-chart[data-preview-attempts]
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

function fmtBytesPerSec(n) {
  if (!Number.isFinite(n) || n <= 0) return '';
  return `${(n / 1e6).toFixed(n >= 1e7 ? 0 : n >= 1e6 ? 1 : 2)} MB/s`;
}

function fmtPercent(p) {
  const pct = p * 100;
  return `${pct >= 10 || pct === 0 ? pct.toFixed(1) : pct.toPrecision(2)} %`;
}

/** A token's text as it reads in a sentence: visible newlines and tabs. */
function showPiece(text) {
  return `“${text.replace(/\n/g, '↵').replace(/\t/g, '⇥')}”`;
}

/** A one-line description of an error, with the C status name when the engine gave one. */
function describeError(err) {
  if (!err) return 'unknown error';
  const message = err.message || String(err);
  return err.code && !message.includes(err.code) ? `${message} (${err.code})` : message;
}

/**
 * Why a load failed, in words a reader can act on, and a short kind for tests and styling.
 * @returns {{kind: string, text: string}}
 */
function explainLoadError(err) {
  switch (err?.code) {
    case 'WLM_ERR_IO':
      if (err.httpStatus === 404) {
        return { kind: 'http-404', text: `not found (HTTP 404): ${err.url}. Check the address.` };
      }
      if (err.httpStatus) {
        return { kind: 'http', text: `the server answered HTTP ${err.httpStatus} for ${err.url}.` };
      }
      return {
        kind: 'network',
        text: `cannot download ${err.url ?? 'the file'}: the network failed, or the server does not let ` +
          'this page read it (CORS: a server hosting models for other sites must send ' +
          'Access-Control-Allow-Origin).',
      };
    case 'WLM_ERR_CHECKSUM':
      return {
        kind: 'checksum',
        text: typeof err.expected === 'string'
          ? `checksum mismatch: expected sha256 ${err.expected}, got ${err.actual}. The file is damaged ` +
            'or was replaced; it was neither loaded nor cached.'
          : `size mismatch: expected ${err.expected} bytes, got ${err.actual}. It was neither loaded nor cached.`,
      };
    case 'WLM_ERR_FORMAT':
      return {
        kind: 'format',
        text: 'this is not a model file wasmlm reads (a GGUF file, or a llama2.c checkpoint with its ' +
          `tokenizer.bin): ${err.message} (WLM_ERR_FORMAT)`,
      };
    case 'WLM_ERR_TRUNCATED':
      return { kind: 'truncated', text: `the file is incomplete: ${err.message}` };
    case 'WLM_ERR_UNSUPPORTED':
      return { kind: 'unsupported', text: `wasmlm does not support this model: ${err.message}` };
    case 'WLM_ERR_TOKENIZER':
      return { kind: 'tokenizer', text: `tokenizer problem: ${err.message}` };
    case 'WLM_ERR_NOMEM':
      return {
        kind: 'memory',
        text: `not enough memory: ${err.message}. A wasm instance has at most 4 GB, often less on phones.`,
      };
    default:
      return { kind: 'other', text: describeError(err) };
  }
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
  $('url-load').disabled = busy;
  $('model-files').disabled = busy;
  $('output-live').setAttribute('aria-busy', String(busy));
}

function setStatus(text) {
  $('load-status').textContent = text;
}

/**
 * Shows a failure in the model panel's status line and under the output (#run-error, in the
 * output's live region), and sets the 'error' state; Generate stays enabled while a model is
 * loaded. The next successful load or run clears it (clearError).
 */
function showError(text, kind = 'other') {
  setStatus(text);
  $('load-status').dataset.error = kind;
  $('run-error').textContent = text;
  $('run-error').dataset.kind = kind;
  setState('error');
}

/** Clears a shown failure; the status line goes back to what the last successful load said. */
function clearError() {
  $('run-error').textContent = '';
  delete $('run-error').dataset.kind;
  const status = $('load-status');
  if (status.dataset.error !== undefined && app.loaded) {
    delete status.dataset.error;
    setStatus(app.loaded.status);
  }
}

function setStat(id, text) {
  $(`stat-${id}`).textContent = text;
}

/** Shows each slider's value next to it (also after the browser restores form values). */
function syncSliderOutputs() {
  for (const s of SLIDERS) {
    $(`${s.id}-value`).textContent = s.show(Number($(s.id).value));
  }
  const width = beamWidth();
  $('beam-width-value').textContent = width >= 2 ? String(width) : 'off';
  syncPresetButtons();
}

function sliderValues() {
  return Object.fromEntries(SLIDERS.map((s) => [s.param, Number($(s.id).value)]));
}

/** The beam width control: 0 or 1 is off (sampling), 2..8 runs a beam search. */
function beamWidth() {
  const v = Math.trunc(Number($('beam-width').value));
  return Number.isFinite(v) && v >= 2 ? Math.min(v, 8) : 0;
}

/** Marks the preset the sliders match (aria-pressed), and says what it sets. */
function syncPresetButtons() {
  const values = sliderValues();
  let current = null;
  for (const button of document.querySelectorAll('button.preset')) {
    const preset = PRESETS[button.dataset.preset];
    const on = SLIDERS.every((s) => Math.abs(values[s.param] - preset[s.param]) < 1e-9);
    button.setAttribute('aria-pressed', String(on));
    if (on) current = preset;
  }
  $('preset-hint').textContent = current
    ? `${current.name}: ${SLIDERS.map((s) => `${s.name} ${s.show(current[s.param])}`).join(' · ')}. ` +
      'Seed and stop strings are kept.'
    : 'Custom settings. A preset sets temperature, top-k, top-p, min-p, typical-p, the penalties and max tokens.';
}

function applyPreset(key) {
  const preset = PRESETS[key];
  for (const s of SLIDERS) $(s.id).value = String(preset[s.param]);
  syncSliderOutputs();
}

/**
 * Stop strings from the text field: comma-separated, "\," a comma, "\n" a new line, "\t" a tab,
 * "\\" a backslash; each trimmed (before unescaping, so "\n" survives). Returns {stops, error}.
 */
function parseStops(text) {
  const raw = [];
  let cur = '';
  for (let i = 0; i < text.length; i++) {
    if (text[i] === '\\' && i + 1 < text.length) cur += text[i] + text[++i];
    else if (text[i] === ',') { raw.push(cur); cur = ''; } else cur += text[i];
  }
  raw.push(cur);
  const unescape = (s) => s.replace(/\\(.)/g, (_, c) => ({ n: '\n', t: '\t' }[c] ?? c));
  const stops = raw.map((s) => s.trim()).filter(Boolean).map(unescape);
  const encoder = new TextEncoder();
  if (stops.length > MAX_STOPS) return { stops, error: `At most ${MAX_STOPS} stop strings (there are ${stops.length}).` };
  const long = stops.find((s) => encoder.encode(s).length > MAX_STOP_BYTES);
  if (long) return { stops, error: `${showPiece(long)} is longer than ${MAX_STOP_BYTES} bytes.` };
  return { stops, error: '' };
}

function syncStopError() {
  const { error } = parseStops($('stop-strings').value);
  $('stop-error').textContent = error;
  $('stop-strings').setAttribute('aria-invalid', String(Boolean(error)));
  return error;
}

/**
 * Reads the controls into generate() parameters. An empty or invalid seed draws a random one
 * here, so the applied line can show it and a run can be repeated.
 */
function readParams() {
  const params = sliderValues();
  params.samplerOrder = $('sampler-order').value;
  params.nProbs = N_PROBS;
  const seedText = $('seed').value.trim();
  const seed = seedText === '' ? NaN : Math.trunc(Number(seedText));
  const seedRandom = !Number.isFinite(seed);
  params.seed = seedRandom ? crypto.getRandomValues(new Uint32Array(1))[0] : Math.min(Math.max(seed, 0), MAX_SEED);
  const { stops } = parseStops($('stop-strings').value);
  if (stops.length) params.stop = stops;
  return { params, seedRandom };
}

function showApplied(params, seedRandom) {
  const parts = SLIDERS.map((s) => `${s.name} ${s.applied(params[s.param])}`);
  if (params.samplerOrder !== 'llamacpp') {
    parts.splice(parts.length - 1, 0, `order ${ORDER_NAMES[params.samplerOrder]}`);
  }
  if (params.stop) parts.push(`stop ${params.stop.map((s) => JSON.stringify(s)).join(' ')}`);
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
    const plan = app.sources.planFromEntry(m);
    const size = m.size ? fmtBytes(m.size + (m.tokenizer?.size ?? 0)) : 'size unknown';
    const option = new Option(`${m.id} · ${size}${plan.verified ? '' : ' · unverified'}`, m.id);
    option.title = m.name;
    return option;
  }));
  const wanted = new URLSearchParams(location.search).get('model');
  select.value = models.some((m) => m.id === wanted) ? wanted : DEFAULT_MODEL;
  if (!select.value) select.value = models[0].id;
  showEntryNote();
}

function selectedEntry() {
  return app.entries.find((m) => m.id === $('model').value);
}

/** Describes the selected manifest entry under the picker: format, size, checksum. */
function showEntryNote() {
  const entry = selectedEntry();
  if (!entry) return;
  const plan = app.sources.planFromEntry(entry);
  const format = entry.format === 'gguf' ? 'GGUF' : 'llama2.c checkpoint + tokenizer';
  const size = entry.size ? fmtBytes(entry.size + (entry.tokenizer?.size ?? 0)) : 'size unknown';
  const check = plan.verified ? 'sha256 checked on download'
    : 'unverified: the manifest has no sha256 for it, so it is loaded unchecked';
  $('model-note').textContent = `${entry.name}. ${format} · ${size} · ${check}.`;
  $('model-note').dataset.verified = String(plan.verified);
}

/**
 * Aggregates the progress of a load's downloads (one per part) into the bar and the line under
 * it (bytes, total, rate), redrawn at most once per frame. The status line, a live region, only
 * changes when the phase or the source does, so a screen reader is not flooded with numbers.
 */
function progressView(label, parts) {
  const bar = $('load-progress');
  const detail = $('load-detail');
  const state = new Map(parts.map((p) => [p.stage, { loaded: 0, total: p.size || 0, from: '' }]));
  let frame = 0;
  const t0 = performance.now();
  let phase = 'download';
  let headline = '';
  const draw = () => {
    frame = 0;
    let loaded = 0;
    let total = 0;
    let unknown = false;
    for (const s of state.values()) {
      loaded += s.loaded;
      total += s.total;
      if (!s.total) unknown = true;
    }
    if (!unknown && total) {
      bar.max = total;
      bar.value = Math.min(loaded, total);
    } else {
      bar.removeAttribute('value'); // indeterminate
    }
    const froms = [...new Set([...state.values()].map((s) => s.from).filter(Boolean))].join(' and ');
    const line = phase === 'download'
      ? `Downloading ${label}${froms ? ` from ${froms}` : ''}…`
      : `Reading ${label} into the engine…`;
    if (line !== headline) setStatus(headline = line);
    const secs = (performance.now() - t0) / 1000;
    const rate = phase === 'download' && secs > 0.05 ? fmtBytesPerSec(loaded / secs) : '';
    const of = !unknown && total ? ` / ${fmtBytes(total)}` : '';
    detail.textContent = `${fmtBytes(loaded)}${of}${rate ? ` · ${rate}` : ''}`;
  };
  const schedule = () => { if (!frame) frame = requestAnimationFrame(draw); };
  return {
    /** Download progress of one part ({loaded, total, bytesPerSec, from}). */
    download(stage, p) {
      Object.assign(state.get(stage), p);
      schedule();
    },
    /** The engine copying the bytes into wasm memory (engine.load's onProgress). */
    engine({ stage, loaded, total }) {
      if (phase !== 'engine') {
        phase = 'engine';
        for (const s of state.values()) s.loaded = 0;
      }
      const s = state.get(stage);
      if (s) { s.loaded = loaded; if (total) s.total = total; }
      schedule();
    },
    /** Stops drawing and clears the numbers (the status line then says how the load ended). */
    stop() {
      if (frame) cancelAnimationFrame(frame);
      frame = 0;
      detail.textContent = '';
    },
  };
}

/**
 * Shows the loaded model in the picker: its manifest entry, or (a URL or local files) an extra
 * option naming it, so the picker never names a model that is not the one loaded.
 */
function syncPicker() {
  const select = $('model');
  const loaded = app.loaded;
  let other = $('model-other');
  if (!loaded) return;
  if (loaded.entryId) {
    other?.remove();
    select.value = loaded.entryId;
  } else {
    if (!other) {
      other = new Option('', '');
      other.id = 'model-other';
      select.append(other);
    }
    other.textContent = `${loaded.label} · ${loaded.local ? 'local file' : 'from a URL'}`;
    select.value = '';
  }
  showEntryNote();
  const url = new URL(location.href);
  if ((url.searchParams.get('model') ?? null) !== loaded.entryId) {
    if (loaded.entryId) url.searchParams.set('model', loaded.entryId);
    else url.searchParams.delete('model');
    history.replaceState(null, '', url);
  }
}

/**
 * Loads a plan into a fresh worker engine; a newer call supersedes an older one. The model
 * loaded before stays loaded until the new one is ready: if the load fails, it is still the one
 * Generate uses, and the picker and the status line say so.
 */
async function loadModel(plan) {
  const seq = ++app.loadSeq;
  app.loadController?.abort();
  const controller = new AbortController();
  app.loadController = controller;

  setState('loading');
  clearError();
  const status = $('load-status');
  delete status.dataset.error;
  delete status.dataset.cache;
  setStatus(`Loading ${plan.label}…`);
  setStat('load', '…');
  const bar = $('load-progress');
  bar.max = 1;
  bar.value = 0;
  const view = progressView(plan.label, plan.parts);
  const t0 = performance.now();

  // The worker starts while the files download. Unless this load adopts it, it is freed.
  const enginePromise = app.createWorkerEngine({ simd: SIMD });
  enginePromise.catch(() => {}); // awaited below; a failed download must not leave it unhandled
  let adopted = false;
  try {
    const fetched = await Promise.all(plan.parts.map((part) => app.sources.fetchPart(part, {
      signal: controller.signal,
      onProgress: (p) => { if (seq === app.loadSeq) view.download(part.stage, p); },
    }).catch((err) => { controller.abort(); throw err; })));
    const engine = await enginePromise;
    if (seq !== app.loadSeq) return;

    const [model, tokenizer] = fetched;
    const info = await engine.load({
      model: model.blob,
      tokenizer: tokenizer?.blob,
      signal: controller.signal,
      onProgress: (p) => { if (seq === app.loadSeq) view.engine(p); },
    });
    if (seq !== app.loadSeq) return;
    view.stop();

    // Only files the engine accepted are kept.
    const saved = await Promise.all(fetched.filter((f) => f.save).map((f) => f.save()));
    if (seq !== app.loadSeq) return;

    // The new model replaces the old one only now.
    const old = app.engine;
    app.engine = engine;
    app.info = info;
    adopted = true;
    old?.free().catch(() => {});
    app.lastParams = null; // the chart's last token belonged to the old model

    const ms = performance.now() - t0;
    bar.max = 1;
    bar.value = 1;
    setStat('load', fmtMs(ms));
    setStat('memory', fmtBytes(info.wasmMemoryBytes));
    // helper threads need a cross-origin isolated page (COOP + COEP headers, as `npm start` sends)
    setStat('threads', info.threads > 1 || self.crossOriginIsolated ? String(info.threads)
      : '1 (the page is not cross-origin isolated)');
    const bytes = fetched.reduce((n, f) => n + f.blob.size, 0);
    const from = [...new Set(fetched.map((f) => f.from))].join(' and ');
    let text = `${plan.label} ready · ${fmtBytes(bytes)} from ${from} in ${fmtMs(ms)}`;
    let cacheState;
    if (plan.local) {
      cacheState = 'local';
    } else if (fetched.every((f) => f.fromCache)) {
      cacheState = 'hit';
      text += ' (no download)';
    } else {
      const failed = saved.find((r) => !r.stored);
      cacheState = failed ? failed.reason : 'stored';
      if (failed?.reason === 'quota') {
        text += ' · not cached: this site\'s storage quota is full, so it will be downloaded again next time';
      } else if (failed?.reason === 'unavailable') {
        text += ' · not cached: Cache Storage needs https or localhost';
      } else if (failed) {
        text += ` · not cached: ${describeError(failed.error)}`;
      } else {
        text += ' · cached for next time';
      }
    }
    if (!plan.verified) text += ' · unverified (no checksum)';
    status.dataset.cache = cacheState;
    setStatus(text);
    app.loaded = { label: plan.label, entryId: plan.entryId ?? null, local: Boolean(plan.local), status: text,
      loadTime: fmtMs(ms) };
    syncPicker();
    $('model-info').textContent = [
      `dim ${info.dim}`, `${info.nLayers} layers`,
      `${info.nHeads} heads${info.nKvHeads !== info.nHeads ? ` (${info.nKvHeads} KV)` : ''}`,
      `vocab ${info.vocabSize}`, `context ${info.nCtx}`,
      info.simd ? 'SIMD128' : 'scalar',
      `${info.threads} thread${info.threads > 1 ? 's' : ''}`,
    ].join(' · ');
    setStat('context', `0 / ${info.nCtx}`);
    setState('ready');
    renderCacheList();
  } catch (err) {
    view.stop();
    if (seq !== app.loadSeq) return;
    if (err?.name === 'AbortError') return;
    bar.max = 1;
    bar.value = app.loaded ? 1 : 0;
    const { kind, text } = explainLoadError(err);
    // The previous model, if any, is still loaded: the picker and the statistics describe it.
    setStat('load', app.loaded?.loadTime ?? '—');
    syncPicker();
    const kept = app.loaded ? ` ${app.loaded.label} is still loaded: Generate uses it.` : '';
    showError(`Could not load ${plan.label}: ${text}${kept}`, kind);
  } finally {
    if (!adopted) enginePromise.then((e) => e.free(), () => {}).catch(() => {});
  }
}

/** " (12.3 MB used of 20.0 MB)" from navigator.storage.estimate(), or "". */
async function quotaNumbers() {
  try {
    const { usage, quota } = await navigator.storage.estimate();
    return Number.isFinite(usage) && Number.isFinite(quota) ? ` (${fmtBytes(usage)} used of ${fmtBytes(quota)})` : '';
  } catch {
    return '';
  }
}

// ---- local files ----

/**
 * Takes files from the picker or a drop: a GGUF (or an unrecognised file, for the engine to
 * judge) loads at once; a llama2.c checkpoint waits for its tokenizer and the other way round.
 */
async function takeLocalFiles(fileList) {
  const files = [...fileList];
  if (files.length === 0) return;
  const pending = app.localPending;
  for (const file of files) {
    const kind = await app.sources.classifyFile(file);
    // An unrecognised file next to a checkpoint is taken as its tokenizer; the engine judges.
    const asTokenizer = kind === 'tokenizer' ||
      (kind === 'unknown' && pending.kind === 'checkpoint' && !pending.tokenizer);
    if (asTokenizer) pending.tokenizer = file;
    else {
      pending.model = file;
      pending.kind = kind;
    }
  }
  const note = $('local-pending');
  const { model, tokenizer, kind } = pending;
  if (model && (kind !== 'checkpoint' || tokenizer)) {
    app.localPending = { model: null, tokenizer: null, kind: null };
    note.textContent = '';
    await loadModel(app.sources.planFromFiles(model, kind === 'checkpoint' ? tokenizer : null));
  } else if (model) {
    note.textContent = `${model.name} (${fmtBytes(model.size)}) is a llama2.c checkpoint: now choose or drop its tokenizer.bin.`;
  } else if (tokenizer) {
    note.textContent = `${tokenizer.name} looks like a tokenizer: now choose or drop the llama2.c checkpoint that goes with it.`;
  }
}

// ---- the cache list ----

async function renderCacheList() {
  const list = $('cache-list');
  const note = $('cache-note');
  const clear = $('cache-clear');
  if (!app.sources.cache.available) {
    note.textContent = 'Cache Storage is not available on this page (it needs https or localhost): ' +
      'models are downloaded each time.';
    list.replaceChildren();
    clear.disabled = true;
    $('cache-summary').textContent = '(unavailable)';
    return;
  }
  let entries;
  try {
    entries = await app.sources.cache.list();
  } catch (err) {
    note.textContent = `Cannot read the cache: ${describeError(err)}`;
    return;
  }
  list.replaceChildren(...entries.map((e) => {
    const li = document.createElement('li');
    const name = document.createElement('span');
    name.className = 'cache-name';
    name.textContent = e.name;
    name.title = e.url;
    const size = document.createElement('span');
    size.className = 'cache-size';
    size.textContent = fmtBytes(e.size);
    const origin = document.createElement('span');
    origin.className = 'cache-origin hint';
    const where = new URL(e.url);
    origin.textContent = where.host + where.pathname;
    const remove = document.createElement('button');
    remove.type = 'button';
    remove.className = 'secondary small';
    remove.textContent = 'Remove';
    remove.setAttribute('aria-label', `Remove ${e.name} from the cache`);
    remove.dataset.url = e.url;
    li.append(name, size, origin, remove);
    return li;
  }));
  const total = entries.reduce((n, e) => n + e.size, 0);
  $('cache-summary').textContent = `(${entries.length} · ${fmtBytes(total)})`;
  clear.disabled = entries.length === 0;
  note.textContent = entries.length
    ? `These files load again without a download.${await quotaNumbers()}`
    : 'Nothing cached yet. Downloaded models are kept here and load again without a download.';
}

async function removeCached(url) {
  await app.sources.cache.delete(url);
  await renderCacheList();
  // The button that had focus is gone: keep keyboard users in the list.
  const next = $('cache-list').querySelector('button') ?? $('cache-clear');
  (next.disabled ? document.querySelector('#cache-panel summary') : next).focus();
}

// ------------------------------------------------------------------------------------------------
// The probability chart: the top candidates before and after the filters

/** A bar (a CSS width) with its value as text, for one chart cell. */
function barCell(p, kind) {
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
function drawChart(top, source, tokenIndex, tokenText) {
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
function clearChart(caption) {
  $('prob-rows').replaceChildren();
  $('prob-chart').dataset.source = 'none';
  $('chart-caption').textContent = caption;
}

/** The last generated token span (the one the chart describes), or null. */
function lastTokenSpan() {
  const tokens = $('output').getElementsByClassName('tok');
  return tokens.length ? tokens[tokens.length - 1] : null;
}

/** Redraws the chart with the sliders' values, ~50 ms after the last movement. */
function schedulePreview() {
  clearTimeout(app.previewTimer);
  app.previewTimer = setTimeout(previewNow, PREVIEW_DEBOUNCE_MS);
}

async function previewNow() {
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

// ------------------------------------------------------------------------------------------------
// Output: tokens, their colours and the token inspector

/** Describes a token span in the inspector line under the output. */
function showTokenDetail(span) {
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
function showAlternatives(span, index) {
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
function activateToken(span, focus) {
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
function onOutputKey(event) {
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

function tokenSpan(tok) {
  const span = document.createElement('span');
  span.className = `tok p${probBin(tok.prob)}`;
  span.dataset.prob = String(tok.prob);
  span.dataset.probSampled = String(tok.probSampled);
  span.dataset.id = String(tok.id);
  span.title = `p = ${fmtPercent(tok.prob)}`;
  span.append(document.createTextNode(tok.text));
  return span;
}

// ------------------------------------------------------------------------------------------------
// Generation

/** Generates from the prompt with the current controls, streaming tokens into #output. */
async function generate() {
  const engine = app.engine;
  if (!engine || !app.info || ['generating', 'loading'].includes(document.body.dataset.state)) return;
  if (syncStopError()) {
    $('stop-strings').focus();
    return;
  }
  clearError();
  revealOutput();

  const { params, seedRandom } = readParams();
  document.body.dataset.runs = String(Number(document.body.dataset.runs || 0) + 1);
  const width = beamWidth();
  if (width >= 2) {
    await beamSearch(engine, width, params.maxTokens);
    return;
  }
  showApplied(params, seedRandom);
  app.lastParams = params;
  const prompt = $('prompt').value;
  const nCtx = app.info.nCtx;

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
      nPast = tok.nPast;
      if (tok.id < 0) {
        // Text held back for a stop string that did not complete: not a token.
        const tail = document.createElement('span');
        tail.className = 'tail';
        tail.append(document.createTextNode(tok.text));
        output.append(tail);
        continue;
      }
      if (n === 0) {
        tFirst = performance.now();
        setStat('ttft', fmtMs(tFirst - t0));
      }
      n++;
      const span = tokenSpan(tok);
      output.append(span);
      if (tok.top) {
        app.tokenTops.set(span, tok.top);
        app.previewSeq++; // a preview still running describes the previous token
        drawChart(tok.top, 'generation', n, tok.text);
      }
      if (!app.activeToken && tok.text !== '') activateToken(span, false);
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

/**
 * The prefill speed, only when the prompt is long enough for it to mean something: a few tokens
 * take about as long as one decode step plus the call's fixed costs, so "tokens per second" of
 * a 5-token prompt says nothing about prefill.
 */
function showPrefill(nPrompt, ms, tokensPerSec) {
  const unit = `token${nPrompt === 1 ? '' : 's'}`;
  setStat('prefill', nPrompt >= MIN_PREFILL_TOKENS ? fmtRate(tokensPerSec)
    : `${nPrompt} ${unit}: too short to time`);
  $('stat-prefill').title = `${nPrompt} prompt ${unit} (BOS included) in ${fmtMs(ms)}; a speed is shown ` +
    `from ${MIN_PREFILL_TOKENS} tokens`;
}

/**
 * Brings the output into view when it starts low on the screen or above it (on a phone, under
 * the prompt): the Generate / Stop buttons go to the top, the output right under them.
 */
function revealOutput() {
  const box = $('output').getBoundingClientRect();
  if (box.top < 0 || box.top > 0.6 * window.innerHeight) {
    document.querySelector('#gen-form .buttons').scrollIntoView({ block: 'start' });
  }
}

/** Forgets the previous run's tokens: inspector, alternatives, chart. */
function resetOutputState() {
  app.activeToken = null;
  app.previewSeq++;
  clearTimeout(app.previewTimer);
  $('token-detail').textContent = 'Hover over a token, or tab into the text and use ← →, to see its probability.';
  $('token-alternatives').hidden = true;
  clearChart('Generate to see the top 10 candidates for each token.');
}

/** Runs a beam search of `width` beams and lists them in #output, best first. */
async function beamSearch(engine, width, maxTokens) {
  const prompt = $('prompt').value;
  const nCtx = app.info.nCtx;
  const output = $('output');
  output.replaceChildren();
  resetOutputState();
  app.lastParams = null; // a beam search leaves no distribution to preview
  clearChart('A beam search draws no samples: no candidates to show.');
  $('applied').textContent = `applied: beam search · width ${width} · max tokens ${maxTokens} · length penalty 1`;
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
    result = await engine.beamSearch(prompt, { width, maxTokens }, { signal: controller.signal });
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

function stop() {
  app.genController?.abort();
}

// ------------------------------------------------------------------------------------------------
// Wiring

function wireControls() {
  for (const s of SLIDERS) {
    $(s.id).addEventListener('input', () => {
      syncSliderOutputs();
      if (s.param !== 'maxTokens') schedulePreview();
    });
  }
  $('beam-width').addEventListener('input', syncSliderOutputs);
  $('sampler-order').addEventListener('change', schedulePreview);
  syncSliderOutputs();
  for (const button of document.querySelectorAll('button.preset')) {
    button.addEventListener('click', () => {
      applyPreset(button.dataset.preset);
      schedulePreview();
    });
  }
  $('stop-strings').addEventListener('input', syncStopError);

  $('gen-form').addEventListener('submit', (event) => {
    event.preventDefault();
    generate();
  });
  // Enter in the seed or stop-strings field generates, as in the prompt's form.
  $('sampling-form').addEventListener('submit', (event) => event.preventDefault());
  for (const id of ['seed', 'stop-strings']) {
    $(id).addEventListener('keydown', (event) => {
      if (event.key === 'Enter' && !event.ctrlKey && !event.metaKey && !event.isComposing) {
        event.preventDefault();
        generate();
      }
    });
  }
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

  // Models: the picker, a URL, local files.
  $('model').addEventListener('change', () => {
    const entry = selectedEntry();
    showEntryNote();
    if (entry) {
      const url = new URL(location.href);
      url.searchParams.set('model', entry.id);
      history.replaceState(null, '', url);
      loadModel(app.sources.planFromEntry(entry));
    }
  });
  $('url-form').addEventListener('submit', (event) => {
    event.preventDefault();
    const modelUrl = $('model-url').value.trim();
    const tokenizerUrl = $('tokenizer-url').value.trim();
    if (modelUrl) loadModel(app.sources.planFromUrls(modelUrl, tokenizerUrl || null));
  });
  const input = $('model-files');
  input.addEventListener('change', async () => {
    await takeLocalFiles(input.files);
    input.value = ''; // choosing the same file again is a change too
  });
  const zone = $('drop-zone');
  const hasFiles = (event) => event.dataTransfer?.types?.includes('Files');
  zone.addEventListener('dragenter', (event) => { if (hasFiles(event)) zone.classList.add('over'); });
  zone.addEventListener('dragleave', (event) => {
    if (!zone.contains(event.relatedTarget)) zone.classList.remove('over');
  });
  // Anywhere on the page, a dropped file must not replace the page; only the zone takes it.
  document.addEventListener('dragover', (event) => {
    if (!hasFiles(event)) return;
    event.preventDefault();
    event.dataTransfer.dropEffect = zone.contains(event.target) && !input.disabled ? 'copy' : 'none';
  });
  document.addEventListener('drop', (event) => {
    if (!hasFiles(event)) return;
    event.preventDefault();
    zone.classList.remove('over');
    if (zone.contains(event.target) && !input.disabled) takeLocalFiles(event.dataTransfer.files);
  });

  // The cache list.
  $('cache-panel').addEventListener('toggle', () => { if ($('cache-panel').open) renderCacheList(); });
  $('cache-list').addEventListener('click', (event) => {
    const button = event.target.closest('button[data-url]');
    if (button) removeCached(button.dataset.url);
  });
  $('cache-clear').addEventListener('click', async () => {
    await app.sources.cache.clear();
    await renderCacheList();
    document.querySelector('#cache-panel summary').focus();
  });

  // The token inspector.
  const output = $('output');
  output.addEventListener('mouseover', (event) => {
    const span = event.target.closest?.('.tok');
    if (span) showTokenDetail(span);
  });
  output.addEventListener('focusin', (event) => {
    const span = event.target.closest?.('.tok');
    if (span) {
      showTokenDetail(span);
      activateToken(span, false);
    }
  });
  output.addEventListener('click', (event) => {
    const span = event.target.closest?.('.tok');
    if (span) activateToken(span, true);
  });
  output.addEventListener('keydown', onOutputKey);
}

async function main() {
  wireControls();
  setState('loading');
  try {
    ({ createWorkerEngine: app.createWorkerEngine } = await import('../js/wasmlm.js'));
    app.sources = await import('./sources.js');
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
  renderCacheList();
  await loadModel(app.sources.planFromEntry(selectedEntry()));
}

main();
