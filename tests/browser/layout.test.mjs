// layout.test.mjs — the demo page's layout, measured in headless Chromium (boxes against the
// viewport, not pixels): on a 1280×800 desktop the prompt, Generate, Stop and the output are
// visible together without scrolling, and stay so while a story streams; on a 390×844 phone the
// output follows the prompt and Generate and is on screen after tapping Generate; a failed run's
// error appears right under the output, inside the output's live region, and the next
// successful run clears it; the prefill speed is shown only for prompts long enough to time.
// (A failed load that keeps the previous model: models.test.mjs.)
// Screenshots: tests/artifacts/layout-*.png.
//
//   node --test tests/browser/

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { STEP_TIMEOUT, startTestServer, launch, loadOutcome, waitForState, setValue, screenshot } from './_helpers.mjs';

let server = null;
let browser = null;
let page = null;

before(async () => {
  server = await startTestServer();
  browser = await launch({ viewport: { width: 1280, height: 800 } });
  page = browser.page;
});

after(async () => {
  await browser?.close();
  await server?.close();
});

/** The element's box and how much of it is inside the viewport (CSS px). */
function visibility(selector) {
  return page.locator(selector).evaluate((el) => {
    const r = el.getBoundingClientRect();
    const visibleHeight = Math.max(0, Math.min(r.bottom, innerHeight) - Math.max(r.top, 0));
    const visibleWidth = Math.max(0, Math.min(r.right, innerWidth) - Math.max(r.left, 0));
    return { top: r.top, bottom: r.bottom, height: r.height, visibleHeight, visibleWidth, viewport: innerHeight };
  });
}

/** Fails unless `selector` is entirely inside the viewport. */
async function assertFullyVisible(selector) {
  const v = await visibility(selector);
  assert.ok(v.visibleWidth > 0 && v.visibleHeight >= v.height - 0.5,
    `${selector} is not entirely on screen: ${JSON.stringify(v)}`);
}

async function openPage(viewport) {
  await page.setViewportSize(viewport);
  await page.goto(server.url);
  const out = await loadOutcome(page);
  assert.equal(out.state, 'ready', out.text);
}

test('1280×800: prompt, Generate, Stop and the output are visible together, before and after a story', { timeout: STEP_TIMEOUT }, async () => {
  await openPage({ width: 1280, height: 800 });
  for (const id of ['#prompt', '#generate', '#stop', '#output']) await assertFullyVisible(id);
  await setValue(page, '#max-tokens', 512);
  await page.locator('#generate').click();
  assert.equal(await waitForState(page, 'ready', 'error'), 'ready');
  assert.ok((await page.locator('#output .tok').count()) > 100);
  assert.equal(await page.evaluate(() => scrollY), 0, 'nothing scrolled');
  for (const id of ['#prompt', '#generate', '#stop', '#output']) await assertFullyVisible(id);
  // The newest text is shown: the output box follows the story to its end.
  const last = await visibility('#output .tok:last-child');
  const box = await visibility('#output');
  assert.ok(last.bottom <= box.bottom + 1 && last.top >= box.top - 1, `last token ${JSON.stringify(last)} in ${JSON.stringify(box)}`);
  await screenshot(page, 'layout-desktop', { fullPage: false });
  browser.assertNoProblems();
});

test('390×844: the output follows the prompt and Generate, and is on screen after tapping Generate', { timeout: STEP_TIMEOUT }, async () => {
  await openPage({ width: 390, height: 844 });
  const order = await page.evaluate(() => ['prompt', 'generate', 'output', 'temperature', 'stats']
    .map((id) => document.getElementById(id).getBoundingClientRect().top));
  for (let i = 1; i < order.length; i++) assert.ok(order[i] > order[i - 1], `top to bottom: ${order}`);
  await assertFullyVisible('#generate');
  await page.locator('#generate').click();
  assert.equal(await waitForState(page, 'ready', 'error'), 'ready');
  const v = await visibility('#output');
  assert.ok(v.visibleHeight >= Math.min(v.height, 0.5 * v.viewport),
    `the output is on screen after Generate: ${JSON.stringify(v)}`);
  await assertFullyVisible('#stop');
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - innerWidth);
  assert.ok(overflow <= 0, `page is ${overflow}px wider than the screen`);
  await screenshot(page, 'layout-phone', { fullPage: false });
  browser.assertNoProblems();
});

for (const viewport of [{ width: 1280, height: 800 }, { width: 390, height: 844 }]) {
  test(`${viewport.width}×${viewport.height}: a prompt longer than the context fails under the output; the next run clears it`, { timeout: STEP_TIMEOUT }, async () => {
    await openPage(viewport);
    // stories260K's context is 512 tokens; this prompt is longer.
    await page.locator('#prompt').fill('Once upon a time there was a cat. '.repeat(80));
    await page.locator('#generate').click();
    assert.equal(await waitForState(page, 'ready', 'error'), 'error');
    const error = page.locator('#run-error');
    assert.match(await error.textContent(), /^Generation failed: .*WLM_ERR_CONTEXT_FULL/);
    assert.equal(await error.evaluate((el) => el.closest('[aria-live]')?.id), 'output-live', 'in the output\'s live region');
    await assertFullyVisible('#run-error');
    const [out, err] = [await visibility('#output'), await visibility('#run-error')];
    assert.ok(err.top >= out.bottom && err.top - out.bottom < 24, `right under the output: ${out.bottom} → ${err.top}`);
    assert.ok(await page.locator('#generate').isEnabled(), 'the model is still loaded');
    await screenshot(page, `layout-error-${viewport.width}`, { fullPage: false });

    await page.locator('#prompt').fill('Once upon a time');
    await setValue(page, '#max-tokens', 8);
    await page.locator('#generate').click();
    assert.equal(await waitForState(page, 'ready', 'error'), 'ready');
    assert.equal(await error.textContent(), '');
    assert.ok(!(await error.isVisible()), 'the error is gone');
    assert.equal(await page.locator('#load-status').getAttribute('data-error'), null);
    assert.match(await page.locator('#load-status').textContent(), /^stories260K ready/);
    browser.assertNoProblems();
  });
}

test('prefill speed is shown for a prompt of 32 tokens or more, a token count for a shorter one', { timeout: STEP_TIMEOUT }, async () => {
  await openPage({ width: 1280, height: 800 });
  await setValue(page, '#max-tokens', 4);
  const run = async (prompt) => {
    await page.locator('#prompt').fill(prompt);
    await page.locator('#generate').click();
    assert.equal(await waitForState(page, 'ready', 'error'), 'ready');
    return page.locator('#stat-prefill').textContent();
  };
  const short = await run('Once upon a time');
  assert.match(short, /^\d+ tokens: too short to time$/);
  assert.match(await page.locator('#stat-prefill').getAttribute('title'), new RegExp(`^${short.split(' ')[0]} prompt tokens`));
  assert.ok(Number(short.split(' ')[0]) < 32);
  const long = await run('Once upon a time there was a little girl named Lily. She liked to play in the park with her ' +
    'friends. One day she saw a big red ball under a tree and ran to get it.');
  assert.match(long, /^[\d.]+ tok\/s$/);
  assert.match(await page.locator('#stat-prefill').getAttribute('title'), /^(3[2-9]|[4-9]\d) prompt tokens/);
  browser.assertNoProblems();
});
