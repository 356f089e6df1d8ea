// SPDX-License-Identifier: Apache-2.0
// Model repository control (the server runs with --model-control-mode=explicit): list the
// repository, load a model, load it again with a configuration override, unload it.
//
//   example_model_control [-u host:port]
#include "../common/example_args.hpp"

#include <inferwire/http/client.hpp>

#include <iostream>

namespace http = inferwire::http;
namespace v2 = inferwire::v2;

void print_index(http::client& client) {
  for (const auto& e : client.repository_index())
    std::cout << "  " << e.name << (e.version.empty() ? "" : " v" + e.version) << " "
              << (e.state.empty() ? "(not loaded)" : e.state)
              << (e.reason.empty() ? "" : " (" + e.reason + ")") << "\n";
}

int main(int argc, char** argv) {
  auto args = example::parse(argc, argv,
                             "usage: example_model_control [-u host:port]\n"
                             "Needs a server in explicit model-control mode. Loads 'simple', "
                             "reloads it with max_batch_size 4, and unloads it.");
  try {
    http::client client(args.host, args.port);
    std::cout << "repository:\n";
    print_index(client);

    client.load_model("simple");
    std::cout << "loaded simple, ready: " << client.model_ready("simple") << "\n";

    // A configuration override replaces config.pbtxt for this load.
    v2::repository_load_request reload;
    reload.config = R"({"name":"simple","backend":"simple","max_batch_size":4,
      "input":[{"name":"INPUT0","data_type":"TYPE_INT32","dims":[16]},
               {"name":"INPUT1","data_type":"TYPE_INT32","dims":[16]}],
      "output":[{"name":"OUTPUT0","data_type":"TYPE_INT32","dims":[16]},
                {"name":"OUTPUT1","data_type":"TYPE_INT32","dims":[16]}]})";
    client.load_model("simple", reload);
    auto max_batch = client.model_config("simple").at("max_batch_size").to_number<int>();
    std::cout << "reloaded simple, max_batch_size " << max_batch << "\n";

    client.unload_model("simple");
    bool ready_after = client.model_ready("simple");
    std::cout << "unloaded simple, ready: " << ready_after << "\nrepository:\n";
    print_index(client);

    // A load that fails reports the server's reason.
    http::error_code ec;
    client.load_model("no_such_model", ec);
    std::cout << "loading no_such_model: " << ec.message() << "\n";
    bool ok = max_batch == 4 && !ready_after && http::server_status(ec) != 0;
    std::cout << (ok ? "PASS" : "FAIL") << "\n";
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
