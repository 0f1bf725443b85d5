// tests/js/oracle.test.mjs — our engine against llama.cpp's own outputs on the same GGUF files:
// the reference records in tests/reference/oracle/ were written by tools/oracle.mjs (llama.cpp
// compiled to wasm by @wllama/wllama, greedy, top-10 next-token log-probabilities at each step).
// For every prompt: the prompt's token count, the top-10 log-probabilities at every step while
// both continuations agree (each within TOL of llama.cpp's, the same ids wherever the 10th and
// 11th candidates are more than TOL apart), and the greedy continuation token for token wherever
// llama.cpp's top-2 margin exceeds 2·TOL (at a nearer tie either choice is right; comparison
// stops there).
//
// Regenerate a record: node tools/oracle.mjs --model FILE --out tests/reference/oracle/NAME.json

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import { createEngine } from '../../js/wasmlm.js';
import { REPO, MODELS } from './_helpers.mjs';

/** Reference records, where their model files are, and the tolerance on log-probabilities. */
const CASES = [
  { record: 'stories260K.json', model: path.join(MODELS, 'stories260K.gguf'), tol: 1e-3 },
  // Both F16 caches: llama.cpp also rounds Q to F16 for its K·Q products (we keep Q in F32).
  { record: 'stories260K-kvf16.json', model: path.join(MODELS, 'stories260K.gguf'), tol: 2e-2 },
];

const sha256 = (file) => crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex');

for (const c of CASES) {
  test(`llama.cpp oracle: ${c.record}`, async () => {
    const ref = JSON.parse(fs.readFileSync(path.join(REPO, 'tests/reference/oracle', c.record), 'utf8'));
    assert.equal(sha256(c.model), ref.model.sha256, `${c.model} is not the file the record was made from`);
    const engine = await createEngine({ threads: 1 });
    await engine.load({ model: c.model, kvType: ref.kvCache }); // the record's KV cache type
    let compared = 0, worst = 0;
    try {
      for (const p of ref.prompts) {
        const ids = await engine.tokenize(p.prompt);
        assert.equal(ids.length, p.nPrompt, `"${p.prompt}": prompt tokens`);
        const got = [];
        for await (const t of engine.generate(p.prompt, {
          temperature: 0, maxTokens: ref.tokens, nProbs: 10, bannedTokens: ref.eog, repeatPenalty: 1,
        })) if (t.id >= 0) got.push(t);
        for (let s = 0; s < p.tokens.length; s++) {
          const theirs = p.top[s], ours = got[s]?.top ?? [];
          assert.ok(got[s], `"${p.prompt}" step ${s}: we stopped early (${engine.lastResult?.stopReason})`);
          const mine = new Map(ours.map((a) => [a.id, a.logprob]));
          for (let k = 0; k < theirs.length; k++) {
            const [id, lp] = theirs[k];
            // above llama.cpp's 10th by more than the tolerance: it must be in our top 10 too
            const clearCut = lp - theirs[theirs.length - 1][1] > c.tol;
            if (!mine.has(id)) {
              assert.ok(!clearCut, `"${p.prompt}" step ${s}: llama.cpp's candidate ${id} (${lp}) is not in our top 10`);
              continue;
            }
            const d = Math.abs(mine.get(id) - lp);
            worst = Math.max(worst, d);
            assert.ok(d <= c.tol, `"${p.prompt}" step ${s}: token ${id} logprob ${mine.get(id)} vs llama.cpp ${lp}`);
            compared++;
          }
          const margin = theirs.length > 1 ? theirs[0][1] - theirs[1][1] : Infinity;
          if (margin <= 2 * c.tol) break; // a near-tie: either continuation is right
          assert.equal(got[s].id, p.tokens[s], `"${p.prompt}" step ${s}: greedy token`);
        }
      }
    } finally {
      engine.free();
    }
    assert.ok(compared >= 10 * ref.prompts.length, `only ${compared} log-probabilities compared`);
    console.log(`# ${c.record}: ${compared} log-probabilities within ${c.tol} (largest difference ${worst.toExponential(2)})`);
  });
}
