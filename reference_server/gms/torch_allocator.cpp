// SPDX-License-Identifier: Apache-2.0
// libinferwire_gms_torch_allocator.so: a PyTorch pluggable allocator that places tensors in
// GMS memory with no Python callbacks.
//
//   alloc = torch.cuda.memory.CUDAPluggableAllocator(path, "my_malloc", "my_free")
//   pool = torch.cuda.memory.MemPool(alloc.allocator())
//   with torch.cuda.use_mem_pool(pool): weights = torch.empty(...)   # GMS memory
//
// Configuration (read at the first call for each device):
//   INFERWIRE_GMS_SOCKET_PATH   socket path; "{device}" is replaced by the device ordinal.
//                               Default: inferwire-gms-server's default socket
//                               (socket_path.hpp: $GMS_SOCKET_DIR, else $XDG_RUNTIME_DIR, else
//                               a private per-user folder / gms_<GPU-UUID>_<tag>.sock).
//   INFERWIRE_GMS_TAG           server tag and allocation tag (default "weights")
//   INFERWIRE_GMS_LOCK          rw (default), rw_or_ro or ro
//   INFERWIRE_GMS_TIMEOUT_MS    handshake timeout in ms (default: wait forever)
//   INFERWIRE_GMS_MAPPER        cuda (default) or mmap (CPU memory from a memfd server, for tests)
//
// Besides the two symbols PyTorch needs, C functions (for ctypes) publish and describe the
// memory: inferwire_gms_metadata_put, inferwire_gms_commit (commit, then reconnect read-only
// and map the same addresses back), inferwire_gms_close, inferwire_gms_last_error.
#include <inferwire/gms/cuda_vmm_mapper.hpp>
#include <inferwire/gms/memory_manager.hpp>
#include <inferwire/gms/mmap_mapper.hpp>

#include "socket_path.hpp"

#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <sys/types.h>

namespace gms = inferwire::gms;

namespace {

struct config {
  std::string socket_path;
  std::string tag = "weights";
  gms::requested_lock_type lock = gms::requested_lock_type::rw;
  std::optional<std::int64_t> timeout_ms;
  bool mmap = false;
};

std::string env(const char* name, const std::string& fallback = {}) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

config read_config(int device) {
  config c;
  c.tag = env("INFERWIRE_GMS_TAG", "weights");
  const std::string lock = env("INFERWIRE_GMS_LOCK", "rw");
  if (lock == "rw") c.lock = gms::requested_lock_type::rw;
  else if (lock == "ro") c.lock = gms::requested_lock_type::ro;
  else if (lock == "rw_or_ro") c.lock = gms::requested_lock_type::rw_or_ro;
  else throw gms::error("INFERWIRE_GMS_LOCK must be rw, ro or rw_or_ro, got '" + lock + "'");
  if (const std::string t = env("INFERWIRE_GMS_TIMEOUT_MS"); !t.empty()) {
    std::size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(t, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != t.size()) throw gms::error("INFERWIRE_GMS_TIMEOUT_MS must be an integer, got '" + t + "'");
    c.timeout_ms = v;
  }
  const std::string mapper = env("INFERWIRE_GMS_MAPPER", "cuda");
  if (mapper != "cuda" && mapper != "mmap")
    throw gms::error("INFERWIRE_GMS_MAPPER must be cuda or mmap, got '" + mapper + "'");
  c.mmap = mapper == "mmap";
  c.socket_path = env("INFERWIRE_GMS_SOCKET_PATH");
  // Where inferwire-gms-server listens by default: the same function decides for both.
  if (c.socket_path.empty()) c.socket_path = gms::programs::default_socket_path(c.mmap ? "memfd" : "cuda", device, c.tag);
  for (auto pos = c.socket_path.find("{device}"); pos != std::string::npos; pos = c.socket_path.find("{device}"))
    c.socket_path.replace(pos, 8, std::to_string(device));
  return c;
}

/// One device's manager, whatever its mapper.
class device_pool {
 public:
  virtual ~device_pool() = default;
  virtual void* allocate(std::size_t size) = 0;
  virtual bool release(void* p) = 0;
  virtual void metadata_put(const std::string& key, const void* p, const std::string& value) = 0;
  virtual void commit() = 0;
};

template <class Mapper>
class pool_of final : public device_pool {
 public:
  pool_of(config c, Mapper mapper) : cfg_(std::move(c)), manager_(cfg_.socket_path, std::move(mapper)) {
    manager_.connect(cfg_.lock, cfg_.timeout_ms);
  }
  void* allocate(std::size_t size) override {
    return reinterpret_cast<void*>(manager_.create_mapping({}, static_cast<std::int64_t>(size), cfg_.tag));
  }
  bool release(void* p) override {
    const auto va = reinterpret_cast<std::uintptr_t>(p);
    if (!manager_.mappings().count(va)) return false;
    manager_.destroy_mapping(va);
    return true;
  }
  void metadata_put(const std::string& key, const void* p, const std::string& value) override {
    const auto* m = manager_.find(reinterpret_cast<std::uintptr_t>(p));
    if (!m) throw gms::error("address is not in GMS memory of this device");
    manager_.metadata_put(key, m->allocation_id,
                          static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(p) - m->va), value);
  }
  void commit() override {
    manager_.commit();
    manager_.connect(gms::requested_lock_type::ro, cfg_.timeout_ms);
    manager_.remap_all_vas();
  }

