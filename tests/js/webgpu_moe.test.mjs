// The WGSL kernels of a mixture of experts and of attention sinks (js/backend/webgpu/wgsl_moe.js)
// on Dawn (lavapipe or SwiftShader, tests/js/_webgpu.mjs), against references: the route against a
// transcription of src/model/moe.c's route() in double precision (the chosen ids equal, the weights
// within 1e-6), MUL_MAT_ID against C's dequantization of each type (the dot in double, as
// webgpu_kernels.test.mjs's matvec, ≤ 1e-6 · log2(cols) · Σ|w·x|) with the experts in one buffer
// and split over two (the same bits), in both forms: per (entry, slot) and grouped by expert
// (moe_group's lists against the routes exactly; moe_matmat over several row and pair tiles, with
// experts no pair chose and a skewed routing where one expert has every entry), gpt-oss's clamped
// SwiGLU and the weighted sum against their formulas, the sinks against a softmax with one more
// logit computed in double. Also, without a GPU, the pieces an expert tensor is split into by the
// binding limit (weights.js's expertPieces, stream.js's file ranges) and the refusal naming a
// tensor of which not even one expert fits.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { dawn, kernelKit, rng, wasmReference } from './_webgpu.mjs';
import { NONE, WG } from '../../js/backend/webgpu/wgsl_ops.js';
import { GPU_TYPES } from '../../js/backend/webgpu/wgsl_quant.js';
import { moeActWgsl, moeGroupWgsl, moeMatmatWgsl, moeMatvecWgsl, moeRouteWgsl, moeSumWgsl, sinksWgsl } from '../../js/backend/webgpu/wgsl_moe.js';
import { TILE } from '../../js/backend/webgpu/wgsl_matmat.js';
import { expertPieces, matrices } from '../../js/backend/webgpu/weights.js';
import { createMatrixBuffers } from '../../js/backend/webgpu/stream.js';

const { adapter, skip: why } = await dawn();
const skip = why || false;
const device = adapter ? await adapter.requestDevice() : null;
const x = wasmReference();
const { run, weights } = kernelKit(device, x);
const fbits = (v) => new Uint32Array(new Float32Array([v]).buffer)[0];

/** moe.c's route() of one entry's logits z, in double: {ids, w}. */
function routeRef(z, { gating, normW, scale, rb, pb, k }) {
  let s = z.map((v, e) => v + (rb ? rb[e] : 0));
  if (gating === 1) {
    const mx = Math.max(...s);
    const ex = s.map((v) => Math.exp(v - mx));
    const sum = ex.reduce((a, b) => a + b, 0);
    s = ex.map((v) => v / sum);
  } else if (gating === 2) {
    s = s.map((v) => 1 / (1 + Math.exp(-v)));
  }
  const ids = [], w = [];
  for (let j = 0; j < k; j++) {
    let best = -1, bv = 0;
    s.forEach((v0, e) => {
      if (ids.includes(e)) return;
      const v = v0 + (pb ? pb[e] : 0);
      if (best < 0 || v > bv) { best = e; bv = v; }
    });
    ids.push(best);
    w.push(s[best]);
  }
  let ww = w;
  if (gating === 3) {
    const mx = Math.max(...w);
    const ex = w.map((v) => Math.exp(v - mx));
    const sum = ex.reduce((a, b) => a + b, 0);
    ww = ex.map((v) => v / sum);
  }
  if (normW) { const sum = Math.max(ww.reduce((a, b) => a + b, 0), 6.103515625e-5); ww = ww.map((v) => v / sum); }
  if (scale !== 0 && scale !== 1) ww = ww.map((v) => v * scale);
  return { ids, w: ww };
}

