#!/usr/bin/env node
// bench/bench.mjs — wasmlm's benchmark in Node, one thread (--threads N for more): load time,
// prefill and decode speed, SIMD128 over scalar, KV cache over recomputation, memory, and (section
// 7) 1 thread against several on the same files. It drives the public JS API
// (js/wasmlm.js) on real wasm; what each number means is in bench/README.md.
// Section 5 runs synthetic GGUF files of every weight type (bench/models.mjs, cached in
// bench/out/gguf/) with a roofline against the module's own read and multiply-add probes
// (src/kernels/bench_probe.c). Other engines: bench/peers.mjs (npm run bench:peers). It never
// downloads anything: stories260K is read from ../shared/models, stories15M is a synthetic
// checkpoint (tools/synth.mjs) written to bench/out/ on first use.
//
//   node bench/bench.mjs            # full run (~3 min on this 2-core machine), table on stdout
//   node bench/bench.mjs --quick    # 1 run, short lengths: a smoke test (~30 s)
//   node bench/bench.mjs --json     # only the JSON on stdout (progress goes to stderr)
//   options: --only load,simd,kv,memory,quant,batch,threads,depth,builds   --runs N   --threads N
//            --build simd128|relaxed (every section; default: what createEngine picks here, relaxed
//            in Node >= 22); section 9 (builds) runs both side by side (Node >= 22)
//            --kv f16|f32 (the KV cache type; section 8 shows both side by side without it)
//            --models stories260K,stories15M,stories42M,...
//            sections 5 and 7: --big (adds TinyLlama-1.1B, quantized types)  --shapes a,b  --types F32,Q8_0
//            section 8: --shapes / --types too (default stories110M × F32, Q8_0)
//            --only shapes: issue 12's SmolLM2-135M/360M and Llama-3.2-1B shapes in Q8_0 and Q4_K_M
//            (bench/real_shapes.mjs; slow, not in the default run) --real-shapes a,b --real-types Q8_0
// Always writes a JSON report: bench/out/bench.json (--quick: bench/out/bench-quick.json; --out FILE).
//   --backend webgpu: the WebGPU backend against the CPU path instead (bench/webgpu.mjs).

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

// WASMLM_BENCH_ENGINE: another module with the same createEngine (for testing the bench itself).
const { createEngine: createEngineAny } = await import(process.env.WASMLM_BENCH_ENGINE
  ? new URL(process.env.WASMLM_BENCH_ENGINE, `file://${process.cwd()}/`).href
  : '../js/wasmlm.js');
/** --build simd128|relaxed (default: what createEngine picks here): every SIMD engine of every
 *  section runs that build (EngineOptions.build); section 9 (builds) runs both side by side. */
let BUILD = 'auto';
const createEngine = (o = {}) => createEngineAny(o.simd === false || o.build ? o : { ...o, build: BUILD });
import { SHAPES, fileBytes, writeSyntheticModel } from '../tools/synth.mjs';
import { benchBatch, defaultBuild, renderBatch } from './batch.mjs';
import { plan as quantPlan, ensureGguf, fallbackNote, BIG_SHAPE, PARAGRAPH, QUANT_SHAPES, QUANT_TYPES } from './models.mjs';
import { benchRealShapes, renderRealShapes, REAL_SHAPES, REAL_TYPES } from './real_shapes.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '..');
const SHARED_MODELS = path.resolve(REPO, '../shared/models');
const OUT_DIR = path.join(HERE, 'out');
const SYNTH_SEED = 1;

// A fixed English paragraph: its first 64 token ids (BOS included) are the prefill prompt.

const MODELS = {
  stories260K: {
    key: 'stories260K',
    label: 'stories260K (real)',
    model: path.join(SHARED_MODELS, 'stories260K.bin'),
    tokenizer: path.join(SHARED_MODELS, 'tok512.bin'),
    synthetic: false,
  },
  stories15M: {
    key: 'stories15M',
    label: 'stories15M (synthetic)',
    model: path.join(OUT_DIR, 'stories15M.bin'),
    tokenizer: path.join(SHARED_MODELS, 'tokenizer.bin'),
    synthetic: true,
    shape: 'stories15M',
  },
};
const DEFAULT_MODELS = ['stories260K', 'stories15M'];
const WASM32_MAX_LOADABLE = 3 * 2 ** 30; // a conservative bound for one float32 checkpoint

/** A model entry for a name: the two above, or any other tools/synth.mjs shape (synthetic). */
function modelEntry(name) {
  if (MODELS[name]) return MODELS[name];
  const shape = SHAPES[name];
  if (!shape) throw new UsageError(`--models: unknown model ${name}; known: ${[...DEFAULT_MODELS, ...Object.keys(SHAPES).filter((k) => !MODELS[k])].join(', ')}`);
  // Weights + KV cache must fit in wasm32's 4 GiB, in one malloc'd block for the weights: the
  // 4.14 GB TinyLlama F32 file does not (measured: the engine cannot allocate it).
  if (fileBytes(shape) > WASM32_MAX_LOADABLE) {
    throw new UsageError(`--models: ${name} in float32 is ${(fileBytes(shape) / 1e9).toFixed(2)} GB; ` +
      'it cannot be loaded in wasm32\'s 4 GiB memory');
  }
  return {
    key: name,
    label: `${name} (synthetic)`,
    model: path.join(OUT_DIR, `${name}.bin`),
    tokenizer: path.join(SHARED_MODELS, 'tokenizer.bin'),
    synthetic: true,
    shape: name,
  };
}

const FULL = {
  runs: 3,
  promptTokens: 64,
  decodeTokens: 128,
  warmupTokens: 16,
  kvModel: 'stories15M',
  kvCtx: 1024,
  kvLengths: [64, 256, 1024],
  kvCachedSteps: 8,          // single-token evals timed per length, with the cache
  kvNoCacheSteps: 3,         // ... and without (each one recomputes the whole sequence)
  kvNoCacheBudgetMs: 20000,  // stop timing no-cache steps at one length after this much
  kvTotalLengths: [64, 256],
  kvTotalBudgetMs: 90000,    // skip a no-cache total whose estimate exceeds this
  quantRuns: 3,              // 5. quantized section: runs per median (small shapes)
  quantBigRuns: 1,           //    ... for TinyLlama (--big): one run, it is slow
  quantPromptTokens: 64,
  quantDecodeTokens: 64,
  quantWarmupTokens: 8,
  depthPositions: [64, 256, 960], // 8. decode step time at these positions (stories110M: n_ctx 1024)
  depthSteps: 16,            //    single-token evals timed at each (median)
  probeReadBytes: 256 * 2 ** 20, // 8× this machine's L3
  probeReadReps: 2,
  probeFmaIters: 2e7,
  probeSamples: 3,           // per probe, before and after every row of section 5
};

const QUICK = {
  ...FULL,
  runs: 1,
  promptTokens: 32,
  decodeTokens: 32,
  warmupTokens: 4,
  kvCtx: 256,
  kvLengths: [32, 128],
  kvCachedSteps: 4,
  kvNoCacheSteps: 2,
  kvNoCacheBudgetMs: 5000,
  kvTotalLengths: [32],
  kvTotalBudgetMs: 10000,
  quantRuns: 1,
  quantDecodeTokens: 32,
  quantPromptTokens: 32,
  quantWarmupTokens: 4,
  depthPositions: [32, 256],
  depthSteps: 4,
  probeSamples: 2,
};

const SECTIONS = ['load', 'simd', 'kv', 'memory', 'quant', 'batch', 'threads', 'depth', 'builds'];

/** A bad command line: printed without a stack trace, exit status 2. */
class UsageError extends Error {}

