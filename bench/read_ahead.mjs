// bench/read_ahead.mjs — the quantized matrix-vector kernels with and without their read-ahead
// (EngineOptions.readAhead true / false; js/runtime/read_ahead.js), decode tokens/s side by side on one
// machine, and what readAhead 'auto' chooses there (issue 25: an Intel Xeon gained from the
// read-ahead, an AMD Zen 4 loses by it). Each measurement is a fresh engine: load, 8 warm-up
// tokens, then 48 greedy tokens after a short prompt (EOS banned); rounds alternate on and off;
// medians. One JSON line per file and thread count on stdout.
//
//   node bench/read_ahead.mjs FILE.gguf [FILE2.gguf ...] [--threads 1,8] [--rounds 3]

import { createEngine } from '../js/wasmlm.js';

const args = process.argv.slice(2);
const files = [];
let threads = [1], rounds = 3;
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--threads') threads = args[++i].split(',').map(Number);
  else if (args[i] === '--rounds') rounds = Number(args[++i]);
  else files.push(args[i]);
}
if (!files.length) throw new Error('usage: node bench/read_ahead.mjs FILE.gguf [...] [--threads 1,8] [--rounds 3]');

const median = (v) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];

/** Decode tokens/s of one fresh engine, and its lastResult.readAhead. */
async function decode(file, nThreads, readAhead) {
  const e = await createEngine({ threads: nThreads, readAhead });
  try {
    await e.load({ model: file, nCtx: 512 });
    await e.complete('Once upon a time', { maxTokens: 8, temperature: 0 });
    const r = await e.complete('Once upon a time there was a little girl', {
      maxTokens: 48, temperature: 0, bannedTokens: e.info.eosId >= 0 ? [e.info.eosId] : [],
    });
    return { tps: r.decodeTokensPerSec, readAhead: r.readAhead, build: e.info.build, threads: e.threads };
  } finally {
    await e.free();
  }
}

for (const file of files) {
  for (const t of threads) {
    const on = [], off = [];
    let auto = null, build = null, nThreads = t;
    for (let r = 0; r < rounds; r++) {
      for (const ra of [true, false]) {
        const m = await decode(file, t, ra);
        (ra ? on : off).push(m.tps);
        build = m.build;
        nThreads = m.threads;
      }
      if (r === 0) auto = (await decode(file, t, 'auto')).readAhead;
    }
    console.log(JSON.stringify({
      file: file.split('/').pop(), build, threads: nThreads, onTps: median(on), offTps: median(off),
      offOverOn: +(median(off) / median(on)).toFixed(3), on, off, auto,
    }));
  }
}
