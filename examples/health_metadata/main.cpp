// SPDX-License-Identifier: Apache-2.0
// Is the server up, what does it offer, and what does a model look like?
//
//   example_health_metadata [-u host:port]
#include "../common/example_args.hpp"

#include <inferwire/http/client.hpp>

#include <boost/json/serialize.hpp>

#include <iostream>

int main(int argc, char** argv) {
  auto args = example::parse(argc, argv,
                             "usage: example_health_metadata [-u host:port]\n"
                             "Checks liveness and readiness, then prints the server's metadata "
                             "and the metadata and configuration of the model 'simple'.");
  namespace http = inferwire::http;
  try {
    // A blocking client: it runs its own io_context on this thread during each call.
    http::client client(args.host, args.port);

    std::cout << "live: " << client.server_live() << ", ready: " << client.server_ready()
              << ", simple ready: " << client.model_ready("simple") << "\n";

    auto server = client.server_metadata();
    std::cout << server.name << " " << server.version << ", extensions:";
    for (const auto& e : server.extensions) std::cout << " " << e;
    std::cout << "\n";

    auto model = client.model_metadata("simple");
    for (const auto& in : model.inputs)
      std::cout << "input  " << in.name << " " << inferwire::wire_name(in.datatype) << " "
                << inferwire::to_string(in.shape) << "\n";
    for (const auto& out : model.outputs)
      std::cout << "output " << out.name << " " << inferwire::wire_name(out.datatype) << " "
                << inferwire::to_string(out.shape) << "\n";
    std::cout << "config: " << boost::json::serialize(client.model_config("simple")) << "\n";

    // Errors from the server are error_codes that carry the server's message and status.
    http::error_code ec;
    client.model_metadata("no_such_model", ec);
    std::cout << "unknown model: HTTP " << http::server_status(ec) << ": " << ec.message() << "\n";
    return server.name == "triton" && http::server_status(ec) == 404 ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