// ---------------------------------------------------------------------------------------------
// Small helpers

const now = () => performance.now();
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
const stat = (runs) => ({ median: median(runs), runs });
const log = (msg) => process.stderr.write(`${msg}\n`);

/** Current size of the engine's wasm linear memory in bytes. */
function wasmMemoryBytes(engine) {
  return engine.wasmMemoryBytes;
}

function requireMethod(engine, name) {
  if (typeof engine[name] !== 'function') {
    throw new Error(`js/wasmlm.js: Engine.${name}() is missing; bench/README.md lists what the bench needs`);
  }
}

async function openModel(m, { simd = true, nCtx = 0, kvCache = true, threads = 1, kvType = undefined, build } = {}) {
  const engine = await createEngine({ simd, threads: simd ? threads : 1, ...(simd && build ? { build } : {}) });
  const t0 = now();
  const info = await engine.load({ model: m.model, tokenizer: m.tokenizer, nCtx, kvCache, kvType });
  const loadMs = now() - t0;
  return { engine, info, loadMs };
}

/** The warm-up generation excluded from every timing (PERF-NOTES: the first one is slower). */
async function warmUp(engine, n) {
  await engine.complete('Once upon a time', { temperature: 0, maxTokens: n, seed: 1 });
}

/** The fixed prompt: the first n ids of PARAGRAPH (BOS first), tokenized by this model. */
async function promptIds(engine, n) {
  const ids = await engine.tokenize(PARAGRAPH, { bos: true });
  if (ids.length < n) throw new Error(`the paragraph gives only ${ids.length} tokens, need ${n}`);
  return Int32Array.from(ids.subarray(0, n));
}

/** Longest word prefix of PARAGRAPH whose tokenization (with BOS) has at most n tokens: the
 *  decode prompt, a string, because generate() takes text. */
async function promptText(engine, n) {
  const words = PARAGRAPH.split(' ');
  let best = words[0];
  for (let k = 1; k <= words.length; k++) {
    const text = words.slice(0, k).join(' ');
    if ((await engine.tokenize(text, { bos: true })).length > n) break;
    best = text;
  }
  return best;
}

/** Prefill: one evalTokens call with all the prompt ids, from an empty context. */
async function timePrefill(engine, ids) {
  await engine.reset();
  const t0 = now();
  await engine.evalTokens(ids);
  return now() - t0;
}

/**
 * Decode through generate(): greedy, maxTokens new tokens. Times each iterator next() call except
 * the first (which runs the prefill and samples the first token from its logits), so every timed
 * call is one forward pass + sampling + detokenizing + the yield to the event loop.
 */
async function timeGenerateDecode(engine, prompt, maxTokens) {
  const it = engine.generate(prompt, { temperature: 0, maxTokens, seed: 1 })[Symbol.asyncIterator]();
  let r = await it.next();
  let n = r.done ? 0 : 1;
  let ms = 0;
  while (!r.done) {
    const t0 = now();
    r = await it.next();
    if (!r.done) {
      ms += now() - t0;
      n++;
    }
  }
  const lr = engine.lastResult ?? {};
  return {
    tokPerSec: n > 1 ? ((n - 1) * 1000) / ms : null,
    nGenerated: n,
    nPrompt: lr.nPrompt ?? null,
    stopReason: lr.stopReason ?? null,
    engineDecodeTokPerSec: lr.decodeTokensPerSec ?? null,
    enginePrefillTokPerSec: lr.prefillTokensPerSec ?? null,
  };
}

/** Engine-only decode: after the prompt, n single-token evalTokens calls (fixed ids, no sampling). */
async function timeEvalDecode(engine, ids, n) {
  await engine.reset();
  await engine.evalTokens(ids);
  const times = await timeSingleEvals(engine, ids, n);
  return (n * 1000) / times.reduce((a, b) => a + b, 0);
}

/** Times `count` single-token evals, one call each; ids are reused cyclically. Kept a function of
 *  its own, called per measurement, so V8 optimises it (PERF-NOTES). */
async function timeSingleEvals(engine, ids, count, budgetMs = Infinity, start = 0) {
  const times = [];
  let total = 0;
  for (let i = 0; i < count && total < budgetMs; i++) {
    const id = ids[(start + i) % ids.length];
    const t0 = now();
    await engine.evalTokens(Int32Array.of(id));
    const dt = now() - t0;
    times.push(dt);
    total += dt;
  }
  return times;
}

function cyclicIds(ids, n) {
  const out = new Int32Array(n);
  for (let i = 0; i < n; i++) out[i] = i === 0 ? ids[0] : ids[1 + ((i - 1) % (ids.length - 1))];
  return out;
}

// ---------------------------------------------------------------------------------------------
// Sections

/** 1 and 2: load, prefill and decode for one model and one build, median of cfg.runs. */
async function benchModel(m, simd, cfg) {
  const load = [], prefill = [], decode = [], evalDecode = [];
  let last = null, info = null;
  for (let run = 0; run < cfg.runs; run++) {
    const o = await openModel(m, { simd, threads: cfg.threads, build: cfg.build });
    const { engine } = o;
    info = o.info;
    requireMethod(engine, 'evalTokens');
    requireMethod(engine, 'reset');
    load.push(o.loadMs);
    await warmUp(engine, cfg.warmupTokens);
    const ids = await promptIds(engine, cfg.promptTokens);
    prefill.push((ids.length * 1000) / (await timePrefill(engine, ids)));
    const text = await promptText(engine, cfg.promptTokens);
    last = await timeGenerateDecode(engine, text, cfg.decodeTokens);
    decode.push(last.tokPerSec);
    if (cfg.evalDecode !== false) evalDecode.push(await timeEvalDecode(engine, ids, cfg.decodeTokens));
    await engine.free();
    log(`  ${m.key} ${simd ? info.build ?? 'simd' : 'scalar'}${cfg.threads > 1 ? ` ${cfg.threads} threads` : ''} run ${run + 1}: load ${o.loadMs.toFixed(1)} ms, ` +
      `prefill ${prefill.at(-1).toFixed(1)} tok/s, decode ${decode.at(-1)?.toFixed(1)} tok/s ` +
      `(${last.nGenerated} tokens, ${last.stopReason})` +
      (evalDecode.length ? `, eval decode ${evalDecode.at(-1).toFixed(1)} tok/s` : ''));
  }
  return {
    kind: 'model',
    model: m.key,
    synthetic: m.synthetic,
    simd,
    build: info?.build ?? (simd ? 'simd128' : 'scalar'),
    threads: simd ? cfg.threads ?? 1 : 1,
    fileBytes: fs.statSync(m.model).size,
    info,
    promptTokens: cfg.promptTokens,
    decodeTokens: cfg.decodeTokens,
    loadMs: stat(load),
    prefillTokPerSec: stat(prefill),
    decodeTokPerSec: stat(decode),
    evalDecodeTokPerSec: evalDecode.length ? stat(evalDecode) : null,
    lastDecode: last,
  };
}

/** 3: KV cache. Per length L, the average time of the single-token evals that bring the
 *  sequence to L tokens (positions L-k .. L-1), with and without the cache. */
