// webkit_store.test.mjs — the model store (js/models/storage/) in WebKit, Safari's engine
// (WebKitGTK's MiniBrowser through WebKitWebDriver, _drivers.mjs), against the misbehaving test
// server (tests/js/_flaky_server.mjs). WebKitGTK 2.50 has no Origin Private File System
// (navigator.storage.getDirectory is missing), so the store falls back to Cache Storage there; it
// must still download in bounded ranges (the next asked for while one is read) through dropped
// connections, changed files, short ranges and 503s to the right bytes — checked here with
// crypto.subtle over the stored Blob — or fail with a WasmlmError that names the file.
// The same rules in Chromium and Firefox, with OPFS: tests/browser/model_store.test.mjs.
//
//   node --test tests/cross-browser/webkit_store.test.mjs

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHandler } from '../../tools/serve.mjs';
import { startFlakyServer, randomBytes } from '../js/_flaky_server.mjs';
import { REPO, STEP_TIMEOUT } from '../browser/_helpers.mjs';
import { launchBrowser, missing, ENGINES } from './_drivers.mjs';

const absent = missing('webkit');
const skip = absent.length ? `webkit: ${absent.join(', ')} missing (apt-get install ${ENGINES.webkit.apt})` : false;

let srv;
before(async () => {
  const handler = createHandler(REPO, true, { isolate: false });
  srv = await startFlakyServer({ seed: 21, stallMs: 1000, fallback: (req, res) => {
    if (req.url.split('?')[0] === '/store-test.html') {
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
