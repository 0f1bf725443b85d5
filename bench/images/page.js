// bench/images/page.js — one row of bench/images.mjs in the browser: a vision pair (text GGUF +
// mmproj, served by the driver) loaded into wasmlm (./ours.js, in this thread, `threads`
// threads, CPU backend) or @wllama/wllama (n_threads = `threads`, no WebGPU); one untimed
// warm-up with an image, then per run a new image (PNG bytes the driver made: a different one
// each run, so no engine reuses an encoding) and:
//  - time to first token with the image: the wall time from the call to the first generated
//    token (wllama: createChatCompletion with an image part and max_tokens 1);
//  - the same prompt without the image (text TTFT), for the image's share by difference;
//  - wasmlm's own image time (lastResult.imageMs: decode + encode) — wllama reports none.

import { runOurs } from './ours.js';
import { Wllama } from '../../node_modules/@wllama/wllama/esm/index.js';

const WLLAMA_WASM = new URL('../../node_modules/@wllama/wllama/esm/wasm/wllama.wasm', import.meta.url).href;
const logEl = document.getElementById('log');
const log = (m) => { logEl.textContent += `${m}\n`; };
const bytesOf = (b64) => Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));

async function runWllama({ model, parts, mmproj, images, prompt, threads = 1, nCtx = 4096 }) {
  const wllama = new Wllama({ default: WLLAMA_WASM }, { suppressNativeLog: true, allowOffline: false });
  const t0 = performance.now();
  const files = [];
  for (const url of [...(parts ?? [model]), mmproj]) { // parts: the text GGUF split (over 2 GB)
    const res = await fetch(new URL(url, location.href));
    if (!res.ok) throw new Error(`${url}: HTTP ${res.status}`);
    files.push(new File([await res.blob()], url.split('/').pop()));
  }
  await wllama.loadModel(files, { n_threads: threads, n_gpu_layers: 0, n_ctx: nCtx, seed: 1 });
  const loadMs = performance.now() - t0;
  if (!wllama.supportInputModality('image')) throw new Error('wllama: the model loaded without image input (mmproj not taken)');
  const first = async (content) => {
    const w0 = performance.now();
    const r = await wllama.createChatCompletion({ messages: [{ role: 'user', content }], max_tokens: 1, temperature: 0, seed: 1, cache_prompt: false });
    return { ms: performance.now() - w0, t: r.timings ?? {} };
  };
  const withImage = (b64) => [{ type: 'image', data: bytesOf(b64).buffer }, { type: 'text', text: prompt }];
  await first(withImage(images[0]));
  const runs = [];
  for (const b64 of images.slice(1)) {
    const img = await first(withImage(b64));
    const text = await first([{ type: 'text', text: prompt }]);
    runs.push({ ttftMs: img.ms, ttftTextMs: text.ms, imageMs: null, promptMs: img.t.prompt_ms ?? null, nPrompt: img.t.prompt_n ?? null,
      nPromptText: text.t.prompt_n ?? null });
    log(`wllama: ttft ${img.ms.toFixed(0)} ms`);
  }
  const info = { multithread: wllama.isMultithread(), threads: wllama.getNumThreads() }; // (before exit())
  await wllama.exit();
  return { engine: 'wllama', version: Wllama.getLibllamaVersion?.(), loadMs, ...info, runs };
}

window.benchImages = async (opts) => (opts.engine === 'wllama' ? runWllama(opts)
  : runOurs({ ...opts, model: new URL(opts.model, location.href), mmproj: new URL(opts.mmproj, location.href),
    images: opts.images.map(bytesOf), log }));
document.body.dataset.state = 'ready';
