// SPDX-License-Identifier: Apache-2.0
// Gives the C heap's free pages back to the system once large requests are gone, and keeps
// the buffers of very large tensors for the next request meanwhile.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

namespace inferwire::server {

/// Faults in the pages of [p, p + n) in one call, as huge pages where the kernel allows them
/// (MADV_POPULATE_WRITE; touched page by page where the kernel lacks it): far cheaper than
/// faulting them in one at a time as bytes are copied into fresh memory (16,384 faults for
/// 64 MiB, 15-17 us each on a VM). For memory not yet written: the pages wholly inside the range
/// are populated, and the last one it reaches into. The range must lie in one writable mapping.
void populate_pages(char* p, std::size_t n) noexcept;

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
///
/// It also keeps the buffers of a few very large messages for the next one. glibc serves a
/// block of 32 MiB or more (the most its mmap threshold may be) with a mapping of its own and
/// unmaps it when it is freed, so each 64 MiB tensor faulted in all 16,384 pages of a fresh
/// buffer as the request's bytes were copied into it, 15-17 us a fault on a VM: most of the
/// server's CPU for such a call. A raw_input_contents entry that large which the server is done
/// with (its reply sent, or its call over) is kept instead (`keep_buffer`), and the next
/// request's entry of that size takes it (`take_buffer`): its pages are already there. At most
/// `most_kept` buffers and `most_kept_bytes` are kept. While any is kept the trim waits for
/// `kept_quiet` instead of `quiet`, then frees them before it trims the heap, so the server comes
/// back to its size once large requests stop. (The longer wait: a request is seen only once all
/// its bytes are in, and a 64 MiB one took a second to arrive over loopback on a small VM, so
/// `quiet` passed between two such requests sent back to back.)
class heap_trimmer {
 public:
  /// Buffers of at least this capacity are kept (smaller ones are reused by glibc's heap).
  static constexpr std::size_t kept_buffer_bytes = std::size_t{32} << 20;
  static constexpr std::size_t most_kept = 4;
  static constexpr std::size_t most_kept_bytes = std::size_t{256} << 20;

  /// Requests of at least this many bytes mark the heap for a trim.
  static constexpr std::uint64_t large_request_bytes = std::uint64_t{1} << 20;
  static constexpr std::chrono::milliseconds quiet{200};
  static constexpr std::chrono::milliseconds kept_quiet{2000};

  /// `ex` runs the timer and the trim (not an I/O thread: a trim of a large heap takes a few
  /// milliseconds); `in_flight` counts the requests the server is answering.
  heap_trimmer(boost::asio::any_io_executor ex, const std::atomic<std::int64_t>& in_flight);

  /// A request of `bytes` arrived. Thread-safe and lock-free; small requests cost one compare.
  void note(std::uint64_t bytes) noexcept {
    if (bytes >= large_request_bytes) note_large();
  }

  /// How many trims ran (for the logs and tests).
  std::uint64_t trims() const noexcept { return trims_.load(std::memory_order_relaxed); }

  /// Gives `s` the smallest kept buffer that holds `bytes` (its contents cleared) when `s`
  /// holds less; a buffer `s` had goes to the kept ones in its place. False: none fits.
  bool take_buffer(std::string& s, std::size_t bytes) noexcept;
  /// Room for `bytes` in `s` when that is at least `kept_buffer_bytes`: a kept buffer, or else
  /// (unless `s` holds enough) a fresh one with its pages faulted in at once (populate_pages),
  /// where a copy into it would fault them in one by one. False, `s` untouched: smaller.
  /// Throws std::bad_alloc.
  bool make_room(std::string& s, std::size_t bytes);
  /// Keeps the buffer of `s` (left empty) when it is large and there is room; else leaves it.
  /// Arms the trim, which frees what is kept once the server is quiet. Thread-safe.
  void keep_buffer(std::string& s) noexcept;
  /// The bytes of the buffers kept now (for tests).
  std::size_t kept_bytes() const noexcept;

 private:
  void note_large() noexcept;
  void wait(std::chrono::steady_clock::duration after = quiet) noexcept;
  void on_timer();
  void free_kept() noexcept;
  std::size_t kept_total() const noexcept;  ///< kept_bytes() with kept_mutex_ held

  boost::asio::steady_timer timer_;
  const std::atomic<std::int64_t>& in_flight_;
  /// The last large request, in steady_clock ticks.
  std::atomic<std::chrono::steady_clock::rep> last_large_{0};
  /// Set while the timer waits; only the one who set it touches the timer.
  std::atomic<bool> armed_{false};
  std::atomic<std::uint64_t> trims_{0};
  mutable std::mutex kept_mutex_;
  std::array<std::string, most_kept> kept_;  ///< empty strings are free slots
};

}  // namespace inferwire::server
