// model_store.test.mjs — the model store (js/models/storage/) in Node, on its memory backend, against
// tests/js/_flaky_server.mjs, a loopback server that misbehaves on purpose: 240 randomized
// downloads through every fault (each finished file's sha256 equals the original — or, with no
// pin, one whole version the server sent — and each failure is a WasmlmError that says what went
// wrong), then one case per rule: resume from the stored bytes after an abort (the server's Range
// starts and byte counts), a server that ignores Range, a file that changes, stalls, a short body,
// the sha256 pin, the quota check before any request, one transfer for concurrent callers, the
// hash state lost, writes that overlap the next read (and one that fails), the metadata's pace,
// Cross-Origin Storage, and the management functions of wasmlm/cache. The same
// rules in Chromium and Firefox, on OPFS and with reloads and two tabs: tests/browser/model_store.test.mjs.

import { test, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { startFlakyServer, randomBytes, sha256 } from './_flaky_server.mjs';
import { ModelStore, listModels, isCached, deleteModel, ModelCache } from '../../js/models/cache.js';
import { MemoryBackend } from '../../js/models/storage/memory.js';
import { sha256OfBlob } from '../../js/models/storage/integrity.js';
import { parseContentRange, downloadInto, newMeta } from '../../js/models/storage/download.js';
import { WasmlmError } from '../../js/wasmlm.js';

let srv;
const SEG = 64 * 1024;
const fast = { stallMs: 200, backoffMs: 2, backoffMaxMs: 20 };
const store = (o = {}) => new ModelStore({ backend: new MemoryBackend(), segmentBytes: SEG, ...fast, ...o });
let n = 0;
const file = (size, seed = ++n) => srv.addFile(`t${seed}.bin`, randomBytes(size, seed));
const pathOf = (url) => new URL(url).pathname;

before(async () => { srv = await startFlakyServer({ seed: 11, stallMs: 2000 }); });
after(() => srv.close());
afterEach(() => { srv.clearQueue(); srv.setFaults({}); srv.setThrottle(null); });

test('240 randomized downloads through every fault: right bytes or a clear error, never a mixed file', { timeout: 120_000 }, async () => {
  srv.setFaults({ drop: 0.2, norange: 0.05, change: 0.05, badlength: 0.05, shortlength: 0.05, badrange: 0.05, long: 0.05, stall: 0.02, error: 0.05 });
  srv.reseed(Number(process.env.WASMLM_FLAKY_SEED) || 1234); // another seed: WASMLM_FLAKY_SEED
  // Every other download in bounded ranges that cut across segments (in Node none is asked for
  // ahead: the browser tests do that), the others in one open-ended request per attempt.
  const ranged = store({ retries: 10, maxRestarts: 4, stallMs: 150, requestBytes: 100_003 });
  const open = store({ retries: 10, maxRestarts: 4, stallMs: 150, requestBytes: 0 });
  const seen = { ok: 0, failed: 0, faults: new Set(), codes: {} };
  for (let i = 0; i < 240; i++) {
    const size = 64 * 1024 + ((i * 7919) % (1 << 20)) + (i % 5); // 64 KB … 1.1 MB, odd sizes too
    const f = file(size, 10_000 + i);
    const pinned = i % 4 !== 0;
    const s = i % 2 ? ranged : open;
    try {
      const m = await s.download(f.url, { sha256: pinned ? f.sha256 : null, size: i % 3 ? f.size : null });
      const actual = await sha256OfBlob(m.blob);
      assert.equal(actual, m.sha256, 'the result names the digest of its bytes');
      if (pinned) assert.equal(actual, f.sha256, `download ${i}: the pinned file`);
      else assert.ok(actual === f.sha256 || f.versions.includes(actual), `download ${i}: one whole version, not a mix: ${JSON.stringify(srv.stats(pathOf(f.url)))} ${m.blob.size} of ${f.size}`);
      seen.ok++;
    } catch (e) {
      assert.ok(e instanceof WasmlmError, `download ${i}: ${e?.stack ?? e}`);
      assert.ok(['WLM_ERR_IO', 'WLM_ERR_CHECKSUM'].includes(e.code), e.code);
      assert.match(e.message, /t\d+\.bin/, 'the error names the file');
      assert.equal(await s.get(f.url), null, 'a failed file is not returned');
      seen.failed++;
      seen.codes[`${e.code}/${e.mismatch ?? (e.partial ? 'partial' : '')}`] = (seen.codes[`${e.code}/${e.mismatch ?? ''}`] ?? 0) + 1;
    }
    for (const x of srv.stats(pathOf(f.url)).faults) if (x) seen.faults.add(x);
  }
  srv.setFaults({});
  assert.deepEqual([...seen.faults].sort(), ['badlength', 'badrange', 'change', 'drop', 'error', 'long', 'norange', 'shortlength', 'stall']);
  assert.ok(seen.ok >= 200, `${seen.ok} finished, ${seen.failed} failed: ${JSON.stringify(seen.codes)}`);
});

test('an aborted download keeps its bytes; the next one resumes with a Range request from them', async () => {
  const f = file(600_000);
  srv.setThrottle({ bytes: 16 * 1024, ms: 5 });
  const s = store();
  const ac = new AbortController();
  const progress = [];
  await assert.rejects(s.download(f.url, { sha256: f.sha256, signal: ac.signal, onProgress: (p) => {
    progress.push(p);
    if (p.loaded >= 200_000) ac.abort();
  } }), { name: 'AbortError' });
  srv.setThrottle(null);
  const [entry] = (await s.list()).filter((e) => e.url === f.url);
  assert.equal(entry.complete, false);
  assert.ok(entry.done >= 200_000 && entry.done < f.size, `${entry.done} bytes stored`);
  assert.equal(await s.get(f.url), null, 'a partial file is never handed out');
  assert.equal(await s.has(f.url), false);
  const p0 = progress.at(-1);
  assert.ok(p0.total === f.size && p0.bytesPerSec > 0 && p0.secondsLeft > 0, JSON.stringify(p0));

  const reports = [];
  const m = await s.download(f.url, { sha256: f.sha256, onProgress: (p) => reports.push(p) });
  const st = srv.stats(pathOf(f.url));
  assert.deepEqual(st.ranges, [null, entry.done], 'the second request starts at the stored bytes');
  assert.equal(m.resumedFrom, entry.done);
  assert.equal(reports[0].resumedFrom, entry.done);
  assert.equal(await sha256OfBlob(m.blob), f.sha256);
  assert.equal(m.verified, true);
  assert.equal(m.fromCache, false);
  const again = await s.download(f.url, { sha256: f.sha256 });
  assert.equal(again.fromCache, true);
  assert.equal(srv.stats(pathOf(f.url)).requests, 2, 'a stored file makes no request');
});

test('requestBytes: a file asked for in bounded ranges, each byte once; a change between them starts over; 0 (Node\'s default): one request', async () => {
  const f = file(1_000_000);
  const m = await store({ requestBytes: 300_000 }).download(f.url, { sha256: f.sha256 });
  assert.equal(await sha256OfBlob(m.blob), f.sha256);
  let st = srv.stats(pathOf(f.url));
  assert.deepEqual(st.ranges, [0, 300_000, 600_000, 900_000]);
  assert.deepEqual(st.ends, [299_999, 599_999, 899_999, 999_999], 'the last range stops at the file\'s end');
  assert.equal(st.bytes, f.size, 'no byte sent twice');

  const g = file(1_000_000);
  srv.queue(null, 'change');
  const m2 = await store({ requestBytes: 300_000 }).download(g.url, { sha256: g.sha256 });
  assert.equal(await sha256OfBlob(m2.blob), g.sha256);
  st = srv.stats(pathOf(g.url));
  assert.equal(st.ranges.indexOf(0, 1) > 0, true, `another version in the second range: started over from 0 (${st.ranges})`);

  const h = file(1_000_000);
  const m3 = await store().download(h.url, { sha256: h.sha256 });
  assert.equal(await sha256OfBlob(m3.blob), h.sha256);
  assert.deepEqual(srv.stats(pathOf(h.url)).ranges, [null]);
  assert.throws(() => store({ requestBytes: -1 }), { code: 'WLM_ERR_INVALID_ARG' });
});

test('requestBytes: ranges go where the URL redirected (one redirect a file), and back to the URL when that address fails', async () => {
  const f = file(1_000_000);
  const via = f.url.replace('/f/', '/r/');
  const m = await store({ requestBytes: 300_000 }).download(via, { sha256: f.sha256 });
  assert.equal(await sha256OfBlob(m.blob), f.sha256);
  assert.equal(srv.stats(pathOf(via)).requests, 1, 'one redirect');
  assert.deepEqual(srv.stats(pathOf(f.url)).ranges, [0, 300_000, 600_000, 900_000]);

  const g = file(1_000_000);
  const viaG = g.url.replace('/f/', '/r/');
  srv.queue(null, 'expired');
  const m2 = await store({ requestBytes: 300_000 }).download(viaG, { sha256: g.sha256 });
  assert.equal(await sha256OfBlob(m2.blob), g.sha256);
  assert.equal(srv.stats(pathOf(viaG)).requests, 2, 'the expired address: redirected again');
  assert.deepEqual(srv.stats(pathOf(g.url)).ranges, [0, 300_000, 300_000, 600_000, 900_000]);
  // Not redirected, a 403 is the answer: no retry.
  const h = file(10_000);
  srv.queue('expired');
  await assert.rejects(store({ requestBytes: 300_000 }).download(h.url), { code: 'WLM_ERR_IO', httpStatus: 403 });
});

test('a drop resumes at once from the byte it stopped at; a server that ignores Range restarts from 0', async () => {
  const f = file(300_000);
  srv.queue('drop', 'norange');
  const m = await store().download(f.url, { sha256: f.sha256 });
  const st = srv.stats(pathOf(f.url));
  assert.equal(st.ranges.length, 2);
  assert.ok(st.ranges[1] > 0, 'the second request asks for the rest');
  assert.deepEqual(st.faults, ['drop', 'norange']);
  assert.equal(await sha256OfBlob(m.blob), f.sha256);
});

test('a server that always ignores Range and keeps dropping fails, saying so, and keeps nothing', async () => {
  const f = file(300_000);
  srv.queue('drop', ...Array(6).fill('norangedrop'));
  const s = store({ retries: 2 });
  await assert.rejects(s.download(f.url, { sha256: f.sha256 }), (e) => {
    assert.equal(e.code, 'WLM_ERR_IO');
    assert.match(e.message, /broke off 3 times and the server cannot resume it \(it ignores Range requests/);
    return true;
  });
  assert.deepEqual(await s.list(), []);
});

test('a file that changes on the server between requests starts over, then fails as changed', async () => {
  const f = file(300_000);
  srv.queue('drop', 'change', null);
  const m = await store().download(f.url, { sha256: f.sha256 });
  assert.equal(await sha256OfBlob(m.blob), f.sha256, 'one restart, then the whole file');
  assert.equal(srv.stats(pathOf(f.url)).ranges[2], null, 'the restart asks for the whole file');

  const g = file(300_000);
  srv.queue('drop', 'change', 'drop', 'change', 'drop', 'change');
  const s = store({ maxRestarts: 2 });
  await assert.rejects(s.download(g.url, { sha256: g.sha256 }), (e) => {
    assert.equal(e.code, 'WLM_ERR_CHECKSUM');
    assert.equal(e.mismatch, 'changed');
    assert.match(e.message, /changed on the server.*partial download was deleted/);
    return true;
  });
  assert.deepEqual((await s.list()).filter((x) => x.url === g.url), [], 'nothing of it stays');
});

test('stalls, short bodies, wrong lengths, bad ranges and 503s are retried to the right bytes', async () => {
  for (const fault of ['stall', 'shortlength', 'badlength', 'badrange', 'long', 'error']) {
    const f = file(200_000);
    srv.queue('drop', fault, fault);
    const m = await store().download(f.url, { sha256: f.sha256 });
    assert.equal(await sha256OfBlob(m.blob), f.sha256, fault);
    assert.deepEqual(srv.stats(pathOf(f.url)).faults.slice(0, 3), ['drop', fault, fault]);
  }
});

test('retries give up with a clear error and keep the stored part for the next try', async () => {
  const f = file(300_000);
  srv.queue(...Array(4).fill('error'));
  const s = store({ retries: 3 });
  await assert.rejects(s.download(f.url, { sha256: f.sha256 }), (e) => {
    assert.equal(e.code, 'WLM_ERR_IO');
    assert.equal(e.partial, true);
    assert.match(e.message, /failed after 4 attempts \(HTTP 503\)/);
    return true;
  });
  const m = await s.download(f.url, { sha256: f.sha256 });
  assert.equal(await sha256OfBlob(m.blob), f.sha256);
  await assert.rejects(s.download(`${srv.origin}/f/missing.bin`), { code: 'WLM_ERR_IO', httpStatus: 404 });
});

test('a sha256 mismatch deletes the file and names both digests', async () => {
  const f = file(100_000);
  const s = store();
  const wrong = 'ab'.repeat(32);
  await assert.rejects(s.download(f.url, { sha256: wrong }), (e) => {
    assert.equal(e.code, 'WLM_ERR_CHECKSUM');
    assert.equal(e.mismatch, 'sha256');
    assert.equal(e.expected, wrong);
    assert.equal(e.actual, f.sha256);
    assert.match(e.message, /deleted/);
    return true;
  });
  assert.deepEqual(await s.list(), []);
});

test('a file larger than the quota left fails before any request, naming both sizes', async () => {
  const f = file(100_000);
  const storage = { estimate: async () => ({ usage: 950_000, quota: 1_000_000 }) };
  const s = store({ storage });
  await assert.rejects(s.download(f.url, { size: f.size }), (e) => {
    assert.equal(e.code, 'WLM_ERR_QUOTA');
    assert.equal(e.needed, f.size);
    assert.equal(e.available, 50_000);
    assert.match(e.message, /needs 0\.1 MB more.*0\.1 MB more|needs 0\.1 MB more.*0\.05? MB/);
    return true;
  });
  assert.equal(srv.stats(pathOf(f.url)).requests, 0, 'not one request');
  // Without a known size, the first response's length is checked before its body is read.
  const big = file(16 << 20);
  await assert.rejects(s.download(big.url), { code: 'WLM_ERR_QUOTA', needed: big.size });
  assert.equal(srv.stats(pathOf(big.url)).requests, 1);
  assert.ok(srv.stats(pathOf(big.url)).bytes < big.size, 'the body was not read');
  // In ranges: the first range's Content-Range total, before its body.
  const big2 = file(16 << 20);
  const ranged = store({ storage, requestBytes: 1 << 20 });
  await assert.rejects(ranged.download(big2.url), { code: 'WLM_ERR_QUOTA', needed: big2.size });
  assert.deepEqual(srv.stats(pathOf(big2.url)).ranges, [0], 'no range after the first');
  assert.deepEqual(await ranged.list(), []);
  assert.deepEqual(await s.list(), []);
});

test('concurrent calls for one file share one transfer', async () => {
  const f = file(400_000);
  const s = store();
  const [a, b] = await Promise.all([s.download(f.url, { sha256: f.sha256 }), s.download(f.url, { sha256: f.sha256 })]);
  assert.equal(srv.stats(pathOf(f.url)).requests, 1);
  assert.equal(await sha256OfBlob(a.blob), f.sha256);
  assert.equal(b.blob.size, f.size);
});

test('a lost hash state is rebuilt from the stored bytes', async () => {
  const f = file(400_000);
  const backend = new MemoryBackend();
  const s = store({ backend });
  const ac = new AbortController();
  srv.setThrottle({ bytes: 16 * 1024, ms: 5 });
  await assert.rejects(s.download(f.url, { sha256: f.sha256, signal: ac.signal,
    onProgress: (p) => { if (p.loaded > 150_000) ac.abort(); } }), { name: 'AbortError' });
  srv.setThrottle(null);
  const [key] = await backend.keys();
  const meta = await backend.readMeta(key);
  await backend.writeMeta(key, { ...meta, hashState: 'bm90IGEgc3RhdGU=' });
  const m = await s.download(f.url, { sha256: f.sha256 });
  assert.equal(m.resumedFrom, meta.done);
  assert.equal(await sha256OfBlob(m.blob), f.sha256);
});

test('Cross-Origin Storage: a verified file is offered to it, and served from it to another store', async () => {
  const files = new Map();
  const handle = (hash) => ({
    getFile: async () => files.get(hash),
    createWritable: async () => { const parts = []; return { write: async (b) => parts.push(b), close: async () => files.set(hash, new Blob(parts)) }; },
  });
  const navigator = { crossOriginStorage: { async requestFileHandles([h], { create = false } = {}) {
    assert.equal(h.algorithm, 'SHA-256');
    if (!create && !files.has(h.value)) throw new DOMException('no such file', 'NotFoundError');
    return [handle(h.value)];
  } } };
  const f = file(100_000);
  await store({ navigator }).download(f.url, { sha256: f.sha256 });
  for (let i = 0; i < 50 && !files.has(f.sha256); i++) await new Promise((r) => setTimeout(r, 10));
  assert.ok(files.has(f.sha256));
  const m = await store({ navigator }).download(f.url, { sha256: f.sha256 });
  assert.equal(m.from, 'cross-origin');
  assert.equal(srv.stats(pathOf(f.url)).requests, 1, 'the second store made no request');
  assert.equal(await sha256OfBlob(m.blob), f.sha256);
});

test('wasmlm/cache: listModels, isCached (URL or id), deleteModel, options checked', async () => {
  const f = file(100_000);
  const s = store();
  const cache = new ModelCache(); // no Cache Storage in Node: no older entries
  await s.download(f.url, { sha256: f.sha256, id: 'tiny' });
  const list = await listModels({ store: s, cache });
  assert.equal(list.length, 1);
  assert.deepEqual({ ...list[0], storedAt: null, updatedAt: null }, {
    url: f.url, id: 'tiny', name: pathOf(f.url).slice(3), size: f.size, done: f.size, complete: true, verified: true,
    sha256: f.sha256, storedAt: null, updatedAt: null, store: 'memory' });
  assert.ok(!Number.isNaN(Date.parse(list[0].storedAt)));
  assert.equal(await isCached('tiny', { store: s, cache }), true);
  assert.equal(await isCached(f.url, { store: s, cache }), true);
  assert.equal(await isCached('other', { store: s, cache }), false);
  assert.equal(await deleteModel('tiny', { store: s, cache }), true);
  assert.equal(await isCached(f.url, { store: s, cache }), false);
  assert.equal(await deleteModel('tiny', { store: s, cache }), false);
  assert.throws(() => new ModelStore({ segmentbytes: 1 }), { code: 'WLM_ERR_INVALID_ARG', message: /new ModelStore\(\): unknown option "segmentbytes" \(did you mean "segmentBytes"\?\)/ });
  await assert.rejects(s.download(f.url, { sha: 'x' }), { code: 'WLM_ERR_INVALID_ARG', message: /download\(\): unknown option "sha"/ });
  assert.deepEqual(await s.estimate(), { usage: null, quota: null, available: null });
  const asked = [];
  const p = store({ storage: { persisted: async () => false, persist: async () => { asked.push(1); return true; } } });
  assert.deepEqual(await p.persist({ reason: 'models are large' }), { persisted: true, asked: true, reason: 'models are large' });
  assert.deepEqual(await p.persist(), { persisted: false, asked: false, reason: null });
  assert.equal(asked.length, 1, 'asked once');
});

test('parseContentRange', () => {
  assert.deepEqual(parseContentRange('bytes 5-9/10'), { start: 5, end: 9, total: 10 });
  assert.deepEqual(parseContentRange('bytes 0-0/*'), { start: 0, end: 0, total: null });
  assert.equal(parseContentRange('bytes */10'), null);
  assert.equal(parseContentRange(null), null);
  assert.equal(sha256(Buffer.from('')), 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
});

test('concurrent calls with different pins take turns: the wrong pin fails, the right one is stored once', async () => {
  const f = file(200_000);
  const s = store();
  const [a, b] = await Promise.allSettled([s.download(f.url, { sha256: 'cd'.repeat(32) }), s.download(f.url, { sha256: f.sha256 })]);
  assert.equal(a.status, 'rejected');
  assert.equal(a.reason.mismatch, 'sha256');
  assert.equal(b.status, 'fulfilled');
  assert.equal(await sha256OfBlob(b.value.blob), f.sha256);
  assert.equal(srv.stats(pathOf(f.url)).requests, 2, 'one after the other');
});

test('a partial download is continued by a call that adds the size or the pin it lacked, and dropped by one that contradicts them', async () => {
  const f = file(500_000);
  const s = store();
  const ac = new AbortController();
  srv.setThrottle({ bytes: 16 * 1024, ms: 5 });
  await assert.rejects(s.download(f.url, { signal: ac.signal, onProgress: (p) => { if (p.loaded > 150_000) ac.abort(); } }),
    { name: 'AbortError' });
  srv.setThrottle(null);
  const [entry] = await s.list();
  const m = await s.download(f.url, { sha256: f.sha256, size: f.size });
  assert.equal(m.resumedFrom, entry.done);
  assert.equal(m.verified, true);
  assert.deepEqual(srv.stats(pathOf(f.url)).ranges, [null, entry.done]);

  const g = file(500_000);
  const ac2 = new AbortController();
  srv.setThrottle({ bytes: 16 * 1024, ms: 5 });
  await assert.rejects(s.download(g.url, { size: g.size, signal: ac2.signal, onProgress: (p) => { if (p.loaded > 150_000) ac2.abort(); } }),
    { name: 'AbortError' });
  srv.setThrottle(null);
  await assert.rejects(s.download(g.url, { size: g.size + 1 }), { code: 'WLM_ERR_CHECKSUM', mismatch: 'size' });
  assert.deepEqual(srv.stats(pathOf(g.url)).ranges.slice(0, 2), [null, null], 'another size: started over');
});

test('the reads of a body are written, hashed and reported in steps of up to 4 MiB (or 100 ms), not one a read', async () => {
  // Each step leaves objects for the garbage collector (in a browser: a message to the OPFS
  // worker and back, a progress report); one per read made Chromium's memory grow with the file.
  const size = 10 << 20;
  const CHUNK = 64 * 1024; // 160 reads
  const bytes = randomBytes(size, 4242);
  const writes = [];
  const backend = new MemoryBackend();
  const open = backend.openSegment.bind(backend);
  backend.openSegment = async (key, index) => {
    const w = await open(key, index);
    return { ...w, write: (b) => { writes.push(b.byteLength); return w.write(b); } };
  };
  let reads = 0;
  const fetch = async () => new Response(new ReadableStream({
    pull(c) {
      const at = reads++ * CHUNK;
      if (at >= size) c.close(); else c.enqueue(bytes.subarray(at, at + CHUNK));
    },
  }), { status: 200, headers: { 'content-length': String(size) } });
  const reports = [];
  const t0 = performance.now();
  const meta = await downloadInto({ backend, fetch, requestBytes: 0, onProgress: (p) => reports.push(p.loaded),
    meta: newMeta({ key: 'steps', url: 'http://127.0.0.1:9/steps.bin', name: 'steps.bin', sha256: sha256(bytes), size, segmentBytes: 16 << 20 }) });
  const ms = performance.now() - t0;
  assert.equal(meta.verified, true);
  assert.equal(await sha256OfBlob(await backend.blob('steps', meta.segments.length)), sha256(bytes));
  assert.ok(reads > 160, `${reads} reads`);
  assert.equal(writes.reduce((a, b) => a + b, 0), size);
  const most = Math.ceil(size / (4 << 20)) + Math.ceil(ms / 100);
  assert.ok(writes.length <= most, `${writes.length} writes in ${Math.round(ms)} ms for ${reads} reads (at most ${most})`);
  assert.ok(reports.length <= most + 1, `${reports.length} progress reports`);
  assert.equal(reports.at(-1), size);
});

/** A Response of `bytes` read in chunks of `chunk`, its stream paced by `delayMs` a read. */
const bodyOf = (bytes, { chunk = 64 * 1024, delayMs = 0, signal } = {}) => {
  let at = 0;
  return new Response(new ReadableStream({
    async pull(c) {
      if (delayMs) await new Promise((r) => setTimeout(r, delayMs));
      if (signal?.aborted) { c.error(signal.reason); return; }
      if (at >= bytes.byteLength) c.close(); else { c.enqueue(bytes.slice(at, at + chunk)); at += chunk; }
    },
  }), { status: 200, headers: { 'content-length': String(bytes.byteLength) } });
};

test('a writer that copies takes the next step while it stores the last: one write in flight, the bytes intact; a write that fails keeps only whole segments', async () => {
  const size = 20 << 20;
  const bytes = randomBytes(size, 4343);
  const backend = new MemoryBackend();
  const open = backend.openSegment.bind(backend);
  let inFlight = 0;
  let most = 0;
  let writes = 0;
  let failAt = 0; // the write that rejects (0: none)
  const closed = [];
  backend.openSegment = async (key, index) => {
    const w = await open(key, index);
    return {
      ...w,
      write: (b) => {
        const done = w.write(b); // (copies now, as the OPFS worker's writer does)
        const n = ++writes;
        inFlight++;
        most = Math.max(most, inFlight);
        return (async () => {
          await done;
          await new Promise((r) => setTimeout(r, 5)); // stored later
          inFlight--;
          if (n === failAt) throw new DOMException('the disk is full', 'QuotaExceededError');
        })();
      },
      close: async () => { await w.close(); closed.push(index); },
    };
  };
  const meta = newMeta({ key: 'pipe', url: 'http://127.0.0.1:9/pipe.bin', name: 'pipe.bin', sha256: sha256(bytes), size, segmentBytes: 1 << 20 });
  const m = await downloadInto({ backend, meta, fetch: async () => bodyOf(bytes), requestBytes: 0 });
  assert.equal(m.verified, true);
  assert.equal(await sha256OfBlob(await backend.blob('pipe', m.segments.length)), sha256(bytes), 'the reused step buffer never reached the file');
  assert.equal(most, 1, 'one write in flight');
  assert.ok(writes >= 20, `${writes} writes`);

  // Write 3 fails after its bytes were handed over (8 MiB segments, a write per 4 MiB step: the
  // first half of segment 1), found when write 4 is handed over.
  writes = 0;
  failAt = 3;
  closed.length = 0;
  const meta2 = newMeta({ key: 'pipe2', url: 'http://127.0.0.1:9/pipe2.bin', name: 'pipe2.bin', sha256: sha256(bytes), size, segmentBytes: 8 << 20 });
  await assert.rejects(downloadInto({ backend, meta: meta2, fetch: async () => bodyOf(bytes), requestBytes: 0 }),
    (e) => { assert.equal(e.code, 'WLM_ERR_QUOTA'); assert.match(e.message, /storage filled up/); return true; });
  const kept = await backend.readMeta('pipe2');
  assert.deepEqual(closed, [0], 'the segment whose write failed is not committed');
  assert.deepEqual(kept.segments, [8 << 20], 'the stop writes what was committed');
  assert.equal(kept.done, 8 << 20);
  failAt = 0;
  let from = null;
  const resumed = await downloadInto({ backend, meta: kept, requestBytes: 0, fetch: async (url, init) => {
    from = init.headers.Range;
    return new Response(bytes.slice(kept.done), { status: 206, headers: { 'content-range': `bytes ${kept.done}-${size - 1}/${size}` } });
  } });
  assert.equal(from, `bytes=${8 << 20}-`);
  assert.equal(resumed.verified, true, 'the saved hash state matches the committed bytes');
});

test('the metadata of a partial file is written at most about once a second while segments commit, and on every stop', async () => {
  const size = 24 << 20;
  const bytes = randomBytes(size, 4444);
  const backend = new MemoryBackend();
  const writeMeta = backend.writeMeta.bind(backend);
  let metaWrites = 0;
  backend.writeMeta = async (key, meta) => { metaWrites++; return writeMeta(key, meta); };
  const t0 = performance.now();
  const meta = newMeta({ key: 'meta', url: 'http://127.0.0.1:9/meta.bin', name: 'meta.bin', sha256: sha256(bytes), size, segmentBytes: 256 * 1024 });
  const m = await downloadInto({ backend, meta, fetch: async () => bodyOf(bytes), requestBytes: 0 });
  const s = (performance.now() - t0) / 1000;
  assert.equal(m.segments.length, 96);
  // The first write (before any byte), one a second at most while it runs, the last (complete).
  assert.ok(metaWrites <= 3 + Math.floor(s), `${metaWrites} metadata writes for 96 segments in ${s.toFixed(2)} s`);

  // A stop (here an abort) writes every segment committed by then, however recent.
  const ac = new AbortController();
  metaWrites = 0;
  const meta2 = newMeta({ key: 'meta2', url: 'http://127.0.0.1:9/meta2.bin', name: 'meta2.bin', sha256: sha256(bytes), size, segmentBytes: 256 * 1024 });
  let seen = 0;
  await assert.rejects(downloadInto({ backend, meta: meta2, signal: ac.signal, requestBytes: 0,
    fetch: async (url, init) => bodyOf(bytes, { chunk: 128 * 1024, delayMs: 1, signal: init.signal }),
    onProgress: (p) => { seen = p.loaded; if (p.loaded >= 3 << 20) ac.abort(); } }), { name: 'AbortError' });
  const kept = await backend.readMeta('meta2');
  assert.ok(seen >= 3 << 20);
  assert.equal(kept.done, kept.segments.length * 256 * 1024);
  assert.ok(kept.done >= 3 << 20, `${kept.done} bytes recorded at the stop, ${seen} reported`);
  assert.deepEqual(await backend.segmentSizes('meta2', kept.segments.length), kept.segments);
});

test('where OPFS is there but getDirectory() rejects (Safari\'s private windows), the store takes the next backend; backend \'opfs\' says why', async () => {
  const had = Object.getOwnPropertyDescriptor(globalThis, 'FileSystemFileHandle');
  globalThis.FileSystemFileHandle = class { createWritable() {} }; // (the method exists, as in Safari)
  try {
    const storage = { getDirectory: async () => { throw new DOMException('The operation failed for an unknown transient reason (e.g. out of memory).', 'UnknownError'); } };
    assert.equal(await new ModelStore({ storage, caches: null }).kind(), 'memory');
    await assert.rejects(new ModelStore({ storage, caches: null, backend: 'opfs' }).kind(),
      (e) => e.code === 'WLM_ERR_UNSUPPORTED' && /Origin Private File System is unavailable here: The operation failed/.test(e.message));
  } finally {
    if (had) Object.defineProperty(globalThis, 'FileSystemFileHandle', had); else delete globalThis.FileSystemFileHandle;
  }
});
