// tests/js/gguf_split.test.mjs — tools/gguf_split.mjs writes llama.cpp's split format: parts named
// PREFIX-0000i-of-0000N.gguf, all key/values in the first, split.no / split.count /
// split.tensors.count in each, and every tensor's bytes exactly once, in order, at most
// max-size of tensor data per part. (That llama.cpp loads such a set: bench/README.md, wllama.)
// The engine loads such a set (js/models/split.js) with the same logits as the whole file.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { splitGguf, splitPath, parseSize } from '../../tools/gguf_split.mjs';
import { synthesize } from '../../tools/synth_gguf.mjs';
import { readGguf } from '../../tools/vocab_gguf.mjs';
import { MODELS as SHARED_MODELS } from './_helpers.mjs';

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

// The engine loads a split model from its parts (js/models/split.js): a list of paths, Blobs or URLs
// in any order, or the first part's name alone; the logits are bitwise the unsplit file's.
test('gguf_split: load() reads the parts as one model, from paths, the first name, Blobs and URLs', async () => {
  const { createEngine } = await import('../../js/wasmlm.js');
  const http = await import('node:http');
  const src = path.join(SHARED_MODELS, 'stories260K.gguf');
  const prefix = path.join(tmp, 'stories260K');
  const parts = splitGguf(src, { maxBytes: 300 << 10, prefix });
  assert.ok(parts.length >= 3, `${parts.length} parts`);
  const server = http.createServer((req, res) => {
    const f = path.join(tmp, decodeURIComponent(new URL(req.url, 'http://x').pathname));
    if (!fs.existsSync(f)) { res.writeHead(404).end(); return; }
    res.writeHead(200, { 'content-length': fs.statSync(f).size });
    fs.createReadStream(f).pipe(res);
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${server.address().port}/`;
  const engine = await createEngine({ threads: 1 });
  try {
    const ids = [1, 403, 407, 261, 378];
    const logitsOf = async (model) => {
      const progress = [];
      const info = await engine.load({ model, nCtx: 64, onProgress: (p) => progress.push(p) });
      assert.equal(info.architecture, 'llama');
      assert.equal(progress.at(-1).loaded, progress.at(-1).total, 'progress ends at the merged size');
      return Buffer.from((await engine.evalTokens(ids)).buffer);
    };
    const want = await logitsOf(src);
    const shuffled = [...parts].reverse();
    assert.deepEqual(await logitsOf(shuffled), want, 'paths, any order');
    assert.deepEqual(await logitsOf(parts[0]), want, 'the first part\'s name: the others found beside it');
    assert.deepEqual(await logitsOf(parts.map((p) => new Blob([fs.readFileSync(p)]))), want, 'Blobs (dropped files)');
    assert.deepEqual(await logitsOf(parts.map((p) => base + path.basename(p))), want, 'URLs');
    assert.deepEqual(await logitsOf(base + path.basename(parts[0])), want, 'the first part\'s URL');

    // sets that are not one whole model: clear errors, and the engine loads again afterwards
    const bad = [
      [parts.slice(1), /part 1 of|of \d+ parts: \d+ given|not among the parts/],
      [[parts[0], parts[0], ...parts.slice(2)], /given twice/],
      [parts[1], /is part 2 of \d+ of a split GGUF: pass the first part/],
      [[src, parts[0]], /is not a part of a split GGUF/],
    ];
    for (const [model, re] of bad) {
      await assert.rejects(engine.load({ model }), (e) => re.test(e.message) && /^WLM_ERR_/.test(e.code), String(model));
    }
    fs.renameSync(parts[2], `${parts[2]}.gone`);
    await assert.rejects(engine.load({ model: parts[0] }), (e) => e.code === 'WLM_ERR_IO');
    fs.renameSync(`${parts[2]}.gone`, parts[2]);
    assert.deepEqual(await logitsOf(parts), want);
  } finally {
    await engine.free();
    server.close();
  }
});
