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
auto memory_manager<Mapper>::map_va(unique_fd fd, std::uintptr_t va, std::int64_t size,
    std::int64_t aligned_size, std::string allocation_id, std::string tag,
    std::int64_t layout_slot) -> void {
  auto h = mapper_.import(std::move(fd), static_cast<std::size_t>(aligned_size));
  mapper_.map(va, static_cast<std::size_t>(aligned_size), h, is_rw());
  local_mapping m{allocation_id, va, size, aligned_size, std::move(tag), layout_slot, true};
  handles_.insert_or_assign(va, std::move(h));
  by_id_[allocation_id] = va;
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
  mapper_.free_va(va, static_cast<std::size_t>(m.aligned_size));
  by_id_.erase(m.allocation_id);
  mappings_.erase(va);
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
  for (std::size_t i = 0; i < allocation_ids.size(); ++i)
    if (auto va = mapped_va(allocation_ids[i]))
      vas[i] = *va;
    else if (std::find(wanted.begin(), wanted.end(), allocation_ids[i]) == wanted.end())
      wanted.push_back(allocation_ids[i]);
  std::optional<server_error> refused;
  std::vector<exported_allocation> exported;
  try {
    exported = live().export_allocations(wanted);
  } catch (const server_error& e) {
    // Every other reply was read; map what came, then report the refusal.
    refused = e;
    exported.clear();
    for (const auto& id : wanted) {
      if (mapped_va(id)) continue;
      try {
        exported.push_back(live().export_allocation(id));
      } catch (const server_error&) {
      }
    }
  }
  for (auto& e : exported) map_exported(std::move(e));
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
  const auto& info = e.info;
  const std::uintptr_t va = reserve_va(info.aligned_size);
  try {
    map_va(std::move(e.fd), va, info.size, info.aligned_size, info.allocation_id, info.tag, info.layout_slot);
  } catch (...) {
    mapper_.free_va(va, static_cast<std::size_t>(info.aligned_size));
    throw;
  }
  return va;
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
  for (auto* m : order) {
    const auto& a = *by_slot.at(m->layout_slot);
    unique_fd fd = s.export_allocation(a.allocation_id).fd;
    by_id_.erase(m->allocation_id);
    map_va(std::move(fd), m->va, a.size, a.aligned_size, a.allocation_id, a.tag, a.layout_slot);
    if (!mapper_.validate(m->va))
      throw error("GMS remap: address " + std::to_string(m->va) + " is not mapped after remap");
  }
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
  for (auto& [va, m] : mappings_) {
    if (m.mapped) mapper_.unmap(va, static_cast<std::size_t>(m.aligned_size), handles_.at(va));
    mapper_.free_va(va, static_cast<std::size_t>(m.aligned_size));
  }
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
