// tests/js/serve_vision.test.mjs — images through `wasmlm serve --mmproj FILE` (js/server/), driven
// by the official `openai` client: an image_url part (a data: URL) answers with the greedy text and
// usage Engine.chatCompletion gives the same request in-process; with --parallel 2 image requests
// join the continuous batch as text ones do: a mix of image and text requests, plain and
// streamed, each answers as in-process, and image requests arriving while a long text stream
// decodes join its batch and end while it still streams (/health's batches and images counters);
// /v1/models and /props say vision is available; an http(s) image URL is refused (400 naming
// --allow-remote-images) unless the server was started with it, and then fetched (the same answer
// as the data: URL, alone and in a batch); a server without an mmproj answers an image request
// with 400 naming the reason. The pair is a synthetic gemma3 text model + mmproj
// (tools/synth_gguf.mjs, tools/synth_mmproj.mjs), its chat template given in the request
// (chat_template).

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { createEngine } from '../../js/wasmlm.js';
import { synthCached } from '../../tools/synth_gguf.mjs';
import { mmprojBytes, pngBytes, testImage } from '../../tools/synth_mmproj.mjs';
import { REPO } from './_helpers.mjs';
import { serve as startServe, endless, healthWhen } from './_serve.mjs';

const BUILT = fs.existsSync(path.join(REPO, 'dist/wasmlm.wasm'));
const skip = !BUILT && 'not built';
const MODEL = synthCached({ arch: 'gemma3', shape: 'tiny', seed: 1, type: 'F32' });
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-serve-vision-'));
const MMPROJ = path.join(dir, 'mmproj-gemma3-tiny.gguf');
fs.writeFileSync(MMPROJ, mmprojBytes({ shape: 'gemma3-tiny', type: 'F32', seed: 1 }));
const TEMPLATE = "{{ bos_token }}{% for m in messages %}<start_of_turn>{{ 'model' if m.role == 'assistant' else m.role }}\n" +
  '{{ m.content }}<end_of_turn>\n{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}';
after(() => fs.rmSync(dir, { recursive: true, force: true }));

/** `wasmlm serve MODEL …args` (tests/js/_serve.mjs): stopped when the file ends. */
const serve = (args = []) => startServe(MODEL, args);
/** Gemma 3's end-of-generation tokens (<eos>, <end_of_turn>) banned: a text that runs to max_tokens. */
const NO_END = { 1: -100, 106: -100 };

const png = (w, h, seed) => pngBytes(testImage(w, h, seed), w, h);
const dataUrl = (bytes) => `data:image/png;base64,${Buffer.from(bytes).toString('base64')}`;
const ask = (url, text = 'What is this? ') => ({ model: 'gemma3', chat_template: TEMPLATE, temperature: 0, max_tokens: 8,
  messages: [{ role: 'user', content: [{ type: 'text', text }, { type: 'image_url', image_url: { url } }] }] });
const TEXT = { model: 'gemma3', chat_template: TEMPLATE, temperature: 0, max_tokens: 8, messages: [{ role: 'user', content: 'Hello there' }] };

let reference = null;
after(() => reference?.then((e) => e.free()));
async function inProcess(req) {
  reference ??= createEngine({ threads: 1 }).then(async (e) => { await e.load({ model: MODEL, mmproj: MMPROJ, backend: 'cpu' }); return e; });
  return (await reference).chatCompletion(req);
}

/** The answer and its usage, as compared. */
const gist = (r) => ({ content: r.choices[0].message.content, finish: r.choices[0].finish_reason,
  prompt: r.usage.prompt_tokens, completion: r.usage.completion_tokens, total: r.usage.total_tokens });
