#include "options.hpp"

#include <inferwire/version.hpp>

#include <boost/program_options.hpp>

#include <algorithm>
#include <iostream>

namespace inferwire::server {

namespace po = boost::program_options;

int parse_options(int argc, char** argv, options& o) {
  po::options_description desc("inferwire-server options");
  // Booleans take an optional value: `--allow-client-shm` and `--allow-client-shm=true` agree.
  auto flag = [](bool* p) { return po::value<bool>(p)->default_value(*p)->implicit_value(true); };
  desc.add_options()
      ("help", "print this help and exit")
      ("version", "print the version and exit")
      ("model-repository", po::value(&o.model_repositories)->composing(),
       "model repository path (repeatable)")
      ("model-store", po::value(&o.model_repositories)->composing(), "alias of --model-repository")
      ("model-control-mode", po::value(&o.model_control_mode)->default_value(o.model_control_mode),
       "none, poll or explicit")
      ("load-model", po::value(&o.load_models)->composing(),
       "model to load at startup in explicit mode (repeatable; * for all)")
      ("repository-poll-secs",
       po::value(&o.repository_poll_secs)->default_value(o.repository_poll_secs),
       "poll mode: seconds between repository scans")
      ("http-address", po::value(&o.http_address)->default_value(o.http_address),
       "address the HTTP and metrics endpoints bind to")
      ("http-port", po::value(&o.http_port)->default_value(o.http_port),
       "HTTP port (0: any free port, reported in the log)")
      ("grpc-port", po::value(&o.grpc_port)->default_value(o.grpc_port), "gRPC port")
      ("metrics-port", po::value(&o.metrics_port)->default_value(o.metrics_port),
       "Prometheus metrics port (0: any free port)")
      ("allow-http", flag(&o.allow_http), "serve HTTP/REST")
      ("allow-grpc", flag(&o.allow_grpc), "serve gRPC")
      ("allow-metrics", flag(&o.allow_metrics), "serve Prometheus metrics")
      ("allow-client-shm", flag(&o.allow_client_shm),
       "allow clients to register shared-memory regions")
      ("http-max-input-size", po::value(&o.http_max_input_size)->default_value(o.http_max_input_size),
       "largest JSON header, JSON tensor, raw input or decompressed body, in bytes")
      ("http-max-inflight-bytes",
       po::value(&o.http_max_inflight_bytes)->default_value(o.http_max_inflight_bytes),
       "request body bytes all HTTP connections may hold at once; past it a request is refused "
       "with 413 (0: max(2 GiB, twice the largest body))")
      ("http-thread-count", po::value(&o.http_thread_count)->default_value(o.http_thread_count),
       "HTTP I/O threads (0: one per core, at least 2)")
      ("execution-thread-count",
       po::value(&o.execution_thread_count)->default_value(o.execution_thread_count),
       "model execution threads, separate from I/O (0: max(4, 2 per core))")
      ("strict-readiness", flag(&o.strict_readiness),
       "ready only when every model is ready")
      ("exit-on-error", flag(&o.exit_on_error), "exit when a model fails to load at startup")
      ("exit-timeout-secs", po::value(&o.exit_timeout_secs)->default_value(o.exit_timeout_secs),
       "how long shutdown waits for in-flight requests")
      ("id", po::value(&o.server_id)->default_value(o.server_id),
       "server name reported by server metadata")
      ("log-info", flag(&o.log_info), "log info messages")
      ("log-warning", flag(&o.log_warning), "log warnings")
      ("log-error", flag(&o.log_error), "log errors")
      ("log-verbose", po::value(&o.log_verbose)->default_value(o.log_verbose), "verbose level")
      ("log-format", po::value(&o.log_format)->default_value(o.log_format), "default or ISO8601")
      ("log-file", po::value(&o.log_file), "write the log to this file instead of stderr");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    po::notify(vm);
  } catch (const std::exception& e) {
    std::cerr << "inferwire-server: " << e.what() << "\n\n" << desc << "\n";
    return 2;
  }
  if (vm.count("help")) {
    std::cout << "Usage: inferwire-server --model-repository <path> [options]\n\n" << desc << "\n";
    return 0;
  }
  if (vm.count("version")) {
    std::cout << "inferwire-server " << INFERWIRE_VERSION_STRING << "\n";
    return 0;
  }
  auto bad = [](const std::string& m) {
    std::cerr << "Error: " << m << "\n";
    return 2;
  };
  if (o.model_repositories.empty()) return bad("--model-repository must be specified");
  if (o.http_max_input_size == 0) return bad("--http-max-input-size must be greater than 0.");
  if (o.model_control_mode != "none" && o.model_control_mode != "poll" &&
      o.model_control_mode != "explicit")
    return bad("unexpected value for --model-control-mode: " + o.model_control_mode);
  if (std::find(o.load_models.begin(), o.load_models.end(), "*") != o.load_models.end() &&
      o.load_models.size() > 1)
    return bad("Wildcard model name '*' must be the ONLY startup model if specified at all.");
  if (o.model_control_mode == "poll" && o.repository_poll_secs == 0)
    return bad("--repository-poll-secs must be greater than 0 in poll mode");
  if (o.log_format != "default" && o.log_format != "ISO8601")
    return bad("invalid argument for --log-format, got: " + o.log_format);
  for (int p : {o.http_port, o.grpc_port, o.metrics_port})
    if (p < 0 || p > 65535) return bad("port out of range: " + std::to_string(p));
  return -1;
}

}  // namespace inferwire::server
