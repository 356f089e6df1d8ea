// SPDX-License-Identifier: Apache-2.0
// inferwire/http/impl/client.hpp — bodies of client.hpp.
#ifndef INFERWIRE_HTTP_IMPL_CLIENT_HPP
#define INFERWIRE_HTTP_IMPL_CLIENT_HPP

#include <boost/asio/compose.hpp>
#include <boost/asio/coroutine.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value_from.hpp>
#include <boost/json/value_to.hpp>
#include <boost/url/encode.hpp>
#include <boost/url/grammar/lut_chars.hpp>
#include <boost/url/rfc/pchars.hpp>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <stdexcept>

namespace inferwire::http {

// ---------------------------------------------------------------------------------------------
// infer_result

INFERWIRE_DECL infer_result infer_result::decode(std::string body,
                                         std::optional<std::size_t> header_length,
                                         status& st) {
  infer_result r;
  auto owned = std::make_shared<const std::string>(std::move(body));
  r.response_ = v2::decode_infer_response(*owned, header_length, st);
  r.body_ = std::move(owned);
  return r;
}

namespace detail {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;
using clock = std::chrono::steady_clock;

// ---------------------------------------------------------------------------------------------
// One call, ready to send: the header block and the body pieces.

struct call_data {
  std::string head;                         // request line and header fields
  std::string owned_body;                   // JSON bodies, compressed bodies
  v2::encoded_body infer_body;              // infer: JSON header + tensor views
  bool use_infer_body = false;
  std::vector<net::const_buffer> buffers;   // built once the strings are in place
  std::optional<std::chrono::milliseconds> timeout;
  std::optional<content_coding> request_coding, response_coding;
  error_code error;                         // a request that cannot be sent
  std::optional<tcp::resolver> resolver;    // only while connecting

  std::size_t body_size() const {
    return use_infer_body ? infer_body.size() : owned_body.size();
  }
  void make_buffers() {
    buffers.clear();
    buffers.emplace_back(head.data(), head.size());
    if (!use_infer_body) {
      if (!owned_body.empty()) buffers.emplace_back(owned_body.data(), owned_body.size());
      return;
    }
    if (!infer_body.header.empty())
      buffers.emplace_back(infer_body.header.data(), infer_body.header.size());
    for (auto s : infer_body.segments)
      if (!s.empty()) buffers.emplace_back(s.data(), s.size());
  }
};

INFERWIRE_DECL void call_data_deleter::operator()(call_data* p) const noexcept { delete p; }

INFERWIRE_DECL error_code server_error_of(const reply& r) {
  return make_server_error(r.status, v2::parse_error_body(r.body));
}

// --- Reply parsers: one per kind of answer.

INFERWIRE_DECL bool parse_health(reply& r, error_code& ec) {
  if (r.status == 200) return true;
  if (r.status == 400) return false;
  ec = server_error_of(r);
  return false;
}

INFERWIRE_DECL void parse_empty(reply& r, error_code& ec) {
  if (r.status != 200) ec = server_error_of(r);
}

template <class T>
T parse_json_as(reply& r, error_code& ec) {
  if (r.status != 200) {
    ec = server_error_of(r);
    return T{};
  }
  status st;
  auto doc = v2::parse_json(r.body, st);
  if (st) {
    ec = client_errc::bad_response;
    return T{};
  }
  if constexpr (std::is_same_v<T, boost::json::value>) {
    return doc;
  } else {
    try {
      return boost::json::value_to<T>(doc);
    } catch (const std::exception&) {
      ec = client_errc::bad_response;
      return T{};
    }
  }
}

INFERWIRE_DECL infer_result parse_infer(reply& r, error_code& ec) {
  if (r.status != 200) {
    ec = server_error_of(r);
    return {};
  }
  status st;
  auto result = infer_result::decode(std::move(r.body), r.header_length, st);
  if (st) {
    ec = client_errc::bad_response;
    return {};
  }
  return result;
}

// ---------------------------------------------------------------------------------------------
// Connections and the pool.

template <class Stream>
struct connection {
  std::optional<Stream> stream;  // recreated for every new TCP connection (TLS needs it)
  beast::flat_buffer buffer;
  std::optional<bhttp::response_parser<bhttp::string_body>> parser;
  bool open = false;
  bool deadline_armed = false;  // the stream's timers hold a deadline of an earlier call
};

template <class Stream>
struct waiter {
  explicit waiter(const net::any_io_executor& ex) : timer(ex) {}
  net::steady_timer timer;
  connection<Stream>* handed = nullptr;
  bool closed = false;
};

template <class Stream>
struct client_state {
  net::any_io_executor executor;
  net::ssl::context* ssl = nullptr;
  std::string host, port, host_field;
  client_options options;

