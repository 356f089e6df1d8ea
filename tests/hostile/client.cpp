// SPDX-License-Identifier: Apache-2.0
// The HTTP client against a hostile server of our own: endless and lying bodies, gzip bombs,
// endless Server-Sent Events, malformed replies, stalls and trickles. Each case asserts a clear
// error, a bounded peak of resident memory (the client runs in this process: its peak is reset
// before each case) and the call's deadline.
#include "proc.hpp"
#include "request.hpp"

#include <inferwire/http/client.hpp>

#include <catch2/catch.hpp>

#include <zlib.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

// One program holds every hostile test file as one translation unit: this file's names stay
// in its own namespace.
namespace hostile_http_client {

namespace ih = inferwire::http;
namespace v2 = inferwire::v2;
using namespace std::chrono_literals;

namespace {

// Writes all of `bytes`; false once the client has gone.
bool send_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const auto n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

// A server that answers every request on 127.0.0.1 with `script(fd)`, one connection at a time,
// after reading the request's header and its Content-Length body.
class hostile_server {
 public:
  using script = std::function<void(int fd)>;
  explicit hostile_server(script s) : script_(std::move(s)) {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(listener_, 16) == 0);
    socklen_t len = sizeof a;
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~hostile_server() {
    stop_ = true;
    thread_.join();
    ::close(listener_);
  }
  std::string port() const { return std::to_string(port_); }

