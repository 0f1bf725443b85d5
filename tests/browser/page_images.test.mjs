// page_images.test.mjs — images in the demo page's chat (web/demo/chat.js): a vision pair (a
// synthetic Gemma 3 text GGUF given a chat template here, and its synthetic mmproj of
// tools/synth_mmproj.mjs) chosen in the local-file input, together or the projector first, is
// recognised as model + projector (web/sources.js classifyFile: general.architecture "clip")
// and loaded with vision; a PNG made here with pngjs is attached with the Attach button's
// picker (a thumbnail with a Remove control), sent with Enter, and the reply's token ids are
// those of the engine's own chat() in Node on the same messages (greedy; without the image
// Node's reply differs). An undecodable image, and one whose header declares too many pixels,
// are refused in the error area and the typed message stays; a drop and a paste onto the
// message attach too; a failed turn with images gives them and the text back; the same text
// model without its projector shows no attach control; a manifest entry with an mmproj loads
// both files, checked, and answers as Node does.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pngjs from 'pngjs';
import { synthCached } from '../../tools/synth_gguf.mjs';
import { mmprojBytes, testImage } from '../../tools/synth_mmproj.mjs';
import { ggufHeader, readGguf } from '../../tools/vocab_gguf.mjs';
import { createEngine } from '../../js/wasmlm.js';
import { REPO, launch, startTestServer, loadAfter, loadOutcome, setValue, waitForState, screenshot, STEP_TIMEOUT } from './_helpers.mjs';

/** Gemma's turn format (the image parts become media markers inside the user's text). */
const TEMPLATE = "{{ bos_token }}{% for m in messages %}<start_of_turn>{{ 'model' if m.role == 'assistant' else m.role }}\n" +
  '{{ m.content }}<end_of_turn>\n{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}';

/** A GGUF file's bytes with tokenizer.chat_template added (the tensor data copied as it is). */
function withTemplate(file, template) {
  const g = readGguf(file);
  const bytes = fs.readFileSync(file);
  const dataBytes = bytes.length - g.dataOffset;
  const ends = [...g.tensors.map((t) => t.offset).slice(1), dataBytes];
  const tensors = g.tensors.map((t, i) => ({ ...t, nbytes: ends[i] - t.offset })); // (padded: the same offsets)
  const kv = [...g.kv.filter(([k]) => k !== 'tokenizer.chat_template'), ['tokenizer.chat_template', 'str', template]];
  return Buffer.concat([ggufHeader(kv, tensors, g.alignment), bytes.subarray(g.dataOffset)]);
}

let server, browser, page, dir;
const files = {};
/** Node's reply to the image question (the second test), for the third. */
let nodeReply = null;

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-page-images-'));
  files.text = path.join(dir, 'gemma3-tiny-chat.gguf');
  fs.writeFileSync(files.text, withTemplate(synthCached({ arch: 'gemma3', shape: 'tiny', seed: 1, type: 'F32' }), TEMPLATE));
  files.mmproj = path.join(dir, 'mmproj-gemma3-tiny.gguf');
  fs.writeFileSync(files.mmproj, mmprojBytes({ shape: 'gemma3-tiny', type: 'F32', seed: 1 }));
  const w = 80, h = 50, rgb = testImage(w, h, 1);
  const png = new pngjs.PNG({ width: w, height: h });
  for (let i = 0; i < w * h; i++) png.data.set([rgb[3 * i], rgb[3 * i + 1], rgb[3 * i + 2], 255], 4 * i);
  files.png = path.join(dir, 'picture.png');
  fs.writeFileSync(files.png, pngjs.PNG.sync.write(png));
  files.broken = path.join(dir, 'broken.png');
  fs.writeFileSync(files.broken, Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 1, 2, 3, 4]));
  // the manifest as published, and a vision entry whose files this server has (models/files/)
  const manifest = JSON.parse(fs.readFileSync(path.join(REPO, 'models/manifest.json'), 'utf8'));
  const pin = (file) => ({ size: fs.statSync(file).size, sha256: crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex'), verified: true });
  manifest.models.push({
    id: 'tiny-vision', name: 'a synthetic Gemma 3 with its mmproj', format: 'gguf', file: 'gemma3-tiny-chat.gguf',
    url: 'https://huggingface.co/none/none/resolve/main/gemma3-tiny-chat.gguf', revision: null, ...pin(files.text),
    checksumSource: 'checked: made by the test',
    mmproj: { file: 'mmproj-gemma3-tiny.gguf', url: 'https://huggingface.co/none/none/resolve/main/mmproj-gemma3-tiny.gguf',
      revision: null, ...pin(files.mmproj), checksumSource: 'checked: made by the test' },
  });
  files.manifest = path.join(dir, 'manifest.json');
  fs.writeFileSync(files.manifest, JSON.stringify(manifest));
  server = await startTestServer({ files: { '/models/manifest.json': files.manifest,
    '/models/files/gemma3-tiny-chat.gguf': files.text, '/models/files/mmproj-gemma3-tiny.gguf': files.mmproj } });
  browser = await launch();
  page = browser.page;
  await page.goto(server.url);
  await waitForState(page, 'ready', 'error');
});

