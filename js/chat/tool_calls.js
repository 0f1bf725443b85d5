// tool_calls.js — tool calls in a model's own syntax: which syntax a chat template uses
// (recognised from the template's text, as llama.cpp's common/chat.cpp does; our own code), the
// GBNF grammar that holds a call to that syntax with arguments matching each tool's JSON Schema,
// and an incremental parser that turns the model's text into content and tool calls as it
// streams. It does not render templates (chat.js), generate (engine.js) or shape OpenAI's
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

/** @typedef {'hermes' | 'llama3' | 'mistral' | 'qwen3-coder' | 'lfm2' | 'harmony' | 'generic'} ToolFormat */

/** Per format: the texts that open a call region, and the keys of the arguments. */
const FORMATS = Object.freeze({
  hermes: { markers: ['<tool_call>'], argsKeys: ['arguments', 'parameters'] },
  llama3: { markers: ['<|python_tag|>', '{"name"', '{ "name"'], argsKeys: ['parameters', 'arguments'] },
  mistral: { markers: ['[TOOL_CALLS]'], argsKeys: ['arguments', 'parameters'] },
  'qwen3-coder': { markers: ['<tool_call>'] },
  lfm2: { markers: ['<|tool_call_start|>'], end: '<|tool_call_end|>' },
  harmony: { markers: [] },
  generic: { markers: [], argsKeys: ['arguments', 'parameters'] },
});

/** Control tokens whose text the parser must see (their pieces decode to nothing). */
export const MARKER_TOKENS = Object.freeze({ llama3: ['<|python_tag|>'], mistral: ['[TOOL_CALLS]'],
  hermes: ['<tool_call>', '</tool_call>'], // (control tokens in SmolLM3's vocabulary, plain text in Qwen's)
  'qwen3-coder': [], lfm2: ['<|tool_call_start|>', '<|tool_call_end|>'],
  harmony: ['<|start|>', '<|channel|>', '<|message|>', '<|end|>', '<|constrain|>', '<|call|>', '<|return|>'], generic: [] });

/** The text that opens a call of `format` (what tool_choice 'none' bans), or null. */
export function callMarker(format) {
  return FORMATS[format]?.markers[0] ?? null;
}

/**
 * The tool-call syntax of a chat template, from the text it writes (as llama.cpp's
 * common_chat_templates_apply picks a handler): harmony for gpt-oss's channels, qwen3-coder when it writes <function=…> and
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
  if (t.includes('<function=') && t.includes('<parameter=')) return 'qwen3-coder';
  if (t.includes('<|tool_call_start|>') || t.includes('<|tool_list_start|>') ||
      (t.includes('List of tools: ') && t.includes('<|im_start|>'))) return 'lfm2';
  if (t.includes('<tool_call>')) return 'hermes';
  if (t.includes('[TOOL_CALLS]')) return 'mistral';
  if (t.includes('<|python_tag|>') || (t.includes('<|start_header_id|>') && t.includes('ipython'))) return 'llama3';
  return 'generic';
}

// ---- GBNF ------------------------------------------------------------------------------------

/** A GBNF string literal of `s` (quotes included). */
export function gbnfLiteral(s) {
  let out = '"';
  for (const ch of s) {
    const c = ch.codePointAt(0);
    if (ch === '"' || ch === '\\') out += `\\${ch}`;
    else if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else if (ch === '\t') out += '\\t';
    else if (c < 0x20) out += `\\x${c.toString(16).padStart(2, '0')}`;
    else out += ch;
  }
  return `${out}"`;
}

/**
 * Renames rules in GBNF text: every identifier token that `rename` maps (a function returning
 * the new name, or undefined to keep it), outside string literals, character classes and
 * comments. Used to put several JSON Schema grammars (each starting at `root`) side by side.
 */
export function renameRules(gbnf, rename) {
  let out = '';
  let i = 0;
  const n = gbnf.length;
  const isId = (c) => /[A-Za-z0-9_-]/.test(c);
  while (i < n) {
    const c = gbnf[i];
    if (c === '"' || c === '[') { // a literal or a class, with backslash escapes
      const close = c === '"' ? '"' : ']';
      let j = i + 1;
      while (j < n && gbnf[j] !== close) j += gbnf[j] === '\\' ? 2 : 1;
      out += gbnf.slice(i, j + 1);
      i = j + 1;
    } else if (c === '#') {
      let j = gbnf.indexOf('\n', i);
      if (j < 0) j = n;
      out += gbnf.slice(i, j);
      i = j;
    } else if (isId(c)) {
      let j = i;
      while (j < n && isId(gbnf[j])) j++;
      const word = gbnf.slice(i, j);
      out += rename(word) ?? word;
      i = j;
    } else {
      out += c;
      i++;
    }
  }
  return out;
}

/** renameRules for one rule. */
export function renameRule(gbnf, from, to) {
  return renameRules(gbnf, (w) => (w === from ? to : undefined));
}

/** The rules a GBNF text defines (names before `::=` at the start of a line). */
function definedRules(gbnf) {
  return new Set([...gbnf.matchAll(/^\s*([A-Za-z0-9_-]+)\s*::=/gm)].map((m) => m[1]));
}

/** A tool's `parameters` for the grammar: none → {} only; an object schema with no properties
 *  and no additionalProperties → {} only too (JSON Schema alone would allow any key; a function
 *  that declares no parameters takes none, as OpenAI's strict mode reads it). */
function argumentsSchema(p) {
  if (p === undefined || p === null) return { type: 'object', properties: {}, additionalProperties: false };
  const props = p.properties;
  if (props !== null && typeof props === 'object' && Object.keys(props).length === 0 && p.additionalProperties === undefined) {
    return { ...p, additionalProperties: false };
  }
  return p;
}

/**
 * The JSON Schema of one call object of `format` for each tool (OpenAI's {type: 'function',
 * function: {name, parameters}}): {"name": <const>, "arguments"|"parameters": <parameters>}.
 * (The generic format's; the other formats write the call's frame literally: toolGrammar.)
 */
export function callSchema(format, tools) {
  const key = format === 'llama3' ? 'parameters' : 'arguments';
  const one = (t) => ({
    type: 'object',
    properties: { name: { const: t.function.name }, [key]: argumentsSchema(t.function.parameters) },
    required: ['name', key],
  });
  return tools.length === 1 ? one(tools[0]) : { anyOf: tools.map(one) };
}

/**
 * The grammar of the tool calls of `format`, and how it starts:
 * {grammar, lazy, triggers, prefill}. `convert(schema)` turns a JSON Schema into GBNF (the
 * engine's converter). `mode`: 'auto' (lazy: free text until a trigger) or 'required' (a call
 * from the first token). `markers`: marker text → {id, text} for markers that are one token
 * (text: its piece, '' for a control token). `prefill`: text to append to the prompt (a control
 * marker the grammar cannot write, in required mode).
 * A call is written in the frame the model was trained on, literally ({"name": "f",
 * "arguments": …} — as llama.cpp's chat handlers build theirs), and only the arguments come
 * from the tool's JSON Schema (each tool's rules prefixed t0-, t1-, …). Generic: not lazy (the
 * whole answer is one JSON value), with the {"response"} alternative in 'auto'.
 * @returns {Promise<{grammar: string, lazy: boolean, triggers: (number|string)[], prefill: string}>}
 */
