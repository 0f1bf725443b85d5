// web/demo/tools.js — the chat mode's Tools panel: two demo tools that run in the page (a
// calculator and a clock) offered to the model through engine.chatCompletion (OpenAI's chat API,
// js/chat/chat_completion.js). A turn with tools on: the reply streams; each tool call the model makes
// is shown (name and arguments), run here, its result shown and fed back as a `tool` message,
// and the model is asked again until it answers in text (at most MAX_ROUNDS rounds of calls;
// the last round has tool_choice 'none'). It does not render templates or parse calls: the
// library does.
//
// For tests: #tools-on (checkbox), #tool-choice (auto | required | none); in #output, a call is
// <div class="msg call" data-role="call" data-name>, a result <div class="msg tool"
// data-role="tool" data-name>, and the assistant bubble of each request data-status as chat.js's.

import { $ } from './state.js';

/** Rounds of calls before the model must answer in text. */
const MAX_ROUNDS = 3;

/** The tools, OpenAI-style, with the functions that run them. */
export const DEMO_TOOLS = [
  {
    tool: { type: 'function', function: { name: 'calculator', description: 'Evaluate an arithmetic expression with + - * / ^ and parentheses.',
      parameters: { type: 'object', properties: { expression: { type: 'string', maxLength: 64, description: 'e.g. (2+3)*4' } },
        required: ['expression'] } } },
    run: ({ expression }) => String(calculate(String(expression))),
  },
  {
    tool: { type: 'function', function: { name: 'clock', description: 'The current date and time here.',
      parameters: { type: 'object', properties: {} } } },
    run: () => new Date().toString(),
  },
];

/**
 * Evaluates + - * / ^ ( ) and unary minus on decimal numbers: a recursive-descent parser, never
 * eval(). Throws a readable Error for anything else.
 */
export function calculate(text) {
  let i = 0;
  const s = text.replace(/\s+/g, '');
  if (s.length > 200) throw new Error('expression too long');
  const peek = () => s[i];
  const number = () => {
    const m = /^\d+(\.\d+)?([eE][+-]?\d+)?/.exec(s.slice(i));
    if (!m) throw new Error(`a number expected at ${i + 1}`);
    i += m[0].length;
    return Number(m[0]);
  };
  let depth = 0;
  const atom = () => {
    if (peek() === '(') {
      if (++depth > 32) throw new Error('too deeply nested');
      i++;
      const v = sum();
      if (peek() !== ')') throw new Error(`')' expected at ${i + 1}`);
      i++;
      depth--;
      return v;
    }
    return number();
  };
  const power = () => { // right-associative, binding tighter than unary minus (-2^2 = -4)
    const b = atom();
    if (peek() === '^') { i++; return b ** unary(); }
    return b;
  };
  const unary = () => {
    if (peek() === '-') { i++; return -unary(); }
    return power();
  };
  const product = () => {
    let v = unary();
    while (peek() === '*' || peek() === '/') v = s[i++] === '*' ? v * unary() : v / unary();
    return v;
  };
  const sum = () => {
    let v = product();
    while (peek() === '+' || peek() === '-') v = s[i++] === '+' ? v + product() : v - product();
    return v;
  };
  if (!s) throw new Error('empty expression');
  const v = sum();
  if (i < s.length) throw new Error(`unexpected '${s[i]}' at ${i + 1}`);
  return v;
}

/** The page's sampler settings (GenerateParams) as OpenAI request fields (ours where OpenAI
 *  has none); settings without a counterpart are left out. */
export function openaiParams(p) {
  const names = { temperature: 'temperature', topP: 'top_p', topK: 'top_k', minP: 'min_p', typicalP: 'typical_p',
    repeatPenalty: 'repeat_penalty', repeatLastN: 'repeat_last_n', presencePenalty: 'presence_penalty',
    frequencyPenalty: 'frequency_penalty', seed: 'seed', maxTokens: 'max_tokens', stop: 'stop' };
  const out = {};
  for (const [k, v] of Object.entries(p)) {
    if (names[k] && v !== undefined && !(k === 'maxTokens' && v === 0)) out[names[k]] = v;
  }
  if (Array.isArray(out.stop) && out.stop.length === 0) delete out.stop;
  return out;
}

/** Whether the Tools panel asks for tools on this turn. */
export function toolsOn() {
  return $('tools-on')?.checked === true;
}

/** Runs one tool call: its result text (an error is a result too, for the model to read). */
function runCall(call) {
  const entry = DEMO_TOOLS.find((t) => t.tool.function.name === call.function.name);
  if (!entry) return `error: no tool named ${call.function.name}`;
  try {
    return entry.run(JSON.parse(call.function.arguments || '{}'));
  } catch (e) {
    return `error: ${e?.message ?? e}`;
  }
}

/**
 * One user turn with tools: requests until the model answers in text. `messages` (system
 * prompt and conversation) is extended in place with the assistant's calls, the tool results
 * and the answer. `ui`: {bubble(role, label?) → {msg, body}, params (the sampler settings as
 * OpenAI fields), signal, onChunk(n)} from chat.js.
 * @returns {Promise<{finish: string, usage: object|null, text: string}>}
 */
export async function toolTurn(engine, messages, ui) {
  const choice = ui.tools === false ? 'none' : $('tool-choice')?.value ?? 'auto';
  let last = { finish: 'stop', usage: null, text: '' };
  for (let round = 0; round <= MAX_ROUNDS; round++) {
    const { msg, body } = ui.bubble('assistant');
    msg.dataset.status = 'streaming';
    const stream = await engine.chatCompletion({
      ...ui.params, messages, tools: DEMO_TOOLS.map((t) => t.tool), stream: true,
      stream_options: { include_usage: true },
      tool_choice: round === MAX_ROUNDS || choice === 'none' ? 'none' : round === 0 ? choice : 'auto',
    }, { signal: ui.signal });
    let text = '';
    const calls = [];
    let finish = null, usage = null;
    try {
      for await (const chunk of stream) {
        if (chunk.usage) usage = chunk.usage;
        const c = chunk.choices[0];
        if (!c) continue;
        if (c.delta.content) {
          text += c.delta.content;
          body.append(document.createTextNode(c.delta.content)); // text nodes: never parsed as HTML
        }
        for (const t of c.delta.tool_calls ?? []) {
          if (t.id) calls[t.index] = { id: t.id, type: 'function', function: { name: t.function.name, arguments: '' } };
          else calls[t.index].function.arguments += t.function.arguments;
        }
        if (c.finish_reason) finish = c.finish_reason;
        ui.onChunk?.();
      }
    } catch (e) {
      msg.dataset.status = e?.name === 'AbortError' ? 'aborted' : 'error';
      throw e;
    }
    msg.dataset.status = 'done';
    if (!text) msg.remove(); // a turn of calls only: the calls speak for it
    last = { finish, usage, text };
    messages.push({ role: 'assistant', content: text || null, ...(calls.length ? { tool_calls: calls } : {}) });
    if (finish !== 'tool_calls') return last;
    for (const call of calls) {
      const c = ui.bubble('call', `Tool call: ${call.function.name}`);
      c.msg.dataset.name = call.function.name;
      c.body.append(document.createTextNode(`${call.function.name}(${call.function.arguments})`));
      const result = runCall(call);
      const r = ui.bubble('tool', `Result of ${call.function.name}`);
      r.msg.dataset.name = call.function.name;
      r.body.append(document.createTextNode(result));
      messages.push({ role: 'tool', tool_call_id: call.id, content: result });
    }
  }
  return last;
}
