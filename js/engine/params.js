// params.js — the caller's options, checked and converted before they reach C: generation
// parameters (GenerateParams in wasmlm.d.ts → wlmjs_gen_params_set field numbers, stop strings,
// logit biases, banned tokens), batch sequences (prompts × nSamples with their seeds), beam
// search and load options, token ids. JS checks names, types and the limits of the lists; value
// ranges are C's to refuse (src/wasmlm.h, one place), and C's messages, which use its field
// names (top_p), are rewritten here to the names the caller used (topP). It touches no wasm
// memory: js/engine/engine.js writes what this file returns.

import { jsError } from '../runtime/errors.js';
import { checkOptions } from '../options.js';

/** Generation parameters: JS name → wlmjs_gen_params_set field number. The list-valued ones
 *  (stop, logitBias, bannedTokens) are appended through their own accessors. */
const PARAM_FIELDS = {
  temperature: 0, topK: 1, topP: 2, repeatPenalty: 3, repeatLastN: 4, seed: 5, maxTokens: 6,
  addBos: 7, minP: 8, typicalP: 9, presencePenalty: 10, frequencyPenalty: 11, samplerOrder: 12,
  nProbs: 13, contextShift: 14, nKeep: 15, cachePrompt: 16, parseSpecial: 17, stateCheckpoint: 19,
};
const LIST_PARAMS = ['stop', 'logitBias', 'bannedTokens'];
/** Structured output (GBNF text or a JSON Schema): converted by js/engine/engine.js, not fields. */
const GRAMMAR_PARAMS = ['grammar', 'jsonSchema', 'jsonSchemaStrict', 'grammarLazy', 'grammarTriggers',
  'grammarArms', 'grammarDisarms', 'grammarStartArmed'];
const MAX_TRIGGERS = 8;      // WLM_MAX_GRAMMAR_TRIGGERS
const MAX_ARMS = 4;          // WLM_MAX_GRAMMAR_ARMS
/** Parameters that are C integers: a finite non-integer is a type error (NaN and ±Infinity go
 *  through to C, which names the field in its refusal). */
const INT_PARAMS = new Set(['topK', 'repeatLastN', 'maxTokens', 'nProbs', 'nKeep', 'stateCheckpoint']);
const BOOL_PARAMS = new Set(['addBos', 'contextShift', 'cachePrompt', 'parseSpecial']);
/** enum wlm_sampler_order by name. */
const SAMPLER_ORDERS = Object.freeze({ llamacpp: 0, runc: 1 });
export const MAX_SEQ = 64;   // WLM_MAX_SEQ: sequences per context (batch size, 2 × beam width)
const MAX_STOP = 8;          // WLM_MAX_STOP_STRINGS
const MAX_STOP_BYTES = 63;   // WLM_MAX_STOP_LEN - 1
const MAX_LOGIT_BIAS = 1024; // WLM_MAX_LOGIT_BIAS
/** Beam search parameters and their defaults (BeamParams in wasmlm.d.ts). */
const BEAM_DEFAULTS = Object.freeze({ width: 4, maxTokens: 64, lengthPenalty: 1, addBos: true,
  grammar: undefined, jsonSchema: undefined, jsonSchemaStrict: undefined });

/**
 * C's names in its error messages → the caller's. Every C field a JS option sets whose range
 * C checks (src/sampling/sampler.c, src/runtime/generate.c, src/runtime/context.c,
 * src/sampling/beam.c); the list-size fields (n_stop, n_logit_bias, n_banned) and `order` are
 * checked in JS first and never reach C's messages.
 */
