#!/usr/bin/env bash
# Builds tools/bench_kernels.c twice with Emscripten (SIMD128 and scalar) into build/bench and runs
# both under node: GB/s of weight bytes per kernel and type on the stories110M / Llama shapes.
# Arguments go to both runs (--quick, --hot, --wall, --only=Q8_0,Q4_K,attention). Not part of the
# tests.
set -euo pipefail
cd "$(dirname "$0")/.."
export NODE_PATH="${NODE_PATH:-/usr/share/nodejs}"   # Debian's emcc needs its acorn at -O2+
mkdir -p build/bench
echo '{"type": "commonjs"}' > build/bench/package.json
src=(tools/bench_kernels.c src/kernels/quant.c src/kernels/quant_blocks32.c src/kernels/quant_kquants.c src/kernels/quant_simd.c src/kernels/kernels_ref.c src/kernels/kernels_simd.c)
flags=(-std=c11 -O3 -DNDEBUG -Wall -Wextra -Isrc -sALLOW_MEMORY_GROWTH=1 -sMAXIMUM_MEMORY=4GB
       -sENVIRONMENT=node -sWASM_ASYNC_COMPILATION=0)
emcc "${flags[@]}" -msimd128 "${src[@]}" -o build/bench/bench_kernels_simd.js
emcc "${flags[@]}" "${src[@]}" -o build/bench/bench_kernels_scalar.js
echo "== SIMD128 build"
node build/bench/bench_kernels_simd.js "$@"
echo "== scalar build (no -msimd128)"
node build/bench/bench_kernels_scalar.js "$@"
