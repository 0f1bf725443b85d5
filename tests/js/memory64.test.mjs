// memory64.test.mjs — the memory64 (wasm64) modules and the choice between them and wasm32 at
// load() (js/runtime/memory64.js). Under Node 24 (tools/test.sh runs this file there too) the memory64
// modules must give bitwise the logits of wasm32's, and a model past 4 GB must load: stories260K
// with 4.3 GB of zeros in front of its tensors (tools/gguf_pad.mjs: a sparse file, an unused
// tensor the engine skips), so every weight lies past 4 GB in the file and in wasm memory and
// any offset that wraps at 32 bits reads zeros or the wrong weights — its logits must equal the
// unpadded model's bitwise and its greedy tokens the native CLI's on the same file. Under Node
// 20 (no memory64) that model is refused before it is read, with the sizes and the reason, and
// the engine stays usable. Reading the padded file takes a few seconds on an idle machine.
// The estimate itself (modelBytes) is checked against the context's own count: at load, and for
// a hybrid after every recurrent state, snapshot and speculative copy it allows for was made
// (and C's rollback rule at Qwen3.5-0.8B's shape, in a bare wasm32 instance).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { createEngine } from '../../js/wasmlm.js';
import {
  MAX_DRAFT, OUT_SLOTS, POINTER_ARRAYS, WASM32_BYTES, WASM32_FIT, chooseMemory, chooseMemoryForAuto, memory64Support, modelBytes,
  peekModelHeader, readModelHeader, recurrentBytes, visionBytes,
} from '../../js/runtime/memory64.js';
import { MEDIA_MARKER } from '../../js/vision/vision.js';
import { mmprojBytes, pngBytes, testImage } from '../../tools/synth_mmproj.mjs';
import { exportSignatures } from '../../tools/wasm64/abi.mjs';
import { padGguf } from '../../tools/gguf_pad.mjs';
import { synthCached, synthesize, writeHeaderOnly } from '../../tools/synth_gguf.mjs';
import { splitmix32 } from '../../tools/synth.mjs';
import { MODEL, MODELS, REPO, TOKENIZER } from './_helpers.mjs';

const run = promisify(execFile);
const GGUF = path.join(MODELS, 'stories260K.gguf');
const CLI = path.join(REPO, 'build/native/wasmlm');
const M64 = memory64Support().ok;
const BUILT32 = fs.existsSync(path.join(REPO, 'dist/wasmlm.wasm'));
const BUILT = fs.existsSync(path.join(REPO, 'dist/wasmlm64.wasm')) && fs.existsSync(path.join(REPO, 'dist/wasmlm64-mt.wasm'));
const skip64 = !M64 ? 'this runtime has no memory64 (Node 24 runs these)'
  : !BUILT ? 'dist/wasmlm64*.wasm not built (tools/wasm64/toolchain.sh)' : false;
const PROMPT = 'Once upon a time';

let dir;
let padded; // stories260K.gguf with every tensor past 4 GB
before(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-m64-'));
  padded = path.join(dir, 'stories260K-past4GB.gguf');
  const r = padGguf(GGUF, padded, { padBytes: 2 ** 32 + (16 << 20) });
  assert.ok(r.tensors.slice(1).every((t) => t.offset > 2 ** 32), 'every tensor of the model starts past 4 GiB');
});
after(() => fs.rmSync(dir, { recursive: true, force: true }));

/** Greedy ids and the logits after the prompt, from an engine with `model` loaded. */
async function greedy(engine, n = 24) {
  const ids = [];
  for await (const t of engine.generate(PROMPT, { temperature: 0, maxTokens: n })) ids.push(t.id);
  await engine.reset();
  const logits = await engine.evalTokens(await engine.tokenize(PROMPT));
  await engine.reset();
  return { ids, logits };
}

