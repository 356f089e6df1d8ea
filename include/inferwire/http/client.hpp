// SPDX-License-Identifier: Apache-2.0
// inferwire/http/client.hpp
//
// The KServe v2 / Triton HTTP client: every endpoint, blocking or asynchronous, on the
// caller's io_context. Plain TCP here; HTTPS (`tls_client`) in <inferwire/http/tls_client.hpp>.
//
//   net::io_context ioc;
//   inferwire::http::client c(ioc.get_executor(), "localhost", "8000");
//
//   // blocking, throwing: (only from a thread that is not running `ioc`)
//   bool live = c.server_live();
//   // blocking, error_code:
//   http::error_code ec;
//   auto meta = c.model_metadata("simple", ec);
//   // asynchronous, with any Asio completion token (callback, use_future, use_awaitable,
//   // deferred, ...):
//   c.async_infer("simple", request, [](http::error_code ec, http::infer_result r) { ... });
//
// A client built without an executor starts no thread; use that form for blocking programs.
// Blocking calls over plain HTTP do their I/O on the calling thread with plain descriptors
// (poll(2) bounded by the deadline); over TLS they run the asynchronous exchange on a private
// io_context and wait. That io_context is made when first needed (a TLS call, an asynchronous
// call, get_executor()): a program that makes only plain blocking calls compiles none.
//
// Connections. The client keeps up to `client_options::max_connections` keep-alive connections
// and reconnects transparently: a call that finds its reused connection closed by the server
// before any byte of the reply arrived is sent again once on a new connection. Calls beyond
// the pool size wait in FIFO order for a free connection. Every member function may be called
// concurrently from any thread.
//
// Timeouts and cancellation. `timeout` (client-wide or per call) is a deadline for the whole
// call: waiting for a connection, connecting, the TLS handshake, sending and receiving. It
// fails the call with boost::beast::error::timeout. Asynchronous calls honour Asio's
// per-operation cancellation (terminal): bind a cancellation slot to the token
// (`net::bind_cancellation_slot(signal.slot(), token)`) and emit; the call then completes with
// net::error::operation_aborted. A timed-out or cancelled call's connection is closed.
//
// Lifetimes. Request tensors that are views (v2::make_input from a span) are written straight
// from the caller's memory, so they must stay valid until the call completes. An
// infer_result's output views point into the reply body it holds, so they stay valid as long
// as the result (or a copy of it) lives.
//
// Errors. See <inferwire/http/error.hpp>: a server error reply is an error_code whose message
// is the server's text and whose HTTP status is server_status(ec).
#ifndef INFERWIRE_HTTP_CLIENT_HPP
#define INFERWIRE_HTTP_CLIENT_HPP

#include <inferwire/core/config.hpp>
#include <inferwire/http/compression.hpp>
#include <inferwire/http/error.hpp>
#include <inferwire/v2/binary.hpp>
#include <inferwire/v2/client_types.hpp>
#include <inferwire/v2/detail/client_call.hpp>
#include <inferwire/v2/json.hpp>
#include <inferwire/v2/tensor.hpp>
#include <inferwire/v2/types.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/compose.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/error.hpp>  // beast::error::timeout, the deadline's error
#include <boost/json/value.hpp>

#include <chrono>
#include <concepts>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace boost::asio::ssl {
class context;
}

namespace inferwire::http {

namespace net = boost::asio;

/// Header fields or query parameters, in order (names may repeat).
using v2::field_list;
/// How a call names a model: `"simple"` or `{"simple", "2"}`.
using v2::model_id;

/// Settings of a client, fixed at construction.
struct client_options {
  /// Keep-alive connections at most; concurrent calls beyond this wait for a free one.
  std::size_t max_connections = 1;
  /// Deadline of every call (0: none); call_options::timeout overrides it per call.
  std::chrono::milliseconds timeout{0};
  /// Compression of request bodies (infer and every POST with a body).
  content_coding request_compression = content_coding::identity;
  /// Compression asked of the server for replies (Accept-Encoding).
  content_coding response_compression = content_coding::identity;
  /// Largest reply body accepted (after decompression, and for a collected generate_stream
  /// the whole stream), in bytes: 256 MiB, far more than a real reply needs and not enough for
  /// a hostile server to make the client use gigabytes (a reply takes about its own size in
  /// memory while it arrives). Raise it for models whose outputs are larger.
  std::size_t max_response_size = std::size_t{256} << 20;
  /// Header fields sent with every call.
  field_list headers;
  /// TLS only: check that the server's certificate names the host (when the SSL context
  /// verifies peers at all; see net::ssl::context::set_verify_mode).
  bool verify_host_name = true;
};

/// Settings of one call; unset members take the client's.
struct call_options {
  std::optional<std::chrono::milliseconds> timeout;
  std::optional<content_coding> request_compression;
  std::optional<content_coding> response_compression;
  /// Extra header fields (after the client's).
  field_list headers;
  /// Query parameters, percent-encoded by the client.
  field_list query;
};

/// The reply to an infer call. Output data are views into the reply body, which the result
/// shares among its copies; nothing is copied out of the body. Accessors: response(), id(),
/// outputs(), output(name), as<T>(name), strings(name) (see <inferwire/v2/client_types.hpp>).
class infer_result : public v2::infer_result_base {
 public:
  infer_result() = default;

