// cache.test.mjs — js/models/cache.js in Node: downloads with progress from a local HTTP server, the
// errors it raises (HTTP status, network failure, sha256 and size mismatch), that Node (no Cache
// Storage) downloads without keeping anything, and ModelCache against a small in-memory
// CacheStorage (hits, stale checksums, list, delete, clear, a full quota). The browser's real
// Cache Storage is tested by tests/browser/models.test.mjs.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import http from 'node:http';
import { readFileSync } from 'node:fs';
import { ModelCache, CACHE_NAME, download, fetchModel, sha256Hex, fileName } from '../../js/models/cache.js';
import { createEngine, WasmlmError } from '../../js/wasmlm.js';
import { MODEL, TOKENIZER } from './_helpers.mjs';

const MODEL_BYTES = readFileSync(MODEL);
const MODEL_SHA = crypto.createHash('sha256').update(MODEL_BYTES).digest('hex');

let server;
let base;

before(async () => {
  server = http.createServer(async (req, res) => {
    if (req.url === '/model.bin') {
      // Several chunks, so progress is reported more than once.
      res.writeHead(200, { 'Content-Length': String(MODEL_BYTES.length) });
      for (let off = 0; off < MODEL_BYTES.length; off += 256 * 1024) {
        res.write(MODEL_BYTES.subarray(off, off + 256 * 1024));
        await new Promise((r) => setTimeout(r, 5));
      }
      res.end();
    } else if (req.url === '/chunked-slow.bin') {
      res.writeHead(200); // no Content-Length, three chunks
      for (let off = 0; off < 3000; off += 1000) {
        res.write(MODEL_BYTES.subarray(off, off + 1000));
        await new Promise((r) => setTimeout(r, 5));
      }
      res.end();
    } else if (req.url === '/chunked.bin') {
      res.writeHead(200); // no Content-Length: total unknown
      res.end(MODEL_BYTES.subarray(0, 1000));
    } else {
      res.writeHead(404, { 'Content-Type': 'text/plain' });
      res.end('no such file');
    }
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${server.address().port}`;
});

after(() => new Promise((r) => { server.close(r); server.closeAllConnections(); }));

test('download reports progress with the total and a rate, and returns the bytes as a Blob', async () => {
  const reports = [];
  const blob = await download(`${base}/model.bin`, { onProgress: (p) => reports.push(p), sha256: MODEL_SHA });
  assert.ok(blob instanceof Blob);
  assert.equal(blob.size, MODEL_BYTES.length);
  assert.deepEqual(new Uint8Array(await blob.arrayBuffer()), new Uint8Array(MODEL_BYTES));
  assert.ok(reports.length >= 3, `${reports.length} progress reports`);
  assert.equal(reports[0].loaded, 0);
  assert.ok(reports.every((p) => p.total === MODEL_BYTES.length));
  for (let i = 1; i < reports.length; i++) assert.ok(reports[i].loaded >= reports[i - 1].loaded);
  assert.equal(reports.at(-1).loaded, MODEL_BYTES.length);
  assert.ok(reports.at(-1).bytesPerSec > 0);
});

test('a download of unknown length reports total 0 and still returns every byte', async () => {
  const reports = [];
  const blob = await download(`${base}/chunked.bin`, { onProgress: (p) => reports.push(p) });
  assert.equal(blob.size, 1000);
  assert.ok(reports.every((p) => p.total === 0));
});

test("as: 'bytes' returns one Uint8Array (known and unknown length), checksum still checked", async () => {
  const bytes = await download(`${base}/model.bin`, { sha256: MODEL_SHA, as: 'bytes' });
  assert.ok(bytes instanceof Uint8Array && !(bytes instanceof Blob));
  assert.deepEqual(bytes, new Uint8Array(MODEL_BYTES));
  // unknown length, so no preallocated buffer: the chunks joined (the server sends them apart)
  const joined = await download(`${base}/chunked-slow.bin`, { as: 'bytes' });
  assert.deepEqual(joined, new Uint8Array(MODEL_BYTES.subarray(0, 3000)));
  await assert.rejects(download(`${base}/model.bin`, { sha256: '0'.repeat(64), as: 'bytes' }), { code: 'WLM_ERR_CHECKSUM' });
  await assert.rejects(download(`${base}/model.bin`, { as: 'text' }), { code: 'WLM_ERR_INVALID_ARG', message: /as must be/ });
});

test('HTTP 404 is a WasmlmError WLM_ERR_IO with httpStatus and the URL', async () => {
  await assert.rejects(download(`${base}/missing.bin`), (err) => {
    assert.ok(err instanceof WasmlmError);
    assert.equal(err.code, 'WLM_ERR_IO');
    assert.equal(err.httpStatus, 404);
    assert.equal(err.url, `${base}/missing.bin`);
    assert.match(err.message, /HTTP 404/);
    return true;
  });
});

test('a network failure is WLM_ERR_IO without httpStatus, naming network and CORS', async () => {
  // A port nothing listens on: the connection is refused.
  const probe = http.createServer();
  await new Promise((r) => probe.listen(0, '127.0.0.1', r));
  const port = probe.address().port;
  await new Promise((r) => probe.close(r));
  await assert.rejects(download(`http://127.0.0.1:${port}/model.bin`), (err) => {
    assert.equal(err.code, 'WLM_ERR_IO');
    assert.equal(err.httpStatus, undefined);
    assert.match(err.message, /network failed.*CORS/);
    return true;
  });
});

