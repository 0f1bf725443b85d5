#!/usr/bin/env node
// tools/oracle.mjs — records llama.cpp's outputs on a GGUF file as reference data for our tests:
// @wllama/wllama (3.13.0: llama.cpp b12211 compiled to wasm) runs in headless Chromium
// (tools/oracle/page.js) and, for each prompt, a greedy continuation of --tokens tokens with the
// top --probs next-token log-probabilities at every step (softmax of the raw logits). The JSON
// names the file by size and sha256, so a test that regenerates a synthetic model can check that
// it compares against the same bytes.
//
//   node tools/oracle.mjs --model FILE.gguf --out tests/reference/oracle/NAME.json
//        [--prompts FILE.json] [--tokens 32] [--probs 10] [--ctx 512] [--kv f32|f16] [--note TEXT]
//        [--verbose]
//   node tools/oracle.mjs --synth all|NAME[,NAME…]     (the synthetic models' records)
//   node tools/oracle.mjs --embed-synth all|NAME[,NAME…]   (embeddings and rerank scores:
//        EMBED_RECORDS → tests/reference/oracle/embed/NAME.json)
//   node tools/oracle.mjs --vision-synth all|NAME[,NAME…]  (images through llama.cpp's mtmd:
//        VISION_RECORDS → tests/reference/oracle/vision/NAME.json; tests/c/vision_oracle.c)
//
// --synth: for each of SYNTH_RECORDS (or those named), builds the model with
// tools/synth_gguf.mjs (cached under build/synth; types other than F32 need the native CLI,
// build/native/wasmlm), runs it over ARCH_PROMPTS and writes tests/reference/oracle/NAME.json
// with the synthesizer's arguments. --verbose prints llama.cpp's log (load errors name the key
// or tensor).
//
// --kv: llama.cpp's KV cache type (default f32, so an F32 model is compared without the
// rounding of llama.cpp's default F16 cache). Flash attention is off: llama.cpp's CPU flash
// attention rounds through F16 (on stories260K its log-probabilities then differ from run.c's
// by up to 5e-3; without it they agree with run.c's to 1e-5).
//
// Default prompts: ORACLE_PROMPTS below (20 short English texts). The model file may live
// anywhere on this machine: it is served from its own directory on 127.0.0.1 for the run.

import fs from 'node:fs';
import crypto from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import http from 'node:http';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { startServer } from './serve.mjs';
import { synthCached, synthArgs } from './synth_gguf.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '..');

export const ORACLE_PROMPTS = Object.freeze([
  'Once upon a time', 'The little dog', 'Lily wanted to play with her ball',
  'One day, a boy named Tom', 'The sun was shining and', 'She looked at the sky and said',
  'There was a big red', 'Mom said, "Let\'s go to the park', 'The cat and the bird were',
  'Every morning, the old man', 'In a small house near the sea', 'He was very sad because',
  'They found a box under the tree.', 'The quick brown fox', 'Water is made of',
  'def add(a, b):', '1, 2, 3, 4,', 'Hello! How are you today?', 'The capital of France is',
  'Ben liked to draw pictures of',
]);

/** Prompts for the synthetic models of every architecture: varied (prose, code, numbers, JSON,
 *  markup, accents, CJK, emoji, whitespace runs), several longer than gemma3 tiny's 8-token
 *  sliding window by far (up to ~170 tokens), so windowed attention is exercised in prefill. */