test('memory64: the header gives the bytes the context really takes at load (within 1 %: byte for byte on these)', async () => {
  const h = readModelHeader(fs.readFileSync(GGUF).subarray(0, 1 << 20));
  assert.deepEqual([h.format, h.arch, h.nLayers, h.dim, h.nHeads, h.nKvHeads, h.vocab],
    ['gguf', 'llama', 5, 64, 8, 4, 512]);
  const b = readModelHeader(fs.readFileSync(MODEL).subarray(0, 28));
  assert.deepEqual([b.format, b.nLayers, b.dim, b.hidden, b.vocab, b.ctx], ['llama2c', 5, 64, 172, 512, 512]);
  assert.equal(readModelHeader(new Uint8Array(64)), null, 'neither format');
  // text is not a checkpoint (its ints would make a model of terabytes): C says what it is
  assert.equal(readModelHeader(Buffer.from('hello, this is not a model at all\n'.repeat(4))), null);
  assert.equal(readModelHeader(fs.readFileSync(path.join(REPO, 'README.md')).subarray(0, 4096)), null);
  const engine = await createEngine({ threads: 1, memory64: false });
  const files = [GGUF];
  // fused matrices; head size from key_length; windows; experts; hybrids (recurrent and gated
  // attention rows in each pass)
  for (const arch of ['phi3', 'qwen3', 'gemma3', 'qwen3moe', 'qwen35', 'lfm2', 'lfm2moe']) {
    files.push(path.join(dir, `${arch}.gguf`));
    synthesize({ arch, type: 'F32', out: files.at(-1) });
  }
  try {
    for (const file of files) {
      const bytes = fs.readFileSync(file);
      const hf = await peekModelHeader(async (n) => bytes.subarray(0, n));
      for (const [nCtx, nSeqMax] of [[64, 1], [512, 1], [512, 3]]) {
        const info = await engine.load({ model: file, nCtx, nSeqMax });
        const need = modelBytes(fs.statSync(file).size, hf, { nCtx, nSeqMax });
        // at load: all but what the context allocates later (states, logits rows, image pass)
        const est = need.kv + need.scratch - need.grows;
        assert.ok(Math.abs(est - info.contextBytes) <= 0.01 * info.contextBytes,
          `${path.basename(file)}, nCtx ${nCtx}, nSeqMax ${nSeqMax}: estimated ${est} bytes, the context has ${info.contextBytes}`);
        assert.equal((await engine.kvStats()).stateBytesAllocated, 0, 'no state before the first token');
        if (hf.weightBytes !== null) { // the speculative rollback's rule weighs states against these
          assert.ok(Math.abs(hf.weightBytes - info.weightBytes) <= 0.01 * info.weightBytes,
            `${path.basename(file)}: weight bytes ${hf.weightBytes} from the header, ${info.weightBytes} from C`);
        }
      }
    }
  } finally {
    await engine.free();
  }
});

test('memory64: a GGUF header sizes its file by its tensor directory (a download without Content-Length)', async () => {
  const files = [GGUF];
  for (const [arch, type] of [['qwen3', 'Q4_K_M'], ['llama', 'Q8_0'], ['phi3', 'Q4_0'], ['gemma3', 'Q6_K']]) {
    files.push(path.join(dir, `${arch}-${type}.gguf`));
    synthesize({ arch, type, out: files.at(-1) });
  }
  for (const file of files) {
    const bytes = fs.readFileSync(file);
    const h = await peekModelHeader(async (n) => bytes.subarray(0, n));
    assert.equal(h.dataBytes, bytes.byteLength, `${path.basename(file)}: the header's data end is the file's size`);
  }
  // cut inside the tensor directory: more bytes are asked for, as for the key/values
  const g = fs.readFileSync(files[1]);
  const cut = (await peekModelHeader(async (n) => g.subarray(0, n))).headerBytes - 8;
  assert.throws(() => readModelHeader(g.subarray(0, cut)), (e) => e.constructor.name === 'NeedMore');
});

