// memory64_picker.test.mjs — the demo page's picker and the models past wasm32's 4 GB, in
// headless Chromium: it marks them "needs 64-bit memory" (the manifest's size or listedSize
// against the engine's own threshold, js/runtime/memory64.js), and in a browser without WebAssembly
// memory64 (Safari; here Chromium whose WebAssembly.validate() refuses the page's memory64
// probe, the one js/runtime/memory64.js memory64Support() makes) marks them as not loadable and refuses
// them with the reason before any download, whether picked or opened with ?model=. The model
// loaded before stays loaded. And an entry's nCtx (gpt-oss-20b's: its full context's KV cache
// would not fit beside its file) is the context the page loads it with.
//
//   node --test tests/browser/

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { REPO, MODELS, STEP_TIMEOUT, startTestServer, launch, loadOutcome, loadAfter, waitForState } from './_helpers.mjs';

const MANIFEST = JSON.parse(fs.readFileSync(path.join(REPO, 'models', 'manifest.json'), 'utf8'));
const entry = (id) => MANIFEST.models.find((m) => m.id === id);
/** Past wasm32's 4 GB by their manifest sizes (tests/js/manifest.test.mjs checks the sizes). */
const BIG = ['gemma-4-e2b-it-q8_0', 'lfm2-8b-a1b-q4_k_m', 'gpt-oss-20b-mxfp4', 'qwen3-30b-a3b-q2_k'];
/** Under it: not marked. */
const SMALL = ['stories260K', 'gemma-4-e2b-it-q4_k_m', 'smollm3-3b-q8_0', 'qwen3.5-2b-q8_0'];

/** Makes the page's WebAssembly.validate() refuse a module declaring a 64-bit memory (a memory
 *  section, id 5, whose limits flags have 0x04), as a browser without memory64 does. Workers
 *  keep the real one: only the page's own feature probe is under test. */
function withoutMemory64() {
  const validate = WebAssembly.validate;
  WebAssembly.validate = function (bytes, ...rest) {
    const b = bytes instanceof Uint8Array ? bytes : new Uint8Array(ArrayBuffer.isView(bytes) ? bytes.buffer : bytes);
    if (b.length >= 12 && b[8] === 5 && (b[11] & 0x04)) return false;
    return validate.call(this, bytes, ...rest);
  };
}

let server = null;
let plain = null;    // Chromium as it is: memory64
let noM64 = null;    // the same, without memory64

before(async () => {
  for (const id of [...BIG, ...SMALL]) assert.ok(entry(id), `${id} in the manifest`);
  server = await startTestServer({ isolate: false });
  plain = await launch();
  noM64 = await launch();
  await noM64.context.addInitScript(withoutMemory64);
});

after(async () => {
  await plain?.close();
  await noM64?.close();
  await server?.close();
});

/** The picker's option label of each id. */
async function labels(page) {
  const options = await page.locator('#model option').evaluateAll((els) => els.map((o) => [o.value, o.textContent]));
  return Object.fromEntries(options);
}

test('Chromium with memory64: the models past 4 GB are marked "needs 64-bit memory", the others not',
  { timeout: STEP_TIMEOUT }, async () => {
    const { page } = plain;
    await page.goto(`${server.url}?model=stories260K`);
    assert.equal((await loadOutcome(page)).state, 'ready');
    assert.equal(await page.evaluate(() => WebAssembly.validate(new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 5, 3, 1, 4, 1]))),
      true, 'this Chromium has memory64');
    const l = await labels(page);
    for (const id of BIG) assert.match(l[id], /· needs 64-bit memory$/, id);
    for (const id of SMALL) assert.doesNotMatch(l[id], /64-bit/, id);
    // an unverified entry is shown with its listed size
    assert.match(l['gpt-oss-20b-mxfp4'], /^gpt-oss-20b-mxfp4 · about 12\.10? GB · unverified · needs 64-bit memory$/);
    assert.equal(await page.locator('#model option[value="gpt-oss-20b-mxfp4"]').getAttribute('data-memory64'), 'yes');
    plain.assertNoProblems();
  });

