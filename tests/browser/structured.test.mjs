// structured.test.mjs — the demo page's "Output format" control in headless Chromium: picking
// JSON Schema shows the example schema; Generate then writes JSON that parses and validates
// against that schema (ajv, in Node, on the text the page shows), for several seeds; a grammar
// with a mistake reports its line and column; free text needs no schema.
// Screenshot: tests/artifacts/structured-json-schema.png.
//
//   node --test tests/browser/structured.test.mjs

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import Ajv from 'ajv';
import { STEP_TIMEOUT, waitForState, setValue, screenshot, openReadyPage } from './_helpers.mjs';

let session = null;
let page = null;

before(async () => {
  session = await openReadyPage();
  ({ page } = session);
});

after(() => session?.close());

const text = (selector) => page.locator(selector).textContent();

/** Clicks Generate, waits for the run to end; returns the state and the generated text. */
async function generate() {
  await page.locator('#generate').click();
  const state = await waitForState(page, 'ready', 'error');
  const generated = await page.locator('#output').evaluate((el) =>
    [...el.childNodes].filter((n) => !(n.classList?.contains('prompt'))).map((n) => n.textContent).join(''));
  return { state, generated };
}

test('JSON Schema: the output parses and validates with ajv', { timeout: STEP_TIMEOUT * 3 }, async () => {
  assert.equal(await page.locator('#format-text-field').isHidden(), true, 'free text needs no editor');
  await page.locator('#output-format').selectOption('json-schema');
  assert.equal(await page.locator('#format-text-field').isVisible(), true);
  assert.equal(await text('#format-text-label'), 'JSON Schema');
  const schemaText = await page.locator('#format-text').inputValue();
  const schema = JSON.parse(schemaText);
  assert.equal(schema.type, 'object', 'an example schema is filled in');
  const validate = new Ajv({ strict: false }).compile(schema);
  await setValue(page, '#max-tokens', 512);
  for (const seed of [1, 2, 3]) {
    await page.locator('#seed').fill(String(seed));
    const { state, generated } = await generate();
    assert.equal(state, 'ready', await text('#run-error'));
    assert.equal(await page.locator('#stat-stop').getAttribute('data-reason'), 'eos', generated);
    const value = JSON.parse(generated);
    assert.ok(validate(value), `${generated}: ${JSON.stringify(validate.errors)}`);
    assert.match(await text('#applied'), / · format JSON Schema$/);
  }
  await screenshot(page, 'structured-json-schema');
  session.browser.assertNoProblems();
});

test('JSON and grammar formats; a broken grammar reports its line and column', { timeout: STEP_TIMEOUT * 2 }, async () => {
  await page.locator('#seed').fill('4');
  await page.locator('#output-format').selectOption('json');
  let run = await generate();
  assert.equal(run.state, 'ready', await text('#run-error'));
  if (await page.locator('#stat-stop').getAttribute('data-reason') === 'eos') {
    const v = JSON.parse(run.generated);
    assert.ok(v && typeof v === 'object' && !Array.isArray(v), run.generated);
  } else {
    assert.match(run.generated, /^\{/); // cut by max tokens: still a JSON object's start
  }

  await page.locator('#output-format').selectOption('grammar');
  assert.equal(await text('#format-text-label'), 'Grammar (GBNF)');
  assert.match(await page.locator('#format-text').inputValue(), /^# an answer/, 'the example grammar replaces the schema');
  run = await generate();
  assert.equal(run.state, 'ready', await text('#run-error'));
  assert.match(run.generated, /^(Yes|No|Maybe), because [a-z ]{3,40}\.$/);

  await page.locator('#format-text').fill('root ::= "a"\nb ::= [x-\n');
  run = await generate();
  assert.equal(run.state, 'error');
  assert.match(await text('#run-error'), /grammar line 2, column \d+/);
  session.browser.assertNoProblems(/grammar line 2/);

  await page.locator('#output-format').selectOption('text');
  run = await generate();
  assert.equal(run.state, 'ready');
  assert.doesNotMatch(await text('#applied'), /format/);
  session.browser.assertNoProblems();
});
