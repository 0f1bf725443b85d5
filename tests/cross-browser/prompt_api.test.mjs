// prompt_api.test.mjs — the Prompt API explainer's examples (prompt_api/explainer_examples.js, the
// explainer's code verbatim) run unchanged against wasmlm's polyfill (js/prompt_api/) in a page,
// in Chromium, Firefox and WebKit (_drivers.mjs), on the tiny Qwen3-vocabulary model of
// tests/js/_tool_models.mjs served by the test server: the model comes through the model cache
// (availability() "downloadable" first, "available" after), the engine runs in a worker. Each
// example must end as the spec says it does on a model that handles text and tool use only:
// resolved, or a NotSupportedError for image and audio input. The structured-output examples
// may also end with the spec's SyntaxError (the noise model's number can break the schema's
// bounds, checked after the fact; an unbounded RegExp can be cut short by maxTokens).
//
//   node --test tests/cross-browser/prompt_api.test.mjs

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { STEP_TIMEOUT, startTestServer } from '../browser/_helpers.mjs';
import { toolModel } from '../js/_tool_models.mjs';
import { ENGINES, launchBrowser, missing } from './_drivers.mjs';

const RESOLVES = [0, 1, 2, 3, 5, 12, 14, 15, 16, 17, 18, 19, 20, 21, 22, 24, 25, 27, 28, 29, 30];
const NOT_SUPPORTED = [6, 7, 13, 23, 26];
const MAY_BREAK_CONSTRAINT = [8, 9, 10];

/** What an example's outcome must be, beyond its status. */
function checkLogs(r) {
  if (r.index === 0) assert.ok(r.logs.length >= 2, 'the result and the stream\'s chunks are logged');
  if (r.index === 14) assert.deepEqual(r.logs, ['creative']);
  if (r.index === 22) assert.match(r.logs[0], /^\d+ tokens used, out of 4096 tokens available\.$/);
  if (r.index === 27) assert.deepEqual(r.logs, []);
  if (r.index === 29) assert.deepEqual(r.errors, ['No language model for us :(']); // it asks for audio
  if (r.index === 30) assert.deepEqual(r.logs, ['Downloaded 0%', 'Downloaded 100%']); // loaded by then
  if (r.index === 8 && r.outcome === 'resolved') assert.equal(typeof Number(r.logs[0]), 'number');
}

let server;
before(async () => {
  server = await startTestServer({ files: { '/prompt-api-model/qwen3-tiny-4k.gguf': toolModel('qwen3') } });
});
after(() => server?.close());

for (const engine of Object.keys(ENGINES)) {
  const why = missing(engine).length ? `not installed: ${missing(engine).join(', ')} (apt-get install ${ENGINES[engine].apt})` : null;
  if (why && process.env.CI && process.env.CI !== 'false') {
    test(`${engine} is installed`, () => assert.fail(why));
    continue;
  }
  test(`${engine}: the Prompt API explainer's examples on the polyfill`, { skip: why ?? false, timeout: 20 * STEP_TIMEOUT }, async (t) => {
    const page = await launchBrowser(engine);
    const downloads = server.count('/prompt-api-model/qwen3-tiny-4k.gguf');
    try {
      await page.goto(`${server.origin}/tests/cross-browser/prompt_api/explainer.html?model=/prompt-api-model/qwen3-tiny-4k.gguf&maxTokens=24&seed=1`);
      await page.waitFor(() => window.harnessReady, null, { what: 'the harness module' });
      assert.equal(await page.evaluate(() => LanguageModel.availability()), 'downloadable', 'a fresh profile has no cached model');
      const indexes = await page.evaluate(() => window.exampleIndexes);
      assert.deepEqual([...indexes].sort((a, b) => a - b), [...RESOLVES, ...NOT_SUPPORTED, ...MAY_BREAK_CONSTRAINT].sort((a, b) => a - b));
      for (const index of indexes) {
        await t.test(`example ${index}`, async () => {
          const r = await page.evaluate((i) => window.runExample(i), index);
          const got = r.outcome === 'resolved' ? 'resolved' : `${r.error.name}: ${r.error.message}`;
          if (RESOLVES.includes(index)) assert.equal(got, 'resolved');
          else if (NOT_SUPPORTED.includes(index)) assert.equal(r.error?.name, 'NotSupportedError', got);
          else assert.ok(r.outcome === 'resolved' || r.error.name === 'SyntaxError', got);
          checkLogs(r);
        });
      }
      assert.equal(await page.evaluate(() => LanguageModel.availability()), 'available');
      // the download went to the model cache: a new page finds it there
      await page.goto(`${server.origin}/tests/cross-browser/prompt_api/explainer.html?model=/prompt-api-model/qwen3-tiny-4k.gguf`);
      await page.waitFor(() => window.harnessReady, null, { what: 'the harness module' });
      assert.equal(await page.evaluate(() => LanguageModel.availability()), 'available');
      assert.equal(server.count('/prompt-api-model/qwen3-tiny-4k.gguf') - downloads, 1, 'downloaded once');
    } finally {
      await page.close();
    }
  });
}
