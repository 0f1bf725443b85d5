// batch.test.mjs — generateBatch(): several prompts or n samples of one prompt decoded
// together give exactly what generate() gives for each; sequences end independently with one
// end item each; the context grows its sequence count when needed; abort, break and errors.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { WasmlmError } from '../../js/wasmlm.js';
import { MODEL, TOKENIZER, collect, loadedEngine, tokenSummary } from './_helpers.mjs';

const engine = await loadedEngine();

/** Items of a batch grouped by sequence. */
function bySeq(items, n) {
  const out = Array.from({ length: n }, () => []);
  for (const it of items) out[it.seq].push(it);
  return out;
}

/** Checks the per-sequence shape of a batch's items against lastBatchResult. */
function checkShape(items, result) {
  const groups = bySeq(items, result.sequences.length);
  groups.forEach((g, i) => {
    const ends = g.filter((t) => t.stopReason !== null);
    assert.equal(ends.length, 1, `sequence ${i} has one end item`);
    assert.equal(g.at(-1), ends[0], `sequence ${i}'s end item is its last`);
    assert.equal(ends[0].id, -1);
    assert.equal(ends[0].stopReason, result.sequences[i].stopReason);
    assert.equal(g.map((t) => t.text).join(''), result.sequences[i].text);
    assert.equal(g.length - 1, result.sequences[i].nGenerated);
  });
  assert.equal(result.nGenerated, result.sequences.reduce((a, s) => a + s.nGenerated, 0));
  return groups;
}

test('3 prompts at temperature 0 equal three generate() calls, token for token', async () => {
  const prompts = ['Once upon a time', 'The dog', ''];
  const params = { temperature: 0, maxTokens: 80, nProbs: 3 };
  const items = await collect(engine.generateBatch(prompts, params));
  const r = engine.lastBatchResult;
  assert.equal(r.sequences.length, 3);
  const groups = checkShape(items, r);
  for (let i = 0; i < 3; i++) {
    const single = await collect(engine.generate(prompts[i], params));
    const tokens = groups[i].filter((t) => t.id >= 0);
    assert.deepEqual(tokenSummary(tokens), tokenSummary(single.filter((t) => t.id >= 0)), `prompt ${i}`);
    assert.deepEqual(tokens.map((t) => t.top), single.filter((t) => t.id >= 0).map((t) => t.top));
    assert.equal(r.sequences[i].text, engine.lastResult.text);
    assert.equal(r.sequences[i].stopReason, engine.lastResult.stopReason);
    assert.equal(r.sequences[i].nPrompt, engine.lastResult.nPrompt);
    assert.ok(Math.abs(r.sequences[i].logprob - engine.lastResult.logprob) < 1e-6 * Math.abs(r.sequences[i].logprob));
    assert.equal(r.sequences[i].promptIndex, i);
  }
  let nPrompt = 0;
  for (const p of prompts) nPrompt += (await engine.tokenize(p)).length;
  assert.equal(r.nPrompt, nPrompt);
  assert.ok(r.steps >= 80 && r.decodeMs > 0 && r.decodeTokensPerSec > 0);
  // Items of one step come in sequence order.
  assert.deepEqual(items.slice(0, 3).map((t) => t.seq), [0, 1, 2]);
});

test('nSamples 3 with a seed equals generate() with seeds seed, seed+1, seed+2', async () => {
  const params = { temperature: 0.9, topP: 0.9, seed: 1234, maxTokens: 60 };
  const items = await collect(engine.generateBatch('Once upon a time', { ...params, nSamples: 3 }));
  const r = engine.lastBatchResult;
  const groups = checkShape(items, r);
  assert.deepEqual(r.sequences.map((s) => [s.promptIndex, s.sample, s.seed]), [[0, 0, 1234], [0, 1, 1235], [0, 2, 1236]]);
  assert.equal(r.nPrompt, 5, 'one prefill for the three samples');
  const texts = new Set();
  for (let i = 0; i < 3; i++) {
    const single = await collect(engine.generate('Once upon a time', { ...params, seed: 1234 + i }));
    assert.deepEqual(tokenSummary(groups[i].filter((t) => t.id >= 0)), tokenSummary(single.filter((t) => t.id >= 0)));
    texts.add(r.sequences[i].text);
  }
  assert.equal(texts.size, 3, 'different seeds give different samples');
});

