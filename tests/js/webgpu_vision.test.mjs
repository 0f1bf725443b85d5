// The vision encoder on the GPU (js/backend/webgpu/vision.js; Dawn on lavapipe or SwiftShader,
// tests/js/_webgpu.mjs): its own kernels (wgsl_vision.js: bidirectional attention (full or
// windowed), the table-driven RoPE, the
// projectors' average pooling and pixel shuffle, quick GELU) against scalar references here, and
// the whole encoder against the CPU's (src/vision/encoder.c through wlmjs_vision_encode_piece) on
// the same preprocessed pieces (wlmjs_vision_preprocess) of the synthesizer's tiny towers
// (tools/synth_mmproj.mjs: gemma3-tiny — one letterboxed piece, 2×2 pooling, RMS norm, the
// transposed input projection —, gemma3-rows256 — 1024 patches, Gemma's 256 rows —, idefics3-tiny — a 2×2 grid of tiles + the overview, pixel
// shuffle 2 —, lfm2-tiny — one piece of the image's own aspect, the positions resized, pixel
// unshuffle, LayerNorm and the 2-layer projector —, lfm2-p16 — 512-pixel tiles + a thumbnail —,
// qwen25vl-tiny — a grid of four attention windows, 2-D RoPE, the merger)
// in F32, F16 and Q8_0: every row's cosine ≥ 1 − 10⁻⁶ (issue 44 asks 0.9999; measured
// ≤ 1 − 3.6·10⁻⁹ for gemma3 / idefics3, ≤ 1 − 1.4·10⁻⁷ for lfm2, ≤ 1 − 2.1·10⁻⁸ for qwen2.5vl,
// on lavapipe), the largest
// absolute error reported. LFM2's resized positions against a float64 reference of the resize. The CPU
// multiplies Q8_0 weights by activations quantized to Q8_0 (the GPU keeps them in float): a Q8_0
// file's rows are held to that bound against the CPU on its dequantized weights, and to 0.999
// against the CPU on the file itself (measured 1 − 2.5·10⁻⁴). Bad input: a piece of the wrong size, a
// missing or misshapen tensor, a projector it does not run — each a named error.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { dawn, dequantizedCopy, kernelKit, rng, wasmReference } from './_webgpu.mjs';
import { mmprojBytes, testImage } from '../../tools/synth_mmproj.mjs';
import { ggufBytes, readGguf } from '../../tools/vocab_gguf.mjs';
import { createGpuVisionEncoder, encodeImageOnGpu, readMmproj } from '../../js/backend/webgpu/vision.js';
import { resizePositions } from '../../js/backend/webgpu/vision_grid.js';
import { attentionFullWgsl, geluQuickWgsl, mergeWgsl, ropeTableWgsl } from '../../js/backend/webgpu/wgsl_vision.js';
import { Pipelines } from '../../js/backend/webgpu/forward.js';

const { adapter, skip: why } = await dawn();
const skip = why || false;
const device = adapter ? await adapter.requestDevice({ requiredLimits: {
  maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize, maxBufferSize: adapter.limits.maxBufferSize } }) : null;
const x = wasmReference();
const kit = device ? kernelKit(device, x) : null;
const fbits = (v) => new Uint32Array(new Float32Array([v]).buffer)[0];
const seeded = (n, seed, scale = 1) => { const r = rng(seed); return Float32Array.from({ length: n }, () => r() * scale); };

test('attention_full: every patch over all patches (no mask), or over its window (Qwen2.5-VL) = the scalar softmax, several heads and key tiles', { skip }, async () => {
  for (const [n, H, hd, windowed] of [[5, 2, 8, false], [70, 3, 72, false], [130, 1, 256, false], [70, 3, 72, true], [200, 2, 16, true]]) {
    const W = H * hd, st = W + 4; // a row stride wider than the heads
    const q = seeded(n * st, 1, 1.5), k = seeded(n * st, 2, 1.5), v = seeded(n * st, 3);
    const A = new Float32Array(4 * n * st + 2 * n);
    A.set(q, 0); A.set(k, n * st); A.set(v, 2 * n * st);
    // windows: patch e attends to keys lo .. lo + cnt − 1 (some past one 64-key tile)
    const win = (e) => { const lo = windowed ? (e * 7) % n : 0; return [lo, windowed ? 1 + ((e * 13) % (n - lo)) : n]; };
    for (let e = 0; e < n; e++) A.set(win(e), 4 * n * st + 2 * e);
    const scale = 1 / Math.sqrt(hd);
    const [out] = await kit.run(attentionFullWgsl(), { A, params: [n, st, hd, 0, n * st, 2 * n * st, 3 * n * st, fbits(scale), windowed ? 4 * n * st : 0xffffffff], grid: [H, 1, n] });
    const got = new Float32Array(out);
    let worst = 0;
    for (let e = 0; e < n; e++) {
      const [lo, cnt] = win(e);
      for (let h = 0; h < H; h++) {
        const s = [];
        for (let j = lo; j < lo + cnt; j++) {
          let d = 0;
          for (let i = 0; i < hd; i++) d += q[e * st + h * hd + i] * k[j * st + h * hd + i];
          s.push(d * scale);
        }
        const m = Math.max(...s), p = s.map((z) => Math.exp(z - m)), sum = p.reduce((a, b) => a + b, 0);
        for (let i = 0; i < hd; i++) {
          let ref = 0;
          for (let j = 0; j < cnt; j++) ref += (p[j] / sum) * v[(lo + j) * st + h * hd + i];
          worst = Math.max(worst, Math.abs(got[3 * n * st + e * st + h * hd + i] - ref));
        }
      }
    }
    assert.ok(worst < 2e-5, `n ${n}, ${H} heads of ${hd}${windowed ? ', windowed' : ''}: max error ${worst}`);
  }
});

