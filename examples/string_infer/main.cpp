// SPDX-License-Identifier: Apache-2.0
// BYTES (string) tensors: the 'simple_string' model adds and subtracts numbers given as text.
//
//   example_string_infer [-u host:port]
#include "../common/example_args.hpp"

#include <inferwire/http/client.hpp>

#include <iostream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  auto args = example::parse(argc, argv,
                             "usage: example_string_infer [-u host:port]\n"
                             "Sends two BYTES [1,16] tensors of decimal strings to "
                             "'simple_string' and checks the string results.");
  namespace http = inferwire::http;
  namespace v2 = inferwire::v2;
  try {
    http::client client(args.host, args.port);

    std::vector<std::string> numbers, ones(16, "1");
    for (int i = 0; i < 16; ++i) numbers.push_back(std::to_string(i));

    v2::infer_request request;
    // BYTES inputs are serialised (length-prefixed) once, into storage the input owns; the
    // second one travels as JSON strings instead of binary, to show both forms.
    request.inputs.push_back(v2::make_bytes_input("INPUT0", numbers, {1, 16}));
    request.inputs.push_back(
        v2::make_bytes_input("INPUT1", ones, {1, 16}, v2::tensor_encoding::json));

    auto result = client.infer("simple_string", request);
    auto sums = result.strings("OUTPUT0");          // std::string_views into the reply
    auto differences = result.strings("OUTPUT1");
    bool ok = sums.size() == 16 && differences.size() == 16;
    for (std::size_t i = 0; ok && i < 16; ++i) {
      std::cout << numbers[i] << " + 1 = " << sums[i] << ", " << numbers[i] << " - 1 = "
                << differences[i] << "\n";
      ok = sums[i] == std::to_string(i + 1) && differences[i] == std::to_string(int(i) - 1);
    }
    std::cout << (ok ? "PASS" : "FAIL") << "\n";
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
