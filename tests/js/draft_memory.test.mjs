// draft_memory.test.mjs — speculative decoding's draft model in the memory plan (Engine.loadDraft,
// js/runtime/memory64.js draftBytes / fitDraft): the draft is sized from its header before a byte
// of it is read and fitted beside the loaded model in the module that runs it. Checked: the
// estimate against what C allocates for the draft's context (DraftInfo.contextBytes, within the
// 1 % of the model's estimate tests), a draft that fits loading, a draft too large for what is
// left refused with WLM_ERR_NOMEM naming both sizes before anything past its header was read (a
// Blob that records every slice read from it) with the engine still usable — among them, beside
// a model filling most of wasm32, a draft whose weights the heap could still take but not its
// KV cache (which used to be read whole before its context failed) —, and in the memory64
// module a draft whose weights lie past 4 GB loading and drafting (stories260K with 4.3 GB of
// zeros in front of its tensors, tools/gguf_pad.mjs: sparse files) while one past 16 GiB is
// refused; the low-heap rule's arithmetic on a fake allocator. Reading the padded draft into
// the memory64 module takes a few seconds on an idle machine.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createEngine } from '../../js/wasmlm.js';
import {
  WASM32_BYTES, WASM32_FIT, draftBytes, fitDraft, memory64Support, modelBytes, peekModelHeader,
} from '../../js/runtime/memory64.js';
import { padGguf } from '../../tools/gguf_pad.mjs';
import { synthesize, writeHeaderOnly } from '../../tools/synth_gguf.mjs';
import { MODELS, REPO } from './_helpers.mjs';

const GGUF = path.join(MODELS, 'stories260K.gguf');
const M64 = memory64Support().ok;
const BUILT = fs.existsSync(path.join(REPO, 'dist/wasmlm64.wasm'));
const skip64 = !M64 ? 'this runtime has no memory64 (Node 24 runs these)' : !BUILT ? 'dist/wasmlm64*.wasm not built' : false;
const PROMPT = 'Once upon a time';
const GB = 1e9;

let dir;
let padded; // stories260K.gguf with every tensor past 4 GB (sparse)
before(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-draftmem-'));
  padded = path.join(dir, 'stories260K-past4GB.gguf');
  padGguf(GGUF, padded, { padBytes: 2 ** 32 + (16 << 20) });
});
after(() => fs.rmSync(dir, { recursive: true, force: true }));

/** A Blob over a file that records every [start, end) read from it. (Not fs.openAsBlob: its
 *  size wraps at 4 GiB in Node 20 and 24.) */
class CountingBlob extends Blob {
  constructor(file) {
    super([]);
    this.file = file;
    this.name = path.basename(file);
    this.bytes = fs.statSync(file).size;
    this.reads = [];
  }
  get size() { return this.bytes; }
  slice(start = 0, end = this.bytes) {
    this.reads.push([start, end]);
    const a = Math.min(start, this.bytes), b = Math.min(end, this.bytes);
    const buf = Buffer.alloc(Math.max(0, b - a));
    const fd = fs.openSync(this.file, 'r');
    try { fs.readSync(fd, buf, 0, buf.length, a); } finally { fs.closeSync(fd); }
    return new Blob([buf]);
  }
}

/** The header's bytes of a file (as the engine peeks them). */
async function header(file) {
  const fd = await fs.promises.open(file, 'r');
  try {
    return await peekModelHeader(async (n) => {
      const buf = new Uint8Array(n);
      const { bytesRead } = await fd.read(buf, 0, n, 0);
      return buf.subarray(0, bytesRead);
    });
  } finally {
    await fd.close();
  }
}

async function greedy(engine, params = {}) {
  const ids = [];
  for await (const t of engine.generate(PROMPT, { temperature: 0, maxTokens: 24, ...params })) ids.push(t.id);
  return ids;
}

