// SPDX-License-Identifier: Apache-2.0
// Integration-test harness: starts the real inferwire-server binary on free loopback ports
// (it reports the ports it bound in its log) and talks to it over plain sockets.
#pragma once

#include <inferwire/v2/types.hpp>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

namespace iwtest {

namespace net = boost::asio;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;

/// A program started with `args`, its stdout and stderr in a log file of its own; stopped
/// (SIGTERM, then SIGKILL after 30 s) when destroyed.
class child_process {
 public:
  child_process(const std::string& binary, const std::vector<std::string>& args);
  ~child_process();
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  /// Sends SIGTERM and returns the exit status (or -1 when it did not exit normally).
  int stop();
  /// Whether it exited already (reaped here; running() is false afterwards).
  bool exited();
  /// Its output so far.
  std::string log() const;
  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  std::string log_path_;
};

/// A running inferwire-server; stopped (SIGTERM) when destroyed.
class server_process {
 public:
  /// Starts the server on the bundled and the test repositories plus `extra` flags.
  explicit server_process(std::vector<std::string> extra = {}, bool default_repos = true);
  server_process(const server_process&) = delete;
  server_process& operator=(const server_process&) = delete;

  int http_port() const { return http_port_; }
  int metrics_port() const { return metrics_port_; }
  /// The gRPC port (0 unless started with --allow-grpc true).
  int grpc_port() const { return grpc_port_; }
  /// Sends SIGTERM and returns the exit status (or -1 when it did not exit normally).
  int stop() { return process_.stop(); }
  /// The server's log so far.
  std::string log() const { return process_.log(); }
  bool running() const { return process_.running(); }
  /// The process id (for /proc measurements).
  pid_t pid() const { return process_.pid(); }

 private:
  child_process process_;
  int http_port_ = 0;
  int metrics_port_ = 0;
  int grpc_port_ = 0;
};

/// The server shared by the test cases of one process.
server_process& shared_server();

/// Runs the server binary with `args` to completion; returns the exit status and output.
int run_server_once(const std::vector<std::string>& args, std::string& output);

struct reply {
  unsigned status = 0;
  std::map<std::string, std::string> headers;  ///< lower-case names
  std::string body;
  bool keep_alive = true;
  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
  }
  bool has(const std::string& name) const { return headers.count(name) != 0; }
};

/// One HTTP connection with raw access.
class connection {
 public:
  explicit connection(int port);
  void send(std::string_view bytes);
  /// Reads one response; nullopt when the server closed the connection first.
  std::optional<reply> read();
  /// True when the server closed the connection (reads EOF, or resets).
  bool closed_by_server(std::chrono::milliseconds wait = std::chrono::milliseconds(3000));
  /// True when some response bytes can be read now without blocking.
  bool readable_now();
  tcp::socket& socket() { return socket_; }

 private:
  net::io_context io_;
  tcp::socket socket_;
  boost::beast::flat_buffer buffer_;
};

/// A whole request: method, target, headers, body; one connection; returns the reply.
reply request(int port, std::string_view method, std::string_view target,
              std::string_view body = {},
              const std::vector<std::pair<std::string, std::string>>& headers = {});

inline reply get(std::string_view target) {
  return request(shared_server().http_port(), "GET", target);
}
inline reply post(std::string_view target, std::string_view body,
                  const std::vector<std::pair<std::string, std::string>>& headers = {}) {
  return request(shared_server().http_port(), "POST", target, body, headers);
}

/// The serialized request text.
std::string request_text(std::string_view method, std::string_view target, std::string_view body,
                         const std::vector<std::pair<std::string, std::string>>& headers = {});

/// The value of `"error"` in an error body.
std::string error_of(const reply& r);

/// A self-signed certificate for "localhost", made with the openssl command for one test.
struct test_certificate {
  test_certificate();
  ~test_certificate();
  test_certificate(const test_certificate&) = delete;
  test_certificate& operator=(const test_certificate&) = delete;
  std::string dir;
  std::string cert() const { return dir + "/cert.pem"; }
  std::string key() const { return dir + "/key.pem"; }
};

/// Whether `m` is the metadata of the bundled 'simple' model (version 1, two INT32 [-1,16]
/// inputs and outputs), whichever protocol brought it.
bool is_simple_metadata(const inferwire::v2::model_metadata& m);

/// nv_inference_request_failure of version 1 of `model` with `reason` (REJECTED, CANCELED,
/// BACKEND, OTHER) on the server's metrics port; ~0 when the series is missing.
std::uint64_t failure_metric(const server_process& s, const std::string& model, const std::string& reason);

/// The contents of a file.
std::string file_text(const std::string& path);

/// A path under the source tree, e.g. source_path("reference_server/models").
std::string source_path(std::string_view relative);

/// The bundled model repository, reference_server/models.
std::string bundled_models();

/// What each open descriptor of process `pid` refers to (the /proc/PID/fd links, sorted), to
/// count them and to name the ones a step left open.
std::vector<std::string> open_fds_of(pid_t pid);

/// The entries of `after` that `before` lacks (both sorted, as open_fds_of returns them).
std::vector<std::string> added_fds(const std::vector<std::string>& before, const std::vector<std::string>& after);

/// Little-endian bytes of a vector of T.
template <class T>
std::string le_bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

}  // namespace iwtest
