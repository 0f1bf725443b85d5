// Speculative decoding (issue 25, part 3): decode tokens/s of plain greedy decoding against
// speculative decoding with a draft model and with prompt lookup, and the acceptance rate, on a
// synthetic pair whose acceptance is under control. One JSON line per measurement.
//
//   node bench/speculative.mjs [--shape stories110M] [--active 2] [--noise 0,0.1,0.2,0.3]
//        [--k 2,4,6] [--tokens 128] [--reps 3] [--threads 1] [--target-type Q8_0|F32|...]
//   node bench/speculative.mjs --verify FILE.gguf [--k 7] [--build relaxed|simd128]
//        (only the verification cost of another model)
//   node bench/speculative.mjs --rollback [--tiny] [--k 8] [--keep 1,3,5,7,9] [--rounds 12]
//        [--reps 3] [--build relaxed|simd128]
//        (issue 42: the two rollbacks of a hybrid's recurrent state, below)
//
// The pair (written once into bench/out/, then reused): the target is a synthetic llama2.c
// model of --shape (seeded random weights, tools/synth.mjs's value ranges) in which only the
// first --active layers compute — the later layers' output projections (wo, w2) are zero, so
// they add nothing to the residual stream but cost what a real layer costs — quantized to Q8_0
// (`wasmlm quantize`). The draft is those first --active layers alone, every weight multiplied
// by 1 + noise·u (u uniform in [-1, 1]), quantized to Q4_0: with noise 0 it computes the
// target's function up to quantization, and more noise lowers the acceptance. The real
// Llama 2 vocabulary (../shared/models/tokenizer.bin, 32000 tokens) is in both.
// Measured, alternating A B A B and taking medians (the 2-vCPU machine is shared):
// - plain greedy decode tokens/s of the target (lastResult.decodeTokensPerSec);
// - the same with draft: {maxTokens: k} for each noise and k: tokens/s, acceptance, speed-up;
// - prompt lookup (draft: {ngram: 3}) on a copy-heavy prompt: the target's own greedy text
//   after a seed prompt, then the seed prompt again (the model then repeats itself);
// --rollback: a hybrid target's recurrent state cannot drop rejected drafts; a round either
// snapshots it before the verification and, on a rejection, restores it and replays the kept
// tokens (strategy 1, "replay"), or keeps a copy of the state after each verified position and
// takes the kept one (strategy 2, "positions"): docs/how-it-works.md, speculative rollback. On
// the real_shapes files of Qwen3.5-0.8B and LFM2.5-1.2B (Q4_K_M; --tiny: the synthesizer's tiny
// qwen35 and lfm2 at Q8_0, to check that it runs), raw wasm ABI, one thread:
// - `rollback setup`: state and weight bytes, the strategy the default (auto) takes for k;
// - `rollback round`, per strategy and per kept count (--keep: the pending token and keep - 1
//   accepted drafts of k; keep = k + 1: all accepted, nothing rolled back): the median ms of one
//   verification of k + 1 positions plus its rollback (wlmjs_spec_round, as speculative.c runs
//   them without drafting or deciding), --rounds consecutive rounds a group, groups alternating
//   the strategies --reps times; tokPerSec = keep / round time (the tokens a round yields),
//   against plainTokPerSec (one-token decode steps); `decide` names the faster strategy. The
//   drafting and the decision are the same under both strategies, so the round is where they
//   differ; the acceptance is forced by keep, as random weights give no real acceptance (prompt
//   lookup drafts nothing on these files: their greedy text never repeats the prompt).
// - the cost model: one target decode step (1), one draft step (c_d), one verification pass
//   of k + 1 positions with logits at each (c_v(k)), timed on the raw wasm ABI; predicted
//   speed-up at per-token acceptance a: E / (k·c_d + c_v(k)), E = (1 - a^(k+1)) / (1 - a)
//   tokens per round (Leviathan et al.), also with a free draft (c_d = 0). `alpha` is a
//   solved from the measured tokens per round; acceptedOfDrafted counts the drafts after a
//   rejection as rejected too.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { createEngine } from '../js/wasmlm.js';
import { SHAPES, tensorList, splitmix32 } from '../tools/synth.mjs';
import { synthCached } from '../tools/synth_gguf.mjs';
import { ensureRealGguf } from './real_shapes.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '..');
const OUT_DIR = path.join(HERE, 'out');
const TOKENIZER = path.resolve(REPO, '../shared/models/tokenizer.bin');
const CLI = process.env.WASMLM_CLI || path.join(REPO, 'build/native/wasmlm');

