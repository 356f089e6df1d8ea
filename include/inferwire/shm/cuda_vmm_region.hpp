// SPDX-License-Identifier: Apache-2.0
// inferwire/shm/cuda_vmm_region.hpp  (component `cuda`)
//
// Registers device memory allocated through CUDA's virtual memory management (cuMemCreate +
// cuMemMap: PyTorch with expandable_segments:True, any VMM allocator) as a CUDA shared-memory
// region, which cudaIpcGetMemHandle cannot do:
//
//   auto reg = inferwire::shm::register_cuda_vmm(client, "input_data", ptr, bytes);
//   request.inputs.push_back(v2::make_shm_input("INPUT0", ..., {"input_data", 0, 64}));
//
// The range may span several physical chunks mapped one after the other; each is exported as
// a POSIX file descriptor (the allocation must have been created with
// CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR among its requested handle types) and handed to the
// server over its CUDA VMM socket (<inferwire/shm/vmm_channel.hpp>). The region stays
// registered while the returned object lives. Memory this process imported (a GMS mapping)
// cannot be exported again; <inferwire/gms/cuda_vmm_region.hpp> registers a GMS mapping.
#ifndef INFERWIRE_SHM_CUDA_VMM_REGION_HPP
#define INFERWIRE_SHM_CUDA_VMM_REGION_HPP

#include <inferwire/cuda/runtime.hpp>
#include <inferwire/cuda/vmm_driver.hpp>
#include <inferwire/shm/unique_fd.hpp>
#include <inferwire/shm/vmm_channel.hpp>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace inferwire::shm {

/// The chunks behind a device pointer range, exported: the layout and one descriptor each.
struct cuda_vmm_export {
  vmm_layout layout;
  std::vector<unique_fd> fds;

  std::vector<int> raw_fds() const {
    std::vector<int> out;
    out.reserve(fds.size());
    for (const auto& f : fds) out.push_back(f.get());
    return out;
  }
};

/// Exports the chunks that back `[ptr, ptr + size)`: device memory mapped with cuMemMap, one
/// or several allocations mapped contiguously. Throws cuda::error when the range is not VMM
/// memory, is not fully mapped, or an allocation cannot be exported as a descriptor.
inline cuda_vmm_export export_cuda_vmm(const void* ptr, std::size_t size) {
  if (size == 0) throw std::invalid_argument("a CUDA VMM region must have at least one byte");
  if (!cuda::available()) throw cuda::error(cudaErrorNoDevice, cuda::unavailable_reason());
  const auto& d = cuda::detail::vmm();
  using cuda::detail::driver_error_name;
  if (!d.complete)
    throw cuda::error(cudaErrorInsufficientDriver, "the CUDA driver has no VMM export (cuMemRetainAllocationHandle)");
  const auto start = reinterpret_cast<CUdeviceptr>(ptr);
  if (size > UINT64_MAX - start) throw std::invalid_argument("the CUDA VMM range wraps around");
  int ordinal = -1;
  if (CUresult r = d.pointer_attribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, start); r != CUDA_SUCCESS)
    throw cuda::error(cudaErrorInvalidValue, "the pointer is not CUDA device memory (cuPointerGetAttribute: " +
                                                 driver_error_name(r) + ")");
  cuda_vmm_export out;
  out.layout.device = ordinal;
  out.layout.byte_size = size;
  const CUdeviceptr end = start + size;
  CUdeviceptr at = start;
  while (at < end) {
    CUdeviceptr base = 0;
    std::size_t length = 0;
    if (CUresult r = d.address_range(&base, &length, at); r != CUDA_SUCCESS || length == 0 || base > at)
      throw cuda::error(cudaErrorInvalidValue, "byte " + std::to_string(at - start) +
                                                   " of the range is not mapped device memory (cuMemGetAddressRange: " +
                                                   driver_error_name(r) + ")");
    CUmemGenericAllocationHandle h = 0;
    if (CUresult r = d.retain_handle(&h, reinterpret_cast<void*>(at)); r != CUDA_SUCCESS)
      throw cuda::error(cudaErrorInvalidValue,
                        "the memory at byte " + std::to_string(at - start) +
                            " is not a VMM mapping (cuMemRetainAllocationHandle: " + driver_error_name(r) +
                            "); memory from cudaMalloc is registered with cuda_region::adopt()");
    int fd = -1;
    const CUresult r = d.export_handle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    d.release(h);
    if (r != CUDA_SUCCESS)
      throw cuda::error(cudaErrorNotSupported,
                        "the allocation at byte " + std::to_string(at - start) +
                            " cannot be exported as a file descriptor (cuMemExportToShareableHandle: " +
                            driver_error_name(r) +
                            "); create it with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR among its "
                            "requested handle types. Memory imported from another process cannot be "
                            "exported again: register a GMS mapping with gms::register_cuda_vmm()");
    out.fds.emplace_back(fd);
    if (out.layout.chunk_sizes.empty()) out.layout.offset = at - base;
    out.layout.chunk_sizes.push_back(length);
    if (out.layout.chunk_sizes.size() > vmm_max_chunks)
      throw std::invalid_argument("the range spans more than " + std::to_string(vmm_max_chunks) + " chunks");
    at = base + length;
  }
  return out;
}

