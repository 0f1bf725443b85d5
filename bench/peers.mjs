#!/usr/bin/env node
// bench/peers.mjs — `npm run bench:peers`: wasmlm against @wllama/wllama (llama.cpp in wasm) on the
// same synthetic GGUF files (bench/models.mjs), both in the same headless Chromium, one thread
// each by default: wllama's wasm build with n_threads 1 and no WebGPU (no COOP/COEP headers, so
// no SharedArrayBuffer anyway), and wasmlm's module in the page's thread: the build a page gets
// (createEngine's 'auto': relaxed SIMD in Chromium; each row records it as `oursBuild`). --threads N:
// the page is cross-origin isolated and both run N threads (wllama n_threads N, wasmlm
// createEngine({threads: N})). Files and engines
// are served from 127.0.0.1 by tools/serve.mjs. Per (model, engine): a fresh page, load, one
// untimed warm-up completion, then `runs` greedy completions of the same prompt with a fixed
// number of new tokens; each engine's own prefill/decode tokens/s (wllama: llama.cpp's timings;
// wasmlm: engine.lastResult), median over the runs. What it measures: bench/README.md.
//
//   node bench/peers.mjs [--big] [--shapes stories15M,...] [--types F32,Q8_0,...] [--runs N]
//                        [--tokens 64] [--threads N] [--builds] [--out FILE] [--json]
// --builds: wasmlm's SIMD128 build too, next to the build the page picks (relaxed in Chromium).
// --wllama-split SIZE (e.g. 1G): wllama gets files larger than SIZE split in llama.cpp's format
//   (tools/gguf_split.mjs; wllama reads each file through one ArrayBuffer, at most 2 GB).

//   node bench/peers.mjs --real-shapes [--set 12|13|42|all] [--phi] [--shapes gpt2,qwen2.5-0.5b,…]
//                        [--types Q8_0,Q4_0,Q4_K_M] …
//        the published (architecture, shape) pairs of bench/real_shapes.mjs — issue 12's
//        SmolLM2-135M/360M and Llama-3.2-1B (llama), issue 13's GPT-2 small, Qwen2.5-0.5B,
//        Qwen3-0.6B, Gemma-3-1B (default: --set all; Phi-3.5-mini only with --phi) — both engines
//        at context 2048 (GPT-2: 1024), with a greedy-equality check of the two continuations per
//        row. Here the engines alternate: `runs` rounds of (wllama page, wasmlm page), one timed
//        completion each, so load drift on the shared machine hits both alike; medians over the
//        rounds. Each row also gets the module's read probe (bench/real_shapes.mjs openReadProbe,
//        as bench.mjs section 5a) in Node before and after it, and the decode roofline: weight
//        bytes per token × decode tok/s over the probe's GB/s, for both engines (wllama reads
//        the same tensors). Goals (issue 13): ≥ 1.5× wllama on every row, ≥ 3× on Q8_0 and Q4_0.
// Writes bench/out/peers.json (--threads N > 1: bench/out/peers-Nt.json).
//   node bench/peers.mjs --markdown a.json,b.json    the rows of saved reports as a Markdown table

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServer } from '../tools/serve.mjs';
import { plan, ensureGguf, fallbackNote, BIG_SHAPE, QUANT_SHAPES, QUANT_TYPES } from './models.mjs';
import { parseSize } from '../tools/gguf_split.mjs';
import { launchChromium, log, median, runBenchPage, wllamaParts } from './_chromium.mjs';
import { ensureRealGguf, openReadProbe, realNoFit, realShapeSet, REAL_SHAPES, REAL_TYPES } from './real_shapes.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '..');
const PROMPT = 'Once upon a time, in a small village at the edge of a green forest, there lived a curious ' +
  'little girl named Lily. Every morning she walked to the river with her dog, Max, to watch the fish jump';
const GOALS = { F32: 1.5, Q8_0: 3, Q4_0: 3 };