  /// The reply body as received (after decompression).
  std::string_view body() const noexcept { return body_ ? std::string_view(*body_) : ""; }

  /// Decodes a reply body (used by the client; public for tests and custom transports).
  static infer_result decode(std::string body, std::optional<std::size_t> header_length,
                             status& st);

 private:
  std::shared_ptr<const std::string> body_;
};

namespace detail {
template <class Stream>
struct client_state;
/// What the client needs of a transport: `tls`, `make(executor, ssl context*)` (a new stream,
/// owned through a function pointer), `lowest(Stream&)` (the TCP socket) and, for TLS,
/// `prepare` and `async_handshake`. Plain TCP below; TLS in <inferwire/http/tls_client.hpp>.
template <class Stream>
struct transport;
template <>
struct transport<net::ip::tcp::socket> {
  static constexpr bool tls = false;
  static auto make(const net::any_io_executor& ex, net::ssl::context*) {
    return std::unique_ptr<net::ip::tcp::socket, void (*)(net::ip::tcp::socket*)>(
        new net::ip::tcp::socket(ex), [](net::ip::tcp::socket* p) { delete p; });
  }
  static net::ip::tcp::socket& lowest(net::ip::tcp::socket& s) noexcept { return s; }
};
struct call_data;
/// Deletes a call_data where it is complete (so prepared calls move through translation units
/// that only declare it).
struct call_data_deleter {
  INFERWIRE_DECL void operator()(call_data* p) const noexcept;
};
using call_ptr = std::unique_ptr<call_data, call_data_deleter>;
/// A reply as the parser of each endpoint sees it.
struct reply {
  unsigned status = 0;
  std::string body;
  std::optional<std::size_t> header_length;  // Inference-Header-Content-Length
  // A collected generate_stream: its events, parsed as they arrived (the body is not kept).
  bool events_collected = false;
  std::vector<boost::json::object> events;
};
template <class T>
using reply_parser = T (*)(reply&, error_code&);
template <class T>
struct prepared_call {
  call_ptr data;
  reply_parser<T> parse;
};
template <class Stream, class T>
struct call_op;
}  // namespace detail

/// A client of one server over `Stream`: net::ip::tcp::socket (plain HTTP, `client`) or
/// net::ssl::stream<net::ip::tcp::socket> (HTTPS, `tls_client`, from
/// <inferwire/http/tls_client.hpp>).
template <class Stream>
class basic_client {
 public:
  using executor_type = net::any_io_executor;
  using stream_type = Stream;
  static constexpr bool is_tls = detail::transport<Stream>::tls;

  /// A client whose calls run on `ex`.
  basic_client(executor_type ex, std::string host, std::string port, client_options opts = {})
    requires(!detail::transport<Stream>::tls);
  /// A blocking client (a private io_context, made when first needed: TLS calls run it on the
  /// calling thread).
  basic_client(std::string host, std::string port, client_options opts = {})
    requires(!detail::transport<Stream>::tls);
  /// TLS: the same, with the SSL context used for every connection (it must outlive the client).
  basic_client(executor_type ex, net::ssl::context& ssl, std::string host, std::string port,
               client_options opts = {})
    requires(detail::transport<Stream>::tls);
  basic_client(net::ssl::context& ssl, std::string host, std::string port,
               client_options opts = {})
    requires(detail::transport<Stream>::tls);

  basic_client(const basic_client&) = delete;
  basic_client& operator=(const basic_client&) = delete;
  basic_client(basic_client&&) noexcept = default;
  basic_client& operator=(basic_client&&) noexcept = default;
  /// Closes every connection. Calls still in flight complete with an error.
  ~basic_client();

  executor_type get_executor() const noexcept;
  const client_options& options() const noexcept;
  /// Closes idle connections and fails calls waiting for a connection with
  /// client_errc::client_closed; later calls open new connections.
  void close();
  /// Connections currently open (idle or in use).
  std::size_t open_connections() const;

