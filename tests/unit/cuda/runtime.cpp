// SPDX-License-Identifier: Apache-2.0
#include <inferwire/cuda/runtime.hpp>

#include <catch2/catch.hpp>

namespace cuda = inferwire::cuda;

TEST_CASE("cuda::runtime reports availability without a driver too", "[cuda]") {
  // Works on machines with and without a GPU: the probe never throws.
  const int n = cuda::device_count();
  CHECK(n >= 0);
  CHECK(cuda::available() == (n > 0));
  CHECK(cuda::unavailable_reason().empty() == cuda::available());
  int host = 0;
  CHECK(cuda::device_of(&host) == -1);
  void* base = nullptr;
  std::size_t size = 0;
  CHECK_FALSE(cuda::allocation_range(&host, base, size));
}

TEST_CASE("cuda::check throws with the CUDA name and text", "[cuda]") {
  CHECK_NOTHROW(cuda::check(cudaSuccess, "nothing"));
  try {
    cuda::check(cudaErrorInvalidValue, "cudaMemcpy");
    FAIL("no throw");
  } catch (const cuda::error& e) {
    CHECK(e.code() == cudaErrorInvalidValue);
    CHECK(std::string(e.what()).find("cudaMemcpy failed: cudaErrorInvalidValue") == 0);
  }
  CHECK(cuda::error_text(cudaErrorMemoryAllocation).find("cudaErrorMemoryAllocation") == 0);
}
