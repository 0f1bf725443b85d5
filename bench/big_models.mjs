// bench/big_models.mjs — issue 43's "big files": whole published mixtures of experts past wasm32's
// 4 GB, loaded (streamed) into the memory64 module, with the goal peak memory ≤ weights + KV
// cache + 10 %, and the decode speed on 2 threads (goal: gpt-oss-20b ≥ 3 tok/s).
// Files: gpt-oss-20b with its experts in MXFP4 and the rest Q8_0 / F32, as the published
// gpt-oss-20b-mxfp4.gguf (12.11 GB here, 12.1 GB published), and Qwen3-30B-A3B in llama.cpp's
// Q3_K_M mix (14.71 GB, the size of the published Q3_K_M files; inside V8's 16 GiB for memory64),
// written by tools/synth_gguf.mjs' writeRandomCodes: the published header, tensor names, shapes
// and types, every quantized block random codes under realistic scales (a speed and memory
// fixture: ~2 min to write where quantizing 21–30 B parameters would take hours; the kernels'
// speed does not depend on the values, and the forward pass stays finite, which the child
// checks). Each measurement is a fresh Node 24 process (child mode below), so its peak resident
// memory (getrusage's maxRSS, Node itself included) is that model's alone.
//
//   node bench/big_models.mjs [--models gpt-oss-20b,qwen3-30b-a3b] [--threads 2|auto,…] [--ctx 4096]
//        [--tokens 16] [--prompt 32] [--runs 1] [--clean] [--json] [--tiny]
//
// Rows (JSON, also written to bench/out/big_models.json): fileBytes; weightBytes (the tensors'
// data, from the header); kvBytes (the KV cache of nCtx positions, js/runtime/memory64.js modelBytes —
// the estimate load() sizes the memory with, within 1 % of the context's bytes — less a hybrid's
// recurrent states, which it counts beside the cache) and
// kvAllocatedBytes (the engine's KV blocks after the run); wasmMemoryBytes; maxRssBytes and
// rssAfterLoad; peakGoalBytes = 1.1 × (weights + KV) and withinPeakGoal; memory64 (which module
// ran); finite (the prompt's logits are all finite); and, for a quiet machine only, loadMs,
// prefillTokPerSec (one evalTokens call of --prompt tokens) and decodeTokPerSec (greedy,
// --tokens new tokens), with decodeGoalTokPerSec where a goal is set (gpt-oss-20b, 2 threads;
// `auto`, the engine's own choice, is 2 on a 2-vCPU machine).
// Files are kept in bench/out/big/ (12 + 15 GB: check `df`), written on first use; --clean
// deletes each after its rows. --tiny: the same path on the tiny shapes (a check of the script).
// Needs ~16 GB of free memory for the Qwen row (`free -g`), one row at a time.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { writeRandomCodes } from '../tools/synth_gguf.mjs';
import { readGguf } from '../tools/vocab_gguf.mjs';
import { PARAGRAPH } from './models.mjs';
import { rerunUnderNode24, runProbe } from './child.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const BIG_DIR = path.join(HERE, 'out/big');
const log = (m) => process.stderr.write(`${m}\n`);
/** Peak resident memory allowed over weights + KV cache (issue 43). */
export const PEAK_SLACK = 0.10;

/** The models: synth_gguf arch/shape, the writer's target, and a decode goal (tok/s at 2 threads). */
export const BIG_MODELS = Object.freeze({
  'gpt-oss-20b': { arch: 'gpt-oss', shape: 'gpt-oss-20b', type: 'MXFP4_MOE', name: 'gpt-oss-20b MXFP4 (experts) + Q8_0', decodeGoal: { threads: 2, tokPerSec: 3 } },
  'qwen3-30b-a3b': { arch: 'qwen3moe', shape: 'qwen3-30b-a3b', type: 'Q3_K_M', name: 'Qwen3-30B-A3B Q3_K_M' },
  // --tiny: the script's own check, the same code path in wasm32 or memory64 (memory64: true)
  'gpt-oss-tiny': { arch: 'gpt-oss', shape: 'tiny', type: 'MXFP4_MOE', name: 'gpt-oss tiny MXFP4', tiny: true },
  'qwen3moe-tiny': { arch: 'qwen3moe', shape: 'tiny', type: 'Q3_K_M', name: 'qwen3moe tiny Q3_K_M', tiny: true },
});

export function bigFile(key, dir = BIG_DIR) {
  const m = BIG_MODELS[key];
  return path.join(dir, `${m.arch}-${m.shape}-${m.type}-random.gguf`);
}

/** The file of `key`, written by writeRandomCodes if missing. */
export function ensureBigFile(key, dir = BIG_DIR) {
  const m = BIG_MODELS[key];
  const file = bigFile(key, dir);
  if (!fs.existsSync(file)) {
    log(`writing ${path.relative(process.cwd(), file)} (random codes) ...`);
    const t0 = Date.now();
    writeRandomCodes(m.arch, m.shape, file, { type: m.type });
    log(`  ${(fs.statSync(file).size / 1e9).toFixed(2)} GB in ${((Date.now() - t0) / 1e3).toFixed(0)} s`);
  }
  return file;
}

