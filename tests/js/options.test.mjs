// options.test.mjs — every options object of the public API refuses a key it does not know,
// naming it, the known keys and a near miss (js/options.js), the same way in the page's engine
// and through the worker; the known-key lists equal the members the .d.ts files document; and
// every documented key of the main entry points is accepted by the code behind them (a key in
// the d.ts and the list but not implemented fails here).

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { createEngine, createWorkerEngine, preload, renderChatTemplate, WasmlmError } from '../../js/wasmlm.js';
import { KNOWN, checkOptions, nearMiss, unknownKeyMessage } from '../../js/options.js';
import { REQUEST_FIELDS, checkRequest } from '../../js/chat/chat_completion.js';
import { ModelCache, ModelStore, download, fetchModel, listModels, isCached, deleteModel, persistStorage } from '../../js/models/cache.js';
import { createServer } from '../../js/server/server.js';
import { wasmlm } from '../../js/ai_sdk/index.js';
import { MODEL, REPO, TOKENIZER, collect, loadedEngine, webWorkerLike } from './_helpers.mjs';

// ---- the lists and the .d.ts files -----------------------------------------------------------

/** `export interface Name [extends A, B] { members }` of a .d.ts text: name → {keys, extends}. */
function interfaces(text) {
  const out = {};
  const re = /export interface (\w+)(?:<[^>]*>)? (?:extends ([\w, <>]+) )?\{/g;
  let m;
  while ((m = re.exec(text))) {
    let i = re.lastIndex;
    let depth = 1;
    let body = '';
    while (depth > 0) {
      const ch = text[i++];
      if (ch === '{') depth++;
      else if (ch === '}') depth--;
      if (depth === 1 || ch === '\n') body += ch === '}' ? '' : ch;
    }
    body = body.replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/.*$/gm, '');
    const keys = [...body.matchAll(/^\s*(?:readonly\s+)?([A-Za-z_$][\w$]*)\??\s*[:(]/gm)].map((x) => x[1]);
    out[m[1]] = { keys, extends: m[2] ? m[2].split(',').map((s) => s.trim().replace(/<.*/, '')) : [] };
  }
  return out;
}

const DTS = ['js/wasmlm.d.ts', 'js/chat/chat_completion.d.ts', 'js/models/cache.d.ts', 'js/server/server.d.ts', 'js/ai_sdk/index.d.ts',
  'js/prompt_api/index.d.ts'];
const declared = Object.assign({}, ...DTS.map((f) => interfaces(readFileSync(resolve(REPO, f), 'utf8'))));
const members = (name) => {
  const d = declared[name];
  assert.ok(d, `interface ${name} is not declared in ${DTS.join(', ')}`);
  return [...d.extends.flatMap((e) => (declared[e] ? members(e) : [])), ...d.keys];
};
/** KNOWN lists with no interface of that name: ResponseFormat is a union of object types. */
const NOT_AN_INTERFACE = new Set(['ResponseFormat']);

test('the parser reads a .d.ts interface (members, nested objects skipped, extends)', () => {
  const d = interfaces('export interface A {\n  /** x: no */ a?: number;\n  b: { c: 1 };\n  d(x: 1): void;\n}\n' +
    'export interface B extends A {\n  e?: string;\n}');
  assert.deepEqual(d.A.keys, ['a', 'b', 'd']);
  assert.deepEqual(d.B, { keys: ['e'], extends: ['A'] });
});

for (const name of Object.keys(KNOWN)) {
  if (NOT_AN_INTERFACE.has(name)) continue;
  test(`KNOWN.${name} lists exactly the members of interface ${name}`, () => {
    assert.deepEqual([...KNOWN[name]].sort(), [...new Set(members(name))].sort());
  });
}

test('ChatCompletionRequest documents exactly the fields chatCompletion() accepts', () => {
  assert.deepEqual([...REQUEST_FIELDS].sort(), members('ChatCompletionRequest').sort());
});

test('OpenAI\'s documented request fields are accepted or refused with a reason, never "unknown"', () => {
  // the fields of the `openai` package's ChatCompletionCreateParams (6.x)
  const text = readFileSync(resolve(REPO, 'node_modules/openai/resources/chat/completions/completions.d.ts'), 'utf8');
  const body = /interface ChatCompletionCreateParamsBase \{([\s\S]*?)\n\}/.exec(text)[1];
  const fields = [...body.matchAll(/^ {4}([a-z_]+)\??:/gm)].map((m) => m[1]);
  assert.ok(fields.includes('messages') && fields.length > 30, fields.join(','));
  for (const f of fields) {
    if (f === 'messages') continue;
    try {
      checkRequest({ messages: [{ role: 'user', content: 'x' }], [f]: null });
    } catch (e) {
      assert.doesNotMatch(e.message, /unknown field/, f);
    }
  }
});

// ---- the checker --------------------------------------------------------------------------

test('one message format: the call, the key, a near miss, the known keys', () => {
  assert.equal(unknownKeyMessage('load()', 'nctx', ['model', 'nCtx']),
    'load(): unknown option "nctx" (did you mean "nCtx"?) (known: model, nCtx)');
  assert.equal(unknownKeyMessage('f()', 'zzz', ['model']), 'f(): unknown option "zzz" (known: model)');
  assert.equal(nearMiss('thread', KNOWN.EngineOptions), 'threads');
  assert.equal(nearMiss('backnd', KNOWN.EngineOptions), 'backend');
  assert.equal(nearMiss('max_tokens', KNOWN.GenerateParams), 'maxTokens');
  assert.equal(nearMiss('temprature', KNOWN.GenerateParams), 'temperature');
  assert.equal(nearMiss('colour', KNOWN.GenerateParams), null);
  assert.throws(() => checkOptions('x()', { a: 1, b: 2 }, ['a']), (e) => e instanceof WasmlmError &&
    e.code === 'WLM_ERR_INVALID_ARG' && e.message === 'x(): unknown option "b" (known: a)');
  assert.doesNotThrow(() => checkOptions('x()', { a: 1, b: undefined }, ['a']));
  assert.throws(() => checkOptions('x()', { b: undefined }, ['a'], { keepUndefined: true }), /unknown option "b"/);
  assert.throws(() => checkOptions('x()', { b: 1 }, ['a'], { error: (m) => new TypeError(m) }), TypeError);
});

// ---- every entry point --------------------------------------------------------------------

/** Asserts `fn()` throws or rejects WLM_ERR_INVALID_ARG whose message is exactly `where`'s
 *  refusal of `key` (the whole known list included). */
async function refuses(fn, where, key, known, { noun = 'option', type = WasmlmError } = {}) {
  const expected = unknownKeyMessage(where, key, typeof known === 'string' ? KNOWN[known] : known, noun);
  let err;
  try {
    const r = fn();
    if (r && typeof r.then === 'function') await r;
    else if (r && typeof r[Symbol.asyncIterator] === 'function') await collect(r);
  } catch (e) {
    err = e;
  }
  assert.ok(err, `${where} accepted "${key}"`);
  assert.ok(err instanceof type, `${where}: ${err}`);
  if (type === WasmlmError) assert.equal(err.code, 'WLM_ERR_INVALID_ARG');
  assert.equal(err.message, expected);
}

const engine = await loadedEngine();
after(() => engine.free());

test('createEngine, preload: the issue\'s typos', async () => {
  await refuses(() => createEngine({ thread: 1 }), 'createEngine()', 'thread', 'EngineOptions');
  await refuses(() => createEngine({ threads: 1, backnd: 'cpu' }), 'createEngine()', 'backnd', 'EngineOptions');
  assert.match(await createEngine({ thread: 1 }).catch((e) => e.message), /did you mean "threads"\?/);
  await refuses(() => preload({ simdd: true }), 'preload()', 'simdd', 'EngineOptions');
  await refuses(() => createWorkerEngine({ worker: {}, warmUp: true }), 'createWorkerEngine()', 'warmUp', 'WorkerEngineOptions');
});

/** The engine calls, each with an unknown key: [label, call(engine), where, key, known list]. */
const CALLS = [
  ['load', (e) => e.load({ model: MODEL, tokenizer: TOKENIZER, nctx: 64 }), 'load()', 'nctx', 'LoadOptions'],
  ['loadDraft', (e) => e.loadDraft({ model: MODEL, ctx: 1 }), 'loadDraft()', 'ctx', 'DraftLoadOptions'],
  ['generate params', (e) => e.generate('Once', { maxTokens: 2, temprature: 0 }), 'generate()', 'temprature', 'GenerateParams'],
  ['generate options', (e) => e.generate('Once', { maxTokens: 2 }, { singal: null }), 'generate()', 'singal', 'CallOptions'],
  ['generate draft', (e) => e.generate('Once', { maxTokens: 2, draft: { ngram: 2, n: 3 } }), 'draft', 'n', 'DraftParams'],
  ['complete params', (e) => e.complete('Once', { max_tokens: 2 }), 'complete()', 'max_tokens', 'GenerateParams'],
  ['complete options', (e) => e.complete('Once', { maxTokens: 2 }, { onStep: () => {} }), 'complete()', 'onStep', 'CompleteOptions'],
  ['chat params', (e) => e.chat([{ role: 'user', content: 'hi' }], { template: 'x' }), 'chat()', 'template', 'ChatParams'],
  ['chat options', (e) => e.chat([{ role: 'user', content: 'hi' }], {}, { abort: 1 }), 'chat()', 'abort', 'CallOptions'],
  ['chat responseFormat', (e) => e.chat([{ role: 'user', content: 'hi' }], { chatTemplate: '{{ messages[0].content }}', responseFormat: { type: 'json_object', schema: {} } }),
    'responseFormat', 'schema', 'ResponseFormat'],
  ['chat responseFormat.json_schema', (e) => e.chat([{ role: 'user', content: 'hi' }], { chatTemplate: '{{ messages[0].content }}', responseFormat: { type: 'json_schema', json_schema: { schema: {}, nam: 'x' } } }),
    'responseFormat.json_schema', 'nam', 'ResponseFormatJsonSchema'],
  ['chatCompletion options', (e) => e.chatCompletion({ messages: [{ role: 'user', content: 'hi' }] }, { timeout: 1 }), 'chatCompletion()', 'timeout', 'CallOptions'],
  ['generateBatch params', (e) => e.generateBatch(['a', 'b'], { nSample: 2 }), 'generateBatch()', 'nSample', 'BatchParams'],
  ['generateBatch per-prompt params', (e) => e.generateBatch(['a', 'b'], [{}, { topp: 1 }]), 'generateBatch()', 'topp', 'BatchParams'],
  ['generateBatch options', (e) => e.generateBatch(['a'], {}, { onToken: () => {} }), 'generateBatch()', 'onToken', 'CallOptions'],
  ['completeBatch params', (e) => e.completeBatch(['a'], { maxToken: 1 }), 'completeBatch()', 'maxToken', 'BatchParams'],
  ['completeBatch options', (e) => e.completeBatch(['a'], { maxTokens: 1 }, { onStep: () => {} }), 'completeBatch()', 'onStep', 'CompleteOptions'],
  ['openBatch', (e) => e.openBatch({ maxSequence: 2 }), 'openBatch()', 'maxSequence', 'OpenBatchOptions'],
  ['beamSearch params', (e) => e.beamSearch('Once', { beams: 2 }), 'beamSearch()', 'beams', 'BeamParams'],
  ['beamSearch options', (e) => e.beamSearch('Once', { width: 2, maxTokens: 2 }, { onToken: () => {} }), 'beamSearch()', 'onToken', 'BeamSearchOptions'],
  ['previewDistribution', (e) => e.previewDistribution({ nprobs: 3 }), 'previewDistribution()', 'nprobs', 'GenerateParams'],
  ['tokenize', (e) => e.tokenize('Once', { addBos: true }), 'tokenize()', 'addBos', 'TokenizeOptions'],
  ['jsonSchemaToGrammar', (e) => e.jsonSchemaToGrammar({ type: 'string' }, { strictness: 1 }), 'jsonSchemaToGrammar()', 'strictness', 'GrammarOptions'],
  ['embed', (e) => e.embed('x', { normalise: true }), 'embed()', 'normalise', 'EmbedOptions'],
  ['rerank', (e) => e.rerank('q', ['d'], { topN: 1 }), 'rerank()', 'topN', 'CallOptions'],
];

for (const [label, call, where, key, known] of CALLS) {
  test(`${label}: refuses "${key}", the same in the page and through the worker`, async () => {
    await refuses(() => call(engine), where, key, known);
  });
}

/** Iterators refuse when iterated and promises reject: nothing throws at the call itself. */
async function refusesOnUse(e) {
  const messages = [{ role: 'user', content: 'hi' }];
  const calls = [
    () => e.generate('Once', { bogus: 1 }), () => e.generate('Once', {}, { bogus: 1 }),
    () => e.generateBatch(['Once'], { bogus: 1 }), () => e.generateBatch(['Once'], {}, { bogus: 1 }),
    () => e.chat(messages, { bogus: 1 }), () => e.chatCompletion({ messages }, { bogus: 1 }),
    () => e.chatCompletion({ messages, bogus: 1 }), () => e.complete('Once', { bogus: 1 }),
    () => e.beamSearch('Once', { bogus: 1 }), () => e.load({ bogus: 1 }), () => e.tokenize('x', { bogus: 1 }),
  ];
  for (const call of calls) {
    const r = call(); // must not throw
    await assert.rejects(typeof r.then === 'function' ? r : collect(r), /unknown (option|field) "bogus"/, String(call));
  }
}

test('the engine refuses on use: iterating a generator, awaiting a promise', async () => {
  await refusesOnUse(engine);
});

test('the worker engine: the same refusals, the same messages', async () => {
  const w = await createWorkerEngine({ worker: await webWorkerLike() });
  try {
    await w.load({ model: MODEL, tokenizer: TOKENIZER });
    for (const [label, call, where, key, known] of CALLS) {
      await refuses(() => call(w), where, key, known).catch((e) => { e.message = `worker ${label}: ${e.message}`; throw e; });
    }
    await refusesOnUse(w);
    await w.complete('Once', { maxTokens: 2 }); // still usable
  } finally {
    await w.free();
  }
});

test('ContinuousBatch.add: options refused at once', async () => {
  const b = await engine.openBatch({ maxSequences: 2 });
  try {
    await refuses(() => b.add('Once', { maxTokens: 2 }, { signl: null }), 'add()', 'signl', 'CallOptions');
  } finally {
    await b.close();
  }
});

test('chatCompletion: unknown non-OpenAI extras refused by name, OpenAI\'s ignored fields accepted', async () => {
  const messages = [{ role: 'user', content: 'hi' }];
  const chatTemplate = '{% for m in messages %}{{ m.content }}{% endfor %}';
  await refuses(() => engine.chatCompletion({ messages, maxTokens: 2 }), 'chatCompletion()', 'maxTokens', REQUEST_FIELDS, { noun: 'field' });
  await refuses(() => engine.chatCompletion({ messages, stream: true, stream_options: { includeUsage: true } }),
    'chatCompletion(): stream_options', 'includeUsage', ['include_usage', 'include_obfuscation'], { noun: 'field' });
  await refuses(() => engine.chatCompletion({ messages, chat_template: chatTemplate, response_format: { type: 'json_object', strict: true } }),
    'chatCompletion(): response_format', 'strict', 'ResponseFormat', { noun: 'field' });
  await refuses(() => engine.chatCompletion({ messages, chat_template: chatTemplate, response_format: { type: 'json_schema', json_schema: { schema: {}, nme: 'x' } } }),
    'chatCompletion(): response_format.json_schema', 'nme', 'ResponseFormatJsonSchema', { noun: 'field' });
  const r = await engine.chatCompletion({ messages, chat_template: chatTemplate, max_tokens: 2, prompt_cache_key: 'k',
    safety_identifier: 'u', prompt_cache_retention: 'in_memory', user: 'u' });
  assert.equal(r.object, 'chat.completion');
});

test('renderChatTemplate', async () => {
  await refuses(() => renderChatTemplate('{{ 1 }}', [], { bos: '' }), 'renderChatTemplate()', 'bos', 'RenderChatTemplateOptions');
});

test('cache and storage calls', async () => {
  const cache = new ModelCache('t', { caches: null });
  await refuses(() => new ModelCache('t', { cache: null }), 'new ModelCache()', 'cache', 'ModelCacheOptions');
  await refuses(() => cache.match('http://x/a', { sha: 'x' }), 'match()', 'sha', 'CacheMatchOptions');
  await refuses(() => cache.put('http://x/a', new Blob([]), { filename: 'x' }), 'put()', 'filename', 'CachePutOptions');
  await refuses(() => download('http://127.0.0.1:9/a', { sha265: 'x' }), 'download()', 'sha265', 'DownloadOptions');
  await refuses(() => fetchModel('http://127.0.0.1:9/a', { httpCache: 'no-store' }), 'fetchModel()', 'httpCache', 'FetchModelOptions');
  await refuses(() => listModels({ stores: null }), 'listModels()', 'stores', 'StoreLookupOptions');
  await refuses(() => isCached('x', { caches: null }), 'isCached()', 'caches', 'StoreLookupOptions');
  await refuses(() => deleteModel('x', { storage: null }), 'deleteModel()', 'storage', 'StoreLookupOptions');
  await refuses(() => persistStorage({ why: 'x' }), 'persist()', 'why', 'PersistOptions');
  await refuses(() => new ModelStore({ segmentbytes: 1 }), 'new ModelStore()', 'segmentbytes', 'StoreOptions');
  const store = new ModelStore({ backend: 'memory' });
  await refuses(() => store.get('x', { sha: 'x' }), 'get()', 'sha', 'CacheMatchOptions');
  await refuses(() => store.download('http://127.0.0.1:9/a', { hash: 'x' }), 'download()', 'hash', 'StoreDownloadOptions');
});

test('createServer (wasmlm serve\'s programmatic options)', async () => {
  await refuses(() => createServer({ port: 8080 }), 'createServer()', 'port', 'ServerOptions');
});

test('the AI SDK provider settings: a TypeError', async () => {
  await refuses(() => wasmlm(MODEL, { nCtx: 5 }), 'wasmlm()', 'nCtx', 'WasmlmModelOptions', { type: TypeError });
});

// ---- every documented key is accepted -------------------------------------------------------

/** A valid value of each GenerateParams key (a list that must cover the documented ones). */
const GENERATE_SAMPLES = {
  temperature: 0, topK: 1, topP: 0.9, minP: 0.05, typicalP: 1, repeatPenalty: 1, repeatLastN: 64,
  presencePenalty: 0, frequencyPenalty: 0, logitBias: { 5: 0 }, bannedTokens: [7], samplerOrder: 'runc', nProbs: 2,
  seed: 3, maxTokens: 2, stop: ['zzz'], addBos: true, contextShift: true, nKeep: 1, cachePrompt: false,
  stateCheckpoint: 0, parseSpecial: false, grammar: 'root ::= [a-z ]+', jsonSchema: null, jsonSchemaStrict: true,
  grammarLazy: false, grammarTriggers: [], grammarArms: [], grammarDisarms: [], grammarStartArmed: false,
  draft: { ngram: 2 }, images: [],
};

test('generate() accepts every documented GenerateParams key (each alone)', async () => {
  assert.deepEqual(Object.keys(GENERATE_SAMPLES).sort(), [...KNOWN.GenerateParams].sort());
  for (const [key, value] of Object.entries(GENERATE_SAMPLES)) {
    const params = { maxTokens: 2, [key]: value };
    await engine.complete('Once', params).catch((e) => assert.fail(`${key}: ${e.message}`));
    if (key !== 'draft' && key !== 'images') {
      await engine.completeBatch(['Once', 'Two'], params).catch((e) => assert.fail(`batch ${key}: ${e.message}`));
    }
  }
  await engine.completeBatch(['Once'], { maxTokens: 2, nSamples: 2 });
  await engine.complete('Once', { maxTokens: 2, grammar: 'root ::= "a" [a-z]*', grammarLazy: true, grammarTriggers: ['a'],
    grammarArms: ['b'], grammarDisarms: ['c'], grammarStartArmed: 'lead' });
});

test('chat() accepts every ChatParams key of its own', async () => {
  const own = KNOWN.ChatParams.filter((k) => !KNOWN.GenerateParams.includes(k));
  assert.deepEqual(own.sort(), ['addGenerationPrompt', 'chatTemplate', 'responseFormat', 'templateVariables']);
  await collect(engine.chat([{ role: 'user', content: 'hi' }], {
    maxTokens: 2, chatTemplate: '{{ messages[0].content }}{{ x }}', templateVariables: { x: '!' }, addGenerationPrompt: true,
    responseFormat: { type: 'json_schema', json_schema: { schema: { type: 'string' }, name: 'n', description: 'd', strict: false } },
  }));
});

test('load(), beamSearch(), openBatch(), tokenize(): every documented key', async () => {
  const e = await createEngine({ wasm: undefined, simd: true, build: 'auto', dotForm: 'auto', readAhead: 'auto', backend: 'cpu',
    gpu: undefined, gpuSubgroups: true, gpuWeights: 'stream', memory64: 'auto', threads: 1 });
  try {
    const progress = [];
    const info = await e.load({ model: MODEL, tokenizer: TOKENIZER, mmproj: undefined, nCtx: 64, kvCache: true, nSeqMax: 4,
      kvType: 'f32', backend: 'cpu', onProgress: (p) => progress.push(p), signal: new AbortController().signal });
    assert.equal(info.nCtx, 64);
    assert.ok(progress.length > 0);
    const steps = [];
    await e.beamSearch('Once', { width: 2, maxTokens: 2, lengthPenalty: 1, addBos: true, grammar: undefined, jsonSchema: { type: 'string' },
      jsonSchemaStrict: false }, { signal: undefined, onStep: (s) => steps.push(s) });
    assert.ok(steps.length > 0);
    const b = await e.openBatch({ maxSequences: 2, signal: undefined });
    await collect(b.add('Once', { maxTokens: 2 }, { signal: undefined }));
    await b.close();
    assert.ok((await e.tokenize('Once', { bos: false, parseSpecial: true })).length > 0);
    assert.ok((await e.jsonSchemaToGrammar({ type: 'string' }, { strict: true })).grammar.length > 0);
    const tokens = [];
    await e.complete('Once', { maxTokens: 2 }, { signal: undefined, onToken: (t) => tokens.push(t) });
    assert.equal(tokens.length, 2);
  } finally {
    await e.free();
  }
});
