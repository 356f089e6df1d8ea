// SPDX-License-Identifier: Apache-2.0
// The reference server's shared state (options, the log, the execution pool, the model
// repository, the trace and shared-memory registries, the in-flight budget and count, the
// metrics) and the start of its HTTP and metrics listeners (http_connection.cpp). I/O runs on
// one io_context per --http-thread-count thread; model execution runs on a separate thread
// pool, so a slow model never stalls other connections.
#pragma once

#include "byte_budget.hpp"
#include "heap_trim.hpp"
#include "io_balance.hpp"
#include "logger.hpp"
#include "nvml.hpp"
#include "options.hpp"
#include "repository.hpp"
#include "shm_registry.hpp"
#include "trace.hpp"

#include <inferwire/v2/types.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace inferwire::server {

struct server_state {
  explicit server_state(options o);

  options opts;
  logger log;
  /// Executions. Declared before the repository so that it outlives the models, whose
  /// schedulers keep timers on it.
  boost::asio::thread_pool execution;
  model_repository repository;
  trace_registry traces;
  shm_registry shm;  ///< client shared-memory regions (released at shutdown)
  std::string metadata_json;  ///< server metadata, built once (as upstream caches it)
  /// Which I/O threads carry connections (--http-io-balance). Declared before `ios`: connections
  /// still open when the io_contexts are destroyed leave its counts as they go.
  std::unique_ptr<io_balance> io_threads;
  /// One io_context per I/O thread: a connection lives on one of them, so I/O threads never
  /// contend for a shared scheduler. ios.front() also runs signals and shutdown.
  std::vector<std::unique_ptr<boost::asio::io_context>> ios;
  void stop_io() {
    for (auto& i : ios) i->stop();
  }
  /// Request body bytes held by every connection together (--http-max-inflight-bytes).
  byte_budget body_budget;
  /// The largest body one request may have: max(1 GiB, 4 x --http-max-input-size).
  std::uint64_t max_body_size() const noexcept;
  /// NVML's GPU metrics (--allow-gpu-metrics), when the driver's library and a GPU are there.
  std::unique_ptr<nvml_metrics> gpu_metrics;
  std::atomic<bool> exiting{false};
  /// A model repository could not be read at start-up and --exit-on-error=false: the server
  /// serves metadata but is neither live nor ready.
  std::atomic<bool> failed_to_initialize{false};
  std::atomic<std::int64_t> in_flight{0};
  /// Returns the heap's free pages to the system once large requests are answered and the
  /// server is quiet (runs on `execution`).
  heap_trimmer heap{execution.get_executor(), in_flight};

  bool ready() const;

  /// The Prometheus text of every metric.
  std::string metrics_text() const;

 private:
  struct cpu_sample {
    double utilization = 0;
    std::uint64_t memory_total = 0;
    std::uint64_t memory_used = 0;
  };
  cpu_sample cpu_metrics() const;
  mutable std::mutex cpu_mu_;
  mutable std::uint64_t cpu_total_ = 0;  ///< /proc/stat at the previous scrape
  mutable std::uint64_t cpu_idle_ = 0;
};

/// Listens for HTTP (v2 endpoints) or metrics connections. Returns the bound port.
class listener;
std::shared_ptr<listener> start_listener(server_state& s, const std::string& address, int port,
                                         bool metrics, status& st, int& bound_port);
void stop_listener(listener& l);

/// The extensions this server implements, in the order of v2-protocol §3.
std::vector<std::string> server_extensions();

/// Start-up: every model repository named on the command line exists and is a readable
/// folder; else the first failure, as tritonserver words it (`failed to stat file <path>`).
status check_repositories(const std::vector<std::string>& roots);

/// The tables tritonserver logs at start-up: the models (Model | Version | Status) and the
/// options in effect (Option | Value).
std::string model_table(const model_repository& repo);
std::string options_table(const options& o);

}  // namespace inferwire::server
