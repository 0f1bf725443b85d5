// engine.js — the in-thread engine: createEngine() starts the wasm module (js/runtime/runtime.js: plan,
// compile, instantiate, helper threads) and returns an Engine whose methods (load, tokenize,
// generate, chat, chatCompletion, …; see wasmlm.d.ts) call the C API of src/wasmlm.h through
// the module's exports. Operations that stand on their own live beside it: one sequence's
// generation (js/engine/generate.js), batches and beam search (js/engine/batch.js) and embeddings
// (js/engine/embed.js), and the vision model with the images it encoded (js/engine/media.js), on
// the handles the engine lends (#lend); token ids and text of the loaded model
// (js/engine/tokens.js); OpenAI's chat completions (js/chat/chat_completion.js), speculative decoding
// (js/engine/speculative.js), the int8 dot form (js/runtime/dot_form.js), the memory64 choice
// (js/runtime/memory64.js), the GPU backend (js/backend/). It does not parse model files or sample
// tokens: C does all that; this file moves bytes and strings across the boundary and turns
// statuses into errors (C's field names rewritten to the caller's by js/engine/params.js).
//
// Memory rule: any call into wasm may grow memory, which detaches memory.buffer. Views of
// wasm memory are created right before use and never kept across such a call. With threads the
// memory is a SharedArrayBuffer, which TextDecoder refuses in browsers: bytes handed to it go
// through unshared() first.

import { WasmlmError, abortError, jsError } from '../runtime/errors.js';
import { checkBatch, checkChat, checkOptions, lazily, rejecting } from '../options.js';
import { contextParams, genParamsSpec, grammarSpec, jsNames, MAX_SEQ, utf8 } from './params.js';
import { chatRequest } from '../chat/chat.js';
import { withReasoning } from '../chat/reasoning.js';
import { chatCompletion } from '../chat/chat_completion.js';
import { embed, embedInfo, rerank } from './embed.js';
import { ContinuousBatch, beamSearch, generateBatch } from './batch.js';
import { mark } from '../runtime/platform.js';
import { openSource, readIntoHeap } from '../models/source.js';
import { draftKey } from './speculative.js';
import { generate } from './generate.js';
import { metaString, ModelText, unshared } from './tokens.js';
import { openModel } from '../models/split.js';
import { stopThreads } from '../runtime/threads.js';
import {
  chooseMemory, chooseMemoryForAuto, draftBytes, fitDraft, lowHeapBytes, modelBytes, peekModelHeader, visionBytes,
} from '../runtime/memory64.js';
import { moduleBuild } from '../runtime/wasm.js';
import { DOT_FORMS, dotFormAtStart, pickDotForm } from '../runtime/dot_form.js';
import { checkReadAhead, ReadAheadTuner } from '../runtime/read_ahead.js';
import { startRuntime } from '../runtime/runtime.js';
import { attachBackend, autoWouldUseGpu, checkBackendOption, streamToGpu } from '../backend/select.js';
import { GPU_PROFILE } from '../backend/webgpu/forward.js';
import { EngineMedia, peekMmproj } from './media.js';


class Engine {
  #x;            // wasm exports; null once freed
  #simd;
  #nThreads;     // threads the engine uses (1: this thread only)
  #threads = null;         // {n, pool, helpers, stacks} from startThreads once they all run
  #threadsStarting = null; // startThreads' promise while the helpers start
  #threadsError = null;    // why they could not start: later calls reject with it
  #model = 0;    // wlm_model*
  #ctx = 0;      // wlm_context*
  #busy = null;  // 'load' | 'generate' | 'batch generation' | 'beam search' while one runs
  #gen = null;   // the generation in progress (identity token)
  #info = null;
  #build;
  #readAhead;    // ReadAheadTuner (js/runtime/read_ahead.js): the kernels' read-ahead, timed per load
  #dot;          // {form, formBatch: 'fused' | 'split' | 'none' | 'auto', probe}: dotFormAtStart, then
                 // (for 'auto') pickDotForm at the first load
  #ctxParams = null; // {nCtx, kvCache, nSeqMax} of the current context (recreated when a batch
                     // or a beam search needs more sequences)
  #text = null;      // the loaded model's ModelText (js/engine/tokens.js): tokenize, pieces, strings
  #previewPrev;      // the token before the last one sequence 0 drew (for the alternatives'
                     // text), or undefined when no generation has drawn one on this context
  #firstTokenMarked = false; // 'wasmlm:first-token' is marked once per engine
  #paramGrammar = new Map(); // wlm_gen_params* → the malloc'd grammar text it points at
  #lent = null;      // the handles lent to generate.js, batch.js, embed.js and media.js (#lend)
  #backendOpt;   // {backend, gpu, useSubgroups, gpuWeights, profile}: EngineOptions.backend / gpu / gpuSubgroups / gpuWeights, [GPU_PROFILE]
  #gpu = null;       // the WebGpuBackend running the loaded model's forward pass, or null (CPU)
  #draft = null;     // the draft model of speculative decoding: {model, ctx, key, info} (loadDraft)
  #need = null;      // the loaded model's wasm memory at most (js/runtime/memory64.js modelBytes, at
                     // load), which loadDraft fits the draft beside
  #options = null;   // createEngine's options, to start the other module (memory64 at load())
  #media = new EngineMedia(this.#lend()); // the mmproj and the images it encoded (js/engine/media.js)

  /** The result of the last generation, or null. See LastResult in wasmlm.d.ts. */
  lastResult = null;

  /** The result of the last batch generation, or null. See BatchResult in wasmlm.d.ts. */
  lastBatchResult = null;

  /** The result of the last beam search, or null. See BeamResult in wasmlm.d.ts. */
  lastBeamResult = null;

