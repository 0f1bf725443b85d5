#!/usr/bin/env node
// fuzz_tool_calls.mjs — fuzzes the tool-call parser (js/chat/tool_calls.js, ToolCallParser), which
// reads untrusted model output, in every format (the JSON ones, Qwen3.5's XML, LFM2's Python). It is JavaScript, so a libFuzzer harness cannot drive it; this
// is the same loop in JS: inputs mutated from a corpus of well-formed and malformed outputs of
// every format (byte flips, insertions of the formats' own tokens, cuts, splices, deep
// nesting), each parsed whole and again split at random points, checking that
//   - nothing throws, and each parse ends within a time limit (no hang, no super-linear blow-up);
//   - the split parse gives the same events, concatenated, as the whole one (what makes the
//     streamed deltas add up to the non-streamed response);
//   - every call has a non-empty name; with no error, every call's arguments are valid JSON and
//     an object (the text was well-formed), and the content plus the calls' text never exceed
//     the input (where the parser builds the arguments' JSON itself — qwen3-coder, lfm2 — the
//     content alone).
// A failing input is written to fuzz/regressions/fuzz_tool_calls/<hash>.json and replayed first.
//
//   node fuzz/fuzz_tool_calls.mjs [-max_total_time=S] [-seed=N] [-runs=N]
// tests/js/tool_calls_fuzz.test.mjs runs a fixed number of iterations from a fixed seed (and the
// saved regressions) in every `npm test`.

import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ToolCallParser } from '../js/chat/tool_calls.js';

const HERE = dirname(fileURLToPath(import.meta.url));
export const REGRESSIONS = join(HERE, 'regressions', 'fuzz_tool_calls');
// 'mistral+start', 'lfm2+start': with startInCall (the prompt already ends with the marker, as
// js/chat/chat_completion.js does for a prefilled call)
const FORMATS = ['hermes', 'llama3', 'mistral', 'mistral+start', 'qwen3-coder', 'lfm2', 'lfm2+start', 'gemma4', 'gemma4+start', 'generic'];
/** The tools qwen3-coder reads its parameters' types from (a string, an integer). */
const TOOLS = [{ type: 'function', function: { name: 'calc', parameters: { type: 'object',
  properties: { expr: { type: 'string' }, n: { type: 'integer' } } } } }];
/** Formats whose arguments are JSON built by the parser (not the model's text): their length is
 *  not bounded by the input's. */
const BUILT_ARGS = new Set(['qwen3-coder', 'lfm2', 'lfm2+start', 'gemma4', 'gemma4+start']);
const START_MARKER = { 'mistral+start': '[TOOL_CALLS]', 'lfm2+start': '<|tool_call_start|>', 'gemma4+start': '<|tool_call>' };

