// wgsl_recurrent.js — the WGSL kernels of hybrid models' recurrent layers and Qwen3.5's gated
// attention, each the GPU form of src/model/recurrent.c / forward.c (the math:
// ../shared/reference/archs-2026.md, sections 1.3 and 2.3): the causal depthwise conv step with
// its per-sequence state rows (DeltaNet's and LFM2's short conv, with LFM2's B·x and C· gates
// and DeltaNet's SiLU), the L2 norm of heads, DeltaNet's beta and decay, the delta-rule step of
// every value head fused with the gated RMSNorm, and the attention output gate o · sigmoid(g).
// What they do not do: the projections around them (matvec / matmat of wgsl_ops.js) and the
// state's bookkeeping (which sequence owns which state: the caller).
//
// Conventions as wgsl_ops.js: A (binding 0) holds the activations at offsets, the 16 parameter
// words are at binding 1, the entry is workgroup_id.z where entries are independent. The conv
// and the delta rule are not: an entry reads the state its sequence's previous entry wrote, so
// those two loop over the batch's entries in order inside one dispatch (count S[count_slot],
// sequences S[seq_off + e], as the step buffer of forward.js holds them) and spread over
// channels / value heads instead. The state R (binding 2) holds each sequence's state in a block
// of seq_floats floats, a layer's part at st_off of it, laid out as the C context's
// (read_hybrid): the conv's K − 1 rows of `ch` inputs, oldest first, then (DeltaNet) the D × D
// state of each value head, row a for key dimension a.

import { HEADER, NONE, WG } from './wgsl_ops.js';

export const MAX_SSM_HEAD = 256; // DeltaNet: largest head size (4 value columns per invocation)

/**
 * The causal depthwise conv of one step for every entry, in entry order: channel c (invocation
 * wg.x · WG + t, c < ch) of entry e takes u = A[x_off + e·x_estride + c] (times
 * A[pre_off + e·x_estride + c] unless pre_off is NONE: LFM2's B · x), out = Σ_{k<K−1}
 * w[c·K + k] · row_k[c] + w[c·K + K − 1] · u, in that order (recurrent.c's conv_step), the
 * rows then shifting by one and taking u; out is multiplied by A[post_off + e·x_estride + c]
 * unless post_off is NONE (LFM2's C ·), then SiLU'd when `act` is 1 (DeltaNet), and written to
 * A[y_off + e·y_estride + c] (may be x_off: read before written). w is in V (binding 3, F32, c-major
 * rows of K taps). The rows of entry e's sequence S[seq_off + e] are at
 * seq · seq_floats + st_off in R, (K − 1) × ch floats. Params: 0 x_off, 1 x_estride, 2 y_off,
 * 3 y_estride, 4 ch, 5 K, 6 w_off, 7 pre_off, 8 post_off, 9 act, 10 st_off, 11 seq_floats,
 * 12 count_slot, 13 seq_off.
 */
export function convWgsl() {
  return `${HEADER}
@group(0) @binding(2) var<storage, read_write> R: array<f32>;
@group(0) @binding(3) var<storage, read> V: array<f32>;
@group(0) @binding(4) var<storage, read> S: array<u32>;
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let ch = pu(4u);
  let c = wg.x * ${WG}u + t;
  if (c >= ch) { return; }
  let K = pu(5u);
  let w0 = pu(6u) + c * K;
  let n = S[pu(12u)];
  for (var e = 0u; e < n; e++) {
    let xe = e * pu(1u) + c;
    var u = A[pu(0u) + xe];
    if (pu(7u) != ${NONE}u) { u = u * A[pu(7u) + xe]; }
    let r0 = S[pu(13u) + e] * pu(11u) + pu(10u) + c;
    var acc = 0.0;
    for (var k = 0u; k + 1u < K; k++) { acc += V[w0 + k] * R[r0 + k * ch]; }
    acc += V[w0 + K - 1u] * u;
    if (K > 1u) {
      for (var k = 0u; k + 2u < K; k++) { R[r0 + k * ch] = R[r0 + (k + 1u) * ch]; }
      R[r0 + (K - 2u) * ch] = u;
    }
    if (pu(8u) != ${NONE}u) { acc = acc * A[pu(8u) + xe]; }
    if (pu(9u) == 1u) { acc = acc / (1.0 + exp(-acc)); }
    A[pu(2u) + e * pu(3u) + c] = acc;
  }
}`;
}

