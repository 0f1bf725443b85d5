// batch.js — several sequences at once on one engine: generateBatch() (the sequences of a batch
// decoded together, one token each per step: wlm_generate_batch_begin / _next) and beamSearch()
// (wlm_beam_begin / wlm_beam_step). Each runs on the handles an Engine lends it (`c`, see
// Engine's #lend in js/engine.js) and publishes its result on the engine (lastBatchResult,
// lastBeamResult). The memory rule of engine.js holds here too: views of wasm memory are made
// right before use, never kept across a call into wasm.

import { STATUS, STOP_REASONS, abortError, jsError } from './errors.js';
import { decodeStep } from './generate.js';
import { batchSequences, beamParams, utf8 } from './params.js';
import { macrotask } from './platform.js';

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
    // Tokenize in JS (the batch API takes ids): sequence i's prompt ids, concatenated.
    const ids = [];
    for (const s of seqs) {
      if (s.prompt.includes('\0')) {
        throw jsError('WLM_ERR_INVALID_ARG', `prompt ${s.promptIndex} contains a NUL character`);
      }
      ids.push(await c.tokenize(s.prompt, { bos: s.params.addBos ?? true, parseSpecial: s.params.parseSpecial ?? false }));
    }
    if (c.gen !== gen) throw jsError('WLM_ERR_STATE', 'the engine was freed during generation');
    const paramPtrs = seqs.map((s) => { const p = c.genParams(s.params); paramList.push(p); return p; });
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
    let rc = x.wlmjs_generate_batch_begin(ctx, n, tokensPtr, countsPtr, paramsPtr);
    if (rc < 0) throw c.ctxError(rc);
    begun = true;
    await c.supply(); // the GPU backend: the recorded prefill runs there
    if (c.gen !== gen) throw jsError('WLM_ERR_STATE', 'the engine was freed during generation');
    result.prefillMs = performance.now() - t0;
    // Prompt tokens evaluated: a prompt equal to an earlier one is forked, not evaluated (on the
    // CPU; the GPU backend evaluates each, its cache rows being per sequence).
    const seen = new Set();
    ids.forEach((t, i) => {
      result.sequences[i].nPrompt = t.length;
      const key = t.join(',');
      if (!seen.has(key) || c.gpu) result.nPrompt += t.length;
      seen.add(key);
    });

    const decoders = seqs.map(() => new TextDecoder());
    const prev = ids.map((t) => t[t.length - 1]);
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

