// tests/js/synth_gguf.test.mjs — tools/synth_gguf.mjs: the same arguments give the same bytes
// (pinned sha256, so a change to the synthesizer that would invalidate the llama.cpp oracle
// records in tests/reference/oracle/ shows here first), another seed gives other bytes, and the
// file read back holds the tensors and keys of the description in llama.cpp's shapes; the direct
// quantizing writer (writeQuantized) writes the very bytes of the two-step path (the F32 file,
// then the native CLI's `wasmlm quantize`, an independent route through the C code).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import crypto from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { ARCHS, describe, writeF32, resolveShape, llama3RopeFreqs, synthesize } from '../../tools/synth_gguf.mjs';
import { readGguf } from '../../tools/vocab_gguf.mjs';

const sha256 = (file) => crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-synth-'));
test.after(() => fs.rmSync(tmp, { recursive: true, force: true }));

// sha256 of `node tools/synth_gguf.mjs --arch A [--shape S] --out F` (tiny shape unless named,
// seed 1), F32
const PINNED = {
  gpt2: '64a5602228d124c1da545c7c197f0abd860dbe49a563c9e38b4e2b242f9a46d9',
  phi3: '5ba5eb002ffa3f18763b5235aa77fc6c9bd7023ba57aade96c0ba067f362ca00',
  qwen35: '4bcd8845db884022c1843fc2b035ea737845ba400b3058f32c56a840bc9296da',
  'qwen35 tiny-untied': 'c2c7a4a2651e8fccbe39e03d4ab203056d8c3811b4ec1b49243cccbd14fce728',
  lfm2: 'efb775be166023ae638bd70c157847674547ef3d67495cc2f49a9ac1377f42dd',
  'lfm2 tiny-untied': 'e6f0774cb9c196873a7efdebeb323f1421a9504b4edec719b872030ceb426901',
  smollm3: '43d0324107e11619e99d105e645cbf653dbc5a950347f7ec3a9f0f93bcb2bbb9',
  qwen3moe: 'a0f918be6bda0194d6b2efbda25996b5325125b95691eccd615c04905cac41d6',
  qwen2vl: 'b1c330ed3b4266565f908e106f91cc7dd91520ed79c51b4b8d1d7eac49440881',
  lfm2moe: 'c0865ead4ff70a5703e1ffffe6260934bb4c8a50c8b32f01680fa6431f79bfe2',
  'gpt-oss': 'd4b911114e256f56c5fe2ead6f61b06693da550319a31fd1e6d0c63b16f93dcc',
};

for (const [name, hash] of Object.entries(PINNED)) {
  const [arch, shape = 'tiny'] = name.split(' ');
  test(`synth_gguf: ${arch} ${shape} is deterministic (pinned sha256)`, () => {
    const f = path.join(tmp, `${arch}-${shape}.gguf`);
    writeF32(arch, shape, f, { seed: 1 });
    assert.equal(sha256(f), hash);
    const g = path.join(tmp, `${arch}-${shape}-seed2.gguf`);
    writeF32(arch, shape, g, { seed: 2 });
    assert.notEqual(sha256(g), hash, 'the seed changes the weights');
    fs.rmSync(f); fs.rmSync(g);
  });
}

// The tiny shape of every architecture in Q8_0, Q4_0 and Q4_K_M (whose per-tensor rules and
// fallbacks give Q5_0, Q8_0, Q5_K, Q6_K matrices here): direct = two-step, byte for byte.
// Checked once by hand on a mid shape (GPT-2 small, Q8_0 and Q4_K_M: identical; bench/README.md).
const CLI = process.env.WASMLM_CLI || fileURLToPath(new URL('../../build/native/wasmlm', import.meta.url));
// (and the hybrids' second tiny shapes: lfm2's attn_v rule counts its attention blocks only)
for (const [arch, shape] of [...ARCHS.map((a) => [a, 'tiny']), ['qwen35', 'tiny-untied'], ['lfm2', 'tiny-untied']]) {
  test(`synth_gguf: ${arch} ${shape}, direct quantizing writer = F32 file + wasmlm quantize`, (t) => {
    if (!fs.existsSync(CLI)) { t.skip(`${CLI} is missing (tools/build.sh builds it)`); return; }
    for (const type of ['Q8_0', 'Q4_0', 'Q4_K_M']) {
      const a = path.join(tmp, `${arch}-${type}-direct.gguf`), b = path.join(tmp, `${arch}-${type}-two-step.gguf`);
      synthesize({ arch, shape, type, out: a });
      synthesize({ arch, shape, type, out: b, twoStep: true, cli: CLI });
      assert.ok(!fs.existsSync(`${a}.f32.tmp`) && !fs.existsSync(`${b}.f32.tmp`), 'no intermediate left');
      const ga = readGguf(a);
      assert.ok(ga.tensors.some((x) => x.type !== 0), `${type}: some tensors are quantized`);
      assert.equal(sha256(a), sha256(b), `${arch} ${type}: the direct file differs from the two-step one`);
      fs.rmSync(a); fs.rmSync(b);
    }
  });
}

