// The transport-independent inference path: core validation of a decoded request against its
// model (v2-protocol §1.4 step 11), sequence handling (§7), execution, output selection and
// classification (§4.6), and the statistics of the run.
#pragma once

#include "repository.hpp"

#include <inferwire/v2/types.hpp>

namespace inferwire::server {

/// Checks `request` against `config` with Triton's texts. On success `batch_size` is the
/// request's batch size (1 for models without batching).
status validate_request(const model_config& config, const v2::infer_request& request,
                        std::int64_t& batch_size);

/// Times of one request, for the statistics.
struct request_clock {
  clock::time_point received;  ///< the request was read
  clock::time_point queued;    ///< it was handed to the execution pool
};

/// Runs a validated request on `model` and fills `response` (id, model name and version, the
/// selected outputs with their encodings). Records success or failure in the model's stats.
/// Output data may view `request`'s input data.
status execute_request(model_version& model, const v2::infer_request& request,
                       std::int64_t batch_size, const request_clock& times,
                       v2::infer_response& response);

/// Applies top-k classification to `output` in place (v2-protocol §4.6).
status classify(v2::infer_output& output, std::uint64_t k, const tensor_config& config,
                bool batching);

}  // namespace inferwire::server
