// tools/synth/quantize.mjs — writing a description quantized as it is generated: loadQuantizer
// (the project's C quantizers in dist/wasmlm.wasm), quantizedPlan (wlm_quantize_gguf's header
// and per-tensor types; attnVOrder, LLAMA_MODEL_KEYS) and writeQuantized.

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe } from './describe.mjs';
import { CHUNK, generate, writeGguf } from './write.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/**
 * The project's quantizers, from dist/wasmlm.wasm (tools/build.sh builds it): the C code
 * `wasmlm quantize` runs (src/kernels/quantize.c's per-tensor type rules, the types' from_float),
 * through the exports wlmjs_quantize_target / _tensor_type / _rows. One instance per process.
 */
let quantizer = null;
export function loadQuantizer(file = process.env.WASMLM_QUANT_WASM || path.join(ROOT, 'dist/wasmlm.wasm')) {
  if (quantizer) return quantizer;
  if (!fs.existsSync(file)) throw new Error(`${file} missing: build it (bash tools/build.sh) or set WASMLM_QUANT_WASM`);
  const inst = new WebAssembly.Instance(new WebAssembly.Module(fs.readFileSync(file)), { env: { emscripten_notify_memory_growth() {} } });
  const x = inst.exports;
  if (typeof x.wlmjs_quantize_rows !== 'function') throw new Error(`${file} has no wlmjs_quantize_rows: rebuild it (bash tools/build.sh)`);
  x._initialize?.();
  const mem = () => x.memory.buffer;
  const cstr = (s) => {
    const b = Buffer.from(s, 'utf8');
    const p = x.wlmjs_malloc(b.length + 1) >>> 0;
    new Uint8Array(mem(), p, b.length + 1).set([...b, 0]);
    return { p, len: b.length };
  };
  quantizer = {
    /** { type, mix, fileType } of a target name (Q8_0, Q4_K_M, …), as `wasmlm quantize` reads it. */
    target(name) {
      const s = cstr(name), o = x.wlmjs_malloc(12) >>> 0;
      const rc = x.wlmjs_quantize_target(s.p, o);
      const [type, mix, fileType] = new Int32Array(mem(), o, 3);
      x.wlmjs_free(s.p); x.wlmjs_free(o);
      if (rc !== 0) throw new Error(`unknown or unavailable quantize type ${name}`);
      return { type, mix, fileType };
    },
    /** The type wlm_quantize_gguf gives a tensor { name, ne } (F32 source) of a file of
     *  architecture `arch` with `f` = { nLayers, tied, nAttnV } and, for an attn_v-like tensor,
     *  `vIndex` of them before it (attnVOrder). */
    tensorType(q, t, f, vIndex, arch) {
      const s = cstr(t.name), a = cstr(arch);
      const count = t.ne.reduce((x1, x2) => x1 * x2, 1);
      const r = x.wlmjs_quantize_tensor_type(q.type, q.mix, s.p, s.len, t.ne.length, t.ne[0], count, 0,
        f.nLayers, f.tied ? 1 : 0, f.nAttnV, vIndex, a.p, a.len);
      x.wlmjs_free(s.p); x.wlmjs_free(a.p);
      return r;
    },
    /** Bytes of `rows` rows of `cols` elements in `type`. */
    bytes(type, rows, cols) {
      if (type === 0) return rows * cols * 4;
      const n = x.wlmjs_quantize_rows(type, 0, 0, rows, cols);
      if (!n) throw new Error(`type ${type}: no quantizer for rows of ${cols}`);
      return n;
    },
    /** A converter of up to maxFloats floats at a time: convert(f32 rows) → Buffer view (reused). */
    converter(type, cols, maxFloats) {
      const rows = Math.max(1, Math.floor(maxFloats / cols));
      const src = x.wlmjs_malloc(rows * cols * 4) >>> 0, dst = x.wlmjs_malloc(this.bytes(type, rows, cols)) >>> 0;
      if (!src || !dst) throw new Error('quantizer: out of wasm memory');
      return {
        convert(v, nRows) {
          new Float32Array(mem(), src, v.length).set(v);
          const n = x.wlmjs_quantize_rows(type, src, dst, nRows, cols);
          if (!n) throw new Error(`type ${type}: quantizing rows of ${cols} failed`);
          return Buffer.from(mem(), dst, n);
        },
        free() { x.wlmjs_free(src); x.wlmjs_free(dst); },
      };
    },
  };
  return quantizer;
}

