#!/usr/bin/env node
// bench/images.mjs — images: the image's encode time (ms per image) and the time to first token
// of a prompt with one image, wasmlm against @wllama/wllama 3 (llama.cpp's mtmd in wasm) on the
// same synthetic vision pairs, both in the same headless Chromium as bench/peers.mjs drives them
// (pages served from 127.0.0.1 by tools/serve.mjs, cross-origin isolated so either may run
// threads), at 1 thread and at all of the machine's threads.
//
// Pairs (synthetic weights at the published shapes: /work/shared/reference/vision-mmproj.md §9):
//   smolvlm-256m  tools/synth_gguf.mjs llama smolvlm-256m (SmolLM2-135M + SmolVLM's image
//                 tokens) Q8_0 + tools/synth_mmproj.mjs idefics3-smolvlm-256m Q8_0, as published (SigLIP-B/16 at
//                 512 px, 64 tokens a piece, tiles up to a 2048-pixel edge)
//   gemma3-4b     gemma3 gemma3-4b Q4_K_M + gemma3-4b F16 (SigLIP so400m/14 at 896 px, 256 tokens)
// --tiny: the test pairs instead (gemma3-tiny / idefics3-tiny with their tiny text models), a
// small image, one run, 1 thread — a check that the script and both engines run, no figures.
//
// Per (pair, threads, engine): a fresh page; load; one untimed warm-up with an image; then
// `runs` runs, each on a new image (a different PNG, so no engine reuses an encoding): the time
// to first token with the image (wall time from the call to the first generated token), the same
// prompt without the image, and wasmlm's own image time (LastResult.imageMs: decode + encode;
// wllama reports none: its image share is given by difference, ttft − text ttft). Medians.
// wllama gets a text GGUF over 1 GiB in llama.cpp's split format (its files go through one
// ArrayBuffer each, at most 2 GB: Gemma-3-4B's Q4_K_M is 2.5 GB); wasmlm the whole file.
// The page loads with backend 'cpu'. --node: wasmlm alone, in this Node process, on each of
// --backends (cpu, webgpu: Dawn's GPU, bench/_node_gpu.mjs — the text model and the image encoder
// on the GPU; the row says which adapter and where the encoder ran), as bench/device.sh runs it on
// a machine with a GPU and no browser.
//
//   node bench/images.mjs [--tiny] [--pairs smolvlm-256m,gemma3-4b] [--threads 1,all]
//                         [--engines wasmlm,wllama] [--runs 3] [--size 640x480] [--out FILE]
//                         [--node [--backends cpu,webgpu]]
// Prints one JSON line per row on stdout; writes bench/out/images.json (--tiny: images-tiny.json;
// --node: images-node[-tiny].json).

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { synthCached } from '../tools/synth_gguf.mjs';
import { mmprojBytes, pngBytes, testImage } from '../tools/synth_mmproj.mjs';
import { launchChromium, log, median, runBenchPage, wllamaParts } from './_chromium.mjs';
import { nodeGpu } from './_node_gpu.mjs';
import { runOurs } from './images/ours.js';
import { describeAdapter } from '../js/backend/webgpu/device.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '..');
const PROMPT = 'Describe this image in one sentence.';
/** wllama reads each file through one ArrayBuffer (at most 2 GB): a larger text GGUF goes to it
 *  in llama.cpp's split format (tools/gguf_split.mjs, parts cached in NAME-split/). */
const WLLAMA_MAX_FILE = 1 << 30;

/** The pairs: text model (synth_gguf arch / shape / type) and mmproj (synth_mmproj shape / type). */
const PAIRS = {
  'smolvlm-256m': { text: { arch: 'llama', shape: 'smolvlm-256m', type: 'Q8_0' }, mmproj: { shape: 'idefics3-smolvlm-256m', type: 'Q8_0' } },
  'gemma3-4b': { text: { arch: 'gemma3', shape: 'gemma3-4b', type: 'Q4_K_M' }, mmproj: { shape: 'gemma3-4b', type: 'F16' } },
  // --tiny
  'gemma3-tiny': { text: { arch: 'gemma3', shape: 'tiny', type: 'F32' }, mmproj: { shape: 'gemma3-tiny', type: 'F16' } },
  'idefics3-tiny': { text: { arch: 'llama', shape: 'smolvlm-tiny', type: 'F32' }, mmproj: { shape: 'idefics3-tiny', type: 'F16' } },
};

