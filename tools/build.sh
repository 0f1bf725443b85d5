#!/usr/bin/env bash
# Builds the wasm modules into dist/ (Emscripten, CMake) and the native CLI + C tests into
# build/native. --if-needed: skip when dist/ is newer than every source file.
set -euo pipefail
exec 1>&2   # the build log goes to stderr, so `npm run bench -- --json` stays parseable
cd "$(dirname "$0")/.."
export NODE_PATH="${NODE_PATH:-/usr/share/nodejs}"   # Debian's emcc needs its acorn at -O2+
jobs=$(nproc 2>/dev/null || echo 2)

if [[ "${1:-}" == "--if-needed" && -f dist/wasmlm.wasm && -f dist/wasmlm-scalar.wasm && -f dist/wasmlm-mt.wasm ]]; then
  newer=$(find src CMakeLists.txt tools/exports.txt -newer dist/wasmlm.wasm -print -quit)
  if [[ -z "$newer" ]]; then exit 0; fi
fi
if ! command -v emcmake >/dev/null; then
  echo "emcmake not found: install Emscripten (Debian: apt-get install -y emscripten)" >&2
  exit 1
fi
werror=${WASMLM_WERROR:-OFF}
emcmake cmake -S . -B build/wasm -DCMAKE_BUILD_TYPE=Release -DWASMLM_WERROR="$werror" \
  -DCMAKE_CROSSCOMPILING_EMULATOR=node -DCMAKE_C_FLAGS_RELEASE="-O3 -DNDEBUG" >/dev/null
cmake --build build/wasm -j"$jobs"
cmake -S . -B build/native -DCMAKE_BUILD_TYPE=Release -DWASMLM_WERROR="$werror" >/dev/null
cmake --build build/native -j"$jobs"
ls -l dist/*.wasm
