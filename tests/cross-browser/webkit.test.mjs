// webkit.test.mjs — the demo page's core cases (_cases.mjs) in WebKit, Safari's engine: WebKitGTK's
// MiniBrowser on a virtual display (Xvfb), driven by selenium-webdriver through WebKitWebDriver.
// WebKitGTK 2.50 has WebAssembly SIMD128 but no relaxed SIMD, and no SharedArrayBuffer even on a
// cross-origin isolated page: the SIMD128 build on one thread.
//
//   node --test tests/cross-browser/webkit.test.mjs

import { coreCases } from './_cases.mjs';

coreCases('webkit', { build: 'simd128', sharedMemory: false });
