// bench/real_shapes.mjs — issues 12 and 13's benchmark rows: synthetic GGUF files with the exact
// published shapes of (architecture, shape) pairs (tools/synth_gguf.mjs, their published configs):
//   issue 12 (llama): SmolLM2-135M, SmolLM2-360M (both with GPT-2's 50257-token vocabulary,
//     SmolLM2's own has no npm package), Llama-3.2-1B;
//   issue 13: Qwen2.5-0.5B (qwen2), Qwen3-0.6B (qwen3), Gemma-3-1B (gemma3), GPT-2 small (gpt2);
//     Phi-3.5-mini (phi3, 3.8 B parameters) only with --phi: its Q4_K_M file is 2.39 GB (written
//     directly by the quantizing writer, ~11 min on a busy machine, no F32 intermediate); its
//     Q8_0 file (4.06 GB) leaves no room for a 2048-position KV cache in wasm32's 4 GB, so that
//     row is skipped with the reason (REAL_PAIRS `noFit`) instead of writing the file.
// Types Q8_0, Q4_0 and Q4_K_M (llama.cpp's mix: rows that are not whole 256-blocks, e.g. 576,
// 896 and 960, get Q5_0/Q8_0 matrices as the published files do). Per file and thread count
// (1 and 2): load time,
// prefill tok/s (a 64-token prompt, one evalTokens call), decode tok/s (greedy generate, 32 new
// tokens), and the process's peak resident memory against the file size — each measurement in
// a fresh Node process (the child mode below), so the peak is that file's alone. Context: 2048
// positions (the files say 8192 / 131072; the KV cache would otherwise dominate the memory).
//
//   node bench/bench.mjs --only shapes [--shapes smollm2-135m,...] [--types Q8_0,Q4_K_M] [--runs N]
//   node bench/real_shapes.mjs [--set 12|13|42|43|all] [--phi] [--shapes …] [--types …] [--runs N] [--threads 1,2]
//
// --shapes takes shape names (smollm2-135m, qwen2.5-0.5b, gpt2, …; `node tools/synth_gguf.mjs
// --list`); --set picks issue 12's or 13's rows (default: issue 12's, as before). Files are cached
// in bench/out/gguf-real/ as ARCH-SHAPE-s1-TYPE.gguf (first run: ~10 min and ~5 GB of temporary
// F32 for a 1B shape). bench/peers.mjs --real-shapes runs the same files through wllama.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { synthCached, resolveShape } from '../tools/synth_gguf.mjs';
import { PARAGRAPH } from './models.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const REAL_DIR = path.join(HERE, 'out/gguf-real');
/** The (architecture, shape) pairs, with the issue that asks for them; `flag`: only on request. */
export const REAL_PAIRS = Object.freeze([
  { arch: 'llama', shape: 'smollm2-135m', name: 'SmolLM2-135M', issue: 12 },
  { arch: 'llama', shape: 'smollm2-360m', name: 'SmolLM2-360M', issue: 12 },
  { arch: 'llama', shape: 'llama3.2-1b', name: 'Llama-3.2-1B', issue: 12 },
  { arch: 'gpt2', shape: 'gpt2', name: 'GPT-2 small', issue: 13 },
  { arch: 'qwen2', shape: 'qwen2.5-0.5b', name: 'Qwen2.5-0.5B', issue: 13 },
  { arch: 'qwen3', shape: 'qwen3-0.6b', name: 'Qwen3-0.6B', issue: 13 },
  { arch: 'gemma3', shape: 'gemma3-1b', name: 'Gemma-3-1B', issue: 13 },
  // issue 42's hybrids (recurrent state beside the KV cache); lfm2.5-1.2b has Llama 3.1's
  // 128256-token vocabulary (LFM2's own 65536 has no npm package): +128 M parameters
  { arch: 'qwen35', shape: 'qwen3.5-0.8b', name: 'Qwen3.5-0.8B', issue: 42 },
  { arch: 'qwen35', shape: 'qwen3.5-2b', name: 'Qwen3.5-2B', issue: 42 },
  { arch: 'lfm2', shape: 'lfm2.5-1.2b', name: 'LFM2.5-1.2B', issue: 42 },
  // issue 43: SmolLM3-3B (NoPE every 4th layer); Llama 3.1's vocabulary, the same size as its own
  { arch: 'smollm3', shape: 'smollm3-3b', name: 'SmolLM3-3B', issue: 43 },
  // issue 43's mixtures of experts: Qwen3-30B-A3B's first 6 of 48 layers (its whole Q4_K_M is
  // ~18 GB), and a dense qwen3 of the same 6 layers whose feed-forward is as wide as the 8
  // active experts together (the same active weight bytes): the goal is MoE decode within 1.3×
  // the dense twin's time. gpt-oss-20b's first 2 of 24 blocks (experts in Q8_0 / Q4_K_M here,
  // MXFP4 in the published file) and its dense twin; LFM2-8B-A1B's first 8 of 24 blocks.
  { arch: 'qwen3moe', shape: 'qwen3-30b-a3b-l6', name: 'Qwen3-30B-A3B (6 of 48 layers)', issue: 43,
    noFit: { Q8_0: 'its 4.6 GB Q8_0 file does not fit the 4 GB wasm32 memory (Q4_K_M: 2.6 GB)' } },
  { arch: 'qwen3', shape: 'qwen3-a3b-dense-l6', name: 'dense twin of Qwen3-30B-A3B-l6 (same active bytes)', issue: 43 },
  { arch: 'gpt-oss', shape: 'gpt-oss-20b-l2', name: 'gpt-oss-20b (2 of 24 blocks)', issue: 43 },
  { arch: 'qwen3', shape: 'gpt-oss-20b-dense-l2', name: 'dense twin of gpt-oss-20b-l2 (same active expert bytes)', issue: 43 },
  { arch: 'lfm2moe', shape: 'lfm2-8b-a1b-l8', name: 'LFM2-8B-A1B (8 of 24 blocks)', issue: 43 },
  // issue 43, Gemma 4 (dense): E2B's text decoder, 5.1 B parameters with its per-layer
  // embeddings (2.3 B of them in per_layer_token_embd, read one row per token)
  { arch: 'gemma4', shape: 'gemma4-e2b', name: 'Gemma-4-E2B', issue: 43,
    noFit: { Q8_0: 'the ~5.4 GB Q8_0 file does not fit the 4 GB wasm32 memory (the memory64 module takes it; not measured here)' } },
  // Gemma 4 26B-A4B's first 6 of 30 blocks (5 sliding + 1 full: 128 experts of 704, 8 used,
  // beside a dense 2112-wide feed-forward; ~5.6 B parameters with the 262144-row embedding)
  { arch: 'gemma4', shape: 'gemma4-26b-a4b-l6', name: 'Gemma-4-26B-A4B (6 of 30 blocks)', issue: 43,
    noFit: { Q8_0: 'the ~6 GB Q8_0 file does not fit the 4 GB wasm32 memory (Q4_K_M: ~3.4 GB)' } },
  { arch: 'phi3', shape: 'phi3.5-mini', name: 'Phi-3.5-mini', issue: 13, flag: '--phi',
    noFit: { Q8_0: 'the 4.06 GB file and a 2048-position KV cache do not fit the 4 GB wasm32 memory (tests/js/wasm32_limit.test.mjs)' } },
].map(Object.freeze));
export const REAL_SHAPES = Object.freeze(REAL_PAIRS.map((p) => p.shape));
export const REAL_TYPES = Object.freeze(['Q8_0', 'Q4_0', 'Q4_K_M']);
/** Shapes of a set: '12', '13', '42', '43' or 'all' (flagged pairs only with `phi`). */
export function realShapeSet(set = '12', { phi = false } = {}) {
  if (!['12', '13', '42', '43', 'all'].includes(String(set))) throw new Error(`unknown set ${set} (12, 13, 42, 43, all)`);
  return REAL_PAIRS.filter((p) => (set === 'all' || String(p.issue) === String(set)) && (!p.flag || phi)).map((p) => p.shape);
}
/** The pair of a shape name. */
export function realPair(shape) {
  const p = REAL_PAIRS.find((x) => x.shape === shape);
  if (!p) throw new Error(`unknown shape ${shape} (${REAL_SHAPES.join(', ')})`);
  return p;
}
export const REAL_CTX = 2048;
const PROMPT_TOKENS = 64, DECODE_TOKENS = 32, WARMUP_TOKENS = 4;
const log = (m) => process.stderr.write(`${m}\n`);