export const ARCH_PROMPTS = Object.freeze([
  'Once upon a time',
  'The quick brown fox jumps over the lazy dog.',
  'def fibonacci(n):\n    if n < 2:\n        return n\n    return',
  '1, 2, 3, 4, 5, 6, 7, 8,',
  'The capital of France is',
  'Hello! How are you today?',
  'Café, naïve, résumé: déjà vu.',
  '東京は日本の首都です。',
  '{"name": "Alice", "age": 30, "city":',
  'In 1492, Columbus sailed the ocean blue. In 1969,',
  'SELECT id, name FROM users WHERE',
  'x = 3.14159 * r ** 2  # area of a circle',
  'Q: What is 12 times 12?\nA:',
  '<html><body><h1>Title</h1>',
  'Roses are red,\nviolets are blue,',
  '   leading spaces and\ttabs\n\nnewlines',
  'ALL CAPS SENTENCE WITH NUMBERS 2024 AND SYMBOLS #@!',
  'Ein kleiner Hund lief über die Straße.',
  'a',
  '🙂 emoji test 🚀',
  'The weather had been strange all week. On Monday it snowed, on Tuesday the sun came out and ' +
    'melted everything, and by Wednesday the streets were rivers. Nobody in the village could ' +
    'remember a spring like it, not even old Mrs. Patel, who had lived there for ninety years and ' +
    'kept a diary of every storm.',
  'A hash table stores key-value pairs in an array of buckets. A hash function maps each key to ' +
    'a bucket index; collisions, where two keys map to the same bucket, are resolved by chaining ' +
    'or open addressing. With a good hash function and a load factor below one, lookups, inserts ' +
    'and deletes take constant time on average.',
  'Chapter 1\n\nThe train left the station at dawn. Mara pressed her face to the cold window and ' +
    'watched the city shrink behind her: the cranes, the gray towers, the river with its seven ' +
    'bridges. She had packed in a hurry: two shirts, a notebook, her grandmother\'s compass, and a ' +
    'letter she had not yet found the courage to open. The conductor, a tall man with a silver ' +
    'mustache, punched her ticket without a word. Outside, fields of wheat rolled past, then ' +
    'forests, then mountains whose peaks were still white with snow. By noon she had read the ' +
    'first line of the letter eleven times.',
  'for (int i = 0; i < n; i++) {\n    sum += a[i] * b[i];\n}\nreturn',
]);

/**
 * The reference records of the synthetic models (tools/synth_gguf.mjs, seed 1): each
 * architecture's tiny shape in F32, Q8_0 and Q4_K_M, the hybrids' second tiny shape
 * (tiny-untied: <arch>-untied-<type>), and SmolLM2-style llama (GPT-2 vocabulary). Written to
 * tests/reference/oracle/<name>.json by `node tools/oracle.mjs --synth`.
 */
export const SYNTH_RECORDS = Object.freeze([
  ...['llama', 'qwen2', 'qwen2vl', 'qwen3', 'gemma3', 'phi3', 'gpt2', 'qwen35', 'lfm2', 'smollm3', 'qwen3moe', 'lfm2moe', 'gemma4'].flatMap((arch) =>
    ['F32', 'Q8_0', 'Q4_K_M'].map((type) => ({ name: `${arch}-${type}`, arch, shape: 'tiny', seed: 1, type }))),
  // gpt-oss: F32, Q8_0 and llama.cpp's MXFP4_MOE (the published files' kind: MXFP4 experts, the
  // other matrices Q8_0)
  ...['F32', 'Q8_0', 'MXFP4_MOE'].map((type) => ({ name: `gpt-oss-${type}`, arch: 'gpt-oss', shape: 'tiny', seed: 1, type })),
  ...['qwen35', 'lfm2'].flatMap((arch) =>
    ['F32', 'Q8_0', 'Q4_K_M'].map((type) => ({ name: `${arch}-untied-${type}`, arch, shape: 'tiny-untied', seed: 1, type }))),
  { name: 'smollm2-F32', arch: 'llama', shape: 'smollm2-tiny', seed: 1, type: 'F32' },
  // every weight matrix MXFP4 (llama.cpp multiplies it with Q8_0 activations, as we do)
  { name: 'llama-MXFP4', arch: 'llama', shape: 'tiny', seed: 1, type: 'MXFP4' },
  // Gemma 4's mixture-of-experts kind (26B-A4B: experts beside the dense feed-forward)
  ...['F32', 'Q8_0'].map((type) => ({ name: `gemma4-moe-${type}`, arch: 'gemma4', shape: 'tiny-moe', seed: 1, type })),
  // phi3 at context 8192 (> rope.scaling.original_context_length 4096): LongRoPE's long factors
  { name: 'phi3-F32-ctx8192', arch: 'phi3', shape: 'tiny', seed: 1, type: 'F32', ctx: 8192 },
]);

/**
 * Embedding records (tools/oracle/page.js's oracleEmbed): the encoders, Qwen3-Embedding's and
 * EmbeddingGemma's shapes, F32 and quantized, over ARCH_PROMPTS, each text embedded alone by llama.cpp's server code
 * (special tokens added, L2-normalized); and a BERT cross-encoder's and a Qwen3-Reranker's rerank scores. Written to
 * tests/reference/oracle/embed/<name>.json by `node tools/oracle.mjs --embed-synth all`.
 */
