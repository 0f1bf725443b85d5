// vision_decoding.test.mjs — images beyond a single generate(): batches (generateBatch /
// completeBatch with images per sequence, openBatch().add with images) and speculative decoding
// (a draft model without an mmproj, prompt lookup), each against single plain generate() runs
// with the same images on the same engine (the reference: its outputs are checked against
// llama.cpp's records in vision.test.mjs). Greedy ids are compared bitwise, as the text batches'
// are (tests/js/batch.test.mjs), with their log-probabilities; the errors name the sequence.
// Pairs: the synthetic gemma3 model and mmproj (non-causal image rows) and LFM2-VL on the hybrid
// (recurrent) model, of tests/reference/oracle/vision/.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { createEngine, createWorkerEngine, WasmlmError } from '../../js/wasmlm.js';
import { MEDIA_MARKER } from '../../js/vision/vision.js';
import { mmprojBytes, pngBytes, testImage } from '../../tools/synth_mmproj.mjs';
import { synthCached } from '../../tools/synth_gguf.mjs';
import { REPO, collect, webWorkerLike } from './_helpers.mjs';

const BUILT = fs.existsSync(path.join(REPO, 'dist/wasmlm.wasm'));
const record = (name) => JSON.parse(fs.readFileSync(path.join(REPO, `tests/reference/oracle/vision/${name}.json`), 'utf8'));
const synthArg = (rec, k) => rec.model.synth[rec.model.synth.indexOf(k) + 1];
const textModel = (rec) => synthCached({ arch: synthArg(rec, '--arch'), shape: synthArg(rec, '--shape'),
  seed: Number(synthArg(rec, '--seed')), type: synthArg(rec, '--type'), sha256: rec.model.sha256 });
const M = MEDIA_MARKER;

async function pair(name, loadExtra = {}) {
  const rec = record(name);
  const engine = await createEngine({ threads: 1 });
  const model = await textModel(rec);
  await engine.load({ model, mmproj: mmprojBytes({ shape: rec.mmproj.shape, type: rec.mmproj.type, seed: rec.mmproj.seed }),
    nCtx: 1024, kvType: 'f32', backend: 'cpu', nSeqMax: 4, ...loadExtra });
  return { engine, model, rec };
}

/** One plain generate(): {ids, logprobs, nPrompt, stopReason}. */
async function single(engine, prompt, params) {
  const toks = await collect(engine.generate(prompt, params));
  const got = toks.filter((t) => t.id >= 0);
  return { ids: got.map((t) => t.id), logprobs: got.map((t) => t.logprob), nPrompt: engine.lastResult.nPrompt,
    stopReason: engine.lastResult.stopReason, result: engine.lastResult };
}

/** generateBatch()'s tokens per sequence. */
async function batch(engine, prompts, params) {
  const per = prompts.map(() => ({ ids: [], logprobs: [] }));
  for await (const t of engine.generateBatch(prompts, params)) {
    if (t.id >= 0 && !t.stopReason) { per[t.seq].ids.push(t.id); per[t.seq].logprobs.push(t.logprob); }
  }
  return { per, result: engine.lastBatchResult };
}

const images = async (seed, sizes) => Promise.all(sizes.map(([w, h], k) => pngBytes(testImage(w, h, seed + k), w, h)));

