#!/usr/bin/env node
// fuzz/make-corpus.mjs — writes the seed corpora of the libFuzzer harnesses, one directory per
// harness, from the real model files in ../shared/models plus small synthetic files built here:
//
//   node fuzz/make-corpus.mjs [OUT_DIR] [SHARED_DIR]     (defaults build/fuzz-corpus, ../shared)
//
//   OUT/fuzz_model/          stories260K.bin / .gguf, cut and header-patched copies, tiny
//                            llama2.c checkpoints (shared and separate classifier, GQA) and tiny
//                            GGUF llamas in every supported weight type (F32, F16, Q8_0, Q4_0,
//                            Q4_K, Q6_K, BF16, Q4_1/Q5_0/Q5_1, Q2_K/Q3_K/Q5_K, MXFP4, a mix), with
//                            and without output.weight and a vocabulary
//   OUT/fuzz_tokenizer_bin/  tok512.bin, tokenizer.bin, cut copies, tiny tokenizer.bin files
//   OUT/fuzz_encode/         each test text of vocab/*.inp, plus hand-picked byte strings
//   OUT/fuzz_bpe/            the same texts, plus regex-engine seeds (pattern NUL text)
//   OUT/fuzz_wordpiece/      the same texts, plus BERT's special tokens, accents, CJK, controls
//   OUT/fuzz_mmproj/         synthetic mmproj files (tools/synth_mmproj.mjs), cut and edited copies
//   OUT/fuzz_gguf_vocab/     vocab/*.gguf, stories260K.gguf, cut copies, tiny vocabularies
//                            (byte tokens, user-defined and control tokens, a phi-3 name, no byte
//                            tokens, another tokenizer model, every GGUF value type)
//
// Seeds are named seed-* and rewritten on every run; files libFuzzer adds to these directories
// (named by their SHA-1) are left alone, so the corpus grows across runs. Nothing here is committed: it is all rebuilt
// from ../shared at run time. Deterministic (a fixed xorshift stream), so runs are comparable.

import fs from 'node:fs';
import path from 'node:path';

const OUT = path.resolve(process.argv[2] ?? 'build/fuzz-corpus');
const SHARED = path.resolve(process.argv[3] ?? process.env.WASMLM_SHARED ?? '../shared');
const MODELS = path.join(SHARED, 'models');

// ---- deterministic randomness ------------------------------------------------------------
let rngState = 0x9e3779b9;
function rnd() { // xorshift32, uniform in [0, 1)
  rngState ^= rngState << 13; rngState >>>= 0;
  rngState ^= rngState >>> 17;
  rngState ^= rngState << 5; rngState >>>= 0;
  return rngState / 4294967296;
}
const randByte = () => Math.floor(rnd() * 256);

// ---- output --------------------------------------------------------------------------------
const counts = {};
function put(harness, name, bytes) {
  const dir = path.join(OUT, harness);
  if (!(harness in counts)) { // first seed of this harness: drop the seeds of earlier runs
    fs.mkdirSync(dir, { recursive: true });
    for (const f of fs.readdirSync(dir)) if (f.startsWith('seed-')) fs.rmSync(path.join(dir, f));
  }
  fs.writeFileSync(path.join(dir, `seed-${name}`), bytes);
  counts[harness] = (counts[harness] ?? 0) + 1;
}
const readModel = (rel) => fs.readFileSync(path.join(MODELS, rel));

// Cut copies: the header alone, a few cuts inside the file, and the file minus its last byte.
function cuts(buf, points) {
  const out = [];
  for (const p of points) {
    const n = Math.floor(p < 1 ? buf.length * p : p);
    if (n > 0 && n < buf.length) out.push([`cut${n}`, buf.subarray(0, n)]);
  }
  out.push([`cut${buf.length - 1}`, buf.subarray(0, buf.length - 1)]);
  return out;
}

// ---- fp16 ----------------------------------------------------------------------------------
const f32buf = new Float32Array(1);
const u32view = new Uint32Array(f32buf.buffer);
function fp16(x) { // round-to-nearest binary16 bits, enough for small finite seeds
  f32buf[0] = x;
  const u = u32view[0];
  const sign = (u >>> 16) & 0x8000;
  const exp = ((u >>> 23) & 0xff) - 127 + 15;
  const mant = u & 0x7fffff;
  if (exp <= 0) return sign; // flush tiny values to zero
  if (exp >= 31) return sign | 0x7bff; // clamp to the largest finite
  return sign | (exp << 10) | Math.round(mant / 8192);
}

// ---- llama2.c checkpoints ----------------------------------------------------------------
function llama2c({ dim, hidden, layers, heads, kvHeads, vocab, seq, shared = true }) {
  const hs = dim / heads, kvDim = hs * kvHeads;
  const n = vocab * dim + layers * dim + layers * dim * dim + 2 * layers * kvDim * dim +
    layers * dim * dim + layers * dim + 3 * layers * hidden * dim + dim + 2 * seq * hs / 2 +
    (shared ? 0 : vocab * dim);
  const buf = Buffer.alloc(28 + 4 * n);
  [dim, hidden, layers, heads, kvHeads, shared ? vocab : -vocab, seq].forEach((v, i) =>
    buf.writeInt32LE(v, 4 * i));
  for (let i = 0; i < n; i++) buf.writeFloatLE((rnd() - 0.5) * 0.2, 28 + 4 * i);
  return buf;
}

// ---- GGUF writer -------------------------------------------------------------------------
const T = { U8: 0, I8: 1, U16: 2, I16: 3, U32: 4, I32: 5, F32: 6, BOOL: 7, STR: 8, ARR: 9, U64: 10, I64: 11, F64: 12 };
const GT = { F32: 0, F16: 1, Q4_0: 2, Q4_1: 3, Q5_0: 6, Q5_1: 7, Q8_0: 8, Q2_K: 10, Q3_K: 11, Q4_K: 12, Q5_K: 13, Q6_K: 14, BF16: 30, MXFP4: 39 };
const BLOCK = { [GT.F32]: [1, 4], [GT.F16]: [1, 2], [GT.Q4_0]: [32, 18], [GT.Q8_0]: [32, 34], [GT.Q4_K]: [256, 144], [GT.Q6_K]: [256, 210],
  [GT.BF16]: [1, 2], [GT.Q4_1]: [32, 20], [GT.Q5_0]: [32, 22], [GT.Q5_1]: [32, 24], [GT.Q2_K]: [256, 84], [GT.Q3_K]: [256, 110], [GT.Q5_K]: [256, 176],
  [GT.MXFP4]: [32, 17] };
const bf16 = (x) => { const b = Buffer.alloc(4); b.writeFloatLE(x); return b.readUInt16LE(2); }; // truncated: fine for seeds

class Bytes {
  constructor() { this.parts = []; this.length = 0; }
  push(b) { this.parts.push(b); this.length += b.length; }
  u8(v) { this.push(Buffer.from([v & 255])); }
  u32(v) { const b = Buffer.alloc(4); b.writeUInt32LE(v >>> 0); this.push(b); }
  i32(v) { const b = Buffer.alloc(4); b.writeInt32LE(v); this.push(b); }
  u64(v) { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(v)); this.push(b); }
  f32(v) { const b = Buffer.alloc(4); b.writeFloatLE(v); this.push(b); }
  str(s) { const b = Buffer.isBuffer(s) ? s : Buffer.from(s, 'utf8'); this.u64(b.length); this.push(b); }
  pad(align) { const r = this.length % align; if (r) this.push(Buffer.alloc(align - r)); }
  buffer() { return Buffer.concat(this.parts); }
}

function writeValue(w, type, v) {
  switch (type) {
    case T.U8: case T.BOOL: w.u8(v); break;
    case T.I8: w.push(Buffer.from([v & 255])); break;
    case T.U16: case T.I16: { const b = Buffer.alloc(2); b.writeUInt16LE(v & 0xffff); w.push(b); break; }
    case T.U32: w.u32(v); break;
    case T.I32: w.i32(v); break;
    case T.F32: w.f32(v); break;
    case T.STR: w.str(v); break;
    case T.U64: { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(v)); w.push(b); break; }
    case T.I64: { const b = Buffer.alloc(8); b.writeBigInt64LE(BigInt(v)); w.push(b); break; }
    case T.F64: { const b = Buffer.alloc(8); b.writeDoubleLE(v); w.push(b); break; }
    case T.ARR: {
      const [et, items] = v;
      w.u32(et); w.u64(items.length);
      for (const it of items) writeValue(w, et, it);
      break;
    }
    default: throw new Error(`type ${type}`);
  }
}

// kvs: [key, type, value]; tensors: { name, ne: [...], type, data: Buffer }
function gguf(kvs, tensors = [], { version = 3, alignment = 32 } = {}) {
  const w = new Bytes();
  w.push(Buffer.from('GGUF')); w.u32(version); w.u64(tensors.length); w.u64(kvs.length);
  for (const [k, t, v] of kvs) {
    w.str(k);
    if (t === 'raw') w.push(v); // a type id and value bytes as given (for invalid types)
    else { w.u32(t); writeValue(w, t, v); }
  }
  let off = 0;
  const offsets = tensors.map((t) => { const o = off; off += t.data.length; off = Math.ceil(off / alignment) * alignment; return o; });
  tensors.forEach((t, i) => {
    w.str(t.name); w.u32(t.ne.length); for (const d of t.ne) w.u64(d); w.u32(t.type); w.u64(offsets[i]);
  });
  w.pad(alignment);
  tensors.forEach((t) => { w.push(t.data); w.pad(alignment); });
  return w.buffer();
}

