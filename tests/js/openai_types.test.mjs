// tests/js/openai_types.test.mjs — wasmlm's chat-completion objects against the `openai` npm
// package's TypeScript types (a devDependency used only here), with tsc --noEmit (the
// `typescript` devDependency): tests/types/openai_types.ts checks that our declared types
// (js/chat/chat_completion.d.ts) are assignable to OpenAI's ChatCompletion / ChatCompletionChunk and
// that an OpenAI SDK request is one of ours; and the objects of real runs (a plain answer, tool
// calls, logprobs, every chunk of a stream with usage) are written as literals that must
// `satisfy` OpenAI's types — so a field we return with a wrong type or name fails, and so does
// a field OpenAI's types do not have (TypeScript's excess-property check on literals).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createEngine } from '../../js/wasmlm.js';
import { REPO } from './_helpers.mjs';
import { TOOLS, toolModel } from './_tool_models.mjs';

const TSC = join(REPO, 'node_modules', 'typescript', 'bin', 'tsc');

test('our ChatCompletion and ChatCompletionChunk, and what real runs return, are OpenAI\'s', async () => {
  const engine = await createEngine({ threads: 1 });
  const responses = [], chunks = [];
  try {
    await engine.load({ model: toolModel('qwen3') });
    const user = [{ role: 'user', content: 'What is 2+2?' }];
    responses.push(await engine.chatCompletion({ messages: user, seed: 1, max_tokens: 5, logprobs: true, top_logprobs: 2 }));
    responses.push(await engine.chatCompletion({ messages: user, tools: TOOLS, tool_choice: 'required', seed: 2, temperature: 0, max_tokens: 80 }));
    assert.ok(responses[1].choices[0].message.tool_calls?.length, 'the second run holds a call');
    const s = await engine.chatCompletion({ messages: user, tools: TOOLS, tool_choice: 'required', seed: 2, temperature: 0,
      max_tokens: 80, stream: true, stream_options: { include_usage: true }, logprobs: true });
    for await (const c of s) chunks.push(c);
  } finally {
    await engine.free();
  }
  const dir = join(REPO, 'build', 'types');
  mkdirSync(dir, { recursive: true });
  const lit = (v) => JSON.stringify(v, null, 1);
  writeFileSync(join(dir, 'captured.ts'), "import type OpenAI from 'openai';\n" +
    responses.map((r, i) => `export const r${i} = ${lit(r)} satisfies OpenAI.Chat.Completions.ChatCompletion;\n`).join('') +
    `export const chunks = ${lit(chunks)} satisfies OpenAI.Chat.Completions.ChatCompletionChunk[];\n`);
  writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({
    extends: '../../tests/types/tsconfig.json',
    files: ['../../tests/types/openai_types.ts', 'captured.ts'],
  }));
  try {
    execFileSync(process.execPath, [TSC, '-p', join(dir, 'tsconfig.json')], { encoding: 'utf8', stdio: 'pipe' });
  } catch (e) {
    assert.fail(`tsc --noEmit:\n${e.stdout}${e.stderr}`);
  }
});
