#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs inferwire's build and test dependencies on Debian 12 (bookworm).
# Idempotent: when everything is present it only checks and returns in about a second.
#
#   scripts/bootstrap.sh              install what is missing to build and test
#   scripts/bootstrap.sh --build-only what building the library and the servers needs, nothing
#                                     for the tests (the container image's build stage)
#
# The tests' tools include podman, runc and debootstrap: the container test builds the runtime
# image on a Debian base made locally (deploy/container/make-base.sh).
#
# msgpack-cxx is header-only, but Debian's package depends on Boost 1.74's libboost-dev, which
# conflicts with the Boost 1.81 we need. We therefore download the .deb and unpack its headers
# into a project-local, git-ignored prefix (.deps/msgpack) that CMake finds through
# CMAKE_PREFIX_PATH. Nothing is forced into dpkg's database.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
deps="$root/.deps"

build_only=0
case "${1:-}" in
  --build-only) build_only=1 ;;
  "") ;;
  *) echo "usage: $0 [--build-only]" >&2; exit 2 ;;
esac

packages=(
  g++ cmake ninja-build ccache pkg-config git ca-certificates
  libboost1.81-dev libboost-json1.81-dev libboost-url1.81-dev libboost-program-options1.81-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  libssl-dev zlib1g-dev
)
if [ "$build_only" -eq 0 ]; then
  packages+=(
    catch2 nginx-light
    clang libclang-rt-14-dev
    python3 python3-grpcio python3-protobuf python3-msgpack python3-prometheus-client
    python3-yaml podman runc uidmap debootstrap
  )
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
apt_get() { $sudo env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 "$@"; }

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -gt 0 ]; then
  echo "bootstrap: installing ${missing[*]}"
  apt_get update -qq
  apt_get install -y -qq --no-install-recommends "${missing[@]}"
fi

# msgpack-cxx headers into a private prefix.
if [ ! -f "$deps/msgpack/usr/include/msgpack.hpp" ]; then
  echo "bootstrap: unpacking msgpack-cxx headers into $deps/msgpack"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && apt-get download libmsgpack-cxx-dev >/dev/null 2>&1 ||
     { apt_get update -qq && apt-get download libmsgpack-cxx-dev; })
  mkdir -p "$deps/msgpack"
  dpkg-deb -x "$tmp"/libmsgpack-cxx-dev_*.deb "$deps/msgpack"
fi

echo "bootstrap: dependencies are present"
