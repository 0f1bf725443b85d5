// Mixtures of experts on the WebGPU backend (Dawn: lavapipe or SwiftShader, tests/js/_webgpu.mjs)
// against the CPU engine, on the synthesizer's tiny models (tools/synth_gguf.mjs: their routers
// scaled so that the chosen experts change from token to token): qwen3moe (softmax router,
// renormalised), gpt-oss (router and expert biases, top k of the logits then a softmax, clamped
// SwiGLU, attention sinks, sliding-window layers, Q/K/V/O biases, YaRN RoPE) and lfm2moe (sigmoid
// router steered by exp_probs_b, a dense lead block, short-conv layers), F32, Q8_0 and one
// quantized mix each (gpt-oss: MXFP4 experts, MXFP4_MOE). As webgpu_engine.test.mjs: a quantized
// file's CPU reference is its dequantized copy (the CPU quantizes activations, the GPU does not),
// logits within 1e-3 relative to 1 + max |logit| over a prefill (the tiled kernel) and 6 greedy
// decode steps, greedy ids equal up to a near-tie. Then the routes: a GPU pass whose expert
// tensors are split into buffers of a few experts each (as a binding limit below a tensor forces)
// gives the bits of the unsplit one.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { argmax, dawn, deferredModel, dequantizedCopy, diff, margin, wasmReference } from './_webgpu.mjs';
import { createEngine } from '../../js/wasmlm.js';
import { synthCached } from '../../tools/synth_gguf.mjs';
import { MATMAT_MIN_ENT } from '../../js/backend/webgpu/wgsl_matmat.js';
import { GpuForward } from '../../js/backend/webgpu/forward.js';
import { requestDevice } from '../../js/backend/webgpu/device.js';
import { expertPieces, fuseMatrices, uploadWeights } from '../../js/backend/webgpu/weights.js';

const { gpu, skip: why } = await dawn();
const skip = why || false;
const NEAR_TIE = 0.01;
const TOL = 1e-3;
const LONG_PROMPT = 'Once upon a time there was a little girl who lived in a village near the woods';

const CASES = [
  ['qwen3moe', 'F32'], ['qwen3moe', 'Q8_0'], ['qwen3moe', 'Q4_K_M'],
  ['gpt-oss', 'F32'], ['gpt-oss', 'Q8_0'], ['gpt-oss', 'MXFP4_MOE'],
  ['lfm2moe', 'F32'], ['lfm2moe', 'Q8_0'],
];

for (const [arch, type] of CASES) {
  test(`${arch} ${type}: GPU logits match the CPU's over a prefill and 6 decode steps, greedy ids equal up to a near-tie`, { skip }, async () => {
    const file = synthCached({ arch, type });
    const cpu = await createEngine({ threads: 1, backend: 'cpu' });
    const g = await createEngine({ threads: 1, backend: 'webgpu', gpu });
    try {
      await cpu.load({ model: type === 'F32' ? file : dequantizedCopy(file), kvType: 'f32' });
      const info = await g.load({ model: file, kvType: 'f32' });
      assert.equal(info.backend, 'webgpu', info.backendReason);
      assert.ok(info.nExpert > 1);
      let ids = Array.from(await cpu.tokenize(LONG_PROMPT));
      assert.ok(ids.length >= MATMAT_MIN_ENT, `${ids.length} prompt tokens: the tiled kernel is not used`);
      for (let step = 0; step < 7; step++) {
        const a = await cpu.evalTokens(ids);
        const b = await g.evalTokens(ids);
        const { d, m } = diff(a, b);
        assert.ok(d <= TOL * (1 + m), `step ${step}: max |diff| ${d} > ${TOL} · (1 + ${m})`);
        if (margin(a) < NEAR_TIE) break;
        assert.equal(argmax(b), argmax(a), `step ${step}: greedy ids differ`);
        ids = [argmax(a)];
      }
    } finally {
      await cpu.free();
      await g.free();
    }
  });
}

test('the heap-copy load (gpuWeights \'heap\') runs a mixture of experts on the GPU too, generate() greedy as the CPU', { skip }, async () => {
  const file = synthCached({ arch: 'gpt-oss', type: 'F32' });
  const cpu = await createEngine({ threads: 1, backend: 'cpu' });
  const g = await createEngine({ threads: 1, backend: 'webgpu', gpu, gpuWeights: 'heap' });
  try {
    await cpu.load({ model: file, kvType: 'f32' });
    const info = await g.load({ model: file, kvType: 'f32' });
    assert.equal(info.backend, 'webgpu', info.backendReason);
    const p = { temperature: 0, maxTokens: 8 };
    assert.equal((await g.complete(LONG_PROMPT, p)).text, (await cpu.complete(LONG_PROMPT, p)).text);
  } finally {
    await cpu.free();
    await g.free();
  }
});

for (const arch of ['qwen3moe', 'gpt-oss']) {
  test(`${arch}: expert tensors split into buffers of 1 and 4 experts give the bits of one buffer each (prefill and decode)`, { skip }, async () => {
    const x = wasmReference();
    const { desc, opts } = deferredModel(x, synthCached({ arch, type: 'Q8_0' }));
    const { device, subgroups } = await requestDevice(await gpu.requestAdapter());
    try {
      const cap = Math.min(device.limits.maxStorageBufferBindingSize, device.limits.maxBufferSize);
      const whole = fuseMatrices(desc, cap);
      const E = desc.hp.n_expert;
      const runs = [];
      for (const per of [E, 1, 4]) {
        const d = { ...whole, layers: whole.layers.map((l, li) => {
          const out = { ...l };
          for (const k of ['exp_gate', 'exp_up', 'exp_down']) {
            if (!desc.layers[li][k]) continue;
            const t = desc.layers[li][k];
            out[k] = expertPieces(t, E, per * (t[1] / E) * t[3], `blk.${li}.${k}`);
            assert.equal(out[k].length, Math.ceil(E / per));
          }
          return out;
        }) };
        const fwd = await GpuForward.create(device, d, await uploadWeights(device, d, x.memory), opts(device, subgroups));
        const V = desc.hp.vocab_size, n = 12;
        const ids = Array.from({ length: n }, (_, i) => (i * 37 + 5) % V);
        const logits = [await fwd.run(ids, ids.map((_, i) => i), ids.map((_, i) => i === n - 1))];
        for (let p = n; p < n + 3; p++) logits.push(await fwd.run([(p * 11) % V], [p], [true]));
        runs.push(logits);
        fwd.destroy();
      }
      assert.deepEqual(runs[1], runs[0], 'experts one per buffer');
      assert.deepEqual(runs[2], runs[0], 'experts four per buffer');
    } finally {
      device.destroy();
    }
  });
}