test('synth_gguf: what is written is what is described, in llama.cpp\'s shapes', () => {
  for (const arch of ['gpt2', 'phi3']) {
    const f = path.join(tmp, `${arch}-read.gguf`);
    const m = writeF32(arch, 'tiny', f, { seed: 3 });
    const g = readGguf(f);
    assert.deepEqual(g.tensors.map((t) => [t.name, t.ne]), m.tensors.map((t) => [t.name, t.ne]));
    assert.ok(g.tensors.every((t) => t.type === 0), 'F32');
    const kv = Object.fromEntries(g.kv.map(([k, , v]) => [k, v]));
    assert.equal(kv['general.architecture'], arch);
    const s = resolveShape(arch, 'tiny');
    assert.equal(kv[`${arch}.embedding_length`], s.D);
    assert.equal(kv[`${arch}.block_count`], s.L);
    assert.equal(kv['tokenizer.ggml.tokens'].length, m.nVocab);
    // the data section: file size = data offset + Σ tensor sizes padded to 32
    const data = m.tensors.reduce((a, t) => a + Math.ceil((t.ne.reduce((x, y) => x * y, 1) * 4) / 32) * 32, 0);
    assert.equal(fs.statSync(f).size, g.dataOffset + data);
  }
});

test('synth_gguf: per-architecture tensors (llama.cpp names and shapes)', () => {
  const names = (arch) => new Map(describe(arch, 'tiny').tensors.map((t) => [t.name, t.ne]));
  const s = (arch) => resolveShape(arch, 'tiny');
  // qwen2: Q/K/V biases, separate output
  let n = names('qwen2'), q = s('qwen2');
  assert.deepEqual(n.get('blk.1.attn_k.bias'), [q.KV * q.hd]);
  assert.ok(n.has('output.weight'));
  // qwen3: head size from key_length (32 ≠ 64/4), Q/K norms over one head
  n = names('qwen3'); q = s('qwen3');
  assert.deepEqual(n.get('blk.0.attn_q.weight'), [q.D, q.H * 32]);
  assert.deepEqual(n.get('blk.0.attn_output.weight'), [q.H * 32, q.D]);
  assert.deepEqual(n.get('blk.0.attn_k_norm.weight'), [32]);
  assert.ok(!n.has('output.weight') && !n.has('blk.0.attn_q.bias'));
  // gemma3: post-norms, 6 layers (layer 5 global under llama.cpp's fixed pattern)
  n = names('gemma3');
  assert.ok(n.has('blk.5.post_attention_norm.weight') && n.has('blk.5.post_ffw_norm.weight'));
  // phi3: fused QKV, gate+up in one matrix, LongRoPE factors
  n = names('phi3'); q = s('phi3');
  assert.deepEqual(n.get('blk.0.attn_qkv.weight'), [q.D, q.H * q.hd + 2 * q.KV * q.hd]);
  assert.deepEqual(n.get('blk.0.ffn_up.weight'), [q.D, 2 * q.F]);
  assert.deepEqual(n.get('rope_factors_long.weight'), [q.rot / 2]);
  // gpt2: learned positions, LayerNorm biases, fused QKV with bias
  n = names('gpt2'); q = s('gpt2');
  assert.deepEqual(n.get('position_embd.weight'), [q.D, q.ctx]);
  assert.deepEqual(n.get('blk.1.attn_qkv.bias'), [3 * q.D]);
  assert.ok(n.has('output_norm.bias') && n.has('blk.0.ffn_down.bias'));
  // llama tiny: Llama 3.2 style with rope_freqs
  assert.ok(names('llama').has('rope_freqs.weight'));
  // smollm3: Llama's tensors, no rope_freqs (llama.cpp passes none), rope.dimension_count = head
  // size (its graph asserts it), no key for the NoPE layers; 5 layers, so layer 3 is one
  n = names('smollm3'); q = s('smollm3');
  assert.ok(!n.has('rope_freqs.weight') && !n.has('output.weight') && n.has('blk.4.ffn_gate.weight'));
  assert.deepEqual(n.get('blk.0.attn_k.weight'), [q.D, q.KV * q.hd]);
  const skv = Object.fromEntries(describe('smollm3', 'tiny').kv.map(([k, , v]) => [k, v]));
  assert.equal(skv['smollm3.rope.dimension_count'], q.hd);
  assert.ok(q.L >= 5 && !Object.keys(skv).some((k) => /rope_layer|no_rope/.test(k)));
  for (const arch of ARCHS) assert.ok(names(arch).has('token_embd.weight'), arch);
});

