// The WebGPU backend's streamed load (js/backend/webgpu/load.js, stream.js): a GGUF's weight
// matrices go from the file to GPU buffers chunk by chunk, only its header and vectors to the
// wasm heap (WLM_LOAD_TENSORS_EXTERNAL). Checked on Dawn (lavapipe or SwiftShader, tests/js/_webgpu.mjs):
// - the logits equal, bit for bit, those of the heap-copy load (gpuWeights 'heap': the whole
//   file in wasm memory, then copied to the GPU) for every architecture × type the engine test
//   covers, over a prompt and a decode step: the same bytes reach the same kernels;
// - the wasm heap grows by far less than the file (a 135M-parameter Q8_0 model: < 10 %; the
//   heap-copy load by > 90 %, which shows the measure can fail);
// - a split GGUF's parts stream as one file; Blobs stream;
// - a truncated file, a non-finite F16 weight: a clear error naming the tensor, and the engine
//   then loads another model; an abort mid-stream rejects with an AbortError; a device lost
//   mid-stream is WLM_ERR_STATE, and the engine loads again;
// - the offsets: a 32 GB sparse file (Llama-3.1-8B's F32 shape, header and vectors only) loads
//   its header in wasm32 and is refused before any weight is read, naming the tensor and the
//   adapter's limit; the router places a tensor past 2^32 exactly (no 32-bit offset anywhere).
// The router and the resident plan are also checked without a GPU.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { dawn } from './_webgpu.mjs';
import { createEngine } from '../../js/wasmlm.js';
import { synthCached, writeHeaderOnly } from '../../tools/synth_gguf.mjs';
import { splitGguf } from '../../tools/gguf_split.mjs';
import { readGgufLayout } from '../../js/models/split.js';
import { firstNonFinite, residentPlan, Router } from '../../js/backend/webgpu/stream.js';

const { gpu, skip: why } = await dawn();
const skip = why || false;
const PROMPT = 'Once upon a time there was';
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-gpustream-'));
process.on('exit', () => fs.rmSync(tmp, { recursive: true, force: true }));

/** A GPU object whose adapter reports `limits` (others as Dawn's). */
function limitedGpu(limits) {
  return {
    async requestAdapter(o) {
      const ad = await gpu.requestAdapter(o);
      const all = Object.fromEntries(Object.keys(Object.getPrototypeOf(ad.limits)).map((k) => [k, ad.limits[k]]));
      for (const [k, v] of Object.entries(limits)) all[k] = Math.min(all[k], v); // lower, never raise
      return new Proxy(ad, {
        get(t, k) {
          if (k === 'limits') return all;
          if (k === 'requestDevice') return async (d) => new Proxy(await ad.requestDevice(d), { get: (dv, kk) => (kk === 'limits' ? all : typeof dv[kk] === 'function' ? dv[kk].bind(dv) : dv[kk]) });
          const v = Reflect.get(t, k);
          return typeof v === 'function' ? v.bind(t) : v;
        },
      });
    },
  };
}

/** Logits of the prompt's last token, then of one greedy decode step. */
async function twoSteps(e) {
  const ids = Array.from(await e.tokenize(PROMPT));
  const a = await e.evalTokens(ids);
  let best = 0;
  for (let i = 1; i < a.length; i++) if (a[i] > a[best]) best = i;
  return [a, await e.evalTokens([best])];
}

const cases = [];
for (const arch of ['llama', 'qwen2', 'qwen3', 'gemma3', 'phi3', 'gpt2']) {
  for (const type of ['F32', 'Q8_0', 'Q4_K_M']) cases.push({ arch, type });
}
for (const type of ['F16', 'BF16', 'Q4_0', 'Q4_1', 'Q2_K', 'Q3_K', 'Q5_K_M']) cases.push({ arch: 'gpt2', type });

