// chat.js — chat templates: turns OpenAI-style messages into a model's prompt text by rendering
// the GGUF's `tokenizer.chat_template` (a Jinja template) with @huggingface/jinja, the library
// transformers.js uses, given the same variables Hugging Face's `apply_chat_template` passes
// (messages, add_generation_prompt, bos_token, eos_token, plus the caller's extras such as
// `enable_thinking` or `tools`). It also finds how much of a new token sequence an earlier one
// already covers, which is what lets a later turn reuse the KV cache.
// It does not tokenize or generate: the engine does both, with special tokens parsed.
//
// @huggingface/jinja is loaded on first use only, so pages that never chat never fetch it. Node
// and bundlers resolve the bare specifier; a page without a bundler needs an import map entry
// for '@huggingface/jinja' (web/index.html has one), else the module is looked for beside this
// package in node_modules.

/** @type {Promise<{Template: any}> | null} */
let jinjaModule = null;

/** Candidate URLs of @huggingface/jinja's ES module when the bare specifier does not resolve. */
const JINJA_FALLBACKS = [
  '../node_modules/@huggingface/jinja/dist/index.js', // this repository, served as is
  '../../../@huggingface/jinja/dist/index.js',        // installed: node_modules/wasmlm/js/
];

/**
 * Loads @huggingface/jinja once (the promise is shared by every engine of this realm).
 * @returns {Promise<{Template: any}>}
 */
export function loadJinja() {
  if (!jinjaModule) {
    jinjaModule = (async () => {
      try {
        return await import('@huggingface/jinja');
      } catch (first) {
        for (const rel of JINJA_FALLBACKS) {
          try {
            return await import(new URL(rel, import.meta.url).href);
          } catch { /* try the next place */ }
        }
        jinjaModule = null;
        throw new Error('chat templates need the package @huggingface/jinja (npm install ' +
          '@huggingface/jinja; in a page without a bundler, map it in an import map)', { cause: first });
      }
    })();
  }
  return jinjaModule;
}

/**
 * Checks OpenAI-style chat messages and returns plain copies ({role, content, ...extra fields
 * such as tool_calls or reasoning_content}), so a template never sees the caller's objects.
 * @param {unknown} messages
 * @returns {{role: string, content: string}[]}
 * @throws {TypeError} naming the offending message and field
 */
export function checkMessages(messages) {
  if (!Array.isArray(messages) || messages.length === 0) {
    throw new TypeError('messages: a non-empty array of {role, content} is required');
  }
  return messages.map((m, i) => {
    if (m === null || typeof m !== 'object') throw new TypeError(`messages[${i}]: an object {role, content} is required`);
    if (typeof m.role !== 'string' || m.role === '') throw new TypeError(`messages[${i}].role: a non-empty string is required`);
    if (typeof m.content !== 'string') {
      throw new TypeError(`messages[${i}].content: a string is required (got ${m.content === null ? 'null' : typeof m.content})`);
    }
    return { ...m };
  });
}

/**
 * Renders a chat template (Jinja source, as stored in a GGUF's tokenizer.chat_template or a
 * tokenizer_config.json's chat_template) for a conversation, as Hugging Face's
 * `tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=…)` does.
 * @param {string} template  Jinja source
 * @param {{role: string, content: string}[]} messages  OpenAI-style messages (checked)
 * @param {object} [options]
 * @param {string} [options.bosToken='']  text of the BOS token, passed as `bos_token`
 * @param {string} [options.eosToken='']  text of the EOS token, passed as `eos_token`
 * @param {boolean} [options.addGenerationPrompt=true]  end with the assistant's turn header
 * @param {Record<string, unknown>} [options.variables]  more template variables
 *   (e.g. `{enable_thinking: false}` for Qwen3, `tools`); they cannot replace the ones above
 * @returns {Promise<string>} the prompt text, special tokens written as text
 * @throws {Error} when the template does not parse or raises (its message is kept)
 */
export async function renderChatTemplate(template, messages, options = {}) {
  if (typeof template !== 'string' || template === '') throw new TypeError('chat template: a non-empty string is required');
  const msgs = checkMessages(messages);
  const { Template } = await loadJinja();
  let compiled;
  try {
    compiled = new Template(template);
  } catch (e) {
    throw new Error(`chat template does not parse: ${e?.message ?? e}`, { cause: e });
  }
  try {
    return compiled.render({
      ...(options.variables ?? {}),
      messages: msgs,
      add_generation_prompt: options.addGenerationPrompt ?? true,
      bos_token: options.bosToken ?? '',
      eos_token: options.eosToken ?? '',
    });
  } catch (e) {
    throw new Error(`chat template failed to render: ${e?.message ?? e}`, { cause: e });
  }
}

/**
 * Length of the longest common prefix of two token sequences.
 * @param {ArrayLike<number>} a
 * @param {ArrayLike<number>} b
 * @returns {number}
 */
export function commonPrefix(a, b) {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}
