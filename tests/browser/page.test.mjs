// tests/browser/page.test.mjs — the demo page, served by tools/serve.mjs's handler on 127.0.0.1 and
// driven in headless Debian Chromium through playwright-core: load, greedy streaming checked against
// llama2.c's run.c, Stop, the max-tokens slider, phone width, GGUF.
// Any page error or console error fails the run. Screenshots go to tests/artifacts/ (gitignored).
// Model sources and the cache: models.test.mjs; presets, colours, keyboard: controls.test.mjs.
//
//   node --test tests/browser/

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import path from 'node:path';
import {
  REFERENCE, STEP_TIMEOUT, startTestServer, launch, waitForState as waitFor, screenshot,
} from './_helpers.mjs';

let server = null;
let browser = null;
let page = null;
let context = null;
let problems = null;

before(async () => {
  server = await startTestServer();
  browser = await launch();
  ({ page, context, problems } = browser);
  await page.goto(server.url);
});

after(async () => {
  await browser?.close();
  await server?.close();
});

/** Fails the current test if the page reported an error or a console error so far. */
function assertNoProblems() {
  assert.deepEqual(problems.splice(0), [], 'the page reported errors');
}

const waitForState = (...states) => waitFor(page, ...states);

/** Sets a range input from the keyboard: Home/End, then `steps` ArrowRight presses. */
async function setSlider(id, key, steps = 0) {
  const slider = page.locator(`#${id}`);
  await slider.focus();
  await slider.press(key);
  for (let i = 0; i < steps; i++) await slider.press('ArrowRight');
}

const tokenCount = () => page.locator('#output .tok').count();
const statText = (id) => page.locator(`#stat-${id}`).textContent();

test('loads stories260K on open', { timeout: STEP_TIMEOUT }, async () => {
  const state = await waitForState('ready', 'error');
  assert.equal(state, 'ready', `load status: ${await page.locator('#load-status').textContent()}`);
  assert.equal(await page.locator('#model').inputValue(), 'stories260K');
  assert.ok((await page.locator('#model option').count()) >= 1);
  assert.match(await page.locator('#load-status').textContent(), /stories260K ready/);
  const bar = await page.locator('#load-progress').evaluate((p) => ({ value: p.value, max: p.max }));
  assert.equal(bar.value, bar.max, 'progress bar full');
  assert.match(await statText('load'), /\d/);
  assert.equal(await page.locator('#prompt').inputValue(), 'Once upon a time');

  // Every form control has a label (buttons label themselves).
  const unlabelled = await page.evaluate(() => [...document.querySelectorAll('input, select, textarea')]
    .filter((el) => el.labels.length === 0).map((el) => el.id));
  assert.deepEqual(unlabelled, []);

  await screenshot(page, 'page-ready');
  assertNoProblems();
});

test('greedy generation streams token by token and matches run.c', { timeout: STEP_TIMEOUT }, async () => {
  const reference = (await fs.readFile(REFERENCE, 'utf8')).replace(/\n$/, ''); // run.c's final newline
  await setSlider('temperature', 'Home');
  assert.equal(await page.locator('#temperature-value').textContent(), 'greedy');
  await setSlider('repeat-penalty', 'Home'); // run.c has no repetition penalty
  assert.equal(await page.locator('#repeat-penalty-value').textContent(), 'off');
  await setSlider('max-tokens', 'End');
  assert.equal(await page.locator('#max-tokens-value').textContent(), '512');

  // Sample the token count from separate tasks (a zero-delay timer loop) while the story is
  // written: a page that showed the answer at once would be seen at 0 and at the end only.
  // A MutationObserver also records the count at each DOM change, to check it only grows.
  await page.evaluate(() => {
    const out = document.getElementById('output');
    const toks = out.getElementsByClassName('tok');
    window.__samples = [];
    window.__mutations = [];
    window.__sampling = true;
    const tick = () => {
      window.__samples.push(toks.length);
      if (window.__sampling) setTimeout(tick, 0);
    };
    tick();
    window.__observer?.disconnect();
    window.__observer = new MutationObserver(() => window.__mutations.push(toks.length));
    window.__observer.observe(out, { childList: true });
  });
  await page.locator('#prompt').press('Control+Enter');
  assert.equal(await waitForState('ready', 'error'), 'ready', await page.locator('#load-status').textContent());

  const { samples, mutations } = await page.evaluate(() => {
    window.__sampling = false;
    window.__observer.disconnect();
    return { samples: window.__samples, mutations: window.__mutations };
  });
  const distinct = [...new Set(samples)].filter((c) => c > 0);
  assert.ok(distinct.length >= 3,
    `the token count was seen at ${distinct.length} distinct values over ${samples.length} samples: ${distinct.slice(0, 10)}`);
  for (let i = 1; i < mutations.length; i++) assert.ok(mutations[i] >= mutations[i - 1], 'token count never decreases');

  const text = await page.locator('#output').textContent();
  assert.ok(text.startsWith(reference) || reference.startsWith(text),
    `output differs from run.c at char ${firstDifference(text, reference)}:\n` +
    `  page: ${JSON.stringify(text.slice(0, 200))}\n  run.c: ${JSON.stringify(reference.slice(0, 200))}`);
  assert.equal(text, reference, 'the story ends where run.c stops (BOS)');
  assert.equal(await statText('stop'), 'eos');
  const n = await tokenCount();
  assert.equal(mutations.at(-1), n);
  assert.equal(await statText('tokens'), String(n));
  assert.match(await statText('context'), /^\d+ \/ 512$/);
  assert.match(await statText('decode'), /tok\/s/);
  assert.match(await statText('ttft'), /\d/);
  const probs = await page.locator('#output .tok').evaluateAll((spans) => spans.map((s) => Number(s.dataset.prob)));
  assert.ok(probs.every((p) => p > 0 && p <= 1), 'every token has data-prob in (0, 1]');
  assert.match(await page.locator('#applied').textContent(), /temperature 0\.00 .*max tokens 512/);

  await screenshot(page, 'page-story');
  assertNoProblems();
});