function parseArgs(argv) {
  const o = { big: false, shapes: null, types: null, runs: 3, bigRuns: 1, tokens: 64, warmup: 8, json: false, out: null,
    threads: 1 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const v = () => argv[++i];
    if (a === '--big') o.big = true;
    else if (a === '--real-shapes') o.real = true;
    else if (a === '--set') o.set = v();
    else if (a === '--phi') o.phi = true;
    else if (a === '--no-alternate') o.alternate = false;
    else if (a === '--shapes') o.shapes = v().split(',');
    else if (a === '--types') o.types = v().split(',').map((t) => t.toUpperCase());
    else if (a === '--runs') { o.runs = Number(v()); o.bigRuns = Math.min(o.bigRuns, o.runs); }
    else if (a === '--tokens') o.tokens = Number(v());
    else if (a === '--threads') o.threads = Number(v());
    else if (a === '--out') o.out = path.resolve(v());
    else if (a === '--json') o.json = true;
    else if (a === '--builds') o.builds = true;
    else if (a === '--wllama-split') o.wllamaSplit = parseSize(v());
    else if (a === '-h' || a === '--help') o.help = true;
    else throw new Error(`unknown argument ${a}`);
  }
  const shapes = o.real ? REAL_SHAPES : [...QUANT_SHAPES, BIG_SHAPE], types = o.real ? REAL_TYPES : QUANT_TYPES;
  for (const s of o.shapes ?? []) if (!shapes.includes(s)) throw new Error(`unknown shape ${s}`);
  for (const t of o.types ?? []) if (!types.includes(t)) throw new Error(`unknown type ${t}`);
  if (!(Number.isInteger(o.runs) && o.runs >= 1) || !(Number.isInteger(o.tokens) && o.tokens >= 2)) {
    throw new Error('--runs must be ≥ 1 and --tokens ≥ 2');
  }
  if (!(Number.isInteger(o.threads) && o.threads >= 1 && o.threads <= 16)) throw new Error('--threads must be 1..16');
  return o;
}

/** One engine on one file in a fresh page; console errors of the page go into the result. */
const runPage = (context, baseUrl, opts) => runBenchPage(context, `${baseUrl}bench/peers/index.html`, 'benchPeer', opts);

function summarize(r) {
  if (!r || r.error) return null;
  return {
    decodeTokPerSec: median(r.runs.map((x) => x.decodeTokPerSec)),
    prefillTokPerSec: median(r.runs.map((x) => x.prefillTokPerSec)),
    // end to end: new tokens over the wall time of the whole completion call (prefill included)
    e2eTokPerSec: median(r.runs.map((x) => (x.nGenerated * 1000) / x.wallMs)),
    nPrompt: r.runs[0]?.nPrompt, nGenerated: r.runs[0]?.nGenerated, loadMs: r.loadMs,
  };
}

const f1 = (n) => (n == null ? '–' : n.toFixed(1));
const x2 = (n) => (n == null ? '–' : `${n.toFixed(2)}×`);
const pct = (n) => (n == null ? '–' : `${(100 * n).toFixed(0)}%`);

function table(rows, header) {
  const all = [header, ...rows];
  const w = header.map((_, i) => Math.max(...all.map((r) => String(r[i]).length)));
  const line = (r) => r.map((c, i) => (i < 2 ? String(c).padEnd(w[i]) : String(c).padStart(w[i]))).join('  ');
  return [line(header), w.map((n) => '-'.repeat(n)).join('  '), ...rows.map(line)].join('\n');
}

