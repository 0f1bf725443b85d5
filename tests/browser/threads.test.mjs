// threads.test.mjs — helper threads in Chromium. Served as `npm start` serves it (cross-origin
// isolated), the page's engine runs on every core (Threads stat > 1), and a worker engine with
// threads: 2 computes exactly what threads: 1 does on a model whose products are split (a
// synthetic stories15M-shaped checkpoint written here); served without the isolation headers
// (any static host), the page still works on one thread and says why, and asking for threads
// explicitly is a clear error. Screenshots: tests/artifacts/threads-*.png.
//
//   node --test tests/browser/

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { writeSyntheticModel } from '../../tools/synth.mjs';
import { STEP_TIMEOUT, startTestServer, launch, loadOutcome, screenshot } from './_helpers.mjs';

const dir = mkdtempSync(path.join(os.tmpdir(), 'wasmlm-threads-'));
const modelFile = path.join(dir, 'stories15M.bin');
let browser = null;

before(async () => {
  await writeSyntheticModel({ shape: 'stories15M', out: modelFile, seed: 7 });
  browser = await launch();
});

after(async () => {
  await browser?.close();
  rmSync(dir, { recursive: true, force: true });
});

test('cross-origin isolated: the page uses every core, and 2 threads compute what 1 does',
  { timeout: 4 * STEP_TIMEOUT }, async () => {
    const server = await startTestServer({ files: { '/synthetic/stories15M.bin': modelFile } });
    try {
      const { page } = browser;
      await page.goto(server.url);
      const out = await loadOutcome(page);
      assert.equal(out.state, 'ready', out.text);
      assert.equal(await page.evaluate(() => self.crossOriginIsolated), true);
      const cores = await page.evaluate(() => navigator.hardwareConcurrency);
      const want = String(Math.max(1, Math.min(4, cores)));
      assert.equal(await page.locator('#stat-threads').textContent(), want);
      assert.match(await page.locator('#model-info').textContent(), new RegExp(`${want} threads?`));
      await screenshot(page, 'threads-isolated');

      const runs = await page.evaluate(async () => {
        const { createWorkerEngine } = await import('../js/wasmlm.js');
        const tokenizer = await (await fetch('/models/files/tokenizer.bin')).blob();
        const model = await (await fetch('/synthetic/stories15M.bin')).blob();
        const out = {};
        for (const threads of [1, 2]) {
          const e = await createWorkerEngine({ threads });
          try {
            await e.load({ model, tokenizer, nCtx: 128 });
            const tokens = [];
            for await (const t of e.generate('Once upon a time there was a little girl',
              { temperature: 0.9, seed: 3, maxTokens: 20, nProbs: 3 })) tokens.push(t);
            out[threads] = { threads: e.threads, tokens, decode: e.lastResult.decodeTokensPerSec };
          } finally {
            await e.free();
          }
        }
        return out;
      });
      assert.equal(runs[1].threads, 1);
      assert.equal(runs[2].threads, 2);
      assert.equal(runs[1].tokens.length, 20);
      assert.deepEqual(runs[2].tokens, runs[1].tokens);
      browser.assertNoProblems();
    } finally {
      await server.close();
    }
  });

test('a worker engine\'s helper threads are Workers of the page; one that cannot start fails the load with why',
  { timeout: 2 * STEP_TIMEOUT }, async () => {
    // The page starts the helpers of an engine in a Worker (js/worker/protocol.js Helper): a Worker
    // constructed inside a worker can block forever in Firefox while DevTools or WebDriver BiDi
    // listen for workers (docs/how-it-works.md, Threads). js/runtime/thread.js served broken here (the
    // wrong MIME type for a module script): the page's helper Worker gets an error event, which
    // must reach the engine in the worker and end the load with it.
    const broken = path.join(dir, 'thread.js');
    writeFileSync(broken, 'export {};\n');
    const good = await startTestServer();
    const bad = await startTestServer({ files: { '/js/runtime/thread.js': broken } });
    try {
      const { page } = browser;
      const run = () => page.evaluate(async () => {
        const created = [];
        const NativeWorker = window.Worker;
        window.Worker = class extends NativeWorker {
          constructor(url, options) {
            super(url, options);
            const entry = { url: new URL(url, location.href).pathname, terminated: false };
            created.push(entry);
            const terminate = this.terminate.bind(this);
            this.terminate = () => { entry.terminated = true; terminate(); };
          }
        };
        try {
          const { createWorkerEngine } = await import('../js/wasmlm.js');
          const e = await createWorkerEngine({ threads: 2 });
          let outcome;
          try {
            await e.load({ model: '/models/files/stories260K.bin', tokenizer: '/models/files/tok512.bin' });
            let text = '';
            for await (const t of e.generate('Once', { temperature: 0, maxTokens: 8 })) text += t.text;
            outcome = { threads: e.threads, text };
          } catch (err) {
            outcome = { code: err.code, message: err.message };
          }
          const live = created.filter((w) => !w.terminated).map((w) => w.url);
          await e.free();
          return { ...outcome, live, after: created.filter((w) => !w.terminated).map((w) => w.url) };
        } finally {
          window.Worker = NativeWorker;
        }
      });
      // (the demo's own engine, from dist/, loads first: its Workers are not counted)
      await page.goto(good.url);
      assert.equal((await loadOutcome(page)).state, 'ready');
      const ok = await run();
      assert.equal(ok.threads, 2, JSON.stringify(ok));
      assert.ok(ok.text.length > 0, JSON.stringify(ok));
      assert.deepEqual(ok.live, ['/js/worker/worker.js', '/js/runtime/thread.js'], 'the engine\'s Worker and its helper, both the page\'s');
      assert.deepEqual(ok.after, [], 'free() ended both');

      await page.goto(bad.url);
      assert.equal((await loadOutcome(page)).state, 'ready');
      const failed = await run();
      assert.equal(failed.threads, undefined, JSON.stringify(failed));
      assert.match(failed.message, /helper thread/, JSON.stringify(failed));
      assert.deepEqual(failed.live, ['/js/worker/worker.js'], 'the helper that failed was terminated');
      assert.deepEqual(failed.after, []);
    } finally {
      await good.close();
      await bad.close();
    }
  });

test('a plain static host (no isolation headers): one thread, said so; threads: 2 is refused',
  { timeout: 2 * STEP_TIMEOUT }, async () => {
    const server = await startTestServer({ isolate: false });
    try {
      const { page } = browser;
      await page.goto(server.url);
      const out = await loadOutcome(page);
      assert.equal(out.state, 'ready', out.text);
      assert.equal(await page.evaluate(() => self.crossOriginIsolated), false);
      assert.equal(await page.locator('#stat-threads').textContent(), '1 (the page is not cross-origin isolated)');
      await screenshot(page, 'threads-not-isolated');
      const err = await page.evaluate(async () => {
        const { createWorkerEngine } = await import('../js/wasmlm.js');
        try {
          await createWorkerEngine({ threads: 2 });
          return null;
        } catch (e) {
          return { code: e.code, message: e.message };
        }
      });
      assert.equal(err?.code, 'WLM_ERR_UNSUPPORTED');
      assert.match(err.message, /cross-origin isolated/);
      browser.assertNoProblems();
    } finally {
      await server.close();
    }
  });