for (const name of ['gemma3-F32', 'lfm2-p16-F32']) {
  test(`batches with images (${name}): each sequence's greedy ids are those of generate() with its images`, { skip: !BUILT && 'not built', timeout: 600000 }, async () => {
    const { engine } = await pair(name);
    try {
      const [a, b, c] = await images(5, [[40, 32], [24, 56], [64, 64]]);
      const prompts = [`Describe ${M} please.`, `Two: ${M} and ${M}?`, 'No image at all, just text.', `${M}`];
      const imgs = [[a], [b, c], undefined, [b]];
      const params = prompts.map((_, i) => ({ temperature: 0, maxTokens: 8, ...(imgs[i] ? { images: imgs[i] } : {}) }));
      const want = [];
      for (const [i, p] of prompts.entries()) want.push(await single(engine, p, { ...params[i], cachePrompt: false }));
      const got = await batch(engine, prompts, params);
      for (const [i, w] of want.entries()) {
        assert.deepEqual(got.per[i].ids, w.ids, `sequence ${i}`);
        assert.deepEqual(got.per[i].logprobs, w.logprobs, `sequence ${i}: log-probabilities bitwise`);
        assert.equal(got.result.sequences[i].nPrompt, w.nPrompt, `sequence ${i}: positions (image rows counted)`);
      }
      assert.ok(want[1].nPrompt > want[2].nPrompt + 16, 'two images take their rows');
      assert.equal(got.result.nPrompt, want.reduce((s, w) => s + w.nPrompt, 0));
      assert.equal(got.result.imagesEncoded, 0, 'the images generate() encoded are reused');
      // completeBatch, and the samples of one prompt with an image (seeded)
      const cb = await engine.completeBatch([prompts[1]], { ...params[1], temperature: 0.8, seed: 11, nSamples: 2 });
      for (const s of cb.sequences) {
        const w = await single(engine, prompts[1], { ...params[1], temperature: 0.8, seed: 11 + s.sample, cachePrompt: false });
        assert.equal(s.text, w.result.text, `sample ${s.sample}`);
      }
    } finally {
      await engine.free();
    }
  });
}

test('openBatch() with images: sequences joining a running batch generate what generate() does', { skip: !BUILT && 'not built', timeout: 600000 }, async () => {
  const { engine } = await pair('gemma3-F32');
  try {
    const [a, b] = await images(9, [[48, 48], [30, 70]]);
    const jobs = [
      [`First ${M}`, { images: [a] }], ['plain text', {}], [`Second ${M}${M}`, { images: [b, a] }], [`Third ${M} end`, { images: [b] }],
    ];
    const want = [];
    for (const [p, extra] of jobs) want.push(await single(engine, p, { temperature: 0, maxTokens: 10, cachePrompt: false, ...extra }));
    const run = await engine.openBatch({ maxSequences: 2 }); // more sequences than slots: they wait, then join
    const seqs = jobs.map(([p, extra]) => run.add(p, { temperature: 0, maxTokens: 10, ...extra }));
    const got = await Promise.all(seqs.map(async (s) => (await collect(s)).filter((t) => t.id >= 0 && !t.stopReason)));
    await run.close();
    for (const [i, w] of want.entries()) {
      assert.deepEqual(got[i].map((t) => t.id), w.ids, `sequence ${i}`);
      assert.deepEqual(got[i].map((t) => t.logprob), w.logprobs, `sequence ${i}: log-probabilities`);
      assert.equal(seqs[i].result.nPrompt, w.nPrompt, `sequence ${i}: positions`);
    }
    assert.ok(run.stats.maxLive === 2);
    // a sequence with images added while the batch's first sequence waits to sample from its
    // begin's logits joins after the first step (its prefill would replace them)
    const order = [1, 0, 2, 3];
    const run2 = await engine.openBatch({ maxSequences: 4 });
    const seqs2 = order.map((k) => run2.add(jobs[k][0], { temperature: 0, maxTokens: 10, ...jobs[k][1] }));
    const got2 = await Promise.all(seqs2.map(async (s) => (await collect(s)).filter((t) => t.id >= 0 && !t.stopReason)));
    await run2.close();
    order.forEach((k, i) => assert.deepEqual(got2[i].map((t) => t.id), want[k].ids, `joining order: job ${k}`));
    assert.equal(run2.stats.maxLive, 4);
  } finally {
    await engine.free();
  }
});

