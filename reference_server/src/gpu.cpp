// SPDX-License-Identifier: Apache-2.0
#include "gpu.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>

#if INFERWIRE_SERVER_CUDA
#include "kernels.hpp"

#include <inferwire/cuda/runtime.hpp>
#endif

namespace inferwire::server {

namespace {
std::atomic<std::uint64_t> host_copies{0};
}

std::uint64_t gpu_host_copies() noexcept { return host_copies.load(std::memory_order_relaxed); }

#if INFERWIRE_SERVER_CUDA

int gpu_device_count() noexcept { return cuda::device_count(); }

std::string gpu_unavailable_reason() { return cuda::unavailable_reason(); }

namespace {

status cuda_failure(cudaError_t e, const std::string& what) {
  (void)cudaGetLastError();
  return {errc::internal, what + " failed: " + cuda::error_text(e)};
}

bool element_of(data_type t, kernels::element& out) {
  using kernels::element;
  switch (t) {
    case data_type::uint8: out = element::u8; return true;
    case data_type::uint16: out = element::u16; return true;
    case data_type::uint32: out = element::u32; return true;
    case data_type::uint64: out = element::u64; return true;
    case data_type::int8: out = element::i8; return true;
    case data_type::int16: out = element::i16; return true;
    case data_type::int32: out = element::i32; return true;
    case data_type::int64: out = element::i64; return true;
    case data_type::fp32: out = element::f32; return true;
    case data_type::fp64: out = element::f64; return true;
    default: return false;
  }
}

// Runs `f` with `device` current on this thread, then makes the previous device current again;
// errors are dropped (for destructors, which must not throw; cuda::device_guard does).
template <class F>
void on_device_quietly(int device, F&& f) noexcept {
  int previous = 0;
  (void)cudaGetDevice(&previous);
  if (previous != device) (void)cudaSetDevice(device);
  f();
  (void)cudaGetLastError();
  if (previous != device) (void)cudaSetDevice(previous);
}

// Whether `device` allocates scratch from its stream-ordered pool, decided once per device;
// its pool then keeps up to scratch_pool_keep bytes of freed memory instead of returning them
// at every synchronization (the pool's default).
bool pooled_scratch(int device) {
  constexpr int tracked = 64;
  static std::once_flag once[tracked];
  static bool pooled[tracked] = {};
  if (device < 0 || device >= tracked) return false;
  std::call_once(once[device], [device] {
    int supported = 0;
    cudaMemPool_t pool = nullptr;
    std::uint64_t keep = scratch_pool_keep;
    pooled[device] = cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, device) == cudaSuccess &&
                     supported && cudaDeviceGetDefaultMemPool(&pool, device) == cudaSuccess &&
                     cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep) == cudaSuccess;
    (void)cudaGetLastError();
  });
  return pooled[device];
}

}  // namespace

device_buffer::device_buffer(std::size_t size, int device, status& st) {
  st = {};
  if (size == 0) return;
  try {
    cuda::device_guard g(device);
    void* p = nullptr;
    const bool pooled = pooled_scratch(device);
    const cudaError_t e = pooled ? cudaMallocAsync(&p, size, cudaStreamPerThread) : cudaMalloc(&p, size);
    if (e != cudaSuccess) {
      st = cuda_failure(e, (pooled ? "cudaMallocAsync(" : "cudaMalloc(") + std::to_string(size) + ")");
      return;
    }
    data_ = static_cast<std::byte*>(p);
    size_ = size;
    device_ = device;
    pooled_ = pooled;
  } catch (const std::exception& e) {
    st = {errc::internal, e.what()};
  }
}

device_buffer::device_buffer(device_buffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)),
      device_(std::exchange(o.device_, -1)), pooled_(std::exchange(o.pooled_, false)) {}

device_buffer& device_buffer::operator=(device_buffer&& o) noexcept {
  if (this != &o) {
    device_buffer old(std::move(*this));
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    device_ = std::exchange(o.device_, -1);
    pooled_ = std::exchange(o.pooled_, false);
  }
  return *this;
}

device_buffer::~device_buffer() {
  if (!data_) return;
  // In stream order on this thread's stream: work queued on it before has used the memory, and
  // work elsewhere (another thread's stream) was waited for before the buffer is dropped.
  on_device_quietly(device_, [&] { (void)(pooled_ ? cudaFreeAsync(data_, cudaStreamPerThread) : cudaFree(data_)); });
}

status gpu_wait(int device) {
  try {
    cuda::device_guard g(device);
    if (auto e = cudaStreamSynchronize(cudaStreamPerThread); e != cudaSuccess)
      return cuda_failure(e, "waiting for the GPU");
  } catch (const std::exception& x) {
    return {errc::internal, x.what()};
  }
  return {};
}

namespace {

// This thread's pinned staging buffer (portable: any device may read it), and whether a
// gpu_transfers of this thread holds it.
struct staging_buffer {
  std::byte* data = nullptr;
  bool failed = false;
  bool taken = false;
  ~staging_buffer() {
    if (data) (void)cudaFreeHost(data);
  }
};
thread_local staging_buffer thread_staging;

}  // namespace

gpu_transfers::~gpu_transfers() {
  if (!finished_) on_device_quietly(device_, [] { (void)cudaStreamSynchronize(cudaStreamPerThread); });
  if (holds_staging_) thread_staging.taken = false;
}

