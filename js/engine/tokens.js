// tokens.js — token ids and text for js/engine/engine.js, on one loaded model: text → ids
// (wlm_tokenize_ex, and a reranker's (query, document) pair: wlm_tokenize_pair), ids → text as
// one UTF-8 stream, a generated wlm_token read into a Token with the text of its alternatives,
// and the strings the model owns (GGUF metadata, token texts). C tokenizes and detokenizes
// (src/tokenizer/); this file moves bytes across the boundary. The memory rule of engine.js holds
// here: views of wasm memory are made right before use, never kept across a call into wasm.

import { STATUS, STOP_REASONS, jsError } from '../runtime/errors.js';
import { utf8 } from './params.js';

/** `view`, or a copy of it when it views shared memory (TextDecoder rejects those). */
export function unshared(view) {
  return typeof SharedArrayBuffer === 'function' && view.buffer instanceof SharedArrayBuffer
    ? view.slice() : view;
}

/**
 * A string model `model` owns, returned by `fn(...args, lenSlot)` with its length in a 4-byte
 * slot, or null: wlm_model_meta_string, wlm_token_text (src/wasmlm.h). `lenSlot` is a
 * malloc'd slot of the caller's.
 */
function ownedString(x, lenSlot, fn, ...args) {
  const p = fn(...args, lenSlot) >>> 0;
  if (!p) return null;
  const len = new DataView(x.memory.buffer).getInt32(lenSlot, true) >>> 0;
  return new TextDecoder().decode(unshared(new Uint8Array(x.memory.buffer, p, len)));
}

/**
 * The text side of one loaded model (wlm_model*): made by Engine.load() once the model is
 * loaded, dropped (free()) when it is unloaded. `error(rc, message)` turns a C status into a
 * WasmlmError (Engine's #error); `modelMessage()` is the model handle's last error message.
 */
export class ModelText {
  #x;
  #model;
  #error;
  #modelMessage;
  #lenSlot = 0;      // a 4-byte slot for the lengths of the strings C returns
  #pieces = null;    // token id → standalone text of its piece, filled lazily (top alternatives)
  #piecesAfterBos = null;

  /** BOS and EOS ids (-1: none), the vocabulary's size. */
  bos;
  eos;
  vocabSize;

  constructor(x, model, { error, modelMessage }) {
    this.#x = x;
    this.#model = model;
    this.#error = error;
    this.#modelMessage = modelMessage;
    this.bos = x.wlmjs_model_info(model, 9);
    this.eos = x.wlmjs_model_info(model, 10);
    this.vocabSize = x.wlmjs_model_info(model, 5);
  }

