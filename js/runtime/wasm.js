// wasm.js — the wasm module: which of the builds runs here (dist/wasmlm-relaxed.wasm relaxed
// SIMD, dist/wasmlm.wasm SIMD128, each with a threaded twin -relaxed-mt / -mt, and
// dist/wasmlm-scalar.wasm), decided before anything is fetched so only that one is downloaded
// and compiled; compiling it (streaming from the fetch
// when the server says application/wasm); instantiating it with the few imports it needs. It
// does not start helper threads (js/runtime/threads.js) and holds no engine state (js/engine/engine.js).

import { WasmlmError, jsError } from './errors.js';
import { IS_NODE, fetchOk, locate } from './platform.js';
import { MAX_THREADS, coreCount, threadsUnavailable } from './threads.js';
import { isMemory64Module, memory64Support, wrapExports64 } from './memory64.js';
import { checkOptions } from '../options.js';

// Smallest module using a v128 instruction (from wasm-feature-detect): validates iff SIMD128.
// Both probes are exported for tests/js/startup.test.mjs: web/index.html inlines their bytes.
export const SIMD_PROBE = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1,
  0, 10, 10, 1, 8, 0, 65, 0, 253, 15, 253, 98, 11]);

// A module whose function f returns lane 0 of i32x4.relaxed_dot_i8x16_i7x16_add_s(a, b, c) for
// a = (-128, 127, -1, 5, 0...), b = (127, 127, 3, 100, 0...), c = (1000, 0, 0, 0): 1370. It
// validates iff the runtime has relaxed SIMD; the answer rejects runtimes that compute the
// instruction wrongly (Node 20's baseline compiler Liftoff, with --experimental-wasm-relaxed-simd,
// returns twice the dot product without the accumulator: 740). The second operand stays in
// 0..127, where every conforming implementation agrees.
export const RELAXED_PROBE = (() => {
  const a = [128, 127, 255, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
  const b = [127, 127, 3, 100, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
  const c = [0xe8, 0x03, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
  const body = [0, 0xfd, 12, ...a, 0xfd, 12, ...b, 0xfd, 12, ...c, 0xfd, 0x93, 2, 0xfd, 0x1b, 0, 11];
  return new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 127, 3, 2, 1, 0,
    7, 5, 1, 1, 102, 0, 0, 10, body.length + 2, 1, body.length, ...body]);
})();
export const RELAXED_PROBE_ANSWER = 1370;

/**
 * Whether this runtime runs relaxed SIMD correctly: {ok, why}. `why` says what failed (for
 * error messages and the tests): 'no relaxed SIMD' when the probe does not validate, or the
 * wrong known answer.
 */
export function relaxedSupport() {
  if (relaxedCache) return relaxedCache;
  let why = null;
  try {
    if (!WebAssembly.validate(RELAXED_PROBE)) {
      why = 'this runtime has no WebAssembly relaxed SIMD';
    } else {
      const got = new WebAssembly.Instance(new WebAssembly.Module(RELAXED_PROBE)).exports.f();
      if (got !== RELAXED_PROBE_ANSWER) {
        why = `this runtime computes i32x4.relaxed_dot_i8x16_i7x16_add_s wrongly (${got}, not ` +
          `${RELAXED_PROBE_ANSWER}; Node 20's Liftoff does: use Node >= 22, or --no-liftoff)`;
      }
    }
  } catch (e) {
    why = `the relaxed-SIMD probe failed: ${e?.message ?? e}`;
  }
  relaxedCache = Object.freeze({ ok: !why, why });
  return relaxedCache;
}
let relaxedCache = null;

/** Builds, by name (EngineOptions.build): their files, single-threaded and threaded. */
const BUILD_FILES = {
  relaxed: ['wasmlm-relaxed.wasm', 'wasmlm-relaxed-mt.wasm'],
  simd128: ['wasmlm.wasm', 'wasmlm-mt.wasm'],
  scalar: ['wasmlm-scalar.wasm', null],
};
/** Their memory64 (wasm64) twins (js/runtime/memory64.js): for models past wasm32's 4 GB. No scalar one. */
const BUILD_FILES_64 = {
  relaxed: ['wasmlm64-relaxed.wasm', 'wasmlm64-relaxed-mt.wasm'],
  simd128: ['wasmlm64.wasm', 'wasmlm64-mt.wasm'],
  scalar: [null, null],
};
/** Set when an automatically picked relaxed build could not be fetched or read (an install
 *  without it): later plans pick SIMD128 at once. */
let relaxedMissing = false;

/**
 * 'auto' threads (issue 25): every core the runtime reports, up to MAX_THREADS (16,
 * WLM_MAX_THREADS); in a browser with more than 4 cores one fewer, left to the page's main
 * thread (it renders and runs the page while the engine's threads, all Workers in a worker
 * engine, compute; idle helpers spin about a millisecond before they sleep). Measured on a
 * 16-core Xeon (bench/README.md, 2026-11-28, Node 24): from 8 to 16 threads prefill gained
 * 1.42× and decode 1.39× (native llama.cpp 1.50× and 1.41×), so every core is used; the
 * browser's one fewer is reasoned (the page's own thread), not measured.
 */
export function autoThreads(cores, browser) {
  const n = browser && cores > 4 ? cores - 1 : cores;
  return Math.max(1, Math.min(MAX_THREADS, n));
}

/** Exports the engine calls (tools/exports.txt lists what the build keeps). */
const REQUIRED_EXPORTS = [
  'memory', 'wlm_status_name', 'wlm_model_load_tokenizer', 'wlm_model_free', 'wlm_model_errmsg',
  'wlm_tokenize', 'wlm_token_piece', 'wlm_context_free', 'wlm_context_errmsg', 'wlm_context_reset',
  'wlm_context_n_past', 'wlm_context_memory', 'wlm_eval', 'wlm_logits', 'wlm_generate_begin_text',
  'wlm_generate_next', 'wlm_generate_abort', 'wlm_generate_batch_next', 'wlm_beam_step',
  'wlm_beam_count', 'wlmjs_malloc', 'wlmjs_free', 'wlmjs_model_load', 'wlmjs_model_info',
  'wlmjs_context_new', 'wlmjs_kv_stat', 'wlmjs_gen_params_new', 'wlmjs_gen_params_set',
  'wlmjs_gen_params_add_stop', 'wlmjs_gen_params_add_bias', 'wlmjs_gen_params_add_ban',
  'wlmjs_token_new', 'wlmjs_token_id', 'wlmjs_token_piece', 'wlmjs_token_piece_len',
  'wlmjs_token_prob', 'wlmjs_token_prob_sampled', 'wlmjs_token_n_past', 'wlmjs_token_stop_reason',
  'wlmjs_token_logprob', 'wlmjs_token_seq', 'wlmjs_token_status', 'wlmjs_token_n_probs',
  'wlmjs_token_top_id', 'wlmjs_token_top_prob', 'wlmjs_token_top_logprob',
  'wlmjs_token_top_prob_sampled', 'wlmjs_tokens_new', 'wlmjs_token_at',
  'wlmjs_generate_batch_begin', 'wlmjs_beam_begin', 'wlmjs_beam_field', 'wlmjs_beam_memory',
  'wlm_sampler_preview', 'wlmjs_threadpool_new', 'wlm_threadpool_free', 'wlm_threadpool_running',
  'wlm_context_set_threadpool',
];

/**
 * What createEngine(options) will run, decided from the options and the runtime alone (nothing
 * fetched): {build, simd, threads, wasm, file, explicitThreads, fallback, memory64}. `build` is
 * options.build, or for 'auto' (default) the fastest the runtime runs correctly: 'relaxed'
 * where relaxedSupport() passes, else 'simd128' where WebAssembly SIMD validates, else
 * 'scalar'; `simd: false` means 'scalar'. `threads` is the number to start: 'auto' → autoThreads
 * (the cores, up to 16; a browser's past 4 less one) where threads can run, else 1; a number → that many, clamped to
 * the cores the runtime reports and to MAX_THREADS. `wasm` is options.wasm, or the URL of the
 * build's file (`file`, e.g. 'wasmlm-relaxed-mt.wasm'; null when options.wasm is given).
 * `fallback`: the SIMD128 plan when 'auto' picked relaxed (used if its file is missing).
 * `memory64`: options.memory64 === true, which picks the build's memory64 twin (BUILD_FILES_64);
 * with 'auto' (default) and false the plan is wasm32's, and Engine.load() moves to the twin
 * when a model needs it (js/runtime/memory64.js).
 * Throws WLM_ERR_INVALID_ARG (threads not 'auto' or an integer >= 1; an unknown build; simd:
 * false with a SIMD build; memory64 not 'auto' or a boolean) and WLM_ERR_UNSUPPORTED (more than
 * one thread, after clamping, where threads cannot run; a build the runtime cannot run; memory64:
 * true without memory64 or with the scalar build).
 */
export async function planModule(options = {}) {
  const { wasm, memory64 = 'auto' } = options;
  if (memory64 !== 'auto' && memory64 !== true && memory64 !== false) {
    throw jsError('WLM_ERR_INVALID_ARG', `memory64 must be 'auto', true or false, got ${memory64}`);
  }
  const m64 = memory64 === true && wasm === undefined;
  if (m64 && !memory64Support().ok) throw jsError('WLM_ERR_UNSUPPORTED', `memory64: true: ${memory64Support().why}`);
  let { simd, threads = 'auto', build = 'auto' } = options;
  if (build !== 'auto' && !Object.hasOwn(BUILD_FILES, build)) {
    throw jsError('WLM_ERR_INVALID_ARG', `build must be 'auto', 'relaxed', 'simd128' or 'scalar', got ${build}`);
  }
  if (simd === false) {
    if (build !== 'auto' && build !== 'scalar') {
      throw jsError('WLM_ERR_INVALID_ARG', `build: '${build}' contradicts simd: false`);
    }
    build = 'scalar';
  }
  let auto = false;
  if (build === 'auto') {
    auto = true;
    if (wasm !== undefined) build = 'simd128'; // a module of the caller's: not ours to probe
    else if (!relaxedMissing && WebAssembly.validate(SIMD_PROBE) && relaxedSupport().ok) build = 'relaxed';
    else build = simd || WebAssembly.validate(SIMD_PROBE) ? 'simd128' : 'scalar';
  } else if (wasm === undefined && build === 'relaxed' && !relaxedSupport().ok) {
    throw jsError('WLM_ERR_UNSUPPORTED', `build: 'relaxed': ${relaxedSupport().why}`);
  } else if (wasm === undefined && build === 'simd128' && !WebAssembly.validate(SIMD_PROBE)) {
    throw jsError('WLM_ERR_UNSUPPORTED', "build: 'simd128': this runtime has no WebAssembly SIMD");
  }
  simd = build !== 'scalar';
  if (m64 && !simd) throw jsError('WLM_ERR_UNSUPPORTED', 'memory64: true: there is no scalar memory64 build');
  if (threads !== 'auto' && !(Number.isInteger(threads) && threads >= 1)) {
    throw jsError('WLM_ERR_INVALID_ARG', `threads must be 'auto' or an integer >= 1, got ${threads}`);
  }
  const explicitThreads = threads !== 'auto';
  const cores = Math.max(1, await coreCount());
  const why = !simd ? 'the scalar build has no threads' : threadsUnavailable();
  if (threads === 'auto') {
    threads = why ? 1 : autoThreads(cores, !IS_NODE);
  } else {
    const asked = threads;
    threads = Math.min(threads, cores, MAX_THREADS);
    if (threads > 1 && why) {
      throw jsError('WLM_ERR_UNSUPPORTED', `threads: ${asked}${asked !== threads ? ` (${threads} cores here)` : ''}: ${why}`);
    }
  }
  const plan = (b) => {
    const file = wasm !== undefined ? null : (m64 ? BUILD_FILES_64 : BUILD_FILES)[b][threads > 1 ? 1 : 0];
    return {
      build: b, simd, threads, explicitThreads, file, memory64: m64,
      wasm: file ? new URL(`../../dist/${file}`, import.meta.url) : wasm,
    };
  };
  return { ...plan(build), fallback: auto && build === 'relaxed' ? plan('simd128') : null };
}

/** dist/<file> → the promise of its compiled module: each build is fetched and compiled once
 *  per thread (a page that loads several models, or preload() and then createWorkerEngine()). */
const compiledBuilds = new Map();

/**
 * The compiled module of a planModule() result: options.wasm compiled, or the build it picked
 * from the cache above (compiled now if it is not there; a failure is not cached).
 * Returns {module, name}.
 */
export function compilePlanned(plan) {
  if (!plan.file) return compileWasm(plan.wasm);
  if (!plan.fallback) return compileBuild(plan);
  // relaxed picked by 'auto': an install without its file (built without LLVM 19) runs SIMD128
  // instead: the result then has `fallback` (see settledPlan). One promise per file.
  const key = `auto:${plan.file}`;
  let p = compiledBuilds.get(key);
  if (!p) {
    const { fallback } = plan;
    p = compileBuild(plan).catch((e) => {
      if (e?.code !== 'WLM_ERR_IO') throw e;
      relaxedMissing = true;
      return compileBuild(fallback).then((r) => ({ ...r, fallback }));
    });
    compiledBuilds.set(key, p);
  }
  return p;
}

/** After compilePlanned(plan) resolved to `compiled`: the plan of the build it compiled (`plan`
 *  itself, updated when a relaxed pick fell back to SIMD128). */
export function settledPlan(plan, compiled) {
  if (compiled?.fallback && plan.fallback) Object.assign(plan, plan.fallback, { fallback: null });
  return plan;
}

/** compilePlanned() for one of our builds, through the cache. */
function compileBuild(plan) {
  const { file } = plan;
  let p = compiledBuilds.get(file);
  if (!p) {
    p = compileWasm(plan.wasm);
    compiledBuilds.set(file, p);
    p.catch(() => { if (compiledBuilds.get(file) === p) compiledBuilds.delete(file); });
  }
  return p;
}

/**
 * Adopts a compile of one of the builds that the caller started before this library was loaded
 * — a page's first inline script can pick the build as planModule() does and start
 * `WebAssembly.compileStreaming(fetch(url))` while the library itself still downloads (web/index.html
 * does). `file` names the build in dist/ ('wasmlm-relaxed-mt.wasm', …, as a plan's `file`);
 * `module` is a promise of (or) its WebAssembly.Module, compiled from that file. compilePlanned()
 * of a plan that picks this file then takes it instead of fetching the file again (so does
 * createWorkerEngine(), which posts it to the worker); a plan that picks another file ignores
 * it (a wrong guess costs the caller one download, never a wrong module: the plan still decides,
 * relaxed SIMD's known-answer check included). When `module` rejects (the file missing, a server
 * without application/wasm), compilePlanned() fetches and compiles the file itself, so its
 * errors and the relaxed → SIMD128 fallback are the usual ones. A build already compiled or
 * being compiled is kept (the adopted one is ignored). Throws WLM_ERR_INVALID_ARG for a file
 * that is not one of the builds.
 */
export function adoptCompiled(file, module) {
  if (![...Object.values(BUILD_FILES), ...Object.values(BUILD_FILES_64)].flat().includes(file) || file === null) {
    throw jsError('WLM_ERR_INVALID_ARG', `adoptCompiled: ${file} is not one of the builds (${Object.values(BUILD_FILES).flat().filter(Boolean).join(', ')})`);
  }
  if (compiledBuilds.has(file)) {
    Promise.resolve(module).catch(() => {}); // ignored, its failure too
    return;
  }
  const url = new URL(`../../dist/${file}`, import.meta.url);
  const p = Promise.resolve(module).then((m) => {
    if (!(m instanceof WebAssembly.Module)) throw new TypeError('not a WebAssembly.Module');
    return { module: m, name: url.href };
  }).catch(() => compileWasm(url));
  compiledBuilds.set(file, p);
  p.catch(() => { if (compiledBuilds.get(file) === p) compiledBuilds.delete(file); });
}

/**
 * Starts fetching and compiling the build createEngine(options) / createWorkerEngine(options)
 * will use, so that they find it compiled. Resolves when it is (rejects as they would).
 */
export async function preload(options = {}) {
  checkOptions('preload()', options, 'EngineOptions');
  await compilePlanned(await planModule(options ?? {}));
}

/**
 * Compiles a module source: a WebAssembly.Module (as is), bytes, a Node file path, or a URL
 * (fetched; compiled while it downloads when served as application/wasm). Returns {module, name}.
 */
export async function compileWasm(source) {
  if (source instanceof WebAssembly.Module) return { module: source, name: 'WebAssembly.Module' };
  if (source instanceof ArrayBuffer || ArrayBuffer.isView(source)) {
    return { module: await WebAssembly.compile(source), name: 'bytes' };
  }
  const loc = await locate(source);
  let module;
  try {
    if (loc.path) {
      const fs = await import('node:fs/promises');
      let bytes;
      try {
        bytes = await fs.readFile(loc.path);
      } catch (e) {
        throw new WasmlmError(`cannot read the wasm module ${loc.name}: ${e.message}`,
          'WLM_ERR_IO', null, { url: loc.name, cause: e });
      }
      module = await WebAssembly.compile(bytes);
    } else {
      const res = await fetchOk(loc.url);
      const type = res.headers.get('content-type') || '';
      module = typeof WebAssembly.compileStreaming === 'function' && type.startsWith('application/wasm')
        ? await WebAssembly.compileStreaming(res)
        : await WebAssembly.compile(await res.arrayBuffer());
    }
  } catch (e) {
    if (e instanceof WebAssembly.CompileError) {
      throw new Error(`wasmlm: cannot compile ${loc.name}: ${e.message}` +
        ' (a runtime without WebAssembly SIMD needs createEngine({simd: false}))', { cause: e });
    }
    throw e;
  }
  return { module, name: loc.name };
}

/** The kernels an instantiated module runs ('relaxed', 'simd128', 'scalar'), from its own
 *  wlmjs_kernels export; `guess` for a module without it (an older build passed as options.wasm). */
export function moduleBuild(x, guess) {
  return typeof x.wlmjs_kernels === 'function'
    ? (['scalar', 'simd128', 'relaxed'][x.wlmjs_kernels()] ?? guess) : guess;
}

/**
 * Instantiates the standalone module: imports from its own import list, then _initialize.
 * `sharedMemory` is the memory of the threaded build (which imports it), else null. The
 * returned exports object always has `memory`.
 */
export async function instantiateWasm(module, name, sharedMemory = null) {
  let memory = sharedMemory; // else set after instantiation; the imports below only run later
  const provided = {
    env: {
      memory: sharedMemory,
      emscripten_notify_memory_growth() {},
      // Older Emscripten releases import this for large copies.
      emscripten_memcpy_big(dest, src, n) {
        new Uint8Array(memory.buffer).copyWithin(dest >>> 0, src >>> 0, (src >>> 0) + (n >>> 0));
        return dest;
      },
    },
  };
  const imports = {};
  const missing = [];
  for (const imp of WebAssembly.Module.imports(module)) {
    const fn = provided[imp.module]?.[imp.name];
    if ((imp.kind === 'function' || imp.kind === 'memory') && fn) {
      (imports[imp.module] ??= {})[imp.name] = fn;
    } else {
      missing.push(`${imp.module}.${imp.name} (${imp.kind})`);
    }
  }
  if (missing.length) {
    throw new Error(`wasmlm: ${name} imports ${missing.join(', ')}, which js/wasmlm.js does not ` +
      'provide; the module was built with other flags than tools/build.sh uses');
  }
  const instance = await WebAssembly.instantiate(module, imports);
  let x = sharedMemory ? { ...instance.exports, memory: sharedMemory } : instance.exports;
  if (isMemory64Module(module)) x = wrapExports64(x, module); // pointers as Numbers (js/runtime/memory64.js)
  const absent = REQUIRED_EXPORTS.filter((n) => !(n in x));
  if (absent.length) {
    throw new Error(`wasmlm: ${name} lacks the exports ${absent.join(', ')}; ` +
      'it does not match this version of js/wasmlm.js');
  }
  memory = x.memory;
  if (typeof x._initialize === 'function') x._initialize();
  return x;
}
