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

/// Client input quoted in an error text is cut to `max` bytes (then "..." is appended), so a
/// reply never echoes an unbounded request back. The cut never splits a UTF-8 sequence.
inline constexpr std::size_t max_quoted_input = 256;
/// The longest error text a server sends (the frontends cut longer ones with quote_input).
inline constexpr std::size_t max_error_text = 8192;
inline std::string quote_input(std::string_view s, std::size_t max = max_quoted_input) {
  if (s.size() <= max) return std::string(s);
  std::size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  std::string out(s.substr(0, n));
  out += "...";
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