const C_TO_JS = [
  [/\bbeam width\b/g, 'width'],
  [/\bbeam max_tokens\b/g, 'maxTokens'],
  [/\blogit_bias\[\d+\]\.token (-?\d+)/g, 'logitBias: token $1'],
  [/\blogit_bias\[\d+\]\.bias must be finite or -INFINITY/g, 'logitBias: a bias must be finite or -Infinity'],
  [/\bbanned\[(\d+)\]/g, 'bannedTokens[$1]'],
  [/\btop_k\b/g, 'topK'], [/\btop_p\b/g, 'topP'], [/\bmin_p\b/g, 'minP'], [/\btypical_p\b/g, 'typicalP'],
  [/\brepeat_penalty\b/g, 'repeatPenalty'], [/\brepeat_last_n\b/g, 'repeatLastN'],
  [/\bpresence_penalty\b/g, 'presencePenalty'], [/\bfrequency_penalty\b/g, 'frequencyPenalty'],
  [/\bmax_tokens\b/g, 'maxTokens'], [/\bn_probs\b/g, 'nProbs'], [/\bn_keep\b/g, 'nKeep'],
  [/\bcontext_shift\b/g, 'contextShift'], [/\bcache_prompt\b/g, 'cachePrompt'],
  [/\bgrammar_lazy\b/g, 'grammarLazy'], [/\bcheckpoint must be/g, 'stateCheckpoint must be'], [/\bgrammar trigger (\d+)/g, 'grammarTriggers[$1]'],
  [/\bgrammar arm (\d+)/g, 'grammarArms[$1]'], [/\bgrammar disarm (\d+)/g, 'grammarDisarms[$1]'],
  [/\bgrammar_arms\b/g, 'grammarArms'], [/\bgrammar_disarms\b/g, 'grammarDisarms'],
  [/\bgrammar_start_armed\b/g, 'grammarStartArmed'],
  [/\bparse_special\b/g, 'parseSpecial'], [/\blength_penalty\b/g, 'lengthPenalty'],
  [/\bn_ctx\b/g, 'nCtx'], [/\bn_seq_max\b/g, 'nSeqMax'], [/\bseq_len\b/g, 'seqLen'],
  [/\bgot -?nan\b/g, 'got NaN'], [/\bgot inf\b/g, 'got Infinity'], [/\bgot -inf\b/g, 'got -Infinity'],
];

/** A C error message with its field names as the JS API spells them (top_p → topP). */
export function jsNames(message) {
  let out = message;
  for (const [re, name] of C_TO_JS) out = out.replace(re, name);
  return out;
}

/** A token id given by the caller: any integer that fits an int32 (C checks the vocabulary). */
export function tokenIdArg(v, what) {
  if (!Number.isInteger(v) || v < -(2 ** 31) || v >= 2 ** 31) {
    throw jsError('WLM_ERR_INVALID_ARG', `${what}: ${String(v)} is not a token id (an integer)`);
  }
  return v;
}

/** logitBias as [[id, bias], …] from an object {id: bias}, a Map or an array of pairs. */
function logitBiasEntries(v) {
  if (v == null) return [];
  let entries;
  if (v instanceof Map) {
    entries = [...v];
  } else if (Array.isArray(v)) {
    entries = v.map((e) => {
      if (!Array.isArray(e) || e.length !== 2) {
        throw jsError('WLM_ERR_INVALID_ARG', 'logitBias: an array must hold [tokenId, bias] pairs');
      }
      return e;
    });
  } else if (typeof v === 'object') {
    entries = Object.entries(v).map(([k, b]) => {
      const id = /^-?\d+$/.test(k) ? Number(k) : NaN;
      if (Number.isNaN(id)) throw jsError('WLM_ERR_INVALID_ARG', `logitBias: ${JSON.stringify(k)} is not a token id`);
      return [id, b];
    });
  } else {
    throw jsError('WLM_ERR_INVALID_ARG',
      `logitBias must be an object {tokenId: bias}, a Map or an array of pairs, got ${typeof v}`);
  }
  return entries.map(([id, bias]) => {
    tokenIdArg(id, 'logitBias');
    if (typeof bias !== 'number') {
      throw jsError('WLM_ERR_INVALID_ARG', `logitBias[${id}] must be a number, got ${typeof bias}`);
    }
    return [id, bias];
  });
}

export function randomSeed() {
  // An integer in [1, 2^53): representable exactly as the double wlmjs_gen_params_set takes.
  return Math.floor(Math.random() * (2 ** 53 - 1)) + 1;
}

export function utf8(text) {
  return new TextEncoder().encode(text);
}

/**
 * Checks generation parameters (GenerateParams in wasmlm.d.ts) and converts them for C:
 * {fields: [[fieldNumber, number]], stops: [string], bias: [[id, bias]], banned: [id]}.
 * Unset fields are left out (they keep wlm_gen_params_default's values: the defaults live in C
 * only), except the seed: random unless given. Throws WLM_ERR_INVALID_ARG naming the option.
 */
