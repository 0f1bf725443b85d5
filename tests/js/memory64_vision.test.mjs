// memory64_vision.test.mjs — an mmproj counted in load()'s memory sizing (js/runtime/memory64.js
// visionBytes, modelBytes's `vision`): a synthetic text model + mmproj pair (tools/synth_gguf.mjs,
// tools/synth_mmproj.mjs) whose estimate crosses wasm32's share of 4 GB only with the mmproj
// counted picks memory64, and a pair that fits nowhere is refused naming both files. The file
// sizes are claimed (the estimate's first argument): no multi-GB file is written. The encoder's
// scratch is checked against the sizes of src/vision/encoder.c's buffers computed here by hand,
// and Gemma 3's 256 non-causal image rows growing the text context's pass buffers against what
// the context really allocates (kvStats().contextBytes before and after an image).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { createEngine } from '../../js/wasmlm.js';
import { MEDIA_MARKER } from '../../js/vision/vision.js';
import {
  VISION_IMAGE_ALLOWANCE, WASM32_BYTES, WASM32_FIT, WASM64_BYTES, chooseMemory, describeBytes, lowHeapBytes, modelBytes,
  readModelHeader, visionBytes,
} from '../../js/runtime/memory64.js';
import { mmprojBytes, MMPROJ_SHAPES, pngBytes, testImage } from '../../tools/synth_mmproj.mjs';
import { synthCached } from '../../tools/synth_gguf.mjs';
import { REPO } from './_helpers.mjs';

const BUILT = fs.existsSync(path.join(REPO, 'dist/wasmlm.wasm'));

const yes = { ok: true, why: null };
const no = { ok: false, why: 'this runtime has no WebAssembly memory64' };

function pair(shape = 'gemma3-tiny') {
  const { text } = MMPROJ_SHAPES[shape];
  const model = fs.readFileSync(synthCached({ arch: text.arch, shape: text.shape }));
  const mm = mmprojBytes({ shape, type: 'F16', seed: 1 });
  return { th: readModelHeader(new Uint8Array(model)), mh: readModelHeader(new Uint8Array(mm)), mmSize: mm.length };
}

test('memory64 + vision: the mmproj header is read as one (its tower\'s sizes), and a text model is not', () => {
  const { th, mh, mmSize } = pair();
  const s = MMPROJ_SHAPES['gemma3-tiny'];
  assert.equal(th.arch, 'gemma3');
  assert.equal(th.vision, undefined);
  assert.equal(mh.arch, 'clip');
  assert.deepEqual(mh.vision, { projector: 'gemma3', imageSize: s.S, patchSize: s.P, width: s.W, ff: s.F, layers: s.L,
    heads: s.H, scale: s.k, longestEdge: 0 });
  assert.equal(mh.dataBytes, mmSize, 'the tensor directory sizes the file');
  // an mmproj passed as the model is sized by its bytes alone (C refuses it by name)
  const asModel = modelBytes(mmSize, mh);
  assert.equal(asModel.total, mmSize + (32 << 20));
});

