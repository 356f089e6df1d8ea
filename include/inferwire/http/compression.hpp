// Copyright (c) inferwire contributors. SPDX-License-Identifier: Apache-2.0
//
// inferwire/http/compression.hpp — HTTP body compression as Triton does it (v2-protocol §4.4),
// through zlib: `gzip` bodies carry the gzip wrapper, `deflate` bodies the zlib wrapper, and
// decompression detects either wrapper.

#ifndef INFERWIRE_HTTP_COMPRESSION_HPP
#define INFERWIRE_HTTP_COMPRESSION_HPP

#include <inferwire/core/config.hpp>
#include <inferwire/core/error.hpp>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <deque>
#include <memory>
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

namespace detail {

/// Bytes gathered in blocks of 1 MiB (not zero-filled: pages are touched as they are written)
/// and joined once complete, each block freed as soon as it is copied: memory follows what was
/// written, where a string grown by doubling copies itself and holds up to twice as much. The
/// decompressor and the HTTP client's bodies of unknown length use it.
class block_bytes {
 public:
  static constexpr std::size_t block_size = std::size_t{1} << 20;
  /// Room to write into: the rest of the last block, or a new block.
  std::span<char> space() {
    if (blocks_.empty() || last_ == block_size) {
      blocks_.emplace_back(new char[block_size]);
      last_ = 0;
    }
    return {blocks_.back().get() + last_, block_size - last_};
  }
  /// `n` bytes of space() were written.
  void commit(std::size_t n) noexcept {
    last_ += n;
    size_ += n;
  }
  void append(std::string_view bytes) {
    while (!bytes.empty()) {
      const std::span<char> room = space();
      const std::size_t n = std::min(room.size(), bytes.size());
      std::memcpy(room.data(), bytes.data(), n);
      commit(n);
      bytes.remove_prefix(n);
    }
  }
  std::size_t size() const noexcept { return size_; }
  /// Appends every byte to `out` (reserved once) and frees the blocks.
  void join(std::string& out) {
    out.reserve(out.size() + size_);
    for (std::size_t left = size_; !blocks_.empty(); blocks_.pop_front()) {
      const std::size_t n = std::min(left, block_size);
      out.append(blocks_.front().get(), n);
      left -= n;
    }
    size_ = 0;
    last_ = block_size;
  }

 private:
  std::deque<std::unique_ptr<char[]>> blocks_;
  std::size_t last_ = block_size;  ///< bytes in the last block
  std::size_t size_ = 0;
};

}  // namespace detail

}  // namespace inferwire::http

#if INFERWIRE_HEADER_ONLY
#include <inferwire/http/impl/compression.hpp>
#endif

#endif