export const EMBED_RECORDS = Object.freeze([
  ...['bert', 'nomic-bert'].flatMap((arch) =>
    ['F32', 'Q8_0', 'Q4_K_M'].map((type) => ({ name: `${arch}-${type}`, arch, shape: 'tiny', seed: 1, type }))),
  ...['F32', 'Q8_0', 'Q4_K_M'].map((type) => ({ name: `qwen3-embedding-${type}`, arch: 'qwen3', shape: 'embedding-tiny', seed: 1, type })),
  ...['F32', 'Q8_0', 'Q4_K_M'].map((type) => ({ name: `gemma-embedding-${type}`, arch: 'gemma-embedding', shape: 'tiny', seed: 1, type })),
  { name: 'bert-rerank-F32', arch: 'bert', shape: 'rerank-tiny', seed: 1, type: 'F32', pooling: 'rank' },
  // Qwen3-Reranker's shape: the rerank template, the last token, a softmax over "yes" / "no"
  { name: 'qwen3-rerank-F32', arch: 'qwen3', shape: 'rerank-tiny', seed: 1, type: 'F32', pooling: 'rank' },
]);

/**
 * Vision records (tools/oracle/page.js's oracleVision): each synthetic mmproj of
 * tools/synth_mmproj.mjs with its paired synthetic text model, images of several sizes and
 * aspect ratios (synth_mmproj.mjs's testImage, sent as PNG), greedy continuations with the top
 * log-probabilities. Written to tests/reference/oracle/vision/<name>.json by
 * `node tools/oracle.mjs --vision-synth all`.
 */
export const VISION_RECORDS = Object.freeze([
  ...['F32', 'F16', 'Q8_0'].map((type) => ({ name: `gemma3-${type}`, shape: 'gemma3-tiny', type, seed: 1,
    text: { arch: 'gemma3', shape: 'tiny', seed: 1, type: 'F32' },
    sizes: [[112, 112], [80, 50], [37, 90], [300, 200], [113, 111]] })),
  // Gemma 3's real 256 rows an image (one pass of all of them: they see each other both ways)
  { name: 'gemma3-rows256-F32', shape: 'gemma3-rows256', type: 'F32', seed: 1, ctx: 2048,
    text: { arch: 'gemma3', shape: 'tiny', seed: 1, type: 'F32' }, sizes: [[224, 224], [300, 200], [100, 150], [64, 64], [250, 251]] },
  ...['F32', 'F16', 'Q8_0'].map((type) => ({ name: `idefics3-${type}`, shape: 'idefics3-tiny', type, seed: 1,
    text: { arch: 'llama', shape: 'smolvlm-tiny', seed: 1, type: 'F32' },
    sizes: [[64, 64], [100, 60], [30, 130], [150, 150], [20, 20]] })),
  // LFM2-VL: one smart-resized piece per image (64 → 64×64 kept, 90×50 → 88×48, 30×130 →
  // 32×128, 200×150 → 144×104 by the area bound, 41×37 → 72×64 by the lower bound), the
  // positions resized to each patch grid; no size here reaches llama.cpp's tiling
  ...['F32', 'F16', 'Q8_0'].map((type) => ({ name: `lfm2-${type}`, shape: 'lfm2-tiny', type, seed: 1,
    text: { arch: 'lfm2', shape: 'tiny', seed: 1, type: 'F32' },
    sizes: [[64, 64], [90, 50], [30, 130], [200, 150], [41, 37]] })),
  // LFM2-VL's tiles: 800×700 → 2×2 tiles of 512 + a 544×448 thumbnail, 600×1000 → 2×3; 1300×400
  // (520000 pixels, under 2·256·32²) stays one piece
  // (a text model whose vocabulary has LFM2-VL's image tokens)
  { name: 'lfm2-tiles-F32', shape: 'lfm2-p16', type: 'F32', seed: 1, ctx: 4096,
    text: { arch: 'lfm2', shape: 'vl-tiny', seed: 1, type: 'F32' },
    sizes: [[800, 700], [300, 200], [1300, 400], [600, 1000]] },
  // flat images: everything but the resampling
  { name: 'lfm2-F32-flat', shape: 'lfm2-tiny', type: 'F32', seed: 1, image: 'flat',
    text: { arch: 'lfm2', shape: 'tiny', seed: 1, type: 'F32' },
    sizes: [[64, 64], [90, 50], [30, 130], [200, 150], [41, 37]] },
  // LFM2-VL's real patch geometry (P 16, s 2) on large images that stay one piece: 1100×300 is
  // below llama.cpp b12211's tiling threshold (the rounded area over twice 256 tokens' — not a
  // side over 1024, which older mtmd used); 800×700, above it, cannot be recorded with this
  // vocabulary (mtmd looks <|img_thumbnail|> up as a token: "Invalid token")
  { name: 'lfm2-p16-F32', shape: 'lfm2-p16', type: 'F32', seed: 1, ctx: 2048,
    text: { arch: 'lfm2', shape: 'tiny', seed: 1, type: 'F32' },
    sizes: [[300, 200], [1100, 300], [300, 1100], [500, 400]] },
  // Qwen2.5-VL: one smart-resized piece (multiples of 28 within 8..4096 merged tokens: 224×168
  // kept, 100×60 → 112×56, 300×200 → 308×196 (11×7 groups: partial windows), 30×130 → 56×168
  // and 57×57 → 84×84 by the lower bound), window attention, the qwen2vl text model's M-RoPE
  // positions of the image rows and of the text after them
  ...['F32', 'F16', 'Q8_0'].map((type) => ({ name: `qwen25vl-${type}`, shape: 'qwen25vl-tiny', type, seed: 1,
    text: { arch: 'qwen2vl', shape: 'tiny', seed: 1, type: 'F32' },
    sizes: [[224, 168], [100, 60], [300, 200], [30, 130], [57, 57]] })),
  { name: 'qwen25vl-F32-flat', shape: 'qwen25vl-tiny', type: 'F32', seed: 1, image: 'flat',
    text: { arch: 'qwen2vl', shape: 'tiny', seed: 1, type: 'F32' },
    sizes: [[224, 168], [100, 60], [300, 200], [30, 130], [57, 57]] },
  // flat images: the same path without the resampling's part in it
  ...['F32', 'F16'].map((type) => ({ name: `idefics3-${type}-flat`, shape: 'idefics3-tiny', type, seed: 1,
    text: { arch: 'llama', shape: 'smolvlm-tiny', seed: 1, type: 'F32' }, image: 'flat',
    sizes: [[64, 64], [100, 60], [30, 130], [150, 150], [20, 20]] })),
]);

