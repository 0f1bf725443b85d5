// install.d.ts — 'wasmlm/prompt-api/install' sets globalThis.LanguageModel to the polyfill where
// the platform has none (js/prompt_api/install.js); it exports nothing.
import type { LanguageModel as Polyfill } from './index.js';

declare global {
  // eslint-disable-next-line no-var
  var LanguageModel: typeof Polyfill;
}
export {};
