// prompt_api/errors.js — the Prompt API's errors as the spec names them (DOMException names,
// TypeError / RangeError: index.js's header lists them), and the abort signals they come from.

export function domError(name, message, cause) {
  const e = new DOMException(message, name);
  if (cause !== undefined) Object.defineProperty(e, 'cause', { value: cause, configurable: true, writable: true });
  return e;
}

/** A QuotaExceededError (the platform's class where it has one: whatwg/webidl#1465). */
export function quotaError(requested, quota) {
  const message = `the input needs ${requested} tokens of context, ${quota} are available`;
  if (typeof globalThis.QuotaExceededError === 'function') {
    try {
      return new globalThis.QuotaExceededError(message, { requested, quota });
    } catch { /* an older shape of the class: fall through */ }
  }
  const e = domError('QuotaExceededError', message);
  Object.defineProperties(e, { requested: { value: requested, enumerable: true }, quota: { value: quota, enumerable: true } });
  return e;
}

/** Our errors as the spec's. `phase` 'create' maps load failures to NetworkError /
 *  OperationError; otherwise UnknownError is the fallback. */
export function specError(e, phase = 'prompt') {
  if (e instanceof DOMException || e instanceof TypeError || e instanceof RangeError) return e;
  if (e?.name !== 'WasmlmError') return e; // the page's own (a tool's execute() threw it)
  if (e?.name === 'AbortError' || e?.name === 'QuotaExceededError') return e;
  const code = e?.code;
  const msg = e?.message ?? String(e);
  if (code === 'WLM_ERR_CONTEXT_FULL') return domError('QuotaExceededError', msg, e);
  if (code === 'WLM_ERR_UNSUPPORTED') return domError('NotSupportedError', msg, e);
  if (phase === 'create' && (code === 'WLM_ERR_IO' || code === 'WLM_ERR_CHECKSUM')) return domError('NetworkError', msg, e);
  return domError(phase === 'create' ? 'OperationError' : 'UnknownError', msg, e);
}

export function abortReason(signal) {
  return signal.reason ?? domError('AbortError', 'The operation was aborted.');
}

/** AbortSignal.any, or the same made by hand where a browser lacks it. */
export function anySignal(signals) {
  const list = signals.filter(Boolean);
  if (typeof AbortSignal.any === 'function') return AbortSignal.any(list);
  const ctl = new AbortController();
  for (const s of list) {
    if (s.aborted) {
      ctl.abort(s.reason);
      break;
    }
    s.addEventListener('abort', () => ctl.abort(s.reason), { once: true });
  }
  return ctl.signal;
}
