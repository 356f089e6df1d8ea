// SPDX-License-Identifier: Apache-2.0
// bench_http_client: the HTTP client SDK against a minimal hand-written Beast loop, both
// driving the reference server's `simple` model in the same run.
//
//   - the SDK: http::client::async_infer with typed inputs, decoding every reply into typed
//     output views (and, at concurrency 1, the blocking form too);
//   - the baseline: per connection, async_write of the very bytes the SDK sends (checked
//     byte for byte before measuring), then beast::http::async_read of the reply, nothing more.
//
// Both run on one io_context on one thread, with 1 and 16 keep-alive connections, in alternating
// rounds; ratios are the medians of each round's ratio. The client's CPU per request comes from
// getrusage (the server is another process). Targets: SDK >= 0.9x the baseline's requests/s
// with one connection, >= 0.95x with 16.
//
//   bench_http_client [--requests N] [--rounds R] [--server PATH] [--concurrency 1|16]
//                     [--only sdk|loop]
// --only measures one side alone (for a profiler) and prints its figures without ratios.
#include "bench_process.hpp"

#include <inferwire/http/client.hpp>

#include <boost/asio/read.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <numeric>

// Every benchmark's code is one translation unit (CMakeLists.txt): its names stay in its own
// namespace, and bench_http_client's main() calls run().
namespace bench_http_client {


namespace http = inferwire::http;
namespace v2 = inferwire::v2;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using namespace bench;
using clock_type = std::chrono::steady_clock;

namespace {

struct simple_request {
  std::vector<std::int32_t> a = std::vector<std::int32_t>(16), b = std::vector<std::int32_t>(16, 1);
  v2::infer_request request;
  simple_request() {
    std::iota(a.begin(), a.end(), 0);
    request.inputs.push_back(v2::make_input("INPUT0", a, {1, 16}));
    request.inputs.push_back(v2::make_input("INPUT1", b, {1, 16}));
  }
};

/// The bytes the SDK sends for `request` (read back from a socket the SDK talks to).
std::string capture_sdk_request(const v2::infer_request& request, const std::string& host_field) {
  net::io_context ioc;
  tcp::acceptor acceptor(ioc, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
  std::string captured;
  std::thread t([&] {
    tcp::socket s(ioc);
    acceptor.accept(s);
    net::streambuf buf;
    std::size_t n = net::read_until(s, buf, "\r\n\r\n");
    std::string head(net::buffers_begin(buf.data()), net::buffers_begin(buf.data()) + n);
    auto p = head.find("\r\nContent-Length: ") + 2;
    std::size_t length = std::stoul(head.substr(p + 16));
    if (buf.size() < n + length) net::read(s, buf, net::transfer_exactly(n + length - buf.size()));
    captured.assign(net::buffers_begin(buf.data()), net::buffers_begin(buf.data()) + n + length);
    net::write(s, net::buffer(std::string("HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n")));
  });
  {
    http::client c("127.0.0.1", std::to_string(acceptor.local_endpoint().port()));
    http::error_code ec;
    c.infer("simple", request, ec);
  }
  t.join();
  // The Host field names the capture port; put the server's in its place.
  auto from = captured.find("Host: ") + 6;
  auto to = captured.find("\r\n", from);
  captured.replace(from, to - from, host_field);
  return captured;
}

double sdk_async_rate(int port, int concurrency, std::size_t requests,
                      const v2::infer_request& request, std::size_t& errors, double& cpu_us) {
  net::io_context ioc(1);
  http::client_options o;
  o.max_connections = static_cast<std::size_t>(concurrency);
  http::client c(ioc.get_executor(), "127.0.0.1", std::to_string(port), o);
  std::size_t started = 0, done = 0, limit = static_cast<std::size_t>(concurrency);
  errors = 0;
  std::function<void()> next = [&] {
    if (started == limit) return;
    ++started;
    c.async_infer("simple", request, [&](http::error_code ec, http::infer_result r) {
      ++done;
      if (ec || r.as<std::int32_t>("OUTPUT0")[15] != 16) ++errors;
      next();
    });
  };
  // Warm the connections up (one request each), then measure.
  for (int i = 0; i < concurrency; ++i) next();
  ioc.run();
  ioc.restart();
  started = done = 0;
  limit = requests;
  const double cpu0 = bench::self_cpu_seconds();
  auto t0 = clock_type::now();
  for (int i = 0; i < concurrency; ++i) next();
  ioc.run();
  double secs = std::chrono::duration<double>(clock_type::now() - t0).count();
  cpu_us = (bench::self_cpu_seconds() - cpu0) / static_cast<double>(done) * 1e6;
  return double(done) / secs;
}

double sdk_blocking_rate(int port, std::size_t requests, const v2::infer_request& request,
                         std::size_t& errors) {
  http::client c("127.0.0.1", std::to_string(port));
  errors = 0;
  c.infer("simple", request);
  auto t0 = clock_type::now();
  for (std::size_t i = 0; i < requests; ++i) {
    http::error_code ec;
    auto r = c.infer("simple", request, ec);
    if (ec || r.as<std::int32_t>("OUTPUT0")[15] != 16) ++errors;
  }
  double secs = std::chrono::duration<double>(clock_type::now() - t0).count();
  return double(requests) / secs;
}

/// The minimal loop: write the bytes, read the reply with Beast, repeat.
class beast_loop {
 public:
  beast_loop(net::io_context& ioc, const std::string& bytes, std::size_t& budget,
             std::size_t& done, std::size_t& errors)
      : stream_(ioc), bytes_(bytes), budget_(budget), done_(done), errors_(errors) {}
  void connect(const tcp::endpoint& ep) {
    stream_.connect(ep);
    stream_.socket().set_option(tcp::no_delay(true));
  }
  void next() {
    if (budget_ == 0) return;
    --budget_;
    net::async_write(stream_, net::buffer(bytes_), [this](beast::error_code ec, std::size_t) {
      if (ec) return fail();
      parser_.emplace();
      parser_->body_limit(1 << 20);
      bhttp::async_read(stream_, buffer_, *parser_, [this](beast::error_code e, std::size_t) {
        if (e) return fail();
        ++done_;
        if (parser_->get().result_int() != 200) ++errors_;
        next();
      });
    });
  }

 private:
  void fail() { ++errors_; }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::response_parser<bhttp::string_body>> parser_;
  const std::string& bytes_;
  std::size_t& budget_;
  std::size_t& done_;
  std::size_t& errors_;
};

double baseline_rate(int port, int concurrency, std::size_t requests, const std::string& bytes,
                     std::size_t& errors, double& cpu_us) {
  net::io_context ioc(1);
  tcp::endpoint ep(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port));
  std::size_t budget = static_cast<std::size_t>(concurrency), done = 0;
  errors = 0;
  std::vector<std::unique_ptr<beast_loop>> loops;
  for (int i = 0; i < concurrency; ++i)
    loops.push_back(std::make_unique<beast_loop>(ioc, bytes, budget, done, errors));
  for (auto& l : loops) {
    l->connect(ep);
    l->next();  // one warm-up request each
  }
  ioc.run();
  ioc.restart();
  budget = requests;
  done = 0;
  const double cpu0 = bench::self_cpu_seconds();
  auto t0 = clock_type::now();
  for (auto& l : loops) l->next();
  ioc.run();
  double secs = std::chrono::duration<double>(clock_type::now() - t0).count();
  cpu_us = (bench::self_cpu_seconds() - cpu0) / static_cast<double>(done) * 1e6;
  return double(done) / secs;
}

}  // namespace

int run(int argc, char** argv) {
  std::size_t requests = 20000;
  int rounds = 5;  // one run moves by a tenth from round to round on a shared 2-core VM
  std::string server = INFERWIRE_SERVER_PATH;
  int only_concurrency = 0;
  std::string only;  // sdk | loop: one side alone
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--requests") requests = std::stoul(argv[i + 1]);
    else if (a == "--rounds") rounds = std::stoi(argv[i + 1]);
    else if (a == "--server") server = argv[i + 1];
    else if (a == "--concurrency") only_concurrency = std::stoi(argv[i + 1]);
    else if (a == "--only") only = argv[i + 1];
    else {
      std::fprintf(stderr, "usage: bench_http_client [--requests N] [--rounds R] [--server PATH] "
                           "[--concurrency 1|16] [--only sdk|loop]\n");
      return 2;
    }
  }
  signal(SIGPIPE, SIG_IGN);
  auto tmp = std::filesystem::temp_directory_path() / ("iw-bench-client-" + std::to_string(getpid()));
  std::filesystem::create_directories(tmp);
  std::string slog = (tmp / "server.log").string();
  pid_t spid = -1;
  int port = start_reference_server(server, slog, spid);
  if (!port) {
    std::fprintf(stderr, "inferwire-server did not start:\n%s\n", read_file(slog).c_str());
    return 1;
  }

