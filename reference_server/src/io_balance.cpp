// SPDX-License-Identifier: Apache-2.0
#include "io_balance.hpp"

#include "proc_stat.hpp"

#include <algorithm>
#include <cmath>

#include <unistd.h>

namespace inferwire::server {

unsigned active_io_threads(unsigned current, const io_load& load) {
  const auto n = static_cast<unsigned>(load.busy.size());
  if (n <= 1) return 1;
  current = std::clamp(current, 1u, n);
  double total = 0;
  bool all_busy = true;
  for (unsigned i = 0; i < n; ++i) {
    total += load.busy[i];
    if (i < current && load.busy[i] < 0.85) all_busy = false;
  }
  unsigned want = current;
  if (all_busy)
    want = std::max(current + 1, static_cast<unsigned>(std::ceil(total / 0.7)));
  else if (current > 1 && total <= 0.6 * (current - 1))
    want = current - 1;
  // Whole free cores: a core counts from three quarters free for another thread, and from half
  // free for one already active (so that a figure near the line does not move connections
  // back and forth every period).
  auto cores = [n](double free) {
    const double c = std::floor(free);
    return c < 1 ? 1u : static_cast<unsigned>(std::min<double>(c, n));
  };
  if (want > current) want = std::max(current, std::min(want, cores(load.available + 0.25)));
  return std::clamp(want, 1u, cores(load.available + 0.5));
}

io_balance::io_balance(std::size_t threads, bool adaptive)
    : adaptive_(adaptive && threads > 1),
      conns_(std::max<std::size_t>(threads, 1)),
      active_(adaptive_ ? 1u : static_cast<unsigned>(conns_.size())),
      clocks_(conns_.size(), clockid_t(-1)),
      last_thread_ns_(conns_.size(), 0),
      cores_(static_cast<double>(std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN)))) {}

void io_balance::set_thread_clock(std::size_t i, clockid_t thread_clock) {
  if (i < clocks_.size()) clocks_[i] = thread_clock;
}

std::size_t io_balance::emptiest(unsigned active) const noexcept {
  std::size_t best = 0;
  for (std::size_t i = 1; i < active; ++i)
    if (conns_[i].load(std::memory_order_relaxed) < conns_[best].load(std::memory_order_relaxed)) best = i;
  return best;
}

std::size_t io_balance::choose() noexcept {
  if (!adaptive_) return round_robin_.fetch_add(1, std::memory_order_relaxed) % conns_.size();
  return emptiest(active());
}

std::size_t io_balance::rehome(std::size_t i) noexcept {
  if (!adaptive_) return i;
  const unsigned a = active();
  const std::size_t to = emptiest(a);
  if (to == i) return i;
  if (i < a && conns_[i].load(std::memory_order_relaxed) <= conns_[to].load(std::memory_order_relaxed) + 1) return i;
  conns_[i].fetch_sub(1, std::memory_order_relaxed);
  conns_[to].fetch_add(1, std::memory_order_relaxed);
  moves_.fetch_add(1, std::memory_order_relaxed);
  return to;
}

void io_balance::sample() {
  if (!adaptive_) return;
  const auto now = std::chrono::steady_clock::now();
  io_load load;
  load.busy.resize(conns_.size(), 0.0);
  const double wall_ns = static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(now - last_wall_).count());
  const bool first = last_wall_ == std::chrono::steady_clock::time_point{};
  double io_busy = 0;
  for (std::size_t i = 0; i < clocks_.size(); ++i) {
    timespec ts{};
    if (clocks_[i] == clockid_t(-1) || ::clock_gettime(clocks_[i], &ts) != 0) continue;
    const std::int64_t ns = std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
    if (!first && wall_ns > 0) load.busy[i] = std::clamp(static_cast<double>(ns - last_thread_ns_[i]) / wall_ns, 0.0, 1.0);
    io_busy += load.busy[i];
    last_thread_ns_[i] = ns;
  }
  last_wall_ = now;
  // What was busy on the machine's cores (USER_HZ ticks); unknown (no /proc): all cores count
  // as free.
  load.available = cores_;
  cpu_ticks t;
  if (read_cpu_ticks(t)) {
    if (machine_known_ && t.total > last_total_ticks_) {
      const double dt = static_cast<double>(t.total - last_total_ticks_);
      const double didle = static_cast<double>(std::min(t.idle - last_idle_ticks_, t.total - last_total_ticks_));
      const double machine_busy = (dt - didle) / dt * cores_;
      load.available = cores_ - std::max(0.0, machine_busy - io_busy);
    }
    last_total_ticks_ = t.total;
    last_idle_ticks_ = t.idle;
    machine_known_ = true;
  }
  if (!first) apply(load);
}

void io_balance::apply(const io_load& load) noexcept {
  if (adaptive_) active_.store(active_io_threads(active(), load), std::memory_order_relaxed);
}

}  // namespace inferwire::server
