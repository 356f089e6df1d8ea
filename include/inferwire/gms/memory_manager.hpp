// SPDX-License-Identifier: Apache-2.0
// inferwire/gms/memory_manager.hpp
//
// gms::memory_manager<Mapper>: the client side of GMS (gms-protocol §7.2). It holds one session
// with the server and the mappings of this process: virtual address ranges reserved once and
// kept across unmap/remap, so pointers into weights stay valid while a worker sleeps, and a new
// layout of the same structure is mapped back at the same addresses.
//
//   gms::memory_manager<gms::cuda_vmm_mapper> m(path, gms::cuda_vmm_mapper(device));
//   m.connect(gms::requested_lock_type::rw);
//   std::uintptr_t va = m.create_mapping({}, bytes, "weights");   // allocate, export, map RW
//   ...fill, metadata_put...
//   m.commit();                                // unmaps (VAs kept), publishes, session ends
//   m.connect(gms::requested_lock_type::ro);
//   m.remap_all_vas();                         // same VAs, read-only
//
// The Mapper does the memory side (cuda_vmm_mapper on a GPU, mmap_mapper on the CPU): any type
// that models gms::mapper (gms/backend.hpp). Every call users make comes as a throwing form
// and an error_code form (`std::error_code&` after the call's arguments; see gms/error.hpp).
// Not thread-safe: one thread uses a manager at a time.
#ifndef INFERWIRE_GMS_MEMORY_MANAGER_HPP
#define INFERWIRE_GMS_MEMORY_MANAGER_HPP

#include <inferwire/gms/backend.hpp>
#include <inferwire/gms/session.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_set>
#include <utility>
#include <vector>

namespace inferwire::gms {

/// remap_all_vas() found a committed layout that does not match the preserved mappings.
class stale_memory_layout : public error {
 public:
  explicit stale_memory_layout(const std::string& what) : error(what, errc::stale_layout) {}
};

/// One mapping of this process (`mapped` false: unmapped, the VA is still reserved).
struct local_mapping {
  std::string allocation_id;
  std::uintptr_t va = 0;
  std::int64_t size = 0;
  std::int64_t aligned_size = 0;
  std::string tag;
  std::int64_t layout_slot = 0;
  bool mapped = false;
  /// Start of the VA reservation the mapping lies in (create_mappings reserves once for all the
  /// allocations it maps; the reservation goes back when its last mapping is freed).
  std::uintptr_t reservation = 0;
};

template <mapper Mapper>
class memory_manager {
 public:
  explicit memory_manager(std::string socket_path, Mapper mapper = Mapper())
      : path_(std::move(socket_path)), mapper_(std::move(mapper)) {}
  memory_manager(const memory_manager&) = delete;
  memory_manager& operator=(const memory_manager&) = delete;
  ~memory_manager() { close(); }

  // --- connection ---------------------------------------------------------------------------

  /// Connects and takes the lock. RW forgets any saved layout hash; RO on a committed server
  /// saves the current hash (unless one is kept for preserved mappings) for remap_all_vas().
  void connect(requested_lock_type lock, std::optional<std::int64_t> timeout_ms = {});

  /// Closes the session (the lock is released; an uncommitted writer's layout is dropped by
  /// the server). Mappings and reserved VAs stay.
  void abort() noexcept {
    if (session_) session_->close();
    session_.reset();
  }

  bool connected() const noexcept { return session_ && session_->connected(); }
  bool is_rw() const noexcept { return connected() && session_->granted() == granted_lock_type::rw; }
  std::optional<granted_lock_type> granted() const noexcept {
    if (!connected()) return std::nullopt;
    return session_->granted();
  }
  /// Whether the mappings are unmapped (after commit or unmap_all_vas, before remap_all_vas).
  bool unmapped() const noexcept { return unmapped_; }
  const std::string& socket_path() const noexcept { return path_; }
  Mapper& mapper() noexcept { return mapper_; }
  std::size_t granularity() const noexcept { return mapper_.granularity(); }
  /// The session, for requests the manager does not wrap.
  session& connection() { return live(); }

  // --- tier 1: handles -------------------------------------------------------------------------

  struct handle_ref {
    std::string allocation_id;
    std::int64_t layout_slot = 0;
    std::int64_t aligned_size = 0;
  };

  /// Allocates on the server (RW only): the size is rounded up to the granularity first.
  handle_ref allocate_handle(std::int64_t size, std::string tag = "default");
  unique_fd export_handle(const std::string& id) { return live().export_allocation(id).fd; }
  allocation_info get_handle_info(const std::string& id) { return live().get_allocation(id); }
  void free_handle(const std::string& id) {
    require_rw();
    if (!live().free(id)) throw error("GMS free failed: unknown allocation " + id);
  }
  std::vector<get_allocation_response> list_handles(std::optional<std::string> tag = {}) {
    return live().list_allocations(std::move(tag));
  }
  std::string get_memory_layout_hash() { return live().get_memory_layout_hash(); }

