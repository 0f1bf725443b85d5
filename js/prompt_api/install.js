// prompt_api/install.js — `import 'wasmlm/prompt-api/install'`: sets globalThis.LanguageModel to
// wasmlm's polyfill (./index.js) where the platform has none, so that code written for the
// Prompt API runs unchanged. A browser's own LanguageModel (Chrome, Edge) is left in place.
// Choose the model with configure() from 'wasmlm/prompt-api' before the first create().

import { LanguageModel } from './index.js';

if (typeof globalThis.LanguageModel === 'undefined') {
  Object.defineProperty(globalThis, 'LanguageModel', { value: LanguageModel, writable: true, configurable: true, enumerable: false });
}
