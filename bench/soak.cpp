// bench_soak: N keep-alive connections send M inference requests in total to a fresh
// inferwire-server; the server's resident memory is sampled before (after a warm-up), during
// and after. Prints errors and RSS growth against the warm-up baseline.
//
//   bench_soak [connections=1000] [requests=1000000]
#include "bench_process.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>

#include <atomic>
#include <cstdio>
#include <memory>

#include <sys/resource.h>

namespace beast = boost::beast;
namespace bhttp = beast::http;

namespace {

std::uint64_t rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6));
  return 0;
}

std::string request_bytes() {
  std::string a, b;
  for (int i = 0; i < 16; ++i) {
    a += (i ? "," : "") + std::to_string(i);
    b += i ? ",1" : "1";
  }
  const std::string body = R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,16],"data":[)" + a +
                           R"(]},{"name":"INPUT1","datatype":"INT32","shape":[1,16],"data":[)" + b + "]}]}";
  return "POST /v2/models/simple/infer HTTP/1.1\r\nHost: soak\r\nContent-Type: application/json\r\n"
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

struct shared {
  std::string request = request_bytes();
  std::atomic<long> remaining{0};
  std::atomic<long> done{0};
  std::atomic<long> errors{0};
};

class client : public std::enable_shared_from_this<client> {
 public:
  client(bench::net::io_context& io, shared& s) : socket_(io), s_(s) {}
  void start(const bench::tcp::endpoint& ep) {
    socket_.async_connect(ep, [self = shared_from_this()](beast::error_code ec) {
      if (ec) {
        ++self->s_.errors;
        return;
      }
      self->next();
    });
  }

 private:
  void next() {
    if (s_.remaining.fetch_sub(1) <= 0) return;
    bench::net::async_write(socket_, bench::net::buffer(s_.request),
                            [self = shared_from_this()](beast::error_code ec, std::size_t) {
                              if (ec) return self->fail();
                              self->parser_.emplace();
                              bhttp::async_read(self->socket_, self->buffer_, *self->parser_,
                                                [self](beast::error_code e, std::size_t) {
                                                  if (e || self->parser_->get().result_int() != 200)
                                                    return self->fail();
                                                  ++self->s_.done;
                                                  self->next();
                                                });
                            });
  }
  void fail() { ++s_.errors; }

  bench::tcp::socket socket_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::response_parser<bhttp::string_body>> parser_;
  shared& s_;
};

// Runs `total` requests over `connections` connections; samples the server's RSS meanwhile.
long run(int port, pid_t pid, int connections, long total, std::uint64_t& peak_kib) {
  bench::net::io_context io(1);
  shared s;
  s.remaining = total;
  const bench::tcp::endpoint ep(bench::net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port));
  for (int i = 0; i < connections; ++i) std::make_shared<client>(io, s)->start(ep);
  std::atomic<bool> running{true};
  std::thread sampler([&] {
    while (running) {
      peak_kib = std::max(peak_kib, rss_kib(pid));
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  });
  io.run();
  running = false;
  sampler.join();
  if (s.done + s.errors < total) s.errors += total - s.done - s.errors;
  return s.errors;
}

}  // namespace

int main(int argc, char** argv) {
  const int connections = argc > 1 ? std::atoi(argv[1]) : 1000;
  const long requests = argc > 2 ? std::atol(argv[2]) : 1000000;
  rlimit rl{};
  ::getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &rl);

  pid_t pid = -1;
  const std::string log = "/tmp/inferwire-soak-" + std::to_string(::getpid()) + ".log";
  const int port = bench::start_reference_server(INFERWIRE_SERVER_PATH, log, pid);
  if (port == 0) {
    std::fprintf(stderr, "bench_soak: the server did not start (see %s)\n", log.c_str());
    return 1;
  }
  const std::uint64_t start_kib = rss_kib(pid);
  std::uint64_t warm_peak = 0, soak_peak = 0;
  const long warm = std::max<long>(requests / 20, connections);
  const auto t0 = std::chrono::steady_clock::now();
  long errors = run(port, pid, connections, warm, warm_peak);
  const std::uint64_t before_kib = rss_kib(pid);
  const auto t1 = std::chrono::steady_clock::now();
  errors += run(port, pid, connections, requests, soak_peak);
  const auto t2 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const std::uint64_t after_kib = rss_kib(pid);
  bench::stop(pid);

  const double secs = std::chrono::duration<double>(t2 - t1).count();
  std::printf("bench_soak: HTTP, %d connections, %ld requests after %ld warm-up requests (%.1f s warm-up)\n",
              connections, requests, warm, std::chrono::duration<double>(t1 - t0).count());
  std::printf("  throughput        %.0f req/s over %.1f s\n", static_cast<double>(requests) / secs, secs);
  std::printf("  errors            %ld\n", errors);
  std::printf("  RSS at start      %.1f MiB\n", static_cast<double>(start_kib) / 1024);
  std::printf("  RSS after warm-up %.1f MiB (baseline)\n", static_cast<double>(before_kib) / 1024);
  std::printf("  RSS peak (soak)   %.1f MiB, %.3fx baseline\n", static_cast<double>(soak_peak) / 1024,
              static_cast<double>(soak_peak) / static_cast<double>(before_kib));
  std::printf("  RSS after         %.1f MiB, growth %+.1f %% of baseline\n", static_cast<double>(after_kib) / 1024,
              100.0 * (static_cast<double>(after_kib) - static_cast<double>(before_kib)) /
                  static_cast<double>(before_kib));
  return errors == 0 ? 0 : 1;
}
