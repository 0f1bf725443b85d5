// startup.test.mjs — what happens before the first token: planModule() picks one build from the
// options and the runtime alone (so only that one is fetched), preload() compiles it once for
// every later engine, createEngine({threads}) returns before its helper threads run (the first
// forward passes may run without them, with the same results), and an engine freed while its
// helpers start frees cleanly. adoptCompiled() hands the library a compile started before it was
// loaded (web/index.html's first script, whose inlined probes must be js/runtime/wasm.js's).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import os from 'node:os';
import { createEngine, preload } from '../../js/wasmlm.js';
import fs from 'node:fs';
import {
  RELAXED_PROBE, RELAXED_PROBE_ANSWER, SIMD_PROBE, adoptCompiled, compilePlanned, planModule, relaxedSupport,
} from '../../js/runtime/wasm.js';
import { MODEL, TOKENIZER } from './_helpers.mjs';

const cores = os.availableParallelism();
// the default build: relaxed SIMD where this runtime passes the probe (Node >= 22), else SIMD128
const pre = relaxedSupport().ok && fs.existsSync(new URL('../../dist/wasmlm-relaxed.wasm', import.meta.url))
  ? 'wasmlm-relaxed' : 'wasmlm';

test('planModule picks one build from the options alone', async () => {
  const file = async (o) => (await planModule(o)).file;
  assert.equal(await file({ simd: false }), 'wasmlm-scalar.wasm');
  assert.equal(await file({ threads: 1 }), `${pre}.wasm`);
  assert.equal(await file({}), cores > 1 ? `${pre}-mt.wasm` : `${pre}.wasm`);
  assert.equal(await file({ threads: 2 }), cores > 1 ? `${pre}-mt.wasm` : `${pre}.wasm`);
  const given = await planModule({ wasm: 'x.wasm' });
  assert.equal(given.file, null);
  assert.equal(given.wasm, 'x.wasm');
  assert.equal((await planModule({})).wasm.href, new URL(`../../dist/${await file({})}`, import.meta.url).href);
});

test('preload compiles the picked build once; engines created afterwards use that module', async () => {
  await preload({ threads: 1 });
  const plan = await planModule({ threads: 1 });
  const a = compilePlanned(plan);
  assert.equal(compilePlanned(plan), a, 'the same promise: compiled once');
  assert.ok((await a).module instanceof WebAssembly.Module);
  const e = await createEngine({ threads: 1 });
  await e.load({ model: MODEL, tokenizer: TOKENIZER });
  assert.equal((await e.complete('Once upon a time', { temperature: 0, maxTokens: 4 })).nGenerated, 4);
  await e.free();
});

test('adoptCompiled: a plan picking the adopted file takes its module; a failed one is fetched anew', async () => {
  const scalar = new URL('../../dist/wasmlm-scalar.wasm', import.meta.url);
  const module = await WebAssembly.compile(fs.readFileSync(scalar));
  adoptCompiled('wasmlm-scalar.wasm', Promise.resolve(module));
  const plan = await planModule({ simd: false });
  assert.equal(plan.file, 'wasmlm-scalar.wasm');
  const got = await compilePlanned(plan);
  assert.equal(got.module, module, 'the adopted module, not a second compile');
  assert.equal(got.name, scalar.href);
  adoptCompiled('wasmlm-scalar.wasm', Promise.reject(new Error('ignored: already there')));
  assert.equal((await compilePlanned(plan)).module, module, 'a build already there is kept');
  const e = await createEngine({ simd: false });
  await e.load({ model: MODEL, tokenizer: TOKENIZER });
  assert.equal((await e.complete('Once upon a time', { temperature: 0, maxTokens: 4 })).nGenerated, 4);
  await e.free();

  // A compile that failed (a missing file, a server without application/wasm): the library
  // fetches and compiles the file itself.
  const mt = await planModule({ threads: 2 });
  if (mt.threads > 1) {
    adoptCompiled(mt.file, Promise.reject(new Error('HTTP 404')));
    assert.ok((await compilePlanned(mt)).module instanceof WebAssembly.Module);
  }
  assert.throws(() => adoptCompiled('x.wasm', module), { code: 'WLM_ERR_INVALID_ARG', message: /x\.wasm/ });
});

test("web/index.html's first script inlines js/runtime/wasm.js's probes and known answer", () => {
  const html = fs.readFileSync(new URL('../../web/index.html', import.meta.url), 'utf8');
  const b64 = (bytes) => Buffer.from(bytes).toString('base64');
  assert.ok(html.includes(`bytes('${b64(SIMD_PROBE)}')`), 'the SIMD128 probe');
  assert.ok(html.includes(`bytes('${b64(RELAXED_PROBE)}')`), 'the relaxed-SIMD probe');
  assert.ok(html.includes(`exports.f() === ${RELAXED_PROBE_ANSWER}`), 'its known answer');
});

test('preload rejects as createEngine would', async () => {
  await assert.rejects(preload({ threads: 0 }), { code: 'WLM_ERR_INVALID_ARG', message: /threads/ });
  await assert.rejects(preload({ wasm: '/nonexistent/x.wasm' }), { code: 'WLM_ERR_IO' });
});

test('threads: the engine is returned while the helpers start, generates at once and after', { skip: cores < 2 }, async () => {
  const one = await createEngine({ threads: 1 });
  await one.load({ model: MODEL, tokenizer: TOKENIZER });
  const p = { temperature: 0.8, seed: 3, maxTokens: 30 };
  const want = (await one.complete('Once upon a time', p)).text;
  const e = await createEngine({ threads: 2 });
  assert.equal(e.threads, 2);
  const info = await e.load({ model: MODEL, tokenizer: TOKENIZER });
  assert.equal(info.threads, 2);
  assert.equal((await e.complete('Once upon a time', p)).text, want, 'right after load');
  await e.threadsReady;
  assert.equal((await e.complete('Once upon a time', p)).text, want, 'with the pool');
  assert.equal((await e.completeBatch(['Once upon a time', 'Once upon a time'], p)).sequences[1].text, want);
  await e.free();
  await one.free();
});

test('an engine freed while its helpers start frees cleanly', { skip: cores < 2 }, async () => {
  for (let i = 0; i < 3; i++) {
    const e = await createEngine({ threads: 2 });
    const ready = e.threadsReady;
    await e.free();
    await ready; // they came up and were stopped
    await assert.rejects(e.load({ model: MODEL, tokenizer: TOKENIZER }), { code: 'WLM_ERR_STATE' });
  }
});
