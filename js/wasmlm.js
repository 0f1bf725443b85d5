// wasmlm.js — the public ES module, and only that: it re-exports the API, which lives in one
// file per concern. Identical in Node 20 and browsers, no build step. The C side
// (src/wasmlm.h) parses model files and samples tokens; the JS files move bytes and strings
// across the boundary and turn statuses into errors. js/wasmlm.d.ts describes the API.
//
//   The files behind it sit in folders by layer (js/README.md is the map): runtime/ (the wasm
//   module, threads, memory64, errors), models/ (sources, split GGUFs, downloads, the model
//   store), engine/ (createEngine() and its operations), chat/ (templates, chat completions,
//   tool calls, reasoning), vision/, worker/ (createWorkerEngine() and its worker), backend/
//   (WebGPU), and the drop-in APIs ai_sdk/, prompt_api/, server/.

export { WasmlmError } from './runtime/errors.js';
export { createEngine } from './engine/engine.js';
export { createWorkerEngine } from './worker/worker_engine.js';
export { adoptCompiled, preload } from './runtime/wasm.js';
export { renderChatTemplate } from './chat/chat.js';

// The files the ones above import, named here too so a browser requests the whole module graph
// at once instead of one level per round trip (part of the time to the first token).
import './options.js';
import './engine/params.js';
import './runtime/platform.js';
import './worker/protocol.js';
import './models/source.js';
import './models/split.js';
import './runtime/memory64.js';
import './runtime/threads.js';
import './runtime/wasm.js';
