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
//                           [--request 8M]   (the store's requestBytes; 0: one open-ended request, as before issue 46)
//   node bench/download.mjs --sizes 8M        # a quick check that it runs
//   --browser firefox: Firefox ESR through puppeteer-core (WebDriver BiDi); "renderer" is then its
//                 content processes, and the JS heap is not sampled
//   --paths read: the network path's floor (the body read with a BYOB reader and hashed, not stored,
//                 in the store's ranges)
//
// One JSON line per size, path and round on stdout: {size, path, round, ok, readyMs, mbPerSec,
// peakRendererMB, peakRendererAnonMB (RssAnon + RssShmem: without the browser binary's pages),
// peakAllMB, peakJsHeapMB, error}.

import http from 'node:http';
import crypto from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawn } from 'node:child_process';
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
const requestBytes = opt('request', null) && parseSize(opt('request')); // bytes per HTTP request (0: one open-ended request)
const browserName = opt('browser', 'chromium'); // chromium | firefox
if (!['chromium', 'firefox'].includes(browserName)) throw new Error(`--browser chromium|firefox, not ${browserName}`);
const FIREFOX = process.env.FIREFOX || '/usr/bin/firefox-esr';

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
  const r = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? ''); // bytes=N- or bytes=N-M
  const start = r ? Number(r[1]) : 0;
  const end = r && r[2] ? Math.min(size, Number(r[2]) + 1) : size;
  const head = { 'Content-Type': 'application/octet-stream', 'Accept-Ranges': 'bytes', ETag: `"syn-${size}"`,
    'Content-Length': String(end - start) };
  if (r) head['Content-Range'] = `bytes ${start}-${end - 1}/${size}`;
  res.writeHead(r ? 206 : 200, head);
  for (const b of bytes(size, start, end)) {
    if (res.destroyed) return;
    if (!res.write(b)) await new Promise((ok) => res.once('drain', ok));
  }
  res.end();
});
await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
const origin = `http://127.0.0.1:${server.address().port}`;

/** A process's resident MB (VmRSS), and of that its anonymous and shared memory (RssAnon +
 *  RssShmem: what it allocated, without the pages of the browser's own binary and libraries it
 *  touched, which stay shared and reclaimable). */
const rssMB = (pid, fields = ['VmRSS']) => {
  try {
    const text = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    return fields.reduce((n, f) => n + Number(new RegExp(`${f}:\\s+(\\d+)`).exec(text)?.[1] ?? 0), 0) / 1024;
  } catch { return 0; }
};
const ANON = ['RssAnon', 'RssShmem'];

/**
 * Chromium driven over the DevTools protocol directly (a WebSocket; nothing else attached). Not
 * Playwright: it enables the Network domain on every page, and the inspector then keeps response
 * bodies of up to 10 MB each (200 MB in all) in the renderer, a cost no user's page has (a
 * download in bounded Range requests measured 230 MB above the page under Playwright).
 */
