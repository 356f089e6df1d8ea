// SPDX-License-Identifier: Apache-2.0
// inferwire/grpc/client.hpp
//
// The gRPC client: every RPC of inference.GRPCInferenceService (and grpc.health.v1 Check) with
// inferwire's v2 value types, in the same shape as the HTTP client: the same call names, model
// naming, options, result accessors and error_code type, blocking or asynchronous with any Asio
// completion token, on the caller's executor.
//
//   net::io_context ioc;
//   inferwire::grpc::client c(ioc.get_executor(), "localhost:8001");
//
//   // blocking, throwing (any thread; blocking calls do not need `ioc` to run):
//   bool live = c.server_live();
//   // blocking, error_code:
//   grpc::error_code ec;
//   auto meta = c.model_metadata("simple", ec);
//   // asynchronous, with any Asio completion token (callback, use_future, use_awaitable,
//   // deferred, ...); the handler runs on its associated executor (default: the client's):
//   c.async_infer("simple", request, [](grpc::error_code ec, grpc::infer_result r) { ... });
//
//   // bidirectional streaming (ModelStreamInfer):
//   auto s = c.open_stream();
//   co_await s.async_write("simple", request, net::use_awaitable);
//   auto r = co_await s.async_read(net::use_awaitable);
//
// A client built without an executor owns a private io_context that nothing runs: its
// blocking calls work from any thread, and its asynchronous calls need a token that brings
// its own executor (net::use_future, or a handler bound with net::bind_executor). The
// io_context is made when first needed (an asynchronous call, a stream, get_executor()), so a
// program that makes only blocking calls neither builds one nor compiles one.
//
// Threads. Asynchronous unary calls complete on one thread the library starts (named
// "inferwire-grpc", shared by all clients of the process, alive while any client that made such
// a call is); streams complete on gRPC's own threads. The client hands each completion to the
// handler's associated executor with net::dispatch, so handlers run where Asio's rules say (a
// handler bound to net::system_executor() runs on that thread: the cheapest loop of calls).
// Every member function may be called concurrently from any thread.
//
// Deadlines and cancellation. `timeout` (client-wide or per call) is the call's gRPC deadline
// (DEADLINE_EXCEEDED). Asynchronous calls honour Asio's per-operation cancellation (terminal):
// bind a cancellation slot to the token and emit; the call then fails with CANCELLED.
//
// Inputs. Each input travels as its `encoding` says: binary (the default) in
// raw_input_contents, json as typed `contents` (when every input asks for it: the two cannot
// be mixed in one request; FP16/BF16 have no contents field and stay raw), shared_memory as
// the region parameters. The request is encoded when the call starts; the caller's tensors
// may go away afterwards.
//
// Errors. See <inferwire/grpc/error.hpp>: a failed call is an error_code whose message is the
// status message and whose gRPC status is status_code(ec).
#ifndef INFERWIRE_GRPC_CLIENT_HPP
#define INFERWIRE_GRPC_CLIENT_HPP

#include <inferwire/core/config.hpp>
#include <inferwire/grpc/error.hpp>
#include <inferwire/v2/client_types.hpp>
#include <inferwire/v2/detail/client_call.hpp>
#include <inferwire/v2/types.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/compose.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/json/value.hpp>

#include <chrono>
#include <climits>
#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace inferwire::grpc {

namespace net = boost::asio;

/// Metadata sent with calls, in order.
using v2::field_list;
/// How a call names a model: `"simple"` or `{"simple", "2"}`.
using v2::model_id;

/// Compression of request messages.
enum class compression { none, deflate, gzip };

/// Settings of a client, fixed at construction.
struct client_options {
  /// Deadline of every call (0: none); call_options::timeout overrides it per call. For a
  /// stream, the deadline of the whole stream.
  std::chrono::milliseconds timeout{0};
  /// Compression of request messages.
  compression request_compression = compression::none;
  /// Metadata sent with every call.
  field_list headers;

