// SPDX-License-Identifier: Apache-2.0
// Triton's generate extension (provisional, HTTP only; v2-protocol §1, "Generate"): a flat JSON
// object in, a flat JSON object out. The conversions to and from the v2 value types; the
// endpoints in http_endpoints.cpp run the request like any other.
#pragma once

#include "model_config.hpp"

#include <inferwire/core/error.hpp>
#include <inferwire/v2/binary.hpp>
#include <inferwire/v2/types.hpp>

#include <string>
#include <string_view>

namespace inferwire::server {

/// A generate body for model `c`: each top-level key, and each key inside `parameters`, that
/// names one of the model's inputs becomes that tensor; `id` is the request id; every other key
/// is a request parameter (a string, number or boolean; Triton's typed keys such as
/// `sequence_id` are checked as in an infer request). A tensor is a scalar or a flat array of
/// the input's type (strings for BYTES), shaped to the input's dims: the one variable dimension
/// (or the first of several; the others get 1) takes what the element count leaves, and a batching
/// model gets a batch dimension of 1. Every output is requested, as JSON.
status decode_generate_request(std::string_view body, const model_config& c, const v2::codec_limits& limits,
                               v2::infer_request& out);

/// A response as a generate object: `id` (when the request had one), `model_name`,
/// `model_version`, then one key per output (its one element as a scalar, more as a flat
/// array; BYTES as strings) and one per response parameter.
status encode_generate_response(const v2::infer_response& r, std::string& out);

/// A Server-Sent Event carrying `json`: `data: <json>\n\n`.
std::string sse_event(std::string_view json);

}  // namespace inferwire::server
