#!/usr/bin/env node
// cli.js — the package's `wasmlm` command (package.json "bin"): `wasmlm serve MODEL [options]`
// loads MODEL (a GGUF path or URL, as Engine.load takes it) and serves llama-server's
// OpenAI-compatible endpoints (js/server/server.js) until SIGTERM or SIGINT, which drain: the
// requests in progress and queued finish, new ones get 503, then the process exits 0.

import { parseArgs } from 'node:util';
import { basename } from 'node:path';
import { createEngine } from '../engine/engine.js';
import { createServer } from './server.js';

const USAGE = `usage: wasmlm serve MODEL [options]

Serves MODEL (a .gguf file or URL) with OpenAI's API: POST /v1/chat/completions,
/v1/completions, /v1/embeddings; GET /v1/models, /props, /health.

  --host HOST              address to listen on (default 127.0.0.1)
  --port N                 port (default 8080; 0: any free port)
  --api-key KEY            require "Authorization: Bearer KEY" (or set WASMLM_API_KEY)
  -np, --parallel N        requests decoded together, continuous batching (1..64, default 1)
  --queue N                requests that may wait beyond those (default 64; 503 beyond)
  --max-body BYTES         largest request body (default 1048576; 413 beyond)
  -c, --ctx-size N         context length per sequence (default: the model's)
  -t, --threads N          threads of the engine (default: the engine's choice)
  --mmproj FILE            the model's mmproj GGUF: images in chat messages (image_url parts)
  --allow-remote-images    fetch http(s) image URLs (default: data: URLs only; 400 for others)
  --embedding-model FILE   a second model for /v1/embeddings
  -a, --alias NAME         the model id /v1/models reports (default: MODEL's file name)
  --drain-timeout SECONDS  on SIGTERM, how long requests may still run (default 30)
  -h, --help               this text`;

function fail(message) {
  process.stderr.write(`wasmlm: ${message}\n\n${USAGE}\n`);
  process.exit(2);
}

function int(name, v, min, max) {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < min || n > max) fail(`--${name} must be an integer in ${min}..${max}, got ${JSON.stringify(v)}`);
  return n;
}

// llama-server's short forms with two letters (-np) are not parseArgs's: spell them long first.
const argv = process.argv.slice(2).map((a) => (a === '-np' ? '--parallel' : a));
let parsed;
try {
  parsed = parseArgs({
    args: argv, allowPositionals: true, strict: true,
    options: {
      host: { type: 'string' }, port: { type: 'string' }, 'api-key': { type: 'string' },
      parallel: { type: 'string' }, queue: { type: 'string' }, 'max-body': { type: 'string' },
      'ctx-size': { type: 'string', short: 'c' }, threads: { type: 'string', short: 't' },
      'embedding-model': { type: 'string' }, mmproj: { type: 'string' }, 'allow-remote-images': { type: 'boolean' }, alias: { type: 'string', short: 'a' },
      'drain-timeout': { type: 'string' }, help: { type: 'boolean', short: 'h' },
    },
  });
} catch (err) {
  fail(err.message);
}
const { values: o, positionals } = parsed;
if (o.help) { process.stdout.write(`${USAGE}\n`); process.exit(0); }
if (positionals[0] !== 'serve') fail(positionals.length ? `unknown command '${positionals[0]}'` : 'a command is required');
if (positionals.length !== 2) fail('serve takes one MODEL');
const model = positionals[1];
const parallel = int('parallel', o.parallel, 1, 64) ?? 1;
const opts = {
  port: int('port', o.port, 0, 65535) ?? 8080,
  host: o.host ?? '127.0.0.1',
  apiKey: o['api-key'] ?? process.env.WASMLM_API_KEY ?? null,
  queue: int('queue', o.queue, 0, 1e6) ?? 64,
  maxBody: int('max-body', o['max-body'], 1024, 2 ** 30) ?? 1 << 20,
  drainMs: (int('drain-timeout', o['drain-timeout'], 0, 86400) ?? 30) * 1000,
};
const nCtx = int('ctx-size', o['ctx-size'], 0, 1 << 24);
const threads = int('threads', o.threads, 1, 1024);
if (opts.apiKey === '') fail('--api-key must not be empty');
if (!opts.apiKey && !['127.0.0.1', 'localhost', '::1'].includes(opts.host)) {
  process.stderr.write(`wasmlm: warning: listening on ${opts.host} without --api-key: anyone who can reach it may use it\n`);
}

const log = (m) => process.stderr.write(`wasmlm: ${m}\n`);
async function loaded(file, extra = {}) {
  const engine = await createEngine(threads ? { threads } : {});
  const info = await engine.load({ model: file, ...(nCtx !== undefined ? { nCtx } : {}), ...extra });
  return { engine, info };
}

let main, embed = null;
try {
  // an mmproj keeps the model on the CPU: its batches take several sequences with images
  // (the GPU refuses LFM2-VL's, and one joining a running batch)
  main = await loaded(model, { nSeqMax: parallel, ...(o.mmproj ? { mmproj: o.mmproj, backend: 'cpu' } : {}) });
  if (o['embedding-model']) embed = await loaded(o['embedding-model']);
} catch (err) {
  log(`cannot load the model: ${err.message}`);
  process.exit(1);
}
const generative = main.info.generative !== false;
if (!generative && embed) fail(`${model} is an embedding model; --embedding-model is for a server whose MODEL generates text`);
const app = createServer({
  engine: generative ? main.engine : null,
  embedEngine: generative ? embed?.engine ?? null : main.engine,
  modelId: o.alias ?? basename(model),
  embedModelId: embed ? basename(o['embedding-model']) : null,
  remoteImages: o['allow-remote-images'] === true,
  parallel, apiKey: opts.apiKey, queue: opts.queue, maxBody: opts.maxBody, drainMs: opts.drainMs, // port, host: listen()'s
});
let url;
try {
  url = await app.listen(opts.port, opts.host);
} catch (err) {
  log(`cannot listen on ${opts.host}:${opts.port}: ${err.message}`);
  process.exit(1);
}
process.stdout.write(`wasmlm: serving ${basename(model)}${o.mmproj ? ` with ${basename(o.mmproj)}` : ''} on ${url} (parallel ${parallel}, queue ${opts.queue})\n`);

let stopping = false;
async function stop(signal) {
  if (stopping) return;
  stopping = true;
  log(`${signal}: draining`);
  await app.close();
  main.engine.free?.();
  embed?.engine.free?.();
  log('stopped');
  process.exit(0);
}
process.on('SIGTERM', () => stop('SIGTERM'));
process.on('SIGINT', () => stop('SIGINT'));
