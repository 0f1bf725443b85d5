#!/usr/bin/env node
// tools/synth.mjs — writes a synthetic llama2.c legacy (version 0) checkpoint: the exact shapes of
// a published model, seeded random weights. For benchmarks and load tests only: its text is
// noise. It streams the file in 4 MiB chunks: a 4.1 GB TinyLlama-shaped file takes ~13 s and ~55 MB RSS.
// With --format gguf it writes the same weights as a GGUF v3 file of one weight type, through the
// native CLI's `wasmlm quantize` (the checkpoint goes to OUT.src.bin first and is deleted after).
//
//   node tools/synth.mjs --shape stories15M --out FILE [--seed N] [--std 0.02]
//   node tools/synth.mjs --shape stories15M --out FILE.gguf --format gguf --type Q8_0
//        [--tokenizer ../shared/models/tokenizer.bin] [--cli build/native/wasmlm]
//   node tools/synth.mjs --list
//
// GGUF: types F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K,
// MXFP4, and llama.cpp's per-tensor mixes Q3_K_M, Q4_K_M, Q5_K_M, MXFP4_MOE (norms stay F32; a
// matrix whose rows are not whole blocks — K-quants need multiples of 256, stories15M's dim is
// 288 — falls back as in llama.cpp: Q2_K/Q3_K to Q4_0, Q4_K to Q5_0, Q5_K to Q5_1, Q6_K to Q8_0,
// else F16; the CLI says so). The vocabulary is the real Llama 2 tokenizer.bin's, so llama.cpp-based runtimes
// (wllama) load the files too. The CLI is built with CMake into build/native when it is missing
// (WASMLM_CLI or --cli pick another binary). The CLI memory-maps the checkpoint and streams
// the GGUF, so neither file is ever held in this process or in the CLI's heap.
//
// File layout (run.c's order; all little-endian): 7 × int32 header (dim, hidden_dim, n_layers,
// n_heads, n_kv_heads, vocab_size, seq_len) — vocab_size positive, i.e. the classifier shares
// the token embedding — then float32 arrays, shapes below in tensorList().
//
// Values: matrices ~ uniform(-a, a) with a = std·√3 (so the standard deviation is `std`, like a
// N(0, 0.02) init), RMSNorm weights = 1, legacy RoPE tables = 0 (run.c ignores them). The
// embedding rows of BOS (1) and EOS (2) are zero: their logit is then exactly 0, far below the
// largest of 32000 random logits, so greedy decoding never stops early and a benchmark always
// produces the tokens it asks for. Use the real tokenizer.bin (32000 tokens) with these files.
//
// The PRNG is Marsaglia's xorshift128 on 32-bit words (seeded by splitmix32), one stream over
// the whole file in file order: the same shape and seed always give the same bytes, whatever the
// chunk size.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const DEFAULT_TOKENIZER = path.resolve(ROOT, '../shared/models/tokenizer.bin');
export const DEFAULT_CLI = path.join(ROOT, 'build/native/wasmlm');
/** Weight types and llama.cpp mixes `--format gguf` can write (ggml's / llama.cpp's names). */
export const GGUF_TYPES = Object.freeze(['F32', 'F16', 'BF16', 'Q8_0', 'Q4_0', 'Q4_1', 'Q5_0',
  'Q5_1', 'Q2_K', 'Q3_K', 'Q4_K', 'Q5_K', 'Q6_K', 'MXFP4', 'Q3_K_M', 'Q4_K_M', 'Q5_K_M', 'MXFP4_MOE']);

/** Shapes of published models (karpathy/tinyllamas, TinyLlama-1.1B), seq_len as the file says
 *  except for the stories models, which are given a 1024 context so the KV-cache benchmark can
 *  reach 1024 positions (the published stories15M says 256). */
