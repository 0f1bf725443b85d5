// params.test.mjs — generation parameters: out-of-range values are rejected by the C side with
// WLM_ERR_INVALID_ARG and a message, JS-side mistakes (unknown names, wrong types, stop strings)
// are named, and a rejected call leaves the engine ready for the next one.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { assertRejectsParams, collect, loadedEngine, referenceText } from './_helpers.mjs';

const engine = await loadedEngine();
const GREEDY = referenceText('stories260K_run.c_greedy_OnceUponATime_404.txt')
  .slice('Once upon a time'.length);

const BAD = [
  [{ temperature: -1 }, /temperature/],
  [{ temperature: NaN }, /temperature/],
  [{ topP: 1.5 }, /\btopP\b/],
  [{ topP: 0 }, /\btopP\b/],
  [{ topP: NaN }, /\btopP\b/],
  [{ topK: -2 }, /\btopK\b/],
  [{ topK: NaN }, /\btopK\b/],
  [{ repeatPenalty: 0 }, /\brepeatPenalty\b/],
  [{ repeatLastN: -1 }, /\brepeatLastN\b/],
  [{ maxTokens: -5 }, /\bmaxTokens\b/],
  [{ top_p: 0.5 }, /unknown option "top_p" \(did you mean "topP"\?\)/],
  [{ temperature: '0.5' }, /temperature must be a number/],
  [{ seed: -1 }, /seed/],
  [{ seed: 1.5 }, /seed/],
  [{ stop: ['x'.repeat(64)] }, /64 bytes/],
  [{ stop: [''] }, /0 bytes/],
  [{ stop: Array(9).fill('a') }, /at most 8/],
];

for (const [params, message] of BAD) {
  test(`rejects ${JSON.stringify(params, (k, v) => (Number.isNaN(v) ? 'NaN' : v))}`, async () => {
    await assertRejectsParams(engine, 'Once upon a time', params, message);
  });
}

test('after rejected parameters the engine generates normally', async () => {
  for (const [params] of BAD) await assert.rejects(collect(engine.generate('x', params)));
  const r = await engine.complete('Once upon a time', { temperature: 0, maxTokens: 20 });
  assert.ok(GREEDY.startsWith(r.text) && r.nGenerated === 20);
});

test('boundary values are accepted', async () => {
  for (const params of [{ topP: 1 }, { topK: 1 }, { temperature: 0 }, { seed: 0 },
    { seed: 2 ** 53 - 1 }, { repeatPenalty: 1.3, repeatLastN: 0 }, { stop: ['x'.repeat(63)] },
    { stop: Array(8).fill('qq') }, { stop: 'single string' }, { maxTokens: 0, temperature: 0 }]) {
    const r = await engine.complete('Once upon a time', { maxTokens: 5, ...params });
    assert.ok(r.nGenerated >= 1, JSON.stringify(params));
  }
});

test('topK 1 is greedy whatever the temperature', async () => {
  const r = await engine.complete('Once upon a time', { temperature: 1.5, topK: 1, maxTokens: 60, seed: 9 });
  assert.ok(GREEDY.startsWith(r.text), r.text);
});

test('repeatPenalty changes the greedy text', async () => {
  const plain = await engine.complete('Once upon a time', { temperature: 0, maxTokens: 120 });
  const penal = await engine.complete('Once upon a time', { temperature: 0, maxTokens: 120, repeatPenalty: 1.5 });
  assert.notEqual(plain.text, penal.text);
});

test('an empty prompt needs addBos', async () => {
  const r = await engine.complete('', { temperature: 0, maxTokens: 10 });
  assert.equal(r.nPrompt, 1);
  assert.ok(r.text.startsWith('Once upon a time'));
  await assert.rejects(engine.complete('', { addBos: false }), { code: 'WLM_ERR_INVALID_ARG' });
});

test('addBos false changes the prompt tokens', async () => {
  const r = await engine.complete('Once upon a time', { temperature: 0, maxTokens: 3, addBos: false });
  assert.equal(r.nPrompt, 4);
});

test('defaults: maxTokens 256, and sampling as documented (temperature 1, topP 0.9, …)', async () => {
  const r = await engine.complete('', { temperature: 0 });
  assert.equal(r.stopReason, 'max_tokens');
  assert.equal(r.nGenerated, 256);
  const implicit = await engine.complete('Once upon a time', { seed: 11, maxTokens: 80 });
  const explicit = await engine.complete('Once upon a time', {
    seed: 11, maxTokens: 80, temperature: 1.0, topK: 0, topP: 0.9, repeatPenalty: 1.0,
    repeatLastN: 64, addBos: true, stop: [],
  });
  assert.equal(implicit.text, explicit.text);
  const other = await engine.complete('Once upon a time', { seed: 11, maxTokens: 80, topP: 0.5 });
  assert.notEqual(other.text, implicit.text, 'topP matters, so the comparison above means something');
});

test('a prompt with a NUL character is refused, not truncated', async () => {
  await assert.rejects(engine.complete('Once\u0000 upon', { maxTokens: 3 }),
    { code: 'WLM_ERR_INVALID_ARG', message: /NUL/ });
});
