// prompt_api/index.js — the Prompt API (W3C Web Machine Learning CG, webmachinelearning/prompt-api:
// the spec index.bs and the explainer README.md, as of commit 2e27365, June 2026) on a wasmlm
// engine: `LanguageModel` for pages written for Chrome's built-in model, in every browser and in
// Node, on any GGUF chat model. `configure()` says which model (once, before the first create());
// `wasmlm/prompt-api/install` puts LanguageModel on globalThis where the browser has none.
//
// How the spec's steps map onto the engine:
//  - One engine for every session, made on the first create() (a worker engine in a page, so the
//    page stays responsive; in-process in Node), or the one configure() was given. Its download
//    is the model cache's (js/models/cache.js: Cache Storage in a page, the sha256 checked), reported as
//    the spec's downloadprogress events (0 first, 1 last, fractions between).
//  - A session is its conversation, OpenAI-style messages. Each prompt renders the whole
//    conversation with the model's chat template (chatCompletionPrompt, js/chat/chat_completion.js) and
//    generates with cachePrompt, so the KV cache of the previous turn — or of the session it was
//    cloned from — is reused for the common prefix and only the new tokens are prefilled.
//    append() validates, measures and stores the messages; their prefill happens with the next
//    prompt (the spec leaves when to the implementation).
//  - Operations run one at a time, in call order, over all sessions (one engine, one context). A
//    queued operation whose signal aborts leaves the queue at once.
//  - contextUsage: the tokens of the conversation as rendered (special tokens included);
//    contextWindow: the context length (ModelInfo.nCtx). A prompt that does not fit evicts the
//    oldest prompt/response pairs after the initial prompts ("contextoverflow" and the deprecated
//    "quotaoverflow" fire), or else fails with a QuotaExceededError and evicts nothing.
//  - tools: given to the template as OpenAI tools (engine.chatCompletion: the template's tool-call
//    syntax, calls held to each tool's inputSchema by a grammar); the calls of a turn run
//    concurrently (Promise.all), their results go back as tool messages, and the model goes on
//    until it answers without a call (at most MAX_TOOL_ROUNDS rounds, then without tools).
//  - responseConstraint: a JSON Schema (GenerateParams.jsonSchema, the C converter: a keyword it
//    does not support is a NotSupportedError) or a RegExp (./regexp.js, a GBNF grammar). Unless
//    omitResponseConstraintInput, the constraint is also described in the prompt's last user
//    message. The response is checked: one cut short (the context ran out) is a SyntaxError.
//  - Errors are the spec's: TypeError / RangeError for bad arguments, DOMException names
//    SyntaxError, NotSupportedError, InvalidStateError, AbortError, QuotaExceededError,
//    NetworkError (download), OperationError (load), UnknownError (the rest; `cause` holds ours).
//  - Images (expectedInputs [{type: 'image'}]) need a vision model: configure({ load: { mmproj } }).
//    An image value (Blob, ImageBitmap, ImageData, a canvas / <img> / <video> / VideoFrame, an
//    ArrayBuffer or a view of one) is snapshotted when the call is made (bytes copied; a canvas-like
//    source drawn and read back as pixels), goes to the template as an image part (the media
//    marker, js/vision/vision.js) and to generate() as an image; contextUsage counts its positions
//    (Engine.imageTokens: rows and wrapper tokens). An image that does not decode is a DataError.
// Not supported: audio inputs (availability() says "unavailable"; create() rejects with
// NotSupportedError), output types other than text and tool calls.

import { createEngine, createWorkerEngine } from '../wasmlm.js';
import { chatCompletionPrompt } from '../chat/chat_completion.js';
import { ModelCache, fetchModel } from '../models/cache.js';
import { regExpToGrammar } from './regexp.js';
import { KNOWN, checkOptions } from '../options.js';
import { MEDIA_MARKER, extractImages } from '../vision/vision.js';

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

/** Tool-call rounds of one prompt before the model must answer without tools. */
const MAX_TOOL_ROUNDS = 8;

/** LanguageModelParams: the sampler's defaults and limits (Chrome reports the same numbers). */
const PARAMS = Object.freeze({ defaultTopK: 3, maxTopK: 128, defaultTemperature: 1, maxTemperature: 2 });

/** samplingMode presets as temperature and top-k (ours: the spec leaves them to the UA). */
const SAMPLING_MODES = Object.freeze({
  'most-predictable': { temperature: 0, topK: 1 },
  predictable: { temperature: 0.4, topK: 3 },
  balanced: { temperature: 1, topK: 3 },
  creative: { temperature: 1.2, topK: 40 },
  'most-creative': { temperature: 1.5, topK: 128 },
});

const ROLES = ['system', 'user', 'assistant'];
const TYPES = ['text', 'image', 'audio', 'tool-call', 'tool-response'];
/** configure() options of ours; any other key is an EngineOptions key, checked by createEngine. */
const CONFIG_KEYS = ['model', 'engine', 'worker', 'load', 'params'];
/** configure({params}): generation settings applied to every prompt (ours, not the spec's). */
const PARAM_KEYS = { maxTokens: 'max_tokens', seed: 'seed', topP: 'top_p', minP: 'min_p',
  repeatPenalty: 'repeat_penalty' };

const IS_NODE = typeof process === 'object' && process?.versions?.node !== undefined && typeof window === 'undefined';

// ---- errors ------------------------------------------------------------------------------

function domError(name, message, cause) {
  const e = new DOMException(message, name);
  if (cause !== undefined) Object.defineProperty(e, 'cause', { value: cause, configurable: true, writable: true });
  return e;
}

/** A QuotaExceededError (the platform's class where it has one: whatwg/webidl#1465). */
function quotaError(requested, quota) {
  const message = `the input needs ${requested} tokens of context, ${quota} are available`;
  if (typeof globalThis.QuotaExceededError === 'function') {
    try {
      return new globalThis.QuotaExceededError(message, { requested, quota });
    } catch { /* an older shape of the class: fall through */ }
  }
  const e = domError('QuotaExceededError', message);
  Object.defineProperties(e, { requested: { value: requested, enumerable: true }, quota: { value: quota, enumerable: true } });
  return e;
}

/** Our errors as the spec's. `phase` 'create' maps load failures to NetworkError /
 *  OperationError; otherwise UnknownError is the fallback. */
