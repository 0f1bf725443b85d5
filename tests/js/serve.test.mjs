// tests/js/serve.test.mjs — `wasmlm serve` (js/server/cli.js, a child process as `npx wasmlm
// serve` runs it) driven by the official `openai` npm client and by raw HTTP: chat (plain,
// streamed, tools, response_format), completions, embeddings (llama.cpp's recorded vectors,
// tests/reference/oracle/embed/bert-F32.json), models, health; errors as OpenAI's JSON (400
// naming the field for malformed bodies, 401, 404, 413, 503 with a full queue) after which the
// server still serves; --parallel N decoding requests together (batched greedy results equal to
// the same requests one at a time); continuous batching (a request arriving mid-batch joins it
// and ends while another stream runs; a disconnect frees its slot for the next queued request);
// a disconnect ending its generation; SIGTERM draining; and a
// loopback load test of 64 concurrent streams, bounded in time, with the server's memory bounded.
// The chat model is tests/js/_tool_models.mjs's tiny random llama with Qwen3's template.

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import OpenAI from 'openai';
import { createEngine } from '../../js/wasmlm.js';
import { synthCached } from '../../tools/synth_gguf.mjs';
import { REPO } from './_helpers.mjs';
import { CLI, serve as startServe, endless as endlessStream } from './_serve.mjs';
import { TOOLS, toolModel } from './_tool_models.mjs';

const MODEL = toolModel('qwen3');
const EMBED = synthCached({ arch: 'bert', shape: 'tiny', seed: 1, type: 'F32' });
/** Starts `wasmlm serve MODEL --port 0 …args` (tests/js/_serve.mjs); resolves once it listens. */
const serve = (args = [], model = MODEL) => startServe(model, args);

const post = (url, body, headers = {}) => fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json', ...headers },
  body: typeof body === 'string' ? body : JSON.stringify(body) });

/** Reads an SSE response to the end: the data payloads (JSON parsed, '[DONE]' as is). */
async function sseEvents(res) {
  const text = await res.text();
  return text.split('\n\n').filter((e) => e.startsWith('data: ')).map((e) => e.slice(6)).map((d) => (d === '[DONE]' ? d : JSON.parse(d)));
}

const main = await serve(['--embedding-model', EMBED, '--parallel', '4']);
const client = main.client();
const reference = await createEngine({ threads: 1 });
await reference.load({ model: MODEL });
after(() => reference.free());
const USER = [{ role: 'user', content: 'What is 6*7?' }];
/** Qwen3's end-of-generation tokens (llama.cpp's EOG set for its vocabulary) banned: a
 *  generation that must run to max_tokens. */
const NO_END = {};
for (const t of ['<|endoftext|>', '<|im_end|>', '<|fim_pad|>', '<|repo_name|>', '<|file_sep|>']) {
  const ids = await reference.tokenize(t, { bos: false, parseSpecial: true });
  assert.equal(ids.length, 1, t);
  NO_END[ids[0]] = -100;
}

test('openai client: chat completion, as Engine.chatCompletion answers the same request', async () => {
  const req = { model: 'qwen3-tiny-4k.gguf', messages: USER, max_tokens: 10, seed: 3, temperature: 0.8 };
  const r = await client.chat.completions.create(req);
  const ref = await reference.chatCompletion(req);
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices[0].message.content, ref.choices[0].message.content);
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.deepEqual(r.usage, ref.usage);
  assert.equal(r.model, 'qwen3-tiny-4k.gguf');
  const models = await client.models.list();
  assert.deepEqual(models.data.map((m) => m.id), ['qwen3-tiny-4k.gguf', 'bert-tiny-s1-F32.gguf']);
});

test('openai client: a streamed chat adds up to the plain one; usage in the last chunk', async () => {
  const req = { model: 'm', messages: USER, max_tokens: 12, seed: 7 };
  const whole = await client.chat.completions.create(req);
  const stream = await client.chat.completions.create({ ...req, stream: true, stream_options: { include_usage: true } });
  let text = '', finish = null, usage = null, n = 0;
  for await (const c of stream) {
    n++;
    if (c.choices[0]?.delta?.content) text += c.choices[0].delta.content;
    if (c.choices[0]?.finish_reason) finish = c.choices[0].finish_reason;
    if (c.usage) usage = c.usage;
  }
  assert.ok(n > 3);
  assert.equal(text, whole.choices[0].message.content);
  assert.equal(finish, 'length');
  assert.equal(usage.completion_tokens, 12);
});

