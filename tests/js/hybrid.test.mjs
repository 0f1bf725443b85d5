// tests/js/hybrid.test.mjs — the hybrid architectures (qwen35: Gated DeltaNet + gated attention;
// lfm2: short convolutions + GQA) through the JS engine, on the synthesizer's tiny models
// (tools/synth_gguf.mjs, cached under build/synth; llama.cpp's numbers on the same files are
// tests/js/oracle.test.mjs's): the recurrent state in info and kvStats as the published
// formula gives it, a chat whose second turn resumes from the state kept at the first prompt's
// end and answers as a fresh engine does (Qwen3.5's real template, thinking on and off),
// generateBatch equal to one generation per prompt, and context shift refused naming the
// recurrent state.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { createEngine } from '../../js/wasmlm.js';
import { REPO } from './_helpers.mjs';
import { synthCached, resolveShape } from '../../tools/synth_gguf.mjs';

const GREEDY = { temperature: 0, maxTokens: 8 };
const QWEN35_TEMPLATE = fs.readFileSync(path.join(REPO, 'tests/reference/templates/qwen3.5-4b.jinja'), 'utf8');

/** What Qwen3.5's template writes for a system and a user message, without the generation
 *  prompt (the template read by hand). */
const QWEN35_HEAD = (conv) => conv.map((m) => `<|im_start|>${m.role}\n${m.content}<|im_end|>\n`).join('');

const collect = async (it) => { const out = []; for await (const t of it) out.push(t); return out; };

/** One sequence's recurrent state in bytes, from the synthesizer's shape (archs-2026.md 1.4 and
 *  2.4): each recurrent layer's conv rows, and DeltaNet's HV matrices of S × S. */
function stateBytes(arch, s) {
  if (arch === 'qwen35') {
    const kinds = s.recurrent ?? Array.from({ length: s.L }, (_, l) => (l + 1) % s.interval !== 0);
    const rec = kinds.filter(Boolean).length;
    const C = 2 * s.HK * s.S + s.HV * s.S;
    return 4 * rec * ((s.K - 1) * C + s.HV * s.S * s.S);
  }
  const rec = s.kv.filter((k) => k === 0).length;
  return 4 * rec * (s.Lc - 1) * s.D;
}

for (const arch of ['qwen35', 'lfm2']) {
  test(`${arch}: the recurrent state in info and kvStats, context shift refused`, async () => {
    const file = synthCached({ arch, shape: 'tiny' });
    const engine = await createEngine({ threads: 1 });
    try {
      await engine.load({ model: file });
      const info = engine.info;
      assert.equal(info.architecture, arch);
      assert.ok(info.attnLayers > 0 && info.attnLayers < info.nLayers, `attnLayers ${info.attnLayers} of ${info.nLayers}`);
      assert.equal(info.stateBytes, stateBytes(arch, resolveShape(arch, 'tiny')));
      let kv = await engine.kvStats();
      assert.equal(kv.stateBytes, info.stateBytes);
      assert.equal(kv.states, 0);
      await collect(engine.generate('Once upon a time', GREEDY));
      kv = await engine.kvStats();
      assert.equal(kv.states, 1);
      assert.ok(kv.stateBytesAllocated >= 2 * info.stateBytes, 'the state and its snapshot at the prompt\'s end');
      assert.ok(kv.contextBytes >= kv.stateBytesAllocated);
      await assert.rejects(collect(engine.generate('Once upon a time', { ...GREEDY, contextShift: true })),
        (e) => e.code === 'WLM_ERR_UNSUPPORTED' && /recurrent/.test(e.message));
      await assert.rejects(collect(engine.generate('Once upon a time', { ...GREEDY, stateCheckpoint: -1 })),
        (e) => e.code === 'WLM_ERR_INVALID_ARG' && /^stateCheckpoint must be >= 0/.test(e.message));
    } finally {
      engine.free();
    }
  });

  test(`${arch}: generateBatch equals one generation per prompt`, async () => {
    const file = synthCached({ arch, shape: 'tiny' });
    const engine = await createEngine({ threads: 1 });
    try {
      await engine.load({ model: file, nSeqMax: 3 });
      const prompts = ['The quick brown fox', 'Once upon a time', 'def add(a, b):'];
      const batch = await engine.completeBatch(prompts, GREEDY);
      for (let i = 0; i < prompts.length; i++) {
        const one = await engine.complete(prompts[i], GREEDY);
        const seq = batch.sequences.find((q) => q.promptIndex === i);
        assert.equal(seq.text, one.text, `prompt ${i}`);
        assert.equal(seq.nGenerated, GREEDY.maxTokens);
      }
    } finally {
      engine.free();
    }
  });
}

for (const thinking of [false, true]) {
  test(`qwen35 chat (Qwen3.5's template, thinking ${thinking ? 'on' : 'off'}): turn 2 resumes from the kept state, equal to a fresh engine`, async () => {
    const file = synthCached({ arch: 'qwen35', shape: 'tiny' });
    const engine = await createEngine({ threads: 1 });
    const fresh = await createEngine({ threads: 1 });
    try {
      await engine.load({ model: file });
      await fresh.load({ model: file });
      const opts = { ...GREEDY, maxTokens: 12, chatTemplate: QWEN35_TEMPLATE, templateVariables: { enable_thinking: thinking } };
      const conv = [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Name a colour.' }];
      await collect(engine.chat(conv, opts));
      const r1 = engine.lastResult;
      assert.equal(r1.nCached, 0);
      const conv2 = [...conv, { role: 'assistant', content: r1.text }, { role: 'user', content: 'And another?' }];
      const t2 = await collect(engine.chat(conv2, opts));
      const r2 = engine.lastResult;
      // Qwen3.5's template renders the earlier answer without the generation prompt's
      // <think> block, so the prompts diverge right after "<|im_start|>assistant\n": the state
      // resumes from the checkpoint chat() asked for where the first user turn ends (without
      // it, from position 0); the few tokens after it are prefilled again
      const head = await engine.tokenize(QWEN35_HEAD(conv), { bos: false, parseSpecial: true });
      assert.equal(r2.nCached, head.length, `turn 2 resumed at ${r2.nCached}, the first turn ends at ${head.length}`);
      assert.ok(r2.nCached > 0 && r2.nCached < r1.nPrompt);
      const f2 = await collect(fresh.chat(conv2, { ...opts, cachePrompt: false }));
      assert.equal(fresh.lastResult.nCached, 0);
      assert.deepEqual(t2.map((t) => [t.id, t.logprob]), f2.map((t) => [t.id, t.logprob]));
    } finally {
      engine.free();
      fresh.free();
    }
  });
}
