// SPDX-License-Identifier: Apache-2.0
// The HTTP examples compile inferwire separately (docs/sdk.md, "Compile time and separate compilation"): the v2 codec's
// and the HTTP client's bodies are compiled here, once for every example, and the examples'
// own files see their declarations only (INFERWIRE_SEPARATE_COMPILATION, which
// examples/CMakeLists.txt defines for each of them). Header-only, each example compiled them
// again: about twice the compile time of an example's file.
#include <inferwire/src.hpp>
