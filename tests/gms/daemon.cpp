// SPDX-License-Identifier: Apache-2.0
// inferwire-gms-server as a process: start-up, socket mode, refusing a live server, replacing a
// stale socket, graceful SIGTERM/SIGINT, option errors, the CUDA backend without a GPU.
#include "fixture.hpp"

#include <inferwire/cuda/runtime.hpp>

#include <catch2/catch.hpp>

#include <csignal>
#include <filesystem>
#include <fstream>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>

using namespace gms_test;
using gms::requested_lock_type;
using Catch::Matchers::Contains;

namespace {

/// The daemon as a child process; stderr captured into a file.
class gms_daemon {
 public:
  explicit gms_daemon(std::vector<std::string> args) : log_(fresh_socket_path() + ".log") {
    args.insert(args.begin(), INFERWIRE_GMS_SERVER_PATH);
    pid_ = ::fork();
    if (pid_ == 0) {
      int fd = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      ::dup2(fd, 2);
      ::dup2(fd, 1);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
  }
  ~gms_daemon() {
    if (pid_ > 0 && !exited_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    std::filesystem::remove(log_);
  }
  /// The exit status (waits up to 5 s; -1 if still running).
  int wait_exit(int ms = 5000) {
    for (int waited = 0; waited <= ms; waited += 10) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        exited_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }
  void signal(int sig) { ::kill(pid_, sig); }
  std::string log() const {
    std::ifstream in(log_);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

 private:
  std::string log_;
  pid_t pid_ = -1;
  bool exited_ = false;
};

bool socket_up(const std::string& path) {
  return eventually([&] {
    try {
      gms::session::runtime_state(path);
      return true;
    } catch (const gms::error&) {
      return false;
    }
  }, std::chrono::milliseconds(5000));
}

}  // namespace

TEST_CASE("inferwire-gms-server: serves, refuses a second server, shuts down on a signal", "[gms]") {
  const std::string path = fresh_socket_path();
  gms_daemon d({"--device", "0", "--backend", "memfd", "--socket-path", path, "-v"});
  REQUIRE(socket_up(path));
  struct stat st{};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(S_ISSOCK(st.st_mode));

  gms::session w(path, requested_lock_type::rw);
  auto a = w.allocate(1000, "weights");
  CHECK(a.aligned_size == 2 << 20);
  auto e = w.export_allocation(a.allocation_id);
  CHECK(e.fd);

  gms_daemon second({"--device", "0", "--backend", "memfd", "--socket-path", path});
  CHECK(second.wait_exit() == 1);
  CHECK_THAT(second.log(), Contains("GMS already running at " + path));
  CHECK(w.get_allocation_state() == 1);  // the first server is untouched

  const int sig = GENERATE(SIGTERM, SIGINT);
  d.signal(sig);
  CHECK(d.wait_exit() == 0);
  CHECK_FALSE(std::filesystem::exists(path));
  CHECK_THROWS_AS(w.get_lock_state(), gms::connection_error);
  CHECK_THAT(d.log(), Contains("Server started: " + path));
  CHECK_THAT(d.log(), Contains("shutting down"));
}

TEST_CASE("inferwire-gms-server: replaces a stale socket file and names the default socket", "[gms]") {
  const std::string dir = fresh_socket_path() + ".d";
  std::filesystem::create_directory(dir);
  const std::string path = dir + "/gms_memfd3_kv_cache.sock";
  REQUIRE(make_stale_socket(path));
  ::setenv("GMS_SOCKET_DIR", dir.c_str(), 1);
  gms_daemon d({"--device", "3", "--backend", "memfd", "--tag", "kv_cache"});
  ::unsetenv("GMS_SOCKET_DIR");
  REQUIRE(socket_up(path));
  d.signal(SIGTERM);
  CHECK(d.wait_exit() == 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("inferwire-gms-server: option errors", "[gms]") {
  CHECK(gms_daemon({"--backend", "memfd"}).wait_exit() == 2);  // --device is required
  CHECK(gms_daemon({"--device", "0", "--backend", "tpu"}).wait_exit() == 2);
  CHECK(gms_daemon({"--device", "0", "--alloc-retry-interval", "0"}).wait_exit() == 2);
  CHECK(gms_daemon({"--device", "0", "--alloc-retry-timeout", "-1"}).wait_exit() == 2);
  CHECK(gms_daemon({"--help"}).wait_exit() == 0);
}

TEST_CASE("inferwire-gms-server: the CUDA backend says why it cannot start without a GPU", "[gms]") {
  gms_daemon d({"--device", "0", "--socket-path", fresh_socket_path()});
  if (inferwire::cuda::available()) {
    d.signal(SIGTERM);
    CHECK(d.wait_exit() == 0);
    return;
  }
  CHECK(d.wait_exit() == 1);
  CHECK_THAT(d.log(), Contains("CRITICAL") && Contains("CUDA VMM is not available"));
}
