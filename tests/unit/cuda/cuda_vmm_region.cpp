// SPDX-License-Identifier: Apache-2.0
// What the VMM export does on any machine: the refusals before CUDA, and, without a GPU, the
// reason instead of a crash. The export of real VMM memory runs in tests/gpu.
#include <inferwire/shm/cuda_vmm_region.hpp>

#include <catch2/catch.hpp>

#include <string>
#include <vector>

namespace shm = inferwire::shm;
namespace cuda = inferwire::cuda;

namespace {
// Anything with register_cuda_shared_memory(request): never reached here.
struct recording_client {
  int calls = 0;
  void register_cuda_shared_memory(const inferwire::v2::cuda_shm_register_request&) { ++calls; }
};
}  // namespace

TEST_CASE("cuda_vmm_region: refusals, and the reason when there is no GPU", "[cuda][vmm]") {
  int host = 0;
  CHECK_THROWS_AS(shm::export_cuda_vmm(&host, 0), std::invalid_argument);
  CHECK_THROWS_AS(shm::cuda_vmm_memory::allocate(0, 1), std::invalid_argument);
  CHECK_THROWS_AS(shm::cuda_vmm_memory::allocate(1, 0), std::invalid_argument);
  recording_client client;
  if (!cuda::available()) {
    try {
      shm::export_cuda_vmm(&host, sizeof host);
      FAIL("exported without a GPU");
    } catch (const cuda::error& e) {
      CHECK(std::string(e.what()) == cuda::unavailable_reason());
    }
    CHECK_THROWS_AS(shm::cuda_vmm_memory::allocate(4096, 2), cuda::error);
    CHECK_THROWS_AS(shm::register_cuda_vmm(client, "r", &host, sizeof host, "/nonexistent.sock"), cuda::error);
  } else {
    // Host memory is not device memory.
    CHECK_THROWS_AS(shm::export_cuda_vmm(&host, sizeof host), cuda::error);
  }
  CHECK(client.calls == 0);
  shm::cuda_vmm_memory none;
  CHECK(none.data() == nullptr);
  CHECK(none.size() == 0);
}