test("memory64: a hybrid's recurrent states, their snapshots and the speculative copies are what the context comes to hold", { skip: !BUILT32 && 'not built', timeout: 600000 }, async () => {
  // Every allocation the estimate allows for, made through the API: a generation with a chat
  // checkpoint (state, checkpoint, prompt end) and a draft model that always drafts the most
  // (the target itself: MAX_DRAFT copies, the tiny models' states being small beside their
  // weights; MAX_DRAFT + 1 logits rows), then a batch of two sequences (the second's state; with
  // LFM2-VL's mmproj, media prompts: each sequence's prompt-end snapshot).
  const engine = await createEngine({ threads: 1 });
  try {
    for (const [arch, mmShape] of [['lfm2', 'lfm2-tiny'], ['qwen35', null]]) {
      const file = synthCached({ arch, shape: 'tiny', type: 'F32' });
      const bytes = fs.readFileSync(file);
      const h = readModelHeader(new Uint8Array(bytes));
      const mm = mmShape ? mmprojBytes({ shape: mmShape, type: 'F16', seed: 1 }) : null;
      const vision = mm ? visionBytes(mm.length, readModelHeader(new Uint8Array(mm)), { textDim: h.dim }) : null;
      const nCtx = 256, nSeqMax = 2;
      const need = modelBytes(bytes.length, h, { nCtx, nSeqMax, vision });
      const r = recurrentBytes(h, { nSeqMax, weightBytes: h.weightBytes });
      const info = await engine.load({ model: file, nCtx, nSeqMax, backend: 'cpu', ...(mm ? { mmproj: mm } : {}) });
      const S = info.stateBytes;
      assert.equal(r.stateBytes, S, `${arch}: one state`);
      assert.equal(h.weightBytes, info.weightBytes, `${arch}: the weight bytes the rollback's rule weighs`);
      assert.equal(r.rollCopies, MAX_DRAFT, `${arch}: ${MAX_DRAFT} copies are far below half the weights and 256 MiB`);
      assert.deepEqual([r.states, r.snapshots, r.roll, need.state], [2 * S, 3 * S, MAX_DRAFT * S, r.total]);
      assert.equal(info.contextBytes, need.kv + need.scratch - need.grows, `${arch}: at load`);

      const prompt = 'Once upon a time there was a little model that counted its bytes before it ran.';
      const res = await engine.complete(prompt, { stateCheckpoint: 4, maxTokens: 40, temperature: 0,
        draft: { model: file, maxTokens: MAX_DRAFT } });
      assert.equal(res.nGenerated, 40);
      let kv = await engine.kvStats();
      assert.equal(kv.stateBytesAllocated, (3 + MAX_DRAFT) * S,
        `${arch}: state, checkpoint, prompt end and a copy per drafted token (${kv.stateBytesAllocated / S} states' bytes)`);

      const img = mm ? await pngBytes(testImage(32, 32, 3), 32, 32) : null;
      const M = MEDIA_MARKER;
      if (mm) {
        await engine.completeBatch([`${M} one`, `two ${M}`], [0, 1].map(() => ({ images: [img], maxTokens: 2, temperature: 0 })));
      } else {
        await engine.completeBatch(['one', 'two'], { maxTokens: 2, temperature: 0 });
      }
      kv = await engine.kvStats();
      // a text batch takes no prompt-end snapshot for its sequences (a media one does): one
      // state's bytes short of the worst case
      const short = mm ? 0 : S;
      assert.equal(kv.stateBytesAllocated, need.state - short, `${arch}: every state the estimate counts`);
      const est = need.kv + need.scratch - short;
      assert.ok(Math.abs(kv.contextBytes - est) <= 0.01 * est,
        `${arch}: the context holds ${kv.contextBytes} bytes, the estimate says ${est}`);
    }
  } finally {
    await engine.free();
  }
});

