// chat_completion.js — OpenAI's chat-completions API over an engine: a request body (messages,
// tools, tool_choice, sampling fields, response_format, stream) checked field by field, the
// conversation rendered with the model's chat template (tools passed as Hugging Face's
// apply_chat_template(tools=…) does, or described in a system message for templates without
// tools), the tool calls held to the template's syntax and the tools' JSON Schemas by a grammar
// (lazy for tool_choice 'auto': js/chat/tool_calls.js, src/sampling/grammar_lazy.c), and OpenAI's
// response object — or, with stream: true, its chat.completion.chunk objects.
// It works on any engine with info, tokenize, detokenize, jsonSchemaToGrammar, generate and
// lastResult: the in-thread Engine and the WorkerEngine (whose generate() runs in the worker).
// It does not sample or parse templates itself.

import { extractImages } from '../vision/vision.js';
import { KNOWN, checkOptions } from '../options.js';
import { abortError, jsError } from '../runtime/errors.js';
import { chatCheckpoint, chatPrompt, splitChatParams } from './chat.js';
import { MARKER_TOKENS, callMarker, detectToolFormat, toolGrammar } from './tool_calls.js';
import { ChatOutputParser, REASONING_MARKERS, detectReasoningFormat, lazyArming, promptOpensThinking } from './reasoning.js';

/** Request fields: OpenAI's that are supported, and ours (llama.cpp server's names). */
const OPENAI_FIELDS = ['messages', 'model', 'tools', 'tool_choice', 'parallel_tool_calls', 'temperature',
  'top_p', 'max_tokens', 'max_completion_tokens', 'stop', 'seed', 'logprobs', 'top_logprobs',
  'response_format', 'stream', 'stream_options', 'n', 'frequency_penalty', 'presence_penalty', 'logit_bias',
  'user', 'reasoning_effort',
  // accepted and ignored: identifiers and cache hints of OpenAI's service (the prompt cache here
  // is the engine's own, cachePrompt / cache_prompt)
  'prompt_cache_key', 'prompt_cache_retention', 'prompt_cache_options', 'safety_identifier'];
/** stream_options: include_usage; include_obfuscation is accepted and ignored (no padding is sent). */
const STREAM_OPTIONS = ['include_usage', 'include_obfuscation'];
const EXTRA_FIELDS = { top_k: 'topK', min_p: 'minP', typical_p: 'typicalP', repeat_penalty: 'repeatPenalty',
  repeat_last_n: 'repeatLastN' };
/** Their ranges (C's, src/wasmlm.h), checked here so that the error names the request's field. */
const EXTRA_RANGES = { top_k: { int: true, min: 0 }, min_p: { min: 0, max: 1 }, typical_p: { min: Number.MIN_VALUE, max: 1 },
  repeat_penalty: { min: Number.MIN_VALUE }, repeat_last_n: { int: true, min: 0 } };
const OTHER_EXTRAS = ['cache_prompt', 'chat_template', 'chat_template_kwargs'];
/** Every field a request may have (ChatCompletionRequest in chat_completion.d.ts). */
export const REQUEST_FIELDS = [...OPENAI_FIELDS, ...Object.keys(EXTRA_FIELDS), ...OTHER_EXTRAS];
/** OpenAI fields refused with a reason (rather than as unknown). */
const REFUSED = {
  functions: 'the legacy `functions` API is not supported: use `tools`',
  function_call: 'the legacy `function_call` is not supported: use `tool_choice`',
  audio: 'audio output is not supported', modalities: 'only text output is supported',
  prediction: 'predicted outputs are not supported',
  service_tier: 'service_tier has no meaning here', store: 'stored completions are not supported',
  metadata: 'metadata is not supported (nothing is stored)', web_search_options: 'web search is not supported',
  verbosity: 'verbosity is not supported', moderation: 'moderation is not supported',
};

const bad = (message) => jsError('WLM_ERR_INVALID_ARG', message);

function isObject(v) { return v !== null && typeof v === 'object' && !Array.isArray(v); }