test('rope_table: NeoX pairs turned by a per-entry cos / sin table = wlm_rope_neox_ref', { skip }, async () => {
  for (const [n, H, hd] of [[3, 2, 16], [5, 1, 256], [4, 3, 8]]) {
    const st = H * hd + 3, half = hd / 2;
    const x = seeded(n * st, 31, 2), ang = seeded(n * half, 32, 3);
    const A = new Float32Array(n * st + 2 * n * half);
    A.set(x);
    for (let i = 0; i < n * half; i++) { A[n * st + i] = Math.fround(Math.cos(ang[i])); A[n * st + n * half + i] = Math.fround(Math.sin(ang[i])); }
    const [out] = await kit.run(ropeTableWgsl(), { A, params: [0, st, hd, n * st, n * st + n * half], grid: [H, 1, n] });
    const got = new Float32Array(out);
    for (let e = 0; e < n; e++) {
      for (let i = 0; i < st; i++) {
        const h = Math.floor(i / hd), d = i % hd;
        let ref = x[e * st + i];
        if (h < H) {
          const p = d % half, c = A[n * st + e * half + p], sn = A[n * st + n * half + e * half + p];
          const a = x[e * st + h * hd + p], b = x[e * st + h * hd + p + half];
          ref = d < half ? Math.fround(Math.fround(a * c) - Math.fround(b * sn)) : Math.fround(Math.fround(a * sn) + Math.fround(b * c));
        }
        assert.ok(Math.abs(got[e * st + i] - ref) <= 1e-6 * (1 + Math.abs(ref)), `n ${n} hd ${hd} entry ${e} element ${i}: ${got[e * st + i]} vs ${ref}`);
      }
    }
  }
});

test('merge: average pooling and pixel shuffle of a patch grid = the scalar definitions (encoder.c)', { skip }, async () => {
  for (const [gw, s, width] of [[8, 2, 64], [6, 3, 5], [4, 4, 70]]) {
    const n = gw * gw, T = (gw / s) ** 2, src = seeded(n * width, gw * 7 + s);
    for (const mode of [0, 1]) {
      const outLen = mode ? width * s * s : width;
      const A = new Float32Array(n * width + T * outLen);
      A.set(src);
      const [out] = await kit.run(mergeWgsl(), { A, params: [0, n * width, gw, s, width, mode], grid: [Math.ceil(outLen / 64), 1, T] });
      const got = new Float32Array(out, n * width * 4, T * outLen);
      const ref = new Float32Array(T * outLen);
      for (let R = 0; R < gw / s; R++) {
        for (let C = 0; C < gw / s; C++) {
          const t = R * (gw / s) + C;
          for (let dy = 0; dy < s; dy++) {
            for (let dx = 0; dx < s; dx++) {
              const p = (R * s + dy) * gw + C * s + dx;
              for (let c = 0; c < width; c++) {
                if (mode) ref[t * outLen + c + width * (dx + s * dy)] = src[p * width + c];
                else ref[t * outLen + c] = Math.fround(ref[t * outLen + c] + src[p * width + c]);
              }
            }
          }
          if (!mode) for (let c = 0; c < width; c++) ref[t * outLen + c] = Math.fround(ref[t * outLen + c] / (s * s));
        }
      }
      assert.deepEqual(got, ref, `grid ${gw}, s ${s}, width ${width}, ${mode ? 'pixel shuffle' : 'average pooling'}`);
    }
  }
});

/** x rounded to binary16, ties to even (Math.f16round, which Node 20 lacks): the quantum of x's
 *  binade (2^(e−10); 2^−24 below the normals), exact in doubles. */