// The keys quantize.c's add_metadata writes for a llama model, in its order, after general.*
// (the synthetic llama files have no linear RoPE scaling, its only optional pair).
const LLAMA_MODEL_KEYS = ['context_length', 'embedding_length', 'block_count', 'feed_forward_length', 'rope.dimension_count',
  'attention.head_count', 'attention.head_count_kv', 'attention.layer_norm_rms_epsilon', 'rope.freq_base', 'vocab_size'];

/**
 * Writes `out` in `type` directly: the file `wasmlm quantize` makes of writeF32's file, byte for
 * byte (tests/js/synth_gguf.test.mjs), without that F32 file. Per tensor, its F32 values are
 * generated a chunk of rows at a time and converted by the project's quantizers (loadQuantizer),
 * so memory stays a few MB whatever the shape. The header is wlm_quantize_gguf's: general.
 * alignment, file_type and quantization_version first, then the F32 file's keys in order.
 */
export function writeQuantized(arch, shape, out, { seed = 1, type = 'Q8_0' } = {}) {
  const { m, kv, tensors } = quantizedPlan(arch, shape, { seed, type });
  writeGguf(out, kv, tensors);
  return m;
}

/**
 * The attn_v-like tensors of a list of names (quantize.c's wlm_quantize_attn_v_like: attn_v,
 * attn_qkv, attn_kv_b), each with its place in llama.cpp's order (by block, then by name):
 * Map name → index. The attn_v rule of llama.cpp's mixes counts these, not blocks.
 */
export function attnVOrder(names) {
  const block = (n) => { const b = /^blk\.(\d+)\./.exec(n); return b ? Number(b[1]) : -1; };
  const v = names.filter((n) => /attn_v\.weight|attn_qkv\.weight|attn_kv_b\.weight/.test(n));
  v.sort((a, b) => block(a) - block(b) || (a < b ? -1 : a > b ? 1 : 0));
  return new Map(v.map((n, i) => [n, i]));
}

/** writeQuantized's header and tensors: { m: the description, kv, tensors (with fill) }. */
export function quantizedPlan(arch, shape, { seed, type }) {
  const m = describe(arch, shape, { seed });
  const Q = loadQuantizer();
  const q = Q.target(type);
  let nLayers = 0;
  for (const t of m.tensors) { const b = /^blk\.(\d+)\./.exec(t.name); if (b) nLayers = Math.max(nLayers, Number(b[1]) + 1); }
  const tied = !m.tensors.some((t) => t.name === 'output.weight');
  const vOrder = attnVOrder(m.tensors.map((t) => t.name));
  const fileArch = m.kv.find((e) => e[0] === 'general.architecture')[2];
  const info = { nLayers, tied, nAttnV: vOrder.size };
  const ours = [['general.alignment', 'u32', 32], ['general.file_type', 'u32', q.fileType], ['general.quantization_version', 'u32', 2]];
  if (arch === 'llama') { // `wasmlm quantize` loads a llama file as a model (quantize.c's add_metadata)
    const pick = (k) => { const e = m.kv.find((x) => x[0] === k); if (!e) throw new Error(`llama: ${k} missing`); return e; };
    ours.unshift(pick('general.architecture'));
    ours.push(...LLAMA_MODEL_KEYS.map((k) => pick(`llama.${k}`)));
  }
  const kv = [...ours, ...m.kv.filter(([k]) => !ours.some((e) => e[0] === k))];
  const tensors = m.tensors.map((t) => {
    const cols = t.ne[0], rows = t.ne.reduce((a, b) => a * b, 1) / cols;
    const ty = Q.tensorType(q, t, info, vOrder.get(t.name) ?? 0, fileArch);
    return {
      name: t.name, ne: t.ne, type: ty, nbytes: Q.bytes(ty, rows, cols),
      fill: (emit) => {
        if (ty === 0) { generate(seed, t, (v) => emit(v)); return; }
        const c = Q.converter(ty, cols, CHUNK);
        try { generate(seed, t, (v, n) => emit(c.convert(v, n))); } finally { c.free(); }
      },
    };
  });
  return { m, kv, tensors };
}
