// tests/js/wasm32_limit.test.mjs — a model file that cannot fit wasm32's 4 GB memory gets a clear
// error, not a wrapped-around size or a bare allocation failure, and the engine stays usable.
// The file is Phi-3.5-mini's Q8_0 (4.06 GB: 3.8 B parameters at 8.5 bits) with its real header
// and zero data, written sparse by tools/synth_gguf.mjs (writeHeaderOnly): no disk, milliseconds.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createEngine } from '../../js/wasmlm.js';
import { writeHeaderOnly, synthesize } from '../../tools/synth_gguf.mjs';
import { MODEL, TOKENIZER } from './_helpers.mjs';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-wasm32-'));
test.after(() => fs.rmSync(tmp, { recursive: true, force: true }));

const TOO_LARGE = /the model \(\d+\.\d\d GB\) is too large for the 4 GB wasm32 memory/;

test('wasm32 limit: Phi-3.5-mini Q8_0 (4.06 GB) is refused as too large for the 4 GB memory', async () => {
  const file = path.join(tmp, 'phi3.5-mini-Q8_0.gguf');
  const { size } = writeHeaderOnly('phi3', 'phi3.5-mini', file, { type: 'Q8_0' });
  assert.ok(size > 4.0e9 && size < 2 ** 32, `${size} bytes: the published file's size, below 2^32`);
  const engine = await createEngine({ threads: 1 });
  try {
    await assert.rejects(engine.load({ model: file }), (e) => {
      assert.equal(e.code, 'WLM_ERR_NOMEM');
      assert.match(e.message, TOO_LARGE);
      assert.match(e.message, /4\.06 GB/);
      return true;
    });
    // a file of 2^32 bytes or more must not wrap around into a small allocation
    const huge = path.join(tmp, 'huge.gguf');
    fs.copyFileSync(file, huge);
    fs.truncateSync(huge, 5e9);
    await assert.rejects(engine.load({ model: huge }), (e) => e.code === 'WLM_ERR_NOMEM' && TOO_LARGE.test(e.message));
    // nothing stays allocated: the same engine loads a model and generates
    await engine.load({ model: MODEL, tokenizer: TOKENIZER });
    const r = await engine.complete('Once upon a time', { temperature: 0, maxTokens: 4 });
    assert.equal(r.nGenerated, 4);
  } finally {
    await engine.free();
  }
});

test('wasm32 limit: the same architecture and type in a small file loads (the header is not what is refused)', async () => {
  const file = path.join(tmp, 'phi3-tiny-Q4_K_M.gguf');
  synthesize({ arch: 'phi3', type: 'Q4_K_M', out: file });
  const engine = await createEngine({ threads: 1 });
  try {
    const info = await engine.load({ model: file, nCtx: 64 });
    assert.equal(info.architecture, 'phi3');
  } finally {
    await engine.free();
  }
});
