// controls.test.mjs — the demo page's generation controls in headless Chromium: presets moving
// the sliders, stop strings (parsing, escapes, the limit), tokens coloured by probability with a
// legend and an inspector on hover and focus, the live statistics, keyboard-only use of the main
// flow (tab order, visible focus, a model chosen with the arrow keys, Ctrl+Enter, tokens browsed
// with the arrow keys, Esc), and that markup typed into the page stays text.
// Screenshots go to tests/artifacts/controls-*.png.
//
//   node --test tests/browser/

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import {
  REFERENCE, STEP_TIMEOUT, loadOutcome, loadAfter, waitForState, setValue, screenshot,
  openReadyPage,
} from './_helpers.mjs';

let session = null;
let server = null;
let browser = null;
let page = null;
let reference = '';

before(async () => {
  reference = (await fs.readFile(REFERENCE, 'utf8')).replace(/\n$/, '');
  session = await openReadyPage();
  ({ server, browser, page } = session);
});

after(() => session?.close());

const text = (selector) => page.locator(selector).textContent();
const pressed = () => page.locator('button.preset[aria-pressed="true"]').allTextContents();
const sliderShown = async () => Object.fromEntries(await Promise.all(
  ['temperature', 'top-k', 'top-p', 'repeat-penalty', 'max-tokens'].map(async (id) => [id, await text(`#${id}-value`)])));

/** Clicks Generate and waits for the generation to end. */
async function generate() {
  await page.locator('#generate').click();
  assert.equal(await waitForState(page, 'ready', 'error'), 'ready', await text('#load-status'));
}

/** Greedy, no penalty: the page then writes run.c's story. */
async function greedy(maxTokens) {
  await setValue(page, '#temperature', 0);
  await setValue(page, '#repeat-penalty', 1);
  await setValue(page, '#max-tokens', maxTokens);
}

test('presets set the sliders, keep the seed, and a moved slider makes the settings custom', { timeout: STEP_TIMEOUT }, async () => {
  assert.deepEqual(await pressed(), ['Balanced'], 'the page opens on Balanced');
  await page.locator('#seed').fill('7');

  await page.getByRole('button', { name: 'Precise' }).click();
  assert.deepEqual(await sliderShown(), {
    temperature: '0.30', 'top-k': '20', 'top-p': '0.75', 'repeat-penalty': '1.15', 'max-tokens': '128',
  });
  assert.deepEqual(await pressed(), ['Precise']);
  assert.match(await text('#preset-hint'), /^Precise: temperature 0\.30 · top-k 20 · top-p 0\.75 · min-p 0\.10 · typical-p off · repetition penalty 1\.15 · presence penalty off · frequency penalty off · max tokens 128\./);
  assert.equal(await page.locator('#seed').inputValue(), '7');

  await page.getByRole('button', { name: 'Creative' }).click();
  assert.deepEqual(await sliderShown(), {
    temperature: '1.20', 'top-k': 'off', 'top-p': '0.95', 'repeat-penalty': 'off', 'max-tokens': '384',
  });
  assert.deepEqual(await pressed(), ['Creative']);
  await screenshot(page, 'controls-presets');

  await page.locator('#temperature').focus();
  await page.keyboard.press('ArrowRight');
  assert.equal(await text('#temperature-value'), '1.25');
  assert.deepEqual(await pressed(), []);
  assert.match(await text('#preset-hint'), /^Custom settings/);

  await page.getByRole('button', { name: 'Balanced' }).click();
  assert.deepEqual(await pressed(), ['Balanced']);
  await generate();
  assert.match(await text('#applied'), /^applied: temperature 0\.80 · top-k 40 · top-p 0\.90 · min-p 0\.05 · typical-p 1\.00 · repetition penalty 1\.10 · presence penalty 0\.00 · frequency penalty 0\.00 · max tokens 256 · seed 7$/);
  await page.locator('#seed').fill('');
  browser.assertNoProblems();
});

test('stop strings: the text ends before the first one, escapes work, more than 8 are refused', { timeout: STEP_TIMEOUT }, async () => {
  await greedy(512);
  await page.locator('#stop-strings').fill("Lily's mom, \\n");
  await generate();
  assert.equal(await text('#output'), reference.slice(0, reference.indexOf('\n')), 'ends before the first new line');
  assert.equal(await text('#stat-stop'), 'stop string');
  assert.match(await text('#applied'), / · stop "Lily's mom" "\\n" · seed /);

  await page.locator('#stop-strings').fill('Lily');
  await generate();
  assert.equal(await text('#output'), reference.slice(0, reference.indexOf('Lily')));
  assert.equal(await text('#stat-stop'), 'stop string');

  await page.locator('#stop-strings').fill('a\\, b, c');
  await setValue(page, '#max-tokens', 3);
  await generate();
  assert.match(await text('#applied'), / · stop "a, b" "c" · seed /);

  const before = await text('#output');
  await page.locator('#stop-strings').fill('a, b, c, d, e, f, g, h, i');
  assert.equal(await text('#stop-error'), 'At most 8 stop strings (there are 9).');
  assert.equal(await page.locator('#stop-strings').getAttribute('aria-invalid'), 'true');
  await page.locator('#generate').click();
  assert.equal(await page.evaluate(() => document.body.dataset.state), 'ready', 'nothing generated');
  assert.equal(await text('#output'), before);
  assert.equal(await page.evaluate(() => document.activeElement.id), 'stop-strings');
  await screenshot(page, 'controls-stop-error');
  await page.locator('#stop-strings').fill('');
  assert.equal(await text('#stop-error'), '');
  browser.assertNoProblems();
});

