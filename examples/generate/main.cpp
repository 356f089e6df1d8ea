// SPDX-License-Identifier: Apache-2.0
// Triton's generate extension: one flat JSON object in, one out (/generate), or one object per
// response of a decoupled model (/generate_stream, Server-Sent Events).
//
//   example_generate [-u host:port]
#include "../common/example_args.hpp"

#include <inferwire/http/client.hpp>

#include <boost/json/serialize.hpp>

#include <iostream>

int main(int argc, char** argv) {
  auto args = example::parse(argc, argv,
                             "usage: example_generate [-u host:port]\n"
                             "Sends a generate request to 'simple' and a generate_stream request to "
                             "'repeat_int32' (reference_server/models_decoupled) and checks the replies.");
  namespace http = inferwire::http;
  namespace json = boost::json;
  try {
    http::client client(args.host, args.port);

    // Keys that name the model's inputs are tensors (shaped to the inputs' dims); other keys
    // would be request parameters, and `id` is the request id.
    json::array input0, input1;
    for (int i = 0; i < 16; ++i) {
      input0.push_back(i);
      input1.push_back(1);
    }
    const json::object reply = client.generate("simple", {{"id", "g-1"}, {"INPUT0", input0}, {"INPUT1", input1}});
    std::cout << "generate: " << json::serialize(reply) << "\n";
    bool ok = reply.at("id") == "g-1" && reply.at("OUTPUT0").as_array().at(15).to_number<int>() == 16;

    // A decoupled model answers IN's elements one response at a time, here 200 ms apart: each
    // event is handed over as it arrives. (Without the callback, generate_stream returns them
    // all once the stream has ended.)
    int events = 0;
    client.generate_stream("repeat_int32",
                           {{"IN", json::array{10, 20, 30}}, {"DELAY", json::array{0, 200, 200}}, {"WAIT", 0}},
                           [&](json::object&& e) {
                             std::cout << "event: " << json::serialize(e) << "\n" << std::flush;
                             ++events;
                             // After the first event, a failure would arrive as {"error": ...}.
                             ok = ok && !e.contains("error") && e.at("OUT").to_number<int>() == 10 * events;
                           });
    ok = ok && events == 3;

    std::cout << (ok ? "PASS" : "FAIL") << "\n";
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
