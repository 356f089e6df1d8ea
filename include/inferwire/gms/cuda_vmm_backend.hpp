// SPDX-License-Identifier: Apache-2.0
// inferwire/gms/cuda_vmm_backend.hpp
//
// cuda_vmm_backend, the GMS server's memory on a GPU (a gms::backend): cuMemCreate with a
// POSIX-fd handle type and the driver's minimum granularity; the fd is exported once at
// allocation time and dup'd per export; no CUDA context is created or made current (only
// cuInit, granularity, create, export, release); out-of-memory is reported for the server's
// retry loop, any other error throws cuda_vmm_error.
#ifndef INFERWIRE_GMS_CUDA_VMM_BACKEND_HPP
#define INFERWIRE_GMS_CUDA_VMM_BACKEND_HPP

#include <inferwire/gms/backend.hpp>
#include <inferwire/gms/cuda_vmm_driver.hpp>

#include <cerrno>
#include <cstddef>
#include <string>
#include <system_error>

#include <fcntl.h>
#include <unistd.h>

namespace inferwire::gms {

class cuda_vmm_backend {
 public:
  struct handle {
    CUmemGenericAllocationHandle memory = 0;
    int fd = -1;  ///< exported once, dup'd per export
    std::size_t size = 0;
  };

  explicit cuda_vmm_backend(int device) : device_(device), granularity_(detail::vmm_open_device(device)) {}

  std::size_t granularity() const noexcept { return granularity_; }
  int device() const noexcept { return device_; }
  std::string name() const { return "cuda_vmm"; }
  /// Bytes held by live allocations.
  std::size_t allocated() const noexcept { return allocated_; }

  alloc_status allocate(std::size_t aligned_size, handle& out) {
    const auto& d = detail::vmm();
    const CUmemAllocationProp prop = detail::vmm_prop(device_);
    handle h;
    const CUresult r = d.create(&h.memory, aligned_size, &prop, 0);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) return alloc_status::out_of_memory;
    detail::vmm_check(r, "cuMemCreate");
    const CUresult e = d.export_handle(&h.fd, h.memory, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    if (e != CUDA_SUCCESS) {
      d.release(h.memory);
      detail::vmm_check(e, "cuMemExportToShareableHandle");
    }
    h.size = aligned_size;
    allocated_ += aligned_size;
    out = h;
    return alloc_status::ok;
  }

  int export_fd(const handle& h) {
    const int fd = ::fcntl(h.fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) throw std::system_error(errno, std::generic_category(), "dup");
    return fd;
  }

  /// The descriptor exported at allocation (still owned here).
  int lent_fd(const handle& h) const noexcept { return h.fd; }

  void release(handle& h) noexcept {
    if (h.fd >= 0) ::close(h.fd);
    if (h.memory) {
      detail::vmm().release(h.memory);
      allocated_ -= h.size;
    }
    h = {};
  }

 private:
  int device_;
  std::size_t granularity_;
  std::size_t allocated_ = 0;
};

static_assert(lending_backend<cuda_vmm_backend>);

}  // namespace inferwire::gms

#endif