const args = process.argv.slice(2);
const opt = (name, def) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : def;
};
const shapeName = opt('shape', 'stories110M');
const active = Number(opt('active', '2'));
const noises = opt('noise', '0,0.1,0.2,0.3').split(',').map(Number);
const ks = opt('k', '2,4,6').split(',').map(Number);
const nTokens = Number(opt('tokens', '128'));
const reps = Number(opt('reps', '3'));
const threads = Number(opt('threads', '1'));
const targetType = opt('target-type', 'Q8_0'); // the target's weight type (the draft is Q4_0)

const median = (a) => { const s = [...a].sort((x, y) => x - y); return s[s.length >> 1]; };
const emit = (o) => console.log(JSON.stringify({ bench: 'speculative', ...o }));

/** uniform(-a, a) values, xorshift128 seeded by splitmix32 (as tools/synth.mjs). */
function uniform(n, a, seed) {
  const sm = splitmix32(seed >>> 0);
  let x = sm(), y = sm(), z = sm(), w = sm() || 1;
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    const t = x ^ (x << 11);
    x = y; y = z; z = w;
    w = (w ^ (w >>> 19) ^ (t ^ (t >>> 8))) >>> 0;
    out[i] = ((w / 4294967296) * 2 - 1) * a;
  }
  return out;
}

/** Writes a llama2.c checkpoint of shape s from tensors {name: Float32Array} in file order. */
function writeCheckpoint(file, s, tensors) {
  const fd = fs.openSync(file, 'w');
  const hdr = new Int32Array([s.dim, s.hiddenDim, s.nLayers, s.nHeads, s.nKvHeads, s.vocabSize, s.seqLen]);
  fs.writeSync(fd, new Uint8Array(hdr.buffer));
  for (const t of tensorList(s)) {
    const a = tensors[t.name];
    if (a.length !== t.count) throw new Error(`${t.name}: ${a.length} values, want ${t.count}`);
    fs.writeSync(fd, new Uint8Array(a.buffer, a.byteOffset, a.byteLength));
  }
  fs.closeSync(fd);
}

function quantize(src, dst, type) {
  const r = spawnSync(CLI, ['quantize', src, dst, type, '-z', TOKENIZER], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`wasmlm quantize ${type}: ${r.stderr || r.error}`);
}

