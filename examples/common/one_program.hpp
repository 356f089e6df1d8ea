// SPDX-License-Identifier: Apache-2.0
// The end of a program made of several examples (examples/CMakeLists.txt, with the default
// INFERWIRE_UNITY_BUILD): each example's main() was renamed example_<name>_main, and
// INFERWIRE_EXAMPLES lists them as X(<name>). The build links example_<name> to the program, so
// each example still runs by its own name; this main() picks the example by that name.
#pragma once

#include <cstdio>
#include <string_view>

int main(int argc, char** argv) {
  std::string_view self = argc > 0 ? argv[0] : "";
  if (auto slash = self.rfind('/'); slash != std::string_view::npos) self.remove_prefix(slash + 1);
#define X(name) \
  if (self == "example_" #name) return example_##name##_main(argc, argv);
  INFERWIRE_EXAMPLES
#undef X
  std::fprintf(stderr, "run this program by the name of one of its examples:\n");
#define X(name) std::fprintf(stderr, "  example_" #name "\n");
  INFERWIRE_EXAMPLES
#undef X
  return 2;
}
