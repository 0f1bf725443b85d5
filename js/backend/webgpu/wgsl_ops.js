// wgsl_ops.js — the WGSL compute kernels of the forward pass, one builder per operation, each
// the GPU form of a scalar reference in src/kernels/kernels_ref.c (or the type table's to_float,
// src/kernels/quant.c): matvec (a weight matrix times each entry's activations, any weight type
// of wgsl_quant.js; a batch reads each weight once per 4 entries, with the one-entry sums bit for
// bit), embed
// (rows of the token or position table), norm (RMSNorm / LayerNorm, also per head), rope (pairs
// or NEOX halves, cos/sin computed by the caller), kv_store, kv_shift (a context shift's rows,
// K re-rotated) and attention (GQA over the KV cache
// in F32 or F16 elements, a sliding window, one pass with a running maximum: no score buffer;
// split over the cache, then combined),
// and the element-wise add, add_vec, scale, scale_by, glu (SwiGLU, GeGLU, GELU) and softcap.
//
// Every kernel binds the activation buffer A (array<f32>, read_write: all activations live in it
// at offsets, so no kernel aliases two bindings) at 0 and its parameters at 1 (16 u32 words read
// through pu/pf; f32 fields are bit casts). The entry (token) of the batch is workgroup_id.z, so
// one set of bind groups serves every batch size. Kernels never divide by the workgroup count.
// Where `subgroups` is on (the adapter has the feature), matvec reduces with subgroupAdd.

import { F16V, F16X2, GPU_TYPES, W_SUB_GENERIC, WGSL_BYTES, WGSL_WORDS } from './wgsl_quant.js';

export const WG = 64;        // invocations per workgroup, every kernel
export const ATT_HEAD = 256; // attention: largest head size of the narrow form (4 value words per invocation)
export const MAX_HEAD = 512; // attention: largest head size, the wide form's (Gemma 4's full layers)
const ATT_SLICE = 8;         // attention: dimensions of one score slice (one invocation's share of a K row)
const ATT_SLICE_WIDE = 16;   // the wide form's: 32 slices of a 512 head keep its workgroup memory at 10.5 KiB
export const NONE = 0xffffffff;

export const HEADER = /* wgsl */ `
@group(0) @binding(0) var<storage, read_write> A: array<f32>;
struct Params { u: array<vec4<u32>, 4> }
@group(0) @binding(1) var<uniform> p: Params;
fn pu(i: u32) -> u32 { return p.u[i / 4u][i % 4u]; }
fn pf(i: u32) -> f32 { return bitcast<f32>(pu(i)); }
`;

/** f32 → binary16 bits rounded to nearest even, overflow to infinity: wlm_fp32_to_fp16. */
export const F2H = /* wgsl */ `
fn f2h(f: f32) -> u32 {
  let x = bitcast<u32>(f);
  let sign = (x >> 16u) & 0x8000u;
  let a = x & 0x7fffffffu;
  if (a > 0x7f800000u) { return sign | 0x7e00u; }
  if (a >= 0x477ff000u) { return sign | 0x7c00u; }
  if (a < 0x38800000u) { return sign | u32(round(bitcast<f32>(a) * 16777216.0)); }
  let e = a - 0x38000000u;
  return sign | ((e + 0xfffu + ((e >> 13u) & 1u)) >> 13u);
}`;

/** The gated feed-forward's activation, act = 0 SiLU, 1 GELU (ggml's: on binary16, as the CPU's
 *  kernels_ref.c), shared by the element-wise glu kernel and the matvec's glu form so that both
 *  give the same bits; tanh_safe also serves the soft-cap. Needs f2h (F2H) and f16v (F16V). */
const GLU_ACT = /* wgsl */ `
fn tanh_safe(x: f32) -> f32 { let c = clamp(x, -15.0, 15.0); let e = exp(2.0 * c); return (e - 1.0) / (e + 1.0); }
fn gelu(x: f32) -> f32 {
  if (x <= -10.0) { return 0.0; }
  if (x >= 10.0) { return x; }
  let v = f16v(f2h(x));
  let y = 0.5 * v * (1.0 + tanh_safe(0.79788456080286535587989211986876 * v * (1.0 + 0.044715 * v * v)));
  return f16v(f2h(y));
}
fn glu_act(v: f32, act: u32) -> f32 {
  if (act == 0u) { return v * (1.0 / (1.0 + exp(-v))); }
  return gelu(v);
}`;

/** Invocations per row of a matvec for rows of `cols` elements: short rows get one invocation
 *  each (a workgroup then covers WG rows), long rows a whole workgroup. */
export function matvecThreadsPerRow(cols) {
  return cols <= 128 ? 1 : cols <= 1024 ? 16 : WG;
}

