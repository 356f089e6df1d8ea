// SPDX-License-Identifier: Apache-2.0
// The HTTP load generator shared by the benchmarks: keep-alive connections, each sending one
// request text back to back, on one thread (so it costs the same for every server it drives).
#pragma once

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace bench {

struct load_result {
  // Requests per second and latency percentiles (µs) of one run; non-200 answers are errors.
  double rate = 0;
  double p50_us = 0;
  double p99_us = 0;
  std::size_t errors = 0;
};

// `concurrency` keep-alive connections, each sending `request` back to back, until `total`
// responses arrived. One thread, so the generator costs the same for every server.
class load_generator {
 public:
  load_generator(int port, std::string request, int concurrency, std::size_t total)
      : port_(port), request_(std::move(request)), total_(total) {
    conns_.resize(static_cast<std::size_t>(concurrency));
    latencies_.reserve(total);
  }

  load_result run() {
    for (auto& c : conns_) {
      c = std::make_unique<conn>(io_);
      c->socket.connect(boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port_)));
      c->socket.set_option(boost::asio::ip::tcp::no_delay(true));
    }
    auto t0 = std::chrono::steady_clock::now();
    for (auto& c : conns_) send(*c);
    io_.run();
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    load_result r;
    r.rate = static_cast<double>(latencies_.size()) / secs;
    std::sort(latencies_.begin(), latencies_.end());
    auto pct = [&](double p) {
      return latencies_.empty() ? 0.0 : latencies_[std::min(latencies_.size() - 1, static_cast<std::size_t>(p * static_cast<double>(latencies_.size())))];
    };
    r.p50_us = pct(0.50);
    r.p99_us = pct(0.99);
    r.errors = errors_;
    return r;
  }

 private:
  struct conn {
    explicit conn(boost::asio::io_context& io) : socket(io) {}
    boost::asio::ip::tcp::socket socket;
    boost::beast::flat_buffer buffer;
    std::optional<boost::beast::http::response_parser<boost::beast::http::string_body>> parser;
    std::chrono::steady_clock::time_point start;
  };

  void send(conn& c) {
    if (sent_ >= total_) return;
    ++sent_;
    c.start = std::chrono::steady_clock::now();
    boost::asio::async_write(c.socket, boost::asio::buffer(request_), [this, &c](boost::beast::error_code ec, std::size_t) {
      if (ec) return fail();
      c.parser.emplace();
      c.parser->body_limit(1 << 30);
      boost::beast::http::async_read(c.socket, c.buffer, *c.parser, [this, &c](boost::beast::error_code e, std::size_t) {
        if (e) return fail();
        if (c.parser->get().result_int() != 200) ++errors_;
        latencies_.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - c.start).count());
        send(c);
      });
    });
  }
  void fail() { ++errors_; }

  boost::asio::io_context io_;
  int port_;
  std::string request_;
  std::size_t total_;
  std::size_t sent_ = 0;
  std::size_t errors_ = 0;
  std::vector<std::unique_ptr<conn>> conns_;
  std::vector<double> latencies_;
};

inline std::string http_request(std::string_view method, std::string_view target, std::string_view body,
                         std::string_view extra_headers = "") {
  std::string s;
  s.append(method).append(" ").append(target).append(" HTTP/1.1\r\nHost: 127.0.0.1\r\n");
  s.append(extra_headers);
  if (method == "POST") s.append("Content-Length: ").append(std::to_string(body.size())).append("\r\n");
  s.append("\r\n").append(body);
  return s;
}

}  // namespace bench