test("memory64: the speculative rollback's rule at Qwen3.5-0.8B's shape: copies up to 12 drafted tokens (154 MiB at 8), then a snapshot", { skip: !BUILT32 && 'not built', timeout: 600000 }, async () => {
  // Its real header and all-zero matrices (0.53 GB, sparse), in a bare wasm32 instance: C's
  // choice for each draft length (wlmjs_spec_rollback: 2 copies, 1 snapshot and replay) against
  // recurrentBytes', then the rounds' allocations (wlmjs_spec_round, as speculative.c runs them).
  const file = path.join(dir, 'qwen3.5-0.8b-Q4_K_M-zero.gguf');
  writeHeaderOnly('qwen35', 'qwen3.5-0.8b', file, { type: 'Q4_K_M' });
  try {
    const bytes = fs.readFileSync(file);
    const h = await peekModelHeader(async (n) => bytes.subarray(0, n));
    const r = recurrentBytes(h, { weightBytes: h.weightBytes });
    const x = (await WebAssembly.instantiate(fs.readFileSync(path.join(REPO, 'dist/wasmlm.wasm')),
      { env: { emscripten_notify_memory_growth() {} } })).instance.exports;
    x._initialize();
    const ptr = x.wlmjs_malloc(bytes.length) >>> 0;
    assert.ok(ptr > 0);
    new Uint8Array(x.memory.buffer).set(bytes, ptr);
    const slot = x.wlmjs_malloc(8) >>> 0;
    assert.equal(x.wlmjs_model_load(ptr, bytes.length, slot), 0);
    const model = new Int32Array(x.memory.buffer)[slot >> 2];
    assert.equal(x.wlmjs_context_new(model, 64, 1, 1, 1, 1, 0, -1, slot), 0);
    const ctx = new Int32Array(x.memory.buffer)[slot >> 2];
    const S = x.wlmjs_model_info(model, 14);
    assert.equal(h.weightBytes, x.wlmjs_model_info(model, 11), 'the weight bytes C weighs the copies against');
    assert.equal(r.stateBytes, S);
    assert.equal(Math.round((8 * S) / 2 ** 20), 154, '8 copies: 154 MiB');
    assert.equal(r.rollCopies, 12, 'half the weights (259 MB) holds 12 copies of 20.2 MB');
    for (let n = 1; n <= MAX_DRAFT; n++) { // a verification of n + 1 entries keeps n copies
      assert.equal(x.wlmjs_spec_rollback(ctx, -1, n + 1), n <= r.rollCopies ? 2 : 1, `${n} drafted tokens`);
    }
    const tok = x.wlmjs_malloc(4 * 64) >>> 0;
    new Int32Array(x.memory.buffer, tok, 64).fill(100);
    assert.equal(x.wlm_eval_batch(ctx, tok, 0, 0, 1), 0);
    assert.equal(x.wlmjs_kv_stat(ctx, 7), S, 'the state');
    assert.equal(x.wlmjs_spec_round(ctx, tok, r.rollCopies + 1, 1), 2);
    assert.equal(x.wlmjs_kv_stat(ctx, 7), S + r.roll, 'and the copies');
    assert.equal(x.wlmjs_spec_round(ctx, tok, r.rollCopies + 2, 1), 1);
    // the longer draft's snapshot: with the prompt-end and checkpoint snapshots a generation
    // takes (the test above), what recurrentBytes counts for one sequence
    assert.equal(x.wlmjs_kv_stat(ctx, 7) + 2 * S, r.total, 'and the snapshot of the round\'s start');

    // near wasm32's limit these bytes decide: a file whose weights, KV cache and scratch fit
    // wasm32's share of 4 GB, and not with the states, snapshots and copies (0.32 GB) added
    const yes = { ok: true, why: null };
    const no = { ok: false, why: 'this runtime has no WebAssembly memory64' };
    const nCtx = 4096;
    const stateless = { ...h, stateBytes: 0 };
    const fileBytes = Math.floor(WASM32_BYTES * WASM32_FIT - modelBytes(0, stateless, { nCtx }).total) - (1 << 20);
    const without = modelBytes(fileBytes, stateless, { nCtx });
    const need = modelBytes(fileBytes, h, { nCtx });
    assert.equal(need.total - without.total, r.total);
    assert.deepEqual(chooseMemory(without, 'auto', nCtx, yes), { memory64: false, error: null });
    assert.deepEqual(chooseMemory(need, 'auto', nCtx, yes), { memory64: true, error: null });
    const { error } = chooseMemory(need, 'auto', nCtx, no, { model: 'Qwen3.5-0.8B-Q4_K_M.gguf' });
    assert.equal(error.code, 'WLM_ERR_NOMEM');
    assert.match(error.message, /^the model Qwen3\.5-0\.8B-Q4_K_M\.gguf \(\d\.\d\d GB of weights\) is too large for the 4 GB wasm32 memory with nCtx 4096: .* \+ 0\.32 GB recurrent states \(with their snapshots and speculative copies\) \+ /);
  } finally {
    fs.rmSync(file, { force: true });
  }
});

