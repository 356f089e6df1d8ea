// SPDX-License-Identifier: Apache-2.0
// inferwire-perf over gRPC: inferwire::grpc::client, unary calls or ModelStreamInfer streams.
#include "run.hpp"

#if INFERWIRE_PERF_GRPC
#include "load.hpp"

#include <inferwire/grpc/client.hpp>
#include <inferwire/grpc/convert.hpp>

namespace inferwire::perf {

namespace {

struct grpc_traits {
  using client = grpc::client;
  static constexpr bool has_streams = true;

  static std::unique_ptr<client> make_blocking(const options& o) { return std::make_unique<client>(o.url); }
  static std::unique_ptr<client> make_async(net::any_io_executor ex, const options& o, std::size_t) {
    return std::make_unique<client>(std::move(ex), o.url);
  }
  /// Converting one request to its protobuf message and serialising it, averaged.
  static double send_cost_us(const v2::infer_request& r, const options& o) {
    constexpr int n = 200;
    std::size_t sink = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) {
      grpc::pb::ModelInferRequest q;
      grpc::encode_infer_request(r, o.model, o.version, q, false);
      sink += q.SerializeAsString().size();
    }
    const auto t1 = std::chrono::steady_clock::now();
    if (sink == 0) return 0;
    return std::chrono::duration<double, std::micro>(t1 - t0).count() / n;
  }
};

}  // namespace

int run_grpc(const options& o) { return run_with<grpc_traits>(o); }

}  // namespace inferwire::perf

#else

#include <stdexcept>

namespace inferwire::perf {
int run_grpc(const options&) {
  throw std::runtime_error("-i grpc: this inferwire-perf was built without the gRPC component");
}
}  // namespace inferwire::perf

#endif