/**
 * out[e][row] (+)= Σ_i W[row][i] · A[x_off + e·x_estride + i] for `rows` rows and the entries of
 * workgroup z. `tpr` invocations share a row (1, a divisor of WG, or WG), so a workgroup covers
 * WG / tpr rows: rows g·(WG/tpr) .. of workgroup g = y · nx + x. With `ent` 1 workgroup z is
 * entry z; with `ent` > 1 (batches: prefill) it is entries z·ent .. z·ent + ent − 1, below the
 * count S[count_slot], and each weight is read once for all of them — every entry's sum runs in
 * the same order as with `ent` 1, so batching never changes a result. Params: 0 rows, 1 cols,
 * 2 row_bytes, 3 x_off, 4 x_estride, 5 y_off, 6 y_estride, 7 accumulate (1: add to out),
 * 8 count_slot (ent > 1), 9 bias (0: none; else 1 + the offset in A of a bias vector added to
 * each sum before it is stored or accumulated, out (+)= (Σ + bias): the add_vec and add kernels'
 * bits, one dispatch instead of three).
 * With `wide` (the default) an invocation takes a 32-element sub-block a step through the type's
 * w_sub (scales decoded once per sub-block, quants read a 32-bit word at a time) where cols is a
 * multiple of 32 (every quantized row: blocks are 32 or 256 elements): invocation `lane` adds
 * sub-blocks lane, lane + TPR, … each as eight dot products of four, a partial sum that differs
 * from the one-element order in rounding only (tests/js/webgpu_kernels.test.mjs compares both
 * forms with the C reference). `wide: false`, or other rows: one element a step through w_get.
 * With `glu` (a gated feed-forward's gate and up joined, rows [gate; up]: fuseMatrices) output
 * row r is act(Σ gate row r) · (Σ up row r + rows): both sums as the plain kernel makes them,
 * act by param 10 (0 SiLU, 1 GELU) as the element-wise glu kernel computes it, so the result
 * has the bits of the two products followed by that kernel; params 7 and 9 must be 0.
 */
export function matvecWgsl(type, { subgroups = false, tpr = WG, ent = 1, wide = true, glu = false } = {}) {
  const t = GPU_TYPES[type];
  const sg = subgroups && tpr === WG;
  const E = ent;
  const NS = glu ? 2 * E : E; // sums an invocation keeps: per entry, the gate's then (glu) the up's
  const reduce = tpr === 1 ? '' : sg ? /* wgsl */ `
  for (var k = 0u; k < NS; k++) {
    let ss = subgroupAdd(s[k]);
    if (sl == 0u) { red[k * ${WG}u + t / sn] = ss; }
  }
  workgroupBarrier();
  if (t == 0u) {
    for (var k = 0u; k < NS; k++) {
      var total = 0.0;
      for (var j = 0u; j < (${WG}u + sn - 1u) / sn; j++) { total += red[k * ${WG}u + j]; }
      red[k * ${WG}u] = total;
    }
  }
  workgroupBarrier();
  for (var k = 0u; k < NS; k++) { s[k] = red[k * ${WG}u]; }` : /* wgsl */ `
  for (var k = 0u; k < NS; k++) { red[k * ${WG}u + t] = s[k]; }
  workgroupBarrier();
  for (var h = ${tpr / 2}u; h > 0u; h >>= 1u) {
    if (lane < h) {
      for (var k = 0u; k < NS; k++) { red[k * ${WG}u + t] += red[k * ${WG}u + t + h]; }
    }
    workgroupBarrier();
  }
  for (var k = 0u; k < NS; k++) { s[k] = red[k * ${WG}u + t]; }`;
  return `${sg ? 'enable subgroups;' : ''}${HEADER}
@group(0) @binding(2) var<storage, read> W: array<u32>;
${E > 1 ? '@group(0) @binding(3) var<storage, read> S: array<u32>;' : ''}
${WGSL_BYTES}
${t.wgsl}
${wide ? `${WGSL_WORDS}\n${t.wgsl4}\n${t.wgsl32 ?? W_SUB_GENERIC}` : ''}
const BLK = ${t.blk}u;
const BLK_BYTES = ${t.bytes}u;
const TPR = ${tpr}u;
const ENT = ${E}u;
const NS = ${NS}u;
var<workgroup> red: array<f32, ${WG * NS}>;
${glu ? `${F2H}\n${GLU_ACT}` : ''}
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>,
        @builtin(local_invocation_index) t: u32${sg ? `,
        @builtin(subgroup_invocation_id) sl: u32, @builtin(subgroup_size) sn: u32` : ''}) {
  let g = wg.y * nw.x + wg.x;
  if (g * (${WG}u / TPR) >= pu(0u)) { return; }
  let lane = t % TPR;
  let row = g * (${WG}u / TPR) + t / TPR;
  let live = row < pu(0u);
  let cols = pu(1u);
  let base = row * pu(2u);
  let e0 = wg.z * ENT;
  let ne = ${E > 1 ? 'min(ENT, S[pu(8u)] - e0)' : '1u'};
  let xs = pu(4u);
  let x0 = pu(3u) + e0 * xs;
  var s: array<f32, ${NS}>;${glu ? `
  let base_up = base + pu(0u) * pu(2u); // the up row, rows further` : ''}
  if (live) {${wide ? `
    if (cols % 32u == 0u) {
      for (var sb = lane; sb < cols / 32u; sb += TPR) {
        let w = w_sub(base, sb);${glu ? `
        let wu = w_sub(base_up, sb);` : ''}
        for (var k = 0u; k < ne; k++) {
          let a = x0 + k * xs + 32u * sb;
          for (var i = 0u; i < 8u; i++) {
            let c = a + 4u * i;
            let xv = vec4<f32>(A[c], A[c + 1u], A[c + 2u], A[c + 3u]);
            s[k] += dot(w[i], xv);${glu ? `
            s[ENT + k] += dot(wu[i], xv);` : ''}
          }
        }
      }
    } else {` : ''}
    for (var i = lane; i < cols; i += TPR) {
      let w = w_get(base + (i / BLK) * BLK_BYTES, i % BLK);${glu ? `
      let wu = w_get(base_up + (i / BLK) * BLK_BYTES, i % BLK);` : ''}
      for (var k = 0u; k < ne; k++) {
        s[k] += w * A[x0 + k * xs + i];${glu ? `
        s[ENT + k] += wu * A[x0 + k * xs + i];` : ''}
      }
    }${wide ? `
    }` : ''}
  }
${reduce}
  if (live && lane == 0u) {
    for (var k = 0u; k < ne; k++) {
      let o = pu(5u) + (e0 + k) * pu(6u) + row;
      var v = s[k];${glu ? `
      A[o] = glu_act(v, pu(10u)) * s[ENT + k];` : `
      if (pu(9u) != 0u) { v = v + A[pu(9u) - 1u + row]; }
      A[o] = select(0.0, A[o], pu(7u) != 0u) + v;`}
    }
  }
}`;
}

/**
 * Rows of a table: A[y_off + e·y_estride + i] = ((accumulate ? A[..] : 0) + W[S[ids_off + e]][i])
 * · scale for i < cols; an entry whose id is NONE (an image row, WLM_TOKEN_EMBD: its input is
 * written into y by the caller) is left as it is. Params: 0 cols, 1 row_bytes, 2 ids_off,
 * 3 y_off, 4 y_estride, 5 accumulate, 6 scale (f32).
 */
export function embedWgsl(type) {
  const t = GPU_TYPES[type];
  return `${HEADER}
