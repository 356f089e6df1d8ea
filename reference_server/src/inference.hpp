// SPDX-License-Identifier: Apache-2.0
// The transport-independent inference path: core validation of a decoded request against its
// model (v2-protocol §1.4 step 11), sequence handling (§7), execution, output selection and
// classification (§4.6), the statistics of the run, and the runner that executes what the
// schedulers start.
#pragma once

#include "call.hpp"
#include "repository.hpp"
#include "shm_registry.hpp"

#include <inferwire/v2/types.hpp>

#include <functional>
#include <memory>
#include <span>
#include <string>

namespace inferwire::server {

/// Checks `request` against `config` with Triton's texts. On success `batch_size` is the
/// request's batch size (1 for models without batching).
status validate_request(const model_config& config, const v2::infer_request& request,
                        std::int64_t& batch_size);

/// Stamps the core's part of a traced request, REQUEST_START to REQUEST_END (now), from its
/// clock, in Triton's names.
void stamp_core(trace_record& trace, const request_clock& times);

/// Resolves every shared-memory input and output of `request` against `registry` (v2-protocol
/// §5.4): host inputs become views of their region; device inputs keep a view of device memory
/// (its size is what validation needs) and are recorded in `places`, except BYTES inputs, which
/// are copied to host memory here.
status resolve_shared_memory(shm_registry& registry, v2::infer_request& request,
                             tensor_places& places);

/// Runs a validated request on `model` and fills `response` (id, model name and version, the
/// selected outputs with their encodings). Records success or failure in the model's stats.
/// Output data may view `request`'s input data.
/// `places` (may be null) are the request's shared-memory places: outputs with a destination
/// are written there and listed without data.
/// Decoupled models (`model_transaction_policy { decoupled: true }`) send 0..N responses through
/// `on_response` while they run; `response` then only names the request (id, model, version)
/// for the final flag. Without a sink a decoupled model fails. A sink returns false when
/// nobody receives responses any more (the client went away); the model then stops.
/// `cancelled` (may be null) tells whether the client gave up; a backend that waits stops
/// waiting then (see pause()).
status execute_request(model_version& model, const v2::infer_request& request,
                       std::int64_t batch_size, request_clock& times,
                       v2::infer_response& response, const tensor_places* places = nullptr,
                       const response_sink* on_response = nullptr, trace_record* trace = nullptr,
                       const std::function<bool()>* cancelled = nullptr);

/// One request of a batch that executes at once.
struct batch_member {
  const v2::infer_request* request = nullptr;
  std::int64_t batch_size = 1;
  request_clock* times = nullptr;
  v2::infer_response* response = nullptr;
  const tensor_places* places = nullptr;  ///< may be null
  /// Decoupled models' responses and the client's cancellation (may be null); backends that
  /// take request lists use them, a concatenated batch cannot.
  const response_sink* sink = nullptr;
  const std::function<bool()>* cancelled = nullptr;
  status result;
};

/// Runs validated requests of `model` with equal batch keys as one backend execution over the
/// batch dimension (their inputs concatenated, in device memory when the backend runs on a GPU),
/// then splits the outputs by rows and builds each member's response and result as
/// execute_request would. A backend that takes request lists gets the members as one list
/// instead, each with its own inputs and responder. Sequence models (`oldest` strategy): each member is one sequence's
/// request, its rows get its control values and sequence state; a member whose sequence is
/// refused fails alone. Statistics: each request as a request, the batch as one execution.
/// `keep` receives what the responses' data views; it must outlive them.
void execute_batch(model_version& model, std::span<batch_member> members, std::shared_ptr<const void>& keep);

/// The runner the schedulers hand their work to: a small call run on the thread that
/// scheduled it, a batch on the execution pool (one request alone, decoupled models included,
/// or several as one execution over the batch dimension; requests whose clients gave up while
/// they waited are dropped), and a request whose queue timeout expired. Nothing a backend
/// throws escapes: it is the call's error.
const batch_runner& inference_runner() noexcept;

/// Applies top-k classification to `output` in place (v2-protocol §4.6).
status classify(v2::infer_output& output, std::uint64_t k, const tensor_config& config,
                bool batching);

}  // namespace inferwire::server