after(async () => {
  await browser?.close();
  await server?.close();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

test('a text-only model with a chat template: chat, and no attach control', { timeout: STEP_TIMEOUT * 2 }, async () => {
  const out = await loadAfter(page, () => page.locator('#model-files').setInputFiles(files.text));
  assert.equal(out.state, 'ready', out.text);
  await page.locator('#mode-chat').check();
  assert.equal(await page.locator('#chat-form').isVisible(), true);
  assert.equal(await page.locator('#chat-attach-row').isHidden(), true, 'no vision: the attach row is hidden');
  assert.equal(await page.locator('#chat-attach').isVisible(), false);
  assert.doesNotMatch(await page.locator('#model-info').textContent(), /vision/);
});

test('a vision pair from the file input: attach a PNG, send, the reply is Node\'s chat() with the same image', { timeout: STEP_TIMEOUT * 4 }, async () => {
  // the projector alone waits for its text model, which then loads with it
  await page.locator('#model-files').setInputFiles(files.mmproj);
  await page.waitForFunction(() => /is a vision projector \(mmproj\): now choose or drop the text GGUF/.test(document.getElementById('local-pending').textContent),
    null, { polling: 'raf' });
  assert.equal(await page.evaluate(() => document.body.dataset.state), 'ready', 'nothing loaded yet');
  let out = await loadAfter(page, () => page.locator('#model-files').setInputFiles(files.text));
  assert.equal(out.state, 'ready', out.text);
  assert.match(out.text, /gemma3-tiny-chat\.gguf \+ mmproj-gemma3-tiny\.gguf ready/);
  assert.equal(await page.locator('#local-pending').textContent(), '');
  // both files at once (the projector first: the page tells them apart by their headers)
  out = await loadAfter(page, () => page.locator('#model-files').setInputFiles([files.mmproj, files.text]));
  assert.equal(out.state, 'ready', out.text);
  assert.match(out.text, /gemma3-tiny-chat\.gguf \+ mmproj-gemma3-tiny\.gguf ready/);
  assert.match(await page.locator('#model-info').textContent(), /vision: gemma3 projector/);
  await page.locator('#mode-chat').check();
  const attach = page.locator('#chat-attach');
  assert.equal(await attach.isVisible(), true, 'vision: the attach button is shown');
  assert.equal(await attach.isEnabled(), true);
  // focusable by keyboard: Tab from the message reaches it
  await page.locator('#chat-input').focus();
  await page.keyboard.press('Tab');
  assert.equal(await page.evaluate(() => document.activeElement?.id), 'chat-attach');

  // an undecodable image: refused in the error area, the typed text untouched, nothing attached
  await page.locator('#chat-input').fill('What is in the picture?');
  await page.locator('#chat-images').setInputFiles(files.broken);
  await page.waitForFunction(() => document.getElementById('run-error').textContent !== '', null, { polling: 'raf' });
  assert.match(await page.locator('#run-error').textContent(), /Image not attached: broken\.png cannot be decoded/);
  assert.equal(await page.locator('#run-error').getAttribute('data-kind'), 'image');
  assert.equal(await page.locator('#chat-input').inputValue(), 'What is in the picture?');
  assert.equal(await page.locator('#chat-attachments li').count(), 0);

  // attached, shown, removable; attached again
  await page.locator('#chat-images').setInputFiles(files.png);
  await page.locator('#chat-attachments li').first().waitFor();
  assert.equal(await page.locator('#chat-attachments li img').getAttribute('alt'), 'picture.png (80×50)');
  assert.equal(await page.locator('#run-error').textContent(), '', 'a good image clears the error');
  await page.locator('#chat-attachments li button').click();
  assert.equal(await page.locator('#chat-attachments li').count(), 0);
  await page.locator('#chat-images').setInputFiles(files.png);
  await page.locator('#chat-attachments li').first().waitFor();
  assert.match(await page.locator('#chat-attach-count').textContent(), /1 image attached/);
  await screenshot(page, 'page-images-attached');

  // greedy, no penalties, 6 tokens
  await setValue(page, '#temperature', 0);
  await setValue(page, '#repeat-penalty', 1);
  await setValue(page, '#presence-penalty', 0);
  await setValue(page, '#frequency-penalty', 0);
  await setValue(page, '#max-tokens', 6);
  await page.locator('#seed').fill('1');
  await page.locator('#chat-input').press('Enter');
  await page.waitForFunction(() => document.querySelector('#output > .msg.assistant')?.dataset.status &&
    document.querySelector('#output > .msg.assistant').dataset.status !== 'streaming', null, { polling: 'raf' });
  assert.equal(await waitForState(page, 'ready', 'error'), 'ready', await page.locator('#run-error').textContent());
  const ids = await page.evaluate(() => [...document.querySelectorAll('#output > .msg.assistant .tok')].map((t) => Number(t.dataset.id)));
  assert.equal(await page.locator('#output > .msg.user img.msg-image').count(), 1, 'the image in the user bubble');
  assert.equal(await page.locator('#chat-attachments li').count(), 0, 'sent: the attachments are cleared');
  assert.equal(await page.locator('#chat-input').inputValue(), '');
  const nCtx = await page.evaluate(() => Number(document.getElementById('model-info').textContent.match(/context (\d+)/)[1]));

  const engine = await createEngine({ threads: 1 });
  try {
    await engine.load({ model: fs.readFileSync(files.text), mmproj: fs.readFileSync(files.mmproj), nCtx, backend: 'cpu' });
    const url = `data:image/png;base64,${fs.readFileSync(files.png).toString('base64')}`;
    const messages = [{ role: 'user', content: [{ type: 'image_url', image_url: { url } }, { type: 'text', text: 'What is in the picture?' }] }];
    const want = [];
    for await (const t of engine.chat(messages, { temperature: 0, repeatPenalty: 1, maxTokens: 6 })) if (t.id >= 0) want.push(t.id);
    assert.ok(want.length > 0);
    assert.equal(engine.lastResult.imagesEncoded, 1);
    assert.deepEqual(ids, want, 'the page\'s reply = Node\'s chat() with the same image');
    nodeReply = want;
    // (the image counts: without it, the reply differs)
    const noImage = [];
    for await (const t of engine.chat([{ role: 'user', content: 'What is in the picture?' }], { temperature: 0, repeatPenalty: 1, maxTokens: 6 })) {
      if (t.id >= 0) noImage.push(t.id);
    }
    assert.notDeepEqual(noImage, want, 'the reply depends on the image');
  } finally {
    await engine.free();
  }

  // a drop and a paste onto the message attach too; an image that declares too many pixels is refused
  await page.locator('#chat-input').fill('Next question');
  const huge = Buffer.alloc(33);
  Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13]).copy(huge);
  huge.write('IHDR', 12, 'latin1');
  huge.writeUInt32BE(20000, 16);
  huge.writeUInt32BE(20000, 20);
  const after = await page.evaluate(async ({ png, huge }) => {
    const file = (b64, name) => new File([Uint8Array.from(atob(b64), (c) => c.charCodeAt(0))], name, { type: 'image/png' });
    const input = document.getElementById('chat-input');
    const list = document.getElementById('chat-attachments');
    const until = (f) => new Promise((resolve) => { const tick = () => (f() ? resolve() : requestAnimationFrame(tick)); tick(); });
    const drop = new DataTransfer();
    drop.items.add(file(png, 'dropped.png'));
    input.dispatchEvent(new DragEvent('drop', { dataTransfer: drop, bubbles: true, cancelable: true }));
    await until(() => list.children.length === 1);
    const paste = new DataTransfer();
    paste.items.add(file(png, 'pasted.png'));
    const event = new ClipboardEvent('paste', { clipboardData: paste, bubbles: true, cancelable: true });
    input.dispatchEvent(event);
    await until(() => list.children.length === 2);
    const big = new DataTransfer();
    big.items.add(file(huge, 'huge.png'));
    input.dispatchEvent(new DragEvent('drop', { dataTransfer: big, bubbles: true, cancelable: true }));
    await until(() => document.getElementById('run-error').textContent !== '');
    return { names: [...list.children].map((li) => li.dataset.name), pasteTaken: event.defaultPrevented,
      error: document.getElementById('run-error').textContent, text: input.value };
  }, { png: fs.readFileSync(files.png).toString('base64'), huge: huge.toString('base64') });
  assert.deepEqual(after.names, ['dropped.png', 'pasted.png']);
  assert.equal(after.pasteTaken, true, 'a pasted image is not pasted as text');
  assert.match(after.error, /huge\.png is too large: 20000×20000 pixels/);
  assert.equal(after.text, 'Next question', 'the typed message stays');

  // a turn with images that fails (a system prompt longer than the context) gives the text and
  // the images back, and leaves nothing of itself in the conversation
  await page.locator('#chat-system').fill('word '.repeat(nCtx + 8));
  await page.locator('#chat-input').press('Enter');
  await page.waitForFunction(() => document.getElementById('run-error').textContent.startsWith('Chat failed'), null, { polling: 'raf' });
  assert.equal(await waitForState(page, 'ready', 'error'), 'error');
  assert.equal(await page.locator('#chat-input').inputValue(), 'Next question');
  assert.deepEqual(await page.locator('#chat-attachments li').evaluateAll((lis) => lis.map((li) => li.dataset.name)), ['dropped.png', 'pasted.png']);
  assert.deepEqual(await page.locator('#output > .msg').evaluateAll((ms) => ms.map((m) => m.dataset.role)), ['user', 'assistant']);
  await page.locator('#chat-system').fill('');
  browser.assertNoProblems();
});