@group(0) @binding(2) var<storage, read> W: array<u32>;
@group(0) @binding(3) var<storage, read> S: array<u32>;
${WGSL_BYTES}
${t.wgsl}
const BLK = ${t.blk}u;
const BLK_BYTES = ${t.bytes}u;
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let i = wg.x * ${WG}u + t;
  let id = S[pu(2u) + wg.z];
  if (i >= pu(0u) || id == ${NONE}u) { return; } // an image row: its input is written as it is
  let base = id * pu(1u);
  let o = pu(3u) + wg.z * pu(4u) + i;
  A[o] = (select(0.0, A[o], pu(5u) != 0u) + w_get(base + (i / BLK) * BLK_BYTES, i % BLK)) * pf(6u);
}`;
}

/**
 * RMSNorm (x · 1/sqrt(mean(x²) + eps) · w) or LayerNorm ((x - mean) / sqrt(var + eps) · w + b)
 * of one row of `len` per workgroup: row (x, z) reads A[x_off + ez·x_estride + x·x_hstride]
 * where ez = z, or S[idx_off + z] when idx_off is not NONE (gathering the entries that want
 * logits), and writes A[y_off + z·y_estride + x·y_hstride]; in place is fine. Weights and bias
 * are in V. Params: 0 len, 1 x_off, 2 x_estride, 3 x_hstride, 4 y_off, 5 y_estride, 6 y_hstride,
 * 7 w_off, 8 b_off (NONE: no bias), 9 layer (1: LayerNorm), 10 eps (f32), 11 idx_off.
 */
export function normWgsl() {
  return `${HEADER}
