// The WebGPU backend end to end, on Dawn (lavapipe or SwiftShader, tests/js/_webgpu.mjs): for every architecture of the synthetic
// tiny models (tools/synth_gguf.mjs) in F32, Q8_0 and Q4_K_M (and gpt2's in F16, BF16, Q4_0,
// Q4_1, Q2_K, Q3_K, Q5_K_M, llama's in MXFP4: every weight type at least once), the GPU engine's logits against
// the CPU engine's (on the dequantized file for a quantized one, see below), step by step over a
// prompt of 17–18 tokens (a prefill through the tiled matrix-matrix kernel) and a greedy
// continuation (decode through matvec; the CPU's ids fed to both), and the greedy ids equal up to
// the first near-tie; generate() with the sampler, stop strings and prompt-cache reuse running in
// wasm; and the errors: no adapter, an unsupported option, a buffer above the adapter's limits,
// device loss mid-generation (the engine then loads again), speculative decoding (prompt lookup
// and a draft model on the CPU: greedy ids equal plain greedy decoding's), context shift (the
// cache's rows moved and K re-rotated on the GPU), batches of sequences and beam search (each
// sequence its block of the GPU cache).
//
// The reference for a quantized file is the CPU engine on the same file with every tensor
// dequantized to F32 by C's to_float (dequantizedCopy): the GPU multiplies dequantized weights
// by float activations, while the CPU engine on the quantized file rounds each activation
// vector to 8 bits (Q8_0 / Q8_K) before its integer dot products, a difference of up to ~1 logit
// over a 128k vocabulary that would hide real errors. Tolerance (max |GPU − CPU| over the
// vocabulary, relative to 1 + max |logit|): 1e-3 (measured ≤ 2e-4, Gemma 3's GELU rounded to
// binary16 the largest). The kernels themselves are checked tightly in webgpu_kernels.test.mjs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { argmax, assertGpuTracksCpu, dawn, diff, NEAR_TIE } from './_webgpu.mjs';
import { createEngine } from '../../js/wasmlm.js';
import fs from 'node:fs';
import { synthCached } from '../../tools/synth_gguf.mjs';
import { deferredModel, dequantizedCopy, wasmReference } from './_webgpu.mjs';
import { MATMAT_MIN_ENT } from '../../js/backend/webgpu/wgsl_matmat.js';
import { attentionSplit } from '../../js/backend/webgpu/wgsl_ops.js';
import { GPU_PROFILE, GpuForward } from '../../js/backend/webgpu/forward.js';
import { requestDevice } from '../../js/backend/webgpu/device.js';
import { fuseMatrices, uploadWeights } from '../../js/backend/webgpu/weights.js';
import { memory64Support } from '../../js/runtime/memory64.js';
import { padGguf } from '../../tools/gguf_pad.mjs';
import os from 'node:os';
import path from 'node:path';
import { MODELS } from './_helpers.mjs';

const { gpu, skip: why } = await dawn();
const skip = why || false;
const PROMPT = 'Once upon a time there was';
// 17 or 18 tokens on every tokenizer of the synthetic models: a prefill of at least
// MATMAT_MIN_ENT entries, which runs through the tiled matrix-matrix kernel (wgsl_matmat.js)
const LONG_PROMPT = 'Once upon a time there was a little girl who lived in a village near the woods';



/** A GPU object whose adapter reports `limits` (and `info`: e.g. a vendor that makes 'auto'
 *  count SwiftShader as a real GPU) and whose device is reported to `onDevice`; its `requests`
 *  counts the adapters asked for. */
function wrappedGpu({ limits = null, info = null, onDevice = null } = {}) {
  const wrap = (target, extra) => new Proxy(target, {
    get(t, k) {
      if (k in extra) return extra[k];
      const v = Reflect.get(t, k);
      return typeof v === 'function' ? v.bind(t) : v;
    },
  });
  return {
    requests: 0,
    async requestAdapter(o) {
      this.requests++;
      const ad = await gpu.requestAdapter(o);
      const fakeLimits = limits ? { ...Object.fromEntries(Object.keys(Object.getPrototypeOf(ad.limits)).map((k) => [k, ad.limits[k]])), ...limits } : null;
      return wrap(ad, {
        ...(fakeLimits ? { limits: fakeLimits } : {}),
        ...(info ? { info, isFallbackAdapter: false } : {}),
        async requestDevice(d) {
          const dev = await ad.requestDevice(d);
          onDevice?.(dev);
          return fakeLimits ? wrap(dev, { limits: fakeLimits }) : dev;
        },
      });
    },
  };
}

