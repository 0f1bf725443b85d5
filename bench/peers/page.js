// bench/peers/page.js — one benchmark row in the browser, for bench/peers.mjs: load a GGUF file
// from this server into either wasmlm (js/wasmlm.js, in this thread, `threads` threads) or
// @wllama/wllama (n_threads = `threads`, no WebGPU), run one untimed warm-up completion, then
// `runs` greedy completions of `maxTokens` new tokens from the same prompt, and report each
// engine's own prefill/decode timings plus the wall time of each completion.

import { createEngine } from '../../js/wasmlm.js';
import { Wllama } from '../../node_modules/@wllama/wllama/esm/index.js';

const WLLAMA_WASM = new URL('../../node_modules/@wllama/wllama/esm/wasm/wllama.wasm', import.meta.url).href;
const logEl = document.getElementById('log');
const log = (m) => { logEl.textContent += `${m}\n`; };

async function runOurs({ model, prompt, maxTokens, runs, warmupTokens, threads = 1, build, nCtx = 0 }) {
  // build unset ('auto'): what a page gets (relaxed in Chromium); peers.mjs --builds forces simd128 too
  const engine = await createEngine(build ? { threads, build } : { threads });
  const t0 = performance.now();
  const info = await engine.load({ model: new URL(model, location.href), nCtx });
  const loadMs = performance.now() - t0;
  await engine.complete(prompt, { temperature: 0, maxTokens: warmupTokens, seed: 1 });
  const out = [];
  for (let i = 0; i < runs; i++) {
    const w0 = performance.now();
    const r = await engine.complete(prompt, { temperature: 0, maxTokens, seed: 1 });
    out.push({ wallMs: performance.now() - w0, nPrompt: r.nPrompt, nGenerated: r.nGenerated,
      prefillTokPerSec: r.prefillTokensPerSec, decodeTokPerSec: r.decodeTokensPerSec, text: r.text, stopReason: r.stopReason });
    log(`ours run ${i + 1}: ${r.decodeTokensPerSec.toFixed(1)} tok/s`);
  }
  await engine.free();
  return { engine: 'wasmlm', loadMs, weightBytes: info.weightBytes, simd: info.simd, build: info.build, threads: info.threads, runs: out };
}

async function runWllama({ model, parts, prompt, maxTokens, runs, warmupTokens, threads = 1, nCtx = 1024 }) {
  const wllama = new Wllama({ default: WLLAMA_WASM }, { suppressNativeLog: true, allowOffline: false });
  const t0 = performance.now();
  // Fetched here and passed as Files: loadModelFromUrl would also copy them into the browser's
  // cache. `parts`: the file split in llama.cpp's format (tools/gguf_split.mjs), in order.
  const files = [];
  for (const url of parts ?? [model]) {
    const res = await fetch(new URL(url, location.href));
    if (!res.ok) throw new Error(`${url}: HTTP ${res.status}`);
    files.push(new File([await res.blob()], url.split('/').pop()));
  }
  await wllama.loadModel(files, { n_threads: threads, n_gpu_layers: 0, n_ctx: nCtx, seed: 1 });
  const loadMs = performance.now() - t0;
  const info = { multithread: wllama.isMultithread(), threads: wllama.getNumThreads() };
  const complete = (n) => wllama.createCompletion({ prompt, max_tokens: n, temperature: 0, ignore_eos: true,
    cache_prompt: false, seed: 1 });
  await complete(warmupTokens);
  const out = [];
  for (let i = 0; i < runs; i++) {
    const w0 = performance.now();
    const r = await complete(maxTokens);
    const t = r.timings ?? {};
    out.push({ wallMs: performance.now() - w0, nPrompt: t.prompt_n, nGenerated: t.predicted_n,
      prefillTokPerSec: t.prompt_per_second, decodeTokPerSec: t.predicted_per_second,
      text: r.choices?.[0]?.text, stopReason: r.choices?.[0]?.finish_reason });
    log(`wllama run ${i + 1}: ${t.predicted_per_second?.toFixed(1)} tok/s`);
  }
  await wllama.exit();
  return { engine: 'wllama', version: Wllama.getLibllamaVersion?.(), loadMs, ...info, parts: files.length, runs: out };
}

window.benchPeer = async (opts) => (opts.engine === 'wllama' ? runWllama(opts) : runOurs(opts));
document.body.dataset.state = 'ready';