test('a sha256 mismatch is WLM_ERR_CHECKSUM with the expected and the actual digest', async () => {
  const wrong = '0'.repeat(64);
  await assert.rejects(download(`${base}/model.bin`, { sha256: wrong }), (err) => {
    assert.equal(err.code, 'WLM_ERR_CHECKSUM');
    assert.equal(err.expected, wrong);
    assert.equal(err.actual, MODEL_SHA);
    assert.match(err.message, new RegExp(`expected sha256 ${wrong}, got ${MODEL_SHA}`));
    return true;
  });
});

test('without a sha256, a size mismatch is WLM_ERR_CHECKSUM with both sizes', async () => {
  await assert.rejects(download(`${base}/chunked.bin`, { size: 999 }), (err) => {
    assert.equal(err.code, 'WLM_ERR_CHECKSUM');
    assert.equal(err.expected, 999);
    assert.equal(err.actual, 1000);
    return true;
  });
});

test('an aborted download rejects with an AbortError', async () => {
  const controller = new AbortController();
  const promise = download(`${base}/model.bin`, {
    signal: controller.signal,
    onProgress: (p) => { if (p.loaded > 0) controller.abort(); },
  });
  await assert.rejects(promise, { name: 'AbortError' });
});

test('in Node there is no Cache Storage: fetchModel downloads, save() says unavailable', async () => {
  const cache = new ModelCache();
  assert.equal(cache.available, false);
  assert.equal(await cache.match(`${base}/model.bin`), null);
  assert.deepEqual(await cache.list(), []);
  assert.equal(await cache.clear(), 0);
  const m = await fetchModel(`${base}/model.bin`, { sha256: MODEL_SHA });
  assert.equal(m.fromCache, false);
  assert.equal(m.blob.size, MODEL_BYTES.length);
  assert.deepEqual(await m.save(), { stored: false, reason: 'unavailable' });
});

test('the Blob from fetchModel loads into an engine', async () => {
  const engine = await createEngine();
  try {
    const m = await fetchModel(`${base}/model.bin`, { sha256: MODEL_SHA });
    const info = await engine.load({ model: m.blob, tokenizer: TOKENIZER });
    assert.equal(info.vocabSize, 512);
  } finally {
    await engine.free();
  }
});

test('sha256Hex and fileName', async () => {
  assert.equal(await sha256Hex(new Blob([MODEL_BYTES])), MODEL_SHA);
  assert.equal(await sha256Hex(new TextEncoder().encode('abc')),
    'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  assert.equal(fileName('https://h.example/a/b/stories%20260K.bin?x=1'), 'stories 260K.bin');
});

/** Enough of the CacheStorage / Cache interface for ModelCache, in memory. */
class MemoryCaches {
  buckets = new Map();
  quota = Infinity;
  async open(name) {
    if (!this.buckets.has(name)) this.buckets.set(name, new Map());
    const map = this.buckets.get(name);
    const owner = this;
    const key = (req) => (typeof req === 'string' ? req : req.url);
    return {
      async match(url) { const r = map.get(key(url)); return r ? r.clone() : undefined; },
      async put(url, res) {
        const body = await res.arrayBuffer();
        const used = [...map.values()].reduce((n, r) => n + Number(r.headers.get('content-length')), 0);
        if (used + body.byteLength > owner.quota) throw new DOMException('Quota exceeded.', 'QuotaExceededError');
        map.set(key(url), new Response(body, { headers: res.headers }));
      },
      async keys() { return [...map.keys()].map((url) => new Request(url)); },
      async delete(url) { return map.delete(key(url)); },
    };
  }
  async has(name) { return this.buckets.has(name); }
  async delete(name) { return this.buckets.delete(name); }
}

test('ModelCache: put, match, list, stale checksum, delete, clear', async () => {
  const storage = new MemoryCaches();
  const cache = new ModelCache(undefined, { caches: storage });
  assert.equal(cache.available, true);
  assert.equal(cache.name, CACHE_NAME);
  const url = `${base}/model.bin`;

  const first = await fetchModel(url, { cache, sha256: MODEL_SHA });
  assert.equal(first.fromCache, false);
  assert.deepEqual(await first.save(), { stored: true });
  assert.ok(storage.buckets.has(CACHE_NAME));

  const second = await fetchModel(url, { cache, sha256: MODEL_SHA });
  assert.equal(second.fromCache, true);
  assert.equal(second.blob.size, MODEL_BYTES.length);

  const list = await cache.list();
  assert.equal(list.length, 1);
  assert.equal(list[0].url, url);
  assert.equal(list[0].name, 'model.bin');
  assert.equal(list[0].size, MODEL_BYTES.length);
  assert.equal(list[0].sha256, MODEL_SHA);
  assert.match(list[0].storedAt, /^\d{4}-\d\d-\d\dT/);

  // The manifest now names another digest: the stored copy is stale, dropped, and a miss.
  assert.equal(await cache.match(url, { sha256: 'f'.repeat(64) }), null);
  assert.deepEqual(await cache.list(), []);

  await cache.put(url, new Blob([MODEL_BYTES]));
  await cache.put(`${base}/other.bin`, new Blob([new Uint8Array(10)]));
  assert.equal((await cache.list()).length, 2);
  assert.equal(await cache.delete(url), true);
  assert.deepEqual((await cache.list()).map((e) => e.name), ['other.bin']);
  assert.equal(await cache.clear(), 1);
  assert.equal(storage.buckets.has(CACHE_NAME), false);
});

test('ModelCache.put reports a full quota instead of throwing', async () => {
  const storage = new MemoryCaches();
  storage.quota = 1000;
  const cache = new ModelCache(undefined, { caches: storage });
  const result = await cache.put(`${base}/model.bin`, new Blob([MODEL_BYTES]));
  assert.equal(result.stored, false);
  assert.equal(result.reason, 'quota');
  assert.equal(result.error.name, 'QuotaExceededError');
  assert.deepEqual(await cache.list(), []);
});
