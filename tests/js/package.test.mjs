// package.test.mjs — the npm package: `import ... from 'wasmlm'` resolves through package.json's
// "exports" (Node resolves a package's own name from inside it, a self-reference), the "types"
// conditions point at files that exist, and `npm pack --dry-run` ships the library (js/, the
// wasm builds, the C header, README) and nothing from tests/, bench/ or the rest of the repo.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import * as byPath from '../../js/wasmlm.js';
import { REPO } from './_helpers.mjs';

const pkg = JSON.parse(readFileSync(resolve(REPO, 'package.json'), 'utf8'));

test("import from 'wasmlm' (self-reference) is js/wasmlm.js", async () => {
  const lib = await import('wasmlm');
  assert.equal(typeof lib.createEngine, 'function');
  assert.equal(typeof lib.createWorkerEngine, 'function');
  assert.equal(lib.createEngine, byPath.createEngine, 'the same module instance as js/wasmlm.js');
  const engine = await lib.createEngine();
  assert.equal(engine.info, null);
  await engine.free();
});

test("import from 'wasmlm/cache' works in Node (no Cache Storage: nothing is kept)", async () => {
  const { ModelCache, fetchModel, CACHE_NAME } = await import('wasmlm/cache');
  assert.equal(typeof fetchModel, 'function');
  assert.equal(CACHE_NAME, 'wasmlm-models-v1');
  assert.equal(new ModelCache().available, false);
});

test('exports: "types" before "default", every target exists', () => {
  assert.equal(pkg.name, 'wasmlm');
  assert.equal(pkg.type, 'module');
  const root = pkg.exports['.'];
  assert.deepEqual(Object.keys(root), ['types', 'default'], 'TypeScript reads the first matching condition');
  assert.equal(root.default, './js/wasmlm.js');
  assert.equal(root.types, './js/wasmlm.d.ts');
  assert.equal(pkg.types.replace(/^\.\//, ''), 'js/wasmlm.d.ts');
  const targets = Object.values(pkg.exports).flatMap((t) => (typeof t === 'string' ? [t] : Object.values(t)));
  for (const target of targets) assert.ok(existsSync(resolve(REPO, target)), `${target} exists`);
});

test('npm pack ships the library and nothing from tests/ or bench/', async () => {
  const { stdout } = await promisify(execFile)('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'],
    { cwd: REPO, env: { ...process.env, npm_config_loglevel: 'silent', npm_config_update_notifier: 'false' } });
  const [packed] = JSON.parse(stdout);
  const files = packed.files.map((f) => f.path).sort();
  for (const expected of ['package.json', 'README.md', 'js/wasmlm.js', 'js/wasmlm.d.ts', 'js/worker/worker.js',
    'js/worker/protocol.js', 'js/models/cache.js', 'js/models/cache.d.ts', 'js/runtime/threads.js', 'js/runtime/thread.js', 'dist/wasmlm.wasm',
    'dist/wasmlm-scalar.wasm', 'dist/wasmlm-mt.wasm', 'src/wasmlm.h', 'js/backend/select.js',
    'js/backend/webgpu/forward.js']) {
    assert.ok(files.includes(expected), `${expected} is in the package (got ${files.join(', ')})`);
  }
  // js/ and its layers (js/backend/webgpu/), and js/README.md, their map
  const allowed = /^(package\.json|README\.md|LICENSE(\.\w+)?|js\/([\w-]+\/)*[\w.-]+\.(js|d\.ts)|js\/README\.md|dist\/[\w.-]+\.wasm|src\/wasmlm\.h)$/;
  assert.deepEqual(files.filter((f) => !allowed.test(f)), [], 'nothing else');
  assert.deepEqual(files.filter((f) => /^(tests|bench|build|fuzz|tools|web|models|node_modules)\//.test(f)), []);
});
