// SPDX-License-Identifier: Apache-2.0
// The reference server's GPU support: device discovery, copies between host and device memory
// (every copy that touches host memory is counted, so tests and benchmarks can check the
// zero-copy path), device scratch memory, and the CUDA kernels of the built-in backends.
// Without the CUDA toolkit or nvcc, or on a machine without a GPU, the functions report that
// GPUs are not supported and the server runs on the CPU.
#pragma once

#include "shm_registry.hpp"

#include <inferwire/core/data_type.hpp>
#include <inferwire/core/error.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace inferwire::server {

/// Usable GPUs (0 without a driver, a device, or CUDA support in this build).
int gpu_device_count() noexcept;

/// Why the server has no GPUs ("" when it has).
std::string gpu_unavailable_reason();

/// Host<->device copies made so far (staging of tensors that are not where the model runs).
std::uint64_t gpu_host_copies() noexcept;

/// Device scratch memory on one GPU, freed when destroyed. It comes from the device's
/// stream-ordered pool on the calling thread's stream (no device-wide synchronization on either
/// end, and freed memory is reused: up to `scratch_pool_keep` bytes per device stay cached), or
/// from cudaMalloc where the device has no memory pools. Use it on one thread's stream, or after
/// the work that used it was waited for.
class device_buffer {
 public:
  device_buffer() = default;
  device_buffer(std::size_t size, int device, status& st);
  device_buffer(device_buffer&& o) noexcept;
  device_buffer& operator=(device_buffer&& o) noexcept;
  ~device_buffer();
  std::byte* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }

 private:
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  int device_ = -1;
  bool pooled_ = false;
};

/// Freed device scratch a GPU's pool keeps for reuse (beyond it, memory goes back to the device
/// at the next synchronization).
inline constexpr std::uint64_t scratch_pool_keep = std::uint64_t{64} << 20;

/// Whether a GPU call waits for the work it queued.
enum class gpu_completion { wait, queue };

/// Copies `size` bytes between any two places (host or device, any devices) on the calling
/// thread's stream; with `gpu_completion::wait` it waits for it. A queued copy from host memory
/// has read its source when the call returns, and one into pageable host memory has completed
/// (CUDA's rules for pageable memory); device data is ready after gpu_wait. Counts a host copy
/// when exactly one side is host memory.
status gpu_copy(placement dst, placement src, std::size_t size,
                gpu_completion completion = gpu_completion::wait);

/// The kernel of the `simple` family on `device`: sum = a + b, diff = a - b over `count`
/// elements of `type` (numeric types; integers wrap), on the calling thread's stream.
status gpu_add_sub(int device, data_type type, const std::byte* a, const std::byte* b,
                   std::byte* sum, std::byte* diff, std::size_t count,
                   gpu_completion completion = gpu_completion::wait);

/// Waits for the work this thread queued on `device` (the one completion wait of a request
/// whose copies and kernels were queued).
status gpu_wait(int device);

/// Pinned host memory each thread keeps for staging (allocated on its first staged copy).
inline constexpr std::size_t pinned_staging_bytes = std::size_t{4} << 20;

/// The GPU work of one request on GPU `device`, queued on this thread's stream: its copies,
/// made here, and its kernels, launched by the caller in between. Host data goes through the
/// thread's pinned staging buffer, so every copy is asynchronous and the request waits once,
/// in finish(), for everything the thread queued on the GPU; what no longer fits there goes as
/// a pageable copy (CUDA completes those on the host side before returning). Device-to-device
/// copies are queued as they are. A copy to host memory has landed when finish() returned
/// success. Destroyed unfinished, it waits too: the staging buffer is the thread's next
/// request's.
class gpu_transfers {
 public:
  explicit gpu_transfers(int device) noexcept : device_(device) {}
  ~gpu_transfers();
  gpu_transfers(const gpu_transfers&) = delete;
  gpu_transfers& operator=(const gpu_transfers&) = delete;

  /// Queues `src` (host or any device) into `dst`, device memory of this GPU.
  status to_device(std::byte* dst, placement src);
  /// Queues `src` (device memory of this GPU) into `dst`, host memory.
  status to_host(std::byte* dst, placement src);
  /// Waits for every copy and kernel this thread queued on the GPU (always: a kernel may have
  /// been queued without copies), then moves staged data to its host destinations.
  status finish();

 private:
  struct landing {
    std::byte* dst;
    const std::byte* staged;
    std::size_t size;
  };
  std::byte* stage(std::size_t size) noexcept;

  int device_;
  bool finished_ = false;
  bool holds_staging_ = false;
  std::size_t used_ = 0;
  std::vector<landing> landings_;
};

}  // namespace inferwire::server
