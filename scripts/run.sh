#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Bootstraps dependencies, builds inferwire-server and starts it on the bundled model
# repository with client shared memory enabled. Extra arguments go to the server.
#   scripts/run.sh [server flags]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
scripts/bootstrap.sh
build=${BUILD_DIR:-build}
export CCACHE_SLOPPINESS=${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}
# ccache's depend mode: on a miss it hashes the headers the compiler's dependency file names
# instead of running the preprocessor first (about a second a translation unit here).
export CCACHE_DEPEND=${CCACHE_DEPEND:-true}
cmake -S . -B "$build" -G Ninja
cmake --build "$build" -j "${JOBS:-2}" --target inferwire-server
exec "$build/reference_server/inferwire-server" \
  --model-repository "$root/reference_server/models" --allow-client-shm=true "$@"
