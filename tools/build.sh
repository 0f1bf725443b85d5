#!/usr/bin/env bash
# tools/build.sh [--if-needed] [--wasm-only]
# Builds the wasm modules into dist/ (Emscripten, CMake, build/wasm), the demo page's script
# bundles into dist/ (tools/bundle.mjs), and the native CLI + C tests into build/native; with no option also the C tests compiled to wasm (build/wasm).
#   --wasm-only   only the modules the page, the JS API and the benchmarks load
#                 (dist/wasmlm.wasm, wasmlm-mt.wasm, wasmlm-scalar.wasm, and where LLVM 19 and
#                 the npm binaryen are installed wasmlm-relaxed.wasm, wasmlm-relaxed-mt.wasm, and
#                 there the SIMD128 modules' kernels are LLVM 19's too): what `npm start` needs
#   --if-needed   do nothing when dist/ is newer than every source file
# tools/setup.sh installs the toolchain.
set -euo pipefail
exec 1>&2   # the build log goes to stderr, so `npm run bench -- --json` stays parseable
cd "$(dirname "$0")/.."
export NODE_PATH="${NODE_PATH:-/usr/share/nodejs}"   # Debian's emcc needs its acorn at -O2+
jobs=$(nproc 2>/dev/null || echo 2)

if_needed=0 wasm_only=0
for arg in "$@"; do
  case "$arg" in
    --if-needed) if_needed=1 ;;
    --wasm-only) wasm_only=1 ;;
    *) echo "tools/build.sh: unknown option '$arg' (--if-needed, --wasm-only)"; exit 1 ;;
  esac
done

# The demo page's script bundles (dist/demo.js, worker.js, thread.js; esbuild, ~0.1 s): always.
node tools/bundle.mjs

modules=(dist/wasmlm.wasm dist/wasmlm-scalar.wasm dist/wasmlm-mt.wasm)
if ((if_needed)) && ls "${modules[@]}" >/dev/null 2>&1; then
  # src/cli/ is the native CLI only: it never changes a module
  newer=$(find src CMakeLists.txt tools/exports.txt -type f -newer "${modules[0]}" -not -path 'src/cli/*' \
    -print -quit)
  relaxed_gone=0   # the relaxed modules' toolchain is there but they are not (yet)
  [[ "$(cat build/wasm/relaxed-status.txt 2>/dev/null)" == ok && ! -f dist/wasmlm-relaxed-mt.wasm ]] \
    && relaxed_gone=1
  [[ "$(cat build/wasm/memory64-status.txt 2>/dev/null)" == ok && ! -f dist/wasmlm64-mt.wasm ]] \
    && relaxed_gone=1   # the same for the memory64 modules
  if [[ -z "$newer" ]] && ((!relaxed_gone)); then exit 0; fi
fi
for tool in emcmake cmake; do
  if ! command -v "$tool" >/dev/null; then
    echo "tools/build.sh: $tool not found. Install the toolchain with:  sudo bash tools/setup.sh"
    exit 1
  fi
done
# WASMLM_WERROR=ON|OFF when set (tools/test.sh sets ON); unset keeps what the build directory
# has (OFF at first), so `npm start` after `npm test` does not recompile everything.
werror=()
[[ -n "${WASMLM_WERROR:-}" ]] && werror=(-DWASMLM_WERROR="$WASMLM_WERROR")
# The memory64 modules' toolchain (a patched copy of Emscripten with LLVM 19 and its wasm64
# libraries, cached in build/emscripten64/): prepared once, else the reason is printed and the
# wasm32 modules build alone. WASMLM_MEMORY64_MODULES="64;64-mt" builds two of the four.
m64=()
mkdir -p build
if em64=$(bash tools/wasm64/toolchain.sh 2>build/wasm64-toolchain.log); then
  m64=(-DWASMLM_EM64="$em64")
  [[ -n "${WASMLM_MEMORY64_MODULES:-}" ]] && m64+=(-DWASMLM_MEMORY64_MODULES="$WASMLM_MEMORY64_MODULES")
else
  m64=(-DWASMLM_EM64=)
  echo "tools/build.sh: the memory64 modules are not built: $(tail -1 build/wasm64-toolchain.log)"
fi
emcmake cmake -S . -B build/wasm -DCMAKE_BUILD_TYPE=Release "${werror[@]}" "${m64[@]}" \
  -DCMAKE_CROSSCOMPILING_EMULATOR=node -DCMAKE_C_FLAGS_RELEASE="-O3 -DNDEBUG" >/dev/null
# The relaxed-SIMD modules and LLVM 19's SIMD128 kernels, when CMake found their toolchain (else
# it says what is missing).
relaxed_status=$(cat build/wasm/relaxed-status.txt 2>/dev/null || echo "no status")
relaxed_targets=()
if [[ "$relaxed_status" == ok ]]; then
  modules+=(dist/wasmlm-relaxed.wasm dist/wasmlm-relaxed-mt.wasm)
  relaxed_targets=(wasmlm_module_relaxed wasmlm_module_relaxed_mt)
  echo "tools/build.sh: the SIMD128 and relaxed-SIMD modules' kernels are compiled by LLVM 19"
else
  rm -f dist/wasmlm-relaxed.wasm dist/wasmlm-relaxed-mt.wasm   # never a stale one
  echo "tools/build.sh: $relaxed_status"
fi
m64_targets=()
if [[ "$(cat build/wasm/memory64-status.txt 2>/dev/null)" == ok ]]; then
  for v in $(grep -o 'WASMLM_MEMORY64_MODULES:STRING=.*' build/wasm/CMakeCache.txt | cut -d= -f2 | tr ';' ' '); do
    modules+=("dist/wasmlm$v.wasm")
    m64_targets+=("wasmlm_module${v//-/_}")
  done
  echo "tools/build.sh: the memory64 modules: ${m64_targets[*]}"
else
  rm -f dist/wasmlm64*.wasm   # never a stale one
  echo "tools/build.sh: $(cat build/wasm/memory64-status.txt 2>/dev/null || echo 'memory64: no status')"
fi
if ((wasm_only)); then
  cmake --build build/wasm -j"$jobs" --target wasmlm_module wasmlm_module_mt wasmlm_module_scalar \
    "${relaxed_targets[@]}" "${m64_targets[@]}"
else
  cmake --build build/wasm -j"$jobs"
  cmake -S . -B build/native -DCMAKE_BUILD_TYPE=Release "${werror[@]}" >/dev/null
  cmake --build build/native -j"$jobs"
fi
touch "${modules[@]}"   # up to date now, even when nothing needed relinking (--if-needed)
ls -l "${modules[@]}"