@group(0) @binding(2) var<storage, read> V: array<f32>;
@group(0) @binding(3) var<storage, read> S: array<u32>;
var<workgroup> red: array<f32, ${WG}>;
fn wsum(t: u32, v: f32) -> f32 {
  red[t] = v;
  workgroupBarrier();
  for (var k = ${WG / 2}u; k > 0u; k >>= 1u) {
    if (t < k) { red[t] += red[t + k]; }
    workgroupBarrier();
  }
  let r = red[0];
  workgroupBarrier();
  return r;
}
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let n = pu(0u);
  let ez = select(S[pu(11u) + wg.z], wg.z, pu(11u) == ${NONE}u);
  let x0 = pu(1u) + ez * pu(2u) + wg.x * pu(3u);
  let y0 = pu(4u) + wg.z * pu(5u) + wg.x * pu(6u);
  let w0 = pu(7u);
  let eps = pf(10u);
  if (pu(9u) == 0u) {
    var ss = 0.0;
    for (var i = t; i < n; i += ${WG}u) { ss += A[x0 + i] * A[x0 + i]; }
    let sc = 1.0 / sqrt(wsum(t, ss) / f32(n) + eps);
    for (var i = t; i < n; i += ${WG}u) { A[y0 + i] = V[w0 + i] * (sc * A[x0 + i]); }
    return;
  }
  var s = 0.0;
  for (var i = t; i < n; i += ${WG}u) { s += A[x0 + i]; }
  let mean = wsum(t, s) / f32(n);
  var s2 = 0.0;
  for (var i = t; i < n; i += ${WG}u) { let v = A[x0 + i] - mean; s2 += v * v; }
  let sc = 1.0 / sqrt(wsum(t, s2) / f32(n) + eps);
  let b0 = pu(8u);
  for (var i = t; i < n; i += ${WG}u) {
    let v = ((A[x0 + i] - mean) * sc) * V[w0 + i];
    A[y0 + i] = select(v + V[b0 + i], v, b0 == ${NONE}u);
  }
}`;
}

/**
 * The cos/sin ropeWgsl and kvShiftWgsl read, for position `pos` (any float; −n for a context
 * shift) of RoPE set `set`: out[at + i] = cos, out[at + n_rot/2 + i] = sin of the float angle
 * pos · freq[set · stride + i], each times `mscale` when it is not 1 — forward.c's rope_angles
 * (float angle, cosf / sinf), for i < half = the set's n_rot/2. `stride`: frequencies per set in
 * `freq` (the context's rope_half, the widest set's n_rot/2: Gemma 4's sets differ), default half.
 */
export function ropeCosSin(out, at, pos, freq, set, half, mscale = 1, stride = half) {
  for (let i = 0; i < half; i++) putCosSin(out, at, half, i, Math.fround(pos * freq[set * stride + i]), mscale);
}

/**
 * ropeCosSin for an entry of an M-RoPE model (qwen2vl; ggml's rope_multi with
 * GGML_ROPE_TYPE_MROPE, forward.c's rope_angles): `rpos` its temporal, height and width
 * positions (src/runtime/deferred.c's dfr_rpos: three equal for a text token, an image row's
 * from its grid), `sections` the model's rope.dimension_sections (4 widths in rotary pairs; sum
 * > 0). Pair i turns by rpos[0], rpos[1] or rpos[2] as i mod the widths' sum falls in the first,
 * second or third width, else by 0 (the fourth width's pairs, whose frequency is 0).
 */
export function mropeCosSin(out, at, rpos, sections, freq, set, half, mscale = 1, stride = half) {
  const s01 = sections[0] + sections[1], s012 = s01 + sections[2], sum = s012 + sections[3];
  for (let i = 0; i < half; i++) {
    const k = i % sum;
    const pos = k < sections[0] ? rpos[0] : k < s01 ? rpos[1] : k < s012 ? rpos[2] : 0;
    putCosSin(out, at, half, i, Math.fround(pos * freq[set * stride + i]), mscale);
  }
}

function putCosSin(out, at, half, i, ang, mscale) {
  let c = Math.fround(Math.cos(ang)), s = Math.fround(Math.sin(ang));
  if (mscale !== 1) { c = Math.fround(c * mscale); s = Math.fround(s * mscale); }
  out[at + i] = c;
  out[at + half + i] = s;
}

/**
 * RoPE of head x (workgroup x) of entry z: pairs (2i, 2i+1) or, with neox, (i, i + n_rot/2),
 * rotated by the entry's cos/sin (A[cs_off + z·cs_estride + i], sin n_rot/2 further), as
 * wlm_rope_ref / wlm_rope_neox_ref. Params: 0 x_off, 1 x_estride, 2 head_size, 3 n_rot, 4 neox,
 * 5 cs_off, 6 cs_estride; Q and K heads in one dispatch: 8 the first K head of the grid (0:
 * none, every head at x_off), whose rows start at 7 k_off, 9 k_estride apart.
 * With `store` ('f16' | 'f32': the cache's element type) each K head's workgroup then writes
 * that head of the entry's K (rotated) and V rows into the layer's cache KV (binding 2) as
 * kvStoreWgsl does — the same bits, one dispatch fewer: params 10 v_off (V rows k_estride
 * apart), 11 kv_dim, 12 n_ctx, 13 pos_off, 14 seq_off (into S, binding 3); head sizes even.
 */
export function ropeWgsl(store = null) {
  const f16 = store === 'f16';
  return `${HEADER}
${store ? `@group(0) @binding(2) var<storage, read_write> KV: array<u32>;
@group(0) @binding(3) var<storage, read> S: array<u32>;
${F2H}` : ''}
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let half = pu(3u) / 2u;
  let kh = pu(8u) != 0u && wg.x >= pu(8u); // a K head (heads pu(8) .. of the grid)
  let x0 = select(pu(0u) + wg.z * pu(1u) + wg.x * pu(2u),
                  pu(7u) + wg.z * pu(9u) + (wg.x - pu(8u)) * pu(2u), kh);
  let c0 = pu(5u) + wg.z * pu(6u);
  for (var i = t; i < half; i += ${WG}u) {
    let c = A[c0 + i];
    let s = A[c0 + half + i];
    let ia = select(x0 + 2u * i, x0 + i, pu(4u) != 0u);
    let ib = select(ia + 1u, ia + half, pu(4u) != 0u);
    let a = A[ia];
    let b = A[ib];
    A[ia] = a * c - b * s;
    A[ib] = a * s + b * c;
  }${store ? `
  storageBarrier(); // the head's rotated elements, from every invocation
  if (kh) {
    let hs = pu(2u);
    let kv_dim = pu(11u);
    let head = (wg.x - pu(8u)) * hs;
    let pos = S[pu(13u) + wg.z];
    let sb = S[pu(14u) + wg.z] * 2u * pu(12u);
    let krow = (sb + pos) * kv_dim + head;
    let vrow = (sb + pu(12u) + pos) * kv_dim + head;
    let v0 = pu(10u) + wg.z * pu(9u) + head;
${f16 ? `    for (var w = t; 2u * w < hs; w += ${WG}u) {
      KV[(krow >> 1u) + w] = f2h(A[x0 + 2u * w]) | (f2h(A[x0 + 2u * w + 1u]) << 16u);
      KV[(vrow >> 1u) + w] = f2h(A[v0 + 2u * w]) | (f2h(A[v0 + 2u * w + 1u]) << 16u);
    }` : `    for (var i = t; i < hs; i += ${WG}u) {
      KV[krow + i] = bitcast<u32>(A[x0 + i]);
      KV[vrow + i] = bitcast<u32>(A[v0 + i]);
    }`}
  }` : ''}
}`;
}

/**
 * Writes each entry's K and V rows (kv_dim floats at k_off / v_off + z·estride) into the layer's
 * cache KV at the entry's position S[pos_off + z] of its sequence S[seq_off + z]: each sequence
 * a block of n_ctx K rows, then n_ctx V rows; F32 as bits or F16 rounded to nearest even (two
 * per word), as wlm_kv_store. Params: 0 k_off, 1 v_off, 2 estride, 3 kv_dim, 4 n_ctx, 5 pos_off,
 * 6 seq_off.
 */
export function kvStoreWgsl(f16) {
  return `${HEADER}
