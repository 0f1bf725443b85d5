// options.js — the one check every options object of the public API goes through: a key the
// callee does not know is refused, naming it, the keys it knows, and a near miss ("did you mean
// nCtx?"), so that a typo ({ nctx: 64 }, { thread: 1 }) is an error, not a silent default.
// The known keys of each options interface live here, under the interface's name in
// js/wasmlm.d.ts (js/chat/chat_completion.d.ts, js/models/cache.d.ts, js/server/server.d.ts,
// js/ai_sdk/index.d.ts, js/prompt_api/index.d.ts); tests/js/options.test.mjs holds the two to
// each other. A key whose value is undefined counts as absent (as for an omitted optional
// member), except where a caller passes keepUndefined. Not checked here: the Prompt API's own
// dictionaries (WebIDL ignores unknown members: js/prompt_api/index.js).

import { jsError } from './runtime/errors.js';

const ENGINE = ['wasm', 'simd', 'build', 'dotForm', 'readAhead', 'backend', 'gpu', 'gpuSubgroups',
  'gpuWeights', 'memory64', 'threads'];
const GENERATE = ['temperature', 'topK', 'topP', 'minP', 'typicalP', 'repeatPenalty', 'repeatLastN',
  'presencePenalty', 'frequencyPenalty', 'logitBias', 'bannedTokens', 'samplerOrder', 'nProbs', 'seed',
  'maxTokens', 'stop', 'addBos', 'contextShift', 'nKeep', 'cachePrompt', 'stateCheckpoint', 'parseSpecial',
  'grammar', 'jsonSchema', 'jsonSchemaStrict', 'grammarLazy', 'grammarTriggers', 'grammarArms',
  'grammarDisarms', 'grammarStartArmed', 'draft', 'images'];

/** Known keys by options interface (the name it has in the .d.ts files). */
export const KNOWN = Object.freeze({
  // js/wasmlm.d.ts
  EngineOptions: ENGINE,
  WorkerEngineOptions: [...ENGINE, 'worker', 'warmup'],
  LoadOptions: ['model', 'tokenizer', 'mmproj', 'nCtx', 'kvCache', 'nSeqMax', 'kvType', 'backend', 'onProgress', 'signal'],
  DraftLoadOptions: ['model', 'tokenizer', 'nCtx', 'onProgress', 'signal'],
  DraftParams: ['model', 'maxTokens', 'ngram', 'pMin', 'nCtx'],
  GenerateParams: GENERATE,
  ChatParams: [...GENERATE, 'chatTemplate', 'templateVariables', 'addGenerationPrompt', 'responseFormat'],
  BatchParams: [...GENERATE, 'nSamples'],
  BeamParams: ['width', 'maxTokens', 'lengthPenalty', 'addBos', 'grammar', 'jsonSchema', 'jsonSchemaStrict'],
  BeamSearchOptions: ['signal', 'onStep'],
  CallOptions: ['signal'],
  CompleteOptions: ['signal', 'onToken'],
  OpenBatchOptions: ['maxSequences', 'signal'],
  TokenizeOptions: ['bos', 'parseSpecial'],
  EmbedOptions: ['pooling', 'normalize', 'signal'],
  GrammarOptions: ['strict'],
  RenderChatTemplateOptions: ['bosToken', 'eosToken', 'addGenerationPrompt', 'variables'],
  ResponseFormat: ['type', 'json_schema'],
  ResponseFormatJsonSchema: ['name', 'description', 'schema', 'strict'],
  // js/models/cache.d.ts
  DownloadOptions: ['onProgress', 'signal', 'sha256', 'size', 'httpCache', 'as'],
  StoreOptions: ['backend', 'segmentBytes', 'syncWrites', 'requestBytes', 'crossOrigin', 'retries', 'stallMs', 'maxRestarts',
    'backoffMs', 'backoffMaxMs', 'storage', 'caches', 'locks', 'navigator', 'fetch'],
  StoreDownloadOptions: ['sha256', 'size', 'id', 'name', 'onProgress', 'signal'],
  ModelCacheOptions: ['caches'],
  CacheMatchOptions: ['sha256'],
  CachePutOptions: ['sha256', 'name'],
  FetchModelOptions: ['cache', 'sha256', 'size', 'onProgress', 'signal'],
  StoreLookupOptions: ['store', 'cache'],
  PersistOptions: ['reason'],
  // js/prompt_api/index.d.ts (configure(): ours; the spec's own dictionaries are not checked)
  ConfigureOptions: [...ENGINE, 'model', 'engine', 'worker', 'load', 'params'],
  // js/ai_sdk/index.d.ts
  WasmlmModelOptions: ['engine', 'load', 'modelId'],
  // js/server/server.d.ts
  ServerOptions: ['engine', 'embedEngine', 'modelId', 'embedModelId', 'apiKey', 'parallel', 'queue', 'maxBody',
    'drainMs', 'gatherMs', 'remoteImages'],
});