 private:
  config cfg_;
  gms::memory_manager<Mapper> manager_;
};

std::mutex mutex;
std::map<int, std::unique_ptr<device_pool>> pools;
thread_local std::string last_error;

device_pool& pool(int device) {
  auto& p = pools[device];
  if (!p) {
    config c = read_config(device);
    if (c.mmap) p = std::make_unique<pool_of<gms::mmap_mapper>>(std::move(c), gms::mmap_mapper());
    else p = std::make_unique<pool_of<gms::cuda_vmm_mapper>>(std::move(c), gms::cuda_vmm_mapper(device));
  }
  return *p;
}

template <class F>
int guarded(F f) noexcept {
  try {
    std::lock_guard lock(mutex);
    f();
    return 0;
  } catch (const std::exception& e) {
    last_error = e.what();
  } catch (...) {
    last_error = "unknown error";
  }
  return -1;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) void* my_malloc(ssize_t size, int device, void* /*stream*/) {
  void* out = nullptr;
  if (size <= 0) return nullptr;
  guarded([&] { out = pool(device).allocate(static_cast<std::size_t>(size)); });
  return out;
}

__attribute__((visibility("default"))) void my_free(void* ptr, ssize_t /*size*/, int device, void* /*stream*/) {
  guarded([&] {
    auto it = pools.find(device);
    if (it == pools.end() || !it->second->release(ptr)) last_error = "my_free: unknown address (ignored)";
  });
}

/// Records `key` -> (allocation holding `ptr`, offset of `ptr`, value) in the layout (RW).
__attribute__((visibility("default"))) int inferwire_gms_metadata_put(int device, const char* key, const void* ptr,
                                                                      const char* value, size_t value_size) {
  return guarded([&] { pool(device).metadata_put(key, ptr, std::string(value, value_size)); });
}

/// Publishes the layout, then reconnects read-only and maps the same addresses back.
__attribute__((visibility("default"))) int inferwire_gms_commit(int device) {
  return guarded([&] { pool(device).commit(); });
}

/// Unmaps everything of `device` and closes its session.
__attribute__((visibility("default"))) int inferwire_gms_close(int device) {
  return guarded([&] { pools.erase(device); });
}

/// The last error of this thread ("" if none).
__attribute__((visibility("default"))) const char* inferwire_gms_last_error(void) { return last_error.c_str(); }

}  // extern "C"
