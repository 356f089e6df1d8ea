// SPDX-License-Identifier: Apache-2.0
// inferwire/core/error.hpp
//
// Error codes of the KServe v2 / Triton protocol, their std::error_category, and the one
// table that maps each code to an HTTP status and a gRPC status code (v2-protocol §0.2).
//
// Errors in inferwire are never "only strings": a `status` carries an `errc` *and* the exact
// message the protocol prescribes; `error` is the exception form of the same pair.
#ifndef INFERWIRE_CORE_ERROR_HPP
#define INFERWIRE_CORE_ERROR_HPP

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>

namespace inferwire {

/// The error codes of TRITONSERVER_Error. Zero is success, as for every error_code enum.
enum class errc {
  internal = 1,
  not_found,
  unavailable,
  unsupported,
  invalid_arg,
  already_exists,
  cancelled,
  unknown,
};

/// gRPC status codes (numeric values of grpc::StatusCode; no gRPC header needed here).
enum class grpc_status_code : int {
  ok = 0,
  cancelled = 1,
  unknown = 2,
  invalid_argument = 3,
  deadline_exceeded = 4,
  not_found = 5,
  already_exists = 6,
  permission_denied = 7,
  resource_exhausted = 8,
  failed_precondition = 9,
  aborted = 10,
  out_of_range = 11,
  unimplemented = 12,
  internal = 13,
  unavailable = 14,
  data_loss = 15,
  unauthenticated = 16,
};

/// The category of `errc`. Its name is "inferwire".
const std::error_category& error_category() noexcept;

inline std::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), error_category()};
}

/// HTTP status for a code (v2-protocol §0.2): 500, 404, 503, 501, 400, 400, 400, 400.
constexpr int http_status(errc e) noexcept {
  switch (e) {
    case errc::internal: return 500;
    case errc::not_found: return 404;
    case errc::unavailable: return 503;
    case errc::unsupported: return 501;
    case errc::invalid_arg:
    case errc::already_exists:
    case errc::cancelled:
    case errc::unknown: return 400;
  }
  return 500;
}

/// gRPC status code for a code (v2-protocol §0.2).
constexpr grpc_status_code grpc_code(errc e) noexcept {
  switch (e) {
    case errc::internal: return grpc_status_code::internal;
    case errc::not_found: return grpc_status_code::not_found;
    case errc::unavailable: return grpc_status_code::unavailable;
    case errc::unsupported: return grpc_status_code::unimplemented;
    case errc::invalid_arg: return grpc_status_code::invalid_argument;
    case errc::already_exists: return grpc_status_code::already_exists;
    case errc::cancelled: return grpc_status_code::cancelled;
    case errc::unknown: return grpc_status_code::unknown;
  }
  return grpc_status_code::internal;
}

/// The code a gRPC status maps back to (the client side of the same table). Codes the table
/// does not produce map to `errc::unknown`, except DEADLINE_EXCEEDED which maps to unavailable.
constexpr errc from_grpc_code(grpc_status_code c) noexcept {
  switch (c) {
    case grpc_status_code::internal: return errc::internal;
    case grpc_status_code::not_found: return errc::not_found;
    case grpc_status_code::unavailable:
    case grpc_status_code::deadline_exceeded: return errc::unavailable;
    case grpc_status_code::unimplemented: return errc::unsupported;
    case grpc_status_code::invalid_argument: return errc::invalid_arg;
    case grpc_status_code::already_exists: return errc::already_exists;
    case grpc_status_code::cancelled: return errc::cancelled;
    default: return errc::unknown;
  }
}

/// The code an HTTP error status maps back to. 400 is ambiguous on the wire and reads as
/// invalid_arg; statuses outside the table read as unknown.
constexpr errc from_http_status(int status) noexcept {
  switch (status) {
    case 500: return errc::internal;
    case 404: return errc::not_found;
    case 503: return errc::unavailable;
    case 501: return errc::unsupported;
    case 400: return errc::invalid_arg;
    default: return errc::unknown;
  }
}

/// Triton's name of a code ("Internal", "Not found", ...).
constexpr std::string_view to_string(errc e) noexcept {
  switch (e) {
    case errc::internal: return "Internal";
    case errc::not_found: return "Not found";
    case errc::unavailable: return "Unavailable";
    case errc::unsupported: return "Unsupported";
    case errc::invalid_arg: return "Invalid argument";
    case errc::already_exists: return "Already exists";
    case errc::cancelled: return "Cancelled";
    case errc::unknown: return "Unknown";
  }
  return "Unknown";
}

/// A code and the protocol's message for it. A default-constructed status is success.
class status {
 public:
  status() = default;
  status(errc code, std::string message) : code_(code), message_(std::move(message)) {}

  static status ok() { return {}; }

  bool is_ok() const noexcept { return code_ == errc{}; }
  explicit operator bool() const noexcept { return !is_ok(); }  ///< true when it is an error

