// Mixtures of experts on the WebGPU backend (Dawn: lavapipe or SwiftShader, tests/js/_webgpu.mjs)
// against the CPU engine, on the synthesizer's tiny models (tools/synth_gguf.mjs: their routers
// scaled so that the chosen experts change from token to token): qwen3moe (softmax router,
// renormalised), gpt-oss (router and expert biases, top k of the logits then a softmax, clamped
// SwiGLU, attention sinks, sliding-window layers, Q/K/V/O biases, YaRN RoPE) and lfm2moe (sigmoid
// router steered by exp_probs_b, a dense lead block, short-conv layers), F32, Q8_0 and one
// quantized mix each (gpt-oss: MXFP4 experts, MXFP4_MOE). As webgpu_engine.test.mjs: a quantized
// file's CPU reference is its dequantized copy (the CPU quantizes activations, the GPU does not),
// logits within 1e-3 relative to 1 + max |logit| over a prefill (the tiled kernel) and 6 greedy
// decode steps, greedy ids equal up to a near-tie. Then, driving GpuForward: a pass whose expert
// tensors are split into buffers of a few experts each (as a binding limit below a tensor forces)
// gives the bits of the unsplit one; and the routes change between tokens — zeroing one expert
// of the last layer at a time changes exactly the entries that chose it, k experts an entry,
// different entries for different experts (also for Gemma 4's kind, gemma4 tiny-moe, whose fused
// gate/up experts are split as the others; its GPU logits against the CPU's are
// webgpu_gemma4.test.mjs's).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { assertGpuTracksCpu, dawn, deferredModel, dequantizedCopy, wasmReference, withGpuPair } from './_webgpu.mjs';
import { createEngine } from '../../js/wasmlm.js';
import { synthCached } from '../../tools/synth_gguf.mjs';
import { MATMAT_MIN_ENT } from '../../js/backend/webgpu/wgsl_matmat.js';
import { GpuForward } from '../../js/backend/webgpu/forward.js';
import { requestDevice } from '../../js/backend/webgpu/device.js';
import { expertPieces, fuseMatrices, uploadWeights } from '../../js/backend/webgpu/weights.js';

const { gpu, skip: why } = await dawn();
const skip = why || false;
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
    await withGpuPair(gpu, file, { kvType: 'f32' }, async (cpu, g, info) => {
      assert.ok(info.nExpert > 1);
      const ids = Array.from(await cpu.tokenize(LONG_PROMPT));
      assert.ok(ids.length >= MATMAT_MIN_ENT, `${ids.length} prompt tokens: the tiled kernel is not used`);
      await assertGpuTracksCpu(cpu, g, ids, { tol: TOL });
    }, { cpuModel: type === 'F32' ? file : dequantizedCopy(file) });
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

/** `desc` (fuseMatrices of it for `cap`) with each expert tensor in buffers of `per` experts. */
function splitEvery(desc, cap, per) {
  const whole = fuseMatrices(desc, cap), E = desc.hp.n_expert;
  return { ...whole, layers: whole.layers.map((l, li) => {
    const out = { ...l };
    for (const k of ['exp_gate', 'exp_up', 'exp_down', 'exp_gate_up']) {
      const t = desc.layers[li][k];
      if (!t) continue;
      out[k] = expertPieces(t, E, per * (t[1] / E) * t[3], `blk.${li}.${k}`);
      assert.equal(out[k].length, Math.ceil(E / per));
    }
    return out;
  }) };
}

for (const [arch, shape] of [['qwen3moe'], ['gpt-oss'], ['lfm2moe'], ['gemma4', 'tiny-moe']]) {
  test(`${arch}${shape ? ` ${shape}` : ''}: expert tensors split into buffers of 1 and 4 experts give the bits of one buffer each (prefill and decode); the last layer's experts, zeroed one at a time, change the tokens that chose them: k a token, not the same for all`, { skip }, async () => {
    const x = wasmReference();
    const { desc, opts } = deferredModel(x, synthCached({ arch, shape, type: 'Q8_0' }));
    const { device, subgroups } = await requestDevice(await gpu.requestAdapter());
    try {
      const cap = Math.min(device.limits.maxStorageBufferBindingSize, device.limits.maxBufferSize);
      const E = desc.hp.n_expert, K = desc.hp.n_expert_used, V = desc.hp.vocab_size, n = 12;
      const ids = Array.from({ length: n }, (_, i) => (i * 37 + 5) % V), pos = ids.map((_, i) => i);
      const runs = [];
      let one = null; // the split into single experts, kept for the routes below
      for (const per of [E, 1, 4]) {
        const d = splitEvery(desc, cap, per);
        const w = await uploadWeights(device, d, x.memory);
        const fwd = await GpuForward.create(device, d, w, opts(device, subgroups));
        const logits = [await fwd.run(ids, pos, ids.map((_, i) => i === n - 1))];
        for (let p = n; p < n + 3; p++) logits.push(await fwd.run([(p * 11) % V], [p], [true]));
        runs.push(logits);
        if (per === 1) one = { d, w, fwd };
        else fwd.destroy();
      }
      assert.deepEqual(runs[1], runs[0], 'experts one per buffer');
      assert.deepEqual(runs[2], runs[0], 'experts four per buffer');
      // the routes: expert e's down matrix of the last layer zeroed changes exactly the entries
      // that chose it there (no later layer mixes the entries)
      const { d, w, fwd } = one;
      const all = ids.map(() => true);
      const prefill = () => { fwd.cache.zeroState([0]); return fwd.run(ids, pos, all); }; // (a hybrid's state from position 0)
      const base = await prefill();
      const last = d.layers.at(-1);
      const counts = new Array(n).fill(0);
      const chosen = [];
      for (let e = 0; e < E; e++) {
        const piece = last.exp_down[e], buf = w.matrix.get(piece[4]);
        device.queue.writeBuffer(buf, 0, new Uint8Array(buf.size));
        const got = await prefill();
        const orig = new Uint8Array(buf.size);
        orig.set(new Uint8Array(x.memory.buffer, piece[5][0].addr, piece[5][0].bytes));
        device.queue.writeBuffer(buf, 0, orig);
        const changed = [];
        for (let j = 0; j < n; j++) if (got.subarray(j * V, (j + 1) * V).some((v, i) => v !== base[j * V + i])) changed.push(j);
        changed.forEach((j) => counts[j]++);
        chosen.push(changed.length);
      }
      assert.deepEqual(counts, new Array(n).fill(K), `each entry's logits change with exactly its ${K} experts zeroed (per expert: ${chosen})`);
      assert.ok(chosen.filter((c) => c > 0 && c < n).length >= 2, `the routes differ between tokens (entries per expert: ${chosen})`);
      assert.deepEqual(await prefill(), base, 'restored');
      fwd.destroy();
    } finally {
      device.destroy();
    }
  });
}
