// thread.js — one helper thread of the engine's thread pool (wlm_threadpool in src/wasmlm.h):
// a Node worker_thread or a browser module Worker that instantiates the threaded module
// (dist/wasmlm-mt.wasm) on the engine's shared memory, moves its stack pointer to the stack the
// engine allocated for it, and runs wlm_threadpool_work() until the pool is freed. It never
// calls _initialize (the memory is already initialised) and touches nothing else.
//
// Message in: {module, memory, pool, stackTop}. Messages out: {type: 'running'} just before it
// enters the pool's loop, {type: 'exit', status} when the loop returns, {type: 'error', message}
// if instantiation fails. A helper that a page started for an engine in a Worker (js/worker/worker.js,
// js/worker/protocol.js Helper) first gets {port}: the engine's messages then come, and its own go,
// through that MessagePort.

const IS_NODE = typeof process === 'object' && process !== null &&
  typeof process.versions?.node === 'string' && typeof window === 'undefined';

async function run({ module, memory, pool, stackTop }, post) {
  try {
    const instance = await WebAssembly.instantiate(module, {
      env: { memory, emscripten_notify_memory_growth() {} },
    });
    const x = instance.exports;
    // the memory64 modules (their `wasmlm.abi` section, js/runtime/memory64.js) take pointers as BigInt
    const ptr = WebAssembly.Module.customSections(module, 'wasmlm.abi').length ? BigInt : Number;
    x.stackRestore(ptr(stackTop));
    post({ type: 'running' });
    post({ type: 'exit', status: x.wlm_threadpool_work(ptr(pool)) });
  } catch (e) {
    post({ type: 'error', message: e?.message ?? String(e) });
  }
}

if (IS_NODE) {
  const { parentPort } = await import('node:worker_threads');
  parentPort.once('message', (msg) => run(msg, (m) => parentPort.postMessage(m)));
} else {
  self.addEventListener('message', (e) => {
    const port = e.data?.port;
    if (!(port instanceof MessagePort)) {
      run(e.data, (m) => self.postMessage(m));
      return;
    }
    port.addEventListener('message', (m) => run(m.data, (r) => port.postMessage(r)), { once: true });
    port.start();
  }, { once: true });
}
