// SPDX-License-Identifier: Apache-2.0
// Process helpers shared by the benchmarks: spawn and stop programs, find free ports, start
// the reference server and learn its port from its log.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <time.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace bench {

namespace net = boost::asio;
using tcp = net::ip::tcp;

inline std::string read_file(const std::string& p) {
  std::ifstream in(p);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// CPU seconds (user + system, all threads) of this process, to the microsecond (getrusage).
inline double self_cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// The median of `v` (the upper one of an even count); `v` must not be empty.
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Each round's ratio: a[i] / b[i] for the rounds of two measurements taken side by side.
inline std::vector<double> ratios(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> r;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) r.push_back(a[i] / b[i]);
  return r;
}

// The fields of /proc/<p>/stat after the command name (field 3 first); empty when gone.
inline std::vector<std::string> stat_fields(pid_t p) {
  std::vector<std::string> f;
  std::string s = read_file("/proc/" + std::to_string(p) + "/stat");
  auto close = s.rfind(')');
  if (close == std::string::npos) return f;
  std::istringstream in(s.substr(close + 2));
  for (std::string field; in >> field;) f.push_back(field);
  return f;
}

// Calls f(p, stat_fields(p)) for `pid` and, if `children`, for each process whose parent it is;
// `fields` has at least 13 entries (fields 3-15) in every call.
template <class F>
void for_process_and_children(pid_t pid, bool children, F f) {
  if (auto fields = stat_fields(pid); fields.size() >= 13) f(pid, fields);
  if (!children) return;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t p = static_cast<pid_t>(std::stol(name));
    const auto fields = stat_fields(p);
    if (fields.size() >= 13 && std::stol(fields[1]) == pid) f(p, fields);  // field 4: the parent
  }
}

// Minor page faults of `pid` so far (all threads; field 10 of /proc/<pid>/stat); 0 when gone.
inline double minor_faults(pid_t pid) {
  const auto f = stat_fields(pid);
  return f.size() >= 13 ? std::stod(f[7]) : 0.0;
}

// CPU seconds (user + system, all threads, exited ones included) of `pid`, and of its children
// if `children`. The process's CPU-time clock (clock_getcpuclockid) counts in nanoseconds; the
// clock ticks of /proc/<pid>/stat (10 ms each) are the fallback where that clock is refused.
// A figure per request from ticks moves in steps of 0.5 us over 20,000 requests.
inline double cpu_seconds(pid_t pid, bool children) {
  static const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  double total = 0;
  for_process_and_children(pid, children, [&](pid_t p, const std::vector<std::string>& f) {
    clockid_t clock{};
    timespec t{};
    if (::clock_getcpuclockid(p, &clock) == 0 && ::clock_gettime(clock, &t) == 0)
      total += static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
    else
      total += static_cast<double>(std::stoull(f[11]) + std::stoull(f[12])) / tick;  // fields 14, 15
  });
  return total;
}

// User and system clock ticks (10 ms each) of `pid`, and of its children if `children`, from
// /proc/<p>/stat: coarse, for the split of CPU time between user space and the kernel over a
// whole measurement, not for a figure per request.
struct cpu_ticks {
  long long user = 0, system = 0;
  cpu_ticks operator-(const cpu_ticks& o) const { return {user - o.user, system - o.system}; }
  cpu_ticks& operator+=(const cpu_ticks& o) {
    user += o.user;
    system += o.system;
    return *this;
  }
  /// The kernel's share of the whole, in percent (0 when nothing was counted).
  double system_percent() const {
    return user + system ? 100.0 * static_cast<double>(system) / static_cast<double>(user + system) : 0;
  }
};
inline cpu_ticks cpu_split(pid_t pid, bool children) {
  cpu_ticks total;
  for_process_and_children(pid, children, [&](pid_t, const std::vector<std::string>& f) {
    total += {std::stoll(f[11]), std::stoll(f[12])};  // fields 14, 15
  });
  return total;
}

// Resident memory of process `p` in bytes (/proc/<p>/statm), 0 when gone.
inline std::size_t rss_bytes(pid_t p) {
  std::istringstream in(read_file("/proc/" + std::to_string(p) + "/statm"));
  std::size_t pages = 0, resident = 0;
  in >> pages >> resident;
  return resident * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

inline pid_t spawn(std::vector<std::string> args, const std::string& log) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawn(&pid, args[0].c_str(), &fa, nullptr, argv.data(), environ) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

inline void stop(pid_t pid) {
  if (pid <= 0) return;
  kill(pid, SIGTERM);
  int st = 0;
  waitpid(pid, &st, 0);
}

inline int free_port() {
  net::io_context io;
  tcp::acceptor a(io, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
  return a.local_endpoint().port();
}

inline bool wait_for_port(int port) {
  for (int i = 0; i < 500; ++i) {
    try {
      net::io_context io;
      tcp::socket s(io);
      s.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)));
      return true;
    } catch (...) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  return false;
}

/// Starts inferwire-server on the bundled and test repositories on a free loopback port;
/// returns the port (0 when it did not start) and sets `pid`.
inline int start_reference_server(const std::string& server, const std::string& log, pid_t& pid,
                                  std::vector<std::string> extra = {}) {
  std::vector<std::string> args{
      server, "--model-repository", std::string(INFERWIRE_SOURCE_DIR) + "/reference_server/models",
      "--model-repository", std::string(INFERWIRE_SOURCE_DIR) + "/tests/integration/models",
      "--http-address", "127.0.0.1", "--http-port", "0"};
  // Defaults that `extra` may set otherwise.
  for (const char* flag : {"--allow-metrics=false", "--allow-grpc=false"}) {
    const std::string name = std::string(flag).substr(0, std::string(flag).find('='));
    bool overridden = false;
    for (const auto& e : extra) overridden |= e.rfind(name, 0) == 0;
    if (!overridden) args.emplace_back(flag);
  }
  args.insert(args.end(), extra.begin(), extra.end());
  pid = spawn(args, log);
  for (int i = 0; i < 500; ++i) {
    std::smatch m;
    std::string text = read_file(log);
    if (std::regex_search(text, m, std::regex("Started HTTPService at [0-9.]+:([0-9]+)")))
      return std::stoi(m[1]);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return 0;
}

}  // namespace bench
