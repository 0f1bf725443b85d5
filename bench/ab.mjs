#!/usr/bin/env node
// bench/ab.mjs — A/B decode comparison of two checkouts' wasm modules in ONE Node process: each
// side is loaded through its own js/wasmlm.js with its own dist/ module, both engines stay
// loaded, and the rounds alternate the order (base, head / head, base / ...), so load from other
// processes and thermal drift hit both sides alike. Reports per-round decode speed, the medians,
// and the median of the per-round head/base ratios, with the load average around every round.
//
//   node bench/ab.mjs --base /work/wt-x-base --head . [--models F32,Q8_0] [--shape stories110M]
//        [--rounds 8] [--tokens 48] [--prompt 16] [--module wasmlm.wasm]
//        [--mode eval|gen|both|prefill]
//        [--model FILE.gguf ...]   (instead of --shape/--models: any GGUF files)
//        [--side NAME=DIR[@FILE.wasm][#DOTFORM] ...]  (more sides, each against base; FILE
//          relative to DIR; DOTFORM the relaxed build's EngineOptions.dotForm: fused, split, auto)
//        [--stat median|mean] [--clock cpu|wall] [--load-order swap|fixed] [--ctx N] [--threads N] [--json]
//
// Decode modes: `eval` = engine-only, single-token evalTokens calls after a prompt (the forward
// pass and the JS call, no sampling); `gen` = generate() with greedy sampling, as bench.mjs's
// decode column (forward + sampling + detokenizing); `prefill` = the prompt (--prompt N tokens)
// in one evalTokens call, three times a round, tok/s = N / the median time. A decode round's
// tok/s is 1000 / the median
// per-token time (--stat mean: the mean, as bench.mjs). Positions, ids and the work per token are the
// same for both sides. The model files are bench/out/gguf/SHAPE-TYPE-s1.gguf (bench/models.mjs
// synthesizes a missing one with the native CLI). --json prints the result as JSON on stdout.

import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { ensureGguf } from './models.mjs';

const argv = process.argv.slice(2);
const opt = (k, d) => { const i = argv.indexOf(k); return i >= 0 ? argv[i + 1] : d; };
const opts = (k) => argv.flatMap((a, i) => (a === k ? [argv[i + 1]] : []));
const base = path.resolve(opt('--base', ''));
const head = path.resolve(opt('--head', '.'));
if (!opt('--base') && !opts('--side').length) {
  console.error('usage: node bench/ab.mjs --base DIR --head DIR [--models F32,Q8_0] [--rounds N] ...');
  process.exit(2);
}
const rounds = Number(opt('--rounds', 8));
const nCtxOpt = Number(opt('--ctx', 0)); // 0: the model's (a 128K-context model's KV cache may not fit)
// > 1 needs a threaded --module (wasmlm-mt.wasm, ...) and --clock wall (process CPU time counts
// every thread's work: tok/s by it stays near one thread's)
const nThreads = Number(opt('--threads', 1));
const tokens = Number(opt('--tokens', 48));
const promptLen = Number(opt('--prompt', 16));
const moduleFile = opt('--module', 'wasmlm.wasm');
const mode = opt('--mode', 'both');
const json = argv.includes('--json');
const log = (...a) => console.error(...a);
// --clock cpu (default): this process's CPU time (user + system, process.cpuUsage()), which a
// shared machine's preemptions do not inflate (contention for caches and memory bandwidth still
// counts); --clock wall: performance.now().
const CLOCK = opt('--clock', 'cpu');
const now = CLOCK === 'wall' ? () => performance.now()
  : () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; };
const load = () => os.loadavg().map((v) => v.toFixed(2)).join(' ');
/** The 2.5 % and 97.5 % points of the median of `a` resampled with replacement (a fixed seed). */
function bootstrapMedian(a, n = 2000) {
  let seed = 12345;
  const rnd = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32);
  const ms = [];
  for (let k = 0; k < n; k++) ms.push(median(a.map(() => a[Math.floor(rnd() * a.length)])));
  ms.sort((x, y) => x - y);
  return [ms[Math.floor(0.025 * n)], ms[Math.floor(0.975 * n)]];
}
const median = (a) => { const s = [...a].sort((x, y) => x - y); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };

