// batch.js — several sequences at once on one engine: generateBatch() (the sequences of a batch
// decoded together, one token each per step: wlm_generate_batch_begin / _next), openBatch()'s
// ContinuousBatch (sequences join and leave a running batch: wlm_generate_batch_add / _end) and
// beamSearch() (wlm_beam_begin / wlm_beam_step). Each runs on the handles an Engine lends it (`c`, see
// Engine's #lend in js/engine/engine.js) and publishes its result on the engine (lastBatchResult,
// lastBeamResult). The memory rule of engine.js holds here too: views of wasm memory are made
// right before use, never kept across a call into wasm.

import { Channel } from './channel.js';
import { NEED_LOGITS, STATUS, STOP_REASONS, abortError, jsError } from '../runtime/errors.js';
import { checkOptions } from '../options.js';
import { decodeStep } from './generate.js';
import { batchSequences, beamParams, utf8 } from './params.js';
import { macrotask } from '../runtime/platform.js';
import { checkMarkers } from '../vision/vision.js';

/** The media prompts a deferred context recorded (C returned NEED_LOGITS: text and image rows,
 *  one batch) run on the GPU backend before the batch begins; the context reset if that fails. */
async function mediaPrefill(c, gen) {
  try {
    await c.supply();
  } catch (e) {
    c.x.wlm_context_reset(c.ctx);
    throw e;
  }
  if (c.gen !== gen) throw jsError('WLM_ERR_STATE', 'the engine was freed during generation');
}

/**
 * A sequence's images (GenerateParams.images: its prompt's media markers take them in order),
 * checked as generate() checks them: {images, params (without them), prompt (a chat
 * template's BOS dropped: C puts the vocabulary's first)}, images null for a text sequence.
 */
export function sequenceImages(c, prompt, params, what) {
  const { images, ...rest } = params ?? {};
  if (images === undefined) return { images: null, params: rest, prompt };
  if (!Array.isArray(images)) throw jsError('WLM_ERR_INVALID_ARG', `${what}: images must be an array of images`);
  if (images.length && !c.vision) {
    throw jsError('WLM_ERR_STATE', `${what}: images need a vision model: load({ model, mmproj }) with the model's mmproj file`);
  }
  try {
    checkMarkers(prompt, images.length);
  } catch (e) {
    throw jsError('WLM_ERR_INVALID_ARG', `${what}: ${e.message}`);
  }
  const bos = c.info.bosToken;
  if (rest.addBos === false && c.info.addBos && bos && prompt.startsWith(bos)) prompt = prompt.slice(bos.length);
  return { images, params: rest, prompt };
}

/**
 * Engine.generateBatch(): yields each step's tokens (BatchToken, wasmlm.d.ts) as the sequences
 * produce them; engine.lastBatchResult holds the BatchResult when it ends, however it ends.
 */
