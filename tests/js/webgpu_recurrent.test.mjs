// The WGSL kernels of hybrid models' recurrent layers (js/backend/webgpu/wgsl_recurrent.js) on
// Dawn (lavapipe or SwiftShader, tests/js/_webgpu.mjs), against their references: the delta
// rule against C's own wlm_deltanet_ref (wlmjs_deltanet_ref, run on the same states in the wasm
// heap), the conv, L2 norm, gates and output gate against transcriptions of src/model/
// recurrent.c / forward.c in double precision. Batches hold entries of two sequences
// interleaved, so each kernel's state is shown to follow its own sequence in entry order.
// Tolerances as tests/js/webgpu_kernels.test.mjs: relative to the sum of the absolute terms
// where one is summed, else to the value; stated where asserted.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { dawn, kernelKit, rng, wasmReference } from './_webgpu.mjs';
import { NONE, WG } from '../../js/backend/webgpu/wgsl_ops.js';
import { convWgsl, deltanetWgsl, l2normWgsl, sigmoidGateWgsl, ssmGatesWgsl } from '../../js/backend/webgpu/wgsl_recurrent.js';

const { adapter, skip: why } = await dawn();
const skip = why || false;
const device = adapter ? await adapter.requestDevice() : null;
const x = wasmReference();
const { run } = kernelKit(device, x);
const fbits = (v) => new Uint32Array(new Float32Array([v]).buffer)[0];
const silu = (v) => v / (1 + Math.exp(-v));
const sigmoid = (v) => 1 / (1 + Math.exp(-v));

test('conv: DeltaNet\'s (in place, SiLU, K 4) and LFM2\'s (B·x in, C· out, K 3) over 5 entries of two sequences in entry order; the state rows bit for bit, the outputs ≤ 1e-6 · Σ|w·u| (+ SiLU\'s 2e-6)', { skip }, async () => {
  const r = rng(61);
  const seqs = [1, 0, 1, 1, 0], n = seqs.length;
  for (const lfm of [false, true]) {
    const ch = lfm ? 70 : 100, K = lfm ? 3 : 4;
    const xE = lfm ? 3 * ch + 2 : ch + 3, yE = lfm ? ch + 1 : xE; // odd strides; in place, the same
    const xOff = 4, yOff = lfm ? xOff + n * xE + 8 : xOff; // LFM2 writes elsewhere, DeltaNet in place
    const A = new Float32Array(yOff + n * yE + 8).map(() => r() * 2);
    const stOff = 5, seqFloats = stOff + (K - 1) * ch + 3;
    const R = new Float32Array(2 * seqFloats).map(() => r());
    const wOff = 3;
    const V = new Float32Array(wOff + ch * K).map(() => r());
    const countSlot = 0, seqOff = 1;
    const S = new Uint32Array([n, ...seqs]);
    const pre = lfm ? xOff + 2 * ch : NONE, post = lfm ? xOff + ch : NONE;
    const [out, rOut] = await run(convWgsl(), {
      A, params: [xOff, xE, yOff, yE, ch, K, wOff, pre, post, lfm ? 0 : 1, stOff, seqFloats, countSlot, seqOff],
      extra: [R, V, S], grid: [Math.ceil(ch / WG), 1, 1],
    });
    const got = new Float32Array(out), gotR = new Float32Array(rOut);
    const rows = Float32Array.from(R); // recurrent.c's conv_step, entry by entry
    for (let e = 0; e < n; e++) {
      const b = seqs[e] * seqFloats + stOff;
      for (let c = 0; c < ch; c++) {
        const u = lfm ? Math.fround(A[xOff + e * xE + c] * A[pre + e * xE + c]) : A[xOff + e * xE + c];
        let acc = 0, abs = 0;
        for (let k = 0; k < K; k++) {
          const t = V[wOff + c * K + k] * (k < K - 1 ? rows[b + k * ch + c] : u);
          acc += t;
          abs += Math.abs(t);
        }
        for (let k = 0; k + 2 < K; k++) rows[b + k * ch + c] = rows[b + (k + 1) * ch + c];
        rows[b + (K - 2) * ch + c] = u;
        let want = acc, tol = 1e-6 * abs;
        if (lfm) { want *= A[post + e * xE + c]; tol *= Math.abs(A[post + e * xE + c]); } else { want = silu(acc); tol += 2e-6 * (1 + Math.abs(want)); }
        const g = got[yOff + e * yE + c];
        assert.ok(Math.abs(g - want) <= tol + 1e-30, `${lfm ? 'LFM2' : 'DeltaNet'} entry ${e} channel ${c}: ${g} vs ${want}`);
      }
    }
    assert.deepEqual(gotR, rows, `${lfm ? 'LFM2' : 'DeltaNet'}: the state rows`);
    assert.ok(!gotR.every((v, i) => v === R[i]), 'the state moved');
  }
});

