// models.test.mjs — the demo page's model sources in headless Chromium: the download progress
// bar (bytes, total, rate) on a slowed-down download, Cache Storage (a reload makes no request
// to the server, and a file stored without the page's note still comes from it; the list shows sizes and removes one file or all; a full quota still loads the
// model), the error messages (HTTP 404, a CORS refusal, a network failure, a file that is not a
// model, a sha256 mismatch), the fallback to the published URL, and local files through the file
// picker and drag and drop.
// Screenshots go to tests/artifacts/models-*.png.
//
//   node --test tests/browser/

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import path from 'node:path';
import {
  REPO, MODELS, STEP_TIMEOUT, startTestServer, launch, loadOutcome, loadAfter, waitForState, setValue, screenshot,
} from './_helpers.mjs';

const MANIFEST = JSON.parse(await fs.readFile(path.join(REPO, 'models', 'manifest.json'), 'utf8'));
const entry = (id) => MANIFEST.models.find((m) => m.id === id);
const CACHE = 'wasmlm-models-v1';
const HTTP_404 = /status of 404/;

let server = null;      // serves the page
let elsewhere = null;   // another origin, which sends no CORS headers
let browser = null;
let page = null;

/** The page with the default model (the URL must not keep a ?model= chosen by an earlier test). */
const HOME = () => `${server.url}?model=stories260K`;

before(async () => {
  // A plain static host (no cross-origin isolation, so one engine thread and no helper
  // Workers), which the page must support anyway. On an isolated page these tests stalled ~1 run
  // in 2: Playwright's request interception (context.route) sends every worker's DevTools session
  // a command, and after the page terminates an engine Worker that had started nested helper
  // Workers, Chromium 156 keeps that Worker's session open without ever answering it, so route(),
  // unrouteAll() or goto() wait forever. Reproduced with route changes alone (3 stalls in ~150
  // on an isolated page, none in 120 on a plain one). Threads in the page: threads.test.mjs,
  // which intercepts nothing.
  server = await startTestServer({ isolate: false });
  elsewhere = await startTestServer({ isolate: false });
  browser = await launch();
  page = browser.page;
  await page.goto(HOME());
});

after(async () => {
  await browser?.close();
  await server?.close();
  await elsewhere?.close();
});

/** Opens "Load from a URL", loads the given URLs and waits for the outcome. */
async function loadUrl(modelUrl, tokenizerUrl = '') {
  if (await page.locator('#url-source').getAttribute('open') === null) {
    await page.locator('#url-source summary').click();
  }
  await page.locator('#model-url').fill(modelUrl);
  await page.locator('#tokenizer-url').fill(tokenizerUrl);
  return loadAfter(page, () => page.locator('#url-load').click());
}

/** The URLs stored in the page's Cache Storage bucket. */
function cachedUrls() {
  return page.evaluate(async (name) => {
    if (!(await caches.has(name))) return [];
    return (await (await caches.open(name)).keys()).map((r) => r.url);
  }, CACHE);
}

async function openCachePanel() {
  if (await page.locator('#cache-panel').getAttribute('open') === null) {
    await page.locator('#cache-panel summary').click();
  }
  await page.waitForFunction(() => document.getElementById('cache-summary').textContent !== '');
}

