// SPDX-License-Identifier: Apache-2.0
// inferwire/v2/detail/client_call.hpp — the four forms of a client call, shared by the HTTP and
// the gRPC clients so that both read the same:
//
//   T name(args..., const call_options& = {});                 throws on failure
//   T name(args..., error_code& ec, const call_options& = {});  sets ec
//   auto async_name(args..., Token&& token);                    void(error_code, T)
//   auto async_name(args..., const call_options&, Token&& token);
//
// A client class defines `call_options`, `error_code`, `executor_type`, `run(prepared)`,
// `run(prepared, ec)`, `start<T>(prepared, token)` and one `prepare_name(args..., options)` per
// call; INFERWIRE_CLIENT_CALL writes the four public forms on top of them.
#ifndef INFERWIRE_V2_DETAIL_CLIENT_CALL_HPP
#define INFERWIRE_V2_DETAIL_CLIENT_CALL_HPP

#include <boost/asio/async_result.hpp>

#include <concepts>
#include <system_error>
#include <type_traits>

namespace inferwire::v2::detail {

template <class ErrorCode, class T>
struct completion_signature {
  using type = void(ErrorCode, T);
};
template <class ErrorCode>
struct completion_signature<ErrorCode, void> {
  using type = void(ErrorCode);
};

/// A completion token for a call that yields T, and not the call's options (so that the
/// options argument of the async forms is never taken for a token).
template <class Token, class ErrorCode, class T, class Options>
concept token_for = !std::convertible_to<Token, const Options&> &&
                    boost::asio::completion_token_for<
                        Token, typename completion_signature<ErrorCode, T>::type>;

/// The throwing form of a call from its error_code form: `f(ec)`, then `throw_if(ec)`.
template <class ErrorCode, class F>
auto throwing(F&& f, void (*throw_if)(const ErrorCode&)) {
  ErrorCode ec;
  if constexpr (std::is_void_v<decltype(f(ec))>) {
    f(ec);
    throw_if(ec);
  } else {
    auto value = f(ec);
    throw_if(ec);
    return value;
  }
}

}  // namespace inferwire::v2::detail

// The argument lists: INFERWIRE_CALL_ARGS(a, b) for parameters or arguments, INFERWIRE_NO_ARGS
// for none.
#define INFERWIRE_CALL_ARGS(...) __VA_ARGS__,
#define INFERWIRE_NO_ARGS

#define INFERWIRE_CLIENT_CALL(T, name, params, args)                                          \
  T name(params call_options const& o = {}) { return run(prepare_##name(args o)); }          \
  T name(params error_code& ec, call_options const& o = {}) {                               \
    return run(prepare_##name(args o), ec);                                                  \
  }                                                                                          \
  template <::inferwire::v2::detail::token_for<error_code, T, call_options> Token =          \
                ::boost::asio::default_completion_token_t<executor_type>>                    \
  auto async_##name(params Token&& token = {}) {                                             \
    return start<T>(prepare_##name(args call_options{}), std::forward<Token>(token));        \
  }                                                                                          \
  template <::inferwire::v2::detail::token_for<error_code, T, call_options> Token =          \
                ::boost::asio::default_completion_token_t<executor_type>>                    \
  auto async_##name(params call_options const& o, Token&& token = {}) {                      \
    return start<T>(prepare_##name(args o), std::forward<Token>(token));                     \
  }

#endif
