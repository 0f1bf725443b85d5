// vision.test.mjs — images in a page (headless Chromium): js/vision/vision.js decodes through
// createImageBitmap + OffscreenCanvas (PNG: the very pixels the C test reads; PNG with alpha:
// alpha dropped, as stb_image does; an ImageBitmap and raw ImageData as given), and the engine
// with a synthetic Gemma 3 pair and its mmproj loaded from URLs generates after an image (a
// Blob, a data: URL) the text the same engine gives in Node.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import pngjs from 'pngjs';
import { mmprojBytes, pngBytes, testImage } from '../../tools/synth_mmproj.mjs';
import { createEngine } from '../../js/wasmlm.js';
import { openVisionPage } from './_helpers.mjs';

let pair;

before(async () => {
  pair = await openVisionPage('wasmlm-vision-');
});

after(async () => {
  await pair?.close();
});

test('vision in a page: createImageBitmap decoding equals the pixels; generation after an image equals Node\'s', { timeout: 600000 }, async () => {
  const { page } = pair;
  const w = 80, h = 50, rgb = testImage(w, h, 1);
  const png = Buffer.from(await pngBytes(rgb, w, h));
  const p = new pngjs.PNG({ width: w, height: h });
  for (let i = 0; i < w * h; i++) p.data.set([rgb[3 * i], rgb[3 * i + 1], rgb[3 * i + 2], 255 - (i % 200)], 4 * i);
  const rgba = pngjs.PNG.sync.write(p);
  const got = await page.evaluate(async ({ png, rgba }) => {
    const v = await import('/js/vision/vision.js');
    const hex = (a) => Array.from(a, (x) => x.toString(16).padStart(2, '0')).join('');
    const bytes = Uint8Array.from(atob(png), (c) => c.charCodeAt(0));
    const a = await v.decodeImage(bytes);
    const b = await v.decodeImage(Uint8Array.from(atob(rgba), (c) => c.charCodeAt(0)));
    const bmp = await createImageBitmap(new Blob([bytes]));
    const c = await v.decodeImage(bmp);
    let err = '';
    try { await v.decodeImage(new Uint8Array([0x89, 0x50, 0x4e, 0x47, 1, 2, 3])); } catch (e) { err = `${e.code}: ${e.message}`; }
    return { a: [a.width, a.height, hex(a.rgb)], b: hex(b.rgb), c: hex(c.rgb), err };
  }, { png: png.toString('base64'), rgba: rgba.toString('base64') });
  const want = Buffer.from(rgb).toString('hex');
  assert.deepEqual(got.a, [w, h, want], 'PNG through createImageBitmap: the pixels');
  assert.equal(got.b, want, 'PNG with alpha: alpha dropped (colorSpaceConversion and premultiplication off)');
  assert.equal(got.c, want, 'an ImageBitmap');
  assert.match(got.err, /WLM_ERR_INVALID_ARG: image: /);

  // the engine in the page: the model and its mmproj from URLs, an image as a Blob and as a data: URL
  const prompt = 'Look at this: <__media__> It shows';
  const text = await page.evaluate(async ({ png, prompt }) => {
    const { createEngine } = await import('/js/wasmlm.js');
    const e = await createEngine({ threads: 1 });
    const info = await e.load({ model: '/synthetic/gemma3.gguf', mmproj: '/synthetic/mmproj.gguf', nCtx: 1024, kvType: 'f32', backend: 'cpu' });
    const bytes = Uint8Array.from(atob(png), (c) => c.charCodeAt(0));
    const r1 = await e.complete(prompt, { images: [new Blob([bytes], { type: 'image/png' })], temperature: 0, maxTokens: 6 });
    const r2 = await e.complete(prompt, { images: [`data:image/png;base64,${png}`], temperature: 0, maxTokens: 6 });
    await e.free();
    return { projector: info.vision.projector, t1: r1.text, t2: r2.text, enc: [r1.imagesEncoded, r2.imagesEncoded] };
  }, { png: png.toString('base64'), prompt });
  const engine = await createEngine({ threads: 1 });
  try {
    await engine.load({ model: pair.model, mmproj: mmprojBytes({ shape: 'gemma3-tiny', type: 'F32', seed: 1 }), nCtx: 1024, kvType: 'f32', backend: 'cpu' });
    const node = await engine.complete(prompt, { images: [png], temperature: 0, maxTokens: 6 });
    assert.equal(text.projector, 'gemma3');
    assert.equal(text.t1, node.text);
    assert.equal(text.t2, node.text);
    assert.deepEqual(text.enc, [1, 0], 'the same pixels: encoded once');
  } finally {
    await engine.free();
  }
});
