#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs one example against a fresh inferwire-server on a free loopback port.
#   run_example.sh SERVER EXAMPLE [--grpc] [server flags...]
# With --grpc the server also serves gRPC and the example gets the gRPC port.
set -u
server=$1
example=$2
shift 2
grpc=false
if [ "${1:-}" = "--grpc" ]; then
  grpc=true
  shift
fi
log=$(mktemp)
"$server" --http-address 127.0.0.1 --http-port 0 --metrics-port 0 --allow-grpc "$grpc" --grpc-port 0 "$@" \
  >"$log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -f "$log"' EXIT
service=HTTPService
if [ "$grpc" = true ]; then service=GRPCInferenceService; fi
port=
for _ in $(seq 500); do
  port=$(grep -oE "Started $service at [0-9.]+:[0-9]+" "$log" | grep -oE '[0-9]+$') && break
  sleep 0.02
done
if [ -z "$port" ]; then
  echo "inferwire-server did not start:" >&2
  cat "$log" >&2
  exit 1
fi
"$example" -u "127.0.0.1:$port"
