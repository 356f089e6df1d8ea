// SPDX-License-Identifier: Apache-2.0
// inferwire/gms/cuda_vmm_mapper.hpp
//
// cuda_vmm_mapper, a GMS client's address space on a GPU (a gms::range_access_mapper): import
// the fd (closed right after), reserve VA, map, set access (read-only for RO sessions,
// read-write for RW; one call for a whole contiguous range when many allocations are mapped at
// once), unmap + release keeping the VA. Failures throw cuda_vmm_error.
#ifndef INFERWIRE_GMS_CUDA_VMM_MAPPER_HPP
#define INFERWIRE_GMS_CUDA_VMM_MAPPER_HPP

#include <inferwire/gms/backend.hpp>
#include <inferwire/gms/cuda_vmm_driver.hpp>

#include <cstddef>
#include <cstdint>

namespace inferwire::gms {

class cuda_vmm_mapper {
 public:
  using handle = CUmemGenericAllocationHandle;

  /// Opens `device` and makes a context current on this thread when none is (its primary
  /// context; PyTorch programs already have one).
  explicit cuda_vmm_mapper(int device = 0) : device_(device), granularity_(detail::vmm_open_device(device)) {
    const auto& d = detail::vmm();
    CUcontext ctx = nullptr;
    detail::vmm_check(d.ctx_get_current(&ctx), "cuCtxGetCurrent");
    if (!ctx) {
      detail::vmm_check(d.primary_ctx_retain(&ctx, detail::vmm_device(device)), "cuDevicePrimaryCtxRetain");
      detail::vmm_check(d.ctx_set_current(ctx), "cuCtxSetCurrent");
    }
  }

  std::size_t granularity() const noexcept { return granularity_; }
  int device() const noexcept { return device_; }

  std::uintptr_t reserve(std::size_t size) {
    CUdeviceptr va = 0;
    detail::vmm_check(detail::vmm().reserve(&va, size, granularity_, 0, 0), "cuMemAddressReserve");
    return static_cast<std::uintptr_t>(va);
  }
  void free_va(std::uintptr_t va, std::size_t size) noexcept {
    detail::vmm().address_free(static_cast<CUdeviceptr>(va), size);
  }

  /// Imports the allocation; the descriptor is closed right after.
  handle import(unique_fd fd, std::size_t /*size*/) {
    handle h = 0;
    const CUresult r = detail::vmm().import_handle(
        &h, reinterpret_cast<void*>(static_cast<std::uintptr_t>(fd.get())), CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    fd.reset();
    detail::vmm_check(r, "cuMemImportFromShareableHandle");
    return h;
  }

  /// Maps and sets the access of this device.
  void map(std::uintptr_t va, std::size_t size, handle& h, bool writable) {
    map_without_access(va, size, h);
    try {
      set_access(va, size, writable);
    } catch (...) {
      detail::vmm().unmap(static_cast<CUdeviceptr>(va), size);
      throw;
    }
  }

  /// Maps only; the range has no access until set_access (one call may cover many mappings).
  void map_without_access(std::uintptr_t va, std::size_t size, handle& h) {
    detail::vmm_check(detail::vmm().map(static_cast<CUdeviceptr>(va), size, 0, h, 0), "cuMemMap");
  }

  /// Read-only or read-write access for this device over `[va, va + size)`, which must be
  /// fully mapped.
  void set_access(std::uintptr_t va, std::size_t size, bool writable) {
    const CUmemAccessDesc access = detail::vmm_access(device_, writable);
    detail::vmm_check(detail::vmm().set_access(static_cast<CUdeviceptr>(va), size, &access, 1), "cuMemSetAccess");
  }

  /// Releases a handle that was imported but not mapped.
  void release(handle& h) noexcept {
    if (h) detail::vmm().release(h);
    h = 0;
  }

  void unmap(std::uintptr_t va, std::size_t size, handle& h) noexcept {
    const auto& d = detail::vmm();
    d.unmap(static_cast<CUdeviceptr>(va), size);
    if (h) d.release(h);
    h = 0;
  }

  void synchronize() { detail::vmm_check(detail::vmm().ctx_synchronize(), "cuCtxSynchronize"); }

  bool validate(std::uintptr_t va) const noexcept {
    CUdeviceptr p = 0;
    return detail::vmm().pointer_attribute(&p, CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
                                           static_cast<CUdeviceptr>(va)) == CUDA_SUCCESS &&
           p == static_cast<CUdeviceptr>(va);
  }

 private:
  int device_;
  std::size_t granularity_;
};

static_assert(range_access_mapper<cuda_vmm_mapper>);

}  // namespace inferwire::gms

#endif
