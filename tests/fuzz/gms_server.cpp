// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: what clients send a GMS server, through a real server (memfd backend, on its
// own thread, on a Unix socket) and two client connections. The input is a list of records:
// one byte picks the connection (its low bit), then a frame as it goes on the wire (4-byte
// big-endian length, then the payload; a length past the input sends what is left, a frame cut
// short). After each frame the client reads what the server answers (descriptors included, all
// closed at once). The allocation ids the server makes are random, so the fixed id of the
// golden frames (gms-protocol §2.5) in a frame is replaced by the last id the server handed out
// on either connection before the frame is sent: exports, frees and metadata then reach real
// allocations.
//
// Findings, beyond the sanitizers': a connection the server neither answers nor closes once the
// client has shut down its side (within 5 s), and descriptors that outlive their use: once both
// connections are gone, the process may hold at most two descriptors per allocation the server
// still keeps (its memfd and a read-only reopening) beyond the sockets and memfds it held
// before the first input.
#include <inferwire/gms/codec.hpp>
#include <inferwire/gms/framing.hpp>
#include <inferwire/gms/layout_hash.hpp>
#include <inferwire/gms/memfd_backend.hpp>
#include <inferwire/gms/server.hpp>

#include <boost/asio/executor_work_guard.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <future>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

namespace {

namespace gms = inferwire::gms;
using clock_type = std::chrono::steady_clock;

constexpr std::string_view golden_id = "00000000-0000-4000-8000-000000000000";

/// The descriptors a GMS server could leak: sockets and shared-memory objects (the fuzzing
/// engine opens pipes and files of its own as it goes).
std::size_t open_descriptors() {
  std::size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const std::string target = std::filesystem::read_symlink(e.path(), ec).string();
    n += target.starts_with("socket:") || target.starts_with("/memfd:");
  }
  return n;
}

struct gms_fixture {
  std::string path = "/tmp/iw-gms-fuzz-" + std::to_string(::getpid()) + ".sock";
  boost::asio::io_context ioc;
  // 64 KiB granules and 64 MiB in all: the fuzzer cannot make the process allocate much.
  gms::memfd_backend backend{std::size_t{64} << 10, std::size_t{64} << 20};
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard{ioc.get_executor()};
  std::optional<gms::server<gms::memfd_backend>> server;
  std::thread thread;
  std::size_t base_fds = 0;

  gms_fixture() {
    // OpenSSL initialises itself on its first use, once per process, and keeps what it
    // allocates then: do it on this thread, not the server's (which ends before the leak check).
    (void)gms::layout_hash({}, {});
    gms::server_options o;
    o.socket_path = path;
    o.alloc_retry_timeout = 0.0;  // out of memory fails at once
    o.first_frame_timeout = std::chrono::milliseconds(500);
    server.emplace(ioc, backend, std::move(o));
    server->start();
    thread = std::thread([this] { ioc.run(); });
    base_fds = open_descriptors();
  }
  ~gms_fixture() {
    boost::asio::post(ioc, [this] { server->stop(); });
    guard.reset();
    thread.join();
  }

  template <class F>
  auto call(F f) -> decltype(f()) {
    std::packaged_task<decltype(f())()> task(std::move(f));
    auto done = task.get_future();
    boost::asio::post(ioc, [&task] { task(); });
    return done.get();
  }
};