test('synth_gguf: qwen35 and lfm2 (llama.cpp b12211 names, shapes and keys)', () => {
  const kvOf = (m) => Object.fromEntries(m.kv.map(([k, , v]) => [k, v]));
  // qwen35 tiny: DeltaNet at 0 and 2, gated attention at 1 and 3 (full_attention_interval 2)
  let m = describe('qwen35', 'tiny'), n = new Map(m.tensors.map((t) => [t.name, t.ne])), q = resolveShape('qwen35', 'tiny');
  let kv = kvOf(m);
  const C = 2 * q.HK * q.S + q.HV * q.S;
  assert.equal(kv['qwen35.full_attention_interval'], 2);
  assert.deepEqual([...kv['qwen35.rope.dimension_sections']], [2, 1, 1, 0]);
  assert.equal(kv['qwen35.rope.dimension_count'], q.hd / 4);
  assert.equal(kv['qwen35.attention.key_length'], 32);
  assert.equal(kv['qwen35.ssm.inner_size'], q.HV * q.S);
  assert.ok(q.HV > q.HK, 'value heads read key head j mod HK');
  assert.equal(kv['tokenizer.ggml.pre'], 'qwen35');
  for (const l of [0, 2]) {
    assert.deepEqual(n.get(`blk.${l}.attn_qkv.weight`), [q.D, C]);
    assert.deepEqual(n.get(`blk.${l}.ssm_conv1d.weight`), [q.K, C]);
    assert.deepEqual(n.get(`blk.${l}.ssm_a`), [q.HV]);
    assert.deepEqual(n.get(`blk.${l}.ssm_dt.bias`), [q.HV]);
    assert.deepEqual(n.get(`blk.${l}.ssm_alpha.weight`), [q.D, q.HV]);
    assert.deepEqual(n.get(`blk.${l}.ssm_norm.weight`), [q.S]);
    assert.deepEqual(n.get(`blk.${l}.ssm_out.weight`), [q.HV * q.S, q.D]);
    assert.ok(!n.has(`blk.${l}.attn_q.weight`));
    const a = m.tensors.find((t) => t.name === `blk.${l}.ssm_a`).gen.values;
    assert.ok([...a].every((x) => x < 0), 'ssm_a = -exp(A_log) < 0');
  }
  for (const l of [1, 3]) {
    assert.deepEqual(n.get(`blk.${l}.attn_q.weight`), [q.D, 2 * q.H * q.hd], 'query and gate per head');
    assert.deepEqual(n.get(`blk.${l}.attn_output.weight`), [q.H * q.hd, q.D]);
    assert.ok(n.has(`blk.${l}.post_attention_norm.weight`) && !n.has(`blk.${l}.attn_qkv.weight`));
  }
  assert.ok(!n.has('output.weight') && n.has('output_norm.weight'));
  // qwen35 tiny-untied: the kinds from attention.recurrent_layers, HV = HK, an output.weight
  m = describe('qwen35', 'tiny-untied'); n = new Map(m.tensors.map((t) => [t.name, t.ne])); kv = kvOf(m);
  assert.deepEqual(kv['qwen35.attention.recurrent_layers'], [true, false, true, true, false]);
  assert.ok(!('qwen35.full_attention_interval' in kv));
  assert.ok(n.has('blk.3.attn_qkv.weight') && n.has('blk.4.attn_q.weight') && n.has('output.weight'));
  // lfm2 tiny: 0 KV heads mark the conv blocks; token_embd_norm is the final norm
  m = describe('lfm2', 'tiny'); n = new Map(m.tensors.map((t) => [t.name, t.ne])); q = resolveShape('lfm2', 'tiny'); kv = kvOf(m);
  assert.deepEqual([...kv['lfm2.attention.head_count_kv']], [0, 0, 2, 0, 2, 0]);
  assert.equal(kv['lfm2.shortconv.l_cache'], 3);
  assert.equal(kv['tokenizer.ggml.pre'], 'lfm2');
  assert.equal(kv['tokenizer.ggml.add_bos_token'], true);
  for (const l of [0, 1, 3, 5]) {
    assert.deepEqual(n.get(`blk.${l}.shortconv.in_proj.weight`), [q.D, 3 * q.D]);
    assert.deepEqual(n.get(`blk.${l}.shortconv.conv.weight`), [3, q.D]);
    assert.ok(!n.has(`blk.${l}.attn_q.weight`));
  }
  for (const l of [2, 4]) {
    assert.deepEqual(n.get(`blk.${l}.attn_k.weight`), [q.D, 2 * q.hd]);
    assert.deepEqual(n.get(`blk.${l}.attn_output.weight`), [q.D, q.D]);
    assert.deepEqual(n.get(`blk.${l}.attn_q_norm.weight`), [q.hd]);
  }
  assert.ok(n.has('token_embd_norm.weight') && !n.has('output_norm.weight') && !n.has('output.weight'));
  m = describe('lfm2', 'tiny-untied'); n = new Map(m.tensors.map((t) => [t.name, t.ne]));
  assert.ok(n.has('output.weight') && n.has('blk.0.attn_q.weight') && n.has('blk.1.shortconv.conv.weight'));
});

