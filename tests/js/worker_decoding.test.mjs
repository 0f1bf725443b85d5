// worker_decoding.test.mjs — the decoding features through createWorkerEngine() and the real
// js/worker/worker.js (in a worker_threads Worker, see _worker_shim.mjs): sampler fields and top
// alternatives, batches, beam search and kvStats give exactly what the in-thread engine gives;
// aborts keep their summaries; the protocol's one-terminal-reply rule holds for the new
// requests.

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { createWorkerEngine, WasmlmError } from '../../js/wasmlm.js';
import { PROTOCOL_VERSION, Req, Reply } from '../../js/worker/protocol.js';
import { MODEL, TOKENIZER, collect, loadedEngine, webWorkerLike } from './_helpers.mjs';

const local = await loadedEngine();
const remote = await createWorkerEngine({ worker: await webWorkerLike() });
await remote.load({ model: MODEL, tokenizer: TOKENIZER, nSeqMax: 2 });
after(() => Promise.all([remote.free(), local.free()]));

test('generate: every sampler field and the top alternatives cross the boundary', async () => {
  const params = { temperature: 0.9, topK: 40, topP: 0.95, minP: 0.01, typicalP: 0.98,
    repeatPenalty: 1.1, repeatLastN: 32, presencePenalty: 0.3, frequencyPenalty: 0.2,
    logitBias: new Map([[5, 1.5]]), bannedTokens: [2], samplerOrder: 'runc', nProbs: 5, seed: 99,
    maxTokens: 50, stop: ['zzz'], addBos: true, contextShift: false, nKeep: 0 };
  const a = await collect(remote.generate('Once upon a time', params));
  const b = await collect(local.generate('Once upon a time', params));
  assert.deepEqual(a, b);
  assert.ok(a.every((t) => t.id < 0 || (t.top.length === 5 && Number.isFinite(t.logprob))));
  assert.deepEqual(remote.lastResult.text, local.lastResult.text);
  assert.equal(remote.lastResult.logprob, local.lastResult.logprob);
  await assert.rejects(remote.complete('x', { minP: 2 }),
    (e) => e instanceof WasmlmError && e.code === 'WLM_ERR_INVALID_ARG' && /\bminP\b/.test(e.message));
  await assert.rejects(remote.complete('x', { samplerOrder: 'x' }), { code: 'WLM_ERR_INVALID_ARG' });
});

test('generateBatch and completeBatch equal the in-thread engine', async () => {
  const prompts = ['Once upon a time', 'The dog'];
  const params = [{ temperature: 0.8, seed: 5, maxTokens: 30, nSamples: 2, nProbs: 2 }, { temperature: 0, maxTokens: 20, seed: 8 }];
  const a = await collect(remote.generateBatch(prompts, params));
  const b = await collect(local.generateBatch(prompts, params));
  assert.deepEqual(a, b);
  assert.ok(a.every((t) => typeof t.seq === 'number' && 'stopReason' in t));
  const strip = (r) => r.sequences.map(({ text, stopReason, nGenerated, seed }) => ({ text, stopReason, nGenerated, seed }));
  assert.deepEqual(strip(remote.lastBatchResult), strip(local.lastBatchResult));
  const seen = [];
  const r = await remote.completeBatch('Once', { nSamples: 3, seed: 1, maxTokens: 10 }, { onToken: (t) => seen.push(t) });
  assert.equal(r.sequences.length, 3);
  assert.equal(seen.filter((t) => t.stopReason).length, 3);
  assert.equal((await remote.kvStats()).nSeqMax, 3);
});

test('openBatch (continuous batching) through the worker equals the in-thread engine; cancel crosses as an abort', async () => {
  const params = [{ temperature: 0.8, seed: 3, maxTokens: 25, nProbs: 2 }, { temperature: 0, maxTokens: 15 }];
  const run = async (e) => {
    const b = await e.openBatch({ maxSequences: 2 });
    const s0 = b.add('Once upon a time', params[0]);
    const first = [];
    const it = s0[Symbol.asyncIterator]();
    for (let i = 0; i < 3; i++) first.push((await it.next()).value); // the batch runs
    const s1 = b.add('The dog', params[1]); // joins it
    const rest = await collect({ [Symbol.asyncIterator]: () => it });
    const other = await collect(s1);
    const long = b.add('Lily', { temperature: 0, maxTokens: 0, logitBias: { 2: -Infinity } });
    const got = [];
    await assert.rejects(async () => { for await (const t of long) { got.push(t); if (got.length === 5) long.cancel(); } }, { name: 'AbortError' });
    const out = { a: [...first, ...rest], b: other, r0: s0.result, r1: s1.result, cancelled: got, stats: b.stats.sequences };
    await b.close();
    return out;
  };
  const a = await run(remote);
  const l = await run(local);
  // the cancel reaches the worker a message later: a few more tokens of the same sequence
  assert.equal(l.cancelled.length, 5);
  assert.ok(a.cancelled.length >= 5);
  assert.deepEqual(a.cancelled.slice(0, 5), l.cancelled);
  // the worker's batch runs ahead of its reader, so the first sequence may have ended (its slot
  // free) before the second joins: the second's slot depends on timing, its tokens do not
  const unslot = (x) => JSON.parse(JSON.stringify(x, (key, v) => (key === 'seq' || key === 'slot' ? undefined : v)));
  for (const k of ['a', 'r0', 'stats']) assert.deepEqual(a[k], l[k], k);
  for (const k of ['b', 'r1']) assert.deepEqual(unslot(a[k]), unslot(l[k]), k);
  assert.equal(new Set(a.b.map((t) => t.seq)).size, 1);
  assert.equal(a.stats, 3);
  assert.equal(a.r0.nGenerated, a.a.length - 1);
  // the worker's engine is idle again
  assert.equal((await remote.completeBatch('a', { temperature: 0, maxTokens: 2 })).nGenerated, 2);
  await assert.rejects(remote.openBatch({ maxSequences: 0 }), { code: 'WLM_ERR_INVALID_ARG' });
});