test('first load of stories260K comes from the server and is cached', { timeout: STEP_TIMEOUT }, async () => {
  const out = await loadOutcome(page);
  assert.equal(out.state, 'ready', out.text);
  assert.equal(out.cache, 'stored');
  assert.match(out.text, /stories260K ready · 1\.1 MB from this server in .* · cached for next time/);
  assert.equal(server.count('/models/files/stories260K.bin'), 1);
  assert.equal(server.count('/models/files/tok512.bin'), 1);
  assert.deepEqual((await cachedUrls()).sort(),
    [`${server.origin}/models/files/stories260K.bin`, `${server.origin}/models/files/tok512.bin`]);
  // The manifest's models with their sizes; the one without a published checksum marked.
  const options = await page.locator('#model option').allTextContents();
  assert.ok(options.some((o) => /^stories260K · 1\.1 MB$/.test(o)), options.join(' | '));
  for (const id of ['stories15M', 'stories42M', 'stories110M', 'tinyllama-1.1b-chat-q4_0', 'smolvlm-256m-instruct-q8_0']) {
    assert.ok(options.some((o) => new RegExp(`^${id} · [0-9.]+ [MG]B$`).test(o)), `${id}: ${options.join(' | ')}`);
  }
  assert.ok(options.some((o) => o === 'gpt2-q8_0 · size unknown · unverified'), options.join(' | '));
  assert.ok(options.some((o) => o.startsWith('stories260K-gguf')));
  assert.match(await page.locator('#model-note').textContent(), /sha256 checked/);
  browser.assertNoProblems();
});

test('a reload loads the model from Cache Storage without a request to the server', { timeout: STEP_TIMEOUT }, async () => {
  await page.goto(HOME());
  const out = await loadOutcome(page);
  assert.equal(out.state, 'ready', out.text);
  assert.equal(out.cache, 'hit');
  assert.match(out.text, /from the browser cache .*\(no download\)/);
  assert.equal(server.count('/models/files/stories260K.bin'), 1, 'no second request for the model');
  assert.equal(server.count('/models/files/tok512.bin'), 1, 'no second request for the tokenizer');
  await screenshot(page, 'models-cache-hit');
  browser.assertNoProblems();
});

test('a cached file the page has no note of (another page stored it) still comes from the cache', { timeout: STEP_TIMEOUT }, async () => {
  // Without web/sources.js's localStorage note the download starts beside the Cache Storage
  // lookup (a fresh profile's first lookup is slow); the lookup's hit wins and the download is
  // dropped.
  await page.evaluate(() => localStorage.removeItem('wasmlm-demo:stored'));
  await page.goto(HOME());
  const out = await loadOutcome(page);
  assert.equal(out.state, 'ready', out.text);
  assert.equal(out.cache, 'hit');
  assert.match(out.text, /from the browser cache .*\(no download\)/);
  await page.evaluate(() => localStorage.setItem('wasmlm-demo:stored', '1'));
  browser.assertNoProblems();
});

test('the progress bar shows bytes, total and rate during a slow download', { timeout: STEP_TIMEOUT }, async () => {
  // /slow/ streams 32 kB every 40 ms: the 1.06 MB model takes about 1.3 s.
  await page.evaluate(() => {
    const bar = document.getElementById('load-progress');
    const status = document.getElementById('load-status');
    const detail = document.getElementById('load-detail');
    window.__progress = [];
    window.__sampling = true;
    const sample = () => {
      window.__progress.push({ value: bar.value, max: bar.max, status: status.textContent, detail: detail.textContent,
        state: document.body.dataset.state });
      if (window.__sampling) requestAnimationFrame(sample);
    };
    requestAnimationFrame(sample);
  });
  const headline = 'Downloading stories260K.bin from this server…';
  const numbers = /^(\d+(?:\.\d)?) (kB|MB) \/ 1\.1 MB · [\d.]+ MB\/s$/;
  const outcome = loadUrl(`${server.origin}/slow/stories260K.bin`, `${server.origin}/slow/tok512.bin`);
  await page.waitForFunction(([h, re]) => document.getElementById('load-status').textContent === h &&
    new RegExp(re).test(document.getElementById('load-detail').textContent) &&
    document.getElementById('load-progress').value > 0.3 * document.getElementById('load-progress').max,
  [headline, numbers.source]);
  await screenshot(page, 'models-progress');
  const out = await outcome;
  assert.equal(out.state, 'ready', out.text);
  assert.equal(out.cache, 'stored');
  assert.match(out.text, /unverified \(no checksum\)/, 'a URL typed in has no checksum');
  assert.equal(await page.locator('#load-detail').textContent(), '', 'the numbers go when the load ends');

  const samples = await page.evaluate(() => { window.__sampling = false; return window.__progress; });
  const partial = samples.filter((s) => s.state === 'loading' && s.value > 0 && s.value < s.max &&
    s.status === headline && numbers.test(s.detail));
  assert.ok(new Set(partial.map((s) => s.value)).size >= 3,
    `the bar moved through several partial values: ${JSON.stringify(samples.slice(0, 12))}`);
  for (let i = 1; i < partial.length; i++) assert.ok(partial[i].value >= partial[i - 1].value, 'never goes back');
  const shown = partial.map((s) => Number(s.detail.match(numbers)[1]) * (s.detail.includes(' kB /') ? 1e3 : 1e6));
  for (let i = 1; i < shown.length; i++) assert.ok(shown[i] >= shown[i - 1], 'the byte count never goes back');
  const headlines = new Set(samples.filter((s) => s.state === 'loading').map((s) => s.status));
  assert.ok(headlines.size <= 4, `the live status line changes rarely: ${[...headlines].join(' | ')}`);
  assert.equal(server.count('/slow/stories260K.bin'), 1);
  browser.assertNoProblems();
});