function num(req, key, { int = false, min = -Infinity, max = Infinity } = {}) {
  const v = req[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isFinite(v) || (int && !Number.isInteger(v)) || v < min || v > max) {
    const lo = min === Number.MIN_VALUE ? '> 0' : min > -Infinity ? `>= ${min}` : '';
    const range = [lo, max < Infinity ? `<= ${max}` : ''].filter(Boolean).join(' and ');
    throw bad(`${key} must be ${int ? 'an integer' : 'a number'}${range ? ` ${range}` : ''}, got ${JSON.stringify(v)}`);
  }
  return v;
}

function bool(req, key) {
  const v = req[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'boolean') throw bad(`${key} must be a boolean, got ${JSON.stringify(v)}`);
  return v;
}

/** A message's content as a string: a string, null, or an array of {type: 'text', text} parts. */
function contentText(m, i) {
  const c = m.content;
  if (typeof c === 'string') return c;
  if (c === null || c === undefined) return '';
  if (!Array.isArray(c)) throw bad(`messages[${i}].content must be a string, null or an array of text parts`);
  return c.map((p, j) => {
    if (!isObject(p) || p.type !== 'text' || typeof p.text !== 'string') {
      throw bad(`messages[${i}].content[${j}]: only {type: 'text', text} and image ({type: 'image_url', image_url: {url}}) parts are supported` +
        (isObject(p) && typeof p.type === 'string' ? ` (got type '${p.type}')` : ''));
    }
    return p.text;
  }).join('');
}

/**
 * OpenAI messages → template messages ({role, content, tool_calls?, tool_call_id?, name?}):
 * tool calls' arguments parsed into objects (what templates expect: Hugging Face's form),
 * 'developer' as 'system', a tool message named after the call it answers.
 */
function checkMessages(messages) {
  if (!Array.isArray(messages) || messages.length === 0) throw bad('messages: a non-empty array is required');
  const names = new Map(); // tool_call id → function name
  return messages.map((m, i) => {
    if (!isObject(m)) throw bad(`messages[${i}] must be an object`);
    const role = m.role === 'developer' ? 'system' : m.role;
    if (!['system', 'user', 'assistant', 'tool'].includes(role)) {
      throw bad(`messages[${i}].role must be 'system', 'developer', 'user', 'assistant' or 'tool', got ${JSON.stringify(m.role)}`);
    }
    for (const k of Object.keys(m)) {
      const ok = ['role', 'content', 'name'].includes(k) || (role === 'assistant' && ['tool_calls', 'refusal'].includes(k)) ||
        (role === 'tool' && k === 'tool_call_id');
      if (!ok) throw bad(`messages[${i}].${k} is not supported for role '${m.role}'`);
    }
    const out = { role, content: contentText(m, i) };
    if (m.name !== undefined) {
      if (typeof m.name !== 'string') throw bad(`messages[${i}].name must be a string`);
      out.name = m.name;
    }
    if (role === 'assistant' && m.tool_calls != null) {
      if (!Array.isArray(m.tool_calls)) throw bad(`messages[${i}].tool_calls must be an array`);
      out.tool_calls = m.tool_calls.map((c, j) => {
        const f = c?.function;
        if (!isObject(c) || (c.type !== undefined && c.type !== 'function') || !isObject(f) || typeof f.name !== 'string') {
          throw bad(`messages[${i}].tool_calls[${j}] must be {id, type: 'function', function: {name, arguments}}`);
        }
        if (typeof f.arguments !== 'string') throw bad(`messages[${i}].tool_calls[${j}].function.arguments must be a JSON string`);
        let args;
        try { args = JSON.parse(f.arguments); } catch { args = f.arguments; }
        if (typeof c.id === 'string') names.set(c.id, f.name);
        return { id: c.id, type: 'function', function: { name: f.name, arguments: args } };
      });
    } else if (role !== 'assistant' && m.content == null) {
      throw bad(`messages[${i}].content is required for role '${m.role}'`);
    }
    if (role === 'tool') {
      if (typeof m.tool_call_id !== 'string') throw bad(`messages[${i}].tool_call_id (a string) is required for a tool message`);
      out.tool_call_id = m.tool_call_id;
      if (out.name === undefined && names.has(m.tool_call_id)) out.name = names.get(m.tool_call_id);
    }
    return out;
  });
}