function render(report) {
  const out = [`wasmlm vs wllama ${report.wllamaVersion ?? ''} — ${report.date}, ${report.browser}, ` +
    `${report.threads > 1 ? `${report.threads} threads` : 'one thread'} each`,
    `greedy, prompt of ${report.rows[0]?.ours?.nPrompt ?? '?'} tokens, ${report.tokens} new tokens, median of ${report.runs} ` +
    `${report.alternate ? '(engines alternating, one page per run)' : `(TinyLlama: ${report.bigRuns})`}, warm-up excluded; load average at start ${report.loadavgStart.map((v) => v.toFixed(2)).join(' ')}, ` +
    `end ${report.loadavgEnd.map((v) => v.toFixed(2)).join(' ')}`, ''];
  const real = report.rows.some((r) => r.roofline);
  out.push(table(report.rows.map((r) => [
    r.arch ? `${r.arch} ${r.shape}` : r.shape, `${r.type}${r.fallback?.length ? '*' : ''}`,
    f1(r.ours?.decodeTokPerSec), f1(r.theirs?.decodeTokPerSec), x2(r.decodeRatio),
    f1(r.ours?.prefillTokPerSec), f1(r.theirs?.prefillTokPerSec), x2(r.prefillRatio), x2(r.e2eRatio),
    ...(real ? [f1(r.roofline?.readGBs), pct(r.roofline?.oursReadFraction), pct(r.roofline?.theirsReadFraction)] : []),
    r.goal ? `≥${r.goal}× ${r.goalMet ? 'met' : 'NOT met'}` : (r.decodeRatio == null ? '–' : r.decodeRatio > 1 ? 'faster' : 'SLOWER'),
    r.theirsError ? `wllama: ${r.theirsError}` : r.oursError ? `wasmlm: ${r.oursError}`
      : r.greedyEqual === undefined ? '' : r.greedyEqual ? 'greedy equal' : `greedy parts at char ${r.greedyCommonChars}/${r.greedyChars}`,
  ]), ['shape', 'type', 'decode ours', 'decode wllama', 'ours/theirs', 'prefill ours', 'prefill wllama', 'ours/theirs', 'end-to-end ours/theirs',
    ...(real ? ['read GB/s', 'ours % read', 'wllama % read'] : []), 'goal', 'note']));
  const notes = [...new Set(report.rows.filter((r) => r.fallback?.length).map((r) => `${r.shape} ${r.type}: ${fallbackNote(r)}`))];
  if (notes.length) out.push(`* K-quant rows need multiples of 256; fell back to: ${notes.join('; ')}`);
  const sb = report.rows.filter((r) => r.oursSimd128 && r.ours);
  if (sb.length) {
    out.push('', `wasmlm's builds side by side (--builds): the picked build (${sb[0].oursBuild}) vs SIMD128, same page setup`);
    out.push(table(sb.map((r) => [r.shape, r.type, f1(r.ours.decodeTokPerSec), f1(r.oursSimd128.decodeTokPerSec),
      x2(r.ours.decodeTokPerSec / r.oursSimd128.decodeTokPerSec), f1(r.ours.prefillTokPerSec),
      f1(r.oursSimd128.prefillTokPerSec), x2(r.ours.prefillTokPerSec / r.oursSimd128.prefillTokPerSec)]),
    ['shape', 'type', `decode ${sb[0].oursBuild}`, 'decode simd128', 'ratio', `prefill ${sb[0].oursBuild}`, 'prefill simd128', 'ratio']));
  }
  for (const g of report.goals) out.push(`goal: ${g.goal}: ${g.text} — ${g.met == null ? 'not measured' : g.met ? 'met' : 'NOT met'}`);
  return out.join('\n');
}

/** Markdown table of --real-shapes reports (bench/README.md): `--markdown a.json,b.json`. */
function renderMarkdown(reports) {
  const out = ['| arch | shape | type | file MB | decode ours | decode wllama | ours/wllama | prefill ours | prefill wllama | ours/wllama | read probe GB/s | ours % of read | wllama % of read | goal | greedy | load avg |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|'];
  for (const rep of reports) {
    for (const r of rep.rows) {
      const note = r.theirsError ? `wllama: ${r.theirsError}` : r.oursError ? `wasmlm: ${r.oursError}`
        : r.greedyEqual === undefined ? '–' : r.greedyEqual ? 'equal' : `parts at ${r.greedyCommonChars}/${r.greedyChars}`;
      out.push(`| ${r.arch ?? 'llama'} | ${r.shape} | ${r.type} | ${(r.fileBytes / 1e6).toFixed(0)} | ${f1(r.ours?.decodeTokPerSec)} | ` +
        `${f1(r.theirs?.decodeTokPerSec)} | ${x2(r.decodeRatio)} | ${f1(r.ours?.prefillTokPerSec)} | ${f1(r.theirs?.prefillTokPerSec)} | ` +
        `${x2(r.prefillRatio)} | ${f1(r.roofline?.readGBs)} | ${pct(r.roofline?.oursReadFraction)} | ${pct(r.roofline?.theirsReadFraction)} | ` +
        `${r.goal ? `≥${r.goal}× ${r.goalMet ? 'met' : '**not met**'}` : '–'} | ${note} | ${r.loadavg[0].toFixed(1)} |`);
    }
  }
  return out.join('\n');
}

