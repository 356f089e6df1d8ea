// SPDX-License-Identifier: Apache-2.0
// inferwire/shm/unique_fd.hpp — an owned file descriptor (closed when destroyed), as the
// descriptor-passing parts of the library (CUDA VMM regions, GMS) hand them around.
#ifndef INFERWIRE_SHM_UNIQUE_FD_HPP
#define INFERWIRE_SHM_UNIQUE_FD_HPP

#include <utility>

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

}  // namespace inferwire::shm

#endif