/** gist() of a streamed answer (stream_options.include_usage: the usage in its last chunk). */
async function streamGist(stream) {
  let content = '', finish = null, usage = null;
  for await (const c of stream) {
    content += c.choices[0]?.delta?.content ?? '';
    finish = c.choices[0]?.finish_reason ?? finish;
    usage = c.usage ?? usage;
  }
  return { content, finish, prompt: usage?.prompt_tokens, completion: usage?.completion_tokens, total: usage?.total_tokens };
}
const streamed = (req) => ({ ...req, stream: true, stream_options: { include_usage: true } });
/** gist() of Engine.chatCompletion's answer to `req` in-process, streamed if `req` is. */
const inProcessGist = async (req) => (req.stream ? streamGist(await inProcess(req)) : gist(await inProcess(req)));

test('serve --mmproj: an image_url data: URL answers as Engine.chatCompletion does in-process; vision is advertised', { skip, timeout: 300000 }, async () => {
  const s = await serve(['--mmproj', MMPROJ, '--parallel', '2']);
  const client = s.client();
  assert.match(s.out(), /serving \S+ with mmproj-gemma3-tiny\.gguf on/);
  const models = await client.models.list();
  assert.deepEqual(models.data[0].capabilities, ['completion', 'multimodal']);
  const props = await s.get('/props');
  assert.deepEqual(props.modalities, { vision: true, audio: false });
  assert.equal(props.total_slots, 2);

  const a = dataUrl(await png(80, 50, 1)), b = dataUrl(await png(40, 64, 2));
  const got = await client.chat.completions.create(ask(a));
  const want = await inProcess(ask(a));
  assert.deepEqual(gist(got), gist(want));
  assert.ok(got.usage.prompt_tokens > (await inProcess(TEXT)).usage.prompt_tokens, 'the image rows are in the prompt');
  assert.ok(got.choices[0].message.content.length > 0);

  // --parallel 2: image and text requests, plain and streamed, batched together; each as in-process
  const text2 = { ...TEXT, messages: [{ role: 'user', content: 'Something else' }] };
  const reqs = [TEXT, ask(b, 'And this? '), text2, ask(a, 'Again: '), streamed(ask(b, 'Once more: ')), streamed(text2)];
  const before = await s.health();
  const answers = await Promise.all(reqs.map(async (r) => (r.stream ? streamGist(await client.chat.completions.create(r))
    : gist(await client.chat.completions.create(r)))));
  const h = await s.health();
  for (const [i, r] of reqs.entries()) assert.deepEqual(answers[i], await inProcessGist(r), `request ${i}`);
  assert.equal(h.images - before.images, 3, JSON.stringify(h));
  assert.equal(h.sequences - before.sequences, 6);
  assert.ok(h.batches - before.batches < reqs.length, `fewer batches than requests: ${JSON.stringify(h)}`);

  // an image that does not decode: the single path's error, as 400; the batch goes on
  const broken = ask('data:image/png;base64,iVBORw0KGgoAAAANSUhEUg==');
  const refused = await inProcess(broken).then(() => null, (e) => e);
  assert.ok(refused?.message, 'in-process refuses it');
  const [bad, fine] = await Promise.all([client.chat.completions.create(broken).then(() => null, (e) => e),
    client.chat.completions.create(TEXT)]);
  assert.equal(bad?.status, 400, String(bad));
  assert.equal(bad.message, `400 ${refused.message}`);
  assert.deepEqual(gist(fine), gist(await inProcess(TEXT)));

  // an http(s) URL: refused by default, naming the option
  const remote = await client.chat.completions.create(ask('http://127.0.0.1:9/x.png')).then(() => null, (e) => e);
  assert.equal(remote?.status, 400);
  assert.equal(remote.error?.param ?? remote.param, 'messages');
  assert.match(remote.message, /messages\[0\]\.content\[1\]: an http\(s\) image URL is not fetched by this server .*--allow-remote-images/);
  // a file path never reads the server's files
  const file = await client.chat.completions.create(ask('/etc/passwd')).then(() => null, (e) => e);
  assert.equal(file?.status, 400);
  // the server still serves
  assert.deepEqual(gist(await client.chat.completions.create(TEXT)), gist(await inProcess(TEXT)));
});

