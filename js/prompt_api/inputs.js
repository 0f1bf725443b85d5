// prompt_api/inputs.js — options and prompts, checked as the spec's IDL and algorithms do, and
// turned into what the engine takes: roles and content types, prompts canonicalized into
// messages (images snapshotted when the call is made), response constraints (a JSON Schema or a
// RegExp) as grammars and the check of a response against its schema, sampling modes.
// The spec's options (create(), prompt(), append(), clone(), availability(), params()) are WebIDL
// dictionaries, and WebIDL's dictionary conversion reads only the members it declares: an
// unknown member is ignored, never an error (WebIDL, "JavaScript type to dictionary"), and
// Chrome's LanguageModel does so. So these are NOT refused here (unlike every options object of
// ours: configure() and its params go through js/options.js): a page written for Chrome's API
// behaves the same on this one.

import { regExpToGrammar } from './regexp.js';
import { MEDIA_MARKER } from '../vision/vision.js';
import { domError } from './errors.js';

/** samplingMode presets as temperature and top-k (ours: the spec leaves them to the UA). */
export const SAMPLING_MODES = Object.freeze({
  'most-predictable': { temperature: 0, topK: 1 },
  predictable: { temperature: 0.4, topK: 3 },
  balanced: { temperature: 1, topK: 3 },
  creative: { temperature: 1.2, topK: 40 },
  'most-creative': { temperature: 1.5, topK: 128 },
});

const ROLES = ['system', 'user', 'assistant'];
const TYPES = ['text', 'image', 'audio', 'tool-call', 'tool-response'];

export function dictionary(value, what) {
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' && typeof value !== 'function') throw new TypeError(`${what}: an options object is required`);
  return value;
}

export function signalOption(options, what) {
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
export function expectedTypes(expectedInputs) {
  const types = new Set((expectedInputs ?? []).map((e) => e.type));
  types.add('text');
  return types;
}

/**
 * The spec's "validate and canonicalize a prompt": messages in longhand, text parts joined.
 * Returns [{role, content: [{type, value}], prefix}].
 */
export function canonicalize(input, types, hasAppendedInput) {
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
export function chatMessage(m) {
  if (!m.content.some((c) => c.type === 'image')) return { role: m.role, content: m.content.map((c) => c.value).join('') };
  return { role: m.role, content: m.content.map((c) => (c.type === 'image' ? { type: 'image', image: c.value } : { type: 'text', text: c.value })) };
}

/** A message's content as parts. */
const asParts = (content) => (typeof content === 'string' ? [{ type: 'text', text: content }] : content);

/** Consecutive user or assistant messages (text and images, no tool calls) joined into one. */
export function joinRuns(messages) {
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
export async function mediaPositions(engine, text, addBos, images) {
  const bos = engine.info.bosToken;
  if (!addBos && engine.info.addBos && bos && text.startsWith(bos)) text = text.slice(bos.length); // generate() drops it too
  const pieces = text.split(MEDIA_MARKER);
  let n = 0;
  for (const [i, piece] of pieces.entries()) n += (await engine.tokenize(piece, { bos: i === 0, parseSpecial: true })).length;
  for (const image of images) n += await imagePositions(engine, image);
  return n;
}

/** prompt()'s responseConstraint: {kind, schema | grammar, hint} or null. */
export function constraintOf(options) {
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
export function withHint(messages, hint) {
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

export function createCoreOptions(options, what) {
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
export function optionsAvailability(core, vision) {
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
export async function schemaGrammar(engine, schema) {
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
export function checkValue(schema, value, path, root) {
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
export function asyncIterable(stream) {
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
