// SPDX-License-Identifier: Apache-2.0
#include "logger.hpp"

#include <chrono>
#include <ctime>
#include <unistd.h>

namespace inferwire::server {

bool logger::set_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "a");
  if (!f) return false;
  std::lock_guard lock(mu_);
  if (out_) std::fclose(out_);
  out_ = f;
  file_ = path;
  return true;
}

logger::~logger() {
  if (out_) std::fclose(out_);
}

void logger::write(char level, std::string_view m) {
  using namespace std::chrono;
  auto now = system_clock::now();
  std::time_t t = system_clock::to_time_t(now);
  auto us = duration_cast<microseconds>(now.time_since_epoch()).count() % 1'000'000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char stamp[64];
  if (format == log_format::iso8601)
    std::snprintf(stamp, sizeof stamp, "%04d-%02d-%02dT%02d:%02d:%02dZ %c %d", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, level,
                  static_cast<int>(getpid()));
  else
    std::snprintf(stamp, sizeof stamp, "%c%02d%02d %02d:%02d:%02d.%06d %d", level, tm.tm_mon + 1,
                  tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(us),
                  static_cast<int>(getpid()));
  std::lock_guard lock(mu_);
  std::FILE* f = out_ ? out_ : stderr;
  std::fprintf(f, "%s inferwire] %.*s\n", stamp, static_cast<int>(m.size()), m.data());
  std::fflush(f);
}

}  // namespace inferwire::server
