// SPDX-License-Identifier: Apache-2.0
// The HTTP frontend of inferwire-server, in two parts that meet here:
// - http_connection.cpp reads requests and writes replies: keep-alive, pipelining, chunked
//   bodies, Expect, size limits, the in-flight byte budget, timeouts, the listener;
// - http_endpoints.cpp answers each request of v2-protocol §1: it decodes the body, calls the
//   service, and encodes the reply. Nothing in it knows about sockets.
#pragma once

#include "http_request.hpp"
#include "spare_blocks.hpp"
#include "server.hpp"
#include "reply_queue.hpp"
#include "service.hpp"

#include <inferwire/http/route.hpp>

#include <boost/asio/buffer.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/error.hpp>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <sys/mman.h>

namespace inferwire::server::rest {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;

/// A request body read outside the parser (large bodies). Memory follows the bytes received,
/// never the length announced: the buffer starts small and doubles as bytes arrive (an
/// anonymous mapping grown with mremap, so growing never copies), each new part is populated
/// in one call (far cheaper than faulting pages in while recv copies into them), and every
/// byte of capacity is charged to the server's in-flight budget until the request is done.
class body_buffer {
 public:
  static constexpr std::size_t first_capacity = std::size_t{64} << 10;

  body_buffer(std::size_t length, byte_budget& budget) : length_(length), charge_(budget) {}
  ~body_buffer() {
    if (data_) ::munmap(data_, capacity_);
  }
  body_buffer(const body_buffer&) = delete;
  body_buffer& operator=(const body_buffer&) = delete;

  /// Makes room for more bytes (at least one): false when the budget or the system refuses.
  bool grow();
  /// Where the next bytes go, and how many fit without growing.
  net::mutable_buffer free_space() noexcept { return {data_ + filled_, capacity_ - filled_}; }
  void commit(std::size_t n) noexcept { filled_ += n; }
  bool complete() const noexcept { return filled_ == length_; }
  bool full() const noexcept { return filled_ == capacity_; }
  bool empty_capacity() const noexcept { return capacity_ == 0; }
  std::string_view view() const noexcept { return {data_, filled_}; }

 private:
  char* data_ = nullptr;
  std::size_t capacity_ = 0;
  std::size_t filled_ = 0;
  std::size_t length_;
  byte_budget::charge charge_;
};

/// The body of a reply that is sent as it is made (generate_stream's Server-Sent Events): a
/// producer on the execution pool pushes events, the connection writes what waits as HTTP
/// chunks (reply_queue's rules: bound, stall, exit).
using reply_stream = reply_queue<std::string>;

/// What a handler answers. Body parts after `body` are views kept alive by `owner`.
struct reply {
  unsigned status = 200;
  std::string_view content_type;  ///< always a literal
  /// Inference-Header-Content-Length of a binary infer reply (written without a field entry).
  std::optional<std::size_t> header_length;
  std::vector<std::pair<std::string, std::string>> fields;
  std::string body;
  std::vector<std::span<const std::byte>> extra;  ///< sent after `body` (a binary reply's tensors)
  std::shared_ptr<void> owner;
  bool close = false;
  std::shared_ptr<trace_record> trace;  ///< a traced inference: sending is stamped, then it is written
  /// A streamed body (chunked transfer coding) in place of `body` and `extra`.
  std::shared_ptr<reply_stream> stream;
};

reply json_reply(std::string body, unsigned status = 200);
reply error_reply(unsigned code, std::string_view message);
reply error_reply(const status& st);
reply empty_reply(unsigned code);
/// 413: the server's in-flight request memory (`budget`) has no room for this request.
reply budget_reply(const byte_budget& budget);

/// When a request's header and its body had arrived (HTTP_RECV_START and _END of a trace).
struct receive_times {
  clock::time_point header;
  clock::time_point body;
};

/// Where a reply goes when it is ready after the handler returned (work on the execution
/// pool). The connection implements it; holding the pointer keeps the connection alive.
class responder {
 public:
  virtual ~responder() = default;
  /// Called exactly once for a request whose handler returned no reply, from any thread.
  virtual void respond(reply r) = 0;
  /// A flag that becomes true, from the connection's thread, once the client has closed the
  /// connection while its request waits (null: never known). Valid while the responder is.
  virtual const std::atomic<bool>* gone() const noexcept { return nullptr; }
};

/// The v2 endpoints over HTTP (v2-protocol §1): route, method check, decode, service call,
/// encode. Status codes and texts that are HTTP's alone live here, each with a comment naming
/// the upstream behaviour it mirrors.
class endpoints {
 public:
  explicit endpoints(server_state& s) noexcept : s_(s), svc_(s) {}

  /// Answers `req` (whose body is `big` when it was read outside the parser): the reply now,
  /// or nothing when `out` receives it later.
  std::optional<reply> handle(http_request&& req, std::shared_ptr<body_buffer> big,
                              const std::shared_ptr<responder>& out, const receive_times& received);
  /// The metrics port: GET /metrics.
  reply metrics(const http_request& req) const;

 private:
  struct infer_job;
  reply model_metadata(const inferwire::http::route& r);
  reply model_config(const inferwire::http::route& r);
  reply statistics(const inferwire::http::route& r);
  reply shared_memory(const inferwire::http::route& r, std::string_view body);
  reply trace(const inferwire::http::route& r, const http_request& req);
  reply logging(const http_request& req);
  reply repository_index(const http_request& req);
  std::optional<reply> repository_control(const inferwire::http::route& r, http_request&& req,
                                          const std::shared_ptr<responder>& out);
  /// An inference: here, or on the execution pool when its large body is costly to decode.
  std::optional<reply> infer(const inferwire::http::route& r, http_request&& req,
                             std::shared_ptr<body_buffer> big, const std::shared_ptr<responder>& out,
                             const receive_times& received);
  std::optional<reply> infer_here(const inferwire::http::route& r, http_request&& req,
                                  std::shared_ptr<body_buffer> big, const std::shared_ptr<responder>& out,
                                  const receive_times& received);
  struct generate_job;
  std::optional<reply> generate(const inferwire::http::route& r, http_request&& req, bool streaming,
                                const std::shared_ptr<responder>& out);
  status decode_body(infer_job& job, std::string_view content_encoding,
                     std::optional<std::string_view> content_length,
                     std::optional<std::string_view> header_length, std::optional<reply>& refusal);
  reply respond(infer_job& job, const status& done) noexcept;
  reply encode(infer_job& job);

  server_state& s_;
  service svc_;
};

/// The socket of a connection. Connections and their timers name the io_context's executor type
/// instead of any_io_executor: no type-erased executor copies or calls on the per-request path.
using socket_type = net::basic_stream_socket<net::ip::tcp, net::io_context::executor_type>;

/// Serves one accepted connection (http_connection.cpp) on I/O thread `thread` (whose
/// io_context made the socket): the v2 endpoints, or the metrics port's GET /metrics. The
/// connection keeps itself alive while it has work; between two requests it may move to another
/// I/O thread (io_balance.hpp).
void serve_connection(socket_type&& socket, server_state& s, bool metrics, std::size_t thread);

}  // namespace inferwire::server::rest
