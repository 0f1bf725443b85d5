// split.js — split GGUF files (llama.cpp's gguf-split: PREFIX-00001-of-0000N.gguf, …; each part a
// whole GGUF holding some of the tensors, the first all the key/values, every part split.no,
// split.count and split.tensors.count) opened as one model source: the parts' headers are read
// first, a merged header is written in memory (the first part's key/values less split.*, every
// part's tensor infos with their offsets moved into the concatenated data), and then each part's
// data section follows in order, padded to the alignment. js/models/source.js copies that stream into
// one heap buffer, which C reads as one GGUF: no part is read twice, no copy of a part is kept,
// and C needs no notion of parts. It does not parse tensors' contents or check the model.

import { WasmlmError, jsError } from '../runtime/errors.js';
import { openSource } from './source.js';

/** llama.cpp's part names: "%s-%05d-of-%05d.gguf" (split.no + 1, split.count). */
export const SPLIT_NAME = /-(\d{5})-of-(\d{5})\.gguf$/;

const GGUF_MAGIC = 0x46554747;
class NeedMore extends Error {}
const formatError = (name, what) => new WasmlmError(`${name}: ${what}`, 'WLM_ERR_FORMAT', -3);

/**
 * The layout of a GGUF header in `bytes` (its first bytes): {version, kvs: [{key, start, end,
 * value}], tensors: [{name, ne, type, offset}], alignment, dataOffset}. `start..end` is the
 * key/value's bytes (key included), `value` the scalar / string value (arrays: null). Throws
 * NeedMore when the header continues past `bytes`, WLM_ERR_FORMAT when it is not a GGUF v2/v3.
 */
export function readGgufLayout(bytes, name = 'GGUF') {
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let pos = 0;
  const need = (n) => { if (pos + n > bytes.byteLength) throw new NeedMore(); };
  const u32 = () => { need(4); const v = dv.getUint32(pos, true); pos += 4; return v; };
  const u64 = () => { need(8); const v = dv.getBigUint64(pos, true); pos += 8; if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw formatError(name, 'a count past 2^53'); return Number(v); };
  const str = () => { const n = u64(); need(n); const s = new TextDecoder().decode(bytes.subarray(pos, pos + n)); pos += n; return s; };
  const SIZES = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
  const skipValue = (t) => {
    if (t === 8) return str();
    if (t === 9) {
      const et = u32();
      const n = u64();
      if (et === 8) { for (let i = 0; i < n; i++) str(); return null; }
      if (!SIZES[et]) throw formatError(name, `an array of type ${et}`);
      need(n * SIZES[et]);
      pos += n * SIZES[et];
      return null;
    }
    if (!SIZES[t]) throw formatError(name, `a value of type ${t}`);
    need(SIZES[t]);
    const v = t === 2 ? dv.getUint16(pos, true) : t === 4 ? dv.getUint32(pos, true) : t === 5 ? dv.getInt32(pos, true) : null;
    pos += SIZES[t];
    return v;
  };
  if (u32() !== GGUF_MAGIC) throw formatError(name, 'not a GGUF file (no "GGUF" magic)');
  const version = u32();
  if (version !== 2 && version !== 3) throw formatError(name, `GGUF version ${version} (2 and 3 are read)`);
  const nTensors = u64();
  const nKv = u64();
  const kvs = [];
  for (let i = 0; i < nKv; i++) {
    const start = pos;
    const key = str();
    const value = skipValue(u32());
    kvs.push({ key, start, end: pos, value });
  }
  const tensors = [];
  for (let i = 0; i < nTensors; i++) {
    const tname = str();
    const nd = u32();
    if (nd < 1 || nd > 4) throw formatError(name, `tensor ${tname}: ${nd} dimensions`);
    const ne = Array.from({ length: nd }, u64);
    tensors.push({ name: tname, ne, type: u32(), offset: u64() });
  }
  const alignment = kvs.find((k) => k.key === 'general.alignment')?.value ?? 32;
  if (!(alignment > 0 && (alignment & (alignment - 1)) === 0)) throw formatError(name, `general.alignment ${alignment}`);
  return { version, kvs, tensors, alignment, dataOffset: Math.ceil(pos / alignment) * alignment };
}