export async function* generateBatch(engine, c, prompts, params, signal) {
  c.needModel();
  c.needIdle('generate');
  if (signal?.aborted) throw abortError('The generation');
  const x = c.x;
  const seqs = batchSequences(prompts, params);
  const n = seqs.length;
  const gen = {};
  c.busy = 'batch generation';
  c.gen = gen;
  const ptrs = []; // every malloc'd block, freed at the end
  const paramList = []; // the wlm_gen_params (with their grammar texts), freed at the end
  const alloc = (bytes) => {
    const p = x.wlmjs_malloc(bytes) >>> 0;
    if (!p) throw jsError('WLM_ERR_NOMEM', `cannot allocate ${bytes} bytes of wasm memory`);
    ptrs.push(p);
    return p;
  };
  let toks = 0;
  let begun = false;
  let finished = false;
  const result = {
    sequences: seqs.map(({ promptIndex, sample, params: p }, seq) => ({
      seq, promptIndex, sample, seed: p.seed, stopReason: 'aborted', text: '', nPrompt: 0,
      nGenerated: 0, logprob: 0,
    })),
    nPrompt: 0, nGenerated: 0, steps: 0, prefillMs: 0, decodeMs: 0, prefillTokensPerSec: 0,
    decodeTokensPerSec: 0, wasmMemoryBytes: 0,
  };
  const publish = () => {
    result.prefillTokensPerSec = result.prefillMs > 0 ? result.nPrompt / (result.prefillMs / 1e3) : 0;
    result.decodeTokensPerSec = result.decodeMs > 0 ? result.nGenerated / (result.decodeMs / 1e3) : 0;
    result.wasmMemoryBytes = x.memory.buffer.byteLength;
    engine.lastBatchResult = { ...result, sequences: result.sequences.map((s) => ({ ...s })) };
  };
  try {
    // sequences with images (params.images): media prompts, the rest tokenized
    const media = seqs.map((s) => sequenceImages(c, s.prompt, s.params, `prompt ${s.promptIndex}`));
    const withImages = media.some((m) => m.images !== null);
    // Tokenize in JS (the batch API takes ids): sequence i's prompt ids, concatenated.
    const ids = [];
    for (const [i, s] of seqs.entries()) {
      if (s.prompt.includes('\0')) {
        throw jsError('WLM_ERR_INVALID_ARG', `prompt ${s.promptIndex} contains a NUL character`);
      }
      ids.push(media[i].images ? new Int32Array(0)
        : await c.tokenize(s.prompt, { bos: s.params.addBos ?? true, parseSpecial: s.params.parseSpecial ?? false }));
    }
    if (c.gen !== gen) throw jsError('WLM_ERR_STATE', 'the engine was freed during generation');
    const paramPtrs = seqs.map((s, i) => { const p = c.genParams(media[i].params); paramList.push(p); return p; });
    // every sequence's images decoded and encoded (or found in the image cache), in order
    const enc = withImages ? await c.encodeImages(media.flatMap((m) => m.images ?? []), signal) : null;
    if (c.gen !== gen) throw jsError('WLM_ERR_STATE', 'the engine was freed during generation');
    await c.ensureSeqMax(n);
    c.syncPool();
    const ctx = c.ctx;
    const total = ids.reduce((a, t) => a + t.length, 0);
    const tokensPtr = alloc(Math.max(1, total) * 4);
    const countsPtr = alloc(n * 4);
    const paramsPtr = alloc(n * 4);
    {
      const mem = new Int32Array(x.memory.buffer);
      let off = tokensPtr >> 2;
      ids.forEach((t, i) => {
        mem.set(t, off);
        off += t.length;
        mem[(countsPtr >> 2) + i] = t.length;
        mem[(paramsPtr >> 2) + i] = paramPtrs[i];
      });
    }
    toks = x.wlmjs_tokens_new(n) >>> 0;
    if (!toks) throw jsError('WLM_ERR_NOMEM', 'cannot allocate the token slots');

    const t0 = performance.now();
    let rc;
    if (withImages) { // wlm_generate_batch_begin_media: the media prompts' texts, images after the params
      const texts = media.map((m) => (m.images ? utf8(m.prompt) : new Uint8Array(0)));
      const textPtr = alloc(Math.max(1, texts.reduce((a, t) => a + t.length, 0)));
      const lensPtr = alloc(n * 4), nImgPtr = alloc(n * 4);
      const ptrs = [...paramPtrs, ...enc.ptrs], ptrsPtr = alloc(ptrs.length * 4);
      const u8 = new Uint8Array(x.memory.buffer), mem = new Int32Array(x.memory.buffer);
      let off = textPtr;
      texts.forEach((t, i) => {
        u8.set(t, off);
        off += t.length;
        mem[(lensPtr >> 2) + i] = t.length;
        mem[(nImgPtr >> 2) + i] = media[i].images?.length ?? 0;
      });
      mem.set(ptrs, ptrsPtr >> 2);
      rc = x.wlmjs_generate_batch_begin_media(ctx, c.vision, n, tokensPtr, countsPtr, textPtr, lensPtr, nImgPtr, ptrsPtr, ptrs.length);
      result.imagesEncoded = enc.encoded;
      result.imagesReused = enc.reused;
      if (rc === NEED_LOGITS) { // the GPU backend: the prompts C recorded (text and image rows) run there, then the batch begins
        await mediaPrefill(c, gen);
        rc = x.wlmjs_generate_batch_begin_media_finish(ctx, n, paramsPtr);
      }
    } else {
      rc = x.wlmjs_generate_batch_begin(ctx, n, tokensPtr, countsPtr, paramsPtr);
    }
    if (rc < 0) throw c.ctxError(rc);
    begun = true;
    await c.supply(); // the GPU backend: the recorded prefill runs there
    if (c.gen !== gen) throw jsError('WLM_ERR_STATE', 'the engine was freed during generation');
    result.prefillMs = performance.now() - t0;
    // Prompt tokens evaluated: a prompt equal to an earlier one is forked, not evaluated (on the
    // CPU; the GPU backend evaluates each, its cache rows being per sequence). With images every
    // prompt is evaluated: a sequence's positions are its text tokens and image rows.
    const seen = new Set();
    const prev = [];
    ids.forEach((t, i) => {
      if (withImages) {
        const np = x.wlm_seq_n_past(ctx, i);
        result.sequences[i].nPrompt = np;
        result.nPrompt += np;
        prev.push(new Int32Array(x.memory.buffer, x.wlmjs_seq_tokens(ctx, i) >>> 0, np)[np - 1]);
        return;
      }
      result.sequences[i].nPrompt = t.length;
      const key = t.join(',');
      if (!seen.has(key) || c.gpu) result.nPrompt += t.length;
      seen.add(key);
      prev.push(t[t.length - 1]);
    });

    const decoders = seqs.map(() => new TextDecoder());
    const ended = new Array(n).fill(false);
    for (;;) {
      await macrotask();
      if (c.gen !== gen) throw jsError('WLM_ERR_STATE', 'the engine was freed during generation');
      if (signal?.aborted) throw abortError('The generation');

      const t1 = performance.now();
      rc = await decodeStep(c, gen, () => x.wlm_generate_batch_next(ctx, toks),
        () => x.wlmjs_generate_resume(ctx, toks, 0));
      result.decodeMs += performance.now() - t1;
      if (rc < 0) throw c.ctxError(rc);
      result.steps++;

      // Read the whole step before yielding: the consumer may call into the module.
      const items = [];
      for (let i = 0; i < n; i++) {
        if (ended[i]) continue;
        const { token, stopReason } = c.readToken(x.wlmjs_token_at(toks, i) >>> 0,
          decoders[i], prev[i]);
        const s = result.sequences[i];
        s.text += token.text;
        if (stopReason) {
          ended[i] = true;
          s.stopReason = stopReason;
        } else {
          if (i === 0) c.previewPrev = prev[i];
          prev[i] = token.id;
          s.nGenerated++;
          s.logprob += token.logprob;
          result.nGenerated++;
        }
        items.push({ ...token, seq: i, stopReason });
      }
      if (rc === STATUS.WLM_DONE) finished = true;
      for (const item of items) yield item;
      if (finished) break;
    }
  } finally {
    if (c.gen === gen) {
      if (begun && !finished) { // ended early: end the C batch so the context is idle
        x.wlm_generate_abort(c.ctx);
        x.wlm_generate_batch_next(c.ctx, toks);
      }
      c.gen = null;
      c.busy = null;
    }
    if (begun) publish();
    if (toks) x.wlmjs_free(toks);
    for (const p of ptrs) x.wlmjs_free(p);
    for (const p of paramList) c.freeParams(p);
  }
}

