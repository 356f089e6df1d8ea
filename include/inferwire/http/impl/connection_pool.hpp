// SPDX-License-Identifier: Apache-2.0
// inferwire/http/impl/connection_pool.hpp — connections, the pool that keeps them, the state a client's
// calls share, and the expiry of a call's deadline.
// Part of the bodies of client.hpp (impl/client.hpp includes it).
#ifndef INFERWIRE_HTTP_IMPL_CONNECTION_POOL_HPP
#define INFERWIRE_HTTP_IMPL_CONNECTION_POOL_HPP

#include <inferwire/http/impl/reply_reader.hpp>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include <sys/socket.h>
#include <sys/uio.h>
#include <poll.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <deque>
#include <mutex>

namespace inferwire::http::detail {

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


}  // namespace inferwire::http::detail

#endif
