// ai_sdk/index.js — wasmlm as a provider of the Vercel AI SDK (`wasmlm/ai-sdk`): wasmlm(model)
// is a language model of @ai-sdk/provider's specification v4 (LanguageModelV4: doGenerate,
// doStream), wasmlm.textEmbeddingModel(model) an embedding model (EmbeddingModelV4: doEmbed),
// for `ai`'s generateText, streamText, generateObject, tool loops, embed and embedMany.
//
// A call's options become an OpenAI chat-completions request for Engine.chatCompletion
// (js/chat/chat_completion.js), which renders the chat template, holds tool calls and JSON output to
// a grammar (the tools' and the response format's JSON Schemas) and reports usage and finish
// reasons; this file maps the AI SDK's prompt, tools, tool choice and settings onto that
// request and its response and chunks back onto the AI SDK's content and stream parts.
// Settings the engine has no use for are reported as warnings (type 'unsupported'), as the
// specification asks. The engine is created and the model loaded on the first call; calls on
// one engine run one at a time.
//
// Images: a user message's file parts of an image media type (`{type: 'file', mediaType:
// 'image/png', data}`) become the request's image parts (js/vision/vision.js: bytes, a data: URL,
// an http(s) URL the engine fetches), for a model loaded with its mmproj (options.load.mmproj);
// without one the call throws UnsupportedFunctionalityError before generating. supportedUrls
// declares data: and http(s) image URLs: the AI SDK hands them over as they are.

import { InvalidPromptError, UnsupportedFunctionalityError, NoSuchModelError } from '@ai-sdk/provider';
import { createEngine } from '../engine/engine.js';
import { KNOWN, checkOptions as checkKeys } from '../options.js';

const PROVIDER = 'wasmlm';

/** One engine's calls in turn: run(fn) resolves with fn's result once the calls before it ended. */
const locks = new WeakMap();
function lockOf(engine) {
  let l = locks.get(engine);
  if (!l) {
    let tail = Promise.resolve();
    l = (fn) => {
      const run = tail.then(fn);
      tail = run.catch(() => {});
      return run;
    };
    locks.set(engine, l);
  }
  return l;
}

function checkOptions(options, what) {
  if (options === null || typeof options !== 'object') throw new TypeError(`${what}: options must be an object`);
  checkKeys(what, options, KNOWN.WasmlmModelOptions, { error: (m) => new TypeError(m), keepUndefined: true });
  if (options.load !== undefined && (options.load === null || typeof options.load !== 'object' || 'model' in options.load)) {
    throw new TypeError(`${what}: options.load must be load()'s options without 'model' (the model is the first argument)`);
  }
}

function modelIdOf(model, options) {
  if (options.modelId) return String(options.modelId);
  const s = typeof model === 'string' ? model : model instanceof URL ? model.href : Array.isArray(model) && typeof model[0] === 'string' ? model[0] : null;
  return s ? s.split(/[\\/]/).pop() || s : 'wasmlm';
}

/** The engine of a model: created (or given) and loaded once, on first use. */
function engineOf(model, options) {
  let ready = null;
  const isEngine = (e) => e && typeof e === 'object' && typeof e.load === 'function' && typeof e.generate === 'function';
  return () => {
    ready ??= (async () => {
      const engine = isEngine(options.engine) ? options.engine : await createEngine(options.engine ?? {});
      if (model != null) await engine.load({ ...(options.load ?? {}), model });
      else if (!engine.info) throw new TypeError('wasmlm(): no model given and the engine has none loaded');
      return engine;
    })();
    ready.catch(() => { ready = null; }); // a failed load may be retried
    return ready;
  };
}

// ---- prompt → OpenAI messages -------------------------------------------------------------

function toolOutputText(output) {
  switch (output?.type) {
    case 'text': case 'error-text': return output.value;
    case 'json': case 'error-json': return JSON.stringify(output.value);
    case 'execution-denied': return output.reason ?? 'The tool call was denied.';
    case 'content': return output.value.map((p) => {
      if (p.type === 'text') return p.text;
      throw new UnsupportedFunctionalityError({ functionality: `tool result content of type '${p.type}'` });
    }).join('');
    default: throw new InvalidPromptError({ prompt: output, message: `unknown tool output type '${output?.type}'` });
  }
}

