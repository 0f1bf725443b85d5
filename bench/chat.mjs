#!/usr/bin/env node
// bench/chat.mjs — `npm run bench:chat`: what reusing the KV cache buys a conversation. A
// synthetic GGUF (bench/models.mjs; default the stories110M shape in Q8_0) with a small chat
// template passed to engine.chat(): a first turn with a ~200-token system prompt, then the
// second turn's time to its first token with the cache of the first turn reused (cachePrompt,
// chat()'s default) against a full re-prefill (cachePrompt: false). One thread, medians.
//
//   node bench/chat.mjs [--shape stories110M] [--type Q8_0] [--runs 5] [--json]

import { createEngine } from '../js/wasmlm.js';
import { ensureGguf } from './models.mjs';

const args = process.argv.slice(2);
const opt = (name, dflt) => { const i = args.indexOf(name); return i >= 0 ? args[i + 1] : dflt; };
const shape = opt('--shape', 'stories110M'), type = opt('--type', 'Q8_0');
const runs = Number(opt('--runs', '5'));
const log = (m) => process.stderr.write(`${m}\n`);

const TEMPLATE = '{{ bos_token }}{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}' +
  '{% if add_generation_prompt %}<|assistant|>{% endif %}';
const SYSTEM = 'Once upon a time there was a little girl named Lily. She liked to play in the park ' +
  'with her dog Max. ';

/** Milliseconds from the call to the first token; the rest of the turn is consumed untimed. */
async function firstTokenMs(iterable) {
  const t0 = performance.now();
  let ms = null;
  for await (const t of iterable) if (ms === null && t.id >= 0) ms = performance.now() - t0;
  return ms;
}

const meta = await ensureGguf(shape, type, { log });
const engine = await createEngine({ threads: 1 });
await engine.load({ model: meta.path, nCtx: 1024 });
const params = { temperature: 0, maxTokens: 32, chatTemplate: TEMPLATE };
const turn1 = [{ role: 'system', content: SYSTEM.repeat(6) }, { role: 'user', content: 'Tell me a story about a cat.' }];
await firstTokenMs(engine.chat(turn1, params));
const turn2 = [...turn1, { role: 'assistant', content: engine.lastResult.text }, { role: 'user', content: 'And then?' }];
const reused = [], full = [];
let nPrompt = 0, nCached = 0;
for (let i = 0; i < runs; i++) {
  await firstTokenMs(engine.chat(turn1, params)); // the cache holds turn 1, as in a conversation
  reused.push(await firstTokenMs(engine.chat(turn2, params)));
  ({ nPrompt, nCached } = engine.lastResult);
  full.push(await firstTokenMs(engine.chat(turn2, { ...params, cachePrompt: false })));
}
await engine.free();
const median = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];
const r = { shape, type, runs, nPrompt, nCached, reusedMs: median(reused), fullMs: median(full) };
if (args.includes('--json')) console.log(JSON.stringify(r));
else {
  console.log(`${shape} ${type}, turn 2: ${nPrompt} prompt tokens, ${nCached} reused from turn 1`);
  console.log(`time to first token: ${r.reusedMs.toFixed(1)} ms reused vs ${r.fullMs.toFixed(1)} ms ` +
    `full re-prefill (${(r.fullMs / r.reusedMs).toFixed(1)}×, medians of ${runs})`);
}
