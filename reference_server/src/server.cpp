// SPDX-License-Identifier: Apache-2.0
#include "server.hpp"
#include "inference.hpp"
#include "gpu.hpp"
#include "triton_backend.hpp"
#include "host.hpp"
#include "proc_stat.hpp"
#include "ready_set.hpp"

#include <inferwire/version.hpp>
#include <inferwire/v2/json.hpp>

#include <boost/json/serialize.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <charconv>
#include <thread>

namespace inferwire::server {

std::vector<std::string> server_extensions() {
  // v2-protocol §3 order, restricted to what this server implements today.
  return {"classification",      "sequence",           "model_repository",
          "model_repository(unload_dependents)", "schedule_policy", "model_configuration", "system_shared_memory",
          "cuda_shared_memory",  "binary_tensor_data",
          "parameters",          "statistics",         "trace",
          "logging",
          // Ours: CUDA regions registered from VMM chunks (docs/shared-memory.md).
          "inferwire_cuda_vmm_shared_memory"};
}

namespace {
unsigned default_threads(unsigned requested, unsigned per_core, unsigned minimum) {
  if (requested) return requested;
  unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  return std::max(minimum, hw * per_core);
}
}  // namespace

server_state::server_state(options o)
    : opts(std::move(o)),
      execution(default_threads(opts.execution_thread_count, 2, 4)),
      repository(
          std::vector<std::filesystem::path>(opts.model_repositories.begin(),
                                             opts.model_repositories.end()),
          opts.model_control_mode == "explicit" ? control_mode::explicit_
          : opts.model_control_mode == "poll"   ? control_mode::poll
                                                : control_mode::none,
          [this](bool error, const std::string& m) { error ? log.log_error(m) : log.log_info(m); },
          execution_context{&execution, &inference_runner()}),
      shm(opts.allow_client_shm),
      body_budget(opts.http_max_inflight_bytes ? opts.http_max_inflight_bytes
                                               : std::max<std::uint64_t>(std::uint64_t{2} << 30,
                                                                         2 * max_body_size())) {
  for (unsigned i = 0, n = default_threads(opts.http_thread_count, 1, 2); i < n; ++i) {
    ios.push_back(std::make_unique<boost::asio::io_context>(1));
    ready_set::of(*ios.back());  // its descriptor from the start, not from the first connection
  }
  io_threads = std::make_unique<io_balance>(ios.size(), opts.http_io_balance == "adaptive");
  log.info = opts.log_info;
  log.warning = opts.log_warning;
  log.error = opts.log_error;
  log.verbose = opts.log_verbose;
  log.format = opts.log_format == "ISO8601" ? log_format::iso8601 : log_format::standard;
  enable_backend_libraries({opts.backend_directory, opts.backend_config, opts.allow_model_file_code}, log);
  v2::server_metadata md{opts.server_id, INFERWIRE_VERSION_STRING, server_extensions()};
  metadata_json = boost::json::serialize(boost::json::value_from(md));
}

std::uint64_t server_state::max_body_size() const noexcept {
  return std::max<std::uint64_t>(std::uint64_t{1} << 30, 4 * opts.http_max_input_size);
}

status check_repositories(const std::vector<std::string>& roots) {
  for (const auto& root : roots) {
    std::error_code ec;
    const auto st = std::filesystem::status(root, ec);
    if (ec || !std::filesystem::exists(st)) return {errc::internal, "failed to stat file " + root};
    if (!std::filesystem::is_directory(st)) return {errc::internal, "failed to open directory " + root + ": not a directory"};
    std::filesystem::directory_iterator it(root, ec);
    if (ec) return {errc::internal, "failed to open directory " + root + ": " + ec.message()};
  }
  return {};
}

namespace {

// A text table as tritonserver draws them: +---+ rules, | cells |, columns as wide as their
// widest cell.
std::string text_table(const std::vector<std::string>& head, const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width(head.size());
  for (std::size_t c = 0; c < head.size(); ++c) width[c] = head[c].size();
  for (const auto& r : rows)
    for (std::size_t c = 0; c < r.size() && c < width.size(); ++c) width[c] = std::max(width[c], r[c].size());
  std::string rule = "+";
  for (auto w : width) rule += std::string(w + 2, '-') + "+";
  rule += "\n";
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out = "|";
    for (std::size_t c = 0; c < width.size(); ++c) {
      const std::string cell = c < cells.size() ? cells[c] : "";
      out += " " + cell + std::string(width[c] - cell.size(), ' ') + " |";
    }
    return out + "\n";
  };
  std::string out = "\n" + rule + line(head) + rule;
  for (const auto& r : rows) out += line(r);
  return out + rule;
}

}  // namespace