/** The target (Q8_0) and the drafts (Q4_0, one per noise), written when missing. */
function ensurePair() {
  fs.mkdirSync(OUT_DIR, { recursive: true });
  const base = path.join(OUT_DIR, `spec-${shapeName}-a${active}`);
  const target = `${base}-target-${targetType.toLowerCase()}.gguf`;
  const drafts = noises.map((n) => `${base}-draft-n${n}-q4_0.gguf`);
  if (fs.existsSync(target) && drafts.every((d) => fs.existsSync(d))) return { target, drafts };
  if (!fs.existsSync(CLI)) throw new Error(`${CLI} missing: bash tools/build.sh (or set WASMLM_CLI)`);
  const s = SHAPES[shapeName];
  const std = 0.02, a = std * Math.sqrt(3);
  const tensors = {};
  let seed = 1;
  for (const t of tensorList(s)) {
    tensors[t.name] = t.fill === 'ones' ? new Float32Array(t.count).fill(1)
      : t.fill === 'zeros' ? new Float32Array(t.count) : uniform(t.count, a, seed++);
  }
  tensors.token_embedding.fill(0, 1 * s.dim, 3 * s.dim); // BOS and EOS rows: never argmax
  const perLayer = (name) => tensors[name].length / s.nLayers;
  for (const name of ['wo', 'w2']) tensors[name].fill(0, active * perLayer(name)); // identity layers
  const tmp = `${base}.tmp.bin`;
  console.error(`writing the target (${shapeName}, ${active} of ${s.nLayers} layers computing)`);
  writeCheckpoint(tmp, s, tensors);
  quantize(tmp, target, targetType);
  const ds = { ...s, nLayers: active };
  noises.forEach((noise, i) => {
    const dt = {};
    for (const t of tensorList(ds)) {
      const full = tensors[t.name];
      const part = PER_LAYER.has(t.name) ? full.slice(0, active * perLayer(t.name)) : full.slice();
      if (noise > 0 && t.fill !== 'zeros') {
        const u = uniform(part.length, 1, 1000 + i);
        for (let j = 0; j < part.length; j++) part[j] *= 1 + noise * u[j];
      }
      dt[t.name] = part;
    }
    console.error(`writing the draft, noise ${noise}`);
    writeCheckpoint(tmp, ds, dt);
    quantize(tmp, drafts[i], 'Q4_0');
  });
  fs.rmSync(tmp, { force: true });
  return { target, drafts };
}

const PER_LAYER = new Set(['rms_att', 'wq', 'wk', 'wv', 'wo', 'rms_ffn', 'w1', 'w2', 'w3']);
const PROMPT = 'Once upon a time, there was a little dog named Max. He liked to run in the park.';

async function run(engine, prompt, params) {
  for await (const _ of engine.generate(prompt, { temperature: 0, maxTokens: nTokens, ...params })) { /* drain */ }
  return engine.lastResult;
}

/**
 * The verification pass as speculative decoding runs it: wlm_eval_batch of n entries of one
 * sequence with logits for every entry, after a 32-token prefix, on the raw wasm ABI of the
 * build createEngine picked (`file`), one thread. Returns {n: median ms}, n = 1 .. maxN, rounds
 * alternating the sizes.
 */
async function verifyMs(modelFile, file, maxN, rounds) {
  const { x, ctx, put } = await rawContext(modelFile, file, 256);
  const want = x.wlmjs_malloc(64);
  const evalN = (ids, all) => {
    const tok = put(ids);
    new Uint8Array(x.memory.buffer, want, ids.length).fill(all ? 1 : 0);
    new Uint8Array(x.memory.buffer, want + ids.length - 1, 1).fill(1);
    if (x.wlm_eval_batch(ctx, tok, 0, want, ids.length) !== 0) throw new Error('eval failed');
  };
  const ms = Object.fromEntries(Array.from({ length: maxN }, (_, i) => [i + 1, []]));
  for (let r = 0; r < rounds; r++) {
    for (let n = 1; n <= maxN; n++) {
      x.wlm_context_reset(ctx);
      evalN(Array.from({ length: 32 }, (_, i) => 100 + i), false);
      const t0 = performance.now();
      evalN(Array.from({ length: n }, (_, i) => 300 + i), true);
      ms[n].push(performance.now() - t0);
    }
  }
  x.wlm_context_free(ctx);
  return Object.fromEntries(Object.entries(ms).map(([n, v]) => [n, median(v)]));
}