  // Every call comes in four forms, shown here for server_live:
  //   bool server_live(const call_options& = {});                  throws on failure
  //   bool server_live(error_code& ec, const call_options& = {});  sets ec
  //   auto async_server_live(Token&& token);                       void(error_code, bool)
  //   auto async_server_live(const call_options&, Token&& token);
  // Calls with no value complete with void(error_code) and return void. Arguments that may be
  // left out (shown as "[= x]" below) are left out in all four forms alike.

  // --- Health and metadata (true/false from 200/400; other replies are errors)
  INFERWIRE_CLIENT_CALL(bool, server_live, INFERWIRE_NO_ARGS, INFERWIRE_NO_ARGS)
  INFERWIRE_CLIENT_CALL(bool, server_ready, INFERWIRE_NO_ARGS, INFERWIRE_NO_ARGS)
  INFERWIRE_CLIENT_CALL(bool, model_ready, INFERWIRE_CALL_ARGS(model_id model), INFERWIRE_CALL_ARGS(model))
  INFERWIRE_CLIENT_CALL(v2::server_metadata, server_metadata, INFERWIRE_NO_ARGS, INFERWIRE_NO_ARGS)
  INFERWIRE_CLIENT_CALL(v2::model_metadata, model_metadata, INFERWIRE_CALL_ARGS(model_id model),
                      INFERWIRE_CALL_ARGS(model))
  /// The model configuration in Triton's ModelConfig JSON form.
  INFERWIRE_CLIENT_CALL(boost::json::value, model_config, INFERWIRE_CALL_ARGS(model_id model),
                      INFERWIRE_CALL_ARGS(model))

  // --- Inference. Each input travels as its `encoding` says (JSON, binary, or shared
  // memory); a raw binary request (request.raw_binary) sends request.raw_input alone.
  INFERWIRE_CLIENT_CALL(infer_result, infer,
                      INFERWIRE_CALL_ARGS(model_id model, const v2::infer_request& request),
                      INFERWIRE_CALL_ARGS(model, request))

  // --- Triton's generate extension (HTTP only). `request` is the flat generate object: keys
  // naming the model's inputs are tensors (a scalar or a flat array), `id` is the request id,
  // other keys are parameters.
  /// The reply object of /generate (`model_name`, `model_version`, one key per output).
  INFERWIRE_CLIENT_CALL(boost::json::object, generate,
                      INFERWIRE_CALL_ARGS(model_id model, const boost::json::object& request),
                      INFERWIRE_CALL_ARGS(model, request))
  /// The objects of /generate_stream's events, in order, once the stream has ended. A failure
  /// after the first event is one more object, `{"error":"<message>"}`, as the server sent it.
  INFERWIRE_CLIENT_CALL(std::vector<boost::json::object>, generate_stream,
                      INFERWIRE_CALL_ARGS(model_id model, const boost::json::object& request),
                      INFERWIRE_CALL_ARGS(model, request))
  /// /generate_stream event by event: `on_event` gets each event's object as it arrives (on
  /// the thread that runs the call: the caller's for the blocking forms, the client's executor
  /// for the asynchronous ones), then the call completes. Nothing of the stream is kept, so it
  /// may run for as long as the model produces. `on_event` must not throw (an exception fails
  /// the call with client_errc::bad_response).
  INFERWIRE_CLIENT_CALL(void, generate_stream,
                      INFERWIRE_CALL_ARGS(model_id model, const boost::json::object& request,
                                          std::function<void(boost::json::object&&)> on_event),
                      INFERWIRE_CALL_ARGS(model, request, std::move(on_event)))

  // --- Statistics, model repository, shared memory, trace and log settings: the same calls
  // in both clients, listed in <inferwire/v2/detail/client_call.hpp>.
  INFERWIRE_V2_SHARED_CALLS

 private:
  using state_type = detail::client_state<Stream>;

  template <class T>
  using prepared = detail::prepared_call<T>;