test('the cache list shows sizes, removes one file, and clears all', { timeout: STEP_TIMEOUT }, async () => {
  await openCachePanel();
  const items = page.locator('#cache-list li');
  assert.equal(await items.count(), 4);
  const rows = await items.allTextContents();
  assert.ok(rows.some((r) => /stories260K\.bin\s*1\.1 MB\s*127\.0\.0\.1:\d+\/models\/files\/stories260K\.bin/.test(r)), rows.join(' | '));
  assert.ok(rows.some((r) => /tok512\.bin\s*6\.2 kB\s*127\.0\.0\.1:\d+\/slow\/tok512\.bin/.test(r)), rows.join(' | '));
  assert.match(await page.locator('#cache-summary').textContent(), /^\(4 · 2\.1 MB\)$/);

  await page.getByRole('button', { name: 'Remove tok512.bin from the cache' }).first().click();
  await page.waitForFunction(() => document.querySelectorAll('#cache-list li').length === 3);
  assert.equal((await cachedUrls()).length, 3);
  assert.equal(await page.evaluate(() => document.activeElement?.textContent), 'Remove', 'focus stays in the list');
  await screenshot(page, 'models-cache-list');

  await page.locator('#cache-clear').click();
  await page.waitForFunction(() => document.querySelectorAll('#cache-list li').length === 0);
  assert.deepEqual(await cachedUrls(), []);
  assert.match(await page.locator('#cache-summary').textContent(), /^\(0 · 0 B\)$/);
  assert.match(await page.locator('#cache-note').textContent(), /Nothing cached yet/);
  assert.ok(await page.locator('#cache-clear').isDisabled());

  // Cleared means downloaded again.
  const requests = server.count('/models/files/stories260K.bin');
  await page.goto(HOME());
  const out = await loadOutcome(page);
  assert.equal(out.cache, 'stored', out.text);
  assert.equal(server.count('/models/files/stories260K.bin'), requests + 1);
  browser.assertNoProblems();
});