function f16round(v) {
  if (!Number.isFinite(v) || v === 0) return v;
  const a = Math.abs(v);
  if (a >= 65520) return Math.sign(v) * Infinity;
  let e = Math.floor(Math.log2(a));
  if (2 ** e > a) e--;
  else if (2 ** (e + 1) <= a) e++;
  const q = e < -14 ? 2 ** -24 : 2 ** (e - 10);
  const r = a / q, lo = Math.floor(r), frac = r - lo;
  const m = frac > 0.5 || (frac === 0.5 && lo % 2 === 1) ? lo + 1 : lo;
  return Math.sign(v) * m * q;
}

test('gelu_quick: x·σ(1.702x) on binary16-rounded values (ggml\'s table) = the scalar form', { skip }, async () => {
  const len = 100, n = 3, A = seeded(len * n + 8, 9, 6);
  A[0] = 0; A[1] = -20; A[2] = 20; A[3] = 1e-6;
  const [out] = await kit.run(geluQuickWgsl(), { A, params: [4, len, len - 2], grid: [2, 1, n] });
  const got = new Float32Array(out);
  for (let i = 0; i < A.length; i++) {
    const e = i - 4, z = Math.floor(e / len), j = e - z * len;
    let ref = A[i];
    if (e >= 0 && z < n && j < len - 2) {
      const v = f16round(A[i]);
      ref = f16round(Math.fround(v * Math.fround(1 / Math.fround(1 + Math.fround(Math.exp(Math.fround(-1.702 * v)))))));
    }
    assert.ok(Math.abs(got[i] - ref) <= 2 ** -10 * Math.abs(ref) + 1e-7, `element ${i}: ${got[i]} vs ${ref}`);
  }
});

/** The CPU's pieces and rows of `rgb` (w × h) for mmproj `bytes`: {pieces: [{pixels, w, h, tokens, rows}],
 *  tokens (rows of an S × S piece), D}. LFM2's pieces have their own sizes and row counts. */
function cpuPieces(bytes, rgb, w, h) {
  const ptr = x.wlmjs_malloc(bytes.length) >>> 0, slot = x.wlmjs_malloc(32) >>> 0;
  new Uint8Array(x.memory.buffer, ptr, bytes.length).set(bytes);
  const v = x.wlmjs_vision_load(ptr, bytes.length, slot) >>> 0;
  assert.equal(new Int32Array(x.memory.buffer, slot, 1)[0], 0, 'the mmproj loads on the CPU');
  const tokens = x.wlmjs_vision_info(v, 9), D = x.wlmjs_vision_info(v, 6);
  const P = x.wlmjs_vision_info(v, 1), s = x.wlmjs_vision_info(v, 7);
  const img = x.wlmjs_malloc(rgb.length) >>> 0;
  new Uint8Array(x.memory.buffer, img, rgb.length).set(rgb);
  const pix = x.wlmjs_vision_preprocess(v, img, w, h, slot + 4, slot) >>> 0;
  assert.ok(pix, 'preprocessed');
  const [n, tw, th, lw, lh] = new Int32Array(x.memory.buffer, slot + 4, 5);
  const most = Math.max(tw * th, lw * lh) / (P * s) ** 2;
  const out = x.wlmjs_malloc(Math.max(tokens, most) * D * 4) >>> 0;
  const pieces = [];
  let at = pix;
  for (let i = 0; i < n; i++) {
    const [pw, ph] = i === n - 1 ? [lw, lh] : [tw, th];
    const T = (pw / P / s) * (ph / P / s);
    assert.equal(x.wlmjs_vision_encode_piece(v, at, pw, ph, out, 0, 1), 0, `CPU piece ${i}`);
    pieces.push({ pixels: new Float32Array(x.memory.buffer, at, 3 * pw * ph).slice(), w: pw, h: ph, tokens: T,
      rows: new Float32Array(x.memory.buffer, out, T * D).slice() });
    at += 3 * pw * ph * 4;
  }
  // a piece of another size is refused by C too
  assert.equal(x.wlmjs_vision_encode_piece(v, pix, tw + 1, th, out, 0, 1), -1 /* WLM_ERR_INVALID_ARG */);
  for (const p of [pix, out, img, slot]) x.wlmjs_free(p);
  x.wlm_vision_free(v);
  return { pieces, tokens, D };
}

const CASES = [];
for (const shape of ['gemma3-tiny', 'idefics3-tiny']) for (const type of ['F32', 'F16', 'Q8_0']) CASES.push({ shape, type });
CASES.push({ shape: 'gemma3-rows256', type: 'F16' }); // 1024 patches (16 key tiles of attention), 256 rows
// LFM2-VL: pieces of the image's own aspect (positions resized to each grid), pixel unshuffle,
// the input LayerNorm and the 2-layer projector
for (const type of ['F32', 'F16', 'Q8_0']) CASES.push({ shape: 'lfm2-tiny', type });
// LFM2's real patch geometry: an image cut into 512-pixel tiles (32 × 32 patches) + a thumbnail
CASES.push({ shape: 'lfm2-p16', type: 'F16' });
// Qwen2.5-VL: two patch kernels, RMSNorm, 2-D RoPE, window attention (2 of 4 blocks) over a grid
// of several windows, the SwiGLU MLP, the 2×2 merger and the rows back in raster order
for (const type of ['F32', 'F16', 'Q8_0']) CASES.push({ shape: 'qwen25vl-tiny', type });