test('moe_route: softmax + renormalised (Qwen3-MoE), sigmoid with exp_probs_b steering the choice (LFM2-MoE), top k of the biased logits with a softmax over them (gpt-oss), and a weight scale: ids equal, weights ≤ 1e-6', { skip }, async () => {
  const r = rng(41);
  const n = 5;
  for (const [gating, normW, scale, bias, probs, E, k] of [[1, 1, 1, false, false, 128, 8], [2, 1, 1, false, true, 32, 4], [3, 0, 1, true, false, 32, 4], [1, 0, 2.5, false, false, 6, 2]]) {
    const zE = E + 3, zOff = 4, rOff = zOff + n * zE + 4, rE = 2 * k + 2;
    const A = new Float32Array(rOff + n * rE).fill(-7);
    for (let e = 0; e < n; e++) for (let i = 0; i < E; i++) A[zOff + e * zE + i] = r() * 4;
    const rbOff = 2, pbOff = rbOff + E;
    const V = new Float32Array(pbOff + E).map(() => r());
    const [out] = await run(moeRouteWgsl(), {
      A, params: [zOff, zE, E, k, gating, normW, fbits(scale), bias ? rbOff : NONE, probs ? pbOff : NONE, rOff, rE], extra: [V], grid: [1, 1, n],
    });
    const got = new Float32Array(out);
    for (let e = 0; e < n; e++) {
      const z = Array.from(A.subarray(zOff + e * zE, zOff + e * zE + E));
      const want = routeRef(z, { gating, normW, scale, rb: bias ? V.subarray(rbOff) : null, pb: probs ? V.subarray(pbOff) : null, k });
      const what = `gating ${gating} entry ${e}`;
      assert.deepEqual(Array.from(got.subarray(rOff + e * rE, rOff + e * rE + k)), want.ids, `${what}: ids`);
      for (let j = 0; j < k; j++) {
        const g = got[rOff + e * rE + k + j];
        assert.ok(Math.abs(g - want.w[j]) <= 1e-6 * Math.max(1, Math.abs(want.w[j])), `${what} slot ${j}: ${g} vs ${want.w[j]}`);
      }
    }
  }
});

/** MUL_MAT_ID of `type`: E experts of rows × cols, n entries × k slots; x per entry (or per
 *  pair: xPair), a bias per expert row, and with `scale` each expert's output scale (Gemma 4's
 *  ffn_down_exps.scale: (Σ + bias) · s_e); the experts in one buffer, then split at `split`. */
/** Each (entry, slot) pair's product rows `got` against a scalar reference: row r
 *  of pair p = dequantized expert rows · the entry's (or the pair's, xPair) input, + the expert's
 *  bias (bOff ≥ 0), × its scale (sOff ≥ 0); tolerance from the terms' magnitudes. */
function checkPairs(got, { deq, A, V, np, k, rows, cols, xOff, xE, xPair, yOff, yE, bOff, sOff, expert, what }) {
  for (let p = 0; p < np; p++) {
    const ent = Math.floor(p / k), ex = expert(ent, p % k), x0 = xOff + (xPair ? p : ent) * xE;
    for (let row = 0; row < rows; row++) {
      let want = 0, abs = 0;
      for (let i = 0; i < cols; i++) {
        const t = deq[(ex * rows + row) * cols + i] * A[x0 + i];
        want += t;
        abs += Math.abs(t);
      }
      if (bOff >= 0) want += V[bOff + ex * rows + row];
      const sc = sOff >= 0 ? Math.abs(V[sOff + ex]) : 1;
      if (sOff >= 0) want *= V[sOff + ex];
      const g = got[yOff + p * yE + row];
      assert.ok(Math.abs(g - want) <= sc * 1e-6 * abs * Math.log2(cols) + 1e-6 * Math.abs(want) + 1e-30,
        `${what} pair ${p} (expert ${ex}) row ${row}: ${g} vs ${want}`);
    }
  }
}