function checkTools(req) {
  const tools = req.tools;
  if (tools == null) return [];
  if (!Array.isArray(tools)) throw bad('tools must be an array of {type: \'function\', function: {name, description?, parameters?}}');
  const seen = new Set();
  return tools.map((t, i) => {
    if (!isObject(t) || t.type !== 'function' || !isObject(t.function)) {
      throw bad(`tools[${i}] must be {type: 'function', function: {name, description?, parameters?}}`);
    }
    const f = t.function;
    if (typeof f.name !== 'string' || !/^[A-Za-z0-9_.-]{1,64}$/.test(f.name)) {
      throw bad(`tools[${i}].function.name must be 1 to 64 letters, digits, '_', '.' or '-'`);
    }
    if (seen.has(f.name)) throw bad(`tools[${i}].function.name '${f.name}' is given twice`);
    seen.add(f.name);
    for (const k of Object.keys(f)) {
      if (!['name', 'description', 'parameters', 'strict'].includes(k)) throw bad(`tools[${i}].function.${k} is not supported`);
    }
    if (f.parameters !== undefined && !isObject(f.parameters)) throw bad(`tools[${i}].function.parameters must be a JSON Schema object`);
    return { type: 'function', function: { ...f } }; // as given: the template shows them to the model
  });
}

/** tool_choice → {mode: 'none' | 'auto' | 'required', name?: string}. */
function checkToolChoice(req, tools) {
  const tc = req.tool_choice;
  if (tc === undefined || tc === null) return { mode: tools.length ? 'auto' : 'none' };
  if (tc === 'none' || tc === 'auto' || tc === 'required') {
    if (tc !== 'none' && tools.length === 0) throw bad(`tool_choice '${tc}' needs tools`);
    return { mode: tc };
  }
  if (isObject(tc) && tc.type === 'function' && isObject(tc.function) && typeof tc.function.name === 'string') {
    if (!tools.some((t) => t.function.name === tc.function.name)) {
      throw bad(`tool_choice names the function '${tc.function.name}', which is not in tools`);
    }
    return { mode: 'required', name: tc.function.name };
  }
  throw bad("tool_choice must be 'none', 'auto', 'required' or {type: 'function', function: {name}}");
}

/**
 * Checks an OpenAI chat-completions request body: {messages, tools, choice, gen (GenerateParams),
 * chat (chatPrompt options), stream, includeUsage, logprobs, topLogprobs, parallel, model}.
 * Unknown fields and unsupported values are errors naming the field.
 */
