// worker_engine.js — createWorkerEngine(): the client side of js/worker/worker.js. A WorkerEngine has
// the in-thread Engine's interface (wasmlm.d.ts) and turns each call into a request of
// js/worker/protocol.js, tokens and progress into callbacks and iterators, and the worker's errors
// back into WasmlmError / AbortError. To shorten the time to the first token it compiles the
// wasm module here, in the page, while the worker starts, and hands the WebAssembly.Module to
// the worker with the 'init' request (modules cross postMessage without being recompiled). In a
// browser it also constructs the worker's helper threads when the worker asks (js/worker/protocol.js
// Helper). It runs no inference: js/engine/engine.js does, inside the worker and its helpers.

import { abortError, deserializeError, jsError } from '../runtime/errors.js';
import { checkBatch, checkChat, checkOptions, lazily, rejecting } from '../options.js';
import { chatRequest } from '../chat/chat.js';
import { withReasoning } from '../chat/reasoning.js';
import { chatCompletion } from '../chat/chat_completion.js';
import { complete, completeBatch } from '../engine/engine.js';
import { IS_NODE, baseURI, mark } from '../runtime/platform.js';
import { Helper, PROTOCOL_VERSION, Req, Reply } from './protocol.js';
import { compilePlanned, planModule, settledPlan } from '../runtime/wasm.js';

/** Makes a load source cloneable and absolute (the worker has another base URL). */
function toTransferableSource(source) {
  if (Array.isArray(source)) return source.map(toTransferableSource); // a split GGUF's parts
  if (source instanceof URL) return source.href;
  if (typeof source === 'string') {
    const base = baseURI();
    return base && !IS_NODE ? new URL(source, base).href : source;
  }
  if (ArrayBuffer.isView(source) &&
      (source.byteOffset !== 0 || source.byteLength !== source.buffer.byteLength)) {
    return new Uint8Array(source.buffer, source.byteOffset, source.byteLength).slice();
  }
  return source; // ArrayBuffer, whole views and Blobs are cloned by postMessage
}

/**
 * Whether this page starts the worker's helper threads itself (js/worker/protocol.js Helper): wherever
 * it can construct module Workers (browsers; a Node client's worker starts its own).
 */
const HELPERS_FROM_PAGE = !IS_NODE && typeof Worker === 'function';

class WorkerEngine {
  #worker;
  #pending = new Map(); // id → {resolve, reject, onProgress, onToken}
  #nextId = 1;
  #failure = null;      // the Error that killed the worker, if any
  #freed = false;
  #info = null;
  #threads = 1;
  #helpers = new Map();     // key → the helper Worker this page started for the worker
  #firstTokenMarked = false; // 'wasmlm:first-token' is marked once per engine
  #warmup = null;            // the worker's warm-up ({tokens, ms}), as its last load reply said

  /** The result of the last generation, or null. */
  lastResult = null;

  /** The result of the last batch generation, or null. */
  lastBatchResult = null;

  /** The result of the last beam search, or null. */
  lastBeamResult = null;

