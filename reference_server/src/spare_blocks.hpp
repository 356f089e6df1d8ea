// SPDX-License-Identifier: Apache-2.0
// Memory for the small objects every request makes and frees: the field index of an HTTP
// request the server parses (http_request.hpp) and the inference call of each request, HTTP or
// gRPC (about 1 KiB). Each a trip through malloc and free, about 150 instructions a pair.
// Each thread keeps the blocks its requests gave back, a few of each size, and hands them to
// the next request; a larger block, or one beyond the few kept, goes to the global allocator
// as before. What a thread keeps is bounded whatever its clients send: 32 blocks of each of the
// eight sizes from 64 to 512 bytes and 8 of each of the eight from 576 to 1,024, 122 KiB in
// all. Strings that every request fills (an HTTP request's text and body, its reply's header,
// small outputs) and the shapes and output lists of responses are kept the same way
// (spare_containers: spare_strings, 16 of at most 1 KiB each; spare_shapes; spare_outputs).
// (Boost.Pool's pools and std::pmr's pool resources keep every block they ever held until they
// are released, and are shared between threads behind a lock or not at all: neither bound fits
// a server whose clients choose how many fields they send.)
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <new>
#include <string>
#include <utility>
#include <vector>

namespace inferwire::server {

namespace detail {

class spare_blocks {
 public:
  static constexpr std::size_t granule = 64;  ///< block sizes are multiples of it
  static constexpr std::size_t classes = 16;  ///< up to 1,024 bytes
  static constexpr std::size_t small_classes = 8;  ///< up to 512 bytes: many per request
  static constexpr std::size_t most_spares = 32;  ///< of each small class
  /// How many blocks of class `c` a thread keeps.
  static constexpr std::size_t max_spares(std::size_t c) noexcept { return c < small_classes ? most_spares : 8; }
  /// The most a thread keeps, in bytes.
  static constexpr std::size_t max_kept_bytes() noexcept {
    std::size_t n = 0;
    for (std::size_t c = 0; c < classes; ++c) n += max_spares(c) * (c + 1) * granule;
    return n;
  }

  static void* take(std::size_t bytes) {
    const std::size_t c = class_of(bytes);
    if (c >= classes) return ::operator new(bytes);
    if (!gone) {
      auto& s = spares();
      if (s.count[c] != 0) return s.blocks[c][--s.count[c]];
    }
    // A block of its class's whole size, also on an exiting thread: another thread may keep it
    // as a spare of that class once it is freed.
    return ::operator new((c + 1) * granule);
  }

  static void give(void* p, std::size_t bytes) noexcept {
    const std::size_t c = class_of(bytes);
    if (c < classes && !gone) {
      auto& s = spares();
      if (s.count[c] < max_spares(c)) {
        s.blocks[c][s.count[c]++] = p;
        return;
      }
    }
    ::operator delete(p);  // unsized: a pooled block is larger than `bytes`
  }

  /// Blocks the calling thread keeps (for tests).
  static std::size_t kept() noexcept {
    if (gone) return 0;
    std::size_t n = 0;
    for (auto k : spares().count) n += k;
    return n;
  }

 private:
  static std::size_t class_of(std::size_t bytes) noexcept { return bytes == 0 ? 0 : (bytes - 1) / granule; }

  struct lists {
    std::array<std::array<void*, most_spares>, classes> blocks{};
    std::array<std::size_t, classes> count{};
    ~lists() {
      gone = true;  // a request freed later on this thread, while it exits, frees its blocks
      for (std::size_t c = 0; c < classes; ++c)
        for (std::size_t i = 0; i < count[c]; ++i) ::operator delete(blocks[c][i]);
    }
  };
  static lists& spares() noexcept {
    thread_local lists s;
    return s;
  }
  // Trivially destructible: readable while the thread's lists are destroyed, and after.
  static inline thread_local bool gone = false;
};

}  // namespace detail

/// The allocator of parsed requests' fields and of inference calls (stateless: every instance
/// uses the calling thread's spare blocks, and a block may be freed on any thread).
template <class T>
struct spare_allocator {
  using value_type = T;
  static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__);

  spare_allocator() noexcept = default;
  template <class U>
  spare_allocator(const spare_allocator<U>&) noexcept {}

  T* allocate(std::size_t n) {
    if (n > std::numeric_limits<std::size_t>::max() / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(detail::spare_blocks::take(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept { detail::spare_blocks::give(p, n * sizeof(T)); }

  template <class U>
  bool operator==(const spare_allocator<U>&) const noexcept {
    return true;
  }
};

/// Containers a request filled and gave back, kept with their capacity for the next request's:
/// at most `MaxKept` per thread, each of a capacity above an empty one's (a string's inline
/// buffer) and at most `MaxCapacity` (elements). One taken is empty; what it held before is not
/// readable through it.
template <class Container, std::size_t MaxKept, std::size_t MaxCapacity>
class spare_containers {
 public:
  static constexpr std::size_t max_capacity = MaxCapacity;
  static constexpr std::size_t max_kept = MaxKept;

  /// An empty container, with the capacity of one given back if the thread has one.
  static Container take() noexcept {
    if (gone) return {};
    auto& s = spares();
    if (s.count == 0) return {};
    return std::move(s.items[--s.count]);
  }
  /// Keeps `c`'s memory when it is worth keeping and the thread has room.
  static void give(Container&& c) noexcept {
    const std::size_t cap = c.capacity();
    if (gone || cap > max_capacity || cap <= Container().capacity()) return;  // large, or inline
    auto& s = spares();
    if (s.count == max_kept) return;
    c.clear();
    s.items[s.count++] = std::move(c);
  }
  /// Containers the calling thread keeps (for tests).
  static std::size_t kept() noexcept { return gone ? 0 : spares().count; }

 private:
  struct list {
    std::array<Container, max_kept> items;
    std::size_t count = 0;
    ~list() { gone = true; }
  };
  static list& spares() noexcept {
    thread_local list s;
    return s;
  }
  static inline thread_local bool gone = false;  // trivially destructible, as spare_blocks's
};

/// Strings (a small request's body and text, a reply's JSON header, a small output's bytes):
/// 16 per thread, of at most 1 KiB each.
using spare_strings = spare_containers<std::string, 16, 1024>;
/// Tensor shapes (an output's, made by a backend): 32 per thread, of at most 8 dimensions.
using spare_shapes = spare_containers<std::vector<std::int64_t>, 32, 8>;

}  // namespace inferwire::server
