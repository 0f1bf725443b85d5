// sampler.test.mjs — "Seeing the sampler" on the demo page in headless Chromium: the top-10
// probability chart after a generation (before / after the filters, each summing to at most 1),
// a slider redrawing it through engine.previewDistribution without generating, a hovered token
// listing its alternatives, the new filter controls, and beam search (width 4: four beams, the
// best one equal to what js/wasmlm.js computes in Node for the same prompt, which shows Node and
// Chromium give identical beams). Screenshots go to tests/artifacts/sampler-*.png.
//
//   node --test tests/browser/

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { createEngine } from '../../js/wasmlm.js';
import {
  MODELS, STEP_TIMEOUT, waitForState, setValue, screenshot,
  openReadyPage,
} from './_helpers.mjs';

let session = null;
let server = null;
let browser = null;
let page = null;

before(async () => {
  session = await openReadyPage();
  ({ server, browser, page } = session);
});

after(() => session?.close());

const text = (selector) => page.locator(selector).textContent();

/** The chart's rows: {id, prob, after, widthBefore, widthAfter, label}. */
const chartRows = () => page.locator('#prob-rows tr').evaluateAll((rows) => rows.map((tr) => ({
  id: Number(tr.dataset.id),
  prob: Number(tr.dataset.prob),
  after: Number(tr.dataset.probSampled),
  widthBefore: tr.querySelector('.bar.before').style.width,
  widthAfter: tr.querySelector('.bar.after').style.width,
  values: [...tr.querySelectorAll('.bar-value')].map((v) => v.textContent),
  label: tr.getAttribute('aria-label'),
  head: tr.querySelector('th').textContent,
})));

const chartState = () => page.evaluate(() => ({
  source: document.getElementById('prob-chart').dataset.source,
  previews: Number(document.getElementById('prob-chart').dataset.previews || 0),
  runs: Number(document.body.dataset.runs || 0),
  output: document.getElementById('output').textContent,
  tokens: document.getElementById('output').getElementsByClassName('tok').length,
}));

/** Clicks Generate and waits for the run to end. */
async function generate() {
  await page.locator('#generate').click();
  assert.equal(await waitForState(page, 'ready', 'error'), 'ready', await text('#load-status'));
}

function checkSums(rows) {
  const before = rows.reduce((a, r) => a + r.prob, 0);
  const after = rows.reduce((a, r) => a + r.after, 0);
  assert.ok(before <= 1 + 1e-4, `before-filter values sum to ${before}`);
  assert.ok(after <= 1 + 1e-4, `after-filter values sum to ${after}`);
  for (const r of rows) {
    assert.ok(r.prob >= 0 && r.prob <= 1 && r.after >= 0 && r.after <= 1, JSON.stringify(r));
    // Bars are CSS widths in percent (the browser keeps a few decimals).
    assert.match(r.widthBefore, /%$/);
    assert.ok(Math.abs(parseFloat(r.widthBefore) - r.prob * 100) < 1e-3, `${r.widthBefore} vs ${r.prob}`);
    assert.ok(Math.abs(parseFloat(r.widthAfter) - r.after * 100) < 1e-3, `${r.widthAfter} vs ${r.after}`);
    assert.match(r.values[0], /^[\d.]+ %$/);
    assert.match(r.values[1], /^[\d.]+ %$/);
    assert.match(r.label, /^“.*”: [\d.]+ % from the model, [\d.]+ % after the penalties and filters$/);
  }
}

test('after a generation: ten candidates with bars before and after the filters, each summing to <= 1', { timeout: STEP_TIMEOUT }, async () => {
  assert.equal(await page.locator('#prob-rows tr').count(), 0, 'empty before any generation');
  await page.getByRole('button', { name: 'Balanced' }).click();
  await page.locator('#seed').fill('11');
  await setValue(page, '#max-tokens', 20);
  await generate();
  const rows = await chartRows();
  assert.equal(rows.length, 10);
  checkSums(rows);
  assert.ok(rows.some((r) => r.after > 0), 'some candidate survives the filters');
  // Sorted as Token.top: survivors by probability after the filters first.
  for (let i = 1; i < rows.length; i++) assert.ok(rows[i - 1].after >= rows[i].after);
  const state = await chartState();
  assert.equal(state.source, 'generation');
  assert.equal(state.tokens, 20);
  assert.match(await text('#chart-caption'), /^Top 10 candidates for token 20 \(“.*”\), with the settings it was drawn with$/);
  // Accessible: a table with column headers and a caption.
  assert.deepEqual(await page.locator('#prob-chart thead th').allTextContents(),
    ['Candidate', 'Model', 'After penalties and filters']);
  await screenshot(page, 'sampler-bars');
  browser.assertNoProblems();
});

/** Moves a control and waits for the chart's redraw (the next preview). */
async function moveAndWait(selector, value) {
  const n = (await chartState()).previews;
  await setValue(page, selector, value);
  await page.waitForFunction((k) => Number(document.getElementById('prob-chart').dataset.previews || 0) > k,
    n, { polling: 'raf' });
}

