// Images with the text model on the WebGPU backend (Dawn: lavapipe or SwiftShader,
// tests/js/_webgpu.mjs), against the CPU engine, on the synthetic pairs of tools/synth_mmproj.mjs
// (a random-weight mmproj and the tools/synth_gguf.mjs text model it projects to): the GPU
// engine encodes on the GPU (js/backend/webgpu/vision.js; info.vision.encoder 'webgpu'), the CPU
// engine in wasm (a Q8_0 mmproj's reference: its dequantized copy); the GPU writes the rows into its
// pass in place of token embeddings (src/runtime/deferred.c, js/backend/webgpu/forward.js),
// Gemma 3's rows seeing each other both ways (the attention kernel's non-causal span; the
// rows256 pair's 256 rows more than one 32-entry pass holds: the wide pass), Idefics3's causal
// (tiles and overview), LFM2-VL's causal on a recurrent hybrid (its state snapshot before the
// prompt's last token taken inside the recorded batch). With one and with two images in a prompt: the first token's top
// log-probabilities, then the CPU's greedy tokens fed to both (evalTokens) with the logits
// within the other GPU tests' tolerance (1e-3 relative to 1 + max |logit|) and greedy ids equal
// up to a near-tie; F32 and Q8_0 (the CPU reference of a quantized text model is its
// dequantized copy, as webgpu_engine.test.mjs explains), an F32 KV cache. chat()'s second turn
// about the same image reuses its encoding and its KV rows (imagesEncoded 0, nCached past the
// image) and equals the CPU's; generateBatch() with images per sequence (LFM2-VL's hybrid too:
// each media prompt cut before its last token after the GPU ran it, its state restored from the
// snapshot taken there), openBatch()'s first sequence with an image, and sequences with images
// joining openBatch()'s running text sequence (gemma3, LFM2-VL: each joining prompt run on the
// GPU before it joins), the CPU's greedy ids and log-probabilities. Step 0's top log-probabilities within 0.01
// (measured ≤ 3e-3: gemma3-rows256, two images, 525 positions). Qwen2.5-VL (qwen25vl-tiny: a
// qwen2vl text model, M-RoPE) with images whose merged grids are not square (4 × 2 and 2 × 5),
// text after them: its rows turn by their (t, h, w) grid positions and the text after an image
// resumes where the image's span ends, not at its slot (deferred.c's dfr_rpos, forward.js's
// mropeCosSin) — a GPU pass that turned the rows by their slots misses the CPU's logits by far
// more than the tolerance; 'auto' no longer takes the CPU for its images.
import { test } from 'node:test';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import assert from 'node:assert/strict';
import { argmax, dawn, dequantizedCopy, diff, margin } from './_webgpu.mjs';
import { createEngine, WasmlmError } from '../../js/wasmlm.js';
import { MEDIA_MARKER } from '../../js/vision/vision.js';
import { MMPROJ_SHAPES, mmprojBytes, pngBytes, testImage } from '../../tools/synth_mmproj.mjs';
import { synthCached } from '../../tools/synth_gguf.mjs';

const { gpu, skip: why } = await dawn();
const skip = why || false;
const TOL = 1e-3;
const NEAR_TIE = 0.01;
const M = MEDIA_MARKER;

/** The pair `shape` (MMPROJ_SHAPES) of `type`: {text: the GPU's file, ref: the CPU's, mmproj:
 *  the GPU's, mmprojRef: the CPU's}. A quantized file's CPU reference is its dequantized copy,
 *  the mmproj's too: the GPU encoder keeps its activations in floats where the CPU rounds them to
 *  Q8_0 as llama.cpp's CPU does (tests/js/webgpu_vision.test.mjs measures both). */
