#!/usr/bin/env node
// tools/synth_mmproj.mjs — synthetic mmproj GGUFs (llama.cpp's vision encoder + projector files,
// general.architecture "clip") with seeded random weights, paired with a text model of
// tools/synth_gguf.mjs whose width D they project to: the keys and tensor names llama.cpp's
// tools/mtmd (clip-impl.h, clip.cpp load_hparams / load_tensors, b12211 as wllama 3.13.0
// ships it) reads for the SigLIP tower and the gemma3 / idefics3 / lfm2 projectors
// (../shared/reference/vision-mmproj.md §2-3). Types: F32, F16 (llama.cpp's usual mmproj: block
// matrices and the patch kernel F16, vectors F32) and Q8_0 (block matrices Q8_0; the patch kernel
// and Gemma's input projection stay F16 as in llama.cpp's quantized mmproj files).
//
//   node tools/synth_mmproj.mjs --shape gemma3-tiny|idefics3-tiny|lfm2-tiny|qwen25vl-tiny [--type F32|F16|Q8_0]
//        [--seed N] --out FILE.gguf
//   node tools/synth_mmproj.mjs --fixture RECORDS_DIR OUT_DIR   (tests/c/vision_oracle.c's files)
//
// As a module: mmprojBytes({ shape, type, seed }) → Buffer; MMPROJ_SHAPES. Same arguments → same
// bytes. The quantization (Q8_0, F16) is written here in JS as ggml's reference quantizers do it
// (d = max|x| / 127, q = round(x / d); round-to-nearest-even binary16).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ggufBytes } from './vocab_gguf.mjs';
import { splitmix32 } from './synth.mjs';

/**
 * Shapes: S image_size, P patch_size, W width, F MLP width, L blocks, H heads, k scale_factor,
 * edge preproc_image_size (idefics3's longest edge; tiles), D the text width (the paired text
 * model's: gemma3 tiny and llama smolvlm-tiny of tools/synth_gguf.mjs are both 64), text: that
 * model's synth_gguf arguments.
 */