export function checkRequest(req) {
  if (!isObject(req)) throw bad('chatCompletion(): the request must be an object');
  for (const k of Object.keys(req)) {
    if (req[k] !== undefined && REFUSED[k]) throw bad(`${k}: ${REFUSED[k]}`);
  }
  checkOptions('chatCompletion()', req, REQUEST_FIELDS, { noun: 'field' });
  if (req.model !== undefined && typeof req.model !== 'string') throw bad('model must be a string');
  if (req.user !== undefined && typeof req.user !== 'string') throw bad('user must be a string');
  const n = num(req, 'n', { int: true, min: 1 });
  if (n !== undefined && n !== 1) throw bad(`n: only 1 choice is supported, got ${n}`);
  const messages = checkMessages(req.messages);
  const tools = checkTools(req);
  const choice = checkToolChoice(req, tools);
  const parallel = bool(req, 'parallel_tool_calls') ?? true;
  const gen = { topP: 1, maxTokens: 0 }; // OpenAI's defaults: no nucleus, no limit but the context
  const set = (key, v) => { if (v !== undefined) gen[key] = v; };
  set('temperature', num(req, 'temperature', { min: 0, max: 2 }));
  set('topP', num(req, 'top_p', { min: 0, max: 1 }));
  if (gen.topP === 0) gen.topP = 1e-6; // OpenAI allows 0 (the most probable token); C's range is (0, 1]
  const maxTokens = num(req, 'max_completion_tokens', { int: true, min: 1 }) ?? num(req, 'max_tokens', { int: true, min: 1 });
  set('maxTokens', maxTokens);
  set('seed', num(req, 'seed', { int: true, min: 0, max: Number.MAX_SAFE_INTEGER }));
  set('frequencyPenalty', num(req, 'frequency_penalty', { min: -2, max: 2 }));
  set('presencePenalty', num(req, 'presence_penalty', { min: -2, max: 2 }));
  for (const [k, name] of Object.entries(EXTRA_FIELDS)) {
    set(name, num(req, k, EXTRA_RANGES[k]));
  }
  if (req.stop != null) {
    const stops = typeof req.stop === 'string' ? [req.stop] : req.stop;
    if (!Array.isArray(stops) || !stops.every((s) => typeof s === 'string')) throw bad('stop must be a string or an array of strings');
    if (stops.length > 8) throw bad(`stop: at most 8 strings (got ${stops.length})`);
    gen.stop = stops;
  }
  if (req.logit_bias != null) {
    if (!isObject(req.logit_bias)) throw bad('logit_bias must be an object {tokenId: bias}');
    const bias = {};
    for (const [id, b] of Object.entries(req.logit_bias)) {
      if (!/^\d+$/.test(id)) throw bad(`logit_bias: ${JSON.stringify(id)} is not a token id`);
      if (typeof b !== 'number' || !(b >= -100 && b <= 100)) throw bad(`logit_bias[${id}] must be a number in -100..100`);
      bias[id] = b <= -100 ? -Infinity : b;
    }
    gen.logitBias = bias;
  }
  const logprobs = bool(req, 'logprobs') ?? false;
  const topLogprobs = num(req, 'top_logprobs', { int: true, min: 0, max: 20 }) ?? 0;
  if (topLogprobs > 0 && !logprobs) throw bad('top_logprobs needs logprobs: true');
  if (topLogprobs > 0) gen.nProbs = topLogprobs;
  const stream = bool(req, 'stream') ?? false;
  let includeUsage = false;
  if (req.stream_options != null) {
    if (!stream) throw bad('stream_options needs stream: true');
    if (!isObject(req.stream_options)) throw bad('stream_options must be an object {include_usage}');
    checkOptions('chatCompletion(): stream_options', req.stream_options, STREAM_OPTIONS, { noun: 'field' });
    includeUsage = bool(req.stream_options, 'include_usage') ?? false;
  }
  if (req.response_format != null) {
    if (choice.mode !== 'none') throw bad('response_format cannot be combined with tools (unless tool_choice is \'none\')');
    checkOptions('chatCompletion(): response_format', req.response_format, KNOWN.ResponseFormat, { noun: 'field' });
    if (isObject(req.response_format.json_schema)) {
      checkOptions('chatCompletion(): response_format.json_schema', req.response_format.json_schema, KNOWN.ResponseFormatJsonSchema, { noun: 'field' });
    }
    Object.assign(gen, splitChatParams({ responseFormat: req.response_format }).gen);
  }
  const chat = {};
  if (req.chat_template !== undefined) chat.chatTemplate = req.chat_template;
  if (req.chat_template_kwargs !== undefined) {
    if (!isObject(req.chat_template_kwargs)) throw bad('chat_template_kwargs must be an object');
    chat.templateVariables = { ...req.chat_template_kwargs };
  }
  if (req.reasoning_effort != null) {
    if (!['low', 'medium', 'high'].includes(req.reasoning_effort)) {
      throw bad(`reasoning_effort must be 'low', 'medium' or 'high', got ${JSON.stringify(req.reasoning_effort)}`);
    }
    chat.reasoningEffort = req.reasoning_effort;
  }
  const cachePrompt = bool(req, 'cache_prompt') ?? true;
  return { messages, tools, choice, gen, chat, cachePrompt, stream, includeUsage, logprobs, topLogprobs, parallel,
    model: req.model };
}

// ---- generic format: tools described in a system message, history as JSON -------------------

/** The system text that describes the tools and the answer's JSON shape (generic format; the
 *  same whatever tool_choice is, so that a conversation's turns share their prompt). */
