// select.js — which backend runs a loaded model's forward pass: the CPU (the wasm engine's own
// forward pass, src/model/forward.c) or WebGPU (js/backend/webgpu/). 'cpu' and 'webgpu' are
// what the caller asked for ('webgpu' fails with a WasmlmError naming what is missing, never a
// silent fall-back); 'auto' takes WebGPU only on a real (not fallback, not software) adapter for
// a model whose every weight type has GPU kernels, and says why it did not otherwise. The
// choice is made at load(), where the model is known.

import { jsError } from '../errors.js';
import { findGpu, requestAdapter } from './webgpu/device.js';
import { describeModel, modelUnsupported, WebGpuBackend } from './webgpu/backend.js';

export const BACKENDS = Object.freeze(['auto', 'webgpu', 'cpu']);

/** Throws WLM_ERR_INVALID_ARG for a `backend` option that is not one of BACKENDS. */
export function checkBackendOption(backend) {
  if (backend !== undefined && !BACKENDS.includes(backend)) {
    throw jsError('WLM_ERR_INVALID_ARG', `backend must be 'auto', 'webgpu' or 'cpu', got ${JSON.stringify(backend)}`);
  }
}

/**
 * Picks and sets up the backend of a freshly loaded model and creates its context:
 * {backend: 'cpu' | 'webgpu', reason, adapter: adapter info or null, gpu: WebGpuBackend or null,
 * ctx}. `x`, `model`: the engine's exports and model handle; `newContext(deferred)` creates the
 * context (deferred: kv_cache 2, K/V kept by the GPU, no KV memory in wasm) and
 * `freeContext(ctx)` frees one; `kvType` 'f16' | 'f32', `kvCache` (LoadOptions); `backend`,
 * `gpu`, `useSubgroups`: the options. Throws WasmlmError for 'webgpu' when it cannot run (no
 * WebGPU, no adapter, an unsupported type, a buffer above the adapter's limits, GPU memory),
 * having freed what it created; 'auto' then takes the CPU and says why.
 */
export async function attachBackend({ x, model, newContext, freeContext, kvType, kvCache = true, backend = 'auto', gpu = null, useSubgroups = true, memory64 = false }) {
  const onCpu = (reason, adapter = null) => ({ backend: 'cpu', reason, adapter, gpu: null, ctx: newContext(false) });
  if (backend === 'cpu') return onCpu("backend 'cpu' was asked for");
  const want = backend === 'webgpu';
  const cpu = (why) => {
    if (want) throw jsError('WLM_ERR_UNSUPPORTED', `backend 'webgpu': ${why}`);
    return onCpu(`auto: ${why}`);
  };
  if (!kvCache) return cpu('a context without KV cache (kvCache: false) runs on the CPU only');
  if (memory64) {
    return cpu('the model needs the memory64 (wasm64) module, whose weights the GPU backend cannot read yet ' +
      '(it copies them from the wasm32 heap; streaming them to the GPU is a later step)');
  }
  const desc = describeModel(x, model);
  const unsupported = modelUnsupported(desc);
  if (unsupported) return cpu(`this model cannot run on the GPU yet: ${unsupported}`);
  const found = await findGpu(gpu, { importPackage: want });
  if (!found.gpu) return cpu(found.why);
  const { adapter, adapterInfo, why } = await requestAdapter(found.gpu);
  if (!adapter) return cpu(why);
  if (!want && adapterInfo.software) {
    return onCpu(`auto: the WebGPU adapter is ${adapterInfo.fallback ? 'a fallback' : 'a software'} one (${adapterInfo.name}), slower than the CPU path`, adapterInfo);
  }
  const ctx = newContext(true);
  let b;
  try {
    b = await WebGpuBackend.attach({ x, ctx, desc, adapter, adapterInfo, kvType, useSubgroups });
  } catch (e) {
    freeContext(ctx);
    if (want) throw e;
    return onCpu(`auto: ${e.message}`, adapterInfo);
  }
  return { backend: 'webgpu', reason: want ? `backend 'webgpu' was asked for (${adapterInfo.name})` : `auto: a WebGPU adapter (${adapterInfo.name})`, adapter: adapterInfo, gpu: b, ctx };
}
