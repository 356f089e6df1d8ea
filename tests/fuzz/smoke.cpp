// SPDX-License-Identifier: Apache-2.0
// fuzz_smoke: every libFuzzer target of this folder in one program, for the test command's short
// runs (tests/fuzz/CMakeLists.txt, INFERWIRE_FUZZ_QUICK_BUILD). smoke_targets.hpp, generated,
// includes each target's file with its LLVMFuzzerTestOneInput renamed inferwire_fuzz_<name>;
// INFERWIRE_FUZZ_TARGET=<name> in the environment picks the one a run fuzzes.
#include "smoke_targets.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace {

using fuzz_entry = int (*)(const std::uint8_t*, std::size_t);

struct smoke_target {
  std::string_view name;
  fuzz_entry entry;
};

#define INFERWIRE_FUZZ_SMOKE_ENTRY(name) smoke_target{#name, &inferwire_fuzz_##name},
constexpr smoke_target smoke_targets[] = {INFERWIRE_FUZZ_TARGETS(INFERWIRE_FUZZ_SMOKE_ENTRY)};
#undef INFERWIRE_FUZZ_SMOKE_ENTRY

fuzz_entry chosen = nullptr;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* wanted = std::getenv("INFERWIRE_FUZZ_TARGET");
  for (const smoke_target& t : smoke_targets)
    if (wanted && t.name == wanted) chosen = t.entry;
  if (!chosen) {
    std::fprintf(stderr, "fuzz_smoke: INFERWIRE_FUZZ_TARGET=%s names no target; built:",
                 wanted ? wanted : "(unset)");
    for (const smoke_target& t : smoke_targets)
      std::fprintf(stderr, " %.*s", static_cast<int>(t.name.size()), t.name.data());
    std::fprintf(stderr, "\n");
    std::exit(2);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return chosen(data, size);
}
