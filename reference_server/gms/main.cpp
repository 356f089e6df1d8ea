// SPDX-License-Identifier: Apache-2.0
// inferwire-gms-server: the GPU Memory Service daemon, one per (GPU, tag). It owns GPU memory
// (CUDA VMM) or, with --backend memfd, plain memory for development and tests, and serves it
// to clients over a Unix socket with Dynamo's GMS protocol v2.
#include <inferwire/gms/cuda_vmm_backend.hpp>
#include <inferwire/gms/memfd_backend.hpp>
#include <inferwire/gms/server.hpp>

#include "socket_path.hpp"

#include <boost/asio/signal_set.hpp>
#include <boost/program_options.hpp>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>

#include <sys/stat.h>
#include <unistd.h>

namespace gms = inferwire::gms;
namespace po = boost::program_options;
using inferwire::gms::programs::default_socket_path;

namespace {

struct options {
  int device = 0;
  std::string tag = "weights";
  std::string socket_path;
  double retry_interval = 0.5;
  std::optional<double> retry_timeout;
  std::string backend = "cuda";
  std::size_t memfd_granularity = std::size_t{2} << 20;
  std::optional<std::size_t> memfd_capacity;
  bool verbose = false;
};

// "2026-11-22 10:00:00,123 - inferwire.gms - INFO - text", the upstream log layout.
void log_line(const char* level, const std::string& text) {
  using namespace std::chrono;
  const auto now = system_clock::now();
  const std::time_t t = system_clock::to_time_t(now);
  std::tm tm{};
  ::localtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &tm);
  const auto ms = duration_cast<milliseconds>(now.time_since_epoch()).count() % 1000;
  char millis[8];
  std::snprintf(millis, sizeof millis, ",%03d", static_cast<int>(ms));
  std::cerr << stamp << millis << " - inferwire.gms - " << level << " - " << text << '\n';
}

// Returns -1 to go on, else the exit code.
int parse(int argc, char** argv, options& o) {
  po::options_description desc("inferwire-gms-server: GPU Memory Service (Dynamo GMS protocol v2)\n\nOptions");
  double interval = 0.5, timeout = 0;
  std::size_t capacity_mib = 0;
  desc.add_options()
    ("help,h", "show this help and exit")
    ("device", po::value<int>(&o.device)->required(), "CUDA device ordinal to serve (required)")
    ("tag", po::value<std::string>(&o.tag)->default_value("weights"),
     "server tag; only names the default socket gms_<GPU-UUID>_<tag>.sock")
    ("socket-path", po::value<std::string>(&o.socket_path),
     "Unix socket path (default: $GMS_SOCKET_DIR, else $XDG_RUNTIME_DIR, else the private folder "
     "<temp dir>/inferwire-gms-<uid>; gms_<GPU-UUID>_<tag>.sock)")
    ("alloc-retry-interval", po::value<double>(&interval)->default_value(0.5),
     "seconds between allocation retries while the GPU is out of memory (> 0)")
    ("alloc-retry-timeout", po::value<double>(&timeout),
     "give up on an allocation after this many seconds of out-of-memory (> 0; default: never)")
    ("backend", po::value<std::string>(&o.backend)->default_value("cuda"),
     "cuda (CUDA VMM on the device) or memfd (plain memory with real fds, for development)")
    ("memfd-capacity-mib", po::value<std::size_t>(&capacity_mib),
     "memfd backend only: report out-of-memory beyond this many MiB")
    ("verbose,v", po::bool_switch(&o.verbose), "log every connection and grant");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    if (vm.count("help")) {
      std::cout << desc << "\nWith --backend memfd the default socket is gms_memfd<device>_<tag>.sock.\n";
      return 0;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "inferwire-gms-server: " << e.what() << "\n" << desc << '\n';
    return 2;
  }
  if (!(interval > 0)) {
    std::cerr << "inferwire-gms-server: --alloc-retry-interval must be > 0\n";
    return 2;
  }
  o.retry_interval = interval;
  if (vm.count("alloc-retry-timeout")) {
    if (!(timeout > 0)) {
      std::cerr << "inferwire-gms-server: --alloc-retry-timeout must be > 0\n";
      return 2;
    }
    o.retry_timeout = timeout;
  }
  if (o.backend != "cuda" && o.backend != "memfd") {
    std::cerr << "inferwire-gms-server: --backend must be cuda or memfd, got '" << o.backend << "'\n";
    return 2;
  }
  if (o.device < 0) {
    std::cerr << "inferwire-gms-server: --device must be >= 0\n";
    return 2;
  }
  if (vm.count("memfd-capacity-mib")) o.memfd_capacity = capacity_mib << 20;
  return -1;
}

template <class Backend>
int serve(const options& o, Backend& backend, const std::string& path) {
  boost::asio::io_context ioc(1);
  gms::server_options so;
  so.socket_path = path;
  so.alloc_retry_interval = o.retry_interval;
  so.alloc_retry_timeout = o.retry_timeout;
  so.verbose = o.verbose;
  so.log = [](const std::string& line) { log_line("INFO", line); };
  gms::server<Backend> server(ioc, backend, so);
  try {
    server.start();
  } catch (const std::exception& e) {
    log_line("ERROR", e.what());
    return 1;
  }
  boost::asio::signal_set signals(ioc, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    log_line("INFO", std::string("Received ") + (sig == SIGINT ? "SIGINT" : "SIGTERM") + ", shutting down");
    server.stop();  // releases every allocation and removes the socket
  });
  log_line("INFO", "Backend " + backend.name() + ", device " + std::to_string(o.device) + ", granularity " +
                       std::to_string(backend.granularity()));
  try {
    ioc.run();
  } catch (const std::exception& e) {
    // A non-out-of-memory CUDA error or an invariant violation: fatal, as upstream.
    log_line("CRITICAL", std::string("fatal: ") + e.what());
    server.stop();
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  if (int rc = parse(argc, argv, o); rc >= 0) return rc;
  std::signal(SIGPIPE, SIG_IGN);
  try {
    if (o.backend == "memfd") {
      gms::memfd_backend backend(o.memfd_granularity,
                                 o.memfd_capacity.value_or(std::numeric_limits<std::size_t>::max()));
      const std::string path = !o.socket_path.empty() ? o.socket_path : default_socket_path(o.backend, o.device, o.tag);
      return serve(o, backend, path);
    }
    gms::cuda_vmm_backend backend(o.device);
    const std::string path = !o.socket_path.empty() ? o.socket_path : default_socket_path(o.backend, o.device, o.tag);
    return serve(o, backend, path);
  } catch (const std::exception& e) {
    log_line("CRITICAL", e.what());
    return 1;
  }
}