/** Why (shape, type) is not run (it cannot fit wasm32), or null. */
export function realNoFit(shape, type) {
  return realPair(shape).noFit?.[type] ?? null;
}

/** The file of (shape, type), synthesized (the shape's architecture, seed 1) if missing. */
export function ensureRealGguf(shape, type) {
  const { arch, name } = realPair(shape);
  resolveShape(arch, shape); // throws on a shape the synthesizer does not know
  const t0 = Date.now();
  const file = path.join(REAL_DIR, `${arch}-${shape}-s1-${type}.gguf`);
  if (!fs.existsSync(file)) log(`synthesizing ${path.relative(process.cwd(), file)} ...`);
  synthCached({ arch, shape, seed: 1, type }, REAL_DIR);
  const nCtx = Math.min(REAL_CTX, resolveShape(arch, shape).ctx); // GPT-2: 1024 positions
  return { path: file, arch, shape, name, type, nCtx, bytes: fs.statSync(file).size, ms: Date.now() - t0 };
}

/**
 * The module's read probe, as bench.mjs section 5a measures it (which cannot be imported: it
 * runs on import): a separate instance of dist/wasmlm.wasm reads `bytes` with SIMD128 loads
 * (wlmjs_probe_read), `reps` times per sample. measure(samples) → GB/s per sample.
 */
