// SPDX-License-Identifier: Apache-2.0
// inferwire/gms/server.hpp
//
// gms::server<Backend>: the GPU Memory Service server (gms-protocol §3, §4), on Asio over a
// Unix stream socket, one thread. The Backend owns the memory (memfd_backend on the CPU,
// cuda_vmm_backend on a GPU); the server owns the layout (allocations and metadata), the lock
// FSM, the waiting handshakes and the event history.
//
//   gms::memfd_backend backend;
//   gms::server<gms::memfd_backend> s(ioc, backend, {.socket_path = "/tmp/gms.sock"});
//   s.start();        // throws if a live server owns the path; replaces a stale socket file
//   ioc.run();
//
// Upstream quirks (gms-protocol §12.1) are handled as the spec recommends: no fd leak on export
// (a server-side close is seen as EOF), an undecodable handshake closes the connection, a dead
// waiting writer is dropped without being granted, frames are size-capped, shutdown releases
// everything and removes the socket, no client can block the loop (bounded output queues).
// Non-positive handshake timeouts fail at once, as upstream.
#ifndef INFERWIRE_GMS_SERVER_HPP
#define INFERWIRE_GMS_SERVER_HPP

#include <inferwire/core/error.hpp>
#include <inferwire/gms/codec.hpp>
#include <inferwire/gms/framing.hpp>
#include <inferwire/gms/layout_hash.hpp>
#include <inferwire/gms/lock_fsm.hpp>
#include <inferwire/gms/backend.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/uuid/random_generator.hpp>
#include <boost/uuid/uuid_io.hpp>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <functional>
#include <limits>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include <poll.h>
#include <sys/un.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/stat.h>

namespace inferwire::gms {

struct server_options {
  std::string socket_path;
  /// Seconds between allocation retries after out-of-memory.
  double alloc_retry_interval = 0.5;
  /// Give up on an allocation after this many seconds of out-of-memory (nullopt: never).
  std::optional<double> alloc_retry_timeout;
  /// Frames declaring more bytes are a decode failure (the connection is dropped).
  std::size_t max_frame_size = default_max_frame_size;
  /// A client whose unread replies exceed this is dropped.
  std::size_t max_pending_output = std::size_t{64} << 20;
  /// A client holding more exported descriptors that it has not read yet is dropped.
  std::size_t max_pending_fds = 64;
  /// Exported descriptors all clients together may have waiting in the server (0: a quarter
  /// of the descriptor limit, RLIMIT_NOFILE). A client that would pass it is dropped.
  std::size_t max_total_pending_fds = 0;
  /// Connections at once; further ones are closed at once.
  std::size_t max_connections = 1024;
  /// A connection that sends no complete first frame within this is closed.
  std::chrono::milliseconds first_frame_timeout{10000};
  /// Log lines go here ("" at INFO, verbose lines only when verbose).
  std::function<void(const std::string&)> log;
  bool verbose = false;
};

template <backend Backend>
class server {
 public:
  using protocol = boost::asio::local::stream_protocol;
  using clock = std::chrono::steady_clock;

  server(boost::asio::io_context& ioc, Backend& backend, server_options options)
      : ioc_(ioc), backend_(backend), opts_(std::move(options)), acceptor_(ioc) {}
  server(const server&) = delete;
  server& operator=(const server&) = delete;
  ~server() { stop(); }

  /// Binds the socket (mode 0600) and starts accepting. Throws std::runtime_error if a live
  /// server answers on the path.
  void start();

  /// Closes every connection, fails waiting handshakes, releases every allocation and removes
  /// the socket file. Idempotent.
  void stop();

  // Introspection (tests, diagnostics).
  const lock_fsm& fsm() const noexcept { return fsm_; }
  std::size_t allocation_count() const noexcept { return allocations_.size(); }
  const std::string& memory_layout_hash() const noexcept { return hash_; }
  std::size_t connection_count() const noexcept { return connections_.size(); }

 private:
  struct allocation {
    allocation_info info;
    typename Backend::handle handle;
  };
  struct metadata_entry {
    std::string allocation_id;
    std::int64_t offset_bytes = 0;
    std::string value;
  };
  struct connection;
  using connection_ptr = std::shared_ptr<connection>;