std::byte* gpu_transfers::stage(std::size_t size) noexcept {
  auto& b = thread_staging;
  if (!holds_staging_) {
    if (b.taken || b.failed) return nullptr;
    if (!b.data) {
      void* p = nullptr;
      if (cudaHostAlloc(&p, pinned_staging_bytes, cudaHostAllocPortable) != cudaSuccess) {
        (void)cudaGetLastError();
        b.failed = true;  // pageable copies from now on
        return nullptr;
      }
      b.data = static_cast<std::byte*>(p);
    }
    b.taken = holds_staging_ = true;
  }
  constexpr std::size_t align = 256;
  if (size > pinned_staging_bytes - used_) return nullptr;
  std::byte* at = b.data + used_;
  used_ += std::min(pinned_staging_bytes - used_, (size + align - 1) / align * align);
  return at;
}

status gpu_transfers::to_device(std::byte* dst, placement src) {
  if (src.size == 0) return {};
  try {
    cuda::device_guard g(device_);
    std::byte* staged = src.on_device() ? nullptr : stage(src.size);
    if (!staged) return gpu_copy({dst, src.size, device_}, src, src.size, gpu_completion::queue);
    std::memcpy(staged, src.data, src.size);
    host_copies.fetch_add(1, std::memory_order_relaxed);
    if (auto e = cudaMemcpyAsync(dst, staged, src.size, cudaMemcpyHostToDevice, cudaStreamPerThread); e != cudaSuccess)
      return cuda_failure(e, "cudaMemcpyAsync");
  } catch (const std::exception& x) {
    return {errc::internal, x.what()};
  }
  return {};
}

status gpu_transfers::to_host(std::byte* dst, placement src) {
  if (src.size == 0) return {};
  try {
    cuda::device_guard g(device_);
    std::byte* staged = stage(src.size);
    if (!staged) return gpu_copy({dst, src.size, -1}, src, src.size, gpu_completion::queue);
    host_copies.fetch_add(1, std::memory_order_relaxed);
    if (auto e = cudaMemcpyAsync(staged, src.data, src.size, cudaMemcpyDeviceToHost, cudaStreamPerThread); e != cudaSuccess)
      return cuda_failure(e, "cudaMemcpyAsync");
    landings_.push_back({dst, staged, src.size});
  } catch (const std::exception& x) {
    return {errc::internal, x.what()};
  }
  return {};
}

status gpu_transfers::finish() {
  if (auto st = gpu_wait(device_)) return st;
  finished_ = true;
  for (const auto& l : landings_) std::memcpy(l.dst, l.staged, l.size);
  landings_.clear();
  return {};
}

status gpu_copy(placement dst, placement src, std::size_t size, gpu_completion completion) {
  if (size == 0) return {};
  if (!dst.on_device() && !src.on_device()) {
    std::memcpy(dst.data, src.data, size);
    return {};
  }
  try {
    cuda::device_guard g(dst.on_device() ? dst.device : src.device);
    cudaError_t e = cudaSuccess;
    if (dst.on_device() && src.on_device() && dst.device != src.device) {
      e = cudaMemcpyPeerAsync(dst.data, dst.device, src.data, src.device, size,
                              cudaStreamPerThread);
    } else {
      e = cudaMemcpyAsync(dst.data, src.data, size, cudaMemcpyDefault, cudaStreamPerThread);
      if (dst.on_device() != src.on_device()) host_copies.fetch_add(1, std::memory_order_relaxed);
    }
    if (e == cudaSuccess && completion == gpu_completion::wait) e = cudaStreamSynchronize(cudaStreamPerThread);
    if (e != cudaSuccess) return cuda_failure(e, "cudaMemcpy");
  } catch (const std::exception& x) {
    return {errc::internal, x.what()};
  }
  return {};
}

status gpu_add_sub(int device, data_type type, const std::byte* a, const std::byte* b,
                   std::byte* sum, std::byte* diff, std::size_t count, gpu_completion completion) {
  kernels::element el{};
  if (!element_of(type, el))
    return {errc::invalid_arg,
            "backend 'simple' does not support data type " + std::string(wire_name(type))};
  try {
    cuda::device_guard g(device);
    cudaError_t e = kernels::add_sub(el, a, b, sum, diff, count, cudaStreamPerThread);
    if (e == cudaSuccess && completion == gpu_completion::wait) e = cudaStreamSynchronize(cudaStreamPerThread);
    if (e != cudaSuccess) return cuda_failure(e, "the simple kernel");
  } catch (const std::exception& x) {
    return {errc::internal, x.what()};
  }
  return {};
}

#else  // no CUDA toolkit at build time

int gpu_device_count() noexcept { return 0; }

std::string gpu_unavailable_reason() { return "this build of the server has no CUDA support"; }

device_buffer::device_buffer(std::size_t, int, status& st) {
  st = {errc::unsupported, gpu_unavailable_reason()};
}
device_buffer::device_buffer(device_buffer&&) noexcept = default;
device_buffer& device_buffer::operator=(device_buffer&&) noexcept = default;
device_buffer::~device_buffer() = default;

status gpu_copy(placement dst, placement src, std::size_t size, gpu_completion) {
  if (dst.on_device() || src.on_device()) return {errc::unsupported, gpu_unavailable_reason()};
  if (size) std::memcpy(dst.data, src.data, size);
  return {};
}

status gpu_add_sub(int, data_type, const std::byte*, const std::byte*, std::byte*, std::byte*,
                   std::size_t, gpu_completion) {
  return {errc::unsupported, gpu_unavailable_reason()};
}

status gpu_wait(int) { return {errc::unsupported, gpu_unavailable_reason()}; }

gpu_transfers::~gpu_transfers() = default;
std::byte* gpu_transfers::stage(std::size_t) noexcept { return nullptr; }
status gpu_transfers::to_device(std::byte*, placement) { return {errc::unsupported, gpu_unavailable_reason()}; }
status gpu_transfers::to_host(std::byte*, placement) { return {errc::unsupported, gpu_unavailable_reason()}; }
status gpu_transfers::finish() { return {}; }

#endif

}  // namespace inferwire::server
