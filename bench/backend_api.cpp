// SPDX-License-Identifier: Apache-2.0
// bench_backend_api: what serving a model through Triton's backend API costs. The same binary
// identity request (INT32 [16]) goes to one server, alternately to a model of the built-in
// identity backend and to one of the TRITONBACKEND test backend (tests/backends, loaded as a
// library with its requests handed over as TRITONBACKEND_Request lists). The figure is the
// server's CPU time per request; the ratio (library / built-in) is taken per round, three
// rounds, and its median printed. Target: at most 1.15x.
#include "bench_process.hpp"
#include "http_load.hpp"

#include <cstdio>
#include <cstring>

// Every benchmark's code is one translation unit (CMakeLists.txt): its names stay in its own
// namespace, and bench_backend_api's main() calls run().
namespace bench_backend_api {

using namespace bench;

namespace {

std::string identity_request(const std::string& model) {
  // The binary tensor extension: a JSON header, then the 64 bytes of INPUT0.
  const std::string header =
      R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[16],"parameters":{"binary_data_size":64}}],)"
      R"("outputs":[{"name":"OUTPUT0","parameters":{"binary_data":true}}]})";
  std::string body = header;
  for (std::int32_t i = 0; i < 16; ++i) body.append(reinterpret_cast<const char*>(&i), 4);
  return http_request("POST", "/v2/models/" + model + "/infer", body,
                      "Inference-Header-Content-Length: " + std::to_string(header.size()) + "\r\n");
}

}  // namespace

int run(int argc, char** argv) {
  std::size_t requests = 20000;
  int rounds = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--requests") requests = std::stoul(argv[i + 1]);
    else if (a == "--rounds") rounds = std::max(1, std::stoi(argv[i + 1]));
  }
  signal(SIGPIPE, SIG_IGN);
  auto tmp = std::filesystem::temp_directory_path() / ("iw-bench-backend-" + std::to_string(getpid()));
  std::filesystem::create_directories(tmp);
  const std::string log = (tmp / "server.log").string();
  pid_t pid = -1;
  const int port = start_reference_server(
      INFERWIRE_SERVER_PATH, log, pid,
      {"--model-repository", std::string(INFERWIRE_SOURCE_DIR) + "/bench/models/backend_api", "--backend-directory",
       INFERWIRE_TEST_BACKEND_DIR});
  if (!port) {
    std::fprintf(stderr, "inferwire-server did not start:\n%s\n", read_file(log).c_str());
    return 1;
  }
  const std::string builtin = identity_request("builtin_identity"), library = identity_request("library_identity");
  std::printf("bench_backend_api: %zu requests per measurement, %d rounds, loopback, %u cores\n", requests, rounds,
              std::thread::hardware_concurrency());
  int status = 0;
  for (int conc : {1, 16}) {
    std::vector<double> b_us, l_us, ratio;
    for (int r = 0; r < rounds; ++r) {
      auto measure = [&](const std::string& req, std::vector<double>& out) {
        load_generator(port, req, conc, requests / 10).run();  // warm-up
        const double c0 = cpu_seconds(pid, false);
        const load_result res = load_generator(port, req, conc, requests).run();
        out.push_back((cpu_seconds(pid, false) - c0) * 1e6 / static_cast<double>(requests));
        if (res.errors) {
          std::fprintf(stderr, "%zu requests failed\n", res.errors);
          status = 1;
        }
      };
      measure(builtin, b_us);
      measure(library, l_us);
      ratio.push_back(l_us.back() / b_us.back());
    }
    std::printf("  concurrency %2d: built-in identity %.1f us CPU/request, TRITONBACKEND identity %.1f us; "
                "ratio %.2fx (target <= 1.15), rounds:",
                conc, median(b_us), median(l_us), median(ratio));
    for (double x : ratio) std::printf(" %.2fx", x);
    std::printf("\n");
  }
  stop(pid);
  std::filesystem::remove_all(tmp);
  return status;
}

}  // namespace bench_backend_api
