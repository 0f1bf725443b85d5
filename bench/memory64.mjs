// bench/memory64.mjs — issue 26's rows: models past wasm32's 4 GB in the memory64 (wasm64)
// modules, and wasm64 against wasm32 on a model both can hold. Files: the published shapes of
// Phi-3.5-mini Q8_0 (4.06 GB) and Llama-3.1-8B Q4_K_M (4.9 GB), and Phi-3.5-mini Q4_K_M (2.39
// GB, the model both hold), written by tools/synth_gguf.mjs' writeHeaderOnly: the real header,
// vectors and tensor types, all-zero matrices in a sparse file (seconds to write, no disk; the
// quantized kernels' speed does not depend on the values: integer dot products, no branches on
// data). Each measurement is a fresh Node 24 process (child mode below): load time, prefill
// tok/s (a 64-token prompt, one evalTokens call), decode tok/s (greedy, --tokens new tokens),
// peak resident memory (getrusage's maxRSS: Node itself included, ~50 MB) against the file and
// against weights + KV cache (the KV cache of nCtx positions as allocated: one calloc, whose
// pages become resident as positions are written), and which module ran (ModelInfo.memory64).
//
//   npm run bench:memory64 -- [--rows big,ab,ab-small] [--threads 1,2] [--tokens 16] [--runs 1] [--json]
//
// (node bench/memory64.mjs; where this Node has no memory64 it re-runs itself in .tools/node24.)
//
// --rows big: Phi-3.5-mini Q8_0 and Llama-3.1-8B Q4_K_M at nCtx 4096 (wasm64, chosen by load());
// --rows ab: Phi-3.5-mini Q4_K_M at nCtx 2048 with memory64 true and false, alternating;
// --rows ab-small: the same for Llama-3.2-1B Q4_K_M (0.8 GB: more runs in the same time).
// Files are kept in bench/out/gguf-m64/ (sparse: `du` shows a few MB).

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { writeHeaderOnly } from '../tools/synth_gguf.mjs';
import { PARAGRAPH } from './models.mjs';
import { rerunUnderNode24, runProbe } from './child.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const DIR = path.join(HERE, 'out/gguf-m64');
const PROMPT_TOKENS = 64;
const log = (m) => process.stderr.write(`${m}\n`);

const FILES = {
  'phi3.5-mini-Q8_0': { arch: 'phi3', shape: 'phi3.5-mini', type: 'Q8_0', name: 'Phi-3.5-mini Q8_0' },
  'phi3.5-mini-Q4_K_M': { arch: 'phi3', shape: 'phi3.5-mini', type: 'Q4_K_M', name: 'Phi-3.5-mini Q4_K_M' },
  'llama3.1-8b-Q4_K_M': { arch: 'llama', shape: 'llama3.1-8b', type: 'Q4_K_M', name: 'Llama-3.1-8B Q4_K_M' },
  'llama3.2-1b-Q4_K_M': { arch: 'llama', shape: 'llama3.2-1b', type: 'Q4_K_M', name: 'Llama-3.2-1B Q4_K_M' },
};
const ROWS = {
  big: [['phi3.5-mini-Q8_0', 4096, 'auto'], ['llama3.1-8b-Q4_K_M', 4096, 'auto']],
  ab: [['phi3.5-mini-Q4_K_M', 2048, false], ['phi3.5-mini-Q4_K_M', 2048, true]],
  'ab-small': [['llama3.2-1b-Q4_K_M', 2048, false], ['llama3.2-1b-Q4_K_M', 2048, true]],
};

function ensureFile(key) {
  const f = FILES[key];
  const file = path.join(DIR, `${key}-zero.gguf`);
  if (!fs.existsSync(file)) {
    fs.mkdirSync(DIR, { recursive: true });
    log(`writing ${path.relative(process.cwd(), file)} (sparse) ...`);
    writeHeaderOnly(f.arch, f.shape, file, { type: f.type });
  }
  return file;
}

/** Child mode: one file, one configuration; prints the measurement as JSON on stdout. */
async function probe({ file, threads, nCtx, memory64, tokens }) {
  const { createEngine } = await import('../js/wasmlm.js');
  const engine = await createEngine({ threads, memory64 });
  const t0 = performance.now();
  const info = await engine.load({ model: file, nCtx });
  const loadMs = performance.now() - t0;
  const rssAfterLoad = process.memoryUsage().rss;
  const ids = await engine.tokenize(PARAGRAPH, { bos: true });
  const prompt = Int32Array.from(ids.subarray(0, PROMPT_TOKENS));
  await engine.evalTokens(prompt.subarray(0, 4)); // warm-up: first touch of the code paths
  await engine.reset();
  const p0 = performance.now();
  await engine.evalTokens(prompt);
  const prefillTokPerSec = (prompt.length * 1000) / (performance.now() - p0);
  await engine.reset();
  const r = await engine.complete(PARAGRAPH.slice(0, 120), { temperature: 0, maxTokens: tokens, seed: 1 });
  const kvBytes = 2 * info.nLayers * Math.ceil(info.nCtx / 16) * 16 * info.nKvHeads * (info.dim / info.nHeads) * 2;
  const out = {
    file: path.basename(file), fileBytes: fs.statSync(file).size, memory64: info.memory64, build: info.build,
    nCtx: info.nCtx, threads: engine.threads, loadMs, prefillTokPerSec, decodeTokPerSec: r.decodeTokensPerSec,
    nGenerated: r.nGenerated, contextBytes: info.contextBytes, kvBytes, wasmMemoryBytes: engine.wasmMemoryBytes,
    rssAfterLoad, maxRssBytes: process.resourceUsage().maxRSS * 1024,
  };
  await engine.free();
  return out;
}

