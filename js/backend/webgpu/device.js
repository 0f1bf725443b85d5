// device.js — a WebGPU device for the engine: finds the GPU object (the `gpu` option,
// navigator.gpu in a page or worker, or in Node the optional `webgpu` package), asks for an
// adapter, describes it (name, whether it is a software or fallback adapter, subgroups,
// shader-f16, the buffer limits a model must fit in), and requests a device with the adapter's
// largest buffer limits and the features the kernels can use. It runs no kernel.

import { jsError } from '../../runtime/errors.js';

/** Adapters that are not a real GPU: WebGPU's fallback adapter, or a CPU rasterizer. */
const SOFTWARE = /swiftshader|llvmpipe|lavapipe|softpipe|warp|microsoft basic render|cpu/i;

/**
 * The GPU object to use: `gpu` when given (a GPU: navigator.gpu, or the `webgpu` package's
 * create([])), else navigator.gpu, else in Node, when `importPackage` (backend 'webgpu' asked
 * for explicitly), the `webgpu` package if it is installed: 'auto' never starts Dawn in a Node
 * process by itself (a GPU probe at every load of a server or test process). Returns {gpu, why}:
 * gpu null with `why` saying what is missing.
 */
export async function findGpu(gpu, { importPackage = true } = {}) {
  if (gpu != null) {
    if (typeof gpu.requestAdapter !== 'function') {
      throw jsError('WLM_ERR_INVALID_ARG', '`gpu` must be a GPU object (navigator.gpu, or the webgpu package\'s create([])), with requestAdapter()');
    }
    return { gpu, why: '' };
  }
  if (globalThis.navigator?.gpu) return { gpu: globalThis.navigator.gpu, why: '' };
  if (typeof process === 'object' && process.versions?.node) {
    if (!importPackage) return { gpu: null, why: "Node has no navigator.gpu: pass `gpu` (the webgpu package's create([])) or backend 'webgpu'" };
    try {
      const spec = 'webgpu'; // a variable, so that bundlers leave the optional package alone
      const mod = await import(spec);
      return { gpu: mod.create([]), why: '' };
    } catch (e) {
      return { gpu: null, why: `no WebGPU in this Node: install the \`webgpu\` package or pass \`gpu\` (${e.message.split('\n')[0]})` };
    }
  }
  return { gpu: null, why: 'this runtime has no WebGPU (navigator.gpu is undefined)' };
}

/**
 * What an adapter offers: {name, vendor, architecture, description, software, fallback,
 * subgroups, f16, limits: {maxBufferSize, maxStorageBufferBindingSize,
 * maxComputeWorkgroupsPerDimension}}.
 */
export function describeAdapter(adapter) {
  const info = adapter.info ?? {};
  const fallback = Boolean(info.isFallbackAdapter ?? adapter.isFallbackAdapter);
  const text = [info.vendor, info.architecture, info.device, info.description].filter(Boolean).join(' ');
  const l = adapter.limits;
  return {
    name: (info.description || [info.vendor, info.architecture].filter(Boolean).join(' ') || 'unknown adapter').trim(),
    vendor: info.vendor ?? '', architecture: info.architecture ?? '', description: info.description ?? '',
    fallback, software: fallback || SOFTWARE.test(text),
    subgroups: adapter.features.has('subgroups'),
    f16: adapter.features.has('shader-f16'),
    limits: {
      maxBufferSize: l.maxBufferSize,
      maxStorageBufferBindingSize: l.maxStorageBufferBindingSize,
      maxComputeWorkgroupsPerDimension: l.maxComputeWorkgroupsPerDimension,
    },
  };
}

/**
 * Asks `gpu` for a high-performance adapter: {adapter, adapterInfo} or {adapter: null, why}.
 */
export async function requestAdapter(gpu) {
  let adapter = null;
  try {
    adapter = await gpu.requestAdapter({ powerPreference: 'high-performance' });
  } catch (e) {
    return { adapter: null, why: `requestAdapter() failed: ${e.message}` };
  }
  if (!adapter) return { adapter: null, why: 'the runtime has WebGPU but offers no adapter (no usable GPU or driver)' };
  return { adapter, adapterInfo: describeAdapter(adapter) };
}

/**
 * A device on `adapter` with its largest buffer limits and, when offered and not refused by
 * `useSubgroups: false`, the subgroups feature; with `timestamps` (GPU_PROFILE) also
 * timestamp-query where offered. `onLost(info)` runs when the device is lost
 * (not when destroy() is called by us: reason 'destroyed' is passed too; the caller decides);
 * `onError(message)` for every error no error scope caught (a command that failed validation:
 * its results are garbage, which the caller must not use).
 */
export async function requestDevice(adapter, { useSubgroups = true, timestamps = false, onLost, onError } = {}) {
  const features = [];
  if (useSubgroups && adapter.features.has('subgroups')) features.push('subgroups');
  if (timestamps && adapter.features.has('timestamp-query')) features.push('timestamp-query');
  const l = adapter.limits;
  const requiredLimits = {
    maxBufferSize: l.maxBufferSize,
    maxStorageBufferBindingSize: l.maxStorageBufferBindingSize,
    maxStorageBuffersPerShaderStage: Math.min(l.maxStorageBuffersPerShaderStage, 8),
  };
  let device;
  try {
    device = await adapter.requestDevice({ requiredFeatures: features, requiredLimits });
  } catch (e) {
    throw jsError('WLM_ERR_UNSUPPORTED', `WebGPU: requestDevice() failed: ${e.message}`);
  }
  if (onLost) device.lost.then((info) => onLost(info));
  if (onError) {
    const handler = (ev) => onError(String(ev?.error?.message ?? ev));
    if (typeof device.addEventListener === 'function') device.addEventListener('uncapturederror', handler);
    else device.onuncapturederror = handler;
  }
  return { device, subgroups: features.includes('subgroups') };
}