  std::mutex mutex;
  std::vector<std::unique_ptr<connection<Stream>>> all;
  std::vector<connection<Stream>*> idle;
  std::deque<waiter<Stream>*> waiters;
  std::optional<tcp::resolver::results_type> endpoints;

  // Blocking calls on a private io_context: one caller at a time runs it (the leader), the
  // others wait for their completion or for the lead.
  net::io_context* own_ioc = nullptr;
  std::mutex drive_mutex;
  std::condition_variable drive_cv;
  bool leading = false;

  // Takes an idle connection or makes a new one; nullptr when the pool is exhausted.
  connection<Stream>* try_acquire() {
    if (!idle.empty()) {
      auto* c = idle.back();
      idle.pop_back();
      return c;
    }
    if (all.size() < std::max<std::size_t>(options.max_connections, 1)) {
      all.push_back(std::make_unique<connection<Stream>>());
      return all.back().get();
    }
    return nullptr;
  }

  void release(connection<Stream>* c) {
    std::lock_guard lock(mutex);
    if (!waiters.empty()) {
      auto* w = waiters.front();
      waiters.pop_front();
      w->handed = c;
      w->timer.expires_at(clock::time_point::min());  // wakes it, even before it waits
      return;
    }
    idle.push_back(c);
  }

  void close_idle() {
    std::lock_guard lock(mutex);
    for (auto* c : idle) close(*c);
    for (auto* w : waiters) {
      w->closed = true;
      w->timer.expires_at(clock::time_point::min());
    }
    waiters.clear();
    endpoints.reset();
  }

  static void close(connection<Stream>& c) {
    if (c.stream) {
      error_code ignored;
      beast::get_lowest_layer(*c.stream).socket().shutdown(tcp::socket::shutdown_both, ignored);
      beast::get_lowest_layer(*c.stream).socket().close(ignored);
    }
    c.open = false;
    c.buffer.clear();
  }

  void new_stream(connection<Stream>& c) {
    if constexpr (is_tls_stream<Stream>::value) c.stream.emplace(executor, *ssl);
    else c.stream.emplace(executor);
    c.buffer.clear();
    c.deadline_armed = false;
  }
};

// Errors after which a request on a reused connection was certainly not processed: the server
// had closed the idle connection before it saw the request.
INFERWIRE_DECL bool stale_connection_error(const error_code& ec) {
  return ec == bhttp::error::end_of_stream || ec == net::error::eof ||
         ec == net::error::connection_reset || ec == net::error::broken_pipe ||
         ec == net::error::connection_aborted;
}

// ---------------------------------------------------------------------------------------------
// The exchange of one call: a connection, the request out, the reply in.

template <class Stream>
class exchange_op {
 public:
  exchange_op(std::shared_ptr<client_state<Stream>> state, call_ptr call)
      : state_(std::move(state)), call_(std::move(call)) {}

  template <class Self>
  void operator()(Self& self, error_code ec, tcp::resolver::results_type results) {
    if (!ec) {
      std::lock_guard lock(state_->mutex);
      state_->endpoints = results;
    }
    call_->resolver.reset();
    (*this)(self, ec);
  }
  template <class Self>
  void operator()(Self& self, error_code ec, const tcp::endpoint&) {
    (*this)(self, ec);
  }

