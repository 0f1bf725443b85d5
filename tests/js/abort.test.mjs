// abort.test.mjs — an AbortSignal stops a generation within one token with an AbortError, an
// early break ends it cleanly, and the engine generates normally afterwards.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { collect, loadedEngine, referenceText } from './_helpers.mjs';

const engine = await loadedEngine();
const GREEDY = referenceText('stories260K_run.c_greedy_OnceUponATime_404.txt')
  .slice('Once upon a time'.length);

async function greedyWorks() {
  const r = await engine.complete('Once upon a time', { temperature: 0, maxTokens: 50 });
  assert.equal(r.stopReason, 'max_tokens');
  assert.equal(r.nGenerated, 50);
  assert.ok(GREEDY.startsWith(r.text) && r.text.length > 100, r.text);
}

test('abort after the 3rd token: AbortError, at most one more token, then usable', async () => {
  const controller = new AbortController();
  let count = 0;
  let afterAbort = 0;
  await assert.rejects(async () => {
    for await (const t of engine.generate('Once upon a time',
      { temperature: 0, maxTokens: 200 }, { signal: controller.signal })) {
      assert.ok(t.id >= 0);
      count++;
      if (controller.signal.aborted) afterAbort++;
      if (count === 3) controller.abort();
    }
  }, (e) => e instanceof DOMException && e.name === 'AbortError');
  assert.ok(count >= 3 && afterAbort <= 1, `count ${count}, after abort ${afterAbort}`);
  assert.equal(engine.lastResult.stopReason, 'aborted');
  assert.equal(engine.lastResult.nGenerated, count);
  await greedyWorks();
});

test('an abort from a timer lands between tokens (the loop yields to the event loop)', async () => {
  const controller = new AbortController();
  let count = 0;
  let abortedAt = -1;
  await assert.rejects(async () => {
    // maxTokens 0: until the context (512) is full. The timer is armed when the first token
    // arrives (not before the call: loading and prefill time would count against it) and with
    // no delay, so it needs only the next event-loop turn, not some number of milliseconds of
    // decoding, to land mid-way: a fast machine cannot finish the story first.
    for await (const _ of engine.generate('', { temperature: 1, seed: 3, maxTokens: 0 },
      { signal: controller.signal })) {
      if (count++ === 0) setTimeout(() => { abortedAt = count; controller.abort(); }, 0);
    }
  }, { name: 'AbortError' });
  assert.ok(abortedAt >= 0, 'the timer ran during the generation');
  assert.ok(count <= abortedAt + 1 && count < 511, `count ${count}, aborted at ${abortedAt}`);
  await greedyWorks();
});

test('an already aborted signal rejects before any token', async () => {
  const controller = new AbortController();
  controller.abort();
  const seen = [];
  await assert.rejects(engine.complete('Once', { maxTokens: 10 },
    { signal: controller.signal, onToken: (t) => seen.push(t) }), { name: 'AbortError' });
  assert.equal(seen.length, 0);
  await greedyWorks();
});

test('breaking out of for-await ends the generation; a new one starts cleanly', async () => {
  let n = 0;
  for await (const _ of engine.generate('Once upon a time', { temperature: 0, maxTokens: 100 })) {
    if (++n === 5) break;
  }
  assert.equal(engine.lastResult.stopReason, 'aborted');
  assert.equal(engine.lastResult.nGenerated, 5);
  await greedyWorks();
});

test('a second generation while one is running is refused (WLM_ERR_STATE)', async () => {
  const it = engine.generate('Once upon a time', { temperature: 0, maxTokens: 100 });
  const first = await it.next();
  assert.equal(first.done, false);
  await assert.rejects(collect(engine.generate('x', { maxTokens: 3 })),
    { name: 'WasmlmError', code: 'WLM_ERR_STATE' });
  await assert.rejects(engine.load({ model: new Uint8Array(8), tokenizer: new Uint8Array(8) }),
    { name: 'WasmlmError', code: 'WLM_ERR_STATE' });
  // The first generation is unaffected and continues where it was.
  const rest = await collect({ [Symbol.asyncIterator]: () => it });
  assert.equal(first.value.text + rest.map((t) => t.text).join(''), engine.lastResult.text);
  assert.equal(engine.lastResult.nGenerated, 100);
  assert.ok(GREEDY.startsWith(engine.lastResult.text));
  await greedyWorks();
});

test('free() during a generation fails it on the next step; the engine is then unusable', async () => {
  const e = await loadedEngine();
  const it = e.generate('Once upon a time', { temperature: 0, maxTokens: 100 });
  await it.next();
  await e.free();
  await assert.rejects(it.next(), { name: 'WasmlmError', code: 'WLM_ERR_STATE' });
  await assert.rejects(e.tokenize('hi'), { code: 'WLM_ERR_STATE', message: /freed/ });
  await e.free(); // a no-op
  assert.equal(e.info, null);
});