@group(0) @binding(2) var<storage, read_write> KV: array<u32>;
@group(0) @binding(3) var<storage, read> S: array<u32>;
${F2H}
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let kv_dim = pu(3u);
  let pos = S[pu(5u) + wg.z];
  let sb = S[pu(6u) + wg.z] * 2u * pu(4u);
  let k0 = pu(0u) + wg.z * pu(2u);
  let v0 = pu(1u) + wg.z * pu(2u);
  let vrow = (sb + pu(4u) + pos) * kv_dim;
  let krow = (sb + pos) * kv_dim;
  let i = wg.x * ${WG}u + t;
${f16 ? `  if (2u * i >= kv_dim) { return; }
  KV[(krow >> 1u) + i] = f2h(A[k0 + 2u * i]) | (f2h(A[k0 + 2u * i + 1u]) << 16u);
  KV[(vrow >> 1u) + i] = f2h(A[v0 + 2u * i]) | (f2h(A[v0 + 2u * i + 1u]) << 16u);`
    : `  if (i >= kv_dim) { return; }
  KV[krow + i] = bitcast<u32>(A[k0 + i]);
  KV[vrow + i] = bitcast<u32>(A[v0 + i]);`}
}`;
}

/**
 * A context shift's rows (wlm_seq_shift_internal keeps the bookkeeping in C): cache rows
 * keep + discard .. end − 1 of one sequence of one layer (S[args_off ..]: keep, discard, end,
 * the sequence, whose block of the cache is as kv_store's), K rotated by the
 * RoPE of −discard positions (its cos/sin at cs_off in A: n_rot/2 cosines, then the sines; the
 * layer's set) and stored again as it was (F16 rounded to nearest even, as wlm_kv_store), V as it
 * is, into OUT as rows 0 .. moved − 1 of K, then moved rows of V (moved = end − keep − discard);
 * the caller copies them back to rows keep .. (the source and destination rows overlap, so they
 * cannot be written in place by parallel invocations). Each invocation writes one word of one
 * row (F16: two elements), reading each element's RoPE partner from the source: pairs (2i,
 * 2i+1) or NEOX halves (i, i + n_rot/2) of each head, dims from n_rot on unrotated; the
 * arithmetic is forward.c's rope_apply (a·c − b·s, a·s + b·c). Workgroups y stride over the rows.
 * Params: 0 kv_dim, 1 n_ctx, 2 head_size, 3 n_rot, 4 neox, 5 cs_off, 6 args_off.
 */
export function kvShiftWgsl(f16) {
  return `${HEADER}
