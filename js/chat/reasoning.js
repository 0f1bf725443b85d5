// reasoning.js — a thinking model's reasoning told apart from its answer, as the text streams:
// which reasoning syntax a chat template uses (from the text it writes), and incremental parsers
// that turn the model's output into reasoning, content and (with tools) tool calls. Used by
// chat() (engine.js, worker_engine.js: each token's `reasoning` and `content`) and
// chatCompletion() (chat_completion.js: OpenAI-style `reasoning_content`). It does not render
// templates (chat.js) or read tool calls of the other formats (tool_calls.js, whose parser gets
// the content part only, so a call written inside the reasoning is never a call).
//
// Formats:
//   think    Qwen3, Qwen3.5, SmolLM3, DeepSeek-R1 distills: the answer opens with
//            <think>\n…\n</think>\n\n, or the generation prompt already ends with an open
//            <think>\n (Qwen3.5 with thinking on) and the answer starts inside it. The reasoning
//            is the text between the tags, its leading and trailing whitespace dropped; the
//            whitespace right after </think> is dropped too. A <think> later in the answer is
//            content.
//   gemma4   Gemma 4: the think format with its own marks, <|channel>thought\n…<channel|> (its
//            template turns thinking on with enable_thinking, writing <|think|> into the system
//            turn; off, the generation prompt ends with an empty <|channel>thought\n<channel|>)
//   harmony  gpt-oss (OpenAI's harmony format): messages <|channel|>C<|message|>BODY<|end|>,
//            each after the first opened by <|start|>assistant; the analysis channel is the
//            reasoning, final (and commentary without a recipient: a preamble) the content, and
//            a message with the recipient to=functions.NAME (in its header, e.g.
//            <|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{…}<|call|>)
//            a tool call whose body is the arguments' JSON. <|call|> and <|return|> end the answer.
//
// Both parsers emit the same events as ToolCallParser ({type: 'content', text}, {type: 'call',
// index, id, name}, {type: 'args', index, text}) plus {type: 'reasoning', text}, and their
// events do not depend on how the text is split into pushes (tests/js/reasoning_fuzz.test.mjs).

import { ToolCallParser } from './tool_calls.js';

/** @typedef {'think' | 'gemma4' | 'harmony'} ReasoningFormat */

/** The formats whose reasoning is the text between two marks (ThinkParser): the opening and the
 *  closing mark, and the control token the opening one begins with. */
const THINK_MARKS = Object.freeze({
  think: Object.freeze({ open: '<think>', close: '</think>', token: '<think>' }),
  gemma4: Object.freeze({ open: '<|channel>thought', close: '<channel|>', token: '<|channel>' }),
});

/** Per format, the marker texts the parser must see (control tokens whose pieces decode to ''
 *  are given these texts by the caller). */
export const REASONING_MARKERS = Object.freeze({
  think: Object.freeze(['<think>', '</think>']),
  gemma4: Object.freeze(['<|channel>', '<channel|>']),
  harmony: Object.freeze(['<|start|>', '<|channel|>', '<|message|>', '<|end|>', '<|constrain|>', '<|call|>', '<|return|>']),
});

/**
 * The reasoning syntax of a chat template: harmony when it writes <|channel|> and <|message|>,
 * gemma4 when it writes <|channel> and <channel|>, think when it writes </think> (Qwen3's and DeepSeek-R1's templates cut earlier reasoning at
 * it, SmolLM3's and Qwen3.5's write empty <think>\n\n</think> blocks), else null (no reasoning).
 * @param {string|null|undefined} template  Jinja source
 * @returns {ReasoningFormat|null}
 */
export function detectReasoningFormat(template) {
  const t = String(template ?? '');
  if (t.includes('<|channel|>') && t.includes('<|message|>')) return 'harmony';
  if (t.includes('<|channel>') && t.includes('<channel|>')) return 'gemma4';
  if (t.includes('</think>')) return 'think';
  return null;
}

/**
 * Whether a rendered prompt leaves the reasoning open (the answer starts in it): it ends with
 * the format's opening mark (think: <think>) and white space. false for the other formats.
 * @param {string} prompt
 * @param {ReasoningFormat|null} [format='think']
 */