test('memory64: a corrupted header gives no estimate or a finite one (fuzz)', () => {
  // Bytes of the key/values and the tensor directory flipped at random: the reader asks for more
  // bytes (NeedMore), refuses (null: C then says what is wrong), or gives sizes whose estimate
  // is finite and at least the file (never NaN, negative or infinite).
  const rand = splitmix32(42);
  let estimated = 0;
  for (const arch of ['qwen35', 'lfm2', 'lfm2moe', 'gemma3', 'phi3', 'qwen3moe']) {
    const bytes = fs.readFileSync(synthCached({ arch, shape: 'tiny', type: 'F32' }));
    const end = readModelHeader(new Uint8Array(bytes)).headerBytes;
    for (let i = 0; i < 60; i++) {
      // in the model's key/values (before the vocabulary) or its tensor directory (the end)
      const b = new Uint8Array(bytes.subarray(0, end + 64));
      for (let k = 1 + (rand() % 4); k > 0; k--) b[rand() & 1 ? 8 + (rand() % 4096) : end - 1 - (rand() % 4096)] = rand() & 255;
      let h;
      try {
        h = readModelHeader(b);
      } catch (e) {
        assert.equal(e.constructor.name, 'NeedMore', `${arch} #${i}: ${e.message}`);
        continue;
      }
      if (h === null || h.arch === 'clip') continue;
      const need = modelBytes(1e6, h, { nSeqMax: 2 });
      const r = recurrentBytes(h, { nSeqMax: 2, weightBytes: h.weightBytes ?? 1e6 });
      for (const [k, v] of Object.entries({ ...need, ...Object.fromEntries(Object.entries(r).map(([n, x]) => [`r.${n}`, x])) })) {
        assert.ok(Number.isFinite(v) && v >= 0, `${arch} #${i}: ${k} = ${v}`);
      }
      assert.ok(need.total >= 1e6);
      estimated++;
    }
  }
  assert.ok(estimated > 60, `${estimated} corrupted headers still estimated`);
});

test('memory64: which module a model gets', () => {
  const GiB = 2 ** 30;
  const need = (total) => ({ weights: total - GiB / 2, kv: GiB / 4, scratch: GiB / 8, other: GiB / 8, total });
  const yes = { ok: true, why: null };
  const no = { ok: false, why: 'this runtime has no WebAssembly memory64' };
  assert.deepEqual(chooseMemory(need(3 * GiB), 'auto', 0, yes), { memory64: false, error: null });
  assert.deepEqual(chooseMemory(need(4.5 * GiB), 'auto', 0, yes), { memory64: true, error: null });
  assert.deepEqual(chooseMemory(need(3 * GiB), true, 0, no), { memory64: true, error: null });
  assert.deepEqual(chooseMemory(need(4.5 * GiB), false, 0, yes), { memory64: false, error: null });
  const { error } = chooseMemory(need(4.5 * GiB), 'auto', 4096, no);
  assert.equal(error.code, 'WLM_ERR_NOMEM');
  assert.match(error.message, /the model \(4\.29 GB of weights\) is too large for the 4 GB wasm32 memory with nCtx 4096: it needs 4\.83 GB \(4\.29 GB of weights \+ 0\.27 GB KV cache \(nCtx 4096\) \+ 0\.27 GB scratch\), and this runtime has no WebAssembly memory64/);
  const over = chooseMemory(need(17 * GiB), 'auto', 0, yes);
  assert.match(over.error.message, /more than the 16 GiB a memory64 module can have/);
});

