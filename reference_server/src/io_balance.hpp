// SPDX-License-Identifier: Apache-2.0
// Which HTTP I/O threads carry connections. Every thread of --http-thread-count runs, but
// connections are kept on as few of them as their load needs and the machine's free cores
// allow: one thread while one keeps up, another once the busy ones are near a whole core and a
// core is free for it, fewer again when the load drops or other processes take the cores. On a
// host whose other work (a load generator, the execution pool) already takes the cores, two
// I/O threads that each do half the work cost a third more CPU per request than one that does
// all of it: they wake, sleep and switch twice as often (docs/benchmarks.md).
//
// The controller samples every period (the threads' CPU clocks, /proc/stat) and decides how
// many threads are active; a new connection goes to the active thread with the fewest, and a
// connection between two requests moves when its thread is no longer active or has two more
// than the emptiest active one (docs/server.md, "HTTP I/O threads").
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include <time.h>

namespace inferwire::server {

/// One period of the controller's figures.
struct io_load {
  /// Each I/O thread's CPU over the period, in cores (0 to 1).
  std::vector<double> busy;
  /// Cores the I/O threads could have: the machine's less what everything else used (other
  /// processes, the server's other threads).
  double available = 0;
};

/// How many I/O threads should carry connections after a period with `load`, `current` of
/// them having carried them (the rule itself, free of clocks, for tests):
/// - grow by at least one when every active thread was busy 85 % of the period or more;
/// - shrink by one when the load would fit in one fewer thread at 60 % each;
/// - never more than the whole free cores (a core counts from three quarters free for another
///   thread, from half free for one already active), nor below one.
unsigned active_io_threads(unsigned current, const io_load& load);

class io_balance {
 public:
  /// `threads` I/O threads; `adaptive` false keeps all of them active (round robin, as
  /// --http-io-balance=spread asks).
  io_balance(std::size_t threads, bool adaptive);

  std::size_t threads() const noexcept { return conns_.size(); }
  bool adaptive() const noexcept { return adaptive_; }
  /// Thread `i`'s CPU clock (pthread_getcpuclockid), once the threads have started.
  void set_thread_clock(std::size_t i, clockid_t thread_clock);

  /// The thread for the next accepted connection: the active one with the fewest.
  std::size_t choose() noexcept;
  /// A connection opened on thread `i`, or one on thread `i` closed.
  void opened(std::size_t i) noexcept { conns_[i].fetch_add(1, std::memory_order_relaxed); }
  void closed(std::size_t i) noexcept { conns_[i].fetch_sub(1, std::memory_order_relaxed); }
  /// A connection of thread `i` between two requests: the thread it should move to (the move
  /// is counted), or `i` to stay.
  std::size_t rehome(std::size_t i) noexcept;

  /// One period of the controller (on one thread; the first call only starts the clocks).
  void sample();
  /// The rule applied to one period's figures (what sample() does once it has them).
  void apply(const io_load& load) noexcept;

  unsigned active() const noexcept { return active_.load(std::memory_order_relaxed); }
  std::uint64_t moves() const noexcept { return moves_.load(std::memory_order_relaxed); }
  std::size_t connections(std::size_t i) const noexcept {
    return static_cast<std::size_t>(std::max<std::int64_t>(0, conns_[i].load(std::memory_order_relaxed)));
  }

  static constexpr std::chrono::milliseconds period{100};

 private:
  std::size_t emptiest(unsigned active) const noexcept;

  bool adaptive_;
  std::vector<std::atomic<std::int64_t>> conns_;
  std::atomic<unsigned> active_;
  std::atomic<std::uint64_t> moves_{0};
  std::atomic<std::size_t> round_robin_{0};
  // The controller's previous readings (touched by sample() only).
  std::vector<clockid_t> clocks_;
  std::vector<std::int64_t> last_thread_ns_;
  std::chrono::steady_clock::time_point last_wall_{};
  std::uint64_t last_total_ticks_ = 0, last_idle_ticks_ = 0;
  bool machine_known_ = false;
  double cores_;  ///< the machine's online cores
};

}  // namespace inferwire::server
