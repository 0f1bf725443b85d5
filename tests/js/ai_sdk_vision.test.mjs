// tests/js/ai_sdk_vision.test.mjs — images through `wasmlm/ai-sdk` driven by `ai` 7 itself: a user
// message's file part (image/png bytes), ai's image part, a base64 string and an http URL (declared in
// supportedUrls: handed over as is, fetched by the engine) answer with the greedy text and usage
// that Engine.chatCompletion gives the same request with an image_url part in-process (generateText
// and streamText); a model loaded without an mmproj throws UnsupportedFunctionalityError; a file
// that is not an image too. The pair is a synthetic gemma3 text model + mmproj (tools/synth_gguf.mjs,
// tools/synth_mmproj.mjs), its chat template given as providerOptions.wasmlm.chat_template.

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { generateText, streamText } from 'ai';
import { UnsupportedFunctionalityError } from '@ai-sdk/provider';
import { wasmlm } from 'wasmlm/ai-sdk';
import { createEngine } from '../../js/wasmlm.js';
import { synthCached } from '../../tools/synth_gguf.mjs';
import { mmprojBytes, pngBytes, testImage } from '../../tools/synth_mmproj.mjs';
import { REPO } from './_helpers.mjs';

globalThis.AI_SDK_LOG_WARNINGS = false;
const skip = !fs.existsSync(path.join(REPO, 'dist/wasmlm.wasm')) && 'not built';
const MODEL = synthCached({ arch: 'gemma3', shape: 'tiny', seed: 1, type: 'F32' });
const MMPROJ = mmprojBytes({ shape: 'gemma3-tiny', type: 'F32', seed: 1 });
const TEMPLATE = "{{ bos_token }}{% for m in messages %}<start_of_turn>{{ 'model' if m.role == 'assistant' else m.role }}\n" +
  '{{ m.content }}<end_of_turn>\n{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}';
const load = { mmproj: MMPROJ, backend: 'cpu' };
const model = wasmlm(MODEL, { engine: { threads: 1 }, load });
const plain = wasmlm(MODEL, { engine: { threads: 1 }, load: { backend: 'cpu' } });
let reference = null;
after(async () => {
  if (!skip) { await (await model.engine()).free(); await (await plain.engine()).free(); }
  await (await reference)?.free();
});
async function inProcess(req) {
  reference ??= createEngine({ threads: 1 }).then(async (e) => { await e.load({ model: MODEL, ...load }); return e; });
  return (await reference).chatCompletion(req);
}

const PNG = skip ? null : await pngBytes(testImage(80, 50, 1), 80, 50);
const b64 = () => Buffer.from(PNG).toString('base64');
const opts = { maxOutputTokens: 8, temperature: 0, providerOptions: { wasmlm: { chat_template: TEMPLATE } } };
const user = (image) => [{ role: 'user', content: [{ type: 'text', text: 'What is this? ' }, image] }];
const want = () => inProcess({ messages: [{ role: 'user', content: [{ type: 'text', text: 'What is this? ' },
  { type: 'image_url', image_url: { url: `data:image/png;base64,${b64()}` } }] }], max_tokens: 8, temperature: 0, chat_template: TEMPLATE });
const usage = (u) => [u.inputTokens, u.outputTokens];

test('ai_sdk + images: supportedUrls declares image URLs', () => {
  assert.deepEqual(Object.keys(model.supportedUrls), ['image/*']);
  assert.ok(model.supportedUrls['image/*'].some((re) => re.test('data:image/png;base64,AAAA')));
  assert.ok(model.supportedUrls['image/*'].some((re) => re.test('https://example.com/cat.png')));
});

test('ai_sdk + images: generateText with an image file part answers as chatCompletion with its image_url', { skip, timeout: 300000 }, async () => {
  const ref = await want();
  const r = await generateText({ model, messages: user({ type: 'file', mediaType: 'image/png', data: PNG }), ...opts });
  assert.equal(r.text, ref.choices[0].message.content);
  assert.deepEqual(usage(r.usage), [ref.usage.prompt_tokens, ref.usage.completion_tokens]);
  // the image's rows are in the prompt: (112 / 14 / 2)² = 16 for gemma3-tiny
  const textOnly = await inProcess({ messages: [{ role: 'user', content: 'What is this? ' }], max_tokens: 1, chat_template: TEMPLATE });
  assert.ok(ref.usage.prompt_tokens >= textOnly.usage.prompt_tokens + 16, 'the image rows are in the prompt');
  // ai's image part, a base64 string, a data: URL: the same
  for (const image of [{ type: 'image', image: PNG }, { type: 'file', mediaType: 'image/png', data: b64() },
    { type: 'image', image: new URL(`data:image/png;base64,${b64()}`) }]) {
    const o = await generateText({ model, messages: user(image), ...opts });
    assert.equal(o.text, ref.choices[0].message.content, JSON.stringify(image).slice(0, 60));
  }
  // streamText: the same text
  const s = streamText({ model, messages: user({ type: 'file', mediaType: 'image/png', data: PNG }), ...opts });
  let text = '';
  for await (const d of s.textStream) text += d;
  assert.equal(text, ref.choices[0].message.content);
});

test('ai_sdk + images: an http URL (supportedUrls) is fetched by the engine', { skip, timeout: 300000 }, async (t) => {
  const files = http.createServer((req, res) => { res.writeHead(200, { 'Content-Type': 'image/png' }).end(PNG); });
  await new Promise((r) => files.listen(0, '127.0.0.1', r));
  t.after(() => files.close());
  let asked = 0;
  files.on('request', () => { asked++; });
  const r = await generateText({ model, messages: user({ type: 'image', image: new URL(`http://127.0.0.1:${files.address().port}/cat.png`) }), ...opts });
  assert.equal(r.text, (await want()).choices[0].message.content);
  assert.equal(asked, 1);
});

test('ai_sdk + images: without an mmproj, or a file that is not an image: UnsupportedFunctionalityError', { skip, timeout: 300000 }, async () => {
  await assert.rejects(generateText({ model: plain, messages: user({ type: 'file', mediaType: 'image/png', data: PNG }), ...opts }),
    (e) => UnsupportedFunctionalityError.isInstance(e) && /without its mmproj/.test(e.message));
  await assert.rejects(plain.doStream({ prompt: [{ role: 'user', content: [{ type: 'file', mediaType: 'image/png', data: { type: 'data', data: PNG } }] }] }),
    (e) => UnsupportedFunctionalityError.isInstance(e) && /without its mmproj/.test(e.message));
  await assert.rejects(model.doGenerate({ prompt: [{ role: 'user', content: [{ type: 'file', mediaType: 'application/pdf', data: { type: 'data', data: new Uint8Array(4) } }] }] }),
    (e) => UnsupportedFunctionalityError.isInstance(e) && /application\/pdf/.test(e.message));
  // the text-only model still answers text
  const r = await generateText({ model: plain, prompt: 'Hello', ...opts });
  assert.equal(typeof r.text, 'string');
});
