// SPDX-License-Identifier: Apache-2.0
// Measurement windows, perf_analyzer's stability rule, and the report (text and CSV).
#ifndef INFERWIRE_TOOLS_PERF_MEASURE_HPP
#define INFERWIRE_TOOLS_PERF_MEASURE_HPP

#include "options.hpp"

#include <inferwire/v2/types.hpp>

#include <chrono>
#include <cstdint>
#include <mutex>
#include <ostream>
#include <string>
#include <vector>

namespace inferwire::perf {

/// What the load's requests report while it runs: each completed request's latency, and the
/// failures. Taken (and emptied) once per window.
class recorder {
 public:
  void success(std::chrono::nanoseconds latency) {
    std::lock_guard lock(mu_);
    latencies_.push_back(static_cast<std::uint64_t>(latency.count()));
  }
  void failure(const std::string& what) {
    std::lock_guard lock(mu_);
    ++failures_;
    if (first_error_.empty()) first_error_ = what;
  }
  struct taken {
    std::vector<std::uint64_t> latencies_ns;
    std::uint64_t failures = 0;
    std::string first_error;
  };
  taken take() {
    std::lock_guard lock(mu_);
    taken t{std::move(latencies_), failures_, std::move(first_error_)};
    latencies_.clear();
    failures_ = 0;
    first_error_.clear();
    return t;
  }

 private:
  std::mutex mu_;
  std::vector<std::uint64_t> latencies_;
  std::uint64_t failures_ = 0;
  std::string first_error_;
};

/// The server's side of a window: the difference of two statistics readings of the model.
struct server_side {
  std::uint64_t inference_count = 0, execution_count = 0, success_count = 0;
  std::uint64_t request_ns = 0, queue_ns = 0, compute_input_ns = 0, compute_infer_ns = 0, compute_output_ns = 0;

  static server_side between(const v2::model_statistics& before, const v2::model_statistics& after);
  server_side& operator+=(const server_side& o);
  /// Average per successful request, in microseconds.
  double avg_us(std::uint64_t ns) const {
    return success_count ? static_cast<double>(ns) / 1e3 / static_cast<double>(success_count) : 0;
  }
};

/// One measurement window, or several merged.
struct window {
  std::chrono::nanoseconds duration{0};
  std::vector<std::uint64_t> latencies_ns;  // sorted
  std::uint64_t failures = 0;
  std::string first_error;
  server_side server;
  std::int64_t batch_size = 1;

  std::uint64_t requests() const { return latencies_ns.size(); }
  double throughput() const;  ///< inferences per second (requests x batch size)
  double avg_latency_us() const;
  double stddev_latency_us() const;
  double percentile_us(int p) const;
  /// The latency stability is judged on: the average, or --percentile's.
  double stability_latency_us(int percentile) const { return percentile ? percentile_us(percentile) : avg_latency_us(); }

  static window merge(const std::vector<window>& windows);
};

/// perf_analyzer's rule: the last three windows' throughputs and latencies each lie within
/// `percentage` percent of their average (and every window completed a request).
bool stable(const std::vector<window>& windows, double percentage, int percentile);

/// One measured load level.
struct result {
  double level = 0;  // concurrency, or requests per second
  window w;
  bool stable = false;
  double client_send_us = 0;  // serialising one request, measured on the side
  double client_recv_us = 0;  // deserialising one response, measured on the side
};

void print_settings(std::ostream& out, const options& o);
void print_level(std::ostream& out, const options& o, const result& r);
void print_summary(std::ostream& out, const options& o, const std::vector<result>& results);
void write_csv(std::ostream& out, const options& o, const std::vector<result>& results);

}  // namespace inferwire::perf

#endif
