#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Bootstraps dependencies, builds everything but the benchmark programs (whose code the build
# checks; `cmake --build build --target benches` builds them) and runs the whole test suite.
#   scripts/test.sh [extra ctest arguments]
# Environment: BUILD_DIR (default build), JOBS (default 2).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
scripts/bootstrap.sh
build=${BUILD_DIR:-build}
jobs=${JOBS:-2}
export CCACHE_SLOPPINESS=${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}
# ccache's depend mode: on a miss it hashes the headers the compiler's dependency file names
# instead of running the preprocessor first (about a second a translation unit here).
export CCACHE_DEPEND=${CCACHE_DEPEND:-true}
cmake -S . -B "$build" -G Ninja
cmake --build "$build" -j "$jobs"
ctest --test-dir "$build" --output-on-failure -j "$jobs" "$@"
# ctest shows a skipped test without its output: say why the GPU tests, consumer_nvcc and
# gpu_torch_vmm were skipped.
for gpu_tests in "$build/tests/gpu/inferwire_gpu_tests" "$build/tests/gpu/inferwire_gms_gpu_tests"; do
  if [ -x "$gpu_tests" ]; then
    "$gpu_tests" --list-test-names-only 2>&1 | head -n 1 || true
  fi
done
grep -ho "SKIPPED: consumer_nvcc.*" "$build/Testing/Temporary/LastTest.log" 2>/dev/null | head -n 1 || true
grep -ho "SKIPPED: gpu_torch_vmm.*" "$build/Testing/Temporary/LastTest.log" 2>/dev/null | head -n 1 || true
