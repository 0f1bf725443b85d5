// tests/js/serve_vision.test.mjs — images through `wasmlm serve --mmproj FILE` (js/server/), driven
// by the official `openai` client: an image_url part (a data: URL) answers with the greedy text and
// usage Engine.chatCompletion gives the same request in-process; with --parallel 2 image requests
// run alone between batches while text requests batch, each equal to its in-process answer;
// /v1/models and /props say vision is available; an http(s) image URL is refused (400 naming
// --allow-remote-images) unless the server was started with it, and then fetched (the same answer
// as the data: URL); a server without an mmproj answers an image request with 400 naming the
// reason. The pair is a synthetic gemma3 text model + mmproj (tools/synth_gguf.mjs,
// tools/synth_mmproj.mjs), its chat template given in the request (chat_template).

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import OpenAI from 'openai';
import { createEngine } from '../../js/wasmlm.js';
import { synthCached } from '../../tools/synth_gguf.mjs';
import { mmprojBytes, pngBytes, testImage } from '../../tools/synth_mmproj.mjs';
import { REPO } from './_helpers.mjs';

const CLI = path.join(REPO, 'js', 'server', 'cli.js');
const BUILT = fs.existsSync(path.join(REPO, 'dist/wasmlm.wasm'));
const skip = !BUILT && 'not built';
const MODEL = synthCached({ arch: 'gemma3', shape: 'tiny', seed: 1, type: 'F32' });
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-serve-vision-'));
const MMPROJ = path.join(dir, 'mmproj-gemma3-tiny.gguf');
fs.writeFileSync(MMPROJ, mmprojBytes({ shape: 'gemma3-tiny', type: 'F32', seed: 1 }));
const TEMPLATE = "{{ bos_token }}{% for m in messages %}<start_of_turn>{{ 'model' if m.role == 'assistant' else m.role }}\n" +
  '{{ m.content }}<end_of_turn>\n{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}';
const servers = [];
after(async () => {
  for (const s of servers) await s.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

async function serve(args = []) {
  const child = spawn(process.execPath, [CLI, 'serve', MODEL, '--port', '0', '--threads', '1', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '', err = '';
  child.stderr.on('data', (d) => { err += d; });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  const url = await new Promise((resolve, reject) => {
    child.stdout.on('data', (d) => { out += d; const m = /on (http:\/\/\S+)/.exec(out); if (m) resolve(m[1]); });
    exited.then(({ code }) => reject(new Error(`wasmlm serve exited (${code}): ${err}`)));
  });
  const s = {
    url, out: () => out, client: new OpenAI({ baseURL: `${url}/v1`, apiKey: 'none', maxRetries: 0 }),
    get: async (p) => (await fetch(`${url}${p}`)).json(),
    stop: async () => { if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM'); return exited; },
  };
  servers.push(s);
  return s;
}

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
  prompt: r.usage.prompt_tokens, completion: r.usage.completion_tokens });

test('serve --mmproj: an image_url data: URL answers as Engine.chatCompletion does in-process; vision is advertised', { skip, timeout: 300000 }, async () => {
  const s = await serve(['--mmproj', MMPROJ, '--parallel', '2']);
  assert.match(s.out(), /serving \S+ with mmproj-gemma3-tiny\.gguf on/);
  const models = await s.client.models.list();
  assert.deepEqual(models.data[0].capabilities, ['completion', 'multimodal']);
  const props = await s.get('/props');
  assert.deepEqual(props.modalities, { vision: true, audio: false });
  assert.equal(props.total_slots, 2);

  const a = dataUrl(await png(80, 50, 1)), b = dataUrl(await png(40, 64, 2));
  const got = await s.client.chat.completions.create(ask(a));
  const want = await inProcess(ask(a));
  assert.deepEqual(gist(got), gist(want));
  assert.ok(got.usage.prompt_tokens > (await inProcess(TEXT)).usage.prompt_tokens, 'the image rows are in the prompt');
  assert.ok(got.choices[0].message.content.length > 0);

  // --parallel 2: text requests batch, image requests run alone between batches; each as in-process
  const reqs = [TEXT, ask(b, 'And this? '), { ...TEXT, messages: [{ role: 'user', content: 'Something else' }] }, ask(a, 'Again: ')];
  const answers = await Promise.all(reqs.map((r) => s.client.chat.completions.create(r)));
  for (const [i, r] of reqs.entries()) assert.deepEqual(gist(answers[i]), gist(await inProcess(r)), `request ${i}`);

  // streamed: the same text
  const stream = await s.client.chat.completions.create({ ...ask(b, 'And this? '), stream: true });
  let text = '';
  for await (const c of stream) text += c.choices[0]?.delta?.content ?? '';
  assert.equal(text, gist(answers[1]).content);

  // an http(s) URL: refused by default, naming the option
  const remote = await s.client.chat.completions.create(ask('http://127.0.0.1:9/x.png')).then(() => null, (e) => e);
  assert.equal(remote?.status, 400);
  assert.equal(remote.error?.param ?? remote.param, 'messages');
  assert.match(remote.message, /messages\[0\]\.content\[1\]: an http\(s\) image URL is not fetched by this server .*--allow-remote-images/);
  // a file path never reads the server's files
  const file = await s.client.chat.completions.create(ask('/etc/passwd')).then(() => null, (e) => e);
  assert.equal(file?.status, 400);
  // the server still serves
  assert.deepEqual(gist(await s.client.chat.completions.create(TEXT)), gist(await inProcess(TEXT)));
});

test('serve --mmproj --allow-remote-images: an http URL is fetched, answering as its data: URL', { skip, timeout: 300000 }, async (t) => {
  const bytes = await png(80, 50, 1);
  const files = http.createServer((req, res) => {
    if (req.url !== '/cat.png') { res.writeHead(404).end(); return; }
    res.writeHead(200, { 'Content-Type': 'image/png' }).end(bytes);
  });
  await new Promise((r) => files.listen(0, '127.0.0.1', r));
  t.after(() => files.close());
  const s = await serve(['--mmproj', MMPROJ, '--allow-remote-images']);
  assert.equal((await s.get('/props')).remote_images, true);
  const got = await s.client.chat.completions.create(ask(`http://127.0.0.1:${files.address().port}/cat.png`));
  assert.deepEqual(gist(got), gist(await inProcess(ask(dataUrl(bytes)))));
  const missing = await s.client.chat.completions.create(ask(`http://127.0.0.1:${files.address().port}/none.png`)).then(() => null, (e) => e);
  assert.equal(missing?.status, 400);
  assert.match(missing.message, /answered HTTP 404/);
});

test('serve without --mmproj: an image request gets 400 naming the reason; no vision advertised', { skip, timeout: 300000 }, async () => {
  const s = await serve();
  assert.deepEqual((await s.client.models.list()).data[0].capabilities, ['completion']);
  assert.deepEqual((await s.get('/props')).modalities, { vision: false, audio: false });
  const e = await s.client.chat.completions.create(ask(dataUrl(await png(8, 8, 3)))).then(() => null, (err) => err);
  assert.equal(e?.status, 400);
  assert.match(e.message, /messages\[0\]\.content\[1\]: this server's model reads no images: start it with the model's mmproj \(wasmlm serve MODEL --mmproj FILE\)/);
  assert.deepEqual(gist(await s.client.chat.completions.create(TEXT)), gist(await inProcess(TEXT)));
});
