// prompt_api_images.test.mjs — the Prompt API's image inputs in a page (headless Chromium):
// every ImageBitmapSource / BufferSource form a page has (a Blob, an ImageBitmap, ImageData, a
// canvas, an OffscreenCanvas, an <img> element, an ArrayBuffer) of one opaque PNG gives the
// answer the Prompt API gives in Node for its bytes (greedy, the synthetic Gemma 3 pair of
// tests/browser/vision.test.mjs loaded by configure() with its mmproj) and the same contextUsage;
// availability() for images is "downloadable" before the load, "available" after.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { pngBytes, testImage } from '../../tools/synth_mmproj.mjs';
import { configure, LanguageModel } from '../../js/prompt_api/index.js';
import { openVisionPage } from './_helpers.mjs';

let pair;
const LOAD = { nCtx: 1024, kvType: 'f32', backend: 'cpu' };

before(async () => {
  pair = await openVisionPage('wasmlm-pa-images-');
});

after(async () => {
  await pair?.close();
});

test('Prompt API images in a page: every image form gives Node\'s answer for the same pixels', { timeout: 600000 }, async () => {
  const w = 56, h = 40;
  const png = Buffer.from(await pngBytes(testImage(w, h, 2), w, h));
  const ask = (value) => [{ role: 'user', content: [{ type: 'text', value: 'What is this? ' }, { type: 'image', value }] }];
  // Node: the reference
  await configure({ model: pair.model, load: { ...LOAD, mmproj: pair.mmproj }, params: { maxTokens: 6 } });
  const s = await LanguageModel.create({ expectedInputs: [{ type: 'image' }], samplingMode: 'most-predictable' });
  const want = await s.prompt(ask(new Uint8Array(png)));
  const wantUsage = s.contextUsage;
  assert.ok(want.length > 0 && wantUsage > 16, `${JSON.stringify(want)}, ${wantUsage} positions`);
  await configure({ model: pair.model }); // (frees it)

  const got = await pair.page.evaluate(async ({ png, LOAD }) => {
    const { configure, LanguageModel } = await import('/js/prompt_api/index.js');
    await configure({ model: '/synthetic/gemma3.gguf', load: { ...LOAD, mmproj: '/synthetic/mmproj.gguf' }, params: { maxTokens: 6 }, worker: false });
    // configured with an mmproj: images are not "unavailable" (the model is still to download)
    const availability = [await LanguageModel.availability({ expectedInputs: [{ type: 'image' }] })];
    const bytes = Uint8Array.from(atob(png), (c) => c.charCodeAt(0));
    const blob = new Blob([bytes], { type: 'image/png' });
    const bitmap = await createImageBitmap(blob);
    const canvas = document.createElement('canvas');
    canvas.width = bitmap.width;
    canvas.height = bitmap.height;
    canvas.getContext('2d').drawImage(bitmap, 0, 0);
    const offscreen = new OffscreenCanvas(bitmap.width, bitmap.height);
    offscreen.getContext('2d').drawImage(bitmap, 0, 0);
    const img = new Image();
    img.src = URL.createObjectURL(blob);
    await img.decode();
    const forms = { Blob: blob, ImageBitmap: bitmap, ImageData: canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height),
      HTMLCanvasElement: canvas, OffscreenCanvas: offscreen, HTMLImageElement: img, ArrayBuffer: bytes.slice().buffer };
    const out = { availability, answers: {}, usage: {} };
    for (const [name, value] of Object.entries(forms)) {
      const s = await LanguageModel.create({ expectedInputs: [{ type: 'image' }], samplingMode: 'most-predictable' });
      out.answers[name] = await s.prompt([{ role: 'user', content: [{ type: 'text', value: 'What is this? ' }, { type: 'image', value }] }]);
      out.usage[name] = s.contextUsage;
    }
    availability.push(await LanguageModel.availability({ expectedInputs: [{ type: 'image' }] }));
    const plain = await LanguageModel.create();
    try {
      await plain.prompt([{ role: 'user', content: [{ type: 'image', value: blob }] }]);
    } catch (e) {
      out.refused = e.name;
    }
    return out;
  }, { png: png.toString('base64'), LOAD });
  assert.deepEqual(got.availability, ['downloadable', 'available']);
  for (const [name, answer] of Object.entries(got.answers)) {
    assert.equal(answer, want, name);
    assert.equal(got.usage[name], wantUsage, `${name}: contextUsage`);
  }
  assert.equal(got.refused, 'NotSupportedError');
});
