#!/usr/bin/env bash
# Runs every libFuzzer harness of a fuzz build (make fuzz) for SECONDS each,
# FUZZ_JOBS at a time (default: the number of CPUs; each harness is one process). Each starts from its checked-in seeds (tests/fuzz/corpus/NAME)
# and grows a working corpus in BUILD/corpus/NAME. A crash, sanitizer report,
# leak, timeout (10 s per input) or out-of-memory stops that harness and leaves
# the reproducer in BUILD/crashes/NAME/; the script goes on with the others and
# fails at the end if any harness failed. Usage: run_fuzzers.sh BUILD SECONDS [NAME...]
set -uo pipefail
build=${1:?usage: run_fuzzers.sh BUILD_DIR SECONDS [HARNESS...]}
seconds=${2:?usage: run_fuzzers.sh BUILD_DIR SECONDS [HARNESS...]}
shift 2
src=$(cd "$(dirname "$0")" && pwd)
if [ $# -gt 0 ]; then
  names=("$@")
else
  names=()
  for f in "$src"/fuzz_*.cpp; do names+=("$(basename "$f" .cpp | sed 's/^fuzz_//')"); done
fi
# One harness: its run, its log, its verdict in BUILD/fuzz_NAME.rc.
fuzz_one() {
  local name=$1 bin="$build/bin/fuzz_$1"
  [ -x "$bin" ] || bin="$build/tests/fuzz/fuzz_$name"
  mkdir -p "$build/corpus/$name" "$build/crashes/$name"
  local log="$build/fuzz_$name.log" start rc
  start=$(date +%s)
  "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$build/crashes/$name/" "$build/corpus/$name" "$src/corpus/$name" \
    >"$log" 2>&1
  rc=$?
  echo "$rc $(($(date +%s) - start))" >"$build/fuzz_$name.rc"
}
for name in "${names[@]}"; do
  if [ ! -x "$build/bin/fuzz_$name" ] && [ ! -x "$build/tests/fuzz/fuzz_$name" ]; then
    echo "fuzz: no harness binary for $name in $build" >&2
    exit 2
  fi
done
jobs_max=${FUZZ_JOBS:-$(nproc)}
for name in "${names[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n; done
  echo "fuzz: $name for ${seconds}s"
  rm -f "$build/fuzz_$name.rc"
  fuzz_one "$name" &
done
wait
failed=()
for name in "${names[@]}"; do
  log="$build/fuzz_$name.log"
  read -r rc elapsed <"$build/fuzz_$name.rc" 2>/dev/null || { rc=99; elapsed=?; }
  runs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' || true)
  echo "fuzz: $name: exit $rc after ${elapsed}s, ${runs:-?} inputs run"
  if [ "$rc" -ne 0 ]; then
    tail -n 40 "$log" >&2
    echo "fuzz: $name FAILED; reproducer(s) in $build/crashes/$name/:" >&2
    ls -1 "$build/crashes/$name/" >&2
    failed+=("$name")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: failed: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: all harnesses ran ${seconds}s without a finding"