  struct outgoing {
    std::string frame;
    int fd = -1;  ///< sent with the frame's first byte, closed after sending
    std::size_t sent = 0;
  };

  enum class phase { first, waiting, session, closing };

  struct connection : std::enable_shared_from_this<connection> {
    connection(boost::asio::io_context& ioc, std::size_t max_frame)
        : socket(ioc), reader(max_frame), timer(ioc) {}
    ~connection() {
      for (auto& o : out)
        if (o.fd >= 0) ::close(o.fd);
    }
    protocol::socket socket;
    frame_reader reader;
    std::uint64_t id = 0;
    phase state = phase::first;
    std::optional<granted_lock_type> granted;
    requested_lock_type requested = requested_lock_type::rw;
    bool counted_writer = false;
    boost::asio::steady_timer timer;  ///< handshake timeout, allocation retry
    std::deque<outgoing> out;
    std::size_t out_bytes = 0;
    std::size_t out_fds = 0;  ///< descriptors in `out`
    bool writing = false;
    bool reading = false;
    bool busy = false;         ///< a request is being served (allocation retry)
    bool close_after_write = false;
  };

  void log(const std::string& line, bool verbose_only = false) {
    if (verbose_only && !opts_.verbose) return;
    if (opts_.log) opts_.log(line);
  }

  void accept();
  void accept_later();
  void read(const connection_ptr& c);
  void serve_frame(const connection_ptr& c, const std::string& payload);
  int export_descriptor(const connection_ptr& c, const typename Backend::handle& h);
  /// Sends an export's reply at once with the backend's own descriptor where it lends one and
  /// nothing is queued before it; false: not sent (queue it with export_descriptor's copy).
  bool send_lent(const connection_ptr& c, const std::string& frame, const typename Backend::handle& h);
  void on_frame(const connection_ptr& c, const std::string& payload);
  void on_first(const connection_ptr& c, message&& m);
  void start_handshake(const connection_ptr& c, const handshake_request& q);
  void watch_waiter(const connection_ptr& c);
  void finish_wait(const connection_ptr& c, grant g);
  void process_waiters();
  void on_request(const connection_ptr& c, message&& m);
  void do_allocate(const connection_ptr& c, allocate_request q, clock::time_point started,
                   bool oom_recorded);
  void send(const connection_ptr& c, std::string frame, int fd = -1);
  template <class T>
  void reply(const connection_ptr& c, const T& m) {
    send(c, encode_frame(m));
  }
  void flush(const connection_ptr& c);
  /// Closes `c`, logging `why`: at the default level when a limit of ours dropped it (the
  /// operator needs to see it), else only when verbose.
  void drop(const connection_ptr& c, const std::string& why, bool limit = false);
  void clear_layout();
  void record(std::string kind, std::int64_t count = 0) {
    if (events_.size() == 256) events_.pop_front();
    events_.push_back({std::move(kind), count});
  }
  std::string state_name() const { return std::string(to_string(fsm_.state())); }
  static bool peer_gone(int fd) {
    pollfd p{fd, POLLRDHUP, 0};
    return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLERR | POLLHUP | POLLNVAL | POLLRDHUP));
  }

  boost::asio::io_context& ioc_;
  Backend& backend_;
  server_options opts_;
  protocol::acceptor acceptor_;
  boost::asio::steady_timer accept_backoff_{ioc_};
  std::array<char, 65536> read_buffer_{};  ///< one for all connections: reads never overlap
  std::size_t pending_fds_ = 0;            ///< exported descriptors not yet sent, all clients
  std::size_t pending_fd_limit_ = 0;
  bool started_ = false;
  std::uint64_t next_session_ = 0;
  std::list<connection_ptr> connections_;
  std::list<connection_ptr> waiters_;  ///< handshakes waiting for the lock, FIFO
  lock_fsm fsm_;
  std::map<std::string, allocation> allocations_;
  std::map<std::string, metadata_entry> metadata_;
  std::int64_t next_slot_ = 0;
  std::string hash_;
  std::deque<runtime_event> events_;
  boost::uuids::random_generator uuids_;
};

}  // namespace inferwire::gms

#include <inferwire/gms/impl/server.hpp>

#endif
