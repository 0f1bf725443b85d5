// bench/_chromium.mjs — what the page benchmarks share (bench/peers.mjs, images.mjs, ttft.mjs):
// the headless Chromium they drive (its binary, flags and a throw-away profile), the median
// and log line they report with, and wllama's copy of a large GGUF in llama.cpp's split format.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { splitGguf } from '../tools/gguf_split.mjs';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** The Chromium binary ($CHROMIUM, else Debian's). */
export const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
/** Headless, no GPU, and none of Chromium's own background traffic during a measurement. */
export const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

/** A line on stderr (stdout carries the JSON rows). */
export const log = (m) => process.stderr.write(`${m}\n`);

/** The median of the finite numbers of xs (the mean of the middle two for an even count), null when none. */
export const median = (xs) => {
  const s = xs.filter((v) => typeof v === 'number' && Number.isFinite(v)).sort((a, b) => a - b);
  if (!s.length) return null;
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

/**
 * A headless Chromium with a fresh profile in a temporary folder named `prefix`…: 60 s to start,
 * 30 min for each page operation (a large model's load). close() ends it and deletes the profile.
 * @returns {Promise<{context: import('playwright-core').BrowserContext, close: () => Promise<void>}>}
 */
export async function launchChromium(prefix) {
  // imported here, not above: bench/images.mjs --node runs where only Node is (bench/device.sh)
  const { chromium } = await import('playwright-core');
  const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM, headless: true, timeout: 60_000, args: CHROMIUM_ARGS,
  });
  context.setDefaultTimeout(30 * 60_000);
  const close = async () => {
    await context.close().catch(() => {});
    fs.rmSync(userDataDir, { recursive: true, force: true });
  };
  return { context, close };
}

/**
 * `file` in llama.cpp's split format, parts of at most maxBytes of tensor data (tools/gguf_split.mjs),
 * for wllama, which reads each file through one ArrayBuffer (at most 2 GB): the parts' paths in
 * order. Made once, in NAME-split/ beside the file; a set older than the file, or cut short, is
 * made again.
 */
export function wllamaParts(file, maxBytes) {
  const dir = file.replace(/\.gguf$/, '-split');
  const prefix = path.join(dir, path.basename(file, '.gguf'));
  const done = fs.existsSync(dir) && fs.statSync(dir).mtimeMs > fs.statSync(file).mtimeMs
    ? fs.readdirSync(dir).filter((f) => f.endsWith('.gguf')).sort() : [];
  if (done.length && done.length === Number(/-of-(\d+)\.gguf$/.exec(done[0])?.[1])) return done.map((f) => path.join(dir, f));
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  log(`  splitting ${path.relative(REPO, file)} for wllama (tools/gguf_split.mjs)`);
  return splitGguf(file, { maxBytes, prefix });
}

/**
 * A fresh page of `context` at `url`, once its body's data-state is "ready" (within 60 s):
 * window[entry](opts)'s result with `console`, the page's first 20 console errors and warnings
 * and page errors; on any failure { engine: opts.engine, error (its first line), console (40) }.
 * The page is closed after.
 */
export async function runBenchPage(context, url, entry, opts) {
  const page = await context.newPage();
  const consoleLines = [];
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') consoleLines.push(`${m.type()}: ${m.text()}`); });
  page.on('pageerror', (e) => consoleLines.push(`pageerror: ${e.message}`));
  try {
    await page.goto(url);
    await page.waitForFunction(() => document.body.dataset.state === 'ready', null, { timeout: 60_000 });
    const r = await page.evaluate(([name, o]) => window[name](o), [entry, opts]);
    return { ...r, console: consoleLines.slice(0, 20) };
  } catch (e) {
    return { engine: opts.engine, error: String(e.message ?? e).split('\n')[0], console: consoleLines.slice(0, 40) };
  } finally {
    await page.close().catch(() => {});
  }
}