/** The prompts of a vision record: one image per size, then two images in one prompt. */
export function visionCases(rec) {
  const cases = rec.sizes.map(([w, h], i) => ({ prompt: i % 2 ? 'Look at this: <__media__> It shows' : '<__media__>\nDescribe the picture.', images: [[w, h]] }));
  cases.push({ prompt: 'First <__media__> then <__media__> and the difference is', images: [rec.sizes[1], rec.sizes[2]] });
  return cases;
}

/** Runs llama.cpp's image path on a vision record: the reference record. */
export async function runOracleVision(rec, o = {}) {
  const { mmprojBytes, recordImage, pngBytes } = await import('./synth_mmproj.mjs');
  const kind = rec.image ?? 'test';
  const model = synthCached(rec.text);
  const dir = path.join(REPO, 'build/synth');
  fs.mkdirSync(dir, { recursive: true });
  const mmproj = path.join(dir, `mmproj-${rec.shape}-${rec.type}-s${rec.seed}.gguf`);
  fs.writeFileSync(mmproj, mmprojBytes(rec));
  const cases = visionCases(rec);
  const pngs = new Map();
  for (const c of cases) for (const [w, h] of c.images) {
    if (!pngs.has(`${w}x${h}`)) pngs.set(`${w}x${h}`, await pngBytes(recordImage(kind, w, h, rec.seed), w, h));
  }
  return withOraclePage({ ...o, model, mmproj }, async (page, modelUrl, version) => {
    const r = await page.evaluate((x) => window.oracleVision(x), {
      model: modelUrl, mmproj: modelUrl.replace('model.gguf', 'mmproj.gguf'), maxTokens: o.tokens ?? 16,
      nProbs: o.probs ?? 5, nCtx: o.ctx ?? rec.ctx ?? 1024, verbose: !!o.verbose,
      cases: cases.map((c) => ({ prompt: c.prompt, images: c.images.map(([w, h]) => pngs.get(`${w}x${h}`).toString('base64')) })),
    });
    return {
      generator: 'tools/oracle.mjs --vision-synth',
      reference: `@wllama/wllama ${version} (llama.cpp ${r.llamaCpp} compiled to wasm), headless Chromium, one thread, greedy, F32 KV, raw prompts with the PNG files (page.js oracleVision)`,
      date: new Date().toISOString().slice(0, 10),
      model: { file: path.basename(model), size: fs.statSync(model).size, sha256: sha256File(model), synth: synthArgs(rec.text) },
      mmproj: { tool: 'tools/synth_mmproj.mjs', shape: rec.shape, type: rec.type, seed: rec.seed, size: fs.statSync(mmproj).size, sha256: sha256File(mmproj) },
      images: `tools/synth_mmproj.mjs ${kind === 'flat' ? 'flatImage(w, h)' : 'testImage(w, h, seed)'} as PNG (pngBytes)`,
      imageKind: kind,
      tokens: o.tokens ?? 16,
      probs: o.probs ?? 5,
      ctx: o.ctx ?? rec.ctx ?? 1024,
      cases: cases.map((c, i) => ({ prompt: c.prompt, images: c.images, pngSha256: c.images.map(([w, h]) => crypto.createHash('sha256').update(pngs.get(`${w}x${h}`)).digest('hex')), ...r.cases[i] })),
    };
  });
}