export async function openReadProbe({ bytes = 256 << 20, reps = 4 } = {}) {
  const file = path.join(HERE, '..', 'dist', 'wasmlm.wasm');
  const module = await WebAssembly.compile(fs.readFileSync(file));
  const instance = await WebAssembly.instantiate(module, { env: { emscripten_notify_memory_growth() {} } });
  const x = instance.exports;
  if (typeof x.wlmjs_probe_read !== 'function') throw new Error('dist/wasmlm.wasm has no wlmjs_probe_read: rebuild');
  x._initialize?.();
  const n = bytes - (bytes % 128);
  const buf = x.wlmjs_malloc(n) >>> 0;
  if (!buf) throw new Error(`read probe: cannot allocate ${n} bytes`);
  x.wlmjs_probe_fill(buf, n);
  x.wlmjs_probe_read(buf, n, 1); // untimed: first touch, tier-up
  return {
    measure(samples = 3) {
      const out = [];
      for (let i = 0; i < samples; i++) {
        const t0 = performance.now();
        x.wlmjs_probe_read(buf, n, reps);
        out.push((n * reps) / 1e9 / ((performance.now() - t0) / 1000));
      }
      return out;
    },
    close() { x.wlmjs_free(buf); },
  };
}

/** Child mode: one file, one thread count; prints the measurement as JSON on stdout. */
async function probe(file, threads, nCtx = REAL_CTX) {
  const { createEngine } = await import('../js/wasmlm.js');
  const engine = await createEngine({ threads });
  const t0 = performance.now();
  const info = await engine.load({ model: file, nCtx });
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
    file: path.basename(file), fileBytes: fs.statSync(file).size, build: info.build, kvType: info.kvType, nCtx: info.nCtx, threads, loadMs, prefillTokPerSec,
    decodeTokPerSec: r.decodeTokensPerSec, nGenerated: r.nGenerated, weightBytes: info.weightBytes,
    wasmMemoryBytes: engine.wasmMemoryBytes, rssAfterLoad, maxRssBytes: process.resourceUsage().maxRSS * 1024,
  };
  await engine.free();
  return out;
}

function runChild(file, threads, nCtx) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [fileURLToPath(import.meta.url), '--probe', file, '--threads', String(threads), '--ctx', String(nCtx)],
      { stdio: ['ignore', 'pipe', 'inherit'] });
    let s = '';
    child.stdout.on('data', (d) => { s += d; });
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(JSON.parse(s)) : reject(new Error(`probe of ${file} exited with ${code}`))));
  });
}