async function benchKvSteps(m, kvCache, cfg, runs) {
  const samples = cfg.kvLengths.map(() => []);
  for (let run = 0; run < runs; run++) {
    const { engine } = await openModel(m, { nCtx: cfg.kvCtx, kvCache });
    await warmUp(engine, cfg.warmupTokens);
    const base = await promptIds(engine, cfg.promptTokens);
    const ids = cyclicIds(base, cfg.kvCtx);
    await engine.reset();
    let pos = 0;
    for (let li = 0; li < cfg.kvLengths.length; li++) {
      const L = cfg.kvLengths[li];
      const k = kvCache ? cfg.kvCachedSteps : cfg.kvNoCacheSteps;
      const start = Math.max(pos, L - k);
      if (start > pos) {
        const t0 = now();
        await engine.evalTokens(ids.subarray(pos, start));
        log(`  kv ${kvCache ? 'cached' : 'no-cache'}: eval ${start - pos} tokens to reach ${start}: ${(now() - t0).toFixed(0)} ms`);
        pos = start;
      }
      const budget = kvCache ? Infinity : cfg.kvNoCacheBudgetMs;
      const times = await timeSingleEvals(engine, ids, L - pos, budget, pos);
      // Positions start .. pos-1 were timed; when the budget ran out before L, the next length
      // starts from there (its catch-up eval covers the gap).
      samples[li].push(...times.map((t, i) => ({ run, t, pos: pos + i })));
      pos += times.length;
      log(`  kv ${kvCache ? 'cached' : 'no-cache'} L=${L} run ${run + 1}: ${times.map((t) => t.toFixed(2)).join(' ')} ms`);
    }
    await engine.free();
  }
  return cfg.kvLengths.map((L, li) => {
    const perRun = [];
    for (let run = 0; run < runs; run++) {
      const ts = samples[li].filter((s) => s.run === run).map((s) => s.t);
      if (ts.length) perRun.push(mean(ts));
    }
    return { seqLen: L, stepMs: stat(perRun), stepsTimed: samples[li].length,
      positions: [...new Set(samples[li].map((s) => s.pos))] };
  });
}

/** 3b: total time of L single-token evals from an empty context (= generating L tokens). */
async function benchKvTotal(m, kvCache, cfg, L) {
  const { engine } = await openModel(m, { nCtx: cfg.kvCtx, kvCache });
  await warmUp(engine, cfg.warmupTokens);
  const ids = cyclicIds(await promptIds(engine, cfg.promptTokens), L);
  await engine.reset();
  const times = await timeSingleEvals(engine, ids, L);
  await engine.free();
  return times.reduce((a, b) => a + b, 0);
}

async function benchKv(cfg) {
  const m = MODELS[cfg.kvModel];
  log(`kv cache: ${m.key}, n_ctx ${cfg.kvCtx}`);
  const cached = await benchKvSteps(m, true, cfg, cfg.runs);
  const noCache = await benchKvSteps(m, false, cfg, 1);
  const points = cached.map((c, i) => ({
    seqLen: c.seqLen,
    cachedStepMs: c.stepMs,
    noCacheStepMs: noCache[i].stepMs,
    cachedStepsTimed: c.stepsTimed,
    noCacheStepsTimed: noCache[i].stepsTimed,
    ratio: noCache[i].stepMs.median / c.stepMs.median,
  }));
  const totals = [];
  for (const L of cfg.kvTotalLengths) {
    const cachedMs = await benchKvTotal(m, true, cfg, L);
    // Estimate without the cache: step time grows ~linearly in L, so the sum is about L/2 steps
    // at length L; the measured step at the nearest length above L scales it.
    const ref = points.find((p) => p.seqLen >= L) ?? points.at(-1);
    const estimateMs = (L / 2) * ref.noCacheStepMs.median * (L / ref.seqLen);
    let noCacheMs = null;
    if (estimateMs <= cfg.kvTotalBudgetMs) noCacheMs = await benchKvTotal(m, false, cfg, L);
    else log(`  kv total L=${L} without cache skipped: estimated ${(estimateMs / 1000).toFixed(0)} s`);
    totals.push({ seqLen: L, cachedMs, noCacheMs, noCacheEstimateMs: estimateMs,
      ratio: noCacheMs == null ? null : noCacheMs / cachedMs });
    log(`  kv total L=${L}: cached ${cachedMs.toFixed(0)} ms, no cache ${noCacheMs?.toFixed(0) ?? 'skipped'} ms`);
  }
  return { kind: 'kvcache', model: m.key, nCtx: cfg.kvCtx, runsCached: cfg.runs, runsNoCache: 1, points, totals };
}

/** 4: memory, measured in a fresh Node process per model (so one model's pages do not count
 *  for the next): this script with --memory-probe KEY. */
async function benchMemory(m, quick) {
  const args = [fileURLToPath(import.meta.url), '--memory-probe', m.key];
  if (quick) args.push('--quick');
  const out = await new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    let s = '';
    child.stdout.on('data', (d) => { s += d; });
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(s) : reject(new Error(`memory probe exited with ${code}`))));
  });
  return JSON.parse(out);
}

async function memoryProbe(m, cfg) {
  const rss = () => process.memoryUsage().rss;
  const r = { kind: 'memory', model: m.key, fileBytes: fs.statSync(m.model).size, nCtx: 0 };
  r.rssStart = rss();
  const engine = await createEngine({ simd: true });
  r.wasmBeforeLoad = wasmMemoryBytes(engine);
  r.rssBeforeLoad = rss();
  r.info = await engine.load({ model: m.model, tokenizer: m.tokenizer });
  r.nCtx = r.info?.nCtx ?? null;
  r.wasmAfterLoad = wasmMemoryBytes(engine);
  r.rssAfterLoad = rss();
  await warmUp(engine, cfg.warmupTokens);
  const text = await promptText(engine, cfg.promptTokens);
  await engine.complete(text, { temperature: 0, maxTokens: cfg.decodeTokens, seed: 1 });
  r.wasmAfterGenerate = wasmMemoryBytes(engine);
  r.rssAfterGenerate = rss();
  r.maxRssBytes = process.resourceUsage().maxRSS * 1024; // maxRSS is in KiB
  await engine.free();
  return r;
}

/** 5a. The machine's ceilings, measured by the module itself: a second instance of the same
 *  dist/wasmlm.wasm (so its probe buffer does not grow an engine's memory) runs
 *  wlmjs_probe_read (sequential SIMD128 loads over cfg.probeReadBytes, written first so every
 *  page is real) and wlmjs_probe_fma (f32x4 multiply + add chains on 12 register-resident
 *  accumulators). Returns { measure(samples) → { readGBs, fmaGFLOPs, loadavg }, close() }:
 *  the section measures right before and right after every row, because on this 2-vCPU VM
 *  both ceilings move with what the other vCPU runs (measured here: read 14–24 GB/s,
 *  mul+add 21–47 GFLOP/s in different minutes). */
async function openProbe(cfg) {
  const file = path.join(REPO, 'dist', 'wasmlm.wasm');
  const module = await WebAssembly.compile(fs.readFileSync(file));
  const instance = await WebAssembly.instantiate(module, { env: { emscripten_notify_memory_growth() {} } });
  const x = instance.exports;
  if (typeof x.wlmjs_probe_read !== 'function') {
    throw new Error(`${path.relative(REPO, file)} has no wlmjs_probe_* exports: rebuild (npm run build)`);
  }
  x._initialize?.();
  const bytes = cfg.probeReadBytes - (cfg.probeReadBytes % 128);
  let buf = x.wlmjs_malloc(bytes) >>> 0;
  if (!buf) throw new Error(`probe: cannot allocate ${bytes} bytes`);
  x.wlmjs_probe_fill(buf, bytes);
  x.wlmjs_probe_read(buf, bytes, 1); // untimed: first touch, V8 tier-up
  x.wlmjs_probe_fma(cfg.probeFmaIters);
  const readUnits = (bytes * cfg.probeReadReps) / 1e9;
  const fmaUnits = x.wlmjs_probe_fma_flops(cfg.probeFmaIters) / 1e9;
  return {
    module: path.relative(REPO, file), readBytes: bytes, readReps: cfg.probeReadReps, fmaIters: cfg.probeFmaIters,
    measure(samples) {
      const read = [], fma = [];
      for (let i = 0; i < samples; i++) {
        read.push(timeRate(() => x.wlmjs_probe_read(buf, bytes, cfg.probeReadReps), readUnits));
        fma.push(timeRate(() => x.wlmjs_probe_fma(cfg.probeFmaIters), fmaUnits));
      }
      return { readGBs: read, fmaGFLOPs: fma, loadavg: os.loadavg() };
    },
    close() {
      if (buf) x.wlmjs_free(buf);
      buf = 0;
    },
  };
}

