// _serve.mjs — `wasmlm serve` as a child process for the serve*.test.mjs files (js/server/cli.js,
// as `npx wasmlm serve` runs it), stopped (SIGTERM) when the test file ends. Not a test file.

import { after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { spawn } from 'node:child_process';
import OpenAI from 'openai';
import { REPO } from './_helpers.mjs';

export const CLI = path.join(REPO, 'js', 'server', 'cli.js');

const servers = [];
after(async () => { for (const s of servers) await s.stop(); });

/**
 * Starts `wasmlm serve MODEL --port 0 --threads 1 …args`; resolves once it listens with
 * {url, child, exited, out(), stderr(), client(options) (an `openai` client, no retries),
 * get(path) (JSON), health(), rssKb(), stop() (SIGTERM; resolves with {code, signal})}.
 */
export async function serve(model, args = []) {
  const child = spawn(process.execPath, [CLI, 'serve', model, '--port', '0', '--threads', '1', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '', err = '';
  child.stderr.on('data', (d) => { err += d; });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  const url = await new Promise((resolve, reject) => {
    child.stdout.on('data', (d) => { out += d; const m = /on (http:\/\/\S+)/.exec(out); if (m) resolve(m[1]); });
    exited.then(({ code }) => reject(new Error(`wasmlm serve exited (${code}): ${err}`)));
  });
  const get = async (p) => (await fetch(`${url}${p}`)).json();
  const s = {
    url, child, exited, out: () => out, stderr: () => err,
    client: (o = {}) => new OpenAI({ baseURL: `${url}/v1`, apiKey: 'none', maxRetries: 0, ...o }),
    get, health: () => get('/health'),
    rssKb: () => Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${child.pid}/status`, 'utf8'))?.[1] ?? 0),
    stop: async () => { if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM'); return exited; },
  };
  servers.push(s);
  return s;
}

/**
 * A streamed /v1/completions of `prompt` that runs until aborted or max_tokens (logitBias bans
 * the model's end tokens): {ac (abort it), reader, chunk() (the next bytes, null at the end)}.
 */
export async function endless(url, { prompt = 'Once', maxTokens = 3500, logitBias } = {}) {
  const ac = new AbortController();
  const res = await fetch(`${url}/v1/completions`, { method: 'POST', signal: ac.signal, headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ prompt, max_tokens: maxTokens, stream: true, logit_bias: logitBias }) });
  assert.equal(res.status, 200);
  const reader = res.body.getReader();
  return { ac, reader, chunk: async () => { const r = await reader.read(); return r.done ? null : r.value; } };
}

/** Polls /health until `done(health)` holds (at most ~5 s); resolves with the last health. */
export async function healthWhen(s, done) {
  let h;
  for (let i = 0; i < 200; i++) {
    h = await s.health();
    if (done(h)) break;
    await new Promise((res) => setTimeout(res, 25));
  }
  return h;
}
