// The WebGPU backend's choices that need no GPU (js/backend/): which adapters 'auto' counts as
// software, what makes a model unsupported (a weight type without kernels, a head size above the
// attention kernel's), which matrices are joined (fuseMatrices), the option checks, and a `gpu`
// that is not a GPU object.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { attachBackend, autoWouldUseGpu, checkBackendOption } from '../../js/backend/select.js';
import { describeAdapter, findGpu } from '../../js/backend/webgpu/device.js';
import { fuseMatrices, unsupportedReason } from '../../js/backend/webgpu/weights.js';
import { attentionSplit, MAX_HEAD } from '../../js/backend/webgpu/wgsl_ops.js';

const limits = { maxBufferSize: 2 ** 30, maxStorageBufferBindingSize: 2 ** 27, maxComputeWorkgroupsPerDimension: 65535 };
const adapter = (info, features = []) => ({ info, limits, features: new Set(features) });

test('describeAdapter: fallback and software rasterizers are software; a real GPU is not', () => {
  assert.equal(describeAdapter(adapter({ vendor: 'google', architecture: 'swiftshader', isFallbackAdapter: true })).software, true);
  assert.equal(describeAdapter(adapter({ vendor: 'mesa', description: 'llvmpipe (LLVM 15.0.6, 256 bits)' })).software, true);
  const nv = describeAdapter(adapter({ vendor: 'nvidia', architecture: 'hopper', description: 'NVIDIA H100 80GB HBM3' }, ['subgroups', 'shader-f16']));
  assert.deepEqual([nv.software, nv.fallback, nv.subgroups, nv.f16, nv.name], [false, false, true, true, 'NVIDIA H100 80GB HBM3']);
  assert.equal(describeAdapter(adapter({ vendor: 'apple', architecture: 'metal-3' })).name, 'apple metal-3');
});

