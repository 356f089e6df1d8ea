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

// The calls that read the same in every client: statistics, the model repository, shared
// memory, trace and log settings. A client class writes INFERWIRE_V2_SHARED_CALLS in its public
// part, after its own health, metadata and inference calls. Arguments shown as "[= x]" may be
// left out, in all four forms alike.
#define INFERWIRE_V2_SHARED_CALLS                                                               \
  /* --- Statistics (model [= every model]) */                                                \
  INFERWIRE_CLIENT_CALL(v2::statistics_response, model_statistics,                             \
                        INFERWIRE_CALL_ARGS(model_id model), INFERWIRE_CALL_ARGS(model))       \
  INFERWIRE_CLIENT_CALL(v2::statistics_response, model_statistics, INFERWIRE_NO_ARGS,          \
                        INFERWIRE_CALL_ARGS(model_id()))                                       \
  /* --- Model repository (request [= {}]); load_model loads or reloads a model, optionally   \
     with a config override and `file:` contents */                                           \
  INFERWIRE_CLIENT_CALL(std::vector<v2::repository_index_entry>, repository_index,             \
                        INFERWIRE_CALL_ARGS(const v2::repository_index_request& request),      \
                        INFERWIRE_CALL_ARGS(request))                                          \
  INFERWIRE_CLIENT_CALL(std::vector<v2::repository_index_entry>, repository_index,             \
                        INFERWIRE_NO_ARGS, INFERWIRE_CALL_ARGS(v2::repository_index_request{})) \
  INFERWIRE_CLIENT_CALL(void, load_model,                                                      \
                        INFERWIRE_CALL_ARGS(std::string_view model,                            \
                                            const v2::repository_load_request& request),       \
                        INFERWIRE_CALL_ARGS(model, request))                                   \
  INFERWIRE_CLIENT_CALL(void, load_model, INFERWIRE_CALL_ARGS(std::string_view model),         \
                        INFERWIRE_CALL_ARGS(model, v2::repository_load_request{}))             \
  INFERWIRE_CLIENT_CALL(void, unload_model,                                                    \
                        INFERWIRE_CALL_ARGS(std::string_view model,                            \
                                            const v2::repository_unload_request& request),     \
                        INFERWIRE_CALL_ARGS(model, request))                                   \
  INFERWIRE_CLIENT_CALL(void, unload_model, INFERWIRE_CALL_ARGS(std::string_view model),       \
                        INFERWIRE_CALL_ARGS(model, v2::repository_unload_request{}))           \
  /* --- System shared memory (region [= every region]) */                                    \
  INFERWIRE_CLIENT_CALL(void, register_system_shared_memory,                                   \
                        INFERWIRE_CALL_ARGS(const v2::system_shm_register_request& request),   \
                        INFERWIRE_CALL_ARGS(request))                                          \
  INFERWIRE_CLIENT_CALL(std::vector<v2::system_shm_status>, system_shared_memory_status,       \
                        INFERWIRE_CALL_ARGS(std::string_view region), INFERWIRE_CALL_ARGS(region)) \
  INFERWIRE_CLIENT_CALL(std::vector<v2::system_shm_status>, system_shared_memory_status,       \
                        INFERWIRE_NO_ARGS, INFERWIRE_CALL_ARGS(std::string_view()))            \
  INFERWIRE_CLIENT_CALL(void, unregister_system_shared_memory,                                 \
                        INFERWIRE_CALL_ARGS(std::string_view region), INFERWIRE_CALL_ARGS(region)) \
  INFERWIRE_CLIENT_CALL(void, unregister_system_shared_memory, INFERWIRE_NO_ARGS,              \
                        INFERWIRE_CALL_ARGS(std::string_view()))                               \
  /* --- CUDA shared memory (region [= every region]; `raw_handle` holds the 64 raw bytes of a \
     cudaIpcMemHandle_t, which the HTTP client sends base64-encoded) */                        \
  INFERWIRE_CLIENT_CALL(void, register_cuda_shared_memory,                                     \
                        INFERWIRE_CALL_ARGS(const v2::cuda_shm_register_request& request),     \
                        INFERWIRE_CALL_ARGS(request))                                          \
  INFERWIRE_CLIENT_CALL(std::vector<v2::cuda_shm_status>, cuda_shared_memory_status,           \
                        INFERWIRE_CALL_ARGS(std::string_view region), INFERWIRE_CALL_ARGS(region)) \
  INFERWIRE_CLIENT_CALL(std::vector<v2::cuda_shm_status>, cuda_shared_memory_status,           \
                        INFERWIRE_NO_ARGS, INFERWIRE_CALL_ARGS(std::string_view()))            \
  INFERWIRE_CLIENT_CALL(void, unregister_cuda_shared_memory,                                   \
                        INFERWIRE_CALL_ARGS(std::string_view region), INFERWIRE_CALL_ARGS(region)) \
  INFERWIRE_CLIENT_CALL(void, unregister_cuda_shared_memory, INFERWIRE_NO_ARGS,                \
                        INFERWIRE_CALL_ARGS(std::string_view()))                               \
  /* --- Trace settings (model [= global]); updates return the settings in force afterwards */ \
  INFERWIRE_CLIENT_CALL(v2::trace_settings, trace_settings,                                    \
                        INFERWIRE_CALL_ARGS(std::string_view model), INFERWIRE_CALL_ARGS(model)) \
  INFERWIRE_CLIENT_CALL(v2::trace_settings, trace_settings, INFERWIRE_NO_ARGS,                 \
                        INFERWIRE_CALL_ARGS(std::string_view()))                               \
  INFERWIRE_CLIENT_CALL(v2::trace_settings, update_trace_settings,                             \
                        INFERWIRE_CALL_ARGS(const v2::trace_settings& update,                  \
                                            std::string_view model),                           \
                        INFERWIRE_CALL_ARGS(update, model))                                    \
  INFERWIRE_CLIENT_CALL(v2::trace_settings, update_trace_settings,                             \
                        INFERWIRE_CALL_ARGS(const v2::trace_settings& update),                 \
                        INFERWIRE_CALL_ARGS(update, std::string_view()))                       \
  /* --- Log settings */                                                                       \
  INFERWIRE_CLIENT_CALL(v2::log_settings, log_settings, INFERWIRE_NO_ARGS, INFERWIRE_NO_ARGS)  \
  INFERWIRE_CLIENT_CALL(v2::log_settings, update_log_settings,                                 \
                        INFERWIRE_CALL_ARGS(const v2::log_settings& update),                   \
                        INFERWIRE_CALL_ARGS(update))

#endif
