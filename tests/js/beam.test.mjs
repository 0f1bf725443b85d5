// beam.test.mjs — beamSearch(): width 1 is greedy, width 4 finds a sequence at least as
// probable as greedy's, the SIMD and scalar modules agree, beams share their KV cache prefix,
// abort between steps, parameter errors.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { WasmlmError } from '../../js/wasmlm.js';
import { collect, loadedEngine } from './_helpers.mjs';

const engine = await loadedEngine();
const PROMPTS = ['Once upon a time', 'The dog', ''];

test('width 1 equals greedy decoding (tokens, text, log-probability)', async () => {
  for (const prompt of PROMPTS) {
    const greedy = await collect(engine.generate(prompt, { temperature: 0, maxTokens: 60 }));
    const g = engine.lastResult;
    const r = await engine.beamSearch(prompt, { width: 1, maxTokens: 60 });
    assert.equal(r.beams.length, 1);
    const [b] = r.beams;
    assert.deepEqual([...b.tokens], greedy.filter((t) => t.id >= 0).map((t) => t.id), prompt);
    assert.equal(b.text, g.text);
    assert.equal(b.stopReason, g.stopReason === 'eos' ? 'eos' : 'max_tokens');
    if (b.stopReason === 'max_tokens') {
      assert.ok(Math.abs(b.logprob - g.logprob) < 1e-3, `${b.logprob} vs ${g.logprob}`);
      assert.ok(Math.abs(b.score - b.logprob / b.tokens.length) < 1e-4);
    }
  }
});

test('width 4: the best beam is at least as probable as greedy; shapes and ordering', async () => {
  for (const prompt of PROMPTS) {
    const g = await engine.complete(prompt, { temperature: 0, maxTokens: 64 });
    const r = await engine.beamSearch(prompt, { width: 4, maxTokens: 64, lengthPenalty: 0 });
    assert.ok(r.beams.length >= 1 && r.beams.length <= 4);
    const best = Math.max(...r.beams.map((b) => b.logprob));
    assert.ok(best >= g.logprob - 1e-4, `${prompt}: beam ${best} < greedy ${g.logprob}`);
    assert.equal(r.beams[0].logprob, best, 'lengthPenalty 0 ranks by log-probability');
    for (let i = 1; i < r.beams.length; i++) assert.ok(r.beams[i - 1].score >= r.beams[i].score);
    for (const b of r.beams) {
      assert.ok(b.tokens instanceof Int32Array && b.tokens.length <= 64);
      const promptIds = await engine.tokenize(prompt);
      const full = await engine.detokenize([...promptIds, ...b.tokens]);
      assert.equal(b.text, full.slice((await engine.detokenize(promptIds)).length));
      assert.ok(['eos', 'max_tokens'].includes(b.stopReason));
      assert.ok(Math.abs(b.score - b.logprob) < 1e-6);
    }
    assert.equal(r.width, 4);
    assert.equal(r.nPrompt, (await engine.tokenize(prompt)).length);
    assert.ok(r.steps >= 1 && r.ms >= 0 && r.aborted === false);
  }
});

test('length penalty: score = logprob / len^alpha', async () => {
  const r = await engine.beamSearch('Once upon a time', { width: 3, maxTokens: 20, lengthPenalty: 0.5 });
  for (const b of r.beams) {
    const len = b.tokens.length + (b.stopReason === 'eos' ? 1 : 0);
    assert.ok(Math.abs(b.score - b.logprob / len ** 0.5) < 1e-4, `${b.score} ${b.logprob} ${len}`);
  }
});

test('beams share their prefix: kvBytes < kvBytesUnshared', async () => {
  const steps = [];
  const r = await engine.beamSearch('Once upon a time', { width: 4, maxTokens: 48 },
    { onStep: (s) => steps.push(s) });
  assert.ok(r.kvBytes > 0);
  assert.ok(r.kvBytes < r.kvBytesUnshared, `${r.kvBytes} vs ${r.kvBytesUnshared}`);
  assert.equal(r.kvBytesPerBeam, r.kvBytes / 4);
  assert.equal(steps.length, r.steps - 1, 'onStep after every step but the last');
  steps.forEach((s, i) => {
    assert.equal(s.step, i + 1);
    assert.ok(s.kvBytes > 0 && s.kvBytes <= s.kvBytesUnshared && s.kvBytes <= r.kvBytes);
  });
  const stats = await engine.kvStats();
  assert.ok(stats.nSeqMax >= 8, 'the context was recreated with 2 × width sequences');
});