// Tensor bytes of `type` for `rows` × `cols`, with finite scales; norm vectors are all ones.
function tensorData(type, rows, cols, norm = false) {
  const [bs, bytes] = BLOCK[type];
  if (cols % bs) throw new Error(`cols ${cols} not a multiple of ${bs}`);
  const nb = rows * cols / bs;
  const b = Buffer.alloc(nb * bytes);
  for (let i = 0; i < b.length; i++) b[i] = randByte();
  for (let k = 0; k < nb; k++) {
    const o = k * bytes;
    switch (type) {
      case GT.F32: b.writeFloatLE(norm ? 1 : (rnd() - 0.5) * 0.2, o); break;
      case GT.F16: b.writeUInt16LE(fp16(norm ? 1 : (rnd() - 0.5) * 0.2), o); break;
      case GT.Q8_0: case GT.Q4_0: b.writeUInt16LE(fp16(0.004), o); break;
      case GT.Q4_K: b.writeUInt16LE(fp16(0.002), o); b.writeUInt16LE(fp16(0.001), o + 2); break;
      case GT.Q6_K: for (let s = 0; s < 16; s++) b[o + 192 + s] = randByte() % 64; b.writeUInt16LE(fp16(0.001), o + 208); break;
      case GT.BF16: b.writeUInt16LE(bf16(norm ? 1 : (rnd() - 0.5) * 0.2), o); break;
      case GT.Q5_0: b.writeUInt16LE(fp16(0.004), o); break;
      case GT.Q4_1: case GT.Q5_1: b.writeUInt16LE(fp16(0.004), o); b.writeUInt16LE(fp16(-0.03), o + 2); break;
      case GT.Q5_K: b.writeUInt16LE(fp16(0.002), o); b.writeUInt16LE(fp16(0.001), o + 2); break;
      case GT.Q2_K: b.writeUInt16LE(fp16(0.004), o + 80); b.writeUInt16LE(fp16(0.002), o + 82); break;
      case GT.Q3_K: b.writeUInt16LE(fp16(0.001), o + 108); break;
      case GT.MXFP4: b[o] = 119; break; // E8M0: steps of 2^-9, weights up to 12 · 2^-9
    }
  }
  return b;
}

const SP = '\u2581';

// A small llama vocabulary: <unk>, <s>, </s>, optional byte tokens, then merges and extras.
function llamaVocab({ bytes = true, extra = [] } = {}) {
  const tokens = [['<unk>', 2, 0], ['<s>', 3, 0], ['</s>', 3, 0]];
  if (bytes) for (let c = 0; c < 256; c++) tokens.push([`<0x${c.toString(16).toUpperCase().padStart(2, '0')}>`, 6, 0]);
  const pieces = [SP, 'a', 'b', 'c', 'e', 'h', 't', 'o', 'n', ' ', `${SP}t`, 'he', `${SP}a`, `${SP}the`,
    'th', `${SP}th`, 'on', `${SP}on`, 'ce', `${SP}once`, 'nce', 'once', '\u00e9', '\u65e5'];
  pieces.forEach((p, i) => tokens.push([p, 1, -i]));
  for (const e of extra) tokens.push(e);
  return tokens;
}

function vocabKvs(tokens, { model = 'llama', name = 'tiny', bos = 1, eos = 2, unk = 0, addBos = true, addEos = false, addSpace = true, extraKvs = [] } = {}) {
  return [
    ['general.architecture', T.STR, 'llama'],
    ['general.name', T.STR, name],
    ['tokenizer.ggml.model', T.STR, model],
    ['tokenizer.ggml.tokens', T.ARR, [T.STR, tokens.map((t) => t[0])]],
    ['tokenizer.ggml.scores', T.ARR, [T.F32, tokens.map((t) => t[2])]],
    ['tokenizer.ggml.token_type', T.ARR, [T.I32, tokens.map((t) => t[1])]],
    ['tokenizer.ggml.bos_token_id', T.U32, bos],
    ['tokenizer.ggml.eos_token_id', T.U32, eos],
    ['tokenizer.ggml.unknown_token_id', T.U32, unk],
    ['tokenizer.ggml.add_bos_token', T.BOOL, addBos ? 1 : 0],
    ['tokenizer.ggml.add_eos_token', T.BOOL, addEos ? 1 : 0],
    ['tokenizer.ggml.add_space_prefix', T.BOOL, addSpace ? 1 : 0],
    ...extraKvs,
  ];
}

// A tiny GGUF llama: hyperparameters, every tensor of `types` (per role), optional vocabulary.
function ggufModel({ dim, hidden, layers, heads, kvHeads, seq, vocab, types, output = true, withVocab = false, normType = GT.F32,
  vocabTokens = vocab, extraKvs = [], extraTensors = [], kvEdit = (kvs) => kvs, alignment = 32 }) {
  const hs = dim / heads, kvDim = hs * kvHeads;
  const kvs = [
    ['general.architecture', T.STR, 'llama'],
    ['general.alignment', T.U32, alignment],
    ['llama.context_length', T.U32, seq],
    ['llama.embedding_length', T.U32, dim],
    ['llama.block_count', T.U32, layers],
    ['llama.feed_forward_length', T.U32, hidden],
    ['llama.attention.head_count', T.U32, heads],
    ['llama.attention.head_count_kv', T.U32, kvHeads],
    ['llama.rope.freq_base', T.F32, 10000],
    ['llama.rope.dimension_count', T.U32, hs],
    ['llama.attention.layer_norm_rms_epsilon', T.F32, 1e-5],
  ];
  if (withVocab) {
    const tokens = llamaVocab({ bytes: false }).slice(0, vocabTokens);
    kvs.push(...vocabKvs(tokens).filter(([k]) => k.startsWith('tokenizer.')));
  }
  const tensors = [];
  const mat = (name, type, rows, cols) => tensors.push({ name, ne: [cols, rows], type, data: tensorData(type, rows, cols) });
  const norm = (name) => tensors.push({ name, ne: [dim], type: normType, data: tensorData(normType, 1, dim, true) });
  mat('token_embd.weight', types.emb, vocab, dim);
  for (let l = 0; l < layers; l++) {
    norm(`blk.${l}.attn_norm.weight`);
    mat(`blk.${l}.attn_q.weight`, types.attn, dim, dim);
    mat(`blk.${l}.attn_k.weight`, types.attn, kvDim, dim);
    mat(`blk.${l}.attn_v.weight`, types.attn, kvDim, dim);
    mat(`blk.${l}.attn_output.weight`, types.attn, dim, dim);
    norm(`blk.${l}.ffn_norm.weight`);
    mat(`blk.${l}.ffn_gate.weight`, types.ffn, hidden, dim);
    mat(`blk.${l}.ffn_up.weight`, types.ffn, hidden, dim);
    mat(`blk.${l}.ffn_down.weight`, types.down ?? types.ffn, dim, hidden);
  }
  norm('output_norm.weight');
  if (output) mat('output.weight', types.out ?? types.emb, vocab, dim);
  tensors.push(...extraTensors);
  return gguf(kvEdit([...kvs, ...extraKvs]), tensors, { alignment });
}

// A tiny GGUF of another architecture of src/model/arch.c (llama.cpp's tensor names and keys):
// qwen2 (Q/K/V biases), qwen3 (key_length != dim / heads, Q/K norms), gemma3 (Q/K norms,
// post-norms, a sliding window of 2), phi3 (fused attn_qkv, gate+up in ffn_up, LongRoPE
// factors) and gpt2 (LayerNorm biases, learned positions, fused QKV with bias, MLP biases).
function archModel(arch, { dim = 16, hidden = 24, layers = 2, heads = 2, kvHeads = 1, seq = 8, vocab = 12, keyLen = 0,
  type = GT.F32, output = true, extraKvs = [], drop = null } = {}) {
  const hs = keyLen || dim / heads, q = hs * heads, kvDim = hs * kvHeads;
  const kvs = [
    ['general.architecture', T.STR, arch],
    [`${arch}.context_length`, T.U32, seq],
    [`${arch}.embedding_length`, T.U32, dim],
    [`${arch}.block_count`, T.U32, layers],
    [`${arch}.feed_forward_length`, T.U32, hidden],
    [`${arch}.attention.head_count`, T.U32, heads],
    [`${arch}.attention.head_count_kv`, T.U32, kvHeads],
    arch === 'gpt2' ? ['gpt2.attention.layer_norm_epsilon', T.F32, 1e-5] : [`${arch}.attention.layer_norm_rms_epsilon`, T.F32, 1e-6],
  ];
  if (keyLen) kvs.push([`${arch}.attention.key_length`, T.U32, keyLen], [`${arch}.attention.value_length`, T.U32, keyLen]);
  if (arch === 'gemma3' && !extraKvs.some(([k]) => k === 'gemma3.attention.sliding_window')) kvs.push(['gemma3.attention.sliding_window', T.U32, 2]);
  if (arch === 'phi3') kvs.push(['phi3.rope.scaling.attn_factor', T.F32, 1.2], ['phi3.rope.scaling.original_context_length', T.U32, 4]);
  const tensors = [];
  const mat = (name, rows, cols) => tensors.push({ name, ne: [cols, rows], type, data: tensorData(type, rows, cols) });
  const vec = (name, n) => tensors.push({ name, ne: [n], type: GT.F32, data: tensorData(GT.F32, 1, n, true) });
  mat('token_embd.weight', vocab, dim);
  if (arch === 'gpt2') mat('position_embd.weight', seq, dim);
  if (arch === 'phi3') { vec('rope_factors_long.weight', hs / 2); vec('rope_factors_short.weight', hs / 2); }
  for (let l = 0; l < layers; l++) {
    const b = `blk.${l}.`;
    vec(b + 'attn_norm.weight', dim);
    if (arch === 'gpt2') vec(b + 'attn_norm.bias', dim);
    if (arch === 'gpt2' || arch === 'phi3') {
      mat(b + 'attn_qkv.weight', q + 2 * kvDim, dim);
      if (arch === 'gpt2') vec(b + 'attn_qkv.bias', q + 2 * kvDim);
    } else {
      mat(b + 'attn_q.weight', q, dim); mat(b + 'attn_k.weight', kvDim, dim); mat(b + 'attn_v.weight', kvDim, dim);
      if (arch === 'qwen2') { vec(b + 'attn_q.bias', q); vec(b + 'attn_k.bias', kvDim); vec(b + 'attn_v.bias', kvDim); }
    }
    if (arch === 'qwen3' || arch === 'gemma3') { vec(b + 'attn_q_norm.weight', hs); vec(b + 'attn_k_norm.weight', hs); }
    mat(b + 'attn_output.weight', dim, q);
    if (arch === 'gpt2') vec(b + 'attn_output.bias', dim);
    if (arch === 'gemma3') vec(b + 'post_attention_norm.weight', dim);
    vec(b + 'ffn_norm.weight', dim);
    if (arch === 'gpt2') vec(b + 'ffn_norm.bias', dim);
    if (arch !== 'gpt2' && arch !== 'phi3') mat(b + 'ffn_gate.weight', hidden, dim);
    mat(b + 'ffn_up.weight', arch === 'phi3' ? 2 * hidden : hidden, dim);
    if (arch === 'gpt2') vec(b + 'ffn_up.bias', hidden);
    mat(b + 'ffn_down.weight', dim, hidden);
    if (arch === 'gpt2') vec(b + 'ffn_down.bias', dim);
    if (arch === 'gemma3') vec(b + 'post_ffw_norm.weight', dim);
  }
  vec('output_norm.weight', dim);
  if (arch === 'gpt2') vec('output_norm.bias', dim);
  if (output) mat('output.weight', vocab, dim);
  return gguf([...kvs, ...extraKvs], tensors.filter((t) => t.name !== drop), { alignment: 32 });
}