test('unsupportedReason names a weight type without GPU kernels and the tensor holding it', () => {
  const t = (type) => [type, 4, 32, 128, 1024];
  const desc = { hp: { head_size: 64 }, tensors: { token_embd: t(8), position_embd: null, output: t(8) },
    layers: [{ wq: t(12), wk: t(12), wv: t(99), wo: t(14), w1: t(12), w2: t(14), w3: t(12) }] };
  assert.equal(unsupportedReason({ ...desc, layers: [{ ...desc.layers[0], wv: t(13) }] }, { maxHead: MAX_HEAD }), '');
  assert.match(unsupportedReason(desc, { maxHead: MAX_HEAD }), /no GPU kernels for weight type type 99 \(blk\.0\.attn_v\)/);
  assert.equal(MAX_HEAD, 512); // (Gemma 4's full layers: the attention kernel's wide form)
  assert.equal(unsupportedReason({ ...desc, hp: { head_size: 512 }, layers: [{ ...desc.layers[0], wv: t(13) }] }, { maxHead: MAX_HEAD }), '');
  assert.match(unsupportedReason({ ...desc, hp: { head_size: 640 }, layers: [{ ...desc.layers[0], wv: t(13) }] }, { maxHead: MAX_HEAD }),
    /head size 640 is above the GPU attention kernel's 512/);
  const ok = { ...desc, layers: [{ ...desc.layers[0], wv: t(13) }] };
  // Gemma 4's per-layer shapes run on the GPU (webgpu_gemma4.test.mjs), and its MoE layers
  assert.equal(unsupportedReason({ ...ok, arch: { name: 'gemma4', encoder: 0, per_layer: 1 } }, { maxHead: MAX_HEAD }), '');
  assert.match(unsupportedReason({ ...ok, arch: { name: 'bert', encoder: 1 } }, { maxHead: MAX_HEAD }),
    /causal only: an encoder \(bert\) runs on the CPU/);
  assert.match(unsupportedReason({ ...ok, arch: { name: 'gemma-embedding', encoder: 0 }, hp: { head_size: 64, bidirectional: 1 } }, { maxHead: MAX_HEAD }),
    /causal only: bidirectional attention \(gemma-embedding\)/);
});

test('unsupportedReason: a mixture of experts runs on the GPU, Gemma 4\'s kind too, except more than 32 experts a token, an expert type without kernels, or a description without what Gemma 4\'s layer needs', () => {
  const t = (type, rows = 4) => [type, rows, 32, 34, 1024];
  const v = (n) => [0, 1, n, 4 * n, 2048];
  const moe = { arch: { name: 'qwen3moe', moe_act: 'silu', moe_stream_in: 0, moe_dense_branch: 0 },
    hp: { head_size: 64, n_expert: 8, n_expert_used: 2 }, tensors: { token_embd: t(8), position_embd: null, output: t(8) },
    layers: [{ wq: t(8), wk: t(8), wv: t(8), wo: t(8), ffn_kind: 'moe', moe_router: t(0, 8), exp_gate: t(39, 64), exp_up: t(39, 64), exp_down: t(8, 256) }] };
  const why = (d) => unsupportedReason(d, { maxHead: MAX_HEAD });
  assert.equal(why(moe), '');
  assert.equal(why({ ...moe, arch: { ...moe.arch, name: 'gpt-oss', moe_act: 'swiglu_oai' } }), '');
  // Gemma 4's: a dense branch beside the experts, a router on the scaled stream, fused gate/up
  // experts, expert output scales
  const g4l = { ...moe.layers[0], w1: t(8), w2: t(8), w3: t(8), exp_gate: null, exp_up: null, exp_gate_up: t(8, 128), exp_gu_fused: 1,
    exp_out_scale: v(8), moe_in_norm: v(32), moe_in_scale: v(32), moe_pre_norm: v(32), moe_post_norm_1: v(32), moe_post_norm_2: v(32) };
  const g4 = { ...moe, arch: { name: 'gemma4', per_layer: 1, moe_act: 'gelu', moe_stream_in: 1, moe_dense_branch: 1 }, layers: [g4l, { ...g4l, ffn_kind: 'dense', moe_pre_norm: null }] };
  assert.equal(why(g4), '');
  for (const [k, what] of [['moe_post_norm_2', /dense branch's norms/], ['moe_in_norm', /router's input norm/], ['exp_gate_up', /fused gate\/up experts/]]) {
    assert.match(why({ ...g4, layers: [{ ...g4l, [k]: null }] }), new RegExp(`description lacks the ${what.source} \\(gemma4's mixture of experts\\): the wasm module is older`));
  }
  assert.match(why({ ...moe, hp: { ...moe.hp, n_expert: 64, n_expert_used: 33 } }), /33 experts used per token is above the GPU route kernel's 32/);
  assert.match(why({ ...moe, layers: [{ ...moe.layers[0], exp_up: t(99, 64) }] }), /weight type type 99 \(blk\.0\.ffn_up_exps\)/);
  assert.match(why({ ...g4, layers: [{ ...g4l, exp_gate_up: t(99, 128) }] }), /weight type type 99 \(blk\.0\.ffn_gate_up_exps\)/);
});

test('options: backend names and the gpu object are checked', async () => {
  for (const ok of [undefined, 'auto', 'webgpu', 'cpu']) checkBackendOption(ok);
  for (const bad of ['gpu', 'WebGPU', 1, null]) assert.throws(() => checkBackendOption(bad), { code: 'WLM_ERR_INVALID_ARG' });
  await assert.rejects(findGpu({}), { code: 'WLM_ERR_INVALID_ARG', message: /requestAdapter/ });
  // 'auto' in Node never starts Dawn by itself
  const found = await findGpu(undefined, { importPackage: false });
  assert.equal(found.gpu, null);
  assert.match(found.why, /Node has no navigator\.gpu: pass `gpu`/);
});

test("autoWouldUseGpu: only a real adapter; no GPU object, no adapter or a software one say why", async () => {
  const gpuOf = (ad) => ({ requestAdapter: async () => ad });
  const real = adapter({ vendor: 'nvidia', description: 'NVIDIA H100 80GB HBM3' });
  const yes = await autoWouldUseGpu(gpuOf(real));
  assert.deepEqual([yes.ok, yes.why], [true, '']);
  assert.equal(yes.adapter, real, 'the adapter, for streamToGpu (not requested twice)');
  assert.equal(yes.adapterInfo.name, 'NVIDIA H100 80GB HBM3');
  const soft = await autoWouldUseGpu(gpuOf(adapter({ vendor: 'google', architecture: 'swiftshader', isFallbackAdapter: true })));
  assert.equal(soft.ok, false);
  assert.match(soft.why, /^the WebGPU adapter is a fallback one/);
  assert.match((await autoWouldUseGpu(gpuOf(null))).why, /offers no adapter/);
  assert.match((await autoWouldUseGpu({ requestAdapter: async () => { throw new Error('boom'); } })).why, /requestAdapter\(\) failed: boom/);
  assert.match((await autoWouldUseGpu(null)).why, /Node has no navigator\.gpu/); // never imports Dawn
});

test('a model in the memory64 module stays on the CPU: auto says why, webgpu is refused', async () => {
  const made = [];
  const args = { x: null, model: 0, kvType: 'f16', memory64: true,
    newContext: (deferred) => { made.push(deferred); return 7; }, freeContext: () => {} };
  const auto = await attachBackend({ ...args, backend: 'auto' });
  assert.deepEqual([auto.backend, auto.ctx, made], ['cpu', 7, [false]]);
  assert.match(auto.reason, /^auto: the model needs the memory64 \(wasm64\) module/);
  await assert.rejects(attachBackend({ ...args, backend: 'webgpu' }),
    { code: 'WLM_ERR_UNSUPPORTED', message: /backend 'webgpu': the model needs the memory64/ });
  assert.deepEqual(made, [false]); // nothing created for the refusal
});

test('fuseMatrices joins Q/K/V and gate/up only where the parts share type and row length, fit the limit and (biases) lie end to end; the description is left as it was', () => {
  // tensors: [type, rows, cols, row_bytes, addr] (a vector: one row); Q8_0 rows of 64 columns: 2 blocks, 68 bytes
  const q8 = (rows, addr) => [8, rows, 64, 68, addr];
  const layer = (o = {}) => ({ wq: q8(64, 1000), wk: q8(16, 2000), wv: q8(16, 3000), w1: q8(128, 4000), w3: q8(128, 5000), ...o });
  const desc = { arch: { ffn: 'gated' }, layers: [layer(), layer({ wv: [12, 16, 256, 144, 3000] }), layer({ bq: [0, 1, 64, 256, 9], bk: [0, 1, 16, 64, 10], bv: [0, 1, 16, 64, 11] }),
    layer({ bq: [0, 1, 64, 256, 9] }), layer({ bq: [0, 1, 62, 248, 9], bk: [0, 1, 16, 64, 10], bv: [0, 1, 16, 64, 11] })] };
  const before = JSON.stringify(desc);
  const f = fuseMatrices(desc, 1 << 20);
  assert.equal(JSON.stringify(desc), before, 'the description is not modified');
  const [a, b, c, d, e] = f.layers;
  assert.deepEqual(a.wqkv.slice(0, 5), [8, 96, 64, 68, 1000]);
  assert.deepEqual(a.wqkv[5], [{ name: 'blk.0.attn_q', addr: 1000, bytes: 64 * 68 }, { name: 'blk.0.attn_k', addr: 2000, bytes: 16 * 68 }, { name: 'blk.0.attn_v', addr: 3000, bytes: 16 * 68 }]);
  assert.ok(!('wq' in a) && !('wk' in a) && !('wv' in a));
  assert.deepEqual(a.w13.slice(0, 5), [8, 256, 64, 68, 4000]);
  assert.deepEqual(a.w13[5].map((p) => p.name), ['blk.0.ffn_gate', 'blk.0.ffn_up']);
  assert.ok(!b.wqkv && b.wq && b.w13, 'V of another type: Q/K/V stay apart, gate/up join');
  assert.deepEqual(c.bqkv.map((v) => v[4]), [9, 10, 11], 'the three biases, in order');
  assert.ok(!d.wqkv && d.bq, 'a Q bias alone: not joined');
  assert.ok(!e.wqkv, 'a Q bias of 62 floats would not lie end to end with K\'s: not joined');
  const small = fuseMatrices(desc, 90 * 68); // Q/K/V: 96 rows, gate/up: 256
  assert.ok(small.layers.every((l) => !l.wqkv && !l.w13), 'past the limit: nothing joined');
  assert.ok(fuseMatrices({ ...desc, arch: { ffn: 'mlp' } }, 1 << 20).layers.every((l) => !l.w13), 'gate/up only for gated feed-forwards');
});

test('attentionSplit: an entry\'s splits follow from its length (ranges of 64·k positions, at most maxSplit), not from nCtx', () => {
  assert.deepEqual(attentionSplit(1, 32), { chunk: 64, splits: 1 });
  assert.deepEqual(attentionSplit(1000, 32), { chunk: 64, splits: 16 }); // in any nCtx: 16 workgroups a head
  assert.deepEqual(attentionSplit(2048, 32), { chunk: 64, splits: 32 });
  assert.deepEqual(attentionSplit(2049, 32), { chunk: 128, splits: 17 });
  assert.deepEqual(attentionSplit(131072, 32), { chunk: 4096, splits: 32 });
  assert.deepEqual(attentionSplit(150, 1), { chunk: 192, splits: 1 });
  for (let len = 1; len < 9000; len += 37) {
    const { chunk, splits } = attentionSplit(len, 32);
    assert.ok(chunk % 64 === 0 && splits <= 32 && (splits - 1) * chunk < len && splits * chunk >= len, `len ${len}`);
  }
});
