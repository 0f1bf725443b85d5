#!/usr/bin/env node
// fuzz_reasoning.mjs — fuzzes the reasoning parsers (js/chat/reasoning.js, ChatOutputParser: <think>
// blocks, alone and in front of each tool-call format, and gpt-oss's harmony messages with their
// calls), which read untrusted model output. The loop of fuzz_tool_calls.mjs: inputs mutated
// from a corpus (byte flips, insertions of the formats' own markers, cuts, splices), each parsed
// whole and again split at random points, checking that
//   - nothing throws, and each parse ends within a time limit (no hang, no super-linear blow-up);
//   - the split parse gives the same events, concatenated by kind, and the same result as the
//     whole one (what makes the streamed deltas add up to the non-streamed response);
//   - the reasoning and the content are each made of the input's text (never longer than it),
//     every call has a non-empty name, and without an error a harmony call's arguments are a
//     JSON object.
// A failing input is written to fuzz/regressions/fuzz_reasoning/<hash>.json and replayed first.
//
//   node fuzz/fuzz_reasoning.mjs [-max_total_time=S] [-seed=N] [-runs=N]
// tests/js/reasoning.test.mjs runs a fixed number of iterations from a fixed seed.

import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ChatOutputParser } from '../js/chat/reasoning.js';

const HERE = dirname(fileURLToPath(import.meta.url));
export const REGRESSIONS = join(HERE, 'regressions', 'fuzz_reasoning');

/** The parser settings exercised: [reasoning, options]. */
export const SETTINGS = [
  ['think', {}], ['think', { open: true }], ['think', { toolFormat: 'hermes' }],
  ['think', { open: true, toolFormat: 'qwen3-coder' }], ['think', { toolFormat: 'lfm2' }],
  ['harmony', {}], ['harmony', { toolFormat: 'harmony' }], [null, { toolFormat: 'hermes' }],
  ['gemma4', {}], ['gemma4', { toolFormat: 'gemma4' }], ['gemma4', { open: true, toolFormat: 'gemma4' }],
];

export const CORPUS = [
  '<think>\nLet me see.\n</think>\n\nThe answer is 4.',
  '  <think>a</think>b<think>c</think>',
  'Step one.\n</think>\n\n<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>',
  '<think>maybe <tool_call>\n{"name": "g", "arguments": {}}\n</tool_call></think>ok',
  '<think>\n\n</think>\n\nno reasoning here',
  '<think>cut short',
  '<thin',
  '</think></think>',
  '<tool_call>\n<function=calc>\n<parameter=expr>\n1+2\n</parameter>\n</function>\n</tool_call>',
  '<|tool_call_start|>[f(a="x")]<|tool_call_end|>',
  '<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>final<|message|>Sunny.<|return|>',
  '<|channel|>analysis<|message|>x<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}<|call|>',
  '<|start|>assistant to=functions.f<|channel|>commentary json<|message|>{"a": [1, 2]}<|call|>',
  '<|channel|>commentary to=functions.f <|constrain|>json<|message|>not json<|call|>',
  '<|channel|>commentary<|message|>A preamble.<|end|><|start|>assistant<|channel|>final<|message|>Done',
  'plain text, no channel at all',
  '<|channel|>analysis<|message|>unfinished',
  '<|end|><|start|><|start|><|message|><|call|>',
  '<|channel>thought\nThe user wants <|tool_call>call:f{}<tool_call|> no.\n<channel|>Sunny.<|tool_call>call:get_weather{city:<|"|>Paris<|"|>}<tool_call|>',
  '<|channel>thought\n<channel|>',
  '<|channel>though',
  '',
];

const MARKERS = ['<think>', '</think>', '\n', ' ', '<tool_call>', '</tool_call>', '{"name": "f", "arguments": {}}',
  '<|start|>', 'assistant', '<|channel|>', 'analysis', 'final', 'commentary', ' to=functions.f ', '<|constrain|>',
  'json', '<|message|>', '<|end|>', '<|call|>', '<|return|>', '{"a": 1}', '"', '}', '<|',
  '<|channel>', 'thought', '<channel|>', '<|tool_call>', 'call:f{', '<tool_call|>', '<|"|>'];

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

function parse(setting, pieces) {
  const [reasoning, opts] = setting;
  const p = new ChatOutputParser(reasoning, { ...opts, makeId: (i) => `id${i}`,
    tools: [{ type: 'function', function: { name: 'calc', parameters: { type: 'object', properties: { expr: { type: 'string' } } } } }] });
  const ev = [];
  for (const s of pieces) ev.push(...p.push(s));
  ev.push(...p.finish());
  const sum = { reasoning: '', content: '', calls: [] };
  for (const e of ev) {
    if (e.type === 'reasoning' || e.type === 'content') sum[e.type] += e.text;
    else if (e.type === 'call') sum.calls.push({ id: e.id, name: e.name, args: '' });
    else if (e.type === 'args') sum.calls[e.index].args += e.text;
    else throw new Error(`unknown event ${e.type}`);
  }
  return { sum, result: p.result() };
}