function pair(shape, type) {
  const s = MMPROJ_SHAPES[shape];
  const text = synthCached({ arch: s.text.arch, shape: s.text.shape, type });
  const mmproj = mmprojBytes({ shape, type, seed: 1 });
  let mmprojRef = mmproj;
  if (type !== 'F32') {
    const file = path.join(os.tmpdir(), `wasmlm-gpu-images-${shape}-${type}.gguf`);
    fs.writeFileSync(file, mmproj);
    mmprojRef = fs.readFileSync(dequantizedCopy(file));
  }
  return { text, ref: type === 'F32' ? text : dequantizedCopy(text), mmproj, mmprojRef };
}

async function engines(p, nCtx = 1024) {
  const cpu = await createEngine({ threads: 1, backend: 'cpu' });
  const g = await createEngine({ threads: 1, backend: 'webgpu', gpu });
  await cpu.load({ model: p.ref, mmproj: p.mmprojRef, nCtx, kvType: 'f32' });
  const info = await g.load({ model: p.text, mmproj: p.mmproj, nCtx, kvType: 'f32' });
  assert.equal(info.backend, 'webgpu', info.backendReason);
  assert.equal(info.vision.encoder, 'webgpu', info.vision.encoderReason); // the GPU encoder (js/backend/webgpu/vision.js)
  assert.equal(cpu.info.vision.encoder, 'cpu');
  return { cpu, g };
}

const image = async (w, h, seed) => pngBytes(testImage(w, h, seed), w, h);

/** The first token's top candidates of a generation (id → logprob) and its tokens. */
async function run(gen) {
  const top = new Map(), ids = [];
  for await (const t of gen) {
    if (t.id < 0) continue;
    if (!ids.length) for (const a of t.top ?? []) top.set(a.id, a.logprob);
    ids.push(t.id);
  }
  return { top, ids };
}

/** Step 0 of the media prompt on both engines (top log-probabilities within `lpTol`), then
 *  `steps` greedy steps of the CPU fed to both: logits within TOL, greedy ids equal. */
async function compare(t, cpu, g, prompt, images, steps = 4, lpTol = 0.01) {
  const params = { images, temperature: 0, maxTokens: 1, nProbs: 20 };
  const a = await run(cpu.generate(prompt, params));
  const ra = cpu.lastResult;
  const b = await run(g.generate(prompt, params));
  const rb = g.lastResult;
  assert.equal(rb.nPrompt, ra.nPrompt, 'prompt positions (text tokens + image rows)');
  let worst = 0;
  for (const [id, lp] of a.top) {
    assert.ok(b.top.has(id), `token ${id} of the CPU's top 20 is not in the GPU's`);
    worst = Math.max(worst, Math.abs(b.top.get(id) - lp));
  }
  assert.ok(worst <= lpTol, `step 0: a top log-probability differs by ${worst}`);
  const sorted = [...a.top.values()].sort((u, v) => v - u);
  if (sorted[0] - sorted[1] >= NEAR_TIE) assert.equal(b.ids[0], a.ids[0], 'step 0: greedy ids differ');
  let id = a.ids[0], checked = 0, worstRel = 0;
  for (let s = 1; s <= steps; s++) {
    const la = await cpu.evalTokens([id]);
    const lb = await g.evalTokens([id]);
    const { d, m } = diff(la, lb);
    worstRel = Math.max(worstRel, d / (1 + m));
    assert.ok(d <= TOL * (1 + m), `step ${s}: max |diff| ${d} > ${TOL} · (1 + ${m})`);
    if (margin(la) >= NEAR_TIE) { assert.equal(argmax(lb), argmax(la), `step ${s}: greedy ids differ`); checked++; }
    id = argmax(la);
  }
  t.diagnostic(`${ra.nPrompt} positions: step 0 worst log-prob error ${worst.toExponential(2)}; ` +
    `steps 1..${steps} worst |diff| / (1 + max |logit|) ${worstRel.toExponential(2)}, ${checked} greedy ids checked`);
  return { ra, rb };
}

