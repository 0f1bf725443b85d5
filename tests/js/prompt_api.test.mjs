// tests/js/prompt_api.test.mjs — the Prompt API polyfill (js/prompt_api/) in Node, on the tiny
// Qwen3-vocabulary model of _tool_models.mjs (random weights: its text is noise, which makes the
// constraint checks real — only the grammar makes the output JSON or match the RegExp). Checked
// against the spec (webmachinelearning/prompt-api index.bs): the exceptions of each misuse, the
// download progress events, context usage against the template's own rendering, overflow and
// QuotaExceededError, abort and destroy, clone, prefix, tool calls round trips, and the RegExp →
// GBNF conversion against JavaScript's own RegExp.

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import Ajv from 'ajv';
import { toolModel } from './_tool_models.mjs';
import { REPO } from './_helpers.mjs';
import { createEngine, renderChatTemplate } from '../../js/wasmlm.js';
import { configure, LanguageModel, MODELS, DEFAULT_MODEL } from '../../js/prompt_api/index.js';
import { regExpToGrammar } from '../../js/prompt_api/regexp.js';

const MODEL = toolModel('qwen3');
const rejectsWith = (p, name) => assert.rejects(p, (e) => {
  assert.equal(e.name, name, `${e.name}: ${e.message}`);
  return true;
});

