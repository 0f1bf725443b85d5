// web/page.js — the page's one script, as web/index.html loads it: tools/bundle.mjs bundles this
// file with everything it imports into dist/demo.js. It runs the page (./demo.js, whose main()
// starts at once) and gives index.html's first script what it starts before that: the worker
// engine and the wasm module's compile (js/wasmlm.js) and the default model's download
// (./sources.js), the same module instances the page then uses.

export { createWorkerEngine } from '../js/worker/worker_engine.js';
export { adoptCompiled, preload } from '../js/runtime/wasm.js';
export { defaultEntry, planFromEntry, prefetch } from './sources.js';
import './demo.js';

// The bundle has been evaluated (tests/browser/ttft.test.mjs: the wasm module was requested before).
performance.mark('wasmlm-demo:bundle');
