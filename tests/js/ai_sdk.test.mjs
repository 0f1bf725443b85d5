// tests/js/ai_sdk.test.mjs — `wasmlm/ai-sdk` driven by the `ai` package itself (v7, a
// devDependency): generateText, streamText, generateObject with a zod schema, a multi-step tool
// loop, embed / embedMany. The chat model is tests/js/_tool_models.mjs's tiny random llama with
// Qwen3's vocabulary and template (its text is noise: what the tests check is that the AI SDK's
// results are exactly what Engine.chatCompletion returns for the same request, that grammars hold
// the tool calls and objects, and that tool results reach the next prompt). Embeddings: the
// synthetic BERT of tests/reference/oracle/embed/bert-F32.json against llama.cpp's vectors
// recorded there. Types: tsc checks that the provider's models are the AI SDK's.

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { generateText, streamText, generateObject, embed, embedMany, tool, jsonSchema, stepCountIs, Output, cosineSimilarity } from 'ai';
import { UnsupportedFunctionalityError } from '@ai-sdk/provider';
import { z } from 'zod';
import { wasmlm } from 'wasmlm/ai-sdk';
import { createEngine } from '../../js/wasmlm.js';
import { synthCached } from '../../tools/synth_gguf.mjs';
import { REPO } from './_helpers.mjs';
import { TOOLS, toolModel } from './_tool_models.mjs';

globalThis.AI_SDK_LOG_WARNINGS = false;
const MODEL = toolModel('qwen3');
const model = wasmlm(MODEL, { engine: { threads: 1 } });
const reference = await createEngine({ threads: 1 }); // the same requests straight to chatCompletion
await reference.load({ model: MODEL });
after(async () => { await (await model.engine()).free(); await reference.free(); });

const calculator = (log) => tool({
  description: TOOLS[0].function.description,
  inputSchema: jsonSchema(TOOLS[0].function.parameters),
  execute: async (input) => { log.push(input); return { result: 42 }; },
});

test('the model is a LanguageModelV4 of provider wasmlm', () => {
  assert.equal(model.specificationVersion, 'v4');
  assert.equal(model.provider, 'wasmlm');
  assert.equal(model.modelId, 'qwen3-tiny-4k.gguf');
  assert.deepEqual(Object.keys(model.supportedUrls), ['image/*']); // (images need an mmproj: tests/js/ai_sdk_vision.test.mjs)
  assert.throws(() => wasmlm(MODEL, { nCtx: 5 }), /wasmlm\(\): unknown option "nCtx" \(known: engine, load, modelId\)/);
  assert.throws(() => wasmlm(MODEL, { load: { model: 'x' } }), /without 'model'/);
  assert.throws(() => wasmlm.imageModel('x'), (e) => e.name === 'AI_NoSuchModelError');
});

test('generateText: the text, finish reason and usage of chatCompletion for the same request', async () => {
  const r = await generateText({ model, prompt: 'Hello', maxOutputTokens: 8, seed: 1, temperature: 0.7 });
  const ref = await reference.chatCompletion({ messages: [{ role: 'user', content: 'Hello' }], max_tokens: 8, seed: 1, temperature: 0.7 });
  assert.equal(r.text, ref.choices[0].message.content);
  assert.equal(r.finishReason, 'length');
  assert.equal(r.usage.inputTokens, ref.usage.prompt_tokens);
  assert.equal(r.usage.outputTokens, 8);
  assert.deepEqual(r.warnings, []);
  const sys = await generateText({ model, system: 'Be brief.', prompt: 'Hi', maxOutputTokens: 4, seed: 2, stopSequences: ['\n'] });
  const refSys = await reference.chatCompletion({ messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi' }],
    max_tokens: 4, seed: 2, stop: ['\n'] });
  assert.equal(sys.text, refSys.choices[0].message.content);
});

