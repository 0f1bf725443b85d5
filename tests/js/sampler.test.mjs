// sampler.test.mjs — every field of the sampler chain reaches C through generate(): filters
// that must reduce to greedy do, banned tokens never appear, a large logit bias forces a token,
// out-of-range values are refused by C naming the field; and the per-token probabilities
// (prob, logprob, probSampled, the `top` alternatives) are consistent with each other and with
// the model's raw logits.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { assertRejectsParams, collect, loadedEngine } from './_helpers.mjs';

const engine = await loadedEngine();
const PROMPT = 'Once upon a time';
const N = 80;
const greedy = await collect(engine.generate(PROMPT, { temperature: 0, maxTokens: N }));
const GREEDY_IDS = greedy.map((t) => t.id);

const ids = (tokens) => tokens.filter((t) => t.id >= 0).map((t) => t.id);
const softmax = (z) => {
  const m = Math.max(...z);
  const e = Array.from(z, (v) => Math.exp(v - m));
  const s = e.reduce((a, b) => a + b, 0);
  return e.map((v) => v / s);
};

test('topK 1 is greedy in both sampler orders, at any temperature', async () => {
  for (const samplerOrder of ['llamacpp', 'runc']) {
    const t = await collect(engine.generate(PROMPT,
      { temperature: 1.7, topK: 1, topP: 1, seed: 3, maxTokens: N, samplerOrder }));
    assert.deepEqual(ids(t), GREEDY_IDS, samplerOrder);
    assert.ok(t.every((x) => x.probSampled === 1), 'one candidate: drawn with probability 1');
  }
});

test('minP 1 keeps only the most probable token: greedy', async () => {
  const t = await collect(engine.generate(PROMPT, { temperature: 1.3, topP: 1, minP: 1, seed: 5, maxTokens: N }));
  assert.deepEqual(ids(t), GREEDY_IDS);
});

test('typicalP, minP, presence and frequency penalties change the sampled text', async () => {
  const base = { temperature: 1, topP: 1, seed: 21, maxTokens: N };
  const ref = (await engine.complete(PROMPT, base)).text;
  for (const extra of [{ typicalP: 0.5 }, { minP: 0.2 }, { presencePenalty: 1.5 },
    { frequencyPenalty: 1.5 }, { topK: 3 }]) {
    const r = await engine.complete(PROMPT, { ...base, ...extra });
    assert.notEqual(r.text, ref, JSON.stringify(extra));
    assert.equal(r.nGenerated, N);
  }
  // Penalties act on greedy decoding too (stages 1–3 run before the argmax).
  const g = await engine.complete(PROMPT, { temperature: 0, maxTokens: N, frequencyPenalty: 2 });
  assert.notDeepEqual(g.text, greedy.map((t) => t.text).join(''));
});

test('samplerOrder: temperature before or after the filters draws differently', async () => {
  let differ = 0;
  for (const seed of [1, 2, 3, 4]) {
    const p = { temperature: 0.5, topP: 0.8, seed, maxTokens: N };
    const a = await engine.complete(PROMPT, { ...p, samplerOrder: 'llamacpp' });
    const b = await engine.complete(PROMPT, { ...p, samplerOrder: 'runc' });
    if (a.text !== b.text) differ++;
  }
  assert.ok(differ > 0, 'the order reaches C');
  // The default is llama.cpp's order.
  const p = { temperature: 0.5, topP: 0.8, seed: 9, maxTokens: N };
  assert.equal((await engine.complete(PROMPT, p)).text,
    (await engine.complete(PROMPT, { ...p, samplerOrder: 'llamacpp' })).text);
});

