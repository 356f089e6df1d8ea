// SPDX-License-Identifier: Apache-2.0
// inferwire/grpc/error.hpp
//
// How the gRPC client reports errors. Every failure is a boost::system::error_code, as in the
// HTTP client:
//
// - a call that ends with a gRPC status other than OK (from the server, or from the channel:
//   UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED, ...) is a code in the "inferwire.grpc" category
//   that carries both the status code and its message: `ec.message()` is the server's text,
//   `status_code(ec)` the gRPC status code and `server_errc(ec)` the inferwire status class;
// - the client's own failures use `client_errc`; the end of a stream is
//   boost::asio::error::eof.
//
// The throwing forms throw `rpc_error` for a gRPC status (its what() is the status message)
// and boost::system::system_error for everything else; rpc_error derives from it.
#ifndef INFERWIRE_GRPC_ERROR_HPP
#define INFERWIRE_GRPC_ERROR_HPP

#include <inferwire/core/config.hpp>
#include <inferwire/core/error.hpp>

#include <boost/system/error_code.hpp>
#include <boost/system/system_error.hpp>

#include <string>
#include <string_view>
#include <type_traits>

namespace inferwire::grpc {

using error_code = boost::system::error_code;

/// Failures detected by the client itself.
enum class client_errc {
  stream_closed = 1,      ///< a write after the stream was half-closed or had ended
  operation_in_progress,  ///< a second read (or finish) started while one is pending
};

INFERWIRE_DECL const boost::system::error_category& client_category() noexcept;

inline error_code make_error_code(client_errc e) noexcept {
  return {static_cast<int>(e), client_category()};
}

/// The category of calls that ended with a gRPC status other than OK.
INFERWIRE_DECL const boost::system::error_category& grpc_category() noexcept;

/// A code in grpc_category() for gRPC status `code` (a grpc::StatusCode value) and `message`.
INFERWIRE_DECL error_code make_error(int code, std::string_view message);

/// The gRPC status code of `ec`, or 0 (OK) when `ec` is not in grpc_category().
INFERWIRE_DECL int status_code(const error_code& ec) noexcept;

/// The inferwire status class of a failed call (UNAVAILABLE and DEADLINE_EXCEEDED are
/// unavailable, as Triton maps them); errc{} when `ec` is not in grpc_category().
inline errc server_errc(const error_code& ec) noexcept {
  if (ec.category() != grpc_category()) return errc{};
  return from_grpc_code(static_cast<grpc_status_code>(status_code(ec)));
}

/// Thrown by the throwing forms for a call that ended with a gRPC status.
class rpc_error : public boost::system::system_error {
 public:
  explicit rpc_error(const error_code& ec) : boost::system::system_error(ec), message_(ec.message()) {}
  const char* what() const noexcept override { return message_.c_str(); }
  /// The gRPC status code.
  int grpc_code() const noexcept { return status_code(code()); }
  errc status_class() const noexcept { return server_errc(code()); }
  /// The status message.
  const std::string& message() const noexcept { return message_; }

 private:
  std::string message_;
};

/// Throws rpc_error or boost::system::system_error when `ec` is set.
inline void throw_if(const error_code& ec) {
  if (!ec) return;
  if (ec.category() == grpc_category()) throw rpc_error(ec);
  throw boost::system::system_error(ec);
}

}  // namespace inferwire::grpc

template <>
struct boost::system::is_error_code_enum<inferwire::grpc::client_errc> : std::true_type {};

#if INFERWIRE_HEADER_ONLY
#include <inferwire/grpc/impl/error.hpp>
#endif

#endif
