// webkit_store.test.mjs — the model store (js/models/storage/) in WebKit, Safari's engine
// (WebKitGTK's MiniBrowser through WebKitWebDriver, _drivers.mjs), against the misbehaving test
// server (tests/js/_flaky_server.mjs). WebKitGTK 2.50 has no Origin Private File System
// (navigator.storage.getDirectory is missing), so the store falls back to Cache Storage there; it
// must still download in bounded ranges (the next asked for while one is read) through dropped
// connections, changed files, short ranges and 503s to the right bytes — checked here with
// crypto.subtle over the stored Blob — or fail with a WasmlmError that names the file.
// The second test switches on the storage APIs Safari ships and WebKitGTK leaves off (OPFS with
// writable streams, the sync access handle, navigator.storage.estimate) in a MiniBrowser with a
// profile of its own, opened without WebDriver (whose sessions are ephemeral: there, as in
// Safari's private browsing, getDirectory() rejects and the store takes Cache Storage): downloads
// through faults into OPFS, a reload mid-download resuming from the stored bytes, the quota check,
// and a split GGUF loaded by the engine from the parts stored there.
// The same rules in Chromium and Firefox, with OPFS: tests/browser/model_store.test.mjs.
//
//   node --test tests/cross-browser/webkit_store.test.mjs

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createHandler } from '../../tools/serve.mjs';
import { startFlakyServer, randomBytes } from '../js/_flaky_server.mjs';
import { REPO, MODELS, STEP_TIMEOUT } from '../browser/_helpers.mjs';
import { splitGguf } from '../../tools/gguf_split.mjs';
import { launchBrowser, missing, ENGINES, startMiniBrowser } from './_drivers.mjs';

const absent = missing('webkit');
const skip = absent.length ? `webkit: ${absent.join(', ')} missing (apt-get install ${ENGINES.webkit.apt})` : false;

let srv;
/** The OPFS test's page: its files, and what it reported (phase → its JSON, or an error). */
let opfsRun = null;
before(async () => {
  const handler = createHandler(REPO, true, { isolate: false });
  srv = await startFlakyServer({ seed: 21, stallMs: 1000, fallback: (req, res) => {
    const where = req.url.split('?')[0];
    if (where === '/store-opfs.html' && opfsRun) {
      res.writeHead(200, { 'Content-Type': 'text/html', 'Cache-Control': 'no-store' });
      res.end(`<!doctype html><meta charset="utf-8"><title>store (OPFS)</title><script type="module">
        const config = ${JSON.stringify(opfsRun.config)};
        (${opfsPage})(config);
      </script>`);
      return;
    }
    if (where.startsWith('/report/') && opfsRun) {
      let body = '';
      req.on('data', (c) => { body += c; });
      req.on('end', () => {
        opfsRun.report(where.slice('/report/'.length), JSON.parse(body || 'null'));
        res.writeHead(200, { 'Content-Type': 'text/plain' });
        res.end('ok');
      });
      return;
    }
    if (where === '/store-test.html') {
      res.writeHead(200, { 'Content-Type': 'text/html' });
      res.end(`<!doctype html><meta charset="utf-8"><title>store</title><script type="module">
        import * as cache from '/js/models/cache.js';
        window.cache = cache; window.ready = true;
      </script>`);
      return;
    }
    handler(req, res);
  } });
});
after(() => srv?.close());

