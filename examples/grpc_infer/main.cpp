// SPDX-License-Identifier: Apache-2.0
// Inference over gRPC on the 'simple' model: blocking, then asynchronous, with the same v2
// value types as the HTTP client.
//
//   example_grpc_infer [-u host:port]      (the server's gRPC port, 8001 by default)
#include "../common/example_args.hpp"

#include <inferwire/grpc/client.hpp>

#include <future>
#include <iostream>
#include <numeric>
#include <vector>

int main(int argc, char** argv) {
  auto args = example::parse(argc, argv,
                             "usage: example_grpc_infer [-u host:port]\n"
                             "Sends 'simple' two INT32 [1,16] tensors over gRPC, blocking and then "
                             "asynchronously, and checks the sum and difference.",
                             nullptr, "localhost:8001");
  namespace ig = inferwire::grpc;
  namespace v2 = inferwire::v2;
  try {
    ig::channel_options options;
    options.target = args.host + ":" + args.port;
    ig::client client(options);
    std::cout << "server: " << client.server_metadata().name << ", live " << client.server_live() << "\n";

    std::vector<std::int32_t> input0(16), input1(16, 1);
    std::iota(input0.begin(), input0.end(), 0);
    v2::infer_request request;
    request.id = "grpc-example";
    request.inputs.push_back(v2::make_input("INPUT0", input0, {1, 16}));
    request.inputs.push_back(v2::make_input("INPUT1", input1, {1, 16}));

    // Blocking; a deadline of one second.
    ig::call_options call;
    call.timeout = std::chrono::seconds(1);
    ig::infer_result result = client.infer("simple", request, {}, call);
    auto sum = result.response.output("OUTPUT0")->as<std::int32_t>();
    auto difference = result.response.output("OUTPUT1")->as<std::int32_t>();
    bool ok = result.response.id == "grpc-example";
    for (std::size_t i = 0; i < 16; ++i) {
      std::cout << input0[i] << " + " << input1[i] << " = " << sum[i] << ", " << input0[i] << " - "
                << input1[i] << " = " << difference[i] << "\n";
      ok = ok && sum[i] == input0[i] + input1[i] && difference[i] == input0[i] - input1[i];
    }

    // Asynchronous: the callback runs on a gRPC thread.
    std::promise<bool> done;
    client.async_infer("simple", request, [&](std::error_code ec, ig::infer_result r) {
      done.set_value(!ec && r.response.output("OUTPUT0")->as<std::int32_t>()[15] == 16);
    });
    ok = ok && done.get_future().get();

    // Errors carry the gRPC status and the server's text.
    std::error_code ec;
    client.infer("no_such_model", request, ec);
    std::cout << "unknown model: status " << ig::status_code(ec) << ", \"" << ec.message() << "\"\n";
    ok = ok && ig::status_code(ec) == 5;  // NOT_FOUND

    std::cout << (ok ? "PASS" : "FAIL") << "\n";
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
