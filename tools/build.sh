#!/usr/bin/env bash
# tools/build.sh [--if-needed] [--wasm-only | --progressive | --first | --only MODULE ...]
# Builds the wasm modules into dist/ (Emscripten, CMake, build/wasm), the demo page's script
# bundles into dist/ (tools/bundle.mjs), and the native CLI + C tests into build/native; with no option also the C tests compiled to wasm (build/wasm).
#   --wasm-only   only the modules the page, the JS API and the benchmarks load
#                 (dist/wasmlm.wasm, wasmlm-mt.wasm, wasmlm-scalar.wasm, and where LLVM 19 and
#                 the npm binaryen are installed wasmlm-relaxed.wasm, wasmlm-relaxed-mt.wasm, and
#                 there the SIMD128 modules' kernels are LLVM 19's too; and the memory64 modules
#                 wasmlm64*.wasm where tools/wasm64/toolchain.sh can prepare their toolchain)
#   --progressive the modules of --wasm-only, one at a time: the page's first module first
#                 (--first), then the other wasm32 ones (the SIMD128 threaded one next), then
#                 the memory64 toolchain is prepared and their modules built; each prints
#                 "tools/build.sh: built dist/NAME.wasm (K/N)" when it is complete. What
#                 `npm start` (tools/serve.mjs --build) runs, so the page can start after one.
#   --first       only the module the page loads first on a typical browser (relaxed SIMD and
#                 threads, e.g. Chrome: dist/wasmlm-relaxed-mt.wasm; dist/wasmlm-mt.wasm where
#                 the relaxed modules cannot be built; with ISOLATE=0, no threads: the one
#                 without -mt)
#   --only M      only module M (a name like wasmlm-mt.wasm, or dist/wasmlm-mt.wasm); repeatable
#   --if-needed   do nothing when the modules asked for exist and are newer than every source
#                 file
# A module is listed in build/wasm/modules-pending.txt (rewritten by rename) while it is being
# linked; every run first deletes the dist module of a leftover line (a build killed mid-link,
# whose truncated .wasm make would otherwise keep and --if-needed accept), so make relinks it.
# (Emscripten and CMake write dist/ themselves; the record stands in for a temporary name.)
# Each run announces the modules it builds ("tools/build.sh: building: dist/A.wasm ...") and
# each once linked ("tools/build.sh: built dist/A.wasm (K/N)"): tools/serve.mjs --build holds
# a module's requests until then.
# tools/setup.sh installs the toolchain.
set -euo pipefail
exec 1>&2   # the build log goes to stderr, so `npm run bench -- --json` stays parseable
cd "$(dirname "$0")/.."
export NODE_PATH="${NODE_PATH:-/usr/share/nodejs}"   # Debian's emcc needs its acorn at -O2+
jobs=$(nproc 2>/dev/null || echo 2)

