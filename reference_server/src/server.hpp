// The reference server's shared state and its HTTP and metrics frontends (Boost.Beast).
// I/O runs on an io_context served by --http-thread-count threads; model execution runs on a
// separate thread pool, so a slow model never stalls other connections.
#pragma once

#include "logger.hpp"
#include "options.hpp"
#include "repository.hpp"

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
  std::string metadata_json;  ///< server metadata, built once (as upstream caches it)
  boost::asio::io_context io;
  boost::asio::thread_pool execution;
  std::atomic<bool> exiting{false};
  std::atomic<std::int64_t> in_flight{0};

  bool ready() const;
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

}  // namespace inferwire::server