test('synth_gguf: qwen3moe (llama.cpp names, 3-D expert shapes and keys)', () => {
  const kvOf = (m) => Object.fromEntries(m.kv.map(([k, , v]) => [k, v]));
  for (const shape of ['tiny', 'qwen3-30b-a3b']) {
    const m = describe('qwen3moe', shape), q = resolveShape('qwen3moe', shape), kv = kvOf(m);
    const n = new Map(m.tensors.map((t) => [t.name, t.ne]));
    assert.equal(kv['qwen3moe.expert_count'], q.E);
    assert.equal(kv['qwen3moe.expert_used_count'], q.K);
    assert.equal(kv['qwen3moe.expert_feed_forward_length'], q.Fe);
    assert.equal(kv['qwen3moe.attention.key_length'], q.hd);
    for (let l = 0; l < q.L; l++) {
      assert.deepEqual(n.get(`blk.${l}.ffn_gate_inp.weight`), [q.D, q.E]);
      assert.deepEqual(n.get(`blk.${l}.ffn_gate_exps.weight`), [q.D, q.Fe, q.E]);
      assert.deepEqual(n.get(`blk.${l}.ffn_up_exps.weight`), [q.D, q.Fe, q.E]);
      assert.deepEqual(n.get(`blk.${l}.ffn_down_exps.weight`), [q.Fe, q.D, q.E]);
      assert.deepEqual(n.get(`blk.${l}.attn_q_norm.weight`), [q.hd]);
      assert.ok(!n.has(`blk.${l}.ffn_gate.weight`) && !n.has(`blk.${l}.ffn_down.weight`));
    }
    if (shape !== 'tiny') { // Qwen3-30B-A3B: 30.5 B parameters, 3.3 B active
      const count = (t) => t.ne.reduce((a, b) => a * b, 1);
      const total = m.tensors.reduce((a, t) => a + count(t), 0);
      const experts = m.tensors.filter((t) => /_exps\./.test(t.name)).reduce((a, t) => a + count(t), 0);
      const active = total - experts + experts * q.K / q.E;
      assert.ok(Math.abs(total / 1e9 - 30.5) < 0.1, `${total} parameters`);
      assert.ok(Math.abs(active / 1e9 - 3.3) < 0.1, `${active} active parameters`);
    }
  }
});

