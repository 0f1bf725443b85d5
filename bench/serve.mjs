// `wasmlm serve` under concurrent load (issue 45): the server's aggregate decode tokens/s at 1,
// 4 and 8 concurrent streams, and time to first byte / first token, measured over loopback HTTP
// with streamed /v1/completions requests (so the numbers include the server's HTTP, SSE and
// scheduling, not only the engine).
//
//   node bench/serve.mjs [--quick] [--json] [--model FILE] [--shape stories15M --type Q8_0]
//                        [--streams 1,4,8] [--tokens 64] [--rounds 3] [--threads N]
//
// Two servers (js/server/cli.js as child processes) on the same model: --parallel 1 (requests
// decoded one after another: the unbatched baseline) and --parallel P (P = the largest stream
// count: requests arriving together decoded in one batch). For each server and each stream
// count C: C requests sent at once, each for `tokens` tokens (EOS banned through logit_bias, so
// every stream generates exactly `tokens`); aggregate tokens/s = C × tokens / the wall time from
// the first request to the last [DONE]; ttfbMs = request → response headers and first byte;
// ttftMs = request → first token's event. Rounds alternate the stream counts; medians reported.
// batchGain = aggregate tokens/s at C over aggregate tokens/s at 1 stream (same server);
// vsSerial = the batched server's aggregate over the --parallel 1 server's at the same C (the
// batching's own effect). --quick: stories260K (../shared/models), 16 tokens, one round.
// Output: a table, or with --json the report; always bench/out/serve.json.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { createEngine } from '../js/wasmlm.js';
import { ensureGguf } from './models.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '..');
const OUT_DIR = path.join(HERE, 'out');
const CLI = path.join(REPO, 'js', 'server', 'cli.js');
const median = (a) => { const s = [...a].sort((x, y) => x - y); return s[s.length >> 1]; };