test('Stop ends a generation mid-way and the engine stays usable', { timeout: STEP_TIMEOUT }, async () => {
  // stories260K decodes hundreds of tokens per second, faster than a click from the test
  // process can reliably land mid-way; so the Stop button is clicked from inside the page when
  // the 5th token arrives. Same button, same handler.
  await page.evaluate(() => {
    const out = document.getElementById('output');
    const toks = out.getElementsByClassName('tok');
    const observer = new MutationObserver(() => {
      if (toks.length >= 5) {
        observer.disconnect();
        document.getElementById('stop').click();
      }
    });
    observer.observe(out, { childList: true });
  });
  await page.locator('#generate').click();
  assert.equal(await waitForState('ready', 'error'), 'ready', await page.locator('#load-status').textContent());
  assert.equal(await statText('stop'), 'aborted');
  assert.equal(await tokenCount(), 5, 'no token is appended after Stop');
  assert.equal(await statText('tokens'), '5');
  assert.ok(await page.locator('#stop').isDisabled());
  assert.ok(await page.locator('#generate').isEnabled());
  await screenshot(page, 'page-stopped');
  assertNoProblems();
});

test('max tokens 10 produces exactly 10 tokens and shows in the applied line', { timeout: STEP_TIMEOUT }, async () => {
  await setSlider('max-tokens', 'Home', 9);
  assert.equal(await page.locator('#max-tokens-value').textContent(), '10');
  await page.locator('#generate').click();
  assert.equal(await waitForState('ready', 'error'), 'ready', await page.locator('#load-status').textContent());
  assert.equal(await tokenCount(), 10);
  assert.equal(await statText('stop'), 'max tokens');
  const applied = await page.locator('#applied').textContent();
  assert.match(applied, /max tokens 10\b/);
  assert.match(applied, /temperature 0\.00/);
  const text = await page.locator('#output').textContent();
  const reference = await fs.readFile(REFERENCE, 'utf8');
  assert.ok(reference.startsWith(text), `greedy 10 tokens are a prefix of run.c's story: ${JSON.stringify(text)}`);
  assertNoProblems();
});

test('sampled generation with a seed is reproducible', { timeout: STEP_TIMEOUT }, async () => {
  await setSlider('temperature', 'End');
  for (let i = 0; i < 20; i++) await page.locator('#temperature').press('ArrowLeft'); // 2.00 - 20 × 0.05 = 1.00
  assert.equal(await page.locator('#temperature-value').textContent(), '1.00');
  await setSlider('max-tokens', 'Home', 39);
  await page.locator('#seed').fill('42');
  const runs = [];
  for (let i = 0; i < 2; i++) {
    await page.locator('#generate').click();
    assert.equal(await waitForState('ready', 'error'), 'ready');
    runs.push(await page.locator('#output').textContent());
  }
  assert.equal(runs[0], runs[1]);
  assert.match(await page.locator('#applied').textContent(), /temperature 1\.00 .*max tokens 40 · seed 42$/);
  assertNoProblems();
});

test('fits a phone-width screen', { timeout: STEP_TIMEOUT }, async () => {
  await page.setViewportSize({ width: 390, height: 844 });
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 0, `page is ${overflow}px wider than the screen`);
  await screenshot(page, 'page-phone');
  await page.setViewportSize({ width: 1280, height: 900 });
  assertNoProblems();
});

test('a GGUF model (vocabulary inside, no tokenizer file) writes the same greedy story', { timeout: STEP_TIMEOUT }, async () => {
  const reference = (await fs.readFile(REFERENCE, 'utf8')).replace(/\n$/, '');
  await page.locator('#model').selectOption('stories260K-gguf');
  assert.equal(await waitForState('ready', 'error'), 'ready', await page.locator('#load-status').textContent());
  assert.match(await page.locator('#load-status').textContent(), /stories260K-gguf ready/);
  await setSlider('temperature', 'Home');
  await setSlider('repeat-penalty', 'Home');
  await setSlider('max-tokens', 'End');
  await page.locator('#prompt').fill('Once upon a time');
  await page.locator('#prompt').press('Control+Enter');
  assert.equal(await waitForState('ready', 'error'), 'ready', await page.locator('#load-status').textContent());
  assert.equal(await page.locator('#output').textContent(), reference);
  assert.equal(await statText('stop'), 'eos');
  assert.match(await statText('context'), /^\d+ \/ 2048$/); // the GGUF's context_length
  await screenshot(page, 'page-gguf');
  assertNoProblems();
});

function firstDifference(a, b) {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}