test('conv: one tap (K 1) keeps no state and reads none', { skip }, async () => {
  const r = rng(62);
  const ch = 10, A = new Float32Array(2 * ch).map(() => r());
  const V = new Float32Array(ch).map(() => r());
  const R = new Float32Array(4).fill(7);
  const [out, rOut] = await run(convWgsl(), { A, params: [0, ch, ch, ch, ch, 1, 0, NONE, NONE, 0, 0, 4, 0, 1], extra: [R, V, new Uint32Array([1, 0])], grid: [1, 1, 1] });
  const got = new Float32Array(out);
  for (let c = 0; c < ch; c++) assert.equal(got[ch + c], Math.fround(V[c] * A[c]));
  assert.deepEqual(new Float32Array(rOut), R);
});

test('l2norm: q heads scaled by 1/sqrt(D), k heads not; a zero head stays zero (eps) (≤ 2e-6 relative)', { skip }, async () => {
  const r = rng(63);
  const D = 80, HK = 2, n = 3, E = 4 * HK * D + 5;
  const A = new Float32Array(n * E).map(() => r() * 3);
  A.fill(0, E + D, E + 2 * D); // entry 1's second q head
  const scale = 1 / Math.sqrt(D), eps = 1e-6;
  const [out] = await run(l2normWgsl(), { A, params: [D, 0, E, D, fbits(eps), HK, fbits(scale)], grid: [2 * HK, 1, n] });
  const got = new Float32Array(out);
  for (let e = 0; e < n; e++) {
    for (let hd = 0; hd < 2 * HK; hd++) {
      const b = e * E + hd * D;
      let ss = 0;
      for (let i = 0; i < D; i++) ss += A[b + i] * A[b + i];
      const inv = 1 / Math.max(Math.sqrt(ss), eps);
      for (let i = 0; i < D; i++) {
        const want = A[b + i] * inv * (hd < HK ? scale : 1);
        assert.ok(Math.abs(got[b + i] - want) <= 2e-6 * Math.abs(want) + 1e-30, `entry ${e} head ${hd} [${i}]: ${got[b + i]} vs ${want}`);
      }
    }
    for (let i = 2 * HK * D; i < E; i++) assert.equal(got[e * E + i], A[e * E + i], 'the v part untouched');
  }
});

