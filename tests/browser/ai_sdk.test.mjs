// ai_sdk.test.mjs — `wasmlm/ai-sdk` with the `ai` package in a page (headless Chromium), as an
// application bundles it: esbuild bundles `ai`, `zod`, `@ai-sdk/provider` and js/ai_sdk/index.js
// into build/ai-sdk-page/bundle.js, leaving the engine (js/engine/engine.js) to load as the page's own
// module so that it finds dist/*.wasm beside it. The page runs generateText, streamText,
// generateObject with a zod schema, a two-step tool loop and embedMany; the models are the tiny
// random llama with Qwen3's template (tests/js/_tool_models.mjs) and the synthetic BERT whose
// vectors llama.cpp recorded (tests/reference/oracle/embed/bert-F32.json).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import * as esbuild from 'esbuild';
import { launch, startTestServer, REPO, STEP_TIMEOUT } from './_helpers.mjs';
import { toolModel, TOOLS } from '../js/_tool_models.mjs';
import { synthCached } from '../../tools/synth_gguf.mjs';

const DIR = path.join(REPO, 'build', 'ai-sdk-page');
let server, browser, page;

before(async () => {
  fs.mkdirSync(DIR, { recursive: true });
  await esbuild.build({
    stdin: {
      contents: "export * from 'ai'; export { z } from 'zod'; export { wasmlm } from './js/ai_sdk/index.js';",
      resolveDir: REPO, sourcefile: 'entry.js',
    },
    bundle: true, format: 'esm', platform: 'browser', outfile: path.join(DIR, 'bundle.js'), logLevel: 'error',
    plugins: [{
      name: 'engine-external',
      setup(b) { b.onResolve({ filter: /^\.\.\/engine\/engine\.js$/ }, () => ({ path: '/js/engine/engine.js', external: true })); },
    }],
  });
  fs.writeFileSync(path.join(DIR, 'index.html'), '<!doctype html><meta charset="utf-8"><title>ai-sdk</title><link rel="icon" href="data:,">\n' +
    '<script type="module">import * as m from "./bundle.js"; window.lib = m; document.body.dataset.ready = "1";</script>\n');
  server = await startTestServer({ files: {
    '/synthetic/qwen3.gguf': toolModel('qwen3'),
    '/synthetic/bert.gguf': synthCached({ arch: 'bert', shape: 'tiny', seed: 1, type: 'F32' }),
  } });
  browser = await launch();
  page = browser.page;
  await page.goto(`${server.origin}/build/ai-sdk-page/index.html`);
  await page.waitForFunction(() => document.body.dataset.ready === '1');
});

after(async () => {
  await browser?.close();
  await server?.close();
});

test('generateText, streamText, generateObject (zod), a tool loop and embedMany in a page', { timeout: STEP_TIMEOUT }, async () => {
  const rec = JSON.parse(fs.readFileSync(path.join(REPO, 'tests/reference/oracle/embed/bert-F32.json'), 'utf8'));
  const out = await page.evaluate(async ({ origin, calc, texts }) => {
    const { generateText, streamText, generateObject, embedMany, tool, jsonSchema, stepCountIs, z, wasmlm } = window.lib;
    globalThis.AI_SDK_LOG_WARNINGS = false;
    const model = wasmlm(`${origin}/synthetic/qwen3.gguf`, { engine: { threads: 1 } });
    const g = await generateText({ model, prompt: 'Hello', maxOutputTokens: 8, seed: 1 });
    const s = streamText({ model, prompt: 'Hello', maxOutputTokens: 8, seed: 1 });
    let streamed = '', deltas = 0;
    for await (const d of s.textStream) { streamed += d; deltas++; }
    const schema = z.object({ city: z.enum(['Paris', 'Tokyo', 'Lima']), days: z.number().int() });
    const o = await generateObject({ model, schema, prompt: 'Weather', seed: 2, maxOutputTokens: 60 });
    const log = [];
    const loop = await generateText({
      model, prompt: 'What is 6*7?', seed: 11, temperature: 0, maxOutputTokens: 80, stopWhen: stepCountIs(3),
      tools: { calculator: tool({ description: calc.description, inputSchema: jsonSchema(calc.parameters), execute: async (i) => { log.push(i); return { result: 42 }; } }) },
      toolChoice: 'required', prepareStep: ({ stepNumber }) => (stepNumber > 0 ? { toolChoice: 'none', maxOutputTokens: 4 } : {}),
    });
    const em = wasmlm.textEmbeddingModel(`${origin}/synthetic/bert.gguf`, { engine: { threads: 1 }, load: { nCtx: 512 } });
    const { embeddings } = await embedMany({ model: em, values: texts });
    return {
      text: g.text, finish: g.finishReason, outTokens: g.usage.outputTokens, streamed, deltas, streamFinish: await s.finishReason,
      object: o.object, objectOk: schema.safeParse(o.object).success,
      steps: loop.steps.map((st) => st.finishReason), log, calls: loop.steps[0].toolCalls.map((c) => c.input),
      embeddings,
    };
  }, { origin: server.origin, calc: TOOLS[0].function, texts: rec.texts.slice(0, 6) });
  assert.ok(out.text.length > 0);
  assert.equal(out.finish, 'length');
  assert.equal(out.outTokens, 8);
  assert.equal(out.streamed, out.text, 'the stream adds up to the generated text');
  assert.ok(out.deltas > 1);
  assert.equal(out.streamFinish, 'length');
  assert.equal(out.objectOk, true, JSON.stringify(out.object));
  assert.deepEqual(out.steps, ['tool-calls', 'length']);
  assert.ok(out.log.length >= 1);
  assert.deepEqual(out.log, out.calls, 'each call was executed with its input');
  assert.equal(typeof out.log[0].expression, 'string');
  const cos = (a, b) => { let d = 0, x = 0, y = 0; for (let i = 0; i < a.length; i++) { d += a[i] * b[i]; x += a[i] * a[i]; y += b[i] * b[i]; } return d / Math.sqrt(x * y); };
  out.embeddings.forEach((v, i) => assert.ok(cos(v, rec.embeddings[i]) >= 0.999, `text ${i}: ${cos(v, rec.embeddings[i])}`));
  browser.assertNoProblems();
});