test("draft memory: the draft's estimate is what C allocates for its context (within 1 %)", async () => {
  const files = [GGUF];
  // a window (two RoPE sets), experts, hybrids (recurrent states), fused matrices
  for (const arch of ['gemma3', 'qwen3moe', 'qwen35', 'lfm2', 'phi3']) {
    files.push(path.join(dir, `${arch}.gguf`));
    synthesize({ arch, type: 'F32', out: files.at(-1) });
  }
  const engine = await createEngine({ threads: 1 });
  try {
    for (const file of files) {
      const h = await header(file);
      const size = fs.statSync(file).size;
      for (const [targetCtx, nCtx, kvType] of [[512, 64, 'f16'], [256, 0, 'f32'], [64, 0, 'f16']]) {
        const info = await engine.load({ model: file, nCtx: targetCtx, kvType, nSeqMax: 2 });
        const d = await engine.loadDraft({ model: file, ...(nCtx ? { nCtx } : {}) });
        assert.equal(d.nCtx, nCtx || Math.min(info.nCtx, h.ctx), 'the draft\'s context: the model\'s, as far as the draft\'s reaches');
        const need = draftBytes(size, h, { nCtx: d.nCtx, kvType });
        const est = need.kv + need.scratch - need.grows;
        assert.ok(Math.abs(est - d.contextBytes) <= 0.01 * d.contextBytes,
          `${path.basename(file)}, draft nCtx ${d.nCtx} ${kvType}: estimated ${est} bytes, the draft's context has ${d.contextBytes}`);
        // the draft adds its own: not the module's share, nor speculative decoding's rows, which
        // the model's estimate counts once
        const alone = modelBytes(size, h, { nCtx: d.nCtx, kvType, threads: 1 });
        assert.ok(need.total < alone.total && need.total >= need.weights + need.kv + need.scratch);
        assert.equal(alone.total - need.total, alone.shared);
      }
    }
  } finally {
    await engine.free();
  }
});

test('draft memory: a draft too large for what wasm32 has left is refused before it is read, naming both sizes', async () => {
  const engine = await createEngine({ threads: 1 });
  try {
    const info = await engine.load({ model: GGUF, nCtx: 256 });
    assert.equal(info.memory64, false, 'a small model: wasm32');
    const plain = await greedy(engine);
    const big = new CountingBlob(padded);
    const progress = [];
    await assert.rejects(engine.loadDraft({ model: big, onProgress: (p) => progress.push(p) }), (e) => {
      assert.equal(e.code, 'WLM_ERR_NOMEM');
      assert.match(e.message, new RegExp('^loadDraft\\(\\): the draft model stories260K-past4GB\\.gguf needs 4\\.3\\d GB of wasm memory ' +
        '\\(4\\.3\\d GB of weights \\+ 0\\.00 GB KV cache \\(nCtx 256\\) \\+ 0\\.0\\d GB scratch\\), and 4\\.1\\d GB is left: the model takes up ' +
        "to 0\\.0\\d GB \\(its estimate at load\\) of the wasm32 module's 4 GB, of which 97 % is usable; the module cannot change"), e.message);
      assert.match(e.message, /memory64: true/);
      return true;
    });
    // the header's 64 KiB only (a read of the file would start with a 16 MiB slice)
    assert.deepEqual(big.reads, [[0, 64 << 10]]);
    assert.deepEqual(progress, [], 'no progress: nothing was read');
    // the engine is as it was: a draft that fits loads, and drafts
    const d = await engine.loadDraft({ model: GGUF });
    assert.ok(d.contextBytes > 0);
    assert.deepEqual(await greedy(engine, { draft: { maxTokens: 4 } }), plain);
    assert.equal(engine.lastResult.accepted, engine.lastResult.drafted);
    assert.ok(engine.lastResult.drafted > 0);
  } finally {
    await engine.free();
  }
});