function specError(e, phase = 'prompt') {
  if (e instanceof DOMException || e instanceof TypeError || e instanceof RangeError) return e;
  if (e?.name !== 'WasmlmError') return e; // the page's own (a tool's execute() threw it)
  if (e?.name === 'AbortError' || e?.name === 'QuotaExceededError') return e;
  const code = e?.code;
  const msg = e?.message ?? String(e);
  if (code === 'WLM_ERR_CONTEXT_FULL') return domError('QuotaExceededError', msg, e);
  if (code === 'WLM_ERR_UNSUPPORTED') return domError('NotSupportedError', msg, e);
  if (phase === 'create' && (code === 'WLM_ERR_IO' || code === 'WLM_ERR_CHECKSUM')) return domError('NetworkError', msg, e);
  return domError(phase === 'create' ? 'OperationError' : 'UnknownError', msg, e);
}

function abortReason(signal) {
  return signal.reason ?? domError('AbortError', 'The operation was aborted.');
}

/** AbortSignal.any, or the same made by hand where a browser lacks it. */
function anySignal(signals) {
  const list = signals.filter(Boolean);
  if (typeof AbortSignal.any === 'function') return AbortSignal.any(list);
  const ctl = new AbortController();
  for (const s of list) {
    if (s.aborted) {
      ctl.abort(s.reason);
      break;
    }
    s.addEventListener('abort', () => ctl.abort(s.reason), { once: true });
  }
  return ctl.signal;
}

// ---- the engine, shared by every session --------------------------------------------------

let config = { model: DEFAULT_MODEL, engine: null, worker: !IS_NODE, load: {}, params: {}, engineOptions: {} };
/** {engine, owned, ready: Promise, progress: Set<(fraction) => void>, done} for the current config. */
let runtime = null;
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
function visionConfigured() {
  const info = runtime?.done ? runtime.engine?.info : config.engine?.info;
  if (info) return Boolean(info.vision);
  return config.load?.mmproj != null;
}

function isModelSource(m) {
  return typeof m === 'string' || m instanceof URL || (typeof Blob !== 'undefined' && m instanceof Blob) ||
    m instanceof ArrayBuffer || ArrayBuffer.isView(m) || Array.isArray(m);
}

/** An http(s) URL the model cache can hold, or null. */
function cacheableUrl(model) {
  if (typeof model === 'string' && MODELS[model]) return MODELS[model].url;
  const s = model instanceof URL ? model.href : typeof model === 'string' ? model : null;
  if (s === null) return null;
  if (/^https?:/i.test(s)) return s;
  if (!IS_NODE && typeof document !== 'undefined' && !/^[a-z][a-z0-9+.-]*:/i.test(s)) return new URL(s, document.baseURI).href;
  return null;
}

