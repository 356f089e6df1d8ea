// SPDX-License-Identifier: Apache-2.0
// inferwire/cuda/vmm_driver.hpp
//
// The CUDA driver's virtual memory management entry points (cuMemCreate, cuMemExport/Import,
// cuMemMap, ...), fetched at run time through the runtime (the library never links libcuda),
// for GMS and for CUDA shared-memory regions backed by VMM allocations. `complete` is false
// without a driver, a GPU, or with a driver too old to have them all.
#ifndef INFERWIRE_CUDA_VMM_DRIVER_HPP
#define INFERWIRE_CUDA_VMM_DRIVER_HPP

#include <inferwire/cuda/runtime.hpp>

#include <string>

namespace inferwire::cuda::detail {

/// The driver entry points of CUDA virtual memory management, fetched once.
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
  PFN_cuMemGetAddressRange_v3020 address_range = nullptr;
  PFN_cuMemRetainAllocationHandle_v11000 retain_handle = nullptr;
  PFN_cuMemGetAllocationPropertiesFromHandle_v10020 allocation_properties = nullptr;
  bool complete = false;
};

inline const vmm_driver& vmm() {
  static const vmm_driver d = [] {
    vmm_driver r;
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
    r.address_range = driver_function<PFN_cuMemGetAddressRange_v3020>("cuMemGetAddressRange", 3020);
    r.retain_handle = driver_function<PFN_cuMemRetainAllocationHandle_v11000>("cuMemRetainAllocationHandle", 11000);
    r.allocation_properties = driver_function<PFN_cuMemGetAllocationPropertiesFromHandle_v10020>(
        "cuMemGetAllocationPropertiesFromHandle", 10020);
    r.complete = r.init && r.device_get && r.device_attribute && r.device_uuid && r.error_name &&
                 r.granularity && r.create && r.export_handle && r.import_handle && r.release &&
                 r.reserve && r.address_free && r.map && r.unmap && r.set_access &&
                 r.ctx_get_current && r.ctx_set_current && r.primary_ctx_retain &&
                 r.ctx_synchronize && r.pointer_attribute && r.address_range && r.retain_handle &&
                 r.allocation_properties;
    return r;
  }();
  return d;
}

/// The allocation properties of shareable device memory on `device`: pinned, with POSIX
/// descriptors among its handle types (GMS, CUDA VMM regions).
inline CUmemAllocationProp vmm_prop(int device) {
  CUmemAllocationProp p{};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = device;
  p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return p;
}

/// Read-only or read-write access for `device` (what cuMemSetAccess takes).
inline CUmemAccessDesc vmm_access(int device, bool writable) {
  CUmemAccessDesc a{};
  a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  a.location.id = device;
  a.flags = writable ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE : CU_MEM_ACCESS_FLAGS_PROT_READ;
  return a;
}

/// "CUDA_ERROR_INVALID_VALUE" for a driver result (a number when the driver cannot say).
inline std::string driver_error_name(CUresult r) {
  const char* name = nullptr;
  if (vmm().error_name) vmm().error_name(r, &name);
  return name ? name : "CUDA error " + std::to_string(static_cast<int>(r));
}

}  // namespace inferwire::cuda::detail

#endif
