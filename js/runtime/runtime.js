// runtime.js — one wasm module started: planned (which file: build, threads, memory64; js/runtime/wasm.js),
// compiled or taken compiled, instantiated on its memory (shared with the helper threads when
// threaded), and its helper threads started in the background (js/runtime/threads.js). createEngine()
// starts one, and load() another when a model needs the memory64 twin. No engine state here.

import { jsError } from './errors.js';
import { SPAWN_HELPER, importsMemory, sharedMemory, startThreads } from './threads.js';
import { isMemory64Module, sharedMemory64 } from './memory64.js';
import { compilePlanned, instantiateWasm, planModule, settledPlan } from './wasm.js';

/**
 * Plans, compiles and instantiates the module createEngine(options) runs (or load() moves to:
 * options.memory64 true / false), and starts its helper threads in the background:
 * {plan, x, threads, starting} (`starting`: startThreads' promise, or null for one thread).
 * `compiled`: see startEngine.
 */
export async function startRuntime(options, compiled = null) {
  const plan = await planModule(options);
  let mod;
  if (compiled?.module instanceof WebAssembly.Module && plan.file && compiled.file === plan.file) {
    mod = { module: compiled.module, name: plan.wasm.href };
  } else {
    mod = await compilePlanned(plan);
    settledPlan(plan, mod);
  }
  const { module, name } = mod;
  let { threads } = plan;
  let memory = null;
  if (importsMemory(module)) {
    memory = isMemory64Module(module) ? sharedMemory64() : sharedMemory();
  } else if (threads > 1) {
    if (plan.explicitThreads) {
      throw jsError('WLM_ERR_UNSUPPORTED', `threads: ${threads}: ${name} is not the threaded build (dist/wasmlm-mt.wasm)`);
    }
    threads = 1;
  }
  const x = await instantiateWasm(module, name, memory);
  // The helpers start in the background: the engine is usable at once, load() waits for them.
  const starting = threads > 1 ? startThreads(x, module, threads, jsError, options[SPAWN_HELPER]) : null;
  return { plan, x, threads, starting };
}
