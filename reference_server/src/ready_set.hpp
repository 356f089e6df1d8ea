// SPDX-License-Identifier: Apache-2.0
// Keep-alive connections between two requests, waiting for their next bytes without a read
// that finds nothing.
//
// Boost 1.81's reactor starts every read with a recv before it waits, and takes a socket as
// drained only when a read returns nothing (a short read does not count): a connection that
// starts its next read right after its reply pays a recv that returns EAGAIN on every request
// (docs/benchmarks.md, "The second read per request"). Waiting with async_wait instead costs
// an epoll_ctl of the same price. An I/O thread's ready_set is an epoll instance of its own
// that holds its connections' sockets, edge-triggered, from each connection's start to its
// close. A connection whose last read emptied its socket waits in the set; the set's own
// descriptor waits in the event loop (one wait for every connection waiting), and when it
// reports a socket (bytes, a hang-up, an error) the connection starts its read, which then
// finds what came. A socket reported while its connection is busy is remembered, and the
// connection reads at once when it is done.
//
// One per io_context (an Asio service: connections end, and leave the set, while the
// io_context shuts down, before the set is destroyed), made when the server starts, so its
// descriptor is there before the first connection. Used only by the thread's own connections,
// on that thread.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include <cstddef>
#include <optional>

namespace inferwire::server {

class ready_set : public boost::asio::io_context::service {
 public:
  /// A connection of the set.
  class member {
   public:
    /// Its socket has something for it (it waited): start the read.
    virtual void on_ready() = 0;

   protected:
    ~member() = default;

   private:
    friend class ready_set;
    int fd_ = -1;           ///< its socket, while in the set
    bool waiting_ = false;  ///< waiting for its socket
    bool ready_ = false;    ///< the set reported its socket while it did not wait
  };

  static inline boost::asio::io_context::id id;

  explicit ready_set(boost::asio::io_context& io);
  ~ready_set() override;

  /// The set of the io_context `io`.
  static ready_set& of(boost::asio::io_context& io) { return boost::asio::use_service<ready_set>(io); }

  /// Puts `m`'s socket `fd` in the set (at the connection's start); false when it cannot be
  /// (the connection then reads as usual).
  bool add(member& m, int fd) noexcept;
  /// Takes `m`'s socket out: before the socket is closed or handed to another thread.
  void remove(member& m) noexcept;
  static bool contains(const member& m) noexcept { return m.fd_ >= 0; }
  /// `m` (in the set, its last read having emptied its socket) waits for its socket's next
  /// bytes: true when it waits (on_ready follows), false when it should read at once (its
  /// socket was reported meanwhile).
  bool wait(member& m);

  /// Members waiting now (for tests and the logs).
  std::size_t waiting() const noexcept { return waiting_; }

 private:
  void shutdown() override;
  void arm();
  void drain();

  int epoll_fd_ = -1;
  std::optional<boost::asio::posix::stream_descriptor> watch_;  ///< epoll_fd_ in the event loop
  std::size_t waiting_ = 0;
  bool armed_ = false;
};

}  // namespace inferwire::server
