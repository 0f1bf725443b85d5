// loading.test.mjs — load() from every kind of source (path, file: URL, http URL with and
// without Content-Length, Blob, bytes), progress, download failures, bad files, and the engine
// staying usable after each failure.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { createEngine, WasmlmError } from '../../js/wasmlm.js';
import { BIG_TOKENIZER, MODEL, TOKENIZER, referenceText } from './_helpers.mjs';

const MODEL_BYTES = readFileSync(MODEL);
const TOKENIZER_BYTES = readFileSync(TOKENIZER);
const GREEDY = referenceText('stories260K_run.c_greedy_OnceUponATime_404.txt')
  .slice('Once upon a time'.length);

const engine = await createEngine();

/** Checks the engine has stories260K loaded and generates run.c's greedy text. */
async function assertWorks(e = engine) {
  assert.equal(e.info?.vocabSize, 512);
  const r = await e.complete('Once upon a time', { temperature: 0, maxTokens: 30 });
  assert.equal(r.nGenerated, 30);
  assert.ok(r.text.length > 60 && GREEDY.startsWith(r.text), r.text);
}

// A local server: /stories260K.bin and /tok512.bin with Content-Length, /chunked/… without
// (chunked transfer encoding), anything else 404.
let server;
let base;
let requests = [];
before(async () => {
  server = createServer((req, res) => {
    requests.push(req.url);
    const files = { 'stories260K.bin': MODEL_BYTES, 'tok512.bin': TOKENIZER_BYTES };
    const m = /^\/(chunked\/)?([\w.]+)$/.exec(req.url);
    const body = m && files[m[2]];
    if (!body) {
      res.writeHead(404, { 'Content-Type': 'text/plain' });
      res.end('not here');
      return;
    }
    if (m[1]) { // no Content-Length: several chunks
      res.writeHead(200, { 'Content-Type': 'application/octet-stream' });
      for (let off = 0; off < body.length; off += 65536) res.write(body.subarray(off, off + 65536));
      res.end();
    } else {
      res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': body.length });
      res.end(body);
    }
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${server.address().port}`;
});
after(() => new Promise((r) => server.close(r)));

test('a truncated model gives WLM_ERR_TRUNCATED naming both sizes', async () => {
  const err = await engine.load({ model: MODEL_BYTES.subarray(0, 100000), tokenizer: TOKENIZER })
    .then(() => null, (e) => e);
  assert.ok(err instanceof WasmlmError, String(err));
  assert.equal(err.name, 'WasmlmError');
  assert.equal(err.code, 'WLM_ERR_TRUNCATED');
  assert.equal(err.status, -4);
  assert.match(err.message, /\b100000\b/);
  const sizes = (err.message.match(/\d{6,}/g) ?? []).map(Number);
  assert.ok(sizes.some((n) => n > 100000), `expected size in: ${err.message}`);
  assert.equal(engine.info, null);
});

test('a tokenizer for another vocabulary gives WLM_ERR_TOKENIZER', async () => {
  await assert.rejects(engine.load({ model: MODEL, tokenizer: BIG_TOKENIZER }), (e) => {
    assert.ok(e instanceof WasmlmError);
    assert.equal(e.code, 'WLM_ERR_TOKENIZER');
    assert.equal(e.status, -6);
    assert.ok(e.message.length > 20 && e.message !== 'WLM_ERR_TOKENIZER', e.message);
    return true;
  });
  assert.equal(engine.info, null);
  await assert.rejects(engine.tokenize('x'), { code: 'WLM_ERR_STATE' });
});

test('garbage bytes give WLM_ERR_FORMAT; a truncated tokenizer WLM_ERR_TRUNCATED', async () => {
  await assert.rejects(engine.load({ model: new Uint8Array(4096).fill(0xff), tokenizer: TOKENIZER }),
    { name: 'WasmlmError', code: 'WLM_ERR_FORMAT' });
  await assert.rejects(engine.load({ model: MODEL, tokenizer: TOKENIZER_BYTES.subarray(0, 3000) }),
    { name: 'WasmlmError', code: 'WLM_ERR_TRUNCATED' });
});

test('after failed loads, the right files load (file path) and generate', async () => {
  const progress = [];
  const info = await engine.load({ model: MODEL, tokenizer: TOKENIZER, onProgress: (p) => progress.push(p) });
  assert.equal(info, engine.info);
  await assertWorks();
  const last = (stage) => progress.filter((p) => p.stage === stage).at(-1);
  assert.deepEqual(last('model'), { stage: 'model', loaded: MODEL_BYTES.length, total: MODEL_BYTES.length });
  assert.deepEqual(last('tokenizer'), { stage: 'tokenizer', loaded: TOKENIZER_BYTES.length, total: TOKENIZER_BYTES.length });
});

test('many failed loads do not break the engine (every buffer is freed)', async () => {
  for (let i = 0; i < 20; i++) {
    await assert.rejects(engine.load({ model: MODEL_BYTES.subarray(0, 1000000), tokenizer: TOKENIZER }),
      { code: 'WLM_ERR_TRUNCATED' });
    await assert.rejects(engine.load({ model: MODEL, tokenizer: BIG_TOKENIZER }),
      { code: 'WLM_ERR_TOKENIZER' });
  }
  await engine.load({ model: MODEL, tokenizer: TOKENIZER });
  await assertWorks();
});

test('load from http URLs reports progress with total = file size', async () => {
  const progress = [];
  await engine.load({
    model: `${base}/stories260K.bin`, tokenizer: new URL('/tok512.bin', base),
    onProgress: (p) => progress.push({ ...p }),
  });
  await assertWorks();
  const model = progress.filter((p) => p.stage === 'model');
  assert.ok(model.length >= 2);
  assert.ok(model.every((p) => p.total === MODEL_BYTES.length));
  assert.equal(model.at(-1).loaded, MODEL_BYTES.length);
  for (let i = 1; i < model.length; i++) assert.ok(model[i].loaded >= model[i - 1].loaded);
  const tok = progress.filter((p) => p.stage === 'tokenizer');
  assert.ok(tok.every((p) => p.total === TOKENIZER_BYTES.length));
  assert.equal(tok.at(-1).loaded, TOKENIZER_BYTES.length);
});

test('load from a URL without Content-Length grows the buffer; total 0 until the end', async () => {
  const progress = [];
  await engine.load({
    model: `${base}/chunked/stories260K.bin`, tokenizer: `${base}/chunked/tok512.bin`,
    onProgress: (p) => progress.push({ ...p }),
  });
  await assertWorks();
  const model = progress.filter((p) => p.stage === 'model');
  assert.ok(model.length > 3, 'several chunks arrived');
  assert.ok(model.slice(0, -1).every((p) => p.total === 0));
  assert.deepEqual(model.at(-1), { stage: 'model', loaded: MODEL_BYTES.length, total: MODEL_BYTES.length });
});

test('a 404 rejects with a message naming the URL and status; the engine stays usable', async () => {
  await engine.load({ model: MODEL, tokenizer: TOKENIZER });
  const url = `${base}/missing.bin`;
  await assert.rejects(engine.load({ model: url, tokenizer: TOKENIZER }), (e) => {
    assert.ok(e instanceof WasmlmError);
    assert.equal(e.code, 'WLM_ERR_IO');
    assert.equal(e.httpStatus, 404);
    assert.ok(e.message.includes('404') && e.message.includes(url), e.message);
    return true;
  });
  // The tokenizer can fail too, after the model downloaded.
  await assert.rejects(engine.load({ model: MODEL, tokenizer: `${base}/nope` }), /404/);
  assert.equal(engine.info, null, 'loading frees the old model first');
  await engine.load({ model: MODEL, tokenizer: TOKENIZER });
  await assertWorks();
});

test('a network failure (nothing listening) names the URL', async () => {
  const dead = createServer();
  await new Promise((r) => dead.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${dead.address().port}/x.bin`;
  await new Promise((r) => dead.close(r));
  await assert.rejects(engine.load({ model: url, tokenizer: TOKENIZER }),
    (e) => e.code === 'WLM_ERR_IO' && e.message.includes(url));
});

test('a missing file names the path', async () => {
  await assert.rejects(engine.load({ model: '/nonexistent/model.bin', tokenizer: TOKENIZER }),
    (e) => e.code === 'WLM_ERR_IO' && e.message.includes('/nonexistent/model.bin'));
});

test('load from Blob, ArrayBuffer, Uint8Array view and file: URL', async () => {
  const progress = [];
  await engine.load({
    model: new Blob([MODEL_BYTES]), tokenizer: TOKENIZER_BYTES.buffer.slice(
      TOKENIZER_BYTES.byteOffset, TOKENIZER_BYTES.byteOffset + TOKENIZER_BYTES.length),
    onProgress: (p) => progress.push(p),
  });
  await assertWorks();
  assert.ok(progress.filter((p) => p.stage === 'model').every((p) => p.total === MODEL_BYTES.length));
  // Read in one step (js/models/source.js reads a Blob 16 MB at a time, not in Blob.stream()'s 64 KB
  // chunks: an await and a progress report, in a worker a message to the page, each).
  assert.deepEqual(progress.filter((p) => p.stage === 'model').map((p) => p.loaded), [0, MODEL_BYTES.length]);
  // A view into a larger buffer: only the view's bytes count.
  const big = new Uint8Array(MODEL_BYTES.length + 100);
  big.set(MODEL_BYTES, 50);
  await engine.load({ model: big.subarray(50, 50 + MODEL_BYTES.length), tokenizer: pathToFileURL(TOKENIZER) });
  await assertWorks();
});

test('a file is read in one step per 16 MB, without a last empty read', async () => {
  const progress = [];
  await engine.load({ model: MODEL, tokenizer: TOKENIZER, onProgress: (p) => progress.push(p) });
  assert.deepEqual(progress.filter((p) => p.stage === 'model').map((p) => p.loaded), [0, MODEL_BYTES.length]);
  await assertWorks();
});

test('an AbortSignal stops a load with AbortError; the engine stays usable', async () => {
  const controller = new AbortController();
  const load = engine.load({
    model: `${base}/chunked/stories260K.bin`, tokenizer: TOKENIZER, signal: controller.signal,
    onProgress: (p) => { if (p.loaded > 100000) controller.abort(); },
  });
  await assert.rejects(load, { name: 'AbortError' });
  assert.equal(engine.info, null);
  await engine.load({ model: MODEL, tokenizer: TOKENIZER });
  await assertWorks();
});

test('an abort while waiting for bytes (any abort reason) rejects with AbortError', async () => {
  // This server sends 64 KiB and stalls: the abort lands inside fetch's read.
  const stalled = createServer((req, res) => {
    res.writeHead(200, { 'Content-Length': MODEL_BYTES.length });
    res.write(MODEL_BYTES.subarray(0, 65536));
  });
  await new Promise((r) => stalled.listen(0, '127.0.0.1', r));
  try {
    const controller = new AbortController();
    let got = 0;
    const load = engine.load({
      model: `http://127.0.0.1:${stalled.address().port}/m.bin`, tokenizer: TOKENIZER,
      signal: controller.signal,
      onProgress: (p) => {
        got = p.loaded;
        if (p.loaded > 0) setTimeout(() => controller.abort(new Error('my own reason')), 20);
      },
    });
    await assert.rejects(load, (e) => e instanceof DOMException && e.name === 'AbortError');
    assert.equal(got, 65536);
  } finally {
    stalled.closeAllConnections();
    await new Promise((r) => stalled.close(r));
  }
  await engine.load({ model: MODEL, tokenizer: TOKENIZER });
  await assertWorks();
});

test('nCtx limits the context: a longer prompt gives WLM_ERR_CONTEXT_FULL', async () => {
  const e = await createEngine();
  const info = await e.load({ model: MODEL, tokenizer: TOKENIZER, nCtx: 16 });
  assert.equal(info.nCtx, 16);
  const prompt = 'Once upon a time there was a little girl who lived in a big house with her mom and dad.';
  assert.ok((await e.tokenize(prompt)).length > 16);
  await assert.rejects(e.complete(prompt, { temperature: 0 }),
    { name: 'WasmlmError', code: 'WLM_ERR_CONTEXT_FULL', status: -7 });
  // A prompt that fits generates until the context is full.
  const r = await e.complete('Once upon a time', { temperature: 0, maxTokens: 100 });
  assert.equal(r.stopReason, 'context_full');
  assert.ok(r.nPrompt + r.nGenerated <= 17, `${r.nPrompt} + ${r.nGenerated}`);
  assert.ok(GREEDY.startsWith(r.text));
  await e.free();
});

test('nCtx above the model\'s seqLen is rejected; bad arguments are named', async () => {
  const e = await createEngine();
  await assert.rejects(e.load({ model: MODEL, tokenizer: TOKENIZER, nCtx: 100000 }),
    { code: 'WLM_ERR_INVALID_ARG' });
  await assert.rejects(e.load({ model: MODEL }), { code: 'WLM_ERR_TOKENIZER', message: /tokenizer/ });
  await assert.rejects(e.load({ model: MODEL, tokenizer: TOKENIZER, nCtx: -1 }), { code: 'WLM_ERR_INVALID_ARG' });
  await e.load({ model: MODEL, tokenizer: TOKENIZER });
  await assertWorks(e);
  await e.free();
});

test('a server request log shows the engine fetched each URL once', () => {
  assert.ok(requests.filter((u) => u === '/stories260K.bin').length === 1);
});