test('synth_gguf: lfm2moe (dense leading blocks, then experts with exp_probs_b)', () => {
  const kvOf = (m) => Object.fromEntries(m.kv.map(([k, , v]) => [k, v]));
  for (const shape of ['tiny', 'lfm2-8b-a1b']) {
    const m = describe('lfm2moe', shape), q = resolveShape('lfm2moe', shape), kv = kvOf(m);
    const n = new Map(m.tensors.map((t) => [t.name, t.ne]));
    assert.equal(kv['lfm2moe.expert_count'], q.E);
    assert.equal(kv['lfm2moe.expert_used_count'], q.K);
    assert.equal(kv['lfm2moe.expert_gating_func'], 2);
    assert.equal(kv['lfm2moe.leading_dense_block_count'], q.dense);
    for (let l = 0; l < q.L; l++) {
      if (l < q.dense) {
        assert.deepEqual(n.get(`blk.${l}.ffn_gate.weight`), [q.D, q.F]);
        assert.ok(!n.has(`blk.${l}.ffn_gate_inp.weight`));
      } else {
        assert.deepEqual(n.get(`blk.${l}.ffn_gate_inp.weight`), [q.D, q.E]);
        assert.deepEqual(n.get(`blk.${l}.ffn_down_exps.weight`), [q.Fe, q.D, q.E]);
        assert.deepEqual(n.get(`blk.${l}.exp_probs_b.bias`), [q.E]);
        assert.ok(!n.has(`blk.${l}.ffn_gate.weight`));
      }
      assert.equal(n.has(`blk.${l}.shortconv.conv.weight`), q.kv[l] === 0);
    }
  }
});

test('synth_gguf: gemma4 MoE (experts beside the dense feed-forward; 26B-A4B: 25.2 B parameters, 3.8 B active)', () => {
  const kvOf = (m) => Object.fromEntries(m.kv.map(([k, , v]) => [k, v]));
  for (const shape of ['tiny-moe', 'tiny-moe-split', 'gemma4-26b-a4b']) {
    const m = describe('gemma4', shape), q = resolveShape('gemma4', shape), kv = kvOf(m);
    const n = new Map(m.tensors.map((t) => [t.name, t.ne]));
    assert.equal(kv['gemma4.expert_count'], q.E);
    assert.equal(kv['gemma4.expert_used_count'], q.K);
    assert.equal(kv['gemma4.expert_feed_forward_length'], q.Fe);
    for (let l = 0; l < q.L; l++) {
      const b = `blk.${l}.`, h = q.swa[l] ? q.hdSwa : q.hd;
      assert.deepEqual(n.get(`${b}ffn_gate_inp.weight`), [q.D, q.E]);
      assert.deepEqual(n.get(`${b}ffn_gate_inp.scale`), [q.D]);
      for (const x of ['pre_ffw_norm_2', 'post_ffw_norm_1', 'post_ffw_norm_2', 'post_ffw_norm']) assert.deepEqual(n.get(`${b}${x}.weight`), [q.D]);
      assert.deepEqual(n.get(`${b}ffn_gate.weight`), [q.D, q.F[l]], 'the dense branch stays');
      if (q.split) {
        assert.deepEqual(n.get(`${b}ffn_gate_exps.weight`), [q.D, q.Fe, q.E]);
        assert.deepEqual(n.get(`${b}ffn_up_exps.weight`), [q.D, q.Fe, q.E]);
        assert.ok(!n.has(`${b}ffn_gate_up_exps.weight`));
      } else assert.deepEqual(n.get(`${b}ffn_gate_up_exps.weight`), [q.D, 2 * q.Fe, q.E]);
      assert.deepEqual(n.get(`${b}ffn_down_exps.weight`), [q.Fe, q.D, q.E]);
      assert.equal(n.has(`${b}ffn_down_exps.scale`), q.downScale[l]);
      assert.deepEqual(n.get(`${b}attn_k.weight`), [q.D, q.kv[l] * h]);
      assert.equal(n.has(`${b}attn_v.weight`), q.swa[l], 'V = K on the full layers');
    }
    if (shape === 'gemma4-26b-a4b') { // published: 25.2 B parameters, 3.8 B active (tied output)
      const count = (t) => t.ne.reduce((a, b) => a * b, 1);
      const total = m.tensors.reduce((a, t) => a + count(t), 0);
      const experts = m.tensors.filter((t) => /_exps\.weight/.test(t.name)).reduce((a, t) => a + count(t), 0);
      const active = total - experts + experts * q.K / q.E;
      assert.ok(Math.abs(total / 1e9 - 25.2) < 0.1, `${total} parameters`);
      assert.ok(Math.abs(active / 1e9 - 3.8) < 0.1, `${active} active parameters`);
      assert.deepEqual(q.kv.slice(0, 6), [8, 8, 8, 8, 8, 2], 'fewer KV heads on the full layers');
    }
  }
});