export function promptOpensThinking(prompt, format = 'think') {
  const marks = THINK_MARKS[format];
  if (!marks) return false;
  const p = String(prompt).trimEnd();
  return p.endsWith(marks.open);
}

/**
 * How a tool call's lazy grammar is armed for a reasoning format (GenerateParams.grammarArms,
 * src/wasmlm.h "Arming"), so that a call marker written inside the reasoning does not wake it
 * (the parser reads such a call as reasoning; llama.cpp anchors its trigger patterns after
 * </think> for the same reason). think, the prompt ending in an open <think> (`open`): armed by
 * </think>. think otherwise (the model may open <think> itself): starts armed, a <think> as the
 * answer's first non-whitespace disarms (a later one is content, as the parser reads it) and
 * </think> arms again. harmony: armed by <|channel|>, disarmed by <|message|> (a call's
 * recipient is in a message's header, never in its text: an analysis message's words are not a
 * call). `markers`: marker text → {id} for those that are one token; their ids are added to the
 * words (a control token's piece is empty, so only its id is ever seen).
 * @param {ReasoningFormat|null} format
 * @param {{open?: boolean, markers?: Map<string, {id: number}>}} [options]
 * @returns {{grammarArms?: (number|string)[], grammarDisarms?: (number|string)[], grammarStartArmed?: 'lead'}}
 */
export function lazyArming(format, { open = false, markers = new Map() } = {}) {
  const both = (t) => (markers.has(t) ? [markers.get(t).id, t] : [t]);
  const marks = THINK_MARKS[format];
  if (marks) { // (gemma4: the same with its marks; its opening one begins with a control token)
    return open ? { grammarArms: both(marks.close) }
      : { grammarArms: both(marks.close), grammarDisarms: both(marks.token), grammarStartArmed: 'lead' };
  }
  if (format === 'harmony') return { grammarArms: both('<|channel|>'), grammarDisarms: both('<|message|>') };
  return {};
}

const WS = /\s/;
/** The length of the longest suffix of `s` that is a proper prefix of one of `words`. */
function partialSuffix(s, words) {
  let best = 0;
  for (const w of words) {
    for (let n = Math.min(w.length - 1, s.length); n > best; n--) {
      if (s.endsWith(w.slice(0, n))) { best = n; break; }
    }
  }
  return best;
}
function trailingWs(s) {
  let i = s.length;
  while (i > 0 && WS.test(s[i - 1])) i--;
  return s.length - i;
}

/** Adds an event, merging it into the previous one of the same text type. */
function emit(events, type, text) {
  if (!text) return;
  const last = events[events.length - 1];
  if (last && last.type === type && (type === 'content' || type === 'reasoning')) last.text += text;
  else events.push({ type, text });
}

/**
 * <think>…</think> (or another format's marks, THINK_MARKS) apart from the answer. push(text) / finish() return events {type:
 * 'reasoning' | 'content', text}; with a ToolCallParser (`calls`), the content goes through it
 * and its events come out instead of the content ones.
 */
class ThinkParser {
  #state;          // 'start' (before the answer shows whether it opens with <think>), 'reasoning', 'content'
  #buf = '';       // held text
  #lead = '';      // 'start': the whitespace before it
  #fresh = true;   // at the start of the reasoning, or right after </think>: whitespace is dropped
  #reasoning = '';
  #content = '';
  #calls;
  #open;           // the marks
  #close;

  constructor({ open = false, calls = null, marks = THINK_MARKS.think } = {}) {
    this.#state = open ? 'reasoning' : 'start';
    this.#calls = calls;
    this.#open = marks.open;
    this.#close = marks.close;
  }

