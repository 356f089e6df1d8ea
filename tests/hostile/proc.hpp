// SPDX-License-Identifier: Apache-2.0
// What a process uses, read from /proc: resident memory, its peak (resettable), CPU time and
// open descriptors. The hostile tests assert on these after each abusive input.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <sys/types.h>
#include <unistd.h>

namespace hostile {

/// A `Vm...:` line of /proc/<pid>/status in KiB (0 when absent).
inline std::uint64_t status_kib(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind(field + ":", 0) == 0) return std::stoull(line.substr(field.size() + 1));
  return 0;
}
inline std::uint64_t rss_mib(pid_t pid) { return status_kib(pid, "VmRSS") / 1024; }
inline std::uint64_t peak_rss_mib(pid_t pid) { return status_kib(pid, "VmHWM") / 1024; }

/// The resident size once it is below `limit` MiB, or after `patience`: the server returns what
/// a large request left in its heap only after a quiet moment (200 ms), not at once.
inline std::uint64_t settled_rss_mib(pid_t pid, std::uint64_t limit,
                                     std::chrono::milliseconds patience = std::chrono::seconds(3)) {
  const auto until = std::chrono::steady_clock::now() + patience;
  auto rss = rss_mib(pid);
  while (rss >= limit && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    rss = rss_mib(pid);
  }
  return rss;
}

/// Resets the peak resident size (VmHWM) to the current one; false where not permitted.
inline bool reset_peak(pid_t pid) {
  std::ofstream out("/proc/" + std::to_string(pid) + "/clear_refs");
  out << "5";
  return static_cast<bool>(out.flush());
}

/// User + system CPU time of the process.
inline std::chrono::milliseconds cpu_time(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream fields(text.substr(text.rfind(')') + 2));
  std::string f;
  unsigned long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> f; ++i) {
    if (i == 14) utime = std::stoul(f);
    if (i == 15) stime = std::stoul(f);
  }
  const long hz = ::sysconf(_SC_CLK_TCK);
  return std::chrono::milliseconds((utime + stime) * 1000 / static_cast<unsigned long>(hz));
}

/// Open descriptors of the process.
inline std::size_t open_fds(pid_t pid) {
  std::size_t n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++n;
  return n;
}

}  // namespace hostile
