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
  REFERENCE, STEP_TIMEOUT, startTestServer, launch, waitForState as waitFor, screenshot, recordTokenMessages,
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
  await recordTokenMessages(page, '#output');
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

  // "Token by token", proven by event order rather than by timing (a fast engine writes the
  // whole story in a fraction of a second, so sampling the page on a timer proves nothing):
  // - the worker's replies are recorded at the protocol level (recordTokenMessages: a
  //   'message' listener that runs before the engine's) with the number of nodes #output held
  //   when each token message arrived: a page that streams shows the prompt and tokens
  //   1..k-1 when token k's message is handled (one message is one task); one that buffered
  //   would show fewer;
  // - a MutationObserver records each node appended to #output: one span per token, in the
  //   order (and with the ids) of the worker's messages.
  await page.evaluate(() => {
    const out = document.getElementById('output');
    window.__tokenMessages.length = 0;
    window.__appended = [];
    window.__observer?.disconnect();
    window.__observer = new MutationObserver((records) => {
      for (const r of records) {
        for (const node of r.addedNodes) {
          window.__appended.push(node.classList?.contains('tok') ? Number(node.dataset.id) : node.className || '#text');
        }
      }
    });
    window.__observer.observe(out, { childList: true });
  });
  await page.locator('#prompt').press('Control+Enter');
  assert.equal(await waitForState('ready', 'error'), 'ready', await page.locator('#load-status').textContent());

  const { messages, appended } = await page.evaluate(() => {
    window.__observer.takeRecords();
    window.__observer.disconnect();
    return { messages: window.__tokenMessages.slice(), appended: window.__appended };
  });
  const tokens = messages.filter((m) => m.id >= 0);
  assert.ok(tokens.length > 300, `${tokens.length} token messages`);
  tokens.forEach((m, k) => assert.equal(m.shown, k + 1,
    `when token ${k + 1}'s message arrived, #output held ${m.shown} nodes (expected the prompt and ${k} tokens)`));
  assert.deepEqual(appended, ['prompt', ...tokens.map((m) => m.id)],
    'the prompt, then one <span class="tok"> per token message, in order, with its id');

  const text = await page.locator('#output').textContent();
  assert.ok(text.startsWith(reference) || reference.startsWith(text),
    `output differs from run.c at char ${firstDifference(text, reference)}:\n` +
    `  page: ${JSON.stringify(text.slice(0, 200))}\n  run.c: ${JSON.stringify(reference.slice(0, 200))}`);
  assert.equal(text, reference, 'the story ends where run.c stops (BOS)');
  assert.equal(await statText('stop'), 'eos');
  const n = await tokenCount();
  assert.equal(n, tokens.length);
  assert.deepEqual(await page.locator('#output .tok').evaluateAll((spans) => spans.map((s) => Number(s.dataset.id))),
    tokens.map((m) => m.id));
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
