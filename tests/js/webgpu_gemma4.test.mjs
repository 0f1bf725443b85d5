// Gemma 4 on the WebGPU backend (Dawn: lavapipe or SwiftShader, tests/js/_webgpu.mjs), against the
// CPU engine on the synthesizer's random-weight gemma4 files (tools/synth_gguf.mjs), two layer
// patterns: 'tiny' (sliding 16-wide and full 32-wide heads, KV heads 2 or 1 and n_ff by layer, V =
// K on the full layers, the last two layers reading layers 4's and 5's caches, per-layer
// embeddings of 16, window 8) and 'tiny-e2b' (E2B's kind: attn_v everywhere, E2B's 256 / 512-wide
// heads — the attention kernel's wide form —, three KV-shared layers, per-layer embeddings of 8,
// window 4); every layer with its
// layer_output_scale, the logits soft-capped, full layers turning by proportional RoPE
// (rope_freqs). F32, Q8_0 and Q4_K_M; the reference for a quantized file is the CPU on its
// dequantized copy (webgpu_engine.test.mjs says why). The logits over an 18-token prefill (the
// tiled matrix-matrix kernel, past the window) and 6 greedy decode steps within the other GPU
// tests' tolerance (1e-3 relative to 1 + max |logit|; measured ≤ 4.8e-4 on lavapipe, 7.6e-4 on
// SwiftShader), the greedy ids equal up to a near-tie, with an F32 KV cache; with an F16 one
// within 3e-3 (measured ≤ 1.5e-3 on lavapipe, 1.7e-3 on SwiftShader: these models' scale-1
// attention over RMS-normed K and V is sensitive to binary16 rounding — the CPU's own F16 cache
// moves its logits by up to 4e-3 relative to its F32 one — and a K or V element whose last float
// bit differs can round to the other binary16 neighbour); the
// GPU's KV cache holds no buffer for the KV-shared layers and sizes each other layer's by its own
// row; generateBatch (each sequence its block of every layer's cache) and beam search (forks
// copying each layer's rows at its own width) as the CPU engine. 26B-A4B's kind, 'tiny-moe'
// (every layer a mixture of 6 experts, 2 a token, beside the dense feed-forward, each branch
// post-normed, the router on the scaled RMSNorm of the stream, fused gate/up experts, output
// scales on some layers' experts) F32, Q8_0 and Q4_K_M, streamed and (F32) copied from the heap,
// and 'tiny-moe-split' (separate gate and up expert tensors) F32, within the same tolerance.
// The per-layer embedding table is read on the host (per_layer.js pleHostTable), never uploaded:
// on an adapter whose binding limit (a test hook on its limits, _webgpu.mjs limitedGpu) is below
// the table but above token_embd, 'tiny' loads streamed and heap-copied and matches the CPU.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { argmax, assertGpuTracksCpu, dawn, dequantizedCopy, diff, limitedGpu, margin, NEAR_TIE, wasmReference, withGpuPair } from './_webgpu.mjs';
import { readGguf } from '../../tools/vocab_gguf.mjs';
import { createEngine } from '../../js/wasmlm.js';
import { synthCached } from '../../tools/synth_gguf.mjs';
import { MATMAT_MIN_ENT } from '../../js/backend/webgpu/wgsl_matmat.js';
import { GpuForward, Pipelines } from '../../js/backend/webgpu/forward.js';
import { describeModel } from '../../js/backend/webgpu/backend.js';
import { requestDevice } from '../../js/backend/webgpu/device.js';
import { uploadWeights } from '../../js/backend/webgpu/weights.js';
import { pleHostTable, ropeHalf } from '../../js/backend/webgpu/per_layer.js';

const { gpu, skip: why } = await dawn();
const skip = why || false;
const TOL = 1e-3;
const LONG_PROMPT = 'Once upon a time there was a little girl who lived in a village near the woods';

const cases = [];
for (const type of ['F32', 'Q8_0', 'Q4_K_M']) cases.push({ shape: 'tiny', type });
for (const type of ['F32', 'Q8_0']) cases.push({ shape: 'tiny-e2b', type });
for (const type of ['F32', 'Q8_0', 'Q4_K_M']) cases.push({ shape: 'tiny-moe', type });
cases.push({ shape: 'tiny-moe', type: 'F32', gpuWeights: 'heap' }, { shape: 'tiny-moe-split', type: 'F32' });

