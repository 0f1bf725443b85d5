// tests/js/gemma4.test.mjs — Gemma 4 (gemma4, dense) through the JS engine on the synthesizer's
// tiny model (tools/synth_gguf.mjs: sliding and full layers with different head sizes and KV
// heads, two KV-shared layers, V = K on a full layer, per-layer embeddings, per-layer n_ff;
// llama.cpp's numbers on the same files are tests/js/oracle.test.mjs's): the KV cache's block
// holds only the layers that own a cache, at their own widths; a batch of prompts and two
// threads give what one prompt on one thread gives, bit for bit; context shift is refused
// (sliding windows). (The same files on the WebGPU backend: tests/js/webgpu_gemma4.test.mjs.)

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createEngine } from '../../js/wasmlm.js';
import { synthCached, resolveShape } from '../../tools/synth_gguf.mjs';

const GREEDY = { temperature: 0, maxTokens: 12, nProbs: 5 };
const collect = async (it) => { const out = []; for await (const t of it) out.push(t); return out; };
const PROMPTS = ['The quick brown fox jumps over the lazy dog.', 'Once upon a time', '1, 2, 3, 4, 5, 6, 7, 8,'];

/** K and V elements of one position: 2 × KV heads × head size over the layers owning a cache. */
function kvElems(s) {
  let n = 0;
  for (let l = 0; l < s.L - s.shared; l++) n += 2 * s.kv[l] * (s.swa[l] ? s.hdSwa : s.hd);
  return n;
}

for (const type of ['F32', 'Q8_0']) {
  test(`gemma4 ${type}: per-layer KV block, batch and threads bitwise on the CPU (auto in Node), no context shift`, async () => {
    const file = synthCached({ arch: 'gemma4', shape: 'tiny', type });
    const s = resolveShape('gemma4', 'tiny');
    const one = await createEngine({ threads: 1 });
    const two = await createEngine({ threads: 2 });
    try {
      const info = await one.load({ model: file, kvType: 'f32', nCtx: 256, nSeqMax: 3 });
      await two.load({ model: file, kvType: 'f32', nCtx: 256 });
      assert.equal(info.architecture, 'gemma4');
      assert.equal(info.attnLayers, s.L - s.shared, 'layers with a KV cache of their own');
      assert.equal(info.backend, 'cpu');
      const kv = await one.kvStats();
      assert.equal(kv.blockBytes, 16 * kvElems(s) * 4, 'a block: 16 positions of the own layers\' K and V, F32');
      const batch = await collect(one.generateBatch(PROMPTS, GREEDY));
      for (let i = 0; i < PROMPTS.length; i++) {
        const alone = (await collect(one.generate(PROMPTS[i], GREEDY))).filter((t) => t.id >= 0);
        const threaded = (await collect(two.generate(PROMPTS[i], GREEDY))).filter((t) => t.id >= 0);
        const inBatch = batch.filter((t) => t.seq === i && t.id >= 0);
        assert.deepEqual(inBatch.map((t) => t.id), alone.map((t) => t.id), `prompt ${i}: batch`);
        assert.deepEqual(threaded.map((t) => t.top), alone.map((t) => t.top), `prompt ${i}: 2 threads`);
        assert.deepEqual(inBatch.map((t) => t.top), alone.map((t) => t.top), `prompt ${i}: batch log-probabilities`);
      }
      await assert.rejects(collect(one.generate(PROMPTS[0], { ...GREEDY, contextShift: true })),
        (e) => e.code === 'WLM_ERR_UNSUPPORTED' && /sliding-window/.test(e.message));
    } finally {
      one.free();
      two.free();
    }
  });
}

