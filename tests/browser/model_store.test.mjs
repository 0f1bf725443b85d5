// model_store.test.mjs — the model store (js/models/storage/) in headless Chromium (playwright-core) and
// Firefox (firefox-esr, puppeteer-core over WebDriver BiDi), on the real Origin Private File
// System, Web Locks and BroadcastChannel, against tests/js/_flaky_server.mjs (a loopback server
// that misbehaves on purpose, seeded). In each browser:
//   - 120 randomized downloads (64 KB – 1 MB) through every fault into OPFS, written by a worker's
//     sync access handles (every other 20 in bounded ranges of ~250 KB, each asked for while the
//     last is read; the others in one range of 8 MiB, the default); 20 more with createWritable()
//     instead, 20 on the Cache Storage backend (where OPFS is missing): each finished file's sha256,
//     computed here by crypto.subtle over the stored Blob (not by the store's own hasher), equals
//     the original (or, unpinned, one whole version the server sent); each failure is a
//     WasmlmError naming the file, and the store then hands out nothing for it;
//   - a reload in the middle of a download: the next download's Range request starts at the
//     bytes the stored segments hold (the server's record of the requests);
//   - two tabs that load one model at once: one transfer (the server's byte count), both verified;
//   - ranges through a redirect: one redirect a file, and again after the address fails (a 403);
//   - a storage estimate smaller than the file: the quota error before any request;
//   - a split GGUF downloaded with faults, part by part, loaded by the engine from the stored
//     Blobs: logits bitwise equal to the whole file's, and a partial file is never handed out.
// The Node side of the same rules, with more cases: tests/js/model_store.test.mjs.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createHandler } from '../../tools/serve.mjs';
import { splitGguf } from '../../tools/gguf_split.mjs';
import { startFlakyServer, randomBytes } from '../js/_flaky_server.mjs';
import { REPO, MODELS, CHROMIUM, STEP_TIMEOUT } from './_helpers.mjs';

const FIREFOX = process.env.FIREFOX || '/usr/bin/firefox-esr';
const FAULTS = { drop: 0.2, norange: 0.04, norangedrop: 0.02, change: 0.05, badlength: 0.05, shortlength: 0.05,
  badrange: 0.05, long: 0.05, stall: 0.02, error: 0.05 };
const N = Number(process.env.WASMLM_STORE_DOWNLOADS) || 120; // per browser
const SEG = 128 * 1024;
// The store's options in the page: small segments (so a reload keeps something of a small file),
// short stall and backoff times (the faults are many; the test must stay short).
const STORE = { segmentBytes: SEG, stallMs: 300, backoffMs: 5, backoffMaxMs: 50, retries: 10, maxRestarts: 4 };

let srv;
// A split GGUF of stories260K (tools/gguf_split.mjs), made now: whether its test runs is known
// when the tests are registered.
const WHOLE = path.join(MODELS, 'stories260K.gguf');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-store-'));
const splitFiles = fs.existsSync(WHOLE) ? splitGguf(WHOLE, { maxBytes: 300 << 10, prefix: path.join(tmp, 'stories260K') }) : [];
let splitParts = [];

before(async () => {
  const handler = createHandler(REPO, true, { isolate: false });
  srv = await startFlakyServer({ seed: 99, stallMs: 2000, fallback: (req, res) => {
    if (req.url.split('?')[0] === '/store-test.html') {
      res.writeHead(200, { 'Content-Type': 'text/html' });
      res.end(`<!doctype html><meta charset="utf-8"><title>store</title><script type="module">
        import * as cache from '/js/models/cache.js';
        import { createEngine } from '/js/wasmlm.js';
        window.cache = cache; window.createEngine = createEngine; window.ready = true;
      </script>`);
      return;
    }
    handler(req, res);
  } });
  if (splitFiles.length) {
    srv.addFile('stories260K.gguf', fs.readFileSync(WHOLE));
    splitParts = splitFiles.map((p) => srv.addFile(path.basename(p), fs.readFileSync(p)));
  }
});

after(async () => {
  await srv?.close();
  await fsp.rm(tmp, { recursive: true, force: true });
});

