// SPDX-License-Identifier: Apache-2.0
// Stateful sequences: two interleaved sequences on 'simple_sequence', one with a numeric and
// one with a string correlation ID. The model computes OUTPUT = (INPUT + START) x READY.
//
//   example_sequence_infer [-u host:port]
#include "../common/example_args.hpp"

#include <inferwire/http/client.hpp>

#include <iostream>
#include <string>
#include <vector>

namespace http = inferwire::http;
namespace v2 = inferwire::v2;

// One step of a sequence: the parameters mark its first and last request.
template <class Id>
std::int32_t step(http::client& client, Id sequence_id, std::int32_t value, bool start,
                  bool end) {
  v2::infer_request request;
  request.inputs.push_back(v2::make_input("INPUT", std::span(&value, 1), {1, 1}));
  request.parameters.set("sequence_id", sequence_id);
  if (start) request.parameters.set("sequence_start", true);
  if (end) request.parameters.set("sequence_end", true);
  return client.infer("simple_sequence", request).as<std::int32_t>("OUTPUT")[0];
}

int main(int argc, char** argv) {
  auto args = example::parse(argc, argv,
                             "usage: example_sequence_infer [-u host:port]\n"
                             "Runs sequence 1000 (uint64 ID) and sequence \"SEQ-3\" (string ID) "
                             "side by side on 'simple_sequence'.");
  try {
    http::client client(args.host, args.port);
    const std::vector<std::int32_t> values{0, 11, 7, 5, 3, 2, 0, 1};
    bool ok = true;
    for (std::size_t i = 0; i < values.size(); ++i) {
      bool start = i == 0, end = i + 1 == values.size();
      std::int32_t a = step(client, std::uint64_t{1000}, values[i], start, end);
      std::int32_t b = step(client, std::string("SEQ-3"), -values[i], start, end);
      std::cout << "step " << i << ": sequence 1000 -> " << a << ", sequence SEQ-3 -> " << b
                << "\n";
      ok = ok && a == values[i] + (start ? 1 : 0) && b == -values[i] + (start ? 1 : 0);
    }
    std::cout << (ok ? "PASS" : "FAIL") << "\n";
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
