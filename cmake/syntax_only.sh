#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# A compiler launcher (CMake's <LANG>_COMPILER_LAUNCHER) for targets that only check that their
# code compiles (bench/CMakeLists.txt): runs the compile command with -fsyntax-only, which
# parses and instantiates templates without generating code and still writes the dependency
# file, then leaves an empty file where the command names its object, so that the build tool
# sees the step done and reruns it only when a source or header changes.
#   syntax_only.sh <compiler> <arguments...>
out=
prev=
for arg in "$@"; do
  if [ "$prev" = "-o" ]; then
    out=$arg
  fi
  prev=$arg
done
"$@" -fsyntax-only || exit
if [ -n "$out" ]; then
  : > "$out"
fi
