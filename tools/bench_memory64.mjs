// tools/bench_memory64.mjs — tools/bench_memory64.sh's driver: loads the kernel modules it built
// (NAME=PATH, wasm32 and wasm64 builds of tools/bench_memory64.c), checks that all give the same
// bits, then times them in turn, the order reversed every round, in process CPU time (other jobs
// on the machine do not stretch it; they still share caches and memory bandwidth). Prints per
// module the median time of one pass, and the medians (with quartiles) of the per-round ratios:
// every NAME64 against its NAME32, and every module against the first of its width. The last
// line is the same as JSON. Needs a runtime with memory64 (Node >= 24).
//
//   node tools/bench_memory64.mjs base32=a.wasm base64=b.wasm work32=c.wasm work64=d.wasm
//        [--type q8_0] [--rounds 15] [--mode decode|hot|prefill] [--variant 0|1] [--reps 3]
//   --mode decode: one token through every matrix of stories110M (weights streamed from memory);
//   hot: layer 0's seven matrices over and over (from cache); prefill: a batch of 16 through the
//   layers (the matrix-matrix kernels). --variant 0: the SIMD128 kernels, 1 (default): the
//   build's (relaxed in a relaxed build). --reps: passes per timing.
import { readFileSync } from 'node:fs';

const TYPES = { q4_0: 2, q4_1: 3, q5_0: 6, q5_1: 7, q8_0: 8, q2_K: 10, q3_K: 11, q4_K: 12, q5_K: 13, q6_K: 14 };
const opts = { type: 'q8_0', rounds: 15, mode: 'decode', variant: 1, reps: 3 };
const mods = [];
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  if (a.startsWith('--')) {
    const k = a.slice(2);
    if (!(k in opts)) throw new Error(`unknown option ${a}`);
    opts[k] = typeof opts[k] === 'number' ? Number(argv[++i]) : argv[++i];
  } else {
    const [name, path] = a.split('=');
    mods.push({ name, path });
  }
}
if (!(opts.type in TYPES)) throw new Error(`--type: one of ${Object.keys(TYPES).join(' ')}`);
if (!['decode', 'hot', 'prefill'].includes(opts.mode)) throw new Error('--mode: decode, hot or prefill');

function instantiate(path) {
  const bytes = readFileSync(path);
  const module = new WebAssembly.Module(bytes);
  const imports = {};
  for (const imp of WebAssembly.Module.imports(module)) {
    imports[imp.module] ??= {};
    if (imp.kind !== 'function') throw new Error(`${path}: unexpected import ${imp.module}.${imp.name}`);
    // emscripten_notify_memory_growth and the WASI calls a standalone module may import: the
    // harness prints nothing and exits never, so each is a no-op returning 0.
    imports[imp.module][imp.name] = () => 0;
  }
  const inst = new WebAssembly.Instance(module, imports);
  inst.exports._initialize?.();
  return inst.exports;
}

for (const m of mods) {
  m.x = instantiate(m.path);
  const rc = m.x.mb_setup(TYPES[opts.type]);
  if (rc !== 0) throw new Error(`${m.name}: mb_setup failed (${rc})`);
}
const pass = (m) =>
  opts.mode === 'prefill' ? m.x.mb_prefill() : m.x.mb_decode(opts.variant, opts.mode === 'hot' ? 1 : 0);
// the bits: every module's output hash the same (and warms every function up to TurboFan)
for (let w = 0; w < 3; w++) {
  const h = mods.map(pass);
  if (h.some((v) => v !== h[0])) {
    console.log(`MISMATCH: ${mods.map((m, i) => `${m.name} ${h[i]}`).join(', ')}`);
    process.exit(1);
  }
}
console.log(`bitwise: the ${mods.length} modules agree`);

const cpu = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e3; // ms
};
const times = mods.map(() => []);
for (let r = 0; r < opts.rounds; r++) {
  const order = mods.map((_, i) => i);
  if (r % 2) order.reverse();
  for (const i of order) {
    const t0 = cpu();
    for (let k = 0; k < opts.reps; k++) pass(mods[i]);
    times[i].push((cpu() - t0) / opts.reps);
  }
}
const quart = (a) => {
  const s = [...a].sort((x, y) => x - y);
  const q = (p) => s[Math.min(s.length - 1, Math.floor(p * (s.length - 1) + 0.5))];
  return [q(0.5), q(0.25), q(0.75)];
};
const result = { type: opts.type, mode: opts.mode, variant: opts.variant, rounds: opts.rounds, modules: {}, ratios: {} };
for (const [i, m] of mods.entries()) {
  result.modules[m.name] = { ms: +quart(times[i])[0].toFixed(3) };
  console.log(`${m.name.padEnd(8)} ${quart(times[i])[0].toFixed(2)} ms per pass (median of ${opts.rounds})`);
}
const ratio = (a, b) => {
  const r = quart(times[a].map((t, k) => t / times[b][k]));
  result.ratios[`${mods[a].name}/${mods[b].name}`] = r.map((v) => +v.toFixed(4));
  console.log(`${`${mods[a].name}/${mods[b].name}`.padEnd(16)} ${r[0].toFixed(3)} [${r[1].toFixed(3)}..${r[2].toFixed(3)}] (time ratio: > 1 slower)`);
};
for (const [i, m] of mods.entries()) {
  const j = mods.findIndex((n) => n.name === m.name.replace(/64$/, '32'));
  if (m.name.endsWith('64') && j >= 0) ratio(i, j);
}
for (const w of ['32', '64']) {
  const idx = mods.map((m, i) => (m.name.endsWith(w) ? i : -1)).filter((i) => i >= 0);
  for (const i of idx.slice(1)) ratio(i, idx[0]);
}
console.log(JSON.stringify(result));