/** {newPage(), close()} for 'chromium' | 'firefox'; pages share one profile (OPFS, locks). */
async function launch(engine) {
  if (engine === 'chromium') {
    const { chromium } = await import('playwright-core');
    const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'wasmlm-chromium-'));
    const context = await chromium.launchPersistentContext(dir, {
      executablePath: CHROMIUM, headless: true, timeout: STEP_TIMEOUT,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
    });
    context.setDefaultTimeout(STEP_TIMEOUT);
    return {
      newPage: () => context.newPage(),
      first: () => context.pages()[0] ?? context.newPage(),
      close: async () => { await context.close(); await fsp.rm(dir, { recursive: true, force: true }); },
    };
  }
  const { default: puppeteer } = await import('puppeteer-core');
  const browser = await puppeteer.launch({ browser: 'firefox', executablePath: FIREFOX, headless: true,
    timeout: STEP_TIMEOUT, protocolTimeout: STEP_TIMEOUT + 30_000 });
  return {
    newPage: () => browser.newPage(),
    first: async () => (await browser.pages())[0] ?? browser.newPage(),
    close: () => browser.close(),
  };
}

async function open(page) {
  await page.goto(`${srv.origin}/store-test.html`);
  await page.waitForFunction(() => window.ready === true);
}

const pathOf = (url) => new URL(url).pathname;