test('streamText: the deltas add up to generateText\'s text; finish reason and usage at the end', async () => {
  const args = { model, prompt: 'Tell me a story', maxOutputTokens: 12, seed: 5, temperature: 0.9 };
  const whole = await generateText(args);
  const s = streamText(args);
  let text = '', deltas = 0;
  for await (const d of s.textStream) { text += d; deltas++; }
  assert.equal(text, whole.text);
  assert.ok(deltas > 1, 'streamed in pieces');
  assert.equal(await s.finishReason, 'length');
  assert.equal((await s.usage).outputTokens, 12);
});

test('generateObject with a zod schema: the grammar holds the object to the schema', async () => {
  const schema = z.object({ city: z.enum(['Paris', 'Tokyo', 'Lima']), days: z.number().int(), sunny: z.boolean() });
  for (const seed of [1, 2, 3]) {
    const r = await generateObject({ model, schema, prompt: 'The weather', seed, maxOutputTokens: 80 });
    assert.deepEqual(Object.keys(r.object).sort(), ['city', 'days', 'sunny']);
    assert.ok(['Paris', 'Tokyo', 'Lima'].includes(r.object.city));
    assert.ok(Number.isInteger(r.object.days));
    assert.equal(r.finishReason, 'stop');
  }
  // the same through generateText's output setting (ai 7's replacement of generateObject)
  const o = await generateText({ model, prompt: 'x', seed: 4, maxOutputTokens: 80, output: Output.object({ schema }) });
  assert.equal(schema.safeParse(o.output).success, true, JSON.stringify(o.output));
});

test('a multi-step tool loop: a required call, executed, its result in the next step\'s prompt', async () => {
  const log = [];
  const r = await generateText({
    model, prompt: 'What is 6*7?', seed: 11, temperature: 0, maxOutputTokens: 80,
    tools: { calculator: calculator(log) }, toolChoice: 'required', stopWhen: stepCountIs(3), include: { requestBody: true },
    prepareStep: ({ stepNumber }) => (stepNumber > 0 ? { toolChoice: 'none', maxOutputTokens: 6 } : {}),
  });
  assert.equal(r.steps.length, 2);
  assert.equal(r.steps[0].finishReason, 'tool-calls');
  assert.equal(log.length, r.steps[0].toolCalls.length);
  assert.ok(log.length >= 1);
  assert.equal(typeof log[0].expression, 'string');
  assert.ok(log[0].expression.length <= 24, 'maxLength held by the grammar');
  assert.deepEqual(r.steps[0].toolResults.map((t) => t.output), log.map(() => ({ result: 42 })));
  assert.equal(r.steps[1].toolCalls.length, 0);
  assert.equal(r.text, r.steps[1].text);
  // the second step's request carried the call and its result, as chatCompletion renders them
  const body = r.steps[1].request.body;
  assert.equal(body.tool_choice, 'none');
  const toolMsg = body.messages.find((m) => m.role === 'tool');
  assert.equal(toolMsg.content, JSON.stringify({ result: 42 }));
  assert.equal(toolMsg.tool_call_id, r.steps[0].toolCalls[0].toolCallId);
  const call = body.messages.find((m) => m.role === 'assistant').tool_calls[0];
  assert.deepEqual(JSON.parse(call.function.arguments), log[0]);
});

test('streamText with a required tool: tool-input parts, then the call', async () => {
  const log = [];
  const s = streamText({ model, prompt: 'What is 6*7?', seed: 11, temperature: 0, maxOutputTokens: 80,
    tools: { calculator: calculator(log) }, toolChoice: { type: 'tool', toolName: 'calculator' } });
  const parts = [];
  for await (const p of s.fullStream) parts.push(p);
  const types = parts.map((p) => p.type);
  assert.ok(types.includes('tool-input-start') && types.includes('tool-input-delta') && types.includes('tool-call'), types.join());
  const deltas = parts.filter((p) => p.type === 'tool-input-delta').map((p) => p.delta).join('');
  const call = parts.find((p) => p.type === 'tool-call');
  assert.deepEqual(JSON.parse(deltas), call.input);
  assert.equal(call.toolName, 'calculator');
  assert.equal(await s.finishReason, 'tool-calls');
  assert.equal(log.length, 1);
});

