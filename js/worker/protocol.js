// protocol.js — the messages between createWorkerEngine() (js/worker/worker_engine.js) and js/worker/worker.js.
// Shared by both sides so the names cannot drift apart. Plain data only: everything here
// crosses postMessage by structured clone. No dependencies; no engine code.
//
// Every request the client posts is {id, type, ...} with a fresh integer id, and gets exactly
// one terminal reply, {id, type: 'result', value} or {id, type: 'error', error}. Before that,
// a request may get any number of non-terminal replies carrying the same id: 'progress' (load),
// 'token' (generate, generate_batch, batch_add) and 'step' (beam_search). An 'abort' request
// {id, type: 'abort', target} asks the worker to abort request `target`; it gets its own
// terminal reply (value: true if `target` was running).
//
//   client → worker                                  worker → client (same id)
//   {type:'init', options:{wasm?, simd?, threads?},  result {protocol, threads}
//          compiled?: {file, module}}
//   {type:'load', model, tokenizer, mmproj, nCtx,    progress* {progress:{stage,loaded,total}},
//          kvCache, nSeqMax}                         result ModelInfo
//   {type:'generate', prompt, params}                token* {token: Token}, result LastResult
//                                                    (error {error, lastResult} when aborted)
//   {type:'generate_batch', prompts, params}         token* {token: BatchToken}, result BatchResult
//                                                    (error {error, lastBatchResult} when aborted)
//   {type:'open_batch', options:{maxSequences}}      result {batch, maxSequences} (continuous
//                                                    batching: Engine.openBatch; `batch` names it)
//   {type:'batch_add', batch, prompt, params}        token* {token: BatchToken, live, waiting,
//                                                    stats, nPrompt}, result {result, live,
//                                                    waiting, stats}; an 'abort' of this request
//                                                    cancels the sequence
//   {type:'batch_close', batch}                      result true
//   {type:'beam_search', prompt, params}             step* {step: BeamStep}, result BeamResult
//                                                    (error {error, lastBeamResult} when aborted)
//   {type:'kv_stats'}                                result KvStats
//   {type:'preview', params}                         result PreviewResult
//   {type:'abort', target}                           result boolean
//   {type:'tokenize', text, options}                 result Int32Array (buffer transferred)
//   {type:'detokenize', ids}                         result string
//   {type:'image_tokens', image}                     result number (Engine.imageTokens)
//   {type:'json_schema_to_grammar', schema, options} result {grammar, warnings}
//   {type:'embed', texts, options}                   result Float32Array[] (buffers transferred)
//   {type:'rerank', query, documents, options}       result {index, score}[]
//   {type:'free'}                                    result true
//   {type:'load_draft', options: DraftLoadOptions    progress* {progress}, result DraftInfo | null
//          without onProgress/signal, or null}       (speculative decoding's draft model)
//
// Helper threads. A browser page starts the engine's helper Workers (js/runtime/thread.js) itself when
// the init request's options say `helpersFromClient: true` (it can construct Workers): a Worker
// that a worker constructs (a nested worker) can block its constructor forever in Firefox while
// something listens for new workers (measured under a WebDriver BiDi session; DevTools registers
// the same kind of listener): registering a nested worker then waits on the page's thread.
// These messages carry no id:
//   worker → client  {type:'helper_start', key, url, port}  start a module Worker at `url` and
//                                                           send it {port} (port transferred):
//                                                           the engine talks to it through it
//   worker → client  {type:'helper_stop', key}             terminate that Worker
//   client → worker  {type:'helper_error', key, message}   it failed to start (its error event)
//
// The payloads are the shapes of js/wasmlm.d.ts: `params` is GenerateParams / BatchParams
// (or an array of them) / BeamParams as the caller gave it (a grammar as GBNF text, a
// jsonSchema as an object or JSON text, converted in the worker) (a Map logitBias survives the
// clone); a Token carries its `top` alternatives when params.nProbs > 0; a BatchToken adds
// `seq` and `stopReason`; BeamResult's beams carry their `tokens` as Int32Array. The init
// request's `compiled` is the module the page compiled for dist/<file> (a WebAssembly.Module,
// cloned without recompiling), which the worker uses when it picks that same file.

/** Version of this message set; the worker echoes it in the 'init' result. */
export const PROTOCOL_VERSION = 5;

/** Request types (client → worker). */
export const Req = Object.freeze({
  INIT: 'init',
  LOAD: 'load',
  GENERATE: 'generate',
  GENERATE_BATCH: 'generate_batch',
  OPEN_BATCH: 'open_batch',
  BATCH_ADD: 'batch_add',
  BATCH_CLOSE: 'batch_close',
  BEAM_SEARCH: 'beam_search',
  KV_STATS: 'kv_stats',
  PREVIEW: 'preview',
  ABORT: 'abort',
  TOKENIZE: 'tokenize',
  DETOKENIZE: 'detokenize',
  IMAGE_TOKENS: 'image_tokens',
  JSON_SCHEMA_TO_GRAMMAR: 'json_schema_to_grammar',
  EMBED: 'embed',
  RERANK: 'rerank',
  FREE: 'free',
  LOAD_DRAFT: 'load_draft',
});

/** Helper-thread messages (no id; see above). */
export const Helper = Object.freeze({
  START: 'helper_start',
  STOP: 'helper_stop',
  ERROR: 'helper_error',
});

/** Reply types (worker → client). RESULT and ERROR are terminal: one per request. */
export const Reply = Object.freeze({
  RESULT: 'result',
  ERROR: 'error',
  PROGRESS: 'progress',
  TOKEN: 'token',
  STEP: 'step',
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
