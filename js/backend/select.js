// select.js — which backend runs a loaded model's forward pass: the CPU (the wasm engine's own
// forward pass, src/model/forward.c) or WebGPU (js/backend/webgpu/). 'cpu' and 'webgpu' are
// what the caller asked for ('webgpu' fails with a WasmlmError naming what is missing, never a
// silent fall-back); 'auto' takes WebGPU only on a real (not fallback, not software) adapter for
// a model whose every weight type has GPU kernels, and says why it did not otherwise. The
// choice is made at load(), where the model is known: for a GGUF before its weights are read
// (streamToGpu: they then stream to the GPU, js/backend/webgpu/load.js), for a llama2.c file
// (or EngineOptions gpuWeights 'heap') after the CPU load (attachBackend: copied from the heap).

import { jsError } from '../runtime/errors.js';
import { findGpu, requestAdapter } from './webgpu/device.js';
import { describeModel, modelUnsupported, WebGpuBackend } from './webgpu/backend.js';
import { isGguf, loadStreamed } from './webgpu/load.js';

export const BACKENDS = Object.freeze(['auto', 'webgpu', 'cpu']);
/** EngineOptions.gpuWeights: how a GGUF's weights reach the GPU. */
export const GPU_WEIGHTS = Object.freeze(['stream', 'heap']);

const softwareReason = (info) => `auto: the WebGPU adapter is ${info.fallback ? 'a fallback' : 'a software'} one (${info.name}), slower than the CPU path`;

/**
 * The streamed GPU load of a GGUF model, before anything of it is in wasm memory. `source`: the
 * opened model (js/models/split.js's openModel); `newContext(model)` makes a deferred context for the
 * model it loads; the other arguments as attachBackend's, plus
 * `gpuWeights` ('stream' | 'heap'), `modelError(rc, model)` (a C status as a WasmlmError),
 * `onProgress`, `signal`, and `probed`: autoWouldUseGpu's {adapter, adapterInfo} when it asked
 * for this load already (the adapter is not requested again). Returns null when this path does
 * not apply (backend 'cpu', a llama2.c file, gpuWeights 'heap': the CPU load and attachBackend
 * follow); {cpu: {reason, adapter}}
 * when 'auto' gives the model to the CPU (decided before its data is read: `source` is left
 * unread and open); else {model, be} with `be` as attachBackend returns it. Throws WasmlmError
 * for 'webgpu' when the GPU cannot take the model (as attachBackend), and for any failure once
 * the weights stream (a truncated file, a lost device, an abort), having freed what it made.
 */
export async function streamToGpu({ x, source, newContext, freeContext, modelError, kvType, kvCache = true, backend = 'auto', gpu = null, useSubgroups = true, gpuWeights = 'stream', memory64 = false, probed = null, profile = null, onProgress, signal }) {
  if (backend === 'cpu' || gpuWeights === 'heap' || !(await isGguf(source))) return null;
  const want = backend === 'webgpu';
  const cpu = (why, adapter = null) => {
    if (want) throw jsError('WLM_ERR_UNSUPPORTED', `backend 'webgpu': ${why}`);
    return { cpu: { reason: `auto: ${why}`, adapter } };
  };
  if (!kvCache) return cpu('a context without KV cache (kvCache: false) runs on the CPU only');
  if (memory64) {
    return cpu("the model is too large for the wasm32 module's 4 GB on the CPU, so it was started in " +
      "the memory64 module, whose heap the GPU backend does not use (backend 'webgpu' streams the " +
      'weights to the GPU with the wasm32 module)');
  }
  let adapter = probed?.adapter, adapterInfo = probed?.adapterInfo;
  if (!adapter) {
    const found = await findGpu(gpu, { importPackage: want });
    if (!found.gpu) return cpu(found.why);
    let why;
    ({ adapter, adapterInfo, why } = await requestAdapter(found.gpu));
    if (!adapter) return cpu(why);
  }
  if (!want && adapterInfo.software) return { cpu: { reason: softwareReason(adapterInfo), adapter: adapterInfo } };
  const r = await loadStreamed({ x, src: source, adapter, adapterInfo, useSubgroups, profile, kvType, newContext, freeContext, modelError, onProgress, signal });
  if (r.refused) {
    if (want) throw r.error ?? jsError('WLM_ERR_UNSUPPORTED', `backend 'webgpu': ${r.refused}`);
    return cpu(r.refused, adapterInfo);
  }
  return {
    model: r.model,
    be: { backend: 'webgpu', reason: want ? `backend 'webgpu' was asked for (${adapterInfo.name})` : `auto: a WebGPU adapter (${adapterInfo.name})`, adapter: adapterInfo, gpu: r.gpu, ctx: r.ctx },
  };
}

