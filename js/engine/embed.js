// embed.js — embeddings and reranking for an Engine (js/engine/engine.js): texts → token ids →
// wlm_embed (src/runtime/embed.c: the batched forward pass, pooling and normalization in C) →
// one Float32Array per text; a reranker's (query, document) pairs through wlm_tokenize_pair and
// rank pooling → scores sorted best first. The Engine lends its handles through an `api` object;
// this file never keeps a view of wasm memory across a call into it.

import { abortError, jsError } from '../runtime/errors.js';
import { macrotask } from '../runtime/platform.js';

/** Pooling names and their C values (enum wlm_pooling; llama.cpp's llama_pooling_type). */
export const POOLING = Object.freeze({ none: 0, mean: 1, cls: 2, last: 3, rank: 4 });
export const POOLING_NAMES = Object.freeze(['none', 'mean', 'cls', 'last', 'rank']);

/** Texts per wlm_embed call: they pass the forward pass together; aborts are seen between. */
export const EMBED_BATCH = 16;

/**
 * The model's embedding facts for ModelInfo: {embeddingLength, pooling, generative,
 * rankOutputs} (wlmjs_embed_info).
 */
export function embedInfo(x, model) {
  const f = (i) => x.wlmjs_embed_info(model, i);
  return {
    embeddingLength: f(0),
    pooling: POOLING_NAMES[f(1)] ?? 'none',
    generative: f(3) === 1,
    rankOutputs: f(4),
  };
}

/** The C pooling value of an option (undefined: the model's), or an error naming the choices. */
function poolingId(pooling, info) {
  if (pooling === undefined || pooling === null) {
    if (info.pooling === 'none') {
      throw jsError('WLM_ERR_INVALID_ARG', 'embed(): this model does not say how to pool its hidden ' +
        'states (no pooling_type: not an embedding model?); pass {pooling: "mean" | "cls" | "last" | "none"}');
    }
    return POOLING[info.pooling];
  }
  const id = POOLING[pooling];
  if (id === undefined) {
    throw jsError('WLM_ERR_INVALID_ARG', `embed(): pooling ${JSON.stringify(pooling)} is not one of ${POOLING_NAMES.join(', ')}`);
  }
  return id;
}

/**
 * Runs wlm_embed over `seqs` (token id arrays), EMBED_BATCH at a time, and returns one
 * Float32Array per sequence (`width` floats; with pooling none, tokens × width).
 * @param {object} api  the Engine's lent handles (js/engine/engine.js #lend): x, ctx, ctxError(rc), syncPool(), ensureSeqMax(n), info
 */
async function run(api, seqs, pooling, normalize, width, signal) {
  const x = api.x;
  await api.ensureSeqMax(Math.min(EMBED_BATCH, seqs.length));
  const out = [];
  for (let i0 = 0; i0 < seqs.length; i0 += EMBED_BATCH) {
    if (signal?.aborted) throw abortError('Embedding');
    if (i0 > 0) await macrotask(); // lets an abort (and a page) in between batches
    if (signal?.aborted) throw abortError('Embedding');
    const group = seqs.slice(i0, i0 + EMBED_BATCH);
    const nTok = group.reduce((a, s) => a + s.length, 0);
    const floats = pooling === POOLING.none ? nTok * width : group.length * width;
    const tokPtr = x.wlmjs_malloc(nTok * 4) >>> 0;
    const lenPtr = x.wlmjs_malloc(group.length * 4) >>> 0;
    const outPtr = x.wlmjs_malloc(Math.max(1, floats) * 4) >>> 0;
    try {
      if (!tokPtr || !lenPtr || !outPtr) throw jsError('WLM_ERR_NOMEM', `cannot allocate ${floats} floats of embeddings`);
      const ids = new Int32Array(x.memory.buffer, tokPtr, nTok);
      let o = 0;
      for (const s of group) { ids.set(s, o); o += s.length; }
      new Int32Array(x.memory.buffer, lenPtr, group.length).set(group.map((s) => s.length));
      api.syncPool();
      const n = x.wlm_embed(api.ctx, tokPtr, lenPtr, group.length, pooling, normalize, outPtr, floats);
      if (n < 0) throw api.ctxError(n);
      const all = new Float32Array(x.memory.buffer, outPtr, floats);
      let p = 0;
      for (const s of group) {
        const k = pooling === POOLING.none ? s.length * width : width;
        out.push(all.slice(p, p + k));
        p += k;
      }
    } finally {
      if (tokPtr) x.wlmjs_free(tokPtr);
      if (lenPtr) x.wlmjs_free(lenPtr);
      if (outPtr) x.wlmjs_free(outPtr);
    }
  }
  return out;
}

/**
 * Engine.embed: see wasmlm.d.ts.
 * @param {object} api
 * @param {string | string[]} texts
 * @param {{pooling?: string, normalize?: boolean | number, signal?: AbortSignal}} [options]
 * @returns {Promise<Float32Array[]>}
 */
export async function embed(api, texts, { pooling, normalize = true, signal } = {}) {
  const list = typeof texts === 'string' ? [texts] : Array.from(texts ?? [], String);
  if (list.length === 0) return [];
  const info = api.info;
  const id = poolingId(pooling, info);
  if (id === POOLING.rank) {
    throw jsError('WLM_ERR_INVALID_ARG', 'embed(): rank pooling scores (query, document) pairs: use rerank()');
  }
  const norm = normalize === true ? 2 : normalize === false ? -1 : Number(normalize);
  if (!Number.isInteger(norm) || norm < -1) {
    throw jsError('WLM_ERR_INVALID_ARG', `embed(): normalize must be true, false or llama.cpp's --embd-normalize (-1, 0, 1, 2, p), got ${normalize}`);
  }
  const seqs = [];
  for (const t of list) seqs.push(await api.tokenize(t, { bos: true })); // [CLS] text [SEP] for BERT
  return run(api, seqs, id, norm, info.embeddingLength, signal);
}

/**
 * Engine.rerank: see wasmlm.d.ts. Needs a reranker (rank pooling: cls / cls.output tensors).
 * @returns {Promise<{index: number, score: number}[]>} best first
 */
export async function rerank(api, query, documents, { signal } = {}) {
  const docs = Array.from(documents ?? [], String);
  if (docs.length === 0) return [];
  const info = api.info;
  if (!(info.rankOutputs > 0)) {
    throw jsError('WLM_ERR_INVALID_ARG', 'rerank() needs a reranker (a model with a classifier head: tensors cls / cls.output)');
  }
  const seqs = docs.map((d) => api.tokenizePair(String(query), d));
  const scores = await run(api, seqs, POOLING.rank, -1, info.rankOutputs, signal);
  return scores.map((s, index) => ({ index, score: s[0] })).sort((a, b) => b.score - a.score || a.index - b.index);
}