export async function toolGrammar(format, tools, { mode, parallel, markers }, convert) {
  if (format === 'harmony') return harmonyGrammar(tools, { mode }, convert);
  if (format === 'qwen3-coder' || format === 'lfm2') return markupGrammar(format, tools, { mode, parallel, markers }, convert);
  if (format === 'generic') {
    const call = callSchema('generic', tools);
    const calls = { type: 'array', items: call, minItems: 1, ...(parallel ? {} : { maxItems: 1 }) };
    const withCalls = { type: 'object', properties: { tool_calls: calls }, required: ['tool_calls'] };
    const answer = { type: 'object', properties: { response: { type: 'string' } }, required: ['response'] };
    const schema = mode === 'required' ? withCalls : mode === 'none' ? answer : { anyOf: [withCalls, answer] };
    return { grammar: await convert(schema), lazy: false, triggers: [], prefill: '' };
  }
  const key = format === 'llama3' ? 'parameters' : 'arguments';
  const rules = [];
  const alts = [];
  for (const [i, t] of tools.entries()) {
    const g = await convert(argumentsSchema(t.function.parameters));
    const defined = definedRules(g);
    rules.push(renameRules(g, (w) => (defined.has(w) ? `t${i}-${w}` : undefined)).trim());
    alts.push(`${gbnfLiteral(`{"name": "${t.function.name}", "${key}": `)} t${i}-root "}"`);
  }
  const body = `call ::= ${alts.join(' | ')}\n${rules.join('\n')}`;
  const marker = FORMATS[format].markers[0];
  const tok = markers.get(marker);
  const markerText = tok && tok.text === '' ? '' : marker; // a control token writes nothing
  let root;
  const triggers = [];
  let prefill = '';
  if (format === 'hermes') {
    // <tool_call> a control token (SmolLM3): the grammar cannot write it, so one call per
    // answer, the prompt prefilled with it when a call is required
    const several = parallel && markerText !== '';
    root = `root ::= tc${several ? ' ("\\n" tc)*' : ''}\ntc ::= ${gbnfLiteral(`${markerText}\n`)} call "\\n</tool_call>"`;
    if (tok) triggers.push(tok.id);
    triggers.push(marker);
    if (mode === 'required' && markerText === '') prefill = marker;
  } else if (format === 'llama3') {
    root = `root ::= call${parallel ? ' ("\\n" call)*' : ''}`;
    if (tok && tok.text === '') triggers.push(tok.id); // <|python_tag|>: the grammar starts after it
    triggers.push('{"name"', '{ "name"');
  } else { // mistral
    const lead = mode === 'required' && markerText === '' ? '' : markerText;
    root = `root ::= ${lead ? `${gbnfLiteral(lead)} ` : ''}"[" call${parallel ? ' (", " call)*' : ''} "]"`;
    if (tok) triggers.push(tok.id);
    if (markerText) triggers.push(marker);
    if (mode === 'required' && markerText === '') prefill = marker;
  }
  return { grammar: `${root}\n${body}`, lazy: mode !== 'required', triggers: mode === 'required' ? [] : triggers, prefill };
}

/**
 * gpt-oss (harmony): a call is the message `<|start|>assistant<|channel|>commentary
 * to=functions.NAME <|constrain|>json<|message|>{…}<|call|>`. Its frame's markers are text to a
 * grammar (llama.cpp's o200k_harmony fix-up makes <|channel|>, <|message|>, <|start|> and
 * <|constrain|> user-defined tokens, tokenizer/vocab_gguf.c), and <|call|> ends the generation
 * (an end-of-generation token, allowed once the grammar is complete). 'auto': lazy, woken by
 * "to=functions." in a header, then the name, " <|constrain|>json<|message|>" and the arguments'
 * JSON for that tool. 'required': the prompt is prefilled up to the name (one tool: up to
 * <|message|>), so the answer is the call (no analysis first). One call per answer: <|call|>
 * ends it.
 */
async function harmonyGrammar(tools, { mode }, convert) {
  const frame = (name) => `${name} <|constrain|>json<|message|>`;
  if (mode === 'required' && tools.length === 1) {
    return { grammar: await convert(argumentsSchema(tools[0].function.parameters)), lazy: false, triggers: [],
      prefill: `<|channel|>commentary to=functions.${frame(tools[0].function.name)}` };
  }
  const rules = [], alts = [];
  for (const [i, t] of tools.entries()) {
    const g = await convert(argumentsSchema(t.function.parameters));
    const defined = definedRules(g);
    rules.push(renameRules(g, (w) => (defined.has(w) ? `t${i}-${w}` : undefined)).trim());
    alts.push(`${gbnfLiteral(frame(t.function.name))} t${i}-root`);
  }
  const body = `call ::= ${alts.join(' | ')}\n${rules.join('\n')}`;
  if (mode === 'required') {
    return { grammar: `root ::= call\n${body}`, lazy: false, triggers: [], prefill: '<|channel|>commentary to=functions.' };
  }
  return { grammar: `root ::= "to=functions." call\n${body}`, lazy: true, triggers: ['to=functions.'], prefill: '' };
}

/** Whether a parameter's schema asks for a string (its value is then written as it is). */
function wantsString(ps) {
  if (!ps || typeof ps !== 'object') return false;
  if (ps.type === 'string') return true;
  return ps.type === undefined && Array.isArray(ps.enum) && ps.enum.length > 0 && ps.enum.every((e) => typeof e === 'string');
}

/** A tool's declared parameters: [[key, schema, required]] in the schema's order. */
function declaredParams(tool) {
  const s = argumentsSchema(tool.function.parameters);
  const props = s.properties !== null && typeof s.properties === 'object' ? s.properties : {};
  const req = new Set(Array.isArray(s.required) ? s.required : []);
  return Object.entries(props).map(([k, ps]) => [k, ps, req.has(k)]);
}

/**
 * The grammar of the formats whose arguments are not one JSON value: qwen3-coder (each parameter
 * an XML element, its value as text) and lfm2 (a Python call with keyword arguments). Each tool
 * is an alternative written in the template's frame; its parameters come in the schema's order,
 * the required ones always; a string value is free text (XML: without "</", where its closing
 * tag starts; Python: a quoted literal; with minLength / maxLength, that many characters and no
 * escapes — pattern and format are not held), an enum of strings its literals, anything else
 * the JSON of its schema (Python: True/False/None for booleans and null).
 */
async function markupGrammar(format, tools, { mode, parallel, markers }, convert) {
  const xml = format === 'qwen3-coder';
  const rules = [];
  const shared = new Set();
  const alts = [];
  for (const [i, t] of tools.entries()) {
    const items = [];
    for (const [j, [key, ps, required]] of declaredParams(t).entries()) {
      let value;
      if (wantsString(ps) && Array.isArray(ps.enum) && ps.enum.every((e) => typeof e === 'string')) {
        value = `( ${ps.enum.map((e) => gbnfLiteral(xml ? e : JSON.stringify(e))).join(' | ')} )`;
      } else if (wantsString(ps) && (Number.isInteger(ps.maxLength) || Number.isInteger(ps.minLength))) {
        // bounded: characters without escapes, so that the count is the string's length
        const lo = Number.isInteger(ps.minLength) ? Math.max(0, ps.minLength) : 0;
        const n = `{${lo},${Number.isInteger(ps.maxLength) ? Math.max(lo, ps.maxLength) : ''}}`;
        value = xml ? `[^<]${n}` : `( "\\"" [^"\\\\\\n]${n} "\\"" | "'" [^'\\\\\\n]${n} "'" )`;
      } else if (wantsString(ps)) {
        value = xml ? 'xml-text' : 'py-str';
        shared.add(value);
      } else if (!xml && ps && ps.type === 'boolean') {
        value = '( "True" | "False" )';
      } else if (!xml && ps && ps.type === 'null') {
        value = '"None"';
      } else {
        const g = await convert(ps && typeof ps === 'object' ? ps : {});
        const defined = definedRules(g);
        const prefix = `t${i}-p${j}-`;
        rules.push(renameRules(g, (w) => (defined.has(w) ? `${prefix}${w}` : undefined)).trim());
        value = `${prefix}root`;
      }
      const item = xml ? `${gbnfLiteral(`<parameter=${key}>\n`)} ${value} ${gbnfLiteral('\n</parameter>\n')}`
        : `${gbnfLiteral(`${key}=`)} ${value}`;
      items.push({ item, required });
    }
    let args;
    if (xml) {
      args = items.map((x) => (x.required ? x.item : `( ${x.item} )?`)).join(' ');
    } else { // comma-separated: the required ones first, then each optional one after a comma
      const req = items.filter((x) => x.required), opt = items.filter((x) => !x.required);
      const tail = (list) => list.map((x) => `( ", " ${x.item} )?`).join(' ');
      if (req.length) args = [req.map((x) => x.item).join(' ", " '), tail(opt)].filter(Boolean).join(' ');
      else if (opt.length) args = `( ${opt.map((x, k) => [x.item, tail(opt.slice(k + 1))].filter(Boolean).join(' ')).join(' | ')} )?`;
      else args = '';
    }
    alts.push(xml ? `${gbnfLiteral(`<function=${t.function.name}>\n`)} ${args} "</function>"`
      : `${gbnfLiteral(`${t.function.name}(`)} ${args} ")"`);
  }
  if (shared.has('xml-text')) rules.push('xml-text ::= ( [^<] | "<" [^/] )*');
  if (shared.has('py-str')) rules.push('py-str ::= "\\"" ( [^"\\\\\\n] | "\\\\" [^\\n] )* "\\"" | "\'" ( [^\'\\\\\\n] | "\\\\" [^\\n] )* "\'"');
  const body = `call ::= ${alts.join(' | ')}\n${rules.join('\n')}`;
  const marker = FORMATS[format].markers[0];
  const tok = markers.get(marker);
  const markerText = tok && tok.text === '' ? '' : marker; // a control token writes nothing
  const triggers = [];
  let prefill = '';
  let root;
  if (xml) {
    root = `root ::= tc${parallel ? ' ("\\n" tc)*' : ''}\ntc ::= ${gbnfLiteral(`${markerText}\n`)} call "\\n</tool_call>"`;
    if (tok) triggers.push(tok.id);
    triggers.push(marker);
  } else {
    const end = FORMATS.lfm2.end;
    const endTok = markers.get(end);
    const endText = endTok && endTok.text === '' ? '' : end;
    const lead = mode === 'required' && markerText === '' ? '' : markerText;
    root = `root ::= ${gbnfLiteral(`${lead}[`)} call${parallel ? ' (", " call)*' : ''} ${gbnfLiteral(`]${endText}`)}`;
    if (tok) triggers.push(tok.id);
    if (markerText) triggers.push(marker);
    if (mode === 'required' && markerText === '') prefill = marker;
  }
  return { grammar: `${root}\n${body}`, lazy: mode !== 'required', triggers: mode === 'required' ? [] : triggers, prefill };
}

// ---- JSON scanning (validating, iterative) ---------------------------------------------------

const WS = new Set([' ', '\t', '\n', '\r']);
const PARTIAL = Object.freeze({ state: 'partial' });
const err = (at, why) => ({ state: 'error', at, why });

/** White space dropped before a call (or after the last one), at most: a bound, so that text
 *  held while it may precede a call stays short (and streaming linear). */
const MAX_HELD_WS = 64;

/** `s` without its trailing JSON white space, MAX_HELD_WS characters of it at most. */
function trimWs(s) {
  let e = s.length;
  while (e > 0 && s.length - e < MAX_HELD_WS && WS.has(s[e - 1])) e--;
  return s.slice(0, e);
}

function skipWs(s, i) {
  while (i < s.length && WS.has(s[i])) i++;
  return i;
}

/** A JSON string at s[i] === '"': complete (end after the quote), partial or error. `from`
 *  resumes a partial scan (its result's `from`: where the characters not yet checked begin). */
function scanString(s, i, from = i + 1) {
  const n = s.length;
  for (let j = from; j < n; j++) {
    const c = s.charCodeAt(j);
    if (c === 0x22) return { state: 'complete', end: j + 1 };
    if (c < 0x20) return err(j, 'a control character in a string');
    if (c === 0x5c) {
      if (j + 1 >= n) return { state: 'partial', from: j };
      const e = s[j + 1];
      if (e === 'u') {
        for (let k = 2; k < 6; k++) {
          if (j + k >= n) return { state: 'partial', from: j };
          if (!/[0-9a-fA-F]/.test(s[j + k])) return err(j + k, 'a bad \\u escape');
        }
        j += 5;
      } else if ('"\\/bfnrt'.includes(e)) {
        j += 1;
      } else {
        return err(j + 1, 'a bad escape');
      }
    }
  }
  return { state: 'partial', from: n };
}

/** A JSON number at s[i]: complete once a character follows it (at the end: partial). */
function scanNumber(s, i) {
  const n = s.length;
  let j = i;
  if (s[j] === '-') j++;
  if (j >= n) return PARTIAL;
  if (s[j] === '0') j++;
  else if (s[j] >= '1' && s[j] <= '9') while (j < n && s[j] >= '0' && s[j] <= '9') j++;
  else return err(j, 'a bad number');
  if (j < n && s[j] === '.') {
    j++;
    if (j >= n) return PARTIAL;
    if (!(s[j] >= '0' && s[j] <= '9')) return err(j, 'a bad number');
    while (j < n && s[j] >= '0' && s[j] <= '9') j++;
  }
  if (j < n && (s[j] === 'e' || s[j] === 'E')) {
    j++;
    if (j < n && (s[j] === '+' || s[j] === '-')) j++;
    if (j >= n) return PARTIAL;
    if (!(s[j] >= '0' && s[j] <= '9')) return err(j, 'a bad number');
    while (j < n && s[j] >= '0' && s[j] <= '9') j++;
  }
  return j >= n ? PARTIAL : { state: 'complete', end: j };
}

function scanScalar(s, i, from) {
  const c = s[i];
  if (c === '"') return scanString(s, i, from);
  if (c === '-' || (c >= '0' && c <= '9')) return scanNumber(s, i);
  for (const lit of ['true', 'false', 'null']) {
    if (c !== lit[0]) continue;
    const have = s.slice(i, i + lit.length);
    if (lit.startsWith(have)) return have.length < lit.length ? PARTIAL : { state: 'complete', end: i + lit.length };
    let k = 0;
    while (have[k] === lit[k]) k++;
    return err(i + k, 'a bad literal'); // at the first wrong character: never inside a partial
  }
  return err(i, `unexpected ${JSON.stringify(c)}`);
}

/**
 * One JSON value starting at s[i] (no whitespace before it): {state: 'complete', end} |
 * {state: 'partial', ck} (every character so far belongs to it) | {state: 'error', at, why}. A
 * number at the very end is partial (more digits may follow). `ck`, a partial result's
 * checkpoint, resumes the scan when more text has been appended to `s` (then `i` is ignored):
 * streaming scans each character about once instead of re-reading the value from its start.
 * The checkpoint is owned by the scan that gets it (do not resume from one twice).
 */
export function scanValue(s, i, ck = null) {
  const n = s.length;
  const stack = ck ? ck.stack : [];
  let expect = ck ? ck.expect : 'value';
  let from = ck ? ck.from : undefined; // inside a string at ck.i: its characters checked so far
  if (ck) i = ck.i;
  for (;;) {
    if (stack.length) i = skipWs(s, i);
    const at = i; // the state here is the checkpoint of any partial result of this iteration
    const strFrom = from;
    from = undefined;
    const partial = (r) => ({ state: 'partial', ck: { i: at, stack, expect, from: r?.from } });
    if (i >= n) return partial();
    const c = s[i];
    if (expect === 'value' || expect === 'value-or-close') {
      if (expect === 'value-or-close' && c === ']') {
        stack.pop();
        i++;
      } else if (c === '{') {
        stack.push('{');
        i++;
        expect = 'key-or-close';
        continue;
      } else if (c === '[') {
        stack.push('[');
        i++;
        expect = 'value-or-close';
        continue;
      } else {
        const r = scanScalar(s, i, strFrom);
        if (r.state === 'partial') return partial(r);
        if (r.state !== 'complete') return r;
        i = r.end;
      }
      if (!stack.length) return { state: 'complete', end: i };
      expect = 'comma-or-close';
    } else if (expect === 'key-or-close' || expect === 'key') {
      if (expect === 'key-or-close' && c === '}') {
        stack.pop();
        i++;
        if (!stack.length) return { state: 'complete', end: i };
        expect = 'comma-or-close';
        continue;
      }
      if (c !== '"') return err(i, 'expected a key');
      const r = scanString(s, i, strFrom);
      if (r.state === 'partial') return partial(r);
      if (r.state !== 'complete') return r;
      i = skipWs(s, r.end);
      if (i >= n) return partial();
      if (s[i] !== ':') return err(i, "expected ':'");
      i++;
      i = skipWs(s, i);
      expect = 'value';
    } else { // comma-or-close
      const top = stack[stack.length - 1];
      if (c === ',') {
        i++;
        expect = top === '{' ? 'key' : 'value';
      } else if (c === (top === '{' ? '}' : ']')) {
        stack.pop();
        i++;
        if (!stack.length) return { state: 'complete', end: i };
      } else {
        return err(i, `expected ',' or '${top === '{' ? '}' : ']'}'`);
      }
    }
  }
}

/**
 * The top-level members of a JSON object at s[i] === '{': {state, end?, members: [{key,
 * start, end}], ck?} where a member's end is null while its value is partial. `ck` (a partial
 * result's checkpoint) resumes the scan on a longer `s`, as scanValue's; the members array is
 * carried along (the same array, members appended and completed in place).
 */
function scanMembers(s, i, ck = null) {
  const n = s.length;
  const st = ck ?? { i: i + 1, members: [], first: true, m: null, vck: null };
  const { members } = st;
  i = st.i;
  for (;;) {
    if (st.m) { // a member's value in progress
      const v = scanValue(s, st.m.start, st.vck);
      if (v.state === 'partial') { st.vck = v.ck; return { state: 'partial', members, ck: st }; }
      if (v.state !== 'complete') return { ...v, members };
      st.m.end = v.end;
      i = v.end;
      st.m = null;
      st.vck = null;
      st.first = false;
    }
    i = skipWs(s, i);
    const at = i;
    const partial = () => { st.i = at; return { state: 'partial', members, ck: st }; };
    if (i >= n) return partial();
    if (s[i] === '}') return { state: 'complete', end: i + 1, members }; // {} or after a member (a ',' is read with its key)
    if (!st.first) {
      if (s[i] !== ',') return { ...err(i, "expected ',' or '}'"), members };
      i = skipWs(s, i + 1);
      if (i >= n) return partial();
    }
    if (s[i] !== '"') return { ...err(i, 'expected a key'), members };
    const k = scanString(s, i, st.key === i ? st.kfrom : undefined);
    if (k.state === 'partial') { st.key = i; st.kfrom = k.from; return partial(); }
    if (k.state !== 'complete') return { ...k, members };
    const key = JSON.parse(s.slice(i, k.end));
    i = skipWs(s, k.end);
    if (i >= n) return partial();
    if (s[i] !== ':') return { ...err(i, "expected ':'"), members };
    i = skipWs(s, i + 1);
    if (i >= n) return partial(); // (the key is read again when the value begins)
    st.m = { key, start: i, end: null };
    members.push(st.m);
    st.vck = null;
  }
}

// ---- the incremental parser ------------------------------------------------------------------

/**
 * The JSON formats' parser (hermes, llama3, mistral, generic): ToolCallParser's documentation
 * holds for it.
 */
class JsonCallParser {
  #format;
  #markers;
  #argsKeys;
  #makeId;
  #buf = '';         // all the text (appending, V8 flattens it when next read: a copy per push,
                     // a memcpy of a few kB for a real answer, not a re-scan)
  #pos = 0;          // everything before is decided
  #mode = 'text';    // text | start | object | after | raw | generic | done
  #unitStart = 0;    // where the current call's text begins (raw text from here on failure)
  #obj = 0;          // the current call object's '{'
  #call = null;      // {index, id, name, argsEmitted, argsStart}
  #ck = null;        // the checkpoint of the current object's (or generic answer's) scan
  #ws = new Map();   // position → end of the white space run from it seen so far (the text
                     // only grows, so a run stays white space: waiting on white space is linear)
  #content = '';
  #calls = [];
  #error = null;

  /**
   * @param {ToolFormat} format
   * @param {{makeId?: (index: number) => string, startInCall?: boolean}} [options]
   *   startInCall: the text begins inside a call region (a marker the prompt already holds)
   */
  constructor(format, { makeId, startInCall = false } = {}) {
    if (!FORMATS[format]) throw new TypeError(`unknown tool-call format ${JSON.stringify(format)}`);
    this.#format = format;
    this.#markers = FORMATS[format].markers;
    this.#argsKeys = FORMATS[format].argsKeys;
    this.#makeId = makeId ?? ((i) => `call_${i}`);
    if (format === 'generic') this.#mode = 'generic';
    if (startInCall && (format === 'mistral' || format === 'hermes')) { // (the prompt ends with the marker)
      this.#buf = this.#markers[0];
      this.#mode = 'start';
    }
  }

  /** @param {string} text  @returns {object[]} events */
  push(text) {
    this.#buf += text;
    const events = [];
    this.#step(false, events);
    return events;
  }

  /** The end of the text: decides what waited. @returns {object[]} events */
  finish() {
    const events = [];
    this.#step(true, events);
    return events;
  }

  /** @returns {{content: string, calls: {id: string, name: string, arguments: string}[], error: string|null}} */
  result() {
    return { content: this.#content, calls: this.#calls.map((c) => ({ ...c })), error: this.#error };
  }

  #emitContent(text, events) {
    if (!text) return;
    this.#content += text;
    events.push({ type: 'content', text });
  }

  #fail(why, events) {
    this.#error ??= why;
    // nothing of this call went out: its whole text is content; else the rest is
    const from = this.#call && this.#call.name !== null ? this.#pos : this.#unitStart;
    this.#call = null;
    this.#pos = from;
    this.#mode = 'raw';
  }

  /** skipWs on the buffer, resuming a run of white space it already read from `from`. */
  #skipWs(from) {
    const end = skipWs(this.#buf, this.#ws.get(from) ?? from);
    this.#ws.set(from, end);
    return end;
  }

  /** Earliest marker at or after `from`: [index, marker] or null. */
  #findMarker(from) {
    let best = null;
    for (const m of this.#markers) {
      const k = this.#buf.indexOf(m, from);
      if (k >= 0 && (best === null || k < best[0])) best = [k, m];
    }
    return best;
  }

  /** Length of the longest suffix of the buffer that is a proper prefix of a marker. */
  #partialMarker() {
    const b = this.#buf;
    let best = 0;
    for (const m of this.#markers) {
      for (let k = Math.min(m.length - 1, b.length - this.#pos); k > best; k--) {
        if (b.endsWith(m.slice(0, k))) { best = k; break; }
      }
    }
    return best;
  }

  #step(final, events) {
    const b = this.#buf;
    for (let guard = 0; guard < 1e6; guard++) {
      switch (this.#mode) {
        case 'text': {
          const found = this.#findMarker(this.#pos);
          if (found) {
            // whitespace just before a call is the format's, not content
            this.#emitContent(trimWs(b.slice(this.#pos, found[0])), events);
            this.#pos = this.#unitStart = found[0];
            this.#mode = 'start';
            continue;
          }
          if (final) {
            const rest = b.slice(this.#pos);
            this.#emitContent(this.#calls.length ? trimWs(rest) : rest, events);
            this.#pos = b.length;
            this.#mode = 'done';
            return;
          }
          const tail = b.length - this.#partialMarker();
          let end = tail;
          while (end > this.#pos && tail - end < MAX_HELD_WS && WS.has(b[end - 1])) end--; // held: may precede a call
          this.#emitContent(b.slice(this.#pos, end), events);
          this.#pos = end;
          return;
        }
        case 'raw':
          this.#emitContent(b.slice(this.#pos), events);
          this.#pos = b.length;
          if (final) this.#mode = 'done';
          return;
        case 'done':
          return;
        case 'start': {
          let i = this.#pos;
          const want = this.#format === 'llama3' && b[i] === '{' ? '' : this.#markers.find((m) => b.startsWith(m, i)) ?? null;
          if (want === null) { this.#fail('a call marker was expected', events); continue; }
          i = this.#skipWs(i + want.length);
          if (this.#format === 'mistral') {
            if (i >= b.length) { if (final) { this.#fail('the call list is cut short', events); continue; } return; }
            if (b[i] !== '[') { this.#fail("expected '[' after [TOOL_CALLS]", events); continue; }
            i = this.#skipWs(i + 1);
          }
          if (i >= b.length) { if (final) { this.#fail('the call is cut short', events); continue; } return; }
          if (b[i] !== '{') { this.#fail("a call must be a JSON object ('{')", events); continue; }
          this.#pos = this.#obj = i;
          this.#ck = null;
          this.#call = null;
          this.#mode = 'object';
          continue;
        }
        case 'object': {
          const r = scanMembers(b, this.#obj, this.#ck);
          this.#ck = r.state === 'partial' ? r.ck : null;
          const call = this.#call ?? (this.#call = { name: null, argsEmitted: 0, argsStart: null });
          const nameM = r.members.find((m) => m.key === 'name' && m.end !== null);
          if (call.name === null && nameM) {
            const name = JSON.parse(b.slice(nameM.start, nameM.end));
            if (typeof name !== 'string' || name === '') { this.#fail('the call\'s "name" is not a non-empty string', events); continue; }
            call.name = name;
            call.index = this.#calls.length;
            call.id = this.#makeId(call.index);
            this.#calls.push({ id: call.id, name, arguments: '' });
            events.push({ type: 'call', index: call.index, id: call.id, name });
          }
          const argsM = r.members.find((m) => this.#argsKeys.includes(m.key) && m.start !== null);
          if (call.name !== null && argsM) {
            const upto = argsM.end ?? (r.state === 'error' ? r.at : b.length);
            const from = argsM.start + call.argsEmitted;
            if (upto > from) {
              const piece = b.slice(from, upto);
              call.argsEmitted += piece.length;
              this.#calls[call.index].arguments += piece;
              events.push({ type: 'args', index: call.index, text: piece });
            }
          }
          if (r.state === 'error') {
            this.#pos = argsM?.end ?? (call.name !== null ? r.at : this.#obj);
            this.#fail(`the call is not valid JSON (${r.why})`, events);
            continue;
          }
          if (r.state === 'partial') {
            if (!final) return;
            if (call.name === null) { this.#fail('the call is cut short', events); continue; }
            this.#error ??= 'the call is cut short';
            this.#call = null;
            this.#pos = b.length;
            this.#mode = 'done';
            return;
          }
          if (call.name === null) { this.#pos = r.end; this.#fail('the call has no "name"', events); continue; }
          if (!argsM) {
            this.#calls[call.index].arguments = '{}';
            events.push({ type: 'args', index: call.index, text: '{}' });
          } else if (b[argsM.start] !== '{') {
            this.#error ??= 'the arguments are not a JSON object'; // kept as written
          }
          this.#call = null;
          this.#pos = r.end;
          this.#mode = 'after';
          continue;
        }
        case 'after': {
          let i = this.#skipWs(this.#pos);
          if (this.#format === 'hermes') {
            const close = '</tool_call>';
            const have = b.slice(i, i + close.length);
            if (have.length < close.length && close.startsWith(have)) {
              if (!final) return;
              this.#error ??= 'the call is not closed by </tool_call>';
              this.#pos = b.length;
              this.#mode = 'done';
              return;
            }
            if (have !== close) { this.#pos = i; this.#unitStart = i; this.#error ??= 'the call is not closed by </tool_call>'; this.#mode = 'raw'; continue; }
            this.#pos = i + close.length;
            this.#mode = 'text';
            continue;
          }
          if (this.#format === 'mistral') {
            if (i >= b.length) {
              if (!final) return;
              this.#error ??= "the call list is not closed by ']'";
              this.#pos = b.length;
              this.#mode = 'done';
              return;
            }
            if (b[i] === ']') { this.#pos = i + 1; this.#mode = 'text'; continue; }
            if (b[i] !== ',') { this.#pos = i; this.#error ??= "expected ',' or ']' between calls"; this.#mode = 'raw'; continue; }
            i = this.#skipWs(i + 1);
            if (i >= b.length) {
              if (!final) return;
              this.#error ??= 'the call list is cut short';
              this.#pos = b.length;
              this.#mode = 'done';
              return;
            }
            if (b[i] !== '{') { this.#pos = i; this.#error ??= "a call must be a JSON object ('{')"; this.#mode = 'raw'; continue; }
            this.#pos = this.#obj = this.#unitStart = i;
            this.#ck = null;
            this.#mode = 'object';
            continue;
          }
          this.#mode = 'text'; // llama3: more calls start with their own marker
          continue;
        }
        case 'generic': {
          const i = this.#skipWs(this.#pos);
          if (i >= b.length) {
            if (final) { this.#emitContent(b.slice(this.#pos), events); this.#mode = 'done'; }
            return;
          }
          if (b[i] !== '{') { this.#error ??= 'the answer is not a JSON object'; this.#mode = 'raw'; continue; }
          const r = scanValue(b, i, this.#ck);
          this.#ck = r.state === 'partial' ? r.ck : null;
          if (r.state === 'partial') {
            if (!final) return;
            this.#error ??= 'the answer is cut short';
            this.#mode = 'raw';
            continue;
          }
          if (r.state === 'error') { this.#error ??= `the answer is not valid JSON (${r.why})`; this.#mode = 'raw'; continue; }
          const v = JSON.parse(b.slice(i, r.end));
          const list = Array.isArray(v.tool_calls) ? v.tool_calls : v.tool_call && typeof v.tool_call === 'object' ? [v.tool_call] : null;
          const okCall = (c) => c && typeof c === 'object' && typeof c.name === 'string' && c.name !== '';
          if (list && list.length && list.every(okCall)) {
            for (const c of list) {
              const a = c.arguments ?? c.parameters;
              if (a !== undefined && (a === null || typeof a !== 'object' || Array.isArray(a))) {
                this.#error ??= 'the arguments are not a JSON object';
              }
              const index = this.#calls.length;
              const id = this.#makeId(index);
              const args = JSON.stringify(c.arguments ?? c.parameters ?? {});
              this.#calls.push({ id, name: c.name, arguments: args });
              events.push({ type: 'call', index, id, name: c.name }, { type: 'args', index, text: args });
            }
          } else if (typeof v.response === 'string') {
            this.#emitContent(v.response, events);
          } else {
            this.#error ??= 'the answer has neither "tool_calls" nor "response"';
            this.#mode = 'raw';
            continue;
          }
          this.#pos = r.end;
          this.#mode = 'generic-tail';
          continue;
        }
        case 'generic-tail': {
          const i = this.#skipWs(this.#pos);
          if (i < b.length) { this.#error ??= 'text after the JSON answer'; this.#mode = 'raw'; continue; }
          if (final) this.#mode = 'done';
          return;
        }
        default:
          throw new Error(`ToolCallParser: bad mode ${this.#mode}`);
      }
    }
    throw new Error('ToolCallParser: no progress'); // unreachable: every state consumes or waits
  }
}

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
    this.#impl = format === 'qwen3-coder' || format === 'lfm2' ? new MarkupCallParser(format, options)
      : new JsonCallParser(format, options);
  }

  /** @param {string} text  @returns {object[]} events */
  push(text) { return this.#impl.push(text); }

  /** The end of the text: decides what waited. @returns {object[]} events */
  finish() { return this.#impl.finish(); }

  /** @returns {{content: string, calls: {id: string, name: string, arguments: string}[], error: string|null}} */
  result() { return this.#impl.result(); }
}

// ---- the formats whose arguments are not JSON: qwen3-coder (XML) and lfm2 (Python) -----------

/** Names in a call's frame are short: a longer one is not a name (and is not waited for). */
const MAX_NAME = 256;

/**
 * The JSON of an XML parameter's text: one newline after the opening tag and one before the
 * closing tag belong to the frame; a string parameter (by the tool's schema) is the text as it
 * is, any other the JSON it holds, or the text as a string when it holds none (a parameter the
 * schema does not declare: JSON when it parses as a number, boolean, null, array or object).
 */
function xmlValueJson(raw, schema) {
  let v = raw.startsWith('\n') ? raw.slice(1) : raw;
  if (v.endsWith('\n')) v = v.slice(0, -1);
  if (!wantsString(schema)) {
    try {
      const x = JSON.parse(v);
      if (typeof x !== 'string') return JSON.stringify(x);
    } catch { /* not JSON: a string */ }
  }
  return JSON.stringify(v);
}

const PY_WORDS = Object.freeze({ True: 'true', False: 'false', None: 'null', true: 'true', false: 'false', null: 'null' });
const PY_ESCAPES = Object.freeze({ n: '\n', t: '\t', r: '\r', 0: '\0', b: '\b', f: '\f', '\\': '\\', "'": "'", '"': '"' });
const isIdStart = (c) => (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c === '_';
const isIdChar = (c) => isIdStart(c) || (c >= '0' && c <= '9');

/**
 * Scans a Python literal at s[st.i] (strings in either quote with escapes, numbers, True / False
 * / None, lists, dicts) and writes its JSON into st.out, resuming from `st` (the text only
 * grows). Returns 'complete' (st.i after it), 'partial' or an error message. Iterative; each
 * character is read once.
 */
function scanPython(s, st) {
  const n = s.length;
  for (;;) {
    if (st.str) { // inside a string literal
      const q = st.str;
      for (; st.i < n; st.i++) {
        const c = s[st.i];
        if (c === '\\') {
          if (st.i + 1 >= n) return 'partial';
          const e = s[st.i + 1];
          if (e === 'u' || e === 'x') {
            const len = e === 'u' ? 4 : 2;
            if (st.i + 2 + len > n) return 'partial';
            const hex = s.slice(st.i + 2, st.i + 2 + len);
            if (!/^[0-9a-fA-F]+$/.test(hex)) return 'a bad escape in a string';
            st.buf += String.fromCharCode(parseInt(hex, 16));
            st.i += 1 + len;
          } else {
            st.buf += PY_ESCAPES[e] ?? `\\${e}`; // Python keeps an unknown escape as written
            st.i++;
          }
        } else if (c === q.quote) {
          st.out.push(JSON.stringify(st.buf));
          st.str = null;
          st.buf = '';
          st.i++;
          break;
        } else { // (a line break too: LFM2's templates write strings as they are)
          st.buf += c;
        }
      }
      if (st.str) return 'partial';
      if (!st.stack.length) return 'complete';
      continue;
    }
    if (st.i >= n) return 'partial';
    const c = s[st.i];
    if (WS.has(c)) { st.i++; continue; }
    const top = st.stack[st.stack.length - 1];
    if (c === '"' || c === "'") {
      st.str = { quote: c };
      st.buf = '';
      st.i++;
      continue;
    }
    if (c === '[' || c === '{') {
      st.stack.push(c);
      st.out.push(c);
      st.i++;
      continue;
    }
    if (c === ']' || c === '}') {
      if (top !== (c === ']' ? '[' : '{')) return `unexpected ${JSON.stringify(c)}`;
      if (st.out[st.out.length - 1] === ',') st.out.pop(); // Python allows a trailing comma
      st.stack.pop();
      st.out.push(c);
      st.i++;
      if (!st.stack.length) return 'complete';
      continue;
    }
    if (!top) { // a scalar at the top level
      // (a container's separators are below; at the top a ',' or ')' ends the value)
    } else if (c === ',' || c === ':') {
      st.out.push(c);
      st.i++;
      continue;
    }
    if (c === '-' || c === '+' || c === '.' || (c >= '0' && c <= '9')) {
      let j = st.i;
      while (j < n && /[0-9eE+\-._]/.test(s[j])) j++;
      if (j >= n) return 'partial'; // more digits may follow
      const num = s.slice(st.i, j).replaceAll('_', '');
      if (!/^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$/.test(num)) return `a bad number ${JSON.stringify(num.slice(0, 20))}`;
      st.out.push(num);
      st.i = j;
    } else if (isIdStart(c)) {
      let j = st.i;
      while (j < n && isIdChar(s[j])) j++;
      if (j >= n) return 'partial';
      const w = s.slice(st.i, j);
      if (!PY_WORDS[w]) return `${JSON.stringify(w.slice(0, 20))} is not a literal`;
      st.out.push(PY_WORDS[w]);
      st.i = j;
    } else {
      return `unexpected ${JSON.stringify(c)}`;
    }
    if (!st.stack.length) return 'complete';
  }
}

/**
 * The parser of qwen3-coder and lfm2 output, with ToolCallParser's contract: content outside
 * the call regions; in a region, a call event once its name is complete and an args event per
 * complete parameter (the arguments' JSON is built here, '{"key": value' then ', "key": value',
 * closed with '}' by the end of the call), so that no event depends on where the text was split.
 * A region that fails before a call's name is known goes to content whole; after it, the call
 * keeps the parameters it had (closed), the error is set and the rest is content.
 */
class MarkupCallParser {
  #format;
  #marker;
  #makeId;
  #schemas = new Map(); // tool name → its parameters' schemas (qwen3-coder's string values)
  #buf = '';
  #pos = 0;             // everything before is decided
  #mode = 'text';       // text | region | raw | done
  #unitStart = 0;       // where the current region's text begins (its marker)
  #st = null;           // the region's scan state
  #call = null;         // {index, n (parameters emitted)}
  #content = '';
  #calls = [];
  #error = null;

  constructor(format, { makeId, startInCall = false, tools = [] } = {}) {
    this.#format = format;
    this.#marker = FORMATS[format].markers[0];
    this.#makeId = makeId ?? ((i) => `call_${i}`);
    for (const t of Array.isArray(tools) ? tools : []) {
      const f = t?.function;
      if (f && typeof f.name === 'string' && f.parameters && typeof f.parameters.properties === 'object') {
        this.#schemas.set(f.name, f.parameters.properties ?? {});
      }
    }
    if (startInCall) this.#buf = this.#marker;
  }

  push(text) {
    this.#buf += text;
    const events = [];
    this.#step(false, events);
    return events;
  }

  finish() {
    const events = [];
    this.#step(true, events);
    return events;
  }

  result() {
    return { content: this.#content, calls: this.#calls.map((c) => ({ ...c })), error: this.#error };
  }

  #emitContent(text, events) {
    if (!text) return;
    this.#content += text;
    events.push({ type: 'content', text });
  }

  #args(text, events) {
    this.#calls[this.#call.index].arguments += text;
    events.push({ type: 'args', index: this.#call.index, text });
  }

  #beginCall(name, events) {
    const index = this.#calls.length;
    const id = this.#makeId(index);
    this.#calls.push({ id, name, arguments: '' });
    events.push({ type: 'call', index, id, name });
    this.#call = { index, n: 0 };
  }

  #param(key, json, events) {
    this.#args(`${this.#call.n ? ', ' : '{'}${JSON.stringify(key)}: ${json}`, events);
    this.#call.n++;
  }

  /** Closes the current call's arguments. */
  #endCall(events) {
    if (!this.#call) return;
    this.#args(this.#call.n ? '}' : '{}', events);
    this.#call = null;
  }

  /** A malformed region: before a call began its whole text is content, else from `at` on. */
  #fail(why, at, events) {
    this.#error ??= why;
    const started = this.#call !== null || this.#calls.length > this.#st.callsBefore;
    this.#endCall(events);
    this.#pos = started ? at : this.#unitStart;
    this.#mode = 'raw';
  }

  /** The end of the text inside a region: a call in progress keeps what it had. */
  #cutShort(events) {
    if (this.#call === null && this.#calls.length === this.#st.callsBefore) {
      this.#fail('the call is cut short', this.#unitStart, events);
      return;
    }
    this.#error ??= 'the call is cut short';
    this.#endCall(events);
    this.#pos = this.#buf.length;
    this.#mode = 'done';
  }

  /** Length of the longest suffix of the buffer that is a proper prefix of the marker. */
  #partialMarker() {
    const b = this.#buf, m = this.#marker;
    for (let k = Math.min(m.length - 1, b.length - this.#pos); k > 0; k--) if (b.endsWith(m.slice(0, k))) return k;
    return 0;
  }

  #step(final, events) {
    const b = this.#buf;
    for (let guard = 0; guard < 1e6; guard++) {
      if (this.#mode === 'text') {
        const k = b.indexOf(this.#marker, this.#pos);
        if (k >= 0) {
          this.#emitContent(trimWs(b.slice(this.#pos, k)), events); // the format's white space
          this.#unitStart = k;
          this.#pos = k + this.#marker.length;
          this.#st = { phase: 'open', i: this.#pos, callsBefore: this.#calls.length };
          this.#mode = 'region';
          continue;
        }
        if (final) {
          const rest = b.slice(this.#pos);
          this.#emitContent(this.#calls.length ? trimWs(rest) : rest, events);
          this.#pos = b.length;
          this.#mode = 'done';
          return;
        }
        const tail = b.length - this.#partialMarker();
        let end = tail;
        while (end > this.#pos && tail - end < MAX_HELD_WS && WS.has(b[end - 1])) end--; // may precede a call
        this.#emitContent(b.slice(this.#pos, end), events);
        this.#pos = end;
        return;
      }
      if (this.#mode === 'raw') {
        this.#emitContent(b.slice(this.#pos), events);
        this.#pos = b.length;
        if (final) this.#mode = 'done';
        return;
      }
      if (this.#mode === 'done') return;
      const r = this.#format === 'lfm2' ? this.#python(final, events) : this.#xml(final, events);
      if (r === 'wait') return;
    }
    throw new Error('ToolCallParser: no progress'); // unreachable: every state consumes or waits
  }

  /**
   * Whether b at i starts with `lit` ('yes'), could still ('wait': the text ends inside it), or
   * does not ('no').
   */
  #at(i, lit) {
    const have = this.#buf.slice(i, i + lit.length);
    if (have === lit) return 'yes';
    return have.length < lit.length && lit.startsWith(have) ? 'wait' : 'no';
  }

  /** A name of the frame from i up to the character `close`: the name, 'wait' or null. */
  #name(i, close, valid) {
    const b = this.#buf;
    let j = i;
    while (j < b.length && j - i <= MAX_NAME && b[j] !== close && valid(b[j], j === i)) j++;
    if (j >= b.length && j - i <= MAX_NAME) return 'wait';
    if (b[j] !== close || j === i) return null;
    return b.slice(i, j);
  }

  /** qwen3-coder: <function=NAME> (<parameter=KEY>VALUE</parameter>)* </function> </tool_call> */
  #xml(final, events) {
    const b = this.#buf, st = this.#st;
    const wait = () => {
      if (!final) return 'wait';
      this.#cutShort(events);
      return 'next';
    };
    if (st.phase === 'open' || st.phase === 'params' || st.phase === 'close') st.i = skipWs(b, st.i);
    if (st.phase === 'open') {
      const a = this.#at(st.i, '<function=');
      if (a === 'wait') return wait();
      if (a === 'no') { this.#fail('expected <function=NAME> after <tool_call>', st.i, events); return 'next'; }
      const from = st.i + '<function='.length;
      const name = this.#name(from, '>', (c) => c !== '<' && c !== '\n');
      if (name === 'wait') return wait();
      if (name === null) { this.#fail('the function name is not closed by >', st.i, events); return 'next'; }
      this.#beginCall(name, events);
      st.i = from + name.length + 1;
      st.phase = 'params';
      return 'next';
    }
    if (st.phase === 'params') {
      const endFn = this.#at(st.i, '</function>');
      if (endFn === 'yes') {
        this.#endCall(events);
        st.i += '</function>'.length;
        st.phase = 'close';
        return 'next';
      }
      const p = this.#at(st.i, '<parameter=');
      if (p === 'wait' || endFn === 'wait') return wait();
      if (p === 'no') { this.#fail('expected <parameter=KEY> or </function>', st.i, events); return 'next'; }
      const from = st.i + '<parameter='.length;
      const key = this.#name(from, '>', (c) => c !== '<' && c !== '\n');
      if (key === 'wait') return wait();
      if (key === null) { this.#fail('the parameter name is not closed by >', st.i, events); return 'next'; }
      st.key = key;
      st.vfrom = st.search = from + key.length + 1;
      st.phase = 'value';
      return 'next';
    }
    if (st.phase === 'value') {
      const close = '</parameter>';
      const k = b.indexOf(close, st.search);
      if (k < 0) {
        st.search = Math.max(st.search, b.length - close.length + 1); // each character searched once
        return wait();
      }
      const name = this.#calls[this.#call.index].name;
      this.#param(st.key, xmlValueJson(b.slice(st.vfrom, k), this.#schemas.get(name)?.[st.key]), events);
      st.i = k + close.length;
      st.phase = 'params';
      return 'next';
    }
    // close: </tool_call>
    const a = this.#at(st.i, '</tool_call>');
    if (a === 'wait') {
      if (!final) return 'wait';
      this.#error ??= 'the call is not closed by </tool_call>';
      this.#pos = b.length;
      this.#mode = 'done';
      return 'next';
    }
    if (a === 'no') {
      this.#error ??= 'the call is not closed by </tool_call>';
      this.#pos = st.i;
      this.#mode = 'raw';
      return 'next';
    }
    this.#pos = st.i + '</tool_call>'.length;
    this.#mode = 'text';
    return 'next';
  }

  /** lfm2: [ name(key=value, …), … ] then <|tool_call_end|> (or the end of the text) */
  #python(final, events) {
    const b = this.#buf, st = this.#st;
    const wait = () => {
      if (!final) return 'wait';
      this.#cutShort(events);
      return 'next';
    };
    if (st.phase !== 'value') st.i = skipWs(b, st.i);
    if (st.i >= b.length && st.phase !== 'value' && st.phase !== 'end') return wait();
    switch (st.phase) {
      case 'open':
        if (b[st.i] !== '[') { this.#fail("expected '[' after <|tool_call_start|>", st.i, events); return 'next'; }
        st.i++;
        st.phase = 'item';
        return 'next';
      case 'item': case 'first': {
        if (b[st.i] === ']' && st.phase === 'first') { st.i++; st.phase = 'end'; return 'next'; }
        const name = this.#name(st.i, '(', (c, first) => (first ? isIdStart(c) : isIdChar(c) || c === '.' || c === '-'));
        if (name === 'wait') return wait();
        if (name === null) { this.#fail('expected a call: name(arguments)', st.i, events); return 'next'; }
        this.#beginCall(name, events);
        st.i += name.length + 1;
        st.phase = 'arg';
        return 'next';
      }
      case 'arg': case 'arg-next':
        if (b[st.i] === ')' && st.phase === 'arg') { this.#endCall(events); st.i++; st.phase = 'after-call'; return 'next'; }
        {
          const key = this.#name(st.i, '=', (c, first) => (first ? isIdStart(c) : isIdChar(c)));
          if (key === 'wait') return wait();
          if (key === null) { this.#fail('expected a keyword argument: key=value', st.i, events); return 'next'; }
          st.key = key;
          st.i += key.length + 1;
          st.py = { i: skipWs(b, st.i), stack: [], out: [], str: null, buf: '' };
          st.phase = 'value';
          return 'next';
        }
      case 'value': {
        const r = scanPython(b, st.py);
        if (r === 'partial') return wait();
        if (r !== 'complete') { this.#fail(`a bad argument value (${r})`, st.py.i, events); return 'next'; }
        const json = st.py.out.join('');
        try {
          JSON.parse(json);
        } catch {
          this.#fail('a bad argument value (not expressible as JSON)', st.i, events);
          return 'next';
        }
        this.#param(st.key, json, events);
        st.i = st.py.i;
        st.py = null;
        st.phase = 'after-arg';
        return 'next';
      }
      case 'after-arg':
        if (b[st.i] === ',') { st.i++; st.phase = 'arg-next'; return 'next'; }
        if (b[st.i] === ')') { this.#endCall(events); st.i++; st.phase = 'after-call'; return 'next'; }
        this.#fail("expected ',' or ')' after an argument", st.i, events);
        return 'next';
      case 'after-call':
        if (b[st.i] === ',') { st.i++; st.phase = 'item'; return 'next'; }
        if (b[st.i] === ']') { st.i++; st.phase = 'end'; return 'next'; }
        this.#fail("expected ',' or ']' after a call", st.i, events);
        return 'next';
      default: { // end: <|tool_call_end|>, or the end of the text (a grammar cannot write a control token)
        const end = FORMATS.lfm2.end;
        const a = this.#at(st.i, end);
        if (a === 'yes') { this.#pos = st.i + end.length; this.#mode = 'text'; return 'next'; }
        if (a === 'wait') {
          if (!final) return 'wait';
          this.#pos = b.length;
          this.#mode = 'done';
          return 'next';
        }
        this.#error ??= `the call list is not closed by ${end}`;
        this.#pos = st.i;
        this.#mode = 'text';
        return 'next';
      }
    }
  }
}
