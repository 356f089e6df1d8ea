// SPDX-License-Identifier: Apache-2.0
// inferwire/shm/cuda_region.hpp  (component `cuda`)
//
// CUDA shared-memory regions: device memory exported with a CUDA IPC handle, so that a server
// on the same host reads inputs from it and writes outputs into it directly.
//
//   auto region = inferwire::shm::cuda_region::allocate(128);          // on the current device
//   region.copy_from_host(0, std::as_bytes(std::span(input0)));
//   client.register_cuda_shared_memory(region.register_request("input_data"));
//
// and, on the importing side (the server), cuda_ipc_mapping opens such a handle.
//
// CUDA IPC has known limits, which the errors name: both processes must be on the same host and
// see the same GPUs (containers: the same devices, and `--ipc=host` or a shared PID namespace);
// memory from cudaMallocAsync pools or the VMM API cannot be exported this way; WSL does not
// support CUDA IPC at all.
#ifndef INFERWIRE_SHM_CUDA_REGION_HPP
#define INFERWIRE_SHM_CUDA_REGION_HPP

#include <inferwire/cuda/runtime.hpp>
#include <inferwire/v2/types.hpp>

#include <cstddef>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>

namespace inferwire::shm {

/// The size of a cudaIpcMemHandle_t on the wire.
inline constexpr std::size_t cuda_ipc_handle_size = sizeof(cudaIpcMemHandle_t);
static_assert(cuda_ipc_handle_size == 64);

namespace detail {
inline std::string ipc_hint(cudaError_t e) {
  switch (e) {
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevicePointer:
      return " (the pointer must be the start of a cudaMalloc allocation; memory from "
             "cudaMallocAsync pools or the VMM API cannot be exported with cudaIpcGetMemHandle)";
    case cudaErrorMapBufferObjectFailed:
    case cudaErrorInvalidResourceHandle:
      return " (the handle was not made on this host, its memory was freed, or the exporting "
             "process lives in another PID namespace: containers need --ipc=host and "
             "--pid=host, or to share one pod)";
    case cudaErrorNotSupported:
      return " (CUDA IPC is not supported here, e.g. under WSL or on this device)";
    case cudaErrorPeerAccessUnsupported:
      return " (the memory is on a GPU this device cannot reach; place the region on the "
             "same GPU as the model instance)";
    case cudaErrorInsufficientDriver:
    case cudaErrorNoDevice:
      return " (no CUDA driver or GPU on this machine)";
    default: return {};
  }
}
[[noreturn]] inline void throw_ipc(cudaError_t e, const std::string& what) {
  (void)cudaGetLastError();
  throw cuda::error(e, what + " failed: " + cuda::error_text(e) + ipc_hint(e));
}
}  // namespace detail

/// Device memory to share through CUDA IPC. Move-only; frees the memory it allocated.
class cuda_region {
 public:
  cuda_region() = default;

  /// Allocates `size` bytes on `device` (-1: the current device) with cudaMalloc.
  static cuda_region allocate(std::size_t size, int device = -1) {
    if (size == 0) throw std::invalid_argument("CUDA shared memory region size must be > 0");
    if (!cuda::available()) throw cuda::error(cudaErrorNoDevice, cuda::unavailable_reason());
    if (device < 0) cuda::check(cudaGetDevice(&device), "cudaGetDevice");
    cuda::device_guard g(device);
    cuda_region r;
    cuda::check(cudaMalloc(&r.data_, size), "cudaMalloc(" + std::to_string(size) + ")");
    r.size_ = size;
    r.device_ = device;
    r.owner_ = true;
    return r;
  }

  /// Shares memory the caller owns (the start of a cudaMalloc allocation); the device is found
  /// from the pointer. Nothing is freed by this object.
  static cuda_region adopt(void* device_ptr, std::size_t size) {
    int device = cuda::device_of(device_ptr);
    if (device < 0)
      throw std::invalid_argument("pointer is not CUDA device memory" +
                                  (cuda::available() ? std::string() : ": " + cuda::unavailable_reason()));
    cuda_region r;
    r.data_ = device_ptr;
    r.size_ = size;
    r.device_ = device;
    return r;
  }

  cuda_region(cuda_region&& o) noexcept { swap(o); }
  cuda_region& operator=(cuda_region&& o) noexcept {
    if (this != &o) cuda_region(std::move(o)).swap(*this);
    return *this;
  }
  cuda_region(const cuda_region&) = delete;
  cuda_region& operator=(const cuda_region&) = delete;
  ~cuda_region() {
    if (owner_ && data_) {
      int previous = 0;
      (void)cudaGetDevice(&previous);
      (void)cudaSetDevice(device_);
      (void)cudaFree(data_);
      (void)cudaSetDevice(previous);
    }
  }

