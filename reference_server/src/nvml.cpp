// SPDX-License-Identifier: Apache-2.0
#include "nvml.hpp"

#include <charconv>
#include <vector>

#include <dlfcn.h>

namespace inferwire::server {

// The few NVML entry points used, declared from NVML's documented C API (nvml.h is not
// needed to build): every call returns nvmlReturn_t, 0 being NVML_SUCCESS. Not in an anonymous
// namespace: nvml_metrics::api, a class of the server's namespace, holds them.
using nvml_return = int;
using nvml_device = void*;
struct nvml_utilization {
  unsigned int gpu;     ///< percent of time a kernel ran
  unsigned int memory;  ///< percent of time memory was read or written
};
struct nvml_memory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

std::string prometheus_number(double d) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, d);
  return std::string(buf, r.ptr);
}

struct nvml_metrics::api {
  void* lib = nullptr;
  nvml_return (*shutdown)() = nullptr;
  nvml_return (*utilization)(nvml_device, nvml_utilization*) = nullptr;
  nvml_return (*memory)(nvml_device, nvml_memory*) = nullptr;
  nvml_return (*power_usage)(nvml_device, unsigned int*) = nullptr;     ///< milliwatts
  nvml_return (*power_limit)(nvml_device, unsigned int*) = nullptr;     ///< milliwatts
  std::vector<std::pair<nvml_device, std::string>> devices;            ///< handle, UUID
};

nvml_metrics::nvml_metrics() {
  void* lib = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    why_not_ = "libnvidia-ml.so.1 not found";
    return;
  }
  auto a = std::make_unique<api>();
  a->lib = lib;
  auto sym = [lib](const char* name) { return ::dlsym(lib, name); };
  auto init = reinterpret_cast<nvml_return (*)()>(sym("nvmlInit_v2"));
  auto count = reinterpret_cast<nvml_return (*)(unsigned int*)>(sym("nvmlDeviceGetCount_v2"));
  auto handle = reinterpret_cast<nvml_return (*)(unsigned int, nvml_device*)>(sym("nvmlDeviceGetHandleByIndex_v2"));
  auto uuid = reinterpret_cast<nvml_return (*)(nvml_device, char*, unsigned int)>(sym("nvmlDeviceGetUUID"));
  a->shutdown = reinterpret_cast<nvml_return (*)()>(sym("nvmlShutdown"));
  a->utilization = reinterpret_cast<nvml_return (*)(nvml_device, nvml_utilization*)>(sym("nvmlDeviceGetUtilizationRates"));
  a->memory = reinterpret_cast<nvml_return (*)(nvml_device, nvml_memory*)>(sym("nvmlDeviceGetMemoryInfo"));
  a->power_usage = reinterpret_cast<nvml_return (*)(nvml_device, unsigned int*)>(sym("nvmlDeviceGetPowerUsage"));
  a->power_limit = reinterpret_cast<nvml_return (*)(nvml_device, unsigned int*)>(sym("nvmlDeviceGetEnforcedPowerLimit"));
  if (!init || !count || !handle || !uuid || !a->shutdown || !a->utilization || !a->memory || !a->power_usage ||
      !a->power_limit) {
    why_not_ = "libnvidia-ml.so.1 lacks an entry point";
    ::dlclose(lib);
    return;
  }
  if (init() != 0) {
    why_not_ = "NVML did not initialise";
    ::dlclose(lib);
    return;
  }
  unsigned int n = 0;
  if (count(&n) == 0)
    for (unsigned int i = 0; i < n; ++i) {
      nvml_device d = nullptr;
      char id[96] = {};
      if (handle(i, &d) == 0 && uuid(d, id, sizeof id) == 0) a->devices.emplace_back(d, id);
    }
  if (a->devices.empty()) {
    why_not_ = "NVML found no GPU";
    a->shutdown();
    ::dlclose(lib);
    return;
  }
  api_ = std::move(a);
}

nvml_metrics::~nvml_metrics() {
  if (!api_) return;
  api_->shutdown();
  ::dlclose(api_->lib);
}

std::string nvml_metrics::text() const {
  if (!api_) return {};
  std::string util, total, used, power, limit;
  for (const auto& [d, id] : api_->devices) {
    const std::string labels = "{gpu_uuid=\"" + id + "\"} ";
    nvml_utilization u{};
    if (api_->utilization(d, &u) == 0) util += "nv_gpu_utilization" + labels + prometheus_number(u.gpu / 100.0) + "\n";
    nvml_memory m{};
    if (api_->memory(d, &m) == 0) {
      total += "nv_gpu_memory_total_bytes" + labels + std::to_string(m.total) + "\n";
      used += "nv_gpu_memory_used_bytes" + labels + std::to_string(m.used) + "\n";
    }
    unsigned int mw = 0;
    if (api_->power_usage(d, &mw) == 0) power += "nv_gpu_power_usage" + labels + prometheus_number(mw / 1000.0) + "\n";
    if (api_->power_limit(d, &mw) == 0) limit += "nv_gpu_power_limit" + labels + prometheus_number(mw / 1000.0) + "\n";
  }
  return "# HELP nv_gpu_utilization GPU utilization rate [0.0 - 1.0)\n# TYPE nv_gpu_utilization gauge\n" + util +
         "# HELP nv_gpu_memory_total_bytes GPU total memory, in bytes\n# TYPE nv_gpu_memory_total_bytes gauge\n" +
         total + "# HELP nv_gpu_memory_used_bytes GPU used memory, in bytes\n# TYPE nv_gpu_memory_used_bytes gauge\n" +
         used + "# HELP nv_gpu_power_usage GPU power usage in watts\n# TYPE nv_gpu_power_usage gauge\n" + power +
         "# HELP nv_gpu_power_limit GPU power management limit in watts\n# TYPE nv_gpu_power_limit gauge\n" + limit;
}

}  // namespace inferwire::server
