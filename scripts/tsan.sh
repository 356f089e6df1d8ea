#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds inferwire-server and test programs with ThreadSanitizer, runs the tests (servers they
# start inherit the sanitizer) and lists the data races whose two accesses are both in this
# project's code.
#   scripts/tsan.sh [--build-dir DIR] [test-target...]
# Default targets: the integration, gRPC and hostile tests. Reports go to
# <build-dir>/tsan/r.<pid>; exits non-zero when a race lies in our code.
#
# gRPC, protobuf and abseil come from the distribution, built without the sanitizer: TSan does
# not see their internal synchronisation (completion queues, absl::Mutex), so it reports many
# races inside them or between them and our code that hand objects across their queues. The
# listing keeps only reports where both racing accesses are ours, and -DINFERWIRE_TSAN annotates
# where our code hands a call to gRPC's completion queues and takes it back
# (<inferwire/core/config.hpp>). protobuf's headers change the
# layout of some classes under TSan (PROTOBUF_TSAN), which breaks against the uninstrumented
# library, hence -U__SANITIZE_THREAD__.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="$root/build-tsan"
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
[ ${#targets[@]} -gt 0 ] ||
  targets=(inferwire_integration_tests inferwire_grpc_tests inferwire_hostile_tests)

flags="-fsanitize=thread -U__SANITIZE_THREAD__ -DINFERWIRE_TSAN"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DINFERWIRE_CUDA=OFF \
  -DINFERWIRE_BUILD_EXAMPLES=OFF -DINFERWIRE_BUILD_BENCHMARKS=OFF \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_C_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread >/dev/null
cmake --build "$build" -j "${JOBS:-2}" --target inferwire-server "${targets[@]}"

reports="$build/tsan"
rm -rf "$reports"
mkdir -p "$reports"
export TSAN_OPTIONS="log_path=$reports/r halt_on_error=0 report_signal_unsafe=0"
for t in "${targets[@]}"; do
  bin=$(find "$build/tests" -type f -name "$t" -perm -u+x | head -n 1)
  echo "tsan: $t"
  # Timing-sensitive cases may fail under the sanitizer's slowdown; the races are the point.
  "$bin" >"$reports/$t.log" 2>&1 || echo "tsan: $t had failures (see $reports/$t.log)"
done
python3 - "$reports" <<'PY'
import collections, glob, re, sys
ours = ("reference_server/", "include/inferwire", "tests/", "bench/")
def top(section):
    for line in section.splitlines():
        line = line.strip()
        if line.startswith("#") and not any(s in line for s in ("libtsan", "sanitizer_common", "/usr/include/c++")):
            return line
    return ""
found = collections.Counter()
total = 0
for path in glob.glob(sys.argv[1] + "/r.*"):
    for block in open(path, errors="replace").read().split("==================")[1:]:
        if "WARNING: ThreadSanitizer" not in block:
            continue
        total += 1
        accesses = [s for s in re.split(r"\n\s*\n", block)
                    if re.search(r"(Read|Write|Atomic \w+) of size|Previous (read|write|atomic)", s)]
        tops = [top(s) for s in accesses]
        if len(tops) >= 2 and all(any(o in t for o in ours) for t in tops):
            found[" || ".join(re.sub(r"\(\S+\+0x[0-9a-f]+\)", "", t)[:200] for t in tops)] += 1
print(f"tsan: {total} reports, {sum(found.values())} with both accesses in our code")
for key, n in found.most_common():
    print(f"{n:5} {key}")
sys.exit(1 if found else 0)
PY
