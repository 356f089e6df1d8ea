// SPDX-License-Identifier: Apache-2.0
// inferwire/gms/impl/session.hpp — bodies of gms/session.hpp (included by it).
#ifndef INFERWIRE_GMS_IMPL_SESSION_HPP
#define INFERWIRE_GMS_IMPL_SESSION_HPP

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

namespace inferwire::gms {

namespace detail {

inline wire::wire(const std::string& path, std::optional<std::chrono::milliseconds> io_timeout) {
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

inline void wire::send_frames(const std::string& frame, const std::string& prefix) {
  if (!fd_) throw connection_error(prefix + " failed: not connected");
  std::size_t sent = 0;
  while (sent < frame.size()) {
    ssize_t n = ::send(fd_.get(), frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail(prefix, std::strerror(errno));
    sent += static_cast<std::size_t>(n);
  }
}

inline message wire::receive(const std::string& prefix, unique_fd* fd_out) {
  std::string payload;
  for (;;) {
    auto r = reader_.next(payload);
    if (r == frame_reader::result::frame) break;
    if (r == frame_reader::result::too_large) fail(prefix, "frame too large");
    if (eof_) fail(prefix, "connection closed by the server");
    // Pipelined replies that have arrived come in one system call, each reply that carries a
    // descriptor in a read of its own.
    if (!batch_) batch_ = std::make_unique<batched_reader<16, 4096>>();
    auto& batch = batch_;
    const int reads = batch->read(fd_.get());
    if (reads < 0) fail(prefix, errno == EAGAIN || errno == EWOULDBLOCK ? "timed out" : std::strerror(errno));
    std::vector<int> fds;
    for (int i = 0; i < reads && !eof_; ++i) {
      const std::string_view bytes = batch->bytes(i);
      fds.clear();
      batch->take_fds(i, fds);
      // A read ends right after the segment that carried descriptors, and the server sends a
      // reply and its descriptor together: the descriptor belongs to the frame that holds the
      // read's last byte. With pipelined requests several replies may be buffered, so each
      // descriptor keeps that stream offset.
      for (std::size_t k = 0; k < fds.size(); ++k) {
        if (k == 0 && !bytes.empty()) pending_fds_.emplace_back(received_ + bytes.size(), unique_fd(fds[k]));
        else ::close(fds[k]);
      }
      if (bytes.empty()) {
        eof_ = true;  // what came before it is still read
        break;
      }
      received_ += bytes.size();
      reader_.append(bytes.data(), bytes.size());
    }
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

inline void wire::fail(const std::string& prefix, const std::string& why) {
  fd_.reset();
  throw connection_error(prefix + " failed: " + why);
}

}  // namespace detail

inline session::session(std::string socket_path, requested_lock_type lock, std::optional<std::int64_t> timeout_ms,
                        std::optional<std::chrono::milliseconds> io_timeout)
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

inline get_lock_state_response session::get_lock_state() {
  return call<get_lock_state_response>(get_lock_state_request{});
}
inline std::int64_t session::get_allocation_state() {
  return call<get_allocation_state_response>(get_allocation_state_request{}).allocation_count;
}
inline std::string session::get_memory_layout_hash() {
  return call<get_state_hash_response>(get_state_hash_request{}).memory_layout_hash;
}
inline allocate_response session::allocate(std::int64_t size, std::string tag) {
  return call<allocate_response>(allocate_request{size, std::move(tag)});
}
inline exported_allocation session::export_allocation(const std::string& id) {
  unique_fd fd;
  auto r = call<export_allocation_response>(export_allocation_request{id}, &fd);
  if (!fd) throw error("GMS request ExportAllocationRequest error: no file descriptor received");
  return {static_cast<allocation_info&>(r), std::move(fd)};
}

inline std::vector<exported_allocation> session::export_allocations(const std::vector<std::string>& ids,
                                                                    std::size_t window) {
  std::vector<exported_allocation> out;
  out.reserve(ids.size());
  export_allocations(ids, [&](exported_allocation&& e) { out.push_back(std::move(e)); }, window);
  return out;
}

template <std::invocable<exported_allocation&&> OnExport>
void session::export_allocations(const std::vector<std::string>& ids, OnExport&& on_export, std::size_t window) {
  const std::string prefix = "GMS request " + std::string(export_allocation_request::class_name);
  std::optional<server_error> refused;
  std::exception_ptr failed;
  // Requests go out in batches of half the window, one write each, whenever half the window
  // has been answered.
  window = std::max<std::size_t>(2, window);
  std::size_t sent = 0, answered_since = 0;
  std::string frames;
  auto send_batch = [&](std::size_t count) {
    frames.clear();
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
    if (!fd) {
      wire_.close();
      throw error(prefix + " error: no file descriptor received");
    }
    if (failed) continue;  // drain: the descriptor closes here
    try {
      on_export(exported_allocation{std::move(static_cast<allocation_info&>(*r)), std::move(fd)});
    } catch (...) {
      failed = std::current_exception();
    }
  }
  if (failed) std::rethrow_exception(failed);
  if (refused) throw *refused;
}

inline allocation_info session::get_allocation(const std::string& id) {
  return call<get_allocation_response>(get_allocation_request{id});
}
inline std::vector<get_allocation_response> session::list_allocations(std::optional<std::string> tag) {
  return call<list_allocations_response>(list_allocations_request{std::move(tag)}).allocations;
}
inline bool session::free(const std::string& id) {
  return call<free_allocation_response>(free_allocation_request{id}).success;
}
inline void session::metadata_put(std::string key, std::string id, std::int64_t offset, std::string value) {
  call<metadata_put_response>(metadata_put_request{std::move(key), std::move(id), offset, bytes{std::move(value)}});
}
inline metadata_get_response session::metadata_get(std::string key) {
  return call<metadata_get_response>(metadata_get_request{std::move(key)});
}
inline bool session::metadata_delete(std::string key) {
  return call<metadata_delete_response>(metadata_delete_request{std::move(key)}).deleted;
}
inline std::vector<std::string> session::metadata_list(std::string prefix) {
  return call<metadata_list_response>(metadata_list_request{std::move(prefix)}).keys;
}
inline void session::commit() {
  auto r = call<commit_response>(commit_request{});
  wire_.close();
  if (!r.success) throw error("GMS commit failed");
}

// --- error_code forms

inline std::optional<session> session::open(std::string socket_path, requested_lock_type lock, std::error_code& ec,
                                            std::optional<std::int64_t> timeout_ms,
                                            std::optional<std::chrono::milliseconds> io_timeout) {
  return detail::capture(ec, [&] {
    return std::optional<session>(std::in_place, std::move(socket_path), lock, timeout_ms, io_timeout);
  });
}
inline get_lock_state_response session::get_lock_state(std::error_code& ec) {
  return detail::capture(ec, [&] { return get_lock_state(); });
}
inline std::int64_t session::get_allocation_state(std::error_code& ec) {
  return detail::capture(ec, [&] { return get_allocation_state(); });
}
inline std::string session::get_memory_layout_hash(std::error_code& ec) {
  return detail::capture(ec, [&] { return get_memory_layout_hash(); });
}
inline allocate_response session::allocate(std::int64_t size, std::string tag, std::error_code& ec) {
  return detail::capture(ec, [&] { return allocate(size, std::move(tag)); });
}
inline exported_allocation session::export_allocation(const std::string& id, std::error_code& ec) {
  return detail::capture(ec, [&] { return export_allocation(id); });
}
inline std::vector<exported_allocation> session::export_allocations(const std::vector<std::string>& ids,
                                                                    std::error_code& ec) {
  return detail::capture(ec, [&] { return export_allocations(ids); });
}
inline allocation_info session::get_allocation(const std::string& id, std::error_code& ec) {
  return detail::capture(ec, [&] { return get_allocation(id); });
}
inline std::vector<get_allocation_response> session::list_allocations(std::optional<std::string> tag,
                                                                      std::error_code& ec) {
  return detail::capture(ec, [&] { return list_allocations(std::move(tag)); });
}
inline bool session::free(const std::string& id, std::error_code& ec) {
  return detail::capture(ec, [&] { return free(id); });
}
inline void session::metadata_put(std::string key, std::string id, std::int64_t offset, std::string value,
                                  std::error_code& ec) {
  detail::capture(ec, [&] { metadata_put(std::move(key), std::move(id), offset, std::move(value)); });
}
inline metadata_get_response session::metadata_get(std::string key, std::error_code& ec) {
  return detail::capture(ec, [&] { return metadata_get(std::move(key)); });
}
inline bool session::metadata_delete(std::string key, std::error_code& ec) {
  return detail::capture(ec, [&] { return metadata_delete(std::move(key)); });
}
inline std::vector<std::string> session::metadata_list(std::string prefix, std::error_code& ec) {
  return detail::capture(ec, [&] { return metadata_list(std::move(prefix)); });
}
inline void session::commit(std::error_code& ec) {
  detail::capture(ec, [&] { commit(); });
}

// --- requests and probes

template <class T>
message session::request(const T& m, unique_fd* fd) {
  const std::string prefix = "GMS request " + std::string(T::class_name);
  wire_.send(m, prefix);
  return wire_.receive(prefix, fd);
}

inline get_runtime_state_response session::runtime_state(const std::string& path) {
  return probe<get_runtime_state_response>(path, get_runtime_state_request{});
}
inline get_event_history_response session::event_history(const std::string& path) {
  return probe<get_event_history_response>(path, get_event_history_request{});
}

template <class R, class Q>
R session::call(const Q& q, unique_fd* fd) {
  const std::string prefix = "GMS request " + std::string(Q::class_name);
  message m = request(q, fd);
  if (auto* e = std::get_if<error_response>(&m)) throw server_error(prefix + " error: " + e->error, e->error);
  if (auto* r = std::get_if<R>(&m)) return std::move(*r);
  wire_.close();
  throw error(prefix + " error: unexpected response type " + std::string(class_name(m)));
}

template <class R, class Q>
R session::probe(const std::string& path, const Q& q) {
  detail::wire w(path, std::chrono::milliseconds(10000));
  const std::string prefix = "GMS request " + std::string(Q::class_name);
  w.send(q, prefix);
  message m = w.receive(prefix, nullptr);
  if (auto* r = std::get_if<R>(&m)) return std::move(*r);
  throw error(prefix + " error: unexpected response type " + std::string(class_name(m)));
}

}  // namespace inferwire::gms

#endif