test('a broken URL (HTTP 404) says so', { timeout: STEP_TIMEOUT }, async () => {
  const url = `${server.origin}/models/files/no-such-model.gguf`;
  const out = await loadUrl(url);
  assert.equal(out.state, 'error');
  assert.equal(out.error, 'http-404');
  const message = `Could not load no-such-model.gguf: not found (HTTP 404): ${url}. Check the address. ` +
    'stories260K is still loaded: Generate uses it.';
  assert.equal(out.text, message);
  // The same message under the output, in its live region; the model loaded before still works.
  assert.equal(await page.locator('#output-live #run-error').textContent(), message);
  assert.equal(await page.locator('#model').inputValue(), 'stories260K');
  assert.ok(await page.locator('#generate').isEnabled());
  await screenshot(page, 'models-error-404');
  await setValue(page, '#max-tokens', 5);
  await page.locator('#generate').click();
  assert.equal(await waitForState(page, 'ready', 'error'), 'ready');
  assert.equal(await page.locator('#output .tok').count(), 5);
  assert.equal(await page.locator('#run-error').textContent(), '', 'a successful run clears the error');
  assert.match(await page.locator('#load-status').textContent(), /^stories260K ready/);
  assert.equal(await page.locator('#load-status').getAttribute('data-error'), null);
  browser.assertNoProblems(HTTP_404);
});

