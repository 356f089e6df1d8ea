// SPDX-License-Identifier: Apache-2.0
// HTTP/1.1 connections of inferwire-server: reading requests (keep-alive, pipelining, chunked
// bodies, Expect: 100-continue, size limits, the in-flight byte budget, stalled clients),
// writing replies (streamed ones from their reply_stream). What a request means is
// http_endpoints.cpp's and http_infer.cpp's business; the listener that accepts connections is
// http_listener.cpp's; the same connection type serves the metrics port.
#include "http.hpp"
#include "ready_set.hpp"

#include <inferwire/v2/binary.hpp>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/status.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <cctype>
#include <chrono>
#include <limits>
#include <new>
#include <span>

#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>

namespace inferwire::server {

using rest::budget_reply;
using rest::body_buffer;
using rest::error_reply;
using rest::reply;
using rest::http_request;
namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;

namespace {

using rest::socket_type;
using timer_type = net::basic_waitable_timer<std::chrono::steady_clock,
                                             net::wait_traits<std::chrono::steady_clock>,
                                             net::io_context::executor_type>;

constexpr std::size_t header_limit = 64 * 1024;
constexpr std::size_t max_chunks = 65536;
// A connection that makes no progress for --stall-timeout-secs (120 s by default) while the
// server is not working on its request is closed: idle keep-alive connections and stalled
// clients alike. The watchdog looks every few seconds, at least twice per timeout.
constexpr auto longest_watchdog_period = std::chrono::seconds(5);

// CLOCK_MONOTONIC_COARSE: the clock steady_clock reads (CLOCK_MONOTONIC), as of the last tick
// (a few milliseconds at most behind), read without the time counter.
clock::time_point coarse_now() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return clock::time_point(std::chrono::duration_cast<clock::duration>(std::chrono::seconds(ts.tv_sec) +
                                                                      std::chrono::nanoseconds(ts.tv_nsec)));
}
// Bodies at least this large are read straight into their final buffer.
constexpr std::uint64_t direct_body_threshold = 256 * 1024;
// Each read asks for at least this much room (and at most 64 KiB): a small request (the
// `simple` infer POST is 522 bytes) arrives in one system call instead of two. The buffer
// stays with the connection, so this is what an idle keep-alive connection holds.
constexpr std::size_t least_read = 4096;
// From this many connections on its I/O thread, a connection that emptied its socket waits for
// its next request in the thread's ready_set; with fewer the set's own wait (an epoll_ctl and
// an epoll_wait each time) costs more than the read it saves.
constexpr std::size_t ready_set_connections = 4;

/// Asio's transfer_all caps each read_some/write_some at 64 KiB; large bodies go in as few
/// system calls as the socket allows.
inline std::size_t transfer_all_unbounded(const boost::system::error_code& ec, std::size_t) {
  return ec ? 0 : std::numeric_limits<std::size_t>::max();
}

std::string iso_lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

class session : public std::enable_shared_from_this<session>, public rest::responder, private ready_set::member {
 public:
  /// A connection on I/O thread `thread`, already counted there (io_balance::opened or rehome).
  session(socket_type socket, server_state& s, bool metrics, std::size_t thread)
      : socket_(std::move(socket)), watchdog_(socket_.get_executor()), s_(s), endpoints_(s), metrics_(metrics), thread_(thread) {
    chunk_cb_ = [this](std::uint64_t size, std::string_view, beast::error_code& ec) {
      if (size > 0 && ++chunks_ > max_chunks) {
        chunk_overflow_ = true;
        ec = bhttp::error::body_limit;
      } else if (size > 0 && !body_charge_.add(size)) {
        budget_refused_ = true;
        ec = bhttp::error::body_limit;
      } else {
        chunked_bytes_ += size;
        s_.heap.note(chunked_bytes_);  // a large body, whatever the size of its chunks
      }
    };
  }

  ~session() override {
    leave_ready_set();
    if (!metrics_ && !moved_) s_.io_threads->closed(thread_);
  }

