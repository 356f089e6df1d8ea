// SPDX-License-Identifier: Apache-2.0
// inferwire/shm/cuda_vmm_region.hpp  (component `cuda`)
//
// Registers device memory allocated through CUDA's virtual memory management (cuMemCreate +
// cuMemMap: PyTorch with expandable_segments:True, a GMS mapping, any VMM allocator) as a CUDA
// shared-memory region, which cudaIpcGetMemHandle cannot do:
//
//   auto reg = inferwire::shm::register_cuda_vmm(client, "input_data", ptr, bytes);
//   request.inputs.push_back(v2::make_shm_input("INPUT0", ..., {"input_data", 0, 64}));
//
// The range may span several physical chunks mapped one after the other; each is exported as
// a POSIX file descriptor (the allocation must have been created with
// CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR among its requested handle types) and handed to the
// server over its CUDA VMM socket (<inferwire/shm/vmm_channel.hpp>). The region stays
// registered while the returned object lives.
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
                            "requested handle types");
    out.fds.emplace_back(fd);
    if (out.layout.chunk_sizes.empty()) out.layout.offset = at - base;
    out.layout.chunk_sizes.push_back(length);
    if (out.layout.chunk_sizes.size() > vmm_max_chunks)
      throw std::invalid_argument("the range spans more than " + std::to_string(vmm_max_chunks) + " chunks");
    at = base + length;
  }
  return out;
}

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