export const SHAPES = Object.freeze({
  stories15M: { dim: 288, hiddenDim: 768, nLayers: 6, nHeads: 6, nKvHeads: 6, vocabSize: 32000, seqLen: 1024 },
  stories42M: { dim: 512, hiddenDim: 1376, nLayers: 8, nHeads: 8, nKvHeads: 8, vocabSize: 32000, seqLen: 1024 },
  stories110M: { dim: 768, hiddenDim: 2048, nLayers: 12, nHeads: 12, nKvHeads: 12, vocabSize: 32000, seqLen: 1024 },
  'tinyllama-1.1B': { dim: 2048, hiddenDim: 5632, nLayers: 22, nHeads: 32, nKvHeads: 4, vocabSize: 32000, seqLen: 2048 },
});

const HEADER_BYTES = 7 * 4;
const BOS_ID = 1;
const EOS_ID = 2;

/**
 * The float32 arrays of a checkpoint, in file order: { name, shape, count, fill } where fill is
 * 'random' (uniform, std), 'ones', 'zeros' or 'embedding' (random with BOS/EOS rows zero).
 */
export function tensorList(s) {
  const headSize = s.dim / s.nHeads;
  const kvDim = (s.dim * s.nKvHeads) / s.nHeads;
  const L = s.nLayers;
  const t = (name, shape, fill) => ({ name, shape, count: shape.reduce((a, b) => a * b, 1), fill });
  return [
    t('token_embedding', [s.vocabSize, s.dim], 'embedding'),
    t('rms_att', [L, s.dim], 'ones'),
    t('wq', [L, s.dim, s.dim], 'random'),
    t('wk', [L, kvDim, s.dim], 'random'),
    t('wv', [L, kvDim, s.dim], 'random'),
    t('wo', [L, s.dim, s.dim], 'random'),
    t('rms_ffn', [L, s.dim], 'ones'),
    t('w1', [L, s.hiddenDim, s.dim], 'random'),
    t('w2', [L, s.dim, s.hiddenDim], 'random'),
    t('w3', [L, s.hiddenDim, s.dim], 'random'),
    t('rms_final', [s.dim], 'ones'),
    t('freq_cis_real', [s.seqLen, headSize / 2], 'zeros'),
    t('freq_cis_imag', [s.seqLen, headSize / 2], 'zeros'),
    // no wcls: shared classifier (positive vocab_size in the header)
  ];
}

/** Number of float32 values in the file (everything after the header). */
export function paramCount(s) {
  return tensorList(s).reduce((n, t) => n + t.count, 0);
}

/** Exact file size in bytes: 28 + 4 × paramCount. */
export function fileBytes(s) {
  return HEADER_BYTES + 4 * paramCount(s);
}

/** Resolves a shape name (or passes a shape object through, after checking it). */
export function resolveShape(shape) {
  const s = typeof shape === 'string' ? SHAPES[shape] : shape;
  if (!s) throw new Error(`unknown shape ${JSON.stringify(shape)}; known: ${Object.keys(SHAPES).join(', ')}`);
  for (const k of ['dim', 'hiddenDim', 'nLayers', 'nHeads', 'nKvHeads', 'vocabSize', 'seqLen']) {
    if (!Number.isInteger(s[k]) || s[k] <= 0 || s[k] > 0x7fffffff) throw new Error(`shape.${k} must be a positive int32`);
  }
  if (s.dim % s.nHeads || s.nHeads % s.nKvHeads || (s.dim / s.nHeads) % 2) {
    throw new Error('shape: dim must divide into n_heads even-sized heads, n_heads into n_kv_heads groups');
  }
  return s;
}

// ---------------------------------------------------------------------------------------------
// PRNG: xorshift128 (Marsaglia 2003), state seeded with splitmix32.

/** splitmix32 (Steele, Lea, Flood 2014; the 32-bit variant): a generator of uint32 seeds. */
export function splitmix32(a) {
  return () => {
    a = (a + 0x9e3779b9) | 0;
    let z = a;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
    return (z ^ (z >>> 16)) >>> 0;
  };
}

class Rng {
  constructor(seed) {
    const sm = splitmix32(seed >>> 0);
    this.s = new Uint32Array([sm(), sm(), sm(), sm()]);
    if (!(this.s[0] | this.s[1] | this.s[2] | this.s[3])) this.s[0] = 1;
  }

