// bench/models.mjs — the synthetic GGUF files both benchmarks use (bench/bench.mjs's quantized
// section and bench/peers.mjs), cached in bench/out/ under a name keyed by shape, type and seed:
// bench/out/gguf/SHAPE-TYPE-sSEED.gguf, with a sidecar SHAPE-TYPE-sSEED.gguf.json that records
// what `wasmlm quantize` said (the K-quant fallbacks) and how long synthesis took. A file whose
// sidecar is missing or disagrees with its size is written again. Run it directly to synthesize
// ahead of a benchmark:
//
//   node bench/models.mjs [--big] [--shapes stories15M,...] [--types F32,Q8_0,...]

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { SHAPES, writeSyntheticGguf } from '../tools/synth.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const GGUF_DIR = path.join(HERE, 'out', 'gguf');
export const SEED = 1;
export const QUANT_SHAPES = ['stories15M', 'stories42M', 'stories110M'];
export const BIG_SHAPE = 'tinyllama-1.1B';
// The benchmark's default set (tools/synth.mjs's GGUF_TYPES holds more: BF16, Q4_1, Q5_0, Q5_1, Q2_K,
// Q3_K, Q5_K and the mixes Q3_K_M, Q4_K_M, Q5_K_M).
export const QUANT_TYPES = Object.freeze(['F32', 'F16', 'Q8_0', 'Q4_0', 'Q4_K', 'Q6_K']);
/** TinyLlama only in quantized types: its F32 file (4.4 GB) cannot load in wasm32. */
export const BIG_TYPES = ['Q8_0', 'Q4_0', 'Q4_K', 'Q6_K'];

/** The benchmarks' fixed English text: prefill prompts are its first n tokens (bench.mjs,
 *  real_shapes.mjs). */
export const PARAGRAPH =
  'Once upon a time, in a small village at the edge of a green forest, there lived a curious ' +
  'little girl named Lily. Every morning she walked to the river with her dog, Max, to watch the ' +
  'fish jump and the birds sing. One day she found a shiny red stone under an old tree. She picked ' +
  'it up and ran home to show her mother, who smiled and said that the stone was very special. ' +
  'That night, Lily put the stone next to her bed and dreamed of faraway places.';

export const ggufName = (shape, type, seed = SEED) => `${shape}-${type}-s${seed}.gguf`;
export const ggufPath = (shape, type, seed = SEED) => path.join(GGUF_DIR, ggufName(shape, type, seed));

/** The (shape, type) pairs of a run: every small shape × every type, plus TinyLlama's quantized
 *  types with `big`. Filters: `shapes`, `types` (arrays of names) when given. */
export function plan({ big = false, shapes = null, types = null } = {}) {
  const out = [];
  const wantShape = (s) => !shapes || shapes.includes(s);
  const wantType = (t) => !types || types.includes(t);
  for (const s of QUANT_SHAPES) if (wantShape(s)) for (const t of QUANT_TYPES) if (wantType(t)) out.push({ shape: s, type: t });
  if (big && wantShape(BIG_SHAPE)) for (const t of BIG_TYPES) if (wantType(t)) out.push({ shape: BIG_SHAPE, type: t });
  return out;
}

/** Reads the sidecar of a cached file; null if there is no usable cached file. */
export function cached(shape, type, seed = SEED) {
  const file = ggufPath(shape, type, seed);
  try {
    const meta = JSON.parse(fs.readFileSync(`${file}.json`, 'utf8'));
    if (meta.bytes === fs.statSync(file).size) return { ...meta, path: file, cached: true };
  } catch { /* missing or stale */ }
  return null;
}

/**
 * The GGUF file for (shape, type, seed): from the cache, or synthesized now (tools/synth.mjs
 * --format gguf through `wasmlm quantize`). Returns { path, shape, type, seed, bytes, ms,
 * fallback, log, cached }: `fallback` lists the CLI's lines about matrices written in another
 * type (K-quants need rows in blocks of 256), `ms` is how long synthesis took (then or earlier).
 */
export async function ensureGguf(shape, type, { seed = SEED, log = () => {} } = {}) {
  const hit = cached(shape, type, seed);
  if (hit) return hit;
  if (!SHAPES[shape]) throw new Error(`unknown shape ${shape}`);
  const file = ggufPath(shape, type, seed);
  fs.mkdirSync(GGUF_DIR, { recursive: true });
  log(`synthesizing ${path.relative(process.cwd(), file)} (${shape}, ${type}, seed ${seed}) ...`);
  const r = await writeSyntheticGguf({ shape, type, seed, out: file });
  const fallback = r.log.split('\n').filter((l) => /written as/.test(l));
  const meta = { shape, type, seed, bytes: r.bytes, ms: r.ms, fallback, log: r.log, date: new Date().toISOString() };
  fs.writeFileSync(`${file}.json`, `${JSON.stringify(meta, null, 2)}\n`);
  log(`  ${(r.bytes / 1e6).toFixed(1)} MB in ${(r.ms / 1000).toFixed(1)} s${fallback.length ? `; ${fallback.join('; ')}` : ''}`);
  return { ...meta, path: file, cached: false };
}

/** Short label for the fallback: e.g. "Q8_0 fallback: 31 of 43 matrices (rows of 288)". */
export function fallbackNote(meta) {
  if (!meta?.fallback?.length) return '';
  return meta.fallback.map((l) => {
    const m = /: (\d+) matri\w+ with rows of (\d+) .* written as (\S+)/.exec(l);
    return m ? `${m[3]} for ${m[1]} matrices with rows of ${m[2]}` : l;
  }).join('; ');
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const argv = process.argv.slice(2);
  const get = (k) => { const i = argv.indexOf(k); return i >= 0 ? argv[i + 1].split(',') : null; };
  const jobs = plan({ big: argv.includes('--big'), shapes: get('--shapes'), types: get('--types') });
  for (const j of jobs) {
    const r = await ensureGguf(j.shape, j.type, { log: (m) => console.error(m) });
    console.log(`${path.relative(process.cwd(), r.path)}  ${(r.bytes / 1e6).toFixed(1)} MB  ` +
      `synthesis ${(r.ms / 1000).toFixed(1)} s${r.cached ? ' (cached)' : ''}  ${fallbackNote(r)}`);
  }
}
