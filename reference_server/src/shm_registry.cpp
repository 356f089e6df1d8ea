// SPDX-License-Identifier: Apache-2.0
#include "shm_registry.hpp"

#include <inferwire/shm/vmm_channel.hpp>

#include <boost/uuid/random_generator.hpp>
#include <boost/uuid/uuid.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <limits>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if INFERWIRE_SERVER_CUDA
#include <inferwire/shm/cuda_region.hpp>
#endif

namespace inferwire::server {

struct shm_region {
  std::string name;
  region_kind kind = region_kind::system;
  std::string key;
  std::uint64_t offset = 0;
  std::uint64_t byte_size = 0;
  std::uint64_t device_id = 0;
  std::byte* base = nullptr;  // the host mapping, or the device pointer
  int fd = -1;                // system regions: the object, to check its size at each use
  fault_flag fault;           // system regions: set when an access faulted
  std::unique_ptr<fault_watch> watch;
#if INFERWIRE_SERVER_CUDA
  shm::cuda_ipc_mapping ipc;
#endif
  std::unique_ptr<vmm_mapping> vmm;  // CUDA regions registered with a VMM handle
  std::uint64_t vmm_connection = 0;  // the channel connection that deposited it

  shm_region() = default;
  shm_region(const shm_region&) = delete;
  shm_region& operator=(const shm_region&) = delete;
  ~shm_region() {
    watch.reset();
    if (kind == region_kind::system && base) ::munmap(base, byte_size);
    if (fd >= 0) ::close(fd);
  }

  // A system region is usable while its object still covers it and no access faulted. The
  // size check makes the common case (a client that shrank its object before the request) an
  // error reply without any fault; the guard covers a shrink during the request.
  status usable() const {
    if (kind != region_kind::system) return {};
    if (auto st = fault.check()) return st;
    struct stat st {};
    if (::fstat(fd, &st) != 0 || static_cast<std::uint64_t>(st.st_size) < offset + byte_size)
      return {errc::invalid_arg, "shared memory region '" + name +
                                     "' is smaller than when it was registered; unregister it "
                                     "and register it again"};
    return {};
  }
};

namespace {

constexpr std::string_view reserved_prefix = "triton_python_backend_shm_region_";

}  // namespace

shm_registry::shm_registry(bool allow_register)
    : allow_register_(allow_register), self_(std::make_shared<std::atomic<shm_registry*>>(this)) {}

shm_registry::~shm_registry() {
  self_->store(nullptr);
  std::lock_guard lock(mu_);
  regions_.clear();
  vmm_deposits_.clear();
}

status shm_registry::check_allowed() const {
  if (allow_register_) return {};
  return {errc::unsupported,
          "Client shared memory is disabled. Start the server with '--allow-client-shm=true' to "
          "enable."};
}

status shm_registry::require_name(region_kind kind, std::string_view name) {
  if (!name.empty()) return {};
  return {errc::invalid_arg, std::string("'region name' is necessary to register ") +
                                 (kind == region_kind::system ? "system" : "cuda") + " shared memory region"};
}

namespace {
// A name that is not UTF-8 (only an HTTP URL can carry one) could not be listed in JSON or
// protobuf status replies.
status check_region_name(const std::string& r) {
  if (valid_utf8(r)) return {};
  return {errc::invalid_arg, "cannot register shared memory region '" + quote_input(r) +
                                 "' - the region name must be UTF-8"};
}
}  // namespace

status shm_registry::register_system(const v2::system_shm_register_request& q) {
  if (auto st = check_allowed()) return st;
  const std::string& r = q.name;
  // A region without a name could never be named again (status, unregister): refused on every
  // transport, as HTTP's route refuses it.
  if (auto st = require_name(region_kind::system, r)) return st;
  if (auto st = check_region_name(r)) return st;
  if (q.key.find_first_not_of('/') == std::string::npos)
    return {errc::invalid_arg,
            "cannot register shared memory region '" + r + "' - invalid shm key '" + q.key + "'"};
  if (std::string_view(q.key).substr(q.key.find_first_not_of('/')).starts_with(reserved_prefix))
    return {errc::invalid_arg, "cannot register shared memory region '" + r + "' with key '" +
                                   q.key + "' as the key contains the reserved prefix '" +
                                   std::string(reserved_prefix) + "'"};
  std::lock_guard lock(mu_);
  if (regions_.count(r))
    return {errc::already_exists, "shared memory region '" + r + "' already in manager"};
  int fd = ::shm_open(q.key.c_str(), O_RDWR, 0);
  if (fd < 0) return {errc::internal, "Unable to open shared memory region: '" + q.key + "'"};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return {errc::internal, "Invalid shared memory region: '" + q.key + "'"};
  }
  const auto object_size = static_cast<std::uint64_t>(st.st_size);
  if (q.offset > object_size || q.byte_size > object_size - q.offset) {
    ::close(fd);
    return {errc::invalid_arg, "failed to register shared memory region '" + r + "': invalid args"};
  }
  void* p = MAP_FAILED;
  int err = EINVAL;
  if (q.offset <= static_cast<std::uint64_t>(std::numeric_limits<off_t>::max())) {
    p = ::mmap(nullptr, q.byte_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
               static_cast<off_t>(q.offset));
    err = errno;
  }
  if (p == MAP_FAILED) {
    ::close(fd);
    return {errc::invalid_arg, "failed to register shared memory region '" + r +
                                   "': unable to process address space" + std::strerror(err)};
  }
  auto region = std::make_shared<shm_region>();
  region->name = r;
  region->kind = region_kind::system;
  region->key = q.key;
  region->offset = q.offset;
  region->byte_size = q.byte_size;
  region->base = static_cast<std::byte*>(p);
  region->fd = fd;
  region->fault.region = r;
  region->watch = std::make_unique<fault_watch>(p, q.byte_size, region->fault);
  if (!region->watch->active())
    return {errc::unavailable, "failed to register shared memory region '" + r + "': at most " +
                                   std::to_string(fault_watch::capacity) +
                                   " system shared memory regions can be registered"};
  regions_.emplace(r, entry{std::move(region)});
  return {};
}

