#!/usr/bin/env node
// tools/gguf_split.mjs — splits a GGUF file into llama.cpp's split format (what its
// llama-gguf-split --split-max-size writes, learned from llama.cpp's tools/gguf-split and
// src/llama-model-loader.cpp): PREFIX-00001-of-0000N.gguf, …, each a whole GGUF v3 file holding
// some of the tensors (in file order, at most maxBytes of tensor data per part unless one tensor
// is larger); the first part holds every key/value of the source, every part the keys split.no
// (u16, 0-based), split.count (u16) and split.tensors.count (i32, the tensors of all parts).
// llama.cpp loads such a set from the first file's name (wllama: from the list of parts). For
// bench/peers.mjs: wllama reads a model through ArrayBuffers of at most 2 GB per file.
//
//   node tools/gguf_split.mjs IN.gguf [--max-size 1G|512M|BYTES] [--prefix OUT_PREFIX]
//
// Streamed (one 16 MB buffer), so a multi-GB file never sits in memory. The tensor data is
// copied as it is, with the 32-byte alignment of the source (another alignment is refused).

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { readGguf, ggufHeader } from './vocab_gguf.mjs';

const ALIGN = 32;
const COPY = 16 << 20;

/** The name of part `no` (0-based) of `count`: llama.cpp's "%s-%05d-of-%05d.gguf". */
export function splitPath(prefix, no, count) {
  return `${prefix}-${String(no + 1).padStart(5, '0')}-of-${String(count).padStart(5, '0')}.gguf`;
}

/**
 * Splits `file` into parts of at most `maxBytes` of tensor data each; returns their paths in
 * order. `prefix` defaults to the file's path without ".gguf".
 */
export function splitGguf(file, { maxBytes = 1 << 30, prefix = file.replace(/\.gguf$/, '') } = {}) {
  const g = readGguf(file);
  if (g.alignment !== undefined && g.alignment !== ALIGN) throw new Error(`${file}: alignment ${g.alignment}, only ${ALIGN} is supported`);
  if (g.kv.some(([k]) => k.startsWith('split.'))) throw new Error(`${file} is already a split part`);
  const size = fs.statSync(file).size;
  // each tensor's span in the data section: to the next tensor's offset (its data and padding)
  const order = g.tensors.map((t, i) => ({ ...t, i })).sort((a, b) => a.offset - b.offset);
  order.forEach((t, k) => { t.span = (k + 1 < order.length ? order[k + 1].offset : size - g.dataOffset) - t.offset; });
  const tensors = order.sort((a, b) => a.i - b.i);
  const parts = [];
  for (const t of tensors) {
    const last = parts[parts.length - 1];
    if (!last || (last.bytes + t.span > maxBytes && last.tensors.length)) parts.push({ tensors: [t], bytes: t.span });
    else { last.tensors.push(t); last.bytes += t.span; }
  }
  if (parts.length > 0xffff) throw new Error(`${parts.length} parts: split.count is a u16`);
  const fd = fs.openSync(file, 'r');
  const buf = Buffer.alloc(COPY);
  const out = [];
  try {
    parts.forEach((p, no) => {
      const kv = [...(no === 0 ? g.kv : []), ['split.no', 'u16', no], ['split.count', 'u16', parts.length],
        ['split.tensors.count', 'i32', tensors.length]];
      const infos = p.tensors.map((t) => ({ name: t.name, ne: t.ne, type: t.type, nbytes: Math.ceil(t.span / ALIGN) * ALIGN }));
      const name = splitPath(prefix, no, parts.length);
      const tmp = `${name}.tmp`;
      const wfd = fs.openSync(tmp, 'w');
      try {
        const head = ggufHeader(kv, infos);
        fs.writeSync(wfd, head);
        for (const t of p.tensors) {
          for (let done = 0; done < t.span;) {
            const n = fs.readSync(fd, buf, 0, Math.min(COPY, t.span - done), g.dataOffset + t.offset + done);
            if (n <= 0) throw new Error(`${file}: truncated in tensor ${t.name}`);
            fs.writeSync(wfd, buf, 0, n);
            done += n;
          }
          const pad = Math.ceil(t.span / ALIGN) * ALIGN - t.span;
          if (pad) fs.writeSync(wfd, Buffer.alloc(pad));
        }
      } finally { fs.closeSync(wfd); }
      fs.renameSync(tmp, name);
      out.push(name);
    });
  } finally { fs.closeSync(fd); }
  return out;
}

/** "1G", "512M", "300K" or a number of bytes. */
export function parseSize(s) {
  const m = /^(\d+(?:\.\d+)?)([KMG]?)$/i.exec(String(s));
  if (!m) throw new Error(`bad size ${s} (e.g. 1G, 512M)`);
  return Math.floor(Number(m[1]) * { '': 1, K: 1e3, M: 1e6, G: 1e9 }[m[2].toUpperCase()]);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const a = process.argv.slice(2);
  const o = { maxBytes: 1e9 };
  for (let i = 0; i < a.length; i++) {
    if (a[i] === '--max-size') o.maxBytes = parseSize(a[++i]);
    else if (a[i] === '--prefix') o.prefix = a[++i];
    else if (!o.file && !a[i].startsWith('--')) o.file = a[i];
    else { console.error(`unknown argument ${a[i]}`); process.exit(2); }
  }
  if (!o.file) { console.error('usage: node tools/gguf_split.mjs IN.gguf [--max-size 1G] [--prefix OUT_PREFIX]'); process.exit(2); }
  const t0 = Date.now();
  const parts = splitGguf(o.file, o);
  for (const p of parts) console.log(`${p}: ${fs.statSync(p).size} bytes`);
  console.log(`${parts.length} parts, ${Date.now() - t0} ms`);
}
