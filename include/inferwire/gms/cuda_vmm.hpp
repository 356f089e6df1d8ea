// SPDX-License-Identifier: Apache-2.0
// inferwire/gms/cuda_vmm.hpp
//
// GMS on a GPU through the CUDA virtual memory management API (gms-protocol §6):
//
// - cuda_vmm_backend (server): cuMemCreate with a POSIX-fd handle type and the driver's
//   minimum granularity; the fd is exported once at allocation time and dup'd per export; no
//   CUDA context is created or made current (only cuInit, granularity, create, export,
//   release); out-of-memory is reported for the server's retry loop, any other error throws.
// - cuda_vmm_mapper (client): import the fd (closed right after), reserve VA, map, set access
//   (read-only for RO sessions, read-write for RW), unmap + release keeping the VA.
// - gpu_uuid(): "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" of a CUDA ordinal, as NVML writes it,
//   for the default socket name.
//
// Driver functions are fetched at run time (the library never links libcuda); without a driver
// or a GPU the constructors throw cuda_vmm_error with the reason.
#ifndef INFERWIRE_GMS_CUDA_VMM_HPP
#define INFERWIRE_GMS_CUDA_VMM_HPP

#include <inferwire/cuda/runtime.hpp>
#include <inferwire/gms/error.hpp>
#include <inferwire/gms/memfd_backend.hpp>
#include <inferwire/gms/session.hpp>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <system_error>

#include <fcntl.h>
#include <unistd.h>

namespace inferwire::gms {

/// A failed CUDA driver call (or no usable driver): "<api>: <CUDA error name>".
class cuda_vmm_error : public error {
 public:
  cuda_vmm_error(CUresult code, const std::string& what) : error(what), code_(code) {}
  CUresult code() const noexcept { return code_; }

