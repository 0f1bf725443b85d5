#!/usr/bin/env bash
# tools/wasm64/toolchain.sh — the toolchain of the memory64 (wasm64) modules: a copy of the
# system's Emscripten (Debian's 3.1.6 in /usr/share/emscripten, never edited) with
# tools/wasm64/emscripten-3.1.6.patch applied, driving LLVM 19 (clang-19, lld-19), and the wasm64
# system libraries it needs (libc, dlmalloc, compiler-rt, the standalone runtime) built by that
# copy into its own cache. Cached under build/emscripten64/KEY, KEY a hash of the Emscripten
# version, LLVM 19's and the npm binaryen's versions, the patch and this script: a second run
# only prints the path. First run: ~2 min on 2 idle cores, ~40 MB.
#
#   bash tools/wasm64/toolchain.sh        # prints the directory, or why it cannot (exit 1)
#
# The directory holds bin/emcc (emcc of the patched copy, for `emcc -c -sMEMORY64`), bin/wasm-ld
# and bin/wasm-opt, and lib/ (the wasm64 libraries and crt1_reactor.o). The modules are linked
# by wasm-ld directly (cmake/memory64.cmake), not by emcc: 3.1.6's emcc runs Binaryen's
# wasm-emscripten-finalize on every link, and Debian's (version 108, the only one there is:
# newer Binaryens dropped it) rejects the 64-bit function table that LLVM 19 gives wasm64.
#
# Why each patch (bench/README.md, 2026-11-24 feasibility spike, and 2026-11-27):
#   - library_pthread_stub.c: two stubs defined without parameters, an error for LLVM 19;
#   - compiler-rt's fp_compare_impl.inc: the long-double comparisons (strtod uses them) return
#     `long`, 64-bit on wasm64, where LLVM calls them as returning int: wasm-ld replaced them
#     with traps (signature mismatch);
#   - sbrk.c: the heap's overflow check compared 32 bits, so a wasm64 heap stopped near 4 GB;
#   - standalone.c: __syscall_ioctl defined with ints where musl declares longs (a signature
#     mismatch on wasm64, which wasm-ld warned about).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD

emcc_sys=$(command -v emcc || true)
llvm=${WASMLM_LLVM19:-/usr/lib/llvm-19/bin}
binaryen=$root/node_modules/binaryen/bin
patchfile=$root/tools/wasm64/emscripten-3.1.6.patch
missing=""
[[ -n "$emcc_sys" ]] || missing+=" emcc (apt-get install emscripten);"
[[ -x "$llvm/clang" && -x "$llvm/wasm-ld" ]] || missing+=" clang and wasm-ld of LLVM 19 in $llvm (apt-get install clang-19 lld-19);"
[[ -x "$binaryen/wasm-opt" ]] || missing+=" $binaryen/wasm-opt (npm ci installs the devDependency binaryen);"
command -v python3 >/dev/null || missing+=" python3;"
command -v patch >/dev/null || missing+=" patch;"
if [[ -n "$missing" ]]; then
  echo "missing$missing" >&2
  exit 1
fi
# Debian's /usr/bin/emcc is a shell wrapper around /usr/share/emscripten/emcc.py.
emsrc=/usr/share/emscripten
[[ -f "$emsrc/emcc.py" ]] || emsrc=$(dirname "$(readlink -f "$emcc_sys")")
version=$(cat "$emsrc/emscripten-version.txt" 2>/dev/null | tr -d '"\n' || echo unknown)
if [[ "$version" != 3.1.6 ]]; then
  echo "Emscripten $version in $emsrc: tools/wasm64/emscripten-3.1.6.patch is for 3.1.6" >&2
  exit 1
fi
key=$( { echo "$version"; "$llvm/clang" --version | head -1; "$binaryen/wasm-opt" --version;
         cat "$patchfile" "$root/tools/wasm64/toolchain.sh"; } | sha256sum | cut -c1-12)
dir=$root/build/emscripten64/$key
if [[ -f "$dir/ready" ]]; then
  echo "$dir"
  exit 0
fi

echo "tools/wasm64/toolchain.sh: preparing $dir (patched Emscripten $version, LLVM 19, wasm64 libraries)" >&2
rm -rf "$root/build/emscripten64"   # older keys, and a half-prepared one
mkdir -p "$dir/emscripten" "$dir/bin" "$dir/binaryen/bin" "$dir/cache"
for f in "$emsrc"/*; do
  case "$(basename "$f")" in cache|tests|__pycache__) ;; *) cp -a "$f" "$dir/emscripten/" ;; esac
done
patch -s -p1 -d "$dir/emscripten" < "$patchfile"
for t in wasm-opt wasm-metadce wasm-dis wasm-as; do ln -s "$binaryen/$t" "$dir/binaryen/bin/$t"; done
cat > "$dir/config.py" <<EOF
# Written by tools/wasm64/toolchain.sh: the patched copy of Emscripten, LLVM 19, its own cache.
LLVM_ROOT = '$llvm'
BINARYEN_ROOT = '$dir/binaryen'
NODE_JS = '$(command -v node)'
CACHE = '$dir/cache'
FROZEN_CACHE = False
EOF
cat > "$dir/bin/emcc" <<EOF
#!/bin/sh
# emcc of the patched copy (tools/wasm64/toolchain.sh)
EM_CONFIG='$dir/config.py' EM_LLVM_ADD_VERSION= EM_CLANG_ADD_VERSION= NODE_PATH=/usr/share/nodejs \\
  exec python3 '$dir/emscripten/emcc.py' "\$@"
EOF
chmod +x "$dir/bin/emcc"
ln -s "$llvm/wasm-ld" "$dir/bin/wasm-ld"
ln -s "$binaryen/wasm-opt" "$dir/bin/wasm-opt"
# (embuilder compiles each file with the `emcc` on the PATH: the copy's, first in it)
PATH="$dir/bin:$PATH" EM_CONFIG=$dir/config.py EM_LLVM_ADD_VERSION= EM_CLANG_ADD_VERSION= \
  NODE_PATH=/usr/share/nodejs python3 "$dir/emscripten/embuilder.py" build --wasm64 \
  libc libdlmalloc libcompiler_rt libstandalonewasm-memgrow libnoexit crt1_reactor >&2
ln -s "$dir/cache/sysroot/lib/wasm64-emscripten" "$dir/lib"
rm -rf "$dir/cache/build"   # the libraries' objects: 150 MB
touch "$dir/ready"
echo "$dir"