/** The shared engine, loading it on first use; `onProgress(fraction)` follows the download. */
function getRuntime(onProgress) {
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
function enqueue(signal, fn) {
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

// ---- options and prompts, checked as the spec's IDL and algorithms do ---------------------
// The spec's options (create(), prompt(), append(), clone(), availability(), params()) are WebIDL
// dictionaries, and WebIDL's dictionary conversion reads only the members it declares: an
// unknown member is ignored, never an error (WebIDL, "JavaScript type to dictionary"), and
// Chrome's LanguageModel does so. So these are NOT refused here (unlike every options object of
// ours: configure() and its params go through js/options.js): a page written for Chrome's API
// behaves the same on this one.

function dictionary(value, what) {
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' && typeof value !== 'function') throw new TypeError(`${what}: an options object is required`);
  return value;
}

function signalOption(options, what) {
  const s = options.signal;
  if (s !== undefined && !(s instanceof AbortSignal)) throw new TypeError(`${what}: signal must be an AbortSignal`);
  return s;
}

/** LanguageModelExpected[] checked, language tags canonicalized (RangeError when invalid). */
function expectedList(list, what) {
  if (list === undefined) return undefined;
  if (list === null || typeof list[Symbol.iterator] !== 'function' || typeof list === 'string') throw new TypeError(`${what}: a sequence is required`);
  return Array.from(list, (e, i) => {
    if (e === null || typeof e !== 'object') throw new TypeError(`${what}[${i}]: a LanguageModelExpected object is required`);
    if (!TYPES.includes(e.type)) throw new TypeError(`${what}[${i}].type: ${JSON.stringify(e.type)} is not a LanguageModelMessageType`);
    const out = { type: e.type };
    if (e.languages !== undefined) {
      if (e.languages === null || typeof e.languages[Symbol.iterator] !== 'function' || typeof e.languages === 'string') {
        throw new TypeError(`${what}[${i}].languages: a sequence of language tags is required`);
      }
      out.languages = Intl.getCanonicalLocales(Array.from(e.languages, String));
    }
    return out;
  });
}

function toolList(tools) {
  if (tools === undefined) return [];
  if (tools === null || typeof tools[Symbol.iterator] !== 'function') throw new TypeError('tools: a sequence of LanguageModelTool is required');
  const seen = new Set();
  return Array.from(tools, (t, i) => {
    if (t === null || typeof t !== 'object') throw new TypeError(`tools[${i}]: a LanguageModelTool object is required`);
    for (const k of ['name', 'description']) {
      if (t[k] === undefined) throw new TypeError(`tools[${i}].${k} is required`);
    }
    if (t.inputSchema === null || typeof t.inputSchema !== 'object') throw new TypeError(`tools[${i}].inputSchema: an object (JSON Schema) is required`);
    if (typeof t.execute !== 'function') throw new TypeError(`tools[${i}].execute: a function is required`);
    const name = String(t.name);
    if (seen.has(name)) throw new TypeError(`tools[${i}].name: ${JSON.stringify(name)} is given twice`);
    seen.add(name);
    return { name, description: String(t.description), inputSchema: t.inputSchema, execute: t.execute };
  });
}

/** The content types a session accepts (the spec's "get the expected content types"). */
function expectedTypes(expectedInputs) {
  const types = new Set((expectedInputs ?? []).map((e) => e.type));
  types.add('text');
  return types;
}

/**
 * The spec's "validate and canonicalize a prompt": messages in longhand, text parts joined.
 * Returns [{role, content: [{type, value}], prefix}].
 */
function canonicalize(input, types, hasAppendedInput) {
  if (input === null || typeof input !== 'object' || typeof input[Symbol.iterator] !== 'function') {
    // (sequence<LanguageModelMessage> or DOMString): anything but an iterable object is a string
    return [{ role: 'user', content: [{ type: 'text', value: String(input) }], prefix: false }];
  }
  const list = Array.from(input);
  if (list.length === 0) return [{ role: 'user', content: [{ type: 'text', value: '' }], prefix: false }];
  const messages = [];
  list.forEach((m, i) => {
    if (m === null || typeof m !== 'object') throw new TypeError(`message ${i}: a LanguageModelMessage object is required`);
    if (m.role === undefined) throw new TypeError(`message ${i}: role is required`);
    if (!ROLES.includes(m.role)) throw new TypeError(`message ${i}: ${JSON.stringify(m.role)} is not a LanguageModelMessageRole`);
    if (m.content === undefined) throw new TypeError(`message ${i}: content is required`);
    let content;
    if (typeof m.content === 'string') content = [{ type: 'text', value: m.content }];
    else if (m.content !== null && typeof m.content === 'object' && typeof m.content[Symbol.iterator] === 'function') {
      content = Array.from(m.content, (c, j) => {
        if (c === null || typeof c !== 'object') throw new TypeError(`message ${i}, content ${j}: a LanguageModelMessageContent object is required`);
        if (!TYPES.includes(c.type)) throw new TypeError(`message ${i}, content ${j}: ${JSON.stringify(c.type)} is not a LanguageModelMessageType`);
        if (c.value === undefined) throw new TypeError(`message ${i}, content ${j}: value is required`);
        return { type: c.type, value: c.value };
      });
    } else content = [{ type: 'text', value: String(m.content) }];
    const prefix = Boolean(m.prefix);
    if (prefix && (m.role !== 'assistant' || i !== list.length - 1)) {
      throw domError('SyntaxError', 'prefix: true is only allowed on the last message, an assistant one');
    }
    if (m.role === 'system' && hasAppendedInput) {
      throw new TypeError('a system message must be the first message of the session');
    }
    if (content.length === 0) content.push({ type: 'text', value: '' });
    for (const c of content) {
      if (m.role === 'assistant' && c.type !== 'text') throw domError('NotSupportedError', `assistant messages hold text only, not ${c.type}`);
      if (c.type === 'text' && typeof c.value !== 'string') throw new TypeError('a text content value must be a string');
      if ((c.type === 'image' || c.type === 'audio') && !types.has(c.type)) {
        throw domError('NotSupportedError', `${c.type} input was not in the session's expectedInputs`);
      }
      if (c.type === 'audio') throw domError('NotSupportedError', 'audio input is not supported by this implementation');
    }
    const joined = [];
    for (const [j, c] of content.entries()) {
      const last = joined[joined.length - 1];
      if (c.type === 'text' && last?.type === 'text') last.value += c.value;
      else if (c.type === 'image') joined.push({ type: 'image', value: imageSnapshot(c.value, `message ${i}, content ${j}`) });
      else joined.push({ ...c, value: typeof c.value === 'string' ? c.value : JSON.stringify(c.value) });
    }
    messages.push({ role: m.role, content: joined, prefix });
    hasAppendedInput = true;
  });
  return messages;
}

/**
 * An image content value (the spec's ImageBitmapSource or BufferSource) snapshotted now, in a
 * form the engine's decodeImage takes: bytes copied (an ArrayBuffer, a view at its offset), a
 * Blob or ImageBitmap as it is, ImageData's pixels copied, and a canvas-like source (a canvas,
 * OffscreenCanvas, <img>, <video>, SVG <image>, VideoFrame; in Node any object with
 * getContext('2d').getImageData) drawn and read back as RGBA pixels. TypeError for another value.
 */
function imageSnapshot(v, what) {
  const bad = () => new TypeError(`${what}: an image value must be an ImageBitmapSource (Blob, ImageBitmap, ImageData, ` +
    'a canvas, an image or video element, a VideoFrame) or a BufferSource');
  if (v === null || typeof v !== 'object') throw bad();
  if (v instanceof ArrayBuffer || (typeof SharedArrayBuffer === 'function' && v instanceof SharedArrayBuffer)) return new Uint8Array(v.slice(0));
  if (ArrayBuffer.isView(v)) return new Uint8Array(v.buffer, v.byteOffset, v.byteLength).slice();
  if (typeof Blob === 'function' && v instanceof Blob) return v;
  if (typeof ImageBitmap === 'function' && v instanceof ImageBitmap) return v;
  const pixels = (d) => ({ width: d.width, height: d.height, data: new Uint8Array(d.data.buffer, d.data.byteOffset, d.data.byteLength).slice() });
  if ((typeof ImageData === 'function' && v instanceof ImageData) ||
      (Number.isInteger(v.width) && Number.isInteger(v.height) && ArrayBuffer.isView(v.data) && typeof v.getContext !== 'function')) {
    return pixels(v);
  }
  const w = v.naturalWidth || v.videoWidth || v.displayWidth || v.width?.baseVal?.value || v.width;
  const h = v.naturalHeight || v.videoHeight || v.displayHeight || v.height?.baseVal?.value || v.height;
  if (typeof OffscreenCanvas === 'function' && Number.isInteger(w) && Number.isInteger(h) && w > 0 && h > 0) {
    try { // a page: anything drawImage takes
      const g = new OffscreenCanvas(w, h).getContext('2d', { willReadFrequently: true });
      g.drawImage(v, 0, 0);
      return pixels(g.getImageData(0, 0, w, h));
    } catch (e) {
      if (typeof v.getContext !== 'function') throw domError('InvalidStateError', `${what}: the image cannot be read (${e?.message ?? e})`);
    }
  }
  if (typeof v.getContext === 'function' && Number.isInteger(v.width) && Number.isInteger(v.height)) {
    const g = v.getContext('2d');
    if (!g || typeof g.getImageData !== 'function') throw domError('InvalidStateError', `${what}: the canvas has no 2D context to read`);
    return pixels(g.getImageData(0, 0, v.width, v.height));
  }
  throw bad();
}

/** A canonical message as the template's {role, content}: text parts joined already; with
 *  images, OpenAI-style parts ({type: 'image', image} for each image, js/vision/vision.js). */
function chatMessage(m) {
  if (!m.content.some((c) => c.type === 'image')) return { role: m.role, content: m.content.map((c) => c.value).join('') };
  return { role: m.role, content: m.content.map((c) => (c.type === 'image' ? { type: 'image', image: c.value } : { type: 'text', text: c.value })) };
}

/** A message's content as parts. */
const asParts = (content) => (typeof content === 'string' ? [{ type: 'text', text: content }] : content);

/** Consecutive user or assistant messages (text and images, no tool calls) joined into one. */
function joinRuns(messages) {
  const out = [];
  for (const m of messages) {
    const last = out[out.length - 1];
    const plain = (x) => (x.role === 'user' || x.role === 'assistant') && !x.tool_calls && (typeof x.content === 'string' || Array.isArray(x.content));
    if (last && last.role === m.role && plain(last) && plain(m)) {
      const content = typeof last.content === 'string' && typeof m.content === 'string' ? `${last.content}\n\n${m.content}`
        : [...asParts(last.content), { type: 'text', text: '\n\n' }, ...asParts(m.content)];
      out[out.length - 1] = { ...last, content };
    } else out.push(m);
  }
  return out;
}

/** Image counts (Engine.imageTokens) per image value, per engine. */
const imageCounts = new WeakMap();

/** The positions of `image` on `engine`: measured once per value. An image that does not
 *  decode is a DataError. */
async function imagePositions(engine, image) {
  let m = imageCounts.get(engine);
  if (!m) imageCounts.set(engine, m = new WeakMap());
  if (typeof image === 'object' && m.has(image)) return m.get(image);
  let n;
  try {
    n = await engine.imageTokens(image);
  } catch (e) {
    if (e?.code === 'WLM_ERR_INVALID_ARG') throw domError('DataError', `the image cannot be used: ${e.message}`, e);
    throw e;
  }
  if (typeof image === 'object') m.set(image, n);
  return n;
}

/** Positions of a rendered prompt with images (the text holds a media marker per image), as the
 *  engine lays it out: each text piece tokenized on its own (special tokens parsed, BOS before
 *  the first as generate() puts it), plus each image's positions. */
async function mediaPositions(engine, text, addBos, images) {
  const bos = engine.info.bosToken;
  if (!addBos && engine.info.addBos && bos && text.startsWith(bos)) text = text.slice(bos.length); // generate() drops it too
  const pieces = text.split(MEDIA_MARKER);
  let n = 0;
  for (const [i, piece] of pieces.entries()) n += (await engine.tokenize(piece, { bos: i === 0, parseSpecial: true })).length;
  for (const image of images) n += await imagePositions(engine, image);
  return n;
}

/** prompt()'s responseConstraint: {kind, schema | grammar, hint} or null. */
function constraintOf(options) {
  const rc = options.responseConstraint;
  const omit = Boolean(options.omitResponseConstraintInput);
  if (rc === undefined || rc === null) {
    if (omit) throw new TypeError('omitResponseConstraintInput needs a responseConstraint');
    return null;
  }
  if (rc instanceof RegExp) {
    return { grammar: regExpToGrammar(rc), hint: omit ? null : `Answer with text that matches this regular expression: ${rc}` };
  }
  if (typeof rc !== 'object') throw new TypeError('responseConstraint must be a JSON Schema object or a RegExp');
  let text;
  try {
    text = JSON.stringify(rc);
  } catch (e) {
    throw new TypeError(`responseConstraint is not a JSON Schema: ${e.message}`);
  }
  return { schema: rc, hint: omit ? null : `Answer with JSON that matches this JSON Schema: ${text}` };
}

/** `messages` with `hint` added to the last user message (copied), or as one more. */
function withHint(messages, hint) {
  if (!hint) return messages;
  const out = messages.map((m) => ({ ...m }));
  for (let i = out.length - 1; i >= 0; i--) {
    if (out[i].role === 'user') {
      out[i].content = typeof out[i].content === 'string' ? `${out[i].content}\n\n${hint}`
        : [...out[i].content, { type: 'text', text: `\n\n${hint}` }];
      return out;
    }
  }
  return [...out, { role: 'user', content: hint }];
}

function createCoreOptions(options, what) {
  const expectedInputs = expectedList(options.expectedInputs, `${what}: expectedInputs`);
  const expectedOutputs = expectedList(options.expectedOutputs, `${what}: expectedOutputs`);
  const mode = options.samplingMode;
  if (mode !== undefined && !(mode in SAMPLING_MODES)) throw new TypeError(`${what}: ${JSON.stringify(mode)} is not a LanguageModelSamplingMode`);
  if (mode !== undefined && (options.temperature !== undefined || options.topK !== undefined)) {
    throw new TypeError(`${what}: samplingMode cannot be given with temperature or topK`);
  }
  const temperature = options.temperature === undefined ? undefined : Number(options.temperature);
  const topK = options.topK === undefined ? undefined : Number(options.topK);
  if (Number.isNaN(temperature) || Number.isNaN(topK)) throw new TypeError(`${what}: temperature and topK must be numbers`);
  return { expectedInputs, expectedOutputs, samplingMode: mode, temperature, topK, tools: toolList(options.tools) };
}

/** The availability of the options (the spec's "compute language model options availability");
 *  `vision`: whether the model has (or, not loaded yet, is configured with) an mmproj. */
function optionsAvailability(core, vision) {
  for (const e of core.expectedInputs ?? []) if (e.type === 'audio' || (e.type === 'image' && !vision)) return 'unavailable';
  for (const e of core.expectedOutputs ?? []) if (e.type !== 'text' && e.type !== 'tool-call') return 'unavailable';
  return null;
}

/** Keywords the grammar cannot hold but a check of the finished response can (numbers'
 *  bounds), and annotations that constrain nothing (format: JSON Schema 2020-12 §7.2). */
const CHECKED_AFTER = ['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf'];
const ANNOTATIONS = ['format'];

/**
 * A JSON Schema's grammar (the engine's converter, src/sampling/json_schema.c) and whether the
 * response must be checked afterwards (CHECKED_AFTER keywords). Another unsupported keyword is a
 * NotSupportedError; a schema that is no JSON Schema, a TypeError.
 */
async function schemaGrammar(engine, schema) {
  let r;
  try {
    r = await engine.jsonSchemaToGrammar(schema, { strict: false });
  } catch (e) {
    if (e?.code === 'WLM_ERR_UNSUPPORTED') throw domError('NotSupportedError', `responseConstraint: ${e.message}`, e);
    throw new TypeError(`responseConstraint is not a usable JSON Schema: ${e?.message ?? e}`);
  }
  let checks = false;
  for (const w of r.warnings) {
    const keyword = /keyword '([^']+)'/.exec(w)?.[1];
    if (CHECKED_AFTER.includes(keyword)) checks = true;
    else if (!ANNOTATIONS.includes(keyword)) throw domError('NotSupportedError', `responseConstraint: ${w.replace(' (ignored)', '')}`);
  }
  return { grammar: r.grammar, checks };
}

