// bench/download.mjs — model downloads in headless Chromium from a local server: today's path
// (js/models/cache.js fetchModel(): the file into memory as a Blob, its sha256 over the whole, then one
// Cache Storage entry on save()) against the model store (downloadModel(): OPFS segments written
// from the network stream, sha256 while it streams; js/models/storage/). Per file size and path: the
// time from the call to the verified, stored file handed back as a Blob ("ready"; the engine's
// read of that Blob is the same for both paths), and the peak memory above the page's baseline,
// polled every 100 ms: the renderer process's RSS and JS heap (CDP: SystemInfo.getProcessInfo,
// /proc/PID/status, Performance.getMetrics) and the RSS of all the browser's processes (where
// a Blob's bytes live). The file is synthetic (a seeded 1 MiB block, each copy XORed with its
// index), generated as it is served: nothing on disk but the browser's copy.
//
//   node bench/download.mjs [--sizes 1G,4G] [--paths old,new] [--rounds 1] [--segment 16M] [--writer sync|stream]
//   node bench/download.mjs --sizes 8M        # a quick check that it runs
//   --paths read: the network path's floor (the body read with a BYOB reader and hashed, not stored)
//
// One JSON line per size, path and round on stdout: {size, path, round, ok, readyMs, mbPerSec,
// peakRendererMB, peakAllMB, peakJsHeapMB, error}.

import http from 'node:http';
import crypto from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { createHandler } from '../tools/serve.mjs';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const BLOCK = 1 << 20;

const args = process.argv.slice(2);
const opt = (name, def) => { const i = args.indexOf(`--${name}`); return i >= 0 ? args[i + 1] : def; };
const parseSize = (s) => {
  const m = /^(\d+(?:\.\d+)?)([KMG]?)$/i.exec(s);
  if (!m) throw new Error(`not a size: ${s} (e.g. 512M, 1G)`);
  return Math.round(Number(m[1]) * { '': 1, K: 1024, M: 1 << 20, G: 1 << 30 }[m[2].toUpperCase()]);
};
const sizes = opt('sizes', '1G,4G').split(',').map(parseSize);
const paths = opt('paths', 'old,new').split(',');
const rounds = Number(opt('rounds', '1'));
const segmentBytes = opt('segment', null) && parseSize(opt('segment')); // the store's segment size (default 16M)
const syncWrites = opt('writer', 'sync') !== 'stream'; // --writer stream: createWritable() instead of the worker

const base = Buffer.alloc(BLOCK);
{ let x = 0x9e3779b9; for (let i = 0; i < BLOCK; i += 4) { x ^= x << 13; x ^= x >>> 17; x ^= x << 5; base.writeUInt32LE(x >>> 0, i); } }
/** Block `i` of the synthetic file: the base block with its first 4 bytes XORed with i. */
function block(i) {
  const b = Buffer.from(base);
  b.writeUInt32LE((b.readUInt32LE(0) ^ i) >>> 0, 0);
  return b;
}
/** Bytes [start, end) of a file of `size`, as Buffers. */
function* bytes(size, start = 0, end = size) {
  for (let at = start; at < end;) {
    const i = Math.floor(at / BLOCK);
    const off = at - i * BLOCK;
    const take = Math.min(BLOCK - off, end - at);
    yield block(i).subarray(off, off + take);
    at += take;
  }
}
function sha256(size) {
  const h = crypto.createHash('sha256');
  for (const b of bytes(size)) h.update(b);
  return h.digest('hex');
}

const handler = createHandler(REPO, true, { isolate: false });
const server = http.createServer(async (req, res) => {
  const m = /^\/synthetic\/(\d+)\.bin$/.exec(req.url.split('?')[0]);
  if (req.url.startsWith('/bench.html')) {
    res.writeHead(200, { 'Content-Type': 'text/html' });
    res.end('<!doctype html><meta charset="utf-8"><script type="module">import * as c from "/js/models/cache.js"; window.cache = c; window.ready = true;</script>');
    return;
  }
  if (!m) { handler(req, res); return; }
  const size = Number(m[1]);
  const r = /^bytes=(\d+)-$/.exec(req.headers.range ?? '');
  const start = r ? Number(r[1]) : 0;
  const head = { 'Content-Type': 'application/octet-stream', 'Accept-Ranges': 'bytes', ETag: `"syn-${size}"`,
    'Content-Length': String(size - start) };
  if (r) head['Content-Range'] = `bytes ${start}-${size - 1}/${size}`;
  res.writeHead(r ? 206 : 200, head);
  for (const b of bytes(size, start)) {
    if (res.destroyed) return;
    if (!res.write(b)) await new Promise((ok) => res.once('drain', ok));
  }
  res.end();
});
await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
const origin = `http://127.0.0.1:${server.address().port}`;

