// SPDX-License-Identifier: Apache-2.0
// The server's log: Triton's levels (info, warning, error, verbose N) and formats (default,
// ISO8601), changeable at run time through the logging extension (v2-protocol §7).
#pragma once

#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>

namespace inferwire::server {

enum class log_format { standard, iso8601 };

class logger {
 public:
  std::atomic<bool> info{true};
  std::atomic<bool> warning{true};
  std::atomic<bool> error{true};
  std::atomic<unsigned> verbose{0};
  std::atomic<log_format> format{log_format::standard};

  void log_info(std::string_view m) { if (info) write('I', m); }
  void log_warning(std::string_view m) { if (warning) write('W', m); }
  void log_error(std::string_view m) { if (error) write('E', m); }
  void log_verbose(unsigned level, std::string_view m) { if (verbose >= level) write('V', m); }

  /// Sends the log to `path` (appending) instead of stderr. False when it cannot be opened.
  bool set_file(const std::string& path);
  const std::string& file() const noexcept { return file_; }
  ~logger();

 private:
  void write(char level, std::string_view m);
  std::mutex mu_;
  std::FILE* out_ = nullptr;  // nullptr: stderr
  std::string file_;
};

}  // namespace inferwire::server
