// SPDX-License-Identifier: Apache-2.0
// inferwire-perf: a load generator for KServe v2 / Triton servers with perf_analyzer's common
// flags, its measurement windows and stability rule, and its report layout. It drives the
// server through inferwire's own HTTP and gRPC clients and reads the server's side of each
// window from the statistics endpoint.
//
//   inferwire-perf -m simple --concurrency-range 1:8:2
//   inferwire-perf -m simple -i grpc -u localhost:8001 --request-rate-range 100:400:100 -f out.csv
//
// docs/perf.md describes every flag, the measurement and the report.
#include "options.hpp"
#include "run.hpp"

#include <inferwire/core/allocator.hpp>

#include <iostream>

int main(int argc, char** argv) {
  namespace perf = inferwire::perf;
  perf::options o;
  if (int rc = perf::parse_options(argc, argv, o); rc >= 0) return rc;
  // Large inputs reuse the heap instead of faulting fresh pages in each request (docs/perf.md).
  inferwire::keep_large_blocks();
  try {
    return perf::run(o);
  } catch (const std::exception& e) {
    std::cerr << "inferwire-perf: " << e.what() << "\n";
    return 1;
  }
}