/// Device memory from the VMM API: `chunks` physical allocations (cuMemCreate, exportable as
/// POSIX descriptors) mapped one after the other in one reserved range, read-write for their
/// device; the shape of a PyTorch expandable segment. Move-only; unmaps and releases
/// everything when destroyed. Throws cuda::error when the device has no VMM support.
class cuda_vmm_memory {
 public:
  cuda_vmm_memory() = default;

  /// At least `chunk_bytes` per chunk (rounded up to the device's granularity), on `device`
  /// (-1: the current device).
  static cuda_vmm_memory allocate(std::size_t chunk_bytes, std::size_t chunks, int device = -1) {
    if (chunk_bytes == 0 || chunks == 0) throw std::invalid_argument("VMM memory needs chunks of at least one byte");
    if (!cuda::available()) throw cuda::error(cudaErrorNoDevice, cuda::unavailable_reason());
    const auto& d = cuda::detail::vmm();
    if (!d.complete) throw cuda::error(cudaErrorInsufficientDriver, "the CUDA driver has no virtual memory management");
    if (device < 0) cuda::check(cudaGetDevice(&device), "cudaGetDevice");
    cuda::device_guard g(device);
    cuda::check(cudaFree(nullptr), "initialising the device's context");
    const CUmemAllocationProp prop = cuda::detail::vmm_prop(device);
    std::size_t granularity = 0;
    check(d.granularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), "cuMemGetAllocationGranularity");
    cuda_vmm_memory m;
    m.device_ = device;
    m.chunk_ = (chunk_bytes + granularity - 1) / granularity * granularity;
    m.size_ = m.chunk_ * chunks;
    CUdeviceptr va = 0;
    check(d.reserve(&va, m.size_, granularity, 0, 0), "cuMemAddressReserve");
    m.va_ = va;
    for (std::size_t i = 0; i < chunks; ++i) {
      CUmemGenericAllocationHandle h = 0;
      check(d.create(&h, m.chunk_, &prop, 0), "cuMemCreate");
      if (CUresult r = d.map(va + i * m.chunk_, m.chunk_, 0, h, 0); r != CUDA_SUCCESS) {
        d.release(h);
        check(r, "cuMemMap");
      }
      m.handles_.push_back(h);
    }
    const CUmemAccessDesc access = cuda::detail::vmm_access(device, true);
    check(d.set_access(va, m.size_, &access, 1), "cuMemSetAccess");
    return m;
  }

  cuda_vmm_memory(cuda_vmm_memory&& o) noexcept { swap(o); }
  cuda_vmm_memory& operator=(cuda_vmm_memory&& o) noexcept {
    if (this != &o) cuda_vmm_memory(std::move(o)).swap(*this);
    return *this;
  }
  cuda_vmm_memory(const cuda_vmm_memory&) = delete;
  cuda_vmm_memory& operator=(const cuda_vmm_memory&) = delete;
  ~cuda_vmm_memory() {
    if (!va_) return;
    const auto& d = cuda::detail::vmm();
    int previous = 0;  // the work on this memory ends first, on its own device
    (void)cudaGetDevice(&previous);
    (void)cudaSetDevice(device_);
    (void)cudaDeviceSynchronize();
    (void)cudaSetDevice(previous);
    for (std::size_t i = 0; i < handles_.size(); ++i) {
      d.unmap(va_ + i * chunk_, chunk_);
      d.release(handles_[i]);
    }
    d.address_free(va_, size_);
  }

  void* data() const noexcept { return reinterpret_cast<void*>(va_); }
  std::size_t size() const noexcept { return size_; }
  std::size_t chunk_size() const noexcept { return chunk_; }
  std::size_t chunks() const noexcept { return handles_.size(); }
  int device() const noexcept { return device_; }

  void swap(cuda_vmm_memory& o) noexcept {
    std::swap(va_, o.va_);
    std::swap(size_, o.size_);
    std::swap(chunk_, o.chunk_);
    std::swap(device_, o.device_);
    handles_.swap(o.handles_);
  }

 private:
  static void check(CUresult r, const char* what) {
    if (r != CUDA_SUCCESS)
      throw cuda::error(cudaErrorUnknown, std::string(what) + " failed: " + cuda::detail::driver_error_name(r));
  }

  CUdeviceptr va_ = 0;
  std::size_t size_ = 0;
  std::size_t chunk_ = 0;
  int device_ = -1;
  std::vector<CUmemGenericAllocationHandle> handles_;
};

/// Registers `[ptr, ptr + size)` (VMM device memory) as the CUDA region `name` through
/// `client` (inferwire's HTTP or gRPC client). The region stays registered while the returned
/// object lives; inference requests name it like any CUDA region.
template <class Client>
vmm_registration register_cuda_vmm(Client& client, std::string name, const void* ptr, std::size_t size,
                                   std::string_view socket_path = default_cuda_vmm_socket) {
  const cuda_vmm_export chunks = export_cuda_vmm(ptr, size);
  return register_vmm_region(client, std::move(name), chunks.layout, chunks.raw_fds(), socket_path);
}

}  // namespace inferwire::shm

#endif
