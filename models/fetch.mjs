#!/usr/bin/env node
// models/fetch.mjs — downloads published models listed in models/manifest.json into models/files/
// (gitignored; tools/serve.mjs serves it at /models/files/). Each file is written to <file>.part,
// checked against the manifest's size and sha256, and renamed only when it matches, so a
// corrupt or partial file never sits under the real name. It does not convert or quantize.
//
//   node models/fetch.mjs stories260K            # model + tokenizer
//   node models/fetch.mjs --list                 # what the manifest offers
//   node models/fetch.mjs --force --dir /tmp/m stories15M

import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import crypto from 'node:crypto';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const MANIFEST = path.join(HERE, 'manifest.json');
const DEFAULT_DIR = path.join(HERE, 'files');

/**
 * Reads the manifest.
 * @param {string} [file] path of manifest.json (default: next to this script)
 * @returns {Promise<object[]>} the model entries
 */
export async function readManifest(file = MANIFEST) {
  const json = JSON.parse(await fsp.readFile(file, 'utf8'));
  if (!Array.isArray(json.models)) throw new Error(`${file}: no "models" array`);
  return json.models;
}

/**
 * The sha256 (hex) of a file on disk.
 * @param {string} file
 * @returns {Promise<string>}
 */
export async function sha256File(file) {
  const hash = crypto.createHash('sha256');
  await pipeline(fs.createReadStream(file), hash);
  return hash.digest('hex');
}

/**
 * Downloads one file to `dest` through `dest + '.part'`, verifying it before the rename.
 *
 * @param {object} spec
 * @param {string} spec.url
 * @param {string} spec.dest          final path
 * @param {number|null} [spec.size]   expected byte count, or null when unknown
 * @param {string|null} [spec.sha256] expected hex digest, or null when unknown
 * @param {(loaded: number, total: number) => void} [spec.onProgress] total is 0 when unknown
 * @param {AbortSignal} [spec.signal]
 * @returns {Promise<{size: number, sha256: string, verified: boolean}>}
 *   verified is true when a known sha256 matched. Rejects (leaving no .part file behind) on an
 *   HTTP error, a network error, or a mismatch; the error's `mismatch` says which: 'partial'
 *   (the transfer broke off: fewer bytes than the file has), 'size' (the server's file has
 *   another size: not the pinned file), 'sha256' (same size, other bytes).
 */
export async function downloadFile({ url, dest, size = null, sha256 = null, onProgress, signal }) {
  const part = `${dest}.part`;
  let res;
  try {
    res = await fetch(url, { redirect: 'follow', signal });
  } catch (err) {
    const cause = err.cause ? ` (${err.cause.code || err.cause.message})` : '';
    throw new Error(`cannot reach ${url}: ${err.message}${cause}`);
  }
  if (!res.ok || !res.body) {
    throw new Error(`HTTP ${res.status} ${res.statusText} for ${url}`);
  }
  const header = Number(res.headers.get('content-length')) || 0;
  if (size != null && header && header !== size && !res.headers.get('content-encoding')) {
    await res.body.cancel();
    throw mismatchError(`${url} is ${header} bytes on the server, the manifest pins ${size}: not the ` +
      'published file (it changed, or the URL points elsewhere); nothing was downloaded', 'size');
  }
  const total = size ?? header;

  const hash = crypto.createHash('sha256');
  let loaded = 0;
  const meter = new Transform({
    transform(chunk, _enc, done) {
      hash.update(chunk);
      loaded += chunk.length;
      onProgress?.(loaded, total);
      done(null, chunk);
    },
  });

  await fsp.mkdir(path.dirname(dest), { recursive: true });
  try {
    try {
      await pipeline(Readable.fromWeb(res.body), meter, fs.createWriteStream(part), { signal });
    } catch (err) {
      if (err.name === 'AbortError' || signal?.aborted) throw err;
      const of = total ? ` of ${total}` : '';
      throw mismatchError(`the download of ${url} broke off after ${loaded}${of} bytes (a partial ` +
        `download; run again): ${err.cause?.code || err.message}`, 'partial');
    }
    const digest = hash.digest('hex');
    if (size != null && loaded < size) {
      throw mismatchError(`${url}: the download stopped after ${loaded} of ${size} bytes (a partial ` +
        'download: the connection broke off or the server sent less); run again', 'partial');
    }
    if (size != null && loaded > size) {
      throw mismatchError(`${url} gave ${loaded} bytes, the manifest pins ${size}: not the published ` +
        'file (it changed, or the URL points elsewhere)', 'size');
    }
    if (sha256 != null && digest !== sha256.toLowerCase()) {
      throw mismatchError(`${url}: sha256 ${digest}, the manifest pins ${sha256.toLowerCase()}: not the ` +
        'published file (replaced at the source, or damaged on the way)', 'sha256');
    }
    await fsp.rename(part, dest);
    return { size: loaded, sha256: digest, verified: sha256 != null };
  } catch (err) {
    await fsp.rm(part, { force: true });
    throw err;
  }
}

function mismatchError(message, mismatch) {
  const err = new Error(message);
  err.mismatch = mismatch;
  return err;
}

