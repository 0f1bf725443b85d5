// wasmlm.js — the public ES module, and only that: it re-exports the API, which lives in one
// file per concern. Identical in Node 20 and browsers, no build step. The C side
// (src/wasmlm.h) parses model files and samples tokens; the JS files move bytes and strings
// across the boundary and turn statuses into errors. js/wasmlm.d.ts describes the API.
//
//   errors.js        WasmlmError, the C status names, AbortError
//   platform.js      Node or browser: where a source points, fetch, event-loop yields, marks
//   wasm.js          which module runs (SIMD / threads / scalar), compile, instantiate
//   threads.js       the thread pool's helpers (thread.js runs each one)
//   source.js        a model or tokenizer source (bytes, Blob, path, URL) into the wasm heap
//   split.js         a split GGUF's parts (gguf-split) read as one model source
//   memory64.js      models past 4 GB: what a model needs, wasm32 or the memory64 module, its ABI
//   params.js        the caller's options checked and converted for C, C's messages renamed
//   engine.js        createEngine(): the Engine that runs in this thread
//   worker_engine.js createWorkerEngine(): the same interface, the engine in worker.js
//   protocol.js      the messages between worker_engine.js and worker.js
//   cache.js         downloads with checksums and Cache Storage (its own entry, wasmlm/cache)
//   storage/         the model store cache.js exports: resumable, verified downloads into OPFS
//                    (store.js, download.js, integrity.js, opfs.js, cache_storage.js, memory.js,
//                    cross_origin.js, locks.js)
//
//   chat.js          chat templates: messages → prompt text (@huggingface/jinja), Engine.chat
//
//   backend/select.js      which backend runs the forward pass (EngineOptions.backend)
//   backend/webgpu/        the WebGPU backend: device.js (adapter, features, limits), weights.js
//                          (weights into GPU buffers), wgsl_quant.js + wgsl_ops.js (the WGSL
//                          kernels), forward.js (the GPU forward pass), backend.js (the seam to
//                          the C engine's deferred context, src/runtime/deferred.c)

export { WasmlmError } from './runtime/errors.js';
export { createEngine } from './engine/engine.js';
export { createWorkerEngine } from './worker/worker_engine.js';
export { adoptCompiled, preload } from './runtime/wasm.js';
export { renderChatTemplate } from './chat/chat.js';

// The files the ones above import, named here too so a browser requests the whole module graph
// at once instead of one level per round trip (part of the time to the first token).
import './engine/params.js';
import './runtime/platform.js';
import './worker/protocol.js';
import './models/source.js';
import './models/split.js';
import './runtime/memory64.js';
import './runtime/threads.js';
import './runtime/wasm.js';