test('streamed load: logits bit for bit those of the heap-copy load, every architecture and type', { skip }, async () => {
  const streamed = await createEngine({ threads: 1, backend: 'webgpu', gpu });
  const heap = await createEngine({ threads: 1, backend: 'webgpu', gpu, gpuWeights: 'heap' });
  try {
    for (const { arch, type } of cases) {
      const file = synthCached({ arch, type });
      const progress = [];
      const a = await streamed.load({ model: file, onProgress: (p) => progress.push(p) });
      const b = await heap.load({ model: file });
      assert.equal(a.backend, 'webgpu');
      assert.equal(a.gpuBytes, b.gpuBytes, `${arch} ${type}: GPU bytes`);
      const size = fs.statSync(file).size;
      assert.deepEqual(progress.at(-1), { stage: 'model', loaded: size, total: size }, `${arch} ${type}: last progress report`);
      const [s1, s2] = await twoSteps(streamed);
      const [h1, h2] = await twoSteps(heap);
      assert.deepEqual(s1, h1, `${arch} ${type}: prompt logits differ`);
      assert.deepEqual(s2, h2, `${arch} ${type}: decode logits differ`);
    }
  } finally {
    await streamed.free();
    await heap.free();
  }
});

test('streamed load: the wasm heap grows by < 10 % of the file (135M parameters, Q8_0), the heap copy by > 90 %', { skip }, async (tc) => {
  const file = synthCached({ arch: 'llama', shape: 'smollm2-135m', type: 'Q8_0' });
  const size = fs.statSync(file).size;
  // wasm memory only grows: its size after load() is the load's peak (engine.wasmMemoryBytes
  // before it: the fresh module's)
  const grow = async (opts) => {
    const e = await createEngine({ threads: 1, backend: 'webgpu', gpu, ...opts });
    try {
      const before = e.wasmMemoryBytes;
      const info = await e.load({ model: file, nCtx: 256 });
      assert.equal(info.backend, 'webgpu');
      return { growth: e.wasmMemoryBytes - before, info };
    } finally {
      await e.free();
    }
  };
  const s = await grow({});
  const h = await grow({ gpuWeights: 'heap' });
  tc.diagnostic(`file ${size} bytes; wasm memory grew by ${s.growth} (streamed), ${h.growth} (heap copy)`);
  // the header (49k-token vocabulary) + vectors + the deferred context's scratch: a few MB. The
  // heap copy's growth is the file less what the fresh module's free heap already held.
  assert.ok(s.growth < 0.1 * size, `streamed: the heap grew by ${s.growth} bytes for a ${size}-byte file`);
  assert.ok(h.growth > 0.9 * size, `heap copy: the heap grew by ${h.growth} bytes for a ${size}-byte file`);
  assert.equal(s.info.gpuBytes, h.info.gpuBytes);
});

test('streamed load: the device lost mid-stream is a clear error, and the engine loads again', { skip }, async () => {
  const file = synthCached({ arch: 'llama', shape: 'smollm2-135m', type: 'Q8_0' }); // 9 chunks of 16 MB
  let device = null;
  const watching = {
    async requestAdapter(o) {
      const ad = await gpu.requestAdapter(o);
      return new Proxy(ad, {
        get(t, k) {
          if (k === 'requestDevice') return async (d) => { device = await ad.requestDevice(d); return device; };
          const v = Reflect.get(t, k);
          return typeof v === 'function' ? v.bind(t) : v;
        },
      });
    },
  };
  const e = await createEngine({ threads: 1, backend: 'webgpu', gpu: watching });
  try {
    let destroyed = false;
    await assert.rejects(e.load({ model: file, nCtx: 256, onProgress: (p) => { if (p.loaded > 0 && !destroyed) { destroyed = true; device.destroy(); } } }),
      { code: 'WLM_ERR_STATE', message: /GPU device was lost while the weights were streamed/ });
    assert.ok(destroyed);
    assert.equal(e.info, null);
    const info = await e.load({ model: synthCached({ arch: 'qwen3', type: 'Q8_0' }) });
    assert.equal(info.backend, 'webgpu');
    const [l] = await twoSteps(e);
    assert.ok(l.every(Number.isFinite));
  } finally {
    await e.free();
  }
});

test('streamed load: a split GGUF\'s parts and a Blob stream as the whole file does', { skip }, async () => {
  const file = synthCached({ arch: 'phi3', type: 'Q8_0' });
  const parts = splitGguf(file, { maxBytes: 300_000, prefix: path.join(tmp, 'phi3') });
  assert.ok(parts.length >= 3, `${parts.length} parts`);
  const e = await createEngine({ threads: 1, backend: 'webgpu', gpu });
  try {
    await e.load({ model: file });
    const [w1, w2] = await twoSteps(e);
    await e.load({ model: [...parts].reverse() });
    const [p1, p2] = await twoSteps(e);
    assert.deepEqual(p1, w1);
    assert.deepEqual(p2, w2);
    await e.load({ model: new Blob([fs.readFileSync(file)]) });
    const [b1] = await twoSteps(e);
    assert.deepEqual(b1, w1);
  } finally {
    await e.free();
  }
});

