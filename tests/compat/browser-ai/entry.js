// entry.js — what the compatibility page needs from the AI SDK 6 world, bundled by esbuild into
// one ES module (build/compat/browser-ai.js; tests/browser/browser_ai.test.mjs runs the bundler):
// `ai` 6, @browser-ai/core (its provider for the Prompt API) and zod, resolved from this folder's
// own node_modules (npm ci --prefix tests/compat/browser-ai). The polyfill itself is not bundled:
// the page imports it from js/prompt_api/ as it is published.
export { generateText, streamText, generateObject } from 'ai';
export { browserAI, doesBrowserSupportBrowserAI } from '@browser-ai/core';
export { z } from 'zod';
