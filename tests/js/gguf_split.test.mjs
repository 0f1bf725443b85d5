// tests/js/gguf_split.test.mjs — tools/gguf_split.mjs writes llama.cpp's split format: parts named
// PREFIX-0000i-of-0000N.gguf, all key/values in the first, split.no / split.count /
// split.tensors.count in each, and every tensor's bytes exactly once, in order, at most
// max-size of tensor data per part. (That llama.cpp loads such a set: bench/README.md, wllama.)

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { splitGguf, splitPath, parseSize } from '../../tools/gguf_split.mjs';
import { synthesize } from '../../tools/synth_gguf.mjs';
import { readGguf } from '../../tools/vocab_gguf.mjs';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-split-'));
test.after(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** name → the tensor's bytes (its data section span, to the next tensor or the file's end). */
function tensorBytes(file) {
  const g = readGguf(file);
  const data = fs.readFileSync(file).subarray(g.dataOffset);
  const sorted = [...g.tensors].sort((a, b) => a.offset - b.offset);
  return new Map(sorted.map((t, i) => [t.name, data.subarray(t.offset, i + 1 < sorted.length ? sorted[i + 1].offset : data.length)]));
}

test('gguf_split: parts in llama.cpp\'s format hold the source\'s keys and tensor bytes', () => {
  const src = path.join(tmp, 'phi3.gguf');
  synthesize({ arch: 'phi3', type: 'Q4_K_M', out: src });
  const maxBytes = 1 << 20;
  const parts = splitGguf(src, { maxBytes, prefix: path.join(tmp, 'phi3') });
  assert.ok(parts.length >= 3, `${parts.length} parts`);
  parts.forEach((p, i) => assert.equal(p, splitPath(path.join(tmp, 'phi3'), i, parts.length)));
  assert.match(parts[0], /phi3-00001-of-0000\d\.gguf$/);

  const s = readGguf(src);
  const want = tensorBytes(src);
  const seen = [];
  parts.forEach((p, i) => {
    const g = readGguf(p);
    const kv = new Map(g.kv.map(([k, t, v]) => [k, [t, v]]));
    assert.deepEqual(kv.get('split.no'), ['u16', i]);
    assert.deepEqual(kv.get('split.count'), ['u16', parts.length]);
    assert.deepEqual(kv.get('split.tensors.count'), ['i32', s.tensors.length]);
    if (i === 0) assert.deepEqual(g.kv.slice(0, s.kv.length), s.kv, 'the first part: every key/value of the source');
    else assert.equal(g.kv.length, 3, 'later parts: the split keys only');
    const got = tensorBytes(p);
    let bytes = 0;
    for (const t of g.tensors) {
      const st = s.tensors.find((x) => x.name === t.name);
      assert.deepEqual([t.ne, t.type], [st.ne, st.type], t.name);
      assert.ok(got.get(t.name).equals(want.get(t.name)), `${t.name}: the same bytes`);
      bytes += got.get(t.name).length;
      seen.push(t.name);
    }
    assert.ok(bytes <= maxBytes || g.tensors.length === 1, `part ${i}: ${bytes} bytes of tensors`);
  });
  assert.deepEqual(seen, s.tensors.map((t) => t.name), 'every tensor once, in order');
});

test('gguf_split: sizes', () => {
  assert.equal(parseSize('1G'), 1e9);
  assert.equal(parseSize('512M'), 512e6);
  assert.equal(parseSize('4096'), 4096);
  assert.throws(() => parseSize('1T'));
});