/** Seed inputs: well-formed and malformed outputs of each format. */
export const CORPUS = [
  'Sure.\n<tool_call>\n{"name": "calc", "arguments": {"expr": "1+2"}}\n</tool_call>',
  '<tool_call>\n{"name": "a", "arguments": {}}\n</tool_call>\n<tool_call>\n{"name": "b", "arguments": {"x": [1, 2, {"y": null}]}}\n</tool_call>',
  '<tool_call>\n{"arguments": {"q": "\\u00e9\\n"}, "name": "late"}\n</tool_call>',
  '<tool_call>\n{"name": "calc", "arguments": {"expr": tru',
  '<tool_call>{"name": 5}</tool_call>',
  'text <tool_call> not json </tool_call> more',
  '{"name": "get", "parameters": {"city": "Paris"}}',
  '<|python_tag|>{"name": "get", "parameters": {"n": -1.5e+3}}',
  'I will call {"name": "x", "parameters": {"a": "b"}} then\n{ "name": "y", "parameters": {}}',
  '[TOOL_CALLS][{"name": "calc", "arguments": {"a": 1}}, {"name": "x", "arguments": {}}]',
  '[TOOL_CALLS] [ {"name": "a", "arguments": {"s": "]"}} ]',
  '[TOOL_CALLS]{"name": "a"}',
  '{"tool_calls": [{"name": "calc", "arguments": {"e": 2}}]}',
  '{"response": "hello \\"world\\""}',
  '{"tool_call": {"name": "a", "arguments": {}}}',
  '  {"response": 5} trailing',
  'plain text with no call at all, and a { brace and a < bracket',
  '',
  'Checking.\n\n<tool_call>\n<function=calc>\n<parameter=expr>\n1+2\n</parameter>\n<parameter=n>\n3\n</parameter>\n</function>\n</tool_call>',
  '<tool_call>\n<function=a>\n</function>\n</tool_call>\n<tool_call>\n<function=b>\n<parameter=x>\n{"y": [1, null]}\n</parameter>\n</function>\n</tool_call>',
  '<tool_call>\n<function=calc>\n<parameter=expr>\nline one\n<b>two</b>\n</parameter>\n</function>',
  '<tool_call>\n<function=calc>\n<parameter=n>\n1',
  '<|tool_call_start|>[calc(expr="1+2", n=3), other(s=\'it\\\'s\', l=[1, [2, {"k": None}],], b=True)]<|tool_call_end|>Done.',
  '<|tool_call_start|>[f()]',
  '<|tool_call_start|>[f(a=1 b=2)]<|tool_call_end|>',
  '<|tool_call_start|>{"name": "f", "arguments": {}}<|tool_call_end|>',
  'Sure.<|tool_call>call:get_weather{city:<|"|>Paris, {FR}<|"|>,days:3,o:{m:true,t:[<|"|>a<|"|>,"b\\n",null,-2.5e1]}}<tool_call|><|tool_call>call:ns.f-2{}<tool_call|> ok',
  '<|tool_call>call:f{<|"|>k<|"|>:1,"q":"x",}<tool_call|>',
  '<|tool_call>call:f{a:<|"|>never closed}<tool_call|>',
  '<|tool_call>call:f{a:zz}<tool_call|>',
  'call:f{a:1}',
];
const PIECES = ['<tool_call>', '</tool_call>', '<|python_tag|>', '[TOOL_CALLS]', '{"name"', '{ "name"', '"arguments"',
  '"parameters"', '{', '}', '[', ']', '"', '\\', ',', ':', ' ', '\n', 'true', 'null', '-0.5e', '\\u12', '\u00e9', '\ud83d\ude00',
  '"tool_calls"', '"response"', '<function=calc>', '<parameter=expr>', '</parameter>', '</function>', '<function=',
  '<parameter=', '<|tool_call_start|>', '<|tool_call_end|>', '[calc(', 'n=', ')', "'", 'True', 'None', '\\x4', '\\u00',
  '<|tool_call>', '<tool_call|>', '<|"|>', '<|"', 'call:', 'call:f{', 'k:'];