/**
 * The L2 norm of head x (workgroup x) of entry z, in place: u / max(|u|, eps) over len floats
 * at x_off + z·x_estride + x·x_hstride, then times `scale` for heads x < n_scaled (DeltaNet's
 * q heads, scaled by 1/sqrt(D), then its k heads unscaled: recurrent.c's l2norm, whose sum of
 * squares is in double; here in float). Params: 0 len, 1 x_off, 2 x_estride, 3 x_hstride,
 * 4 eps (f32), 5 n_scaled, 6 scale (f32).
 */
export function l2normWgsl() {
  return `${HEADER}
var<workgroup> red: array<f32, ${WG}>;
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let n = pu(0u);
  let x0 = pu(1u) + wg.z * pu(2u) + wg.x * pu(3u);
  var ss = 0.0;
  for (var i = t; i < n; i += ${WG}u) { ss += A[x0 + i] * A[x0 + i]; }
  red[t] = ss;
  workgroupBarrier();
  for (var k = ${WG / 2}u; k > 0u; k >>= 1u) {
    if (t < k) { red[t] += red[t + k]; }
    workgroupBarrier();
  }
  let inv = 1.0 / max(sqrt(red[0]), pf(4u));
  let scaled = wg.x < pu(5u);
  for (var i = t; i < n; i += ${WG}u) {
    var v = A[x0 + i] * inv;
    if (scaled) { v = v * pf(6u); }
    A[x0 + i] = v;
  }
}`;
}

/**
 * DeltaNet's per-head gates of entry z, in place, for i < n (the value heads; workgroups x
 * cover them): beta = sigmoid(A[b_off + z·estride + i]) and decay = exp(softplus(A[a_off +
 * z·estride + i] + dt[i]) · a[i]) (dt and a, the layer's ssm_dt and ssm_a, in V), as
 * recurrent.c: softplus(x) = x above 20, else ln(1 + eˣ) (log1p's accuracy for small eˣ).
 * Params: 0 b_off, 1 a_off, 2 estride, 3 n, 4 dt_off, 5 a_off in V.
 */
export function ssmGatesWgsl() {
  return `${HEADER}
@group(0) @binding(2) var<storage, read> V: array<f32>;
// ln(1 + x) for x ≥ 0, accurate where 1 + x rounds (the classic (1 + x) − 1 correction)
fn log1p_pos(x: f32) -> f32 {
  let u = 1.0 + x;
  if (u == 1.0) { return x; }
  return log(u) * (x / (u - 1.0));
}
fn softplus(x: f32) -> f32 {
  if (x > 20.0) { return x; }
  return max(x, 0.0) + log1p_pos(exp(-abs(x)));
}
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let i = wg.x * ${WG}u + t;
  if (i >= pu(3u)) { return; }
  let b = pu(0u) + wg.z * pu(2u) + i;
  let a = pu(1u) + wg.z * pu(2u) + i;
  A[b] = 1.0 / (1.0 + exp(-A[b]));
  A[a] = exp(softplus(A[a] + V[pu(4u) + i]) * V[pu(5u) + i]);
}`;
}

/**
 * The delta rule of one value head (workgroup x) for every entry in order, then (unless w_off
 * is NONE) the gated RMSNorm of its output. Entry e's row of A at m_off + e·m_estride holds
 * the q heads, the k heads (HK each, D floats, L2-normed) and the value heads (HV), head h
 * using key head kh = h % HK; its beta and decay at bd_off + e·bd_estride + h and + HV + h; its
 * state, of its sequence S[seq_off + e], at seq · seq_floats + st_off + h·D·D in R (row a for
 * key dimension a). As wlm_deltanet_ref: S ← decay·S, r = Sᵀk; S ← S + k (beta (v − r))ᵀ,
 * o = Sᵀq, every sum over a in order (invocation t owns value columns t, t + WG, …: no
 * reduction, D ≤ MAX_SSM_HEAD); then o ← w · (o / sqrt(mean(o²) + eps)) · silu(z) (w, the
 * layer's ssm_norm, in V; z at z_off + e·zo_estride + h·D), written to o_off + e·zo_estride +
 * h·D. Params: 0 m_off, 1 m_estride, 2 D, 3 HK, 4 bd_off, 5 bd_estride, 6 HV, 7 z_off, 8 o_off,
 * 9 zo_estride, 10 st_off, 11 seq_floats, 12 w_off, 13 eps (f32), 14 count_slot, 15 seq_off.
 */
