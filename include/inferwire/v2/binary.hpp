// SPDX-License-Identifier: Apache-2.0
// inferwire/v2/binary.hpp
//
// HTTP bodies of the infer endpoint (v2-protocol §1.4, §1.5, §4): a JSON header, optionally
// followed by binary tensor data (the binary tensor data extension), or a raw binary body.
//
//  - Decoding hands out views into the body: no tensor byte is copied or even read, so decode
//    time does not depend on tensor sizes. The body must outlive the decoded value.
//  - Encoding produces an `encoded_body`: the JSON header plus the list of binary segments,
//    still views of the caller's buffers, ready for a scatter-gather write. `flatten()` makes
//    one contiguous copy where a transport needs it.
//  - Every error carries the exact status and text of the spec.
#ifndef INFERWIRE_V2_BINARY_HPP
#define INFERWIRE_V2_BINARY_HPP

#include <inferwire/core/config.hpp>
#include <inferwire/core/error.hpp>
#include <inferwire/v2/json_codec.hpp>
#include <inferwire/v2/types.hpp>

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace inferwire::v2 {

/// Name of the header that carries the JSON header's length.
inline constexpr std::string_view header_length_field = "Inference-Header-Content-Length";

/// Limits applied while decoding requests (the server's --http-max-input-size), and the
/// bounds that keep decoding linear and small whatever a client sends.
struct codec_limits {
  std::size_t max_input_size = std::size_t{1} << 26;  // 64 MiB
  std::size_t max_tensors = 1024;    ///< inputs per request, and outputs per request
  std::size_t max_dims = 64;         ///< dimensions of one shape
  std::size_t max_parameters = 256;  ///< parameters of the request, and of each tensor
  friend bool operator==(const codec_limits&, const codec_limits&) = default;
};

namespace detail {
INFERWIRE_DECL status count_exceeded(std::string_view what, std::size_t n, std::size_t max);
}  // namespace detail

/// invalid_arg `request has <n> <what>, more than the <max> allowed` when n > max (the
/// codec_limits checks of both transports). Inline, so that a count within its limit costs a
/// comparison: a request is checked this way seven times or more.
inline status check_count(std::string_view what, std::size_t n, std::size_t max) {
  return n <= max ? status{} : detail::count_exceeded(what, n, max);
}


/// A body ready to send: JSON header, then the binary segments in order.
struct encoded_body {
  std::string header;
  std::vector<std::span<const std::byte>> segments;

  /// Length of the JSON header: the Inference-Header-Content-Length value.
  std::size_t header_length() const noexcept { return header.size(); }
  /// Total body length (header + all segments).
  std::size_t size() const noexcept;
  /// Sum of segment lengths.
  std::size_t binary_size() const noexcept;
  /// True when there are segments, i.e. the body needs Inference-Header-Content-Length.
  /// (A response whose binary outputs are all empty reports false: upstream then sends plain
  /// application/json without the header, v2-protocol §4.1.)
  bool has_binary_data() const noexcept { return binary_size() != 0; }
  /// The body as one contiguous string: exactly one copy of every byte.
  std::string flatten() const;
  /// Appends the body to `out` (one copy; reuses out's capacity).
  void append_to(std::string& out) const;
};

/// Parses a Content-Length value. Error: 400 `Unable to parse Content-Length, got: <v>`.
INFERWIRE_DECL std::size_t parse_content_length(std::string_view value, status& st);

/// Step 4 of v2-protocol §1.4: the JSON header's length from the
/// Inference-Header-Content-Length value (nullopt when the header is absent: the whole body is
/// JSON) and the content length. 0 selects a raw binary request.
INFERWIRE_DECL std::size_t parse_header_length(std::optional<std::string_view> value,
                                       std::size_t content_length, status& st);

/// Decodes an infer request body for model `model` (steps 5-9 of v2-protocol §1.4).
/// `header_length` comes from parse_header_length; 0 makes a raw binary request whose
/// `raw_input` is the whole body (see deduce_raw_input).
inline infer_request decode_infer_request(std::string_view body, std::size_t header_length,
                                          std::string_view model, status& st,
                                          const codec_limits& limits = {});
/// Throwing form.
inline infer_request decode_infer_request(std::string_view body, std::size_t header_length,
                                          std::string_view model,
                                          const codec_limits& limits = {});

/// Fills the single input of a raw binary request from the model configuration
/// (v2-protocol §4.2). `inputs` are the configured inputs with their configured dims (no batch
/// dimension); `batching` is max_batch_size > 0. BYTES inputs get their length prefix added.
inline status deduce_raw_input(infer_request& request, std::string_view model,
                               std::span<const tensor_metadata> inputs, bool batching,
                               const codec_limits& limits = {});

/// How the response should carry output `name` (v2-protocol §4.1): a listed output is binary
/// only if its own binary_data is true, shared memory if it names a region; unlisted outputs
/// (no `outputs` in the request) follow binary_data_output; raw binary requests get binary.
INFERWIRE_DECL tensor_encoding output_encoding(const infer_request& request, std::string_view name);

/// Encodes a response (server side). Each output is written as its `encoding` says; the data
/// of binary outputs is referenced, not copied. With `json_data`, it also gets where each
/// output in JSON has its data array in the header: its first and one-past-last offsets, in
/// order (for detail::response_header_memo).
INFERWIRE_DECL status encode_infer_response(const infer_response& response, encoded_body& out,
                                            std::vector<std::size_t>* json_data = nullptr);
INFERWIRE_DECL encoded_body encode_infer_response(const infer_response& response);

/// Decodes a response body (client side). `header_length` is the response's
/// Inference-Header-Content-Length (nullopt: the whole body is JSON). Binary outputs are views
/// into `body`; JSON outputs own their decoded bytes.
INFERWIRE_DECL infer_response decode_infer_response(std::string_view body,
                                            std::optional<std::size_t> header_length,
                                            status& st);
INFERWIRE_DECL infer_response decode_infer_response(std::string_view body,
                                            std::optional<std::size_t> header_length);

/// Encodes a request (client side). Binary inputs become segments that reference the inputs'
/// data; JSON inputs are printed into the header.
INFERWIRE_DECL status encode_infer_request(const infer_request& request, encoded_body& out);
/// The same with `parameters` sent in place of request.parameters (the clients add defaults
/// such as binary_data_output without copying the request).
INFERWIRE_DECL status encode_infer_request(const infer_request& request, const parameter_map& parameters,
                                   encoded_body& out);
INFERWIRE_DECL encoded_body encode_infer_request(const infer_request& request);

/// The `[request id: <id>] ` prefix of the core's validation messages (`<id_unknown>` for an
/// empty id).
INFERWIRE_DECL std::string request_prefix(std::string_view id);

/// The JSON-size limit of v2-protocol §0.3: invalid_arg `request JSON size of <n> bytes
/// exceeds the maximum allowed input size of <max> bytes. Use --http-max-input-size to
/// increase the limit.` when `size` is over the limit.
INFERWIRE_DECL status check_json_size(std::size_t size, const codec_limits& limits);

namespace detail {
/// Step 6 of decode_infer_request on its own: a JSON `parameters` object into `out`, with
/// Triton's typed keys (sequence_id, priority, ...), reserved `triton_` keys and the parameter
/// count checked, and Triton's texts (the generate endpoint's parameters use it too).
INFERWIRE_DECL status decode_request_parameters(const boost::json::value& v, parameter_map& out,
                                        const codec_limits& limits);
/// Appends the `"key":value` members of `m` (no braces), a comma before each one when `comma`
/// (then after the first); returns whether a member was written or `comma` was set.
INFERWIRE_DECL bool append_parameter_members(std::string& h, const parameter_map& m, bool comma);
}  // namespace detail

/// The body of every HTTP error reply: {"error":"<message>"}.
INFERWIRE_DECL std::string error_body(std::string_view message);
/// The message of an error body, or the body itself when it is not one.
INFERWIRE_DECL std::string parse_error_body(std::string_view body);

}  // namespace inferwire::v2

#if INFERWIRE_HEADER_ONLY
#include <inferwire/v2/impl/binary.hpp>
#endif

#endif
