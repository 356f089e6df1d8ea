// SPDX-License-Identifier: Apache-2.0
#include "options.hpp"

#include <cstdlib>

#include <inferwire/version.hpp>

#include <boost/program_options.hpp>

#include <algorithm>
#include <charconv>
#include <climits>
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

// The same, for a flag whose absence means "keep the built-in behaviour".
template <class T>
po::typed_value<std::string>* optional_number(std::optional<T>* target, const char* name,
                                              T min = std::numeric_limits<T>::min(),
                                              T max = std::numeric_limits<T>::max()) {
  return po::value<std::string>()->notifier([target, name, min, max](const std::string& text) {
    T v{};
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc{} || end != text.data() + text.size() || v < min || v > max)
      throw po::error("invalid value '" + text + "' for --" + name + ": expected an integer from " +
                      std::to_string(min) + " to " + std::to_string(max));
    *target = v;
  });
}

bool is_integer(std::string_view s, bool allow_sign = false) {
  if (allow_sign && !s.empty() && s.front() == '-') s.remove_prefix(1);
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

bool is_number(std::string_view s) {
  double d = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), d);
  return ec == std::errc{} && end == s.data() + s.size();
}

// `[<group><sep>]<key>=<value>`: the shape of tritonserver's config-style flags.
bool group_key_value(std::string_view arg, char sep, bool group_required) {
  const auto s = arg.find(sep);
  if (group_required && (s == std::string_view::npos || s == 0)) return false;
  const std::string_view kv = s == std::string_view::npos ? arg : arg.substr(s + 1);
  const auto eq = kv.find('=');
  return eq != std::string_view::npos && eq > 0;
}

// Value shapes of tritonserver's flags.
bool any_value(std::string_view) { return true; }
bool integer(std::string_view a) { return is_integer(a); }
bool decimal(std::string_view a) { return is_number(a); }
bool boolean(std::string_view a) { return a == "true" || a == "false" || a == "1" || a == "0"; }
bool group_and_key_value(std::string_view a) { return group_key_value(a, ',', true); }
bool rate_limit(std::string_view a) { return a == "off" || a == "execution_count"; }
bool device_and_integer(std::string_view a) {
  const auto c = a.find(':');
  return c != std::string_view::npos && is_integer(a.substr(0, c)) && is_integer(a.substr(c + 1));
}
bool device_and_fraction(std::string_view a) {
  const auto c = a.find(':');
  return c != std::string_view::npos && is_integer(a.substr(0, c)) && is_number(a.substr(c + 1));
}
bool resource(std::string_view a) {  // <name>:<count>[:<device>]
  const auto c1 = a.find(':');
  if (c1 == std::string_view::npos || c1 == 0) return false;
  const std::string_view rest = a.substr(c1 + 1);
  const auto c2 = rest.find(':');
  return is_integer(rest.substr(0, c2)) && (c2 == std::string_view::npos || is_integer(rest.substr(c2 + 1), true));
}

// The flags tritonserver has for features inferwire-server does not have: accepted, checked
// as tritonserver checks them (`fits`; `format` is what a refused value should have been), and
// reported at start-up as having no effect.
struct inert_flag {
  const char* name;
  const char* why;
  bool repeatable;
  bool (*fits)(std::string_view);
  const char* format;
};

