// wgsl_quant.js — the weight types on the GPU: for each GGUF type id, its block shape and a WGSL
// function `w_get(base, i) -> f32` that decodes element i of the block starting at byte `base`
// of the weight buffer W (bound as array<u32>: the file's bytes as they are, quantized blocks
// stay quantized in GPU memory). The layouts are ggml's, as src/kernels/quant.h documents them
// field by field; each accessor is the per-element form of that type's to_float in
// src/kernels/quant_blocks32.c or quant_kquants.c (F16 / BF16: quant.c), the reference
// tests/js/webgpu_kernels.test.mjs compares it with. Each type also has
// `w_get4(r0, k) -> vec4<f32>`, the four elements k .. k+3 of the row starting at byte r0 (k a
// multiple of 4, k + 3 below the row's length): the tile loader of the matrix-matrix kernels
// (wgsl_matmat.js), which reads a block's scales once and its quants a 32-bit word at a time
// (WGSL_WORDS) instead of a byte per element; tests/js/webgpu_matmat.test.mjs checks it against
// C's to_float for every type. It does not hold the kernels that use the accessors (wgsl_ops.js,
// wgsl_matmat.js).

/** f16 bits to f32, by hand (exact for subnormals whatever the GPU's unpack2x16float does). */
export const F16V = /* wgsl */ `
fn f16v(h: u32) -> f32 {
  let s = select(1.0, -1.0, (h & 0x8000u) != 0u);
  let e = (h >> 10u) & 0x1fu;
  let m = h & 0x3ffu;
  if (e == 0u) { return s * f32(m) * 5.9604644775390625e-8; }
  if (e == 31u) { return bitcast<f32>(((h & 0x8000u) << 16u) | 0x7f800000u | (m << 13u)); }
  return bitcast<f32>(((h & 0x8000u) << 16u) | ((e + 112u) << 23u) | (m << 13u));
}`;

/** Two f16 halves of a word (low half in x) to f32: unpack2x16float, the hardware's conversion,
 *  with binary16 subnormals (exponent 0) rebuilt from their integer mantissa, since a GPU may
 *  flush them (lavapipe and SwiftShader do not): exactly f16v of each half, without branches. */
export const F16X2 = /* wgsl */ `
fn f16x2(w: u32) -> vec2<f32> {
  let h = vec2<u32>(w & 0xffffu, w >> 16u);
  let sub = vec2<f32>(h & vec2<u32>(0x3ffu)) * 5.9604644775390625e-8;
  let neg = (h & vec2<u32>(0x8000u)) != vec2<u32>(0u);
  return select(unpack2x16float(w), select(sub, -sub, neg), (h & vec2<u32>(0x7c00u)) == vec2<u32>(0u));
}`;

/** Byte and half-word readers over W, shared by every accessor. f16 bits are decoded by hand so
 *  that subnormal scales are exact whatever the GPU does with unpack2x16float. */
export const WGSL_BYTES = /* wgsl */ `
fn rb(o: u32) -> u32 { return (W[o >> 2u] >> ((o & 3u) * 8u)) & 0xffu; }
fn rsb(o: u32) -> i32 { return (i32(rb(o)) << 24u) >> 24u; }
fn rh(o: u32) -> u32 { let w = W[o >> 2u]; return select(w & 0xffffu, w >> 16u, (o & 2u) != 0u); }
${F16V}
fn rf16(o: u32) -> f32 { return f16v(rh(o)); }
`;

/** Word readers for w_get4: r4(o) the 4 bytes at any byte offset o (blocks of 18, 22, 34, 110
 *  or 210 bytes leave rows and blocks 2-aligned only), and the four byte lanes of a word shifted
 *  right by `sh` under `mask` (nibbles: sh 0 or 4, mask 0xf). */
