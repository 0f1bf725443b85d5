// ttft.test.mjs — time to first token of the demo page on a cold load (fresh Chromium profile:
// empty HTTP cache, Cache Storage and wasm code cache), served as `npm start` serves it. An init
// script presses Generate the moment the page says 'ready' and notes when the first token
// <span> appears; the library's User Timing marks (wasmlm:engine-ready, wasmlm:model-loaded,
// wasmlm:first-token) come in order before it. The page fetches only the wasm build that runs
// (wasmlm-relaxed-mt.wasm when cross-origin isolated with 2+ cores, wasmlm-relaxed.wasm on a plain
// static host: Chromium runs relaxed SIMD),
// and fetches it itself (compiled in the page while the worker starts, then posted to it).
// index.html's first script starts the worker, the compile and the model's download before the
// page's modules run (the wasm module's download before the page's bundle is evaluated: the
// script picks it as js/runtime/wasm.js would, the library adopts it); each file is still requested
// once. The page's scripts are three bundles
// (dist/demo.js, dist/worker.js, dist/thread.js; tools/bundle.mjs): no source module is fetched,
// nor the chat-template library before a chat model is chosen.
// The measured times are printed as diagnostics; the only time bound is
// a generous one that a loaded machine does not reach: speed is bench/ttft.mjs's business.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import os from 'node:os';
import { launch, startTestServer } from './_helpers.mjs';

/** Generous: a cold first token took 0.3–1.3 s on an idle 2-core machine, 9.5 s at load 20. */
const BOUND_MS = 30_000;

/** Runs in the page before its scripts: presses Generate at 'ready', notes the first token. */
function probe() {
  const t = (window.__ttft = { ready: null, firstToken: null, error: null });
  const watch = () => {
    new MutationObserver(() => {
      const s = document.body.dataset.state;
      if (s === 'ready' && t.ready === null) {
        t.ready = performance.now();
        document.getElementById('generate').click();
      } else if (s === 'error' && t.error === null) {
        t.error = document.getElementById('load-status')?.textContent ?? 'error';
      }
    }).observe(document.body, { attributes: true, attributeFilter: ['data-state'] });
    const out = document.getElementById('output');
    new MutationObserver(() => {
      if (t.firstToken === null && out.querySelector('.tok')) t.firstToken = performance.now();
    }).observe(out, { childList: true, subtree: true });
  };
  if (document.body) watch();
  else document.addEventListener('DOMContentLoaded', watch, { once: true });
}

