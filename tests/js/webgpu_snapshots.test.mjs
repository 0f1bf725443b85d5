// webgpu_snapshots.test.mjs — a hybrid's recurrent-state snapshots on the WebGPU backend (issue
// 42; Dawn: lavapipe or SwiftShader, tests/js/_webgpu.mjs), on the synthesizer's tiny qwen35
// and lfm2 models. A recurrent state cannot be cut back, so C keeps snapshot slots (the prompt's
// end, a chat checkpoint, a speculative round's start) and the backend holds their copies on the
// GPU (js/backend/webgpu/state_snapshots.js): a later prompt that diverges restores the latest
// one at or before the divergence and replays only the tokens after it. Each request's tokens
// are compared with a fresh GPU engine's and the CPU engine's (greedy), its nCached with the
// CPU's (the same slots, the same choice), and the entries the GPU ran (every forward-pass
// entry, replays included, counted on GpuForward.run) with the fresh engine's minus nCached:
// without the snapshots the GPU replays from position 0 and that count is off by nCached.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { dawn, withGpuPair } from './_webgpu.mjs';
import { createEngine } from '../../js/wasmlm.js';
import { GpuForward } from '../../js/backend/webgpu/forward.js';
import { synthCached } from '../../tools/synth_gguf.mjs';
import { REPO } from './_helpers.mjs';

const { gpu, skip: why } = await dawn();
const skip = why || false;
const QWEN35_TEMPLATE = fs.readFileSync(path.join(REPO, 'tests/reference/templates/qwen3.5-4b.jinja'), 'utf8');
const LONG_PROMPT = 'Once upon a time there was a little girl who lived in a village near the woods';
const LOAD = { kvType: 'f32' };

// every entry the GPU runs (prompts, replays, decode steps, verifications), all engines together
let entries = 0;
const run = GpuForward.prototype.run;
GpuForward.prototype.run = function (tokens, ...rest) {
  entries += tokens.length;
  return run.call(this, tokens, ...rest);
};

const collect = async (it) => { const out = []; for await (const t of it) out.push(t); return out; };
const idsOf = (tokens) => tokens.filter((t) => !t.stopReason).map((t) => t.id);

async function gpuEngine(file) {
  const e = await createEngine({ threads: 1, backend: 'webgpu', gpu });
  const info = await e.load({ model: file, ...LOAD });
  assert.equal(info.backend, 'webgpu', info.backendReason);
  return e;
}

/** request(e) (a token iterator) on engine e: {ids, r: lastResult, entries: the GPU's}. */
async function measured(e, request) {
  const before = entries;
  const ids = idsOf(await collect(request(e)));
  return { ids, r: e.lastResult, entries: entries - before };
}

/** request on a fresh GPU engine, freed after. */
async function fresh(file, request) {
  const e = await gpuEngine(file);
  try {
    return await measured(e, request);
  } finally {
    await e.free();
  }
}

/** The GPU engine's request `name` against a fresh GPU engine's and the CPU engine's: the same
 *  tokens, nCached as the CPU's, the GPU entries the fresh engine's minus nCached. */
async function check(name, file, g, cpu, request) {
  const got = await measured(g, request);
  const ref = await fresh(file, request);
  const c = await measured(cpu, request);
  assert.deepEqual(got.ids, ref.ids, `${name}: the tokens of a fresh engine`);
  assert.deepEqual(got.ids, c.ids, `${name}: the CPU engine's tokens`);
  assert.equal(ref.r.nCached, 0, `${name}: the fresh engine reused nothing`);
  assert.equal(got.r.nCached, c.r.nCached, `${name}: nCached as the CPU's (its snapshot)`);
  assert.equal(got.entries, ref.entries - got.r.nCached, `${name}: GPU entries (${ref.entries} fresh, nCached ${got.r.nCached})`);
  return got;
}

const withEngines = (file, fn) => withGpuPair(gpu, file, LOAD, (cpu, g) => fn(g, cpu));

