#!/usr/bin/env node
// bench/ttft.mjs — `npm run bench:ttft`: time to first token of the demo page (web/) in headless
// Chromium, served from 127.0.0.1 exactly as `npm start` serves it (tools/serve.mjs). One run:
// navigate, let the page load its default model (stories260K), press Generate the moment the
// page says 'ready' (an init script does it, no round trip to this process), and take the time
// from navigation start (performance.timeOrigin) to the first token <span> in #output.
// "cold": a fresh browser profile (empty HTTP cache, Cache Storage and wasm code cache) per run,
// whose browser has already opened one URL of the server (a 404), as a browser that is already
// running has: a freshly launched Chromium spends ~0.75 s more on its first navigation before
// the page's first script is even requested (--no-warmup counts that too), and it then goes on
// loading its own WebUI (the omnibox popup: ~0.7 s of CPU on other threads) for a second or two,
// so the page is opened --settle MS (default 3000) after that first URL;
// "warm": the same page reloaded in that profile (the model then comes from Cache Storage).
// Median over the runs. Also reported per run, to see where the time goes: the library's
// performance marks (wasmlm:*, when the library sets them) and the page's (wasmlm-demo:*), the
// page's 'ready', and when the server saw the requests for the wasm modules and the model (ms
// after navigation start).
// What it measures: bench/README.md ("Time to first token").
//
//   node bench/ttft.mjs [--runs 5] [--root DIR]... [--no-isolate] [--no-warmup] [--settle MS] [--out FILE] [--json] [--all-requests]
// --root DIR serves another checkout (e.g. an older js/ for a before/after comparison; the
// runs alternate between the roots so both see the same machine load). Writes bench/out/ttft.json.
// --all-requests lists every request of a cold run (the worker's module graph too), not only
// the wasm modules, worker and thread scripts and model files.

import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { CHROMIUM, CHROMIUM_ARGS as ARGS, log, median } from './_chromium.mjs';
import { createHandler } from '../tools/serve.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '..');
/** The goal of issue 11: first token within this many ms of a cold page load (localhost). */
const GOAL_MS = 500;

function parseArgs(argv) {
  const o = { runs: 5, roots: [], isolate: true, warmup: true, settle: 3000, out: null, json: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const v = () => argv[++i];
    if (a === '--runs') o.runs = Number(v());
    else if (a === '--root') o.roots.push(path.resolve(v()));
    else if (a === '--no-isolate') o.isolate = false;
    else if (a === '--no-warmup') o.warmup = false;
    else if (a === '--settle') o.settle = Number(v());
    else if (a === '--out') o.out = path.resolve(v());
    else if (a === '--json') o.json = true;
    else if (a === '--all-requests') o.allRequests = true;
    else if (a === '-h' || a === '--help') o.help = true;
    else throw new Error(`unknown argument ${a}`);
  }
  if (!(Number.isInteger(o.runs) && o.runs >= 1)) throw new Error('--runs must be an integer >= 1');
  if (!(Number.isInteger(o.settle) && o.settle >= 0)) throw new Error('--settle must be an integer >= 0 (ms)');
  if (!o.roots.length) o.roots.push(REPO);
  return o;
}