// A tiny hybrid of src/model/arch.c (src/model/gguf_hparams.c read_hybrid): qwen35 (Gated
// DeltaNet layers 'R' with the conv, delta-rule and gated-norm tensors, gated attention 'A'
// whose attn_q holds query and gate rows, multi-section RoPE) or lfm2 (short convolutions where
// the per-layer head_count_kv is 0). `kinds`: qwen35's attention.recurrent_layers (null: the
// interval rule); `kvArr`: lfm2's per-layer KV heads (default from `pattern`).
function hybridModel(arch, { pattern = 'RRA', dim = 16, hidden = 24, heads = 2, kvHeads = 1, seq = 8, vocab = 12,
  type = GT.F32, output = false, kinds = undefined, kvArr = null, extraKvs = [], drop = null } = {}) {
  const L = pattern.length, hs = arch === 'qwen35' ? 16 : dim / heads, q = hs * heads, kvDim = hs * kvHeads;
  const D = type === GT.F32 ? 8 : 16, HK = 1, HV = 2, K = arch === 'qwen35' ? 4 : 3, C = arch === 'qwen35' ? 2 * HK * D + HV * D : dim;
  const kvs = [
    ['general.architecture', T.STR, arch],
    [`${arch}.context_length`, T.U32, seq],
    [`${arch}.embedding_length`, T.U32, dim],
    [`${arch}.block_count`, T.U32, L],
    [`${arch}.feed_forward_length`, T.U32, hidden],
    [`${arch}.attention.head_count`, T.U32, heads],
    [`${arch}.attention.layer_norm_rms_epsilon`, T.F32, 1e-6],
  ];
  if (arch === 'qwen35') {
    kvs.push([`${arch}.attention.head_count_kv`, T.U32, kvHeads], [`${arch}.attention.key_length`, T.U32, hs],
      [`${arch}.attention.value_length`, T.U32, hs], [`${arch}.rope.dimension_count`, T.U32, 4],
      [`${arch}.rope.dimension_sections`, T.ARR, [T.I32, [1, 1, 0, 0]]], [`${arch}.ssm.conv_kernel`, T.U32, K],
      [`${arch}.ssm.state_size`, T.U32, D], [`${arch}.ssm.group_count`, T.U32, HK],
      [`${arch}.ssm.time_step_rank`, T.U32, HV], [`${arch}.ssm.inner_size`, T.U32, HV * D]);
    const flags = kinds === undefined ? [...pattern].map((c) => (c === 'R' ? 1 : 0)) : kinds;
    if (flags) kvs.push([`${arch}.attention.recurrent_layers`, T.ARR, [T.BOOL, flags]]);
    else kvs.push([`${arch}.full_attention_interval`, T.U32, 3]);
  } else {
    kvs.push([`${arch}.attention.head_count_kv`, T.ARR, [T.I32, kvArr ?? [...pattern].map((c) => (c === 'R' ? 0 : kvHeads))]],
      [`${arch}.shortconv.l_cache`, T.U32, K]);
  }
  const tensors = [];
  const mat = (name, rows, cols) => tensors.push({ name, ne: [cols, rows], type, data: tensorData(type, rows, cols) });
  const f32 = (name, rows, cols) => tensors.push({ name, ne: rows > 1 ? [cols, rows] : [cols], type: GT.F32, data: tensorData(GT.F32, rows, cols, true) });
  mat('token_embd.weight', vocab, dim);
  for (let l = 0; l < L; l++) {
    const b = `blk.${l}.`;
    f32(b + 'attn_norm.weight', 1, dim);
    if (pattern[l] === 'R' && arch === 'qwen35') {
      mat(b + 'attn_qkv.weight', C, dim); mat(b + 'attn_gate.weight', HV * D, dim);
      mat(b + 'ssm_beta.weight', HV, dim); mat(b + 'ssm_alpha.weight', HV, dim); mat(b + 'ssm_out.weight', dim, HV * D);
      f32(b + 'ssm_conv1d.weight', C, K); f32(b + 'ssm_dt.bias', 1, HV); f32(b + 'ssm_a', 1, HV); f32(b + 'ssm_norm.weight', 1, D);
    } else if (pattern[l] === 'R') {
      mat(b + 'shortconv.in_proj.weight', 3 * dim, dim); f32(b + 'shortconv.conv.weight', dim, K);
      mat(b + 'shortconv.out_proj.weight', dim, dim);
    } else {
      mat(b + 'attn_q.weight', arch === 'qwen35' ? 2 * q : q, dim); mat(b + 'attn_k.weight', kvDim, dim);
      mat(b + 'attn_v.weight', kvDim, dim); f32(b + 'attn_q_norm.weight', 1, hs); f32(b + 'attn_k_norm.weight', 1, hs);
      mat(b + 'attn_output.weight', dim, q);
    }
    f32(b + (arch === 'qwen35' ? 'post_attention_norm.weight' : 'ffn_norm.weight'), 1, dim);
    mat(b + 'ffn_gate.weight', hidden, dim); mat(b + 'ffn_up.weight', hidden, dim); mat(b + 'ffn_down.weight', dim, hidden);
  }
  f32(arch === 'qwen35' ? 'output_norm.weight' : 'token_embd_norm.weight', 1, dim);
  if (output) mat('output.weight', vocab, dim);
  return gguf([...kvs, ...extraKvs], tensors.filter((t) => t.name !== drop), { alignment: 32 });
}

