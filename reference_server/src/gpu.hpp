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

namespace inferwire::server {

/// Usable GPUs (0 without a driver, a device, or CUDA support in this build).
int gpu_device_count() noexcept;

/// Why the server has no GPUs ("" when it has).
std::string gpu_unavailable_reason();

/// Host<->device copies made so far (staging of tensors that are not where the model runs).
std::uint64_t gpu_host_copies() noexcept;

/// Device memory on one GPU, freed when destroyed.
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
};

/// Copies `size` bytes between any two places (host or device, any devices) on the calling
/// thread's stream and waits for it. Counts a host copy when exactly one side is host memory.
status gpu_copy(placement dst, placement src, std::size_t size);

/// The kernel of the `simple` family on `device`: sum = a + b, diff = a - b over `count`
/// elements of `type` (numeric types; integers wrap). Waits for completion.
status gpu_add_sub(int device, data_type type, const std::byte* a, const std::byte* b,
                   std::byte* sum, std::byte* diff, std::size_t count);

}  // namespace inferwire::server