test('draft memory: beside a model that fills most of wasm32, a draft whose weights fit but not its KV cache is refused unread; a shorter one loads', { timeout: 600000 }, async () => {
  // Llama-3.2-1B's shape (0.8 GB at Q4_K_M, all-zero matrices, sparse) at 57344 positions: 2.7 GB
  // of the 4 GB. The same file as its own draft at the same nCtx needs another 2.7 GB: its 0.8 GB
  // of weights would still have been malloc'd and read before its context failed. At 1024
  // positions it fits, and drafts.
  const file = path.join(dir, 'llama3.2-1b-Q4_K_M-zero.gguf');
  writeHeaderOnly('llama', 'llama3.2-1b', file, { type: 'Q4_K_M' });
  const engine = await createEngine({ threads: 1 });
  try {
    const h = await header(file);
    const size = fs.statSync(file).size;
    const nCtx = 57344; // (a KV cache under 2 GiB: one calloc, which dlmalloc cannot grow 2 GiB at once for)
    const model = modelBytes(size, h, { nCtx });
    const left = WASM32_BYTES * WASM32_FIT - model.total;
    const info = await engine.load({ model: file, nCtx });
    assert.equal(info.memory64, false, `${(model.total / GB).toFixed(2)} GB: wasm32`);
    const long = draftBytes(size, h, { nCtx }), short = draftBytes(size, h, { nCtx: 1024 });
    assert.ok(long.weights < left && long.total > left && short.total < left, 'the sizes this test needs');
    const blob = new CountingBlob(file);
    const progress = [];
    await assert.rejects(engine.loadDraft({ model: blob, onProgress: (p) => progress.push(p) }), (e) => {
      assert.equal(e.code, 'WLM_ERR_NOMEM');
      const s = (b) => (b / GB).toFixed(2).replace('.', '\\.');
      assert.match(e.message, new RegExp(`^loadDraft\\(\\): the draft model llama3\\.2-1b-Q4_K_M-zero\\.gguf needs ${s(long.total)} GB of wasm memory ` +
        `\\(${s(long.weights)} GB of weights \\+ ${s(long.kv)} GB KV cache \\(nCtx 57344\\) \\+ \\d\\.\\d\\d GB scratch\\), and ${s(left)} GB is left: ` +
        `the model takes up to ${s(model.total)} GB \\(its estimate at load\\)`), e.message);
      return true;
    });
    // only the header's peeks (64 KiB, then 4x while the vocabulary goes on), no progress
    assert.ok(blob.reads.every(([a, b], i) => a === 0 && b === (64 << 10) * 4 ** i), JSON.stringify(blob.reads));
    assert.ok(blob.reads.at(-1)[1] < size / 16);
    assert.deepEqual(progress, []);
    const d = await engine.loadDraft({ model: file, nCtx: 1024 });
    const est = short.kv + short.scratch - short.grows;
    assert.ok(Math.abs(est - d.contextBytes) <= 0.01 * d.contextBytes, `estimated ${est}, the context has ${d.contextBytes}`);
    const r = await engine.complete(PROMPT, { maxTokens: 3, temperature: 0, draft: { maxTokens: 2 } });
    assert.equal(r.nGenerated, 3);
    assert.ok(engine.lastResult.drafted > 0);
  } finally {
    await engine.free();
    fs.rmSync(file, { force: true });
  }
});

