// wgsl_vision.js — the WGSL kernels only the vision encoder (vision.js) needs, each the GPU form
// of a step of src/vision/encoder.c, with a scalar reference in tests/js/webgpu_vision.test.mjs:
//   attention_full  bidirectional softmax attention of every patch over all the piece's patches
//                   (SigLIP: no mask, no cache; encoder.c att_chunk → kernels' attention)
//   merge           the projector's token merge: k×k average pooling (gemma3) or s×s pixel
//                   shuffle (idefics3), encoder.c's `project:` step
//   gelu_quick      ggml's quick GELU x·σ(1.702x) on binary16-rounded values (encoder.c
//                   gelu_quick1), for towers without clip.use_gelu
// The tower's products, norms, GELU / SiLU and additions are the text model's kernels
// (wgsl_matmat.js, wgsl_ops.js). Bindings as every kernel of wgsl_ops.js: the activations A at 0,
// the 16 parameter words at 1; the entry (a patch or a merged token) is workgroup_id.z.

import { F16V } from './wgsl_quant.js';
import { F2H, HEADER, WG } from './wgsl_ops.js';

/** attention_full: the largest head size (each invocation keeps HEAD / WG output dimensions). */
export const VISION_MAX_HEAD = 256;

/**
 * out[e][h·hd + d] = Σ_j softmax_j(scale · q_e,h · k_j,h) · v_j,h[d] over the n patches j (no
 * mask), for head h = workgroup x, patch e = workgroup z. The query's head is read into
 * workgroup memory once; keys are taken WG at a time: each
 * invocation scores one (a dot product over the head), the tile's maximum and sum are reduced in
 * workgroup memory, and each invocation adds the tile's weighted values to its dimensions
 * (d = t, t + WG, …) with a running maximum (one pass, no score buffer). Params: 0 n, 1 stride
 * (floats between patches in q, k, v and out), 2 hd, 3 q_off, 4 k_off, 5 v_off, 6 out_off,
 * 7 scale (f32).
 */
export function attentionFullWgsl() {
  const D = VISION_MAX_HEAD / WG;
  return `${HEADER}
var<workgroup> pw: array<f32, ${WG}>;
var<workgroup> red: array<f32, ${WG}>;
var<workgroup> qs: array<f32, ${VISION_MAX_HEAD}>; // the query's head, read once
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let n = pu(0u);
  let st = pu(1u);
  let hd = pu(2u);
  let hb = wg.x * hd;
  let q0 = pu(3u) + wg.z * st + hb;
  let scale = pf(7u);
  for (var d = t; d < hd; d += ${WG}u) { qs[d] = A[q0 + d]; }
  workgroupBarrier();
  var m = -3.0e38;
  var l = 0.0;
  var acc: array<f32, ${D}>;
  for (var j0 = 0u; j0 < n; j0 += ${WG}u) {
    let j = j0 + t;
    var s = -3.0e38;
    if (j < n) {
      let k0 = pu(4u) + j * st + hb;
      var dot = 0.0;
      for (var d = 0u; d < hd; d++) { dot += qs[d] * A[k0 + d]; }
      s = dot * scale;
    }
    red[t] = s;
    workgroupBarrier();
    for (var h = ${WG / 2}u; h > 0u; h >>= 1u) {
      if (t < h) { red[t] = max(red[t], red[t + h]); }
      workgroupBarrier();
    }
    let mn = max(m, red[0]);
    workgroupBarrier();
    let p = select(0.0, exp(s - mn), j < n);
    pw[t] = p;
    red[t] = p;
    workgroupBarrier();
    for (var h = ${WG / 2}u; h > 0u; h >>= 1u) {
      if (t < h) { red[t] += red[t + h]; }
      workgroupBarrier();
    }
    let corr = exp(m - mn);
    l = l * corr + red[0];
    m = mn;
    let cnt = min(${WG}u, n - j0);
    for (var c = 0u; c < ${D}u; c++) {
      let d = t + c * ${WG}u;
      if (d < hd) {
        var a = acc[c] * corr;
        for (var jj = 0u; jj < cnt; jj++) { a += pw[jj] * A[pu(5u) + (j0 + jj) * st + hb + d]; }
        acc[c] = a;
      }
    }
    workgroupBarrier();
  }
  for (var c = 0u; c < ${D}u; c++) {
    let d = t + c * ${WG}u;
    if (d < hd) { A[pu(6u) + wg.z * st + hb + d] = acc[c] / l; }
  }
}`;
}

/**
 * The projector's merge of a gw-wide patch grid (rows of `width` floats at src_off, raster order)
 * into token z of the (gw/s)-wide merged grid, R = z / (gw/s), C = z % (gw/s):
 *   mode 0 (average pooling): out[c] = (Σ_dy Σ_dx src[(R·s + dy)·gw + C·s + dx][c]) / s², the sum in
 *          (dy, dx) order as encoder.c; width floats a token
 *   mode 1 (pixel shuffle): out[c + width·(dx + s·dy)] = src[(R·s + dy)·gw + C·s + dx][c]
 *          (wlm_pixel_unshuffle); width·s² floats a token
 * Params: 0 src_off, 1 dst_off, 2 gw, 3 s, 4 width, 5 mode. Grid: x covers a token's outputs
 * (WG each), z the tokens.
 */
export function mergeWgsl() {
  return `${HEADER}
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let gw = pu(2u);
  let s = pu(3u);
  let width = pu(4u);
  let gx = gw / s;
  let r = wg.z / gx;
  let cc = wg.z % gx;
  let i = wg.x * ${WG}u + t;
  if (pu(5u) == 0u) {
    if (i >= width) { return; }
    var sum = 0.0;
    for (var dy = 0u; dy < s; dy++) {
      for (var dx = 0u; dx < s; dx++) { sum += A[pu(0u) + ((r * s + dy) * gw + cc * s + dx) * width + i]; }
    }
    A[pu(1u) + wg.z * width + i] = sum / f32(s * s);
    return;
  }
  if (i >= width * s * s) { return; }
  let c = i % width;
  let b = i / width;
  let dy = b / s;
  let dx = b % s;
  A[pu(1u) + wg.z * width * s * s + i] = A[pu(0u) + ((r * s + dy) * gw + cc * s + dx) * width + c];
}`;
}

/**
 * ggml's quick GELU on its binary16 table, in place: A[y + z·estride + i] = h(h(x)·σ(1.702·h(x)))
 * with h the rounding to binary16 (wlm_fp32_to_fp16 → wlm_fp16_to_fp32), for i < len. Params:
 * 0 y_off, 1 y_estride, 2 len.
 */
export function geluQuickWgsl() {
  return `${HEADER}
${F2H}
${F16V}
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let i = wg.x * ${WG}u + t;
  if (i >= pu(2u)) { return; }
  let y = pu(0u) + wg.z * pu(1u) + i;
  let v = f16v(f2h(A[y]));
  A[y] = f16v(f2h(v * (1.0 / (1.0 + exp(-1.702 * v)))));
}`;
}
