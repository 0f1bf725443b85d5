// tool_calls/formats.js — the tool-call syntaxes (tool_calls.js lists them): the texts that open
// a call region in each, the control tokens the parser must see, and which syntax a chat
// template uses, recognised from its text as llama.cpp's common/chat.cpp does (our own code).

/** @typedef {'hermes' | 'llama3' | 'mistral' | 'qwen3-coder' | 'lfm2' | 'gemma4' | 'harmony' | 'generic'} ToolFormat */

/** Per format: the texts that open a call region, and the keys of the arguments. */
export const FORMATS = Object.freeze({
  hermes: { markers: ['<tool_call>'], argsKeys: ['arguments', 'parameters'] },
  llama3: { markers: ['<|python_tag|>', '{"name"', '{ "name"'], argsKeys: ['parameters', 'arguments'] },
  mistral: { markers: ['[TOOL_CALLS]'], argsKeys: ['arguments', 'parameters'] },
  'qwen3-coder': { markers: ['<tool_call>'] },
  lfm2: { markers: ['<|tool_call_start|>'], end: '<|tool_call_end|>' },
  gemma4: { markers: ['<|tool_call>'], end: '<tool_call|>' },
  harmony: { markers: [] },
  generic: { markers: [], argsKeys: ['arguments', 'parameters'] },
});

/** Control tokens whose text the parser must see (their pieces decode to nothing). */
export const MARKER_TOKENS = Object.freeze({ llama3: ['<|python_tag|>'], mistral: ['[TOOL_CALLS]'],
  hermes: ['<tool_call>', '</tool_call>'], // (control tokens in SmolLM3's vocabulary, plain text in Qwen's)
  'qwen3-coder': [], lfm2: ['<|tool_call_start|>', '<|tool_call_end|>'],
  gemma4: ['<|tool_call>', '<tool_call|>', '<|"|>'],
  harmony: ['<|start|>', '<|channel|>', '<|message|>', '<|end|>', '<|constrain|>', '<|call|>', '<|return|>'], generic: [] });

/** The text that opens a call of `format` (what tool_choice 'none' bans), or null. */
export function callMarker(format) {
  return FORMATS[format]?.markers[0] ?? null;
}

/**
 * The tool-call syntax of a chat template, from the text it writes (as llama.cpp's
 * common_chat_templates_apply picks a handler): harmony for gpt-oss's channels, gemma4 for Gemma 4's
 * <|tool_call> (its calls call:NAME{…}), qwen3-coder when it writes <function=…> and
 * <parameter=…> (checked first: it writes <tool_call> too), lfm2 for LFM2's tool markers or its
 * "List of tools: " system line (LFM2.5-1.2B-Instruct's template has only that), hermes when it
 * writes <tool_call>, mistral for [TOOL_CALLS], llama3 for <|python_tag|> or an ipython role,
 * else generic.
 * @param {string|null|undefined} template  Jinja source
 * @returns {ToolFormat}
 */
export function detectToolFormat(template) {
  const t = String(template ?? '');
  if (t.includes('<|channel|>') && t.includes('<|message|>')) return 'harmony';
  if (t.includes('<|tool_call>')) return 'gemma4';
  if (t.includes('<function=') && t.includes('<parameter=')) return 'qwen3-coder';
  if (t.includes('<|tool_call_start|>') || t.includes('<|tool_list_start|>') ||
      (t.includes('List of tools: ') && t.includes('<|im_start|>'))) return 'lfm2';
  if (t.includes('<tool_call>')) return 'hermes';
  if (t.includes('[TOOL_CALLS]')) return 'mistral';
  if (t.includes('<|python_tag|>') || (t.includes('<|start_header_id|>') && t.includes('ipython'))) return 'llama3';
  return 'generic';
}
