// SPDX-License-Identifier: Apache-2.0
// inferwire/gms/backend.hpp — the two contracts GMS is built on, as C++20 concepts:
//
// - a Backend owns memory for the server (gms::server<Backend>): memfd_backend (plain memory,
//   no GPU needed) and cuda_vmm_backend (cuMemCreate) model it;
// - a Mapper places imported memory in a client's address space (gms::memory_manager<Mapper>):
//   mmap_mapper (plain memory) and cuda_vmm_mapper (cuMemMap) model it.
//
// Plus the two small types both sides share: alloc_status and unique_fd.
#ifndef INFERWIRE_GMS_BACKEND_HPP
#define INFERWIRE_GMS_BACKEND_HPP

#include <inferwire/shm/unique_fd.hpp>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include <unistd.h>

namespace inferwire::gms {

/// What an allocation attempt gave.
enum class alloc_status { ok, out_of_memory };

/// An owned file descriptor (shared with the CUDA VMM shared-memory regions).
using unique_fd = shm::unique_fd;

/// The server's memory. `allocate` reports out-of-memory as a status (the server retries it
/// while the client's wait allows) and throws on any other failure (the server answers the
/// request with the error and keeps serving); `export_fd` returns a new descriptor the caller
/// owns; `release` returns the memory and never fails.
template <class B>
concept backend = requires(B& b, const B& cb, typename B::handle& h, const typename B::handle& ch,
                           std::size_t size) {
  typename B::handle;
  requires std::default_initializable<typename B::handle>;
  { cb.granularity() } -> std::convertible_to<std::size_t>;
  { cb.name() } -> std::convertible_to<std::string>;
  { b.allocate(size, h) } -> std::same_as<alloc_status>;
  { b.export_fd(ch) } -> std::same_as<int>;
  { b.release(h) } noexcept;
};

/// A backend that can also hand out descriptors through which the memory cannot be written;
/// the server gives those to read-only sessions.
template <class B>
concept read_only_exporting_backend = backend<B> && requires(B& b, const typename B::handle& h) {
  { b.export_read_only_fd(h) } -> std::same_as<int>;
};

/// A backend that keeps one descriptor of each allocation for the allocation's whole life and
/// lends it for sending: `lent_fd(h)` (and `lent_read_only_fd(h)` where the backend also models
/// read_only_exporting_backend) return descriptors the backend still owns, valid until
/// release(h). The server sends a lent descriptor when the reply can go out at once (the
/// kernel takes its own reference) and falls back to export_fd's copy when it must queue it.
template <class B>
concept lending_backend = backend<B> && requires(B& b, const typename B::handle& h) {
  { b.lent_fd(h) } -> std::same_as<int>;
};

/// A backend whose committed memory can be closed to writes: `seal_for_readers(h)`, called for
/// every allocation when a layout is committed, makes sure that no descriptor of it (those
/// already given out included, reopened or not) can map it writable from then on. Throws
/// std::system_error when it cannot; the commit then fails.
template <class B>
concept sealing_backend = backend<B> && requires(B& b, const typename B::handle& h) {
  b.seal_for_readers(h);
};

/// A client's address space. Virtual addresses are reserved once and stay reserved across
/// unmap and map (so a layout is remapped at the same addresses); `import` takes ownership of
/// the descriptor; `unmap` releases the handle but keeps the reservation; `synchronize` waits
/// for outstanding device work before memory goes away; `validate` says whether an address is
/// currently backed. `free_va` is called with exactly the range `reserve` returned. A mapper
/// whose handle does not release itself when destroyed also has `release(handle&) noexcept`,
/// called for a handle that was imported but never mapped (a failed batch).
template <class M>
concept mapper = requires(M& m, const M& cm, typename M::handle& h, unique_fd fd, std::size_t size,
                          std::uintptr_t va, bool writable) {
  typename M::handle;
  { cm.granularity() } -> std::convertible_to<std::size_t>;
  { m.reserve(size) } -> std::same_as<std::uintptr_t>;
  { m.free_va(va, size) } noexcept;
  { m.import(std::move(fd), size) } -> std::same_as<typename M::handle>;
  m.map(va, size, h, writable);
  { m.unmap(va, size, h) } noexcept;
  m.synchronize();
  { cm.validate(va) } -> std::convertible_to<bool>;
};

/// A mapper that can map without granting access and then grant it over a whole contiguous
/// range of mappings in one call (cuMemSetAccess may span many cuMemMap ranges).
/// memory_manager uses it when it maps many allocations at once.
template <class M>
concept range_access_mapper = mapper<M> && requires(M& m, typename M::handle& h, std::uintptr_t va, std::size_t size,
                                                    bool writable) {
  m.map_without_access(va, size, h);
  m.set_access(va, size, writable);
};

}  // namespace inferwire::gms

#endif