  /** Fills out[0..n) with uniform(-a, a). Kept as its own function, called once per chunk, so
   *  V8 optimises the loop (see PERF-NOTES: a hot loop entered once may never be). */
  fillUniform(out, n, a) {
    let x = this.s[0] | 0, y = this.s[1] | 0, z = this.s[2] | 0, w = this.s[3] | 0;
    const scale = (2 * a) / 16777216; // 24 random bits -> [0, 2a)
    for (let i = 0; i < n; i++) {
      const t = x ^ (x << 11);
      x = y; y = z; z = w;
      w = w ^ (w >>> 19) ^ t ^ (t >>> 8);
      out[i] = (w >>> 8) * scale - a;
    }
    this.s[0] = x; this.s[1] = y; this.s[2] = z; this.s[3] = w;
  }
}

// ---------------------------------------------------------------------------------------------

const CHUNK_FLOATS = 1 << 20; // 4 MiB per write

/**
 * Writes a synthetic checkpoint to `out` (via `out + '.tmp'`, renamed when complete, so an
 * interrupted run never leaves a file of the right name and the wrong size).
 * Returns { path, shape, params, bytes, ms }.
 */
export async function writeSyntheticModel({ shape, out, seed = 1, std = 0.02, onProgress } = {}) {
  const s = resolveShape(shape);
  if (!out) throw new Error('writeSyntheticModel: `out` is required');
  if (!(std >= 0 && Number.isFinite(std))) throw new Error('std must be a finite number >= 0');
  const t0 = performance.now();
  const tensors = tensorList(s);
  const total = fileBytes(s);
  const a = std * Math.sqrt(3);
  const rng = new Rng(seed);
  const buf = new Float32Array(CHUNK_FLOATS);
  const bytes = new Uint8Array(buf.buffer);

  fs.mkdirSync(path.dirname(path.resolve(out)), { recursive: true });
  const tmp = `${out}.tmp`;
  const fh = await fs.promises.open(tmp, 'w');
  let written = 0;
  try {
    const header = new Int32Array([s.dim, s.hiddenDim, s.nLayers, s.nHeads, s.nKvHeads, s.vocabSize, s.seqLen]);
    await writeAll(fh, new Uint8Array(header.buffer));
    written += HEADER_BYTES;

    for (const t of tensors) {
      let index = 0; // float index within the tensor
      while (index < t.count) {
        const n = Math.min(CHUNK_FLOATS, t.count - index);
        if (t.fill === 'ones') buf.fill(1, 0, n);
        else if (t.fill === 'zeros') buf.fill(0, 0, n);
        else {
          rng.fillUniform(buf, n, a);
          if (t.fill === 'embedding') zeroRows(buf, index, n, s.dim, [BOS_ID, EOS_ID]);
        }
        await writeAll(fh, bytes.subarray(0, n * 4));
        index += n;
        written += n * 4;
        onProgress?.({ written, total });
      }
    }
  } finally {
    await fh.close();
  }
  if (written !== total) throw new Error(`internal: wrote ${written} bytes, expected ${total}`);
  const size = fs.statSync(tmp).size;
  if (size !== total) throw new Error(`${tmp}: size ${size}, expected ${total}`);
  fs.renameSync(tmp, out);
  return { path: out, shape: s, params: paramCount(s), bytes: total, ms: performance.now() - t0 };
}

/** Zeroes the embedding rows `rows` where they overlap the chunk [start, start+n) (float indices). */
function zeroRows(buf, start, n, dim, rows) {
  for (const r of rows) {
    const lo = Math.max(r * dim, start);
    const hi = Math.min((r + 1) * dim, start + n);
    if (lo < hi) buf.fill(0, lo - start, hi - start);
  }
}

async function writeAll(fh, u8) {
  let off = 0;
  while (off < u8.length) {
    const { bytesWritten } = await fh.write(u8, off, u8.length - off);
    off += bytesWritten;
  }
}

// ---------------------------------------------------------------------------------------------
// GGUF, through the native CLI

/** Runs a command; resolves with its exit code, stdout and stderr (stderr also echoed when
 *  `echo` is set). */
