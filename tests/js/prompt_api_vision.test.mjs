// tests/js/prompt_api_vision.test.mjs — images through the Prompt API (js/prompt_api/): a
// session created with expectedInputs [{type: 'image'}] on a vision pair (the synthetic gemma3
// model and mmproj of tests/reference/oracle/vision/gemma3-F32.json, whose llama.cpp records
// vision.test.mjs checks), against the engine's own raw-prompt generation with the same image
// (the prompt the template renders, written out here): the same greedy tokens for every image
// value the spec allows that Node has (bytes, ArrayBuffer, a view at an offset, ImageData-like
// pixels, a Blob, a canvas-like object), streaming, append(), a follow-up prompt; the context
// counts (measureContextUsage = the positions generation evaluated, images included); the
// spec's errors (NotSupportedError without the image input or without an mmproj, TypeError for
// a value that is no image, DataError for bytes that do not decode); availability().

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { createEngine } from '../../js/wasmlm.js';
import { decodeImage, MEDIA_MARKER } from '../../js/vision/vision.js';
import { configure, LanguageModel } from '../../js/prompt_api/index.js';
import { mmprojBytes, pngBytes, testImage } from '../../tools/synth_mmproj.mjs';
import { synthCached } from '../../tools/synth_gguf.mjs';
import { REPO } from './_helpers.mjs';
import { toolModel } from './_tool_models.mjs';

const TEXT_MODEL = toolModel('qwen3');

const BUILT = fs.existsSync(path.join(REPO, 'dist/wasmlm.wasm'));
const rec = JSON.parse(fs.readFileSync(path.join(REPO, 'tests/reference/oracle/vision/gemma3-F32.json'), 'utf8'));
const synthArg = (k) => rec.model.synth[rec.model.synth.indexOf(k) + 1];

// Gemma's turn format (the synthetic model has no template of its own)
const TEMPLATE = "{{ bos_token }}{% for m in messages %}<start_of_turn>{{ 'model' if m.role == 'assistant' else m.role }}\n" +
  "{% if m.content is string %}{{ m.content }}{% else %}{% for p in m.content %}{{ p.text }}{% endfor %}{% endif %}<end_of_turn>\n" +
  '{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}';
const turn = (role, text) => `<start_of_turn>${role}\n${text}<end_of_turn>\n`;
const N = 6; // tokens per response (configure's params.maxTokens)

const rejectsWith = (p, name) => assert.rejects(p, (e) => {
  assert.equal(e.name, name, `${e.name}: ${e.message}`);
  return true;
});

