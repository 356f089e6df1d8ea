// SPDX-License-Identifier: Apache-2.0
#include "vmm_channel.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

namespace inferwire::server {

struct vmm_channel::connection {
  shm::unique_fd fd;
  std::uint64_t id = 0;
  std::string buffer;               // the bytes of the frame being read
  std::vector<shm::unique_fd> fds;  // the descriptors that came with them
  std::chrono::steady_clock::time_point started;  // the frame's first byte
};

namespace {

// A reply's text is bounded whatever an importer's message says.
constexpr std::size_t max_error_text = 4096;

bool socket_path(const std::string& path, sockaddr_un& addr) {
  addr = {};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof addr.sun_path) return false;
  std::memcpy(addr.sun_path, path.data(), path.size());
  return true;
}

}  // namespace

vmm_channel::vmm_channel(shm_registry& registry, vmm_importer& importer, vmm_channel_options options)
    : registry_(registry), importer_(importer), opts_(std::move(options)) {
  if (!opts_.permitted)
    opts_.permitted = [uid = ::geteuid()](const ucred& c) { return c.uid == uid || c.uid == 0; };
  // Never more than a quarter of the process's descriptors for unfinished deposits.
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY)
    opts_.max_held_fds = std::min<std::size_t>(opts_.max_held_fds, limit.rlim_cur / 4);
}

vmm_channel::~vmm_channel() { stop(); }

status vmm_channel::start() {
  sockaddr_un addr;
  if (!socket_path(opts_.path, addr))
    return {errc::invalid_arg, "CUDA VMM socket path '" + opts_.path + "' is empty or longer than " +
                                   std::to_string(sizeof addr.sun_path - 1) + " bytes"};
  struct stat st {};
  if (::lstat(opts_.path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode))
      return {errc::invalid_arg, "CUDA VMM socket path '" + opts_.path + "' exists and is not a socket"};
    // A socket somebody still listens on belongs to another server; one nobody answers on was
    // left by a server that ended without cleaning up.
    shm::unique_fd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (probe && ::connect(probe.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0)
      return {errc::already_exists, "CUDA VMM socket '" + opts_.path + "' is in use by another process"};
    ::unlink(opts_.path.c_str());
  }
  listener_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!listener_) return {errc::internal, std::string("CUDA VMM socket: ") + std::strerror(errno)};
  if (::bind(listener_.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    const int e = errno;
    listener_.reset();
    return {errc::internal, "cannot bind the CUDA VMM socket '" + opts_.path + "': " + std::strerror(e)};
  }
  // Owner only, before anyone can connect (listen comes after).
  if (::chmod(opts_.path.c_str(), 0600) != 0 || ::listen(listener_.get(), 64) != 0 ||
      ::stat(opts_.path.c_str(), &st) != 0) {
    const int e = errno;
    listener_.reset();
    ::unlink(opts_.path.c_str());
    return {errc::internal, "cannot listen on the CUDA VMM socket '" + opts_.path + "': " + std::strerror(e)};
  }
  dev_ = st.st_dev;
  ino_ = st.st_ino;
  wake_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake_) {
    const int e = errno;
    listener_.reset();
    ::unlink(opts_.path.c_str());
    return {errc::internal, std::string("CUDA VMM socket: eventfd: ") + std::strerror(e)};
  }
  thread_ = std::thread([this] { run(); });
  return {};
}

void vmm_channel::stop() {
  if (!thread_.joinable()) return;
  const std::uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof one);
  thread_.join();
  struct stat st {};
  // Only the socket this server made: another may have replaced it since.
  if (::stat(opts_.path.c_str(), &st) == 0 && st.st_dev == dev_ && st.st_ino == ino_) ::unlink(opts_.path.c_str());
  listener_.reset();
}

void vmm_channel::run() {
  std::vector<pollfd> fds;
  for (;;) {
    fds.assign({pollfd{wake_.get(), POLLIN, 0}, pollfd{listener_.get(), POLLIN, 0}});
    for (const auto& c : connections_) fds.push_back({c->fd.get(), POLLIN, 0});
    // Wakes at least once a second to end deposits that stalled.
    if (::poll(fds.data(), fds.size(), 1000) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[0].revents) break;
    const auto now = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < connections_.size(); ++i) {
      auto& c = *connections_[i];
      if (c.buffer.empty() || now - c.started < opts_.frame_timeout) continue;
      reply(c, 'E', "a deposit was not complete within " + std::to_string(opts_.frame_timeout.count()) + " ms");
      close(c);
      fds[2 + i].revents = 0;
    }
    // Connections first (the indices of fds match connections_ until one is added).
    for (std::size_t i = 0; i < connections_.size(); ++i) {
      if (!fds[2 + i].revents) continue;
      if (!read_some(*connections_[i])) close(*connections_[i]);
    }
    std::erase_if(connections_, [](const auto& c) { return !c->fd; });
    if (fds[1].revents & POLLIN) accept_one();
  }
  for (auto& c : connections_) close(*c);
  connections_.clear();
}