test('serve --mmproj --parallel 2: image requests arriving while a text stream decodes join its batch and end before it', { skip, timeout: 300000 }, async () => {
  const s = await serve(['--mmproj', MMPROJ, '--parallel', '2']);
  const client = s.client();
  const one = ask(dataUrl(await png(64, 48, 4)), 'Mid-batch: ');
  const two = streamed(ask(dataUrl(await png(30, 70, 5)), 'And then: '));
  const want = [await inProcessGist(one), await inProcessGist(two)];
  const before = await s.health();
  // a text stream that runs to max_tokens (its end tokens banned): ~1500 steps, the batch's first sequence
  const a = await endless(s.url, { prompt: 'Once', maxTokens: 1500, logitBias: NO_END });
  for (let got = 0; got < 3;) if (await a.chunk()) got++;
  assert.deepEqual(gist(await client.chat.completions.create(one)), want[0]);
  assert.deepEqual(await streamGist(await client.chat.completions.create(two)), want[1]);
  const h = await s.health();
  assert.equal(h.running, 1, `the text stream still decodes: ${JSON.stringify(h)}`);
  assert.equal(h.batches - before.batches, 1, 'the image requests joined the text stream\'s batch rather than waiting for it to end');
  assert.equal(h.images - before.images, 2);
  assert.equal(h.sequences - before.sequences, 3);
  assert.equal(h.max_batch, 2);
  a.ac.abort();
  assert.equal((await healthWhen(s, (x) => x.running === 0 && x.waiting === 0)).running, 0);
  assert.deepEqual(gist(await client.chat.completions.create(one)), want[0], 'alone in a new batch: the same answer');
});

test('serve --mmproj --allow-remote-images: an http URL is fetched, answering as its data: URL (alone and in a batch)', { skip, timeout: 300000 }, async (t) => {
  const bytes = await png(80, 50, 1);
  const files = http.createServer((req, res) => {
    if (req.url !== '/cat.png') { res.writeHead(404).end(); return; }
    res.writeHead(200, { 'Content-Type': 'image/png' }).end(bytes);
  });
  await new Promise((r) => files.listen(0, '127.0.0.1', r));
  t.after(() => files.close());
  const want = gist(await inProcess(ask(dataUrl(bytes))));
  for (const parallel of ['1', '2']) {
    const s = await serve(['--mmproj', MMPROJ, '--allow-remote-images', '--parallel', parallel]);
    const client = s.client();
    assert.equal((await s.get('/props')).remote_images, true);
    const got = await client.chat.completions.create(ask(`http://127.0.0.1:${files.address().port}/cat.png`));
    assert.deepEqual(gist(got), want, `--parallel ${parallel}`);
    const missing = await client.chat.completions.create(ask(`http://127.0.0.1:${files.address().port}/none.png`)).then(() => null, (e) => e);
    assert.equal(missing?.status, 400);
    assert.match(missing.message, /images\[0\]: http:\S+\/none\.png answered HTTP 404/);
    await s.stop();
  }
});

test('serve without --mmproj: an image request gets 400 naming the reason; no vision advertised', { skip, timeout: 300000 }, async () => {
  for (const parallel of ['1', '2']) {
    const s = await serve(['--parallel', parallel]);
    const client = s.client();
    assert.deepEqual((await client.models.list()).data[0].capabilities, ['completion']);
    assert.deepEqual((await s.get('/props')).modalities, { vision: false, audio: false });
    const e = await client.chat.completions.create(ask(dataUrl(await png(8, 8, 3)))).then(() => null, (err) => err);
    assert.equal(e?.status, 400);
    assert.match(e.message, /messages\[0\]\.content\[1\]: this server's model reads no images: start it with the model's mmproj \(wasmlm serve MODEL --mmproj FILE\)/);
    assert.deepEqual(gist(await client.chat.completions.create(TEXT)), gist(await inProcess(TEXT)));
    await s.stop();
  }
});
