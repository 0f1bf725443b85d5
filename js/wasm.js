// wasm.js — the wasm module: which of the three builds runs here (dist/wasmlm.wasm SIMD128,
// dist/wasmlm-mt.wasm SIMD128 + threads, dist/wasmlm-scalar.wasm), decided before anything is
// fetched so only that one is downloaded and compiled; compiling it (streaming from the fetch
// when the server says application/wasm); instantiating it with the few imports it needs. It
// does not start helper threads (js/threads.js) and holds no engine state (js/engine.js).

import { WasmlmError, jsError } from './errors.js';
import { fetchOk, locate } from './platform.js';
import { MAX_THREADS, coreCount, threadsUnavailable } from './threads.js';

// Smallest module using a v128 instruction (from wasm-feature-detect): validates iff SIMD128.
const SIMD_PROBE = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1,
  0, 10, 10, 1, 8, 0, 65, 0, 253, 15, 253, 98, 11]);

/** 'auto' threads: every core up to this many (decode is bound by memory bandwidth, which a
 *  few cores already saturate). */
const AUTO_MAX_THREADS = 4;

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
 * fetched): {simd, threads, wasm, file, explicitThreads}. `threads` is the number to start:
 * 'auto' → the cores (at most AUTO_MAX_THREADS) where threads can run, else 1; a number → that
 * many, clamped to the cores the runtime reports and to MAX_THREADS. `wasm` is options.wasm, or
 * the URL of the build that fits (`file`, e.g. 'wasmlm-mt.wasm'; null when options.wasm is
 * given). Throws WLM_ERR_INVALID_ARG (threads not 'auto' or an integer >= 1) and
 * WLM_ERR_UNSUPPORTED (more than one thread, after clamping, where threads cannot run).
 */
export async function planModule(options = {}) {
  const { wasm } = options;
  let { simd, threads = 'auto' } = options;
  if (simd === undefined) simd = wasm !== undefined || WebAssembly.validate(SIMD_PROBE);
  if (threads !== 'auto' && !(Number.isInteger(threads) && threads >= 1)) {
    throw jsError('WLM_ERR_INVALID_ARG', `threads must be 'auto' or an integer >= 1, got ${threads}`);
  }
  const explicitThreads = threads !== 'auto';
  const cores = Math.max(1, await coreCount());
  const why = !simd ? 'the scalar build has no threads' : threadsUnavailable();
  if (threads === 'auto') {
    threads = why ? 1 : Math.min(AUTO_MAX_THREADS, cores, MAX_THREADS);
  } else {
    const asked = threads;
    threads = Math.min(threads, cores, MAX_THREADS);
    if (threads > 1 && why) {
      throw jsError('WLM_ERR_UNSUPPORTED', `threads: ${asked}${asked !== threads ? ` (${threads} cores here)` : ''}: ${why}`);
    }
  }
  const file = wasm !== undefined ? null
    : !simd ? 'wasmlm-scalar.wasm' : threads > 1 ? 'wasmlm-mt.wasm' : 'wasmlm.wasm';
  return {
    simd: !!simd, threads, explicitThreads, file,
    wasm: file ? new URL(`../dist/${file}`, import.meta.url) : wasm,
  };
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
  const x = sharedMemory ? { ...instance.exports, memory: sharedMemory } : instance.exports;
  const absent = REQUIRED_EXPORTS.filter((n) => !(n in x));
  if (absent.length) {
    throw new Error(`wasmlm: ${name} lacks the exports ${absent.join(', ')}; ` +
      'it does not match this version of js/wasmlm.js');
  }
  memory = x.memory;
  if (typeof x._initialize === 'function') x._initialize();
  return x;
}