@group(0) @binding(2) var<storage, read> KV: array<u32>;
@group(0) @binding(3) var<storage, read_write> OUT: array<u32>;
@group(0) @binding(4) var<storage, read> S: array<u32>;
${F16V}
${F2H}
fn kv(i: u32) -> f32 {
${f16 ? '  let w = KV[i >> 1u]; return f16v(select(w & 0xffffu, w >> 16u, (i & 1u) != 0u));'
    : '  return bitcast<f32>(KV[i]);'}
}
// element e of the K row starting at element r0, rotated
fn rot(r0: u32, e: u32) -> f32 {
  let j = e % pu(2u);
  let x = kv(r0 + e);
  if (j >= pu(3u)) { return x; }
  let half = pu(3u) / 2u;
  let neox = pu(4u) != 0u;
  let first = select((j & 1u) == 0u, j < half, neox);
  let i = select(j / 2u, select(j - half, j, first), neox);
  let partner = select(select(e - 1u, e + 1u, first), select(e - half, e + half, first), neox);
  let c = A[pu(5u) + i];
  let s = A[pu(5u) + half + i];
  let y = kv(r0 + partner);
  if (first) { return x * c - y * s; }
  return y * s + x * c;
}
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>,
        @builtin(local_invocation_index) t: u32) {
  let kv_dim = pu(0u);
  let keep = S[pu(6u)];
  let moved = S[pu(6u) + 2u] - keep - S[pu(6u) + 1u];
  let sb = S[pu(6u) + 3u] * 2u * pu(1u);
  let words = ${f16 ? 'kv_dim / 2u' : 'kv_dim'};
  let w = wg.x * ${WG}u + t;
  if (w >= words) { return; }
  for (var r = wg.y; r < moved; r += nw.y) {
    let src = keep + S[pu(6u) + 1u] + r;
    let k0 = (sb + src) * kv_dim;
${f16 ? '    OUT[r * words + w] = f2h(rot(k0, 2u * w)) | (f2h(rot(k0, 2u * w + 1u)) << 16u);'
    : '    OUT[r * words + w] = bitcast<u32>(rot(k0, w));'}
    OUT[(moved + r) * words + w] = KV[((sb + pu(1u) + src) * kv_dim) / ${f16 ? 2 : 1}u + w];
  }
}`;
}

/**
 * Attention, first half (split over the cache as flash-decoding does, so that a decode step has
 * heads × splits workgroups, not one per head): head x (workgroup x) of entry z at position
 * pos = S[pos_off + z], over the cached positions of split y — [y·chunk, (y+1)·chunk) within
 * start..pos (start = pos + 1 - n_swa on a window layer, else 0) — with K/V head x / gqa, in tiles
 * of WG positions with a running maximum m and sum l of exp(q·k · scale − m) (no score buffer;
 * hs ≤ MAX_HEAD). Writes the split's partial result: hs floats Σ exp(s − m)·v, then m, then l, at
 * part_off + z·part_estride + (x·max_split + y)·(hs + 2); a split with no position writes
 * m = −3e38, l = 0, zeros. An entry's splits follow from its own length alone
 * (attentionSplit: ranges of a multiple of WG positions, at most max_split of them, as short as
 * that allows), so its partials are the same whatever else the batch holds, and a short sequence
 * in a long context still has several splits. attentionCombineWgsl finishes it.
 * Params: 0 q_off, 1 q_estride, 4 head_size, 5 kv_dim, 6 n_ctx, 7 gqa, 8 pos_off, 9 n_swa (0:
 * none), 10 scale, 11 len_slot (0: every entry causal; else S[len_slot − 1 + z], when not 0, is
 * the end of entry z's non-causal span: it attends to positions up to there, an image's rows
 * seeing each other both ways, its window still reaching back n_swa from its own position, as
 * forward.c's image_batch), 12 part_off, 13 part_estride, 14 max_split, 15 seq_off (the entry's
 * sequence S[seq_off + z] picks its block of the cache, as kv_store).
 *
 * Per tile the loads are laid out for a GPU's memory system rather than one position per
 * invocation: scores first, each position's K row cut into slices of 8 dimensions, one slice per
 * invocation (a row's slices are adjacent invocations reading adjacent words; for head size 64,
 * 8 positions a pass), the slices' partial dots summed in order by the position's own invocation;
 * then the values, each invocation owning pairs of dimensions (a word of an F16 cache, two of
 * an F32 one) and walking the tile's positions four loads at a time (head sizes are even). A score is thus summed slice by
 * slice (Σ over slices of the in-order dot of 8 dimensions), a value in position order. F16
 * halves are decoded two at a time (F16X2: the hardware's unpack2x16float, its subnormals
 * rebuilt exactly whatever the GPU does with them).
 */
const WIDE_KSLICE = /* wgsl */ `
// q · K[row] over dimensions 16g .. 16g + 15 (< hs), in order, eight loads at a time (the wide
// form: a score is then summed 16 dimensions a slice)
fn kslice(kb: u32, g: u32, hs: u32) -> f32 {
  let d0 = g * ${ATT_SLICE_WIDE}u;
  let end = min(d0 + ${ATT_SLICE_WIDE}u, hs);
  var s = 0.0;
  var d = d0;
  for (; d + 8u <= end; d += 8u) {
    let w0 = (kb + d) >> 1u;
    let a = kvw(w0);
    let b = kvw(w0 + 1u);
    let c = kvw(w0 + 2u);
    let e = kvw(w0 + 3u);
    s += qs[d] * a.x;
    s += qs[d + 1u] * a.y;
    s += qs[d + 2u] * b.x;
    s += qs[d + 3u] * b.y;
    s += qs[d + 4u] * c.x;
    s += qs[d + 5u] * c.y;
    s += qs[d + 6u] * e.x;
    s += qs[d + 7u] * e.y;
  }
  for (; d < end; d += 2u) {
    let v = kvw((kb + d) >> 1u);
    s += qs[d] * v.x;
    s += qs[d + 1u] * v.y;
  }
  return s;
}
`;

export function attentionWgsl(f16, maxHead = ATT_HEAD) {
  const wide = maxHead > ATT_HEAD;
  const slice = wide ? ATT_SLICE_WIDE : ATT_SLICE;
  const per = maxHead / 2 / WG;     // value pairs an invocation owns, at most
  const gmax = maxHead / slice;     // score slices of a position, at most
  return `${HEADER}