test('webkit: the model store downloads in ranges through faults into what it has (Cache Storage without OPFS)', { skip, timeout: 6 * STEP_TIMEOUT }, async () => {
  const page = await launchBrowser('webkit');
  try {
    await page.goto(`${srv.origin}/store-test.html`);
    await page.waitFor(() => window.ready === true, null, { what: 'the store module' });
    const has = await page.evaluate(() => ({ opfs: typeof navigator.storage?.getDirectory === 'function',
      caches: typeof globalThis.caches?.open === 'function', locks: typeof navigator.locks?.request === 'function' }));
    const files = Array.from({ length: 12 }, (_, i) => {
      const f = srv.addFile(`webkit-${i}.bin`, randomBytes(200_000 + i * 61_001, 70_000 + i));
      return { ...f, pinned: i % 3 !== 0 };
    });
    srv.setFaults({ drop: 0.2, change: 0.04, shortlength: 0.05, error: 0.05 });
    srv.reseed(22);
    const results = await page.evaluate(async ({ files }) => {
      const store = new window.cache.ModelStore({ segmentBytes: 128 * 1024, requestBytes: 100_003, stallMs: 500,
        backoffMs: 5, backoffMaxMs: 50, retries: 10, maxRestarts: 4 });
      const hex = async (blob) => Array.from(new Uint8Array(await crypto.subtle.digest('SHA-256', await blob.arrayBuffer())),
        (x) => x.toString(16).padStart(2, '0')).join('');
      const out = [];
      for (const f of files) {
        try {
          const m = await store.download(f.url, { sha256: f.pinned ? f.sha256 : null, size: f.size });
          out.push({ ok: true, sha: await hex(m.blob), named: m.sha256, from: m.from });
        } catch (e) {
          out.push({ ok: false, name: e?.name, code: e?.code, message: String(e?.message ?? e), handedOut: (await store.get(f.url)) !== null });
        }
      }
      return out;
    }, { files });
    srv.setFaults({});
    let ok = 0;
    results.forEach((r, i) => {
      const f = files[i];
      if (r.ok) {
        ok++;
        assert.equal(r.from, has.opfs ? 'opfs' : has.caches ? 'cache' : 'memory', `${i}: the backend this engine has`);
        assert.equal(r.sha, r.named, `${i}: the digest the store names is that of its bytes`);
        if (f.pinned) assert.equal(r.sha, f.sha256, `${i}: the pinned file`);
        else assert.ok(r.sha === f.sha256 || f.versions.includes(r.sha), `${i}: one whole version, not a mix`);
      } else {
        assert.equal(r.name, 'WasmlmError', `${i}: ${r.message}`);
        assert.ok(r.message.includes(`webkit-${i}.bin`), r.message);
        assert.equal(r.handedOut, false, `${i}: a failed file is not handed out`);
      }
    });
    assert.ok(ok >= 10, `${ok} of ${files.length} finished: ${JSON.stringify(results.filter((r) => !r.ok))}`);
    const ranges = files.flatMap((f) => srv.stats(new URL(f.url).pathname).ranges);
    assert.ok(ranges.filter((x) => x > 0).length >= files.length * 2, `asked for in ranges: ${ranges.length} requests`);
  } finally {
    srv.setFaults({});
    await page.close();
  }
});

/**
 * The OPFS test's page, run in MiniBrowser (no WebDriver: it reports each phase to /report/NAME
 * and steers the server's faults and throttle through what it reports). Phase 'downloads':
 * randomized downloads through faults; 'partial': a throttled download, the page reloaded once
 * four segments are stored; after the reload, 'resumed': that download again, then the quota check.
 */
