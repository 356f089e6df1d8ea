// SPDX-License-Identifier: Apache-2.0
// inferwire/gms/session.hpp
//
// gms::session: a blocking client connection to a GMS server (ours or Dynamo's): connect and
// handshake in the constructor, then one request and one response at a time, every read done
// with recvmsg and room for a descriptor (gms-protocol §1.2, §7.1).
//
//   gms::session w(path, gms::requested_lock_type::rw);
//   auto a = w.allocate(64 << 20, "weights");
//   gms::unique_fd fd = w.export_allocation(a.allocation_id).fd;
//   w.metadata_put("layer0.weight", a.allocation_id, 0, {});
//   w.commit();                                    // the session ends here
//
// Errors: connection_error (cannot connect, I/O or decode failure: the connection is closed),
// lock_timeout (the handshake was refused in time), server_error (an ErrorResponse; the session
// stays usable), all deriving from gms::error. Every call also has an error_code form, with
// `std::error_code&` after the call's arguments (`session::open` for the constructor); see
// gms/error.hpp.
#ifndef INFERWIRE_GMS_SESSION_HPP
#define INFERWIRE_GMS_SESSION_HPP

#include <inferwire/gms/backend.hpp>
#include <inferwire/gms/codec.hpp>
#include <inferwire/gms/error.hpp>
#include <inferwire/gms/framing.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <deque>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

namespace inferwire::gms {

/// Could not connect, or the connection failed (it is closed).
class connection_error : public error {
 public:
  explicit connection_error(const std::string& what) : error(what, errc::connection_failed) {}
};
/// The server did not grant the lock within the handshake's timeout.
class lock_timeout : public error {
 public:
  explicit lock_timeout(const std::string& what) : error(what, errc::lock_timeout) {}
};
/// The server answered with an ErrorResponse (what() = "GMS request <Class> error: <text>").
class server_error : public error {
 public:
  server_error(const std::string& what, std::string text) : error(what, errc::server_error), text_(std::move(text)) {}
  /// The server's error string.
  const std::string& text() const noexcept { return text_; }