test('banned tokens never appear, greedy or sampled', async () => {
  // The five most frequent ids of the greedy text.
  const counts = new Map();
  for (const id of GREEDY_IDS) counts.set(id, (counts.get(id) ?? 0) + 1);
  const banned = [...counts].sort((a, b) => b[1] - a[1]).slice(0, 5).map(([id]) => id);
  for (const params of [{ temperature: 0 }, { temperature: 1.2, topP: 1, seed: 8 }]) {
    const t = await collect(engine.generate(PROMPT, { ...params, maxTokens: N, bannedTokens: banned, nProbs: 20 }));
    assert.ok(t.length > 20);
    for (const tok of t.filter((x) => x.id >= 0)) {
      assert.ok(!banned.includes(tok.id), `banned token ${tok.id} sampled`);
      for (const alt of tok.top) if (banned.includes(alt.id)) assert.equal(alt.probSampled, 0);
    }
  }
  // -Infinity in logitBias bans too, in each of the three spellings.
  const spell = [Object.fromEntries(banned.map((id) => [id, -Infinity])),
    new Map(banned.map((id) => [id, -Infinity])), banned.map((id) => [id, -Infinity])];
  const texts = [];
  for (const logitBias of spell) {
    const t = await collect(engine.generate(PROMPT, { temperature: 1.2, topP: 1, seed: 8, maxTokens: N, logitBias }));
    assert.ok(ids(t).every((id) => !banned.includes(id)));
    texts.push(t.map((x) => x.text).join(''));
  }
  assert.equal(texts[0], texts[1]);
  assert.equal(texts[0], texts[2]);
});

test('a logit bias of +100 forces its token; a moderate one makes it likelier', async () => {
  const [cat] = await engine.tokenize(' cat', { bos: false });
  for (const params of [{ temperature: 0 }, { temperature: 1, topP: 0.9, seed: 4 }]) {
    const t = await collect(engine.generate(PROMPT, { ...params, maxTokens: 12, logitBias: { [cat]: 100 } }));
    assert.equal(t.length, 12);
    assert.ok(t.every((x) => x.id === cat), JSON.stringify(ids(t)));
  }
  const count = (tokens) => ids(tokens).filter((id) => id === cat).length;
  const plain = await collect(engine.generate(PROMPT, { temperature: 1, seed: 4, maxTokens: N }));
  const biased = await collect(engine.generate(PROMPT, { temperature: 1, seed: 4, maxTokens: N, logitBias: [[cat, 4]] }));
  assert.ok(count(biased) > count(plain), `${count(biased)} vs ${count(plain)}`);
});

const BAD = [
  [{ minP: 1.5 }, /\bminP\b/],
  [{ minP: -0.1 }, /\bminP\b/],
  [{ minP: NaN }, /\bminP\b/],
  [{ typicalP: 0 }, /\btypicalP\b/],
  [{ typicalP: 1.01 }, /\btypicalP\b/],
  [{ typicalP: NaN }, /\btypicalP\b/],
  [{ presencePenalty: NaN }, /\bpresencePenalty\b/],
  [{ presencePenalty: Infinity }, /\bpresencePenalty\b/],
  [{ frequencyPenalty: -Infinity }, /\bfrequencyPenalty\b/],
  [{ frequencyPenalty: NaN }, /\bfrequencyPenalty\b/],
  [{ nProbs: 21 }, /\bnProbs\b/],
  [{ nProbs: -1 }, /\bnProbs\b/],
  [{ nKeep: -1 }, /\bnKeep\b/],
  [{ nKeep: 100000, contextShift: true }, /\bnKeep\b/],
  [{ repeatPenalty: NaN }, /\brepeatPenalty\b/],
  [{ logitBias: { 512: 1 } }, /^logitBias: token 512 is outside the vocabulary/],
  [{ logitBias: { 5: NaN } }, /^logitBias: a bias must be finite or -Infinity \(got NaN for token 5\)/],
  [{ logitBias: { 5: Infinity } }, /^logitBias: a bias must be finite or -Infinity \(got Infinity for token 5\)/],
  [{ bannedTokens: [3, -1] }, /^bannedTokens\[1\] = -1 is outside the vocabulary/],
  [{ bannedTokens: [600] }, /^bannedTokens\[0\] = 600 is outside/],
  // JS-side type checks.
  [{ samplerOrder: 'fastest' }, /samplerOrder must be one of 'llamacpp', 'runc'/],
  [{ samplerOrder: 1 }, /samplerOrder/],
  [{ topK: 1.5 }, /topK must be an integer/],
  [{ nProbs: 2.5 }, /nProbs must be an integer/],
  [{ minP: '0.1' }, /minP must be a number/],
  [{ logitBias: 'x' }, /logitBias must be/],
  [{ logitBias: { abc: 1 } }, /logitBias: "abc" is not a token id/],
  [{ logitBias: [[1, 2, 3]] }, /pairs/],
  [{ logitBias: { 5: '1' } }, /logitBias\[5\] must be a number/],
  [{ bannedTokens: 'abc' }, /bannedTokens must be an array/],
  [{ bannedTokens: [1.5] }, /bannedTokens: 1.5 is not a token id/],
  [{ logitBias: Object.fromEntries(Array.from({ length: 1025 }, (_, i) => [i, 1])) }, /at most 1024/],
  [{ nSamples: 2 }, /nSamples is a generateBatch\(\) parameter/],
];

