// SPDX-License-Identifier: Apache-2.0
#include "heap_trim.hpp"

#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <sys/mman.h>
#include <unistd.h>

#include <inferwire/core/allocator.hpp>

namespace inferwire::server {

void populate_pages(char* p, std::size_t n) noexcept {
  static const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = (reinterpret_cast<std::uintptr_t>(p) + page - 1) & ~(page - 1);
  const auto end = reinterpret_cast<std::uintptr_t>(p) + n;
  if (end <= begin) return;
  char* const first = reinterpret_cast<char*>(begin);
  const std::size_t length = end - begin;
  ::madvise(first, length, MADV_HUGEPAGE);  // where the kernel allows them
#ifdef MADV_POPULATE_WRITE
  if (::madvise(first, length, MADV_POPULATE_WRITE) == 0) return;
#endif
  for (std::size_t i = 0; i < length; i += page) first[i] = 0;
}

bool use_one_heap() noexcept {
#if defined(__GLIBC__)
  if (inferwire::detail::malloc_set_by_environment({"MALLOC_ARENA_MAX"})) return false;
  return ::mallopt(M_ARENA_MAX, 1) == 1;
#else
  return false;
#endif
}

heap_trimmer::heap_trimmer(boost::asio::any_io_executor ex, const std::atomic<std::int64_t>& in_flight)
    : timer_(std::move(ex)), in_flight_(in_flight) {}

void heap_trimmer::note_large() noexcept {
  last_large_.store(std::chrono::steady_clock::now().time_since_epoch().count(), std::memory_order_relaxed);
  if (!armed_.exchange(true, std::memory_order_acq_rel)) wait();
}

void heap_trimmer::wait(std::chrono::steady_clock::duration after) noexcept {
  try {
    timer_.expires_after(after);
    timer_.async_wait([this](const boost::system::error_code& ec) {
      if (!ec) on_timer();  // aborted: the server is going away, and `this` with it
    });
  } catch (...) {  // no memory for the wait: the next large request tries again
    armed_.store(false, std::memory_order_release);
  }
}

void heap_trimmer::on_timer() {
  const auto since_large = std::chrono::steady_clock::now().time_since_epoch() -
                           std::chrono::steady_clock::duration(last_large_.load(std::memory_order_relaxed));
  if (since_large < quiet || in_flight_.load(std::memory_order_relaxed) > 0) return wait();
  if (since_large < kept_quiet && kept_bytes() > 0) return wait(kept_quiet - since_large);
  // The last touch of the timer: from here a new large request may arm it again.
  armed_.store(false, std::memory_order_release);
  free_kept();
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
  trims_.fetch_add(1, std::memory_order_relaxed);
}

bool heap_trimmer::take_buffer(std::string& s, std::size_t bytes) noexcept {
  if (bytes < kept_buffer_bytes || s.capacity() >= bytes) return false;
  std::lock_guard lock(kept_mutex_);
  std::string* best = nullptr;
  for (auto& k : kept_)
    if (k.capacity() >= bytes && (!best || k.capacity() < best->capacity())) best = &k;
  if (!best) return false;
  s.clear();
  s.swap(*best);  // what `s` held (a buffer too small) is kept in its place, or freed below
  if (best->capacity() < kept_buffer_bytes) std::string().swap(*best);
  return true;
}

bool heap_trimmer::make_room(std::string& s, std::size_t bytes) {
  if (bytes < kept_buffer_bytes) return false;
  if (!take_buffer(s, bytes) && s.capacity() < bytes) {
    s.clear();
    s.reserve(bytes);
    populate_pages(s.data(), s.capacity() + 1);
  }
  return true;
}

void heap_trimmer::keep_buffer(std::string& s) noexcept {
  if (s.capacity() < kept_buffer_bytes || s.capacity() > most_kept_bytes) return;
  {
    std::lock_guard lock(kept_mutex_);
    std::string* slot = nullptr;
    for (auto& k : kept_)
      if (k.capacity() < kept_buffer_bytes) {
        slot = &k;
        break;
      }
    if (!slot || kept_total() + s.capacity() > most_kept_bytes) return;
    s.clear();
    slot->swap(s);
  }
  note_large();
}

std::size_t heap_trimmer::kept_total() const noexcept {
  std::size_t total = 0;
  for (const auto& k : kept_)
    if (k.capacity() >= kept_buffer_bytes) total += k.capacity();
  return total;
}

std::size_t heap_trimmer::kept_bytes() const noexcept {
  std::lock_guard lock(kept_mutex_);
  return kept_total();
}

void heap_trimmer::free_kept() noexcept {
  std::array<std::string, most_kept> gone;
  {
    std::lock_guard lock(kept_mutex_);
    gone.swap(kept_);
  }
}  // freed here, outside the lock

}  // namespace inferwire::server