const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[s.length >> 1]; };

/** The rows: one per (shape, type, threads), medians over `runs` child processes. */
export async function benchRealShapes({ shapes = realShapeSet('12'), types = ['Q8_0', 'Q4_K_M'], runs = 1, threads = [1, 2] } = {}) {
  const rows = [];
  for (const shape of shapes) {
    for (const type of types) {
      if (realNoFit(shape, type)) { log(`  ${shape} ${type}: skipped: ${realNoFit(shape, type)}`); continue; }
      const f = ensureRealGguf(shape, type);
      for (const t of threads) {
        const rs = [];
        for (let i = 0; i < runs; i++) rs.push(await runChild(f.path, t, f.nCtx));
        const row = {
          kind: 'realShape', arch: f.arch, shape, type, nCtx: f.nCtx, threads: t, runs, fileBytes: f.bytes, loadavg: os.loadavg(),
          loadMs: median(rs.map((r) => r.loadMs)), prefillTokPerSec: median(rs.map((r) => r.prefillTokPerSec)),
          decodeTokPerSec: median(rs.map((r) => r.decodeTokPerSec)), maxRssBytes: Math.max(...rs.map((r) => r.maxRssBytes)),
          wasmMemoryBytes: rs[0].wasmMemoryBytes, weightBytes: rs[0].weightBytes, // read per token: a mixture's active bytes
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
  const lines = [`Published shapes (synthetic, context ${REAL_CTX}; ${PROMPT_TOKENS}-token prefill, ${DECODE_TOKENS}-token greedy decode)`, '',
    '| arch | shape | type | threads | file MB | load ms | prefill tok/s | decode tok/s | peak RSS MB | RSS / file |',
    '|---|---|---|---|---|---|---|---|---|---|'];
  for (const r of rows) {
    lines.push(`| ${r.arch ?? 'llama'} | ${r.shape} | ${r.type} | ${r.threads} | ${mb(r.fileBytes)} | ${r.loadMs.toFixed(0)} | ${r.prefillTokPerSec.toFixed(1)} | ` +
      `${r.decodeTokPerSec.toFixed(1)} | ${mb(r.maxRssBytes)} | ${(r.maxRssBytes / r.fileBytes).toFixed(2)} |`);
  }
  return lines.join('\n');
}

export function parseRealArgs(argv) {
  const o = { shapes: null, types: ['Q8_0', 'Q4_K_M'], runs: 1, set: '12', phi: false };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--shapes') o.shapes = argv[++i].split(',');
    else if (argv[i] === '--set') o.set = argv[++i];
    else if (argv[i] === '--phi') o.phi = true;
    else if (argv[i] === '--types') o.types = argv[++i].split(',').map((t) => t.toUpperCase());
    else if (argv[i] === '--runs') o.runs = Number(argv[++i]);
    else if (argv[i] === '--probe') o.probe = argv[++i];
    else if (argv[i] === '--threads') o.threads = argv[++i].split(',').map(Number); // e.g. 1,2
    else if (argv[i] === '--ctx') o.ctx = Number(argv[++i]);
    else throw new Error(`unknown argument ${argv[i]}`);
  }
  o.shapes ??= realShapeSet(o.set, { phi: o.phi });
  for (const s of o.shapes) if (!REAL_SHAPES.includes(s)) throw new Error(`unknown shape ${s} (${REAL_SHAPES.join(', ')})`);
  for (const t of o.types) if (!REAL_TYPES.includes(t)) throw new Error(`unknown type ${t} (${REAL_TYPES.join(', ')})`);
  return o;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const o = parseRealArgs(process.argv.slice(2));
  if (o.probe) process.stdout.write(JSON.stringify(await probe(o.probe, o.threads?.[0] ?? 1, o.ctx ?? REAL_CTX)));
  else {
    const rows = await benchRealShapes(o);
    fs.mkdirSync(path.join(HERE, 'out'), { recursive: true });
    fs.writeFileSync(path.join(HERE, 'out/real-shapes.json'), `${JSON.stringify(rows, null, 2)}\n`);
    console.log(renderRealShapes(rows));
  }
}
