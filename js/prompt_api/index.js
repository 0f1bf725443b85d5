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

// The parts: errors.js (the spec's errors), shared_engine.js (configure() and the one engine),
// inputs.js (options and prompts checked and canonicalized); this file, the events and
// LanguageModel itself.

import { chatCompletionPrompt } from '../chat/chat_completion.js';
import { ModelCache } from '../models/cache.js';
import { MEDIA_MARKER, extractImages } from '../vision/vision.js';
import { domError, quotaError, specError, abortReason, anySignal } from './errors.js';
import { MODELS, PARAM_KEYS, IS_NODE, config, runtime, configure, visionConfigured, cacheableUrl, getRuntime, enqueue } from './shared_engine.js';
import { SAMPLING_MODES, dictionary, signalOption, expectedTypes, canonicalize, chatMessage, joinRuns, mediaPositions, constraintOf,
  withHint, createCoreOptions, optionsAvailability, schemaGrammar, checkValue, asyncIterable } from './inputs.js';

export { MODELS, DEFAULT_MODEL, configure } from './shared_engine.js';

/** Tool-call rounds of one prompt before the model must answer without tools. */
const MAX_TOOL_ROUNDS = 8;

/** LanguageModelParams: the sampler's defaults and limits (Chrome reports the same numbers). */
const PARAMS = Object.freeze({ defaultTopK: 3, maxTopK: 128, defaultTemperature: 1, maxTemperature: 2 });

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
