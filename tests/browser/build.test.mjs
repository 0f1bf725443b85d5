// build.test.mjs — the relaxed-SIMD build in Chromium: the loader picks it by default (Chromium
// has relaxed SIMD and passes the known-answer probe), in the page's own engine and in a worker
// engine; it downloads only that build; forcing 'simd128' is honoured; and its logits are
// bitwise the SIMD128 build's on quantized models (synthetic Q8_0, Q4_0, Q4_K GGUFs written
// here by tools/synth.mjs: prefill through the batched products, then a decode step).
//
//   node --test tests/browser/

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { writeSyntheticGguf } from '../../tools/synth.mjs';
import { MODELS, REPO, STEP_TIMEOUT, startTestServer, launch, loadOutcome } from './_helpers.mjs';

const TYPES = ['Q8_0', 'Q4_0', 'Q4_K'];
const SHAPE = { dim: 256, hiddenDim: 768, nLayers: 2, nHeads: 4, nKvHeads: 2, vocabSize: 512, seqLen: 128 };
const built = fs.existsSync(path.join(REPO, 'dist/wasmlm-relaxed.wasm'));
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-build-'));
const files = {};
let browser = null;

before(async () => {
  if (!built) return;
  for (const type of TYPES) {
    const out = path.join(dir, `${type}.gguf`);
    await writeSyntheticGguf({ shape: SHAPE, out, type, tokenizer: path.join(MODELS, 'tok512.bin'), seed: 5 });
    files[`/synthetic/${type}.gguf`] = out;
  }
  browser = await launch();
});

after(async () => {
  await browser?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

test('Chromium runs the relaxed build by default, bitwise the SIMD128 logits; simd128 can be forced',
  { timeout: 4 * STEP_TIMEOUT, skip: !built && 'dist/wasmlm-relaxed.wasm not built' }, async () => {
    const server = await startTestServer({ files });
    try {
      const { page } = browser;
      await page.goto(server.url);
      const out = await loadOutcome(page);
      assert.equal(out.state, 'ready', out.text);
      // the page's engine (a worker engine, threads on this isolated page) fetched the relaxed twin
      const mt = server.count('/dist/wasmlm-relaxed-mt.wasm') + server.count('/dist/wasmlm-relaxed.wasm');
      assert.ok(mt >= 1, 'the page fetched a relaxed build');
      assert.equal(server.count('/dist/wasmlm.wasm') + server.count('/dist/wasmlm-mt.wasm'), 0,
        'and no SIMD128 build');
      const r = await page.evaluate(async (types) => {
        const { createEngine, createWorkerEngine } = await import('../js/wasmlm.js');
        const { relaxedSupport } = await import('../js/runtime/wasm.js');
        const prompt = [1, 403, 407, 261, 378, 500, 7, 99, 260, 311];
        const res = { support: relaxedSupport(), types: {} };
        const logits = async (make, model) => {
          const e = await make();
          try {
            const info = await e.load({ model, nCtx: 64 });
            const pre = await e.evalTokens(prompt);
            const dec = await e.evalTokens([7]);
            return { build: info.build, bits: [...new Uint32Array(pre.buffer), ...new Uint32Array(dec.buffer)] };
          } finally {
            await e.free();
          }
        };
        for (const type of types) {
          const model = await (await fetch(`/synthetic/${type}.gguf`)).arrayBuffer();
          const a = await logits(() => createEngine({ threads: 1 }), model.slice(0));
          const b = await logits(() => createEngine({ threads: 1, build: 'simd128' }), model.slice(0));
          // the worker engine (no evalTokens): sampled tokens and their probabilities
          const gen = async (make) => {
            const e = await make();
            try {
              const info = await e.load({ model: model.slice(0), nCtx: 64 });
              const toks = [];
              for await (const t of e.generate('Once upon a time', { temperature: 0.9, seed: 3, maxTokens: 12, nProbs: 3 })) toks.push(t);
              return { build: info.build, toks: JSON.stringify(toks) };
            } finally {
              await e.free();
            }
          };
          const w = await gen(() => createWorkerEngine({ threads: 1 }));
          const ws = await gen(() => createEngine({ threads: 1, build: 'simd128' }));
          res.types[type] = { builds: [a.build, b.build, w.build], n: a.bits.length,
            same: a.bits.every((v, i) => v === b.bits[i]), sameWorker: w.toks === ws.toks };
        }
        return res;
      }, TYPES);
      assert.equal(r.support.ok, true, r.support.why);
      for (const type of TYPES) {
        const x = r.types[type];
        assert.deepEqual(x.builds, ['relaxed', 'simd128', 'relaxed'], type);
        assert.equal(x.n, 2 * 512, type);
        assert.ok(x.same, `${type}: relaxed logits differ from SIMD128's`);
        assert.ok(x.sameWorker, `${type}: the worker engine's logits differ`);
      }
      browser.assertNoProblems();
    } finally {
      await server.close();
    }
  });
