// Batched decoding and batched prefill (issue 4), measured on the raw wasm ABI so that only the
// engine is timed: no tokenizer, no sampler, no JS streaming.
//
//   node bench/batch.mjs [--quick] [--json] [--shapes stories15M,stories110M] [--scalar] [--threads N]
//
// For each shape (a synthetic llama2.c checkpoint with the real shape, tools/synth.mjs):
// - decode throughput at batch 1, 4 and 16: B sequences, each prefilled with 8 tokens, then
//   `steps` forward passes of wlm_eval_batch with one token per sequence and logits for every
//   entry; tokens/s = B × steps / time. Goal (issue 4): batch 16 >= 4 × batch 1.
// - prefill of a 128-token prompt in one wlm_eval_batch vs decode (one token per call) right
//   after it. Goal: prefill tokens/s >= 3 × decode tokens/s.
// Rounds alternate the batch sizes (1, 4, 16, 1, 4, 16, ...) and report medians, because this
// 2-vCPU machine's speed drifts within seconds (PERF-NOTES.md).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { SHAPES, fileBytes, writeSyntheticModel } from '../tools/synth.mjs';
import { sharedMemory, startThreads, stopThreads } from '../js/runtime/threads.js';
import { relaxedSupport } from '../js/runtime/wasm.js';
import { ensureGguf } from './models.mjs';

/** --build's default: the build createEngine would pick here (relaxed where the runtime passes
 *  the probe and dist/ has it). */
export function defaultBuild() {
  return relaxedSupport().ok && fs.existsSync(path.join(REPO, 'dist', 'wasmlm-relaxed.wasm')) ? 'relaxed' : 'simd128';
}

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '..');
const OUT_DIR = path.join(HERE, 'out');

const median = (a) => { const s = [...a].sort((x, y) => x - y); return s[s.length >> 1]; };

async function ensureModel(shape) {
  const file = path.join(OUT_DIR, `${shape}.bin`);
  if (!(fs.existsSync(file) && fs.statSync(file).size === fileBytes(SHAPES[shape]))) {
    fs.mkdirSync(OUT_DIR, { recursive: true });
    console.error(`writing ${path.relative(REPO, file)} (synthetic ${shape})`);
    await writeSyntheticModel({ shape, out: file, seed: 1 });
  }
  return file;
}

/** One module instance with one model and a context for `nSeq` sequences; with threads > 1 the
 *  threaded module and a pool of that many threads (js/runtime/threads.js). */
async function open(file, { simd = true, nSeq = 16, nCtx = 512, threads = 1, build = 'simd128' } = {}) {
  const stem = build === 'relaxed' ? 'wasmlm-relaxed' : 'wasmlm';
  const name = !simd ? 'wasmlm-scalar.wasm' : threads > 1 ? `${stem}-mt.wasm` : `${stem}.wasm`;
  const module = await WebAssembly.compile(fs.readFileSync(path.join(REPO, 'dist', name)));
  const memory = threads > 1 ? sharedMemory() : undefined;
  const instance = await WebAssembly.instantiate(module, { env: { memory, emscripten_notify_memory_growth() {} } });
  const x = memory ? { ...instance.exports, memory } : instance.exports;
  x._initialize();
  const bytes = fs.readFileSync(file);
  const ptr = x.wlmjs_malloc(bytes.length);
  new Uint8Array(x.memory.buffer).set(bytes, ptr);
  const slot = x.wlmjs_malloc(8);
  let rc = x.wlmjs_model_load(ptr, bytes.length, slot);
  if (rc !== 0) throw new Error(`model load: status ${rc}`);
  const model = new Int32Array(x.memory.buffer)[slot >> 2];
  rc = x.wlmjs_context_new(model, nCtx, 1, 1, nSeq, 1 /* WLM_KV_F16, the default */, 0 /* fused dots */, -1 /* batches too */, slot);
  if (rc !== 0) throw new Error(`context: status ${rc}`);
  const ctx = new Int32Array(x.memory.buffer)[slot >> 2];
  const pool = threads > 1 ? await startThreads(x, module, threads) : null;
  if (pool && x.wlm_context_set_threadpool(ctx, pool.pool) !== 0) throw new Error('wlm_context_set_threadpool failed');
  const cap = 1024;
  const tok = x.wlmjs_malloc(4 * cap), seq = x.wlmjs_malloc(4 * cap), want = x.wlmjs_malloc(cap);
  const vocab = x.wlmjs_model_info(model, 5);
  const eval_ = (toks, seqs, wants) => {
    new Int32Array(x.memory.buffer, tok, toks.length).set(toks);
    new Int32Array(x.memory.buffer, seq, seqs.length).set(seqs);
    new Uint8Array(x.memory.buffer, want, wants.length).set(wants);
    const r = x.wlm_eval_batch(ctx, tok, seq, want, toks.length);
    if (r !== 0) throw new Error(`eval: status ${r}`);
  };
  const close = () => {
    x.wlm_context_free(ctx);
    if (pool) stopThreads(x, pool);
  };
  return { x, ctx, vocab, eval: eval_, reset: () => x.wlm_context_reset(ctx), close };
}

const id = (vocab, k) => 1 + (k * 7919) % (vocab - 1);

function decodeRate(e, B, steps) {
  e.reset();
  const pt = [], ps = [];
  for (let s = 0; s < B; s++) for (let i = 0; i < 8; i++) { pt.push(id(e.vocab, s * 31 + i)); ps.push(s); }
  e.eval(pt, ps, pt.map(() => 0));
  const seqs = Array.from({ length: B }, (_, s) => s), wants = seqs.map(() => 1);
  const t0 = performance.now();
  for (let k = 0; k < steps; k++) e.eval(seqs.map((s) => id(e.vocab, 1000 + k * 17 + s)), seqs, wants);
  return (B * steps) / ((performance.now() - t0) / 1000);
}

