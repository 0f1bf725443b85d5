// tools/oracle/page.js — llama.cpp as the reference implementation, in the browser: loads one
// GGUF into @wllama/wllama (llama.cpp compiled to wasm; one thread, no WebGPU) and, for each
// prompt, runs a greedy completion that reports the top next-token log-probabilities at every
// step (llama.cpp's n_probs: a softmax of the raw logits, before any sampler). Driven by
// tools/oracle.mjs through window.oracle(options).

import { Wllama } from '../../node_modules/@wllama/wllama/esm/index.js';

const WLLAMA_WASM = new URL('../../node_modules/@wllama/wllama/esm/wasm/wllama.wasm', import.meta.url).href;

/**
 * @param {{model: string, prompts: string[], maxTokens: number, nProbs: number, nCtx: number,
 *   kv: 'f32'|'f16'}} o  kv: the KV cache's element type
 * @returns {Promise<{metadata: object, prompts: object[], llamaCpp: string}>}  llamaCpp: the
 *   build wllama carries, e.g. "b12211-7d7f028"
 */
window.oracle = async ({ model, prompts, maxTokens, nProbs, nCtx, kv, verbose }) => {
  const wllama = new Wllama({ default: WLLAMA_WASM }, { suppressNativeLog: !verbose, allowOffline: false });
  const res = await fetch(new URL(model, location.href));
  if (!res.ok) throw new Error(`${model}: HTTP ${res.status}`);
  const file = new File([await res.blob()], model.split('/').pop());
  await wllama.loadModel([file], { n_threads: 1, n_gpu_layers: 0, n_ctx: nCtx, seed: 1,
    cache_type_k: kv, cache_type_v: kv, flash_attn: false });
  const out = [];
  for (const prompt of prompts) {
    const r = await wllama.createCompletion({
      prompt, max_tokens: maxTokens, temperature: 0, n_probs: nProbs, logprobs: nProbs,
      cache_prompt: false, ignore_eos: true, seed: 1,
    });
    const steps = r.choices?.[0]?.logprobs?.content ?? [];
    out.push({
      prompt,
      nPrompt: r.usage?.prompt_tokens,
      tokens: steps.map((s) => s.id),
      top: steps.map((s) => s.top_logprobs.map((t) => [t.id, t.logprob])),
    });
  }
  const metadata = wllama.getModelMetadata();
  const eog = [];
  for (let id = 0; id < (metadata.hparams?.nVocab ?? 0); id++) if (wllama.isTokenEOG(id)) eog.push(id);
  metadata.eog = eog;
  await wllama.exit();
  return { metadata, prompts: out, llamaCpp: Wllama.getLibllamaVersion() };
};
document.body.dataset.state = 'ready';

/**
 * Embeddings (and a reranker's scores) from llama.cpp: loads the model with embeddings on and
 * llama.cpp's pooling (the file's when `pooling` is unset), embeds every text alone (llama.cpp's
 * server tokenizes with the special tokens and L2-normalizes pooled vectors), and with `rerank`
 * scores each document against the query.
 * @param {{model: string, texts: string[], pooling?: string, nCtx: number,
 *   rerank?: {query: string, documents: string[]}, verbose?: boolean}} o
 * @returns {Promise<{metadata: object, embeddings: number[][], rerank?: object[]}>}
 */
window.oracleEmbed = async ({ model, texts, pooling, nCtx, rerank, verbose }) => {
  const wllama = new Wllama({ default: WLLAMA_WASM }, { suppressNativeLog: !verbose, allowOffline: false });
  const res = await fetch(new URL(model, location.href));
  if (!res.ok) throw new Error(`${model}: HTTP ${res.status}`);
  const file = new File([await res.blob()], model.split('/').pop());
  await wllama.loadModel([file], { n_threads: 1, n_gpu_layers: 0, n_ctx: nCtx, seed: 1,
    embeddings: true, ...(pooling ? { pooling_type: pooling } : {}), flash_attn: false,
    cache_type_k: 'f32', cache_type_v: 'f32' });
  const embeddings = [];
  if (!rerank) {
    for (const text of texts) {
      const r = await wllama.createEmbedding({ input: text });
      embeddings.push(Array.from(r.data[0].embedding));
    }
  }
  const out = { metadata: wllama.getModelMetadata(), embeddings, llamaCpp: Wllama.getLibllamaVersion() };
  if (rerank) out.rerank = (await wllama.createRerank({ query: rerank.query, documents: rerank.documents })).results;
  await wllama.exit();
  return out;
};

/**
 * Images through llama.cpp's mtmd (b12211): loads a text GGUF and its mmproj (wllama tells them
 * apart by general.architecture "clip"), and for each case runs a raw greedy completion of a
 * prompt whose <__media__> markers (wllama's per-process marker,
 * getLoadedContextInfo().media_marker) llama-server's code replaces by the images' embeddings.
 * wllama's createCompletion sends files only for chats, but its glue takes them for a raw
 * completion too (wllama-context.h create_completion_task: task.cli_files), so the request is
 * made here the way createCompletion makes it, with the PNG bytes as files.
 * @param {{model: string, mmproj: string, cases: {prompt: string, images: string[]}[],
 *   maxTokens: number, nProbs: number, nCtx: number, verbose?: boolean}} o
 */
window.oracleVision = async ({ model, mmproj, cases, maxTokens, nProbs, nCtx, verbose }) => {
  const wllama = new Wllama({ default: WLLAMA_WASM }, { suppressNativeLog: !verbose, allowOffline: false });
  const blob = async (url) => {
    const res = await fetch(new URL(url, location.href));
    if (!res.ok) throw new Error(`${url}: HTTP ${res.status}`);
    return new File([await res.blob()], url.split('/').pop());
  };
  await wllama.loadModel([await blob(model), await blob(mmproj)], { n_threads: 1, n_gpu_layers: 0,
    n_ctx: nCtx, seed: 1, cache_type_k: 'f32', cache_type_v: 'f32', flash_attn: false });
  const info = wllama.getLoadedContextInfo();
  const marker = info.media_marker;
  const out = [];
  for (const c of cases) {
    const options = { prompt: c.prompt.split('<__media__>').join(marker), max_tokens: maxTokens,
      temperature: 0, n_probs: nProbs, logprobs: nProbs, cache_prompt: false, ignore_eos: true, seed: 1 };
    const files = c.images.map((b64) => Uint8Array.from(atob(b64), (ch) => ch.charCodeAt(0)));
    const started = await wllama.proxy.wllamaAction('completion', { _name: 'cmpl_req', is_chat: false,
      is_asr: false, data_json: JSON.stringify(options), files });
    if (!started.success) throw new Error('llama.cpp refused the completion');
    const r = await wllama.getResponse(options, false, started.req_id);
    const steps = r.choices?.[0]?.logprobs?.content ?? [];
    out.push({
      nPrompt: r.usage?.prompt_tokens,
      tokens: steps.map((s) => s.id),
      top: steps.map((s) => s.top_logprobs.map((t) => [t.id, t.logprob])),
    });
  }
  const metadata = wllama.getModelMetadata();
  await wllama.exit();
  return { metadata, info, cases: out, llamaCpp: Wllama.getLibllamaVersion() };
};
