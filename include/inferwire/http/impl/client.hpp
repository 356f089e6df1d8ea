// SPDX-License-Identifier: Apache-2.0
// inferwire/http/impl/client.hpp — bodies of client.hpp.
#ifndef INFERWIRE_HTTP_IMPL_CLIENT_HPP
#define INFERWIRE_HTTP_IMPL_CLIENT_HPP

#include <inferwire/v2/detail/header_memo.hpp>

#include <boost/asio/compose.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/coroutine.hpp>
#include <boost/asio/defer.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value_from.hpp>
#include <boost/json/value_to.hpp>
#include <boost/url/encode.hpp>
#include <boost/url/grammar/lut_chars.hpp>
#include <boost/url/rfc/pchars.hpp>

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <span>
#include <stdexcept>

namespace inferwire::http {

// ---------------------------------------------------------------------------------------------
// infer_result

INFERWIRE_DECL infer_result infer_result::decode(std::string body,
                                         std::optional<std::size_t> header_length,
                                         status& st) {
  infer_result r;
  auto owned = std::make_shared<const std::string>(std::move(body));
  st = {};
  // Replies repeat their header: the last one a thread decoded is not parsed again.
  static thread_local v2::detail::header_memo<v2::infer_response, &v2::infer_response::outputs> memo;
  std::optional<v2::infer_response> known;
  if (header_length) known = memo.recall(*owned, *header_length);
  if (known) {
    r.response_ = std::move(*known);
  } else {
    r.response_ = v2::decode_infer_response(*owned, header_length, st);
    if (header_length && !st) memo.remember(std::string_view(*owned).substr(0, *header_length), r.response_);
  }
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
  static constexpr std::size_t small_request = 4096;  // bytes, sent from one buffer
  std::string head;                         // request line and header fields (and a small body)
  std::string owned_body;                   // JSON bodies, compressed bodies
  v2::encoded_body infer_body;              // infer: JSON header + tensor views
  bool use_infer_body = false;
  std::vector<net::const_buffer> buffers;   // built once the strings are in place
  std::optional<std::chrono::milliseconds> timeout;
  std::optional<content_coding> request_coding, response_coding;
  error_code error;                         // a request that cannot be sent
  // Where a 200 reply's body goes as it arrives, instead of into the reply (generate_stream
  // event by event): the bytes, then once an empty view with `end`; false: malformed.
  std::function<bool(std::string_view bytes, bool end)> body_sink;

  std::size_t body_size() const {
    return use_infer_body ? infer_body.size() : owned_body.size();
  }
  void make_buffers() {
    buffers.clear();
    // A small request goes out as one piece: the kernel handles a single buffer noticeably
    // faster than a gather list of a few small ones (on both ends of a loopback connection).
    if (use_infer_body && head.size() + infer_body.size() <= small_request) {
      head.reserve(head.size() + infer_body.size());
      head += infer_body.header;
      for (auto seg : infer_body.segments) head.append(reinterpret_cast<const char*>(seg.data()), seg.size());
      buffers.emplace_back(head.data(), head.size());
      return;
    }
    buffers.reserve(2 + infer_body.segments.size());
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

// generate_stream's body: Server-Sent Events, each `data: <JSON object>` followed by a blank
// line (other SSE fields, if a server sent them, are skipped). Fed bytes as they arrive; each
// complete event's object goes to `on_event`. False: an event that is not a JSON object, an
// unfinished event at the end, or an exception out of `on_event`.
class sse_splitter {
 public:
  explicit sse_splitter(std::function<void(boost::json::object&&)> on_event) : on_event_(std::move(on_event)) {}
  bool operator()(std::string_view bytes, bool end) {
    pending_.append(bytes);
    std::size_t at = 0;
    for (std::size_t blank; (blank = pending_.find("\n\n", at)) != std::string::npos; at = blank + 2)
      if (!event(std::string_view(pending_).substr(at, blank - at))) return false;
    pending_.erase(0, at);
    return !end || pending_.find_first_not_of("\r\n") == std::string::npos;
  }

 private:
  bool event(std::string_view lines) {
    while (!lines.empty()) {
      const std::size_t eol = lines.find('\n');
      const std::string_view line = lines.substr(0, eol);
      lines.remove_prefix(eol == std::string_view::npos ? lines.size() : eol + 1);
      if (!line.starts_with("data:")) continue;
      std::string_view data = line.substr(5);
      if (data.starts_with(' ')) data.remove_prefix(1);
      status st;
      auto doc = v2::parse_json(data, st);
      if (st || !doc.is_object()) return false;
      try {
        on_event_(std::move(doc.get_object()));
      } catch (...) {
        return false;
      }
    }
    return true;
  }

  std::function<void(boost::json::object&&)> on_event_;
  std::string pending_;
};

INFERWIRE_DECL std::vector<boost::json::object> parse_generate_events(reply& r, error_code& ec) {
  std::vector<boost::json::object> events;
  if (r.status != 200) {
    ec = server_error_of(r);
    return events;
  }
  sse_splitter split([&events](boost::json::object&& e) { events.push_back(std::move(e)); });
  if (!split(r.body, true)) {
    ec = client_errc::bad_response;
    events.clear();
  }
  return events;
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
// The reply: Beast's HTTP/1.1 parser, keeping the status, the two header fields the client
// reads and the body (no field map, no message object).

class reply_reader final : public bhttp::basic_parser<false> {
 public:
  explicit reply_reader(std::size_t body_limit, const std::function<bool(std::string_view, bool)>* sink = nullptr)
      : limit_(body_limit), sink_(sink && *sink ? sink : nullptr) {
    this->body_limit(body_limit);
    this->eager(true);
  }
  reply& get() noexcept { return reply_; }
  std::string_view content_coding() const noexcept { return coding_; }
  bool bad_header_length() const noexcept { return bad_length_; }

 private:
  // A declared body is reserved up to this much; a larger one grows as it arrives.
  static constexpr std::uint64_t reserve_cap = std::uint64_t{64} << 20;

  void on_request_impl(bhttp::verb, beast::string_view, beast::string_view, int,
                       error_code&) override {}
  void on_response_impl(int code, beast::string_view, int, error_code&) override {
    reply_.status = static_cast<unsigned>(code);
  }
  void on_field_impl(bhttp::field name, beast::string_view name_string, beast::string_view value,
                     error_code&) override {
    std::string_view v(value.data(), value.size());
    if (name == bhttp::field::content_encoding) {
      if (!seen_coding_) coding_ = v;
      seen_coding_ = true;
    } else if (!seen_length_ && beast::iequals(name_string, v2::header_length_field)) {
      seen_length_ = true;
      status st;
      reply_.header_length = v2::parse_content_length(v, st);
      bad_length_ = static_cast<bool>(st);
    }
  }
  void on_header_impl(error_code&) override {
    if (sinking()) this->body_limit(boost::none);  // nothing is kept: a stream may run on
  }
  void on_body_init_impl(const boost::optional<std::uint64_t>& length, error_code&) override {
    if (length) reply_.body.reserve(static_cast<std::size_t>(std::min(*length, reserve_cap)));
  }
  std::size_t on_body_impl(beast::string_view body, error_code& ec) override {
    return append(body, ec);
  }
  void on_chunk_header_impl(std::uint64_t, beast::string_view, error_code&) override {}
  std::size_t on_chunk_body_impl(std::uint64_t, beast::string_view body,
                                 error_code& ec) override {
    return append(body, ec);
  }
  void on_finish_impl(error_code& ec) override {
    if (sinking() && !(*sink_)({}, true)) ec = client_errc::bad_response;
  }

  // A 200 reply without a content coding goes to the sink, when there is one.
  bool sinking() const noexcept { return sink_ && reply_.status == 200 && !seen_coding_; }

  std::size_t append(beast::string_view body, error_code& ec) {
    if (sinking()) {
      if (!(*sink_)(std::string_view(body.data(), body.size()), false)) ec = client_errc::bad_response;
      return body.size();
    }
    if (body.size() > limit_ - reply_.body.size()) {
      ec = bhttp::error::body_limit;
      return 0;
    }
    reply_.body.append(body.data(), body.size());
    return body.size();
  }

  reply reply_;
  std::string coding_;
  std::size_t limit_;
  const std::function<bool(std::string_view, bool)>* sink_;
  bool seen_coding_ = false;
  bool seen_length_ = false;
  bool bad_length_ = false;
};

// Parses what `buffer` holds (the parsed bytes leave it). True when the reply needs more
// bytes: read some, then call again. False when the reply is complete or `ec` is set. (After
// `need_more` the parser must next see more bytes than before, so it is never called twice on
// the same input.)
//
// In a chunked body, fewer than 5 bytes are never handed over: Beast 1.81 asserts that a
// final chunk it has begun ("0\r\n", kept in the buffer while the trailer is incomplete) comes
// back with at least 5 bytes, and replies trickling in byte by byte would otherwise return it
// 4. Waiting cannot stall a reply: from any point of a chunked body, at least the final chunk's
// 5 bytes ("0\r\n\r\n") are still to come, and the parser keeps the unfinished chunk header.
INFERWIRE_DECL bool parse_some(reply_reader& parser, beast::flat_buffer& buffer, error_code& ec) {
  constexpr std::size_t least_chunk_input = 5;
  if (buffer.size() == 0) return true;
  if (parser.is_header_done() && parser.chunked() && buffer.size() < least_chunk_input)
    return true;
  auto used = parser.put(buffer.data(), ec);
  buffer.consume(used);
  if (ec == bhttp::error::need_more) {
    ec = {};
    return true;
  }
  return !ec && !parser.is_done();  // eager: not done means every byte was taken
}

// The server closed the connection: the end of a reply without a length, or, before any byte
// of it, a connection that was already closed (end_of_stream).
INFERWIRE_DECL void parse_eof(reply_reader& parser, error_code& ec) {
  ec = {};
  if (!parser.got_some()) {
    ec = bhttp::error::end_of_stream;
    return;
  }
  parser.put_eof(ec);
}

// ---------------------------------------------------------------------------------------------
// Connections and the pool.

// An Asio object owned through a plain function pointer: where it is destroyed, nothing of
// its type's I/O machinery is compiled. Code that only makes blocking calls (which use raw
// descriptors) thereby compiles no socket, timer or io_context at all.
template <class T>
using erased_ptr = std::unique_ptr<T, void (*)(T*)>;
template <class T, class... Args>
erased_ptr<T> make_erased(Args&&... args) {
  return {new T(std::forward<Args>(args)...), [](T* p) { delete p; }};
}

template <class Stream>
struct connection {
  // The TCP connection is either a descriptor of a blocking call's (`fd`) or an Asio stream
  // (asynchronous calls, TLS), which takes the descriptor over when an asynchronous call
  // reuses a connection a blocking call opened. A new stream for every TCP connection (TLS
  // needs it); closing the connection destroys it.
  int fd = -1;
  erased_ptr<Stream> stream{nullptr, nullptr};
  beast::flat_buffer buffer;     // bytes read and not yet parsed
  std::optional<reply_reader> parser;
  bool open = false;
  // The deadline of the call holding the connection: when the timer expires it closes the
  // socket, which ends the operation in progress. `mutex` orders that close against the
  // call starting an operation; a wait of an earlier call (older generation) does nothing.
  erased_ptr<net::steady_timer> timer{nullptr, nullptr};
  std::mutex mutex;
  std::uint64_t generation = 0;
  std::atomic<bool> timed_out = false;  // set by the timer; read by the call

  connection() = default;
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;
  ~connection() {
    if (fd >= 0) ::close(fd);
  }
};

// The deadline's close: ends what runs on the connection. A descriptor not yet taken over by
// a stream is only shut down (the stream that takes it over then fails at once).
template <class Stream>
void close_socket(connection<Stream>& c) {
  if (c.fd >= 0) ::shutdown(c.fd, SHUT_RDWR);
  if (!c.stream) return;
  error_code ignored;
  auto& socket = transport<Stream>::lowest(*c.stream);
  socket.shutdown(tcp::socket::shutdown_both, ignored);
  socket.close(ignored);
}

// A call waiting for a pooled connection. `wake` runs under client_state::mutex once
// `handed` or `closed` is set.
template <class Stream>
struct waiter {
  connection<Stream>* handed = nullptr;
  bool closed = false;
  virtual void wake() = 0;

 protected:
  ~waiter() = default;
};

// An asynchronous call's wait: a timer that expires at the deadline or when woken.
template <class Stream>
struct timer_waiter final : waiter<Stream> {
  explicit timer_waiter(const net::any_io_executor& ex) : timer(ex) {}
  net::steady_timer timer;
  void wake() override { timer.expires_at(clock::time_point::min()); }  // even before it waits
};

// A blocking call's wait.
template <class Stream>
struct blocking_waiter final : waiter<Stream> {
  std::condition_variable cv;
  void wake() override { cv.notify_one(); }
};

template <class Stream>
struct client_state {
  // A client made without an executor makes its private io_context when something first needs
  // the executor (an asynchronous call, a TLS call, get_executor()); `own` owns it and goes
  // last. `drain_own` (set with it) runs its ready handlers, for the client's destructor.
  std::shared_ptr<void> own;
  net::io_context* own_ioc = nullptr;
  void (*drain_own)(net::io_context&) = nullptr;
  bool lazy_executor = false;
  std::once_flag own_once;
  net::any_io_executor executor_;  // the client's, or own_ioc's once made

  net::ssl::context* ssl = nullptr;
  std::string host, port, host_field;
  client_options options;

  std::mutex mutex;
  std::vector<std::unique_ptr<connection<Stream>>> all;
  std::vector<connection<Stream>*> idle;
  std::deque<waiter<Stream>*> waiters;
  std::optional<tcp::resolver::results_type> endpoints;

  // Blocking TLS calls on the private io_context: one caller at a time runs it (the leader),
  // the others wait for their completion or for the lead.
  std::mutex drive_mutex;
  std::condition_variable drive_cv;
  bool leading = false;

  const net::any_io_executor& executor() {
    if (lazy_executor) {
      std::call_once(own_once, [this] {
        auto ioc = std::make_shared<net::io_context>();
        executor_ = ioc->get_executor();
        own_ioc = ioc.get();
        drain_own = [](net::io_context& c) {
          c.restart();
          c.poll();
        };
        own = std::move(ioc);
      });
    }
    return executor_;
  }

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
      w->wake();
      return;
    }
    idle.push_back(c);
  }

  void close_idle() {
    std::lock_guard lock(mutex);
    for (auto* c : idle) close(*c);
    for (auto* w : waiters) {
      w->closed = true;
      w->wake();
    }
    waiters.clear();
    endpoints.reset();
  }

  // Closes a connection that no operation is using.
  static void close(connection<Stream>& c) {
    int fd = c.fd >= 0 ? c.fd : c.stream ? transport<Stream>::lowest(*c.stream).native_handle() : -1;
    if (fd >= 0) ::shutdown(fd, SHUT_RDWR);
    if (c.fd >= 0) ::close(std::exchange(c.fd, -1));
    c.stream.reset();
    c.open = false;
    c.buffer.clear();
  }

  // A new stream for a new TCP connection (asynchronous calls).
  void new_stream(connection<Stream>& c) {
    close(c);
    c.stream = transport<Stream>::make(executor(), ssl);
  }

  // An asynchronous call on a connection a blocking call opened: a stream takes the descriptor
  // over. On failure the connection is closed (and opened afresh by the call).
  void adopt(connection<Stream>& c) {
    if constexpr (!transport<Stream>::tls) {
      if (c.stream || c.fd < 0) return;
      ::sockaddr_storage local{};
      ::socklen_t len = sizeof local;
      error_code ec;
      if (::getsockname(c.fd, reinterpret_cast<::sockaddr*>(&local), &len) != 0)
        ec = error_code(errno, net::error::get_system_category());
      c.stream = transport<Stream>::make(executor(), ssl);
      if (!ec)
        transport<Stream>::lowest(*c.stream)
            .assign(local.ss_family == AF_INET6 ? tcp::v6() : tcp::v4(), c.fd, ec);
      if (ec) {
        close(c);
        return;
      }
      c.fd = -1;  // the stream's now
    }
  }

  // The resolved endpoints, kept until a connect fails (then resolved again); empty when none.
  tcp::resolver::results_type cached_endpoints() {
    std::lock_guard lock(mutex);
    return endpoints ? *endpoints : tcp::resolver::results_type{};
  }
  void remember_endpoints(const tcp::resolver::results_type& e) {
    std::lock_guard lock(mutex);
    endpoints = e;
  }
  void forget_endpoints() {
    std::lock_guard lock(mutex);
    endpoints.reset();
  }

  // A call's deadline: its own timeout, else the client's; none when that is 0.
  clock::time_point deadline_of(const call_data& call) const {
    auto t = call.timeout.value_or(options.timeout);
    return t.count() > 0 ? clock::now() + t : clock::time_point::max();
  }
};

// Closes a connection whose deadline passed, unless the call has moved on (a newer generation)
// or the client is gone.
template <class Stream>
struct deadline_expiry {
  std::weak_ptr<client_state<Stream>> state;
  connection<Stream>* conn;
  std::uint64_t generation;

  void operator()(error_code ec) const {
    if (ec) return;
    auto alive = state.lock();
    if (!alive) return;
    std::lock_guard lock(conn->mutex);
    if (conn->generation != generation) return;
    conn->timed_out = true;
    close_socket(*conn);
  }
};

// Errors after which a request on a reused connection was certainly not processed: the server
// had closed the idle connection before it saw the request.
INFERWIRE_DECL bool stale_connection_error(const error_code& ec) {
  return ec == bhttp::error::end_of_stream || ec == net::error::eof ||
         ec == net::error::connection_reset || ec == net::error::broken_pipe ||
         ec == net::error::connection_aborted;
}

// A failed exchange on a reused connection is sent once more, on a new connection, when the
// server had closed the connection before any byte of the reply (and not the deadline).
INFERWIRE_DECL bool send_again(bool reused, bool retried, bool timed_out, const error_code& ec,
                               const std::optional<reply_reader>& parser) {
  return reused && !retried && !timed_out && stale_connection_error(ec) &&
         !(parser && parser->got_some());
}

// Bytes to ask of the next read: what the reply still lacks when its length is known.
INFERWIRE_DECL std::size_t read_size(const reply_reader& parser) {
  constexpr std::size_t unknown = std::size_t{64} << 10, least = 4096,
                        most = std::size_t{1} << 20;
  if (parser.is_header_done())
    if (auto left = parser.content_length_remaining())
      return static_cast<std::size_t>(std::clamp<std::uint64_t>(*left, least, most));
  return unknown;
}

// One non-blocking sendmsg of `buffers` from buffer `next`, byte `offset` on (up to 64 of
// them), advancing both past what the socket took; would_block when it took nothing.
INFERWIRE_DECL error_code send_some(int fd, const std::vector<net::const_buffer>& buffers,
                                    std::size_t& next, std::size_t& offset) {
  constexpr std::size_t batch = 64;
  std::array<::iovec, batch> iov{};
  std::size_t k = 0;
  for (std::size_t i = next; i < buffers.size() && k < batch; ++i, ++k) {
    const std::size_t skip = i == next ? offset : 0;
    iov[k].iov_base = const_cast<char*>(static_cast<const char*>(buffers[i].data()) + skip);
    iov[k].iov_len = buffers[i].size() - skip;
  }
  ::msghdr m{};
  m.msg_iov = iov.data();
  m.msg_iovlen = k;
  ::ssize_t n;
  do n = ::sendmsg(fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) return net::error::would_block;
    return {errno, net::error::get_system_category()};
  }
  auto sent = static_cast<std::size_t>(n);
  while (next < buffers.size() && sent >= buffers[next].size() - offset) {
    sent -= buffers[next].size() - offset;
    ++next;
    offset = 0;
  }
  offset += sent;
  return {};
}

// The complete reply the parser holds, its body decoded (Content-Encoding); `keep` says
// whether the connection may carry another call.
INFERWIRE_DECL error_code take_reply(reply_reader& parser, std::size_t limit, reply& out,
                                     bool& keep) {
  if (parser.bad_header_length()) return client_errc::bad_response;
  keep = parser.keep_alive();
  out = std::move(parser.get());
  auto coding = parser.content_coding();
  if (!coding.empty() && coding != "identity") {
    std::string plain;
    if (http::decompress(out.body, limit, plain)) return client_errc::bad_response;
    out.body = std::move(plain);
  }
  return {};
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
    if (!ec) endpoints_ = results;
    resolver_.reset();
    (*this)(self, ec);
  }
  template <class Self>
  void operator()(Self& self, error_code ec, const tcp::endpoint&) {
    (*this)(self, ec);
  }