/** Serves `root` as tools/serve.mjs does, logging when each request arrived and finished. */
async function serve(root, isolate) {
  const handler = createHandler(root, true, { isolate });
  const requests = [];
  const server = http.createServer((req, res) => {
    const entry = { path: new URL(req.url, 'http://x').pathname, start: performance.timeOrigin + performance.now() };
    requests.push(entry);
    res.on('finish', () => { entry.end = performance.timeOrigin + performance.now(); });
    handler(req, res);
  });
  server.keepAliveTimeout = 1000;
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${server.address().port}/web/`,
    requests,
    close: () => new Promise((r) => { server.close(() => r()); server.closeAllConnections(); }),
  };
}

/** Runs in the page before its scripts: presses Generate at 'ready', notes the first token. */
function pageProbe() {
  const t = (window.__ttft = { ready: null, firstToken: null, error: null });
  const watch = () => {
    const body = document.body;
    new MutationObserver(() => {
      const s = body.dataset.state;
      if (s === 'ready' && t.ready === null) {
        t.ready = performance.now();
        document.getElementById('generate').click();
      } else if (s === 'error' && t.error === null) {
        t.error = document.getElementById('load-status')?.textContent ?? 'error';
      }
    }).observe(body, { attributes: true, attributeFilter: ['data-state'] });
    const out = document.getElementById('output');
    new MutationObserver(() => {
      if (t.firstToken === null && out.querySelector('.tok')) t.firstToken = performance.now();
    }).observe(out, { childList: true, subtree: true });
  };
  if (document.body) watch();
  else document.addEventListener('DOMContentLoaded', watch, { once: true });
}

// the wasm modules, the model files, the worker and thread scripts (js/ sources, or the page's
// bundles in dist/: tools/bundle.mjs) and the page's bundle
const WATCHED = /\/dist\/[\w-]+\.wasm$|\/models\/files\/|\/(js|dist)\/(worker|thread)\.js$|\/dist\/demo\.js$/;

/** One navigation in `page`; returns the timings (ms after navigation start). */
async function measure(page, server, allRequests = false) {
  const since = server.requests.length;
  await page.goto(server.url);
  await page.waitForFunction(() => window.__ttft && (window.__ttft.firstToken !== null || window.__ttft.error !== null),
    null, { timeout: 60_000, polling: 50 });
  const r = await page.evaluate(() => ({
    ...window.__ttft,
    timeOrigin: performance.timeOrigin,
    marks: Object.fromEntries(performance.getEntriesByType('mark').filter((m) => m.name.startsWith('wasmlm'))
      .map((m) => [m.name, Math.round(m.startTime)])),
    resources: performance.getEntriesByType('resource').map((e) => ({
      name: e.name.replace(location.origin, ''), start: Math.round(e.startTime), end: Math.round(e.responseEnd),
    })),
    domContentLoaded: Math.round(performance.getEntriesByType('navigation')[0]?.domContentLoadedEventEnd ?? 0),
  }));
  if (r.error) throw new Error(`the page failed to load the model: ${r.error}`);
  const requests = server.requests.slice(since).filter((q) => allRequests || WATCHED.test(q.path)).map((q) => ({
    path: q.path, start: Math.round(q.start - r.timeOrigin), end: q.end ? Math.round(q.end - r.timeOrigin) : null,
  }));
  return { ttftMs: r.firstToken, readyMs: r.ready, marks: r.marks, requests, resources: r.resources,
    domContentLoadedMs: r.domContentLoaded };
}

/** A fresh profile: one cold navigation, then `warm` reloads in the same profile. */
async function profileRun(server, warm, warmup, settle, allRequests = false) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-ttft-'));
  const context = await chromium.launchPersistentContext(dir, { executablePath: CHROMIUM, headless: true, args: ARGS });
  try {
    await context.addInitScript(pageProbe);
    const page = context.pages()[0] ?? await context.newPage();
    if (warmup) {
      await page.goto(server.url.replace(/web\/$/, '__warmup')); // a 404: nothing cached
      await new Promise((r) => setTimeout(r, settle)); // the browser's own start-up work ends
    }
    const cold = await measure(page, server, allRequests);
    const warmRuns = [];
    for (let i = 0; i < warm; i++) warmRuns.push(await measure(page, server));
    return { cold, warm: warmRuns };
  } finally {
    await context.close().catch(() => {});
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

function render(report) {
  const lines = [`time to first token, demo page (stories260K), ${report.browser}, ${report.isolate ? 'cross-origin isolated' : 'not isolated'}` +
    `${report.warmup ? '' : ', cold = first navigation of a new browser'}`,
    `median of ${report.runs} runs; load average at start ${report.loadavgStart.map((v) => v.toFixed(2)).join(' ')}, end ${report.loadavgEnd.map((v) => v.toFixed(2)).join(' ')}`, ''];
  for (const r of report.roots) {
    lines.push(`${r.root}`);
    lines.push(`  cold: ${r.coldMs.toFixed(0)} ms (runs ${r.cold.map((x) => x.ttftMs.toFixed(0)).join(', ')}; ready at ${r.coldReadyMs.toFixed(0)} ms)` +
      ` — goal ≤ ${GOAL_MS} ms ${r.coldMs <= GOAL_MS ? 'met' : 'NOT met'}`);
    lines.push(`  warm: ${r.warmMs.toFixed(0)} ms (runs ${r.warm.map((x) => x.ttftMs.toFixed(0)).join(', ')})`);
    const c = r.cold[r.cold.length >> 1];
    if (c) {
      lines.push(`  a cold run's requests: ${c.requests.map((q) => `${q.path.replace(/^.*\//, '')} ${q.start}–${q.end}`).join(', ')}`);
      if (Object.keys(c.marks).length) lines.push(`  marks: ${Object.entries(c.marks).map(([k, v]) => `${k} ${v}`).join(', ')}`);
    }
  }
  return lines.join('\n');
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  if (opts.help) {
    console.log('usage: node bench/ttft.mjs [--runs N] [--root DIR]... [--no-isolate] [--no-warmup] [--settle MS] [--out FILE] [--json]');
    return;
  }
  const t0 = performance.now();
  const servers = [];
  for (const root of opts.roots) servers.push(await serve(root, opts.isolate));
  const report = { date: new Date().toISOString(), node: process.version, runs: opts.runs, isolate: opts.isolate,
    warmup: opts.warmup, settleMs: opts.warmup ? opts.settle : 0,
    machine: { cpus: os.cpus().length, model: os.cpus()[0]?.model ?? 'unknown' }, loadavgStart: os.loadavg(),
    goalMs: GOAL_MS, roots: opts.roots.map((root) => ({ root, cold: [], warm: [] })) };
  try {
    {
      const probe = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ARGS });
      report.browser = `Chromium ${probe.version()}`;
      await probe.close();
    }
    for (let i = 0; i < opts.runs; i++) {
      // Alternate the roots within each round, so a busy moment hurts both alike.
      for (let k = 0; k < servers.length; k++) {
        const { cold, warm } = await profileRun(servers[k], 1, opts.warmup, opts.settle, opts.allRequests);
        report.roots[k].cold.push(cold);
        report.roots[k].warm.push(...warm);
        log(`run ${i + 1}/${opts.runs} ${path.basename(opts.roots[k])}: cold ${cold.ttftMs.toFixed(0)} ms, warm ${warm[0].ttftMs.toFixed(0)} ms`);
      }
    }
  } finally {
    for (const s of servers) await s.close();
  }
  for (const r of report.roots) {
    r.coldMs = median(r.cold.map((x) => x.ttftMs));
    r.coldReadyMs = median(r.cold.map((x) => x.readyMs));
    r.warmMs = median(r.warm.map((x) => x.ttftMs));
    r.warmReadyMs = median(r.warm.map((x) => x.readyMs));
    r.goalMet = r.coldMs <= GOAL_MS;
  }
  report.loadavgEnd = os.loadavg();
  report.totalSeconds = (performance.now() - t0) / 1000;
  const file = opts.out ?? path.join(HERE, 'out', 'ttft.json');
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
  if (opts.json) process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  else console.log(`${render(report)}\n\n${path.relative(process.cwd(), file)} written; ${report.totalSeconds.toFixed(0)} s in all`);
}

main().catch((e) => {
  console.error(e.stack || String(e));
  process.exit(1);
});
