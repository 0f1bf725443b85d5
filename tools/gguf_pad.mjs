#!/usr/bin/env node
// tools/gguf_pad.mjs — a copy of a GGUF file with an unused all-zero tensor (`wasmlm.pad`, F32,
// one dimension; with `matrix`, matrices of rows of 256 of at most 1 GiB each, `wasmlm.pad`,
// `wasmlm.pad.1`, ...: what the GPU load leaves unread, where a vector would go to the wasm heap,
// and no tensor past wasm32's size_t) of about `padBytes` placed before every other tensor's data, so that the model's
// own tensors lie past that offset (past 4 GB for the memory64 tests) while the file stays as
// cheap as the model: the pad is a hole in a sparse file (ftruncate), taking no disk space on
// file systems with holes. The engine ignores tensors that its architecture does not name, so the
// copy computes exactly what the original does (tests/js/memory64.test.mjs checks that bitwise);
// llama.cpp refuses it (it counts tensors). The data of the other tensors is copied as it is.
//
//   node tools/gguf_pad.mjs IN.gguf OUT.gguf [--pad 4.4G] [--matrix]

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ggufHeader, readGguf } from './vocab_gguf.mjs';
import { parseSize } from './gguf_split.mjs';

const ALIGN = 32;
const COPY = 16 << 20;

/** Writes `out`; returns {padBytes, dataOffset, tensors: [{name, offset}]} (offsets from the
 *  start of the file, the pad's first). */
export function padGguf(file, out, { padBytes = 2 ** 32 + (64 << 20), matrix = false } = {}) {
  const g = readGguf(file);
  if (g.alignment !== undefined && g.alignment !== ALIGN) throw new Error(`${file}: alignment ${g.alignment}, only ${ALIGN} is supported`);
  const size = fs.statSync(file).size;
  const order = g.tensors.map((t, i) => ({ ...t, i })).sort((a, b) => a.offset - b.offset);
  order.forEach((t, k) => { t.span = (k + 1 < order.length ? order[k + 1].offset : size - g.dataOffset) - t.offset; });
  const tensors = order.sort((a, b) => a.i - b.i);
  const row = matrix ? 256 : 8;
  const nPad = Math.ceil(padBytes / 4 / row) * row; // F32 elements, a multiple of 32 bytes
  const pads = [];
  if (!matrix) pads.push({ name: 'wasmlm.pad', ne: [nPad], type: 0, nbytes: nPad * 4 });
  const pieceRows = 2 ** 30 / 4 / row;
  for (let rows = nPad / row, k = 0; matrix && rows > 0; k++, rows -= pieceRows) {
    const n = Math.min(rows, pieceRows);
    pads.push({ name: k ? `wasmlm.pad.${k}` : 'wasmlm.pad', ne: [row, n], type: 0, nbytes: n * row * 4 });
  }
  const infos = [...pads,
    ...tensors.map((t) => ({ name: t.name, ne: t.ne, type: t.type, nbytes: Math.ceil(t.span / ALIGN) * ALIGN }))];
  const head = ggufHeader(g.kv, infos);
  const fd = fs.openSync(file, 'r');
  const tmp = `${out}.tmp`;
  const wfd = fs.openSync(tmp, 'w');
  const buf = Buffer.alloc(COPY);
  const placed = [];
  try {
    fs.writeSync(wfd, head, 0, head.length, 0);
    let at = head.length + nPad * 4; // the pad: left as a hole
    placed.push({ name: 'wasmlm.pad', offset: head.length });
    for (const t of tensors) {
      placed.push({ name: t.name, offset: at });
      for (let done = 0; done < t.span;) {
        const n = fs.readSync(fd, buf, 0, Math.min(COPY, t.span - done), g.dataOffset + t.offset + done);
        if (n <= 0) throw new Error(`${file}: truncated in tensor ${t.name}`);
        fs.writeSync(wfd, buf, 0, n, at);
        at += n;
        done += n;
      }
      at += Math.ceil(t.span / ALIGN) * ALIGN - t.span;
    }
    fs.ftruncateSync(wfd, at);
  } finally {
    fs.closeSync(wfd);
    fs.closeSync(fd);
  }
  fs.renameSync(tmp, out);
  return { padBytes: nPad * 4, dataOffset: head.length, tensors: placed };
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const a = process.argv.slice(2);
  const o = {};
  const files = [];
  for (let i = 0; i < a.length; i++) {
    if (a[i] === '--pad') o.padBytes = parseSize(a[++i]);
    else if (a[i] === '--matrix') o.matrix = true;
    else if (!a[i].startsWith('--')) files.push(a[i]);
    else { console.error(`unknown argument ${a[i]}`); process.exit(2); }
  }
  if (files.length !== 2) { console.error('usage: node tools/gguf_pad.mjs IN.gguf OUT.gguf [--pad 4.4G] [--matrix]'); process.exit(2); }
  const r = padGguf(files[0], files[1], o);
  console.log(`${files[1]}: ${fs.statSync(files[1]).size} bytes, ${r.padBytes} of them the pad`);
}