/** Checks one input under every setting, whole and split at random points. Throws on failure. */
export function check(text, rnd) {
  for (const setting of SETTINGS) {
    const t0 = Date.now();
    const whole = parse(setting, [text]);
    const cuts = [];
    for (let i = 1; i < text.length; i++) if (rnd() < 0.2) cuts.push(i);
    const pieces = [];
    let at = 0;
    for (const c of cuts) { pieces.push(text.slice(at, c)); at = c; }
    pieces.push(text.slice(at));
    const split = parse(setting, pieces);
    const what = `${JSON.stringify(setting)}`;
    if (JSON.stringify(split) !== JSON.stringify(whole)) {
      throw new Error(`${what}: split parse differs:\n${JSON.stringify(split)}\n${JSON.stringify(whole)}`);
    }
    const r = whole.result;
    if (r.reasoning !== whole.sum.reasoning) throw new Error(`${what}: result.reasoning is not the events'`);
    if (r.reasoning.length > text.length || r.content.length > text.length) throw new Error(`${what}: longer than the input`);
    for (const c of r.calls) if (typeof c.name !== 'string' || c.name === '') throw new Error(`${what}: a call without a name`);
    if (setting[0] === 'harmony' && !r.error) {
      for (const c of r.calls) {
        const v = JSON.parse(c.arguments);
        if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new Error(`${what}: arguments not an object without an error`);
      }
    }
    if (Date.now() - t0 > 2000) throw new Error(`${what}: took ${Date.now() - t0} ms`);
  }
}

function mutate(text, rnd) {
  let s = text;
  const n = 1 + Math.floor(rnd() * 4);
  for (let k = 0; k < n; k++) {
    const i = Math.floor(rnd() * (s.length + 1));
    const op = rnd();
    if (op < 0.35) s = s.slice(0, i) + MARKERS[Math.floor(rnd() * MARKERS.length)] + s.slice(i);
    else if (op < 0.55) s = s.slice(0, i) + s.slice(i + 1 + Math.floor(rnd() * 8));
    else if (op < 0.7 && s.length) s = s.slice(0, i) + String.fromCharCode(32 + Math.floor(rnd() * 95)) + s.slice(i + 1);
    else if (op < 0.85) s = s.slice(0, i) + CORPUS[Math.floor(rnd() * CORPUS.length)].slice(Math.floor(rnd() * 20));
    else s = s.slice(i) + s.slice(0, i);
  }
  return s.length > 4000 ? s.slice(0, 4000) : s;
}

/** Runs the loop: the saved regressions, then `runs` mutated inputs (or until `seconds`). */
export function fuzz({ seed = 1, runs = 1000, seconds = Infinity } = {}) {
  const rnd = rng(seed);
  const saved = existsSync(REGRESSIONS) ? readdirSync(REGRESSIONS).filter((f) => f.endsWith('.json')) : [];
  for (const f of saved) {
    const text = JSON.parse(readFileSync(join(REGRESSIONS, f), 'utf8')).text;
    try { check(text, rnd); } catch (e) { return { runs: 0, failure: { message: e.message, text } }; }
  }
  const end = Date.now() + seconds * 1000;
  let i = 0;
  for (; i < runs && Date.now() < end; i++) {
    const text = mutate(CORPUS[Math.floor(rnd() * CORPUS.length)], rnd);
    try {
      check(text, rnd);
    } catch (e) {
      mkdirSync(REGRESSIONS, { recursive: true });
      const h = createHash('sha256').update(text).digest('hex').slice(0, 16);
      writeFileSync(join(REGRESSIONS, `${h}.json`), JSON.stringify({ text, message: e.message }));
      return { runs: i, failure: { message: e.message, text } };
    }
  }
  return { runs: i };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const arg = (k, d) => Number(process.argv.find((a) => a.startsWith(`-${k}=`))?.split('=')[1] ?? d);
  const res = fuzz({ seed: arg('seed', Date.now() % 1e9), runs: arg('runs', Infinity), seconds: arg('max_total_time', 60) });
  if (res.failure) {
    console.error(`failure after ${res.runs} runs: ${res.failure.message}\ninput: ${JSON.stringify(res.failure.text)}`);
    process.exit(1);
  }
  console.log(`${res.runs} inputs, no failure`);
}
