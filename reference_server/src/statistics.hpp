// The counters of one model version, read by the statistics extension (v2-protocol §8) and by
// the Prometheus metrics alike.
#pragma once

#include <inferwire/v2/types.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace inferwire::server {

using clock = std::chrono::steady_clock;

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
  };
  void record_success(std::uint64_t batch_size, const durations& d);
  /// `backend` separates execution failures from rejected requests (metrics label).
  void record_failure(std::uint64_t request_ns, bool backend);

  v2::model_statistics snapshot(const std::string& name, std::int64_t version) const;
  std::uint64_t failures_rejected() const;
  std::uint64_t failures_backend() const;

 private:
  mutable std::mutex mu_;
  v2::infer_statistics inference_;
  std::uint64_t inference_count_ = 0;
  std::uint64_t execution_count_ = 0;
  std::uint64_t last_inference_ms_ = 0;
  std::uint64_t fail_rejected_ = 0;
  std::uint64_t fail_backend_ = 0;
  std::map<std::uint64_t, v2::batch_statistics> batches_;
};

}  // namespace inferwire::server