/** readGgufLayout() of an opened source's header, peeking more until it is whole; also `head`,
 *  the bytes peeked. Throws WLM_ERR_TRUNCATED / WLM_ERR_FORMAT. */
export async function peekLayout(src) {
  for (let n = 1 << 20; ; n *= 4) {
    const bytes = await src.peek(n);
    try {
      return { ...readGgufLayout(bytes, src.name), head: bytes };
    } catch (e) {
      if (!(e instanceof NeedMore)) throw e;
      if (bytes.byteLength < n) throw new WasmlmError(`${src.name}: the GGUF header is truncated`, 'WLM_ERR_TRUNCATED', -4);
      if (n >= 1 << 30) throw formatError(src.name, 'a header over 1 GB');
    }
  }
}

/** The GGUF header of `layout` with its key/values (less split.*) and `tensors` (name, ne,
 *  type, offset), as bytes padded to the alignment. */
function mergedHeader(first, tensors) {
  const kvs = first.kvs.filter((k) => !k.key.startsWith('split.'));
  const enc = new TextEncoder();
  const chunks = [];
  const u32 = (v) => { const b = new Uint8Array(4); new DataView(b.buffer).setUint32(0, v, true); chunks.push(b); };
  const u64 = (v) => { const b = new Uint8Array(8); new DataView(b.buffer).setBigUint64(0, BigInt(v), true); chunks.push(b); };
  u32(GGUF_MAGIC);
  u32(3);
  u64(tensors.length);
  u64(kvs.length);
  for (const k of kvs) chunks.push(first.head.subarray(k.start, k.end));
  for (const t of tensors) {
    const name = enc.encode(t.name);
    u64(name.length);
    chunks.push(name);
    u32(t.ne.length);
    for (const d of t.ne) u64(d);
    u32(t.type);
    u64(t.offset);
  }
  const len = chunks.reduce((a, c) => a + c.byteLength, 0);
  const out = new Uint8Array(Math.ceil(len / first.alignment) * first.alignment);
  let at = 0;
  for (const c of chunks) { out.set(c, at); at += c.byteLength; }
  return out;
}

/**
 * Opens the parts of a split GGUF (any order: their split.no decides) as one source with
 * openSource()'s interface. Throws WLM_ERR_INVALID_ARG / WLM_ERR_FORMAT for a set that is not
 * one whole split model: a missing or repeated part, parts of different splits, other
 * alignments, a tensor count that is not split.tensors.count.
 */
