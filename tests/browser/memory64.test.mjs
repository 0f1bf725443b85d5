// memory64.test.mjs — the memory64 (wasm64) modules in Chromium, in the page's worker engine:
// createWorkerEngine({memory64: true}) runs dist/wasmlm64-*.wasm (with 2 threads on the
// cross-origin-isolated page: a shared memory64 memory and its helper Workers) and gives the same
// tokens and probabilities as the wasm32 build. (Past 4 GB: tests/js/memory64.test.mjs, in Node
// 24, which has the same V8 memory64.) Skipped when the memory64 modules are not built.
//
//   node --test tests/browser/

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { REPO, STEP_TIMEOUT, startTestServer, launch, loadOutcome } from './_helpers.mjs';

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
