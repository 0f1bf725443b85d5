// worker.test.mjs — createWorkerEngine() against the real js/worker/worker.js, run in a Node
// worker_threads Worker through _worker_shim.mjs (Node has no Web Workers; the browser tests
// cover the real thing). Checks the Engine interface across the boundary and the protocol's
// "exactly one terminal reply per request".

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { createWorkerEngine, WasmlmError } from '../../js/wasmlm.js';
import { Req, Reply } from '../../js/worker/protocol.js';
import { MODEL, TOKENIZER, collect, referenceText, webWorkerLike } from './_helpers.mjs';

const GREEDY = referenceText('stories260K_run.c_greedy_OnceUponATime_404.txt')
  .slice('Once upon a time'.length);

const engine = await createWorkerEngine({ worker: await webWorkerLike() });
after(() => engine.free());

test('load with progress, info, greedy text equal to run.c', async () => {
  const progress = [];
  const info = await engine.load({ model: MODEL, tokenizer: TOKENIZER, onProgress: (p) => progress.push(p) });
  assert.equal(info.vocabSize, 512);
  assert.equal(info.simd, true);
  assert.deepEqual(engine.info, info);
  const size = readFileSync(MODEL).length;
  assert.deepEqual(progress.filter((p) => p.stage === 'model').at(-1), { stage: 'model', loaded: size, total: size });
  const tokens = await collect(engine.generate('Once upon a time', { temperature: 0, maxTokens: 404 }));
  assert.equal(tokens.map((t) => t.text).join(''), GREEDY);
  assert.equal(engine.lastResult.stopReason, 'eos');
  assert.equal(engine.lastResult.text, GREEDY);
  assert.equal(engine.lastResult.nGenerated, tokens.length);
  assert.ok(tokens.every((t) => typeof t.id === 'number' && t.prob > 0));
});

test('tokenize, detokenize and complete()', async () => {
  const ids = await engine.tokenize('héllo ✓');
  assert.ok(ids instanceof Int32Array);
  assert.equal(await engine.detokenize(ids), 'héllo ✓');
  assert.deepEqual([...await engine.tokenize('Once upon a time', { bos: false })], [403, 407, 261, 378]);
  const seen = [];
  const r = await engine.complete('Once upon a time', { temperature: 0.8, topP: 0.9, seed: 42, maxTokens: 50 },
    { onToken: (t) => seen.push(t.text) });
  assert.equal(r.text, seen.join(''));
  const again = await engine.complete('Once upon a time', { temperature: 0.8, topP: 0.9, seed: 42, maxTokens: 50 });
  assert.equal(again.text, r.text);
});

test('C errors cross the boundary as WasmlmError with code and status', async () => {
  await assert.rejects(engine.load({ model: readFileSync(MODEL).subarray(0, 100000), tokenizer: TOKENIZER }),
    (e) => e instanceof WasmlmError && e.code === 'WLM_ERR_TRUNCATED' && e.status === -4 &&
      /100000/.test(e.message));
  assert.equal(engine.info, null);
  await engine.load({ model: MODEL, tokenizer: TOKENIZER });
  await assert.rejects(engine.complete('x', { topP: 1.5 }), { name: 'WasmlmError', code: 'WLM_ERR_INVALID_ARG' });
});

test('abort after the 3rd token: AbortError, at most one more token, then usable', async () => {
  const controller = new AbortController();
  let count = 0;
  let afterAbort = 0;
  await assert.rejects(async () => {
    for await (const _ of engine.generate('Once upon a time', { temperature: 0, maxTokens: 0 },
      { signal: controller.signal })) {
      count++;
      if (controller.signal.aborted) afterAbort++;
      if (count === 3) controller.abort();
    }
  }, (e) => e instanceof DOMException && e.name === 'AbortError');
  assert.ok(count >= 3 && afterAbort <= 1, `${count} ${afterAbort}`);
  assert.equal(engine.lastResult.stopReason, 'aborted');
  const r = await engine.complete('Once upon a time', { temperature: 0, maxTokens: 40 });
  assert.ok(GREEDY.startsWith(r.text) && r.nGenerated === 40);
});

test('breaking out early stops the worker\'s generation before the next request', async () => {
  let n = 0;
  for await (const _ of engine.generate('Once upon a time', { temperature: 0, maxTokens: 0 })) {
    if (++n === 2) break;
  }
  // Would fail with WLM_ERR_STATE if the worker were still generating.
  const r = await engine.complete('Once upon a time', { temperature: 0, maxTokens: 20 });
  assert.ok(GREEDY.startsWith(r.text) && r.nGenerated === 20);
});

