// SPDX-License-Identifier: Apache-2.0
// inferwire/gms/cuda_vmm_driver.hpp
//
// What both CUDA VMM sides of GMS share (gms-protocol §6): the driver entry points, fetched at
// run time (the library never links libcuda), cuda_vmm_error, the allocation properties
// (pinned device memory, POSIX-fd handles), and gpu_uuid(): "GPU-xxxxxxxx-xxxx-xxxx-xxxx-
// xxxxxxxxxxxx" of a CUDA ordinal, as NVML writes it, for the default socket name. Without a
// driver or a GPU, opening a device throws cuda_vmm_error with the reason.
#ifndef INFERWIRE_GMS_CUDA_VMM_DRIVER_HPP
#define INFERWIRE_GMS_CUDA_VMM_DRIVER_HPP

#include <inferwire/cuda/runtime.hpp>
#include <inferwire/gms/error.hpp>

#include <cstddef>
#include <cstdio>
#include <string>

namespace inferwire::gms {

/// A failed CUDA driver call (or no usable driver): "<api>: <CUDA error name>".
class cuda_vmm_error : public error {
 public:
  cuda_vmm_error(CUresult code, const std::string& what) : error(what, errc::cuda_error), code_(code) {}
  /// The driver's result code.
  CUresult result() const noexcept { return code_; }

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

}  // namespace inferwire::gms

#endif
