// SPDX-License-Identifier: Apache-2.0
// inferwire/gms/mmap_mapper.hpp
//
// A GMS client mapper on plain virtual memory, for allocations served by memfd_backend: address
// space is reserved with PROT_NONE, an imported descriptor is mapped over the reservation with
// MAP_FIXED (PROT_READ for read-only sessions) once fstat shows it holds the size described,
// and unmapping puts the PROT_NONE reservation
// back, so the address stays ours. VA-stable unmap/remap and read-only access are therefore
// testable without a GPU, with the same memory_manager code that drives cuda_vmm_mapper.
//
// It models gms::mapper (see <inferwire/gms/backend.hpp>).
#ifndef INFERWIRE_GMS_MMAP_MAPPER_HPP
#define INFERWIRE_GMS_MMAP_MAPPER_HPP

#include <inferwire/gms/backend.hpp>
#include <inferwire/gms/error.hpp>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <string>
#include <system_error>

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace inferwire::gms {

class mmap_mapper {
 public:
  /// The imported memory: the descriptor stays open while mapped (it holds the memory, as a
  /// CUDA allocation handle does).
  struct handle {
    unique_fd fd;
  };

  explicit mmap_mapper(std::size_t granularity = std::size_t{2} << 20) : granularity_(granularity) {}

  std::size_t granularity() const noexcept { return granularity_; }

  /// Reserves `size` bytes of address space aligned to the granularity.
  std::uintptr_t reserve(std::size_t size) {
    // Over-reserve by one granule and trim, so the start is aligned.
    const std::size_t span = size + granularity_;
    void* p = ::mmap(nullptr, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw std::system_error(errno, std::generic_category(), "mmap (reserve)");
    const auto base = reinterpret_cast<std::uintptr_t>(p);
    const std::uintptr_t va = (base + granularity_ - 1) & ~(std::uintptr_t{granularity_} - 1);
    if (va > base) ::munmap(p, va - base);
    const std::uintptr_t end = base + span;
    if (end > va + size) ::munmap(reinterpret_cast<void*>(va + size), end - (va + size));
    return va;
  }

  void free_va(std::uintptr_t va, std::size_t size) noexcept {
    ::munmap(reinterpret_cast<void*>(va), size);
  }

  /// Takes the descriptor, once it is known to hold `size` bytes: a mapping past the end of
  /// the object would fault (SIGBUS) on first touch, so a server that describes more memory
  /// than it sent is refused here.
  handle import(unique_fd fd, std::size_t size) {
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) throw std::system_error(errno, std::generic_category(), "fstat");
    if (st.st_size < 0 || static_cast<std::size_t>(st.st_size) < size)
      throw error("GMS import: the descriptor holds " + std::to_string(st.st_size) + " bytes, fewer than the " +
                  std::to_string(size) + " described");
    return handle{std::move(fd)};
  }

  /// Maps the imported memory at `va`, which must lie inside a reservation.
  void map(std::uintptr_t va, std::size_t size, handle& h, bool writable) {
    const int prot = writable ? PROT_READ | PROT_WRITE : PROT_READ;
    void* p = ::mmap(reinterpret_cast<void*>(va), size, prot, MAP_SHARED | MAP_FIXED, h.fd.get(), 0);
    if (p == MAP_FAILED) throw std::system_error(errno, std::generic_category(), "mmap (map)");
  }

  /// Unmaps (the reservation stays: PROT_NONE anonymous memory takes the range back) and
  /// releases the handle.
  void unmap(std::uintptr_t va, std::size_t size, handle& h) noexcept {
    ::mmap(reinterpret_cast<void*>(va), size, PROT_NONE,
           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    h.fd.reset();
  }

  /// Plain memory has no queued work.
  void synchronize() noexcept {}

  /// Whether `va` lies in mapped address space (the CUDA mapper asks the driver instead).
  bool validate(std::uintptr_t va) const noexcept {
    unsigned char resident = 0;
    const long page = ::sysconf(_SC_PAGESIZE);
    return ::mincore(reinterpret_cast<void*>(va & ~static_cast<std::uintptr_t>(page - 1)), 1,
                     &resident) == 0;
  }

 private:
  std::size_t granularity_;
};

static_assert(mapper<mmap_mapper>);

}  // namespace inferwire::gms

#endif