/** Median and best of a list of rates. */
const rateStat = (runs) => ({ median: median(runs), max: Math.max(...runs), runs });

function timeRate(fn, units) {
  const t0 = now();
  fn();
  return units / ((now() - t0) / 1000);
}

/** Multiply-adds of one token, from the shape: every weight matrix once (the classifier too,
 *  except in prefill, where the engine runs it only for the last token), ×2 FLOPs; attention
 *  adds 4·dim FLOPs per layer per position attended (q·k and the weighted sum of v). */
function flopsPerToken(s, { pos, classifier = true }) {
  const kvDim = (s.dim * s.nKvHeads) / s.nHeads;
  const perLayer = 2 * s.dim * s.dim + 2 * kvDim * s.dim + 3 * s.dim * s.hiddenDim;
  const mats = s.nLayers * perLayer + (classifier ? s.vocabSize * s.dim : 0);
  return 2 * mats + s.nLayers * 4 * s.dim * pos;
}

/** 5b. One row per synthetic GGUF (shape × type): load, prefill, decode as in section 1, with the
 *  roofline next to it against the probe. */
async function benchQuant(cfg, opts, probe, allProbes) {
  const rows = [];
  const jobs = quantPlan({ big: opts.big, shapes: opts.shapes, types: opts.types });
  for (const j of jobs) {
    const meta = await ensureGguf(j.shape, j.type, { log });
    const big = j.shape === BIG_SHAPE;
    const sub = { ...cfg, runs: big ? Math.min(cfg.quantBigRuns, cfg.runs) : cfg.quantRuns,
      promptTokens: cfg.quantPromptTokens, decodeTokens: cfg.quantDecodeTokens,
      warmupTokens: cfg.quantWarmupTokens, evalDecode: false };
    if (opts.runs) sub.runs = opts.runs;
    const m = { key: `${j.shape} ${j.type}`, model: meta.path, tokenizer: undefined, synthetic: true };
    log(`quant ${m.key} (${(meta.bytes / 1e6).toFixed(1)} MB, load average ${os.loadavg().map((v) => v.toFixed(2)).join(' ')})`);
    const before = probe.measure(cfg.probeSamples);
    const r = await benchModel(m, true, sub);
    const after = probe.measure(cfg.probeSamples);
    const rowProbe = { readGBs: rateStat([...before.readGBs, ...after.readGBs]),
      fmaGFLOPs: rateStat([...before.fmaGFLOPs, ...after.fmaGFLOPs]), loadavgBefore: before.loadavg, loadavgAfter: after.loadavg };
    log(`  probes around it: read ${rowProbe.readGBs.median.toFixed(1)} GB/s, mul+add ${rowProbe.fmaGFLOPs.median.toFixed(1)} GFLOP/s`);
    allProbes.read.push(...rowProbe.readGBs.runs);
    allProbes.fma.push(...rowProbe.fmaGFLOPs.runs);
    const s = SHAPES[j.shape];
    const decode = r.decodeTokPerSec.median;
    const prefill = r.prefillTokPerSec.median;
    const nPrompt = r.lastDecode.nPrompt ?? sub.promptTokens;
    const decodeFlops = flopsPerToken(s, { pos: nPrompt + sub.decodeTokens / 2 });
    const prefillFlops = flopsPerToken(s, { pos: sub.promptTokens / 2, classifier: false });
    const bytes = r.info.weightBytes;
    rows.push({
      ...r, kind: 'quant', shape: j.shape, type: j.type, runs: sub.runs, seed: meta.seed,
      synthesisMs: meta.ms, synthesisCached: meta.cached, fallback: meta.fallback, fallbackNote: fallbackNote(meta),
      loadavg: os.loadavg(), probe: rowProbe,
      roofline: {
        weightBytesPerToken: bytes,
        decodeGBs: (bytes * decode) / 1e9,
        decodeReadFraction: (bytes * decode) / 1e9 / rowProbe.readGBs.median,
        decodeFlopsPerToken: decodeFlops,
        decodeGFLOPs: (decodeFlops * decode) / 1e9,
        decodeFlopFraction: (decodeFlops * decode) / 1e9 / rowProbe.fmaGFLOPs.median,
        prefillFlopsPerToken: prefillFlops,
        prefillGFLOPs: (prefillFlops * prefill) / 1e9,
        prefillFlopFraction: (prefillFlops * prefill) / 1e9 / rowProbe.fmaGFLOPs.median,
      },
    });
  }
  return rows;
}

/**
 * 9. Builds side by side: decode and prefill of the synthetic GGUFs (default stories110M × F32,
 * Q8_0, Q4_0; --shapes, --types) on the SIMD128 and the relaxed-SIMD build, one run of each in
 * turn (so drift hits both alike), the read probe around every pair; then batched decode
 * (1 and 16 sequences) and 128-token prefill on Q8_0 for both builds (bench/batch.mjs). Ratios
 * are of medians over the runs. Needs a runtime with relaxed SIMD (Node >= 22, Chromium).
 */
async function benchBuilds(cfg, opts, probe) {
  if (defaultBuild() !== 'relaxed') {
    return [{ kind: 'builds', skipped: 'this runtime or dist/ has no relaxed-SIMD build (Node >= 22 and npm run build)' }];
  }
  const rows = [];
  const types = opts.types ?? ['F32', 'Q8_0', 'Q4_0'];
  const shapes = opts.shapes ?? ['stories110M'];
  const runs = opts.runs ?? (opts.quick ? 1 : 3);
  for (const shape of shapes) {
    for (const type of types) {
      const meta = await ensureGguf(shape, type, { log });
      const m = { key: `${shape} ${type}`, model: meta.path, tokenizer: undefined, synthetic: true };
      const sub = { ...cfg, runs: 1, promptTokens: cfg.quantPromptTokens, decodeTokens: cfg.quantDecodeTokens,
        warmupTokens: cfg.quantWarmupTokens, evalDecode: false, threads: 1 };
      const by = { simd128: { decode: [], prefill: [] }, relaxed: { decode: [], prefill: [] } };
      const read = [];
      let bytes = 0;
      log(`builds ${m.key}: simd128 vs relaxed (load average ${os.loadavg().map((v) => v.toFixed(2)).join(' ')})`);
      for (let r = 0; r < runs; r++) {
        read.push(...probe.measure(cfg.probeSamples).readGBs);
        for (const build of r % 2 ? ['relaxed', 'simd128'] : ['simd128', 'relaxed']) {
          const x = await benchModel(m, true, { ...sub, build });
          if (x.build !== build) throw new Error(`asked for ${build}, ran ${x.build}`);
          by[build].decode.push(x.decodeTokPerSec.median);
          by[build].prefill.push(x.prefillTokPerSec.median);
          bytes = x.info.weightBytes;
        }
      }
      read.push(...probe.measure(cfg.probeSamples).readGBs);
      const med = (b, k) => median(by[b][k]);
      const readGBs = median(read);
      rows.push({
        kind: 'builds', shape, type, runs, weightBytes: bytes, readGBs, loadavg: os.loadavg(), by,
        decode: { simd128: med('simd128', 'decode'), relaxed: med('relaxed', 'decode') },
        prefill: { simd128: med('simd128', 'prefill'), relaxed: med('relaxed', 'prefill') },
        decodeRatio: med('relaxed', 'decode') / med('simd128', 'decode'),
        prefillRatio: med('relaxed', 'prefill') / med('simd128', 'prefill'),
        decodeReadFraction: { simd128: (bytes * med('simd128', 'decode')) / 1e9 / readGBs,
          relaxed: (bytes * med('relaxed', 'decode')) / 1e9 / readGBs },
      });
    }
  }
  for (const shape of shapes) {
    for (const build of ['simd128', 'relaxed']) {
      log(`builds: batches, ${shape} Q8_0 ${build}`);
      rows.push(...(await benchBatch({ quick: true, shapes: [shape], build, type: 'Q8_0' }))
        .map((b) => ({ ...b, kind: 'buildsBatch' })));
    }
  }
  return rows;
}

