// SPDX-License-Identifier: Apache-2.0
// The PyTorch pluggable allocator library, loaded with dlopen as PyTorch loads it, configured
// through its environment variables, with the mmap mapper against the memfd server.
#include "fixture.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <string>

#include <dlfcn.h>
#include <unistd.h>

using namespace gms_test;
using Catch::Matchers::Contains;

namespace {

struct allocator_lib {
  allocator_lib() {
    handle = ::dlopen(INFERWIRE_GMS_TORCH_ALLOCATOR_PATH, RTLD_NOW | RTLD_LOCAL);
    REQUIRE(handle != nullptr);
    malloc_fn = reinterpret_cast<void* (*)(ssize_t, int, void*)>(::dlsym(handle, "my_malloc"));
    free_fn = reinterpret_cast<void (*)(void*, ssize_t, int, void*)>(::dlsym(handle, "my_free"));
    commit = reinterpret_cast<int (*)(int)>(::dlsym(handle, "inferwire_gms_commit"));
    close = reinterpret_cast<int (*)(int)>(::dlsym(handle, "inferwire_gms_close"));
    metadata_put = reinterpret_cast<int (*)(int, const char*, const void*, const char*, size_t)>(
        ::dlsym(handle, "inferwire_gms_metadata_put"));
    last_error = reinterpret_cast<const char* (*)()>(::dlsym(handle, "inferwire_gms_last_error"));
    REQUIRE(malloc_fn);
    REQUIRE(free_fn);
    REQUIRE(commit);
    REQUIRE(close);
    REQUIRE(metadata_put);
    REQUIRE(last_error);
  }
  ~allocator_lib() { ::dlclose(handle); }
  void* handle = nullptr;
  void* (*malloc_fn)(ssize_t, int, void*) = nullptr;
  void (*free_fn)(void*, ssize_t, int, void*) = nullptr;
  int (*commit)(int) = nullptr;
  int (*close)(int) = nullptr;
  int (*metadata_put)(int, const char*, const void*, const char*, size_t) = nullptr;
  const char* (*last_error)() = nullptr;
};

}  // namespace

TEST_CASE("gms torch allocator: my_malloc/my_free place memory in GMS", "[gms]") {
  test_server s;
  allocator_lib lib;
  ::setenv("INFERWIRE_GMS_MAPPER", "mmap", 1);
  ::setenv("INFERWIRE_GMS_SOCKET_PATH", s.path().c_str(), 1);
  ::setenv("INFERWIRE_GMS_TAG", "weights", 1);
  ::unsetenv("INFERWIRE_GMS_LOCK");
  const int device = 10;  // each test case uses its own device slot of the library

  auto* a = static_cast<char*>(lib.malloc_fn(1000, device, nullptr));
  REQUIRE(a != nullptr);
  auto* b = static_cast<char*>(lib.malloc_fn(3 << 20, device, nullptr));
  REQUIRE(b != nullptr);
  std::memcpy(a + 10, "hello", 5);
  auto rs = gms::session::runtime_state(s.path());
  CHECK(rs.state == "RW");
  CHECK(rs.allocation_count == 2);
  lib.free_fn(b, 3 << 20, device, nullptr);
  CHECK(gms::session::runtime_state(s.path()).allocation_count == 1);
  lib.free_fn(reinterpret_cast<void*>(0x1234), 1, device, nullptr);  // unknown: ignored
  CHECK_THAT(std::string(lib.last_error()), Contains("unknown address"));

  CHECK(lib.metadata_put(device, "layer.weight", a + 10, "{\"dtype\": \"torch.float32\"}", 26) == 0);
  CHECK(lib.metadata_put(device, "nowhere", &device, "", 0) == -1);
  CHECK(lib.commit(device) == 0);
  // Published, and mapped back read-only at the same address.
  CHECK(std::string(a + 10, 5) == "hello");
  gms::session r(s.path(), gms::requested_lock_type::ro);
  auto md = r.metadata_get("layer.weight");
  REQUIRE(md.found);
  CHECK(md.offset_bytes == 10);
  CHECK(md.value->data == "{\"dtype\": \"torch.float32\"}");
  CHECK(r.list_allocations("weights").size() == 1);
  // A reader cannot allocate.
  CHECK(lib.malloc_fn(10, device, nullptr) == nullptr);
  CHECK_THAT(std::string(lib.last_error()), Contains("Operation requires RW mode"));
  CHECK(lib.close(device) == 0);
}

TEST_CASE("gms torch allocator: configuration errors return null with a reason", "[gms]") {
  allocator_lib lib;
  ::setenv("INFERWIRE_GMS_MAPPER", "mmap", 1);
  ::setenv("INFERWIRE_GMS_LOCK", "exclusive", 1);
  CHECK(lib.malloc_fn(10, 11, nullptr) == nullptr);
  CHECK_THAT(std::string(lib.last_error()), Contains("INFERWIRE_GMS_LOCK must be rw, ro or rw_or_ro"));
  ::setenv("INFERWIRE_GMS_LOCK", "rw", 1);
  ::setenv("INFERWIRE_GMS_SOCKET_PATH", "/tmp/iw-gms-nothing-{device}.sock", 1);
  CHECK(lib.malloc_fn(10, 12, nullptr) == nullptr);
  CHECK_THAT(std::string(lib.last_error()), Contains("GMS server not running at /tmp/iw-gms-nothing-12.sock"));
  CHECK(lib.malloc_fn(0, 12, nullptr) == nullptr);
  ::unsetenv("INFERWIRE_GMS_LOCK");
  ::unsetenv("INFERWIRE_GMS_SOCKET_PATH");
  // Without a path the allocator looks where inferwire-gms-server listens by default: its
  // private per-user folder (no GMS_SOCKET_DIR, no XDG_RUNTIME_DIR), not the shared temp dir.
  const char* saved_dir = std::getenv("GMS_SOCKET_DIR");
  const char* saved_xdg = std::getenv("XDG_RUNTIME_DIR");
  const std::string dir = saved_dir ? saved_dir : "", xdg = saved_xdg ? saved_xdg : "";
  ::unsetenv("GMS_SOCKET_DIR");
  ::unsetenv("XDG_RUNTIME_DIR");
  CHECK(lib.malloc_fn(10, 13, nullptr) == nullptr);
  const std::string expected = std::filesystem::temp_directory_path().string() + "/inferwire-gms-" +
                               std::to_string(::geteuid()) + "/gms_memfd13_weights.sock";
  CHECK_THAT(std::string(lib.last_error()), Contains("GMS server not running at " + expected));
  if (saved_dir) ::setenv("GMS_SOCKET_DIR", dir.c_str(), 1);
  if (saved_xdg) ::setenv("XDG_RUNTIME_DIR", xdg.c_str(), 1);
  ::unsetenv("INFERWIRE_GMS_MAPPER");
}