 private:
  CUresult code_;
};

namespace detail {

/// The driver entry points GMS uses, fetched once.
struct vmm_driver {
  PFN_cuInit_v2000 init = nullptr;
  PFN_cuDeviceGet_v2000 device_get = nullptr;
  PFN_cuDeviceGetAttribute_v2000 device_attribute = nullptr;
  PFN_cuDeviceGetUuid_v11040 device_uuid = nullptr;
  PFN_cuGetErrorName_v6000 error_name = nullptr;
  PFN_cuMemGetAllocationGranularity_v10020 granularity = nullptr;
  PFN_cuMemCreate_v10020 create = nullptr;
  PFN_cuMemExportToShareableHandle_v10020 export_handle = nullptr;
  PFN_cuMemImportFromShareableHandle_v10020 import_handle = nullptr;
  PFN_cuMemRelease_v10020 release = nullptr;
  PFN_cuMemAddressReserve_v10020 reserve = nullptr;
  PFN_cuMemAddressFree_v10020 address_free = nullptr;
  PFN_cuMemMap_v10020 map = nullptr;
  PFN_cuMemUnmap_v10020 unmap = nullptr;
  PFN_cuMemSetAccess_v10020 set_access = nullptr;
  PFN_cuCtxGetCurrent_v4000 ctx_get_current = nullptr;
  PFN_cuCtxSetCurrent_v4000 ctx_set_current = nullptr;
  PFN_cuDevicePrimaryCtxRetain_v7000 primary_ctx_retain = nullptr;
  PFN_cuCtxSynchronize_v2000 ctx_synchronize = nullptr;
  PFN_cuPointerGetAttribute_v4000 pointer_attribute = nullptr;
  bool complete = false;
};

inline const vmm_driver& vmm() {
  static const vmm_driver d = [] {
    vmm_driver r;
    using cuda::driver_function;
    r.init = driver_function<PFN_cuInit_v2000>("cuInit", 2000);
    r.device_get = driver_function<PFN_cuDeviceGet_v2000>("cuDeviceGet", 2000);
    r.device_attribute = driver_function<PFN_cuDeviceGetAttribute_v2000>("cuDeviceGetAttribute", 2000);
    r.device_uuid = driver_function<PFN_cuDeviceGetUuid_v11040>("cuDeviceGetUuid", 11040);
    r.error_name = driver_function<PFN_cuGetErrorName_v6000>("cuGetErrorName", 6000);
    r.granularity = driver_function<PFN_cuMemGetAllocationGranularity_v10020>("cuMemGetAllocationGranularity", 10020);
    r.create = driver_function<PFN_cuMemCreate_v10020>("cuMemCreate", 10020);
    r.export_handle = driver_function<PFN_cuMemExportToShareableHandle_v10020>("cuMemExportToShareableHandle", 10020);
    r.import_handle = driver_function<PFN_cuMemImportFromShareableHandle_v10020>("cuMemImportFromShareableHandle", 10020);
    r.release = driver_function<PFN_cuMemRelease_v10020>("cuMemRelease", 10020);
    r.reserve = driver_function<PFN_cuMemAddressReserve_v10020>("cuMemAddressReserve", 10020);
    r.address_free = driver_function<PFN_cuMemAddressFree_v10020>("cuMemAddressFree", 10020);
    r.map = driver_function<PFN_cuMemMap_v10020>("cuMemMap", 10020);
    r.unmap = driver_function<PFN_cuMemUnmap_v10020>("cuMemUnmap", 10020);
    r.set_access = driver_function<PFN_cuMemSetAccess_v10020>("cuMemSetAccess", 10020);
    r.ctx_get_current = driver_function<PFN_cuCtxGetCurrent_v4000>("cuCtxGetCurrent", 4000);
    r.ctx_set_current = driver_function<PFN_cuCtxSetCurrent_v4000>("cuCtxSetCurrent", 4000);
    r.primary_ctx_retain = driver_function<PFN_cuDevicePrimaryCtxRetain_v7000>("cuDevicePrimaryCtxRetain", 7000);
    r.ctx_synchronize = driver_function<PFN_cuCtxSynchronize_v2000>("cuCtxSynchronize", 2000);
    r.pointer_attribute = driver_function<PFN_cuPointerGetAttribute_v4000>("cuPointerGetAttribute", 4000);
    r.complete = r.init && r.device_get && r.device_attribute && r.device_uuid && r.error_name &&
                 r.granularity && r.create && r.export_handle && r.import_handle && r.release &&
                 r.reserve && r.address_free && r.map && r.unmap && r.set_access &&
                 r.ctx_get_current && r.ctx_set_current && r.primary_ctx_retain &&
                 r.ctx_synchronize && r.pointer_attribute;
    return r;
  }();
  return d;
}

/// The driver, initialised, or cuda_vmm_error saying why there is none.
inline const vmm_driver& vmm_ready() {
  const auto& d = vmm();
  if (!d.complete) {
    const std::string why = cuda::unavailable_reason();
    throw cuda_vmm_error(CUDA_ERROR_NOT_INITIALIZED,
                         "CUDA VMM is not available: " + (why.empty() ? std::string("driver too old") : why));
  }
  return d;
}

inline void vmm_check(CUresult r, const char* api) {
  if (r == CUDA_SUCCESS) return;
  const char* name = nullptr;
  if (vmm().error_name) vmm().error_name(r, &name);
  throw cuda_vmm_error(r, std::string(api) + ": " + (name ? name : "CUDA error " + std::to_string(r)));
}

/// The allocation properties GMS uses on `device` (pinned device memory, POSIX-fd handles).
inline CUmemAllocationProp vmm_prop(int device) {
  CUmemAllocationProp p{};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = device;
  p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return p;
}

/// cuInit and the driver's handle of CUDA ordinal `device`.
inline CUdevice vmm_device(int device) {
  const auto& d = vmm_ready();
  vmm_check(d.init(0), "cuInit");
  CUdevice dev = 0;
  vmm_check(d.device_get(&dev, device), "cuDeviceGet");
  return dev;
}

/// The device's VMM support and its minimum granularity.
inline std::size_t vmm_open_device(int device) {
  const auto& d = vmm_ready();
  const CUdevice dev = vmm_device(device);
  int vmm_supported = 0;
  vmm_check(d.device_attribute(&vmm_supported, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev),
            "cuDeviceGetAttribute");
  if (!vmm_supported)
    throw cuda_vmm_error(CUDA_ERROR_NOT_SUPPORTED,
                         "GPU " + std::to_string(device) + " does not support CUDA virtual memory management");
  const CUmemAllocationProp prop = vmm_prop(device);
  std::size_t g = 0;
  vmm_check(d.granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), "cuMemGetAllocationGranularity");
  return g;
}

}  // namespace detail

/// "GPU-<uuid>" of CUDA device ordinal `device` (honours CUDA_VISIBLE_DEVICES).
inline std::string gpu_uuid(int device) {
  const CUdevice dev = detail::vmm_device(device);
  const auto& d = detail::vmm();
  CUuuid u{};
  detail::vmm_check(d.device_uuid(&u, dev), "cuDeviceGetUuid");
  const auto* b = reinterpret_cast<const unsigned char*>(u.bytes);
  char text[48];
  std::snprintf(text, sizeof text,
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  return text;
}

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

  void map(std::uintptr_t va, std::size_t size, handle& h, bool writable) {
    const auto& d = detail::vmm();
    detail::vmm_check(d.map(static_cast<CUdeviceptr>(va), size, 0, h, 0), "cuMemMap");
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = device_;
    access.flags = writable ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE : CU_MEM_ACCESS_FLAGS_PROT_READ;
    const CUresult r = d.set_access(static_cast<CUdeviceptr>(va), size, &access, 1);
    if (r != CUDA_SUCCESS) {
      d.unmap(static_cast<CUdeviceptr>(va), size);
      detail::vmm_check(r, "cuMemSetAccess");
    }
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

}  // namespace inferwire::gms

#endif
