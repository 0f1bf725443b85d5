// _helpers.mjs — shared paths and small utilities for the node:test files in tests/js/.
// Not a test file itself (node --test only runs *.test.mjs here). Model files are read in place
// from ../shared (relative to the repository root), never copied.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createEngine, WasmlmError } from '../../js/wasmlm.js';

export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const SHARED = resolve(REPO, '../shared');
export const MODELS = resolve(SHARED, 'models');
export const REFERENCE = resolve(SHARED, 'reference');

export const MODEL = resolve(MODELS, 'stories260K.bin');
export const TOKENIZER = resolve(MODELS, 'tok512.bin');
export const BIG_TOKENIZER = resolve(MODELS, 'tokenizer.bin');

/** The reference text run.c printed for `name`, without its final "\n" (run.c's own). */
export function referenceText(name) {
  const text = readFileSync(resolve(REFERENCE, name), 'utf8');
  if (!text.endsWith('\n')) throw new Error(`${name}: expected run.c's trailing newline`);
  return text.slice(0, -1);
}

/** An engine with stories260K + tok512 loaded. */
export async function loadedEngine(engineOptions = {}, loadOptions = {}) {
  const engine = await createEngine(engineOptions);
  await engine.load({ model: MODEL, tokenizer: TOKENIZER, ...loadOptions });
  return engine;
}

/** All tokens of a generation, as an array. */
export async function collect(iterable) {
  const out = [];
  for await (const t of iterable) out.push(t);
  return out;
}

/**
 * run.c's safe_printf: a piece that is a single byte which is neither printable nor whitespace
 * is not printed. Applied to a token's decoded text (a single ASCII control character).
 */
export function runcVisible(text) {
  if (text.length !== 1) return text;
  const c = text.charCodeAt(0);
  const printable = c >= 0x20 && c <= 0x7e;
  const space = c === 0x20 || (c >= 0x09 && c <= 0x0d);
  return c < 0x80 && !printable && !space ? '' : text;
}

/**
 * A worker_threads Worker running js/worker/worker.js (through _worker_shim.mjs), shaped like a Web
 * Worker for createWorkerEngine({worker}). `raw` is the worker_threads Worker.
 */
export async function webWorkerLike() {
  const { Worker } = await import('node:worker_threads');
  const w = new Worker(new URL('./_worker_shim.mjs', import.meta.url));
  return {
    raw: w,
    postMessage: (msg, transfer) => w.postMessage(msg, transfer),
    addEventListener(type, fn) {
      if (type === 'message') w.on('message', (data) => fn({ data }));
      if (type === 'error') w.on('error', (error) => fn({ message: error.message, error }));
    },
    terminate: () => w.terminate(),
  };
}

/** The ids, texts and probabilities of a token list, for comparing two runs. */
export function tokenSummary(tokens) {
  return tokens.map((t) => ({ id: t.id, text: t.text, prob: t.prob, probSampled: t.probSampled }));
}

/** Asserts that `engine.complete(prompt, params)` rejects with WLM_ERR_INVALID_ARG (status -1)
 *  and a message matching `message`, before any token reaches onToken. */
export async function assertRejectsParams(engine, prompt, params, message) {
  const seen = [];
  await assert.rejects(engine.complete(prompt, params, { onToken: (t) => seen.push(t) }), (e) => {
    assert.ok(e instanceof WasmlmError, String(e));
    assert.equal(e.code, 'WLM_ERR_INVALID_ARG');
    assert.equal(e.status, -1);
    assert.match(e.message, message);
    return true;
  });
  assert.equal(seen.length, 0, 'tokens were streamed before the rejection');
}