test('beamSearch equals the in-thread engine; onStep crosses as messages', async () => {
  const steps = [];
  const a = await remote.beamSearch('Once upon a time', { width: 3, maxTokens: 30 }, { onStep: (s) => steps.push(s) });
  const b = await local.beamSearch('Once upon a time', { width: 3, maxTokens: 30 });
  const strip = (r) => ({ ...r, ms: 0 });
  assert.deepEqual(strip(a), strip(b));
  assert.ok(a.beams[0].tokens instanceof Int32Array);
  assert.equal(steps.length, a.steps - 1);
  assert.deepEqual(remote.lastBeamResult, a);
  await assert.rejects(remote.beamSearch('x', { width: 0 }), { code: 'WLM_ERR_INVALID_ARG', message: /width/ });
});

test('aborts in the worker: batch and beam search keep their summaries', async () => {
  const c1 = new AbortController();
  let n = 0;
  await assert.rejects(async () => {
    for await (const t of remote.generateBatch(['a', 'b'], { temperature: 0, maxTokens: 0 }, { signal: c1.signal })) {
      if (t.id >= 0 && ++n === 4) c1.abort();
    }
  }, { name: 'AbortError' });
  assert.ok(remote.lastBatchResult.sequences.every((s) => s.stopReason === 'aborted'));

  const c2 = new AbortController();
  await assert.rejects(remote.beamSearch('Once upon a time', { width: 2, maxTokens: 300 }, {
    signal: c2.signal, onStep: ({ step }) => { if (step === 2) c2.abort(); },
  }), { name: 'AbortError' });
  assert.equal(remote.lastBeamResult.aborted, true);
  // Usable afterwards.
  const r = await remote.beamSearch('Once', { width: 2, maxTokens: 4 });
  assert.equal(r.beams[0].tokens.length, 4);
});

test('kvStats through the worker', async () => {
  const s = await remote.kvStats();
  for (const k of ['blockBytes', 'blocksAllocated', 'blocksUsed', 'blocksShared', 'blockRefs',
    'nSeqMax', 'nCtx', 'contextBytes', 'wasmMemoryBytes']) assert.equal(typeof s[k], 'number', k);
});

test('protocol: the new requests get exactly one terminal reply, also when aborted', async () => {
  const w = await webWorkerLike();
  const replies = [];
  w.addEventListener('message', (e) => replies.push(e.data));
  const terminal = (id) => replies.filter((r) => r.id === id && (r.type === Reply.RESULT || r.type === Reply.ERROR));
  const until = async (pred) => { while (!pred()) await new Promise((r) => setTimeout(r, 5)); };
  w.postMessage({ id: 1, type: Req.INIT, options: {} });
  w.postMessage({ id: 2, type: Req.LOAD, model: MODEL, tokenizer: TOKENIZER });
  await until(() => terminal(2).length);
  assert.equal(terminal(1)[0].value.protocol, PROTOCOL_VERSION);

  // Each abort goes out from a message listener as soon as its trigger arrives (not after a
  // polling interval), so however fast the worker decodes, it lands a few steps later at most.
  const when = (pred, fn) => {
    let done = false;
    w.addEventListener('message', (e) => {
      if (done || !pred(e.data)) return;
      done = true;
      fn();
    });
  };
  when(() => replies.filter((r) => r.id === 3 && r.type === Reply.TOKEN).length >= 4,
    () => w.postMessage({ id: 4, type: Req.ABORT, target: 3 }));
  w.postMessage({ id: 3, type: Req.GENERATE_BATCH, prompts: ['a', 'b'], params: { temperature: 0, maxTokens: 0 } });
  await until(() => terminal(3).length); // the engine is busy until the batch has ended
  when((m) => m.id === 5 && m.type === Reply.STEP, () => {
    w.postMessage({ id: 6, type: Req.ABORT, target: 5 });
    w.postMessage({ id: 7, type: Req.KV_STATS }); // allowed while the search runs
  });
  w.postMessage({ id: 5, type: Req.BEAM_SEARCH, prompt: 'Once', params: { width: 2, maxTokens: 300 } });
  await until(() => terminal(5).length);
  w.postMessage({ id: 8, type: Req.BEAM_SEARCH, prompt: 'Once', params: { width: 2, maxTokens: 3 } });
  await until(() => [3, 4, 5, 6, 7, 8].every((id) => terminal(id).length));
  assert.equal(terminal(3)[0].error.name, 'AbortError');
  assert.ok(terminal(3)[0].lastBatchResult.sequences.length === 2);
  assert.equal(terminal(4)[0].value, true);
  assert.equal(terminal(5)[0].error.name, 'AbortError');
  assert.equal(terminal(5)[0].lastBeamResult.aborted, true);
  assert.equal(terminal(6)[0].value, true);
  assert.equal(terminal(7)[0].value.nSeqMax, 4);
  assert.equal(terminal(8)[0].type, Reply.RESULT);
  assert.equal(terminal(8)[0].value.beams[0].tokens.length, 3);
  // A last request as a barrier instead of a pause: the worker answers in order, so once its
  // reply is here, any second reply to 1..8 would be too.
  w.postMessage({ id: 9, type: 'barrier' });
  await until(() => terminal(9).length);
  for (const id of [1, 2, 3, 4, 5, 6, 7, 8]) assert.equal(terminal(id).length, 1, `request ${id}`);
  await w.terminate();
});
