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

#include <chrono>
#include <concepts>
#include <exception>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

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
  /// Connects to the socket at `path`; `io_timeout` bounds each read (SO_RCVTIMEO).
  wire(const std::string& path, std::optional<std::chrono::milliseconds> io_timeout);

  bool open() const noexcept { return static_cast<bool>(fd_); }
  void close() noexcept { fd_.reset(); }
  int native() const noexcept { return fd_.get(); }

  template <class T>
  void send(const T& m, const std::string& prefix) {
    send_frames(encode_frame(m), prefix);
  }
  /// Writes one or more encoded frames with as few system calls as the socket allows.
  void send_frames(const std::string& frame, const std::string& prefix);
  /// The next message, and the descriptor that came with it (if any).
  message receive(const std::string& prefix, unique_fd* fd_out);

 private:
  [[noreturn]] void fail(const std::string& prefix, const std::string& why);
  unique_fd fd_;
  frame_reader reader_;
  std::uint64_t received_ = 0;  ///< stream bytes read so far
  bool eof_ = false;            ///< the server closed the stream (after what was read)
  std::unique_ptr<batched_reader<16, 4096>> batch_;  ///< made on the first read
  std::uint64_t consumed_ = 0;  ///< stream bytes of the frames returned so far
  std::deque<std::pair<std::uint64_t, unique_fd>> pending_fds_;  ///< descriptor, stream offset it came at
};

}  // namespace detail

class session {
 public:
  /// Connects and handshakes. `timeout_ms` is the server-side wait for the lock (nullopt:
  /// forever; <= 0: fail unless rw_or_ro can be RW at once). `io_timeout` bounds each read.
  session(std::string socket_path, requested_lock_type lock, std::optional<std::int64_t> timeout_ms = {},
          std::optional<std::chrono::milliseconds> io_timeout = {});

  granted_lock_type granted() const noexcept { return granted_; }
  /// The `committed` flag of the handshake response.
  bool committed_at_connect() const noexcept { return committed_; }
  bool connected() const noexcept { return wire_.open(); }
  const std::string& socket_path() const noexcept { return path_; }
  /// Closes the connection (releases the lock; an RW session that did not commit aborts).
  void close() noexcept { wire_.close(); }
  int native_handle() const noexcept { return wire_.native(); }

  get_lock_state_response get_lock_state();
  /// The number of allocations the server holds.
  std::int64_t get_allocation_state();
  /// The server's memory layout hash (the layout hash of the GMS protocol spec).
  std::string get_memory_layout_hash();
  /// Allocates `size` bytes (RW only); the reply carries the id, aligned size and layout slot.
  allocate_response allocate(std::int64_t size, std::string tag = "default");
  /// The allocation's description and a descriptor of its memory.
  exported_allocation export_allocation(const std::string& id);
  /// Exports several allocations with their requests pipelined (up to `window` in flight, under
  /// the 64 unread descriptors inferwire-gms-server lets a client hold by default, and fewer
  /// than a socket buffer holds before the server must keep any): about one round trip's
  /// latency for the lot instead of one per allocation. Replies are read up to 16 in one system
  /// call (recvmmsg), each reply that carries a descriptor in a read of its own. Results in the order of `ids`. An allocation the server
  /// refuses does not stop the others: every reply is read (the session stays usable), then the
  /// first refusal is thrown as server_error.
  std::vector<exported_allocation> export_allocations(const std::vector<std::string>& ids, std::size_t window = 48);
  /// The same, handing each export to `on_export` as its reply arrives (so the caller imports
  /// descriptors while the server is still sending). If `on_export` throws, the remaining
  /// replies are still read (their descriptors closed) and its exception is rethrown; it takes
  /// precedence over a refusal.
  template <std::invocable<exported_allocation&&> OnExport>
  void export_allocations(const std::vector<std::string>& ids, OnExport&& on_export, std::size_t window = 48);
  allocation_info get_allocation(const std::string& id);
  /// Every allocation, or those with `tag`.
  std::vector<get_allocation_response> list_allocations(std::optional<std::string> tag = {});
  /// Frees an allocation (RW only); the server's `success` flag.
  bool free(const std::string& id);
  /// Stores `value` under `key`, pointing at `offset` in allocation `id` (RW only).
  void metadata_put(std::string key, std::string id, std::int64_t offset, std::string value);
  metadata_get_response metadata_get(std::string key);
  /// Deletes a key (RW only); false when there was none.
  bool metadata_delete(std::string key);
  /// The keys that start with `prefix`.
  std::vector<std::string> metadata_list(std::string prefix = {});
  /// Commits the layout; the server then ends the session, and so does this object.
  void commit();

  // --- The error_code forms: the same calls; a failure the throwing form would throw sets
  // `ec` instead (see gms/error.hpp) and the result is value-initialised.

  /// Connects and handshakes, or sets `ec` (then the optional is empty).
  static std::optional<session> open(std::string socket_path, requested_lock_type lock, std::error_code& ec,
                                     std::optional<std::int64_t> timeout_ms = {},
                                     std::optional<std::chrono::milliseconds> io_timeout = {});
  get_lock_state_response get_lock_state(std::error_code& ec);
  std::int64_t get_allocation_state(std::error_code& ec);
  std::string get_memory_layout_hash(std::error_code& ec);
  allocate_response allocate(std::int64_t size, std::string tag, std::error_code& ec);
  exported_allocation export_allocation(const std::string& id, std::error_code& ec);
  std::vector<exported_allocation> export_allocations(const std::vector<std::string>& ids, std::error_code& ec);
  allocation_info get_allocation(const std::string& id, std::error_code& ec);
  std::vector<get_allocation_response> list_allocations(std::optional<std::string> tag, std::error_code& ec);
  bool free(const std::string& id, std::error_code& ec);
  void metadata_put(std::string key, std::string id, std::int64_t offset, std::string value, std::error_code& ec);
  metadata_get_response metadata_get(std::string key, std::error_code& ec);
  bool metadata_delete(std::string key, std::error_code& ec);
  std::vector<std::string> metadata_list(std::string prefix, std::error_code& ec);
  void commit(std::error_code& ec);

  /// Sends any request and returns the response (ErrorResponse included, no exception for it).
  template <class T>
  message request(const T& m, unique_fd* fd = nullptr);

  /// One-shot probes: their own connection, closed by the server after the reply.
  static get_runtime_state_response runtime_state(const std::string& path);
  static get_event_history_response event_history(const std::string& path);

 private:
  template <class R, class Q>
  R call(const Q& q, unique_fd* fd = nullptr);
  template <class R, class Q>
  static R probe(const std::string& path, const Q& q);

  std::string path_;
  detail::wire wire_;
  granted_lock_type granted_ = granted_lock_type::ro;
  bool committed_ = false;
};
}  // namespace inferwire::gms

#include <inferwire/gms/impl/session.hpp>

#endif