test('batches with images: clear errors, naming the sequence; the engine stays usable', { skip: !BUILT && 'not built', timeout: 300000 }, async () => {
  const { engine } = await pair('gemma3-F32');
  try {
    const [a] = await images(2, [[20, 20]]);
    const invalid = (re) => (e) => e instanceof WasmlmError && e.code === 'WLM_ERR_INVALID_ARG' && re.test(e.message);
    await assert.rejects(collect(engine.generateBatch(['x', `y ${M}`], [{}, { images: [] }])), invalid(/prompt 1: the prompt has 1 media marker/));
    await assert.rejects(collect(engine.generateBatch([`${M}`, 'y'], [{ images: [a, a] }, {}])), invalid(/prompt 0: .*2 images were given/));
    await assert.rejects(collect(engine.generateBatch(['x'], { images: 'a.png' })), invalid(/images must be an array/));
    await assert.rejects(collect(engine.generateBatch([`${M}`], { images: [new Uint8Array([1, 2, 3])] })), invalid(/images\[0\]/));
    const run = await engine.openBatch();
    const bad = run.add(`${M}${M}`, { images: [a] });
    await assert.rejects(collect(bad), invalid(/add\(\): the prompt has 2 media markers .* but 1 image was given/));
    await run.close();
    // a text model refuses images in a batch
    const text = await createEngine({ threads: 1 });
    try {
      await text.load({ model: await textModel(record('gemma3-F32')), nCtx: 256 });
      await assert.rejects(collect(text.generateBatch([`${M}`], { images: [a] })), (e) => e.code === 'WLM_ERR_STATE' && /mmproj/.test(e.message));
    } finally {
      await text.free();
    }
    const ok = await batch(engine, [`${M}`], { images: [a], temperature: 0, maxTokens: 3 });
    assert.equal(ok.per[0].ids.length, 3);
  } finally {
    await engine.free();
  }
});

test('speculative decoding with images: a draft model (no mmproj) and prompt lookup give plain greedy decoding\'s tokens', { skip: !BUILT && 'not built', timeout: 600000 }, async () => {
  for (const name of ['gemma3-F32', 'lfm2-p16-F32']) {
    const { engine, model } = await pair(name);
    try {
      const [a, b] = await images(3, [[36, 36], [50, 30]]);
      // text that repeats around the images, so prompt lookup finds n-grams on both sides
      const prompt = `one two three four ${M} one two three four five ${M} one two three`;
      // the answer held to the words of the prompt (a logit bias: the synthetic model's own text
      // never repeats), so that its n-grams recur and the drafters have something to propose
      const words = await engine.tokenize('one two three four five', { bos: false });
      const logitBias = Object.fromEntries([...words].map((id) => [id, 100]));
      const plain = await single(engine, prompt, { images: [a, b], temperature: 0, maxTokens: 40, logitBias });
      assert.equal(plain.ids.length, 40);
      for (const ngram of [1, 3]) {
        const spec = await single(engine, prompt, { images: [a, b], temperature: 0, maxTokens: 40, logitBias, draft: { ngram, maxTokens: 6 } });
        assert.deepEqual(spec.ids, plain.ids, `${name}: prompt lookup n ${ngram}`);
        assert.equal(spec.nPrompt, plain.nPrompt);
        assert.ok(spec.result.rounds > 0 && spec.result.drafted > 0, `${name}: prompt lookup drafted (${spec.result.drafted})`);
      }
      // the same weights as the draft model, without the mmproj: it drafts from the text only
      await engine.loadDraft({ model });
      const spec = await single(engine, prompt, { images: [a, b], temperature: 0, maxTokens: 40, logitBias, draft: { maxTokens: 4 } });
      assert.deepEqual(spec.ids, plain.ids, `${name}: draft model`);
      assert.deepEqual(spec.logprobs.map((v) => Math.fround(v)), plain.logprobs.map((v) => Math.fround(v)));
      assert.ok(spec.result.drafted > 0 && spec.result.accepted > 0, `${name}: ${spec.result.accepted} of ${spec.result.drafted} accepted`);
      // a follow-up with the prompt cache (the images' KV kept) and the draft
      const again = await single(engine, prompt, { images: [a, b], temperature: 0, maxTokens: 40, logitBias, cachePrompt: true, draft: { maxTokens: 4 } });
      assert.deepEqual(again.ids, plain.ids);
      await engine.loadDraft(null);
    } finally {
      await engine.free();
    }
  }
});