for (const { shape, type } of CASES) {
  test(`vision ${shape} ${type}: the GPU encoder's rows = the CPU encoder's for every piece (cosine ≥ 1 − 10⁻⁶ a row)`, { skip }, async (t) => {
    const bytes = mmprojBytes({ shape, type, seed: 3 });
    const { info, tensors } = readMmproj(bytes);
    const [w, h] = { 'gemma3-tiny': [150, 90], 'gemma3-rows256': [300, 200], 'idefics3-tiny': [100, 70], // letterboxed; a 2×2 grid of tiles
      'lfm2-tiny': [100, 70], 'lfm2-p16': [1100, 560], 'qwen25vl-tiny': [230, 170] }[shape]; // one 96×72-ish piece; 512-pixel tiles and the thumbnail
    const rgb = testImage(w, h, 5);
    const cpu = cpuPieces(bytes, rgb, w, h);
    if (shape === 'idefics3-tiny') assert.equal(cpu.pieces.length, 5, 'four tiles and the overview');
    if (shape === 'lfm2-tiny') assert.ok(cpu.pieces.length === 1 && cpu.pieces[0].w !== cpu.pieces[0].h, 'one piece of its own aspect');
    if (shape === 'lfm2-p16') assert.ok(cpu.pieces.length > 2 && cpu.pieces[0].w === 512, 'tiles and a thumbnail');
    // a Q8_0 file's reference: the CPU on its weights dequantized to F32 (the same values; the
    // CPU's own Q8_0 run also rounds its activations to Q8_0, compared below with a wider bound).
    // F16 weights meet float activations on the CPU too: the file is its own reference.
    let ref = cpu;
    if (type === 'Q8_0') {
      const file = path.join(os.tmpdir(), `wasmlm-venc-${shape}-${type}.gguf`);
      fs.writeFileSync(file, bytes);
      ref = cpuPieces(fs.readFileSync(dequantizedCopy(file)), rgb, w, h);
    }
    const enc = await createGpuVisionEncoder(device, tensors, info);
    try {
      assert.equal(enc.tokens, cpu.tokens);
      assert.equal(enc.width, cpu.D);
      for (const p of cpu.pieces) assert.equal(enc.tokensOf(p.w, p.h), p.tokens);
      const worst = { ref: { cos: 1, abs: 0 }, cpu: { cos: 1, abs: 0 } };
      let maxRef = 0;
      for (const [i, p] of cpu.pieces.entries()) {
        const got = await enc.encodePiece(p.pixels, p.w, p.h);
        assert.equal(got.length, p.tokens * cpu.D);
        for (const [which, rows, bound] of [['ref', ref.pieces[i].rows, 1 - 1e-6], ['cpu', p.rows, type === 'Q8_0' ? 0.999 : 1 - 1e-6]]) {
          for (let r = 0; r < p.tokens; r++) {
            let ab = 0, aa = 0, bb = 0;
            for (let c = 0; c < cpu.D; c++) {
              const a = rows[r * cpu.D + c], b = got[r * cpu.D + c];
              ab += a * b; aa += a * a; bb += b * b;
              worst[which].abs = Math.max(worst[which].abs, Math.abs(a - b));
              maxRef = Math.max(maxRef, Math.abs(a));
            }
            const cos = ab / Math.sqrt(aa * bb);
            worst[which].cos = Math.min(worst[which].cos, cos);
            assert.ok(cos >= bound, `piece ${i} row ${r}: cosine ${cos} against the ${which === 'ref' ? 'reference' : 'CPU'}`);
          }
        }
      }
      const say = (w) => `worst 1 − cosine ${(1 - w.cos).toExponential(1)}, max abs error ${w.abs.toExponential(2)}`;
      t.diagnostic(`${cpu.pieces.length} piece(s) (${cpu.pieces.map((p) => `${p.w}×${p.h}`).join(', ')}) of ${cpu.pieces.map((p) => p.tokens).join(', ')} rows of ${cpu.D} (max |value| ${maxRef.toFixed(3)}): ` +
        (type !== 'Q8_0' ? say(worst.ref) : `vs the CPU on the dequantized weights: ${say(worst.ref)}; vs the CPU on the ${type} file: ${say(worst.cpu)}`));
      // a second run of the same piece gives the same rows (the buffers are reused)
      const p0 = cpu.pieces[cpu.pieces.length - 1];
      if (shape !== 'gemma3-rows256' && shape !== 'lfm2-p16') assert.deepEqual(await enc.encodePiece(p0.pixels, p0.w, p0.h), await enc.encodePiece(p0.pixels, p0.w, p0.h));
    } finally {
      enc.destroy();
    }
  });
}

