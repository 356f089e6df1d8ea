// Copyright (c) inferwire contributors. SPDX-License-Identifier: Apache-2.0
//
// inferwire/http/compression.hpp — HTTP body compression as Triton does it (v2-protocol §4.4),
// through zlib: `gzip` bodies carry the gzip wrapper, `deflate` bodies the zlib wrapper, and
// decompression detects either wrapper.

#ifndef INFERWIRE_HTTP_COMPRESSION_HPP
#define INFERWIRE_HTTP_COMPRESSION_HPP

#include <inferwire/core/config.hpp>
#include <inferwire/core/error.hpp>

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace inferwire::http {

enum class content_coding { identity, gzip, deflate };

/// "identity", "gzip" or "deflate".
constexpr std::string_view coding_name(content_coding c) noexcept {
  switch (c) {
    case content_coding::gzip: return "gzip";
    case content_coding::deflate: return "deflate";
    default: return "identity";
  }
}

/// A request's Content-Encoding: exactly `gzip` or `deflate`, `identity` or empty for none;
/// nullopt for anything else (the server answers 501 `Unsupported compression type`).
constexpr std::optional<content_coding> parse_content_encoding(std::string_view value) noexcept {
  if (value.empty() || value == "identity") return content_coding::identity;
  if (value == "gzip") return content_coding::gzip;
  if (value == "deflate") return content_coding::deflate;
  return std::nullopt;
}

/// The response coding an Accept-Encoding value asks for: the highest q among identity,
/// deflate and gzip (first wins on ties, q must be > 0); unknown codings and `*` are ignored;
/// identity when nothing usable is listed.
INFERWIRE_DECL content_coding negotiate_accept_encoding(std::string_view value);

/// Compresses the concatenation of `parts` into `out` (replacing its contents). Returns false
/// when zlib fails (the caller then sends the body uncompressed).
INFERWIRE_DECL bool compress(std::span<const std::string_view> parts, content_coding coding,
                     std::string& out);
inline bool compress(std::string_view data, content_coding coding, std::string& out) {
  return compress(std::span<const std::string_view>(&data, 1), coding, out);
}

/// Inflates a gzip or zlib stream into `out` (replacing its contents), refusing to produce more
/// than `limit` bytes. Errors (Triton's texts):
///  - empty input: invalid_arg `nothing to be decompressed`;
///  - output over `limit`: invalid_arg `Decompressed data size exceeds the maximum allowed
///    value of <limit> bytes. Use --http-max-input-size to increase the limit.`;
///  - zlib stream-state error: internal `encountered inconsistent stream state during
///    decompression`.
/// Corrupt data is not an error: what was inflated before it is kept (as upstream does).
INFERWIRE_DECL status decompress(std::string_view data, std::size_t limit, std::string& out);

}  // namespace inferwire::http

#if INFERWIRE_HEADER_ONLY
#include <inferwire/http/impl/compression.hpp>
#endif

#endif
