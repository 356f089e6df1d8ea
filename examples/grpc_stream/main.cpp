// SPDX-License-Identifier: Apache-2.0
// Streaming over gRPC with coroutines: two interleaved sequences on 'simple_sequence' through
// one ModelStreamInfer stream. One coroutine writes the requests while another reads the
// responses, which arrive in order with their request ids; both run on the program's
// io_context.
//
//   example_grpc_stream [-u host:port]      (the server's gRPC port, 8001 by default)
#include "../common/example_args.hpp"

#include <inferwire/grpc/client.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <iostream>
#include <map>
#include <vector>

namespace ig = inferwire::grpc;
namespace v2 = inferwire::v2;
namespace net = boost::asio;

const std::vector<std::int32_t> values{0, 11, 7, 5, 3, 2, 0, 1};

std::string request_id(std::uint64_t sequence, std::size_t i) {
  return std::to_string(sequence) + "_" + std::to_string(i);
}

// Sends both sequences, interleaved, then half-closes the stream.
net::awaitable<void> send_all(ig::stream& stream) {
  const std::string model = "simple_sequence";
  for (std::size_t i = 0; i < values.size(); ++i)
    for (std::uint64_t sequence : {1000u, 1001u}) {
      const std::int32_t input = values[i] * (sequence == 1000 ? 1 : -1);
      v2::infer_request q;
      q.id = request_id(sequence, i);
      q.parameters.set("sequence_id", sequence);
      q.parameters.set("sequence_start", i == 0);
      q.parameters.set("sequence_end", i + 1 == values.size());
      q.inputs.push_back(v2::make_input("INPUT", std::span<const std::int32_t>(&input, 1), {1, 1}));
      // The request is encoded when the write starts; `input` may go away afterwards.
      co_await stream.async_write(model, q, net::use_awaitable);
    }
  co_await stream.async_writes_done(net::use_awaitable);
}

// Reads every response until the stream ends, then its final status.
net::awaitable<void> receive_all(ig::stream& stream, std::map<std::string, std::int32_t>& outputs,
                                 int& errors, ig::error_code& final_status) {
  for (;;) {
    auto [ec, r] = co_await stream.async_read(net::as_tuple(net::use_awaitable));
    if (ec == net::error::eof) break;  // the server has answered everything
    if (ec) {
      std::cerr << "stream error: " << ec.message() << "\n";
      ++errors;
      if (ig::status_code(ec) != 2) break;  // UNKNOWN: an in-stream error, the stream goes on
      continue;
    }
    outputs[r.id()] = r.as<std::int32_t>("OUTPUT")[0];
  }
  auto [ec] = co_await stream.async_finish(net::as_tuple(net::use_awaitable));
  final_status = ec;
}

int main(int argc, char** argv) {
  auto args = example::parse(argc, argv,
                             "usage: example_grpc_stream [-u host:port]\n"
                             "Streams two interleaved sequences to 'simple_sequence' and checks "
                             "each response: OUTPUT = INPUT (+1 on the first request).",
                             nullptr, "localhost:8001");
  try {
    net::io_context ioc;
    ig::client client(ioc.get_executor(), args.host + ":" + args.port);
    auto stream = client.open_stream();

    std::map<std::string, std::int32_t> outputs;  // request id -> OUTPUT
    int errors = 0;
    ig::error_code final_status;
    net::co_spawn(ioc, send_all(stream), net::detached);
    net::co_spawn(ioc, receive_all(stream, outputs, errors, final_status), net::detached);
    ioc.run();

    bool ok = !final_status && errors == 0 && outputs.size() == 2 * values.size();
    for (std::size_t i = 0; i < values.size(); ++i)
      for (std::uint64_t sequence : {1000u, 1001u}) {
        const std::string id = request_id(sequence, i);
        const std::int32_t expected = values[i] * (sequence == 1000 ? 1 : -1) + (i == 0 ? 1 : 0);
        std::cout << id << ": " << outputs[id] << "\n";
        ok = ok && outputs[id] == expected;
      }
    std::cout << (ok ? "PASS" : "FAIL") << "\n";
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
