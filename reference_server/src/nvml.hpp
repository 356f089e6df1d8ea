// SPDX-License-Identifier: Apache-2.0
// GPU metrics from NVML, which is loaded at run time (libnvidia-ml.so.1 comes with the
// driver): without the library, its initialisation or a GPU there are no GPU metrics and
// nothing else changes. The server never links against NVML.
#pragma once

#include <memory>
#include <string>

namespace inferwire::server {

/// A number as Prometheus clients print it: the shortest text that reads back the same.
std::string prometheus_number(double d);

class nvml_metrics {
 public:
  nvml_metrics();
  ~nvml_metrics();
  nvml_metrics(const nvml_metrics&) = delete;
  nvml_metrics& operator=(const nvml_metrics&) = delete;

  /// Whether NVML loaded and found at least one GPU; else why not.
  bool available() const noexcept { return api_ != nullptr; }
  const std::string& why_not() const noexcept { return why_not_; }

  /// Triton's GPU families (label gpu_uuid): nv_gpu_utilization (0 to 1),
  /// nv_gpu_memory_total_bytes, nv_gpu_memory_used_bytes, nv_gpu_power_usage and
  /// nv_gpu_power_limit (watts). Empty when not available.
  std::string text() const;

 private:
  struct api;
  std::unique_ptr<api> api_;
  std::string why_not_;
};

}  // namespace inferwire::server