async function startServer(model, args) {
  const child = spawn(process.execPath, [CLI, 'serve', model, '--port', '0', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '', err = '';
  child.stderr.on('data', (d) => { err += d; });
  const exited = new Promise((resolve) => child.on('exit', resolve));
  const url = await new Promise((resolve, reject) => {
    child.stdout.on('data', (d) => { out += d; const m = /on (http:\/\/\S+)/.exec(out); if (m) resolve(m[1]); });
    exited.then((code) => reject(new Error(`wasmlm serve exited (${code}): ${err}`)));
  });
  return { url, stop: async () => { child.kill('SIGTERM'); await exited; } };
}

/** One streamed completion: {ttfbMs, ttftMs, tokens, ms}. */
async function stream(url, body) {
  const t0 = performance.now();
  const res = await fetch(`${url}/v1/completions`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let ttfbMs = null, ttftMs = null, buf = '', usage = null;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    ttfbMs ??= performance.now() - t0;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const ev = buf.slice(0, i);
      buf = buf.slice(i + 2);
      if (!ev.startsWith('data: ') || ev === 'data: [DONE]') continue;
      const j = JSON.parse(ev.slice(6));
      if (j.usage) usage = j.usage;
      if (ttftMs === null && j.choices?.[0]?.text) ttftMs = performance.now() - t0;
    }
  }
  return { ttfbMs, ttftMs, tokens: usage?.completion_tokens ?? 0, ms: performance.now() - t0 };
}

/** C concurrent streams: {aggregateTokPerSec, perStreamTokPerSec, ttfbMs, ttftMs, tokens, ms}. */
async function burst(url, c, body) {
  const t0 = performance.now();
  const rs = await Promise.all(Array.from({ length: c }, (_, i) => stream(url, { ...body, seed: i + 1, prompt: `${body.prompt} ${i}` })));
  const ms = performance.now() - t0;
  const tokens = rs.reduce((a, r) => a + r.tokens, 0);
  return {
    aggregateTokPerSec: tokens / (ms / 1e3), perStreamTokPerSec: median(rs.map((r) => r.tokens / (r.ms / 1e3))),
    ttfbMs: median(rs.map((r) => r.ttfbMs)), ttftMs: median(rs.map((r) => r.ttftMs)), tokens, ms,
  };
}

export async function benchServe({ model, streams = [1, 4, 8], tokens = 64, rounds = 3, threads = 0 } = {}) {
  const probe = await createEngine({ threads: 1 });
  const info = await probe.load({ model });
  await probe.free();
  const body = { prompt: 'Once upon a time', max_tokens: tokens, temperature: 1, logit_bias: { [info.eosId]: -100 }, stream: true,
    stream_options: { include_usage: true } };
  const maxP = Math.max(...streams);
  const threadArgs = threads > 0 ? ['--threads', String(threads)] : [];
  const rows = [];
  for (const parallel of [...new Set([1, maxP])]) {
    const s = await startServer(model, ['--parallel', String(parallel), '--queue', String(4 * maxP), ...threadArgs]);
    try {
      await burst(s.url, 1, { ...body, max_tokens: 4 }); // warm-up: first forward passes, read-ahead tuning
      const samples = new Map(streams.map((c) => [c, []]));
      for (let r = 0; r < rounds; r++) for (const c of streams) samples.get(c).push(await burst(s.url, c, body));
      for (const c of streams) {
        const xs = samples.get(c);
        const pick = (k) => median(xs.map((x) => x[k]));
        rows.push({ parallel, streams: c, tokensPerStream: tokens, aggregateTokPerSec: pick('aggregateTokPerSec'),
          perStreamTokPerSec: pick('perStreamTokPerSec'), ttfbMs: pick('ttfbMs'), ttftMs: pick('ttftMs'), rounds: xs.length });
      }
    } finally {
      await s.stop();
    }
  }
  for (const r of rows) {
    const one = rows.find((x) => x.parallel === r.parallel && x.streams === 1);
    const serial = rows.find((x) => x.parallel === 1 && x.streams === r.streams);
    r.batchGain = one ? r.aggregateTokPerSec / one.aggregateTokPerSec : null;
    r.vsSerial = serial ? r.aggregateTokPerSec / serial.aggregateTokPerSec : null;
  }
  return rows;
}

export function renderServe(rows) {
  const lines = ['parallel streams  aggregate tok/s  per-stream tok/s  ttfb ms  ttft ms  ×1 stream  ×parallel 1'];
  for (const r of rows) {
    lines.push(`${String(r.parallel).padStart(8)} ${String(r.streams).padStart(7)}  ${r.aggregateTokPerSec.toFixed(1).padStart(15)}  ` +
      `${r.perStreamTokPerSec.toFixed(1).padStart(16)}  ${r.ttfbMs.toFixed(1).padStart(7)}  ${r.ttftMs.toFixed(1).padStart(7)}  ` +
      `${r.batchGain.toFixed(2).padStart(9)}  ${r.vsSerial.toFixed(2).padStart(11)}`);
  }
  return lines.join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const argv = process.argv.slice(2);
  const opt = (name) => { const i = argv.indexOf(name); return i >= 0 ? argv[i + 1] : undefined; };
  const quick = argv.includes('--quick');
  let model = opt('--model');
  if (!model && quick) model = path.resolve(REPO, '..', 'shared', 'models', 'stories260K.gguf');
  if (!model) model = (await ensureGguf(opt('--shape') ?? 'stories15M', (opt('--type') ?? 'Q8_0').toUpperCase(), { log: (m) => console.error(m) })).path;
  const rows = await benchServe({
    model, streams: (opt('--streams') ?? '1,4,8').split(',').map(Number), tokens: Number(opt('--tokens') ?? (quick ? 16 : 64)),
    rounds: Number(opt('--rounds') ?? (quick ? 1 : 3)), threads: Number(opt('--threads') ?? 0),
  });
  const report = { date: new Date().toISOString(), node: process.version, cpus: os.cpus().length, loadavg: os.loadavg(),
    model: path.basename(model), results: rows };
  fs.mkdirSync(OUT_DIR, { recursive: true });
  fs.writeFileSync(path.join(OUT_DIR, 'serve.json'), `${JSON.stringify(report, null, 2)}\n`);
  if (argv.includes('--json')) process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  else console.log(renderServe(rows));
}