test('per-prompt parameters: each sequence stops on its own', async () => {
  const prompts = ['Once upon a time', 'The cat', 'Lily'];
  const params = [
    { temperature: 0, maxTokens: 5 },
    { temperature: 0, maxTokens: 40, nSamples: 2, seed: 3 },
    { temperature: 0, maxTokens: 200, stop: ['.'] },
  ];
  const items = await collect(engine.generateBatch(prompts, params));
  const r = engine.lastBatchResult;
  assert.equal(r.sequences.length, 4);
  assert.deepEqual(r.sequences.map((s) => s.promptIndex), [0, 1, 1, 2]);
  checkShape(items, r);
  assert.deepEqual(r.sequences.map((s) => s.stopReason), ['max_tokens', 'max_tokens', 'max_tokens', 'stop_string']);
  assert.deepEqual(r.sequences.slice(0, 3).map((s) => s.nGenerated), [5, 40, 40]);
  assert.equal(r.sequences[1].text, r.sequences[2].text, 'greedy samples agree');
  assert.ok(!r.sequences[3].text.includes('.'));
  // Sequence 0 ended while the others went on.
  const end0 = items.findIndex((t) => t.seq === 0 && t.stopReason);
  assert.ok(items.slice(end0 + 1).some((t) => t.seq === 1 && t.id >= 0));
  for (let i = 0; i < 4; i++) {
    const s = r.sequences[i];
    const single = await engine.complete(prompts[s.promptIndex], { ...params[s.promptIndex], nSamples: undefined });
    assert.equal(s.text, single.text, `sequence ${i}`);
  }
});

test('the context gets more sequences when a batch needs them, and keeps them', async () => {
  const e = await loadedEngine();
  assert.equal((await e.kvStats()).nSeqMax, 1);
  const r = await e.completeBatch(['a', 'b', 'c'], { temperature: 0, maxTokens: 4 });
  assert.equal(r.sequences.length, 3);
  assert.equal((await e.kvStats()).nSeqMax, 3);
  await e.completeBatch(['a', 'b'], { temperature: 0, maxTokens: 4 });
  assert.equal((await e.kvStats()).nSeqMax, 3);
  const s = await e.kvStats();
  assert.ok(s.blockBytes > 0 && s.blocksAllocated >= s.blocksUsed && s.contextBytes > 0 && s.nCtx === 512);
  // A 16-sequence batch: 16 samples of one prompt share its prefix blocks.
  const big = await e.completeBatch('Once upon a time', { nSamples: 16, seed: 1, maxTokens: 10 });
  assert.equal(big.sequences.length, 16);
  assert.equal((await e.kvStats()).nSeqMax, 16);
  // And single generation still works on the bigger context.
  const g = await e.complete('Once upon a time', { temperature: 0, maxTokens: 10 });
  assert.equal(g.nGenerated, 10);
  await e.free();
});

test('load({nSeqMax}) sizes the context up front; C checks the range', async () => {
  const e = await loadedEngine({}, { nSeqMax: 4 });
  assert.equal((await e.kvStats()).nSeqMax, 4);
  await assert.rejects(e.load({ model: MODEL, tokenizer: TOKENIZER, nSeqMax: 0 }),
  (err) => err instanceof WasmlmError && err.code === 'WLM_ERR_INVALID_ARG' && /\bnSeqMax\b/.test(err.message));
  await assert.rejects(e.load({ model: 'x', nSeqMax: 1.5 }), /nSeqMax must be an integer/);
  await e.free();
});

test('abort during a batch: AbortError, every unfinished sequence \'aborted\', then usable', async () => {
  const controller = new AbortController();
  let n = 0;
  await assert.rejects(async () => {
    for await (const t of engine.generateBatch(['Once upon a time', 'The dog'],
      { temperature: 0, maxTokens: 0 }, { signal: controller.signal })) {
      if (t.id >= 0 && ++n === 7) controller.abort();
    }
  }, (e) => e instanceof DOMException && e.name === 'AbortError');
  const r = engine.lastBatchResult;
  assert.deepEqual(r.sequences.map((s) => s.stopReason), ['aborted', 'aborted']);
  assert.ok(r.nGenerated >= 7 && r.nGenerated <= 8, `${r.nGenerated}`);
  const ok = await engine.completeBatch(['x', 'y'], { temperature: 0, maxTokens: 5 });
  assert.deepEqual(ok.sequences.map((s) => s.nGenerated), [5, 5]);
});

