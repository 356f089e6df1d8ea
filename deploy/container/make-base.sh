#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Makes a Debian 12 base image from Debian's packages, for machines that reach a Debian mirror
# but no image registry: debootstrap --variant=minbase, trimmed, then imported.
#
#   deploy/container/make-base.sh [image name]      (default localhost/inferwire-base:bookworm)
#
# Environment: ENGINE (podman or docker; default: podman when present), MIRROR (default: the
# first Debian mirror in this machine's apt sources, else http://deb.debian.org/debian),
# CACHE (where the rootfs tarball is kept; default <repository>/.deps/container).
# Needs root (debootstrap). Prints the image name. Does nothing when the image exists.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
image=${1:-localhost/inferwire-base:bookworm}
engine=${ENGINE:-$(command -v podman >/dev/null && echo podman || echo docker)}
cache=${CACHE:-$root/.deps/container}
tarball=$cache/bookworm-minbase.tar

if "$engine" image inspect "$image" >/dev/null 2>&1; then
  echo "$image"
  exit 0
fi

if [ ! -s "$tarball" ]; then
  mirror=${MIRROR:-}
  if [ -z "$mirror" ]; then
    mirror=$(grep -rhoE '^(deb|URIs:)[^#]*https?://[^ ]*/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null |
               grep -oE 'https?://[^ ]*/debian/?' | head -n 1 || true)
    mirror=${mirror:-http://deb.debian.org/debian}
  fi
  security=${mirror%/debian*}/debian-security
  mkdir -p "$cache"
  rootfs=$(mktemp -d "$cache/rootfs.XXXXXX")
  trap 'rm -rf "$rootfs"' EXIT
  echo "make-base: debootstrap --variant=minbase bookworm from $mirror" >&2
  debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$cache/debootstrap.log" 2>&1 ||
    { tail -n 20 "$cache/debootstrap.log" >&2; exit 1; }
  cat >"$rootfs/etc/apt/sources.list" <<SOURCES
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb $security bookworm-security main
SOURCES
  # What an image does not need: downloaded packages, package lists, documentation, locales.
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
         "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/locale/* \
         "$rootfs"/usr/share/info/*
  # Keep them out for later installs too, as Debian's slim images do.
  cat >"$rootfs/etc/dpkg/dpkg.cfg.d/inferwire-slim" <<'SLIM'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/info/*
SLIM
  tar --numeric-owner -C "$rootfs" -cf "$tarball.tmp" .
  mv "$tarball.tmp" "$tarball"
fi
"$engine" import --change 'CMD ["/bin/bash"]' "$tarball" "$image" >/dev/null
echo "$image"
