// storage/download.js — one file from the network into a store backend (opfs.js, cache_storage.js,
// memory.js), resumable: HTTP Range requests continue where the stored bytes end, after a dropped
// connection (at once, with backoff), a reload or a closed tab (from the metadata the last
// committed segment wrote).
//
// In a browser the file is asked for in bounded ranges of `requestBytes` (8 MiB; the next one
// sent while the last is read), not in one request: Chromium's fetch() reads a response body
// into the page's memory as fast as the network delivers it, whatever the reader takes (Blink's
// BufferingBytesConsumer, for any response without Cache-Control: no-store), so one request for
// a whole file held up to ~100 MB in the renderer whenever the hash and the disk fell behind a
// fast network. A bounded range caps that at the bytes asked for and not yet read: two ranges.
// A server that ignores Range answers the first one with the whole file (a 200), read as it
// comes. Ranges go to where the URL redirected (a CDN), back to the URL if that address fails.
// The reads are gathered into steps of 4 MiB (fewer after 100 ms) that are written, hashed and
// reported together: what each step costs the garbage collector, not its bytes, made the page's
// memory grow with the file when every read was a step.
// A writer that copies (the OPFS worker's) stores one step while the next is read and hashed;
// the metadata is rewritten at most once a second while segments commit, and at every stop.
//
// Every response is checked before its bytes are written, so a stored file is never a mix of two
// versions:
//   - a 206 must start at the byte asked for, and its total (Content-Range) must equal the size
//     known so far (the pinned size, if any); ETag / Last-Modified must equal the ones recorded
//     when the file started (from its first response); it may not send past its own range;
//   - a 200 to a Range request (the server ignores Range) starts the file over from its byte 0;
//   - a body longer than the file is refused before its extra bytes are written; a short one is
//     a dropped connection (resumed).
// A changed file (other validators or size) discards the stored part and starts over, up to
// `maxRestarts` times, then fails. The sha256 is computed while the bytes arrive (integrity.js)
// and checked against the caller's pin before the file is marked complete; a mismatch deletes it.
//
// Metadata (meta.json; store.js reads it): {v, key, url, id, name, size (known so far),
// pinnedSize (the caller's), etag, lastModified,
// sha256 (the pin), actualSha256, segments: [bytes of each committed segment], done (their sum),
// hashState (the hasher's state after `done` bytes, base64), complete, verified, storedAt,
// updatedAt}.

import { WasmlmError } from '../../runtime/errors.js';
import { createHasher, rehash } from './integrity.js';

/** Whether this is a browser, whose fetch() reads a response body ahead of its reader (Chromium:
 *  without limit), rather than Node, whose fetch (undici) holds back an unread body — and throws
 *  an uncatchable AssertionError when the server closes the connection of a body not read yet
 *  (nodejs/undici#5360, in Node 24's undici) — so that Node neither needs bounded ranges nor may
 *  ask for one ahead. */
const READS_AHEAD = typeof globalThis.process?.versions?.node !== 'string';

/** Defaults of the options below (ms, bytes and counts). */
export const DOWNLOAD_DEFAULTS = Object.freeze({
  retries: 6, stallMs: 30_000, maxRestarts: 2, backoffMs: 500, backoffMaxMs: 15_000, segmentBytes: 16 << 20,
  requestBytes: READS_AHEAD ? 8 << 20 : 0, requestAhead: READS_AHEAD,
});

/** Bytes read from the network per step (the BYOB reader's buffer). */
const READ_BYTES = 1 << 20;
/** Bytes gathered from the reads before they are written, hashed and reported as one step, or
 *  fewer when STEP_MS passed since the last step (a slow network still reports its progress). */
const STEP_BYTES = 4 << 20;
const STEP_MS = 100;
/** In a browser, after each this many bytes the garbage collector is told of them (nudgeCollector). */
const NUDGE_BYTES = READS_AHEAD ? 32 << 20 : 0;