  simple_request sr;
  const std::string bytes =
      capture_sdk_request(sr.request, "127.0.0.1:" + std::to_string(port));
  std::printf("request: %zu bytes, the same for the SDK and the baseline (captured from the SDK)\n",
              bytes.size());

  int status = 0;
  if (!only.empty()) {
    const int c = only_concurrency ? only_concurrency : 16;
    for (int r = 0; r < rounds; ++r) {
      std::size_t errors = 0;
      double cpu = 0;
      const double rate = only == "loop" ? baseline_rate(port, c, requests, bytes, errors, cpu)
                                         : sdk_async_rate(port, c, requests, sr.request, errors, cpu);
      std::printf("c=%-2d %s: %9.0f req/s  client CPU %5.1f us/req, errors %zu\n", c, only.c_str(), rate, cpu, errors);
      if (errors) status = 1;
    }
    stop(spid);
    std::filesystem::remove_all(tmp);
    return status;
  }
  for (int c : {1, 16}) {
    if (only_concurrency && c != only_concurrency) continue;
    std::vector<double> sdk, base, sdk_cpu, base_cpu, rate_ratio, cpu_ratio;
    std::size_t e1 = 0, e2 = 0, total_errors = 0;
    for (int r = 0; r < rounds; ++r) {
      double bc = 0, sc = 0;
      base.push_back(baseline_rate(port, c, requests, bytes, e2, bc));
      sdk.push_back(sdk_async_rate(port, c, requests, sr.request, e1, sc));
      base_cpu.push_back(bc);
      sdk_cpu.push_back(sc);
      rate_ratio.push_back(sdk.back() / base.back());
      cpu_ratio.push_back(sc / bc);
      total_errors += e1 + e2;
    }
    const double target = c == 1 ? 0.9 : 0.95;
    std::printf("c=%-2d SDK async_infer : %9.0f req/s  client CPU %5.1f us/req\n", c, median(sdk), median(sdk_cpu));
    std::printf("c=%-2d Beast loop      : %9.0f req/s  client CPU %5.1f us/req\n", c, median(base), median(base_cpu));
    std::printf("c=%-2d ratio           : %.2fx the minimal loop (target >= %.2f), client CPU %.2fx, errors %zu\n", c,
                median(rate_ratio), target, median(cpu_ratio), total_errors);
    if (total_errors) status = 1;
    if (c == 1) {
      std::size_t e = 0;
      double blocking = sdk_blocking_rate(port, requests, sr.request, e);
      std::printf("c=1  SDK blocking infer: %9.0f req/s (%.2fx the loop), errors %zu\n", blocking,
                  blocking / median(base), e);
    }
  }
  stop(spid);
  std::filesystem::remove_all(tmp);
  return status;
}

}  // namespace bench_http_client