test('SIMD and scalar modules give the same beams', async () => {
  // F32 caches: with F16 ones, the two kernels' last-bit differences are rounded to f16 and the
  // summed log-probabilities drift past 1e-3 (the beams stay the same).
  const scalar = await loadedEngine({ simd: false }, { kvType: 'f32' });
  const simd = await loadedEngine({}, { kvType: 'f32' });
  for (const prompt of ['Once upon a time', 'The dog']) {
    const a = await simd.beamSearch(prompt, { width: 4, maxTokens: 40 });
    const b = await scalar.beamSearch(prompt, { width: 4, maxTokens: 40 });
    assert.deepEqual(a.beams.map((x) => [x.text, [...x.tokens], x.stopReason]),
      b.beams.map((x) => [x.text, [...x.tokens], x.stopReason]));
    a.beams.forEach((x, i) => assert.ok(Math.abs(x.logprob - b.beams[i].logprob) < 1e-3));
    assert.equal(a.kvBytes, b.kvBytes);
  }
  await scalar.free();
  await simd.free();
});

test('abort between steps: AbortError, the beams so far in lastBeamResult, then usable', async () => {
  const controller = new AbortController();
  let seen = 0;
  await assert.rejects(engine.beamSearch('Once upon a time', { width: 2, maxTokens: 200 }, {
    signal: controller.signal,
    onStep: ({ step }) => { seen = step; if (step === 3) controller.abort(); },
  }), (e) => e instanceof DOMException && e.name === 'AbortError');
  assert.equal(seen, 3);
  const r = engine.lastBeamResult;
  assert.equal(r.aborted, true);
  assert.ok(r.beams.length >= 1);
  assert.ok(r.beams.some((b) => b.stopReason === 'aborted'));
  for (const b of r.beams.filter((x) => x.stopReason === 'aborted')) assert.equal(b.tokens.length, 3);
  const pre = new AbortController();
  pre.abort();
  await assert.rejects(engine.beamSearch('x', {}, { signal: pre.signal }), { name: 'AbortError' });
  const ok = await engine.beamSearch('Once upon a time', { width: 2, maxTokens: 5 });
  assert.equal(ok.beams[0].tokens.length, 5);
});

test('a generation is refused during a beam search (WLM_ERR_STATE)', async () => {
  const p = engine.beamSearch('Once upon a time', { width: 4, maxTokens: 30 });
  await assert.rejects(engine.complete('x', { maxTokens: 2 }), { code: 'WLM_ERR_STATE', message: /beam search/ });
  await p;
});

const BAD = [
  [{ width: 0 }, /width/],
  [{ width: 33 }, /width/],
  [{ width: 1.5 }, /width must be an integer/],
  [{ maxTokens: 0 }, /\bmaxTokens\b/],
  [{ maxTokens: NaN }, /maxTokens must be an integer/],
  [{ lengthPenalty: -1 }, /\blengthPenalty\b/],
  [{ lengthPenalty: NaN }, /\blengthPenalty\b/],
  [{ lengthPenalty: '1' }, /lengthPenalty must be a number/],
  [{ temperature: 0 }, /beamSearch\(\): unknown option "temperature" \(known: width, /],
];
for (const [params, message] of BAD) {
  test(`beamSearch rejects ${JSON.stringify(params, (k, v) => (Number.isNaN(v) ? 'NaN' : v))}`, async () => {
    await assert.rejects(engine.beamSearch('Once', params), (e) => {
      assert.ok(e instanceof WasmlmError, String(e));
      assert.equal(e.code, 'WLM_ERR_INVALID_ARG');
      assert.match(e.message, message);
      return true;
    });
  });
}

test('beam search edge cases: empty prompt without BOS, no KV cache', async () => {
  await assert.rejects(engine.beamSearch('', { addBos: false }), { code: 'WLM_ERR_INVALID_ARG' });
  const e = await loadedEngine({}, { kvCache: false });
  await assert.rejects(e.beamSearch('Once', { width: 2 }), { code: 'WLM_ERR_STATE' });
  await e.free();
});