function renderBuilds(rows) {
  const out = ['', '9. Builds side by side, one thread: SIMD128 (dist/wasmlm.wasm) vs relaxed SIMD (dist/wasmlm-relaxed.wasm)'];
  const skipped = rows.find((r) => r.skipped);
  if (skipped) return [...out, `   skipped: ${skipped.skipped}`];
  const f1 = (v) => v.toFixed(1), f2 = (v) => v.toFixed(2), pct = (v) => `${(100 * v).toFixed(0)}%`;
  const main = rows.filter((r) => r.kind === 'builds');
  out.push(table(main.map((r) => [`${r.shape} ${r.type}`, f1(r.decode.simd128), f1(r.decode.relaxed), `${f2(r.decodeRatio)}×`,
    f1(r.prefill.simd128), f1(r.prefill.relaxed), `${f2(r.prefillRatio)}×`, f1(r.readGBs),
    pct(r.decodeReadFraction.simd128), pct(r.decodeReadFraction.relaxed)]),
  ['model', 'decode s128', 'decode relaxed', 'ratio', 'prefill s128', 'prefill relaxed', 'ratio', 'read GB/s',
    'of read s128', 'of read relaxed']));
  for (const shape of new Set(main.map((r) => r.shape))) {
    const get = (t) => main.find((r) => r.shape === shape && r.type === t);
    const f32 = get('F32');
    for (const t of ['Q8_0', 'Q4_0']) {
      const q = get(t);
      if (f32 && q) {
        out.push(`   ${shape} ${t} decode over F32: simd128 ${f2(q.decode.simd128 / f32.decode.simd128)}×, ` +
          `relaxed ${f2(q.decode.relaxed / f32.decode.relaxed)}× (relaxed ${t} over SIMD128 F32: ${f2(q.decode.relaxed / f32.decode.simd128)}×)`);
      }
    }
  }
  const batches = rows.filter((r) => r.kind === 'buildsBatch');
  if (batches.length) out.push(renderBatch(batches));
  return out;
}

/**
 * 7. Threads: decode and prefill of the synthetic GGUFs on 1 thread and on `threads` (the pool
 * splits every matrix product by rows), runs alternating between the two so that drift hits both
 * alike. Default shapes stories15M/42M/110M × F32, Q8_0, Q4_0 (--shapes, --types, --big).
 */
async function benchThreads(cfg, opts, threads) {
  const rows = [];
  const types = opts.types ?? ['F32', 'Q8_0', 'Q4_0'];
  const jobs = quantPlan({ big: opts.big, shapes: opts.shapes, types });
  for (const j of jobs) {
    const meta = await ensureGguf(j.shape, j.type, { log });
    const big = j.shape === BIG_SHAPE;
    const runs = opts.runs ?? (big ? cfg.quantBigRuns : cfg.quantRuns);
    const sub = { ...cfg, runs: 1, promptTokens: cfg.quantPromptTokens, decodeTokens: cfg.quantDecodeTokens,
      warmupTokens: cfg.quantWarmupTokens, evalDecode: false };
    const m = { key: `${j.shape} ${j.type}`, model: meta.path, tokenizer: undefined, synthetic: true };
    log(`threads ${m.key}: 1 vs ${threads} (load average ${os.loadavg().map((v) => v.toFixed(2)).join(' ')})`);
    const by = { 1: [], [threads]: [] };
    for (let r = 0; r < runs; r++) {
      for (const t of [1, threads]) by[t].push(await benchModel(m, true, { ...sub, threads: t }));
    }
    const med = (list, key) => stat(list.map((x) => x[key].median));
    const one = { decode: med(by[1], 'decodeTokPerSec'), prefill: med(by[1], 'prefillTokPerSec') };
    const many = { decode: med(by[threads], 'decodeTokPerSec'), prefill: med(by[threads], 'prefillTokPerSec') };
    const bytes = by[1][0].info.weightBytes;
    rows.push({
      kind: 'threads', shape: j.shape, type: j.type, threads, runs, fileBytes: by[1][0].fileBytes,
      weightBytesPerToken: bytes, loadavg: os.loadavg(),
      decode1: one.decode, decodeN: many.decode, prefill1: one.prefill, prefillN: many.prefill,
      decodeSpeedup: many.decode.median / one.decode.median,
      prefillSpeedup: many.prefill.median / one.prefill.median,
      decodeGBs1: (bytes * one.decode.median) / 1e9, decodeGBsN: (bytes * many.decode.median) / 1e9,
    });
  }
  return rows;
}

/**
 * 8. Decode at depth: the time of one decode step (a single-token evalTokens, no sampling) as a
 * function of the position it runs at. Attention reads the K and V of every earlier position, so
 * the step grows with the position; the slope between the first and the last position is the
 * cost of one attended position. One sequence per run: a batched prefill up to each position,
 * then cfg.depthSteps timed steps (their median); median over runs.
 */
async function benchDepth(cfg, opts) {
  const rows = [];
  const jobs = quantPlan({ big: false, shapes: opts.shapes ?? ['stories110M'], types: opts.types ?? ['F32', 'Q8_0'] });
  // Both KV cache types side by side unless --kv names one: F16 halves the cache, and its
  // attention widens every value to f32 (wasm has no f16 arithmetic).
  const kvTypes = opts.kv ? [opts.kv] : ['f32', 'f16'];
  for (const j of jobs) for (const kvType of kvTypes) {
    const meta = await ensureGguf(j.shape, j.type, { log });
    const m = { key: `${j.shape} ${j.type} kv ${kvType}`, model: meta.path, tokenizer: undefined, synthetic: true };
    const runs = opts.runs ?? cfg.quantRuns;
    const perRun = [];
    let positions = null;
    for (let run = 0; run < runs; run++) {
      const { engine, info } = await openModel(m, { threads: cfg.threads, kvType });
      positions = cfg.depthPositions.filter((p) => p + cfg.depthSteps <= info.nCtx);
      await warmUp(engine, cfg.quantWarmupTokens);
      await engine.reset();
      const ids = cyclicIds(await promptIds(engine, cfg.quantPromptTokens), positions.at(-1) + cfg.depthSteps);
      let pos = 0;
      const ms = [];
      for (const p of positions) {
        if (p > pos) await engine.evalTokens(ids.subarray(pos, p));
        ms.push(median(await timeSingleEvals(engine, ids, cfg.depthSteps, Infinity, p)));
        pos = p + cfg.depthSteps;
      }
      await engine.free();
      perRun.push(ms);
      log(`  depth ${m.key} run ${run + 1}: ${positions.map((p, i) => `${ms[i].toFixed(2)} ms at ${p}`).join(', ')}`);
    }
    const stepMs = positions.map((_, i) => stat(perRun.map((r) => r[i])));
    const first = stepMs[0].median, last = stepMs.at(-1).median;
    rows.push({
      kind: 'depth', shape: j.shape, type: j.type, kvType, threads: cfg.threads ?? 1, runs, positions, stepMs,
      usPerPosition: positions.length > 1 ? ((last - first) * 1000) / (positions.at(-1) - positions[0]) : null,
    });
  }
  return rows;
}

