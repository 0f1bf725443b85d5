// _webgpu.mjs — WebGPU for the tests: Dawn (the `webgpu` package) on a software Vulkan driver,
// one of two: lavapipe (Mesa's, which tools/lavapipe.sh unpacks into .tools/lavapipe: it offers
// shader-f16, and runs the engine tests about twice as fast) or SwiftShader (Chromium's, which
// tools/setup.sh installs with `chromium`, /usr/lib/chromium). Both ICDs are listed in
// VK_ICD_FILENAMES, set here before Dawn starts unless the caller set it or VK_DRIVER_FILES (then
// Dawn's default adapter of that list is used: bench/device.sh's real GPU), and Dawn picks one by name
// (create(['adapter=…'])). Which: WASMLM_TEST_ADAPTER=lavapipe|swiftshader, else lavapipe where
// it is unpacked. tools/test.sh runs the kernel tests on the other one too, so every WGSL kernel
// runs on two independent compilers. Where no adapter comes up, tests skip with the reason,
// except in CI (env CI set), where they fail: CI installs what they need, both drivers.

import fs from 'node:fs';
import os from 'node:os';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import assert from 'node:assert/strict';
import { REPO } from './_helpers.mjs';
import { makePipeline, Pipelines } from '../../js/backend/webgpu/forward.js';
import { describeModel } from '../../js/backend/webgpu/backend.js';
import { pleHostTable } from '../../js/backend/webgpu/per_layer.js';
import { ggufBytes, readGguf } from '../../tools/vocab_gguf.mjs';
import { createEngine } from '../../js/wasmlm.js';

export const SWIFTSHADER_ICD = '/usr/lib/chromium/vk_swiftshader_icd.json';
export const LAVAPIPE_ICD = resolve(REPO, '.tools/lavapipe/lvp_icd.json');
/** The two drivers: their ICD file, and the adapter name Dawn's `adapter=` option matches. */
const DRIVERS = {
  lavapipe: { icd: LAVAPIPE_ICD, adapter: 'llvmpipe', how: 'run tools/lavapipe.sh (as root the first time)' },
  swiftshader: { icd: SWIFTSHADER_ICD, adapter: 'SwiftShader', how: 'run tools/setup.sh (chromium)' },
};

/** The driver the tests use: WASMLM_TEST_ADAPTER, else lavapipe where unpacked, else SwiftShader. */
export function testDriver() {
  const want = process.env.WASMLM_TEST_ADAPTER;
  if (want) {
    if (!DRIVERS[want]) throw new Error(`WASMLM_TEST_ADAPTER must be lavapipe or swiftshader, got ${want}`);
    return want;
  }
  return fs.existsSync(LAVAPIPE_ICD) ? 'lavapipe' : 'swiftshader';
}

let found = null;

/**
 * {gpu, adapter, skip, driver}: a GPU object with an adapter of testDriver()'s driver (or of
 * the caller's VK_ICD_FILENAMES / VK_DRIVER_FILES: driver 'env'), or skip = why there is none
 * (and in CI a thrown Error instead, also when lavapipe is missing: CI runs both).
 */
export async function dawn() {
  if (found) return found;
  const callerIcd = !!(process.env.VK_ICD_FILENAMES || process.env.VK_DRIVER_FILES); // bench/device.sh's GPU
  const driver = callerIcd ? 'env' : testDriver();
  if (!callerIcd) {
    const icds = Object.values(DRIVERS).map((d) => d.icd).filter((f) => fs.existsSync(f));
    if (icds.length) process.env.VK_ICD_FILENAMES = icds.join(':');
  }
  process.env.XDG_RUNTIME_DIR ??= os.tmpdir(); // else the driver prints an error for each device
  let skip = '';
  let gpu = null;
  let adapter = null;
  const d = DRIVERS[driver];
  try {
    const { create } = await import('webgpu');
    if (d && !fs.existsSync(d.icd)) {
      skip = `no ${driver} Vulkan driver (${d.icd}): ${d.how}`;
    } else {
      gpu = create(d ? [`adapter=${d.adapter}`] : []);
      adapter = await gpu.requestAdapter();
      if (!adapter) skip = `Dawn found no Vulkan adapter${d ? ` named ${d.adapter} (${d.how})` : ` in ${process.env.VK_ICD_FILENAMES ? `VK_ICD_FILENAMES=${process.env.VK_ICD_FILENAMES}` : `VK_DRIVER_FILES=${process.env.VK_DRIVER_FILES}`}`}`;
    }
  } catch (e) {
    skip = `the webgpu package did not load (npm ci): ${e.message}`;
  }
  if (process.env.CI && !callerIcd && !skip && !fs.existsSync(LAVAPIPE_ICD)) skip = `no lavapipe (${LAVAPIPE_ICD}): ${DRIVERS.lavapipe.how}`;
  if (skip && process.env.CI) throw new Error(`WebGPU tests need Dawn with lavapipe and SwiftShader in CI: ${skip}`);
  found = { gpu, adapter, skip, driver };
  return found;
}

