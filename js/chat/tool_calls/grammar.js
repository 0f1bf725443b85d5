// tool_calls/grammar.js — the GBNF grammar that holds a model's answer to a tool call in its
// format's syntax (formats.js), with arguments matching each tool's JSON Schema (converted by
// the caller's schema-to-GBNF function): forced ('required', a named tool) or lazy ('auto':
// free text until a trigger, src/sampling/grammar_lazy.c), and the rule renaming that lets
// several tools' grammars share one text.

import { FORMATS } from './formats.js';

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
  if (format === 'qwen3-coder' || format === 'lfm2' || format === 'gemma4') return markupGrammar(format, tools, { mode, parallel, markers }, convert);
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
export function wantsString(ps) {
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
 * an XML element, its value as text), lfm2 (a Python call with keyword arguments) and gemma4
 * (call:NAME{key:value,…}). Each tool is an alternative written in the template's frame; its
 * parameters come in the schema's order (gemma4: by name, as its template sorts them), the
 * required ones always; a string value is free text (XML: without "</", where its closing tag
 * starts; Python: a quoted literal; gemma4: between <|"|> marks, without "<" — or in JSON's
 * quotes where <|"|> is a control token, which a grammar cannot write; with minLength /
 * maxLength, that many characters and no escapes — pattern and format are not held), an enum of
 * strings its literals, anything else the JSON of its schema (Python: True/False/None for
 * booleans and null). gemma4's calls are a region each: parallel calls repeat the region (one
 * call where its marker is a control token).
 */
async function markupGrammar(format, tools, { mode, parallel, markers }, convert) {
  const xml = format === 'qwen3-coder';
  const gemma = format === 'gemma4';
  const quoteTok = markers.get('<|"|>');
  const q = gemma && !(quoteTok && quoteTok.text === '') ? '<|"|>' : '"'; // gemma4's string quote
  const quoted = (e) => (q === '"' ? JSON.stringify(e) : `${q}${e}${q}`);
  const rules = [];
  const shared = new Set();
  const alts = [];
  for (const [i, t] of tools.entries()) {
    const items = [];
    const params = declaredParams(t);
    if (gemma) params.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    for (const [j, [key, ps, required]] of params.entries()) {
      let value;
      if (wantsString(ps) && Array.isArray(ps.enum) && ps.enum.every((e) => typeof e === 'string')) {
        value = `( ${ps.enum.map((e) => gbnfLiteral(xml ? e : gemma ? quoted(e) : JSON.stringify(e))).join(' | ')} )`;
      } else if (wantsString(ps) && (Number.isInteger(ps.maxLength) || Number.isInteger(ps.minLength))) {
        // bounded: characters without escapes, so that the count is the string's length
        const lo = Number.isInteger(ps.minLength) ? Math.max(0, ps.minLength) : 0;
        const n = `{${lo},${Number.isInteger(ps.maxLength) ? Math.max(lo, ps.maxLength) : ''}}`;
        if (gemma) value = q === '"' ? `"\\"" [^"\\\\\\n]${n} "\\""` : `${gbnfLiteral(q)} [^<]${n} ${gbnfLiteral(q)}`;
        else value = xml ? `[^<]${n}` : `( "\\"" [^"\\\\\\n]${n} "\\"" | "'" [^'\\\\\\n]${n} "'" )`;
      } else if (wantsString(ps)) {
        value = xml ? 'xml-text' : gemma ? (q === '"' ? 'json-str' : 'g4-str') : 'py-str';
        shared.add(value);
      } else if (format === 'lfm2' && ps && ps.type === 'boolean') {
        value = '( "True" | "False" )';
      } else if (format === 'lfm2' && ps && ps.type === 'null') {
        value = '"None"';
      } else {
        const g = await convert(ps && typeof ps === 'object' ? ps : {});
        const defined = definedRules(g);
        const prefix = `t${i}-p${j}-`;
        rules.push(renameRules(g, (w) => (defined.has(w) ? `${prefix}${w}` : undefined)).trim());
        value = `${prefix}root`;
      }
      const item = xml ? `${gbnfLiteral(`<parameter=${key}>\n`)} ${value} ${gbnfLiteral('\n</parameter>\n')}`
        : `${gbnfLiteral(`${key}${gemma ? ':' : '='}`)} ${value}`;
      items.push({ item, required });
    }
    let args;
    if (xml) {
      args = items.map((x) => (x.required ? x.item : `( ${x.item} )?`)).join(' ');
    } else { // comma-separated: the required ones first, then each optional one after a comma
      const req = items.filter((x) => x.required), opt = items.filter((x) => !x.required);
      const comma = gemma ? '","' : '", "';
      const tail = (list) => list.map((x) => `( ${comma} ${x.item} )?`).join(' ');
      if (req.length) args = [req.map((x) => x.item).join(` ${comma} `), tail(opt)].filter(Boolean).join(' ');
      else if (opt.length) args = `( ${opt.map((x, k) => [x.item, tail(opt.slice(k + 1))].filter(Boolean).join(' ')).join(' | ')} )?`;
      else args = '';
    }
    alts.push(xml ? `${gbnfLiteral(`<function=${t.function.name}>\n`)} ${args} "</function>"`
      : gemma ? `${gbnfLiteral(`call:${t.function.name}{`)} ${args} "}"`
        : `${gbnfLiteral(`${t.function.name}(`)} ${args} ")"`);
  }
  if (shared.has('xml-text')) rules.push('xml-text ::= ( [^<] | "<" [^/] )*');
  if (shared.has('g4-str')) rules.push(`g4-str ::= ${gbnfLiteral(q)} [^<]* ${gbnfLiteral(q)}`);
  if (shared.has('json-str')) rules.push('json-str ::= "\\"" ( [^"\\\\\\x7F\\x00-\\x1F] | "\\\\" ( ["\\\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\\""');
  if (shared.has('py-str')) rules.push('py-str ::= "\\"" ( [^"\\\\\\n] | "\\\\" [^\\n] )* "\\"" | "\'" ( [^\'\\\\\\n] | "\\\\" [^\\n] )* "\'"');
  const body = `call ::= ${alts.join(' | ')}\n${rules.join('\n')}`;
  const marker = FORMATS[format].markers[0];
  const tok = markers.get(marker);
  const markerText = tok && tok.text === '' ? '' : marker; // a control token writes nothing
  const triggers = [];
  let prefill = '';
  let root;
  if (gemma) { // a region per call: <|tool_call>call:NAME{…}<tool_call|>
    const end = FORMATS.gemma4.end;
    const endTok = markers.get(end);
    const endText = endTok && endTok.text === '' ? '' : end;
    const lead = mode === 'required' && markerText === '' ? '' : markerText;
    const more = parallel && markerText !== '' && endText !== '';
    const region = (open) => [open && gbnfLiteral(open), 'call', endText && gbnfLiteral(endText)].filter(Boolean).join(' ');
    root = `root ::= ${region(lead)}${more ? ` ( ${region(markerText)} )*` : ''}`;
    if (tok) triggers.push(tok.id);
    if (markerText) triggers.push(marker);
    if (mode === 'required' && markerText === '') prefill = marker;
  } else if (xml) {
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
