#!/usr/bin/env node
// bench/soak.mjs — a soak run, not part of CI: one engine does N iterations (default 10 000) of
// short generations and chat turns, with aborts and reloads mixed in, and the wasm memory and
// the process's resident memory are sampled every 500 iterations. Passes (exit 0) when neither
// grows after the first checkpoint by more than --slack MB (default 16): a leak of even a few
// hundred bytes per iteration shows. Model: ../shared/models/stories260K.gguf with a small chat
// template passed to chat() (the file has none).
//
//   node bench/soak.mjs [--iterations 10000] [--slack 16] [--json]

import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createEngine } from '../js/wasmlm.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const MODEL = path.resolve(HERE, '../../shared/models/stories260K.gguf');
const args = process.argv.slice(2);
const opt = (name, dflt) => { const i = args.indexOf(name); return i >= 0 ? Number(args[i + 1]) : dflt; };
const N = opt('--iterations', 10000), SLACK = opt('--slack', 16) * 2 ** 20;
const TEMPLATE = '{{ bos_token }}{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}' +
  '{% if add_generation_prompt %}assistant:{% endif %}';
const mb = (b) => (b / 2 ** 20).toFixed(1);

const engine = await createEngine({ threads: 1 });
await engine.load({ model: MODEL });
const samples = [];
const counts = { generate: 0, chat: 0, aborted: 0, reloads: 0, tokens: 0 };
let conversation = [];
const t0 = performance.now();
for (let i = 1; i <= N; i++) {
  const kind = i % 4;
  if (i % 1000 === 0) { // reload: the old model and context must be freed
    await engine.load({ model: MODEL, kvType: i % 2000 === 0 ? 'f32' : 'f16' });
    counts.reloads++;
    conversation = [];
  }
  if (kind === 0) { // abort after a few tokens
    const ctl = new AbortController();
    let n = 0;
    try {
      for await (const t of engine.generate('Once upon a time', { maxTokens: 64, seed: i }, { signal: ctl.signal })) {
        counts.tokens++;
        if (++n === 3) ctl.abort();
      }
    } catch (e) {
      if (e.name !== 'AbortError') throw e;
      counts.aborted++;
    }
  } else if (kind === 1 || kind === 2) { // a chat turn; the conversation restarts every 8 turns
    if (conversation.length >= 16) conversation = [];
    conversation.push({ role: 'user', content: `Tell me about the dog number ${i}.` });
    for await (const t of engine.chat(conversation, { maxTokens: 8, seed: i, chatTemplate: TEMPLATE })) counts.tokens += t.id >= 0;
    conversation.push({ role: 'assistant', content: engine.lastResult.text });
    counts.chat++;
  } else {
    for await (const t of engine.generate('The little dog', { maxTokens: 8, seed: i, temperature: 0.8 })) counts.tokens += t.id >= 0;
    counts.generate++;
  }
  if (i % 500 === 0) {
    samples.push({ i, wasm: engine.wasmMemoryBytes, rss: process.memoryUsage().rss });
    process.stderr.write(`${i}: wasm ${mb(samples.at(-1).wasm)} MB, rss ${mb(samples.at(-1).rss)} MB\n`);
  }
}
await engine.free();
const first = samples[0], last = samples.at(-1);
const maxOf = (k) => Math.max(...samples.map((s) => s[k]));
const growth = { wasm: maxOf('wasm') - first.wasm, rss: maxOf('rss') - first.rss };
const ok = growth.wasm <= SLACK && growth.rss <= SLACK;
const result = { iterations: N, seconds: (performance.now() - t0) / 1e3, counts, first, last,
  maxWasm: maxOf('wasm'), maxRss: maxOf('rss'), growth, slack: SLACK, ok };
if (args.includes('--json')) console.log(JSON.stringify(result));
else {
  console.log(`${N} iterations in ${result.seconds.toFixed(0)} s: ${counts.generate} generations, ${counts.chat} chat ` +
    `turns, ${counts.aborted} aborted, ${counts.reloads} reloads, ${counts.tokens} tokens`);
  console.log(`wasm memory ${mb(first.wasm)} MB at ${first.i} → max ${mb(result.maxWasm)} MB; resident ${mb(first.rss)} MB → ` +
    `max ${mb(result.maxRss)} MB (${ok ? 'bounded' : 'GROWING'}: slack ${mb(SLACK)} MB)`);
}
process.exit(ok ? 0 : 1);
