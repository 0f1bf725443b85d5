#!/usr/bin/env node
// bench/ttft_trace.mjs — where a cold run of the demo page spends its time, by thread CPU time.
// Serves ROOT as bench/ttft.mjs does (cross-origin isolated), opens the page in a fresh
// incognito context of headless Chromium with a Chromium trace running (browser CDP session,
// categories devtools.timeline, v8, v8.wasm, blink.user_timing), presses Generate at 'ready'
// and stops at the first token. Then, from navigation start to the first token, it sums each
// thread's CPU time (the trace's tdur, which a busy machine does not inflate as it does wall
// time): the page's renderer by thread, V8's TurboFan tier-up and lazy (Liftoff) compilation,
// layout, and from 'ready' to the first token the worker's and the page main thread's CPU; the
// CPU of every process (less the trace's own), the page's software raster and its frames.
// Wall times are printed beside them: on a loaded machine the difference is waiting for a core.
// bench/README.md ("Time to first token", 2026-11-24) shows what it found.
//
//   node bench/ttft_trace.mjs [--runs 3] [--root DIR]... [--keep DIR] [--settle MS]
// --root DIR (repeatable; runs alternate) serves another checkout; --keep DIR keeps each
// trace as DIR/<root>-<run>.json (chrome://tracing or Perfetto open them); --settle MS (default
// 3000) is how long the new browser idles before the page is opened (see traceRun).

import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { createHandler } from '../tools/serve.mjs';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const CATEGORIES = ['devtools.timeline', 'blink.user_timing', 'v8', 'v8.wasm', 'loading', 'toplevel'];

function parseArgs(argv) {
  const o = { runs: 3, roots: [], keep: null, settle: 3000 };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--runs') o.runs = Number(argv[++i]);
    else if (argv[i] === '--root') o.roots.push(path.resolve(argv[++i]));
    else if (argv[i] === '--keep') o.keep = path.resolve(argv[++i]);
    else if (argv[i] === '--settle') o.settle = Number(argv[++i]);
    else throw new Error(`unknown argument ${argv[i]}`);
  }
  if (!(Number.isInteger(o.runs) && o.runs >= 1)) throw new Error('--runs must be an integer >= 1');
  if (!o.roots.length) o.roots.push(REPO);
  return o;
}

/** Presses Generate at 'ready' and marks ready / first token (User Timing, so they are in the trace). */
function pageProbe() {
  const t = (window.__trace = { first: false });
  document.addEventListener('DOMContentLoaded', () => {
    new MutationObserver(() => {
      if (document.body.dataset.state === 'ready' && !performance.getEntriesByName('probe:ready').length) {
        performance.mark('probe:ready');
        document.getElementById('generate').click();
      }
    }).observe(document.body, { attributes: true, attributeFilter: ['data-state'] });
    new MutationObserver(() => {
      if (!t.first && document.querySelector('#output .tok')) {
        t.first = true;
        performance.mark('probe:first-token');
      }
    }).observe(document.getElementById('output'), { childList: true, subtree: true });
  });
}

