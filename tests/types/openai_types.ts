// openai_types.ts — type-level check (tsc --noEmit, run by tests/js/openai_types.test.mjs) that
// wasmlm's chat-completion types (js/chat/chat_completion.d.ts, through js/wasmlm.d.ts) fit the
// `openai` package's: a value of ours must be usable where OpenAI's client code expects theirs,
// and a request written for OpenAI's SDK (the subset we support) must be one of ours.
// tsconfig.json here checks this file alone; the test adds the captured objects.
import type OpenAI from 'openai';
import type * as W from '../../js/wasmlm.js';
import type { ChatCompletion, ChatCompletionChunk, ChatCompletionRequest, Engine } from '../../js/wasmlm.js';

declare const ours: ChatCompletion;
declare const ourChunk: ChatCompletionChunk;
export const a: OpenAI.Chat.Completions.ChatCompletion = ours;
export const b: OpenAI.Chat.Completions.ChatCompletionChunk = ourChunk;

// A request an OpenAI client would send (tools, a tool message, streaming options) is ours.
const req = {
  model: 'x',
  messages: [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: 'Time?' },
    { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'clock', arguments: '{}' } }] },
    { role: 'tool', tool_call_id: 'call_1', content: '12:00' },
  ],
  tools: [{ type: 'function', function: { name: 'clock', description: 'now', parameters: { type: 'object', properties: {} } } }],
  tool_choice: 'auto', temperature: 0.5, max_tokens: 20, seed: 1, stream: true, stream_options: { include_usage: true },
} satisfies OpenAI.Chat.Completions.ChatCompletionCreateParamsStreaming;
export const c: ChatCompletionRequest = req;

// What real runs returned is checked by build/types/captured.ts, which
// tests/js/openai_types.test.mjs writes: the objects as literals `satisfies` OpenAI's types.

declare const engine: Engine;
export async function f(): Promise<void> {
  const r = await engine.chatCompletion({ messages: [{ role: 'user', content: 'hi' }] });
  const o: OpenAI.Chat.Completions.ChatCompletion = r;
  const s = await engine.chatCompletion({ messages: [{ role: 'user', content: 'hi' }], stream: true });
  for await (const ch of s) { const x: OpenAI.Chat.Completions.ChatCompletionChunk = ch; void x; }
  void o;
}
// An image part as OpenAI's client writes it is ours; images in load / generate / chat.
const vreq = {
  model: 'x',
  messages: [{ role: 'user', content: [{ type: 'text', text: 'What is it?' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,AA==', detail: 'low' } }] }],
} satisfies OpenAI.Chat.Completions.ChatCompletionCreateParamsNonStreaming;
export const v: ChatCompletionRequest = vreq;
export async function g(bytes: Uint8Array, blob: Blob): Promise<void> {
  const info = await engine.load({ model: 'm.gguf', mmproj: 'mmproj.gguf' });
  const p: string | undefined = info.vision?.projector;
  const r = await engine.complete('<__media__> caption:', { images: [bytes, blob, { width: 1, height: 1, data: new Uint8Array(3) }] });
  const n: number | undefined = r.imagesEncoded;
  for await (const t of engine.chat([{ role: 'user', content: [{ type: 'image', image: blob }, { type: 'text', text: 'hi' }] }])) void t;
  void p; void n;
}
export type { W };
