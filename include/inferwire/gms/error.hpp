// SPDX-License-Identifier: Apache-2.0
// inferwire/gms/error.hpp — how GMS reports failures: one exception base, and error codes that
// say the same for the error_code forms of the session and memory-manager calls.
//
//   gms::error                                       kind()
//     connection_error, lock_timeout, server_error   connection_failed, lock_timeout, server_error
//                                                    (gms/session.hpp)
//     stale_memory_layout                            stale_layout (gms/memory_manager.hpp)
//     decode_error                                   decode_error (gms/codec.hpp)
//     cuda_vmm_error                                 cuda_error (gms/cuda_vmm_driver.hpp)
//
// A code from an error_code form is in gms::category(); its message() is the exception's
// what() (the server's text for server errors) and it compares equal to its gms::errc kind:
//
//   std::error_code ec;
//   m.connect(gms::requested_lock_type::ro, ec, 0);
//   if (ec == gms::errc::lock_timeout) ...
//
// Failures of the operating system (mmap, memfd, dup) keep their std::system_error codes.
#ifndef INFERWIRE_GMS_ERROR_HPP
#define INFERWIRE_GMS_ERROR_HPP

#include <inferwire/core/message_table.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>

namespace inferwire::gms {

/// The kinds of GMS failure (error conditions: compare an error_code against them).
enum class errc {
  failed = 1,         ///< a protocol violation or an operation the state does not allow
  connection_failed,  ///< cannot connect, or the connection failed (it is closed)
  lock_timeout,       ///< the server did not grant the lock in time
  server_error,       ///< the server answered with an ErrorResponse
  decode_error,       ///< a message that does not decode
  cuda_error,         ///< a CUDA driver call failed, or there is no usable driver
  stale_layout,       ///< the committed layout does not match the preserved mappings
};

namespace detail {
using error_messages = inferwire::detail::message_table;

inline const char* kind_name(errc e) noexcept {
  switch (e) {
    case errc::failed: return "GMS operation failed";
    case errc::connection_failed: return "GMS connection failed";
    case errc::lock_timeout: return "Timeout waiting for lock";
    case errc::server_error: return "GMS server error";
    case errc::decode_error: return "GMS message could not be decoded";
    case errc::cuda_error: return "CUDA VMM error";
    case errc::stale_layout: return "stale memory layout";
  }
  return "GMS error";
}

// A code's value holds its kind and the id of its text: value = kind << id_bits | id.
class category_impl final : public std::error_category {
 public:
  const char* name() const noexcept override { return "inferwire.gms"; }
  std::string message(int ev) const override {
    if (auto text = error_messages::text_of(ev)) return *text;
    return kind_name(static_cast<errc>(error_messages::status_of(ev)));
  }
  std::error_condition default_error_condition(int ev) const noexcept override {
    return {static_cast<int>(error_messages::status_of(ev)), *this};
  }
};
}  // namespace detail

inline const std::error_category& category() noexcept {
  static const detail::category_impl instance;
  return instance;
}

inline std::error_condition make_error_condition(errc e) noexcept {
  return {static_cast<int>(e), category()};
}

/// A code of kind `e` whose message() is `text`.
inline std::error_code make_error_code(errc e, std::string_view text) {
  return {detail::error_messages::code_value(static_cast<std::uint32_t>(e), text), category()};
}

/// The base of every exception the GMS headers throw.
class error : public std::runtime_error {
 public:
  explicit error(const std::string& what, errc kind = errc::failed) : std::runtime_error(what), kind_(kind) {}
  errc kind() const noexcept { return kind_; }
  /// The same failure as an error code (message() is what()).
  std::error_code code() const { return make_error_code(kind_, what()); }

 private:
  errc kind_;
};

namespace detail {
/// The error_code form of a throwing call: runs `f`, and turns a gms::error or
/// std::system_error it throws into `ec` (the result is then value-initialised).
template <class F>
auto capture(std::error_code& ec, F&& f) -> decltype(f()) {
  ec.clear();
  try {
    return f();
  } catch (const error& e) {
    ec = e.code();
  } catch (const std::system_error& e) {
    ec = e.code();
  }
  if constexpr (!std::is_void_v<decltype(f())>) return decltype(f()){};
}
}  // namespace detail

}  // namespace inferwire::gms

template <>
struct std::is_error_condition_enum<inferwire::gms::errc> : std::true_type {};

#endif
