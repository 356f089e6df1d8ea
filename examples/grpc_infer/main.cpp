// SPDX-License-Identifier: Apache-2.0
// Inference over gRPC on the 'simple' model: blocking, then asynchronous with a callback on the
// program's io_context and with a future, with the same v2 value types and calls as the HTTP
// client.
//
//   example_grpc_infer [-u host:port]      (the server's gRPC port, 8001 by default)
#include "../common/example_args.hpp"

#include <inferwire/grpc/client.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

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
    namespace net = boost::asio;
    net::io_context ioc;  // runs the asynchronous calls' handlers
    ig::client client(ioc.get_executor(), args.host + ":" + args.port);
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
    ig::infer_result result = client.infer("simple", request, call);
    auto sum = result.as<std::int32_t>("OUTPUT0");
    auto difference = result.as<std::int32_t>("OUTPUT1");
    bool ok = result.id() == "grpc-example";
    for (std::size_t i = 0; i < 16; ++i) {
      std::cout << input0[i] << " + " << input1[i] << " = " << sum[i] << ", " << input0[i] << " - "
                << input1[i] << " = " << difference[i] << "\n";
      ok = ok && sum[i] == input0[i] + input1[i] && difference[i] == input0[i] - input1[i];
    }

    // Asynchronous with a callback: it runs on `ioc` (the request is encoded when the call
    // starts, so `request` could go away at once).
    bool async_ok = false;
    client.async_infer("simple", request, [&](ig::error_code ec, ig::infer_result r) {
      async_ok = !ec && r.as<std::int32_t>("OUTPUT0")[15] == 16;
    });
    ioc.run();
    ok = ok && async_ok;
    // With a future: any Asio completion token works (use_awaitable, deferred, ...).
    auto ready = client.async_model_ready("simple", net::use_future);
    ok = ok && ready.get();

    // Errors carry the gRPC status and the server's text.
    ig::error_code ec;
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