/** An F32 mmproj's bytes with its key/values `keys` ({key: [type, value]}) set or added. */
function withKeys(bytes, keys) {
  const file = path.join(os.tmpdir(), `wasmlm-venc-keys-${process.pid}.gguf`);
  fs.writeFileSync(file, bytes);
  const g = readGguf(file);
  fs.rmSync(file);
  const kv = g.kv.filter(([k]) => !(k in keys));
  for (const [k, [type, value]] of Object.entries(keys)) kv.push([k, type, value]);
  const tensors = g.tensors.map((t) => {
    assert.equal(t.type, 0);
    const at = g.dataOffset + t.offset;
    return { name: t.name, ne: t.ne, type: 0, data: bytes.subarray(at, at + 4 * t.ne.reduce((a, b) => a * b, 1)) };
  });
  return ggufBytes(kv, tensors, g.alignment);
}

for (const [act, keys] of [['gelu_quick', { 'clip.use_gelu': ['bool', false] }], ['silu', { 'clip.use_gelu': ['bool', false], 'clip.use_silu': ['bool', true] }]]) {
  test(`vision gemma3-tiny F32, MLP activation ${act}: the GPU encoder's rows = the CPU encoder's`, { skip }, async (t) => {
    const bytes = withKeys(mmprojBytes({ shape: 'gemma3-tiny', type: 'F32', seed: 4 }), keys);
    const { info, tensors } = readMmproj(bytes);
    assert.equal(info.act, act);
    const cpu = cpuPieces(bytes, testImage(112, 112, 6), 112, 112);
    const enc = await createGpuVisionEncoder(device, tensors, info);
    try {
      const got = await enc.encodePiece(cpu.pieces[0].pixels, 112, 112);
      let worst = 1, abs = 0;
      for (let r = 0; r < cpu.tokens; r++) {
        let ab = 0, aa = 0, bb = 0;
        for (let c = 0; c < cpu.D; c++) {
          const a = cpu.pieces[0].rows[r * cpu.D + c], b = got[r * cpu.D + c];
          ab += a * b; aa += a * a; bb += b * b;
          abs = Math.max(abs, Math.abs(a - b));
        }
        worst = Math.min(worst, ab / Math.sqrt(aa * bb));
      }
      assert.ok(worst >= 1 - 1e-6, `worst cosine ${worst}`);
      t.diagnostic(`worst 1 − cosine ${(1 - worst).toExponential(1)}, max abs error ${abs.toExponential(2)}`);
    } finally {
      enc.destroy();
    }
  });
}

/** PyTorch's bilinear antialiased resize (interpolate(..., antialias=True), align_corners false)
 *  of an n × n grid of c-vectors to gw × gh, separable, in float64 (tests/c/test_vision.c's
 *  reference of wlm_resize_positions): the independent reference of resizePositions. */
function refResize(src, n, c, gw, gh) {
  const weights = (out) => {
    const sc = out / n, sup = sc < 1 ? 1 / sc : 1;
    return Array.from({ length: out }, (_, o) => {
      const w = Array.from({ length: n }, (_, i) => { const d = Math.abs((i + 0.5 - (o + 0.5) / sc) / sup); return d < 1 ? 1 - d : 0; });
      const tot = w.reduce((a, b) => a + b, 0);
      return w.map((v) => v / tot);
    });
  };
  const wx = weights(gw), wy = weights(gh), out = new Float64Array(gw * gh * c);
  for (let y = 0; y < gh; y++) {
    for (let x = 0; x < gw; x++) {
      for (let ch = 0; ch < c; ch++) {
        let acc = 0;
        for (let sy = 0; sy < n; sy++) for (let sx = 0; sx < n; sx++) acc += wy[y][sy] * wx[x][sx] * src[(sy * n + sx) * c + ch];
        out[(y * gw + x) * c + ch] = acc;
      }
    }
  }
  return out;
}

test('resizePositions (LFM2\'s learned positions per grid) = the float64 antialiased bilinear resize; the same size is the identity', () => {
  const n = 16, c = 5, src = seeded(n * n * c, 21, 2);
  assert.deepEqual(resizePositions(src, n, c, n, n), src);
  for (const [gw, gh] of [[24, 18], [8, 12], [32, 32], [7, 30], [1, 1], [16, 9]]) {
    const got = resizePositions(src, n, c, gw, gh), ref = refResize(src, n, c, gw, gh);
    let worst = 0;
    for (let i = 0; i < ref.length; i++) worst = Math.max(worst, Math.abs(got[i] - ref[i]));
    assert.ok(worst < 1e-5, `16×16 → ${gw}×${gh}: max error ${worst}`);
  }
});

