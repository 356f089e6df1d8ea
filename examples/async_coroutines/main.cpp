// SPDX-License-Identifier: Apache-2.0
// Asynchronous inference with C++20 coroutines: co_await each call; errors either throw or,
// with as_tuple, come back as values.
//
//   example_async_coroutines [-u host:port]
#include "../common/example_args.hpp"

#include <inferwire/http/client.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <iostream>
#include <numeric>
#include <vector>

namespace net = boost::asio;
namespace http = inferwire::http;
namespace v2 = inferwire::v2;

net::awaitable<bool> run(http::client& client) {
  if (!co_await client.async_server_ready(net::use_awaitable)) co_return false;

  std::vector<std::int32_t> input0(16), input1(16, 2);
  std::iota(input0.begin(), input0.end(), 0);
  v2::infer_request request;
  request.inputs.push_back(v2::make_input("INPUT0", input0, {1, 16}));
  request.inputs.push_back(v2::make_input("INPUT1", input1, {1, 16}));

  // use_awaitable: failures are thrown as boost::system::system_error (http::server_error for
  // the server's error replies).
  http::infer_result result = co_await client.async_infer("simple", request, net::use_awaitable);
  auto sum = result.as<std::int32_t>("OUTPUT0");
  std::cout << "OUTPUT0:";
  for (std::int32_t x : sum) std::cout << " " << x;
  std::cout << "\n";

  // as_tuple: the error code is a value to inspect.
  auto [ec, missing] =
      co_await client.async_infer("no_such_model", request, net::as_tuple(net::use_awaitable));
  std::cout << "no_such_model: " << ec.message() << "\n";
  co_return sum[15] == 17 && http::server_status(ec) == 404;
}

int main(int argc, char** argv) {
  auto args = example::parse(argc, argv,
                             "usage: example_async_coroutines [-u host:port]\n"
                             "Awaits readiness and an inference on 'simple' inside a coroutine, "
                             "then shows an error reply returned as a value.");
  net::io_context ioc;
  http::client client(ioc.get_executor(), args.host, args.port);
  bool ok = false;
  net::co_spawn(ioc, run(client), [&](std::exception_ptr e, bool result) {
    if (e) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& x) {
        std::cerr << "error: " << x.what() << "\n";
      }
    }
    ok = !e && result;
  });
  ioc.run();
  std::cout << (ok ? "PASS" : "FAIL") << "\n";
  return ok ? 0 : 1;
}
