// speculative.test.mjs — speculative decoding through the JS API (GenerateParams.draft,
// Engine.loadDraft, js/engine/speculative.js): greedy output identical to plain greedy decoding with
// a draft model (the same weights as GGUF: every draft accepted) and with prompt lookup, on one
// thread, two threads and the worker engine; lastResult's drafted / accepted; sampled output
// reproducible by seed; the refusals; the hybrids (qwen35, lfm2: a recurrent state rolled back
// after a rejection) with a draft model that disagrees at times. The exactness of sampled
// speculative decoding is proven in C (tests/c/test_speculative.c: chi-square on joint
// frequencies); both rollback strategies of a recurrent state in tests/c/test_hybrid.c.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { resolve } from 'node:path';
import { createWorkerEngine, WasmlmError } from '../../js/wasmlm.js';
import { MODEL, MODELS, TOKENIZER, collect, loadedEngine, webWorkerLike } from './_helpers.mjs';
import { createEngine } from '../../js/wasmlm.js';
import { synthCached } from '../../tools/synth_gguf.mjs';

const GGUF = resolve(MODELS, 'stories260K.gguf'); // the same weights, with the vocabulary inside
const COPY = 'Lily and Tom went to the park. Lily and Tom went to the park. Lily and';
const PROMPTS = ['Once upon a time', COPY, 'The cat sat on the mat. The dog'];

const engine = await loadedEngine();

async function ids(e, prompt, params) {
  const toks = await collect(e.generate(prompt, params));
  return { ids: toks.map((t) => t.id), text: toks.map((t) => t.text).join(''), result: e.lastResult };
}

test('prompt lookup: the tokens of plain greedy decoding, and lastResult counts', async () => {
  let drafted = 0;
  let accepted = 0;
  for (const prompt of PROMPTS) {
    for (const maxTokens of [1, 4, 16]) {
      const plain = await ids(engine, prompt, { temperature: 0, maxTokens: 120 });
      const spec = await ids(engine, prompt, { temperature: 0, maxTokens: 120, draft: { ngram: 3, maxTokens } });
      assert.deepEqual(spec.ids, plain.ids, `${prompt} k ${maxTokens}`);
      assert.equal(spec.text, plain.text);
      assert.equal(spec.result.stopReason, plain.result.stopReason);
      assert.equal(spec.result.nGenerated, plain.result.nGenerated);
      assert.ok(spec.result.accepted <= spec.result.drafted && spec.result.rounds >= 0);
      assert.equal(plain.result.drafted, undefined);
      drafted += spec.result.drafted;
      accepted += spec.result.accepted;
    }
  }
  assert.ok(accepted > 0 && accepted < drafted, `${accepted} of ${drafted}`);
});

test('a draft model (the same weights as GGUF): identical tokens, every draft accepted', async () => {
  const info = await engine.loadDraft({ model: GGUF });
  assert.equal(info.vocabSize, 512);
  assert.ok(info.contextBytes > 0 && info.nCtx === engine.info.nCtx);
  for (const prompt of PROMPTS) {
    const plain = await ids(engine, prompt, { temperature: 0, maxTokens: 100 });
    const spec = await ids(engine, prompt, { temperature: 0, maxTokens: 100, draft: { maxTokens: 6 } });
    assert.deepEqual(spec.ids, plain.ids, prompt);
    assert.equal(spec.text, plain.text);
    assert.ok(spec.result.drafted > 0);
    assert.equal(spec.result.accepted, spec.result.drafted);
    assert.ok(spec.result.rounds < spec.result.nGenerated / 2, `${spec.result.rounds} rounds`);
  }
  // penalties see the drafts as history
  const params = { temperature: 0, maxTokens: 100, repeatPenalty: 1.3 };
  assert.deepEqual((await ids(engine, COPY, { ...params, draft: {} })).ids, (await ids(engine, COPY, params)).ids);
  assert.equal(await engine.loadDraft(null), null);
  await assert.rejects(collect(engine.generate('x', { draft: {} })), (e) => e.code === 'WLM_ERR_STATE' && /no draft model/.test(e.message));
});

test('draft.model loads on first use and is kept; sampling is reproducible by seed', async () => {
  const params = { temperature: 0.9, topK: 20, seed: 7, maxTokens: 60, draft: { model: GGUF, maxTokens: 4 } };
  const a = await ids(engine, 'Once upon a time', params);
  const b = await ids(engine, 'Once upon a time', params);
  assert.deepEqual(a.ids, b.ids);
  assert.ok(a.result.drafted > 0 && a.result.accepted > 0);
  const c = await ids(engine, COPY, { temperature: 0.8, seed: 3, maxTokens: 60, draft: { ngram: 2 } });
  const d = await ids(engine, COPY, { temperature: 0.8, seed: 3, maxTokens: 60, draft: { ngram: 2 } });
  assert.deepEqual(c.ids, d.ids);
  await engine.loadDraft(null);
});