/** The first CHECKED_AFTER keyword `value` violates under `schema` (a description), or null.
 *  Follows properties, additionalProperties, items, prefixItems, allOf, anyOf / oneOf (some
 *  branch passes) and local $refs. */
function checkValue(schema, value, path, root) {
  if (schema === null || typeof schema !== 'object') return null;
  if (typeof schema.$ref === 'string' && schema.$ref.startsWith('#')) {
    const target = schema.$ref.slice(1).split('/').filter(Boolean)
      .reduce((o, k) => (o == null ? o : o[decodeURIComponent(k).replace(/~1/g, '/').replace(/~0/g, '~')]), root);
    const p = checkValue(target, value, path, root);
    if (p) return p;
  }
  if (typeof value === 'number') {
    const at = path || '/';
    if (typeof schema.minimum === 'number' && value < schema.minimum) return `${at}: ${value} < minimum ${schema.minimum}`;
    if (typeof schema.maximum === 'number' && value > schema.maximum) return `${at}: ${value} > maximum ${schema.maximum}`;
    if (typeof schema.exclusiveMinimum === 'number' && value <= schema.exclusiveMinimum) return `${at}: ${value} <= exclusiveMinimum ${schema.exclusiveMinimum}`;
    if (typeof schema.exclusiveMaximum === 'number' && value >= schema.exclusiveMaximum) return `${at}: ${value} >= exclusiveMaximum ${schema.exclusiveMaximum}`;
    if (typeof schema.multipleOf === 'number' && schema.multipleOf > 0) {
      const q = value / schema.multipleOf;
      if (Math.abs(q - Math.round(q)) > 1e-9) return `${at}: ${value} is not a multiple of ${schema.multipleOf}`;
    }
  }
  if (Array.isArray(value)) {
    const prefix = Array.isArray(schema.prefixItems) ? schema.prefixItems : [];
    for (let i = 0; i < value.length; i++) {
      const p = checkValue(i < prefix.length ? prefix[i] : schema.items, value[i], `${path}/${i}`, root);
      if (p) return p;
    }
  } else if (value !== null && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      const sub = schema.properties && Object.hasOwn(schema.properties, k) ? schema.properties[k] : schema.additionalProperties;
      const p = checkValue(sub, v, `${path}/${k}`, root);
      if (p) return p;
    }
  }
  for (const s of Array.isArray(schema.allOf) ? schema.allOf : []) {
    const p = checkValue(s, value, path, root);
    if (p) return p;
  }
  for (const key of ['anyOf', 'oneOf']) {
    if (!Array.isArray(schema[key]) || schema[key].length === 0) continue;
    const problems = schema[key].map((s) => checkValue(s, value, path, root));
    if (problems.every(Boolean)) return problems[0];
  }
  return null;
}

