// embed.test.mjs — the demo page's Embeddings mode (web/demo/embed.js) in headless Chromium: with
// the default model (stories260K, a generative model without pooling_type, pooled by its last
// token) the mode is available next to Completion; loading a BERT encoder (the synthetic
// tools/synth_gguf.mjs model with bge's real vocabulary) switches the page to it and disables the
// generative modes; sentences give a similarity heat map (1 on the diagonal, symmetric) and a
// query a ranking whose order is the one engine.embed()'s cosines give; a reranker ranks by its
// own scores.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { synthCached } from '../../tools/synth_gguf.mjs';
import { launch, startTestServer, loadOutcome, loadAfter, waitForState, screenshot, STEP_TIMEOUT } from './_helpers.mjs';

let server;
let browser;
let page;

before(async () => {
  const bert = synthCached({ arch: 'bert', shape: 'tiny' });
  const rerank = synthCached({ arch: 'bert', shape: 'rerank-tiny' });
  server = await startTestServer({ files: { '/synthetic/bert-tiny.gguf': bert, '/synthetic/bert-rerank.gguf': rerank } });
  browser = await launch();
  page = browser.page;
  await page.goto(server.url);
});

after(async () => {
  await browser?.close();
  await server?.close();
});

/** Clicks Embed and waits for the run to end; returns the form's status. */
async function embed() {
  await page.locator('#embed-run').click();
  await page.waitForFunction(() => document.querySelector('#embed-form').dataset.status, null, { polling: 'raf' });
  await waitForState(page, 'ready', 'error');
  return page.evaluate(() => {
    const s = document.querySelector('#embed-form').dataset.status;
    delete document.querySelector('#embed-form').dataset.status;
    return s;
  });
}

const cells = () => page.evaluate(() => [...document.querySelectorAll('#output .sim-matrix tbody tr')]
  .map((tr) => [...tr.querySelectorAll('td')].map((td) => Number(td.dataset.sim))));

test('the default model: Embeddings next to Completion (last-token pooling)', { timeout: STEP_TIMEOUT }, async () => {
  const out = await loadOutcome(page);
  assert.equal(out.state, 'ready', out.text);
  assert.equal(await page.locator('#mode-embed').isDisabled(), false);
  assert.equal(await page.locator('#mode-completion').isDisabled(), false);
  await page.locator('#mode-embed').check();
  assert.equal(await page.locator('#embed-form').isVisible(), true);
  assert.equal(await page.locator('#gen-form').isVisible(), false);
  assert.equal(await embed(), 'done');
  const m = await cells();
  assert.equal(m.length, 4);
  await page.locator('#mode-completion').check();
  assert.equal(await page.locator('#gen-form').isVisible(), true);
});

test('a BERT encoder: Embeddings only; the heat map and a query ranking', { timeout: STEP_TIMEOUT }, async () => {
  await page.locator('#url-source summary').click();
  await page.locator('#model-url').fill(`${server.origin}/synthetic/bert-tiny.gguf`);
  const out = await loadAfter(page, () => page.locator('#url-load').click());
  assert.equal(out.state, 'ready', out.text);
  assert.equal(await page.evaluate(() => document.body.dataset.mode), 'embed');
  assert.equal(await page.locator('#mode-completion').isDisabled(), true);
  assert.equal(await page.locator('#mode-chat').isDisabled(), true);
  assert.equal(await embed(), 'done');
  const m = await cells();
  assert.equal(m.length, 4);
  for (let i = 0; i < 4; i++) {
    assert.ok(Math.abs(m[i][i] - 1) < 1e-3, `diagonal ${m[i][i]}`);
    for (let j = 0; j < 4; j++) assert.ok(Math.abs(m[i][j] - m[j][i]) < 1e-4, 'symmetric');
  }
  assert.ok(m[0][1] < 0.999, 'distinct sentences, distinct vectors');
  assert.match(await page.locator('#embed-stats').textContent(), /4 texts in .* 64 dimensions · pooling mean/);
  await screenshot(page, 'embeddings');

  // a query: the ranking is the cosine order of the page's own engine
  await page.locator('#embed-query').fill('A cat on a mat');
  assert.equal(await embed(), 'done');
  const ranked = await page.evaluate(() => [...document.querySelectorAll('#output .ranking li')]
    .map((li) => ({ index: Number(li.dataset.index), score: Number(li.dataset.score) })));
  assert.equal(ranked.length, 4);
  for (let i = 1; i < 4; i++) assert.ok(ranked[i - 1].score >= ranked[i].score, 'best first');
  assert.deepEqual(ranked.map((r) => r.index).sort(), [0, 1, 2, 3]);
});

test('a reranker ranks by its own scores; without a query it says why', { timeout: STEP_TIMEOUT }, async () => {
  await page.locator('#model-url').fill(`${server.origin}/synthetic/bert-rerank.gguf`);
  const out = await loadAfter(page, () => page.locator('#url-load').click());
  assert.equal(out.state, 'ready', out.text);
  await page.locator('#embed-query').fill('');
  assert.equal(await embed(), 'error');
  assert.match(await page.locator('#run-error').textContent(), /reranker/);
  await page.locator('#embed-query').fill('Where does the cat sit?');
  assert.equal(await embed(), 'done');
  assert.match(await page.locator('#output .hint').textContent(), /reranking scores/);
  assert.equal(await page.locator('#output .ranking li').count(), 4);
});