  void metadata_put(std::string key, std::string id, std::int64_t offset, std::string value) {
    require_rw();
    live().metadata_put(std::move(key), std::move(id), offset, std::move(value));
  }
  metadata_get_response metadata_get(std::string key) { return live().metadata_get(std::move(key)); }
  std::vector<std::string> metadata_list(std::string prefix = {}) {
    return live().metadata_list(std::move(prefix));
  }
  bool metadata_delete(std::string key) {
    require_rw();
    return live().metadata_delete(std::move(key));
  }

  // --- tier 1: address space -----------------------------------------------------------------

  /// Reserves address space for map_va (it goes back with the last mapping in it, or at close).
  std::uintptr_t reserve_va(std::int64_t size);

  /// Imports `fd` (consumed) and maps it at `va` with the access of the granted lock.
  void map_va(unique_fd fd, std::uintptr_t va, std::int64_t size, std::int64_t aligned_size,
      std::string allocation_id, std::string tag, std::int64_t layout_slot);
  /// Unmaps `va` (the reservation stays).
  void unmap_va(std::uintptr_t va);
  /// Unmaps `va` if needed and gives its reservation back.
  void free_va(std::uintptr_t va);

  // --- tier 2 ----------------------------------------------------------------------------------

  /// Without an id: allocates `size` bytes with `tag` (RW), exports, reserves and maps
  /// read-write; returns the VA. With an id: the VA of that allocation, imported and mapped
  /// (read-only in an RO session) unless already mapped here.
  std::uintptr_t create_mapping(std::optional<std::string> allocation_id = {}, std::int64_t size = 0, std::string tag = "default");

  /// Imports and maps many allocations at once (a reader loading a layout): their export
  /// requests are pipelined (session::export_allocations), each descriptor is imported as it
  /// arrives, then one VA reservation takes them all, side by side in reply order, and access is
  /// set once for the whole range where the mapper can (range_access_mapper). Returns the VAs
  /// in the order of `allocation_ids`; already mapped ones keep theirs. If the server refuses
  /// one, the others are mapped and the refusal is thrown afterwards; if importing or mapping
  /// fails, none of the batch is mapped.
  std::vector<std::uintptr_t> create_mappings(const std::vector<std::string>& allocation_ids);

  /// Frees the allocation on the server when this is an RW session, then unmaps and releases
  /// the VA.
  void destroy_mapping(std::uintptr_t va);

  /// Commits (RW only): waits for queued device work, unmaps every mapping (VAs kept), then
  /// publishes the layout. The session ends; connect(ro) + remap_all_vas() maps it back.
  void commit();

  /// Unmaps every mapping and keeps the reservations (sleep).
  void unmap_all_vas();

  /// Maps every preserved VA back to the allocation in the same layout slot of the committed
  /// (or, for a writer, current) layout, with the exports pipelined as in create_mappings.
  /// Throws stale_memory_layout when the layout hash changed since it was saved, or a slot is
  /// missing or differs in size or tag; then nothing is mapped.
  void remap_all_vas();

  /// Allocates a new allocation for every unmapped mapping, in slot order, with that mapping's
  /// size and tag (RW only; follow with remap_all_vas). Used for KV caches on wake.
  void reallocate_all_handles();

  // --- The error_code forms of the calls above: a failure the throwing form would throw
  // (gms::error, or std::system_error from the mapper) sets `ec` instead; see gms/error.hpp.
  // Invalid arguments still throw std::invalid_argument.

  void connect(requested_lock_type lock, std::error_code& ec, std::optional<std::int64_t> timeout_ms = {}) {
    detail::capture(ec, [&] { connect(lock, timeout_ms); });
  }
  handle_ref allocate_handle(std::int64_t size, std::string tag, std::error_code& ec) {
    return detail::capture(ec, [&] { return allocate_handle(size, std::move(tag)); });
  }
  void free_handle(const std::string& id, std::error_code& ec) {
    detail::capture(ec, [&] { free_handle(id); });
  }
  void metadata_put(std::string key, std::string id, std::int64_t offset, std::string value, std::error_code& ec) {
    detail::capture(ec, [&] { metadata_put(std::move(key), std::move(id), offset, std::move(value)); });
  }
  metadata_get_response metadata_get(std::string key, std::error_code& ec) {
    return detail::capture(ec, [&] { return metadata_get(std::move(key)); });
  }
  std::vector<std::string> metadata_list(std::string prefix, std::error_code& ec) {
    return detail::capture(ec, [&] { return metadata_list(std::move(prefix)); });
  }
  bool metadata_delete(std::string key, std::error_code& ec) {
    return detail::capture(ec, [&] { return metadata_delete(std::move(key)); });
  }
  std::vector<std::uintptr_t> create_mappings(const std::vector<std::string>& allocation_ids, std::error_code& ec) {
    return detail::capture(ec, [&] { return create_mappings(allocation_ids); });
  }
  std::uintptr_t create_mapping(std::optional<std::string> allocation_id, std::int64_t size, std::string tag,
                                std::error_code& ec) {
    return detail::capture(ec, [&] { return create_mapping(std::move(allocation_id), size, std::move(tag)); });
  }
  void destroy_mapping(std::uintptr_t va, std::error_code& ec) {
    detail::capture(ec, [&] { destroy_mapping(va); });
  }
  void commit(std::error_code& ec) {
    detail::capture(ec, [&] { commit(); });
  }
  void unmap_all_vas(std::error_code& ec) {
    detail::capture(ec, [&] { unmap_all_vas(); });
  }
  void remap_all_vas(std::error_code& ec) {
    detail::capture(ec, [&] { remap_all_vas(); });
  }
  void reallocate_all_handles(std::error_code& ec) {
    detail::capture(ec, [&] { reallocate_all_handles(); });
  }

