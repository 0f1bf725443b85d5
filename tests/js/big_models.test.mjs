// big_models.test.mjs — the random-code fixtures of tools/synth_gguf.mjs (writeRandomCodes), the
// files bench/big_models.mjs loads whole (gpt-oss-20b MXFP4, Qwen3-30B-A3B Q3_K_M): they parse,
// carry the header, tensor names, shapes and types of the quantizing writer's file (llama.cpp's
// mix rules) and say they are fixtures; every block layout they fill (MXFP4, Q8_0, Q2_K..Q6_K,
// the 32-blocks of the tiny shapes' fallbacks) gives finite logits of the spread the quantizing
// writer's file of the same shape gives (a wrong scale byte range would not); same arguments,
// same bytes. The published shapes' plans (the full files are 12 and 15 GB; the bench writes
// them) are checked from their headers: gpt-oss-20b's experts MXFP4 and the rest Q8_0 / F32 at
// the published 12.1 GB.

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import crypto from 'node:crypto';
import { createEngine } from '../../js/wasmlm.js';
import { memory64Support } from '../../js/runtime/memory64.js';
import { writeRandomCodes, writeQuantized, writeHeaderOnly, RANDOM_CODES_NOTE } from '../../tools/synth_gguf.mjs';
import { readGguf } from '../../tools/vocab_gguf.mjs';
import { weightBytesOf } from '../../bench/big_models.mjs';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-random-codes-'));
const engine = await createEngine({ threads: 1, memory64: memory64Support().ok });
after(async () => { await engine.free(); fs.rmSync(dir, { recursive: true, force: true }); });

const sha256 = (f) => crypto.createHash('sha256').update(fs.readFileSync(f)).digest('hex');
const std = (a) => {
  let s = 0, s2 = 0;
  for (const v of a) { s += v; s2 += v * v; }
  const m = s / a.length;
  return Math.sqrt(s2 / a.length - m * m);
};
const byType = (g) => {
  const o = {};
  for (const t of g.tensors) o[t.type] = (o[t.type] ?? 0) + 1;
  return o;
};

// [arch, shape, target, the types the file must hold]
const CASES = [
  ['gpt-oss', 'tiny', 'MXFP4_MOE', [0, 8, 39]],
  ['qwen3moe', 'tiny-k', 'Q3_K_M', [0, 11, 12, 13, 14]],
  ['qwen3moe', 'tiny-k', 'Q2_K', [0, 10]],
  ['qwen3moe', 'tiny', 'Q4_K_M', [0, 6, 8]], // rows of 64: Q5_0 / Q8_0 fallbacks
];

for (const [arch, shape, type, types] of CASES) {
  test(`writeRandomCodes ${arch} ${shape} ${type}: the quantizing writer's tensors, finite logits of its spread`, async () => {
    const file = path.join(dir, `${arch}-${shape}-${type}.gguf`);
    const ref = path.join(dir, `${arch}-${shape}-${type}-ref.gguf`);
    const r = writeRandomCodes(arch, shape, file, { type });
    writeQuantized(arch, shape, ref, { type });
    const g = readGguf(file), q = readGguf(ref);
    assert.equal(r.size, fs.statSync(file).size);
    assert.equal(r.size - g.dataOffset, fs.statSync(ref).size - q.dataOffset, 'the data bytes of the quantized file');
    assert.deepEqual(g.tensors.map(({ name, ne, type: t, offset }) => [name, ne, t, offset]),
      q.tensors.map(({ name, ne, type: t, offset }) => [name, ne, t, offset]));
    assert.deepEqual(Object.keys(byType(g)).map(Number).sort((a, b) => a - b), types);
    const kv = Object.fromEntries(g.kv.map(([k, , v]) => [k, v]));
    assert.equal(kv['general.description'], RANDOM_CODES_NOTE);
    assert.equal(kv['wasmlm.fixture'], 'random-codes');
    assert.match(kv['general.name'], /random codes/);
    // the keys of the quantized file, besides those
    const qk = q.kv.map(([k]) => k), gk = g.kv.map(([k]) => k).filter((k) => k !== 'general.description' && k !== 'wasmlm.fixture');
    assert.deepEqual(gk, qk);
    const data = r.size - g.dataOffset, w = weightBytesOf(file); // the data less its alignment padding
    assert.ok(w <= data && w > data - 32 * g.tensors.length, `weight bytes ${w} of ${data}`);

    const spread = [];
    for (const f of [file, ref]) {
      const info = await engine.load({ model: f, nCtx: 128 });
      assert.equal(info.architecture, arch);
      const ids = await engine.tokenize('Once upon a time there was a little', { bos: true });
      await engine.reset();
      const logits = await engine.evalTokens(ids);
      assert.ok(logits.every(Number.isFinite), `${path.basename(f)}: non-finite logits`);
      spread.push(std(logits));
      await engine.reset();
      const out = await engine.complete('Hello', { temperature: 0, maxTokens: 4 });
      assert.equal(out.nGenerated, 4);
    }
    // random codes under the quantizer's scales: the logits spread like the real quantized file's
    assert.ok(spread[0] > 0.5 * spread[1] && spread[0] < 2 * spread[1], `logit spreads ${spread[0]} vs ${spread[1]}`);
  });
}

