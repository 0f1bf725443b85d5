// reference.test.mjs — golden tests against llama2.c's run.c (../shared/reference): greedy text
// byte for byte, and the logits of the forward pass position by position.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { planModule } from '../../js/runtime/wasm.js';
import { REFERENCE, collect, loadedEngine, referenceText, runcVisible } from './_helpers.mjs';

// run.c keeps its KV cache in float32: so does this engine, for logits equal to 1e-4.
const engine = await loadedEngine({}, { kvType: 'f32' });

test('model info matches stories260K', async () => {
  assert.deepEqual({ ...engine.info }, {
    dim: 64, hiddenDim: 172, nLayers: 5, nHeads: 8, nKvHeads: 4, vocabSize: 512, seqLen: 512,
    sharedClassifier: true, weightBytes: engine.info.weightBytes, nCtx: 512, simd: true, kvType: 'f32',
    attnLayers: 5, stateBytes: 0, // a transformer: every layer has its KV cache, no recurrent state
    build: (await planModule({})).build, // 'relaxed' in Node >= 22, 'simd128' in Node 20
    threads: engine.threads,
    memory64: false, // a 1 MB model: wasm32 (js/runtime/memory64.js)
    // the relaxed build's int8 dot form, picked by timing both ('auto'); 'none' in the others
    dotForm: engine.info.build === 'relaxed' ? engine.info.dotForm : 'none',
    dotFormBatch: engine.info.build === 'relaxed' ? engine.info.dotFormBatch : 'none',
    dotProbe: engine.info.build === 'relaxed' ? engine.info.dotProbe : null,
    contextBytes: engine.info.contextBytes, wasmMemoryBytes: engine.info.wasmMemoryBytes,
    // a llama2.c checkpoint has no GGUF metadata; tok512.bin writes BOS and EOS as llama2.c's
    // tokenizer.bin does, with newlines around them
    name: null, architecture: null, chatTemplate: null, bosId: 1, eosId: 2, bosToken: '\n<s>\n',
    eosToken: '\n</s>\n', addBos: true,
    // the default backend 'auto' in Node without a `gpu`: the CPU, saying why
    backend: 'cpu', backendReason: engine.info.backendReason, gpuAdapter: null, gpuBytes: 0,
    // embeddings (js/engine/embed.js): a generative model without pooling_type
    embeddingLength: 64, pooling: 'none', generative: true, rankOutputs: 0,
    nExpert: 0, nExpertUsed: 0, // a dense model: no mixture of experts
    vision: null, // no mmproj loaded
  });
  assert.match(engine.info.backendReason, /^auto: Node has no navigator\.gpu/);
  assert.ok(engine.info.weightBytes > 1_000_000 && engine.info.weightBytes < 1_056_540);
  // The KV cache of one full sequence: K and V, 5 layers × 512 positions × kv_dim 32 float32 =
  // 655360 bytes, plus activations for a chunk of batched positions (a few hundred KiB here).
  const kv = 2 * 5 * 512 * 32 * 4;
  assert.ok(engine.info.contextBytes >= kv && engine.info.contextBytes < kv + 512 * 1024,
    `contextBytes ${engine.info.contextBytes}`);
  assert.ok(engine.info.wasmMemoryBytes >= 1_056_540 + kv);
});

test('greedy, empty prompt with BOS, 256 positions: equals run.c', async () => {
  const expected = referenceText('stories260K_run.c_greedy_noprompt_256.txt');
  const tokens = await collect(engine.generate('', { temperature: 0, maxTokens: 256, addBos: true }));
  const text = tokens.map((t) => runcVisible(t.text)).join('');
  assert.equal(text, expected);
  assert.equal(engine.lastResult.stopReason, 'max_tokens');
  assert.equal(engine.lastResult.nPrompt, 1);
  assert.equal(engine.lastResult.nGenerated, 256);
  assert.equal(engine.lastResult.text, tokens.map((t) => t.text).join(''));
  // nPast counts the emitted token as part of the sequence.
  tokens.forEach((t, i) => assert.equal(t.nPast, 1 + i + 1));
  for (const t of tokens) {
    assert.ok(t.id >= 0 && t.id < 512);
    assert.equal(t.probSampled, 1, 'greedy draws with probability 1');
    assert.ok(t.prob > 0 && t.prob <= 1);
  }
});

test('greedy, "Once upon a time" until BOS: equals run.c', async () => {
  const prompt = 'Once upon a time';
  const expected = referenceText('stories260K_run.c_greedy_OnceUponATime_404.txt');
  const tokens = await collect(engine.generate(prompt, { temperature: 0, maxTokens: 404 }));
  const text = prompt + tokens.map((t) => runcVisible(t.text)).join('');
  assert.equal(text, expected);
  const r = engine.lastResult;
  assert.equal(r.stopReason, 'eos');
  assert.equal(r.nPrompt, 5); // BOS + " Once" " upon" " a" " time"
  assert.ok(r.nPrompt + r.nGenerated < 404, 'run.c stopped before 404 positions');
  assert.ok(r.prefillMs >= 0 && r.decodeMs > 0 && r.decodeTokensPerSec > 0);
});

test('complete() returns the same text as generate()', async () => {
  const seen = [];
  const r = await engine.complete('Once upon a time', { temperature: 0, maxTokens: 30 },
    { onToken: (t) => seen.push(t.text) });
  const expected = referenceText('stories260K_run.c_greedy_OnceUponATime_404.txt');
  assert.equal(r.text, seen.join(''));
  assert.equal(r.nGenerated, 30);
  assert.ok(expected.startsWith('Once upon a time' + r.text));
});

test('logits equal run.c at each of 32 positions (1e-4 absolute)', async () => {
  const ref = JSON.parse(readFileSync(
    resolve(REFERENCE, 'stories260K_logits_OnceUponATime_32.json'), 'utf8'));
  assert.equal(ref.input_tokens.length, 32);
  // The prompt's tokens are the run.c encoding of "Once upon a time".
  assert.deepEqual([...await engine.tokenize('Once upon a time')], ref.input_tokens.slice(0, 5));
  await engine.reset();
  let worst = 0;
  for (let pos = 0; pos < 32; pos++) {
    const logits = await engine.evalTokens([ref.input_tokens[pos]]);
    assert.equal(logits.length, 512);
    for (let i = 0; i < 512; i++) {
      const d = Math.abs(logits[i] - ref.logits[pos][i]);
      worst = Math.max(worst, d);
      if (!(d <= 1e-4)) assert.fail(`position ${pos}, logit ${i}: ${logits[i]} vs ${ref.logits[pos][i]}`);
    }
  }
  assert.ok(worst <= 1e-4, `worst difference ${worst}`);
});

test('evalTokens of several ids at once gives the last position\'s logits', async () => {
  const ref = JSON.parse(readFileSync(
    resolve(REFERENCE, 'stories260K_logits_OnceUponATime_32.json'), 'utf8'));
  await engine.reset();
  const logits = await engine.evalTokens(ref.input_tokens.slice(0, 8));
  for (let i = 0; i < 512; i++) assert.ok(Math.abs(logits[i] - ref.logits[7][i]) <= 1e-4);
  // reset() starts again at position 0: the first logits come back.
  await engine.reset();
  const first = await engine.evalTokens([1]);
  for (let i = 0; i < 512; i++) assert.ok(Math.abs(first[i] - ref.logits[0][i]) <= 1e-4);
});