function parseArgs(argv) {
  const o = { tiny: false, pairs: null, threads: null, engines: ['wasmlm', 'wllama'], runs: 3, size: [640, 480], out: null,
    node: false, backends: ['cpu'] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const v = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    if (a === '--tiny') o.tiny = true;
    else if (a === '--pairs') o.pairs = v().split(',');
    else if (a === '--threads') o.threads = v().split(',');
    else if (a === '--engines') o.engines = v().split(',');
    else if (a === '--runs') o.runs = Number(v());
    else if (a === '--size') o.size = v().split('x').map(Number);
    else if (a === '--out') o.out = path.resolve(v());
    else if (a === '--node') o.node = true;
    else if (a === '--backends') o.backends = v().split(',');
    else if (a === '-h' || a === '--help') o.help = true;
    else throw new Error(`bench/images.mjs: unknown option ${a}`);
  }
  if (o.tiny) {
    o.pairs ??= ['gemma3-tiny', 'idefics3-tiny'];
    o.threads ??= ['1'];
    o.runs = Math.min(o.runs, 1);
    if (!argv.includes('--size')) o.size = [64, 48];
  }
  o.pairs ??= ['smolvlm-256m', 'gemma3-4b'];
  o.threads ??= ['1', 'all'];
  for (const p of o.pairs) if (!PAIRS[p]) throw new Error(`bench/images.mjs: unknown pair ${p} (${Object.keys(PAIRS).join(', ')})`);
  for (const e of o.engines) if (e !== 'wasmlm' && e !== 'wllama') throw new Error(`bench/images.mjs: unknown engine ${e}`);
  for (const b of o.backends) if (b !== 'cpu' && b !== 'webgpu') throw new Error(`bench/images.mjs: unknown backend ${b}`);
  if (!o.node && o.backends.some((b) => b !== 'cpu')) throw new Error('bench/images.mjs: --backends webgpu needs --node (the page runs the CPU backend)');
  if (o.node) o.engines = ['wasmlm'];
  if (!(Number.isInteger(o.runs) && o.runs >= 1)) throw new Error('--runs must be an integer >= 1');
  if (!(o.size.length === 2 && o.size.every((n) => Number.isInteger(n) && n >= 1 && n <= 4096))) throw new Error('--size must be WxH');
  return o;
}

/** The pair's two files (written once, under build/synth/). */
function pairFiles(name) {
  const p = PAIRS[name];
  const model = synthCached(p.text);
  const mmproj = path.join(REPO, 'build/synth', `mmproj-${p.mmproj.shape}-s1-${p.mmproj.type}.gguf`);
  if (!fs.existsSync(mmproj)) {
    log(`  writing ${path.relative(REPO, mmproj)}`);
    fs.mkdirSync(path.dirname(mmproj), { recursive: true });
    fs.writeFileSync(`${mmproj}.tmp`, mmprojBytes({ shape: p.mmproj.shape, type: p.mmproj.type, seed: 1 }));
    fs.renameSync(`${mmproj}.tmp`, mmproj);
  }
  return { model, mmproj, parts: fs.statSync(model).size > WLLAMA_MAX_FILE ? wllamaParts(model, WLLAMA_MAX_FILE) : null };
}

/** One engine on one pair in a fresh page; console errors of the page go into the result. */
const runPage = (context, baseUrl, opts) => runBenchPage(context, `${baseUrl}bench/images/index.html`, 'benchImages', opts);

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  if (opts.help) {
    process.stdout.write(fs.readFileSync(fileURLToPath(import.meta.url), 'utf8').split('\n').slice(1).filter((l, i, a) => a.slice(0, i + 1).every((x) => x.startsWith('//'))).map((l) => l.replace(/^\/\/ ?/, '')).join('\n') + '\n');
    return;
  }
  const all = os.cpus().length;
  const threadList = [...new Set(opts.threads.map((t) => (t === 'all' ? all : Number(t))))];
  if (opts.node) return mainNode(opts, threadList);
  // the server (sirv) only for the page: --node runs where only Node is (bench/device.sh)
  const { startServer } = await import('../tools/serve.mjs');
  const server = await startServer({ port: 0, quiet: true, isolate: true });
  const baseUrl = server.url.replace(/web\/$/, '');
  const browser = await launchChromium('wasmlm-images-');
  const { context } = browser;
  const report = { date: new Date().toISOString(), browser: `Chromium ${context.browser()?.version() ?? ''}`.trim(),
    node: process.version, machine: { cpus: all, model: os.cpus()[0]?.model ?? 'unknown' }, tiny: opts.tiny,
    runs: opts.runs, image: opts.size, prompt: PROMPT, loadavgStart: os.loadavg(), rows: [] };
  const emit = (row) => {
    report.rows.push(row);
    process.stdout.write(`${JSON.stringify(row)}\n`);
  };
  emit({ kind: 'note', backend: 'webgpu', measured: false,
    reason: 'the page loads with backend \'cpu\': WebGPU rows come from --node --backends webgpu' });
  try {
    for (const name of opts.pairs) {
      log(`${name}:`);
      const files = pairFiles(name);
      const url = (f) => `/${path.relative(REPO, f).split(path.sep).join('/')}`;
      const [w, h] = opts.size;
      // images[0] is the warm-up's; one new image per run after it (different pixels: no reuse)
      const images = [];
      for (let k = 0; k <= opts.runs; k++) images.push(Buffer.from(await pngBytes(testImage(w, h, 100 + k), w, h)).toString('base64'));
      for (const threads of threadList) {
        for (const engine of opts.engines) {
          const parts = engine === 'wllama' && files.parts ? files.parts.map(url) : null;
          const r = await runPage(context, baseUrl, { engine, model: url(files.model), parts, mmproj: url(files.mmproj), images, prompt: PROMPT, threads });
          const runs = r.runs ?? [];
          const row = {
            kind: 'row', pair: name, text: PAIRS[name].text, mmproj: PAIRS[name].mmproj, engine, threads, backend: 'cpu',
            image: `${w}x${h}`, error: r.error ?? null,
            // wasmlm: its own image time (decode + encode); wllama: none reported, see imageByDifferenceMs
            encodeMs: median(runs.map((x) => x.imageMs)),
            ttftMs: median(runs.map((x) => x.ttftMs)),
            ttftTextMs: median(runs.map((x) => x.ttftTextMs)),
            imageByDifferenceMs: median(runs.map((x) => (x.ttftMs != null && x.ttftTextMs != null ? x.ttftMs - x.ttftTextMs : null))),
            nPrompt: runs[0]?.nPrompt ?? null, nPromptText: runs[0]?.nPromptText ?? null,
            loadMs: r.loadMs ?? null, build: r.build ?? null, engineThreads: r.threads ?? null, version: r.version ?? null,
            runs: runs.length, ...(r.console?.length ? { console: r.console } : {}),
          };
          emit(row);
          log(`  ${engine} ${threads}t: ${row.error ? `ERROR ${row.error}` : `ttft ${row.ttftMs?.toFixed(0)} ms, encode ${row.encodeMs?.toFixed(0) ?? '–'} ms`}`);
        }
      }
    }
  } finally {
    await browser.close();
    await server.close?.();
  }
  report.loadavgEnd = os.loadavg();
  writeReport(report, opts.out ?? path.join(REPO, 'bench/out', opts.tiny ? 'images-tiny.json' : 'images.json'));
}