/**
 * Fetches a manifest entry's model, tokenizer and vision projector (mmproj) into `dir`, skipping files already present
 * and matching (or, without a known sha256, present at all unless `force`).
 *
 * @param {object} entry      a manifest entry
 * @param {object} [options]
 * @param {string} [options.dir]     destination directory (default models/files/)
 * @param {boolean} [options.force]  download even when the file exists
 * @param {(line: string) => void} [options.log]
 * @param {AbortSignal} [options.signal]
 * @returns {Promise<Array<{file: string, size: number, sha256: string, verified: boolean, skipped: boolean}>>}
 */
export async function fetchEntry(entry, { dir = DEFAULT_DIR, force = false, log = console.error, signal } = {}) {
  const results = [];
  for (const spec of [entry, entry.tokenizer, entry.mmproj].filter(Boolean)) {
    const dest = path.join(dir, spec.file);
    if (!force && fs.existsSync(dest)) {
      const digest = await sha256File(dest);
      if (spec.sha256 == null || digest === spec.sha256) {
        log(`${spec.file}: already present${spec.sha256 ? ' (sha256 ok)' : ` (sha256 ${digest}, not verified)`}`);
        results.push({ file: spec.file, size: fs.statSync(dest).size, sha256: digest, verified: spec.sha256 != null, skipped: true });
        continue;
      }
      log(`${spec.file}: present but its sha256 does not match the manifest; downloading again`);
    }
    log(`${spec.file}: ${spec.url}`);
    const progress = progressPrinter(spec.file);
    const result = await downloadFile({ url: spec.url, dest, size: spec.size, sha256: spec.sha256, onProgress: progress.update, signal })
      .finally(progress.end);
    log(result.verified
      ? `${spec.file}: ${result.size} bytes, sha256 ok`
      : `${spec.file}: ${result.size} bytes, sha256 ${result.sha256} (not in the manifest: compare it with the publisher's before trusting it)`);
    results.push({ file: spec.file, ...result, skipped: false });
  }
  return results;
}

/** Progress on stderr: one updating line on a terminal, a line per 10 % otherwise. */
function progressPrinter(label) {
  const tty = process.stderr.isTTY;
  let lastPrint = 0;
  let lastDecile = -1;
  let printed = false;
  return {
    update(loaded, total) {
      const now = Date.now();
      const pct = total ? Math.floor((loaded / total) * 100) : -1;
      if (tty) {
        if (now - lastPrint < 100 && loaded !== total) return;
        lastPrint = now;
        printed = true;
        const of = total ? ` / ${mib(total)} (${pct} %)` : '';
        process.stderr.write(`\r  ${label}: ${mib(loaded)}${of}\x1b[K`);
      } else if (total) {
        const decile = Math.floor(pct / 10);
        if (decile > lastDecile) {
          lastDecile = decile;
          process.stderr.write(`  ${label}: ${pct} %\n`);
        }
      }
    },
    end() {
      if (printed) process.stderr.write('\n');
    },
  };
}

function mib(bytes) {
  return `${(bytes / 1048576).toFixed(1)} MiB`;
}

const USAGE = `usage: node models/fetch.mjs [--dir DIR] [--force] <model-id>... | --list

Downloads a model and its tokenizer from models/manifest.json into models/files/
(or DIR), checking size and sha256 when the manifest knows them.`;

/**
 * The command line. Returns the process exit code (0 ok, 1 download failed, 2 usage).
 * @param {string[]} argv arguments after the script name
 */
export async function main(argv) {
  const ids = [];
  let dir = DEFAULT_DIR;
  let force = false;
  let list = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--dir') dir = path.resolve(argv[++i] ?? '');
    else if (arg === '--force') force = true;
    else if (arg === '--list') list = true;
    else if (arg === '-h' || arg === '--help') { console.log(USAGE); return 0; }
    else if (arg.startsWith('-')) { console.error(`unknown option ${arg}\n${USAGE}`); return 2; }
    else ids.push(arg);
  }

  const models = await readManifest();
  if (list) {
    for (const m of models) {
      const size = m.size != null ? mib(m.size) : 'size unknown';
      // checked (against a copy here), published (pinned by public projects), unverified
      const check = m.sha256 ? (m.checksumSource ?? 'verified').split(':')[0] : 'unverified';
      console.log(`${m.id.padEnd(29)} ${size.padEnd(12)} ${check.padEnd(10)}  ${m.name}`);
    }
    return 0;
  }
  if (ids.length === 0) { console.error(USAGE); return 2; }

  const controller = new AbortController();
  process.once('SIGINT', () => controller.abort());
  let failed = 0;
  for (const id of ids) {
    const entry = models.find((m) => m.id === id);
    if (!entry) {
      console.error(`${id}: not in the manifest (known: ${models.map((m) => m.id).join(', ')})`);
      failed++;
      continue;
    }
    try {
      await fetchEntry(entry, { dir, force, signal: controller.signal });
    } catch (err) {
      console.error(`error: ${err.name === 'AbortError' ? 'interrupted' : err.message}`);
      failed++;
      if (controller.signal.aborted) break;
    }
  }
  if (!failed) console.error(`done: files in ${path.relative(process.cwd(), dir) || '.'}`);
  return failed ? 1 : 0;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main(process.argv.slice(2)).then((code) => { process.exitCode = code; }, (err) => {
    console.error(`error: ${err.message}`);
    process.exitCode = 1;
  });
}
