// tests/js/tool_calls_fuzz.test.mjs — the tool-call parser under fuzz/fuzz_tool_calls.mjs's loop,
// from a fixed seed for a fixed number of inputs (about 2 s), plus its saved regressions: no
// exception, no hang, split parses equal whole ones, calls well-formed when no error is reported.
// `node fuzz/fuzz_tool_calls.mjs -max_total_time=600` runs it longer, from a random seed.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CORPUS, check, fuzz, rng } from '../../fuzz/fuzz_tool_calls.mjs';

test('every corpus input passes the checks, split at every point', () => {
  for (const text of CORPUS) check(text, rng(7));
});

test('fuzz: 400 mutated inputs from seed 1 (and the saved regressions)', () => {
  const res = fuzz({ seed: 1, runs: 400 });
  assert.equal(res.failure, undefined, res.failure && `${res.failure.message}\ninput: ${JSON.stringify(res.failure.text).slice(0, 500)}`);
  assert.equal(res.runs, 400);
});