for (const [params, message] of BAD) {
  const name = JSON.stringify(params, (k, v) => (typeof v === 'number' && !Number.isFinite(v) ? String(v) : v));
  test(`rejects ${name.length > 80 ? `${name.slice(0, 80)}…` : name}`, async () => {
    await assertRejectsParams(engine, PROMPT, { maxTokens: 5, ...params }, message);
  });
}

test('boundary values of the new fields are accepted', async () => {
  for (const params of [{ minP: 0 }, { minP: 1 }, { typicalP: 1 }, { typicalP: 0.01 },
    { presencePenalty: -2, frequencyPenalty: 2 }, { nProbs: 0 }, { nProbs: 20 }, { nKeep: 0 },
    { contextShift: true, nKeep: 1 }, { samplerOrder: 'runc' }, { logitBias: {} }, { bannedTokens: [] },
    { logitBias: new Map([[5, -3.5]]) }, { bannedTokens: new Int32Array([7, 8]) }]) {
    const r = await engine.complete(PROMPT, { maxTokens: 3, seed: 1, ...params });
    assert.equal(r.nGenerated, 3, JSON.stringify(params));
  }
});

test('nProbs: the alternatives are sorted, sum to at most 1, and agree with the token', async () => {
  const params = { temperature: 0.8, topP: 0.9, topK: 40, seed: 17, maxTokens: N, nProbs: 10, repeatPenalty: 1.2 };
  const tokens = (await collect(engine.generate(PROMPT, params))).filter((t) => t.id >= 0);
  assert.equal(tokens.length, N);
  let found = 0;
  for (const t of tokens) {
    assert.equal(t.top.length, 10);
    let sum = 0;
    for (let i = 0; i < t.top.length; i++) {
      const a = t.top[i];
      assert.equal(typeof a.text, 'string');
      assert.ok(a.prob >= 0 && a.prob <= 1 && a.probSampled >= 0 && a.probSampled <= 1);
      if (a.prob > 1e-30) assert.ok(Math.abs(a.logprob - Math.log(a.prob)) < 1e-4, `${a.logprob} ${a.prob}`);
      sum += a.probSampled;
      if (i > 0) {
        const b = t.top[i - 1];
        assert.ok(b.probSampled > a.probSampled ||
          (b.probSampled === a.probSampled && (b.prob > a.prob || (b.prob === a.prob && b.id < a.id))),
          `order at ${i}: ${JSON.stringify([b, a])}`);
      }
    }
    assert.ok(sum <= 1 + 1e-5, `sum of probSampled ${sum}`);
    assert.equal(new Set(t.top.map((a) => a.id)).size, 10, 'distinct ids');
    const self = t.top.find((a) => a.id === t.id);
    if (self) {
      found++;
      assert.equal(self.prob, t.prob);
      assert.equal(self.logprob, t.logprob);
      assert.equal(self.probSampled, t.probSampled);
      if (/^[\x20-\x7e]+$/.test(t.text)) assert.equal(self.text, t.text);
    } else {
      assert.ok(t.probSampled <= t.top.at(-1).probSampled, 'a token outside top ranks below it');
    }
  }
  assert.ok(found > N / 2, `the sampled token is usually among the top 10 (${found}/${N})`);
  // Without nProbs there is no `top`.
  const plain = await collect(engine.generate(PROMPT, { maxTokens: 3, seed: 1 }));
  assert.ok(plain.every((t) => !('top' in t)));
});