export const WGSL_WORDS = /* wgsl */ `
fn r4(o: u32) -> u32 {
  let s = (o & 3u) * 8u;
  let lo = W[o >> 2u];
  if (s == 0u) { return lo; }
  return (lo >> s) | (W[(o >> 2u) + 1u] << (32u - s));
}
fn lanes(w: u32, sh: u32, mask: u32) -> vec4<u32> {
  return (vec4<u32>(w, w >> 8u, w >> 16u, w >> 24u) >> vec4<u32>(sh)) & vec4<u32>(mask);
}
fn slanes(w: u32) -> vec4<f32> {
  return vec4<f32>(vec4<i32>(i32(w << 24u), i32(w << 16u), i32(w << 8u), i32(w)) >> vec4<u32>(24u));
}
`;

// Sub-expressions shared by the K-quants: Q4_K / Q5_K's packed 6-bit scale and min of sub-block j
// (wlm_q4_K_scale_min), Q2_K / Q3_K's 2-bit levels (k2_level).
const K_SCALE_MIN = /* wgsl */ `
fn k_scale_min(s: u32, j: u32) -> vec2<f32> {
  if (j < 4u) { return vec2<f32>(f32(rb(s + j) & 63u), f32(rb(s + j + 4u) & 63u)); }
  let sc = (rb(s + j + 4u) & 0xfu) | ((rb(s + j - 4u) >> 6u) << 4u);
  let m = (rb(s + j + 4u) >> 4u) | ((rb(s + j) >> 6u) << 4u);
  return vec2<f32>(f32(sc), f32(m));
}`;
const K2_LEVEL = /* wgsl */ `
fn k2_level(qs: u32, e: u32) -> u32 { return (rb(qs + 32u * (e / 128u) + e % 32u) >> (2u * (e % 128u / 32u))) & 3u; }`;

// MXFP4's element value K[code] (wlm_mxfp4_kvalues: the E2M1 values doubled, 0 1 2 3 4 6 8 12 and
// their negatives, computed from the code's bits rather than a table) and half its block scale,
// 2^(e - 128) as ggml_e8m0_to_fp32_half has it: bits (e - 1) << 23, and for e = 0 / 1 the
// subnormals 2^-128 / 2^-127 (bits 0x00200000 << e), which a GPU may flush to zero (WGSL allows
// it): weights below 2^-124 in magnitude, the only ones such blocks hold, may then read as 0.
const MXFP4_FNS = /* wgsl */ `
fn mx_k(q: u32) -> f32 {
  let m = q & 7u;
  let v = f32(select(m, (2u + (m & 1u)) << ((m >> 1u) - 1u), m >= 4u));
  return select(v, -v, (q & 8u) != 0u);
}
fn e8m0_half(e: u32) -> f32 { return bitcast<f32>(select(0x00200000u << e, (e - 1u) << 23u, e >= 2u)); }`;

/**
 * GGUF type id → {name, blk (elements per block), bytes (per block), wgsl (w_get and what it
 * needs), wgsl4 (w_get4, placed after wgsl and WGSL_WORDS), and for the types of Q4_K_M and Q8_0
 * files wgsl32 (w_sub(r0, sb): the 32 elements of sub-block sb of the row at byte r0 as eight
 * vec4, each the value w_get4 gives, its scales read once; W_SUB_GENERIC builds it from w_get4
 * for the others)}. Every type the CPU engine runs:
 * F32, F16, BF16, the 32-element Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 / MXFP4 and the 256-element
 * K-quants Q2_K … Q6_K.
 */