std::string model_table(const model_repository& repo) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& e : repo.index(false)) {
    if (e.version.empty() && e.state.empty()) continue;
    std::string status = e.state;
    if (status != "READY" && !e.reason.empty()) status += ": " + e.reason;
    rows.push_back({e.name, e.version, status});
  }
  return text_table({"Model", "Version", "Status"}, rows);
}

std::string options_table(const options& o) {
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"server_id", o.server_id});
  rows.push_back({"server_version", INFERWIRE_VERSION_STRING});
  std::string extensions;
  for (const auto& e : server_extensions()) extensions += (extensions.empty() ? "" : " ") + e;
  rows.push_back({"server_extensions", extensions});
  for (std::size_t i = 0; i < o.model_repositories.size(); ++i)
    rows.push_back({"model_repository_path[" + std::to_string(i) + "]", o.model_repositories[i]});
  std::string mode = o.model_control_mode;
  for (auto& ch : mode) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  rows.push_back({"model_control_mode", "MODE_" + mode});
  for (std::size_t i = 0; i < o.load_models.size(); ++i)
    rows.push_back({"startup_models_" + std::to_string(i), o.load_models[i]});
  rows.push_back({"strict_model_config", o.strict_model_config ? "1" : "0"});
  rows.push_back({"strict_readiness", o.strict_readiness ? "1" : "0"});
  rows.push_back({"exit_timeout", std::to_string(o.exit_timeout_secs)});
  return text_table({"Option", "Value"}, rows);
}

bool server_state::ready() const {
  if (exiting || failed_to_initialize) return false;
  return !opts.strict_readiness || repository.all_ready();
}


// --- metrics -------------------------------------------------------------------------------

// CPU utilisation since the previous scrape (/proc/stat: time not idle over all time), and
// memory in use (/proc/meminfo: MemTotal - MemAvailable).
server_state::cpu_sample server_state::cpu_metrics() const {
  cpu_sample out;
  if (cpu_ticks t; read_cpu_ticks(t)) {
    std::lock_guard lock(cpu_mu_);
    const std::uint64_t dt = t.total - cpu_total_, didle = t.idle - cpu_idle_;
    out.utilization = dt > 0 ? static_cast<double>(dt - std::min(didle, dt)) / static_cast<double>(dt) : 0.0;
    cpu_total_ = t.total;
    cpu_idle_ = t.idle;
  }
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  std::uint64_t kb = 0, total_kb = 0, available_kb = 0;
  std::string unit;
  while (meminfo >> key >> kb) {
    std::getline(meminfo, unit);
    if (key == "MemTotal:") total_kb = kb;
    else if (key == "MemAvailable:") available_kb = kb;
  }
  out.memory_total = total_kb * 1024;
  out.memory_used = (total_kb - std::min(available_kb, total_kb)) * 1024;
  return out;
}

