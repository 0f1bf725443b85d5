// web/demo.js — the demo page: chooses a model (the manifest's published models, a URL, or local
// files), loads it into a worker engine with a download progress bar and the browser cache
// (js/models/cache.js via web/sources.js), and streams a generation token by token, each token coloured
// by its probability, with live statistics. It holds no inference logic (that is js/wasmlm.js)
// and builds no HTML from strings: generated text goes into the page as text nodes only.
//
// For tests the page exposes document.body.dataset.state ('loading' | 'ready' | 'generating' |
// 'error'); #load-status carries data-error (why a load failed: http-404, http, network,
// partial, checksum, format, truncated, …) and data-cache (hit, stored, quota, unavailable, error,
// local), and #load-detail the bytes, total and rate during a load; #output holds one
// <span class="tok p0..p4" data-prob data-id> per streamed token (its colour bin); #applied
// lists the parameters of the last generation; body[data-runs] counts the generations and
// beam searches started. #prob-chart holds one <tr data-id data-prob data-prob-sampled> per
// candidate of the last token (data-source 'generation' or 'preview'; data-previews counts the
// previews drawn after slider moves, data-preview-attempts the debounced previews that ran to
// their end, drawn or not); #token-alternatives lists a hovered token's candidates;
// a beam search fills #output with <li class="beam" data-score data-logprob>, best first.
// body[data-mode] is 'completion' or 'chat' (web/demo/chat.js describes what chat mode exposes).
//
// web/index.html loads this module in one bundle with the rest of the page and the library
// (web/page.js → dist/demo.js, tools/bundle.mjs); the library (js/worker/worker_engine.js, js/runtime/wasm.js,
// js/models/cache.js through ./sources.js) is still imported dynamically, so that this file also runs
// unbundled and says why when it cannot load it. index.html's first script has already started the
// worker engine, the model list and the default model's download (for the time to the first
// token); main() takes them over. User Timing marks: 'wasmlm-demo:worker-started' (that script)
// and 'wasmlm-demo:main' (main() begins).
//
// This file wires the page's events and starts it; each part is one module in web/demo/:
//   state.js       `app` (shared page state), body[data-state], the status line, errors
//   format.js      bytes, times, rates, percentages, token pieces, error descriptions
//   models.js      the model picker, URL and local files, download progress, loading
//   cache-list.js  the "Cached models" list
//   controls.js    sampler controls: sliders, presets, seed, stop strings → generate() params
//   generate.js    a run: streamed generation or beam search, Stop
//   output.js      the output text: token spans, colours, the token inspector
//   chart.js       the probability chart and its preview after a slider moves
//   stats.js       the statistics panel
//   chat.js        chat mode: the conversation, system prompt, images (a vision model), Send,
//                  Regenerate, Clear

import { describeError } from './demo/format.js';
import { $, app, setState, showError } from './demo/state.js';
import { SLIDERS, syncSliderOutputs, applyPreset, syncStopError } from './demo/controls.js';
import { syncOutputFormat } from './demo/output-format.js';
import { fetchManifest, loadManifest, selectedEntry, showEntryNote, loadModel, takeLocalFiles } from './demo/models.js';
import { renderCacheList, removeCached, resumeCached } from './demo/cache-list.js';
import { schedulePreview } from './demo/chart.js';
import { showTokenDetail, activateToken, onOutputKey } from './demo/output.js';
import { generate, stop } from './demo/generate.js';
import { currentMode, setMode, sendChat, regenerate, clearChat, attachImages, visionAvailable } from './demo/chat.js';
import { runEmbed } from './demo/embed.js';

/** Ctrl+Enter and Enter in the seed and stop fields: a completion, in chat mode Send, in
 *  Embeddings mode Embed. */
const run = () => (currentMode() === 'chat' ? sendChat() : currentMode() === 'embed' ? runEmbed() : generate());

// ------------------------------------------------------------------------------------------------
// Wiring

