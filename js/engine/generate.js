// generate.js — one sequence's generation for js/engine/engine.js: Engine.generate() (and chat(),
// complete(), chatCompletion() through it) as an async iterator of Tokens: the prompt prefilled
// (wlm_generate_begin_text; on the GPU backend the recorded batch run there), then one
// wlm_generate_next per step, a macrotask between steps so that timers, messages and aborts
// run; speculative decoding turned on after begin (js/engine/speculative.js); the kernels' read-ahead
// timed on the first plain CPU steps (js/runtime/read_ahead.js). It runs on the handles an Engine lends
// it (`c`, Engine's #lend) and publishes engine.lastResult however it ends. C samples, applies
// grammars and stop strings; this file moves tokens across the boundary.

import { NEED_LOGITS, STATUS, abortError, jsError } from '../runtime/errors.js';
import { mark, macrotask } from '../runtime/platform.js';
import { draftKey, draftSpec, speculate, specStats } from './speculative.js';
import { checkMarkers } from '../vision/vision.js';
import { checkOptions } from '../options.js';

/**
 * One decode step of generation `gen`: `next()` (wlm_generate_next or _batch_next), and where it
 * returns NEED_LOGITS (the GPU backend) the step's forward pass on the GPU, then `resume()`
 * (wlmjs_generate_resume: the sampling). Returns the step's status. Shared with js/engine/batch.js.
 */
export async function decodeStep(c, gen, next, resume) {
  let rc = next();
  if (rc === NEED_LOGITS) {
    await c.supply();
    if (c.gen !== gen) throw jsError('WLM_ERR_STATE', 'the engine was freed during generation');
    rc = resume();
  }
  return rc;
}

/**
 * Engine.generate(): yields each Token (wasmlm.d.ts) as it is sampled; the sequence's end
 * releases any text held back for a stop string. engine.lastResult holds the LastResult when
 * the iterator ends, however it ends (done, stop, abort, break, error).
 */