test("memory64: backend 'auto' keeps wasm32 for a GPU that would take a model too large for it on the CPU", async () => {
  const GiB = 2 ** 30;
  const need = (total, weights = total - GiB / 2) => ({ weights, kv: GiB / 4, scratch: GiB / 8, other: GiB / 8, total });
  const onGpu = (n) => ({ ...n, weights: 0, kv: 0, total: n.total - n.weights - n.kv });
  const yes = { ok: true, why: null };
  const no = { ok: false, why: 'this runtime has no WebAssembly memory64' };
  const asked = [];
  const gpu = (answer) => async () => { asked.push(answer); return answer; };
  const big = need(6 * GiB);
  assert.deepEqual(await chooseMemoryForAuto(big, onGpu(big), 'auto', 0, gpu(true), yes), { memory64: false, error: null, gpuFirst: true });
  assert.deepEqual(await chooseMemoryForAuto(big, onGpu(big), 'auto', 0, gpu(false), yes), { memory64: true, error: null, gpuFirst: false });
  // no memory64: the GPU makes it loadable; without one, the CPU's error
  assert.deepEqual(await chooseMemoryForAuto(big, onGpu(big), 'auto', 0, gpu(true), no), { memory64: false, error: null, gpuFirst: true });
  assert.equal((await chooseMemoryForAuto(big, onGpu(big), 'auto', 0, gpu(false), no)).error.code, 'WLM_ERR_NOMEM');
  assert.deepEqual(asked, [true, false, true, false]);
  // the GPU is not asked when wasm32 fits, when the option forces a module, or when the model
  // would not fit wasm32 even with its weights and KV cache on the GPU
  const small = need(3 * GiB);
  assert.deepEqual(await chooseMemoryForAuto(small, onGpu(small), 'auto', 0, gpu(true), yes), { memory64: false, error: null, gpuFirst: false });
  assert.deepEqual(await chooseMemoryForAuto(big, onGpu(big), true, 0, gpu(true), yes), { memory64: true, error: null, gpuFirst: false });
  assert.deepEqual(await chooseMemoryForAuto(big, onGpu(big), false, 0, gpu(true), yes), { memory64: false, error: null, gpuFirst: false });
  const scratchy = need(6 * GiB, GiB); // 4.75 GiB of scratch and vocabulary: wasm32 cannot hold it
  assert.deepEqual(await chooseMemoryForAuto(scratchy, onGpu(scratchy), 'auto', 0, gpu(true), yes), { memory64: true, error: null, gpuFirst: false });
  assert.deepEqual(asked, [true, false, true, false]);
});

test('memory64: every export that writes a pointer or a size_t through a pointer is adapted', () => {
  // The declarations of the exported functions (src/wasmlm.h, src/wasm_exports.c): a parameter
  // `T **` or `size_t *` is an 8-byte slot in wasm64, a `T *const *` an array of pointers.
  const exported = new Set(fs.readFileSync(path.join(REPO, 'tools/exports.txt'), 'utf8').split(/\s+/).filter(Boolean));
  const text = ['src/wasmlm.h', 'src/wasm_exports.c'].map((f) => fs.readFileSync(path.join(REPO, f), 'utf8')).join('\n');
  const slots = {}, arrays = {};
  for (const m of text.matchAll(/\b(wlm\w*)\s*\(([^)]*)\)\s*[;{]/g)) {
    const [, name, params] = m;
    if (!exported.has(name)) continue;
    params.split(',').forEach((p, i) => {
      if (/\*\s*const\s*\*/.test(p)) (arrays[name] ??= []).push(i);
      else if (/\*\s*\*|size_t\s*\*/.test(p)) (slots[name] ??= []).push(i);
    });
  }
  assert.deepEqual(slots, { ...OUT_SLOTS });
  assert.deepEqual(Object.fromEntries(Object.entries(arrays).map(([k, v]) => [k, v[0]])),
    Object.fromEntries(Object.entries(POINTER_ARRAYS).map(([k, v]) => [k, v[0]])));
});

test('memory64: the modules describe their exports (wasmlm.abi) with pointers as i64', { skip: BUILT ? false : 'not built' }, () => {
  for (const f of ['wasmlm64.wasm', 'wasmlm64-mt.wasm', 'wasmlm64-relaxed.wasm', 'wasmlm64-relaxed-mt.wasm']) {
    const file = path.join(REPO, 'dist', f);
    if (!fs.existsSync(file)) continue;
    const bytes = fs.readFileSync(file);
    const sigs = new Map(exportSignatures(bytes).map(([n, p, r]) => [n, [p, r]]));
    assert.deepEqual(sigs.get('wlmjs_malloc'), ['j', 'j'], f);
    assert.deepEqual(sigs.get('wlmjs_model_info'), ['ji', 'd'], f); // (model*, int) -> double
    assert.deepEqual(sigs.get('wlm_context_memory'), ['j', 'j'], f); // (ctx*) -> size_t
    if (!M64) continue; // (Node 20 cannot compile them)
    const [section] = WebAssembly.Module.customSections(new WebAssembly.Module(bytes), 'wasmlm.abi');
    assert.ok(section && new TextDecoder().decode(section).includes('wlmjs_malloc j j'), `${f}: the section`);
  }
});