  void start() {
    net::dispatch(socket_.get_executor(), [self = shared_from_this()] {
      beast::error_code ec;
      self->socket_.non_blocking(true, ec);  // write() tries a plain send first
      if (!self->metrics_) {
        self->ready_set_ = &ready_set::of(self->socket_.get_executor().context());
        self->ready_set_->add(*self, self->socket_.native_handle());
      }
      self->touch();
      self->watch();
      self->read_header();
    });
  }

 private:
  // A read is stamped precisely (its time is when the request it completes was received); the
  // watchdog needs only seconds, so a write is stamped with the coarse monotonic clock, the
  // clock steady_clock reads but without the time counter (a fraction of a precise read).
  void touch_read() { last_progress_ = read_at_ = clock::now(); }
  void touch() { last_progress_ = coarse_now(); }

  // One timer per connection, armed every few seconds, instead of one per I/O operation.
  void watch() {
    const auto stall = std::chrono::seconds(s_.opts.stall_timeout_secs);
    watchdog_.expires_after(std::min<std::chrono::steady_clock::duration>(longest_watchdog_period, stall / 2));
    watchdog_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (ec || !self->socket_.is_open()) return;
      if (!self->executing_ &&
          clock::now() - self->last_progress_ > std::chrono::seconds(self->s_.opts.stall_timeout_secs)) {
        beast::error_code ignored;
        self->leave_ready_set();
        self->socket_.close(ignored);
        return;
      }
      self->watch();
    });
  }

  void read_header() {
    framing_rewritten_ = false;
    parse_header();
  }

  void parse_header() {
    parser_.emplace();
    parser_->header_limit(header_limit);
    // The body limit is generous: the protocol's own limits (JSON header, JSON tensors, raw
    // input, decompressed size) are checked with their exact messages after the read. What a
    // body costs is charged to the server's budget as its bytes arrive.
    parser_->body_limit(s_.max_body_size());
    chunks_ = 0;
    chunked_bytes_ = 0;
    chunk_overflow_ = false;
    budget_refused_ = false;
    parser_->on_chunk_header(chunk_cb_);
    reading_header_ = true;
    parse();
  }

  // The read loop of a request: what is buffered goes to the parser, and the socket is read
  // only when the parser needs more. The header goes to on_header before any body byte is
  // parsed (for Expect: 100-continue and for bodies read directly), the whole message to
  // on_read; with nothing to read they are called at once, where Beast's read operations
  // would post them. Errors and the end of stream are reported as Beast reports them.
  void parse() {
    if (reading_header_ && !parser_->got_some() && recall()) return;
    while (buffer_.size() != 0) {
      beast::error_code ec;
      const std::size_t used = parser_->put(buffer_.data(), ec);
      // Beast takes a header whole: `used` is all of it. RFC 9112 §5.2: a field folded over
      // lines (obs-fold) is refused, not unfolded (a restricted API's key must not hide there).
      if (reading_header_ && !ec && used != 0) {
        const std::string_view header(static_cast<const char*>(buffer_.data().data()), used);
        if (folded(header)) {
          buffer_.consume(used);
          return refuse_folding();
        }
        if (parser_->is_header_done() && !framing_rewritten_) memo_.remember(header, *parser_);
      }
      buffer_.consume(used);
      if (ec == bhttp::error::need_more) break;
      if (ec) return parsed(ec);
      if (reading_header_ ? parser_->is_header_done() : parser_->is_done()) return parsed({});
      if (used == 0) break;
    }
    const std::size_t room =
        std::clamp<std::size_t>(buffer_.capacity() - buffer_.size(), least_read, 64 * 1024);
    if (std::exchange(own_read_, false)) return read_reported(room);
    read_some(room);
  }

  // A request whose header is the connection's last plain one (http_header_memo), with its whole
  // body buffered, is read without the parser: what it would have found, and the body's bytes.
  bool recall() {
    http_request req;
    const std::size_t used =
        memo_.recall({static_cast<const char*>(buffer_.data().data()), buffer_.size()}, req);
    if (used == 0) return false;
    buffer_.consume(used);
    received_.header = read_at_;
    if (const std::size_t length = req.body().size(); length != 0) {
      s_.heap.note(length);
      if (!body_charge_.add(length)) {
        refuse_budget();
        return true;
      }
    }
    reading_header_ = false;
    complete(std::move(req));
    return true;
  }

  // Asio's read: a recv, and a wait in the event loop when it finds nothing.
  void read_some(std::size_t room) {
    socket_.async_read_some(buffer_.prepare(room), [self = shared_from_this(), room](beast::error_code ec, std::size_t n) {
      self->on_bytes(ec, n, room);
    });
  }

  // A read of up to `room` bytes brought `n` (or ended with `ec`).
  void on_bytes(beast::error_code ec, std::size_t n, std::size_t room) {
    touch_read();
    buffer_.commit(n);
    drained_ = n < room;  // a short read emptied the socket
    if (!ec) return parse();
    if (ec == net::error::eof) {
      if (!parser_->got_some()) {
        ec = bhttp::error::end_of_stream;
      } else {
        ec = {};
        parser_->put_eof(ec);  // a request cannot end at the end of the stream
        if (!ec && !parser_->is_done()) ec = bhttp::error::partial_message;
      }
    }
    parsed(ec);
  }

  // The ready_set reported the socket (or did while the connection was busy): the read is a
  // plain recv, and where it finds nothing the connection waits in the set again, so a report
  // that came for bytes already read costs that one recv and no wait in the event loop.
  void read_reported(std::size_t room) {
    const auto space = buffer_.prepare(room);
    const ssize_t n = ::recv(socket_.native_handle(), space.data(), space.size(), MSG_DONTWAIT);
    if (n > 0) return on_bytes({}, static_cast<std::size_t>(n), room);
    if (n == 0) return on_bytes(net::error::eof, 0, room);
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return on_bytes(beast::error_code(errno, boost::system::system_category()), 0, room);
    if (errno != EINTR && ready_set_->wait(*this)) return;
    read_some(room);  // interrupted, or the set cannot take it: Asio's read
  }

  // A line of the header that starts with a space or a tab continues the one before it (one
  // pass over the line ends).
  static bool folded(std::string_view header) {
    for (std::size_t at = header.find('\n'); at != std::string_view::npos && at + 1 < header.size();
         at = header.find('\n', at + 1))
      if (at > 0 && header[at - 1] == '\r' && (header[at + 1] == ' ' || header[at + 1] == '\t')) return true;
    return false;
  }

  void refuse_folding() {
    auto r = error_reply(400, "obsolete line folding (obs-fold) is not accepted in request headers");
    r.close = true;
    unread_body_ = true;
    write(std::move(r));
  }

  void parsed(beast::error_code ec) {
    if (reading_header_) return on_header(ec);
    on_read(ec);
  }

  // RFC 9112 §6.3: a request with both Transfer-Encoding (chunked last) and Content-Length is
  // read by its transfer coding, and its connection closes after the reply. Beast refuses the
  // pair while it parses the header, having consumed the start line and the fields before the
  // one refused (they are in the parser's message) and left the rest in the buffer. The header
  // is put back together without Content-Length and parsed again.
  bool drop_content_length() {
    const auto& partial = parser_->get();
    const std::string_view rest(static_cast<const char*>(buffer_.data().data()), buffer_.size());
    const auto end = rest.find("\r\n\r\n");
    if (end == std::string_view::npos) return false;
    bool chunked = false, had_length = false;
    auto last_coding_chunked = [](std::string_view value) {
      const auto comma = value.rfind(',');
      std::string_view last = comma == std::string_view::npos ? value : value.substr(comma + 1);
      while (!last.empty() && (last.front() == ' ' || last.front() == '\t')) last.remove_prefix(1);
      while (!last.empty() && (last.back() == ' ' || last.back() == '\t')) last.remove_suffix(1);
      return iso_lower(last) == "chunked";
    };
    std::string head;
    head.append(partial.method_string()).append(" ").append(partial.target());
    head.append(partial.version() == 10 ? " HTTP/1.0\r\n" : " HTTP/1.1\r\n");
    for (const auto& f : partial) {
      if (f.name() == bhttp::field::content_length) {
        had_length = true;
        continue;
      }
      if (f.name() == bhttp::field::transfer_encoding) chunked = last_coding_chunked(f.value());
      head.append(f.name_string()).append(": ").append(f.value()).append("\r\n");
    }
    bool skipping = false;  // inside a dropped field (its obsolete line folds go too)
    for (std::string_view lines = rest.substr(0, end + 2); !lines.empty();) {
      const auto eol = lines.find("\r\n");
      const std::string_view line = lines.substr(0, eol);
      lines.remove_prefix(eol + 2);
      if (!line.empty() && (line.front() == ' ' || line.front() == '\t')) {
        if (!skipping) head.append(line).append("\r\n");
        continue;
      }
      const auto colon = line.find(':');
      const std::string name = iso_lower(line.substr(0, colon));
      skipping = name == "content-length";
      if (skipping) {
        had_length = true;
        continue;
      }
      if (name == "transfer-encoding" && colon != std::string_view::npos)
        chunked = last_coding_chunked(line.substr(colon + 1));
      head.append(line).append("\r\n");
    }
    if (!chunked || !had_length) return false;
    head.append("\r\n").append(rest.substr(end + 4));
    buffer_.consume(buffer_.size());
    buffer_.commit(net::buffer_copy(buffer_.prepare(head.size()), net::buffer(head)));
    return true;
  }

  void on_header(beast::error_code ec) {
    received_.header = read_at_;  // the read that completed the header
    if ((ec == bhttp::error::bad_content_length || ec == bhttp::error::bad_transfer_encoding) &&
        !framing_rewritten_ && drop_content_length()) {
      framing_rewritten_ = true;
      return parse_header();
    }
    if (ec) return on_read_error(ec);
    const auto& req = parser_->get();
    // (A request whose body came with its header has nothing to wait for: no lookup.)
    if (!parser_->is_done() && iso_lower(req[bhttp::field::expect]) == "100-continue") {
      continue_ = std::make_shared<std::string>("HTTP/1.1 100 Continue\r\n\r\n");
      net::async_write(socket_, net::buffer(*continue_),
                       [self = shared_from_this()](beast::error_code e, std::size_t) {
                         if (e) return self->close();
                         self->read_body();
                       });
      return;
    }
    read_body();
  }

  void read_body() {
    if (parser_->is_done()) return on_read({});
    auto length = parser_->content_length();
    if (length && *length > s_.max_body_size()) return on_read_error(bhttp::error::body_limit);
    if (length) s_.heap.note(*length);
    if (!parser_->chunked() && length && *length >= direct_body_threshold && !metrics_)
      return read_body_directly(*length);
    // Small bodies: what a body may hold is charged up front (at most the threshold); chunked
    // bodies are charged chunk by chunk in chunk_cb_.
    if (length && !body_charge_.add(*length)) return refuse_budget();
    reading_header_ = false;
    parser_->eager(true);
    parse();
  }

  // Large bodies: the bytes already buffered, then reads straight into a buffer that grows as
  // bytes arrive (large recv calls, no parser copies, no zero-fill).
  void read_body_directly(std::uint64_t length) {
    direct_ = parser_->release();
    direct_body_ = std::make_shared<body_buffer>(static_cast<std::size_t>(length), s_.body_budget);
    while (buffer_.size() > 0 && !direct_body_->complete()) {
      if (direct_body_->full() && !direct_body_->grow()) return refuse_budget();
      const std::size_t n = net::buffer_copy(direct_body_->free_space(), buffer_.data());
      buffer_.consume(n);
      direct_body_->commit(n);
    }
    read_more_directly();
  }

  void read_more_directly() {
    body_buffer& b = *direct_body_;
    if (b.empty_capacity() && !b.complete()) {
      // Nothing is allocated for a body before its first bytes arrive.
      socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this()](beast::error_code ec) {
        if (ec) return self->close();
        if (!self->direct_body_->grow()) return self->refuse_budget();
        self->read_more_directly();
      });
      return;
    }
    if (b.complete()) {
      keep_alive_ = direct_.keep_alive();
      received_.body = read_at_;
      in_flight_.emplace(s_.in_flight);
      return dispatch(std::move(direct_), std::move(direct_body_));
    }
    if (b.full() && !b.grow()) return refuse_budget();
    socket_.async_read_some(b.free_space(), [self = shared_from_this(), room = b.free_space().size()](beast::error_code ec, std::size_t n) {
      self->touch_read();
      self->drained_ = n < room;
      if (ec) return self->close();
      self->direct_body_->commit(n);
      self->read_more_directly();
    });
  }

  // The in-flight budget is exhausted (or the system has no memory for the body): the client
  // is told so and the connection closed, since the rest of its body is not read.
  void refuse_budget() {
    direct_body_.reset();
    body_charge_.reset();
    unread_body_ = true;
    auto r = budget_reply(s_.body_budget);
    r.close = true;
    write(std::move(r));
  }

  // Hands a complete request to the endpoints. Every exception out of its handling (an
  // allocation failure, above all) becomes an error reply for that request; the connection and
  // the server go on.
  void dispatch(http_request&& req, std::shared_ptr<body_buffer> big = {}) {
    head_request_ = req.method() == bhttp::verb::head;
    executing_ = true;  // the watchdog leaves a connection alone while its request runs
    try {
      if (auto r = endpoints_.handle(std::move(req), std::move(big), shared_from_this(), received_)) {
        executing_ = false;
        write(std::move(*r));
      } else if (executing_) {
        watch_peer();  // the reply comes later: notice a client that hangs up meanwhile
      }
    } catch (...) {
      executing_ = false;
      write(error_reply(exception_status()));
    }
  }

  // A reply that comes after dispatch returned (or, for an inline inference, before): written
  // on this connection's thread.
  void respond(reply r) override {
    net::dispatch(socket_.get_executor(), [self = shared_from_this(), r = std::move(r)]() mutable {
      self->executing_ = false;
      if (self->watching_peer_) {
        self->watching_peer_ = false;
        beast::error_code ignored;
        self->socket_.cancel(ignored);  // the wait of watch_peer (nothing else is pending)
      }
      self->write(std::move(r));
    });
  }

  const std::atomic<bool>* gone() const noexcept override { return &gone_; }

  // While a request waits for its reply nothing reads the socket; a wait for readability tells
  // an end of stream or a reset (the client gave up: queued work for it is skipped) from the
  // next pipelined request (left where it is).
  void watch_peer() {
    watching_peer_ = true;
    socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this()](beast::error_code ec) {
      if (ec || !self->watching_peer_) return;
      self->watching_peer_ = false;
      char c;
      const ssize_t n = ::recv(self->socket_.native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
        self->gone_.store(true, std::memory_order_relaxed);
    });
  }

  void on_read_error(beast::error_code ec) {
    if (budget_refused_) return refuse_budget();
    if (chunk_overflow_ || ec == bhttp::error::body_limit) unread_body_ = true;
    if (chunk_overflow_) {
      auto r = error_reply(400,
                           "Chunked request body exceeds maximum of 65536 non-empty chunks. Send "
                           "fewer or larger HTTP chunks.");
      r.close = true;
      return write(std::move(r));
    }
    if (ec == bhttp::error::end_of_stream || ec == net::error::eof ||
        ec == beast::error::timeout || ec == bhttp::error::partial_message ||
        ec == net::error::connection_reset || ec == net::error::operation_aborted)
      return close();
    reply r;
    if (ec == bhttp::error::header_limit) {
      r = error_reply(431, "Request header fields too large");
    } else if (ec == bhttp::error::body_limit) {
      r = error_reply(413, "Request body too large");
    } else if (ec == bhttp::error::bad_content_length) {
      r = error_reply(400, "Unable to parse Content-Length");
    } else {
      r = error_reply(400, "Bad Request");
    }
    r.close = true;
    write(std::move(r));
  }

  void on_read(beast::error_code ec) {
    if (ec) return on_read_error(ec);
    // (A chunked body's trailer fields are not among the request's: it is judged by its header
    // block alone, so a restricted API's key arriving after the body does not count.)
    complete(parser_->release());
  }

  // A whole request, parsed or recalled.
  void complete(http_request&& req) {
    // A request framed by both Transfer-Encoding and Content-Length closes its connection.
    keep_alive_ = req.keep_alive() && !framing_rewritten_;
    received_.body = read_at_;  // the read that completed the body
    in_flight_.emplace(s_.in_flight);
    if (metrics_) {
      head_request_ = req.method() == bhttp::verb::head;
      return write(endpoints_.metrics(req));
    }
    dispatch(std::move(req));
  }

  void write(reply r) {
    reply_ = std::move(r);
    const bool keep = keep_alive_ && !reply_.close && !s_.exiting;
    std::size_t length = reply_.body.size();
    for (const auto& b : reply_.extra) length += b.size();
    // The head: literals and fields appended with their lengths known (the status line of a
    // 200 in one piece), numbers written in place.
    using namespace std::string_view_literals;
    char digits[24];
    auto number = [&digits](std::size_t n) {
      return std::string_view(digits, static_cast<std::size_t>(std::to_chars(digits, digits + sizeof digits, n).ptr - digits));
    };
    head_.clear();
    if (reply_.status == 200) {
      head_.append("HTTP/1.1 200 OK\r\n"sv);
    } else {
      head_.append("HTTP/1.1 "sv).append(number(reply_.status)).append(" "sv);
      head_.append(bhttp::obsolete_reason(static_cast<bhttp::status>(reply_.status))).append("\r\n"sv);
    }
    if (!reply_.content_type.empty())
      head_.append("Content-Type: "sv).append(reply_.content_type).append("\r\n"sv);
    if (reply_.header_length)
      head_.append(inferwire::v2::header_length_field).append(": "sv).append(number(*reply_.header_length)).append("\r\n"sv);
    for (const auto& [k, v] : reply_.fields) head_.append(k).append(": "sv).append(v).append("\r\n"sv);
    if (!keep) head_.append("Connection: close\r\n"sv);
    if (reply_.stream) {
      head_.append("Transfer-Encoding: chunked\r\n\r\n"sv);
      return start_stream(keep);
    }
    head_.append("Content-Length: "sv).append(number(length)).append("\r\n\r\n"sv);
    buffers_.clear();
    buffers_.push_back(net::buffer(head_));
    // A reply to HEAD has the headers GET would have, and never a body (RFC 9110 §9.3.2).
    if (!head_request_) {
      if (!reply_.body.empty()) buffers_.push_back(net::buffer(reply_.body));
      for (auto seg : reply_.extra) buffers_.push_back(net::buffer(seg.data(), seg.size()));
    }
    if (reply_.trace) reply_.trace->stamp_now("HTTP_SEND_START");
    // A reply that fits in the socket's send buffer (nearly all of them) goes out in one
    // non-blocking send, with no asynchronous operation; the rest follows asynchronously.
    beast::error_code ec;
    const std::size_t sent = socket_.write_some(std::span<const net::const_buffer>(buffers_), ec);
    if (ec && ec != net::error::would_block && ec != net::error::try_again) return written(ec, keep);
    std::size_t skip = ec ? 0 : sent;
    auto first = buffers_.begin();
    while (first != buffers_.end() && skip >= first->size()) skip -= (first++)->size();
    buffers_.erase(buffers_.begin(), first);
    if (buffers_.empty()) {
      // Pipelined bytes wait in the buffer: the next request starts from the executor, so one
      // client's pipeline neither nests requests inside one another nor holds the thread.
      if (buffer_.size() != 0)
        return net::post(socket_.get_executor(), [self = shared_from_this(), keep] { self->written({}, keep); });
      return written({}, keep);
    }
    buffers_.front() += skip;
    // A view of the list: the write keeps a copy of its buffer sequence.
    net::async_write(socket_, std::span<const net::const_buffer>(buffers_), transfer_all_unbounded,
                     [self = shared_from_this(), keep](beast::error_code e, std::size_t) {
                       self->written(e, keep);
                     });
  }

  // A streamed reply: its head, then its events as the producer makes them (each batch of
  // waiting events in one write, as HTTP chunks), then the last chunk once it ends. While the
  // producer works the connection counts as executing; while a write waits for the client, it
  // does not, so a client that stops reading is closed after the stall timeout, and the
  // producer learns that nobody reads any more.
  void start_stream(bool keep) {
    if (reply_.trace) reply_.trace->stamp_now("HTTP_SEND_START");
    stream_out_ = std::move(head_);
    write_stream(keep, false);
  }

  void stream_next(bool keep) {
    bool ended = false;
    const auto got = reply_.stream->take(events_, std::numeric_limits<std::size_t>::max(), ended, [self = shared_from_this(), keep] {
      net::post(self->socket_.get_executor(), [self, keep] { self->stream_next(keep); });
    });
    if (got == rest::reply_stream::taken::waiting) {
      executing_ = true;  // the model is working; the wake-up comes from its thread
      return;
    }
    // The queue broke (its stall or exit rule): the body is cut short, so the connection closes
    // without the last chunk (a client must not take the stream for complete).
    if (got == rest::reply_stream::taken::broken) return written(net::error::operation_aborted, false);
    char digits[20];
    for (const auto& e : events_) {
      if (e.empty()) continue;  // an empty chunk would end the body
      const auto end = std::to_chars(digits, digits + sizeof digits, e.size(), 16).ptr;
      stream_out_.append(digits, end).append("\r\n").append(e).append("\r\n");
    }
    events_.clear();
    if (ended) stream_out_.append("0\r\n\r\n");
    write_stream(keep, ended);
  }

  void write_stream(bool keep, bool ended) {
    executing_ = false;
    touch();
    net::async_write(socket_, net::buffer(stream_out_),
                     [self = shared_from_this(), keep, ended](beast::error_code ec, std::size_t) {
                       self->stream_out_.clear();
                       if (ec) {
                         self->reply_.stream->broken();
                         return self->written(ec, keep);
                       }
                       if (ended) return self->written({}, keep);
                       self->touch();
                       self->stream_next(keep);
                     });
  }

  void written(beast::error_code ec, bool keep) {
    touch();
    if (const auto& trace = reply_.trace) {
      trace->stamp_now("HTTP_SEND_END");
      s_.traces.finish(*trace);
    }
    finish(!ec && keep);
  }

  void finish(bool keep) {
    spare_strings::give(std::move(reply_.body));  // for a later reply's header (encode)
    reply_ = {};
    head_request_ = false;
    body_charge_.reset();
    in_flight_.reset();
    if (!keep) return unread_body_ ? linger() : close();
    if (buffer_.size() != 0) return read_header();
    // Between two requests, with nothing buffered, the connection may move to another I/O
    // thread (its socket's queued bytes go with it).
    if (!metrics_) {
      const std::size_t to = s_.io_threads->rehome(thread_);
      if (to != thread_) return move_to(to);
    }
    // Asio starts a read with a recv before it waits for readiness, and right after a reply
    // that recv nearly always finds nothing. A connection whose last read emptied its socket
    // waits in the thread's ready_set instead, where it costs no system call of its own, once
    // its thread carries enough connections; otherwise (and when its socket was reported
    // meanwhile) the next read starts at once. Starting it behind the ready handlers instead was
    // measured and cost more (the event loop then polled epoll more often), and waiting with
    // async_wait costs an epoll_ctl each time.
    if (drained_ && ready_set::contains(*this) &&
        s_.io_threads->connections(thread_) >= ready_set_connections) {
      if (ready_set_->wait(*this)) return;
      return on_ready();  // reported meanwhile
    }
    read_header();
  }

  // The ready_set reported the socket of this waiting connection.
  void on_ready() override {
    own_read_ = true;
    read_header();
  }
  // Before the socket is closed or handed over.
  void leave_ready_set() noexcept {
    if (ready_set_) ready_set_->remove(*this);
  }

  // The client may still be sending the body we refused: closing with its bytes unread would
  // reset the connection and could destroy the reply before the client reads it. Stop
  // sending, discard what still comes for a short while, then close.
  void linger() {
    beast::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_send, ec);
    if (!linger_buffer_) linger_buffer_ = std::make_unique<std::array<char, 16384>>();
    linger_deadline_ = clock::now() + std::chrono::seconds(2);
    drain();
  }
  void drain() {
    if (clock::now() > linger_deadline_) return close();
    socket_.async_read_some(net::buffer(*linger_buffer_), [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (ec) return self->close();
      self->drain();
    });
  }

  // The socket goes to a new connection object on thread `to` (already counted there); this one
  // ends once the watchdog's cancelled wait has run.
  void move_to(std::size_t to) {
    moved_ = true;
    watchdog_.cancel();
    leave_ready_set();
    beast::error_code ec;
    const auto protocol = socket_.local_endpoint(ec).protocol();
    const int fd = ec ? -1 : socket_.release(ec);
    server_state& s = s_;
    if (ec || fd < 0) {
      s.io_threads->closed(to);
      return close();
    }
    net::post(*s.ios[to], [&s, to, protocol, fd] {
      socket_type moved(*s.ios[to]);
      beast::error_code e;
      moved.assign(protocol, fd, e);
      if (e) {
        ::close(fd);
        s.io_threads->closed(to);
        return;
      }
      std::make_shared<session>(std::move(moved), s, false, to)->start();
    });
  }

  void close() {
    in_flight_.reset();
    leave_ready_set();
    beast::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_send, ec);
    socket_.close(ec);
    watchdog_.cancel();
  }

  socket_type socket_;
  timer_type watchdog_;
  clock::time_point last_progress_;
  clock::time_point read_at_;  ///< when the last read brought bytes
  bool executing_ = false;
  bool watching_peer_ = false;
  std::atomic<bool> gone_{false};
  beast::flat_buffer buffer_;
  http_request direct_;
  std::shared_ptr<body_buffer> direct_body_;
  std::string head_;
  server_state& s_;
  rest::endpoints endpoints_;
  bool metrics_;
  std::size_t thread_;  ///< the I/O thread it runs on
  bool moved_ = false;  ///< its socket went to another thread's connection
  ready_set* ready_set_ = nullptr;  ///< its I/O thread's (not for the metrics port's connections)
  bool drained_ = false;        ///< its last read was short: the socket had nothing more
  bool own_read_ = false;       ///< the next read is read_reported's, not Asio's
  std::optional<rest::request_parser> parser_;
  rest::http_header_memo memo_;  ///< the last plain header, for requests that repeat it
  rest::request_parser::chunk_callback chunk_cb_;
  std::size_t chunks_ = 0;
  std::uint64_t chunked_bytes_ = 0;  ///< the chunked body's bytes so far
  bool chunk_overflow_ = false;
  bool budget_refused_ = false;
  bool unread_body_ = false;  ///< a refused body's bytes may still be arriving
  std::unique_ptr<std::array<char, 16384>> linger_buffer_;
  clock::time_point linger_deadline_;
  byte_budget::charge body_charge_{s_.body_budget};  ///< the parser-read body of this request
  bool keep_alive_ = true;
  bool head_request_ = false;  ///< the request being answered is a HEAD
  bool framing_rewritten_ = false;  ///< Content-Length dropped for Transfer-Encoding (close after)
  bool reading_header_ = true;  ///< parse() reads up to the end of the header, else of the message
  rest::receive_times received_;  ///< when the current request's header and body arrived
  /// The request being answered counts as in flight (a shutdown drains it) until its reply
  /// is written or the connection closes.
  std::optional<in_flight_token> in_flight_;
  std::shared_ptr<std::string> continue_;
  reply reply_;
  std::vector<net::const_buffer> buffers_;
  std::string stream_out_;           ///< a streamed reply's bytes being written
  std::vector<std::string> events_;  ///< a streamed reply's events taken for the next write
};


void rest::serve_connection(socket_type&& socket, server_state& s, bool metrics, std::size_t thread) {
  if (!metrics) s.io_threads->opened(thread);
  std::make_shared<session>(std::move(socket), s, metrics, thread)->start();
}

}  // namespace inferwire::server