/** The issue's goals that hold per thread count: Q8_0 over F32 decode on stories110M. */
function threadGoals(rows) {
  const get = (type) => rows.find((r) => r.shape === 'stories110M' && r.type === type);
  const f32 = get('F32'), q8 = get('Q8_0');
  if (!f32 || !q8) return [];
  return [[1, 'decode1'], [f32.threads, 'decodeN']].map(([t, key]) => {
    const ratio = q8[key].median / f32[key].median;
    return { goal: `stories110M: Q8_0 decode ≥ 2.5× our F32 decode, ${t} thread${t > 1 ? 's' : ''}`, value: ratio,
      met: ratio >= 2.5, text: `${ratio.toFixed(2)}× (${q8[key].median.toFixed(1)} vs ${f32[key].median.toFixed(1)} tok/s)` };
  });
}

/** The issue's goals that the quantized section can check on its own. */
function quantGoals(rows) {
  const get = (shape, type) => rows.find((r) => r.shape === shape && r.type === type);
  const goals = [];
  const f32 = get('stories110M', 'F32');
  const q8 = get('stories110M', 'Q8_0');
  if (f32 && q8) {
    const ratio = q8.decodeTokPerSec.median / f32.decodeTokPerSec.median;
    goals.push({ goal: 'stories110M: Q8_0 decode ≥ 2.5× our F32 decode', value: ratio, met: ratio >= 2.5,
      text: `${ratio.toFixed(2)}×` });
  }
  if (f32) {
    const frac = f32.roofline.decodeReadFraction;
    goals.push({ goal: 'stories110M: F32 decode at ≥ 85% of the measured read bandwidth', value: frac, met: frac >= 0.85,
      text: `${(100 * frac).toFixed(0)}% (${f32.roofline.decodeGBs.toFixed(1)} of ${f32.probe.readGBs.median.toFixed(1)} GB/s measured around that row)` });
  }
  return goals;
}

// ---------------------------------------------------------------------------------------------
// Output

const mb = (n) => (n == null ? '–' : `${(n / 1e6).toFixed(1)} MB`);
const f1 = (n) => (n == null ? '–' : n.toFixed(1));
const f2 = (n) => (n == null ? '–' : n.toFixed(2));
const f0 = (n) => (n == null ? '–' : n.toFixed(0));

function table(rows, header) {
  const all = [header, ...rows];
  const w = header.map((_, i) => Math.max(...all.map((r) => String(r[i]).length)));
  const line = (r) => r.map((c, i) => (i === 0 ? String(c).padEnd(w[i]) : String(c).padStart(w[i]))).join('  ');
  return [line(header), w.map((n) => '-'.repeat(n)).join('  '), ...rows.map(line)].join('\n');
}

