// tests/js/loader_errors.test.mjs — malformed files of the 2026 architectures through the JS
// engine: the tiny synthesized Gemma 4, mixture-of-experts and hybrid models
// (tools/synth_gguf.mjs) with one key or tensor made wrong at a time — per-layer arrays of the
// wrong length or with values that do not fit together, shared-KV layers reading a cache of
// another shape, a per-layer embedding table too large, expert counts and widths out of range,
// 3-D expert tensors of the wrong shape, DeltaNet head counts that do not divide. Each is refused
// with the status and a message naming the key or tensor at fault (src/model/gguf_hparams.c,
// gguf_weights.c, gguf_tensors.c), and the engine that refused it then loads the intact file and
// generates: a refused file loses nothing. (The fuzzers mutate such files at random:
// fuzz/fuzz_model.c; these are the cases named one by one.)

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createEngine } from '../../js/wasmlm.js';
import { writeF32 } from '../../tools/synth_gguf.mjs';

const DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-loader-errors-'));
test.after(() => fs.rmSync(DIR, { recursive: true, force: true }));

/** The description's key `name` ([key, type, value]): its entry, to change in place. */
function keyOf(m, name) {
  const e = m.kv.find(([k]) => k === name);
  assert.ok(e, `the synthesized file has ${name}`);
  return e;
}
const setKey = (name, type, value) => (m) => { const e = keyOf(m, name); e[1] = type; e[2] = value; };
const dropTensor = (name) => (m) => {
  const i = m.tensors.findIndex((t) => t.name === name);
  assert.ok(i >= 0, `the synthesized file has ${name}`);
  m.tensors.splice(i, 1);
};
const reshape = (name, ne) => (m) => {
  const t = m.tensors.find((x) => x.name === name);
  assert.ok(t, `the synthesized file has ${name}`);
  t.ne = ne;
};