/** A module instance of dist/`file` (one thread) with a model and a context of nCtx positions. */
async function rawContext(modelFile, file, nCtx) {
  const module = await WebAssembly.compile(fs.readFileSync(path.join(REPO, 'dist', file)));
  const instance = await WebAssembly.instantiate(module, { env: { emscripten_notify_memory_growth() {} } });
  const x = instance.exports;
  x._initialize();
  const bytes = fs.readFileSync(modelFile);
  const ptr = x.wlmjs_malloc(bytes.length);
  new Uint8Array(x.memory.buffer).set(bytes, ptr);
  const slot = x.wlmjs_malloc(8);
  if (x.wlmjs_model_load(ptr, bytes.length, slot) !== 0) throw new Error(`${modelFile}: model load failed`);
  const model = new Int32Array(x.memory.buffer)[slot >> 2];
  if (x.wlmjs_context_new(model, nCtx, 1, 1, 1, 1, 0, -1, slot) !== 0) throw new Error('context failed');
  const ctx = new Int32Array(x.memory.buffer)[slot >> 2];
  const tok = x.wlmjs_malloc(4 * 4096);
  const put = (ids) => { new Int32Array(x.memory.buffer, tok, ids.length).set(ids); return tok; };
  return { x, model, ctx, put };
}

const STRATEGY = { 1: 'replay', 2: 'positions' };

async function rollbackBench() {
  const tiny = args.includes('--tiny');
  const k = Number(opt('k', '8'));
  const keeps = opt('keep', Array.from({ length: Math.ceil((k + 1) / 2) }, (_, i) => 1 + 2 * i).concat(k + 1).filter((v, i, a) => a.indexOf(v) === i).join(','))
    .split(',').map(Number).filter((v) => v >= 1 && v <= k + 1);
  const rounds = Number(opt('rounds', tiny ? '3' : '12'));
  const repsR = tiny ? 1 : reps;
  const file = opt('build', 'relaxed') === 'relaxed' ? 'wasmlm-relaxed.wasm' : 'wasmlm.wasm';
  const targets = tiny
    ? [['qwen35', 'tiny'], ['lfm2', 'tiny']].map(([arch, shape]) => ({ name: `${arch} ${shape}`, type: 'Q8_0',
      path: synthCached({ arch, shape, seed: 1, type: 'Q8_0' }) }))
    : [['qwen3.5-0.8b', 'Qwen3.5-0.8B'], ['lfm2.5-1.2b', 'LFM2.5-1.2B']].map(([shape, name]) => ({ name, type: 'Q4_K_M',
      path: ensureRealGguf(shape, 'Q4_K_M').path }));
  const prefix = 32;
  const nCtx = prefix + (rounds + 2) * (k + 1) + 64;
  const load = () => os.loadavg().map((v) => v.toFixed(2)).join(' ');
  emit({ what: 'rollback setup', k, keeps, rounds, reps: repsR, build: file, threads: 1,
    cpu: os.cpus()[0]?.model, vcpus: os.cpus().length, node: process.version, load: load() });
  for (const t of targets) {
    const { x, model, ctx, put } = await rawContext(t.path, file, nCtx);
    const vocab = x.wlmjs_model_info(model, 5);
    const rand = splitmix32(7);
    const ids = (n) => Array.from({ length: n }, () => 3 + (rand() % (vocab - 3)));
    const prompt = ids(prefix);
    emit({ what: 'rollback setup', model: t.name, type: t.type, file: path.basename(t.path),
      stateBytes: x.wlmjs_model_info(model, 14), weightBytes: x.wlmjs_model_info(model, 11),
      copiesBytes: k * x.wlmjs_model_info(model, 14), autoStrategy: STRATEGY[x.wlmjs_spec_rollback(ctx, 0, k + 1)] });
    // one-token decode steps: the plain rate
    const plainMs = [];
    for (let r = 0; r < repsR; r++) {
      x.wlm_context_reset(ctx);
      if (x.wlm_eval_batch(ctx, put(prompt), 0, 0, prompt.length) !== 0) throw new Error('prefill failed');
      for (let i = 0; i < rounds; i++) {
        const t0 = performance.now();
        if (x.wlm_eval_batch(ctx, put(ids(1)), 0, 0, 1) !== 0) throw new Error('decode failed');
        plainMs.push(performance.now() - t0);
      }
    }
    const plainTokPerSec = 1000 / median(plainMs);
    for (const keep of keeps) {
      const ms = { 1: [], 2: [] };
      for (let r = 0; r < repsR; r++) {
        for (const mode of r % 2 ? [2, 1] : [1, 2]) { // A B, then B A
          x.wlmjs_spec_rollback(ctx, mode, k + 1);
          x.wlm_context_reset(ctx);
          if (x.wlm_eval_batch(ctx, put(prompt), 0, 0, prompt.length) !== 0) throw new Error('prefill failed');
          for (let i = 0; i < rounds; i++) {
            const round = ids(k + 1);
            const t0 = performance.now();
            const took = x.wlmjs_spec_round(ctx, put(round), k + 1, keep);
            ms[mode].push(performance.now() - t0);
            if (took !== mode) throw new Error(`round: strategy ${took}, asked ${mode}`);
          }
        }
      }
      const row = {};
      for (const mode of [1, 2]) {
        const m = median(ms[mode]);
        row[STRATEGY[mode]] = { roundMs: +m.toFixed(2), tokPerSec: +(keep * 1000 / m).toFixed(2) };
      }
      emit({ what: 'rollback round', model: t.name, k, keep, acceptedDrafts: keep - 1, rolledBack: keep <= k,
        plainTokPerSec: +plainTokPerSec.toFixed(2), ...row,
        decide: row.replay.roundMs <= row.positions.roundMs ? 'replay' : 'positions',
        positionsOverReplay: +(row.positions.roundMs / row.replay.roundMs).toFixed(3), load: load() });
    }
    x.wlm_context_free(ctx);
    x.wlm_model_free(model);
  }
  emit({ what: 'done', loadAfter: load() });
}

