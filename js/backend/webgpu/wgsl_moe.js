// wgsl_moe.js — the WGSL kernels of a mixture-of-experts feed-forward and of gpt-oss's attention
// sinks, the GPU forms of src/model/moe.c and forward.c's apply_sinks: moe_route (an entry's
// router logits → the chosen experts and their weights), moe_matvec (MUL_MAT_ID: one chosen
// expert's matrix times an entry's activations per (entry, slot) pair, the expert read from the
// route's output in the activation buffer, so no readback), moe_act (gpt-oss's clamped SwiGLU;
// SiLU and GELU experts use wgsl_ops.js's glu), moe_sum (the weighted sum of an entry's expert
// outputs in slot order, onto the stream) and sinks (a head's attention output times
// 1 / (1 + e^(sink − lse))).
//
// Bindings and parameters as wgsl_ops.js's kernels (A at 0, 16 parameter words at 1). A pair p of
// an entry z and slot j (p = z·k + j) is workgroup z of moe_matvec and moe_act; an entry's route
// (ids then weights, 2k floats) lies at route_off + z·route_estride, the ids as exact floats.

import { GPU_TYPES, W_SUB_GENERIC, WGSL_BYTES, WGSL_WORDS } from './wgsl_quant.js';
import { HEADER, NONE, WG } from './wgsl_ops.js';

/** The most experts a token uses that the route kernel keeps (gpt-oss 4, Qwen3-MoE 8). */
export const MAX_EXPERT_USED = 32;

/**
 * The router of each entry z (workgroup z, one invocation: at most a few hundred experts), as
 * moe.c's route(): logits z[e] = A[z_off + z·z_estride + e] (+ V[router_b + e]); scores by
 * `gating` (1 softmax over all, ggml's order: max, exp, sum, × 1/sum; 2 sigmoid; 3 the raw logits,
 * gpt-oss); the k best of score (+ V[probs_b + e], which steers the choice only), best first, a
 * tie to the lower expert; weights the chosen scores (gating 3: a softmax over the k), divided by
 * their sum clamped below at 2^-14 when norm_w, times w_scale when it is neither 0 nor 1. Writes
 * ids (as floats) at route_off + z·route_estride + j and weights at … + k + j; the scores
 * overwrite the logits. Params: 0 z_off, 1 z_estride, 2 n_expert, 3 k, 4 gating, 5 norm_w,
 * 6 w_scale (f32), 7 router_b (NONE: none), 8 probs_b (NONE: none), 9 route_off,
 * 10 route_estride.
 */
export function moeRouteWgsl() {
  return `${HEADER}
@group(0) @binding(2) var<storage, read> V: array<f32>;
@compute @workgroup_size(1)
fn main(@builtin(workgroup_id) wg: vec3<u32>) {
  let z0 = pu(0u) + wg.z * pu(1u);
  let E = pu(2u);
  let K = pu(3u);
  let gating = pu(4u);
  let rb = pu(7u);
  let pb = pu(8u);
  let r0 = pu(9u) + wg.z * pu(10u);
  if (rb != ${NONE}u) { for (var e = 0u; e < E; e++) { A[z0 + e] = A[z0 + e] + V[rb + e]; } }
  if (gating == 1u) {
    var mx = A[z0];
    for (var e = 1u; e < E; e++) { mx = max(mx, A[z0 + e]); }
    var sum = 0.0;
    for (var e = 0u; e < E; e++) { let v = exp(A[z0 + e] - mx); A[z0 + e] = v; sum += v; }
    let inv = 1.0 / sum;
    for (var e = 0u; e < E; e++) { A[z0 + e] = A[z0 + e] * inv; }
  } else if (gating == 2u) {
    for (var e = 0u; e < E; e++) { A[z0 + e] = 1.0 / (1.0 + exp(-A[z0 + e])); }
  }
  var ids: array<u32, ${MAX_EXPERT_USED}>;
  var w: array<f32, ${MAX_EXPERT_USED}>;
  for (var j = 0u; j < K; j++) {
    var best = ${NONE}u;
    var bv = 0.0;
    for (var e = 0u; e < E; e++) {
      var taken = false;
      for (var i = 0u; i < j; i++) { taken = taken || ids[i] == e; }
      if (taken) { continue; }
      var v = A[z0 + e];
      if (pb != ${NONE}u) { v = v + V[pb + e]; }
      if (best == ${NONE}u || v > bv) { best = e; bv = v; }
    }
    ids[j] = best;
    w[j] = A[z0 + best];
  }
  if (gating == 3u) {
    var mx = w[0];
    for (var j = 1u; j < K; j++) { mx = max(mx, w[j]); }
    var sum = 0.0;
    for (var j = 0u; j < K; j++) { w[j] = exp(w[j] - mx); sum += w[j]; }
    let inv = 1.0 / sum;
    for (var j = 0u; j < K; j++) { w[j] = w[j] * inv; }
  }
  if (pu(5u) != 0u) {
    var sum = 0.0;
    for (var j = 0u; j < K; j++) { sum += w[j]; }
    sum = max(sum, 6.103515625e-5);
    for (var j = 0u; j < K; j++) { w[j] = w[j] / sum; }
  }
  let sc = pf(6u);
  if (sc != 0.0 && sc != 1.0) { for (var j = 0u; j < K; j++) { w[j] = w[j] * sc; } }
  for (var j = 0u; j < K; j++) {
    A[r0 + j] = f32(ids[j]);
    A[r0 + K + j] = w[j];
  }
}`;
}