/** A real engine whose calls are recorded (and whose chat completions can be altered). */
async function recordingEngine(loadOptions = {}, alter = (r) => r) {
  const engine = await createEngine();
  await engine.load({ model: MODEL, ...loadOptions });
  const log = { prompts: [], requests: [] };
  const proxy = new Proxy(engine, {
    get(target, key) {
      if (key === 'generate') return (prompt, params, opts) => { log.prompts.push({ prompt, params }); return target.generate(prompt, params, opts); };
      if (key === 'chatCompletion') return (req, opts) => { log.requests.push(structuredClone(req)); return target.chatCompletion(alter(req, log), opts); };
      const v = Reflect.get(target, key);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
  return { engine, proxy, log };
}

after(() => configure({ model: MODEL }));

test('the built-in model table is models/manifest.json\'s', () => {
  const manifest = JSON.parse(readFileSync(new URL('../../models/manifest.json', import.meta.url), 'utf8')).models;
  assert.ok(MODELS[DEFAULT_MODEL]);
  for (const [id, m] of Object.entries(MODELS)) {
    const e = manifest.find((x) => x.id === id);
    assert.ok(e, id);
    assert.deepEqual({ url: m.url, size: m.size, sha256: m.sha256 }, { url: e.url, size: e.size, sha256: e.sha256 }, id);
    assert.equal(e.verified, true, id);
  }
});

test('configure() checks its options', async () => {
  await assert.rejects(configure({ params: { temperature: 1 } }), /configure\(\): params: unknown option "temperature"/);
  await assert.rejects(configure({ load: { model: 'x' } }), /load\.model is not allowed/);
  await assert.rejects(configure({ model: 42 }), TypeError);
  await assert.rejects(configure({ engine: {} }), TypeError);
  await assert.rejects(configure(null), TypeError);
});

test('availability(), params() and create() options', async () => {
  await configure({ model: MODEL, params: { maxTokens: 12, seed: 7 } });
  assert.equal(await LanguageModel.availability(), 'available'); // a path: nothing to download
  assert.equal(await LanguageModel.availability({ expectedInputs: [{ type: 'audio' }] }), 'unavailable');
  assert.equal(await LanguageModel.availability({ expectedOutputs: [{ type: 'image' }] }), 'unavailable');
  assert.equal(await LanguageModel.availability({ expectedInputs: [{ type: 'text', languages: ['en', 'ja'] }, { type: 'tool-response' }] }), 'available');
  await assert.rejects(LanguageModel.availability({ expectedInputs: [{ type: 'text', languages: ['not a tag!'] }] }), RangeError);
  await assert.rejects(LanguageModel.availability({ expectedInputs: [{ type: 'video' }] }), TypeError);
  assert.deepEqual(await LanguageModel.params(), { defaultTopK: 3, maxTopK: 128, defaultTemperature: 1, maxTemperature: 2 });

  await rejectsWith(LanguageModel.create({ expectedInputs: [{ type: 'image' }] }), 'NotSupportedError');
  await assert.rejects(LanguageModel.create({ temperature: -1 }), RangeError);
  await assert.rejects(LanguageModel.create({ topK: 0 }), RangeError);
  await assert.rejects(LanguageModel.create({ samplingMode: 'creative', topK: 3 }), TypeError);
  await assert.rejects(LanguageModel.create({ samplingMode: 'wild' }), TypeError);
  await assert.rejects(LanguageModel.create({ tools: [{ name: 'x', description: 'y', inputSchema: {} }] }), /execute/);
  await assert.rejects(LanguageModel.create({ initialPrompts: [{ role: 'user', content: 'a' }, { role: 'system', content: 'b' }] }), TypeError);
  await rejectsWith(LanguageModel.create({ initialPrompts: [{ role: 'assistant', content: 'a', prefix: true }, { role: 'user', content: 'b' }] }), 'SyntaxError');
  await assert.rejects(LanguageModel.create({ initialPrompts: [{ role: 'robot', content: 'a' }] }), TypeError);
  const ctl = new AbortController();
  ctl.abort(new Error('mine'));
  await assert.rejects(LanguageModel.create({ signal: ctl.signal }), /mine/);
  assert.throws(() => new LanguageModel(), TypeError);

  const clamped = await LanguageModel.create({ temperature: Infinity, topK: 1e9 });
  assert.equal(clamped.temperature, 2);
  assert.equal(clamped.topK, 128);
  assert.equal((await LanguageModel.create({ topK: 4.9 })).topK, 4);
  const mode = await LanguageModel.create({ samplingMode: 'most-predictable' });
  assert.equal(mode.samplingMode, 'most-predictable');
  assert.equal(mode.temperature, 0);
  assert.equal((await LanguageModel.create()).samplingMode, 'balanced');
  // WebIDL dictionaries ignore members they do not declare (unlike wasmlm's own options, which
  // js/options.js refuses): a misspelt member is no error, as in Chrome
  assert.equal((await LanguageModel.create({ temprature: 0.5, topK: 5 })).temperature, 1);
  assert.equal(await LanguageModel.availability({ expectedInput: [{ type: 'audio' }] }), 'available');
  await assert.rejects(configure({ model: MODEL, params: { maxToken: 3 } }), { name: 'TypeError',
    message: /^configure\(\): params: unknown option "maxToken" \(did you mean "maxTokens"\?\)/ });
  await assert.rejects(configure({ modle: MODEL }), { name: 'TypeError', message: /^configure\(\): unknown option "modle" \(did you mean "model"\?\)/ });
  await assert.rejects(configure({ model: MODEL, load: { nctx: 64 } }), { name: 'TypeError', message: /^configure\(\): load: unknown option "nctx"/ });
});

test('create(): downloadprogress 0 then 1; contextUsage is the template\'s tokens', async () => {
  await configure({ model: MODEL, params: { maxTokens: 12, seed: 7 } });
  const seen = [];
  const system = { role: 'system', content: 'Pretend to be an eloquent hamster.' };
  const session = await LanguageModel.create({
    initialPrompts: [system],
    monitor(m) {
      m.ondownloadprogress = (e) => seen.push(['handler', e.loaded, e.total]);
      m.addEventListener('downloadprogress', (e) => seen.push(['listener', e.loaded]));
    },
  });
  const handler = seen.filter((s) => s[0] === 'handler');
  assert.deepEqual(handler[0], ['handler', 0, 1]);
  assert.deepEqual(handler[handler.length - 1], ['handler', 1, 1]);
  assert.ok(handler.every((s, i) => i === 0 || s[1] > handler[i - 1][1]), 'increasing');
  assert.equal(seen.filter((s) => s[0] === 'listener').length, handler.length);

  // independently: the file's template rendered by @huggingface/jinja, tokenized by an engine
  const engine = await createEngine();
  const info = await engine.load({ model: MODEL });
  const text = await renderChatTemplate(info.chatTemplate, [system], {
    addGenerationPrompt: true, variables: { enable_thinking: false }, bosToken: info.bosToken, eosToken: info.eosToken });
  const tokens = await engine.tokenize(text, { bos: info.addBos, parseSpecial: true });
  assert.equal(session.contextUsage, tokens.length);
  assert.equal(session.inputUsage, session.contextUsage);
  assert.equal(session.contextWindow, info.nCtx);
  assert.equal(session.inputQuota, info.nCtx);

  // measureContextUsage(): the tokens the input adds, without changing the session
  const usage = await session.measureContextUsage('What is your favorite food?');
  const withNext = await renderChatTemplate(info.chatTemplate, [system, { role: 'user', content: 'What is your favorite food?' }], {
    addGenerationPrompt: true, variables: { enable_thinking: false }, bosToken: info.bosToken, eosToken: info.eosToken });
  assert.equal(usage, (await engine.tokenize(withNext, { bos: info.addBos, parseSpecial: true })).length - tokens.length);
  assert.equal(await session.measureInputUsage('What is your favorite food?'), usage);
  assert.equal(session.contextUsage, tokens.length);
  const schema = { type: 'object', properties: { rating: { type: 'number' } } };
  assert.ok(await session.measureContextUsage('x', { responseConstraint: schema }) >
    await session.measureContextUsage('x', { responseConstraint: schema, omitResponseConstraintInput: true }));
  await assert.rejects(session.measureContextUsage('x', { omitResponseConstraintInput: true }), TypeError);
  await engine.free();
});

test('prompt(), promptStreaming() and clone(): the same seed, the same text; history grows', async () => {
  await configure({ model: MODEL, params: { maxTokens: 16, seed: 11 } });
  const session = await LanguageModel.create({ initialPrompts: [{ role: 'system', content: 'Be brief.' }] });
  const a = await session.clone();
  const b = await session.clone();
  assert.equal(a.contextUsage, session.contextUsage);
  const whole = await a.prompt('Write me a poem.');
  assert.equal(typeof whole, 'string');
  assert.ok(whole.length > 0);
  const stream = b.promptStreaming('Write me a poem.');
  assert.ok(stream instanceof ReadableStream);
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  assert.ok(chunks.length > 1, 'several chunks');
  assert.equal(chunks.join(''), whole);
  assert.ok(a.contextUsage > session.contextUsage);
  assert.equal(a.contextUsage, b.contextUsage);
  // the next turn: nothing evicted, the usage grows again
  const before = a.contextUsage;
  await a.prompt([{ role: 'user', content: 'Marketing: more budget.' }, { role: 'user', content: 'Finance: less.' },
    { role: 'assistant', content: "Let's explore a compromise." }]);
  assert.ok(a.contextUsage > before);
  // append(): stored and counted, no response
  const c = await session.clone();
  await c.append([{ role: 'user', content: 'Here is one note.' }]);
  assert.ok(c.contextUsage > session.contextUsage);
  await assert.rejects(c.append([{ role: 'system', content: 'late' }]), TypeError);
  // a session without initial prompts takes a system message first, through append()
  const d = await LanguageModel.create();
  assert.equal(d.contextUsage, 0);
  await d.append([{ role: 'system', content: 'Pretend to be an eloquent hamster.' }]);
  assert.ok(d.contextUsage > 0);
  assert.equal(typeof await d.prompt('What is your favorite food?'), 'string');
});

test('misuse of prompt(): the spec\'s exceptions', async () => {
  await configure({ model: MODEL, params: { maxTokens: 4, seed: 1 } });
  const s = await LanguageModel.create({ initialPrompts: [{ role: 'system', content: 'x' }] });
  await assert.rejects(s.prompt([{ role: 'system', content: 'again' }]), TypeError);
  await rejectsWith(s.prompt([{ role: 'user', content: 'a', prefix: true }]), 'SyntaxError');
  await rejectsWith(s.prompt([{ role: 'assistant', content: 'a', prefix: true }, { role: 'user', content: 'b' }]), 'SyntaxError');
  await rejectsWith(s.prompt([{ role: 'assistant', content: [{ type: 'image', value: new Uint8Array(4) }] }]), 'NotSupportedError');
  await rejectsWith(s.prompt([{ role: 'user', content: [{ type: 'audio', value: new Uint8Array(4) }] }]), 'NotSupportedError');
  await assert.rejects(s.prompt([{ role: 'user', content: [{ type: 'text', value: 42 }] }]), TypeError);
  await assert.rejects(s.prompt('x', { omitResponseConstraintInput: true }), TypeError);
  await assert.rejects(s.prompt('x', { responseConstraint: 'not a schema' }), TypeError);
  await rejectsWith(s.prompt('x', { responseConstraint: /(a)\1/ }), 'NotSupportedError');
  await rejectsWith(s.prompt('x', { responseConstraint: { type: 'object', patternProperties: { a: {} } } }), 'NotSupportedError');
  // a streaming call's error is the stream's
  await assert.rejects(s.promptStreaming([{ role: 'system', content: 'x' }]).getReader().read(), TypeError);
  const usage = s.contextUsage;
  const ctl = new AbortController();
  ctl.abort();
  await rejectsWith(s.prompt('x', { signal: ctl.signal }), 'AbortError');
  assert.equal(s.contextUsage, usage, 'a failed prompt leaves the session as it was');
});

test('responseConstraint: JSON Schema and RegExp hold the noise model\'s output', async () => {
  await configure({ model: MODEL, params: { maxTokens: 800, seed: 3 } });
  const session = await LanguageModel.create();
  const schema = { type: 'object', required: ['rating'], additionalProperties: false,
    properties: { rating: { type: 'number', minimum: 0, maximum: 5 } } };
  // minimum / maximum are beyond the grammar: checked on the finished response, a SyntaxError
  // when it breaks them (the spec's "unable to produce a response compliant with the schema")
  const validate = new Ajv().compile(schema);
  const outcomes = new Set();
  for (let i = 0; i < 4; i++) {
    const result = await (await session.clone()).prompt('Summarize this feedback into a rating between 0-5.', { responseConstraint: schema })
      .catch((e) => e);
    if (result instanceof Error) {
      assert.equal(result.name, 'SyntaxError', result.message);
      assert.match(result.message, /\/rating: -?[\d.e+-]+ [<>] (minimum 0|maximum 5)/);
      outcomes.add('SyntaxError');
    } else {
      assert.ok(validate(JSON.parse(result)), result);
      outcomes.add('valid');
    }
  }
  const wide = { type: 'object', required: ['name', 'tags'], properties: { name: { type: 'string', maxLength: 12, format: 'email' },
    tags: { type: 'array', items: { enum: ['a', 'b'] }, maxItems: 3 } }, additionalProperties: false };
  const validateWide = new Ajv({ validateFormats: false }).compile(wide);
  for (let i = 0; i < 2; i++) {
    const result = await (await session.clone()).prompt('Describe.', { responseConstraint: wide });
    assert.ok(validateWide(JSON.parse(result)), result);
  }
  const regexes = [/^[a-z]{1,8}@[a-z]{1,8}\.(com|org)$/, /\d{3}-\d{4}/, /(yes|no)/i, /[^\s]{2,5}( [A-Z]\w{0,4}){1,3}/];
  for (const re of regexes) {
    const s = await session.clone();
    const result = await s.prompt('Answer.', { responseConstraint: re, omitResponseConstraintInput: true });
    assert.ok(new RegExp(`^(?:${re.source})$`, re.flags).test(result), `${re} ← ${JSON.stringify(result)}`);
  }
  // the explainer's e-mail RegExp, on a streamed response
  const email = /^[a-zA-Z0-9.!#$%&'*+\/=?^_`{|}~-]+@[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*$/;
  // (the noise model seldom ends an unbounded pattern: a response cut short by maxTokens is a
  // SyntaxError, and what was streamed until then must still begin an address)
  let text = '';
  try {
    for await (const c of (await session.clone()).promptStreaming('Create a fictional email address.', { responseConstraint: email })) text += c;
    assert.match(text, email);
  } catch (e) {
    assert.equal(e.name, 'SyntaxError', e.message);
    assert.match(text, /^[a-zA-Z0-9.!#$%&'*+\/=?^_`{|}~-]+(@([a-zA-Z0-9-]+(\.[a-zA-Z0-9-]*)*)?)?$/);
    assert.ok(text.length > 100, 'the stream ran on');
  }
  // cut short by maxTokens: a SyntaxError, nothing stored
  await configure({ model: MODEL, params: { maxTokens: 2, seed: 3 } });
  const short = await LanguageModel.create();
  await rejectsWith(short.prompt('x', { responseConstraint: /[a-z]{40}/ }), 'SyntaxError');
  assert.equal(short.contextUsage, 0);
});

test('prefix: the assistant message is continued, not repeated', async () => {
  const { engine, proxy, log } = await recordingEngine();
  await configure({ engine: proxy, params: { maxTokens: 6, seed: 5 } });
  const s = await LanguageModel.create();
  const answer = await s.prompt([{ role: 'user', content: 'Create a TOML character sheet for a gnome barbarian' },
    { role: 'assistant', content: '```toml\n', prefix: true }]);
  const { prompt } = log.prompts.at(-1);
  assert.ok(prompt.endsWith('<|im_start|>assistant\n<think>\n\n</think>\n\n```toml\n'), JSON.stringify(prompt.slice(-60)));
  assert.ok(!answer.startsWith('```toml'));
  // the next turn's prompt holds prefix + answer as the assistant's message
  await s.prompt('Thanks');
  assert.ok(log.prompts.at(-1).prompt.includes(`\`\`\`toml\n${answer}<|im_end|>`));
  await configure({ model: MODEL });
  await engine.free();
});

test('tools: calls run concurrently, results go back to the model', async () => {
  // The noise model seldom calls a tool by itself: its first round is made to (tool_choice
  // 'required' on the real engine), the next rounds are left to it ('auto').
  const { engine, proxy, log } = await recordingEngine({}, (req, l) => (l.requests.length === 1 ? { ...req, tool_choice: 'required' } : req));
  await configure({ engine: proxy, params: { maxTokens: 400, seed: 9 } });
  const calls = [];
  let running = 0, overlap = 0;
  const session = await LanguageModel.create({
    initialPrompts: [{ role: 'system', content: 'You are a helpful assistant. You can use tools to help the user.' }],
    expectedInputs: [{ type: 'text', languages: ['en'] }, { type: 'tool-response' }],
    expectedOutputs: [{ type: 'text', languages: ['en'] }, { type: 'tool-call' }],
    tools: [{
      name: 'getWeather',
      description: 'Get the weather in a location.',
      inputSchema: { type: 'object', properties: { location: { type: 'string', enum: ['Seattle', 'Tokyo', 'Berlin'] } }, required: ['location'] },
      async execute(args) {
        calls.push(args);
        running++;
        overlap = Math.max(overlap, running);
        await new Promise((r) => setTimeout(r, 20));
        running--;
        return JSON.stringify({ location: args.location, temperature: 21 });
      },
    }],
  });
  const result = await session.prompt('What is the weather in Seattle?');
  assert.equal(typeof result, 'string');
  assert.ok(calls.length >= 1, 'the tool ran');
  for (const c of calls) assert.ok(['Seattle', 'Tokyo', 'Berlin'].includes(c.location), JSON.stringify(c));
  if (calls.length > 1) assert.ok(overlap > 1, 'calls of one turn run concurrently');
  const second = log.requests[1];
  assert.equal(second.tools[0].function.name, 'getWeather');
  const toolMessages = second.messages.filter((m) => m.role === 'tool');
  assert.equal(toolMessages.length, calls.length);
  assert.deepEqual(JSON.parse(toolMessages[0].content), { location: calls[0].location, temperature: 21 });
  const asked = second.messages.find((m) => m.tool_calls);
  assert.equal(asked.tool_calls[0].id, toolMessages[0].tool_call_id);
  // a tool that throws: the prompt rejects with its error
  log.requests.length = 0;
  const failing = await LanguageModel.create({ tools: [{ name: 'boom', description: 'fails', inputSchema: { type: 'object', properties: {} },
    execute() { throw new Error('tool failed'); } }] });
  await assert.rejects(failing.prompt('go'), /tool failed/);
  await configure({ model: MODEL });
  await engine.free();
});

test('context overflow: old pairs evicted (initial prompts kept), else QuotaExceededError', async () => {
  await configure({ model: MODEL, load: { nCtx: 160 }, params: { maxTokens: 24, seed: 2 } });
  await rejectsWith(LanguageModel.create({ initialPrompts: [{ role: 'system', content: 'word '.repeat(300) }] }), 'QuotaExceededError');
  const s = await LanguageModel.create({ initialPrompts: [{ role: 'system', content: 'Keep me.' }] });
  let overflows = 0, legacy = 0;
  s.addEventListener('contextoverflow', () => overflows++);
  s.onquotaoverflow = () => legacy++;
  const initial = s.contextUsage;
  for (let i = 0; i < 6; i++) {
    await s.prompt(`Message number ${i} with some more words in it.`);
    assert.ok(s.contextUsage <= s.contextWindow);
  }
  assert.ok(overflows > 0, 'contextoverflow fired');
  assert.equal(legacy, overflows);
  assert.ok(s.contextUsage > initial);
  const usage = s.contextUsage;
  const err = await s.prompt('word '.repeat(400)).catch((e) => e);
  assert.equal(err.name, 'QuotaExceededError');
  assert.ok(err.requested > err.quota, `${err.requested} > ${err.quota}`);
  assert.equal(err.quota, s.contextWindow);
  assert.equal(s.contextUsage, usage, 'nothing evicted');
});

test('abort and destroy: queued and running operations', async () => {
  await configure({ model: MODEL, params: { maxTokens: 0, seed: 4 } });
  const s = await LanguageModel.create();
  // running: stopped within a token
  const ctl = new AbortController();
  const running = rejectsWith(s.prompt('Write me an extra-long poem.', { signal: ctl.signal }), 'AbortError');
  const queued = rejectsWith(s.prompt('Second', { signal: AbortSignal.abort() }), 'AbortError');
  const ctl2 = new AbortController();
  let settled = false;
  const queued2 = s.prompt('Third', { signal: ctl2.signal }).finally(() => { settled = true; });
  const q2 = rejectsWith(queued2, 'AbortError');
  ctl2.abort();
  await q2; // left the queue while the first still runs
  assert.ok(settled);
  setTimeout(() => ctl.abort(), 50);
  await running;
  await queued;
  assert.equal(s.contextUsage, 0, 'an aborted prompt is not kept');
  // a stream cancelled by its reader stops the generation
  const reader = s.promptStreaming('Write me an extra-long poem.').getReader();
  await reader.read();
  await reader.cancel();
  // destroy(): the running prompt rejects, and every later call
  const p = s.prompt('Write me an extra-long poem.');
  setTimeout(() => s.destroy(), 50);
  await rejectsWith(p, 'AbortError');
  await rejectsWith(s.prompt('x'), 'AbortError');
  await rejectsWith(s.clone(), 'AbortError');
  await rejectsWith(s.append('x'), 'AbortError');
  // create()'s signal destroys the session later too
  const c = new AbortController();
  const t = await LanguageModel.create({ signal: c.signal });
  c.abort();
  await rejectsWith(t.prompt('x'), 'AbortError');
});

test('install: sets globalThis.LanguageModel only where there is none', async () => {
  const own = globalThis.LanguageModel;
  try {
    globalThis.LanguageModel = 'the browser\'s';
    await import('../../js/prompt_api/install.js?keep');
    assert.equal(globalThis.LanguageModel, 'the browser\'s');
    delete globalThis.LanguageModel;
    await import('../../js/prompt_api/install.js?set');
    assert.equal(globalThis.LanguageModel, LanguageModel);
  } finally {
    if (own === undefined) delete globalThis.LanguageModel;
    else globalThis.LanguageModel = own;
  }
  // the package's exports map
  const pkg = JSON.parse(readFileSync(`${REPO}/package.json`, 'utf8'));
  assert.equal(pkg.exports['./prompt-api'].default, './js/prompt_api/index.js');
  assert.equal(pkg.exports['./prompt-api/install'].default, './js/prompt_api/install.js');
});

test('RegExp → GBNF: refused features, and grammars that compile', async () => {
  for (const re of [/(a)\1/, /a(?=b)/, /(?<!a)b/, /\bword/, /a^b/, /a$b/, /^a$/m, /\p{L}/u, /[\D]/, /é/i]) {
    assert.throws(() => regExpToGrammar(re), (e) => e.name === 'NotSupportedError', String(re));
  }
  const engine = await createEngine();
  await engine.load({ model: MODEL });
  for (const re of [/a{2,}b?c*/, /[\]\\-]/, /x{,3}/, /\u{1F600}+/u, /\x41\u0042\cJ/, /[^]/, /a.b/s, /(?<year>\d{4})-(?:0[1-9]|1[0-2])/]) {
    const grammar = regExpToGrammar(re);
    const r = await engine.complete('x', { grammar, maxTokens: 30, seed: 1, temperature: 1 });
    if (r.stopReason === 'eos') assert.ok(new RegExp(`^(?:${re.source})$`, re.flags).test(r.text), `${re}: ${JSON.stringify(r.text)}`);
  }
  await engine.free();
});

test('the typings: the explainer\'s style of code type-checks (tsc --noEmit)', async () => {
  const { execFileSync } = await import('node:child_process');
  const { mkdirSync, writeFileSync } = await import('node:fs');
  const dir = `${REPO}/build/types-prompt-api`;
  mkdirSync(dir, { recursive: true });
  writeFileSync(`${dir}/tsconfig.json`, JSON.stringify({
    extends: '../../tests/types/tsconfig.json',
    compilerOptions: { lib: ['es2022', 'dom', 'dom.iterable', 'dom.asynciterable'] },
    files: ['../../tests/types/prompt_api.ts'],
  }));
  try {
    execFileSync(process.execPath, [`${REPO}/node_modules/typescript/bin/tsc`, '-p', `${dir}/tsconfig.json`], { encoding: 'utf8', stdio: 'pipe' });
  } catch (e) {
    assert.fail(`tsc --noEmit:\n${e.stdout}${e.stderr}`);
  }
});

test('create(): a model that cannot be read is a NetworkError, one that is no model an OperationError; both may be retried', async () => {
  await configure({ model: `${REPO}/build/no-such-model.gguf` });
  assert.equal(await LanguageModel.availability(), 'available'); // a path: nothing to download
  const missingFile = await LanguageModel.create().catch((e) => e);
  assert.equal(missingFile.name, 'NetworkError', missingFile.message);
  assert.equal(missingFile.cause?.code, 'WLM_ERR_IO');
  await configure({ model: new Uint8Array(64) });
  const notAModel = await LanguageModel.create().catch((e) => e);
  assert.equal(notAModel.name, 'OperationError', notAModel.message);
  assert.ok(notAModel.cause?.code, 'the WasmlmError is the cause');
  await configure({ model: MODEL });
  assert.ok(await LanguageModel.create());
  // a session made before configure() replaced the model cannot go on
  const old = await LanguageModel.create();
  await configure({ model: MODEL });
  await rejectsWith(old.prompt('x'), 'InvalidStateError');
});

test('RegExp → GBNF, fuzzed: random patterns JavaScript accepts convert to grammars that compile, or are refused by name', async () => {
  let s = Number(process.env.WASMLM_FUZZ_SEED ?? 12345); // a seeded LCG: the same patterns every run
  const rnd = (n) => { s = (s * 1103515245 + 12345) % 2 ** 31; return s % n; };
  const pieces = ['a', 'b', 'Z', '0', '.', '\\d', '\\w', '\\s', '\\S', '[a-c]', '[^x]', '[\\d_]', '(', ')', '(?:', '|', '*', '+', '?',
    '{2}', '{1,3}', '{2,}', '^', '$', '\\.', '\\\\', '\\n', '\\u00e9', '\\x41', '[', ']', '-', '{', '}', '\\b', '(?=a)', '\\1', 'é'];
  const engine = await createEngine();
  await engine.load({ model: MODEL });
  const counts = { converted: 0, refused: 0, matched: 0 };
  for (let i = 0; i < Number(process.env.WASMLM_FUZZ_N ?? 250); i++) {
    const source = Array.from({ length: 1 + rnd(8) }, () => pieces[rnd(pieces.length)]).join('');
    const flags = ['', 'i', 's', 'u', 'is'][rnd(5)];
    let re;
    try {
      re = new RegExp(source, flags);
    } catch {
      continue; // not a pattern JavaScript accepts
    }
    let grammar;
    try {
      grammar = regExpToGrammar(re);
    } catch (e) {
      assert.ok(e.name === 'NotSupportedError' || e instanceof SyntaxError, `${re}: ${e.name}: ${e.message}`);
      counts.refused++;
      continue;
    }
    counts.converted++;
    const r = await engine.complete('x', { grammar, maxTokens: 12, seed: i, temperature: 1 }).catch((e) => e);
    assert.ok(!(r instanceof Error) || (r.code === 'WLM_ERR_INVALID_ARG' && /allows no token/.test(r.message)),
      `${re} → ${JSON.stringify(grammar)}: ${r.message}`);
    if (!(r instanceof Error) && r.stopReason === 'eos') {
      assert.ok(new RegExp(`^(?:${re.source})$`, re.flags).test(r.text), `${re}: ${JSON.stringify(r.text)} (${JSON.stringify(grammar)})`);
      counts.matched++;
    }
  }
  assert.ok(counts.converted > 60 && counts.refused > 5 && counts.matched > 15, JSON.stringify(counts));
  await engine.free();
});

test('a template that wants alternating roles (Gemma 3) gets runs of user messages joined', async () => {
  await configure({ model: toolModel('gemma3'), params: { maxTokens: 8, seed: 1 } });
  const session = await LanguageModel.create({ initialPrompts: [{ role: 'system', content: 'You are a mediator.' }] });
  const result = await session.prompt([
    { role: 'user', content: 'Marketing: We need more budget for advertising campaigns.' },
    { role: 'user', content: 'Finance: We need to cut costs and advertising is on the list.' },
    { role: 'assistant', content: "Let's explore a compromise that satisfies both departments." },
  ]);
  assert.equal(typeof result, 'string');
  assert.ok(session.contextUsage > 0);
  assert.ok(await session.prompt('And now?'));
  await configure({ model: MODEL });
});