  errc code() const noexcept { return code_; }
  std::error_code error_code() const noexcept {
    return is_ok() ? std::error_code{} : make_error_code(code_);
  }
  const std::string& message() const noexcept { return message_; }
  int http_status() const noexcept { return is_ok() ? 200 : inferwire::http_status(code_); }
  grpc_status_code grpc_code() const noexcept {
    return is_ok() ? grpc_status_code::ok : inferwire::grpc_code(code_);
  }

  /// Prepends `prefix` to the message, keeping the code (Triton's "Unable to parse 'x': ").
  status& prefix(std::string_view prefix) {
    message_.insert(0, prefix);
    return *this;
  }

  friend bool operator==(const status& a, const status& b) noexcept {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  errc code_{};
  std::string message_;
};

/// The exception form of a failed `status`. what() is exactly the protocol message.
class error : public std::system_error {
 public:
  explicit error(status s)
      : std::system_error(make_error_code(s.code()), s.message()), status_(std::move(s)) {}
  error(errc code, std::string message) : error(status(code, std::move(message))) {}

  const char* what() const noexcept override { return status_.message().c_str(); }
  const inferwire::status& get_status() const noexcept { return status_; }
  errc errc_code() const noexcept { return status_.code(); }

 private:
  inferwire::status status_;
};

/// Throws `error` when `s` is a failure.
/// Whether a system error (an errno value) means the process or the system ran out of a
/// resource: descriptors, memory, buffers. An accept loop that sees one pauses before trying
/// again instead of spinning on the connection still waiting in the backlog.
constexpr bool is_resource_exhaustion(int errno_value) noexcept {
  return errno_value == EMFILE || errno_value == ENFILE || errno_value == ENOBUFS ||
         errno_value == ENOMEM;
}

namespace detail {
/// The length of the well-formed UTF-8 sequence that starts at `p` (1 to 4 bytes), or 0 when
/// none does: overlong forms, surrogates, code points past U+10FFFF, stray continuation bytes
/// and sequences cut short are not well-formed.
constexpr std::size_t utf8_sequence(const unsigned char* p, const unsigned char* end) noexcept {
  const unsigned c = *p;
  if (c < 0x80) return 1;
  std::size_t n = 0;
  unsigned lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) n = 1;
  else if (c == 0xE0) n = 2, lo = 0xA0;
  else if (c == 0xED) n = 2, hi = 0x9F;
  else if (c >= 0xE1 && c <= 0xEF) n = 2;
  else if (c == 0xF0) n = 3, lo = 0x90;
  else if (c == 0xF4) n = 3, hi = 0x8F;
  else if (c >= 0xF1 && c <= 0xF3) n = 3;
  else return 0;
  if (static_cast<std::size_t>(end - p) <= n || p[1] < lo || p[1] > hi) return 0;
  for (std::size_t k = 2; k <= n; ++k)
    if ((p[k] & 0xC0) != 0x80) return 0;
  return n + 1;
}
}  // namespace detail

/// Whether `s` is well-formed UTF-8 (what JSON text must be).
inline bool valid_utf8(std::string_view s) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = p + s.size();
  while (p < end) {
    const std::size_t n = detail::utf8_sequence(p, end);
    if (n == 0) return false;
    p += n;
  }
  return true;
}

/// Client input quoted in an error text is cut to `max` bytes (then "..." is appended), so a
/// reply never echoes an unbounded request back. The cut never splits a UTF-8 sequence, and
/// every byte that is not part of well-formed UTF-8 (a URL may carry any byte) becomes U+FFFD,
/// so that the text can always travel in JSON and in protobuf strings.
inline constexpr std::size_t max_quoted_input = 256;
/// The longest error text a server sends (the frontends cut longer ones with quote_input).
inline constexpr std::size_t max_error_text = 8192;
inline std::string quote_input(std::string_view s, std::size_t max = max_quoted_input) {
  if (s.size() <= max && valid_utf8(s)) return std::string(s);
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = p + s.size();
  std::string out;
  out.reserve(std::min(s.size(), max) + 3);
  for (std::size_t at = 0; at < s.size();) {
    const std::size_t n = detail::utf8_sequence(p + at, end);
    if (at + (n ? n : 1) > max) return out += "...";
    if (n) out.append(s.data() + at, n);
    else out += "\xEF\xBF\xBD";  // U+FFFD REPLACEMENT CHARACTER
    at += n ? n : 1;
  }
  return out;
}

inline void throw_if(const status& s) {
  if (!s.is_ok()) throw error(s);
}

namespace detail {
class error_category_impl final : public std::error_category {
 public:
  const char* name() const noexcept override { return "inferwire"; }
  std::string message(int ev) const override {
    if (ev == 0) return "Success";
    return std::string(to_string(static_cast<errc>(ev)));
  }
};
}  // namespace detail

inline const std::error_category& error_category() noexcept {
  static const detail::error_category_impl instance;
  return instance;
}

}  // namespace inferwire

template <>
struct std::is_error_code_enum<inferwire::errc> : std::true_type {};

#endif
