// SPDX-License-Identifier: Apache-2.0
// The gRPC frontend: inference.GRPCInferenceService and grpc.health.v1.Health over the same
// repository, shared-memory registry and inference path as HTTP (v2-protocol §2).
#pragma once

#include "server.hpp"

#include <memory>
#include <string>

namespace inferwire::server {

class grpc_frontend;

/// Starts serving gRPC on address:port (0: a free port). Returns null with `st` set on
/// failure; `bound_port` is the port in use.
std::shared_ptr<grpc_frontend> start_grpc(server_state& s, const std::string& address, int port,
                                          status& st, int& bound_port);

/// Stops accepting calls, cancels streams and waits for running calls (bounded).
void stop_grpc(grpc_frontend& f);

}  // namespace inferwire::server