/**
 * `stream` made async-iterable where the platform's ReadableStream is not (Safari, WebKitGTK):
 * the Streams standard's values() and [Symbol.asyncIterator] on this one object, over a reader
 * (`return()` — a for-await left early — cancels the stream, as the standard's iterator does).
 */
function asyncIterable(stream) {
  if (typeof stream[Symbol.asyncIterator] === 'function') return stream;
  const values = ({ preventCancel = false } = {}) => {
    const reader = stream.getReader();
    return {
      next: () => reader.read().then((r) => { if (r.done) reader.releaseLock(); return r; }),
      async return(value) {
        if (!preventCancel) await reader.cancel(value);
        reader.releaseLock();
        return { done: true, value };
      },
      [Symbol.asyncIterator]() { return this; },
    };
  };
  Object.defineProperty(stream, 'values', { value: values, configurable: true, writable: true });
  Object.defineProperty(stream, Symbol.asyncIterator, { value: values, configurable: true, writable: true });
  return stream;
}

// ---- events ------------------------------------------------------------------------------

/** ProgressEvent where the platform has it (browsers), else an Event with its fields. */
function progressEvent(loaded) {
  if (typeof ProgressEvent === 'function') return new ProgressEvent('downloadprogress', { loaded, total: 1, lengthComputable: true });
  const ev = new Event('downloadprogress');
  Object.defineProperties(ev, { loaded: { value: loaded }, total: { value: 1 }, lengthComputable: { value: true } });
  return ev;
}

/** An `on<type>` event handler attribute on `proto`, for event types `types`. */
function handlerAttribute(proto, name, type) {
  const key = Symbol(name);
  Object.defineProperty(proto, name, {
    configurable: true, enumerable: true,
    get() { return this[key]?.handler ?? null; },
    set(fn) {
      if (this[key]) this.removeEventListener(type, this[key].listener);
      this[key] = null;
      if (typeof fn === 'function') {
        const entry = { handler: fn, listener: (e) => entry.handler.call(this, e) };
        this[key] = entry;
        this.addEventListener(type, entry.listener);
      }
    },
  });
}

/** The object create()'s monitor callback receives (the spec's CreateMonitor). */
class CreateMonitor extends EventTarget {}
handlerAttribute(CreateMonitor.prototype, 'ondownloadprogress', 'downloadprogress');

// ---- LanguageModel -------------------------------------------------------------------------

const INTERNAL = Symbol('LanguageModel');

/**
 * A session with the language model (the spec's LanguageModel interface). Made by
 * LanguageModel.create() or clone(), never by `new`.
 */
export class LanguageModel extends EventTarget {
  #rt;
  #history;        // OpenAI-style messages: the conversation so far
  #nInitial;       // how many of them are initial prompts (never evicted)
  #tools;
  #expectedInputs;
  #expectedOutputs;
  #temperature;
  #topK;
  #samplingMode;
  #contextWindow;
  #contextUsage;
  #destroy = new AbortController();

  constructor(key, state) {
    if (key !== INTERNAL) throw new TypeError('Illegal constructor: use LanguageModel.create()');
    super();
    this.#rt = state.rt;
    this.#history = state.history;
    this.#nInitial = state.nInitial;
    this.#tools = state.tools;
    this.#expectedInputs = state.expectedInputs;
    this.#expectedOutputs = state.expectedOutputs;
    this.#temperature = state.temperature;
    this.#topK = state.topK;
    this.#samplingMode = state.samplingMode;
    this.#contextWindow = state.contextWindow;
    this.#contextUsage = state.contextUsage;
  }

