// bench/webgpu.mjs — the WebGPU backend's speed next to the CPU path on the same machine
// (`npm run bench -- --backend webgpu`, which bench/bench.mjs hands to this file): for each
// published shape of tools/synth_gguf.mjs (Qwen2.5-0.5B, Llama-3.2-1B, Phi-3.5-mini by default)
// in each type (Q4_K_M, Q8_0), prefill tokens/s (a 128-token prompt) and decode tokens/s
// (64 greedy tokens) on the GPU and on the CPU engine (every core, up to --threads), and decode
// as a share of the adapter's read bandwidth, measured here by a WGSL kernel that streams a
// 512 MiB buffer (bytes per token = the model's weight bytes: each decode step reads every
// weight once). Also each load's time and the wasm memory it left (wasm memory only grows: its
// peak): the GPU load streams a GGUF's weights to the GPU (--gpu-weights heap: the whole file
// through the wasm heap first, for comparison). Writes bench/out/webgpu.json; the table goes to
// stdout (--json: only the JSON).
//
//   npm run bench -- --backend webgpu [--shapes qwen2.5-0.5b,llama3.2-1b,phi3.5-mini]
//       [--types Q4_K_M,Q8_0] [--runs 3] [--threads N] [--no-cpu] [--nctx 2048] [--probe-mib 512] [--json]
//       [--gemm-only | --no-gemm] [--entries 32] [--gpu-weights stream|heap] [--load-only] [--profile]
//       [--spec K]
//   (--load-only: each load's time and wasm memory, no generation)
//   (--profile [--profile-depth N]: also each GPU row's decode step after an N-token prompt
//    (default 32) kernel by kernel: GPU timestamps around every
//    kernel (each in a compute pass of its own, one submission), ms per token by kind — matvec per
//    weight type, attention, norm, …, and '(between kernels)', the idle time from one kernel's end
//    to the next one's start — next to the plain step's wall ms; `gpuProfile` in the JSON)
//   (--spec K: also decode with prompt lookup, draft {ngram: 3, maxTokens: K}, on both backends:
//    tokens/s, and drafted / accepted / rounds — the synthetic weights' greedy text repeats
//    itself, so the acceptance is high and stated; `gpuSpec` / `cpuSpec` in the JSON)
//   (--shapes also takes ARCH/SHAPE of tools/synth_gguf.mjs, e.g. llama/tiny for a smoke run;
//    the mixtures of experts gpt-oss-20b-l2 (with --types MXFP4_MOE: the published layout),
//    qwen3-30b-a3b-l6 and lfm2-8b-a1b-l8 are named shapes, not run by default; their kernel
//    rows are the dense matrices of the shape's F, not the experts')
//
// In Node the GPU is Dawn's (the `webgpu` devDependency); without a GPU it runs on whatever
// adapter Dawn finds (SwiftShader: numbers that mean nothing, flagged in the report).
//
// Kernel rows (bench/webgpu_gemm.mjs; --gemm-only: these alone, --no-gemm: none): for each shape
// and type, one layer's attn_q, ffn_up and ffn_down times a chunk of --entries (32) activations
// through the tiled matrix-matrix kernel and the matrix-vector batch form, ms and GFLOP/s side
// by side (`prefillKernelRows` in the JSON); and the same matrices times one entry through the
// matrix-vector kernel, a 32-element sub-block an invocation step against one element, µs and
// weight GB/s (`decodeKernelRows`).

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createEngine } from '../js/wasmlm.js';
import { resolveShape, synthCached } from '../tools/synth_gguf.mjs';
import { describeAdapter } from '../js/backend/webgpu/device.js';
import { GPU_PROFILE } from '../js/backend/webgpu/forward.js';
import { decodeRows, gemmRows } from './webgpu_gemm.mjs';
import { nodeGpu as nodeGpuOf } from './_node_gpu.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const SHAPES = { 'qwen2.5-0.5b': 'qwen2', 'llama3.2-1b': 'llama', 'phi3.5-mini': 'phi3', 'qwen3-0.6b': 'qwen3', 'gemma3-1b': 'gemma3', gpt2: 'gpt2',
  // mixtures of experts, the published models' first blocks (tools/synth_gguf.mjs): weightBytes,
  // hence the bandwidth share, counts the k experts a token reads
  'gpt-oss-20b-l2': 'gpt-oss', 'qwen3-30b-a3b-l6': 'qwen3moe', 'lfm2-8b-a1b-l8': 'lfm2moe' };
