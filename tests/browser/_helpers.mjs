// _helpers.mjs — shared set-up for the Chromium tests in tests/browser/ (not a test file: node
// --test runs *.test.mjs only). A test server wraps tools/serve.mjs's handler, so the page is
// served exactly as `npm start` serves it, and adds what the tests observe or need: a log of the
// requests the server saw, and /slow/<file>, which streams a model file from ../shared/models in
// small chunks so a download takes long enough to watch its progress.

import fs from 'node:fs/promises';
import fsSync from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import assert from 'node:assert/strict';
import { chromium } from 'playwright-core';
import { createHandler } from '../../tools/serve.mjs';
import { synthCached } from '../../tools/synth_gguf.mjs';
import { mmprojBytes } from '../../tools/synth_mmproj.mjs';

export const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const ARTIFACTS = path.join(REPO, 'tests', 'artifacts');
export const MODELS = path.resolve(REPO, '..', 'shared', 'models');
export const REFERENCE = path.resolve(REPO, '..', 'shared', 'reference', 'stories260K_run.c_greedy_OnceUponATime_404.txt');
export const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
/**
 * Time limit of one test and of each browser action: a hang detector, not a speed requirement,
 * so it is generous (2 cores shared by several test runs took up to 50 s for one test). No
 * assertion depends on it; WASMLM_STEP_TIMEOUT (ms) overrides it.
 */
export const STEP_TIMEOUT = Number(process.env.WASMLM_STEP_TIMEOUT) || 120_000;

/**
 * Starts a server on 127.0.0.1 with a free port.
 * @param {{slowChunk?: number, slowDelayMs?: number, prefix?: string}} [options]
 *   slowChunk, slowDelayMs: /slow/ streaming, bytes per chunk and the pause between chunks
 *   (default 32 kB every 40 ms: stories260K takes ~1.3 s). prefix: serve the repository under
 *   this path (e.g. '/a/b') instead of at the root, as a static host serving a subdirectory
 *   would; everything outside it is 404. isolate: send the cross-origin isolation headers, as
 *   `npm start` does (default true; false: a plain static host). files: {urlPath: filePath}
 *   extra files to serve (e.g. a synthetic model written by the test). transformHtml:
 *   (html, urlPath) => html, applied to every HTML page served from the repository (a path
 *   ending in / or .html), e.g. to put a recording script first in <head> in browsers whose
 *   driver cannot run a script before the page's own (tests/cross-browser/).
 * @returns {Promise<{origin: string, url: string,
 *   requests: {method: string, path: string, at: number, done: boolean}[],
 *   count: (path: string) => number, unfinished: () => string[], close: () => Promise<void>}>}
 *   url is the demo page; requests lists every request seen (path without the query; `at` its
 *   Date.now(), `done` once its response ended or its connection closed).
 */
