// requests.js — the server's request bodies other than chat (js/chat/chat_completion.js checks
// those): OpenAI's /v1/completions and /v1/embeddings, field by field, every error naming the
// field (HttpError, with OpenAI's error JSON, errorBody()). The sampling fields of a completion
// are checked by chat_completion.js's checkRequest, so both endpoints accept the same values.

import { checkRequest } from '../chat/chat_completion.js';
import { unknownKeyOf } from '../options.js';

/** An error the server answers with `status` and OpenAI's error object. */
export class HttpError extends Error {
  constructor(status, message, { type, param = null, code = null } = {}) {
    super(message);
    this.name = 'HttpError';
    this.status = status;
    this.type = type ?? (status === 401 ? 'invalid_request_error' : status >= 500 ? 'server_error' : 'invalid_request_error');
    this.param = param;
    this.code = code;
  }
}

/** OpenAI's error JSON: {error: {message, type, param, code}}. */
export function errorBody(err) {
  return { error: { message: err.message, type: err.type, param: err.param ?? null, code: err.code ?? null } };
}

const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

/**
 * The request field an engine or checkRequest message is about ("messages[0].role must be …",
 * "unknown field 'x'", "temperature must be …"), or null.
 */
export function paramOf(message) {
  const unknown = /^unknown field '([^']+)'/.exec(message)?.[1];
  if (unknown) return unknown;
  // js/options.js's refusals by chatCompletion(): a top-level field, or one of an object field
  const where = /^chatCompletion\(\)(?:: ([a-z_.]+))?: unknown field/.exec(message);
  if (where) return (where[1] ? `${where[1]}.` : '') + unknownKeyOf(message);
  const lead = /^([a-z_]+)((?:\[\d+\]|\.[a-z_]+)*)[\s:]/.exec(message);
  return lead && FIELDS.has(lead[1]) ? lead[1] + lead[2] : null;
}

/** Every top-level field of the three request bodies (chat_completion.js's and ours). */
const FIELDS = new Set(['messages', 'model', 'tools', 'tool_choice', 'parallel_tool_calls', 'temperature', 'top_p', 'max_tokens',
  'max_completion_tokens', 'stop', 'seed', 'logprobs', 'top_logprobs', 'response_format', 'stream', 'stream_options', 'n',
  'frequency_penalty', 'presence_penalty', 'logit_bias', 'user', 'top_k', 'min_p', 'typical_p', 'repeat_penalty', 'repeat_last_n',
  'cache_prompt', 'chat_template', 'chat_template_kwargs', 'prompt', 'echo', 'suffix', 'best_of', 'input', 'encoding_format',
  'dimensions', 'functions', 'function_call', 'audio', 'modalities', 'prediction', 'reasoning_effort', 'service_tier', 'store',
  'metadata', 'web_search_options', 'verbosity', 'moderation', 'prompt_cache_key', 'prompt_cache_retention',
  'prompt_cache_options', 'safety_identifier']);

export const bad = (message, param = paramOf(message)) => new HttpError(400, message, { param });

const COMPLETION_FIELDS = ['model', 'prompt', 'max_tokens', 'temperature', 'top_p', 'stop', 'seed', 'stream',
  'stream_options', 'n', 'frequency_penalty', 'presence_penalty', 'logit_bias', 'user', 'echo', 'top_k', 'min_p',
  'typical_p', 'repeat_penalty', 'repeat_last_n', 'cache_prompt'];
const COMPLETION_REFUSED = {
  suffix: 'suffix (insertion) is not supported', best_of: 'best_of is not supported',
  logprobs: 'logprobs is not supported on /v1/completions (use /v1/chat/completions)',
};

/**
 * /v1/completions: {prompt, echo, gen, stream, includeUsage, model}. max_tokens defaults to 16
 * (OpenAI's default for this endpoint).
 */
export function checkCompletion(body) {
  if (!isObject(body)) throw bad('the request body must be a JSON object', null);
  for (const [k, v] of Object.entries(body)) {
    if (v === undefined || v === null) continue;
    if (COMPLETION_REFUSED[k]) throw bad(`${k}: ${COMPLETION_REFUSED[k]}`, k);
    if (!COMPLETION_FIELDS.includes(k)) throw bad(`unknown field '${k}' (supported: ${COMPLETION_FIELDS.join(', ')})`, k);
  }
  let prompt = body.prompt;
  if (Array.isArray(prompt)) {
    if (prompt.length !== 1 || typeof prompt[0] !== 'string') {
      throw bad('prompt: one string is supported (not several prompts, nor token ids)', 'prompt');
    }
    prompt = prompt[0];
  }
  if (typeof prompt !== 'string') throw bad('prompt must be a string', 'prompt');
  if (body.echo != null && typeof body.echo !== 'boolean') throw bad('echo must be a boolean', 'echo');
  const { prompt: _p, echo: _e, ...rest } = body;
  let r;
  try {
    r = checkRequest({ ...rest, messages: [{ role: 'user', content: '' }] });
  } catch (err) {
    throw bad(err.message);
  }
  const gen = { ...r.gen, cachePrompt: r.cachePrompt, parseSpecial: true };
  if (body.max_tokens == null) gen.maxTokens = 16;
  return { prompt, echo: body.echo === true, gen, stream: r.stream, includeUsage: r.includeUsage, model: r.model };
}

const EMBEDDING_FIELDS = ['input', 'model', 'encoding_format', 'dimensions', 'user'];
/** OpenAI's limit on inputs per request. */
export const MAX_EMBEDDING_INPUTS = 2048;

/** /v1/embeddings: {input: string[], base64, model}. */
export function checkEmbedding(body, width) {
  if (!isObject(body)) throw bad('the request body must be a JSON object', null);
  for (const [k, v] of Object.entries(body)) {
    if (v !== undefined && !EMBEDDING_FIELDS.includes(k)) throw bad(`unknown field '${k}' (supported: ${EMBEDDING_FIELDS.join(', ')})`, k);
  }
  const input = typeof body.input === 'string' ? [body.input] : body.input;
  if (!Array.isArray(input) || input.length === 0) throw bad('input must be a string or a non-empty array of strings', 'input');
  if (input.length > MAX_EMBEDDING_INPUTS) throw bad(`input: at most ${MAX_EMBEDDING_INPUTS} strings (got ${input.length})`, 'input');
  input.forEach((s, i) => {
    if (typeof s !== 'string') throw bad(`input[${i}] must be a string (token id arrays are not supported)`, 'input');
  });
  const fmt = body.encoding_format ?? 'float';
  if (fmt !== 'float' && fmt !== 'base64') throw bad(`encoding_format must be 'float' or 'base64', got ${JSON.stringify(fmt)}`, 'encoding_format');
  if (body.dimensions != null && body.dimensions !== width) {
    throw bad(`dimensions: this model's embeddings have ${width} dimensions (others are not supported), got ${JSON.stringify(body.dimensions)}`, 'dimensions');
  }
  if (body.model != null && typeof body.model !== 'string') throw bad('model must be a string', 'model');
  if (body.user != null && typeof body.user !== 'string') throw bad('user must be a string', 'user');
  return { input, base64: fmt === 'base64', model: body.model };
}