test('memory64 + vision: the encoder\'s scratch counts src/vision/encoder.c\'s buffers of one piece', () => {
  const { mh } = pair();
  const { S, P, W, F, H, k, D } = MMPROJ_SHAPES['gemma3-tiny'];
  const N = (S / P) ** 2, widest = Math.max(F, 3 * P * P, W), threads = 3;
  const v = visionBytes(1000, mh, { threads, textDim: D });
  // x, h, q, k, v (+ resized positions) N·W each, f and the quantized rows N·widest, attention per thread
  const encoder = 4 * (6 * N * W + 2 * N * widest + threads * H * (N + 2 * (W / H)));
  const tokens = N / (k * k);
  const image = 4 * (3 * S * S + tokens * D), kept = 8 * 4 * tokens * D, loader = 4 * N * W + 4 * W * D;
  assert.equal(v.weights, 1000);
  assert.equal(v.scratch, encoder + image + kept + loader + VISION_IMAGE_ALLOWANCE + (8 << 20));
  assert.equal(v.total, 1000 + v.scratch);
  // more threads, more attention scratch; no header: the file and 64 MB
  assert.ok(visionBytes(1000, mh, { threads: 8, textDim: D }).scratch > v.scratch);
  assert.deepEqual(visionBytes(1000, null), { weights: 1000, scratch: 64 << 20, total: 1000 + (64 << 20) });
  // LFM2-VL's pieces are its dynamic ones (≤ 256 tokens of s² patches), not S×S
  const l = pair('lfm2-tiny').mh;
  const lv = visionBytes(0, l, { threads: 1, textDim: 64 });
  const lfm = MMPROJ_SHAPES['lfm2-tiny'];
  assert.ok(lv.scratch > 4 * 6 * 256 * lfm.k * lfm.k * lfm.W, 'sized for 1024 patches, not (S/P)² = 256');
  // Qwen2.5-VL: the merge size from spatial_merge_size, pieces of up to 4096 tokens of 2×2
  // patches, and its SwiGLU's second N·F rows
  const q = pair('qwen25vl-tiny').mh, qs = MMPROJ_SHAPES['qwen25vl-tiny'];
  assert.equal(q.vision.projector, 'qwen2.5vl_merger');
  assert.equal(q.vision.scale, 2);
  const qN = 4096 * 4;
  assert.ok(visionBytes(0, q, { threads: 1, textDim: 64 }).scratch > 4 * (6 * qN * qs.W + 3 * qN * qs.F),
    'sized for 16384 patches and three N·F row sets');
});