// A tiny mixture of experts of src/model/arch.c (src/model/moe.c; gguf_hparams.c read_moe /
// map_moe): qwen3moe, qwen3's attention with every feed-forward a router ffn_gate_inp [dim, E]
// and stacked experts ffn_{gate,up}_exps [dim, F, E], ffn_down_exps [F, dim, E]. `experts`
// overrides the tensors' third dimension (a count that contradicts expert_count), `used`
// expert_used_count.
function moeModel({ arch = 'qwen3moe', dim = 16, hidden = 24, layers = 2, heads = 2, kvHeads = 1, seq = 8, vocab = 12, E = 4, used = 2, F = 8,
  experts = null, type = GT.F32, extraKvs = [], drop = null } = {}) {
  // gpt-oss: biases, sinks, a window of 2 on even layers, YaRN, post_attention_norm; lfm2moe:
  // a conv block then attention, block 0 dense, exp_probs_b
  const oss = arch === 'gpt-oss', lfm = arch === 'lfm2moe';
  const hs = lfm ? dim / heads : 8, q = hs * heads, kvDim = hs * kvHeads, EX = experts ?? E;
  const kvs = [
    ['general.architecture', T.STR, arch],
    [`${arch}.context_length`, T.U32, seq], [`${arch}.embedding_length`, T.U32, dim],
    [`${arch}.block_count`, T.U32, layers], [`${arch}.feed_forward_length`, T.U32, hidden],
    [`${arch}.attention.head_count`, T.U32, heads], [`${arch}.attention.head_count_kv`, T.U32, kvHeads],
    [`${arch}.attention.key_length`, T.U32, hs], [`${arch}.attention.value_length`, T.U32, hs],
    [`${arch}.attention.layer_norm_rms_epsilon`, T.F32, 1e-6], [`${arch}.expert_count`, T.U32, E],
    [`${arch}.expert_used_count`, T.U32, used], [`${arch}.expert_feed_forward_length`, T.U32, F],
  ];
  if (oss) kvs.push([`${arch}.attention.sliding_window`, T.U32, 2], [`${arch}.rope.scaling.type`, T.STR, 'yarn'],
    [`${arch}.rope.scaling.factor`, T.F32, 32], [`${arch}.rope.scaling.original_context_length`, T.U32, 4]);
  if (lfm) {
    kvs.splice(kvs.findIndex((k) => k[0] === `${arch}.attention.head_count_kv`), 1,
      [`${arch}.attention.head_count_kv`, T.ARR, [T.I32, Array.from({ length: layers }, (_, l) => (l % 2 ? kvHeads : 0))]]);
    kvs.push([`${arch}.shortconv.l_cache`, T.U32, 3], [`${arch}.leading_dense_block_count`, T.U32, 1],
      [`${arch}.expert_gating_func`, T.U32, 2]);
  }
  const tensors = [];
  const mat = (name, rows, cols) => tensors.push({ name, ne: [cols, rows], type, data: tensorData(type, rows, cols) });
  const exps = (name, rows, cols) => tensors.push({ name, ne: [cols, rows, EX], type, data: tensorData(type, rows * EX, cols) });
  const f32 = (name, rows, cols) => tensors.push({ name, ne: rows > 1 ? [cols, rows] : [cols], type: GT.F32, data: tensorData(GT.F32, rows, cols, true) });
  mat('token_embd.weight', vocab, dim);
  for (let l = 0; l < layers; l++) {
    const b = `blk.${l}.`;
    f32(b + 'attn_norm.weight', 1, dim);
    if (lfm && l % 2 === 0) {
      mat(b + 'shortconv.in_proj.weight', 3 * dim, dim); f32(b + 'shortconv.conv.weight', dim, 3);
      mat(b + 'shortconv.out_proj.weight', dim, dim);
    } else {
      mat(b + 'attn_q.weight', q, dim); mat(b + 'attn_k.weight', kvDim, dim); mat(b + 'attn_v.weight', kvDim, dim);
      if (oss) {
        f32(b + 'attn_q.bias', 1, q); f32(b + 'attn_k.bias', 1, kvDim); f32(b + 'attn_v.bias', 1, kvDim);
        f32(b + 'attn_output.bias', 1, dim); f32(b + 'attn_sinks.weight', 1, heads);
      } else {
        f32(b + 'attn_q_norm.weight', 1, hs); f32(b + 'attn_k_norm.weight', 1, hs);
      }
      mat(b + 'attn_output.weight', dim, q);
    }
    f32(b + (oss ? 'post_attention_norm.weight' : 'ffn_norm.weight'), 1, dim);
    if (lfm && l === 0) {
      mat(b + 'ffn_gate.weight', hidden, dim); mat(b + 'ffn_up.weight', hidden, dim); mat(b + 'ffn_down.weight', dim, hidden);
      continue;
    }
    f32(b + 'ffn_gate_inp.weight', E, dim);
    if (oss) f32(b + 'ffn_gate_inp.bias', 1, E);
    if (lfm) f32(b + 'exp_probs_b.bias', 1, E);
    exps(b + 'ffn_gate_exps.weight', F, dim); exps(b + 'ffn_up_exps.weight', F, dim); exps(b + 'ffn_down_exps.weight', dim, F);
    if (oss) { f32(b + 'ffn_gate_exps.bias', EX, F); f32(b + 'ffn_up_exps.bias', EX, F); f32(b + 'ffn_down_exps.bias', EX, dim); }
  }
  f32(lfm ? 'token_embd_norm.weight' : 'output_norm.weight', 1, dim);
  if (oss) mat('output.weight', vocab, dim);
  return gguf([...kvs, ...extraKvs], tensors.filter((t) => t.name !== drop), { alignment: 32 });
}

// A tiny Gemma 4 (src/model/gguf_hparams.c read_per_layer): sliding 'S' and full 'F' layers with
// their own head sizes (8 and 16), per-layer feed_forward_length and head_count_kv arrays, the
// last `shared` layers reading an earlier layer's KV cache, V = K on full layers, per-layer
// embeddings (P 4) and layer_output_scale. `ffKey` / `kvKey`: the keys' arrays alone (a wrong
// length), `pattern` / `shared` contradicting each other, and `extra` (tensors added: a shared
// layer's misshapen attn_k, an MoE router) or `drop` make the error seeds. `moe` (26B-A4B's
// kind: every layer a mixture beside its dense feed-forward): {E, K, F, split (separate
// gate/up instead of the fused ffn_gate_up_exps), scale (ffn_down_exps.scale), and the
// wrong shapes gu (the fused tensor's rows), inScale (ffn_gate_inp.scale's length), outScale
// (ffn_down_exps.scale's length)}.
function gemma4Model({ pattern = 'SSFSF', shared = 2, dim = 16, heads = 2, seq = 8, vocab = 12, ff = null, kvArr = null,
  ffKey = null, kvKey = null, type = GT.F32, extra = [], extraKvs = [], drop = null, moe = null } = {}) {
  const L = pattern.length, P = 4, hd = (l) => (pattern[l] === 'S' ? 8 : 16);
  const ffs = ff ?? [...pattern].map((_, l) => 16 + 8 * (l % 2)), kvs_ = kvArr ?? [...pattern].map(() => 1);
  const kvs = [
    ['general.architecture', T.STR, 'gemma4'],
    ['gemma4.context_length', T.U32, seq],
    ['gemma4.embedding_length', T.U32, dim],
    ['gemma4.block_count', T.U32, L],
    ['gemma4.feed_forward_length', T.ARR, [T.I32, ffKey ?? ffs]],
    ['gemma4.attention.head_count', T.U32, heads],
    ['gemma4.attention.head_count_kv', T.ARR, [T.I32, kvKey ?? kvs_]],
    ['gemma4.attention.layer_norm_rms_epsilon', T.F32, 1e-6],
    ['gemma4.attention.key_length', T.U32, 16], ['gemma4.attention.value_length', T.U32, 16],
    ['gemma4.attention.key_length_swa', T.U32, 8], ['gemma4.attention.value_length_swa', T.U32, 8],
    ['gemma4.rope.dimension_count_swa', T.U32, 8], ['gemma4.rope.freq_base_swa', T.F32, 10000],
    ['gemma4.attention.sliding_window', T.U32, 4],
    ['gemma4.attention.sliding_window_pattern', T.ARR, [T.BOOL, [...pattern].map((c) => (c === 'S' ? 1 : 0))]],
    ['gemma4.attention.shared_kv_layers', T.U32, shared],
    ['gemma4.embedding_length_per_layer_input', T.U32, P],
    ['gemma4.final_logit_softcapping', T.F32, 30],
  ];
  if (moe) kvs.push(['gemma4.expert_count', T.U32, moe.E], ['gemma4.expert_used_count', T.U32, moe.K],
    ['gemma4.expert_feed_forward_length', T.U32, moe.F]);
  const tensors = [];
  const mat = (name, rows, cols) => { // rows not of whole 32-blocks stay F32
    const ty = cols % 32 ? GT.F32 : type;
    tensors.push({ name, ne: [cols, rows], type: ty, data: tensorData(ty, rows, cols) });
  };
  const f32 = (name, n) => tensors.push({ name, ne: [n], type: GT.F32, data: tensorData(GT.F32, 1, n, true) });
  mat('token_embd.weight', vocab, dim);
  f32('rope_freqs.weight', 8);
  mat('per_layer_token_embd.weight', vocab, P * L); mat('per_layer_model_proj.weight', P * L, dim);
  f32('per_layer_proj_norm.weight', P);
  for (let l = 0; l < L; l++) {
    const b = `blk.${l}.`, h = hd(l), own = l < L - shared;
    f32(b + 'attn_norm.weight', dim);
    mat(b + 'attn_q.weight', heads * h, dim); f32(b + 'attn_q_norm.weight', h);
    if (own) {
      mat(b + 'attn_k.weight', kvs_[l] * h, dim); f32(b + 'attn_k_norm.weight', h);
      if (pattern[l] === 'S') mat(b + 'attn_v.weight', kvs_[l] * h, dim);
    }
    mat(b + 'attn_output.weight', dim, heads * h);
    f32(b + 'post_attention_norm.weight', dim); f32(b + 'ffn_norm.weight', dim);
    mat(b + 'ffn_gate.weight', ffs[l], dim); mat(b + 'ffn_up.weight', ffs[l], dim); mat(b + 'ffn_down.weight', dim, ffs[l]);
    f32(b + 'post_ffw_norm.weight', dim);
    if (moe) {
      const { E, F } = moe;
      const exps = (name, rows, cols) => tensors.push({ name, ne: [cols, rows, E], type: GT.F32, data: tensorData(GT.F32, rows * E, cols) });
      mat(b + 'ffn_gate_inp.weight', E, dim); f32(b + 'ffn_gate_inp.scale', moe.inScale ?? dim);
      f32(b + 'pre_ffw_norm_2.weight', dim); f32(b + 'post_ffw_norm_1.weight', dim); f32(b + 'post_ffw_norm_2.weight', dim);
      if (moe.split) { exps(b + 'ffn_gate_exps.weight', F, dim); exps(b + 'ffn_up_exps.weight', F, dim); }
      else exps(b + 'ffn_gate_up_exps.weight', moe.gu ?? 2 * F, dim);
      exps(b + 'ffn_down_exps.weight', dim, F);
      if (moe.scale) f32(b + 'ffn_down_exps.scale', moe.outScale ?? E);
    }
    mat(b + 'inp_gate.weight', P, dim); mat(b + 'proj.weight', dim, P); f32(b + 'post_norm.weight', dim);
    f32(b + 'layer_output_scale.weight', 1);
  }
  f32('output_norm.weight', dim);
  for (const [name, rows, cols] of extra) mat(name, rows, cols);
  return gguf([...kvs, ...extraKvs], tensors.filter((t) => t.name !== drop), { alignment: 32 });
}