export const MMPROJ_SHAPES = Object.freeze({
  'gemma3-tiny': { proj: 'gemma3', S: 112, P: 14, W: 64, F: 128, L: 2, H: 4, k: 2, D: 64,
    mean: [0.5, 0.5, 0.5], std: [0.5, 0.5, 0.5], text: { arch: 'gemma3', shape: 'tiny' } },
  // Gemma 3's real 256 image rows (16 × 16 after the 2 × 2 pooling of a 32 × 32 patch grid) on a
  // tiny tower: rows that see each other both ways, more than one 64-entry pass holds
  'gemma3-rows256': { proj: 'gemma3', S: 224, P: 7, W: 32, F: 64, L: 1, H: 2, k: 2, D: 64,
    mean: [0.5, 0.5, 0.5], std: [0.5, 0.5, 0.5], text: { arch: 'gemma3', shape: 'tiny' } },
  'idefics3-tiny': { proj: 'idefics3', S: 64, P: 8, W: 64, F: 128, L: 2, H: 4, k: 2, edge: 128, D: 64,
    mean: [0.5, 0.5, 0.5], std: [0.5, 0.5, 0.5], text: { arch: 'llama', shape: 'smolvlm-tiny' } },
  // LFM2-VL: SigLIP2 NaFlex (16×16 learned positions resized per image), pixel unshuffle 2,
  // LayerNorm + 2-layer MLP (hidden Fp) to the lfm2 text model's width
  'lfm2-tiny': { proj: 'lfm2', S: 64, P: 4, W: 64, F: 128, L: 2, H: 4, k: 2, Fp: 64, D: 64,
    mean: [0.5, 0.5, 0.5], std: [0.5, 0.5, 0.5], text: { arch: 'lfm2', shape: 'tiny' } },
  // LFM2-VL's real patch geometry (P 16, s 2: 512-pixel tiles of 256 tokens) on a tiny tower, for
  // the images llama.cpp cuts into tiles
  'lfm2-p16': { proj: 'lfm2', S: 256, P: 16, W: 32, F: 64, L: 1, H: 2, k: 2, Fp: 64, D: 64,
    mean: [0.5, 0.5, 0.5], std: [0.5, 0.5, 0.5], text: { arch: 'lfm2', shape: 'tiny' } },
  // The published towers (/work/shared/reference/vision-mmproj.md §9), for bench/images.mjs:
  // SmolVLM-256M-Instruct's SigLIP-B/16 at 512 px, pixel shuffle 4 (64 tokens per piece),
  // longest edge 2048 (tiles), to SmolLM2-135M's 576; Gemma 3 4B's SigLIP so400m/14 at 896 px,
  // pooled 4 × 4 (256 tokens), to its 2560.
  'idefics3-smolvlm-256m': { proj: 'idefics3', S: 512, P: 16, W: 768, F: 3072, L: 12, H: 12, k: 4, edge: 2048, D: 576,
    mean: [0.5, 0.5, 0.5], std: [0.5, 0.5, 0.5], text: { arch: 'llama', shape: 'smolvlm-256m' } },
  'gemma3-4b': { proj: 'gemma3', S: 896, P: 14, W: 1152, F: 4304, L: 27, H: 16, k: 4, D: 2560,
    mean: [0.5, 0.5, 0.5], std: [0.5, 0.5, 0.5], text: { arch: 'gemma3', shape: 'gemma3-4b' } },
  // Qwen2.5-VL (projector qwen2.5vl_merger): its ViT with Qwen's real patch (14) and window (112 pixels:
  // 4×4 merged groups), 4 blocks of which 1 and 3 attend to the whole image (n_wa_pattern 2),
  // head size 16 (2-D RoPE over 4 + 4 pairs), the 2×2 merger mm.0 (4W → 4W) → GELU → mm.2 to the
  // qwen2vl text model's width; CLIP's mean / std as Qwen's preprocessor has them
  'qwen25vl-tiny': { proj: 'qwen2.5vl_merger', S: 560, P: 14, W: 64, F: 96, L: 4, H: 4, k: 2, wa: 2, window: 112, D: 64,
    mean: [0.48145466, 0.4578275, 0.40821073], std: [0.26862954, 0.26130258, 0.27577711], text: { arch: 'qwen2vl', shape: 'tiny' } },
});

const GT = { F32: 0, F16: 1, Q8_0: 8 };

function fnv1a(s) {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) { h ^= s.charCodeAt(i); h = Math.imul(h, 0x01000193) >>> 0; }
  return h;
}

/** n uniform values in mean ± a, one xorshift128 stream per (seed, tensor name). */
function uniform(seed, name, n, mean, a) {
  const sm = splitmix32((seed ^ fnv1a(name)) >>> 0);
  let x = sm(), y = sm(), z = sm(), w = sm() || 1;
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    const t = x ^ (x << 11);
    x = y; y = z; z = w;
    w = (w ^ (w >>> 19) ^ (t ^ (t >>> 8))) >>> 0;
    out[i] = mean + (2 * (w * 2.3283064365386963e-10) - 1) * a;
  }
  return out;
}

const f32 = new Float32Array(1), u32 = new Uint32Array(f32.buffer);
/** binary16 bits of a float, round to nearest even. */
export function fp16(v) {
  f32[0] = v;
  const b = u32[0], sign = (b >>> 16) & 0x8000, e = (b >>> 23) & 0xff, m = b & 0x7fffff;
  if (e === 0xff) return sign | 0x7c00 | (m ? 0x200 : 0);
  let exp = e - 127 + 15;
  if (exp >= 0x1f) return sign | 0x7c00;
  if (exp <= 0) {
    if (exp < -10) return sign;
    const mm = m | 0x800000, shift = 14 - exp;
    let h = mm >>> shift;
    const rem = mm & ((1 << shift) - 1), half = 1 << (shift - 1);
    if (rem > half || (rem === half && (h & 1))) h++;
    return sign | h;
  }
  let h = (exp << 10) | (m >>> 13);
  const rem = m & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && (h & 1))) h++;
  return sign | h;
}