test('openai client: tools (required, temperature 0) and a streamed call; response_format json_schema', async () => {
  const req = { model: 'm', messages: USER, tools: TOOLS, tool_choice: 'required', seed: 11, temperature: 0, max_tokens: 80 };
  const r = await client.chat.completions.create(req);
  assert.equal(r.choices[0].finish_reason, 'tool_calls');
  const calls = r.choices[0].message.tool_calls;
  assert.ok(calls.length >= 1);
  for (const c of calls) {
    assert.ok(TOOLS.some((t) => t.function.name === c.function.name));
    assert.equal(typeof JSON.parse(c.function.arguments), 'object');
  }
  const s = await client.chat.completions.create({ ...req, stream: true });
  const args = new Map();
  for await (const c of s) {
    for (const t of c.choices[0]?.delta?.tool_calls ?? []) args.set(t.index, (args.get(t.index) ?? '') + (t.function?.arguments ?? ''));
  }
  assert.deepEqual([...args.values()], calls.map((c) => c.function.arguments));
  const schema = { type: 'object', properties: { city: { type: 'string', enum: ['Paris', 'Lima'] }, n: { type: 'integer' } }, required: ['city', 'n'] };
  const j = await client.chat.completions.create({ model: 'm', messages: USER, seed: 2, max_tokens: 60,
    response_format: { type: 'json_schema', json_schema: { name: 'x', schema } } });
  const obj = JSON.parse(j.choices[0].message.content);
  assert.ok(['Paris', 'Lima'].includes(obj.city) && Number.isInteger(obj.n), j.choices[0].message.content);
});

test('openai client: completions, plain and streamed', async () => {
  const r = await client.completions.create({ model: 'm', prompt: 'Once upon a time', max_tokens: 6, seed: 1 });
  assert.equal(r.object, 'text_completion');
  assert.equal(r.usage.completion_tokens, 6);
  const ref = [];
  for await (const t of reference.generate('Once upon a time', { maxTokens: 6, seed: 1, topP: 1, parseSpecial: true })) ref.push(t.text);
  assert.equal(r.choices[0].text, ref.join(''));
  const s = await client.completions.create({ model: 'm', prompt: 'Once upon a time', max_tokens: 6, seed: 1, stream: true });
  let text = '';
  for await (const c of s) text += c.choices[0]?.text ?? '';
  assert.equal(text, r.choices[0].text);
});

test('openai client: embeddings (base64 and float) are llama.cpp\'s vectors', async () => {
  const rec = JSON.parse(fs.readFileSync(path.join(REPO, 'tests/reference/oracle/embed/bert-F32.json'), 'utf8'));
  const r = await client.embeddings.create({ model: 'bert', input: rec.texts.slice(0, 8) }); // the client asks for base64
  const f = await client.embeddings.create({ model: 'bert', input: rec.texts.slice(0, 8), encoding_format: 'float' });
  assert.equal(r.data.length, 8);
  const cos = (a, b) => { let d = 0, x = 0, y = 0; for (let i = 0; i < a.length; i++) { d += a[i] * b[i]; x += a[i] * a[i]; y += b[i] * b[i]; } return d / Math.sqrt(x * y); };
  r.data.forEach((e, i) => {
    assert.equal(e.index, i);
    assert.ok(cos(e.embedding, rec.embeddings[i]) >= 0.9999, `text ${i}`);
    assert.deepEqual(e.embedding, f.data[i].embedding);
  });
  assert.ok(r.usage.prompt_tokens > 8);
  await assert.rejects(client.embeddings.create({ model: 'bert', input: 'x', dimensions: 3 }), (e) => e.status === 400 && e.param === 'dimensions');
});

test('openai client: errors are OpenAI\'s (400 naming the field, 404)', async () => {
  const cases = [
    [{ model: 'm', messages: [] }, 'messages'],
    [{ model: 'm', messages: [{ role: 'robot', content: 'x' }] }, 'messages[0].role'],
    [{ model: 'm', messages: USER, temperature: 7 }, 'temperature'],
    [{ model: 'm', messages: USER, tool_choice: 'required' }, 'tool_choice'],
    [{ model: 'm', messages: USER, n: 2 }, 'n'],
    [{ model: 'm', messages: USER, frobnicate: 1 }, 'frobnicate'],
  ];
  for (const [body, param] of cases) {
    await assert.rejects(client.chat.completions.create(body), (e) => {
      assert.ok(e instanceof OpenAI.BadRequestError, `${param}: ${e}`);
      assert.equal(e.param, param);
      assert.equal(e.type, 'invalid_request_error');
      return true;
    });
  }
  await assert.rejects(client.get('/nothing'), (e) => e instanceof OpenAI.NotFoundError);
});