test('abort a load in the worker', async () => {
  const controller = new AbortController();
  controller.abort();
  await assert.rejects(engine.load({ model: MODEL, tokenizer: TOKENIZER, signal: controller.signal }),
    { name: 'AbortError' });
  // A server that sends the first 64 KiB of the model and then stalls: the load can only end
  // by the abort.
  const body = readFileSync(MODEL);
  const server = createServer((req, res) => {
    res.writeHead(200, { 'Content-Length': body.length });
    res.write(body.subarray(0, 65536));
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  try {
    const c2 = new AbortController();
    const p = engine.load({
      model: `http://127.0.0.1:${server.address().port}/m.bin`, tokenizer: TOKENIZER, signal: c2.signal,
      onProgress: (pr) => { if (pr.loaded > 0) c2.abort(); },
    });
    await assert.rejects(p, { name: 'AbortError' });
    assert.equal(engine.info, null);
  } finally {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  }
  await engine.load({ model: MODEL, tokenizer: TOKENIZER });
  assert.equal(engine.info.vocabSize, 512);
});

test('protocol: every request gets exactly one terminal reply', async () => {
  const w = await webWorkerLike();
  const replies = [];
  w.addEventListener('message', (e) => replies.push(e.data));
  const send = (msg) => w.postMessage(msg);
  const terminal = (id) => replies.filter((r) => r.id === id &&
    (r.type === Reply.RESULT || r.type === Reply.ERROR));
  const until = async (pred) => { while (!pred()) await new Promise((r) => setTimeout(r, 5)); };

  send({ id: 1, type: Req.LOAD, model: MODEL, tokenizer: TOKENIZER }); // before init: an error
  send({ id: 2, type: Req.INIT, options: {} });
  send({ id: 3, type: Req.LOAD, model: MODEL, tokenizer: TOKENIZER, nCtx: 0, kvCache: true });
  send({ id: 4, type: 'bogus' });
  await until(() => [1, 2, 3, 4].every((id) => terminal(id).length));
  assert.equal(terminal(1)[0].type, Reply.ERROR);
  assert.equal(terminal(2)[0].type, Reply.RESULT);
  assert.equal(terminal(3)[0].value.vocabSize, 512);
  assert.ok(replies.some((r) => r.id === 3 && r.type === Reply.PROGRESS));
  assert.match(terminal(4)[0].error.message, /bogus/);

  // The aborts go out from the listener when the 3rd token arrives, not after a polling
  // interval: however fast the worker decodes, it sees them a few tokens later at most.
  let aborted = false;
  w.addEventListener('message', () => {
    if (aborted || replies.filter((r) => r.id === 5 && r.type === Reply.TOKEN).length < 3) return;
    aborted = true;
    send({ id: 6, type: Req.ABORT, target: 5 });
    send({ id: 7, type: Req.ABORT, target: 999 });
  });
  send({ id: 5, type: Req.GENERATE, prompt: 'Once upon a time', params: { temperature: 0, maxTokens: 0 } });
  await until(() => [5, 6, 7].every((id) => terminal(id).length));
  assert.equal(terminal(5)[0].type, Reply.ERROR);
  assert.equal(terminal(5)[0].error.name, 'AbortError');
  assert.equal(terminal(5)[0].lastResult.stopReason, 'aborted');
  assert.equal(terminal(6)[0].value, true);
  assert.equal(terminal(7)[0].value, false);
  const tokens5 = replies.filter((r) => r.id === 5 && r.type === Reply.TOKEN).length;
  assert.ok(tokens5 < 500, `aborted early (${tokens5} tokens)`);

  send({ id: 8, type: Req.FREE });
  await until(() => terminal(8).length);
  // A last request as a barrier instead of a pause: the worker answers in order, so once its
  // reply is here, any second reply to 1..8 would be too.
  send({ id: 9, type: 'barrier' });
  await until(() => terminal(9).length);
  for (const id of [1, 2, 3, 4, 5, 6, 7, 8]) assert.equal(terminal(id).length, 1, `request ${id}`);
  await w.terminate();
});

test('a worker that cannot load the wasm module makes createWorkerEngine reject', async () => {
  await assert.rejects(createWorkerEngine({ worker: await webWorkerLike(), wasm: '/nonexistent/wasmlm.wasm' }),
    (e) => e instanceof WasmlmError && e.code === 'WLM_ERR_IO' && /nonexistent/.test(e.message));
});

test('a dying worker rejects the pending request', async () => {
  const ww = await webWorkerLike();
  const e = await createWorkerEngine({ worker: ww });
  const p = e.load({ model: MODEL, tokenizer: TOKENIZER });
  ww.raw.emit('error', new Error('boom'));
  await assert.rejects(p, /boom/);
  await assert.rejects(e.tokenize('x'), /boom/);
  await e.free();
});

test('free() terminates the worker; later calls reject', async () => {
  const e = await createWorkerEngine({ worker: await webWorkerLike() });
  await e.load({ model: MODEL, tokenizer: TOKENIZER });
  await e.free();
  await assert.rejects(e.tokenize('x'), { code: 'WLM_ERR_STATE' });
  await e.free();
});

test('without Web Workers and no worker option, createWorkerEngine explains', async () => {
  await assert.rejects(createWorkerEngine(), /needs Web Workers/);
});