function writeReport(report, out) {
  fs.mkdirSync(path.dirname(out), { recursive: true });
  fs.writeFileSync(out, `${JSON.stringify(report, null, 2)}\n`);
  log(`wrote ${path.relative(REPO, out)}`);
  if (report.rows.some((r) => r.kind === 'row' && r.error)) process.exitCode = 1;
}

/** The same runs as the page's wasmlm rows (bench/images/ours.js), in this Node process, per backend. */
async function mainNode(opts, threadList) {
  const gpu = opts.backends.includes('webgpu') ? await nodeGpu() : null;
  const adapter = gpu ? await gpu.requestAdapter({ powerPreference: 'high-performance' }) : null;
  const report = { date: new Date().toISOString(), node: process.version, machine: { cpus: os.cpus().length, model: os.cpus()[0]?.model ?? 'unknown' },
    adapter: adapter ? describeAdapter(adapter) : null, tiny: opts.tiny, runs: opts.runs, image: opts.size, prompt: PROMPT,
    loadavgStart: os.loadavg(), rows: [] };
  for (const name of opts.pairs) {
    log(`${name}:`);
    const files = pairFiles(name);
    const [w, h] = opts.size;
    const images = [];
    for (let k = 0; k <= opts.runs; k++) images.push(await pngBytes(testImage(w, h, 100 + k), w, h));
    for (const backend of opts.backends) {
      for (const threads of threadList) {
        let r;
        try {
          r = await runOurs({ model: files.model, mmproj: files.mmproj, images, prompt: PROMPT, threads, backend,
            engineOptions: backend === 'webgpu' ? { gpu } : {}, log: (m) => log(`  ${m}`) });
        } catch (e) {
          r = { error: e.message, runs: [] };
        }
        const runs = r.runs;
        const row = { kind: 'row', pair: name, text: PAIRS[name].text, mmproj: PAIRS[name].mmproj, engine: 'wasmlm', threads, backend,
          ranOn: r.backend ?? null, encoder: r.encoder ?? null, encoderReason: r.encoderReason ?? null, image: `${w}x${h}`, error: r.error ?? null,
          encodeMs: median(runs.map((x) => x.imageMs)), ttftMs: median(runs.map((x) => x.ttftMs)), ttftTextMs: median(runs.map((x) => x.ttftTextMs)),
          nPrompt: runs[0]?.nPrompt ?? null, loadMs: r.loadMs ?? null, build: r.build ?? null, engineThreads: r.threads ?? null, runs: runs.length };
        report.rows.push(row);
        process.stdout.write(`${JSON.stringify(row)}\n`);
        log(`  ${backend} ${threads}t: ${row.error ? `ERROR ${row.error}` : `ttft ${row.ttftMs?.toFixed(0)} ms, encode ${row.encodeMs?.toFixed(0)} ms (encoder ${row.encoder})`}`);
        if (backend === 'webgpu') break; // the GPU rows: one thread count (the first) is enough
      }
    }
  }
  report.loadavgEnd = os.loadavg();
  writeReport(report, opts.out ?? path.join(REPO, 'bench/out', opts.tiny ? 'images-node-tiny.json' : 'images-node.json'));
}

main().catch((e) => {
  log(e.stack ?? String(e));
  process.exit(1);
});