  template <class Self>
  void operator()(Self& self, error_code ec = {}, std::size_t n = 0) {
    auto& st = *state_;
    BOOST_ASIO_CORO_REENTER(coro_) {
      if (call_->error) {
        BOOST_ASIO_CORO_YIELD net::post(st.executor(), std::move(self));
        return finish(self, call_->error);
      }
      deadline_ = st.deadline_of(*call_);

      // 1. A connection from the pool, or a turn in the queue.
      {
        std::unique_lock lock(st.mutex);
        conn_ = st.try_acquire();
        if (!conn_) {
          wait_ = std::make_unique<timer_waiter<Stream>>(st.executor());
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
      arm_deadline();

      for (;;) {
        // 2. Connect (and shake hands) when the connection is not open.
        if (conn_->open && !conn_->stream) {
          auto lock = io_lock();
          st.adopt(*conn_);
        }
        reused_ = conn_->open;
        if (!conn_->open) {
          {
            auto lock = io_lock();
            st.new_stream(*conn_);
          }
          endpoints_ = st.cached_endpoints();
          if (endpoints_.empty()) {
            resolver_ = std::make_unique<tcp::resolver>(st.executor());
            BOOST_ASIO_CORO_YIELD resolver_->async_resolve(st.host, st.port, std::move(self));
            if (ec) return fail(self, ec);
            st.remember_endpoints(endpoints_);
          }
          BOOST_ASIO_CORO_YIELD {
            auto endpoints = endpoints_;  // the member moves away with `self`
            auto lock = io_lock();
            net::async_connect(transport<Stream>::lowest(*conn_->stream), endpoints,
                               std::move(self));
          }
          if (ec) {
            st.forget_endpoints();
            return fail(self, ec);
          }
          {
            error_code ignored;
            transport<Stream>::lowest(*conn_->stream).set_option(tcp::no_delay(true), ignored);
          }
          if (transport<Stream>::tls) {
            if (auto e = prepare_tls(); e) return fail(self, e);
            BOOST_ASIO_CORO_YIELD {
              auto lock = io_lock();
              handshake(std::move(self));
            }
            if (ec) return fail(self, ec);
          }
          conn_->open = true;
        }

        // 3. Send, then read until the parser has the whole reply. Over plain TCP a request
        // the socket takes at once goes out in one system call, with no write operation.
        sent_next_ = sent_offset_ = 0;
        if constexpr (!transport<Stream>::tls) {
          auto lock = io_lock();
          ec = send_some(transport<Stream>::lowest(*conn_->stream).native_handle(), call_->buffers,
                         sent_next_, sent_offset_);
          if (ec == net::error::would_block) ec = {};
        }
        if (!ec && sent_next_ < call_->buffers.size()) {
          BOOST_ASIO_CORO_YIELD {
            auto lock = io_lock();
            rest_.assign(call_->buffers.begin() + static_cast<std::ptrdiff_t>(sent_next_), call_->buffers.end());
            rest_.front() += sent_offset_;
            // A view of the list: the write keeps a copy of its buffer sequence.
            net::async_write(*conn_->stream, std::span<const net::const_buffer>(rest_), std::move(self));
          }
        } else if (!ec && conn_->buffer.size() == 0) {
          // Sent this very moment: a read now would find nothing (a wasted system call). The
          // read starts behind the handlers that are ready, which gives the reply time to come.
          BOOST_ASIO_CORO_YIELD net::defer(st.executor(), std::move(self));
        }
        if (!ec) {
          conn_->parser.emplace(st.options.max_response_size, &call_->body_sink);
          while (parse_some(*conn_->parser, conn_->buffer, ec)) {
            BOOST_ASIO_CORO_YIELD {
              auto lock = io_lock();
              conn_->stream->async_read_some(conn_->buffer.prepare(read_size(*conn_->parser)),
                                             std::move(self));
            }
            conn_->buffer.commit(n);
            if (ec == net::error::eof) {
              parse_eof(*conn_->parser, ec);
              break;
            }
            if (ec) break;
          }
        }
        if (!ec) break;
        if (send_again(reused_, retried_, conn_->timed_out, ec, conn_->parser)) {
          retried_ = true;  // the server closed the idle connection: once more, afresh
          close_conn();
          continue;
        }
        return fail(self, ec);
      }

      // 4. Hand the connection back and decode the reply.
      {
        reply r;
        bool keep = false;
        if (auto e = take_reply(*conn_->parser, st.options.max_response_size, r, keep); e)
          return fail(self, e);
        conn_->parser.reset();
        disarm_deadline();
        // A deadline that expired after the last byte arrived has closed the socket: the
        // reply stands, the connection does not.
        if (!keep || conn_->timed_out) close_conn();
        st.release(std::exchange(conn_, nullptr));
        return finish(self, {}, std::move(r));
      }
    }
  }

 private:
  // TLS only (SNI and host-name check, then the handshake).
  error_code prepare_tls() {
    if constexpr (transport<Stream>::tls)
      return transport<Stream>::prepare(*conn_->stream, state_->host,
                                        state_->options.verify_host_name);
    return {};
  }
  template <class Self>
  void handshake(Self&& self) {
    if constexpr (transport<Stream>::tls)
      transport<Stream>::async_handshake(*conn_->stream, std::move(self));
  }

  // Calls with a deadline only: the timer costs more than the rest of a small call.
  void arm_deadline() {
    if (deadline_ == clock::time_point::max()) return;
    auto& c = *conn_;
    if (!c.timer) c.timer = make_erased<net::steady_timer>(state_->executor());
    std::lock_guard lock(c.mutex);
    c.timed_out = false;
    c.timer->expires_at(deadline_);
    c.timer->async_wait(deadline_expiry<Stream>{state_, &c, ++c.generation});
    armed_ = true;
  }
  void disarm_deadline() {
    if (!armed_) return;
    armed_ = false;
    std::lock_guard lock(conn_->mutex);
    ++conn_->generation;
    conn_->timer->cancel();
  }
  // Held while an operation starts on the connection, when a deadline may close it.
  std::unique_lock<std::mutex> io_lock() {
    if (!armed_) return {};
    return std::unique_lock(conn_->mutex);
  }
  void close_conn() {
    auto lock = io_lock();
    client_state<Stream>::close(*conn_);
  }

  template <class Self>
  void fail(Self& self, error_code ec) {
    if (conn_) {
      disarm_deadline();  // from here on the timer leaves the connection alone
      if (conn_->timed_out) ec = beast::error::timeout;
      close_conn();
      conn_->parser.reset();
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
  std::unique_ptr<timer_waiter<Stream>> wait_;
  tcp::resolver::results_type endpoints_;
  std::unique_ptr<tcp::resolver> resolver_;  // only while resolving
  clock::time_point deadline_ = clock::time_point::max();
  bool armed_ = false;
  bool reused_ = false;
  bool retried_ = false;
  std::size_t sent_next_ = 0, sent_offset_ = 0;  ///< how far the first send got
  std::vector<net::const_buffer> rest_;  ///< what the socket did not take at once
  net::coroutine coro_;
};

// ---------------------------------------------------------------------------------------------
// The blocking exchange over plain TCP: the calling thread does the socket I/O itself (each
// call on its own pooled connection, no io_context run, no hand-off between threads), with
// poll(2) bounding every wait by the call's deadline. The steps and the pool are the
// asynchronous exchange's; name resolution is getaddrinfo's and not bounded by the deadline.

class blocking_io {
 public:
  explicit blocking_io(clock::time_point deadline) : deadline_(deadline) {}

  // Waits until `fd` is ready for `events`: timeout when the deadline passes first.
  error_code wait(int fd, short events) const {
    for (;;) {
      int ms = -1;
      if (deadline_ != clock::time_point::max()) {
        auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline_ - clock::now());
        if (left.count() <= 0) return beast::error::timeout;
        ms = static_cast<int>(std::min<std::int64_t>(left.count(), 1 << 30));
      }
      ::pollfd p{fd, events, 0};
      int r = ::poll(&p, 1, ms);
      if (r > 0) return {};
      if (r == 0) return beast::error::timeout;
      if (errno != EINTR) return last_error();
    }
  }

  // Opens a non-blocking TCP socket into `fd` and connects it to `to` (Nagle off).
  error_code connect(int& fd, const tcp::endpoint& to) const {
    fd = ::socket(to.protocol().family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
    if (fd < 0) return last_error();
    int one = 1;
    (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (::connect(fd, to.data(), static_cast<socklen_t>(to.size())) == 0) return {};
    if (errno != EINPROGRESS && errno != EINTR) return last_error();
    if (auto e = wait(fd, POLLOUT); e) return e;
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return last_error();
    return err ? error_code(err, net::error::get_system_category()) : error_code{};
  }

  // getaddrinfo, as Asio's resolver calls it (address_configured), with its error codes.
  static tcp::resolver::results_type resolve(const std::string& host, const std::string& port,
                                             error_code& ec) {
    ::addrinfo hints{};
    hints.ai_flags = AI_ADDRCONFIG;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_protocol = IPPROTO_TCP;
    ::addrinfo* list = nullptr;
    int r = ::getaddrinfo(host.empty() ? nullptr : host.c_str(),
                          port.empty() ? nullptr : port.c_str(), &hints, &list);
    ec = {};
    switch (r) {
      case 0: break;
      case EAI_AGAIN: ec = net::error::host_not_found_try_again; break;
      case EAI_BADFLAGS: ec = net::error::invalid_argument; break;
      case EAI_FAIL: ec = net::error::no_recovery; break;
      case EAI_FAMILY: ec = net::error::address_family_not_supported; break;
      case EAI_MEMORY: ec = net::error::no_memory; break;
      case EAI_NONAME:
#ifdef EAI_ADDRFAMILY
      case EAI_ADDRFAMILY:
#endif
#ifdef EAI_NODATA
#if EAI_NODATA != EAI_NONAME
      case EAI_NODATA:
#endif
#endif
        ec = net::error::host_not_found;
        break;
      case EAI_SERVICE: ec = net::error::service_not_found; break;
      case EAI_SOCKTYPE: ec = net::error::socket_type_not_supported; break;
      default: ec = last_error(); break;
    }
    if (ec) return {};
    auto results = tcp::resolver::results_type::create(list, host, port);
    ::freeaddrinfo(list);
    return results;
  }

  // Sends every byte of `buffers`.
  error_code send(int fd, const std::vector<net::const_buffer>& buffers) const {
    std::size_t next = 0, offset = 0;  // the first buffer not fully sent, and how much of it is
    while (next < buffers.size()) {
      error_code e = send_some(fd, buffers, next, offset);
      if (e == net::error::would_block) e = wait(fd, POLLOUT);
      if (e) return e;
    }
    return {};
  }

  // Reads until `parser` has a whole reply (or an error).
  error_code receive(int fd, reply_reader& parser, beast::flat_buffer& buffer) const {
    error_code ec;
    while (parse_some(parser, buffer, ec)) {
      auto space = buffer.prepare(read_size(parser));
      auto n = ::recv(fd, space.data(), space.size(), MSG_DONTWAIT);
      if (n > 0) {
        buffer.commit(static_cast<std::size_t>(n));
        continue;
      }
      if (n == 0) {
        parse_eof(parser, ec);
        break;
      }
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return last_error();
      if (auto e = wait(fd, POLLIN); e) return e;
    }
    return ec;
  }

 private:
  static error_code last_error() { return {errno, net::error::get_system_category()}; }
  clock::time_point deadline_;
};

template <class Stream>
reply blocking_exchange(client_state<Stream>& st, call_data& call, error_code& ec) {
  static_assert(!transport<Stream>::tls);
  ec = call.error;
  if (ec) return {};
  const auto deadline = st.deadline_of(call);
  blocking_io io(deadline);

  // 1. A connection from the pool, or a turn in the queue.
  connection<Stream>* conn = nullptr;
  {
    std::unique_lock lock(st.mutex);
    conn = st.try_acquire();
    if (!conn) {
      blocking_waiter<Stream> w;
      st.waiters.push_back(&w);
      auto woken = [&] { return w.handed || w.closed; };
      if (deadline == clock::time_point::max())
        w.cv.wait(lock, woken);
      else
        w.cv.wait_until(lock, deadline, woken);
      conn = w.handed;
      if (!conn) {
        std::erase(st.waiters, &w);
        ec = w.closed ? error_code(client_errc::client_closed) : error_code(beast::error::timeout);
        return {};
      }
    }
  }
  auto fail = [&](error_code e) {
    client_state<Stream>::close(*conn);
    conn->parser.reset();
    st.release(conn);
    ec = e;
    return reply{};
  };

  bool retried = false;
  for (;;) {
    // 2. Connect when the connection is not open (a descriptor of this call's own; an open
    // connection may be an asynchronous call's stream, whose descriptor serves as well).
    bool reused = conn->open;
    if (!conn->open) {
      auto endpoints = st.cached_endpoints();
      if (endpoints.empty()) {
        endpoints = blocking_io::resolve(st.host, st.port, ec);
        if (ec) return fail(ec);
        st.remember_endpoints(endpoints);
      }
      error_code e = net::error::host_not_found;
      for (const auto& entry : endpoints) {
        client_state<Stream>::close(*conn);
        e = io.connect(conn->fd, entry.endpoint());
        if (!e || e == beast::error::timeout) break;
      }
      if (e) {
        st.forget_endpoints();
        return fail(e);
      }
      conn->open = true;
    }

    // 3. Send, then read until the parser has the whole reply.
    int fd = conn->fd >= 0 ? conn->fd : transport<Stream>::lowest(*conn->stream).native_handle();
    error_code e = io.send(fd, call.buffers);
    if (!e) {
      conn->parser.emplace(st.options.max_response_size, &call.body_sink);
      e = io.receive(fd, *conn->parser, conn->buffer);
    }
    if (!e) break;
    if (send_again(reused, retried, false, e, conn->parser)) {
      retried = true;  // the server closed the idle connection: once more, afresh
      client_state<Stream>::close(*conn);
      continue;
    }
    return fail(e);
  }

  // 4. Hand the connection back and decode the reply.
  reply r;
  bool keep = false;
  if (auto e = take_reply(*conn->parser, st.options.max_response_size, r, keep); e)
    return fail(e);
  conn->parser.reset();
  if (!keep) client_state<Stream>::close(*conn);
  st.release(conn);
  return r;
}

// ---------------------------------------------------------------------------------------------
// Building requests.

// A path segment or query part: characters a path segment may carry pass as they are.
// What a path segment or query part keeps as it is.
inline constexpr auto segment_chars = boost::urls::pchars - boost::urls::grammar::lut_chars("&=+");

/// Appends `s` percent-encoded as a path segment, without a temporary string.
INFERWIRE_DECL void append_segment(std::string& out, std::string_view s) {
  const std::size_t n = boost::urls::encoded_size(s, segment_chars);
  const std::size_t at = out.size();
  out.resize(at + n);
  boost::urls::encode(out.data() + at, n, s, segment_chars);
}

INFERWIRE_DECL std::string encode_segment(std::string_view s) {
  std::string out;
  append_segment(out, s);
  return out;
}

/// "/v2/models/<name>[/versions/<version>]<suffix>", built in one string.
INFERWIRE_DECL std::string model_path(const model_id& m, std::string_view suffix = {}) {
  std::string t;
  t.reserve(32 + m.name.size() + m.version.size() + suffix.size());
  t += "/v2/models/";
  append_segment(t, m.name);
  if (!m.version.empty()) {
    t += "/versions/";
    append_segment(t, m.version);
  }
  t += suffix;
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
std::shared_ptr<client_state<Stream>> make_state(std::optional<net::any_io_executor> ex,
                                                 net::ssl::context* ssl,
                                                 std::string host, std::string port,
                                                 client_options opts) {
  auto s = std::make_shared<client_state<Stream>>();
  s->lazy_executor = !ex;
  if (ex) s->executor_ = std::move(*ex);
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
  requires(!detail::transport<Stream>::tls)
    : state_(detail::make_state<Stream>(std::move(ex), nullptr, std::move(host), std::move(port),
                                        std::move(opts))) {}

template <class Stream>
basic_client<Stream>::basic_client(std::string host, std::string port, client_options opts)
  requires(!detail::transport<Stream>::tls)
    : state_(detail::make_state<Stream>(std::nullopt, nullptr, std::move(host), std::move(port),
                                        std::move(opts))) {}

template <class Stream>
basic_client<Stream>::basic_client(executor_type ex, net::ssl::context& ssl, std::string host,
                                   std::string port, client_options opts)
  requires(detail::transport<Stream>::tls)
    : state_(detail::make_state<Stream>(std::move(ex), &ssl, std::move(host), std::move(port),
                                        std::move(opts))) {}

template <class Stream>
basic_client<Stream>::basic_client(net::ssl::context& ssl, std::string host, std::string port,
                                   client_options opts)
  requires(detail::transport<Stream>::tls)
    : state_(detail::make_state<Stream>(std::nullopt, &ssl, std::move(host), std::move(port),
                                        std::move(opts))) {}

template <class Stream>
basic_client<Stream>::~basic_client() {
  if (!state_) return;  // moved from
  close();
  if (state_->drain_own) {
    // The private io_context, once made: the closed connections' handlers finish, then it goes
    // after the state (operations it still holds keep the state until it does).
    state_->drain_own(*state_->own_ioc);
    auto own = std::move(state_->own);
    state_.reset();
  }
}

template <class Stream>
auto basic_client<Stream>::get_executor() const noexcept -> executor_type {
  return state_->executor();
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
  auto ex = state->executor();
  detail::erased_completion<decltype(handler)> completion{std::move(handler), ex};
  net::async_compose<decltype(completion), void(error_code, detail::reply)>(
      detail::exchange_op<Stream>(std::move(state), std::move(call)), completion, ex);
}

namespace detail {
// A blocking call's completion: the reply handed to the waiting caller.
struct blocking_wait {
  std::mutex& mutex;
  std::condition_variable& cv;
  error_code ec;
  reply r;
  bool done = false;
};
struct blocking_handler {
  blocking_wait* wait;
  void operator()(error_code ec, reply r) const {
    std::lock_guard lock(wait->mutex);
    wait->ec = ec;
    wait->r = std::move(r);
    wait->done = true;
    wait->cv.notify_all();
  }
};
}  // namespace detail

template <class Stream>
detail::reply basic_client<Stream>::exchange_blocking(detail::call_ptr call, error_code& ec) {
  auto& st = *state_;
  // The executor is run by the caller's threads; this thread must not be one of them (a
  // connection it waits for may be held by a call only that thread can finish).
  if (!st.lazy_executor && st.executor_.template target<net::io_context::executor_type>() &&
      st.executor_.template target<net::io_context::executor_type>()->running_in_this_thread()) {
    ec = client_errc::sync_on_own_executor;
    return {};
  }
  if constexpr (!detail::transport<Stream>::tls) {
    return detail::blocking_exchange(st, *call, ec);
  } else {
    // TLS: the asynchronous exchange, waited for.
    detail::blocking_wait wait{st.drive_mutex, st.drive_cv, {}, {}, false};
    net::any_completion_handler<void(error_code, detail::reply)> handler(
        detail::blocking_handler{&wait});
    if (st.lazy_executor) (void)st.executor();  // makes own_ioc
    if (!st.own_ioc) {
      exchange(state_, std::move(call), std::move(handler));
      std::unique_lock lock(st.drive_mutex);
      st.drive_cv.wait(lock, [&] { return wait.done; });
    } else {
      // Leader/follower over the private io_context: whoever runs it completes everyone's
      // calls.
      auto guard = net::make_work_guard(*st.own_ioc);
      exchange(state_, std::move(call), std::move(handler));
      std::unique_lock lock(st.drive_mutex);
      while (!wait.done) {
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
    ec = wait.ec;
    return std::move(wait.r);
  }
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
  return {detail::get_call(*state_, detail::model_path(m, "/ready"), o), &detail::parse_health};
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
  return {detail::get_call(*state_, detail::model_path(m, "/config"), o),
          &detail::parse_json_as<boost::json::value>};
}

template <class Stream>
auto basic_client<Stream>::prepare_infer(model_id m, const v2::infer_request& request,
                                         const call_options& o) -> prepared<infer_result> {
  auto c = detail::begin_call(*state_, "POST", detail::model_path(m, "/infer"), o);
  c->use_infer_body = true;
  // Like Triton's clients: with no outputs listed, every output comes back binary.
  status st;
  if (request.outputs.empty() && !request.raw_binary &&
      !request.parameters.contains("binary_data_output")) {
    if (request.parameters.empty()) {
      static const parameter_map only_binary{{"binary_data_output", true}};
      st = v2::encode_infer_request(request, only_binary, c->infer_body);
    } else {
      parameter_map parameters = request.parameters;
      parameters.set("binary_data_output", true);
      st = v2::encode_infer_request(request, parameters, c->infer_body);
    }
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
  std::string target = m.name.empty() ? "/v2/models/stats" : detail::model_path(m, "/stats");
  return {detail::get_call(*state_, std::move(target), o),
          &detail::parse_json_as<v2::statistics_response>};
}

template <class Stream>
auto basic_client<Stream>::prepare_generate(model_id m, const boost::json::object& request, const call_options& o)
    -> prepared<boost::json::object> {
  return {detail::post_call(*state_, detail::model_path(m, "/generate"), boost::json::serialize(request), o),
          &detail::parse_json_as<boost::json::object>};
}

template <class Stream>
auto basic_client<Stream>::prepare_generate_stream(model_id m, const boost::json::object& request,
                                                   const call_options& o) -> prepared<std::vector<boost::json::object>> {
  return {detail::post_call(*state_, detail::model_path(m, "/generate_stream"), boost::json::serialize(request), o),
          &detail::parse_generate_events};
}

template <class Stream>
auto basic_client<Stream>::prepare_generate_stream(model_id m, const boost::json::object& request,
                                                   std::function<void(boost::json::object&&)> on_event,
                                                   const call_options& o) -> prepared<void> {
  auto c = detail::post_call(*state_, detail::model_path(m, "/generate_stream"), boost::json::serialize(request), o);
  c->body_sink = detail::sse_splitter(std::move(on_event));
  return {std::move(c), &detail::parse_empty};
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