status shm_registry::register_cuda(const v2::cuda_shm_register_request& q) {
  if (auto st = check_allowed()) return st;
  const std::string& r = q.name;
  if (auto st = require_name(region_kind::cuda, r)) return st;
  if (auto st = check_region_name(r)) return st;
  if (shm::is_vmm_handle(q.raw_handle)) return register_vmm(q);
#if INFERWIRE_SERVER_CUDA
  if (cuda::available()) {
    std::lock_guard lock(mu_);
    if (regions_.count(r))
      return {errc::already_exists, "shared memory region '" + r + "' already in manager"};
    auto region = std::make_shared<shm_region>();
    try {
      if (q.device_id > static_cast<std::uint64_t>(std::numeric_limits<int>::max()))
        throw std::invalid_argument("device id");
      region->ipc = shm::cuda_ipc_mapping::open(std::as_bytes(std::span(q.raw_handle)),
                                                static_cast<int>(q.device_id));
    } catch (const std::exception&) {
      return {errc::invalid_arg, "failed to register shared memory region: invalid args"};
    }
    if (region->ipc.allocation_size() != 0 && q.byte_size > region->ipc.allocation_size())
      return {errc::invalid_arg, "failed to register shared memory region '" + r + "': invalid args"};
    region->name = r;
    region->kind = region_kind::cuda;
    region->byte_size = q.byte_size;
    region->device_id = q.device_id;
    region->base = static_cast<std::byte*>(region->ipc.data());
    regions_.emplace(r, entry{std::move(region)});
    return {};
  }
#endif
  return {errc::invalid_arg,
          "failed to register CUDA shared memory region: '" + r + "', GPUs not supported"};
}

