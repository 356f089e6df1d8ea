// SPDX-License-Identifier: Apache-2.0
// bench_soak: N keep-alive connections send M inference requests in total to a fresh
// inferwire-server, over HTTP or gRPC; the server's resident memory is sampled before (after a
// warm-up), during and after. Prints errors and RSS growth against the warm-up baseline.
//
//   bench_soak [connections=1000] [requests=1000000] [http|grpc|both=both]
// Over gRPC every connection is its own channel with one ModelInfer outstanding at a time.
#include "bench_process.hpp"

#include "grpc_service.grpc.pb.h"

#include <grpcpp/grpcpp.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>

#include <atomic>
#include <cstdio>
#include <memory>

#include <sys/resource.h>

// Every benchmark's code is one translation unit (CMakeLists.txt): its names stay in its own
// namespace, and bench_soak's main() calls run().
namespace bench_soak {

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

// Samples the server's peak RSS while `work` runs.
template <class F>
void sampled(pid_t pid, std::uint64_t& peak_kib, F work) {
  std::atomic<bool> running{true};
  std::thread sampler([&] {
    while (running) {
      peak_kib = std::max(peak_kib, rss_kib(pid));
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  });
  work();
  running = false;
  sampler.join();
}

// Runs `total` HTTP requests over `connections` connections.
long run_http(int port, pid_t pid, int connections, long total, std::uint64_t& peak_kib) {
  bench::net::io_context io(1);
  shared s;
  s.remaining = total;
  const bench::tcp::endpoint ep(bench::net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port));
  for (int i = 0; i < connections; ++i) std::make_shared<client>(io, s)->start(ep);
  sampled(pid, peak_kib, [&] { io.run(); });
  if (s.done + s.errors < total) s.errors += total - s.done - s.errors;
  return s.errors;
}

namespace pb = ::inference;

pb::ModelInferRequest grpc_request() {
  pb::ModelInferRequest q;
  q.set_model_name("simple");
  for (int k = 0; k < 2; ++k) {
    auto* in = q.add_inputs();
    in->set_name(k == 0 ? "INPUT0" : "INPUT1");
    in->set_datatype("INT32");
    in->add_shape(1);
    in->add_shape(16);
    std::int32_t v[16];
    for (int i = 0; i < 16; ++i) v[i] = k == 0 ? i : 1;
    q.add_raw_input_contents(std::string(reinterpret_cast<const char*>(v), sizeof v));
  }
  return q;
}

// One outstanding ModelInfer on one channel.
struct grpc_slot {
  std::unique_ptr<pb::GRPCInferenceService::Stub> stub;
  std::unique_ptr<grpc::ClientContext> ctx;
  pb::ModelInferResponse response;
  grpc::Status status;
  std::unique_ptr<grpc::ClientAsyncResponseReader<pb::ModelInferResponse>> call;
};

// Runs `total` gRPC requests over `connections` channels, one completion queue.
long run_grpc(int port, pid_t pid, int connections, long total, std::uint64_t& peak_kib) {
  const pb::ModelInferRequest q = grpc_request();
  grpc::CompletionQueue cq;
  std::vector<grpc_slot> slots(static_cast<std::size_t>(connections));
  long errors = 0, done = 0, started = 0;
  auto issue = [&](grpc_slot& s) {
    s.ctx = std::make_unique<grpc::ClientContext>();
    s.ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    s.call = s.stub->AsyncModelInfer(s.ctx.get(), q, &cq);
    s.call->Finish(&s.response, &s.status, &s);
    ++started;
  };
  sampled(pid, peak_kib, [&] {
    for (auto& s : slots) {
      grpc::ChannelArguments args;
      args.SetInt("grpc.use_local_subchannel_pool", 1);  // a connection of its own
      s.stub = pb::GRPCInferenceService::NewStub(grpc::CreateCustomChannel(
          "127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials(), args));
      if (started < total) issue(s);
    }
    void* tag = nullptr;
    bool ok = false;
    while (done + errors < started && cq.Next(&tag, &ok)) {
      auto& s = *static_cast<grpc_slot*>(tag);
      if (ok && s.status.ok() && s.response.raw_output_contents_size() == 2) ++done;
      else ++errors;
      if (started < total) issue(s);
    }
  });
  cq.Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (cq.Next(&tag, &ok)) {
  }
  return errors + (total - done - errors);
}

// One soak over `transport`: a fresh server, a warm-up, the soak, the figures.
int soak(const std::string& transport, int connections, long requests) {
  pid_t pid = -1;
  const std::string log = "/tmp/inferwire-soak-" + std::to_string(::getpid()) + ".log";
  const bool grpc = transport == "grpc";
  const int grpc_port = grpc ? bench::free_port() : 0;
  std::vector<std::string> extra;
  if (grpc) extra = {"--allow-grpc=true", "--grpc-port", std::to_string(grpc_port)};
  const int http_port = bench::start_reference_server(INFERWIRE_SERVER_PATH, log, pid, extra);
  if (http_port == 0 || (grpc && !bench::wait_for_port(grpc_port))) {
    std::fprintf(stderr, "bench_soak: the server did not start (see %s)\n", log.c_str());
    return 1;
  }
  auto run = [&](long total, std::uint64_t& peak) {
    return grpc ? run_grpc(grpc_port, pid, connections, total, peak)
                : run_http(http_port, pid, connections, total, peak);
  };
  const std::uint64_t start_kib = rss_kib(pid);
  std::uint64_t warm_peak = 0, soak_peak = 0;
  const long warm = std::max<long>(requests / 20, connections);
  const auto t0 = std::chrono::steady_clock::now();
  long errors = run(warm, warm_peak);
  const std::uint64_t before_kib = rss_kib(pid);
  const auto t1 = std::chrono::steady_clock::now();
  errors += run(requests, soak_peak);
  const auto t2 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const std::uint64_t after_kib = rss_kib(pid);
  bench::stop(pid);

  const double secs = std::chrono::duration<double>(t2 - t1).count();
  std::printf("bench_soak: %s, %d connections, %ld requests after %ld warm-up requests (%.1f s warm-up)\n",
              grpc ? "gRPC" : "HTTP", connections, requests, warm, std::chrono::duration<double>(t1 - t0).count());
  std::printf("  throughput        %.0f req/s over %.1f s\n", static_cast<double>(requests) / secs, secs);
  std::printf("  errors            %ld\n", errors);
  std::printf("  RSS at start      %.1f MiB\n", static_cast<double>(start_kib) / 1024);
  std::printf("  RSS after warm-up %.1f MiB (baseline)\n", static_cast<double>(before_kib) / 1024);
  std::printf("  RSS peak (soak)   %.1f MiB, %.3fx baseline\n", static_cast<double>(soak_peak) / 1024,
              static_cast<double>(soak_peak) / static_cast<double>(before_kib));
  std::printf("  RSS after         %.1f MiB, growth %+.1f %% of baseline\n", static_cast<double>(after_kib) / 1024,
              100.0 * (static_cast<double>(after_kib) - static_cast<double>(before_kib)) /
                  static_cast<double>(before_kib));
  std::fflush(stdout);
  return errors == 0 ? 0 : 1;
}

}  // namespace

int run(int argc, char** argv) {
  const int connections = argc > 1 ? std::atoi(argv[1]) : 1000;
  const long requests = argc > 2 ? std::atol(argv[2]) : 1000000;
  const std::string which = argc > 3 ? argv[3] : "both";
  if (connections <= 0 || requests <= 0 || (which != "http" && which != "grpc" && which != "both")) {
    std::fprintf(stderr, "usage: bench_soak [connections>0] [requests>0] [http|grpc|both]\n");
    return 2;
  }
  rlimit rl{};
  ::getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &rl);
  int rc = 0;
  if (which != "grpc") rc |= soak("http", connections, requests);
  if (which != "http") rc |= soak("grpc", connections, requests);
  return rc;
}

}  // namespace bench_soak
