#!/usr/bin/env bash
# tools/bench_matmat_ab.sh [REV] [TYPE ROWS COLS NE ITERS]
# A/B of one type's split-form matrix-matrix kernel (the prefill's; quant_relaxed_split.c) of git
# revision REV (default main) against the work tree's, at a prefill's shape (default: Q5_0, the
# 4864 x 896 ffn_gate of Qwen2.5-0.5B, 64 entries), in one wasm module under Node 24, alternating,
# process CPU time; tools/bench_matmat_ab.c says what it times and checks (the same bits). TYPE is
# the ggml id (2 Q4_0, 3 Q4_1, 6 Q5_0, 7 Q5_1, 8 Q8_0, 12 Q4_K, 14 Q6_K). Linked at -O2 as
# tools/bench_relaxed_ab.sh (whose notes apply); confirm end to end with bench/ab.mjs --mode
# prefill. Not a test; needs what tools/build.sh needs for the relaxed modules.
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:-main}
shift || true
B=build/bench_matmat_ab
rm -rf "$B" && mkdir -p "$B/old/kernels" "$B/bin"
source tools/bench_ab_link.sh
ab_old_kernels "$B" "$rev"
# REV's split-form unit, as quant_relaxed_split.c builds it, with every public name prefixed old_
{
  echo '#define WLM_QUANT_DOT_SPLIT 1'
  echo '#define RX_DOT(a, b, c) wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_i16x8_relaxed_dot_i8x16_i7x16((a), (b)), wasm_i16x8_splat(1)), (c))'
  for f in wlm_f16_matvec_simd wlm_bf16_matvec_simd wlm_quantize_q8_0_simd wlm_quantize_q8_1_simd \
           wlm_quantize_q8_K_simd wlm_quant_matvec_split wlm_quant_matvec_split_near wlm_quant_matmat_split; do
    echo "#define $f old_$f"
  done
  echo '#pragma clang diagnostic ignored "-Wunused-function"'
  echo '#include "kernels/quant_simd.c"'
} > "$B/old.c"
ab_link_run "$B" bench_matmat_ab "quant_simd quant quant_blocks32 quant_kquants quant_relaxed_split kernels_simd kernels_ref" "$@"