 private:
  std::string text_;
};

/// An exported allocation: its description and a descriptor of its memory.
struct exported_allocation {
  allocation_info info;
  unique_fd fd;
};

namespace detail {

/// One connection: frames out, frames (and descriptors) in.
class wire {
 public:
  wire() = default;
  wire(const std::string& path, std::optional<std::chrono::milliseconds> io_timeout) {
    sockaddr_un addr{};
    if (path.size() >= sizeof addr.sun_path)
      throw connection_error("Failed to connect to GMS: socket path too long: " + path);
    fd_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd_) throw connection_error(std::string("Failed to connect to GMS: ") + std::strerror(errno));
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    if (::connect(fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      const int err = errno;
      fd_.reset();
      if (err == ENOENT) throw connection_error("GMS server not running at " + path);
      throw connection_error("Failed to connect to GMS: " + std::string(std::strerror(err)));
    }
    if (io_timeout) {
      timeval tv{};
      tv.tv_sec = static_cast<time_t>(io_timeout->count() / 1000);
      tv.tv_usec = static_cast<suseconds_t>(io_timeout->count() % 1000 * 1000);
      ::setsockopt(fd_.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    }
  }

  bool open() const noexcept { return static_cast<bool>(fd_); }
  void close() noexcept { fd_.reset(); }
  int native() const noexcept { return fd_.get(); }

  template <class T>
  void send(const T& m, const std::string& prefix) {
    send_frames(encode_frame(m), prefix);
  }

  /// Writes one or more encoded frames with as few system calls as the socket allows.
  void send_frames(const std::string& frame, const std::string& prefix) {
    if (!fd_) throw connection_error(prefix + " failed: not connected");
    std::size_t sent = 0;
    while (sent < frame.size()) {
      ssize_t n = ::send(fd_.get(), frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) fail(prefix, std::strerror(errno));
      sent += static_cast<std::size_t>(n);
    }
  }

  /// The next message, and the descriptor that came with it (if any).
  message receive(const std::string& prefix, unique_fd* fd_out) {
    std::string payload;
    for (;;) {
      auto r = reader_.next(payload);
      if (r == frame_reader::result::frame) break;
      if (r == frame_reader::result::too_large) fail(prefix, "frame too large");
      char buf[65536];
      std::vector<int> fds;
      ssize_t n = recv_with_fds(fd_.get(), buf, sizeof buf, fds);
      // A read ends right after the segment that carried descriptors (the kernel never reads
      // past one), and the server sends a reply and its descriptor together: the descriptor
      // belongs to the frame that holds the read's last byte. With pipelined requests several
      // replies may be buffered, so each descriptor keeps that stream offset.
      for (std::size_t i = 0; i < fds.size(); ++i) {
        if (i == 0 && n > 0) pending_fds_.emplace_back(received_ + static_cast<std::uint64_t>(n), unique_fd(fds[i]));
        else ::close(fds[i]);
      }
      if (n < 0) fail(prefix, errno == EAGAIN || errno == EWOULDBLOCK ? "timed out" : std::strerror(errno));
      if (n == 0) fail(prefix, "connection closed by the server");
      received_ += static_cast<std::uint64_t>(n);
      reader_.append(buf, static_cast<std::size_t>(n));
    }
    const std::uint64_t start = consumed_;
    consumed_ += 4 + payload.size();
    std::optional<unique_fd> fd;
    while (!pending_fds_.empty() && pending_fds_.front().first <= consumed_) {
      if (pending_fds_.front().first > start && !fd) fd.emplace(std::move(pending_fds_.front().second));
      pending_fds_.pop_front();  // (one that no frame can own is closed)
    }
    message m;
    std::string err;
    if (!try_decode(payload, m, err)) fail(prefix, err);
    if (fd) {
      if (!fd_out) throw error(prefix + " error: unexpected file descriptor in response");
      *fd_out = std::move(*fd);
    }
    return m;
  }

 private:
  [[noreturn]] void fail(const std::string& prefix, const std::string& why) {
    fd_.reset();
    throw connection_error(prefix + " failed: " + why);
  }
  unique_fd fd_;
  frame_reader reader_;
  std::uint64_t received_ = 0;  ///< stream bytes read so far
  std::uint64_t consumed_ = 0;  ///< stream bytes of the frames returned so far
  std::deque<std::pair<std::uint64_t, unique_fd>> pending_fds_;  ///< descriptor, stream offset it came at
};

}  // namespace detail

class session {
 public:
  /// Connects and handshakes. `timeout_ms` is the server-side wait for the lock (nullopt:
  /// forever; <= 0: fail unless rw_or_ro can be RW at once). `io_timeout` bounds each read.
  session(std::string socket_path, requested_lock_type lock, std::optional<std::int64_t> timeout_ms = {},
          std::optional<std::chrono::milliseconds> io_timeout = {})
      : path_(std::move(socket_path)), wire_(path_, io_timeout) {
    wire_.send(handshake_request{lock, timeout_ms}, "GMS handshake");
    auto m = wire_.receive("GMS handshake", nullptr);
    if (auto* e = std::get_if<error_response>(&m)) {
      wire_.close();
      throw server_error("GMS handshake error: " + e->error, e->error);
    }
    auto* r = std::get_if<handshake_response>(&m);
    if (!r) {
      wire_.close();
      throw error("GMS handshake: unexpected response type " + std::string(class_name(m)));
    }
    if (!r->success) {
      wire_.close();
      throw lock_timeout("Timeout waiting for lock");
    }
    if (!r->granted_lock_type) {
      wire_.close();
      throw error("GMS handshake: success without a granted lock type");
    }
    granted_ = *r->granted_lock_type;
    committed_ = r->committed;
  }

  granted_lock_type granted() const noexcept { return granted_; }
  /// The `committed` flag of the handshake response.
  bool committed_at_connect() const noexcept { return committed_; }
  bool connected() const noexcept { return wire_.open(); }
  const std::string& socket_path() const noexcept { return path_; }
  /// Closes the connection (releases the lock; an RW session that did not commit aborts).
  void close() noexcept { wire_.close(); }
  int native_handle() const noexcept { return wire_.native(); }