test('memory64: the memory64 modules compute what the wasm32 ones do, bitwise', { skip: skip64 }, async () => {
  for (const threads of [1, 2]) {
    const a = await createEngine({ threads, memory64: false });
    const b = await createEngine({ threads, memory64: true });
    try {
      await a.load({ model: GGUF, nCtx: 256 });
      const info = await b.load({ model: GGUF, nCtx: 256 });
      assert.equal(a.info.memory64, false);
      assert.equal(info.memory64, true);
      assert.equal(info.build, a.info.build);
      const ga = await greedy(a), gb = await greedy(b);
      assert.deepEqual(gb.ids, ga.ids, `threads ${threads}: greedy tokens`);
      assert.deepEqual(Buffer.from(gb.logits.buffer), Buffer.from(ga.logits.buffer), `threads ${threads}: logits bitwise`);
      // the adapted exports: an array of pointers (batches), size_t slots (pieces, metadata),
      // pointer slots (JSON Schema → grammar)
      const pa = { temperature: 0.8, seed: 7, maxTokens: 12 };
      const ba = await a.completeBatch([PROMPT, 'One day'], pa), bb = await b.completeBatch([PROMPT, 'One day'], pa);
      assert.deepEqual(bb.sequences.map((s) => s.text), ba.sequences.map((s) => s.text));
      assert.equal(await b.detokenize(await b.tokenize(PROMPT)), PROMPT);
      assert.equal(info.architecture, 'llama');
      const schema = { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] };
      assert.deepEqual(await b.jsonSchemaToGrammar(schema), await a.jsonSchemaToGrammar(schema));
      const j = await b.complete(PROMPT, { jsonSchema: schema, temperature: 0, maxTokens: 40 });
      assert.equal(typeof JSON.parse(j.text).n, 'number');
      // a llama2.c checkpoint with its tokenizer.bin
      await b.load({ model: MODEL, tokenizer: TOKENIZER });
      assert.equal(b.info.memory64, true);
    } finally {
      await a.free();
      await b.free();
    }
  }
});

test('memory64: a memory64 module given as options.wasm runs (and is kept at load)', { skip: skip64 }, async () => {
  const engine = await createEngine({ wasm: path.join(REPO, 'dist/wasmlm64.wasm') });
  try {
    const info = await engine.load({ model: GGUF, nCtx: 64 });
    assert.equal(info.memory64, true);
    assert.equal((await engine.complete(PROMPT, { temperature: 0, maxTokens: 4 })).nGenerated, 4);
  } finally {
    await engine.free();
  }
});