/** A fresh wasm instance of dist/wasmlm.wasm, for the C references (quantize, dequantize, f16). */
export function wasmReference() {
  const mod = new WebAssembly.Module(readFileSync(resolve(REPO, 'dist/wasmlm.wasm')));
  const x = new WebAssembly.Instance(mod, { env: { emscripten_notify_memory_growth() {} } }).exports;
  x._initialize?.();
  return x;
}


/** Seeded uniform numbers in [-1, 1). */
export function rng(seed) {
  let s = seed >>> 0;
  return () => { s = (Math.imul(s, 1664525) + 1013904223) >>> 0; return s / 2 ** 31 - 1; };
}

/**
 * The kernel tests' tools on `device` with the C references of `x` (wasmReference()):
 * {run, weights}.
 */
export function kernelKit(device, x) {
  const STORAGE = 128, COPY_SRC = 4, COPY_DST = 8, MAP_READ = 1;
  /**
   * Runs `code` once: binding 0 the activations A (Float32Array), 1 the 16 parameter words, 2.. the
   * typed arrays of `extra`; returns [A, ...extra] as read back (ArrayBuffers).
   */
  const pipes = new Map(); // code → pipeline: SwiftShader's compile is most of a kernel test's time
  async function run(code, { A, params, extra = [], grid }) {
    if (!pipes.has(code)) pipes.set(code, await makePipeline(device, code, 'test'));
    const pipe = pipes.get(code);
    const mk = (data) => {
      const b = device.createBuffer({ size: Math.max(16, (data.byteLength + 3) & ~3), usage: STORAGE | COPY_SRC | COPY_DST, mappedAtCreation: true });
      new Uint8Array(b.getMappedRange()).set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
      b.unmap();
      return b;
    };
    const bufs = [A, ...extra].map(mk);
    const words = new Uint32Array(16);
    words.set(params.map((v) => v >>> 0));
    const pbuf = device.createBuffer({ size: 64, usage: 64 | COPY_DST });
    device.queue.writeBuffer(pbuf, 0, words);
    const entries = [{ binding: 0, resource: { buffer: bufs[0] } }, { binding: 1, resource: { buffer: pbuf } },
      ...bufs.slice(1).map((b, i) => ({ binding: 2 + i, resource: { buffer: b } }))];
    const enc = device.createCommandEncoder();
    const pass = enc.beginComputePass();
    pass.setPipeline(pipe);
    pass.setBindGroup(0, device.createBindGroup({ layout: pipe.getBindGroupLayout(0), entries }));
    pass.dispatchWorkgroups(...grid);
    pass.end();
    const reads = bufs.map((b) => {
      const r = device.createBuffer({ size: b.size, usage: MAP_READ | COPY_DST });
      enc.copyBufferToBuffer(b, 0, r, 0, b.size);
      return r;
    });
    device.queue.submit([enc.finish()]);
    const out = [];
    for (const r of reads) {
      await r.mapAsync(1);
      out.push(r.getMappedRange().slice(0));
      r.destroy();
    }
    for (const b of [...bufs, pbuf]) b.destroy();
    return out;
  }

  /** `rows` × `cols` weights of `type` from seeded floats, through the C quantizer: {bytes, deq}. */
  function weights(type, rows, cols, seed) {
    const r = rng(seed);
    const f = new Float32Array(rows * cols);
    for (let i = 0; i < f.length; i++) f[i] = r() * (1 + (i % 7)) * 0.25; // uneven magnitudes per block
    const src = x.wlmjs_malloc(f.byteLength) >>> 0;
    new Float32Array(x.memory.buffer, src, f.length).set(f);
    let bytes;
    if (type === 0) {
      bytes = new Uint8Array(f.buffer.slice(0));
    } else {
      const n = x.wlmjs_quantize_rows(type, 0, 0, rows, cols); // src NULL: the size only
      assert.ok(n > 0, `type ${type}: no quantizer for rows of ${cols}`);
      const dst = x.wlmjs_malloc(n) >>> 0;
      x.wlmjs_quantize_rows(type, src, dst, rows, cols);
      bytes = new Uint8Array(x.memory.buffer, dst, n).slice();
      x.wlmjs_free(dst);
    }
    const q = x.wlmjs_malloc(bytes.length) >>> 0;
    new Uint8Array(x.memory.buffer, q, bytes.length).set(bytes);
    assert.equal(x.wlmjs_dequantize(type, q, src, rows * cols), rows * cols, `dequantize type ${type}`);
    const deq = new Float32Array(x.memory.buffer, src, rows * cols).slice();
    x.wlmjs_free(q);
    x.wlmjs_free(src);
    return { bytes, deq, rowBytes: bytes.length / rows };
  }
  return { run, weights };
}

