// bench/embed/page.js — one embeddings benchmark row in the browser, for bench/embed.mjs: load a
// GGUF file from this server into wasmlm (js/wasmlm.js, this thread, `threads` threads) or
// @wllama/wllama (embeddings: true, n_threads = `threads`, no WebGPU), embed the texts once
// untimed, then `runs` times timed: texts per second of wall time, and the first vector (the
// driver checks that both engines agree).

import { createEngine } from '../../js/wasmlm.js';
import { Wllama } from '../../node_modules/@wllama/wllama/esm/index.js';

const WLLAMA_WASM = new URL('../../node_modules/@wllama/wllama/esm/wasm/wllama.wasm', import.meta.url).href;

async function runOurs({ model, texts, runs, threads = 1, nCtx = 512 }) {
  const engine = await createEngine({ threads });
  const info = await engine.load({ model: new URL(model, location.href), nCtx });
  await engine.embed(texts);
  const out = [];
  let first = null;
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    const v = await engine.embed(texts);
    out.push({ wallMs: performance.now() - t0 });
    first ??= Array.from(v[0]);
  }
  await engine.free();
  return { engine: 'wasmlm', build: info.build, threads: info.threads, runs: out, first };
}

async function runWllama({ model, texts, runs, threads = 1, nCtx = 512 }) {
  const wllama = new Wllama({ default: WLLAMA_WASM }, { suppressNativeLog: true, allowOffline: false });
  const res = await fetch(new URL(model, location.href));
  if (!res.ok) throw new Error(`${model}: HTTP ${res.status}`);
  const file = new File([await res.blob()], model.split('/').pop());
  await wllama.loadModel([file], { n_threads: threads, n_gpu_layers: 0, n_ctx: nCtx, seed: 1, embeddings: true });
  // One text per call: wllama 3.8.1's createEmbedding with an array returns one vector for the
  // whole call (index 0, some one of its texts) and never answers more than 4 (its slots).
  const embedAll = async () => {
    const data = [];
    for (const t of texts) data.push((await wllama.createEmbedding({ input: t })).data[0]);
    return data;
  };
  await embedAll();
  const out = [];
  let first = null;
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    const r = await embedAll();
    out.push({ wallMs: performance.now() - t0 });
    first ??= Array.from(r[0].embedding);
  }
  const threadsUsed = wllama.getNumThreads();
  await wllama.exit();
  return { engine: 'wllama', threads: threadsUsed, runs: out, first };
}

window.benchEmbed = async (opts) => (opts.engine === 'wllama' ? runWllama(opts) : runOurs(opts));
document.body.dataset.state = 'ready';