  constructor(worker) {
    this.#worker = worker;
    worker.addEventListener('message', (e) => this.#onMessage(e.data));
    worker.addEventListener('error', (e) => {
      e.preventDefault?.();
      this.#fail(new Error(`wasmlm worker failed: ${e.message || e.error?.message || 'error event'}`));
    });
    worker.addEventListener('messageerror', () => {
      this.#fail(new Error('wasmlm worker: a message could not be deserialized'));
    });
  }

  /** The loaded model's info, or null. */
  get info() { return this.#info; }

  /** What the worker's warm-up did (see WorkerEngineOptions.warmup), known after a load(). */
  get warmup() { return this.#warmup; }

  /** Threads that run the matrix products in the worker (1: the worker's thread only). */
  get threads() { return this.#threads; }

  /** Starts the engine in `worker` (the 'init' request); terminates the worker on failure. */
  static async create(worker, options) {
    const engine = new WorkerEngine(worker);
    let wasm = options.wasm;
    if (wasm !== undefined && !(wasm instanceof WebAssembly.Module)) wasm = toTransferableSource(wasm);
    try {
      // The default module: pick and compile it here while the worker starts (the worker uses
      // it when it picks the same file, as it does unless it cannot start helper threads).
      let compiled;
      let { build } = options;
      if (wasm === undefined) {
        const plan = await planModule(options);
        const c = await compilePlanned(plan);
        settledPlan(plan, c);
        compiled = { file: plan.file, module: c.module };
        build = plan.build; // the page's probe decides (and a missing relaxed file's fallback)
      }
      const ready = await engine.#request(Req.INIT,
        { options: { wasm, simd: options.simd, threads: options.threads, warmup: options.warmup, build,
          dotForm: options.dotForm, readAhead: options.readAhead, backend: options.backend, gpuSubgroups: options.gpuSubgroups, gpuWeights: options.gpuWeights,
          memory64: options.memory64, helpersFromClient: HELPERS_FROM_PAGE },
          compiled }).promise;
      if (ready?.protocol !== PROTOCOL_VERSION) {
        throw new Error(`wasmlm: js/worker/worker.js speaks protocol ${ready?.protocol}, ` +
          `js/wasmlm.js ${PROTOCOL_VERSION}; serve both from the same version`);
      }
      engine.#threads = ready.threads ?? 1;
      mark('wasmlm:engine-ready');
    } catch (e) {
      worker.terminate();
      throw e;
    }
    return engine;
  }

  #fail(err) {
    this.#failure = err;
    for (const w of this.#helpers.values()) w.terminate();
    this.#helpers.clear();
    for (const p of this.#pending.values()) p.reject(err);
    this.#pending.clear();
  }

  /**
   * Starts or stops a helper thread the worker asked for (js/worker/protocol.js Helper): a module
   * Worker of this page, which the worker talks to through the MessagePort it sent.
   */
  #helper(msg) {
    if (msg.type === Helper.STOP) {
      this.#helpers.get(msg.key)?.terminate();
      this.#helpers.delete(msg.key);
      return;
    }
    const failed = (message) => this.#worker.postMessage({ type: Helper.ERROR, key: msg.key, message });
    if (this.#failure) return;
    try {
      const w = new Worker(msg.url, { type: 'module' });
      this.#helpers.set(msg.key, w);
      w.addEventListener('error', (e) => {
        e.preventDefault?.();
        failed(e.message || e.error?.message || 'error event');
      });
      w.postMessage({ port: msg.port }, [msg.port]);
    } catch (e) {
      failed(e?.message ?? String(e));
    }
  }

  #onMessage(msg) {
    if (msg?.type === Helper.START || msg?.type === Helper.STOP) {
      this.#helper(msg);
      return;
    }
    const p = this.#pending.get(msg?.id);
    if (!p) return;
    switch (msg.type) {
      case Reply.PROGRESS: p.onProgress?.(msg.progress); break;
      case Reply.TOKEN: p.onToken?.(msg.token, msg); break;
      case Reply.STEP: p.onStep?.(msg.step); break;
      case Reply.RESULT:
        this.#pending.delete(msg.id);
        if (msg.warmup !== undefined) this.#warmup = msg.warmup;
        p.resolve(msg.value);
        break;
      case Reply.ERROR:
        this.#pending.delete(msg.id);
        // An aborted generation / batch / beam search still has a summary: keep it.
        if (msg.lastResult) this.lastResult = msg.lastResult;
        if (msg.lastBatchResult) this.lastBatchResult = msg.lastBatchResult;
        if (msg.lastBeamResult) this.lastBeamResult = msg.lastBeamResult;
        p.reject(deserializeError(msg.error));
        break;
      default: break;
    }
  }

  /** Posts a request; returns {id, promise} where promise settles with the terminal reply. */
  #request(type, payload = {}, handlers = {}, transfer = []) {
    if (this.#freed) throw jsError('WLM_ERR_STATE', 'the engine has been freed');
    if (this.#failure) throw this.#failure;
    const id = this.#nextId++;
    const promise = new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject, ...handlers });
    });
    this.#worker.postMessage({ id, type, ...payload }, transfer);
    return { id, promise };
  }