 private:
  void serve() {
    while (!stop_) {
      pollfd p{listener_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      if (read_request(fd)) script_(fd);
      ::close(fd);
    }
  }
  static bool read_request(int fd) {
    std::string in;
    char buf[65536];
    std::size_t end = std::string::npos;
    while ((end = in.find("\r\n\r\n")) == std::string::npos) {
      const auto n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return false;
      in.append(buf, static_cast<std::size_t>(n));
    }
    std::size_t length = 0;
    for (const char* name : {"Content-Length: ", "content-length: "})
      if (auto at = in.find(name); at != std::string::npos && at < end) length = std::stoul(in.substr(at + std::strlen(name)));
    while (in.size() < end + 4 + length) {
      const auto n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return false;
      in.append(buf, static_cast<std::size_t>(n));
    }
    return true;
  }
  script script_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

constexpr std::size_t limit = std::size_t{64} << 20;  // the clients' max_response_size here


std::string gzip_of_zeros(std::size_t n) {
  z_stream zs{};
  REQUIRE(deflateInit2(&zs, 9, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY) == Z_OK);
  const std::string zeros(1 << 20, '\0');
  std::string out;
  char buf[1 << 16];
  for (std::size_t left = n; left > 0 || zs.avail_in > 0;) {
    if (zs.avail_in == 0 && left > 0) {
      const std::size_t take = std::min(left, zeros.size());
      zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(zeros.data()));
      zs.avail_in = static_cast<uInt>(take);
      left -= take;
    }
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof buf;
    deflate(&zs, left == 0 ? Z_FINISH : Z_NO_FLUSH);
    out.append(buf, sizeof buf - zs.avail_out);
    if (left == 0 && zs.avail_in == 0) {
      int rc;
      do {
        zs.next_out = reinterpret_cast<Bytef*>(buf);
        zs.avail_out = sizeof buf;
        rc = deflate(&zs, Z_FINISH);
        out.append(buf, sizeof buf - zs.avail_out);
      } while (rc != Z_STREAM_END);
      break;
    }
  }
  deflateEnd(&zs);
  return out;
}

// What one call did: its error, how long it took and how far the process's resident memory
// peaked above where it was.
struct outcome {
  ih::error_code ec;
  std::chrono::milliseconds took{};
  std::uint64_t peak_mib = 0;
};

template <class Call>
outcome measured(Call&& call) {
  const pid_t self = ::getpid();
  REQUIRE(hostile::reset_peak(self));
  const auto base = hostile::rss_mib(self);
  const auto t0 = std::chrono::steady_clock::now();
  outcome o;
  call(o.ec);
  o.took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  const auto peak = hostile::peak_rss_mib(self);
  o.peak_mib = peak > base ? peak - base : 0;
  return o;
}

const std::string ok_chunked = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";

// Chunks of 1 MiB of `fill` until the client goes away.
void endless_chunks(int fd, char fill) {
  const std::string chunk = "100000\r\n" + std::string(1 << 20, fill) + "\r\n";
  for (int i = 0; i < 4096 && send_all(fd, chunk); ++i) {
  }
}

// One chunk holding one Server-Sent Event of 512 KiB of `fill`.
std::string event_chunk(char fill) {
  const std::string event = "data: {\"text_output\":\"" + std::string(512 << 10, fill) + "\"}\n\n";
  char size[32];
  std::snprintf(size, sizeof size, "%zx\r\n", event.size());
  return size + event + "\r\n";
}

struct hostile_case {
  const char* name;
  std::function<void(int)> script;
  std::function<void(ih::client&, ih::error_code&)> call;
  std::function<void(const outcome&)> check;
  std::chrono::milliseconds timeout{0};
};

}  // namespace

TEST_CASE("hostile client: the default reply limit cannot be turned into gigabytes", "[hostile][client]") {
  ih::client_options o;
  CHECK(o.max_response_size == std::size_t{256} << 20);
}

TEST_CASE("hostile client: the HTTP client survives every case of the table", "[hostile][client]") {
  const std::string sse_header = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
  auto infer = [](ih::client& c, ih::error_code& ec) { (void)c.infer("simple", hostile::small_request(), ec); };
  // The call failed, having held about the 64 MiB limit at most (not twice it).
  const auto failed_near_limit = [](const outcome& o) {
    CHECK(o.ec);
    CHECK(o.peak_mib < 64 + 64 / 2 + 16);
  };
  // The call ended with `timeout` at its 500 ms deadline, not when the server let it.
  const auto timed_out = [](const outcome& o) {
    CHECK(o.ec == boost::beast::error::timeout);
    CHECK(o.took < 1500ms);
  };
  const std::vector<hostile_case> table = {
      {"an endless chunked reply stops at the limit, in about the limit's memory",
       [](int fd) {
         if (send_all(fd, ok_chunked)) endless_chunks(fd, 'x');
       },
       infer,
       failed_near_limit},
      {"a reply that announces 8 GiB and sends 1 MiB reserves nothing it did not read",
       [](int fd) {
         if (send_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: 8589934592\r\n\r\n"))
           send_all(fd, std::string(1 << 20, 'x'));
       },
       infer,
       [](const outcome& o) {
         CHECK(o.ec);
         CHECK(o.peak_mib < 16);
       }},
      {"a gzip bomb inflates no further than the limit",
       [](int fd) {
         static const std::string bomb = gzip_of_zeros(std::size_t{1} << 30);  // 1 GiB of zeros, about 1 MiB
         send_all(fd, "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: " + std::to_string(bomb.size()) +
                          "\r\n\r\n" + bomb);
       },
       infer,
       [](const outcome& o) {
         CHECK(o.ec == ih::client_errc::bad_response);
         CHECK(o.peak_mib < 64 + 64 / 2 + 16);
       }},
      {"a malformed JSON reply is a bad response",
       [](int fd) { send_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n{\"model_\""); },
       infer, [](const outcome& o) { CHECK(o.ec == ih::client_errc::bad_response); }},
      {"an Inference-Header-Content-Length past the body is a bad response",
       [](int fd) {
         send_all(fd, "HTTP/1.1 200 OK\r\nInference-Header-Content-Length: 1000\r\nContent-Length: 2\r\n\r\n{}");
       },
       infer, [](const outcome& o) { CHECK(o.ec == ih::client_errc::bad_response); }},
      {"binary outputs whose binary_data_size passes the body are a bad response",
       [](int fd) {
         const std::string header =
             R"({"model_name":"simple","outputs":[{"name":"OUTPUT0","datatype":"INT32","shape":[1,16],)"
             R"("parameters":{"binary_data_size":1048576}}]})";
         send_all(fd, "HTTP/1.1 200 OK\r\nInference-Header-Content-Length: " + std::to_string(header.size()) +
                          "\r\nContent-Length: " + std::to_string(header.size() + 64) + "\r\n\r\n" + header +
                          std::string(64, '\0'));
       },
       infer, [](const outcome& o) { CHECK(o.ec == ih::client_errc::bad_response); }},
      {"a server that stalls after its header meets the deadline",
       [](int fd) {
         send_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n");
         std::this_thread::sleep_for(2s);
       },
       infer,
       timed_out,
       500ms},
      {"a server that keeps sending meets the deadline",
       [](int fd) {
         if (!send_all(fd, ok_chunked)) return;
         const auto until = std::chrono::steady_clock::now() + 5s;
         while (std::chrono::steady_clock::now() < until && send_all(fd, "1\r\nx\r\n"))
           std::this_thread::sleep_for(1ms);
       },
       infer,
       timed_out,
       500ms},
      {"a stream that never pauses meets the deadline",
       [sse_header](int fd) {
         if (!send_all(fd, sse_header)) return;
         std::string burst;
         for (int i = 0; i < 256; ++i) burst += "19\r\ndata: {\"text_output\":1}\n\n\r\n";
         const auto until = std::chrono::steady_clock::now() + 5s;
         while (std::chrono::steady_clock::now() < until && send_all(fd, burst)) {
         }
       },
       [](ih::client& c, ih::error_code& ec) {
         c.generate_stream("m", boost::json::object{}, [](boost::json::object&&) {}, ec);
       },
       timed_out,
       500ms},
      {"an endless Server-Sent Event without its blank line stops at the limit",
       [sse_header](int fd) {
         if (send_all(fd, sse_header) && send_all(fd, "6\r\ndata: \r\n")) endless_chunks(fd, 'x');
       },
       [](ih::client& c, ih::error_code& ec) {
         std::size_t events = 0;
         c.generate_stream("m", boost::json::object{}, [&](boost::json::object&&) { ++events; }, ec);
         CHECK(events == 0);
       },
       failed_near_limit},
      {"a collected stream keeps its events, not its raw body as well, and stops at the limit",
       [sse_header](int fd) {
         if (!send_all(fd, sse_header)) return;
         const std::string chunk = event_chunk('y');  // 512 KiB events, without end
         for (int i = 0; i < 1024 && send_all(fd, chunk); ++i) {
         }
       },
       [](ih::client& c, ih::error_code& ec) { (void)c.generate_stream("m", boost::json::object{}, ec); },
       failed_near_limit},
      {"a collected stream under the limit arrives whole, in about its own size",
       [sse_header](int fd) {
         if (!send_all(fd, sse_header)) return;
         const std::string chunk = event_chunk('z');
         for (int i = 0; i < 64; ++i) send_all(fd, chunk);  // 32 MiB of events
         send_all(fd, "0\r\n\r\n");
       },
       [](ih::client& c, ih::error_code& ec) {
         auto events = c.generate_stream("m", boost::json::object{}, ec);
         CHECK(events.size() == 64);
       },
       [](const outcome& o) {
         CHECK_FALSE(o.ec);
         CHECK(o.peak_mib < 32 + 32 / 2 + 16);
       }},
  };
  for (const auto& c : table) {
    SECTION(c.name) {
      hostile_server server(c.script);
      ih::client_options opts;
      opts.max_response_size = limit;
      opts.timeout = c.timeout;
      ih::client client("127.0.0.1", server.port(), opts);
      const auto o = measured([&](ih::error_code& ec) { c.call(client, ec); });
      INFO(c.name << ": " << o.ec.message() << ", " << o.took.count() << " ms, peak +" << o.peak_mib << " MiB");
      c.check(o);
    }
  }
}

TEST_CASE("hostile client: the deadline holds for asynchronous calls while the server keeps sending",
          "[hostile][client]") {
  hostile_server server([](int fd) {
    if (!send_all(fd, ok_chunked)) return;
    const auto until = std::chrono::steady_clock::now() + 5s;
    while (std::chrono::steady_clock::now() < until && send_all(fd, "1\r\nx\r\n")) std::this_thread::sleep_for(1ms);
  });
  boost::asio::io_context ioc;
  ih::client_options opts;
  opts.timeout = 500ms;
  ih::client client(ioc.get_executor(), "127.0.0.1", server.port(), opts);
  ih::error_code got;
  bool done = false;
  const auto t0 = std::chrono::steady_clock::now();
  client.async_infer("simple", hostile::small_request(), [&](ih::error_code ec, ih::infer_result) {
    got = ec;
    done = true;
  });
  ioc.run_for(5s);
  CHECK(done);
  CHECK(got == boost::beast::error::timeout);
  CHECK(std::chrono::steady_clock::now() - t0 < 1500ms);
}

}  // namespace hostile_http_client
