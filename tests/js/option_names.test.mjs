// option_names.test.mjs — every refusal of an option names it as the caller spelled it (topP,
// maxTokens, nCtx), not as C calls the field (top_p, max_tokens, n_ctx): C checks the ranges and
// words the message, js/engine/params.js renames its fields. For each option C checks, through every
// entry point that passes it (generate, generateBatch, previewDistribution, beamSearch, load,
// and the worker engine), the message has the option's name and no snake_case word at all.

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { createWorkerEngine, WasmlmError } from '../../js/wasmlm.js';
import { MODEL, TOKENIZER, loadedEngine, webWorkerLike } from './_helpers.mjs';

const engine = await loadedEngine();
after(() => engine.free());

const SNAKE = /\b[a-z]+(?:_[a-z\d]+)+\b/;

/** Asserts `promise` rejects with WLM_ERR_INVALID_ARG naming `name` and no C field. */
async function refusesNaming(promise, name, what) {
  await assert.rejects(promise, (e) => {
    assert.ok(e instanceof WasmlmError, `${what}: ${e}`);
    assert.equal(e.code, 'WLM_ERR_INVALID_ARG', `${what}: ${e.message}`);
    assert.match(e.message, new RegExp(`(^|[^\\w])${name.replace(/[[\]]/g, '\\$&')}([^\\w]|$)`), what);
    assert.doesNotMatch(e.message, SNAKE, `${what}: a C name in "${e.message}"`);
    return true;
  });
}

/** Generation parameters C refuses, and the name the message must use. */
const GENERATION = [
  [{ temperature: -1 }, 'temperature'],
  [{ topK: -1 }, 'topK'],
  [{ topP: 1.5 }, 'topP'],
  [{ minP: 2 }, 'minP'],
  [{ typicalP: 0 }, 'typicalP'],
  [{ repeatPenalty: 0 }, 'repeatPenalty'],
  [{ repeatLastN: -1 }, 'repeatLastN'],
  [{ presencePenalty: NaN }, 'presencePenalty'],
  [{ frequencyPenalty: Infinity }, 'frequencyPenalty'],
  [{ maxTokens: -2 }, 'maxTokens'],
  [{ nProbs: 99 }, 'nProbs'],
  [{ nKeep: -1 }, 'nKeep'],
  [{ contextShift: true, nKeep: 100000 }, 'nKeep'],
  [{ logitBias: { 9999: 1 } }, 'logitBias'],
  [{ logitBias: { 3: NaN } }, 'logitBias'],
  [{ bannedTokens: [9999] }, 'bannedTokens[0]'],
  [{ grammar: 'root ::= "a"', grammarLazy: true, grammarTriggers: ['a'], grammarArms: [9999] }, 'grammarArms[0]'],
  [{ grammar: 'root ::= "a"', grammarLazy: true, grammarTriggers: ['a'], grammarArms: ['b'], grammarDisarms: ['c', 9999] }, 'grammarDisarms[1]'],
];

for (const [params, name] of GENERATION) {
  const label = JSON.stringify(params, (k, v) => (typeof v === 'number' && !Number.isFinite(v) ? String(v) : v));
  test(`generate ${label}: the message says ${name}`, async () => {
    await refusesNaming(engine.complete('Once', { maxTokens: 3, ...params }), name, 'generate');
    await refusesNaming(engine.completeBatch(['Once', 'Two'], { maxTokens: 3, ...params }), name, 'generateBatch');
  });
}

test('previewDistribution names the option too', async () => {
  await engine.complete('Once', { maxTokens: 2 });
  await refusesNaming(engine.previewDistribution({ topP: 7 }), 'topP', 'previewDistribution');
  await refusesNaming(engine.previewDistribution({ nProbs: 500 }), 'nProbs', 'previewDistribution');
});

test('beamSearch: width, maxTokens, lengthPenalty', async () => {
  await refusesNaming(engine.beamSearch('Once', { width: 40 }), 'width', 'beamSearch');
  await refusesNaming(engine.beamSearch('Once', { maxTokens: 0 }), 'maxTokens', 'beamSearch');
  await refusesNaming(engine.beamSearch('Once', { lengthPenalty: -1 }), 'lengthPenalty', 'beamSearch');
});

test('load: nCtx, nSeqMax', async () => {
  const e = await loadedEngine();
  try {
    await refusesNaming(e.load({ model: MODEL, tokenizer: TOKENIZER, nCtx: 100000 }), 'nCtx', 'load');
    await refusesNaming(e.load({ model: MODEL, tokenizer: TOKENIZER, nSeqMax: 0 }), 'nSeqMax', 'load');
    await refusesNaming(e.load({ model: MODEL, tokenizer: TOKENIZER, nSeqMax: 65 }), 'nSeqMax', 'load');
  } finally {
    await e.free();
  }
});

test('the worker engine passes the same messages', async () => {
  const w = await createWorkerEngine({ worker: await webWorkerLike() });
  try {
    await w.load({ model: MODEL, tokenizer: TOKENIZER });
    await refusesNaming(w.complete('Once', { topP: 0 }), 'topP', 'worker generate');
    await refusesNaming(w.complete('Once', { maxTokens: -1 }), 'maxTokens', 'worker generate');
    await refusesNaming(w.beamSearch('Once', { lengthPenalty: -2 }), 'lengthPenalty', 'worker beamSearch');
    await refusesNaming(w.load({ model: MODEL, tokenizer: TOKENIZER, nCtx: 100000 }), 'nCtx', 'worker load');
  } finally {
    await w.free();
  }
});
