// _flaky_server.mjs — a test HTTP server on 127.0.0.1 that misbehaves on purpose, for the model
// store's downloads (js/models/storage/download.js): per request, a seeded RNG picks a fault from the
// rates it is given —
//   drop       the body stops at a random offset and the connection is destroyed
//   norange    a Range request gets the whole file as a 200 (the server ignores Range)
//   norangedrop the same, and its body stops at a random offset (a server that cannot resume)
//   change     another version of the file (other bytes, sometimes another size; its own ETag)
//   badlength  Content-Length claims more bytes than are sent, then the connection closes
//   shortlength a 206 for fewer bytes than asked (Content-Range and Content-Length say so), ended cleanly
//   badrange   a 206 whose Content-Range starts elsewhere than asked, or names another total
//   long       a 206 without Content-Length, with bytes past the file's end
//   stall      some bytes, then nothing for `stallMs`, then the connection is destroyed
//   error      HTTP 503
//   expired    HTTP 403 (a signed URL that expired; /r/<name> redirects to /f/<name>?sig=n)
// Range: bytes=N- and bytes=N-M. It counts, per path, the requests, their Range starts (and ends:
// null for an open-ended one) and the body bytes it wrote, so tests can
// assert what was transferred. Other paths can be handed to `fallback` (e.g. tools/serve.mjs's
// handler, for a page under test). Not a test file: node --test runs *.test.mjs only.

import crypto from 'node:crypto';
import http from 'node:http';

/** mulberry32: a small seeded PRNG (uniform in [0, 1)). */
export function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6D2B79F5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** `n` deterministic pseudo-random bytes from `seed`. */
export function randomBytes(n, seed) {
  const r = rng(seed);
  const out = Buffer.alloc(n);
  for (let i = 0; i < n; i += 4) {
    const v = Math.floor(r() * 2 ** 32);
    for (let j = 0; j < 4 && i + j < n; j++) out[i + j] = (v >>> (8 * j)) & 255;
  }
  return out;
}

export const sha256 = (bytes) => crypto.createHash('sha256').update(bytes).digest('hex');

export const FAULTS = ['drop', 'norange', 'norangedrop', 'change', 'badlength', 'shortlength', 'badrange', 'long', 'stall', 'error', 'expired'];

/**
 * @param {object} [o]
 * @param {number} [o.seed]
 * @param {Partial<Record<string, number>>} [o.faults]  probability of each fault per request
 *   (their sum ≤ 1; the rest are served correctly)
 * @param {number} [o.stallMs]  how long a stall lasts before the connection is destroyed
 * @param {number} [o.throttle]  {bytes, ms}: serve correct bodies this many bytes every ms
 * @param {(req, res) => void} [o.fallback]  paths outside /f/
 * @param {Record<string, string>} [o.headers]  sent with every /f/ response
 */