  /**
   * Whether create() with these options would work: "unavailable" (image / audio inputs, an
   * output other than text), "downloadable" (the model is not loaded and not in the model cache),
   * "downloading" (its download is under way) or "available".
   */
  static async availability(options = {}) {
    options = dictionary(options, 'LanguageModel.availability()');
    const core = createCoreOptions(options, 'LanguageModel.availability()');
    if (typeof WebAssembly !== 'object') return 'unavailable';
    const forOptions = optionsAvailability(core, visionConfigured());
    if (forOptions) return forOptions;
    if (runtime?.done) return 'available';
    if (runtime && !runtime.done) return runtime.downloading ? 'downloading' : 'available';
    if (config.engine?.info) return 'available';
    const url = cacheableUrl(config.model);
    if (url === null) return 'available'; // a path, a Blob, bytes: nothing to download
    if (IS_NODE) return 'downloadable';
    const cache = new ModelCache();
    if (!cache.available) return 'downloadable';
    const hit = await cache.match(url, { sha256: MODELS[config.model]?.sha256 ?? null }).catch(() => null);
    return hit ? 'available' : 'downloadable';
  }

  /** The sampler's defaults and limits ({defaultTopK, maxTopK, defaultTemperature,
   *  maxTemperature}); the spec keeps it for extensions, a polyfill has no such split. */
  static async params() {
    return { ...PARAMS };
  }