/** Whether a media type is an image's ('image', 'image/png', 'image/*'). */
const isImage = (mediaType) => typeof mediaType === 'string' && /^image(\/|$)/i.test(mediaType);

/**
 * A user file part → the request's image part ({type: 'image', image: bytes} or {type:
 * 'image_url', image_url: {url}}). Other files throw UnsupportedFunctionalityError. `data` is
 * the specification's tagged union ({type: 'data' | 'url' | 'reference' | 'text'}); bare bytes,
 * a base64 string or a URL (earlier shapes) are taken too.
 */
function imageOf(p) {
  if (!isImage(p.mediaType)) {
    throw new UnsupportedFunctionalityError({ functionality: `user content of type '${p.type}' (${p.mediaType ?? ''}): wasmlm reads text and images` });
  }
  let d = p.data;
  if (d instanceof Uint8Array || typeof d === 'string') d = { type: 'data', data: d };
  else if (d instanceof URL) d = { type: 'url', url: d };
  if (d?.type === 'data' && d.data instanceof Uint8Array) return { type: 'image', image: d.data };
  if (d?.type === 'data' && typeof d.data === 'string') {
    const mt = p.mediaType.includes('/') && !p.mediaType.endsWith('/*') ? p.mediaType : 'application/octet-stream'; // (the bytes say which format)
    return { type: 'image_url', image_url: { url: d.data.startsWith('data:') ? d.data : `data:${mt};base64,${d.data}` } };
  }
  if (d?.type === 'url' && (d.url instanceof URL || typeof d.url === 'string')) {
    return { type: 'image_url', image_url: { url: d.originalUrl ?? String(d.url instanceof URL ? d.url.href : d.url) } };
  }
  throw new UnsupportedFunctionalityError({ functionality: `an image given as '${d?.type ?? typeof d}' (wasmlm takes bytes, base64 and URLs)` });
}

function toMessages(prompt, warnings) {
  const out = [];
  for (const m of prompt) {
    switch (m.role) {
      case 'system':
        out.push({ role: 'system', content: m.content });
        break;
      case 'user': {
        const parts = m.content.map((p) => {
          if (p.type === 'text') return { type: 'text', text: p.text };
          if (p.type === 'file') return imageOf(p);
          throw new UnsupportedFunctionalityError({ functionality: `user content of type '${p.type}'` });
        });
        // text only: one string, as before; with images, the parts in order
        out.push({ role: 'user', content: parts.every((p) => p.type === 'text') ? parts.map((p) => p.text).join('') : parts });
        break;
      }
      case 'assistant': {
        let text = '';
        const calls = [];
        for (const p of m.content) {
          if (p.type === 'text') text += p.text;
          else if (p.type === 'tool-call') {
            calls.push({ id: p.toolCallId, type: 'function',
              function: { name: p.toolName, arguments: typeof p.input === 'string' ? p.input : JSON.stringify(p.input ?? {}) } });
          } else if (p.type === 'reasoning') {
            // earlier turns' reasoning is not shown to the model again (chat templates drop it)
          } else if (p.type === 'tool-result') {
            warnings.push({ type: 'other', message: 'a provider-executed tool result in an assistant message was left out' });
          } else {
            throw new UnsupportedFunctionalityError({ functionality: `assistant content of type '${p.type}'` });
          }
        }
        out.push({ role: 'assistant', content: calls.length && text === '' ? null : text, ...(calls.length ? { tool_calls: calls } : {}) });
        break;
      }
      case 'tool':
        for (const p of m.content) {
          if (p.type === 'tool-approval-response') continue; // approvals are the caller's; nothing to show the model
          out.push({ role: 'tool', tool_call_id: p.toolCallId, content: toolOutputText(p.output) });
        }
        break;
      default:
        throw new InvalidPromptError({ prompt, message: `unknown message role '${m.role}'` });
    }
  }
  return out;
}