const PROMPT_TOKENS = 128;
const DECODE_TOKENS = 64;

function parseArgs(argv) {
  const o = { shapes: ['qwen2.5-0.5b', 'llama3.2-1b', 'phi3.5-mini'], types: ['Q4_K_M', 'Q8_0'], runs: 3, profileDepth: 32,
    threads: Math.min(16, os.cpus().length), cpu: true, nCtx: 2048, json: false, probeMiB: 512,
    engine: true, gemm: true, entries: 32, gpuWeights: 'stream' };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--backend') { if (argv[++i] !== 'webgpu') throw new Error('--backend: only webgpu is benchmarked here'); }
    else if (a === '--shapes') o.shapes = argv[++i].split(',');
    else if (a === '--types') o.types = argv[++i].split(',').map((t) => t.toUpperCase());
    else if (a === '--runs') o.runs = Number(argv[++i]);
    else if (a === '--threads') o.threads = Number(argv[++i]);
    else if (a === '--nctx') o.nCtx = Number(argv[++i]);
    else if (a === '--no-cpu') o.cpu = false;
    else if (a === '--probe-mib') o.probeMiB = Number(argv[++i]);
    else if (a === '--json') o.json = true;
    else if (a === '--gemm-only') o.engine = false;
    else if (a === '--no-gemm') o.gemm = false;
    else if (a === '--entries') o.entries = Number(argv[++i]);
    else if (a === '--gpu-weights') o.gpuWeights = argv[++i];
    else if (a === '--load-only') o.loadOnly = true;
    else if (a === '--profile') o.profile = true;
    else if (a === '--profile-depth') o.profileDepth = Number(argv[++i]);
    else if (a === '--spec') o.spec = Number(argv[++i]);
    else throw new Error(`bench/webgpu.mjs: unknown argument ${a}`);
  }
  for (const s of o.shapes) {
    if (!SHAPES[s] && !/^[\w-]+\/[\w.-]+$/.test(s)) throw new Error(`--shapes: unknown shape ${s}; known: ${Object.keys(SHAPES).join(', ')}, or ARCH/SHAPE (llama/tiny)`);
  }
  return o;
}

/** The `webgpu` package's GPU (bench/_node_gpu.mjs); --profile: GPU timestamps at full resolution
 *  (Dawn rounds them coarsely by default). */
const nodeGpu = () => nodeGpuOf(process.argv.includes('--profile') ? ['disable-dawn-features=timestamp_quantization'] : []);

/** The adapter's read bandwidth (GB/s): a kernel summing a 512 MiB buffer as vec4<u32>, best of 5. */
async function readBandwidth(gpu, mib) {
  const adapter = await gpu.requestAdapter({ powerPreference: 'high-performance' });
  const info = describeAdapter(adapter);
  const device = await adapter.requestDevice({ requiredLimits: { maxBufferSize: adapter.limits.maxBufferSize, maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize } });
  const bytes = Math.min(mib * 2 ** 20, device.limits.maxStorageBufferBindingSize) & ~0xffff;
  const n4 = bytes / 16;
  const src = device.createBuffer({ size: bytes, usage: 128 });
  const out = device.createBuffer({ size: 4 * 65536, usage: 128 });
  const module = device.createShaderModule({ code: `
@group(0) @binding(0) var<storage, read> S: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> O: array<u32>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
  let stride = nw.x * 256u;
  var acc = vec4<u32>(0u);
  for (var i = g.x; i < ${n4}u; i += stride) { acc ^= S[i]; }
  if (acc.x == 0xdeadbeefu) { O[g.x % 65536u] = acc.y; }
}` });
  const pipe = device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: 'main' } });
  const bind = device.createBindGroup({ layout: pipe.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: src } }, { binding: 1, resource: { buffer: out } }] });
  let best = Infinity;
  for (let r = 0; r < 6; r++) {
    const t0 = performance.now();
    const enc = device.createCommandEncoder();
    const pass = enc.beginComputePass();
    pass.setPipeline(pipe);
    pass.setBindGroup(0, bind);
    for (let k = 0; k < 4; k++) pass.dispatchWorkgroups(1024);
    pass.end();
    device.queue.submit([enc.finish()]);
    await device.queue.onSubmittedWorkDone();
    if (r > 0) best = Math.min(best, performance.now() - t0);
  }
  device.destroy();
  return { adapter: info, gbPerSec: (4 * bytes) / (best / 1e3) / 1e9 };
}