test('ssm gates: beta = sigmoid(b), decay = exp(softplus(a + dt) · A), softplus from −40 to 40 (≤ 4e-6 relative)', { skip }, async () => {
  const r = rng(64);
  const HV = 70, n = 2, E = 2 * HV + 2;
  const A = new Float32Array(n * E);
  for (let e = 0; e < n; e++) {
    for (let i = 0; i < HV; i++) {
      A[e * E + i] = r() * 8;
      A[e * E + HV + i] = (i - HV / 2) * 1.2 * (e ? 1 : 0.3); // a + dt from about −42 to 40
    }
  }
  const V = new Float32Array(2 * HV).map((_, i) => (i < HV ? r() * 0.5 : -Math.exp(r()))); // dt, then A = −exp(A_log)
  const [out] = await run(ssmGatesWgsl(), { A, params: [0, HV, E, HV, 0, HV], extra: [V], grid: [Math.ceil(HV / WG), 1, n] });
  const got = new Float32Array(out);
  for (let e = 0; e < n; e++) {
    for (let i = 0; i < HV; i++) {
      const beta = sigmoid(A[e * E + i]);
      const x0 = A[e * E + HV + i] + V[i];
      const sp = x0 > 20 ? x0 : Math.log1p(Math.exp(x0));
      const decay = Math.exp(sp * V[HV + i]);
      assert.ok(Math.abs(got[e * E + i] - beta) <= 4e-6 * beta, `beta entry ${e} [${i}]: ${got[e * E + i]} vs ${beta}`);
      assert.ok(Math.abs(got[e * E + HV + i] - decay) <= 4e-6 * decay + 1e-37, `decay entry ${e} [${i}] (a + dt ${x0}): ${got[e * E + HV + i]} vs ${decay}`);
    }
  }
});

/** D × D state heads and q/k/v through C's wlm_deltanet_ref (wlmjs_deltanet_ref) in place. */
function deltanetC(Sarr, at, q, k, v, decay, beta, D) {
  const f = 4, p = x.wlmjs_malloc((D * D + 4 * D) * f) >>> 0;
  const heap = () => new Float32Array(x.memory.buffer, p, D * D + 4 * D);
  const hp = heap();
  hp.set(Sarr.subarray(at, at + D * D));
  hp.set(q, D * D);
  hp.set(k, D * D + D);
  hp.set(v, D * D + 2 * D);
  assert.equal(x.wlmjs_deltanet_ref(p, p + D * D * f, p + (D * D + D) * f, p + (D * D + 2 * D) * f, decay, beta, p + (D * D + 3 * D) * f, D), 0);
  const h2 = heap();
  Sarr.set(h2.subarray(0, D * D), at);
  const out = h2.slice(D * D + 3 * D, D * D + 4 * D);
  x.wlmjs_free(p);
  return out;
}