  template <class Self>
  void operator()(Self& self, error_code ec = {}, std::size_t = 0) {
    auto& st = *state_;
    BOOST_ASIO_CORO_REENTER(coro_) {
      if (call_->error) {
        BOOST_ASIO_CORO_YIELD net::post(st.executor, std::move(self));
        return finish(self, call_->error);
      }
      if (auto t = call_->timeout.value_or(st.options.timeout); t.count() > 0)
        deadline_ = clock::now() + t;

      // 1. A connection from the pool, or a turn in the queue.
      {
        std::unique_lock lock(st.mutex);
        conn_ = st.try_acquire();
        if (!conn_) {
          wait_ = std::make_unique<waiter<Stream>>(st.executor);
          wait_->timer.expires_at(deadline_);
          st.waiters.push_back(wait_.get());
        }
      }
      if (!conn_) {
        BOOST_ASIO_CORO_YIELD {
          auto* w = wait_.get();
          std::lock_guard lock(st.mutex);
          w->timer.async_wait(std::move(self));
        }
        {
          std::lock_guard lock(st.mutex);
          conn_ = wait_->handed;
          if (!conn_) {
            std::erase(st.waiters, wait_.get());
            if (wait_->closed) ec = client_errc::client_closed;
            else if (!ec) ec = beast::error::timeout;
            else ec = net::error::operation_aborted;
          }
        }
        wait_.reset();
        if (!conn_) return finish(self, ec);
      }

      for (;;) {
        // 2. Connect (and shake hands) when the connection is not open.
        reused_ = conn_->open;
        if (!conn_->open) {
          st.new_stream(*conn_);
          set_expiry();
          {
            std::lock_guard lock(st.mutex);
            if (st.endpoints) endpoints_ = *st.endpoints;
          }
          if (endpoints_.empty()) {
            call_->resolver.emplace(st.executor);
            BOOST_ASIO_CORO_YIELD call_->resolver->async_resolve(st.host, st.port,
                                                                 std::move(self));
            if (ec) return fail(self, ec);
            std::lock_guard lock(st.mutex);
            endpoints_ = *st.endpoints;
          }
          BOOST_ASIO_CORO_YIELD {
            auto endpoints = endpoints_;  // the member moves away with `self`
            beast::get_lowest_layer(*conn_->stream).async_connect(endpoints, std::move(self));
          }
          if (ec) {
            {
              std::lock_guard lock(st.mutex);
              st.endpoints.reset();  // resolve again next time
            }
            return fail(self, ec);
          }
          {
            error_code ignored;
            beast::get_lowest_layer(*conn_->stream).socket().set_option(tcp::no_delay(true),
                                                                        ignored);
          }
          if (is_tls_stream<Stream>::value) {
            if (auto e = prepare_tls(); e) return fail(self, e);
            BOOST_ASIO_CORO_YIELD handshake(std::move(self));
            if (ec) return fail(self, ec);
          }
          conn_->open = true;
        }

        // 3. Send, then read the reply.
        set_expiry();
        BOOST_ASIO_CORO_YIELD net::async_write(*conn_->stream, call_->buffers, std::move(self));
        if (!ec) {
          conn_->parser.emplace();
          conn_->parser->body_limit(st.options.max_response_size);
          BOOST_ASIO_CORO_YIELD bhttp::async_read(*conn_->stream, conn_->buffer,
                                                  *conn_->parser, std::move(self));
        }
        if (!ec) break;
        if (reused_ && !retried_ && stale_connection_error(ec) &&
            !(conn_->parser && conn_->parser->got_some())) {
          retried_ = true;  // the server closed the idle connection: once more, afresh
          client_state<Stream>::close(*conn_);
          continue;
        }
        return fail(self, ec);
      }

      // 4. Hand the connection back and decode the reply.
      {
        auto& msg = conn_->parser->get();
        reply r;
        r.status = msg.result_int();
        if (auto it = msg.find(v2::header_length_field); it != msg.end()) {
          status hs;
          r.header_length = v2::parse_content_length(it->value(), hs);
          if (hs) return fail(self, client_errc::bad_response);
        }
        std::string_view coding;
        if (auto it = msg.find(bhttp::field::content_encoding); it != msg.end())
          coding = it->value();
        bool keep = conn_->parser->keep_alive();
        r.body = std::move(msg.body());
        conn_->parser.reset();
        if (!coding.empty() && coding != "identity") {
          std::string plain;
          if (decompress(r.body, st.options.max_response_size, plain))
            return fail(self, client_errc::bad_response);
          r.body = std::move(plain);
        }
        if (!keep) client_state<Stream>::close(*conn_);
        reset_expiry();
        st.release(std::exchange(conn_, nullptr));
        return finish(self, {}, std::move(r));
      }
    }
  }

 private:
  // Coding of a compressed reply: the body is decompressed here, the decoder sees plain bytes.
  static bool decompress(std::string_view body, std::size_t limit, std::string& out) {
    return static_cast<bool>(http::decompress(body, limit, out));
  }