// [architecture, what is wrong, edit, status, message]
const CASES = [
  ['gemma4', 'head_count_kv with 7 entries for 8 layers', (m) => { const e = keyOf(m, 'gemma4.attention.head_count_kv'); e[2] = e[2].subarray(0, 7); },
    'WLM_ERR_FORMAT', /gemma4\.attention\.head_count_kv has 7 entries, expected 8/],
  ['gemma4', 'the largest KV head count not dividing the heads', (m) => { keyOf(m, 'gemma4.attention.head_count_kv')[2][1] = 3; },
    'WLM_ERR_FORMAT', /attention\.head_count 4 is not a multiple of head_count_kv 3/],
  ['gemma4', 'another layer\'s KV head count not dividing them', (m) => { const e = keyOf(m, 'gemma4.attention.head_count_kv'); e[2][0] = 4; e[2][1] = 3; },
    'WLM_ERR_FORMAT', /head_count_kv\[1\] = 3 does not divide attention\.head_count 4/],
  ['gemma4', 'a shared layer reading a cache of other KV heads', (m) => { keyOf(m, 'gemma4.attention.head_count_kv')[2][6] = 1; },
    'WLM_ERR_FORMAT', /layer 6 has 1 KV heads but reads the KV cache of layer 4, which has 2/],
  ['gemma4', 'as many shared layers as layers', setKey('gemma4.attention.shared_kv_layers', 'u32', 8),
    'WLM_ERR_FORMAT', /gemma4\.attention\.shared_kv_layers = 8 is outside 0\.\.7/],
  ['gemma4', 'query heads that vary by layer', setKey('gemma4.attention.head_count', 'arr:i32', Int32Array.of(4, 4, 4, 2, 4, 4, 4, 4)),
    'WLM_ERR_UNSUPPORTED', /gemma4\.attention\.head_count differs between layers/],
  ['gemma4', 'an odd rotated width of the sliding layers', setKey('gemma4.rope.dimension_count_swa', 'u32', 7),
    'WLM_ERR_FORMAT', /gemma4\.rope\.dimension_count_swa 7 must be even/],
  ['gemma4', 'sliding-layer key and value widths that differ', setKey('gemma4.attention.value_length_swa', 'u32', 8),
    'WLM_ERR_FORMAT', /key_length_swa 16 and value_length_swa 8 must be equal/],
  ['gemma4', 'no sliding window', setKey('gemma4.attention.sliding_window', 'u32', 0),
    'WLM_ERR_FORMAT', /gemma4 needs gemma4\.attention\.sliding_window > 0/],
  ['gemma4', 'a per-layer embedding table past the bound', setKey('gemma4.embedding_length_per_layer_input', 'u32', 40000),
    'WLM_ERR_FORMAT', /embedding_length_per_layer_input 40000 × 8 layers exceeds 262144/],
  ['gemma4', 'a feed-forward width that is not the tensor\'s', (m) => { keyOf(m, 'gemma4.feed_forward_length')[2][3] = 100; },
    'WLM_ERR_FORMAT', /tensor blk\.3\.ffn_gate\.weight has shape \[64, 128, 1, 1\], expected \[64, 100\]/],
  ['gemma4', 'a layer without its per-layer input gate', dropTensor('blk.2.inp_gate.weight'),
    'WLM_ERR_FORMAT', /lacks tensor blk\.2\.inp_gate\.weight/],
  ['qwen3moe', 'more experts than llama.cpp allows', setKey('qwen3moe.expert_count', 'u32', 600),
    'WLM_ERR_FORMAT', /qwen3moe\.expert_count = 600 is outside 2\.\.512/],
  ['qwen3moe', 'an odd expert width', setKey('qwen3moe.expert_feed_forward_length', 'u32', 31),
    'WLM_ERR_UNSUPPORTED', /an expert's width 31 and embedding_length 64 must be even/],
  ['qwen3moe', 'a 3-D expert tensor with a fourth dimension', reshape('blk.1.ffn_down_exps.weight', [32, 64, 3, 2]),
    'WLM_ERR_FORMAT', /tensor blk\.1\.ffn_down_exps\.weight has shape \[32, 64, 3, 2\], expected \[32, 64, 6\]/],
  ['gpt-oss', 'an expert tensor stored as one matrix', (m) => {
    const t = m.tensors.find((x) => /^blk\.0\.ffn_up_exps\.weight$/.test(x.name));
    t.ne = [t.ne[0], t.ne[1] * t.ne[2]];
  }, 'WLM_ERR_FORMAT', /tensor blk\.0\.ffn_up_exps\.weight has shape .*GGUF order: columns, rows, experts/],
  ['qwen35', 'DeltaNet value heads that are no multiple of the key heads', setKey('qwen35.ssm.time_step_rank', 'u32', 3),
    'WLM_ERR_FORMAT', /qwen35\.ssm: time_step_rank 3 must be a multiple of group_count/],
];

for (const arch of [...new Set(CASES.map(([a]) => a))]) {
  test(`${arch}: each malformed key or tensor refused with its name; the same engine then loads the intact file`, async () => {
    const good = path.join(DIR, `${arch}.gguf`);
    writeF32(arch, 'tiny', good);
    const engine = await createEngine({ threads: 1 });
    try {
      for (const [, what, edit, code, message] of CASES.filter(([a]) => a === arch)) {
        const bad = path.join(DIR, `${arch}-bad.gguf`);
        writeF32(arch, 'tiny', bad, { edit });
        await assert.rejects(engine.load({ model: bad, nCtx: 64 }), (e) => {
          assert.equal(e.code, code, `${what}: ${e.message}`);
          assert.match(e.message, message, what);
          return true;
        }, what);
      }
      const info = await engine.load({ model: good, nCtx: 64 });
      assert.equal(info.architecture, arch);
      let n = 0;
      for await (const t of engine.generate('Once upon a time', { temperature: 0, maxTokens: 4 })) if (t.id >= 0) n++;
      assert.equal(n, 4, 'the intact file generates after the refusals');
    } finally {
      await engine.free();
    }
  });
}
