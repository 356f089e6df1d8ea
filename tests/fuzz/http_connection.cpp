// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the bytes a client sends on one TCP connection to inferwire-server, as far
// as its HTTP connection layer (reference_server/src/http_connection.cpp) and what it calls:
// request framing (Content-Length, chunked bodies and their extensions and trailers, both at
// once, HTTP/1.0), keep-alive and pipelining, Expect: 100-continue, bodies read outside the
// parser, the header and body limits, the in-flight byte budget, HEAD, and the metrics port.
// http_endpoints fuzzes what the requests mean; here the listener, the sessions and the
// endpoints run as in the server, on an I/O thread of their own, over loopback.
//
// The first byte steers: bit 0 sends to the metrics port instead of the HTTP port; bits 1-2
// cut the rest into 1-4 writes with a pause between them, so that the server sees a header,
// a chunk or a body arrive in parts. Then the client shuts down its sending side and reads
// until the server closes.
//
// Findings, beyond the sanitizers': an exception out of an I/O handler; a connection the
// server has not closed 10 s after the client finished sending; replies that do not parse as
// HTTP/1.1 responses (a status outside 100 and 200-599, no Content-Length and no chunked event
// stream, a truncated body, an event that is not `data: <JSON>`,
// bytes after a reply that said `Connection: close`, a JSON body that does not parse); and,
// once the connection is gone, sockets or in-flight body bytes the server still holds.
#include "http.hpp"
#include "server.hpp"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/json/parse.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <thread>

#include <arpa/inet.h>
#include <cerrno>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace {

namespace srv = inferwire::server;
namespace bhttp = boost::beast::http;
using std::chrono::steady_clock;

srv::options connection_options() {
  srv::options o;
  o.model_repositories = {INFERWIRE_SOURCE_DIR "/reference_server/models"};
  o.http_thread_count = 1;
  o.execution_thread_count = 1;
  o.http_max_input_size = 64 * 1024;
  // Small enough that a few announced chunks or one direct body exhaust it.
  o.http_max_inflight_bytes = 128 * 1024;
  o.log_info = o.log_warning = o.log_error = false;
  return o;
}

/// The process's open sockets (the server's listeners, its connections). Other descriptors
/// come and go with lazily started event loops and are not a connection's.
std::size_t open_sockets() {
  std::size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const auto target = std::filesystem::read_symlink(e.path(), ec);
    n += !ec && target.native().starts_with("socket:");
  }
  return n;
}

[[noreturn]] void finding(const char* what, std::string_view replies) {
  std::fprintf(stderr, "http_connection: %s; %zu reply bytes:\n%.*s\n", what, replies.size(),
               static_cast<int>(std::min<std::size_t>(replies.size(), 4096)), replies.data());
  __builtin_trap();
}

struct connection_fixture {
  srv::server_state s{connection_options()};
  std::shared_ptr<srv::listener> http, metrics;
  int http_port = 0, metrics_port = 0;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work{s.ios.front()->get_executor()};
  std::thread io;
  std::size_t baseline_sockets = 0;

  connection_fixture() {
    if (s.ios.size() != 1) __builtin_trap();
    s.repository.startup(s.opts.load_models, 1);
    inferwire::status st;
    http = srv::start_listener(s, "127.0.0.1", 0, false, st, http_port);
    if (st) __builtin_trap();
    metrics = srv::start_listener(s, "127.0.0.1", 0, true, st, metrics_port);
    if (st) __builtin_trap();
    io = std::thread([this] {
      try {
        s.ios.front()->run();
      } catch (...) {
        __builtin_trap();  // the server logs it and goes on, losing the connection: a finding here
      }
    });
    baseline_sockets = open_sockets();
  }
  ~connection_fixture() {
    work.reset();
    s.stop_io();
    io.join();
  }
};

struct received {
  std::string bytes;
  bool reset = false;  ///< the server closed with bytes unread: what was in flight may be lost
};

/// Sends `parts` over a fresh connection (pausing between them), then half-closes it and reads
/// until the server closes: what the server wrote.
received converse(int port, const std::vector<std::string_view>& parts) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) __builtin_trap();
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 && errno != EINPROGRESS)
    __builtin_trap();
  std::string got;
  char buf[16384];
  bool reset = false;
  // Reads what is there; false once the server has closed (or reset) the connection.
  auto drain = [&] {
    for (;;) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n > 0) {
        got.append(buf, static_cast<std::size_t>(n));
        continue;
      }
      if (n == 0) return false;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      if (errno == EINTR) continue;
      reset = true;  // the server closed with unread bytes: a reset, after what it had sent
      return false;
    }
  };
  const auto deadline = steady_clock::now() + std::chrono::seconds(10);
  bool open = true;
  for (std::size_t i = 0; i < parts.size() && open; ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    std::string_view left = parts[i];
    while (!left.empty() && open) {
      pollfd p{fd, POLLIN | POLLOUT, 0};
      if (::poll(&p, 1, 1000) < 0 && errno != EINTR) __builtin_trap();
      if (steady_clock::now() > deadline) finding("the server neither reads nor closes", got);
      if (p.revents & (POLLIN | POLLHUP | POLLERR)) open = drain();
      if (!open) break;
      if (p.revents & POLLOUT) {
        const ssize_t n = ::send(fd, left.data(), left.size(), MSG_NOSIGNAL);
        if (n > 0) left.remove_prefix(static_cast<std::size_t>(n));
        else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) open = drain();
      }
    }
  }
  if (open) ::shutdown(fd, SHUT_WR);
  while (open) {
    pollfd p{fd, POLLIN, 0};
    const auto left = deadline - steady_clock::now();
    if (left <= std::chrono::seconds(0)) finding("the connection is still open 10 s after the client finished", got);
    const int r = ::poll(&p, 1, static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(left).count()) + 1);
    if (r < 0 && errno != EINTR) __builtin_trap();
    if (r > 0) open = drain();
  }
  ::close(fd);
  return {std::move(got), reset};
}