  error_code prepare_tls() {
    if constexpr (is_tls_stream<Stream>::value) {
      auto& st = *state_;
      if (!SSL_set_tlsext_host_name(conn_->stream->native_handle(), st.host.c_str()))
        return error_code(static_cast<int>(::ERR_get_error()), net::error::get_ssl_category());
      if (st.options.verify_host_name)
        conn_->stream->set_verify_callback(net::ssl::host_name_verification(st.host));
    }
    return {};
  }
  template <class Self>
  void handshake(Self&& self) {
    if constexpr (is_tls_stream<Stream>::value)
      conn_->stream->async_handshake(net::ssl::stream_base::client, std::move(self));
  }

  // The stream's timers are touched only for calls with a deadline (and once after them):
  // arming and disarming timers costs more than the rest of a small call.
  void set_expiry() {
    auto& lowest = beast::get_lowest_layer(*conn_->stream);
    if (deadline_ != clock::time_point::max()) {
      lowest.expires_at(deadline_);
      conn_->deadline_armed = true;
    } else if (conn_->deadline_armed) {
      lowest.expires_never();
      conn_->deadline_armed = false;
    }
  }
  void reset_expiry() {
    if (conn_ && conn_->stream && conn_->deadline_armed) {
      beast::get_lowest_layer(*conn_->stream).expires_never();
      conn_->deadline_armed = false;
    }
  }

  template <class Self>
  void fail(Self& self, error_code ec) {
    if (conn_) {
      client_state<Stream>::close(*conn_);
      conn_->parser.reset();
      reset_expiry();
      state_->release(std::exchange(conn_, nullptr));
    }
    finish(self, ec);
  }

  template <class Self>
  void finish(Self& self, error_code ec, reply r = {}) {
    call_.reset();
    self.complete(ec, std::move(r));
  }