test('moving the temperature slider redraws the after-bars at once, without generating', { timeout: STEP_TIMEOUT }, async () => {
  const before = await chartState();
  const generated = await chartRows();
  const requests = server.requests.length;

  // Filters off, so that temperature alone shapes the candidates.
  await moveAndWait('#top-p', 1);
  await moveAndWait('#top-k', 0);
  await moveAndWait('#min-p', 0);
  const rowsBefore = await chartRows();
  const probOfGenerated = new Map(generated.map((r) => [r.id, r.prob]));
  for (const r of rowsBefore) if (probOfGenerated.has(r.id)) assert.equal(r.prob, probOfGenerated.get(r.id));
  assert.ok(rowsBefore.filter((r) => r.after > 0).length >= 2, 'several candidates survive without filters');

  await moveAndWait('#temperature', 2);
  const hot = await chartRows();
  const state = await chartState();
  assert.equal(state.source, 'preview');
  assert.match(await text('#chart-caption'), /preview, nothing generated\)$/);
  assert.equal(state.runs, before.runs, 'no generation started');
  assert.equal(state.output, before.output, 'the text is unchanged');
  assert.equal(state.tokens, before.tokens);
  assert.equal(server.requests.length, requests, 'no request to the server');
  assert.equal(hot.length, 10);
  checkSums(hot);
  // The model's probabilities (before) are the same logits; the after-bars changed.
  const probOf = new Map(rowsBefore.map((r) => [r.id, r.prob]));
  for (const r of hot) if (probOf.has(r.id)) assert.equal(r.prob, probOf.get(r.id));
  assert.notDeepEqual(hot.map((r) => r.after), rowsBefore.map((r) => r.after));
  assert.equal(hot[0].id, rowsBefore[0].id);
  assert.ok(hot[0].after < rowsBefore[0].after,
    `temperature 2 flattens the top candidate: ${hot[0].after} vs ${rowsBefore[0].after}`);
  await screenshot(page, 'sampler-preview-hot');

  // Temperature 0 (greedy): everything on the first candidate.
  await moveAndWait('#temperature', 0);
  const greedy = await chartRows();
  assert.equal(greedy[0].after, 1);
  assert.ok(greedy.slice(1).every((r) => r.after === 0));
  checkSums(greedy);

  // The new filters redraw too: min-p 0.5 keeps only candidates with p >= half the best.
  await moveAndWait('#temperature', 1);
  await moveAndWait('#min-p', 0.5);
  const minp = await chartRows();
  const best = Math.max(...minp.map((r) => r.prob));
  for (const r of minp) if (r.after > 0) assert.ok(r.prob >= 0.5 * best - 1e-6, JSON.stringify(r));
  assert.equal(await text('#min-p-value'), '0.50');
  const after = await chartState();
  assert.equal(after.runs, before.runs, 'still no generation');
  assert.equal(after.output, before.output);
  await screenshot(page, 'sampler-preview-minp');
  await page.getByRole('button', { name: 'Balanced' }).click();
  browser.assertNoProblems();
});

test('hovering or focusing a token lists its alternatives', { timeout: STEP_TIMEOUT }, async () => {
  assert.ok(await page.locator('#token-alternatives').isHidden());
  const third = page.locator('#output .tok').nth(2);
  await third.hover();
  assert.ok(await page.locator('#token-alternatives').isVisible());
  assert.match(await text('#token-alternatives-title'), /^Alternatives for token 3 \(“.*”\), probability from the model → after the penalties and filters:$/);
  const items = await page.locator('#token-alternatives-list li').allTextContents();
  assert.equal(items.length, 10);
  for (const item of items) assert.match(item, /^“.*” [\d.]+ % → [\d.]+ %( \(drawn\))?$/);
  const id = await third.getAttribute('data-id');
  const chosen = page.locator('#token-alternatives-list li.chosen');
  if (await chosen.count()) assert.equal(await chosen.getAttribute('data-id'), id);
  await screenshot(page, 'sampler-alternatives');

  await page.locator('#output .tok').first().focus();
  assert.match(await text('#token-alternatives-title'), /^Alternatives for token 1 /);
  browser.assertNoProblems();
});

