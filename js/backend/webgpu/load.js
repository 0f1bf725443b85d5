// load.js — a GGUF model loaded for the WebGPU backend without its weights in wasm memory: the
// header (key/values, vocabulary, tensor directory) goes to the C engine first, which loads the
// model with WLM_LOAD_TENSORS_EXTERNAL (src/wasmlm.h: its matrices held elsewhere, only deferred
// contexts allowed); from its description the GPU is checked (kernels for every type, every
// buffer within the adapter's limits, the buffers created) before a byte of the data section is
// read, so that 'auto' can still give the model to the CPU; then the file streams once
// (stream.js): matrices into GPU buffers, vectors into the heap, and C commits the vectors. The
// peak wasm heap is the header + vectors (+ Gemma 4's per-layer embedding table, which the host
// reads: per_layer.js) + the deferred context's scratch, not the file.
// It does not choose the backend (js/backend/select.js does) or parse the file's values (C does).

import { jsError } from '../../runtime/errors.js';
import { peekLayout } from '../../models/split.js';
import { describeModel, modelUnsupported, WebGpuBackend } from './backend.js';
import { createMatrixBuffers, residentPlan, streamTensors } from './stream.js';
import { fuseMatrices, uploadVectors } from './weights.js';

const GGUF_MAGIC = [0x47, 0x47, 0x55, 0x46];

/** Whether the opened source `src` starts like a GGUF file. */
export async function isGguf(src) {
  const head = await src.peek(4);
  return head.byteLength === 4 && GGUF_MAGIC.every((b, i) => head[i] === b);
}

/**
 * Loads the GGUF `src` (an opened source, js/models/source.js / js/models/split.js; closed here) with its
 * matrices on a device of `adapter`. `x`: the engine's exports (wasm32); `newContext(model)`
 * makes the model's deferred context, `freeContext(ctx)` frees one; `modelError(rc, model)` turns a C
 * status into a WasmlmError. Returns {refused: why} when the GPU cannot take the model, decided
 * before the data section is read (nothing is left allocated and `src` is still unread, for the
 * CPU path); else {model, gpu: WebGpuBackend, ctx}. Throws WasmlmError for what fails after the
 * streaming began (WLM_ERR_TRUNCATED naming the tensor, WLM_ERR_FORMAT, WLM_ERR_STATE for a lost
 * device, an AbortError) and for a header C refuses, having freed everything (GPU included).
 */
export async function loadStreamed({ x, src, adapter, adapterInfo, useSubgroups, profile = null, kvType, newContext, freeContext, modelError, onProgress, signal }) {
  const layout = await peekLayout(src);
  let plan;
  try {
    plan = residentPlan(layout);
  } catch (e) { // a type the GPU load cannot size: the CPU may still read the file
    if (e?.code === 'WLM_ERR_UNSUPPORTED') return { refused: `this model cannot run on the GPU yet: ${e.message}`, error: null };
    throw e;
  }
  let ptr = x.wlmjs_malloc(Math.max(4, plan.heapBytes)) >>> 0;
  if (!ptr) throw jsError('WLM_ERR_NOMEM', `cannot allocate ${plan.heapBytes} bytes of wasm memory for the model's header and vectors (and host lookup tables)`);
  const slot = x.wlmjs_malloc(4) >>> 0;
  let model = 0, b = null, ctx = 0, weights = null, keepSource = false;
  try {
    if (!slot) throw jsError('WLM_ERR_NOMEM', 'cannot allocate 4 bytes');
    const heap = new Uint8Array(x.memory.buffer, ptr, plan.heapBytes);
    heap.fill(0);
    heap.set(layout.head.subarray(0, Math.min(layout.head.byteLength, plan.dataOffset)));
    new DataView(x.memory.buffer).setInt32(slot, 0, true);
    const p = ptr;
    ptr = 0; // owned by the model from here, freed by it on failure too
    const rc = x.wlmjs_model_load_external(p, plan.heapBytes, slot);
    model = new DataView(x.memory.buffer).getInt32(slot, true) >>> 0;
    if (rc !== 0) throw modelError(rc, model);
    if (x.wlmjs_model_info(model, 8) !== 1) {
      throw jsError('WLM_ERR_TOKENIZER', 'load(): this model file has no vocabulary: pass `tokenizer` (a llama2.c tokenizer.bin)');
    }
    const desc = describeModel(x, model);
    const why = modelUnsupported(desc);
    if (why) return refuse(`this model cannot run on the GPU yet: ${why}`);
    b = await WebGpuBackend.open({ adapter, adapterInfo, useSubgroups, profile });
    const cap = Math.min(b.device.limits.maxStorageBufferBindingSize, b.device.limits.maxBufferSize);
    try {
      weights = await createMatrixBuffers(b.device, fuseMatrices(desc, cap), plan);
    } catch (e) {
      if (e?.code === 'WLM_ERR_UNSUPPORTED' || e?.code === 'WLM_ERR_NOMEM') return refuse(e.message, e);
      throw e;
    }
    // from here the file is read: a failure is an error, no longer a choice of backend
    await streamTensors({
      x, device: b.device, src, plan, heapPtr: p, gpuTargets: weights.targets, onProgress, signal,
      lost: () => b.lost,
    });
    const rc2 = x.wlm_model_commit_external(model);
    if (rc2 !== 0) throw modelError(rc2, model);
    // described again: the commit placed the vectors (F16 ones converted anew); the matrices'
    // placeholder addresses, the buffers' keys, are the same, and so is what fuseMatrices joins
    const committed = describeModel(x, model);
    const vectors = await uploadVectors(b.device, committed, x.memory);
    ctx = newContext(model);
    const all = { matrix: weights.matrix, vec: vectors.vec, vecOff: vectors.vecOff, bytes: weights.bytes + vectors.bytes };
    weights = null; // the backend's from here
    await b.start({ x, ctx, desc: fuseMatrices(committed, cap), kvType, weights: all });
    const out = { model, gpu: b, ctx };
    model = 0;
    ctx = 0;
    b = null;
    return out;
  } finally {
    if (weights) for (const buf of weights.matrix.values()) buf.destroy();
    b?.release();
    if (ctx) freeContext(ctx);
    if (model) x.wlm_model_free(model);
    if (ptr) x.wlmjs_free(ptr);
    if (slot) x.wlmjs_free(slot);
    if (!keepSource) await src.close();
  }

  /** The GPU cannot take it (nothing read yet): released in `finally`, `src` left open and unread
   *  for the CPU path. */
  function refuse(reason, error = null) {
    keepSource = true;
    return { refused: reason, error };
  }
}