// A tiny embedding model of src/model/arch.c: bert (learned positions, token types, Q/K/V and
// MLP biases, post-LayerNorms; `rank`: cls and cls.output), nomic-bert (fused QKV, SwiGLU, RoPE)
// or gemma-embedding (Gemma 3's layers, bidirectional, dense_2 / dense_3).
function embedModel(arch, { dim = 16, hidden = 24, layers = 2, heads = 2, seq = 8, vocab = 12, rank = false } = {}) {
  const kvs = [
    ['general.architecture', T.STR, arch],
    [`${arch}.context_length`, T.U32, seq],
    [`${arch}.embedding_length`, T.U32, dim],
    [`${arch}.block_count`, T.U32, layers],
    [`${arch}.feed_forward_length`, T.U32, hidden],
    [`${arch}.attention.head_count`, T.U32, heads],
    [`${arch}.pooling_type`, T.U32, rank ? 4 : 1],
  ];
  const tensors = [];
  const mat = (name, rows, cols) => tensors.push({ name, ne: [cols, rows], type: GT.F32, data: tensorData(GT.F32, rows, cols) });
  const vec = (name, n) => tensors.push({ name, ne: [n], type: GT.F32, data: tensorData(GT.F32, 1, n, true) });
  mat('token_embd.weight', vocab, dim);
  if (arch === 'gemma-embedding') {
    const hs = dim / heads;
    kvs.push(['gemma-embedding.attention.head_count_kv', T.U32, 1], ['gemma-embedding.attention.layer_norm_rms_epsilon', T.F32, 1e-6],
      ['gemma-embedding.attention.sliding_window', T.U32, 2]);
    for (let l = 0; l < layers; l++) {
      const b = `blk.${l}.`;
      vec(b + 'attn_norm.weight', dim);
      mat(b + 'attn_q.weight', dim, dim); mat(b + 'attn_k.weight', hs, dim); mat(b + 'attn_v.weight', hs, dim);
      vec(b + 'attn_q_norm.weight', hs); vec(b + 'attn_k_norm.weight', hs);
      mat(b + 'attn_output.weight', dim, dim);
      vec(b + 'post_attention_norm.weight', dim);
      vec(b + 'ffn_norm.weight', dim);
      mat(b + 'ffn_gate.weight', hidden, dim); mat(b + 'ffn_up.weight', hidden, dim); mat(b + 'ffn_down.weight', dim, hidden);
      vec(b + 'post_ffw_norm.weight', dim);
    }
    vec('output_norm.weight', dim);
    mat('dense_2.weight', 2 * dim, dim);
    mat('dense_3.weight', dim, 2 * dim);
    return gguf(kvs, tensors, { alignment: 32 });
  }
  kvs.push([`${arch}.attention.layer_norm_epsilon`, T.F32, 1e-12], [`${arch}.attention.causal`, T.BOOL, 0]);
  mat('token_types.weight', 2, dim);
  if (arch === 'bert') mat('position_embd.weight', seq, dim);
  vec('token_embd_norm.weight', dim); vec('token_embd_norm.bias', dim);
  for (let l = 0; l < layers; l++) {
    const b = `blk.${l}.`;
    if (arch === 'bert') {
      for (const x of ['q', 'k', 'v']) { mat(`${b}attn_${x}.weight`, dim, dim); vec(`${b}attn_${x}.bias`, dim); }
    } else mat(b + 'attn_qkv.weight', 3 * dim, dim);
    mat(b + 'attn_output.weight', dim, dim);
    if (arch === 'bert') vec(b + 'attn_output.bias', dim);
    vec(b + 'attn_output_norm.weight', dim); vec(b + 'attn_output_norm.bias', dim);
    if (arch === 'nomic-bert') mat(b + 'ffn_gate.weight', hidden, dim);
    mat(b + 'ffn_up.weight', hidden, dim);
    if (arch === 'bert') vec(b + 'ffn_up.bias', hidden);
    mat(b + 'ffn_down.weight', dim, hidden);
    if (arch === 'bert') vec(b + 'ffn_down.bias', dim);
    vec(b + 'layer_output_norm.weight', dim); vec(b + 'layer_output_norm.bias', dim);
  }
  if (rank) { mat('cls.weight', dim, dim); vec('cls.bias', dim); mat('cls.output.weight', 1, dim); vec('cls.output.bias', 1); }
  return gguf(kvs, tensors, { alignment: 32 });
}

// =============================================================================================
// fuzz_model