status shm_registry::deposit_vmm(std::uint64_t connection, std::unique_ptr<vmm_mapping> mapping,
                                 std::size_t chunks, std::string& handle, std::size_t max_pending) {
  std::lock_guard lock(mu_);
  std::size_t waiting = 0;
  for (const auto& [token, d] : vmm_deposits_) waiting += d.connection == connection;
  if (waiting >= max_pending)
    return {errc::unavailable, std::to_string(waiting) +
                                   " deposits of this connection await registration (at most " +
                                   std::to_string(max_pending) + "); register or close them first"};
  // The token is what lets a register call claim the deposit: 122 random bits, from the
  // operating system's generator.
  static thread_local boost::uuids::random_generator generate;
  const boost::uuids::uuid id = generate();
  shm::vmm_handle h;
  std::copy(id.begin(), id.end(), h.token.begin());
  h.byte_size = mapping->size;
  h.device = mapping->device;
  h.chunks = static_cast<std::uint32_t>(chunks);
  handle = h.encode();
  vmm_deposits_.emplace(std::string(reinterpret_cast<const char*>(h.token.data()), h.token.size()),
                        vmm_deposit{connection, std::move(mapping)});
  return {};
}

// A CUDA registration whose handle is one of ours: it claims the deposit the handle names.
status shm_registry::register_vmm(const v2::cuda_shm_register_request& q) {
  const std::string& r = q.name;
  const auto h = shm::vmm_handle::decode(q.raw_handle);
  if (!h) return {errc::invalid_arg, "failed to register shared memory region '" + r + "': invalid CUDA VMM handle"};
  std::lock_guard lock(mu_);
  if (regions_.count(r))
    return {errc::already_exists, "shared memory region '" + r + "' already in manager"};
  auto it = vmm_deposits_.find(std::string_view(reinterpret_cast<const char*>(h->token.data()), h->token.size()));
  if (it == vmm_deposits_.end())
    return {errc::invalid_arg, "failed to register shared memory region '" + r +
                                   "': unknown CUDA VMM handle (it was registered already, its "
                                   "channel closed, or its chunks were never deposited on this "
                                   "server's CUDA VMM socket)"};
  const vmm_mapping& m = *it->second.mapping;
  if (q.device_id != static_cast<std::uint64_t>(m.device))
    return {errc::invalid_arg, "failed to register shared memory region '" + r +
                                   "': the CUDA VMM handle's memory is on device " +
                                   std::to_string(m.device) + ", not " + std::to_string(q.device_id)};
  if (q.byte_size == 0 || q.byte_size > m.size)
    return {errc::invalid_arg, "failed to register shared memory region '" + r + "': byte_size " +
                                   std::to_string(q.byte_size) + " does not fit the deposited region (" +
                                   std::to_string(m.size) + " bytes)"};
  auto region = std::make_shared<shm_region>();
  region->name = r;
  region->kind = region_kind::cuda;
  region->byte_size = q.byte_size;
  region->device_id = q.device_id;
  region->base = m.base;
  region->vmm = std::move(it->second.mapping);
  region->vmm_connection = it->second.connection;
  vmm_deposits_.erase(it);
  regions_.emplace(r, entry{std::move(region)});
  return {};
}

void shm_registry::close_vmm_connection(std::uint64_t connection) {
  std::vector<std::unique_ptr<vmm_mapping>> dropped;  // released after the lock
  std::vector<std::shared_ptr<shm_region>> removed;
  std::lock_guard lock(mu_);
  for (auto it = vmm_deposits_.begin(); it != vmm_deposits_.end();) {
    if (it->second.connection != connection) {
      ++it;
      continue;
    }
    dropped.push_back(std::move(it->second.mapping));
    it = vmm_deposits_.erase(it);
  }
  remove_where([connection](const std::string&, const shm_region& g) { return g.vmm && g.vmm_connection == connection; },
               removed);
}

// The status of the regions of `kind`: every one, or the one named `name` (which must be of
// that kind). `add` appends one region's entry and returns the count so far.
status shm_registry::status_of(std::string_view name, region_kind kind,
                               const std::function<std::size_t(const shm_region&)>& add) const {
  const char* mine = kind == region_kind::system ? "system" : "CUDA";
  const char* other = kind == region_kind::system ? "CUDA" : "system";
  std::lock_guard lock(mu_);
  std::size_t found = 0;
  for (const auto& [n, e] : regions_) {
    if (!name.empty() && n != name) continue;
    if (e.region->kind != kind) {
      if (!name.empty())
        return {errc::not_found, "The region named '" + n + "' is registered as " + other +
                                     " shared memory, not " + mine + " shared memory"};
      continue;
    }
    found = add(*e.region);
  }
  if (!name.empty() && found == 0)
    return {errc::not_found, std::string("Unable to find ") + (kind == region_kind::system ? "system" : "cuda") +
                                 " shared memory region: '" + quote_input(name) + "'"};
  return {};
}

