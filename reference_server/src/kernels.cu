// SPDX-License-Identifier: Apache-2.0
#include "kernels.hpp"

#include <cstdint>
#include <type_traits>

namespace inferwire::server::kernels {

namespace {

template <class T>
__device__ inline T wrap_add(T x, T y) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(x) + static_cast<U>(y)));
  } else {
    return x + y;
  }
}
template <class T>
__device__ inline T wrap_sub(T x, T y) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(x) - static_cast<U>(y)));
  } else {
    return x - y;
  }
}

// A grid-stride loop: any element count with a bounded grid.
template <class T>
__global__ void add_sub_kernel(const T* __restrict__ a, const T* __restrict__ b,
                               T* __restrict__ sum, T* __restrict__ diff, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const T x = a[i], y = b[i];
    sum[i] = wrap_add(x, y);
    diff[i] = wrap_sub(x, y);
  }
}

template <class T>
cudaError_t launch(const void* a, const void* b, void* sum, void* diff, std::size_t n,
                   cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  constexpr unsigned threads = 256;
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  static thread_local int cached_device = -1, cached_sms = 0;
  if (device != cached_device) {
    cudaDeviceGetAttribute(&cached_sms, cudaDevAttrMultiProcessorCount, device);
    cached_device = device;
  }
  sms = cached_sms;
  const std::size_t wanted = (n + threads - 1) / threads;
  const std::size_t cap = static_cast<std::size_t>(sms > 0 ? sms : 80) * 16;
  const unsigned blocks = static_cast<unsigned>(wanted < cap ? wanted : cap);
  add_sub_kernel<T><<<blocks, threads, 0, stream>>>(
      static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(sum),
      static_cast<T*>(diff), n);
  return cudaGetLastError();
}

}  // namespace

cudaError_t add_sub(element type, const void* a, const void* b, void* sum, void* diff,
                    std::size_t n, cudaStream_t stream) {
  switch (type) {
    case element::u8: return launch<std::uint8_t>(a, b, sum, diff, n, stream);
    case element::u16: return launch<std::uint16_t>(a, b, sum, diff, n, stream);
    case element::u32: return launch<std::uint32_t>(a, b, sum, diff, n, stream);
    case element::u64: return launch<std::uint64_t>(a, b, sum, diff, n, stream);
    case element::i8: return launch<std::int8_t>(a, b, sum, diff, n, stream);
    case element::i16: return launch<std::int16_t>(a, b, sum, diff, n, stream);
    case element::i32: return launch<std::int32_t>(a, b, sum, diff, n, stream);
    case element::i64: return launch<std::int64_t>(a, b, sum, diff, n, stream);
    case element::f32: return launch<float>(a, b, sum, diff, n, stream);
    case element::f64: return launch<double>(a, b, sum, diff, n, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace inferwire::server::kernels