export function deltanetWgsl() {
  const per = MAX_SSM_HEAD / WG;
  return `${HEADER}
@group(0) @binding(2) var<storage, read_write> R: array<f32>;
@group(0) @binding(3) var<storage, read> V: array<f32>;
@group(0) @binding(4) var<storage, read> S: array<u32>;
var<workgroup> qs: array<f32, ${MAX_SSM_HEAD}>;
var<workgroup> ks: array<f32, ${MAX_SSM_HEAD}>;
var<workgroup> red: array<f32, ${WG}>;
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let D = pu(2u);
  let HK = pu(3u);
  let HV = pu(6u);
  let h = wg.x;
  let kh = h % HK;
  let gated = pu(12u) != ${NONE}u;
  let n = S[pu(14u)];
  for (var e = 0u; e < n; e++) {
    let m0 = pu(0u) + e * pu(1u);
    for (var i = t; i < D; i += ${WG}u) {
      qs[i] = A[m0 + kh * D + i];
      ks[i] = A[m0 + (HK + kh) * D + i];
    }
    workgroupBarrier();
    let v0 = m0 + (2u * HK + h) * D;
    let bd = pu(4u) + e * pu(5u) + h;
    let beta = A[bd];
    let decay = A[bd + HV];
    let s0 = S[pu(15u) + e] * pu(11u) + pu(10u) + h * D * D;
    var ob: array<f32, ${per}>;
    var ss = 0.0;
    for (var j = 0u; j < ${per}u; j++) {
      let b = t + j * ${WG}u;
      if (b < D) {
        var r = 0.0;
        for (var a = 0u; a < D; a++) {
          let i = s0 + a * D + b;
          let s = R[i] * decay;
          R[i] = s;
          r += s * ks[a];
        }
        let dv = beta * (A[v0 + b] - r);
        var o = 0.0;
        for (var a = 0u; a < D; a++) {
          let i = s0 + a * D + b;
          let s = R[i] + ks[a] * dv;
          R[i] = s;
          o += s * qs[a];
        }
        ob[j] = o;
        ss += o * o;
      }
    }
    var sc = 1.0;
    if (gated) {
      red[t] = ss;
      workgroupBarrier();
      for (var k = ${WG / 2}u; k > 0u; k >>= 1u) {
        if (t < k) { red[t] += red[t + k]; }
        workgroupBarrier();
      }
      sc = 1.0 / sqrt(red[0] / f32(D) + pf(13u));
    }
    let zo = e * pu(9u) + h * D;
    for (var j = 0u; j < ${per}u; j++) {
      let b = t + j * ${WG}u;
      if (b < D) {
        var o = ob[j];
        if (gated) {
          let z = A[pu(7u) + zo + b];
          o = V[pu(12u) + b] * (sc * o) * (z / (1.0 + exp(-z)));
        }
        A[pu(8u) + zo + b] = o;
      }
    }
    workgroupBarrier(); // qs, ks and red are the next entry's
  }
}`;
}

/**
 * The gated attention's output gate (Qwen3.5): A[y] *= sigmoid(A[g]) for i < len of head y
 * (workgroup y) of entry z, y = y_off + z·y_estride + head·y_hstride + i, g likewise (the gate
 * rows of attn_q's output sit after each head's query rows: g_hstride 2·head_size). Workgroups
 * x cover len. Params: 0 y_off, 1 y_estride, 2 y_hstride, 3 g_off, 4 g_estride, 5 g_hstride,
 * 6 len.
 */
export function sigmoidGateWgsl() {
  return `${HEADER}
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let i = wg.x * ${WG}u + t;
  if (i >= pu(6u)) { return; }
  let g = A[pu(3u) + wg.z * pu(4u) + wg.y * pu(5u) + i];
  let y = pu(0u) + wg.z * pu(1u) + wg.y * pu(2u) + i;
  A[y] = A[y] * (1.0 / (1.0 + exp(-g)));
}`;
}