function encode(type, v) {
  if (type === GT.F32) return Buffer.from(v.buffer, v.byteOffset, v.byteLength);
  if (type === GT.F16) {
    const b = Buffer.alloc(v.length * 2);
    for (let i = 0; i < v.length; i++) b.writeUInt16LE(fp16(v[i]), 2 * i);
    return b;
  }
  const b = Buffer.alloc((v.length / 32) * 34); // Q8_0 (ggml's quantize_row_q8_0_ref)
  for (let k = 0; k < v.length / 32; k++) {
    let amax = 0;
    for (let j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(v[k * 32 + j]));
    const d = amax / 127, id = d ? 1 / d : 0;
    f32[0] = d;
    b.writeUInt16LE(fp16(f32[0]), k * 34);
    for (let j = 0; j < 32; j++) {
      f32[0] = v[k * 32 + j] * id;
      const x = f32[0], r = Math.sign(x) * Math.round(Math.abs(x)); // roundf: half away from zero
      b.writeInt8(r, k * 34 + 2 + j);
    }
  }
  return b;
}

/** The mmproj file of a shape, as bytes. */
export function mmprojBytes({ shape = 'gemma3-tiny', type = 'F16', seed = 1 } = {}) {
  const s = MMPROJ_SHAPES[shape];
  if (!s) throw new Error(`synth_mmproj: unknown shape ${shape} (${Object.keys(MMPROJ_SHAPES).join(', ')})`);
  if (!(type in GT)) throw new Error(`synth_mmproj: --type must be F32, F16 or Q8_0, not ${type}`);
  const mt = GT[type], vt = GT.F32, pt = type === 'F32' ? GT.F32 : GT.F16;
  const { S, P, W, F, L, H, k, D } = s, G = S / P, N = G * G;
  const tensors = [];
  const add = (name, ne, ttype, mean, a) => {
    const n = ne.reduce((x, y) => x * y, 1);
    const data = encode(ttype, uniform(seed, name, n, mean, a));
    tensors.push({ name, ne, type: ttype, data });
  };
  const ws = 1 / Math.sqrt(W);
  if (s.proj === 'qwen2.5vl_merger') return qwenBytes(s, shape, type, tensors, add, { mt, vt, pt });
  add('v.patch_embd.weight', [P, P, 3, W], pt, 0, 1.7 / Math.sqrt(3 * P * P));
  add('v.patch_embd.bias', [W], vt, 0, 0.1);
  add('v.position_embd.weight', [W, N], vt, 0, 0.5);
  for (let l = 0; l < L; l++) {
    const b = `v.blk.${l}.`;
    add(`${b}ln1.weight`, [W], vt, 1, 0.2);
    add(`${b}ln1.bias`, [W], vt, 0, 0.1);
    for (const m of ['attn_q', 'attn_k', 'attn_v', 'attn_out']) {
      add(`${b}${m}.weight`, [W, W], mt, 0, (m === 'attn_q' || m === 'attn_k' ? 3 : 1.7) * ws);
      add(`${b}${m}.bias`, [W], vt, 0, 0.1);
    }
    add(`${b}ln2.weight`, [W], vt, 1, 0.2);
    add(`${b}ln2.bias`, [W], vt, 0, 0.1);
    add(`${b}ffn_up.weight`, [W, F], mt, 0, 1.7 * ws);
    add(`${b}ffn_up.bias`, [F], vt, 0, 0.1);
    add(`${b}ffn_down.weight`, [F, W], mt, 0, 1.7 / Math.sqrt(F));
    add(`${b}ffn_down.bias`, [W], vt, 0, 0.1);
  }
  add('v.post_ln.weight', [W], vt, 1, 0.2);
  add('v.post_ln.bias', [W], vt, 0, 0.1);
  if (s.proj === 'gemma3') {
    add('mm.soft_emb_norm.weight', [W], vt, 1, 0.2);
    add('mm.input_projection.weight', [D, W], pt, 0, 1.7 * ws);
  } else if (s.proj === 'lfm2') {
    const In = W * k * k;
    add('mm.input_norm.weight', [In], vt, 1, 0.2);
    add('mm.input_norm.bias', [In], vt, 0, 0.1);
    add('mm.1.weight', [In, s.Fp], mt, 0, 1.7 / Math.sqrt(In));
    add('mm.1.bias', [s.Fp], vt, 0, 0.1);
    add('mm.2.weight', [s.Fp, D], mt, 0, 1.7 / Math.sqrt(s.Fp));
    add('mm.2.bias', [D], vt, 0, 0.1);
  } else {
    add('mm.model.fc.weight', [W * k * k, D], mt, 0, 1.7 / Math.sqrt(W * k * k));
  }
  const kv = [
    ['general.architecture', 'str', 'clip'],
    ['general.type', 'str', 'mmproj'],
    ['general.name', 'str', `synthetic ${shape}`],
    ['general.file_type', 'u32', type === 'F32' ? 0 : type === 'F16' ? 1 : 7],
    ['clip.has_vision_encoder', 'bool', true],
    ['clip.projector_type', 'str', s.proj],
    ['clip.use_gelu', 'bool', true],
    ['clip.vision.image_size', 'u32', S],
    ['clip.vision.patch_size', 'u32', P],
    ['clip.vision.embedding_length', 'u32', W],
    ['clip.vision.feed_forward_length', 'u32', F],
    ['clip.vision.block_count', 'u32', L],
    ['clip.vision.attention.head_count', 'u32', H],
    ['clip.vision.attention.layer_norm_epsilon', 'f32', 1e-6],
    ['clip.vision.projection_dim', 'u32', D],
    ['clip.vision.image_mean', 'arr:f32', s.mean],
    ['clip.vision.image_std', 'arr:f32', s.std],
    ['clip.vision.projector.scale_factor', 'u32', k],
    ...(s.edge ? [['clip.vision.preproc_image_size', 'u32', s.edge]] : []),
  ];
  return ggufBytes(kv, tensors);
}