status shm_registry::system_status(std::string_view name,
                                   std::vector<v2::system_shm_status>& out) const {
  out.clear();
  return status_of(name, region_kind::system, [&out](const shm_region& g) {
    out.push_back({g.name, g.key, g.offset, g.byte_size});
    return out.size();
  });
}

status shm_registry::cuda_status(std::string_view name, std::vector<v2::cuda_shm_status>& out) const {
  out.clear();
  return status_of(name, region_kind::cuda, [&out](const shm_region& g) {
    out.push_back({g.name, g.device_id, g.byte_size});
    return out.size();
  });
}

status shm_registry::unregister(region_kind kind, std::string_view name) {
  if (auto st = check_allowed()) return st;
  std::vector<std::shared_ptr<shm_region>> removed;  // unmapped after the lock
  std::lock_guard lock(mu_);
  remove_where([&](const std::string& n, const shm_region& g) { return (name.empty() || n == name) && g.kind == kind; },
               removed);
  return {};
}

template <class Pred>
void shm_registry::remove_where(Pred matches, std::vector<std::shared_ptr<shm_region>>& removed) {
  for (auto it = regions_.begin(); it != regions_.end();) {
    auto& e = it->second;
    if (!matches(it->first, *e.region)) {
      ++it;
    } else if (e.users > 0) {
      e.awaiting_unregister = true;  // removed by the last request using it
      ++it;
    } else {
      removed.push_back(std::move(e.region));
      it = regions_.erase(it);
    }
  }
}

status shm_registry::resolve(const v2::shm_ref& ref, placement& out, std::vector<shm_lease>& leases) {
  std::lock_guard lock(mu_);
  auto it = regions_.find(ref.region);
  if (it == regions_.end())
    return {errc::not_found, "Unable to find shared memory region: '" + ref.region + "'"};
  auto& e = it->second;
  const shm_region& g = *e.region;
  if (ref.offset >= g.byte_size)
    return {errc::invalid_arg, "Invalid offset for shared memory region: '" + ref.region + "'"};
  if (ref.byte_size > std::numeric_limits<std::uint64_t>::max() - ref.offset)
    return {errc::invalid_arg, "Integer overflow detected: byte_size (" +
                                   std::to_string(ref.byte_size) + ") + offset (" +
                                   std::to_string(ref.offset) + ") exceeds maximum value (" +
                                   std::to_string(std::numeric_limits<std::uint64_t>::max()) +
                                   ") for region '" + ref.region + "'"};
  if (ref.offset + ref.byte_size > g.byte_size)
    return {errc::invalid_arg,
            "Invalid offset + byte size for shared memory region: '" + ref.region + "'"};
  if (auto st = g.usable()) return st;
  out.data = g.base + ref.offset;
  out.size = static_cast<std::size_t>(ref.byte_size);
  out.device = g.kind == region_kind::cuda ? static_cast<int>(g.device_id) : -1;
  out.fault = g.kind == region_kind::system ? &g.fault : nullptr;
  ++e.users;
  // The lease's deleter gives the use back; it finds the registry through self_ (null once the
  // registry is gone) and keeps the region itself alive in any case.
  leases.emplace_back(nullptr, [self = self_, name = it->first, region = e.region](void*) {
    if (shm_registry* reg = self->load()) reg->release(name, region);
  });
  return {};
}

void shm_registry::release(const std::string& name, const std::shared_ptr<shm_region>& region) {
  std::lock_guard lock(mu_);
  auto it = regions_.find(name);
  if (it == regions_.end() || it->second.region != region) return;
  if (it->second.users > 0) --it->second.users;
  if (it->second.users == 0 && it->second.awaiting_unregister) regions_.erase(it);
}

void shm_registry::clear() {
  std::lock_guard lock(mu_);
  regions_.clear();
  vmm_deposits_.clear();
}

std::size_t shm_registry::size() const {
  std::lock_guard lock(mu_);
  return regions_.size();
}

}  // namespace inferwire::server