/** Levenshtein distance of a and b, at most `cap` + 1. */
function distance(a, b, cap) {
  if (Math.abs(a.length - b.length) > cap) return cap + 1;
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) {
      cur[j] = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    prev = cur;
  }
  return prev[b.length];
}

/** The known key `key` most likely misspells, or null: the same letters but for case and
 *  underscores (nctx → nCtx, max_tokens → maxTokens), else within 2 edits (fewer for keys
 *  under 5 letters: at most (length - 1) / 2). */
export function nearMiss(key, known) {
  const fold = (s) => s.toLowerCase().replace(/_/g, '');
  const folded = known.find((k) => fold(k) === fold(key));
  if (folded) return folded;
  const cap = Math.min(2, Math.floor((key.length - 1) / 2)); // 'b' is no near miss of 'a'
  let best = null;
  let bestD = cap + 1;
  for (const k of known) {
    const d = distance(key.toLowerCase(), k.toLowerCase(), cap);
    if (d < bestD) { best = k; bestD = d; }
  }
  return best;
}

/** Keys that belong to another call: named in the refusal when no known key is a near miss. */
const ELSEWHERE = Object.freeze({ nSamples: 'generateBatch()' });

/** The message for `key` unknown to `where`: the one format of every refusal. */
export function unknownKeyMessage(where, key, known, noun = 'option') {
  const hint = nearMiss(key, known);
  const other = !hint && Object.hasOwn(ELSEWHERE, key) && ELSEWHERE[key] !== where ? ELSEWHERE[key] : null;
  return `${where}: unknown ${noun} "${key}"${hint ? ` (did you mean "${hint}"?)` : ''}` +
    `${other ? ` (${key} is a ${other} parameter)` : ''} (known: ${known.join(', ')})`;
}

/** The key an unknownKeyMessage() names, or null (for callers that report the key apart). */
export function unknownKeyOf(message) {
  return /: unknown \w+ "([^"]+)"/.exec(String(message))?.[1] ?? null;
}

/**
 * Throws when `obj` has a key not in `known` (a list, or the name of one in KNOWN). `where`
 * names the call ('load()'); `noun` what a key is ('option', 'field'); `error` builds the error
 * (default: WasmlmError WLM_ERR_INVALID_ARG); `keepUndefined` refuses unknown keys even when
 * their value is undefined. null / undefined / non-objects pass (each caller checks the type).
 * Returns `obj`.
 */
export function checkOptions(where, obj, known, { noun = 'option', error, keepUndefined = false } = {}) {
  if (obj === null || typeof obj !== 'object') return obj;
  const list = typeof known === 'string' ? KNOWN[known] : known;
  for (const key of Object.keys(obj)) {
    if (list.includes(key) || (!keepUndefined && obj[key] === undefined)) continue;
    const message = unknownKeyMessage(where, key, list, noun);
    throw error ? error(message, key) : jsError('WLM_ERR_INVALID_ARG', message);
  }
  return obj;
}

/** chat()'s parameters (ChatParams) and options (CallOptions); returns the options. */
export function checkChat(params, options) {
  checkOptions('chat()', params, 'ChatParams');
  return checkOptions('chat()', options, 'CallOptions') ?? {};
}

/** A batch's parameters (BatchParams, or one per prompt) and its options (`optionsKnown`,
 *  when given); returns the options. */
export function checkBatch(where, params, options, optionsKnown) {
  for (const p of Array.isArray(params) ? params : [params]) checkOptions(where, p, 'BatchParams');
  return optionsKnown ? checkOptions(where, options, optionsKnown) ?? {} : {};
}

/** The async iterator `start()` returns, started on the first next(): the checks `start` runs
 *  first throw from iterating, as a generator's other errors do, not from the call. */
export async function* lazily(start) {
  yield* start();
}

/** `start()`'s promise, or a rejected one when it throws (its checks) synchronously. */
export function rejecting(start) {
  try {
    return start();
  } catch (e) {
    return Promise.reject(e);
  }
}