/** A small seeded generator (mulberry32). */
export function rng(seed) {
  let t = seed >>> 0;
  return () => {
    t = (t + 0x6d2b79f5) >>> 0;
    let x = Math.imul(t ^ (t >>> 15), t | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

/** One mutated input from the corpus. */
export function mutate(r) {
  const pick = (a) => a[Math.floor(r() * a.length)];
  let s = pick(CORPUS);
  const n = 1 + Math.floor(r() * 4);
  for (let k = 0; k < n; k++) {
    const at = Math.floor(r() * (s.length + 1));
    switch (Math.floor(r() * 7)) {
      case 0: s = s.slice(0, at) + pick(PIECES) + s.slice(at); break;                  // insert a format token
      case 1: s = s.slice(0, at) + s.slice(at + 1 + Math.floor(r() * 8)); break;        // delete
      case 2: s = s.slice(0, at); break;                                               // cut (a truncated call)
      case 3: s = s.slice(0, at) + String.fromCharCode(Math.floor(r() * 128)) + s.slice(at + 1); break; // flip
      case 4: s = s.slice(0, at) + pick(CORPUS) + s.slice(at); break;                   // splice
      case 5: { const d = 1 + Math.floor(r() * 3000); s = s.slice(0, at) + '['.repeat(d) + s.slice(at); break; } // deep nesting
      default: s = s.slice(0, at) + s.slice(at).replace(/"/, "'"); break;
    }
  }
  return s;
}

/** Parses `text` with its events, pushing the pieces of `splits` (cut points). */
function parse(format, text, splits) {
  const startInCall = format.endsWith('+start');
  const p = new ToolCallParser(format.replace('+start', ''), { makeId: (i) => `id${i}`, startInCall, tools: TOOLS });
  const events = [];
  let from = 0;
  for (const at of [...splits, text.length]) {
    events.push(...p.push(text.slice(from, at)));
    from = at;
  }
  events.push(...p.finish());
  return { events, result: p.result() };
}

/** Folds events into {content, calls} (what a client reassembling a stream gets). */
function fold(events) {
  let content = '';
  const calls = [];
  for (const e of events) {
    if (e.type === 'content') content += e.text;
    else if (e.type === 'call') calls[e.index] = { id: e.id, name: e.name, arguments: '' };
    else calls[e.index].arguments += e.text;
  }
  return { content, calls };
}

/**
 * Checks one input in every format; throws an Error saying what broke. `r` picks the splits.
 */
export function check(text, r) {
  for (const format of FORMATS) {
    const t0 = performance.now();
    const whole = parse(format, text, []);
    const splits = [];
    for (let at = 0; at < text.length; at += 1 + Math.floor(r() * 6)) splits.push(at);
    const split = parse(format, text, splits);
    const ms = performance.now() - t0;
    if (ms > 2000 + text.length / 10) throw new Error(`${format}: ${ms.toFixed(0)} ms for ${text.length} characters`);
    const a = JSON.stringify(fold(whole.events)), b = JSON.stringify(fold(split.events));
    if (a !== b) throw new Error(`${format}: split parse differs:\n  whole ${a}\n  split ${b}`);
    const res = whole.result;
    if (JSON.stringify({ content: res.content, calls: res.calls }) !== a) throw new Error(`${format}: result() differs from its events`);
    if (res.error !== split.result.error) throw new Error(`${format}: error differs: ${res.error} / ${split.result.error}`);
    let used = res.content.length;
    for (const c of res.calls) {
      if (typeof c.name !== 'string' || c.name === '') throw new Error(`${format}: a call without a name`);
      used += c.arguments.length;
      if (res.error === null) {
        let v;
        try { v = JSON.parse(c.arguments); } catch { throw new Error(`${format}: no error, yet arguments ${c.arguments} are not JSON`); }
        if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new Error(`${format}: no error, yet arguments ${c.arguments} are not an object`);
      }
    }
    // (with startInCall the parser holds the marker, which comes back as content when no call follows)
    const room = START_MARKER[format]?.length ?? 0;
    if (BUILT_ARGS.has(format)) used = res.content.length;
    if (format !== 'generic' && used > text.length + room) throw new Error(`${format}: ${used} characters out of ${text.length} in`);
  }
}

/** The saved failing inputs (JSON strings), replayed before random ones. */
export function regressions() {
  if (!existsSync(REGRESSIONS)) return [];
  return readdirSync(REGRESSIONS).filter((f) => f.endsWith('.json'))
    .map((f) => JSON.parse(readFileSync(join(REGRESSIONS, f), 'utf8')));
}

/** Runs `runs` iterations (or until `seconds`) from `seed`; returns {runs, failure?}. */
export function fuzz({ seed = 1, runs = Infinity, seconds = Infinity, save = false } = {}) {
  const r = rng(seed);
  const t0 = performance.now();
  let i = 0;
  for (const text of regressions()) check(text, r);
  for (; i < runs && performance.now() - t0 < seconds * 1000; i++) {
    const text = mutate(r);
    try {
      check(text, r);
    } catch (e) {
      if (save) {
        mkdirSync(REGRESSIONS, { recursive: true });
        const h = createHash('sha1').update(text).digest('hex').slice(0, 12);
        writeFileSync(join(REGRESSIONS, `${h}.json`), JSON.stringify(text));
      }
      return { runs: i + 1, failure: { text, message: e.message } };
    }
  }
  return { runs: i };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const arg = (k, d) => Number(process.argv.find((a) => a.startsWith(`-${k}=`))?.split('=')[1] ?? d);
  const res = fuzz({ seed: arg('seed', Date.now() % 2 ** 31), runs: arg('runs', Infinity), seconds: arg('max_total_time', 20), save: true });
  if (res.failure) {
    console.error(`fuzz_tool_calls: FAILED after ${res.runs} runs: ${res.failure.message}\ninput: ${JSON.stringify(res.failure.text).slice(0, 2000)}`);
    process.exit(1);
  }
  console.log(`fuzz_tool_calls: ${res.runs} runs, no failure`);
}