/** Median of numbers. */
const median = (v) => { const s = [...v].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };

/**
 * Prefill and decode tokens/s of one engine on `file` (median of runs); with `spec` (K) also
 * decode with prompt lookup (draft {ngram: 3, maxTokens: K}): spec {decode, drafted, accepted,
 * rounds} (tokens/s median, the counts of the last run).
 */
async function measure(engine, file, nCtx, runs, loadOnly = false, spec = 0) {
  const t0 = performance.now();
  const info = await engine.load({ model: file, nCtx });
  const loadMs = performance.now() - t0;
  const wasmBytes = engine.wasmMemoryBytes; // the load's peak
  if (loadOnly) return { info, prefill: null, decode: null, loadMs, wasmBytes };
  const eos = info.eosId;
  const ids = [];
  const prompt = Array.from({ length: 400 }, (_, i) => `word${i % 37}`).join(' ');
  const pre = [], dec = [], sdec = [];
  let stats = null;
  for (let r = 0; r < runs; r++) {
    for (const draft of spec ? [undefined, { ngram: 3, maxTokens: spec }] : [undefined]) {
      await engine.reset();
      const params = { temperature: 0, maxTokens: DECODE_TOKENS, addBos: true, bannedTokens: eos >= 0 ? [eos] : [], cachePrompt: false, draft };
      const toks = await engine.tokenize(prompt);
      const text = await engine.detokenize(toks.slice(0, PROMPT_TOKENS));
      for await (const t of engine.generate(text, params)) if (t.id >= 0) ids.push(t.id);
      const res = engine.lastResult;
      if (draft) {
        sdec.push(res.decodeTokensPerSec);
        stats = { drafted: res.drafted, accepted: res.accepted, rounds: res.rounds };
      } else {
        pre.push(res.prefillTokensPerSec);
        dec.push(res.decodeTokensPerSec);
      }
    }
  }
  return { info, prefill: median(pre), decode: median(dec), loadMs, wasmBytes,
    spec: spec ? { decode: median(sdec), ...stats } : null };
}

/**
 * The decode step of `file` on the GPU kernel by kernel (GPU_PROFILE): a `depth`-token prompt
 * (--profile-depth, default 32), then 16 single-token steps; per kind {kind, msPerToken,
 * perToken (dispatches)}, largest first.
 */
async function profileDecode(gpu, file, nCtx, gpuWeights, depth = 32) {
  const map = new Map();
  const e = await createEngine({ backend: 'webgpu', gpu, threads: 1, gpuWeights, [GPU_PROFILE]: map });
  try {
    const info = await e.load({ model: file, nCtx });
    const vocab = info.vocabSize ?? 32000;
    const id = (k) => 3 + (k % Math.max(1, Math.min(vocab, 1600) - 3));
    await e.evalTokens(Int32Array.from({ length: depth }, (_, i) => id(300 + 37 * i)));
    map.clear();
    const steps = 16;
    for (let i = 0; i < steps; i++) await e.evalTokens(Int32Array.of(id(400 + 53 * i)));
    return [...map].map(([kind, v]) => ({ kind, msPerToken: v.ms / steps, perToken: v.n / steps })).sort((a, b) => b.msPerToken - a.msPerToken);
  } finally {
    await e.free();
  }
}

