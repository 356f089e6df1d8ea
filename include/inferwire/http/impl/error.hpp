// SPDX-License-Identifier: Apache-2.0
// inferwire/http/impl/error.hpp — bodies of error.hpp.
#ifndef INFERWIRE_HTTP_IMPL_ERROR_HPP
#define INFERWIRE_HTTP_IMPL_ERROR_HPP

#include <inferwire/core/message_table.hpp>

#include <cstdint>

namespace inferwire::http {
namespace detail {

class client_category_impl final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "inferwire.http.client"; }
  std::string message(int ev) const override {
    switch (static_cast<client_errc>(ev)) {
      case client_errc::bad_response: return "the server's reply could not be understood";
      case client_errc::sync_on_own_executor:
        return "a blocking call was made from a thread that runs the client's executor "
               "(it would wait for itself); use the asynchronous form there";
      case client_errc::client_closed: return "the client was closed";
    }
    return "unknown client error";
  }
};

// A server error code's value holds the HTTP status and the id of its message (see
// core/message_table.hpp): value = status << id_bits | id.
using server_messages = inferwire::detail::message_table;

class server_category_impl final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "inferwire.http.server"; }
  std::string message(int ev) const override {
    if (auto text = server_messages::text_of(ev)) return *text;
    return "HTTP " + std::to_string(server_messages::status_of(ev));
  }
};

}  // namespace detail

INFERWIRE_DECL const boost::system::error_category& client_category() noexcept {
  static const detail::client_category_impl instance;
  return instance;
}

INFERWIRE_DECL const boost::system::error_category& server_category() noexcept {
  static const detail::server_category_impl instance;
  return instance;
}

INFERWIRE_DECL error_code make_server_error(unsigned http_status, std::string_view message) {
  if (http_status > 999) http_status = 999;
  return {detail::server_messages::code_value(http_status, message), server_category()};
}

INFERWIRE_DECL unsigned server_status(const error_code& ec) noexcept {
  if (ec.category() != server_category()) return 0;
  return detail::server_messages::status_of(ec.value());
}

}  // namespace inferwire::http

#endif
