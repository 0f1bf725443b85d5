// download_mismatch.test.mjs — a download that is not the file the manifest pins is a clear
// error in both downloaders, js/models/cache.js (the page) and models/fetch.mjs (the command line), and
// which one it is: 'partial' (the transfer broke off: fewer bytes than the file has), 'size' (the
// server's file has another size: refused from Content-Length before any byte is read, or after
// the body when no length was sent), 'sha256' (same size, other bytes). A 127.0.0.1 server plays
// the publisher; nothing leaves the machine. models/fetch.mjs leaves no file behind.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { download } from '../../js/models/cache.js';
import { downloadFile, fetchEntry } from '../../models/fetch.mjs';
import { MODEL } from './_helpers.mjs';

const BYTES = fs.readFileSync(MODEL); // stories260K.bin, 1 MB
const SHA = crypto.createHash('sha256').update(BYTES).digest('hex');
const OTHER = Buffer.from(BYTES).fill(7, 1000, 2000); // same size, other bytes

let server, base, dir;
before(async () => {
  server = http.createServer((req, res) => {
    const half = BYTES.subarray(0, BYTES.length >> 1);
    switch (req.url) {
      case '/good': res.writeHead(200, { 'Content-Length': BYTES.length }); res.end(BYTES); break;
      case '/other': res.writeHead(200, { 'Content-Length': OTHER.length }); res.end(OTHER); break;
      case '/longer': // a re-published file of another size
        res.writeHead(200, { 'Content-Length': BYTES.length + 10 }); res.end(Buffer.concat([BYTES, Buffer.alloc(10)])); break;
      case '/longer-chunked': res.writeHead(200); res.end(Buffer.concat([BYTES, Buffer.alloc(10)])); break;
      case '/short-chunked': res.writeHead(200); res.end(half); break; // ends cleanly, no length
      case '/cut': // announces the whole file, sends half, then the connection drops
        res.writeHead(200, { 'Content-Length': BYTES.length });
        res.write(half, () => setTimeout(() => res.socket.destroy(), 20));
        break;
      default: res.writeHead(404); res.end();
    }
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${server.address().port}`;
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-mismatch-'));
});
after(() => {
  fs.rmSync(dir, { recursive: true, force: true });
  return new Promise((r) => { server.close(r); server.closeAllConnections(); });
});

const pinned = { sha256: SHA, size: BYTES.length };

test('js/models/cache.js: the pinned file downloads', async () => {
  const b = await download(`${base}/good`, pinned);
  assert.equal(b.size, BYTES.length);
});

test('js/models/cache.js: a transfer that breaks off midway is a partial download (WLM_ERR_IO, partial)', async () => {
  await assert.rejects(download(`${base}/cut`, pinned), (err) => {
    assert.equal(err.code, 'WLM_ERR_IO');
    assert.equal(err.partial, true);
    assert.match(err.message, new RegExp(`broke off after \\d+ of ${BYTES.length} bytes \\(a partial download`));
    return true;
  });
});

test('js/models/cache.js: fewer bytes than pinned, cleanly ended, is a partial download (WLM_ERR_CHECKSUM)', async () => {
  await assert.rejects(download(`${base}/short-chunked`, pinned), (err) => {
    assert.equal(err.code, 'WLM_ERR_CHECKSUM');
    assert.equal(err.mismatch, 'partial');
    assert.equal(err.expected, BYTES.length);
    assert.equal(err.actual, BYTES.length >> 1);
    assert.match(err.message, /stopped after \d+ of \d+ bytes \(a partial download/);
    return true;
  });
});

test('js/models/cache.js: a server file of another size is refused from Content-Length, before the body', async () => {
  let progressed = 0;
  await assert.rejects(download(`${base}/longer`, { ...pinned, onProgress: (p) => { progressed = p.loaded; } }), (err) => {
    assert.equal(err.code, 'WLM_ERR_CHECKSUM');
    assert.equal(err.mismatch, 'size');
    assert.equal(err.expected, BYTES.length);
    assert.equal(err.actual, BYTES.length + 10);
    assert.match(err.message, /bytes on the server, expected \d+: not the published file.*nothing was downloaded/);
    return true;
  });
  assert.equal(progressed, 0, 'no byte of the body was read');
  // without Content-Length the size is checked after the body, before the sha256
  await assert.rejects(download(`${base}/longer-chunked`, pinned), { code: 'WLM_ERR_CHECKSUM', mismatch: 'size' });
});

test('js/models/cache.js: same size, other bytes is a sha256 mismatch', async () => {
  await assert.rejects(download(`${base}/other`, pinned), (err) => {
    assert.equal(err.code, 'WLM_ERR_CHECKSUM');
    assert.equal(err.mismatch, 'sha256');
    assert.equal(err.expected, SHA);
    assert.match(err.message, /does not match its checksum: expected sha256 .* \(the file was replaced at the source/);
    return true;
  });
});

/** models/fetch.mjs's downloadFile to a fresh name; checks that no file is left on failure. */
async function fetchTo(url, spec = pinned) {
  const dest = path.join(dir, `f${Math.random().toString(36).slice(2)}.bin`);
  try {
    return await downloadFile({ url, dest, ...spec });
  } finally {
    assert.ok(!fs.existsSync(`${dest}.part`), 'no .part file left');
  }
}

test('models/fetch.mjs: the pinned file downloads and is verified', async () => {
  const r = await fetchTo(`${base}/good`);
  assert.deepEqual(r, { size: BYTES.length, sha256: SHA, verified: true });
});

test('models/fetch.mjs: partial downloads, other sizes and other bytes are told apart', async () => {
  const cases = [
    ['/cut', 'partial', new RegExp(`broke off after \\d+ of ${BYTES.length} bytes \\(a partial download; run again\\)`)],
    ['/short-chunked', 'partial', new RegExp(`stopped after ${BYTES.length >> 1} of ${BYTES.length} bytes \\(a partial download`)],
    ['/longer', 'size', new RegExp(`is ${BYTES.length + 10} bytes on the server, the manifest pins ${BYTES.length}: not the published file.*nothing was downloaded`)],
    ['/longer-chunked', 'size', new RegExp(`gave ${BYTES.length + 10} bytes, the manifest pins ${BYTES.length}: not the published`)],
    ['/other', 'sha256', new RegExp(`sha256 [0-9a-f]{64}, the manifest pins ${SHA}: not the published file \\(replaced at the source`)],
  ];
  for (const [url, mismatch, message] of cases) {
    await assert.rejects(fetchTo(`${base}${url}`), (err) => {
      assert.equal(err.mismatch, mismatch, `${url}: ${err.message}`);
      assert.match(err.message, message);
      return true;
    });
  }
});

test('models/fetch.mjs: a present file that is not the pinned one is downloaded again', async () => {
  const sub = fs.mkdtempSync(path.join(dir, 'entry-'));
  fs.writeFileSync(path.join(sub, 'm.bin'), OTHER);
  const lines = [];
  const r = await fetchEntry({ file: 'm.bin', url: `${base}/good`, ...pinned }, { dir: sub, log: (l) => lines.push(l) });
  assert.equal(r[0].verified, true);
  assert.ok(fs.readFileSync(path.join(sub, 'm.bin')).equals(BYTES));
  assert.ok(lines.some((l) => /does not match the manifest; downloading again/.test(l)), lines.join('\n'));
});
