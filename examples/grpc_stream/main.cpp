// SPDX-License-Identifier: Apache-2.0
// Streaming over gRPC: two interleaved sequences on 'simple_sequence' through one
// ModelStreamInfer stream; responses arrive in order with their request ids.
//
//   example_grpc_stream [-u host:port]      (the server's gRPC port, 8001 by default)
#include "../common/example_args.hpp"

#include <inferwire/grpc/client.hpp>

#include <iostream>
#include <map>
#include <mutex>
#include <vector>

int main(int argc, char** argv) {
  auto args = example::parse(argc, argv,
                             "usage: example_grpc_stream [-u host:port]\n"
                             "Streams two interleaved sequences to 'simple_sequence' and checks "
                             "each response: OUTPUT = INPUT (+1 on the first request).",
                             nullptr, "localhost:8001");
  namespace ig = inferwire::grpc;
  namespace v2 = inferwire::v2;
  try {
    ig::channel_options options;
    options.target = args.host + ":" + args.port;
    ig::client client(options);

    std::mutex mu;
    std::map<std::string, std::int32_t> outputs;  // request id -> OUTPUT
    int errors = 0;
    // The handler sees every response and every error, in order.
    auto stream = client.start_stream([&](std::error_code ec, ig::infer_result r) {
      std::lock_guard lock(mu);
      if (ec) {
        std::cerr << "stream error: " << ec.message() << "\n";
        ++errors;
        return;
      }
      outputs[r.response.id] = r.response.output("OUTPUT")->as<std::int32_t>()[0];
    });

    const std::vector<std::int32_t> values{0, 11, 7, 5, 3, 2, 0, 1};
    std::vector<std::vector<std::int32_t>> storage;  // the inputs live until the stream ends
    storage.reserve(2 * values.size());
    for (std::size_t i = 0; i < values.size(); ++i)
      for (std::uint64_t sequence : {1000u, 1001u}) {
        storage.push_back({values[i] * (sequence == 1000 ? 1 : -1)});
        v2::infer_request q;
        q.id = std::to_string(sequence) + "_" + std::to_string(i);
        q.parameters.set("sequence_id", sequence);
        q.parameters.set("sequence_start", i == 0);
        q.parameters.set("sequence_end", i + 1 == values.size());
        q.inputs.push_back(v2::make_input("INPUT", storage.back(), {1, 1}));
        stream->send("simple_sequence", q);
      }
    const std::error_code final_status = stream->finish();

    bool ok = !final_status && errors == 0 && outputs.size() == 2 * values.size();
    for (std::size_t i = 0; i < values.size(); ++i)
      for (std::uint64_t sequence : {1000u, 1001u}) {
        const std::string id = std::to_string(sequence) + "_" + std::to_string(i);
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
