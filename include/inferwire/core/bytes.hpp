// SPDX-License-Identifier: Apache-2.0
// inferwire/core/bytes.hpp
//
// The BYTES element codec: each element is a 4-byte little-endian unsigned length followed by
// that many bytes, elements back to back, no padding. Used by binary tensor data, shared
// memory, raw gRPC contents and JSON (after decoding).
//
// Reading never goes past the end of the buffer: an element whose length prefix is cut short,
// or whose declared length runs past the end, stops iteration and sets `malformed()`.
#ifndef INFERWIRE_CORE_BYTES_HPP
#define INFERWIRE_CORE_BYTES_HPP

#include <inferwire/core/error.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <ranges>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace inferwire {

namespace detail {
inline std::uint32_t load_le32(const std::byte* p) noexcept {
  return std::uint32_t(p[0]) | std::uint32_t(p[1]) << 8 | std::uint32_t(p[2]) << 16 |
         std::uint32_t(p[3]) << 24;
}
inline void store_le32(char* p, std::uint32_t v) noexcept {
  p[0] = static_cast<char>(v & 0xff);
  p[1] = static_cast<char>((v >> 8) & 0xff);
  p[2] = static_cast<char>((v >> 16) & 0xff);
  p[3] = static_cast<char>((v >> 24) & 0xff);
}
}  // namespace detail

/// Serialized size of one element.
constexpr std::size_t bytes_element_size(std::size_t n) noexcept { return 4 + n; }

/// Appends one element to `out`. Throws std::length_error when it is 4 GiB or longer.
inline void append_bytes_element(std::string& out, std::string_view element) {
  if (element.size() > std::numeric_limits<std::uint32_t>::max())
    throw std::length_error("BYTES element longer than 4294967295 bytes");
  std::size_t at = out.size();
  out.resize(at + 4);
  detail::store_le32(out.data() + at, static_cast<std::uint32_t>(element.size()));
  out.append(element);
}

/// Builds a serialized BYTES tensor element by element.
class bytes_builder {
 public:
  bytes_builder() = default;
  /// Reserves room for `elements` elements of `average` bytes.
  void reserve(std::size_t elements, std::size_t average = 0) {
    buf_.reserve(elements * (4 + average));
  }
  bytes_builder& append(std::string_view element) {
    append_bytes_element(buf_, element);
    ++count_;
    return *this;
  }
  template <std::ranges::input_range R>
  bytes_builder& append_range(const R& elements) {
    for (const auto& e : elements) append(std::string_view(e));
    return *this;
  }
  std::size_t count() const noexcept { return count_; }
  std::size_t size() const noexcept { return buf_.size(); }
  std::span<const std::byte> bytes() const noexcept { return std::as_bytes(std::span(buf_)); }
  const std::string& str() const noexcept { return buf_; }
  std::string release() noexcept {
    count_ = 0;
    return std::move(buf_);
  }

 private:
  std::string buf_;
  std::size_t count_ = 0;
};

/// Serializes a range of strings (anything convertible to std::string_view).
template <std::ranges::input_range R>
std::string encode_bytes(const R& elements) {
  bytes_builder b;
  b.append_range(elements);
  return b.release();
}

/// A forward range of the elements of a serialized BYTES tensor, as string_views into it.
class bytes_view {
 public:
  class iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = std::string_view;
    using difference_type = std::ptrdiff_t;
    using reference = std::string_view;
    using pointer = void;

    iterator() = default;
    std::string_view operator*() const noexcept { return current_; }
    iterator& operator++() noexcept {
      advance();
      return *this;
    }
    iterator operator++(int) noexcept {
      auto t = *this;
      advance();
      return t;
    }
    friend bool operator==(const iterator& a, const iterator& b) noexcept {
      return a.end_ == b.end_ && (a.end_ || a.next_ == b.next_);
    }