function render(report) {
  const cfg = report.config;
  const out = [];
  out.push(`wasmlm bench — ${report.date}`);
  out.push(`node ${report.node}, ${report.machine.cpus} × ${report.machine.model}, ` +
    `${cfg.threads > 1 ? `${cfg.threads} threads` : 'one thread'} (section 7: 1 vs more), ` +
    `median of ${cfg.runs} run(s)${report.quick ? ' (--quick)' : ''}`);
  const la = (a) => a.map((v) => v.toFixed(2)).join(' ');
  out.push(`load average at start ${la(report.machine.loadavgStart)}, at end ${la(report.machine.loadavgEnd)}` +
    ' (the bench keeps one core busy: much above 1 means something else ran too)');
  const models = report.results.filter((r) => r.kind === 'model');
  const simdRows = models.filter((r) => r.simd);
  if (simdRows.length) {
    out.push('', `1. Load, prefill (${cfg.promptTokens} tokens, one eval) and decode (greedy, ${cfg.decodeTokens} new tokens) — SIMD128 build`);
    out.push(table(simdRows.map((r) => [
      `${r.model}${r.synthetic ? ' (synthetic)' : ''}`, mb(r.fileBytes), f1(r.loadMs.median),
      f1(r.prefillTokPerSec.median),
      `${f1(r.decodeTokPerSec.median)}${r.lastDecode.nGenerated < cfg.decodeTokens ? ` (${r.lastDecode.nGenerated} tok)` : ''}`,
      f1(r.evalDecodeTokPerSec.median),
    ]), ['model', 'file', 'load ms', 'prefill tok/s', 'decode tok/s', 'eval-only decode tok/s']));
  }
  const simd = report.results.filter((r) => r.kind === 'simd');
  if (simd.length) {
    out.push('', '2. SIMD128 over scalar build (dist/wasmlm.wasm vs dist/wasmlm-scalar.wasm)');
    out.push(table(simd.map((r) => [r.model, f1(r.simdDecode), f1(r.scalarDecode), `${f2(r.decodeRatio)}×`,
      f1(r.simdPrefill), f1(r.scalarPrefill), `${f2(r.prefillRatio)}×`]),
    ['model', 'decode simd', 'decode scalar', 'ratio', 'prefill simd', 'prefill scalar', 'ratio']));
  }
  const kv = report.results.find((r) => r.kind === 'kvcache');
  if (kv) {
    out.push('', `3. KV cache over recomputation — ${kv.model}, n_ctx ${kv.nCtx}: time of one decode step ` +
      'that makes the sequence L tokens long');
    out.push(table(kv.points.map((p) => [p.seqLen, f2(p.cachedStepMs.median), f1(p.noCacheStepMs.median), `${f1(p.ratio)}×`]),
      ['L', 'cached step ms', 'no-cache step ms', 'ratio']));
    if (kv.totals.length) {
      out.push('', '   total time to evaluate L tokens one by one from an empty context');
      out.push(table(kv.totals.map((t) => [t.seqLen, f0(t.cachedMs),
        t.noCacheMs == null ? `skipped (est. ${f0(t.noCacheEstimateMs)})` : f0(t.noCacheMs),
        t.ratio == null ? '–' : `${f1(t.ratio)}×`]), ['L', 'cached ms', 'no-cache ms', 'ratio']));
    }
  }
  const mem = report.results.filter((r) => r.kind === 'memory');
  if (mem.length) {
    out.push('', '4. Memory (fresh process per model, n_ctx = model seq_len)');
    out.push(table(mem.map((r) => [r.model, mb(r.fileBytes), r.nCtx ?? '–', mb(r.wasmBeforeLoad), mb(r.wasmAfterLoad),
      mb(r.wasmAfterGenerate), mb(r.rssStart), mb(r.rssAfterLoad), mb(r.rssAfterGenerate), mb(r.maxRssBytes)]),
    ['model', 'file', 'n_ctx', 'wasm empty', 'wasm loaded', 'wasm after gen', 'rss start', 'rss loaded', 'rss after gen', 'peak rss']));
  }

  const probe = report.results.find((r) => r.kind === 'probe');
  const quant = report.results.filter((r) => r.kind === 'quant');
  if (probe || quant.length) {
    out.push('', `5. Quantized GGUF (synthetic, real tokenizer): prefill ${cfg.quantPromptTokens} tokens (one eval), ` +
      `decode greedy ${cfg.quantDecodeTokens} new tokens, roofline against this module's own probes`);
    if (probe) {
      out.push(`   probes (same wasm module, this run, before and after every row): sequential read ` +
        `${f1(probe.readGBs.median)} GB/s median (${f1(Math.min(...probe.readGBs.runs))}–${f1(probe.readGBs.max)}; ` +
        `${mb(probe.readBytes)} × ${probe.readReps}), f32x4 mul+add ${f1(probe.fmaGFLOPs.median)} GFLOP/s ` +
        `(${f1(Math.min(...probe.fmaGFLOPs.runs))}–${f1(probe.fmaGFLOPs.max)}); each row is compared with its own probes`);
    }
    const pct = (x) => (x == null ? '–' : `${(100 * x).toFixed(0)}%`);
    out.push(table(quant.map((r) => [
      r.shape, `${r.type}${r.fallback?.length ? '*' : ''}`, mb(r.fileBytes), r.runs,
      f1(r.prefillTokPerSec.median), f1(r.decodeTokPerSec.median),
      mb(r.roofline.weightBytesPerToken), f1(r.roofline.decodeGBs), f1(r.probe.readGBs.median), pct(r.roofline.decodeReadFraction),
      f2(r.roofline.decodeGFLOPs), f1(r.probe.fmaGFLOPs.median), pct(r.roofline.decodeFlopFraction),
      f1(r.roofline.prefillGFLOPs), pct(r.roofline.prefillFlopFraction),
      r.loadavg.map((v) => v.toFixed(1)).join(' '),
    ]), ['shape', 'type', 'file', 'runs', 'prefill tok/s', 'decode tok/s', 'weights/token', 'decode GB/s',
      'read probe', '% read', 'decode GFLOP/s', 'fma probe', '% peak', 'prefill GFLOP/s', '% peak', 'load avg']));
    const notes = [...new Set(quant.filter((r) => r.fallbackNote).map((r) => `${r.shape} ${r.type}: ${r.fallbackNote}`))];
    if (notes.length) out.push(`   * K-quant rows need multiples of 256; fell back to: ${notes.join('; ')}`);
    out.push('   FLOPs/token = 2 × weight-matrix parameters (classifier included for decode, not for prefill) + ' +
      'attention 4·dim per layer per attended position (decode: mean position; prefill: half the prompt)');
    const goals = report.results.find((r) => r.kind === 'quantGoals');
    for (const g of goals?.goals ?? []) out.push(`   goal: ${g.goal}: ${g.text} — ${g.met ? 'met' : 'NOT met'}`);
  }
  const batch = report.results.filter((r) => r.kind === 'batch');
  if (batch.length) out.push('', `6. ${renderBatch(batch)}`);
  const thr = report.results.filter((r) => r.kind === 'threads');
  if (thr.length) {
    const n = thr[0].threads;
    out.push('', `7. Threads: 1 vs ${n} (wlm_threadpool splits every matrix product by rows; results are bitwise equal), ` +
      `synthetic GGUFs, prefill ${cfg.quantPromptTokens} tokens, decode greedy ${cfg.quantDecodeTokens} new tokens, ` +
      'runs alternating');
    out.push(table(thr.map((r) => [r.shape, r.type, mb(r.fileBytes), r.runs,
      f1(r.prefill1.median), f1(r.prefillN.median), `${f2(r.prefillSpeedup)}×`,
      f1(r.decode1.median), f1(r.decodeN.median), `${f2(r.decodeSpeedup)}×`,
      f1(r.decodeGBs1), f1(r.decodeGBsN), r.loadavg.map((v) => v.toFixed(1)).join(' ')]),
    ['shape', 'type', 'file', 'runs', 'prefill 1t', `prefill ${n}t`, 'speedup', 'decode 1t', `decode ${n}t`, 'speedup',
      'decode GB/s 1t', `GB/s ${n}t`, 'load avg']));
    const goals = report.results.find((r) => r.kind === 'threadGoals');
    for (const g of goals?.goals ?? []) out.push(`   goal: ${g.goal}: ${g.text} — ${g.met ? 'met' : 'NOT met'}`);
  }
  const depth = report.results.filter((r) => r.kind === 'depth');
  if (depth.length) {
    const pos = depth[0].positions;
    out.push('', `8. Decode at depth: one decode step (single-token eval) at each position, ms (median of ` +
      `${cfg.depthSteps} steps, then of the runs); the slope is the cost of one attended position`);
    out.push(table(depth.map((r) => [r.shape, r.type, r.kvType, r.runs, ...r.stepMs.map((x) => f2(x.median)),
      r.usPerPosition == null ? '–' : f1(r.usPerPosition)]),
    ['shape', 'type', 'KV cache', 'runs', ...pos.map((p) => `ms at ${p}`), 'us per position']));
  }
  const builds = report.results.filter((r) => r.kind === 'builds' || r.kind === 'buildsBatch');
  if (builds.length) out.push(...renderBuilds(builds));
  if (report.missing.length) out.push('', `Not measured: ${report.missing.join('; ')}`);
  return out.join('\n');
}

// ---------------------------------------------------------------------------------------------
// Main

function parseArgs(argv) {
  const o = { quick: false, json: false, only: SECTIONS, runs: null, probe: null, models: DEFAULT_MODELS,
    big: false, shapes: null, types: null, threads: 1 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--quick') o.quick = true;
    else if (a === '--json') o.json = true;
    else if (a === '--only') o.only = argv[++i].split(',');
    else if (a === '--runs') o.runs = Number(argv[++i]);
    else if (a === '--models') o.models = argv[++i].split(',');
    else if (a === '--out') o.out = path.resolve(argv[++i]);
    else if (a === '--memory-probe') o.probe = argv[++i];
    else if (a === '--real-shapes') o.realShapes = argv[++i].split(',');
    else if (a === '--real-types') o.realTypes = argv[++i].split(',').map((t) => t.toUpperCase());
    else if (a === '--big') o.big = true;
    else if (a === '--threads') o.threads = Number(argv[++i]);
    else if (a === '--kv') o.kv = argv[++i];
    else if (a === '--build') o.build = argv[++i];
    else if (a === '--shapes') o.shapes = argv[++i].split(',');
    else if (a === '--types') o.types = argv[++i].split(',').map((t) => t.toUpperCase());
    else if (a === '-h' || a === '--help') o.help = true;
    else throw new UsageError(`unknown argument ${a}`);
  }
  // 'shapes' (issue 12's real model shapes, bench/real_shapes.mjs) is slow: only when asked for
  for (const s of o.only) if (!SECTIONS.includes(s) && s !== 'shapes') throw new UsageError(`--only: unknown section ${s}`);
  for (const s of o.realShapes ?? []) if (!REAL_SHAPES.includes(s)) throw new UsageError(`--real-shapes: unknown shape ${s}`);
  for (const t of o.realTypes ?? []) if (!REAL_TYPES.includes(t)) throw new UsageError(`--real-types: unknown type ${t}`);
  for (const s of o.shapes ?? []) if (!QUANT_SHAPES.includes(s) && s !== BIG_SHAPE) throw new UsageError(`--shapes: unknown shape ${s}`);
  for (const t of o.types ?? []) if (!QUANT_TYPES.includes(t)) throw new UsageError(`--types: unknown type ${t}`);
  if (o.runs != null && !(Number.isInteger(o.runs) && o.runs >= 1)) throw new UsageError('--runs must be a positive integer');
  if (!(Number.isInteger(o.threads) && o.threads >= 1 && o.threads <= 16)) throw new UsageError('--threads must be an integer 1..16');
  if (o.kv !== undefined && o.kv !== 'f16' && o.kv !== 'f32') throw new UsageError('--kv must be f16 or f32');
  if (o.build !== undefined && o.build !== 'simd128' && o.build !== 'relaxed') throw new UsageError('--build must be simd128 or relaxed');
  return o;
}

