// web/demo/models.js — the model picker and loading: the manifest's published models, a URL or
// local files, the download progress bar, and the load into a worker engine (the previous model
// stays loaded until the new one is ready).

import { fmtBytes, fmtMs, fmtBytesPerSec, describeError } from './format.js';
import { $, app, setState, setStatus, showError, clearError } from './state.js';
import { renderCacheList } from './cache-list.js';
import { setStat } from './stats.js';
import { syncMode } from './chat.js';

// Relative to the page (web/), not to this module: the page runs it from its bundle in dist/.
export const MANIFEST_URL = new URL('../models/manifest.json', document.baseURI);

/** How long after a model is ready its downloaded files are stored in Cache Storage (ms). */
export const SAVE_DELAY_MS = 1000;

/**
 * Why a load failed, in words a reader can act on, and a short kind for tests and styling.
 * @returns {{kind: string, text: string}}
 */
export function explainLoadError(err) {
  switch (err?.code) {
    case 'WLM_ERR_IO':
      if (err.httpStatus === 404) {
        return { kind: 'http-404', text: `not found (HTTP 404): ${err.url}. Check the address.` };
      }
      if (err.httpStatus) {
        return { kind: 'http', text: `the server answered HTTP ${err.httpStatus} for ${err.url}.` };
      }
      if (err.partial) {
        return { kind: 'partial', text: `${err.message}. Nothing was loaded or cached.` };
      }
      return {
        kind: 'network',
        text: `cannot download ${err.url ?? 'the file'}: the network failed, or the server does not let ` +
          'this page read it (CORS: a server hosting models for other sites must send ' +
          'Access-Control-Allow-Origin).',
      };
    case 'WLM_ERR_CHECKSUM':
      // js/models/cache.js says which: a transfer cut short, a file of another size, other bytes
      if (err.mismatch === 'partial') {
        return {
          kind: 'partial',
          text: `incomplete download: ${err.actual} of ${err.expected} bytes arrived (the connection broke ` +
            'off). Try again; nothing was loaded or cached.',
        };
      }
      return {
        kind: 'checksum',
        text: typeof err.expected === 'string'
          ? `checksum mismatch: expected sha256 ${err.expected}, got ${err.actual}. The file at ${err.url} ` +
            'is not the published one (replaced at the source, or damaged on the way); it was neither loaded nor cached.'
          : `size mismatch: the file at ${err.url} is ${err.actual} bytes, the published one ${err.expected}: ` +
            'it changed at the source (or the address points elsewhere). It was neither loaded nor cached.',
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

/** Fetches the manifest: its list of models. */
export async function fetchManifest() {
  // The same request as index.html's inline script makes.
  const res = await fetch(MANIFEST_URL, { cache: 'no-cache' });
  if (!res.ok) throw new Error(`cannot read ${MANIFEST_URL.pathname}: HTTP ${res.status}`);
  const { models } = await res.json();
  return models;
}

/**
 * Fills the model <select> from the manifest's models (a promise from fetchManifest(), fetched
 * now when not given); picks ?model=ID or stories260K.
 */
export async function loadManifest(manifest = fetchManifest()) {
  const models = await manifest;
  if (!Array.isArray(models) || models.length === 0) throw new Error('the model manifest is empty');
  app.entries = models;

  const select = $('model');
  select.replaceChildren(...models.map((m) => {
    const plan = app.sources.planFromEntry(m);
    const option = new Option(`${m.id} · ${entrySize(m)}${plan.verified ? '' : ' · unverified'}${memoryMark(plan)}`, m.id);
    option.title = m.name;
    if (plan.memory64) option.dataset.memory64 = plan.refused ? 'refused' : 'yes';
    return option;
  }));
  select.value = app.sources.defaultEntry(models).id;
  showEntryNote();
}

/** An entry's size for the picker: the pinned size, else the publisher's listed one ("about"). */
function entrySize(m) {
  if (m.size && (!m.mmproj || m.mmproj.size)) return fmtBytes(m.size + (m.tokenizer?.size ?? 0) + (m.mmproj?.size ?? 0));
  const listed = (m.size ?? m.listedSize) && (m.size ?? m.listedSize) + (m.mmproj ? m.mmproj.size ?? m.mmproj.listedSize ?? NaN : 0);
  return listed ? `about ${fmtBytes(listed)}` : 'size unknown';
}

/** The picker's mark for a model past wasm32's 4 GB (web/sources.js memoryPlan()). */
function memoryMark(plan) {
  if (!plan.memory64) return '';
  return plan.refused ? ' · needs 64-bit memory (not in this browser)' : ' · needs 64-bit memory';
}

export function selectedEntry() {
  return app.entries.find((m) => m.id === $('model').value);
}

/**
 * Describes the selected manifest entry under the picker: format, size, checksum; or, when the
 * picker shows a model loaded from a URL or local files, that model.
 */
export function showEntryNote() {
  const entry = selectedEntry();
  if (!entry) {
    const loaded = app.loaded;
    if (!loaded || loaded.entryId || $('model').value !== '') return;
    const where = loaded.local ? 'Local file' : `Loaded from ${loaded.url}`;
    const check = loaded.local ? 'read from this device'
      : 'unverified: no sha256 to check it against, so it was loaded unchecked';
    $('model-note').textContent = `${loaded.label}. ${where} · ${loaded.format} · ${fmtBytes(loaded.bytes)} · ${check}.`;
    $('model-note').dataset.verified = String(Boolean(loaded.local));
    return;
  }
  const plan = app.sources.planFromEntry(entry);
  const format = entry.format !== 'gguf' ? 'llama2.c checkpoint + tokenizer'
    : entry.mmproj ? 'GGUF + vision projector (mmproj): takes images in chat' : 'GGUF';
  const check = plan.verified ? 'sha256 checked on download'
    : 'unverified: the manifest has no sha256 for it, so it is loaded unchecked';
  const memory = !plan.memory64 ? ''
    : plan.refused ? ` Needs 64-bit memory (WebAssembly memory64), which this browser does not have: it cannot be loaded here.`
      : ' Needs 64-bit memory: it loads on the memory64 modules (more than 4 GB of wasm memory).';
  $('model-note').textContent = `${entry.name}. ${format} · ${entrySize(entry)} · ${check}.${memory}`;
  $('model-note').dataset.verified = String(plan.verified);
  if (plan.memory64) $('model-note').dataset.memory64 = plan.refused ? 'refused' : 'yes';
  else delete $('model-note').dataset.memory64;
}

/** The shortest time between two redraws of the load's progress (ms). */
const PROGRESS_INTERVAL_MS = 200;

/**
 * Aggregates the progress of a load's downloads (one per part) into the bar and the line under
 * it (bytes, total, rate), redrawn at most every PROGRESS_INTERVAL_MS. The status line, a live
 * region, only changes when the phase or the source does, so a screen reader is not flooded
 * with numbers.
 */
export function progressView(label, parts) {
  const bar = $('load-progress');
  const detail = $('load-detail');
  const state = new Map(parts.map((p) => [p.stage, { loaded: 0, total: p.size || 0, from: '' }]));
  let frame = 0;
  const t0 = performance.now();
  let phase = 'download';
  let headline = '';
  let timer = 0;
  let lastDraw = -Infinity;
  const draw = () => {
    frame = 0;
    lastDraw = performance.now();
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
  // At most one redraw per PROGRESS_INTERVAL_MS: each one is a frame (style, layout, paint,
  // raster, compositing in the browser and GPU processes: ~10 ms of CPU in all on a small
  // machine), and at 60 per second they took CPU from the load itself (docs/how-it-works.md, ttft4).
  const schedule = () => {
    if (frame || timer) return;
    const wait = lastDraw + PROGRESS_INTERVAL_MS - performance.now();
    if (wait <= 0) frame = requestAnimationFrame(draw);
    else timer = setTimeout(() => { timer = 0; frame = requestAnimationFrame(draw); }, wait);
  };
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
        for (const [k, s] of state) {
          if (/^model \d/.test(k)) state.delete(k); // a split model's parts: read as one 'model'
          else s.loaded = 0;
        }
      }
      const s = state.get(stage);
      if (s) { s.loaded = loaded; if (total) s.total = total; }
      schedule();
    },
    /** Stops drawing and clears the numbers (the status line then says how the load ended). */
    stop() {
      if (frame) cancelAnimationFrame(frame);
      clearTimeout(timer);
      frame = 0;
      timer = 0;
      detail.textContent = '';
    },
  };
}

/**
 * Shows the loaded model in the picker: its manifest entry, or (a URL or local files) an extra
 * option naming it, so the picker never names a model that is not the one loaded.
 */
export function syncPicker() {
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
/** The backend that runs the model (ModelInfo.backend), the adapter, why, and the GPU memory. */
function showBackend(info) {
  const gpu = info.backend === 'webgpu';
  setStat('backend', gpu ? `GPU · ${info.gpuAdapter}` : 'CPU');
  setStat('gpu', gpu ? fmtBytes(info.gpuBytes) : '—');
  $('backend-note').textContent = info.backendReason ?? '';
  document.body.dataset.backend = info.backend ?? 'cpu';
}

export async function loadModel(plan, { engine: started = null } = {}) {
  if (plan.refused) {
    // A model this browser cannot run (no memory64): refused with the reason before any
    // download; the model loaded before, if any, stays loaded.
    started?.then((e) => e.free(), () => {}).catch(() => {});
    ++app.loadSeq;
    app.loadController?.abort();
    syncPicker();
    const kept = app.loaded ? ` ${app.loaded.label} is still loaded: Generate uses it.` : '';
    showError(`Could not load ${plan.label}: ${plan.refused}${kept}`, 'memory64');
    return;
  }
  app.lastPlan = plan; // the backend picker loads it again
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

  // The worker starts while the files download (or was started earlier: `started`, a promise of
  // a fresh engine). Unless this load adopts it, it is freed.
  const enginePromise = started ?? app.createWorkerEngine();
  enginePromise.catch(() => {}); // awaited below; a failed download must not leave it unhandled
  let adopted = false;
  let fetched = [];
  try {
    fetched = await Promise.all(plan.parts.map((part) => app.sources.fetchPart(part, {
      signal: controller.signal,
      onProgress: (p) => { if (seq === app.loadSeq) view.download(part.stage, p); },
    }).catch((err) => { controller.abort(); throw err; })));
    const engine = await enginePromise;
    if (seq !== app.loadSeq) return;

    const tokenizer = fetched[plan.parts.findIndex((p) => p.stage === 'tokenizer')];
    const mmproj = fetched[plan.parts.findIndex((p) => p.stage === 'mmproj')];
    const info = await engine.load({
      model: app.sources.modelData(plan, fetched), // (a split GGUF: its parts' list)
      tokenizer: tokenizer?.data,
      ...(mmproj ? { mmproj: mmproj.data } : {}), // a vision model's projector (chat takes images)
      backend: $('backend').value,
      ...(plan.nCtx ? { nCtx: plan.nCtx } : {}), // the manifest's context for a model whose full one does not fit
      signal: controller.signal,
      onProgress: (p) => { if (seq === app.loadSeq) view.engine(p); },
    });
    if (seq !== app.loadSeq) return;
    view.stop();

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
    showBackend(info);
    // helper threads need a cross-origin isolated page (COOP + COEP headers, as `npm start` sends)
    setStat('threads', info.threads > 1 || self.crossOriginIsolated ? String(info.threads)
      : '1 (the page is not cross-origin isolated)');
    const bytes = fetched.reduce((n, f) => n + f.size, 0);
    const from = [...new Set(fetched.map((f) => f.from))].join(' and ');
    let text = `${plan.label} ready · ${fmtBytes(bytes)} from ${from} in ${fmtMs(ms)}`;
    // Only files the engine accepted are kept; the model is ready before they are stored
    // (data-cache 'saving' until then), and the status line then says whether they were.
    const toSave = fetched.filter((f) => f.save);
    let cacheState;
    if (plan.local) cacheState = 'local';
    else if (fetched.every((f) => f.fromCache)) {
      cacheState = 'hit';
      text += ' (no download)';
    } else cacheState = 'saving';
    if (!plan.verified) text += ' · unverified (no checksum)';
    status.dataset.cache = cacheState;
    setStatus(text);
    app.loaded = { label: plan.label, entryId: plan.entryId ?? null, local: Boolean(plan.local), status: text,
      loadTime: fmtMs(ms), bytes, url: plan.parts[0]?.candidates?.[0] ?? '',
      format: info.architecture ? 'GGUF' : 'llama2.c checkpoint + tokenizer' };
    syncPicker();
    $('model-info').textContent = [
      `dim ${info.dim}`, `${info.nLayers} layers`,
      `${info.nHeads} heads${info.nKvHeads !== info.nHeads ? ` (${info.nKvHeads} KV)` : ''}`,
      `vocab ${info.vocabSize}`, `context ${info.nCtx}`,
      { relaxed: 'relaxed SIMD', simd128: 'SIMD128', scalar: 'scalar' }[info.build] ?? info.build,
      `${info.threads} thread${info.threads > 1 ? 's' : ''}`,
      ...(info.vision ? [`vision: ${info.vision.projector} projector`] : []),
    ].join(' · ');
    setStat('context', `0 / ${info.nCtx}`);
    syncMode();
    setState('ready');
    if (cacheState === 'saving') {
      // Writing to Cache Storage competes with a first generation started at once: it waits a
      // moment (SAVE_DELAY_MS).
      await new Promise((resolve) => setTimeout(resolve, SAVE_DELAY_MS));
      const saved = await Promise.all(toSave.map((f) => f.save()));
      if (seq === app.loadSeq) showSaved(saved);
    }
    renderCacheList();
  } catch (err) {
    view.stop();
    if (seq !== app.loadSeq) return;
    if (err?.name === 'AbortError') return;
    // Files the model store kept while they downloaded, which the engine then refused: not kept.
    if (err?.code === 'WLM_ERR_FORMAT' || err?.code === 'WLM_ERR_TRUNCATED') for (const f of fetched) f.discard?.().catch(() => {});
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

/**
 * Says in the status line whether the files of the load just finished were stored in Cache
 * Storage (results of fetchPart()'s save()), and sets #load-status[data-cache].
 */
function showSaved(saved) {
  const failed = saved.find((r) => !r.stored);
  let note;
  if (failed?.reason === 'quota') {
    note = ' · not cached: this site\'s storage quota is full, so it will be downloaded again next time';
  } else if (failed?.reason === 'unavailable') {
    note = ' · not cached: Cache Storage needs https or localhost';
  } else if (failed) {
    note = ` · not cached: ${describeError(failed.error)}`;
  } else {
    note = ' · cached for next time';
  }
  const loaded = app.loaded;
  // The unverified note stays last.
  const unverified = ' · unverified (no checksum)';
  const base = loaded.status.endsWith(unverified) ? loaded.status.slice(0, -unverified.length) : loaded.status;
  loaded.status = base + note + (base === loaded.status ? '' : unverified);
  const status = $('load-status');
  status.dataset.cache = failed ? failed.reason : 'stored';
  if (status.dataset.error === undefined) setStatus(loaded.status);
}

/**
 * Takes files from the picker or a drop: a GGUF (or an unrecognised file, for the engine to
 * judge) loads at once; a llama2.c checkpoint waits for its tokenizer and the other way round;
 * a vision projector (an mmproj GGUF, general.architecture "clip") loads with the text GGUF
 * chosen with it, or waits for it.
 */
export async function takeLocalFiles(fileList) {
  const files = [...fileList];
  if (files.length === 0) return;
  const pending = app.localPending;
  const kinds = new Map();
  for (const file of files) kinds.set(file, await app.sources.classifyFile(file));
  // a vision model's projector (an mmproj GGUF): it waits for its text GGUF, or goes with the one
  // dropped beside it
  const mmprojs = files.filter((f) => kinds.get(f) === 'mmproj');
  if (mmprojs.length > 1) {
    $('local-pending').textContent = `${mmprojs.map((f) => f.name).join(' and ')} are all vision projectors (mmproj): ` +
      'choose one, with its text model.';
    return;
  }
  if (mmprojs.length) pending.mmproj = mmprojs[0];
  // several GGUF files dropped together: the parts of a split model (js/models/split.js orders them)
  const ggufs = files.filter((f) => kinds.get(f) === 'gguf');
  if (ggufs.length > 1) {
    ggufs.sort((a, b) => a.name.localeCompare(b.name)); // (for the label: the engine orders them itself)
    const mmproj = pending.mmproj ?? null;
    app.localPending = { model: null, tokenizer: null, kind: null, mmproj: null };
    $('local-pending').textContent = '';
    await loadModel(app.sources.planFromFiles(ggufs, null, mmproj));
    return;
  }
  for (const file of files) {
    const kind = kinds.get(file);
    if (kind === 'mmproj') continue;
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
  const { model, tokenizer, kind, mmproj = null } = pending;
  if (model && (kind !== 'checkpoint' || tokenizer)) {
    app.localPending = { model: null, tokenizer: null, kind: null, mmproj: null };
    note.textContent = '';
    await loadModel(app.sources.planFromFiles(model, kind === 'checkpoint' ? tokenizer : null, kind === 'gguf' ? mmproj : null));
  } else if (mmproj && !model) {
    note.textContent = `${mmproj.name} (${fmtBytes(mmproj.size)}) is a vision projector (mmproj): now choose or drop ` +
      'the text GGUF it goes with (or both together).';
  } else if (model) {
    note.textContent = `${model.name} (${fmtBytes(model.size)}) is a llama2.c checkpoint: now choose or drop its tokenizer.bin.`;
  } else if (tokenizer) {
    note.textContent = `${tokenizer.name} looks like a tokenizer: now choose or drop the llama2.c checkpoint that goes with it.`;
  }
}