for (const { shape, type, gpuWeights } of cases) {
  test(`gemma4 ${shape} ${type}${gpuWeights ? ` (gpuWeights '${gpuWeights}')` : ''}: GPU logits match the CPU's over a prefill and 6 decode steps, greedy ids equal up to a near-tie`, { skip }, async (t) => {
    const file = synthCached({ arch: 'gemma4', shape, type });
    await withGpuPair(gpu, file, { kvType: 'f32' }, async (cpu, g) => {
      const ids = Array.from(await cpu.tokenize(LONG_PROMPT));
      assert.ok(ids.length >= MATMAT_MIN_ENT, `${ids.length} prompt tokens: the tiled kernel is not used`);
      const steps = await assertGpuTracksCpu(cpu, g, ids, { tol: TOL, t });
      assert.ok(steps >= 2, `only ${steps} step before a near-tie`);
    }, { cpuModel: type === 'F32' ? file : dequantizedCopy(file), engine: gpuWeights ? { gpuWeights } : {} });
  });
}

test('gemma4 tiny: with an F16 KV cache, the GPU logits match the CPU\'s (F16 too) over a prefill and 6 decode steps', { skip }, async (t) => {
  const file = synthCached({ arch: 'gemma4', shape: 'tiny' });
  await withGpuPair(gpu, file, { kvType: 'f16' }, async (cpu, g) => {
    const ids = Array.from(await cpu.tokenize(LONG_PROMPT));
    await assertGpuTracksCpu(cpu, g, ids, { tol: 3e-3, t });
  });
});

test('gemma4: the GPU KV cache has one buffer per layer that owns K/V (none for the KV-shared ones), each sized by that layer\'s own KV heads × head size', { skip }, async () => {
  const x = wasmReference();
  for (const shape of ['tiny', 'tiny-e2b']) {
    const bytes = fs.readFileSync(synthCached({ arch: 'gemma4', shape }));
    const ptr = x.wlmjs_malloc(bytes.length) >>> 0, slot = x.wlmjs_malloc(8) >>> 0;
    new Uint8Array(x.memory.buffer, ptr, bytes.length).set(bytes);
    assert.equal(x.wlmjs_model_load(ptr, bytes.length, slot), 0);
    const model = new Int32Array(x.memory.buffer, slot, 1)[0];
    const nCtx = 64;
    assert.equal(x.wlmjs_context_new(model, nCtx, 2, 1, 1, 0, 0, -1, slot), 0); // deferred, F16 KV
    const ctx = new Int32Array(x.memory.buffer, slot, 1)[0];
    x.wlmjs_free(slot);
    const f = (i) => x.wlmjs_deferred_field(ctx, i);
    const desc = describeModel(x, model);
    const { device, subgroups } = await requestDevice(await gpu.requestAdapter());
    const pleTable = pleHostTable(x, desc.tensors.ple_embd);
    try {
      const fwd = await GpuForward.create(device, desc, await uploadWeights(device, desc, x.memory), {
        kvF16: true, nCtx, ropeSets: f(7), mscale: f(8), pipelines: new Pipelines(device, { subgroups }), pleTable,
        ropeFreq: new Float32Array(x.memory.buffer, f(6) >>> 0, f(7) * ropeHalf(desc.hp)).slice() });
      const own = desc.layers.filter((l) => l.kv_own);
      assert.equal(own.length, desc.hp.n_layers - desc.hp.n_shared_kv);
      assert.ok(desc.hp.n_shared_kv > 0);
      assert.equal(fwd.cache.layers.length, own.length, `${shape}: a buffer per owning layer`);
      own.forEach((l) => assert.equal(fwd.cache.layers[l.kv_slot].size, 2 * nCtx * l.n_kv_heads * l.head_size * 2, `${shape}: slot ${l.kv_slot}`));
      if (shape === 'tiny-e2b') assert.deepEqual(new Set(own.map((l) => l.kv_dim)), new Set([256, 512]), 'row widths differ by layer');
      // a shared layer reads its source's slot: the sliding ones L − S − 2's, the full ones L − S − 1's
      const first = desc.hp.n_layers - desc.hp.n_shared_kv;
      desc.layers.slice(first).forEach((l) => assert.equal(l.kv_slot, desc.layers[first - (l.swa ? 2 : 1)].kv_slot));
      fwd.destroy();
    } finally {
      pleTable.free();
      device.destroy();
      x.wlm_context_free(ctx);
      x.wlm_model_free(model);
    }
  }
});