export async function openSplit(sources, stage, signal) {
  const parts = [];
  try {
    for (const s of sources) parts.push(await openSource(s, stage, signal));
    const layouts = [];
    for (const p of parts) layouts.push(await peekLayout(p));
    const kv = (l, key) => l.kvs.find((k) => k.key === key)?.value;
    const count = kv(layouts[0], 'split.count');
    const order = new Array(parts.length);
    layouts.forEach((l, i) => {
      const no = kv(l, 'split.no');
      if (no === undefined || kv(l, 'split.count') === undefined) throw jsError('WLM_ERR_INVALID_ARG', `${parts[i].name} is not a part of a split GGUF (no split.no / split.count)`);
      if (kv(l, 'split.count') !== count) throw jsError('WLM_ERR_INVALID_ARG', `${parts[i].name}: split.count ${kv(l, 'split.count')}, the others ${count}`);
      if (no >= parts.length || order[no] !== undefined) throw jsError('WLM_ERR_INVALID_ARG', `${parts[i].name}: part ${no + 1} of ${count} ${order[no] !== undefined ? 'given twice' : 'is not among the parts given'}`);
      if (l.alignment !== layouts[0].alignment) throw formatError(parts[i].name, `alignment ${l.alignment}, the first part's ${layouts[0].alignment}`);
      order[no] = i;
    });
    if (parts.length !== count) throw jsError('WLM_ERR_INVALID_ARG', `a split GGUF of ${count} parts: ${parts.length} given`);
    const A = layouts[0].alignment;
    const seq = order.map((i) => ({ part: parts[i], layout: layouts[i] }));
    if (!seq.every(({ part }) => part.known)) throw jsError('WLM_ERR_INVALID_ARG', 'split GGUF: every part\'s size must be known (a download without Content-Length)');
    const first = seq[0].layout;
    const total = kv(first, 'split.tensors.count');
    const tensors = [];
    let base = 0;
    for (const s of seq) {
      s.base = base;
      s.dataBytes = s.part.size - s.layout.dataOffset;
      if (s.dataBytes < 0) throw new WasmlmError(`${s.part.name}: truncated`, 'WLM_ERR_TRUNCATED', -4);
      for (const t of s.layout.tensors) tensors.push({ ...t, offset: base + t.offset });
      base = Math.ceil((base + s.dataBytes) / A) * A;
    }
    if (total !== undefined && total !== tensors.length) throw formatError(seq[0].part.name, `split.tensors.count ${total}, the parts hold ${tensors.length}`);
    const header = mergedHeader(first, tensors);
    const last = seq[seq.length - 1];
    const size = header.byteLength + last.base + last.dataBytes;
    return {
      name: `${seq[0].part.name} (+${seq.length - 1} parts)`, size, known: true,
      peek: async (n) => header.subarray(0, n),
      async *chunks() {
        yield header;
        let at = 0;
        for (const s of seq) {
          if (s.base > at) { yield new Uint8Array(s.base - at); at = s.base; } // alignment padding
          let skip = s.layout.dataOffset; // the part's own header
          for await (const c of s.part.chunks()) {
            const body = skip >= c.byteLength ? null : c.subarray(skip);
            skip = Math.max(0, skip - c.byteLength);
            if (body?.byteLength) { yield body; at += body.byteLength; }
          }
          await s.part.close();
        }
      },
      async close() { for (const p of parts) await p.close(); },
    };
  } catch (e) {
    for (const p of parts) await p.close();
    throw e;
  }
}

/**
 * A model source as load() takes it, opened: an array of sources is a split GGUF's parts; a
 * path or URL named like a first part ("…-00001-of-00003.gguf") is expanded to all the parts'
 * names beside it; anything else is one file (js/models/source.js). Returns openSource()'s interface.
 */
export async function openModel(source, stage, signal) {
  if (Array.isArray(source)) {
    if (source.length === 1) return openSource(source[0], stage, signal);
    if (source.length === 0) throw jsError('WLM_ERR_INVALID_ARG', `load(): an empty list of ${stage} parts`);
    return openSplit(source, stage, signal);
  }
  const name = typeof source === 'string' ? source : source instanceof URL ? source.href : null;
  const m = name && SPLIT_NAME.exec(name.replace(/[?#].*$/, ''));
  if (m && Number(m[2]) > 1) {
    if (Number(m[1]) !== 1) {
      throw jsError('WLM_ERR_INVALID_ARG', `${name} is part ${Number(m[1])} of ${Number(m[2])} of a split GGUF: pass the first part, or every part in a list`);
    }
    const names = Array.from({ length: Number(m[2]) }, (_, i) =>
      name.replace(/-\d{5}-of-(\d{5})\.gguf(?=$|[?#])/, `-${String(i + 1).padStart(5, '0')}-of-$1.gguf`));
    return openSplit(source instanceof URL ? names.map((n) => new URL(n)) : names, stage, signal);
  }
  return openSource(source, stage, signal);
}
