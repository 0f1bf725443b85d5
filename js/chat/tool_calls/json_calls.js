// tool_calls/json_calls.js — the incremental parser of the formats whose calls are JSON (hermes,
// llama3, mistral, generic): content outside the call regions, and each call's name and
// arguments as events as soon as the text decides them (ToolCallParser in tool_calls.js is its
// contract).

import { FORMATS } from './formats.js';
import { WS, MAX_HELD_WS, trimWs, skipWs, scanValue, scanMembers } from './json_scan.js';

/**
 * The JSON formats' parser (hermes, llama3, mistral, generic): ToolCallParser's documentation
 * holds for it.
 */
export class JsonCallParser {
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