test('malformed and oversized bodies get 4xx with OpenAI\'s error JSON, and the server keeps serving', async () => {
  const url = `${main.url}/v1/chat/completions`;
  const bodies = ['{bad', '', '[]', 'null', '42', '{"messages": "hi"}', '{"messages": [{"role": "user"}]}',
    '{"messages": [{"role": "user", "content": 5}]}', '{"messages": [{"role":"user","content":"x"}], "max_tokens": -1}',
    '{"messages": [{"role":"user","content":"x"}], "stop": [1]}', '{"messages": [{"role":"user","content":"x"}], "tools": {}}',
    '{"messages": [{"role":"user","content":"x"}], "response_format": {"type": "yaml"}}',
    '{"messages": [{"role":"user","content":"x"}], "logit_bias": {"a": 1}}', '\u0000\u0001', '{"messages": [{"role":"user","content":"x"}], "stream": "yes"}'];
  for (const b of bodies) {
    const res = await post(url, b);
    assert.equal(res.status, 400, b);
    const j = await res.json();
    assert.equal(typeof j.error.message, 'string', b);
    assert.equal(j.error.type, 'invalid_request_error', b);
  }
  for (const [p, b] of [['/v1/completions', { prompt: 5 }], ['/v1/completions', { prompt: 'x', suffix: 'y' }], ['/v1/embeddings', { input: [1, 2] }],
    ['/v1/embeddings', {}], ['/v1/completions', { prompt: ['a', 'b'] }]]) {
    const res = await post(`${main.url}${p}`, b);
    assert.equal(res.status, 400, JSON.stringify(b));
    assert.ok((await res.json()).error.param, JSON.stringify(b));
  }
  const big = await post(url, JSON.stringify({ messages: [{ role: 'user', content: 'x'.repeat(2 << 20) }] }));
  assert.equal(big.status, 413);
  assert.equal((await big.json()).error.code, 'request_too_large');
  const get = await fetch(url);
  assert.equal(get.status, 405);
  const ok = await client.chat.completions.create({ model: 'm', messages: USER, max_tokens: 2 });
  assert.equal(ok.choices.length, 1);
  assert.equal((await main.health()).status, 'ok');
});

test('mutated request bodies (seeded): every answer is 200 or a 4xx with OpenAI\'s error JSON, never 500', async () => {
  let seed = 12345;
  const rnd = () => { seed = (seed * 1103515245 + 12345) >>> 0; return seed / 2 ** 32; };
  const pick = (a) => a[Math.floor(rnd() * a.length)];
  const values = [null, true, 0, -1, 1.5, 1e300, 'x', '', [], [1, 'a'], {}, { type: 'function' }, [{ role: 'user' }], 'required'];
  const base = () => ({ model: 'm', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 3, temperature: 0.5,
    tools: [TOOLS[2]], tool_choice: 'auto', stop: ['\n'], seed: 1 });
  const counts = {};
  for (let i = 0; i < 120; i++) {
    const body = base();
    for (let k = 0, n = 1 + Math.floor(rnd() * 3); k < n; k++) {
      const r = rnd();
      const key = pick([...Object.keys(body), 'stream', 'response_format', 'logit_bias', 'n', 'top_logprobs', 'logprobs', 'bogus']);
      if (r < 0.3) delete body[key];
      else if (r < 0.8) body[key] = pick(values);
      else if (Array.isArray(body.messages) && body.messages[0] && typeof body.messages[0] === 'object') body.messages[0][pick(['role', 'content', 'name', 'tool_calls'])] = pick(values);
    }
    if (typeof body.max_tokens === 'number' && body.max_tokens > 3) body.max_tokens = 3;
    if (body.max_tokens === undefined || body.max_tokens === null) body.max_tokens = 3;
    const res = await post(`${main.url}/v1/chat/completions`, body);
    counts[res.status] = (counts[res.status] ?? 0) + 1;
    assert.ok(res.status === 200 || (res.status >= 400 && res.status < 500), `${res.status} for ${JSON.stringify(body)}`);
    if (res.status !== 200) {
      const j = await res.json();
      assert.equal(typeof j.error?.message, 'string', JSON.stringify(body));
    } else {
      await res.text();
    }
  }
  assert.ok(counts[400] > 20 && counts[200] > 5, JSON.stringify(counts));
  assert.equal((await main.health()).status, 'ok');
});

