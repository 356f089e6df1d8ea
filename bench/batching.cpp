// SPDX-License-Identifier: Apache-2.0
// bench_batching: the dynamic batcher against the same model without it, in one run.
//
// Two identity models with a fixed 2 ms per execution, one instance each, max_batch_size 64:
// `batching_on` (dynamic_batching, max_queue_delay_microseconds 100) and `batching_off` (no
// dynamic batching: one request per execution). The same HTTP load (one [1,16] INT32 row per
// request, keep-alive connections) at concurrency 1, 8 and 64: requests/s and p50 latency.
// Targets: at concurrency 64 >= 20x the unbatched rate; at concurrency 1 the batcher adds
// <= 100 µs + 50 µs to p50.
//
// Second part: the batcher against the ideal. `batching_wave1` and `batching_wave2` (5 ms per
// execution, max_batch_size 64, 100 µs of delay; one and two instances) at concurrency 1, 8, 64
// and 128: the rate divided by the ideal one, where every waiting request joins the next
// execution (concurrency / 5 ms, at most 64 rows per execution and instance). Target >= 0.9.
//
//   bench_batching [--seconds S] [--server PATH]
#include "bench_process.hpp"
#include "http_load.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>

// Every benchmark's code is one translation unit (CMakeLists.txt): its names stay in its own
// namespace, and bench_batching's main() calls run().
namespace bench_batching {

using namespace bench;

namespace {

std::string infer_text(const std::string& model) {
  std::string body = R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,16],"data":[)";
  for (int i = 0; i < 16; ++i) body += (i ? "," : "") + std::to_string(i);
  body += "]}]}";
  return http_request("POST", "/v2/models/" + model + "/infer", body, "Content-Type: application/json\r\n");
}

// About `seconds` of load at `concurrency`: a short probe sizes the measured run.
load_result measure(int port, const std::string& request, int concurrency, double seconds) {
  const auto probe = load_generator(port, request, concurrency, static_cast<std::size_t>(concurrency) * 20).run();
  const auto total = static_cast<std::size_t>(std::max(200.0, probe.rate * seconds));
  return load_generator(port, request, concurrency, total).run();
}

}  // namespace

int run(int argc, char** argv) {
  std::string server = INFERWIRE_SERVER_PATH;
  double seconds = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string_view a = argv[i];
    if (a == "--seconds") seconds = std::atof(argv[i + 1]);
    else if (a == "--server") server = argv[i + 1];
  }
  const std::string log = "/tmp/bench_batching_" + std::to_string(::getpid()) + ".log";
  pid_t pid = -1;
  const int port = start_reference_server(
      server, log, pid, {"--model-repository", std::string(INFERWIRE_SOURCE_DIR) + "/bench/models/batching"});
  if (!port || !wait_for_port(port)) {
    std::fprintf(stderr, "the server did not start (log: %s)\n", log.c_str());
    stop(pid);
    return 1;
  }
  const std::string on = infer_text("batching_on"), off = infer_text("batching_off");
  std::printf("identity, 2 ms per execution, max_batch_size 64, HTTP JSON [1,16] INT32\n");
  std::printf("%-6s %14s %14s %8s %12s %12s\n", "conc", "batched req/s", "unbatched", "ratio", "p50 batched", "p50 unbatched");
  bool ok = true;
  for (int c : {1, 8, 64}) {
    const auto b = measure(port, on, c, seconds);
    const auto u = measure(port, off, c, seconds);
    const double ratio = b.rate / u.rate;
    std::printf("%-6d %14.0f %14.0f %7.2fx %10.0f us %10.0f us%s\n", c, b.rate, u.rate, ratio, b.p50_us, u.p50_us,
                b.errors + u.errors ? "  (errors!)" : "");
    if (b.errors + u.errors) ok = false;
    if (c == 64) {
      std::printf("  target at concurrency 64: >= 20x unbatched: %s\n", ratio >= 20 ? "met" : "NOT met");
      ok &= ratio >= 20;
    }
    if (c == 1) {
      const double added = b.p50_us - u.p50_us;
      std::printf("  added p50 latency at concurrency 1: %.0f us (target <= 150 us: %s)\n", added,
                  added <= 150 ? "met" : "NOT met");
      ok &= added <= 150;
    }
  }
  std::printf("\nidentity, 5 ms per execution, max_batch_size 64, 100 us delay: rate / ideal (concurrency / 5 ms, "
              "at most 64 rows per execution and instance)\n");
  std::printf("%-6s %12s %12s %10s %12s %12s %10s\n", "conc", "1 inst req/s", "ideal", "ratio", "2 inst req/s",
              "ideal", "ratio");
  for (int c : {1, 8, 64, 128}) {
    double rate[2], ideal[2];
    for (int n = 0; n < 2; ++n) {
      const auto r = measure(port, infer_text("batching_wave" + std::to_string(n + 1)), c, seconds);
      rate[n] = r.rate;
      ideal[n] = std::min(c, 64 * (n + 1)) / 0.005;
      if (r.errors) ok = false;
    }
    std::printf("%-6d %12.0f %12.0f %9.2fx %12.0f %12.0f %9.2fx (target >= 0.9)\n", c, rate[0], ideal[0],
                rate[0] / ideal[0], rate[1], ideal[1], rate[1] / ideal[1]);
  }
  stop(pid);
  ::unlink(log.c_str());
  return ok ? 0 : 2;
}

}  // namespace bench_batching
