// warmup.test.mjs — the start-up warm-up (Engine.warmUp, wlmjs_warmup; a worker engine created
// with warmup: true runs it after 'init'): it generates on its built-in model, and it changes
// nothing a caller sees: the same greedy text and probabilities as an engine that never warmed
// up, a loaded model left intact.
// Whether it shortens the time to the first token is measured by bench/ttft.mjs, not here.

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { createEngine, createWorkerEngine } from '../../js/wasmlm.js';
import { MODEL, TOKENIZER, collect, webWorkerLike } from './_helpers.mjs';

const PARAMS = { temperature: 0, maxTokens: 40, nProbs: 5 };
const run = async (engine) => {
  const tokens = await collect(engine.generate('Once upon a time', PARAMS));
  return tokens.map((t) => [t.id, t.text, t.top.map((a) => [a.id, a.prob])]);
};

const cold = await createEngine({ threads: 1 });
await cold.load({ model: MODEL, tokenizer: TOKENIZER });
const expected = await run(cold);
after(() => cold.free());

test('warmUp() generates two tokens on its built-in model and changes no output', async () => {
  const engine = await createEngine({ threads: 1 });
  try {
    const w = await engine.warmUp();
    assert.equal(w.tokens, 2);
    assert.ok(w.ms >= 0);
    assert.equal(engine.info, null, 'no model is loaded by it');
    await engine.load({ model: MODEL, tokenizer: TOKENIZER });
    assert.deepEqual(await run(engine), expected);
    // Again with a model loaded: the model, its context and lastResult stay as they were.
    const last = engine.lastResult;
    assert.equal((await engine.warmUp()).tokens, 2);
    assert.equal(engine.lastResult, last);
    assert.deepEqual(await run(engine), expected);
  } finally {
    await engine.free();
  }
});

test('the worker warms up after init with warmup: true (engine.warmup), not by default', async () => {
  const warm = await createWorkerEngine({ worker: await webWorkerLike(), warmup: true });
  const plain = await createWorkerEngine({ worker: await webWorkerLike() });
  try {
    for (const e of [warm, plain]) await e.load({ model: MODEL, tokenizer: TOKENIZER });
    assert.equal(warm.warmup?.tokens, 2, JSON.stringify(warm.warmup));
    assert.equal(plain.warmup, null);
    assert.deepEqual(await run(warm), expected);
    assert.deepEqual(await run(plain), expected);
  } finally {
    await warm.free();
    await plain.free();
  }
});