for (const engine of ['chromium', 'firefox']) {
  const exe = engine === 'chromium' ? CHROMIUM : FIREFOX;
  const skip = fs.existsSync(exe) ? false : `${exe} is not installed`;

  for (const [backend, n, writer] of [['opfs', N, 'sync'], ['opfs', 20, 'stream'], ['cache', 20, null]]) {
    const where = backend === 'cache' ? 'Cache Storage' : `OPFS (${writer === 'sync' ? 'a worker\'s sync access handles' : 'createWritable'})`;
    test(`${engine}: ${n} randomized downloads into ${where} through every fault`, { skip, timeout: 20 * STEP_TIMEOUT }, async () => {
      const b = await launch(engine);
      try {
        const page = await b.first();
        await open(page);
        srv.setFaults(FAULTS);
        srv.reseed((engine === 'chromium' ? 5 : 6) + (backend === 'cache' ? 100 : writer === 'stream' ? 200 : 0));
        const files = Array.from({ length: n }, (_, i) => {
          const size = 64 * 1024 + ((i * 104729) % (960 * 1024)) + (i % 7);
          const f = srv.addFile(`${engine}-${backend}-${writer}-${i}.bin`, randomBytes(size, 50_000 + i));
          return { ...f, pinned: i % 4 !== 0, pinSize: i % 3 !== 0 };
        });
        const results = [];
        for (let at = 0; at < n; at += 20) {
          results.push(...await page.evaluate(async ({ files, STORE }) => {
            const store = new window.cache.ModelStore(STORE);
            const writer = await store.writer();
            const hex = async (blob) => Array.from(new Uint8Array(await crypto.subtle.digest('SHA-256', await blob.arrayBuffer())),
              (x) => x.toString(16).padStart(2, '0')).join('');
            const out = [];
            for (const f of files) {
              try {
                const m = await store.download(f.url, { sha256: f.pinned ? f.sha256 : null, size: f.pinSize ? f.size : null });
                out.push({ ok: true, sha: await hex(m.blob), named: m.sha256, kind: m.from, verified: m.verified, writer });
              } catch (e) {
                out.push({ ok: false, name: e?.name, code: e?.code, message: String(e?.message ?? e),
                  handedOut: (await store.get(f.url)) !== null });
              }
            }
            return out;
          }, { files: files.slice(at, at + 20), STORE: { ...STORE, backend, syncWrites: writer === 'sync',
            // every other batch in ranges of ~250 KB (1–4 a file), the next asked for while one is read
            ...(at % 40 === 0 ? { requestBytes: 250_007 } : {}) } }));
        }
        srv.setFaults({});
        let ok = 0;
        results.forEach((r, i) => {
          const f = files[i];
          if (r.ok) {
            ok++;
            assert.equal(r.kind, backend);
            assert.equal(r.writer, writer);
            assert.equal(r.sha, r.named, `${i}: the digest the store names is that of its bytes`);
            if (f.pinned) assert.equal(r.sha, f.sha256, `${i}: the pinned file`);
            else assert.ok(r.sha === f.sha256 || f.versions.includes(r.sha), `${i}: one whole version, not a mix`);
            assert.equal(r.verified, f.pinned);
          } else {
            assert.equal(r.name, 'WasmlmError', `${i}: ${r.message}`);
            assert.ok(['WLM_ERR_IO', 'WLM_ERR_CHECKSUM'].includes(r.code), r.code);
            assert.ok(r.message.includes(path.basename(pathOf(f.url))) || r.message.includes(f.url), r.message);
            assert.equal(r.handedOut, false, `${i}: a failed file is not handed out`);
          }
        });
        const faults = new Set(files.flatMap((f) => srv.stats(pathOf(f.url)).faults).filter(Boolean));
        if (n >= 100) assert.ok(faults.size >= 9, `faults seen: ${[...faults]}`);
        assert.ok(ok >= n * 0.8, `${ok} of ${n} finished`);
      } finally {
        await b.close();
      }
    });
  }

  test(`${engine}: a reload mid-download resumes from the stored bytes; two tabs share one transfer; quota`, { skip, timeout: 4 * STEP_TIMEOUT }, async () => {
    const b = await launch(engine);
    try {
      const page = await b.first();
      await open(page);
      // A reload: the download is throttled, the page reloaded once some segments are stored.
      const f = srv.addFile(`${engine}-reload.bin`, randomBytes(2 << 20, 77));
      srv.setThrottle({ bytes: 32 * 1024, ms: 20 });
      await page.evaluate(({ f, STORE }) => {
        window.pending = new window.cache.ModelStore(STORE).download(f.url, { sha256: f.sha256, size: f.size });
        window.pending.catch(() => {});
      }, { f, STORE });
      await page.evaluate(async (url) => {
        for (;;) {
          const e = (await window.cache.listModels()).find((x) => x.url === url);
          if (e && e.done >= 4 * 128 * 1024) return;
          await new Promise((r) => setTimeout(r, 50));
        }
      }, f.url);
      await open(page); // the reload
      srv.setThrottle(null);
      const stored = await page.evaluate(async (url) => (await window.cache.listModels()).find((x) => x.url === url), f.url);
      assert.equal(stored.complete, false);
      assert.ok(stored.done >= 4 * SEG && stored.done % SEG === 0, `${stored.done} bytes stored`);
      const r = await page.evaluate(async ({ f, STORE }) => {
        const m = await new window.cache.ModelStore(STORE).download(f.url, { sha256: f.sha256, size: f.size });
        const hex = Array.from(new Uint8Array(await crypto.subtle.digest('SHA-256', await m.blob.arrayBuffer())),
          (x) => x.toString(16).padStart(2, '0')).join('');
        return { hex, resumedFrom: m.resumedFrom, fromCache: m.fromCache, shared: m.shared ?? null };
      }, { f, STORE });
      const st = srv.stats(pathOf(f.url));
      // (Firefox: the unloading page may retry once before it is gone, under its Web Lock, so
      // the store can hold a little more by the time the new download gets the lock.)
      assert.equal(st.ranges[0], 0, 'a bounded range from byte 0 (a browser\'s default)');
      assert.ok(st.ranges.slice(1).every((x) => x > 0), `never from byte 0 again: ${st.ranges}`);
      assert.ok(r.resumedFrom >= stored.done, `${r.resumedFrom} ≥ ${stored.done}`);
      assert.equal(st.ranges.at(-1), r.resumedFrom, `the request after the reload starts at the stored bytes: ${JSON.stringify({ st, r, stored })}`);
      assert.equal(r.hex, f.sha256);

      // Two tabs at once: one transfer.
      const g = srv.addFile(`${engine}-tabs.bin`, randomBytes(1 << 20, 78));
      srv.setThrottle({ bytes: 64 * 1024, ms: 10 });
      const other = await b.newPage();
      await open(other);
      const both = await Promise.all([page, other].map((p) => p.evaluate(async ({ g, STORE }) => {
        const m = await window.cache.downloadModel(g.url, { sha256: g.sha256 });
        void STORE;
        const hex = Array.from(new Uint8Array(await crypto.subtle.digest('SHA-256', await m.blob.arrayBuffer())),
          (x) => x.toString(16).padStart(2, '0')).join('');
        return { hex, fromCache: m.fromCache };
      }, { g, STORE })));
      srv.setThrottle(null);
      assert.deepEqual(both.map((x) => x.hex), [g.sha256, g.sha256]);
      assert.equal(srv.stats(pathOf(g.url)).requests, 1, 'one request for two tabs');
      assert.equal(srv.stats(pathOf(g.url)).bytes, g.size, 'one transfer of the file');
      assert.deepEqual(both.map((x) => x.fromCache).sort(), [false, true]);

      // Ranges (the next asked for while one is read) go where the URL redirected: one redirect;
      // an address that fails (403, as an expired signed URL) sends them back through the URL.
      const d = srv.addFile(`${engine}-redirect.bin`, randomBytes(1_000_000, 80));
      const via = d.url.replace('/f/', '/r/');
      srv.queue(null, 'expired');
      const hexes = await page.evaluate(async ({ via, d, STORE }) => {
        const m = await new window.cache.ModelStore({ ...STORE, requestBytes: 250_007 }).download(via, { sha256: d.sha256 });
        return Array.from(new Uint8Array(await crypto.subtle.digest('SHA-256', await m.blob.arrayBuffer())),
          (x) => x.toString(16).padStart(2, '0')).join('');
      }, { via, d, STORE });
      assert.equal(hexes, d.sha256);
      assert.equal(srv.stats(pathOf(via)).requests, 2, 'one redirect, and one more after the 403');
      assert.deepEqual(srv.stats(pathOf(d.url)).ranges, [0, 250_007, 250_007, 500_014, 750_021]);
      assert.deepEqual(srv.stats(pathOf(d.url)).faults, [null, 'expired', null, null, null]);

      // A quota smaller than the file: the error before any request.
      const q = srv.addFile(`${engine}-quota.bin`, randomBytes(300_000, 79));
      const err = await page.evaluate(async (q) => {
        navigator.storage.estimate = async () => ({ usage: 9_900_000, quota: 10_000_000 });
        try {
          await window.cache.downloadModel(q.url, { sha256: q.sha256, size: q.size });
          return null;
        } catch (e) {
          return { code: e.code, message: e.message, needed: e.needed, available: e.available };
        }
      }, q);
      assert.equal(err?.code, 'WLM_ERR_QUOTA');
      assert.equal(err.needed, q.size);
      assert.equal(err.available, 100_000);
      assert.match(err.message, /needs 0\.3 MB more.*0\.1 MB more; nothing was downloaded/);
      assert.equal(srv.stats(pathOf(q.url)).requests, 0, 'no request');
    } finally {
      srv.setThrottle(null);
      await b.close();
    }
  });

  test(`${engine}: a split GGUF downloaded through faults loads from the stored Blobs, logits as the whole file`, { skip: skip || (splitFiles.length < 2 && 'no ../shared/models/stories260K.gguf'), timeout: 4 * STEP_TIMEOUT }, async () => {
    const b = await launch(engine);
    try {
      const page = await b.first();
      await open(page);
      srv.setFaults({ drop: 0.3, norange: 0.1, change: 0.1, stall: 0.05 });
      srv.reseed(7);
      const whole = `${srv.origin}/f/stories260K.gguf`;
      const out = await page.evaluate(async ({ parts, whole, STORE }) => {
        const store = new window.cache.ModelStore(STORE);
        const stored = [];
        for (const p of parts) stored.push((await store.download(p.url, { sha256: p.sha256, size: p.size })).blob);
        const engine = await window.createEngine({ threads: 1 });
        const ids = [1, 403, 407, 261, 378];
        await engine.load({ model: stored, nCtx: 64 });
        const a = new Uint8Array((await engine.evalTokens(ids)).buffer.slice(0));
        let bytes;
        for (;;) { // the whole file, plainly (retried: the server's faults apply to it too)
          try { const r = await fetch(whole, { cache: 'no-store' }); if (r.status === 200) { bytes = new Uint8Array(await r.arrayBuffer()); break; } } catch { /* again */ }
        }
        await engine.load({ model: bytes, nCtx: 64 });
        const w = new Uint8Array((await engine.evalTokens(ids)).buffer.slice(0));
        engine.dispose?.();
        return { n: stored.length, same: a.length === w.length && a.every((x, i) => x === w[i]), len: a.length,
          kinds: (await store.list()).map((e) => e.complete && e.verified) };
      }, { parts: splitParts, whole, STORE });
      srv.setFaults({});
      assert.equal(out.n, splitParts.length);
      assert.ok(out.len > 0);
      assert.ok(out.same, 'the logits from the stored parts equal the whole file\'s');
      assert.ok(out.kinds.every(Boolean));
    } finally {
      srv.setFaults({});
      await b.close();
    }
  });
}