{
  const bin = readModel('stories260K.bin');
  const gg = readModel('stories260K.gguf');
  put('fuzz_model', 'stories260K.bin', bin);
  put('fuzz_model', 'stories260K.gguf', gg);
  for (const [n, b] of cuts(bin, [28, 4096, 0.5])) put('fuzz_model', `stories260K.bin.${n}`, b);
  for (const [n, b] of cuts(gg, [24, 512, 4096, 0.5])) put('fuzz_model', `stories260K.gguf.${n}`, b);
  // header patches of the real checkpoint: separate classifier, other heads, zero and huge dims
  const patches = [[5, -512], [3, 4], [4, 4], [0, 0], [6, 0x7fffffff], [2, 1024]];
  patches.forEach(([field, v]) => {
    const b = Buffer.from(bin);
    b.writeInt32LE(v, 4 * field);
    put('fuzz_model', `stories260K.bin.h${field}=${v}`, b);
  });

  const tiny = { dim: 8, hidden: 12, layers: 1, heads: 2, kvHeads: 2, vocab: 6, seq: 4 };
  put('fuzz_model', 'tiny-llama2c', llama2c(tiny));
  put('fuzz_model', 'tiny-llama2c-unshared', llama2c({ ...tiny, shared: false }));
  put('fuzz_model', 'tiny-llama2c-gqa', llama2c({ ...tiny, heads: 4, kvHeads: 1, layers: 2, dim: 16 }));
  put('fuzz_model', 'tiny-llama2c-seq1', llama2c({ ...tiny, seq: 1 }));

  const small = { dim: 32, hidden: 64, layers: 1, heads: 2, kvHeads: 1, seq: 8, vocab: 24 };
  for (const [name, t] of Object.entries({ F32: GT.F32, F16: GT.F16, Q8_0: GT.Q8_0, Q4_0: GT.Q4_0 })) {
    const types = { emb: t, attn: t, ffn: t };
    put('fuzz_model', `tiny-${name}.gguf`, ggufModel({ ...small, types }));
    put('fuzz_model', `tiny-${name}-tied-vocab.gguf`, ggufModel({ ...small, types, output: false, withVocab: true }));
  }
  put('fuzz_model', 'tiny-mixed-f16norm.gguf', ggufModel({ ...small, types: { emb: GT.F16, attn: GT.Q8_0, ffn: GT.Q4_0, out: GT.Q8_0 }, normType: GT.F16, withVocab: true }));
  const kq = { dim: 256, hidden: 32, layers: 1, heads: 2, kvHeads: 1, seq: 8, vocab: 8 };
  put('fuzz_model', 'tiny-Q4_K.gguf', ggufModel({ ...kq, types: { emb: GT.Q4_K, attn: GT.Q4_K, ffn: GT.Q4_K, down: GT.Q8_0, out: GT.Q6_K } }));
  put('fuzz_model', 'tiny-Q6_K.gguf', ggufModel({ ...kq, types: { emb: GT.Q6_K, attn: GT.Q6_K, ffn: GT.Q6_K, down: GT.Q4_0 }, output: false }));
  put('fuzz_model', 'tiny-BF16.gguf', ggufModel({ ...small, types: { emb: GT.BF16, attn: GT.BF16, ffn: GT.BF16 } }));
  put('fuzz_model', 'tiny-MXFP4.gguf', ggufModel({ ...small, types: { emb: GT.MXFP4, attn: GT.MXFP4, ffn: GT.MXFP4, out: GT.Q8_0 } }));
  put('fuzz_model', 'tiny-Q4_1-Q5_0-Q5_1.gguf', ggufModel({ ...small, types: { emb: GT.Q4_1, attn: GT.Q5_0, ffn: GT.Q5_1, out: GT.Q5_0 } }));
  put('fuzz_model', 'tiny-Q2_K-Q3_K-Q5_K.gguf', ggufModel({ ...kq, types: { emb: GT.Q5_K, attn: GT.Q3_K, ffn: GT.Q2_K, down: GT.Q5_1, out: GT.Q3_K } }));
  put('fuzz_model', 'tiny-Q4_K-hidden256.gguf', ggufModel({ ...kq, hidden: 256, heads: 4, kvHeads: 4, types: { emb: GT.F32, attn: GT.Q4_K, ffn: GT.Q6_K, down: GT.Q4_K } }));
  // Variants of the small F32 model that reach the loader's other checks.
  const f32 = { ...small, types: { emb: GT.F32, attn: GT.F32, ffn: GT.F32 } };
  const retype = (map) => (kvs) => kvs.map(([k, t, v]) => (k in map ? [k, map[k], v] : [k, t, v]));
  const variants = {
    'vocab-size-key': { extraKvs: [['llama.vocab_size', T.U32, small.vocab]] },
    'vocab-size-mismatch': { extraKvs: [['llama.vocab_size', T.U32, small.vocab + 1]] },
    'vocab-tokens-mismatch': { withVocab: true, vocabTokens: small.vocab - 1 },
    'rope-scaling-linear': { extraKvs: [['llama.rope.scaling.type', T.STR, 'linear'], ['llama.rope.scaling.factor', T.F32, 2]] },
    'rope-scaling-linear-1': { extraKvs: [['llama.rope.scaling.type', T.STR, 'linear'], ['llama.rope.scaling.factor', T.F32, 1]] },
    'rope-scaling-none': { extraKvs: [['llama.rope.scaling.type', T.STR, 'none']] },
    'rope-freqs': { extraTensors: [{ name: 'rope_freqs.weight', ne: [8], type: GT.F32, data: tensorData(GT.F32, 1, 8, true) }] },
    'experts': { extraKvs: [['llama.expert_count', T.U32, 8], ['llama.expert_used_count', T.U32, 2]] },
    'experts-1': { extraKvs: [['llama.expert_count', T.U32, 1]] },
    'key-length': { extraKvs: [['llama.attention.key_length', T.U32, 8], ['llama.attention.value_length', T.U32, 16]] },
    'norm-q8': { normType: GT.Q8_0 },
    'eps-2': { kvEdit: (kvs) => kvs.map(([k, t, v]) => (k.endsWith('rms_epsilon') ? [k, t, 2] : [k, t, v])) },
    'freq-negative': { kvEdit: (kvs) => kvs.map(([k, t, v]) => (k.endsWith('freq_base') ? [k, t, -1] : [k, t, v])) },
    'int-types': { kvEdit: retype({ 'llama.context_length': T.U16, 'llama.block_count': T.I8, 'llama.embedding_length': T.U64,
      'llama.feed_forward_length': T.I64, 'llama.attention.head_count': T.I16, 'llama.attention.head_count_kv': T.I32,
      'llama.rope.freq_base': T.F64, 'general.alignment': T.U64 }) },
    'alignment-1': { alignment: 1, extraKvs: [['pad', T.STR, 'x']] },
    'alignment-2': { alignment: 2, extraKvs: [['pad', T.STR, 'xy']] },
    'alignment-3': { alignment: 3 },
    'arch-mistral': { kvEdit: (kvs) => kvs.map(([k, t, v]) => (k === 'general.architecture' ? [k, t, 'mistral'] : [k, t, v])) },
    'nested-9': { extraKvs: [['deep', T.ARR, Array.from({ length: 8 }).reduce((a) => [T.ARR, [a]], [T.U8, [1]])]] },
    'bad-value-type': { extraKvs: [['bad', 'raw', Buffer.from([13, 0, 0, 0, 0, 0, 0, 0])]] },
    'bad-array-type': { extraKvs: [['bad', 'raw', Buffer.from([9, 0, 0, 0, 13, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0])]] },
  };
  for (const [name, v] of Object.entries(variants)) put('fuzz_model', `tiny-F32-${name}.gguf`, ggufModel({ ...f32, ...v }));
  for (const arch of ['qwen2', 'qwen3', 'gemma3', 'phi3', 'gpt2']) {
    const o = { keyLen: arch === 'qwen3' || arch === 'gemma3' ? 12 : 0, output: arch !== 'gpt2' && arch !== 'gemma3' };
    put('fuzz_model', `tiny-${arch}.gguf`, archModel(arch, o));
    put('fuzz_model', `tiny-${arch}-Q8_0.gguf`, archModel(arch, { ...o, dim: 32, hidden: 64, keyLen: o.keyLen ? 32 : 0, type: GT.Q8_0 }));
  }
  put('fuzz_model', 'tiny-gemma3-no-window-softcap.gguf', archModel('gemma3', { keyLen: 12,
    extraKvs: [['gemma3.attention.sliding_window', T.U32, 0], ['gemma3.final_logit_softcapping', T.F32, 30]] }));
  put('fuzz_model', 'tiny-gemma3-pattern-array.gguf', archModel('gemma3', { keyLen: 12,
    extraKvs: [['gemma3.attention.sliding_window_pattern', T.ARR, [T.BOOL, [1, 0]]]] }));
  put('fuzz_model', 'tiny-qwen2-no-bias.gguf', archModel('qwen2', { drop: 'blk.1.attn_v.bias' }));
  put('fuzz_model', 'tiny-gpt2-no-positions.gguf', archModel('gpt2', { drop: 'position_embd.weight' }));
  // hybrids: both kinds of layer, quantized, the interval rule, and kinds or arrays that
  // contradict the tensors or the layer count
  for (const arch of ['qwen35', 'lfm2']) {
    put('fuzz_model', `tiny-${arch}.gguf`, hybridModel(arch));
    put('fuzz_model', `tiny-${arch}-Q8_0-untied.gguf`, hybridModel(arch, { dim: 32, hidden: 64, type: GT.Q8_0, output: true, pattern: 'ARR' }));
    put('fuzz_model', `tiny-${arch}-short-array.gguf`, arch === 'qwen35' ? hybridModel(arch, { kinds: [1, 1] }) : hybridModel(arch, { kvArr: [0, 1] }));
    put('fuzz_model', `tiny-${arch}-kinds-contradict.gguf`, arch === 'qwen35' ? hybridModel(arch, { kinds: [1, 0, 1] }) : hybridModel(arch, { kvArr: [1, 0, 1] }));
  }
  put('fuzz_model', 'tiny-qwen35-interval.gguf', hybridModel('qwen35', { kinds: null }));
  put('fuzz_model', 'tiny-qwen35-no-ssm-a.gguf', hybridModel('qwen35', { drop: 'blk.0.ssm_a' }));
  put('fuzz_model', 'tiny-lfm2-all-conv.gguf', hybridModel('lfm2', { pattern: 'RR' }));
  // Gemma 4: a good one (F32, Q8_0), then per-layer arrays of the wrong length and contradicting tensors
  put('fuzz_model', 'tiny-gemma4.gguf', gemma4Model());
  put('fuzz_model', 'tiny-gemma4-Q8_0.gguf', gemma4Model({ dim: 32, type: GT.Q8_0, ff: [32, 64, 32, 64, 32] }));
  put('fuzz_model', 'tiny-gemma4-ff-short.gguf', gemma4Model({ ffKey: [16, 24] }));
  put('fuzz_model', 'tiny-gemma4-kv-long.gguf', gemma4Model({ kvKey: [1, 1, 1, 1, 1, 1] }));
  put('fuzz_model', 'tiny-gemma4-shared-kind.gguf', gemma4Model({ pattern: 'SFSFS', shared: 2 }));
  put('fuzz_model', 'tiny-gemma4-shared-has-k.gguf', gemma4Model({ extra: [['blk.4.attn_k.weight', 9, 16]] }));
  put('fuzz_model', 'tiny-gemma4-router-no-count.gguf', gemma4Model({ extra: [['blk.0.ffn_gate_inp.weight', 4, 16]] }));
  // its mixture-of-experts layers (26B-A4B): fused and separate experts, then wrong shapes
  const g4moe = { E: 4, K: 2, F: 8, scale: true };
  put('fuzz_model', 'tiny-gemma4-moe.gguf', gemma4Model({ moe: g4moe }));
  put('fuzz_model', 'tiny-gemma4-moe-split.gguf', gemma4Model({ moe: { ...g4moe, split: true, scale: false } }));
  put('fuzz_model', 'tiny-gemma4-moe-gate-up-short.gguf', gemma4Model({ moe: { ...g4moe, gu: 15 } }));
  put('fuzz_model', 'tiny-gemma4-moe-in-scale-short.gguf', gemma4Model({ moe: { ...g4moe, inScale: 15 } }));
  put('fuzz_model', 'tiny-gemma4-moe-out-scale-long.gguf', gemma4Model({ moe: { ...g4moe, outScale: 5 } }));
  put('fuzz_model', 'tiny-gemma4-moe-no-pre-norm.gguf', gemma4Model({ moe: g4moe, drop: 'blk.2.pre_ffw_norm_2.weight' }));
  put('fuzz_model', 'tiny-gemma4-moe-no-experts.gguf', gemma4Model({ moe: g4moe, drop: 'blk.1.ffn_gate_up_exps.weight' }));
  put('fuzz_model', 'tiny-gemma4-moe-no-scale.gguf', gemma4Model({ moe: g4moe, drop: 'blk.1.ffn_gate_inp.scale' }));
  put('fuzz_model', 'tiny-gemma4-no-ple.gguf', gemma4Model({ drop: 'blk.1.proj.weight' }));
  // mixtures of experts: F32 and quantized experts, and counts or shapes that contradict
  put('fuzz_model', 'tiny-qwen3moe.gguf', moeModel());
  put('fuzz_model', 'tiny-qwen3moe-Q8_0.gguf', moeModel({ dim: 32, F: 32, heads: 4, kvHeads: 2, type: GT.Q8_0 }));
  put('fuzz_model', 'tiny-qwen3moe-all-used.gguf', moeModel({ E: 3, used: 3 }));
  put('fuzz_model', 'tiny-qwen3moe-experts-short.gguf', moeModel({ experts: 3 }));
  put('fuzz_model', 'tiny-qwen3moe-used-above-count.gguf', moeModel({ used: 5 }));
  put('fuzz_model', 'tiny-qwen3moe-no-router.gguf', moeModel({ drop: 'blk.1.ffn_gate_inp.weight' }));
  put('fuzz_model', 'tiny-lfm2moe.gguf', moeModel({ arch: 'lfm2moe', layers: 3 }));
  put('fuzz_model', 'tiny-lfm2moe-no-probs-bias.gguf', moeModel({ arch: 'lfm2moe', layers: 3, drop: 'blk.1.exp_probs_b.bias' }));
  put('fuzz_model', 'tiny-gpt-oss.gguf', moeModel({ arch: 'gpt-oss', layers: 3 }));
  put('fuzz_model', 'tiny-gpt-oss-no-sinks.gguf', moeModel({ arch: 'gpt-oss', layers: 3, drop: 'blk.2.attn_sinks.weight' }));
  // embedding models (src/runtime/embed.c)
  for (const arch of ['bert', 'nomic-bert', 'gemma-embedding']) put('fuzz_model', `tiny-${arch}.gguf`, embedModel(arch));
  put('fuzz_model', 'tiny-bert-rank.gguf', embedModel('bert', { rank: true }));
  put('fuzz_model', 'empty', Buffer.alloc(0));
  put('fuzz_model', 'magic-only', Buffer.from('GGUF'));
  put('fuzz_model', 'ak42', Buffer.from('24ka\x01\x00\x00\x00', 'latin1'));
}