/** The index of the largest logit. */
export const argmax = (v) => { let b = 0; for (let i = 1; i < v.length; i++) if (v[i] > v[b]) b = i; return b; };

/** The top-2 margin of logits v (how near a tie the greedy choice is). */
export const margin = (v) => {
  let a = -Infinity, b = -Infinity;
  for (const x of v) { if (x > a) { b = a; a = x; } else if (x > b) b = x; }
  return a - b;
};

/** max |a − b| and max |a|. */
export function diff(a, b) {
  let d = 0, m = 0;
  for (let i = 0; i < a.length; i++) { d = Math.max(d, Math.abs(a[i] - b[i])); m = Math.max(m, Math.abs(a[i])); }
  return { d, m };
}

/** `file` with every tensor dequantized to F32 by C (wlmjs_dequantize), written beside it once:
 *  the CPU reference of a quantized file's GPU run (webgpu_engine.test.mjs explains why). */
export function dequantizedCopy(file) {
  const out = file.replace(/\.gguf$/, '-dequantized.gguf');
  if (fs.existsSync(out) && fs.statSync(out).mtimeMs >= fs.statSync(file).mtimeMs) return out;
  const g = readGguf(file);
  const bytes = fs.readFileSync(file);
  const x = wasmReference();
  const tensors = g.tensors.map((t) => {
    const n = t.ne.reduce((a, b) => a * b, 1);
    const at = g.dataOffset + t.offset;
    if (t.type === 0) return { name: t.name, ne: t.ne, type: 0, data: bytes.subarray(at, at + n * 4) };
    const next = g.tensors.filter((u) => u.offset > t.offset).reduce((m, u) => Math.min(m, u.offset), bytes.length - g.dataOffset);
    const src = x.wlmjs_malloc(next - t.offset) >>> 0, dst = x.wlmjs_malloc(n * 4) >>> 0;
    new Uint8Array(x.memory.buffer, src, next - t.offset).set(bytes.subarray(at, g.dataOffset + next));
    assert.equal(x.wlmjs_dequantize(t.type, src, dst, n), n, `dequantize ${t.name}`);
    const data = Buffer.from(new Float32Array(x.memory.buffer, dst, n).slice().buffer);
    x.wlmjs_free(src);
    x.wlmjs_free(dst);
    return { name: t.name, ne: t.ne, type: 0, data };
  });
  const kv = g.kv.filter(([k]) => k !== 'general.file_type');
  fs.writeFileSync(out, ggufBytes(kv, tensors, g.alignment));
  return out;
}

/**
 * A synthetic model loaded whole into the wasm instance `x` with a deferred context (F16 KV,
 * nCtx positions, default 64): {model, ctx, desc (describeModel), opts(device, subgroups): GpuForward.create's
 * options from the context's fields}, for tests that drive GpuForward directly.
 */
export function deferredModel(x, file, nCtx = 64) {
  const bytes = fs.readFileSync(file);
  const ptr = x.wlmjs_malloc(bytes.length) >>> 0, slot = x.wlmjs_malloc(8) >>> 0;
  new Uint8Array(x.memory.buffer, ptr, bytes.length).set(bytes);
  assert.equal(x.wlmjs_model_load(ptr, bytes.length, slot), 0);
  const model = new Int32Array(x.memory.buffer, slot, 1)[0];
  assert.equal(x.wlmjs_context_new(model, nCtx, 2, 1, 1, 0, 0, -1, slot), 0); // deferred, F16 KV
  const ctx = new Int32Array(x.memory.buffer, slot, 1)[0];
  x.wlmjs_free(slot);
  const f = (i) => x.wlmjs_deferred_field(ctx, i);
  const desc = describeModel(x, model);
  const pleTable = pleHostTable(x, desc.tensors.ple_embd); // (Gemma 4's per-layer embeddings; kept for the instance's life)
  const opts = (device, subgroups) => ({ kvF16: true, nCtx: f(9), ropeSets: f(7), mscale: f(8), pleTable,
    ropeFreq: new Float32Array(x.memory.buffer, f(6) >>> 0, f(7) * desc.hp.n_rot / 2).slice(), pipelines: new Pipelines(device, { subgroups }) });
  return { model, ctx, desc, opts };
}