export function genericSystemText(tools) {
  const list = tools.map((t) => JSON.stringify(t.function)).join('\n');
  return `You can call these tools (JSON Schema of each function's arguments):\n${list}\n\n` +
    'Answer with a single JSON object: {"tool_calls": [{"name": <function name>, "arguments": <arguments object>}, …]} ' +
    'to call tools, or {"response": <your answer as a string>} to answer directly. ' +
    'The results of the calls come back in a user message {"tool_responses": [...]}.';
}

/**
 * Messages for a template that knows no tools: the tool description joined to the system
 * message, assistant calls written as the JSON the model answers with, tool results as user
 * messages (consecutive messages of one role merged: Gemma's template wants alternation).
 */
function genericMessages(messages, tools) {
  const out = [];
  const sys = genericSystemText(tools);
  let rest = messages;
  if (messages[0].role === 'system') {
    out.push({ role: 'system', content: `${messages[0].content}\n\n${sys}` });
    rest = messages.slice(1);
  } else {
    out.push({ role: 'system', content: sys });
  }
  const push = (role, content) => {
    const last = out[out.length - 1];
    if (last && last.role === role && out.length > 1) last.content += `\n\n${content}`;
    else out.push({ role, content });
  };
  let pending = null; // tool results waiting to be written as one user message
  const flush = () => {
    if (pending) push('user', JSON.stringify({ tool_responses: pending }));
    pending = null;
  };
  for (const m of rest) {
    if (m.role === 'tool') {
      (pending ??= []).push({ name: m.name, tool_call_id: m.tool_call_id, content: m.content });
      continue;
    }
    flush();
    if (m.role === 'assistant' && m.tool_calls?.length) {
      push('assistant', JSON.stringify({ tool_calls: m.tool_calls.map((c) => ({ name: c.function.name, arguments: c.function.arguments })) }));
    } else if (m.role === 'assistant') {
      push('assistant', JSON.stringify({ response: m.content }));
    } else {
      push(m.role, m.content);
    }
  }
  flush();
  return out;
}

/**
 * Gemma 4's template writes a call's result inside the assistant message that made the call
 * (tool_responses: [{name, response}] beside its tool_calls, rendered as
 * <|tool_response>response:NAME{…}<tool_response|> in the model's turn), not as a message of its
 * own: the tool messages that follow such an assistant message are folded into it, in order, each
 * response the object its content holds as JSON, else its text (the template writes either).
 */
function gemma4Messages(messages) {
  const out = [];
  for (const m of messages) {
    const last = out[out.length - 1];
    if (m.role === 'tool' && last?.role === 'assistant' && last.tool_calls?.length) {
      let response = m.content;
      try {
        const v = JSON.parse(m.content);
        if (v !== null && typeof v === 'object' && !Array.isArray(v)) response = v;
      } catch { /* its text */ }
      last.tool_responses.push({ name: m.name ?? 'unknown', response });
      continue;
    }
    out.push(m.role === 'assistant' && m.tool_calls?.length ? { ...m, tool_responses: [] } : m);
  }
  return out;
}

// ---- the request → generation → response ------------------------------------------------------

function randomId(len, rnd = Math.random) {
  const a = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
  let s = '';
  for (let i = 0; i < len; i++) s += a[Math.floor(rnd() * a.length)];
  return s;
}

