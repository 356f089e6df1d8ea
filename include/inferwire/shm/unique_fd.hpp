// SPDX-License-Identifier: Apache-2.0
// inferwire/shm/unique_fd.hpp — an owned file descriptor (closed when destroyed), as the
// descriptor-passing parts of the library (CUDA VMM regions, GMS) hand them around, and the
// walk over the descriptors a received message carried (SCM_RIGHTS).
#ifndef INFERWIRE_SHM_UNIQUE_FD_HPP
#define INFERWIRE_SHM_UNIQUE_FD_HPP

#include <cstddef>
#include <cstring>
#include <utility>

#include <sys/socket.h>
#include <unistd.h>

namespace inferwire::shm {

/// An owned file descriptor.
class unique_fd {
 public:
  unique_fd() = default;
  explicit unique_fd(int fd) noexcept : fd_(fd) {}
  unique_fd(unique_fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  unique_fd& operator=(unique_fd&& o) noexcept {
    if (this != &o) reset(std::exchange(o.fd_, -1));
    return *this;
  }
  ~unique_fd() { reset(); }
  int get() const noexcept { return fd_; }
  int release() noexcept { return std::exchange(fd_, -1); }
  void reset(int fd = -1) noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }
  explicit operator bool() const noexcept { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

namespace detail {

/// Calls `take(fd)` for each descriptor (SCM_RIGHTS) that the message `recvmsg` filled in
/// carried, in order; the caller owns them from then on.
template <class Take>
void for_each_received_fd(msghdr& msg, Take&& take) {
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      take(fd);
    }
  }
}

}  // namespace detail

}  // namespace inferwire::shm

#endif