for (const arch of ['qwen35', 'lfm2']) {
  const file = () => synthCached({ arch, shape: 'tiny' });

  test(`${arch}: chat() of three turns on the GPU resumes each turn from a snapshot (the checkpoint or the prompt's end), prefills only the rest, answers as a fresh engine per turn`, { skip }, async () => {
    await withEngines(file(), async (g, cpu) => {
      const opts = { temperature: 0, maxTokens: 8, chatTemplate: QWEN35_TEMPLATE, templateVariables: { enable_thinking: false } };
      const users = ['Name a colour.', 'And another?', 'Which of them is darker?'];
      let conv = [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: users[0] }];
      for (let turn = 0; turn < users.length; turn++) {
        const got = await check(`turn ${turn + 1}`, file(), g, cpu, (e) => e.chat(conv, opts));
        if (turn > 0) assert.ok(got.r.nCached > 0, `turn ${turn + 1}: nothing reused`);
        conv = [...conv, { role: 'assistant', content: got.r.text }, { role: 'user', content: users[turn + 1] }];
      }
      // the state and its two snapshots (prompt end, checkpoint), in GPU memory
      const kv = await g.kvStats(), info = g.info;
      assert.equal(kv.states, 1);
      assert.equal(kv.stateBytesAllocated, 3 * info.stateBytes);
      assert.ok(kv.gpuBytes >= info.gpuBytes + 2 * info.stateBytes, `gpuBytes ${kv.gpuBytes} of ${info.gpuBytes} at load`);
    });
  });

  test(`${arch}: generate() on the GPU: a prompt diverging after a stateCheckpoint restores it and replays the tokens after it; one diverging before it replays from 0`, { skip }, async () => {
    await withEngines(file(), async (g, cpu) => {
      const k = 4, p = { temperature: 0, maxTokens: 6, cachePrompt: true };
      const other = 'Once upon a time there was a big dog';
      const [a, b] = [Array.from(await g.tokenize(LONG_PROMPT)), Array.from(await g.tokenize(other))];
      let m = 0;
      while (a[m] === b[m]) m++;
      assert.ok(k < m - 1 && m < a.length, `the prompts share ${m} tokens: not past the checkpoint ${k}`);
      await check('first', file(), g, cpu, (e) => e.generate(LONG_PROMPT, { ...p, stateCheckpoint: k }));
      const second = await check('diverging', file(), g, cpu, (e) => e.generate(other, p));
      assert.equal(second.r.nCached, k, 'restored at the checkpoint');
      const third = await check('diverging before', file(), g, cpu, (e) => e.generate('The quick brown fox', p));
      assert.equal(third.r.nCached, 0);
      // an extension of the last prompt resumes from the snapshot at its end
      const fourth = await check('extension', file(), g, cpu, (e) => e.generate('The quick brown fox jumps', p));
      assert.ok(fourth.r.nCached > 0, 'nothing reused');
    });
  });
}

test('qwen35: speculative decoding on the GPU (a draft of other weights on the CPU): a round\'s rejected drafts are undone from the snapshot at its start, greedy ids plain greedy decoding\'s', { skip }, async () => {
  const file = synthCached({ arch: 'qwen35', shape: 'tiny' });
  const g = await gpuEngine(file);
  try {
    const prompt = `${LONG_PROMPT}. ${LONG_PROMPT}`;
    const greedy = { temperature: 0, maxTokens: 12 };
    const plain = await measured(g, (e) => e.generate(prompt, greedy));
    const spec = await measured(g, (e) => e.generate(prompt, { ...greedy, draft: { model: synthCached({ arch: 'qwen35', shape: 'tiny', seed: 2 }), maxTokens: 4 } }));
    assert.deepEqual(spec.ids, plain.ids);
    const { nPrompt, nGenerated, rounds, drafted, accepted } = spec.r;
    assert.ok(rounds > 0 && accepted < drafted, `rounds ${rounds}, ${accepted} of ${drafted} accepted: no rejection`);
    // beside the prefill (nPrompt) and each round's verification (its pending token and drafts:
    // rounds + drafted), the GPU ran each rejection's replay from the round's start (its
    // accepted tokens and pending one: accepted + rounds at most) and the plain steps
    // (nGenerated at most); a replay from position 0 would cost nPrompt or more alone
    const rest = spec.entries - nPrompt - rounds - drafted, most = accepted + rounds + nGenerated;
    assert.ok(rest <= most, `${rest} GPU entries for replays and plain steps > ${most}`);
    assert.ok(most < nPrompt, `the prompt (${nPrompt} tokens) is too short for the bound ${most} to tell`);
  } finally {
    await g.free();
  }
});
