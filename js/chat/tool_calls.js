// tool_calls.js — tool calls in a model's own syntax: which syntax a chat template uses
// (recognised from the template's text, as llama.cpp's common/chat.cpp does; our own code:
// tool_calls/formats.js), the GBNF grammar that holds a call to that syntax with arguments
// matching each tool's JSON Schema (tool_calls/grammar.js), and an incremental parser that turns
// the model's text into content and tool calls as it streams (ToolCallParser, below: the JSON
// formats' in tool_calls/json_calls.js over tool_calls/json_scan.js, the others' in
// tool_calls/markup_calls.js). It does not render templates (chat.js), generate (engine.js) or shape OpenAI's
// objects (chat_completion.js).
//
// Formats:
//   hermes   Qwen2.5, Qwen3, SmolLM3, Hermes: <tool_call>\n{"name": …, "arguments": {…}}\n</tool_call>
//   llama3   Llama 3.1 / 3.2: {"name": …, "parameters": {…}}, optionally after <|python_tag|>
//   mistral  Mistral (Nemo, Small): [TOOL_CALLS][{"name": …, "arguments": {…}}, …]
//   qwen3-coder  Qwen3.5 / 3.6, Qwen3-Coder: <tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE
//            \n</parameter>\n…</function>\n</tool_call>, each value as text (a string, or JSON
//            for the other types of the tool's schema)
//   lfm2     LFM2 / LFM2.5: <|tool_call_start|>[name(key="v", n=1), …]<|tool_call_end|>, a
//            Python list of calls with keyword arguments (Python literals)
//   gemma4   Gemma 4: <|tool_call>call:NAME{key:<|"|>text<|"|>,n:1}<tool_call|>, one call a
//            region, bare keys and strings between <|"|> marks (its template's own notation)
//   harmony  gpt-oss: a message <|start|>assistant<|channel|>commentary to=functions.NAME
//            <|constrain|>json<|message|>{…}<|call|> (parsed by reasoning.js's ChatOutputParser,
//            with the reasoning of the analysis channel), one call per answer
//   generic  any other template (Gemma 3, Phi-3.5, plain Llama 3): the tools are described in a
//            system message and the whole answer is one JSON object, {"tool_calls": [{"name",
//            "arguments"}, …]} or {"response": "…"} (llama.cpp's generic format, our wording)
//
// Why the parser is JavaScript and not C: it runs per token beside the generation's iterator,
// emitting deltas as soon as they are known; in JS it needs no heap copies across the wasm
// boundary and uses the engine's JSON.parse for the final values, and a malformed text cannot
// corrupt memory — its failure modes (an exception, a hang, a result that depends on how the
// text was split into tokens) are what tests/js/tool_calls_fuzz.test.mjs and
// fuzz/fuzz_tool_calls.mjs hunt for. Every scan is iterative (no recursion on nesting depth)
// and linear in the text held.

import { FORMATS } from './tool_calls/formats.js';
import { JsonCallParser } from './tool_calls/json_calls.js';
import { MarkupCallParser } from './tool_calls/markup_calls.js';

export { MARKER_TOKENS, callMarker, detectToolFormat } from './tool_calls/formats.js';
export { gbnfLiteral, renameRules, renameRule, callSchema, toolGrammar } from './tool_calls/grammar.js';
export { scanValue } from './tool_calls/json_scan.js';

/** @typedef {import('./tool_calls/formats.js').ToolFormat} ToolFormat */

/**
 * Turns a model's output into content and tool calls as it arrives. push(text) and finish()
 * return events, in order: {type: 'content', text}, {type: 'call', index, id, name} (a call
 * begins), {type: 'args', index, text} (a piece of its arguments' JSON text). The events of a
 * text do not depend on how it is split into pushes (tests/js/tool_calls_fuzz.test.mjs checks
 * this): a decision waits until the text decides it, and nothing emitted is taken back.
 * result() is what the events add up to: {content, calls: [{id, name, arguments}], error}
 * (error: null, or why a call region was malformed — its text then went to content from where
 * the failure made the call unusable; a call cut short keeps the arguments it had).
 */
export class ToolCallParser {
  #impl;

  /**
   * @param {ToolFormat} format
   * @param {{makeId?: (index: number) => string, startInCall?: boolean, tools?: object[]}} [options]
   *   startInCall: the text begins inside a call region (a marker the prompt already holds);
   *   tools: the request's tools (OpenAI's form), whose parameter schemas tell qwen3-coder which
   *   values are strings
   */
  constructor(format, options = {}) {
    if (!FORMATS[format]) throw new TypeError(`unknown tool-call format ${JSON.stringify(format)}`);
    this.#impl = format === 'qwen3-coder' || format === 'lfm2' || format === 'gemma4' ? new MarkupCallParser(format, options)
      : new JsonCallParser(format, options);
  }

  /** @param {string} text  @returns {object[]} events */
  push(text) { return this.#impl.push(text); }

  /** The end of the text: decides what waited. @returns {object[]} events */
  finish() { return this.#impl.finish(); }

  /** @returns {{content: string, calls: {id: string, name: string, arguments: string}[], error: string|null}} */
  result() { return this.#impl.result(); }
}