// ---- call options → request ---------------------------------------------------------------

/** The chat-completions request of a call and the warnings for what it cannot honour. */
function toRequest(options, modelId, stream) {
  const warnings = [];
  const req = { model: modelId, messages: toMessages(options.prompt, warnings) };
  const set = (k, v) => { if (v !== undefined && v !== null) req[k] = v; };
  set('max_tokens', options.maxOutputTokens);
  set('temperature', options.temperature);
  set('top_p', options.topP);
  set('top_k', options.topK);
  set('presence_penalty', options.presencePenalty);
  set('frequency_penalty', options.frequencyPenalty);
  set('seed', options.seed);
  if (options.stopSequences?.length) req.stop = options.stopSequences;
  const tools = [];
  for (const t of options.tools ?? []) {
    if (t.type === 'function') {
      tools.push({ type: 'function', function: { name: t.name, ...(t.description ? { description: t.description } : {}),
        parameters: t.inputSchema ?? { type: 'object', properties: {} } } });
    } else {
      warnings.push({ type: 'unsupported', feature: `provider tool ${t.id ?? t.name}`, details: 'wasmlm runs function tools only' });
    }
  }
  if (tools.length) {
    req.tools = tools;
    const tc = options.toolChoice;
    if (tc?.type === 'tool') req.tool_choice = { type: 'function', function: { name: tc.toolName } };
    else if (tc) req.tool_choice = tc.type;
  }
  const rf = options.responseFormat;
  if (rf?.type === 'json') {
    if (tools.length && req.tool_choice !== 'none') {
      warnings.push({ type: 'unsupported', feature: 'responseFormat', details: 'JSON output cannot be combined with tools the model may call; the tools were kept' });
    } else {
      req.response_format = rf.schema
        // lenient: keywords the grammar cannot hold (minimum, format, …) are left to the
        // caller's validation (ai validates the object against its schema)
        ? { type: 'json_schema', json_schema: { schema: rf.schema, strict: false, ...(rf.name ? { name: rf.name } : {}) } }
        : { type: 'json_object' };
    }
  }
  if (options.reasoning && options.reasoning !== 'provider-default') {
    warnings.push({ type: 'unsupported', feature: 'reasoning', details: 'reasoning effort is not adjustable (a template variable such as enable_thinking may be: providerOptions.wasmlm.chat_template_kwargs)' });
  }
  // options.headers are ignored: there is no HTTP request (ai sends its own user-agent in them)
  // providerOptions.wasmlm: more request fields by their chat-completions names (top_k, min_p,
  // repeat_penalty, chat_template_kwargs, logprobs, …); unknown ones are errors naming them.
  Object.assign(req, options.providerOptions?.[PROVIDER] ?? {});
  if (stream) {
    req.stream = true;
    req.stream_options = { include_usage: true };
  }
  return { req, warnings };
}

/** Throws UnsupportedFunctionalityError when the request has images and the model no mmproj. */
function needVision(engine, req) {
  if (engine.info?.vision) return;
  if (req.messages.some((m) => Array.isArray(m.content) && m.content.some((p) => p.type === 'image' || p.type === 'image_url'))) {
    throw new UnsupportedFunctionalityError({
      functionality: 'image input: this model was loaded without its mmproj (wasmlm(model, { load: { mmproj: FILE } }))' });
  }
}

const FINISH = { stop: 'stop', length: 'length', tool_calls: 'tool-calls' };
const finishReason = (raw) => ({ unified: FINISH[raw] ?? 'other', raw: raw ?? undefined });

function usageOf(u) {
  const prompt = u?.prompt_tokens, cached = u?.prompt_tokens_details?.cached_tokens ?? 0;
  return {
    inputTokens: { total: prompt, noCache: prompt === undefined ? undefined : prompt - cached, cacheRead: prompt === undefined ? undefined : cached, cacheWrite: undefined },
    outputTokens: { total: u?.completion_tokens, text: u?.completion_tokens, reasoning: undefined },
    ...(u ? { raw: u } : {}),
  };
}