test('deltanet: every value head of 5 entries of two sequences in entry order against C\'s wlm_deltanet_ref, D 128, 40 and 256, with and without the gated RMSNorm (state and outputs ≤ 2e-5 · (1 + |x|))', { skip }, async () => {
  const r = rng(65);
  const seqs = [1, 0, 1, 1, 0], n = seqs.length;
  for (const [D, HK, HV, gated] of [[128, 2, 4, true], [40, 1, 3, true], [256, 2, 2, false], [128, 2, 4, false]]) {
    const C = 2 * HK * D + HV * D, mE = C + 4;
    const mOff = 0, bdOff = n * mE, bdE = 2 * HV + 1, zOff = bdOff + n * bdE, zoE = HV * D + 2, oOff = zOff + n * zoE;
    const A = new Float32Array(oOff + n * zoE);
    for (let e = 0; e < n; e++) {
      const m = A.subarray(mOff + e * mE, mOff + e * mE + C);
      for (let i = 0; i < C; i++) m[i] = r();
      for (let hd = 0; hd < 2 * HK; hd++) { // q and k heads L2-normed (q scaled), as the conv leaves them
        let ss = 0;
        for (let i = 0; i < D; i++) ss += m[hd * D + i] ** 2;
        const s = (hd < HK ? 1 / Math.sqrt(D) : 1) / Math.sqrt(ss);
        for (let i = 0; i < D; i++) m[hd * D + i] = Math.fround(m[hd * D + i] * s);
      }
      for (let h = 0; h < HV; h++) {
        A[bdOff + e * bdE + h] = 0.2 + 0.7 * Math.abs(r());           // beta
        A[bdOff + e * bdE + HV + h] = 0.6 + 0.4 * Math.abs(r());      // decay
      }
      for (let i = 0; i < HV * D; i++) A[zOff + e * zoE + i] = r() * 3;
    }
    const stOff = 7, seqFloats = stOff + HV * D * D + 5;
    const R = new Float32Array(2 * seqFloats).map(() => r() * 0.5);
    const wOff = 2, eps = 1e-6;
    const Vv = new Float32Array(wOff + D).map(() => 0.5 + r());
    const S = new Uint32Array([0, 0, n, ...seqs]); // count at 2, sequences from 3
    const [out, rOut] = await run(deltanetWgsl(), {
      A, params: [mOff, mE, D, HK, bdOff, bdE, HV, zOff, oOff, zoE, stOff, seqFloats, gated ? wOff : NONE, fbits(eps), 2, 3],
      extra: [R, Vv, S], grid: [HV, 1, 1],
    });
    const got = new Float32Array(out), gotR = new Float32Array(rOut);
    const state = Float32Array.from(R);
    const what = `D ${D} HK ${HK} HV ${HV}${gated ? ' gated' : ''}`;
    for (let e = 0; e < n; e++) {
      const m = A.subarray(mOff + e * mE);
      for (let h = 0; h < HV; h++) {
        const kh = h % HK;
        const o = deltanetC(state, seqs[e] * seqFloats + stOff + h * D * D, m.subarray(kh * D, kh * D + D),
          m.subarray((HK + kh) * D, (HK + kh) * D + D), m.subarray((2 * HK + h) * D, (2 * HK + h) * D + D),
          A[bdOff + e * bdE + HV + h], A[bdOff + e * bdE + h], D);
        let want = Array.from(o);
        if (gated) { // wlm_rmsnorm_ref then · silu(z), in double
          let ss = 0;
          for (const v of want) ss += v * v;
          const sc = 1 / Math.sqrt(ss / D + eps);
          want = want.map((v, i) => Vv[wOff + i] * sc * v * silu(A[zOff + e * zoE + h * D + i]));
        }
        for (let i = 0; i < D; i++) {
          const g = got[oOff + e * zoE + h * D + i];
          assert.ok(Math.abs(g - want[i]) <= 2e-5 * (1 + Math.abs(want[i])), `${what} entry ${e} head ${h} [${i}]: ${g} vs ${want[i]}`);
        }
      }
    }
    for (let i = 0; i < state.length; i++) {
      assert.ok(Math.abs(gotR[i] - state[i]) <= 2e-5 * (1 + Math.abs(state[i])), `${what} state [${i}]: ${gotR[i]} vs ${state[i]}`);
    }
    for (let s = 0; s < 2; s++) { // outside the heads' states nothing moves
      for (let i = 0; i < stOff; i++) assert.equal(gotR[s * seqFloats + i], R[s * seqFloats + i]);
      for (let i = stOff + HV * D * D; i < seqFloats; i++) assert.equal(gotR[s * seqFloats + i], R[s * seqFloats + i]);
    }
  }
});

test('sigmoid gate: each head\'s output times sigmoid of its gate rows (query, then gate, per head of attn_q\'s output) (≤ 2e-6 relative)', { skip }, async () => {
  const r = rng(66);
  const hs = 72, heads = 3, n = 2, yE = heads * hs + 4, gE = 2 * heads * hs + 2;
  const yOff = 0, gOff = n * yE;
  const A = new Float32Array(gOff + n * gE).map(() => r() * 6);
  const [out] = await run(sigmoidGateWgsl(), { A, params: [yOff, yE, hs, gOff + hs, gE, 2 * hs, hs], grid: [Math.ceil(hs / WG), heads, n] });
  const got = new Float32Array(out);
  for (let e = 0; e < n; e++) {
    for (let h = 0; h < heads; h++) {
      for (let i = 0; i < hs; i++) {
        const y = yOff + e * yE + h * hs + i;
        const want = A[y] * sigmoid(A[gOff + e * gE + h * 2 * hs + hs + i]);
        assert.ok(Math.abs(got[y] - want) <= 2e-6 * Math.abs(want) + 1e-30, `entry ${e} head ${h} [${i}]: ${got[y]} vs ${want}`);
      }
    }
    assert.equal(got[yOff + e * yE + heads * hs], A[yOff + e * yE + heads * hs], 'past the heads untouched');
  }
});