  /**
   * A new session: the shared engine (loaded on the first call, progress to `monitor`),
   * initialPrompts measured and stored. See the spec; errors: TypeError / RangeError (options),
   * NotSupportedError (image / audio, unavailable options), SyntaxError (a misplaced prefix),
   * QuotaExceededError (initial prompts longer than the context), NetworkError (the download),
   * OperationError (the load), the signal's reason when it aborts.
   */
  static async create(options = {}) {
    options = dictionary(options, 'LanguageModel.create()');
    const signal = signalOption(options, 'LanguageModel.create()');
    if (options.monitor !== undefined && typeof options.monitor !== 'function') throw new TypeError('LanguageModel.create(): monitor must be a function');
    const core = createCoreOptions(options, 'LanguageModel.create()');
    const types = expectedTypes(core.expectedInputs);
    const initial = options.initialPrompts === undefined ? [] : canonicalize(
      (() => {
        const p = options.initialPrompts;
        if (p === null || typeof p !== 'object' || typeof p[Symbol.iterator] !== 'function') throw new TypeError('initialPrompts: a sequence of messages is required');
        return p;
      })(), types, false);
    if (signal?.aborted) throw abortReason(signal);
    if (optionsAvailability(core, visionConfigured())) {
      throw domError('NotSupportedError', 'these expectedInputs / expectedOutputs are not supported (text, tool use, and images ' +
        'with a vision model: configure({ load: { mmproj } }))');
    }
    let temperature, topK;
    if (core.temperature !== undefined || core.topK !== undefined) {
      if (core.temperature !== undefined && core.temperature < 0) throw new RangeError('temperature must be >= 0');
      if (core.topK !== undefined && core.topK < 1) throw new RangeError('topK must be >= 1');
      temperature = Math.min(core.temperature ?? PARAMS.defaultTemperature, PARAMS.maxTemperature);
      topK = Math.min(Math.floor(core.topK ?? PARAMS.defaultTopK), PARAMS.maxTopK);
    } else {
      ({ temperature, topK } = SAMPLING_MODES[core.samplingMode ?? 'balanced']);
    }

    const monitor = new CreateMonitor();
    options.monitor?.(monitor);
    let last = -1;
    const progress = (f) => {
      const loaded = Math.floor(Math.min(Math.max(f, 0), 1) * 0x10000) / 0x10000; // the spec's rounding
      if (loaded <= last) return;
      last = loaded;
      monitor.dispatchEvent(progressEvent(loaded));
    };
    progress(0);
    const rt = getRuntime((f) => progress(Math.min(f, 0.9999)));
    const aborted = signal ? new Promise((_, reject) => signal.addEventListener('abort', () => reject(abortReason(signal)), { once: true })) : null;
    aborted?.catch(() => {});
    let engine;
    try {
      engine = await (aborted ? Promise.race([rt.ready, aborted]) : rt.ready);
    } catch (e) {
      throw specError(e, 'create');
    }
    progress(1);
    if ((core.expectedInputs ?? []).some((e) => e.type === 'image') && !engine.info.vision) {
      throw domError('NotSupportedError', 'image input needs a vision model: the model was loaded without an mmproj');
    }
    const history = initial.map(chatMessage);
    const session = new LanguageModel(INTERNAL, {
      rt, history, nInitial: history.length, tools: core.tools, expectedInputs: core.expectedInputs ?? [],
      expectedOutputs: core.expectedOutputs ?? [], temperature, topK, samplingMode: core.samplingMode ?? 'balanced',
      contextWindow: engine.info.nCtx, contextUsage: 0,
    });
    if (signal) signal.addEventListener('abort', () => session.destroy(abortReason(signal)), { once: true });
    await enqueue(signal, async () => {
      const used = await session.#usage(history);
      if (used > session.#contextWindow) throw quotaError(used, session.#contextWindow);
      session.#contextUsage = used;
    }).catch((e) => { throw specError(e); });
    return session;
  }

  /** The tokens the conversation holds (template tokens included). */
  get contextUsage() { return this.#contextUsage; }
  /** The context length in tokens. */
  get contextWindow() { return this.#contextWindow; }
  /** Deprecated alias of contextUsage. */
  get inputUsage() { return this.#contextUsage; }
  /** Deprecated alias of contextWindow. */
  get inputQuota() { return this.#contextWindow; }
  get topK() { return this.#topK; }
  get temperature() { return this.#temperature; }
  get samplingMode() { return this.#samplingMode; }

  /**
   * Prompts the model; resolves with the whole response. With a final assistant message marked
   * `prefix: true`, the response continues that text (which is not repeated in the result).
   */
  prompt(input, options = {}) {
    try {
      const op = this.#prepare(input, options, 'prompt()');
      let text = '';
      return this.#run(op, (chunk) => { text += chunk; }).then(() => text);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /** As prompt(), the response as a ReadableStream of text chunks (each a new piece).
   *  Cancelling the stream stops the generation. */
  promptStreaming(input, options = {}) {
    let op, error = null;
    try {
      op = this.#prepare(input, options, 'promptStreaming()');
    } catch (e) {
      error = e;
    }
    const cancel = new AbortController();
    return asyncIterable(new ReadableStream({
      start: (controller) => {
        if (error) {
          controller.error(error);
          return;
        }
        op.signal = anySignal([op.signal, cancel.signal]);
        this.#run(op, (chunk) => { if (chunk) controller.enqueue(chunk); }).then(
          () => { try { controller.close(); } catch { /* cancelled */ } },
          (e) => { try { controller.error(e); } catch { /* cancelled */ } });
      },
      cancel: (reason) => cancel.abort(reason ?? domError('AbortError', 'the stream was cancelled')),
    }));
  }

  /** Adds messages to the conversation without a response (measured and stored now, prefilled
   *  with the next prompt). */
  append(input, options = {}) {
    try {
      options = dictionary(options, 'append()');
      const signal = anySignal([this.#destroy.signal, signalOption(options, 'append()')]);
      if (signal.aborted) return Promise.reject(abortReason(signal));
      const messages = canonicalize(input, expectedTypes(this.#expectedInputs), this.#history.length > 0);
      const add = messages.map(chatMessage);
      return enqueue(signal, async () => {
        this.#live();
        await this.#fit(add);
        this.#history.push(...add);
        this.#contextUsage = await this.#usage(this.#history);
      }).catch((e) => { throw specError(e); });
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /** The tokens `input` would add to the conversation (with the constraint's description
   *  unless omitResponseConstraintInput). */
  measureContextUsage(input, options = {}) {
    try {
      options = dictionary(options, 'measureContextUsage()');
      const signal = anySignal([this.#destroy.signal, signalOption(options, 'measureContextUsage()')]);
      if (signal.aborted) return Promise.reject(abortReason(signal));
      const constraint = constraintOf(options);
      const messages = canonicalize(input, expectedTypes(this.#expectedInputs), this.#history.length > 0);
      const add = withHint(messages.map(chatMessage), constraint?.hint);
      return enqueue(signal, async () => {
        this.#live();
        return Math.max(0, (await this.#usage([...this.#history, ...add])) - this.#contextUsage);
      }).catch((e) => { throw specError(e); });
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /** Deprecated alias of measureContextUsage(). */
  measureInputUsage(input, options = {}) {
    return this.measureContextUsage(input, options);
  }

  /** A new session with this one's conversation and settings (the KV cache of the common
   *  prefix is shared through the prompt cache). */
  clone(options = {}) {
    try {
      options = dictionary(options, 'clone()');
      const signal = anySignal([this.#destroy.signal, signalOption(options, 'clone()')]);
      if (signal.aborted) return Promise.reject(abortReason(signal));
      return enqueue(signal, async () => {
        this.#live();
        return new LanguageModel(INTERNAL, {
          rt: this.#rt, history: this.#history.map((m) => ({ ...m })), nInitial: this.#nInitial, tools: this.#tools,
          expectedInputs: this.#expectedInputs, expectedOutputs: this.#expectedOutputs, temperature: this.#temperature,
          topK: this.#topK, samplingMode: this.#samplingMode, contextWindow: this.#contextWindow,
          contextUsage: this.#contextUsage,
        });
      });
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /** Ends the session: its running and queued operations reject (streams error) with an
   *  AbortError DOMException (or `reason`), and so do later calls. The shared engine stays
   *  loaded for other sessions. */
  destroy(reason) {
    if (!this.#destroy.signal.aborted) {
      this.#destroy.abort(reason ?? domError('AbortError', 'The session was destroyed.'));
    }
  }

  /** Throws when the engine this session was made on was replaced by configure(). */
  #live() {
    if (this.#rt.stale) throw domError('InvalidStateError', 'configure() replaced the model this session was made on');
  }

  /** prompt() / promptStreaming()'s synchronous checks: {messages, constraint, signal}. */
  #prepare(input, options, what) {
    options = dictionary(options, what);
    const signal = anySignal([this.#destroy.signal, signalOption(options, what)]);
    const constraint = constraintOf(options);
    const messages = canonicalize(input, expectedTypes(this.#expectedInputs), this.#history.length > 0);
    return { messages, constraint, signal };
  }

  /** Tokens of `messages` rendered as a prompt (0 for none). */
  async #usage(messages) {
    if (messages.length === 0) return 0;
    const engine = await this.#rt.ready;
    const { text, addBos, images } = await this.#render(engine, messages);
    if (images.length) return mediaPositions(engine, text, addBos, images);
    return (await engine.tokenize(text, { bos: addBos, parseSpecial: true })).length;
  }

  /**
   * The conversation rendered by the template: {text, addBos, request, images}. A template that
   * refuses two user (or assistant) messages in a row — "roles must alternate", as Gemma's and
   * Mistral's raise — gets them joined into one, separated by a blank line; `request` is what
   * rendered (image parts as they are), `images` its images in order (each a media marker in
   * `text`).
   */
  async #render(engine, messages, extra = {}) {
    const rendered = async (request) => {
      let flat, images;
      try {
        ({ messages: flat, images } = extractImages(request.messages));
      } catch (e) { // a text holding the media marker beside images: it would take an image
        if (!String(e?.message).includes(MEDIA_MARKER)) throw e;
        throw domError('NotSupportedError', `a text of a conversation with images cannot hold ${MEDIA_MARKER} ` +
          '(the marker that places an image)', e);
      }
      return { ...(await chatCompletionPrompt(engine.info, images.length ? { ...request, messages: flat } : request)), request, images };
    };
    try {
      return await rendered(this.#request(messages, extra));
    } catch (e) {
      const joined = joinRuns(messages);
      if (e?.code !== 'WLM_ERR_FORMAT' || joined.length === messages.length) throw e;
      return rendered(this.#request(joined, extra));
    }
  }

  /** The chat-completion request of a conversation (what the template sees). */
  #request(messages, extra = {}) {
    const req = { messages, chat_template_kwargs: { enable_thinking: false }, ...extra };
    if (this.#tools.length) {
      req.tools = this.#tools.map((t) => ({ type: 'function', function: { name: t.name, description: t.description, parameters: t.inputSchema } }));
    }
    return req;
  }

  /**
   * Makes room for `add` (the spec's overflow): evicts the oldest prompt/response pairs after
   * the initial prompts until the conversation plus `add` fits, firing contextoverflow (and
   * quotaoverflow) once; throws a QuotaExceededError, evicting nothing, when it cannot fit.
   */
  async #fit(add) {
    let history = this.#history;
    let need = await this.#usage([...history, ...add]);
    if (need <= this.#contextWindow) return;
    while (need > this.#contextWindow && history.length > this.#nInitial) {
      // one pair: the oldest message after the initial ones and everything up to the next user message
      let end = this.#nInitial + 1;
      while (end < history.length && history[end].role !== 'user') end++;
      history = [...history.slice(0, this.#nInitial), ...history.slice(end)];
      need = await this.#usage([...history, ...add]);
    }
    if (need > this.#contextWindow) throw quotaError(need, this.#contextWindow);
    this.#history = history;
    this.dispatchEvent(new Event('contextoverflow'));
    this.dispatchEvent(new Event('quotaoverflow'));
  }

  /** Runs one prompt: queued, fitted, generated (tools in rounds), stored. */
  #run(op, onChunk) {
    const { messages, constraint } = op;
    if (op.signal.aborted) return Promise.reject(abortReason(op.signal));
    return enqueue(op.signal, async () => {
      this.#live();
      const signal = op.signal;
      const engine = await this.#rt.ready;
      const last = messages[messages.length - 1];
      const prefix = last.prefix ? last.content.map((c) => c.value).join('') : null;
      const add = (prefix !== null ? messages.slice(0, -1) : messages).map(chatMessage);
      const shown = withHint(add, constraint?.hint);
      await this.#fit(shown);
      const before = this.#history.length;
      const turn = [];
      try {
        if (this.#tools.length && !constraint && prefix === null) {
          await this.#toolRounds(engine, shown, turn, onChunk, signal);
        } else {
          const text = await this.#generate(engine, shown, prefix, constraint, onChunk, signal);
          turn.push({ role: 'assistant', content: (prefix ?? '') + text });
        }
      } catch (e) {
        if (signal.aborted) throw abortReason(signal);
        throw e;
      }
      if (signal.aborted) throw abortReason(signal);
      this.#history.splice(before, 0, ...add, ...turn);
      this.#contextUsage = await this.#usage(this.#history);
    }).catch((e) => { throw specError(e); });
  }

  /** Sampling parameters as the engine's GenerateParams. */
  #genParams() {
    const p = { temperature: this.#temperature, topK: this.#topK, topP: 1, maxTokens: 0 };
    return { ...p, ...config.params };
  }

  /** One response without tool calls: the conversation rendered (+ the assistant prefix), then
   *  generate() with the constraint's grammar. Returns the text after the prefix. */
  async #generate(engine, add, prefix, constraint, onChunk, signal) {
    const { text, addBos, images } = await this.#render(engine, [...this.#history, ...add]);
    const params = { ...this.#genParams(), cachePrompt: true, addBos, parseSpecial: true };
    if (images.length) params.images = images;
    if (constraint?.grammar) params.grammar = constraint.grammar;
    let checks = false;
    if (constraint?.schema) ({ grammar: params.grammar, checks } = await schemaGrammar(engine, constraint.schema));
    let out = '';
    try {
      for await (const tok of engine.generate(text + (prefix ?? ''), params, { signal })) {
        out += tok.text;
        if (tok.text) onChunk(tok.text);
      }
    } catch (e) {
      if (constraint && e?.code === 'WLM_ERR_INVALID_ARG' && !signal.aborted) throw domError('NotSupportedError', e.message, e);
      throw e;
    }
    if (constraint && engine.lastResult?.stopReason !== 'eos' && !signal.aborted) {
      throw domError('SyntaxError', `the response was cut short (${engine.lastResult?.stopReason}) before it matched the responseConstraint`);
    }
    if (checks) {
      const problem = checkValue(constraint.schema, JSON.parse(out), '', constraint.schema);
      if (problem) throw domError('SyntaxError', `the response does not satisfy the responseConstraint: ${problem}`);
    }
    return out;
  }

  /** A response with tools: chat completions in rounds until one has no tool call. */
  async #toolRounds(engine, add, turn, onChunk, signal) {
    const extra = {};
    for (const [k, v] of Object.entries(config.params)) extra[PARAM_KEYS[k]] = v;
    for (let round = 0; ; round++) {
      const { request } = await this.#render(engine, [...this.#history, ...add, ...turn], {
        ...extra, stream: true, temperature: Math.min(this.#temperature, 2), top_k: this.#topK, top_p: 1,
        tool_choice: round < MAX_TOOL_ROUNDS ? 'auto' : 'none',
      });
      const stream = await engine.chatCompletion(request, { signal });
      let content = '';
      const calls = [];
      for await (const chunk of stream) {
        const delta = chunk.choices[0]?.delta ?? {};
        if (delta.content) {
          content += delta.content;
          onChunk(delta.content);
        }
        for (const tc of delta.tool_calls ?? []) {
          const c = calls[tc.index] ??= { id: '', name: '', arguments: '' };
          if (tc.id) c.id = tc.id;
          if (tc.function?.name) c.name = tc.function.name;
          if (tc.function?.arguments) c.arguments += tc.function.arguments;
        }
      }
      const done = calls.filter(Boolean);
      if (done.length === 0) {
        turn.push({ role: 'assistant', content });
        return;
      }
      turn.push({ role: 'assistant', content: content || null,
        tool_calls: done.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } })) });
      const results = await Promise.all(done.map(async (c) => {
        const tool = this.#tools.find((t) => t.name === c.name);
        let args;
        try {
          args = JSON.parse(c.arguments || '{}');
        } catch {
          return `Error: the arguments of ${c.name} were not valid JSON`;
        }
        return String(await tool.execute(args));
      }));
      if (signal.aborted) throw abortReason(signal);
      done.forEach((c, i) => turn.push({ role: 'tool', tool_call_id: c.id, content: results[i] }));
    }
  }
}

handlerAttribute(LanguageModel.prototype, 'oncontextoverflow', 'contextoverflow');
handlerAttribute(LanguageModel.prototype, 'onquotaoverflow', 'quotaoverflow');
Object.defineProperty(LanguageModel.prototype, Symbol.toStringTag, { value: 'LanguageModel', configurable: true });