const cases = [];
for (const shape of ['gemma3-tiny', 'idefics3-tiny', 'lfm2-tiny', 'qwen25vl-tiny']) for (const type of ['F32', 'Q8_0']) cases.push({ shape, type });
cases.push({ shape: 'gemma3-rows256', type: 'F32' });
// Qwen2.5-VL's images at multiples of 28 pixels (P 14 × merge 2), 8 merged tokens at least:
// 112 × 56 → a grid of 4 columns × 2 rows, 56 × 140 → 2 × 5 (M-RoPE's h and w differ)
const SIZES = { 'qwen25vl-tiny': [[112, 56], [56, 140]] };

for (const { shape, type } of cases) {
  test(`images on WebGPU: ${shape} ${type}: one and two images in a prompt, GPU logits as the CPU's`, { skip, timeout: 600000 }, async (t) => {
    const { cpu, g } = await engines(pair(shape, type));
    try {
      const [[w1, h1], [w2, h2]] = SIZES[shape] ?? [[80, 50], [37, 90]];
      const one = await image(w1, h1, 1), two = await image(w2, h2, 2);
      await compare(t, cpu, g, `Look: ${M} What is this?`, [one]);
      await compare(t, cpu, g, `First ${M} then ${M} tell them apart.`, [one, two]);
    } finally {
      await cpu.free();
      await g.free();
    }
  });
}

test('images on WebGPU: generateBatch() with images per sequence gives the CPU\'s greedy ids and positions (LFM2-VL\'s hybrid too)', { skip, timeout: 600000 }, async () => {
  for (const shape of ['gemma3-tiny', 'idefics3-tiny', 'lfm2-tiny', 'qwen25vl-tiny']) { // (Qwen2.5-VL: each sequence's own M-RoPE positions)
    const { cpu, g } = await engines(pair(shape, 'F32'));
    try {
      const [a, b] = [await image(40, 32, 5), await image(24, 56, 6)];
      const prompts = [`Describe ${M} please.`, `Two: ${M} and ${M}?`, 'No image at all, just text.'];
      const imgs = [[a], [b, a], undefined];
      const params = prompts.map((_, i) => ({ temperature: 0, maxTokens: 6, nProbs: 2, ...(imgs[i] ? { images: imgs[i] } : {}) }));
      const batch = async (e) => {
        const per = prompts.map(() => []);
        for await (const tk of e.generateBatch(prompts, params)) if (tk.id >= 0 && !tk.stopReason) per[tk.seq].push(tk);
        return { per, result: e.lastBatchResult };
      };
      const c = await batch(cpu), gg = await batch(g);
      for (let i = 0; i < prompts.length; i++) {
        assert.equal(gg.result.sequences[i].nPrompt, c.result.sequences[i].nPrompt, `${shape} sequence ${i}: positions`);
        let checked = 0;
        for (let k = 0; k < c.per[i].length; k++) {
          const top = c.per[i][k].top;
          if (top.length > 1 && top[0].logprob - top[1].logprob < NEAR_TIE) break;
          assert.equal(gg.per[i][k]?.id, c.per[i][k].id, `${shape} sequence ${i} token ${k}`);
          assert.ok(Math.abs(gg.per[i][k].logprob - c.per[i][k].logprob) <= 0.01, `${shape} sequence ${i} token ${k}: log-probability`);
          checked++;
        }
        assert.ok(checked >= 1, `${shape} sequence ${i}: a near-tie at the first token`);
      }
    } finally {
      await cpu.free();
      await g.free();
    }
  }
});

/** Sequence i's tokens (BatchTokens, generated) of `got` against the CPU's `want`: ids equal up to
 *  the CPU's first near-tie, each log-probability within 0.01; returns how many were checked. */
function sameTokens(got, want, what) {
  let checked = 0;
  for (let k = 0; k < want.length; k++) {
    const top = want[k].top;
    if (top.length > 1 && top[0].logprob - top[1].logprob < NEAR_TIE) break;
    assert.equal(got[k]?.id, want[k].id, `${what} token ${k}`);
    assert.ok(Math.abs(got[k].logprob - want[k].logprob) <= 0.01, `${what} token ${k}: log-probability`);
    checked++;
  }
  return checked;
}

