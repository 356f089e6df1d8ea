// SPDX-License-Identifier: Apache-2.0
// inferwire/gms/cuda_vmm_region.hpp
//
// GMS memory served to inferwire-server as a CUDA VMM region: a range that a memory_manager
// mapped here (weights a GMS server owns, say) registered under a name, so inference requests
// read their inputs from it and write their outputs into it in place.
//
//   gms::memory_manager<gms::cuda_vmm_mapper> m(gms_socket, gms::cuda_vmm_mapper(0));
//   m.connect(gms::requested_lock_type::ro);
//   std::uintptr_t va = m.create_mapping(allocation_id);
//   auto reg = gms::register_cuda_vmm(client, "weights", m, va, bytes);   // HTTP or gRPC client
//
// The driver does not export an allocation that was itself imported from a descriptor
// (cuMemExportToShareableHandle answers CUDA_ERROR_INVALID_VALUE), so shm::register_cuda_vmm(),
// which exports what backs a pointer, cannot take a GMS mapping. Here the descriptors come from
// the GMS server instead: one export request per allocation the range covers, each a new
// descriptor of the same physical memory, handed to inferwire-server and closed here.
#ifndef INFERWIRE_GMS_CUDA_VMM_REGION_HPP
#define INFERWIRE_GMS_CUDA_VMM_REGION_HPP

#include <inferwire/gms/memory_manager.hpp>
#include <inferwire/shm/cuda_vmm_region.hpp>
#include <inferwire/shm/vmm_channel.hpp>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace inferwire::gms {

/// The allocations behind `[va, va + size)`, mappings of `m` that lie one after the other, with
/// a descriptor of each from the GMS server: the layout and descriptors a CUDA VMM deposit
/// takes. Throws std::invalid_argument when a byte of the range is not mapped by `m`, and the
/// GMS errors of an export.
template <mapper Mapper>
shm::cuda_vmm_export export_for_cuda_vmm(memory_manager<Mapper>& m, std::uintptr_t va, std::size_t size) {
  if (size == 0) throw std::invalid_argument("a CUDA VMM region must have at least one byte");
  if (size > UINTPTR_MAX - va) throw std::invalid_argument("the GMS range wraps around");
  shm::cuda_vmm_export out;
  if constexpr (requires { m.mapper().device(); }) out.layout.device = m.mapper().device();
  out.layout.byte_size = size;
  const std::uintptr_t end = va + size;
  for (std::uintptr_t at = va; at < end;) {
    const local_mapping* mapping = m.find(at);
    if (mapping == nullptr || !mapping->mapped)
      throw std::invalid_argument("byte " + std::to_string(at - va) + " of the range is not memory this GMS client mapped");
    if (out.layout.chunk_sizes.empty()) out.layout.offset = at - mapping->va;
    if (out.layout.chunk_sizes.size() == shm::vmm_max_chunks)
      throw std::invalid_argument("the range spans more than " + std::to_string(shm::vmm_max_chunks) + " allocations");
    out.fds.push_back(m.export_handle(mapping->allocation_id));
    out.layout.chunk_sizes.push_back(static_cast<std::uint64_t>(mapping->aligned_size));
    at = mapping->va + static_cast<std::uintptr_t>(mapping->aligned_size);
  }
  return out;
}

/// Registers `[va, va + size)` of `m`'s mappings on the server behind `client` as the CUDA
/// region `name`, through the server's CUDA VMM socket; the returned object owns the channel,
/// and the server unregisters the region when it closes (shm::register_vmm_region()).
template <class Client, mapper Mapper>
shm::vmm_registration register_cuda_vmm(Client& client, std::string name, memory_manager<Mapper>& m, std::uintptr_t va,
                                        std::size_t size,
                                        std::string_view socket_path = shm::default_cuda_vmm_socket) {
  const shm::cuda_vmm_export chunks = export_for_cuda_vmm(m, va, size);
  return shm::register_vmm_region(client, std::move(name), chunks.layout, chunks.raw_fds(), socket_path);
}

}  // namespace inferwire::gms

#endif