/**
 * Qwen2.5-VL's mmproj as llama.cpp's converter writes it (clip.cpp load_tensors for
 * PROJECTOR_TYPE_QWEN25VL): the two halves of the temporal patch kernel v.patch_embd.weight and
 * .weight.1 (no bias, no learned positions), RMSNorm weights ln1 / ln2 / post_ln (no biases), Q/K/V/O
 * and the SwiGLU MLP (ffn_gate, ffn_up, ffn_down) with biases, the merger mm.0 [4W, 4W] and mm.2
 * [4W, D] with biases; keys clip.use_silu, clip.vision.n_wa_pattern (required),
 * clip.vision.window_size and spatial_merge_size.
 */
function qwenBytes(s, shape, type, tensors, add, { mt, vt, pt }) {
  const { S, P, W, F, L, H, D } = s;
  const ws = 1 / Math.sqrt(W);
  add('v.patch_embd.weight', [P, P, 3, W], pt, 0, 1.2 / Math.sqrt(3 * P * P));
  add('v.patch_embd.weight.1', [P, P, 3, W], pt, 0, 1.2 / Math.sqrt(3 * P * P));
  for (let l = 0; l < L; l++) {
    const b = `v.blk.${l}.`;
    add(`${b}ln1.weight`, [W], vt, 1, 0.2);
    for (const m of ['attn_q', 'attn_k', 'attn_v', 'attn_out']) {
      add(`${b}${m}.weight`, [W, W], mt, 0, (m === 'attn_q' || m === 'attn_k' ? 3 : 1.7) * ws);
      add(`${b}${m}.bias`, [W], vt, 0, 0.1);
    }
    add(`${b}ln2.weight`, [W], vt, 1, 0.2);
    add(`${b}ffn_gate.weight`, [W, F], mt, 0, 1.7 * ws);
    add(`${b}ffn_gate.bias`, [F], vt, 0, 0.1);
    add(`${b}ffn_up.weight`, [W, F], mt, 0, 1.7 * ws);
    add(`${b}ffn_up.bias`, [F], vt, 0, 0.1);
    add(`${b}ffn_down.weight`, [F, W], mt, 0, 1.7 / Math.sqrt(F));
    add(`${b}ffn_down.bias`, [W], vt, 0, 0.1);
  }
  add('v.post_ln.weight', [W], vt, 1, 0.2);
  add('mm.0.weight', [4 * W, 4 * W], mt, 0, 1.7 / Math.sqrt(4 * W));
  add('mm.0.bias', [4 * W], vt, 0, 0.1);
  add('mm.2.weight', [4 * W, D], mt, 0, 1.7 / Math.sqrt(4 * W));
  add('mm.2.bias', [D], vt, 0, 0.1);
  const kv = [
    ['general.architecture', 'str', 'clip'],
    ['general.type', 'str', 'mmproj'],
    ['general.name', 'str', `synthetic ${shape}`],
    ['general.file_type', 'u32', type === 'F32' ? 0 : type === 'F16' ? 1 : 7],
    ['clip.has_vision_encoder', 'bool', true],
    ['clip.projector_type', 'str', s.proj],
    ['clip.use_silu', 'bool', true],
    ['clip.vision.image_size', 'u32', S],
    ['clip.vision.patch_size', 'u32', P],
    ['clip.vision.embedding_length', 'u32', W],
    ['clip.vision.feed_forward_length', 'u32', F],
    ['clip.vision.block_count', 'u32', L],
    ['clip.vision.attention.head_count', 'u32', H],
    ['clip.vision.attention.layer_norm_epsilon', 'f32', 1e-6],
    ['clip.vision.projection_dim', 'u32', D],
    ['clip.vision.image_mean', 'arr:f32', s.mean],
    ['clip.vision.image_std', 'arr:f32', s.std],
    ['clip.vision.spatial_merge_size', 'u32', s.k],
    ['clip.vision.n_wa_pattern', 'u32', s.wa],
    ['clip.vision.window_size', 'u32', s.window],
  ];
  return ggufBytes(kv, tensors);
}