  // --- The channel
  bool tls = false;
  std::string root_certificates;   ///< PEM; empty: the system's roots
  std::string private_key;         ///< PEM, for client authentication
  std::string certificate_chain;   ///< PEM, for client authentication
  /// Largest message received: 256 MiB, far more than a real reply needs and not enough for a
  /// hostile server to make the client use gigabytes (gRPC refuses a larger message from its
  /// length prefix, before reading it: RESOURCE_EXHAUSTED). Raise it for larger outputs.
  int max_message_size = 256 << 20;
  /// Largest message sent (as Triton's clients: no limit of our own).
  int max_send_message_size = INT_MAX;
  std::optional<std::chrono::milliseconds> keepalive_time;
  std::optional<std::chrono::milliseconds> keepalive_timeout;
  bool keepalive_without_calls = false;
  std::map<std::string, int> int_args;  ///< any other channel argument
  std::map<std::string, std::string> string_args;
};

/// Settings of one call; unset members take the client's.
struct call_options {
  std::optional<std::chrono::milliseconds> timeout;
  std::optional<compression> request_compression;
  /// Extra metadata (after the client's). For a stream, `triton_grpc_error: true` makes the
  /// server end the stream at the first error instead of reporting it in the stream.
  field_list headers;
};

namespace detail {
struct result_access;
}

/// The reply to an infer call. Output data are views into the reply message, which the result
/// shares among its copies. Accessors: response(), id(), outputs(), output(name),
/// as<T>(name), strings(name) (see <inferwire/v2/client_types.hpp>).
class infer_result : public v2::infer_result_base {
 public:
  infer_result() = default;

 private:
  friend struct detail::result_access;
  std::shared_ptr<const void> message_;
};

namespace detail {
struct client_state;
struct stream_state;
struct call_data;
/// Deletes a call_data where it is complete (so prepared calls move through translation units
/// that only declare it).
struct call_data_deleter {
  INFERWIRE_DECL void operator()(call_data* p) const noexcept;
};
using call_ptr = std::unique_ptr<call_data, call_data_deleter>;
template <class T>
struct prepared_call {
  call_ptr data;
  T (*parse)(call_data&, error_code&);
};
template <class T>
struct call_op;
template <class Sig>
struct stream_op;
}  // namespace detail

class stream;

/// A client of one server (one gRPC channel).
class client {
 public:
  using executor_type = net::any_io_executor;

  /// A client whose asynchronous calls complete on `ex`; `target` is "host:port" (or any gRPC
  /// target URI).
  INFERWIRE_DECL client(executor_type ex, std::string target, client_options opts = {});
  /// A client with a private io_context (see the top of this header).
  INFERWIRE_DECL explicit client(std::string target, client_options opts = {});

  client(const client&) = delete;
  client& operator=(const client&) = delete;
  client(client&&) noexcept = default;
  client& operator=(client&&) noexcept = default;
  /// Calls still in flight complete normally (they keep the channel alive).
  INFERWIRE_DECL ~client();

  INFERWIRE_DECL executor_type get_executor() const noexcept;
  INFERWIRE_DECL const client_options& options() const noexcept;
  INFERWIRE_DECL const std::string& target() const noexcept;

  // Every call comes in four forms, as in the HTTP client (see
  // <inferwire/v2/detail/client_call.hpp>), shown here for server_live:
  //   bool server_live(const call_options& = {});                  throws on failure
  //   bool server_live(error_code& ec, const call_options& = {});  sets ec
  //   auto async_server_live(Token&& token);                       void(error_code, bool)
  //   auto async_server_live(const call_options&, Token&& token);
  // Calls with no value complete with void(error_code) and return void.

