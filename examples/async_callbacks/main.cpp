// SPDX-License-Identifier: Apache-2.0
// Asynchronous inference with completion callbacks: many requests in flight over a pool of
// keep-alive connections, on an io_context the program owns and runs.
//
//   example_async_callbacks [-u host:port]
#include "../common/example_args.hpp"

#include <inferwire/http/client.hpp>

#include <boost/asio/io_context.hpp>

#include <iostream>
#include <numeric>
#include <vector>

int main(int argc, char** argv) {
  auto args = example::parse(argc, argv,
                             "usage: example_async_callbacks [-u host:port]\n"
                             "Sends 32 concurrent requests to 'simple' over 4 connections and "
                             "checks every reply in its callback.");
  namespace net = boost::asio;
  namespace http = inferwire::http;
  namespace v2 = inferwire::v2;

  net::io_context ioc;
  http::client_options options;
  options.max_connections = 4;                    // up to 4 requests on the wire at once
  options.timeout = std::chrono::seconds(10);     // a deadline for every call
  http::client client(ioc.get_executor(), args.host, args.port, options);

  // Each request's tensors must stay valid until its callback runs.
  constexpr int count = 32;
  std::vector<std::vector<std::int32_t>> inputs(count, std::vector<std::int32_t>(16));
  std::vector<std::int32_t> ones(16, 1);
  int passed = 0, failed = 0;
  for (int i = 0; i < count; ++i) {
    std::iota(inputs[i].begin(), inputs[i].end(), i);
    v2::infer_request request;
    request.id = std::to_string(i);
    request.inputs.push_back(v2::make_input("INPUT0", inputs[i], {1, 16}));
    request.inputs.push_back(v2::make_input("INPUT1", ones, {1, 16}));
    client.async_infer("simple", request, [&, i](http::error_code ec, http::infer_result r) {
      if (ec) {
        std::cerr << "request " << i << ": " << ec.message() << "\n";
        ++failed;
        return;
      }
      bool ok = r.id() == std::to_string(i) && r.as<std::int32_t>("OUTPUT0")[0] == i + 1;
      ok ? ++passed : ++failed;
    });
  }
  ioc.run();  // returns when every callback has run
  std::cout << passed << " passed, " << failed << " failed\n";
  return failed == 0 && passed == count ? 0 : 1;
}
