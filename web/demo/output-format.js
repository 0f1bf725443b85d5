// web/demo/output-format.js — the "Output format" control: free text, JSON (any object), JSON
// Schema or a GBNF grammar, with an example of each to start from. It turns the choice into
// generation parameters: generate() and beamSearch() take `jsonSchema` / `grammar`, chat()
// OpenAI's `responseFormat` (json_object / json_schema) or `grammar`. The engine does the
// constraining and reports a bad schema or grammar with its line and column.

import { $ } from './state.js';

export const EXAMPLE_SCHEMA = JSON.stringify({
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 20 },
    age: { type: 'integer' },
    mood: { enum: ['happy', 'sad', 'sleepy'] },
    friends: { type: 'array', items: { type: 'string', maxLength: 12 }, maxItems: 3 },
  },
  required: ['name', 'age', 'mood'],
}, null, 2);

export const EXAMPLE_GRAMMAR = [
  '# an answer, then a short reason (GBNF, as llama.cpp)',
  'root   ::= answer ", because " reason "."',
  'answer ::= "Yes" | "No" | "Maybe"',
  'reason ::= [a-z ]{3,40}',
  '',
].join('\n');

const HINTS = {
  text: 'The model writes freely.',
  json: 'The output is a JSON object (any keys).',
  'json-schema': 'The output is JSON valid for this schema (type, properties, required, items, enum, const, anyOf, ' +
    'min/maxLength, min/maxItems, pattern, $ref). Unsupported keywords are reported, not ignored.',
  grammar: 'The output follows this GBNF grammar (llama.cpp\'s syntax; the start rule is root).',
};

/** The selected format: 'text' | 'json' | 'json-schema' | 'grammar'. */
export function outputFormat() {
  return $('output-format').value;
}

/** Shows the text area for a schema or a grammar (with its example when it holds none). */
export function syncOutputFormat() {
  const format = outputFormat();
  const area = $('format-text');
  const wrap = $('format-text-field');
  const custom = format === 'json-schema' || format === 'grammar';
  wrap.hidden = !custom;
  if (custom) {
    const example = format === 'json-schema' ? EXAMPLE_SCHEMA : EXAMPLE_GRAMMAR;
    const other = format === 'json-schema' ? EXAMPLE_GRAMMAR : EXAMPLE_SCHEMA;
    if (area.value.trim() === '' || area.value === other) area.value = example;
    $('format-text-label').textContent = format === 'json-schema' ? 'JSON Schema' : 'Grammar (GBNF)';
  }
  $('format-hint').textContent = HINTS[format] ?? '';
}

/**
 * The parameters of the chosen format, for `mode` 'generate' (generate / beamSearch) or 'chat':
 * {params, label} (label for the applied line, '' for free text).
 */
export function formatParams(mode) {
  const format = outputFormat();
  const text = $('format-text').value;
  switch (format) {
    case 'json':
      return { params: mode === 'chat' ? { responseFormat: { type: 'json_object' } } : { jsonSchema: { type: 'object' } },
        label: 'format JSON' };
    case 'json-schema':
      // The schema goes as text, so that a mistake is reported at its line and column.
      return { params: mode === 'chat'
        ? { responseFormat: { type: 'json_schema', json_schema: { name: 'page', schema: text } } }
        : { jsonSchema: text }, label: 'format JSON Schema' };
    case 'grammar':
      return { params: { grammar: text }, label: 'format grammar' };
    default:
      return { params: {}, label: '' };
  }
}
