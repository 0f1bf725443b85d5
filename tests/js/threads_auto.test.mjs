// threads_auto.test.mjs — the 'auto' thread count (js/runtime/wasm.js autoThreads, issue 25): every
// core up to 16 (WLM_MAX_THREADS); in a browser with more than 4 cores one core is left to the
// page's main thread; and what createEngine() resolves 'auto' to here.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import os from 'node:os';
import { autoThreads, planModule } from '../../js/runtime/wasm.js';

test('the rule: cores up to 16, a browser past 4 cores leaves one', () => {
  const cases = [[1, 1, 1], [2, 2, 2], [4, 4, 4], [5, 5, 4], [8, 8, 7], [16, 16, 15], [17, 16, 16], [64, 16, 16], [0, 1, 1]];
  for (const [cores, node, browser] of cases) {
    assert.equal(autoThreads(cores, false), node, `Node, ${cores} cores`);
    assert.equal(autoThreads(cores, true), browser, `browser, ${cores} cores`);
  }
});

test("planModule resolves 'auto' to the rule on this machine", async () => {
  const cores = os.availableParallelism?.() ?? os.cpus().length;
  const plan = await planModule({ build: 'simd128' });
  assert.equal(plan.threads, autoThreads(cores, false));
  assert.equal(plan.explicitThreads, false);
});
