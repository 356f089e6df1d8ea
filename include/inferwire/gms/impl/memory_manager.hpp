// SPDX-License-Identifier: Apache-2.0
// inferwire/gms/impl/memory_manager.hpp — bodies of gms/memory_manager.hpp (a template:
// included by it).
#ifndef INFERWIRE_GMS_IMPL_MEMORY_MANAGER_HPP
#define INFERWIRE_GMS_IMPL_MEMORY_MANAGER_HPP

namespace inferwire::gms {

template <mapper Mapper>
auto memory_manager<Mapper>::connect(requested_lock_type lock,
    std::optional<std::int64_t> timeout_ms) -> void {
  if (connected()) throw error("Memory manager is already connected");
  session_.reset();  // one the server closed
  session_.emplace(path_, lock, timeout_ms);
  if (session_->granted() == granted_lock_type::rw) {
    saved_hash_.reset();
  } else if (session_->committed_at_connect() && !(saved_hash_ && va_preserved_)) {
    saved_hash_ = session_->get_memory_layout_hash();
  }
}

template <mapper Mapper>
auto memory_manager<Mapper>::allocate_handle(std::int64_t size, std::string tag) -> handle_ref {
  require_rw();
  const std::int64_t aligned = align(size);
  auto r = live().allocate(aligned, std::move(tag));
  if (r.aligned_size != aligned)
    throw error("GMS allocation alignment mismatch: requested " + std::to_string(aligned) +
                ", server aligned to " + std::to_string(r.aligned_size));
  return {r.allocation_id, r.layout_slot, r.aligned_size};
}

template <mapper Mapper>
auto memory_manager<Mapper>::reserve_va(std::int64_t size) -> std::uintptr_t {
  const auto bytes = static_cast<std::size_t>(align(size));
  const std::uintptr_t va = mapper_.reserve(bytes);
  reservations_[va] = {bytes, 0};
  return va;
}

template <mapper Mapper>
auto memory_manager<Mapper>::map_va(unique_fd fd, std::uintptr_t va, std::int64_t size,
    std::int64_t aligned_size, std::string allocation_id, std::string tag,
    std::int64_t layout_slot) -> void {
  allocation_info info{std::move(allocation_id), size, aligned_size, std::move(tag), layout_slot};
  const std::size_t bytes = checked_size(info);
  std::vector<placement> one;
  one.push_back({std::move(info), mapper_.import(std::move(fd), bytes), va, 0});
  one.front().reservation = reservation_of(va, bytes);
  map_placements(one);
}

template <mapper Mapper>
auto memory_manager<Mapper>::checked_size(const allocation_info& info) const -> std::size_t {
  const auto g = static_cast<std::int64_t>(mapper_.granularity());
  if (info.aligned_size <= 0 || info.aligned_size % g != 0 || info.size > info.aligned_size)
    throw error("GMS allocation " + info.allocation_id + " has an invalid aligned size " +
                std::to_string(info.aligned_size) + " (granularity " + std::to_string(g) + ")");
  return static_cast<std::size_t>(info.aligned_size);
}

template <mapper Mapper>
auto memory_manager<Mapper>::reservation_of(std::uintptr_t va, std::size_t size) -> std::uintptr_t {
  auto it = reservations_.upper_bound(va);
  if (it != reservations_.begin() && va < std::prev(it)->first + std::prev(it)->second.size)
    return std::prev(it)->first;
  reservations_[va] = {size, 0};  // reserved outside the manager
  return va;
}

template <mapper Mapper>
auto memory_manager<Mapper>::release_reservation(std::uintptr_t base) noexcept -> void {
  auto it = reservations_.find(base);
  if (it == reservations_.end()) return;
  if (it->second.mappings > 0) --it->second.mappings;
  if (it->second.mappings == 0) {
    mapper_.free_va(base, it->second.size);
    reservations_.erase(it);
  }
}

template <mapper Mapper>
auto memory_manager<Mapper>::map_placements(std::vector<placement>& ps) -> void {
  const bool writable = is_rw();
  std::size_t mapped = 0;
  try {
    if constexpr (range_access_mapper<Mapper>) {
      for (; mapped < ps.size(); ++mapped)
        mapper_.map_without_access(ps[mapped].va, static_cast<std::size_t>(ps[mapped].info.aligned_size),
                                   ps[mapped].handle);
      // One access call per run of adjacent mappings.
      for (std::size_t i = 0; i < ps.size();) {
        std::uintptr_t end = ps[i].va + static_cast<std::uintptr_t>(ps[i].info.aligned_size);
        std::size_t j = i + 1;
        for (; j < ps.size() && ps[j].va == end; ++j) end += static_cast<std::uintptr_t>(ps[j].info.aligned_size);
        mapper_.set_access(ps[i].va, end - ps[i].va, writable);
        i = j;
      }
    } else {
      for (; mapped < ps.size(); ++mapped)
        mapper_.map(ps[mapped].va, static_cast<std::size_t>(ps[mapped].info.aligned_size), ps[mapped].handle,
                    writable);
    }
  } catch (...) {
    for (std::size_t i = 0; i < ps.size(); ++i) {
      if (i < mapped)
        mapper_.unmap(ps[i].va, static_cast<std::size_t>(ps[i].info.aligned_size), ps[i].handle);
      else
        drop(ps[i].handle);
    }
    throw;
  }
  for (auto& p : ps) record(std::move(p));
}

template <mapper Mapper>
auto memory_manager<Mapper>::record(placement&& p) -> void {
  const std::uintptr_t va = p.va;
  auto existing = mappings_.find(va);
  if (existing == mappings_.end()) {
    ++reservations_.at(p.reservation).mappings;
  } else {
    by_id_.erase(existing->second.allocation_id);  // a preserved VA adopting a new allocation
  }
  local_mapping m{p.info.allocation_id, va, p.info.size, p.info.aligned_size, std::move(p.info.tag),
                  p.info.layout_slot, true, p.reservation};
  handles_.insert_or_assign(va, std::move(p.handle));
  by_id_[std::move(p.info.allocation_id)] = va;
  mappings_.insert_or_assign(va, std::move(m));
}

template <mapper Mapper>
auto memory_manager<Mapper>::unmap_va(std::uintptr_t va) -> void {
  auto& m = mapping_at(va);
  if (!m.mapped) return;
  mapper_.unmap(va, static_cast<std::size_t>(m.aligned_size), handles_.at(va));
  handles_.erase(va);
  m.mapped = false;
}

template <mapper Mapper>
auto memory_manager<Mapper>::free_va(std::uintptr_t va) -> void {
  auto& m = mapping_at(va);
  unmap_va(va);
  const std::uintptr_t block = m.reservation;
  by_id_.erase(m.allocation_id);
  mappings_.erase(va);
  release_reservation(block);
}

template <mapper Mapper>
auto memory_manager<Mapper>::create_mapping(std::optional<std::string> allocation_id,
    std::int64_t size, std::string tag) -> std::uintptr_t {
  live();
  if (unmapped_) throw error("Memory manager is unmapped");
  if (allocation_id) {
    if (auto va = mapped_va(*allocation_id)) return *va;
    // The export's reply describes the allocation: no separate GetAllocation round trip.
    return map_exported(live().export_allocation(*allocation_id));
  }
  if (size <= 0) throw std::invalid_argument("create_mapping: size must be > 0, got " + std::to_string(size));
  auto h = allocate_handle(size, tag);
  // The server was asked for the aligned size, so that is the allocation's size.
  exported_allocation e{{h.allocation_id, h.aligned_size, h.aligned_size, std::move(tag), h.layout_slot},
                        export_handle(h.allocation_id)};
  return map_exported(std::move(e));
}

template <mapper Mapper>
auto memory_manager<Mapper>::create_mappings(const std::vector<std::string>& allocation_ids)
    -> std::vector<std::uintptr_t> {
  live();
  if (unmapped_) throw error("Memory manager is unmapped");
  std::vector<std::uintptr_t> vas(allocation_ids.size(), 0);
  std::vector<std::string> wanted;
  std::unordered_set<std::string_view> seen;
  for (std::size_t i = 0; i < allocation_ids.size(); ++i)
    if (auto va = mapped_va(allocation_ids[i]))
      vas[i] = *va;
    else if (seen.insert(allocation_ids[i]).second)
      wanted.push_back(allocation_ids[i]);
  // Each descriptor is imported as its reply arrives, while the server sends the next.
  std::vector<placement> ps;
  ps.reserve(wanted.size());
  std::optional<server_error> refused;
  std::size_t total = 0;
  try {
    live().export_allocations(wanted, [&](exported_allocation&& e) {
      const std::size_t bytes = checked_size(e.info);
      if (bytes > std::numeric_limits<std::size_t>::max() / 2 - total)
        throw error("GMS allocations too large to map together");
      auto h = mapper_.import(std::move(e.fd), bytes);
      ps.push_back({std::move(e.info), std::move(h), 0, 0});
      total += bytes;
    });
  } catch (const server_error& e) {
    refused = e;  // the others were delivered
  } catch (...) {
    for (auto& p : ps) drop(p.handle);
    throw;
  }
  if (!ps.empty()) map_in_one_reservation(ps, total);
  for (std::size_t i = 0; i < allocation_ids.size(); ++i)
    if (!vas[i])
      if (auto va = mapped_va(allocation_ids[i])) vas[i] = *va;
  if (refused) throw *refused;
  return vas;
}

template <mapper Mapper>
auto memory_manager<Mapper>::mapped_va(const std::string& allocation_id) const -> std::optional<std::uintptr_t> {
  auto it = by_id_.find(allocation_id);
  if (it == by_id_.end()) return std::nullopt;
  if (!mappings_.at(it->second).mapped) throw error("Allocation " + allocation_id + " is imported but unmapped");
  return it->second;
}

template <mapper Mapper>
auto memory_manager<Mapper>::map_exported(exported_allocation e) -> std::uintptr_t {
  const std::size_t bytes = checked_size(e.info);
  std::vector<placement> one;
  one.push_back({std::move(e.info), mapper_.import(std::move(e.fd), bytes), 0, 0});
  return map_in_one_reservation(one, bytes);
}

template <mapper Mapper>
auto memory_manager<Mapper>::map_in_one_reservation(std::vector<placement>& ps, std::size_t total)
    -> std::uintptr_t {
  std::uintptr_t base = 0;
  try {
    base = mapper_.reserve(total);
  } catch (...) {
    for (auto& p : ps) drop(p.handle);
    throw;
  }
  reservations_[base] = {total, 0};
  std::uintptr_t at = base;
  for (auto& p : ps) {
    p.va = at;
    p.reservation = base;
    at += static_cast<std::uintptr_t>(p.info.aligned_size);
  }
  try {
    map_placements(ps);
  } catch (...) {
    release_reservation(base);
    throw;
  }
  return base;
}

template <mapper Mapper>
auto memory_manager<Mapper>::destroy_mapping(std::uintptr_t va) -> void {
  auto& m = mapping_at(va);
  if (is_rw()) live().free(m.allocation_id);
  free_va(va);
}

template <mapper Mapper>
auto memory_manager<Mapper>::commit() -> void {
  require_rw();
  unmap_all_vas();
  session_->commit();
  session_.reset();
}

template <mapper Mapper>
auto memory_manager<Mapper>::unmap_all_vas() -> void {
  mapper_.synchronize();
  for (auto& [va, m] : mappings_) unmap_va(va);
  unmapped_ = true;
  va_preserved_ = !mappings_.empty();
}

template <mapper Mapper>
auto memory_manager<Mapper>::remap_all_vas() -> void {
  session& s = live();
  const std::string current = s.get_memory_layout_hash();
  if (saved_hash_ && !saved_hash_->empty() && *saved_hash_ != current)
    throw stale_memory_layout("Layout changed: " + saved_hash_->substr(0, 16) + "... -> " +
                              current.substr(0, 16) + "...");
  auto allocations = s.list_allocations();
  std::map<std::int64_t, const get_allocation_response*> by_slot;
  for (const auto& a : allocations) by_slot[a.layout_slot] = &a;
  const std::vector<local_mapping*> order = unmapped_by_slot();
  // Check everything before mapping anything.
  for (auto* m : order) {
    auto it = by_slot.find(m->layout_slot);
    if (it == by_slot.end())
      throw stale_memory_layout("Layout slot " + std::to_string(m->layout_slot) +
                                " is missing from the committed layout");
    if (it->second->aligned_size != m->aligned_size)
      throw stale_memory_layout("Layout slot " + std::to_string(m->layout_slot) + " size changed: " +
                                std::to_string(m->aligned_size) + " -> " +
                                std::to_string(it->second->aligned_size));
    if (it->second->tag != m->tag)
      throw stale_memory_layout("Layout slot " + std::to_string(m->layout_slot) + " tag changed: " +
                                m->tag + " -> " + it->second->tag);
  }
  // The exports are pipelined; each descriptor is imported as it arrives, then all are mapped
  // (access set per run of adjacent VAs) or, on any failure, none.
  std::vector<std::string> ids;
  std::map<std::string, local_mapping*> target;
  for (auto* m : order) {
    ids.push_back(by_slot.at(m->layout_slot)->allocation_id);
    target[ids.back()] = m;
  }
  std::vector<placement> ps;
  ps.reserve(order.size());
  try {
    s.export_allocations(ids, [&](exported_allocation&& e) {
      auto it = target.find(e.info.allocation_id);
      if (it == target.end() || !it->second)
        throw error("GMS remap: unexpected export of allocation " + e.info.allocation_id);
      local_mapping* m = std::exchange(it->second, nullptr);
      if (e.info.aligned_size != m->aligned_size)
        throw stale_memory_layout("Layout slot " + std::to_string(m->layout_slot) + " size changed: " +
                                  std::to_string(m->aligned_size) + " -> " + std::to_string(e.info.aligned_size));
      const std::size_t bytes = checked_size(e.info);
      auto h = mapper_.import(std::move(e.fd), bytes);
      ps.push_back({std::move(e.info), std::move(h), m->va, m->reservation});
    });
  } catch (...) {
    for (auto& p : ps) drop(p.handle);
    throw;
  }
  std::sort(ps.begin(), ps.end(), [](const placement& a, const placement& b) { return a.va < b.va; });
  map_placements(ps);
  for (auto* m : order)
    if (!mapper_.validate(m->va))
      throw error("GMS remap: address " + std::to_string(m->va) + " is not mapped after remap");
  mapper_.synchronize();
  unmapped_ = false;
  va_preserved_ = false;
  if (!is_rw()) saved_hash_ = current;
}

template <mapper Mapper>
auto memory_manager<Mapper>::reallocate_all_handles() -> void {
  require_rw();
  if (!va_preserved_) throw error("reallocate_all_handles: no preserved mappings");
  for (auto* m : unmapped_by_slot()) {
    auto h = allocate_handle(m->aligned_size, m->tag);
    by_id_.erase(m->allocation_id);
    m->allocation_id = h.allocation_id;
    m->layout_slot = h.layout_slot;
    by_id_[m->allocation_id] = m->va;
  }
}

template <mapper Mapper>
auto memory_manager<Mapper>::close() noexcept -> void {
  try {
    mapper_.synchronize();
  } catch (...) {
  }
  for (auto& [va, m] : mappings_)
    if (m.mapped) mapper_.unmap(va, static_cast<std::size_t>(m.aligned_size), handles_.at(va));
  for (auto& [base, r] : reservations_) mapper_.free_va(base, r.size);
  reservations_.clear();
  handles_.clear();
  mappings_.clear();
  by_id_.clear();
  unmapped_ = false;
  va_preserved_ = false;
  abort();
}

template <mapper Mapper>
auto memory_manager<Mapper>::unmapped_by_slot() -> std::vector<local_mapping*> {
  std::vector<local_mapping*> order;
  for (auto& [va, m] : mappings_)
    if (!m.mapped) order.push_back(&m);
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->layout_slot < b->layout_slot; });
  return order;
}

template <mapper Mapper>
auto memory_manager<Mapper>::mapping_at(std::uintptr_t va) -> local_mapping& {
  auto it = mappings_.find(va);
  if (it == mappings_.end()) throw error("Unknown mapping at address " + std::to_string(va));
  return it->second;
}

}  // namespace inferwire::gms

#endif