/**
 * Makes the JS engine see the memory a download leaves for its garbage collector. In Chromium a
 * response body's bytes pass through Blink's own garbage-collected buffers (BufferingBytesConsumer:
 * a heap vector per chunk read from the network), which V8 does not count as pressure: the
 * renderer's memory grew with the file (~10 MB a GB) until a collection came on its own. V8 does
 * count ArrayBuffer memory: an ArrayBuffer of NUDGE_BYTES, allocated and dropped untouched (its
 * pages are never written, so none becomes resident), moves it to collect, and those buffers go
 * with it. Measured (bench/download.mjs, 4 GB): the peak above the page stays flat with the size.
 * Returns the bytes allocated, 0 when there was no address space for them (the caller then stops
 * nudging); the result is used, so the allocation cannot be optimized away.
 */
function nudgeCollector() {
  try {
    return new ArrayBuffer(NUDGE_BYTES).byteLength;
  } catch {
    return 0;
  }
}

/** Progress reports at most this often (ms), besides the first and the last. */
const REPORT_MS = 100;
/** The metadata of a partial file is written after a segment's commit when this many ms passed
 *  since it was last written (and on every stop): a reload loses at most the bytes of that time,
 *  fetched again, while a fast network does not write meta.json hundreds of times a file (each
 *  write a writable stream whose objects only the garbage collector frees). */
const META_MS = 1000;

function abortError(signal) {
  const r = signal?.reason;
  return r instanceof Error && r.name === 'AbortError' ? r : new DOMException('The download was aborted.', 'AbortError');
}

function checksumError(message, url, expected, actual, mismatch) {
  const err = new WasmlmError(message, 'WLM_ERR_CHECKSUM', null, { url });
  Object.assign(err, { expected, actual, mismatch });
  return err;
}

/** Thrown inside a transfer: the response cannot be used, the stored part stays (retry). */
class Retry extends Error {}
/** The stored part cannot be continued: it is discarded and the file starts over. `kind`:
 *  'changed' (other validators or size: another version of the file), 'size' (not the size the
 *  caller pinned: the address may point at another file), 'norange' (the server
 *  answered a Range request with the whole file), 'protocol' (a response that breaks HTTP's
 *  rules: a 206 for other bytes, a body past the file's end). */
class Restart extends Error {
  constructor(message, kind, response = null) { super(message); this.kind = kind; this.response = response; }
}

/** bytes a-b/T → {start, end, total|null}, or null. */
export function parseContentRange(value) {
  const m = /^\s*bytes\s+(\d+)-(\d+)\/(\d+|\*)\s*$/i.exec(value ?? '');
  if (!m) return null;
  return { start: Number(m[1]), end: Number(m[2]), total: m[3] === '*' ? null : Number(m[3]) };
}

/** Waits `ms`, or rejects when `signal` aborts. */
function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) { reject(abortError(signal)); return; }
    const t = setTimeout(() => { signal?.removeEventListener('abort', onAbort); resolve(); }, ms);
    const onAbort = () => { clearTimeout(t); reject(abortError(signal)); };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** A fresh metadata object for `url`. */
export function newMeta({ key, url, id = null, name, sha256 = null, size = null, segmentBytes }) {
  return {
    v: 1, key, url, id, name, size, pinnedSize: size, etag: null, lastModified: null, sha256: sha256?.toLowerCase() ?? null,
    actualSha256: null, segmentBytes, segments: [], done: 0, hashState: null, complete: false, verified: false,
    storedAt: null, updatedAt: new Date().toISOString(),
  };
}

/**
 * Downloads `meta.url` into `backend` under `meta.key`, from the `meta.done` bytes already
 * committed there. Resolves with the completed metadata; rejects with WasmlmError 'WLM_ERR_IO'
 * (retries exhausted: `partial` true and the stored part kept for a later resume; an HTTP error
 * status: `httpStatus`), 'WLM_ERR_CHECKSUM' (mismatch 'sha256' | 'size' | 'changed'; the stored
 * part is deleted), 'WLM_ERR_QUOTA' (from `checkQuota`, or the storage filled up: the part is
 * kept), or an AbortError (the part is kept).
 *
 * @param {object} o
 * @param {object} o.backend   a store backend
 * @param {object} o.meta      the file's metadata (newMeta(), or as stored)
 * @param {(p: {loaded: number, total: number, bytesPerSec: number, secondsLeft: number|null,
 *   resumedFrom: number, attempt: number}) => void} [o.onProgress]
 * @param {AbortSignal} [o.signal]
 * @param {(needed: number) => Promise<void>} [o.checkQuota]  throws before bytes are fetched
 *   when `needed` more bytes do not fit
 * @param {typeof fetch} [o.fetch]
 * @param {() => boolean} [o.live]  false once the page is going away: from then on nothing is
 *   written (a page being unloaded may run on after another page of the origin took the file over)
 * @param {number} [o.requestBytes]  bytes asked for per request (Range: bytes=N-M); 0: one
 *   open-ended request (bytes=N-) per attempt (default: 8 MiB in a browser, 0 in Node)
 * @param {boolean} [o.requestAhead]  ask for the next range while one is read (hides a round
 *   trip per range; default: true in a browser, false in Node)
 */