/**
 * A language model (LanguageModelV4) on a wasmlm engine.
 * @param {*} model  what Engine.load() takes as `model` (a path, URL, bytes, Blob, or split parts);
 *   null with options.engine an already loaded Engine
 * @param {{engine?: object, load?: object, modelId?: string}} [options]  engine: createEngine()'s
 *   options, or an Engine to use; load: load()'s options but `model`; modelId: the id reported
 */
class WasmlmLanguageModel {
  specificationVersion = 'v4';
  provider = PROVIDER;
  /** Image URLs handed to the engine as they are (it decodes data: URLs and fetches http(s) ones). */
  supportedUrls = { 'image/*': [/^data:image\//i, /^https?:\/\//i] };
  #engine;

  constructor(model, options) {
    this.modelId = modelIdOf(model, options);
    this.#engine = engineOf(model, options);
  }

  /** The Engine (created and loaded on first use). */
  engine() { return this.#engine(); }

  async doGenerate(options) {
    const { req, warnings } = toRequest(options, this.modelId, false);
    const engine = await this.#engine();
    needVision(engine, req);
    const r = await lockOf(engine)(() => engine.chatCompletion(req, { signal: options.abortSignal }));
    const choice = r.choices[0];
    const content = [];
    if (choice.message.reasoning_content) content.push({ type: 'reasoning', text: choice.message.reasoning_content });
    if (choice.message.content) content.push({ type: 'text', text: choice.message.content });
    for (const c of choice.message.tool_calls ?? []) {
      content.push({ type: 'tool-call', toolCallId: c.id, toolName: c.function.name, input: c.function.arguments });
    }
    if (choice.tool_call_error) warnings.push({ type: 'other', message: `tool call: ${choice.tool_call_error}` });
    return {
      content, finishReason: finishReason(choice.finish_reason), usage: usageOf(r.usage), warnings,
      request: { body: req },
      response: { id: r.id, timestamp: new Date(r.created * 1000), modelId: r.model, body: r },
    };
  }

  async doStream(options) {
    const { req, warnings } = toRequest(options, this.modelId, true);
    const engine = await this.#engine();
    needVision(engine, req);
    const signal = options.abortSignal;
    let release, acquired;
    const turn = new Promise((resolve) => { release = resolve; });
    const ours = new Promise((resolve) => { acquired = resolve; });
    lockOf(engine)(() => { acquired(); return turn; }); // the engine is this stream's until it ends
    await ours;
    let chunks;
    try {
      chunks = await engine.chatCompletion(req, { signal });
    } catch (err) {
      release();
      throw err;
    }
    const raw = !!options.includeRawChunks;
    let text = null, reasoning = null, finish, usage;
    const calls = new Map(); // index → {id, name, args}
    let cancelled = false;
    const stream = new ReadableStream({
      async start(controller) {
        const emit = (p) => { if (!cancelled) controller.enqueue(p); };
        emit({ type: 'stream-start', warnings });
        let first = true;
        const endCall = (c) => {
          emit({ type: 'tool-input-end', id: c.id });
          emit({ type: 'tool-call', toolCallId: c.id, toolName: c.name, input: c.args });
        };
        try {
          for await (const chunk of chunks) {
            if (cancelled) break; // ends the generation (the generator's return) before the engine is released
            if (raw) emit({ type: 'raw', rawValue: chunk });
            if (first) {
              emit({ type: 'response-metadata', id: chunk.id, timestamp: new Date(chunk.created * 1000), modelId: chunk.model });
              first = false;
            }
            if (chunk.usage) usage = chunk.usage;
            const ch = chunk.choices[0];
            if (!ch) continue;
            const d = ch.delta;
            if (d.reasoning_content) {
              if (reasoning === null) { reasoning = 'reasoning-0'; emit({ type: 'reasoning-start', id: reasoning }); }
              emit({ type: 'reasoning-delta', id: reasoning, delta: d.reasoning_content });
            }
            if (d.content) {
              if (reasoning) { emit({ type: 'reasoning-end', id: reasoning }); reasoning = false; }
              if (text === null) { text = 'text-0'; emit({ type: 'text-start', id: text }); }
              emit({ type: 'text-delta', id: text, delta: d.content });
            }
            for (const t of d.tool_calls ?? []) {
              let c = calls.get(t.index);
              if (!c) {
                for (const open of calls.values()) if (!open.ended) { endCall(open); open.ended = true; }
                c = { id: t.id, name: t.function?.name, args: '', ended: false };
                calls.set(t.index, c);
                emit({ type: 'tool-input-start', id: c.id, toolName: c.name });
              }
              if (t.function?.arguments) {
                c.args += t.function.arguments;
                emit({ type: 'tool-input-delta', id: c.id, delta: t.function.arguments });
              }
            }
            if (ch.finish_reason) {
              finish = ch.finish_reason;
              if (ch.tool_call_error) emit({ type: 'error', error: new Error(`tool call: ${ch.tool_call_error}`) });
            }
          }
          if (!cancelled) {
            if (reasoning) emit({ type: 'reasoning-end', id: reasoning });
            if (text) emit({ type: 'text-end', id: text });
            for (const c of calls.values()) if (!c.ended) endCall(c);
            emit({ type: 'finish', finishReason: finishReason(finish), usage: usageOf(usage) });
            controller.close();
          }
        } catch (err) {
          if (!cancelled) {
            if (err?.name === 'AbortError') controller.error(err);
            else { emit({ type: 'error', error: err }); controller.close(); }
          }
        } finally {
          release(); // the generation has ended (its finally ran): the engine is free
        }
      },
      cancel() { cancelled = true; },
    });
    return { stream, request: { body: req } };
  }
}

/** An embedding model (EmbeddingModelV4) on a wasmlm engine with an embedding model loaded. */
class WasmlmEmbeddingModel {
  specificationVersion = 'v4';
  provider = PROVIDER;
  /** Texts per call: Engine.embed passes any number (16 per forward pass); ai's embedMany splits by this. */
  maxEmbeddingsPerCall = 256;
  supportsParallelCalls = false;
  #engine;

  constructor(model, options) {
    this.modelId = modelIdOf(model, options);
    this.#engine = engineOf(model, options);
  }

  engine() { return this.#engine(); }

  async doEmbed({ values, dimensions, abortSignal }) {
    const warnings = [];
    const engine = await this.#engine();
    if (dimensions !== undefined && dimensions !== engine.info.embeddingLength) {
      warnings.push({ type: 'unsupported', feature: 'dimensions', details: `this model's embeddings have ${engine.info.embeddingLength} dimensions` });
    }
    return lockOf(engine)(async () => {
      let tokens = 0;
      for (const v of values) tokens += (await engine.tokenize(v, { bos: true })).length;
      const vectors = await engine.embed(values, { signal: abortSignal });
      return { embeddings: vectors.map((v) => Array.from(v)), usage: { tokens }, warnings };
    });
  }
}

/**
 * The provider: wasmlm(model, options?) is a language model; wasmlm.languageModel is the same;
 * wasmlm.textEmbeddingModel(model, options?) (also wasmlm.embeddingModel) an embedding model.
 * Other model kinds throw NoSuchModelError. See js/ai_sdk/index.d.ts.
 */
export function wasmlm(model, options = {}) {
  checkOptions(options, 'wasmlm()');
  return new WasmlmLanguageModel(model, options);
}
wasmlm.specificationVersion = 'v4';
wasmlm.languageModel = (model, options = {}) => wasmlm(model, options);
wasmlm.textEmbeddingModel = (model, options = {}) => {
  checkOptions(options, 'wasmlm.textEmbeddingModel()');
  return new WasmlmEmbeddingModel(model, options);
};
wasmlm.embeddingModel = wasmlm.textEmbeddingModel;
wasmlm.imageModel = (modelId) => { throw new NoSuchModelError({ modelId: String(modelId), modelType: 'imageModel' }); };
