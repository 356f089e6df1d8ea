// SPDX-License-Identifier: Apache-2.0
// inferwire/core/allocator.hpp
//
// keep_large_blocks(): an opt-in, process-wide setting of glibc's allocator for programs that
// move tensors of a few MiB. glibc serves every block over 128 KiB with a mapping of its own
// and unmaps it when it is freed (the threshold rises only as such blocks are freed, and the
// heap is trimmed once twice the largest is free), so each message of a few MiB faults every
// page of each of its buffers in again. With blocks of up to `mmap_threshold` served from the
// heap, and up to `trim_threshold` kept free before the heap gives memory back, they are
// reused: a 4 MiB round trip over gRPC costs the reference server 3-4 ms of CPU instead of
// 14-16 ms (docs/benchmarks.md). The price is memory kept for reuse: up to `trim_threshold`
// free per glibc heap (one per thread that allocates, at most 8 per core).
//
// It changes nothing when the environment already configures the allocator (any
// `glibc.malloc.*` tunable in GLIBC_TUNABLES, MALLOC_MMAP_THRESHOLD_ or MALLOC_TRIM_THRESHOLD_),
// nor with another C library; another allocator loaded with LD_PRELOAD ignores it. Call it early
// in main(). Not included by core.hpp.
#ifndef INFERWIRE_CORE_ALLOCATOR_HPP
#define INFERWIRE_CORE_ALLOCATOR_HPP

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace inferwire {

namespace detail {
/// Whether the environment configures glibc's allocator: any `glibc.malloc.*` tunable in
/// GLIBC_TUNABLES, or one of the variables named (MALLOC_*_). A program then leaves it as is.
inline bool malloc_set_by_environment(std::initializer_list<const char*> variables) noexcept {
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables && std::strstr(tunables, "glibc.malloc.")) return true;
  for (const char* v : variables)
    if (std::getenv(v)) return true;
  return false;
}
}  // namespace detail

/// True when the settings were made.
inline bool keep_large_blocks(std::size_t mmap_threshold = std::size_t{32} << 20,
                              std::size_t trim_threshold = std::size_t{64} << 20) {
#if defined(__GLIBC__)
  if (detail::malloc_set_by_environment({"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"})) return false;
  return ::mallopt(M_MMAP_THRESHOLD, static_cast<int>(mmap_threshold)) == 1 &&
         ::mallopt(M_TRIM_THRESHOLD, static_cast<int>(trim_threshold)) == 1;
#else
  (void)mmap_threshold;
  (void)trim_threshold;
  return false;
#endif
}

}  // namespace inferwire

#endif
