// SPDX-License-Identifier: Apache-2.0
#include "heap_trim.hpp"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <inferwire/core/allocator.hpp>

namespace inferwire::server {

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

void heap_trimmer::wait() noexcept {
  try {
    timer_.expires_after(quiet);
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
  // The last touch of the timer: from here a new large request may arm it again.
  armed_.store(false, std::memory_order_release);
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
  trims_.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace inferwire::server