std::string server_state::metrics_text() const {
  struct row {
    std::string model, version, labels;
    v2::model_statistics s;
    std::array<std::uint64_t, failure_reasons> failures{};
    histogram first_responses;
    std::int64_t pending = 0;
    std::array<std::vector<double>, version_stats::duration_kinds> recent;
  };
  std::vector<row> rows;
  for (const auto& v : repository.ready_versions()) {
    row r;
    r.s = v->stats.snapshot(v->name, v->version);
    r.model = "model=\"" + v->name + "\"";
    r.version = "version=\"" + std::to_string(v->version) + "\"";
    r.labels = r.model + "," + r.version;
    r.failures = v->stats.failures();
    if (opts.histogram_latencies) r.first_responses = v->stats.first_responses();
    r.pending = std::max<std::int64_t>(0, v->stats.pending());
    if (opts.summary_latencies) r.recent = v->stats.recent();
    rows.push_back(std::move(r));
  }
  std::string out;
  auto family = [&](std::string_view name, std::string_view type, std::string_view help,
                    auto value) {
    out.append("# HELP ").append(name).append(" ").append(help).append("\n");
    out.append("# TYPE ").append(name).append(" ").append(type).append("\n");
    for (const auto& r : rows) {
      out.append(name).append("{").append(r.labels).append("} ");
      out.append(std::to_string(value(r))).append("\n");
    }
  };
  out.append("# HELP nv_inference_pending_request_count Instantaneous number of pending requests awaiting "
             "execution per-model.\n# TYPE nv_inference_pending_request_count gauge\n");
  for (const auto& r : rows) out.append("nv_inference_pending_request_count{" + r.labels + "} " + std::to_string(r.pending) + "\n");
  family("nv_inference_request_success", "counter",
         "Number of successful inference requests, all batch sizes",
         [](const row& r) { return r.s.inference_stats.success.count; });
  out.append("# HELP nv_inference_request_failure Number of failed inference requests, all batch sizes\n"
             "# TYPE nv_inference_request_failure counter\n");
  // Every reason of every model, in Triton's order.
  for (const auto& r : rows)
    for (auto why : {failure_reason::other, failure_reason::canceled, failure_reason::backend, failure_reason::rejected})
      out.append("nv_inference_request_failure{" + r.model + ",reason=\"" + failure_label(why) + "\"," + r.version +
                 "} " + std::to_string(r.failures[static_cast<std::size_t>(why)]) + "\n");
  family("nv_inference_count", "counter",
         "Number of inferences performed (does not include cached requests)",
         [](const row& r) { return r.s.inference_count; });
  family("nv_inference_exec_count", "counter",
         "Number of model executions performed (does not include cached requests)",
         [](const row& r) { return r.s.execution_count; });
  if (opts.counter_latencies) {
  family("nv_inference_request_duration_us", "counter",
         "Cumulative inference request duration in microseconds (includes cached requests)",
         [](const row& r) { return r.s.inference_stats.success.ns / 1000; });
  family("nv_inference_queue_duration_us", "counter",
         "Cumulative inference queuing duration in microseconds (includes cached requests)",
         [](const row& r) { return r.s.inference_stats.queue.ns / 1000; });
  family("nv_inference_compute_input_duration_us", "counter",
         "Cumulative compute input duration in microseconds (does not include cached requests)",
         [](const row& r) { return r.s.inference_stats.compute_input.ns / 1000; });
  family("nv_inference_compute_infer_duration_us", "counter",
         "Cumulative compute inference duration in microseconds (does not include cached requests)",
         [](const row& r) { return r.s.inference_stats.compute_infer.ns / 1000; });
  family("nv_inference_compute_output_duration_us", "counter",
         "Cumulative inference compute output duration in microseconds (does not include cached requests)",
         [](const row& r) { return r.s.inference_stats.compute_output.ns / 1000; });
  }
  if (opts.summary_latencies) {
    // Summaries over the most recent requests of each version (version_stats::recent_window);
    // _count and _sum cover every request since the version loaded.
    const std::pair<const char*, const char*> kinds[] = {
        {"nv_inference_request_summary_us", "Summary of inference request duration in microseconds (includes cached requests)"},
        {"nv_inference_queue_summary_us", "Summary of inference queuing duration in microseconds (includes cached requests)"},
        {"nv_inference_compute_input_summary_us", "Summary of compute input duration in microseconds (does not include cached requests)"},
        {"nv_inference_compute_infer_summary_us", "Summary of compute inference duration in microseconds (does not include cached requests)"},
        {"nv_inference_compute_output_summary_us", "Summary of inference compute output duration in microseconds (does not include cached requests)"}};
    for (std::size_t k = 0; k < version_stats::duration_kinds; ++k) {
      const auto [name, help] = kinds[k];
      out.append("# HELP ").append(name).append(" ").append(help).append("\n# TYPE ").append(name).append(" summary\n");
      for (auto& r : rows) {
        const auto& d = k == 0 ? r.s.inference_stats.success
                        : k == 1 ? r.s.inference_stats.queue
                        : k == 2 ? r.s.inference_stats.compute_input
                        : k == 3 ? r.s.inference_stats.compute_infer
                                 : r.s.inference_stats.compute_output;
        out.append(name).append("_count{").append(r.labels).append("} ").append(std::to_string(d.count)).append("\n");
        out.append(name).append("_sum{").append(r.labels).append("} ").append(std::to_string(d.ns / 1000)).append("\n");
        auto& values = r.recent[k];
        std::sort(values.begin(), values.end());
        for (double q : opts.summary_quantiles) {
          std::string v = "NaN";
          if (!values.empty()) v = prometheus_number(values[static_cast<std::size_t>(q * static_cast<double>(values.size() - 1))]);
          out.append(name).append("{").append(r.labels).append(",quantile=\"").append(prometheus_number(q)).append("\"} ").append(v).append("\n");
        }
      }
    }
  }
  if (opts.histogram_latencies) {
    // Per version: received -> first response, in whole milliseconds (Triton's buckets by
    // default, a model's model_metrics otherwise).
    const std::string name = "nv_inference_first_response_histogram_ms";
    out.append("# HELP " + name + " Duration from request to first response in milliseconds\n# TYPE " + name +
               " histogram\n");
    for (const auto& r : rows) {
      const histogram& h = r.first_responses;
      out.append(name + "_count{" + r.labels + "} " + std::to_string(h.count) + "\n");
      out.append(name + "_sum{" + r.labels + "} " + prometheus_number(h.sum) + "\n");
      std::uint64_t cumulative = 0;
      for (std::size_t i = 0; i < h.counts.size(); ++i) {
        cumulative += h.counts[i];
        const std::string le = i < h.bounds.size() ? prometheus_number(h.bounds[i]) : "+Inf";
        out.append(name + "_bucket{" + r.labels + ",le=\"" + le + "\"} " + std::to_string(cumulative) + "\n");
      }
    }
  }
  if (opts.allow_cpu_metrics) {
    const cpu_sample c = cpu_metrics();
    out.append("# HELP nv_cpu_utilization CPU utilization rate [0.0 - 1.0]\n# TYPE nv_cpu_utilization gauge\n"
               "nv_cpu_utilization " + prometheus_number(c.utilization) + "\n");
    out.append("# HELP nv_cpu_memory_total_bytes CPU total memory (RAM), in bytes\n# TYPE nv_cpu_memory_total_bytes gauge\n"
               "nv_cpu_memory_total_bytes " + std::to_string(c.memory_total) + "\n");
    out.append("# HELP nv_cpu_memory_used_bytes CPU used memory (RAM), in bytes\n# TYPE nv_cpu_memory_used_bytes gauge\n"
               "nv_cpu_memory_used_bytes " + std::to_string(c.memory_used) + "\n");
  }
  if (gpu_metrics) out.append(gpu_metrics->text());
  // Our own: copies between host and GPU memory made to stage tensors (0 on the zero-copy path).
  out.append("# HELP inferwire_gpu_host_copies Copies between host and GPU memory made to stage tensors\n"
             "# TYPE inferwire_gpu_host_copies counter\n"
             "inferwire_gpu_host_copies " + std::to_string(gpu_host_copies()) + "\n");
  // Which HTTP I/O threads carry connections (io_balance.hpp).
  out.append("# HELP inferwire_http_io_threads_active HTTP I/O threads that new connections go to\n"
             "# TYPE inferwire_http_io_threads_active gauge\n"
             "inferwire_http_io_threads_active " + std::to_string(io_threads->active()) + "\n");
  out.append("# HELP inferwire_http_connection_moves Connections moved to another HTTP I/O thread between two requests\n"
             "# TYPE inferwire_http_connection_moves counter\n"
             "inferwire_http_connection_moves " + std::to_string(io_threads->moves()) + "\n");
  // Families backend libraries created (TRITONSERVER_MetricFamilyNew).
  out.append(triton_host::custom_metrics_text());
  return out;
}

}  // namespace inferwire::server