/** Engine.beamSearch() (see its documentation there): resolves with the BeamResult. */
export async function beamSearch(engine, c, prompt, params, { signal, onStep } = {}) {
  c.needModel();
  c.needIdle('start a beam search');
  if (signal?.aborted) throw abortError('The beam search');
  const { width, maxTokens, lengthPenalty, addBos, grammar: grammarSpecOf } = beamParams(params);
  prompt = String(prompt);
  if (prompt.includes('\0')) throw jsError('WLM_ERR_INVALID_ARG', 'the prompt contains a NUL character');
  const x = c.x;
  const gen = {};
  c.busy = 'beam search';
  c.previewPrev = undefined; // the beams replace sequence 0's logits
  c.gen = gen;
  let promptPtr = 0;
  let grammarPtr = 0;
  let begun = false;
  let finished = false;
  const i32 = (v) => Math.max(-(2 ** 31), Math.min(v, 2 ** 31 - 1));
  const t0 = performance.now();
  let steps = 0;
  let ids;
  const collectResult = () => {
    const ctx = c.ctx;
    const beams = [];
    const count = x.wlm_beam_count(ctx);
    for (let i = 0; i < count; i++) {
      const f = (k) => x.wlmjs_beam_field(ctx, i, k);
      const nTok = f(0);
      const ptr = f(4) >>> 0;
      const tokens = nTok > 0 ? new Int32Array(x.memory.buffer, ptr, nTok).slice() : new Int32Array(0);
      beams.push({
        text: c.decodeIds(tokens, ids[ids.length - 1]), tokens, logprob: f(1), score: f(2),
        stopReason: STOP_REASONS[f(3)] ?? 'none',
      });
    }
    const kvBytes = x.wlmjs_beam_memory(ctx, 0);
    return {
      beams, kvBytes, kvBytesUnshared: x.wlmjs_beam_memory(ctx, 1), kvBytesPerBeam: kvBytes / width,
      width, nPrompt: ids.length, steps, ms: performance.now() - t0, aborted: false,
    };
  };
  try {
    ids = await c.tokenize(prompt, { bos: !!addBos });
    if (c.gen !== gen) throw jsError('WLM_ERR_STATE', 'the engine was freed during the beam search');
    await c.ensureSeqMax(2 * width);
    c.syncPool();
    promptPtr = c.heapInt32(ids);
    const grammar = c.grammarText(grammarSpecOf);
    let rc;
    if (grammar === null) {
      rc = x.wlmjs_beam_begin(c.ctx, promptPtr, ids.length, i32(width), i32(maxTokens), lengthPenalty);
    } else {
      grammarPtr = c.cstring(grammar);
      rc = x.wlmjs_beam_begin_grammar(c.ctx, promptPtr, ids.length, i32(width), i32(maxTokens),
        lengthPenalty, grammarPtr, utf8(grammar).length);
    }
    if (rc < 0) throw c.ctxError(rc);
    begun = true;
    await c.supply(); // the GPU backend: the recorded prompt (then each step's batch) runs there
    for (;;) {
      await macrotask();
      if (c.gen !== gen) throw jsError('WLM_ERR_STATE', 'the engine was freed during the beam search');
      if (signal?.aborted) throw abortError('The beam search');
      rc = x.wlm_beam_step(c.ctx);
      if (rc < 0) throw c.ctxError(rc);
      steps++;
      if (rc === STATUS.WLM_DONE) break;
      await c.supply();
      if (c.gen !== gen) throw jsError('WLM_ERR_STATE', 'the engine was freed during the beam search');
      if (onStep) {
        const stat = (k) => x.wlmjs_kv_stat(c.ctx, k);
        onStep({ step: steps, kvBytes: stat(2) * stat(0), kvBytesUnshared: stat(4) * stat(0) });
      }
    }
    finished = true;
    const result = collectResult();
    engine.lastBeamResult = result;
    return result;
  } finally {
    if (c.gen === gen) {
      if (begun && !finished) {
        // Aborted (or failed): end the search; the live beams become results marked
        // 'aborted', kept in lastBeamResult.
        x.wlm_generate_abort(c.ctx);
        if (x.wlm_beam_step(c.ctx) === STATUS.WLM_DONE) {
          engine.lastBeamResult = { ...collectResult(), aborted: true };
        }
      }
      c.gen = null;
      c.busy = null;
    }
    if (promptPtr) x.wlmjs_free(promptPtr);
    if (grammarPtr) x.wlmjs_free(grammarPtr);
  }
}