/** A small seeded generator (mulberry32) for call ids: a request with a seed repeats exactly. */
function seededRandom(seed) {
  let t = (seed >>> 0) ^ 0x9e3779b9;
  return () => {
    t = (t + 0x6d2b79f5) >>> 0;
    let x = t;
    x = Math.imul(x ^ (x >>> 15), x | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

/** The single-token ids of `texts` in the model's vocabulary: Map text → {id, text: its piece}. */
async function singleTokens(engine, texts) {
  const out = new Map();
  for (const t of texts) {
    const ids = await engine.tokenize(t, { bos: false, parseSpecial: true });
    if (ids.length === 1) out.set(t, { id: ids[0], text: await engine.detokenize([ids[0]]) });
  }
  return out;
}

function utf8Bytes(s) { return Array.from(new TextEncoder().encode(s)); }

function logprobEntry(tok) {
  return {
    token: tok.text, logprob: tok.logprob, bytes: utf8Bytes(tok.text),
    top_logprobs: (tok.top ?? []).map((a) => ({ token: a.text, logprob: a.logprob, bytes: utf8Bytes(a.text) })),
  };
}

/**
 * The prompt of a chat-completion request, as chatCompletion() renders it (exported for tests
 * and for callers who want to see it): {text, addBos, format, r (the checked request), tools
 * (those the grammar allows)}. format: the tool-call syntax, or null without tools.
 * @param {{chatTemplate: string|null, bosToken: string, eosToken: string, addBos: boolean}} info
 * @param {object} request
 */
export async function chatCompletionPrompt(info, request) {
  const r = checkRequest(request);
  const template = r.chat.chatTemplate ?? info.chatTemplate;
  // With tools the prompt is the same whatever tool_choice is ('none' included: the tools stay
  // declared, as OpenAI's 'none' reads), so the turns of a conversation share the KV cache.
  const shown = r.tools.length ? detectToolFormat(template) : null;
  // (generic: the answer is JSON whatever the choice; 'none' allows only {"response"})
  const format = r.choice.mode !== 'none' || shown === 'generic' ? shown : null;
  let tools = r.tools;
  if (r.choice.name) tools = tools.filter((t) => t.function.name === r.choice.name);
  let messages = r.messages;
  const variables = { ...(r.chat.templateVariables ?? {}) };
  // reasoning_effort: the template variable of that name (gpt-oss's "Reasoning: low|medium|high")
  if (r.chat.reasoningEffort !== undefined) {
    if (!/\breasoning_effort\b/.test(String(template))) {
      throw bad('reasoning_effort: this model\'s chat template has no reasoning effort (gpt-oss\'s has); ' +
        'a template with a thinking switch takes chat_template_kwargs such as {enable_thinking: false}');
    }
    variables.reasoning_effort ??= r.chat.reasoningEffort;
  }
  // Gemma 4 reads a call's results from the assistant message that made it (with or without
  // tools in this request: an earlier turn's calls are rendered all the same)
  if (detectToolFormat(template) === 'gemma4') messages = gemma4Messages(messages);
  if (shown === 'generic') messages = genericMessages(messages, r.tools);
  else if (shown) {
    variables.tools = r.tools; // the template lists them all; a named choice is the grammar's
    // SmolLM3's template lists xml_tools (or tools) with `tool | string`, Python's str(dict),
    // which @huggingface/jinja has no filter for on an object: they go as their JSON text
    if (/\bxml_tools\b/.test(String(template))) variables.tools = r.tools.map((t) => JSON.stringify(t));
  }
  const { reasoningEffort, ...chatRest } = r.chat;
  const chatOptions = { ...chatRest, templateVariables: variables };
  const { text, addBos } = await chatPrompt(info, messages, chatOptions);
  return { text, addBos, format, shown, r, tools, messages, chatOptions, template };
}

/**
 * Prepares a request: checked fields, the prompt, the grammar and the parser's settings.
 * @returns {Promise<object>}
 */
async function prepare(engine, request) {
  const info = engine.info;
  if (!info) throw jsError('WLM_ERR_STATE', 'no model loaded: call load() first');
  // image parts → media markers in the rendered text, the images to generate() (js/vision/vision.js)
  const { messages: flat, images } = extractImages(request?.messages);
  if (images.length) request = { ...request, messages: flat };
  const { text, addBos, format, shown, r, tools, messages, chatOptions, template } = await chatCompletionPrompt(info, request);
  const reasoning = detectReasoningFormat(template);
  const useTools = format !== null;
  const gen = { ...r.gen, cachePrompt: r.cachePrompt, addBos, parseSpecial: true };
  if (images.length) gen.images = images;
  if (r.cachePrompt) { // a hybrid's recurrent state kept where the conversation's last turn ends
    const cp = await chatCheckpoint(info, engine.tokenize.bind(engine), messages, chatOptions, text, addBos);
    if (cp > 0) gen.stateCheckpoint = cp;
  }
  let prefill = '';
  const markerIds = new Map();
  if (shown && !useTools && shown !== 'harmony') { // tool_choice 'none': the format's opening token (if one) is banned
    // (harmony's markers frame every message: nothing is banned, and a call is read as content)
    const markers = await singleTokens(engine, [...new Set([...MARKER_TOKENS[shown], callMarker(shown)].filter(Boolean))]);
    if (markers.size) gen.logitBias = { ...(gen.logitBias ?? {}), ...Object.fromEntries([...markers.values()].map((m) => [m.id, -Infinity])) };
  }
  if (useTools) {
    const markers = await singleTokens(engine, [...new Set([...MARKER_TOKENS[format], '<tool_call>', '[TOOL_CALLS]', '<|python_tag|>',
      '<|tool_call_start|>', '<|tool_call_end|>'])]);
    for (const [t, m] of markers) if (m.text === '' && MARKER_TOKENS[format].includes(t)) markerIds.set(m.id, t);
    const convert = async (schema) => (await engine.jsonSchemaToGrammar(schema, { strict: false })).grammar;
    const g = await toolGrammar(format, tools, { mode: r.choice.mode, parallel: r.parallel, markers }, convert);
    if (g.grammar !== null) gen.grammar = g.grammar;
    if (g.lazy) {
      gen.grammarLazy = true;
      gen.grammarTriggers = g.triggers;
    }
    prefill = g.prefill;
  }
  const seed = gen.seed;
  const rnd = seed !== undefined ? seededRandom(seed) : Math.random;
  // Mistral's templates want 9 letters and digits; OpenAI's ids are call_ and 24 more
  const makeId = () => (format === 'mistral' ? randomId(9, rnd) : `call_${randomId(24, rnd)}`);
  // a thinking model's reasoning (reasoning.js): its markers seen as text where they are control
  // tokens, and the output parsed into reasoning, content and calls
  const open = promptOpensThinking(text + prefill, reasoning);
  if (reasoning) {
    const rmarkers = await singleTokens(engine, REASONING_MARKERS[reasoning]);
    for (const [t, m] of rmarkers) if (m.text === '') markerIds.set(m.id, t);
    // 'auto': the lazy grammar's triggers count only outside the reasoning (a call marker
    // written inside it is reasoning, as the parser reads it): armed by </think> (harmony: in a
    // message's header)
    if (gen.grammarLazy) Object.assign(gen, lazyArming(reasoning, { open, markers: rmarkers }));
  }
  let parser = null, early = [];
  if (useTools || reasoning) {
    // (a grammar from the first token, tool_choice 'required' or a response_format, leaves no
    // room for reasoning: the answer is what it holds)
    const constrained = (gen.grammar != null && !gen.grammarLazy) || gen.jsonSchema != null;
    parser = new ChatOutputParser(reasoning, { open: open && !constrained,
      toolFormat: useTools ? format : null, makeId, startInCall: prefill !== '', tools: r.tools });
    if (reasoning === 'harmony' && prefill) early = parser.push(prefill); // (the call's header)
  }
  return {
    r, prompt: text + prefill, gen, format, markerIds, makeId, parser, early,
    id: `chatcmpl-${randomId(24)}`, created: Math.floor(Date.now() / 1000),
    model: r.model ?? info.name ?? 'wasmlm',
  };
}

function finishReason(stopReason, calls) {
  if (stopReason === 'max_tokens' || stopReason === 'context_full') return 'length';
  return calls > 0 ? 'tool_calls' : 'stop';
}

/** Events of the parser (or plain text) for one token's text. */
function events(p, text) {
  if (!p.parser) return text ? [{ type: 'content', text }] : [];
  return p.parser.push(text);
}

function usage(last) {
  const prompt = last?.nPrompt ?? 0, completion = last?.nGenerated ?? 0;
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion,
    prompt_tokens_details: { cached_tokens: last?.nCached ?? 0 } };
}

/** The generation's tokens, with control markers given their text, and the final stop reason. */
async function* tokens(engine, p, signal) {
  for await (const tok of engine.generate(p.prompt, p.gen, { signal })) {
    const marker = tok.id >= 0 ? p.markerIds.get(tok.id) : undefined;
    yield marker !== undefined ? { ...tok, text: marker } : tok;
  }
}

/** The whole response (non-streaming). */
async function complete(engine, p, signal) {
  const lp = [];
  for await (const tok of tokens(engine, p, signal)) {
    events(p, tok.text);
    if (p.r.logprobs && tok.id >= 0) lp.push(logprobEntry(tok));
  }
  if (signal?.aborted) throw abortError('The chat completion');
  let content, calls = [], error = null;
  let reasoning = '';
  if (p.parser) {
    p.parser.finish();
    ({ content, calls, error, reasoning } = p.parser.result());
  } else {
    content = engine.lastResult.text;
  }
  const message = { role: 'assistant', content: calls.length && content === '' ? null : content, refusal: null };
  if (reasoning) message.reasoning_content = reasoning;
  if (calls.length) message.tool_calls = calls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } }));
  const choice = { index: 0, message, logprobs: p.r.logprobs ? { content: lp, refusal: null } : null,
    finish_reason: finishReason(engine.lastResult.stopReason, calls.length) };
  if (error) choice.tool_call_error = error;
  return { id: p.id, object: 'chat.completion', created: p.created, model: p.model, choices: [choice], usage: usage(engine.lastResult) };
}