/**
 * Whether 'auto' would give a model to this runtime's GPU, asked before the model is read: for a
 * GGUF that only fits the wasm memory when its weights and KV cache are on the GPU (past wasm32's
 * 4 GB; js/engine/engine.js then keeps the wasm32 module and streams, rather than starting the memory64
 * one, or failing where the runtime has no memory64). {ok: true} for a real (not fallback, not
 * software) adapter, with it as {adapter, adapterInfo} for streamToGpu's `probed`, else
 * {ok: false, why}. `gpu`: the option; as 'auto' elsewhere, Node's
 * `webgpu` package is never imported for it. Whether the model's types and sizes suit the GPU is
 * streamToGpu's to say (it refuses before a byte of the weights is read).
 */
export async function autoWouldUseGpu(gpu = null) {
  const found = await findGpu(gpu, { importPackage: false });
  if (!found.gpu) return { ok: false, why: found.why };
  const { adapter, adapterInfo, why } = await requestAdapter(found.gpu);
  if (!adapter) return { ok: false, why };
  if (adapterInfo.software) return { ok: false, why: softwareReason(adapterInfo).replace(/^auto: /, '') };
  return { ok: true, why: '', adapter, adapterInfo };
}

/** Throws WLM_ERR_INVALID_ARG for a `backend` option that is not one of BACKENDS, or a
 *  `gpuWeights` one not in GPU_WEIGHTS. */
export function checkBackendOption(backend, gpuWeights) {
  if (backend !== undefined && !BACKENDS.includes(backend)) {
    throw jsError('WLM_ERR_INVALID_ARG', `backend must be 'auto', 'webgpu' or 'cpu', got ${JSON.stringify(backend)}`);
  }
  if (gpuWeights !== undefined && !GPU_WEIGHTS.includes(gpuWeights)) {
    throw jsError('WLM_ERR_INVALID_ARG', `gpuWeights must be 'stream' or 'heap', got ${JSON.stringify(gpuWeights)}`);
  }
}

/**
 * Picks and sets up the backend of a freshly loaded model and creates its context:
 * {backend: 'cpu' | 'webgpu', reason, adapter: adapter info or null, gpu: WebGpuBackend or null,
 * ctx}. `x`, `model`: the engine's exports and model handle; `newContext(deferred)` creates the
 * context (deferred: kv_cache 2, K/V kept by the GPU, no KV memory in wasm) and
 * `freeContext(ctx)` frees one; `kvType` 'f16' | 'f32', `kvCache` (LoadOptions); `backend`,
 * `gpu`, `useSubgroups`: the options; `cpu` ({reason, adapter}: streamToGpu's verdict) takes the
 * CPU at once. Throws WasmlmError for 'webgpu' when it cannot run (no
 * WebGPU, no adapter, an unsupported type, a buffer above the adapter's limits, GPU memory),
 * having freed what it created; 'auto' then takes the CPU and says why.
 */
export async function attachBackend({ x, model, newContext, freeContext, kvType, kvCache = true, backend = 'auto', gpu = null, useSubgroups = true, memory64 = false, profile = null, cpu: verdict = null }) {
  const onCpu = (reason, adapter = null) => ({ backend: 'cpu', reason, adapter, gpu: null, ctx: newContext(false) });
  if (verdict) return onCpu(verdict.reason, verdict.adapter);
  if (backend === 'cpu') return onCpu("backend 'cpu' was asked for");
  const want = backend === 'webgpu';
  const cpu = (why) => {
    if (want) throw jsError('WLM_ERR_UNSUPPORTED', `backend 'webgpu': ${why}`);
    return onCpu(`auto: ${why}`);
  };
  if (!kvCache) return cpu('a context without KV cache (kvCache: false) runs on the CPU only');
  if (memory64) {
    return cpu('the model needs the memory64 (wasm64) module, whose heap the GPU backend does not copy weights ' +
      "from (a GGUF loaded without `tokenizer` streams to the GPU instead, with gpuWeights 'stream')");
  }
  const desc = describeModel(x, model);
  const unsupported = modelUnsupported(desc);
  if (unsupported) return cpu(`this model cannot run on the GPU yet: ${unsupported}`);
  const found = await findGpu(gpu, { importPackage: want });
  if (!found.gpu) return cpu(found.why);
  const { adapter, adapterInfo, why } = await requestAdapter(found.gpu);
  if (!adapter) return cpu(why);
  if (!want && adapterInfo.software) {
    return onCpu(softwareReason(adapterInfo), adapterInfo);
  }
  const ctx = newContext(true);
  let b;
  try {
    b = await WebGpuBackend.attach({ x, ctx, desc, adapter, adapterInfo, kvType, useSubgroups, profile });
  } catch (e) {
    freeContext(ctx);
    if (want) throw e;
    return onCpu(`auto: ${e.message}`, adapterInfo);
  }
  return { backend: 'webgpu', reason: want ? `backend 'webgpu' was asked for (${adapterInfo.name})` : `auto: a WebGPU adapter (${adapterInfo.name})`, adapter: adapterInfo, gpu: b, ctx };
}