/** Runs fn(cpu, g) with a CPU engine and a WebGPU engine (one thread each) that both loaded
 *  `file` with the load options `opts`; frees both after. */
async function withPair(file, opts, fn) {
  const cpu = await createEngine({ threads: 1, backend: 'cpu' });
  const g = await createEngine({ threads: 1, backend: 'webgpu', gpu });
  try {
    await cpu.load({ model: file, ...opts });
    await g.load({ model: file, ...opts });
    return await fn(cpu, g);
  } finally {
    await cpu.free();
    await g.free();
  }
}

const cases = [];
for (const arch of ['llama', 'qwen2', 'qwen3', 'gemma3', 'phi3', 'gpt2', 'smollm3']) {
  for (const type of ['F32', 'Q8_0', 'Q4_K_M']) cases.push({ arch, type });
}
// the other weight types, on the smallest vocabulary (gpt2's 50k; its 256-wide feed-forward rows
// take the K-quants: Q2_K, Q3_K, Q5_K, Q6_K)
for (const type of ['F16', 'BF16', 'Q4_0', 'Q4_1', 'Q2_K', 'Q3_K', 'Q5_K_M']) cases.push({ arch: 'gpt2', type });
cases.push({ arch: 'llama', type: 'MXFP4' }); // every matrix MXFP4 (llama.cpp's oracle record too)
// qwen2vl (M-RoPE): text turns as NEOX RoPE with the fourth section still, through the CPU's
// frequency table the GPU reads
cases.push({ arch: 'qwen2vl', type: 'F32' });

for (const { arch, type } of cases) {
  test(`${arch} ${type}: GPU logits match the CPU's over prefill and 6 decode steps, greedy ids equal up to a near-tie`, { skip }, async () => {
    const file = synthCached({ arch, type });
    const cpu = await createEngine({ threads: 1, backend: 'cpu' });
    const gpuE = await createEngine({ threads: 1, backend: 'webgpu', gpu });
    try {
      const cpuInfo = await cpu.load({ model: type === 'F32' ? file : dequantizedCopy(file) });
      const info = await gpuE.load({ model: file });
      // the KV cache lives on the GPU only: the context holds no KV blocks in wasm memory
      assert.ok(info.contextBytes < cpuInfo.contextBytes, `context ${info.contextBytes} bytes, CPU's ${cpuInfo.contextBytes}`);
      assert.equal(info.backend, 'webgpu');
      assert.match(info.backendReason, /webgpu/);
      assert.ok(info.gpuBytes > 0);
      const tol = 1e-3;
      const ids = Array.from(await cpu.tokenize(LONG_PROMPT));
      assert.ok(ids.length >= MATMAT_MIN_ENT, `${ids.length} prompt tokens: the tiled kernel is not used`);
      await assertGpuTracksCpu(cpu, gpuE, ids, { tol });
    } finally {
      await cpu.free();
      await gpuE.free();
    }
  });
}

test('a prompt of several GPU passes (80 tokens, passes of 32) and the decode after it', { skip }, async () => {
  await withPair(synthCached({ arch: 'qwen3', type: 'F32' }), { kvType: 'f32' }, async (cpu, g) => {
    const words = Array.from({ length: 60 }, (_, i) => `w${i * 7 % 23}`).join(' ');
    const ids = Array.from(await cpu.tokenize(words)).slice(0, 80);
    assert.equal(ids.length, 80);
    for (const step of [ids, [ids[5]], [ids[9]]]) {
      const a = await cpu.evalTokens(step), b = await g.evalTokens(step);
      const { d, m } = diff(a, b);
      assert.ok(d <= 1e-3 * (1 + m), `${step.length} tokens: max |diff| ${d}`);
    }
  });
});

