// memory64.test.mjs — the memory64 (wasm64) modules and the choice between them and wasm32 at
// load() (js/runtime/memory64.js). Under Node 24 (tools/test.sh runs this file there too) the memory64
// modules must give bitwise the logits of wasm32's, and a model past 4 GB must load: stories260K
// with 4.3 GB of zeros in front of its tensors (tools/gguf_pad.mjs: a sparse file, an unused
// tensor the engine skips), so every weight lies past 4 GB in the file and in wasm memory and
// any offset that wraps at 32 bits reads zeros or the wrong weights — its logits must equal the
// unpadded model's bitwise and its greedy tokens the native CLI's on the same file. Under Node
// 20 (no memory64) that model is refused before it is read, with the sizes and the reason, and
// the engine stays usable. Reading the padded file takes a few seconds on an idle machine.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { createEngine } from '../../js/wasmlm.js';
import {
  OUT_SLOTS, POINTER_ARRAYS, chooseMemory, chooseMemoryForAuto, memory64Support, modelBytes, peekModelHeader, readModelHeader,
} from '../../js/runtime/memory64.js';
import { exportSignatures } from '../../tools/wasm64/abi.mjs';
import { padGguf } from '../../tools/gguf_pad.mjs';
import { synthesize, writeHeaderOnly } from '../../tools/synth_gguf.mjs';
import { MODEL, MODELS, REPO, TOKENIZER } from './_helpers.mjs';

const run = promisify(execFile);
const GGUF = path.join(MODELS, 'stories260K.gguf');
const CLI = path.join(REPO, 'build/native/wasmlm');
const M64 = memory64Support().ok;
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

test('memory64: the header gives the sizes the context really takes (within 10 %)', async () => {
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
  for (const arch of ['phi3', 'qwen3', 'gemma3', 'qwen3moe']) { // fused matrices; head size from key_length; windows; experts
    files.push(path.join(dir, `${arch}.gguf`));
    synthesize({ arch, type: 'F32', out: files.at(-1) });
  }
  try {
    for (const file of files) {
      const bytes = fs.readFileSync(file);
      const hf = await peekModelHeader(async (n) => bytes.subarray(0, n));
      for (const nCtx of [64, 512]) {
        const info = await engine.load({ model: file, nCtx });
        const need = modelBytes(fs.statSync(file).size, hf, { nCtx });
        const est = need.kv + need.scratch;
        assert.ok(Math.abs(est - info.contextBytes) <= 0.1 * info.contextBytes,
          `${path.basename(file)}, nCtx ${nCtx}: estimated ${est} bytes, the context has ${info.contextBytes}`);
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
