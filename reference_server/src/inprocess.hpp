// SPDX-License-Identifier: Apache-2.0
// In-process inference for backend libraries (Triton's BLS): a TRITONSERVER_InferenceRequest
// handed to TRITONSERVER_ServerInferAsync runs through service::start_infer like a request from
// the network, and its responses go back through the request's allocator and callbacks.
#pragma once

namespace inferwire::server {

struct server_state;

/// From now on TRITONSERVER_ServerInferAsync runs requests on `s`.
void enable_inprocess_inference(server_state& s);
/// From now on it refuses them (before `s` goes).
void disable_inprocess_inference();

}  // namespace inferwire::server