test('breaking out of a batch ends it; the engine is busy meanwhile', async () => {
  const it = engine.generateBatch(['Once upon a time', 'The dog'], { temperature: 0, maxTokens: 50 });
  await it.next();
  await assert.rejects(engine.complete('x', { maxTokens: 2 }), { code: 'WLM_ERR_STATE', message: /batch generation/ });
  await assert.rejects(engine.beamSearch('x'), { code: 'WLM_ERR_STATE' });
  assert.ok((await engine.kvStats()).blocksUsed > 0, 'kvStats works during a batch');
  await it.return();
  assert.ok(engine.lastBatchResult.sequences.every((s) => s.stopReason === 'aborted'));
  const r = await engine.complete('Once upon a time', { temperature: 0, maxTokens: 5 });
  assert.equal(r.nGenerated, 5);
});

test('batch errors: C names the sequence; JS checks shapes', async () => {
  await assert.rejects(engine.completeBatch(['a', 'b'], [{ maxTokens: 3 }, { topP: 2 }]), (e) =>
    e instanceof WasmlmError && e.code === 'WLM_ERR_INVALID_ARG' && /sequence 1/.test(e.message) && /\btopP\b/.test(e.message));
  await assert.rejects(engine.completeBatch(['a', 'b'], [{}]), { code: 'WLM_ERR_INVALID_ARG', message: /2 prompts but 1/ });
  await assert.rejects(engine.completeBatch([], {}), { code: 'WLM_ERR_INVALID_ARG', message: /no prompts/ });
  await assert.rejects(engine.completeBatch('a', { nSamples: 65 }), { code: 'WLM_ERR_INVALID_ARG', message: /at most 64/ });
  await assert.rejects(engine.completeBatch('a', { nSamples: 0 }), { code: 'WLM_ERR_INVALID_ARG', message: /nSamples/ });
  await assert.rejects(engine.completeBatch('a', { bogus: 1 }), { code: 'WLM_ERR_INVALID_ARG', message: /bogus/ });
  await assert.rejects(engine.completeBatch(['', 'a'], { addBos: false }), (e) =>
    e.code === 'WLM_ERR_INVALID_ARG' && /sequence 0/.test(e.message));
  const r = await engine.completeBatch(['a', 'b'], { temperature: 0, maxTokens: 3 });
  assert.equal(r.nGenerated, 6);
});

test('a batch without KV cache is refused', async () => {
  const e = await loadedEngine({}, { kvCache: false });
  await assert.rejects(e.completeBatch(['a', 'b'], { maxTokens: 3 }), { code: 'WLM_ERR_STATE' });
  await e.free();
});

test('parseSpecial: a batch reads control tokens in its prompts as generate() does', async () => {
  const { createEngine } = await import('../../js/wasmlm.js');
  const { toolModel } = await import('./_tool_models.mjs');
  const e = await createEngine({ threads: 1 });
  try {
    await e.load({ model: toolModel('qwen3'), nSeqMax: 2 });
    const prompts = ['<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n', '<|im_start|>user\nWhat is 6*7?<|im_end|>\n'];
    const params = { maxTokens: 6, temperature: 0, parseSpecial: true, addBos: false };
    const alone = [];
    for (const p of prompts) alone.push((await collect(e.generate(p, params))).map((t) => t.id));
    const batch = await collect(e.generateBatch(prompts, params));
    const ids = prompts.map((_, i) => batch.filter((t) => t.seq === i && !t.stopReason).map((t) => t.id));
    assert.deepEqual(ids, alone);
    assert.equal(e.lastBatchResult.sequences[0].nPrompt, (await e.tokenize(prompts[0], { bos: false, parseSpecial: true })).length);
  } finally {
    await e.free();
  }
});