async function launch(dir) {
  const child = spawn(CHROMIUM, ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run',
    '--disable-background-networking', `--user-data-dir=${dir}`, '--remote-debugging-port=0', 'about:blank'],
  { stdio: 'ignore', detached: true });
  const portFile = path.join(dir, 'DevToolsActivePort');
  let endpoint = null;
  for (let i = 0; i < 300 && !endpoint; i++) {
    await new Promise((ok) => setTimeout(ok, 100));
    const text = await fsp.readFile(portFile, 'utf8').catch(() => '');
    const [port, wsPath] = text.split('\n');
    if (port && wsPath) endpoint = `ws://127.0.0.1:${port}${wsPath}`;
  }
  if (!endpoint) { try { process.kill(-child.pid); } catch { /* gone */ } throw new Error(`${CHROMIUM} did not start`); }
  const ws = new WebSocket(endpoint);
  await new Promise((ok, fail) => { ws.onopen = ok; ws.onerror = () => fail(new Error('no DevTools connection')); });
  let next = 1;
  const pending = new Map();
  ws.onmessage = ({ data }) => {
    const m = JSON.parse(data);
    const p = m.id && pending.get(m.id);
    if (!p) return;
    pending.delete(m.id);
    if (m.error) p.reject(new Error(m.error.message)); else p.resolve(m.result);
  };
  const send = (method, params = {}, sessionId) => new Promise((resolve, reject) => {
    const id = next++;
    pending.set(id, { resolve, reject });
    ws.send(JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) }));
  });
  const { targetInfos } = await send('Target.getTargets');
  const { targetId } = targetInfos.find((t) => t.type === 'page') ?? await send('Target.createTarget', { url: 'about:blank' });
  const { sessionId } = await send('Target.attachToTarget', { targetId, flatten: true });
  const page = (method, params) => send(method, params, sessionId);
  /** `fn(arg)` in the page, awaited; its JSON-able result. */
  const evaluate = async (fn, arg) => {
    const r = await page('Runtime.evaluate', { expression: `(${fn})(${JSON.stringify(arg)})`, awaitPromise: true, returnByValue: true });
    if (r.exceptionDetails) throw new Error(r.exceptionDetails.exception?.description ?? r.exceptionDetails.text);
    return r.result.value;
  };
  const exited = new Promise((ok) => child.once('exit', ok));
  const close = async () => {
    send('Browser.close').catch(() => {});
    await Promise.race([exited, new Promise((ok) => setTimeout(ok, 5000))]);
    ws.close();
    try { process.kill(-child.pid, 'SIGKILL'); } catch { /* already gone */ }
  };
  return {
    goto: async (url) => { await page('Page.navigate', { url }); },
    evaluate,
    async start() { await page('Performance.enable'); },
    /** The renderer processes' ids and all the browser's. */
    async pids() {
      const { processInfo } = await send('SystemInfo.getProcessInfo');
      return { renderer: processInfo.filter((p) => p.type === 'renderer').map((p) => p.id), all: processInfo.map((p) => p.id) };
    },
    /** The page's JS heap in use, bytes. */
    async heap() {
      const { metrics } = await page('Performance.getMetrics');
      return metrics.find((x) => x.name === 'JSHeapUsedSize')?.value ?? 0;
    },
    close,
  };
}

/**
 * Firefox (Debian's firefox-esr) through puppeteer-core over WebDriver BiDi, as
 * tests/cross-browser/ drives it. Its processes are found under the browser's own: the content
 * processes (-contentproc … tab) stand for the renderer; the page's JS heap is not sampled.
 */