/// One client connection: sends frames, reads replies (closing every descriptor that comes).
class client {
 public:
  explicit client(const std::string& path) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
    if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) __builtin_trap();
  }
  ~client() { ::close(fd_); }
  client(const client&) = delete;
  client& operator=(const client&) = delete;

  bool send(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;  // the server dropped the connection
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
  }

  /// Reads for up to `ms` (until a whole reply or the end): the allocation id of the last
  /// AllocateResponse read, if any, goes to `id`. False once the server has closed.
  bool read(int ms, std::string& id) {
    const auto until = clock_type::now() + std::chrono::milliseconds(ms);
    while (!closed_) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - clock_type::now()).count();
      pollfd p{fd_, POLLIN, 0};
      if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0) break;
      char buf[4096];
      alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 8)];
      iovec iov{buf, sizeof buf};
      msghdr m{};
      m.msg_iov = &iov;
      m.msg_iovlen = 1;
      m.msg_control = control;
      m.msg_controllen = sizeof control;
      const ssize_t n = ::recvmsg(fd_, &m, MSG_CMSG_CLOEXEC);
      for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
          const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
          for (std::size_t k = 0; k < count; ++k) {
            int fd;
            std::memcpy(&fd, CMSG_DATA(c) + k * sizeof(int), sizeof fd);
            ::close(fd);
          }
        }
      if (n <= 0) {
        closed_ = true;
        break;
      }
      reader_.append(buf, static_cast<std::size_t>(n));
      bool whole = false;
      std::string payload;
      while (reader_.next(payload) == gms::frame_reader::result::frame) {
        whole = true;
        gms::message msg;
        std::string error;
        if (gms::try_decode(payload, msg, error))
          if (const auto* r = std::get_if<gms::allocate_response>(&msg)) id = r->allocation_id;
      }
      if (whole) break;
    }
    return !closed_;
  }

  void shutdown_send() { ::shutdown(fd_, SHUT_WR); }
  bool closed() const { return closed_; }

 private:
  int fd_ = -1;
  bool closed_ = false;
  gms::frame_reader reader_{std::size_t{64} << 20};
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static gms_fixture f;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  std::optional<client> conns[2];
  std::string id(golden_id);
  for (int records = 0; records < 32 && in.size() >= 5; ++records) {
    const int which = static_cast<unsigned char>(in[0]) & 1;
    const auto* p = reinterpret_cast<const unsigned char*>(in.data() + 1);
    const std::size_t length = (std::size_t{p[0]} << 24) | (std::size_t{p[1]} << 16) |
                               (std::size_t{p[2]} << 8) | std::size_t{p[3]};
    const std::size_t take = std::min(in.size() - 1, 4 + length);
    std::string frame(in.substr(1, take));
    in.remove_prefix(1 + take);
    for (auto at = frame.find(golden_id, 4); at != std::string::npos; at = frame.find(golden_id, at + 1))
      frame.replace(at, golden_id.size(), id);
    auto& c = conns[which];
    if (!c) c.emplace(f.path);
    if (c->closed() || !c->send(frame)) continue;
    (void)c->read(20, id);
  }
  // Both clients finish: the server must answer what is left and close within 5 s.
  for (auto& c : conns)
    if (c) c->shutdown_send();
  for (auto& c : conns) {
    const auto until = clock_type::now() + std::chrono::seconds(5);
    while (c && !c->closed() && clock_type::now() < until) (void)c->read(100, id);
    if (c && !c->closed()) __builtin_trap();  // neither answered nor closed
  }
  for (auto& c : conns) c.reset();
  // Descriptors: none beyond what the allocations still kept need.
  const auto until = clock_type::now() + std::chrono::seconds(5);
  while (f.call([&] { return f.server->connection_count(); }) != 0)
    if (clock_type::now() > until) __builtin_trap();  // a connection the server never let go
  const std::size_t kept = f.call([&] { return f.server->allocation_count(); });
  if (const std::size_t now = open_descriptors(); now > f.base_fds + 2 * kept) {
    std::fprintf(stderr, "gms_server: %zu sockets and memfds open, %zu before the first input, %zu allocations kept:\n",
                 now, f.base_fds, kept);
    for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
      std::error_code ec;
      std::fprintf(stderr, "  %s -> %s\n", e.path().filename().c_str(),
                   std::filesystem::read_symlink(e.path(), ec).c_str());
    }
    __builtin_trap();
  }
  return 0;
}
