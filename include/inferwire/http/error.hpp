// SPDX-License-Identifier: Apache-2.0
// inferwire/http/error.hpp
//
// How the HTTP client reports errors. Every failure is a boost::system::error_code:
//
// - transport failures keep Asio's and Beast's codes (connection refused, eof, timeout, ...);
// - the client's own failures use `client_errc` (category "inferwire.http.client");
// - an error reply from the server is a code in the "inferwire.http.server" category that
//   carries both the HTTP status and the server's message: `ec.message()` is the server's text
//   (e.g. "Request for unknown model: 'foo' is not found"), `server_status(ec)` is 404 and
//   `server_errc(ec)` is inferwire::errc::not_found.
//
// The throwing forms throw `server_error` for server replies (its what() is the server's text)
// and boost::system::system_error for everything else; server_error derives from it.
#ifndef INFERWIRE_HTTP_ERROR_HPP
#define INFERWIRE_HTTP_ERROR_HPP

#include <inferwire/core/config.hpp>
#include <inferwire/core/error.hpp>

#include <boost/system/error_code.hpp>
#include <boost/system/system_error.hpp>

#include <string>
#include <string_view>
#include <type_traits>

namespace inferwire::http {

using error_code = boost::system::error_code;

/// Failures detected by the client itself.
enum class client_errc {
  bad_response = 1,       ///< the reply could not be understood (malformed JSON or binary framing)
  sync_on_own_executor,   ///< a blocking call was made from a thread running the client's executor
  client_closed,          ///< the client was closed while the call waited
};

INFERWIRE_DECL const boost::system::error_category& client_category() noexcept;

inline error_code make_error_code(client_errc e) noexcept {
  return {static_cast<int>(e), client_category()};
}

/// The category of server error replies.
INFERWIRE_DECL const boost::system::error_category& server_category() noexcept;

/// A code in server_category() for an HTTP error reply with the given status and message.
INFERWIRE_DECL error_code make_server_error(unsigned http_status, std::string_view message);

/// The HTTP status of a server error reply, or 0 when `ec` is not one.
INFERWIRE_DECL unsigned server_status(const error_code& ec) noexcept;

/// The inferwire status class of a server error reply (from its HTTP status as the spec maps
/// them: 400 invalid_arg, 404 not_found, 500 internal, 501 unsupported, 503 unavailable,
/// anything else unknown); errc{} when `ec` is not a server error.
inline errc server_errc(const error_code& ec) noexcept {
  unsigned s = server_status(ec);
  return s == 0 ? errc{} : from_http_status(static_cast<int>(s));
}

/// Thrown by the throwing forms for a server error reply.
class server_error : public boost::system::system_error {
 public:
  explicit server_error(const error_code& ec)
      : boost::system::system_error(ec), message_(ec.message()) {}
  const char* what() const noexcept override { return message_.c_str(); }
  unsigned http_status() const noexcept { return server_status(code()); }
  errc status_class() const noexcept { return server_errc(code()); }
  /// The server's message.
  const std::string& message() const noexcept { return message_; }

 private:
  std::string message_;
};

/// Throws server_error or boost::system::system_error when `ec` is set.
inline void throw_if(const error_code& ec) {
  if (!ec) return;
  if (server_status(ec) != 0) throw server_error(ec);
  throw boost::system::system_error(ec);
}

}  // namespace inferwire::http

template <>
struct boost::system::is_error_code_enum<inferwire::http::client_errc> : std::true_type {};

#if INFERWIRE_HEADER_ONLY
#include <inferwire/http/impl/error.hpp>
#endif

#endif
