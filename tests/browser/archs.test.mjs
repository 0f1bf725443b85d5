// archs.test.mjs — Node and Chromium give the same tokens on every architecture (issue 13): the
// tiny synthetic GGUF of each architecture tools/synth_gguf.mjs writes (llama, qwen2, qwen3,
// gemma3, phi3, gpt2), in Q8_0 and Q4_K_M (K-quants plus the fallback types Q5_0 / Q5_1 / Q8_0 of
// its narrow rows; gpt2 and phi3 take the Q4_1/Q5_1 x Q8_1 path) — the types whose kernels
// differ between the two builds but not their bits (F32's relaxed kernels fuse multiply-adds:
// not bitwise SIMD128's, tests/c/test_kernels.c bounds them) —
// run greedily for 16 steps on
// three prompts by js/wasmlm.js in this Node process and in headless Chromium's page (where the
// loader picks the relaxed-SIMD build when the browser has it, Node the SIMD128 one): the same
// token ids and bitwise-equal top-10 log-probabilities at every step. The Q4_K_M files need the
// native CLI (build/native/wasmlm, as tests/js/oracle.test.mjs); without it the test is skipped.
//
//   node --test tests/browser/archs.test.mjs

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { createEngine } from '../../js/wasmlm.js';
import { ARCHS, synthCached } from '../../tools/synth_gguf.mjs';
import { REPO, STEP_TIMEOUT, startTestServer, launch } from './_helpers.mjs';

const CLI = process.env.WASMLM_CLI || path.join(REPO, 'build/native/wasmlm');
const HAVE_CLI = fs.existsSync(CLI);
const TYPES = ['Q8_0', 'Q4_K_M'];
const PROMPTS = ['Once upon a time', 'The quick brown fox jumps over', 'A'];
const OPTIONS = { temperature: 0, maxTokens: 16, nProbs: 10, repeatPenalty: 1 };
const files = {};
const cases = [];
let browser = null;

before(async () => {
  if (!HAVE_CLI) return;
  for (const arch of ARCHS)
    for (const type of TYPES) {
      const file = synthCached({ arch, type, cli: CLI });
      const url = `/synthetic/${arch}-${type}.gguf`;
      files[url] = file;
      cases.push({ arch, type, file, url });
    }
  browser = await launch();
});

after(() => browser?.close());

/** Greedy continuations of every prompt: [[{id, top: [[id, logprob], ...]}, ...], ...]. */
async function runNode(file) {
  const e = await createEngine({ threads: 1 });
  try {
    await e.load({ model: file, nCtx: 512 });
    const out = [];
    for (const p of PROMPTS) {
      const steps = [];
      for await (const t of e.generate(p, OPTIONS))
        if (t.id >= 0) steps.push({ id: t.id, top: t.top.map((a) => [a.id, a.logprob]) });
      out.push(steps);
    }
    return out;
  } finally {
    e.free();
  }
}

test('every architecture: Node and Chromium give the same greedy tokens and log-probabilities',
  { timeout: 4 * STEP_TIMEOUT, skip: HAVE_CLI ? false : `no ${CLI} to quantize the files` }, async () => {
    const server = await startTestServer({ files });
    try {
      const { page } = browser;
      // any document of the server's origin will do (not the demo page: it loads a model)
      await page.goto(`${server.origin}/js/wasmlm.js`);
      // Chromium's run goes on in its own processes while this one computes Node's (the loads of
      // the 128k-262k-token vocabularies dominate both)
      const t0 = Date.now();
      let t1 = 0;
      const browserRun = page.evaluate(async ({ urls, prompts, options }) => {
        const { createEngine } = await import('/js/wasmlm.js');
        const res = {};
        for (const url of urls) {
          const model = await (await fetch(url)).arrayBuffer();
          const e = await createEngine({ threads: 1 });
          try {
            const info = await e.load({ model, nCtx: 512 });
            const out = [];
            for (const p of prompts) {
              const steps = [];
              for await (const t of e.generate(p, options))
                if (t.id >= 0) steps.push({ id: t.id, top: t.top.map((a) => [a.id, a.logprob]) });
              out.push(steps);
            }
            res[url] = { build: info.build, out };
          } finally {
            await e.free();
          }
        }
        return res;
      }, { urls: cases.map((c) => c.url), prompts: PROMPTS, options: OPTIONS }).finally(() => { t1 = Date.now(); });
      const node = [];
      for (const c of cases) node.push(await runNode(c.file));
      const t2 = Date.now();
      const inBrowser = await browserRun;
      for (const [k, c] of cases.entries()) {
        const mine = node[k];
        const theirs = inBrowser[c.url];
        assert.ok(theirs, `${c.arch} ${c.type}: no result from Chromium`);
        for (let i = 0; i < PROMPTS.length; i++) {
          assert.ok(mine[i].length > 0, `${c.arch} ${c.type} "${PROMPTS[i]}": no tokens`);
          for (let s = 0; s < Math.max(mine[i].length, theirs.out[i].length); s++)
            assert.deepEqual(theirs.out[i][s], mine[i][s],
              `${c.arch} ${c.type} "${PROMPTS[i]}" step ${s}: Chromium (${theirs.build}) differs from Node`);
        }
      }
      console.log(`# ${cases.length} files (${TYPES.join(', ')}) x ${PROMPTS.length} prompts x ${OPTIONS.maxTokens} steps: ` +
        `Chromium's build ${[...new Set(Object.values(inBrowser).map((r) => r.build))].join(', ')}, identical to Node ` +
        `(Chromium ${t1 - t0} ms, Node ${t2 - t0} ms, side by side)`);
      browser.assertNoProblems(/favicon\.ico/);
    } finally {
      await server.close();
    }
  });
