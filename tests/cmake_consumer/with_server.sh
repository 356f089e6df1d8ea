#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Starts an installed server, runs a command with the server's address as its last argument,
# then stops the server.
#   with_server.sh http|grpc <bin dir> <model repository> <command...>   (the HTTP / gRPC port)
#   with_server.sh gms <bin dir> - <command...>                          (the socket path)
set -euo pipefail
kind=$1 bin=$2 models=$3
shift 3
log=$(mktemp)
sock=""
case "$kind" in
  http|grpc)
    "$bin/inferwire-server" --model-repository "$models" --http-address 127.0.0.1 --http-port 0 \
      --metrics-port 0 --allow-grpc true --grpc-address 127.0.0.1 --grpc-port 0 >"$log" 2>&1 &
    ;;
  gms)
    sock=$(mktemp -u "${TMPDIR:-/tmp}/inferwire-consumer-XXXXXX.sock")
    "$bin/inferwire-gms-server" --device 0 --backend memfd --socket-path "$sock" >"$log" 2>&1 &
    ;;
  *) echo "with_server.sh: unknown kind '$kind'" >&2; exit 2 ;;
esac
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -f "$log" "$sock"' EXIT

address=""
for _ in $(seq 300); do
  case "$kind" in
    http) address=$(sed -n 's/.*Started HTTPService at [0-9.]*:\([0-9]*\).*/\1/p' "$log" | head -n 1) ;;
    grpc) address=$(sed -n 's/.*Started GRPCInferenceService at [0-9.]*:\([0-9]*\).*/\1/p' "$log" | head -n 1) ;;
    gms) [ -S "$sock" ] && address=$sock ;;
  esac
  # The gRPC service starts last: once it is up, every service is.
  if [ -n "$address" ] && { [ "$kind" = gms ] || grep -q "Started GRPCInferenceService" "$log"; }; then
    break
  fi
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "with_server.sh: the server exited during startup:" >&2
    cat "$log" >&2
    exit 1
  fi
  sleep 0.1
done
if [ -z "$address" ]; then
  echo "with_server.sh: the server did not start within 30 s:" >&2
  cat "$log" >&2
  exit 1
fi
"$@" "$address"
