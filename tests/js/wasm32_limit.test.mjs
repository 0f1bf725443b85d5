// tests/js/wasm32_limit.test.mjs — a model file that cannot fit wasm32's 4 GB memory gets a clear
// error, not a wrapped-around size or a bare allocation failure, and the engine stays usable.
// The file is Phi-3.5-mini's Q8_0 (4.06 GB: 3.8 B parameters at 8.5 bits) with its real header
// and vectors and all-zero matrices, written sparse by tools/synth_gguf.mjs (writeHeaderOnly): no
// disk, a moment to write; reading it into wasm memory takes a few seconds (≈1 min when busy).

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

// js/models/source.js when the file cannot be allocated; js/engine/engine.js when the file fits but not the
// KV cache and scratch of the context with it
const TOO_LARGE = /the model \(\d+\.\d\d GB( of weights)?\) is too large for the 4 GB wasm32 memory/;

test('wasm32 limit: Phi-3.5-mini Q8_0 (4.06 GB) is refused as too large for the 4 GB memory', async () => {
  const file = path.join(tmp, 'phi3.5-mini-Q8_0.gguf');
  const { size } = writeHeaderOnly('phi3', 'phi3.5-mini', file, { type: 'Q8_0' });
  assert.ok(size > 4.0e9 && size < 2 ** 32, `${size} bytes: the published file's size, below 2^32`);
  // memory64: false: wasm32 whatever the model (else a runtime with memory64 loads it there:
  // tests/js/memory64.test.mjs; one without says so before reading the file, with the same words)
  const engine = await createEngine({ threads: 1, memory64: false });
  try {
    // the 4.06 GB file itself fits a fresh heap (wlmjs_malloc, below); a context of 2048
    // positions (an 805 MB f16 KV cache) does not fit with it
    await assert.rejects(engine.load({ model: file, nCtx: 2048 }), (e) => {
      assert.equal(e.code, 'WLM_ERR_NOMEM');
      assert.match(e.message, TOO_LARGE);
      assert.match(e.message, /\((3\.9|4\.0)\d GB of weights\)/);
      return true;
    });
    // a file of 2^32 bytes or more must not wrap around into a small allocation
    // (written sparse again and extended: a copy of the first file may allocate all 4 GB on disk)
    const huge = path.join(tmp, 'huge.gguf');
    writeHeaderOnly('phi3', 'phi3.5-mini', huge, { type: 'Q8_0' });
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

// dlmalloc grows the heap by less than 2 GB per sbrk: wlmjs_malloc takes a larger block in two
// steps (src/wasm_exports.c). Untouched pages of the grown memory cost no resident memory.
for (const file of ['dist/wasmlm.wasm', 'dist/wasmlm-scalar.wasm']) {
  test(`wasm32 limit: ${file} allocates one block over 2 GB (Phi-3.5-mini Q4_K_M's 2.39 GB file)`, () => {
    const bytes = fs.readFileSync(new URL(`../../${file}`, import.meta.url));
    const x = new WebAssembly.Instance(new WebAssembly.Module(bytes), { env: { emscripten_notify_memory_growth() {} } }).exports;
    x._initialize?.();
    const n = 2393231840;
    const p = x.wlmjs_malloc(n) >>> 0;
    assert.ok(p > 0, 'a block of 2.39 GB');
    assert.ok(p + n <= x.memory.buffer.byteLength);
    x.wlmjs_free(p);
    const q = x.wlmjs_malloc(n) >>> 0; // and again after it was freed (the next model)
    assert.ok(q > 0);
    x.wlmjs_free(q);
    const big = x.wlmjs_malloc(4061221856) >>> 0; // Phi-3.5-mini Q8_0: fits a fresh heap, just
    assert.ok(big > 0 && big + 4061221856 <= 2 ** 32);
    assert.equal(x.wlmjs_malloc(2 ** 30) >>> 0, 0, 'and then 1 GB more cannot be had');
  });
}