// =============================================================================================
// fuzz_tokenizer_bin

function tokenizerBin(pieces, maxLen) {
  const w = new Bytes();
  w.i32(maxLen ?? Math.max(1, ...pieces.map((p) => Buffer.byteLength(p[0]))));
  for (const [p, s] of pieces) { w.f32(s); const b = Buffer.from(p, 'utf8'); w.i32(b.length); w.push(b); }
  return w.buffer();
}
{
  const tok512 = readModel('tok512.bin');
  const tok32k = readModel('tokenizer.bin');
  put('fuzz_tokenizer_bin', 'tok512.bin', tok512);
  put('fuzz_tokenizer_bin', 'tokenizer.bin', tok32k);
  for (const [n, b] of cuts(tok512, [4, 12, 0.5])) put('fuzz_tokenizer_bin', `tok512.${n}`, b);
  for (const [n, b] of cuts(tok32k, [0.01])) put('fuzz_tokenizer_bin', `tokenizer.${n}`, b);
  const bytes = [];
  for (let c = 0; c < 256; c++) bytes.push([`<0x${c.toString(16).toUpperCase().padStart(2, '0')}>`, 0]);
  const merges = [' ', 'a', 'b', ' a', 'ab', ' ab', '\u00e9', 'once', ' once'].map((p, i) => [p, -i]);
  put('fuzz_tokenizer_bin', 'tiny-4', tokenizerBin([['<unk>', 0], ['\n<s>\n', 0], ['\n</s>\n', 0], [' ', 0]]));
  put('fuzz_tokenizer_bin', 'tiny-merges', tokenizerBin([['<unk>', 0], ['\n<s>\n', 0], ['\n</s>\n', 0], ...merges]));
  put('fuzz_tokenizer_bin', 'tiny-bytes', tokenizerBin([['<unk>', 0], ['\n<s>\n', 0], ['\n</s>\n', 0], ...bytes, ...merges]));
  put('fuzz_tokenizer_bin', 'tiny-bytes-late', tokenizerBin([['<unk>', 0], ...merges, ...bytes]));
  put('fuzz_tokenizer_bin', 'tiny-empty-pieces', tokenizerBin([['', 0], ['', 1], ['a', 2]]));
  put('fuzz_tokenizer_bin', 'tiny-1', tokenizerBin([['x', 0]]));
}

// =============================================================================================
// fuzz_encode

{
  const texts = new Set();
  for (const f of fs.readdirSync(path.join(MODELS, 'vocab')).filter((f) => f.endsWith('.inp')).sort()) {
    const parts = fs.readFileSync(path.join(MODELS, 'vocab', f)).toString('latin1').split('\n__ggml_vocab_test__\n');
    for (const p of parts) texts.add(p);
  }
  let i = 0;
  for (const t of texts) put('fuzz_encode', `inp-${String(i++).padStart(3, '0')}`, Buffer.from(t, 'latin1'));
  const extra = [
    'Once upon a time', ' leading space', 'trailing space ', '\u2581\u2581 escaped', '<0x41><s></s><unk>',
    '\n<s>\n', 'a\u0000b', '\u00e9\u00e8\u65e5\u672c\ud83d\ude00', 'x'.repeat(300),
  ];
  extra.forEach((t, k) => put('fuzz_encode', `extra-${k}`, Buffer.from(t, 'utf8')));
  put('fuzz_encode', 'invalid-utf8', Buffer.from([0xff, 0xfe, 0x80, 0xc0, 0xaf, 0xe2, 0x96, 0xed, 0xa0, 0x80, 0xf4, 0x90, 0x80, 0x80, 0x41]));
  put('fuzz_encode', 'cut-utf8', Buffer.from([0x61, 0xe6, 0x97]));
  put('fuzz_encode', 'all-bytes', Buffer.from(Array.from({ length: 256 }, (_, k) => k)));
  // fuzz_bpe: the same texts, plus regex-engine seeds (pattern, NUL, text)
  i = 0;
  for (const t of texts) put('fuzz_bpe', `inp-${String(i++).padStart(3, '0')}`, Buffer.from(t, 'latin1'));
  put('fuzz_bpe', 'all-bytes', Buffer.from(Array.from({ length: 256 }, (_, k) => k)));
  const regexes = [
    ["'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)", "Hello world's 123 !!   x"],
    ["(?i:'s|'t)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}|\\s*[\\r\\n]+|\\s+$", "It'S 12345\r\n  "],
    ['((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+', 'HelloWORLDfoo'],
    ['[\u4e00-\u9fa5\u0800-\u4e00]+|\\s?[!-/:-~]+', '\u4e2d\u6587 !? x'],
  ];
  regexes.forEach(([re, t], k) => put('fuzz_bpe', `regex-${k}`, Buffer.concat([Buffer.from(re, 'utf8'), Buffer.from([0]), Buffer.from(t, 'utf8')])));
  // fuzz_wordpiece: the same texts, plus WordPiece's own cases
  i = 0;
  for (const t of texts) put('fuzz_wordpiece', `inp-${String(i++).padStart(3, '0')}`, Buffer.from(t, 'latin1'));
  const wpm = [
    '[CLS] a [SEP] b [MASK][PAD][UNK]', 'Caf\u00e9 na\u00efve \u00c5NGSTR\u00d6M \u0130stanbul', '\u4e2d\u6587abc\u3042\uac00',
    'a\u0000b\u0007c\u200bd\ufffde', 'unaffable playing ##ing', 'x'.repeat(200), 'e\u0301 \u1e09',
  ];
  wpm.forEach((t, k) => put('fuzz_wordpiece', `extra-${k}`, Buffer.from(t, 'utf8')));
  put('fuzz_wordpiece', 'all-bytes', Buffer.from(Array.from({ length: 256 }, (_, k) => k)));
}

// =============================================================================================
// fuzz_grammar: GBNF text, a NUL, then token choices (the grammars of tests/c/test_grammar.c)

{
  const grammars = {
    json: 'root   ::= object\nvalue  ::= object | array | string | number | ("true" | "false" | "null")\n' +
      'object ::=\n  "{" ws ( string ws ":" ws value ws\n           ( "," ws string ws ":" ws value ws )* )? "}"\n' +
      'array  ::= "[" ws ( value ws ( "," ws value ws )* )? "]"\n' +
      'string ::= "\\"" ( [^"\\\\\\x00-\\x1F] | "\\\\" ( ["\\\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\\""\n' +
      'number ::= "-"? ( "0" | [1-9] [0-9]{0,15} ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?\nws     ::= [ \\t\\n]{0,3}\n',
    enum: 'root  ::= "[" ( color ( ", " color ){0,4} )? "]"\ncolor ::= "\\"red\\"" | "\\"green\\"" | "\\"blue\\""\n',
    number: 'root ::= "-"? [0-9]{1,6} ( "." [0-9]{1,3} )? ( [eE] [-+]? [0-9]{1,2} )?\n',
    string: 'root ::= "\\"" item{1,12} "\\""\nitem ::= [a-z ] | "\\\\n" | "\\\\u00" [0-9a-f]{2} | [\\u00E9-\\u00FC] | [\u03b1-\u03c9] | "\u20ac"\n',
    parens: 'root ::= p\np ::= "(" p* ")"\n',
    repeat: 'root ::= ( "ab" | "c" ){2,5} "."\n',
    negated: 'root ::= [^\u00e9] . [^a-z]+\n',
    empty: 'root ::= "" | "x"\n',
  };
  const steps = Buffer.from([0xf0, 0xf1, 0xf2, 0xf0, 0xf3, 0x61, 0x7b, 0x22, 0xc3, 0xa9, 0xf0, 0xf4, 0xf0, 0xf0]);
  for (const [name, g] of Object.entries(grammars)) {
    put('fuzz_grammar', name, Buffer.concat([Buffer.from(g, 'utf8'), Buffer.from([0]), steps]));
  }
  put('fuzz_grammar', 'left-recursion', Buffer.from('root ::= a\na ::= b? a "x" | "y"\nb ::= "z"\n'));
  put('fuzz_grammar', 'deep', Buffer.from('root ::= ' + '('.repeat(70) + '"a"' + ')'.repeat(70)));
}

// =============================================================================================
// fuzz_json_schema: JSON Schemas (those of tests/c/test_json_schema.c and the JS tests)

{
  const schemas = {
    person: { type: 'object', properties: { name: { type: 'string', maxLength: 12 }, age: { type: 'integer' },
      tags: { type: 'array', items: { enum: ['a', 'b c', 3] }, maxItems: 3 } }, required: ['name'] },
    numbers: { type: 'array', items: { type: 'number' }, minItems: 2, maxItems: 3 },
    pattern: { type: 'string', pattern: '^[A-Z][a-z]+-\\d{2,3}$' },
    negated: { pattern: '^(?:[^a-c\\s]|x)*?$' },
    tree: { $defs: { node: { type: 'object', properties: { v: { type: 'integer' },
      kids: { type: 'array', items: { $ref: '#/$defs/node' } } }, required: ['v'], additionalProperties: false } },
      $ref: '#/$defs/node' },
    alternatives: { anyOf: [{ type: 'null' }, { type: 'boolean' }, { const: { k: [1, '\u00e9'] } }] },
    free: { type: 'object', additionalProperties: { type: 'integer' } },
    unsupported: { type: 'integer', minimum: 0, format: 'int32' },
  };
  for (const [name, s] of Object.entries(schemas)) put('fuzz_json_schema', name, Buffer.from(JSON.stringify(s, null, 1)));
  put('fuzz_json_schema', 'escapes', Buffer.from('{"const": "\\ud83d\\ude00\\n\\"\\\\"}'));
}