  #out(events, type, text) {
    if (!text) return;
    if (type === 'reasoning') { this.#reasoning += text; emit(events, type, text); return; }
    this.#content += text;
    if (this.#calls) for (const e of this.#calls.push(text)) events.push(e);
    else emit(events, type, text);
  }

  push(text, final = false) {
    const events = [];
    this.#buf += text;
    for (;;) {
      const b = this.#buf;
      if (this.#state === 'start') {
        const t = b.trimStart();
        this.#lead += b.slice(0, b.length - t.length); // (kept apart: each push trims only new text)
        this.#buf = t;
        if (t.startsWith(this.#open)) { this.#state = 'reasoning'; this.#buf = t.slice(this.#open.length); this.#lead = ''; continue; }
        if (!final && this.#open.startsWith(t)) break; // (whitespace, or a part of the tag)
        this.#state = 'content';
        this.#fresh = false;
        this.#buf = this.#lead + t;
        this.#lead = '';
        continue;
      }
      if (this.#state === 'reasoning') {
        if (this.#fresh) {
          const t = b.trimStart();
          if (t === '' && !final) { this.#buf = ''; break; }
          this.#buf = t;
          this.#fresh = false;
          continue;
        }
        const i = b.indexOf(this.#close);
        if (i >= 0) {
          this.#out(events, 'reasoning', b.slice(0, i).trimEnd());
          this.#state = 'content';
          this.#buf = b.slice(i + this.#close.length);
          this.#fresh = true;
          continue;
        }
        if (final) { this.#out(events, 'reasoning', b.trimEnd()); this.#buf = ''; break; }
        const part = partialSuffix(b, [this.#close]);
        const hold = part + trailingWs(b.slice(0, b.length - part)); // (a part of the tag, and the whitespace before it)
        this.#out(events, 'reasoning', b.slice(0, b.length - hold));
        this.#buf = b.slice(b.length - hold);
        break;
      }
      // content
      if (this.#fresh) {
        const t = b.trimStart();
        if (t === '' && !final) { this.#buf = ''; break; }
        this.#fresh = false;
        this.#buf = t;
        continue;
      }
      this.#out(events, 'content', b);
      this.#buf = '';
      break;
    }
    if (final && this.#calls) for (const e of this.#calls.finish()) events.push(e);
    return events;
  }

  finish() { return this.push('', true); }

  result() {
    if (this.#calls) return { ...this.#calls.result(), reasoning: this.#reasoning };
    return { content: this.#content, calls: [], error: null, reasoning: this.#reasoning };
  }
}

const H = Object.freeze({ start: '<|start|>', channel: '<|channel|>', message: '<|message|>', end: '<|end|>',
  call: '<|call|>', ret: '<|return|>', constrain: '<|constrain|>' });
const BODY_ENDS = [H.end, H.call, H.ret, H.start];
const MAX_HEADER = 512;

/**
 * gpt-oss's harmony messages: the analysis channel as reasoning, final / commentary as content,
 * a message to=functions.NAME as a tool call (only with `tools`; otherwise its body is content).
 * A header longer than MAX_HEADER characters without <|message|> is not a header: its text is
 * content. result(): {content, reasoning, calls: [{id, name, arguments}], error}.
 */
class HarmonyParser {
  #state = 'header'; // 'header' (the prompt ends with <|start|>assistant), 'body', 'between', 'done'
  #buf = '';
  #kind = 'content'; // the body's: 'reasoning', 'content', 'call'
  #args = '';
  #reasoning = '';
  #content = '';
  #calls = [];
  #error = null;
  #tools;
  #makeId;

  constructor({ tools = false, makeId = (i) => `call_${i}` } = {}) {
    this.#tools = tools;
    this.#makeId = makeId;
  }

  #out(events, type, text) {
    if (!text) return;
    if (type === 'reasoning') this.#reasoning += text;
    else if (type === 'content') this.#content += text;
    else { // call arguments
      this.#args += text;
      this.#calls[this.#calls.length - 1].arguments += text;
      events.push({ type: 'args', index: this.#calls.length - 1, text });
      return;
    }
    emit(events, type, text);
  }

  #openMessage(header, events) {
    const channel = /<\|channel\|>\s*([^\s<]+)/.exec(header)?.[1] ?? '';
    const to = /(?:^|\s|>)to=([^\s<]+)/.exec(header)?.[1] ?? '';
    if (this.#tools && to.startsWith('functions.') && to.length > 10) {
      const index = this.#calls.length;
      const id = this.#makeId(index);
      const name = to.slice(10);
      this.#calls.push({ id, name, arguments: '' });
      this.#args = '';
      this.#kind = 'call';
      events.push({ type: 'call', index, id, name });
    } else {
      this.#kind = channel === 'analysis' ? 'reasoning' : 'content';
    }
  }

  #closeMessage() {
    if (this.#kind !== 'call') return;
    const a = this.#args.trim();
    try {
      const v = JSON.parse(a);
      if (v === null || typeof v !== 'object' || Array.isArray(v)) this.#error ??= 'the arguments are not a JSON object';
    } catch {
      this.#error ??= `the arguments of ${this.#calls[this.#calls.length - 1].name} are not valid JSON`;
    }
  }

  push(text, final = false) {
    const events = [];
    this.#buf += text;
    for (;;) {
      const b = this.#buf;
      if (this.#state === 'header') {
        const i = b.indexOf(H.message);
        if (i >= 0 && i <= MAX_HEADER) {
          this.#openMessage(b.slice(0, i), events);
          this.#buf = b.slice(i + H.message.length);
          this.#state = 'body';
          continue;
        }
        if ((b.length > MAX_HEADER || final) && b !== '') { // not a header: plain text
          this.#kind = 'content';
          this.#state = 'body';
          continue;
        }
        break;
      }
      if (this.#state === 'body') {
        let at = -1, end = '';
        for (const m of BODY_ENDS) {
          const i = b.indexOf(m);
          if (i >= 0 && (at < 0 || i < at)) { at = i; end = m; }
        }
        if (at >= 0) {
          this.#out(events, this.#kind === 'call' ? 'args' : this.#kind, b.slice(0, at));
          this.#closeMessage();
          this.#buf = b.slice(at + end.length);
          this.#state = end === H.start ? 'header' : end === H.end ? 'between' : 'done';
          continue;
        }
        const hold = final ? 0 : partialSuffix(b, BODY_ENDS);
        this.#out(events, this.#kind === 'call' ? 'args' : this.#kind, b.slice(0, b.length - hold));
        this.#buf = b.slice(b.length - hold);
        if (final) {
          if (this.#kind === 'call') this.#closeMessage();
          this.#state = 'done';
        }
        break;
      }
      if (this.#state === 'between') { // after <|end|>: <|start|> opens the next message
        const t = b.trimStart();
        if (t.startsWith(H.start)) { this.#buf = t.slice(H.start.length); this.#state = 'header'; continue; }
        if (t === '' || (!final && H.start.startsWith(t))) { this.#buf = final ? '' : t; break; } // (whitespace dropped)
        this.#buf = t; // text without a header: content
        this.#kind = 'content';
        this.#state = 'body';
        continue;
      }
      // done: what follows <|call|> or <|return|> (nothing, normally) is dropped
      this.#buf = '';
      break;
    }
    return events;
  }

  finish() { return this.push('', true); }

  result() {
    return { content: this.#content, reasoning: this.#reasoning, calls: this.#calls.map((c) => ({ ...c })), error: this.#error };
  }
}

/**
 * A model's output split into reasoning, content and tool calls as it arrives. push(text) and
 * finish() return events, in order: {type: 'reasoning', text}, {type: 'content', text}, and with
 * a tool format {type: 'call', index, id, name} and {type: 'args', index, text}. result():
 * {content, reasoning, calls: [{id, name, arguments}], error}.
 */
export class ChatOutputParser {
  #impl;

  /**
   * @param {ReasoningFormat|null} reasoning  the template's reasoning syntax (null: none)
   * @param {{open?: boolean, toolFormat?: string|null, makeId?: (i: number) => string,
   *          startInCall?: boolean, tools?: object[]}} [options]
   *   open: the prompt leaves <think> open (promptOpensThinking); toolFormat: the tool-call
   *   syntax (tool_calls.js) when tools are on; startInCall, tools: ToolCallParser's
   */
  constructor(reasoning, { open = false, toolFormat = null, makeId, startInCall = false, tools } = {}) {
    if (reasoning === 'harmony') {
      this.#impl = new HarmonyParser({ tools: toolFormat !== null, makeId });
      return;
    }
    const calls = toolFormat ? new ToolCallParser(toolFormat, { makeId, startInCall, tools }) : null;
    // (a prefilled call: the answer starts in it, after any reasoning)
    this.#impl = THINK_MARKS[reasoning] && !startInCall ? new ThinkParser({ open, calls, marks: THINK_MARKS[reasoning] })
      : new PlainParser(calls);
  }

  /** @param {string} text @returns {object[]} */
  push(text) { return this.#impl.push(text); }

  /** @returns {object[]} */
  finish() { return this.#impl.finish(); }

  /** @returns {{content: string, reasoning: string, calls: {id: string, name: string, arguments: string}[], error: string|null}} */
  result() { return this.#impl.result(); }
}

/** No reasoning: everything is content (through the tool-call parser when there is one). */
class PlainParser {
  #calls;
  #content = '';
  constructor(calls) { this.#calls = calls; }
  push(text) {
    this.#content += text;
    if (this.#calls) return this.#calls.push(text);
    return text ? [{ type: 'content', text }] : [];
  }
  finish() { return this.#calls ? this.#calls.finish() : []; }
  result() {
    if (this.#calls) return { ...this.#calls.result(), reasoning: '' };
    return { content: this.#content, calls: [], error: null, reasoning: '' };
  }
}

/**
 * Map token id → marker text for the markers of `texts` that are one token whose piece decodes
 * to nothing (control tokens: gpt-oss's <|channel|>, SmolLM3's <think>), so that a parser sees
 * them. `engine`: tokenize and detokenize.
 * @returns {Promise<Map<number, string>>}
 */
export async function controlMarkers(engine, texts) {
  const out = new Map();
  for (const t of texts) {
    const ids = await engine.tokenize(t, { bos: false, parseSpecial: true });
    if (ids.length === 1 && (await engine.detokenize([ids[0]])) === '') out.set(ids[0], t);
  }
  return out;
}

/**
 * chat()'s reasoning: wraps a token stream so that each token carries `reasoning` and `content`
 * (the parts of its text that are the reasoning and the answer, as the parser releases them)
 * and a last item {id: -1} releases what the parser held; `done(result)` gets the totals.
 * A template without a reasoning syntax passes the tokens through unchanged.
 * @param {object} engine  tokenize / detokenize
 * @param {string|null} template
 * @param {string} prompt  the rendered prompt
 * @param {AsyncIterable<object>} tokens
 * @param {(r: {reasoning: string, content: string}) => void} done
 * @param {object} [gen]  the generation parameters: a grammar from the first token (not lazy) or
 *   a JSON Schema leaves no room for reasoning (an open <think> is then not the answer's start)
 */
export async function* withReasoning(engine, template, prompt, tokens, done, gen = {}) {
  const format = detectReasoningFormat(template);
  if (!format) { yield* tokens; return; }
  const markers = await controlMarkers(engine, REASONING_MARKERS[format]);
  const constrained = (gen.grammar != null && !gen.grammarLazy) || gen.jsonSchema != null;
  const parser = new ChatOutputParser(format, { open: !constrained && promptOpensThinking(prompt, format) });
  const split = (evs) => {
    let reasoning = '', content = '';
    for (const e of evs) {
      if (e.type === 'reasoning') reasoning += e.text;
      else if (e.type === 'content') content += e.text;
    }
    return { reasoning, content };
  };
  let nPast = 0;
  for await (const tok of tokens) {
    const text = tok.id >= 0 && markers.has(tok.id) ? markers.get(tok.id) : tok.text;
    nPast = tok.nPast;
    yield { ...tok, ...split(parser.push(text)) };
  }
  const rest = split(parser.finish());
  if (rest.reasoning || rest.content) {
    yield { id: -1, text: '', prob: 0, logprob: 0, probSampled: 0, nPast, ...rest };
  }
  const r = parser.result();
  done({ reasoning: r.reasoning, content: r.content });
}