async function main() {
  const md = process.argv.indexOf('--markdown');
  if (md > 0) {
    console.log(renderMarkdown(process.argv[md + 1].split(',').map((f) => JSON.parse(fs.readFileSync(f, 'utf8')))));
    return;
  }
  const opts = parseArgs(process.argv.slice(2));
  if (opts.help) {
    console.log('usage: node bench/peers.mjs [--big] [--shapes a,b] [--types F32,Q8_0,...] [--runs N] [--tokens N] [--threads N] [--builds] [--out FILE] [--json]');
    return;
  }
  const t0 = performance.now();
  const metas = [];
  if (opts.real) { // issue 12's shapes (bench/real_shapes.mjs); wasmlm gets the context wllama gets
    const shapes = opts.shapes ?? realShapeSet(opts.set ?? 'all', { phi: opts.phi });
    for (const shape of shapes) {
      for (const type of opts.types ?? REAL_TYPES) {
        if (realNoFit(shape, type)) log(`${shape} ${type}: skipped: ${realNoFit(shape, type)}`);
        else metas.push(ensureRealGguf(shape, type));
      }
    }
  } else {
    const jobs = plan({ big: opts.big, shapes: opts.shapes, types: opts.types });
    for (const j of jobs) metas.push(await ensureGguf(j.shape, j.type, { log }));
  }

  // One thread: a plain static host (no SharedArrayBuffer, so wllama runs as before). More:
  // cross-origin isolated, as both engines need for their threads.
  const probe = opts.real ? await openReadProbe() : null;
  const server = await startServer({ port: 0, quiet: true, isolate: opts.threads > 1 });
  const baseUrl = server.url.replace(/web\/$/, '');
  const browser = await launchChromium('wasmlm-peers-');
  const { context } = browser;
  const report = { date: new Date().toISOString(), browser: `Chromium ${context.browser()?.version() ?? ''}`.trim(),
    node: process.version, machine: { cpus: os.cpus().length, model: os.cpus()[0]?.model ?? 'unknown' },
    tokens: opts.tokens, runs: opts.runs, bigRuns: opts.bigRuns, threads: opts.threads, prompt: PROMPT,
    loadavgStart: os.loadavg(), rows: [], alternate: Boolean(opts.real && opts.alternate !== false) };
  try {
    for (const meta of metas) {
      const big = meta.shape === BIG_SHAPE;
      const model = `/${path.relative(REPO, meta.path).split(path.sep).join('/')}`;
      const common = { model, prompt: PROMPT, maxTokens: opts.tokens, runs: big ? opts.bigRuns : opts.runs, warmupTokens: opts.warmup,
        threads: opts.threads, ...(opts.real ? { nCtx: meta.nCtx } : {}) };
      // --wllama-split SIZE: wllama gets the file in llama.cpp's split format (parts of at most
      // SIZE, cached in NAME-split/), for files over its 2 GB per-file limit; wasmlm the whole file
      let partUrls = null;
      if (opts.wllamaSplit && meta.bytes > opts.wllamaSplit) {
        const parts = wllamaParts(meta.path, opts.wllamaSplit);
        partUrls = parts.map((f) => `/${path.relative(REPO, f).split(path.sep).join('/')}`);
        log(`  wllama gets ${parts.length} parts of at most ${(opts.wllamaSplit / 1e6).toFixed(0)} MB (tools/gguf_split.mjs)`);
      }
      const theirsOpts = partUrls ? { parts: partUrls } : {};
      log(`${meta.arch ?? ''} ${meta.shape} ${meta.type} (${(meta.bytes / 1e6).toFixed(1)} MB), load average ${os.loadavg().map((v) => v.toFixed(2)).join(' ')}`);
      const readBefore = probe ? probe.measure(3) : [];
      let theirs, ours;
      if (opts.real && opts.alternate !== false) {
        // alternate: one timed completion per page, wllama then wasmlm, `runs` rounds
        for (let i = 0; i < common.runs; i++) {
          const t = await runPage(context, baseUrl, { ...common, ...theirsOpts, runs: 1, engine: 'wllama' });
          const o = await runPage(context, baseUrl, { ...common, runs: 1, engine: 'wasmlm' });
          log(`  round ${i + 1}: wllama ${t.error ? `ERROR ${t.error}` : `decode ${f1(t.runs[0].decodeTokPerSec)}`}, ` +
            `wasmlm ${o.error ? `ERROR ${o.error}` : `decode ${f1(o.runs[0].decodeTokPerSec)}`} tok/s`);
          if (t.error && !theirs?.error) log(`    ${t.console.join('\n    ')}`);
          const merge = (acc, r) => (!acc ? { ...r, loads: [r.loadMs] } : acc.error ? acc : r.error ? r
            : { ...acc, runs: [...acc.runs, ...r.runs], loads: [...acc.loads, r.loadMs], loadMs: median([...acc.loads, r.loadMs]) });
          theirs = merge(theirs, t);
          ours = merge(ours, o);
          if (theirs.error && ours.error) break;
        }
      } else {
        theirs = await runPage(context, baseUrl, { ...common, ...theirsOpts, engine: 'wllama' });
        log(`  wllama: ${theirs.error ? `ERROR ${theirs.error}\n    ${theirs.console.join('\n    ')}` : `decode ${f1(summarize(theirs).decodeTokPerSec)} tok/s`}`);
        ours = await runPage(context, baseUrl, { ...common, engine: 'wasmlm' });
        log(`  wasmlm: ${ours.error ? `ERROR ${ours.error}` : `decode ${f1(summarize(ours).decodeTokPerSec)} tok/s`}`);
      }
      const readGBs = median([...readBefore, ...(probe ? probe.measure(3) : [])]);
      if (theirs.version) report.wllamaVersion = `(llama.cpp ${theirs.version})`;
      // --builds: our SIMD128 build too, right after the picked one (issue 14: side by side)
      const s128 = opts.builds ? await runPage(context, baseUrl, { ...common, engine: 'wasmlm', build: 'simd128' }) : null;
      if (s128) log(`  wasmlm simd128: ${s128.error ? `ERROR ${s128.error}` : `decode ${f1(summarize(s128).decodeTokPerSec)} tok/s`}`);
      const so = summarize(ours), st = summarize(theirs);
      const decodeRatio = so && st ? so.decodeTokPerSec / st.decodeTokPerSec : null;
      const e2eRatio = so && st ? so.e2eTokPerSec / st.e2eTokPerSec : null;
      const row = {
        shape: meta.shape, type: meta.type, file: model, fileBytes: meta.bytes, fallback: meta.fallback, wllamaParts: partUrls?.length ?? null,
        ours: so, oursBuild: ours.build ?? null, theirs: st, decodeRatio, e2eRatio,
        oursSimd128: s128 ? summarize(s128) : null, prefillRatio: so && st ? so.prefillTokPerSec / st.prefillTokPerSec : null,
        goal: GOALS[meta.type] ?? (opts.real ? 1.5 : 1), loadavg: os.loadavg(), arch: meta.arch, name: meta.name,
        oursError: ours.error ?? null, theirsError: theirs.error ?? null, raw: { ours, theirs },
      };
      row.goalMet = decodeRatio == null ? null : decodeRatio >= row.goal;
      if (readGBs != null && ours.weightBytes) {
        // decode reads every weight once per token: bytes × tok/s against the read probe
        const gbs = (r) => (r?.decodeTokPerSec ? (ours.weightBytes * r.decodeTokPerSec) / 1e9 : null);
        row.roofline = { weightBytesPerToken: ours.weightBytes, readGBs, readSamples: readBefore.length * 2,
          oursDecodeGBs: gbs(so), theirsDecodeGBs: gbs(st), oursReadFraction: gbs(so) && gbs(so) / readGBs,
          theirsReadFraction: gbs(st) && gbs(st) / readGBs };
        log(`  roofline: ${(ours.weightBytes / 1e6).toFixed(0)} MB/token, read probe ${readGBs.toFixed(1)} GB/s; ours ` +
          `${pct(row.roofline.oursReadFraction)}, wllama ${pct(row.roofline.theirsReadFraction)} of it`);
      }
      // greedy equality: the same continuation text, or where it first differs (a near-tie in
      // the logits may legitimately part the two; tests/js/oracle.test.mjs checks the margins)
      const to = ours.runs?.[0]?.text, tt = theirs.runs?.[0]?.text;
      if (typeof to === 'string' && typeof tt === 'string') {
        let k = 0;
        while (k < to.length && k < tt.length && to[k] === tt[k]) k++;
        row.greedyEqual = to === tt;
        row.greedyCommonChars = k;
        row.greedyChars = Math.max(to.length, tt.length);
        log(`  greedy: ${row.greedyEqual ? 'equal' : `first difference at character ${k} of ${row.greedyChars}`}`);
      }
      if (row.goal === 1) row.goal = null;
      report.rows.push(row);
    }
  } finally {
    await browser.close();
    await server.close();
    probe?.close();
  }
  report.loadavgEnd = os.loadavg();
  report.totalSeconds = (performance.now() - t0) / 1000;
  // The issue's goals, as far as this run measures them.
  const get = (s, t) => report.rows.find((r) => r.shape === s && r.type === t);
  const measured = report.rows.filter((r) => r.decodeRatio != null);
  report.goals = [
    ...(opts.real ? [{ goal: '≥ 1.5× wllama (decode) on every row (issue 13)', met: measured.length ? measured.every((r) => r.decodeRatio >= 1.5) : null,
      text: `${measured.filter((r) => r.decodeRatio >= 1.5).length} of ${report.rows.length} rows` }] : []),
    { goal: 'faster than wllama (decode) on every row', met: measured.length ? measured.every((r) => r.decodeRatio > 1) : null,
      text: `${measured.filter((r) => r.decodeRatio > 1).length} of ${report.rows.length} rows` },
    ...['F32', 'Q8_0', 'Q4_0'].map((t) => {
      const rows = measured.filter((r) => r.type === t);
      return { goal: `≥ ${GOALS[t]}× wllama on ${t}`, met: rows.length ? rows.every((r) => r.decodeRatio >= GOALS[t]) : null,
        text: rows.map((r) => `${r.shape} ${x2(r.decodeRatio)}`).join(', ') || '–' };
    }),
  ];
  const f32 = get('stories110M', 'F32')?.ours, q8 = get('stories110M', 'Q8_0')?.ours;
  if (f32 && q8) {
    const ratio = q8.decodeTokPerSec / f32.decodeTokPerSec;
    report.goals.push({ goal: 'stories110M: our Q8_0 decode ≥ 2.5× our F32 (Chromium)', met: ratio >= 2.5, text: x2(ratio) });
  }
  const file = opts.out ?? path.join(HERE, 'out', opts.threads > 1 ? `peers-${opts.threads}t.json` : 'peers.json');
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
  if (opts.json) process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  else console.log(`${render(report)}\n\n${path.relative(process.cwd(), file)} written; ${report.totalSeconds.toFixed(0)} s in all`);
}

main().catch((e) => {
  console.error(e.stack || String(e));
  process.exit(1);
});
