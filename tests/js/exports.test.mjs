// The wasm ABI: tools/exports.txt is the one list of exports. Every name in it must be exported
// by every module and declared in C (src/wasmlm.h for wlm_*, src/wasm_exports.c for wlmjs_*),
// and every function the header declares that JS needs must be in the list.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';

const root = new URL('../../', import.meta.url);
const read = (p) => fs.readFileSync(new URL(p, root), 'utf8');
const list = read('tools/exports.txt').split('\n').map((s) => s.trim()).filter(Boolean);
const header = read('src/wasmlm.h');
const glue = read('src/wasm_exports.c');

test('every listed export is declared in C', () => {
  for (const name of list) {
    const src = name.startsWith('wlmjs_') ? glue : header;
    assert.match(src, new RegExp(`\\b${name}\\s*\\(`), `${name} is not declared`);
  }
});

test('every wlmjs_ accessor in wasm_exports.c is listed', () => {
  const defined = [...glue.matchAll(/^API [^(]*?\b(wlmjs_\w+)\s*\(/gm)].map((m) => m[1]);
  assert.ok(defined.length > 10);
  assert.deepEqual(defined.filter((n) => !list.includes(n)), []);
});

// the relaxed-SIMD modules where this machine built them (tools/build.sh says when it did not);
// compiling them needs relaxed SIMD (Node >= 22: tests/js/build.test.mjs runs this check there)
const relaxed = fs.existsSync(new URL('dist/wasmlm-relaxed.wasm', root)) &&
  WebAssembly.validate(new Uint8Array(fs.readFileSync(new URL('dist/wasmlm-relaxed.wasm', root))))
  ? ['dist/wasmlm-relaxed.wasm', 'dist/wasmlm-relaxed-mt.wasm'] : [];
// the memory64 modules where built, in a runtime with memory64 (Node 24: tools/test.sh runs this
// file there too)
const memory64 = ['dist/wasmlm64.wasm', 'dist/wasmlm64-mt.wasm', 'dist/wasmlm64-relaxed.wasm',
  'dist/wasmlm64-relaxed-mt.wasm'].filter((f) => fs.existsSync(new URL(f, root)) &&
  WebAssembly.validate(new Uint8Array(fs.readFileSync(new URL(f, root)))));
for (const file of ['dist/wasmlm.wasm', 'dist/wasmlm-scalar.wasm', 'dist/wasmlm-mt.wasm', ...relaxed, ...memory64]) {
  const threaded = file.endsWith('-mt.wasm');
  test(`${file} exports the listed functions, imports only memory growth${threaded ? ' and its shared memory' : ''}`, () => {
    const mod = new WebAssembly.Module(fs.readFileSync(new URL(file, root)));
    const exported = new Set(WebAssembly.Module.exports(mod).map((e) => e.name));
    for (const name of list) assert.ok(exported.has(name), `${file} lacks ${name}`);
    // helpers (js/runtime/thread.js) move their stack pointer with stackRestore
    if (threaded) assert.ok(exported.has('stackRestore') && !exported.has('memory'));
    assert.deepEqual(WebAssembly.Module.imports(mod).map((i) => `${i.module}.${i.name}`).sort(),
      threaded ? ['env.emscripten_notify_memory_growth', 'env.memory'] : ['env.emscripten_notify_memory_growth']);
  });
}
