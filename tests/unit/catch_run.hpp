// SPDX-License-Identifier: Apache-2.0
// Runs Catch2's session: its implementation is compiled once (catch_impl.cpp, in the
// inferwire_catch library), and Catch::Session is declared only where it is.
#ifndef INFERWIRE_TESTS_CATCH_RUN_HPP
#define INFERWIRE_TESTS_CATCH_RUN_HPP

namespace inferwire::test {

/// Catch::Session().run(argc, argv): the test cases linked into the program, as the command
/// line selects them.
int run_catch(int argc, char** argv);

}  // namespace inferwire::test

#endif