export async function downloadInto({ backend, meta, onProgress, signal, checkQuota, fetch: fetchFn = globalThis.fetch,
  live = () => true,
  retries = DOWNLOAD_DEFAULTS.retries, stallMs = DOWNLOAD_DEFAULTS.stallMs, maxRestarts = DOWNLOAD_DEFAULTS.maxRestarts,
  backoffMs = DOWNLOAD_DEFAULTS.backoffMs, backoffMaxMs = DOWNLOAD_DEFAULTS.backoffMaxMs,
  requestBytes = DOWNLOAD_DEFAULTS.requestBytes, requestAhead = DOWNLOAD_DEFAULTS.requestAhead }) {
  const { key, url } = meta;
  const segmentBytes = meta.segmentBytes || DOWNLOAD_DEFAULTS.segmentBytes;
  const pinnedSize = meta.pinnedSize ?? null; // the caller's size (meta.size: the size learnt so far)

  let hasher = null;
  let pos = meta.done;              // bytes written (committed + in the open segment)
  let writer = null;                // the open segment
  let segFill = 0;                  // its bytes
  let total = meta.size ?? 0;       // 0: unknown yet
  let restarts = 0;                 // 'changed' / 'protocol' restarts
  let norange = 0;                  // restarts because the server ignored Range
  let failures = 0;                 // consecutive failed attempts without progress
  let attempt = 0;
  const t0 = performance.now();
  let bytesThisSession = 0;

  // What is stored must be what the metadata says: segments all present with their sizes.
  if (meta.done > 0) {
    const sizes = await backend.segmentSizes(key, meta.segments.length);
    if (sizes.some((s, i) => s !== meta.segments[i])) await reset();
  } else {
    await backend.truncate(key, 0);
  }
  hasher = await createHasher(meta.hashState);
  if (meta.done > 0 && !hasher.resumed) await rehash(hasher, await backend.blob(key, meta.segments.length));
  const resumedFrom = meta.done;

  let reportedAt = -Infinity;
  const report = (last = false) => {
    const now = performance.now();
    if (!last && now - reportedAt < REPORT_MS) return;
    reportedAt = now;
    const secs = (now - t0) / 1000;
    const rate = secs > 0 ? bytesThisSession / secs : 0;
    onProgress?.({ loaded: pos, total, bytesPerSec: rate, secondsLeft: total && rate > 0 ? (total - pos) / rate : null,
      resumedFrom, attempt });
  };

  let savedAt = -Infinity;
  let unsaved = false; // segments committed since the metadata was last written
  async function saveMeta() {
    if (!live()) throw abortError(signal);
    savedAt = performance.now();
    unsaved = false;
    meta.updatedAt = new Date().toISOString();
    await backend.writeMeta(key, meta);
  }

  /** Closes the open segment: its bytes become part of what a reload keeps once the metadata
   *  says so. `save`: true writes the metadata now, 'soon' when META_MS passed since it was last
   *  written (else the next commit or the stop writes it), false leaves it to the caller. */
  async function commit(save = true) {
    if (!writer) return;
    const w = writer;
    try {
      await written(); // (a write that failed leaves the segment's bytes unknown: it is discarded)
      if (writeFailed) throw writeFailed;
    } catch (e) {
      writer = null;
      await w.abort();
      throw e;
    }
    writer = null;
    if (segFill === 0 || !live()) {
      await w.abort();
      if (!live()) throw abortError(signal);
      return;
    }
    await w.close();
    meta.segments.push(segFill);
    meta.done += segFill;
    meta.hashState = hasher.state();
    segFill = 0;
    unsaved = true;
    if (save === true || (save === 'soon' && performance.now() - savedAt >= META_MS)) await saveMeta();
  }

  /** Discards everything stored: the file starts over at byte 0. */
  async function reset() {
    await written().catch(() => {});
    await writer?.abort();
    writer = null;
    segFill = 0;
    await backend.truncate(key, 0);
    Object.assign(meta, { segments: [], done: 0, hashState: null, etag: null, lastModified: null, size: pinnedSize });
    pos = 0;
    total = pinnedSize ?? 0;
    if (hasher) hasher.reset();
    await saveMeta();
  }

  // A writer whose write() copies the bytes before it returns (`copies`: the OPFS worker's) takes
  // the next write while it stores the last: the bytes are hashed, and the network read, as the
  // worker writes. One write in flight; its failure surfaces at the next write or the commit.
  let inFlight = null;
  let writeFailed = null; // the error of a write that failed: its segment is not committed
  async function written() {
    const p = inFlight;
    inFlight = null;
    try {
      await p;
    } catch (e) {
      writeFailed ??= e;
      throw e;
    }
  }
  async function write(chunk) {
    for (let at = 0; at < chunk.byteLength;) {
      if (!live()) throw abortError(signal);
      if (!writer) writer = await backend.openSegment(key, meta.segments.length);
      const take = chunk.subarray(at, at + Math.min(chunk.byteLength - at, segmentBytes - segFill));
      await written();
      if (writer.copies) {
        inFlight = writer.write(take);
        inFlight.catch(() => {}); // (awaited by written())
      } else {
        await writer.write(take);
      }
      hasher.update(take);
      segFill += take.byteLength;
      pos += take.byteLength;
      bytesThisSession += take.byteLength;
      at += take.byteLength;
      if (segFill >= segmentBytes) await commit('soon');
    }
  }

  // Reads are gathered into steps of STEP_BYTES (a copy) before they are written, hashed and
  // reported: the network hands over ~0.5 MiB a read, and every write (a message to the OPFS
  // worker and its answer), hash call and progress report leaves objects that only the garbage
  // collector frees — in Chromium, at its own pace: the renderer's memory grew with their number,
  // so with the file's size. What was gathered is written before any error is handled, so every
  // byte that arrived is kept, as when each read was written on its own.
  let step = null;
  let gathered = 0;
  let sinceNudge = 0;
  let stepAt = performance.now();
  async function gather(bytes) {
    for (let at = 0; at < bytes.byteLength;) {
      step ??= new Uint8Array(STEP_BYTES);
      const n = Math.min(bytes.byteLength - at, STEP_BYTES - gathered);
      step.set(bytes.subarray(at, at + n), gathered);
      gathered += n;
      at += n;
      if (gathered === STEP_BYTES) await flush();
    }
    if (performance.now() - stepAt >= STEP_MS) await flush();
  }
  async function flush() {
    if (gathered === 0) return;
    const n = gathered;
    gathered = 0;
    await write(step.subarray(0, n));
    if (NUDGE_BYTES && (sinceNudge += n) >= NUDGE_BYTES) {
      sinceNudge = nudgeCollector() > 0 ? 0 : -Infinity; // -Infinity: never again
    }
    stepAt = performance.now();
    report();
  }

  if (checkQuota && total) await checkQuota(total - pos);
  await saveMeta();

  // Where ranges are asked for: the URL, or where it redirected a range to (a CDN's signed URL,
  // as huggingface.co's /resolve/ gives: one redirect per file, not per range), until that fails.
  let target = url;

  /** A request for the bytes from `at`: bounded to `requestBytes` (and the file's end, when
   *  known), or open-ended. Its own AbortController, tied to `signal`; `res` once it answered. */
  function request(at) {
    const ctl = new AbortController();
    const onAbort = () => ctl.abort(signal.reason);
    if (signal?.aborted) onAbort(); else signal?.addEventListener('abort', onAbort, { once: true });
    const end = requestBytes > 0 && (total || at === 0) ? (total ? Math.min(total, at + requestBytes) : requestBytes) : null;
    const headers = end !== null ? { Range: `bytes=${at}-${end - 1}` } : at > 0 ? { Range: `bytes=${at}-` } : {};
    const promise = fetchFn(target, { headers, signal: ctl.signal, cache: 'no-store' });
    promise.catch(() => {}); // (awaited when used; a request sent ahead may never be)
    return { at, ctl, promise, res: null, openEnded: end === null, redirectedTo: target !== url,
      release: () => signal?.removeEventListener('abort', onAbort) };
  }
  /** Abandons a request that will not be read. */
  function drop(req) {
    if (!req) return;
    req.release();
    req.ctl.abort(new Retry('not needed'));
    req.promise.then((r) => r.body?.cancel().catch(() => {}), () => {});
  }

  let pending = null; // a request whose 200 response is used as it is after a restart
  let ahead = null;   // the next range, asked for while this one is read
  let fresh = true;   // false: the loop goes on with the next range, not a new attempt
  let readBuffer = new ArrayBuffer(READ_BYTES);
  try {
    for (;;) {
      if (signal?.aborted) throw abortError(signal);
      if (total && pos === total) break;
      if (fresh) attempt++;
      fresh = true;
      const progressBefore = pos;
      let req = pending ?? (ahead?.at === pos ? ahead : null);
      if (ahead && ahead !== req) drop(ahead);
      pending = ahead = null;
      // The stall watch: a deadline moved on by each read, checked by one timer that re-arms
      // itself (not a timer per read: each would be an object left for the garbage collector).
      let timer = null;
      let deadline = Infinity; // Infinity: paused (a write in progress: a slow disk is not a stalled server)
      const watch = () => {
        const left = deadline - performance.now();
        if (left <= 0) { timer = null; req.ctl.abort(new Retry(`no data for ${stallMs} ms`)); return; }
        timer = setTimeout(watch, Math.min(stallMs, Math.max(1, left)));
      };
      const arm = () => {
        deadline = performance.now() + stallMs;
        timer ??= setTimeout(watch, stallMs);
      };
      try {
        req ??= request(pos);
        arm();
        let res = req.res;
        if (!res) {
          try {
            res = req.res = await req.promise;
          } catch (e) {
            if (signal?.aborted) throw abortError(signal);
            if (req.redirectedTo) target = url;
            throw new Retry(req.ctl.signal.reason instanceof Retry ? req.ctl.signal.reason.message
              : `the request failed: ${e?.cause?.code || e?.message || e}`);
          }
        }
        if (req.redirectedTo && res.status !== 206 && res.status !== 200) {
          // The redirect's URL no longer serves (a signed URL expired): back to the URL itself.
          res.body?.cancel().catch(() => {});
          target = url;
          throw new Retry(`HTTP ${res.status} from the address ${url} redirected to`);
        }
        const limit = await accept(res); // where this response's bytes end (null: not known)
        if (requestBytes > 0 && res.status === 206 && res.redirected && res.url) target = res.url;
        if (!res.body) throw new Retry('the response has no body');
        if (requestAhead && requestBytes > 0 && res.status === 206 && total && limit < total) ahead = request(limit);
        // A BYOB reader fills one reused buffer (a byte stream: Chromium, Firefox, Node), so a
        // multi-GB download leaves no trail of chunk buffers for the garbage collector; else the
        // stream's own chunks.
        let byob = null;
        try { byob = res.body.getReader({ mode: 'byob' }); } catch { /* not a byte stream */ }
        const reader = byob ?? res.body.getReader();
        try {
          for (;;) {
            let r;
            try {
              if (byob && readBuffer.byteLength === 0) readBuffer = new ArrayBuffer(READ_BYTES); // lost to a failed read
              r = byob ? await byob.read(new Uint8Array(readBuffer)) : await reader.read();
              if (byob && r.value) readBuffer = r.value.buffer; // the buffer comes back transferred
            } catch (e) {
              if (signal?.aborted) throw abortError(signal);
              throw new Retry(req.ctl.signal.reason instanceof Retry ? req.ctl.signal.reason.message
                : `the connection broke off: ${e?.message ?? e}`);
            }
            if (r.done) break;
            const end = limit ?? total;
            if (end && pos + gathered + r.value.byteLength > end) {
              throw new Restart(end === total ? `the server sent more than the file's ${total} bytes`
                : `the server sent more than the range it announced (to byte ${end - 1})`, 'protocol');
            }
            deadline = Infinity; // (a slow disk is not a stalled server)
            await gather(r.value);
            arm();
            if (pos > progressBefore) failures = 0;
          }
          await flush();
        } finally {
          reader.cancel().catch(() => {});
        }
        // No length given: the body was the file (or its rest, asked for open-ended).
        if (!total && (res.status === 200 || req.openEnded)) { total = pos; meta.size = pos; }
        if (pos < (limit ?? total)) throw new Retry(`the response ended after ${pos} of ${total} bytes`);
        fresh = false; // a range read whole: the next one (or the end)
      } catch (e) {
        drop(ahead);
        ahead = null;
        await flush(); // the bytes that arrived are kept (a Restart discards them below)
        if (pos > progressBefore) failures = 0;
        if (e instanceof Restart) {
          if (e.kind === 'norange' ? ++norange > retries : ++restarts > maxRestarts) {
            e.response?.body?.cancel().catch(() => {});
            await written().catch(() => {});
            await writer?.abort();
            writer = null;
            unsaved = false; // (nothing is kept)
            await backend.remove(key).catch(() => {});
            if (e.kind === 'norange') {
              const err = new WasmlmError(`the download of ${url} broke off ${norange} times and the server cannot ` +
                'resume it (it ignores Range requests: 200 instead of 206); the partial download was deleted',
              'WLM_ERR_IO', null, { url });
              err.partial = true;
              throw err;
            }
            throw checksumError(`${meta.name}: ${e.kind === 'protocol' ? 'the server sent responses that do not fit together'
              : e.kind === 'size' ? 'the server\'s file is not the size pinned' : 'the file changed on the server while it downloaded'} (last: ${e.message}), ${restarts} times; ` +
              'the partial download was deleted', url, null, null, e.kind === 'size' ? 'size' : e.kind === 'protocol' ? 'protocol' : 'changed');
          }
          await reset();
          if (e.response) pending = req;
          continue;
        }
        if (!(e instanceof Retry)) throw e;
        failures++;
        if (failures > retries) {
          const err = new WasmlmError(`the download of ${url} failed after ${attempt} attempts (${e.message}); ` +
            `${pos} of ${total || '?'} bytes are stored and the next try resumes from them`, 'WLM_ERR_IO', null, { url });
          err.partial = true;
          throw err;
        }
        const wait = Math.min(backoffMaxMs, backoffMs * 2 ** (failures - 1)) * (0.5 + Math.random() / 2);
        await sleep(wait, signal);
      } finally {
        clearTimeout(timer);
        if (req !== pending) req?.release();
      }
    }
    await commit(false); // the metadata is written once, complete, below
  } catch (e) {
    drop(ahead);
    drop(pending);
    // Keep what arrived (a resume starts from it), unless the error says the part is wrong.
    if (writer) {
      if (e?.code === 'WLM_ERR_CHECKSUM' || !live()) await written().catch(() => {}).then(() => writer?.abort());
      else await commit().catch(() => writer?.abort());
    }
    if (unsaved && live() && e?.code !== 'WLM_ERR_CHECKSUM') await saveMeta().catch(() => {});
    if (e?.name === 'QuotaExceededError') throw quotaError(url, total - pos, null, e);
    throw e;
  }

  const actual = hasher.hex();
  if (meta.sha256 && actual !== meta.sha256) {
    await backend.remove(key).catch(() => {});
    throw checksumError(`${meta.name} does not match its checksum: expected sha256 ${meta.sha256}, got ${actual} ` +
      '(the file was replaced at the source, or damaged on the way); the downloaded file was deleted',
    url, meta.sha256, actual, 'sha256');
  }
  Object.assign(meta, { actualSha256: actual, complete: true, verified: Boolean(meta.sha256), hashState: null,
    storedAt: new Date().toISOString(), size: pos });
  await saveMeta();
  report(true);
  return meta;

  /** Checks a response against what is known; throws Retry, Restart or a fatal error. Returns
   *  the byte its body must end at (a 206: its range's end + 1; a 200: the file's size, or null
   *  when not known). */
  async function accept(res) {
    const etag = res.headers.get('etag');
    const lastModified = res.headers.get('last-modified');
    if (res.status === 206) {
      const range = parseContentRange(res.headers.get('content-range'));
      const refuse = (restart) => { res.body?.cancel().catch(() => {}); throw restart; };
      if (!range || range.start !== pos || range.end < range.start || (range.total != null && range.end >= range.total)) {
        refuse(new Restart(`a 206 response for bytes ${range ? `${range.start}-${range.end}` : '(no Content-Range)'} instead of ${pos}-`, 'protocol'));
      }
      if (range.total != null && pos === 0 && pinnedSize != null && range.total !== pinnedSize) {
        // The published file has another size: with a pinned size that is not the file asked for.
        refuse(new Restart(`it is ${range.total} bytes on the server, expected ${pinnedSize}`, 'size'));
      }
      if (range.total != null && total && range.total !== total) {
        refuse(new Restart(`its size is now ${range.total} bytes, not ${total}`, 'changed'));
      }
      if (pos === 0) { // the file's first response: its validators are the ones later ranges must carry
        meta.etag = etag; // written with the first committed segment
        meta.lastModified = lastModified;
      } else if (changed(etag, lastModified)) {
        refuse(new Restart(`its ${meta.etag ? 'ETag' : 'Last-Modified'} changed`, 'changed'));
      }
      if (range.total != null && !total) {
        total = range.total;
        meta.size = total;
        if (checkQuota) await checkQuota(total).catch((e) => refuse(e));
      }
      const len = Number(res.headers.get('content-length'));
      if (res.headers.get('content-length') !== null && Number.isSafeInteger(len) && pos + len > range.end + 1) {
        refuse(new Restart(`a Content-Length of ${len} past the range's end`, 'protocol'));
      }
      return range.end + 1;
    }
    if (res.status === 200) {
      const encoding = res.headers.get('content-encoding');
      const len = Number(res.headers.get('content-length'));
      const length = (!encoding || encoding === 'identity') && res.headers.get('content-length') !== null &&
        Number.isSafeInteger(len) ? len : null;
      if (pos > 0) throw new Restart('the server ignored the Range request (200 instead of 206)', 'norange', res);
      if (length != null && pinnedSize != null && length !== pinnedSize) {
        res.body?.cancel().catch(() => {});
        // The published file has another size: with a pinned size that is not the file asked for.
        throw new Restart(`it is ${length} bytes on the server, expected ${pinnedSize}`, 'size');
      }
      if (length != null && total && length !== total) {
        res.body?.cancel().catch(() => {});
        throw new Restart(`its size is now ${length} bytes, not ${total}`, 'changed');
      }
      if (length != null && !total) {
        total = length;
        meta.size = length;
        if (checkQuota) await checkQuota(total).catch((e) => { res.body?.cancel().catch(() => {}); throw e; });
      }
      meta.etag = etag; // written with the first committed segment
      meta.lastModified = lastModified;
      return total || null;
    }
    res.body?.cancel().catch(() => {});
    if (res.status === 416) throw new Restart('the server refused the range (416): the file is shorter now', 'changed');
    if (res.status === 408 || res.status === 429 || res.status >= 500) throw new Retry(`HTTP ${res.status}`);
    throw new WasmlmError(`cannot download ${url}: HTTP ${res.status}${res.statusText ? ` ${res.statusText}` : ''}`,
      'WLM_ERR_IO', null, { url, httpStatus: res.status });
  }

  /** Whether a response's validators differ from the ones recorded when the file started. */
  function changed(etag, lastModified) {
    if (meta.etag || etag) return meta.etag !== etag;
    if (meta.lastModified || lastModified) return meta.lastModified !== lastModified;
    return false;
  }
}

/** WLM_ERR_QUOTA with `needed` and `available` (bytes; available null when unknown). */
export function quotaError(url, needed, available, cause) {
  const mb = (b) => `${(b / 1e6).toFixed(1)} MB`;
  const err = new WasmlmError(available != null
    ? `not enough storage for ${url}: it needs ${mb(needed)} more, and the browser lets this site store ${mb(available)} more; ` +
      'nothing was downloaded (free space, or delete stored models)'
    : `the storage filled up while ${url} downloaded (${mb(needed)} were still to come); the bytes stored so far are kept`,
  'WLM_ERR_QUOTA', null, { url, ...(cause ? { cause } : {}) });
  err.needed = needed;
  err.available = available;
  return err;
}