  /** Request `id`'s answer (`promise`), the request aborted in the worker if `signal` fires first. */
  async #answer(id, promise, signal) {
    const onAbort = () => this.#abort(id);
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      return await promise;
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
  }

  #abort(target) {
    if (this.#freed || this.#failure) return;
    this.#request(Req.ABORT, { target }).promise.catch(() => {});
  }

  /** Same contract as the in-thread Engine.load (see wasmlm.d.ts). */
  async load(options = {}) {
    const { model, tokenizer, mmproj, nCtx = 0, kvCache = true, nSeqMax = 1, kvType = 'f16', onProgress, signal, backend } =
      checkOptions('load()', options, 'LoadOptions') ?? {};
    if (signal?.aborted) throw abortError('Loading');
    this.#info = null;
    const { id, promise } = this.#request(Req.LOAD, {
      model: toTransferableSource(model), tokenizer: toTransferableSource(tokenizer),
      mmproj: toTransferableSource(mmproj), nCtx, kvCache, nSeqMax, kvType, backend,
    }, { onProgress });
    this.#info = await this.#answer(id, promise, signal);
    mark('wasmlm:model-loaded');
    return this.#info;
  }

  /** Same contract as Engine.tokenize. */
  async tokenize(text, options = {}) {
    const { bos = true, parseSpecial = false } = checkOptions('tokenize()', options, 'TokenizeOptions') ?? {};
    return this.#request(Req.TOKENIZE, { text: String(text), options: { bos, parseSpecial } }).promise;
  }

  /** Same contract as Engine.imageTokens (the image travels to the worker, which decodes it). */
  async imageTokens(image, options = {}) {
    const { signal } = checkOptions('imageTokens()', options, 'CallOptions') ?? {};
    if (signal?.aborted) throw abortError('Measuring the image');
    const { id, promise } = this.#request(Req.IMAGE_TOKENS, { image });
    return this.#answer(id, promise, signal);
  }

  /** Same contract as Engine.detokenize. */
  async detokenize(ids) {
    return this.#request(Req.DETOKENIZE, { ids: Int32Array.from(ids) }).promise;
  }

  /** Same contract as Engine.jsonSchemaToGrammar (converted in the worker's module). */
  async jsonSchemaToGrammar(schema, options = {}) {
    const { strict = true } = checkOptions('jsonSchemaToGrammar()', options, 'GrammarOptions') ?? {};
    return this.#request(Req.JSON_SCHEMA_TO_GRAMMAR, { schema, options: { strict } }).promise;
  }

  /** Same contract as Engine.loadDraft: the draft model is loaded into the worker's engine. */
  async loadDraft(options) {
    if (options == null) return this.#request(Req.LOAD_DRAFT, { options: null }).promise;
    const { model, tokenizer, nCtx, onProgress, signal } = checkOptions('loadDraft()', options, 'DraftLoadOptions');
    if (signal?.aborted) throw abortError('Loading the draft model');
    const { id, promise } = this.#request(Req.LOAD_DRAFT, {
      options: { model: toTransferableSource(model), tokenizer: toTransferableSource(tokenizer), nCtx },
    }, { onProgress });
    return this.#answer(id, promise, signal);
  }

  /** Same contract as Engine.generate: tokens arrive one message each from the worker. */
  generate(prompt, params = {}, options = {}) {
    return lazily(() => this.#generate(prompt, params, options)); // checked on the first next()
  }

  #generate(prompt, params, options) {
    checkOptions('generate()', params, 'GenerateParams');
    const { signal } = checkOptions('generate()', options, 'CallOptions') ?? {};
    if (params?.draft?.model !== undefined) { // a relative URL resolves against the page, not the worker
      params = { ...params, draft: { ...params.draft, model: toTransferableSource(params.draft.model) } };
    }
    return this.#stream(Req.GENERATE, { prompt: String(prompt), params: params ?? {} }, signal,
      (v) => { this.lastResult = v; }, (t) => {
        if (!this.#firstTokenMarked && t.id >= 0) {
          this.#firstTokenMarked = true;
          mark('wasmlm:first-token');
        }
      });
  }

  /**
   * Same contract as Engine.chat. The template is rendered here, in the caller's thread (so a
   * page's import map resolves @huggingface/jinja), and the worker generates from the text.
   */
  async *chat(messages, params = {}, options = {}) {
    const { signal } = checkChat(params, options);
    if (!this.#info) throw jsError('WLM_ERR_STATE', 'no model loaded: call load() first');
    // image parts as media markers and images (Blobs, bytes and ImageBitmaps travel to the
    // worker, which decodes them), the template rendered, the cache checkpoint
    const { text, addBos, gen, stateCheckpoint, template } = await chatRequest(this.#info, this.tokenize.bind(this), messages, params);
    // a thinking model's reasoning apart (reasoning.js): each token's `reasoning` and `content`
    yield* withReasoning(this, template, text, this.generate(text, { cachePrompt: true, stateCheckpoint, ...gen, addBos, parseSpecial: true }, { signal }),
      (r) => { this.lastResult = { ...this.lastResult, ...r }; }, gen);
  }

  /**
   * OpenAI's chat completion (js/chat/chat_completion.js; ChatCompletionRequest in wasmlm.d.ts):
   * tools and tool_choice through the template's tool-call syntax and a grammar, sampling
   * fields, response_format; resolves to a ChatCompletion, or with `stream: true` to an async
   * iterable of ChatCompletionChunk. Unsupported fields are errors naming them.
   * @param {import('../wasmlm.d.ts').ChatCompletionRequest} request
   * @param {{signal?: AbortSignal}} [options]
   */
  chatCompletion(request, options = {}) {
    return rejecting(() => chatCompletion(this, request, { signal: (checkOptions('chatCompletion()', options, 'CallOptions') ?? {}).signal }));
  }

  /** Same contract as Engine.generateBatch: one message per BatchToken. */
  generateBatch(prompts, params = {}, options = {}) {
    return lazily(() => { // checked on the first next()
      const { signal } = checkBatch('generateBatch()', params, options, 'CallOptions');
      const list = typeof prompts === 'string' ? prompts : Array.from(prompts ?? [], String);
      return this.#stream(Req.GENERATE_BATCH, { prompts: list, params: params ?? {} }, signal,
        (v) => { this.lastBatchResult = v; });
    });
  }

  /**
   * Same contract as Engine.openBatch (ContinuousBatch in wasmlm.d.ts): the batch lives in the
   * worker; each add() is one request whose 'token' replies feed its BatchSequence (posted at
   * once, so the sequence joins whether or not it is read yet); cancel() aborts that request.
   * live, waiting and stats are the worker's as of the last message.
   */
  async openBatch(options = {}) {
    const { maxSequences, signal } = checkOptions('openBatch()', options, 'OpenBatchOptions') ?? {};
    if (signal?.aborted) throw abortError('The batch');
    const opened = await this.#request(Req.OPEN_BATCH, { options: { maxSequences } }).promise;
    const bid = opened.batch;
    let snap = { live: 0, waiting: 0, stats: { sequences: 0, steps: 0, maxLive: 0, tokens: 0 } };
    const update = (m) => { if (m?.stats) snap = { live: m.live, waiting: m.waiting, stats: m.stats }; };
    let closed = false;
    let closing = null;
    const close = () => {
      if (!closing) {
        closed = true;
        signal?.removeEventListener('abort', onAbort);
        closing = this.#freed || this.#failure ? Promise.resolve()
          : this.#request(Req.BATCH_CLOSE, { batch: bid }).promise.then(() => {});
      }
      return closing;
    };
    const onAbort = () => { close().catch(() => {}); };
    signal?.addEventListener('abort', onAbort, { once: true });
    const add = (prompt, params = {}, options = {}) => {
      const { signal: seqSignal } = checkOptions('add()', options, 'CallOptions') ?? {};
      if (closed) throw jsError('WLM_ERR_STATE', 'the batch is closed');
      const r = { stopReason: 'aborted', text: '', nPrompt: 0, nGenerated: 0, logprob: 0 };
      let slot = -1;
      const queue = [];
      let wake = null;
      let settled = false;
      let error = seqSignal?.aborted ? abortError('The generation') : null;
      let cancel = () => {};
      if (!error) {
        const { id, promise } = this.#request(Req.BATCH_ADD, { batch: bid, prompt: String(prompt), params: params ?? {} }, {
          onToken: (t, m) => {
            update(m);
            slot = t.seq;
            r.nPrompt = m.nPrompt;
            r.text += t.text;
            if (t.stopReason) r.stopReason = t.stopReason;
            else { r.nGenerated++; r.logprob += t.logprob; }
            queue.push(t);
            wake?.();
          },
        });
        promise.then((v) => { update(v); Object.assign(r, v.result); }, (e) => { error = e; })
          .finally(() => { settled = true; seqSignal?.removeEventListener('abort', cancel); wake?.(); });
        cancel = () => { if (!settled) this.#abort(id); };
        seqSignal?.addEventListener('abort', cancel, { once: true });
      } else {
        settled = true;
      }
      return {
        async *[Symbol.asyncIterator]() {
          for (;;) {
            if (queue.length) { yield queue.shift(); continue; }
            if (settled) break;
            await new Promise((res) => { wake = res; });
            wake = null;
          }
          if (error) throw error;
        },
        cancel: () => cancel(),
        get slot() { return slot; },
        get result() { return { ...r }; },
      };
    };
    return {
      add, close,
      get live() { return snap.live; },
      get waiting() { return snap.waiting; },
      get maxSequences() { return opened.maxSequences; },
      get stats() { return { ...snap.stats }; },
    };
  }

  /**
   * A request whose 'token' replies are yielded as they arrive; `onResult` receives the value
   * of its 'result' reply.
   */
  async *#stream(type, payload, signal, onResult, onToken = null) {
    if (signal?.aborted) throw abortError('The generation');
    const queue = [];
    let wake = null;
    let settled = false;
    let value;
    let error;
    const { id, promise } = this.#request(type, payload, {
      onToken: (t) => { onToken?.(t); queue.push(t); wake?.(); },
    });
    promise.then((v) => { value = v; }, (e) => { error = e; })
      .finally(() => { settled = true; wake?.(); });
    const onAbort = () => { this.#abort(id); wake?.(); };
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      for (;;) {
        if (signal?.aborted) throw abortError('The generation');
        if (queue.length) { yield queue.shift(); continue; }
        if (settled) break;
        await new Promise((r) => { wake = r; });
        wake = null;
      }
      if (error) throw error;
      onResult(value);
    } finally {
      signal?.removeEventListener('abort', onAbort);
      if (settled && value) onResult(value); // ended in the worker; consumer left early
      if (!settled) {
        // Abort or early break: stop the worker's generation and wait for it to end, so the
        // next request does not find the worker engine busy.
        this.#abort(id);
        await promise.catch(() => {});
      }
    }
  }

  /** Same contract as Engine.complete. */
  async complete(prompt, params = {}, options = {}) {
    return complete(this, prompt, params, options);
  }

  /** Same contract as Engine.completeBatch. */
  async completeBatch(prompts, params = {}, options = {}) {
    return completeBatch(this, prompts, params, options);
  }

  /** Same contract as Engine.beamSearch; onStep is called per 'step' message. */
  async beamSearch(prompt, params = {}, options = {}) {
    checkOptions('beamSearch()', params, 'BeamParams');
    const { signal, onStep } = checkOptions('beamSearch()', options, 'BeamSearchOptions') ?? {};
    if (signal?.aborted) throw abortError('The beam search');
    const { id, promise } = this.#request(Req.BEAM_SEARCH, { prompt: String(prompt), params: params ?? {} },
      { onStep });
    this.lastBeamResult = await this.#answer(id, promise, signal);
    return this.lastBeamResult;
  }

  /** Same contract as Engine.embed (abort through options.signal). */
  async embed(texts, allOptions = {}) {
    const { signal, ...options } = checkOptions('embed()', allOptions, 'EmbedOptions') ?? {};
    return this.#abortable(Req.EMBED, { texts: typeof texts === 'string' ? texts : Array.from(texts ?? [], String), options }, signal);
  }

  /** Same contract as Engine.rerank (abort through options.signal). */
  async rerank(query, documents, allOptions = {}) {
    const { signal, ...options } = checkOptions('rerank()', allOptions, 'CallOptions') ?? {};
    return this.#abortable(Req.RERANK, { query: String(query), documents: Array.from(documents ?? [], String), options }, signal);
  }

  /** A request that an AbortSignal aborts in the worker. */
  async #abortable(type, payload, signal) {
    if (signal?.aborted) throw abortError('The request');
    const { id, promise } = this.#request(type, payload);
    return this.#answer(id, promise, signal);
  }

  /** Same contract as Engine.kvStats. */
  async kvStats() {
    return this.#request(Req.KV_STATS).promise;
  }

  /** Same contract as Engine.previewDistribution. */
  async previewDistribution(params = {}) {
    return this.#request(Req.PREVIEW, { params: params ?? {} }).promise;
  }

  /** Frees the model in the worker and terminates the worker. Further calls reject. */
  async free() {
    if (this.#freed) return;
    try {
      if (!this.#failure) await this.#request(Req.FREE).promise;
    } finally {
      this.#freed = true;
      this.#info = null;
      this.#worker.terminate();
      this.#fail(jsError('WLM_ERR_STATE', 'the engine has been freed'));
    }
  }
}

/**
 * Creates an engine running in a module Web Worker (js/worker/worker.js), with the same interface as
 * createEngine(). Needs Web Workers (browsers), unless options.worker provides a Worker-like
 * object (postMessage, addEventListener('message'|'error'), terminate) running js/worker/worker.js.
 * @param {import('../wasmlm.d.ts').WorkerEngineOptions} [options]
 * @returns {Promise<import('../wasmlm.d.ts').Engine>}
 */
export async function createWorkerEngine(options = {}) {
  checkOptions('createWorkerEngine()', options, 'WorkerEngineOptions');
  let worker = options.worker;
  if (!worker) {
    if (typeof Worker !== 'function') {
      throw new Error('wasmlm: createWorkerEngine() needs Web Workers (a browser); ' +
        'in Node use createEngine()');
    }
    worker = new Worker(new URL('./worker.js', import.meta.url), { type: 'module' });
  }
  return WorkerEngine.create(worker, options);
}
