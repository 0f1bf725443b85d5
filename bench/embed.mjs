#!/usr/bin/env node
// bench/embed.mjs — embeddings throughput, wasmlm against @wllama/wllama (llama.cpp in
// wasm), both in the same headless Chromium on the same synthetic GGUF files (tools/synth_gguf.mjs
// shapes of published embedding models: all-MiniLM-L6 and bge-small (bert), Qwen3-Embedding-0.6B
// (qwen3, last-token pooling)). One row per (shape, type, threads): a batch of 32 short texts
// (ARCH_PROMPTS' short ones and variations, 5–20 tokens), embedded once untimed, then `runs`
// rounds that alternate the engines (a fresh page each: wllama, wasmlm) so load drift on a shared
// machine hits both alike; texts/s of wall time per call, median over the rounds. Both get the
// texts as one call (wasmlm: engine.embed(texts), 16 texts per forward pass; wllama:
// createEmbedding one text per call: with an array, wllama 3.8.1 returns a single vector for
// the whole call and never answers more than 4 texts). The first vectors of the two
// engines are compared (cosine) as a check that both computed the same thing.
//
//   node bench/embed.mjs [--shapes minilm-l6,bge-small,qwen3-embedding-0.6b] [--types F32,Q8_0]
//                        [--threads 1,2] [--runs 3] [--json]
// Writes bench/out/embed.json. What the rows mean: bench/README.md.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { startServer } from '../tools/serve.mjs';
import { synthCached } from '../tools/synth_gguf.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '..');
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const SHAPES = {
  'minilm-l6': { arch: 'bert', shape: 'minilm-l6' },
  'bge-small': { arch: 'bert', shape: 'bge-small' },
  'qwen3-embedding-0.6b': { arch: 'qwen3', shape: 'qwen3-embedding-0.6b' },
};
const BASE = [
  'Once upon a time', 'The quick brown fox jumps over the lazy dog.', 'The capital of France is',
  'Hello! How are you today?', 'Café, naïve, résumé: déjà vu.', 'In 1492, Columbus sailed the ocean blue.',
  'SELECT id, name FROM users WHERE', 'x = 3.14159 * r ** 2  # area of a circle',
  'Roses are red, violets are blue.', 'Ein kleiner Hund lief über die Straße.',
  'A hash table stores key-value pairs.', 'Investors sold shares as prices dropped.',
  'The cat sits on the mat.', 'A kitten is resting on a rug.', 'Stock markets fell sharply today.',
  'How do I reset my password?',
];
export const TEXTS = Object.freeze([...BASE, ...BASE.map((t) => `${t} Tell me more about it.`)]);

const log = (m) => process.stderr.write(`${m}\n`);
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };

function parseArgs(argv) {
  const o = { shapes: Object.keys(SHAPES), types: ['F32', 'Q8_0'], threads: [1, os.cpus().length > 1 ? 2 : 1], runs: 3, json: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i], v = () => argv[++i];
    if (a === '--shapes') o.shapes = v().split(',');
    else if (a === '--types') o.types = v().split(',');
    else if (a === '--threads') o.threads = v().split(',').map(Number);
    else if (a === '--runs') o.runs = Number(v());
    else if (a === '--json') o.json = true;
    else throw new Error(`unknown argument ${a}`);
  }
  return o;
}

async function row(browser, server, file, engine, threads, runs) {
  const page = await browser.newPage();
  try {
    await page.goto(`${server.url.replace(/web\/$/, '')}bench/embed/index.html`);
    await page.waitForFunction(() => document.body.dataset.state === 'ready', null, { timeout: 60_000 });
    const model = `/${path.relative(REPO, file)}`;
    return await page.evaluate((x) => window.benchEmbed(x), { engine, model, texts: TEXTS, runs, threads });
  } finally {
    await page.close();
  }
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const rows = [];
  const isolate = o.threads.some((t) => t > 1);
  const server = await startServer({ port: 0, quiet: true, isolate });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-bench-embed-'));
  const browser = await chromium.launchPersistentContext(dir, {
    executablePath: CHROMIUM, headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update'],
  });
  try {
    for (const name of o.shapes) {
      for (const type of o.types) {
        if (name.startsWith('qwen3') && type === 'F32') continue; // 2.4 GB: beyond wllama's one-ArrayBuffer reads
        const s = SHAPES[name];
        log(`${name} ${type}: synthesizing (cached under build/synth)…`);
        const file = synthCached({ ...s, type });
        for (const threads of o.threads) {
          const ours = [], theirs = [];
          let firstOurs, firstTheirs;
          for (let r = 0; r < o.runs; r++) { // alternate: wllama, wasmlm, one timed call each
            const w = await row(browser, server, file, 'wllama', threads, 1);
            const m = await row(browser, server, file, 'wasmlm', threads, 1);
            theirs.push(w.runs[0].wallMs);
            ours.push(m.runs[0].wallMs);
            firstOurs = m.first, firstTheirs = w.first;
            log(`  ${threads}t round ${r + 1}: wllama ${w.runs[0].wallMs.toFixed(0)} ms, wasmlm ${m.runs[0].wallMs.toFixed(0)} ms (${m.build})`);
          }
          let d = 0, a = 0, b = 0;
          for (let i = 0; i < firstOurs.length; i++) { d += firstOurs[i] * firstTheirs[i]; a += firstOurs[i] ** 2; b += firstTheirs[i] ** 2; }
          const oursTps = TEXTS.length / (median(ours) / 1000), theirsTps = TEXTS.length / (median(theirs) / 1000);
          const rowOut = { shape: name, type, threads, texts: TEXTS.length, oursTextsPerSec: oursTps,
            wllamaTextsPerSec: theirsTps, ratio: oursTps / theirsTps, cosineFirst: d / Math.sqrt(a * b),
            oursMs: ours, wllamaMs: theirs };
          rows.push(rowOut);
          log(`${name} ${type} ${threads}t: ${oursTps.toFixed(1)} vs ${theirsTps.toFixed(1)} texts/s (${rowOut.ratio.toFixed(2)}x), cosine ${rowOut.cosineFirst.toFixed(6)}`);
        }
      }
    }
  } finally {
    await browser.close();
    fs.rmSync(dir, { recursive: true, force: true });
    await server.close();
  }
  const report = { date: new Date().toISOString(), load: os.loadavg(), cpus: os.cpus().length, rows };
  fs.mkdirSync(path.join(REPO, 'bench/out'), { recursive: true });
  fs.writeFileSync(path.join(REPO, 'bench/out/embed.json'), `${JSON.stringify(report, null, 1)}\n`);
  if (o.json) process.stdout.write(`${JSON.stringify(report)}\n`);
  else for (const r of rows) console.log(`| ${r.shape} | ${r.type} | ${r.threads} | ${r.oursTextsPerSec.toFixed(1)} vs ${r.wllamaTextsPerSec.toFixed(1)} (${r.ratio.toFixed(2)}×) |`);
}

main().catch((e) => { console.error(`bench/embed.mjs: ${e.stack ?? e}`); process.exit(1); });