  get_lock_state_response get_lock_state() { return call<get_lock_state_response>(get_lock_state_request{}); }
  std::int64_t get_allocation_state() {
    return call<get_allocation_state_response>(get_allocation_state_request{}).allocation_count;
  }
  std::string get_memory_layout_hash() {
    return call<get_state_hash_response>(get_state_hash_request{}).memory_layout_hash;
  }
  allocate_response allocate(std::int64_t size, std::string tag = "default") {
    return call<allocate_response>(allocate_request{size, std::move(tag)});
  }
  exported_allocation export_allocation(const std::string& id) {
    unique_fd fd;
    auto r = call<export_allocation_response>(export_allocation_request{id}, &fd);
    if (!fd) throw error("GMS request ExportAllocationRequest error: no file descriptor received");
    return {static_cast<allocation_info&>(r), std::move(fd)};
  }
  /// Exports several allocations with their requests pipelined (up to `window` in flight, well
  /// under the server's limit on unread descriptors): about one round trip's latency for the
  /// lot instead of one per allocation. Results in the order of `ids`. An allocation the server
  /// refuses does not stop the others: every reply is read (the session stays usable), then the
  /// first refusal is thrown as server_error.
  std::vector<exported_allocation> export_allocations(const std::vector<std::string>& ids, std::size_t window = 32) {
    const std::string prefix = "GMS request " + std::string(export_allocation_request::class_name);
    std::vector<exported_allocation> out;
    out.reserve(ids.size());
    std::optional<server_error> refused;
    // Requests go out in batches of half the window, one write each, whenever half the window
    // has been answered.
    window = std::max<std::size_t>(2, window);
    std::size_t sent = 0, answered_since = 0;
    auto send_batch = [&](std::size_t count) {
      std::string frames;
      for (const auto end = std::min(ids.size(), sent + count); sent < end; ++sent)
        frames += encode_frame(export_allocation_request{ids[sent]});
      if (!frames.empty()) wire_.send_frames(frames, prefix);
    };
    send_batch(window);
    for (std::size_t got = 0; got < ids.size(); ++got) {
      unique_fd fd;
      message m = wire_.receive(prefix, &fd);
      if (++answered_since == window / 2) {
        send_batch(window / 2);
        answered_since = 0;
      }
      if (auto* e = std::get_if<error_response>(&m)) {
        if (!refused) refused.emplace(prefix + " error: " + e->error, e->error);
        continue;
      }
      auto* r = std::get_if<export_allocation_response>(&m);
      if (!r) {
        wire_.close();
        throw error(prefix + " error: unexpected response type " + std::string(class_name(m)));
      }
      if (!fd) throw error(prefix + " error: no file descriptor received");
      out.push_back({static_cast<allocation_info&>(*r), std::move(fd)});
    }
    if (refused) throw *refused;
    return out;
  }
  allocation_info get_allocation(const std::string& id) {
    return call<get_allocation_response>(get_allocation_request{id});
  }
  std::vector<get_allocation_response> list_allocations(std::optional<std::string> tag = {}) {
    return call<list_allocations_response>(list_allocations_request{std::move(tag)}).allocations;
  }
  bool free(const std::string& id) { return call<free_allocation_response>(free_allocation_request{id}).success; }
  void metadata_put(std::string key, std::string id, std::int64_t offset, std::string value) {
    call<metadata_put_response>(metadata_put_request{std::move(key), std::move(id), offset, bytes{std::move(value)}});
  }
  metadata_get_response metadata_get(std::string key) {
    return call<metadata_get_response>(metadata_get_request{std::move(key)});
  }
  bool metadata_delete(std::string key) {
    return call<metadata_delete_response>(metadata_delete_request{std::move(key)}).deleted;
  }
  std::vector<std::string> metadata_list(std::string prefix = {}) {
    return call<metadata_list_response>(metadata_list_request{std::move(prefix)}).keys;
  }
  /// Commits the layout; the server then ends the session, and so does this object.
  void commit() {
    auto r = call<commit_response>(commit_request{});
    wire_.close();
    if (!r.success) throw error("GMS commit failed");
  }

  // --- The error_code forms: the same calls; a failure the throwing form would throw sets
  // `ec` instead (see gms/error.hpp) and the result is value-initialised.