let models = opts('--model').map((f) => ({ name: path.basename(f), file: path.resolve(f) }));
if (!models.length) {
  const shape = opt('--shape', 'stories110M');
  for (const type of opt('--models', 'F32,Q8_0').split(',')) {
    const meta = await ensureGguf(shape, type, { log });
    models.push({ name: `${shape} ${type}`, file: meta.path });
  }
}

/** One side: its own JS API (a separate module instance) and its own wasm file. */
async function side(name, dir, file = path.join('dist', moduleFile), dotForm = undefined) {
  const api = await import(pathToFileURL(path.join(dir, 'js/wasmlm.js')).href);
  return { name, dir, api, wasm: pathToFileURL(path.resolve(dir, file)), dotForm };
}
const sides = [];
if (opt('--base')) sides.push(await side('base', base), await side('head', head));
for (const spec of opts('--side')) {
  const m = /^([^=]+)=([^@#]+)(?:@([^#]+))?(?:#(.+))?$/.exec(spec);
  if (!m) throw new Error(`--side NAME=DIR[@FILE.wasm][#DOTFORM], got ${spec}`);
  sides.push(await side(m[1], path.resolve(m[2]), m[3], m[4]));
}
if (sides.length < 2) throw new Error('need at least two sides');

// Fixed ids (BOS, then ids past the special and byte tokens, below the vocabulary size), the
// same for every side.
let prompt, decodeIds;
const makeIds = (vocab) => {
  const id = (k) => 3 + (k % Math.max(1, Math.min(vocab, 1600) - 3));
  prompt = Int32Array.from({ length: promptLen }, (_, i) => (i === 0 ? 1 : id(300 + i * 37)));
  decodeIds = Int32Array.from({ length: tokens }, (_, i) => id(400 + i * 53));
};

/** tok/s of a round from its per-token times: 1000 / the median time (robust against the
 *  preemptions a shared machine adds to a few tokens), or the mean with --stat mean. */
const STAT = opt('--stat', 'median');
const LOAD_ORDER = opt('--load-order', 'swap');
const rate = (ms) => 1000 / (STAT === 'mean' ? ms.reduce((a, b) => a + b, 0) / ms.length : median(ms));

/** Engine-only decode: `tokens` single-token evalTokens after the prompt. */
async function evalDecode(engine) {
  await engine.reset();
  await engine.evalTokens(prompt);
  const ms = [];
  for (let i = 0; i < tokens; i++) {
    const t0 = now();
    await engine.evalTokens(Int32Array.of(decodeIds[i]));
    ms.push(now() - t0);
  }
  return rate(ms);
}

/** Prefill: the prompt in one evalTokens call (the batched matrix products), the median of 3. */
async function prefillRate(engine) {
  const ms = [];
  for (let k = 0; k < 3; k++) {
    await engine.reset();
    const t0 = now();
    await engine.evalTokens(prompt);
    ms.push(now() - t0);
  }
  return (promptLen * 1000) / median(ms);
}

/** generate() decode, greedy: every iterator step after the first (which runs the prefill). */
async function genDecode(engine, text) {
  const it = engine.generate(text, { temperature: 0, maxTokens: tokens + 1, seed: 1 })[Symbol.asyncIterator]();
  let r = await it.next();
  const ms = [];
  while (!r.done) {
    const t0 = now();
    r = await it.next();
    if (!r.done) ms.push(now() - t0);
  }
  return ms.length ? rate(ms) : NaN;
}

const results = [];
for (const m of models) {
  log(`${m.name}: ${m.file} (load average ${load()})`);
  // The engines are loaded side by side, and the side loaded later decodes faster whatever its
  // module (A/A, one module on both sides, 2026-11-24: 1.08x on stories110M F32, 1.03x on Q8_0).
  // So the second half of the rounds reloads every engine in the reverse order (--load-order
  // fixed: no reload, as before).
  const engines = [];
  const loadAll = async (idx) => {
    for (const e of engines) await e?.engine.free();
    for (const i of idx) {
      const s = sides[i];
      const engine = await s.api.createEngine({ wasm: s.wasm, threads: nThreads,
        ...(s.dotForm ? { dotForm: s.dotForm } : {}) });
      const info = await engine.load({ model: m.file, nCtx: nCtxOpt });
      makeIds(info.vocabSize);
      const text = (await engine.detokenize?.(prompt.subarray(1))) ?? 'Once upon a time';
      // warm-up: both code paths once (the first run of a module is slower)
      await evalDecode(engine);
      if (mode === 'gen' || mode === 'both') await genDecode(engine, text);
      engines[i] = { side: s, engine, text };
    }
  };
  await loadAll(sides.map((_, i) => i));
  const modes = mode === 'both' ? ['eval', 'gen'] : [mode];
  const S = sides.length;
  const per = Object.fromEntries(modes.map((md) => [md, sides.map(() => ({ tps: [], ratio: [] }))]));
  const loads = [];
  for (let r = 0; r < rounds; r++) {
    if (r === Math.ceil(rounds / 2) && LOAD_ORDER === 'swap') {
      await loadAll(sides.map((_, i) => S - 1 - i));
      log(`  reloaded in the order ${sides.map((_, i) => sides[S - 1 - i].name).join(', ')}`);
    }
    // rotate the order every round; every other round reversed (ABBA for two sides)
    let order = sides.map((_, i) => (i + Math.floor(r / 2)) % S);
    if (r % 2) order = order.reverse();
    const l0 = os.loadavg()[0];
    for (const md of modes) {
      const got = [];
      for (const i of order) {
        const e = engines[i];
        got[i] = md === 'eval' ? await evalDecode(e.engine)
          : md === 'prefill' ? await prefillRate(e.engine) : await genDecode(e.engine, e.text);
      }
      got.forEach((v, i) => { per[md][i].tps.push(v); per[md][i].ratio.push(v / got[0]); });
    }
    loads.push([l0, os.loadavg()[0]]);
    log(`  round ${r + 1}/${rounds} (order ${order.map((i) => sides[i].name).join(', ')}): ` +
      modes.map((md) => `${md} ` + sides.map((s, i) => `${s.name} ${per[md][i].tps.at(-1).toFixed(1)}` +
        (i ? ` (${per[md][i].ratio.at(-1).toFixed(3)})` : '')).join(' ')).join('; ') + `; load ${load()}`);
  }
  for (const e of engines) await e.engine.free();
  const row = { model: m.name, rounds, tokens, prompt: promptLen, loadavg1: loads };
  for (const md of modes) {
    row[md] = sides.map((s, i) => {
      const p = per[md][i];
      return { side: s.name, tps: p.tps, median: median(p.tps), ratios: p.ratio,
        ratioMedian: median(p.ratio), ratioCI95: bootstrapMedian(p.ratio), ratioMin: Math.min(...p.ratio), ratioMax: Math.max(...p.ratio) };
    });
    for (const q of row[md]) {
      log(`  ${m.name} ${md} ${q.side}: median ${q.median.toFixed(1)} tok/s` + (q === row[md][0] ? '' :
        `, over ${sides[0].name}: median of rounds ${q.ratioMedian.toFixed(3)} (95 % CI ` +
        `${q.ratioCI95.map((v) => v.toFixed(3)).join('–')}; rounds ${q.ratioMin.toFixed(3)}–${q.ratioMax.toFixed(3)})`));
    }
  }
  results.push(row);
}
const out = { sides: sides.map((s) => ({ name: s.name, dir: s.dir, wasm: s.wasm.pathname })),
  node: process.version, results };
if (json) console.log(JSON.stringify(out, null, 2));
else {
  console.log(`| model | mode | ${sides.map((s) => `${s.name} tok/s`).join(' | ')} | ${sides.slice(1).map((s) => `${s.name}/${sides[0].name} (median of rounds; 95 % CI)`).join(' | ')} |`);
  console.log(`|---|---|${sides.map(() => '---|').join('')}${sides.slice(1).map(() => '---|').join('')}`);
  for (const r of results) for (const md of ['eval', 'gen', 'prefill']) if (r[md]) {
    console.log(`| ${r.model} | ${md} | ${r[md].map((q) => q.median.toFixed(1)).join(' | ')} | ` +
      r[md].slice(1).map((q) => `${q.ratioMedian.toFixed(3)} (${q.ratioCI95.map((v) => v.toFixed(3)).join('–')})`).join(' | ') + ' |');
  }
}