  // --- Health and metadata
  INFERWIRE_CLIENT_CALL(bool, server_live, INFERWIRE_NO_ARGS, INFERWIRE_NO_ARGS)
  INFERWIRE_CLIENT_CALL(bool, server_ready, INFERWIRE_NO_ARGS, INFERWIRE_NO_ARGS)
  INFERWIRE_CLIENT_CALL(bool, model_ready, INFERWIRE_CALL_ARGS(model_id model),
                        INFERWIRE_CALL_ARGS(model))
  /// grpc.health.v1 Check: true when the server reports SERVING.
  INFERWIRE_CLIENT_CALL(bool, health_check, INFERWIRE_NO_ARGS, INFERWIRE_NO_ARGS)
  INFERWIRE_CLIENT_CALL(v2::server_metadata, server_metadata, INFERWIRE_NO_ARGS, INFERWIRE_NO_ARGS)
  INFERWIRE_CLIENT_CALL(v2::model_metadata, model_metadata, INFERWIRE_CALL_ARGS(model_id model),
                        INFERWIRE_CALL_ARGS(model))
  /// The model configuration as protobuf JSON (Triton's ModelConfig, snake_case field names:
  /// the same document the HTTP client's model_config returns).
  INFERWIRE_CLIENT_CALL(boost::json::value, model_config, INFERWIRE_CALL_ARGS(model_id model),
                        INFERWIRE_CALL_ARGS(model))

  // --- Inference
  INFERWIRE_CLIENT_CALL(infer_result, infer,
                        INFERWIRE_CALL_ARGS(model_id model, const v2::infer_request& request),
                        INFERWIRE_CALL_ARGS(model, request))

  // --- Statistics, model repository, shared memory, trace and log settings: the same calls
  // in both clients, listed in <inferwire/v2/detail/client_call.hpp>.
  INFERWIRE_V2_SHARED_CALLS

  // --- Streaming
  /// Opens a bidirectional ModelStreamInfer stream (see `stream`); `o.timeout` bounds the
  /// whole stream.
  INFERWIRE_DECL stream open_stream(const call_options& o = {});

 private:
  template <class T>
  using prepared = detail::prepared_call<T>;

  INFERWIRE_DECL prepared<bool> prepare_server_live(const call_options& o);
  INFERWIRE_DECL prepared<bool> prepare_server_ready(const call_options& o);
  INFERWIRE_DECL prepared<bool> prepare_model_ready(model_id model, const call_options& o);
  INFERWIRE_DECL prepared<bool> prepare_health_check(const call_options& o);
  INFERWIRE_DECL prepared<v2::server_metadata> prepare_server_metadata(const call_options& o);
  INFERWIRE_DECL prepared<v2::model_metadata> prepare_model_metadata(model_id model,
                                                                     const call_options& o);
  INFERWIRE_DECL prepared<boost::json::value> prepare_model_config(model_id model,
                                                                   const call_options& o);
  INFERWIRE_DECL prepared<infer_result> prepare_infer(model_id model,
                                                      const v2::infer_request& request,
                                                      const call_options& o);
  INFERWIRE_DECL prepared<v2::statistics_response> prepare_model_statistics(
      model_id model, const call_options& o);
  INFERWIRE_DECL prepared<std::vector<v2::repository_index_entry>> prepare_repository_index(
      const v2::repository_index_request& request, const call_options& o);
  INFERWIRE_DECL prepared<void> prepare_load_model(std::string_view model,
                                                   const v2::repository_load_request& request,
                                                   const call_options& o);
  INFERWIRE_DECL prepared<void> prepare_unload_model(std::string_view model,
                                                     const v2::repository_unload_request& request,
                                                     const call_options& o);
  INFERWIRE_DECL prepared<void> prepare_register_system_shared_memory(
      const v2::system_shm_register_request& request, const call_options& o);
  INFERWIRE_DECL prepared<std::vector<v2::system_shm_status>> prepare_system_shared_memory_status(
      std::string_view region, const call_options& o);
  INFERWIRE_DECL prepared<void> prepare_unregister_system_shared_memory(std::string_view region,
                                                                        const call_options& o);
  INFERWIRE_DECL prepared<void> prepare_register_cuda_shared_memory(
      const v2::cuda_shm_register_request& request, const call_options& o);
  INFERWIRE_DECL prepared<std::vector<v2::cuda_shm_status>> prepare_cuda_shared_memory_status(
      std::string_view region, const call_options& o);
  INFERWIRE_DECL prepared<void> prepare_unregister_cuda_shared_memory(std::string_view region,
                                                                      const call_options& o);
  INFERWIRE_DECL prepared<v2::trace_settings> prepare_trace_settings(std::string_view model,
                                                                     const call_options& o);
  INFERWIRE_DECL prepared<v2::trace_settings> prepare_update_trace_settings(
      const v2::trace_settings& update, std::string_view model, const call_options& o);
  INFERWIRE_DECL prepared<v2::log_settings> prepare_log_settings(const call_options& o);
  INFERWIRE_DECL prepared<v2::log_settings> prepare_update_log_settings(
      const v2::log_settings& update, const call_options& o);