export function genParamsSpec(params) {
  if (params === null || typeof params !== 'object') {
    throw jsError('WLM_ERR_INVALID_ARG', `generation parameters must be an object, got ${params}`);
  }
  checkOptions('generation parameters', params, [...Object.keys(PARAM_FIELDS), ...LIST_PARAMS, ...GRAMMAR_PARAMS]);
  const values = { seed: randomSeed() };
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && !LIST_PARAMS.includes(k) && !GRAMMAR_PARAMS.includes(k)) values[k] = v;
  }
  const fields = [];
  for (const [key, value] of Object.entries(values)) {
    let v = value;
    if (BOOL_PARAMS.has(key)) {
      v = v ? 1 : 0;
    } else if (key === 'samplerOrder') {
      v = SAMPLER_ORDERS[v];
      if (typeof value !== 'string' || v === undefined) {
        throw jsError('WLM_ERR_INVALID_ARG', `samplerOrder must be one of ` +
          `${Object.keys(SAMPLER_ORDERS).map((o) => `'${o}'`).join(', ')}, got ${JSON.stringify(value)}`);
      }
    } else if (typeof v !== 'number') {
      throw jsError('WLM_ERR_INVALID_ARG', `${key} must be a number, got ${typeof v}`);
    } else if (INT_PARAMS.has(key) && Number.isFinite(v) && !Number.isInteger(v)) {
      throw jsError('WLM_ERR_INVALID_ARG', `${key} must be an integer, got ${v}`);
    }
    if (key === 'seed' && !(Number.isSafeInteger(v) && v >= 0)) {
      throw jsError('WLM_ERR_INVALID_ARG', `seed must be an integer in 0..2^53-1, got ${v}`);
    }
    fields.push([PARAM_FIELDS[key], v]);
  }

  const stops = params.stop == null ? [] : typeof params.stop === 'string' ? [params.stop] : [...params.stop];
  if (stops.length > MAX_STOP) {
    throw jsError('WLM_ERR_INVALID_ARG', `stop: at most ${MAX_STOP} stop strings (got ${stops.length})`);
  }
  for (const s of stops) {
    const n = utf8(String(s)).length;
    if (n < 1 || n > MAX_STOP_BYTES || String(s).includes('\0')) {
      throw jsError('WLM_ERR_INVALID_ARG', `stop string ${JSON.stringify(s)} is ${n} bytes of ` +
        `UTF-8; each must be 1 to ${MAX_STOP_BYTES} bytes, without NUL`);
    }
  }

  const bias = logitBiasEntries(params.logitBias);
  const banned = params.bannedTokens == null ? [] : params.bannedTokens;
  if (typeof banned[Symbol.iterator] !== 'function' || typeof banned === 'string') {
    throw jsError('WLM_ERR_INVALID_ARG', 'bannedTokens must be an array of token ids');
  }
  const bannedIds = Array.from(banned, (id) => tokenIdArg(id, 'bannedTokens'));
  if (bias.length > MAX_LOGIT_BIAS || bannedIds.length > MAX_LOGIT_BIAS) {
    throw jsError('WLM_ERR_INVALID_ARG', `at most ${MAX_LOGIT_BIAS} logitBias entries and ` +
      `${MAX_LOGIT_BIAS} bannedTokens (got ${bias.length} and ${bannedIds.length})`);
  }
  const grammar = grammarSpec(params);
  return { fields, stops: stops.map(String), bias, banned: bannedIds, grammar, ...lazySpec(params, grammar) };
}

/** A list of token ids and words (grammarTriggers, grammarArms, grammarDisarms), checked. */
function markerList(v, name, max) {
  const list = v == null ? [] : v;
  if (!Array.isArray(list)) throw jsError('WLM_ERR_INVALID_ARG', `${name} must be an array of token ids and words`);
  if (list.length > max) throw jsError('WLM_ERR_INVALID_ARG', `${name}: at most ${max} (got ${list.length})`);
  for (const t of list) {
    if (typeof t === 'number') {
      tokenIdArg(t, name);
      if (t < 0) throw jsError('WLM_ERR_INVALID_ARG', `${name}: ${t} is not a token id`);
    } else if (typeof t === 'string') {
      const n = utf8(t).length;
      if (n < 1 || n > MAX_STOP_BYTES || t.includes('\0')) {
        throw jsError('WLM_ERR_INVALID_ARG', `${name}: the word ${JSON.stringify(t)} is ${n} bytes ` +
          `of UTF-8; each must be 1 to ${MAX_STOP_BYTES} bytes, without NUL`);
      }
    } else {
      throw jsError('WLM_ERR_INVALID_ARG', `${name}: ${String(t)} is neither a token id nor a word`);
    }
  }
  return list;
}