const runChild = (args) => runProbe(import.meta.url, args);

const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[s.length >> 1]; };

export async function benchMemory64({ rows = ['big', 'ab'], threads = [1, 2], tokens = 16, runs = 1 } = {}) {
  const out = [];
  for (const set of rows) {
    for (const t of threads) {
      // a set's configurations alternate within each run (A B A B), so both see the same load
      const results = ROWS[set].map(() => []);
      for (let i = 0; i < runs; i++) {
        for (const [k, [key, nCtx, memory64]] of ROWS[set].entries()) {
          results[k].push(await runChild({ file: ensureFile(key), threads: t, nCtx, memory64, tokens }));
        }
      }
      for (const [k, [key, nCtx, memory64]] of ROWS[set].entries()) {
        const rs = results[k];
        const row = {
          kind: 'memory64', set, model: FILES[key].name, option: memory64, memory64: rs[0].memory64, nCtx, threads: t,
          runs, loadavg: os.loadavg(), fileBytes: rs[0].fileBytes, kvBytes: rs[0].kvBytes,
          loadMs: median(rs.map((r) => r.loadMs)), prefillTokPerSec: median(rs.map((r) => r.prefillTokPerSec)),
          decodeTokPerSec: median(rs.map((r) => r.decodeTokPerSec)), maxRssBytes: Math.max(...rs.map((r) => r.maxRssBytes)),
          rssAfterLoad: Math.max(...rs.map((r) => r.rssAfterLoad)), wasmMemoryBytes: rs[0].wasmMemoryBytes,
        };
        log(`  ${row.model} nCtx ${nCtx} memory64 ${memory64} (ran ${row.memory64 ? 'wasm64' : 'wasm32'}) ${t} thread(s): load ${row.loadMs.toFixed(0)} ms, ` +
          `prefill ${row.prefillTokPerSec.toFixed(2)} tok/s, decode ${row.decodeTokPerSec.toFixed(2)} tok/s, peak RSS ${(row.maxRssBytes / 1e9).toFixed(2)} GB ` +
          `= ${(row.maxRssBytes / row.fileBytes).toFixed(3)} x file, ${(row.maxRssBytes / (row.fileBytes + row.kvBytes)).toFixed(3)} x (file + KV); load avg ${row.loadavg[0].toFixed(1)}`);
        out.push(row);
      }
    }
  }
  return out;
}

export function renderMemory64(rows) {
  const gb = (b) => (b / 1e9).toFixed(2);
  const lines = ['| model | nCtx | module | threads | file GB | KV GB | load s | prefill tok/s | decode tok/s | peak RSS GB | RSS / (file + KV) |',
    '|---|---|---|---|---|---|---|---|---|---|---|'];
  for (const r of rows) {
    lines.push(`| ${r.model} | ${r.nCtx} | ${r.memory64 ? 'wasm64' : 'wasm32'}${r.option === 'auto' ? ' (auto)' : ''} | ${r.threads} | ${gb(r.fileBytes)} | ` +
      `${gb(r.kvBytes)} | ${(r.loadMs / 1e3).toFixed(1)} | ${r.prefillTokPerSec.toFixed(2)} | ${r.decodeTokPerSec.toFixed(2)} | ` +
      `${gb(r.maxRssBytes)} | ${(r.maxRssBytes / (r.fileBytes + r.kvBytes)).toFixed(3)} |`);
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
      if (a[i] === '--rows') o.rows = a[++i].split(',');
      else if (a[i] === '--threads') o.threads = a[++i].split(',').map(Number);
      else if (a[i] === '--tokens') o.tokens = Number(a[++i]);
      else if (a[i] === '--runs') o.runs = Number(a[++i]);
      else if (a[i] === '--json') json = true;
      else throw new Error(`unknown argument ${a[i]}`);
    }
    for (const r of o.rows ?? []) if (!ROWS[r]) throw new Error(`unknown rows ${r} (${Object.keys(ROWS).join(', ')})`);
    const rows = await benchMemory64(o);
    fs.mkdirSync(path.join(HERE, 'out'), { recursive: true });
    fs.writeFileSync(path.join(HERE, 'out/memory64.json'), `${JSON.stringify(rows, null, 2)}\n`);
    console.log(json ? JSON.stringify(rows) : renderMemory64(rows));
  }
}