test('logprob is ln(prob), and prob is the raw softmax, before penalties', async () => {
  const tokens = (await collect(engine.generate(PROMPT,
    { temperature: 1, topP: 0.95, seed: 2, maxTokens: N, repeatPenalty: 1.5, presencePenalty: 1, nProbs: 5 })))
    .filter((t) => t.id >= 0);
  for (const t of tokens) {
    assert.ok(Number.isFinite(t.logprob) && t.logprob <= 0);
    assert.ok(Math.abs(t.logprob - Math.log(t.prob)) < 1e-4, `${t.logprob} vs ln ${t.prob}`);
  }
  // The first step's probabilities are the softmax of the prompt's logits (penalties aside).
  await engine.reset();
  const logits = await engine.evalTokens(await engine.tokenize(PROMPT));
  const p = softmax(logits);
  assert.ok(Math.abs(tokens[0].prob - p[tokens[0].id]) < 1e-5, `${tokens[0].prob} vs ${p[tokens[0].id]}`);
  for (const a of tokens[0].top) assert.ok(Math.abs(a.prob - p[a.id]) < 1e-5, `${a.id}: ${a.prob} vs ${p[a.id]}`);
  // The sum of the logprobs is in lastResult.
  const sum = tokens.reduce((s, t) => s + t.logprob, 0);
  assert.ok(Math.abs(engine.lastResult.logprob - sum) < 1e-6 * Math.max(1, Math.abs(sum)) + 1e-9);
});

test('greedy: top[0] is the chosen token, drawn with probability 1', async () => {
  const tokens = (await collect(engine.generate(PROMPT, { temperature: 0, maxTokens: N, nProbs: 4 })))
    .filter((t) => t.id >= 0);
  assert.deepEqual(tokens.map((t) => t.id), GREEDY_IDS);
  for (const t of tokens) {
    assert.equal(t.top[0].id, t.id);
    assert.equal(t.top[0].probSampled, 1);
    assert.equal(t.probSampled, 1);
    assert.ok(t.top.slice(1).every((a) => a.probSampled === 0));
    assert.ok(t.top[0].prob >= t.top[1].prob, 'greedy picks the most probable');
    // The same tokens as without nProbs: reporting does not change sampling.
    assert.deepEqual({ ...t, top: undefined }, { ...greedy[tokens.indexOf(t)], top: undefined });
  }
});

test('alternatives after BOS have no leading space', async () => {
  const [t] = await collect(engine.generate('', { temperature: 0, maxTokens: 1, nProbs: 5 }));
  assert.equal(t.text, 'Once');
  assert.equal(t.top[0].text, 'Once');
  const [u] = await collect(engine.generate('Once upon a', { temperature: 0, maxTokens: 1, nProbs: 5 }));
  assert.ok(u.top[0].text.startsWith(' '), JSON.stringify(u.top[0].text));
});

test('SIMD and scalar modules draw the same tokens with every stage on', async () => {
  const scalar = await loadedEngine({ simd: false });
  const params = { temperature: 0.9, topK: 30, topP: 0.95, minP: 0.02, typicalP: 0.95,
    repeatPenalty: 1.1, presencePenalty: 0.2, frequencyPenalty: 0.1, seed: 77, maxTokens: 120 };
  const a = await engine.complete(PROMPT, params);
  const b = await scalar.complete(PROMPT, params);
  assert.equal(a.text, b.text);
  await scalar.free();
});
