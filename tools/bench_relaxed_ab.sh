#!/usr/bin/env bash
# tools/bench_relaxed_ab.sh [REV] [TYPE ITERS F32 MODE]
# A/B of the quantized kernels of git revision REV (default main) against the work tree's, in
# one wasm module under one Node (.tools/node24: relaxed SIMD), alternating per iteration, so a
# busy machine moves both alike. Both quant_simd.c are compiled with LLVM 19 and -mrelaxed-simd
# (REV's with its public names prefixed old_); tools/bench_relaxed_ab.c says what it times.
# TYPE q8_0|q4_0|q5_0|q4_1|q5_1|q2_K|q3_K|q4_K|q5_K|q6_K, ITERS (<= 64), F32 1 adds the F32 matvec, MODE 0 cold (every
# layer's weights, streamed), 1 one layer's seven matrices repeated, 2 one 768x768 matrix.
# RXFLAGS="-DX" adds flags to the work tree's compilation (variants behind an #ifdef).
# Linked at -O2, nearest the modules' -O3 (which this harness cannot run: minified import names);
# until 2026-11-24 16:25 it linked at -O1, which slowed the fused relaxed dot and overstated the
# split form (docs/how-it-works.md, dotform). Confirm a kernel change end to end with bench/ab.mjs.
# Not a test; needs what tools/build.sh needs for the relaxed modules.
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:-main}
shift || true
B=build/bench_ab
rm -rf "$B" && mkdir -p "$B/old/kernels" "$B/bin"
source tools/bench_ab_link.sh
ab_old_kernels "$B" "$rev"
{
  grep -rohE "\b(wlm_[a-zA-Z0-9_]*_simd(128)?|wlm_quant_have_[a-z]+|wlm_quant_matvec_near|wlm_quant_matmat_group)\b" "$B/old/kernels" |
    sort -u | sed 's/.*/#define & old_&/'
  echo '#include "kernels/quant_simd.c"'
} > "$B/old.c"
ab_link_run "$B" bench_relaxed_ab "quant_simd quant quant_blocks32 quant_kquants kernels_simd kernels_ref" "$@"
