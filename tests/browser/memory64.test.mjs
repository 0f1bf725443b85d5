// memory64.test.mjs — the memory64 (wasm64) modules in Chromium, in the page's worker engine:
// createWorkerEngine({memory64: true}) runs dist/wasmlm64-*.wasm (with 2 threads on the
// cross-origin-isolated page: a shared memory64 memory and its helper Workers) and gives the same
// tokens and probabilities as the wasm32 build; and a model past 4 GB (stories260K with 4.3 GB of
// zeros before its tensors, tools/gguf_pad.mjs, a sparse file served over HTTP) loads by
// itself on the memory64 module, streamed from the download into the worker's memory, with
// the unpadded model's tokens and probabilities. (The same in Node 24, with the native CLI's
// tokens: tests/js/memory64.test.mjs.) Skipped when the memory64 modules are not built.
//
//   node --test tests/browser/

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import { padGguf } from '../../tools/gguf_pad.mjs';
import { MODELS, REPO, STEP_TIMEOUT, startTestServer, launch, loadOutcome } from './_helpers.mjs';

const BUILT = fs.existsSync(path.join(REPO, 'dist/wasmlm64-mt.wasm'));
let browser = null;
let server = null;

before(async () => {
  if (!BUILT) return;
  browser = await launch();
  server = await startTestServer();
});

after(async () => {
  await browser?.close();
  await server?.close?.();
});

test('Chromium: a model past 4 GB loads on the memory64 module by itself, with the tokens of the unpadded model',
  { timeout: 8 * STEP_TIMEOUT, skip: BUILT ? false : 'dist/wasmlm64*.wasm not built' }, async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-m64-page-'));
    const plain = path.join(MODELS, 'stories260K.gguf');
    const padded = path.join(dir, 'stories260K-past4GB.gguf');
    const big = await (async () => {
      const r = padGguf(plain, padded, { padBytes: 2 ** 32 + (16 << 20) });
      assert.ok(r.tensors.slice(1).every((t) => t.offset > 2 ** 32), 'every tensor of the model starts past 4 GiB');
      return startTestServer({ files: { '/past4GB.gguf': padded, '/plain.gguf': plain } });
    })();
    try {
      const { page } = browser;
      await page.goto(big.url);
      assert.equal((await loadOutcome(page)).state, 'ready');
      const runs = await page.evaluate(async () => {
        const { createWorkerEngine } = await import('../js/wasmlm.js');
        const out = [];
        for (const model of ['/plain.gguf', '/past4GB.gguf']) {
          const e = await createWorkerEngine({ threads: 1 }); // memory64 chosen at load
          try {
            const info = await e.load({ model, nCtx: 256 });
            const tokens = [];
            for await (const t of e.generate('Once upon a time', { temperature: 0, maxTokens: 24, nProbs: 2 })) {
              tokens.push([t.id, t.prob, t.top.map((a) => a.id)]);
            }
            out.push({ model, memory64: info.memory64, tokens });
          } finally {
            await e.free();
          }
        }
        return out;
      });
      assert.deepEqual(runs.map((r) => r.memory64), [false, true], 'wasm32 for the small file, memory64 past 4 GB, by itself');
      assert.equal(runs[1].tokens.length, 24);
      // the same weights: the same ids; the probabilities within the two builds' float order
      // (wasm32 here is the page's relaxed build, the memory64 module may be SIMD128)
      assert.deepEqual(runs[1].tokens.map((t) => t[0]), runs[0].tokens.map((t) => t[0]), 'greedy ids');
      runs[1].tokens.forEach((t, i) => assert.ok(Math.abs(t[1] - runs[0].tokens[i][1]) <= 1e-4, `token ${i}: p ${t[1]} vs ${runs[0].tokens[i][1]}`));
      browser.assertNoProblems();
    } finally {
      await big.close?.();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

test('Chromium: the memory64 worker engine computes what the wasm32 one does (1 and 2 threads)',
  { timeout: 4 * STEP_TIMEOUT, skip: BUILT ? false : 'dist/wasmlm64*.wasm not built' }, async () => {
    const { page } = browser;
    await page.goto(server.url);
    assert.equal((await loadOutcome(page)).state, 'ready');
    const runs = await page.evaluate(async () => {
      const { createWorkerEngine } = await import('../js/wasmlm.js');
      const model = await (await fetch('/models/files/stories260K.gguf')).blob();
      const out = [];
      for (const [memory64, threads] of [[false, 1], [true, 1], [true, 2]]) {
        const e = await createWorkerEngine({ memory64, threads });
        try {
          const info = await e.load({ model, nCtx: 256 });
          const tokens = [];
          for await (const t of e.generate('Once upon a time', { temperature: 0, maxTokens: 24, nProbs: 2 })) {
            tokens.push([t.id, t.prob, t.top.map((a) => a.id)]);
          }
          out.push({ memory64, threads, info: { memory64: info.memory64, build: info.build, threads: info.threads }, tokens });
        } finally {
          await e.free();
        }
      }
      return out;
    });
    assert.deepEqual(runs.map((r) => r.info.memory64), [false, true, true]);
    assert.equal(runs[2].info.threads, 2, 'the isolated page runs 2 threads on the memory64 module');
    assert.deepEqual(runs[1].tokens, runs[0].tokens, '1 thread: tokens and probabilities bitwise');
    assert.deepEqual(runs[2].tokens, runs[0].tokens, '2 threads');
    browser.assertNoProblems();
  });
