// SPDX-License-Identifier: Apache-2.0
// The transport-independent inference path: core validation of a decoded request against its
// model (v2-protocol §1.4 step 11), sequence handling (§7), execution, output selection and
// classification (§4.6), and the statistics of the run.
#pragma once

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

/// Times of one request, for the statistics.
struct request_clock {
  clock::time_point received;  ///< the request was read
  clock::time_point queued;    ///< it was handed to the execution pool
  // Filled by execute_request (statistics and traces).
  clock::time_point compute_start;
  clock::time_point compute_input_end;
  clock::time_point compute_output_start;
  clock::time_point compute_end;
};

/// Stamps the core's part of a traced request, REQUEST_START to REQUEST_END (now), from its
/// clock, in Triton's names.
void stamp_core(trace_record& trace, const request_clock& times);

/// The shared-memory places of one request's tensors, and the leases that keep their regions
/// registered until the request is done.
struct tensor_places {
  std::vector<placement> inputs;  ///< parallel to request.inputs; data == nullptr: not device memory
  std::vector<std::pair<std::string, placement>> outputs;  ///< outputs requested in regions
  std::vector<shm_lease> leases;
  std::vector<const fault_flag*> faults;  ///< host regions used, checked after execution
  /// The first region that faulted while the request used it (fault_guard.hpp).
  status check_faults() const {
    for (const auto* f : faults)
      if (auto st = f->check()) return st;
    return {};
  }
};

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
using response_sink = std::function<bool(v2::infer_response&&)>;
status execute_request(model_version& model, const v2::infer_request& request,
                       std::int64_t batch_size, request_clock& times,
                       v2::infer_response& response, const tensor_places* places = nullptr,
                       const response_sink* on_response = nullptr, trace_record* trace = nullptr,
                       const std::function<bool()>* cancelled = nullptr);

/// The key of the requests that may share one execution (the dynamic batcher): their inputs'
/// names, types and shapes past the batch dimension.
std::string batch_key(const v2::infer_request& request);

/// The sequence a request belongs to ("" when it names none): at most one request of a
/// sequence goes into one batch (the sequence batcher's `oldest` strategy).
std::string sequence_group(const v2::infer_request& request);

/// One request of a batch that executes at once.
struct batch_member {
  const v2::infer_request* request = nullptr;
  std::int64_t batch_size = 1;
  request_clock* times = nullptr;
  v2::infer_response* response = nullptr;
  const tensor_places* places = nullptr;  ///< may be null
  status result;
};

/// Runs validated requests of `model` with equal batch keys as one backend execution over the
/// batch dimension (their inputs concatenated, in device memory when the backend runs on a GPU),
/// then splits the outputs by rows and builds each member's response and result as
/// execute_request would. Sequence models (`oldest` strategy): each member is one sequence's
/// request, its rows get its control values and sequence state; a member whose sequence is
/// refused fails alone. Statistics: each request as a request, the batch as one execution.
/// `keep` receives what the responses' data views; it must outlive them.
void execute_batch(model_version& model, std::span<batch_member> members, std::shared_ptr<const void>& keep);

/// Whether a request is small enough to execute on the thread that received it (HTTP I/O
/// thread, gRPC handler thread) instead of the execution pool: models without an artificial
/// delay or dynamic batching, with at most 64 KiB of host input bytes (inputs already in the
/// GPU memory of a GPU instance cost nothing). Its work is bounded and small, and a thread hop
/// would cost more.
bool runs_inline(const model_version& model, const v2::infer_request& request, const tensor_places& places);

/// Applies top-k classification to `output` in place (v2-protocol §4.6).
status classify(v2::infer_output& output, std::uint64_t k, const tensor_config& config,
                bool batching);

}  // namespace inferwire::server
