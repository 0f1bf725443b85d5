// tests/js/embed.test.mjs — Engine.embed / rerank against llama.cpp's own embeddings: the records
// tests/reference/oracle/embed/*.json were written by `node tools/oracle.mjs --embed-synth all`
// (llama.cpp compiled to wasm by @wllama/wllama: each text embedded alone by llama.cpp's server
// code, L2-normalized; a reranker's scores). The test rebuilds each synthetic model from the
// recorded arguments (tools/synth_gguf.mjs, cached under build/synth), checks its sha256, embeds
// all 24 texts in one call (so they share forward passes) and requires every text's cosine
// similarity to llama.cpp's vector to be at least COSINE[type]; the reranker's order must be
// llama.cpp's and its scores within RANK_TOL. Also: the worker engine gives the same vectors,
// ModelInfo's embedding fields, the errors, abort.

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import { createEngine, createWorkerEngine } from '../../js/wasmlm.js';
import { REPO, MODELS, webWorkerLike } from './_helpers.mjs';
import { synthCached } from '../../tools/synth_gguf.mjs';

const DIR = path.join(REPO, 'tests/reference/oracle/embed');
/** Smallest cosine similarity to llama.cpp's vector, per weight type (measured 2026-11-27:
 *  F32 1 − 3.9e-7 at worst (qwen3); Q8_0 and Q4_K_M 1 − 4.2e-4 at worst (qwen3), the encoders
 *  within 1 − 5e-6: docs/verification.md). */
const COSINE = { F32: 0.9999, Q8_0: 0.999, Q4_K_M: 0.999 };
// llama.cpp's scores vs ours, both with an F32 KV cache as the records were made (measured
// 2026-11-27: 1.9e-5 at most, the BERT cross-encoder's raw logits; Qwen3-Reranker's
// probabilities 5.7e-7, 1.2e-3 with our default F16 cache)
const RANK_TOL = 1e-4;

const records = fs.readdirSync(DIR).filter((f) => f.endsWith('.json')).sort()
  .map((f) => ({ file: f, ...JSON.parse(fs.readFileSync(path.join(DIR, f), 'utf8')) }));

function sha256(file) {
  return crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex');
}
function modelOf(rec) {
  const a = rec.synth.args, get = (k) => a[a.indexOf(k) + 1];
  const file = synthCached({ arch: get('--arch'), shape: get('--shape'), seed: Number(get('--seed')), type: get('--type') });
  assert.equal(sha256(file), rec.model.sha256, `${file}: not the bytes llama.cpp saw`);
  return { file, type: get('--type') };
}
function cosine(a, b) {
  let d = 0, x = 0, y = 0;
  for (let i = 0; i < a.length; i++) { d += a[i] * b[i]; x += a[i] * a[i]; y += b[i] * b[i]; }
  return d / Math.sqrt(x * y);
}

const engine = await createEngine({ threads: 1 });
after(() => engine.free());

for (const rec of records) {
  test(`${rec.file}: llama.cpp's ${rec.rerank ? 'rerank scores' : 'embeddings'}`, async () => {
    const { file, type } = modelOf(rec);
    const info = await engine.load({ model: file, nCtx: rec.ctx, ...(rec.rerank ? { kvType: 'f32' } : {}) });
    if (rec.rerank) {
      const r = await engine.rerank(rec.rerank.query, rec.rerank.documents);
      assert.deepEqual(r.map((x) => x.index), rec.rerank.results.map((x) => x.index), 'the same order');
      for (const x of rec.rerank.results) {
        const ours = r.find((y) => y.index === x.index).score;
        assert.ok(Math.abs(ours - x.relevance_score) <= RANK_TOL, `document ${x.index}: ${ours} vs ${x.relevance_score}`);
      }
      return;
    }
    const vecs = await engine.embed(rec.texts);
    assert.equal(vecs.length, rec.texts.length);
    let worst = 1;
    vecs.forEach((v, i) => {
      assert.equal(v.length, info.embeddingLength);
      assert.equal(v.length, rec.embeddings[i].length);
      const c = cosine(v, rec.embeddings[i]);
      worst = Math.min(worst, c);
      assert.ok(c >= COSINE[type], `text ${i} ${JSON.stringify(rec.texts[i].slice(0, 30))}: cosine ${c} < ${COSINE[type]}`);
    });
    // distinct texts give distinct vectors (a constant output would pass the cosine check only
    // if llama.cpp's were constant too; this says so directly)
    assert.ok(cosine(vecs[0], vecs[1]) < 0.999);
    test.diagnostic?.(`${rec.file}: min cosine 1 - ${(1 - worst).toExponential(2)}`);
  });
}

