// The hybrid architectures on the WebGPU backend (Dawn: lavapipe or SwiftShader,
// tests/js/_webgpu.mjs), against the CPU engine on the synthesizer's tiny models: qwen35 (Gated
// DeltaNet layers, gated attention every 4th) and lfm2 (short convolutions, GQA). The GPU's
// logits over a prefill through the tiled matrix-matrix kernel and greedy decode steps within the
// other architectures' tolerance (webgpu_engine.test.mjs: 1e-3 relative to 1 + max |logit|), the
// greedy ids equal up to a near-tie; generate() with prompt-cache reuse (a prompt extending the
// last one resumes on the GPU state; a divergence makes the backend replay the kept tokens);
// a chat of two turns (Qwen3.5's template, whose second prompt diverges inside the first);
// generateBatch (each sequence its state block) and beam search (forks copy the state);
// openBatch (sequences joining and leaving a running batch on the GPU).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { assertGpuTracksCpu, dawn, withGpuPair } from './_webgpu.mjs';
import { synthCached } from '../../tools/synth_gguf.mjs';
import { MATMAT_MIN_ENT } from '../../js/backend/webgpu/wgsl_matmat.js';
import { REPO } from './_helpers.mjs';

const { gpu, skip: why } = await dawn();
const skip = why || false;
const TOL = 1e-3;
const LONG_PROMPT = 'Once upon a time there was a little girl who lived in a village near the woods';
const QWEN35_TEMPLATE = fs.readFileSync(path.join(REPO, 'tests/reference/templates/qwen3.5-4b.jinja'), 'utf8');

const collect = async (it) => { const out = []; for await (const t of it) out.push(t); return out; };

const withPair = (file, opts, fn) => withGpuPair(gpu, file, opts, fn);

for (const arch of ['qwen35', 'lfm2']) {
  const file = () => synthCached({ arch, shape: 'tiny' });

  test(`${arch}: GPU logits match the CPU's over a prefill and 6 decode steps, greedy ids equal up to a near-tie`, { skip }, async () => {
    await withPair(file(), { kvType: 'f32' }, async (cpu, g) => {
      const ids = Array.from(await cpu.tokenize(LONG_PROMPT));
      assert.ok(ids.length >= MATMAT_MIN_ENT, `${ids.length} prompt tokens: the tiled kernel is not used`);
      await assertGpuTracksCpu(cpu, g, ids, { tol: TOL });
    });
  });

  test(`${arch}: generate() on the GPU with prompt-cache reuse (an extension resumes, a divergence replays) as the CPU engine`, { skip }, async () => {
    await withPair(file(), { kvType: 'f32' }, async (cpu, g) => {
      const run = async (e, prompt, params) => ({ ids: (await collect(e.generate(prompt, params))).map((t) => t.id), ...e.lastResult });
      const p = { temperature: 0, maxTokens: 6, cachePrompt: true };
      for (const prompt of ['Once upon a time', 'Once upon a time there was a', 'Once upon a dog', 'The quick brown fox']) {
        const a = await run(cpu, prompt, p), b = await run(g, prompt, p);
        assert.deepEqual(b.ids, a.ids, `prompt ${JSON.stringify(prompt)}`);
      }
      // an extension of the last prompt: the GPU resumes on its state (positions reused)
      const b = await run(g, 'The quick brown fox jumps', p);
      assert.ok(b.nCached > 0, 'no positions reused');
      assert.deepEqual(b.ids, (await run(cpu, 'The quick brown fox jumps', p)).ids);
    });
  });

  test(`${arch}: generateBatch on the GPU (each sequence its state block) and beam search (forks copy the state) as the CPU engine`, { skip }, async () => {
    await withPair(file(), { kvType: 'f32' }, async (cpu, g) => {
      const prompts = ['Once upon a time', 'The little dog ran', LONG_PROMPT, 'Once upon a time'];
      const run = async (e, params) => {
        const ids = prompts.map(() => []);
        for await (const t of e.generateBatch(prompts, params)) if (!t.stopReason) ids[t.seq].push(t.id);
        return ids;
      };
      const params = { temperature: 0, maxTokens: 8 };
      assert.deepEqual(await run(g, params), await run(cpu, params));
      const a = await cpu.beamSearch('Once upon a time', { width: 3, maxTokens: 6 });
      const b = await g.beamSearch('Once upon a time', { width: 3, maxTokens: 6 });
      assert.deepEqual(b.beams.map((x) => x.tokens), a.beams.map((x) => x.tokens));
    });
  });
}

test('openBatch on the GPU (continuous batching, deferred: a joining prompt in a step\'s batch; a slot reused from position 0, its state zeroed) as the CPU engine', { skip }, async () => {
  for (const arch of ['qwen35', 'lfm2']) {
    await withPair(synthCached({ arch, shape: 'tiny' }), { kvType: 'f32', nSeqMax: 2 }, async (cpu, g) => {
      const run = async (e) => {
        const b = await e.openBatch({ maxSequences: 2 });
        const p = { temperature: 0, maxTokens: 8 };
        const ids = (seq) => collect(seq).then((ts) => ts.filter((t) => !t.stopReason).map((t) => t.id));
        const first = b.add('Once upon a time', p);
        const it = first[Symbol.asyncIterator]();
        const head = [(await it.next()).value.id, (await it.next()).value.id]; // running
        const other = b.add('The little dog ran', { ...p, maxTokens: 0 }); // joins
        const got = [];
        await assert.rejects(async () => {
          for await (const t of other) { got.push(t.id); if (got.length === 3) other.cancel(); } // leaves
        }, { name: 'AbortError' });
        const out = { a: [...head, ...(await ids({ [Symbol.asyncIterator]: () => it }))] };
        out.b = got;
        out.c = await ids(b.add(LONG_PROMPT, p)); // the freed slot, from position 0
        await b.close();
        return out;
      };
      const a = await run(cpu).catch((e) => e);
      assert.equal(a.b?.length, 3, String(a));
      assert.deepEqual(await run(g), a, arch);
    });
  }
});

test('qwen35 chat of two turns on the GPU (Qwen3.5\'s template: the second prompt diverges inside the first, the GPU replays) as the CPU engine', { skip }, async () => {
  await withPair(synthCached({ arch: 'qwen35', shape: 'tiny' }), { kvType: 'f32' }, async (cpu, g) => {
    const opts = { temperature: 0, maxTokens: 10, chatTemplate: QWEN35_TEMPLATE, templateVariables: { enable_thinking: false } };
    const conv = [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Name a colour.' }];
    const a1 = await collect(cpu.chat(conv, opts)), b1 = await collect(g.chat(conv, opts));
    assert.deepEqual(b1.map((t) => t.id), a1.map((t) => t.id));
    const conv2 = [...conv, { role: 'assistant', content: cpu.lastResult.text }, { role: 'user', content: 'And another?' }];
    const a2 = await collect(cpu.chat(conv2, opts)), b2 = await collect(g.chat(conv2, opts));
    assert.deepEqual(b2.map((t) => t.id), a2.map((t) => t.id));
    for (let i = 0; i < a2.length; i++) assert.ok(Math.abs(a2[i].logprob - b2[i].logprob) <= 1e-3, `token ${i}: ${b2[i].logprob} vs ${a2[i].logprob}`);
  });
});