@group(0) @binding(2) var<storage, read> KV: array<u32>;
@group(0) @binding(3) var<storage, read> S: array<u32>;
${F16X2}
// elements 2i and 2i + 1 of the cache (head sizes and kv_dim are even): one word of F16 halves,
// two F32 words
fn kvw(i: u32) -> vec2<f32> {
${f16 ? '  return f16x2(KV[i]);' : '  return vec2<f32>(bitcast<f32>(KV[2u * i]), bitcast<f32>(KV[2u * i + 1u]));'}
}
var<workgroup> qs: array<f32, ${maxHead}>;
var<workgroup> part: array<f32, ${WG * gmax}>; // [position in the tile][slice]: partial dots
var<workgroup> pr: array<f32, ${WG}>;
var<workgroup> red: array<f32, ${WG}>;
fn wreduce(t: u32, v: f32, is_max: bool) -> f32 {
  red[t] = v;
  workgroupBarrier();
  for (var k = ${WG / 2}u; k > 0u; k >>= 1u) {
    if (t < k) { red[t] = select(red[t] + red[t + k], max(red[t], red[t + k]), is_max); }
    workgroupBarrier();
  }
  let r = red[0];
  workgroupBarrier();
  return r;
}
${wide ? WIDE_KSLICE : `// q · K[row] over dimensions 8g .. 8g + 7 (< hs), in order; kb the row's first element. A whole
// slice is eight loads issued together (four words of an F16 cache); a head size that is not a
// multiple of 8 ends in a partial slice, read a pair at a time.
fn kslice(kb: u32, g: u32, hs: u32) -> f32 {
  let d0 = g * ${ATT_SLICE}u;
  if (d0 + ${ATT_SLICE}u <= hs) {
    let w0 = (kb + d0) >> 1u; // kb and d0 even: whole pairs
    let a = kvw(w0);
    let b = kvw(w0 + 1u);
    let c = kvw(w0 + 2u);
    let e = kvw(w0 + 3u);
    let lo = vec4<f32>(a.x, a.y, b.x, b.y);
    let hi = vec4<f32>(c.x, c.y, e.x, e.y);
    var s = qs[d0] * lo.x;
    s += qs[d0 + 1u] * lo.y;
    s += qs[d0 + 2u] * lo.z;
    s += qs[d0 + 3u] * lo.w;
    s += qs[d0 + 4u] * hi.x;
    s += qs[d0 + 5u] * hi.y;
    s += qs[d0 + 6u] * hi.z;
    s += qs[d0 + 7u] * hi.w;
    return s;
  }
  var s = 0.0;
  for (var d = d0; d < hs; d += 2u) {
    let v = kvw((kb + d) >> 1u);
    s += qs[d] * v.x;
    s += qs[d + 1u] * v.y;
  }
  return s;
}
`}@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let hs = pu(4u);
  let kv_dim = pu(5u);
  // positions 0 .. pos (causal), or to the end of the entry's non-causal image (S[len_slot − 1
  // + z] when param 11 is not 0 and that is not 0); a window reaches back n_swa from pos + 1
  let pos1 = S[pu(8u) + wg.z] + 1u;
  var end = 0u;
  if (pu(11u) != 0u) { end = S[pu(11u) - 1u + wg.z]; }
  let len = select(pos1, end, end > 0u);
  let n_swa = pu(9u);
  let start = select(0u, pos1 - n_swa, n_swa > 0u && pos1 > n_swa);
  // this entry's splits: ranges of chunk positions (attentionSplit)
  let chunk = ${WG}u * max(1u, (len + ${WG}u * pu(14u) - 1u) / (${WG}u * pu(14u)));
  let lo = max(start, wg.y * chunk);
  let hi = min(len, (wg.y + 1u) * chunk);
  let kh = (wg.x / pu(7u)) * hs;
  let sb = S[pu(15u) + wg.z] * 2u * pu(6u);
  let q0 = pu(0u) + wg.z * pu(1u) + wg.x * hs;
  for (var d = t; d < hs; d += ${WG}u) { qs[d] = A[q0 + d]; }
  let ng = (hs + ${slice - 1}u) / ${slice}u; // slices of a position
  let pp = ${WG}u / ng;                               // positions a pass
  let row_pairs = kv_dim / 2u;
  let hs_pairs = hs / 2u;
  let vbase = ((sb + pu(6u)) * kv_dim + kh) / 2u; // the V rows' first pair
  workgroupBarrier();
  var m = -3.0e38;
  var l = 0.0;
  var acc: array<vec2<f32>, ${per}>;
  for (var t0 = lo; t0 < hi; t0 += ${WG}u) {
    let nt = min(${WG}u, hi - t0);
    for (var b0 = 0u; b0 < nt; b0 += pp) {
      let pl = b0 + t / ng;
      if (t < pp * ng && pl < nt) { part[pl * ng + t % ng] = kslice((sb + t0 + pl) * kv_dim + kh, t % ng, hs); }
    }
    workgroupBarrier();
    var s = -3.0e38;
    if (t < nt) {
      var dot = 0.0;
      for (var g = 0u; g < ng; g++) { dot += part[t * ng + g]; }
      s = dot * pf(10u);
    }
    let mn = max(m, wreduce(t, s, true));
    let corr = exp(m - mn);
    let e = select(0.0, exp(s - mn), t < nt);
    pr[t] = e;
    l = l * corr + wreduce(t, e, false);
    m = mn;
    for (var k = 0u; k < ${per}u; k++) {
      let w = t + k * ${WG}u;
      if (w < hs_pairs) {
        var a = acc[k] * corr;
        let r0 = vbase + t0 * row_pairs + w;
        var j = 0u;
        for (; j + 4u <= nt; j += 4u) { // four independent loads in flight
          let r = r0 + j * row_pairs;
          let v0 = kvw(r);
          let v1 = kvw(r + row_pairs);
          let v2 = kvw(r + 2u * row_pairs);
          let v3 = kvw(r + 3u * row_pairs);
          a += pr[j] * v0;
          a += pr[j + 1u] * v1;
          a += pr[j + 2u] * v2;
          a += pr[j + 3u] * v3;
        }
        for (; j < nt; j++) { a += pr[j] * kvw(r0 + j * row_pairs); }
        acc[k] = a;
      }
    }
    workgroupBarrier();
  }
  let o0 = pu(12u) + wg.z * pu(13u) + (wg.x * pu(14u) + wg.y) * (hs + 2u);
  for (var k = 0u; k < ${per}u; k++) {
    let w = t + k * ${WG}u;
    if (w < hs_pairs) {
      A[o0 + 2u * w] = acc[k].x;
      A[o0 + 2u * w + 1u] = acc[k].y;
    }
  }
  if (t == 0u) {
    A[o0 + hs] = m;
    A[o0 + hs + 1u] = l;
  }
}`;
}

/**
 * The splits of attention over an entry's `len` cached positions (attentionWgsl computes the same
 * in WGSL): ranges of `chunk` = WG · ⌈len / (WG · maxSplit)⌉ positions (at least WG), `splits` =
 * ⌈len / chunk⌉ ≤ maxSplit of them. A function of the length, not of nCtx: with nCtx 131072 a
 * 1000-position sequence still gets 16 splits (fixed ranges of nCtx / 32 would give it one
 * workgroup a head walking all 1000).
 */
export function attentionSplit(len, maxSplit) {
  const chunk = WG * Math.max(1, Math.ceil(len / (WG * maxSplit)));
  return { chunk, splits: Math.max(1, Math.ceil(len / chunk)) };
}

/**
 * Attention, second half: head x of entry z from the partials of its S[n_split_slot] splits
 * (attentionWgsl): with M the largest m, o = Σ exp(m − M)·acc / Σ exp(m − M)·l (a split without
 * positions adds exact zeros; one split alone gives acc / l). Params: 0 o_off, 1 o_estride,
 * 2 head_size, 3 part_off, 4 part_estride, 5 max_split, 6 n_split_slot (index into S).
 */
export function attentionCombineWgsl() {
  return `${HEADER}