const rssMB = (pid) => {
  try { return Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) / 1024; } catch { return 0; }
};

async function run(size, which, round, sha) {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'wasmlm-bench-dl-'));
  const context = await chromium.launchPersistentContext(dir, {
    executablePath: CHROMIUM, headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
  });
  try {
    const page = context.pages()[0] ?? await context.newPage();
    await page.goto(`${origin}/bench.html`);
    await page.waitForFunction(() => window.ready === true);
    const cdp = await context.newCDPSession(page);
    await cdp.send('Performance.enable');
    const browserCdp = await context.browser()?.newBrowserCDPSession?.().catch(() => null);
    const pids = async () => {
      try {
        const { processInfo } = await browserCdp.send('SystemInfo.getProcessInfo');
        return { renderer: processInfo.filter((p) => p.type === 'renderer').map((p) => p.id), all: processInfo.map((p) => p.id) };
      } catch {
        return { renderer: [], all: [] };
      }
    };
    const sample = async () => {
      const p = await pids();
      const { metrics } = await cdp.send('Performance.getMetrics');
      const heap = metrics.find((x) => x.name === 'JSHeapUsedSize')?.value ?? 0;
      return { renderer: p.renderer.reduce((n, id) => n + rssMB(id), 0), all: p.all.reduce((n, id) => n + rssMB(id), 0), heap: heap / (1 << 20) };
    };
    const base0 = await sample();
    const peak = { renderer: 0, all: 0, heap: 0 };
    let polling = true;
    const poller = (async () => {
      while (polling) {
        const s = await sample().catch(() => null);
        if (s) for (const k of Object.keys(peak)) peak[k] = Math.max(peak[k], s[k] - base0[k]);
        await new Promise((ok) => setTimeout(ok, 100));
      }
    })();
    const url = `${origin}/synthetic/${size}.bin`;
    const out = await page.evaluate(async ({ url, sha, size, which, segmentBytes, syncWrites }) => {
      const t0 = performance.now();
      try {
        if (which === 'old') {
          const m = await window.cache.fetchModel(url, { sha256: sha, size });
          const saved = await m.save();
          if (!saved.stored) throw new Error(`not stored: ${saved.reason} ${saved.error?.message ?? ''}`);
          if (m.blob.size !== size) throw new Error('wrong size');
        } else if (which === 'read') {
          // The floor of the network path: the body read (BYOB, one reused buffer) and hashed, nothing stored.
          const { createHasher } = await import('/js/models/storage/integrity.js');
          const h = await createHasher();
          const r = await fetch(url, { cache: 'no-store' });
          const reader = r.body.getReader({ mode: 'byob' });
          let buf = new ArrayBuffer(1 << 20);
          let n = 0;
          for (;;) {
            const { done, value } = await reader.read(new Uint8Array(buf));
            if (done) break;
            h.update(value);
            n += value.byteLength;
            buf = value.buffer;
          }
          if (n !== size || h.hex() !== sha) throw new Error('wrong bytes');
        } else {
          const store = segmentBytes || !syncWrites
            ? new window.cache.ModelStore({ ...(segmentBytes ? { segmentBytes } : {}), syncWrites }) : window.cache.modelStore();
          const m = await store.download(url, { sha256: sha, size });
          if (m.blob.size !== size || !m.verified) throw new Error('not verified');
        }
        return { ok: true, readyMs: performance.now() - t0 };
      } catch (e) {
        return { ok: false, readyMs: performance.now() - t0, error: String(e?.message ?? e) };
      }
    }, { url, sha, size, which, segmentBytes, syncWrites });
    polling = false;
    await poller;
    const r1 = (x) => Math.round(x * 10) / 10;
    return {
      size, path: which, round, ...(which === 'new' && segmentBytes ? { segmentBytes } : {}),
      ...(which === 'new' ? { writer: syncWrites ? 'sync' : 'stream' } : {}), ok: out.ok, readyMs: Math.round(out.readyMs),
      mbPerSec: out.ok ? r1(size / (1 << 20) / (out.readyMs / 1000)) : null,
      peakRendererMB: r1(peak.renderer), peakAllMB: r1(peak.all), peakJsHeapMB: r1(peak.heap),
      ...(out.error ? { error: out.error } : {}),
    };
  } finally {
    await context.close();
    await fsp.rm(dir, { recursive: true, force: true });
  }
}

try {
  for (const size of sizes) {
    const sha = sha256(size);
    for (let round = 0; round < rounds; round++) {
      for (const which of paths) console.log(JSON.stringify(await run(size, which, round, sha)));
    }
  }
} finally {
  server.close();
  server.closeAllConnections();
}