for (const [shape, sizes] of [['lfm2-tiny', [[64, 64], [96, 72], [72, 96], [128, 64], [40, 160], [80, 80], [96, 72]]],
  ['qwen25vl-tiny', [[56, 56], [112, 84], [140, 196], [252, 56], [84, 84], [168, 168], [112, 84]]]]) {
test(`vision ${shape} F32: pieces of six sizes (more than the programs kept) = the CPU encoder's; a size built again gives the same rows; a size off the grid is refused`, { skip }, async (t) => {
  const bytes = mmprojBytes({ shape, type: 'F32', seed: 5 });
  const { info, tensors } = readMmproj(bytes);
  const ptr = x.wlmjs_malloc(bytes.length) >>> 0, slot = x.wlmjs_malloc(4) >>> 0;
  new Uint8Array(x.memory.buffer, ptr, bytes.length).set(bytes);
  const v = x.wlmjs_vision_load(ptr, bytes.length, slot) >>> 0;
  const D = x.wlmjs_vision_info(v, 6);
  const enc = await createGpuVisionEncoder(device, tensors, info);
  try {
    const m = info.patchSize * info.scaleFactor;
    const first = new Map();
    let worst = 1;
    for (const [i, [w, h]] of sizes.entries()) {
      const pixels = seeded(3 * w * h, 100 + w + h, 1.5); // the same pixels for the same size
      const T = enc.tokensOf(w, h);
      assert.equal(T, (w / m) * (h / m));
      const pp = x.wlmjs_malloc(pixels.byteLength) >>> 0, out = x.wlmjs_malloc(T * D * 4) >>> 0;
      new Float32Array(x.memory.buffer, pp, pixels.length).set(pixels);
      assert.equal(x.wlmjs_vision_encode_piece(v, pp, w, h, out, 0, 1), 0);
      const cpu = new Float32Array(x.memory.buffer, out, T * D).slice();
      x.wlmjs_free(pp); x.wlmjs_free(out);
      const got = await enc.encodePiece(pixels, w, h);
      assert.equal(got.length, T * D);
      for (let r = 0; r < T; r++) {
        let ab = 0, aa = 0, bb = 0;
        for (let c = 0; c < D; c++) { const a = cpu[r * D + c], b = got[r * D + c]; ab += a * b; aa += a * a; bb += b * b; }
        const cos = ab / Math.sqrt(aa * bb);
        worst = Math.min(worst, cos);
        assert.ok(cos >= 1 - 1e-6, `${w}×${h} row ${r}: cosine ${cos}`);
      }
      const key = `${w}x${h}`;
      if (first.has(key)) assert.deepEqual(got, first.get(key), `${key} built again (piece ${i})`);
      else first.set(key, got);
    }
    t.diagnostic(`worst 1 − cosine ${(1 - worst).toExponential(1)}`);
    assert.equal(enc.tokensOf(m * 2 - 4, m * 2), 0);
    await assert.rejects(enc.encodePiece(new Float32Array(3 * (2 * m - 4) * 2 * m), 2 * m - 4, 2 * m), { code: 'WLM_ERR_INVALID_ARG', message: new RegExp(`multiples of ${m}`) });
    await assert.rejects(enc.encodePiece(new Float32Array(3 * m * m - 1), m, m), { code: 'WLM_ERR_INVALID_ARG', message: new RegExp(`Float32Array of 3 × ${m} × ${m}`) });
  } finally {
    enc.destroy();
    x.wlm_vision_free(v);
    x.wlmjs_free(slot);
  }
});
}