test('memory64 + vision: a pair near 4 GB picks memory64 only with its mmproj counted', () => {
  const { th, mh } = pair();
  const nCtx = 4096;
  const mmFile = 900e6; // a large mmproj's size (Gemma 3 27B's F16 one: 0.86 GB)
  const vision = visionBytes(mmFile, mh, { threads: 1, textDim: th.dim });
  // the text model's file sized so that it alone sits just under wasm32's share of 4 GB
  const base = modelBytes(0, th, { nCtx });
  const fileBytes = Math.floor(WASM32_BYTES * WASM32_FIT - base.total - vision.total / 2);
  const alone = modelBytes(fileBytes, th, { nCtx });
  const both = modelBytes(fileBytes, th, { nCtx, vision });
  assert.ok(alone.total <= WASM32_BYTES * WASM32_FIT && both.total > WASM32_BYTES * WASM32_FIT);
  assert.equal(both.vision, vision.total);
  assert.equal(both.imagePass, 0, "gemma3-tiny's 16 rows fit the context's 64-entry pass");
  assert.equal(both.total, alone.total + vision.total);
  assert.deepEqual(chooseMemory(alone, 'auto', nCtx, yes), { memory64: false, error: null });
  assert.deepEqual(chooseMemory(both, 'auto', nCtx, yes, { model: 'text.gguf', mmproj: 'mmproj.gguf' }), { memory64: true, error: null });
  assert.match(describeBytes(both, nCtx), / \+ 1\.01 GB mmproj \(its file and its encoder's scratch\)$/);
  // memory64: the mmproj's file and scratch stay below 4 GB with the heap's other small blocks
  assert.ok(lowHeapBytes(both, 16 << 20) >= lowHeapBytes(alone, 16 << 20) + vision.total);
});

test('memory64 + vision: a pair that fits nowhere is refused naming both files', () => {
  const { th, mh } = pair();
  const names = { model: 'gemma-3-27b-it-Q4_K_M.gguf', mmproj: 'mmproj-gemma-3-27b-it-f16.gguf' };
  const vision = visionBytes(900e6, mh, { threads: 1, textDim: th.dim });
  // without memory64: past 4 GB with the mmproj
  const over4 = modelBytes(Math.floor(WASM32_BYTES - modelBytes(0, th, { nCtx: 4096 }).total - vision.total / 2), th, { nCtx: 4096, vision });
  const { error } = chooseMemory(over4, 'auto', 4096, no, names);
  assert.equal(error.code, 'WLM_ERR_NOMEM');
  assert.match(error.message, /^the model gemma-3-27b-it-Q4_K_M\.gguf with its mmproj mmproj-gemma-3-27b-it-f16\.gguf \(\d\.\d\d GB of weights \+ 1\.01 GB mmproj\) is too large for the 4 GB wasm32 memory with nCtx 4096: .* \+ 1\.01 GB mmproj \(its file and its encoder's scratch\)\), and this runtime has no WebAssembly memory64/);
  // with memory64: past 16 GiB with the mmproj
  const over16 = modelBytes(Math.floor(WASM64_BYTES * WASM32_FIT - modelBytes(0, th).total - vision.total / 2), th, { vision });
  assert.equal(chooseMemory({ ...over16, total: over16.total - vision.total, vision: 0 }, 'auto', 0, yes).error, null);
  const big = chooseMemory(over16, 'auto', 0, yes, names);
  assert.match(big.error.message, /^the model gemma-3-27b-it-Q4_K_M\.gguf with its mmproj mmproj-gemma-3-27b-it-f16\.gguf needs 1\d\.\d\d GB of wasm memory .*more than the 16 GiB/);
});

test("memory64 + vision: Gemma 3's 256 image rows grow the context's pass buffers by what the estimate counts", { skip: !BUILT && 'not built', timeout: 600000 }, async () => {
  // gemma3-rows256: Gemma 3's real 256 rows (they see each other both ways, so they pass
  // together: context.c wlm_eval_embd_grid grows the pass buffers to 256 entries, and keeps them)
  const file = synthCached({ arch: 'gemma3', shape: 'tiny' });
  const bytes = fs.readFileSync(file);
  const th = readModelHeader(new Uint8Array(bytes));
  const nCtx = 512;
  const engine = await createEngine({ threads: 1 });
  try {
    for (const shape of ['gemma3-rows256', 'gemma3-tiny']) {
      const mm = mmprojBytes({ shape, type: 'F16', seed: 1 });
      const vision = visionBytes(mm.length, readModelHeader(new Uint8Array(mm)), { threads: 1, textDim: th.dim });
      const s = MMPROJ_SHAPES[shape];
      assert.equal(vision.nonCausalRows, (s.S / s.P) ** 2 / (s.k * s.k));
      const need = modelBytes(bytes.length, th, { nCtx, vision });
      const info = await engine.load({ model: file, mmproj: mm, nCtx, backend: 'cpu' });
      assert.equal(info.contextBytes, need.kv + need.scratch - need.grows, `${shape}: at load`);
      const img = await pngBytes(testImage(32, 32, 3), 32, 32);
      await engine.complete(`${MEDIA_MARKER} hi`, { images: [img], maxTokens: 1, temperature: 0 });
      const grew = (await engine.kvStats()).contextBytes - info.contextBytes;
      assert.ok(Math.abs(grew - need.imagePass) <= 0.01 * Math.max(grew, 1),
        `${shape}: the pass grew by ${grew} bytes, the estimate says ${need.imagePass}`);
      if (shape === 'gemma3-rows256') {
        assert.ok(grew > 0, 'the 256 rows grew it');
        // near wasm32's limit the growth decides: the pair fits without it, not with it
        const noPass = modelBytes(0, th, { nCtx, vision: { ...vision, nonCausalRows: 0 } });
        const fileBytes = Math.floor(WASM32_BYTES * WASM32_FIT - noPass.total - need.imagePass / 2);
        assert.deepEqual(chooseMemory(modelBytes(fileBytes, th, { nCtx, vision: { ...vision, nonCausalRows: 0 } }), 'auto', nCtx, yes),
          { memory64: false, error: null });
        assert.deepEqual(chooseMemory(modelBytes(fileBytes, th, { nCtx, vision }), 'auto', nCtx, yes), { memory64: true, error: null });
      } else {
        assert.equal(grew, 0, '16 rows: no growth');
      }
    }
  } finally {
    await engine.free();
  }
});