test('GPU_PROFILE (bench/webgpu.mjs --profile): each kernel in a timestamped pass of its own gives the same logits bit for bit, its GPU time counted by kind, the gaps between kernels apart', { skip }, async () => {
  const file = synthCached({ arch: 'llama', type: 'Q4_K_M' });
  const map = new Map();
  const plain = await createEngine({ threads: 1, backend: 'webgpu', gpu });
  const prof = await createEngine({ threads: 1, backend: 'webgpu', gpu, [GPU_PROFILE]: map });
  try {
    await plain.load({ model: file });
    const info = await prof.load({ model: file });
    const ids = Array.from(await plain.tokenize(PROMPT));
    assert.deepEqual(await prof.evalTokens(ids), await plain.evalTokens(ids));
    const prefill = new Map([...map].map(([k, v]) => [k, v.n]));
    assert.ok(prefill.get('attention') > 0 && prefill.get('norm') > 0, `kinds: ${[...map.keys()]}`);
    map.clear();
    assert.deepEqual(await prof.evalTokens([ids[1]]), await plain.evalTokens([ids[1]]));
    // one decode step: per layer one attention; the matrices as matvec by weight type (this tiny
    // shape's rows are too short for 256-element K-quant blocks: llama.cpp's fallbacks Q5_0, Q8_0)
    const kinds = [...map.keys()];
    assert.ok(kinds.includes('matvec Q5_0') && kinds.includes('matvec Q8_0'), `kinds: ${kinds}`);
    assert.ok(!kinds.some((k) => k.startsWith('matmat')), 'a one-token step runs no tiled kernel');
    assert.equal(map.get('attention').n, info.nLayers);
    for (const [k, v] of map) assert.ok(v.ms >= 0 && v.n >= 1, `${k}: ${JSON.stringify(v)}`);
    const kernels = [...map].filter(([k]) => k !== '(between kernels)');
    assert.equal(map.get('(between kernels)').n, kernels.reduce((a, [, v]) => a + v.n, 0) - 1);
    assert.ok(kernels.reduce((a, [, v]) => a + v.ms, 0) > 0, 'the GPU took some time');
  } finally {
    await plain.free();
    await prof.free();
  }
});

test('batching: a prompt below MATMAT_MIN_ENT in one pass equals it token by token bit for bit (the batch matvec); from it on (the tiled kernel) within float rounding', { skip }, async (t) => {
  const g = await createEngine({ threads: 1, backend: 'webgpu', gpu });
  try {
    await g.load({ model: synthCached({ arch: 'gpt2', type: 'Q4_K_M' }) });
    for (const prompt of [PROMPT, LONG_PROMPT]) {
      const ids = Array.from(await g.tokenize(prompt));
      await g.reset();
      const batch = await g.evalTokens(ids);
      await g.reset();
      let one;
      for (const id of ids) one = await g.evalTokens([id]);
      if (ids.length < MATMAT_MIN_ENT) {
        assert.deepEqual(one, batch);
      } else { // the tiled kernel adds each row in column order, matvec by lanes then a tree
        const { d, m } = diff(one, batch);
        t.diagnostic(`${ids.length} tokens in one pass vs one by one: max |diff| ${d.toExponential(2)}, max |logit| ${m.toFixed(2)}`);
        // measured over |logit| ≤ 27: max |diff| 1.2e-5 on SwiftShader, 3.3e-4 on lavapipe (its
        // LLVM rounds the two kernels' multiply-adds its own way); the bound there is 1.1e-3
        assert.ok(d <= 4e-5 * (1 + m), `max |diff| ${d}`);
        assert.equal(argmax(batch), argmax(one));
      }
    }
  } finally {
    await g.free();
  }
});


test('GpuForward.run exact (a speculative verification): 12 entries in one pass equal one entry at a time bit for bit; without it the tiled kernel differs, within rounding', { skip }, async () => {
  const x = wasmReference();
  const { desc, opts } = deferredModel(x, synthCached({ arch: 'llama', type: 'Q4_K_M' }));
  const { device, subgroups } = await requestDevice(await gpu.requestAdapter());
  try {
    const fwd = await GpuForward.create(device, desc, await uploadWeights(device, desc, x.memory), opts(device, subgroups));
    const n = 12, V = desc.hp.vocab_size;
    assert.ok(n >= MATMAT_MIN_ENT);
    const ids = Array.from({ length: n }, (_, i) => (i * 37 + 5) % V), pos = ids.map((_, i) => i), all = ids.map(() => true);
    const one = new Float32Array(n * V);
    for (let i = 0; i < n; i++) one.set(await fwd.run([ids[i]], [i], [true]), i * V);
    assert.deepEqual(await fwd.run(ids, pos, all, { exact: true }), one);
    const tiled = await fwd.run(ids, pos, all);
    const { d, m } = diff(tiled, one);
    // (measured 1.4e-3 over |logit| ≤ 31: a last-bit difference can round a K or V element of the
    // F16 cache to the other binary16 neighbour)
    assert.ok(d > 0 && d <= 1e-4 * (1 + m), `tiled against one at a time: max |diff| ${d}, max |logit| ${m}`);
    fwd.destroy();
  } finally {
    device.destroy();
  }
});