function wireControls() {
  for (const s of SLIDERS) {
    $(s.id).addEventListener('input', () => {
      syncSliderOutputs();
      if (s.param !== 'maxTokens') schedulePreview();
    });
  }
  $('beam-width').addEventListener('input', syncSliderOutputs);
  $('sampler-order').addEventListener('change', schedulePreview);
  syncSliderOutputs();
  for (const button of document.querySelectorAll('button.preset')) {
    button.addEventListener('click', () => {
      applyPreset(button.dataset.preset);
      schedulePreview();
    });
  }
  $('stop-strings').addEventListener('input', syncStopError);
  $('output-format').addEventListener('change', syncOutputFormat);
  syncOutputFormat();

  $('gen-form').addEventListener('submit', (event) => {
    event.preventDefault();
    generate();
  });
  // Enter in the seed or stop-strings field generates, as in the prompt's form.
  $('sampling-form').addEventListener('submit', (event) => event.preventDefault());
  for (const id of ['seed', 'stop-strings']) {
    $(id).addEventListener('keydown', (event) => {
      if (event.key === 'Enter' && !event.ctrlKey && !event.metaKey && !event.isComposing) {
        event.preventDefault();
        run();
      }
    });
  }
  $('stop').addEventListener('click', stop);

  // Chat mode.
  for (const radio of document.querySelectorAll('input[name="mode"]')) {
    radio.addEventListener('change', () => { if (radio.checked) setMode(radio.value); });
  }
  $('chat-form').addEventListener('submit', (event) => {
    event.preventDefault();
    sendChat();
  });
  $('chat-input').addEventListener('keydown', (event) => {
    // Enter sends, Shift+Enter is a new line (Ctrl+Enter sends too, below).
    if (event.key === 'Enter' && !event.shiftKey && !event.ctrlKey && !event.metaKey && !event.isComposing) {
      event.preventDefault();
      sendChat();
    }
  });
  $('chat-stop').addEventListener('click', stop);
  // Images for a vision model: the Attach button's picker, and a paste onto the message (a drop
  // onto it: below, with the model files' drop zone).
  $('chat-attach').addEventListener('click', () => $('chat-images').click());
  $('chat-images').addEventListener('change', async () => {
    const picker = $('chat-images');
    await attachImages(picker.files);
    picker.value = ''; // the same image again is a change too
  });
  $('chat-input').addEventListener('paste', (event) => {
    const images = [...(event.clipboardData?.files ?? [])].filter((f) => f.type.startsWith('image/'));
    if (!images.length || !visionAvailable()) return; // text is pasted as text
    event.preventDefault();
    attachImages(images);
  });
  // Embeddings mode.
  $('embed-form').addEventListener('submit', (event) => {
    event.preventDefault();
    runEmbed();
  });
  $('embed-stop').addEventListener('click', stop);
  $('chat-regenerate').addEventListener('click', regenerate);
  $('chat-clear').addEventListener('click', clearChat);

  document.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      run();
    } else if (event.key === 'Escape' && app.genController) {
      event.preventDefault();
      stop();
    }
  });

  // The backend: from ?backend= at start; a change loads the current model again with it.
  const backend = new URL(location.href).searchParams.get('backend');
  if (['auto', 'webgpu', 'cpu'].includes(backend)) $('backend').value = backend;
  $('backend').addEventListener('change', () => {
    const url = new URL(location.href);
    url.searchParams.set('backend', $('backend').value);
    history.replaceState(null, '', url);
    if (app.lastPlan) loadModel(app.lastPlan);
  });

  // Models: the picker, a URL, local files.
  $('model').addEventListener('change', () => {
    const entry = selectedEntry();
    showEntryNote();
    if (entry) {
      const url = new URL(location.href);
      url.searchParams.set('model', entry.id);
      history.replaceState(null, '', url);
      loadModel(app.sources.planFromEntry(entry));
    }
  });
  $('url-form').addEventListener('submit', (event) => {
    event.preventDefault();
    const modelUrl = $('model-url').value.trim();
    const tokenizerUrl = $('tokenizer-url').value.trim();
    if (modelUrl) loadModel(app.sources.planFromUrls(modelUrl, tokenizerUrl || null));
  });
  const input = $('model-files');
  input.addEventListener('change', async () => {
    await takeLocalFiles(input.files);
    input.value = ''; // choosing the same file again is a change too
  });
  const zone = $('drop-zone');
  const hasFiles = (event) => event.dataTransfer?.types?.includes('Files');
  zone.addEventListener('dragenter', (event) => { if (hasFiles(event)) zone.classList.add('over'); });
  zone.addEventListener('dragleave', (event) => {
    if (!zone.contains(event.relatedTarget)) zone.classList.remove('over');
  });
  // Anywhere on the page, a dropped file must not replace the page; only the zone takes it, and
  // for a vision model the message (and the attach row under it) takes images.
  const chatDrop = (event) => visionAvailable() && !$('chat-form').hidden &&
    (event.target === $('chat-input') || $('chat-attach-row').contains(event.target));
  document.addEventListener('dragover', (event) => {
    if (!hasFiles(event)) return;
    event.preventDefault();
    event.dataTransfer.dropEffect = (zone.contains(event.target) && !input.disabled) || chatDrop(event) ? 'copy' : 'none';
  });
  document.addEventListener('drop', (event) => {
    if (!hasFiles(event)) return;
    event.preventDefault();
    zone.classList.remove('over');
    if (zone.contains(event.target) && !input.disabled) takeLocalFiles(event.dataTransfer.files);
    else if (chatDrop(event)) attachImages(event.dataTransfer.files);
  });

  // The cache list.
  $('cache-panel').addEventListener('toggle', () => { if ($('cache-panel').open) renderCacheList(); });
  $('cache-list').addEventListener('click', (event) => {
    const button = event.target.closest('button[data-url]');
    if (button?.dataset.action === 'resume') resumeCached(button.dataset.url);
    else if (button) removeCached(button.dataset.url);
  });
  $('cache-clear').addEventListener('click', async () => {
    await app.sources.clearStored();
    await renderCacheList();
    document.querySelector('#cache-panel summary').focus();
  });

  // The token inspector.
  const output = $('output');
  output.addEventListener('mouseover', (event) => {
    const span = event.target.closest?.('.tok');
    if (span) showTokenDetail(span);
  });
  output.addEventListener('focusin', (event) => {
    const span = event.target.closest?.('.tok');
    if (span) {
      showTokenDetail(span);
      activateToken(span, false);
    }
  });
  output.addEventListener('click', (event) => {
    const span = event.target.closest?.('.tok');
    if (span) activateToken(span, true);
  });
  output.addEventListener('keydown', onOutputKey);
}

