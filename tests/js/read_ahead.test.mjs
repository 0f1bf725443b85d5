// read_ahead.test.mjs — EngineOptions.readAhead (issue 25): the quantized matrix-vector kernels
// with and without their read-ahead (wlm_context_params.read_ahead, js/runtime/read_ahead.js). Forcing
// each gives bitwise the same logits (prefill, then decode) and tokens on the quantized weight
// types; 'auto' times the two over the first decode steps after a load() and keeps the faster,
// as its own timings say (LastResult.readAhead), timing again after the next load(); the
// tuner's rule itself on made-up step times; another value is WLM_ERR_INVALID_ARG.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createEngine, WasmlmError } from '../../js/wasmlm.js';
import { READ_AHEAD_MARGIN, READ_AHEAD_SAMPLES, READ_AHEAD_WARMUP, ReadAheadTuner } from '../../js/runtime/read_ahead.js';
import { writeSyntheticGguf } from '../../tools/synth.mjs';
import { TOKENIZER } from './_helpers.mjs';

// rows of 256 and 768 columns (K-quant blocks), GQA, tok512's vocabulary
const SHAPE = { dim: 256, hiddenDim: 768, nLayers: 2, nHeads: 4, nKvHeads: 2, vocabSize: 512, seqLen: 128 };
const PROMPT = [1, 403, 407, 261, 378, 500, 7, 99, 260, 311, 42, 17];

let dir;
before(() => { dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-readahead-')); });
after(() => fs.rmSync(dir, { recursive: true, force: true }));

async function model(type) {
  const out = path.join(dir, `${type}.gguf`);
  if (!fs.existsSync(out)) await writeSyntheticGguf({ shape: SHAPE, out, type, tokenizer: TOKENIZER, seed: 5 });
  return out;
}

test('readAhead true and false: bitwise the same logits and tokens on the quantized types', async () => {
  for (const type of ['Q8_0', 'Q4_0', 'Q4_1', 'Q5_0', 'Q4_K', 'Q6_K', 'MXFP4']) {
    const file = await model(type);
    const runs = [];
    for (const readAhead of [true, false]) {
      const e = await createEngine({ threads: 1, readAhead });
      try {
        await e.load({ model: file, nCtx: 64 });
        const pre = await e.evalTokens(PROMPT);
        const dec = await e.evalTokens([pre.indexOf(Math.max(...pre))]);
        const r = await e.complete('Once upon a time', { maxTokens: 12, temperature: 0 });
        assert.deepEqual(r.readAhead, { mode: readAhead, chosen: readAhead, onMs: null, offMs: null });
        runs.push({ pre, dec, text: r.text });
      } finally {
        await e.free();
      }
    }
    assert.deepEqual(runs[1].pre, runs[0].pre, `${type}: prefill logits`);
    assert.deepEqual(runs[1].dec, runs[0].dec, `${type}: decode logits`);
    assert.equal(runs[1].text, runs[0].text, `${type}: tokens`);
  }
});

test("readAhead 'auto': the first decode steps after a load time both, the faster is kept as its timings say, and the next load times again", async () => {
  const file = await model('Q4_K');
  const e = await createEngine({ threads: 1 });
  try {
    await e.load({ model: file, nCtx: 128 });
    await e.complete('Once upon a time', { maxTokens: 4, temperature: 0 });
    assert.equal(e.lastResult.readAhead.chosen, null, 'still timing after 3 decode steps');
    const steps = 1 + READ_AHEAD_WARMUP + 2 * READ_AHEAD_SAMPLES;
    const r = await e.complete('Once upon a time', { maxTokens: steps, temperature: 0, bannedTokens: [2] });
    const { mode, chosen, onMs, offMs } = r.readAhead;
    assert.equal(mode, 'auto');
    assert.ok(onMs > 0 && offMs > 0, JSON.stringify(r.readAhead));
    assert.equal(chosen, !(offMs * READ_AHEAD_MARGIN < onMs), `chosen ${chosen} with on ${onMs} ms, off ${offMs} ms`);
    await e.load({ model: file, nCtx: 128 });
    assert.equal((await e.complete('Once', { maxTokens: 2, temperature: 0 })).readAhead.chosen, null, 'a new load times again');
  } finally {
    await e.free();
  }
  await assert.rejects(createEngine({ readAhead: 'fast' }),
    (err) => err instanceof WasmlmError && err.code === 'WLM_ERR_INVALID_ARG' && /readAhead/.test(err.message));
});

test('ReadAheadTuner: warm-up steps not counted, steps alternate, off kept only when its median is the margin faster', () => {
  const feed = (t, on, off) => {
    let chose = false;
    for (let i = 0; !chose && i < 100; i++) {
      const ahead = t.current;
      chose = t.record(ahead, ahead ? on : off);
    }
    return chose;
  };
  const a = new ReadAheadTuner('auto');
  assert.equal(a.tuning, true);
  assert.deepEqual([a.current, (a.record(true, 1), a.current)], [true, false], 'alternates');
  a.reset();
  assert.ok(feed(a, 10, 9), 'chose');
  assert.deepEqual(a.state, { mode: 'auto', chosen: false, onMs: 10, offMs: 9 });
  const b = new ReadAheadTuner('auto');
  feed(b, 10, 10 / READ_AHEAD_MARGIN + 0.01); // off faster, but within the margin
  assert.equal(b.state.chosen, true);
  const c = new ReadAheadTuner('auto'); // the warm-up steps' times do not count
  for (let i = 0; i < READ_AHEAD_WARMUP; i++) c.record(c.current, c.current ? 1 : 1000);
  feed(c, 10, 9);
  assert.equal(c.state.chosen, false);
  for (const mode of [true, false]) {
    const f = new ReadAheadTuner(mode);
    assert.deepEqual([f.tuning, f.current, f.record(!mode, 1)], [false, mode, false]);
  }
});
