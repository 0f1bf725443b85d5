// threads.test.mjs — createEngine({threads}): the thread pool's helpers run on the threaded
// module (dist/wasmlm-mt.wasm) and change no result: logits, greedy tokens, sampled tokens and
// their probabilities, batches and beams are bitwise equal for 1, 2 and 3 threads on a model big
// enough for its products to be split (a synthetic stories15M-shaped checkpoint written to a
// temporary directory by tools/synth.mjs); a thread count above the cores is clamped to them
// (engine.threads, info.threads; in-thread and worker engines); option errors; the worker engine
// passes the option. The 3-thread engine needs more cores than this machine may have: the test
// pretends there are 4 while it is created (os.availableParallelism, which createEngine reads).

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os, { tmpdir } from 'node:os';
import { syncBuiltinESMExports } from 'node:module';
import { join } from 'node:path';
import { createEngine, createWorkerEngine } from '../../js/wasmlm.js';
import { writeSyntheticModel } from '../../tools/synth.mjs';
import { BIG_TOKENIZER, MODEL, REPO, TOKENIZER, collect, loadedEngine, webWorkerLike } from './_helpers.mjs';

const dir = mkdtempSync(join(tmpdir(), 'wasmlm-threads-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const model = join(dir, 'stories15M.bin');
await writeSyntheticModel({ shape: 'stories15M', out: model, seed: 7 });

/** Runs `fn` while os.availableParallelism() says `n` (createEngine clamps threads to it). */
async function withCores(n, fn) {
  const real = os.availableParallelism;
  os.availableParallelism = () => n;
  syncBuiltinESMExports(); // the named export `import('node:os')` gives follows the object
  try {
    return await fn();
  } finally {
    os.availableParallelism = real;
    syncBuiltinESMExports();
  }
}

const engines = {};
for (const n of [1, 2, 3]) {
  engines[n] = await withCores(4, () => createEngine({ threads: n }));
  await engines[n].load({ model, tokenizer: BIG_TOKENIZER, nCtx: 128 });
}
after(() => Promise.all(Object.values(engines).map((e) => e.free())));

const PROMPT = 'Once upon a time there was a little girl who lived in a village near the forest';

test('engine.threads and info.threads report the pool size', () => {
  for (const n of [1, 2, 3]) {
    assert.equal(engines[n].threads, n);
    assert.equal(engines[n].info.threads, n);
  }
});

test('logits of a prefill and of decode steps are bitwise equal for 1, 2, 3 threads', async () => {
  // 120 positions: past ~114, attention (6 heads x 48) is split by heads as well
  const once = await engines[1].tokenize(PROMPT);
  const ids = Int32Array.from({ length: 120 }, (_, i) => (i === 0 ? 1 : once[1 + ((i - 1) % (once.length - 1))]));
  const runs = {};
  for (const n of [1, 2, 3]) {
    const e = engines[n];
    await e.reset();
    const rows = [await e.evalTokens(ids)];
    for (const id of [300, 1200, 29871]) rows.push(await e.evalTokens([id]));
    runs[n] = rows;
  }
  for (const n of [2, 3]) {
    for (let r = 0; r < runs[1].length; r++) {
      const a = new Uint32Array(runs[1][r].buffer), b = new Uint32Array(runs[n][r].buffer);
      const i = a.findIndex((v, k) => v !== b[k]);
      assert.equal(i, -1, `${n} threads, row ${r}: logit ${i} is ${runs[n][r][i]}, not ${runs[1][r][i]}`);
    }
  }
});

test('sampled generation with alternatives is identical for 1, 2, 3 threads', async () => {
  const params = { temperature: 0.9, topK: 40, topP: 0.95, seed: 11, maxTokens: 24, nProbs: 3 };
  const out = {};
  for (const n of [1, 2, 3]) out[n] = await collect(engines[n].generate(PROMPT, params));
  assert.equal(out[1].length, 24);
  assert.deepEqual(out[2], out[1]);
  assert.deepEqual(out[3], out[1]);
});

test('batched generation and beam search are identical for 1 and 2 threads', async () => {
  const prompts = ['Once upon a time', 'The little dog', 'She wanted to'];
  const params = { temperature: 0.8, seed: 5, maxTokens: 12 };
  const b1 = await collect(engines[1].generateBatch(prompts, params));
  const b2 = await collect(engines[2].generateBatch(prompts, params));
  assert.ok(b1.length >= 30);
  assert.deepEqual(b2, b1);
  const s1 = await engines[1].beamSearch('Once upon a time', { width: 3, maxTokens: 8 });
  const s2 = await engines[2].beamSearch('Once upon a time', { width: 3, maxTokens: 8 });
  assert.deepEqual(s2.beams, s1.beams);
});

test('more threads than cores: clamped to the cores (and 16), reported in threads and info', async () => {
  const cores = os.availableParallelism();
  for (const asked of [cores + 1, cores + 6, 1000]) {
    const e = await createEngine({ threads: asked });
    try {
      assert.equal(e.threads, Math.min(cores, 16), `threads: ${asked} on ${cores} cores`);
      await e.load({ model: MODEL, tokenizer: TOKENIZER });
      assert.equal(e.info.threads, e.threads);
    } finally {
      await e.free();
    }
  }
  // and to WLM_MAX_THREADS on a machine with more cores than that
  const big = await withCores(64, () => createEngine({ threads: 40 }));
  assert.equal(big.threads, 16);
  await big.free();
  // the same for the worker engine, which reports the worker's count
  const w = await createWorkerEngine({ worker: await webWorkerLike(), threads: cores + 6 });
  try {
    assert.equal(w.threads, Math.min(cores, 16));
    await w.load({ model: MODEL, tokenizer: TOKENIZER });
    assert.equal(w.info.threads, w.threads);
  } finally {
    await w.free();
  }
});

test('threads option errors', async () => {
  for (const threads of [0, -3, 1.5, 'two', null, NaN]) {
    await assert.rejects(createEngine({ threads }), { code: 'WLM_ERR_INVALID_ARG', message: /^threads must be/ }, String(threads));
  }
  await withCores(4, async () => {
    await assert.rejects(createEngine({ threads: 2, simd: false }), { code: 'WLM_ERR_UNSUPPORTED' });
    await assert.rejects(createEngine({ threads: 2, wasm: join(REPO, 'dist/wasmlm.wasm') }),
      { code: 'WLM_ERR_UNSUPPORTED', message: /not the threaded build/ });
  });
  // 'auto' with the scalar build, or a module without threads: one thread, no error
  const scalar = await createEngine({ simd: false });
  assert.equal(scalar.threads, 1);
  await scalar.free();
  const single = await createEngine({ wasm: join(REPO, 'dist/wasmlm.wasm') });
  assert.equal(single.threads, 1);
  await single.free();
});

test('threads: 1 with the threaded module works (shared memory, no helpers)', async () => {
  const e = await loadedEngine({ threads: 1, wasm: join(REPO, 'dist/wasmlm-mt.wasm') });
  const ref = await loadedEngine({ threads: 1 });
  try {
    assert.equal(e.threads, 1);
    const r = await e.complete('Once upon a time', { temperature: 0, maxTokens: 20 });
    assert.equal(r.text, (await ref.complete('Once upon a time', { temperature: 0, maxTokens: 20 })).text);
  } finally {
    await e.free();
    await ref.free();
  }
});

test('the worker engine starts its own helpers (threads: 2) and generates the same text', async () => {
  const e = await createWorkerEngine({ worker: await webWorkerLike(), threads: 2 });
  try {
    assert.equal(e.threads, 2);
    await e.load({ model, tokenizer: BIG_TOKENIZER, nCtx: 128 });
    const got = await e.complete(PROMPT, { temperature: 0, maxTokens: 16 });
    const want = await engines[1].complete(PROMPT, { temperature: 0, maxTokens: 16 });
    assert.equal(got.text, want.text);
  } finally {
    await e.free(); // terminates the worker, which would keep the process alive
  }
});