test('an entry\'s nCtx is the context the page loads it with (the model\'s own without one)',
  { timeout: STEP_TIMEOUT }, async () => {
    // gpt-oss-20b's entry is unverified (no size or sha256 to check): its file is served here as
    // stories260K.gguf (2048 positions), and the manifest's nCtx for it (32768 for the real one:
    // tests/js/manifest.test.mjs) as 1024
    const { page } = plain;
    const file = entry('gpt-oss-20b-mxfp4').file;
    const models = MANIFEST.models.map((m) => (m.id === 'gpt-oss-20b-mxfp4' ? { ...m, nCtx: 1024 } : m));
    await page.route('**/models/manifest.json', (route) => route.fulfill({
      status: 200, contentType: 'application/json', body: JSON.stringify({ ...MANIFEST, models }),
    }));
    await page.route(`**/models/files/${file}`, (route) => route.fulfill({
      status: 200, contentType: 'application/octet-stream', body: fs.readFileSync(path.join(MODELS, 'stories260K.gguf')),
    }));
    try {
      await page.goto(`${server.url}?model=stories260K-gguf`);
      assert.equal((await loadOutcome(page)).state, 'ready');
      assert.match(await page.locator('#model-info').textContent(), /context 2048/, 'no nCtx: the model\'s own');
      const out = await loadAfter(page, () => page.locator('#model').selectOption('gpt-oss-20b-mxfp4'));
      assert.equal(out.state, 'ready', out.text);
      assert.match(await page.locator('#model-info').textContent(), /context 1024/);
    } finally {
      await page.unrouteAll();
    }
    plain.assertNoProblems();
  });

test('without memory64 (Safari): the models past 4 GB are refused with the reason, and nothing is downloaded',
  { timeout: STEP_TIMEOUT }, async () => {
    const { page } = noM64;
    await page.goto(`${server.url}?model=stories260K`);
    assert.equal((await loadOutcome(page)).state, 'ready');
    assert.equal(await page.evaluate(() => WebAssembly.validate(new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 5, 3, 1, 4, 1]))),
      false, 'the page\'s memory64 probe fails');
    const l = await labels(page);
    for (const id of BIG) assert.match(l[id], /· needs 64-bit memory \(not in this browser\)$/, id);
    for (const id of SMALL) assert.doesNotMatch(l[id], /64-bit/, id);
    assert.equal(await page.locator('#model option[value="qwen3-30b-a3b-q2_k"]').getAttribute('data-memory64'), 'refused');

    for (const id of ['gpt-oss-20b-mxfp4', 'qwen3-30b-a3b-q2_k']) {
      await page.locator('#model').selectOption(id);
      assert.equal(await waitForState(page, 'error'), 'error');
      const error = await page.locator('#run-error').textContent();
      assert.match(error, new RegExp(`^Could not load ${id.replace(/\./g, '\\.')}: ${id.replace(/\./g, '\\.')} needs 64-bit memory`), error);
      assert.match(error, /this browser has no WebAssembly memory64 \(.*Safari.* do not\)/, error);
      assert.match(error, /Nothing was downloaded/, error);
      assert.match(error, /stories260K is still loaded: Generate uses it\.$/, error);
      assert.equal(await page.locator('#run-error').getAttribute('data-kind'), 'memory64');
      assert.equal(server.count(`/models/files/${entry(id).file}`), 0, `${id}: no request for its file`);
      // the picker names the model still loaded
      assert.equal(await page.locator('#model').inputValue(), 'stories260K');
    }
    // a model under 4 GB still loads
    await page.locator('#model').selectOption('stories260K-gguf');
    assert.equal((await loadOutcome(page)).state, 'ready');
    noM64.assertNoProblems();
  });

test('without memory64: ?model= naming one of them refuses it at once (no prefetch, no download)',
  { timeout: STEP_TIMEOUT }, async () => {
    const { page } = noM64;
    await page.goto(`${server.url}?model=lfm2-8b-a1b-q4_k_m`);
    assert.equal(await waitForState(page, 'error'), 'error');
    const error = await page.locator('#run-error').textContent();
    assert.match(error, /^Could not load lfm2-8b-a1b-q4_k_m: lfm2-8b-a1b-q4_k_m needs 64-bit memory .*5\.0 GB file/, error);
    assert.match(await page.locator('#model-note').textContent(), /this browser does not have: it cannot be loaded here/);
    assert.equal(await page.locator('#model-note').getAttribute('data-memory64'), 'refused');
    assert.equal(server.count('/models/files/LFM2-8B-A1B-Q4_K_M.gguf'), 0, 'no request for the file, not even the page\'s prefetch');
    noM64.assertNoProblems();
  });
