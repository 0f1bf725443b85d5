// bench/real_shapes.mjs — issue 12's benchmark rows: synthetic GGUF files with the exact shapes of
// SmolLM2-135M, SmolLM2-360M and Llama-3.2-1B (tools/synth_gguf.mjs, their published configs; the
// SmolLM2 files carry GPT-2's 50257-token vocabulary, SmolLM2's own has no npm package) in Q8_0
// and Q4_K_M (llama.cpp's mix: rows of 576 and 960 are not whole 256-blocks, so those files hold
// Q5_0/Q8_0 matrices as the published ones do). Per file and thread count (1 and 2): load time,
// prefill tok/s (a 64-token prompt, one evalTokens call), decode tok/s (greedy generate, 32 new
// tokens), and the process's peak resident memory against the file size — each measurement in
// a fresh Node process (the child mode below), so the peak is that file's alone. Context: 2048
// positions (the files say 8192 / 131072; the KV cache would otherwise dominate the memory).
//
//   node bench/bench.mjs --only shapes [--shapes smollm2-135m,...] [--types Q8_0,Q4_K_M] [--runs N]
//   node bench/real_shapes.mjs [--shapes …] [--types …] [--runs N]     (the same, alone)
//
// Files are cached in bench/out/gguf-real/ (first run: ~10 min and ~5 GB of temporary F32 for
// Llama-3.2-1B). bench/peers.mjs --real-shapes runs the same files through wllama.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { synthCached, resolveShape } from '../tools/synth_gguf.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const REAL_DIR = path.join(HERE, 'out/gguf-real');
export const REAL_SHAPES = Object.freeze(['smollm2-135m', 'smollm2-360m', 'llama3.2-1b']);
export const REAL_TYPES = Object.freeze(['Q8_0', 'Q4_K_M']);
export const REAL_CTX = 2048;
const PROMPT_TOKENS = 64, DECODE_TOKENS = 32, WARMUP_TOKENS = 4;
const PARAGRAPH =
  'Once upon a time, in a small village at the edge of a green forest, there lived a curious ' +
  'little girl named Lily. Every morning she walked to the river with her dog, Max, to watch the ' +
  'fish jump and the birds sing. One day she found a shiny red stone under an old tree. She picked ' +
  'it up and ran home to show her mother, who smiled and said that the stone was very special. ' +
  'That night, Lily put the stone next to her bed and dreamed of faraway places.';
const log = (m) => process.stderr.write(`${m}\n`);

/** The file of (shape, type), synthesized (llama architecture, seed 1) if missing. */
export function ensureRealGguf(shape, type) {
  resolveShape('llama', shape); // throws on an unknown shape
  const t0 = Date.now();
  const file = path.join(REAL_DIR, `llama-${shape}-s1-${type}.gguf`);
  if (!fs.existsSync(file)) log(`synthesizing ${path.relative(process.cwd(), file)} ...`);
  synthCached({ arch: 'llama', shape, seed: 1, type }, REAL_DIR);
  return { path: file, shape, type, bytes: fs.statSync(file).size, ms: Date.now() - t0 };
}

/** Child mode: one file, one thread count; prints the measurement as JSON on stdout. */
async function probe(file, threads) {
  const { createEngine } = await import('../js/wasmlm.js');
  const engine = await createEngine({ threads });
  const t0 = performance.now();
  const info = await engine.load({ model: file, nCtx: REAL_CTX });
  const loadMs = performance.now() - t0;
  const rssAfterLoad = process.memoryUsage().rss;
  await engine.complete('Once upon a time', { temperature: 0, maxTokens: WARMUP_TOKENS, seed: 1 });
  const ids = await engine.tokenize(PARAGRAPH, { bos: true });
  const prompt = Int32Array.from(ids.subarray(0, PROMPT_TOKENS));
  await engine.reset();
  const p0 = performance.now();
  await engine.evalTokens(prompt);
  const prefillTokPerSec = (prompt.length * 1000) / (performance.now() - p0);
  const r = await engine.complete(PARAGRAPH.slice(0, 120), { temperature: 0, maxTokens: DECODE_TOKENS, seed: 1 });
  const out = {
    file: path.basename(file), fileBytes: fs.statSync(file).size, threads, loadMs, prefillTokPerSec,
    decodeTokPerSec: r.decodeTokensPerSec, nGenerated: r.nGenerated, weightBytes: info.weightBytes,
    wasmMemoryBytes: engine.wasmMemoryBytes, rssAfterLoad, maxRssBytes: process.resourceUsage().maxRSS * 1024,
  };
  await engine.free();
  return out;
}