/** Bytes of tensor data a GGUF's header declares (without the alignment padding). */
export function weightBytesOf(file) {
  const BYTES = { 0: [4, 1], 1: [2, 1], 30: [2, 1], 2: [18, 32], 3: [20, 32], 6: [22, 32], 7: [24, 32], 8: [34, 32],
    10: [84, 256], 11: [110, 256], 12: [144, 256], 13: [176, 256], 14: [210, 256], 39: [17, 32] };
  let n = 0;
  for (const t of readGguf(file).tensors) {
    const b = BYTES[t.type];
    if (!b) throw new Error(`${file}: tensor ${t.name} of type ${t.type}: size unknown here`);
    n += (t.ne.reduce((a, c) => a * c, 1) / b[1]) * b[0];
  }
  return n;
}

/** Child mode: one file, one configuration; prints the measurement as JSON on stdout. */
async function probe({ file, threads, nCtx, tokens, promptTokens, memory64 }) {
  const { createEngine } = await import('../js/wasmlm.js');
  const { peekModelHeader, modelBytes } = await import('../js/runtime/memory64.js');
  const engine = await createEngine({ ...(threads === 'auto' ? {} : { threads }), memory64 });
  await engine.threadsReady;
  const t0 = performance.now();
  const info = await engine.load({ model: file, nCtx });
  const loadMs = performance.now() - t0;
  const rssAfterLoad = process.memoryUsage().rss;
  const maxRssAfterLoad = process.resourceUsage().maxRSS * 1024;
  // the KV estimate load() sized the memory with (the header read again: a few MB, after the peak
  // of the load was taken above)
  const fd = fs.openSync(file, 'r');
  const peek = async (n) => { const b = Buffer.alloc(n); return b.subarray(0, fs.readSync(fd, b, 0, n, 0)); };
  const h = await peekModelHeader(peek);
  fs.closeSync(fd);
  const need = modelBytes(fs.statSync(file).size, h, { nCtx: info.nCtx, threads: engine.threads });
  const ids = await engine.tokenize(PARAGRAPH, { bos: true });
  const prompt = Int32Array.from(ids.subarray(0, promptTokens));
  const p0 = performance.now();
  const logits = await engine.evalTokens(prompt);
  const prefillTokPerSec = (prompt.length * 1000) / (performance.now() - p0);
  const finite = logits.every(Number.isFinite);
  await engine.reset();
  const r = await engine.complete(PARAGRAPH.slice(0, 120), { temperature: 0, maxTokens: tokens, seed: 1 });
  const kv = await engine.kvStats();
  const out = {
    memory64: info.memory64, build: info.build, nCtx: info.nCtx, threads: engine.threads, loadMs,
    prefillTokPerSec, decodeTokPerSec: r.decodeTokensPerSec, nGenerated: r.nGenerated, finite,
    kvBytes: need.kv - (need.state ?? 0), kvAllocatedBytes: kv.blockBytes * kv.blocksAllocated, contextBytes: kv.contextBytes,
    wasmMemoryBytes: kv.wasmMemoryBytes, rssAfterLoad, maxRssAfterLoad, maxRssBytes: process.resourceUsage().maxRSS * 1024,
  };
  await engine.free();
  return out;
}

const runChild = (args) => runProbe(import.meta.url, args);

const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[s.length >> 1]; };

/**
 * The rows: per model and thread count, `runs` fresh processes (medians of the speeds, the
 * largest peak). `dir`: where the files are kept; `clean`: delete each file after its rows.
 */