test('the worker engine: batches with images and imageTokens() across the boundary', { skip: !BUILT && 'not built', timeout: 300000 }, async () => {
  const { engine, model, rec } = await pair('gemma3-F32');
  const w = await createWorkerEngine({ worker: await webWorkerLike() });
  try {
    await w.load({ model, mmproj: mmprojBytes({ shape: rec.mmproj.shape, type: rec.mmproj.type, seed: rec.mmproj.seed }),
      nCtx: 1024, kvType: 'f32', backend: 'cpu', nSeqMax: 4 });
    const [a, b] = await images(7, [[40, 40], [70, 20]]);
    assert.equal(await w.imageTokens(a), await engine.imageTokens(a));
    const prompts = [`${M} one`, `two ${M}${M}`];
    const params = [{ images: [a], temperature: 0, maxTokens: 6 }, { images: [b, a], temperature: 0, maxTokens: 6 }];
    const viaWorker = await w.completeBatch(prompts, params);
    const here = await engine.completeBatch(prompts, params);
    assert.deepEqual(viaWorker.sequences.map((s) => s.text), here.sequences.map((s) => s.text));
    assert.deepEqual(viaWorker.sequences.map((s) => s.nPrompt), here.sequences.map((s) => s.nPrompt));
    await assert.rejects(w.imageTokens(new Uint8Array([1, 2, 3])), (e) => e.code === 'WLM_ERR_INVALID_ARG');
  } finally {
    await w.free();
    await engine.free();
  }
});

const HAS64 = fs.existsSync(path.join(REPO, 'dist/wasmlm64.wasm')) && WebAssembly.validate(new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 5, 3, 1, 4, 1]));
test('the memory64 module: batches with images and imageTokens() give what wasm32 does (the pointer arrays adapted)', { skip: !HAS64 && 'no memory64 module or runtime', timeout: 300000 }, async () => {
  const [a, b] = await images(4, [[30, 30], [44, 22]]);
  const prompts = [`${M} one`, `two ${M}${M}`];
  const params = [{ images: [a], temperature: 0, maxTokens: 5 }, { images: [b, a], temperature: 0, maxTokens: 5 }];
  const out = [];
  for (const memory64 of [false, true]) {
    const { engine } = await pair('gemma3-F32', {});
    const e = memory64 ? await createEngine({ threads: 1, memory64 }) : engine;
    try {
      if (memory64) {
        const rec = record('gemma3-F32');
        const info = await e.load({ model: await textModel(rec), mmproj: mmprojBytes({ shape: rec.mmproj.shape, type: rec.mmproj.type, seed: rec.mmproj.seed }),
          nCtx: 1024, kvType: 'f32', backend: 'cpu', nSeqMax: 4 });
        assert.equal(info.memory64, true);
      }
      const r = await e.completeBatch(prompts, params);
      const run = await e.openBatch({ maxSequences: 2 });
      const s1 = run.add('text first', { temperature: 0, maxTokens: 4 });
      const s2 = run.add(`then ${M}`, { images: [b], temperature: 0, maxTokens: 4 });
      const joined = (await Promise.all([collect(s1), collect(s2)])).map((t) => t.map((x) => x.id).join(','));
      await run.close();
      out.push({ texts: r.sequences.map((s) => s.text), nPrompt: r.sequences.map((s) => s.nPrompt), n: await e.imageTokens(a), joined });
    } finally {
      if (e !== engine) await e.free();
      await engine.free();
    }
  }
  assert.deepEqual(out[1], out[0]);
});