async function coldRun(t, { isolate }) {
  const server = await startTestServer({ isolate });
  const browser = await launch();
  try {
    const { page } = browser;
    await page.addInitScript(probe);
    await page.goto(server.url);
    await page.waitForFunction(() => window.__ttft.firstToken !== null || window.__ttft.error !== null,
      null, { timeout: BOUND_MS, polling: 50 });
    const r = await page.evaluate(() => ({
      ...window.__ttft,
      marks: Object.fromEntries(performance.getEntriesByType('mark').map((m) => [m.name, m.startTime])),
      wasm: performance.getEntriesByType('resource').filter((e) => /\/dist\/[\w-]+\.wasm$/.test(e.name))
        .map((e) => ({ file: e.name.replace(/^.*\//, ''), start: e.startTime, end: e.responseEnd })),
      bundle: performance.getEntriesByType('resource').filter((e) => /\/dist\/demo\.js$/.test(e.name))
        .map((e) => ({ start: e.startTime, end: e.responseEnd })),
      model: performance.getEntriesByType('resource').filter((e) => /stories260K\.bin$/.test(e.name))
        .map((e) => ({ start: e.startTime, end: e.responseEnd })),
      cores: navigator.hardwareConcurrency,
    }));
    assert.equal(r.error, null, 'the default model loads');
    const m = r.marks;
    t.diagnostic(`${isolate ? 'isolated' : 'not isolated'}: first token ${r.firstToken.toFixed(0)} ms after ` +
      `navigation start (ready ${r.ready.toFixed(0)}; worker started ${m['wasmlm-demo:worker-started']?.toFixed(0)}, ` +
      `demo main ${m['wasmlm-demo:main']?.toFixed(0)}, engine ready ${m['wasmlm:engine-ready']?.toFixed(0)}, ` +
      `model loaded ${m['wasmlm:model-loaded']?.toFixed(0)}, first token ${m['wasmlm:first-token']?.toFixed(0)}; ` +
      `wasm ${r.wasm.map((w) => `${w.file} ${w.start.toFixed(0)}–${w.end.toFixed(0)}`).join(', ')}; ` +
      `model ${r.model.map((w) => `${w.start.toFixed(0)}–${w.end.toFixed(0)}`).join(', ')}; load average ${os.loadavg()[0].toFixed(1)})`);

    // The library's marks, in order, before the token reached the page's DOM.
    for (const name of ['wasmlm:engine-ready', 'wasmlm:model-loaded', 'wasmlm:first-token']) {
      assert.equal(typeof m[name], 'number', `${name} is marked`);
    }
    assert.ok(m['wasmlm:model-loaded'] <= r.ready, 'the model is loaded before the page says ready');
    assert.ok(m['wasmlm:first-token'] >= r.ready && m['wasmlm:first-token'] <= r.firstToken,
      'the first-token mark lies between Generate and the token in the DOM');
    assert.ok(r.firstToken < BOUND_MS);

    // One wasm module, the one that runs, fetched by the page (the worker's own fetches are not
    // in the page's resource timing).
    // Chromium 156 passes the relaxed-SIMD probe (tests/browser/build.test.mjs), so the relaxed
    // build of the threaded or the single-threaded module.
    const want = isolate && r.cores > 1 ? 'wasmlm-relaxed-mt.wasm' : 'wasmlm-relaxed.wasm';
    assert.deepEqual(r.wasm.map((w) => w.file), [want], 'the page fetched exactly the module that runs');
    assert.deepEqual(server.requests.filter((q) => /^\/dist\/.*\.wasm$/.test(q.path)).map((q) => q.path), [`/dist/${want}`],
      'nothing fetched the other builds');

    // index.html's first script picks the module as js/runtime/wasm.js does and starts its download and
    // compile before it even asks for the page's bundle (dist/demo.js), which then adopts it
    // (adoptCompiled): the request is not held back until the bundle has arrived and run.
    assert.equal(r.bundle.length, 1, 'the bundle is fetched once');
    assert.equal(typeof m['wasmlm-demo:bundle'], 'number', 'the bundle marks its evaluation');
    assert.ok(r.wasm[0].start < m['wasmlm-demo:bundle'],
      `the wasm module is requested before the bundle is evaluated (${r.wasm[0].start.toFixed(0)} vs ${m['wasmlm-demo:bundle'].toFixed(0)} ms)`);
    // index.html's first script starts the worker, the module's compile and the default model's
    // download before the page's own module graph runs (demo.js's main); the page takes them
    // over instead of starting its own: one worker, and every file requested once.
    assert.ok(m['wasmlm-demo:worker-started'] < m['wasmlm-demo:main'],
      'the worker is started before the demo module runs');
    const count = (p) => server.requests.filter((q) => q.path === p).length;
    assert.equal(count('/dist/worker.js'), 1, 'one worker');
    assert.equal(count('/models/files/stories260K.bin'), 1, 'the model is downloaded once');
    assert.equal(count('/models/files/tok512.bin'), 1, 'the tokenizer is downloaded once');
    const paths = server.requests.map((q) => q.path);
    assert.deepEqual(paths.filter((p, i) => paths.indexOf(p) !== i), [], 'no file is requested twice');
    // The page runs from its bundles (tools/bundle.mjs): dist/demo.js, the worker's dist/worker.js
    // and, with threads, dist/thread.js; none of the source modules in js/ and web/ is fetched.
    // The chat-template library (@huggingface/jinja) is not fetched before a chat model is
    // chosen: stories260K has no template (tests/browser/chat.test.mjs loads it for one that has).
    assert.deepEqual(paths.filter((p) => p.endsWith('.js')).sort(),
      ['/dist/demo.js', ...(want.includes('-mt') ? ['/dist/thread.js'] : []), '/dist/worker.js'],
      'the page, worker and thread bundles, each once, and no other script');
    assert.ok(!paths.some((p) => p.startsWith('/node_modules/')), 'nothing from node_modules (jinja) before a chat model');
    browser.assertNoProblems();
  } finally {
    await browser.close();
    await server.close();
  }
}

test('cold load, cross-origin isolated (threads): first token, marks in order, one wasm module',
  { timeout: 120_000 }, (t) => coldRun(t, { isolate: true }));

test('cold load on a plain static host (one thread): the same with dist/wasmlm-relaxed.wasm',
  { timeout: 120_000 }, (t) => coldRun(t, { isolate: false }));
