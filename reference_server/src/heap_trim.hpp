// SPDX-License-Identifier: Apache-2.0
// Gives the C heap's free pages back to the system once large requests are gone.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>

namespace inferwire::server {

/// Makes every thread allocate from one glibc heap (M_ARENA_MAX 1), unless the environment
/// configures the allocator. A large request leaves its buffers free in the heap of the thread
/// that allocated them, and glibc's trim returns the free end of the main heap only: with a heap
/// per thread, 64 MiB requests left the server 37 MiB larger after the trim (the free end of
/// each thread's heap stays), with one heap it came back to within 5 % of its start. The
/// server's threads are few (a gRPC queue thread, the HTTP threads, the execution pool), and
/// they allocate little per request, so they seldom wait for each other's allocations
/// (docs/benchmarks.md). Call before any thread starts. True when the setting was made.
bool use_one_heap() noexcept;

/// A large request leaves its bytes free inside the C library's heap when it is answered:
/// gRPC assembles a message from many small slices, and the memory they took (in the arena of
/// whichever thread read them) is kept for reuse instead of returned. Eight 48 MiB stream
/// requests left the server 60-120 MiB larger for good, depending on how many arenas its threads
/// used. This returns free pages to the system (`malloc_trim`) once the server is quiet: no
/// request in flight and no large one for `quiet`. A steady stream of large requests never
/// triggers it (their memory is reused), so it costs nothing on their path. glibc's trim
/// releases free blocks inside every heap and the main heap's free end; the free end of a
/// thread's heap stays for reuse up to the trim threshold (core/allocator.hpp).
class heap_trimmer {
 public:
  /// Requests of at least this many bytes mark the heap for a trim.
  static constexpr std::uint64_t large_request_bytes = std::uint64_t{1} << 20;
  static constexpr std::chrono::milliseconds quiet{200};

  /// `ex` runs the timer and the trim (not an I/O thread: a trim of a large heap takes a few
  /// milliseconds); `in_flight` counts the requests the server is answering.
  heap_trimmer(boost::asio::any_io_executor ex, const std::atomic<std::int64_t>& in_flight);

  /// A request of `bytes` arrived. Thread-safe and lock-free; small requests cost one compare.
  void note(std::uint64_t bytes) noexcept {
    if (bytes >= large_request_bytes) note_large();
  }

  /// How many trims ran (for the logs and tests).
  std::uint64_t trims() const noexcept { return trims_.load(std::memory_order_relaxed); }

 private:
  void note_large() noexcept;
  void wait() noexcept;
  void on_timer();

  boost::asio::steady_timer timer_;
  const std::atomic<std::int64_t>& in_flight_;
  /// The last large request, in steady_clock ticks.
  std::atomic<std::chrono::steady_clock::rep> last_large_{0};
  /// Set while the timer waits; only the one who set it touches the timer.
  std::atomic<bool> armed_{false};
  std::atomic<std::uint64_t> trims_{0};
};

}  // namespace inferwire::server