/**
 * A lazy grammar's options (grammarLazy, grammarTriggers, and its arming: grammarArms,
 * grammarDisarms, grammarStartArmed; src/wasmlm.h "Lazy grammars"): {lazy: boolean, triggers,
 * arms, disarms: (number|string)[], startArmed: 0 | 1 | 2 (C's grammar_start_armed)} — token
 * ids and words (1..63 bytes of UTF-8).
 */
function lazySpec({ grammarLazy, grammarTriggers, grammarArms, grammarDisarms, grammarStartArmed }, grammar) {
  if (grammarLazy !== undefined && typeof grammarLazy !== 'boolean') {
    throw jsError('WLM_ERR_INVALID_ARG', `grammarLazy must be a boolean, got ${typeof grammarLazy}`);
  }
  if (grammarStartArmed !== undefined && typeof grammarStartArmed !== 'boolean' && grammarStartArmed !== 'lead') {
    throw jsError('WLM_ERR_INVALID_ARG', `grammarStartArmed must be a boolean or 'lead', got ${JSON.stringify(grammarStartArmed)}`);
  }
  const triggers = markerList(grammarTriggers, 'grammarTriggers', MAX_TRIGGERS);
  const arms = markerList(grammarArms, 'grammarArms', MAX_ARMS);
  const disarms = markerList(grammarDisarms, 'grammarDisarms', MAX_ARMS);
  if (grammarLazy && (!grammar || triggers.length === 0)) {
    throw jsError('WLM_ERR_INVALID_ARG', 'grammarLazy needs a grammar (or jsonSchema) and at least one of grammarTriggers');
  }
  if (!grammarLazy && (arms.length || disarms.length || grammarStartArmed)) {
    throw jsError('WLM_ERR_INVALID_ARG', 'grammarArms, grammarDisarms and grammarStartArmed need grammarLazy: true');
  }
  if (disarms.length && !arms.length) {
    throw jsError('WLM_ERR_INVALID_ARG', 'grammarDisarms need at least one of grammarArms');
  }
  return { lazy: !!grammarLazy, triggers, arms, disarms, startArmed: grammarStartArmed === 'lead' ? 2 : grammarStartArmed ? 1 : 0 };
}

/**
 * The structured-output options (grammar, jsonSchema, jsonSchemaStrict) checked: null when
 * neither is given, else {gbnf: string} or {schema: string (JSON text), strict: boolean}.
 */
export function grammarSpec(params) {
  const { grammar, jsonSchema, jsonSchemaStrict } = params;
  if (jsonSchemaStrict !== undefined && typeof jsonSchemaStrict !== 'boolean') {
    throw jsError('WLM_ERR_INVALID_ARG', `jsonSchemaStrict must be a boolean, got ${typeof jsonSchemaStrict}`);
  }
  if (grammar != null && jsonSchema != null) {
    throw jsError('WLM_ERR_INVALID_ARG', 'give either grammar (GBNF) or jsonSchema, not both');
  }
  if (grammar != null) {
    if (typeof grammar !== 'string') {
      throw jsError('WLM_ERR_INVALID_ARG', `grammar must be a string of GBNF, got ${typeof grammar}`);
    }
    return { gbnf: grammar };
  }
  if (jsonSchema != null) {
    let text = jsonSchema;
    if (typeof jsonSchema !== 'string') {
      if (typeof jsonSchema !== 'object' && typeof jsonSchema !== 'boolean') {
        throw jsError('WLM_ERR_INVALID_ARG',
          `jsonSchema must be an object, a boolean or JSON text, got ${typeof jsonSchema}`);
      }
      try {
        text = JSON.stringify(jsonSchema, null, 1);
      } catch (e) {
        throw jsError('WLM_ERR_INVALID_ARG', `jsonSchema cannot be written as JSON: ${e.message}`);
      }
    }
    return { schema: text, strict: jsonSchemaStrict !== false };
  }
  return null;
}