  /**
   * `threadsStarting`: the promise of startThreads() for `nThreads` > 1, or null. The helpers
   * start in the background (while the caller fetches and loads its model): each forward pass
   * that begins after they all run gets the pool (#syncPool); one that begins earlier runs on
   * this thread, with bitwise the same results. If they fail, later calls reject with why.
   * `build`: the module's kernels ('relaxed', 'simd128', 'scalar'), for ModelInfo.build.
   * `dot`: the relaxed build's int8 dot forms, {form, formBatch, probe} of dotFormAtStart().
   * The last argument: EngineOptions (backend, gpu, gpuSubgroups: every load()'s backend;
   * memory64, wasm: which module load() moves to).
   */
  constructor(x, simd, nThreads, threadsStarting, build = simd ? 'simd128' : 'scalar',
    dot = { form: 'none', probe: null }, options = {}) {
    this.#options = options;
    this.#readAhead = new ReadAheadTuner(checkReadAhead(options?.readAhead));
    const { backend = 'auto', gpu = null, gpuSubgroups = true, gpuWeights = 'stream' } = options ?? {};
    this.#backendOpt = { backend, gpu, useSubgroups: gpuSubgroups !== false, gpuWeights, profile: options?.[GPU_PROFILE] ?? null };
    this.#build = build;
    this.#dot = dot;
    this.#x = x;
    this.#simd = simd;
    this.#nThreads = nThreads;
    if (threadsStarting) {
      this.#threadsStarting = threadsStarting.then((t) => {
        if (this.#x === x) this.#threads = t;
        else stopThreads(x, t); // freed meanwhile
      }, (e) => { this.#threadsError = e; });
    }
  }

  /** The loaded model's info, or null. */
  get info() { return this.#info; }

  /** Threads that run the matrix products (1: this thread only). */
  get threads() { return this.#nThreads; }

  /** Resolves once the helper threads run (at once with one thread); rejects with why they
   *  could not start. */
  get threadsReady() {
    if (!this.#threadsStarting) return Promise.resolve();
    return this.#threadsStarting.then(() => { if (this.#threadsError) throw this.#threadsError; });
  }

  /** Current size of the module's linear memory in bytes (0 once freed). */
  get wasmMemoryBytes() { return this.#x ? this.#x.memory.buffer.byteLength : 0; }

  // ---- helpers ----

  /**
   * The engine's handles lent to the files that hold some of its operations (js/engine/generate.js:
   * generate; js/engine/batch.js: generateBatch, beamSearch; js/engine/embed.js: embed, rerank): the module's
   * exports, the context, the busy / generation marks and the helpers they need, live
   * (getters), one object per engine. Not part of the API.
   */
  #lend() {
    const e = this;
    return (this.#lent ??= {
      get x() { return e.#x; },
      get ctx() { return e.#ctx; },
      get info() { return e.#info; },
      get gpu() { return e.#gpu; },
      get gen() { return e.#gen; },
      set gen(v) { e.#gen = v; },
      get busy() { return e.#busy; },
      set busy(v) { e.#busy = v; },
      set previewPrev(v) { e.#previewPrev = v; },
      get draft() { return e.#draft; },
      get readAhead() { return e.#readAhead; },
      get firstTokenMarked() { return e.#firstTokenMarked; },
      set firstTokenMarked(v) { e.#firstTokenMarked = v; },
      applyReadAhead: () => e.#applyReadAhead(),
      needModel: () => e.#needModel(),
      needIdle: (what) => e.#needIdle(what),
      ctxError: (rc) => e.#ctxError(rc),
      syncPool: () => e.#syncPool(),
      ensureSeqMax: (n) => e.#ensureSeqMax(n),
      supply: () => e.#supply(),
      genParams: (params) => e.#genParams(params),
      freeParams: (p, x) => e.#freeParams(p, x),
      readToken: (tok, decoder, prev) => e.#text.readToken(tok, decoder, prev),
      heapInt32: (ids) => e.#heapInt32(ids),
      grammarText: (spec) => e.#grammarText(spec),
      cstring: (text) => e.#cstring(text),
      decodeIds: (ids, prev) => e.#text.decodeIds(ids, prev),
      tokenize: (text, options) => e.tokenize(text, options),
      tokenizePair: (query, doc) => e.#text.tokenizePair(query, doc),
      get pool() { return e.#threads?.pool ?? 0; },
      get simd() { return e.#simd; },
      readCString: (ptr) => e.#readCString(ptr),
      error: (rc, message) => e.#error(rc, message),
      get vision() { return e.#media.handle; },
      encodeImages: (images, signal) => e.#media.encode(images, signal),
      beginMedia: (prompt, promptPtr, enc, paramsPtr, cachePrompt) => e.#media.begin(prompt, promptPtr, enc, paramsPtr, cachePrompt),
    });
  }

  #exports() {
    if (!this.#x) throw jsError('WLM_ERR_STATE', 'the engine has been freed');
    return this.#x;
  }

  #u8() { return new Uint8Array(this.#x.memory.buffer); }

  #readCString(ptr) {
    ptr >>>= 0;
    if (!ptr) return '';
    const mem = this.#u8();
    const end = mem.indexOf(0, ptr);
    return new TextDecoder().decode(unshared(mem.subarray(ptr, end < 0 ? mem.length : end)));
  }

  #i32(ptr) { return new DataView(this.#x.memory.buffer).getInt32(ptr, true); }

  /** malloc'd, NUL-terminated UTF-8 copy of `text`; the caller frees it. */
  #cstring(text) {
    const bytes = utf8(text);
    const p = this.#x.wlmjs_malloc(bytes.length + 1) >>> 0;
    if (!p) throw jsError('WLM_ERR_NOMEM', 'cannot allocate a string in wasm memory');
    const mem = this.#u8();
    mem.set(bytes, p);
    mem[p + bytes.length] = 0;
    return p;
  }

  /** A C error as WasmlmError: the handle's message, or the status name when it has none. */
  #error(rc, message) {
    const code = this.#readCString(this.#x.wlm_status_name(rc)) || `status ${rc}`;
    return new WasmlmError(message ? jsNames(message) : code, code, rc);
  }

  #ctxError(rc) { return this.#error(rc, this.#readCString(this.#x.wlm_context_errmsg(this.#ctx))); }

  #needModel() {
    this.#exports();
    if (!this.#model) throw jsError('WLM_ERR_STATE', 'no model loaded: call load() first');
  }

  #needIdle(what) {
    if (this.#busy) {
      throw jsError('WLM_ERR_STATE', `cannot ${what} while a ${this.#busy} is in progress` +
        (this.#busy !== 'load' ? ' (finish, abort or break out of it first)' : ''));
    }
  }

  #unload() {
    const x = this.#x;
    this.#gpu?.release();
    this.#gpu = null;
    this.#unloadDraft();
    if (this.#ctx) x.wlm_context_free(this.#ctx);
    if (this.#model) x.wlm_model_free(this.#model);
    this.#media.unload(x);
    this.#ctx = 0;
    this.#model = 0;
    this.#info = null;
    this.#ctxParams = null;
    this.#need = null;
    this.#text?.free();
    this.#text = null;
    this.#previewPrev = undefined;
  }

  /**
   * Before a forward pass: rejects if the helper threads could not start, and gives the context
   * the pool once they all run (a pointer set, so it is simply done each time).
   */
  #syncPool() {
    if (this.#threadsError) throw this.#threadsError;
    if (this.#threads && this.#ctx) {
      const rc = this.#x.wlm_context_set_threadpool(this.#ctx, this.#threads.pool);
      if (rc !== 0) throw this.#ctxError(rc);
      if (this.#draft) this.#x.wlm_context_set_threadpool(this.#draft.ctx, this.#threads.pool);
    }
  }

  /** Creates a context for the loaded model (wlmjs_context_new); returns the handle. */
  #newContext(model, { nCtx, kvCache, nSeqMax, kvTypeId, deferred = false }) {
    const x = this.#x;
    const slot = x.wlmjs_malloc(4) >>> 0;
    if (!slot) throw jsError('WLM_ERR_NOMEM', 'cannot allocate 4 bytes');
    try {
      new DataView(x.memory.buffer).setInt32(slot, 0, true);
      // kv_cache 2: a deferred context for the GPU backend (K/V on the GPU, none here)
      const rc = x.wlmjs_context_new(model, nCtx, deferred ? 2 : kvCache ? 1 : 0, this.#simd ? 1 : 0, nSeqMax, kvTypeId,
        this.#dot.form === 'split' ? DOT_FORMS.split : DOT_FORMS.fused,
        this.#dot.formBatch === 'split' ? DOT_FORMS.split : DOT_FORMS.fused, slot);
      const ctx = this.#i32(slot) >>> 0;
      const rc2 = rc === 0 && this.#threads ? x.wlm_context_set_threadpool(ctx, this.#threads.pool) : 0;
      if (rc === 0 && typeof x.wlm_context_set_read_ahead === 'function') x.wlm_context_set_read_ahead(ctx, this.#readAhead.current ? 1 : 0);
      if (rc !== 0 || rc2 !== 0) { // (the pool's attention scratch may not fit)
        const err = this.#error(rc || rc2, this.#readCString(x.wlm_context_errmsg(ctx)));
        x.wlm_context_free(ctx);
        const weights = x.wlmjs_model_info(model, 11);
        if (err.code === 'WLM_ERR_NOMEM' && weights >= 2 ** 30) { // a big model: say what is full
          err.message += ` — the model (${(weights / 1e9).toFixed(2)} GB of weights) is too large for the 4 GB wasm32 ` +
            `memory with this context${nCtx ? ` (nCtx ${nCtx})` : ''}; a smaller nCtx or a smaller quantization may fit`;
        }
        throw err;
      }
      return ctx;
    } finally {
      x.wlmjs_free(slot);
    }
  }

  /**
   * Makes sure the context holds at least `n` sequences, recreating it when it holds fewer
   * (the context is idle between generations, so nothing is lost). The old one is freed first,
   * so the KV cache never exists twice; if the new one cannot be made, the old size is restored
   * and the error thrown. Requests above WLM_MAX_SEQ are left for C to refuse. With the GPU
   * backend the context is a deferred one and the backend rebuilds its cache for n sequences
   * (WebGpuBackend.resize).
   */
  async #ensureSeqMax(n) {
    const cur = this.#ctxParams;
    if (!(n > cur.nSeqMax && n <= MAX_SEQ)) return;
    const x = this.#x;
    const deferred = this.#gpu !== null;
    x.wlm_context_free(this.#ctx);
    this.#ctx = 0;
    this.#previewPrev = undefined;
    try {
      this.#ctx = this.#newContext(this.#model, { ...cur, nSeqMax: n, deferred });
      if (deferred) await this.#gpu.resize(this.#ctx);
      this.#ctxParams = { ...cur, nSeqMax: n };
    } catch (e) {
      if (this.#ctx) x.wlm_context_free(this.#ctx);
      this.#ctx = this.#newContext(this.#model, { ...cur, deferred }); // fits: it did a moment ago
      if (deferred) await this.#gpu.resize(this.#ctx);
      throw e;
    }
  }

  /** A malloc'd int32 array holding `ids`; the caller frees it. */
  #heapInt32(ids) {
    const p = this.#x.wlmjs_malloc(Math.max(1, ids.length) * 4) >>> 0;
    if (!p) throw jsError('WLM_ERR_NOMEM', `cannot allocate ${ids.length} int32 in wasm memory`);
    new Int32Array(this.#x.memory.buffer, p, ids.length).set(ids);
    return p;
  }

  /**
   * JSON Schema text → GBNF with the C converter (wlm_json_schema_to_grammar): {grammar,
   * warnings} (warnings: what lenient mode ignored). Throws WasmlmError (INVALID_ARG,
   * UNSUPPORTED) whose message names the schema's line, column and JSON pointer.
   */
  #convertSchema(text, strict) {
    const x = this.#exports();
    const MSG = 1024;
    const sp = this.#cstring(text);
    const slots = x.wlmjs_malloc(8 + MSG) >>> 0; // char **out, size_t *len, then msg
    if (!slots) {
      x.wlmjs_free(sp);
      throw jsError('WLM_ERR_NOMEM', 'cannot allocate the schema conversion');
    }
    try {
      const rc = x.wlm_json_schema_to_grammar(sp, utf8(text).length, strict ? 0 : 1, slots, slots + 4,
        slots + 8, MSG);
      const msg = this.#readCString(slots + 8);
      if (rc !== 0) throw this.#error(rc, `jsonSchema: ${msg}`);
      const out = this.#i32(slots) >>> 0;
      const grammar = this.#readCString(out);
      x.wlmjs_free(out);
      return { grammar, warnings: msg ? msg.split('; ') : [] };
    } finally {
      x.wlmjs_free(slots);
      x.wlmjs_free(sp);
    }
  }

  /** The GBNF text of a grammarSpec (js/engine/params.js), or null. */
  #grammarText(spec) {
    if (!spec) return null;
    return spec.gbnf ?? this.#convertSchema(spec.schema, spec.strict).grammar;
  }

  /**
   * JSON Schema → the GBNF grammar generate() would use for it (src/wasmlm.h,
   * wlm_json_schema_to_grammar, lists the supported keywords). `strict: false` ignores
   * unsupported keywords instead of throwing, and lists them in `warnings`.
   * @param {object|boolean|string} schema
   * @param {{strict?: boolean}} [options]
   * @returns {Promise<{grammar: string, warnings: string[]}>}
   */
  async jsonSchemaToGrammar(schema, options = {}) {
    const { strict = true } = checkOptions('jsonSchemaToGrammar()', options, 'GrammarOptions') ?? {};
    this.#exports();
    const spec = grammarSpec({ jsonSchema: schema, jsonSchemaStrict: strict });
    if (!spec) throw jsError('WLM_ERR_INVALID_ARG', 'jsonSchemaToGrammar(): no schema');
    return this.#convertSchema(spec.schema, spec.strict);
  }

  // ---- public API ----

  /**
   * Loads a model and its tokenizer, replacing (first freeing) any model loaded before.
   * Model bytes are streamed straight into a wasm heap buffer the model then owns.
   * On error nothing stays allocated and the engine can load again.
   * @param {import('../wasmlm.d.ts').LoadOptions} options
   * @returns {Promise<import('../wasmlm.d.ts').ModelInfo>}
   */
  async load(options = {}) {
    const { model, tokenizer, mmproj, nCtx, kvCache, nSeqMax, kvType, onProgress, signal, backend } =
      checkOptions('load()', options, 'LoadOptions') ?? {};
    let x = this.#exports();
    this.#needIdle('load a model');
    if (model == null) throw jsError('WLM_ERR_INVALID_ARG', 'load(): `model` is required');
    checkBackendOption(backend);
    const ctxParams = contextParams({ nCtx, kvCache, nSeqMax, kvType });
    this.#busy = 'load';
    this.#unload();
    this.#readAhead.reset(); // timed again for this model (its weights may fit the caches or not)
    let modelPtr = 0; // heap bytes not yet owned by a model
    let tokPtr = 0;
    let model_ = 0;
    let slot = 0;
    let mm = null; // the mmproj opened and its header peeked: sized with the model, read after it
    const read = async (source, stage, lowBytes = 0) => {
      try {
        return await readIntoHeap(x, source, stage, onProgress, signal, lowBytes);
      } catch (e) {
        // fetch rejects with signal.reason, which may be anything: report an AbortError.
        if (signal?.aborted && e?.name !== 'AbortError') throw abortError(`Loading the ${stage}`);
        throw e;
      }
    };
    try {
      // wasm32 while the model fits its 4 GB, else the memory64 module (js/runtime/memory64.js); with
      // backend 'webgpu' a GGUF's weights go to the GPU, not the heap (js/backend/webgpu/load.js)
      const useBackend = backend ?? this.#backendOpt.backend ?? 'auto';
      if (mmproj != null) mm = await peekMmproj(mmproj, signal);
      const streamable = tokenizer == null && this.#backendOpt.gpuWeights !== 'heap';
      const gpuStream = streamable && (useBackend === 'webgpu' || (useBackend === 'auto' ? 'auto' : false));
      let { source, lowBytes, gpuFirst, probed, need, onGpu } = await this.#fitModule(model, ctxParams, signal, gpuStream, mm);
      x = this.#x;
      const toGpu = () => streamToGpu({
        x, source, kvType: ctxParams.kvType, kvCache: ctxParams.kvCache, memory64: x.memory64 === true,
        ...this.#backendOpt, backend: useBackend, probed, onProgress, signal,
        newContext: (m) => this.#newContext(m, { ...ctxParams, deferred: true }),
        freeContext: (c) => x.wlm_context_free(c),
        modelError: (rc, m) => this.#error(rc, this.#readCString(x.wlm_model_errmsg(m))),
      }).catch(async (e) => {
        await source.close();
        // fetch rejects with signal.reason, which may be anything: report an AbortError.
        if (signal?.aborted && e?.name !== 'AbortError') throw abortError('Loading the model');
        throw e;
      });
      let gs = tokenizer == null ? await toGpu() : null;
      if (gpuFirst && gs?.cpu) {
        // 'auto' kept wasm32 for the GPU, which refused the model before reading its weights:
        // the CPU after all, in the module it needs there (memory64), the source opened again
        await source.close();
        try {
          ({ source, lowBytes, need } = await this.#fitModule(model, ctxParams, signal, false, mm));
        } catch (e) {
          if (e instanceof WasmlmError && e.code === 'WLM_ERR_NOMEM') e.message += `; nor does the GPU take it (${gs.cpu.reason})`;
          throw e;
        }
        x = this.#x;
        gs = { cpu: { ...gs.cpu, reason: `${gs.cpu.reason}; on the CPU it needs the ${x.memory64 ? 'memory64 module' : 'wasm32 module'}` } };
      }
      if (gs?.model) model_ = gs.model;
      else {
        const m = await read(source, 'model', lowBytes);
        modelPtr = m.ptr;
        // GGUF files carry their vocabulary; llama2.c checkpoints need a tokenizer.bin.
        const t = tokenizer == null ? null : await read(tokenizer, 'tokenizer');
        tokPtr = t ? t.ptr : 0;
        if (!this.#x) throw jsError('WLM_ERR_STATE', 'the engine was freed during load()');
        if (this.#threadsError) throw this.#threadsError;

        slot = x.wlmjs_malloc(4) >>> 0;
        if (!slot) throw jsError('WLM_ERR_NOMEM', 'cannot allocate 4 bytes');
        new DataView(x.memory.buffer).setInt32(slot, 0, true);
        const ptr = modelPtr;
        modelPtr = 0; // owned by wlmjs_model_load from here, freed by it on failure too
        let rc = x.wlmjs_model_load(ptr, m.size, slot);
        model_ = this.#i32(slot) >>> 0;
        if (rc !== 0) throw this.#error(rc, this.#readCString(x.wlm_model_errmsg(model_)));

        if (t) { // refused (WLM_ERR_STATE) when the model file has its own vocabulary
          rc = x.wlm_model_load_tokenizer(model_, tokPtr, t.size);
          x.wlmjs_free(tokPtr);
          tokPtr = 0;
          if (rc !== 0) throw this.#error(rc, this.#readCString(x.wlm_model_errmsg(model_)));
        } else if (x.wlmjs_model_info(model_, 8) !== 1) {
          throw jsError('WLM_ERR_TOKENIZER',
            'load(): this model file has no vocabulary: pass `tokenizer` (a llama2.c tokenizer.bin)');
        }
      }

      if (this.#dot.form === 'auto') this.#dot = pickDotForm(x); // timed once, here (see there)
      const be = gs?.be ?? await attachBackend({
        x, model: model_, kvType: ctxParams.kvType, kvCache: ctxParams.kvCache, memory64: x.memory64 === true,
        ...this.#backendOpt,
        backend: useBackend, cpu: gs?.cpu,
        newContext: (deferred) => this.#newContext(model_, { ...ctxParams, deferred }),
        freeContext: (c) => x.wlm_context_free(c),
      });
      const ctx = be.ctx;
      if (!this.#x) { // freed while the GPU backend was set up
        be.gpu?.release();
        x.wlm_context_free(ctx);
        throw jsError('WLM_ERR_STATE', 'the engine was freed during load()');
      }
      this.#model = model_;
      this.#ctx = ctx;
      this.#ctxParams = ctxParams;
      this.#need = gs?.model ? onGpu : need; // (weights streamed to the GPU: the heap's part)
      this.#gpu = be.gpu;
      model_ = 0; // owned by the engine now
      const f = (i) => x.wlmjs_model_info(this.#model, i);
      let vision = null;
      try {
        const src = mm?.source;
        mm = null; // read (and closed) by read()
        vision = mmproj == null ? null : await this.#media.load(x, await read(src, 'mmproj'), f(0), be.gpu !== null);
      } catch (e) {
        this.#unload();
        throw e;
      }
      const handle = this.#model;
      const text = (this.#text = new ModelText(x, handle, {
        error: (rc, message) => this.#error(rc, message),
        modelMessage: () => this.#readCString(x.wlm_model_errmsg(handle)),
      }));
      this.#info = Object.freeze({
        dim: f(0), hiddenDim: f(1), nLayers: f(2), nHeads: f(3), nKvHeads: f(4), vocabSize: f(5),
        seqLen: f(6), sharedClassifier: f(7) === 1, weightBytes: f(11), nCtx: ctxParams.nCtx || f(6),
        attnLayers: f(13), stateBytes: f(14), nExpert: f(15), nExpertUsed: f(16),
        simd: this.#simd, build: this.#build, threads: this.threads, kvType: ctxParams.kvType,
        memory64: x.memory64 === true,
        dotForm: this.#dot.form, dotFormBatch: this.#dot.formBatch, dotProbe: this.#dot.probe,
        contextBytes: x.memory64 ? x.wlm_context_memory(ctx) : x.wlm_context_memory(ctx) >>> 0, // (wasm64: past 4 GB)
        wasmMemoryBytes: x.memory.buffer.byteLength,
        name: text.meta('general.name'),
        architecture: text.meta('general.architecture'),
        chatTemplate: text.meta('tokenizer.chat_template'),
        bosId: text.bos, eosId: text.eos, bosToken: text.tokenText(text.bos), eosToken: text.tokenText(text.eos),
        addBos: text.addsBos(),
        backend: be.backend, backendReason: be.reason, gpuAdapter: be.adapter?.name ?? null,
        gpuBytes: be.gpu?.gpuBytes ?? 0,
        ...embedInfo(x, this.#model), // embeddingLength, pooling, generative, rankOutputs
        vision,
      });
      mark('wasmlm:model-loaded');
      return this.#info;
    } finally {
      // x stays valid even if free() ran meanwhile: the instance lives while referenced.
      if (slot) x.wlmjs_free(slot);
      if (modelPtr) x.wlmjs_free(modelPtr);
      if (tokPtr) x.wlmjs_free(tokPtr);
      if (model_) x.wlm_model_free(model_);
      if (mm) await mm.source.close();
      this.#busy = null;
    }
  }

  /** An mmproj source opened (js/models/source.js) and its header read: {source, header}, for
   *  #fitModule to size it with the model; the caller reads or closes the source. */
  /** The read-ahead the tuner chose, on every context (js/runtime/read_ahead.js). */
  #applyReadAhead() {
    const on = this.#readAhead.current ? 1 : 0;
    if (this.#ctx) this.#x.wlm_context_set_read_ahead(this.#ctx, on);
    if (this.#draft) this.#x.wlm_context_set_read_ahead(this.#draft.ctx, on);
  }

  /** With the GPU backend: runs the batch the context recorded and supplies its logits. */
  async #supply() {
    if (!this.#gpu) return;
    await this.#gpu.supply();
  }

  /**
   * Before a model is read: sizes it from its header (js/runtime/memory64.js: weights + KV cache +
   * scratch) and moves the engine to the module it needs (EngineOptions.memory64: 'auto' picks
   * wasm32 while it fits), re-instantiating it and its helper threads. Returns the opened
   * source (its first bytes peeked; a download's are kept, not fetched again) and the heap to keep below the weights.
   * `gpuStream`: true: the weights stream to the GPU (backend 'webgpu'), the KV cache lives
   * there: neither is counted; 'auto' (backend 'auto', a model without a separate tokenizer):
   * when the model needs more than wasm32 on the CPU (the memory64 module, or an error where
   * the runtime has none) but fits it with its weights and KV cache on the GPU, and 'auto' would
   * take this runtime's GPU (autoWouldUseGpu), wasm32 is kept and `gpuFirst` is true: the
   * caller streams to the GPU (with `probed`, the adapter autoWouldUseGpu got) and, should the
   * GPU refuse the model, calls this again for the CPU.
   */
  async #fitModule(model, ctxParams, signal, gpuStream = false, mm = null) {
    const source = await openModel(model, 'model', signal); // (a split GGUF's parts: js/models/split.js)
    let probed = null; // autoWouldUseGpu's adapter, when it asked
    try {
      const header = await peekModelHeader(source.peek);
      // a download without Content-Length: sized by its header's tensor directory, which also
      // sets the heap buffer's first size (no doubling copies of a multi-GB model)
      if (!source.size && header?.dataBytes) source.expected = header.dataBytes;
      // an mmproj (load()'s): its file and its encoder's scratch, on the heap whichever backend
      const vision = mm ? visionBytes(mm.source.size || mm.header?.dataBytes || 0, mm.header,
        { threads: this.#nThreads, textDim: header?.dim ?? 0 }) : null;
      const names = mm ? { model: source.name, mmproj: mm.source.name } : null;
      let need = modelBytes(source.size || header?.dataBytes || 0, header,
        { ...ctxParams, threads: this.#nThreads, vision });
      // (a deferred context's recurrent states, part of kv, are GPU memory too)
      const onGpu = { ...need, weights: 0, kv: 0, state: 0, grows: need.grows - need.state, total: need.total - need.weights - need.kv };
      if (gpuStream === true) need = onGpu;
      // the caller's own module (options.wasm) is kept, whichever it is
      const own = !this.#options || this.#options.wasm !== undefined;
      const option = this.#options?.memory64 ?? 'auto';
      const { memory64, error, gpuFirst = false } = own ? { memory64: this.#x.memory64 === true, error: null }
        : gpuStream === 'auto' && header?.format === 'gguf'
          ? await chooseMemoryForAuto(need, onGpu, option, ctxParams.nCtx, async () => {
            const r = await autoWouldUseGpu(this.#backendOpt.gpu);
            probed = r.ok ? r : null; // its adapter goes on to streamToGpu
            return r.ok;
          }, undefined, names)
          : chooseMemory(need, option, ctxParams.nCtx, undefined, names);
      if (error) throw error;
      if (memory64 !== (this.#x.memory64 === true)) {
        const rt = await startRuntime({ ...this.#options, memory64 });
        const threads = rt.starting ? await rt.starting : null; // (a failure: the old module stays)
        const old = this.#x;
        await this.#threadsStarting;
        if (!this.#x) { // freed meanwhile: the new module goes too
          if (threads) stopThreads(rt.x, threads);
          throw jsError('WLM_ERR_STATE', 'the engine was freed during load()');
        }
        if (this.#threads) stopThreads(old, this.#threads);
        this.#x = rt.x;
        this.#threads = threads;
        this.#threadsStarting = null;
        this.#threadsError = null;
        this.#build = moduleBuild(rt.x, rt.plan.build);
      }
      return { source, lowBytes: memory64 ? lowHeapBytes(need, this.#x.memory.buffer.byteLength) : 0, gpuFirst,
        probed: gpuFirst ? probed : null, need, onGpu };
    } catch (e) {
      await source.close();
      // a download aborted while its header was read rejects with signal.reason: an AbortError
      if (signal?.aborted && e?.name !== 'AbortError') throw abortError('Loading the model');
      throw e;
    }
  }

  /**
   * Encodes text into token ids with the model's tokenizer (wlm_tokenize_ex: llama2.c's
   * run.c for tokenizer.bin, SentencePiece or byte-level BPE for GGUF vocabularies).
   * @param {string} text
   * @param {{bos?: boolean, parseSpecial?: boolean}} [options]  bos: add the special tokens the
   *   vocabulary asks for (BOS; default true); parseSpecial: control tokens written in the text
   *   ("<|im_start|>") become their ids (default false: plain text)
   * @returns {Promise<Int32Array>}
   */
  async tokenize(text, options = {}) {
    const { bos = true, parseSpecial = false } = checkOptions('tokenize()', options, 'TokenizeOptions') ?? {};
    this.#needModel();
    return this.#text.tokenize(text, { bos, parseSpecial });
  }

  /**
   * The context positions an image takes in a prompt with this model and its mmproj: its rows
   * and its projector's wrapper tokens (wlm_image_positions: the layout generation evaluates),
   * for measuring a prompt before running it. The image is decoded and encoded (kept in the
   * image cache, so a prompt about it after does not encode it again). Accepts what
   * GenerateParams.images takes. Throws WLM_ERR_STATE without a vision model,
   * WLM_ERR_INVALID_ARG for an image that does not decode.
   * @param {import('../wasmlm.d.ts').ImageInput} image
   * @param {{signal?: AbortSignal}} [options]
   * @returns {Promise<number>}
   */
  async imageTokens(image, options = {}) {
    const { signal } = checkOptions('imageTokens()', options, 'CallOptions') ?? {};
    this.#needModel();
    this.#needIdle('measure an image');
    const x = this.#x;
    const { ptrs } = await this.#media.encode([image], signal);
    if (this.#x !== x || !this.#media.handle) throw jsError('WLM_ERR_STATE', 'the model went away while the image was encoded');
    const n = x.wlmjs_image_positions(this.#ctx, this.#media.handle, ptrs[0]);
    if (n < 0) throw this.#error(n, 'imageTokens(): the image does not fit this model');
    return n;
  }

  /**
   * Turns token ids back into text: the pieces run.c would print (leading space dropped after
   * BOS, <0xNN> as raw bytes), decoded as one UTF-8 stream. BOS and EOS add no text.
   * @param {ArrayLike<number>} ids
   * @returns {Promise<string>}
   */
  async detokenize(ids) {
    this.#needModel();
    return this.#text.decodeIds(Array.from(ids));
  }

  /**
   * Generates text after `prompt`, one Token per step. See wasmlm.d.ts for the parameters,
   * the stop conditions, abort and lastResult.
   * @param {string} prompt
   * @param {import('../wasmlm.d.ts').GenerateParams} [params]
   * @param {{signal?: AbortSignal}} [options]
   * @returns {AsyncGenerator<import('../wasmlm.d.ts').Token, void, void>}
   */
  generate(prompt, params = {}, options = {}) {
    // the options are checked on the first next(), where the generation's other errors come
    return lazily(() => this.#generate(String(prompt), params ?? {}, (checkOptions('generate()', options, 'CallOptions') ?? {}).signal));
  }

  /**
   * A fresh wlm_gen_params with `params` set (see GenerateParams in wasmlm.d.ts); returns its
   * pointer (the caller frees it). js/engine/params.js checks names and types; ranges are C's to
   * refuse, at begin, with a message naming the option.
   */
  #genParams(params) {
    const x = this.#x;
    const spec = genParamsSpec(params);
    const p = x.wlmjs_gen_params_new() >>> 0;
    if (!p) throw jsError('WLM_ERR_NOMEM', 'cannot allocate the generation parameters');
    try {
      for (const [field, v] of spec.fields) x.wlmjs_gen_params_set(p, field, v);
      for (const s of spec.stops) {
        const sp = this.#cstring(s);
        const rc = x.wlmjs_gen_params_add_stop(p, sp);
        x.wlmjs_free(sp);
        if (rc !== 0) throw this.#error(rc, `stop string ${JSON.stringify(s)} rejected`);
      }
      for (const [id, b] of spec.bias) x.wlmjs_gen_params_add_bias(p, id, b);
      for (const id of spec.banned) x.wlmjs_gen_params_add_ban(p, id);
      const grammar = this.#grammarText(spec.grammar);
      if (grammar !== null) { // the text stays in the heap until the params are freed
        const gp = this.#cstring(grammar);
        this.#paramGrammar.set(p, gp);
        x.wlmjs_gen_params_set_grammar(p, gp, utf8(grammar).length);
      }
      if (spec.lazy) { // a lazy grammar: dormant until a trigger (src/wasmlm.h, "Lazy grammars")
        x.wlmjs_gen_params_set(p, 18, 1);
        for (const t of spec.triggers) {
          const wp = typeof t === 'string' ? this.#cstring(t) : 0;
          const rc = x.wlmjs_gen_params_add_trigger(p, typeof t === 'string' ? -1 : t, wp);
          if (wp) x.wlmjs_free(wp);
          if (rc !== 0) throw this.#error(rc, `grammar trigger ${JSON.stringify(t)} rejected`);
        }
        for (const [disarm, list] of [[0, spec.arms], [1, spec.disarms]]) { // (wasmlm.h, "Arming")
          for (const t of list) {
            const wp = typeof t === 'string' ? this.#cstring(t) : 0;
            const rc = x.wlmjs_gen_params_add_arm(p, disarm, typeof t === 'string' ? -1 : t, wp);
            if (wp) x.wlmjs_free(wp);
            if (rc !== 0) throw this.#error(rc, `grammar ${disarm ? 'disarm' : 'arm'} ${JSON.stringify(t)} rejected`);
          }
        }
        if (spec.startArmed) x.wlmjs_gen_params_set(p, 20, spec.startArmed);
      }
      return p;
    } catch (e) {
      this.#freeParams(p);
      throw e;
    }
  }

  /**
   * Frees a #genParams() result and the grammar text it points at. `x`: the exports the
   * params were made with (a generation's cleanup runs after free() has cleared this.#x).
   */
  #freeParams(p, x = this.#x) {
    const gp = this.#paramGrammar.get(p);
    if (gp !== undefined) {
      x.wlmjs_free(gp);
      this.#paramGrammar.delete(p);
    }
    x.wlmjs_free(p);
  }

  async *#generate(prompt, params, signal) {
    yield* generate(this, this.#lend(), prompt, params, signal);
  }

  /**
   * One assistant turn of a conversation: renders `messages` (OpenAI-style {role, content})
   * with the model's chat template (js/chat/chat.js: @huggingface/jinja, as Hugging Face's
   * apply_chat_template), tokenizes it with special tokens parsed, and generates as generate()
   * does until an end-of-generation token (<|im_end|>, <|eot_id|>, <end_of_turn>, EOS...).
   * The KV cache of the previous turn is reused for the common prefix (cachePrompt, default
   * true): a later turn prefills only its new tokens (lastResult.nCached says how many were
   * reused). See ChatParams in wasmlm.d.ts.
   * @param {{role: string, content: string}[]} messages
   * @param {import('../wasmlm.d.ts').ChatParams} [params]
   * @param {{signal?: AbortSignal}} [options]
   * @returns {AsyncGenerator<import('../wasmlm.d.ts').Token, void, void>}
   */
  async *chat(messages, params = {}, options = {}) {
    const { signal } = checkChat(params, options);
    this.#needModel();
    // image parts as media markers and images, the template rendered, the cache checkpoint
    const { text, addBos, gen, stateCheckpoint, template } = await chatRequest(this.#info, this.tokenize.bind(this), messages, params);
    // a thinking model's reasoning apart (reasoning.js): each token's `reasoning` and `content`
    yield* withReasoning(this, template, text, this.#generate(text, { cachePrompt: true, stateCheckpoint, ...gen, addBos, parseSpecial: true }, signal),
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

  /**
   * Runs generate() to the end and returns its LastResult (text included).
   * @param {string} prompt
   * @param {import('../wasmlm.d.ts').GenerateParams} [params]
   * @param {{signal?: AbortSignal, onToken?: (t: import('../wasmlm.d.ts').Token) => void}} [options]
   * @returns {Promise<import('../wasmlm.d.ts').LastResult>}
   */
  async complete(prompt, params = {}, options = {}) {
    return complete(this, prompt, params, options);
  }

  /**
   * Generates after several prompts (or several samples of one prompt) together: one forward
   * pass per step for every sequence still running (wlm_generate_batch_next). Yields BatchTokens
   * (a Token with `seq` and `stopReason`), in sequence order within a step; each sequence ends
   * with one item whose stopReason is set (id -1, carrying any text released at the end).
   * When the iterator ends, engine.lastBatchResult is set. See wasmlm.d.ts.
   * @param {string|string[]} prompts
   * @param {import('../wasmlm.d.ts').BatchParams|import('../wasmlm.d.ts').BatchParams[]} [params]
   * @param {{signal?: AbortSignal}} [options]
   * @returns {AsyncGenerator<import('../wasmlm.d.ts').BatchToken, void, void>}
   */
  generateBatch(prompts, params = {}, options = {}) {
    return lazily(() => this.#generateBatch(prompts, params ?? {}, checkBatch('generateBatch()', params, options, 'CallOptions').signal));
  }

  async *#generateBatch(prompts, params, signal) {
    yield* generateBatch(this, this.#lend(), prompts, params, signal);
  }

  /**
   * Continuous batching: opens a batch that sequences join and leave while it decodes
   * (batch.add(prompt, params) → a BatchSequence, an async iterable of its BatchTokens with
   * cancel()), at most maxSequences at once (default: the context's nSeqMax; more wait for a
   * slot). The engine is busy until batch.close() (or `signal`). See ContinuousBatch in
   * wasmlm.d.ts.
   * @param {{maxSequences?: number, signal?: AbortSignal}} [options]
   * @returns {Promise<import('../wasmlm.d.ts').ContinuousBatch>}
   */
  async openBatch(options = {}) {
    const { maxSequences, signal } = checkOptions('openBatch()', options, 'OpenBatchOptions') ?? {};
    const c = this.#lend();
    c.needModel();
    c.needIdle('open a batch');
    if (signal?.aborted) throw abortError('The batch');
    const n = maxSequences ?? this.#ctxParams.nSeqMax;
    if (!Number.isInteger(n) || n < 1 || n > MAX_SEQ) {
      throw jsError('WLM_ERR_INVALID_ARG', `maxSequences must be an integer in 1..${MAX_SEQ}, got ${maxSequences}`);
    }
    await this.#ensureSeqMax(n);
    c.needIdle('open a batch');
    c.syncPool();
    return new ContinuousBatch(this, c, n, signal);
  }

  /**
   * Runs generateBatch() to the end and returns its BatchResult.
   * @param {string|string[]} prompts
   * @param {import('../wasmlm.d.ts').BatchParams|import('../wasmlm.d.ts').BatchParams[]} [params]
   * @param {{signal?: AbortSignal, onToken?: (t: import('../wasmlm.d.ts').BatchToken) => void}} [options]
   * @returns {Promise<import('../wasmlm.d.ts').BatchResult>}
   */
  async completeBatch(prompts, params = {}, options = {}) {
    return completeBatch(this, prompts, params, options);
  }

  /**
   * Beam search after `prompt` (wlm_beam_begin / wlm_beam_step), one step per macrotask so an
   * AbortSignal lands between steps. Resolves with the beams, best score first, and the KV
   * cache memory the search used. See BeamParams and BeamResult in wasmlm.d.ts.
   * @param {string} prompt
   * @param {import('../wasmlm.d.ts').BeamParams} [params]
   * @param {{signal?: AbortSignal, onStep?: (s: import('../wasmlm.d.ts').BeamStep) => void}} [options]
   * @returns {Promise<import('../wasmlm.d.ts').BeamResult>}
   */
  async beamSearch(prompt, params = {}, options = {}) {
    const { signal, onStep } = checkOptions('beamSearch()', options, 'BeamSearchOptions') ?? {};
    return beamSearch(this, this.#lend(), prompt, params, { signal, onStep });
  }

  /**
   * The distribution a sampler chain leaves on the logits the last generated token (of
   * sequence 0) was drawn from, without disturbing the generation (wlm_sampler_preview):
   * `params` as generate()'s (nProbs default 10). May be called between the tokens of a
   * generation or a batch, and after one ends. See PreviewResult in wasmlm.d.ts.
   * @param {import('../wasmlm.d.ts').GenerateParams} [params]
   * @returns {Promise<import('../wasmlm.d.ts').PreviewResult>}
   */
  async previewDistribution(params = {}) {
    checkOptions('previewDistribution()', params, 'GenerateParams');
    this.#needModel();
    if (this.#busy === 'load' || this.#busy === 'beam search') {
      throw jsError('WLM_ERR_STATE', `cannot preview the sampler while a ${this.#busy} is in progress`);
    }
    if (this.#previewPrev === undefined) {
      throw jsError('WLM_ERR_STATE', 'previewDistribution(): no token generated yet ' +
        '(it shows the distribution the last generated token was drawn from)');
    }
    params ??= {};
    if (typeof params !== 'object') {
      throw jsError('WLM_ERR_INVALID_ARG', `generation parameters must be an object, got ${params}`);
    }
    const x = this.#x;
    let paramsPtr = 0;
    let tok = 0;
    try {
      paramsPtr = this.#genParams({ ...params, nProbs: params.nProbs ?? 10 });
      tok = x.wlmjs_token_new() >>> 0;
      if (!tok) throw jsError('WLM_ERR_NOMEM', 'cannot allocate a token slot');
      const rc = x.wlm_sampler_preview(this.#ctx, 0, paramsPtr, tok);
      if (rc < 0) throw this.#ctxError(rc);
      const { token } = this.#text.readToken(tok, new TextDecoder(), this.#previewPrev);
      return { id: token.id, prob: token.prob, logprob: token.logprob,
        probSampled: token.probSampled, top: token.top ?? [] };
    } finally {
      if (tok) x.wlmjs_free(tok);
      if (paramsPtr) this.#freeParams(paramsPtr, x);
    }
  }

  /**
   * The KV cache's occupancy now (wlm_kv_stats) and the context's memory. May be called at
   * any time, also while a generation runs.
   * @returns {Promise<import('../wasmlm.d.ts').KvStats>}
   */
  async kvStats() {
    this.#needModel();
    const x = this.#x;
    const f = (k) => x.wlmjs_kv_stat(this.#ctx, k);
    const gpu = this.#gpu?.stateStats; // the WebGPU backend: a hybrid's states and snapshots are GPU memory
    return {
      blockBytes: f(0), blocksAllocated: f(1), blocksUsed: f(2), blocksShared: f(3), blockRefs: f(4),
      stateBytes: f(5), states: gpu ? gpu.states : f(6), stateBytesAllocated: gpu ? gpu.bytes : f(7),
      gpuBytes: this.#gpu?.gpuBytes ?? 0,
      nSeqMax: this.#ctxParams.nSeqMax, nCtx: this.#info.nCtx,
      contextBytes: x.memory64 ? x.wlm_context_memory(this.#ctx) : x.wlm_context_memory(this.#ctx) >>> 0, wasmMemoryBytes: x.memory.buffer.byteLength,
    };
  }

  /**
   * Low level: appends `ids` to the context's sequence (wlm_eval) and returns a copy of the
   * logits (vocabSize float32) of the last one. Continues after whatever the context holds
   * (e.g. a finished generation); call reset() first to start at position 0. For tests and
   * tools that need the forward pass itself; generate() does not use it.
   * @param {ArrayLike<number>} ids
   * @returns {Promise<Float32Array>}
   */
  async evalTokens(ids) {
    this.#needModel();
    this.#needIdle('evaluate tokens');
    this.#syncPool();
    const x = this.#x;
    const arr = Int32Array.from(ids);
    if (arr.length < 1) throw jsError('WLM_ERR_INVALID_ARG', 'evalTokens(): no token ids');
    const p = x.wlmjs_malloc(arr.byteLength) >>> 0;
    if (!p) throw jsError('WLM_ERR_NOMEM', 'cannot allocate the token ids');
    try {
      new Int32Array(x.memory.buffer, p, arr.length).set(arr);
      this.#previewPrev = undefined; // new logits: not the ones a token was drawn from
      const rc = x.wlm_eval(this.#ctx, p, arr.length);
      if (rc !== 0) throw this.#ctxError(rc);
      if (this.#gpu) {
        try {
          await this.#supply();
        } catch (e) {
          x.wlm_context_reset(this.#ctx); // the recorded positions were never computed
          throw e;
        }
      }
      const logits = x.wlm_logits(this.#ctx) >>> 0;
      if (!logits) throw jsError('WLM_ERR_STATE', 'wlm_logits returned NULL after wlm_eval');
      return new Float32Array(x.memory.buffer, logits, this.#info.vocabSize).slice();
    } finally {
      x.wlmjs_free(p);
    }
  }

  /**
   * Compiles ahead: runs a throw-away generation of two tokens on a tiny model built into the
   * module (wlmjs_warmup, src/runtime/warmup.h), so that a browser, which compiles each wasm
   * function when it is first called, has compiled the loader, tokenizer, forward pass and
   * sampler before the first real generation needs them. Touches no loaded model, context or
   * result of this engine. js/worker/worker.js runs it once after the worker's engine starts when
   * the client asked for it (WorkerEngineOptions.warmup).
   * @returns {Promise<{tokens: number, ms: number}>} tokens generated (2) and the time taken
   * @throws WasmlmError WLM_ERR_STATE (the engine is busy or freed), WLM_ERR_NOMEM
   */
  async warmUp() {
    const x = this.#exports();
    this.#needIdle('warm up');
    if (typeof x.wlmjs_warmup !== 'function') return { tokens: 0, ms: 0 }; // an older module
    const t0 = performance.now();
    const rc = x.wlmjs_warmup(2);
    if (rc < 0) throw this.#error(rc, 'the warm-up generation failed');
    return { tokens: rc, ms: performance.now() - t0 };
  }

  /**
   * Loads the draft model of speculative decoding (GenerateParams.draft) into this engine's
   * wasm instance beside the target, replacing any earlier one; `null` frees it. Its vocabulary
   * must be the target's (wlm_vocab_match: WLM_ERR_TOKENIZER naming the first token that
   * differs). Sized from its header and fitted beside the target's estimate before a byte past
   * the header is read (js/runtime/memory64.js draftBytes, fitDraft: WLM_ERR_NOMEM naming both
   * sizes); in a memory64 module its weights go above its scratch and tables, past 4 GB where
   * they must. See DraftLoadOptions in wasmlm.d.ts.
   * @param {import('../wasmlm.d.ts').DraftLoadOptions | null} options
   * @returns {Promise<import('../wasmlm.d.ts').DraftInfo | null>}
   */
  async loadDraft(options) {
    const x = this.#exports();
    this.#needModel();
    this.#needIdle('load a draft model');
    this.#unloadDraft();
    if (options == null) return null;
    const { model, tokenizer, nCtx = 0, onProgress, signal } = checkOptions('loadDraft()', options, 'DraftLoadOptions');
    if (model == null) throw jsError('WLM_ERR_INVALID_ARG', 'loadDraft(): `model` is required');
    if (!Number.isInteger(nCtx) || nCtx < 0) {
      throw jsError('WLM_ERR_INVALID_ARG', `loadDraft(): nCtx must be an integer >= 0, got ${nCtx}`);
    }
    this.#busy = 'load';
    let ptr = 0;
    let model_ = 0;
    let ctx = 0;
    let slot = 0;
    let source = null; // opened, its header peeked: sized before a byte of it is read
    try {
      source = await openSource(model, 'draft model', signal);
      const header = await peekModelHeader(source.peek);
      if (this.#x !== x || !this.#model) throw jsError('WLM_ERR_STATE', 'the target model went away during loadDraft()');
      // (a download without Content-Length: its header's size, as load()'s)
      if (!source.size && header?.dataBytes) source.expected = header.dataBytes;
      const estCtx = nCtx || Math.min(this.#info.nCtx, header?.ctx ?? this.#info.nCtx);
      const need = draftBytes(source.size || header?.dataBytes || 0, header, { nCtx: estCtx, kvType: this.#ctxParams.kvType });
      const lowBytes = fitDraft(x, this.#need, need, estCtx, source.name);
      const src = source;
      source = null; // read (and closed) by readIntoHeap
      const m = await readIntoHeap(x, src, 'draft model', onProgress, signal, lowBytes);
      ptr = m.ptr;
      if (this.#x !== x || !this.#model) throw jsError('WLM_ERR_STATE', 'the target model went away during loadDraft()');
      slot = x.wlmjs_malloc(256) >>> 0; // the handle, then the vocabulary check's message
      if (!slot) throw jsError('WLM_ERR_NOMEM', 'cannot allocate 256 bytes');
      new DataView(x.memory.buffer).setInt32(slot, 0, true);
      const owned = ptr;
      ptr = 0; // owned by wlmjs_model_load from here
      let rc = x.wlmjs_model_load(owned, m.size, slot);
      model_ = this.#i32(slot) >>> 0;
      if (rc !== 0) throw this.#error(rc, 'draft model: ' + this.#readCString(x.wlm_model_errmsg(model_)));
      if (tokenizer != null) {
        const t = await readIntoHeap(x, tokenizer, 'draft tokenizer', onProgress, signal);
        rc = x.wlm_model_load_tokenizer(model_, t.ptr, t.size);
        x.wlmjs_free(t.ptr);
        if (rc !== 0) throw this.#error(rc, 'draft tokenizer: ' + this.#readCString(x.wlm_model_errmsg(model_)));
      }
      rc = x.wlm_vocab_match(this.#model, model_, slot, 256);
      if (rc !== 0) throw this.#error(rc, this.#readCString(slot));
      const f = (i) => x.wlmjs_model_info(model_, i);
      // default: the target's context, as far as the draft model's own reaches
      const draftCtx = nCtx || Math.min(this.#info.nCtx, f(6));
      ctx = this.#newContext(model_, { ...this.#ctxParams, kvCache: true, nCtx: draftCtx, nSeqMax: 1 });
      const info = Object.freeze({
        dim: f(0), nLayers: f(2), vocabSize: f(5), weightBytes: f(11), nCtx: draftCtx,
        contextBytes: x.memory64 ? x.wlm_context_memory(ctx) : x.wlm_context_memory(ctx) >>> 0, // (wasm64: past 4 GB)
        name: metaString(x, model_, 'general.name'),
      });
      this.#draft = { model: model_, ctx, key: draftKey(model), info };
      model_ = 0;
      ctx = 0;
      return info;
    } catch (e) {
      // fetch rejects with signal.reason, which may be anything: report an AbortError.
      if (signal?.aborted && e?.name !== 'AbortError') throw abortError('Loading the draft model');
      throw e;
    } finally {
      if (ctx) x.wlm_context_free(ctx);
      if (model_) x.wlm_model_free(model_);
      if (ptr) x.wlmjs_free(ptr);
      if (slot) x.wlmjs_free(slot);
      if (source) await source.close();
      this.#busy = null;
    }
  }

  #unloadDraft() {
    if (!this.#draft) return;
    this.#x.wlm_context_free(this.#draft.ctx);
    this.#x.wlm_model_free(this.#draft.model);
    this.#draft = null;
  }

  /**
   * Embeddings of texts, one Float32Array each (js/engine/embed.js; see wasmlm.d.ts).
   * @param {string | string[]} texts
   * @param {import('../wasmlm.d.ts').EmbedOptions} [options]
   * @returns {Promise<Float32Array[]>}
   */
  async embed(texts, options = {}) {
    checkOptions('embed()', options, 'EmbedOptions');
    return this.#embedding('compute embeddings', (api) => embed(api, texts, options));
  }

  /**
   * Scores documents against a query with a reranker, best first (js/engine/embed.js; see wasmlm.d.ts).
   * @returns {Promise<{index: number, score: number}[]>}
   */
  async rerank(query, documents, options = {}) {
    checkOptions('rerank()', options, 'CallOptions');
    return this.#embedding('rerank', (api) => rerank(api, query, documents, options));
  }

  /** Runs an embedding call with the engine's handles lent to js/engine/embed.js. */
  async #embedding(what, fn) {
    this.#needModel();
    this.#needIdle(what);
    if (this.#gpu) {
      throw jsError('WLM_ERR_UNSUPPORTED', `${what}: embeddings run on the CPU backend only ` +
        "(this model runs on WebGPU: load it with backend: 'cpu')");
    }
    this.#busy = 'batch of embeddings';
    try {
      return await fn(this.#lend());
    } finally {
      this.#busy = null;
      this.#previewPrev = undefined;
    }
  }

  /**
   * Low level: forgets the sequence (the next evalTokens() starts at position 0).
   * @returns {Promise<void>}
   */
  async reset() {
    this.#needModel();
    this.#needIdle('reset');
    this.#x.wlm_context_reset(this.#ctx);
    this.#previewPrev = undefined;
  }

  /**
   * Frees the model, the context and the wasm instance. The engine cannot be used afterwards
   * (calls reject with WLM_ERR_STATE); a generation in progress fails on its next step.
   * Calling free() again does nothing.
   * @returns {Promise<void>}
   */
  async free() {
    const x = this.#x;
    if (!x) return;
    this.#unload();
    this.#gen = null;
    this.#busy = null;
    this.#x = null;
    await this.#threadsStarting; // helpers still starting are stopped as they come up
    if (this.#threads) stopThreads(x, this.#threads); // after the context that used it
    this.#threads = null;
  }
}

export async function complete(engine, prompt, params, options) {
  checkOptions('complete()', params, 'GenerateParams');
  const { signal, onToken } = checkOptions('complete()', options, 'CompleteOptions') ?? {};
  for await (const token of engine.generate(prompt, params, { signal })) onToken?.(token);
  return { ...engine.lastResult };
}

export async function completeBatch(engine, prompts, params, options) {
  const { signal, onToken } = checkBatch('completeBatch()', params, options, 'CompleteOptions');
  for await (const token of engine.generateBatch(prompts, params, { signal })) onToken?.(token);
  return engine.lastBatchResult;
}

/**
 * Creates an engine that runs in this thread.
 * @param {import('../wasmlm.d.ts').EngineOptions} [options]
 * @returns {Promise<import('../wasmlm.d.ts').Engine>}
 */
export function createEngine(options = {}) {
  try {
    checkOptions('createEngine()', options, 'EngineOptions');
  } catch (e) {
    return Promise.reject(e);
  }
  return startEngine(options ?? {});
}

/**
 * createEngine() with, optionally, the module already compiled elsewhere: `compiled` is
 * {file, module} for dist/<file> (js/worker/worker_engine.js compiles it in the page while the worker
 * starts). It is used when planModule() picks that same file here, else compiled anew.
 */
export async function startEngine(options, compiled = null) {
  const { dotForm = 'auto' } = options;
  checkBackendOption(options.backend, options.gpuWeights);
  checkReadAhead(options.readAhead);
  if (dotForm !== 'auto' && !Object.hasOwn(DOT_FORMS, dotForm)) {
    throw jsError('WLM_ERR_INVALID_ARG', `dotForm must be 'auto', 'fused' or 'split', got ${dotForm}`);
  }
  const { plan, x, threads, starting } = await startRuntime(options, compiled);
  const dot = dotFormAtStart(x, dotForm);
  mark('wasmlm:engine-ready');
  return new Engine(x, plan.simd, threads, starting, moduleBuild(x, plan.build), dot, options);
}
