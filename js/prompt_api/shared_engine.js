// prompt_api/shared_engine.js — the one engine every LanguageModel session runs on: configure()
// (which model, and how), the published models it knows by id, the engine made and loaded on the
// first create() (a worker engine in a page, in-process in Node), its download reported as
// progress, and the queue every engine operation waits in (one context: one at a time).

import { createEngine, createWorkerEngine } from '../wasmlm.js';
import { fetchModel } from '../models/cache.js';
import { KNOWN, checkOptions } from '../options.js';
import { domError, abortReason } from './errors.js';

/** The published models configure() knows by id: entries of models/manifest.json (same url,
 *  size and sha256; tests/js/prompt_api.test.mjs checks it). */
export const MODELS = Object.freeze({
  'qwen2.5-0.5b-instruct-q4_k_m': {
    url: 'https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct-GGUF/resolve/9217f5db79a29953eb74d5343926648285ec7e67/qwen2.5-0.5b-instruct-q4_k_m.gguf',
    size: 491400032, sha256: '74a4da8c9fdbcd15bd1f6d01d621410d31c6fc00986f5eb687824e7b93d7a9db' },
  'qwen2.5-0.5b-instruct-q8_0': {
    url: 'https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct-GGUF/resolve/9217f5db79a29953eb74d5343926648285ec7e67/qwen2.5-0.5b-instruct-q8_0.gguf',
    size: 675710816, sha256: 'ca59ca7f13d0e15a8cfa77bd17e65d24f6844b554a7b6c12e07a5f89ff76844e' },
  'smollm2-360m-instruct-q8_0': {
    url: 'https://huggingface.co/HuggingFaceTB/SmolLM2-360M-Instruct-GGUF/resolve/593b5a2e04c8f3e4ee880263f93e0bd2901ad47f/smollm2-360m-instruct-q8_0.gguf',
    size: 386404992, sha256: '48ab3034d0dd401fbc721eb1df3217902fee7dab9078992d66431f09b7750201' },
  'qwen3-0.6b-q8_0': {
    url: 'https://huggingface.co/Qwen/Qwen3-0.6B-GGUF/resolve/23749fefcc72300e3a2ad315e1317431b06b590a/Qwen3-0.6B-Q8_0.gguf',
    size: 639446688, sha256: '9465e63a22add5354d9bb4b99e90117043c7124007664907259bd16d043bb031' },
  'gemma-3-270m-it-q8_0': {
    url: 'https://huggingface.co/ggml-org/gemma-3-270m-it-GGUF/resolve/e7647be17ae1108f2f605ed061ca0608b171afff/gemma-3-270m-it-Q8_0.gguf',
    size: 291545600, sha256: '0ef57d2c838458a1952664260dcba38e5bdda37494f3af732f06e4add24068e3' },
});

/** The model when configure() names none: Qwen2.5 0.5B Instruct, Q4_K_M (491 MB; follows
 *  instructions, writes JSON, calls tools in its template's Hermes syntax). */
export const DEFAULT_MODEL = 'qwen2.5-0.5b-instruct-q4_k_m';

/** configure() options of ours; any other key is an EngineOptions key, checked by createEngine. */
const CONFIG_KEYS = ['model', 'engine', 'worker', 'load', 'params'];
/** configure({params}): generation settings applied to every prompt (ours, not the spec's). */
export const PARAM_KEYS = { maxTokens: 'max_tokens', seed: 'seed', topP: 'top_p', minP: 'min_p',
  repeatPenalty: 'repeat_penalty' };

export const IS_NODE = typeof process === 'object' && process?.versions?.node !== undefined && typeof window === 'undefined';

export let config = { model: DEFAULT_MODEL, engine: null, worker: !IS_NODE, load: {}, params: {}, engineOptions: {} };
/** {engine, owned, ready: Promise, progress: Set<(fraction) => void>, done} for the current config. */
export let runtime = null;
/** The tail of the queue every engine operation waits in (one context: one at a time). */
let tail = Promise.resolve();

/**
 * Sets the model every LanguageModel runs on (and how), replacing the current one: an engine
 * made here earlier is freed, sessions made before fail from then on. Call it before the first
 * create(); without it, the first create() loads DEFAULT_MODEL.
 * @param {object} [options] see ConfigureOptions in index.d.ts
 * @returns {Promise<void>} once the previous engine (if any, and ours) is freed
 * @throws {TypeError} for an option of the wrong type or an unknown name of ours
 */