/**
 * The files tests/c/vision_oracle.c needs for the records in recordsDir (tools/oracle.mjs
 * --vision-synth): per record NAME.mmproj.gguf and NAME.model.gguf (a link to the synthetic text
 * model, tools/synth_gguf.mjs's cache), and per image img-WxH-sSEED.rgb (raw RGB bytes) and .ppm
 * (the same as a binary PPM, for the native CLI's --image). Checks
 * that each image's PNG is the one llama.cpp was given (its sha256 in the record).
 */
export async function writeFixture(recordsDir, outDir) {
  const { synthCached } = await import('./synth_gguf.mjs');
  const { createHash } = await import('node:crypto');
  fs.mkdirSync(outDir, { recursive: true });
  for (const f of fs.readdirSync(recordsDir).filter((x) => x.endsWith('.json')).sort()) {
    const rec = JSON.parse(fs.readFileSync(path.join(recordsDir, f), 'utf8'));
    const name = f.slice(0, -5);
    const m = rec.mmproj;
    const bytes = mmprojBytes({ shape: m.shape, type: m.type, seed: m.seed });
    if (createHash('sha256').update(bytes).digest('hex') !== m.sha256) throw new Error(`${f}: the mmproj synthesized now differs from the record's`);
    fs.writeFileSync(path.join(outDir, `${name}.mmproj.gguf`), bytes);
    const a = rec.model.synth, arg = (k) => a[a.indexOf(k) + 1];
    const model = synthCached({ arch: arg('--arch'), shape: arg('--shape'), seed: Number(arg('--seed')), type: arg('--type'), sha256: rec.model.sha256 });
    if (createHash('sha256').update(fs.readFileSync(model)).digest('hex') !== rec.model.sha256) throw new Error(`${f}: the text model synthesized now differs from the record's`);
    const link = path.join(outDir, `${name}.model.gguf`);
    fs.rmSync(link, { force: true });
    fs.symlinkSync(path.resolve(model), link);
    for (const c of rec.cases) {
      for (const [i, [w, h]] of c.images.entries()) {
        const kind = rec.imageKind ?? 'test';
        const rgb = recordImage(kind, w, h, m.seed);
        const sha = createHash('sha256').update(await pngBytes(rgb, w, h)).digest('hex');
        if (sha !== c.pngSha256[i]) throw new Error(`${f}: image ${w}x${h} differs from the one llama.cpp saw`);
        const base = path.join(outDir, imageFileName(kind, w, h, m.seed));
        fs.writeFileSync(`${base}.rgb`, rgb);
        fs.writeFileSync(`${base}.ppm`, Buffer.concat([Buffer.from(`P6\n${w} ${h}\n255\n`), rgb]));
      }
    }
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const o = { shape: 'gemma3-tiny', type: 'F16', seed: 1, out: null };
  const a = process.argv.slice(2);
  if (a[0] === '--fixture') {
    await writeFixture(a[1], a[2]);
    process.exit(0);
  }
  for (let i = 0; i < a.length; i++) {
    const v = () => { if (i + 1 >= a.length) throw new Error(`${a[i]} needs a value`); return a[++i]; };
    if (a[i] === '--shape') o.shape = v();
    else if (a[i] === '--type') o.type = v();
    else if (a[i] === '--seed') o.seed = Number(v());
    else if (a[i] === '--out') o.out = v();
    else { console.error(`synth_mmproj: unknown argument ${a[i]}`); process.exit(2); }
  }
  if (!o.out) { console.error('usage: node tools/synth_mmproj.mjs --shape NAME [--type F32|F16|Q8_0] [--seed N] --out FILE.gguf'); process.exit(2); }
  fs.mkdirSync(path.dirname(path.resolve(o.out)), { recursive: true });
  fs.writeFileSync(o.out, mmprojBytes(o));
}

// ---- test images -------------------------------------------------------------------------------

/**
 * A deterministic RGB test image (w × h × 3 bytes, row-major): smooth gradients, a few blocks
 * of flat colour and noise, so that resampling, letterboxing and tiling all change the result.
 */
export function testImage(w, h, seed = 1) {
  const noise = uniform(seed, `image ${w}x${h}`, w * h * 3, 0, 24);
  const rgb = new Uint8Array(w * h * 3);
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const block = ((x * 4 / w) | 0) + 4 * ((y * 3 / h) | 0);
      for (let c = 0; c < 3; c++) {
        const i = (y * w + x) * 3 + c;
        const v = (c === 0 ? 255 * x / w : c === 1 ? 255 * y / h : ((block * 53) % 256)) + noise[i];
        rgb[i] = Math.max(0, Math.min(255, Math.round(v)));
      }
    }
  }
  return rgb;
}

