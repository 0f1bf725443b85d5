#!/usr/bin/env node
// bench/tool_calls.mjs — what tool calling costs per decoded token, on the stories110M shape
// (Q8_0, bench/models.mjs) with a 128-token greedy generation, one thread, alternating A B C:
//   free     generate() with no grammar;
//   dormant  a lazy grammar whose trigger word never appears (the trigger search after each
//            token: src/sampling/grammar_lazy.c), which must cost nothing measurable;
//   held     a grammar that holds every token (a JSON object of a tool-call-like schema, the
//            mask built whenever the sampled token is refused).
// Prints decode tokens/s medians (and, with --json, one JSON line).
//
//   node bench/tool_calls.mjs [--shape stories110M] [--type Q8_0] [--runs 5] [--json]

import { createEngine } from '../js/wasmlm.js';
import { ensureGguf } from './models.mjs';

const args = process.argv.slice(2);
const opt = (name, dflt) => { const i = args.indexOf(name); return i >= 0 ? args[i + 1] : dflt; };
const shape = opt('--shape', 'stories110M'), type = opt('--type', 'Q8_0');
const runs = Number(opt('--runs', '5'));
const log = (m) => process.stderr.write(`${m}\n`);

const meta = await ensureGguf(shape, type, { log });
const engine = await createEngine({ threads: 1 });
await engine.load({ model: meta.path });
const schema = { type: 'object', properties: { name: { const: 'calculator' },
  arguments: { type: 'object', properties: { expression: { type: 'string' } }, required: ['expression'] } },
required: ['name', 'arguments'] };
const base = { temperature: 0, maxTokens: 128 };
const cases = {
  free: base,
  dormant: { ...base, grammar: `root ::= "<tool_call>" [0-9]`, grammarLazy: true, grammarTriggers: ['<tool_call>', '{"name"'] },
  held: { ...base, jsonSchema: schema },
};
const rates = Object.fromEntries(Object.keys(cases).map((k) => [k, []]));
const tokens = {};
for (let r = 0; r < runs + 1; r++) {
  for (const [k, params] of Object.entries(cases)) {
    const res = await engine.complete('Once upon a time', params);
    if (r > 0) rates[k].push(res.decodeTokensPerSec); // the first round warms up
    tokens[k] = res.nGenerated;
  }
}
const median = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];
const out = { shape, type, runs, tokens, decodeTokensPerSec: Object.fromEntries(Object.entries(rates).map(([k, a]) => [k, median(a)])) };
out.dormantOverFree = out.decodeTokensPerSec.dormant / out.decodeTokensPerSec.free;
out.heldOverFree = out.decodeTokensPerSec.held / out.decodeTokensPerSec.free;
if (args.includes('--json')) console.log(JSON.stringify(out));
else {
  for (const [k, v] of Object.entries(out.decodeTokensPerSec)) console.log(`${k.padEnd(8)} ${v.toFixed(1)} tok/s (${tokens[k]} tokens)`);
  console.log(`dormant / free ${out.dormantOverFree.toFixed(3)}, held / free ${out.heldOverFree.toFixed(3)}`);
}
await engine.free();
