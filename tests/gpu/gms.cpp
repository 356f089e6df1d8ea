// SPDX-License-Identifier: Apache-2.0
// GMS on a GPU: the server with cuda_vmm_backend, clients with cuda_vmm_mapper. The scenarios
// of the CPU tests where device memory matters: commit then read-only remap at the same VAs
// with the data intact, import by a second process, a stale layout, a same-structure layout,
// reallocate + remap, a killed writer's memory released. Without a usable GPU the program
// prints why and exits 77 (ctest: skipped).
#include <catch2/catch.hpp>

#include "../gms/fixture.hpp"
#include "../unit/catch_run.hpp"

#include <inferwire/gms/cuda_vmm.hpp>
#include <inferwire/gms/memory_manager.hpp>

#include <cstdio>
#include <csignal>

#include <spawn.h>
#include <sys/wait.h>

extern char** environ;

using namespace gms_test;
namespace cuda = inferwire::cuda;
using gms::requested_lock_type;
using manager = gms::memory_manager<gms::cuda_vmm_mapper>;

namespace {

std::string self_path;
constexpr std::size_t MiB = std::size_t{1} << 20;

class gpu_server : public basic_test_server<gms::cuda_vmm_backend> {
 public:
  gpu_server() : basic_test_server(gms::cuda_vmm_backend(0)) {}
};

void fill(std::uintptr_t va, std::size_t n, std::uint8_t value) {
  cuda::check(cudaMemset(reinterpret_cast<void*>(va), value, n), "cudaMemset");
  cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

std::vector<std::uint8_t> read(std::uintptr_t va, std::size_t n) {
  std::vector<std::uint8_t> out(n);
  cuda::check(cudaMemcpy(out.data(), reinterpret_cast<void*>(va), n, cudaMemcpyDeviceToHost), "cudaMemcpy");
  return out;
}

/// Runs this program as a peer: `args` after the program name; returns its exit status.
int run_peer(std::vector<std::string> args, pid_t* pid_out = nullptr) {
  args.insert(args.begin(), self_path);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (::posix_spawn(&pid, self_path.c_str(), nullptr, nullptr, argv.data(), environ) != 0) return -1;
  if (pid_out) {
    *pid_out = pid;
    return 0;
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/// Peer: imports the allocation named by metadata key "w" read-only and checks every byte is
/// `value`.
int peer_import(const std::string& path, int value) {
  try {
    manager m(path, gms::cuda_vmm_mapper(0));
    m.connect(requested_lock_type::ro, 10000);
    auto md = m.metadata_get("w");
    if (!md.found) return 2;
    auto va = m.create_mapping(*md.allocation_id);
    const auto bytes = read(va + static_cast<std::uintptr_t>(*md.offset_bytes), 4 * MiB);
    for (auto b : bytes)
      if (b != value) return 3;
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gms peer: %s\n", e.what());
    return 1;
  }
}

/// Peer: takes RW, allocates 64 MiB twice, writes them, then waits to be killed.
int peer_writer(const std::string& path) {
  try {
    manager m(path, gms::cuda_vmm_mapper(0));
    m.connect(requested_lock_type::rw);
    fill(m.create_mapping({}, 64 * MiB), 64 * MiB, 7);
    fill(m.create_mapping({}, 64 * MiB), 64 * MiB, 7);
    for (;;) ::pause();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gms writer peer: %s\n", e.what());
    return 1;
  }
}

}  // namespace

TEST_CASE("gms gpu: commit, then a read-only remap at the same VAs keeps the data", "[gms][gpu]") {
  gpu_server s;
  manager m(s.path(), gms::cuda_vmm_mapper(0));
  m.connect(requested_lock_type::rw);
  const auto a = m.create_mapping({}, 4 * MiB, "weights");
  const auto b = m.create_mapping({}, 3 * MiB + 1, "weights");
  CHECK(m.find(b)->aligned_size % static_cast<std::int64_t>(m.granularity()) == 0);
  fill(a, 4 * MiB, 0x5a);
  fill(b, 3 * MiB + 1, 0xa5);
  m.metadata_put("w", m.find(a)->allocation_id, 0, "{}");
  m.commit();
  CHECK(m.unmapped());
  m.connect(requested_lock_type::ro);
  m.remap_all_vas();
  CHECK(m.mapper().validate(a));
  CHECK(m.mapper().validate(b));
  const auto ra = read(a, 4 * MiB);
  const auto rb = read(b, 3 * MiB + 1);
  CHECK(std::all_of(ra.begin(), ra.end(), [](auto x) { return x == 0x5a; }));
  CHECK(std::all_of(rb.begin(), rb.end(), [](auto x) { return x == 0xa5; }));
  // Another process imports the same memory through the server.
  CHECK(run_peer({"--gms-import", s.path(), "90"}) == 0);
}

TEST_CASE("gms gpu: stale and same-structure layouts", "[gms][gpu]") {
  gpu_server s;
  auto publish = [&](std::size_t size, std::uint8_t value) {
    manager w(s.path(), gms::cuda_vmm_mapper(0));
    w.connect(requested_lock_type::rw);
    const auto va = w.create_mapping({}, static_cast<std::int64_t>(size), "weights");
    fill(va, size, value);
    w.metadata_put("w", w.find(va)->allocation_id, 0, "{}");
    w.commit();
  };
  publish(8 * MiB, 1);
  manager r(s.path(), gms::cuda_vmm_mapper(0));
  r.connect(requested_lock_type::ro);
  const auto va = r.create_mapping(r.metadata_get("w").allocation_id);
  r.unmap_all_vas();
  r.abort();
  publish(8 * MiB, 2);  // same structure, new memory
  r.connect(requested_lock_type::ro);
  r.remap_all_vas();
  CHECK(read(va, 16)[0] == 2);
  r.unmap_all_vas();
  r.abort();
  publish(16 * MiB, 3);  // a different layout
  r.connect(requested_lock_type::ro);
  CHECK_THROWS_AS(r.remap_all_vas(), gms::stale_memory_layout);
}

TEST_CASE("gms gpu: reallocate then remap reuses the VAs", "[gms][gpu]") {
  gpu_server s;
  manager kv(s.path(), gms::cuda_vmm_mapper(0));
  kv.connect(requested_lock_type::rw);
  const auto a = kv.create_mapping({}, 32 * MiB, "kv_cache");
  kv.unmap_all_vas();
  kv.abort();
  REQUIRE(eventually([&] { return gms::session::runtime_state(s.path()).allocation_count == 0; }));
  kv.connect(requested_lock_type::rw);
  kv.reallocate_all_handles();
  kv.remap_all_vas();
  fill(a, 32 * MiB, 9);  // writable again, at the same address
  CHECK(read(a + 32 * MiB - 16, 16)[15] == 9);
}

TEST_CASE("gms gpu: a killed writer's device memory is released", "[gms][gpu]") {
  gpu_server s;
  pid_t pid = 0;
  REQUIRE(run_peer({"--gms-writer", s.path()}, &pid) == 0);
  REQUIRE(eventually([&] { return gms::session::runtime_state(s.path()).allocation_count == 2; },
                     std::chrono::milliseconds(20000)));
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  REQUIRE(eventually([&] { return gms::session::runtime_state(s.path()).state == "EMPTY"; }));
  CHECK(gms::session::runtime_state(s.path()).allocation_count == 0);
}

int main(int argc, char** argv) {
  self_path = argv[0];
  if (argc == 4 && std::string(argv[1]) == "--gms-import") return peer_import(argv[2], std::atoi(argv[3]));
  if (argc == 3 && std::string(argv[1]) == "--gms-writer") return peer_writer(argv[2]);
  if (!cuda::available()) {
    std::printf("SKIPPED: GMS GPU tests need a GPU: %s\n", cuda::unavailable_reason().c_str());
    return 77;
  }
  try {
    gms::cuda_vmm_backend probe(0);
  } catch (const std::exception& e) {
    std::printf("SKIPPED: GMS GPU tests need CUDA VMM: %s\n", e.what());
    return 77;
  }
  return inferwire::test::run_catch(argc, argv);
}