   private:
    friend class bytes_view;
    explicit iterator(std::span<const std::byte> buf) noexcept : buf_(buf), end_(false) {
      advance();
    }
    // Reads the element at next_; reaching the end, or a malformed element, ends iteration.
    void advance() noexcept {
      if (next_ >= buf_.size() || buf_.size() - next_ < 4) {
        end_ = true;
        return;
      }
      std::uint32_t n = detail::load_le32(buf_.data() + next_);
      if (buf_.size() - next_ - 4 < n) {
        end_ = true;
        return;
      }
      current_ = std::string_view(reinterpret_cast<const char*>(buf_.data() + next_ + 4), n);
      next_ += 4 + std::size_t(n);
    }
    std::span<const std::byte> buf_;
    std::size_t next_ = 0;
    std::string_view current_;
    bool end_ = true;
  };

  bytes_view() = default;
  explicit bytes_view(std::span<const std::byte> buf) noexcept : buf_(buf) {}
  explicit bytes_view(std::string_view buf) noexcept : buf_(std::as_bytes(std::span(buf))) {}

  iterator begin() const noexcept { return iterator(buf_); }
  iterator end() const noexcept { return iterator(); }

  /// Splits the buffer into elements. Returns false (and leaves the well-formed prefix in
  /// `out`) when the buffer does not end exactly after a complete element.
  bool decode(std::vector<std::string_view>& out) const {
    out.clear();
    return walk([&](std::string_view e) { out.push_back(e); });
  }
  /// The elements, or std::invalid_argument when the buffer is malformed.
  std::vector<std::string_view> elements() const {
    std::vector<std::string_view> out;
    if (!decode(out)) throw std::invalid_argument("malformed BYTES tensor data");
    return out;
  }
  /// True when the buffer is not a sequence of complete elements.
  bool malformed() const {
    return !walk([](std::string_view) {});
  }
  std::span<const std::byte> bytes() const noexcept { return buf_; }

 private:
  // Calls f for every complete element; false when the buffer ends inside an element.
  template <class F>
  bool walk(F&& f) const {
    std::size_t pos = 0;
    while (pos < buf_.size()) {
      if (buf_.size() - pos < 4) return false;
      std::uint32_t n = detail::load_le32(buf_.data() + pos);
      if (buf_.size() - pos - 4 < n) return false;
      f(std::string_view(reinterpret_cast<const char*>(buf_.data() + pos + 4), n));
      pos += 4 + std::size_t(n);
    }
    return true;
  }

  std::span<const std::byte> buf_;
};

/// Checks a BYTES input buffer the way Triton's core does before execution
/// (v2-protocol §1.4, table of step 11): every element needs a complete 4-byte length, and the
/// element count must equal `expected`. As upstream, a final element whose declared length runs
/// past the end of the buffer is counted, not rejected (the decoder above still refuses to read
/// it). Returns the exact INVALID_ARG messages, prefixed with `request_prefix`.
inline status validate_bytes_input(std::span<const std::byte> buf, std::int64_t expected,
                                   std::string_view input, std::string_view model,
                                   std::string_view request_prefix = {}) {
  std::int64_t count = 0;
  std::size_t pos = 0;
  // Built only when there is an error to report: validation runs for every BYTES input.
  auto names = [&] {
    return "for inference input '" + std::string(input) + "' for model '" + std::string(model) +
           "'";
  };
  while (pos < buf.size()) {
    std::size_t left = buf.size() - pos;
    if (left < 4)
      return {errc::invalid_arg,
              std::string(request_prefix) + "incomplete string length indicator " + names() +
                  ", expecting 4 bytes but only " + std::to_string(left) +
                  " bytes available. Please make sure the string length indicator is in one "
                  "buffer."};
    std::uint32_t n = detail::load_le32(buf.data() + pos);
    ++count;
    if (count > expected)
      return {errc::invalid_arg, std::string(request_prefix) +
                                     "unexpected number of string elements " +
                                     std::to_string(count) + " " + names() + ", expecting " +
                                     std::to_string(expected)};
    pos += 4 + std::min<std::size_t>(n, left - 4);
  }
  if (count != expected)
    return {errc::invalid_arg, std::string(request_prefix) + "expected " +
                                   std::to_string(expected) + " string elements " + names() +
                                   ", got " + std::to_string(count)};
  return {};
}

}  // namespace inferwire

#endif