async function main() {
  if (args.includes('--rollback')) return rollbackBench();
  const verifyOnly = opt('verify', null); // --verify FILE: only the verification cost of FILE
  if (verifyOnly) {
    const tv = await verifyMs(verifyOnly, opt('build', 'relaxed') === 'relaxed' ? 'wasmlm-relaxed.wasm' : 'wasmlm.wasm',
      Math.max(...ks) + 1, 2 * reps + 1);
    emit({ what: 'verify cost', file: path.basename(verifyOnly), target1Ms: +tv[1].toFixed(2), load: os.loadavg().map((x) => x.toFixed(2)).join(' '),
      cVerify: Object.fromEntries(Object.entries(tv).map(([n, v]) => [n, +(v / tv[1]).toFixed(3)])) });
    return;
  }
  const { target, drafts } = ensurePair();
  const load = os.loadavg().map((x) => x.toFixed(2)).join(' ');
  const engine = await createEngine({ threads });
  await engine.threadsReady;
  await engine.load({ model: target, nCtx: 1024 });
  const machine = { cpu: os.cpus()[0]?.model, vcpus: os.cpus().length, node: process.version,
    build: engine.info.build, threads: engine.threads, load };
  emit({ what: 'setup', shape: shapeName, active, targetType, tokens: nTokens, reps, ...machine });

  // the cost model, in units of one target decode step: a verification of n positions
  // (c_v), and one draft step (c_d, its one-token pass)
  const file = engine.info.build === 'relaxed' ? 'wasmlm-relaxed.wasm' : 'wasmlm.wasm';
  const maxK = Math.max(...ks);
  const tv = await verifyMs(target, file, maxK + 1, 2 * reps + 1);
  const cVerify = Object.fromEntries(Object.entries(tv).map(([n, v]) => [n, +(v / tv[1]).toFixed(3)]));
  emit({ what: 'verify cost', note: 'ms of one pass over n positions with logits at each, over n = 1', target1Ms: +tv[1].toFixed(2), cVerify });
  const costs = [];
  for (let i = 0; i < noises.length; i++) {
    const td = await verifyMs(drafts[i], file, 1, 2 * reps + 1);
    const tt = await verifyMs(target, file, 1, 2 * reps + 1); // alternating with the draft's
    costs.push({ cDraft: td[1] / tt[1], cVerify: Object.fromEntries(ks.map((k) => [k, cVerify[k + 1]])) });
    emit({ what: 'draft cost', noise: noises[i], draft1Ms: +td[1].toFixed(2), target1Ms: +tt[1].toFixed(2), cDraft: +(td[1] / tt[1]).toFixed(3) });
  }

  const plainText = (await run(engine, PROMPT, {})).text;
  const copyPrompt = PROMPT + plainText + ' ' + PROMPT;
  for (const [label, prompt] of [['plain prompt', PROMPT], ['copy-heavy prompt', copyPrompt]]) {
    const plain = [], spec = [];
    let acc = 0, drafted = 0;
    for (let r = 0; r < reps; r++) {
      plain.push((await run(engine, prompt, {})).decodeTokensPerSec);
      const s = await run(engine, prompt, { draft: { ngram: 3, maxTokens: 8 } });
      spec.push(s.decodeTokensPerSec);
      acc += s.accepted;
      drafted += s.drafted;
    }
    emit({ what: 'prompt lookup', prompt: label, ngram: 3, maxTokens: 8, plainTokPerSec: +median(plain).toFixed(2),
      specTokPerSec: +median(spec).toFixed(2), speedup: +(median(spec) / median(plain)).toFixed(3),
      acceptance: +(acc / Math.max(1, drafted)).toFixed(3), drafted: drafted / reps });
  }

  for (let i = 0; i < noises.length; i++) {
    await engine.loadDraft({ model: drafts[i] });
    for (const k of ks) {
      const plain = [], spec = [];
      let acc = 0, drafted = 0, rounds = 0;
      for (let r = 0; r < reps; r++) { // A B A B
        plain.push((await run(engine, PROMPT, {})).decodeTokensPerSec);
        const s = await run(engine, PROMPT, { draft: { maxTokens: k } });
        spec.push(s.decodeTokensPerSec);
        acc += s.accepted;
        drafted += s.drafted;
        rounds += s.rounds;
      }
      const a = acc / Math.max(1, drafted);
      const perRound = (acc + rounds) / Math.max(1, rounds);
      // the per-token acceptance alpha of Leviathan et al.: E[tokens per round] = (1 - a^(k+1)) / (1 - a)
      let lo = 0, hi = 0.9999;
      for (let it = 0; it < 60; it++) {
        const mid = (lo + hi) / 2;
        if ((1 - mid ** (k + 1)) / (1 - mid) < perRound) lo = mid; else hi = mid;
      }
      const alpha = lo;
      const c = costs[i];
      const predicted = (alpha) => ((1 - alpha ** (k + 1)) / (1 - alpha)) / (k * c.cDraft + c.cVerify[k]);
      emit({ what: 'draft model', noise: noises[i], k, plainTokPerSec: +median(plain).toFixed(2),
        specTokPerSec: +median(spec).toFixed(2), speedup: +(median(spec) / median(plain)).toFixed(3),
        acceptedOfDrafted: +a.toFixed(3), alpha: +alpha.toFixed(3), tokensPerRound: +perRound.toFixed(2),
        predictedSpeedup: +predicted(Math.min(alpha, 0.999)).toFixed(3), predictedAt80: +predicted(0.8).toFixed(3),
        predictedAt80FreeDraft: +(((1 - 0.8 ** (k + 1)) / 0.2) / c.cVerify[k]).toFixed(3) });
    }
  }
  emit({ what: 'done', loadAfter: os.loadavg().map((x) => x.toFixed(2)).join(' ') });
  await engine.free();
}

await main();
