// SPDX-License-Identifier: Apache-2.0
// inferwire/http/tls_client.hpp
//
// HTTPS: the HTTP client of <inferwire/http/client.hpp> over OpenSSL, with SNI and host-name
// verification.
//
//   net::ssl::context ssl(net::ssl::context::tls_client);
//   ssl.set_default_verify_paths();
//   ssl.set_verify_mode(net::ssl::verify_peer);
//   inferwire::http::tls_client c(ssl, "models.example.com", "443");
//
// Apart from the SSL context the constructors take (it must outlive the client), it is the
// same client: the same calls, options, errors and completion tokens. The TLS headers are kept
// out of client.hpp so that programs speaking plain HTTP do not compile them.
#ifndef INFERWIRE_HTTP_TLS_CLIENT_HPP
#define INFERWIRE_HTTP_TLS_CLIENT_HPP

#include <inferwire/http/client.hpp>

#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/ssl/stream.hpp>

#include <optional>
#include <string>
#include <utility>

namespace inferwire::http {

namespace detail {
template <>
struct transport<net::ssl::stream<net::ip::tcp::socket>> {
  using stream = net::ssl::stream<net::ip::tcp::socket>;
  static constexpr bool tls = true;

  static auto make(const net::any_io_executor& ex, net::ssl::context* ssl) {
    // A new SSL session for every TCP connection.
    return std::unique_ptr<stream, void (*)(stream*)>(new stream(ex, *ssl),
                                                       [](stream* p) { delete p; });
  }
  static net::ip::tcp::socket& lowest(stream& s) noexcept { return s.next_layer(); }

  /// SNI, and the certificate's name checked against `host` when `verify_host_name`.
  static error_code prepare(stream& s, const std::string& host, bool verify_host_name) {
    if (!SSL_set_tlsext_host_name(s.native_handle(), host.c_str()))
      return error_code(static_cast<int>(::ERR_get_error()), net::error::get_ssl_category());
    if (verify_host_name) s.set_verify_callback(net::ssl::host_name_verification(host));
    return {};
  }
  template <class Handler>
  static void async_handshake(stream& s, Handler&& handler) {
    s.async_handshake(net::ssl::stream_base::client, std::forward<Handler>(handler));
  }
};
}  // namespace detail

/// HTTPS through OpenSSL.
using tls_client = basic_client<net::ssl::stream<net::ip::tcp::socket>>;

}  // namespace inferwire::http

#endif
