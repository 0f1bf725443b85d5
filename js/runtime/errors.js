// errors.js — how the library reports failure: WasmlmError (a C status name and number, or
// WLM_ERR_IO for downloads and file reads), the status codes and stop reasons of src/wasmlm.h
// by name, the AbortError a cancelled operation rejects with, and the rebuilding of an error
// that crossed postMessage from js/worker/worker.js. It does not decide what is an error: the C side
// (through js/engine/engine.js) and the argument checks (js/engine/params.js) do.

/** Status codes of enum wlm_status (src/wasmlm.h), by name. */
/** wlm_generate_next / _batch_next's internal status in a deferred context (WLM_NEED_LOGITS,
 *  src/model/model.h): the step waits for the logits the GPU backend supplies, then resumes. */
export const NEED_LOGITS = 2;

export const STATUS = Object.freeze({
  WLM_OK: 0,
  WLM_DONE: 1,
  WLM_ERR_INVALID_ARG: -1,
  WLM_ERR_NOMEM: -2,
  WLM_ERR_FORMAT: -3,
  WLM_ERR_TRUNCATED: -4,
  WLM_ERR_UNSUPPORTED: -5,
  WLM_ERR_TOKENIZER: -6,
  WLM_ERR_CONTEXT_FULL: -7,
  WLM_ERR_STATE: -8,
});

/** enum wlm_stop_reason → LastResult.stopReason. */
export const STOP_REASONS = ['none', 'max_tokens', 'eos', 'stop_string', 'context_full', 'aborted'];

/**
 * An error reported by the engine. `code` is the C status name ('WLM_ERR_FORMAT', …) and
 * `status` its number (-3); errors raised on the JS side before reaching C use the C code that
 * fits (e.g. WLM_ERR_INVALID_ARG, WLM_ERR_STATE), except I/O failures (download or file read),
 * which have code 'WLM_ERR_IO', status null, and carry `url` (and `httpStatus` for HTTP errors).
 */
export class WasmlmError extends Error {
  /**
   * @param {string} message  human-readable; for C errors, the handle's message
   * @param {string} code     'WLM_ERR_…'
   * @param {number|null} [status]  the C status number (null for WLM_ERR_IO)
   * @param {{url?: string, httpStatus?: number, cause?: unknown}} [extra]
   */
  constructor(message, code, status = STATUS[code] ?? null, extra = {}) {
    super(message, extra.cause !== undefined ? { cause: extra.cause } : undefined);
    this.name = 'WasmlmError';
    this.code = code;
    this.status = status;
    if (extra.url !== undefined) this.url = extra.url;
    if (extra.httpStatus !== undefined) this.httpStatus = extra.httpStatus;
    // A grammar, JSON Schema or JSON text error names its place: "grammar line 3, column 7:"
    const at = /\b(grammar|schema|JSON) line (\d+), column (\d+)/.exec(message);
    if (at) {
      this.line = Number(at[2]);
      this.column = Number(at[3]);
    }
  }
}

/** A WasmlmError raised on the JS side, with the C status code `code` names. */
export function jsError(code, message) {
  return new WasmlmError(message, code, STATUS[code]);
}

/** The DOMException 'AbortError' an aborted operation rejects with. */
export function abortError(what = 'The operation') {
  return new DOMException(`${what} was aborted.`, 'AbortError');
}

/** Rebuilds an error that crossed postMessage (see protocol.serializeError). */
export function deserializeError(data) {
  let err;
  if (data.name === 'AbortError') {
    err = new DOMException(data.message, 'AbortError');
  } else if (data.name === 'WasmlmError') {
    err = new WasmlmError(data.message, data.code, data.status ?? null, {
      url: data.url, httpStatus: data.httpStatus,
    });
  } else {
    err = new Error(data.message);
    err.name = data.name;
  }
  if (data.stack && !(err instanceof DOMException)) {
    err.stack = `${err.stack}\n    --- in the worker ---\n${data.stack}`;
  }
  return err;
}
