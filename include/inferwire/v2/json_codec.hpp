// SPDX-License-Identifier: Apache-2.0
// inferwire/v2/json_codec.hpp
//
// The JSON codec of the KServe v2 protocol, with Boost.JSON (what the infer bodies of
// binary.hpp need; json.hpp adds the conversions of the other messages):
//  - `parse_json`: parsing with Triton's limits and error texts (500 with RapidJSON's wording
//    and byte offset for syntax errors, 400 for nesting deeper than 100), accepting the NaN,
//    Infinity and -Infinity literals Triton's JSON layer reads and writes;
//  - `json_access`: typed member access whose errors carry Triton's exact texts
//    ("attempt to access JSON non-string as string", ...);
//  - tensor data in JSON (v2-protocol §4.5): nested arrays flattened, typed element checks,
//    truncation of integers, FP16/BF16 refused; output data printed as Triton prints it;
//  - base64, as Triton's CUDA IPC handles use it.
#ifndef INFERWIRE_V2_JSON_CODEC_HPP
#define INFERWIRE_V2_JSON_CODEC_HPP

#include <inferwire/core/config.hpp>
#include <inferwire/core/bytes.hpp>
#include <inferwire/core/data_type.hpp>
#include <inferwire/core/error.hpp>

#include <boost/json/value.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace inferwire::v2 {

/// The nesting limit of v2-protocol §0.3.
inline constexpr std::size_t max_json_depth = 100;

/// Parses `text` as a JSON document. On failure returns null and sets `st`:
///  - nesting deeper than `max_depth` -> invalid_arg
///    `JSON nesting depth exceeds maximum allowed limit (100)`;
///  - any other syntax error -> internal
///    `failed to parse the request JSON buffer: <RapidJSON message> at <offset>`.
/// The literals NaN, Infinity and -Infinity are accepted where a number may stand; they read
/// back through `json_access::as_double` (and tensor data decoding) as the IEEE values.
inline boost::json::value parse_json(std::string_view text, status& st,
                              std::size_t max_depth = max_json_depth,
                              boost::json::storage_ptr sp = {});
/// Throwing form.
INFERWIRE_DECL boost::json::value parse_json(std::string_view text, std::size_t max_depth = max_json_depth);

/// Typed access to JSON values with Triton's error texts (code internal, i.e. HTTP 500).
namespace json_access {
INFERWIRE_DECL const boost::json::object* as_object(const boost::json::value& v, status& st);
INFERWIRE_DECL const boost::json::array* as_array(const boost::json::value& v, status& st);
INFERWIRE_DECL bool as_string(const boost::json::value& v, std::string_view& out, status& st);
INFERWIRE_DECL bool as_bool(const boost::json::value& v, bool& out, status& st);
INFERWIRE_DECL bool as_int64(const boost::json::value& v, std::int64_t& out, status& st);
INFERWIRE_DECL bool as_uint64(const boost::json::value& v, std::uint64_t& out, status& st);
/// Any JSON number, or a NaN/Infinity literal.
INFERWIRE_DECL bool as_double(const boost::json::value& v, double& out, status& st);
/// The member `name`, or nullptr with `attempt to access non-existing object member '<name>'`.
INFERWIRE_DECL const boost::json::value* member(const boost::json::object& o, std::string_view name,
                                 status& st);
/// `v` (a member found by other means), or, when it is null, nullptr with the error of member().
INFERWIRE_DECL const boost::json::value* required(const boost::json::value* v, std::string_view name,
                                   status& st);
/// True when `v` is one of the NaN/Infinity literals accepted by parse_json.
INFERWIRE_DECL bool is_nonfinite_literal(const boost::json::value& v) noexcept;
}  // namespace json_access

/// Decodes the JSON `data` of a tensor (v2-protocol §4.5) and appends its little-endian bytes
/// to `out`: nested arrays are flattened in row-major order and must hold exactly
/// `element_count` elements (not checked for BYTES, whose elements are appended in the
/// 4-byte-length form). FP16, BF16 and invalid types are refused with the texts that name the
/// input `name`. Errors carry Triton's exact texts; the caller adds no prefix.
INFERWIRE_DECL status decode_json_tensor_data(const boost::json::value& data, data_type type,
                                      std::int64_t element_count, std::string_view name,
                                      std::string& out);

/// Appends `bytes` of a tensor of `type` with `element_count` elements to `out` as a flat JSON
/// array, as Triton prints it (FP32 widened to double, shortest round-trip digits in RapidJSON's
/// layout, NaN/Infinity literals, BYTES elements as strings). `name` is the output's name for
/// the error texts.
INFERWIRE_DECL status append_json_tensor_data(std::string& out, data_type type,
                               std::span<const std::byte> bytes, std::int64_t element_count,
                               std::string_view name);

/// Appends a double the way RapidJSON's writer prints it: "1.0", "0.10000000149011612",
/// "1e21", "1.5e-7", "NaN", "Infinity", "-Infinity".
INFERWIRE_DECL void append_json_double(std::string& out, double d);

/// Appends `s` as a quoted, escaped JSON string.
INFERWIRE_DECL void append_json_string(std::string& out, std::string_view s);

/// Base64 of `bytes` (standard alphabet, padded): the `b64` form of CUDA IPC handles.
INFERWIRE_DECL std::string base64_encode(std::string_view bytes);
/// Decodes standard base64, skipping ASCII whitespace (line breaks included) as Triton's
/// decoder does; false when `text` is not valid base64.
INFERWIRE_DECL bool base64_decode(std::string_view text, std::string& out);

}  // namespace inferwire::v2

#if INFERWIRE_HEADER_ONLY
#include <inferwire/v2/impl/json_codec.hpp>
#endif

#endif  // INFERWIRE_V2_JSON_CODEC_HPP
