// web/demo/controls.js — the sampler controls: sliders, presets, seed, stop strings, sampler order
// and beam width; reads them into generate() parameters and writes the "applied" line.

import { showPiece } from './format.js';
import { $ } from './state.js';

export const MAX_SEED = 2 ** 32 - 1;

export const MAX_STOPS = 8;

export const MAX_STOP_BYTES = 63;

/**
 * The sampling sliders: element id, the generate() parameter it sets, how its value reads
 * next to the slider, and how it reads in the "applied" line.
 */
export const SLIDERS = [
  { id: 'temperature', param: 'temperature', name: 'temperature',
    show: (v) => (v === 0 ? 'greedy' : v.toFixed(2)), applied: (v) => v.toFixed(2) },
  { id: 'top-k', param: 'topK', name: 'top-k',
    show: (v) => (v === 0 ? 'off' : String(v)), applied: String },
  { id: 'top-p', param: 'topP', name: 'top-p', show: (v) => v.toFixed(2), applied: (v) => v.toFixed(2) },
  { id: 'min-p', param: 'minP', name: 'min-p',
    show: (v) => (v === 0 ? 'off' : v.toFixed(2)), applied: (v) => v.toFixed(2) },
  { id: 'typical-p', param: 'typicalP', name: 'typical-p',
    show: (v) => (v === 1 ? 'off' : v.toFixed(2)), applied: (v) => v.toFixed(2) },
  { id: 'repeat-penalty', param: 'repeatPenalty', name: 'repetition penalty',
    show: (v) => (v === 1 ? 'off' : v.toFixed(2)), applied: (v) => v.toFixed(2) },
  { id: 'presence-penalty', param: 'presencePenalty', name: 'presence penalty',
    show: (v) => (v === 0 ? 'off' : v.toFixed(2)), applied: (v) => v.toFixed(2) },
  { id: 'frequency-penalty', param: 'frequencyPenalty', name: 'frequency penalty',
    show: (v) => (v === 0 ? 'off' : v.toFixed(2)), applied: (v) => v.toFixed(2) },
  { id: 'max-tokens', param: 'maxTokens', name: 'max tokens', show: String, applied: String },
];

/** Names of the sampler orders (the #sampler-order options), for the applied line. */
export const ORDER_NAMES = { llamacpp: 'llama.cpp', runc: 'run.c' };

/** Candidates shown in the probability chart (and requested per token). */
export const N_PROBS = 10;

/** Presets set the sliders (the seed and the stop strings stay as they are). */
export const PRESETS = {
  precise: { name: 'Precise', temperature: 0.3, topK: 20, topP: 0.75, minP: 0.1, typicalP: 1,
    repeatPenalty: 1.15, presencePenalty: 0, frequencyPenalty: 0, maxTokens: 128 },
  balanced: { name: 'Balanced', temperature: 0.8, topK: 40, topP: 0.9, minP: 0.05, typicalP: 1,
    repeatPenalty: 1.1, presencePenalty: 0, frequencyPenalty: 0, maxTokens: 256 },
  creative: { name: 'Creative', temperature: 1.2, topK: 0, topP: 0.95, minP: 0.02, typicalP: 1,
    repeatPenalty: 1.0, presencePenalty: 0.3, frequencyPenalty: 0.2, maxTokens: 384 },
};

/** Shows each slider's value next to it (also after the browser restores form values). */
export function syncSliderOutputs() {
  for (const s of SLIDERS) {
    $(`${s.id}-value`).textContent = s.show(Number($(s.id).value));
  }
  const width = beamWidth();
  $('beam-width-value').textContent = width >= 2 ? String(width) : 'off';
  syncPresetButtons();
}

export function sliderValues() {
  return Object.fromEntries(SLIDERS.map((s) => [s.param, Number($(s.id).value)]));
}

/** The beam width control: 0 or 1 is off (sampling), 2..8 runs a beam search. */
export function beamWidth() {
  const v = Math.trunc(Number($('beam-width').value));
  return Number.isFinite(v) && v >= 2 ? Math.min(v, 8) : 0;
}