test('--parallel 4: requests that arrive together are decoded in one batch, with the same greedy results', async () => {
  const prompts = ['Once upon a time', 'The quick brown fox', 'def f(x):', 'Hello'];
  const req = (content) => ({ model: 'm', messages: [{ role: 'user', content }], max_tokens: 12, temperature: 0 });
  const alone = [];
  for (const p of prompts) alone.push((await client.chat.completions.create(req(p))).choices[0].message.content);
  const before = await main.health();
  const together = await Promise.all(prompts.map(async (p) => (await client.chat.completions.create(req(p))).choices[0].message.content));
  const afterStats = await main.health();
  assert.deepEqual(together, alone);
  assert.ok(afterStats.max_batch >= 2, JSON.stringify(afterStats));
  assert.ok(afterStats.batches - before.batches < prompts.length, 'fewer batches than requests');
  // grammars (a required call, a lazy 'auto' one, a JSON schema) per sequence of a batch
  const reqs = [
    { model: 'm', messages: USER, tools: TOOLS, tool_choice: 'required', temperature: 0, max_tokens: 80 },
    { model: 'm', messages: USER, tools: TOOLS, tool_choice: 'auto', temperature: 0, max_tokens: 40 },
    { model: 'm', messages: USER, temperature: 0, max_tokens: 40, response_format: { type: 'json_object' } },
  ];
  const shape = (r) => ({ content: r.choices[0].message.content, finish: r.choices[0].finish_reason,
    calls: r.choices[0].message.tool_calls?.map((c) => [c.function.name, c.function.arguments]) ?? null });
  const one = [];
  for (const q of reqs) one.push(shape(await client.chat.completions.create(q)));
  const all = (await Promise.all(reqs.map((q) => client.chat.completions.create(q)))).map(shape);
  assert.deepEqual(all, one);
  assert.equal(one[0].finish, 'tool_calls');
});

test('a request the engine refuses in a batch (a prompt past the context) fails alone; the others are answered', async () => {
  const long = { model: 'm', messages: [{ role: 'user', content: 'hello '.repeat(5000) }], max_tokens: 4 };
  const fine = { model: 'm', messages: USER, max_tokens: 4, temperature: 0 };
  const alone = (await client.chat.completions.create(fine)).choices[0].message.content;
  const [a, b, c] = await Promise.allSettled([client.chat.completions.create(fine), client.chat.completions.create(long),
    client.chat.completions.create(fine)]);
  assert.equal(a.value?.choices[0].message.content, alone, String(a.reason));
  assert.equal(c.value?.choices[0].message.content, alone, String(c.reason));
  assert.equal(b.status, 'rejected');
  assert.equal(b.reason.status, 400, String(b.reason));
  assert.match(b.reason.message, /context/i);
  const streamed = await post(`${main.url}/v1/chat/completions`, { ...long, stream: true });
  assert.equal(streamed.status, 400, 'a stream refused at its start gets a status, not an event after 200');
  assert.equal((await streamed.json()).error.type, 'invalid_request_error');
});

/** A streamed completion that runs until aborted (its end tokens banned): {ac, reader, chunk()}. */
const endless = (url, prompt = 'Once') => endlessStream(url, { prompt, logitBias: NO_END });

test('continuous batching: a request arriving mid-batch joins it, ends while the other stream is still open, and equals its result alone', async () => {
  const req = { model: 'm', messages: [{ role: 'user', content: 'The quick brown fox' }], max_tokens: 12, temperature: 0 };
  const ref = await reference.chatCompletion(req);
  const before = await main.health();
  const a = await endless(main.url);
  for (let got = 0; got < 3;) if (await a.chunk()) got++; // A decodes
  const r = await client.chat.completions.create(req); // arrives while A's batch runs
  assert.equal(r.choices[0].message.content, ref.choices[0].message.content);
  assert.deepEqual([r.usage.prompt_tokens, r.usage.completion_tokens], [ref.usage.prompt_tokens, ref.usage.completion_tokens]);
  assert.ok(await a.chunk(), 'A is still streaming after B has ended');
  const h = await main.health();
  assert.equal(h.running, 1, 'A still decodes');
  assert.equal(h.batches - before.batches, 1, 'B joined A\'s batch rather than waiting for it to end');
  assert.ok(h.max_batch >= 2);
  a.ac.abort();
  for (let i = 0; i < 200 && (await main.health()).running > 0; i++) await new Promise((res) => setTimeout(res, 25));
  assert.equal((await main.health()).running, 0);
});