export async function* generate(engine, c, prompt, params, signal) {
  checkOptions('generate()', params, 'GenerateParams');
  c.needModel();
  c.needIdle('generate');
  if (signal?.aborted) throw abortError('The generation');
  // speculative decoding (js/engine/speculative.js): a draft model loaded on first use, or prompt lookup
  const { draft, images, ...plainParams } = params;
  const spec = draft === undefined ? null : draftSpec(draft);
  if (images !== undefined) { // a raw prompt with media markers (js/vision/vision.js)
    if (!Array.isArray(images)) throw jsError('WLM_ERR_INVALID_ARG', 'images must be an array of images');
    if (images.length && !c.vision) {
      throw jsError('WLM_ERR_STATE', 'images need a vision model: load({ model, mmproj }) with the model\'s mmproj file');
    }
    checkMarkers(prompt, images.length);
    // C puts the vocabulary's BOS first on this path (as llama.cpp's mtmd): a BOS the text
    // already starts with (a chat template's, addBos false) is that one, not a second
    const bos = c.info.bosToken;
    if (params.addBos === false && c.info.addBos && bos && prompt.startsWith(bos)) prompt = prompt.slice(bos.length);
    // speculative decoding sees the images through the target only: the drafters (a draft model
    // without an mmproj, prompt lookup) get the text around them (src/runtime/speculative.c)
  }
  if (spec && !spec.ngram && spec.model !== undefined && draftKey(spec.model) !== c.draft?.key) {
    await engine.loadDraft({ model: spec.model, nCtx: spec.nCtx, signal });
  }
  if (spec && !spec.ngram && !c.draft) {
    throw jsError('WLM_ERR_STATE', 'draft: no draft model loaded (give draft.model, or call loadDraft() first)');
  }
  params = plainParams;
  c.needIdle('generate');
  c.syncPool();
  const x = c.x;
  const ctx = c.ctx;
  const gen = {};
  c.busy = 'generate';
  c.gen = gen;
  let paramsPtr = 0;
  let promptPtr = 0;
  let tok = 0;
  let begun = false;
  let finished = false;
  const result = {
    stopReason: 'aborted', text: '', nPrompt: 0, nCached: 0, nGenerated: 0, logprob: 0, prefillMs: 0,
    decodeMs: 0, prefillTokensPerSec: 0, decodeTokensPerSec: 0, wasmMemoryBytes: 0,
  };
  const publish = () => {
    const prefilled = result.nPrompt - result.nCached;
    result.prefillTokensPerSec = result.prefillMs > 0 ? prefilled / (result.prefillMs / 1e3) : 0;
    result.decodeTokensPerSec = result.decodeMs > 0 ? result.nGenerated / (result.decodeMs / 1e3) : 0;
    result.wasmMemoryBytes = x.memory.buffer.byteLength;
    if (spec) Object.assign(result, specStats(x, ctx));
    if (!c.gpu) result.readAhead = c.readAhead.state;
    engine.lastResult = { ...result };
  };
  try {
    if (prompt.includes('\0')) {
      throw jsError('WLM_ERR_INVALID_ARG', 'the prompt contains a NUL character');
    }
    paramsPtr = c.genParams(params);
    let enc = null;
    const t0 = performance.now();
    if (images !== undefined) {
      enc = await c.encodeImages(images, signal); // decoded, and encoded unless seen before
      if (c.gen !== gen) throw jsError('WLM_ERR_STATE', 'the engine was freed during generation');
      result.imagesEncoded = enc.encoded;
      result.imagesReused = enc.reused;
      result.imageMs = performance.now() - t0;
    }
    promptPtr = c.cstring(prompt);
    tok = x.wlmjs_token_new() >>> 0;
    if (!tok) throw jsError('WLM_ERR_NOMEM', 'cannot allocate a token slot');

    let media = null; // (images: the KV cache of the last media prompt's shared start is kept)
    if (enc) media = await c.beginMedia(prompt, promptPtr, enc, paramsPtr, params.cachePrompt === true);
    let rc = media ? media.rc : x.wlm_generate_begin_text(ctx, promptPtr, paramsPtr);
    if (rc >= 0 && spec) { // the draft's prefill counts as prefill
      begun = true; // a refusal below still ends the C generation (finally)
      rc = speculate(x, ctx, c.draft?.ctx ?? 0, spec);
    }
    result.prefillMs = performance.now() - t0;
    if (rc < 0) throw c.ctxError(rc);
    begun = true;
    if (c.gpu) { // the prefill the context recorded runs on the GPU
      await c.supply();
      result.prefillMs = performance.now() - t0;
    }
    result.nPrompt = x.wlm_context_n_past(ctx);
    result.nCached = media ? media.kept : x.wlm_generate_n_cached(ctx);
    const decoder = new TextDecoder();
    // The token before each step's token, for the alternatives' text: the prompt's last
    // token matters only when it is BOS (an empty prompt with addBos).
    let prev = prompt === '' && params.addBos !== false ? c.info.bosId : -1;
    // plain CPU decode steps time the kernels' read-ahead while 'auto' has not chosen
    const tuneReadAhead = !c.gpu && !spec && typeof x.wlm_context_set_read_ahead === 'function';

    for (;;) {
      await macrotask(); // let timers, messages and abort signals run between tokens
      if (c.gen !== gen) throw jsError('WLM_ERR_STATE', 'the engine was freed during generation');
      if (signal?.aborted) throw abortError('The generation');

      // read-ahead 'auto': the first plain CPU decode steps alternate it (js/runtime/read_ahead.js)
      const timeStep = tuneReadAhead && c.readAhead.tuning && result.nGenerated > 0;
      const ahead = c.readAhead.current;
      if (timeStep) x.wlm_context_set_read_ahead(ctx, ahead ? 1 : 0);
      const t1 = performance.now();
      rc = await decodeStep(c, gen, () => x.wlm_generate_next(ctx, tok),
        () => x.wlmjs_generate_resume(ctx, tok, 1));
      const stepMs = performance.now() - t1;
      result.decodeMs += stepMs;
      if (timeStep && rc === 0 && c.readAhead.record(ahead, stepMs)) c.applyReadAhead();
      if (rc < 0) throw c.ctxError(rc);

      const { token, stopReason } = c.readToken(tok, decoder, prev);
      if (rc === STATUS.WLM_DONE) {
        result.stopReason = stopReason;
        finished = true;
        if (token.text) {
          // Text released at the end (held back for a stop string that did not complete):
          // not a token, but consumers building the text need it.
          result.text += token.text;
          yield token;
        }
        break;
      }
      c.previewPrev = prev;
      prev = token.id;
      result.text += token.text;
      if (result.nGenerated++ === 0 && !c.firstTokenMarked) {
        c.firstTokenMarked = true;
        mark('wasmlm:first-token');
      }
      result.logprob += token.logprob;
      yield token;
    }
  } finally {
    if (c.gen === gen) {
      // Ended early (abort, break, error): end the C generation so the context is idle
      // (after wlm_generate_abort, wlm_generate_next returns WLM_DONE without evaluating).
      if (begun && !finished) {
        x.wlm_generate_abort(ctx);
        x.wlm_generate_next(ctx, tok);
      }
      c.gen = null;
      c.busy = null;
    }
    if (begun) publish();
    if (tok) x.wlmjs_free(tok);
    if (promptPtr) x.wlmjs_free(promptPtr);
    if (paramsPtr) c.freeParams(paramsPtr, x);
  }
}
