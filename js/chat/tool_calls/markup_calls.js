// tool_calls/markup_calls.js — the incremental parser of the formats whose arguments are not
// JSON: qwen3-coder (XML parameters, each value text or JSON by the tool's schema), lfm2 (a
// Python list of calls with keyword arguments) and gemma4 (call:NAME{key:value,…}, strings
// between <|"|> marks), with ToolCallParser's contract (tool_calls.js).

import { FORMATS } from './formats.js';
import { wantsString } from './grammar.js';
import { WS, MAX_HELD_WS, trimWs, skipWs, scanNumber, scanString } from './json_scan.js';

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

const GEMMA_QUOTE = '<|"|>';
// (None: Python's null, which the published template's format_argument writes as it is)
const GEMMA_WORDS = Object.freeze({ true: 'true', false: 'false', null: 'null', None: 'null' });
const isKeyChar = (c) => isIdChar(c) || c === '.' || c === '-';

/**
 * Scans a Gemma 4 value at s[st.i] — the object of a call's arguments, as Gemma 4's chat template
 * writes them (its format_argument macro, read from llama.cpp's models/templates/gemma4.jinja):
 * {key:value,…} with bare keys, strings between <|"|> marks taken as they are (no escapes),
 * numbers, true / false / null (or None), [lists] — and writes its JSON into st.out, resuming from `st`
 * (the text only grows). Also taken: keys and strings in JSON's double quotes (with JSON's
 * escapes; what a grammar writes where <|"|> is a control token it cannot write), and a trailing
 * comma. Returns 'complete' (st.i after the value), 'partial' or an error message. Iterative;
 * each character is read once (a <|"|> cut by the end of the text is held, unread).
 */
function scanGemma(s, st) {
  const n = s.length;
  const closeString = () => { // (a key, where one was expected)
    st.out.push(JSON.stringify(st.buf));
    st.str = null;
    st.buf = '';
    st.key = false;
  };
  for (;;) {
    if (st.str === 'mark') { // inside <|"|>…<|"|>
      const k = s.indexOf(GEMMA_QUOTE, st.i);
      if (k < 0) {
        let keep = 0;
        for (let m = Math.min(GEMMA_QUOTE.length - 1, n - st.i); m > 0; m--) if (s.endsWith(GEMMA_QUOTE.slice(0, m))) { keep = m; break; }
        st.buf += s.slice(st.i, n - keep);
        st.i = n - keep;
        return 'partial';
      }
      st.buf += s.slice(st.i, k);
      st.i = k + GEMMA_QUOTE.length;
      closeString();
    } else if (st.str === 'json') { // inside "…": json_scan.js's scanner; its text is the JSON
      const r = scanString(s, st.strAt, st.strFrom);
      if (r.state === 'partial') { st.strFrom = r.from; return 'partial'; }
      if (r.state === 'error') return r.why;
      st.out.push(s.slice(st.strAt, r.end));
      st.i = r.end;
      st.str = null;
      st.key = false;
    } else {
      if (st.i >= n) return 'partial';
      const c = s[st.i];
      if (WS.has(c)) { st.i++; continue; }
      const top = st.stack[st.stack.length - 1];
      if (!top && c !== '{') return "expected '{' (the arguments)";
      if (c === '<') { // <|"|> opens a string (a key too)
        if (n - st.i < GEMMA_QUOTE.length) return GEMMA_QUOTE.startsWith(s.slice(st.i)) ? 'partial' : `unexpected ${JSON.stringify(c)}`;
        if (!s.startsWith(GEMMA_QUOTE, st.i)) return `unexpected ${JSON.stringify(c)}`;
        st.str = 'mark';
        st.buf = '';
        st.i += GEMMA_QUOTE.length;
        continue;
      }
      if (c === '"') {
        st.str = 'json';
        st.strAt = st.i;
        st.strFrom = st.i + 1;
        continue;
      }
      if (st.key) { // an object's key: a bare name up to ':'
        if (c === '}' && st.out[st.out.length - 1] !== ':') { /* (an empty object or a trailing comma: below) */ } else {
          let j = st.i;
          while (j < n && j - st.i <= MAX_NAME && isKeyChar(s[j])) j++;
          if (j >= n && j - st.i <= MAX_NAME) return 'partial';
          if (j === st.i || s[j] !== ':') return 'expected a key and \':\'';
          st.out.push(JSON.stringify(s.slice(st.i, j)));
          st.i = j;
          st.key = false;
          continue;
        }
      }
      if (c === ':') {
        if (top !== '{') return "unexpected ':'";
        st.out.push(':');
        st.key = false;
        st.i++;
        continue;
      }
      if (c === '{' || c === '[') {
        st.stack.push(c);
        st.out.push(c);
        st.key = c === '{';
        st.i++;
        continue;
      }
      if (c === '}' || c === ']') {
        if (top !== (c === '}' ? '{' : '[')) return `unexpected ${JSON.stringify(c)}`;
        if (st.out[st.out.length - 1] === ',') st.out.pop(); // a trailing comma
        st.stack.pop();
        st.out.push(c);
        st.key = false;
        st.i++;
        if (!st.stack.length) return 'complete';
        continue;
      }
      if (c === ',') {
        st.out.push(',');
        st.key = top === '{';
        st.i++;
        continue;
      }
      if (c === '-' || (c >= '0' && c <= '9')) {
        const r = scanNumber(s, st.i); // (at the end of the text: partial, more digits may follow)
        if (r.state === 'partial') return 'partial';
        if (r.state === 'error') return r.why;
        st.out.push(s.slice(st.i, r.end));
        st.i = r.end;
        continue;
      }
      if (isIdStart(c)) {
        let j = st.i;
        while (j < n && isIdChar(s[j])) j++;
        if (j >= n) return 'partial';
        const w = s.slice(st.i, j);
        if (!GEMMA_WORDS[w]) return `${JSON.stringify(w.slice(0, 20))} is not a literal`;
        st.out.push(GEMMA_WORDS[w]);
        st.i = j;
        continue;
      }
      return `unexpected ${JSON.stringify(c)}`;
    }
  }
}

