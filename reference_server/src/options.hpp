// SPDX-License-Identifier: Apache-2.0
// inferwire-server's command line: tritonserver's flag names where the feature exists.
#pragma once

#include "restricted.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace inferwire::server {

struct options {
  std::vector<std::string> model_repositories;
  std::string model_control_mode = "none";
  std::vector<std::string> load_models;
  unsigned repository_poll_secs = 15;
  std::string http_address = "0.0.0.0";
  int http_port = 8000;
  int grpc_port = 8001;
  int metrics_port = 8002;
  bool allow_http = true;
  bool allow_grpc = true;
  bool allow_metrics = true;
  bool allow_client_shm = false;
  /// The Unix socket for CUDA VMM regions (docs/shared-memory.md); open only with
  /// allow_client_shm; empty: none.
  std::string cuda_vmm_socket = "/tmp/inferwire-cuda-vmm.sock";
  std::uint64_t http_max_input_size = std::uint64_t{1} << 26;
  /// Request body bytes all HTTP connections may hold at once (0: max(2 GiB, 2 x the largest
  /// body, max(1 GiB, 4 x http_max_input_size))).
  std::uint64_t http_max_inflight_bytes = 0;
  unsigned http_thread_count = 0;       ///< 0: one per core, at least 2
  std::string http_io_balance = "adaptive";  ///< or "spread" (io_balance.hpp)
  unsigned grpc_thread_count = 0;       ///< 0: one per 8 cores, at least 1
  unsigned execution_thread_count = 0;  ///< 0: max(4, 2 per core)
  bool strict_readiness = true;
  bool exit_on_error = true;
  unsigned exit_timeout_secs = 30;
  std::string server_id = "triton";
  bool log_info = true;
  bool log_warning = true;
  bool log_error = true;
  unsigned log_verbose = 0;
  std::string log_format = "default";
  std::string log_file;

  bool reuse_http_port = false;
  std::string metrics_address;  ///< empty: the HTTP address
  unsigned metrics_interval_ms = 2000;
  bool allow_cpu_metrics = true;
  bool allow_gpu_metrics = true;
  bool summary_latencies = false;  ///< --metrics-config summary_latencies
  bool counter_latencies = true;   ///< --metrics-config counter_latencies
  bool histogram_latencies = false;  ///< --metrics-config histogram_latencies
  std::vector<double> summary_quantiles{0.5, 0.9, 0.95, 0.99};
  unsigned model_load_thread_count = 4;
  bool strict_model_config = false;

  // gRPC (tritonserver's names; keepalive values unset keep inferwire's permissive defaults).
  std::string grpc_address = "0.0.0.0";
  bool reuse_grpc_port = false;
  bool grpc_use_ssl = false;
  bool grpc_use_ssl_mutual = false;
  std::string grpc_server_cert;
  std::string grpc_server_key;
  std::string grpc_root_cert;
  std::string grpc_infer_response_compression_level = "none";
  /// gzip and deflate on gRPC (both ways). gRPC decompresses a message before the server sees
  /// it, where no in-flight budget counts it: false shuts that door to untrusted clients.
  bool grpc_compression = true;
  std::optional<int> grpc_keepalive_time_ms;
  std::optional<int> grpc_keepalive_timeout_ms;
  std::optional<bool> grpc_keepalive_permit_without_calls;
  std::optional<int> grpc_http2_max_pings_without_data;
  std::optional<int> grpc_http2_min_recv_ping_interval_without_data_ms;
  std::optional<int> grpc_http2_max_ping_strikes;
  std::optional<int> grpc_max_connection_age_ms;
  std::optional<int> grpc_max_connection_age_grace_ms;
  /// HTTP/2 streams (calls) one gRPC connection may have open at once (ours). Each costs the
  /// server 12-16 KiB for the few bytes of its HEADERS frame, so unbounded a connection could
  /// hold gigabytes; clients queue calls beyond it.
  unsigned grpc_max_concurrent_streams = 256;
  /// Seconds a client may make no progress before it is closed: an idle or stalled HTTP
  /// connection, a reply it does not read, a gRPC stream whose responses wait for it.
  unsigned stall_timeout_secs = 120;

  /// Triton backend libraries (docs/backends.md): where they are, their --backend-config
  /// settings as (backend, setting, value) in order (backend "" for global settings), and
  /// whether a model loaded from a request's `file:` parameters may bring code (a library, a
  /// Python file) that a backend would run.
  std::string backend_directory = "/opt/tritonserver/backends";
  std::vector<std::pair<std::string, std::pair<std::string, std::string>>> backend_config;
  bool allow_model_file_code = false;

  /// --trace-config settings of Triton's mode, as (setting, value), in order.
  std::vector<std::pair<std::string, std::string>> trace_config;

  restricted_apis http_restricted;  ///< --http-restricted-api
  restricted_apis grpc_restricted;  ///< --grpc-restricted-protocol

  /// Flags given that inferwire-server accepts and validates but that have no effect here,
  /// each as "--flag: why" (logged at start-up).
  std::vector<std::string> inert;
};

/// Parses argv. Returns -1 to go on, or the exit status (0 after --help/--version, 2 on a bad
/// command line, with the message already printed).
int parse_options(int argc, char** argv, options& out);

}  // namespace inferwire::server
