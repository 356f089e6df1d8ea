// SPDX-License-Identifier: Apache-2.0
// libtritonserver.so, part 5: custom metrics (TRITONSERVER_MetricFamily*, Metric*,
// MetricArgs*). Families live while a handle or a metric of theirs does; metrics of one family
// with the same labels share one value, as Prometheus keeps one series per label set. The
// server appends them to /metrics (custom_metrics_text).
#include "host.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>

using inferwire::triton_host::make_error;

// The handles' state, outside an anonymous namespace: the API's handle structs below hold it.
namespace inferwire::triton_host::metrics {

struct cell {
  std::mutex mu;
  double value = 0;                   // counter, gauge
  std::vector<double> bounds;         // histogram: upper bounds, ascending
  std::vector<std::uint64_t> counts;  // per bound, not cumulative
  double sum = 0;
  std::uint64_t count = 0;
};

struct family_data {
  TRITONSERVER_MetricKind kind = TRITONSERVER_METRIC_KIND_COUNTER;
  std::string name, help;
  std::map<std::string, std::weak_ptr<cell>> series;  // by label text, under the registry lock
};

}  // namespace inferwire::triton_host::metrics

namespace {

using inferwire::triton_host::metrics::cell;
using inferwire::triton_host::metrics::family_data;

std::mutex registry_mu;
std::map<std::string, std::weak_ptr<family_data>>& families() {
  static std::map<std::string, std::weak_ptr<family_data>> f;
  return f;
}

const char* kind_name(TRITONSERVER_MetricKind k) {
  switch (k) {
    case TRITONSERVER_METRIC_KIND_COUNTER: return "counter";
    case TRITONSERVER_METRIC_KIND_GAUGE: return "gauge";
    case TRITONSERVER_METRIC_KIND_HISTOGRAM: return "histogram";
  }
  return "untyped";
}

bool valid_name(const std::string& n) {
  if (n.empty() || (n[0] >= '0' && n[0] <= '9')) return false;
  return std::all_of(n.begin(), n.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == ':';
  });
}

