// protocol.js — the messages between createWorkerEngine() (js/wasmlm.js) and js/worker.js.
// Shared by both sides so the names cannot drift apart. Plain data only: everything here
// crosses postMessage by structured clone. No dependencies; no engine code.
//
// Every request the client posts is {id, type, ...} with a fresh integer id, and gets exactly
// one terminal reply, {id, type: 'result', value} or {id, type: 'error', error}. Before that,
// a request may get any number of non-terminal replies carrying the same id: 'progress' (load)
// and 'token' (generate). An 'abort' request {id, type: 'abort', target} asks the worker to
// abort request `target`; it gets its own terminal reply (value: true if `target` was running).
//
//   client → worker                                  worker → client (same id)
//   {type:'init', options:{wasm?, simd?}}            result {simd}
//   {type:'load', model, tokenizer, nCtx, kvCache}   progress* {progress:{stage,loaded,total}}, result ModelInfo
//   {type:'generate', prompt, params}                token* {token}, result LastResult
//                                                    (error {error, lastResult} when aborted)
//   {type:'abort', target}                           result boolean
//   {type:'tokenize', text, options}                 result Int32Array (buffer transferred)
//   {type:'detokenize', ids}                         result string
//   {type:'free'}                                    result true

/** Version of this message set; the worker echoes it in the 'init' result. */
export const PROTOCOL_VERSION = 1;

/** Request types (client → worker). */
export const Req = Object.freeze({
  INIT: 'init',
  LOAD: 'load',
  GENERATE: 'generate',
  ABORT: 'abort',
  TOKENIZE: 'tokenize',
  DETOKENIZE: 'detokenize',
  FREE: 'free',
});

/** Reply types (worker → client). RESULT and ERROR are terminal: one per request. */
export const Reply = Object.freeze({
  RESULT: 'result',
  ERROR: 'error',
  PROGRESS: 'progress',
  TOKEN: 'token',
});

/**
 * Turns any thrown value into plain data that survives structured clone.
 * @param {unknown} err
 * @returns {{name: string, message: string, code?: string, status?: number|null,
 *            url?: string, httpStatus?: number, stack?: string}}
 */
export function serializeError(err) {
  if (err === null || typeof err !== 'object') {
    return { name: 'Error', message: String(err) };
  }
  const e = /** @type {any} */ (err);
  const out = { name: String(e.name || 'Error'), message: String(e.message ?? e) };
  if (typeof e.code === 'string') out.code = e.code;
  if (typeof e.status === 'number' || e.status === null) out.status = e.status;
  if (typeof e.url === 'string') out.url = e.url;
  if (typeof e.httpStatus === 'number') out.httpStatus = e.httpStatus;
  if (typeof e.stack === 'string') out.stack = e.stack;
  return out;
}