/**
 * The sequences of a batch: for each prompt, nSamples copies (seed, seed + 1, …).
 * Returns [{prompt, promptIndex, sample, params}] with params ready for genParamsSpec.
 */
export function batchSequences(prompts, params) {
  const list = typeof prompts === 'string' ? [prompts] : Array.from(prompts ?? [], String);
  if (list.length === 0) throw jsError('WLM_ERR_INVALID_ARG', 'generateBatch(): no prompts');
  if (Array.isArray(params) && params.length !== list.length) {
    throw jsError('WLM_ERR_INVALID_ARG', `generateBatch(): ${list.length} prompts but ` +
      `${params.length} parameter objects (give one object, or one per prompt)`);
  }
  const seqs = [];
  list.forEach((prompt, promptIndex) => {
    const p = Array.isArray(params) ? params[promptIndex] ?? {} : params;
    if (p === null || typeof p !== 'object') {
      throw jsError('WLM_ERR_INVALID_ARG', `generation parameters must be an object, got ${p}`);
    }
    const { nSamples = 1, ...rest } = p;
    if (!Number.isInteger(nSamples) || nSamples < 1) {
      throw jsError('WLM_ERR_INVALID_ARG', `nSamples must be an integer >= 1, got ${nSamples}`);
    }
    const seed = rest.seed ?? randomSeed();
    if (nSamples > 1 && !(Number.isSafeInteger(seed) && seed >= 0 && seed + nSamples - 1 < 2 ** 53)) {
      throw jsError('WLM_ERR_INVALID_ARG', `seed must be an integer in 0..2^53-nSamples, got ${seed}`);
    }
    for (let sample = 0; sample < nSamples; sample++) {
      seqs.push({ prompt, promptIndex, sample, params: { ...rest, seed: nSamples > 1 ? seed + sample : seed } });
    }
  });
  if (seqs.length > MAX_SEQ) {
    throw jsError('WLM_ERR_INVALID_ARG', `a batch holds at most ${MAX_SEQ} sequences ` +
      `(WLM_MAX_SEQ); this one has ${seqs.length}`);
  }
  return seqs;
}

/** Beam search parameters (BeamParams) with their defaults; checks names and types. */
export function beamParams(params) {
  params ??= {};
  if (typeof params !== 'object') {
    throw jsError('WLM_ERR_INVALID_ARG', `beam search parameters must be an object, got ${params}`);
  }
  checkOptions('beamSearch()', params, 'BeamParams');
  const d = BEAM_DEFAULTS;
  const { width = d.width, maxTokens = d.maxTokens, lengthPenalty = d.lengthPenalty, addBos = d.addBos } = params;
  for (const [key, v] of [['width', width], ['maxTokens', maxTokens]]) {
    if (!Number.isInteger(v)) throw jsError('WLM_ERR_INVALID_ARG', `${key} must be an integer, got ${v}`);
  }
  if (typeof lengthPenalty !== 'number') {
    throw jsError('WLM_ERR_INVALID_ARG', `lengthPenalty must be a number, got ${typeof lengthPenalty}`);
  }
  return { width, maxTokens, lengthPenalty, addBos, grammar: grammarSpec(params) };
}

/** enum wlm_kv_type by name (LoadOptions.kvType). */
const KV_TYPES = Object.freeze({ f32: 0, f16: 1 });

/** load()'s context options (LoadOptions): {nCtx, kvCache, nSeqMax, kvType} as C takes them. */
export function contextParams({ nCtx = 0, kvCache = true, nSeqMax = 1, kvType = 'f16' }) {
  if (!(kvType in KV_TYPES)) {
    throw jsError('WLM_ERR_INVALID_ARG', `load(): kvType must be 'f16' or 'f32', got ${JSON.stringify(kvType)}`);
  }
  if (!Number.isInteger(nCtx) || nCtx < 0) {
    throw jsError('WLM_ERR_INVALID_ARG', `load(): nCtx must be an integer >= 0, got ${nCtx}`);
  }
  if (!Number.isInteger(nSeqMax)) {
    throw jsError('WLM_ERR_INVALID_ARG', `load(): nSeqMax must be an integer, got ${nSeqMax}`);
  }
  return { nCtx, kvCache: !!kvCache, nSeqMax: Math.max(-1, Math.min(nSeqMax, 2 ** 31 - 1)), kvType,
    kvTypeId: KV_TYPES[kvType] };
}
