// browser_ai.test.mjs — @browser-ai/core, the AI SDK provider for the Prompt API, with the `ai`
// major version it declares as its peer (6; the project uses 7, so these live in their own
// package: tests/compat/browser-ai, installed by `npm ci --prefix tests/compat/browser-ai`), on
// wasmlm's Prompt API polyfill in headless Chromium: generateText, streamText (several chunks,
// the same text as the stream) and generateObject (an object zod accepts, produced under the
// polyfill's responseConstraint). The model is the tiny Qwen3-vocabulary one of
// tests/js/_tool_models.mjs (noise text; the object is held by the grammar).
//
//   node --test tests/browser/browser_ai.test.mjs

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import * as esbuild from 'esbuild';
import { REPO, startTestServer } from './_helpers.mjs';
import { toolModel } from '../js/_tool_models.mjs';
import { launchBrowser, missing } from '../cross-browser/_drivers.mjs';

const COMPAT = path.join(REPO, 'tests', 'compat', 'browser-ai');
const installed = fs.existsSync(path.join(COMPAT, 'node_modules', '@browser-ai', 'core')) && fs.existsSync(path.join(COMPAT, 'node_modules', 'ai'));
const why = !installed ? 'tests/compat/browser-ai is not installed (npm ci --prefix tests/compat/browser-ai)'
  : missing('chromium').length ? `not installed: ${missing('chromium').join(', ')}` : null;
const ci = process.env.CI && process.env.CI !== 'false';

let server, page;
before(async () => {
  if (why) return;
  await esbuild.build({ entryPoints: [path.join(COMPAT, 'entry.js')], bundle: true, format: 'esm', platform: 'browser',
    outfile: path.join(REPO, 'build', 'compat', 'browser-ai.js'), logLevel: 'error' });
  server = await startTestServer({ files: { '/compat-model/qwen3-tiny-4k.gguf': toolModel('qwen3') } });
  page = await launchBrowser('chromium');
  await page.goto(`${server.origin}/tests/compat/browser-ai/page.html?model=/compat-model/qwen3-tiny-4k.gguf&maxTokens=400`);
  await page.waitFor(() => window.ready, null, { what: 'the page module' });
});
after(async () => {
  await page?.close();
  await server?.close();
});

if (why && ci) test('the @browser-ai/core check can run', () => assert.fail(why));

test('the AI SDK 6 with @browser-ai/core on the polyfill', { skip: why ?? false }, async (t) => {
  const pkg = JSON.parse(fs.readFileSync(path.join(COMPAT, 'node_modules', 'ai', 'package.json'), 'utf8'));
  const peer = JSON.parse(fs.readFileSync(path.join(COMPAT, 'node_modules', '@browser-ai', 'core', 'package.json'), 'utf8')).peerDependencies.ai;
  assert.equal(pkg.version.split('.')[0], peer.replace(/^\^/, '').split('.')[0], `ai ${pkg.version} is the major @browser-ai/core asks for (${peer})`);
  assert.equal(await page.evaluate(() => window.supported), true);

  await t.test('generateText', async () => {
    const r = await page.evaluate(() => window.run('generateText'));
    assert.ok(r.ok, `${r.error} (${r.cause})`);
    assert.equal(typeof r.value.text, 'string');
    assert.ok(r.value.text.length > 0);
  });
  await t.test('streamText', async () => {
    const r = await page.evaluate(() => window.run('streamText'));
    assert.ok(r.ok, `${r.error} (${r.cause})`);
    assert.ok(r.value.chunks.length > 1, 'streamed in several chunks');
    assert.equal(r.value.chunks.join(''), r.value.text);
  });
  await t.test('generateObject', async () => {
    const r = await page.evaluate(() => window.run('generateObject'));
    assert.ok(r.ok, `${r.error} (${r.cause})`);
    const { object } = r.value;
    assert.ok(['Paris', 'Tokyo', 'Lima'].includes(object.city), JSON.stringify(object));
    assert.equal(typeof object.sunny, 'boolean');
    assert.ok(Array.isArray(object.days) && object.days.length <= 2 && object.days.every((d) => d === 'mon' || d === 'tue'));
  });
});
