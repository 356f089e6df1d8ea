// The reference server's shared state and its HTTP and metrics frontends (Boost.Beast).
// I/O runs on an io_context served by --http-thread-count threads; model execution runs on a
// separate thread pool, so a slow model never stalls other connections.
#pragma once

#include "logger.hpp"
#include "options.hpp"
#include "repository.hpp"
#include "shm_registry.hpp"

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

/// Trace settings of the trace extension: global values and per-model overrides.
class trace_registry {
 public:
  trace_registry();
  v2::trace_settings get(const std::string& model) const;
  /// Applies an update (v2-protocol §7) and returns the resulting settings.
  status update(const std::string& model, const v2::trace_settings& update, v2::trace_settings& out);

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::vector<std::string>> global_;
  std::map<std::string, std::map<std::string, std::vector<std::string>>> models_;
};

struct server_state {
  explicit server_state(options o);

  options opts;
  logger log;
  model_repository repository;
  trace_registry traces;
  shm_registry shm;  ///< client shared-memory regions (released at shutdown)
  std::string metadata_json;  ///< server metadata, built once (as upstream caches it)
  /// One io_context per I/O thread: a connection lives on one of them, so I/O threads never
  /// contend for a shared scheduler. ios.front() also runs signals and shutdown.
  std::vector<std::unique_ptr<boost::asio::io_context>> ios;
  boost::asio::thread_pool execution;
  /// The io_context for the next accepted connection (round robin).
  boost::asio::io_context& next_io() noexcept {
    return *ios[next_io_.fetch_add(1, std::memory_order_relaxed) % ios.size()];
  }
  void stop_io() {
    for (auto& i : ios) i->stop();
  }
  std::atomic<bool> exiting{false};
  std::atomic<std::int64_t> in_flight{0};

  bool ready() const;

 private:
  std::atomic<std::size_t> next_io_{0};

 public:
  /// The Prometheus text of every metric.
  std::string metrics_text() const;
};

/// Listens for HTTP (v2 endpoints) or metrics connections. Returns the bound port.
class listener;
std::shared_ptr<listener> start_listener(server_state& s, const std::string& address, int port,
                                         bool metrics, status& st, int& bound_port);
void stop_listener(listener& l);

/// The extensions this server implements, in the order of v2-protocol §3.
std::vector<std::string> server_extensions();

/// Model metadata of `m` (HTTP and gRPC): its versions are the one asked for
/// (`version_given`) or every ready version; shapes get a leading -1 when the model batches.
v2::model_metadata describe_model(const server_state& s, const model_version& m, bool version_given);

/// Trace settings of `model` ("" = global) need a ready model (HTTP and gRPC).
status check_trace_model(const server_state& s, std::string_view model);

/// Applies a log-settings update with Triton's checks (the log file cannot change; the format
/// is "default" or "ISO8601").
status update_log_settings(server_state& s, const v2::log_settings& update);
/// The current log settings.
v2::log_settings current_log_settings(const server_state& s);

}  // namespace inferwire::server
