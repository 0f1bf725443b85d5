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

import { jsError } from '../runtime/errors.js';
import { checkOptions } from '../options.js';
import { extractImages, joinTextParts } from '../vision/vision.js';

/** chat() options that shape the prompt; every other one is a generation parameter. */
export const CHAT_OPTIONS = Object.freeze(['chatTemplate', 'templateVariables', 'addGenerationPrompt']);

/** @type {Promise<{Template: any}> | null} */
let jinjaModule = null;

/** Candidate URLs of @huggingface/jinja's ES module when the bare specifier does not resolve. */
const JINJA_FALLBACKS = [
  '../../node_modules/@huggingface/jinja/dist/index.js', // this repository, served as is
  '../../../../@huggingface/jinja/dist/index.js',        // installed: node_modules/wasmlm/js/chat/
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
  checkOptions('renderChatTemplate()', options, 'RenderChatTemplateOptions');
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
      messages: typedContent(compiled, template) ? msgs.map(typed) : msgs,
      add_generation_prompt: options.addGenerationPrompt ?? true,
      bos_token: options.bosToken ?? '',
      eos_token: options.eosToken ?? '',
    });
  } catch (e) {
    throw new Error(`chat template failed to render: ${e?.message ?? e}`, { cause: e });
  }
}

/**
 * Whether a template renders only typed content ([{type: 'text', text}] parts, as SmolVLM's and
 * other vision models' do) and drops a string's: a probe message rendered both ways, as
 * llama.cpp's template capabilities (minja's requires_typed_content) are found. Cached.
 */
function typedContent(compiled, source) {
  let v = TYPED.get(source);
  if (v === undefined) {
    const probe = '<__wasmlm_probe__>';
    const render = (content) => {
      try {
        return compiled.render({ messages: [{ role: 'user', content }], add_generation_prompt: false, bos_token: '', eos_token: '' });
      } catch {
        return '';
      }
    };
    v = !render(probe).includes(probe) && render([{ type: 'text', text: probe }]).includes(probe);
    if (TYPED.size > 32) TYPED.clear();
    TYPED.set(source, v);
  }
  return v;
}
const TYPED = new Map(); // template source → typedContent
const typed = (m) => (typeof m.content === 'string' ? { ...m, content: [{ type: 'text', text: m.content }] } : m);

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

/**
 * Splits chat() parameters into the prompt's options (CHAT_OPTIONS) and generation parameters.
 * @param {object} params
 * @returns {{chat: object, gen: object}}
 */
export function splitChatParams(params) {
  if (params === null || typeof params !== 'object') {
    throw jsError('WLM_ERR_INVALID_ARG', `chat parameters must be an object, got ${params}`);
  }
  const chat = {}, gen = {};
  for (const [k, v] of Object.entries(params)) (CHAT_OPTIONS.includes(k) ? chat : gen)[k] = v;
  if (gen.responseFormat !== undefined) Object.assign(gen, responseFormatParams(gen));
  delete gen.responseFormat;
  return { chat, gen };
}

/**
 * OpenAI's response_format as generation parameters: {type: 'text'} → none, {type:
 * 'json_object'} → any JSON object, {type: 'json_schema', json_schema: {schema, name?,
 * strict?}} → jsonSchema (strict: false → jsonSchemaStrict false: unsupported keywords are
 * ignored rather than refused). Refuses a responseFormat beside grammar or jsonSchema.
 */
function responseFormatParams({ responseFormat: rf, grammar, jsonSchema }) {
  if (rf === null || typeof rf !== 'object' || typeof rf.type !== 'string') {
    throw jsError('WLM_ERR_INVALID_ARG', "responseFormat must be {type: 'text' | 'json_object' | " +
      "'json_schema', json_schema?: {schema, name?, strict?}}");
  }
  if (rf.type !== 'text' && (grammar != null || jsonSchema != null)) {
    throw jsError('WLM_ERR_INVALID_ARG', 'give either responseFormat or grammar / jsonSchema, not both');
  }
  checkOptions('responseFormat', rf, 'ResponseFormat');
  if (rf.type === 'text') return {};
  if (rf.type === 'json_object') return { jsonSchema: { type: 'object' } };
  if (rf.type === 'json_schema') {
    const js = rf.json_schema;
    if (js === null || typeof js !== 'object' || js.schema === undefined) {
      throw jsError('WLM_ERR_INVALID_ARG', "responseFormat {type: 'json_schema'} needs json_schema: {schema, name?, strict?}");
    }
    checkOptions('responseFormat.json_schema', js, 'ResponseFormatJsonSchema');
    return { jsonSchema: js.schema, jsonSchemaStrict: js.strict !== false };
  }
  throw jsError('WLM_ERR_INVALID_ARG', `responseFormat.type must be 'text', 'json_object' or ` +
    `'json_schema', got ${JSON.stringify(rf.type)}`);
}

