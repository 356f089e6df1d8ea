// SPDX-License-Identifier: Apache-2.0
#include "ready_set.hpp"

#include <cerrno>

#include <sys/epoll.h>
#include <unistd.h>

namespace inferwire::server {

ready_set::ready_set(boost::asio::io_context& io) : boost::asio::io_context::service(io) {
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) return;
  boost::system::error_code ec;
  watch_.emplace(io);
  watch_->assign(epoll_fd_, ec);
  if (ec) watch_.reset();
}

ready_set::~ready_set() {
  shutdown();
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
}

void ready_set::shutdown() {
  // Before the io_context's other services go (its pending handlers, connections among them,
  // are destroyed after this, and the connections leave the set then): the event loop lets go
  // of the descriptor, which the set keeps until it is destroyed.
  if (!watch_) return;
  try {
    watch_->release();
  } catch (...) {
  }
  watch_.reset();
}

bool ready_set::add(member& m, int fd) noexcept {
  if (!watch_ || m.fd_ >= 0 || fd < 0) return false;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP | EPOLLET;
  ev.data.ptr = &m;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) return false;
  m.fd_ = fd;
  m.waiting_ = m.ready_ = false;
  return true;
}

void ready_set::remove(member& m) noexcept {
  if (m.fd_ < 0) return;
  if (m.waiting_) --waiting_;
  epoll_event ev{};  // (a non-null event for kernels before 2.6.9)
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, m.fd_, &ev);
  m.fd_ = -1;
  m.waiting_ = m.ready_ = false;
}

bool ready_set::wait(member& m) {
  if (m.fd_ < 0 || !watch_) return false;
  if (m.ready_) {
    m.ready_ = false;
    return false;
  }
  if (!m.waiting_) {
    m.waiting_ = true;
    ++waiting_;
  }
  arm();
  return true;
}

void ready_set::arm() {
  if (armed_ || waiting_ == 0 || !watch_) return;
  armed_ = true;
  watch_->async_wait(boost::asio::posix::stream_descriptor::wait_read, [this](boost::system::error_code ec) {
    armed_ = false;
    if (!ec) drain();
  });
}

void ready_set::drain() {
  epoll_event events[64];
  for (;;) {
    const int n = ::epoll_wait(epoll_fd_, events, 64, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    // Each reported member is told now (a waiting one starts its read, which never completes
    // inline, so no member leaves the set while the list is walked) or later (a busy one).
    for (int i = 0; i < n; ++i) {
      auto& m = *static_cast<member*>(events[i].data.ptr);
      if (m.waiting_) {
        m.waiting_ = false;
        --waiting_;
        m.on_ready();
      } else {
        m.ready_ = true;
      }
    }
    if (n < 64) break;
  }
  arm();
}

}  // namespace inferwire::server