test('writeRandomCodes: same arguments, same bytes; another seed, other codes', () => {
  const a = path.join(dir, 'a.gguf'), b = path.join(dir, 'b.gguf'), c = path.join(dir, 'c.gguf');
  writeRandomCodes('gpt-oss', 'tiny', a, { type: 'MXFP4_MOE' });
  writeRandomCodes('gpt-oss', 'tiny', b, { type: 'MXFP4_MOE' });
  writeRandomCodes('gpt-oss', 'tiny', c, { type: 'MXFP4_MOE', seed: 2 });
  assert.equal(sha256(a), sha256(b));
  assert.notEqual(sha256(a), sha256(c));
});

test('the published shapes: gpt-oss-20b MXFP4_MOE is the published 12.1 GB layout; Qwen3-30B-A3B Q3_K_M fits 16 GiB', () => {
  const f = path.join(dir, 'gpt-oss-20b.gguf');
  const { size } = writeHeaderOnly('gpt-oss', 'gpt-oss-20b', f, { type: 'MXFP4_MOE' }); // sparse: the plan, no data
  const g = readGguf(f);
  fs.rmSync(f);
  assert.ok(Math.abs(size - 12.1e9) < 0.05e9, `size ${size}`);
  for (const t of g.tensors) {
    if (/_exps\.weight$/.test(t.name)) {
      assert.equal(t.type, 39, t.name);
      assert.deepEqual(t.ne, [2880, 2880, 32]);
    } else if (t.ne.length >= 2 && !/ffn_gate_inp|_exps\.bias/.test(t.name)) assert.equal(t.type, 8, t.name);
    else assert.equal(t.type, 0, t.name);
  }
  assert.equal(g.tensors.filter((t) => t.type === 39).length, 24 * 3);
  assert.deepEqual(g.tensors.find((t) => t.name === 'token_embd.weight').ne, [2880, 201088]);

  const q = path.join(dir, 'qwen3-30b-a3b.gguf');
  const { size: qs } = writeHeaderOnly('qwen3moe', 'qwen3-30b-a3b', q, { type: 'Q3_K_M' });
  const h = readGguf(q);
  fs.rmSync(q);
  assert.ok(Math.abs(qs - 14.71e9) < 0.05e9 && qs < 2 ** 34 * 0.9, `size ${qs}`);
  assert.deepEqual(h.tensors.find((t) => t.name === 'blk.0.ffn_down_exps.weight').ne, [768, 2048, 128]);
  // llama.cpp's Q3_K_M: attn_v Q5_K on the first 2 blocks, Q4_K after; ffn_down(_exps) Q5_K on the
  // first n/16, Q4_K after; attn_output Q4_K; output Q6_K; the rest Q3_K; norms and routers F32
  assert.deepEqual(byType(h), { 0: 48 * 5 + 1, 11: 1 + 48 * 4, 12: 46 + 48 + 45, 13: 2 + 3, 14: 1 });
});