/**
 * The prompt of a chat turn, as the engine tokenizes it: the conversation rendered with the
 * model's template (or options.chatTemplate) and the model's BOS/EOS texts, and whether BOS is
 * added by the tokenizer. A template that writes the BOS text itself when the vocabulary adds
 * BOS too would give two BOS tokens: the written one is dropped, so there is exactly one (what
 * llama.cpp's chat code does).
 * @param {{chatTemplate: string|null, bosToken: string, eosToken: string, addBos: boolean}} info
 * @param {unknown} messages
 * @param {{chatTemplate?: string, templateVariables?: object, addGenerationPrompt?: boolean}} options
 * @returns {Promise<{text: string, addBos: boolean}>}
 * @throws {WasmlmError} WLM_ERR_INVALID_ARG for messages or options, WLM_ERR_UNSUPPORTED when
 *   there is no template, WLM_ERR_FORMAT when the template does not parse or render
 */
export async function chatPrompt(info, messages, options = {}) {
  const { chatTemplate, templateVariables, addGenerationPrompt } = options;
  if (chatTemplate !== undefined && (typeof chatTemplate !== 'string' || chatTemplate === '')) {
    throw jsError('WLM_ERR_INVALID_ARG', 'chatTemplate must be a non-empty string (Jinja source)');
  }
  if (templateVariables !== undefined && (templateVariables === null || typeof templateVariables !== 'object')) {
    throw jsError('WLM_ERR_INVALID_ARG', 'templateVariables must be an object');
  }
  if (addGenerationPrompt !== undefined && typeof addGenerationPrompt !== 'boolean') {
    throw jsError('WLM_ERR_INVALID_ARG', 'addGenerationPrompt must be a boolean');
  }
  const template = chatTemplate ?? info.chatTemplate;
  if (!template) {
    throw jsError('WLM_ERR_UNSUPPORTED', 'this model has no chat template (no tokenizer.chat_template ' +
      'in the file): pass one as the chatTemplate option, or use generate()');
  }
  try {
    checkMessages(messages);
  } catch (e) {
    throw jsError('WLM_ERR_INVALID_ARG', e.message);
  }
  let text;
  try {
    text = await renderChatTemplate(template, messages, {
      bosToken: info.bosToken, eosToken: info.eosToken, addGenerationPrompt, variables: templateVariables,
    });
  } catch (e) {
    if (e?.name === 'WasmlmError') throw e;
    const err = jsError(/need the package/.test(e.message) ? 'WLM_ERR_UNSUPPORTED' : 'WLM_ERR_FORMAT', e.message);
    err.cause = e.cause ?? e;
    throw err;
  }
  const addBos = !!info.addBos;
  if (addBos && info.bosToken && text.startsWith(info.bosToken)) text = text.slice(info.bosToken.length);
  return { text, addBos };
}

/**
 * For a hybrid model (info.stateBytes > 0, whose recurrent state cannot be cut back): the prompt
 * position where the conversation's last turn ends and the generation prompt begins, in tokens,
 * or 0. GenerateParams.stateCheckpoint: the engine keeps its state there too, so the next turn
 * resumes from it when the template renders this turn's answer otherwise than the model wrote
 * it (Qwen3.5 drops the reasoning of earlier answers: the prompts diverge right after it).
 * `tokenize(text, {bos, parseSpecial})` is the engine's; `text` the rendered prompt, `options`
 * chatPrompt's. 0 when the model has no state, or the head is not a token prefix of the prompt.
 */
export async function chatCheckpoint(info, tokenize, messages, options, text, addBos) {
  if (!(info.stateBytes > 0) || options.addGenerationPrompt === false) return 0;
  const { text: head } = await chatPrompt(info, messages, { ...options, addGenerationPrompt: false });
  if (head.length === 0 || head.length >= text.length || !text.startsWith(head)) return 0;
  const [a, b] = [await tokenize(head, { bos: addBos, parseSpecial: true }), await tokenize(text, { bos: addBos, parseSpecial: true })];
  if (a.length === 0 || a.length >= b.length) return 0;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return 0;
  return a.length;
}

/**
 * One chat() request prepared, the same for Engine and WorkerEngine: the parameters split into
 * the template's and the generation's, image parts turned into media markers in the text and the
 * generation's `images` (js/vision/vision.js), the template rendered, and the prompt-cache
 * checkpoint found (0 with cachePrompt: false). `tokenize(text, opts)` is the engine's.
 * Returns { text, addBos, gen, stateCheckpoint, template } (template: the one rendered).
 */
export async function chatRequest(info, tokenize, messages, params) {
  const { chat, gen } = splitChatParams(params ?? {});
  const { messages: flat, images } = extractImages(messages);
  const joined = joinTextParts(flat);
  if (images.length) {
    if (gen.images !== undefined) throw jsError('WLM_ERR_INVALID_ARG', 'chat(): give images as content parts, not as `images`');
    gen.images = images;
  }
  const { text, addBos } = await chatPrompt(info, joined, chat);
  const stateCheckpoint = gen.cachePrompt === false ? 0 : await chatCheckpoint(info, tokenize, joined, chat, text, addBos);
  return { text, addBos, gen, stateCheckpoint, template: chat.chatTemplate ?? info.chatTemplate };
}
