// SPDX-License-Identifier: Apache-2.0
// Blocking inference on the 'simple' model: two INT32 [1,16] inputs, their sum and difference.
//
//   example_infer_sync [-u host:port]
#include "../common/example_args.hpp"

#include <inferwire/http/client.hpp>

#include <iostream>
#include <numeric>
#include <vector>

int main(int argc, char** argv) {
  auto args = example::parse(argc, argv,
                             "usage: example_infer_sync [-u host:port]\n"
                             "Sends one request to 'simple' with binary tensors and checks "
                             "OUTPUT0 = INPUT0 + INPUT1 and OUTPUT1 = INPUT0 - INPUT1.");
  namespace http = inferwire::http;
  namespace v2 = inferwire::v2;
  try {
    http::client client(args.host, args.port);

    std::vector<std::int32_t> input0(16), input1(16, 1);
    std::iota(input0.begin(), input0.end(), 0);

    v2::infer_request request;
    request.id = "example-1";
    // Views of the vectors: the client writes them to the socket from where they are.
    request.inputs.push_back(v2::make_input("INPUT0", input0, {1, 16}));
    request.inputs.push_back(v2::make_input("INPUT1", input1, {1, 16}));
    // No outputs listed: all of them come back, as binary data.

    http::infer_result result = client.infer("simple", request);

    // Typed views into the reply body; nothing is copied.
    auto sum = result.as<std::int32_t>("OUTPUT0");
    auto difference = result.as<std::int32_t>("OUTPUT1");
    bool ok = result.id() == "example-1";
    for (std::size_t i = 0; i < 16; ++i) {
      std::cout << input0[i] << " + " << input1[i] << " = " << sum[i] << ", " << input0[i]
                << " - " << input1[i] << " = " << difference[i] << "\n";
      ok = ok && sum[i] == input0[i] + input1[i] && difference[i] == input0[i] - input1[i];
    }
    std::cout << (ok ? "PASS" : "FAIL") << "\n";
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
