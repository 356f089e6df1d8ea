// SPDX-License-Identifier: Apache-2.0
// inferwire/gms/memfd_backend.hpp
//
// A GMS server backend on plain memory: each allocation is a `memfd_create` object of the
// aligned size, exported as a duplicate of its fd. Real memory, real descriptors and real
// SCM_RIGHTS passing, so the whole protocol runs without a GPU. An optional capacity makes
// allocations beyond it report out-of-memory, which exercises the server's retry path.
//
// It models gms::read_only_exporting_backend (see <inferwire/gms/backend.hpp>): failures other
// than out-of-memory throw std::system_error, which the server answers as errors, and
// export_read_only_fd gives read-only sessions descriptors that cannot write.
//
// Each allocation keeps its descriptor (and, once a reader asked, a read-only one) for its
// life: the server sends those directly when a reply can go out at once (lending_backend).
//
// Every object is sealed against shrinking and growing once sized (F_SEAL_SHRINK,
// F_SEAL_GROW): no holder of a descriptor, the server included, can truncate it, so no mapping
// of it can ever fault with SIGBUS. Readers get descriptors opened read-only; and since a
// memfd's inode lets anyone holding a descriptor reopen it read-write through /proc, a commit
// seals each object against new writes (F_SEAL_FUTURE_WRITE, then F_SEAL_SEAL): from then on
// no descriptor maps it writable or writes it, while the writer's mappings made before the
// commit stay as they were.
#ifndef INFERWIRE_GMS_MEMFD_BACKEND_HPP
#define INFERWIRE_GMS_MEMFD_BACKEND_HPP

#include <inferwire/gms/backend.hpp>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <system_error>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010  // Linux 5.1
#endif

namespace inferwire::gms {

class memfd_backend {
 public:
  struct handle {
    int fd = -1;
    std::size_t size = 0;
    /// The object opened read-only, on the first read-only export (readers import the same
    /// allocations again and again; reopening through /proc costs a path walk each time).
    mutable int read_only_fd = -1;
  };

  /// `granularity` must be a power of two multiple of the page size; `capacity` bounds the
  /// bytes allocated at once (out_of_memory beyond it).
  explicit memfd_backend(std::size_t granularity = std::size_t{2} << 20,
                         std::size_t capacity = std::numeric_limits<std::size_t>::max())
      : granularity_(granularity), capacity_(capacity) {
    if (granularity == 0 || (granularity & (granularity - 1)) != 0)
      throw std::invalid_argument("memfd_backend: granularity must be a power of two");
  }

  std::size_t granularity() const noexcept { return granularity_; }
  std::size_t allocated() const noexcept { return allocated_; }
  std::string name() const { return "memfd"; }

  alloc_status allocate(std::size_t aligned_size, handle& out) {
    if (aligned_size > capacity_ - allocated_) return alloc_status::out_of_memory;
    int fd = ::memfd_create("gms-allocation", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) throw std::system_error(errno, std::generic_category(), "memfd_create");
    if (::ftruncate(fd, static_cast<off_t>(aligned_size)) != 0) {
      int err = errno;
      ::close(fd);
      if (err == ENOMEM || err == ENOSPC) return alloc_status::out_of_memory;
      throw std::system_error(err, std::generic_category(), "ftruncate");
    }
    if (::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0) {
      int err = errno;
      ::close(fd);
      throw std::system_error(err, std::generic_category(), "F_ADD_SEALS");
    }
    out = {fd, aligned_size};
    allocated_ += aligned_size;
    return alloc_status::ok;
  }

  /// A new descriptor of the allocation (a dup of the cached one).
  int export_fd(const handle& h) {
    int fd = ::fcntl(h.fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) throw std::system_error(errno, std::generic_category(), "dup");
    return fd;
  }

  /// A new descriptor of the allocation that only reads: a dup of lent_read_only_fd.
  int export_read_only_fd(const handle& h) {
    int fd = ::fcntl(lent_read_only_fd(h), F_DUPFD_CLOEXEC, 0);
    if (fd < 0) throw std::system_error(errno, std::generic_category(), "dup");
    return fd;
  }

  /// At commit: no new writable mapping or write through any descriptor of the allocation, and
  /// no further seals (a client that added F_SEAL_SEAL first makes this throw: the commit fails).
  void seal_for_readers(const handle& h) {
    const int seals = ::fcntl(h.fd, F_GET_SEALS);
    if (seals >= 0 && (seals & F_SEAL_FUTURE_WRITE) && (seals & F_SEAL_SEAL)) return;  // sealed already
    if (::fcntl(h.fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE | F_SEAL_SEAL) != 0)
      throw std::system_error(errno, std::generic_category(), "F_ADD_SEALS(F_SEAL_FUTURE_WRITE)");
  }

  /// The allocation's own descriptor (still owned here).
  int lent_fd(const handle& h) const noexcept { return h.fd; }

  /// The object reopened O_RDONLY through /proc/self/fd (a dup of the original would share its
  /// read-write mode), once per allocation; still owned here.
  int lent_read_only_fd(const handle& h) {
    if (h.read_only_fd < 0) {
      const std::string path = "/proc/self/fd/" + std::to_string(h.fd);
      h.read_only_fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (h.read_only_fd < 0) throw std::system_error(errno, std::generic_category(), "open(" + path + ")");
    }
    return h.read_only_fd;
  }

  void release(handle& h) noexcept {
    if (h.fd >= 0) {
      ::close(h.fd);
      allocated_ -= h.size;
    }
    if (h.read_only_fd >= 0) ::close(h.read_only_fd);
    h = {};
  }

 private:
  std::size_t granularity_;
  std::size_t capacity_;
  std::size_t allocated_ = 0;
};

static_assert(read_only_exporting_backend<memfd_backend> && lending_backend<memfd_backend> &&
              sealing_backend<memfd_backend>);

}  // namespace inferwire::gms

#endif