async function launchFirefox() {
  const { default: puppeteer } = await import('puppeteer-core');
  const browser = await puppeteer.launch({ browser: 'firefox', executablePath: FIREFOX, headless: true, protocolTimeout: 0 });
  const page = (await browser.pages())[0] ?? await browser.newPage();
  page.setDefaultTimeout(0);
  const root = browser.process().pid;
  const children = () => {
    const parent = new Map();
    for (const d of fs.readdirSync('/proc')) {
      if (!/^\d+$/.test(d)) continue;
      try { parent.set(Number(d), Number(fs.readFileSync(`/proc/${d}/stat`, 'utf8').replace(/^.*\) /, '').split(' ')[1])); } catch { /* gone */ }
    }
    const out = [root];
    for (let i = 0; i < out.length; i++) for (const [pid, pp] of parent) if (pp === out[i]) out.push(pid);
    return out;
  };
  return {
    goto: async (url) => { await page.goto(url); },
    evaluate: (fn, arg) => page.evaluate(fn, arg),
    async start() {},
    async pids() {
      const all = children();
      const renderer = all.filter((pid) => {
        try { return / -contentproc .*\btab$/.test(fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ').trim()); } catch { return false; }
      });
      return { renderer, all };
    },
    heap: async () => 0,
    close: () => browser.close(),
  };
}

async function run(size, which, round, sha) {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'wasmlm-bench-dl-'));
  const chrome = browserName === 'firefox' ? await launchFirefox() : await launch(dir);
  try {
    await chrome.goto(`${origin}/bench.html`);
    for (let i = 0; !await chrome.evaluate(() => window.ready === true).catch(() => false); i++) {
      if (i > 300) throw new Error('the page did not load');
      await new Promise((ok) => setTimeout(ok, 100));
    }
    await chrome.start();
    const pids = () => chrome.pids().catch(() => ({ renderer: [], all: [] }));
    const sample = async () => {
      const p = await pids();
      const heap = await chrome.heap();
      return { renderer: p.renderer.reduce((n, id) => n + rssMB(id), 0), rendererAnon: p.renderer.reduce((n, id) => n + rssMB(id, ANON), 0),
        all: p.all.reduce((n, id) => n + rssMB(id), 0), heap: heap / (1 << 20) };
    };
    const base0 = await sample();
    const peak = { renderer: 0, rendererAnon: 0, all: 0, heap: 0 };
    let polling = true;
    const poller = (async () => {
      while (polling) {
        const s = await sample().catch(() => null);
        if (s) for (const k of Object.keys(peak)) peak[k] = Math.max(peak[k], s[k] - base0[k]);
        await new Promise((ok) => setTimeout(ok, 100));
      }
    })();
    const url = `${origin}/synthetic/${size}.bin`;
    const out = await chrome.evaluate(async ({ url, sha, size, which, segmentBytes, syncWrites, requestBytes }) => {
      const t0 = performance.now();
      try {
        if (which === 'old') {
          const m = await window.cache.fetchModel(url, { sha256: sha, size });
          const saved = await m.save();
          if (!saved.stored) throw new Error(`not stored: ${saved.reason} ${saved.error?.message ?? ''}`);
          if (m.blob.size !== size) throw new Error('wrong size');
        } else if (which === 'read') {
          // The floor of the network path: the body read (BYOB, one reused buffer) and hashed, nothing
          // stored; in the store's ranges (the next asked for while one is read; --request 0: one request).
          const { createHasher } = await import('/js/models/storage/integrity.js');
          const { DOWNLOAD_DEFAULTS } = await import('/js/models/storage/download.js');
          const h = await createHasher();
          const step = requestBytes ?? DOWNLOAD_DEFAULTS.requestBytes;
          const get = (at) => fetch(url, { cache: 'no-store', headers: step ? { Range: `bytes=${at}-${Math.min(size, at + step) - 1}` } : {} });
          let buf = new ArrayBuffer(1 << 20);
          let n = 0;
          let next = get(0);
          while (next) {
            const r = await next;
            next = step && n + step < size ? get(n + step) : null;
            const reader = r.body.getReader({ mode: 'byob' });
            for (;;) {
              const { done, value } = await reader.read(new Uint8Array(buf));
              if (value) buf = value.buffer;
              if (done) break;
              h.update(value);
              n += value.byteLength;
            }
          }
          if (n !== size || h.hex() !== sha) throw new Error('wrong bytes');
        } else {
          const store = segmentBytes || !syncWrites || requestBytes != null
            ? new window.cache.ModelStore({ ...(segmentBytes ? { segmentBytes } : {}), ...(requestBytes != null ? { requestBytes } : {}), syncWrites })
            : window.cache.modelStore();
          const m = await store.download(url, { sha256: sha, size });
          if (m.blob.size !== size || !m.verified) throw new Error('not verified');
        }
        return { ok: true, readyMs: performance.now() - t0 };
      } catch (e) {
        return { ok: false, readyMs: performance.now() - t0, error: String(e?.message ?? e) };
      }
    }, { url, sha, size, which, segmentBytes, syncWrites, requestBytes });
    polling = false;
    await poller;
    const r1 = (x) => Math.round(x * 10) / 10;
    return {
      size, path: which, round, ...(browserName !== 'chromium' ? { browser: browserName } : {}), ...(which === 'new' && segmentBytes ? { segmentBytes } : {}),
      ...(which !== 'old' && requestBytes != null ? { requestBytes } : {}),
      ...(which === 'new' ? { writer: syncWrites ? 'sync' : 'stream' } : {}), ok: out.ok, readyMs: Math.round(out.readyMs),
      mbPerSec: out.ok ? r1(size / (1 << 20) / (out.readyMs / 1000)) : null,
      peakRendererMB: r1(peak.renderer), peakRendererAnonMB: r1(peak.rendererAnon), peakAllMB: r1(peak.all), peakJsHeapMB: r1(peak.heap),
      ...(out.error ? { error: out.error } : {}),
    };
  } finally {
    await chrome.close();
    await fsp.rm(dir, { recursive: true, force: true, maxRetries: 5 });
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
