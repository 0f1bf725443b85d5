// webgpu_stream.test.mjs — the WebGPU backend's streamed load in headless Chromium (WebGPU on
// SwiftShader, --enable-unsafe-webgpu, page on http://127.0.0.1): a GGUF downloaded with fetch()
// (chunked, no Content-Length: its size unknown until the end) streams to GPU buffers; its
// logits equal the heap-copy load's (gpuWeights 'heap') bit for bit, and the wasm memory it
// leaves is smaller by about the file. The Node tests (tests/js/webgpu_stream.test.mjs) cover
// files, Blobs, split parts and the errors.
//
//   node --test tests/browser/webgpu_stream.test.mjs

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { launch, startTestServer } from './_helpers.mjs';
import { synthCached } from '../../tools/synth_gguf.mjs';

const closers = [];
after(async () => { for (const c of closers) await c(); });

test('Chromium: a fetched GGUF streams to the GPU; logits bit for bit the heap copy\'s, wasm memory smaller by the file', async (t) => {
  // 45 MB (qwen3 F32: the 151,669-row embedding), well above the slack a fresh module's memory
  // has: the heap copy must grow the memory by about the file, which a small file (5 MB) does
  // not once the heap buffer is sized exactly (no Content-Length: from the GGUF's directory)
  const file = synthCached({ arch: 'qwen3', type: 'F32' });
  const size = fs.statSync(file).size;
  const server = await startTestServer({ files: { '/stream-test.gguf': file } });
  closers.push(() => server.close());
  const browser = await launch({ args: ['--enable-unsafe-webgpu'] });
  closers.push(() => browser.close());
  const { page } = browser;
  await page.goto(`${new URL(server.url).origin}/LICENSE`); // any page of the origin: the API alone runs
  const [s, h] = await page.evaluate(async (url) => {
    const { createEngine } = await import('/js/wasmlm.js');
    const run = async (gpuWeights) => {
      const e = await createEngine({ threads: 1, backend: 'webgpu', gpuWeights });
      const before = e.wasmMemoryBytes;
      const progress = [];
      const info = await e.load({ model: url, onProgress: (p) => progress.push(p.loaded) });
      const ids = Array.from(await e.tokenize('Once upon a time there was'));
      const logits = Array.from(await e.evalTokens(ids));
      const out = { backend: info.backend, grew: e.wasmMemoryBytes - before, reports: progress.length, loaded: progress.at(-1), logits };
      await e.free();
      return out;
    };
    return [await run('stream'), await run('heap')];
  }, '/stream-test.gguf');
  assert.equal(s.backend, 'webgpu');
  assert.equal(h.backend, 'webgpu');
  assert.equal(s.loaded, size);
  assert.ok(s.reports > 2, `${s.reports} progress reports`);
  assert.deepEqual(s.logits, h.logits);
  t.diagnostic(`wasm memory grew by ${s.grew} streamed, ${h.grew} copied, for a ${size}-byte file`);
  assert.ok(h.grew - s.grew > 0.8 * size, `wasm memory grew by ${s.grew} streamed, ${h.grew} copied, for a ${size}-byte file`);
  browser.assertNoProblems(/favicon\.ico/);
});