  std::shared_ptr<client_state<Stream>> state_;
  call_ptr call_;
  connection<Stream>* conn_ = nullptr;
  std::unique_ptr<waiter<Stream>> wait_;
  tcp::resolver::results_type endpoints_;
  clock::time_point deadline_ = clock::time_point::max();
  bool reused_ = false;
  bool retried_ = false;
  net::coroutine coro_;
};

// ---------------------------------------------------------------------------------------------
// Building requests.

// A path segment or query part: characters a path segment may carry pass as they are.
INFERWIRE_DECL std::string encode_segment(std::string_view s) {
  return boost::urls::encode(s, boost::urls::pchars - boost::urls::grammar::lut_chars("&=+"));
}

INFERWIRE_DECL std::string model_path(const model_id& m) {
  std::string t = "/v2/models/" + encode_segment(m.name);
  if (!m.version.empty()) t += "/versions/" + encode_segment(m.version);
  return t;
}

INFERWIRE_DECL bool valid_field(std::string_view s) {
  return s.find_first_of("\r\n") == std::string_view::npos;
}

// Starts a call: the request line, the fields every request carries, the caller's fields.
template <class Stream>
call_ptr begin_call(const client_state<Stream>& st, std::string_view method,
                                      std::string target, const call_options& o) {
  auto c = call_ptr(new call_data());
  c->timeout = o.timeout;
  c->request_coding = o.request_compression.value_or(st.options.request_compression);
  c->response_coding = o.response_compression.value_or(st.options.response_compression);
  if (!o.query.empty()) {
    char sep = '?';
    for (const auto& [k, v] : o.query) {
      target += sep;
      target += encode_segment(k);
      target += '=';
      target += encode_segment(v);
      sep = '&';
    }
  }
  auto& h = c->head;
  h.reserve(160 + target.size());
  h.append(method).append(" ").append(target).append(" HTTP/1.1\r\nHost: ");
  h.append(st.host_field).append("\r\n");
  if (*c->response_coding != content_coding::identity)
    h.append("Accept-Encoding: ").append(coding_name(*c->response_coding)).append("\r\n");
  for (const auto* list : {&st.options.headers, &o.headers})
    for (const auto& [k, v] : *list) {
      if (!valid_field(k) || !valid_field(v) || k.empty()) {
        c->error = net::error::invalid_argument;
        continue;
      }
      h.append(k).append(": ").append(v).append("\r\n");
    }
  return c;
}

// Finishes a call's header with the body's fields (compressing it when asked) and builds the
// buffer list. `header_length` is the Inference-Header-Content-Length of infer bodies.
INFERWIRE_DECL void end_call(call_data& c, std::string_view content_type,
                     std::optional<std::size_t> header_length = std::nullopt) {
  bool has_body = c.use_infer_body || !c.owned_body.empty();
  if (has_body && c.request_coding && *c.request_coding != content_coding::identity) {
    std::string compressed;
    if (c.use_infer_body) {
      std::vector<std::string_view> parts;
      parts.reserve(1 + c.infer_body.segments.size());
      parts.push_back(c.infer_body.header);
      for (auto s : c.infer_body.segments)
        parts.emplace_back(reinterpret_cast<const char*>(s.data()), s.size());
      compress(parts, *c.request_coding, compressed);
    } else {
      compress(c.owned_body, *c.request_coding, compressed);
    }
    c.owned_body = std::move(compressed);
    c.use_infer_body = false;
    c.infer_body = {};
    c.head.append("Content-Encoding: ").append(coding_name(*c.request_coding)).append("\r\n");
  }
  if (has_body && !content_type.empty())
    c.head.append("Content-Type: ").append(content_type).append("\r\n");
  if (header_length)
    c.head.append(v2::header_length_field).append(": ").append(std::to_string(*header_length))
        .append("\r\n");
  c.head.append("Content-Length: ").append(std::to_string(c.body_size())).append("\r\n\r\n");
  c.make_buffers();
}

template <class Stream>
call_ptr get_call(const client_state<Stream>& st, std::string target,
                                    const call_options& o) {
  auto c = begin_call(st, "GET", std::move(target), o);
  end_call(*c, {});
  return c;
}

template <class Stream>
call_ptr post_call(const client_state<Stream>& st, std::string target,
                                     std::string json, const call_options& o) {
  auto c = begin_call(st, "POST", std::move(target), o);
  c->owned_body = std::move(json);
  end_call(*c, "application/json");
  return c;
}

INFERWIRE_DECL std::string to_body(const boost::json::value& v) { return boost::json::serialize(v); }

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// basic_client

namespace detail {
template <class Stream>
std::shared_ptr<client_state<Stream>> make_state(net::any_io_executor ex, net::ssl::context* ssl,
                                                 std::string host, std::string port,
                                                 client_options opts) {
  auto s = std::make_shared<client_state<Stream>>();
  s->executor = std::move(ex);
  s->ssl = ssl;
  bool default_port = (!ssl && port == "80") || (ssl && port == "443");
  bool ipv6 = host.find(':') != std::string::npos;
  s->host_field = ipv6 ? "[" + host + "]" : host;
  if (!default_port) s->host_field += ":" + port;
  s->host = std::move(host);
  s->port = std::move(port);
  s->options = std::move(opts);
  return s;
}
}  // namespace detail

template <class Stream>
basic_client<Stream>::basic_client(executor_type ex, std::string host, std::string port,
                                   client_options opts)
  requires(!is_tls)
    : state_(detail::make_state<Stream>(std::move(ex), nullptr, std::move(host), std::move(port),
                                        std::move(opts))) {}

template <class Stream>
basic_client<Stream>::basic_client(std::string host, std::string port, client_options opts)
  requires(!is_tls)
    : own_ioc_(std::make_unique<net::io_context>()),
      state_(detail::make_state<Stream>(own_ioc_->get_executor(), nullptr, std::move(host),
                                        std::move(port), std::move(opts))) {
  state_->own_ioc = own_ioc_.get();
}

template <class Stream>
basic_client<Stream>::basic_client(executor_type ex, net::ssl::context& ssl, std::string host,
                                   std::string port, client_options opts)
  requires(is_tls)
    : state_(detail::make_state<Stream>(std::move(ex), &ssl, std::move(host), std::move(port),
                                        std::move(opts))) {}

template <class Stream>
basic_client<Stream>::basic_client(net::ssl::context& ssl, std::string host, std::string port,
                                   client_options opts)
  requires(is_tls)
    : own_ioc_(std::make_unique<net::io_context>()),
      state_(detail::make_state<Stream>(own_ioc_->get_executor(), &ssl, std::move(host),
                                        std::move(port), std::move(opts))) {
  state_->own_ioc = own_ioc_.get();
}

template <class Stream>
basic_client<Stream>::~basic_client() {
  if (!state_) return;  // moved from
  close();
  if (own_ioc_) {
    // Let the closed connections' handlers finish before the io_context goes.
    own_ioc_->restart();
    own_ioc_->poll();
  }
}

template <class Stream>
auto basic_client<Stream>::get_executor() const noexcept -> executor_type {
  return state_->executor;
}

template <class Stream>
const client_options& basic_client<Stream>::options() const noexcept {
  return state_->options;
}

template <class Stream>
void basic_client<Stream>::close() {
  state_->close_idle();
}

template <class Stream>
std::size_t basic_client<Stream>::open_connections() const {
  std::lock_guard lock(state_->mutex);
  std::size_t n = 0;
  for (const auto& c : state_->all) n += c->open ? 1 : 0;
  return n;
}

namespace detail {
// The handler of the exchange. The exchange's operations run on the client's executor (Asio
// 1.26's any_completion_executor cannot be required to be non-blocking, as Beast's operations
// require of a handler's executor); the caller's cancellation slot is forwarded, and the reply
// is dispatched to the call on the call's own executor.
template <class Handler>
struct erased_completion {
  Handler handler;
  net::any_io_executor executor;