test('continuous batching: a client that disconnects frees its slot at once; the next queued request starts', async () => {
  const s = await serve(['--parallel', '2', '--queue', '4']);
  const c = s.client();
  const req = { model: 'm', messages: USER, max_tokens: 6, temperature: 0 };
  const ref = await reference.chatCompletion(req);
  const a = await endless(s.url), b = await endless(s.url, 'Twice');
  await a.chunk();
  await b.chunk();
  const third = c.chat.completions.create(req); // no slot: it waits
  let h;
  for (let i = 0; i < 200; i++) { h = await s.health(); if (h.waiting >= 1) break; await new Promise((res) => setTimeout(res, 10)); }
  assert.equal(h.waiting, 1, JSON.stringify(h));
  assert.equal(h.running, 2);
  a.ac.abort(); // A's slot frees at the next step; the third takes it while B runs on
  const r = await third;
  assert.equal(r.choices[0].message.content, ref.choices[0].message.content);
  assert.ok(await b.chunk(), 'B is still streaming');
  h = await s.health();
  assert.equal(h.running, 1, 'B still decodes');
  assert.equal(h.batches, 1, 'one batch throughout');
  assert.equal(h.sequences, 3);
  b.ac.abort();
  for (let i = 0; i < 200; i++) { h = await s.health(); if (h.running === 0 && h.waiting === 0) break; await new Promise((res) => setTimeout(res, 25)); }
  assert.equal(h.running, 0);
  const t0 = h.tokens;
  await new Promise((res) => setTimeout(res, 300));
  assert.equal((await s.health()).tokens, t0, 'no token after every client left');
  await s.stop();
});

test('a client that disconnects ends its generation', async () => {
  const s = await serve(['--parallel', '1']);
  const ac = new AbortController();
  const res = await fetch(`${s.url}/v1/completions`, { method: 'POST', signal: ac.signal, headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ prompt: 'Once', max_tokens: 3500, stream: true, logit_bias: NO_END }) });
  const reader = res.body.getReader();
  for (let got = 0; got < 3;) if ((await reader.read()).value) got++;
  ac.abort();
  let h;
  for (let i = 0; i < 200; i++) { // the generation must end well before its 3500 tokens
    h = await s.health();
    if (h.running === 0 && h.waiting === 0) break;
    await new Promise((r) => setTimeout(r, 25));
  }
  assert.equal(h.running, 0);
  const t0 = h.tokens;
  await new Promise((r) => setTimeout(r, 300));
  assert.equal((await s.health()).tokens, t0, 'no token after the generation ended');
  assert.ok(t0 < 3500, `${t0} tokens`);
});

test('--api-key: 401 without it (OpenAI\'s error JSON), /health open', async () => {
  const s = await serve(['--api-key', 'sekret']);
  await assert.rejects(s.client({ apiKey: 'wrong' }).models.list(), (e) => e instanceof OpenAI.AuthenticationError && e.code === 'invalid_api_key');
  const res = await post(`${s.url}/v1/chat/completions`, { messages: USER });
  assert.equal(res.status, 401);
  assert.equal((await res.json()).error.code, 'invalid_api_key');
  assert.equal((await fetch(`${s.url}/health`)).status, 200);
  const r = await s.client({ apiKey: 'sekret' }).chat.completions.create({ model: 'm', messages: USER, max_tokens: 2 });
  assert.equal(r.usage.completion_tokens, 2);
});