/**
 * The parser of qwen3-coder, lfm2 and gemma4 output, with ToolCallParser's contract: content outside
 * the call regions; in a region, a call event once its name is complete and an args event per
 * complete parameter (the arguments' JSON is built here, '{"key": value' then ', "key": value',
 * closed with '}' by the end of the call), so that no event depends on where the text was split.
 * A region that fails before a call's name is known goes to content whole; after it, the call
 * keeps the parameters it had (closed), the error is set and the rest is content.
 */
export class MarkupCallParser {
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

  /** The text ends inside a region: wait for more, or (at the end) cut the call short. */
  #waitOrCut(final, events) {
    if (!final) return 'wait';
    this.#cutShort(events);
    return 'next';
  }

  /**
   * At st.i, a region's end mark (lfm2's <|tool_call_end|>, gemma4's <tool_call|>), or the end of
   * the text (a grammar cannot write a control token): back to text after it; anything else is
   * an error, and text from there.
   */
  #closeRegion(end, final) {
    const st = this.#st;
    const a = this.#at(st.i, end);
    if (a === 'yes') { this.#pos = st.i + end.length; this.#mode = 'text'; return 'next'; }
    if (a === 'wait') {
      if (!final) return 'wait';
      this.#pos = this.#buf.length;
      this.#mode = 'done';
      return 'next';
    }
    this.#error ??= end === FORMATS.lfm2.end ? `the call list is not closed by ${end}` : `the call is not closed by ${end}`;
    this.#pos = st.i;
    this.#mode = 'text';
    return 'next';
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
      const r = this.#format === 'lfm2' ? this.#python(final, events)
        : this.#format === 'gemma4' ? this.#gemma(final, events) : this.#xml(final, events);
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
    const wait = () => this.#waitOrCut(final, events);
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
    const wait = () => this.#waitOrCut(final, events);
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
      default: // end: <|tool_call_end|>, or the end of the text
        return this.#closeRegion(FORMATS.lfm2.end, final);
    }
  }

  /**
   * gemma4: call:NAME{key:value,…} then <tool_call|> (or the end of the text); one call a region.
   * The arguments come as one args event when their object is complete (its keys in the order
   * written, each value's JSON as JSON.stringify writes it).
   */
  #gemma(final, events) {
    const b = this.#buf, st = this.#st;
    const wait = () => this.#waitOrCut(final, events);
    if (st.phase !== 'value') st.i = skipWs(b, st.i);
    if (st.i >= b.length && st.phase !== 'end') return wait();
    if (st.phase === 'open') {
      const a = this.#at(st.i, 'call:');
      if (a === 'wait') return wait();
      if (a === 'no') { this.#fail('expected call:NAME{…} after <|tool_call>', st.i, events); return 'next'; }
      const from = st.i + 'call:'.length;
      const name = this.#name(from, '{', (c, first) => (first ? isIdStart(c) : isKeyChar(c)));
      if (name === 'wait') return wait();
      if (name === null) { this.#fail('expected call:NAME{…} after <|tool_call>', st.i, events); return 'next'; }
      this.#beginCall(name, events);
      st.g = { i: from + name.length, stack: [], out: [], str: null, buf: '', key: false };
      st.phase = 'value';
      return 'next';
    }
    if (st.phase === 'value') {
      const r = scanGemma(b, st.g);
      if (r === 'partial') return wait();
      if (r !== 'complete') { this.#fail(`bad arguments (${r})`, st.g.i, events); return 'next'; }
      let args;
      try {
        args = JSON.parse(st.g.out.join(''));
      } catch {
        this.#fail('bad arguments (not expressible as JSON)', st.i, events);
        return 'next';
      }
      for (const [k, v] of Object.entries(args)) this.#param(k, JSON.stringify(v), events);
      this.#endCall(events);
      st.i = st.g.i;
      st.g = null;
      st.phase = 'end';
      return 'next';
    }
    return this.#closeRegion(FORMATS.gemma4.end, final); // end: <tool_call|>, or the end of the text
  }
}
