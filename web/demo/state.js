// web/demo/state.js — the page state every part shares: `app` (the loaded engine, the load and
// generation in progress, the token inspector's state), body[data-state] with the controls it
// enables, the status line and the error shown under the output.

export const $ = (id) => document.getElementById(id);

/** Page state shared by the modules; engine and info are the loaded model's. */
export const app = {
  createWorkerEngine: null,
  sources: null,     // ./sources.js
  entries: [],
  engine: null,      // the loaded model's engine (kept while another model loads)
  info: null,
  loaded: null,      // {label, entryId, local, status, loadTime} of the model app.engine holds
  loadSeq: 0,
  lastPlan: null,    // the plan of the last load started (the backend picker loads it again)
  loadController: null,
  genController: null,
  localPending: { model: null, tokenizer: null, kind: null, mmproj: null },
  activeToken: null, // the token span that takes the output's Tab stop (roving tabindex)
  tokenTops: new WeakMap(), // token span → its top alternatives (Token.top)
  lastParams: null,  // the parameters of the last generation (previews start from them)
  previewTimer: 0,
  previewSeq: 0,     // a newer preview (or a new token) supersedes an older one
  previews: 0,       // previews drawn, exposed as #prob-chart[data-previews] for tests
  chat: null,        // chat.js: {canRegenerate(), hasConversation()}
  previewAttempts: 0, // previews run to their end, drawn or not: #prob-chart[data-preview-attempts]
};

/** Sets body[data-state] and enables the controls that make sense in that state. */
export function setState(state) {
  document.body.dataset.state = state;
  const busy = state === 'generating';
  $('generate').disabled = busy || state === 'loading' || !app.info;
  $('stop').disabled = !busy;
  $('model').disabled = busy || app.entries.length === 0;
  $('backend').disabled = busy || state === 'loading';
  $('url-load').disabled = busy;
  $('model-files').disabled = busy;
  $('output-live').setAttribute('aria-busy', String(busy));
  // Chat mode (chat.js)
  const idle = !busy && state !== 'loading' && Boolean(app.info);
  $('chat-send').disabled = !idle || !app.info?.chatTemplate;
  $('chat-stop').disabled = !busy;
  $('chat-attach').disabled = !idle || !app.info?.vision; // (shown for a vision model only: chat.js)
  $('chat-regenerate').disabled = !idle || !app.info?.chatTemplate || !app.chat?.canRegenerate();
  $('chat-clear').disabled = busy || !app.chat?.hasConversation();
  // Embeddings mode (embed.js); an encoder (info.generative false) can only embed
  $('embed-run').disabled = !idle;
  $('embed-stop').disabled = !busy;
  for (const radio of document.querySelectorAll('input[name="mode"]')) {
    radio.disabled = busy || (radio.value === 'chat' && !app.info?.chatTemplate) ||
      (radio.value === 'embed' && !app.info) || (radio.value !== 'embed' && app.info?.generative === false);
  }
}

export function setStatus(text) {
  $('load-status').textContent = text;
}

/**
 * Shows a failure in the model panel's status line and under the output (#run-error, in the
 * output's live region), and sets the 'error' state; Generate stays enabled while a model is
 * loaded. The next successful load or run clears it (clearError).
 */
export function showError(text, kind = 'other') {
  setStatus(text);
  $('load-status').dataset.error = kind;
  $('run-error').textContent = text;
  $('run-error').dataset.kind = kind;
  setState('error');
}

/** Clears a shown failure; the status line goes back to what the last successful load said. */
export function clearError() {
  $('run-error').textContent = '';
  delete $('run-error').dataset.kind;
  const status = $('load-status');
  if (status.dataset.error !== undefined && app.loaded) {
    delete status.dataset.error;
    setStatus(app.loaded.status);
  }
}
