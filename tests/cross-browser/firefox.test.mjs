// firefox.test.mjs — the demo page's core cases (_cases.mjs) in Firefox: Debian's firefox-esr,
// driven by puppeteer-core over WebDriver BiDi. Firefox has relaxed SIMD and, on a cross-origin
// isolated page, SharedArrayBuffer: the relaxed build on one thread per core (up to 4).
//
//   node --test tests/cross-browser/firefox.test.mjs

import { coreCases } from './_cases.mjs';

coreCases('firefox', { build: 'relaxed', sharedMemory: true });
