// worker_vision.test.mjs — WorkerEngine.chat() with image parts (OpenAI image_url, as the demo
// page sends them): the worker engine turns them into media markers and images as Engine.chat
// does, and gives the same greedy tokens as Engine.chat in this thread on the same messages
// (a synthetic Gemma 3 and its synthetic mmproj, tools/synth_gguf.mjs + tools/synth_mmproj.mjs).
// Before, it handed the parts to the chat template as they were.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { createEngine, createWorkerEngine } from '../../js/wasmlm.js';
import { synthCached } from '../../tools/synth_gguf.mjs';
import { mmprojBytes, pngBytes, testImage } from '../../tools/synth_mmproj.mjs';
import { webWorkerLike } from './_helpers.mjs';

const TEMPLATE = "{{ bos_token }}{% for m in messages %}<start_of_turn>{{ 'model' if m.role == 'assistant' else m.role }}\n" +
  '{{ m.content }}<end_of_turn>\n{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}';

test('WorkerEngine.chat with an image_url part = Engine.chat (greedy); a marker typed beside image parts is refused', { timeout: 300000 }, async () => {
  const model = fs.readFileSync(synthCached({ arch: 'gemma3', shape: 'tiny', seed: 1, type: 'F32' }));
  const mmproj = mmprojBytes({ shape: 'gemma3-tiny', type: 'F32', seed: 1 });
  const png = await pngBytes(testImage(80, 50, 1), 80, 50);
  const url = `data:image/png;base64,${Buffer.from(png).toString('base64')}`;
  const messages = [{ role: 'user', content: [{ type: 'image_url', image_url: { url } }, { type: 'text', text: 'What is this?' }] }];
  const params = { chatTemplate: TEMPLATE, temperature: 0, maxTokens: 6 };
  const ids = async (e, m) => {
    const out = [];
    for await (const t of e.chat(m, params)) if (t.id >= 0) out.push(t.id);
    return out;
  };
  const opts = { nCtx: 512, kvType: 'f32', backend: 'cpu' };
  const worker = await createWorkerEngine({ worker: await webWorkerLike() });
  const local = await createEngine({ threads: 1 });
  try {
    await worker.load({ model: new Uint8Array(model), mmproj: new Uint8Array(mmproj), ...opts });
    await local.load({ model: new Uint8Array(model), mmproj: new Uint8Array(mmproj), ...opts });
    const want = await ids(local, messages);
    assert.equal(local.lastResult.imagesEncoded, 1);
    const got = await ids(worker, messages);
    assert.equal(worker.lastResult.imagesEncoded, 1, 'the worker encoded the image');
    assert.deepEqual(got, want);
    assert.notDeepEqual(await ids(local, [{ role: 'user', content: 'What is this?' }]), want, 'the image counts');
    const typed = [{ role: 'user', content: [{ type: 'image_url', image_url: { url } }, { type: 'text', text: 'and <__media__>' }] }];
    await assert.rejects(async () => { for await (const _ of worker.chat(typed, params)); }, // eslint-disable-line no-unused-vars
      (err) => err.code === 'WLM_ERR_INVALID_ARG' && /media marker/.test(err.message));
  } finally {
    await worker.free();
    await local.free();
  }
});