test('streamed load: a truncated file, a NaN in an F16 weight, an abort: a clear error, and the engine loads again', { skip }, async () => {
  const file = synthCached({ arch: 'gpt2', type: 'F16' });
  const bytes = fs.readFileSync(file);
  const layout = readGgufLayout(bytes);
  const e = await createEngine({ threads: 1, backend: 'webgpu', gpu });
  try {
    // cut in the middle of the last tensor's bytes
    const last = layout.tensors.reduce((a, t) => (t.offset > a.offset ? t : a));
    const cut = path.join(tmp, 'cut.gguf');
    fs.writeFileSync(cut, bytes.subarray(0, layout.dataOffset + last.offset + 10));
    await assert.rejects(e.load({ model: cut }), { code: 'WLM_ERR_TRUNCATED', message: new RegExp(`tensor ${last.name.replace('.', '\\.')} .*ends past the end of the file`) });
    assert.equal(e.info, null);
    // a NaN (0x7e00) in blk.1.ffn_up.weight, an F16 matrix that goes to the GPU
    const t = layout.tensors.find((x) => x.name === 'blk.1.ffn_up.weight');
    assert.equal(t.type, 1);
    const bad = Buffer.from(bytes);
    bad.writeUInt16LE(0x7e00, layout.dataOffset + t.offset + 2 * 7);
    const nan = path.join(tmp, 'nan.gguf');
    fs.writeFileSync(nan, bad);
    await assert.rejects(e.load({ model: nan }), { code: 'WLM_ERR_FORMAT', message: /blk\.1\.ffn_up\.weight has a non-finite value .* at element 7\b/ });
    // an abort while the weights stream
    const ac = new AbortController();
    await assert.rejects(e.load({ model: file, signal: ac.signal, onProgress: (p) => { if (p.loaded > layout.dataOffset) ac.abort(); } }), { name: 'AbortError' });
    // and then a whole model loads and runs
    const info = await e.load({ model: file });
    assert.equal(info.backend, 'webgpu');
    const [l] = await twoSteps(e);
    assert.ok(l.every(Number.isFinite));
  } finally {
    await e.free();
  }
});

const big = path.join(tmp, 'llama8b-f32-header-only.gguf');
const bigPlan = () => {
  if (!fs.existsSync(big)) writeHeaderOnly('llama', 'llama3.1-8b', big, { type: 'F32' });
  const fd = fs.openSync(big, 'r');
  try {
    const head = Buffer.alloc(16 << 20);
    const n = fs.readSync(fd, head, 0, head.length, 0);
    const layout = readGgufLayout(head.subarray(0, n));
    return { layout, plan: residentPlan(layout), size: fs.statSync(big).size };
  } finally {
    fs.closeSync(fd);
  }
};

test('offsets past 2^32: the resident plan and the router of a 32 GB file place a tensor\'s bytes exactly', async () => {
  const { plan, size } = bigPlan();
  assert.ok(size > 2 ** 34, `${size} bytes`);
  assert.ok(plan.heapBytes < 16 << 20, `heap ${plan.heapBytes} bytes`);
  const far = plan.resident.filter((r) => r.start > 2 ** 32);
  assert.ok(far.length > 10, 'vectors past 4 GB');
  const r = far.at(-1); // output_norm, near the end of 32 GB
  const fd = fs.openSync(big, 'r');
  const want = Buffer.alloc(r.end - r.start + 6);
  fs.readSync(fd, want, 0, want.length, r.start - 3);
  fs.closeSync(fd);
  assert.ok(want.subarray(3, -3).some((b) => b !== 0), 'the vector holds values');
  const got = new Uint8Array(r.end - r.start);
  const writes = [];
  const router = new Router([{ name: r.name, start: r.start, end: r.end, write: (b, off) => { got.set(b, off); writes.push(off); } }], r.start - 3);
  // three pieces, cut at odd places
  await router.push(want.subarray(0, 5));
  await router.push(want.subarray(5, 11));
  await router.push(want.subarray(11));
  assert.deepEqual(Buffer.from(got), want.subarray(3, -3));
  assert.deepEqual(writes, [0, 2, 8]);
  assert.equal(router.pos, r.end + 3);
  assert.deepEqual(router.missing(), []);
});