test('beam width 4 shows four beams, best first; the best equals Node\'s engine.beamSearch', { timeout: STEP_TIMEOUT }, async () => {
  const prompt = 'Once upon a time';
  const maxTokens = 40;
  const engine = await createEngine();
  let expected, nodeBuild;
  try {
    ({ build: nodeBuild } = await engine.load({ model: path.join(MODELS, 'stories260K.bin'), tokenizer: path.join(MODELS, 'tok512.bin') }));
    expected = await engine.beamSearch(prompt, { width: 4, maxTokens });
  } finally {
    await engine.free();
  }

  await page.locator('#prompt').fill(prompt);
  await setValue(page, '#max-tokens', maxTokens);
  await page.locator('#beam-width').focus();
  for (let i = 0; i < 3; i++) await page.keyboard.press('ArrowRight'); // 1 (off) → 4
  assert.equal(await text('#beam-width-value'), '4');
  const runs = (await chartState()).runs;
  await generate();
  assert.equal((await chartState()).runs, runs + 1);

  const beams = await page.locator('#output li.beam').evaluateAll((lis) => lis.map((li) => ({
    text: li.querySelector('.beam-gen').textContent,
    score: Number(li.dataset.score),
    logprob: Number(li.dataset.logprob),
    meta: li.querySelector('.beam-meta').textContent,
  })));
  assert.equal(beams.length, 4);
  for (let i = 1; i < beams.length; i++) assert.ok(beams[i - 1].score >= beams[i].score, 'best first');
  assert.match(beams[0].meta, /^Best · score -?[\d.]+ · log-prob -?[\d.]+ · \d+ tokens · /);
  assert.deepEqual(beams.map((b) => b.text), expected.beams.map((b) => b.text));
  assert.equal(beams[0].text, expected.beams[0].text);
  // Equal bits where the page runs Node's build. Where it runs the relaxed build (Chromium; Node
  // 20 runs SIMD128), stories260K's F32 products fuse their multiply-adds (js/wasmlm.d.ts,
  // `build`): the same beams, log-probabilities (sums over 40 tokens) and scores within 1e-4
  // relative (measured: 1.2e-5 relative, 1.0e-4 absolute on a log-probability of -8.86).
  const names = { 'relaxed SIMD': 'relaxed', SIMD128: 'simd128', scalar: 'scalar' };
  const pageBuild = names[(await text('#model-info')).match(/relaxed SIMD|SIMD128|scalar/)?.[0]];
  assert.ok(pageBuild, 'the model line names the build');
  const near = (a, b) => (pageBuild === nodeBuild ? a === b : Math.abs(a - b) <= 1e-4 * Math.max(1, Math.abs(b)));
  for (const k of ['score', 'logprob']) {
    beams.forEach((b, i) => assert.ok(near(b[k], expected.beams[i][k]),
      `beam ${i} ${k}: page (${pageBuild}) ${b[k]} vs Node (${nodeBuild}) ${expected.beams[i][k]}`));
  }
  assert.equal(await page.locator('#output .tok').count(), 0, 'no streamed tokens');
  assert.match(await text('#applied'), /^applied: beam search · width 4 · max tokens 40/);
  // A beam search reports its speed: tokens per second over all beams.
  assert.match(await text('#stat-decode'), /^[\d.]+ tok\/s · 4 beams$/);
  await screenshot(page, 'sampler-beams');

  // A slider after a beam search has nothing to preview: no error, no generation. Waits for
  // the debounced preview to have run (data-preview-attempts) rather than for some time.
  const attempts = await page.evaluate(() => Number(document.getElementById('prob-chart').dataset.previewAttempts || 0));
  await setValue(page, '#temperature', 1.5);
  await page.waitForFunction((k) => Number(document.getElementById('prob-chart').dataset.previewAttempts || 0) > k,
    attempts, { polling: 'raf' });
  assert.equal((await chartState()).runs, runs + 1);
  assert.equal(await page.locator('#prob-rows tr').count(), 0);

  // Back to sampling: the chart returns.
  await setValue(page, '#beam-width', 1);
  assert.equal(await text('#beam-width-value'), 'off');
  await setValue(page, '#max-tokens', 5);
  await generate();
  assert.equal(await page.locator('#prob-rows tr').count(), 10);
  browser.assertNoProblems();
});

test('the new controls are labelled and fit a phone-width screen', { timeout: STEP_TIMEOUT }, async () => {
  for (const [id, name] of [['min-p', 'Min-p'], ['typical-p', 'Typical-p'], ['presence-penalty', 'Presence penalty'],
    ['frequency-penalty', 'Frequency penalty'], ['beam-width', 'Beam width']]) {
    assert.equal(await page.getByRole('slider', { name }).getAttribute('id'), id);
  }
  assert.equal(await page.getByRole('combobox', { name: 'Sampler order' }).getAttribute('id'), 'sampler-order');
  await page.getByRole('button', { name: 'Creative' }).click();
  assert.equal(await text('#presence-penalty-value'), '0.30');
  assert.equal(await text('#frequency-penalty-value'), '0.20');
  await page.getByRole('button', { name: 'Precise' }).click();
  assert.equal(await text('#min-p-value'), '0.10');
  assert.equal(await text('#presence-penalty-value'), 'off');
  await page.setViewportSize({ width: 390, height: 844 });
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 0, `page is ${overflow}px wider than the screen`);
  await screenshot(page, 'sampler-phone');
  await page.setViewportSize({ width: 1280, height: 900 });
  browser.assertNoProblems();
});