@group(0) @binding(2) var<storage, read> S: array<u32>;
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
  let o0 = pu(0u) + wg.z * pu(1u) + wg.x * hs;
  for (var d = t; d < hs; d += ${WG}u) {
    var o = 0.0;
    for (var s = 0u; s < ns; s++) {
      let b = pb + s * (hs + 2u);
      o += exp(A[b + hs] - mx) * A[b + d];
    }
    A[o0 + d] = o / l;
  }
}`;
}

/**
 * Element-wise, over i < len of every entry z (workgroups x cover len): `op` one of
 *   add      A[y + i] += A[x + i]                 params 0 y_off, 1 y_estride, 2 x_off, 3 x_estride, 4 len
 *   add_vec  A[y + i] += V[v_off + i]             params 0 y_off, 1 y_estride, 2 v_off, 3 len
 *   scale    A[y + i] *= s                        params 0 y_off, 1 y_estride, 2 len, 3 s (f32)
 *   scale_by A[y + i] *= V[v_off]                 params 0 y_off, 1 y_estride, 2 v_off, 3 len
 *                                                 (Gemma 4's layer_output_scale)
 *   mul_vec  A[y + i] *= V[v_off + i]             params 0 y_off, 1 y_estride, 2 v_off, 3 len
 *                                                 (Gemma 4's router input scale, ffn_gate_inp.scale)
 *   glu      A[g + i] = act(A[g + i]) (· A[u + i]) params 0 g_off, 1 g_estride, 2 u_off, 3 u_estride,
 *                                                 4 len, 5 act (0 SiLU, 1 GELU), 6 gated
 *   softcap  A[y + i] = c · tanh(A[y + i] / c)    params 0 y_off, 1 y_estride, 2 len, 3 c (f32)
 * SiLU as wlm_swiglu_ref, GELU as wlm_gelu1_ref (the tanh form on binary16-rounded values).
 */
export function eltwiseWgsl(op) {
  const idx = /* wgsl */ `
  let i = wg.x * ${WG}u + t;`;
  const body = {
    add: `${idx}
  if (i >= pu(4u)) { return; }
  A[pu(0u) + wg.z * pu(1u) + i] += A[pu(2u) + wg.z * pu(3u) + i];`,
    add_vec: `${idx}
  if (i >= pu(3u)) { return; }
  A[pu(0u) + wg.z * pu(1u) + i] += V[pu(2u) + i];`,
    scale: `${idx}
  if (i >= pu(2u)) { return; }
  A[pu(0u) + wg.z * pu(1u) + i] *= pf(3u);`,
    scale_by: `${idx}
  if (i >= pu(3u)) { return; }
  A[pu(0u) + wg.z * pu(1u) + i] *= V[pu(2u)];`,
    mul_vec: `${idx}
  if (i >= pu(3u)) { return; }
  A[pu(0u) + wg.z * pu(1u) + i] *= V[pu(2u) + i];`,
    glu: `${idx}
  if (i >= pu(4u)) { return; }
  let g = pu(0u) + wg.z * pu(1u) + i;
  var v = glu_act(A[g], pu(5u));
  if (pu(6u) != 0u) { v = v * A[pu(2u) + wg.z * pu(3u) + i]; }
  A[g] = v;`,
    softcap: `${idx}
  if (i >= pu(2u)) { return; }
  let y = pu(0u) + wg.z * pu(1u) + i;
  A[y] = pf(3u) * tanh_safe(A[y] / pf(3u));`,
  }[op];
  if (!body) throw new Error(`eltwiseWgsl: unknown op ${op}`);
  return `${HEADER}
${op === 'add_vec' || op === 'scale_by' || op === 'mul_vec' ? '@group(0) @binding(2) var<storage, read> V: array<f32>;' : ''}
${F2H}
${F16V}
${GLU_ACT}
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {${body}
}`;
}