test('GpuForward records the next step while the GPU runs this one: submitted when it matches (decode steps, a batch\'s steps, across a change of attention splits), recorded afresh when not, the logits bit for bit those of recording each step', { skip }, async () => {
  const x = wasmReference();
  const { desc, opts } = deferredModel(x, synthCached({ arch: 'llama', type: 'Q4_K_M' }), 256);
  const { device, subgroups } = await requestDevice(await gpu.requestAdapter());
  try {
    const w = await uploadWeights(device, desc, x.memory);
    const ahead = await GpuForward.create(device, desc, w, opts(device, subgroups));
    const fresh = await GpuForward.create(device, desc, w, { ...opts(device, subgroups), recordAhead: false });
    const V = desc.hp.vocab_size;
    const tok = (i) => (i * 37 + 5) % V;
    // a 60-token prompt (two chunks, logits at the last), decode steps from position 60 to 69
    // (positions 64 → 65 cached: attention's 1 → 2 splits), three steps of a batch of three
    // entries (positions p, p + 10, p + 20), each wanting logits, then one decode step again
    const steps = [[Array.from({ length: 60 }, (_, i) => tok(i)), Array.from({ length: 60 }, (_, i) => i), 'last']];
    for (let p = 60; p < 70; p++) steps.push([[tok(p)], [p], 'all']);
    for (let p = 70; p < 73; p++) steps.push([[tok(p), tok(p + 50), tok(p + 90)], [p, p + 10, p + 20], 'all']);
    steps.push([[tok(99)], [93], 'all']);
    assert.equal(attentionSplit(64, 4).splits, 1);
    assert.equal(attentionSplit(65, 4).splits, 2);
    for (const [ids, pos, which] of steps) {
      const want = ids.map((_, i) => which === 'all' || i === ids.length - 1);
      assert.deepEqual(await ahead.run(ids, pos, want), await fresh.run(ids, pos, want), `${ids.length} entries at ${pos[0]}`);
    }
    // hits: the 10 decode steps (the first after the prompt), the batch's 2nd and 3rd steps; the
    // batch's first step and the last decode step (other shapes than predicted) were recorded afresh
    assert.equal(ahead.recordedHits, 12);
    assert.equal(fresh.recordedHits, 0);
    ahead.destroy();
    fresh.destroy();
  } finally {
    device.destroy();
  }
});

test('fuseMatrices: Q, K and V joined into one matrix, gate and up into another (decode and small batches: act(gate)·up in the matvec\'s own store), give the same logits bit for bit (decode, a small batch, a prefill tile)', { skip }, async (t) => {
  const x = wasmReference();
  const { device, subgroups } = await requestDevice(await gpu.requestAdapter());
  let joined = 0;
  try {
    for (const [arch, type] of [['llama', 'Q8_0'], ['qwen2', 'Q8_0'], ['gemma3', 'F32'], ['llama', 'Q4_K_M']]) {
      const { model, ctx, desc, opts: mkOpts } = deferredModel(x, synthCached({ arch, type }));
      const fused = fuseMatrices(desc, 1 << 30);
      const nQkv = fused.layers.filter((l) => l.wqkv && !desc.layers[0].wqkv).length, nUp = fused.layers.filter((l) => l.w13).length;
      t.diagnostic(`${arch} ${type}: Q/K/V joined in ${nQkv} of ${desc.layers.length} layers, gate/up in ${nUp}`);
      if (type === 'Q8_0') assert.ok(nQkv === desc.layers.length && nUp === desc.layers.length, `${arch} ${type}: every layer joins`);
      if (arch === 'qwen2') assert.ok(fused.layers.every((l) => Array.isArray(l.bqkv?.[0])), 'qwen2: its Q/K/V biases joined too');
      joined += nQkv + nUp;
      const opts = mkOpts(device, subgroups);
      const a = await GpuForward.create(device, desc, await uploadWeights(device, desc, x.memory), opts);
      const b = await GpuForward.create(device, fused, await uploadWeights(device, fused, x.memory), opts);
      const V = desc.hp.vocab_size;
      const steps = [[[5], [0]], [[17], [1]], [[3, 9, 11, 2], [2, 3, 4, 5]],
        [Array.from({ length: 12 }, (_, i) => (i * 37 + 5) % V), Array.from({ length: 12 }, (_, i) => 6 + i)]];
      for (const [ids, pos] of steps) {
        const want = ids.map(() => true);
        assert.deepEqual(await b.run(ids, pos, want), await a.run(ids, pos, want), `${arch} ${type}: ${ids.length} entries`);
      }
      a.destroy();
      b.destroy();
      x.wlm_context_free(ctx);
      x.wlm_model_free(model);
    }
    assert.ok(joined > 0);
  } finally {
    device.destroy();
  }
});