test('encodeImageOnGpu (wlmjs_image_embd_from_rows): the GPU rows of every piece as the image wlmjs_image_encode makes (fields, rows as given), refusing a wrong count or a non-finite row', { skip }, async () => {
  for (const [shape, w, h] of [['idefics3-tiny', 100, 70], ['gemma3-tiny', 60, 150], ['lfm2-tiny', 100, 70], ['qwen25vl-tiny', 230, 170]]) {
    const bytes = mmprojBytes({ shape, type: 'F16', seed: 3 });
    const { info, tensors } = readMmproj(bytes);
    const rgb = testImage(w, h, 7);
    const { pieces } = cpuPieces(bytes, rgb, w, h);
    const enc = await createGpuVisionEncoder(device, tensors, info);
    const parts = [];
    for (const p of pieces) parts.push(await enc.encodePiece(p.pixels, p.w, p.h));
    const rows = new Float32Array(parts.reduce((a, p) => a + p.length, 0));
    parts.reduce((at, p) => { rows.set(p, at); return at + p.length; }, 0);

    const ptr = x.wlmjs_malloc(bytes.length) >>> 0, slot = x.wlmjs_malloc(4) >>> 0;
    new Uint8Array(x.memory.buffer, ptr, bytes.length).set(bytes);
    const v = x.wlmjs_vision_load(ptr, bytes.length, slot) >>> 0;
    const img = x.wlmjs_malloc(rgb.length) >>> 0, rp = x.wlmjs_malloc(rows.byteLength + 4) >>> 0;
    new Uint8Array(x.memory.buffer, img, rgb.length).set(rgb);
    new Float32Array(x.memory.buffer, rp, rows.length).set(rows);
    const status = () => new Int32Array(x.memory.buffer, slot, 1)[0];
    const cpu = x.wlmjs_image_encode(v, img, w, h, 0, 1, slot) >>> 0;
    assert.equal(status(), 0);
    const gpu = await encodeImageOnGpu(x, v, enc, img, w, h);
    await assert.rejects(encodeImageOnGpu(x, v, enc, img, 0, h), { code: 'WLM_ERR_INVALID_ARG', message: /0×\d+ pixels is outside/ });
    enc.destroy();
    const fields = (e) => [0, 1, 2, 3, 4, 5, 6].map((i) => x.wlmjs_image_embd_field(e, i));
    assert.deepEqual(fields(gpu), fields(cpu), `${shape}: the same layout`);
    const embd = new Uint32Array(x.memory.buffer, gpu + 28, 1)[0];
    assert.deepEqual(new Float32Array(x.memory.buffer, embd, rows.length), rows, 'the rows as given');
    const again = x.wlmjs_image_embd_from_rows(v, w, h, rp, rows.length, slot) >>> 0;
    assert.equal(status(), 0, 'from rows');
    assert.deepEqual(new Float32Array(x.memory.buffer, new Uint32Array(x.memory.buffer, again + 28, 1)[0], rows.length), rows);
    x.wlmjs_image_embd_free(again);
    assert.equal(x.wlmjs_image_embd_from_rows(v, w, h, rp, rows.length + 1, slot), 0);
    assert.equal(status(), -1);
    assert.match(new TextDecoder().decode(new Uint8Array(x.memory.buffer, x.wlm_vision_errmsg(v) >>> 0, 200)).split('\0')[0], /floats of rows given/);
    new Float32Array(x.memory.buffer, rp, rows.length)[rows.length - 1] = NaN;
    assert.equal(x.wlmjs_image_embd_from_rows(v, w, h, rp, rows.length, slot), 0);
    assert.equal(status(), -1, 'a NaN is refused');
    for (const e of [cpu, gpu]) x.wlmjs_image_embd_free(e);
    for (const p of [img, rp, slot]) x.wlmjs_free(p);
    x.wlm_vision_free(v);
  }
});

test('vision on the GPU: bad input gets a named error', { skip }, async () => {
  const { info, tensors } = readMmproj(mmprojBytes({ shape: 'gemma3-tiny', type: 'F32', seed: 3 }));
  const enc = await createGpuVisionEncoder(device, tensors, info);
  try {
    const S = info.imageSize;
    await assert.rejects(enc.encodePiece(new Float32Array(3 * 64 * 64), 64, 64), { code: 'WLM_ERR_INVALID_ARG', message: new RegExp(`takes ${S}×${S}`) });
    await assert.rejects(enc.encodePiece(new Float32Array(5), S, S), { code: 'WLM_ERR_INVALID_ARG', message: /Float32Array of 3 × / });
    // the queue goes on after a refused call
    assert.equal((await enc.encodePiece(new Float32Array(3 * S * S), S, S)).length, enc.tokens * enc.width);
  } finally {
    enc.destroy();
  }
  await assert.rejects(enc.encodePiece(new Float32Array(3 * info.imageSize ** 2), info.imageSize, info.imageSize), { code: 'WLM_ERR_STATE' });
  const missing = new Map(tensors);
  missing.delete('v.blk.1.attn_k.weight');
  await assert.rejects(createGpuVisionEncoder(device, missing, info), { code: 'WLM_ERR_FORMAT', message: /'v\.blk\.1\.attn_k\.weight' is missing/ });
  const misshapen = new Map(tensors);
  misshapen.set('v.post_ln.bias', { ...tensors.get('v.post_ln.bias'), ne: [info.nEmbd + 1] });
  await assert.rejects(createGpuVisionEncoder(device, misshapen, info), { code: 'WLM_ERR_FORMAT', message: /'v\.post_ln\.bias' has shape/ });
  assert.throws(() => readMmproj(withKeys(mmprojBytes({ shape: 'gemma3-tiny', type: 'F32' }), { 'clip.projector_type': ['str', 'llava'] })),
    { code: 'WLM_ERR_UNSUPPORTED', message: /not 'llava'/ });
  assert.throws(() => readMmproj(new Uint8Array(16)), { code: 'WLM_ERR_FORMAT' });
  // Qwen2.5-VL's keys, as mmproj.c checks them
  const qwen = mmprojBytes({ shape: 'qwen25vl-tiny', type: 'F32', seed: 3 });
  assert.throws(() => readMmproj(withKeys(qwen, { 'clip.vision.spatial_merge_size': ['u32', 3] })), { code: 'WLM_ERR_UNSUPPORTED', message: /spatial_merge_size 3/ });
  assert.throws(() => readMmproj(withKeys(qwen, { 'clip.vision.n_wa_pattern': ['str', 'x'] })), { code: 'WLM_ERR_FORMAT', message: /n_wa_pattern/ });
  assert.throws(() => readMmproj(withKeys(qwen, { 'clip.vision.window_size': ['u32', 20] })), { code: 'WLM_ERR_FORMAT', message: /window_size 20/ });
  assert.equal(readMmproj(withKeys(qwen, { 'clip.vision.window_size': ['u32', 56] })).info.window, 56);
  const q = readMmproj(qwen);
  await assert.rejects(createGpuVisionEncoder(device, q.tensors, { ...q.info, window: undefined }), { code: 'WLM_ERR_FORMAT', message: /window_size/ });
});

