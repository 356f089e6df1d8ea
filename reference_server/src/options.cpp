#include "options.hpp"

#include <inferwire/version.hpp>

#include <boost/program_options.hpp>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <iostream>
#include <limits>
#include <string>

namespace inferwire::server {

namespace po = boost::program_options;

namespace {

// A numeric flag read as text and converted strictly: no sign for unsigned values (the
// default conversion would turn -1 into 2^64 - 1), nothing after the digits, and a range.
template <class T>
po::typed_value<std::string>* number(T* target, const char* name, T min = std::numeric_limits<T>::min(),
                                     T max = std::numeric_limits<T>::max()) {
  return po::value<std::string>()->default_value(std::to_string(*target))->notifier(
      [target, name, min, max](const std::string& text) {
        T v{};
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (ec != std::errc{} || end != text.data() + text.size() || v < min || v > max)
          throw po::error("invalid value '" + text + "' for --" + name + ": expected an integer from " +
                          std::to_string(min) + " to " + std::to_string(max));
        *target = v;
      });
}

}  // namespace

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
       number(&o.repository_poll_secs, "repository-poll-secs"),
       "poll mode: seconds between repository scans")
      ("http-address", po::value(&o.http_address)->default_value(o.http_address),
       "address the HTTP and metrics endpoints bind to")
      ("http-port", number(&o.http_port, "http-port", 0, 65535),
       "HTTP port (0: any free port, reported in the log)")
      ("grpc-port", number(&o.grpc_port, "grpc-port", 0, 65535), "gRPC port")
      ("metrics-port", number(&o.metrics_port, "metrics-port", 0, 65535),
       "Prometheus metrics port (0: any free port)")
      ("allow-http", flag(&o.allow_http), "serve HTTP/REST")
      ("allow-grpc", flag(&o.allow_grpc), "serve gRPC")
      ("allow-metrics", flag(&o.allow_metrics), "serve Prometheus metrics")
      ("allow-client-shm", flag(&o.allow_client_shm),
       "allow clients to register shared-memory regions")
      ("http-max-input-size", number(&o.http_max_input_size, "http-max-input-size", std::uint64_t{0}, std::uint64_t{1} << 40),
       "largest JSON header, JSON tensor, raw input or decompressed body, in bytes")
      ("http-max-inflight-bytes",
       number(&o.http_max_inflight_bytes, "http-max-inflight-bytes"),
       "request body bytes all HTTP connections may hold at once; past it a request is refused "
       "with 413 (0: max(2 GiB, twice the largest body))")
      ("http-thread-count", number(&o.http_thread_count, "http-thread-count", 0u, 1024u),
       "HTTP I/O threads (0: one per core, at least 2)")
      ("execution-thread-count",
       number(&o.execution_thread_count, "execution-thread-count", 0u, 4096u),
       "model execution threads, separate from I/O (0: max(4, 2 per core))")
      ("strict-readiness", flag(&o.strict_readiness),
       "ready only when every model is ready")
      ("exit-on-error", flag(&o.exit_on_error), "exit when a model fails to load at startup")
      ("exit-timeout-secs", number(&o.exit_timeout_secs, "exit-timeout-secs"),
       "how long shutdown waits for in-flight requests")
      ("id", po::value(&o.server_id)->default_value(o.server_id),
       "server name reported by server metadata")
      ("log-info", flag(&o.log_info), "log info messages")
      ("log-warning", flag(&o.log_warning), "log warnings")
      ("log-error", flag(&o.log_error), "log errors")
      ("log-verbose", number(&o.log_verbose, "log-verbose"), "verbose level")
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
  if (o.http_max_input_size == 0) return bad("--http-max-input-size must be greater than 0.");  // Triton's text
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
  return -1;
}

}  // namespace inferwire::server