/**
 * MUL_MAT_ID: for pair p = workgroup z (entry p / k, slot p % k) whose expert e (the route's id)
 * lies in [e0, e1), the `rows` rows of expert e in W (a buffer holding experts e0 .. e1 − 1 back to
 * back, each rows × row_bytes) times the activations x: out[p][row] = (Σ_i W_e[row][i] · x[i]
 * (+ V[bias + e·rows + row])) (· V[scale + e]: Gemma 4's per-expert output scale, moe.c's
 * exp_out_scale; its fused gate/up tensor is an expert of 2 · expert_ff rows, gate then up);
 * pairs of other experts are skipped (a tensor split over several buffers has one dispatch per
 * buffer). x is A[x_off + z·x_estride] with z the entry, or the pair
 * when x_pair (the down product reads its pair's activations). `tpr` invocations share a row
 * (wgsl_ops.js's matvecThreadsPerRow), a workgroup covers WG / tpr rows of workgroup g = y·nx + x;
 * sums a 32-element sub-block a step where cols is a multiple of 32, else an element a step
 * (matvecWgsl's order). Params: 0 rows, 1 cols, 2 row_bytes, 3 x_off, 4 x_estride, 5 x_pair,
 * 6 y_off, 7 y_estride (per pair), 8 route_off, 9 route_estride, 10 k, 11 e0, 12 e1, 13 bias
 * (NONE: none), 14 scale (NONE: none).
 */
export function moeMatvecWgsl(type, { tpr = WG } = {}) {
  const t = GPU_TYPES[type];
  const reduce = tpr === 1 ? '' : /* wgsl */ `
  red[t] = s;
  workgroupBarrier();
  for (var h = ${tpr / 2}u; h > 0u; h >>= 1u) {
    if (lane < h) { red[t] += red[t + h]; }
    workgroupBarrier();
  }
  s = red[t];`;
  return `${HEADER}
@group(0) @binding(2) var<storage, read> W: array<u32>;
@group(0) @binding(3) var<storage, read> V: array<f32>;
${WGSL_BYTES}
${t.wgsl}
${WGSL_WORDS}
${t.wgsl4}
${t.wgsl32 ?? W_SUB_GENERIC}
const BLK = ${t.blk}u;
const BLK_BYTES = ${t.bytes}u;
const TPR = ${tpr}u;
var<workgroup> red: array<f32, ${WG}>;
var<workgroup> ex: u32;
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>,
        @builtin(local_invocation_index) t: u32) {
  let g = wg.y * nw.x + wg.x;
  if (g * (${WG}u / TPR) >= pu(0u)) { return; }
  let K = pu(10u);
  let z = wg.z / K;
  if (t == 0u) { ex = u32(A[pu(8u) + z * pu(9u) + wg.z % K]); }
  let e = workgroupUniformLoad(&ex);
  if (e < pu(11u) || e >= pu(12u)) { return; }
  let lane = t % TPR;
  let row = g * (${WG}u / TPR) + t / TPR;
  let live = row < pu(0u);
  let cols = pu(1u);
  let base = ((e - pu(11u)) * pu(0u) + row) * pu(2u);
  let x0 = pu(3u) + select(z, wg.z, pu(5u) != 0u) * pu(4u);
  var s = 0.0;
  if (live) {
    if (cols % 32u == 0u) {
      for (var sb = lane; sb < cols / 32u; sb += TPR) {
        let w = w_sub(base, sb);
        let a = x0 + 32u * sb;
        for (var i = 0u; i < 8u; i++) {
          let c = a + 4u * i;
          s += dot(w[i], vec4<f32>(A[c], A[c + 1u], A[c + 2u], A[c + 3u]));
        }
      }
    } else {
      for (var i = lane; i < cols; i += TPR) {
        s += w_get(base + (i / BLK) * BLK_BYTES, i % BLK) * A[x0 + i];
      }
    }
  }
${reduce}
  if (live && lane == 0u) {
    if (pu(13u) != ${NONE}u) { s = s + V[pu(13u) + e * pu(0u) + row]; }
    if (pu(14u) != ${NONE}u) { s = s * V[pu(14u) + e]; }
    A[pu(6u) + wg.z * pu(7u) + row] = s;
  }
}`;
}

