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
    return mean_cost_us([&] {
      grpc::pb::ModelInferRequest q;
      grpc::encode_infer_request(r, o.model, o.version, q, false);
      return q.SerializeAsString().size();
    });
  }
  /// Parsing one response message and converting it, averaged: `res` serialised again as the
  /// server sent it.
  static double recv_cost_us(const v2::infer_response& res) {
    grpc::pb::ModelInferResponse m;
    m.set_model_name(res.model_name);
    m.set_model_version(res.model_version);
    m.set_id(res.id);
    grpc::to_proto(res.parameters, *m.mutable_parameters());
    for (const auto& out : res.outputs) {
      auto* t = m.add_outputs();
      t->set_name(out.name);
      t->set_datatype(std::string(wire_name(out.datatype)));
      for (auto d : out.shape) t->add_shape(d);
      grpc::to_proto(out.parameters, *t->mutable_parameters());
      if (out.encoding != v2::tensor_encoding::shared_memory) m.add_raw_output_contents()->assign(out.data.str());
    }
    const std::string wire = m.SerializeAsString();
    return mean_cost_us([&] {
      grpc::pb::ModelInferResponse back;
      back.ParseFromString(wire);
      v2::infer_response decoded;
      grpc::decode_infer_response(back, decoded);
      return decoded.outputs.size() + 1;
    });
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