async function opfsPage(config) {
  const report = (name, value) => fetch(`/report/${name}`, { method: 'POST', body: JSON.stringify(value) });
  const hex = async (blob) => Array.from(new Uint8Array(await crypto.subtle.digest('SHA-256', await blob.arrayBuffer())),
    (x) => x.toString(16).padStart(2, '0')).join('');
  try {
    const cache = await import('/js/models/cache.js');
    const store = new cache.ModelStore(config.store);
    const phase = sessionStorage.getItem('phase') ?? 'downloads';
    if (phase === 'downloads') {
      const has = { opfs: typeof navigator.storage?.getDirectory === 'function', estimate: typeof navigator.storage?.estimate === 'function',
        locks: typeof navigator.locks?.request === 'function', kind: await store.kind(), writer: await store.writer() };
      const out = [];
      for (const f of config.files) {
        try {
          const m = await store.download(f.url, { sha256: f.pinned ? f.sha256 : null, size: f.size });
          out.push({ ok: true, sha: await hex(m.blob), named: m.sha256, from: m.from });
        } catch (e) {
          out.push({ ok: false, name: e?.name, code: e?.code, message: String(e?.message ?? e), handedOut: (await store.get(f.url)) !== null });
        }
      }
      await report('downloads', { has, out }); // (the server now throttles)
      sessionStorage.setItem('phase', 'partial');
    }
    if ((sessionStorage.getItem('phase')) === 'partial') {
      store.download(config.reload.url, { sha256: config.reload.sha256, size: config.reload.size }).catch(() => {});
      for (;;) {
        const e = (await cache.listModels()).find((x) => x.url === config.reload.url);
        if (e && e.done >= 4 * config.store.segmentBytes) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      sessionStorage.setItem('phase', 'resumed');
      location.reload();
      return;
    }
    await report('reloaded', null); // (the server stops throttling)
    const stored = (await cache.listModels()).find((x) => x.url === config.reload.url);
    const m = await store.download(config.reload.url, { sha256: config.reload.sha256, size: config.reload.size });
    const resumed = { stored, resumedFrom: m.resumedFrom, from: m.from, sha: await hex(m.blob) };
    const estimate = navigator.storage.estimate;
    navigator.storage.estimate = async () => ({ usage: 9_900_000, quota: 10_000_000 });
    let quota = null;
    try {
      await store.download(config.quota.url, { sha256: config.quota.sha256, size: config.quota.size });
    } catch (e) {
      quota = { code: e.code, needed: e.needed, available: e.available, message: e.message };
    } finally {
      navigator.storage.estimate = estimate;
    }
    let model = null; // a split GGUF from OPFS into the engine: logits as the whole file's
    if (config.model) {
      const stored = [];
      for (const part of config.model.parts) stored.push((await store.download(part.url, { sha256: part.sha256, size: part.size })).blob);
      const { createEngine } = await import('/js/wasmlm.js');
      const engine = await createEngine({ threads: 1 });
      const ids = [1, 403, 407, 261, 378];
      await engine.load({ model: stored, nCtx: 64 });
      const a = new Uint8Array((await engine.evalTokens(ids)).buffer.slice(0));
      await engine.load({ model: new Uint8Array(await (await fetch(config.model.whole, { cache: 'no-store' })).arrayBuffer()), nCtx: 64 });
      const w = new Uint8Array((await engine.evalTokens(ids)).buffer.slice(0));
      model = { n: stored.length, len: a.length, same: a.length === w.length && a.every((x, i) => x === w[i]),
        from: (await store.list()).filter((e) => config.model.parts.some((p) => p.url === e.url)).map((e) => e.store) };
    }
    await report('resumed', { resumed, quota, model });
  } catch (e) {
    await report('error', String(e?.stack ?? e));
  }
}

test('webkit with Safari\'s storage APIs: OPFS through faults, a reload that resumes from the stored bytes, the quota', { skip, timeout: 6 * STEP_TIMEOUT }, async () => {
  const SEG = 128 * 1024;
  const files = Array.from({ length: 10 }, (_, i) => {
    const f = srv.addFile(`webkit-opfs-${i}.bin`, randomBytes(200_000 + i * 71_003, 71_000 + i));
    return { url: f.url, sha256: f.sha256, size: f.size, versions: f.versions, pinned: i % 3 !== 0 };
  });
  // (the store writes its metadata at most once a second: at 0.8 MB/s the reload comes when
  // about a quarter of this file is stored)
  const reload = srv.addFile('webkit-opfs-reload.bin', randomBytes(4 << 20, 71_100));
  const quota = srv.addFile('webkit-opfs-quota.bin', randomBytes(300_000, 71_101));
  // A split GGUF of stories260K (tools/gguf_split.mjs), when ../shared has it.
  const whole = path.join(MODELS, 'stories260K.gguf');
  let model = null;
  let splitDir = null;
  if (fs.existsSync(whole)) {
    splitDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'wasmlm-webkit-split-'));
    const parts = splitGguf(whole, { maxBytes: 300 << 10, prefix: path.join(splitDir, 'stories260K') })
      .map((p) => srv.addFile(`webkit-${path.basename(p)}`, fs.readFileSync(p)));
    model = { whole: srv.addFile('webkit-stories260K.gguf', fs.readFileSync(whole)).url, parts: parts.map((f) => ({ url: f.url, sha256: f.sha256, size: f.size })) };
  }
  const reports = {};
  let settle;
  const finished = new Promise((resolve) => { settle = resolve; });
  opfsRun = {
    config: { files, store: { segmentBytes: SEG, requestBytes: 100_003, stallMs: 500, backoffMs: 5, backoffMaxMs: 50, retries: 10, maxRestarts: 4 },
      reload: { url: reload.url, sha256: reload.sha256, size: reload.size }, quota: { url: quota.url, sha256: quota.sha256, size: quota.size }, model },
    report(name, value) {
      reports[name] = value;
      if (name === 'downloads') { srv.setFaults({}); srv.setThrottle({ bytes: 32 * 1024, ms: 40 }); }
      if (name === 'reloaded') srv.setThrottle(null);
      if (name === 'resumed' || name === 'error') settle();
    },
  };
  srv.setFaults({ drop: 0.2, change: 0.04, shortlength: 0.05, error: 0.05 });
  srv.reseed(23);
  const profile = await fsp.mkdtemp(path.join(os.tmpdir(), 'wasmlm-webkit-'));
  const browser = await startMiniBrowser(`${srv.origin}/store-opfs.html`, { profile,
    features: ['FileSystem', 'FileSystemWritableStream', 'AccessHandle', 'StorageAPI', 'StorageAPIEstimate'] });
  try {
    const timer = setTimeout(() => settle(), 5 * STEP_TIMEOUT);
    await finished;
    clearTimeout(timer);
  } finally {
    browser.close();
    srv.setFaults({});
    srv.setThrottle(null);
    opfsRun = null;
    await fsp.rm(profile, { recursive: true, force: true });
    if (splitDir) await fsp.rm(splitDir, { recursive: true, force: true });
  }
  assert.equal(reports.error, undefined, `the page failed: ${reports.error}`);
  assert.ok(reports.downloads && reports.resumed, `the page reported ${Object.keys(reports)}`);
  const { has, out } = reports.downloads;
  assert.deepEqual({ opfs: has.opfs, estimate: has.estimate, locks: has.locks, kind: has.kind }, { opfs: true, estimate: true, locks: true, kind: 'opfs' },
    'the switched-on APIs are there, and the store keeps files in OPFS');
  // WebKitGTK's sync access handle refuses (NotSupportedError) where Safari's writes: the
  // worker's probe sees that and the segments go through createWritable().
  assert.ok(['sync', 'stream'].includes(has.writer), has.writer);
  let ok = 0;
  out.forEach((r, i) => {
    const f = files[i];
    if (r.ok) {
      ok++;
      assert.equal(r.from, 'opfs', `${i}: stored in OPFS`);
      assert.equal(r.sha, r.named, `${i}: the digest the store names is that of its bytes`);
      if (f.pinned) assert.equal(r.sha, f.sha256, `${i}: the pinned file`);
      else assert.ok(r.sha === f.sha256 || f.versions.includes(r.sha), `${i}: one whole version, not a mix`);
    } else {
      assert.equal(r.name, 'WasmlmError', `${i}: ${r.message}`);
      assert.ok(r.message.includes(`webkit-opfs-${i}.bin`), r.message);
      assert.equal(r.handedOut, false, `${i}: a failed file is not handed out`);
    }
  });
  assert.ok(ok >= 8, `${ok} of ${files.length} finished: ${JSON.stringify(out.filter((r) => !r.ok))}`);

  const { resumed, quota: q } = reports.resumed;
  const st = srv.stats(new URL(reload.url).pathname);
  assert.equal(resumed.stored.complete, false, 'the reload left a partial file');
  assert.ok(resumed.stored.done >= 4 * SEG && resumed.stored.done % SEG === 0, `${resumed.stored.done} bytes stored`);
  assert.ok(resumed.resumedFrom >= resumed.stored.done, `${resumed.resumedFrom} ≥ ${resumed.stored.done}`);
  assert.equal(st.ranges[0], 0);
  assert.ok(st.ranges.slice(1).every((x) => x > 0), `never from byte 0 again: ${st.ranges}`);
  assert.ok(st.ranges.includes(resumed.resumedFrom), `a request after the reload starts at the stored bytes: ${JSON.stringify({ ranges: st.ranges, resumed })}`);
  assert.equal(resumed.sha, reload.sha256);
  assert.equal(resumed.from, 'opfs');
  assert.equal(q?.code, 'WLM_ERR_QUOTA');
  assert.equal(q.needed, quota.size);
  assert.equal(q.available, 100_000);
  assert.equal(srv.stats(new URL(quota.url).pathname).requests, 0, 'no request');
  const m = reports.resumed.model;
  if (model) {
    assert.equal(m.n, model.parts.length);
    assert.ok(m.n >= 2 && m.len > 0, JSON.stringify(m));
    assert.deepEqual(m.from, model.parts.map(() => 'opfs'));
    assert.ok(m.same, 'the logits from the parts stored in OPFS equal the whole file\'s');
  }
});