/** The reranking query and documents of the rerank record. */
export const RERANK_QUERY = 'What is the capital of France?';
export const RERANK_DOCUMENTS = Object.freeze([
  'Paris is the capital and largest city of France.', 'The quick brown fox jumps over the lazy dog.',
  'Berlin is the capital of Germany.', 'France is a country in Western Europe.',
  'def add(a, b): return a + b', 'The Eiffel Tower is in Paris.',
]);

/**
 * Serves o.model to tools/oracle/index.html (wllama) in a fresh headless Chromium, waits for the
 * page, and returns fn(page, modelUrl, wllama's version); everything is closed afterwards.
 */
/** A headless Chromium for the oracle pages (wllama runs in it), with its profile in `dir`. */
export function launchOracleBrowser(dir) {
  return chromium.launchPersistentContext(dir, {
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium', headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
}

async function withOraclePage(o, fn) {
  const web = await startServer({ port: 0, quiet: true, isolate: false });
  const files = await serveFile(o.model, o.mmproj);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-oracle-'));
  const browser = await launchOracleBrowser(dir);
  try {
    const page = await browser.newPage();
    if (o.verbose) page.on('console', (m) => process.stderr.write(`[page] ${m.text()}\n`));
    await page.goto(web.url.replace(/web\/$/, 'tools/oracle/index.html'));
    await page.waitForFunction(() => document.body.dataset.state === 'ready', null, { timeout: 60_000 });
    const modelUrl = `http://127.0.0.1:${files.address().port}/model.gguf`;
    const pkg = JSON.parse(fs.readFileSync(path.join(REPO, 'node_modules/@wllama/wllama/package.json'), 'utf8'));
    return await fn(page, modelUrl, pkg.version);
  } finally {
    await browser.close();
    fs.rmSync(dir, { recursive: true, force: true });
    files.close();
    await web.close();
  }
}

/** Runs llama.cpp's embeddings (or reranking) on `model`: the reference record. */
export async function runOracleEmbed(o) {
  return withOraclePage(o, async (page, modelUrl, version) => {
    const rerank = o.pooling === 'rank' ? { query: RERANK_QUERY, documents: [...RERANK_DOCUMENTS] } : undefined;
    const r = await page.evaluate((x) => window.oracleEmbed(x),
      { model: modelUrl, texts: o.texts, pooling: o.pooling, nCtx: o.ctx ?? 512, rerank, verbose: !!o.verbose });
    return {
      generator: 'tools/oracle.mjs --embed-synth',
      reference: `@wllama/wllama ${version} (llama.cpp ${r.llamaCpp} compiled to wasm), headless Chromium, one thread, F32 KV`,
      date: new Date().toISOString().slice(0, 10),
      note: o.note ?? undefined,
      model: { file: path.basename(o.model), size: fs.statSync(o.model).size, sha256: sha256File(o.model) },
      architecture: r.metadata?.meta?.['general.architecture'],
      pooling: o.pooling ?? 'the file\'s',
      normalized: 'L2 (llama.cpp server)',
      ctx: o.ctx ?? 512,
      ...(rerank ? { rerank: { query: rerank.query, documents: rerank.documents, results: r.rerank } }
        : { texts: o.texts, embeddings: r.embeddings.map((e) => e.map((v) => Number(v.toPrecision(9)))) }),
    };
  });
}

function parseArgs(argv) {
  const o = { tokens: 32, probs: 10, ctx: 512, prompts: null, model: null, out: null, note: null, kv: 'f32', verbose: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const v = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    if (a === '--model') o.model = path.resolve(v());
    else if (a === '--out') o.out = path.resolve(v());
    else if (a === '--prompts') o.prompts = JSON.parse(fs.readFileSync(v(), 'utf8'));
    else if (a === '--tokens') o.tokens = Number(v());
    else if (a === '--probs') o.probs = Number(v());
    else if (a === '--ctx') o.ctx = Number(v());
    else if (a === '--note') o.note = v();
    else if (a === '--kv') o.kv = v();
    else if (a === '--verbose') o.verbose = true;
    else if (a === '--synth') o.synth = v();
    else if (a === '--embed-synth') o.embedSynth = v();
    else if (a === '--vision-synth') o.visionSynth = v();
    else throw new Error(`unknown argument ${a}`);
  }
  if (o.synth || o.embedSynth || o.visionSynth) return o;
  if (!o.model || !o.out) throw new Error('usage: node tools/oracle.mjs --model FILE.gguf --out FILE.json [--prompts FILE.json] [--tokens N] [--probs N]');
  if (o.kv !== 'f32' && o.kv !== 'f16') throw new Error('--kv must be f32 or f16');
  for (const k of ['tokens', 'probs', 'ctx']) {
    if (!Number.isInteger(o[k]) || o[k] < 1) throw new Error(`--${k} must be a positive integer`);
  }
  return o;
}

export function sha256File(file) { // in 64 MB slices: readFileSync stops at 2 GiB
  const h = crypto.createHash('sha256'), buf = Buffer.alloc(64 << 20), fd = fs.openSync(file, 'r');
  try { for (let n; (n = fs.readSync(fd, buf, 0, buf.length, null)) > 0;) h.update(buf.subarray(0, n)); } finally { fs.closeSync(fd); }
  return h.digest('hex');
}

/** Serves one file at /model.gguf on 127.0.0.1 (Chromium fetches it from the oracle page), and
 *  a vision model's mmproj at /mmproj.gguf when given. */
function serveFile(model, mmproj = null) {
  const server = http.createServer((req, res) => {
    const file = req.url === '/model.gguf' ? model : req.url === '/mmproj.gguf' && mmproj ? mmproj : null;
    if (!file) { res.writeHead(404).end(); return; }
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'access-control-allow-origin': '*',
      'cross-origin-resource-policy': 'cross-origin', 'content-length': fs.statSync(file).size });
    fs.createReadStream(file).pipe(res);
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

/**
 * Runs llama.cpp (wllama in Chromium) on `model` and returns the reference record.
 * @param {{model: string, prompts?: string[], tokens?: number, probs?: number, ctx?: number,
 *   kv?: 'f32'|'f16'}} o
 */
export async function runOracle(o) {
  const prompts = o.prompts ?? ORACLE_PROMPTS;
  return withOraclePage(o, async (page, modelUrl, version) => {
    const r = await page.evaluate((x) => window.oracle(x),
      { model: modelUrl, prompts, maxTokens: o.tokens ?? 32, nProbs: o.probs ?? 10, nCtx: o.ctx ?? 512, kv: o.kv ?? 'f32', verbose: !!o.verbose });
    return {
      generator: 'tools/oracle.mjs',
      reference: `@wllama/wllama ${version} (llama.cpp ${r.llamaCpp} compiled to wasm), headless Chromium, one thread, greedy`,
      date: new Date().toISOString().slice(0, 10),
      note: o.note ?? undefined,
      model: { file: path.basename(o.model), size: fs.statSync(o.model).size, sha256: sha256File(o.model) },
      architecture: r.metadata?.meta?.['general.architecture'],
      eog: r.metadata?.eog, // end-of-generation ids: llama.cpp's ignore_eos never samples them
      tokens: o.tokens ?? 32,
      probs: o.probs ?? 10,
      kvCache: o.kv ?? 'f32',
      ctx: o.ctx ?? 512, // llama.cpp's n_ctx: the test loads with it (phi3's LongRoPE picks its factors by it)
      flashAttn: false,
      warmup: true, // one discarded completion of the first prompt before the recorded ones
      prompts: r.prompts,
    };
  });
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    const o = parseArgs(process.argv.slice(2));
    if (o.visionSynth) {
      const names = o.visionSynth === 'all' ? VISION_RECORDS.map((r) => r.name) : o.visionSynth.split(',');
      for (const name of names) {
        const r = VISION_RECORDS.find((x) => x.name === name);
        if (!r) throw new Error(`no vision record ${name} (${VISION_RECORDS.map((x) => x.name).join(', ')})`);
        const t0 = Date.now();
        const rec = await runOracleVision(r, { verbose: o.verbose });
        const out = path.join(REPO, 'tests/reference/oracle/vision', `${name}.json`);
        fs.mkdirSync(path.dirname(out), { recursive: true });
        fs.writeFileSync(out, `${JSON.stringify(rec, null, 0).replace(/\],\[/g, '],\n[')}\n`);
        console.log(`${out}: ${rec.cases.length} cases, ${((Date.now() - t0) / 1000).toFixed(0)} s`);
      }
      process.exit(0);
    }
    if (o.embedSynth) {
      const names = o.embedSynth === 'all' ? EMBED_RECORDS.map((r) => r.name) : o.embedSynth.split(',');
      for (const name of names) {
        const r = EMBED_RECORDS.find((x) => x.name === name);
        if (!r) throw new Error(`no embedding record ${name} (${EMBED_RECORDS.map((x) => x.name).join(', ')})`);
        const t0 = Date.now();
        const model = synthCached(r);
        const rec = await runOracleEmbed({ ...o, model, texts: [...ARCH_PROMPTS], pooling: r.pooling,
          note: `synthetic ${r.arch} ${r.shape} ${r.type}` });
        rec.synth = { tool: 'tools/synth_gguf.mjs', args: synthArgs(r) };
        const out = path.join(REPO, 'tests/reference/oracle/embed', `${name}.json`);
        fs.writeFileSync(out, `${JSON.stringify(rec, null, 0).replace(/\],\[/g, '],\n[')}\n`);
        console.log(`${out}: ${rec.architecture}, ${((Date.now() - t0) / 1000).toFixed(0)} s`);
      }
      process.exit(0);
    }
    if (o.synth) {
      const names = o.synth === 'all' ? SYNTH_RECORDS.map((r) => r.name) : o.synth.split(',');
      for (const name of names) {
        const r = SYNTH_RECORDS.find((x) => x.name === name);
        if (!r) throw new Error(`no synthetic record ${name} (${SYNTH_RECORDS.map((x) => x.name).join(', ')})`);
        const t0 = Date.now();
        const model = synthCached(r);
        const rec = await runOracle({ ...o, ctx: r.ctx ?? o.ctx, model, prompts: ARCH_PROMPTS,
          note: `synthetic ${r.arch} ${r.shape} ${r.type}${r.ctx ? `, context ${r.ctx}` : ''}` });
        rec.synth = { tool: 'tools/synth_gguf.mjs', args: synthArgs(r) };
        const out = path.join(REPO, 'tests/reference/oracle', `${name}.json`);
        fs.writeFileSync(out, `${JSON.stringify(rec, null, 0).replace(/\],\[/g, '],\n[')}\n`);
        console.log(`${out}: ${rec.prompts.length} prompts × ${rec.tokens} tokens (${rec.architecture}, ${((Date.now() - t0) / 1000).toFixed(0)} s)`);
      }
      process.exit(0);
    }
    const rec = await runOracle(o);
    fs.mkdirSync(path.dirname(o.out), { recursive: true });
    fs.writeFileSync(o.out, `${JSON.stringify(rec, null, 0).replace(/\],\[/g, '],\n[')}\n`);
    console.log(`${o.out}: ${rec.prompts.length} prompts × ${rec.tokens} tokens, top ${rec.probs} (${rec.architecture}, ${rec.model.sha256.slice(0, 12)}…)`);
  } catch (e) {
    console.error(`oracle: ${e.message ?? e}`);
    process.exit(1);
  }
}