test('refusals name what is wrong; the engine stays usable', async () => {
  const bad = [
    [{ ngram: 0 }, /ngram/], [{ ngram: 9 }, /ngram/], [{ maxTokens: 33 }, /maxTokens/],
    [{ ngram: 2, model: GGUF }, /not both/], [{ pMin: 2 }, /pMin/], [{ speed: 1 }, /draft: unknown option "speed"/],
    [5, /must be an object/],
  ];
  for (const [draft, re] of bad) {
    await assert.rejects(collect(engine.generate('x', { draft })), (e) => {
      assert.ok(e instanceof WasmlmError);
      assert.equal(e.code, 'WLM_ERR_INVALID_ARG');
      assert.match(e.message, re);
      return true;
    });
  }
  await assert.rejects(collect(engine.generate('x', { draft: { ngram: 2 }, grammar: 'root ::= "a"+' })),
    (e) => e.code === 'WLM_ERR_UNSUPPORTED' && /grammar/.test(e.message));
  await assert.rejects(collect(engine.generate('x', { draft: { ngram: 2 }, nProbs: 2 })),
    (e) => e.code === 'WLM_ERR_UNSUPPORTED' && /n_probs|nProbs/.test(e.message));
  await assert.rejects(collect(engine.generateBatch(['x'], { draft: { ngram: 2 } })), /draft/);
  await assert.rejects(engine.loadDraft({ model: TOKENIZER }), (e) => e.code === 'WLM_ERR_FORMAT');
  const after = await ids(engine, 'Once', { temperature: 0, maxTokens: 10 });
  assert.equal(after.ids.length, 10);
});

test('two threads: the same tokens', async () => {
  const e2 = await loadedEngine({ threads: 2 });
  await e2.threadsReady;
  await e2.loadDraft({ model: GGUF });
  for (const prompt of PROMPTS) {
    const plain = await ids(engine, prompt, { temperature: 0, maxTokens: 80 });
    assert.deepEqual((await ids(e2, prompt, { temperature: 0, maxTokens: 80, draft: {} })).ids, plain.ids);
    assert.deepEqual((await ids(e2, prompt, { temperature: 0, maxTokens: 80, draft: { ngram: 3 } })).ids, plain.ids);
  }
  await e2.free();
});

test('the worker engine: loadDraft and draft through the protocol', async () => {
  const w = await createWorkerEngine({ worker: await webWorkerLike() });
  try {
    await w.load({ model: MODEL, tokenizer: TOKENIZER });
    const info = await w.loadDraft({ model: GGUF });
    assert.equal(info.vocabSize, 512);
    const plain = await ids(engine, COPY, { temperature: 0, maxTokens: 60 });
    const spec = await ids(w, COPY, { temperature: 0, maxTokens: 60, draft: { maxTokens: 5 } });
    assert.deepEqual(spec.ids, plain.ids);
    assert.ok(spec.result.drafted > 0 && spec.result.accepted === spec.result.drafted);
    const ng = await ids(w, COPY, { temperature: 0, maxTokens: 60, draft: { ngram: 3 } });
    assert.deepEqual(ng.ids, plain.ids);
    assert.equal(await w.loadDraft(null), null);
  } finally {
    await w.free();
  }
});

// The synthesizer's tiny hybrids (F32, build/synth), the Q8_0 quantization of the same weights as
// the draft: it mostly agrees, so rounds accept some drafts and reject others, and each rejection
// rolls the recurrent state back (the default strategy: a copy of the state per verified
// position, for these small states).
for (const arch of ['qwen35', 'lfm2']) {
  test(`${arch}: a recurrent target, drafts rejected and rolled back: the tokens of plain greedy decoding`, async () => {
    const target = synthCached({ arch, shape: 'tiny' });
    const draft = synthCached({ arch, shape: 'tiny', type: 'Q8_0' });
    const e = await createEngine({ threads: 1 });
    try {
      await e.load({ model: target });
      await e.loadDraft({ model: draft });
      let drafted = 0, accepted = 0, rounds = 0, partial = 0;
      for (const prompt of PROMPTS) {
        const plain = await ids(e, prompt, { temperature: 0, maxTokens: 40 });
        for (const maxTokens of [3, 8]) {
          const spec = await ids(e, prompt, { temperature: 0, maxTokens: 40, draft: { maxTokens } });
          assert.deepEqual(spec.ids, plain.ids, `${prompt} k ${maxTokens}`);
          assert.equal(spec.text, plain.text);
          drafted += spec.result.drafted;
          accepted += spec.result.accepted;
          rounds += spec.result.rounds;
          // a round that rejected after accepting some: a rollback to the middle of a verification
          if (spec.result.accepted > 0 && spec.result.accepted < spec.result.drafted) partial++;
        }
      }
      assert.ok(accepted > 0 && accepted < drafted && partial > 0, `${arch}: ${accepted} of ${drafted} in ${rounds} rounds`);
    } finally {
      await e.free();
    }
  });
}