  prepared<bool> prepare_server_live(const call_options& o);
  prepared<bool> prepare_server_ready(const call_options& o);
  prepared<bool> prepare_model_ready(model_id model, const call_options& o);
  prepared<v2::server_metadata> prepare_server_metadata(const call_options& o);
  prepared<v2::model_metadata> prepare_model_metadata(model_id model, const call_options& o);
  prepared<boost::json::value> prepare_model_config(model_id model, const call_options& o);
  prepared<infer_result> prepare_infer(model_id model, const v2::infer_request& request,
                                       const call_options& o);
  prepared<boost::json::object> prepare_generate(model_id model, const boost::json::object& request,
                                                 const call_options& o);
  prepared<std::vector<boost::json::object>> prepare_generate_stream(model_id model,
                                                                     const boost::json::object& request,
                                                                     const call_options& o);
  prepared<void> prepare_generate_stream(model_id model, const boost::json::object& request,
                                        std::function<void(boost::json::object&&)> on_event,
                                        const call_options& o);
  prepared<v2::statistics_response> prepare_model_statistics(model_id model,
                                                             const call_options& o);
  prepared<std::vector<v2::repository_index_entry>> prepare_repository_index(
      const v2::repository_index_request& request, const call_options& o);
  prepared<void> prepare_load_model(std::string_view model,
                                    const v2::repository_load_request& request,
                                    const call_options& o);
  prepared<void> prepare_unload_model(std::string_view model,
                                      const v2::repository_unload_request& request,
                                      const call_options& o);
  prepared<void> prepare_register_system_shared_memory(
      const v2::system_shm_register_request& request, const call_options& o);
  prepared<std::vector<v2::system_shm_status>> prepare_system_shared_memory_status(
      std::string_view region, const call_options& o);
  prepared<void> prepare_unregister_system_shared_memory(std::string_view region,
                                                         const call_options& o);
  prepared<void> prepare_register_cuda_shared_memory(
      const v2::cuda_shm_register_request& request, const call_options& o);
  prepared<std::vector<v2::cuda_shm_status>> prepare_cuda_shared_memory_status(
      std::string_view region, const call_options& o);
  prepared<void> prepare_unregister_cuda_shared_memory(std::string_view region,
                                                       const call_options& o);
  prepared<v2::trace_settings> prepare_trace_settings(std::string_view model,
                                                      const call_options& o);
  prepared<v2::trace_settings> prepare_update_trace_settings(const v2::trace_settings& update,
                                                             std::string_view model,
                                                             const call_options& o);
  prepared<v2::log_settings> prepare_log_settings(const call_options& o);
  prepared<v2::log_settings> prepare_update_log_settings(const v2::log_settings& update,
                                                         const call_options& o);

  template <class S, class T>
  friend struct detail::call_op;

  /// A call: the exchange below, then the reply parsed into T; small, per result type and
  /// completion token.
  template <class T, class Token>
  auto start(prepared<T> call, Token&& token);
  /// One request and its reply over a pooled connection (waiting for a connection, connecting,
  /// TLS, retrying a stale one, deadlines): every call of every result type and completion
  /// token runs this one operation, so it is compiled once per stream type.
  static void exchange(std::shared_ptr<state_type> state, detail::call_ptr call,
                       net::any_completion_handler<void(error_code, detail::reply)> handler);
  /// The blocking forms: plain HTTP does the exchange's steps with blocking I/O on this
  /// thread; TLS runs the asynchronous exchange and waits. Then the reply is parsed here; one
  /// function for every result type.
  detail::reply exchange_blocking(detail::call_ptr call, error_code& ec);
  template <class T>
  T run(prepared<T> call, error_code& ec) {
    detail::reply r = exchange_blocking(std::move(call.data), ec);
    if constexpr (std::is_void_v<T>) {
      if (!ec) call.parse(r, ec);
    } else {
      if (ec) return T{};
      return call.parse(r, ec);
    }
  }
  template <class T>
  T run(prepared<T> call) {
    return v2::detail::throwing<error_code>(
        [&](error_code& ec) { return run(std::move(call), ec); }, &throw_if);
  }

  std::shared_ptr<state_type> state_;
};

/// Plain HTTP. (HTTPS: `tls_client`, in <inferwire/http/tls_client.hpp>.)
using client = basic_client<net::ip::tcp::socket>;

}  // namespace inferwire::http

namespace inferwire::http {
namespace detail {
template <class Stream, class T>
struct call_op {
  std::shared_ptr<client_state<Stream>> state;
  prepared_call<T> call;

  template <class Self>
  void operator()(Self& self) {
    // Taken out before `self` (which holds this object) moves into the handler.
    auto st = std::move(state);
    auto data = std::move(call.data);
    basic_client<Stream>::exchange(std::move(st), std::move(data),
                                   net::any_completion_handler<void(error_code, reply)>(std::move(self)));
  }
  template <class Self>
  void operator()(Self& self, error_code ec, reply r) {
    if constexpr (std::is_void_v<T>) {
      if (!ec) call.parse(r, ec);
      self.complete(ec);
    } else {
      if (ec) return self.complete(ec, T{});
      T value = call.parse(r, ec);
      self.complete(ec, std::move(value));
    }
  }
};
}  // namespace detail

template <class Stream>
template <class T, class Token>
auto basic_client<Stream>::start(prepared<T> call, Token&& token) {
  return net::async_compose<Token, typename v2::detail::completion_signature<error_code, T>::type>(
      detail::call_op<Stream, T>{state_, std::move(call)}, token, get_executor());
}
}  // namespace inferwire::http

#if INFERWIRE_HEADER_ONLY
#include <inferwire/http/impl/client.hpp>
#endif

#endif