test('images on WebGPU: openBatch() takes images in its first sequence as the CPU does', { skip, timeout: 600000 }, async () => {
  const { cpu, g } = await engines(pair('gemma3-tiny', 'F32'));
  try {
    const png = await image(48, 40, 7);
    const params = { images: [png], temperature: 0, maxTokens: 12, nProbs: 2 };
    const want = [];
    for await (const tk of cpu.generate(`Look at ${M} here.`, params)) if (tk.id >= 0 && !tk.stopReason) want.push(tk);
    const b = await g.openBatch({ maxSequences: 2 });
    const got = [];
    for await (const tk of b.add(`Look at ${M} here.`, params)) if (tk.id >= 0 && !tk.stopReason) got.push(tk);
    await b.close();
    assert.ok(sameTokens(got, want, 'first sequence') >= 1, 'a near-tie at the first token');
  } finally {
    await cpu.free();
    await g.free();
  }
});

test('images on WebGPU: sequences with images join openBatch()\'s running text sequence as on the CPU (gemma3, LFM2-VL\'s hybrid)', { skip, timeout: 600000 }, async (t) => {
  for (const shape of ['gemma3-tiny', 'lfm2-tiny']) {
    const { cpu, g } = await engines(pair(shape, 'F32'));
    try {
      const [a, b] = [await image(48, 40, 7), await image(30, 52, 8)];
      // the text sequence begins the batch; the others join it running (after its first step:
      // wlm_generate_batch_add_media, on the GPU its recorded prompt run before it joins), the
      // last when a slot frees
      const jobs = [['Plain text first, running.', {}], [`Describe ${M} please.`, { images: [a] }],
        [`Two: ${M} and ${M}?`, { images: [b, a] }], [`Last ${M} one`, { images: [b] }]];
      const batch = async (e) => {
        const base = { temperature: 0, maxTokens: 10, nProbs: 2, bannedTokens: [e.info.eosId] };
        const run = await e.openBatch({ maxSequences: 2 });
        const seqs = jobs.map(([p, extra]) => run.add(p, { ...base, ...extra }));
        const per = await Promise.all(seqs.map(async (s) => {
          const toks = [];
          for await (const tk of s) if (tk.id >= 0 && !tk.stopReason) toks.push(tk);
          return toks;
        }));
        await run.close();
        return { per, results: seqs.map((s) => s.result), stats: run.stats };
      };
      const c = await batch(cpu), gg = await batch(g);
      assert.equal(gg.stats.maxLive, 2, `${shape}: the sequences ran together`);
      for (let i = 0; i < jobs.length; i++) {
        assert.equal(gg.results[i].nPrompt, c.results[i].nPrompt, `${shape} sequence ${i}: positions`);
        assert.equal(gg.per[i].length, 10, `${shape} sequence ${i}: tokens`);
        const checked = sameTokens(gg.per[i], c.per[i], `${shape} sequence ${i}`);
        assert.ok(checked >= 1, `${shape} sequence ${i}: a near-tie at the first token`);
        t.diagnostic(`${shape} sequence ${i}: ${checked} of 10 tokens checked`);
      }
    } finally {
      await cpu.free();
      await g.free();
    }
  }
});

test('images on WebGPU: a media prompt that does not fit fails clearly and loses nothing: the next one runs as on the CPU', { skip, timeout: 600000 }, async (t) => {
  const { cpu, g } = await engines(pair('gemma3-tiny', 'F32'), 40);
  try {
    const one = await image(80, 50, 1), two = await image(37, 90, 2);
    const full = (e) => e instanceof WasmlmError && e.code === 'WLM_ERR_CONTEXT_FULL';
    for (const e of [cpu, g]) await assert.rejects(run(e.generate(`First ${M} then ${M} tell them apart.`, { images: [one, two], maxTokens: 1 })), full);
    await compare(t, cpu, g, `Look: ${M} What is this?`, [one], 3);
  } finally {
    await cpu.free();
    await g.free();
  }
});

