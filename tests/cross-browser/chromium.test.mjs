// chromium.test.mjs — the demo page's core cases (_cases.mjs) in Chromium (playwright-core), the
// engine tests/browser/ covers in depth: the control for the other engines, so that a case
// failing in Firefox or WebKit alone is that engine's. Relaxed SIMD and SharedArrayBuffer: the
// relaxed build on one thread per core (up to 4).
//
//   node --test tests/cross-browser/chromium.test.mjs

import { coreCases } from './_cases.mjs';

coreCases('chromium', { build: 'relaxed', sharedMemory: true });