test('gemma4: generateBatch (each sequence its block of every layer\'s cache) and beam search (forks copying each layer\'s rows at its own width) on the GPU as the CPU engine', { skip }, async () => {
  const file = synthCached({ arch: 'gemma4', shape: 'tiny' });
  await withGpuPair(gpu, file, { kvType: 'f32' }, async (cpu, g) => {
    const prompts = ['Once upon a time', 'The little dog ran', LONG_PROMPT];
    const run = async (e) => {
      const ids = prompts.map(() => []);
      for await (const t of e.generateBatch(prompts, { temperature: 0, maxTokens: 8 })) if (!t.stopReason) ids[t.seq].push(t.id);
      return ids;
    };
    assert.deepEqual(await run(g), await run(cpu));
    const a = await cpu.beamSearch('Once upon a time', { width: 3, maxTokens: 6 });
    const b = await g.beamSearch('Once upon a time', { width: 3, maxTokens: 6 });
    assert.deepEqual(b.beams.map((x) => x.tokens), a.beams.map((x) => x.tokens));
  });
});

test('gemma4 tiny: the per-layer embedding table stays in wasm memory (its rows gathered on the host): on an adapter whose binding limit is below the table, streamed and heap-copied, the GPU logits match the CPU\'s and backendReason does not name the table; a limit below token_embd is still refused naming it', { skip }, async (t) => {
  const file = synthCached({ arch: 'gemma4', shape: 'tiny' });
  const bytes = (name) => { const x = readGguf(file).tensors.find((y) => y.name === name); return 4 * x.ne.reduce((a, b) => a * b, 1); };
  const table = bytes('per_layer_token_embd.weight'), embd = bytes('token_embd.weight');
  const cap = Math.floor((table + embd) / 2); // (tiny F32: 16.4 MB and 8.2 MB)
  assert.ok(embd < cap && cap < table, `the table (${table} bytes) above the limit ${cap}, token_embd (${embd}) below`);
  const cpu = await createEngine({ threads: 1, backend: 'cpu' });
  try {
    await cpu.load({ model: file, kvType: 'f32' });
    for (const gpuWeights of ['stream', 'heap']) {
      await cpu.reset(); // (evalTokens goes on from the context's tokens)
      const g = await createEngine({ threads: 1, backend: 'webgpu', gpu: limitedGpu(gpu, cap), gpuWeights });
      try {
        const info = await g.load({ model: file, kvType: 'f32' });
        assert.equal(info.backend, 'webgpu', info.backendReason);
        assert.doesNotMatch(info.backendReason, /per_layer_token_embd/);
        let ids = Array.from(await cpu.tokenize(LONG_PROMPT));
        for (let step = 0; step < 4; step++) {
          const a = await cpu.evalTokens(ids);
          const b = await g.evalTokens(ids);
          const { d, m } = diff(a, b);
          assert.ok(d <= TOL * (1 + m), `${gpuWeights} step ${step}: max |diff| ${d} > ${TOL} · (1 + ${m})`);
          t.diagnostic(`${gpuWeights} step ${step}: max |diff| / (1 + max |logit|) ${(d / (1 + m)).toExponential(2)}`);
          if (margin(a) < NEAR_TIE) break;
          assert.equal(argmax(b), argmax(a), `${gpuWeights} step ${step}: greedy ids differ`);
          ids = [argmax(a)];
        }
      } finally {
        await g.free();
      }
      // the hook's limit is what the backend checks: below token_embd, that matrix is refused
      const small = await createEngine({ threads: 1, backend: 'webgpu', gpu: limitedGpu(gpu, embd - 4), gpuWeights });
      try {
        await assert.rejects(small.load({ model: file, nCtx: 64 }),
          (e) => e.code === 'WLM_ERR_UNSUPPORTED' && /token_embd/.test(e.message) && !/per_layer_token_embd/.test(e.message), gpuWeights);
      } finally {
        await small.free();
      }
    }
  } finally {
    await cpu.free();
  }
});

