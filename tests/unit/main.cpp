// SPDX-License-Identifier: Apache-2.0
// The main() of every test program that has none of its own (tests/CMakeLists.txt:
// inferwire_catch).
#include "catch_run.hpp"

int main(int argc, char** argv) { return inferwire::test::run_catch(argc, argv); }