export async function configure(options = {}) {
  if (options === null || typeof options !== 'object') throw new TypeError('configure(): an options object is required');
  const typeError = { error: (m) => new TypeError(m) };
  checkOptions('configure()', options, KNOWN.ConfigureOptions, typeError);
  const { model, engine, worker, load = {}, params = {}, ...engineOptions } = options;
  if (engine !== undefined && engine !== null && (typeof engine !== 'object' || typeof engine.generate !== 'function')) {
    throw new TypeError('configure(): engine must be a wasmlm Engine (createEngine / createWorkerEngine)');
  }
  if (engine && Object.keys(engineOptions).length) {
    throw new TypeError(`configure(): engine options (${Object.keys(engineOptions).join(', ')}) cannot apply to a given engine`);
  }
  if (worker !== undefined && typeof worker !== 'boolean') throw new TypeError('configure(): worker must be a boolean');
  if (load === null || typeof load !== 'object') throw new TypeError('configure(): load must be an object of LoadOptions (nCtx, kvType, …)');
  for (const k of ['model', 'tokenizer', 'onProgress', 'signal']) {
    if (k in load) throw new TypeError(`configure(): load.${k} is not allowed (the model is configure()'s own option)`);
  }
  checkOptions('configure(): load', load, KNOWN.LoadOptions, typeError);
  if (params === null || typeof params !== 'object') throw new TypeError('configure(): params must be an object');
  checkOptions('configure(): params', params, Object.keys(PARAM_KEYS), typeError);
  if (model !== undefined && !isModelSource(model)) {
    throw new TypeError('configure(): model must be a manifest id, a URL, a path (Node), a Blob or bytes');
  }
  const previous = runtime;
  runtime = null;
  config = {
    model: model ?? (engine ? null : DEFAULT_MODEL), engine: engine ?? null, worker: worker ?? !IS_NODE,
    load: { ...load }, params: { ...params }, engineOptions,
  };
  if (previous) {
    previous.stale = true;
    if (previous.owned) {
      const e = await previous.ready.catch(() => null);
      await e?.free();
    }
  }
}

/** Whether images can be given: the loaded model has an mmproj, or (none loaded yet) configure()
 *  gave one in load. */
export function visionConfigured() {
  const info = runtime?.done ? runtime.engine?.info : config.engine?.info;
  if (info) return Boolean(info.vision);
  return config.load?.mmproj != null;
}

function isModelSource(m) {
  return typeof m === 'string' || m instanceof URL || (typeof Blob !== 'undefined' && m instanceof Blob) ||
    m instanceof ArrayBuffer || ArrayBuffer.isView(m) || Array.isArray(m);
}

/** An http(s) URL the model cache can hold, or null. */
export function cacheableUrl(model) {
  if (typeof model === 'string' && MODELS[model]) return MODELS[model].url;
  const s = model instanceof URL ? model.href : typeof model === 'string' ? model : null;
  if (s === null) return null;
  if (/^https?:/i.test(s)) return s;
  if (!IS_NODE && typeof document !== 'undefined' && !/^[a-z][a-z0-9+.-]*:/i.test(s)) return new URL(s, document.baseURI).href;
  return null;
}

/** The shared engine, loading it on first use; `onProgress(fraction)` follows the download. */
export function getRuntime(onProgress) {
  if (!runtime) {
    const cfg = config; // as configured now, whatever a configure() during the load sets
    const rt = { engine: null, owned: !cfg.engine, progress: new Set(), done: false, stale: false, downloading: false };
    const report = (f) => { for (const fn of rt.progress) fn(f); };
    rt.ready = (async () => {
      const engine = cfg.engine ?? await (cfg.worker ? createWorkerEngine(cfg.engineOptions) : createEngine(cfg.engineOptions));
      try {
        if (cfg.model !== null) await loadModel(engine, cfg.model, cfg.load, report, rt);
        if (!engine.info) throw domError('OperationError', 'configure(): the given engine has no model loaded and no model was named');
      } catch (e) {
        if (!cfg.engine) await engine.free().catch(() => {});
        throw e;
      }
      rt.engine = engine;
      rt.done = true;
      return engine;
    })();
    rt.ready.catch(() => { if (runtime === rt) runtime = null; }); // a failed load may be retried
    runtime = rt;
  }
  const rt = runtime;
  if (onProgress) {
    rt.progress.add(onProgress);
    rt.ready.finally(() => rt.progress.delete(onProgress)).catch(() => {});
  }
  return rt;
}

async function loadModel(engine, model, load, report, rt) {
  const url = cacheableUrl(model);
  const entry = typeof model === 'string' ? MODELS[model] : undefined;
  if (url && !IS_NODE) { // a page: the model cache's copy, or a download kept in it
    rt.downloading = true;
    const got = await fetchModel(url, { sha256: entry?.sha256 ?? null, size: entry?.size ?? null,
      onProgress: ({ loaded, total }) => report(total > 0 ? loaded / total : 0) });
    rt.downloading = false;
    await engine.load({ ...load, model: got.blob });
    await got.save().catch(() => {});
    return;
  }
  const source = entry ? entry.url : model;
  await engine.load({ ...load, model: source, onProgress: ({ stage, loaded, total }) => {
    if (stage === 'model' && total > 0) report(loaded / total);
  } });
}

/** Runs `fn` when the operations queued before it are done. A signal aborted while it waits
 *  rejects at once and `fn` never runs. */
export function enqueue(signal, fn) {
  if (signal?.aborted) return Promise.reject(abortReason(signal));
  let onAbort = null;
  const aborted = new Promise((_, reject) => {
    onAbort = () => reject(abortReason(signal));
    signal?.addEventListener('abort', onAbort, { once: true });
  });
  const run = tail.then(() => (signal?.aborted ? undefined : fn()));
  tail = run.catch(() => {});
  const result = signal ? Promise.race([run, aborted]) : run;
  aborted.catch(() => {});
  return result.finally(() => signal?.removeEventListener('abort', onAbort));
}
