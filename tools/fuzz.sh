#!/usr/bin/env bash
# tools/fuzz.sh — builds the libFuzzer harnesses of fuzz/ with clang (ASan + UBSan, native),
# writes the generated seed corpora from ../shared/models into build/fuzz-corpus, replays the
# saved crash inputs in fuzz/regressions/, then fuzzes each harness from its seeds plus its
# committed corpus fuzz/corpus/HARNESS/ and reports executions, coverage (libFuzzer's cov/ft),
# corpus size and exec/s per harness (also in build/fuzz-logs/summary.{md,json}). Exits
# non-zero when any harness crashes, leaks, times out or exceeds its memory limit; the
# crashing input lands in build/fuzz-artifacts/HARNESS/ and the log in
# build/fuzz-logs/HARNESS.log (see fuzz/README.md).
#
#   tools/fuzz.sh [SECONDS] [HARNESS...]            # the old form: SECONDS per harness (60)
#   tools/fuzz.sh 20                                # the short run of tools/test.sh
#   tools/fuzz.sh 600 fuzz_model                    # ten minutes of one harness
#   npm run fuzz -- --minutes 30 --jobs 2 --merge   # the long run (fuzz/README.md)
#
# Options: --minutes N / --seconds N per harness (0: no fuzzing, only the replays and --merge);
# -FLAG=VALUE: a libFuzzer flag for this run, over the harness's own (e.g. -max_len=65536);
# --jobs J harnesses at a time (default 1; each is one process on one core); --merge: after
# fuzzing, minimise the committed corpus plus what this and earlier runs found (libFuzzer
# -merge=1, counted against the generated seeds) into fuzz/corpus/HARNESS/, keeping inputs of
# at most corpus_max_len bytes. Every fuzz/fuzz_*.c is a harness; its libFuzzer flags
# (max_len, timeout, dict, ...) come from fuzz/HARNESS.options (OSS-Fuzz's format).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit "${1:-2}"; }
secs=60
jobs=1
merge=0
harnesses=()
extra=()
while (($#)); do
  case $1 in
    --minutes) [[ ${2:-} =~ ^[0-9]+$ ]] || usage; secs=$(($2 * 60)); shift 2 ;;
    --seconds) [[ ${2:-} =~ ^[0-9]+$ ]] || usage; secs=$2; shift 2 ;;
    --jobs | -j) [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || usage; jobs=$2; shift 2 ;;
    --merge) merge=1; shift ;;
    -h | --help) usage 0 ;;
    [0-9]*) [[ $1 =~ ^[0-9]+$ ]] || usage; secs=$1; shift ;;
    -?*=*) extra+=("$1"); shift ;; # a libFuzzer flag, after the harness's own (it wins)
    fuzz_*) [[ -f fuzz/$1.c ]] || { echo "tools/fuzz.sh: no harness fuzz/$1.c" >&2; exit 2; }
            harnesses+=("$1"); shift ;;
    *) echo "tools/fuzz.sh: unknown argument '$1'" >&2; usage ;;
  esac