function runChild(file, threads) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [fileURLToPath(import.meta.url), '--probe', file, '--threads', String(threads)],
      { stdio: ['ignore', 'pipe', 'inherit'] });
    let s = '';
    child.stdout.on('data', (d) => { s += d; });
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(JSON.parse(s)) : reject(new Error(`probe of ${file} exited with ${code}`))));
  });
}

const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[s.length >> 1]; };

/** The rows: one per (shape, type, threads), medians over `runs` child processes. */
export async function benchRealShapes({ shapes = REAL_SHAPES, types = REAL_TYPES, runs = 1, threads = [1, 2] } = {}) {
  const rows = [];
  for (const shape of shapes) {
    for (const type of types) {
      const f = ensureRealGguf(shape, type);
      for (const t of threads) {
        const rs = [];
        for (let i = 0; i < runs; i++) rs.push(await runChild(f.path, t));
        const row = {
          kind: 'realShape', shape, type, threads: t, runs, fileBytes: f.bytes, loadavg: os.loadavg(),
          loadMs: median(rs.map((r) => r.loadMs)), prefillTokPerSec: median(rs.map((r) => r.prefillTokPerSec)),
          decodeTokPerSec: median(rs.map((r) => r.decodeTokPerSec)), maxRssBytes: Math.max(...rs.map((r) => r.maxRssBytes)),
          wasmMemoryBytes: rs[0].wasmMemoryBytes,
        };
        log(`  ${shape} ${type} ${t} thread${t > 1 ? 's' : ''}: load ${row.loadMs.toFixed(0)} ms, prefill ${row.prefillTokPerSec.toFixed(1)} tok/s, ` +
          `decode ${row.decodeTokPerSec.toFixed(1)} tok/s, peak RSS ${(row.maxRssBytes / 1e6).toFixed(0)} MB (file ${(f.bytes / 1e6).toFixed(0)} MB)`);
        rows.push(row);
      }
    }
  }
  return rows;
}

/** Markdown table of the rows. */
export function renderRealShapes(rows) {
  const mb = (b) => (b / 1e6).toFixed(0);
  const lines = [`Issue 12 shapes (synthetic, context ${REAL_CTX}; ${PROMPT_TOKENS}-token prefill, ${DECODE_TOKENS}-token greedy decode)`, '',
    '| shape | type | threads | file MB | load ms | prefill tok/s | decode tok/s | peak RSS MB | RSS / file |',
    '|---|---|---|---|---|---|---|---|---|'];
  for (const r of rows) {
    lines.push(`| ${r.shape} | ${r.type} | ${r.threads} | ${mb(r.fileBytes)} | ${r.loadMs.toFixed(0)} | ${r.prefillTokPerSec.toFixed(1)} | ` +
      `${r.decodeTokPerSec.toFixed(1)} | ${mb(r.maxRssBytes)} | ${(r.maxRssBytes / r.fileBytes).toFixed(2)} |`);
  }
  return lines.join('\n');
}

export function parseRealArgs(argv) {
  const o = { shapes: REAL_SHAPES, types: REAL_TYPES, runs: 1 };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--shapes') o.shapes = argv[++i].split(',');
    else if (argv[i] === '--types') o.types = argv[++i].split(',').map((t) => t.toUpperCase());
    else if (argv[i] === '--runs') o.runs = Number(argv[++i]);
    else if (argv[i] === '--probe') o.probe = argv[++i];
    else if (argv[i] === '--threads') o.threads = Number(argv[++i]);
    else throw new Error(`unknown argument ${argv[i]}`);
  }
  for (const s of o.shapes) if (!REAL_SHAPES.includes(s)) throw new Error(`unknown shape ${s} (${REAL_SHAPES.join(', ')})`);
  for (const t of o.types) if (!REAL_TYPES.includes(t)) throw new Error(`unknown type ${t} (${REAL_TYPES.join(', ')})`);
  return o;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const o = parseRealArgs(process.argv.slice(2));
  if (o.probe) process.stdout.write(JSON.stringify(await probe(o.probe, o.threads ?? 1)));
  else {
    const rows = await benchRealShapes(o);
    fs.mkdirSync(path.join(HERE, 'out'), { recursive: true });
    fs.writeFileSync(path.join(HERE, 'out/real-shapes.json'), `${JSON.stringify(rows, null, 2)}\n`);
    console.log(renderRealShapes(rows));
  }
}
