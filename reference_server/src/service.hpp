// SPDX-License-Identifier: Apache-2.0
// The transport-independent service of inferwire-server: one function per endpoint operation
// of the v2 protocol and Triton's extensions. It takes and returns the v2 value types and
// `status` (an inferwire error code with the exact text), and holds every rule that is not a
// matter of the wire: shutdown refusals, repository names, model lookup, shared-memory
// admission, validation, failure statistics, and the inference call from the model lookup to
// the scheduler (start_infer).
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
#include <type_traits>
#include <vector>

namespace inferwire::server {

/// What a frontend's decoding of a request says (see service::start_infer).
struct decoded {
  /// The request is invalid: its error, counted as a failed inference of the model.
  status error;
  /// What the frontend's decoding keeps beyond the tensors it made (protobuf's parsed typed
  /// contents), charged to the in-flight budget with them.
  std::uint64_t beyond = 0;
  /// The frontend refused the request for a reason of its own transport (a model it does not
  /// serve, a coding it does not take): not counted; `error`, when set, is its answer.
  bool refused = false;

  decoded() = default;
  decoded(status st, std::uint64_t beyond_bytes = 0) : error(std::move(st)), beyond(beyond_bytes) {}
  static decoded refuse(status st = {}) {
    decoded d(std::move(st));
    d.refused = true;
    return d;
  }
};

/// A frontend's decoding step, by reference (it lives while start_infer runs): fills
/// `call.request` (views of the received bytes where it can) and may set the call's hooks'
/// sink once it knows the model (`call.model`) is decoupled.
class infer_decoder {
 public:
  template <class F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, infer_decoder>)
  infer_decoder(F&& f) noexcept  // NOLINT: a lambda converts implicitly
      : obj_(const_cast<void*>(static_cast<const void*>(&f))),
        fn_([](void* o, infer_call& c) -> decoded { return (*static_cast<std::remove_reference_t<F>*>(o))(c); }) {}
  decoded operator()(infer_call& c) const { return fn_(obj_, c); }

 private:
  void* obj_;
  decoded (*fn_)(void*, infer_call&);
};

/// Why an inference call did not start (start_infer); `none`: it started.
struct infer_start {
  enum reason { none, failed, budget, refused };
  reason why = none;
  /// The answer: the failure (failed), "the server's in-flight request memory ... is
  /// exhausted" (budget: HTTP answers 413 with it), the frontend's refusal (may be empty).
  status error;
  explicit operator bool() const noexcept { return why != none; }
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

  /// The inference call, written once for every frontend: the model version (`name`,
  /// `version`; the call's clock starts and it counts as in flight), the frontend's `decode`,
  /// the in-flight budget for what decoding made, shared memory and validation (v2-protocol
  /// §1.4 steps 10 and 11), the trace, then the model's scheduler, which runs the call at once
  /// or queues it. A failure after the lookup counts in the model's statistics; a refusal does
  /// not. Nothing thrown escapes: it is the call's error.
  ///
  /// When the call did not start, returns why (`done` is never called). Otherwise `done` is
  /// called exactly once, on whichever thread finished the call (before start_infer returns
  /// when it ran inline), with the call's hooks and completion already taken out of it.
  infer_start start_infer(const std::shared_ptr<infer_call>& call, std::string_view name, std::string_view version,
                          infer_decoder decode, infer_hooks hooks, std::function<void(status)> done);
  /// For a decoder that makes bytes beyond those received before its end (an inflated body):
  /// charges them to the in-flight budget for the call's life; false when it has no room.
  bool hold(infer_call& call, std::uint64_t bytes) const;

 private:
  /// "Server not ready" once shutdown began (the repository and readiness endpoints).
  status accepting() const;
  /// Counts a failure of a call whose model was found and returns it; its reason is `why`, or
  /// the one reason_of gives for a failure outside the backend.
  status failed(const infer_call& call, status st, std::optional<failure_reason> why = std::nullopt) const;
  /// Holds the input tensors decoding made (JSON data, converted typed contents; not views of
  /// the received bytes) plus `beyond`.
  bool hold_decoded(infer_call& call, std::uint64_t beyond) const;
  /// Shared memory and validation of the decoded request, then its trace.
  status admit(infer_call& call) const;

  server_state& s_;
};

}  // namespace inferwire::server