done
# Every harness in fuzz/ (CMakeLists.txt builds the same list).
if ((${#harnesses[@]} == 0)); then
  for src in fuzz/fuzz_*.c; do harnesses+=("$(basename "$src" .c)"); done
fi
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

# libFuzzer flags of a harness: the defaults, then [libfuzzer] of fuzz/HARNESS.options (a later
# flag wins; dict is relative to fuzz/).
libfuzzer_flags() {
  echo "-max_len=4096 -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=512"
  [[ -f fuzz/$1.options ]] || return 0
  awk '/^[[:space:]]*\[/ { sec = $0; gsub(/[][:space:][]/, "", sec); next }
       sec == "libfuzzer" && /=/ && !/^[[:space:]]*[#;]/ {
         k = substr($0, 1, index($0, "=") - 1); v = substr($0, index($0, "=") + 1)
         gsub(/^[[:space:]]+|[[:space:]]+$/, "", k); gsub(/^[[:space:]]+|[[:space:]]+$/, "", v)
         if (k == "dict") v = "fuzz/" v
         printf "-%s=%s\n", k, v }' "fuzz/$1.options"
}
# A value of fuzz/HARNESS.options' [wasmlm] section (this script's own settings), or $3.
wasmlm_opt() {
  local v=""
  [[ -f fuzz/$1.options ]] && v=$(awk -v key="$2" '
       /^[[:space:]]*\[/ { sec = $0; gsub(/[][:space:][]/, "", sec); next }
       sec == "wasmlm" && /=/ { k = substr($0, 1, index($0, "=") - 1); v = substr($0, index($0, "=") + 1)
         gsub(/^[[:space:]]+|[[:space:]]+$/, "", k); gsub(/^[[:space:]]+|[[:space:]]+$/, "", v)
         if (k == key) print v }' "fuzz/$1.options")
  echo "${v:-$3}"
}

# The first sanitizer / check report of a log, with the input it came from (replays print
# "Running: FILE" before each input), without libFuzzer's own frames.
first_report() {
  awk '/^Running: /{run=$0} /ERROR|FUZZ CHECK|runtime error/ && !p {p=1; if (run) print run}
       p && n < 14 && !/fuzzer::|^INFO|^MS:|^base64/ {print; n++}' "$1"
}
# What ended a failed run, in a word.
failure_kind() {
  if grep -q "libFuzzer: timeout" "$1"; then echo timeout
  elif grep -q "libFuzzer: out-of-memory\|malloc(.*) exceeds limit" "$1"; then echo out-of-memory
  elif grep -q "LeakSanitizer" "$1"; then echo leak
  elif grep -q "FUZZ CHECK FAILED" "$1"; then echo check-failed
  elif grep -q "runtime error" "$1"; then echo ubsan
  elif grep -q "AddressSanitizer" "$1"; then echo asan
  else echo crash; fi
}

# Minimises fuzz/corpus/H plus the inputs found in build/fuzz-corpus/H against the generated
# seeds (which merge first, so only what adds coverage beyond them is kept) into a fresh
# fuzz/corpus/H. Inputs over corpus_max_len bytes are left out (counted in the log).
merge_corpus() {
  local h=$1 exe=build/fuzz/fuzz/$1 tmp=build/fuzz-merge/$1 cap n_big=0 f big=""
  cap=$(wasmlm_opt "$h" corpus_max_len 65536)
  rm -rf "$tmp"
  mkdir -p "$tmp/out" "$tmp/in" "$tmp/big"
  cp build/fuzz-corpus/"$h"/seed-* "$tmp/out/" 2>/dev/null || true
  for f in build/fuzz-corpus/"$h"/* fuzz/corpus/"$h"/*; do
    [[ -f $f && $(basename "$f") != seed-* ]] || continue
    if (($(stat -c %s "$f") > cap)); then n_big=$((n_big + 1)); cp "$f" "$tmp/big/"; continue; fi
    cp "$f" "$tmp/in/"
  done
  # The harness's own -timeout, not this run's: what is committed must replay within it in CI
  # (a merge on a loaded machine may drop an input that only looked slow: wall-clock time).
  # Crash and timeout files land in $tmp.
  local flags=(-artifact_prefix="$tmp/")
  # merge_flags in [wasmlm]: e.g. -use_counters=0, which keeps only inputs adding edges (not
  # hit-count buckets): every edge, a third of the files for the large-input harnesses.
  # shellcheck disable=SC2207
  flags+=($(wasmlm_opt "$h" merge_flags ""))
  # shellcheck disable=SC2046
  "$exe" -merge=1 $(libfuzzer_flags "$h") "${flags[@]}" "$tmp/out" "$tmp/in" \
    >"build/fuzz-logs/$h.merge.log" 2>&1 || {
    echo "merge failed (build/fuzz-logs/$h.merge.log)"; return 1; }
  # What the inputs left out would have added (merged into a copy, then dropped).
  if ((n_big)); then
    cp -r "$tmp/out" "$tmp/with-big"
    # shellcheck disable=SC2046
    "$exe" -merge=1 $(libfuzzer_flags "$h") "${flags[@]}" "$tmp/with-big" "$tmp/big" \
      >"build/fuzz-logs/$h.merge-big.log" 2>&1 &&
      big="; those would add $(grep -o "[0-9]* new files with [0-9]* new features added; [0-9]* new coverage edges" "build/fuzz-logs/$h.merge-big.log" | tail -1)"
  fi
  rm -f "$tmp"/out/seed-*
  rm -rf "fuzz/corpus/$h"
  mkdir -p "fuzz/corpus/$h"
  cp "$tmp"/out/* "fuzz/corpus/$h/" 2>/dev/null || true
  echo "merged: $(find "fuzz/corpus/$h" -type f | wc -l) inputs, $(cat "fuzz/corpus/$h"/* 2>/dev/null | wc -c) bytes in fuzz/corpus/$h, adding $(grep -o "[0-9]* new coverage edges" "build/fuzz-logs/$h.merge.log" | tail -1) to the seeds' ($n_big over $cap bytes left out$big)"
}

# A value of build/fuzz-logs/H.result.
result() { sed -n "s/^$2=//p" "build/fuzz-logs/$1.result"; }

# One harness: replays, fuzzing, optional merge. Writes build/fuzz-logs/H.result (key=value
# lines) and prints one line; returns 0 (failures are in the result file).
run_one() {
  local h=$1 exe=build/fuzz/fuzz/$1 log=build/fuzz-logs/$1.log res=build/fuzz-logs/$1.result
  local status=clean regress=(fuzz/regressions/"$1"/*) corpora=("build/fuzz-corpus/$1") line
  : >"$res"
  # Saved crashes first: each must now run clean (strict checks, see fuzz/README.md).
  if [[ -e "${regress[0]}" ]] &&
     ! FZ_STRICT=1 "$exe" "${regress[@]}" >"build/fuzz-logs/$h.regressions.log" 2>&1; then
    { echo "== $h: a saved regression input still fails:"
      first_report "build/fuzz-logs/$h.regressions.log"; } >&2
    status="regression-failed"
  fi
  if ((secs > 0)); then
    mkdir -p "build/fuzz-artifacts/$h"
    [[ -d fuzz/corpus/$h ]] && corpora+=("fuzz/corpus/$h")
    # In a subshell whose `times` gives the harness's CPU time (user + system): on a shared
    # machine runs per CPU second say more about a harness than exec/s.
    local t0=$SECONDS
    # shellcheck disable=SC2046
    if ! (rc=0; "$exe" $(libfuzzer_flags "$h") "${extra[@]}" -max_total_time="$secs" -print_final_stats=1 \
            -artifact_prefix="build/fuzz-artifacts/$h/" "${corpora[@]}" >"$log" 2>&1 || rc=$?
          times >"build/fuzz-logs/$h.times"; exit $rc); then
      status=$(failure_kind "$log")
      { echo "== $h: FAILED ($status; log: $log)"
        first_report "$log"
        grep -E "^SUMMARY|Test unit written" "$log" || true; } >&2
    fi
    # The last status line (DONE after a clean run) and the final stats.
    line=$(grep -E "^#[0-9]+" "$log" | tail -1 || true)
    {
      echo "elapsed_s=$((SECONDS - t0))"
      echo "runs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+).*/\1/p' "$log")"
      echo "exec_s=$(sed -nE 's/^stat::average_exec_per_sec: *([0-9]+).*/\1/p' "$log")"
      echo "cov=$(sed -nE 's/.* cov: ([0-9]+).*/\1/p' <<<"$line")"
      echo "ft=$(sed -nE 's/.* ft: ([0-9]+).*/\1/p' <<<"$line")"
      echo "corpus=$(sed -nE 's/.* corp: ([0-9]+\/[0-9]+[a-zA-Z]*).*/\1/p' <<<"$line")"
      echo "peak_rss_mb=$(sed -nE 's/^stat::peak_rss_mb: *([0-9]+).*/\1/p' "$log")"
      echo "slowest_s=$(sed -nE 's/^stat::slowest_unit_time_sec: *([0-9]+).*/\1/p' "$log")"
      # "1m2.500s 0m0.250s" -> 62.75
      echo "cpu_s=$(awk '{ t = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); t += a[1] * 60 + a[2] }
                           printf "%.0f", t }' <(tail -1 "build/fuzz-logs/$h.times"))"
    } >>"$res"
  fi
  echo "status=$status" >>"$res"
  if ((merge)) && [[ $status == clean ]]; then
    echo "merge=$(merge_corpus "$h")" >>"$res"
  fi
  if ((secs > 0)); then
    echo "== $h: $(result "$h" elapsed_s)s of ${secs}s, $status ($(result "$h" runs) runs, cov $(result "$h" cov), ft $(result "$h" ft), $(result "$h" exec_s) exec/s, $(result "$h" cpu_s) CPU s, corpus $(result "$h" corpus), peak $(result "$h" peak_rss_mb) MB)"
  else
    echo "== $h: replays $status"
  fi
  [[ -z $(result "$h" merge) ]] || echo "   $(result "$h" merge)"
  return 0
}

mkdir -p build/fuzz-logs
running=0
for h in "${harnesses[@]}"; do
  if ((jobs > 1)); then
    run_one "$h" &
    if ((++running >= jobs)); then wait -n || true; running=$((running - 1)); fi
  else
    run_one "$h"
  fi
done
wait

# Summary: a table (build/fuzz-logs/summary.md) and the same as JSON (summary.json).
failed=()
{
  echo "| harness | seconds run | CPU s | runs | exec/s | runs per CPU s | cov | ft | corpus (files/size) | peak RSS MB | result |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|"
} >build/fuzz-logs/summary.md
json="["
for h in "${harnesses[@]}"; do
  elapsed=$(result "$h" elapsed_s) runs=$(result "$h" runs) exec_s=$(result "$h" exec_s) cov=$(result "$h" cov) ft=$(result "$h" ft)
  corpus=$(result "$h" corpus) rss=$(result "$h" peak_rss_mb) slowest=$(result "$h" slowest_s)
  status=$(result "$h" status) cpu=$(result "$h" cpu_s) per_cpu=""
  [[ -n $runs && -n $cpu && $cpu != 0 ]] && per_cpu=$((runs / cpu))
  [[ $status == clean ]] || failed+=("$h ($status)")
  echo "| \`$h\` | ${elapsed:-0} | ${cpu:-} | ${runs:-} | ${exec_s:-} | ${per_cpu:-} | ${cov:-} | ${ft:-} | ${corpus:-} | ${rss:-} | $status |" \
    >>build/fuzz-logs/summary.md
  json+=$(printf '%s{"harness":"%s","seconds":%d,"elapsed_s":%s,"cpu_s":%s,"runs":%s,"exec_per_s":%s,"cov":%s,"ft":%s,"corpus":"%s","peak_rss_mb":%s,"slowest_unit_s":%s,"status":"%s"}' \
    "$([[ $json == "[" ]] || echo ,)" "$h" "$secs" "${elapsed:-null}" "${cpu:-null}" "${runs:-null}" "${exec_s:-null}" "${cov:-null}" \
    "${ft:-null}" "${corpus:-}" "${rss:-null}" "${slowest:-null}" "$status")
done
echo "$json]" >build/fuzz-logs/summary.json
if ((${#failed[@]})); then
  echo "tools/fuzz.sh: failures in: ${failed[*]}" >&2
  exit 1
fi
