// context_shift.test.mjs — a generation that fills the context window: with contextShift it
// keeps going (the first nKeep tokens stay, half of the rest is dropped, the cache stays
// valid), without it it stops with 'context_full'. EOS and BOS are banned so that only the
// context (or maxTokens) can end the generation.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { collect, loadedEngine } from './_helpers.mjs';

const N_CTX = 64;
const engine = await loadedEngine({}, { nCtx: N_CTX });
const NO_END = { bannedTokens: [1, 2] }; // tok512: BOS 1, EOS 2

test('without contextShift the generation stops with context_full', async () => {
  const tokens = await collect(engine.generate('Once upon a time',
    { temperature: 0, maxTokens: 150, ...NO_END }));
  const r = engine.lastResult;
  assert.equal(r.stopReason, 'context_full');
  assert.ok(r.nPrompt + r.nGenerated >= N_CTX && r.nPrompt + r.nGenerated <= N_CTX + 1,
    `${r.nPrompt} + ${r.nGenerated}`);
  assert.ok(tokens.every((t) => t.nPast <= N_CTX + 1));
});

test('with contextShift, 150 tokens in a 64-token context', async () => {
  const plain = await collect(engine.generate('Once upon a time', { temperature: 0, maxTokens: 150, ...NO_END }));
  for (const nKeep of [0, 1, 5]) {
    const tokens = await collect(engine.generate('Once upon a time',
      { temperature: 0, maxTokens: 150, contextShift: true, nKeep, ...NO_END }));
    const r = engine.lastResult;
    assert.equal(r.stopReason, 'max_tokens', `nKeep ${nKeep}`);
    assert.equal(r.nGenerated, 150);
    assert.ok(tokens.every((t) => t.nPast <= N_CTX + 1));
    const shifts = tokens.filter((t, i) => i > 0 && t.nPast < tokens[i - 1].nPast);
    assert.ok(shifts.length >= 2, `the context shifted (${shifts.length} times)`);
    // Until the first shift the tokens are those of the plain run.
    const firstShift = tokens.indexOf(shifts[0]);
    assert.deepEqual(tokens.slice(0, firstShift).map((t) => t.id),
      plain.slice(0, firstShift).map((t) => t.id));
    // The text goes on being produced (not a single repeated token).
    assert.ok(new Set(tokens.slice(firstShift).map((t) => t.id)).size > 5);
  }
});

test('contextShift with sampling, and in a batch', async () => {
  const r = await engine.complete('', { temperature: 1, seed: 4, maxTokens: 150, contextShift: true, nKeep: 1, ...NO_END });
  assert.equal(r.nGenerated, 150);
  const b = await engine.completeBatch(['Once upon a time', 'The dog'],
    [{ temperature: 0, maxTokens: 120, contextShift: true, nKeep: 1, ...NO_END },
      { temperature: 0, maxTokens: 120, ...NO_END }]);
  assert.deepEqual(b.sequences.map((s) => s.stopReason), ['max_tokens', 'context_full']);
  assert.equal(b.sequences[0].nGenerated, 120);
  const single = await engine.complete('Once upon a time', { temperature: 0, maxTokens: 120, contextShift: true, nKeep: 1, ...NO_END });
  assert.equal(b.sequences[0].text, single.text);
});

test('a context shift needs the KV cache', async () => {
  const e = await loadedEngine({}, { nCtx: 32, kvCache: false });
  await assert.rejects(e.complete('Once', { contextShift: true, maxTokens: 40 }),
    { code: 'WLM_ERR_INVALID_ARG', message: /\bcontextShift\b/ });
  await e.free();
});