async function checkMoeMatvec(type, rows, cols, { tpr, E = 5, n = 3, k = 2, xPair = false, split = 2, scale = false }) {
  const { bytes, deq, rowBytes } = weights(type, E * rows, cols, 500 + type + cols);
  const r = rng(type + 3);
  const np = n * k;
  const xs = xPair ? np : n, xE = cols + 4, rE = 2 * k + 1, yE = rows + 2;
  const xOff = 4, rOff = xOff + xs * xE, yOff = rOff + n * rE + 4;
  const A = new Float32Array(yOff + np * yE);
  for (let s = 0; s < xs; s++) for (let i = 0; i < cols; i++) A[xOff + s * xE + i] = r();
  const ids = [[4, 0], [2, 4], [1, 3]]; // an expert twice, one never
  for (let e = 0; e < n; e++) for (let j = 0; j < k; j++) A[rOff + e * rE + j] = ids[e % 3][j];
  const bOff = 3;
  const sOff = bOff + E * rows;
  const V = new Float32Array(sOff + E).map(() => r());
  const params = (e0, e1) => [rows, cols, rowBytes, xOff, xE, xPair ? 1 : 0, yOff, yE, rOff, rE, k, e0, e1, bOff, scale ? sOff : NONE];
  const grid = [Math.ceil(rows / (WG / tpr)), 1, np];
  const code = moeMatvecWgsl(type, { tpr });
  const [whole] = await run(code, { A, params: params(0, E), extra: [bytes, V], grid });
  const got = new Float32Array(whole);
  checkPairs(got, { deq, A, V, np, k, rows, cols, xOff, xE, xPair, yOff, yE, bOff, sOff: scale ? sOff : -1,
    expert: (ent, j) => ids[ent % 3][j], what: `${GPU_TYPES[type].name} tpr ${tpr}` });
  // the experts in two buffers (experts [0, split) and [split, E)), a dispatch each
  const at = split * rows * rowBytes;
  const [first] = await run(code, { A, params: params(0, split), extra: [bytes.slice(0, at), V], grid });
  const [both] = await run(code, { A: new Float32Array(first), params: params(split, E), extra: [bytes.slice(at), V], grid });
  assert.deepEqual(Buffer.from(both), Buffer.from(whole), `${GPU_TYPES[type].name}: split experts differ from one buffer`);
}

test('moe_matvec (MUL_MAT_ID): F32, F16, Q8_0, Q4_K, Q6_K and MXFP4 experts against C\'s dequantization, x per entry and per pair, biases, per-expert output scales; split over two buffers the same bits', { skip }, async () => {
  await checkMoeMatvec(0, 6, 64, { tpr: 1 });
  await checkMoeMatvec(1, 5, 200, { tpr: 16, xPair: true, split: 3 });
  await checkMoeMatvec(8, 7, 96, { tpr: 1, xPair: true });
  await checkMoeMatvec(8, 10, 64, { tpr: 1, xPair: true, scale: true }); // Gemma 4's scaled down product
  await checkMoeMatvec(12, 4, 256, { tpr: 16, scale: true, split: 3 });
  await checkMoeMatvec(12, 3, 512, { tpr: 16 });
  await checkMoeMatvec(14, 3, 2048, { tpr: WG, n: 2, split: 1 });
  await checkMoeMatvec(39, 9, 2880 / 10, { tpr: 16, split: 4 }); // gpt-oss's MXFP4 experts (rows of 288 here)
});

/** MUL_MAT_ID grouped by expert (moe_group, then moe_matmat) of `type`: E experts of rows ×
 *  cols, n entries × k slots routed by route(z, j); checks the lists against the routes exactly,
 *  the products as checkMoeMatvec's (same bound), and the experts split at `split` over two
 *  buffers (a dispatch each) against one buffer, bit for bit. */