  /** Frees the length slot; the object is not used afterwards. */
  free() {
    if (this.#lenSlot) this.#x.wlmjs_free(this.#lenSlot);
    this.#lenSlot = 0;
  }

  #slot() {
    if (!this.#lenSlot) {
      this.#lenSlot = this.#x.wlmjs_malloc(4) >>> 0;
      if (!this.#lenSlot) throw jsError('WLM_ERR_NOMEM', 'cannot allocate 4 bytes');
    }
    return this.#lenSlot;
  }

  /** GGUF string metadata (wlm_model_meta_string), or null. */
  meta(key) {
    return metaString(this.#x, this.#model, key, this.#slot());
  }

  /** The text of token `id` as the vocabulary writes it (wlm_token_text), '' for -1 or none. */
  tokenText(id) {
    return id >= 0 ? ownedString(this.#x, this.#slot(), this.#x.wlm_token_text, this.#model, id) ?? '' : '';
  }

  /** The raw bytes of token `id`'s piece after token `prev` (wlm_token_piece), or null. */
  pieceBytes(prev, id) {
    const x = this.#x;
    const slot = this.#slot();
    const p = x.wlm_token_piece(this.#model, prev, id, slot) >>> 0;
    if (!p) return null;
    const len = new DataView(x.memory.buffer).getInt32(slot, true) >>> 0;
    return unshared(new Uint8Array(x.memory.buffer, p, len));
  }

  /**
   * The text of token `id` alone, following `prev` (only BOS matters: it drops the piece's
   * leading space), for top alternatives: one non-streaming decode, so a piece holding part of
   * a UTF-8 character gives U+FFFD. BOS and EOS give ''. Cached per model.
   */
  pieceText(prev, id) {
    const afterBos = prev === this.bos;
    if (!this.#pieces) {
      this.#pieces = new Array(this.vocabSize);
      this.#piecesAfterBos = new Array(this.vocabSize);
    }
    const cache = afterBos ? this.#piecesAfterBos : this.#pieces;
    let text = cache[id];
    if (text === undefined) {
      const bytes = id === this.bos || id === this.eos ? null : this.pieceBytes(prev, id);
      text = bytes ? new TextDecoder().decode(bytes) : '';
      if (id >= 0 && id < this.vocabSize) cache[id] = text;
    }
    return text;
  }

  /** The text of `ids` following token `prev` (-1: none), decoded as one UTF-8 stream. */
  decodeIds(ids, prev = -1) {
    const decoder = new TextDecoder();
    let out = '';
    for (const id of ids) {
      if (!Number.isInteger(id)) throw jsError('WLM_ERR_INVALID_ARG', `token id ${id} is not an integer`);
      const bytes = this.pieceBytes(prev, id);
      if (!bytes) {
        throw jsError('WLM_ERR_INVALID_ARG',
          `token id ${id} is outside the vocabulary (0..${this.vocabSize - 1})`);
      }
      if (id !== this.bos && id !== this.eos) out += decoder.decode(bytes, { stream: true });
      prev = id;
    }
    return out + decoder.decode();
  }

  /**
   * Reads the wlm_token at `tok` into a Token object (see wasmlm.d.ts). `decoder` is the
   * sequence's streaming TextDecoder; `prev` the token before this one (for the alternatives'
   * text). Returns {status, token}; with WLM_DONE the token is the sequence's end item
   * (id -1, the text released at the end, stopReason).
   */
  readToken(tok, decoder, prev) {
    const x = this.#x;
    const status = x.wlmjs_token_status(tok);
    const piecePtr = x.wlmjs_token_piece(tok) >>> 0;
    const pieceLen = x.wlmjs_token_piece_len(tok) >>> 0;
    let text = pieceLen ? decoder.decode(unshared(new Uint8Array(x.memory.buffer, piecePtr, pieceLen)),
      { stream: true }) : '';
    const nPast = x.wlmjs_token_n_past(tok);
    if (status === STATUS.WLM_DONE) {
      text += decoder.decode(); // flush an incomplete UTF-8 tail
      const stopReason = STOP_REASONS[x.wlmjs_token_stop_reason(tok)] ?? 'none';
      return { status, stopReason, token: { id: -1, text, prob: 0, logprob: 0, probSampled: 0, nPast } };
    }
    const token = {
      id: x.wlmjs_token_id(tok),
      text,
      prob: x.wlmjs_token_prob(tok),
      logprob: x.wlmjs_token_logprob(tok),
      probSampled: x.wlmjs_token_prob_sampled(tok),
      nPast,
    };
    const n = x.wlmjs_token_n_probs(tok);
    if (n > 0) {
      token.top = [];
      for (let i = 0; i < n; i++) {
        const id = x.wlmjs_token_top_id(tok, i);
        token.top.push({
          id,
          text: this.pieceText(prev, id),
          prob: x.wlmjs_token_top_prob(tok, i),
          logprob: x.wlmjs_token_top_logprob(tok, i),
          probSampled: x.wlmjs_token_top_prob_sampled(tok, i),
        });
      }
    }
    return { status, stopReason: null, token };
  }

  /** Whether tokenizing with BOS adds it (the vocabulary's add_bos_token; llama2.c: always). */
  addsBos() {
    const x = this.#x;
    const ids = x.wlmjs_malloc(16) >>> 0;
    if (!ids) throw jsError('WLM_ERR_NOMEM', 'cannot allocate 16 bytes');
    try {
      const n = x.wlm_tokenize_ex(this.#model, 0, 0, 1, ids, 4); // WLM_TOKENIZE_ADD_SPECIAL
      return n >= 1 && new DataView(x.memory.buffer).getInt32(ids, true) === this.bos;
    } finally {
      x.wlmjs_free(ids);
    }
  }

  /**
   * Token ids of `text` (wlm_tokenize_ex): `bos` adds the special tokens the vocabulary asks
   * for, `parseSpecial` turns control tokens written in the text into their ids. The buffer
   * grows to the count C asks for.
   */
  tokenize(text, { bos = true, parseSpecial = false } = {}) {
    const x = this.#x;
    const bytes = utf8(String(text));
    let cap = bytes.length + 3; // one token per byte at most, plus BOS and the prefix space
    const textPtr = x.wlmjs_malloc(bytes.length + 1) >>> 0;
    let idsPtr = 0;
    try {
      if (!textPtr) throw jsError('WLM_ERR_NOMEM', 'cannot allocate the text in wasm memory');
      new Uint8Array(x.memory.buffer).set(bytes, textPtr);
      for (;;) {
        idsPtr = x.wlmjs_malloc(cap * 4) >>> 0;
        if (!idsPtr) throw jsError('WLM_ERR_NOMEM', 'cannot allocate the token buffer');
        const flags = (bos ? 1 : 0) | (parseSpecial ? 2 : 0); // WLM_TOKENIZE_ADD_SPECIAL, _PARSE_SPECIAL
        const n = x.wlm_tokenize_ex(this.#model, textPtr, bytes.length, flags, idsPtr, cap);
        if (n < 0) throw this.#error(n, this.#modelMessage());
        if (n <= cap) return new Int32Array(x.memory.buffer, idsPtr, n).slice();
        x.wlmjs_free(idsPtr);
        idsPtr = 0;
        cap = n;
      }
    } finally {
      if (idsPtr) x.wlmjs_free(idsPtr);
      if (textPtr) x.wlmjs_free(textPtr);
    }
  }

  /** wlm_tokenize_pair: a reranker's input for (query, document). */
  tokenizePair(query, doc) {
    const x = this.#x;
    const q = utf8(query), d = utf8(doc);
    const qp = x.wlmjs_malloc(q.length + 1) >>> 0, dp = x.wlmjs_malloc(d.length + 1) >>> 0;
    let ids = 0;
    try {
      if (!qp || !dp) throw jsError('WLM_ERR_NOMEM', 'cannot allocate the texts in wasm memory');
      new Uint8Array(x.memory.buffer).set(q, qp);
      new Uint8Array(x.memory.buffer).set(d, dp);
      const n = x.wlm_tokenize_pair(this.#model, qp, q.length, dp, d.length, 0, 0);
      if (n < 0) throw this.#error(n, 'cannot tokenize the query and document');
      ids = x.wlmjs_malloc(Math.max(1, n) * 4) >>> 0;
      if (!ids) throw jsError('WLM_ERR_NOMEM', 'cannot allocate the token buffer');
      x.wlm_tokenize_pair(this.#model, qp, q.length, dp, d.length, ids, n);
      return new Int32Array(x.memory.buffer, ids, n).slice();
    } finally {
      if (ids) x.wlmjs_free(ids);
      if (qp) x.wlmjs_free(qp);
      if (dp) x.wlmjs_free(dp);
    }
  }
}

/**
 * GGUF string metadata `key` of `model` (wlm_model_meta_string), or null. `lenSlot`: a 4-byte
 * slot of the caller's, or 0 to use (and free) one of its own.
 */
export function metaString(x, model, key, lenSlot = 0) {
  const own = lenSlot ? 0 : x.wlmjs_malloc(4) >>> 0;
  const k = utf8(key);
  const kp = x.wlmjs_malloc(k.length + 1) >>> 0;
  try {
    if (!(lenSlot || own) || !kp) throw jsError('WLM_ERR_NOMEM', 'cannot allocate a metadata key');
    const mem = new Uint8Array(x.memory.buffer);
    mem.set(k, kp);
    mem[kp + k.length] = 0;
    return ownedString(x, lenSlot || own, x.wlm_model_meta_string, model, kp);
  } finally {
    if (kp) x.wlmjs_free(kp);
    if (own) x.wlmjs_free(own);
  }
}
