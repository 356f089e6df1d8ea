// SPDX-License-Identifier: Apache-2.0
// inferwire/http/impl/async_exchange.hpp — the asynchronous exchange of one call: a connection from the
// pool, the request out, the reply in, on the client's executor.
// Part of the bodies of client.hpp (impl/client.hpp includes it).
#ifndef INFERWIRE_HTTP_IMPL_ASYNC_EXCHANGE_HPP
#define INFERWIRE_HTTP_IMPL_ASYNC_EXCHANGE_HPP

#include <inferwire/http/impl/connection_pool.hpp>

#include <boost/asio/connect.hpp>
#include <boost/asio/coroutine.hpp>
#include <boost/asio/defer.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>

#include <mutex>
#include <span>

namespace inferwire::http::detail {

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
          conn_->parser.emplace(st.options.max_response_size, &call_->body_sink, call_->collect_events);
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


}  // namespace inferwire::http::detail

#endif