const TEMPLATE = "{% for message in messages %}<|{{ message['role'] }}|>{% if message['content'] is string %}{{ message['content'] }}" +
  "{% else %}{% for part in message['content'] %}{% if part['type'] == 'text' %}{{ part['text'] }}{% elif part['type'] == 'image' %}" +
  "{{ '<image>' }}{% endif %}{% endfor %}{% endif %}\n{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}";

test('images on WebGPU: chat() turn 2 about the same image neither encodes nor evaluates it again, and equals the CPU', { skip, timeout: 600000 }, async () => {
  for (const shape of ['gemma3-tiny', 'idefics3-tiny', 'lfm2-tiny', 'qwen25vl-tiny']) {
    const { cpu, g } = await engines(pair(shape, 'F32'));
    try {
      const png = shape === 'qwen25vl-tiny' ? await image(112, 56, 3) : await image(64, 48, 3);
      const turn1 = [{ role: 'user', content: [{ type: 'image', image: png }, { type: 'text', text: 'What is this?' }] }];
      const params = { chatTemplate: TEMPLATE, temperature: 0, maxTokens: 6, nProbs: 2 };
      const talk = async (e, messages) => {
        const toks = [];
        for await (const tk of e.chat(messages, params)) if (tk.id >= 0) toks.push(tk);
        return { toks, text: toks.map((x) => x.text).join(''), result: e.lastResult };
      };
      const c1 = await talk(cpu, turn1), g1 = await talk(g, turn1);
      const turn2 = [...turn1, { role: 'assistant', content: c1.text }, { role: 'user', content: 'And its colour?' }];
      const c2 = await talk(cpu, turn2), g2 = await talk(g, turn2);
      for (const [c, gg, turn] of [[c1, g1, 1], [c2, g2, 2]]) {
        assert.equal(gg.result.nPrompt, c.result.nPrompt, `${shape} turn ${turn}: prompt positions`);
        for (let i = 0; i < c.toks.length; i++) { // greedy ids equal up to the first near-tie
          const top = c.toks[i].top;
          if (top.length > 1 && top[0].logprob - top[1].logprob < NEAR_TIE) break;
          assert.equal(gg.toks[i]?.id, c.toks[i].id, `${shape} turn ${turn}: token ${i}`);
        }
      }
      assert.equal(g1.result.imagesEncoded, 1);
      assert.equal(g2.result.imagesEncoded, 0, `${shape}: turn 2 encoded the image again`);
      assert.equal(g2.result.imagesReused, 1);
      // (LFM2-VL, a hybrid: its state is not cut back over image rows, on the CPU as here)
      assert.ok((g2.result.nCached > 0 || shape === 'lfm2-tiny') && g2.result.nCached === c2.result.nCached,
        `${shape}: turn 2 kept ${g2.result.nCached} positions (the CPU ${c2.result.nCached})`);
    } finally {
      await cpu.free();
      await g.free();
    }
  }
});

test('images on WebGPU: \'auto\' no longer takes the CPU for Qwen2.5-VL\'s images (its reason is the adapter\'s, not M-RoPE)', { skip, timeout: 300000 }, async () => {
  const p = pair('qwen25vl-tiny', 'F32');
  const auto = await createEngine({ threads: 1, backend: 'auto', gpu });
  try {
    const info = await auto.load({ model: p.text, mmproj: p.mmproj, nCtx: 512 });
    // (a software adapter, lavapipe's, sends 'auto' to the CPU for its own reason)
    if (info.backend === 'cpu') assert.match(info.backendReason, /a (software|fallback) one/);
    assert.doesNotMatch(info.backendReason, /M-RoPE|qwen2\.5vl_merger|Qwen2\.5-VL/);
    const r = await run(auto.generate(`Look: ${M} and say.`, { images: [await image(112, 56, 4)], maxTokens: 2 }));
    assert.equal(r.ids.length, 2);
  } finally {
    await auto.free();
  }
});