function run(cmd, args, { echo = false } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => { stdout += d; });
    child.stderr.on('data', (d) => {
      stderr += d;
      if (echo) process.stderr.write(d);
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** The native CLI's path, built with CMake (build/native, Release) when it is missing. */
export async function ensureCli(cli = process.env.WASMLM_CLI || DEFAULT_CLI) {
  if (fs.existsSync(cli)) return cli;
  if (path.resolve(cli) !== DEFAULT_CLI) throw new Error(`${cli}: no such CLI binary`);
  const build = path.join(ROOT, 'build/native');
  for (const args of [
    ['-S', ROOT, '-B', build, '-DCMAKE_BUILD_TYPE=Release'],
    ['--build', build, '--target', 'wasmlm_cli', '-j2'],
  ]) {
    const r = await run('cmake', args);
    if (r.code !== 0) throw new Error(`cmake ${args.join(' ')} failed:\n${r.stdout}${r.stderr}`);
  }
  if (!fs.existsSync(cli)) throw new Error(`${cli} is still missing after building build/native`);
  return cli;
}

/**
 * Writes a synthetic model as GGUF v3 with weight matrices of `type` (GGUF_TYPES: a type, or a
 * llama.cpp mix such as Q4_K_M with its types per tensor): the llama2.c
 * checkpoint of writeSyntheticModel (same seed, same values) goes to `${out}.src.bin`, then
 * `wasmlm quantize` converts it, embedding the vocabulary of `tokenizer` (a llama2.c
 * tokenizer.bin of the shape's vocab size). The CLI writes `${out}.tmp` and renames it, so an
 * interrupted run leaves no file named `out`. The checkpoint is deleted in every case.
 * The CLI's messages (fallback types) go to stderr when `echo` is set and are returned in `log`.
 * Returns { path, shape, type, bytes, ms, log }.
 */
export async function writeSyntheticGguf({ shape, out, type = 'F32', seed = 1, std = 0.02,
  tokenizer = DEFAULT_TOKENIZER, cli, echo = false, onProgress } = {}) {
  const s = resolveShape(shape);
  if (!out) throw new Error('writeSyntheticGguf: `out` is required');
  const t = String(type).toUpperCase();
  if (!GGUF_TYPES.includes(t)) throw new Error(`type ${type}: one of ${GGUF_TYPES.join(', ')}`);
  if (!fs.existsSync(tokenizer)) throw new Error(`${tokenizer}: tokenizer not found`);
  const exe = await ensureCli(cli);
  const t0 = performance.now();
  const src = `${out}.src.bin`;
  try {
    await writeSyntheticModel({ shape: s, out: src, seed, std, onProgress });
    const name = typeof shape === 'string' ? `synthetic-${shape}` : 'synthetic';
    const r = await run(exe, ['quantize', src, out, t, '-z', tokenizer, '--name', name], { echo });
    if (r.code !== 0) {
      const hint = !/wasmlm quantize/.test(r.stderr) // every message of the command says so
        ? ` (this CLI has no quantize command: src/cli/cli.c must dispatch "quantize" to wlm_cli_quantize)` : '';
      throw new Error(`wasmlm quantize failed (exit ${r.code})${hint}:\n${r.stderr}`);
    }
    const log = r.stderr.split('\n').filter((l) => l && !/^\r?\s*\d+%$/.test(l)).join('\n');
    return { path: out, shape: s, type: t, bytes: fs.statSync(out).size, ms: performance.now() - t0, log };
  } finally {
    fs.rmSync(src, { force: true });
    fs.rmSync(`${src}.tmp`, { force: true });
  }
}

// ---------------------------------------------------------------------------------------------
// CLI

function usage() {
  return `usage: node tools/synth.mjs --shape NAME --out FILE [--seed N] [--std X]
             [--format bin|gguf] [--type T] [--tokenizer FILE] [--cli FILE]
       node tools/synth.mjs --list
shapes: ${Object.keys(SHAPES).join(', ')}
GGUF types (--format gguf): ${GGUF_TYPES.join(', ')} (default F32)`;
}

function parseArgs(argv) {
  const opts = { seed: 1, std: 0.02, format: 'bin' };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new Error(`${arg} needs a value`);
      return argv[++i];
    };
    if (arg === '--shape') opts.shape = value();
    else if (arg === '--out') opts.out = value();
    else if (arg === '--seed') opts.seed = Number(value());
    else if (arg === '--std') opts.std = Number(value());
    else if (arg === '--format') opts.format = value();
    else if (arg === '--type') opts.type = value();
    else if (arg === '--tokenizer') opts.tokenizer = value();
    else if (arg === '--cli') opts.cli = value();
    else if (arg === '--list') opts.list = true;
    else if (arg === '-h' || arg === '--help') opts.help = true;
    else throw new Error(`unknown argument ${arg}`);
  }
  if (!Number.isInteger(opts.seed) || opts.seed < 0 || opts.seed > 0xffffffff) {
    throw new Error('--seed must be an integer in 0..2^32-1');
  }
  if (!(opts.std >= 0 && Number.isFinite(opts.std))) throw new Error('--std must be a finite number >= 0');
  if (opts.shape !== undefined) resolveShape(opts.shape);
  if (opts.format !== 'bin' && opts.format !== 'gguf') throw new Error('--format must be bin or gguf');
  if (opts.type !== undefined) {
    if (opts.format !== 'gguf') throw new Error('--type needs --format gguf');
    opts.type = opts.type.toUpperCase();
    if (!GGUF_TYPES.includes(opts.type)) throw new Error(`--type must be one of ${GGUF_TYPES.join(', ')}`);
  }
  if ((opts.tokenizer !== undefined || opts.cli !== undefined) && opts.format !== 'gguf') {
    throw new Error('--tokenizer and --cli need --format gguf');
  }
  return opts;
}

