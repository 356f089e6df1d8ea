// SPDX-License-Identifier: Apache-2.0
#ifndef INFERWIRE_TOOLS_PERF_RUN_HPP
#define INFERWIRE_TOOLS_PERF_RUN_HPP

#include "options.hpp"

#include <string>
#include <utility>

namespace inferwire::perf {

/// Measures every load level of `o` and prints the report; the exit code.
int run(const options& o);

/// The same through each protocol's client (run_http.cpp, run_grpc.cpp).
int run_http(const options& o);
int run_grpc(const options& o);

/// The host and the port of -u (checked by parse_options).
std::pair<std::string, std::string> split_url(const std::string& url);

}  // namespace inferwire::perf

#endif
