// vision_grid.js — what the GPU vision encoder (vision.js) computes once per piece size on the
// CPU, for the towers that take pieces of any size: LFM2-VL's learned positions resized to the
// piece's patch grid, and Qwen2.5-VL's order of the patches through its tower (2×2 groups,
// window by window), each patch's window and its 2-D RoPE table. Each is the exact form of a step
// of src/vision/encoder.c (wlm_resize_positions, qwen_layout, rope_chunk), tested in
// tests/js/webgpu_vision.test.mjs (resizePositions against a float64 reference; the others
// through the whole encoder against the CPU's).

/**
 * The learned positions `src` (an n × n grid of c floats a cell, raster order) resized to a gw × gh
 * grid (gh rows of gw cells of c floats, a new Float32Array), as src/vision/encoder.c
 * wlm_resize_positions does it for LFM2's pieces: ggml_compute_forward_upscale_f32 in its
 * bilinear + antialias mode (a triangle filter as wide as the scale where it shrinks), every
 * operation rounded to binary32 in C's order, so the result is C's bit for bit.
 */
export function resizePositions(src, n, c, gw, gh) {
  const f = Math.fround;
  const dst = new Float32Array(gw * gh * c);
  const sf0 = f(gw / n), sf1 = f(gh / n), off = 0.5;
  const support0 = Math.max(1, f(1 / sf0)), inv0 = f(1 / support0);
  const support1 = Math.max(1, f(1 / sf1)), inv1 = f(1 / support1);
  for (let i1 = 0; i1 < gh; i1++) {
    const y = f((i1 + off) / sf1);
    const y0 = Math.max(0, Math.trunc(f(f(y - support1) + off))), y1 = Math.min(n, Math.trunc(f(f(y + support1) + off)));
    for (let i0 = 0; i0 < gw; i0++) {
      const x = f((i0 + off) / sf0);
      const x0 = Math.max(0, Math.trunc(f(f(x - support0) + off))), x1 = Math.min(n, Math.trunc(f(f(x + support0) + off)));
      const o = (i1 * gw + i0) * c;
      for (let ch = 0; ch < c; ch++) {
        let val = 0, total = 0;
        for (let sy = y0; sy < y1; sy++) {
          const wy = Math.max(f(1 - Math.abs(f(f(f(sy - y) + off) * inv1))), 0);
          for (let sx = x0; sx < x1; sx++) {
            const wx = Math.max(f(1 - Math.abs(f(f(f(sx - x) + off) * inv0))), 0);
            const wgt = f(wx * wy);
            if (wgt <= 0) continue;
            val = f(val + f(src[(sy * n + sx) * c + ch] * wgt));
            total = f(total + wgt);
          }
        }
        dst[o + ch] = total > 0 ? f(val / total) : val;
      }
    }
  }
  return dst;
}

/**
 * Qwen2.5-VL's order of a GW × GH patch grid through its tower (encoder.c qwen_layout, clip.cpp's
 * window_idx): 2×2 groups in raster order of the groups, reordered window by window (windows of
 * g groups a side, raster order; each window's groups raster order). Returns {perm (the i-th
 * group's raster index over the GW/2 × GH/2 group grid), pos (N × 2: each patch's row and
 * column, in the tower's order), win (N × 2 floats: each patch's window — its first patch and
 * count)}.
 */
export function qwenLayout(GW, GH, g) {
  const pw = GW / 2, ph = GH / 2, N = GW * GH;
  const perm = new Int32Array(pw * ph), pos = new Int32Array(2 * N), win = new Float32Array(2 * N);
  let dst = 0;
  for (let y = 0; y < ph; y += g) {
    for (let x = 0; x < pw; x += g) {
      const wh = Math.min(g, ph - y), ww = Math.min(g, pw - x), d0 = dst;
      for (let dy = 0; dy < wh; dy++) for (let dx = 0; dx < ww; dx++) perm[dst++] = (y + dy) * pw + (x + dx);
      for (let t = 4 * d0; t < 4 * dst; t++) win[2 * t] = 4 * d0, win[2 * t + 1] = 4 * (dst - d0);
    }
  }
  for (let i = 0; i < pw * ph; i++) {
    for (let k = 0; k < 4; k++) {
      pos[2 * (4 * i + k)] = 2 * Math.floor(perm[i] / pw) + (k >> 1);
      pos[2 * (4 * i + k) + 1] = 2 * (perm[i] % pw) + (k & 1);
    }
  }
  return { perm, pos, win };
}

/**
 * The 2-D RoPE table of Qwen2.5-VL's patches (encoder.c rope_chunk: ggml's rope_multi, vision
 * mode, base 10000): for patch t at row r, column c, pair p < hd/4 turns by r·θ^p and pair
 * hd/4 + p by c·θ^p, θ = 10000^(−2/(hd/2)), the angle a running binary32 product as C forms it.
 * Returns cos (N × hd/2) then sin (N × hd/2), one Float32Array.
 */
export function qwenRopeTable(pos, hd) {
  const f = Math.fround, N = pos.length / 2, half = hd / 2, quarter = hd / 4;
  const scale = f(10000 ** f(-2 / half));
  const out = new Float32Array(2 * N * half);
  for (let t = 0; t < N; t++) {
    for (let a = 0; a < 2; a++) {
      let theta = pos[2 * t + a];
      for (let p = 0; p < quarter; p++) {
        out[t * half + a * quarter + p] = Math.cos(theta);
        out[N * half + t * half + a * quarter + p] = Math.sin(theta);
        theta = f(theta * scale);
      }
    }
  }
  return out;
}
