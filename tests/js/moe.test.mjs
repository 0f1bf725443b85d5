// moe.test.mjs — mixtures of experts (src/model/moe.c: qwen3moe, lfm2moe, gpt-oss, Gemma 4's
// 26B-A4B kind: gemma4 tiny-moe) through the JS engine,
// on the synthesizer's tiny models (tools/synth_gguf.mjs, cached under build/synth; llama.cpp's
// numbers on the same files are tests/js/oracle.test.mjs's, the double-precision reference
// tests/c/test_moe.c's): info counts the experts and reads only the chosen ones per token; a
// prompt evaluated in one batch ends with the bits of one token at a time, and 2 threads give
// the bits of 1 (the prefill's expert products are split among the threads). (The GPU backend's
// run of them against this CPU path: tests/js/webgpu_moe_models.test.mjs.)
// Gemma 4's experts as one fused ffn_gate_up_exps or as ffn_gate_exps + ffn_up_exps holding the
// same values give the same bits.

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { createEngine } from '../../js/wasmlm.js';
import { synthCached, resolveShape } from '../../tools/synth_gguf.mjs';

const PROMPT = 'The weather had been strange all week. On Monday it snowed, on Tuesday the sun came out and melted everything';

const engines = [];
after(() => Promise.all(engines.map((e) => e.free())));
async function engine(threads) {
  const e = await createEngine({ threads });
  engines.push(e);
  await e.threadsReady;
  return e;
}
const one = await engine(1), two = await engine(2);

for (const [arch, shape] of [['qwen3moe', 'tiny'], ['lfm2moe', 'tiny'], ['gpt-oss', 'tiny'], ['gemma4', 'tiny-moe']]) {
  const file = synthCached({ arch, shape });
  const s = resolveShape(arch, shape);

  test(`${arch}: info counts the experts; a token reads k of them`, async () => {
    const info = await one.load({ model: file, nCtx: 256 });
    assert.equal(info.architecture, arch);
    assert.equal(info.nExpert, s.E);
    assert.equal(info.nExpertUsed, s.K);
    assert.equal(info.backend, 'cpu');
    // the expert matrices are most of the file; a token reads K / E of them
    const experts = s.L * 3 * s.D * s.Fe * s.E * 4 * (arch === 'lfm2moe' ? (s.L - s.dense) / s.L : 1);
    assert.ok(info.weightBytes < fs.statSync(file).size - experts * (1 - s.K / s.E) + 1e6,
      `weightBytes ${info.weightBytes} counts more than ${s.K} of ${s.E} experts`);
  });

  test(`${arch}: one batch equals one token at a time, and 2 threads equal 1, bit for bit`, async () => {
    await one.load({ model: file, nCtx: 256 });
    await two.load({ model: file, nCtx: 256 });
    const ids = await one.tokenize(PROMPT);
    assert.ok(ids.length >= 20, `${ids.length} prompt tokens`);
    const batched = Float32Array.from(await one.evalTokens(ids));
    await one.reset();
    let last = null;
    for (const id of ids) last = Float32Array.from(await one.evalTokens([id]));
    assert.deepEqual(Buffer.from(last.buffer), Buffer.from(batched.buffer), 'batched prefill differs from one by one');
    await one.reset();
    const threaded = Float32Array.from(await two.evalTokens(ids));
    assert.deepEqual(Buffer.from(threaded.buffer), Buffer.from(batched.buffer), '2 threads differ from 1');
    const g1 = await one.complete(PROMPT, { temperature: 0, maxTokens: 12 });
    const g2 = await two.complete(PROMPT, { temperature: 0, maxTokens: 12 });
    assert.equal(g2.text, g1.text);
  });

}

test('gemma4: fused ffn_gate_up_exps and separate ffn_gate_exps + ffn_up_exps give the same bits', async () => {
  const ids = [];
  const logits = [];
  for (const shape of ['tiny-moe', 'tiny-moe-split']) {
    await one.load({ model: synthCached({ arch: 'gemma4', shape }), nCtx: 256 });
    if (!ids.length) ids.push(...await one.tokenize(PROMPT));
    logits.push(Buffer.from(Float32Array.from(await one.evalTokens(ids)).buffer));
  }
  assert.deepEqual(logits[1], logits[0]);
});