void vmm_channel::accept_one() {
  auto c = std::make_unique<connection>();
  c->fd.reset(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
  if (!c->fd) return;
  c->id = next_id_++;
  ucred cred{};
  socklen_t len = sizeof cred;
  if (::getsockopt(c->fd.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || !opts_.permitted(cred)) {
    reply(*c, 'E', "permission denied: this server's CUDA VMM socket does not accept user " +
                       std::to_string(cred.uid) + " (only the server's own user, or root)");
    return;
  }
  if (connections_.size() >= opts_.max_connections) {
    reply(*c, 'E', "too many connections to the CUDA VMM socket (at most " +
                       std::to_string(opts_.max_connections) + ")");
    return;
  }
  connections_.push_back(std::move(c));
}

bool vmm_channel::read_some(connection& c) {
  // Never read past the end of the frame: descriptors belong to the frame whose bytes they
  // came with.
  std::size_t want = 4 - std::min<std::size_t>(4, c.buffer.size());
  if (c.buffer.size() >= 4) want = 4 + shm::detail::get_le(c.buffer, 0, 4) - c.buffer.size();
  char data[16384];
  iovec iov{data, std::min(want, sizeof data)};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * shm::vmm_fds_per_message)];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  const ssize_t n = ::recvmsg(c.fd.get(), &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  shm::detail::for_each_received_fd(msg, [&c](int fd) { c.fds.emplace_back(fd); });
  if (n == 0) return false;
  if (c.buffer.empty()) c.started = std::chrono::steady_clock::now();
  if (msg.msg_flags & MSG_CTRUNC)
    return reply(c, 'E', "more than " + std::to_string(shm::vmm_fds_per_message) +
                             " descriptors came with one message, or the server has no descriptor left"),
           false;
  if (c.fds.size() > shm::vmm_max_chunks)
    return reply(c, 'E', "more than " + std::to_string(shm::vmm_max_chunks) + " descriptors came with one deposit"),
           false;
  if (held_fds() > opts_.max_held_fds)
    return reply(c, 'E', "the server holds too many descriptors of unfinished deposits; try again"), false;
  c.buffer.append(data, static_cast<std::size_t>(n));
  if (c.buffer.size() < 4) return true;
  const std::size_t size = shm::detail::get_le(c.buffer, 0, 4);
  if (size == 0 || size > shm::vmm_max_frame)
    return reply(c, 'E', "a frame of " + std::to_string(size) + " bytes (1 to " +
                             std::to_string(shm::vmm_max_frame) + " allowed)"),
           false;
  if (c.buffer.size() < 4 + size) return true;
  return handle_frame(c);
}

std::size_t vmm_channel::held_fds() const {
  std::size_t n = 0;
  for (const auto& c : connections_) n += c->fds.size();
  return n;
}

bool vmm_channel::handle_frame(connection& c) {
  const std::string payload = c.buffer.substr(4);
  std::vector<shm::unique_fd> fds = std::move(c.fds);
  c.fds.clear();
  c.buffer.clear();
  shm::vmm_layout layout;
  std::string why;
  if (!shm::decode_deposit(payload, layout, why)) return reply(c, 'E', why), false;
  if (fds.size() != layout.chunk_sizes.size())
    return reply(c, 'E', "a deposit of " + std::to_string(layout.chunk_sizes.size()) + " chunks came with " +
                             std::to_string(fds.size()) + " descriptors"),
           false;
  std::unique_ptr<vmm_mapping> mapping;
  try {
    mapping = importer_.import(layout, fds);
  } catch (const std::exception& e) {
    return reply(c, 'E', std::string("cannot import the CUDA VMM region: ") + e.what());
  }
  fds.clear();  // the import holds what it needs
  std::string handle;
  if (auto st = registry_.deposit_vmm(c.id, std::move(mapping), layout.chunk_sizes.size(), handle, opts_.max_pending))
    return reply(c, 'E', st.message());
  return reply(c, 'H', handle);
}

bool vmm_channel::reply(connection& c, char type, std::string_view body) {
  std::string payload(1, type);
  payload.append(body.substr(0, max_error_text));
  const std::string frame = shm::vmm_frame(payload);
  // Replies are small; a client that lets them pile up unread is disconnected.
  const ssize_t n = ::send(c.fd.get(), frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  return n == static_cast<ssize_t>(frame.size());
}

void vmm_channel::close(connection& c) {
  registry_.close_vmm_connection(c.id);
  c.fds.clear();
  c.fd.reset();
}

}  // namespace inferwire::server