async function checkMoeGrouped(type, rows, cols, { E, n, k, route, xPair = false, scale = false, bias = true, split = 2 }) {
  const { bytes, deq, rowBytes } = weights(type, E * rows, cols, 700 + type + cols);
  const r = rng(type + 11);
  const np = n * k, LS = n + 3;
  const xs = xPair ? np : n, xE = cols + 4, rE = 2 * k + 1, yE = rows + 2;
  const xOff = 4, rOff = xOff + xs * xE, lOff = rOff + n * rE + 2, cOff = lOff + E * LS + 1, yOff = cOff + E + 3;
  const A = new Float32Array(yOff + np * yE).fill(-3);
  for (let s = 0; s < xs; s++) for (let i = 0; i < cols; i++) A[xOff + s * xE + i] = r();
  for (let z = 0; z < n; z++) for (let j = 0; j < k; j++) A[rOff + z * rE + j] = route(z, j);
  const bOff = 3, sOff = bOff + E * rows;
  const V = new Float32Array(sOff + E).map(() => r());
  const S = new Uint32Array([7, n, 9]);
  const name = GPU_TYPES[type].name;
  // the lists: each expert's pairs ascending, its count; the rest of A untouched
  const [grouped] = await run(moeGroupWgsl(), { A, params: [rOff, rE, k, E, lOff, LS, cOff, 1], extra: [S], grid: [1, 1, 1] });
  const G = new Float32Array(grouped);
  for (let e = 0; e < E; e++) {
    const want = [];
    for (let p = 0; p < np; p++) if (route(Math.floor(p / k), p % k) === e) want.push(p);
    assert.equal(G[cOff + e], want.length, `${name} expert ${e}: count`);
    assert.deepEqual(Array.from(G.subarray(lOff + e * LS, lOff + e * LS + want.length)), want, `${name} expert ${e}: list`);
  }
  const used = new Set(); // the expert of each list slot written, and the counts
  for (let e = 0; e < E; e++) { used.add(cOff + e); for (let c = 0; c < G[cOff + e]; c++) used.add(lOff + e * LS + c); }
  for (let i = 0; i < A.length; i++) if (!used.has(i)) assert.equal(G[i], A[i], `${name}: moe_group wrote A[${i}]`);
  const params = (e0) => [rows, cols, rowBytes, xOff, xE, xPair ? 1 : 0, yOff, yE, lOff, LS, cOff, k, e0, 1, bias ? bOff : NONE, scale ? sOff : NONE];
  const nt = Math.ceil(n / TILE.TN), tx = Math.ceil(rows / TILE.TM);
  const code = moeMatmatWgsl(type);
  const [whole] = await run(code, { A: G, params: params(0), extra: [bytes, V, S], grid: [tx, 1, E * nt] });
  const got = new Float32Array(whole);
  checkPairs(got, { deq, A, V, np, k, rows, cols, xOff, xE, xPair, yOff, yE, bOff: bias ? bOff : -1,
    sOff: scale ? sOff : -1, expert: (ent, j) => route(ent, j), what: `${name} grouped` });
  // nothing written outside the pairs' rows
  for (let i = 0; i < yOff; i++) assert.equal(got[i], G[i], `${name}: moe_matmat wrote A[${i}]`);
  for (let p = 0; p < np; p++) for (let c = rows; c < yE; c++) assert.equal(got[yOff + p * yE + c], -3, `${name}: pair ${p} padding`);
  const at = split * rows * rowBytes;
  const [first] = await run(code, { A: G, params: params(0), extra: [bytes.slice(0, at), V, S], grid: [tx, 1, split * nt] });
  const [both] = await run(code, { A: new Float32Array(first), params: params(split), extra: [bytes.slice(at), V, S], grid: [tx, 1, (E - split) * nt] });
  assert.deepEqual(Buffer.from(both), Buffer.from(whole), `${name}: grouped, split experts differ from one buffer`);
}