  template <class T>
  friend struct detail::call_op;

  template <class T, class Token>
  auto start(prepared<T> call, Token&& token);
  /// Runs one prepared call asynchronously; every call of every result type and completion
  /// token runs this one function, compiled once.
  INFERWIRE_DECL static void exchange(std::shared_ptr<detail::client_state> state,
                                      detail::call_ptr call,
                                      net::any_completion_handler<void(error_code, detail::call_ptr)> h);
  /// The blocking forms: the RPC on gRPC's synchronous API, on the calling thread.
  INFERWIRE_DECL error_code run_sync(detail::call_data& call);
  template <class T>
  T run(prepared<T> call) {
    return v2::detail::throwing<error_code>([&](error_code& ec) { return run(std::move(call), ec); }, &throw_if);
  }
  template <class T>
  T run(prepared<T> call, error_code& ec) {
    ec = run_sync(*call.data);
    if constexpr (std::is_void_v<T>) {
      if (!ec) call.parse(*call.data, ec);
    } else {
      if (ec) return T{};
      return call.parse(*call.data, ec);
    }
  }

  std::shared_ptr<detail::client_state> state_;
};

/// A bidirectional ModelStreamInfer stream, from client::open_stream.
///
/// Writes may be started while others are pending: they go out in the order they were
/// started, and each completes once gRPC has taken its message. At most one read (or finish)
/// is pending at a time; a second fails with client_errc::operation_in_progress. A read
/// yields the next response in the order the server sent them. A response that carries an
/// in-stream error (Triton's `error_message`; the stream goes on) completes the read with
/// that error (status UNKNOWN) and the response sent with it (whose id() names the request). When the stream has ended, a read
/// completes with net::error::eof after a clean end, or with the stream's status.
///
/// finish() half-closes, discards responses not yet read, and yields the stream's final
/// status. Destroying a stream that was not finished cancels it.
class stream {
 public:
  using executor_type = net::any_io_executor;

  stream(stream&&) noexcept = default;
  stream& operator=(stream&&) noexcept = default;
  INFERWIRE_DECL ~stream();

  INFERWIRE_DECL executor_type get_executor() const noexcept;

  /// Sends one request (encoded before this returns). Completes with void(error_code).
  template <class Token = net::default_completion_token_t<executor_type>>
  auto async_write(model_id model, const v2::infer_request& request, Token&& token = {}) {
    return start<void(error_code)>(0, encode(model, request), std::forward<Token>(token));
  }
  /// The next response: void(error_code, infer_result).
  template <class Token = net::default_completion_token_t<executor_type>>
  auto async_read(Token&& token = {}) {
    return start<void(error_code, infer_result)>(1, nullptr, std::forward<Token>(token));
  }
  /// Half-closes (no more requests; responses still arrive): void(error_code).
  template <class Token = net::default_completion_token_t<executor_type>>
  auto async_writes_done(Token&& token = {}) {
    return start<void(error_code)>(2, nullptr, std::forward<Token>(token));
  }
  /// Half-closes if needed, discards unread responses, and completes with the stream's final
  /// status: void(error_code).
  template <class Token = net::default_completion_token_t<executor_type>>
  auto async_finish(Token&& token = {}) {
    return start<void(error_code)>(3, nullptr, std::forward<Token>(token));
  }
  /// Cancels the stream: pending and later operations fail with CANCELLED.
  INFERWIRE_DECL void cancel();

  // Blocking forms (any thread that does not run the executor of a pending handler).
  INFERWIRE_DECL void write(model_id model, const v2::infer_request& request);
  INFERWIRE_DECL void write(model_id model, const v2::infer_request& request, error_code& ec);
  INFERWIRE_DECL infer_result read();
  INFERWIRE_DECL infer_result read(error_code& ec);
  INFERWIRE_DECL void writes_done();
  INFERWIRE_DECL void writes_done(error_code& ec);
  INFERWIRE_DECL void finish();
  INFERWIRE_DECL void finish(error_code& ec);

