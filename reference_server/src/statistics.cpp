// SPDX-License-Identifier: Apache-2.0
#include "statistics.hpp"

#include <algorithm>

namespace inferwire::server {

namespace {
std::uint64_t now_ms() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}
void add(v2::statistic_duration& d, std::uint64_t ns, std::uint64_t count = 1) {
  d.count += count;
  d.ns += ns;
}
}  // namespace

void version_stats::record_success(std::uint64_t batch_size, const durations& d) {
  std::lock_guard lock(mu_);
  add_request(batch_size, d);
  add_execution(batch_size, d.input_ns, d.infer_ns, d.output_ns);
}

void version_stats::record_request(std::uint64_t batch_size, const durations& d) {
  std::lock_guard lock(mu_);
  add_request(batch_size, d);
}

void version_stats::record_execution(std::uint64_t batch_size, std::uint64_t input_ns,
                                     std::uint64_t infer_ns, std::uint64_t output_ns) {
  std::lock_guard lock(mu_);
  add_execution(batch_size, input_ns, infer_ns, output_ns);
}

void histogram::observe(double v) {
  const auto at = static_cast<std::size_t>(std::lower_bound(bounds.begin(), bounds.end(), v) - bounds.begin());
  ++counts[at];
  sum += v;
  ++count;
}

void version_stats::first_response_buckets(std::vector<double> bounds) {
  std::sort(bounds.begin(), bounds.end());
  bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
  std::lock_guard lock(mu_);
  first_response_ = {bounds, std::vector<std::uint64_t>(bounds.size() + 1, 0), 0, 0};
}

histogram version_stats::first_responses() const {
  std::lock_guard lock(mu_);
  return first_response_;
}

void version_stats::add_request(std::uint64_t batch_size, const durations& d) {
  // Whole milliseconds, as Triton observes them.
  if (d.responded) first_response_.observe(static_cast<double>((d.first_response_ns ? d.first_response_ns : d.request_ns) / 1'000'000));
  add(inference_.success, d.request_ns);
  add(inference_.queue, d.queue_ns);
  add(inference_.compute_input, d.input_ns);
  add(inference_.compute_infer, d.infer_ns);
  add(inference_.compute_output, d.output_ns);
  inference_count_ += batch_size;
  last_inference_ms_ = now_ms();
  const std::size_t slot = recent_count_++ % recent_window;
  const std::uint64_t ns[duration_kinds] = {d.request_ns, d.queue_ns, d.input_ns, d.infer_ns, d.output_ns};
  for (std::size_t k = 0; k < duration_kinds; ++k) recent_[k][slot] = static_cast<double>(ns[k]) / 1000.0;
}

void version_stats::add_execution(std::uint64_t batch_size, std::uint64_t input_ns, std::uint64_t infer_ns,
                                  std::uint64_t output_ns) {
  execution_count_ += 1;
  auto& b = batches_[batch_size];
  b.batch_size = batch_size;
  add(b.compute_input, input_ns);
  add(b.compute_infer, infer_ns);
  add(b.compute_output, output_ns);
}

std::array<std::vector<double>, version_stats::duration_kinds> version_stats::recent() const {
  std::lock_guard lock(mu_);
  const std::size_t n = std::min(recent_count_, recent_window);
  std::array<std::vector<double>, duration_kinds> out;
  for (std::size_t k = 0; k < duration_kinds; ++k) out[k].assign(recent_[k].begin(), recent_[k].begin() + n);
  return out;
}

void version_stats::record_failure(std::uint64_t request_ns, failure_reason why) {
  std::lock_guard lock(mu_);
  add(inference_.fail, request_ns);
  failures_[static_cast<std::size_t>(why)] += 1;
  last_inference_ms_ = now_ms();
}

v2::model_statistics version_stats::snapshot(const std::string& name, std::int64_t version) const {
  std::lock_guard lock(mu_);
  v2::model_statistics s;
  s.name = name;
  s.version = std::to_string(version);
  s.last_inference = last_inference_ms_;
  s.inference_count = inference_count_;
  s.execution_count = execution_count_;
  s.inference_stats = inference_;
  for (const auto& kv : batches_) s.batch_stats.push_back(kv.second);
  return s;
}

std::array<std::uint64_t, failure_reasons> version_stats::failures() const {
  std::lock_guard lock(mu_);
  return failures_;
}

}  // namespace inferwire::server