/** A flat image (every pixel RGB 100, 150, 200): every resampling gives it back unchanged, so a
 *  record made with it checks everything but the resampling. */
export function flatImage(w, h) {
  const rgb = new Uint8Array(w * h * 3);
  for (let i = 0; i < w * h; i++) rgb.set([100, 150, 200], 3 * i);
  return rgb;
}

/** The image of a record: its kind ('test': testImage, 'flat': flatImage), size and seed. */
export function recordImage(kind, w, h, seed) {
  return kind === 'flat' ? flatImage(w, h) : testImage(w, h, seed);
}

/** The fixture's file name (without extension) of a record's image. */
export function imageFileName(kind, w, h, seed) {
  return kind === 'flat' ? `img-${w}x${h}-flat` : `img-${w}x${h}-s${seed}`;
}

/** PNG bytes (8-bit RGB, no alpha) of an RGB image, with pngjs. */
export async function pngBytes(rgb, w, h) {
  const { PNG } = (await import('pngjs')).default ?? (await import('pngjs'));
  const png = new PNG({ width: w, height: h, colorType: 2, inputColorType: 2, inputHasAlpha: false });
  Buffer.from(rgb.buffer, rgb.byteOffset, rgb.byteLength).copy(png.data);
  return PNG.sync.write(png, { colorType: 2, inputColorType: 2, inputHasAlpha: false });
}
