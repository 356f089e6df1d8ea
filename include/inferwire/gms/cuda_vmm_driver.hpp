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
#include <inferwire/cuda/vmm_driver.hpp>
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

// The driver entry points (shared with CUDA VMM shared-memory regions).
using cuda::detail::vmm;
using cuda::detail::vmm_driver;
using cuda::detail::vmm_access;

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
  throw cuda_vmm_error(r, std::string(api) + ": " + cuda::detail::driver_error_name(r));
}

using cuda::detail::vmm_prop;

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
