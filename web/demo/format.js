// web/demo/format.js — how the demo page writes numbers, token pieces and errors: bytes, times,
// rates, percentages, a token in quotes with visible newlines, an error with its C status name.

export function fmtBytes(n) {
  if (n >= 1e9) return `${(n / 1e9).toFixed(2)} GB`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(1)} MB`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(1)} kB`;
  return `${n} B`;
}

export function fmtMs(ms) {
  return ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(ms < 10 ? 1 : 0)} ms`;
}

export function fmtRate(tokensPerSec) {
  if (!Number.isFinite(tokensPerSec) || tokensPerSec <= 0) return '—';
  return `${tokensPerSec >= 100 ? Math.round(tokensPerSec) : tokensPerSec.toFixed(1)} tok/s`;
}

export function fmtBytesPerSec(n) {
  if (!Number.isFinite(n) || n <= 0) return '';
  return `${(n / 1e6).toFixed(n >= 1e7 ? 0 : n >= 1e6 ? 1 : 2)} MB/s`;
}

export function fmtPercent(p) {
  const pct = p * 100;
  return `${pct >= 10 || pct === 0 ? pct.toFixed(1) : pct.toPrecision(2)} %`;
}

/** A token's text as it reads in a sentence: visible newlines and tabs. */
export function showPiece(text) {
  return `“${text.replace(/\n/g, '↵').replace(/\t/g, '⇥')}”`;
}

/** A one-line description of an error, with the C status name when the engine gave one. */
export function describeError(err) {
  if (!err) return 'unknown error';
  const message = err.message || String(err);
  return err.code && !message.includes(err.code) ? `${message} (${err.code})` : message;
}