/** Marks the preset the sliders match (aria-pressed), and says what it sets. */
export function syncPresetButtons() {
  const values = sliderValues();
  let current = null;
  for (const button of document.querySelectorAll('button.preset')) {
    const preset = PRESETS[button.dataset.preset];
    const on = SLIDERS.every((s) => Math.abs(values[s.param] - preset[s.param]) < 1e-9);
    button.setAttribute('aria-pressed', String(on));
    if (on) current = preset;
  }
  $('preset-hint').textContent = current
    ? `${current.name}: ${SLIDERS.map((s) => `${s.name} ${s.show(current[s.param])}`).join(' · ')}. ` +
      'Seed and stop strings are kept.'
    : 'Custom settings. A preset sets temperature, top-k, top-p, min-p, typical-p, the penalties and max tokens.';
}

export function applyPreset(key) {
  const preset = PRESETS[key];
  for (const s of SLIDERS) $(s.id).value = String(preset[s.param]);
  syncSliderOutputs();
}

/**
 * Stop strings from the text field: comma-separated, "\," a comma, "\n" a new line, "\t" a tab,
 * "\\" a backslash; each trimmed (before unescaping, so "\n" survives). Returns {stops, error}.
 */
export function parseStops(text) {
  const raw = [];
  let cur = '';
  for (let i = 0; i < text.length; i++) {
    if (text[i] === '\\' && i + 1 < text.length) cur += text[i] + text[++i];
    else if (text[i] === ',') { raw.push(cur); cur = ''; } else cur += text[i];
  }
  raw.push(cur);
  const unescape = (s) => s.replace(/\\(.)/g, (_, c) => ({ n: '\n', t: '\t' }[c] ?? c));
  const stops = raw.map((s) => s.trim()).filter(Boolean).map(unescape);
  const encoder = new TextEncoder();
  if (stops.length > MAX_STOPS) return { stops, error: `At most ${MAX_STOPS} stop strings (there are ${stops.length}).` };
  const long = stops.find((s) => encoder.encode(s).length > MAX_STOP_BYTES);
  if (long) return { stops, error: `${showPiece(long)} is longer than ${MAX_STOP_BYTES} bytes.` };
  return { stops, error: '' };
}

export function syncStopError() {
  const { error } = parseStops($('stop-strings').value);
  $('stop-error').textContent = error;
  $('stop-strings').setAttribute('aria-invalid', String(Boolean(error)));
  return error;
}

/**
 * Reads the controls into generate() parameters. An empty or invalid seed draws a random one
 * here, so the applied line can show it and a run can be repeated.
 */
export function readParams() {
  const params = sliderValues();
  params.samplerOrder = $('sampler-order').value;
  params.nProbs = N_PROBS;
  const seedText = $('seed').value.trim();
  const seed = seedText === '' ? NaN : Math.trunc(Number(seedText));
  const seedRandom = !Number.isFinite(seed);
  params.seed = seedRandom ? crypto.getRandomValues(new Uint32Array(1))[0] : Math.min(Math.max(seed, 0), MAX_SEED);
  const { stops } = parseStops($('stop-strings').value);
  if (stops.length) params.stop = stops;
  return { params, seedRandom };
}

export function showApplied(params, seedRandom, formatLabel = '') {
  const parts = SLIDERS.map((s) => `${s.name} ${s.applied(params[s.param])}`);
  if (params.samplerOrder !== 'llamacpp') {
    parts.splice(parts.length - 1, 0, `order ${ORDER_NAMES[params.samplerOrder]}`);
  }
  if (params.stop) parts.push(`stop ${params.stop.map((s) => JSON.stringify(s)).join(' ')}`);
  parts.push(`seed ${params.seed}${seedRandom ? ' (random)' : ''}`);
  if (formatLabel) parts.push(formatLabel);
  $('applied').textContent = `applied: ${parts.join(' · ')}`;
}