test('vision on the GPU: a fuzz of mmproj bytes (idefics3, lfm2, qwen2.5vl; cut, bytes changed) gets WasmlmErrors or an encoder, never another exception', { skip, timeout: 300000 }, async (t) => {
  const bases = ['idefics3-tiny', 'lfm2-tiny', 'qwen25vl-tiny'].map((shape) => mmprojBytes({ shape, type: 'Q8_0', seed: 2 }));
  const r = rng(11);
  let built = 0, refused = 0;
  const pipelines = new Pipelines(device); // compiled once (SwiftShader's compiles are slow)
  for (let i = 0; i < 285; i++) {
    const base = bases[i < 150 ? 0 : i < 240 ? 1 : 2];
    let b = Uint8Array.from(base);
    if (i % 3 === 0) b = b.subarray(0, Math.floor(((r() + 1) / 2) * b.length));
    else {
      const header = 2048; // mostly the header: keys, tensor shapes and offsets
      for (let k = 0; k < 1 + (i % 4); k++) b[Math.floor(((r() + 1) / 2) * (i % 2 ? header : b.length))] = (r() + 1) * 128;
    }
    try {
      const { info, tensors } = readMmproj(b);
      const enc = await createGpuVisionEncoder(device, tensors, info, { pipelines });
      // a small piece where the tower takes any size (lfm2, qwen2.5vl: 2 × 2 merged tokens)
      const side = ['lfm2', 'qwen2.5vl_merger'].includes(info.projector) ? 2 * info.patchSize * info.scaleFactor : info.imageSize;
      const rows = await enc.encodePiece(new Float32Array(3 * side * side), side, side);
      assert.equal(rows.length, enc.tokensOf(side, side) * enc.width);
      enc.destroy();
      built++;
    } catch (e) {
      if (e?.name !== 'WasmlmError') throw new Error(`mutation ${i}: ${e?.stack ?? e}`);
      refused++;
    }
  }
  t.diagnostic(`${refused} refused, ${built} built and run`);
  assert.ok(refused > 50 && built > 10, `${refused} refused, ${built} built`);
});

test('readMmproj: the hyperparameters C reads (wlmjs_vision_info)', () => {
  for (const shape of ['gemma3-tiny', 'idefics3-tiny', 'lfm2-tiny', 'qwen25vl-tiny']) {
    const bytes = mmprojBytes({ shape, type: 'F16', seed: 3 });
    const { info } = readMmproj(bytes);
    const ptr = x.wlmjs_malloc(bytes.length) >>> 0, slot = x.wlmjs_malloc(4) >>> 0;
    new Uint8Array(x.memory.buffer, ptr, bytes.length).set(bytes);
    const v = x.wlmjs_vision_load(ptr, bytes.length, slot) >>> 0;
    const g = (i) => x.wlmjs_vision_info(v, i);
    assert.deepEqual([info.imageSize, info.patchSize, info.nEmbd, info.nFf, info.nLayers, info.nHeads, info.scaleFactor],
      [g(0), g(1), g(2), g(3), g(4), g(5), g(7)], shape);
    assert.equal(info.act, shape === 'qwen25vl-tiny' ? 'silu' : 'gelu');
    assert.ok(info.eps > 0 && info.eps < 1e-3);
    x.wlm_vision_free(v);
    x.wlmjs_free(slot);
  }
});