/**
 * `gpu` (dawn()'s) as if its adapter's buffer limits were `cap` bytes: the adapter's and its
 * devices' `limits` read maxStorageBufferBindingSize and maxBufferSize `cap` (the device itself
 * is the real one, created with the real limits: WebGPU grants no less than its defaults), so the
 * backend sizes and checks its buffers as on such an adapter. A test hook, not an emulation.
 */
export function limitedGpu(gpu, cap) {
  const over = { maxStorageBufferBindingSize: cap, maxBufferSize: cap };
  const wrap = (target, extra = {}) => new Proxy(target, {
    get(t, k) {
      if (k === 'limits') {
        const l = {};
        for (const n in t.limits) l[n] = t.limits[n];
        return Object.assign(l, over);
      }
      if (k in extra) return extra[k];
      const v = t[k];
      return typeof v === 'function' ? v.bind(t) : v;
    },
    set(t, k, v) { t[k] = v; return true; },
  });
  return {
    requestAdapter: async (opts) => {
      const a = await gpu.requestAdapter(opts);
      if (!a) return a;
      const real = { maxStorageBufferBindingSize: a.limits.maxStorageBufferBindingSize, maxBufferSize: a.limits.maxBufferSize };
      return wrap(a, { requestDevice: async (d = {}) => wrap(await a.requestDevice({ ...d, requiredLimits: { ...d.requiredLimits, ...real } })) });
    },
  };
}

/** Top-two logit margin below which two backends may pick either token (a near-tie). */
export const NEAR_TIE = 0.01;

/**
 * The engine tests' comparison of a GPU engine `g` with a CPU engine `cpu` that hold the same
 * model: `ids` evaluated on both (a prefill), then up to 6 greedy decode steps of the CPU's
 * argmax; at each step every logit within tol · (1 + max |logit|) of the CPU's (diff) and the
 * same argmax, stopping after a step whose CPU margin is a near-tie (either may pick). With a
 * node:test context `t`, each step's relative difference as a diagnostic. Returns the number of
 * steps compared.
 */
export async function assertGpuTracksCpu(cpu, g, ids, { tol, t = null }) {
  let steps = 0;
  for (let step = 0; step < 7; step++) {
    const a = await cpu.evalTokens(ids);
    const b = await g.evalTokens(ids);
    const { d, m } = diff(a, b);
    assert.ok(d <= tol * (1 + m), `step ${step}: max |diff| ${d} > ${tol} · (1 + ${m})`);
    t?.diagnostic(`step ${step}: max |diff| / (1 + max |logit|) ${(d / (1 + m)).toExponential(2)}`);
    steps++;
    if (margin(a) < NEAR_TIE) break; // a near-tie: the two may pick either
    assert.equal(argmax(b), argmax(a), `step ${step}: greedy ids differ`);
    ids = [argmax(a)];
  }
  return steps;
}

/**
 * A CPU engine and a WebGPU engine (on `gpu`, one thread each), both loaded with `opts`, the GPU
 * one `file` (asserted to run on WebGPU), the CPU one cpuModel (default `file`; e.g. the
 * dequantized copy of a quantized file): fn(cpu, g, the GPU load's info)'s result; both engines
 * freed after it.
 */
export async function withGpuPair(gpu, file, opts, fn, { cpuModel = file, engine = {} } = {}) {
  const cpu = await createEngine({ threads: 1, backend: 'cpu' });
  const g = await createEngine({ threads: 1, backend: 'webgpu', gpu, ...engine });
  try {
    await cpu.load({ model: cpuModel, ...opts });
    const info = await g.load({ model: file, ...opts });
    assert.equal(info.backend, 'webgpu', info.backendReason);
    return await fn(cpu, g, info);
  } finally {
    await cpu.free();
    await g.free();
  }
}