  using executor_type = net::any_io_executor;
  executor_type get_executor() const noexcept { return executor; }
  using cancellation_slot_type = net::associated_cancellation_slot_t<Handler>;
  cancellation_slot_type get_cancellation_slot() const noexcept {
    return net::get_associated_cancellation_slot(handler);
  }

  void operator()(error_code ec, reply r) {
    auto target = net::get_associated_executor(handler, executor);
    net::dispatch(target, [h = std::move(handler), ec, r = std::move(r)]() mutable {
      std::move(h)(ec, std::move(r));
    });
  }
};
}  // namespace detail

template <class Stream>
void basic_client<Stream>::exchange(
    std::shared_ptr<state_type> state, detail::call_ptr call,
    net::any_completion_handler<void(error_code, detail::reply)> handler) {
  auto ex = state->executor;
  detail::erased_completion<decltype(handler)> completion{std::move(handler), ex};
  net::async_compose<decltype(completion), void(error_code, detail::reply)>(
      detail::exchange_op<Stream>(std::move(state), std::move(call)), completion, ex);
}

namespace detail {
template <class T>
struct sync_slot {
  error_code ec;
  std::optional<T> value;
};
template <>
struct sync_slot<void> {
  error_code ec;
};
}  // namespace detail

template <class Stream>
template <class T>
T basic_client<Stream>::run(prepared<T> call, error_code& ec) {
  auto& st = *state_;
  detail::sync_slot<T> slot;
  bool done = false;
  auto on_done = [&](error_code e, auto&&... v) {
    std::lock_guard lock(st.drive_mutex);
    slot.ec = e;
    if constexpr (!std::is_void_v<T>) slot.value.emplace(std::move(v)...);
    done = true;
    st.drive_cv.notify_all();
  };

  if (!st.own_ioc) {
    // The executor is run by the caller's threads; this thread must not be one of them.
    if (st.executor.template target<net::io_context::executor_type>() &&
        st.executor.template target<net::io_context::executor_type>()->running_in_this_thread()) {
      ec = client_errc::sync_on_own_executor;
      if constexpr (!std::is_void_v<T>) return T{};
      else return;
    }
    start<T>(std::move(call), on_done);
    std::unique_lock lock(st.drive_mutex);
    st.drive_cv.wait(lock, [&] { return done; });
  } else {
    // Leader/follower over the private io_context: whoever runs it completes everyone's calls.
    auto guard = net::make_work_guard(*st.own_ioc);
    start<T>(std::move(call), on_done);
    std::unique_lock lock(st.drive_mutex);
    while (!done) {
      if (st.leading) {
        st.drive_cv.wait(lock);
        continue;
      }
      st.leading = true;
      lock.unlock();
      if (st.own_ioc->stopped()) st.own_ioc->restart();
      st.own_ioc->run_one();
      lock.lock();
      st.leading = false;
      st.drive_cv.notify_all();
    }
  }
  ec = slot.ec;
  if constexpr (!std::is_void_v<T>) return std::move(*slot.value);
}

template <class Stream>
template <class T>
T basic_client<Stream>::run(prepared<T> call) {
  return v2::detail::throwing<error_code>([&](error_code& ec) { return run(std::move(call), ec); }, &throw_if);
}

// ---------------------------------------------------------------------------------------------
// The endpoints.

template <class Stream>
auto basic_client<Stream>::prepare_server_live(const call_options& o) -> prepared<bool> {
  return {detail::get_call(*state_, "/v2/health/live", o), &detail::parse_health};
}

template <class Stream>
auto basic_client<Stream>::prepare_server_ready(const call_options& o) -> prepared<bool> {
  return {detail::get_call(*state_, "/v2/health/ready", o), &detail::parse_health};
}

template <class Stream>
auto basic_client<Stream>::prepare_model_ready(model_id m, const call_options& o)
    -> prepared<bool> {
  return {detail::get_call(*state_, detail::model_path(m) + "/ready", o), &detail::parse_health};
}

template <class Stream>
auto basic_client<Stream>::prepare_server_metadata(const call_options& o)
    -> prepared<v2::server_metadata> {
  return {detail::get_call(*state_, "/v2", o), &detail::parse_json_as<v2::server_metadata>};
}

template <class Stream>
auto basic_client<Stream>::prepare_model_metadata(model_id m, const call_options& o)
    -> prepared<v2::model_metadata> {
  return {detail::get_call(*state_, detail::model_path(m), o),
          &detail::parse_json_as<v2::model_metadata>};
}

template <class Stream>
auto basic_client<Stream>::prepare_model_config(model_id m, const call_options& o)
    -> prepared<boost::json::value> {
  return {detail::get_call(*state_, detail::model_path(m) + "/config", o),
          &detail::parse_json_as<boost::json::value>};
}

template <class Stream>
auto basic_client<Stream>::prepare_infer(model_id m, const v2::infer_request& request,
                                         const call_options& o) -> prepared<infer_result> {
  auto c = detail::begin_call(*state_, "POST", detail::model_path(m) + "/infer", o);
  c->use_infer_body = true;
  // Like Triton's clients: with no outputs listed, every output comes back binary.
  status st;
  if (request.outputs.empty() && !request.raw_binary &&
      !request.parameters.contains("binary_data_output")) {
    parameter_map parameters = request.parameters;
    parameters.set("binary_data_output", true);
    st = v2::encode_infer_request(request, parameters, c->infer_body);
  } else {
    st = v2::encode_infer_request(request, c->infer_body);
  }
  if (st) c->error = net::error::invalid_argument;
  if (request.raw_binary)
    detail::end_call(*c, "application/octet-stream", 0);
  else if (c->infer_body.has_binary_data())
    detail::end_call(*c, "application/octet-stream", c->infer_body.header_length());
  else
    detail::end_call(*c, "application/json");
  return {std::move(c), &detail::parse_infer};
}

template <class Stream>
auto basic_client<Stream>::prepare_model_statistics(model_id m, const call_options& o)
    -> prepared<v2::statistics_response> {
  std::string target = m.name.empty() ? "/v2/models/stats" : detail::model_path(m) + "/stats";
  return {detail::get_call(*state_, std::move(target), o),
          &detail::parse_json_as<v2::statistics_response>};
}

template <class Stream>
auto basic_client<Stream>::prepare_repository_index(const v2::repository_index_request& r,
                                                    const call_options& o)
    -> prepared<std::vector<v2::repository_index_entry>> {
  return {detail::post_call(*state_, "/v2/repository/index",
                            detail::to_body(boost::json::value_from(r)), o),
          &detail::parse_json_as<std::vector<v2::repository_index_entry>>};
}

template <class Stream>
auto basic_client<Stream>::prepare_load_model(std::string_view model,
                                              const v2::repository_load_request& r,
                                              const call_options& o) -> prepared<void> {
  return {detail::post_call(*state_,
                            "/v2/repository/models/" + detail::encode_segment(model) + "/load",
                            detail::to_body(boost::json::value_from(r)), o),
          &detail::parse_empty};
}

template <class Stream>
auto basic_client<Stream>::prepare_unload_model(std::string_view model,
                                                const v2::repository_unload_request& r,
                                                const call_options& o) -> prepared<void> {
  return {detail::post_call(*state_,
                            "/v2/repository/models/" + detail::encode_segment(model) + "/unload",
                            detail::to_body(boost::json::value_from(r)), o),
          &detail::parse_empty};
}

namespace detail {
INFERWIRE_DECL std::string shm_target(std::string_view kind, std::string_view region,
                              std::string_view action) {
  std::string t = "/v2/";
  t += kind;
  if (!region.empty()) t += "/region/" + encode_segment(region);
  t += '/';
  t += action;
  return t;
}
}  // namespace detail

template <class Stream>
auto basic_client<Stream>::prepare_register_system_shared_memory(
    const v2::system_shm_register_request& r, const call_options& o) -> prepared<void> {
  auto c = detail::post_call(*state_, detail::shm_target("systemsharedmemory", r.name, "register"),
                             detail::to_body(boost::json::value_from(r)), o);
  if (r.name.empty()) c->error = net::error::invalid_argument;
  return {std::move(c), &detail::parse_empty};
}

template <class Stream>
auto basic_client<Stream>::prepare_system_shared_memory_status(std::string_view region,
                                                               const call_options& o)
    -> prepared<std::vector<v2::system_shm_status>> {
  return {detail::get_call(*state_, detail::shm_target("systemsharedmemory", region, "status"), o),
          &detail::parse_json_as<std::vector<v2::system_shm_status>>};
}

template <class Stream>
auto basic_client<Stream>::prepare_unregister_system_shared_memory(std::string_view region,
                                                                   const call_options& o)
    -> prepared<void> {
  return {detail::post_call(*state_,
                            detail::shm_target("systemsharedmemory", region, "unregister"), {}, o),
          &detail::parse_empty};
}

template <class Stream>
auto basic_client<Stream>::prepare_register_cuda_shared_memory(
    const v2::cuda_shm_register_request& r, const call_options& o) -> prepared<void> {
  auto c = detail::post_call(*state_, detail::shm_target("cudasharedmemory", r.name, "register"),
                             detail::to_body(boost::json::value_from(r)), o);
  if (r.name.empty()) c->error = net::error::invalid_argument;
  return {std::move(c), &detail::parse_empty};
}

template <class Stream>
auto basic_client<Stream>::prepare_cuda_shared_memory_status(std::string_view region,
                                                             const call_options& o)
    -> prepared<std::vector<v2::cuda_shm_status>> {
  return {detail::get_call(*state_, detail::shm_target("cudasharedmemory", region, "status"), o),
          &detail::parse_json_as<std::vector<v2::cuda_shm_status>>};
}

template <class Stream>
auto basic_client<Stream>::prepare_unregister_cuda_shared_memory(std::string_view region,
                                                                 const call_options& o)
    -> prepared<void> {
  return {detail::post_call(*state_, detail::shm_target("cudasharedmemory", region, "unregister"),
                            {}, o),
          &detail::parse_empty};
}

namespace detail {
INFERWIRE_DECL std::string trace_target(std::string_view model) {
  if (model.empty()) return "/v2/trace/setting";
  return "/v2/models/" + encode_segment(model) + "/trace/setting";
}
}  // namespace detail

template <class Stream>
auto basic_client<Stream>::prepare_trace_settings(std::string_view model, const call_options& o)
    -> prepared<v2::trace_settings> {
  return {detail::get_call(*state_, detail::trace_target(model), o),
          &detail::parse_json_as<v2::trace_settings>};
}

template <class Stream>
auto basic_client<Stream>::prepare_update_trace_settings(const v2::trace_settings& update,
                                                         std::string_view model,
                                                         const call_options& o)
    -> prepared<v2::trace_settings> {
  return {detail::post_call(*state_, detail::trace_target(model),
                            detail::to_body(boost::json::value_from(update)), o),
          &detail::parse_json_as<v2::trace_settings>};
}

template <class Stream>
auto basic_client<Stream>::prepare_log_settings(const call_options& o)
    -> prepared<v2::log_settings> {
  return {detail::get_call(*state_, "/v2/logging", o), &detail::parse_json_as<v2::log_settings>};
}

template <class Stream>
auto basic_client<Stream>::prepare_update_log_settings(const v2::log_settings& update,
                                                       const call_options& o)
    -> prepared<v2::log_settings> {
  return {detail::post_call(*state_, "/v2/logging",
                            detail::to_body(boost::json::value_from(update)), o),
          &detail::parse_json_as<v2::log_settings>};
}

}  // namespace inferwire::http

#endif