  void* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  int device() const noexcept { return device_; }
  explicit operator bool() const noexcept { return data_ != nullptr; }

  /// The 64 bytes of the IPC handle (what gRPC sends as raw_handle).
  std::string ipc_handle() const {
    cuda::device_guard g(device_);
    cudaIpcMemHandle_t h{};
    if (auto e = cudaIpcGetMemHandle(&h, data_); e != cudaSuccess)
      detail::throw_ipc(e, "cudaIpcGetMemHandle");
    return std::string(reinterpret_cast<const char*>(&h), sizeof h);
  }

  /// The request that registers this memory as region `name` (the HTTP client sends the handle
  /// base64-encoded).
  v2::cuda_shm_register_request register_request(std::string name) const {
    return {std::move(name), ipc_handle(), static_cast<std::uint64_t>(device_), size_};
  }

  void copy_from_host(std::size_t offset, std::span<const std::byte> src) const {
    bounds(offset, src.size());
    cuda::device_guard g(device_);
    cuda::check(cudaMemcpy(static_cast<std::byte*>(data_) + offset, src.data(), src.size(),
                           cudaMemcpyHostToDevice),
                "cudaMemcpy to device");
  }
  void copy_to_host(std::size_t offset, std::span<std::byte> dst) const {
    bounds(offset, dst.size());
    cuda::device_guard g(device_);
    cuda::check(cudaMemcpy(dst.data(), static_cast<const std::byte*>(data_) + offset, dst.size(),
                           cudaMemcpyDeviceToHost),
                "cudaMemcpy to host");
  }

  void swap(cuda_region& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    std::swap(device_, o.device_);
    std::swap(owner_, o.owner_);
  }

 private:
  void bounds(std::size_t offset, std::size_t n) const {
    if (offset > size_ || n > size_ - offset)
      throw std::out_of_range("copy past the end of a CUDA shared memory region");
  }

  void* data_ = nullptr;
  std::size_t size_ = 0;
  int device_ = -1;
  bool owner_ = false;
};

/// Device memory of another process, opened from its IPC handle on `device`. Move-only;
/// closes the handle when destroyed.
class cuda_ipc_mapping {
 public:
  cuda_ipc_mapping() = default;

  /// Opens `handle` (64 bytes) on `device`; throws cuda::error (with a hint) on failure.
  static cuda_ipc_mapping open(std::span<const std::byte> handle, int device) {
    if (handle.size() != cuda_ipc_handle_size)
      throw std::invalid_argument("a CUDA IPC handle has " + std::to_string(cuda_ipc_handle_size) +
                                  " bytes, not " + std::to_string(handle.size()));
    if (!cuda::available()) throw cuda::error(cudaErrorNoDevice, cuda::unavailable_reason());
    if (device < 0 || device >= cuda::device_count())
      throw cuda::error(cudaErrorInvalidDevice,
                        "no CUDA device " + std::to_string(device) + " (this machine has " +
                            std::to_string(cuda::device_count()) + ")");
    cuda::device_guard g(device);
    cudaIpcMemHandle_t h;
    std::memcpy(&h, handle.data(), sizeof h);
    cuda_ipc_mapping m;
    if (auto e = cudaIpcOpenMemHandle(&m.data_, h, cudaIpcMemLazyEnablePeerAccess);
        e != cudaSuccess)
      detail::throw_ipc(e, "cudaIpcOpenMemHandle");
    m.device_ = device;
    void* base = nullptr;
    if (!cuda::allocation_range(m.data_, base, m.size_)) m.size_ = 0;
    return m;
  }

  cuda_ipc_mapping(cuda_ipc_mapping&& o) noexcept { swap(o); }
  cuda_ipc_mapping& operator=(cuda_ipc_mapping&& o) noexcept {
    if (this != &o) cuda_ipc_mapping(std::move(o)).swap(*this);
    return *this;
  }
  cuda_ipc_mapping(const cuda_ipc_mapping&) = delete;
  cuda_ipc_mapping& operator=(const cuda_ipc_mapping&) = delete;
  ~cuda_ipc_mapping() {
    if (data_) {
      int previous = 0;
      (void)cudaGetDevice(&previous);
      (void)cudaSetDevice(device_);
      (void)cudaIpcCloseMemHandle(data_);
      (void)cudaSetDevice(previous);
    }
  }

  void* data() const noexcept { return data_; }
  /// The size of the exported allocation (0 when the driver cannot tell).
  std::size_t allocation_size() const noexcept { return size_; }
  int device() const noexcept { return device_; }

  void swap(cuda_ipc_mapping& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    std::swap(device_, o.device_);
  }

 private:
  void* data_ = nullptr;
  std::size_t size_ = 0;
  int device_ = -1;
};

}  // namespace inferwire::shm

#endif