const std::vector<inert_flag>& inert_flags() {
  static const std::vector<inert_flag> flags = {
      {"repoagent-directory", "repository agents are not supported", false, any_value, ""},
      {"host-policy", "host policies are not supported", true, group_and_key_value, "<policy name>,<setting>=<value>"},
      {"cache-config", "there is no response cache", true, group_and_key_value, "<cache name>,<setting>=<value>"},
      {"cache-directory", "there is no response cache", false, any_value, ""},
      {"response-cache-byte-size", "there is no response cache", false, integer, "<integer>"},
      {"rate-limit", "there is no rate limiter", false, rate_limit, "off|execution_count"},
      {"rate-limit-resource", "there is no rate limiter", true, resource, "<resource name>:<count>:<device>"},
      {"pinned-memory-pool-byte-size", "inputs and outputs are not staged through a pinned pool", false, integer,
       "<integer>"},
      {"cuda-memory-pool-byte-size", "CUDA memory is not pooled", true, device_and_integer,
       "<GPU device ID>:<pool byte size>"},
      {"cuda-virtual-address-size", "CUDA memory is not pooled", true, device_and_integer, "<GPU device ID>:<size>"},
      {"min-supported-compute-capability", "every GPU the CUDA runtime offers is used", false, decimal, "<float>"},
      {"buffer-manager-thread-count", "there is no buffer manager", false, integer, "<integer>"},
      {"model-load-gpu-limit", "model loads are not limited by GPU memory", true, device_and_fraction,
       "<device_id>:<fraction>"},
      {"model-load-retry-count", "a failed load is not retried", false, integer, "<integer>"},
      {"model-namespacing", "models are not namespaced", false, boolean, "<boolean>"},
      {"enable-peer-access", "GPU peer access is left as the CUDA runtime sets it", false, boolean, "<boolean>"},
      {"grpc-infer-allocation-pool-size", "responses are not pooled", false, integer, "<integer>"},
      {"grpc-max-response-pool-size", "responses are not pooled", false, integer, "<integer>"},
      {"http-header-forward-pattern", "headers are not forwarded as parameters", false, any_value, ""},
      {"grpc-header-forward-pattern", "headers are not forwarded as parameters", false, any_value, ""},
      {"allow-sagemaker", "there is no SageMaker frontend", false, any_value, ""},
      {"sagemaker-port", "there is no SageMaker frontend", false, integer, "<integer>"},
      {"sagemaker-safe-port-range", "there is no SageMaker frontend", false, any_value, ""},
      {"sagemaker-thread-count", "there is no SageMaker frontend", false, integer, "<integer>"},
      {"allow-vertex-ai", "there is no Vertex AI frontend", false, any_value, ""},
      {"vertex-ai-port", "there is no Vertex AI frontend", false, integer, "<integer>"},
      {"vertex-ai-thread-count", "there is no Vertex AI frontend", false, integer, "<integer>"},
      {"vertex-ai-default-model", "there is no Vertex AI frontend", false, any_value, ""},
  };
  return flags;
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
      ("grpc-port", number(&o.grpc_port, "grpc-port", 0, 65535), "gRPC port (0: any free port, reported in the log)")
      ("metrics-port", number(&o.metrics_port, "metrics-port", 0, 65535),
       "Prometheus metrics port (0: any free port)")
      ("allow-http", flag(&o.allow_http), "serve HTTP/REST")
      ("allow-grpc", flag(&o.allow_grpc), "serve gRPC")
      ("allow-metrics", flag(&o.allow_metrics), "serve Prometheus metrics")
      ("allow-client-shm", flag(&o.allow_client_shm),
       "allow clients to register shared-memory regions")
      ("cuda-vmm-socket", po::value(&o.cuda_vmm_socket)->default_value(o.cuda_vmm_socket),
       "Unix socket on which clients hand over CUDA VMM chunks (with --allow-client-shm; empty: none)")
      ("http-max-input-size", po::value<std::string>(),
       "largest JSON header, JSON tensor, raw input or decompressed body, in bytes")
      ("http-max-inflight-bytes",
       number(&o.http_max_inflight_bytes, "http-max-inflight-bytes"),
       "request body bytes all HTTP connections may hold at once; past it a request is refused "
       "with 413 (0: max(2 GiB, twice the largest body))")
      ("http-thread-count", number(&o.http_thread_count, "http-thread-count", 0u, 1024u),
       "HTTP I/O threads (0: one per core, at least 2)")
      ("http-io-balance", po::value(&o.http_io_balance)->default_value(o.http_io_balance),
       "adaptive: connections on as few I/O threads as their load needs and the free cores allow; "
       "spread: on every I/O thread, round robin")
      ("grpc-thread-count", number(&o.grpc_thread_count, "grpc-thread-count", 0u, 1024u),
       "gRPC threads, each polling its own completion queue (0: one per 8 cores, at least 1)")
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
      ("log-file", po::value(&o.log_file), "write the log to this file instead of stderr")
      ("reuse-http-port", flag(&o.reuse_http_port), "bind the HTTP port with SO_REUSEPORT")
      ("metrics-address", po::value(&o.metrics_address), "address the metrics endpoint binds to (default: --http-address)")
      ("metrics-interval-ms", number(&o.metrics_interval_ms, "metrics-interval-ms"),
       "accepted; every metric is read when it is scraped")
      ("model-load-thread-count", number(&o.model_load_thread_count, "model-load-thread-count", 1u, 1024u),
       "models loaded in parallel at start-up (ensembles after them)")
      ("strict-model-config", flag(&o.strict_model_config), "model configurations must be complete (always so here)")
      ("disable-auto-complete-config", po::bool_switch(), "same as --strict-model-config=true")
      ("http-restricted-api", po::value<std::vector<std::string>>()->composing(),
       "<api>[,<api>...]:<key>=<value>: those APIs need that header (repeatable)")
      ("grpc-restricted-protocol", po::value<std::vector<std::string>>()->composing(),
       "<protocol>[,<protocol>...]:<key>=<value>: those RPCs need header triton-grpc-protocol-<key> (repeatable)")
      ("allow-cpu-metrics", flag(&o.allow_cpu_metrics), "CPU utilisation and memory metrics")
      ("allow-gpu-metrics", flag(&o.allow_gpu_metrics), "GPU metrics from NVML, when the driver and a GPU are there")
      ("metrics-config", po::value<std::vector<std::string>>()->composing(),
       "summary_latencies=<bool>, summary_quantiles=<q>:<error>[,...], counter_latencies=<bool> (repeatable)")
      ("trace-file", po::value<std::string>(), "deprecated: --trace-config triton,file=<path>")
      ("trace-level", po::value<std::vector<std::string>>()->composing(), "deprecated: --trace-config level=<level>")
      ("trace-rate", po::value<std::string>(), "deprecated: --trace-config rate=<rate>")
      ("trace-count", po::value<std::string>(), "deprecated: --trace-config count=<count>")
      ("trace-log-frequency", po::value<std::string>(), "deprecated: --trace-config triton,log-frequency=<n>")
      ("trace-config", po::value<std::vector<std::string>>()->composing(),
       "[triton,]<setting>=<value>: trace file, level, rate, count, log-frequency, mode; "
       "max-bytes-per-minute (default 268435456) and max-files-per-minute (default 60) bound what "
       "tracing writes, whatever clients set (repeatable)")
      ("grpc-address", po::value(&o.grpc_address)->default_value(o.grpc_address), "address the gRPC endpoint binds to")
      ("reuse-grpc-port", flag(&o.reuse_grpc_port), "bind the gRPC port with SO_REUSEPORT")
      ("grpc-use-ssl", flag(&o.grpc_use_ssl), "serve gRPC over TLS")
      ("grpc-use-ssl-mutual", flag(&o.grpc_use_ssl_mutual), "serve gRPC over TLS and require client certificates")
      ("grpc-server-cert", po::value(&o.grpc_server_cert), "PEM file of the server certificate")
      ("grpc-server-key", po::value(&o.grpc_server_key), "PEM file of the server key")
      ("grpc-root-cert", po::value(&o.grpc_root_cert), "PEM file of the root certificate (client certificates)")
      ("grpc-infer-response-compression-level",
       po::value(&o.grpc_infer_response_compression_level)->default_value(o.grpc_infer_response_compression_level),
       "none, low, medium or high")
      ("grpc-allow-compression", flag(&o.grpc_compression),
       "accept and send gzip and deflate gRPC messages; false refuses compressed requests (UNIMPLEMENTED)")
      ("grpc-keepalive-time", optional_number(&o.grpc_keepalive_time_ms, "grpc-keepalive-time", 0, INT_MAX),
       "ms between keepalive pings")
      ("grpc-keepalive-timeout", optional_number(&o.grpc_keepalive_timeout_ms, "grpc-keepalive-timeout", 0, INT_MAX),
       "ms to wait for a keepalive ack")
      ("grpc-keepalive-permit-without-calls", po::value<bool>()->notifier([&o](bool v) { o.grpc_keepalive_permit_without_calls = v; }),
       "allow keepalive pings without calls")
      ("grpc-http2-max-pings-without-data",
       optional_number(&o.grpc_http2_max_pings_without_data, "grpc-http2-max-pings-without-data", 0, INT_MAX), "")
      ("grpc-http2-min-recv-ping-interval-without-data",
       optional_number(&o.grpc_http2_min_recv_ping_interval_without_data_ms,
                       "grpc-http2-min-recv-ping-interval-without-data", 0, INT_MAX), "")
      ("grpc-http2-max-ping-strikes", optional_number(&o.grpc_http2_max_ping_strikes, "grpc-http2-max-ping-strikes", 0, INT_MAX), "")
      ("grpc-max-connection-age", optional_number(&o.grpc_max_connection_age_ms, "grpc-max-connection-age", 0, INT_MAX), "")
      ("grpc-max-connection-age-grace",
       optional_number(&o.grpc_max_connection_age_grace_ms, "grpc-max-connection-age-grace", 0, INT_MAX), "")
      ("grpc-max-concurrent-streams",
       number(&o.grpc_max_concurrent_streams, "grpc-max-concurrent-streams", 1u, static_cast<unsigned>(INT_MAX)),
       "calls one gRPC connection may have open at once; clients queue the others")
      ("backend-directory", po::value(&o.backend_directory)->default_value(o.backend_directory),
       "where backend libraries are: <dir>/<backend>/libtriton_<backend>.so")
      ("backend-config", po::value<std::vector<std::string>>()->composing(),
       "[<backend>,]<setting>=<value>: a setting handed to backend libraries (repeatable)")
      ("allow-model-file-code", flag(&o.allow_model_file_code),
       "let a model loaded with file: parameters bring code (a backend library, a .py file); "
       "off by default: with it, anyone who may load models runs code in the server (docs/security.md)")
      ("stall-timeout-secs", number(&o.stall_timeout_secs, "stall-timeout-secs", 1u, 86400u),
       "seconds a client may make no progress (an idle HTTP connection, a reply or stream response "
       "it does not read) before the server closes it or cancels its stream");
  po::options_description inert("accepted for tritonserver compatibility, without effect here");
  for (const auto& f : inert_flags()) {
    if (f.repeatable) inert.add_options()(f.name, po::value<std::vector<std::string>>()->composing(), f.why);
    else inert.add_options()(f.name, po::value<std::string>(), f.why);
  }
  desc.add(inert);
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
  if (vm.count("http-max-input-size")) {
    // Triton's text for every value that is not positive (its QA greps for it), negative ones
    // included.
    const std::string text = vm["http-max-input-size"].as<std::string>();
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc{} || end != text.data() + text.size())
      return bad("invalid value '" + text + "' for --http-max-input-size: expected an integer from 1 to " +
                 std::to_string(std::uint64_t{1} << 40));
    if (v <= 0) return bad("--http-max-input-size must be greater than 0.");
    if (static_cast<std::uint64_t>(v) > (std::uint64_t{1} << 40))
      return bad("invalid value '" + text + "' for --http-max-input-size: expected an integer from 1 to " +
                 std::to_string(std::uint64_t{1} << 40));
    o.http_max_input_size = static_cast<std::uint64_t>(v);
  }
  if (o.model_control_mode != "none" && o.model_control_mode != "poll" &&
      o.model_control_mode != "explicit")
    return bad("unexpected value for --model-control-mode: " + o.model_control_mode);
  if (std::find(o.load_models.begin(), o.load_models.end(), "*") != o.load_models.end() &&
      o.load_models.size() > 1)
    return bad("Wildcard model name '*' must be the ONLY startup model if specified at all.");
  if (o.model_control_mode == "poll" && o.repository_poll_secs == 0)
    return bad("--repository-poll-secs must be greater than 0 in poll mode");
  if (o.http_io_balance != "adaptive" && o.http_io_balance != "spread")
    return bad("invalid argument for --http-io-balance, got: " + o.http_io_balance);
  if (o.log_format != "default" && o.log_format != "ISO8601")
    return bad("invalid argument for --log-format, got: " + o.log_format);
  if (vm.count("disable-auto-complete-config") && vm["disable-auto-complete-config"].as<bool>())
    o.strict_model_config = true;
  const auto& level = o.grpc_infer_response_compression_level;
  if (level != "none" && level != "low" && level != "medium" && level != "high")
    return bad("invalid argument for --grpc-infer-response-compression-level, got: " + level);
  if ((o.grpc_use_ssl || o.grpc_use_ssl_mutual) && (o.grpc_server_cert.empty() || o.grpc_server_key.empty()))
    return bad("--grpc-use-ssl needs --grpc-server-cert and --grpc-server-key");
  if (o.grpc_use_ssl_mutual && o.grpc_root_cert.empty())
    return bad("--grpc-use-ssl-mutual needs --grpc-root-cert");
  auto restrict = [&](const char* name, const char* kind, restricted_apis& into) -> int {
    if (!vm.count(name)) return -1;
    for (const auto& a : vm[name].as<std::vector<std::string>>())
      if (auto st = into.add(a, name, kind)) return bad(st.message());
    return -1;
  };
  if (vm.count("backend-config"))
    for (const auto& a : vm["backend-config"].as<std::vector<std::string>>()) {
      const auto eq = a.find('=');
      const auto comma = a.find(',');
      const bool named = comma != std::string::npos && comma < eq;
      const std::size_t key_start = named ? comma + 1 : 0;
      if (eq == std::string::npos || eq == key_start || (named && comma == 0))
        return bad("--backend-config option format is '<backend>,<setting>=<value>'. Got " + a);
      o.backend_config.push_back({named ? a.substr(0, comma) : "", {a.substr(key_start, eq - key_start), a.substr(eq + 1)}});
    }
  // tritonserver's deprecated trace flags, with its warnings: settings ahead of --trace-config's,
  // which override them.
  {
    auto deprecated = [&](const char* name, const char* setting, const char* replacement, const std::string& value) {
      std::cerr << "Warning: '--" << name << "' has been deprecated and will be removed in future releases. Please use '"
                << replacement << " instead.\n";
      o.trace_config.emplace_back(setting, value);
    };
    if (vm.count("trace-file"))
      deprecated("trace-file", "file", "--trace-config triton,file=<filepath>", vm["trace-file"].as<std::string>());
    if (vm.count("trace-level"))
      for (const auto& v : vm["trace-level"].as<std::vector<std::string>>())
        deprecated("trace-level", "level", "--trace-config level=<OFF|TIMESTAMPS|TENSORS>", v);
    if (vm.count("trace-rate"))
      deprecated("trace-rate", "rate", "--trace-config rate=<rate value>", vm["trace-rate"].as<std::string>());
    if (vm.count("trace-count"))
      deprecated("trace-count", "count", "--trace-config count=<count value>", vm["trace-count"].as<std::string>());
    if (vm.count("trace-log-frequency"))
      deprecated("trace-log-frequency", "log-frequency", "--trace-config triton,log-frequency=<log frequency value>",
                 vm["trace-log-frequency"].as<std::string>());
  }
  if (vm.count("trace-config"))
    for (const auto& a : vm["trace-config"].as<std::vector<std::string>>()) {
      const auto eq = a.find('=');
      const auto comma = a.find(',');
      const bool grouped = comma != std::string::npos && comma < eq;
      const std::string group = grouped ? a.substr(0, comma) : "";
      if (eq == std::string::npos || eq == (grouped ? comma + 1 : 0) ||
          (grouped && group != "triton" && group != "opentelemetry"))
        return bad("--trace-config option format is '[<mode>,]<setting>=<value>'. Got " + a);
      if (group == "opentelemetry") {
        o.inert.push_back("--trace-config " + a + " has no effect: traces are written in Triton's mode only");
        continue;
      }
      const std::size_t key_start = grouped ? comma + 1 : 0;
      o.trace_config.emplace_back(a.substr(key_start, eq - key_start), a.substr(eq + 1));
    }
  if (vm.count("metrics-config"))
    for (const auto& a : vm["metrics-config"].as<std::vector<std::string>>()) {
      const auto eq = a.find('=');
      const auto comma = a.find(',');
      const std::size_t key_start = comma != std::string::npos && comma < eq ? comma + 1 : 0;
      if (eq == std::string::npos || eq == key_start)
        return bad("--metrics-config option format is '[<group>,]<setting>=<value>'. Got " + a);
      const std::string key = a.substr(key_start, eq - key_start), value = a.substr(eq + 1);
      auto boolean = [&](bool& into) {
        if (value == "true" || value == "1") into = true;
        else if (value == "false" || value == "0") into = false;
        else return false;
        return true;
      };
      if (key == "summary_latencies" || key == "counter_latencies" || key == "histogram_latencies") {
        bool& into = key == "summary_latencies"   ? o.summary_latencies
                     : key == "counter_latencies" ? o.counter_latencies
                                                  : o.histogram_latencies;
        if (!boolean(into)) return bad("invalid value for --metrics-config " + key + ": " + value);
      } else if (key == "summary_quantiles") {
        // <quantile>:<error>[,<quantile>:<error>...], read as Triton reads it: each number is
        // the longest prefix that is one (its own QA passes "0.1:0.0.1"); a pair without ':' or
        // a number is skipped with a log line; none left keeps the default quantiles. The
        // error bound is not needed here.
        std::vector<double> quantiles;
        std::string_view rest = value;
        auto prefix_number = [](std::string_view text, double& out) {
          const std::string t(text);
          char* end = nullptr;
          out = std::strtod(t.c_str(), &end);
          return end != t.c_str();
        };
        while (!rest.empty()) {
          const auto next = rest.find(',');
          const std::string_view pair = rest.substr(0, next);
          rest = next == std::string_view::npos ? std::string_view() : rest.substr(next + 1);
          const auto colon = pair.find(':');
          double q = -1, error = 0;
          if (colon == std::string_view::npos) {
            o.inert.push_back("--metrics-config summary_quantiles: invalid option [" + std::string(pair) +
                              "]. No ':' delimiter found. Expected format is <quantile>:<error>");
            continue;
          }
          if (!prefix_number(pair.substr(0, colon), q) || !prefix_number(pair.substr(colon + 1), error) || q < 0 || q > 1) {
            o.inert.push_back("--metrics-config summary_quantiles: invalid option [" + std::string(pair) + "]");
            continue;
          }
          quantiles.push_back(q);
        }
        if (!quantiles.empty()) o.summary_quantiles = std::move(quantiles);
      } else {
        o.inert.push_back("--metrics-config " + a + " has no effect: not a setting of these metrics");
      }
    }
  if (int rc = restrict("http-restricted-api", "api", o.http_restricted); rc >= 0) return rc;
  if (int rc = restrict("grpc-restricted-protocol", "protocol", o.grpc_restricted); rc >= 0) return rc;
  for (const auto& f : inert_flags()) {
    if (!vm.count(f.name)) continue;
    std::vector<std::string> values;
    if (f.repeatable) values = vm[f.name].as<std::vector<std::string>>();
    else values.push_back(vm[f.name].as<std::string>());
    for (const auto& v : values)
      if (!f.fits(v)) return bad("--" + std::string(f.name) + " option format is '" + f.format + "'. Got " + v);
    o.inert.push_back("--" + std::string(f.name) + " has no effect: " + f.why);
  }
  if (!o.strict_model_config && vm.count("strict-model-config") && !vm["strict-model-config"].defaulted())
    o.inert.push_back("--strict-model-config=false has no effect: configurations are never completed from model files");
  if (!vm["metrics-interval-ms"].defaulted())
    o.inert.push_back("--metrics-interval-ms has no effect: every metric is read when it is scraped");
  return -1;
}

}  // namespace inferwire::server
