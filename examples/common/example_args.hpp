// SPDX-License-Identifier: Apache-2.0
// Command-line options shared by the examples: `-u host:port` (as in Triton's examples) and
// `--help`. Parsed with Boost.Program_options.
#pragma once

#include <boost/program_options.hpp>

#include <cstdlib>
#include <iostream>
#include <string>

namespace example {

struct args {
  std::string host = "localhost";
  std::string port = "8000";
  std::string model;  ///< -m, for examples that take a model name
};

/// Parses the options; prints `usage` and exits for --help or a bad command line. With a
/// `default_model`, `-m NAME` picks the model. gRPC examples default to port 8001.
inline args parse(int argc, char** argv, const char* usage, const char* default_model = nullptr,
                  const char* default_url = "localhost:8000") {
  namespace po = boost::program_options;
  std::string url = default_url;
  po::options_description opts("options");
  opts.add_options()("help,h", "print this help")(
      "url,u", po::value(&url)->default_value(url), "server address, host:port");
  std::string model = default_model ? default_model : "";
  if (default_model)
    opts.add_options()("model,m", po::value(&model)->default_value(model), "model name");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, opts), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << e.what() << "\n" << usage << "\n" << opts;
    std::exit(2);
  }
  if (vm.count("help")) {
    std::cout << usage << "\n" << opts;
    std::exit(0);
  }
  args a;
  a.model = model;
  if (auto colon = url.rfind(':'); colon != std::string::npos) {
    a.host = url.substr(0, colon);
    a.port = url.substr(colon + 1);
  } else {
    a.host = url;
  }
  return a;
}

}  // namespace example
