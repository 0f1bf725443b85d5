// example.test.mjs — embedding: web/examples/minimal.html (the README's "Embedding in a page"
// snippet) streams a story into its element, as text; and the example and the demo page work
// from a subdirectory of a static host (every URL is relative), here /static/wasmlm/.
// Screenshots: tests/artifacts/example-*.png.
//
//   node --test tests/browser/

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import path from 'node:path';
import {
  REPO, STEP_TIMEOUT, startTestServer, launch, loadOutcome, screenshot, recordTokenMessages,
} from './_helpers.mjs';

const PREFIX = '/static/wasmlm';
let server = null;
let browser = null;
let page = null;

before(async () => {
  server = await startTestServer({ prefix: PREFIX });
  browser = await launch({ viewport: { width: 800, height: 900 } });
  page = browser.page;
});

after(async () => {
  await browser?.close();
  await server?.close();
});

test('the README snippet is the example page\'s script', async () => {
  const readme = await fs.readFile(path.join(REPO, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('## Embedding in a page'));
  const snippet = section.match(/```html\n([\s\S]*?)```/)[1];
  const html = await fs.readFile(path.join(REPO, 'web', 'examples', 'minimal.html'), 'utf8');
  const squash = (s) => s.split('\n').map((l) => l.trim()).filter(Boolean).join('\n');
  assert.ok(squash(html).includes(squash(snippet)), 'minimal.html contains the snippet, line for line');
});

test('the minimal example streams a story into its element, as text', { timeout: STEP_TIMEOUT }, async () => {
  // Token by token, by event order (not timing): when each token message of the worker
  // arrives, #story already holds the prompt and every earlier token's text node.
  await recordTokenMessages(page, '#story');
  const finished = page.waitForEvent('console', { predicate: (m) => m.type() === 'log', timeout: STEP_TIMEOUT });
  await page.goto(`${server.origin}${PREFIX}/web/examples/minimal.html`);
  const result = await (await finished).args()[0].jsonValue();
  assert.ok(['max_tokens', 'eos'].includes(result.stopReason), JSON.stringify(result));
  assert.ok(result.nGenerated > 10, `${result.nGenerated} tokens`);

  const story = page.locator('#story');
  const text = await story.textContent();
  assert.ok(text.startsWith('Once upon a time'), text);
  assert.equal(text, `Once upon a time${result.text}`);
  const kinds = await story.evaluate((el) => [...el.childNodes].map((n) => n.nodeType));
  assert.ok(kinds.every((k) => k === 3), 'only text nodes (Node.TEXT_NODE)');
  const messages = (await page.evaluate(() => window.__tokenMessages)).filter((m) => m.id >= 0);
  assert.equal(messages.length, result.nGenerated);
  messages.forEach((m, k) => assert.equal(m.shown, k + 1,
    `when token ${k + 1} arrived, #story held ${m.shown} text nodes (expected the prompt and ${k} tokens)`));
  assert.equal(kinds.length, result.nGenerated + 1, 'one text node per token, after the prompt');
  assert.ok(server.requests.every((r) => r.path.startsWith(`${PREFIX}/`)), 'every URL is relative to the page');
  await screenshot(page, 'example-minimal');
  browser.assertNoProblems();
});

test('the demo page works from a subdirectory of a static host', { timeout: STEP_TIMEOUT }, async () => {
  await page.goto(server.url);
  const out = await loadOutcome(page);
  assert.equal(out.state, 'ready', out.text);
  await page.locator('#generate').click();
  await page.waitForFunction(() => document.body.dataset.state === 'ready' && document.querySelectorAll('#output .tok').length > 0);
  const outside = server.requests.filter((r) => !r.path.startsWith(`${PREFIX}/`));
  assert.deepEqual(outside, [], 'no request outside the prefix');
  await screenshot(page, 'example-subdirectory');
  browser.assertNoProblems();
});
