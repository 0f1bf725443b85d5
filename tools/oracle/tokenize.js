// tools/oracle/tokenize.js — llama.cpp's tokenizer as the reference, in the browser: loads one
// GGUF into @wllama/wllama (llama.cpp compiled to wasm) and runs one completion request per
// entry of `requests`, returning llama.cpp's responses as they are. tools/oracle_tokenize.mjs
// builds the requests (a logit bias given as text, which llama.cpp's server tokenizes without
// parsing special tokens) and reads the token ids out of the responses.

import { Wllama } from '../../node_modules/@wllama/wllama/esm/index.js';

const WLLAMA_WASM = new URL('../../node_modules/@wllama/wllama/esm/wasm/wllama.wasm', import.meta.url).href;

/**
 * @param {{model: string, requests: object[], verbose?: boolean}} o  model: the GGUF's URL;
 *   requests: wllama createCompletion() options
 * @returns {Promise<object[]>} one completion response per request
 */
window.oracleTokenize = async ({ model, requests, verbose }) => {
  const wllama = new Wllama({ default: WLLAMA_WASM }, { suppressNativeLog: !verbose, allowOffline: false });
  const res = await fetch(new URL(model, location.href));
  if (!res.ok) throw new Error(`${model}: HTTP ${res.status}`);
  const file = new File([await res.blob()], model.split('/').pop());
  await wllama.loadModel([file], { n_threads: 1, n_gpu_layers: 0, n_ctx: 64, seed: 1, flash_attn: false });
  const out = [];
  for (const r of requests) out.push(await wllama.createCompletion(r));
  await wllama.exit();
  return out;
};
/** The llama.cpp build wllama carries, e.g. "b12211-7d7f028". */
window.llamaCppVersion = () => Wllama.getLibllamaVersion();
document.body.dataset.state = 'ready';
