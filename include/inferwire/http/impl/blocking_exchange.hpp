// SPDX-License-Identifier: Apache-2.0
// inferwire/http/impl/blocking_exchange.hpp — the blocking exchange of one call over plain TCP, on the
// calling thread.
// Part of the bodies of client.hpp (impl/client.hpp includes it).
#ifndef INFERWIRE_HTTP_IMPL_BLOCKING_EXCHANGE_HPP
#define INFERWIRE_HTTP_IMPL_BLOCKING_EXCHANGE_HPP

#include <inferwire/http/impl/connection_pool.hpp>

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>

namespace inferwire::http::detail {

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
      if (expired()) return beast::error::timeout;
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
      if (expired()) return beast::error::timeout;
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
  // Looked at before every read and write: a server that keeps sending never lets a wait run
  // out, so the waits alone would not end the call.
  bool expired() const { return deadline_ != clock::time_point::max() && clock::now() >= deadline_; }
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
      conn->parser.emplace(st.options.max_response_size, &call.body_sink, call.collect_events);
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


}  // namespace inferwire::http::detail

#endif