export async function startTestServer({ slowChunk = 32 * 1024, slowDelayMs = 40, prefix = '', isolate = true,
  files = {}, transformHtml = null } = {}) {
  const handler = createHandler(REPO, true, { isolate });
  const requests = [];
  const server = http.createServer((req, res) => {
    const { pathname } = new URL(req.url, 'http://localhost');
    const entry = { method: req.method, path: pathname, at: Date.now(), done: false };
    requests.push(entry);
    res.once('close', () => { entry.done = true; });
    if (prefix) {
      if (!pathname.startsWith(`${prefix}/`)) {
        res.writeHead(404, { 'Content-Type': 'text/plain' });
        res.end('outside the prefix');
        return;
      }
      req.url = req.url.slice(prefix.length);
    }
    if (pathname.startsWith('/slow/')) return serveSlowly(pathname.slice(6), res, slowChunk, slowDelayMs);
    if (files[pathname]) {
      res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Cross-Origin-Resource-Policy': 'same-origin' });
      fsSync.createReadStream(files[pathname]).pipe(res);
      return;
    }
    if (transformHtml && /(\/|\.html)$/.test(pathname)) return serveHtml(req, res, handler, isolate, transformHtml);
    handler(req, res);
  });
  server.keepAliveTimeout = 1000;
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${server.address().port}`;
  return {
    origin,
    url: `${origin}${prefix}/web/`,
    requests,
    count: (p) => requests.filter((r) => r.path === p && r.method === 'GET').length,
    /** The requests whose responses have not ended, as 'GET /path (for N ms)'. */
    unfinished: () => requests.filter((r) => !r.done).map((r) => `${r.method} ${r.path} (for ${Date.now() - r.at} ms)`),
    close: () => new Promise((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    }),
  };
}

/** Serves the repository's HTML page for req (prefix removed) through `transform`; else `handler`. */
async function serveHtml(req, res, handler, isolate, transform) {
  const urlPath = decodeURIComponent(new URL(req.url, 'http://localhost').pathname);
  const file = path.join(REPO, urlPath.endsWith('/') ? `${urlPath}index.html` : urlPath);
  let html;
  try {
    if (!file.startsWith(`${REPO}${path.sep}`) || urlPath.split('/').some((seg) => seg.startsWith('.'))) throw new Error();
    html = await fs.readFile(file, 'utf8');
  } catch {
    return handler(req, res);
  }
  res.writeHead(200, {
    'Content-Type': 'text/html; charset=utf-8',
    'Cache-Control': 'no-store',
    ...(isolate ? { 'Cross-Origin-Opener-Policy': 'same-origin', 'Cross-Origin-Embedder-Policy': 'require-corp' } : {}),
  });
  res.end(transform(html, urlPath));
}

async function serveSlowly(name, res, chunk, delayMs) {
  let bytes;
  try {
    if (name.includes('/') || name.startsWith('.')) throw new Error('bad name');
    bytes = await fs.readFile(path.join(MODELS, name));
  } catch {
    res.writeHead(404, { 'Content-Type': 'text/plain' });
    res.end('not found');
    return;
  }
  res.writeHead(200, {
    'Content-Type': 'application/octet-stream',
    'Content-Length': String(bytes.length),
    'Cache-Control': 'no-store',
  });
  for (let off = 0; off < bytes.length && !res.destroyed; off += chunk) {
    res.write(bytes.subarray(off, off + chunk));
    await new Promise((r) => setTimeout(r, delayMs));
  }
  res.end();
}

/**
 * Launches headless Debian Chromium with a fresh profile (so Cache Storage starts empty) and
 * opens one page. `problems` collects page errors and console errors; tests call
 * assertNoProblems() to fail on them. `args`: more Chromium switches (e.g. --enable-unsafe-webgpu).
 */
export async function launch({ viewport = { width: 1280, height: 900 }, args = [] } = {}) {
  await fs.mkdir(ARTIFACTS, { recursive: true });
  const userDataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'wasmlm-chromium-'));
  // playwright-core refuses --user-data-dir in args: the persistent context passes it.
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    timeout: STEP_TIMEOUT,
    viewport,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync', ...args],
  });
  context.setDefaultTimeout(STEP_TIMEOUT);
  const problems = [];
  context.on('console', (msg) => {
    if (msg.type() === 'error') problems.push(`console error: ${msg.text()} (${msg.location().url})`);
  });
  const page = context.pages()[0] ?? await context.newPage();
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  page.on('crash', () => problems.push('page crashed'));
  return {
    context,
    page,
    problems,
    /** Fails unless the page reported nothing; `expected` regexps are allowed (and removed). */
    assertNoProblems(...expected) {
      const left = problems.splice(0).filter((p) => !expected.some((re) => re.test(p)));
      assert.deepEqual(left, [], 'the page reported errors');
    },
    async close() {
      try {
        await context.close();
      } finally {
        await fs.rm(userDataDir, { recursive: true, force: true });
      }
    },
  };
}

/** Resolves once body[data-state] is one of `states`; returns it. */
export async function waitForState(page, ...states) {
  const handle = await page.waitForFunction((s) => s.includes(document.body.dataset.state) && document.body.dataset.state,
    states, { polling: 'raf' });
  return handle.jsonValue();
}

/** Waits for a load to end ('ready' or 'error') and returns the state and the status line. */
export async function loadOutcome(page) {
  const state = await waitForState(page, 'ready', 'error');
  // A model is ready before its downloaded files are stored in Cache Storage: wait for that too.
  await page.waitForFunction(() => document.getElementById('load-status').dataset.cache !== 'saving',
    null, { polling: 'raf' });
  const status = page.locator('#load-status');
  return {
    state,
    text: await status.textContent(),
    error: await status.getAttribute('data-error'),
    cache: await status.getAttribute('data-cache'),
  };
}

/**
 * Runs `action` (which starts a load) and waits for that load to end: body[data-state] must go
 * through 'loading' after the action and then reach 'ready' or 'error'. Returns loadOutcome().
 */
export async function loadAfter(page, action) {
  await page.evaluate(() => {
    window.__loadSeen = false;
    window.__loadObserver?.disconnect();
    window.__loadObserver = new MutationObserver(() => {
      if (document.body.dataset.state === 'loading') window.__loadSeen = true;
    });
    window.__loadObserver.observe(document.body, { attributes: true, attributeFilter: ['data-state'] });
  });
  await action();
  await page.waitForFunction(() => window.__loadSeen && ['ready', 'error'].includes(document.body.dataset.state),
    null, { polling: 'raf' });
  return loadOutcome(page);
}

/** Sets a range (or any) input's value as a user would, firing 'input'. */
export function setValue(page, selector, value) {
  return page.locator(selector).evaluate((el, v) => {
    el.value = String(v);
    el.dispatchEvent(new Event('input', { bubbles: true }));
    el.dispatchEvent(new Event('change', { bubbles: true }));
  }, value);
}

/**
 * Before the page's scripts run (call before page.goto), gives every Worker a first 'message'
 * listener that logs the engine protocol's token replies (js/worker/protocol.js Reply.TOKEN: one
 * message per token) in window.__tokenMessages as {id, shown}: the token id and how many child
 * nodes the element `container` (a selector) had when the message arrived. Registered before the
 * engine's own listener, it runs first: a page that streams has appended every earlier token by
 * then (one message is one task), whatever the speed of the machine. Reset the log with
 * `window.__tokenMessages.length = 0`.
 */
export function recordTokenMessages(page, container) {
  return page.addInitScript((selector) => {
    window.__tokenMessages = [];
    const NativeWorker = window.Worker;
    window.Worker = class extends NativeWorker {
      constructor(...args) {
        super(...args);
        this.addEventListener('message', (e) => {
          if (e.data?.type !== 'token') return;
          window.__tokenMessages.push({
            id: e.data.token.id,
            shown: document.querySelector(selector)?.childNodes.length ?? -1,
          });
        });
      }
    };
  }, container);
}

/** Saves a screenshot to tests/artifacts/<name>.png. */
export function screenshot(page, name, options = {}) {
  return page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true, ...options });
}

/**
 * A test server, a browser and the demo page with its default model loaded (asserted ready).
 * Returns { server, browser, page, close() }.
 */
export async function openReadyPage() {
  const server = await startTestServer();
  const browser = await launch();
  const close = async () => {
    await browser?.close();
    await server?.close();
  };
  try {
    await browser.page.goto(server.url);
    const out = await loadOutcome(browser.page);
    if (out.state !== 'ready') throw new Error(`the default model did not load: ${out.text}`);
  } catch (e) {
    await close();
    throw e;
  }
  return { server, browser, page: browser.page, close };
}

/**
 * The synthetic Gemma 3 pair of the vision tests (tools/synth_gguf.mjs gemma3 tiny F32, seed 1,
 * and tools/synth_mmproj.mjs gemma3-tiny F32, seed 1, written to a temporary folder named
 * `prefix`…), served at /synthetic/gemma3.gguf and /synthetic/mmproj.gguf by a test server, and
 * a browser whose page is on the server's origin. Returns { server, browser, page, model,
 * mmproj, close() }: model and mmproj are the files' paths here (for the same engine in Node).
 */
export async function openVisionPage(prefix) {
  const model = synthCached({ arch: 'gemma3', shape: 'tiny', seed: 1, type: 'F32' });
  const dir = fsSync.mkdtempSync(path.join(os.tmpdir(), prefix));
  const mmproj = path.join(dir, 'mmproj.gguf');
  let server, browser;
  const close = async () => {
    await browser?.close();
    await server?.close();
    fsSync.rmSync(dir, { recursive: true, force: true });
  };
  try {
    fsSync.writeFileSync(mmproj, mmprojBytes({ shape: 'gemma3-tiny', type: 'F32', seed: 1 }));
    server = await startTestServer({ files: { '/synthetic/gemma3.gguf': model, '/synthetic/mmproj.gguf': mmproj } });
    browser = await launch();
    await browser.page.goto(`${server.origin}/tests/browser/`).catch(() => {}); // any page of the origin
  } catch (e) {
    await close();
    throw e;
  }
  return { server, browser, page: browser.page, model, mmproj, close };
}