std::string escaped(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

struct TRITONSERVER_MetricFamily {
  std::shared_ptr<family_data> data;
};
struct TRITONSERVER_MetricArgs {
  bool histogram = false;
  std::vector<double> buckets;
};
struct TRITONSERVER_Metric {
  std::shared_ptr<family_data> family;
  std::shared_ptr<cell> value;
};

namespace inferwire::triton_host {

std::string custom_metrics_text() {
  std::string out;
  std::lock_guard lock(registry_mu);
  for (const auto& [name, weak] : families()) {
    auto f = weak.lock();
    if (!f) continue;
    std::string rows;
    for (const auto& [labels, wc] : f->series) {
      auto c = wc.lock();
      if (!c) continue;
      std::lock_guard cl(c->mu);
      const std::string braces = labels.empty() ? "" : "{" + labels + "}";
      if (f->kind != TRITONSERVER_METRIC_KIND_HISTOGRAM) {
        rows += name + braces + " " + number(c->value) + "\n";
        continue;
      }
      std::uint64_t cumulative = 0;
      for (std::size_t i = 0; i <= c->bounds.size(); ++i) {
        cumulative += c->counts[i];
        const std::string le = i < c->bounds.size() ? number(c->bounds[i]) : "+Inf";
        rows += name + "_bucket{" + labels + (labels.empty() ? "" : ",") + "le=\"" + le + "\"} " +
                std::to_string(cumulative) + "\n";
      }
      rows += name + "_sum" + braces + " " + number(c->sum) + "\n";
      rows += name + "_count" + braces + " " + std::to_string(c->count) + "\n";
    }
    if (rows.empty()) continue;
    out += "# HELP " + name + " " + f->help + "\n# TYPE " + name + " " + kind_name(f->kind) + "\n" + rows;
  }
  return out;
}

}  // namespace inferwire::triton_host

extern "C" {

TRITONSERVER_Error* TRITONSERVER_MetricFamilyNew(TRITONSERVER_MetricFamily** family, const TRITONSERVER_MetricKind kind,
                                                 const char* name, const char* description) {
  if (!family || !name || !description) return make_error(TRITONSERVER_ERROR_INVALID_ARG, "metric family arguments must not be null");
  if (kind < TRITONSERVER_METRIC_KIND_COUNTER || kind > TRITONSERVER_METRIC_KIND_HISTOGRAM)
    return make_error(TRITONSERVER_ERROR_INVALID_ARG, "unknown metric kind");
  const std::string n = name;
  if (!valid_name(n)) return make_error(TRITONSERVER_ERROR_INVALID_ARG, "invalid metric family name '" + n + "'");
  std::lock_guard lock(registry_mu);
  auto& slot = families()[n];
  auto f = slot.lock();
  if (f && f->kind != kind)
    return make_error(TRITONSERVER_ERROR_INVALID_ARG, "metric family '" + n + "' already exists as a " + kind_name(f->kind));
  if (!f) {
    f = std::make_shared<family_data>();
    f->kind = kind;
    f->name = n;
    for (char c : std::string(description)) f->help += c == '\n' ? ' ' : c;
    slot = f;
  }
  *family = new TRITONSERVER_MetricFamily{std::move(f)};
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_MetricFamilyDelete(TRITONSERVER_MetricFamily* family) {
  std::lock_guard lock(registry_mu);  // the family's data may go here, under the registry lock
  delete family;
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_GetMetricFamilyKind(TRITONSERVER_MetricFamily* family, TRITONSERVER_MetricKind* kind) {
  if (!family || !kind) return make_error(TRITONSERVER_ERROR_INVALID_ARG, "arguments must not be null");
  *kind = family->data->kind;
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_MetricArgsNew(TRITONSERVER_MetricArgs** args) {
  if (!args) return make_error(TRITONSERVER_ERROR_INVALID_ARG, "args must not be null");
  *args = new TRITONSERVER_MetricArgs{};
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_MetricArgsSetHistogram(TRITONSERVER_MetricArgs* args, const double* buckets,
                                                        const uint64_t buckets_count) {
  if (!args || (!buckets && buckets_count)) return make_error(TRITONSERVER_ERROR_INVALID_ARG, "arguments must not be null");
  std::vector<double> b(buckets, buckets + buckets_count);
  if (!std::is_sorted(b.begin(), b.end()) || std::adjacent_find(b.begin(), b.end()) != b.end())
    return make_error(TRITONSERVER_ERROR_INVALID_ARG, "histogram buckets must be strictly increasing");
  args->histogram = true;
  args->buckets = std::move(b);
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_MetricArgsDelete(TRITONSERVER_MetricArgs* args) {
  delete args;
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_MetricNewWithArgs(TRITONSERVER_Metric** metric, TRITONSERVER_MetricFamily* family,
                                                   const TRITONSERVER_Parameter** labels, const uint64_t label_count,
                                                   const TRITONSERVER_MetricArgs* args) {
  if (!metric || !family || (!labels && label_count)) return make_error(TRITONSERVER_ERROR_INVALID_ARG, "arguments must not be null");
  const auto& f = family->data;
  const bool histogram = f->kind == TRITONSERVER_METRIC_KIND_HISTOGRAM;
  if (histogram && (!args || !args->histogram))
    return make_error(TRITONSERVER_ERROR_INVALID_ARG, "a histogram metric needs its buckets (TRITONSERVER_MetricArgsSetHistogram)");
  if (!histogram && args && args->histogram)
    return make_error(TRITONSERVER_ERROR_INVALID_ARG, "histogram buckets given for a " + std::string(kind_name(f->kind)));
  std::vector<std::pair<std::string, std::string>> pairs;
  for (uint64_t i = 0; i < label_count; ++i) {
    const TRITONSERVER_Parameter* p = labels[i];
    if (!p || p->type != TRITONSERVER_PARAMETER_STRING || !valid_name(p->name))
      return make_error(TRITONSERVER_ERROR_INVALID_ARG, "metric labels must be string parameters with valid names");
    pairs.emplace_back(p->name, p->text);
  }
  std::sort(pairs.begin(), pairs.end());
  std::string text;
  for (const auto& [k, v] : pairs) text += (text.empty() ? "" : ",") + k + "=\"" + escaped(v) + "\"";
  std::lock_guard lock(registry_mu);
  auto& slot = f->series[text];
  auto c = slot.lock();
  if (!c) {
    c = std::make_shared<cell>();
    if (histogram) {
      c->bounds = args->buckets;
      c->counts.assign(c->bounds.size() + 1, 0);
    }
    slot = c;
  }
  *metric = new TRITONSERVER_Metric{f, std::move(c)};
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_MetricNew(TRITONSERVER_Metric** metric, TRITONSERVER_MetricFamily* family,
                                           const TRITONSERVER_Parameter** labels, const uint64_t label_count) {
  return TRITONSERVER_MetricNewWithArgs(metric, family, labels, label_count, nullptr);
}

TRITONSERVER_Error* TRITONSERVER_MetricDelete(TRITONSERVER_Metric* metric) {
  std::lock_guard lock(registry_mu);
  delete metric;
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_MetricValue(TRITONSERVER_Metric* metric, double* value) {
  if (!metric || !value) return make_error(TRITONSERVER_ERROR_INVALID_ARG, "arguments must not be null");
  if (metric->family->kind == TRITONSERVER_METRIC_KIND_HISTOGRAM)
    return make_error(TRITONSERVER_ERROR_UNSUPPORTED, "a histogram has no single value");
  std::lock_guard lock(metric->value->mu);
  *value = metric->value->value;
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_MetricIncrement(TRITONSERVER_Metric* metric, double value) {
  if (!metric) return make_error(TRITONSERVER_ERROR_INVALID_ARG, "metric must not be null");
  const auto kind = metric->family->kind;
  if (kind == TRITONSERVER_METRIC_KIND_HISTOGRAM)
    return make_error(TRITONSERVER_ERROR_UNSUPPORTED, "a histogram is observed, not incremented");
  if (kind == TRITONSERVER_METRIC_KIND_COUNTER && value < 0)
    return make_error(TRITONSERVER_ERROR_INVALID_ARG, "a counter cannot be decremented");
  std::lock_guard lock(metric->value->mu);
  metric->value->value += value;
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_MetricSet(TRITONSERVER_Metric* metric, double value) {
  if (!metric) return make_error(TRITONSERVER_ERROR_INVALID_ARG, "metric must not be null");
  if (metric->family->kind != TRITONSERVER_METRIC_KIND_GAUGE)
    return make_error(TRITONSERVER_ERROR_UNSUPPORTED, "only a gauge can be set");
  std::lock_guard lock(metric->value->mu);
  metric->value->value = value;
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_MetricObserve(TRITONSERVER_Metric* metric, double value) {
  if (!metric) return make_error(TRITONSERVER_ERROR_INVALID_ARG, "metric must not be null");
  if (metric->family->kind != TRITONSERVER_METRIC_KIND_HISTOGRAM)
    return make_error(TRITONSERVER_ERROR_UNSUPPORTED, "only a histogram observes values");
  cell& c = *metric->value;
  std::lock_guard lock(c.mu);
  const auto at = static_cast<std::size_t>(std::lower_bound(c.bounds.begin(), c.bounds.end(), value) - c.bounds.begin());
  ++c.counts[at];
  c.sum += value;
  ++c.count;
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_GetMetricKind(TRITONSERVER_Metric* metric, TRITONSERVER_MetricKind* kind) {
  if (!metric || !kind) return make_error(TRITONSERVER_ERROR_INVALID_ARG, "arguments must not be null");
  *kind = metric->family->kind;
  return nullptr;
}

}  // extern "C"