test('generate() on the GPU: the sampler, stop strings, a JSON Schema and prompt-cache reuse run in wasm, as on the CPU', { skip }, async () => {
  await withPair(synthCached({ arch: 'llama', type: 'F32' }), { kvType: 'f32' }, async (cpu, g) => {
    const run = async (e, prompt, params) => {
      const out = [];
      for await (const t of e.generate(prompt, params)) out.push(t.id);
      return { ids: out, ...e.lastResult };
    };
    const p = { temperature: 0.8, topK: 40, seed: 7, maxTokens: 6 };
    const a = await run(cpu, PROMPT, p), b = await run(g, PROMPT, p);
    assert.deepEqual(b.ids, a.ids);
    assert.equal(b.text, a.text);
    // a longer prompt that starts with the same text reuses the cached positions
    const p2 = { ...p, cachePrompt: true, maxTokens: 4 };
    await run(cpu, PROMPT, p2); await run(g, PROMPT, p2);
    const a2 = await run(cpu, `${PROMPT} a little`, p2), b2 = await run(g, `${PROMPT} a little`, p2);
    assert.ok(b2.nCached > 0, 'no positions reused');
    assert.equal(b2.nCached, a2.nCached);
    assert.deepEqual(b2.ids, a2.ids);
    // a stop string is held back and never emitted (C's filter)
    const stop = a.text.slice(2, 5);
    if (stop.length === 3) {
      const s1 = await run(cpu, PROMPT, { ...p, stop: [stop] }), s2 = await run(g, PROMPT, { ...p, stop: [stop] });
      assert.equal(s2.text, s1.text);
      assert.equal(s2.stopReason, s1.stopReason);
    }
    // a JSON Schema constrains the GPU's logits in wasm as it does the CPU's
    const schema = { type: 'object', properties: { a: { type: 'integer' } }, required: ['a'] };
    const j1 = await run(cpu, PROMPT, { ...p, jsonSchema: schema, maxTokens: 8 }), j2 = await run(g, PROMPT, { ...p, jsonSchema: schema, maxTokens: 8 });
    assert.equal(j2.text, j1.text);
    assert.match(j2.text, /^\{/);
    // abort mid-generation, then the engine goes on
    const ac = new AbortController();
    let n = 0;
    await assert.rejects(async () => { for await (const _ of g.generate(PROMPT, p, { signal: ac.signal })) if (++n === 2) ac.abort(); }, { name: 'AbortError' });
    const again = await run(g, PROMPT, p);
    assert.deepEqual(again.ids, a.ids);
  });
});

test("speculative decoding on the GPU: greedy ids are plain greedy decoding's (prompt lookup, a CPU draft model; verification bit for bit the one-token logits), sampled ones the CPU engine's", { skip }, async () => {
  const file = synthCached({ arch: 'llama', type: 'F32' });
  await withPair(file, { kvType: 'f32' }, async (cpu, g) => {
    const run = async (e, params) => {
      const ids = [];
      for await (const t of e.generate(LONG_PROMPT, params)) ids.push(t.id);
      return { ids, ...e.lastResult };
    };
    const greedy = { temperature: 0, maxTokens: 24 };
    const plain = await run(g, greedy);
    // maxTokens 9: verifications of up to 10 entries, past MATMAT_MIN_ENT (the tiled kernel's
    // threshold), kept on the batch matvec by the exact flag
    assert.ok(9 + 1 > MATMAT_MIN_ENT);
    const lookup = await run(g, { ...greedy, draft: { ngram: 2, maxTokens: 9 } });
    assert.deepEqual(lookup.ids, plain.ids);
    assert.ok(lookup.rounds > 0 && lookup.drafted > 0, `rounds ${lookup.rounds}, drafted ${lookup.drafted}`);
    const drafted = await run(g, { ...greedy, draft: { model: file, maxTokens: 9 } });
    assert.deepEqual(drafted.ids, plain.ids);
    assert.ok(drafted.accepted > 0 && drafted.rounds < plain.ids.length, `rounds ${drafted.rounds}, accepted ${drafted.accepted} of ${drafted.drafted}`);
    // sampled: the same rounds and coins as the CPU engine's speculative decoding
    const sampled = { temperature: 0.8, topK: 40, seed: 3, maxTokens: 16, draft: { ngram: 2, maxTokens: 4 } };
    const a = await run(cpu, sampled), b = await run(g, sampled);
    assert.deepEqual(b.ids, a.ids);
    assert.equal(b.drafted, a.drafted);
    assert.equal(b.accepted, a.accepted);
    // an abort in the middle, then a plain generation goes on from a clean cache
    const ac = new AbortController();
    let n = 0;
    await assert.rejects(async () => {
      for await (const _ of g.generate(LONG_PROMPT, { ...greedy, draft: { ngram: 2 } }, { signal: ac.signal })) if (++n === 3) ac.abort();
    }, { name: 'AbortError' });
    assert.deepEqual((await run(g, greedy)).ids, plain.ids);
  });
});

for (const [arch, kvType] of [['llama', 'f32'], ['qwen2', 'f16'], ['smollm3', 'f32']]) {
  test(`context shift on the GPU (${arch}: ${{ llama: 'pairs', qwen2: 'NEOX halves', smollm3: 'pairs, every 4th layer unturned (NoPE)' }[arch]}, ${kvType} cache): past nCtx the GPU's token probabilities follow the CPU engine's, greedy ids equal up to a near-tie`, { skip }, async (t) => {
    const nCtx = 40;
    await withPair(synthCached({ arch, type: 'F32' }), { kvType, nCtx }, async (cpu, g) => {
      const params = { temperature: 0, maxTokens: 90, contextShift: true, nKeep: 4, nProbs: 2, bannedTokens: [cpu.info.eosId] };
      const run = async (e) => {
        const out = [];
        for await (const tok of e.generate(PROMPT, params)) out.push(tok);
        return out;
      };
      const a = await run(cpu), b = await run(g);
      assert.equal(a.length, 90);
      let i = 0;
      for (; i < a.length && a[i].id === b[i].id; i++) {
        assert.ok(Math.abs(a[i].prob - b[i].prob) <= 1e-3, `token ${i}: probability ${b[i].prob} on the GPU, ${a[i].prob} on the CPU`);
      }
      if (i < a.length) assert.ok(a[i].top[0].prob - a[i].top[1].prob < NEAR_TIE, `token ${i} differs without a near-tie`);
      const nPrompt = (await cpu.tokenize(PROMPT)).length;
      t.diagnostic(`${i} of ${a.length} tokens equal (the first shift at token ${nCtx - nPrompt})`);
      assert.ok(i > nCtx - nPrompt + 20, `only ${i} tokens compared: the shifted cache is not exercised`);
    });
  });
}

test('generateBatch on the GPU: each sequence its own block of the cache (a repeated prompt evaluated again), greedy and sampled, with context shifts, as the CPU engine', { skip }, async () => {
  await withPair(synthCached({ arch: 'llama', type: 'F32' }), { kvType: 'f32', nCtx: 48 }, async (cpu, g) => {
    const prompts = [PROMPT, 'The little dog ran', LONG_PROMPT, PROMPT];
    const run = async (e, params) => {
      const ids = prompts.map(() => []);
      for await (const t of e.generateBatch(prompts, params)) if (!t.stopReason) ids[t.seq].push(t.id);
      return { ids, ...e.lastBatchResult };
    };
    for (const params of [
      { temperature: 0, maxTokens: 12 },
      prompts.map((_, i) => ({ temperature: 0.8, topK: 40, seed: 10 + i, maxTokens: 12 })),
      { temperature: 0, maxTokens: 50, contextShift: true, nKeep: 2, bannedTokens: [cpu.info.eosId] }, // past nCtx 48
    ]) {
      const a = await run(cpu, params), b = await run(g, params);
      assert.deepEqual(b.ids, a.ids);
      assert.ok(b.ids.every((s) => s.length === (Array.isArray(params) ? params[0] : params).maxTokens));
    }
    assert.equal(g.info.backend, 'webgpu');
    // and a plain generation after it, on the recreated (four-sequence) context
    const one = [];
    for await (const t of g.generate(PROMPT, { temperature: 0, maxTokens: 12 })) one.push(t.id);
    assert.deepEqual(one, (await run(g, { temperature: 0, maxTokens: 12 })).ids[0]);
  });
});

test('beamSearch on the GPU: the beams (forked between the sequences\' blocks of the GPU cache each step) as the CPU engine\'s, scores within float rounding', { skip }, async () => {
  await withPair(synthCached({ arch: 'llama', type: 'F32' }), { kvType: 'f32' }, async (cpu, g) => {
    for (const width of [1, 3]) {
      const a = await cpu.beamSearch(PROMPT, { width, maxTokens: 16 });
      const b = await g.beamSearch(PROMPT, { width, maxTokens: 16 });
      assert.equal(b.beams.length, a.beams.length);
      b.beams.forEach((beam, i) => {
        assert.deepEqual(beam.tokens, a.beams[i].tokens, `width ${width} beam ${i}`);
        assert.ok(Math.abs(beam.logprob - a.beams[i].logprob) <= 1e-4 * (1 + Math.abs(a.beams[i].logprob)), `width ${width} beam ${i}: ${beam.logprob} vs ${a.beams[i].logprob}`);
      });
      assert.ok(b.steps > 5);
    }
    // an abort between steps, then the engine goes on: a generation after the search
    const ac = new AbortController();
    await assert.rejects(g.beamSearch(PROMPT, { width: 2, maxTokens: 16 }, { signal: ac.signal, onStep: ({ step }) => { if (step === 3) ac.abort(); } }),
      { name: 'AbortError' });
    assert.equal(g.lastBeamResult.aborted, true);
    const ok = [];
    for await (const t of g.generate('a', { maxTokens: 2, temperature: 0 })) ok.push(t.id);
    assert.equal(ok.length, 2);
  });
});

test('backend choice: auto keeps a software adapter on the CPU and says why; a bad option is refused', { skip }, async () => {
  await assert.rejects(createEngine({ backend: 'gpu' }), { code: 'WLM_ERR_INVALID_ARG', message: /backend must be/ });
  const e = await createEngine({ threads: 1, gpu });
  try {
    const info = await e.load({ model: synthCached({ arch: 'gpt2', type: 'F32' }) });
    assert.equal(info.backend, 'cpu');
    assert.match(info.backendReason, /auto: .*(fallback|software)/);
    const cpuInfo = await e.load({ model: synthCached({ arch: 'gpt2', type: 'F32' }), backend: 'cpu' });
    assert.match(cpuInfo.backendReason, /'cpu' was asked for/);
  } finally {
    await e.free();
  }
});

test('backend webgpu without an adapter, or with buffers above its limits: a WasmlmError naming it, and the engine loads again', { skip }, async () => {
  const file = synthCached({ arch: 'gpt2', type: 'F32' });
  const none = await createEngine({ threads: 1, backend: 'webgpu', gpu: { requestAdapter: async () => null } });
  try {
    await assert.rejects(none.load({ model: file }), { code: 'WLM_ERR_UNSUPPORTED', message: /backend 'webgpu'.*no adapter/ });
    assert.equal(none.info, null);
    const info = await none.load({ model: file, backend: 'cpu' });
    assert.equal(info.backend, 'cpu');
  } finally {
    await none.free();
  }
  const small = await createEngine({ threads: 1, backend: 'webgpu', gpu: wrappedGpu({ limits: { maxStorageBufferBindingSize: 65536 } }) });
  try {
    await assert.rejects(small.load({ model: file }), { code: 'WLM_ERR_UNSUPPORTED', message: /needs a buffer of \d+ bytes; the adapter allows 65536 \(maxStorageBufferBindingSize/ });
    const info = await small.load({ model: file, backend: 'auto' });
    assert.equal(info.backend, 'cpu');
  } finally {
    await small.free();
  }
});

test("auto and a GGUF past wasm32's 4 GB: a real GPU takes it in the wasm32 module; a GPU that refuses it leaves the CPU's choice", { skip }, async () => {
  // stories260K with 4.3 GB of zeros in an unused matrix before its tensors (a sparse file): on
  // the CPU it needs the memory64 module (an error in Node 20, which has none); on the GPU only
  // its header and vectors are in wasm memory. SwiftShader stands in for a real adapter here.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-gpu4g-'));
  const plain = path.join(MODELS, 'stories260K.gguf');
  const padded = path.join(dir, 'stories260K-past4GB.gguf');
  padGguf(plain, padded, { padBytes: 2 ** 32 + (16 << 20), matrix: true });
  const real = { vendor: 'test', architecture: 'real', description: 'a real GPU (a stand-in)' };
  const autoGpu = wrappedGpu({ info: real });
  const auto = await createEngine({ threads: 1, gpu: autoGpu });
  const ref = await createEngine({ threads: 1, backend: 'webgpu', gpu });
  const refusing = await createEngine({ threads: 1, gpu: wrappedGpu({ info: real, limits: { maxStorageBufferBindingSize: 4096 } }) });
  try {
    const info = await auto.load({ model: padded, nCtx: 64 });
    assert.deepEqual([info.backend, info.memory64], ['webgpu', false], info.backendReason);
    assert.match(info.backendReason, /^auto: a WebGPU adapter \(a real GPU/);
    assert.equal(autoGpu.requests, 1, 'one adapter: the probe\'s goes on to the streamed load');
    await ref.load({ model: plain, nCtx: 64 });
    const ids = Array.from(await ref.tokenize(PROMPT));
    assert.deepEqual(Array.from(await auto.evalTokens(ids)), Array.from(await ref.evalTokens(ids)), 'the padded model on the GPU: the logits of the plain one, bit for bit');
    // the GPU refuses it (a buffer above its limits) before its weights are read: the CPU's
    // module after all — memory64 where the runtime has it, else the CPU's error, which names both
    if (memory64Support().ok) {
      const r = await refusing.load({ model: padded, nCtx: 64 });
      assert.deepEqual([r.backend, r.memory64], ['cpu', true]);
      assert.match(r.backendReason, /^auto: .*4096.*; on the CPU it needs the memory64 module$/);
    } else {
      await assert.rejects(refusing.load({ model: padded, nCtx: 64 }),
        { code: 'WLM_ERR_NOMEM', message: /too large for the 4 GB wasm32 memory.*; nor does the GPU take it \(auto: .*4096/ });
    }
    assert.equal((await refusing.load({ model: plain, nCtx: 64 })).backend, 'cpu', 'the engine loads again');
  } finally {
    await auto.free();
    await ref.free();
    await refusing.free();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('device lost mid-generation: that generation ends with a clear error, the engine loads again', { skip }, async () => {
  let device = null;
  const file = synthCached({ arch: 'gpt2', type: 'F32' });
  const g = await createEngine({ threads: 1, backend: 'webgpu', gpu: wrappedGpu({ onDevice: (d) => { device = d; } }) });
  try {
    await g.load({ model: file });
    let n = 0;
    await assert.rejects(async () => {
      for await (const _ of g.generate(PROMPT, { maxTokens: 20, temperature: 0 })) if (++n === 2) device.destroy();
    }, { code: 'WLM_ERR_STATE', message: /GPU device was lost.*load\(\) the model again/ });
    await assert.rejects(g.evalTokens([1]), { message: /lost/ });
    const info = await g.load({ model: file, backend: 'cpu' });
    assert.equal(info.backend, 'cpu');
    const ids = [];
    for await (const t of g.generate(PROMPT, { maxTokens: 3, temperature: 0 })) ids.push(t.id);
    assert.equal(ids.length, 3);
  } finally {
    await g.free();
  }
});

test('a GPU command that fails validation (an error no scope caught): the step is refused with a clear error, never its garbage; the engine loads again', { skip }, async () => {
  let device = null;
  const file = synthCached({ arch: 'gpt2', type: 'F32' });
  const g = await createEngine({ threads: 1, backend: 'webgpu', gpu: wrappedGpu({ onDevice: (d) => { device = d; } }) });
  try {
    await g.load({ model: file });
    const buf = device.createBuffer({ size: 16, usage: 4 | 8 }); // COPY_SRC | COPY_DST
    const enc = device.createCommandEncoder();
    enc.copyBufferToBuffer(buf, 0, buf, 8, 4); // invalid: one buffer both ends
    device.queue.submit([enc.finish()]);
    await device.queue.onSubmittedWorkDone();
    await new Promise((r) => setTimeout(r, 50)); // the error event is delivered asynchronously
    await assert.rejects(async () => {
      for await (const _ of g.generate(PROMPT, { maxTokens: 3, temperature: 0 }));
    }, { code: 'WLM_ERR_STATE', message: /a GPU command failed \(.*same buffer.*load\(\) the model again/s });
    const info = await g.load({ model: file, backend: 'cpu' });
    assert.equal(info.backend, 'cpu');
  } finally {
    await g.free();
  }
});
