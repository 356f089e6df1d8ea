// SPDX-License-Identifier: Apache-2.0
// The shared-memory registry (v2-protocol §5): one namespace for system and CUDA regions,
// registration with Triton's checks and texts, status, unregister (deferred while requests
// use a region), and resolution of a tensor's region/offset/byte_size into memory.
#pragma once

#include "fault_guard.hpp"

#include <inferwire/core/error.hpp>
#include <inferwire/v2/types.hpp>

#include <atomic>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace inferwire::server {

enum class region_kind { system, cuda };

/// Where a tensor's bytes are: host memory (device -1) or memory of GPU `device`.
struct placement {
  std::byte* data = nullptr;
  std::size_t size = 0;
  int device = -1;
  /// Host regions a client may shrink under us: set when an access faulted (fault_guard.hpp).
  const fault_flag* fault = nullptr;
  bool on_device() const noexcept { return device >= 0; }
};

/// Device memory imported from a client's VMM chunks and mapped contiguously: the region
/// starts at `base` (`size` bytes) on GPU `device`. Destroying it unmaps and releases the
/// chunks (vmm_channel.hpp makes them).
struct vmm_mapping {
  virtual ~vmm_mapping() = default;
  std::byte* base = nullptr;
  std::uint64_t size = 0;
  int device = 0;
};

/// A registered region. Destroying it unmaps the memory (or closes the CUDA IPC handle).
struct shm_region;

/// Keeps the regions a request uses registered and mapped until the request ends.
using shm_lease = std::shared_ptr<void>;

class shm_registry {
 public:
  /// `allow_register`: --allow-client-shm (register and unregister fail without it).
  explicit shm_registry(bool allow_register);
  ~shm_registry();
  shm_registry(const shm_registry&) = delete;
  shm_registry& operator=(const shm_registry&) = delete;

  /// UNSUPPORTED with Triton's text unless client registration is allowed.
  status check_allowed() const;
  /// HTTP only: a registration URL needs a region name (upstream's HTTP text; gRPC has no such
  /// check).
  static status require_name(region_kind kind, std::string_view name);

  status register_system(const v2::system_shm_register_request& request);
  status register_cuda(const v2::cuda_shm_register_request& request);

  /// A client's VMM chunks, imported and mapped, awaiting register_cuda() with the handle
  /// returned in `handle`. `connection` is the channel connection they came on: when it
  /// closes, close_vmm_connection() drops what it deposited and unregisters what it registered.
  /// At most `max_pending` deposits of one connection wait at once.
  status deposit_vmm(std::uint64_t connection, std::unique_ptr<vmm_mapping> mapping,
                     std::size_t chunks, std::string& handle, std::size_t max_pending = 16);
  void close_vmm_connection(std::uint64_t connection);

  /// Every region of the kind (sorted by name), or the one named.
  status system_status(std::string_view name, std::vector<v2::system_shm_status>& out) const;
  status cuda_status(std::string_view name, std::vector<v2::cuda_shm_status>& out) const;

  /// Unregisters the region named (a no-op for unknown names and the other kind), or every
  /// region of the kind when `name` is empty. A region in use is removed when its last user
  /// finishes; until then it is still listed and usable.
  status unregister(region_kind kind, std::string_view name);

  /// The memory of `ref` (region, offset within it, byte size) with Triton's checks. The
  /// lease appended to `leases` keeps the region alive.
  status resolve(const v2::shm_ref& ref, placement& out, std::vector<shm_lease>& leases);

  /// Releases every region not in use (at shutdown).
  void clear();

  std::size_t size() const;

 private:
  struct entry {
    std::shared_ptr<shm_region> region;
    std::size_t users = 0;
    bool awaiting_unregister = false;
  };
  struct vmm_deposit {
    std::uint64_t connection = 0;
    std::unique_ptr<vmm_mapping> mapping;
  };
  void release(const std::string& name, const std::shared_ptr<shm_region>& region);
  /// Unregisters the regions `matches(name, region)` picks (under mu_): those in use are
  /// flagged and go with their last user, the others are moved to `removed`.
  template <class Pred>
  void remove_where(Pred matches, std::vector<std::shared_ptr<shm_region>>& removed);
  status register_vmm(const v2::cuda_shm_register_request& request);
  status status_of(std::string_view name, region_kind kind,
                   const std::function<std::size_t(const shm_region&)>& add) const;

  bool allow_register_;
  mutable std::mutex mu_;
  std::map<std::string, entry, std::less<>> regions_;
  std::map<std::string, vmm_deposit, std::less<>> vmm_deposits_;  // by token
  std::shared_ptr<std::atomic<shm_registry*>> self_;  // leases outliving the registry find it gone
};

}  // namespace inferwire::server