test('router: overlapping and missing ranges, and firstNonFinite', async () => {
  const seen = { a: [], b: [] };
  const mk = (name, start, end) => ({ name, start, end, write: (bytes, off) => seen[name].push([off, Array.from(bytes)]) });
  const r = new Router([mk('b', 4, 12), mk('a', 2, 6)], 0);
  await r.push(new Uint8Array([0, 1, 2, 3, 4]));
  await r.push(new Uint8Array([5, 6, 7]));
  assert.deepEqual(seen.a, [[0, [2, 3, 4]], [3, [5]]]);
  assert.deepEqual(seen.b, [[0, [4]], [1, [5, 6, 7]]]);
  assert.deepEqual(r.missing().map((t) => t.name), ['b']);
  assert.equal(firstNonFinite(0, new Uint8Array(new Float32Array([1, 2, Infinity]).buffer)), 2);
  assert.equal(firstNonFinite(1, new Uint8Array(new Uint16Array([0x3c00, 0x7c01]).buffer)), 1);
  assert.equal(firstNonFinite(30, new Uint8Array(new Uint16Array([0x3f80, 0x4000]).buffer)), -1);
  assert.equal(firstNonFinite(8, new Uint8Array(8).fill(255)), -1); // quantized: not checked here
});

test('a 32 GB model (header and vectors only): its header loads in wasm32 and the GPU refuses it, naming the tensor and limit, before reading a weight', { skip }, async () => {
  bigPlan();
  const e = await createEngine({ threads: 1, backend: 'webgpu', gpu: limitedGpu({ maxStorageBufferBindingSize: 1 << 30, maxBufferSize: 1 << 30 }) });
  const allows = Math.min(1 << 30, (await gpu.requestAdapter()).limits.maxStorageBufferBindingSize); // lavapipe: 128 MiB
  try {
    let read = 0;
    await assert.rejects(e.load({ model: big, onProgress: (p) => { read = p.loaded; } }),
      { code: 'WLM_ERR_UNSUPPORTED', message: new RegExp(`tensor token_embd \\(F32, 128256×4096\\) needs a buffer of 2101346304 bytes; the adapter allows ${allows}`) });
    assert.equal(read, 0, 'no weight was read');
    assert.equal(e.info, null);
    const info = await e.load({ model: synthCached({ arch: 'gpt2', type: 'F32' }) });
    assert.equal(info.backend, 'webgpu');
    assert.equal(info.memory64, false);
  } finally {
    await e.free();
  }
});

test('gpuWeights takes \'stream\' or \'heap\'; another value is WLM_ERR_INVALID_ARG naming it', async () => {
  await assert.rejects(createEngine({ gpuWeights: 'copy' }), { code: 'WLM_ERR_INVALID_ARG', message: /gpuWeights must be 'stream' or 'heap', got "copy"/ });
});

test('residentPlan: one-row tensors packed after the header at the alignment, in tensor-info order; a type it cannot size is refused', () => {
  const layout = { dataOffset: 96, alignment: 32, tensors: [
    { name: 'a', ne: [10], type: 0, offset: 64 },          // 40 bytes
    { name: 'm', ne: [32, 4], type: 8, offset: 128 },      // a Q8_0 matrix: 4 × 34 bytes, not resident
    { name: 'b', ne: [3, 1], type: 1, offset: 0 },         // 6 bytes (F16), one row
  ] };
  const p = residentPlan(layout);
  assert.deepEqual(p.resident, [
    { name: 'a', start: 160, end: 200, at: 96 },
    { name: 'b', start: 96, end: 102, at: 96 + 64 },
  ]);
  assert.equal(p.heapBytes, 96 + 64 + 32);
  assert.deepEqual(p.byName.get('m'), { type: 8, ne: [32, 4], start: 224, end: 360 });
  assert.deepEqual(p.last, { name: 'm', start: 224, end: 360 });
  assert.throws(() => residentPlan({ ...layout, tensors: [{ name: 'q', ne: [32], type: 99, offset: 0 }] }), { code: 'WLM_ERR_UNSUPPORTED', message: /tensor q \(type 99\) has a type the GPU load does not read/ });
  assert.throws(() => residentPlan({ ...layout, tensors: [{ name: 'r', ne: [33, 2], type: 8, offset: 0 }] }), { code: 'WLM_ERR_FORMAT', message: /33 columns are not whole Q8_0 blocks/ });
});