export async function benchBigModels({ models = ['gpt-oss-20b', 'qwen3-30b-a3b'], threads = [2], nCtx = 4096, tokens = 16,
  promptTokens = 32, runs = 1, clean = false, dir = BIG_DIR, memory64 = 'auto' } = {}) {
  const out = [];
  for (const key of models) {
    const m = BIG_MODELS[key];
    if (!m) throw new Error(`unknown model ${key} (${Object.keys(BIG_MODELS).join(', ')})`);
    const file = ensureBigFile(key, dir);
    const fileBytes = fs.statSync(file).size, weightBytes = weightBytesOf(file);
    try {
      for (const t of threads) {
        const rs = [];
        for (let i = 0; i < runs; i++) rs.push(await runChild({ file, threads: t, nCtx, tokens, promptTokens, memory64 }));
        const r0 = rs[0];
        const maxRssBytes = Math.max(...rs.map((r) => r.maxRssBytes));
        const peakGoalBytes = (1 + PEAK_SLACK) * (weightBytes + r0.kvBytes);
        const row = {
          kind: 'big-models', model: m.name, key, file: path.relative(process.cwd(), file), type: m.type,
          fixture: 'random codes', memory64: r0.memory64, build: r0.build, nCtx: r0.nCtx, threads: r0.threads,
          runs, loadavg: os.loadavg(), fileBytes, weightBytes, kvBytes: r0.kvBytes, kvAllocatedBytes: r0.kvAllocatedBytes,
          contextBytes: r0.contextBytes, wasmMemoryBytes: r0.wasmMemoryBytes,
          rssAfterLoad: Math.max(...rs.map((r) => r.rssAfterLoad)), maxRssAfterLoad: Math.max(...rs.map((r) => r.maxRssAfterLoad)),
          maxRssBytes, peakGoalBytes, peakOverWeightsKv: maxRssBytes / (weightBytes + r0.kvBytes), withinPeakGoal: maxRssBytes <= peakGoalBytes,
          finite: rs.every((r) => r.finite), nGenerated: r0.nGenerated,
          loadMs: median(rs.map((r) => r.loadMs)), prefillTokPerSec: median(rs.map((r) => r.prefillTokPerSec)),
          decodeTokPerSec: median(rs.map((r) => r.decodeTokPerSec)),
        };
        if (m.decodeGoal && m.decodeGoal.threads === row.threads) {
          row.decodeGoalTokPerSec = m.decodeGoal.tokPerSec;
          row.meetsDecodeGoal = row.decodeTokPerSec >= m.decodeGoal.tokPerSec;
        }
        log(`  ${row.model} (${row.memory64 ? 'wasm64' : 'wasm32'}, nCtx ${row.nCtx}, ${row.threads} thread(s)): file ${(fileBytes / 1e9).toFixed(2)} GB, ` +
          `peak RSS ${(maxRssBytes / 1e9).toFixed(2)} GB = ${row.peakOverWeightsKv.toFixed(3)} x (weights + KV) ` +
          `${row.withinPeakGoal ? '<=' : '>'} ${1 + PEAK_SLACK}; load ${(row.loadMs / 1e3).toFixed(1)} s, ` +
          `decode ${row.decodeTokPerSec.toFixed(2)} tok/s; load avg ${row.loadavg[0].toFixed(1)}`);
        out.push(row);
      }
    } finally {
      if (clean) fs.rmSync(file, { force: true });
    }
  }
  return out;
}

export function renderBigModels(rows) {
  const gb = (b) => (b / 1e9).toFixed(2);
  const lines = ['| model | module | nCtx | threads | file GB | weights GB | KV GB | wasm memory GB | peak RSS GB | peak / (weights + KV) | ≤ 1.10 | load s | prefill tok/s | decode tok/s |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|'];
  for (const r of rows) {
    const goal = r.decodeGoalTokPerSec ? ` (goal ≥ ${r.decodeGoalTokPerSec}${r.meetsDecodeGoal ? ', met' : ', not met'})` : '';
    lines.push(`| ${r.model} | ${r.memory64 ? 'wasm64' : 'wasm32'} | ${r.nCtx} | ${r.threads} | ${gb(r.fileBytes)} | ${gb(r.weightBytes)} | ` +
      `${gb(r.kvBytes)} | ${gb(r.wasmMemoryBytes)} | ${gb(r.maxRssBytes)} | ${r.peakOverWeightsKv.toFixed(3)} | ${r.withinPeakGoal ? 'yes' : 'no'} | ` +
      `${(r.loadMs / 1e3).toFixed(1)} | ${r.prefillTokPerSec.toFixed(2)} | ${r.decodeTokPerSec.toFixed(2)}${goal} |`);
  }
  return lines.join('\n');
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const a = process.argv.slice(2);
  if (await rerunUnderNode24(import.meta.url, a)) {
    // this Node has no memory64: Node 24 runs the script, its exit status is ours
  } else if (a[0] === '--probe') {
    process.stdout.write(JSON.stringify(await probe(JSON.parse(a[1]))));
  } else {
    const o = {};
    let json = false;
    for (let i = 0; i < a.length; i++) {
      const v = () => { if (i + 1 >= a.length) throw new Error(`${a[i]} needs a value`); return a[++i]; };
      if (a[i] === '--models') o.models = v().split(',');
      else if (a[i] === '--threads') o.threads = v().split(',').map((t) => (t === 'auto' ? t : Number(t)));
      else if (a[i] === '--ctx') o.nCtx = Number(v());
      else if (a[i] === '--tokens') o.tokens = Number(v());
      else if (a[i] === '--prompt') o.promptTokens = Number(v());
      else if (a[i] === '--runs') o.runs = Number(v());
      else if (a[i] === '--clean') o.clean = true;
      else if (a[i] === '--json') json = true;
      else if (a[i] === '--tiny') { o.models = ['gpt-oss-tiny', 'qwen3moe-tiny']; o.memory64 = true; o.nCtx = 256; }
      else throw new Error(`unknown argument ${a[i]}`);
    }
    const rows = await benchBigModels(o);
    fs.mkdirSync(path.join(HERE, 'out'), { recursive: true });
    fs.writeFileSync(path.join(HERE, 'out/big_models.json'), `${JSON.stringify(rows, null, 2)}\n`);
    console.log(json ? JSON.stringify(rows) : renderBigModels(rows));
  }
}