/**
 * gpt-oss's expert activation (ggml's swiglu_oai, α 1.702, limit 7; moe.c's expert_act) over
 * i < len of pair z: g = min(gate, 7), u = clamp(up, −7, 7), gate ← g · σ(1.702 g) · (u + 1).
 * Params: 0 g_off, 1 g_estride, 2 u_off, 3 u_estride, 4 len.
 */
export function moeActWgsl() {
  return `${HEADER}
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let i = wg.x * ${WG}u + t;
  if (i >= pu(4u)) { return; }
  let gi = pu(0u) + wg.z * pu(1u) + i;
  let x = min(A[gi], 7.0);
  let y = clamp(A[pu(2u) + wg.z * pu(3u) + i], -7.0, 7.0);
  A[gi] = x / (1.0 + exp(-1.702 * x)) * (y + 1.0);
}`;
}

/**
 * The experts' outputs of entry z summed in slot order, as moe.c: o = y_0 · w_0, then o += y_j ·
 * w_j (y_j the pair z·k + j's row at y_off + (z·k + j)·y_estride), stored at out_off +
 * z·out_estride, or added to what is there when accumulate (the residual: x + o). Params: 0 y_off,
 * 1 y_estride, 2 route_off, 3 route_estride, 4 k, 5 out_off, 6 out_estride, 7 len, 8 accumulate.
 */
export function moeSumWgsl() {
  return `${HEADER}
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let i = wg.x * ${WG}u + t;
  if (i >= pu(7u)) { return; }
  let K = pu(4u);
  let r0 = pu(2u) + wg.z * pu(3u);
  let y0 = pu(0u) + wg.z * K * pu(1u) + i;
  var o = A[y0] * A[r0 + K];
  for (var j = 1u; j < K; j++) { o += A[y0 + j * pu(1u)] * A[r0 + K + j]; }
  let at = pu(5u) + wg.z * pu(6u) + i;
  A[at] = select(0.0, A[at], pu(8u) != 0u) + o;
}`;
}

/**
 * Attention sinks (gpt-oss; forward.c's apply_sinks): head x of entry z, whose attention output
 * (attentionCombineWgsl's) lies at o_off + z·o_estride + x·hs, times 1 / (1 + e^(sink − lse)),
 * sink = V[sinks + x] and lse = log Σ_t e^(s_t) over the head's scores, from the partials of its
 * S[n_split_slot] splits (attentionWgsl: each m, l) as M + log Σ e^(m − M)·l. Params: 0 o_off,
 * 1 o_estride, 2 head_size, 3 part_off, 4 part_estride, 5 max_split, 6 n_split_slot, 7 sinks.
 */
export function sinksWgsl() {
  return `${HEADER}
@group(0) @binding(2) var<storage, read> V: array<f32>;
@group(0) @binding(3) var<storage, read> S: array<u32>;
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let hs = pu(2u);
  let ns = S[pu(6u)];
  let pb = pu(3u) + wg.z * pu(4u) + wg.x * pu(5u) * (hs + 2u);
  var mx = -3.0e38;
  for (var s = 0u; s < ns; s++) { mx = max(mx, A[pb + s * (hs + 2u) + hs]); }
  var l = 0.0;
  for (var s = 0u; s < ns; s++) {
    let b = pb + s * (hs + 2u);
    l += exp(A[b + hs] - mx) * A[b + hs + 1u];
  }
  let f = 1.0 / (1.0 + exp(V[pu(7u) + wg.x] - (mx + log(l))));
  let o0 = pu(0u) + wg.z * pu(1u) + wg.x * hs;
  for (var d = t; d < hs; d += ${WG}u) { A[o0 + d] = A[o0 + d] * f; }
}`;
}
