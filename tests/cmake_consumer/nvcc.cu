// SPDX-License-Identifier: Apache-2.0
// A translation unit compiled by nvcc that includes inferwire's cuda, shm and gms headers, as
// a CUDA application that shares device memory does. On a GPU it runs a kernel on a CUDA
// shared-memory region and checks the result; without one it exits 77 with the reason.
#include <inferwire/cuda/runtime.hpp>
#include <inferwire/gms/cuda_vmm.hpp>
#include <inferwire/gms/memory_manager.hpp>
#include <inferwire/gms/session.hpp>
#include <inferwire/shm/cuda_region.hpp>
#include <inferwire/shm/system_region.hpp>

#include <cstdio>
#include <vector>

__global__ void add_one(int* v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) v[i] += 1;
}

int main() {
  namespace iw = inferwire;
  if (!iw::cuda::available()) {
    std::printf("consumer_nvcc: compiled by nvcc; not run: %s\n", iw::cuda::unavailable_reason().c_str());
    return 77;
  }
  const int n = 1024;
  auto region = iw::shm::cuda_region::allocate(n * sizeof(int), 0);
  std::vector<int> host(n, 41);
  iw::cuda::check(cudaMemcpy(region.data(), host.data(), n * sizeof(int), cudaMemcpyHostToDevice), "cudaMemcpy");
  add_one<<<(n + 255) / 256, 256>>>(static_cast<int*>(region.data()), n);
  iw::cuda::check(cudaMemcpy(host.data(), region.data(), n * sizeof(int), cudaMemcpyDeviceToHost), "cudaMemcpy");
  for (int x : host)
    if (x != 42) return 1;
  // The GMS mapper opens the device through the driver entry points.
  iw::gms::cuda_vmm_mapper mapper(0);
  if (mapper.granularity() == 0) return 2;
  std::puts("consumer_nvcc: ok");
  return 0;
}