async function ensureSynthetic(m) {
  const expected = fileBytes(SHAPES[m.shape]);
  if (fs.existsSync(m.model) && fs.statSync(m.model).size === expected) return;
  log(`writing ${path.relative(REPO, m.model)} (synthetic ${m.shape}, seed ${SYNTH_SEED})`);
  const r = await writeSyntheticModel({ shape: m.shape, out: m.model, seed: SYNTH_SEED });
  log(`  ${r.bytes} bytes in ${(r.ms / 1000).toFixed(2)} s`);
}

async function main() {
  // --backend webgpu: the GPU backend's rows next to the CPU's (bench/webgpu.mjs, its own options)
  if (process.argv.includes('--backend')) return void await import('./webgpu.mjs');
  const opts = parseArgs(process.argv.slice(2));
  if (opts.help) {
    console.log('usage: node bench/bench.mjs [--quick] [--json] [--out FILE] [--only load,simd,kv,memory,quant,batch,threads,depth,builds] [--build simd128|relaxed] [--runs N]\n' +
      '                          [--threads N]   (sections 1-6 and 8 on N threads, default 1; section 7 compares 1 with N, default min(4, cores))\n' +
      `                          [--models ${DEFAULT_MODELS.join(',')}]   (also: stories42M, stories110M, synthetic)\n` +
      `                          quantized section: [--big] [--shapes ${[...QUANT_SHAPES, BIG_SHAPE].join(',')}] [--types ${QUANT_TYPES.join(',')}]\n` +
      '                          section 8 (depth): [--shapes] [--types], default stories110M × F32,Q8_0\n' +
      '                          [--kv f16|f32]   (KV cache type; default f16, section 8 shows both)\n' +
      `                          --only shapes: issue 12's shapes, not in the default run [--real-shapes ${REAL_SHAPES.join(',')}] [--real-types ${REAL_TYPES.join(',')}]`);
    return;
  }
  const cfg = { ...(opts.quick ? QUICK : FULL), threads: opts.threads };
  if (opts.build) BUILD = opts.build;
  if (opts.runs) cfg.runs = opts.runs;
  if (opts.probe) { // child process of benchMemory
    process.stdout.write(JSON.stringify(await memoryProbe(modelEntry(opts.probe), opts.quick ? QUICK : FULL)));
    return;
  }
  const models = opts.models.map(modelEntry);
  const t0 = now();
  fs.mkdirSync(OUT_DIR, { recursive: true });
  const needed = opts.only.some((s) => s !== 'quant' && s !== 'shapes') ? [...models] : [];
  if (opts.only.includes('kv') && !needed.includes(MODELS[cfg.kvModel])) needed.push(MODELS[cfg.kvModel]);
  for (const m of needed) if (m.synthetic) await ensureSynthetic(m);

  const report = {
    date: new Date().toISOString(),
    node: process.version,
    build: opts.build ?? defaultBuild(),
    machine: { cpus: os.cpus().length, model: os.cpus()[0]?.model ?? 'unknown', arch: process.arch, platform: process.platform,
      loadavgStart: os.loadavg() },
    quick: opts.quick,
    config: cfg,
    results: [],
    missing: [],
  };

  const wantModels = opts.only.includes('load') || opts.only.includes('simd');
  for (const m of models) {
    if (!wantModels) break;
    log(`model ${m.key}`);
    const simd = await benchModel(m, true, cfg);
    report.results.push(simd);
    if (opts.only.includes('simd')) {
      const scalar = await benchModel(m, false, cfg);
      report.results.push(scalar);
      report.results.push({
        kind: 'simd', model: m.key,
        simdDecode: simd.decodeTokPerSec.median, scalarDecode: scalar.decodeTokPerSec.median,
        decodeRatio: simd.decodeTokPerSec.median / scalar.decodeTokPerSec.median,
        simdEvalDecode: simd.evalDecodeTokPerSec.median, scalarEvalDecode: scalar.evalDecodeTokPerSec.median,
        evalDecodeRatio: simd.evalDecodeTokPerSec.median / scalar.evalDecodeTokPerSec.median,
        simdPrefill: simd.prefillTokPerSec.median, scalarPrefill: scalar.prefillTokPerSec.median,
        prefillRatio: simd.prefillTokPerSec.median / scalar.prefillTokPerSec.median,
      });
    }
  }
  if (opts.only.includes('kv')) report.results.push(await benchKv(cfg));
  if (opts.only.includes('memory')) {
    for (const m of models) {
      log(`memory ${m.key}`);
      const r = await benchMemory(m, opts.quick);
      if (r.wasmAfterLoad == null) {
        const msg = 'wasm memory size (neither an Engine accessor nor the instantiate hook saw it)';
        if (!report.missing.includes(msg)) report.missing.push(msg);
      }
      report.results.push(r);
    }
  }
  if (opts.only.includes('quant')) {
    const probe = await openProbe(cfg);
    const allProbes = { read: [], fma: [] };
    let rows;
    try {
      rows = await benchQuant(cfg, opts, probe, allProbes);
    } finally {
      probe.close();
    }
    report.results.push({ kind: 'probe', module: probe.module, readBytes: probe.readBytes, readReps: probe.readReps,
      fmaIters: probe.fmaIters, readGBs: rateStat(allProbes.read), fmaGFLOPs: rateStat(allProbes.fma) });
    report.results.push(...rows);
    report.results.push({ kind: 'quantGoals', goals: quantGoals(rows) });
  }
  if (opts.only.includes('batch')) {
    log('batch (6.): batched decode and prefill');
    report.results.push(...await benchBatch({ quick: opts.quick, threads: cfg.threads, build: opts.build ?? defaultBuild() }));
  }
  if (opts.only.includes('threads')) {
    const n = opts.threads > 1 ? opts.threads : Math.min(4, os.availableParallelism?.() ?? os.cpus().length);
    if (n < 2) {
      report.missing.push('threads (section 7): this machine has one core');
    } else {
      const rows = await benchThreads(cfg, opts, n);
      report.results.push(...rows, { kind: 'threadGoals', goals: threadGoals(rows) });
      log(`threads (7.): batched decode and prefill on ${n} threads`);
      report.results.push(...await benchBatch({ quick: opts.quick, threads: n, build: opts.build ?? defaultBuild() }));
    }
  }
  if (opts.only.includes('builds')) {
    const probe = await openProbe(cfg);
    try {
      report.results.push(...await benchBuilds(cfg, opts, probe));
    } finally {
      probe.close();
    }
  }
  if (opts.only.includes('depth')) {
    log('depth (8.): decode step time against the position');
    report.results.push(...await benchDepth(cfg, opts));
  }
  if (opts.only.includes('shapes')) {
    log('shapes: SmolLM2-135M, SmolLM2-360M, Llama-3.2-1B (synthetic), 1 and 2 threads');
    report.results.push(...await benchRealShapes({ shapes: opts.realShapes, types: opts.realTypes, runs: opts.runs ?? 1 }));
  }
  report.totalSeconds = (now() - t0) / 1000;
  report.machine.loadavgEnd = os.loadavg();

  const file = opts.out ?? path.join(OUT_DIR, opts.quick ? 'bench-quick.json' : 'bench.json');
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
  if (opts.json) process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  else {
    console.log(render(report));
    const real = report.results.filter((r) => r.kind === 'realShape');
    if (real.length) console.log(`\n${renderRealShapes(real)}`);
    console.log(`\n${path.relative(process.cwd(), file)} written; ${report.totalSeconds.toFixed(0)} s in all`);
  }
}

main().catch((e) => {
  if (e instanceof UsageError) {
    console.error(`bench: ${e.message} (--help for usage)`);
    process.exit(2);
  }
  console.error(e.stack || String(e));
  process.exit(1);
});