/**
 * The kernel rows (bench/webgpu_gemm.mjs) of every shape and type, logged as they come:
 * {prefill: gemmRows', decode: decodeRows'}.
 */
async function kernelRows(gpu, o, log, software) {
  const adapter = await gpu.requestAdapter({ powerPreference: 'high-performance' });
  const device = await adapter.requestDevice({ requiredLimits: { maxBufferSize: adapter.limits.maxBufferSize, maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize } });
  const note = software ? ' (SOFTWARE adapter: CPU-emulated, not GPU speed; the rows show the path runs)' : '';
  const prefill = [], decode = [];
  try {
    const each = async (fn) => {
      for (const shape of o.shapes) {
        const [arch, shapeName] = SHAPES[shape] ? [SHAPES[shape], shape] : shape.split('/');
        for (const type of o.types) await fn(shape, resolveShape(arch, shapeName), type);
      }
    };
    log(`# prefill kernels: one layer's matrices × ${o.entries} entries, tiled matrix-matrix vs matrix-vector batch form${note}`);
    await each(async (shape, s, type) => {
      for (const r of await gemmRows(device, shape, s, type, { entries: o.entries, runs: o.runs })) {
        prefill.push(r);
        log(`${shape} ${r.weightType} ${r.matrix} ${r.rows}×${r.cols} × ${r.entries}: tiled ${r.tiledMs.toFixed(3)} ms ` +
          `(${r.tiledGflops.toPrecision(3)} GFLOP/s), matvec batch ${r.matvecMs.toFixed(3)} ms (${r.matvecGflops.toPrecision(3)} GFLOP/s), ×${r.speedup.toFixed(2)}`);
      }
    });
    log(`# decode kernels: one layer's matrices × 1 entry, matrix-vector by 32-element sub-blocks (w_sub) vs one element a step (w_get)${note}`);
    await each(async (shape, s, type) => {
      for (const r of await decodeRows(device, shape, s, type, { runs: o.runs })) {
        decode.push(r);
        log(`${shape} ${r.weightType} ${r.matrix} ${r.rows}×${r.cols}: wide ${(1e3 * r.wideMs).toFixed(1)} µs ` +
          `(${r.wideGBps.toPrecision(3)} GB/s), one element a step ${(1e3 * r.narrowMs).toFixed(1)} µs (${r.narrowGBps.toPrecision(3)} GB/s), ×${r.speedup.toFixed(2)}`);
      }
    });
  } finally {
    device.destroy();
  }
  return { prefill, decode };
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const log = o.json ? (...a) => console.error(...a) : console.log;
  const gpu = await nodeGpu();
  const bw = await readBandwidth(gpu, o.probeMiB);
  log(`# adapter: ${bw.adapter.name}${bw.adapter.software ? ' (SOFTWARE: numbers mean nothing)' : ''}; read bandwidth ${bw.gbPerSec.toFixed(1)} GB/s`);
  const rows = [];
  for (const shape of o.engine ? o.shapes : []) {
    for (const type of o.types) {
      const [arch, shapeName] = SHAPES[shape] ? [SHAPES[shape], shape] : shape.split('/');
      const file = synthCached({ arch, shape: shapeName, type });
      const row = { shape, type, file: path.basename(file) };
      const g = await createEngine({ backend: 'webgpu', gpu, threads: 1, gpuWeights: o.gpuWeights });
      try {
        const m = await measure(g, file, o.nCtx, o.runs, o.loadOnly, o.spec);
        if (m.spec) row.gpuSpec = m.spec;
        Object.assign(row, { fileBytes: fs.statSync(file).size, gpuWeights: o.gpuWeights, gpuLoadMs: m.loadMs, gpuWasmBytes: m.wasmBytes,
          weightBytes: m.info.weightBytes, gpuBytes: m.info.gpuBytes, gpuPrefill: m.prefill, gpuDecode: m.decode,
          decodeBandwidthShare: m.decode == null ? null : (m.decode * m.info.weightBytes) / (bw.gbPerSec * 1e9) });
      } catch (e) {
        row.gpuError = e.message;
      } finally {
        await g.free();
      }
      if (o.profile && !row.gpuError && !o.loadOnly) {
        row.gpuProfile = await profileDecode(gpu, file, o.nCtx, o.gpuWeights, o.profileDepth);
        row.gpuProfileDepth = o.profileDepth;
        const sum = row.gpuProfile.reduce((s, k) => s + k.msPerToken, 0);
        log(`${shape} ${type}: decode step after a ${o.profileDepth}-token prompt, kernel by kernel (GPU timestamps, each kernel a pass of its own; '(between kernels)': ` +
          `from one kernel's end to the next one's start): ${sum.toFixed(2)} ms a token against ` +
          `${(1e3 / row.gpuDecode).toFixed(2)} ms plain; ` + row.gpuProfile.map((k) => `${k.kind} ${k.msPerToken.toFixed(3)} (${k.perToken})`).join(', '));
      }
      if (o.cpu) {
        const c = await createEngine({ backend: 'cpu', threads: o.threads });
        try {
          const m = await measure(c, file, o.nCtx, o.runs, o.loadOnly, o.spec);
          if (m.spec) row.cpuSpec = m.spec;
          Object.assign(row, { cpuThreads: c.threads, cpuPrefill: m.prefill, cpuDecode: m.decode, cpuLoadMs: m.loadMs, cpuWasmBytes: m.wasmBytes });
        } catch (e) {
          row.cpuError = e.message;
        } finally {
          await c.free();
        }
      }
      rows.push(row);
      const f = (v) => (v == null || !Number.isFinite(v) ? '—' : v.toFixed(1));
      log(`${shape} ${type}: GPU prefill ${f(row.gpuPrefill)} tok/s, decode ${f(row.gpuDecode)} tok/s ` +
        `(${row.decodeBandwidthShare != null ? (100 * row.decodeBandwidthShare).toFixed(1) : '—'} % of read bandwidth), ` +
        `load ${f(row.gpuLoadMs)} ms, wasm memory ${f(row.gpuWasmBytes / 2 ** 20)} MiB (${o.gpuWeights})` +
        (o.cpu ? ` · CPU ${row.cpuThreads ?? '?'} threads prefill ${f(row.cpuPrefill)}, decode ${f(row.cpuDecode)}, ` +
          `wasm memory ${f(row.cpuWasmBytes / 2 ** 20)} MiB` : '') +
        (row.gpuSpec ? ` · prompt lookup (k ${o.spec}): GPU decode ${f(row.gpuSpec.decode)} tok/s, ${row.gpuSpec.accepted} of ${row.gpuSpec.drafted} drafts accepted in ${row.gpuSpec.rounds} rounds` : '') +
        (row.cpuSpec ? `; CPU ${f(row.cpuSpec.decode)} tok/s` : '') +
        (row.gpuError ? ` · GPU error: ${row.gpuError}` : '') + (row.cpuError ? ` · CPU error: ${row.cpuError}` : ''));
    }
  }
  const kernels = o.gemm ? await kernelRows(gpu, o, log, bw.adapter.software) : { prefill: [], decode: [] };
  const report = { date: new Date().toISOString(), adapter: bw.adapter, readGBps: bw.gbPerSec, promptTokens: PROMPT_TOKENS,
    decodeTokens: DECODE_TOKENS, nCtx: o.nCtx, runs: o.runs, load: os.loadavg(), cpus: os.cpus().length, rows, prefillKernelRows: kernels.prefill, decodeKernelRows: kernels.decode };
  fs.mkdirSync(path.join(HERE, 'out'), { recursive: true });
  const out = path.join(HERE, 'out', 'webgpu.json');
  fs.writeFileSync(out, `${JSON.stringify(report, null, 2)}\n`);
  if (o.json) console.log(JSON.stringify(report));
  else log(`${path.relative(process.cwd(), out)} written`);
}

main().catch((e) => {
  console.error(e.stack || String(e));
  process.exit(1);
});