test('a server that refuses cross-origin reads (no CORS header) gets a CORS message', { timeout: STEP_TIMEOUT }, async () => {
  const url = `${elsewhere.origin}/models/files/stories260K.gguf`;
  const out = await loadUrl(url);
  assert.equal(out.state, 'error');
  assert.equal(out.error, 'network');
  assert.match(out.text, /^Could not load stories260K\.gguf: cannot download http:\/\/127\.0\.0\.1:\d+\/models\/files\/stories260K\.gguf: the network failed, or the server does not let this page read it \(CORS/);
  assert.equal(elsewhere.count('/models/files/stories260K.gguf'), 1, 'the request was made; the browser withheld the answer');
  await screenshot(page, 'models-error-cors');
  browser.assertNoProblems(/CORS policy/, /net::ERR_FAILED/);
});

test('the note under the picker describes a model loaded from a URL, then the published one again', { timeout: STEP_TIMEOUT }, async () => {
  assert.match(await page.locator('#model-note').textContent(), /^stories260K \(/);
  const url = `${server.origin}/models/files/stories260K.gguf`;
  const out = await loadUrl(url);
  assert.equal(out.state, 'ready', out.text);
  assert.match(await page.locator('#model option:checked').textContent(), /^stories260K\.gguf · from a URL$/);
  assert.equal(await page.locator('#model-note').textContent(),
    `stories260K.gguf. Loaded from ${url} · GGUF · 1.2 MB · unverified: no sha256 to check it against, so it was loaded unchecked.`);
  assert.equal(await page.locator('#model-note').getAttribute('data-verified'), 'false');
  const back = await loadAfter(page, () => page.locator('#model').selectOption('stories260K'));
  assert.equal(back.state, 'ready', back.text);
  assert.match(await page.locator('#model-note').textContent(), /^stories260K \(.*sha256 checked/);
  browser.assertNoProblems();
});

test('an unverified published model says so; a network failure names network and CORS', { timeout: STEP_TIMEOUT }, async () => {
  const e = entry('gpt2-q8_0'); // the one entry without a published checksum
  await browser.context.route(e.url, (route) => route.abort('internetdisconnected'));
  try {
    assert.match(await page.locator('#model option[value="gpt2-q8_0"]').textContent(), / · unverified$/);
    const out = await loadAfter(page, () => page.locator('#model').selectOption('gpt2-q8_0'));
    assert.equal(out.state, 'error');
    assert.equal(out.error, 'network');
    assert.match(out.text, new RegExp(`cannot download ${e.url.replace(/[.?]/g, '\\$&')}: the network failed`));
    // The picker names the model actually loaded again, and says it is still loaded.
    assert.match(out.text, / stories260K is still loaded: Generate uses it\.$/);
    assert.equal(await page.locator('#model').inputValue(), 'stories260K');
    assert.match(await page.locator('#model-note').textContent(), /^stories260K \(/);
    assert.ok(new URL(page.url()).searchParams.get('model') === 'stories260K', page.url());
    assert.ok(await page.locator('#generate').isEnabled());
  } finally {
    await browser.context.unrouteAll();
  }
  browser.assertNoProblems(HTTP_404, /ERR_INTERNET_DISCONNECTED/);
});

test('a file that is not a model gets the engine\'s format error, and is not cached', { timeout: STEP_TIMEOUT }, async () => {
  const out = await loadUrl(`${server.origin}/README.md`);
  assert.equal(out.state, 'error');
  assert.equal(out.error, 'format');
  assert.match(out.text, /^Could not load README\.md: this is not a model file wasmlm reads \(a GGUF file, or a llama2\.c checkpoint with its tokenizer\.bin\): not a llama2\.c checkpoint: .* \(WLM_ERR_FORMAT\) stories260K is still loaded: Generate uses it\.$/);
  assert.ok(!(await cachedUrls()).some((u) => u.endsWith('/README.md')));
  await screenshot(page, 'models-error-format');
  browser.assertNoProblems();
});

test('a sha256 mismatch names the expected and the actual digest, and nothing is cached', { timeout: STEP_TIMEOUT }, async () => {
  const wrong = 'ab'.repeat(32);
  const manifest = structuredClone(MANIFEST);
  manifest.models.find((m) => m.id === 'stories260K-gguf').sha256 = wrong;
  await browser.context.route('**/models/manifest.json', (route) => route.fulfill({
    status: 200, contentType: 'application/json', body: JSON.stringify(manifest),
  }));
  try {
    await page.goto(HOME());
    assert.equal((await loadOutcome(page)).state, 'ready');
    const out = await loadAfter(page, () => page.locator('#model').selectOption('stories260K-gguf'));
    assert.equal(out.state, 'error');
    assert.equal(out.error, 'checksum');
    assert.equal(out.text, `Could not load stories260K-gguf: checksum mismatch: expected sha256 ${wrong}, ` +
      `got ${entry('stories260K-gguf').sha256}. The file at ${server.origin}/models/files/stories260K.gguf is not ` +
      'the published one (replaced at the source, or damaged on the way); it was neither loaded nor cached. ' +
      'stories260K is still loaded: Generate uses it.');
    assert.ok(!(await cachedUrls()).some((u) => u.endsWith('.gguf')));
    await screenshot(page, 'models-error-checksum');
  } finally {
    await browser.context.unrouteAll();
  }
  browser.assertNoProblems();
});

test('a file of another size than the manifest pins is refused before its body, and says so', { timeout: STEP_TIMEOUT }, async () => {
  const manifest = structuredClone(MANIFEST);
  const pinned = entry('stories260K-gguf').size + 1;
  manifest.models.find((m) => m.id === 'stories260K-gguf').size = pinned;
  await browser.context.route('**/models/manifest.json', (route) => route.fulfill({
    status: 200, contentType: 'application/json', body: JSON.stringify(manifest),
  }));
  try {
    await page.goto(HOME());
    assert.equal((await loadOutcome(page)).state, 'ready');
    const out = await loadAfter(page, () => page.locator('#model').selectOption('stories260K-gguf'));
    assert.equal(out.state, 'error');
    assert.equal(out.error, 'checksum');
    assert.equal(out.text, `Could not load stories260K-gguf: size mismatch: the file at ${server.origin}/models/files/` +
      `stories260K.gguf is ${pinned - 1} bytes, the published one ${pinned}: it changed at the source (or the address ` +
      'points elsewhere). It was neither loaded nor cached. stories260K is still loaded: Generate uses it.');
    assert.ok(!(await cachedUrls()).some((u) => u.endsWith('.gguf')));
  } finally {
    await browser.context.unrouteAll();
  }
  browser.assertNoProblems();
});

test('falls back to the published URL when the server lacks the file', { timeout: STEP_TIMEOUT }, async () => {
  // The same-origin copy answers 404; the published URL (intercepted here: no network in CI)
  // answers with the real bytes and the CORS header a CDN sends.
  const e = entry('stories260K');
  await page.evaluate((name) => caches.delete(name), CACHE); // else the cached copy is used
  const published = [];
  await browser.context.route('**/models/files/stories260K.bin', (route) => route.fulfill({ status: 404, body: 'missing' }));
  await browser.context.route(e.url, async (route) => {
    published.push(route.request().url());
    await route.fulfill({
      status: 200,
      headers: { 'Access-Control-Allow-Origin': '*', 'Content-Type': 'application/octet-stream' },
      body: await fs.readFile(path.join(MODELS, e.file)),
    });
  });
  try {
    await page.goto(HOME());
    const out = await loadOutcome(page);
    assert.equal(out.state, 'ready', out.text);
    assert.match(out.text, /from huggingface\.co and this server/);
    assert.ok(published.length >= 1, 'the published URL was requested');
  } finally {
    await browser.context.unrouteAll();
  }
  // Chromium logs the expected 404 of the same-origin probe; nothing else may appear.
  browser.assertNoProblems(HTTP_404);
});

test('a full storage quota still loads the model and says it was not cached', { timeout: STEP_TIMEOUT }, async () => {
  await page.evaluate((name) => caches.delete(name), CACHE);
  const cdp = await browser.context.newCDPSession(page);
  // Room for the 6 kB tokenizer, not for the 1 MB model: cache.put rejects with QuotaExceededError.
  await cdp.send('Storage.overrideQuotaForOrigin', { origin: server.origin, quotaSize: 200_000 });
  try {
    const out = await loadAfter(page, () => page.locator('#model').selectOption('stories260K'));
    assert.equal(out.state, 'ready', out.text);
    assert.equal(out.cache, 'quota');
    assert.match(out.text, /stories260K ready · .* · not cached: this site's storage quota is full/);
    assert.ok(!(await cachedUrls()).some((u) => u.endsWith('/stories260K.bin')));
    await screenshot(page, 'models-quota');
    // The model works.
    await setValue(page, '#max-tokens', 5);
    await page.locator('#generate').click();
    assert.equal(await waitForState(page, 'ready', 'error'), 'ready');
    assert.equal(await page.locator('#output .tok').count(), 5);
  } finally {
    await cdp.send('Storage.overrideQuotaForOrigin', { origin: server.origin });
    await cdp.detach();
  }
  browser.assertNoProblems();
});

test('local files: a GGUF alone, a llama2.c checkpoint then its tokenizer, both dropped at once', { timeout: STEP_TIMEOUT }, async () => {
  const before = server.requests.length;
  const input = page.locator('#model-files');
  let out = await loadAfter(page, () => input.setInputFiles(path.join(MODELS, 'stories260K.gguf')));
  assert.equal(out.state, 'ready', out.text);
  assert.equal(out.cache, 'local');
  assert.match(out.text, /^stories260K\.gguf ready · 1\.2 MB from a local file in [\d.]+ m?s$/);
  assert.match(await page.locator('#model-info').textContent(), /context 2048/);

  await input.setInputFiles(path.join(MODELS, 'stories260K.bin'));
  await page.waitForFunction(() => document.getElementById('local-pending').textContent !== '');
  assert.equal(await page.locator('#local-pending').textContent(),
    'stories260K.bin (1.1 MB) is a llama2.c checkpoint: now choose or drop its tokenizer.bin.');
  assert.equal(await page.evaluate(() => document.body.dataset.state), 'ready', 'nothing loads yet');
  await screenshot(page, 'models-local-pending');
  out = await loadAfter(page, () => input.setInputFiles(path.join(MODELS, 'tok512.bin')));
  assert.equal(out.state, 'ready', out.text);
  assert.match(out.text, /^stories260K\.bin ready · 1\.1 MB from a local file in /);
  assert.match(await page.locator('#model-info').textContent(), /vocab 512 · context 512/);
  assert.equal(await page.locator('#local-pending').textContent(), '');

  // Both at once, dropped on the zone.
  const files = await Promise.all(['tok512.bin', 'stories260K.bin'].map(async (name) =>
    ({ name, b64: (await fs.readFile(path.join(MODELS, name))).toString('base64') })));
  const dataTransfer = await page.evaluateHandle((list) => {
    const dt = new DataTransfer();
    for (const { name, b64 } of list) {
      dt.items.add(new File([Uint8Array.from(atob(b64), (c) => c.charCodeAt(0))], name));
    }
    return dt;
  }, files);
  out = await loadAfter(page, () => page.dispatchEvent('#drop-zone', 'drop', { dataTransfer }));
  assert.equal(out.state, 'ready', out.text);
  assert.match(out.text, /^stories260K\.bin ready · 1\.1 MB from a local file/);
  assert.ok(server.requests.slice(before).every((r) => !/\.(bin|gguf)$/.test(r.path)), 'no model request to the server');
  await screenshot(page, 'models-local');
  browser.assertNoProblems();
});

test('a split GGUF: its parts dropped at once, or its first part\'s URL, load as one model', { timeout: STEP_TIMEOUT }, async () => {
  const { splitGguf } = await import('../../tools/gguf_split.mjs');
  const dir = path.join(REPO, 'tests/artifacts/split');
  await fs.mkdir(dir, { recursive: true });
  const parts = splitGguf(path.join(MODELS, 'stories260K.gguf'), { maxBytes: 400 << 10, prefix: path.join(dir, 'stories260K') });
  try {
    assert.equal(parts.length, 3);
    const files = await Promise.all([...parts].reverse().map(async (p) => // any order
      ({ name: path.basename(p), b64: (await fs.readFile(p)).toString('base64') })));
    const dataTransfer = await page.evaluateHandle((list) => {
      const dt = new DataTransfer();
      for (const { name, b64 } of list) dt.items.add(new File([Uint8Array.from(atob(b64), (c) => c.charCodeAt(0))], name));
      return dt;
    }, files);
    let out = await loadAfter(page, () => page.dispatchEvent('#drop-zone', 'drop', { dataTransfer }));
    assert.equal(out.state, 'ready', out.text);
    assert.match(out.text, /^stories260K-0000\d-of-00003\.gguf \(\+2 parts\) ready · 1\.2 MB from a local file/);
    assert.match(await page.locator('#model-info').textContent(), /context 2048/);
    await setValue(page, '#max-tokens', 5);
    await page.locator('#generate').click();
    assert.equal(await waitForState(page, 'ready', 'error'), 'ready');
    assert.equal(await page.locator('#output .tok').count(), 5);

    // the first part's URL: the page fetches all three
    const before = server.requests.length;
    out = await loadUrl(`${server.origin}/tests/artifacts/split/${path.basename(parts[0])}`);
    assert.equal(out.state, 'ready', out.text);
    const got = server.requests.slice(before).map((r) => r.path).filter((p) => p.endsWith('.gguf'));
    assert.deepEqual(got.sort(), parts.map((p) => `/tests/artifacts/split/${path.basename(p)}`).sort());
    await screenshot(page, 'models-split');
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
  browser.assertNoProblems();
});

test('a local file that is not a model: format error, and its name is shown as text', { timeout: STEP_TIMEOUT }, async () => {
  const name = '<img src=x onerror="window.__pwned=1">.bin';
  const out = await loadAfter(page, () => page.locator('#model-files').setInputFiles({
    name, mimeType: 'application/octet-stream', buffer: Buffer.from('hello, this is not a model at all\n'.repeat(4)),
  }));
  assert.equal(out.state, 'error');
  assert.equal(out.error, 'format');
  assert.ok(out.text.startsWith(`Could not load ${name}: this is not a model file`), out.text);
  assert.equal(await page.locator('#load-status img').count(), 0);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  browser.assertNoProblems();
});