test('warnings for unsupported settings; unsupported content is an error', async () => {
  const r = await generateText({ model, prompt: 'Hi', maxOutputTokens: 2, seed: 1, reasoning: 'high' });
  assert.deepEqual(r.warnings.map((w) => w.feature), ['reasoning']);
  const withTools = await model.doGenerate({
    prompt: [{ role: 'user', content: [{ type: 'text', text: 'Hi' }] }], maxOutputTokens: 2, seed: 1,
    tools: [{ type: 'provider', id: 'openai.web_search', name: 'web_search', args: {} }],
    responseFormat: { type: 'json' },
  });
  assert.deepEqual(withTools.warnings.map((w) => w.type), ['unsupported']);
  assert.match(withTools.warnings[0].feature, /web_search/);
  await assert.rejects(model.doGenerate({ prompt: [{ role: 'user', content: [{ type: 'file', mediaType: 'image/png', data: new Uint8Array(4) }] }] }),
    (e) => UnsupportedFunctionalityError.isInstance(e));
  await assert.rejects(generateText({ model, prompt: 'Hi', maxOutputTokens: 2, providerOptions: { wasmlm: { bogus: 1 } } }), /chatCompletion\(\): unknown field "bogus"/);
});

test('abort: an aborted generation rejects with AbortError and the engine serves the next call', async () => {
  const ac = new AbortController();
  const s = streamText({ model, prompt: 'Go on', maxOutputTokens: 2000, seed: 1, abortSignal: ac.signal });
  let n = 0, error = null;
  try {
    for await (const d of s.textStream) { void d; if (++n === 3) ac.abort(); }
  } catch (e) { error = e; }
  assert.ok(n < 50, `stopped after ${n} deltas`);
  assert.ok(error === null || error.name === 'AbortError', String(error));
  const r = await generateText({ model, prompt: 'Hi', maxOutputTokens: 3, seed: 1 });
  assert.equal(r.usage.outputTokens, 3);
  const pre = new AbortController();
  pre.abort();
  await assert.rejects(generateText({ model, prompt: 'Hi', maxOutputTokens: 3, abortSignal: pre.signal }), (e) => e.name === 'AbortError');
});

test('embed and embedMany: llama.cpp\'s vectors (synthetic BERT, tests/reference/oracle/embed)', async () => {
  const rec = JSON.parse(fs.readFileSync(path.join(REPO, 'tests/reference/oracle/embed/bert-F32.json'), 'utf8'));
  const file = synthCached({ arch: 'bert', shape: 'tiny', seed: 1, type: 'F32' });
  const em = wasmlm.textEmbeddingModel(file, { engine: { threads: 1 }, load: { nCtx: rec.ctx } });
  assert.equal(em.specificationVersion, 'v4');
  try {
    const { embeddings, usage } = await embedMany({ model: em, values: rec.texts });
    assert.equal(embeddings.length, rec.texts.length);
    embeddings.forEach((v, i) => assert.ok(cosineSimilarity(v, rec.embeddings[i]) >= 0.9999, `text ${i}`));
    const engine = await em.engine();
    let tokens = 0;
    for (const t of rec.texts) tokens += (await engine.tokenize(t)).length;
    assert.equal(usage.tokens, tokens);
    const one = await embed({ model: em, value: rec.texts[1] });
    assert.deepEqual(one.embedding, embeddings[1]);
  } finally {
    await (await em.engine()).free();
  }
});

test('types: the models are ai\'s LanguageModel and EmbeddingModel (tsc)', () => {
  const dir = path.join(REPO, 'build', 'types-ai-sdk');
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify({
    extends: '../../tests/types/tsconfig.json', files: ['../../tests/types/ai_sdk_types.ts'],
  }));
  try {
    execFileSync(process.execPath, [path.join(REPO, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', path.join(dir, 'tsconfig.json')],
      { encoding: 'utf8', stdio: 'pipe' });
  } catch (e) {
    assert.fail(`tsc --noEmit:\n${e.stdout}${e.stderr}`);
  }
});
