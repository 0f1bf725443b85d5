#!/usr/bin/env bash
# tools/fuzz.sh [SECONDS] [HARNESS...] — builds the libFuzzer harnesses of fuzz/ with clang
# (ASan + UBSan, native), writes the seed corpora from ../shared/models into build/fuzz-corpus,
# replays the saved crash inputs in fuzz/regressions/, then fuzzes each harness for SECONDS
# (default 60) on one core. Exits non-zero when any harness crashes, leaks, times out or
# exceeds its memory limit; the crashing input lands in build/fuzz-artifacts/HARNESS/ and the
# log in build/fuzz-logs/HARNESS.log (see fuzz/README.md).
#   tools/fuzz.sh 20                 # the short run of tools/test.sh
#   tools/fuzz.sh 600 fuzz_model     # ten minutes of one harness
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
shift || true
harnesses=("$@")
((${#harnesses[@]})) || harnesses=(fuzz_model fuzz_tokenizer_bin fuzz_encode fuzz_gguf_vocab fuzz_grammar fuzz_bpe fuzz_json_schema fuzz_wordpiece)
shared=$(cd .. && pwd)/shared
export WASMLM_SHARED="${WASMLM_SHARED:-$shared}"

# clang-14 by name (tools/setup.sh installs it with libclang-rt-14-dev, libFuzzer's runtime);
# WASMLM_FUZZ_CC overrides it.
cc=${WASMLM_FUZZ_CC:-$(command -v clang-14 || true)}
if [[ -z "$cc" ]]; then
  echo "tools/fuzz.sh: clang-14 not found. Install the toolchain with:  sudo bash tools/setup.sh" >&2
  exit 1
fi
cmake -S . -B build/fuzz -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DWASMLM_FUZZ=ON -DWASMLM_WERROR="${WASMLM_WERROR:-ON}" >/dev/null
cmake --build build/fuzz -j"${FUZZ_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}" \
  --target "${harnesses[@]}" >/dev/null
node fuzz/make-corpus.mjs build/fuzz-corpus "$WASMLM_SHARED" >/dev/null

# Per harness: the largest input worth trying (the real files' sizes, with room), and the
# time one input may take before it counts as a hang.
declare -A max_len=([fuzz_model]=1400000 [fuzz_tokenizer_bin]=460000 [fuzz_encode]=1024
                    [fuzz_gguf_vocab]=4194304 [fuzz_grammar]=4096 [fuzz_bpe]=1024
                    [fuzz_json_schema]=8192 [fuzz_wordpiece]=1024)
declare -A timeout=([fuzz_model]=20 [fuzz_tokenizer_bin]=20 [fuzz_encode]=10 [fuzz_gguf_vocab]=30
                    [fuzz_grammar]=10 [fuzz_bpe]=10 [fuzz_json_schema]=10 [fuzz_wordpiece]=10)
declare -A dict=([fuzz_model]=fuzz/gguf.dict [fuzz_gguf_vocab]=fuzz/gguf.dict
                 [fuzz_grammar]=fuzz/gbnf.dict [fuzz_json_schema]=fuzz/json_schema.dict)

# The first sanitizer / check report of a log, with the input it came from (replays print
# "Running: FILE" before each input), without libFuzzer's own frames.
first_report() {
  awk '/^Running: /{run=$0} /ERROR|FUZZ CHECK|runtime error/ && !p {p=1; if (run) print run}
       p && n < 14 && !/fuzzer::|^INFO|^MS:|^base64/ {print; n++}' "$1"
}

mkdir -p build/fuzz-logs
failed=()
for h in "${harnesses[@]}"; do
  exe=build/fuzz/fuzz/$h
  # Saved crashes first: each must now run clean (strict checks, see fuzz/README.md).
  regress=(fuzz/regressions/"$h"/*)
  if [[ -e "${regress[0]}" ]]; then
    if ! FZ_STRICT=1 "$exe" "${regress[@]}" >"build/fuzz-logs/$h.regressions.log" 2>&1; then
      echo "== $h: a saved regression input still fails:" >&2
      first_report "build/fuzz-logs/$h.regressions.log" >&2
      failed+=("$h (regressions)")
    fi
  fi
  mkdir -p "build/fuzz-artifacts/$h"
  args=(-max_total_time="$secs" -max_len="${max_len[$h]}" -timeout="${timeout[$h]}"
        -rss_limit_mb=2048 -malloc_limit_mb=512 -print_final_stats=1
        -artifact_prefix="build/fuzz-artifacts/$h/")
  [[ -n "${dict[$h]:-}" ]] && args+=(-dict="${dict[$h]}")
  log=build/fuzz-logs/$h.log
  if "$exe" "${args[@]}" "build/fuzz-corpus/$h" >"$log" 2>&1; then
    summary=$(grep -E "^#[0-9]+" "$log" | tail -1 | sed -E 's/^#([0-9]+)[^c]*cov: ([0-9]+) ft: ([0-9]+).*exec\/s: ([0-9]+).*/\1 runs, cov \2, ft \3, \4 exec\/s/')
    echo "== $h: ${secs}s clean ($summary)"
  else
    echo "== $h: FAILED (log: $log)" >&2
    first_report "$log" >&2
    grep -E "^SUMMARY|Test unit written" "$log" >&2 || true
    failed+=("$h")
  fi
done
if ((${#failed[@]})); then
  echo "tools/fuzz.sh: failures in: ${failed[*]}" >&2
  exit 1
fi
