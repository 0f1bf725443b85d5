// serve_start.test.mjs — `npm start` (tools/serve.mjs --build): the server answers while the
// modules build, a module request waits until its module is complete (never a 404, never a
// partial file) and a failed build answers those requests with its error; and tools/build.sh's
// side of it — --progressive builds the page's first module first and announces each module
// once complete, a module left by a killed build is deleted and rebuilt, --if-needed does
// nothing when all is built. No emcc: the server's builder is a stub that speaks build.sh's
// lines, and build.sh runs in a copy of its directory layout with stub emcmake/cmake (which
// "link" a module by writing it in two halves) and no memory64 toolchain.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { startServer } from '../../tools/serve.mjs';
import { REPO } from './_helpers.mjs';

const run = promisify(execFile);
let dir;
before(() => { dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-serve-start-')); });
after(() => fs.rmSync(dir, { recursive: true, force: true }));

const bytes = (n, seed) => Buffer.from(Array.from({ length: n }, (_, i) => (i * 31 + seed) & 255));
const FIRST = bytes(4096, 1);
const SECOND = bytes(1 << 20, 2);   // written in two halves, with a pause between them

/** A root with the page and the first module, and a stub builder: it announces three modules,
 *  the first already there, writes the second half-way, waits for root/go, completes it, then
 *  fails on the third (exit 2) after an error line. */
function fixture(name) {
  const root = path.join(dir, name);
  fs.mkdirSync(path.join(root, 'web'), { recursive: true });
  fs.mkdirSync(path.join(root, 'dist'));
  fs.writeFileSync(path.join(root, 'web', 'index.html'), '<!doctype html><title>page</title>\n');
  fs.writeFileSync(path.join(root, 'dist', 'wasmlm-relaxed-mt.wasm'), FIRST);
  fs.writeFileSync(path.join(root, 'second.bin'), SECOND);
  const stub = path.join(root, 'stub-build.mjs');
  fs.writeFileSync(stub, `
import fs from 'node:fs';
const say = (s) => process.stderr.write('tools/build.sh: ' + s + '\\n');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
say('building: dist/wasmlm-relaxed-mt.wasm dist/wasmlm-mt.wasm dist/wasmlm-scalar.wasm');
say('built dist/wasmlm-relaxed-mt.wasm (1/3)');
const all = fs.readFileSync('second.bin');
fs.writeFileSync('dist/wasmlm-mt.wasm', all.subarray(0, all.length >> 1));
fs.writeFileSync('half-written', '');
while (!fs.existsSync('go')) await sleep(20);
fs.appendFileSync('dist/wasmlm-mt.wasm', all.subarray(all.length >> 1));
say('built dist/wasmlm-mt.wasm (2/3)');
fs.writeFileSync('dist/wasmlm-scalar.wasm', 'trunc');
while (!fs.existsSync('fail')) await sleep(20);
process.stderr.write('wasm-ld: error: the stub linker broke\\n');
process.exit(2);
`);
  return { root, stub };
}

const waitFor = async (cond) => { while (!cond()) await new Promise((r) => setTimeout(r, 20)); };
const pendingFor = (promise, ms) =>
  Promise.race([promise.then(() => 'answered'), new Promise((r) => setTimeout(() => r('pending'), ms))]);

test('npm start: the page at once, a module request waits for its complete file, a failed build answers 500', async () => {
  const { root, stub } = fixture('a');
  const server = await startServer({ port: 0, root, quiet: true, isolate: true, build: { command: process.execPath, args: [stub] } });
  try {
    const base = `http://127.0.0.1:${server.port}`;
    const page = await fetch(`${base}/web/`);
    assert.equal(page.status, 200);
    assert.match(await page.text(), /<title>page<\/title>/);
    assert.equal(page.headers.get('cross-origin-embedder-policy'), 'require-corp');

    const first = await fetch(`${base}/dist/wasmlm-relaxed-mt.wasm`);
    assert.equal(first.status, 200);
    assert.deepEqual(Buffer.from(await first.arrayBuffer()), FIRST);

    // the second module is half on disk: its request must wait, then get all of it
    await waitFor(() => fs.existsSync(path.join(root, 'half-written')));
    const second = fetch(`${base}/dist/wasmlm-mt.wasm`);
    assert.equal(await pendingFor(second, 400), 'pending', 'a module being built was answered');
    fs.writeFileSync(path.join(root, 'go'), '');
    const res = await second;
    assert.equal(res.status, 200);
    const body = Buffer.from(await res.arrayBuffer());
    assert.equal(body.length, SECOND.length);
    assert.ok(body.equals(SECOND), 'the module served is the complete file');
    assert.equal(server.builder.state, 'running');

    // the third fails: its waiting request (and a later one) get the build's error, not a hang
    const third = fetch(`${base}/dist/wasmlm-scalar.wasm`);
    assert.equal(await pendingFor(third, 300), 'pending', 'a module not yet built was answered');
    fs.writeFileSync(path.join(root, 'fail'), '');
    for (const r of [await third, await fetch(`${base}/dist/wasmlm-scalar.wasm`)]) {
      assert.equal(r.status, 500);
      const text = await r.text();
      assert.match(text, /dist\/wasmlm-scalar\.wasm was not built: the build failed \(exit code 2/);
      assert.match(text, /the stub linker broke/);
    }
    const done = await server.builder.done;
    assert.equal(done.ok, false);
    assert.equal(done.code, 2);
    // what was built is still served, and so is the page
    assert.equal((await fetch(`${base}/dist/wasmlm-mt.wasm`)).status, 200);
    assert.equal((await fetch(`${base}/web/`)).status, 200);
  } finally {
    await server.close();
  }
});

test('npm start: a builder that cannot run is reported, and a module without a file gets its error', async () => {
  const { root } = fixture('b');
  const server = await startServer({ port: 0, root, quiet: true, build: { command: path.join(root, 'no-such-builder') } });
  try {
    const r = await fetch(`http://127.0.0.1:${server.port}/dist/wasmlm-mt.wasm`);
    assert.equal(r.status, 500);
    assert.match(await r.text(), /the build failed \(cannot run it: .*ENOENT/);
    // a module that is there (built earlier) is served
    assert.equal((await fetch(`http://127.0.0.1:${server.port}/dist/wasmlm-relaxed-mt.wasm`)).status, 200);
  } finally {
    await server.close();
  }
});

test('startServer rejects a malformed build option', async () => {
  await assert.rejects(startServer({ port: 0, quiet: true, build: 'yes' }), /build must be true, false or \{command, args\}/);
  await assert.rejects(startServer({ port: 0, quiet: true, build: { command: 'true', argv: [] } }), /build: unknown option argv \(command, args\)/);
});

/** A copy of tools/build.sh in a directory of its own, with stub emcmake/cmake on the PATH: the
 *  stub "make" links a module (writes MODULE_BYTES, in two halves) only when its file is
 *  missing, as make skips an output newer than its inputs, even a truncated one. Every cmake
 *  and toolchain call is logged to calls.log. STUB_FAIL names a target whose link fails. */
const MODULE_BYTES = bytes(64 << 10, 3);
function buildFixture(name = 'build-sh') {
  const root = path.join(dir, name);
  for (const d of ['tools/wasm64', 'bin', 'src', 'cmake', 'dist']) fs.mkdirSync(path.join(root, d), { recursive: true });
  fs.copyFileSync(path.join(REPO, 'tools/build.sh'), path.join(root, 'tools/build.sh'));
  fs.writeFileSync(path.join(root, 'tools/bundle.mjs'), '// stub: no bundles\n');
  fs.writeFileSync(path.join(root, 'tools/exports.txt'), '');
  fs.writeFileSync(path.join(root, 'CMakeLists.txt'), '');
  fs.writeFileSync(path.join(root, 'src/a.c'), '');
  const old = new Date(Date.now() - 3600e3);
  for (const f of ['tools/exports.txt', 'CMakeLists.txt', 'src/a.c']) fs.utimesSync(path.join(root, f), old, old);
  fs.writeFileSync(path.join(root, 'tools/wasm64/toolchain.sh'),
    'echo toolchain >> calls.log\nif [ -n "$STUB_M64" ]; then echo "$PWD/em64"; exit 0; fi\n' +
    'echo "missing a stub toolchain" >&2\nexit 1\n');
  fs.writeFileSync(path.join(root, 'bin/emcmake'), '#!/bin/sh\nexec "$@"\n', { mode: 0o755 });
  fs.writeFileSync(path.join(root, 'module.bin'), MODULE_BYTES);
  fs.writeFileSync(path.join(root, 'bin/cmake'), `#!${process.execPath}
const fs = require('node:fs');   // CommonJS: an extensionless script
const a = process.argv.slice(2);
fs.appendFileSync('calls.log', 'cmake ' + a.join(' ') + '\\n');
if (a[0] === '-S') {
  fs.mkdirSync('build/wasm', { recursive: true });
  fs.writeFileSync('build/wasm/relaxed-status.txt', 'ok\\n');
  fs.writeFileSync('build/wasm/CMakeCache.txt', 'WASMLM_MEMORY64_MODULES:STRING=64;64-mt\\n');
  const em64 = a.find((x) => x.startsWith('-DWASMLM_EM64='));
  if (em64 !== undefined || !fs.existsSync('build/wasm/memory64-status.txt')) {
    fs.writeFileSync('build/wasm/memory64-status.txt', em64?.length > '-DWASMLM_EM64='.length ? 'ok\\n'
      : 'the memory64 modules are not built: no toolchain\\n');
  }
  process.exit(0);
}
const targets = a.slice(a.indexOf('--target') + 1);
const all = fs.readFileSync('module.bin');
for (const t of targets) {
  const file = 'dist/wasmlm' + t.slice('wasmlm_module'.length).replaceAll('_', '-') + '.wasm';
  if (fs.existsSync(file)) continue;
  fs.writeFileSync(file, all.subarray(0, all.length >> 1));
  if (t === process.env.STUB_FAIL) { console.error('wasm-ld: error: stub failure in ' + t); process.exit(2); }
  fs.appendFileSync(file, all.subarray(all.length >> 1));
}
`, { mode: 0o755 });
  const env = { ...process.env, PATH: `${path.join(root, 'bin')}:${process.env.PATH}`, ISOLATE: '' };
  const build = async (args, extraEnv = {}) => {
    fs.writeFileSync(path.join(root, 'calls.log'), '');
    try {
      const { stderr } = await run('bash', [path.join(root, 'tools/build.sh'), ...args], { cwd: root, env: { ...env, ...extraEnv } });
      return { code: 0, log: stderr, calls: fs.readFileSync(path.join(root, 'calls.log'), 'utf8') };
    } catch (err) {
      if (typeof err.code !== 'number') throw err;
      return { code: err.code, log: err.stderr, calls: fs.readFileSync(path.join(root, 'calls.log'), 'utf8') };
    }
  };
  return { root, build };
}

test('tools/build.sh --progressive: the first module first, each announced when complete; a killed build\'s module is rebuilt', async () => {
  const { root, build } = buildFixture();
  const W32 = ['dist/wasmlm-relaxed-mt.wasm', 'dist/wasmlm-mt.wasm', 'dist/wasmlm.wasm', 'dist/wasmlm-relaxed.wasm', 'dist/wasmlm-scalar.wasm'];

  let r = await build(['--wasm-only', '--if-needed', '--progressive']);
  assert.equal(r.code, 0, r.log);
  const lines = r.log.split('\n').filter((l) => l.startsWith('tools/build.sh: buil'));
  assert.deepEqual(lines, [
    `tools/build.sh: building: ${W32.join(' ')} dist/wasmlm64.wasm dist/wasmlm64-mt.wasm`,
    'tools/build.sh: built dist/wasmlm-relaxed-mt.wasm (1/7)',
    'tools/build.sh: built dist/wasmlm-mt.wasm (2/7)',
    'tools/build.sh: built dist/wasmlm.wasm (3/7)',
    'tools/build.sh: built dist/wasmlm-relaxed.wasm (4/7)',
    'tools/build.sh: built dist/wasmlm-scalar.wasm (5/7)',
    'tools/build.sh: building: ',   // no memory64 toolchain here: none of those
  ]);
  // one module per cmake call, the page's first first, all before the memory64 toolchain
  const calls = r.calls.split('\n').filter((l) => l === 'toolchain' || l.includes('--build'))
    .map((l) => l.replace(/ -j\d+ /, ' '));
  assert.deepEqual(calls, [
    ...W32.map((m) => `cmake --build build/wasm --target wasmlm_module${m.slice('dist/wasmlm'.length, -'.wasm'.length).replaceAll('-', '_')}`),
    'toolchain',
  ]);
  for (const m of W32) assert.ok(fs.readFileSync(path.join(root, m)).equals(MODULE_BYTES), m);
  assert.equal(fs.readFileSync(path.join(root, 'build/wasm/modules-pending.txt'), 'utf8'), '');

  // all built: --if-needed does nothing
  r = await build(['--wasm-only', '--if-needed', '--progressive']);
  assert.equal(r.code, 0, r.log);
  assert.equal(r.calls, '');
  assert.doesNotMatch(r.log, /building:/);

  // a link that fails leaves its half-written module recorded as pending ...
  fs.rmSync(path.join(root, 'dist/wasmlm-scalar.wasm'));
  r = await build(['--only', 'wasmlm-scalar.wasm'], { STUB_FAIL: 'wasmlm_module_scalar' });
  assert.notEqual(r.code, 0);
  assert.equal(fs.statSync(path.join(root, 'dist/wasmlm-scalar.wasm')).size, MODULE_BYTES.length >> 1);
  assert.equal(fs.readFileSync(path.join(root, 'build/wasm/modules-pending.txt'), 'utf8'), 'dist/wasmlm-scalar.wasm\n');
  // ... which the stub make would keep (it is newer than the sources): the next --if-needed run
  // deletes it, so it is linked again, whole
  r = await build(['--wasm-only', '--if-needed']);
  assert.equal(r.code, 0, r.log);
  assert.match(r.log, /deleting dist\/wasmlm-scalar\.wasm: an earlier build was stopped before it was complete/);
  assert.ok(fs.readFileSync(path.join(root, 'dist/wasmlm-scalar.wasm')).equals(MODULE_BYTES));
  assert.match(r.calls, /--target wasmlm_module wasmlm_module_scalar wasmlm_module_mt wasmlm_module_relaxed wasmlm_module_relaxed_mt\n/);
  assert.equal(fs.readFileSync(path.join(root, 'build/wasm/modules-pending.txt'), 'utf8'), '');

  // --first: the page's first module only; a bad --only is refused
  fs.rmSync(path.join(root, 'dist/wasmlm-relaxed-mt.wasm'));
  r = await build(['--first', '--if-needed']);
  assert.equal(r.code, 0, r.log);
  assert.match(r.calls, /--target wasmlm_module_relaxed_mt\n/);
  assert.doesNotMatch(r.calls, /toolchain/);
  // ISOLATE=0 (npm start without threads): the page's first module is the one-thread one
  fs.rmSync(path.join(root, 'dist/wasmlm-relaxed.wasm'));
  r = await build(['--first', '--if-needed'], { ISOLATE: '0' });
  assert.equal(r.code, 0, r.log);
  assert.match(r.calls, /--target wasmlm_module_relaxed\n/);
  r = await build(['--only', 'nope.wasm']);
  assert.equal(r.code, 1);
  assert.match(r.log, /--only needs a module name such as wasmlm-mt\.wasm, got 'nope\.wasm'/);
});

test('tools/build.sh --progressive: the memory64 modules last, once their toolchain is there', async () => {
  const { root, build } = buildFixture('build-sh-m64');
  const r = await build(['--wasm-only', '--progressive'], { STUB_M64: '1' });
  assert.equal(r.code, 0, r.log);
  const lines = r.log.split('\n').filter((l) => /^tools\/build\.sh: (building:|built)/.test(l));
  assert.deepEqual(lines.slice(-3), [
    'tools/build.sh: building: dist/wasmlm64.wasm dist/wasmlm64-mt.wasm',
    'tools/build.sh: built dist/wasmlm64.wasm (6/7)',
    'tools/build.sh: built dist/wasmlm64-mt.wasm (7/7)',
  ]);
  const calls = r.calls.split('\n').filter((l) => l === 'toolchain' || l.includes('--build')).map((l) => l.split(' ').at(-1));
  assert.deepEqual(calls.slice(-3), ['toolchain', 'wasmlm_module64', 'wasmlm_module64_mt']);
  for (const m of ['dist/wasmlm64.wasm', 'dist/wasmlm64-mt.wasm']) assert.ok(fs.readFileSync(path.join(root, m)).equals(MODULE_BYTES), m);
});
