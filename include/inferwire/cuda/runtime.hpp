// SPDX-License-Identifier: Apache-2.0
// inferwire/cuda/runtime.hpp
//
// CUDA at run time: whether a GPU is usable, errors as exceptions with both the CUDA name and
// text, a scoped current device, the device of a pointer, and driver-API functions fetched
// through the runtime (the library never links libcuda, so programs start on machines without
// a driver and find out at run time).
//
//   if (!inferwire::cuda::available()) std::cerr << inferwire::cuda::unavailable_reason();
#ifndef INFERWIRE_CUDA_RUNTIME_HPP
#define INFERWIRE_CUDA_RUNTIME_HPP

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

namespace inferwire::cuda {

/// A failed CUDA call: what was attempted, then the CUDA error name and text.
class error : public std::runtime_error {
 public:
  error(cudaError_t code, const std::string& what) : std::runtime_error(what), code_(code) {}
  cudaError_t code() const noexcept { return code_; }

 private:
  cudaError_t code_;
};

/// "cudaErrorInvalidValue (invalid argument)".
inline std::string error_text(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
}

/// Throws cuda::error for a failed call, clearing CUDA's sticky last error.
inline void check(cudaError_t e, std::string_view what) {
  if (e == cudaSuccess) return;
  (void)cudaGetLastError();
  throw error(e, std::string(what) + " failed: " + error_text(e));
}

namespace detail {
struct probe {
  int count = 0;
  cudaError_t status = cudaSuccess;
};
inline const probe& device_probe() noexcept {
  static const probe p = [] {
    probe r;
    r.status = cudaGetDeviceCount(&r.count);
    if (r.status != cudaSuccess) {
      (void)cudaGetLastError();
      r.count = 0;
    }
    return r;
  }();
  return p;
}
}  // namespace detail

/// The number of usable GPUs: 0 without a driver or a device (never throws).
inline int device_count() noexcept { return detail::device_probe().count; }

/// Whether at least one GPU is usable.
inline bool available() noexcept { return device_count() > 0; }

/// Why no GPU is usable ("" when one is).
inline std::string unavailable_reason() {
  const auto& p = detail::device_probe();
  if (p.count > 0) return {};
  if (p.status == cudaErrorInsufficientDriver || p.status == cudaErrorNoDevice)
    return "no CUDA driver or no GPU on this machine (" + error_text(p.status) + ")";
  if (p.status != cudaSuccess) return "CUDA is not usable: " + error_text(p.status);
  return "no CUDA device found";
}

/// Makes `device` current for the scope and restores the previous device afterwards.
class device_guard {
 public:
  explicit device_guard(int device) {
    check(cudaGetDevice(&previous_), "cudaGetDevice");
    if (device != previous_) check(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
  }
  ~device_guard() {
    int now = previous_;
    if (cudaGetDevice(&now) == cudaSuccess && now != previous_) (void)cudaSetDevice(previous_);
  }
  device_guard(const device_guard&) = delete;
  device_guard& operator=(const device_guard&) = delete;

 private:
  int previous_ = 0;
};

/// The device whose memory `p` points into, or -1 for host (or unknown) memory.
inline int device_of(const void* p) noexcept {
  if (!available()) return -1;
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged ? a.device : -1;
}

/// A driver-API function of the installed driver, or nullptr (no driver, or too old).
/// `Fn` is one of the PFN_ typedefs of <cudaTypedefs.h>; `version` is the ABI version its name
/// carries (e.g. 3020 for PFN_cuMemGetAddressRange_v3020).
template <class Fn>
Fn driver_function(const char* name, unsigned version) noexcept {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion(name, &fn, version, cudaEnableDefault, &found) !=
          cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return reinterpret_cast<Fn>(fn);
}

/// The whole allocation that device pointer `p` lies in. False when it is not device memory.
inline bool allocation_range(const void* p, void*& base, std::size_t& size) noexcept {
  static const auto get_range = driver_function<PFN_cuMemGetAddressRange_v3020>(
      "cuMemGetAddressRange", 3020);
  if (!get_range) return false;
  CUdeviceptr b = 0;
  std::size_t s = 0;
  if (get_range(&b, &s, reinterpret_cast<CUdeviceptr>(p)) != CUDA_SUCCESS) return false;
  base = reinterpret_cast<void*>(b);
  size = s;
  return true;
}

}  // namespace inferwire::cuda

#endif