 private:
  friend class client;
  template <class Sig>
  friend struct detail::stream_op;
  explicit stream(std::shared_ptr<detail::stream_state> s) noexcept : state_(std::move(s)) {}

  /// An encoded request, opaque here.
  using encoded = std::shared_ptr<void>;
  INFERWIRE_DECL encoded encode(model_id model, const v2::infer_request& request);

  template <class Sig, class Token>
  auto start(int op, encoded message, Token&& token);
  // The four operations, compiled once (op: 0 write, 1 read, 2 writes done, 3 finish).
  INFERWIRE_DECL static void initiate_write(std::shared_ptr<detail::stream_state> s, encoded m,
                                            net::any_completion_handler<void(error_code)> h);
  INFERWIRE_DECL static void initiate_read(
      std::shared_ptr<detail::stream_state> s,
      net::any_completion_handler<void(error_code, infer_result)> h);
  INFERWIRE_DECL static void initiate_writes_done(std::shared_ptr<detail::stream_state> s,
                                                  net::any_completion_handler<void(error_code)> h);
  INFERWIRE_DECL static void initiate_finish(std::shared_ptr<detail::stream_state> s,
                                             net::any_completion_handler<void(error_code)> h);

  std::shared_ptr<detail::stream_state> state_;
};

}  // namespace inferwire::grpc

namespace inferwire::grpc {
namespace detail {
template <class T>
struct call_op {
  std::shared_ptr<client_state> state;
  prepared_call<T> call;

  template <class Self>
  void operator()(Self& self) {
    // Taken out before `self` (which holds this object) moves into the handler.
    auto st = std::move(state);
    auto data = std::move(call.data);
    client::exchange(std::move(st), std::move(data),
                     net::any_completion_handler<void(error_code, call_ptr)>(std::move(self)));
  }
  template <class Self>
  void operator()(Self& self, error_code ec, call_ptr data) {
    if constexpr (std::is_void_v<T>) {
      if (!ec) call.parse(*data, ec);
      data.reset();
      self.complete(ec);
    } else {
      if (ec) {
        data.reset();
        return self.complete(ec, T{});
      }
      T value = call.parse(*data, ec);
      data.reset();
      self.complete(ec, std::move(value));
    }
  }
};

template <class Sig>
struct stream_op;
template <class... Args>
struct stream_op<void(error_code, Args...)> {
  std::shared_ptr<stream_state> state;
  int op;
  std::shared_ptr<void> message;

  template <class Self>
  void operator()(Self& self) {
    auto st = std::move(state);
    auto m = std::move(message);
    net::any_completion_handler<void(error_code, Args...)> h(std::move(self));
    if constexpr (sizeof...(Args) == 1) {
      stream::initiate_read(std::move(st), std::move(h));
    } else if (op == 0) {
      stream::initiate_write(std::move(st), std::move(m), std::move(h));
    } else if (op == 2) {
      stream::initiate_writes_done(std::move(st), std::move(h));
    } else {
      stream::initiate_finish(std::move(st), std::move(h));
    }
  }
  template <class Self>
  void operator()(Self& self, error_code ec, Args... args) {
    self.complete(ec, std::move(args)...);
  }
};
}  // namespace detail

template <class T, class Token>
auto client::start(prepared<T> call, Token&& token) {
  return net::async_compose<Token, typename v2::detail::completion_signature<error_code, T>::type>(
      detail::call_op<T>{state_, std::move(call)}, token, get_executor());
}

template <class Sig, class Token>
auto stream::start(int op, encoded message, Token&& token) {
  return net::async_compose<Token, Sig>(detail::stream_op<Sig>{state_, op, std::move(message)},
                                        token, get_executor());
}

}  // namespace inferwire::grpc

#if INFERWIRE_HEADER_ONLY
#include <inferwire/grpc/impl/client.hpp>
#endif

#endif