test('tokens are coloured by probability, with a legend; hover shows a token\'s probability; statistics fill in', { timeout: STEP_TIMEOUT }, async () => {
  await page.getByRole('button', { name: 'Creative' }).click();
  await page.locator('#seed').fill('3');
  await setValue(page, '#max-tokens', 60);
  await generate();

  const tokens = await page.locator('#output .tok').evaluateAll((spans) => spans.map((s) => ({
    cls: s.className, prob: Number(s.dataset.prob), bg: getComputedStyle(s).backgroundColor, title: s.title,
  })));
  assert.equal(tokens.length, 60);
  const bin = (p) => [0.1, 0.3, 0.6, 0.9].filter((b) => p >= b).length;
  for (const t of tokens) {
    assert.ok(t.prob > 0 && t.prob <= 1, `prob ${t.prob}`);
    assert.equal(t.cls, `tok p${bin(t.prob)}`);
    assert.match(t.title, /^p = [\d.]+ %$/);
  }
  const bins = new Set(tokens.map((t) => bin(t.prob)));
  assert.ok(bins.size >= 3, `several colours in use: ${[...bins]}`);
  const low = tokens.find((t) => bin(t.prob) === 0);
  const high = tokens.find((t) => bin(t.prob) === 4);
  if (low && high) assert.notEqual(low.bg, high.bg);
  assert.deepEqual(await page.locator('#prob-legend .legend-item').allTextContents(),
    ['< 10 %', '10–30 %', '30–60 %', '60–90 %', '≥ 90 %']);

  const fourth = page.locator('#output .tok').nth(3);
  await fourth.hover();
  const prob = Number(await fourth.getAttribute('data-prob'));
  const detail = await text('#token-detail');
  assert.match(detail, /^Token 4 of 60: “[^”]*” · id \d+ · p = [\d.]+ % · drawn with p = [\d.]+ % after the penalties and filters$/);
  const shown = Number(detail.match(/p = ([\d.]+) %/)[1]);
  assert.ok(Math.abs(shown - prob * 100) < 0.06 * Math.max(1, prob * 100), `${shown} % vs ${prob}`);
  await screenshot(page, 'controls-colours');

  const stats = Object.fromEntries(await Promise.all(['load', 'ttft', 'prefill', 'decode', 'tokens', 'context', 'memory', 'stop']
    .map(async (id) => [id, await text(`#stat-${id}`)])));
  assert.match(stats.load, /^[\d.]+ m?s$/);
  assert.match(stats.ttft, /^[\d.]+ m?s$/);
  assert.match(stats.decode, /^[\d.]+ tok\/s$/);
  assert.equal(stats.tokens, '60');
  const [used, total] = stats.context.split(' / ').map(Number);
  assert.equal(total, 512);
  assert.ok(used > 60 && used < 80, `context used ${used}: prompt + 60 tokens`);
  // A prompt this short gets no speed (fixed costs dominate): its token count instead.
  assert.equal(stats.prefill, `${used - 60} tokens: too short to time`);
  assert.match(stats.memory, /^\d+(\.\d)? MB$/);
  assert.equal(stats.stop, 'max tokens');
  await page.locator('#seed').fill('');
  browser.assertNoProblems();
});

