#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the libFuzzer targets of tests/fuzz with clang (ASan + UBSan) and runs each one.
#   scripts/fuzz.sh [--seconds N] [--build-dir DIR] [--compiler CLANGXX] [--quick-build] [target...]
# Default: 600 seconds per target (the long run), built with -O1 and full debug information; the
# test command runs it with --seconds 5 --quick-build (-O0, line tables: half the compile time;
# one program of all the targets) in a build folder of its own.
# Seeds come from tests/fuzz/corpus/<target>; what a run finds new stays in the build dir.
# Exits non-zero when a target crashes, leaks, times out or trips a sanitizer.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
seconds=600
build="$root/build/fuzz"
compiler=$(command -v clang++-14 || command -v clang++ || true)
targets=()
quick=OFF
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --build-dir) build=$2; shift 2 ;;
    --compiler) compiler=$2; shift 2 ;;
    --quick-build) quick=ON; shift ;;
    *) targets+=("$1"); shift ;;
  esac
done
[ -n "$compiler" ] || { echo "fuzz: clang++ not found"; exit 1; }
[ ${#targets[@]} -gt 0 ] || targets=(json_infer binary_infer bytes vmm_deposit config gms_codec gms_server http_reply sse grpc_messages http_endpoints http_connection)

cmake -S "$root/tests/fuzz" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER="$compiler" \
  -DINFERWIRE_FUZZ_QUICK_BUILD=$quick >/dev/null
cmake --build "$build" -j "${JOBS:-2}"

status=0
for t in "${targets[@]}"; do
  # The quick build makes one program of all the targets (fuzz_smoke), told which to run by
  # INFERWIRE_FUZZ_TARGET; the long runs' build makes fuzz_<target> each.
  bin="$build/fuzz_$t"
  [ "$quick" = ON ] && bin="$build/fuzz_smoke"
  [ -x "$bin" ] || { echo "fuzz: $t was not built"; status=1; continue; }
  work="$build/corpus/$t"
  mkdir -p "$work" "$build/artifacts/$t"
  log="$build/$t.log"
  echo "fuzz: $t for ${seconds}s"
  dict=()
  [ -f "$root/tests/fuzz/$t.dict" ] && dict=(-dict="$root/tests/fuzz/$t.dict")
  if INFERWIRE_FUZZ_TARGET=$t ASAN_OPTIONS=detect_leaks=1 "$bin" -max_total_time="$seconds" \
       -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
       -artifact_prefix="$build/artifacts/$t/" "${dict[@]}" \
       "$work" "$root/tests/fuzz/corpus/$t" >"$log" 2>&1; then
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | grep -o '[0-9]*' || echo "?")
    ft=$(grep -o 'ft: [0-9]*' "$log" | tail -n 1 | grep -o '[0-9]*' || echo "?")
    echo "fuzz: $t ok: $runs executions, coverage $cov edges, $ft features"
  else
    echo "fuzz: $t FAILED; the end of its log ($log):"
    tail -n 40 "$log"
    status=1
  fi
done
exit $status