test('a manifest entry with an mmproj: both downloaded, checked and loaded; the image reply is Node\'s', { timeout: STEP_TIMEOUT * 4 }, async () => {
  assert.ok(nodeReply, 'the previous test ran');
  await page.goto(`${server.url}?model=tiny-vision`);
  const out = await loadOutcome(page);
  assert.equal(out.state, 'ready', out.text);
  assert.doesNotMatch(out.text, /unverified/);
  assert.match(await page.locator('#model-note').textContent(), /GGUF \+ vision projector \(mmproj\)/);
  assert.match(await page.locator('#model-info').textContent(), /vision: gemma3 projector/);
  await page.locator('#mode-chat').check();
  await page.locator('#chat-images').setInputFiles(files.png);
  await page.locator('#chat-attachments li').first().waitFor();
  await setValue(page, '#temperature', 0);
  await setValue(page, '#repeat-penalty', 1);
  await setValue(page, '#presence-penalty', 0);
  await setValue(page, '#frequency-penalty', 0);
  await setValue(page, '#max-tokens', 6);
  await page.locator('#chat-input').fill('What is in the picture?');
  await page.locator('#chat-send').click();
  await page.waitForFunction(() => document.querySelector('#output > .msg.assistant')?.dataset.status &&
    document.querySelector('#output > .msg.assistant').dataset.status !== 'streaming', null, { polling: 'raf' });
  assert.equal(await waitForState(page, 'ready', 'error'), 'ready', await page.locator('#run-error').textContent());
  const ids = await page.evaluate(() => [...document.querySelectorAll('#output > .msg.assistant .tok')].map((t) => Number(t.dataset.id)));
  assert.deepEqual(ids, nodeReply);
  browser.assertNoProblems();
});