  /// Connects and handshakes, or sets `ec` (then the optional is empty).
  static std::optional<session> open(std::string socket_path, requested_lock_type lock, std::error_code& ec,
                                     std::optional<std::int64_t> timeout_ms = {},
                                     std::optional<std::chrono::milliseconds> io_timeout = {}) {
    return detail::capture(ec, [&] {
      return std::optional<session>(std::in_place, std::move(socket_path), lock, timeout_ms, io_timeout);
    });
  }
  get_lock_state_response get_lock_state(std::error_code& ec) {
    return detail::capture(ec, [&] { return get_lock_state(); });
  }
  std::int64_t get_allocation_state(std::error_code& ec) {
    return detail::capture(ec, [&] { return get_allocation_state(); });
  }
  std::string get_memory_layout_hash(std::error_code& ec) {
    return detail::capture(ec, [&] { return get_memory_layout_hash(); });
  }
  allocate_response allocate(std::int64_t size, std::string tag, std::error_code& ec) {
    return detail::capture(ec, [&] { return allocate(size, std::move(tag)); });
  }
  exported_allocation export_allocation(const std::string& id, std::error_code& ec) {
    return detail::capture(ec, [&] { return export_allocation(id); });
  }
  std::vector<exported_allocation> export_allocations(const std::vector<std::string>& ids, std::error_code& ec) {
    return detail::capture(ec, [&] { return export_allocations(ids); });
  }
  allocation_info get_allocation(const std::string& id, std::error_code& ec) {
    return detail::capture(ec, [&] { return get_allocation(id); });
  }
  std::vector<get_allocation_response> list_allocations(std::optional<std::string> tag, std::error_code& ec) {
    return detail::capture(ec, [&] { return list_allocations(std::move(tag)); });
  }
  bool free(const std::string& id, std::error_code& ec) {
    return detail::capture(ec, [&] { return free(id); });
  }
  void metadata_put(std::string key, std::string id, std::int64_t offset, std::string value, std::error_code& ec) {
    detail::capture(ec, [&] { metadata_put(std::move(key), std::move(id), offset, std::move(value)); });
  }
  metadata_get_response metadata_get(std::string key, std::error_code& ec) {
    return detail::capture(ec, [&] { return metadata_get(std::move(key)); });
  }
  bool metadata_delete(std::string key, std::error_code& ec) {
    return detail::capture(ec, [&] { return metadata_delete(std::move(key)); });
  }
  std::vector<std::string> metadata_list(std::string prefix, std::error_code& ec) {
    return detail::capture(ec, [&] { return metadata_list(std::move(prefix)); });
  }
  void commit(std::error_code& ec) {
    detail::capture(ec, [&] { commit(); });
  }

  /// Sends any request and returns the response (ErrorResponse included, no exception for it).
  template <class T>
  message request(const T& m, unique_fd* fd = nullptr) {
    const std::string prefix = "GMS request " + std::string(T::class_name);
    wire_.send(m, prefix);
    return wire_.receive(prefix, fd);
  }

  /// One-shot probes: their own connection, closed by the server after the reply.
  static get_runtime_state_response runtime_state(const std::string& path) {
    return probe<get_runtime_state_response>(path, get_runtime_state_request{});
  }
  static get_event_history_response event_history(const std::string& path) {
    return probe<get_event_history_response>(path, get_event_history_request{});
  }

 private:
  template <class R, class Q>
  R call(const Q& q, unique_fd* fd = nullptr) {
    const std::string prefix = "GMS request " + std::string(Q::class_name);
    message m = request(q, fd);
    if (auto* e = std::get_if<error_response>(&m)) throw server_error(prefix + " error: " + e->error, e->error);
    if (auto* r = std::get_if<R>(&m)) return std::move(*r);
    wire_.close();
    throw error(prefix + " error: unexpected response type " + std::string(class_name(m)));
  }
  template <class R, class Q>
  static R probe(const std::string& path, const Q& q) {
    detail::wire w(path, std::chrono::milliseconds(10000));
    const std::string prefix = "GMS request " + std::string(Q::class_name);
    w.send(q, prefix);
    message m = w.receive(prefix, nullptr);
    if (auto* r = std::get_if<R>(&m)) return std::move(*r);
    throw error(prefix + " error: unexpected response type " + std::string(class_name(m)));
  }

  std::string path_;
  detail::wire wire_;
  granted_lock_type granted_ = granted_lock_type::ro;
  bool committed_ = false;
};

}  // namespace inferwire::gms

#endif
