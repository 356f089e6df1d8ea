// SPDX-License-Identifier: Apache-2.0
// The transport-independent service of inferwire-server: one function per endpoint operation
// of the v2 protocol and Triton's extensions. It takes and returns the v2 value types and
// `status` (an inferwire error code with the exact text), and holds every rule that is not a
// matter of the wire: shutdown refusals, repository names, model lookup, shared-memory
// admission, validation, failure statistics and scheduling (inline, or on the execution pool
// behind the model's instance gate and its queue limit).
//
// The HTTP and gRPC frontends only decode, call the service, and encode. A text that really
// differs per transport stays in its frontend, with a comment naming the upstream behaviour.
#pragma once

#include "inference.hpp"
#include "server.hpp"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace inferwire::server {

/// What a frontend gives an inference besides the call.
struct infer_hooks {
  /// Where a decoupled model's responses go (null: the frontend takes none).
  const response_sink* sink = nullptr;
  /// True once the client gave up (empty: never). Checked before the call runs and before
  /// each decoupled response.
  std::function<bool()> cancelled;
};

/// One inference on its way through the service: the model found, the request the frontend
/// decoded, its shared-memory places and, once run, the response. Frontends may derive from it
/// to keep what the request's bytes live in.
struct infer_call {
  std::shared_ptr<model_version> model;
  v2::infer_request request;
  tensor_places places;
  std::int64_t batch_size = 1;
  request_clock times;
  v2::infer_response response;
  /// Set when this request is traced (trace extension); the frontend stamps its receive and
  /// send times and hands the record to the trace registry once the reply is sent.
  std::shared_ptr<trace_record> trace;
  /// While queued: the frontend's hooks and completion (taken out when it completes).
  infer_hooks hooks;
  std::function<void(status)> done;
  /// What the response's data views when the call ran in a dynamic batch.
  std::shared_ptr<const void> batch_data;
  /// What decoding made beyond the bytes received (an inflated body, tensors decoded from JSON
  /// or gRPC's typed contents), charged to the in-flight budget while the call lives.
  std::optional<byte_budget::charge> made;
};

class service {
 public:
  explicit service(server_state& s) noexcept : s_(s) {}
  server_state& state() noexcept { return s_; }
  const server_state& state() const noexcept { return s_; }

  // --- health and metadata (v2-protocol §2, §3) ------------------------------------------------

  /// "Server exiting" once shutdown began.
  /// Whether the server is live: not when it failed to initialise.
  status live(bool& live) const;
  bool ready() const { return s_.ready(); }
  /// Whether the model version is ready; refused during shutdown.
  status model_ready(std::string_view name, std::string_view version, bool& ready) const;
  v2::server_metadata server_metadata() const;
  /// Its versions are the one asked for or every ready version; shapes get a leading -1 when
  /// the model batches.
  status model_metadata(std::string_view name, std::string_view version, v2::model_metadata& out) const;
  status model_configuration(std::string_view name, std::string_view version,
                             std::shared_ptr<const model_config>& out) const;
  /// Statistics of one model ("" = every ready model), one entry per version.
  status statistics(std::string_view name, std::string_view version, v2::statistics_response& out) const;

  // --- model repository (§6) -------------------------------------------------------------------

  /// Whether repository requests are taken: `repository` (the optional repository name of a
  /// request) must be empty, and shutdown must not have begun. Every repository operation
  /// checks it; a frontend may check it first to keep upstream's order of checks.
  status repository_available(std::string_view repository) const;
  status repository_index(std::string_view repository, bool ready_only,
                          std::vector<v2::repository_index_entry>& out) const;
  /// Synchronous: returns when the load finished. Never throws; a failure is the status.
  status repository_load(std::string_view repository, const std::string& model,
                         const v2::repository_load_request& request);
  status repository_unload(std::string_view repository, const std::string& model, bool unload_dependents);

  // --- shared memory (§5) ----------------------------------------------------------------------

  status system_shm_status(std::string_view region, std::vector<v2::system_shm_status>& out) const;
  status cuda_shm_status(std::string_view region, std::vector<v2::cuda_shm_status>& out) const;
  status register_system_shm(const v2::system_shm_register_request& request);
  status register_cuda_shm(const v2::cuda_shm_register_request& request);
  status unregister_shm(region_kind kind, std::string_view region);

  // --- trace and log settings ------------------------------------------------------------------

  /// The settings of `model` ("" = global), after applying `update` when given.
  status trace_settings(std::string_view model, const v2::trace_settings* update, v2::trace_settings& out);
  /// The log settings, after applying `update` when given (Triton's checks: the log file
  /// cannot change; the format is "default" or "ISO8601").
  status log_settings(const v2::log_settings* update, v2::log_settings& out);

  // --- inference (§1.4) ------------------------------------------------------------------------
  // A frontend calls find_model, decodes the request into the call, then admit, then infer.

  /// Step 1: the model version; starts the call's clock.
  status find_model(std::string_view name, std::string_view version, infer_call& call) const;
  /// Counts a failure of a call whose model was found (a decoding error, say) and returns it.
  status failed(const infer_call& call, status st) const;
  /// Charges `bytes` that decoding made to the in-flight budget for the call's life (a queued
  /// call keeps them as long as its body): false when the budget has no room for them.
  bool hold(infer_call& call, std::uint64_t bytes) const;
  /// After decoding: holds the input tensors decoding made (JSON data, converted typed
  /// contents; not views of the received bytes) plus `beyond`, what else the frontend's
  /// decoding keeps (protobuf's parsed typed contents).
  bool hold_decoded(infer_call& call, std::uint64_t beyond = 0) const;
  /// Shared memory and validation of the decoded request; a failure is counted.
  status admit(infer_call& call) const;
  /// Runs an admitted call: on the calling thread when it is small (runs_inline), otherwise on
  /// the execution pool behind the model's scheduler (instance_gate: the dynamic batcher and
  /// its queue policy), refused when its queue is full.
  /// `done` is called exactly once, on whichever thread finished the call; nothing waits.
  void infer(std::shared_ptr<infer_call> call, infer_hooks hooks, std::function<void(status)> done);

 private:
  /// "Server not ready" once shutdown began (the repository and readiness endpoints).
  status accepting() const;

  server_state& s_;
};

}  // namespace inferwire::server