test('a full queue answers 503; SIGTERM drains the requests in progress and exits 0', async () => {
  const s = await serve(['--parallel', '1', '--queue', '1']);
  const long = () => {
    const ac = new AbortController();
    const res = fetch(`${s.url}/v1/completions`, { method: 'POST', signal: ac.signal, headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ prompt: 'Once', max_tokens: 3500, stream: true, logit_bias: NO_END }) });
    res.catch(() => {}); // rejected by the abort below
    return { ac, res };
  };
  const a = long();
  const ra = await a.res; // decoding now
  const b = long();
  for (let i = 0; i < 200 && (await s.health()).waiting < 1; i++) await new Promise((r) => setTimeout(r, 10));
  const c = await post(`${s.url}/v1/completions`, { prompt: 'x', max_tokens: 2 });
  assert.equal(c.status, 503);
  assert.equal((await c.json()).error.code, 'queue_full');
  a.ac.abort();
  b.ac.abort();
  for (let i = 0; i < 200; i++) { const h = await s.health(); if (h.running === 0 && h.waiting === 0) break; await new Promise((r) => setTimeout(r, 25)); }
  // drain: a stream in progress when SIGTERM comes still ends with its finish reason and [DONE]
  const res = await post(`${s.url}/v1/chat/completions`, { messages: USER, max_tokens: 1000, stream: true, logit_bias: NO_END });
  assert.equal(res.status, 200);
  const reader = res.body.getReader();
  let text = new TextDecoder().decode((await reader.read()).value);
  s.child.kill('SIGTERM');
  await new Promise((r) => setTimeout(r, 50));
  const refused = await post(`${s.url}/v1/chat/completions`, { messages: USER, max_tokens: 2 }).then((r) => r.status, () => 'refused');
  assert.ok(refused === 503 || refused === 'refused', String(refused));
  for (let r = await reader.read(); !r.done; r = await reader.read()) text += new TextDecoder().decode(r.value);
  assert.ok(text.trimEnd().endsWith('data: [DONE]'), text.slice(-200));
  assert.match(text, /"finish_reason":"length"/);
  assert.deepEqual(await s.exited, { code: 0, signal: null }, s.stderr());
});

test('load: 64 concurrent streams all complete, twice, and the server\'s memory stays bounded', { timeout: 300_000 }, async () => {
  const s = await serve(['--parallel', '8', '--queue', '64']);
  const round = async () => Promise.all(Array.from({ length: 64 }, async (_, i) => {
    const res = await post(`${s.url}/v1/chat/completions`, { messages: [{ role: 'user', content: `Story ${i}` }], max_tokens: 16, seed: i,
      logit_bias: NO_END, stream: true, stream_options: { include_usage: true } });
    assert.equal(res.status, 200);
    const ev = await sseEvents(res);
    assert.equal(ev.at(-1), '[DONE]');
    assert.equal(ev.at(-2).usage.completion_tokens, 16);
    return ev.length;
  }));
  const t0 = Date.now();
  await round();
  const rss1 = s.rssKb();
  await round();
  const rss2 = s.rssKb();
  const h = await s.health();
  assert.equal(h.sequences, 128);
  assert.ok(h.max_batch >= 2 && h.max_batch <= 8, JSON.stringify(h));
  assert.ok(rss2 - rss1 < 64 * 1024, `RSS grew from ${rss1} kB to ${rss2} kB over the second round`);
  assert.ok(Date.now() - t0 < 240_000);
});

test('the command line: package.json\'s bin, --help, and bad options refused with the usage (exit 2)', () => {
  const pkg = JSON.parse(fs.readFileSync(path.join(REPO, 'package.json'), 'utf8'));
  const bin = path.join(REPO, pkg.bin.wasmlm);
  assert.equal(bin, CLI);
  assert.match(fs.readFileSync(bin, 'utf8'), /^#!\/usr\/bin\/env node\n/);
  assert.ok(fs.statSync(bin).mode & 0o111, 'executable');
  const run = (...args) => spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8' });
  const help = run('--help');
  assert.equal(help.status, 0);
  assert.match(help.stdout, /usage: wasmlm serve MODEL/);
  for (const [args, re] of [[['serve', MODEL, '--bogus'], /bogus/], [['serve'], /one MODEL/], [['run', MODEL], /unknown command 'run'/],
    [['serve', MODEL, '--parallel', '0'], /--parallel must be an integer in 1\.\.64/], [['serve', MODEL, '--port', 'x'], /--port/]]) {
    const r = run(...args);
    assert.equal(r.status, 2, args.join(' '));
    assert.match(r.stderr, re);
  }
  const missing = run('serve', path.join(REPO, 'no-such-model.gguf'), '--port', '0');
  assert.equal(missing.status, 1);
  assert.match(missing.stderr, /cannot load the model/);
});
