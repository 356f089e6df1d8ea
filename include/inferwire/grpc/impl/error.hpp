// SPDX-License-Identifier: Apache-2.0
// inferwire/grpc/impl/error.hpp — bodies of error.hpp.
#ifndef INFERWIRE_GRPC_IMPL_ERROR_HPP
#define INFERWIRE_GRPC_IMPL_ERROR_HPP

#include <inferwire/core/message_table.hpp>

#include <cstdint>

namespace inferwire::grpc {
namespace detail {

class client_category_impl final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "inferwire.grpc.client"; }
  std::string message(int ev) const override {
    switch (static_cast<client_errc>(ev)) {
      case client_errc::stream_closed: return "the stream is closed for writing";
      case client_errc::operation_in_progress:
        return "another read or finish of this stream is still pending";
    }
    return "unknown client error";
  }
};

// A code's value holds the gRPC status and the id of its message (see core/message_table.hpp):
// value = status << id_bits | id.
using status_messages = inferwire::detail::message_table;

class grpc_category_impl final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "inferwire.grpc"; }
  std::string message(int ev) const override {
    if (auto text = status_messages::text_of(ev)) return *text;
    return "gRPC status " + std::to_string(status_messages::status_of(ev));
  }
};

}  // namespace detail

INFERWIRE_DECL const boost::system::error_category& client_category() noexcept {
  static const detail::client_category_impl instance;
  return instance;
}

INFERWIRE_DECL const boost::system::error_category& grpc_category() noexcept {
  static const detail::grpc_category_impl instance;
  return instance;
}

INFERWIRE_DECL error_code make_error(int code, std::string_view message) {
  return {detail::status_messages::code_value(static_cast<std::uint32_t>(code), message), grpc_category()};
}

INFERWIRE_DECL int status_code(const error_code& ec) noexcept {
  if (ec.category() != grpc_category()) return 0;
  return static_cast<int>(detail::status_messages::status_of(ec.value()));
}

}  // namespace inferwire::grpc

#endif