export async function startFlakyServer({ seed = 1, faults = {}, stallMs = 1000, throttle = null, fallback = null, headers = {} } = {}) {
  let random = rng(seed);
  let rates = { ...faults };
  const files = new Map(); // name → {bytes, versions: [bytes], etag}
  const stats = new Map(); // path → {requests, bytes, ranges: [start|null], faults: []}
  const sockets = new Set();
  const timers = new Set();

  const later = (ms) => new Promise((r) => { const t = setTimeout(() => { timers.delete(t); r(); }, ms); timers.add(t); });

  let script = [];
  let signed = 0;
  function pick() {
    if (script.length) return script.shift();
    let x = random();
    for (const f of FAULTS) {
      x -= rates[f] ?? 0;
      if (x < 0) return f;
    }
    return null;
  }

  async function send(res, body, { throttled = false } = {}) {
    const step = throttled && throttle ? throttle.bytes : 64 * 1024;
    for (let at = 0; at < body.length; at += step) {
      if (res.destroyed) return;
      const part = body.subarray(at, at + step);
      stat(res.path).bytes += part.length;
      if (!res.write(part)) await new Promise((r) => res.once('drain', r));
      if (throttled && throttle) await later(throttle.ms);
    }
  }

  function stat(path) {
    let s = stats.get(path);
    if (!s) { s = { requests: 0, bytes: 0, ranges: [], ends: [], faults: [] }; stats.set(path, s); }
    return s;
  }

  async function serveFile(req, res, name) {
    const f = files.get(name);
    res.path = req.url.split('?')[0];
    const s = stat(res.path);
    s.requests++;
    const m = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? '');
    let start = m ? Number(m[1]) : null;
    const last = m?.[2] ? Number(m[2]) : null; // a bounded range's last byte
    s.ranges.push(start);
    s.ends.push(last);
    if (!f) { res.writeHead(404); res.end(); return; }
    if (start !== null && last !== null && last < start) { res.writeHead(416); res.end(); return; }
    const fault = pick();
    s.faults.push(fault);
    const faulty = fault !== null;
    const common = { 'Content-Type': 'application/octet-stream', 'Accept-Ranges': 'bytes', ...headers,
      ...(faulty ? { Connection: 'close' } : {}) };
    let body = f.bytes;
    let etag = f.etag;
    if (fault === 'error') { res.writeHead(503, common); res.end(); return; }
    if (fault === 'expired') { res.writeHead(403, common); res.end(); return; }
    if (fault === 'change') {
      const v = f.versions[Math.floor(random() * f.versions.length)];
      body = v.bytes;
      etag = v.etag;
    }
    if (fault === 'norange' || fault === 'norangedrop') start = null;
    if (start !== null && start >= body.length) {
      res.writeHead(416, { ...common, 'Content-Range': `bytes */${body.length}` });
      res.end();
      return;
    }
    const from = start ?? 0;
    let part = body.subarray(from, start !== null && last !== null ? last + 1 : body.length);
    const head = { ...common, ETag: etag, 'Last-Modified': f.lastModified };
    let status = start === null ? 200 : 206;
    if (status === 206) head['Content-Range'] = `bytes ${from}-${from + part.length - 1}/${body.length}`;
    if (fault === 'badrange' && status === 206) {
      head['Content-Range'] = random() < 0.5
        ? `bytes ${Math.max(0, from - 1 - Math.floor(random() * 100))}-${from + part.length - 1}/${body.length}`
        : `bytes ${from}-${from + part.length}/${body.length + 1}`;
    }
    if (fault === 'long' && status === 206) { // (a whole-file 200 without a length is the file, whatever it holds)
      // bytes past the range asked for (past the file's end, when that was asked for)
      res.writeHead(status, head); // no Content-Length: chunked
      await send(res, Buffer.concat([part, randomBytes(1 + Math.floor(random() * 5000), 7)]));
      res.end();
      return;
    }
    if (fault === 'shortlength' && status === 206) { // a shorter range than asked, announced as such
      part = part.subarray(0, 1 + Math.floor(random() * (part.length - 1)));
      head['Content-Range'] = `bytes ${from}-${from + part.length - 1}/${body.length}`;
    }
    head['Content-Length'] = String(fault === 'badlength' ? part.length + 1 + Math.floor(random() * 1000) : part.length);
    res.writeHead(status, head);
    if (fault === 'drop' || fault === 'norangedrop' || fault === 'badlength' || fault === 'stall') {
      const cut = fault === 'badlength' ? part.length : Math.floor(random() * part.length);
      await send(res, part.subarray(0, cut));
      if (fault === 'stall') await later(stallMs);
      res.destroy();
      return;
    }
    await send(res, part, { throttled: true });
    res.end();
  }

  const server = http.createServer((req, res) => {
    const path = req.url.split('?')[0];
    if (path.startsWith('/r/')) { // a redirect to /f/, signed like a CDN's (?sig=n)
      stat(path).requests++;
      res.writeHead(302, { Location: `/f/${path.slice(3)}?sig=${++signed}`, 'Content-Length': '0' });
      res.end();
    } else if (path.startsWith('/f/')) {
      serveFile(req, res, decodeURIComponent(path.slice(3))).catch(() => res.destroy());
    } else if (fallback) {
      fallback(req, res);
    } else {
      res.writeHead(404);
      res.end();
    }
  });
  server.on('connection', (s) => { sockets.add(s); s.on('close', () => sockets.delete(s)); });
  server.keepAliveTimeout = 1000;
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const origin = `http://127.0.0.1:${server.address().port}`;

  return {
    origin,
    /** Adds (or replaces) /f/<name>; `versions` other contents served by the 'change' fault. */
    addFile(name, bytes, { versions = null } = {}) {
      const others = versions ?? [
        Buffer.concat([bytes.subarray(0, Math.max(0, bytes.length - 1)), Buffer.from([bytes.at(-1) ^ 0xff])]),
        Buffer.concat([bytes, Buffer.from('more')]),
      ];
      const f = {
        bytes, etag: `"${sha256(bytes).slice(0, 16)}"`, lastModified: new Date(Date.UTC(2026, 0, 1)).toUTCString(),
        versions: others.map((b) => ({ bytes: b, etag: `"${sha256(b).slice(0, 16)}"` })),
      };
      files.set(name, f);
      return { url: `${origin}/f/${encodeURIComponent(name)}`, sha256: sha256(bytes), size: bytes.length,
        versions: f.versions.map((v) => sha256(v.bytes)) };
    },
    setFaults(f) { rates = { ...f }; },
    /** The faults of the next requests, in order (null: served correctly); then the rates again. */
    queue(...f) { script.push(...f); },
    clearQueue() { script = []; },
    reseed(s) { random = rng(s); },
    setThrottle(t) { throttle = t; },
    stats: (path) => stat(path),
    resetStats() { stats.clear(); },
    async close() {
      for (const t of timers) clearTimeout(t);
      for (const s of sockets) s.destroy();
      await new Promise((r) => server.close(r));
    },
  };
}