test('synth_gguf: gpt-oss (biases, sinks, YaRN keys; gpt-oss-20b: 20.9 B parameters, 3.6 B active)', () => {
  const kvOf = (m) => Object.fromEntries(m.kv.map(([k, , v]) => [k, v]));
  for (const shape of ['tiny', 'gpt-oss-20b']) {
    const m = describe('gpt-oss', shape), q = resolveShape('gpt-oss', shape), kv = kvOf(m);
    const n = new Map(m.tensors.map((t) => [t.name, t.ne]));
    assert.equal(kv['gpt-oss.rope.scaling.type'], 'yarn');
    assert.equal(kv['gpt-oss.attention.sliding_window'], q.window);
    for (let l = 0; l < q.L; l++) {
      assert.deepEqual(n.get(`blk.${l}.attn_sinks.weight`), [q.H]);
      assert.deepEqual(n.get(`blk.${l}.attn_q.bias`), [q.H * q.hd]);
      assert.deepEqual(n.get(`blk.${l}.ffn_gate_inp.bias`), [q.E]);
      assert.deepEqual(n.get(`blk.${l}.ffn_up_exps.bias`), [q.Fe, q.E]);
      assert.deepEqual(n.get(`blk.${l}.ffn_down_exps.bias`), [q.D, q.E]);
      assert.ok(n.has(`blk.${l}.post_attention_norm.weight`) && !n.has(`blk.${l}.ffn_norm.weight`));
    }
    if (shape !== 'tiny') {
      const count = (t) => t.ne.reduce((a, b) => a * b, 1);
      const total = m.tensors.reduce((a, t) => a + count(t), 0);
      const experts = m.tensors.filter((t) => /_exps\./.test(t.name)).reduce((a, t) => a + count(t), 0);
      const active = total - experts + experts * q.K / q.E - (q.nVocab - 1) * q.D; // one embedding row
      assert.ok(Math.abs(total / 1e9 - 20.9) < 0.1, `${total} parameters`);
      assert.ok(Math.abs(active / 1e9 - 3.6) < 0.1, `${active} active parameters`);
    }
  }
});

test('synth_gguf: Llama 3 rope_freqs follow the three wavelength regimes', () => {
  // Llama-3.2-1B: head size 64, theta 500000, factor 32, low 1, high 4, original context 8192
  const f = llama3RopeFreqs(64, 500000, { factor: 32, lowFreqFactor: 1, highFreqFactor: 4, originalContext: 8192 });
  assert.equal(f.length, 32);
  assert.equal(f[0], 1); // wavelength 2π < 2048: unscaled
  assert.equal(f[31], 32); // wavelength > 8192: divided by the factor
  const mid = [...f].filter((x) => x > 1 && x < 32);
  assert.ok(mid.length > 0, 'some frequencies are smoothed between the two');
  for (let i = 1; i < 32; i++) assert.ok(f[i] >= f[i - 1], 'monotone');
});
