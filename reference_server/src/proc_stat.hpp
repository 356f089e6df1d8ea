// SPDX-License-Identifier: Apache-2.0
// The machine's CPU time from /proc/stat (the CPU metrics, the I/O threads' balance).
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

namespace inferwire::server {

/// All CPUs' time since boot, in USER_HZ ticks: everything, and idle (idle and iowait).
struct cpu_ticks {
  std::uint64_t total = 0;
  std::uint64_t idle = 0;
};

/// False where /proc/stat cannot be read or has no `cpu` line first.
inline bool read_cpu_ticks(cpu_ticks& out) {
  std::ifstream stat("/proc/stat");
  std::string label;
  std::uint64_t v[8] = {};
  stat >> label;
  for (auto& x : v) stat >> x;
  if (!stat || label != "cpu") return false;
  out.idle = v[3] + v[4];
  out.total = 0;
  for (auto x : v) out.total += x;  // guest time is already in user and nice
  return true;
}

}  // namespace inferwire::server