/** The chunks of a streamed response. */
async function* stream(engine, p, signal) {
  const chunk = (delta, finish = null, logprobs = undefined) => ({
    id: p.id, object: 'chat.completion.chunk', created: p.created, model: p.model,
    choices: [{ index: 0, delta, ...(logprobs !== undefined ? { logprobs } : {}), finish_reason: finish }],
    ...(p.r.includeUsage ? { usage: null } : {}),
  });
  let nCalls = 0;
  const deltas = (evs) => {
    const out = [];
    for (const e of evs) {
      if (e.type === 'content') out.push({ content: e.text });
      else if (e.type === 'reasoning') out.push({ reasoning_content: e.text });
      else if (e.type === 'call') {
        nCalls++;
        out.push({ tool_calls: [{ index: e.index, id: e.id, type: 'function', function: { name: e.name, arguments: '' } }] });
      } else out.push({ tool_calls: [{ index: e.index, function: { arguments: e.text } }] });
    }
    return out;
  };
  yield chunk({ role: 'assistant', content: '' });
  for (const d of deltas(p.early)) yield chunk(d);
  for await (const tok of tokens(engine, p, signal)) {
    const ds = deltas(events(p, tok.text));
    const lp = p.r.logprobs && tok.id >= 0 ? { content: [logprobEntry(tok)], refusal: null } : undefined;
    if (ds.length === 0 && lp) yield chunk({}, null, lp);
    for (let k = 0; k < ds.length; k++) yield chunk(ds[k], null, k === 0 ? lp : undefined); // logprobs on the first
  }
  if (signal?.aborted) throw abortError('The chat completion');
  if (p.parser) for (const d of deltas(p.parser.finish())) yield chunk(d);
  const err = p.parser?.result().error;
  const last = chunk({}, finishReason(engine.lastResult.stopReason, nCalls));
  if (err) last.choices[0].tool_call_error = err;
  yield last;
  if (p.r.includeUsage) {
    yield { id: p.id, object: 'chat.completion.chunk', created: p.created, model: p.model, choices: [], usage: usage(engine.lastResult) };
  }
}

/**
 * OpenAI's chat completion on `engine` (see Engine.chatCompletion in wasmlm.d.ts): resolves to a
 * ChatCompletion, or with request.stream to an async iterable of ChatCompletionChunk.
 * @param {object} engine  an Engine or WorkerEngine
 * @param {object} request  OpenAI's request body (plus top_k, min_p, …)
 * @param {{signal?: AbortSignal}} [options]
 */
export async function chatCompletion(engine, request, { signal } = {}) {
  if (signal?.aborted) throw abortError('The chat completion');
  const p = await prepare(engine, request);
  if (!p.r.stream) return complete(engine, p, signal);
  return stream(engine, p, signal);
}
