#!/usr/bin/env node
// tools/wasm64/abi.mjs — appends to a wasm module the custom section `wasmlm.abi`: one line per
// exported function, "name PARAMS RESULT", a letter per value type (i i32, j i64, f f32, d f64,
// v v128; RESULT '-' for none, PARAMS '-' for no parameter). js/runtime/memory64.js reads it with
// WebAssembly.Module.customSections() to pass i64 parameters (pointers and sizes in the memory64
// modules) as BigInt and return i64 results as Numbers, without a hand-kept table: an export
// added to tools/exports.txt is described by the build that adds it. Run by
// cmake/memory64.cmake after wasm-opt (which would drop the section); a second run replaces it.
//
//   node tools/wasm64/abi.mjs MODULE.wasm

import fs from 'node:fs';

export const ABI_SECTION = 'wasmlm.abi';
const TYPE_LETTER = { 0x7f: 'i', 0x7e: 'j', 0x7d: 'f', 0x7c: 'd', 0x7b: 'v' };

/** A reader of a wasm binary's LEB128 integers, bytes and names. */
function reader(bytes, pos = 0) {
  const r = {
    pos,
    byte: () => bytes[r.pos++],
    u32() { // LEB128, up to 64 bits (memory64 limits), as a Number
      let result = 0, mul = 1, b;
      do { b = bytes[r.pos++]; result += (b & 0x7f) * mul; mul *= 128; } while (b & 0x80);
      return result;
    },
    name() { const n = r.u32(); const s = new TextDecoder().decode(bytes.subarray(r.pos, r.pos + n)); r.pos += n; return s; },
    limits() { const flags = r.byte(); r.u32(); if (flags & 1) r.u32(); },
  };
  return r;
}

/** The exported functions' signatures of a wasm binary: [[name, params, result]]. */
export function exportSignatures(bytes) {
  if (bytes[0] !== 0 || bytes[1] !== 0x61 || bytes[2] !== 0x73 || bytes[3] !== 0x6d) throw new Error('not a wasm module');
  const types = [];
  const funcTypes = []; // function index → type index (imports first)
  const exports = [];
  const r = reader(bytes, 8);
  while (r.pos < bytes.length) {
    const id = r.byte();
    const size = r.u32();
    const end = r.pos + size;
    if (id === 1) {
      for (let n = r.u32(); n--;) {
        if (r.byte() !== 0x60) throw new Error('unknown type form');
        const params = Array.from({ length: r.u32() }, () => TYPE_LETTER[r.byte()] ?? '?');
        const results = Array.from({ length: r.u32() }, () => TYPE_LETTER[r.byte()] ?? '?');
        types.push([params.join('') || '-', results.join('') || '-']);
      }
    } else if (id === 2) {
      for (let n = r.u32(); n--;) {
        r.name(); r.name();
        const kind = r.byte();
        if (kind === 0) funcTypes.push(r.u32());
        else if (kind === 1) { r.byte(); r.limits(); }
        else if (kind === 2) r.limits();
        else if (kind === 3) { r.byte(); r.byte(); }
        else if (kind === 4) { r.byte(); r.u32(); }
        else throw new Error(`unknown import kind ${kind}`);
      }
    } else if (id === 3) {
      for (let n = r.u32(); n--;) funcTypes.push(r.u32());
    } else if (id === 7) {
      for (let n = r.u32(); n--;) {
        const name = r.name();
        const kind = r.byte();
        const index = r.u32();
        if (kind === 0) exports.push([name, ...types[funcTypes[index]]]);
      }
    }
    r.pos = end;
  }
  return exports;
}

/** `bytes` with its `wasmlm.abi` section (re)written. */
export function withAbiSection(bytes) {
  // drop an earlier section of that name
  const kept = [bytes.subarray(0, 8)];
  const r = reader(bytes, 8);
  while (r.pos < bytes.length) {
    const start = r.pos;
    const id = r.byte();
    const size = r.u32();
    const end = r.pos + size;
    if (!(id === 0 && r.name() === ABI_SECTION)) kept.push(bytes.subarray(start, end));
    r.pos = end;
  }
  const text = exportSignatures(bytes).map((s) => s.join(' ')).join('\n');
  const leb = (n) => { const out = []; do { let b = n & 0x7f; n >>>= 7; if (n) b |= 0x80; out.push(b); } while (n); return out; };
  const name = new TextEncoder().encode(ABI_SECTION);
  const payload = new Uint8Array([...leb(name.length), ...name, ...new TextEncoder().encode(text)]);
  kept.push(new Uint8Array([0, ...leb(payload.length)]), payload);
  return Buffer.concat(kept);
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop())) {
  const file = process.argv[2];
  if (!file) {
    console.error('usage: node tools/wasm64/abi.mjs MODULE.wasm');
    process.exit(1);
  }
  fs.writeFileSync(file, withAbiSection(fs.readFileSync(file)));
}