test('moe_group + moe_matmat (MUL_MAT_ID grouped by expert): lists exact; F32, Q8_0, Q4_K, Q6_K and MXFP4 against C\'s dequantization over several row and pair tiles, experts with no pairs, a skewed routing (one expert in every entry), x per pair, biases, output scales; split over two buffers the same bits', { skip }, async () => {
  // expert 0 in every entry, 4 and 5 in none
  const skewed = (z, j) => (j === 0 ? 0 : 1 + ((z * 7 + j) % 3));
  await checkMoeGrouped(8, 70, 96, { E: 6, n: 40, k: 2, route: skewed });
  await checkMoeGrouped(0, 9, 50, { E: 5, n: 11, k: 3, route: (z, j) => (z + 2 * j) % 5, xPair: true, scale: true, split: 3 });
  await checkMoeGrouped(12, 5, 256, { E: 8, n: 33, k: 2, route: (z, j) => (j === 0 ? 7 : (z % 2) * 3), bias: false, scale: true, split: 4 });
  await checkMoeGrouped(14, 4, 512, { E: 4, n: 9, k: 1, route: (z) => (z < 8 ? 2 : 0), split: 1 });
  await checkMoeGrouped(39, 65, 288, { E: 4, n: 20, k: 2, route: (z, j) => (z + j) % 3, xPair: true });
});

test('moe_act: gpt-oss\'s clamped SwiGLU (α 1.702, limit 7) over pairs, ≤ 2e-6 relative', { skip }, async () => {
  const r = rng(9);
  const F = 100, np = 3, gE = 104, uOff = 4 + np * gE, uE = 101;
  const A = new Float32Array(uOff + np * uE).map(() => r() * 12);
  const [out] = await run(moeActWgsl(), { A, params: [4, gE, uOff, uE, F], grid: [Math.ceil(F / WG), 1, np] });
  const got = new Float32Array(out);
  for (let p = 0; p < np; p++) {
    for (let i = 0; i < F; i++) {
      const g = Math.min(A[4 + p * gE + i], 7), u = Math.min(Math.max(A[uOff + p * uE + i], -7), 7);
      const want = g / (1 + Math.exp(-1.702 * g)) * (u + 1);
      const v = got[4 + p * gE + i];
      assert.ok(Math.abs(v - want) <= 2e-6 * (1 + Math.abs(want)), `pair ${p} i ${i}: ${v} vs ${want}`);
    }
  }
});

test('moe_sum: Σ_j w_j y_j in slot order, stored or added to the stream, ≤ 1e-6 · Σ|terms|', { skip }, async () => {
  const r = rng(13);
  const D = 70, k = 3, n = 2, yE = 72, rE = 2 * k, oE = 75;
  const yOff = 4, rOff = yOff + n * k * yE, oOff = rOff + n * rE;
  const A = new Float32Array(oOff + n * oE).map(() => r());
  for (const acc of [0, 1]) {
    const [out] = await run(moeSumWgsl(), { A, params: [yOff, yE, rOff, rE, k, oOff, oE, D, acc], grid: [Math.ceil(D / WG), 1, n] });
    const got = new Float32Array(out);
    for (let z = 0; z < n; z++) {
      for (let i = 0; i < D; i++) {
        let want = acc ? A[oOff + z * oE + i] : 0, abs = Math.abs(want);
        for (let j = 0; j < k; j++) {
          const t = A[yOff + (z * k + j) * yE + i] * A[rOff + z * rE + k + j];
          want += t;
          abs += Math.abs(t);
        }
        assert.ok(Math.abs(got[oOff + z * oE + i] - want) <= 1e-6 * abs, `accumulate ${acc} entry ${z} i ${i}`);
      }
    }
  }
});