test('keyboard only: tab order with visible focus, a model by arrow keys, generate, browse tokens, Esc', { timeout: STEP_TIMEOUT }, async () => {
  await page.goto(server.url);
  assert.equal((await loadOutcome(page)).state, 'ready');
  await page.keyboard.press('Tab');
  const describe = () => page.evaluate(() => {
    const el = document.activeElement;
    const style = getComputedStyle(el);
    const name = el.id || (el.tagName === 'SUMMARY' ? `${el.parentElement.id} summary` : '') ||
      (el.dataset.preset ? `preset ${el.dataset.preset}` : '') || el.className || el.tagName;
    return { name, outline: style.outlineStyle !== 'none' && parseFloat(style.outlineWidth) >= 2 };
  });
  // The skip link comes first and leads to the prompt.
  assert.equal((await describe()).name, 'skip-link');
  await page.keyboard.press('Enter');
  assert.equal((await describe()).name, 'prompt');
  for (let i = 0; i < 4; i++) await page.keyboard.press('Shift+Tab');

  const order = [];
  for (let i = 0; i < 19; i++) {
    order.push(await describe());
    await page.keyboard.press('Tab');
  }
  assert.deepEqual(order.map((o) => o.name), [
    'skip-link', 'model', 'backend', 'sources-link', 'prompt', 'generate', 'mode-completion', 'preset precise', 'preset balanced',
    'preset creative', 'temperature', 'top-k', 'top-p', 'repeat-penalty', 'max-tokens', 'seed', 'stop-strings',
    'output-format', 'min-p',
  ]);
  const noRing = order.filter((o) => !o.outline).map((o) => o.name);
  assert.deepEqual(noRing, [], 'every focused control shows a focus ring');

  // A model chosen with the arrow keys: the next one in the list is the GGUF.
  for (let i = 0; i < 18; i++) await page.keyboard.press('Shift+Tab');
  assert.equal((await describe()).name, 'model');
  const out = await loadAfter(page, () => page.keyboard.press('ArrowDown'));
  assert.equal(out.state, 'ready', out.text);
  assert.match(out.text, /^stories260K-gguf ready/);

  // Prompt, greedy, Ctrl+Enter (past the backend picker and the sources link).
  for (let i = 0; i < 3; i++) await page.keyboard.press('Tab');
  assert.equal((await describe()).name, 'prompt');
  await page.keyboard.press('Control+A');
  await page.keyboard.type('Once upon a time');
  for (let i = 0; i < 6; i++) await page.keyboard.press('Tab'); // Generate, the mode, the presets
  assert.equal((await describe()).name, 'temperature');
  await page.keyboard.press('Home');
  await page.keyboard.press('Tab');
  await page.keyboard.press('Tab');
  await page.keyboard.press('Tab');
  assert.equal((await describe()).name, 'repeat-penalty');
  await page.keyboard.press('Home');
  await page.keyboard.press('Tab');
  await page.keyboard.press('End');
  assert.equal(await text('#max-tokens-value'), '512');
  await page.keyboard.press('Control+Enter');
  assert.equal(await waitForState(page, 'ready', 'error'), 'ready');
  assert.equal(await text('#output'), reference);

  // Tab reaches the text (it follows Generate): one stop on the first token, then arrow keys
  // move between tokens. From max tokens, back over the sliders and the presets.
  for (let i = 0; i < 8; i++) await page.keyboard.press('Shift+Tab');
  const active = await describe();
  assert.equal(active.name, 'tok p4', 'the first token (greedy picks probable tokens)');
  assert.ok(active.outline);
  const n = await page.locator('#output .tok').count();
  assert.match(await text('#token-detail'), new RegExp(`^Token 1 of ${n}: “`));
  await page.keyboard.press('ArrowRight');
  await page.keyboard.press('ArrowRight');
  assert.match(await text('#token-detail'), new RegExp(`^Token 3 of ${n}: “`));
  assert.equal(await page.evaluate(() => document.activeElement.textContent),
    await page.locator('#output .tok').nth(2).textContent());
  await page.keyboard.press('End');
  assert.match(await text('#token-detail'), new RegExp(`^Token ${n} of ${n}: “`));
  await page.keyboard.press('ArrowLeft');
  await screenshot(page, 'controls-keyboard');
  assert.equal(await page.locator('#output [tabindex="0"]').count(), 1, 'one Tab stop in the text (roving tabindex)');
  await page.keyboard.press('Tab');
  await page.keyboard.press('Shift+Tab');
  assert.match(await text('#token-detail'), new RegExp(`^Token ${n - 1} of ${n}: “`), 'Tab comes back to the same token');

  // Esc stops a generation (pressed from within the page at the 5th token: the model is faster
  // than a key press sent from the test process).
  await page.evaluate(() => {
    const toks = document.getElementById('output').getElementsByClassName('tok');
    const observer = new MutationObserver(() => {
      if (toks.length >= 5) {
        observer.disconnect();
        document.activeElement.dispatchEvent(new KeyboardEvent('keydown', { key: 'Escape', bubbles: true }));
      }
    });
    observer.observe(document.getElementById('output'), { childList: true });
  });
  await page.keyboard.press('Control+Enter');
  assert.equal(await waitForState(page, 'ready', 'error'), 'ready');
  assert.equal(await text('#stat-stop'), 'aborted');
  assert.equal(await page.locator('#output .tok').count(), 5);
  browser.assertNoProblems();
});

test('markup in the prompt and in stop strings is shown as text, never run', { timeout: STEP_TIMEOUT }, async () => {
  const prompt = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script><b>bold</b> Once';
  await page.locator('#prompt').fill(prompt);
  await page.locator('#stop-strings').fill('<b>x</b>');
  await setValue(page, '#max-tokens', 8);
  await generate();
  assert.equal(await page.locator('#output img, #output script, #output b').count(), 0);
  assert.equal(await page.locator('#output .prompt').textContent(), prompt);
  assert.ok((await text('#output')).startsWith(prompt));
  assert.equal(await page.locator('#applied b').count(), 0);
  assert.match(await text('#applied'), / · stop "<b>x<\/b>" · /);
  await page.locator('#output .tok').first().hover();
  assert.match(await text('#token-detail'), /^Token 1 of 8: /);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  await screenshot(page, 'controls-injection');
  await page.locator('#stop-strings').fill('');
  browser.assertNoProblems();
});