test('memory64: a model past 4 GB loads into the memory64 module by itself, with every weight read from its place', { skip: skip64, timeout: 600000 }, async () => {
  const engine = await createEngine({ threads: 2 });
  try {
    const small = await engine.load({ model: GGUF, nCtx: 256 });
    assert.equal(small.memory64, false, 'a small model: wasm32');
    const ref = await greedy(engine);

    const info = await engine.load({ model: padded, nCtx: 256 });
    assert.equal(info.memory64, true, 'past 4 GB: the memory64 module, re-instantiated by load()');
    assert.ok(info.weightBytes < 2 ** 20 && info.wasmMemoryBytes > 2 ** 32, `${info.wasmMemoryBytes} bytes of wasm memory`);
    assert.equal(engine.threads, 2);
    const got = await greedy(engine);
    assert.deepEqual(got.ids, ref.ids, 'greedy tokens: the unpadded model\'s');
    assert.deepEqual(Buffer.from(got.logits.buffer), Buffer.from(ref.logits.buffer), 'logits bitwise the unpadded model\'s');

    // the native CLI on the same file
    if (fs.existsSync(CLI)) {
      const { stdout } = await run(CLI, [padded, '--json', '--temp', '0', '--n-predict', String(ref.ids.length), '-i', PROMPT],
        { maxBuffer: 1 << 24 });
      const cli = stdout.trim().split('\n').map((l) => JSON.parse(l)).filter((o) => !o.final).map((o) => o.id);
      assert.deepEqual(got.ids, cli, 'greedy tokens: the native CLI\'s on the same file');
    }

    // loads that cannot fit fail cleanly and leave the engine usable: past 16 GiB (refused
    // before the file is read), and past 4 GB in wasm32 (memory64: false)
    const huge = path.join(dir, 'past16GiB.gguf');
    padGguf(GGUF, huge, { padBytes: 17e9 });
    await assert.rejects(engine.load({ model: huge, nCtx: 256 }),
      (e) => e.code === 'WLM_ERR_NOMEM' && /needs 17\.\d\d GB of wasm memory .* more than the 16 GiB/.test(e.message));
    fs.rmSync(huge);
    const w32 = await createEngine({ threads: 1, memory64: false });
    try {
      await assert.rejects(w32.load({ model: padded, nCtx: 256 }), (e) => e.code === 'WLM_ERR_NOMEM');
      assert.equal((await w32.load({ model: GGUF, nCtx: 256 })).memory64, false);
    } finally {
      await w32.free();
    }
    // back to a small model: wasm32 again
    const again = await engine.load({ model: GGUF, nCtx: 256 });
    assert.equal(again.memory64, false);
    assert.deepEqual((await greedy(engine)).ids, ref.ids);
  } finally {
    await engine.free();
  }
});

test('memory64: a KV cache past 4 GB lands above the weights (only the scratch stays below 4 GB)', { skip: skip64, timeout: 600000 }, async () => {
  // Llama-3.2-1B's shape (0.8 GB at Q4_K_M, all-zero matrices, sparse) at its 131072 positions:
  // a 4.3 GB F16 KV cache, which cannot sit in the heap below 4 GB with the scratch
  const file = path.join(dir, 'llama3.2-1b-Q4_K_M-zero.gguf');
  writeHeaderOnly('llama', 'llama3.2-1b', file, { type: 'Q4_K_M' });
  const engine = await createEngine({ threads: 1 });
  try {
    const info = await engine.load({ model: file });
    assert.equal(info.memory64, true);
    assert.equal(info.nCtx, 131072);
    assert.ok(info.contextBytes > 2 ** 32, `${info.contextBytes} bytes of context`);
    const r = await engine.complete(PROMPT, { maxTokens: 3, temperature: 0 });
    assert.equal(r.nGenerated, 3);
  } finally {
    await engine.free();
    fs.rmSync(file, { force: true });
  }
});

test('memory64: without memory64 a model past 4 GB is an error naming its sizes, and the engine stays usable', { skip: M64 ? 'this runtime has memory64 (Node 20 runs this)' : false }, async () => {
  const engine = await createEngine({ threads: 1 });
  try {
    await assert.rejects(engine.load({ model: padded, nCtx: 256 }), (e) => {
      assert.equal(e.code, 'WLM_ERR_NOMEM');
      assert.match(e.message, /the model \(4\.3\d GB of weights\) is too large for the 4 GB wasm32 memory with nCtx 256: it needs 4\.\d\d GB \(4\.3\d GB of weights \+ 0\.00 GB KV cache \(nCtx 256\) \+ 0\.\d\d GB scratch\), and this runtime has no WebAssembly memory64/);
      return true;
    });
    await assert.rejects(createEngine({ memory64: true }), (e) => e.code === 'WLM_ERR_UNSUPPORTED' && /memory64: true: this runtime has no WebAssembly memory64/.test(e.message));
    const info = await engine.load({ model: GGUF, nCtx: 256 });
    assert.equal(info.memory64, false);
    assert.equal((await engine.complete(PROMPT, { temperature: 0, maxTokens: 4 })).nGenerated, 4);
  } finally {
    await engine.free();
  }
});