test('sinks: a head\'s output times 1 / (1 + e^(sink − lse)), lse from the attention\'s split partials, against a softmax with the sink as one more logit (≤ 1e-5)', { skip }, async () => {
  const r = rng(23);
  const H = 3, hs = 8, maxSplit = 4, ns = 3, n = 2;
  const pE = H * maxSplit * (hs + 2), oE = H * hs + 1;
  const pOff = 4, oOff = pOff + n * pE;
  const A = new Float32Array(oOff + n * oE);
  const scores = []; // per entry, head: each split's scores, and the values (one per score, as a scalar "head")
  for (let z = 0; z < n; z++) {
    for (let h = 0; h < H; h++) {
      const all = [];
      for (let s = 0; s < ns; s++) {
        const sc = Array.from({ length: 5 }, () => r() * 6);
        const m = Math.max(...sc);
        const l = sc.reduce((a, v) => a + Math.exp(v - m), 0);
        const b = pOff + z * pE + (h * maxSplit + s) * (hs + 2);
        A[b + hs] = m;
        A[b + hs + 1] = l;
        all.push(...sc);
      }
      for (let d = 0; d < hs; d++) A[oOff + z * oE + h * hs + d] = r();
      scores.push(all);
    }
  }
  const sinkOff = 1;
  const V = new Float32Array(sinkOff + H).map(() => r() * 3);
  const S = new Uint32Array([0, 0, ns]);
  const [out] = await run(sinksWgsl(), { A, params: [oOff, oE, hs, pOff, pE, maxSplit, 2, sinkOff], extra: [V, S], grid: [H, 1, n] });
  const got = new Float32Array(out);
  for (let z = 0; z < n; z++) {
    for (let h = 0; h < H; h++) {
      const sc = scores[z * H + h];
      const zsum = sc.reduce((a, v) => a + Math.exp(v), 0);
      const f = zsum / (zsum + Math.exp(V[sinkOff + h])); // the softmax's mass left to the values
      for (let d = 0; d < hs; d++) {
        const want = A[oOff + z * oE + h * hs + d] * f;
        const g = got[oOff + z * oE + h * hs + d];
        assert.ok(Math.abs(g - want) <= 1e-5 * (1 + Math.abs(want)), `entry ${z} head ${h} d ${d}: ${g} vs ${want}`);
      }
    }
  }
});

test('expert tensors split by the binding limit: whole experts per buffer, their file ranges; one expert above the limit is refused naming the tensor', async () => {
  const t = [8, 6 * 32, 64, 68, 1000]; // Q8_0, 6 experts of 32 rows of 64 (68 bytes a row)
  const per = 32 * 68;
  assert.deepEqual(expertPieces(t, 6, 1 << 30, 'blk.0.ffn_up_exps').map((p) => [p[1], p[6], p[7], p[4]]), [[192, 0, 6, '1000:0']]);
  const pieces = expertPieces(t, 6, 4 * per + 5, 'blk.0.ffn_up_exps');
  assert.deepEqual(pieces.map((p) => [p[1], p[6], p[7], p[5][0].skip, p[5][0].bytes, p[5][0].addr]),
    [[128, 0, 4, 0, 4 * per, 1000], [64, 4, 6, 4 * per, 2 * per, 1000 + 4 * per]]);
  const desc = {
    tensors: {}, hp: { n_expert: 6 },
    layers: [{ exp_up: pieces }],
  };
  assert.deepEqual(matrices(desc).map(([name]) => name), ['blk.0.ffn_up_exps (experts 0..3)', 'blk.0.ffn_up_exps (experts 4..5)']);
  // a fake device: createBuffer records, the limits are what the test says
  const made = [];
  const fake = (cap) => ({
    limits: { maxStorageBufferBindingSize: cap, maxBufferSize: cap },
    pushErrorScope() {}, popErrorScope: async () => null,
    createBuffer: (d) => { made.push(d); return { destroy() {} }; },
  });
  const plan = { byName: new Map([['blk.0.ffn_up_exps.weight', { type: 8, ne: [64, 32, 6], start: 5000, end: 5000 + 6 * per }]]) };
  const { targets } = await createMatrixBuffers(fake(4 * per + 5), desc, plan);
  assert.deepEqual(targets.map((g) => [g.start, g.end, g.size]), [[5000, 5000 + 4 * per, 4 * per], [5000 + 4 * per, 5000 + 6 * per, 2 * per]]);
  const tooSmall = { ...desc, layers: [{ exp_up: expertPieces(t, 6, per - 1, 'blk.0.ffn_up_exps') }] };
  await assert.rejects(createMatrixBuffers(fake(per - 1), tooSmall, plan),
    (e) => e.code === 'WLM_ERR_UNSUPPORTED' && /blk\.0\.ffn_up_exps \(experts 0\.\.0\).*needs a buffer of 2176 bytes; the adapter allows 2175/.test(e.message));
});