let engine = null;
/** The vision engine, its info carrying the template (what the Prompt API renders with). */
async function visionEngine() {
  if (engine) return engine;
  const model = await synthCached({ arch: synthArg('--arch'), shape: synthArg('--shape'), seed: Number(synthArg('--seed')),
    type: synthArg('--type'), sha256: rec.model.sha256 });
  const e = await createEngine({ threads: 1 });
  await e.load({ model, mmproj: mmprojBytes({ shape: rec.mmproj.shape, type: rec.mmproj.type, seed: rec.mmproj.seed }),
    nCtx: 1024, kvType: 'f32', backend: 'cpu' });
  engine = new Proxy(e, {
    get(target, key) {
      if (key === 'info') return { ...target.info, chatTemplate: TEMPLATE };
      const v = Reflect.get(target, key);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
  return engine;
}

after(async () => {
  await configure({ model: TEXT_MODEL });
  await engine?.free();
});

/** The engine's greedy answer to a raw prompt with images (the reference). */
async function raw(prompt, images) {
  const r = await engine.complete(prompt, { images, temperature: 0, topK: 1, topP: 1, maxTokens: N });
  return r;
}

test('Prompt API images: every image value gives the raw prompt\'s greedy tokens; measured positions are those generated from', { skip: !BUILT && 'not built', timeout: 600000 }, async () => {
  await visionEngine();
  await configure({ engine, params: { maxTokens: N } });
  assert.equal(await LanguageModel.availability({ expectedInputs: [{ type: 'image' }] }), 'available');
  const rgb = testImage(48, 40, 3);
  const png = await pngBytes(rgb, 48, 40);
  const want = await raw(`${turn('user', `Describe ${MEDIA_MARKER}`)}<start_of_turn>model\n`, [png]);
  assert.ok(want.text.length > 0);

  const create = () => LanguageModel.create({ expectedInputs: [{ type: 'image' }], samplingMode: 'most-predictable' });
  const ask = (value) => [{ role: 'user', content: [{ type: 'text', value: 'Describe ' }, { type: 'image', value }] }];

  // bytes; the count measured first equals the positions generation evaluated
  const s = await create();
  const measured = await s.measureContextUsage(ask(png));
  assert.equal(await s.prompt(ask(png)), want.text);
  assert.equal(engine.lastResult.nPrompt, measured, 'measureContextUsage = the prompt\'s positions (text tokens + image rows and wrapper)');
  assert.equal(engine.lastResult.nPrompt, want.nPrompt);
  const rows = await engine.imageTokens(png);
  const textOnly = (await engine.tokenize(`${turn('user', 'Describe ')}<start_of_turn>model\n`, { parseSpecial: true })).length;
  assert.equal(measured, textOnly + rows, 'the text pieces plus the image');
  assert.ok(rows > 16, `${rows} positions: the rows (16) and <start_of_image> … <end_of_image>`);
  assert.ok(s.contextUsage > measured, 'the conversation holds the image and the answer');

  // the other forms of the same pixels, each snapshotted: the same answer
  const padded = new Uint8Array(png.length + 7);
  padded.set(png, 5);
  const decoded = await decodeImage(png);
  const rgba = new Uint8ClampedArray(48 * 40 * 4);
  for (let i = 0; i < 48 * 40; i++) rgba.set([...decoded.rgb.subarray(3 * i, 3 * i + 3), 255], 4 * i);
  const canvas = { width: 48, height: 40, getContext: (k) => (k === '2d' ? { getImageData: (x, y, w, h) => ({ width: w, height: h, data: rgba }) } : null) };
  const forms = { ArrayBuffer: Uint8Array.from(png).buffer, 'a view at an offset': new DataView(padded.buffer, 5, png.length),
    ImageData: { width: 48, height: 40, data: rgba, colorSpace: 'srgb' }, Blob: new Blob([png]), canvas };
  for (const [name, value] of Object.entries(forms)) {
    const t = await create();
    assert.equal(await t.prompt(ask(value)), want.text, name);
    assert.equal(engine.lastResult.imagesEncoded, 0, `${name}: the same pixels are not encoded again`);
  }
  // a value is snapshotted when the call is made
  const bytes = Uint8Array.from(png);
  const pending = (await create()).prompt(ask(bytes));
  bytes.fill(0);
  assert.equal(await pending, want.text);

  // streaming
  const st = await create();
  let streamed = '';
  for await (const chunk of st.promptStreaming(ask(png))) streamed += chunk;
  assert.equal(streamed, want.text);

  // a follow-up question: the conversation with the image, as the template renders it
  const follow = await st.prompt('And its colours?');
  const want2 = await raw(`${turn('user', `Describe ${MEDIA_MARKER}`)}${turn('model', want.text)}${turn('user', 'And its colours?')}<start_of_turn>model\n`, [png]);
  assert.equal(follow, want2.text);

  // append(): the image stored, counted now, prefilled with the next prompt
  const ap = await create();
  await ap.append(ask(png));
  assert.equal(ap.contextUsage, measured, 'the same conversation as measured');
  const after = await ap.prompt('What is it?');
  const want3 = await raw(`${turn('user', `Describe ${MEDIA_MARKER}`)}${turn('user', 'What is it?')}<start_of_turn>model\n`, [png]);
  assert.equal(after, want3.text);

  // initialPrompts with an image
  const ip = await LanguageModel.create({ expectedInputs: [{ type: 'image' }], samplingMode: 'most-predictable', initialPrompts: ask(png) });
  assert.equal(ip.contextUsage, measured);
});

test('Prompt API images: the spec\'s errors', { skip: !BUILT && 'not built', timeout: 600000 }, async () => {
  await visionEngine();
  await configure({ engine, params: { maxTokens: 2 } });
  const png = await pngBytes(testImage(20, 20, 1), 20, 20);
  const img = (value) => [{ role: 'user', content: [{ type: 'text', value: 'x' }, { type: 'image', value }] }];
  // a session created without the image input refuses images
  const plain = await LanguageModel.create();
  await rejectsWith(plain.prompt(img(png)), 'NotSupportedError');
  await rejectsWith(plain.append(img(png)), 'NotSupportedError');
  await rejectsWith(plain.measureContextUsage(img(png)), 'NotSupportedError');
  await rejectsWith(LanguageModel.create({ initialPrompts: img(png) }), 'NotSupportedError');
  const s = await LanguageModel.create({ expectedInputs: [{ type: 'text' }, { type: 'image' }] });
  const usage = s.contextUsage;
  // values that are no image: TypeError; an image as a text value: TypeError; assistant images
  for (const v of ['data:image/png;base64,AAAA', 42, null, {}, [1, 2, 3]]) await assert.rejects(s.prompt(img(v)), TypeError, String(v));
  await assert.rejects(s.prompt([{ role: 'user', content: [{ type: 'text', value: png }] }]), TypeError);
  await rejectsWith(s.prompt([{ role: 'assistant', content: [{ type: 'image', value: png }] }]), 'NotSupportedError');
  // bytes that do not decode: DataError, the session unchanged
  await rejectsWith(s.prompt(img(new Uint8Array([1, 2, 3, 4]))), 'DataError');
  await rejectsWith(s.measureContextUsage(img(new Uint8Array(10))), 'DataError');
  const truncated = png.slice(0, 40);
  await rejectsWith(s.append(img(truncated)), 'DataError');
  assert.equal(s.contextUsage, usage);
  // the marker that places an image, typed in a text of a conversation with images
  await rejectsWith(s.prompt([{ role: 'user', content: [{ type: 'text', value: `a ${MEDIA_MARKER} b` }, { type: 'image', value: png }] }]), 'NotSupportedError');
  assert.equal(s.contextUsage, usage);
  assert.equal(typeof await s.prompt(img(png)), 'string', 'the session still works');
});

test('Prompt API images: a model without an mmproj answers "unavailable" and refuses the image input', { skip: !BUILT && 'not built', timeout: 120000 }, async () => {
  await configure({ model: TEXT_MODEL });
  assert.equal(await LanguageModel.availability({ expectedInputs: [{ type: 'image' }] }), 'unavailable');
  await rejectsWith(LanguageModel.create({ expectedInputs: [{ type: 'image' }] }), 'NotSupportedError');
  await LanguageModel.create(); // (loaded now)
  assert.equal(await LanguageModel.availability({ expectedInputs: [{ type: 'image' }] }), 'unavailable');
  assert.equal(await LanguageModel.availability(), 'available');
  // configured with an mmproj, before it loads: images will be available
  await configure({ model: TEXT_MODEL, load: { mmproj: 'not-loaded-yet.gguf' } });
  assert.equal(await LanguageModel.availability({ expectedInputs: [{ type: 'image' }] }), 'available');
  assert.equal(await LanguageModel.availability({ expectedInputs: [{ type: 'audio' }] }), 'unavailable');
});
