// SPDX-License-Identifier: Apache-2.0
// The HTTP frontend's listener (one per port: the v2 endpoints, the metrics) and the memory of a
// large request body (body_buffer), which a connection reads straight into.
#include "http.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <cerrno>

#include <sys/mman.h>
#include <sys/socket.h>

namespace inferwire::server {

using rest::body_buffer;
using rest::socket_type;
namespace net = boost::asio;
namespace beast = boost::beast;
using tcp = net::ip::tcp;

// --- body_buffer -------------------------------------------------------------------------------

/// Makes room for more bytes (at least one): false when the budget or the system refuses.
bool body_buffer::grow() {

  const std::size_t want =
      std::min(length_, std::max(first_capacity, capacity_ > length_ / 2 ? length_ : 2 * capacity_));
  if (want <= capacity_ || !charge_.add(want - capacity_)) return false;
  void* p = data_ ? ::mremap(data_, capacity_, want, MREMAP_MAYMOVE)
                  : ::mmap(nullptr, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    charge_.sub(want - capacity_);
    return false;
  }
  populate_pages(static_cast<char*>(p) + capacity_, want - capacity_);
  data_ = static_cast<char*>(p);
  capacity_ = want;
  return true;
}

// --- listener ------------------------------------------------------------------------------

class listener : public std::enable_shared_from_this<listener> {
 public:
  listener(server_state& s, bool metrics)
      : s_(s), acceptor_(*s.ios.front()), backoff_(*s.ios.front()), metrics_(metrics) {}

  status open(const std::string& address, int port, int& bound) {
    beast::error_code ec;
    auto addr = net::ip::make_address(address, ec);
    if (ec) return {errc::invalid_arg, "invalid address '" + address + "'"};
    tcp::endpoint ep(addr, static_cast<unsigned short>(port));
    acceptor_.open(ep.protocol(), ec);
    if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec && !metrics_ && s_.opts.reuse_http_port) {  // --reuse-http-port
      const int on = 1;
      if (::setsockopt(acceptor_.native_handle(), SOL_SOCKET, SO_REUSEPORT, &on, sizeof on) != 0)
        ec.assign(errno, boost::system::system_category());
    }
    if (!ec) acceptor_.bind(ep, ec);
    if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
    if (ec)
      return {errc::unavailable, "failed to listen on " + address + ":" + std::to_string(port) +
                                     ": " + ec.message()};
    bound = acceptor_.local_endpoint().port();
    return {};
  }

  void accept() {
    // The metrics port's connections stay on the first thread; the others go where the
    // balance says (the thread is chosen before the connection arrives: its socket is made
    // on that thread's io_context).
    const std::size_t thread = metrics_ ? 0 : s_.io_threads->choose();
    acceptor_.async_accept(*s_.ios[thread],
                           [self = shared_from_this(), thread](beast::error_code ec, socket_type sock) {
                             if (ec == net::error::operation_aborted || !self->acceptor_.is_open())
                               return;
                             if (!ec) {
                               sock.set_option(tcp::no_delay(true), ec);
                               rest::serve_connection(std::move(sock), self->s_, self->metrics_, thread);
                             } else if (ec.category() == boost::system::system_category() &&
                                        is_resource_exhaustion(ec.value())) {
                               // Out of descriptors or memory: the pending connection stays in
                               // the backlog; try again shortly instead of spinning on it.
                               return self->accept_later();
                             }
                             self->accept();
                           });
  }

  void accept_later() {
    backoff_.expires_after(std::chrono::milliseconds(100));
    backoff_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (!ec && self->acceptor_.is_open()) self->accept();
    });
  }

  void stop() {
    net::post(acceptor_.get_executor(), [self = shared_from_this()] {
      beast::error_code ec;
      self->acceptor_.close(ec);
      self->backoff_.cancel();
    });
  }

 private:
  server_state& s_;
  tcp::acceptor acceptor_;
  net::steady_timer backoff_;
  bool metrics_;
};

std::shared_ptr<listener> start_listener(server_state& s, const std::string& address, int port,
                                         bool metrics, status& st, int& bound_port) {
  auto l = std::make_shared<listener>(s, metrics);
  if ((st = l->open(address, port, bound_port))) return nullptr;
  l->accept();
  return l;
}

void stop_listener(listener& l) { l.stop(); }

}  // namespace inferwire::server
