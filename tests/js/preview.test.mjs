// preview.test.mjs — engine.previewDistribution() (wlm_sampler_preview): with the generation's
// own parameters it reproduces the last token's top alternatives; other parameters reshape the
// same logits without changing the generation; the worker engine gives what the in-thread one
// gives; before any generation it is a WLM_ERR_STATE.

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { createWorkerEngine, WasmlmError } from '../../js/wasmlm.js';
import { MODEL, TOKENIZER, collect, loadedEngine, webWorkerLike } from './_helpers.mjs';

const local = await loadedEngine();
const remote = await createWorkerEngine({ worker: await webWorkerLike() });
await remote.load({ model: MODEL, tokenizer: TOKENIZER });
after(() => Promise.all([remote.free(), local.free()]));

const PARAMS = { temperature: 0.8, topK: 40, topP: 0.9, minP: 0.02, repeatPenalty: 1.1,
  presencePenalty: 0.2, frequencyPenalty: 0.1, nProbs: 10, seed: 7, maxTokens: 24 };
const sum = (top, key) => top.reduce((a, t) => a + t[key], 0);

test('before any generation: WLM_ERR_STATE, in-thread and in the worker', async () => {
  const fresh = await loadedEngine();
  try {
    await assert.rejects(fresh.previewDistribution(PARAMS),
      (e) => e instanceof WasmlmError && e.code === 'WLM_ERR_STATE');
    await collect(fresh.generate('Once', { ...PARAMS, maxTokens: 2 }));
    await fresh.previewDistribution(PARAMS); // fine now
    await fresh.reset();
    await assert.rejects(fresh.previewDistribution(PARAMS), { code: 'WLM_ERR_STATE' });
  } finally {
    await fresh.free();
  }
  const w = await createWorkerEngine({ worker: await webWorkerLike() });
  try {
    await w.load({ model: MODEL, tokenizer: TOKENIZER });
    await assert.rejects(w.previewDistribution({}),
      (e) => e instanceof WasmlmError && e.code === 'WLM_ERR_STATE');
  } finally {
    await w.free();
  }
});

test('with the generation\'s parameters it equals the last token\'s top list', async () => {
  const tokens = (await collect(local.generate('Once upon a time', PARAMS))).filter((t) => t.id >= 0);
  const last = tokens.at(-1);
  assert.equal(last.top.length, 10);
  const p = await local.previewDistribution(PARAMS);
  assert.deepEqual(p.top, last.top);
  // One draw with params.seed (a fresh RNG, not the generation's): some surviving candidate.
  assert.ok(Number.isInteger(p.id) && p.probSampled > 0 && p.prob > 0);
  // nProbs defaults to 10.
  const { nProbs, ...noN } = PARAMS;
  assert.equal(nProbs, 10);
  assert.deepEqual((await local.previewDistribution(noN)).top, last.top);
  // The preview does not disturb the engine: a second preview gives the same.
  assert.deepEqual((await local.previewDistribution(PARAMS)).top, last.top);
});

test('temperature 2 flattens: top-1 probSampled lower, prob unchanged, sums <= 1', async () => {
  await collect(local.generate('Once upon a time', PARAMS));
  const base = await local.previewDistribution(PARAMS);
  const hot = await local.previewDistribution({ ...PARAMS, temperature: 2, topK: 0, topP: 1, minP: 0 });
  assert.equal(hot.top[0].id, base.top[0].id);
  assert.ok(hot.top[0].probSampled < base.top[0].probSampled,
    `${hot.top[0].probSampled} < ${base.top[0].probSampled}`);
  const before = new Map(base.top.map((t) => [t.id, t.prob])); // prob is before the filters
  for (const t of hot.top) if (before.has(t.id)) assert.equal(t.prob, before.get(t.id));
  for (const r of [base, hot]) {
    assert.ok(sum(r.top, 'probSampled') <= 1 + 1e-5);
    assert.ok(sum(r.top, 'prob') <= 1 + 1e-5);
  }
  // Greedy: everything on the first candidate.
  const greedy = await local.previewDistribution({ ...PARAMS, temperature: 0 });
  assert.equal(greedy.top[0].probSampled, 1);
  await assert.rejects(local.previewDistribution({ ...PARAMS, temperature: -1 }), { code: 'WLM_ERR_INVALID_ARG' });
  await assert.rejects(local.previewDistribution({ nope: 1 }), { code: 'WLM_ERR_INVALID_ARG' });
});

test('allowed between the tokens of a running generation; refused during a beam search', async () => {
  let n = 0;
  for await (const t of local.generate('The dog', { ...PARAMS, maxTokens: 5 })) {
    if (t.id < 0) continue;
    const p = await local.previewDistribution(PARAMS);
    assert.deepEqual(p.top, t.top);
    n++;
  }
  assert.ok(n > 0);
  const beam = local.beamSearch('The dog', { width: 2, maxTokens: 4 });
  await assert.rejects(local.previewDistribution(PARAMS), { code: 'WLM_ERR_STATE' });
  await beam;
  await assert.rejects(local.previewDistribution(PARAMS), { code: 'WLM_ERR_STATE' });
});

test('worker engine equals the in-thread engine', async () => {
  const a = await collect(remote.generate('Once upon a time', PARAMS));
  const b = await collect(local.generate('Once upon a time', PARAMS));
  assert.deepEqual(a, b);
  for (const params of [PARAMS, { ...PARAMS, temperature: 2 }, { ...PARAMS, topK: 3, nProbs: 5 }]) {
    assert.deepEqual(await remote.previewDistribution(params), await local.previewDistribution(params));
  }
  assert.deepEqual((await remote.previewDistribution(PARAMS)).top, a.filter((t) => t.id >= 0).at(-1).top);
});