test('ModelInfo: embeddingLength, pooling, generative, rankOutputs', async () => {
  const bert = records.find((r) => r.file === 'bert-F32.json');
  const info = await engine.load({ model: modelOf(bert).file });
  assert.equal(info.architecture, 'bert');
  assert.equal(info.embeddingLength, 64);
  assert.equal(info.pooling, 'mean');
  assert.equal(info.generative, false);
  assert.equal(info.rankOutputs, 0);
  // an encoder does not generate; rank pooling belongs to rerank()
  await assert.rejects(async () => { for await (const t of engine.generate('Hello')) void t; }, { code: 'WLM_ERR_UNSUPPORTED' });
  await assert.rejects(engine.rerank('q', ['d']), { code: 'WLM_ERR_INVALID_ARG' });
  await assert.rejects(engine.embed('x', { pooling: 'rank' }), { code: 'WLM_ERR_INVALID_ARG' });
  await assert.rejects(engine.embed('x', { pooling: 'max' }), { code: 'WLM_ERR_INVALID_ARG' });
  // options: raw vectors, cls and per-token pooling
  const [unit] = await engine.embed('Hello world');
  const [raw] = await engine.embed('Hello world', { normalize: false });
  const n = Math.hypot(...raw);
  assert.ok(Math.abs(Math.hypot(...unit) - 1) < 1e-6 && Math.abs(n - 1) > 1e-3);
  assert.ok(unit.every((v, i) => Math.abs(v - raw[i] / n) < 1e-6));
  const ids = await engine.tokenize('Hello world');
  const [tokens] = await engine.embed('Hello world', { pooling: 'none', normalize: false });
  assert.equal(tokens.length, ids.length * 64);
  const [cls] = await engine.embed('Hello world', { pooling: 'cls', normalize: false });
  assert.deepEqual(cls, tokens.subarray(0, 64));
  assert.deepEqual(await engine.embed([]), []);
  // abort: an aborted signal rejects with an AbortError
  await assert.rejects(engine.embed(['a', 'b'], { signal: AbortSignal.abort() }), { name: 'AbortError' });
});

test('a model without pooling_type needs an explicit pooling', async () => {
  const info = await engine.load({ model: path.join(MODELS, 'stories260K.gguf') });
  assert.equal(info.pooling, 'none');
  assert.equal(info.generative, true);
  await assert.rejects(engine.embed('Once upon a time'), (e) => e.code === 'WLM_ERR_INVALID_ARG' && /pooling/.test(e.message));
  const [v] = await engine.embed('Once upon a time', { pooling: 'last' });
  assert.equal(v.length, info.embeddingLength);
  // and it still generates afterwards
  const out = await engine.complete('Once upon a time', { temperature: 0, maxTokens: 5 });
  assert.equal(out.stopReason, 'max_tokens');
});

test('worker engine: the same vectors and rerank, abort', async () => {
  const bert = records.find((r) => r.file === 'bert-F32.json');
  const rr = records.find((r) => r.file === 'bert-rerank-F32.json');
  const w = await createWorkerEngine({ worker: await webWorkerLike() });
  try {
    await w.load({ model: fs.readFileSync(modelOf(bert).file) });
    await engine.load({ model: modelOf(bert).file });
    const texts = bert.texts.slice(0, 5);
    const a = await w.embed(texts), b = await engine.embed(texts);
    assert.deepEqual(a, b);
    await assert.rejects(w.embed(texts, { signal: AbortSignal.abort() }), { name: 'AbortError' });
    await w.load({ model: fs.readFileSync(modelOf(rr).file) });
    const r = await w.rerank(rr.rerank.query, rr.rerank.documents);
    assert.deepEqual(r.map((x) => x.index), rr.rerank.results.map((x) => x.index));
  } finally {
    await w.free();
  }
});