async function traceRun(root, settle) {
  const server = http.createServer(createHandler(root, true, { isolate: true }));
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${server.address().port}/web/`;
  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu'] });
  try {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(url.replace(/web\/$/, '__warmup')); // a 404: the browser is up, nothing cached
    // A new Chromium keeps loading its own WebUI (the omnibox popup, ~0.7 s of CPU) for a while
    // after its first page: let it finish, as in a browser that was already running.
    await new Promise((r) => setTimeout(r, settle));
    await page.addInitScript(pageProbe);
    const cdp = await browser.newBrowserCDPSession();
    const events = [];
    cdp.on('Tracing.dataCollected', ({ value }) => events.push(...value));
    const complete = new Promise((r) => cdp.on('Tracing.tracingComplete', r));
    await cdp.send('Tracing.start', { traceConfig: { includedCategories: CATEGORIES }, transferMode: 'ReportEvents' });
    await page.goto(url);
    await page.waitForFunction(() => window.__trace?.first, null, { timeout: 120_000, polling: 50 });
    await cdp.send('Tracing.end');
    await complete;
    return events;
  } finally {
    await browser.close();
    await new Promise((r) => { server.close(() => r()); server.closeAllConnections(); });
  }
}

/** The CPU breakdown of one trace (ms). */
export function analyse(events) {
  const threads = new Map();
  const procs = new Map();
  for (const e of events) {
    if (e.ph === 'M' && e.name === 'thread_name') threads.set(`${e.pid}/${e.tid}`, e.args.name);
    if (e.ph === 'M' && e.name === 'process_name') procs.set(e.pid, e.args.name);
  }
  const key = (e) => `${e.pid}/${e.tid}`;
  const marks = events.filter((e) => String(e.cat).includes('blink.user_timing'));
  const mark = (name, thread) => marks.find((m) => m.name === name && (!thread || threads.get(key(m)) === thread));
  const ready = mark('probe:ready');
  const first = mark('probe:first-token');
  if (!ready || !first) throw new Error('the trace lacks the probe marks');
  const pid = ready.pid;
  const nav = Math.max(...marks.filter((m) => m.name === 'navigationStart' && m.pid === pid).map((m) => m.ts));
  const workerLoaded = marks.find((m) => m.name === 'wasmlm:model-loaded' && m.pid === pid && threads.get(key(m)) !== 'CrRendererMain');
  const workerKey = workerLoaded ? key(workerLoaded) : null;
  const workerFirst = workerKey && marks.find((m) => m.name === 'wasmlm:first-token' && key(m) === workerKey);
  const ms = (us) => Math.round(us / 100) / 10;
  const sum = (pred, f = (e) => e.tdur ?? 0) => ms(events.filter((e) => e.ph === 'X' && pred(e)).reduce((n, e) => n + f(e), 0));
  const inRun = (e) => e.ts >= nav && e.ts <= first.ts;
  const tasks = (e) => e.name === 'ThreadControllerImpl::RunTask' || e.name === 'ThreadPool_RunTask';
  const byThread = {};
  for (const e of events) {
    if (e.ph !== 'X' || !tasks(e) || !inRun(e)) continue;
    const t = `${e.pid === pid ? 'page renderer' : procs.get(e.pid) ?? e.pid}: ${threads.get(key(e)) ?? e.tid}`;
    byThread[t] = (byThread[t] ?? 0) + (e.tdur ?? 0);
  }
  const sinceReady = (e) => e.ts >= ready.ts && e.ts <= (workerFirst?.ts ?? first.ts);
  // Every process's tasks, less the trace's own cost (the tracing service, DevTools' pipe) and
  // the browser's own WebUI renderer: what a cold load costs the machine.
  const own = (e) => {
    const p = e.pid === pid ? '' : procs.get(e.pid) ?? '';
    const t = threads.get(key(e)) ?? '';
    return !p.startsWith('WebUI') && !p.includes('tracing') && t !== 'PerfettoTrace' && t !== 'DevToolsPipeHandlerWriteThread';
  };
  return {
    navToFirstTokenMs: ms(first.ts - nav),
    cpuAllProcessesMs: sum((e) => tasks(e) && inRun(e) && own(e)),
    // software raster of the page's tiles (headless, --disable-gpu) and the frames rendered
    rasterCpuMs: sum((e) => e.name === 'TaskGraphRunner::RunTask' && inRun(e) && e.pid === pid),
    frames: events.filter((e) => e.ph === 'X' && e.name === 'AnimationFrame::Render' && e.pid === pid && inRun(e)).length,
    readyMs: ms(ready.ts - nav),
    readyToWorkerFirstTokenMs: workerFirst ? ms(workerFirst.ts - ready.ts) : null,
    cpuByThreadMs: Object.fromEntries(Object.entries(byThread).sort((a, b) => b[1] - a[1]).slice(0, 8).map(([k, v]) => [k, ms(v)])),
    pageRendererCpuMs: sum((e) => tasks(e) && inRun(e) && e.pid === pid),
    turbofanCpuMs: sum((e) => e.name === 'wasm.TopTierCompilation' && inRun(e) && e.pid === pid),
    lazyCompileCpuMs: sum((e) => e.name === 'wasm.CompileLazy' && inRun(e) && e.pid === pid),
    layoutCpuMs: sum((e) => e.name === 'Layout' && inRun(e) && e.pid === pid),
    layoutWallMs: sum((e) => e.name === 'Layout' && inRun(e) && e.pid === pid, (e) => e.dur),
    afterReady: {
      workerCpuMs: workerKey ? sum((e) => key(e) === workerKey && tasks(e) && sinceReady(e)) : null,
      workerWallMs: workerKey ? sum((e) => key(e) === workerKey && tasks(e) && sinceReady(e), (e) => e.dur) : null,
      workerLazyCompileCpuMs: workerKey ? sum((e) => key(e) === workerKey && e.name === 'wasm.CompileLazy' && sinceReady(e)) : null,
      workerLazyCompiles: workerKey ? events.filter((e) => e.ph === 'X' && key(e) === workerKey && e.name === 'wasm.CompileLazy' && sinceReady(e)).length : null,
      pageMainCpuMs: sum((e) => e.pid === pid && threads.get(key(e)) === 'CrRendererMain' && tasks(e) && e.ts >= ready.ts && e.ts <= first.ts),
      pageMainWallMs: sum((e) => e.pid === pid && threads.get(key(e)) === 'CrRendererMain' && tasks(e) && e.ts >= ready.ts && e.ts <= first.ts, (e) => e.dur),
    },
  };
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  if (o.keep) fs.mkdirSync(o.keep, { recursive: true });
  for (let run = 1; run <= o.runs; run++) {
    for (const root of o.roots) {
      const events = await traceRun(root, o.settle);
      if (o.keep) fs.writeFileSync(path.join(o.keep, `${path.basename(root)}-${run}.json`), JSON.stringify(events));
      console.log(`${path.basename(root)} run ${run}: ${JSON.stringify(analyse(events), null, 1).replace(/\n\s*/g, ' ')}`);
    }
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main().catch((e) => {
    console.error(e.stack || String(e));
    process.exit(1);
  });
}
