// SPDX-License-Identifier: Apache-2.0
// Catch2's implementation, without main() (tests/CMakeLists.txt: inferwire_catch).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "catch_run.hpp"

int inferwire::test::run_catch(int argc, char** argv) { return Catch::Session().run(argc, argv); }
