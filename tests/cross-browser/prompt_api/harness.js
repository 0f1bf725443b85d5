// harness.js — runs the Prompt API explainer's examples (explainer_examples.js, verbatim) in a
// page against wasmlm's polyfill: window.LanguageModel is set to it (also where the browser has
// its own, which headless browsers cannot run), the model is the URL in the page's query
// (?model=…&maxTokens=…&seed=…). Each example runs as the body of an async function, after the
// harness's "givens": what the example assumes exists (a `session`, a `stopButton`, …), and with
// a `console` that records what the example logs. window.runExample(index) resolves with
// {index, outcome: 'resolved' | 'rejected', error: {name, message} | null, logs, errors}.

import { configure, LanguageModel } from '../../../js/prompt_api/index.js';
import { EXAMPLES } from './explainer_examples.js';

Object.defineProperty(window, 'LanguageModel', { value: LanguageModel, writable: true, configurable: true });

const query = new URLSearchParams(location.search);
window.configured = configure({
  model: query.get('model'),
  params: { maxTokens: Number(query.get('maxTokens') ?? 24), seed: Number(query.get('seed') ?? 1) },
});

// The tool example fetches a weather service that does not exist: answered here, in case the
// model calls the tool.
const realFetch = window.fetch.bind(window);
window.fetch = (input, init) => (String(input).startsWith('https://weatherapi.example/')
  ? Promise.resolve(new Response(JSON.stringify({ temperature: 12, condition: 'rain' }), { headers: { 'Content-Type': 'application/json' } }))
  : realFetch(input, init));

const code = (index) => EXAMPLES.find((e) => e.index === index).code;
const SESSION = 'const session = await LanguageModel.create();\n';
const BUTTON = 'const stopButton = document.createElement("button");\n';
/** What each example takes for granted, by its index. */
const GIVENS = {
  5: code(4) + '\n{\n', // "Concurrent tool use" continues the tool example's session (in a
  // block of its own: both declare `result`)
  6: 'const captureMicrophoneInput = async () => new Blob([new Uint8Array(16)]);\n',
  7: SESSION + 'const brochureFromTheMarketingDepartment = new Blob([new Uint8Array(16)]);\n' +
     'const brochureFromTheFinanceDepartment = new Blob([new Uint8Array(16)]);\n',
  8: SESSION,
  9: SESSION + 'const characterName = "Ada";\n',
  10: SESSION + code(8).split('\n\n')[0] + '\n', // the schema of the example before
  12: SESSION,
  13: ['fileUpload', 'fileNotesInput', 'analyzeButton', 'analysisResult', 'userQuestionInput']
    .map((id) => `const ${id} = document.createElement("input");\n`).join(''),
  15: 'const isCreativeTask = true, isGeneratingIdeas = false;\n',
  18: SESSION,
  19: BUTTON,
  20: BUTTON + SESSION,
  21: BUTTON + SESSION,
  22: SESSION,
  23: SESSION + 'const promptString = "How many tokens is this?";\nconst audioBlob = new Blob([new Uint8Array(16)]);\n',
  24: SESSION,
};

const AsyncFunction = (async () => {}).constructor;
const describe = (v) => (typeof v === 'string' ? v : v instanceof Error ? `${v.name}: ${v.message}` : JSON.stringify(v));

window.exampleIndexes = EXAMPLES.filter((e) => e.index !== 4).map((e) => e.index); // 4 runs within 5
window.runExample = async (index) => {
  await window.configured;
  const logs = [], errors = [];
  const recorder = { ...console, log: (...a) => logs.push(a.map(describe).join(' ')), error: (...a) => errors.push(a.map(describe).join(' ')) };
  const fn = new AsyncFunction('console', (GIVENS[index] ?? '') + code(index) + (index === 5 ? '\n}' : ''));
  try {
    await fn(recorder);
    return { index, outcome: 'resolved', error: null, logs, errors };
  } catch (e) {
    return { index, outcome: 'rejected', error: { name: e?.name, message: String(e?.message ?? e) }, logs, errors };
  }
};
window.harnessReady = true;