  /// Waits for device work, unmaps and frees every VA, closes the session. Never throws.
  void close() noexcept;

  // --- introspection -----------------------------------------------------------------------

  const std::map<std::uintptr_t, local_mapping>& mappings() const noexcept { return mappings_; }
  /// The VA of an allocation mapped (or preserved) here.
  std::optional<std::uintptr_t> va_of(const std::string& allocation_id) const {
    auto it = by_id_.find(allocation_id);
    if (it == by_id_.end()) return std::nullopt;
    return it->second;
  }
  /// The mapping containing `address`, if any.
  const local_mapping* find(std::uintptr_t address) const noexcept {
    auto it = mappings_.upper_bound(address);
    if (it == mappings_.begin()) return nullptr;
    --it;
    const auto& m = it->second;
    return address < m.va + static_cast<std::uintptr_t>(m.aligned_size) ? &m : nullptr;
  }
  const std::optional<std::string>& saved_layout_hash() const noexcept { return saved_hash_; }

 private:
  /// The VA of an allocation already imported here (throws if it is imported but unmapped).
  std::optional<std::uintptr_t> mapped_va(const std::string& allocation_id) const;
  /// Reserves a VA for an exported allocation and maps it.
  std::uintptr_t map_exported(exported_allocation e);

  /// An imported allocation and where it goes.
  struct placement {
    allocation_info info;
    typename Mapper::handle handle;
    std::uintptr_t va = 0;
    std::uintptr_t reservation = 0;
  };
  /// The aligned size of an exported allocation, checked against the granularity.
  std::size_t checked_size(const allocation_info& info) const;
  /// Maps every placement (sorted by VA) with the access of the granted lock and records it;
  /// all or nothing: on failure every handle is unmapped or released and nothing is recorded.
  void map_placements(std::vector<placement>& placements);
  /// Reserves `total` bytes for the imported `placements`, puts them side by side in order and
  /// maps them (all or nothing; on failure the handles are released and the range given back).
  /// Returns the start of the range.
  std::uintptr_t map_in_one_reservation(std::vector<placement>& placements, std::size_t total);
  void record(placement&& p);
  /// Releases a handle that was imported but not mapped.
  void drop(typename Mapper::handle& h) noexcept {
    if constexpr (requires { mapper_.release(h); }) mapper_.release(h);
  }
  /// One mapping fewer in the reservation at `base`; the last gives it back.
  void release_reservation(std::uintptr_t base) noexcept;
  /// The reservation containing `va`, or a new record of one `size` bytes long at `va`.
  std::uintptr_t reservation_of(std::uintptr_t va, std::size_t size);
  session& live() {
    if (!session_ || !session_->connected()) {
      session_.reset();
      throw error("Memory manager is not connected");
    }
    return *session_;
  }
  void require_rw() {
    if (live().granted() != granted_lock_type::rw) throw error("Operation requires RW mode");
  }
  std::int64_t align(std::int64_t size) const {
    const auto g = static_cast<std::int64_t>(mapper_.granularity());
    if (size <= 0) return g;
    return (size + g - 1) / g * g;
  }
  /// The unmapped (preserved) mappings in layout-slot order.
  std::vector<local_mapping*> unmapped_by_slot();
  local_mapping& mapping_at(std::uintptr_t va);

  std::string path_;
  Mapper mapper_;
  std::optional<session> session_;
  std::map<std::uintptr_t, local_mapping> mappings_;
  std::map<std::uintptr_t, typename Mapper::handle> handles_;
  std::map<std::string, std::uintptr_t> by_id_;
  struct reservation {
    std::size_t size = 0;
    std::size_t mappings = 0;  ///< local_mappings (mapped or preserved) inside it
  };
  std::map<std::uintptr_t, reservation> reservations_;
  std::optional<std::string> saved_hash_;
  bool unmapped_ = false;
  bool va_preserved_ = false;
};

}  // namespace inferwire::gms

#include <inferwire/gms/impl/memory_manager.hpp>

#endif