/// The server's bytes must be a sequence of whole HTTP/1.1 responses.
/// After a reset the last reply may be cut short.
void check_replies(const received& r, bool may_be_head) {
  const std::string_view all = r.bytes;
  std::string_view rest = all;
  while (!rest.empty()) {
    bhttp::response_parser<bhttp::string_body> header;
    header.header_limit(64 * 1024);
    header.body_limit(std::uint64_t{1} << 26);
    boost::beast::error_code ec;
    std::size_t used = header.put(boost::asio::buffer(rest.data(), rest.size()), ec);
    if ((ec == bhttp::error::need_more || (!ec && !header.is_header_done())) && r.reset) return;
    if (ec || !header.is_header_done()) finding("a reply header that does not parse", all);
    const auto& h = header.get();
    const unsigned code = h.result_int();
    if (code != 100 && (code < 200 || code > 599)) finding("a status outside 100 and 200-599", all);
    if (code == 100) {
      rest.remove_prefix(used);
      continue;
    }
    if (h.chunked()) {
      // A streamed reply (generate_stream): Server-Sent Events in chunks, then the last chunk.
      if (h[bhttp::field::content_type] != "text/event-stream; charset=utf-8")
        finding("a chunked reply that is not an event stream", all);
      bhttp::response_parser<bhttp::string_body> whole;
      whole.header_limit(64 * 1024);
      whole.body_limit(std::uint64_t{1} << 26);
      whole.eager(true);
      const std::size_t n = whole.put(boost::asio::buffer(rest.data(), rest.size()), ec);
      if (ec == bhttp::error::need_more || (!ec && !whole.is_done())) {
        if (r.reset) return;
        finding("a truncated chunked reply", all);
      }
      if (ec) finding("a chunked reply that does not parse", all);
      std::string_view events = whole.get().body();
      while (!events.empty()) {
        const auto end = events.find("\n\n");
        if (!events.starts_with("data: ") || end == std::string_view::npos)
          finding("an event that is not `data: ...` and a blank line", all);
        boost::system::error_code jec;
        (void)boost::json::parse(events.substr(6, end - 6), jec);
        if (jec) finding("an event whose data is not JSON", all);
        events.remove_prefix(end + 2);
      }
      rest.remove_prefix(n);
      if (!whole.get().keep_alive() && !rest.empty()) finding("bytes after a reply that closed the connection", all);
      continue;
    }
    if (!h.has_content_length()) finding("a reply without Content-Length", all);
    const bool close = !h.keep_alive();
    std::string_view after = rest.substr(used);
    // A reply to HEAD announces the length GET's would have, and has no body.
    const bool bodiless = may_be_head && (after.empty() || after.starts_with("HTTP/1.1 ")) &&
                          *header.content_length() > 0;
    if (!bodiless) {
      if (after.size() < *header.content_length()) {
        if (r.reset) return;
        finding("a truncated reply body", all);
      }
      const std::string_view body = after.substr(0, *header.content_length());
      if (h[bhttp::field::content_type] == "application/json" && !body.empty()) {
        boost::system::error_code jec;
        (void)boost::json::parse(body, jec);
        if (jec) finding("a JSON reply that does not parse", all);
      }
      after.remove_prefix(body.size());
    }
    if (close && !after.empty()) finding("bytes after a reply that closed the connection", all);
    rest = after;
  }
}

/// Once the connection is closed the server lets go of everything it held for it; the session
/// ends on the I/O thread shortly after the close.
void check_released(connection_fixture& f) {
  const auto deadline = steady_clock::now() + std::chrono::seconds(5);
  for (;;) {
    const bool sockets = open_sockets() <= f.baseline_sockets;
    const bool budget = f.s.body_budget.used() == 0;
    const bool idle = f.s.in_flight.load() == 0;
    if (sockets && budget && idle) return;
    if (steady_clock::now() > deadline) {
      std::fprintf(stderr, "http_connection: sockets %zu (at start %zu), budget %llu bytes, %lld in flight\n",
                   open_sockets(), f.baseline_sockets,
                   static_cast<unsigned long long>(f.s.body_budget.used()),
                   static_cast<long long>(f.s.in_flight.load()));
      finding("the server holds what a closed connection had", {});
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static connection_fixture f;
  if (size < 2) return 0;
  const std::uint8_t steer = data[0];
  const std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  const bool to_metrics = steer & 1;
  const std::size_t pieces = std::min<std::size_t>(1 + ((steer >> 1) & 3), bytes.size());
  std::vector<std::string_view> parts;
  for (std::size_t i = 0, at = 0; i < pieces; ++i) {
    const std::size_t end = i + 1 == pieces ? bytes.size() : bytes.size() * (i + 1) / pieces;
    parts.push_back(bytes.substr(at, end - at));
    at = end;
  }
  const received replies = converse(to_metrics ? f.metrics_port : f.http_port, parts);
  check_replies(replies, bytes.find("HEAD") != std::string_view::npos);
  check_released(f);
  return 0;
}