export const GPU_TYPES = Object.freeze({
  0: { name: 'F32', blk: 1, bytes: 4, wgsl: `fn w_get(b: u32, i: u32) -> f32 { return bitcast<f32>(W[b >> 2u]); }`,
    wgsl4: `fn w_get4(r0: u32, k: u32) -> vec4<f32> {
  let o = (r0 >> 2u) + k;
  return bitcast<vec4<f32>>(vec4<u32>(W[o], W[o + 1u], W[o + 2u], W[o + 3u]));
}` },
  1: { name: 'F16', blk: 1, bytes: 2, wgsl: `fn w_get(b: u32, i: u32) -> f32 { return rf16(b); }`,
    wgsl4: `fn w_get4(r0: u32, k: u32) -> vec4<f32> {
  let a = r4(r0 + 2u * k);
  let c = r4(r0 + 2u * k + 4u);
  return vec4<f32>(f16v(a & 0xffffu), f16v(a >> 16u), f16v(c & 0xffffu), f16v(c >> 16u));
}` },
  30: { name: 'BF16', blk: 1, bytes: 2, wgsl: `fn w_get(b: u32, i: u32) -> f32 { return bitcast<f32>(rh(b) << 16u); }`,
    wgsl4: `fn w_get4(r0: u32, k: u32) -> vec4<f32> {
  let a = r4(r0 + 2u * k);
  let c = r4(r0 + 2u * k + 4u);
  return bitcast<vec4<f32>>(vec4<u32>(a << 16u, a & 0xffff0000u, c << 16u, c & 0xffff0000u));
}` },
  8: {
    name: 'Q8_0', blk: 32, bytes: 34, // d (f16), qs[32] int8: qs[i] * d
    wgsl: `fn w_get(b: u32, i: u32) -> f32 { return f32(rsb(b + 2u + i)) * rf16(b); }`,
    wgsl4: `fn w_get4(r0: u32, k: u32) -> vec4<f32> {
  let b = r0 + (k / 32u) * 34u;
  return slanes(r4(b + 2u + k % 32u)) * rf16(b);
}`,
    wgsl32: `fn w_sub(r0: u32, sb: u32) -> array<vec4<f32>, 8> {
  let b = r0 + sb * 34u;
  let d = rf16(b);
  var o: array<vec4<f32>, 8>;
  for (var i = 0u; i < 8u; i++) { o[i] = slanes(r4(b + 2u + 4u * i)) * d; }
  return o;
}`,
  },
  2: {
    name: 'Q4_0', blk: 32, bytes: 18, // d, qs[16]: element j low nibble of qs[j], j+16 high; (q - 8) * d
    wgsl: `fn w_get(b: u32, i: u32) -> f32 {
  let q = (rb(b + 2u + (i & 15u)) >> select(0u, 4u, i >= 16u)) & 0xfu;
  return f32(i32(q) - 8) * rf16(b);
}`,
    wgsl4: `fn w_get4(r0: u32, k: u32) -> vec4<f32> {
  let b = r0 + (k / 32u) * 18u;
  let i = k % 32u;
  let q = lanes(r4(b + 2u + (i & 15u)), select(0u, 4u, i >= 16u), 0xfu);
  return (vec4<f32>(q) - 8.0) * rf16(b);
}`,
  },
  3: {
    name: 'Q4_1', blk: 32, bytes: 20, // d, m, qs[16]: q * d + m
    wgsl: `fn w_get(b: u32, i: u32) -> f32 {
  let q = (rb(b + 4u + (i & 15u)) >> select(0u, 4u, i >= 16u)) & 0xfu;
  return f32(q) * rf16(b) + rf16(b + 2u);
}`,
    wgsl4: `fn w_get4(r0: u32, k: u32) -> vec4<f32> {
  let b = r0 + (k / 32u) * 20u;
  let i = k % 32u;
  let q = lanes(r4(b + 4u + (i & 15u)), select(0u, 4u, i >= 16u), 0xfu);
  return vec4<f32>(q) * rf16(b) + rf16(b + 2u);
}`,
  },
  6: {
    name: 'Q5_0', blk: 32, bytes: 22, // d, qh[4] (bit i: bit 4 of element i), qs[16]; (q5 - 16) * d
    wgsl: `fn w_get(b: u32, i: u32) -> f32 {
  let lo = (rb(b + 6u + (i & 15u)) >> select(0u, 4u, i >= 16u)) & 0xfu;
  let hi = (rb(b + 2u + (i >> 3u)) >> (i & 7u)) & 1u;
  return f32(i32(lo | (hi << 4u)) - 16) * rf16(b);
}`,
    wgsl4: `fn w_get4(r0: u32, k: u32) -> vec4<f32> {
  let b = r0 + (k / 32u) * 22u;
  let i = k % 32u;
  let lo = lanes(r4(b + 6u + (i & 15u)), select(0u, 4u, i >= 16u), 0xfu);
  let hi = (vec4<u32>(r4(b + 2u)) >> (vec4<u32>(0u, 1u, 2u, 3u) + i)) & vec4<u32>(1u);
  return (vec4<f32>(lo | (hi << vec4<u32>(4u))) - 16.0) * rf16(b);
}`,
  },
  7: {
    name: 'Q5_1', blk: 32, bytes: 24, // d, m, qh[4], qs[16]; q5 * d + m
    wgsl: `fn w_get(b: u32, i: u32) -> f32 {
  let lo = (rb(b + 8u + (i & 15u)) >> select(0u, 4u, i >= 16u)) & 0xfu;
  let hi = (rb(b + 4u + (i >> 3u)) >> (i & 7u)) & 1u;
  return f32(lo | (hi << 4u)) * rf16(b) + rf16(b + 2u);
}`,
    wgsl4: `fn w_get4(r0: u32, k: u32) -> vec4<f32> {
  let b = r0 + (k / 32u) * 24u;
  let i = k % 32u;
  let lo = lanes(r4(b + 8u + (i & 15u)), select(0u, 4u, i >= 16u), 0xfu);
  let hi = (vec4<u32>(r4(b + 4u)) >> (vec4<u32>(0u, 1u, 2u, 3u) + i)) & vec4<u32>(1u);
  return vec4<f32>(lo | (hi << vec4<u32>(4u))) * rf16(b) + rf16(b + 2u);
}`,
  },
  39: {
    name: 'MXFP4', blk: 32, bytes: 17, // e (E8M0), qs[16] (codes as Q4_0's nibbles); K[code] * 2^(e - 128)
    wgsl: `${MXFP4_FNS}
fn w_get(b: u32, i: u32) -> f32 {
  return mx_k((rb(b + 1u + (i & 15u)) >> select(0u, 4u, i >= 16u)) & 0xfu) * e8m0_half(rb(b));
}`,
    wgsl4: `fn w_get4(r0: u32, k: u32) -> vec4<f32> {
  let b = r0 + (k / 32u) * 17u;
  let i = k % 32u;
  let q = lanes(r4(b + 1u + (i & 15u)), select(0u, 4u, i >= 16u), 0xfu);
  return vec4<f32>(mx_k(q.x), mx_k(q.y), mx_k(q.z), mx_k(q.w)) * e8m0_half(rb(b));
}`,
  },
  10: {
    name: 'Q2_K', blk: 256, bytes: 84, // scales[16] (scale low nibble, min high), qs[64], d, dmin
    wgsl: `${K2_LEVEL}
fn w_get(b: u32, e: u32) -> f32 {
  let sc = rb(b + e / 16u);
  return rf16(b + 80u) * f32(sc & 0xfu) * f32(k2_level(b + 16u, e)) - rf16(b + 82u) * f32(sc >> 4u);
}`,
    wgsl4: `fn w_get4(r0: u32, k: u32) -> vec4<f32> {
  let b = r0 + (k / 256u) * 84u;
  let e = k % 256u;
  let sc = rb(b + e / 16u);
  let q = lanes(r4(b + 16u + 32u * (e / 128u) + e % 32u), 2u * (e % 128u / 32u), 3u);
  return rf16(b + 80u) * f32(sc & 0xfu) * vec4<f32>(q) - rf16(b + 82u) * f32(sc >> 4u);
}`,
  },
  11: {
    name: 'Q3_K', blk: 256, bytes: 110, // hmask[32], qs[64], scales[12] (6-bit, offset 32), d
    wgsl: `${K2_LEVEL}
fn q3_scale(s: u32, j: u32) -> i32 {
  let lo = select(rb(s + j - 8u) >> 4u, rb(s + j) & 0xfu, j < 8u);
  let hi = (rb(s + 8u + j % 4u) >> (2u * (j / 4u))) & 3u;
  return i32(lo | (hi << 4u)) - 32;
}
fn w_get(b: u32, e: u32) -> f32 {
  let hbit = (rb(b + e % 32u) >> (e / 32u)) & 1u;
  let q = i32(k2_level(b + 32u, e) + 4u * hbit) - 4;
  return rf16(b + 108u) * f32(q3_scale(b + 96u, e / 16u)) * f32(q);
}`,
    wgsl4: `fn w_get4(r0: u32, k: u32) -> vec4<f32> {
  let b = r0 + (k / 256u) * 110u;
  let e = k % 256u;
  let hbit = lanes(r4(b + e % 32u), e / 32u, 1u);
  let lv = lanes(r4(b + 32u + 32u * (e / 128u) + e % 32u), 2u * (e % 128u / 32u), 3u);
  let q = vec4<i32>(lv + 4u * hbit) - vec4<i32>(4);
  return rf16(b + 108u) * f32(q3_scale(b + 96u, e / 16u)) * vec4<f32>(q);
}`,
  },
  12: {
    name: 'Q4_K', blk: 256, bytes: 144, // d, dmin, scales[12], qs[128]; d*sc*q - dmin*m
    wgsl: `${K_SCALE_MIN}
fn w_get(b: u32, e: u32) -> f32 {
  let sm = k_scale_min(b + 4u, e / 32u);
  let q = (rb(b + 16u + 32u * (e / 64u) + e % 32u) >> (4u * (e / 32u % 2u))) & 0xfu;
  return rf16(b) * sm.x * f32(q) - rf16(b + 2u) * sm.y;
}`,
    wgsl4: `fn w_get4(r0: u32, k: u32) -> vec4<f32> {
  let b = r0 + (k / 256u) * 144u;
  let e = k % 256u;
  let sm = k_scale_min(b + 4u, e / 32u);
  let q = lanes(r4(b + 16u + 32u * (e / 64u) + e % 32u), 4u * (e / 32u % 2u), 0xfu);
  return rf16(b) * sm.x * vec4<f32>(q) - rf16(b + 2u) * sm.y;
}`,
    // rows are whole 144-byte blocks and every matrix has its own binding: b is 4-aligned
    wgsl32: `fn w_sub(r0: u32, sb: u32) -> array<vec4<f32>, 8> {
  let b = r0 + (sb / 8u) * 144u;
  let j = sb % 8u;
  let sm = k_scale_min(b + 4u, j);
  let d = rf16(b) * sm.x;
  let m = rf16(b + 2u) * sm.y;
  let q0 = (b + 16u + 32u * (j / 2u)) >> 2u;
  let sh = 4u * (j % 2u);
  var o: array<vec4<f32>, 8>;
  for (var i = 0u; i < 8u; i++) { o[i] = d * vec4<f32>(lanes(W[q0 + i], sh, 0xfu)) - m; }
  return o;
}`,
  },
  13: {
    name: 'Q5_K', blk: 256, bytes: 176, // d, dmin, scales[12], qh[32], qs[128]
    wgsl: `${K_SCALE_MIN}
fn w_get(b: u32, e: u32) -> f32 {
  let sm = k_scale_min(b + 4u, e / 32u);
  let lo = (rb(b + 48u + 32u * (e / 64u) + e % 32u) >> (4u * (e / 32u % 2u))) & 0xfu;
  let hi = (rb(b + 16u + e % 32u) >> (e / 32u)) & 1u;
  return rf16(b) * sm.x * f32(lo | (hi << 4u)) - rf16(b + 2u) * sm.y;
}`,
    wgsl4: `fn w_get4(r0: u32, k: u32) -> vec4<f32> {
  let b = r0 + (k / 256u) * 176u;
  let e = k % 256u;
  let sm = k_scale_min(b + 4u, e / 32u);
  let lo = lanes(r4(b + 48u + 32u * (e / 64u) + e % 32u), 4u * (e / 32u % 2u), 0xfu);
  let hi = lanes(r4(b + 16u + e % 32u), e / 32u, 1u);
  return rf16(b) * sm.x * vec4<f32>(lo | (hi << vec4<u32>(4u))) - rf16(b + 2u) * sm.y;
}`,
  },
  14: {
    name: 'Q6_K', blk: 256, bytes: 210, // ql[128], qh[64], scales[16] int8, d; d*sc*(q6 - 32)
    wgsl: `fn w_get(b: u32, e: u32) -> f32 {
  let h = e / 128u;
  let r = e % 128u;
  let k = r / 32u;
  let l = r % 32u;
  let lo = (rb(b + 64u * h + l + 32u * (k & 1u)) >> (4u * (k >> 1u))) & 0xfu;
  let hi = (rb(b + 128u + 32u * h + l) >> (2u * k)) & 3u;
  let sc = rsb(b + 192u + 8u * h + 2u * k + l / 16u);
  return rf16(b + 208u) * f32(sc) * f32(i32(lo | (hi << 4u)) - 32);
}`,
    wgsl4: `fn w_get4(r0: u32, k: u32) -> vec4<f32> {
  let b = r0 + (k / 256u) * 210u;
  let e = k % 256u;
  let h = e / 128u;
  let kq = e % 128u / 32u;
  let l = e % 32u;
  let lo = lanes(r4(b + 64u * h + l + 32u * (kq & 1u)), 4u * (kq >> 1u), 0xfu);
  let hi = lanes(r4(b + 128u + 32u * h + l), 2u * kq, 3u);
  let sc = rsb(b + 192u + 8u * h + 2u * kq + l / 16u);
  return rf16(b + 208u) * f32(sc) * vec4<f32>(vec4<i32>(lo | (hi << vec4<u32>(4u))) - vec4<i32>(32));
}`,
    wgsl32: `fn w_sub(r0: u32, sb: u32) -> array<vec4<f32>, 8> {
  let b = r0 + (sb / 8u) * 210u;
  let j = sb % 8u;
  let h = j / 4u;
  let kq = j % 4u;
  let d = rf16(b + 208u);
  let s0 = d * f32(rsb(b + 192u + 8u * h + 2u * kq));
  let s1 = d * f32(rsb(b + 193u + 8u * h + 2u * kq));
  let lo0 = b + 64u * h + 32u * (kq & 1u);
  let hi0 = b + 128u + 32u * h;
  var o: array<vec4<f32>, 8>;
  for (var i = 0u; i < 8u; i++) {
    let lo = lanes(r4(lo0 + 4u * i), 4u * (kq >> 1u), 0xfu);
    let hi = lanes(r4(hi0 + 4u * i), 2u * kq, 3u);
    o[i] = select(s0, s1, i >= 4u) * vec4<f32>(vec4<i32>(lo | (hi << vec4<u32>(4u))) - vec4<i32>(32));
  }
  return o;
}`,
  },
});

/** w_sub from eight w_get4 calls: the types without a wgsl32 of their own. */
export const W_SUB_GENERIC = /* wgsl */ `
fn w_sub(r0: u32, sb: u32) -> array<vec4<f32>, 8> {
  var o: array<vec4<f32>, 8>;
  for (var i = 0u; i < 8u; i++) { o[i] = w_get4(r0, 32u * sb + 4u * i); }
  return o;
}`;

/** The name of GGUF type `id` for messages ('Q4_K'), or `type <id>`. */
export function typeName(id) {
  return GPU_TYPES[id]?.name ?? `type ${id}`;
}