function prefillVsDecode(e, n, decodeSteps) {
  e.reset();
  const prompt = Array.from({ length: n }, (_, i) => id(e.vocab, i));
  const zeros = prompt.map(() => 0);
  const wants = prompt.map((_, i) => (i === n - 1 ? 1 : 0));
  let t0 = performance.now();
  e.eval(prompt, zeros, wants);
  const prefill = n / ((performance.now() - t0) / 1000);
  t0 = performance.now();
  for (let k = 0; k < decodeSteps; k++) e.eval([id(e.vocab, 5000 + k)], [0], [1]);
  const decode = decodeSteps / ((performance.now() - t0) / 1000);
  return { prefill, decode };
}

export async function benchBatch({ quick = false, shapes = ['stories15M', 'stories110M'], simd = true, threads = 1,
  build = defaultBuild(), type = 'F32' } = {}) {
  const rows = [];
  for (const shape of shapes) {
    const file = type === 'F32' ? await ensureModel(shape) : (await ensureGguf(shape, type)).path;
    const big = SHAPES[shape].dim >= 768;
    const rounds = quick ? 2 : 4;
    const steps = quick ? 4 : big ? 8 : 24;
    const e = await open(file, { simd, threads, build });
    decodeRate(e, 4, 2); // warm-up: V8 tiers the kernels up
    const rates = { 1: [], 4: [], 16: [] };
    for (let r = 0; r < rounds; r++) for (const B of [1, 4, 16]) rates[B].push(decodeRate(e, B, steps));
    const pd = [];
    for (let r = 0; r < rounds; r++) pd.push(prefillVsDecode(e, 128, quick ? 4 : 16));
    e.close();
    const row = {
      kind: 'batch', shape, type, build: simd ? build : 'scalar', simd, threads, rounds, steps,
      decodeTokPerSec: { 1: median(rates[1]), 4: median(rates[4]), 16: median(rates[16]) },
      runs: rates,
      prefill128TokPerSec: median(pd.map((p) => p.prefill)),
      decodeAfterPrefillTokPerSec: median(pd.map((p) => p.decode)),
    };
    row.batch16OverBatch1 = row.decodeTokPerSec[16] / row.decodeTokPerSec[1];
    row.batch4OverBatch1 = row.decodeTokPerSec[4] / row.decodeTokPerSec[1];
    row.prefillOverDecode = row.prefill128TokPerSec / row.decodeAfterPrefillTokPerSec;
    row.goals = { batch16x4: row.batch16OverBatch1 >= 4, prefillx3: row.prefillOverDecode >= 3 };
    rows.push(row);
    console.error(`${shape} ${type} ${build}${threads > 1 ? ` (${threads} threads)` : ''}: batch 1/4/16 ${[1, 4, 16].map((b) => row.decodeTokPerSec[b].toFixed(1)).join(' / ')} tok/s` +
      ` (16/1 = ${row.batch16OverBatch1.toFixed(2)}x); prefill 128 ${row.prefill128TokPerSec.toFixed(1)} vs decode` +
      ` ${row.decodeAfterPrefillTokPerSec.toFixed(1)} tok/s (${row.prefillOverDecode.toFixed(2)}x)`);
  }
  return rows;
}

export function renderBatch(rows) {
  const lines = ['Batched decode (wlm_eval_batch, one token per sequence, logits for all) and batched prefill (128 tokens in one call)',
    'shape         threads  batch 1   batch 4  batch 16  16/1   goal>=4  prefill128  decode  prefill/decode  goal>=3'];
  for (const r of rows) {
    const d = r.decodeTokPerSec;
    lines.push(`${`${r.shape} ${r.type ?? 'F32'} ${r.build ?? 'simd128'}`.padEnd(13)} ${String(r.simd ? r.threads ?? 1 : 'scalar').padEnd(8)} ${d[1].toFixed(1).padStart(7)} ${d[4].toFixed(1).padStart(9)} ${d[16].toFixed(1).padStart(9)}` +
      `  ${r.batch16OverBatch1.toFixed(2).padStart(5)}  ${(r.goals.batch16x4 ? 'met' : 'NOT met').padEnd(7)}  ${r.prefill128TokPerSec.toFixed(1).padStart(10)}` +
      `  ${r.decodeAfterPrefillTokPerSec.toFixed(1).padStart(6)}  ${r.prefillOverDecode.toFixed(2).padStart(14)}  ${r.goals.prefillx3 ? 'met' : 'NOT met'}`);
  }
  return lines.join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const argv = process.argv.slice(2);
  const opt = (name) => { const i = argv.indexOf(name); return i >= 0 ? argv[i + 1] : undefined; };
  const rows = await benchBatch({
    quick: argv.includes('--quick'),
    shapes: (opt('--shapes') ?? 'stories15M,stories110M').split(','),
    simd: !argv.includes('--scalar'),
    threads: Number(opt('--threads') ?? 1),
    build: opt('--build') ?? defaultBuild(),
    type: (opt('--type') ?? 'F32').toUpperCase(),
  });
  const report = { date: new Date().toISOString(), node: process.version, cpus: os.cpus().length,
    loadavg: os.loadavg(), results: rows };
  fs.mkdirSync(OUT_DIR, { recursive: true });
  fs.writeFileSync(path.join(OUT_DIR, 'batch.json'), `${JSON.stringify(report, null, 2)}\n`);
  if (argv.includes('--json')) process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  else console.log(renderBatch(rows));
}