async function main() {
  performance.mark('wasmlm-demo:main'); // tests/browser/ttft.test.mjs: after index.html's start
  wireControls();
  setState('loading');
  // The first load's steps overlap rather than follow one another: the model list, the library
  // and its engine (its worker starts and its wasm build is fetched and compiled: the engine
  // promise), all started by index.html's inline script before this module graph was even
  // requested (started here if that script did not run), and the model files (their Cache
  // Storage lookup and download need only ./sources.js).
  const manifest = window.wasmlmManifest ?? fetchManifest();
  manifest.catch(() => {}); // awaited below
  const libraryFailed = (err) => {
    throw new Error(`could not load the wasmlm library (js/worker/worker_engine.js, js/runtime/wasm.js): ${describeError(err)}`, { cause: err });
  };
  const library = window.wasmlmLibrary ?? Promise.all([import('../js/worker/worker_engine.js'), import('../js/runtime/wasm.js')])
    .then(([{ createWorkerEngine }, { preload }]) => ({ createWorkerEngine, preload }));
  library.then((lib) => { app.createWorkerEngine = lib.createWorkerEngine; }, () => {});
  const engine = window.wasmlmEngine
    ? window.wasmlmEngine.catch((err) => library.then(() => { throw err; }, libraryFailed))
    : library.then((lib) => {
      lib.preload().catch(() => {}); // a failure shows when the engine starts
      return lib.createWorkerEngine();
    }, libraryFailed);
  engine.catch(() => {}); // awaited by loadModel
  try {
    app.sources = await import('./sources.js');
    app.sources.warmCache();
  } catch (err) {
    showError(`Could not load the wasmlm library (web/sources.js): ${describeError(err)}`);
    return;
  }
  try {
    await loadManifest(manifest);
  } catch (err) {
    engine.then((e) => e.free(), () => {});
    showError(`Could not read the model list: ${describeError(err)}`);
    return;
  }
  await loadModel(app.sources.planFromEntry(selectedEntry()), { engine });
  renderCacheList();
}

// The bundle (dist/demo.js) may be evaluated before the parser reaches the body: index.html's
// first script imports it as early as it can.
if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', main, { once: true });
else main();