/**
 * Engine.openBatch(): continuous batching (llama-server's) on one engine. Sequences join the
 * running batch between two steps (add: wlm_generate_batch_add, or wlm_generate_batch_begin for
 * the first; the new prompt is prefilled in the next step's forward pass beside the other
 * sequences' decode tokens) and leave it at once when cancelled (wlm_generate_batch_end: its KV
 * cache freed, its slot taken by the next waiting sequence). One step runs per macrotask while
 * any sequence generates; with none, the batch waits for add() or close(). The engine is busy
 * from openBatch() to close(). A sequence's tokens are those it generates alone (generate()
 * without the prompt cache): bitwise, greedy or seeded.
 */
export class ContinuousBatch {
  #engine; #c; #gen; #max; #signal; #onAbort;
  #toks = 0;
  #begun = false;
  #fresh = false;       // begun, no step since: a sequence waits to sample from begin's logits
  #closed = false;
  #failed = null;
  #pending = [];        // sequences added, not yet in the batch
  #live = new Map();    // slot -> sequence in the batch
  #wake = null;
  #loop;
  /** Totals: {sequences (admitted), steps, maxLive (most sequences in one step), tokens}. */
  stats = { sequences: 0, steps: 0, maxLive: 0, tokens: 0 };

  /** Use Engine.openBatch(). */
  constructor(engine, c, maxSequences, signal) {
    this.#engine = engine;
    this.#c = c;
    this.#max = maxSequences;
    this.#signal = signal;
    this.#gen = {};
    c.busy = 'continuous batch';
    c.gen = this.#gen;
    c.previewPrev = undefined;
    this.#toks = c.x.wlmjs_tokens_new(maxSequences) >>> 0;
    if (!this.#toks) {
      c.gen = null;
      c.busy = null;
      throw jsError('WLM_ERR_NOMEM', 'cannot allocate the token slots');
    }
    if (signal) {
      this.#onAbort = () => this.close();
      signal.addEventListener('abort', this.#onAbort, { once: true });
    }
    this.#loop = this.#run();
  }

  /** Sequences in the batch now, and added ones waiting for a slot. */
  get live() { return this.#live.size; }
  get waiting() { return this.#pending.length; }
  /** The most sequences decoded together (the context's slots). */
  get maxSequences() { return this.#max; }

  /**
   * Adds a sequence: `prompt` (text, tokenized with params.addBos / parseSpecial) and its
   * GenerateParams (cachePrompt, stateCheckpoint and draft do not apply). It joins at the next
   * step if a slot is free, else when one frees, in order. Returns a BatchSequence: an async
   * iterable of its BatchTokens (the last with stopReason set; seq is its slot) that throws the
   * AbortError when cancelled (cancel(), `signal`, close()) and a per-sequence error (a prompt
   * past the context, a bad parameter) without disturbing the others.
   */
  add(prompt, params = {}, options = {}) {
    const { signal } = checkOptions('add()', options, 'CallOptions') ?? {};
    if (this.#closed || this.#failed) {
      throw this.#failed ?? jsError('WLM_ERR_STATE', 'the batch is closed');
    }
    prompt = String(prompt);
    if (params === null || typeof params !== 'object') {
      throw jsError('WLM_ERR_INVALID_ARG', `generation parameters must be an object, got ${params}`);
    }
    const queue = new Channel();
    const seq = {
      queue, prompt, params, slot: -1, cancelled: false, ids: null, paramsPtr: 0,
      decoder: new TextDecoder(), prev: -1,
      result: { stopReason: 'aborted', text: '', nPrompt: 0, nGenerated: 0, logprob: 0 },
      signal, onAbort: null,
    };
    const handle = {
      [Symbol.asyncIterator]: () => queue[Symbol.asyncIterator](),
      cancel: () => this.#cancel(seq),
      /** {stopReason, text, nPrompt, nGenerated, logprob}: final once the iterator has ended. */
      get result() { return { ...seq.result }; },
      /** The sequence's slot in the batch (BatchToken.seq), -1 before it joins. */
      get slot() { return seq.slot; },
    };
    if (prompt.includes('\0')) {
      queue.end(jsError('WLM_ERR_INVALID_ARG', 'the prompt contains a NUL character'));
      return handle;
    }
    if (signal?.aborted) { queue.end(abortError('The generation')); return handle; }
    try { // images (params.images): encoded when the sequence is admitted
      seq.media = sequenceImages(this.#c, prompt, params, 'add()');
    } catch (e) {
      queue.end(e);
      return handle;
    }
    if (signal) {
      seq.onAbort = () => this.#cancel(seq);
      signal.addEventListener('abort', seq.onAbort, { once: true });
    }
    seq.ids = seq.media.images ? Promise.resolve(null)
      : this.#c.tokenize(prompt, { bos: params.addBos ?? true, parseSpecial: params.parseSpecial ?? false });
    seq.ids.catch(() => {}); // reported through the queue when it is admitted
    this.#pending.push(seq);
    this.#notify();
    return handle;
  }

  /** Ends every sequence (AbortError for those still running) and the batch; resolves when the
   * engine is idle again. Idempotent. */
  async close() {
    if (!this.#closed) {
      this.#closed = true;
      this.#notify();
    }
    await this.#loop;
  }

  #notify() { const w = this.#wake; this.#wake = null; w?.(); }

  #cancel(seq) {
    if (seq.queue.ended) return;
    seq.cancelled = true;
    const i = this.#pending.indexOf(seq);
    if (i >= 0) { this.#pending.splice(i, 1); this.#finish(seq, abortError('The generation')); }
    this.#notify(); // a sequence in the batch leaves before the next step (#run)
  }

  /** Ends one sequence's reader; frees its parameters. */
  #finish(seq, error = null) {
    seq.signal?.removeEventListener('abort', seq.onAbort);
    if (seq.paramsPtr && this.#c.x) this.#c.freeParams(seq.paramsPtr); // (gone with a freed engine)
    seq.paramsPtr = 0;
    seq.queue.end(error);
  }

  #check() {
    if (this.#c.gen !== this.#gen) throw jsError('WLM_ERR_STATE', 'the engine was freed during generation');
  }

  /** Puts a waiting sequence into the batch; its own errors end it alone. Returns false when a
   *  sequence with images must wait for the next step (begin's logits are still to be sampled). */
  async #admit(seq) {
    const c = this.#c, x = c.x;
    if (seq.media.images && this.#fresh && this.#live.size > 0) return false;
    let ids, enc = null;
    try {
      ids = await seq.ids;
      this.#check();
      if (seq.cancelled) { this.#finish(seq, abortError('The generation')); return true; }
      seq.paramsPtr = c.genParams(seq.media.params);
      // encoded now, right before the add: a later sequence's images cannot evict these first
      if (seq.media.images) enc = await c.encodeImages(seq.media.images);
      this.#check();
    } catch (err) {
      this.#check();
      this.#finish(seq, err);
      return true;
    }
    if (enc) return this.#admitMedia(seq, enc);
    const tokensPtr = c.heapInt32(ids);
    let rc;
    try {
      if (!this.#begun) {
        const cell = x.wlmjs_malloc(8) >>> 0;
        if (!cell) throw jsError('WLM_ERR_NOMEM', 'cannot allocate 8 bytes of wasm memory');
        new Int32Array(x.memory.buffer, cell, 2).set([ids.length, seq.paramsPtr]);
        rc = x.wlmjs_generate_batch_begin(c.ctx, 1, tokensPtr, cell, cell + 4);
        x.wlmjs_free(cell);
      } else {
        rc = x.wlm_generate_batch_add(c.ctx, tokensPtr, ids.length, seq.paramsPtr);
      }
    } finally {
      x.wlmjs_free(tokensPtr);
    }
    if (rc < 0) { this.#finish(seq, c.ctxError(rc)); return true; }
    if (!this.#begun) {
      this.#begun = true;
      this.#fresh = true;
      await c.supply(); // the GPU backend: the recorded prefill runs there
      this.#check();
    }
    seq.slot = rc;
    seq.prev = ids[ids.length - 1];
    seq.result.nPrompt = ids.length;
    this.#live.set(rc, seq);
    this.stats.sequences++;
    return true;
  }

  /** #admit for a sequence with images (encoded: enc.ptrs): the first begins the batch
   *  (wlm_generate_batch_begin_media), a later one joins it (wlm_generate_batch_add_media: its
   *  prompt prefilled now, its last token in the next step; on the GPU #joinMediaGpu). */
  #admitMedia(seq, enc) {
    const c = this.#c, x = c.x, ctx = c.ctx;
    const text = utf8(seq.media.prompt);
    const n = enc.ptrs.length;
    const adding = this.#begun;
    const textPtr = x.wlmjs_malloc(Math.max(1, text.length)) >>> 0;
    const cells = x.wlmjs_malloc(4 * (4 + n)) >>> 0; // count 0, length, images, params, then the image pointers
    let rc;
    try {
      if (!textPtr || !cells) throw jsError('WLM_ERR_NOMEM', 'cannot allocate the prompt in wasm memory');
      new Uint8Array(x.memory.buffer).set(text, textPtr);
      new Int32Array(x.memory.buffer, cells, 4 + n).set([0, text.length, n, seq.paramsPtr, ...enc.ptrs]);
      rc = adding
        ? x.wlmjs_generate_batch_add_media(ctx, c.vision, textPtr, text.length, cells + 16, n, seq.paramsPtr)
        : x.wlmjs_generate_batch_begin_media(ctx, c.vision, 1, 0, cells, textPtr, cells + 4, cells + 8, cells + 12, 1 + n);
    } catch (err) {
      this.#finish(seq, err);
      return true;
    } finally {
      if (textPtr) x.wlmjs_free(textPtr);
      if (cells) x.wlmjs_free(cells);
    }
    // the GPU backend: the prompt C recorded runs there, then the batch begins or the sequence
    // joins it (begin's status; add returns the slot, or NEED_LOGITS on the GPU: never a slot there)
    if (rc === NEED_LOGITS && (!adding || c.gpu)) return adding ? this.#joinMediaGpu(seq, enc) : this.#beginMediaGpu(seq, enc);
    return this.#admittedMedia(seq, enc, rc, adding);
  }

  /** #admitMedia's join on the GPU backend: the prompt C recorded into the free slot (text and
   *  image rows, between two steps: the others wait) runs there, then the sequence joins
   *  (wlm_generate_batch_add_media_finish: cut before its prompt's last token, which the next
   *  step evaluates beside the others' decode tokens; a hybrid's state restored from the
   *  snapshot the GPU took there). */
  async #joinMediaGpu(seq, enc) {
    const c = this.#c, x = c.x;
    try {
      await c.supply();
    } catch (err) {
      if (c.gen === this.#gen) x.wlm_generate_batch_add_media_finish(c.ctx, 0); // its recording dropped, its slot freed
      this.#finish(seq, err);
      return true;
    }
    this.#check();
    return this.#admittedMedia(seq, enc, x.wlm_generate_batch_add_media_finish(c.ctx, seq.paramsPtr), true);
  }

  /** #admitMedia's begin on the GPU backend: the recorded prompt run, the batch begun on its
   *  last token (wlm_generate_batch_begin_media_finish), that token run. */
  async #beginMediaGpu(seq, enc) {
    const c = this.#c, x = c.x;
    const one = x.wlmjs_malloc(4) >>> 0;
    let rc;
    try {
      if (!one) throw jsError('WLM_ERR_NOMEM', 'cannot allocate 4 bytes');
      await mediaPrefill(c, this.#gen);
      new Int32Array(x.memory.buffer, one, 1)[0] = seq.paramsPtr;
      rc = x.wlmjs_generate_batch_begin_media_finish(c.ctx, 1, one);
    } catch (err) {
      this.#finish(seq, err);
      return true;
    } finally {
      if (one) x.wlmjs_free(one);
    }
    if (rc >= 0) {
      await c.supply(); // the recorded last token
      this.#check();
    }
    return this.#admittedMedia(seq, enc, rc, false);
  }

  /** The rest of #admitMedia once C began or joined the sequence (rc: status, or its slot). */
  #admittedMedia(seq, enc, rc, adding) {
    const c = this.#c, x = c.x, ctx = c.ctx;
    if (rc < 0) { this.#finish(seq, c.ctxError(rc)); return true; }
    const slot = adding ? rc : 0;
    if (!adding) {
      this.#begun = true;
      this.#fresh = true;
    }
    // its positions (text tokens and image rows) and last token: all in the cache after begin,
    // all but the last (evaluated by the next step) after add
    const np = x.wlm_seq_n_past(ctx, slot) + (adding ? 1 : 0);
    seq.slot = slot;
    seq.prev = new Int32Array(x.memory.buffer, x.wlmjs_seq_tokens(ctx, slot) >>> 0, np)[np - 1];
    seq.result.nPrompt = np;
    seq.result.imagesEncoded = enc.encoded;
    seq.result.imagesReused = enc.reused;
    this.#live.set(slot, seq);
    this.stats.sequences++;
    return true;
  }

  async #run() {
    const c = this.#c, x = c.x, gen = this.#gen;
    try {
      for (;;) {
        if (this.#closed) break;
        for (const [slot, seq] of this.#live) { // cancelled: leave now, the slot freed
          if (!seq.cancelled) continue;
          const rc = x.wlm_generate_batch_end(c.ctx, slot);
          if (rc < 0) throw c.ctxError(rc);
          this.#live.delete(slot);
          this.#finish(seq, abortError('The generation'));
        }
        while (this.#pending.length && this.#live.size < this.#max) {
          const seq = this.#pending.shift();
          if (!(await this.#admit(seq))) { // images wait for the next step
            this.#pending.unshift(seq);
            break;
          }
        }
        if (this.#live.size === 0) {
          if (this.#pending.length) continue;
          await new Promise((resolve) => { this.#wake = resolve; });
          continue;
        }
        await macrotask();
        this.#check();
        if (this.#closed) break;
        if ([...this.#live.values()].some((s) => s.cancelled)) continue;
        this.stats.maxLive = Math.max(this.stats.maxLive, this.#live.size);
        const rc = await decodeStep(c, gen, () => x.wlm_generate_batch_next(c.ctx, this.#toks),
          () => x.wlmjs_generate_resume(c.ctx, this.#toks, 0));
        if (rc < 0) throw c.ctxError(rc);
        this.stats.steps++;
        this.#fresh = false;
        const ended = [];
        for (const [slot, seq] of this.#live) { // read the whole step before anyone reads on
          const { token, stopReason } = c.readToken(x.wlmjs_token_at(this.#toks, slot) >>> 0, seq.decoder, seq.prev);
          const r = seq.result;
          r.text += token.text;
          if (stopReason) {
            r.stopReason = stopReason;
            ended.push(slot);
          } else {
            seq.prev = token.id;
            r.nGenerated++;
            r.logprob += token.logprob;
            this.stats.tokens++;
          }
          seq.queue.push({ ...token, seq: slot, stopReason });
        }
        for (const slot of ended) { this.#finish(this.#live.get(slot)); this.#live.delete(slot); }
      }
    } catch (err) {
      this.#failed = err;
    } finally {
      const err = this.#failed ?? abortError('The generation');
      for (const seq of [...this.#live.values(), ...this.#pending]) this.#finish(seq, err);
      this.#live.clear();
      this.#pending.length = 0;
      this.#closed = true;
      this.#signal?.removeEventListener('abort', this.#onAbort);
      if (c.gen === gen) {
        if (this.#begun) { // end the C batch so the context is idle
          x.wlm_generate_abort(c.ctx);
          x.wlm_generate_batch_next(c.ctx, this.#toks);
        }
        c.gen = null;
        c.busy = null;
      }
      if (c.x === x) x.wlmjs_free(this.#toks);
    }
  }
}
