// SPDX-License-Identifier: Apache-2.0
// The gRPC frontend's services (inference.GRPCInferenceService and grpc.health.v1.Health),
// as the server set-up sees them: something to register with the server builder, and the
// calls to ask for on each completion queue.
#pragma once

#include "grpc_queue.hpp"
#include "server.hpp"

#include <memory>

namespace inferwire::server::grpc_detail {

class services {
 public:
  virtual ~services() = default;
  /// Registers the services with `b`, before the server is built.
  virtual void add_to(::grpc::ServerBuilder& b) = 0;
  /// Asks `cq` for the next call of every method: `ahead` calls of ModelInfer and of
  /// ModelStreamInfer (the busy ones, so that arriving calls never wait for one), one of the
  /// rest.
  virtual void listen(::grpc::ServerCompletionQueue* cq, const std::shared_ptr<queue_gate>& gate, int ahead) = 0;
};

/// The services over `s`'s repository, shared-memory registry and inference path.
std::unique_ptr<services> make_services(server_state& s);

}  // namespace inferwire::server::grpc_detail
