// store_page.test.mjs — the demo page over the model store (js/models/storage/,
// web/demo/cache-list.js) in headless Chromium: a partial download in OPFS is listed with what it
// holds and a Resume button; Resume continues it with a Range request from the stored bytes (the
// server's record) to a verified file, listed with its size, date and "verified"; Remove deletes
// it from OPFS. web/sources.js sends a file over BYTES_MAX to the store and finds it there the
// next time; discard() (the engine refused it) deletes it. The page is served by tools/serve.mjs's
// handler behind tests/js/_flaky_server.mjs (which serves the model file, with Range).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHandler } from '../../tools/serve.mjs';
import { startFlakyServer, randomBytes } from '../js/_flaky_server.mjs';
import { REPO, STEP_TIMEOUT, launch, loadOutcome, screenshot } from './_helpers.mjs';

let srv;
let browser;

before(async () => {
  srv = await startFlakyServer({ seed: 3, fallback: createHandler(REPO, true, { isolate: true }),
    headers: { 'Cross-Origin-Resource-Policy': 'same-origin' } });
  browser = await launch();
});

after(async () => {
  await browser?.close();
  await srv?.close();
});

test('the cache list shows a partial download, resumes it from its stored bytes, and removes it', { timeout: 2 * STEP_TIMEOUT }, async () => {
  const { page } = browser;
  await page.goto(`${srv.origin}/web/`);
  assert.equal((await loadOutcome(page)).state, 'ready');
  const f = srv.addFile('big-model.bin', randomBytes(3 << 20, 5));
  srv.setThrottle({ bytes: 32 * 1024, ms: 10 });
  const stored = await page.evaluate(async (f) => {
    const { ModelStore } = await import('/js/models/cache.js');
    const ac = new AbortController();
    const store = new ModelStore({ segmentBytes: 256 * 1024 });
    await store.download(f.url, { sha256: f.sha256, size: f.size, signal: ac.signal,
      onProgress: (p) => { if (p.loaded > 1 << 20) ac.abort(); } }).catch(() => {});
    return (await store.list()).find((e) => e.url === f.url);
  }, f);
  srv.setThrottle(null);
  assert.equal(stored.complete, false);
  assert.ok(stored.done > 1 << 20, `${stored.done} bytes`);

  await page.locator('#cache-panel summary').click();
  const row = page.locator('#cache-list li', { hasText: 'big-model.bin' });
  await row.waitFor();
  assert.match(await row.textContent(), /big-model\.bin.*of 3\.1 MB.*partial \(\d+(\.\d)? %\): resumes where it stopped/);
  await screenshot(page, 'store-partial');
  await page.getByRole('button', { name: 'Resume the download of big-model.bin' }).click();
  await page.waitForFunction(() => /verified/.test([...document.querySelectorAll('#cache-list li')]
    .find((li) => li.textContent.includes('big-model.bin'))?.textContent ?? ''));
  assert.match(await row.textContent(), /big-model\.bin\s*3\.1 MB.*· verified · stored /);
  assert.deepEqual(srv.stats('/f/big-model.bin').ranges, [0, stored.done], 'resumed at the stored bytes');

  await page.getByRole('button', { name: 'Remove big-model.bin from the cache' }).click();
  await page.waitForFunction(() => ![...document.querySelectorAll('#cache-list li')].some((li) => li.textContent.includes('big-model.bin')));
  const left = await page.evaluate(async () => (await (await import('/js/models/cache.js')).modelStore().list()).length);
  assert.equal(left, 0, 'nothing left in OPFS');
  browser.assertNoProblems();
});

test('the page sends a file over BYTES_MAX to the model store, and finds it there the next time', { timeout: 2 * STEP_TIMEOUT }, async () => {
  const { page } = browser;
  const f = srv.addFile('large-model.gguf', randomBytes((64 << 20) + 4096, 9));
  const out = await page.evaluate(async (f) => {
    const sources = await import('/web/sources.js');
    const part = { stage: 'model', name: 'large-model.gguf', candidates: [f.url], sha256: f.sha256, size: f.size, verified: true };
    const reports = [];
    const first = await sources.fetchPart(part, { onProgress: (p) => reports.push(p) });
    const again = await sources.fetchPart(part, {});
    const listed = (await sources.listStored()).find((e) => e.url === f.url);
    const hex = Array.from(new Uint8Array(await crypto.subtle.digest('SHA-256', await again.data.arrayBuffer())),
      (x) => x.toString(16).padStart(2, '0')).join('');
    await first.discard?.();
    return { first: { fromCache: first.fromCache, isBlob: first.data instanceof Blob, size: first.size, from: first.from },
      again: { fromCache: again.fromCache, from: again.from }, hex, listed, last: reports.at(-1),
      afterDiscard: (await sources.listStored()).some((e) => e.url === f.url) };
  }, f);
  assert.deepEqual(out.first, { fromCache: false, isBlob: true, size: f.size, from: 'this server' });
  assert.deepEqual(out.again, { fromCache: true, from: 'the browser cache' });
  assert.equal(out.hex, f.sha256);
  assert.equal(out.listed.store, 'opfs');
  assert.equal(out.listed.verified, true);
  assert.equal(out.last.loaded, f.size);
  assert.equal(out.last.from, 'this server');
  assert.equal(out.afterDiscard, false, 'discard() (a file the engine refused) deletes it');
  // One download, in ranges of 8 MiB (the store's default in a browser), each byte sent once.
  const st = srv.stats('/f/large-model.gguf');
  assert.deepEqual(st.ranges, Array.from({ length: Math.ceil(f.size / (8 << 20)) }, (_, i) => i * (8 << 20)));
  assert.equal(st.bytes, f.size);
});
