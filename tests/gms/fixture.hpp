// SPDX-License-Identifier: Apache-2.0
// A GMS server with the memfd backend on its own thread, on a fresh socket path, and raw
// socket helpers for byte-level checks.
#ifndef INFERWIRE_TESTS_GMS_FIXTURE_HPP
#define INFERWIRE_TESTS_GMS_FIXTURE_HPP

#include <cerrno>
#include <inferwire/gms/memfd_backend.hpp>
#include <inferwire/gms/server.hpp>
#include <inferwire/gms/session.hpp>

#include <boost/algorithm/hex.hpp>
#include <boost/asio/executor_work_guard.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <future>
#include <iterator>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

namespace gms_test {

/// A forked child that is killed (SIGKILL) and reaped when the guard goes out of scope, also
/// when a REQUIRE fails first: a child left running would keep the test runner's output pipe
/// open and stall the whole suite.
class child_guard {
 public:
  explicit child_guard(pid_t pid) noexcept : pid_(pid) {}
  ~child_guard() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  child_guard(const child_guard&) = delete;
  child_guard& operator=(const child_guard&) = delete;
  /// Sends `sig` and waits for the child; returns its wait status.
  int stop(int sig) {
    int status = 0;
    ::kill(pid_, sig);
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_;
};


namespace gms = inferwire::gms;

/// 2 MiB, the granularity of a mapping.
inline constexpr std::int64_t MiB2 = std::int64_t{2} << 20;

inline std::string fresh_socket_path() {
  static std::atomic<int> counter{0};
  return "/tmp/iw-gms-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".sock";
}

struct server_config {
  std::size_t capacity = std::numeric_limits<std::size_t>::max();
  double retry_interval = 0.5;
  std::optional<double> retry_timeout;
  std::size_t max_frame = gms::default_max_frame_size;
  /// Further server options (limits, timeouts) for a test.
  std::function<void(gms::server_options&)> adjust;
};

/// A GMS server on its own thread with `Backend`.
template <class Backend>
class basic_test_server {
 public:
  basic_test_server(Backend backend, server_config cfg = {}, std::string path = fresh_socket_path())
      : path_(std::move(path)), backend_(std::move(backend)), guard_(ioc_.get_executor()) {
    gms::server_options o;
    o.socket_path = path_;
    o.alloc_retry_interval = cfg.retry_interval;
    o.alloc_retry_timeout = cfg.retry_timeout;
    o.max_frame_size = cfg.max_frame;
    if (cfg.adjust) cfg.adjust(o);
    o.log = [this](const std::string& line) {
      std::lock_guard lock(log_mutex_);
      log_.push_back(line);
    };
    server_.emplace(ioc_, backend_, std::move(o));
    server_->start();
    thread_ = std::thread([this] { ioc_.run(); });
  }
  ~basic_test_server() { shutdown(); }

  /// Stops the server (on its thread) and joins it.
  void shutdown() {
    if (!thread_.joinable()) return;
    boost::asio::post(ioc_, [this] { server_->stop(); });
    guard_.reset();
    thread_.join();
  }

  /// Runs `f` on the server's thread and returns its result.
  template <class F>
  auto call(F f) -> decltype(f()) {
    if (!thread_.joinable()) return f();  // stopped: nothing else touches the server
    std::packaged_task<decltype(f())()> task(std::move(f));
    auto fut = task.get_future();
    boost::asio::post(ioc_, [&task] { task(); });
    return fut.get();
  }

  const std::string& path() const { return path_; }
  std::size_t backend_bytes() { return call([this] { return backend_.allocated(); }); }
  std::vector<std::string> log() {
    std::lock_guard lock(log_mutex_);
    return log_;
  }

 private:
  std::string path_;
  boost::asio::io_context ioc_;
  Backend backend_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard_;
  std::optional<gms::server<Backend>> server_;
  std::thread thread_;
  std::mutex log_mutex_;
  std::vector<std::string> log_;
};

/// The memfd server of the CPU tests (2 MiB granularity).
class test_server : public basic_test_server<gms::memfd_backend> {
 public:
  explicit test_server(server_config cfg = {}, std::string path = fresh_socket_path())
      : basic_test_server(gms::memfd_backend(std::size_t{2} << 20, cfg.capacity), cfg, std::move(path)) {}
};

/// Polls `pred` every 5 ms for up to `limit`.
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = std::chrono::milliseconds(3000)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return pred();
}

/// Leaves a socket file at `path` with nothing listening behind it (a crashed server's).
inline bool make_stale_socket(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

/// A plain connected socket, for raw bytes.
class raw_socket {
 public:
  explicit raw_socket(const std::string& path) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
      throw std::runtime_error("raw_socket: connect failed");
  }
  ~raw_socket() { ::close(fd_); }
  void send(const std::string& bytes) {
    std::size_t off = 0;
    while (off < bytes.size()) {
      ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (n <= 0) throw std::runtime_error("raw_socket: send failed");
      off += static_cast<std::size_t>(n);
    }
  }
  /// Whether the peer closed within `ms` with no data (true), or data arrived (false).
  bool closed_within(int ms) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, ms) <= 0) return false;
    char c;
    // EOF, or a reset: a server that closes before reading what the client sent resets.
    const ssize_t n = ::recv(fd_, &c, 1, MSG_PEEK);
    return n == 0 || (n < 0 && errno == ECONNRESET);
  }
  /// One whole frame (header included) and the descriptor that came with it (-1 if none).
  /// Empty on EOF or after `ms` without a complete frame.
  std::string read_frame(int* fd_out = nullptr, int ms = 3000) {
    std::string payload;
    while (reader_.next(payload) != gms::frame_reader::result::frame) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, ms) <= 0) return {};
      char buf[65536];
      std::vector<int> fds;
      ssize_t n = gms::recv_with_fds(fd_, buf, sizeof buf, fds);
      for (int f : fds) {
        if (pending_fd_ < 0) pending_fd_ = f;
        else ::close(f);
      }
      if (n <= 0) return {};
      reader_.append(buf, static_cast<std::size_t>(n));
    }
    if (fd_out) *fd_out = pending_fd_;
    else if (pending_fd_ >= 0) ::close(pending_fd_);
    pending_fd_ = -1;
    return gms::frame_header(payload.size()) + payload;
  }
  int native() const { return fd_; }

 private:
  int fd_ = -1;
  int pending_fd_ = -1;
  gms::frame_reader reader_{std::size_t{1} << 30};
};

inline std::string hex(const std::string& bytes) {
  std::string out;
  boost::algorithm::hex_lower(bytes.begin(), bytes.end(), std::back_inserter(out));
  return out;
}
inline std::string unhex(const std::string& text) { return boost::algorithm::unhex(text); }

}  // namespace gms_test

#endif