function fmtBytes(n) {
  return n >= 1e9 ? `${(n / 1e9).toFixed(2)} GB` : `${(n / 1e6).toFixed(1)} MB`;
}

async function main() {
  let opts;
  try {
    opts = parseArgs(process.argv.slice(2));
  } catch (e) {
    console.error(`${e.message}\n${usage()}`);
    process.exit(2);
  }
  if (opts.help) return console.log(usage());
  if (opts.list) {
    for (const [name, s] of Object.entries(SHAPES)) {
      console.log(`${name.padEnd(15)} dim ${s.dim} hidden ${s.hiddenDim} layers ${s.nLayers} heads ${s.nHeads}/${s.nKvHeads} ` +
        `vocab ${s.vocabSize} seq ${s.seqLen}  ${paramCount(s)} params, ${fileBytes(s)} bytes (${fmtBytes(fileBytes(s))})`);
    }
    return;
  }
  if (!opts.shape || !opts.out) {
    console.error(usage());
    process.exit(2);
  }
  let lastPct = -1;
  const tty = process.stderr.isTTY;
  const onProgress = ({ written, total }) => {
    const pct = Math.floor((100 * written) / total);
    if (tty && pct !== lastPct) process.stderr.write(written === total ? '\r    \r' : `\r${pct}%`);
    lastPct = pct;
  };
  if (opts.format === 'gguf') {
    const { shape, out, seed, std, type, tokenizer, cli } = opts;
    const r = await writeSyntheticGguf({ shape, out, seed, std, type, tokenizer, cli, echo: true, onProgress });
    console.log(`${r.path}: ${shape} GGUF ${r.type}, seed ${seed}, ${r.bytes} bytes (${fmtBytes(r.bytes)}) ` +
      `in ${(r.ms / 1000).toFixed(2)} s`);
    return;
  }
  const r = await writeSyntheticModel({ ...opts, onProgress });
  if (tty) process.stderr.write('\r');
  console.log(`${r.path}: ${opts.shape}, seed ${opts.seed}, ${r.params} params, ${r.bytes} bytes ` +
    `(${fmtBytes(r.bytes)}) in ${(r.ms / 1000).toFixed(2)} s (${(r.bytes / 1e6 / (r.ms / 1000)).toFixed(0)} MB/s)`);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((e) => {
    console.error(e.stack || String(e));
    process.exit(1);
  });
}
