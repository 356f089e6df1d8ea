// SPDX-License-Identifier: Apache-2.0
// The counters of one model version, read by the statistics extension (v2-protocol §8) and by
// the Prometheus metrics alike.
#pragma once

#include <inferwire/core/error.hpp>
#include <inferwire/v2/types.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace inferwire::server {

using clock = std::chrono::steady_clock;

/// Why a request failed, as Triton labels nv_inference_request_failure: REJECTED (its queue was
/// full or its queue timeout expired), CANCELED (its client gave up), BACKEND (the backend's
/// execution failed), OTHER (everything else: an invalid request, a sequence refused, ...).
enum class failure_reason : std::uint8_t { rejected, canceled, backend, other };
inline constexpr std::size_t failure_reasons = 4;
/// Triton's label of a reason.
constexpr const char* failure_label(failure_reason r) noexcept {
  constexpr const char* labels[] = {"REJECTED", "CANCELED", "BACKEND", "OTHER"};
  return labels[static_cast<std::size_t>(r)];
}
/// The reason of a failure with status `st`: CANCELED for a cancelled request, else BACKEND when
/// the backend's execution failed, else OTHER.
inline failure_reason reason_of(const status& st, bool from_backend) noexcept {
  if (st.code() == errc::cancelled) return failure_reason::canceled;
  return from_backend ? failure_reason::backend : failure_reason::other;
}

/// A histogram as Prometheus shows it: upper bounds (ascending; +Inf implied), counts per
/// bucket (not cumulative, one more than the bounds), sum and count.
struct histogram {
  std::vector<double> bounds;
  std::vector<std::uint64_t> counts;
  double sum = 0;
  std::uint64_t count = 0;
  void observe(double v);
};

/// Counters of one model version: the statistics extension and the Prometheus metrics read
/// the same numbers.
class version_stats {
 public:
  struct durations {
    std::uint64_t request_ns = 0;  ///< received -> response ready
    std::uint64_t queue_ns = 0;
    std::uint64_t input_ns = 0;
    std::uint64_t infer_ns = 0;
    std::uint64_t output_ns = 0;
    /// received -> first response: request_ns unless a decoupled model answered earlier (then
    /// set); a decoupled request that sent no response has none.
    std::uint64_t first_response_ns = 0;
    bool responded = true;
  };

  /// The buckets, in milliseconds, of nv_inference_first_response_histogram_ms (Triton's
  /// default: 100, 500, 2000, 5000; a model's model_metrics may set others).
  void first_response_buckets(std::vector<double> bounds);
  histogram first_responses() const;
  /// A request that executed alone: the request and its execution.
  void record_success(std::uint64_t batch_size, const durations& d);
  /// A request of a dynamic batch (inference_count, its durations), and the batch's one
  /// execution (execution_count, batch_stats under the batch's size).
  void record_request(std::uint64_t batch_size, const durations& d);
  void record_execution(std::uint64_t batch_size, std::uint64_t input_ns, std::uint64_t infer_ns,
                        std::uint64_t output_ns);
  /// A failed request, with Triton's reason (nv_inference_request_failure's label).
  void record_failure(std::uint64_t request_ns, failure_reason why);

  v2::model_statistics snapshot(const std::string& name, std::int64_t version) const;
  /// Failed requests by reason, indexed by failure_reason.
  std::array<std::uint64_t, failure_reasons> failures() const;

  /// Requests handed to the execution pool and not yet running
  /// (nv_inference_pending_request_count).
  void enqueued() noexcept { pending_.fetch_add(1, std::memory_order_relaxed); }
  void dequeued() noexcept { pending_.fetch_sub(1, std::memory_order_relaxed); }
  std::int64_t pending() const noexcept { return pending_.load(std::memory_order_relaxed); }

  /// The durations of the most recent successful requests, in microseconds, for the summary
  /// metrics: request, queue, compute input, compute infer, compute output.
  static constexpr std::size_t recent_window = 1024;
  static constexpr std::size_t duration_kinds = 5;
  std::array<std::vector<double>, duration_kinds> recent() const;

 private:
  std::atomic<std::int64_t> pending_{0};
  std::array<std::array<double, recent_window>, duration_kinds> recent_{};
  std::size_t recent_count_ = 0;  ///< successes recorded (the ring's next slot is count % window)
  mutable std::mutex mu_;
  v2::infer_statistics inference_;
  std::uint64_t inference_count_ = 0;
  std::uint64_t execution_count_ = 0;
  std::uint64_t last_inference_ms_ = 0;
  std::array<std::uint64_t, failure_reasons> failures_{};
  std::map<std::uint64_t, v2::batch_statistics> batches_;
  histogram first_response_{{100, 500, 2000, 5000}, std::vector<std::uint64_t>(5, 0), 0, 0};

  void add_request(std::uint64_t batch_size, const durations& d);  // under mu_
  void add_execution(std::uint64_t batch_size, std::uint64_t input_ns, std::uint64_t infer_ns,
                     std::uint64_t output_ns);  // under mu_
};

}  // namespace inferwire::server
