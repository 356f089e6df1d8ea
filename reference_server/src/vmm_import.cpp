// SPDX-License-Identifier: Apache-2.0
// The CUDA importer of the VMM socket: the client's chunks become one contiguous device range
// of this process (cuMemImportFromShareableHandle, cuMemAddressReserve, cuMemMap per chunk,
// cuMemSetAccess read-write for the device), which the CUDA shared-memory path then reads and
// writes like any region.
#include "vmm_channel.hpp"

#include <stdexcept>
#include <string>

#if INFERWIRE_SERVER_CUDA
#include <inferwire/cuda/vmm_driver.hpp>

#include <mutex>
#endif

namespace inferwire::server {

#if INFERWIRE_SERVER_CUDA
namespace {

using cuda::detail::driver_error_name;

[[noreturn]] void fail(CUresult r, const std::string& what) {
  throw std::runtime_error(what + " (" + driver_error_name(r) + ")");
}

// The range and the chunks mapped in it; destroying it undoes everything.
struct cuda_vmm_import final : vmm_mapping {
  CUcontext ctx = nullptr;  // the device's primary context, current while undoing
  CUdeviceptr va = 0;
  std::size_t reserved = 0;
  struct chunk {
    CUmemGenericAllocationHandle handle;
    std::size_t offset, size;
    bool mapped;
  };
  std::vector<chunk> chunks;

  // Runs on whichever thread lets go of the region last (an I/O thread, the socket's thread):
  // the context is made current for the undoing and the thread's own is restored after.
  ~cuda_vmm_import() override {
    const auto& d = cuda::detail::vmm();
    CUcontext previous = nullptr;
    d.ctx_get_current(&previous);
    if (ctx) d.ctx_set_current(ctx);
    for (const auto& c : chunks) {
      if (c.mapped) d.unmap(va + c.offset, c.size);
      d.release(c.handle);
    }
    if (va) d.address_free(va, reserved);
    d.ctx_set_current(previous);
  }
};

// The device's primary context, current on this thread (the runtime's kernels use the same
// one, so they see the mapping).
CUcontext make_context_current(const cuda::detail::vmm_driver& d, CUdevice dev, int device) {
  static std::mutex mu;
  static std::vector<CUcontext> retained(static_cast<std::size_t>(cuda::device_count()), nullptr);
  std::lock_guard lock(mu);
  CUcontext& ctx = retained.at(static_cast<std::size_t>(device));
  if (!ctx)
    if (CUresult r = d.primary_ctx_retain(&ctx, dev); r != CUDA_SUCCESS) fail(r, "cuDevicePrimaryCtxRetain");
  if (CUresult r = d.ctx_set_current(ctx); r != CUDA_SUCCESS) fail(r, "cuCtxSetCurrent");
  return ctx;
}

class cuda_importer final : public vmm_importer {
 public:
  std::unique_ptr<vmm_mapping> import(const shm::vmm_layout& layout, std::vector<shm::unique_fd>& fds) override {
    if (!cuda::available()) throw std::runtime_error("GPUs not supported: " + cuda::unavailable_reason());
    const auto& d = cuda::detail::vmm();
    if (!d.complete) throw std::runtime_error("the CUDA driver has no virtual memory management");
    if (layout.device >= cuda::device_count())
      throw std::runtime_error("no CUDA device " + std::to_string(layout.device) + " (this server sees " +
                               std::to_string(cuda::device_count()) + ")");
    if (CUresult r = d.init(0); r != CUDA_SUCCESS) fail(r, "cuInit");
    CUdevice dev = 0;
    if (CUresult r = d.device_get(&dev, layout.device); r != CUDA_SUCCESS) fail(r, "cuDeviceGet");
    int supported = 0;
    d.device_attribute(&supported, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev);
    if (!supported)
      throw std::runtime_error("GPU " + std::to_string(layout.device) + " does not support virtual memory management");
    const CUcontext ctx = make_context_current(d, dev, layout.device);
    const CUmemAllocationProp prop = cuda::detail::vmm_prop(layout.device);
    std::size_t granularity = 0;
    if (CUresult r = d.granularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM); r != CUDA_SUCCESS)
      fail(r, "cuMemGetAllocationGranularity");
    for (std::size_t i = 0; i < layout.chunk_sizes.size(); ++i)
      if (layout.chunk_sizes[i] % granularity != 0)
        throw std::runtime_error("chunk " + std::to_string(i) + ": " + std::to_string(layout.chunk_sizes[i]) +
                                 " bytes is not a multiple of the device's granularity (" +
                                 std::to_string(granularity) + ")");
    auto m = std::make_unique<cuda_vmm_import>();
    m->ctx = ctx;
    m->reserved = layout.mapped_size();
    if (CUresult r = d.reserve(&m->va, m->reserved, granularity, 0, 0); r != CUDA_SUCCESS)
      fail(r, "cuMemAddressReserve of " + std::to_string(m->reserved) + " bytes");
    std::size_t offset = 0;
    for (std::size_t i = 0; i < layout.chunk_sizes.size(); ++i) {
      const std::string which = "chunk " + std::to_string(i) + ": ";
      CUmemGenericAllocationHandle h = 0;
      if (CUresult r = d.import_handle(&h, reinterpret_cast<void*>(static_cast<std::uintptr_t>(fds[i].get())),
                                       CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
          r != CUDA_SUCCESS)
        fail(r, which + "the descriptor is not a CUDA memory handle (cuMemImportFromShareableHandle)");
      const std::size_t size = layout.chunk_sizes[i];
      m->chunks.push_back({h, offset, size, false});
      CUmemAllocationProp got{};
      if (CUresult r = d.allocation_properties(&got, h); r != CUDA_SUCCESS)
        fail(r, which + "cuMemGetAllocationPropertiesFromHandle");
      if (got.location.type != CU_MEM_LOCATION_TYPE_DEVICE || got.location.id != layout.device)
        throw std::runtime_error(which + "the memory is on device " + std::to_string(got.location.id) +
                                 ", not device " + std::to_string(layout.device));
      if (CUresult r = d.map(m->va + offset, size, 0, h, 0); r != CUDA_SUCCESS)
        fail(r, which + "cannot map " + std::to_string(size) +
                    " bytes of it (cuMemMap; is the chunk smaller than declared?)");
      m->chunks.back().mapped = true;
      offset += size;
    }
    const CUmemAccessDesc access = cuda::detail::vmm_access(layout.device, true);
    if (CUresult r = d.set_access(m->va, m->reserved, &access, 1); r != CUDA_SUCCESS) fail(r, "cuMemSetAccess");
    m->base = reinterpret_cast<std::byte*>(m->va + layout.offset);
    m->size = layout.byte_size;
    m->device = layout.device;
    return m;
  }
};

}  // namespace

std::unique_ptr<vmm_importer> make_cuda_vmm_importer() { return std::make_unique<cuda_importer>(); }

#else

namespace {
class no_cuda_importer final : public vmm_importer {
 public:
  std::unique_ptr<vmm_mapping> import(const shm::vmm_layout&, std::vector<shm::unique_fd>&) override {
    throw std::runtime_error("GPUs not supported: this server was built without CUDA");
  }
};
}  // namespace

std::unique_ptr<vmm_importer> make_cuda_vmm_importer() { return std::make_unique<no_cuda_importer>(); }

#endif

}  // namespace inferwire::server