// =============================================================================================
// fuzz_gguf_vocab

{
  for (const f of fs.readdirSync(path.join(MODELS, 'vocab')).filter((f) => f.endsWith('.gguf')).sort()) {
    const b = fs.readFileSync(path.join(MODELS, 'vocab', f));
    // one file per tokenizer model is enough for the unsupported ones (they stop at the model
    // name); the llama ones are what the vocabulary path reads
    if (!/llama-spm|phi-3|baichuan|bert-bge|gpt-2\./.test(f)) continue;
    put('fuzz_gguf_vocab', f, b);
    if (f === 'ggml-vocab-llama-spm.gguf' || f === 'ggml-vocab-phi-3.gguf')
      for (const [n, c] of cuts(b, [24, 1024, 65536])) put('fuzz_gguf_vocab', `${f}.${n}`, c);
  }
  put('fuzz_gguf_vocab', 'stories260K.gguf', readModel('stories260K.gguf'));

  put('fuzz_gguf_vocab', 'tiny-llama.gguf', gguf(vocabKvs(llamaVocab())));
  put('fuzz_gguf_vocab', 'tiny-llama-nobytes.gguf', gguf(vocabKvs(llamaVocab({ bytes: false }))));
  put('fuzz_gguf_vocab', 'tiny-llama-nounk.gguf', gguf(vocabKvs(llamaVocab({ bytes: false }), { unk: 99999, bos: 99999, addEos: true, addSpace: false })));
  const phiExtra = [['<|user|>', 4, 0], ['<|end|>', 3, 0], ['<|endoftext|>', 4, 0], ['<|assistant|>', 4, 0]];
  put('fuzz_gguf_vocab', 'tiny-phi3.gguf', gguf(vocabKvs(llamaVocab({ extra: phiExtra }), { name: 'Phi-3 tiny' })));
  put('fuzz_gguf_vocab', 'tiny-harmony.gguf', gguf(vocabKvs(llamaVocab({ bytes: false, extra: [['<|end|>', 1, 0], ['<|return|>', 1, 0], ['<|call|>', 1, 0], ['<|channel|>', 1, 0], ['<|eot_id|>', 1, 0], ['<PRE>', 1, 0], ['<|fim_prefix|>', 1, 0]] }), { extraKvs: [['tokenizer.ggml.eot_token_id', T.I64, 5], ['tokenizer.ggml.prefix_token_id', T.U32, 3]] })));
  put('fuzz_gguf_vocab', 'tiny-gpt2.gguf', gguf(vocabKvs(llamaVocab({ bytes: false }), { model: 'gpt2' })));
  // one malformed key at a time
  const base = () => vocabKvs(llamaVocab({ bytes: false }));
  const edit = (key, f) => base().map((kv) => (kv[0] === key ? f(kv) : kv));
  const bad = {
    'model-u32': edit('tokenizer.ggml.model', ([k]) => [k, T.U32, 1]),
    'tokens-i32': edit('tokenizer.ggml.tokens', ([k]) => [k, T.ARR, [T.I32, [1, 2, 3]]]),
    'tokens-empty': edit('tokenizer.ggml.tokens', ([k]) => [k, T.ARR, [T.STR, []]]),
    'tokens-duplicate': edit('tokenizer.ggml.tokens', ([k, t, [et, items]]) => [k, t, [et, [...items.slice(0, -1), items[3]]]]),
    'scores-short': edit('tokenizer.ggml.scores', ([k, t, [et, items]]) => [k, t, [et, items.slice(1)]]),
    'scores-f64': edit('tokenizer.ggml.scores', ([k, t, [, items]]) => [k, t, [T.F64, items]]),
    'types-u8': edit('tokenizer.ggml.token_type', ([k, t, [, items]]) => [k, t, [T.U8, items]]),
    'types-short': edit('tokenizer.ggml.token_type', ([k, t, [et, items]]) => [k, t, [et, items.slice(1)]]),
    'types-odd': edit('tokenizer.ggml.token_type', ([k, t, [et, items]]) => [k, t, [et, items.map((x, i) => (i % 3 ? x : 7 + i))]]),
    'bos-string': edit('tokenizer.ggml.bos_token_id', ([k]) => [k, T.STR, '1']),
    'bos-negative': edit('tokenizer.ggml.bos_token_id', ([k]) => [k, T.I32, -5]),
    'add-bos-u8': edit('tokenizer.ggml.add_bos_token', ([k]) => [k, T.U8, 1]),
    'add-bos-2': edit('tokenizer.ggml.add_bos_token', ([k]) => [k, T.BOOL, 2]),
  };
  for (const [name, kvs] of Object.entries(bad)) put('fuzz_gguf_vocab', `tiny-bad-${name}.gguf`, gguf(kvs));
  put('fuzz_gguf_vocab', 'tiny-v2.gguf', gguf(vocabKvs(llamaVocab({ bytes: false })), [], { version: 2, alignment: 32 }));
  // every value type, arrays of each, a nested array, and an unknown-type tensor
  const allTypes = [
    ['t.u8', T.U8, 200], ['t.i8', T.I8, -3], ['t.u16', T.U16, 65535], ['t.i16', T.I16, -2],
    ['t.u32', T.U32, 4000000000], ['t.i32', T.I32, -7], ['t.f32', T.F32, 1.5], ['t.bool', T.BOOL, 1],
    ['t.str', T.STR, 'text'], ['t.u64', T.U64, 2n ** 63n], ['t.i64', T.I64, -1], ['t.f64', T.F64, 2.5],
    ['t.arr.u8', T.ARR, [T.U8, [1, 2, 3]]], ['t.arr.f64', T.ARR, [T.F64, [1, 2]]], ['t.arr.bool', T.ARR, [T.BOOL, [0, 1]]],
    ['t.arr.nested', T.ARR, [T.ARR, [[T.I32, [1, 2]], [T.STR, ['a', 'b']]]]], ['t.arr.empty', T.ARR, [T.STR, []]],
    ['general.alignment', T.U32, 64],
  ];
  put('fuzz_gguf_vocab', 'all-types.gguf', gguf([...vocabKvs(llamaVocab({ bytes: false })), ...allTypes],
    [{ name: 'odd.weight', ne: [4, 2], type: 99, data: Buffer.alloc(0) }, { name: 'token_embd.weight', ne: [32, 2], type: GT.Q8_0, data: tensorData(GT.Q8_0, 2, 32) }], { alignment: 64 }));
}

// ---- fuzz_mmproj: tools/synth_mmproj.mjs's tiny files of every projector in F32, F16 and Q8_0, cut
// copies, and a few edited keys (another projector type, a text model's architecture)
{
  const { mmprojBytes, MMPROJ_SHAPES } = await import('../tools/synth_mmproj.mjs');
  // the tiny towers only: the published ones (bench/images.mjs) are 0.1–1.7 GB a file
  for (const shape of Object.keys(MMPROJ_SHAPES).filter((s) => MMPROJ_SHAPES[s].W <= 64)) {
    for (const type of ['F32', 'F16', 'Q8_0']) {
      const b = mmprojBytes({ shape, type, seed: 1 });
      put('fuzz_mmproj', `${shape}-${type}.gguf`, b);
      if (type === 'Q8_0') for (const [n, c] of cuts(b, [24, 512, 4096, 0.5])) put('fuzz_mmproj', `${shape}-${type}.gguf.${n}`, c);
    }
    const b = mmprojBytes({ shape, type: 'F16', seed: 2 });
    const swap = (from, to) => { // same-length edits of a string value keep every offset valid
      const i = b.indexOf(Buffer.from(from));
      const c = Buffer.from(b);
      if (i >= 0) Buffer.from(to).copy(c, i);
      return c;
    };
    const other = { gemma3: ['gemma3', 'lfm2vl'], idefics3: ['idefics3', 'qwen2vl_'], lfm2: ['lfm2', 'lfm3'],
      'qwen2.5vl_merger': ['qwen2.5vl_merger', 'qwen2.5vl_mergex'] }[MMPROJ_SHAPES[shape].proj];
    put('fuzz_mmproj', `${shape}-proj-other.gguf`, swap(other[0], other[1]));
    put('fuzz_mmproj', `${shape}-arch-llama.gguf`, swap('clip', 'lama'));
    if (MMPROJ_SHAPES[shape].proj === 'qwen2.5vl_merger') { // its own keys and second patch kernel
      put('fuzz_mmproj', `${shape}-no-wa-pattern.gguf`, swap('n_wa_pattern', 'n_wa_patterx'));
      put('fuzz_mmproj', `${shape}-no-merge-size.gguf`, swap('spatial_merge_size', 'spatial_merge_sizf'));
      put('fuzz_mmproj', `${shape}-no-window-size.gguf`, swap('vision.window_size', 'vision.window_sizf'));
      put('fuzz_mmproj', `${shape}-no-patch1.gguf`, swap('patch_embd.weight.1', 'patch_embd.weight.2'));
    }
  }
}

// Small GGUFs exercise the vocabulary path of fuzz_model too, and vice versa.
for (const f of fs.readdirSync(path.join(OUT, 'fuzz_model')).filter((f) => f.startsWith('seed-tiny-') && f.endsWith('vocab.gguf')))
  fs.copyFileSync(path.join(OUT, 'fuzz_model', f), path.join(OUT, 'fuzz_gguf_vocab', f));

for (const [h, n] of Object.entries(counts)) console.log(`${h}: ${n} seeds in ${path.join(OUT, h)}`);
