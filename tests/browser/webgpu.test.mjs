// webgpu.test.mjs — the demo page's WebGPU mode in headless Chromium, whose WebGPU runs on
// SwiftShader (--enable-unsafe-webgpu; the page is on http://127.0.0.1, a secure context): with
// ?backend=webgpu the default model loads on the GPU in the page's worker, the statistics name
// the backend, the adapter and the GPU memory, and greedy output is run.c's story (and after a
// prompt long enough for the tiled prefill kernel, the CPU's greedy output); the backend
// picker loads the model again on the CPU ('auto' keeps a software adapter on the CPU and says
// why); and in a Chromium without a WebGPU adapter, choosing the GPU is an error that says what is missing
// while the page keeps working.
//
//   node --test tests/browser/webgpu.test.mjs

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import { REFERENCE, STEP_TIMEOUT, launch, loadAfter, loadOutcome, screenshot, startTestServer } from './_helpers.mjs';

const servers = [];
const browsers = [];
after(async () => {
  for (const b of browsers) await b.close();
  for (const s of servers) await s.close();
});

async function open(args, query) {
  const server = await startTestServer();
  servers.push(server);
  const browser = await launch({ args });
  browsers.push(browser);
  await browser.page.goto(`${server.url}${query}`);
  return browser;
}

/** Greedy, 10 tokens: the page's output text. */
async function generate10(page) {
  const temperature = page.locator('#temperature');
  await temperature.focus();
  await temperature.press('Home'); // 0: greedy
  const slider = page.locator('#max-tokens');
  await slider.focus();
  await slider.press('Home');
  for (let i = 0; i < 9; i++) await slider.press('ArrowRight');
  await page.locator('#generate').click();
  await page.waitForFunction(() => document.body.dataset.state === 'ready' && document.getElementById('stat-stop').textContent !== '—',
    null, { polling: 'raf' });
  return page.locator('#output').textContent();
}

test('?backend=webgpu: the model runs on the GPU in the worker; the picker moves it to the CPU', { timeout: 3 * STEP_TIMEOUT }, async () => {
  const { page, assertNoProblems } = await open(['--enable-unsafe-webgpu'], '?backend=webgpu');
  const out = await loadOutcome(page);
  assert.equal(out.state, 'ready', out.text);
  assert.equal(await page.locator('#backend').inputValue(), 'webgpu');
  assert.match(await page.locator('#stat-backend').textContent(), /^GPU · .*swiftshader/i);
  assert.match(await page.locator('#stat-gpu').textContent(), /\d.*B$/);
  assert.match(await page.locator('#backend-note').textContent(), /backend 'webgpu' was asked for/);
  const reference = await fs.readFile(REFERENCE, 'utf8');
  const text = await generate10(page);
  assert.ok(text.length > 16 && reference.startsWith(text), `GPU greedy output is not a prefix of run.c's: ${JSON.stringify(text)}`);
  await screenshot(page, 'webgpu-page');
  // a prompt of more than MATMAT_MIN_ENT tokens: its prefill runs through the tiled matrix-matrix
  // kernel (wgsl_matmat.js); the CPU below continues it the same way
  const prompt = reference.slice(0, reference.indexOf(' ', 100));
  await page.locator('#prompt').fill(prompt);
  const longer = await generate10(page);
  assert.ok(longer.length > prompt.length + 8 && longer.startsWith(prompt), `GPU output after a long prompt: ${JSON.stringify(longer)}`);
  await page.locator('#prompt').fill('Once upon a time');
  // Auto on a software adapter: the CPU, with the reason
  const auto = await loadAfter(page, () => page.locator('#backend').selectOption('auto'));
  assert.equal(auto.state, 'ready', auto.text);
  assert.equal(await page.locator('#stat-backend').textContent(), 'CPU');
  assert.equal(await page.locator('#stat-gpu').textContent(), '—');
  assert.match(await page.locator('#backend-note').textContent(), /auto: the WebGPU adapter is a fallback one/);
  assert.equal(await generate10(page), text);
  await page.locator('#prompt').fill(prompt);
  assert.equal(await generate10(page), longer);
  assertNoProblems(/favicon\.ico/);
});

test('a Chromium without a WebGPU adapter: choosing the GPU says why it cannot, the CPU model stays', { timeout: 2 * STEP_TIMEOUT }, async () => {
  const { page, assertNoProblems } = await open([], '');
  assert.equal((await loadOutcome(page)).state, 'ready');
  assert.equal(await page.locator('#stat-backend').textContent(), 'CPU');
  // headless Chromium without --enable-unsafe-webgpu has navigator.gpu but no adapter
  const why = /(this runtime has no WebGPU|the runtime has WebGPU but offers no adapter)/;
  assert.match(await page.locator('#backend-note').textContent(), new RegExp(`^auto: ${why.source}`));
  const failed = await loadAfter(page, () => page.locator('#backend').selectOption('webgpu'));
  assert.equal(failed.state, 'error');
  assert.match(failed.text, new RegExp(`backend 'webgpu': ${why.source}`));
  assert.match(failed.text, /still loaded/);
  assertNoProblems(/favicon\.ico/);
});
