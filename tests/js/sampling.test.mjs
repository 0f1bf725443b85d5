// sampling.test.mjs — seeded sampling is reproducible, stop strings end a generation without
// emitting the stop string, and the SIMD and scalar modules agree.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { collect, loadedEngine, referenceText } from './_helpers.mjs';

const engine = await loadedEngine();
const GREEDY = referenceText('stories260K_run.c_greedy_OnceUponATime_404.txt')
  .slice('Once upon a time'.length); // what greedy generation adds after the prompt

test('same seed gives the same text; different seeds differ', async () => {
  const params = { temperature: 0.8, topP: 0.9, maxTokens: 120 };
  const a = await engine.complete('Once upon a time', { ...params, seed: 42 });
  const b = await engine.complete('Once upon a time', { ...params, seed: 42 });
  const c = await engine.complete('Once upon a time', { ...params, seed: 43 });
  const d = await engine.complete('Once upon a time', { ...params, seed: 7 });
  assert.ok(a.text.length > 50);
  assert.equal(a.text, b.text);
  assert.notEqual(a.text, c.text);
  assert.notEqual(c.text, d.text);
  // Sampling at 0.8 really samples: it leaves the greedy path somewhere.
  assert.ok(![a.text, c.text, d.text].every((t) => GREEDY.startsWith(t)));
});

test('sampled tokens report probabilities from the filtered distribution', async () => {
  const tokens = await collect(engine.generate('Once upon a time',
    { temperature: 0.8, topP: 0.9, seed: 5, maxTokens: 60 }));
  assert.equal(tokens.length, 60);
  for (const t of tokens) {
    assert.ok(t.prob > 0 && t.prob <= 1, `prob ${t.prob}`);
    assert.ok(t.probSampled > 0 && t.probSampled <= 1, `probSampled ${t.probSampled}`);
  }
  assert.ok(tokens.some((t) => t.probSampled < 1));
});

test('without a seed, two runs differ (a random seed is chosen)', async () => {
  const params = { temperature: 1.0, topP: 1.0, maxTokens: 80 };
  const a = await engine.complete('Once upon a time', params);
  const b = await engine.complete('Once upon a time', params);
  assert.notEqual(a.text, b.text);
});

for (const stop of ['Lily', ' park']) {
  test(`stop string ${JSON.stringify(stop)} ends the generation before it`, async () => {
    const tokens = await collect(engine.generate('Once upon a time',
      { temperature: 0, maxTokens: 200, stop: [stop] }));
    const r = engine.lastResult;
    assert.equal(r.stopReason, 'stop_string');
    assert.ok(!r.text.includes(stop), r.text);
    assert.equal(r.text, GREEDY.slice(0, GREEDY.indexOf(stop)));
    assert.equal(tokens.map((t) => t.text).join(''), r.text, 'streamed text equals the result');
  });
}

test('a stop string that never completes releases the held-back text at the end', async () => {
  // The text's last characters begin the stop string, so the engine holds them back; the
  // generation then ends at maxTokens and the held text must still come out (as a final item
  // with id -1, since no token carries it).
  const plain = await engine.complete('Once upon a time', { temperature: 0, maxTokens: 40 });
  const tail = plain.text.slice(-4);
  const tokens = await collect(engine.generate('Once upon a time',
    { temperature: 0, maxTokens: 40, stop: [`${tail}#`] }));
  assert.equal(engine.lastResult.stopReason, 'max_tokens');
  assert.equal(engine.lastResult.text, plain.text);
  assert.equal(engine.lastResult.nGenerated, 40);
  assert.equal(tokens.map((t) => t.text).join(''), plain.text);
  const last = tokens.at(-1);
  assert.equal(last.id, -1);
  assert.ok(last.text.length > 0 && tail.endsWith(last.text), JSON.stringify(last.text));
  assert.equal(tokens.filter((t) => t.id >= 0).length, 40);
});

test('SIMD and scalar modules give the same greedy text over 200 tokens', async () => {
  const scalar = await loadedEngine({ simd: false });
  assert.equal(scalar.info.simd, false);
  assert.equal(engine.info.simd, true);
  const params = { temperature: 0, maxTokens: 200 };
  for (const prompt of ['', 'Once upon a time', 'The dog']) {
    const a = await engine.complete(prompt, params);
    const b = await scalar.complete(prompt, params);
    assert.ok(a.nGenerated > 100, `${prompt}: ${a.nGenerated} tokens`);
    assert.equal(a.text, b.text, `prompt ${JSON.stringify(prompt)}`);
    assert.equal(a.stopReason, b.stopReason);
  }
  // Not vacuous: the scalar engine also reproduces run.c.
  const s = await scalar.complete('Once upon a time', { temperature: 0, maxTokens: 404 });
  assert.equal(s.text, GREEDY);
  await scalar.free();
});