test('draft memory: the rule, on sizes (wasm32: 97 % of 4 GB less the model; memory64: a block below 4 GB)', () => {
  const GiB = 2 ** 30;
  const draft = (total) => ({ weights: total - GiB / 4, kv: GiB / 8, state: 0, scratch: GiB / 16, other: GiB / 16, vision: 0, total });
  const x32 = { memory64: false, memory: { buffer: { byteLength: 3 * GiB } } };
  const model = { total: 3 * GiB };
  assert.equal(fitDraft(x32, model, draft(WASM32_BYTES * WASM32_FIT - 3 * GiB), 64, 'd.gguf'), 0, 'exactly what is left');
  assert.throws(() => fitDraft(x32, model, draft(1.2 * GiB), 64, 'd.gguf'), (e) => e.code === 'WLM_ERR_NOMEM' &&
    /the draft model d\.gguf needs 1\.29 GB of wasm memory .* and 0\.94 GB is left: the model takes up to 3\.22 GB \(its estimate at load\)/.test(e.message));
  // no estimate: the memory in use
  assert.throws(() => fitDraft(x32, null, draft(1.2 * GiB), 64), (e) => /needs 1\.29 GB .* 0\.94 GB is left: the model takes up to 3\.22 GB of/.test(e.message));

  // memory64: a fake heap with `free` bytes in one block below 4 GB at 3 GiB, the rest at 5 GiB
  const fake = (free) => {
    const calls = [];
    return {
      calls, memory64: true, memory: { buffer: { byteLength: 6 * GiB } },
      mallocHigh: (n) => { calls.push(n); return n <= free ? 3 * GiB : 5 * GiB; },
      wlmjs_free: () => {},
    };
  };
  const d = draft(GiB);
  const low = Math.ceil((d.scratch + d.other) * 1.25) + (4 << 20);
  const roomy = fake(GiB);
  assert.equal(fitDraft(roomy, { total: 8 * GiB }, d, 64, 'd.gguf'), low, 'its scratch and tables kept below 4 GB');
  assert.deepEqual(roomy.calls, [low], 'one probe');
  const tight = fake(100 * 2 ** 20);
  assert.throws(() => fitDraft(tight, { total: 8 * GiB }, d, 64, 'd.gguf'), (e) => {
    assert.equal(e.code, 'WLM_ERR_NOMEM');
    assert.match(e.message, new RegExp(`need a block of ${(low / GB).toFixed(2)} GB there .*, and the largest free block below 4 GB, beside the model's, is 0\\.10 GB`));
    return true;
  });
  assert.ok(tight.calls.length <= 12, `${tight.calls.length} probes`);
  // past 16 GiB: the total decides, before any probe
  const full = fake(GiB);
  assert.throws(() => fitDraft(full, { total: 15 * GiB }, d, 64), (e) => /and 0\.56 GB is left: .* memory64 module's 16 GiB/.test(e.message));
  assert.deepEqual(full.calls, []);
});

test('draft memory: in the memory64 module a draft past 4 GB loads above the heap, and one past 16 GiB is refused unread', { skip: skip64, timeout: 600000 }, async () => {
  const engine = await createEngine({ threads: 1, memory64: true });
  try {
    const info = await engine.load({ model: GGUF, nCtx: 256 });
    assert.equal(info.memory64, true);
    const plain = await greedy(engine);

    const huge = path.join(dir, 'past16GiB.gguf');
    padGguf(GGUF, huge, { padBytes: 17e9 });
    const blob = new CountingBlob(huge);
    await assert.rejects(engine.loadDraft({ model: blob }), (e) => e.code === 'WLM_ERR_NOMEM' &&
      /^loadDraft\(\): the draft model past16GiB\.gguf needs 17\.\d\d GB of wasm memory .* of the memory64 module's 16 GiB/.test(e.message));
    assert.deepEqual(blob.reads, [[0, 64 << 10]]);
    fs.rmSync(huge);

    const d = await engine.loadDraft({ model: padded });
    assert.equal(d.vocabSize, 512);
    assert.deepEqual(await greedy(engine, { draft: { maxTokens: 4 } }), plain, 'the padded draft drafts the model\'s tokens');
    assert.equal(engine.lastResult.accepted, engine.lastResult.drafted);
    assert.ok(engine.lastResult.drafted > 0);
    await engine.loadDraft(null);
    assert.deepEqual(await greedy(engine), plain);
  } finally {
    await engine.free();
  }
});
