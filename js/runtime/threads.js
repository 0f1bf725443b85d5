// threads.js — the engine's helper threads (wlm_threadpool in src/wasmlm.h), for js/engine/engine.js
// and the benchmarks: whether threads can run here, the threaded module's shared memory, and
// starting / stopping the n - 1 helpers (js/runtime/thread.js) of a pool. Node (worker_threads) and
// browsers (module Workers; the page must be cross-origin isolated) alike. Internal: the public
// way is createEngine({threads}).

const IS_NODE = typeof process === 'object' && process !== null &&
  typeof process.versions?.node === 'string' && typeof window === 'undefined';

/** A plain Error with a `code` (js/engine/engine.js passes its WasmlmError factory instead). */
const plainError = (code, message) => Object.assign(new Error(message), { code });

export const MAX_THREADS = 16;             // WLM_MAX_THREADS
const HELPER_STACK = 1 << 20;       // bytes of wasm stack per helper thread
const HELPER_START_MS = 30000;      // a helper that is not running by then is given up

/** Why threads cannot run here, or null when they can. */
export function threadsUnavailable() {
  if (!IS_NODE && globalThis.crossOriginIsolated !== true) { // (browsers then hide SharedArrayBuffer)
    return 'the page is not cross-origin isolated (serve it with the headers ' +
      'Cross-Origin-Opener-Policy: same-origin and Cross-Origin-Embedder-Policy: require-corp)';
  }
  if (typeof SharedArrayBuffer !== 'function') return 'this runtime has no SharedArrayBuffer';
  if (!IS_NODE && typeof Worker !== 'function') return 'this context cannot start Workers';
  return null;
}

/** Logical cores, as the runtime reports them (1 when it does not). */
export async function coreCount() {
  if (IS_NODE) {
    const os = await import('node:os');
    return os.availableParallelism?.() ?? os.cpus().length ?? 1;
  }
  return globalThis.navigator?.hardwareConcurrency ?? 1;
}

/**
 * The key of an engine option (createEngine's options object, internal) that replaces how a
 * helper is started: a function (url) → the helper as {post, onMessage, onError, terminate}, or
 * its promise. js/worker/worker.js sets it to start helpers through the page (js/worker/protocol.js Helper).
 */
export const SPAWN_HELPER = Symbol('wasmlm.spawnHelper');

/** A helper running js/runtime/thread.js (`url`), as {post, onMessage, onError, terminate} in Node and
 *  browsers: a worker_thread, or a module Worker of this context. */
async function spawnHelper(url) {
  if (IS_NODE) {
    const { Worker: NodeWorker } = await import('node:worker_threads');
    const w = new NodeWorker(url);
    // an idle helper never keeps the process alive (unref again after each listener: adding a
    // 'message' listener refs the worker's port)
    w.unref();
    return {
      post: (m) => w.postMessage(m),
      onMessage: (fn) => { w.on('message', fn); w.unref(); },
      onError: (fn) => { w.on('error', fn); w.unref(); },
      terminate: () => w.terminate(),
    };
  }
  const w = new Worker(url, { type: 'module' });
  return {
    post: (m) => w.postMessage(m),
    onMessage: (fn) => w.addEventListener('message', (e) => fn(e.data)),
    onError: (fn) => w.addEventListener('error', (e) => fn(e.error ?? new Error(e.message))),
    terminate: () => w.terminate(),
  };
}

/**
 * Creates a pool of n threads (wlm_threadpool_new) and starts its n - 1 helpers, each on its
 * own 1 MiB stack in wasm memory; resolves when every helper runs the pool's loop. Returns
 * {n, pool, helpers, stacks}; throws (after cleaning up) when the pool or a helper fails.
 * `spawn`: how a helper starts (see SPAWN_HELPER; default: a Worker / worker_thread of this
 * context).
 */
export async function startThreads(x, module, n, error = plainError, spawn = spawnHelper) {
  const slot = x.wlmjs_malloc(4) >>> 0;
  if (!slot) throw error('WLM_ERR_NOMEM', 'cannot allocate 4 bytes');
  const pool = x.wlmjs_threadpool_new(n, slot) >>> 0;
  const rc = new DataView(x.memory.buffer).getInt32(slot, true);
  x.wlmjs_free(slot);
  if (!pool) {
    const code = { [-1]: 'WLM_ERR_INVALID_ARG', [-5]: 'WLM_ERR_UNSUPPORTED' }[rc] ?? 'WLM_ERR_NOMEM';
    throw error(code, `cannot create a pool of ${n} threads (${code})`);
  }
  const threads = { n, pool, helpers: [], stacks: [] };
  try {
    const started = [];
    for (let i = 1; i < n; i++) {
      const stack = x.wlmjs_malloc(HELPER_STACK) >>> 0;
      if (!stack) throw error('WLM_ERR_NOMEM', 'cannot allocate a helper thread\'s stack');
      threads.stacks.push(stack);
      const helper = await spawn(new URL('./thread.js', import.meta.url));
      threads.helpers.push(helper);
      started.push(new Promise((resolve, reject) => {
        helper.onMessage((m) => {
          if (m?.type === 'running') resolve();
          else if (m?.type === 'error') reject(new Error(`wasmlm helper thread: ${m.message}`));
        });
        helper.onError((e) => reject(new Error(`wasmlm helper thread: ${e?.message ?? e}`)));
      }));
      helper.post({ module, memory: x.memory, pool, stackTop: (stack + HELPER_STACK) & ~15 });
    }
    let timer;
    const timeout = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`wasmlm: helper threads did not start within ${HELPER_START_MS} ms`)), HELPER_START_MS);
    });
    try {
      await Promise.race([Promise.all(started), timeout]);
      // 'running' is posted just before the loop is entered: wait for the pool to count them
      while (x.wlm_threadpool_running(pool) < n - 1) await new Promise((r) => setTimeout(r, 1));
    } finally {
      clearTimeout(timer);
    }
  } catch (e) {
    stopThreads(x, threads);
    throw e;
  }
  return threads;
}

/**
 * Frees the pool (its helpers leave their loop) and terminates the helpers. If some helper never
 * entered the loop (a failed start), every helper is terminated and the pool's few bytes are
 * left allocated instead: wlm_threadpool_free would wait for a terminated helper forever.
 */
export function stopThreads(x, threads) {
  if (x.wlm_threadpool_running(threads.pool) === threads.helpers.length) {
    x.wlm_threadpool_free(threads.pool);
  }
  for (const h of threads.helpers) h.terminate();
  for (const s of threads.stacks) x.wlmjs_free(s);
  threads.helpers = [];
  threads.stacks = [];
}

/** Whether the module is the threaded build: it imports its (shared) memory. */
export function importsMemory(module) {
  return WebAssembly.Module.imports(module).some((i) => i.kind === 'memory');
}

/** The threaded build's memory: 16 MiB to start, growable to 4 GiB (its declared limits). */
export function sharedMemory() {
  return new WebAssembly.Memory({ initial: 256, maximum: 65536, shared: true });
}