if_needed=0 wasm_only=0 progressive=0 first=0 only=()
while (($#)); do
  case "$1" in
    --if-needed) if_needed=1 ;;
    --wasm-only) wasm_only=1 ;;
    --progressive) progressive=1 wasm_only=1 ;;
    --first) first=1 wasm_only=1 ;;
    --only)
      [[ $# -ge 2 && "$2" =~ ^(dist/)?(wasmlm[a-z0-9-]*\.wasm)$ ]] \
        || { echo "tools/build.sh: --only needs a module name such as wasmlm-mt.wasm, got '${2:-}'"; exit 1; }
      only+=("dist/${BASH_REMATCH[2]}") wasm_only=1
      shift ;;
    *) echo "tools/build.sh: unknown option '$1' (--if-needed, --wasm-only, --progressive, --first, --only MODULE)"; exit 1 ;;
  esac
  shift
done
if ((progressive + first + (${#only[@]} > 0) > 1)); then
  echo "tools/build.sh: --progressive, --first and --only exclude each other"; exit 1
fi

# The demo page's script bundles (dist/demo.js, worker.js, thread.js; esbuild, ~0.1 s): always.
node tools/bundle.mjs

# Modules being built are listed in build/wasm/modules-pending.txt (rewritten by rename) until
# their link succeeded: one still listed at the start of a run was cut short (a killed build)
# and may be truncated, so it is deleted and make relinks it. Each run announces what it builds
# ("tools/build.sh: building: dist/A.wasm dist/B.wasm") and each module once complete
# ("tools/build.sh: built dist/A.wasm (K/N)"): tools/serve.mjs --build holds the requests of
# the modules announced until they are built.
mkdir -p build/wasm dist
pending_file=build/wasm/modules-pending.txt
set_pending() {
  local tmp="$pending_file.tmp.$$"
  if (($#)); then printf '%s\n' "$@" > "$tmp"; else : > "$tmp"; fi
  mv -f "$tmp" "$pending_file"
}
if [[ -s "$pending_file" ]]; then
  while read -r m; do
    if [[ "$m" =~ ^dist/wasmlm[a-z0-9-]*\.wasm$ && -f "$m" ]]; then
      echo "tools/build.sh: deleting $m: an earlier build was stopped before it was complete"
      rm -f "$m"
    fi
  done < "$pending_file"
  set_pending
fi
# target_of dist/wasmlm-relaxed-mt.wasm -> wasmlm_module_relaxed_mt (CMakeLists.txt's names)
target_of() { local b=${1#dist/wasmlm}; b=${b%.wasm}; echo "wasmlm_module${b//-/_}"; }
# build_modules K N MODULE...: builds them with one cmake call (pending meanwhile);
# K N number the announcement of each ("built M (K/N)")
build_modules() {
  local k=$1 n=$2 targets=() m; shift 2
  for m; do targets+=("$(target_of "$m")"); done
  set_pending "$@"
  cmake --build build/wasm -j"$jobs" --target "${targets[@]}"
  touch "$@"   # up to date now, even when nothing needed relinking (--if-needed)
  set_pending
  for m; do echo "tools/build.sh: built $m ($((k++))/$n)"; done
}
# up_to_date MODULE...: each exists and no source is newer (src/cli/ is the native CLI only)
up_to_date() {
  local m
  for m; do
    [[ -f "$m" ]] || return 1
    [[ -z "$(find src cmake CMakeLists.txt tools/exports.txt -type f -newer "$m" -not -path 'src/cli/*' -print -quit)" ]] \
      || return 1
  done
}
# ordered MODULE...: in the order --progressive builds them after the first: the SIMD128
# threaded one (what browsers without relaxed SIMD load first), the others, the memory64 ones
ordered() {
  local m p
  for p in dist/wasmlm-mt.wasm dist/wasmlm.wasm dist/wasmlm-relaxed-mt.wasm dist/wasmlm-relaxed.wasm \
           dist/wasmlm-scalar.wasm; do
    for m; do [[ "$m" == "$p" ]] && echo "$m"; done
  done
  for m; do [[ "$m" == dist/wasmlm64* ]] && echo "$m"; done
  return 0
}
relaxed_ok() { [[ "$(cat build/wasm/relaxed-status.txt 2>/dev/null)" == ok ]]; }
# the module the page loads first on a typical browser (js/runtime/wasm.js planModule: relaxed SIMD
# where it runs, threads where the page is cross-origin isolated, as tools/serve.mjs makes it
# unless ISOLATE=0, which `ISOLATE=0 npm start` passes on to here too)
first_module() {
  local t=-mt
  [[ "${ISOLATE:-}" == 0 ]] && t=
  if relaxed_ok; then echo "dist/wasmlm-relaxed$t.wasm"; else echo "dist/wasmlm$t.wasm"; fi
}

modules=(dist/wasmlm.wasm dist/wasmlm-scalar.wasm dist/wasmlm-mt.wasm)
if ((if_needed)); then
  if ((first)) && [[ -f build/wasm/relaxed-status.txt ]] && up_to_date "$(first_module)"; then exit 0; fi
  if ((${#only[@]})) && up_to_date "${only[@]}"; then exit 0; fi
  if ((!first && !${#only[@]})) && up_to_date "${modules[@]}"; then
    relaxed_gone=0   # the relaxed modules' toolchain is there but they are not (yet)
    relaxed_ok && [[ ! -f dist/wasmlm-relaxed-mt.wasm ]] && relaxed_gone=1
    [[ "$(cat build/wasm/memory64-status.txt 2>/dev/null)" == ok && ! -f dist/wasmlm64-mt.wasm ]] \
      && relaxed_gone=1   # the same for the memory64 modules
    # each memory64 module that CMake builds is there too
    if [[ "$(cat build/wasm/memory64-status.txt 2>/dev/null)" == ok ]]; then
      for v in $(grep -o 'WASMLM_MEMORY64_MODULES:STRING=.*' build/wasm/CMakeCache.txt | cut -d= -f2 | tr ';' ' '); do
        [[ -f "dist/wasmlm$v.wasm" ]] || relaxed_gone=1
      done
    fi
    if ((!relaxed_gone)); then exit 0; fi
  fi
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
configure() {   # configure [-DWASMLM_EM64=...]: (re)configures build/wasm
  emcmake cmake -S . -B build/wasm -DCMAKE_BUILD_TYPE=Release "${werror[@]}" "$@" \
    -DCMAKE_CROSSCOMPILING_EMULATOR=node -DCMAKE_C_FLAGS_RELEASE="-O3 -DNDEBUG" >/dev/null
}

# --first, --only, and --progressive's first module: without preparing the memory64 toolchain
# (~2 min on its first run), keeping what the build directory has (no memory64 modules at first)
if ((first || ${#only[@]} || progressive)); then
  configure
  if ((first || progressive)); then only=("$(first_module)"); fi
  for m in "${only[@]}"; do
    if [[ "$m" == dist/wasmlm-relaxed* ]] && ! relaxed_ok; then
      echo "tools/build.sh: cannot build $m: $(cat build/wasm/relaxed-status.txt 2>/dev/null)"; exit 1
    fi
    if [[ "$m" == dist/wasmlm64* && "$(cat build/wasm/memory64-status.txt 2>/dev/null)" != ok ]]; then
      echo "tools/build.sh: cannot build $m here yet: run tools/build.sh --wasm-only once ($(cat build/wasm/memory64-status.txt 2>/dev/null))"
      exit 1
    fi
  done
  if ((progressive)); then
    # announce all the modules this run is expected to build, so that tools/serve.mjs holds
    # their requests: the wasm32 ones, and the memory64 ones the cache (or the default) names
    # where their toolchain's prerequisites are there (corrected once it is prepared)
    expect=("${only[0]}")
    all=("${modules[@]}")
    relaxed_ok && all+=(dist/wasmlm-relaxed.wasm dist/wasmlm-relaxed-mt.wasm)
    for m in $(ordered "${all[@]}"); do [[ "$m" == "${only[0]}" ]] || expect+=("$m"); done
    if relaxed_ok; then
      if command -v python3 >/dev/null && command -v patch >/dev/null; then
        m64list=${WASMLM_MEMORY64_MODULES:-$(grep -o 'WASMLM_MEMORY64_MODULES:STRING=.*' build/wasm/CMakeCache.txt 2>/dev/null | cut -d= -f2)}
        for v in ${m64list//;/ }; do expect+=("dist/wasmlm$v.wasm"); done
      fi
    fi
    expected=${#expect[@]}
    echo "tools/build.sh: building: ${expect[*]}"
    build_modules 1 "$expected" "${only[0]}"
    echo "tools/build.sh: ${only[0]} is built: the page can start; the other $((expected - 1)) modules follow"
    # the other wasm32 modules, one at a time, before the memory64 toolchain
    k=2
    for m in "${expect[@]:1}"; do
      [[ "$m" == dist/wasmlm64* ]] && continue
      build_modules "$k" "$expected" "$m"
      k=$((k + 1))
    done
  else
    echo "tools/build.sh: building: ${only[*]}"
    build_modules 1 "${#only[@]}" "${only[@]}"
    ls -l "${only[@]}"
    exit 0
  fi
fi

# The memory64 modules' toolchain (a patched copy of Emscripten with LLVM 19 and its wasm64
# libraries, cached in build/emscripten64/): prepared once, else the reason is printed and the
# wasm32 modules build alone. WASMLM_MEMORY64_MODULES="64;64-mt" builds two of the four.
m64=()
((progressive)) && echo "tools/build.sh: the memory64 modules' toolchain (tools/wasm64/toolchain.sh: ~2 min the first time; log: build/wasm64-toolchain.log)"
if em64=$(bash tools/wasm64/toolchain.sh 2>build/wasm64-toolchain.log); then
  m64=(-DWASMLM_EM64="$em64")
  [[ -n "${WASMLM_MEMORY64_MODULES:-}" ]] && m64+=(-DWASMLM_MEMORY64_MODULES="$WASMLM_MEMORY64_MODULES")
else
  m64=(-DWASMLM_EM64=)
  echo "tools/build.sh: the memory64 modules are not built: $(tail -1 build/wasm64-toolchain.log)"
fi
configure "${m64[@]}"
# The relaxed-SIMD modules and LLVM 19's SIMD128 kernels, when CMake found their toolchain (else
# it says what is missing).
relaxed_status=$(cat build/wasm/relaxed-status.txt 2>/dev/null || echo "no status")
if [[ "$relaxed_status" == ok ]]; then
  modules+=(dist/wasmlm-relaxed.wasm dist/wasmlm-relaxed-mt.wasm)
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
if ((progressive)); then
  # the memory64 modules, one at a time (the others are built: k - 1 of them)
  rest=()
  for m in "${modules[@]}"; do [[ "$m" == dist/wasmlm64* ]] && rest+=("$m"); done
  echo "tools/build.sh: building: ${rest[*]}"
  n=$((k - 1 + ${#rest[@]}))
  for m in "${rest[@]}"; do
    build_modules "$k" "$n" "$m"
    k=$((k + 1))
  done
elif ((wasm_only)); then
  echo "tools/build.sh: building: ${modules[*]}"
  build_modules 1 "${#modules[@]}" "${modules[@]}"
else
  echo "tools/build.sh: building: ${modules[*]}"
  set_pending "${modules[@]}"
  cmake --build build/wasm -j"$jobs"
  touch "${modules[@]}"   # up to date now, even when nothing needed relinking (--if-needed)
  k=1
  for m in "${modules[@]}"; do echo "tools/build.sh: built $m ($((k++))/${#modules[@]})"; done
  set_pending
  cmake -S . -B build/native -DCMAKE_BUILD_TYPE=Release "${werror[@]}" >/dev/null
  cmake --build build/native -j"$jobs"
fi
ls -l "${modules[@]}"
